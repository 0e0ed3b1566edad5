//! Databases and their containers, the level Cosmos DB has above containers
//! and the engine does not.
//!
//! The registry is itself stored in the engine: one system container
//! (`__partita_server`, one logical partition) holds a document per database
//! and per container, written in engine transactions, so a database and its
//! containers are created and deleted atomically and survive restarts.
//!
//! ```text
//!   __partita_server / ["v1"]
//!     db-1    {"type": "database",   "name": "blog"}
//!     coll-2  {"type": "collection", "db": "blog", "name": "posts",
//!              "engine": "c2-posts", "definition": {partitionKey, indexingPolicy, ...},
//!              "ranges": 2}
//!     drop-coll-3 {"type": "dropped", "engine": "c3-old"}   (only while deleting)
//!     offer-4 {"type": "offer", "owner": "coll-2", "rid": "AAAE",
//!              "content": {"offerThroughput": 400}}
//! ```
//!
//! Users and their permissions (`user-{n}`, `perm-{n}`, in `users.rs`)
//! are registry documents too, deleted with their database in the same
//! transaction as its containers.
//!
//! An offer (the throughput a client provisioned for a database or
//! container) is written in the same transaction as its owner's document
//! and deleted in the same transaction as its owner. Partita enforces
//! nothing from it: it is stored and echoed, and a container's throughput
//! at creation fixes how many physical partitions it has (`"ranges"` in
//! its document; none, in stores from before, is one).
//!
//! Each Cosmos container maps to an engine container named `c{n}-{name}`
//! (`n` never reused), so two databases may hold containers of the same name.
//! Deleting a container or database replaces its registry documents with
//! `dropped` tombstones in one transaction (from then on clients see it
//! gone), then deletes each engine container (documents, scripts, change
//! log) and its tombstone. A server that stopped in between finishes the
//! job when it loads the registry again, so no engine container is left
//! behind.
//!
//! Lookups take a read lock and clone an `Arc`; creates and deletes are
//! serialized by one mutex and publish a new entry only after the registry
//! document committed.
//!
//! Several servers may share one store (PostgreSQL): a lookup that misses,
//! a listing and a create read the registry's partition again first
//! (`Registry::refresh`, under the same mutex), so a database, container,
//! user or permission created through another server is found, and an
//! ordinal another server gave is not given again. Two servers creating
//! at the same moment may still pick one ordinal: the registry's
//! partition admits one of the two transactions, and the other fails
//! (its document id exists) instead of taking the next ordinal. What
//! another server deleted or replaced is seen at the next re-read; its
//! engine container is gone at once (the engine's catalog).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use engine::{
    ComputedProperty, ContainerProperties, Database, FeedOptions, IndexingMode, IndexingPolicy,
    UniqueKey, validate_id,
};
use parking_lot::{ReentrantMutex, RwLock};
use partita::Container;
use serde_json::{Map, Value, json};

use super::auth::is_database_rid;
use super::wire::WireError;

mod users;

pub(crate) use users::{PermEntry, PermissionMode, PermissionSpec, UserEntry};

/// The engine container holding the registry.
pub const SYSTEM_CONTAINER: &str = "__partita_server";
const PARTITION: &str = "v1";

/// A database.
#[derive(Clone, Debug)]
pub(crate) struct DbEntry {
    pub(crate) name: String,
    pub(crate) doc_id: String,
    /// The database's `_rid`: its registry ordinal in 4 bytes (see
    /// [`database_rid`]).
    pub(crate) rid: String,
    pub(crate) rid_bytes: [u8; 4],
    pub(crate) etag: String,
    pub(crate) ts: u64,
    pub(crate) colls: BTreeMap<String, Arc<CollEntry>>,
}

/// A container of a database.
#[derive(Debug)]
pub(crate) struct CollEntry {
    pub(crate) name: String,
    pub(crate) doc_id: String,
    pub(crate) container: Container,
    /// What the client defined (partitionKey, indexingPolicy, ...), without
    /// system properties.
    pub(crate) definition: Map<String, Value>,
    pub(crate) etag: String,
    pub(crate) ts: u64,
    /// The container's `_rid` (8 bytes: its database's 4, then the engine
    /// container's ordinal), the prefix of its documents' rids.
    pub(crate) rid: String,
    /// `dbs/{dbRid}/colls/{collRid}/`, the database part taken from `rid`.
    pub(crate) self_link: String,
    /// Its physical partitions (partition-key ranges), fixed at creation by
    /// its throughput: `[minInclusive, maxExclusive)` of each, in order.
    pub(crate) ranges: Vec<(String, String)>,
}

impl CollEntry {
    /// The effective partition key of `key` here, by the hash version the
    /// container was defined with.
    pub(crate) fn epk(&self, key: &engine::PartitionKey) -> String {
        crate::epk::effective_partition_key_in(key, CollEntry::hash_version(&self.definition))
    }

    /// The hash version the container was defined with.
    fn hash_version(definition: &Map<String, Value>) -> Option<u64> {
        definition
            .get("partitionKey")
            .and_then(|pk| pk.get("version"))
            .and_then(Value::as_u64)
    }

    /// The ranges of `count` physical partitions of a container defined by
    /// `definition`.
    fn ranges_for(count: u32, definition: &Map<String, Value>) -> Vec<(String, String)> {
        crate::epk::range_bounds(count, CollEntry::hash_version(definition))
    }

    /// The index of the physical partition that holds `key`.
    pub(crate) fn range_of(&self, key: &engine::PartitionKey) -> usize {
        let epk = self.epk(key);
        self.ranges
            .iter()
            .position(|(min, max)| crate::epk::in_range(&epk, min, max))
            .unwrap_or(0)
    }
}

/// The most physical partitions a container gets (the service's 1,000,000
/// RU/s limit gives 167).
pub(crate) const MAX_PHYSICAL_PARTITIONS: u32 = 256;

/// The throughput a client provisioned for a database or container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Throughput {
    /// A fixed number of request units per second.
    Manual(u64),
    /// Autoscale up to `max` request units per second; the increment is
    /// kept as the client gave it (Python sends 0 too).
    Autoscale {
        max: u64,
        increment_percent: Option<u64>,
    },
}

impl Throughput {
    /// The offer's `content` as the service shows it: `offerThroughput`
    /// always (for autoscale the floor, a tenth of the maximum), and
    /// `offerAutopilotSettings` for autoscale.
    pub(crate) fn content(&self) -> Value {
        match *self {
            Throughput::Manual(n) => json!({ "offerThroughput": n }),
            Throughput::Autoscale {
                max,
                increment_percent,
            } => {
                let mut settings = json!({ "maxThroughput": max });
                if let Some(percent) = increment_percent {
                    settings["autoUpgradePolicy"] =
                        json!({"throughputPolicy": {"incrementPercent": percent}});
                }
                json!({"offerThroughput": max / 10, "offerAutopilotSettings": settings})
            }
        }
    }

    /// How many physical partitions a container created with this
    /// throughput gets, as on the service: one per 6,000 RU/s of manual
    /// throughput, one per 10,000 RU/s of autoscale maximum, at least one
    /// and (Partita's bound) at most [`MAX_PHYSICAL_PARTITIONS`].
    pub(crate) fn physical_partitions(&self) -> u32 {
        let (throughput, per_partition) = match *self {
            Throughput::Manual(n) => (n, 6_000),
            Throughput::Autoscale { max, .. } => (max, 10_000),
        };
        throughput
            .div_ceil(per_partition)
            .clamp(1, u64::from(MAX_PHYSICAL_PARTITIONS)) as u32
    }

    /// The throughput a stored `content` holds (`None` if it holds none).
    fn from_content(content: &Value) -> Option<Throughput> {
        match content.get("offerAutopilotSettings") {
            Some(settings) => Some(Throughput::Autoscale {
                max: settings.get("maxThroughput")?.as_u64()?,
                increment_percent: settings
                    .pointer("/autoUpgradePolicy/throughputPolicy/incrementPercent")
                    .and_then(Value::as_u64),
            }),
            None => content
                .get("offerThroughput")?
                .as_u64()
                .map(Throughput::Manual),
        }
    }
}

/// The offer of a database or container.
#[derive(Clone, Debug)]
pub(crate) struct Offer {
    /// Its own resource id (`offers/{rid}/`), distinct from its owner's.
    pub(crate) rid: String,
    pub(crate) doc_id: String,
    pub(crate) throughput: Throughput,
    pub(crate) etag: String,
    pub(crate) ts: u64,
}

/// What an offer provisions throughput for.
#[derive(Clone, Debug)]
pub(crate) enum OfferOwner {
    Database(DbEntry),
    Collection(Arc<CollEntry>),
}

/// The registry: every database and container the server knows.
pub(crate) struct Registry {
    db: Database,
    /// The registry's own engine container (no scripts run there).
    system: engine::Container,
    state: RwLock<BTreeMap<String, DbEntry>>,
    /// Offers by the registry document id of their owner.
    offers: RwLock<BTreeMap<String, Offer>>,
    /// Users (with their permissions) by database name, then user name.
    users: RwLock<BTreeMap<String, BTreeMap<String, UserEntry>>>,
    /// Serializes creates, replaces, deletes and re-reads of the
    /// registry; the ordinal counter. Reentrant: a lookup that misses
    /// re-reads the registry under it ([`Registry::found`]), also inside a
    /// create or delete that holds it.
    writer: ReentrantMutex<Cell<u64>>,
}

fn registry_error(e: engine::Error) -> WireError {
    // A store that refuses writes refuses the registry's with the same 503
    // as any other write.
    let status = match e {
        engine::Error::ReadOnly(_) => 503,
        _ => 500,
    };
    WireError::new(
        status,
        format!("the server's registry could not be updated: {e}"),
    )
}

impl Registry {
    /// Loads (or starts) the registry of `db`.
    pub(crate) fn load(db: &Database) -> Result<Registry, engine::Error> {
        let system = db.create_container_if_not_exists(SYSTEM_CONTAINER, "/registry")?;
        let scan = Scan::read(db, &system)?;
        let registry = Registry {
            db: db.clone(),
            system,
            users: RwLock::new(users::users_of(&scan.dbs, &scan.items)),
            state: RwLock::new(scan.dbs),
            offers: RwLock::new(scan.offers),
            writer: ReentrantMutex::new(Cell::new(scan.max_ordinal)),
        };
        // Deletions an earlier server did not finish.
        for (tombstone, engine_id) in scan.dropped {
            registry.drop_engine_container(&tombstone, &engine_id)?;
        }
        Ok(registry)
    }

    /// Reads the registry again, under the writer lock (`ordinal`), and
    /// takes what other servers sharing the store (PostgreSQL) created,
    /// changed or deleted since: called when a lookup misses and before
    /// a create, so a database or container created through another node
    /// is found here, and ordinals are never given twice. One read of
    /// the registry's partition (which confirms its version: one
    /// statement when nothing changed over PostgreSQL, none in memory).
    fn refresh(&self, ordinal: &Cell<u64>) -> Result<(), WireError> {
        let scan = Scan::read(&self.db, &self.system).map_err(registry_error)?;
        ordinal.set(ordinal.get().max(scan.max_ordinal));
        let users = users::users_of(&scan.dbs, &scan.items);
        *self.state.write() = scan.dbs;
        *self.offers.write() = scan.offers;
        *self.users.write() = users;
        Ok(())
    }

    /// `lookup`, and once more after [`Registry::refresh`] when it misses.
    fn found<T>(&self, lookup: impl Fn(&Registry) -> Result<T, WireError>) -> Result<T, WireError> {
        match lookup(self) {
            Err(e) if e.status == 404 => {
                self.refresh(&self.writer.lock())?;
                lookup(self)
            }
            other => other,
        }
    }

    /// Deletes a deleted container's engine container (if still there),
    /// then its tombstone.
    fn drop_engine_container(&self, tombstone: &str, engine_id: &str) -> Result<(), engine::Error> {
        match self.db.delete_container(engine_id) {
            Ok(()) | Err(engine::Error::ContainerNotFound(_)) => {}
            Err(e) => return Err(e),
        }
        self.system.delete_item(PARTITION, tombstone, None)
    }

    /// In a registry transaction: replaces a container's registry document
    /// with a tombstone; returns the tombstone's id.
    fn bury(&self, txn: &mut engine::Txn, coll: &CollEntry) -> Result<String, engine::Error> {
        let tombstone = format!("drop-{}", coll.doc_id);
        txn.delete_item(&coll.doc_id, None)?;
        self.delete_offer(txn, &coll.doc_id)?;
        txn.upsert_item(
            json!({"id": tombstone, "registry": PARTITION, "type": "dropped",
                               "engine": coll.container.id()}),
            None,
        )?;
        Ok(tombstone)
    }

    /// Every database, by name.
    pub(crate) fn databases(&self) -> Vec<DbEntry> {
        // Those other servers on the store created too; should the
        // registry not be readable, the ones this server knows.
        let _ = self.refresh(&self.writer.lock());
        self.state.read().values().cloned().collect()
    }

    /// The database `name` (this server's, or another's on the store).
    pub(crate) fn database(&self, name: &str) -> Result<DbEntry, WireError> {
        self.found(|registry| {
            registry
                .state
                .read()
                .get(name)
                .cloned()
                .ok_or_else(|| WireError::not_found(format!("database {name:?} does not exist")))
        })
    }

    /// The container `name` of database `db`.
    pub(crate) fn collection(&self, db: &str, name: &str) -> Result<Arc<CollEntry>, WireError> {
        self.found(|registry| {
            let state = registry.state.read();
            let entry = state
                .get(db)
                .ok_or_else(|| WireError::not_found(format!("database {db:?} does not exist")))?;
            entry.colls.get(name).cloned().ok_or_else(|| {
                WireError::not_found(format!(
                    "container {name:?} does not exist in database {db:?}"
                ))
            })
        })
    }

    /// The database whose `_rid` is `rid` (compared exactly).
    pub(crate) fn database_by_rid(&self, rid: &str) -> Result<DbEntry, WireError> {
        self.found(|registry| {
            registry
                .state
                .read()
                .values()
                .find(|entry| entry.rid == rid)
                .cloned()
                .ok_or_else(|| WireError::not_found(format!("no database has the _rid {rid:?}")))
        })
    }

    /// The container whose `_rid` is `rid` in the database whose `_rid` is
    /// `db_rid`, with that database's name. A container from before
    /// databases had rids of their own carries Partita's old database part
    /// (`UGFydA==`) in its rid and links; it is found under that too.
    pub(crate) fn collection_by_rid(
        &self,
        db_rid: &str,
        rid: &str,
    ) -> Result<(String, Arc<CollEntry>), WireError> {
        self.found(|registry| {
            let state = registry.state.read();
            state
                .values()
                .find_map(|entry| {
                    let coll = entry.colls.values().find(|coll| coll.rid == rid)?;
                    (entry.rid == db_rid || coll.self_link.starts_with(&format!("dbs/{db_rid}/")))
                        .then(|| (entry.name.clone(), coll.clone()))
                })
                .ok_or_else(|| {
                    WireError::not_found(format!(
                        "no container has the _rid {rid:?} in the database with the _rid {db_rid:?}"
                    ))
                })
        })
    }

    /// Creates a database, with an offer when `throughput` is given.
    pub(crate) fn create_database(
        &self,
        name: &str,
        throughput: Option<Throughput>,
    ) -> Result<DbEntry, WireError> {
        validate_id(name).map_err(|e| WireError::bad_request(format!("database {e}")))?;
        if is_database_rid(name) {
            return Err(WireError::bad_request(format!(
                "the database id {name:?} reads as a resource id (8 base64 characters of 4 bytes),                  so links naming it would be taken for rid-based links; choose another id"
            )));
        }
        let ordinal = self.writer.lock();
        // What other servers on the store created: their names and ordinals.
        self.refresh(&ordinal)?;
        if self.state.read().contains_key(name) {
            return Err(WireError::conflict(format!(
                "Resource with specified id or name already exists: database {name:?}"
            )));
        }
        let db_ordinal = next_ordinal(&ordinal);
        let doc_id = format!("db-{db_ordinal}");
        let offer_ordinal = throughput.map(|_| next_ordinal(&ordinal));
        let (doc, offer) = self
            .system
            .transaction(PARTITION, |txn| {
                let doc = txn.create_item(
                    json!({"id": doc_id, "registry": PARTITION, "type": "database", "name": name}),
                )?;
                let offer = Registry::create_offer(txn, &doc_id, offer_ordinal, throughput)?;
                Ok::<_, engine::Error>((doc, offer))
            })
            .map_err(registry_error)?;
        let rid_bytes = database_rid(db_ordinal);
        if let Some(offer) = offer {
            self.offers.write().insert(doc_id.clone(), offer);
        }
        let entry = DbEntry {
            name: name.to_owned(),
            doc_id,
            rid: encode_rid(&rid_bytes),
            rid_bytes,
            etag: doc.etag().to_owned(),
            ts: doc.ts(),
            colls: BTreeMap::new(),
        };
        self.state.write().insert(name.to_owned(), entry.clone());
        Ok(entry)
    }

    /// Deletes a database and its containers: atomically from the
    /// registry, then each engine container.
    pub(crate) fn delete_database(&self, name: &str) -> Result<(), WireError> {
        let _writer = self.writer.lock();
        let entry = self.database(name)?;
        let tombstones = self
            .system
            .transaction(PARTITION, |txn| {
                let tombstones = entry
                    .colls
                    .values()
                    .map(|coll| Ok((self.bury(txn, coll)?, coll.container.id().to_owned())))
                    .collect::<Result<Vec<_>, engine::Error>>()?;
                txn.delete_item(&entry.doc_id, None)?;
                self.delete_offer(txn, &entry.doc_id)?;
                self.delete_users(txn, name)?;
                Ok::<_, engine::Error>(tombstones)
            })
            .map_err(registry_error)?;
        self.state.write().remove(name);
        self.users.write().remove(name);
        {
            let mut offers = self.offers.write();
            offers.remove(&entry.doc_id);
            for coll in entry.colls.values() {
                offers.remove(&coll.doc_id);
            }
        }
        for (tombstone, engine_id) in tombstones {
            self.drop_engine_container(&tombstone, &engine_id)
                .map_err(registry_error)?;
        }
        Ok(())
    }

    /// Creates a container from a client's definition (`id`, `partitionKey`,
    /// anything else is kept and echoed).
    pub(crate) fn create_collection(
        &self,
        db: &str,
        mut definition: Map<String, Value>,
        throughput: Option<Throughput>,
    ) -> Result<Arc<CollEntry>, WireError> {
        let name = match definition.get("id") {
            Some(Value::String(id)) => id.clone(),
            _ => {
                return Err(WireError::bad_request(
                    "the container body needs a string id",
                ));
            }
        };
        validate_id(&name).map_err(|e| WireError::bad_request(format!("container {e}")))?;
        let path = partition_key_path(&definition)?;
        let (default_ttl, unique_keys, computed_properties, indexing_policy) =
            settings(&definition)?;
        strip_system_properties(&mut definition);
        let ordinal = self.writer.lock();
        // What other servers on the store created: their names and ordinals.
        self.refresh(&ordinal)?;
        let entry = self.database(db)?;
        if entry.colls.contains_key(&name) {
            return Err(WireError::conflict(format!(
                "Resource with specified id or name already exists: container {name:?} in database {db:?}"
            )));
        }
        let coll_ordinal = next_ordinal(&ordinal);
        let engine_id: String = format!("c{coll_ordinal}-{name}")
            .chars()
            .take(engine::MAX_ID_LEN)
            .collect();
        let container = Container::from(self.db.create_container_with(ContainerProperties {
            default_ttl,
            unique_keys: unique_keys.unwrap_or_default(),
            database_rid: Some(entry.rid_bytes),
            computed_properties,
            indexing_policy,
            ..ContainerProperties::new(&engine_id, &path)
        })?);
        let doc_id = format!("coll-{coll_ordinal}");
        let ranges = throughput.map_or(1, |t| t.physical_partitions());
        let offer_ordinal = throughput.map(|_| next_ordinal(&ordinal));
        let (doc, offer) = self
            .system
            .transaction(PARTITION, |txn| {
                let doc = txn.create_item(
                    json!({"id": doc_id, "registry": PARTITION, "type": "collection", "db": db,
                           "name": name, "engine": engine_id, "definition": definition,
                           "ranges": ranges}),
                )?;
                let offer = Registry::create_offer(txn, &doc_id, offer_ordinal, throughput)?;
                Ok::<_, engine::Error>((doc, offer))
            })
            .map_err(registry_error)?;
        let rid = container.resource_id();
        if let Some(offer) = offer {
            self.offers.write().insert(doc_id.clone(), offer);
        }
        let coll = Arc::new(CollEntry {
            name: name.clone(),
            doc_id,
            self_link: collection_self_link(&rid),
            rid,
            container,
            ranges: CollEntry::ranges_for(ranges, &definition),
            definition,
            etag: doc.etag().to_owned(),
            ts: doc.ts(),
        });
        if let Some(entry) = self.state.write().get_mut(db) {
            entry.colls.insert(name, coll.clone());
        }
        Ok(coll)
    }

    /// Replaces a container's definition; its partition key cannot change.
    pub(crate) fn replace_collection(
        &self,
        db: &str,
        name: &str,
        mut definition: Map<String, Value>,
    ) -> Result<Arc<CollEntry>, WireError> {
        let _writer = self.writer.lock();
        let old = self.collection(db, name)?;
        if definition.get("id").and_then(Value::as_str) != Some(name) {
            return Err(WireError::bad_request(format!(
                "the container body's id must be {name:?}, the id in the path"
            )));
        }
        let path = partition_key_path(&definition)?;
        if path != old.container.partition_key_path().as_str() {
            return Err(WireError::bad_request(format!(
                "the partition key of container {name:?} is {} and cannot be changed to {path}",
                old.container.partition_key_path()
            )));
        }
        let (default_ttl, unique_keys, computed_properties, indexing_policy) =
            settings(&definition)?;
        if let Some(keys) = unique_keys
            && keys != old.container.properties().unique_keys
        {
            return Err(WireError::bad_request(format!(
                "the uniqueKeyPolicy of container {name:?} is fixed at creation and cannot be changed"
            )));
        }
        // Time to live needs an index: refused before anything changes.
        if default_ttl.is_some() && indexing_policy.indexing_mode == IndexingMode::None {
            return Err(WireError::bad_request(format!(
                "container {name:?}: time to live (defaultTtl) needs an index, so it cannot be on \
                 while the indexing mode is none"
            )));
        }
        // A replace is the whole definition: no defaultTtl turns it off, no
        // computedProperties removes them, no indexingPolicy is the default.
        // Whichever of time to live and mode none turns its side off goes
        // first.
        old.container.set_computed_properties(computed_properties)?;
        if indexing_policy.indexing_mode == IndexingMode::None {
            old.container.set_default_ttl(default_ttl)?;
            old.container.set_indexing_policy(indexing_policy)?;
        } else {
            old.container.set_indexing_policy(indexing_policy)?;
            old.container.set_default_ttl(default_ttl)?;
        }
        strip_system_properties(&mut definition);
        let doc = self
            .system
            .transaction(PARTITION, |txn| {
                let mut doc = txn.read_item(&old.doc_id)?.into_value();
                doc["definition"] = Value::Object(definition.clone());
                txn.replace_item(&old.doc_id, doc, None)
            })
            .map_err(registry_error)?;
        let coll = Arc::new(CollEntry {
            name: name.to_owned(),
            doc_id: old.doc_id.clone(),
            container: old.container.clone(),
            definition,
            etag: doc.etag().to_owned(),
            ts: doc.ts(),
            rid: old.rid.clone(),
            self_link: old.self_link.clone(),
            ranges: old.ranges.clone(),
        });
        if let Some(entry) = self.state.write().get_mut(db) {
            entry.colls.insert(name.to_owned(), coll.clone());
        }
        Ok(coll)
    }

    /// Deletes a container: from the registry, then its engine container
    /// (see the module docs).
    pub(crate) fn delete_collection(&self, db: &str, name: &str) -> Result<(), WireError> {
        let _writer = self.writer.lock();
        let coll = self.collection(db, name)?;
        let tombstone = self
            .system
            .transaction(PARTITION, |txn| self.bury(txn, &coll))
            .map_err(registry_error)?;
        if let Some(entry) = self.state.write().get_mut(db) {
            entry.colls.remove(name);
        }
        self.offers.write().remove(&coll.doc_id);
        self.drop_engine_container(&tombstone, coll.container.id())
            .map_err(registry_error)
    }
}

/// The 4 bytes of a database's `_rid`: its registry ordinal, big-endian
/// (`AAAAAQ==` for the first), so a store opened again gives every
/// database the rid it had.
/// The next ordinal of the registry, taken.
fn next_ordinal(ordinal: &Cell<u64>) -> u64 {
    ordinal.set(ordinal.get() + 1);
    ordinal.get()
}

fn database_rid(ordinal: u64) -> [u8; 4] {
    u32::try_from(ordinal).unwrap_or(u32::MAX).to_be_bytes()
}

/// Resource ids are base64 with `-` in place of `/` (a path segment).
fn encode_rid(bytes: &[u8]) -> String {
    STANDARD.encode(bytes).replace('/', "-")
}

/// `dbs/{dbRid}/colls/{collRid}/`, the database rid being the first 4 bytes
/// of the container's.
fn collection_self_link(rid: &str) -> String {
    let bytes = STANDARD.decode(rid.replace('-', "/")).unwrap_or_default();
    let db = encode_rid(bytes.get(..4).unwrap_or_default());
    format!("dbs/{db}/colls/{rid}/")
}

impl Registry {
    /// In a registry transaction: writes the offer of the owner document
    /// `owner` (if it has one).
    fn create_offer(
        txn: &mut engine::Txn,
        owner: &str,
        ordinal: Option<u64>,
        throughput: Option<Throughput>,
    ) -> Result<Option<Offer>, engine::Error> {
        let (Some(ordinal), Some(throughput)) = (ordinal, throughput) else {
            return Ok(None);
        };
        let doc_id = format!("offer-{ordinal}");
        let rid = offer_rid(ordinal);
        let doc = txn.create_item(json!({"id": doc_id, "registry": PARTITION, "type": "offer",
            "owner": owner, "rid": rid, "content": throughput.content()}))?;
        Ok(Some(Offer {
            rid,
            doc_id,
            throughput,
            etag: doc.etag().to_owned(),
            ts: doc.ts(),
        }))
    }

    /// In a registry transaction: deletes the offer of the owner document
    /// `owner`, if it has one.
    fn delete_offer(&self, txn: &mut engine::Txn, owner: &str) -> Result<(), engine::Error> {
        match self.offers.read().get(owner) {
            Some(offer) => txn.delete_item(&offer.doc_id, None),
            None => Ok(()),
        }
    }

    /// Every offer with its owner, databases' first.
    pub(crate) fn offers(&self) -> Vec<(Offer, OfferOwner)> {
        let state = self.state.read();
        let offers = self.offers.read();
        let mut list = Vec::new();
        for entry in state.values() {
            if let Some(offer) = offers.get(&entry.doc_id) {
                list.push((offer.clone(), OfferOwner::Database(entry.clone())));
            }
        }
        for coll in state.values().flat_map(|entry| entry.colls.values()) {
            if let Some(offer) = offers.get(&coll.doc_id) {
                list.push((offer.clone(), OfferOwner::Collection(coll.clone())));
            }
        }
        list
    }

    /// The offer whose resource id is `rid`, with its owner.
    pub(crate) fn offer(&self, rid: &str) -> Result<(Offer, OfferOwner), WireError> {
        self.offers()
            .into_iter()
            .find(|(offer, _)| offer.rid == rid)
            .ok_or_else(|| WireError::not_found(format!("offer {rid:?} does not exist")))
    }

    /// Replaces the throughput of the offer `rid`.
    pub(crate) fn replace_offer(
        &self,
        rid: &str,
        throughput: Throughput,
    ) -> Result<(Offer, OfferOwner), WireError> {
        let _writer = self.writer.lock();
        let (old, owner) = self.offer(rid)?;
        let doc = self
            .system
            .transaction(PARTITION, |txn| {
                let mut doc = txn.read_item(&old.doc_id)?.into_value();
                doc["content"] = throughput.content();
                txn.replace_item(&old.doc_id, doc, None)
            })
            .map_err(registry_error)?;
        let offer = Offer {
            throughput,
            etag: doc.etag().to_owned(),
            ts: doc.ts(),
            ..old
        };
        let owner_doc = match &owner {
            OfferOwner::Database(entry) => &entry.doc_id,
            OfferOwner::Collection(coll) => &coll.doc_id,
        };
        self.offers.write().insert(owner_doc.clone(), offer.clone());
        Ok((offer, owner))
    }
}

/// An offer's resource id: its registry ordinal in 3 bytes (6 past 2^24),
/// base64 with `/` written `-`, as the service's RIDs are.
fn offer_rid(ordinal: u64) -> String {
    let bytes = ordinal.to_be_bytes();
    let bytes = if ordinal < 1 << 24 {
        &bytes[5..]
    } else {
        &bytes[2..]
    };
    STANDARD.encode(bytes).replace('/', "-")
}

/// The partition-key definition of a container, in the engine's text form:
/// one path (`"partitionKey": {"paths": ["/pk"], "kind": "Hash"}`), or up
/// to three (`"kind": "MultiHash", "version": 2`), stored as a JSON array.
fn partition_key_path(definition: &Map<String, Value>) -> Result<String, WireError> {
    let pk = definition.get("partitionKey");
    let paths = pk
        .and_then(|pk| pk.get("paths"))
        .and_then(Value::as_array)
        .ok_or_else(|| {
            WireError::bad_request(
                "the container needs a partitionKey with paths, such as {\"paths\": [\"/pk\"]}",
            )
        })?;
    let paths = paths
        .iter()
        .map(|p| {
            p.as_str().ok_or_else(|| {
                WireError::bad_request(format!(
                    "partitionKey.paths must hold strings, not {}",
                    Value::Array(paths.clone())
                ))
            })
        })
        .collect::<Result<Vec<&str>, _>>()?;
    let kind = pk.and_then(|pk| pk.get("kind")).and_then(Value::as_str);
    let hierarchical = kind.is_some_and(|k| k.eq_ignore_ascii_case("MultiHash"));
    if paths.len() > 1 && !hierarchical {
        // The service's words (the SDK's tests look for them).
        return Err(WireError::bad_request(format!(
            "Too many partition key paths: {} paths with kind {:?}; several paths need \
             \"kind\": \"MultiHash\" (at most {})",
            paths.len(),
            kind.unwrap_or("Hash"),
            host_api::MAX_PATHS
        )));
    }
    let path = host_api::PartitionKeyPath::from_paths(&paths)
        .map_err(|e| WireError::bad_request(e.to_string()))?;
    Ok(path.as_str().to_owned())
}

/// A container definition's `defaultTtl`, `uniqueKeyPolicy`,
/// `computedProperties` and `indexingPolicy`.
type Settings = (
    Option<i32>,
    Option<Vec<UniqueKey>>,
    Vec<ComputedProperty>,
    IndexingPolicy,
);

/// The `defaultTtl`, `uniqueKeyPolicy`, `computedProperties` and
/// `indexingPolicy` of a container definition (`None` for a unique key
/// policy that is absent or null, the default indexing policy for an absent
/// one); the engine validates the values, except that computed properties
/// and the indexing policy are checked here too, so their 400 carries the
/// service's wording.
fn settings(definition: &Map<String, Value>) -> Result<Settings, WireError> {
    let default_ttl = match definition.get("defaultTtl") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| {
                    WireError::bad_request(format!(
                        "defaultTtl must be -1 or a number of seconds from 1 to {}, not {v}",
                        i32::MAX
                    ))
                })?,
        ),
    };
    let unique_keys = match definition.get("uniqueKeyPolicy") {
        None | Some(Value::Null) => None,
        Some(policy) => Some(
            engine::parse_unique_keys(policy.get("uniqueKeys").unwrap_or(&Value::Null))
                .map_err(|e| WireError::bad_request(format!("uniqueKeyPolicy: {e}")))?,
        ),
    };
    let invalid =
        |e: String| WireError::bad_request(format!("One of the specified inputs is invalid: {e}"));
    let computed = match definition.get("computedProperties") {
        None | Some(Value::Null) => Vec::new(),
        Some(props) => engine::parse_computed_properties(props).map_err(invalid)?,
    };
    engine::query::ComputedProperties::compile(
        computed.iter().map(|p| (p.name.as_str(), p.query.as_str())),
    )
    .map_err(|e| invalid(e.to_string()))?;
    let indexing_policy =
        IndexingPolicy::from_json(definition.get("indexingPolicy").unwrap_or(&Value::Null))
            .map_err(|e| WireError::bad_request(e.to_string()))?;
    Ok((default_ttl, unique_keys, computed, indexing_policy))
}

/// Gives a container created before the engine kept indexing policies
/// the one its definition holds (which the server used to echo itself), if
/// it is valid. Best effort: on a store that opened read-only the engine's
/// default stays until a writable start.
/// The registry's partition, parsed: databases with their containers,
/// offers, tombstones of unfinished deletions, the highest ordinal used.
struct Scan {
    /// Every registry document (users are built from them).
    items: Vec<engine::Document>,
    dbs: BTreeMap<String, DbEntry>,
    offers: BTreeMap<String, Offer>,
    dropped: Vec<(String, String)>,
    max_ordinal: u64,
}

impl Scan {
    fn read(db: &Database, system: &engine::Container) -> Result<Scan, engine::Error> {
        let page = system.read_feed(PARTITION, &FeedOptions::default())?;
        let mut dbs: BTreeMap<String, DbEntry> = BTreeMap::new();
        let mut colls = Vec::new();
        let mut dropped = Vec::new();
        let mut offers = BTreeMap::new();
        let mut max_ordinal = 0;
        for doc in &page.items {
            let value = doc.value();
            let ordinal = doc
                .id()
                .rsplit('-')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
            max_ordinal = max_ordinal.max(ordinal);
            let name = value["name"].as_str().unwrap_or_default().to_owned();
            match value["type"].as_str() {
                Some("database") => {
                    let rid_bytes = database_rid(ordinal);
                    dbs.insert(
                        name.clone(),
                        DbEntry {
                            name,
                            doc_id: doc.id().to_owned(),
                            rid: encode_rid(&rid_bytes),
                            rid_bytes,
                            etag: doc.etag().to_owned(),
                            ts: doc.ts(),
                            colls: BTreeMap::new(),
                        },
                    );
                }
                Some("collection") => colls.push(doc.clone()),
                Some("dropped") => dropped.push((
                    doc.id().to_owned(),
                    value["engine"].as_str().unwrap_or_default().to_owned(),
                )),
                Some("offer") => {
                    if let (Some(owner), Some(rid), Some(throughput)) = (
                        value["owner"].as_str(),
                        value["rid"].as_str(),
                        Throughput::from_content(&value["content"]),
                    ) {
                        offers.insert(
                            owner.to_owned(),
                            Offer {
                                rid: rid.to_owned(),
                                doc_id: doc.id().to_owned(),
                                throughput,
                                etag: doc.etag().to_owned(),
                                ts: doc.ts(),
                            },
                        );
                    }
                }
                _ => {}
            }
        }
        for doc in colls {
            let value = doc.value();
            let db_name = value["db"].as_str().unwrap_or_default();
            let Some(entry) = dbs.get_mut(db_name) else {
                continue;
            };
            let container = match db.container(value["engine"].as_str().unwrap_or_default()) {
                Ok(container) => Container::from(container),
                // Deleted meanwhile by another node (its tombstone is next).
                Err(engine::Error::ContainerNotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            let rid = container.resource_id();
            let definition = value["definition"].as_object().cloned().unwrap_or_default();
            adopt_indexing_policy(&container, &definition);
            // Stores written before physical partitions have one.
            let count = value["ranges"]
                .as_u64()
                .map_or(1, |n| n.clamp(1, u64::from(MAX_PHYSICAL_PARTITIONS)) as u32);
            let coll = CollEntry {
                name: value["name"].as_str().unwrap_or_default().to_owned(),
                doc_id: doc.id().to_owned(),
                self_link: collection_self_link(&rid),
                rid,
                container,
                ranges: CollEntry::ranges_for(count, &definition),
                definition,
                etag: doc.etag().to_owned(),
                ts: doc.ts(),
            };
            entry.colls.insert(coll.name.clone(), Arc::new(coll));
        }
        // Engine containers named by an earlier server that crashed before
        // its registry write must not be reused.
        for props in db.containers() {
            if let Some(n) = props
                .id
                .strip_prefix('c')
                .and_then(|rest| rest.split_once('-'))
                .and_then(|(n, _)| n.parse::<u64>().ok())
            {
                max_ordinal = max_ordinal.max(n);
            }
        }
        Ok(Scan {
            items: page.items,
            dbs,
            offers,
            dropped,
            max_ordinal,
        })
    }
}

fn adopt_indexing_policy(container: &Container, definition: &Map<String, Value>) {
    let given = match definition.get("indexingPolicy") {
        None | Some(Value::Null) => return,
        Some(given) => given,
    };
    if *container.indexing_policy() != IndexingPolicy::default() {
        return;
    }
    if let Ok(policy) = IndexingPolicy::from_json(given)
        && policy != IndexingPolicy::default()
    {
        // A refusal (read-only store, time to live under mode none) leaves
        // the default, which is what the engine enforces anyway.
        let _ = container.set_indexing_policy(policy);
    }
}

fn strip_system_properties(definition: &mut Map<String, Value>) {
    definition.retain(|k, _| !k.starts_with('_'));
}

/// Two servers' registries on one PostgreSQL store (`--features postgres`).
#[cfg(all(test, feature = "postgres"))]
mod tests {
    use super::*;

    fn open(url: &str) -> Database {
        Database::open_url(url, engine::Options::default()).expect("open the store")
    }

    fn definition(id: &str) -> Map<String, Value> {
        json!({"id": id, "partitionKey": {"paths": ["/pk"], "kind": "Hash"}})
            .as_object()
            .cloned()
            .unwrap()
    }

    /// Databases, containers and users one server creates are found by
    /// the other, which writes to them and lists them, and whose own
    /// creates take ordinals (and so rids and engine containers) the
    /// first server never gave.
    #[test]
    fn a_server_finds_what_another_server_created() {
        let url = engine::testing::postgres::database();
        let (a, b) = (open(&url), open(&url));
        let (ra, rb) = (Registry::load(&a).unwrap(), Registry::load(&b).unwrap());
        let blog = ra.create_database("blog", None).unwrap();
        assert_eq!(rb.database("blog").unwrap().rid, blog.rid);
        let posts = ra
            .create_collection("blog", definition("posts"), None)
            .unwrap();
        let found = rb.collection("blog", "posts").unwrap();
        assert_eq!(found.rid, posts.rid);
        found
            .container
            .create_item("k", json!({"id": "d", "pk": "k"}), None)
            .unwrap();
        assert_eq!(posts.container.read_item("k", "d").unwrap()["pk"], "k");
        ra.create_user("blog", "alice").unwrap();
        assert_eq!(rb.user("blog", "alice").unwrap().name, "alice");

        let other = rb.create_database("other", None).unwrap();
        assert_ne!(other.rid, blog.rid, "b's ordinal is past a's");
        let comments = rb
            .create_collection("blog", definition("comments"), None)
            .unwrap();
        assert_ne!(comments.container.id(), posts.container.id());
        let names: Vec<String> = ra.databases().into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["blog", "other"]);
        assert_eq!(
            ra.create_database("other", None).unwrap_err().status,
            409,
            "a name another server took"
        );
    }
}
