//! The facade's database and container: the one way to use Partita from
//! Rust.
//!
//! [`Container`] wraps the engine's container (the layer beneath, which
//! never runs user code) and gives every operation the behaviour a Cosmos DB
//! request has: a write runs the pre- and post-triggers its
//! [`WriteOptions`] name, in the write's transaction; a query can call the
//! container's user-defined functions; a stored procedure runs in one
//! logical partition's transaction; a script is checked (and a WebAssembly
//! module compiled) when it is stored. There is no trait to import.
//!
//! ```
//! use partita::{Database, ScriptProperties, WriteOptions};
//! use serde_json::json;
//!
//! let db = Database::in_memory();
//! let posts = db.create_container("posts", "/postId")?;
//! posts.create_script(ScriptProperties::trigger(
//!     "stamp",
//!     "function stamp() { var r = getContext().getRequest(); var d = r.getBody(); d.stamped = true; r.setBody(d); }",
//!     partita::TriggerType::Pre,
//!     partita::TriggerOperation::All,
//! ))?;
//! let options = WriteOptions { pre_triggers: vec!["stamp".into()], ..WriteOptions::default() };
//! posts.create_item("p1", json!({"id": "p1", "postId": "p1"}), Some(&options))?;
//! assert_eq!(posts.read_item("p1", "p1")?["stamped"], true);
//! # Ok::<(), partita::Error>(())
//! ```

use std::path::Path;

use engine::query::Params;
use engine::{
    BatchOperation, BatchOperationResult, BatchResponse, CacheStats, Change, ComputedProperty,
    ContainerProperties, Document, FeedOptions, FeedPage, IndexingPolicy, Lsn, Options,
    PartitionKey, Patch, QueryItemsOptions, QueryPage, Script, ScriptKind, ScriptProperties, Txn,
};
use host_api::PartitionKeyPath;
use runtime::Limits;
use serde_json::Value;

use crate::scripts::{self, Write};
use crate::{Result, Statistics};

/// Options of a write (create, upsert, replace, delete).
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `If-Match`: write only if the document's current etag is this
    /// (412 otherwise). Ignored by a create.
    pub if_match: Option<String>,
    /// The pre-trigger to run before the write (at most one, as in Cosmos DB).
    pub pre_triggers: Vec<String>,
    /// The post-trigger to run after the write (at most one).
    pub post_triggers: Vec<String>,
    /// Bounds of each trigger; the runtime's defaults when `None`.
    pub limits: Option<Limits>,
}

impl WriteOptions {
    /// Options with an `If-Match` precondition and nothing else.
    pub fn if_match(etag: impl Into<String>) -> WriteOptions {
        WriteOptions {
            if_match: Some(etag.into()),
            ..WriteOptions::default()
        }
    }
}

/// Options of a query.
#[derive(Clone, Debug, Default)]
pub struct QueryOptions {
    /// Run in this logical partition only; all partitions when `None`.
    pub partition_key: Option<PartitionKey>,
    /// Run in these logical partitions only (a physical partition's, say),
    /// as well as under `partition_key` when both are given.
    pub partitions: Option<Vec<PartitionKey>>,
    /// The most items per page (all when `None`).
    pub max_item_count: Option<usize>,
    /// Where the previous page stopped.
    pub continuation: Option<String>,
    /// Bounds of each user-defined function call; the runtime's defaults
    /// when `None`.
    pub limits: Option<Limits>,
}

impl QueryOptions {
    /// Options that confine the query to one logical partition.
    pub fn partition(partition_key: impl Into<PartitionKey>) -> QueryOptions {
        QueryOptions {
            partition_key: Some(partition_key.into()),
            ..QueryOptions::default()
        }
    }
}

/// Options of a stored procedure call.
#[derive(Clone, Debug, Default)]
pub struct ProcedureOptions {
    /// Bounds of the call; the runtime's defaults when `None`.
    pub limits: Option<Limits>,
    /// Return what the call committed in [`ProcedureResponse::writes`]
    /// (off by default: it costs a copy of the write set's handles).
    pub record_writes: bool,
}

/// The response of a stored procedure.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcedureResponse {
    /// What the procedure set with `getContext().getResponse().setBody()`
    /// (`""` when it set nothing, as in Cosmos DB).
    pub body: Value,
    /// Its `console.log` output.
    pub logs: String,
    /// What it did.
    pub stats: Statistics,
    /// What it committed, one change per document in the order they were
    /// first written, all with the call's LSN, when
    /// [`ProcedureOptions::record_writes`] asked for it (empty otherwise,
    /// and when the call wrote nothing).
    pub writes: Vec<Change>,
}

/// The response of a write.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemResponse {
    /// The written document, or what a post-trigger set as the response
    /// body; `None` for a delete.
    pub resource: Option<Document>,
    /// `console.log` output of the triggers (pre-trigger first).
    pub logs: String,
    /// What the write and its triggers did.
    pub stats: Statistics,
}

impl ProcedureResponse {
    /// The call's request charge (see [`crate::charge`]).
    pub fn request_charge(&self) -> f64 {
        crate::charge::Work::call(&self.stats).request_charge()
    }
}

impl ItemResponse {
    /// The write's request charge (see [`crate::charge`]).
    pub fn request_charge(&self) -> f64 {
        crate::charge::Work::call(&self.stats).request_charge()
    }

    /// The written document (or a post-trigger's response body).
    ///
    /// # Panics
    /// For a delete, which has none.
    pub fn document(&self) -> &Document {
        self.resource
            .as_ref()
            .expect("a delete's response has no document")
    }
}

/// A database: containers in a data directory (or in memory).
///
/// Cheap to clone; clones share the database. The data directory is locked
/// while any clone is alive.
#[derive(Clone, Debug)]
pub struct Database {
    raw: engine::Database,
}

impl Database {
    /// Opens (or creates) the durable database in `dir`.
    ///
    /// # Errors
    /// 503 when another process has the directory open; 500 when it cannot
    /// be read or created.
    pub fn open(dir: impl AsRef<Path>) -> Result<Database> {
        Ok(Database::from(engine::Database::open(dir)?))
    }

    /// [`Database::open`] with explicit options.
    ///
    /// # Errors
    /// As [`Database::open`].
    pub fn open_with(dir: impl AsRef<Path>, options: Options) -> Result<Database> {
        Ok(Database::from(engine::Database::open_with(dir, options)?))
    }

    /// Opens the database stored in PostgreSQL at `url`
    /// (`postgresql://user@host/db`); see `engine::Database::open_url`.
    ///
    /// # Errors
    /// 400 for a URL that is not a PostgreSQL one or does not parse; 500
    /// when the server cannot be reached. Messages omit the password.
    #[cfg(feature = "postgres")]
    pub fn open_url(url: &str, options: Options) -> Result<Database> {
        Ok(Database::from(engine::Database::open_url(url, options)?))
    }

    /// A database that lives in memory only.
    pub fn in_memory() -> Database {
        Database::from(engine::Database::in_memory())
    }

    /// A database over any [`engine::storage::Storage`] (tests inject
    /// faults this way).
    ///
    /// # Errors
    /// The storage's errors while loading.
    pub fn with_storage(
        storage: Box<dyn engine::storage::Storage>,
        options: Options,
    ) -> Result<Database> {
        Ok(Database::from(engine::Database::with_storage(
            storage, options,
        )?))
    }

    /// The data directory; `None` in memory.
    pub fn data_dir(&self) -> Option<&Path> {
        self.raw.data_dir()
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        self.raw.options()
    }

    /// What the partition cache holds and has done (see
    /// [`Options::cache_bytes`]).
    pub fn cache_stats(&self) -> CacheStats {
        self.raw.cache_stats()
    }

    /// Why the database refuses writes (after a storage failure), if it does.
    pub fn failure(&self) -> Option<String> {
        self.raw.failure()
    }

    /// Creates a container whose documents are partitioned by the value at
    /// `partition_key_path` (such as `/postId`).
    ///
    /// # Errors
    /// 409 when it exists; 400 for a bad id or path.
    pub fn create_container(&self, id: &str, partition_key_path: &str) -> Result<Container> {
        Ok(Container::from(
            self.raw.create_container(id, partition_key_path)?,
        ))
    }

    /// Creates a container with explicit properties: physical partitions,
    /// time to live (`default_ttl`) and unique keys.
    ///
    /// ```
    /// use partita::{ContainerProperties, Database};
    /// use serde_json::json;
    ///
    /// let db = Database::in_memory();
    /// let users = db.create_container_with(
    ///     ContainerProperties::new("users", "/tenant")
    ///         .with_default_ttl(3600)
    ///         .with_unique_key(["/email"]),
    /// )?;
    /// users.create_item("t1", json!({"id": "u1", "tenant": "t1", "email": "a@x"}), None)?;
    /// let dup = users.create_item("t1", json!({"id": "u2", "tenant": "t1", "email": "a@x"}), None);
    /// assert_eq!(dup.unwrap_err().status(), 409);
    /// # Ok::<(), partita::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Database::create_container`], and 400 for a `default_ttl` of 0
    /// or below -1 or a bad unique key.
    pub fn create_container_with(&self, props: ContainerProperties) -> Result<Container> {
        Ok(Container::from(self.raw.create_container_with(props)?))
    }

    /// The container `id`, created with `partition_key_path` if missing.
    ///
    /// # Errors
    /// 409 when it exists with another partition-key path.
    pub fn create_container_if_not_exists(
        &self,
        id: &str,
        partition_key_path: &str,
    ) -> Result<Container> {
        Ok(Container::from(
            self.raw
                .create_container_if_not_exists(id, partition_key_path)?,
        ))
    }

    /// The container `id`.
    ///
    /// # Errors
    /// 404 when there is none.
    pub fn container(&self, id: &str) -> Result<Container> {
        Ok(Container::from(self.raw.container(id)?))
    }

    /// Deletes a container with its documents, scripts and change log.
    ///
    /// # Errors
    /// 404 when there is none; storage failures.
    pub fn delete_container(&self, id: &str) -> Result<()> {
        Ok(self.raw.delete_container(id)?)
    }

    /// Every container's properties.
    pub fn containers(&self) -> Vec<ContainerProperties> {
        self.raw.containers()
    }

    /// Deletes the expired items of every container now; the background
    /// purge does it every [`Options::purge_interval`]. Returns how many.
    ///
    /// # Errors
    /// 408 when a partition stays busy; storage failures.
    pub fn purge_expired(&self) -> Result<usize> {
        Ok(self.raw.purge_expired()?)
    }

    /// The engine's database, the layer beneath (no scripts run there).
    pub fn raw(&self) -> &engine::Database {
        &self.raw
    }
}

impl From<engine::Database> for Database {
    fn from(raw: engine::Database) -> Database {
        Database { raw }
    }
}

/// A container: documents partitioned by a key path, with their scripts.
/// Cheap to clone; clones share the container.
#[derive(Clone, Debug)]
pub struct Container {
    raw: engine::Container,
}

impl From<engine::Container> for Container {
    fn from(raw: engine::Container) -> Container {
        Container { raw }
    }
}

impl Container {
    /// The engine's container, the layer beneath: its writes run no
    /// triggers and its queries know no user-defined functions.
    pub fn raw(&self) -> &engine::Container {
        &self.raw
    }

    /// The container's id.
    pub fn id(&self) -> &str {
        self.raw.id()
    }

    /// The container's properties.
    pub fn properties(&self) -> ContainerProperties {
        self.raw.properties()
    }

    /// The container's resource id (`_rid`).
    pub fn resource_id(&self) -> String {
        self.raw.resource_id()
    }

    /// The partition-key path.
    pub fn partition_key_path(&self) -> &PartitionKeyPath {
        self.raw.partition_key_path()
    }

    /// The partition key of `doc` under this container's path: the
    /// undefined key, [`PartitionKey::None`], where `doc` has no value or
    /// an object or array there, as on Cosmos DB.
    pub fn partition_key_of(&self, doc: &Value) -> PartitionKey {
        self.raw.partition_key_of(doc)
    }

    /// The physical partition a logical partition lives on.
    pub fn physical_partition(&self, key: &PartitionKey) -> u32 {
        self.raw.physical_partition(key)
    }

    /// The data directory of the database; `None` in memory.
    pub fn data_dir(&self) -> Option<&Path> {
        self.raw.data_dir()
    }

    /// The keys of the logical partitions that hold at least one document,
    /// in ascending order.
    ///
    /// # Errors
    /// 500 when storage cannot be read.
    pub fn partition_keys(&self) -> Result<Vec<PartitionKey>> {
        Ok(self.raw.partition_keys()?)
    }

    /// Begins a native transaction on one logical partition (see
    /// [`Container::transaction`]).
    ///
    /// # Errors
    /// 408 when the partition's lock is not free in time.
    pub fn begin(&self, partition_key: impl Into<PartitionKey>) -> Result<Txn> {
        Ok(self.raw.begin(partition_key)?)
    }

    /// Begins a native transaction that must end within `limit` of this
    /// call (waiting for the lock counts): past its deadline, the next writer of the partition takes the partition over and this
    /// transaction's operations and commit fail with 408, nothing it wrote
    /// committed (a commit already under way completes). Procedures and
    /// triggers get one by themselves; [`Container::begin`] and
    /// [`Container::transaction`] have none.
    ///
    /// # Errors
    /// 408 when the partition's lock is not free in time.
    pub fn begin_with_deadline(
        &self,
        partition_key: impl Into<PartitionKey>,
        limit: std::time::Duration,
    ) -> Result<Txn> {
        Ok(self.raw.begin_with_deadline(partition_key, limit)?)
    }

    /// Runs `f` in a native transaction on one logical partition and
    /// commits what it wrote, or nothing if it fails. Over a store other
    /// nodes share, `f` may run again when another node committed to the
    /// partition first (see [`engine::Container::transaction`]).
    ///
    /// # Errors
    /// `f`'s error, or the commit's.
    pub fn transaction<T, E, F>(&self, partition_key: impl Into<PartitionKey>, f: F) -> Result<T, E>
    where
        F: FnMut(&mut Txn) -> Result<T, E>,
        E: From<engine::Error>,
    {
        self.raw.transaction(partition_key, f)
    }

    /// Creates a document, running the triggers `options` name in its
    /// transaction.
    ///
    /// # Errors
    /// 409 for a duplicate id, 400 for a bad document or trigger choice, 413
    /// over 2 MB; a trigger's failure as [`Error::Script`](crate::Error::Script).
    pub fn create_item(
        &self,
        partition_key: impl Into<PartitionKey>,
        doc: Value,
        options: Option<&WriteOptions>,
    ) -> Result<ItemResponse> {
        scripts::write(&self.raw, partition_key.into(), Write::Create(doc), options)
    }

    /// Creates or replaces a document.
    ///
    /// # Errors
    /// As [`Container::create_item`], plus 412 for a stale `if_match`.
    pub fn upsert_item(
        &self,
        partition_key: impl Into<PartitionKey>,
        doc: Value,
        options: Option<&WriteOptions>,
    ) -> Result<ItemResponse> {
        scripts::write(&self.raw, partition_key.into(), Write::Upsert(doc), options)
    }

    /// Replaces the document `id`.
    ///
    /// # Errors
    /// As [`Container::create_item`], plus 404 and 412.
    pub fn replace_item(
        &self,
        partition_key: impl Into<PartitionKey>,
        id: &str,
        doc: Value,
        options: Option<&WriteOptions>,
    ) -> Result<ItemResponse> {
        scripts::write(
            &self.raw,
            partition_key.into(),
            Write::Replace(id, doc),
            options,
        )
    }

    /// Deletes the document `id` (its triggers get the document being
    /// deleted as their request body).
    ///
    /// # Errors
    /// As [`Container::create_item`], plus 404 and 412.
    pub fn delete_item(
        &self,
        partition_key: impl Into<PartitionKey>,
        id: &str,
        options: Option<&WriteOptions>,
    ) -> Result<ItemResponse> {
        scripts::write(&self.raw, partition_key.into(), Write::Delete(id), options)
    }

    /// Patches the document `id`: applies `patch`'s operations (add, set,
    /// replace, remove, incr, move) if its condition holds, and writes the
    /// result as a replace. The triggers `options` name run as for a
    /// replace, and a pre-trigger gets the patched document.
    ///
    /// ```
    /// use partita::{Database, Patch};
    /// use serde_json::json;
    ///
    /// let db = Database::in_memory();
    /// let posts = db.create_container("posts", "/postId")?;
    /// posts.create_item("p1", json!({"id": "p1", "postId": "p1", "likes": 0}), None)?;
    /// let like = Patch::from_json(&json!([{"op": "incr", "path": "/likes", "value": 1}]))?;
    /// let response = posts.patch_item("p1", "p1", &like, None)?;
    /// assert_eq!(response.document()["likes"], 1);
    /// # Ok::<(), partita::Error>(())
    /// ```
    ///
    /// # Errors
    /// 404; 412 for a stale `if_match` or a false condition; 400 naming an
    /// operation that cannot apply; as [`Container::replace_item`] for the
    /// patched document.
    pub fn patch_item(
        &self,
        partition_key: impl Into<PartitionKey>,
        id: &str,
        patch: &Patch,
        options: Option<&WriteOptions>,
    ) -> Result<ItemResponse> {
        scripts::write(
            &self.raw,
            partition_key.into(),
            Write::Patch(id, patch),
            options,
        )
    }

    /// Runs a transactional batch in one logical partition: the operations
    /// in order, committed together as one change-log entry, or none of
    /// them. No triggers run. When an operation fails, the response says
    /// which (`failed`), with its status, and every other operation has
    /// status 424; [`crate::charge::batch_operation`] prices each result.
    ///
    /// ```
    /// use partita::{BatchOperation, Database};
    /// use serde_json::json;
    ///
    /// let db = Database::in_memory();
    /// let posts = db.create_container("posts", "/postId")?;
    /// let response = posts.execute_batch("p1", vec![
    ///     BatchOperation::create(json!({"id": "p1", "postId": "p1"})),
    ///     BatchOperation::create(json!({"id": "p1", "postId": "p1"})),
    /// ])?;
    /// assert_eq!(response.failed, Some(1));
    /// assert_eq!(response.results[0].status, 424);
    /// assert_eq!(response.results[1].status, 409);
    /// assert!(posts.read_item("p1", "p1").is_err());
    /// # Ok::<(), partita::Error>(())
    /// ```
    ///
    /// # Errors
    /// 400 for no operations or more than 100, 413 over 2 MB of documents,
    /// 408 when the partition's lock is not free in time, storage failures.
    pub fn execute_batch(
        &self,
        partition_key: impl Into<PartitionKey>,
        operations: Vec<BatchOperation>,
    ) -> Result<BatchResponse> {
        Ok(self.raw.execute_batch(partition_key, operations)?)
    }

    /// Runs operations each in its own transaction, as the SDKs' bulk
    /// executors do: each one commits or fails on its own, and a failure
    /// (including a 408 for a busy partition) is only that operation's
    /// result.
    ///
    /// # Errors
    /// 400 for no operations or more than 100, 413 over 2 MB of documents.
    pub fn execute_bulk(
        &self,
        operations: Vec<(PartitionKey, BatchOperation)>,
    ) -> Result<Vec<BatchOperationResult>> {
        let (keys, operations): (Vec<_>, Vec<_>) = operations.into_iter().unzip();
        engine::batch::check(&operations)?;
        Ok(keys
            .into_iter()
            .zip(operations)
            .map(|(key, op)| match self.raw.execute_batch(key, vec![op]) {
                Ok(mut response) => response.results.remove(0),
                Err(err) => BatchOperationResult::failed(&err),
            })
            .collect())
    }

    /// Deletes every document of one logical partition in one transaction
    /// (each a delete in the change feed; no triggers run) and returns how
    /// many; an empty or unknown partition is no error.
    ///
    /// # Errors
    /// 408 when the partition stays busy; storage failures.
    pub fn delete_all_items_by_partition_key(
        &self,
        partition_key: impl Into<PartitionKey>,
    ) -> Result<usize> {
        Ok(self.raw.delete_all_items_by_partition_key(partition_key)?)
    }

    /// Changes the container's time to live (`None`: off; -1: on, items
    /// expire only by their own `ttl`; `n`: seconds after an item's last
    /// write), durably.
    ///
    /// # Errors
    /// 400 for 0 or a value below -1; 404 once the container is deleted.
    pub fn set_default_ttl(&self, default_ttl: Option<i32>) -> Result<()> {
        Ok(self.raw.set_default_ttl(default_ttl)?)
    }

    /// Replaces the container's computed properties, durably: values its
    /// queries read as top-level properties (`WHERE c.cp_lower = 'x'`),
    /// derived from each document by a `SELECT VALUE <expr> FROM c` query
    /// and never stored.
    ///
    /// # Errors
    /// 400 naming a property that breaks a rule (see
    /// [`engine::query::ComputedProperties`]); 404 once the container is
    /// deleted.
    pub fn set_computed_properties(&self, props: Vec<ComputedProperty>) -> Result<()> {
        Ok(self.raw.set_computed_properties(props)?)
    }

    /// The container's indexing policy (see [`IndexingPolicy`]).
    pub fn indexing_policy(&self) -> std::sync::Arc<IndexingPolicy> {
        self.raw.indexing_policy()
    }

    /// Replaces the container's indexing policy, durably, completed as the
    /// service completes it. A durable store builds the new index in the
    /// background ([`Container::index_progress`]); queries scan until then.
    ///
    /// ```
    /// use partita::{Database, IndexingPolicy};
    /// use serde_json::json;
    ///
    /// let db = Database::in_memory();
    /// let posts = db.create_container("posts", "/postId")?;
    /// assert_eq!(*posts.indexing_policy(), IndexingPolicy::default());
    /// let policy = IndexingPolicy::from_json(&json!({
    ///     "excludedPaths": [{"path": "/body/*"}],
    ///     "compositeIndexes": [[{"path": "/author"}, {"path": "/date", "order": "descending"}]],
    /// }))?;
    /// posts.set_indexing_policy(policy.clone())?;
    /// assert_eq!(*posts.indexing_policy(), policy);
    /// assert_eq!(posts.indexing_policy().excluded_paths[1].path, "/\"_etag\"/?");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// 400 for a policy the service refuses (see
    /// [`IndexingPolicy::from_json`]) or mode `none` while time to live is
    /// on; 404 once the container is deleted.
    pub fn set_indexing_policy(&self, policy: IndexingPolicy) -> Result<()> {
        Ok(self.raw.set_indexing_policy(policy)?)
    }

    /// How far the range index under the current policy is built, in
    /// percent of the documents: 100 once queries use it (and for a store
    /// that keeps none). A new policy is built in the background.
    ///
    /// # Errors
    /// 500 when storage cannot be read.
    pub fn index_progress(&self) -> Result<u32> {
        Ok(self.raw.index_progress()?)
    }

    /// Reads the committed document `id`.
    ///
    /// # Errors
    /// 404 when there is none.
    pub fn read_item(&self, partition_key: impl Into<PartitionKey>, id: &str) -> Result<Document> {
        Ok(self.raw.read_item(partition_key, id)?)
    }

    /// One page of a logical partition's documents in insertion order.
    ///
    /// # Errors
    /// 400 for a bad continuation token.
    pub fn read_feed(
        &self,
        partition_key: impl Into<PartitionKey>,
        options: &FeedOptions,
    ) -> Result<FeedPage> {
        Ok(self.raw.read_feed(partition_key, options)?)
    }

    /// Runs a Cosmos SQL query over one logical partition or all of them,
    /// with the container's user-defined functions callable as
    /// `udf.name(args)`.
    ///
    /// # Errors
    /// 400 for a syntax error, an unknown function, a missing parameter, a
    /// bad continuation token, or a UDF that is missing, throws or exhausts
    /// its budget.
    pub fn query_items(
        &self,
        sql: &str,
        params: &Params,
        options: &QueryOptions,
    ) -> Result<QueryPage> {
        let raw_options = QueryItemsOptions {
            partition_key: options.partition_key.clone(),
            partitions: options.partitions.clone(),
            max_item_count: options.max_item_count,
            continuation: options.continuation.clone(),
        };
        Ok(scripts::query(
            &self.raw,
            &self.raw,
            sql,
            params,
            &raw_options,
            options.limits.as_ref(),
        )?)
    }

    /// Runs the stored procedure `id` in one logical partition, atomically.
    ///
    /// # Errors
    /// 404 when there is no such procedure; [`Error::Script`](crate::Error::Script) when it throws
    /// (400), does not compile (400/65535) or exhausts a budget (408);
    /// 408 when it ran so far past its wall-time limit (stuck where the
    /// runtime cannot stop it) that another writer took its partition
    /// over. Nothing is committed then.
    pub fn execute_stored_procedure(
        &self,
        id: &str,
        partition_key: impl Into<PartitionKey>,
        params: Vec<Value>,
        options: Option<&ProcedureOptions>,
    ) -> Result<ProcedureResponse> {
        scripts::execute_procedure(&self.raw, id, partition_key.into(), params, options)
    }

    /// Stores a new script. A WebAssembly module (`.wasm` bytes or `.wat`
    /// text, stored as `.wasm`) must validate, import only the `partita_v1`
    /// ABI and export its kind's entry point; it is compiled now, so the
    /// first call does not.
    ///
    /// ```
    /// use partita::{Database, ScriptKind, ScriptProperties};
    ///
    /// let db = Database::in_memory();
    /// let posts = db.create_container("posts", "/postId")?;
    /// let wat = r#"(module (memory (export "memory") 1)
    ///                (func (export "partita_procedure") (result i32) (i32.const 0)))"#;
    /// posts.create_script(ScriptProperties::wasm("noop", ScriptKind::StoredProcedure, wat))?;
    /// let bad = ScriptProperties::wasm("bad", ScriptKind::StoredProcedure, "(module)");
    /// assert_eq!(posts.create_script(bad).unwrap_err().status(), 400);
    /// # Ok::<(), partita::Error>(())
    /// ```
    ///
    /// # Errors
    /// 409 when it exists; 400 naming the problem with its body; 413 over
    /// 2 MB.
    pub fn create_script(&self, props: ScriptProperties) -> Result<Script> {
        Ok(self
            .raw
            .create_script(scripts::checked(&self.raw, props)?)?)
    }

    /// Replaces a script after the checks of [`Container::create_script`];
    /// the next call uses the new version.
    ///
    /// # Errors
    /// As [`Container::create_script`], and 404 when there is none.
    pub fn replace_script(&self, props: ScriptProperties) -> Result<Script> {
        Ok(self
            .raw
            .replace_script(scripts::checked(&self.raw, props)?)?)
    }

    /// The current version of a script.
    ///
    /// # Errors
    /// 404 when there is none.
    pub fn read_script(&self, kind: ScriptKind, id: &str) -> Result<Script> {
        Ok(self.raw.read_script(kind, id)?)
    }

    /// Every script of one kind.
    pub fn list_scripts(&self, kind: ScriptKind) -> Vec<Script> {
        self.raw.list_scripts(kind)
    }

    /// Deletes a script.
    ///
    /// # Errors
    /// 404 when there is none.
    pub fn delete_script(&self, kind: ScriptKind, id: &str) -> Result<()> {
        Ok(self.raw.delete_script(kind, id)?)
    }

    /// The LSN of the last committed change (0: none), where a change
    /// feed "from now" starts: looked up, not read from the log.
    ///
    /// # Errors
    /// Storage failures.
    pub fn last_lsn(&self) -> Result<Lsn> {
        Ok(self.raw.last_lsn()?)
    }

    /// Up to `max_changes` committed changes after `after`, in LSN order.
    ///
    /// # Errors
    /// Storage failures.
    pub fn read_changes(&self, after: Lsn, max_changes: usize) -> Result<Vec<Change>> {
        Ok(self.raw.read_changes(after, max_changes)?)
    }
}
