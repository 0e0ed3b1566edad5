//! Master-key authentication, as Cosmos DB's gateway does it.
//!
//! A client signs every request with HMAC-SHA256 under the account key:
//!
//! ```text
//!   sig = base64(HMAC_SHA256(base64decode(key),
//!         lower(verb) \n lower(resourceType) \n resourceLink \n lower(x-ms-date) \n lower(date) \n))
//!   authorization: urlencode("type=master&ver=1.0&sig=" + sig)
//! ```
//!
//! The resource type and link come from the path: a feed (`/dbs/d/colls`,
//! odd segment count) is signed as its last segment under the parent's link;
//! a resource (`/dbs/d`, even count) as its second-to-last segment under its
//! own link; a rid-based path (`dbs/{dbRid}/colls/{collRid}/docs/{docRid}`)
//! under only its last rid, lower-cased. The server recomputes the signature from what it received and
//! compares in constant time; a date more than 15 minutes from the server's
//! clock is refused too, so a captured request cannot be replayed later.

use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use hmac::{Hmac, Mac};
use hyper::HeaderMap;
use sha2::Sha256;

use super::wire::{WireError, header};

/// The Cosmos DB emulator's well-known key, the default of `partita serve`
/// (every SDK's emulator samples use it).
pub const EMULATOR_KEY: &str =
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==";

/// How far a request's date may be from the server's clock.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(15 * 60);

/// An account key (the base64 text clients are given, decoded), kept as
/// the HMAC state after absorbing the key: every request's signature starts
/// from a copy of it instead of hashing the key's pads again.
#[derive(Clone)]
pub struct MasterKey(Hmac<Sha256>);

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(..)")
    }
}

/// The key given is not base64.
#[derive(Debug, thiserror::Error)]
#[error("the account key must be base64 text (such as the emulator's key): {0}")]
pub struct BadKey(#[from] base64::DecodeError);

impl MasterKey {
    /// Decodes a key given as base64 text.
    ///
    /// # Errors
    /// [`BadKey`] when it is not base64.
    pub fn from_base64(text: &str) -> Result<MasterKey, BadKey> {
        let key = STANDARD.decode(text.trim())?;
        Ok(MasterKey(
            Hmac::<Sha256>::new_from_slice(&key).expect("HMAC accepts keys of any length"),
        ))
    }

    /// The HMAC of a request's string to sign (see the module docs).
    fn mac(
        &self,
        verb: &str,
        resource_type: &str,
        resource_link: &str,
        date: &str,
    ) -> Hmac<Sha256> {
        let mut mac = self.0.clone();
        update_lowercase(&mut mac, verb);
        mac.update(b"\n");
        update_lowercase(&mut mac, resource_type);
        mac.update(b"\n");
        mac.update(resource_link.as_bytes());
        mac.update(b"\n");
        update_lowercase(&mut mac, date);
        mac.update(b"\n\n");
        mac
    }

    /// The signature of a request, as a client computes it (base64).
    pub fn sign(&self, verb: &str, resource_type: &str, resource_link: &str, date: &str) -> String {
        let mac = self.mac(verb, resource_type, resource_link, date);
        STANDARD.encode(mac.finalize().into_bytes())
    }

    /// The `authorization` header value a client sends (percent-encoded).
    pub fn authorization(
        &self,
        verb: &str,
        resource_type: &str,
        resource_link: &str,
        date: &str,
    ) -> String {
        let token = format!(
            "type=master&ver=1.0&sig={}",
            self.sign(verb, resource_type, resource_link, date)
        );
        percent_encoding::utf8_percent_encode(&token, percent_encoding::NON_ALPHANUMERIC)
            .to_string()
    }
}

/// Feeds `text` lowercased (ASCII) to the HMAC without allocating.
fn update_lowercase(mac: &mut Hmac<Sha256>, text: &str) {
    let mut chunk = [0u8; 64];
    for part in text.as_bytes().chunks(chunk.len()) {
        let lower = &mut chunk[..part.len()];
        lower.copy_from_slice(part);
        lower.make_ascii_lowercase();
        mac.update(lower);
    }
}

/// The resource type and link a client signs for a path's (decoded) segments.
///
/// A rid-based path (see [`is_rid_based`]) is signed under only its last
/// rid, lower-cased: the leaf's for a resource (`docs`, `ugfydaaaaas...`),
/// the parent's for a feed, create or query (`POST dbs/{rid}/colls/{rid}/docs`
/// signs the container's rid), as the Python SDK computes it
/// (`_base.py: GetResourceIdOrFullNameFromLink`).
pub fn resource_of(segments: &[String]) -> (String, String) {
    let (kind, link) = name_resource_of(segments);
    if is_rid_based(segments) {
        let rid = link.rsplit('/').next().unwrap_or_default();
        return (kind, rid.to_ascii_lowercase());
    }
    (kind, link)
}

fn name_resource_of(segments: &[String]) -> (String, String) {
    // `dbs/d/colls/c/operations/partitionkeydelete` is signed as the
    // collection (the SDKs rewrite its resource type to `colls`).
    if let [dbs, _, colls, _, operations, _] = segments
        && dbs == "dbs"
        && colls == "colls"
        && operations == "operations"
    {
        return ("colls".to_owned(), segments[..4].join("/"));
    }
    // An offer is addressed by its resource id, which clients sign
    // lower-cased (the feed `/offers` signs as "" like any root feed).
    if let [offers, rid] = segments
        && offers == "offers"
    {
        return ("offers".to_owned(), rid.to_lowercase());
    }
    match segments.len() {
        0 => (String::new(), String::new()),
        n if n % 2 == 1 => (segments[n - 1].clone(), segments[..n - 1].join("/")),
        n => (segments[n - 2].clone(), segments.join("/")),
    }
}

/// Whether a path addresses its resources by rid (`dbs/{dbRid}/...`) rather
/// than by name, as the Python SDK decides (`_base.py: IsNameBased`): its
/// database segment is 8 characters that decode as base64 (with `-` read as
/// `/`) to exactly 4 bytes.
pub fn is_rid_based(segments: &[String]) -> bool {
    matches!(segments, [dbs, db, ..] if dbs == "dbs" && is_database_rid(db))
}

/// Whether one path segment reads as a database rid (see [`is_rid_based`]).
pub(crate) fn is_database_rid(segment: &str) -> bool {
    // Python's decoder accepts nonzero bits after the last byte.
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    );
    segment.len() == 8
        && LENIENT
            .decode(segment.replace('-', "/"))
            .is_ok_and(|bytes| bytes.len() == 4)
}

/// Checks a request's signature and date.
///
/// # Errors
/// 401 naming what was wrong: no or malformed `authorization`, no or
/// unparseable date, a date off by more than [`MAX_CLOCK_SKEW`], a wrong
/// signature.
pub(crate) fn verify(
    key: &MasterKey,
    method: &str,
    segments: &[String],
    headers: &HeaderMap,
    now: SystemTime,
) -> Result<(), WireError> {
    let authorization = header(headers, "authorization")?
        .ok_or_else(|| WireError::unauthorized("Required header 'authorization' is missing"))?;
    let decoded = percent_encoding::percent_decode_str(authorization)
        .decode_utf8()
        .map_err(|_| WireError::unauthorized("the authorization header is not UTF-8"))?;
    let (mut kind, mut sig) = (None, None);
    for part in decoded.split('&') {
        match part.split_once('=') {
            Some(("type", v)) => kind = Some(v),
            Some(("sig", v)) => sig = Some(v),
            _ => {}
        }
    }
    if kind != Some("master") {
        return Err(WireError::unauthorized(format!(
            "the authorization header must be a master-key token (type=master), not {:?}",
            kind.unwrap_or("")
        )));
    }
    let sig = sig
        .and_then(|s| STANDARD.decode(s).ok())
        .ok_or_else(|| WireError::unauthorized("the authorization header has no base64 sig"))?;
    let date = match header(headers, "x-ms-date")? {
        Some(d) => d,
        None => header(headers, "date")?.ok_or_else(|| {
            WireError::unauthorized("the request has neither an x-ms-date nor a date header")
        })?,
    };
    let sent = httpdate::parse_http_date(date).map_err(|_| {
        WireError::unauthorized(format!(
            "the date {date:?} is not an RFC 1123 date such as \"Sun, 22 Nov 2026 02:43:42 GMT\""
        ))
    })?;
    let skew = now
        .duration_since(sent)
        .or_else(|_| sent.duration_since(now))
        .unwrap_or_default();
    if skew > MAX_CLOCK_SKEW {
        return Err(WireError::unauthorized(format!(
            "the request date {date:?} is {}s away from the server's clock (at most {}s allowed)",
            skew.as_secs(),
            MAX_CLOCK_SKEW.as_secs()
        )));
    }
    let (resource_type, resource_link) = resource_of(segments);
    key.mac(method, &resource_type, &resource_link, date)
        .verify_slice(&sig)
        .map_err(|_| {
            WireError::unauthorized(format!(
                "The input authorization token can't serve the request. The wrong key is being \
             used or the expected payload is not built as per the protocol. The server signed: \
             '{}\\n{}\\n{}\\n{}\\n\\n'",
                method.to_ascii_lowercase(),
                resource_type.to_ascii_lowercase(),
                resource_link,
                date.to_ascii_lowercase()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segments(path: &str) -> Vec<String> {
        path.split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn resource_type_and_link_follow_the_path_shape() {
        let cases = [
            ("/", "", ""),
            ("/dbs", "dbs", ""),
            ("/dbs/d", "dbs", "dbs/d"),
            ("/dbs/d/colls", "colls", "dbs/d"),
            ("/dbs/d/colls/c/docs/", "docs", "dbs/d/colls/c"),
            ("/dbs/d/colls/c/docs/a", "docs", "dbs/d/colls/c/docs/a"),
            (
                "/dbs/d/colls/c/sprocs/sp",
                "sprocs",
                "dbs/d/colls/c/sprocs/sp",
            ),
            (
                "/dbs/d/colls/c/operations/partitionkeydelete",
                "colls",
                "dbs/d/colls/c",
            ),
            // Rid-based: the last rid, lower-cased.
            ("/dbs/AAAAAQ==", "dbs", "aaaaaq=="),
            ("/dbs/AAAAAQ==/colls", "colls", "aaaaaq=="),
            ("/dbs/AAAAAQ==/colls/AAAAAQAAAAI=", "colls", "aaaaaqaaaai="),
            (
                "/dbs/AAAAAQ==/colls/AAAAAQAAAAI=/docs/",
                "docs",
                "aaaaaqaaaai=",
            ),
            (
                "/dbs/UGFydA==/colls/UGFydAAAAAs=/docs/UGFydAAAAAsAAAAAAAAAAw==/",
                "docs",
                "ugfydaaaaasaaaaaaaaaaw==",
            ),
            (
                "/dbs/AAAAAQ==/colls/AAAAAQAAAAI=/sprocs/AAAAAQAAAAIBAAAAAAAAgA==",
                "sprocs",
                "aaaaaqaaaaibaaaaaaaaga==",
            ),
            (
                "/dbs/AAAAAQ==/colls/AAAAAQAAAAI=/operations/partitionkeydelete",
                "colls",
                "aaaaaqaaaai=",
            ),
            // Names of 8 characters that are not 4 bytes of base64 stay names.
            ("/dbs/partitas/colls/c", "colls", "dbs/partitas/colls/c"),
            ("/dbs/AAAAAA%3D/colls", "colls", "dbs/AAAAAA%3D"),
            ("/offers", "offers", ""),
            ("/offers/AbC+/", "offers", "abc+"),
        ];
        for (path, kind, link) in cases {
            assert_eq!(
                resource_of(&segments(path)),
                (kind.into(), link.into()),
                "{path}"
            );
        }
    }

    fn signed(key: &MasterKey, verb: &str, path: &str, date: &str) -> HeaderMap {
        let (kind, link) = resource_of(&segments(path));
        let mut headers = HeaderMap::new();
        headers.insert(
            "authorization",
            key.authorization(verb, &kind, &link, date).parse().unwrap(),
        );
        headers.insert("x-ms-date", date.parse().unwrap());
        headers
    }

    #[test]
    fn databases_rids_are_8_characters_of_4_bytes() {
        for rid in ["AAAAAQ==", "UGFydA==", "ab-cdA==", "AAAAAR=="] {
            assert!(is_database_rid(rid), "{rid}");
        }
        for name in [
            "partitas",
            "AAAAAQ=",
            "AAAAAAA=",
            "AAAAAQ===",
            "blog",
            "AAAA AA=",
        ] {
            assert!(!is_database_rid(name), "{name}");
        }
    }

    #[test]
    fn a_correct_signature_passes_and_anything_else_is_401() {
        let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
        let now = SystemTime::now();
        let date = httpdate::fmt_http_date(now);
        let path = "/dbs/d/colls/c/docs/a";
        let headers = signed(&key, "GET", path, &date);
        verify(&key, "GET", &segments(path), &headers, now).unwrap();
        // Another verb, path or key fails.
        assert_eq!(
            verify(&key, "DELETE", &segments(path), &headers, now)
                .unwrap_err()
                .status,
            401
        );
        let other = segments("/dbs/d/colls/c/docs/b");
        assert_eq!(
            verify(&key, "GET", &other, &headers, now)
                .unwrap_err()
                .status,
            401
        );
        let wrong = MasterKey::from_base64("c2VjcmV0").unwrap();
        assert_eq!(
            verify(&wrong, "GET", &segments(path), &headers, now)
                .unwrap_err()
                .status,
            401
        );
        // No header at all.
        let err = verify(&key, "GET", &segments(path), &HeaderMap::new(), now).unwrap_err();
        assert!(err.message.contains("authorization"), "{}", err.message);
    }

    #[test]
    fn a_stale_or_malformed_date_is_401() {
        let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
        let now = SystemTime::now();
        let old = httpdate::fmt_http_date(now - Duration::from_secs(16 * 60));
        let headers = signed(&key, "GET", "/", &old);
        let err = verify(&key, "GET", &[], &headers, now).unwrap_err();
        assert_eq!(err.status, 401);
        assert!(
            err.message.contains("away from the server's clock"),
            "{}",
            err.message
        );
        let headers = signed(&key, "GET", "/", "yesterday");
        let err = verify(&key, "GET", &[], &headers, now).unwrap_err();
        assert!(err.message.contains("RFC 1123"), "{}", err.message);
    }

    #[test]
    fn the_signature_matches_the_reference_algorithm() {
        // Computed independently with Python's hmac/hashlib over the same
        // string to sign ("get\ndbs\ndbs/partitadb\nsun, 22 nov 2026 02:43:42 gmt\n\n").
        let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
        let sig = key.sign(
            "GET",
            "dbs",
            "dbs/partitadb",
            "Sun, 22 Nov 2026 02:43:42 GMT",
        );
        assert_eq!(sig, EXPECTED_SIG);
    }

    #[test]
    fn long_mixed_case_fields_are_lowercased_across_chunks() {
        // Fields longer than the 64-byte lowercasing chunk sign like the
        // whole string lowercased at once.
        let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
        let kind = format!("Docs{}", "AbC".repeat(50));
        let date = format!("Sun, 22 Nov 2026 02:43:42 GMT{}", "XyZ".repeat(40));
        let link = "dbs/D/colls/C/docs/MixedCase";
        let whole = format!(
            "post\n{}\n{link}\n{}\n\n",
            kind.to_ascii_lowercase(),
            date.to_ascii_lowercase()
        );
        let mut reference =
            Hmac::<Sha256>::new_from_slice(&STANDARD.decode(EMULATOR_KEY).unwrap()).unwrap();
        reference.update(whole.as_bytes());
        assert_eq!(
            key.sign("POST", &kind, link, &date),
            STANDARD.encode(reference.finalize().into_bytes())
        );
    }

    const EXPECTED_SIG: &str = "I4Lb2C1g0400W52A9Ivsfw2jxpYLBGvhPvU2bUDgx3o=";
}
