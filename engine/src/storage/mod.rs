//! Durable storage behind a narrow trait.
//!
//! The engine owns all concurrency (one writer per logical partition,
//! readers on snapshots) and keeps a bounded cache of logical partitions
//! in memory. A [`Storage`] has to do four things: remember containers,
//! make a committed transaction's *effects* durable atomically while
//! appending them to the container's change log, give the definitions back
//! at start-up, and read a logical partition's documents (all of them, one,
//! or which partitions hold any) when the engine asks.
//!
//! ```text
//!   Txn::commit ──► Storage::submit(CommitRecord) ──► Submitted::wait: durable? ──► publish in memory
//!                        │                         │                         │
//!                        │ places it in the log,   │ (the partition's next   └─ error: store goes read-only
//!                        │ assigns the LSN         │  writer may begin here)
//!                        ▼
//!              docs(container, pk, id, rid, lsn, idx, body)   (lsn, idx: the log row with the body)
//!              changes(container, lsn, idx, pk, id, op, seq, rid, body, ts)
//! ```
//!
//! Implementations: [`MemoryStorage`] (no files, for tests and demos) and
//! [`SqliteStorage`] (one SQLite file in WAL mode with group commit), and,
//! with the `postgres` feature, `PostgresStorage` (a PostgreSQL database,
//! its schema laid out for Citus: `storage/postgres.rs`).
//!
//! Contract for implementors:
//! * `commit` returns only after the record is durable under the configured
//!   durability, and is all-or-nothing, including across crashes;
//! * a `submit` whose [`Submitted`] is not ready orders the record: one
//!   submitted after it returned is written after it, is durable only if it
//!   is, and fails if it fails (the engine lets the partition's next
//!   writer build on the record meanwhile);
//! * LSNs are assigned by `commit` (or `submit`), per container, starting
//!   at 1, without gaps, in the order in which commits become durable; one
//!   LSN per record;
//! * `read_changes` never returns a record that `commit` has not acknowledged
//!   as durable, and never a part of a record;
//! * an `Err` from `commit` means the record may or may not be durable; the
//!   engine then refuses all further writes (it never retries), except
//!   [`crate::Error::PartitionChanged`] and [`crate::Error::RolledBack`]
//!   (449), which say that nothing of the record was written;
//! * likewise an `Err` from a write of a container or a script, except
//!   [`crate::Error::WriteRolledBack`] (449: nothing was written);
//! * `read_partition`, `read_document` and `partition_keys` see every
//!   acknowledged commit; the engine calls them for a logical partition
//!   only while no commit on it is in flight (it holds the partition's
//!   load lock, which a transaction needs before it can begin), so they
//!   never have to tell a written commit from an acknowledged one;
//! * a [shared](Storage::shared) store moves its catalog version with every
//!   container and script change, in the same transaction;
//! * a store that cannot write when it is opened (a full disk, a read-only
//!   file system, no permission) opens read-only rather than not at all,
//!   with everything committed readable, and says why in
//!   [`Storage::read_only`]; the engine then refuses writes from the start,
//!   as after a failure. Nothing written to it is lost: a reopen once it
//!   can write again finds everything.

mod memory;
#[cfg(feature = "postgres")]
mod postgres;
mod sqlite;

use std::sync::Arc;

use host_api::{PartitionKey, ScriptKind, ScriptLanguage, TriggerOperation, TriggerType};

pub use memory::{MemoryStorage, RETAINED_COMMITS};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresStorage, pk_hash, redact_url};
pub use sqlite::{CHECKPOINT_PAGES, SqliteStorage};

use crate::document::Document;
use crate::error::Result;
use crate::query::Needles;

/// A log sequence number: the position of a committed transaction in its
/// container's change log. Starts at 1; [`Lsn::ZERO`] is "before the first".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

impl Lsn {
    /// The position before the first change.
    pub const ZERO: Lsn = Lsn(0);
}

impl std::fmt::Display for Lsn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// How commits reach the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// A commit is acknowledged after it is fsynced (SQLite `synchronous=FULL`).
    #[default]
    Full,
    /// Commits are written but not fsynced (SQLite `synchronous=OFF`): a
    /// crash of the process loses nothing, a crash of the machine may lose
    /// the last commits. For benchmarks and tests.
    None,
}

/// A container's durable definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerMeta {
    /// The container id.
    pub id: String,
    /// Creation order, 1-based; part of every `_rid` in the container.
    pub ordinal: u32,
    /// The partition-key path, such as `/postId`.
    pub partition_key_path: String,
    /// How many physical partitions logical partitions are hashed onto.
    pub physical_partitions: u32,
    /// Time to live: `None` off, -1 on without a default, `n` seconds.
    pub default_ttl: Option<i32>,
    /// The unique keys, fixed at creation.
    pub unique_keys: Vec<crate::UniqueKey>,
    /// The database part of the container's rids (`None`: `Part`), fixed
    /// at creation.
    pub database_rid: Option<[u8; 4]>,
    /// The computed properties (changeable).
    pub computed_properties: Vec<crate::ComputedProperty>,
    /// The indexing policy (changeable).
    pub indexing_policy: crate::IndexingPolicy,
}

#[cfg(test)]
impl ContainerMeta {
    /// Container `id`, the first, partitioned by `/pk`, with default
    /// settings.
    pub(crate) fn for_tests(id: &str) -> ContainerMeta {
        ContainerMeta {
            id: id.into(),
            ordinal: 1,
            partition_key_path: "/pk".into(),
            physical_partitions: 1,
            default_ttl: None,
            unique_keys: Vec::new(),
            database_rid: None,
            computed_properties: Vec::new(),
            indexing_policy: crate::IndexingPolicy::default(),
        }
    }
}

/// What a transaction did to one document, as the change log records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// The document did not exist before the transaction.
    Create,
    /// The document existed before and after the transaction.
    Replace,
    /// The document existed before the transaction and not after.
    Delete,
}

/// The text forms of script enums in storage.
/// A partition key as a backend stores it in `docs` (its JSON array text),
/// or a storage error naming the container.
pub(crate) fn stored_partition_key(container: &str, pk: &str) -> Result<PartitionKey> {
    PartitionKey::parse(pk).map_err(|e| {
        crate::Error::Storage(format!(
            "corrupt partition key {pk} in docs of container {container:?}: {e}"
        ))
    })
}

pub(crate) fn kind_name(kind: ScriptKind) -> &'static str {
    match kind {
        ScriptKind::StoredProcedure => "sproc",
        ScriptKind::Trigger => "trigger",
        ScriptKind::UserDefinedFunction => "udf",
    }
}

pub(crate) fn parse_kind(s: &str) -> Option<ScriptKind> {
    Some(match s {
        "sproc" => ScriptKind::StoredProcedure,
        "trigger" => ScriptKind::Trigger,
        "udf" => ScriptKind::UserDefinedFunction,
        _ => return None,
    })
}

pub(crate) fn language_name(language: ScriptLanguage) -> &'static str {
    match language {
        ScriptLanguage::JavaScript => "javascript",
        ScriptLanguage::Wasm => "wasm",
    }
}

pub(crate) fn parse_language(s: &str) -> Option<ScriptLanguage> {
    Some(match s {
        "javascript" => ScriptLanguage::JavaScript,
        "wasm" => ScriptLanguage::Wasm,
        _ => return None,
    })
}

impl ChangeKind {
    /// The name stored in the change log.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Create => "create",
            ChangeKind::Replace => "replace",
            ChangeKind::Delete => "delete",
        }
    }

    /// Parses [`ChangeKind::as_str`].
    pub fn parse(s: &str) -> Option<ChangeKind> {
        Some(match s {
            "create" => ChangeKind::Create,
            "replace" => ChangeKind::Replace,
            "delete" => ChangeKind::Delete,
            _ => return None,
        })
    }
}

/// One document's net effect inside a [`CommitRecord`].
#[derive(Clone, Debug)]
pub struct RecordChange {
    /// The document id.
    pub id: Arc<str>,
    /// What happened to it.
    pub kind: ChangeKind,
    /// The document's resource id (insertion order within the container).
    pub rid: u64,
    /// The rid the document had in storage before the transaction: `None`
    /// for a create, and not `rid` for a replace that deleted and created
    /// it again. A store keeping entries by rid removes the old ones with
    /// it, without looking the document up.
    pub before_rid: Option<u64>,
    /// The container-wide sequence number of this write (also in its etag).
    pub seq: u64,
    /// The document after the transaction; `None` for a delete.
    pub document: Option<Document>,
    /// The document serialized as JSON, when the storage asked for text
    /// ([`Storage::wants_text`]); `None` for a delete.
    pub text: Option<Arc<str>>,
}

/// The effects of one committed transaction: one container, one logical
/// partition, the net change of each document it wrote, in first-write order.
#[derive(Clone, Debug)]
pub struct CommitRecord {
    /// The container.
    pub container: Arc<str>,
    /// The logical partition.
    pub partition_key: PartitionKey,
    /// The changes, at least one.
    pub changes: Vec<RecordChange>,
    /// The partition's version the transaction read
    /// ([`Storage::partition_version`]), for a store shared by several
    /// nodes: the commit writes nothing and fails with
    /// [`crate::Error::PartitionChanged`] unless it is still the version in
    /// storage, which it then increments. 0 elsewhere, where it is unused.
    pub base_version: u64,
}

/// One entry of a container's change log, as readers see it.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// The LSN of the transaction that made the change.
    pub lsn: Lsn,
    /// The logical partition.
    pub partition_key: PartitionKey,
    /// The document id.
    pub id: String,
    /// What happened.
    pub kind: ChangeKind,
    /// The document after the change; `None` for a delete.
    pub document: Option<Document>,
    /// When it committed, in seconds since the Unix epoch: the document's
    /// `_ts`, or for a delete the clock at commit.
    pub ts: u64,
}

/// A document as read back from the store.
#[derive(Clone, Debug)]
pub struct LoadedDocument {
    /// The document's resource id.
    pub rid: u64,
    /// The document, with system properties.
    pub document: Document,
    /// Its serialized size in bytes.
    pub size: usize,
}

/// What [`Storage::index_walk`] walks.
#[derive(Clone, Copy, Debug)]
pub struct IndexWalk<'a> {
    /// What orders the walk: one path's values, or a composite index's.
    pub order: crate::range_index::WalkOrder<'a>,
    /// Highest values first.
    pub descending: bool,
    /// Start at this key (included) instead of at the first.
    pub from: Option<&'a [u8]>,
    /// The terms every document returned may satisfy.
    pub terms: &'a [crate::range_index::IndexTerm],
    /// The most documents to return.
    pub limit: usize,
}

/// A page of [`Storage::index_walk`]: documents in key order, and the key
/// every document after them is at or past (`None` when there are none).
pub type WalkPage = (Vec<(PartitionKey, u64)>, Option<Vec<u8>>);

/// A document [`Storage::read_partition_containing`] passed over unparsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// Its resource id.
    pub rid: u64,
    /// Its serialized size in bytes, system properties included.
    pub size: usize,
}

/// A stored procedure, trigger or user-defined function, as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptRecord {
    /// The container it belongs to.
    pub container: String,
    /// Procedure, trigger or UDF.
    pub kind: ScriptKind,
    /// Its id, unique per container and kind.
    pub id: String,
    /// JavaScript or WebAssembly.
    pub language: ScriptLanguage,
    /// JavaScript text (UTF-8) or a WebAssembly module.
    pub body: Arc<[u8]>,
    /// For triggers: pre or post.
    pub trigger_type: Option<TriggerType>,
    /// For triggers: the writes it accepts.
    pub trigger_operation: Option<TriggerOperation>,
    /// For triggers: the type and operation as the client spelled them
    /// (stored in place of the canonical names).
    pub trigger_names: Option<crate::script::TriggerNames>,
    /// Changes on every create and replace (a container sequence number):
    /// the cache key of compiled code.
    pub version: u64,
    /// Seconds since the Unix epoch of the last write.
    pub ts: u64,
}

/// What [`Storage::partition_version`] reads in one statement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Versions {
    /// The logical partition's version.
    pub partition: u64,
    /// The catalog's version ([`Storage::catalog_version`]).
    pub catalog: u64,
}

/// A container as loaded at start-up.
#[derive(Clone, Debug)]
pub struct LoadedContainer {
    /// Its definition.
    pub meta: ContainerMeta,
    /// Its scripts.
    pub scripts: Vec<ScriptRecord>,
    /// The highest sequence number (rid or etag) it ever used; 0 if none.
    pub max_seq: u64,
}

/// A commit placed in the log ([`Storage::submit`]) whose outcome may not
/// be known yet. Wait for it promptly, and before waiting for any commit
/// submitted after it: a store may answer later commits only once this
/// wait ran ([`SqliteStorage`] runs the fsync of a record it wrote in
/// place in it). Dropping it waits too, so that is never left undone.
#[must_use = "a submitted commit's outcome is known only once waited for"]
pub struct Submitted<'a> {
    state: SubmittedState<'a>,
}

enum SubmittedState<'a> {
    Ready(Result<Lsn>),
    Later(Box<dyn FnOnce() -> Result<Lsn> + 'a>),
    Done,
}

impl<'a> Submitted<'a> {
    /// A commit whose outcome is known.
    pub fn ready(outcome: Result<Lsn>) -> Submitted<'a> {
        Submitted {
            state: SubmittedState::Ready(outcome),
        }
    }

    /// A commit whose outcome `wait` will give.
    pub fn later(wait: impl FnOnce() -> Result<Lsn> + 'a) -> Submitted<'a> {
        Submitted {
            state: SubmittedState::Later(Box::new(wait)),
        }
    }

    /// Whether the outcome is known without waiting.
    pub fn is_ready(&self) -> bool {
        matches!(self.state, SubmittedState::Ready(_))
    }

    /// The commit's outcome, once known: what [`Storage::commit`] returns.
    ///
    /// # Errors
    /// As [`Storage::commit`].
    pub fn wait(mut self) -> Result<Lsn> {
        match std::mem::replace(&mut self.state, SubmittedState::Done) {
            SubmittedState::Ready(outcome) => outcome,
            SubmittedState::Later(wait) => wait(),
            SubmittedState::Done => unreachable!("a Submitted is waited for once"),
        }
    }

    /// This commit, with `then` applied to its outcome once known.
    pub fn then(self, then: impl FnOnce(Result<Lsn>) -> Result<Lsn> + 'a) -> Submitted<'a> {
        if self.is_ready() {
            return Submitted::ready(then(self.wait()));
        }
        Submitted::later(move || then(self.wait()))
    }
}

impl Drop for Submitted<'_> {
    fn drop(&mut self) {
        if let SubmittedState::Later(wait) =
            std::mem::replace(&mut self.state, SubmittedState::Done)
        {
            drop(wait());
        }
    }
}

impl std::fmt::Debug for Submitted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Submitted")
            .field("ready", &self.is_ready())
            .finish()
    }
}

/// The durable store. See the module docs for the contract.
pub trait Storage: Send + Sync {
    /// The containers and their scripts, for start-up: called once, right
    /// after the store is opened and before any write. Documents are read
    /// later, a logical partition at a time, so this costs the same however
    /// many there are.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the store cannot be read.
    fn load(&self) -> Result<Vec<LoadedContainer>>;

    /// Durably records a new container.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] on I/O failure.
    fn create_container(&self, meta: &ContainerMeta) -> Result<()>;

    /// Durably removes a container: its definition, documents, scripts and
    /// change log, all at once. A container created later with the same id
    /// starts empty, its change log at LSN 1. The engine calls it only when
    /// no write for the container is in flight, and sends none afterwards.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] on I/O failure.
    fn delete_container(&self, id: &str) -> Result<()>;

    /// Durably replaces a container's settings (time to live, computed
    /// properties, indexing policy) with
    /// those of `meta`; its id, ordinal, partition key and physical
    /// partitions never change.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] on I/O failure.
    fn update_container(&self, meta: &ContainerMeta) -> Result<()>;

    /// Durably stores a script, replacing any with the same container, kind and id.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] on I/O failure.
    fn put_script(&self, script: &ScriptRecord) -> Result<()>;

    /// Durably removes a script (no error if it does not exist).
    ///
    /// # Errors
    /// [`crate::Error::Storage`] on I/O failure.
    fn delete_script(&self, container: &str, kind: ScriptKind, id: &str) -> Result<()>;

    /// Makes a transaction's effects durable and appends them to the change
    /// log; returns the LSN assigned to the record.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] on I/O failure; the outcome is then unknown.
    /// A shared store: [`crate::Error::PartitionChanged`] when the
    /// partition is no longer at [`CommitRecord::base_version`], and
    /// [`crate::Error::RolledBack`] when the storage rolled the commit back
    /// for a conflict; nothing of the record was written in either.
    fn commit(&self, record: CommitRecord) -> Result<Lsn>;

    /// Starts a commit: returns once the record has its place in the log,
    /// before it is known to be durable; [`Submitted::wait`] then waits
    /// for that, with what [`Storage::commit`] would have returned. The
    /// engine releases the partition's writer lock in between (see
    /// `Txn::commit`), so a store that answers not [ready](Submitted::is_ready)
    /// promises that a record submitted after this one returned is
    /// written after it, is durable only if this one is, and fails if
    /// this one fails (the store refuses every later write, as after any
    /// failed commit). The default commits in full first, which any store
    /// may keep.
    ///
    /// # Errors
    /// As [`Storage::commit`], when the record could not be placed.
    fn submit(&self, record: CommitRecord) -> Result<Submitted<'_>> {
        Ok(Submitted::ready(self.commit(record)))
    }

    /// Whether [`Storage::submit`] may answer before a record is durable,
    /// so that the engine should use it; otherwise the engine calls
    /// [`Storage::commit`] (a store whose commits finish at once skips
    /// the bookkeeping). The default says no.
    fn submits_early(&self) -> bool {
        false
    }

    /// The change-log entries of `container` with an LSN greater than
    /// `after`, in LSN order. Whole transactions only: the last transaction
    /// is completed even if that exceeds `max_changes`. Before the last
    /// [`RETAINED_COMMITS`] commits a store may have compacted the log to
    /// the latest version of each live document (the memory and SQLite
    /// stores do), so a transaction there may have lost some changes, or
    /// all of them.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the log cannot be read.
    fn read_changes(&self, container: &str, after: Lsn, max_changes: usize) -> Result<Vec<Change>>;

    /// The LSN of the last change of `container` that
    /// [`Storage::read_changes`] returns ([`Lsn::ZERO`]: none), where a
    /// change feed that starts "from now" starts. The default reads the
    /// whole log; the stores here look it up.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the log cannot be read.
    fn last_lsn(&self, container: &str) -> Result<Lsn> {
        let mut last = Lsn::ZERO;
        loop {
            match self.read_changes(container, last, 10_000)?.last() {
                Some(change) => last = change.lsn,
                None => return Ok(last),
            }
        }
    }

    /// Whether the store keeps documents and gives them back through
    /// [`Storage::read_partition`], [`Storage::read_document`] and
    /// [`Storage::partition_keys`]. A store that does not
    /// ([`MemoryStorage`]) leaves them to the engine's memory, which then
    /// keeps every partition and never evicts one.
    fn keeps_documents(&self) -> bool;

    /// Every committed document of the logical partition `partition_key`
    /// of `container`, in no particular order.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the store cannot be read.
    fn read_partition(
        &self,
        container: &str,
        partition_key: &PartitionKey,
    ) -> Result<Vec<LoadedDocument>>;

    /// [`Storage::read_partition`] for a query: the documents whose stored
    /// JSON text lacks one of `needles` may come back unparsed, as their
    /// rid and size alone (in the second list). By default every document
    /// is read.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the store cannot be read.
    fn read_partition_containing(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        needles: &Needles,
    ) -> Result<(Vec<LoadedDocument>, Vec<Skipped>)> {
        let _ = needles;
        Ok((self.read_partition(container, partition_key)?, Vec::new()))
    }

    /// The documents of `container` that may satisfy every one of
    /// `terms` (see [`crate::range_index`]), as (partition, rid), from the
    /// container's range index: every committed document that satisfies
    /// them is among them. `None` when no index can answer (a store
    /// without one, a path the policy leaves out, an index being built),
    /// and the caller scans instead. By default, `None`.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the store cannot be read.
    fn index_candidates(
        &self,
        container: &str,
        terms: &[crate::range_index::IndexTerm],
    ) -> Result<Option<Vec<(PartitionKey, u64)>>> {
        let _ = (container, terms);
        Ok(None)
    }

    /// [`Storage::index_candidates`] within the logical partition
    /// `partition_key`: the rids (ascending) of its documents that may
    /// satisfy every one of `terms`, named by the entries of an equality
    /// or `IN` term (a seek by value and partition, where a range would
    /// pass over every partition's entries). `None` when no such term can
    /// answer, and the caller reads the partition. By default, `None`.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the store cannot be read.
    fn index_candidates_in(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        terms: &[crate::range_index::IndexTerm],
    ) -> Result<Option<Vec<u64>>> {
        let _ = (container, partition_key, terms);
        Ok(None)
    }

    /// A walk of the range index of `container` in `walk.order` (see
    /// [`IndexWalk`]): the first `walk.limit` documents that have an entry
    /// there (a value at the path; every document, for a composite index)
    /// and may satisfy `walk.terms`, as (partition, rid), in the order of
    /// their entries' keys ([`crate::range_index::WalkOrder::key_of`];
    /// documents with equal keys in any order), and the key every other
    /// such document's is at or past (`None`: there are no others). `None`
    /// when no index can answer. By default, `None`.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the store cannot be read.
    fn index_walk(&self, container: &str, walk: &IndexWalk<'_>) -> Result<Option<WalkPage>> {
        let _ = (container, walk);
        Ok(None)
    }

    /// How far the range index of `container` is built, in percent of its
    /// documents (100: built, and queries use it); `None` for a store that
    /// keeps no index. By default, `None`.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the store cannot be read.
    fn index_progress(&self, container: &str) -> Result<Option<u32>> {
        let _ = container;
        Ok(None)
    }

    /// The committed documents of the logical partition `partition_key`
    /// of `container` whose rids are among `rids` (ascending), in no
    /// particular order. By default, read from the whole partition.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the store cannot be read.
    fn read_documents(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        rids: &[u64],
    ) -> Result<Vec<LoadedDocument>> {
        let mut docs = self.read_partition(container, partition_key)?;
        docs.retain(|doc| rids.binary_search(&doc.rid).is_ok());
        Ok(docs)
    }

    /// The committed document `id` of the logical partition
    /// `partition_key` of `container`, if there is one.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the store cannot be read.
    fn read_document(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        id: &str,
    ) -> Result<Option<LoadedDocument>>;

    /// The keys of the logical partitions of `container` that hold at
    /// least one committed document, in no particular order. Also called
    /// while commits on other partitions are in flight: a partition whose
    /// first commit is being written may be listed (and then read empty).
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the store cannot be read.
    fn partition_keys(&self, container: &str) -> Result<Vec<PartitionKey>>;

    /// Whether [`RecordChange::text`] should be filled in (the caller
    /// serializes documents anyway to check their size).
    fn wants_text(&self) -> bool;

    /// Why the store refuses every write since it was opened, if it does:
    /// it could not write then (a full disk, a read-only file system, no
    /// permission), so it opened read-only. Loading, reading the change
    /// log and [`Storage::load`] work; every write returns
    /// [`crate::Error::ReadOnly`] with this reason, which names the store's
    /// location, the cause and the remedy.
    fn read_only(&self) -> Option<String> {
        None
    }

    /// Whether other nodes may commit to this store: then every logical
    /// partition has a version in storage, which each commit compares and
    /// increments ([`CommitRecord::base_version`]), and the engine confirms
    /// a cached partition's version ([`Storage::partition_version`]) before
    /// a transaction or a read uses it. `false` (the default) for a store
    /// this process alone writes: no version is read or checked.
    fn shared(&self) -> bool {
        false
    }

    /// The version of a logical partition in a [shared](Storage::shared)
    /// store: 0 before its first commit, then one more per commit. The
    /// engine reads it *before* the partition's documents, so documents
    /// read after it are at least that version (a later version only makes
    /// a commit fail and retry, never lose an update). With it, in the same
    /// statement, the [catalog version](Storage::catalog_version), so a
    /// transaction learns of another node's container or script change at
    /// no extra cost.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the store cannot be read.
    fn partition_version(&self, container: &str, partition_key: &PartitionKey) -> Result<Versions> {
        let _ = (container, partition_key);
        Ok(Versions::default())
    }

    /// The version of the catalog (containers, their settings and their
    /// scripts) in a [shared](Storage::shared) store: every
    /// `create_container`, `delete_container`, `update_container`,
    /// `put_script` and `delete_script` moves it, in the same transaction
    /// as its change, so a node that holds the catalog as of version n and
    /// reads a later one knows to [`Storage::load`] it again (reading the
    /// version first, so what it loads is at least that version). 0 for a
    /// store only this process writes.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the store cannot be read.
    fn catalog_version(&self) -> Result<u64> {
        Ok(0)
    }

    /// Reserves `count` sequence numbers (rids and etags) of `container`
    /// for this node in a [shared](Storage::shared) store: returns the
    /// last, `end`, so the node may use `end - count + 1 ..= end`, which no
    /// other node is given. Above every number any node has used or
    /// reserved, so etags and rids stay unique across nodes.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] on I/O failure, or for a store that is
    /// not shared (which never needs to).
    fn reserve_sequence(&self, container: &str, count: u64) -> Result<u64> {
        let _ = count;
        Err(crate::Error::Storage(format!(
            "sequence numbers of {container:?} reserved in a store no other node writes"
        )))
    }
}
