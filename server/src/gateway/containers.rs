//! Containers (`/dbs/{db}/colls[/{c}]`): each Cosmos container is an engine
//! container the registry (`registry.rs`) names and keeps the definition of;
//! the body shows the definition with the partition key, time to live
//! (`defaultTtl`), unique keys (`uniqueKeyPolicy`), computed properties
//! (`computedProperties`, echoed as given, left out when not given) and
//! indexing policy (`indexingPolicy`, as the engine completed and stored
//! it) the engine keeps.
//! Also the deletion of one logical partition
//! (`POST .../operations/partitionkeydelete`), synchronous here.

use serde_json::{Value, json};

use partita::ScriptKind;
use partita::charge::Work;

use super::Gateway;
use super::offers::requested_throughput;
use super::queries::metadata_feed;
use super::requests::object_body;
use super::responses::charge;
use crate::registry::CollEntry;
use crate::wire::{WireError, WireRequest, WireResponse, flag};

impl Gateway {
    pub(super) fn list_collections(
        &self,
        db: &str,
        query: Option<&WireRequest>,
    ) -> Result<WireResponse, WireError> {
        let entry = self.registry.database(db)?;
        let items = entry.colls.values().map(|c| collection_json(c)).collect();
        metadata_feed(&entry.rid, "DocumentCollections", items, query)
    }

    pub(super) fn create_collection(
        &self,
        db: &str,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let definition = object_body(req, "container")?;
        let throughput = requested_throughput(req)?;
        let coll = self
            .registry
            .create_collection(db, definition, throughput)?;
        Ok(in_database(
            WireResponse::json(201, &collection_json(&coll)),
            db,
        ))
    }

    /// A container's definition; with `x-ms-documentdb-populatequotainfo`
    /// its usage and quota headers, with
    /// `x-ms-documentdb-populatepartitionstatistics` the `statistics` of
    /// each of its partition-key ranges (both count every document: asked
    /// for rarely, by tools and tests).
    pub(super) fn read_collection(
        &self,
        db: &str,
        c: &str,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let coll = self.registry.collection(db, c)?;
        let mut body = collection_json(&coll);
        let quota = flag(&req.headers, "x-ms-documentdb-populatequotainfo")?;
        let statistics = flag(&req.headers, "x-ms-documentdb-populatepartitionstatistics")?;
        let usage = (quota || statistics)
            .then(|| Usage::of(&coll))
            .transpose()?;
        if let (true, Some(usage)) = (statistics, &usage) {
            let ranges: Vec<Value> = usage
                .per_range
                .iter()
                .enumerate()
                .map(|(id, (documents, bytes))| {
                    json!({
                        "id": id.to_string(),
                        "sizeInKB": bytes.div_ceil(1024),
                        "documentCount": documents,
                        "partitionKeys": [],
                    })
                })
                .collect();
            body["statistics"] = Value::Array(ranges);
        }
        let mut response = WireResponse::json(200, &body);
        if let (true, Some(usage)) = (quota, &usage) {
            let kib = usage.bytes.div_ceil(1024);
            response = response
                .with(
                    "x-ms-resource-quota",
                    format!(
                        "functions=25;storedProcedures=100;triggers=25;documentSize=10240;\
                         documentsSize={QUOTA_KB};documentsCount=-1;collectionSize={QUOTA_KB};"
                    ),
                )
                .with(
                    "x-ms-resource-usage",
                    format!(
                        "functions={};storedProcedures={};triggers={};documentSize={};\
                         documentsSize={kib};documentsCount={};collectionSize={kib};",
                        usage.udfs,
                        usage.procedures,
                        usage.triggers,
                        kib / 1024,
                        usage.documents,
                    ),
                )
                // A new policy is built in the background.
                .with(
                    "x-ms-documentdb-collection-index-transformation-progress",
                    coll.container.index_progress()?.to_string(),
                );
        }
        Ok(in_database(response, db))
    }

    pub(super) fn replace_collection(
        &self,
        db: &str,
        c: &str,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let definition = object_body(req, "container")?;
        let coll = self.registry.replace_collection(db, c, definition)?;
        Ok(in_database(
            WireResponse::json(200, &collection_json(&coll)),
            db,
        ))
    }

    pub(super) fn delete_collection(&self, db: &str, c: &str) -> Result<WireResponse, WireError> {
        self.registry.delete_collection(db, c)?;
        Ok(WireResponse::empty(204))
    }

    /// Deletes every document of the logical partition the
    /// `x-ms-documentdb-partitionkey` header names, in one transaction,
    /// before answering (the service does it in the background); no
    /// header or an unknown key deletes nothing. 200 with no body.
    pub(super) fn delete_partition(
        &self,
        coll: &CollEntry,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let deleted = match self.partition_key(coll, req)? {
            Some(key) => coll.container.delete_all_items_by_partition_key(key)?,
            None => 0,
        };
        let work = Work {
            docs_written: deleted as u64,
            ..Work::default()
        };
        Ok(WireResponse::empty(200)
            .with("x-ms-request-charge", charge(work.request_charge()))
            .with("x-ms-session-token", self.write_token()))
    }
}

/// The storage quota the service reports for a container, in KiB (the
/// emulator's figure; Partita enforces none).
const QUOTA_KB: u64 = 10_485_760;

/// What a container holds, for its usage headers and statistics.
struct Usage {
    documents: usize,
    bytes: usize,
    /// Documents and bytes in each physical partition.
    per_range: Vec<(usize, usize)>,
    procedures: usize,
    triggers: usize,
    udfs: usize,
}

impl Usage {
    fn of(coll: &CollEntry) -> Result<Usage, WireError> {
        let raw = coll.container.raw();
        let (mut documents, mut bytes) = (0, 0);
        let mut per_range = vec![(0, 0); coll.ranges.len()];
        for key in raw.partition_keys()? {
            let partition = raw.snapshot(&key)?;
            documents += partition.len();
            bytes += partition.size();
            if let Some(range) = per_range.get_mut(coll.range_of(&key)) {
                range.0 += partition.len();
                range.1 += partition.size();
            }
        }
        let scripts = |kind| coll.container.list_scripts(kind).len();
        Ok(Usage {
            documents,
            bytes,
            per_range,
            procedures: scripts(ScriptKind::StoredProcedure),
            triggers: scripts(ScriptKind::Trigger),
            udfs: scripts(ScriptKind::UserDefinedFunction),
        })
    }
}

/// Adds `x-ms-alt-content-path`, the name path of the container's database.
fn in_database(response: WireResponse, db: &str) -> WireResponse {
    response.with("x-ms-alt-content-path", format!("dbs/{db}"))
}

pub(super) fn collection_json(coll: &CollEntry) -> Value {
    let mut v = coll.definition.clone();
    v.insert("id".into(), json!(coll.name));
    let mut pk = v
        .get("partitionKey")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let path = coll.container.partition_key_path();
    pk.insert(
        "paths".into(),
        Value::from(path.paths().collect::<Vec<_>>()),
    );
    pk.entry("kind").or_insert(json!(if path.is_hierarchical() {
        "MultiHash"
    } else {
        "Hash"
    }));
    pk.entry("version").or_insert(json!(2));
    v.insert("partitionKey".into(), Value::Object(pk));
    v.insert(
        "indexingPolicy".into(),
        coll.container.indexing_policy().to_json(),
    );
    v.entry("conflictResolutionPolicy").or_insert(json!({
        "mode": "LastWriterWins", "conflictResolutionPath": "/_ts", "conflictResolutionProcedure": ""
    }));
    let props = coll.container.properties();
    match props.default_ttl {
        Some(ttl) => v.insert("defaultTtl".into(), json!(ttl)),
        None => v.remove("defaultTtl"),
    };
    let unique_keys: Vec<Value> = props
        .unique_keys
        .iter()
        .map(|k| json!({"paths": k.paths}))
        .collect();
    v.insert(
        "uniqueKeyPolicy".into(),
        json!({ "uniqueKeys": unique_keys }),
    );
    v.insert("_rid".into(), json!(coll.rid));
    v.insert("_ts".into(), json!(coll.ts));
    v.insert("_self".into(), json!(coll.self_link));
    v.insert("_etag".into(), json!(coll.etag));
    for (k, link) in [
        ("_docs", "docs/"),
        ("_sprocs", "sprocs/"),
        ("_triggers", "triggers/"),
        ("_udfs", "udfs/"),
        ("_conflicts", "conflicts/"),
    ] {
        v.insert(k.into(), json!(link));
    }
    Value::Object(v)
}
