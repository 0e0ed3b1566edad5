//! The change feed (`GET docs` with `A-IM: Incremental Feed`) and the
//! partition-key ranges (`GET pkranges`) the SDKs read before scoping a
//! request to a range.
//!
//! The change feed is the latest version of each changed document, in the
//! order of its last change, read from the container's change log; its etag
//! is the LSN to resume after. A page never splits one transaction.

use std::time::SystemTime;

use engine::{ChangeKind, Document, Lsn, PartitionKey};
use partita::charge::Work;
use serde_json::{Value, json};

use super::Gateway;
use super::responses::{charge, child_rid, feed_body};
use crate::epk;
use crate::registry::CollEntry;
use crate::wire::{WireError, WireRequest, WireResponse, header, max_item_count};

/// The etag of the partition-key ranges, which never change.
const PKRANGES_ETAG: &str = "\"pkranges-1\"";
/// Most changes read from the log per step of a change-feed page.
const CHANGE_STEP: usize = 1000;

impl Gateway {
    pub(super) fn change_feed(
        &self,
        coll: &CollEntry,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let a_im = header(&req.headers, "a-im")?.unwrap_or_default();
        if !a_im.eq_ignore_ascii_case("Incremental Feed") {
            return Err(WireError::bad_request(format!(
                "A-IM {a_im:?} is not supported: Partita serves the latest-version change feed \
                 (A-IM: Incremental Feed)"
            )));
        }
        let key = self.partition_key(coll, req)?;
        // The Python SDK scopes a per-partition-key feed by EPK range.
        let epk_range = super::queries::epk_range(req)?;
        let since = match header(&req.headers, "if-modified-since")? {
            Some(date) => Some(
                httpdate::parse_http_date(date)
                    .map_err(|_| {
                        WireError::bad_request(format!(
                            "the If-Modified-Since header {date:?} is not an RFC 1123 date"
                        ))
                    })?
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0),
            ),
            None => None,
        };
        let start = match header(&req.headers, "if-none-match")? {
            None => 0,
            Some("*") => self.current_lsn(coll)?,
            Some(etag) => etag.trim_matches('"').parse::<u64>().map_err(|_| {
                WireError::bad_request(format!(
                    "the If-None-Match header {etag:?} is not a change-feed etag this server \
                     issued (a quoted LSN such as \"7\"), nor *"
                ))
            })?,
        };
        let max_items = max_item_count(&req.headers)?.unwrap_or(usize::MAX);
        // Latest version of each changed document, in the order of its last
        // change; a document deleted after its last write is left out.
        let mut docs: Vec<(Lsn, (PartitionKey, String), Option<Document>)> = Vec::new();
        let mut last = start;
        let mut bytes = 0usize;
        let (mut docs_read, mut bytes_read) = (0u64, 0u64);
        'read: loop {
            let changes = coll.container.read_changes(Lsn(last), CHANGE_STEP)?;
            if changes.is_empty() {
                break;
            }
            let mut i = 0;
            while i < changes.len() {
                // One transaction at a time: a page never splits one.
                let lsn = changes[i].lsn;
                let end = changes[i..]
                    .iter()
                    .position(|c| c.lsn != lsn)
                    .map_or(changes.len(), |n| i + n);
                let mut txn_docs = Vec::new();
                let mut txn_bytes = 0;
                for change in &changes[i..end] {
                    if key
                        .as_ref()
                        .is_some_and(|k| !change.partition_key.starts_with(k))
                    {
                        continue;
                    }
                    if let Some((start, end)) = &epk_range
                        && !epk::in_range(
                            &epk::effective_partition_key(&change.partition_key),
                            start,
                            end,
                        )
                    {
                        continue;
                    }
                    let document = match change.kind {
                        ChangeKind::Delete => None,
                        ChangeKind::Create | ChangeKind::Replace => change.document.clone(),
                    };
                    if let (Some(since), Some(doc)) = (since, &document)
                        && doc.ts() < since
                    {
                        continue;
                    }
                    if let Some(doc) = &document {
                        txn_bytes += doc.value().to_string().len();
                    }
                    txn_docs.push((
                        lsn,
                        (change.partition_key.clone(), change.id.clone()),
                        document,
                    ));
                }
                let live = docs.iter().filter(|d| d.2.is_some()).count();
                if live > 0
                    && (live + txn_docs.len() > max_items
                        || bytes + txn_bytes > self.limits.max_response_bytes)
                {
                    break 'read;
                }
                for entry in txn_docs {
                    docs.retain(|d| d.1 != entry.1);
                    if entry.2.is_some() {
                        docs_read += 1;
                        docs.push(entry);
                    }
                }
                bytes += txn_bytes;
                bytes_read += txn_bytes as u64;
                last = lsn.0;
                i = end;
            }
        }
        let etag = format!("\"{last}\"");
        let items: Vec<Value> = docs
            .into_iter()
            .filter_map(|(_, _, doc)| doc.map(Document::into_value))
            .collect();
        if items.is_empty() {
            return Ok(WireResponse::empty(304).with("etag", etag));
        }
        let (body, _) = feed_body(&coll.rid, "Documents", &items, usize::MAX);
        let work = Work {
            docs_read,
            bytes_read,
            ..Work::default()
        };
        Ok(WireResponse {
            status: 200,
            headers: Vec::new(),
            body,
        }
        .with("etag", etag)
        .with("x-ms-item-count", items.len().to_string())
        .with("x-ms-request-charge", charge(work.request_charge())))
    }

    /// The container's latest LSN (the change feed's "from now").
    fn current_lsn(&self, coll: &CollEntry) -> Result<u64, WireError> {
        let mut last = 0;
        loop {
            let changes = coll.container.read_changes(Lsn(last), 10 * CHANGE_STEP)?;
            match changes.last() {
                Some(change) => last = change.lsn.0,
                None => return Ok(last),
            }
        }
    }
}

/// The conflicts feed (`Conflicts`), read or queried: always empty, as
/// conflicts arise only between regions that accept writes concurrently.
pub(super) fn conflicts(
    coll: &CollEntry,
    query: Option<&WireRequest>,
) -> Result<WireResponse, WireError> {
    super::queries::metadata_feed(&coll.rid, "Conflicts", Vec::new(), query)
}

pub(super) fn pkranges(coll: &CollEntry, req: &WireRequest) -> Result<WireResponse, WireError> {
    if header(&req.headers, "if-none-match")? == Some(PKRANGES_ETAG) {
        return Ok(WireResponse::empty(304).with("etag", PKRANGES_ETAG));
    }
    let rid = child_rid(&coll.rid, 0x5, 0);
    let range = json!({
        "id": "0", "_rid": rid, "_self": format!("{}pkranges/{rid}/", coll.self_link),
        "_etag": PKRANGES_ETAG, "_ts": coll.ts,
        "minInclusive": "", "maxExclusive": "FF", "ridPrefix": 0, "throughputFraction": 1.0,
        "status": "online", "parents": []
    });
    Ok(WireResponse::json(
        200,
        &json!({"_rid": coll.rid, "PartitionKeyRanges": [range], "_count": 1}),
    )
    .with("etag", PKRANGES_ETAG))
}
