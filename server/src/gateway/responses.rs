//! What every resource writes into a response: request charges, session
//! tokens and bodies of writes (`Prefer: return=minimal`), feed bodies cut
//! to a size, and the rids of a container's child resources.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::Gateway;
use crate::wire::{WireError, WireRequest, WireResponse, header};

impl Gateway {
    pub(super) fn write_token(&self) -> String {
        format!("0:-1#{}", self.session.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// A write's response: the document (or nothing, when the request says
    /// `Prefer: return=minimal`), its etag, charge and session token.
    pub(super) fn written(
        &self,
        status: u16,
        doc: Value,
        request_charge: f64,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let mut out = if return_minimal(req)? {
            WireResponse::empty(status)
        } else {
            WireResponse::json(status, &doc)
        };
        out = out
            .with("x-ms-request-charge", charge(request_charge))
            .with("x-ms-session-token", self.write_token());
        if let Some(etag) = doc.get("_etag").and_then(Value::as_str) {
            out = out.with("etag", etag);
        }
        Ok(out)
    }
}

pub(super) fn charge(ru: f64) -> String {
    format!("{ru:.2}")
}

/// A child resource's rid: the container's 8 bytes, then 8 bytes little
/// endian whose top nibble is the resource type (pkrange 5, udf 6, trigger
/// 7, sproc 8).
pub(super) fn child_rid(coll_rid: &str, kind: u8, n: u64) -> String {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    let mut bytes = STANDARD
        .decode(coll_rid.replace('-', "/"))
        .unwrap_or_default();
    bytes.resize(8, 0);
    let value = (n & 0x0fff_ffff_ffff_ffff) | (u64::from(kind) << 60);
    bytes.extend_from_slice(&value.to_le_bytes());
    STANDARD.encode(bytes).replace('/', "-")
}

/// `{"_rid": rid, "<envelope>": [items...], "_count": n}` with as many items
/// as fit in `max_bytes` (at least one); returns the body and how many fit.
pub(super) fn feed_body(
    rid: &str,
    envelope: &str,
    items: &[Value],
    max_bytes: usize,
) -> (Vec<u8>, usize) {
    let mut out = format!("{{\"_rid\":{},\"{envelope}\":[", json!(rid)).into_bytes();
    let mut count = 0;
    for item in items {
        let text = serde_json::to_vec(item).expect("a JSON value always serializes");
        if count > 0 && out.len() + text.len() + 32 > max_bytes {
            break;
        }
        if count > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&text);
        count += 1;
    }
    out.extend_from_slice(format!("],\"_count\":{count}}}").as_bytes());
    (out, count)
}

/// Whether the request asks for no resource in the response
/// (`Prefer: return=minimal`, sent by the SDKs' `no_response` options).
pub(super) fn return_minimal(req: &WireRequest) -> Result<bool, WireError> {
    Ok(header(&req.headers, "prefer")?.is_some_and(|p| {
        p.split([',', ';'])
            .any(|t| t.trim().eq_ignore_ascii_case("return=minimal"))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_rids_carry_the_container_and_the_type_nibble() {
        use base64::Engine;
        let coll = "UGFydAAAAAE=";
        let rid = child_rid(coll, 5, 0);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(rid.replace('-', "/"))
            .unwrap();
        assert_eq!(bytes.len(), 16);
        assert_eq!(&bytes[..8], b"Part\0\0\0\x01");
        assert_eq!(bytes[15] >> 4, 5);
    }

    #[test]
    fn feed_bodies_cut_at_the_limit_but_keep_one_item() {
        let items = vec![json!({"a": "x".repeat(100)}), json!({"b": 1})];
        let (body, n) = feed_body("r", "Documents", &items, 50);
        assert_eq!(n, 1);
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["_count"], 1);
        assert_eq!(v["Documents"][0], items[0]);
        let (_, n) = feed_body("r", "Documents", &items, usize::MAX);
        assert_eq!(n, 2);
    }
}
