//! Containers: a set of logical partitions sharing a partition-key path.
//!
//! [`Container`] is a cheap handle (clone it freely) with the point
//! operations of the official Cosmos DB SDKs (`create_item`, `read_item`,
//! `replace_item`, `upsert_item`, `delete_item`), the read feed of one
//! logical partition, single-partition transactions and the change log.
//! Every point write is a one-operation transaction.
//!
//! Logical partitions live in one of the container's physical partitions
//! (see [`crate::partition::physical_partition`]); each physical partition
//! has its own map, so looking up partitions scales with them. The maps
//! hold the partitions in the cache ([`crate::cache`]): a partition not in
//! memory is read from storage when it is needed.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use host_api::{PartitionKey, PartitionKeyPath, ScriptKind};
use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use crate::database::DbInner;
use crate::document::Document;
use crate::error::{Error, Result, RetryWith};
use crate::indexing::{DocumentPath, IndexingMode, IndexingPolicy, SortOrder};
use crate::partition::{
    FOOTPRINT_PER_PARTITION, LogicalPartition, PartitionState, Slot, physical_partition,
};
use crate::query::{ComputedProperties, Needles, Query, QueryError};
use crate::settings::{ComputedProperty, Expiry, UniqueKey, UniqueKeys};
use crate::stamp::{Stamp, encode_rid};
use crate::storage::{Change, ContainerMeta, LoadedDocument, Lsn, ScriptRecord, Skipped};
use crate::txn::{ItemOptions, Txn};

/// How many reads of a logical partition that is not in memory load it
/// (see `ContainerInner::read_either`): reading a partition costs about as
/// much as reading a few of its documents one at a time, so loading pays
/// off for a partition read repeatedly, not for one read in passing.
pub(crate) const ADMIT_AFTER_READS: u32 = 4;

/// The database name in name-based links (`dbs/partita/colls/posts`).
pub const DATABASE_ID: &str = "partita";

/// How many sequence numbers (rids and etags) a node reserves at a time
/// in a store other nodes share: one statement per this many writes.
pub(crate) const SEQUENCE_BLOCK: u64 = 1000;

/// How many times [`Container::transaction`] (and the point writes and
/// [`Container::write_documents`] built on it) runs a transaction in all
/// when another node sharing the store keeps committing to its partition
/// first ([`Error::PartitionChanged`]).
pub const ATTEMPTS: usize = 10;

/// A container's definition, as given to [`crate::Database::create_container_with`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerProperties {
    /// The container id (1–255 characters, none of `/ \ ? #`).
    pub id: String,
    /// The partition-key path, such as `/postId` or `/a/b`; for a
    /// hierarchical key, the JSON array of its paths,
    /// `["/tenantId","/userId"]` (see [`ContainerProperties::hierarchical`]).
    pub partition_key_path: String,
    /// The number of physical partitions (default 4).
    pub physical_partitions: u32,
    /// Time to live (`defaultTtl`): `None` off (items' own `ttl` is
    /// ignored), -1 on without a default (items expire only when their own
    /// `ttl` says so), `n` items expire `n` seconds after their last write.
    /// Changeable with [`Container::set_default_ttl`].
    pub default_ttl: Option<i32>,
    /// The unique keys (`uniqueKeyPolicy`), unique within each logical
    /// partition; fixed at creation.
    pub unique_keys: Vec<UniqueKey>,
    /// The first 4 bytes of every `_rid` in the container and the database
    /// segment of its `_self` links: the rid of the database holding it
    /// (`partita serve` gives each of its databases one). `None` is the
    /// store's own, `Part`. Fixed at creation.
    pub database_rid: Option<[u8; 4]>,
    /// The computed properties (`computedProperties`): values queries read
    /// as top-level properties of each document, derived by a query,
    /// never stored. Changeable with [`Container::set_computed_properties`].
    pub computed_properties: Vec<ComputedProperty>,
    /// The indexing policy (`indexingPolicy`; the service's default when
    /// not given): the paths the range index keeps, which queries across
    /// partitions use (docs/indexing.md). Changeable with
    /// [`Container::set_indexing_policy`].
    pub indexing_policy: IndexingPolicy,
}

impl ContainerProperties {
    /// Properties with the default of 4 physical partitions.
    pub fn new(
        id: impl Into<String>,
        partition_key_path: impl Into<String>,
    ) -> ContainerProperties {
        ContainerProperties {
            id: id.into(),
            partition_key_path: partition_key_path.into(),
            physical_partitions: crate::DEFAULT_PHYSICAL_PARTITIONS,
            default_ttl: None,
            unique_keys: Vec::new(),
            database_rid: None,
            computed_properties: Vec::new(),
            indexing_policy: IndexingPolicy::default(),
        }
    }

    /// These properties with time to live `default_ttl` (see
    /// [`ContainerProperties::default_ttl`]).
    #[must_use]
    pub fn with_default_ttl(mut self, default_ttl: i32) -> ContainerProperties {
        self.default_ttl = Some(default_ttl);
        self
    }

    /// These properties with one more computed property, `name` derived by
    /// `query` (`SELECT VALUE <expression> FROM c`).
    #[must_use]
    pub fn with_computed_property(
        mut self,
        name: impl Into<String>,
        query: impl Into<String>,
    ) -> ContainerProperties {
        self.computed_properties
            .push(ComputedProperty::new(name, query));
        self
    }

    /// These properties with the indexing policy `policy` (see
    /// [`ContainerProperties::indexing_policy`]).
    #[must_use]
    pub fn with_indexing_policy(mut self, policy: IndexingPolicy) -> ContainerProperties {
        self.indexing_policy = policy;
        self
    }

    /// These properties with one more unique key over `paths`.
    #[must_use]
    pub fn with_unique_key<S: Into<String>>(
        mut self,
        paths: impl IntoIterator<Item = S>,
    ) -> ContainerProperties {
        self.unique_keys.push(UniqueKey::new(paths));
        self
    }

    /// Properties of a container with a hierarchical partition key (Cosmos
    /// DB's `MultiHash`): up to three paths, outermost level first. One
    /// path is an ordinary container.
    ///
    /// ```
    /// # use engine::{ContainerProperties, Database, PartitionKey};
    /// # use serde_json::json;
    /// let db = Database::in_memory();
    /// let sessions = db.create_container_with(ContainerProperties::hierarchical(
    ///     "sessions",
    ///     ["/tenantId", "/userId", "/sessionId"],
    /// ))?;
    /// let key = PartitionKey::multi(["t1", "u1", "s1"]);
    /// sessions.create_item(
    ///     key.clone(),
    ///     json!({"id": "a", "tenantId": "t1", "userId": "u1", "sessionId": "s1"}),
    ///     None,
    /// )?;
    /// assert_eq!(sessions.read_item(key, "a")?.id(), "a");
    /// # Ok::<(), engine::Error>(())
    /// ```
    pub fn hierarchical<P: AsRef<str>>(
        id: impl Into<String>,
        paths: impl IntoIterator<Item = P>,
    ) -> ContainerProperties {
        let paths: Vec<P> = paths.into_iter().collect();
        ContainerProperties::new(id, PartitionKeyPath::text_of(&paths).unwrap_or_default())
    }

    /// The partition-key paths, outermost level first (one for an ordinary
    /// container); the stored text as is if it does not parse.
    pub fn partition_key_paths(&self) -> Vec<String> {
        match PartitionKeyPath::parse(&self.partition_key_path) {
            Ok(path) => path.paths().map(str::to_owned).collect(),
            Err(_) => vec![self.partition_key_path.clone()],
        }
    }
}

/// Options of [`Container::read_feed`].
#[derive(Clone, Debug, Default)]
pub struct FeedOptions {
    /// The most documents per page (all when `None`).
    pub max_item_count: Option<usize>,
    /// Where the previous page stopped.
    pub continuation: Option<String>,
}

/// One page of a read feed.
#[derive(Clone, Debug)]
pub struct FeedPage {
    /// The documents, in insertion order.
    pub items: Vec<Document>,
    /// Pass this back to get the next page; `None` on the last page.
    pub continuation: Option<String>,
}

pub(crate) struct ContainerInner {
    pub(crate) meta: ContainerMeta,
    pub(crate) id: Arc<str>,
    pub(crate) path: PartitionKeyPath,
    /// The last sequence number handed out (rids and etags).
    seq: AtomicU64,
    /// Over a store other nodes share: the last number of the block of
    /// sequence numbers this node reserved ([`ContainerInner::take_seq`]);
    /// `None` when only this process writes the store.
    reserved: Option<Mutex<u64>>,
    /// What its documents' system properties are made of.
    stamp: Stamp,
    /// Per physical partition, its logical partitions in the cache
    /// (foldhash: looked up by every transaction).
    pub(crate) physical:
        Vec<RwLock<HashMap<PartitionKey, Arc<LogicalPartition>, foldhash::quality::RandomState>>>,
    /// Stored procedures, triggers and UDFs by kind and id.
    pub(crate) scripts: RwLock<HashMap<(ScriptKind, String), Arc<ScriptRecord>>>,
    /// False once the container is deleted. Every write to storage for the
    /// container holds the read lock across the storage call and checks it
    /// (`ContainerInner::alive`); deletion takes the write lock, so no write
    /// of a deleted container can reach storage after its deletion did.
    alive: RwLock<bool>,
    /// The current `defaultTtl`, 0 when time to live is off (0 is never a
    /// valid value); read by every read and transaction.
    default_ttl: AtomicI64,
    /// Serializes changes of the settings, so storage and memory agree.
    settings_lock: Mutex<()>,
    /// The unique keys, parsed.
    pub(crate) unique_keys: UniqueKeys,
    /// The computed properties as defined and compiled; replaced whole
    /// under `settings_lock`, read by every query.
    computed: RwLock<Arc<(Vec<ComputedProperty>, ComputedProperties)>>,
    /// The indexing policy; replaced whole under `settings_lock`.
    indexing: RwLock<Arc<IndexingPolicy>>,
}

impl ContainerInner {
    /// A container whose highest sequence number so far is `max_seq`, in
    /// a store other nodes share or not.
    pub(crate) fn new(meta: ContainerMeta, max_seq: u64, shared: bool) -> Result<ContainerInner> {
        let path = PartitionKeyPath::parse(&meta.partition_key_path)
            .map_err(|e| Error::BadRequest(e.to_string()))?;
        let physical = (0..meta.physical_partitions.max(1))
            .map(|_| RwLock::default())
            .collect();
        let computed =
            crate::settings::compile_computed_properties(&meta.id, &meta.computed_properties)?;
        Ok(ContainerInner {
            computed: RwLock::new(Arc::new((meta.computed_properties.clone(), computed))),
            indexing: RwLock::new(Arc::new(meta.indexing_policy.clone())),
            default_ttl: AtomicI64::new(meta.default_ttl.map_or(0, i64::from)),
            settings_lock: Mutex::new(()),
            unique_keys: UniqueKeys::new(&meta.unique_keys),
            id: Arc::from(meta.id.as_str()),
            stamp: Stamp::of(&meta),
            meta,
            path,
            seq: AtomicU64::new(max_seq),
            // Nothing reserved yet: the first write reserves a block.
            reserved: shared.then(|| Mutex::new(0)),
            physical,
            scripts: RwLock::default(),
            alive: RwLock::new(true),
        })
    }

    /// A guard that the container is not deleted while it is held, for a
    /// write to storage; [`Error::ContainerNotFound`] (404) if it already is.
    pub(crate) fn alive(&self) -> Result<parking_lot::RwLockReadGuard<'_, bool>> {
        let alive = self.alive.read();
        if *alive {
            Ok(alive)
        } else {
            Err(Error::ContainerNotFound(self.meta.id.clone()))
        }
    }

    /// Marks the container deleted once `delete` (the storage deletion)
    /// succeeded, waiting for storage writes in flight to finish first.
    pub(crate) fn retire(&self, delete: impl FnOnce() -> Result<()>) -> Result<()> {
        let mut alive = self.alive.write();
        if !*alive {
            return Err(Error::ContainerNotFound(self.meta.id.clone()));
        }
        delete()?;
        *alive = false;
        Ok(())
    }

    /// The current computed properties, compiled.
    pub(crate) fn computed(&self) -> Arc<(Vec<ComputedProperty>, ComputedProperties)> {
        self.computed.read().clone()
    }

    /// The current indexing policy.
    pub(crate) fn indexing_policy(&self) -> Arc<IndexingPolicy> {
        self.indexing.read().clone()
    }

    /// Parses `sql` for this container: its computed properties resolved,
    /// and refused as the service refuses it when the indexing policy
    /// cannot serve its ORDER BY (several paths and no composite index of
    /// them, or one path the policy excludes). Only ORDER BY items that
    /// are plain paths of the document are checked.
    pub(crate) fn parse_query(&self, sql: &str) -> std::result::Result<Query, QueryError> {
        let query = crate::query::parse_with(sql, &self.computed().1)?;
        if let Some(paths) = query.order_by_paths() {
            let items: Vec<_> = paths
                .into_iter()
                .map(|(labels, descending)| {
                    let order = if descending {
                        SortOrder::Descending
                    } else {
                        SortOrder::Ascending
                    };
                    (DocumentPath::of_labels(labels), order)
                })
                .collect();
            self.indexing_policy().order_by_index(&items)?;
        }
        Ok(query)
    }

    /// The settings as they are now, for a storage update.
    fn current_meta(&self) -> ContainerMeta {
        ContainerMeta {
            default_ttl: self.default_ttl(),
            computed_properties: self.computed().0.clone(),
            indexing_policy: (*self.indexing_policy()).clone(),
            ..self.meta.clone()
        }
    }

    /// Takes the changeable settings of `meta` and the `scripts` another
    /// node stored (a catalog reload over a shared store), in place of
    /// the ones held; a script whose version is unchanged keeps its
    /// `Arc`. Computed properties that do not compile here (they compiled
    /// on the node that stored them) keep the current ones.
    pub(crate) fn adopt(&self, meta: &ContainerMeta, scripts: Vec<ScriptRecord>) {
        let _settings = self.settings_lock.lock();
        self.default_ttl
            .store(meta.default_ttl.map_or(0, i64::from), Ordering::Release);
        if self.computed().0 != meta.computed_properties
            && let Ok(compiled) =
                crate::settings::compile_computed_properties(&meta.id, &meta.computed_properties)
        {
            *self.computed.write() = Arc::new((meta.computed_properties.clone(), compiled));
        }
        if *self.indexing_policy() != meta.indexing_policy {
            *self.indexing.write() = Arc::new(meta.indexing_policy.clone());
        }
        let mut held = self.scripts.write();
        let adopted = scripts
            .into_iter()
            .map(|script| {
                let key = (script.kind, script.id.clone());
                let same = held
                    .get(&key)
                    .filter(|h| h.version == script.version && h.body == script.body)
                    .cloned();
                (key, same.unwrap_or_else(|| Arc::new(script)))
            })
            .collect();
        *held = adopted;
    }

    /// The current `defaultTtl`; `None` when time to live is off.
    pub(crate) fn default_ttl(&self) -> Option<i32> {
        match self.default_ttl.load(Ordering::Acquire) {
            0 => None,
            n => i32::try_from(n).ok(),
        }
    }

    /// When items expire as of `now()`, or `None` (without reading the
    /// clock) when time to live is off.
    pub(crate) fn expiry(&self, now: impl FnOnce() -> u64) -> Option<Expiry> {
        match self.default_ttl.load(Ordering::Acquire) {
            0 => None,
            default_ttl => Some(Expiry {
                default_ttl,
                now: now(),
            }),
        }
    }

    /// The next sequence number, for a write whose number no one reads
    /// back (a delete, a script's version): over a shared store it may
    /// lie past this node's block when the block has run out.
    pub(crate) fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The next sequence number for a document's rid and etag, unique
    /// across nodes: over a shared store from this node's block, reserving
    /// the next block of [`SEQUENCE_BLOCK`] in storage (one statement)
    /// when it has run out.
    ///
    /// # Errors
    /// [`Error::Storage`] when the store cannot reserve.
    pub(crate) fn take_seq(&self, db: &DbInner) -> Result<u64> {
        let Some(reserved) = &self.reserved else {
            return Ok(self.next_seq());
        };
        let mut end = reserved.lock();
        let seq = self.next_seq();
        if seq <= *end {
            return Ok(seq);
        }
        *end = db.storage.reserve_sequence(&self.meta.id, SEQUENCE_BLOCK)?;
        let first = *end - SEQUENCE_BLOCK + 1;
        self.seq.store(first, Ordering::Relaxed);
        Ok(first)
    }

    /// `dbs/{dbRid}/colls/{collRid}/`.
    pub(crate) fn self_link(&self) -> String {
        let prefix = self.stamp.self_prefix();
        prefix.strip_suffix("docs/").unwrap_or(prefix).to_owned()
    }

    /// The rid of a document `_rid` of this container, if it is one.
    pub(crate) fn decode_document_rid(&self, text: &str) -> Option<u64> {
        let bytes = STANDARD.decode(text.replace('-', "/")).ok()?;
        let bytes: [u8; 16] = bytes.try_into().ok()?;
        (bytes[..8] == *self.stamp.rid_prefix())
            .then(|| u64::from_be_bytes(bytes[8..].try_into().expect("8 bytes")))
    }

    /// `key` as this container's partitions are keyed, full or a prefix: a
    /// hierarchical container's keys are always [`PartitionKey::Multi`]
    /// (a scalar is a one-level prefix), an ordinary container's never.
    ///
    /// # Errors
    /// [`Error::BadRequest`] for more components than the container has
    /// levels.
    pub(crate) fn scoped_key(&self, key: PartitionKey) -> Result<PartitionKey> {
        let levels = self.path.levels();
        let n = key.components().len();
        if n > levels || (levels == 1 && n != 1) {
            return Err(Error::BadRequest(format!(
                "partition key {key} has {n} components, but container {:?} has {levels} \
                 partition-key path{} ({})",
                self.meta.id,
                if levels == 1 { "" } else { "s" },
                self.path
            )));
        }
        Ok(match key {
            PartitionKey::Multi(components) if levels == 1 => components.into_vec().remove(0),
            key if levels == 1 => key,
            key @ PartitionKey::Multi(_) => key,
            scalar => PartitionKey::Multi(Box::new([scalar])),
        })
    }

    /// `key` as [`ContainerInner::scoped_key`] gives it, which must be a full
    /// key: the key of one logical partition.
    ///
    /// # Errors
    /// As [`ContainerInner::scoped_key`], and
    /// [`Error::IncompletePartitionKey`] for a prefix.
    pub(crate) fn full_key(&self, key: PartitionKey) -> Result<PartitionKey> {
        let key = self.scoped_key(key)?;
        let levels = self.path.levels();
        if key.components().len() < levels {
            return Err(Error::IncompletePartitionKey {
                container: self.meta.id.clone(),
                partition_key: key,
                levels,
            });
        }
        Ok(key)
    }

    fn physical_index(&self, key: &PartitionKey) -> usize {
        physical_partition(key, self.meta.physical_partitions) as usize
    }

    /// The logical partition for `key` if it is in memory, without
    /// creating it.
    pub(crate) fn find(&self, key: &PartitionKey) -> Option<Arc<LogicalPartition>> {
        self.physical[self.physical_index(key)]
            .read()
            .get(key)
            .cloned()
    }

    /// The logical partition for `key`, in the cache: created if needed,
    /// its documents not read yet over a storage that keeps them.
    pub(crate) fn partition(&self, db: &DbInner, key: PartitionKey) -> Arc<LogicalPartition> {
        let physical = &self.physical[self.physical_index(&key)];
        if let Some(p) = physical.read().get(&key) {
            db.cache.touch(p);
            return p.clone();
        }
        let (partition, created) = {
            let mut map = physical.write();
            match map.get(&key) {
                Some(p) => (p.clone(), false),
                None => {
                    let p = Arc::new(LogicalPartition::new(
                        key.clone(),
                        !db.storage.keeps_documents(),
                    ));
                    map.insert(key, p.clone());
                    (p, true)
                }
            }
        };
        db.cache.touch(&partition);
        if created && db.cache.charge(&partition, FOOTPRINT_PER_PARTITION) {
            db.evict();
        }
        partition
    }

    /// The logical partition for `key` with its documents in memory, read
    /// from storage if they are not.
    ///
    /// # Errors
    /// [`Error::Storage`] when storage cannot be read.
    pub(crate) fn loaded_partition(
        &self,
        db: &DbInner,
        key: PartitionKey,
    ) -> Result<Arc<LogicalPartition>> {
        self.load(db, self.partition(db, key))
    }

    /// Reads `partition`'s documents from storage unless they are in
    /// memory.
    fn load(
        &self,
        db: &DbInner,
        partition: Arc<LogicalPartition>,
    ) -> Result<Arc<LogicalPartition>> {
        if partition.is_loaded() {
            return Ok(partition);
        }
        let over = {
            let _loading = partition.loading.lock();
            if partition.is_loaded() {
                false
            } else {
                let (state, version) = self.read_state(db, &partition.key)?;
                install(db, &partition, state, version)
            }
        };
        if over {
            db.evict();
        }
        Ok(partition)
    }

    /// After a detached transaction's commit on `partition` failed (see
    /// [`Txn::begin_detached`]), which may have reached storage
    /// unacknowledged: installs the partition as it was before, storage's
    /// documents with the ids the transaction wrote as `before` had them,
    /// so reads show only acknowledged commits. The caller holds the
    /// partition's `loading` lock and pins it. If storage cannot be read,
    /// the partition stays unloaded.
    ///
    /// Over a shared store the copy is marked with `base_version`, the
    /// version the transaction read: other nodes read what storage holds,
    /// so this node must not keep a copy that differs from it under
    /// storage's version. A commit that did reach storage moved the
    /// version, and reads then go to storage as after another node's
    /// commit.
    pub(crate) fn install_before(
        &self,
        db: &DbInner,
        partition: &LogicalPartition,
        before: &PartitionState,
        ids: &[&str],
        base_version: u64,
    ) {
        let Ok((mut state, version)) = self.read_state(db, &partition.key) else {
            return;
        };
        for &id in ids {
            match before.get(id) {
                Some(slot) => state.put(Arc::from(id), slot.clone()),
                None => state.remove(id),
            }
        }
        let version = if db.shared { base_version } else { version };
        // Over the budget or not, it stays: it is about to be pinned.
        install(db, partition, state, version);
    }

    /// A logical partition's documents as storage has them, and, over a
    /// shared store, the partition's version, read first: the documents
    /// are at least that version (see [`Storage::partition_version`]).
    ///
    /// [`Storage::partition_version`]: crate::storage::Storage::partition_version
    fn read_state(&self, db: &DbInner, key: &PartitionKey) -> Result<(PartitionState, u64)> {
        let version = self.stored_version(db, key)?;
        let mut state = PartitionState::default();
        for doc in db.storage.read_partition(&self.meta.id, key)? {
            put_loaded(&mut state, doc);
        }
        Ok((state, version))
    }

    /// The partition's version in a shared store (one statement); 0,
    /// without asking, in a store no other node writes.
    pub(crate) fn stored_version(&self, db: &DbInner, key: &PartitionKey) -> Result<u64> {
        if db.shared {
            let versions = db.storage.partition_version(&self.meta.id, key)?;
            db.saw_catalog(versions.catalog);
            Ok(versions.partition)
        } else {
            Ok(0)
        }
    }

    /// Whether `partition`'s documents in memory are still what storage
    /// holds: always over a store no other node writes; over a shared one,
    /// when its version in storage is the one they were read or committed
    /// at (one statement).
    ///
    /// # Errors
    /// [`Error::Storage`] when storage cannot be read.
    fn is_current(&self, db: &DbInner, partition: &LogicalPartition) -> Result<bool> {
        if !db.shared {
            return Ok(true);
        }
        Ok(self.stored_version(db, &partition.key)? == partition.version())
    }

    /// For a transaction that holds `partition`'s writer lock over a shared
    /// store: makes sure its documents in memory are the latest, reading
    /// them again when another node committed since they were read (or a
    /// failed commit unloaded them). Returns the version they are at.
    ///
    /// # Errors
    /// [`Error::Storage`] when storage cannot be read.
    pub(crate) fn refresh(&self, db: &DbInner, partition: &LogicalPartition) -> Result<u64> {
        if partition.is_loaded() && self.is_current(db, partition)? {
            return Ok(partition.version());
        }
        let over = {
            let _loading = partition.loading.lock();
            let (state, version) = self.read_state(db, &partition.key)?;
            install(db, partition, state, version)
        };
        if over {
            db.evict();
        }
        Ok(partition.version())
    }

    /// `memory(partition)` when the partition's documents are in memory
    /// (they stay once they are); otherwise `storage()`, holding the
    /// partition's `loading` lock so that no transaction begins on it
    /// meanwhile.
    ///
    /// A read that `admits` is a use of this one partition (a point read,
    /// its read feed or query): its entry stays in the cache, unloaded, and
    /// the [`ADMIT_AFTER_READS`]th such read while it is there loads the
    /// partition, so a partition read again and again is served from
    /// memory, while one read now and then costs one storage read instead
    /// of reading every document of its partition. Any other read (one
    /// partition of many) leaves no entry behind, unless `storage` loaded
    /// it (a whole partition read while the cache has room to spare).
    fn read_either<T>(
        &self,
        db: &DbInner,
        partition: Arc<LogicalPartition>,
        admits: bool,
        memory: impl FnOnce(&LogicalPartition) -> T,
        storage: impl FnOnce(&LogicalPartition) -> Result<T>,
    ) -> Result<T> {
        if partition.is_loaded() {
            if self.is_current(db, &partition)? {
                return Ok(memory(&partition));
            }
            // Another node committed to it since: read through storage; the
            // next transaction on it here reads it again.
            return storage(&partition);
        }
        if admits && partition.reads.fetch_add(1, Ordering::Relaxed) + 1 >= ADMIT_AFTER_READS {
            let partition = self.load(db, partition)?;
            return Ok(memory(&partition));
        }
        let loading = partition.loading.lock();
        if partition.is_loaded() {
            return Ok(memory(&partition));
        }
        let res = storage(&partition);
        drop(loading);
        if !admits {
            // Ours and the map's: nobody else uses it, nothing is loaded.
            let physical = &self.physical[self.physical_index(&partition.key)];
            let mut map = physical.write();
            if Arc::strong_count(&partition) == 2 && !partition.is_loaded() {
                map.remove(&partition.key);
                drop(map);
                db.cache.release(&partition, false);
            }
        }
        res
    }

    /// A snapshot of one logical partition's committed documents, read
    /// from storage when they are not in memory: a read that `admits` is a
    /// use of this partition alone (see [`ContainerInner::read_either`]);
    /// one that does not (one of many partitions a query reads) never
    /// enters the cache, so it cannot evict the hot partitions.
    ///
    /// # Errors
    /// [`Error::Storage`] when storage cannot be read.
    pub(crate) fn peek(
        &self,
        db: &DbInner,
        key: &PartitionKey,
        admits: bool,
    ) -> Result<Arc<PartitionState>> {
        if !db.storage.keeps_documents() {
            // Memory is the only copy: nothing to read, nothing to create.
            return Ok(self.find(key).map(|p| p.snapshot()).unwrap_or_default());
        }
        let partition = self.partition(db, key.clone());
        self.read_either(db, partition, admits, LogicalPartition::snapshot, |p| {
            let (state, version) = self.read_state(db, key)?;
            // Room to spare (nothing would be evicted for it): it stays,
            // unless a stale copy is in memory (a transaction replaces that).
            if p.is_loaded()
                || !db
                    .cache
                    .has_room(FOOTPRINT_PER_PARTITION + state.footprint())
            {
                return Ok(Arc::new(state));
            }
            if install(db, p, state, version) {
                // Another thread took the room meanwhile.
                db.evict();
            }
            Ok(p.snapshot())
        })
    }

    /// [`ContainerInner::peek`] of one of the partitions a query reads:
    /// whole from memory when the partition is there, and from storage
    /// while the cache has a quarter of its budget free (it may stay, as
    /// with `peek`); otherwise from storage without parsing the documents
    /// whose text lacks one of `needles`, which come back in rid order as
    /// [`Skipped`], and without entering the cache.
    ///
    /// # Errors
    /// [`Error::Storage`] when storage cannot be read.
    pub(crate) fn peek_containing(
        &self,
        db: &DbInner,
        key: &PartitionKey,
        needles: &Needles,
    ) -> Result<(Arc<PartitionState>, Vec<Skipped>)> {
        if needles.is_empty() || !db.storage.keeps_documents() || db.cache.has_room_to_fill() {
            return Ok((self.peek(db, key, false)?, Vec::new()));
        }
        let partition = self.partition(db, key.clone());
        let memory = |p: &LogicalPartition| (p.snapshot(), Vec::new());
        self.read_either(db, partition, false, memory, |_| {
            let (docs, mut skipped) =
                db.storage
                    .read_partition_containing(&self.meta.id, key, needles)?;
            let mut state = PartitionState::default();
            for doc in docs {
                put_loaded(&mut state, doc);
            }
            skipped.sort_unstable_by_key(|s| s.rid);
            Ok((Arc::new(state), skipped))
        })
    }

    /// The documents of `key` whose rids are among `rids` (ascending; its
    /// others may be there too): the partition's snapshot when it is in
    /// memory, otherwise those documents alone, read from storage without
    /// entering the cache.
    ///
    /// # Errors
    /// [`Error::Storage`] when storage cannot be read.
    pub(crate) fn peek_rids(
        &self,
        db: &DbInner,
        key: &PartitionKey,
        rids: &[u64],
    ) -> Result<Arc<PartitionState>> {
        if !db.storage.keeps_documents() {
            return self.peek(db, key, false);
        }
        // Only those documents, even while the cache has room to fill:
        // reading the whole partition for them costs as many times more as
        // it holds documents (sixty for a blog post and its reactions).
        let partition = self.partition(db, key.clone());
        self.read_either(db, partition, false, LogicalPartition::snapshot, |_| {
            let mut state = PartitionState::default();
            for doc in db.storage.read_documents(&self.meta.id, key, rids)? {
                put_loaded(&mut state, doc);
            }
            Ok(Arc::new(state))
        })
    }

    /// The committed document `id` of one logical partition, read from
    /// storage alone when the partition is not in memory (repeated reads
    /// load it: see [`ContainerInner::read_either`]).
    ///
    /// # Errors
    /// [`Error::Storage`] when storage cannot be read.
    pub(crate) fn read_document(
        &self,
        db: &DbInner,
        key: &PartitionKey,
        id: &str,
    ) -> Result<Option<Document>> {
        let in_memory =
            |p: &LogicalPartition| p.snapshot().get(id).map(|slot| slot.document.clone());
        if !db.storage.keeps_documents() {
            return Ok(self.find(key).and_then(|p| in_memory(&p)));
        }
        let partition = self.partition(db, key.clone());
        self.read_either(db, partition, true, in_memory, |_| {
            let stored = db.storage.read_document(&self.meta.id, key, id)?;
            Ok(stored.map(|d| d.document))
        })
    }

    /// Sets `_rid`, `_self`, `_etag`, `_attachments` and `_ts` (to `ts`) on
    /// a document being written; see [`Stamp::apply`].
    pub(crate) fn stamp(&self, doc: &mut Value, rid: u64, seq: u64, ts: u64) -> usize {
        self.stamp.apply(doc, rid, seq, ts)
    }
}

/// Adds a document read from storage to `state`.
fn put_loaded(state: &mut PartitionState, doc: LoadedDocument) {
    let slot = Slot {
        rid: doc.rid,
        size: doc.size,
        document: doc.document,
    };
    state.put(Arc::from(slot.document.id()), slot);
}

/// Installs `state`, just read from storage under `partition`'s `loading`
/// lock (at `version` of a shared store), and counts it in the cache;
/// returns whether the cache is now over its budget.
fn install(
    db: &DbInner,
    partition: &LogicalPartition,
    state: PartitionState,
    version: u64,
) -> bool {
    let bytes = FOOTPRINT_PER_PARTITION + state.footprint();
    partition.install(state, version);
    db.cache.loaded();
    db.cache.charge(partition, bytes)
}

/// One page of a partition's documents in rid order, resuming after the rid
/// in `continuation`, with the page's total size in bytes (the stored sizes,
/// so nothing is measured again); documents expired by `expiry` are left out.
pub(crate) fn feed_page(
    state: &PartitionState,
    max_item_count: Option<usize>,
    continuation: Option<&str>,
    expiry: Option<&Expiry>,
) -> Result<(Vec<Document>, Option<String>, u64)> {
    let after = match continuation.filter(|c| !c.is_empty()) {
        None => None,
        Some(token) => Some(token.parse::<u64>().map_err(|_| {
            Error::BadRequest(format!("invalid read-feed continuation token {token:?}"))
        })?),
    };
    let max = max_item_count.unwrap_or(usize::MAX).max(1);
    let mut items = Vec::new();
    let mut last = None;
    let mut more = false;
    let mut bytes = 0;
    for slot in state.scan_after(after) {
        if expiry.is_some_and(|e| e.expired(slot.document.value())) {
            continue;
        }
        if items.len() == max {
            more = true;
            break;
        }
        items.push(slot.document.clone());
        bytes += slot.size as u64;
        last = Some(slot.rid);
    }
    let continuation = if more {
        last.map(|rid| rid.to_string())
    } else {
        None
    };
    Ok((items, continuation, bytes))
}

/// A policy built in Rust (its fields are public) checked and completed
/// as [`IndexingPolicy::from_json`] checks and completes one from JSON.
///
/// # Errors
/// [`Error::BadRequest`] naming the container and the service's reason.
pub(crate) fn checked_indexing_policy(
    container: &str,
    policy: &IndexingPolicy,
) -> Result<IndexingPolicy> {
    IndexingPolicy::from_json(&policy.to_json())
        .map_err(|e| Error::BadRequest(format!("container {container:?}: {e}")))
}

/// Time to live needs an index, so it cannot be on under mode `none` (the
/// service's rule).
///
/// # Errors
/// [`Error::BadRequest`] naming the container.
pub(crate) fn check_ttl_with_mode(
    container: &str,
    default_ttl: Option<i32>,
    mode: IndexingMode,
) -> Result<()> {
    if default_ttl.is_some() && mode == IndexingMode::None {
        return Err(Error::BadRequest(format!(
            "container {container:?}: time to live (defaultTtl) needs an index, so it cannot be on \
             while the indexing mode is none; use mode consistent with /* excluded to index nothing"
        )));
    }
    Ok(())
}

/// A handle to one container. Cheap to clone.
#[derive(Clone)]
pub struct Container {
    pub(crate) db: Arc<DbInner>,
    pub(crate) inner: Arc<ContainerInner>,
}

impl Container {
    /// The data directory of the container's database (see
    /// [`Database::data_dir`](crate::Database::data_dir)).
    pub fn data_dir(&self) -> Option<&std::path::Path> {
        self.db.dir.as_deref()
    }

    /// The container id.
    pub fn id(&self) -> &str {
        &self.inner.meta.id
    }

    /// The container's definition.
    pub fn properties(&self) -> ContainerProperties {
        // Another node's settings, if a statement showed they changed;
        // should storage fail, the ones this node holds.
        let _ = self.db.sync_if_behind();
        ContainerProperties {
            id: self.inner.meta.id.clone(),
            partition_key_path: self.inner.meta.partition_key_path.clone(),
            physical_partitions: self.inner.meta.physical_partitions,
            default_ttl: self.inner.default_ttl(),
            unique_keys: self.inner.meta.unique_keys.clone(),
            database_rid: self.inner.meta.database_rid,
            computed_properties: self.inner.computed().0.clone(),
            indexing_policy: (*self.inner.indexing_policy()).clone(),
        }
    }

    /// The container's indexing policy.
    pub fn indexing_policy(&self) -> Arc<IndexingPolicy> {
        self.inner.indexing_policy()
    }

    /// How far the range index under the current policy is built, in
    /// percent of the documents (what the service reports as
    /// `x-ms-documentdb-collection-index-transformation-progress`): 100
    /// once built, and for a store that keeps no index.
    ///
    /// # Errors
    /// [`Error::Storage`] when storage cannot be read.
    pub fn index_progress(&self) -> Result<u32> {
        Ok(self
            .db
            .storage
            .index_progress(&self.inner.meta.id)?
            .unwrap_or(100))
    }

    /// Replaces the container's indexing policy, durably, completed as the
    /// service completes it (see [`IndexingPolicy::from_json`]). A durable
    /// store builds the new index in the background (see
    /// [`Container::index_progress`]); queries scan until it is built.
    ///
    /// # Errors
    /// [`Error::BadRequest`] for a policy [`IndexingPolicy::from_json`]
    /// would refuse, or mode `none` while time to live is on;
    /// [`Error::ContainerNotFound`] once the container is deleted;
    /// [`Error::ReadOnly`] and storage errors.
    pub fn set_indexing_policy(&self, policy: IndexingPolicy) -> Result<()> {
        let policy = Arc::new(checked_indexing_policy(&self.inner.meta.id, &policy)?);
        self.update_settings(
            |meta| meta.indexing_policy = (*policy).clone(),
            || *self.inner.indexing.write() = policy.clone(),
        )
    }

    /// Writes the container's settings as `edit` changes the current ones,
    /// durably, then `apply`s them in memory: under the settings lock, so
    /// a change of one setting never undoes another's, and only while the
    /// container is not deleted. Time to live and mode `none` are checked
    /// together here, whichever changed.
    fn update_settings(
        &self,
        edit: impl FnOnce(&mut ContainerMeta),
        apply: impl FnOnce(),
    ) -> Result<()> {
        self.db.check_writable()?;
        // Another node's change first, so this one does not undo it.
        self.db.sync_catalog()?;
        let _settings = self.inner.settings_lock.lock();
        let mut meta = self.inner.current_meta();
        edit(&mut meta);
        check_ttl_with_mode(
            &meta.id,
            meta.default_ttl,
            meta.indexing_policy.indexing_mode,
        )?;
        let alive = self.inner.alive()?;
        self.db
            .storage
            .update_container(&meta)
            .inspect_err(|e| self.db.mark_failed(e))?;
        apply();
        drop(alive);
        Ok(())
    }

    /// Changes the container's time to live (`defaultTtl`, see
    /// [`ContainerProperties::default_ttl`]), durably. Items expire by the
    /// new value from now on: turning it on or shortening it can expire
    /// items at once.
    ///
    /// # Errors
    /// [`Error::BadRequest`] for 0 or a value below -1;
    /// [`Error::ContainerNotFound`] once the container is deleted;
    /// [`Error::ReadOnly`] and storage errors.
    pub fn set_default_ttl(&self, default_ttl: Option<i32>) -> Result<()> {
        crate::settings::validate_default_ttl(&self.inner.meta.id, default_ttl)?;
        self.update_settings(
            |meta| meta.default_ttl = default_ttl,
            || {
                self.inner
                    .default_ttl
                    .store(default_ttl.map_or(0, i64::from), Ordering::Release);
            },
        )?;
        if default_ttl.is_some() {
            crate::database::start_purger(&self.db);
        }
        Ok(())
    }

    /// Replaces the container's computed properties (see
    /// [`ContainerProperties::computed_properties`]), durably; the next
    /// query sees the new ones.
    ///
    /// # Errors
    /// [`Error::BadRequest`] naming the property and the rule it breaks
    /// (see [`crate::query::ComputedProperties`]);
    /// [`Error::ContainerNotFound`] once the container is deleted;
    /// [`Error::ReadOnly`] and storage errors.
    pub fn set_computed_properties(&self, props: Vec<ComputedProperty>) -> Result<()> {
        let compiled = crate::settings::compile_computed_properties(&self.inner.meta.id, &props)?;
        let current = Arc::new((props, compiled));
        self.update_settings(
            |meta| meta.computed_properties = current.0.clone(),
            || *self.inner.computed.write() = current.clone(),
        )
    }

    /// Deletes every document of the logical partition `partition_key` in
    /// one transaction (each a delete in the change log), and returns how
    /// many it deleted; an empty or unknown partition deletes nothing.
    ///
    /// # Errors
    /// [`Error::LockTimeout`], [`Error::ReadOnly`], storage errors.
    pub fn delete_all_items_by_partition_key(
        &self,
        partition_key: impl Into<PartitionKey>,
    ) -> Result<usize> {
        self.transaction(partition_key.into(), |txn| Ok::<_, Error>(txn.delete_all()))
    }

    /// Deletes the expired documents of every logical partition now, each
    /// partition's in one transaction (deletes in the change log), and
    /// returns how many. The documents are invisible from the moment they
    /// expire either way.
    ///
    /// # Errors
    /// [`Error::LockTimeout`], [`Error::ReadOnly`], storage errors.
    pub fn purge_expired(&self) -> Result<usize> {
        Ok(self.purge_expired_after(None, usize::MAX)?.0)
    }

    /// [`Container::purge_expired`] for at most `max` logical partitions,
    /// those whose keys follow `after` in key order: the database's
    /// background purge goes through a large container a slice at a time.
    /// Returns how many documents it deleted and the last key it visited
    /// (`None` once it reached the end).
    pub(crate) fn purge_expired_after(
        &self,
        after: Option<&PartitionKey>,
        max: usize,
    ) -> Result<(usize, Option<PartitionKey>)> {
        let Some(expiry) = self.inner.expiry(|| self.db.now_secs()) else {
            return Ok((0, None));
        };
        let keys = self.partition_keys()?;
        let start = after.map_or(0, |after| keys.partition_point(|k| k <= after));
        let slice = &keys[start..];
        let mut purged = 0;
        // In memory or not: the ones in storage are read without entering
        // the cache.
        for key in slice.iter().take(max) {
            let any = self
                .inner
                .peek(&self.db, key, false)?
                .documents()
                .any(|doc| expiry.expired(doc.value()));
            if any {
                purged +=
                    self.transaction(key.clone(), |txn| Ok::<_, Error>(txn.purge_expired()))?;
            }
        }
        let last = (slice.len() > max).then(|| slice[max - 1].clone());
        Ok((purged, last))
    }

    /// The container's resource id (`_rid`), the collection segment of its
    /// documents' `_self` links (Cosmos DB's 8-byte collection rid, base64).
    pub fn resource_id(&self) -> String {
        encode_rid(self.inner.stamp.rid_prefix())
    }

    /// The partition-key path.
    pub fn partition_key_path(&self) -> &PartitionKeyPath {
        &self.inner.path
    }

    /// Reads a document's partition key as this container defines it (the
    /// undefined key, [`PartitionKey::None`], where the document has no
    /// value or an object or array at the path).
    pub fn partition_key_of(&self, doc: &Value) -> PartitionKey {
        self.inner.path.extract(doc)
    }

    /// The physical partition holding `key`.
    pub fn physical_partition(&self, key: &PartitionKey) -> u32 {
        physical_partition(key, self.inner.meta.physical_partitions)
    }

    /// Begins a transaction on one logical partition. Prefer
    /// [`Container::transaction`], which cannot forget to commit.
    ///
    /// # Errors
    /// [`Error::LockTimeout`] when another transaction holds the partition
    /// for longer than the lock timeout; [`Error::IncompletePartitionKey`]
    /// for a prefix of a hierarchical key.
    pub fn begin(&self, partition_key: impl Into<PartitionKey>) -> Result<Txn> {
        Txn::begin(
            self.db.clone(),
            self.inner.clone(),
            partition_key.into(),
            None,
        )
    }

    /// [`Container::begin`] for a transaction that must end within `limit`
    /// of this call (waiting for the lock counts): past its deadline, the
    /// next writer of the partition takes the partition over, and this
    /// transaction's operations and commit fail with [`Error::Abandoned`]
    /// (408), nothing it wrote committed. A commit that started before the
    /// takeover completes. For callers that may be stuck where they cannot
    /// be interrupted (the facade gives every script call a deadline); a
    /// transaction begun with [`Container::begin`] is never taken over.
    ///
    /// # Errors
    /// As [`Container::begin`].
    pub fn begin_with_deadline(
        &self,
        partition_key: impl Into<PartitionKey>,
        limit: Duration,
    ) -> Result<Txn> {
        Txn::begin(
            self.db.clone(),
            self.inner.clone(),
            partition_key.into(),
            Some(limit),
        )
    }

    /// Runs `f` in a transaction on one logical partition: commits if it
    /// returns `Ok`, rolls back if it returns `Err` (or panics).
    ///
    /// ```
    /// # use engine::{Database, Error};
    /// # use serde_json::json;
    /// let db = Database::in_memory();
    /// let posts = db.create_container("posts", "/postId")?;
    /// posts.create_item("p1", json!({"id": "p1", "postId": "p1", "commentCount": 0}), None)?;
    /// posts.transaction("p1", |txn| {
    ///     let mut post = txn.read_item("p1")?.into_value();
    ///     post["commentCount"] = json!(post["commentCount"].as_i64().unwrap_or(0) + 1);
    ///     txn.replace_item("p1", post, None)?;
    ///     txn.create_item(json!({"id": "c1", "postId": "p1", "type": "comment"}))?;
    ///     Ok::<_, Error>(())
    /// })?;
    /// assert_eq!(posts.read_item("p1", "p1")?["commentCount"], 1);
    /// # Ok::<(), Error>(())
    /// ```
    ///
    /// Over a store that other nodes share, another node may commit to the
    /// partition between this transaction's start and its commit: the
    /// commit then writes nothing, and `f` runs again on the partition as
    /// it is now, up to [`ATTEMPTS`] times in all, before the
    /// [`Error::PartitionChanged`] (449) reaches the caller. So `f` must
    /// be safe to run again (`FnMut`); on a store only this process writes
    /// it runs once.
    ///
    /// # Errors
    /// Whatever `f` returns, or the commit's error.
    pub fn transaction<T, E, F>(
        &self,
        partition_key: impl Into<PartitionKey>,
        mut f: F,
    ) -> Result<T, E>
    where
        F: FnMut(&mut Txn) -> Result<T, E>,
        E: From<Error>,
    {
        // `f`'s own error ends the call: it is the inner result, never
        // looked at for a 449.
        self.attempts(partition_key, |key| {
            let mut txn = self.begin(key)?;
            Ok(match f(&mut txn) {
                Ok(value) => txn.commit().map(|_| Ok(value))?,
                Err(e) => Err(e),
            })
        })
        .unwrap_or_else(|e| Err(E::from(e)))
    }

    /// Runs `attempt`, one whole transaction on the logical partition whose
    /// key it is given (begin, work, commit), and runs it again from
    /// scratch while it fails with a 449 ([`Error::PartitionChanged`]:
    /// another node sharing the store committed to the partition first),
    /// up to [`ATTEMPTS`] times in all. The key is moved into each attempt
    /// (after the first, the 449's own), so none is copied; an input the
    /// attempt consumes goes through [`Container::for_attempt`]. Over a
    /// store only this process writes, no commit fails with 449 and
    /// `attempt` runs once.
    ///
    /// [`Container::transaction`] is this with a closure; the facade runs
    /// procedures and writes with triggers through it, with its own error
    /// type ([`RetryWith`]).
    ///
    /// # Errors
    /// The first error that is not a 449, or the last attempt's 449.
    pub fn attempts<T, E: RetryWith>(
        &self,
        partition_key: impl Into<PartitionKey>,
        mut attempt: impl FnMut(PartitionKey) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut key = partition_key.into();
        for _ in 1..ATTEMPTS {
            match attempt(key).map_err(RetryWith::retry_with) {
                Ok(value) => return Ok(value),
                Err(Ok(changed)) => key = changed,
                Err(Err(e)) => return Err(e),
            }
        }
        attempt(key)
    }

    /// Writes `docs`, documents of the logical partition `partition_key`,
    /// in one transaction: each is created (409 if its id exists), or
    /// with `upsert` created or replaced. No triggers run. Returns the
    /// transaction's LSN, `None` for no documents.
    ///
    /// For bulk loads (`partita::Container::import_items`): over a
    /// partition that is not in memory, it reads from storage only the
    /// documents with these ids and leaves the partition out of memory, so
    /// loading more data than the cache holds never reads a partition
    /// back whole. Readers of that partition wait for the transaction
    /// (a few milliseconds) instead of reading around it. A container
    /// with unique keys loads the partition as any transaction does: each
    /// write is checked against every document of it.
    ///
    /// ```
    /// # use engine::{Database, Error};
    /// # use serde_json::json;
    /// let db = Database::in_memory();
    /// let posts = db.create_container("posts", "/postId")?;
    /// let docs = (0..3).map(|i| json!({"id": format!("c{i}"), "postId": "p1"})).collect();
    /// posts.write_documents("p1", docs, false)?;
    /// assert_eq!(posts.read_item("p1", "c2")?["postId"], "p1");
    /// # Ok::<(), Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Txn::create_item`] and [`Txn::upsert_item`] for the first
    /// document that fails (nothing is written then), and the commit's.
    pub fn write_documents(
        &self,
        partition_key: impl Into<PartitionKey>,
        docs: Vec<Value>,
        upsert: bool,
    ) -> Result<Option<Lsn>> {
        let key = Txn::checked_key(&self.inner, partition_key.into())?;
        let mut docs = Some(docs);
        self.attempts(key, |key| {
            self.write_documents_once(key, self.for_attempt(&mut docs), upsert)
        })
    }

    /// One attempt of [`Container::write_documents`] on the full key `key`.
    fn write_documents_once(
        &self,
        key: PartitionKey,
        docs: Vec<Value>,
        upsert: bool,
    ) -> Result<Option<Lsn>> {
        let write = |txn: &mut Txn, docs: Vec<Value>| -> Result<()> {
            for doc in docs {
                if upsert {
                    txn.upsert_item(doc, None)?;
                } else {
                    txn.create_item(doc)?;
                }
            }
            Ok(())
        };
        let (db, inner) = (&self.db, &self.inner);
        if db.storage.keeps_documents() && inner.unique_keys.is_empty() {
            let partition = inner.partition(db, key.clone());
            // Held until the commit: no reader reads storage, and no
            // transaction loads the partition, while this one writes it.
            let _loading = partition.loading.lock();
            if !partition.is_loaded() {
                // Before the documents (see `ContainerInner::read_state`).
                let version = inner.stored_version(db, &key)?;
                let mut base = PartitionState::default();
                for id in docs.iter().filter_map(|d| d.get("id")?.as_str()) {
                    if let Some(doc) = db.storage.read_document(&inner.meta.id, &key, id)? {
                        put_loaded(&mut base, doc);
                    }
                }
                let mut txn = Txn::begin_detached(
                    db.clone(),
                    inner.clone(),
                    partition.clone(),
                    base,
                    version,
                )?;
                write(&mut txn, docs)?;
                return txn.commit();
            }
        }
        let mut txn = self.begin(key)?;
        write(&mut txn, docs)?;
        txn.commit()
    }

    /// Runs a transactional batch on one logical partition: every
    /// operation in order, all committed as one change-log entry, or none
    /// (see [`crate::batch`]).
    ///
    /// # Errors
    /// 400 for no operations or more than 100, 413 over 2 MB, 408 when the
    /// partition's lock is not free in time, storage errors. An operation's
    /// failure is not an error: it is in the response.
    pub fn execute_batch(
        &self,
        partition_key: impl Into<PartitionKey>,
        operations: Vec<crate::BatchOperation>,
    ) -> Result<crate::BatchResponse> {
        crate::batch::execute(self, partition_key.into(), operations)
    }

    /// Creates a document in the logical partition `partition_key`, which
    /// must be the document's own key.
    ///
    /// # Errors
    /// [`Error::Conflict`], [`Error::BadRequest`], [`Error::CrossPartition`],
    /// [`Error::TooLarge`], storage errors.
    pub fn create_item(
        &self,
        partition_key: impl Into<PartitionKey>,
        doc: Value,
        _options: Option<&ItemOptions>,
    ) -> Result<Document> {
        let mut doc = Some(doc);
        self.transaction(partition_key, |txn| {
            txn.create_item(self.for_attempt(&mut doc))
        })
    }

    /// `value` for one run of a [`Container::transaction`] closure that
    /// consumes it: moved out over a store only this process writes, where
    /// the closure runs once; a copy over a store other nodes share, where
    /// it may run again.
    ///
    /// # Panics
    /// On a second run over a store only this process writes, which
    /// cannot happen (its commits never fail with
    /// [`Error::PartitionChanged`]).
    pub fn for_attempt<T: Clone>(&self, value: &mut Option<T>) -> T {
        let value = if self.db.shared {
            value.clone()
        } else {
            value.take()
        };
        value.expect("a transaction runs again only over a shared store, which keeps its input")
    }

    /// Reads a document from the committed state.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::IncompletePartitionKey`] for a prefix of
    /// a hierarchical key.
    pub fn read_item(&self, partition_key: impl Into<PartitionKey>, id: &str) -> Result<Document> {
        let key = self.inner.full_key(partition_key.into())?;
        self.current(|| {
            let expiry = self.inner.expiry(|| self.db.now_secs());
            self.inner
                .read_document(&self.db, &key, id)?
                .filter(|doc| expiry.is_none_or(|e| !e.expired(doc.value())))
                .ok_or_else(|| Error::NotFound {
                    container: self.inner.meta.id.clone(),
                    partition_key: key.clone(),
                    id: id.to_owned(),
                })
        })
    }

    /// Runs `read` on the container's settings as this node knows them,
    /// and, when a statement it sent showed another node changed a
    /// container or a script (the version statement of a shared store),
    /// once more after reading the catalog again: a read sees every such
    /// change committed before its statement. Over a store no other node
    /// writes, `read` runs once.
    ///
    /// # Errors
    /// `read`'s, storage errors reading the catalog, and
    /// [`Error::ContainerNotFound`] when another node deleted the container.
    pub(crate) fn current<T>(&self, mut read: impl FnMut() -> Result<T>) -> Result<T> {
        self.db.sync_if_behind()?;
        let value = read();
        if !self.db.catalog_behind() {
            return value;
        }
        self.db.sync_catalog()?;
        drop(self.inner.alive()?);
        read()
    }

    /// The id of the document whose `_rid` is `rid` in the logical
    /// partition `partition_key` (a `_self` link's last segment), or `None`
    /// when there is none or `rid` is not a document rid of this container.
    ///
    /// # Errors
    /// [`Error::BadRequest`] for a key of the wrong shape.
    pub fn id_of_rid(
        &self,
        partition_key: impl Into<PartitionKey>,
        rid: &str,
    ) -> Result<Option<String>> {
        let key = self.inner.full_key(partition_key.into())?;
        let Some(rid) = self.inner.decode_document_rid(rid) else {
            return Ok(None);
        };
        Ok(self
            .snapshot(&key)?
            .get_by_rid(rid)
            .map(|slot| slot.document.id().to_owned()))
    }

    /// Replaces the document `id`.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::PreconditionFailed`], [`Error::BadRequest`],
    /// [`Error::CrossPartition`], [`Error::TooLarge`], storage errors.
    pub fn replace_item(
        &self,
        partition_key: impl Into<PartitionKey>,
        id: &str,
        doc: Value,
        options: Option<&ItemOptions>,
    ) -> Result<Document> {
        let mut doc = Some(doc);
        self.transaction(partition_key, |txn| {
            txn.replace_item(id, self.for_attempt(&mut doc), options)
        })
    }

    /// Creates or replaces a document.
    ///
    /// # Errors
    /// [`Error::PreconditionFailed`], [`Error::BadRequest`],
    /// [`Error::CrossPartition`], [`Error::TooLarge`], storage errors.
    pub fn upsert_item(
        &self,
        partition_key: impl Into<PartitionKey>,
        doc: Value,
        options: Option<&ItemOptions>,
    ) -> Result<Document> {
        let mut doc = Some(doc);
        self.transaction(partition_key, |txn| {
            txn.upsert_item(self.for_attempt(&mut doc), options)
        })
    }

    /// Deletes the document `id`.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::PreconditionFailed`], storage errors.
    pub fn delete_item(
        &self,
        partition_key: impl Into<PartitionKey>,
        id: &str,
        options: Option<&ItemOptions>,
    ) -> Result<()> {
        self.transaction(partition_key, |txn| txn.delete_item(id, options))
    }

    /// The committed documents of one logical partition, in insertion order,
    /// a page at a time. A prefix of a hierarchical key reads every logical
    /// partition under it, in insertion order across them.
    ///
    /// # Errors
    /// [`Error::BadRequest`] for a continuation token this feed did not issue
    /// or a key with too many components.
    pub fn read_feed(
        &self,
        partition_key: impl Into<PartitionKey>,
        options: &FeedOptions,
    ) -> Result<FeedPage> {
        let key = self.inner.scoped_key(partition_key.into())?;
        let (snapshot, expiry) = self.current(|| {
            let snapshot = if key.components().len() < self.inner.path.levels() {
                // Rids are unique in the container, so the partitions under
                // the prefix merge into one state in rid order, and the
                // feed's rid continuation works unchanged.
                let mut merged = PartitionState::default();
                for partition in self.partitions_under(&key)? {
                    for slot in partition.scan_after(None) {
                        merged.put(Arc::from(slot.document.id()), slot.clone());
                    }
                }
                Arc::new(merged)
            } else {
                // A use of this partition: read again, it enters the cache.
                self.inner.peek(&self.db, &key, true)?
            };
            Ok((snapshot, self.inner.expiry(|| self.db.now_secs())))
        })?;
        let (items, continuation, _bytes) = feed_page(
            &snapshot,
            options.max_item_count,
            options.continuation.as_deref(),
            expiry.as_ref(),
        )?;
        Ok(FeedPage {
            items,
            continuation,
        })
    }

    /// Snapshots of the logical partitions whose key starts with `prefix`
    /// (as [`ContainerInner::scoped_key`] spells it), in key order; those
    /// not in memory are read without entering the cache.
    pub(crate) fn partitions_under(
        &self,
        prefix: &PartitionKey,
    ) -> Result<Vec<Arc<PartitionState>>> {
        self.partition_keys()?
            .into_iter()
            .filter(|k| k.starts_with(prefix))
            .map(|k| self.inner.peek(&self.db, &k, false))
            .collect()
    }

    /// The keys of the logical partitions holding at least one document
    /// whose key starts with `partition_key` (a full key or a prefix of a
    /// hierarchical key), in ascending order.
    ///
    /// # Errors
    /// [`Error::BadRequest`] for a key with too many components.
    pub fn partition_keys_under(
        &self,
        partition_key: impl Into<PartitionKey>,
    ) -> Result<Vec<PartitionKey>> {
        let prefix = self.inner.scoped_key(partition_key.into())?;
        Ok(self
            .partition_keys()?
            .into_iter()
            .filter(|k| k.starts_with(&prefix))
            .collect())
    }

    /// A consistent snapshot of one logical partition's committed
    /// documents: from memory when the partition is in the cache, otherwise
    /// read from storage without entering it (reading every partition must
    /// not evict the ones transactions use).
    ///
    /// # Errors
    /// [`Error::Storage`] when storage cannot be read.
    pub fn snapshot(&self, partition_key: &PartitionKey) -> Result<Arc<PartitionState>> {
        self.current(|| self.inner.peek(&self.db, partition_key, false))
    }

    /// The keys of the logical partitions that hold at least one document,
    /// in ascending order, whether they are in memory or not.
    ///
    /// # Errors
    /// [`Error::Storage`] when storage cannot be read.
    pub fn partition_keys(&self) -> Result<Vec<PartitionKey>> {
        let mut keys: Vec<PartitionKey> = if self.db.storage.keeps_documents() {
            // Every committed document is in storage.
            self.db.storage.partition_keys(&self.inner.meta.id)?
        } else {
            self.inner
                .physical
                .iter()
                .flat_map(|physical| {
                    physical
                        .read()
                        .values()
                        .filter(|p| !p.snapshot().is_empty())
                        .map(|p| p.key.clone())
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        keys.sort();
        Ok(keys)
    }

    /// The LSN of the last change [`Container::read_changes`] returns
    /// ([`Lsn::ZERO`]: none), where a change feed "from now" starts: the
    /// store looks it up instead of reading the log.
    ///
    /// # Errors
    /// [`Error::Storage`] when it cannot be read.
    pub fn last_lsn(&self) -> Result<Lsn> {
        self.db.storage.last_lsn(&self.inner.meta.id)
    }

    /// The change log after `after`, in LSN order: up to `max_changes`
    /// changes, except that a transaction is never split (its last
    /// transaction is returned whole). Resume with the last change's LSN.
    ///
    /// A create or replace whose document has expired since reads as a
    /// delete (`document: None`): expired items leave the latest-version
    /// change feed at once, as on Cosmos DB, and the purge later logs
    /// their delete too.
    ///
    /// # Errors
    /// [`Error::Storage`] when the log cannot be read.
    pub fn read_changes(&self, after: Lsn, max_changes: usize) -> Result<Vec<Change>> {
        let mut changes = self
            .db
            .storage
            .read_changes(&self.inner.meta.id, after, max_changes)?;
        if let Some(expiry) = self.inner.expiry(|| self.db.now_secs()) {
            for change in &mut changes {
                if change
                    .document
                    .as_ref()
                    .is_some_and(|doc| expiry.expired(doc.value()))
                {
                    change.kind = crate::storage::ChangeKind::Delete;
                    change.document = None;
                }
            }
        }
        Ok(changes)
    }
}

impl std::fmt::Debug for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Container")
            .field("id", &self.inner.meta.id)
            .field("partition_key_path", &self.inner.meta.partition_key_path)
            .field("physical_partitions", &self.inner.meta.physical_partitions)
            .finish()
    }
}
