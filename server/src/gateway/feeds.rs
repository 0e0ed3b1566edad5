//! The change feed (`GET docs` with `A-IM: Incremental Feed`) and the
//! partition-key ranges (`GET pkranges`) the SDKs read before scoping a
//! request to a range.
//!
//! The change feed is the latest version of each changed document, in the
//! order of its last change, read from the container's change log; its etag
//! is the LSN to resume after. A page never splits one transaction.

use std::time::SystemTime;

use engine::{Change, ChangeKind, Document, Lsn, PartitionKey};
use host_api::PartitionKeyPath;
use partita::charge::Work;
use serde_json::{Value, json};

use super::Gateway;
use super::responses::{charge, child_rid, feed_body};
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
        if a_im.eq_ignore_ascii_case("Full-Fidelity Feed") {
            return self.all_versions_feed(coll, req);
        }
        if !a_im.eq_ignore_ascii_case("Incremental Feed") {
            return Err(WireError::bad_request(format!(
                "A-IM {a_im:?} is not supported: Partita serves the latest-version change feed \
                 (A-IM: Incremental Feed) and the all-versions-and-deletes one (A-IM: \
                 Full-Fidelity Feed)"
            )));
        }
        let scope = Scope::of(self, coll, req)?;
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
        let start = self.feed_start(coll, req)?;
        let max_items = max_item_count(&req.headers)?.unwrap_or(usize::MAX);
        // Latest version of each changed document, in the order of its last
        // change; a document deleted after its last write is left out.
        let mut docs: Vec<(Lsn, (PartitionKey, String), Option<Document>)> = Vec::new();
        let mut bytes = 0usize;
        let mut docs_read = 0u64;
        let last = walk_transactions(coll, start, |lsn, changes| {
            let mut txn_docs = Vec::new();
            let mut txn_bytes = 0;
            for change in changes {
                if !scope.holds(coll, change) {
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
                return false;
            }
            for entry in txn_docs {
                docs.retain(|d| d.1 != entry.1);
                if entry.2.is_some() {
                    docs_read += 1;
                    docs.push(entry);
                }
            }
            bytes += txn_bytes;
            true
        })?;
        let items: Vec<Value> = docs
            .into_iter()
            .filter_map(|(_, _, doc)| doc.map(Document::into_value))
            .collect();
        Ok(feed_page(coll, &items, last, docs_read, bytes))
    }

    /// Where a change-feed page starts: after the LSN its `If-None-Match`
    /// names, at the latest for `*` (from now), at the beginning without.
    fn feed_start(&self, coll: &CollEntry, req: &WireRequest) -> Result<u64, WireError> {
        Ok(match header(&req.headers, "if-none-match")? {
            None => 0,
            Some("*") => self.current_lsn(coll)?,
            Some(etag) => etag.trim_matches('"').parse::<u64>().map_err(|_| {
                WireError::bad_request(format!(
                    "the If-None-Match header {etag:?} is not a change-feed etag this server \
                     issued (a quoted LSN such as \"7\"), nor *"
                ))
            })?,
        })
    }

    /// The all-versions-and-deletes change feed (`A-IM: Full-Fidelity
    /// Feed`): every change after the start, in LSN order, each as
    /// `{current, metadata}` (a delete's `current` is empty and its
    /// `metadata` names the document). Only for a container whose
    /// `changeFeedPolicy` retains history (`retentionDuration` minutes > 0),
    /// as on the service; Partita keeps the last
    /// [`engine::storage::RETAINED_COMMITS`] commits whole either way.
    fn all_versions_feed(
        &self,
        coll: &CollEntry,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let retention = coll
            .definition
            .get("changeFeedPolicy")
            .and_then(|p| p.get("retentionDuration"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if retention == 0 {
            return Err(WireError::bad_request(format!(
                "the All Versions and Deletes change feed must be enabled on container {:?}: \
                 create it with changeFeedPolicy.retentionDuration (minutes) above 0",
                coll.name
            )));
        }
        let scope = Scope::of(self, coll, req)?;
        let start = self.feed_start(coll, req)?;
        let max_items = max_item_count(&req.headers)?.unwrap_or(usize::MAX);
        let path = coll.container.partition_key_path().clone();
        let mut items: Vec<Value> = Vec::new();
        let (mut bytes, mut docs_read) = (0usize, 0u64);
        let last = walk_transactions(coll, start, |_, changes| {
            let txn_items: Vec<Value> = changes
                .iter()
                .filter(|change| scope.holds(coll, change))
                .map(|change| version_entry(change, &path))
                .collect();
            let txn_bytes: usize = txn_items.iter().map(|v| v.to_string().len()).sum();
            if !items.is_empty()
                && (items.len() + txn_items.len() > max_items
                    || bytes + txn_bytes > self.limits.max_response_bytes)
            {
                return false;
            }
            docs_read += txn_items.len() as u64;
            bytes += txn_bytes;
            items.extend(txn_items);
            true
        })?;
        Ok(feed_page(coll, &items, last, docs_read, bytes))
    }

    /// The container's latest LSN (the change feed's "from now").
    fn current_lsn(&self, coll: &CollEntry) -> Result<u64, WireError> {
        Ok(coll.container.last_lsn()?.0)
    }
}

/// Walks `coll`'s change log after `start` one transaction at a time (a
/// page never splits one), handing each to `take` until it answers that
/// the transaction does not fit; the LSN of the last one taken.
fn walk_transactions(
    coll: &CollEntry,
    start: u64,
    mut take: impl FnMut(Lsn, &[Change]) -> bool,
) -> Result<u64, WireError> {
    let mut last = start;
    loop {
        let changes = coll.container.read_changes(Lsn(last), CHANGE_STEP)?;
        if changes.is_empty() {
            return Ok(last);
        }
        for txn in changes.chunk_by(|a, b| a.lsn == b.lsn) {
            let lsn = txn[0].lsn;
            if !take(lsn, txn) {
                return Ok(last);
            }
            last = lsn.0;
        }
    }
}

/// A change-feed page: 304 when it holds nothing, otherwise its items,
/// their count and their charge; either way the etag to resume after.
fn feed_page(
    coll: &CollEntry,
    items: &[Value],
    last: u64,
    docs_read: u64,
    bytes_read: usize,
) -> WireResponse {
    let etag = format!("\"{last}\"");
    if items.is_empty() {
        return WireResponse::empty(304).with("etag", etag);
    }
    let (body, _) = feed_body(&coll.rid, "Documents", items, usize::MAX);
    let work = Work {
        docs_read,
        bytes_read: bytes_read as u64,
        ..Work::default()
    };
    WireResponse {
        status: 200,
        headers: Vec::new(),
        body,
    }
    .with("etag", etag)
    .with("x-ms-item-count", items.len().to_string())
    .with("x-ms-request-charge", charge(work.request_charge()))
}

/// The conflicts feed (`Conflicts`), read or queried: always empty, as
/// conflicts arise only between regions that accept writes concurrently.
/// (A query is refused as a document query is without a partition key or
/// the cross-partition header: `Gateway::cross_partition_allowed`.)
pub(super) fn conflicts(
    coll: &CollEntry,
    query: Option<&WireRequest>,
) -> Result<WireResponse, WireError> {
    super::queries::metadata_feed(&coll.rid, "Conflicts", Vec::new(), query)
}

/// The logical partitions a change-feed request reads: those under its
/// partition-key header, within its physical partition and EPK range (the
/// Python SDK scopes a per-partition-key feed by EPK), or all.
struct Scope {
    key: Option<PartitionKey>,
    epk_ranges: Vec<(String, String)>,
}

impl Scope {
    fn of(gateway: &Gateway, coll: &CollEntry, req: &WireRequest) -> Result<Scope, WireError> {
        Ok(Scope {
            key: gateway.partition_key(coll, req)?,
            epk_ranges: super::queries::epk_ranges(coll, req)?,
        })
    }

    fn holds(&self, coll: &CollEntry, change: &Change) -> bool {
        if let Some(key) = &self.key
            && !change.partition_key.starts_with(key)
        {
            return false;
        }
        super::queries::in_all(coll, &change.partition_key, &self.epk_ranges)
    }
}

/// One change as the all-versions feed lists it.
fn version_entry(change: &Change, path: &PartitionKeyPath) -> Value {
    let operation = match (change.kind, &change.document) {
        (ChangeKind::Create, Some(_)) => "create",
        (ChangeKind::Replace, Some(_)) => "replace",
        // A delete, or a write whose document has expired since (its
        // purge logs the delete later).
        _ => "delete",
    };
    let mut metadata = json!({
        "operationType": operation,
        "lsn": change.lsn.0,
        "crts": change.ts,
        "timeToLiveExpired": false,
    });
    let current = match &change.document {
        Some(doc) if operation != "delete" => doc.value().clone(),
        _ => {
            metadata["id"] = json!(change.id);
            metadata["partitionKey"] = key_object(path, &change.partition_key);
            json!({})
        }
    };
    json!({ "current": current, "metadata": metadata })
}

/// A partition key as an object shaped like the documents: `{"pk": "a"}`
/// for `/pk`, `{"a": {"b": 1}}` for `/a/b`, one member per level of a
/// hierarchical key (an undefined level is left out).
fn key_object(path: &PartitionKeyPath, key: &PartitionKey) -> Value {
    let mut object = Value::Object(serde_json::Map::new());
    for (segments, component) in path.level_segments().zip(key.components()) {
        if *component == PartitionKey::None {
            continue;
        }
        let value = component.to_value();
        let mut at = &mut object;
        for (i, segment) in segments.iter().enumerate() {
            let last = i + 1 == segments.len();
            let next = if last { value.clone() } else { json!({}) };
            let Value::Object(map) = at else { break };
            at = map.entry(segment.clone()).or_insert(next);
        }
    }
    object
}

pub(super) fn pkranges(coll: &CollEntry, req: &WireRequest) -> Result<WireResponse, WireError> {
    if header(&req.headers, "if-none-match")? == Some(PKRANGES_ETAG) {
        return Ok(WireResponse::empty(304).with("etag", PKRANGES_ETAG));
    }
    let fraction = 1.0 / coll.ranges.len() as f64;
    let ranges: Vec<Value> = coll
        .ranges
        .iter()
        .enumerate()
        .map(|(i, (min, max))| {
            let rid = child_rid(&coll.rid, 0x5, i as u64);
            json!({
                "id": i.to_string(), "_rid": rid,
                "_self": format!("{}pkranges/{rid}/", coll.self_link),
                "_etag": PKRANGES_ETAG, "_ts": coll.ts,
                "minInclusive": min, "maxExclusive": max, "ridPrefix": i,
                "throughputFraction": fraction, "status": "online", "parents": []
            })
        })
        .collect();
    let count = ranges.len();
    Ok(WireResponse::json(
        200,
        &json!({"_rid": coll.rid, "PartitionKeyRanges": ranges, "_count": count}),
    )
    .with("etag", PKRANGES_ETAG))
}
