//! SQLite storage with group commit.
//!
//! One SQLite file in WAL mode holds the `containers`, `docs` and `changes`
//! tables. A single committer thread writes with the write connection. Committing
//! transactions hand it their [`CommitRecord`] and wait; the thread takes
//! every record that is waiting, writes them all in *one* SQLite transaction
//! and pays *one* fsync for the lot, then wakes each committer with its LSN:
//!
//! ```text
//!   caller 1 ─┐                    ┌─ BEGIN
//!   caller 2 ─┼─► queue ─► committer ─ INSERT … (all waiting records)
//!   caller 3 ─┘                    └─ COMMIT (one fsync) ─► wake callers 1, 2, 3
//! ```
//!
//! Batches form by themselves: while one fsync runs, the next callers queue
//! up, so the batch size follows the load and an idle store commits at once.
//! An fsync costs about as much as a few hundred row writes, so one commit
//! per transaction would cap throughput near 1/fsync; batching is what makes
//! thousands of durable transactions per second possible.
//!
//! Under [`Durability::Full`] the fsync is also pipelined: SQLite commits
//! each batch into the write-ahead log without syncing (`synchronous=OFF`),
//! and a syncer thread fsyncs the log file and only then wakes the batch's
//! callers, while the committer already writes the next batch:
//!
//! ```text
//!   committer: write batch 1 │ write batch 2 │ write batch 3 …
//!   syncer:                  │ fsync ─► wake 1 │ fsync ─► wake 2 (and 3, if written) …
//! ```
//!
//! A commit that finds the store idle (no batch being written, none waiting
//! for its fsync) skips both threads: the caller writes its record with the
//! write side as the committer would, releases it, and fsyncs the log
//! itself. At one caller that saves the two thread wake-ups and the reply
//! (tens of µs each on small VMs), so a lone writer waits for little more
//! than its fsync, as it would on SQLite. Under load the store is rarely
//! idle and batches form as above; the committer can write the next batch
//! during an fsync in place, as during the syncer's. Batches are still
//! answered in the order they were written: a caller syncs in place only
//! when no other batch waits for an fsync, and the syncer answers nothing
//! while a batch written before its own is being synced in place.
//!
//! A caller is still woken only after everything its batch wrote is on disk
//! (an fsync covers every write to the file made before it), and one fsync
//! covers every batch written while the previous one ran. What SQLite's own
//! syncs would have protected besides the commits is kept: checkpoints run
//! with `synchronous=FULL` (SQLite syncs the log before copying it into the
//! database file and the file after), never with syncs off (a wal hook
//! replaces SQLite's automatic checkpoints), and the committer switches
//! back to FULL before its connection closes (closing checkpoints and
//! deletes the log). Readers of the change log see a batch only once it is
//! durable: they read up to the last synced LSN of each container.
//!
//! Checkpoints run beside the committer, on a [`Checkpointer`] thread with
//! its own connection, so commits do not wait while the log is copied. A
//! checkpoint beside a writer under steady load never finds the log empty,
//! and only an empty log restarts from the top, so the committer copies
//! the last few pages a round left itself, between two batches.
//!
//! A commit writes only the change log. `docs`, each document's latest
//! state, is a fold of the log up to the LSN recorded per container in
//! `folded`: the committer keeps the documents committed since the last
//! fold in memory (latest version per document) and writes them into
//! `docs` in key order, the oldest [`FOLD_STEP`] at a time when
//! [`MAX_PENDING`] have gathered or the store is idle, and all of them
//! when the store closes. Opening
//! reads what the log holds past `folded` (what a crash left unfolded)
//! back into memory as pending, for the committer to fold in steps once
//! the store is idle, and reads no other document: the engine reads a logical partition from `docs`
//! (one range of its index) when it needs it, with the pending documents
//! of that partition laid over the rows. So a transaction only appends to the end
//! of the log, instead of writing each document twice and dirtying the
//! `docs` B-tree pages of unrelated partitions, and a hot document (a post
//! whose comment count every comment bumps) reaches `docs` once per fold
//! instead of once per commit.
//!
//! The log does not keep every version: once a change is behind its
//! container's last [`RETAINED_COMMITS`](super::RETAINED_COMMITS) commits
//! and its fold mark, a version a later one replaced, or a delete, is
//! deleted from it ([`sweep_superseded`] under load, [`sweep`] at idle),
//! so the log holds what the in-memory store's does: the last commits
//! whole, and before them the latest version of each live document.
//!
//! Each body is stored once, in the log: a `docs` row holds the document's
//! key, its rid and the (`lsn`, `idx`) of the log row with its current
//! version, and its `body` is `NULL` (rows an older Partita wrote keep
//! their bodies and no pointer). A read joins the two in one statement, so
//! both come from one snapshot; the log row a `docs` row points at is
//! deleted only with its container, which deletes the `docs` rows with
//! it, or by the fold that points the `docs` row at a later version, in
//! the same transaction, so a pointer always finds its row. The log is a
//! rowid table with a unique index: appending to a `WITHOUT ROWID` table
//! with large rows rebalances sibling pages on every split. `docs` rows
//! are small (tens of bytes) and written in key order by the fold, so
//! `docs` is `WITHOUT ROWID`, keyed by (container, pk, id), and needs no
//! separate index.
//!
//! A body is stored without the system properties the engine appended to
//! it (`_rid`, `_self`, `_etag`, `_attachments`, `_ts`: about half of a
//! small document), as a BLOB: they follow from the log row's `rid`,
//! `seq` and `ts` and the container's [`Stamp`], and every read puts them
//! back ([`stored_body`], [`body_text`]). A body that does not end with
//! them exactly (a script added a member after `_ts`) is stored whole, as
//! TEXT, as are the bodies of stores written before.
//!
//! A second connection serves reads of the change log; WAL mode lets it read
//! committed data while the committer writes.
//!
//! After a failed batch the committer refuses every later request: the
//! outcome of a failed fsync is unknown, and retrying it can silently lose
//! data, so the store becomes read-only until it is reopened.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::ops::{Bound, ControlFlow};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use host_api::{PartitionKey, ScriptKind, TriggerOperation, TriggerType};
use parking_lot::{Condvar, Mutex, RwLock};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde_json::Value;

use super::{
    Change, ChangeKind, CommitRecord, ContainerMeta, Durability, IndexWalk, LoadedContainer,
    LoadedDocument, Lsn, ScriptRecord, Skipped, Storage, Submitted, WalkPage, kind_name,
    language_name, parse_kind, parse_language,
};
use crate::document::{Document, now_secs};
use crate::error::{Error, Result};
use crate::indexing::{IndexingMode, IndexingPolicy};
use crate::query::Needles;
use crate::range_index::{self, Accept, Entries, IndexTerm, IndexedPaths, WalkOrder};
use crate::script::TriggerNames;
use crate::settings::{apply_settings, settings_json};
use crate::stamp::Stamp;

/// The default of how many pages the write-ahead log grows to before it
/// is copied back into the database file, by a checkpointer thread beside
/// the committer ([`Options::checkpoint_pages`](crate::Options::checkpoint_pages);
/// SQLite's default is 1,000, 4 MB). A
/// checkpoint copies each page once however often it was rewritten, and the
/// workload rewrites the same hot pages (the end of the change log, the
/// pages a fold touches) again and again, so a larger log means fewer
/// copies and fsyncs of the database file. createComment through `partita serve`,
/// durable, 1,000 posts: with 16 connections (15 s runs) 11.2–11.3k
/// against 9.8–10.4k executions/s at 10,000 pages; with 64 (30 s) 12.8k
/// against 10.5k (measured when the committer still checkpointed between
/// batches). The log file then stays up to ~120 MB, and recovery after a
/// crash reads at most that much.
pub const CHECKPOINT_PAGES: u32 = 30_000;

/// The most records written in one SQLite transaction.
const MAX_BATCH: usize = 1024;

/// The most documents kept in memory waiting for the next fold into `docs`
/// (see the module docs).
const MAX_PENDING: usize = 20_000;

/// How many pending documents a step of folding writes when the store
/// folds because it is idle or has [`MAX_PENDING`] of them: the oldest,
/// container by container. A fold holds the write side, and writing 20,000
/// documents with their index entries took 1–2.5 s on the demo's store, a
/// stall for every commit; a step writes a tenth as many (its own time was
/// not measured), and the hot documents, changed last, stay pending and
/// keep coalescing.
const FOLD_STEP: usize = 2_000;

/// A store that wrote nothing for this long folds what is pending, a
/// [`FOLD_STEP`] at a time between requests: every
/// read of the range index lays the pending documents of its container
/// over what it finds (`SqliteStorage::index_view`), and with thousands
/// pending that pass costs more than the read (the demo's feed query, 100
/// posts by date, took 7.8 ms after 15,000 writes and 1.7 ms after a
/// fold). Under steady writes the store never idles, and folds in steps
/// at [`MAX_PENDING`].
const IDLE_FOLD: Duration = Duration::from_millis(50);

/// A container whose log has this many commits past its fold mark folds
/// a step even with fewer than [`MAX_PENDING`] documents pending
/// (`Writer::marks_behind`).
const MAX_UNFOLDED_COMMITS: u64 = 20_000;

/// How many rows written to the log make the committer delete up to twice
/// as many of its superseded rows ([`sweep_superseded`]), after the batch
/// that reached them (so it catches up after a fold mark moved by
/// thousands of commits); an idle store sweeps [`SWEEP_STEP`] at a time
/// until none is left.
const SWEEP_EVERY: u64 = 256;

/// The rows a step of sweeping an idle store looks at.
const SWEEP_STEP: usize = 4_096;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS containers (
    id TEXT PRIMARY KEY,
    ordinal INTEGER NOT NULL,
    pk_path TEXT NOT NULL,
    physical_partitions INTEGER NOT NULL,
    settings TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS docs (
    container TEXT NOT NULL,
    pk TEXT NOT NULL,
    id TEXT NOT NULL,
    rid INTEGER NOT NULL,
    lsn INTEGER,
    idx INTEGER,
    body TEXT,
    PRIMARY KEY (container, pk, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS changes (
    container TEXT NOT NULL,
    lsn INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    pk TEXT NOT NULL,
    id TEXT NOT NULL,
    op NOT NULL,
    seq INTEGER NOT NULL,
    rid INTEGER NOT NULL,
    body TEXT,
    ts INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS changes_by_lsn ON changes (container, lsn, idx);
CREATE INDEX IF NOT EXISTS docs_by_rid ON docs (container, pk, rid);
CREATE TABLE IF NOT EXISTS scripts (
    container TEXT NOT NULL,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    language TEXT NOT NULL,
    body BLOB NOT NULL,
    trigger_type TEXT,
    trigger_operation TEXT,
    version INTEGER NOT NULL,
    ts INTEGER NOT NULL,
    PRIMARY KEY (container, kind, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS folded (
    container TEXT PRIMARY KEY,
    lsn INTEGER NOT NULL,
    seq INTEGER,
    swept INTEGER
);
CREATE TABLE IF NOT EXISTS idx_paths (
    key INTEGER PRIMARY KEY,
    container TEXT NOT NULL,
    path TEXT NOT NULL,
    UNIQUE (container, path)
);
CREATE TABLE IF NOT EXISTS idx (
    key INTEGER NOT NULL,
    value BLOB NOT NULL,
    pk TEXT NOT NULL,
    rid INTEGER NOT NULL,
    PRIMARY KEY (key, value, pk, rid)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS idx_builds (
    container TEXT PRIMARY KEY,
    pk TEXT NOT NULL,
    id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS idx_format (version INTEGER NOT NULL);
";

/// The format of the entries of `idx` ([`crate::range_index`]), kept in
/// `idx_format`: a store whose entries are in another is indexed again.
/// 2: strings ordered by UTF-16 code units; 3: composite indexes; 4:
/// array elements; 5: an entry names its container and path by their
/// key in `idx_paths` ([`PathKeys`]), and holds a single-string partition
/// key without its brackets ([`EntryPk`]).
const INDEX_FORMAT: i64 = 5;

/// The tables an older Partita stored in another layout, the columns
/// copied from them, and a query that tells whether the table is of an
/// older layout; they are copied into the layout of [`SCHEMA`] at open.
///
/// `changes` was `WITHOUT ROWID`: appending to such a table splits pages by
/// rebalancing them with their siblings (SQLite's fast path for appends is
/// for rowid tables), which rewrote three or four pages per transaction
/// into the log. `docs` held a copy of each document's body, with its etag
/// and timestamp; its rows keep their bodies (`lsn` and `idx` `NULL`).
const RELAID: [(&str, &str, &str); 2] = [
    (
        "docs",
        "container, pk, id, rid, body",
        "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'docs' \
         AND NOT EXISTS (SELECT 1 FROM pragma_table_info('docs') WHERE name = 'lsn')",
    ),
    (
        "changes",
        "container, lsn, idx, pk, id, op, seq, rid, body, ts",
        "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'changes' \
         AND upper(sql) LIKE '%WITHOUT ROWID%'",
    ),
];

/// Creates the schema in one transaction, first moving tables of an older
/// layout aside and copying them into the new one, and, for a store from
/// before folding (`unfolded_store`), marking everything folded.
fn create_schema(conn: &mut Connection, unfolded_store: bool) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    let mut relaid = Vec::new();
    for (table, columns, older) in RELAID {
        if tx.query_row(older, [], |row| row.get::<_, bool>(0))? {
            // Its indexes go with it, and are dropped with it.
            tx.execute_batch(&format!("ALTER TABLE {table} RENAME TO {table}_old_layout"))?;
            relaid.push((table, columns));
        }
    }
    // Entries of format 4 and before held the container's and the path's
    // names in their own columns; they are built again below anyway.
    let named_entries: bool = tx.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('idx') WHERE name = 'container'",
        [],
        |row| row.get(0),
    )?;
    if named_entries {
        tx.execute_batch("DROP TABLE idx")?;
    }
    tx.execute_batch(SCHEMA)?;
    let format: Option<i64> =
        tx.query_row("SELECT MAX(version) FROM idx_format", [], |row| row.get(0))?;
    if format != Some(INDEX_FORMAT) {
        // A store from before the range index, or whose entries are in
        // another format, builds it again in the background.
        tx.execute_batch(&format!(
            "DELETE FROM idx; DELETE FROM idx_paths; DELETE FROM idx_builds; DELETE FROM idx_format; \
             INSERT INTO idx_builds (container, pk, id) SELECT id, '', '' FROM containers; \
             INSERT INTO idx_format (version) VALUES ({INDEX_FORMAT});"
        ))?;
    }
    // Stores from before container settings (time to live, unique keys).
    let has_settings: bool = tx.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('containers') WHERE name = 'settings'",
        [],
        |row| row.get(0),
    )?;
    if !has_settings {
        tx.execute_batch("ALTER TABLE containers ADD COLUMN settings TEXT NOT NULL DEFAULT '{}'")?;
    }
    // Stores from before the folded sequence number: `NULL` until the next
    // fold, read from the log meanwhile (`log_state`).
    let has_seq: bool = tx.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('folded') WHERE name = 'seq'",
        [],
        |row| row.get(0),
    )?;
    if !has_seq {
        tx.execute_batch("ALTER TABLE folded ADD COLUMN seq INTEGER")?;
    }
    // Stores from before the log was swept (`sweep`): `NULL`, swept from
    // the start.
    let has_swept: bool = tx.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('folded') WHERE name = 'swept'",
        [],
        |row| row.get(0),
    )?;
    if !has_swept {
        tx.execute_batch("ALTER TABLE folded ADD COLUMN swept INTEGER")?;
    }
    for (table, columns) in relaid {
        tx.execute_batch(&format!(
            "INSERT INTO {table} ({columns}) SELECT {columns} FROM {table}_old_layout; DROP TABLE {table}_old_layout;"
        ))?;
    }
    if unfolded_store {
        tx.execute_batch(
            "INSERT INTO folded (container, lsn) SELECT container, MAX(lsn) FROM changes GROUP BY container",
        )?;
    }
    tx.commit()
}

/// A document's latest committed state, not yet folded into `docs`:
/// `None` for a delete. `lsn` and `idx` name the log row that holds it,
/// which the fold makes the `docs` row point at.
#[derive(Clone)]
struct Pending {
    rid: u64,
    lsn: u64,
    idx: u32,
    document: Option<(Document, Arc<str>)>,
    /// The rid of the version `docs` may hold, when it differs from
    /// `rid`: a document deleted and created again since the last fold.
    /// Its `docs` row and index entries are out of date as well.
    shadows: Option<u64>,
}

/// Puts `doc` into `pending` as the latest state of `key`, remembering
/// the rid of a version it replaces that has another rid (see
/// [`Pending::shadows`]): the first such, since `docs` can only hold the
/// version from before the first pending change.
fn put_pending(pending: &mut PendingDocs, key: PendingKey, mut doc: Pending) {
    use std::collections::btree_map::Entry;
    let at = (Arc::clone(&key.0), doc.lsn, doc.idx);
    match pending.docs.entry(key) {
        Entry::Occupied(mut entry) => {
            let before = entry.get();
            doc.shadows = before
                .shadows
                .or_else(|| (before.rid != doc.rid).then_some(before.rid));
            let was = (Arc::clone(&entry.key().0), before.lsn, before.idx);
            // The key it was filed under in `by_lsn` moves to the new LSN.
            let key = match pending.by_lsn.remove(&was) {
                Some(key) => key,
                None => entry.key().clone(),
            };
            entry.insert(doc);
            pending.by_lsn.insert(at, key);
            // Never folded, so `docs` does not point at it.
            pending.superseded.insert(was);
        }
        Entry::Vacant(entry) => {
            pending.by_lsn.insert(at, entry.key().clone());
            entry.insert(doc);
        }
    }
}

/// How `changes.op` stores each [`ChangeKind`]: a small integer (SQLite
/// stores 0 and 1 in the row header alone). Rows of older stores hold the
/// name ([`ChangeKind::as_str`]), which reads still accept.
fn op_code(kind: ChangeKind) -> i64 {
    match kind {
        ChangeKind::Create => 0,
        ChangeKind::Replace => 1,
        ChangeKind::Delete => 2,
    }
}

/// Reads `changes.op`, as [`op_code`] or as an older store's name.
fn parse_op(op: rusqlite::types::ValueRef<'_>) -> Option<ChangeKind> {
    use rusqlite::types::ValueRef;
    match op {
        ValueRef::Integer(0) => Some(ChangeKind::Create),
        ValueRef::Integer(1) => Some(ChangeKind::Replace),
        ValueRef::Integer(2) => Some(ChangeKind::Delete),
        // A column of an older store's text affinity turns codes into text.
        ValueRef::Text(b"0") => Some(ChangeKind::Create),
        ValueRef::Text(b"1") => Some(ChangeKind::Replace),
        ValueRef::Text(b"2") => Some(ChangeKind::Delete),
        ValueRef::Text(name) => ChangeKind::parse(std::str::from_utf8(name).ok()?),
        _ => None,
    }
}

/// A pending document's key: (container, partition key as stored, id).
type PendingKey = (Arc<str>, String, Arc<str>);

/// Documents committed since the last fold, by key: ordered, so a fold
/// writes `docs` in key order and a read finds one partition's in one
/// range (reads see this map). Also by the (container, LSN, index) of each
/// one's latest change, so a step of folding finds the oldest without
/// going through all of them.
#[derive(Default)]
struct PendingDocs {
    docs: BTreeMap<PendingKey, Pending>,
    by_lsn: BTreeMap<(Arc<str>, u64, u32), PendingKey>,
    /// Log rows (container, LSN, index) no reader will need once they are
    /// behind the window [`sweep_superseded`] keeps: pending versions a
    /// later commit replaced, and the deletes a fold applied. A fold does
    /// not clear them.
    superseded: BTreeSet<(Arc<str>, u64, u32)>,
}

impl std::ops::Deref for PendingDocs {
    type Target = BTreeMap<PendingKey, Pending>;

    fn deref(&self) -> &Self::Target {
        &self.docs
    }
}

impl PendingDocs {
    fn clear(&mut self) {
        self.docs.clear();
        self.by_lsn.clear();
    }

    /// Drops the documents of a deleted container.
    fn drop_container(&mut self, id: &str) {
        self.docs.retain(|(container, _, _), _| **container != *id);
        self.by_lsn
            .retain(|(container, _, _), _| **container != *id);
        self.superseded
            .retain(|(container, _, _)| **container != *id);
    }

    /// Drops the documents a fold wrote.
    fn remove(&mut self, keys: &[PendingKey]) {
        for key in keys {
            if let Some(doc) = self.docs.remove(key) {
                self.by_lsn.remove(&(Arc::clone(&key.0), doc.lsn, doc.idx));
            }
        }
    }

    /// The containers with pending documents.
    fn containers(&self) -> Vec<Arc<str>> {
        let mut found: Vec<Arc<str>> = Vec::new();
        let mut next = self.by_lsn.keys().next();
        while let Some((container, _, _)) = next {
            found.push(Arc::clone(container));
            let past = (Arc::clone(container), u64::MAX, u32::MAX);
            next = self
                .by_lsn
                .range((Bound::Excluded(past), Bound::Unbounded))
                .map(|(key, _)| key)
                .next();
        }
        found
    }
}

/// The pending documents, shared by the write side (which adds a batch's
/// after it committed, and clears them after a fold committed) and the
/// readers of partitions (which lay them over `docs`). A reader copies its
/// partition's out before it reads `docs`, so a fold between the two
/// only means it reads the same versions twice.
type SharedPending = Arc<RwLock<PendingDocs>>;

enum Request {
    Commit(CommitRecord, mpsc::SyncSender<Result<Lsn>>),
    /// Container and script definitions: written in the same batches, in
    /// queue order with the commits.
    Meta(MetaOp, mpsc::SyncSender<Result<()>>),
}

enum MetaOp {
    /// Boxed: a definition is far larger than a commit's request.
    CreateContainer(Box<ContainerMeta>),
    UpdateContainer(Box<ContainerMeta>),
    DeleteContainer(String),
    PutScript(ScriptRecord),
    DeleteScript {
        container: String,
        kind: ScriptKind,
        id: String,
    },
}

/// How the committer answers a written request: after the fsync that makes
/// it durable (the syncer), or at once (`Durability::None`).
enum Ack {
    Commit {
        reply: mpsc::SyncSender<Result<Lsn>>,
        container: Arc<str>,
        lsn: Lsn,
    },
    Meta {
        reply: mpsc::SyncSender<Result<()>>,
        /// A deleted container: its change log is gone.
        deleted: Option<String>,
    },
}

/// What the committer, the syncer and the readers share.
struct Shared {
    /// Why the store refuses writes (a failed batch, fsync or checkpoint).
    failed: Mutex<Option<String>>,
    /// Per container, the last LSN whose batch is durable: the change log is
    /// read up to it, so nobody sees a change before its caller could.
    durable: Mutex<HashMap<String, u64>>,
    /// Requests sent to the committer and not yet taken by it: a commit
    /// joins them rather than write alone, so batches still form under load.
    queued: AtomicUsize,
    /// Batches handed to the syncer and not yet answered. A batch is synced
    /// in place only when this is 0, so batches are answered in the order
    /// they were written.
    syncing: AtomicUsize,
    /// A batch synced in place by its caller, outside the write lock, and
    /// not yet answered: while it is, no other batch is synced in place
    /// and the syncer answers nothing (its batches were written after it).
    in_place: Mutex<bool>,
    in_place_done: Condvar,
    /// An fsync in place failed: every later fsync proves nothing.
    in_place_failed: AtomicBool,
    /// The log file for fsyncs in place (the syncer has its own handle).
    in_place_wal: Mutex<Option<File>>,
    /// Per container, what its documents' system properties are made of:
    /// bodies are stored without them ([`stored_body`]).
    stamps: RwLock<Stamps>,
    /// Per container, its indexing policy and whether its range index is
    /// complete (see [`IndexState`]).
    indexes: RwLock<Indexes>,
    /// Some container's range index is being built: the committer builds
    /// it while no request waits.
    building: AtomicBool,
    /// Batches written so far, by the committer or in place: the committer
    /// folds once a whole [`IDLE_FOLD`] passed without one.
    batches: AtomicU64,
    /// [`IDLE_FOLD`], or `None` to fold only when full (a store on a
    /// simulated small disk, whose tests count what is folded).
    idle_fold: Option<Duration>,
}

/// A container's range index as the store keeps it: the entries of every
/// document under `policy` (`crate::range_index`), in `idx`, keyed by
/// (path key, value, partition, rid) ([`PathKeys`], [`EntryPk`]). The
/// fold writes a document's entries with its `docs` row, in the same
/// transaction, so `idx` always
/// describes `docs` exactly and the pending documents describe the rest;
/// a new policy empties it, and the committer builds it again between
/// batches, a thousand documents a step, from where `idx_builds` says it
/// stopped (a crash resumes there).
#[derive(Clone)]
struct IndexState {
    policy: Arc<IndexingPolicy>,
    /// Every document of `docs` has its entries: false while being built.
    ready: bool,
}

/// Per container id, its [`IndexState`].
type Indexes = HashMap<String, IndexState>;

/// A term of a read of the range index, with its path key.
type PathTerm = (IndexTerm, String);

/// What the pending documents of a container say instead of its range
/// index, for one read of it (see `SqliteStorage::index_view`).
struct Overlay {
    /// The rids of every pending document (deleted ones too), ascending:
    /// whatever `idx` says of them is out of date. A rid names one
    /// document of a container.
    stale: Vec<u64>,
    /// The pending documents that satisfy the read's terms.
    matching: Vec<Overlaid>,
}

impl Overlay {
    fn is_stale(&self, rid: u64) -> bool {
        self.stale.binary_search(&rid).is_ok()
    }
}

/// A pending document that satisfies a read's terms.
struct Overlaid {
    pk: String,
    rid: u64,
    /// Its key at the walked path (empty when the read walks none).
    key: Vec<u8>,
}

/// Runs a read of the range index on `conn`, giving each row to `f`
/// until it breaks.
fn index_rows(
    conn: &Connection,
    sql: &str,
    params: Vec<SqlValue>,
    f: &mut dyn FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<ControlFlow<()>>,
) -> Result<()> {
    let bad = |e: rusqlite::Error| Error::storage("read the range index", e);
    let mut stmt = conn.prepare_cached(sql).map_err(bad)?;
    let mut rows = stmt
        .query(rusqlite::params_from_iter(params))
        .map_err(bad)?;
    while let Some(row) = rows.next().map_err(bad)? {
        if f(row).map_err(bad)?.is_break() {
            break;
        }
    }
    Ok(())
}

/// How many entries of a range a pass over them reads in the time it
/// takes to read, parse and check one document: a range of more entries
/// per candidate reads the candidates' documents instead (see
/// `SqliteStorage::index_candidates`). About 0.3 µs an entry, against
/// 10–30 µs a document of ~200 bytes.
const DOCUMENTS_PER_ENTRY: usize = 32;

/// The entries of the range index at `path` that `accept` accepts,
/// counted up to `cap`.
fn count_entries(
    conn: &Connection,
    container: &str,
    path: &str,
    accept: &Accept,
    cap: i64,
) -> Result<i64> {
    let mut params = vec![
        SqlValue::Text(container.to_owned()),
        SqlValue::Text(path.to_owned()),
        SqlValue::Integer(cap),
    ];
    let sql = format!(
        "SELECT COUNT(*) FROM (SELECT 1 FROM idx WHERE key = {}{} LIMIT ?3)",
        path_key(2),
        accept_sql("value", accept, &mut params)
    );
    conn.prepare_cached(&sql)
        .and_then(|mut count| count.query_row(rusqlite::params_from_iter(params), |row| row.get(0)))
        .map_err(|e| Error::storage("read the range index", e))
}

/// Those of the `candidates` (partition key as stored, rid) of `docs`
/// whose document `term` matches, read in the snapshot of `conn` (the
/// one the range index was read in, which describes `docs` exactly). A
/// row that does not parse is kept, as its entries are: an entry too
/// many costs a query a look, never a result.
fn documents_matching(
    conn: &Connection,
    container: &str,
    stamp: Option<&Stamp>,
    term: &IndexTerm,
    candidates: BTreeSet<(String, u64)>,
) -> Result<BTreeSet<(String, u64)>> {
    let bad = |e: rusqlite::Error| Error::storage("read the range index", e);
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT d.id, {} d.pk = ?2 AND d.rid = ?3",
            DOC_BODY.replacen("docs AS d", "docs AS d INDEXED BY docs_by_rid", 1)
        ))
        .map_err(bad)?;
    let mut kept = BTreeSet::new();
    for (pk, rid) in candidates {
        let mut rows = stmt
            .query(params![container, pk, rid as i64])
            .map_err(bad)?;
        let Some(row) = rows.next().map_err(bad)? else {
            continue;
        };
        let id: String = row.get(0).map_err(bad)?;
        let keep = match parse_row(row, 1, stamp, container, &pk, &id, rid) {
            Ok(loaded) => term.matches(loaded.document.value()),
            Err(_) => true,
        };
        drop(rows);
        if keep {
            kept.insert((pk, rid));
        }
    }
    Ok(kept)
}

/// The range terms of `terms`, and the others.
fn ranges_apart(terms: &[PathTerm]) -> (Vec<PathTerm>, Vec<PathTerm>) {
    terms
        .iter()
        .cloned()
        .partition(|(term, _)| matches!(term.accept, Accept::Range(..)))
}

/// `?n, ?n+1, …` for `values`, which join `params`.
fn placeholders(values: impl IntoIterator<Item = SqlValue>, params: &mut Vec<SqlValue>) -> String {
    let mut list = Vec::new();
    for value in values {
        params.push(value);
        list.push(format!("?{}", params.len()));
    }
    list.join(", ")
}

/// `AND <column> …` for the keys `accept` accepts (nothing for every
/// key); its parameters join `params`.
fn accept_sql(column: &str, accept: &Accept, params: &mut Vec<SqlValue>) -> String {
    match accept {
        Accept::Values(values) => format!(
            " AND {column} IN ({})",
            placeholders(values.iter().cloned().map(SqlValue::Blob), params)
        ),
        Accept::Range(low, high) => {
            let mut sql = String::new();
            for (bound, inclusive, exclusive) in [(low, ">=", ">"), (high, "<=", "<")] {
                let (op, key) = match bound {
                    Bound::Included(key) => (inclusive, key),
                    Bound::Excluded(key) => (exclusive, key),
                    Bound::Unbounded => continue,
                };
                params.push(SqlValue::Blob(key.clone()));
                sql.push_str(&format!(" AND {column} {op} ?{}", params.len()));
            }
            sql
        }
    }
}

/// The key in `idx_paths` of the container `?1` and the path `?{path}`,
/// as SQL: a subquery on no column of the statement, which SQLite runs
/// once, and whose `NULL` (a path no entry was ever written for) matches
/// no entry.
fn path_key(path: usize) -> String {
    format!("(SELECT key FROM idx_paths WHERE container = ?1 AND path = ?{path})")
}

/// A condition on the index row `i` for each of `terms`: the same
/// document has an entry that satisfies it. Their parameters join `params`.
fn term_filters(terms: &[PathTerm], params: &mut Vec<SqlValue>) -> String {
    let mut sql = String::new();
    for (term, path) in terms {
        params.push(SqlValue::Text(path.clone()));
        let path = params.len();
        sql.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM idx AS t WHERE t.key = {}{} \
             AND t.pk = i.pk AND t.rid = i.rid)",
            path_key(path),
            accept_sql("t.value", &term.accept, params)
        ));
    }
    sql
}

/// Parses stored partition keys, each text once in a row.
struct PartitionKeys<'c> {
    container: &'c str,
    last: Option<(String, PartitionKey)>,
}

impl<'c> PartitionKeys<'c> {
    fn new(container: &'c str) -> Self {
        PartitionKeys {
            container,
            last: None,
        }
    }

    fn parse(&mut self, pk: &str) -> Result<PartitionKey> {
        if let Some((text, key)) = &self.last
            && text == pk
        {
            return Ok(key.clone());
        }
        let key = super::stored_partition_key(self.container, pk)?;
        self.last = Some((pk.to_owned(), key.clone()));
        Ok(key)
    }
}

/// The documents a build step indexes in one transaction.
const BUILD_STEP: usize = 1000;

/// The index state of every container of a store, from its tables.
fn index_states(conn: &Connection) -> Result<Indexes> {
    let bad = |e: rusqlite::Error| Error::storage("read index builds", e);
    let mut stmt = conn
        .prepare("SELECT container FROM idx_builds")
        .map_err(bad)?;
    let building: BTreeSet<String> = stmt
        .query_map([], |row| row.get(0))
        .map_err(bad)?
        .collect::<rusqlite::Result<_>>()
        .map_err(bad)?;
    Ok(container_metas(conn)?
        .into_iter()
        .map(|meta| {
            let ready = !building.contains(&meta.id);
            (
                meta.id,
                IndexState {
                    policy: Arc::new(meta.indexing_policy),
                    ready,
                },
            )
        })
        .collect())
}

/// Per container id, its [`Stamp`].
type Stamps = HashMap<String, Arc<Stamp>>;

impl Shared {
    /// The state of a store whose containers are durable up to `durable`
    /// and stamped as `stamps`.
    fn new(
        durable: HashMap<String, u64>,
        stamps: Stamps,
        indexes: Indexes,
        idle_fold: Option<Duration>,
    ) -> Shared {
        let building = indexes.values().any(|state| !state.ready);
        Shared {
            batches: AtomicU64::new(0),
            idle_fold,
            indexes: RwLock::new(indexes),
            building: AtomicBool::new(building),
            failed: Mutex::new(None),
            durable: Mutex::new(durable),
            queued: AtomicUsize::new(0),
            syncing: AtomicUsize::new(0),
            in_place: Mutex::new(false),
            in_place_done: Condvar::new(),
            in_place_failed: AtomicBool::new(false),
            in_place_wal: Mutex::new(None),
            stamps: RwLock::new(stamps),
        }
    }

    /// Publishes a durable batch and wakes its callers.
    fn complete(&self, acks: Vec<Ack>) {
        {
            let mut durable = self.durable.lock();
            for ack in &acks {
                match ack {
                    Ack::Commit { container, lsn, .. } => {
                        durable.insert(container.to_string(), lsn.0);
                    }
                    Ack::Meta {
                        deleted: Some(id), ..
                    } => {
                        durable.remove(id);
                    }
                    Ack::Meta { deleted: None, .. } => {}
                }
            }
        }
        for ack in acks {
            // A caller that stopped waiting is not an error of ours.
            match ack {
                Ack::Commit { reply, lsn, .. } => drop(reply.send(Ok(lsn))),
                Ack::Meta { reply, .. } => drop(reply.send(Ok(()))),
            }
        }
    }

    /// Refuses further writes for `reason`; returns the reason in force.
    fn fail(&self, reason: String) -> String {
        self.failed.lock().get_or_insert(reason).clone()
    }

    /// Syncs the log for a batch written while no other batch waited for an
    /// fsync, and answers it; then lets the syncer answer what was written
    /// after it. A store that failed meanwhile fails it instead: after a
    /// failed fsync a successful one proves nothing.
    fn sync_in_place(&self, in_place: InPlace) {
        let failed = self.failed.lock().clone();
        let synced = match failed {
            Some(reason) => Err(reason),
            None => sync_log(&mut self.in_place_wal.lock(), &in_place.wal_path).map_err(|e| {
                self.in_place_failed.store(true, Ordering::Release);
                self.fail(format!("fsync {}: {e}", in_place.wal_path.display()))
            }),
        };
        match synced {
            Ok(()) => self.complete(in_place.acks),
            Err(reason) => fail_acks(in_place.acks, &reason),
        }
        *self.in_place.lock() = false;
        self.in_place_done.notify_all();
    }

    /// Waits until no batch is being synced in place (the syncer's batches
    /// were written after it, and are answered after it).
    fn wait_for_in_place(&self) {
        let mut busy = self.in_place.lock();
        while *busy {
            self.in_place_done.wait(&mut busy);
        }
    }
}

fn fail_acks(acks: Vec<Ack>, reason: &str) {
    for ack in acks {
        let err = Error::Storage(reason.to_owned());
        match ack {
            Ack::Commit { reply, .. } => drop(reply.send(Err(err))),
            Ack::Meta { reply, .. } => drop(reply.send(Err(err))),
        }
    }
}

impl Request {
    fn fail(self, err: impl Fn() -> Error) {
        // A caller that stopped waiting is not an error of ours.
        match self {
            Request::Commit(_, reply) => drop(reply.send(Err(err()))),
            Request::Meta(_, reply) => drop(reply.send(Err(err()))),
        }
    }
}

/// Storage in one SQLite file (WAL mode), with group commit.
pub struct SqliteStorage {
    sender: Option<mpsc::Sender<Request>>,
    committer: Option<JoinHandle<()>>,
    /// The write side, shared with the committer thread; `None` once the
    /// committer has closed it.
    writer: Arc<Mutex<Option<Writer>>>,
    reader: Mutex<Connection>,
    shared: Arc<Shared>,
    /// The documents committed since the last fold (for a store opened
    /// read-only: those its log holds past the folded marks, which are
    /// never folded, since folding would write).
    pending: SharedPending,
    /// Per container, the highest sequence number it used, as of the open
    /// (for `load`).
    max_seq: HashMap<String, u64>,
    /// Why the store refuses writes, when it opened read-only.
    read_only: Option<String>,
    /// Whether `docs_by_rid` exists (a store opened read-only may be from
    /// before it), by which the documents an index names are read.
    rid_index: bool,
}

/// Why opening a store for writing failed: the error, and SQLite's code
/// when SQLite failed (`SQLITE_FULL` is a full disk).
struct OpenFailure {
    error: Box<Error>,
    code: Option<rusqlite::ErrorCode>,
}

impl OpenFailure {
    fn sqlite(context: &'static str) -> impl Fn(rusqlite::Error) -> OpenFailure {
        move |e| OpenFailure {
            code: e.sqlite_error_code(),
            error: Box::new(Error::storage(context, e)),
        }
    }
}

impl From<Error> for OpenFailure {
    fn from(error: Error) -> OpenFailure {
        OpenFailure {
            error: Box::new(error),
            code: None,
        }
    }
}

/// Why the store at `path` cannot be written, as "the cause (the error);
/// the remedy", when that is why opening it for writing failed; `None` for
/// any other failure (a corrupt file), which opening read-only would not
/// mend. Files that exist are opened for writing (nothing is written), and
/// a probe file is written, synced and removed in the directory.
fn why_unwritable(path: &Path, failure: &OpenFailure) -> Option<String> {
    use std::io::ErrorKind;
    let full =
        |what: &dyn std::fmt::Display| format!("the disk is full ({what}); free space and restart");
    if failure.code == Some(rusqlite::ErrorCode::DiskFull) {
        return Some(match &*failure.error {
            Error::Storage(message) => full(message),
            other => full(other),
        });
    }
    let explain = |file: &Path, e: std::io::Error| match e.kind() {
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => Some(full(&e)),
        ErrorKind::ReadOnlyFilesystem => Some(format!(
            "the file system is read-only ({}: {e}); remount it read-write and restart",
            file.display()
        )),
        ErrorKind::PermissionDenied => Some(format!(
            "no permission to write {} ({e}); give the server's user write access to the directory and its files, and restart",
            file.display()
        )),
        _ => None,
    };
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let file = PathBuf::from(file);
        if !file.exists() {
            continue;
        }
        if let Err(e) = File::options().write(true).open(&file) {
            return explain(&file, e);
        }
    }
    let dir = store_dir(path);
    let written = with_probe(dir, ".partita-write-probe", |mut file| {
        std::io::Write::write_all(&mut file, &[0; 4096])?;
        file.sync_all()
    });
    written.err().and_then(|e| explain(dir, e))
}

/// The directory of the store file at `path`.
fn store_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Creates the file `name` in `dir`, runs `use_it` on it and removes it,
/// whatever `use_it` returned: the probes that find out at open whether
/// the store's directory can be written, and has room.
fn with_probe(
    dir: &Path,
    name: &str,
    use_it: impl FnOnce(&File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let probe = dir.join(name);
    let used = File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .and_then(|file| use_it(&file));
    // A probe that was not created is not there to remove.
    let _ = std::fs::remove_file(&probe);
    used
}

/// The bytes of disk a fold of `pending` may need, with the log's next
/// stretch: each document's row and index entries are written to the log
/// and then copied into the file, so four times its text, and a
/// [`LOG_PAD`] of frames for the commits after it.
fn fold_room(pending: &PendingDocs) -> u64 {
    let text: usize = pending
        .values()
        .filter_map(|p| p.document.as_ref())
        .map(|(_, text)| text.len() + 64)
        .sum();
    4 * text as u64 + LOG_PAD as u64
}

/// Why opening failed when [`reserve_room`] did: a full disk (or quota)
/// as SQLite's own full disk, so the store opens read-only saying so; any
/// other failure (no permission to create the probe) without a code, to be
/// explained as any failure at open ([`why_unwritable`]).
fn no_room(room: u64, e: &std::io::Error) -> OpenFailure {
    use std::io::ErrorKind;
    let full = matches!(e.kind(), ErrorKind::StorageFull | ErrorKind::QuotaExceeded);
    OpenFailure {
        code: full.then_some(rusqlite::ErrorCode::DiskFull),
        error: Box::new(Error::Storage(format!(
            "no room for the {room} bytes folding the log needs: {e}"
        ))),
    }
}

/// Proves that `bytes` of disk are free beside the store at `path`: a
/// probe file allocated that long (written with zeros where the file
/// system cannot allocate), then removed. `Err` with the file system's
/// error (`StorageFull` on a full disk) otherwise.
fn reserve_room(path: &Path, bytes: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    with_probe(
        store_dir(path),
        ".partita-room-probe",
        |file| match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, bytes) {
            Ok(()) => Ok(()),
            Err(e) if e == rustix::io::Errno::OPNOTSUPP => {
                static ZEROS: [u8; LOG_PAD] = [0; LOG_PAD];
                let mut at = 0;
                while at < bytes {
                    let n = (bytes - at).min(LOG_PAD as u64);
                    file.write_all_at(&ZEROS[..n as usize], at)?;
                    at += n;
                }
                Ok(())
            }
            Err(e) => Err(e.into()),
        },
    )
}

/// Makes `conn` keep each statement's plan whatever values are bound to
/// it (SQLite's query planner stability guarantee). Without it, SQLite
/// marks a statement to be planned again when a bound value might change
/// its plan (an equality on an unindexed column, a LIMIT), and
/// rusqlite's statement cache clears the bindings of every statement it
/// takes back, which then re-plans it on each use: a point read spent
/// more time parsing its SQL again than reading.
fn stable_plans(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map(drop)
}

/// `path` as an SQLite URI with `query`: `file:` and the path, with the
/// characters a URI gives meaning to percent-encoded.
fn file_uri(path: &Path, query: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push('?');
    uri.push_str(query);
    uri
}

impl SqliteStorage {
    /// The candidates (partition key as stored, rid) `sql` names, one per
    /// row through `candidate`, that every term of `ranges` accepts: every
    /// statement in one snapshot of the reader.
    fn candidates(
        &self,
        container: &str,
        sql: &str,
        params: Vec<SqlValue>,
        ranges: &[PathTerm],
        candidate: &mut dyn FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<(String, u64)>,
    ) -> Result<BTreeSet<(String, u64)>> {
        let conn = self.reader.lock();
        let read = conn
            .unchecked_transaction()
            .map_err(|e| Error::storage("read the range index", e))?;
        let mut found = BTreeSet::new();
        index_rows(&read, sql, params, &mut |row| {
            found.insert(candidate(row)?);
            Ok(ControlFlow::Continue(()))
        })?;
        self.within_ranges(&read, container, ranges, found)
    }

    /// Those of `found` (partition key as stored, rid), read from `idx`
    /// in the snapshot of `read`, that every term of `ranges` accepts: a
    /// range's entries have no order by document, so a seek per candidate
    /// would scan the range again for each one (`c.g = 999 AND c.n >= 0`
    /// read the whole of `/n` for each of its 100 candidates, 2.1 s at
    /// 100,000 documents). A range reads the candidates' documents when it
    /// holds more than [`DOCUMENTS_PER_ENTRY`] entries for each of them,
    /// and else its entries, in one pass.
    fn within_ranges(
        &self,
        read: &Connection,
        container: &str,
        ranges: &[PathTerm],
        mut found: BTreeSet<(String, u64)>,
    ) -> Result<BTreeSet<(String, u64)>> {
        for (term, path) in ranges {
            if found.is_empty() {
                break;
            }
            let cap = (found.len() * DOCUMENTS_PER_ENTRY) as i64;
            if count_entries(read, container, path, &term.accept, cap)? >= cap {
                let stamp = self.shared.stamps.read().get(container).cloned();
                found = documents_matching(read, container, stamp.as_deref(), term, found)?;
                continue;
            }
            // A rid names one document of a container.
            let mut within: HashMap<u64, bool> =
                found.iter().map(|(_, rid)| (*rid, false)).collect();
            let mut params = vec![
                SqlValue::Text(container.to_owned()),
                SqlValue::Text(path.clone()),
            ];
            let sql = format!(
                "SELECT rid FROM idx WHERE key = {}{}",
                path_key(2),
                accept_sql("value", &term.accept, &mut params)
            );
            index_rows(read, &sql, params, &mut |row| {
                if let Some(hit) = within.get_mut(&(row.get::<_, i64>(0)? as u64)) {
                    *hit = true;
                }
                Ok(ControlFlow::Continue(()))
            })?;
            found.retain(|(_, rid)| within[rid]);
        }
        Ok(found)
    }

    /// The policy of the range index of `container`, when it is ready.
    /// A read of the index asks again after its statement: a new policy
    /// empties the index in a batch written only after the state says it
    /// is not ready, so an unchanged answer means the read saw the index
    /// whole (see [`IndexState`]).
    fn ready_index(&self, container: &str) -> Option<Arc<IndexingPolicy>> {
        match self.shared.indexes.read().get(container) {
            Some(state) if state.ready => Some(Arc::clone(&state.policy)),
            _ => None,
        }
    }

    /// Whether the range index of `container` is still ready under
    /// `policy` (see [`SqliteStorage::ready_index`]).
    fn still_ready(&self, container: &str, policy: &Arc<IndexingPolicy>) -> bool {
        self.ready_index(container)
            .is_some_and(|now| Arc::ptr_eq(&now, policy))
    }

    /// The terms of `terms` the index of `container` can answer, each with
    /// its path key, and what the pending documents of the container (or
    /// of its partition `within`) say instead of the index: their rids,
    /// and those that satisfy the terms, with the key at `order` when
    /// given; `None` when the index cannot answer (none, or being built).
    ///
    /// Every read of the index pays for this pass over the pending
    /// documents, so it copies only what matches.
    fn index_view(
        &self,
        container: &str,
        terms: &[IndexTerm],
        order: Option<&WalkOrder<'_>>,
        within: Option<&str>,
    ) -> Option<(Vec<PathTerm>, Overlay)> {
        let policy = self.ready_index(container)?;
        let terms: Vec<PathTerm> = terms
            .iter()
            .filter(|t| t.indexed_by(&policy))
            .map(|t| (t.clone(), t.path_key()))
            .collect();
        if terms.is_empty() && order.is_none() {
            return None;
        }
        // The pending documents first (see `read_partition_matching`):
        // each replaces whatever `idx` says of its rid.
        let pending = self.pending.read();
        let start = (
            Arc::from(container),
            within.unwrap_or_default().to_owned(),
            Arc::from(""),
        );
        let mut overlay = Overlay {
            stale: Vec::new(),
            matching: Vec::new(),
        };
        for ((_, pk, _), doc) in pending
            .range(start..)
            .take_while(|((c, pk, _), _)| **c == *container && within.is_none_or(|w| w == pk))
        {
            overlay.stale.push(doc.rid);
            overlay.stale.extend(doc.shadows);
            let Some((document, _)) = &doc.document else {
                continue;
            };
            let value = document.value();
            if !terms.iter().all(|(t, _)| t.matches(value)) {
                continue;
            }
            let key = match order {
                None => Vec::new(),
                Some(order) => match order.key_of(value) {
                    Some(key) => key,
                    None => continue,
                },
            };
            overlay.matching.push(Overlaid {
                pk: pk.clone(),
                rid: doc.rid,
                key,
            });
        }
        drop(pending);
        overlay.stale.sort_unstable();
        Some((terms, overlay))
    }

    /// Opens (creating if needed) the database file at `path`.
    ///
    /// # Errors
    /// [`Error::Storage`] when the file cannot be opened or its schema created.
    pub fn open(path: &Path, durability: Durability) -> Result<SqliteStorage> {
        SqliteStorage::open_with(path, durability, CHECKPOINT_PAGES)
    }

    /// Opens the database file at `path`, checkpointing the log every
    /// `checkpoint_pages` pages (at least 100).
    ///
    /// A store that cannot be written (the disk is full, the file system
    /// is read-only, no permission to write the directory or its files)
    /// opens read-only: see [`Storage::read_only`].
    ///
    /// # Errors
    /// As [`SqliteStorage::open`].
    pub fn open_with(
        path: &Path,
        durability: Durability,
        checkpoint_pages: u32,
    ) -> Result<SqliteStorage> {
        SqliteStorage::open_limited(path, durability, checkpoint_pages, None)
    }

    /// [`SqliteStorage::open_with`], with the file limited to `max_pages`
    /// pages of 4 KB (SQLite's `max_page_count`): growing past them fails
    /// as a full disk does. For tests ([`crate::testing`]).
    pub(crate) fn open_limited(
        path: &Path,
        durability: Durability,
        checkpoint_pages: u32,
        max_pages: Option<u32>,
    ) -> Result<SqliteStorage> {
        let failure =
            match SqliteStorage::open_writable(path, durability, checkpoint_pages, max_pages) {
                Ok(storage) => return Ok(storage),
                Err(failure) => failure,
            };
        let Some(cause) = why_unwritable(path, &failure) else {
            return Err(*failure.error);
        };
        let reason = format!(
            "the store at {} is read-only: {cause}",
            store_dir(path).display()
        );
        SqliteStorage::open_read_only(path, reason).map_err(|e| {
            Error::Storage(format!(
                "{}; opening it read-only failed too: {e}",
                failure.error
            ))
        })
    }

    /// Keeps the last `commits` of each container's log whole (at least
    /// one; by default [`super::RETAINED_COMMITS`]): see [`sweep`]. For
    /// tests, which sweep a short log.
    #[cfg(test)]
    pub(crate) fn set_retention(&self, commits: u64) {
        if let Some(writer) = self.writer.lock().as_mut() {
            writer.retained = commits;
        }
    }

    /// Opens the store for writing: recovers what a crash left unfolded
    /// and proves that a write reaches the disk.
    fn open_writable(
        path: &Path,
        durability: Durability,
        checkpoint_pages: u32,
        max_pages: Option<u32>,
    ) -> std::result::Result<SqliteStorage, OpenFailure> {
        let checkpoint_pages = checkpoint_pages.max(100);
        let mut writer = Connection::open(path).map_err(OpenFailure::sqlite("open sqlite"))?;
        stable_plans(&writer).map_err(OpenFailure::sqlite("configure sqlite"))?;
        // Syncs stay on until the store is open: closing the connection on
        // a failure below checkpoints the log into the file, which must sync.
        writer
            .execute_batch("PRAGMA synchronous = FULL")
            .map_err(OpenFailure::sqlite("initialize sqlite"))?;
        if let Some(max_pages) = max_pages {
            writer
                .execute_batch(&format!("PRAGMA max_page_count = {max_pages}"))
                .map_err(OpenFailure::sqlite("initialize sqlite"))?;
        }
        // A store written before `docs` became a fold of the log has every
        // document in `docs`: it is folded up to its last LSN.
        let unfolded_store = writer
            .query_row(
                "SELECT (SELECT COUNT(*) FROM sqlite_master WHERE name = 'docs') > 0 AND (SELECT COUNT(*) FROM sqlite_master WHERE name = 'folded') = 0",
                [],
                |row| row.get::<_, bool>(0),
            )
            .map_err(OpenFailure::sqlite("initialize sqlite"))?;
        writer
            .execute_batch(&format!(
                "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = {checkpoint_pages};"
            ))
            .map_err(OpenFailure::sqlite("initialize sqlite"))?;
        create_schema(&mut writer, unfolded_store)
            .map_err(OpenFailure::sqlite("initialize sqlite"))?;
        let wal_pages = Arc::new(AtomicI64::new(0));
        if durability == Durability::Full {
            // Replaces SQLite's automatic checkpoints, which would run with
            // syncs off; checkpoints run with FULL instead.
            let pages = Arc::clone(&wal_pages);
            writer
                .wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, frames| {
                    pages.store(i64::from(frames), Ordering::Relaxed);
                    Ok(())
                }))
                .map_err(|e| Error::storage("configure sqlite", e))?;
        }
        writer
            .busy_timeout(Duration::from_secs(10))
            .map_err(|e| Error::storage("configure sqlite", e))?;
        let (next_lsn, mut max_seq) = log_state(&writer)?;
        let marks = max_per_container(&writer, "SELECT container, lsn FROM folded")?;
        let stamps = stamps(&writer)?;
        let indexes = RwLock::new(index_states(&writer)?);
        // What the log holds past each container's mark (the commits a
        // crash left unfolded) is pending again, as before the crash: reads
        // lay it over `docs`, and the committer folds it in steps once the
        // store is idle, instead of holding up the open.
        let pending: SharedPending = Arc::new(RwLock::new(unfolded(
            &writer,
            &next_lsn,
            &mut max_seq,
            &stamps,
        )?));
        let indexes = indexes.into_inner();
        // A write that reaches the disk and needs a page, or the store
        // opens read-only: a table made and dropped again (a log that has
        // room from before is room to write in).
        writer
            .execute_batch("BEGIN; CREATE TABLE open_check (x); DROP TABLE open_check; COMMIT;")
            .map_err(OpenFailure::sqlite("write at open"))?;
        // And room to fold what is pending: folding it at open used to be
        // what found a full disk, and a disk that fails the first idle fold
        // would leave the store failed instead of read-only.
        let room = fold_room(&pending.read());
        reserve_room(path, room).map_err(|e| no_room(room, &e))?;
        writer
            .execute_batch("PRAGMA synchronous = OFF")
            .map_err(OpenFailure::sqlite("configure sqlite"))?;

        let reader = Connection::open(path).map_err(|e| Error::storage("open sqlite", e))?;
        stable_plans(&reader).map_err(|e| Error::storage("configure sqlite", e))?;
        reader
            .busy_timeout(Duration::from_secs(10))
            .map_err(|e| Error::storage("configure sqlite", e))?;
        // If the reader closes last, closing checkpoints the log into the
        // database file and deletes it: with syncs.
        reader
            .execute_batch("PRAGMA synchronous = FULL")
            .map_err(|e| Error::storage("configure sqlite", e))?;

        let idle_fold = max_pages.is_none().then_some(IDLE_FOLD);
        let shared = Arc::new(Shared::new(next_lsn.clone(), stamps, indexes, idle_fold));
        let syncer = match durability {
            Durability::Full => {
                let (sender, receiver) = mpsc::channel();
                let mut wal = path.as_os_str().to_owned();
                wal.push("-wal");
                let wal_path = PathBuf::from(wal);
                let thread = {
                    let (wal_path, shared) = (wal_path.clone(), Arc::clone(&shared));
                    std::thread::Builder::new()
                        .name("partita-syncer".to_owned())
                        .spawn(move || run_syncer(&wal_path, &receiver, &shared))
                        .map_err(|e| Error::storage("start syncer thread", e))?
                };
                Some(Syncer {
                    sender,
                    thread,
                    wal_path,
                })
            }
            Durability::None => None,
        };
        let pad = match &syncer {
            Some(syncer) => {
                let page_size: u32 = writer
                    .query_row("PRAGMA page_size", [], |row| row.get(0))
                    .map_err(|e| Error::storage("configure sqlite", e))?;
                Some(LogPad::new(syncer.wal_path.clone(), u64::from(page_size)))
            }
            None => None,
        };
        let checkpointer = match durability {
            Durability::Full => Some(Checkpointer::start(path)?),
            Durability::None => None,
        };
        let every = i64::from(checkpoint_pages);
        let writer = Arc::new(Mutex::new(Some(Writer {
            conn: writer,
            next_lsn,
            max_seq: max_seq.clone(),
            pending: Arc::clone(&pending),
            wal_pages,
            every,
            next_checkpoint: every,
            copied: 0,
            later_rounds: 0,
            syncer,
            pad,
            checkpointer,
            marks,
            retained: super::RETAINED_COMMITS,
            unswept: 0,
        })));
        let (sender, receiver) = mpsc::channel();
        let committer = {
            let (writer, shared) = (Arc::clone(&writer), Arc::clone(&shared));
            std::thread::Builder::new()
                .name("partita-committer".to_owned())
                .spawn(move || run_committer(&writer, &receiver, &shared))
                .map_err(|e| Error::storage("start committer thread", e))?
        };
        Ok(SqliteStorage {
            sender: Some(sender),
            committer: Some(committer),
            writer,
            reader: Mutex::new(reader),
            shared,
            pending,
            max_seq,
            read_only: None,
            rid_index: true,
        })
    }

    /// Opens the store read-only, for `reason`: nothing is written, not
    /// even SQLite's shared-memory index or a recovery of its log.
    ///
    /// When the log (`-wal`) holds commits not yet copied into the file,
    /// they are read through it as a writer would: SQLite's `unix-none`
    /// file system (no file locks: the data directory's LOCK keeps other
    /// writers out) in exclusive locking mode, which builds the log's index
    /// in memory instead of in a `-shm` file that may not exist and cannot
    /// be created. Without a log the file is the whole store and is opened
    /// `immutable` (in WAL mode, a read-only connection would otherwise
    /// need to create the log).
    fn open_read_only(path: &Path, reason: String) -> Result<SqliteStorage> {
        let bad = |e: rusqlite::Error| Error::storage("open sqlite read-only", e);
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let has_log = std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0);
        let reader = if has_log {
            let conn =
                Connection::open_with_flags_and_vfs(path, flags, c"unix-none").map_err(bad)?;
            conn.execute_batch("PRAGMA locking_mode = EXCLUSIVE")
                .map_err(bad)?;
            conn
        } else {
            Connection::open_with_flags(file_uri(path, "immutable=1"), flags).map_err(bad)?
        };
        stable_plans(&reader).map_err(bad)?;
        let (next_lsn, mut max_seq) = log_state(&reader)?;
        let stamps = stamps(&reader)?;
        let unfolded = unfolded(&reader, &next_lsn, &mut max_seq, &stamps)?;
        let rid_index = reader
            .query_row(
                "SELECT COUNT(*) > 0 FROM sqlite_master WHERE name = 'docs_by_rid'",
                [],
                |row| row.get(0),
            )
            .map_err(bad)?;
        Ok(SqliteStorage {
            sender: None,
            committer: None,
            writer: Arc::new(Mutex::new(None)),
            reader: Mutex::new(reader),
            // Without the range index: what the log holds past the fold
            // is not in it.
            shared: Arc::new(Shared::new(next_lsn, stamps, Indexes::new(), None)),
            pending: Arc::new(RwLock::new(unfolded)),
            max_seq,
            read_only: Some(reason),
            rid_index,
        })
    }

    /// A partition's documents (only those of `rids`, ascending, when
    /// given), those whose stored text lacks one of `needles` left
    /// unparsed (see [`Storage::read_partition_containing`]).
    fn read_partition_matching(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        needles: Option<&Needles>,
        rids: Option<&[u64]>,
    ) -> Result<(Vec<LoadedDocument>, Vec<Skipped>)> {
        let pk = partition_key.to_json_array();
        // The pending documents first: a fold after this copy leaves the
        // same versions in `docs`.
        // All of the partition's: each replaces its `docs` row whatever
        // that row's rid (a document deleted and created again has a new
        // one); only those `rids` names are read.
        let overlay = pending_of(&self.pending.read(), container, &pk);
        let mut params = vec![
            SqlValue::Text(container.to_owned()),
            SqlValue::Text(pk.clone()),
        ];
        let only = match rids {
            Some(rids) => {
                let list = placeholders(
                    rids.iter().map(|rid| SqlValue::Integer(*rid as i64)),
                    &mut params,
                );
                format!(" AND d.rid IN ({list})")
            }
            None => String::new(),
        };
        let conn = self.reader.lock();
        let bad = |e: rusqlite::Error| Error::storage("read a partition", e);
        // One statement, so one snapshot: the log rows the `docs` rows
        // point at are read as of the same commit.
        let mut stmt = conn
            .prepare_cached(&partition_read_sql(rids.is_some() && self.rid_index, &only))
            .map_err(bad)?;
        let mut rows = stmt
            .query(rusqlite::params_from_iter(params))
            .map_err(bad)?;
        let stamp = self.shared.stamps.read().get(container).cloned();
        let mut docs = Vec::new();
        let mut skipped = Vec::new();
        while let Some(row) = rows.next().map_err(bad)? {
            let id = row
                .get_ref(0)
                .map_err(bad)?
                .as_str()
                .map_err(|e| bad(e.into()))?;
            // `overlay` is in id order, as the pending map keeps it.
            if overlay.binary_search_by(|(k, _)| (**k).cmp(id)).is_ok() {
                continue;
            }
            let rid = row.get::<_, i64>(1).map_err(bad)? as u64;
            if let Some(needles) = needles
                && let Some(size) = unmatched_size(row, 2, stamp.as_deref(), rid, needles)
            {
                skipped.push(Skipped { rid, size });
                continue;
            }
            docs.push(parse_row(
                row,
                2,
                stamp.as_deref(),
                container,
                &pk,
                id,
                rid,
            )?);
        }
        docs.extend(
            overlay
                .into_iter()
                .filter(|(_, p)| rids.is_none_or(|rids| rids.binary_search(&p.rid).is_ok()))
                .filter_map(|(_, p)| p.loaded()),
        );
        Ok((docs, skipped))
    }

    fn meta(&self, op: MetaOp) -> Result<()> {
        if let Some(reason) = &self.read_only {
            return Err(Error::ReadOnly(reason.clone()));
        }
        let (reply, receive) = mpsc::sync_channel(1);
        self.send(Request::Meta(op, reply));
        wait(receive)
    }

    fn send(&self, request: Request) {
        let sender = self.sender.as_ref().expect("sender lives until drop");
        self.shared.queued.fetch_add(1, Ordering::AcqRel);
        if let Err(mpsc::SendError(request)) = sender.send(request) {
            self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            request.fail(|| Error::Storage("the committer thread has stopped".to_owned()));
        }
    }
}

impl Drop for SqliteStorage {
    fn drop(&mut self) {
        // Closing the queue lets the committer finish what is queued and exit.
        self.sender = None;
        if let Some(committer) = self.committer.take() {
            let _ = committer.join();
        }
    }
}

fn wait<T>(reply: mpsc::Receiver<Result<T>>) -> Result<T> {
    reply.recv().unwrap_or_else(|_| {
        Err(Error::Storage(
            "the committer thread has stopped".to_owned(),
        ))
    })
}

impl Storage for SqliteStorage {
    fn load(&self) -> Result<Vec<LoadedContainer>> {
        let conn = self.reader.lock();
        let mut containers: Vec<LoadedContainer> = container_metas(&conn)?
            .into_iter()
            .map(|meta| LoadedContainer {
                meta,
                max_seq: 0,
                scripts: Vec::new(),
            })
            .collect();
        let index: HashMap<String, usize> = containers
            .iter()
            .enumerate()
            .map(|(i, c)| (c.meta.id.clone(), i))
            .collect();
        for c in &mut containers {
            c.max_seq = self.max_seq.get(&c.meta.id).copied().unwrap_or(0);
        }
        load_scripts(&conn, &index, &mut containers)?;
        Ok(containers)
    }

    fn create_container(&self, meta: &ContainerMeta) -> Result<()> {
        self.meta(MetaOp::CreateContainer(Box::new(meta.clone())))
    }

    fn delete_container(&self, id: &str) -> Result<()> {
        self.meta(MetaOp::DeleteContainer(id.to_owned()))
    }

    fn update_container(&self, meta: &ContainerMeta) -> Result<()> {
        self.meta(MetaOp::UpdateContainer(Box::new(meta.clone())))
    }

    fn put_script(&self, script: &ScriptRecord) -> Result<()> {
        self.meta(MetaOp::PutScript(script.clone()))
    }

    fn delete_script(&self, container: &str, kind: ScriptKind, id: &str) -> Result<()> {
        self.meta(MetaOp::DeleteScript {
            container: container.to_owned(),
            kind,
            id: id.to_owned(),
        })
    }

    fn commit(&self, record: CommitRecord) -> Result<Lsn> {
        self.submit(record)?.wait()
    }

    fn submits_early(&self) -> bool {
        true
    }

    /// Places the record in the log: written here when the store is idle
    /// (its fsync is then the wait's), queued for the committer otherwise.
    /// Either way a later submit is written after it, and a failure of
    /// its batch or of the fsync covering it fails every later batch.
    fn submit(&self, record: CommitRecord) -> Result<Submitted<'_>> {
        if let Some(reason) = &self.read_only {
            return Err(Error::ReadOnly(reason.clone()));
        }
        let (reply, receive) = mpsc::sync_channel(1);
        let request = Request::Commit(record, reply);
        // An idle store (no batch being written, none waiting for its
        // fsync): write and sync here, without waking the committer and
        // the syncer (each wake-up of an idle thread costs tens of µs).
        let idle = self.shared.queued.load(Ordering::Acquire) == 0
            && self.shared.syncing.load(Ordering::Acquire) == 0;
        let request = match self.writer.try_lock().filter(|_| idle) {
            Some(mut guard) => match guard.as_mut() {
                Some(writer) => {
                    let in_place = writer.write(vec![request], &self.shared, true);
                    // The next batch may be written during this fsync.
                    drop(guard);
                    return Ok(match in_place {
                        Some(in_place) => Submitted::later(move || {
                            self.shared.sync_in_place(in_place);
                            wait(receive)
                        }),
                        // Answered already (no fsync to wait for, or a
                        // failed batch), or by the syncer later.
                        None => match receive.try_recv() {
                            Ok(outcome) => Submitted::ready(outcome),
                            Err(_) => Submitted::later(move || wait(receive)),
                        },
                    });
                }
                None => request,
            },
            None => request,
        };
        self.send(request);
        Ok(Submitted::later(move || wait(receive)))
    }

    fn last_lsn(&self, container: &str) -> Result<Lsn> {
        // What `read_changes` reads up to; the sweep never deletes the
        // last commit.
        let durable = self.shared.durable.lock().get(container).copied();
        Ok(Lsn(durable.unwrap_or(0)))
    }

    fn read_changes(&self, container: &str, after: Lsn, max_changes: usize) -> Result<Vec<Change>> {
        // Only what is durable: a batch the syncer has not yet synced is
        // written but not acknowledged.
        let durable = self
            .shared
            .durable
            .lock()
            .get(container)
            .copied()
            .unwrap_or(0);
        let conn = self.reader.lock();
        let bad = |e: rusqlite::Error| Error::storage("read change log", e);
        let mut stmt = conn
            .prepare_cached(
                "SELECT lsn, pk, id, op, body, ts, rid, seq FROM changes WHERE container = ?1 AND lsn > ?2 AND lsn <= ?3 ORDER BY lsn, idx",
            )
            .map_err(bad)?;
        let mut rows = stmt
            .query(params![container, after.0 as i64, durable as i64])
            .map_err(bad)?;
        let stamp = self.shared.stamps.read().get(container).cloned();
        let mut res: Vec<Change> = Vec::new();
        while let Some(row) = rows.next().map_err(bad)? {
            let lsn = Lsn(row.get::<_, i64>(0).map_err(bad)? as u64);
            if res.len() >= max_changes.max(1) && res.last().is_some_and(|c| c.lsn != lsn) {
                break;
            }
            let pk: String = row.get(1).map_err(bad)?;
            let op = row.get_ref(3).map_err(bad)?;
            let kind = parse_op(op);
            let ts = row.get::<_, i64>(5).map_err(bad)?.max(0) as u64;
            let rid = row.get::<_, i64>(6).map_err(bad)? as u64;
            let seq = row.get::<_, i64>(7).map_err(bad)? as u64;
            let corrupt = |what: String| {
                Error::Storage(format!(
                    "corrupt change log entry {lsn} of {container:?}: {what}"
                ))
            };
            let body = body_text(row.get_ref(4).map_err(bad)?, stamp.as_deref(), rid, seq, ts)
                .map_err(corrupt)?;
            let document = match body {
                Some(text) => Some(Document::new(
                    serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?,
                )),
                None => None,
            };
            res.push(Change {
                lsn,
                partition_key: PartitionKey::parse(&pk).map_err(|e| corrupt(e.to_string()))?,
                id: row.get(2).map_err(bad)?,
                kind: kind.ok_or_else(|| corrupt(format!("unknown op {op:?}")))?,
                document,
                ts,
            });
        }
        Ok(res)
    }

    fn keeps_documents(&self) -> bool {
        true
    }

    fn read_partition(
        &self,
        container: &str,
        partition_key: &PartitionKey,
    ) -> Result<Vec<LoadedDocument>> {
        Ok(self
            .read_partition_matching(container, partition_key, None, None)?
            .0)
    }

    fn read_partition_containing(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        needles: &Needles,
    ) -> Result<(Vec<LoadedDocument>, Vec<Skipped>)> {
        let needles = (!needles.is_empty()).then_some(needles);
        self.read_partition_matching(container, partition_key, needles, None)
    }

    fn read_documents(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        rids: &[u64],
    ) -> Result<Vec<LoadedDocument>> {
        Ok(self
            .read_partition_matching(container, partition_key, None, Some(rids))?
            .0)
    }

    fn read_document(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        id: &str,
    ) -> Result<Option<LoadedDocument>> {
        let pk = partition_key.to_json_array();
        let key = (Arc::from(container), pk, Arc::from(id));
        if let Some(pending) = self.pending.read().get(&key) {
            return Ok(pending.clone().loaded());
        }
        let pk = key.1;
        let conn = self.reader.lock();
        let bad = |e: rusqlite::Error| Error::storage("read a document", e);
        let mut stmt = conn
            .prepare_cached(&format!("SELECT d.rid, {DOC_BODY} d.pk = ?2 AND d.id = ?3"))
            .map_err(bad)?;
        let mut rows = stmt.query(params![container, pk, id]).map_err(bad)?;
        let Some(row) = rows.next().map_err(bad)? else {
            return Ok(None);
        };
        let rid = row.get::<_, i64>(0).map_err(bad)? as u64;
        let stamp = self.shared.stamps.read().get(container).cloned();
        parse_row(row, 1, stamp.as_deref(), container, &pk, id, rid).map(Some)
    }

    fn index_progress(&self, container: &str) -> Result<Option<u32>> {
        if self.read_only.is_some() {
            return Ok(None);
        }
        if self.ready_index(container).is_some() {
            return Ok(Some(100));
        }
        build_progress(&self.reader.lock(), container)
            .map(Some)
            .map_err(|e| Error::storage("read an index build", e))
    }

    fn index_candidates(
        &self,
        container: &str,
        terms: &[IndexTerm],
    ) -> Result<Option<Vec<(PartitionKey, u64)>>> {
        let Some(policy) = self.ready_index(container) else {
            return Ok(None);
        };
        let Some((mut terms, overlay)) = self.index_view(container, terms, None, None) else {
            return Ok(None);
        };
        // The term with the fewest entries names the candidates; the
        // others filter them.
        if terms.len() > 1 {
            let conn = self.reader.lock();
            let best = range_index::most_selective(terms.len(), |i, cap| {
                let (term, path) = &terms[i];
                count_entries(&conn, container, path, &term.accept, cap)
            })?;
            terms.swap(0, best);
        }
        let Some(((first, path), rest)) = terms.split_first() else {
            return Ok(None);
        };
        let mut params = vec![
            SqlValue::Text(container.to_owned()),
            SqlValue::Text(path.clone()),
        ];
        // An equality filters the candidates by a seek each (its value,
        // then the candidate's key); a range as `within_ranges` says.
        let (ranges, seeks) = ranges_apart(rest);
        let accepted = accept_sql("i.value", &first.accept, &mut params);
        let sql = format!(
            "SELECT i.pk, i.rid FROM idx AS i WHERE i.key = {}{accepted}{}",
            path_key(2),
            term_filters(&seeks, &mut params)
        );
        let mut found = self.candidates(container, &sql, params, &ranges, &mut |row| {
            Ok((
                EntryPk::stored(row.get_ref(0)?)?,
                row.get::<_, i64>(1)? as u64,
            ))
        })?;
        if !self.still_ready(container, &policy) {
            return Ok(None);
        }
        found.retain(|(_, rid)| !overlay.is_stale(*rid));
        found.extend(overlay.matching.into_iter().map(|e| (e.pk, e.rid)));
        let mut keys = PartitionKeys::new(container);
        let mut candidates = Vec::with_capacity(found.len());
        for (pk, rid) in found {
            candidates.push((keys.parse(&pk)?, rid));
        }
        candidates.sort();
        Ok(Some(candidates))
    }

    fn index_candidates_in(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        terms: &[IndexTerm],
    ) -> Result<Option<Vec<u64>>> {
        let Some(policy) = self.ready_index(container) else {
            return Ok(None);
        };
        let pk = partition_key.to_json_array();
        let Some((mut terms, overlay)) = self.index_view(container, terms, None, Some(&pk)) else {
            return Ok(None);
        };
        // The equality with the fewest values seeks (container, path,
        // value, pk); the other terms filter what it names.
        let values = |term: &IndexTerm| match &term.accept {
            Accept::Values(values) => Some(values.len()),
            Accept::Range(..) => None,
        };
        let Some(best) = (0..terms.len())
            .filter(|&i| values(&terms[i].0).is_some())
            .min_by_key(|&i| values(&terms[i].0))
        else {
            return Ok(None);
        };
        terms.swap(0, best);
        let ((first, path), rest) = terms.split_first().expect("an equality was found");
        let (ranges, seeks) = ranges_apart(rest);
        let mut params = vec![
            SqlValue::Text(container.to_owned()),
            SqlValue::Text(path.clone()),
        ];
        let accepted = accept_sql("i.value", &first.accept, &mut params);
        params.push(EntryPk::of(&pk).value());
        let sql = format!(
            "SELECT i.rid FROM idx AS i WHERE i.key = {}{accepted} AND i.pk = ?{}{}",
            path_key(2),
            params.len(),
            term_filters(&seeks, &mut params)
        );
        let found = self.candidates(container, &sql, params, &ranges, &mut |row| {
            Ok((pk.clone(), row.get::<_, i64>(0)? as u64))
        })?;
        if !self.still_ready(container, &policy) {
            return Ok(None);
        }
        let mut found: BTreeSet<u64> = found.into_iter().map(|(_, rid)| rid).collect();
        found.retain(|rid| !overlay.is_stale(*rid));
        found.extend(overlay.matching.iter().map(|e| e.rid));
        Ok(Some(found.into_iter().collect()))
    }

    fn index_walk(&self, container: &str, walk: &IndexWalk<'_>) -> Result<Option<WalkPage>> {
        let Some((terms, overlay)) =
            self.index_view(container, walk.terms, Some(&walk.order), None)
        else {
            return Ok(None);
        };
        let Some(policy) = self.ready_index(container) else {
            return Ok(None);
        };
        let Some(walked) = walk.order.path_key(&policy) else {
            return Ok(None);
        };
        let (cmp, direction) = if walk.descending {
            ("<=", "DESC")
        } else {
            (">=", "ASC")
        };
        let mut params = vec![SqlValue::Text(container.to_owned()), SqlValue::Text(walked)];
        let from = match walk.from {
            Some(key) => {
                params.push(key.to_vec().into());
                format!(" AND i.value {cmp} ?{}", params.len())
            }
            None => String::new(),
        };
        // A term on the walked path bounds the walk itself (a document has
        // one entry at a path), one a prefixed walk's prefix fixes holds
        // for every entry; the others are checked beside it.
        let mut filters = String::new();
        let mut others = Vec::new();
        for (term, path) in terms {
            match walk.order {
                WalkOrder::Path(walked) if term.is_at(walked) => {
                    filters.push_str(&accept_sql("i.value", &term.accept, &mut params));
                }
                WalkOrder::Prefixed { index, .. } if range_index::fixes(index, &term) => {}
                _ => others.push((term, path)),
            }
        }
        let (low, high) = walk.order.bounds();
        let bounds = Accept::Range(
            low.map_or(Bound::Unbounded, Bound::Included),
            high.map_or(Bound::Unbounded, Bound::Excluded),
        );
        filters.push_str(&accept_sql("i.value", &bounds, &mut params));
        // A range checks what the walk found, afterwards (see
        // `within_ranges`): the walk may then return fewer entries than its
        // limit, and its caller walks further.
        let (ranges, seeks) = ranges_apart(&others);
        filters.push_str(&term_filters(&seeks, &mut params));
        let sql = format!(
            "SELECT i.value, i.pk, i.rid FROM idx AS i WHERE i.key = {}{from}{filters} \
             ORDER BY i.value {direction}",
            path_key(2)
        );
        let mut found: Vec<(Vec<u8>, String, u64)> = Vec::new();
        let mut through = None;
        {
            // One snapshot for every statement.
            let conn = self.reader.lock();
            let read = conn
                .unchecked_transaction()
                .map_err(|e| Error::storage("read the range index", e))?;
            index_rows(&read, &sql, params, &mut |row| {
                let value: Vec<u8> = row.get(0)?;
                if found.len() >= walk.limit {
                    // Every entry not returned is at or past this key.
                    through = Some(value);
                    return Ok(ControlFlow::Break(()));
                }
                let pk = EntryPk::stored(row.get_ref(1)?)?;
                let rid = row.get::<_, i64>(2)? as u64;
                if !overlay.is_stale(rid) {
                    found.push((value, pk, rid));
                }
                Ok(ControlFlow::Continue(()))
            })?;
            if !ranges.is_empty() {
                let named = found
                    .iter()
                    .map(|(_, pk, rid)| (pk.clone(), *rid))
                    .collect();
                let kept = self.within_ranges(&read, container, &ranges, named)?;
                found.retain(|(_, pk, rid)| kept.contains(&(pk.clone(), *rid)));
            }
        }
        if !self.still_ready(container, &policy) {
            return Ok(None);
        }
        let before = |key: &[u8], bound: &[u8]| match walk.descending {
            false => key < bound,
            true => key > bound,
        };
        let within = |key: &[u8]| walk.from.is_none_or(|from| !before(key, from));
        for entry in overlay.matching {
            if within(&entry.key) && through.as_deref().is_none_or(|t| before(&entry.key, t)) {
                found.push((entry.key, entry.pk, entry.rid));
            }
        }
        found.sort_by(|a, b| {
            if walk.descending {
                b.0.cmp(&a.0)
            } else {
                a.0.cmp(&b.0)
            }
        });
        // The pending documents are not limited by the statement: the
        // first past the limit bounds what is returned, as a row would.
        if found.len() > walk.limit {
            let first_left = found.swap_remove(walk.limit).0;
            found.truncate(walk.limit);
            if through.as_deref().is_none_or(|t| before(&first_left, t)) {
                through = Some(first_left);
            }
        }
        let mut keys = PartitionKeys::new(container);
        let mut entries = Vec::with_capacity(found.len());
        for (_, pk, rid) in found {
            entries.push((keys.parse(&pk)?, rid));
        }
        Ok(Some((entries, through)))
    }

    fn partition_keys(&self, container: &str) -> Result<Vec<PartitionKey>> {
        // From the pending documents: the partitions that gained or kept
        // one, and the ids deleted from each.
        let mut keys: BTreeSet<String> = BTreeSet::new();
        let mut deleted: HashMap<String, Vec<Arc<str>>> = HashMap::new();
        {
            let pending = self.pending.read();
            let start = (Arc::from(container), String::new(), Arc::from(""));
            for ((c, pk, id), doc) in pending.range(start..) {
                if **c != *container {
                    break;
                }
                if doc.document.is_some() {
                    keys.insert(pk.clone());
                } else {
                    deleted.entry(pk.clone()).or_default().push(Arc::clone(id));
                }
            }
        }
        let conn = self.reader.lock();
        let bad = |e: rusqlite::Error| Error::storage("list partitions", e);
        // One index seek per partition (a skip scan), not a row per document.
        let mut next = conn
            .prepare_cached(
                "SELECT pk FROM docs WHERE container = ?1 AND pk > ?2 ORDER BY pk LIMIT 1",
            )
            .map_err(bad)?;
        let mut ids = conn
            .prepare_cached("SELECT id FROM docs WHERE container = ?1 AND pk = ?2")
            .map_err(bad)?;
        let mut last = String::new();
        while let Some(pk) = next
            .query_row(params![container, last], |row| row.get::<_, String>(0))
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(bad(e)),
            })?
        {
            if !keys.contains(&pk) {
                // A partition whose pending deletes may have emptied it.
                let kept = match deleted.get(&pk) {
                    None => true,
                    Some(gone) => {
                        let mut rows = ids.query(params![container, pk]).map_err(bad)?;
                        let mut kept = false;
                        while let Some(row) = rows.next().map_err(bad)? {
                            let id: String = row.get(0).map_err(bad)?;
                            if !gone.iter().any(|g| **g == *id) {
                                kept = true;
                                break;
                            }
                        }
                        kept
                    }
                };
                if kept {
                    keys.insert(pk.clone());
                }
            }
            last = pk;
        }
        keys.iter()
            .map(|pk| super::stored_partition_key(container, pk))
            .collect()
    }

    fn wants_text(&self) -> bool {
        true
    }

    fn read_only(&self) -> Option<String> {
        self.read_only.clone()
    }
}

/// The latest state of each document the log holds past its container's
/// mark: the commits a crash left unfolded, pending again. Read at open,
/// before anything is loaded; a document whose first change there is a
/// creation gets the rid `docs` holds for it, if another, as its shadow.
///
/// One statement reads the log past each mark with the rid `docs` holds
/// for each document beside it, keeping each document's latest change
/// unparsed; only those are parsed, on as many threads as the machine has
/// cores (up to [`RECOVERY_THREADS`]), then filed in one pass. A store
/// that crashed with [`MAX_PENDING`] documents unfolded reopened in
/// about 220 ms with each version parsed and its `docs` row looked up one
/// by one (2026-12-01; see docs/benchmarks.md).
fn unfolded(
    conn: &Connection,
    next_lsn: &HashMap<String, u64>,
    max_seq: &mut HashMap<String, u64>,
    stamps: &Stamps,
) -> Result<PendingDocs> {
    let bad = |e: rusqlite::Error| Error::storage("recover", e);
    let folded = max_per_container(conn, "SELECT container, lsn FROM folded")?;
    // The rid `docs` holds for a document matters for its first change in
    // the log: a creation after a delete the last fold wrote makes that row
    // and its index entries out of date (see [`Pending::shadows`]).
    let mut stmt = conn
        .prepare(
            "SELECT c.lsn, c.pk, c.id, c.rid, c.body, c.seq, c.idx, c.ts, d.rid \
             FROM changes AS c LEFT JOIN docs AS d \
             ON d.container = c.container AND d.pk = c.pk AND d.id = c.id \
             WHERE c.container = ?1 AND c.lsn > ?2 ORDER BY c.lsn, c.idx",
        )
        .map_err(bad)?;
    let mut latest: Vec<Unparsed> = Vec::new();
    for container in next_lsn.keys() {
        let after = folded.get(container).copied().unwrap_or(0);
        let mut rows = stmt.query(params![container, after as i64]).map_err(bad)?;
        let name: Arc<str> = Arc::from(container.as_str());
        let stamp = stamps.get(container).cloned();
        let max = max_seq.entry(container.clone()).or_default();
        let mut at: HashMap<(String, String), usize> = HashMap::new();
        while let Some(row) = rows.next().map_err(bad)? {
            let change = Unparsed {
                container: Arc::clone(&name),
                stamp: stamp.clone(),
                lsn: row.get::<_, i64>(0).map_err(bad)? as u64,
                rid: row.get::<_, i64>(3).map_err(bad)? as u64,
                body: row.get(4).map_err(bad)?,
                seq: row.get::<_, i64>(5).map_err(bad)? as u64,
                idx: row.get::<_, i64>(6).map_err(bad)? as u32,
                ts: row.get::<_, i64>(7).map_err(bad)?.max(0) as u64,
                shadows: None,
                key: (String::new(), String::new()),
            };
            *max = (*max).max(change.seq);
            let key = (
                row.get::<_, String>(1).map_err(bad)?,
                row.get::<_, String>(2).map_err(bad)?,
            );
            match at.entry(key) {
                std::collections::hash_map::Entry::Occupied(entry) => {
                    // As [`put_pending`] files a later change.
                    let before = &mut latest[*entry.get()];
                    let shadows = before
                        .shadows
                        .or_else(|| (before.rid != change.rid).then_some(before.rid));
                    let key = std::mem::take(&mut before.key);
                    *before = Unparsed {
                        shadows,
                        key,
                        ..change
                    };
                }
                std::collections::hash_map::Entry::Vacant(entry) => {
                    let in_docs = row.get::<_, Option<i64>>(8).map_err(bad)?;
                    let shadows = in_docs
                        .map(|rid| rid as u64)
                        .filter(|rid| *rid != change.rid);
                    let key = entry.key().clone();
                    entry.insert(latest.len());
                    latest.push(Unparsed {
                        shadows,
                        key,
                        ..change
                    });
                }
            }
        }
    }
    let parsed = parse_in_parallel(latest)?;
    let mut by_lsn = Vec::with_capacity(parsed.len());
    let docs = parsed
        .into_iter()
        .map(|(key, doc)| {
            by_lsn.push(((Arc::clone(&key.0), doc.lsn, doc.idx), key.clone()));
            (key, doc)
        })
        .collect();
    // The versions a crash left behind the latest are not known here:
    // the sweep at idle finds them.
    Ok(PendingDocs {
        docs,
        by_lsn: by_lsn.into_iter().collect(),
        superseded: BTreeSet::new(),
    })
}

/// The most threads [`unfolded`] parses documents on.
const RECOVERY_THREADS: usize = 4;

/// A document's latest change in the log past its container's mark, as
/// [`unfolded`] reads it: its body still as stored.
struct Unparsed {
    container: Arc<str>,
    stamp: Option<Arc<Stamp>>,
    /// (partition key as stored, id).
    key: (String, String),
    lsn: u64,
    idx: u32,
    rid: u64,
    seq: u64,
    ts: u64,
    body: SqlValue,
    shadows: Option<u64>,
}

impl Unparsed {
    /// The pending document this change leaves.
    fn parse(self) -> Result<(PendingKey, Pending)> {
        let corrupt = |e: String| {
            Error::Storage(format!(
                "corrupt change log entry {} of {:?}: {e}",
                self.lsn, self.container
            ))
        };
        let body = body_text(
            (&self.body).into(),
            self.stamp.as_deref(),
            self.rid,
            self.seq,
            self.ts,
        )
        .map_err(corrupt)?;
        let document = match body {
            Some(text) => {
                let value =
                    host_api::json::parse_exact(&text).map_err(|e| corrupt(e.to_string()))?;
                Some((Document::new(value), Arc::from(text)))
            }
            None => None,
        };
        let (pk, id) = self.key;
        let key = (self.container, pk, Arc::from(id));
        let doc = Pending {
            rid: self.rid,
            lsn: self.lsn,
            idx: self.idx,
            document,
            shadows: self.shadows,
        };
        Ok((key, doc))
    }
}

/// Parses `changes` ([`Unparsed::parse`]), spread over up to
/// [`RECOVERY_THREADS`] threads when there are enough to be worth it.
fn parse_in_parallel(changes: Vec<Unparsed>) -> Result<Vec<(PendingKey, Pending)>> {
    /// Fewer than this many are parsed on the calling thread.
    const PER_THREAD: usize = 1_000;
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(RECOVERY_THREADS)
        .min(changes.len() / PER_THREAD)
        .max(1);
    if threads == 1 {
        return changes.into_iter().map(Unparsed::parse).collect();
    }
    let per_thread = changes.len().div_ceil(threads);
    let mut chunks: Vec<Vec<Unparsed>> = Vec::with_capacity(threads);
    let mut rest = changes.into_iter();
    for _ in 0..threads {
        chunks.push(rest.by_ref().take(per_thread).collect());
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .into_iter()
                        .map(Unparsed::parse)
                        .collect::<Result<Vec<_>>>()
                })
            })
            .collect();
        let mut parsed = Vec::new();
        for handle in handles {
            let part = handle.join().map_err(|_| {
                Error::Storage("a thread reading the change log back panicked".into())
            })??;
            parsed.extend(part);
        }
        Ok(parsed)
    })
}

/// Every container's definition, in creation order.
fn container_metas(conn: &Connection) -> Result<Vec<ContainerMeta>> {
    let bad = |e: rusqlite::Error| Error::storage("load", e);
    conn.prepare(
        "SELECT id, ordinal, pk_path, physical_partitions, settings FROM containers ORDER BY ordinal",
    )
    .map_err(bad)?
    .query_map([], |row| {
        let id: String = row.get(0)?;
        let settings: String = row.get(4)?;
        Ok((
            ContainerMeta {
                ordinal: row.get(1)?,
                partition_key_path: row.get(2)?,
                physical_partitions: row.get(3)?,
                default_ttl: None,
                unique_keys: Vec::new(),
                database_rid: None,
                computed_properties: Vec::new(),
                indexing_policy: crate::IndexingPolicy::default(),
                id,
            },
            settings,
        ))
    })
    .map_err(bad)?
    .map(|row| {
        let (mut meta, settings) = row.map_err(bad)?;
        apply_settings(&mut meta, &settings).map_err(|e| {
            Error::Storage(format!("corrupt settings of container {:?}: {e}", meta.id))
        })?;
        Ok(meta)
    })
    .collect()
}

/// Every container's [`Stamp`].
fn stamps(conn: &Connection) -> Result<Stamps> {
    Ok(container_metas(conn)?
        .into_iter()
        .map(|meta| {
            let stamp = Arc::new(Stamp::of(&meta));
            (meta.id, stamp)
        })
        .collect())
}

/// A document's text as `changes.body` stores it: without the system
/// properties the engine appended ([`Stamp::tail`]), as a BLOB, when it
/// ends with them (they are about half of a small document, and follow
/// from the row's `rid`, `seq` and `ts` columns); whole, as TEXT, when it
/// does not (a document a script rewrote with members after `_ts`).
fn stored_body<'a>(
    text: &'a str,
    stamp: Option<&Stamp>,
    rid: u64,
    seq: u64,
    ts: u64,
) -> rusqlite::types::ToSqlOutput<'a> {
    use rusqlite::types::{ToSqlOutput, ValueRef};
    if let Some(head) = stamp.and_then(|s| text.strip_suffix(s.tail(rid, seq, ts).as_str())) {
        return ToSqlOutput::Borrowed(ValueRef::Blob(head.as_bytes()));
    }
    ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes()))
}

/// A document's text as [`stored_body`] stored it, `None` for `NULL`.
///
/// # Errors
/// What is wrong with it: not UTF-8, or stored without its system
/// properties in a container storage has no [`Stamp`] for.
fn body_text<'a>(
    body: rusqlite::types::ValueRef<'a>,
    stamp: Option<&Stamp>,
    rid: u64,
    seq: u64,
    ts: u64,
) -> std::result::Result<Option<std::borrow::Cow<'a, str>>, String> {
    use rusqlite::types::ValueRef;
    let utf8 = |bytes: &'a [u8]| std::str::from_utf8(bytes).map_err(|e| e.to_string());
    match body {
        ValueRef::Null => Ok(None),
        ValueRef::Text(text) => Ok(Some(utf8(text)?.into())),
        ValueRef::Blob(head) => {
            let stamp = stamp.ok_or("a body without its system properties, in no container")?;
            let head = utf8(head)?;
            let mut text = String::with_capacity(head.len() + stamp.tail_len());
            text.push_str(head);
            stamp.push_tail(&mut text, rid, seq, ts);
            Ok(Some(text.into()))
        }
        ValueRef::Integer(_) | ValueRef::Real(_) => Err("a body that is a number".to_owned()),
    }
}

/// Where each container's log stands at open: the last LSN it holds (for
/// the containers with any), and the highest sequence number among the
/// changes folded into `docs`. A few index lookups per container, however
/// long the log: a store whose marks predate the folded sequence number
/// reads it from the log, once, until its next fold records it.
fn log_state(conn: &Connection) -> Result<(HashMap<String, u64>, HashMap<String, u64>)> {
    let bad = |e: rusqlite::Error| Error::storage("open the change log", e);
    let ids: Vec<String> = conn
        .prepare("SELECT id FROM containers")
        .map_err(bad)?
        .query_map([], |row| row.get(0))
        .map_err(bad)?
        .collect::<rusqlite::Result<_>>()
        .map_err(bad)?;
    let mut next_lsn = HashMap::new();
    let mut max_seq = HashMap::new();
    for id in ids {
        let last: Option<i64> = conn
            .query_row(
                "SELECT MAX(lsn) FROM changes WHERE container = ?1",
                params![id],
                |row| row.get(0),
            )
            .map_err(bad)?;
        let mark: Option<(i64, Option<i64>)> = conn
            .query_row(
                "SELECT lsn, seq FROM folded WHERE container = ?1",
                params![id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })
            .map_err(bad)?;
        let seq = match mark {
            Some((_, Some(seq))) => seq,
            Some((lsn, None)) => conn
                .query_row(
                    "SELECT COALESCE(MAX(seq), 0) FROM changes WHERE container = ?1 AND lsn <= ?2",
                    params![id, lsn],
                    |row| row.get(0),
                )
                .map_err(bad)?,
            None => 0,
        };
        max_seq.insert(id.clone(), seq.max(0) as u64);
        if let Some(last) = last {
            next_lsn.insert(id, last.max(0) as u64);
        }
    }
    Ok((next_lsn, max_seq))
}

/// The pending documents of one partition, in id order.
fn pending_of(pending: &PendingDocs, container: &str, pk: &str) -> Vec<(Arc<str>, Pending)> {
    let start = (Arc::from(container), pk.to_owned(), Arc::from(""));
    pending
        .range(start..)
        .take_while(|((c, p, _), _)| **c == *container && p == pk)
        .map(|((_, _, id), doc)| (Arc::clone(id), doc.clone()))
        .collect()
}

impl Pending {
    /// The document as a read returns it; `None` for a delete.
    fn loaded(self) -> Option<LoadedDocument> {
        let (document, text) = self.document?;
        Some(LoadedDocument {
            rid: self.rid,
            size: text.len(),
            document,
        })
    }
}

/// The body of a `docs` row (`d`, of container `?1`), the `seq` and `ts`
/// that complete it ([`body_text`]), and the rest of a query that reads
/// them: its own body, in a row an older Partita wrote, else that of the
/// log row it points at. That row goes only with the container or with
/// the fold that points `d` elsewhere, so it is there (`NULL` would be a
/// corrupt store).
const DOC_BODY: &str = "COALESCE(d.body, c.body), c.seq, c.ts FROM docs AS d \
     LEFT JOIN changes AS c ON c.container = d.container AND c.lsn = d.lsn AND c.idx = d.idx \
     WHERE d.container = ?1 AND";

/// The statement that reads a partition's documents, those of the rids
/// in `only` (` AND d.rid IN (…)`, or empty for all) looked up through
/// `docs_by_rid` when `by_rid`: SQLite, without statistics, would rather
/// scan the partition by its key than look each rid up.
fn partition_read_sql(by_rid: bool, only: &str) -> String {
    match by_rid {
        true => format!(
            "SELECT d.id, d.rid, {} d.pk = ?2{only}",
            DOC_BODY.replacen("docs AS d", "docs AS d INDEXED BY docs_by_rid", 1)
        ),
        false => format!("SELECT d.id, d.rid, {DOC_BODY} d.pk = ?2{only}"),
    }
}

/// A row of `docs` as a read returns it, from the columns of [`DOC_BODY`]
/// that start at `at`.
fn parse_row(
    row: &rusqlite::Row<'_>,
    at: usize,
    stamp: Option<&Stamp>,
    container: &str,
    pk: &str,
    id: &str,
    rid: u64,
) -> Result<LoadedDocument> {
    let corrupt = |what: String| {
        Error::Storage(format!(
            "corrupt row in docs: container {container:?}, pk {pk}, id {id:?}: {what}"
        ))
    };
    let column = |i: usize| row.get_ref(at + i).map_err(|e| corrupt(e.to_string()));
    let number = |i: usize| -> Result<u64> {
        Ok(column(i)?
            .as_i64_or_null()
            .map_err(|e| corrupt(e.to_string()))?
            .unwrap_or(0)
            .max(0) as u64)
    };
    let body = body_text(column(0)?, stamp, rid, number(1)?, number(2)?)
        .map_err(corrupt)?
        .ok_or_else(|| corrupt("no body, and no change log entry with it".to_owned()))?;
    // Exactly allocated: a loaded document stays in the cache.
    let value = host_api::json::parse_exact(&body).map_err(|e| corrupt(e.to_string()))?;
    Ok(LoadedDocument {
        rid,
        size: body.len(),
        document: Document::new(value),
    })
}

/// The serialized size of the document in a row of [`DOC_BODY`]'s columns
/// from `at`, when its stored text lacks one of `needles`; `None` when it
/// has them all, or when the row is not as expected (the caller parses it,
/// and reports what is wrong).
fn unmatched_size(
    row: &rusqlite::Row<'_>,
    at: usize,
    stamp: Option<&Stamp>,
    rid: u64,
    needles: &Needles,
) -> Option<usize> {
    use rusqlite::types::ValueRef;
    let number = |i: usize| {
        Some(
            row.get_ref(at + i)
                .ok()?
                .as_i64_or_null()
                .ok()?
                .unwrap_or(0)
                .max(0) as u64,
        )
    };
    match row.get_ref(at).ok()? {
        ValueRef::Text(text) if !needles.found_in(text) => Some(text.len()),
        // The body without its system properties: they follow it, and
        // no needle is in them.
        ValueRef::Blob(head) if !needles.found_in(head) => {
            let mut tail = String::new();
            stamp?.push_tail(&mut tail, rid, number(1)?, number(2)?);
            Some(head.len() + tail.len())
        }
        _ => None,
    }
}

/// Adds every stored script to its container.
fn load_scripts(
    conn: &Connection,
    index: &HashMap<String, usize>,
    containers: &mut [LoadedContainer],
) -> Result<()> {
    let bad = |e: rusqlite::Error| Error::storage("load scripts", e);
    let mut stmt = conn
        .prepare("SELECT container, kind, id, language, body, trigger_type, trigger_operation, version, ts FROM scripts")
        .map_err(bad)?;
    let mut rows = stmt.query([]).map_err(bad)?;
    while let Some(row) = rows.next().map_err(bad)? {
        let container: String = row.get(0).map_err(bad)?;
        let id: String = row.get(2).map_err(bad)?;
        let corrupt = |what: &str| {
            Error::Storage(format!(
                "corrupt row in scripts: container {container:?}, id {id:?}: {what}"
            ))
        };
        let kind =
            parse_kind(&row.get::<_, String>(1).map_err(bad)?).ok_or_else(|| corrupt("kind"))?;
        let language = parse_language(&row.get::<_, String>(3).map_err(bad)?)
            .ok_or_else(|| corrupt("language"))?;
        let body: Vec<u8> = row.get(4).map_err(bad)?;
        let type_name = row.get::<_, Option<String>>(5).map_err(bad)?;
        let operation_name = row.get::<_, Option<String>>(6).map_err(bad)?;
        let trigger_type: Option<TriggerType> = match &type_name {
            Some(t) => Some(t.parse().map_err(|_| corrupt("trigger type"))?),
            None => None,
        };
        let trigger_operation: Option<TriggerOperation> = match &operation_name {
            Some(o) => Some(o.parse().map_err(|_| corrupt("trigger operation"))?),
            None => None,
        };
        // Spelled otherwise than the canonical names: the client's spelling.
        let trigger_names = match (&trigger_type, &trigger_operation, type_name, operation_name) {
            (Some(t), Some(o), Some(tn), Some(on))
                if t.to_string() != tn || o.to_string() != on =>
            {
                Some(TriggerNames {
                    trigger_type: tn,
                    trigger_operation: on,
                })
            }
            _ => None,
        };
        let version = row.get::<_, i64>(7).map_err(bad)? as u64;
        let ts = row.get::<_, i64>(8).map_err(bad)? as u64;
        let &i = index
            .get(&container)
            .ok_or_else(|| corrupt("unknown container"))?;
        let c = &mut containers[i];
        c.max_seq = c.max_seq.max(version);
        c.scripts.push(ScriptRecord {
            container: container.clone(),
            kind,
            id: id.clone(),
            language,
            body: body.into(),
            trigger_type,
            trigger_operation,
            trigger_names,
            version,
            ts,
        });
    }
    Ok(())
}

fn max_per_container(conn: &Connection, sql: &str) -> Result<HashMap<String, u64>> {
    let bad = |e: rusqlite::Error| Error::storage("load", e);
    let mut stmt = conn.prepare(sql).map_err(bad)?;
    let rows = stmt
        .query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, Option<i64>>(1)?))
        })
        .map_err(bad)?;
    let mut res = HashMap::new();
    for row in rows {
        let (container, max) = row.map_err(bad)?;
        res.insert(container, max.unwrap_or(0) as u64);
    }
    Ok(res)
}

/// The write side of the store: the write connection, the LSNs, the
/// documents waiting for the next fold and the syncer. The committer thread
/// holds it while it writes a batch; a committing caller that finds it free
/// and no batch waiting for its fsync writes its own commit with it.
struct Writer {
    conn: Connection,
    next_lsn: HashMap<String, u64>,
    /// Per container, the highest sequence number written, which a fold
    /// records with its mark.
    max_seq: HashMap<String, u64>,
    pending: SharedPending,
    /// The log's size in pages, from SQLite's wal hook.
    wal_pages: Arc<AtomicI64>,
    /// Checkpoint every this many pages of log.
    every: i64,
    next_checkpoint: i64,
    /// The frames of the log the [`Checkpointer`]'s rounds have copied
    /// since the last checkpoint here, and how many rounds followed the
    /// first.
    copied: i64,
    later_rounds: u32,
    /// Under [`Durability::Full`].
    syncer: Option<Syncer>,
    /// Under [`Durability::Full`]: zeros written ahead of the log's end.
    pad: Option<LogPad>,
    /// Under [`Durability::Full`]: copies the log into the database file
    /// beside the committer.
    checkpointer: Option<Checkpointer>,
    /// Per container, the LSN up to which `docs` is folded (`folded.lsn`).
    marks: HashMap<String, u64>,
    /// How many of each container's last commits the log keeps whole
    /// ([`sweep`]).
    retained: u64,
    /// Rows written to the log since the last step of sweeping it.
    unswept: u64,
}

/// A thread that checkpoints the log on a connection of its own while the
/// committer goes on writing: copying a log of [`CHECKPOINT_PAGES`] into
/// the database file and syncing both took 0.1–0.2 s (16 callers, load
/// average 6), a stall for every commit when the committer did it between
/// two batches.
///
/// A checkpoint beside a writer never leaves the log empty, and only an
/// empty log starts again from the top, so the committer finishes the job
/// itself: once a round has left at most [`CATCH_UP_PAGES`] uncopied, it
/// checkpoints those between two batches, and its next batch restarts the
/// log. A round that leaves more is followed by another, which has only
/// what was written during the last to copy, up to [`MAX_ROUNDS`]; then
/// the committer copies the rest whatever its size.
struct Checkpointer {
    sender: mpsc::Sender<()>,
    thread: JoinHandle<()>,
    /// What the last round left for the committer: the frames of the log it
    /// had copied, or why it failed.
    done: Arc<Mutex<Option<std::result::Result<i64, String>>>>,
    /// Whether a round was asked for and has not been taken back.
    running: bool,
    /// How many rounds were asked for.
    rounds: u64,
}

/// How many uncopied pages of log the committer checkpoints between two
/// batches, after a round of the [`Checkpointer`] (or a quarter of the
/// checkpoint interval, if less).
const CATCH_UP_PAGES: i64 = 1_000;

/// How many rounds of the [`Checkpointer`] may follow the first before the
/// committer copies what is left itself, however much: rounds that never
/// catch up with the writers (a starved thread, a disk slower than the
/// writes) would otherwise let the log grow without bound.
const MAX_ROUNDS: u32 = 3;

impl Checkpointer {
    /// Starts the thread, with its own connection to the store at `path`.
    fn start(path: &Path) -> Result<Checkpointer> {
        let bad = |e: rusqlite::Error| Error::storage("open the checkpointer's connection", e);
        let conn = Connection::open(path).map_err(bad)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(bad)?;
        // SQLite syncs the log before copying it and the file after; if this
        // connection closes last, closing checkpoints and deletes the log.
        conn.execute_batch("PRAGMA synchronous = FULL")
            .map_err(bad)?;
        let (sender, queue) = mpsc::channel::<()>();
        let done = Arc::new(Mutex::new(None));
        let thread = {
            let done = Arc::clone(&done);
            std::thread::Builder::new()
                .name("partita-checkpointer".to_owned())
                .spawn(move || {
                    while queue.recv().is_ok() {
                        let copied = conn
                            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                                row.get::<_, i64>(2)
                            })
                            .map_err(|e| e.to_string());
                        *done.lock() = Some(copied);
                    }
                })
                .map_err(|e| Error::storage("start the checkpointer thread", e))?
        };
        Ok(Checkpointer {
            sender,
            thread,
            done,
            running: false,
            rounds: 0,
        })
    }

    /// Asks for a round; false if the thread has stopped.
    fn ask(&mut self) -> bool {
        self.rounds += 1;
        self.running = self.sender.send(()).is_ok();
        self.running
    }

    /// The outcome of the round asked for, once it has finished.
    fn finished(&mut self) -> Option<std::result::Result<i64, String>> {
        if !self.running {
            return None;
        }
        let done = self.done.lock().take();
        self.running = done.is_none();
        done
    }

    /// Waits for a round in progress, and stops the thread.
    fn stop(self) {
        drop(self.sender);
        let _ = self.thread.join();
    }
}

/// The syncer thread, and the log's path for a batch synced in place.
struct Syncer {
    sender: mpsc::Sender<Vec<Ack>>,
    thread: JoinHandle<()>,
    wal_path: PathBuf,
}

/// A written batch its caller syncs in place, after releasing the write
/// side ([`Shared::sync_in_place`]).
struct InPlace {
    acks: Vec<Ack>,
    wal_path: PathBuf,
}

impl Writer {
    /// Writes `batch` in one SQLite transaction, then has it answered
    /// after the syncer's fsync (or at once without one), or, when
    /// `sync_here` and no other batch waits for an fsync, returns it for
    /// the caller to sync in place once it has released the write side.
    /// Then checkpoints the log when it has grown, and folds.
    #[must_use]
    fn write(&mut self, batch: Vec<Request>, shared: &Shared, sync_here: bool) -> Option<InPlace> {
        let refused = shared.failed.lock().clone();
        if let Some(reason) = refused {
            for request in batch {
                request.fail(|| Error::after_failure(&reason));
            }
            return None;
        }
        shared.batches.fetch_add(1, Ordering::Relaxed);
        let written = write_batch(
            &mut self.conn,
            &batch,
            &self.next_lsn,
            &self.pending,
            &mut self.max_seq,
            &shared.stamps,
            &shared.indexes,
        );
        let lsns = match written {
            Ok(lsns) => {
                if batch.iter().any(|r| matches!(r, Request::Meta(..)))
                    && shared.indexes.read().values().any(|s| !s.ready)
                {
                    shared.building.store(true, Ordering::Release);
                }
                lsns
            }
            Err(err) => {
                // What is pending stays, for reads; the next open replays
                // it from the log. Nothing is folded from now on.
                let reason = shared.fail(err.to_string());
                for request in batch {
                    request.fail(|| Error::Storage(reason.clone()));
                }
                return None;
            }
        };
        if let Some(pad) = &mut self.pad {
            pad.keep_ahead(self.wal_pages.load(Ordering::Relaxed));
        }
        let mut acks = Vec::with_capacity(batch.len());
        for (request, lsn) in batch.into_iter().zip(lsns) {
            match request {
                Request::Commit(record, reply) => {
                    self.unswept += record.changes.len() as u64;
                    self.next_lsn.insert(record.container.to_string(), lsn.0);
                    acks.push(Ack::Commit {
                        reply,
                        container: record.container,
                        lsn,
                    });
                }
                Request::Meta(op, reply) => {
                    let deleted = match op {
                        MetaOp::DeleteContainer(id) => {
                            // A container of the same id starts over at LSN 1.
                            self.next_lsn.remove(&id);
                            self.marks.remove(&id);
                            Some(id)
                        }
                        _ => None,
                    };
                    acks.push(Ack::Meta { reply, deleted });
                }
            }
        }
        let Some(syncer) = &mut self.syncer else {
            shared.complete(acks);
            self.fold_when_full(shared);
            return None;
        };
        let mut in_place = None;
        let mut claimed = shared.in_place.lock();
        if sync_here && !*claimed && shared.syncing.load(Ordering::Acquire) == 0 {
            *claimed = true;
            in_place = Some(InPlace {
                acks,
                wal_path: syncer.wal_path.clone(),
            });
            drop(claimed);
        } else {
            drop(claimed);
            shared.syncing.fetch_add(1, Ordering::AcqRel);
            if let Err(mpsc::SendError(acks)) = syncer.sender.send(acks) {
                shared.syncing.fetch_sub(1, Ordering::AcqRel);
                let reason = shared.fail("the syncer thread has stopped".to_owned());
                fail_acks(acks, &reason);
            }
        }
        self.fold_when_full(shared);
        self.checkpoint_when_grown(shared);
        in_place
    }

    /// Checkpoints the log once it has grown by the threshold since the
    /// last checkpoint (it restarts from the top once a checkpoint has
    /// copied everything and no reader holds it): in rounds of the
    /// [`Checkpointer`], then the last few pages here.
    fn checkpoint_when_grown(&mut self, shared: &Shared) {
        let pages = self.wal_pages.load(Ordering::Relaxed);
        if pages < self.next_checkpoint - self.every {
            self.next_checkpoint = self.every;
        }
        let Some(checkpointer) = &mut self.checkpointer else {
            return;
        };
        match checkpointer.finished() {
            Some(Err(err)) => {
                shared.fail(format!("checkpoint: {err}"));
            }
            Some(Ok(copied))
                if pages - copied > CATCH_UP_PAGES.min(self.every / 4)
                    && copied > self.copied
                    && self.later_rounds < MAX_ROUNDS =>
            {
                // Another round, for what was written during this one.
                self.copied = copied;
                self.later_rounds += 1;
                if !checkpointer.ask() {
                    shared.fail("checkpoint: the checkpointer thread has stopped".to_owned());
                }
            }
            Some(Ok(_)) => {
                // Few pages left (or a reader holds the rest, or the rounds
                // do not catch up with the writers): copy them here, so the
                // next batch can restart the log.
                self.copied = 0;
                self.later_rounds = 0;
                self.next_checkpoint = pages + self.every;
                if let Err(err) = checkpoint(&self.conn) {
                    shared.fail(format!("checkpoint: {err}"));
                }
            }
            None if !checkpointer.running && pages >= self.next_checkpoint => {
                let refused = shared.failed.lock().is_some();
                if !refused && !checkpointer.ask() {
                    shared.fail("checkpoint: the checkpointer thread has stopped".to_owned());
                }
            }
            None => {}
        }
    }

    /// A step of building a range index; a failure makes the store refuse
    /// writes, like a failed fold.
    fn build_step(&mut self, shared: &Shared) {
        if shared.failed.lock().is_some() {
            shared.building.store(false, Ordering::Release);
            return;
        }
        let stamps = shared.stamps.read();
        match build_step(&mut self.conn, &stamps, &shared.indexes) {
            Ok(more) => shared.building.store(more, Ordering::Release),
            Err(err) => {
                drop(stamps);
                shared.building.store(false, Ordering::Release);
                shared.fail(format!("build a range index: {err}"));
            }
        }
    }

    fn has_pending(&self) -> bool {
        !self.pending.read().is_empty()
    }

    /// Folds the oldest pending documents down to [`FOLD_STEP`] below
    /// [`MAX_PENDING`] once that many are pending, so a batch larger than
    /// a step (an import) cannot make them grow without bound.
    fn fold_when_full(&mut self, shared: &Shared) {
        let pending = self.pending.read().len();
        if pending >= MAX_PENDING {
            self.fold_some(shared, Some(pending - MAX_PENDING + FOLD_STEP));
        } else if pending > 0 && self.marks_behind() {
            self.fold_some(shared, Some(FOLD_STEP));
        }
        if self.unswept >= SWEEP_EVERY {
            let rows = 2 * self.unswept as usize;
            self.sweep_superseded_some(shared, rows);
        }
    }

    /// Closes the write side: folds what is pending (a clean close leaves
    /// `docs` complete, so the next open replays nothing), waits for the
    /// syncer to answer every batch, and turns SQLite's syncs back on:
    /// closing the last connection checkpoints the log into the database
    /// file and deletes it, which must sync.
    fn close(mut self, shared: &Shared) {
        if let Some(checkpointer) = self.checkpointer.take() {
            checkpointer.stop();
        }
        if shared.failed.lock().is_none() {
            self.fold(shared);
        }
        if let Some(syncer) = self.syncer.take() {
            drop(syncer.sender);
            let _ = syncer.thread.join();
            let _ = self.conn.execute_batch("PRAGMA synchronous = FULL");
        }
    }
}

/// The committer thread: writes every waiting request in one SQLite
/// transaction with the store's [`Writer`], whose answers the syncer sends
/// (so the next batch is written during this one's fsync); closes the
/// writer when the queue closes.
fn run_committer(writer: &Mutex<Option<Writer>>, queue: &mpsc::Receiver<Request>, shared: &Shared) {
    // The batch count when the committer last found the queue empty, and
    // whether it is folding an idle store.
    let mut quiet_since = None;
    let mut folding = false;
    loop {
        let first = if shared.building.load(Ordering::Acquire) {
            // Build while no request waits, a step at a time.
            match queue.recv_timeout(Duration::from_millis(1)) {
                Ok(first) => first,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(writer) = writer.lock().as_mut() {
                        writer.build_step(shared);
                    }
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        } else if let Some(idle) = shared.idle_fold {
            // Wakes every period, even with nothing queued: batches written
            // in place by their callers do not pass through the queue. Once
            // idle, it folds a step at a time, looking for requests between.
            let wait = match folding {
                true => Duration::from_millis(1),
                false => idle,
            };
            match queue.recv_timeout(wait) {
                Ok(first) => first,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let batches = shared.batches.load(Ordering::Relaxed);
                    if quiet_since != Some(batches) {
                        quiet_since = Some(batches);
                        folding = false;
                        continue;
                    }
                    // A whole period passed without a batch.
                    folding = false;
                    if let Some(writer) = writer.lock().as_mut()
                        && shared.failed.lock().is_none()
                    {
                        // Fold first: what the fold marks is what a sweep
                        // may delete behind.
                        folding = if writer.has_pending() {
                            writer.fold_some(shared, Some(FOLD_STEP));
                            true
                        } else {
                            writer.sweep_idle(shared)
                        };
                        writer.checkpoint_when_grown(shared);
                    }
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match queue.recv() {
                Ok(first) => first,
                Err(_) => break,
            }
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        let mut guard = writer.lock();
        // No longer queued once the write side is ours: until then a
        // commit that finds the queue non-empty joins it.
        shared.queued.fetch_sub(batch.len(), Ordering::AcqRel);
        match guard.as_mut() {
            Some(writer) => {
                let in_place = writer.write(batch, shared, false);
                debug_assert!(in_place.is_none(), "the committer never syncs in place");
            }
            None => {
                for request in batch {
                    request.fail(|| Error::Storage("the store is closed".to_owned()));
                }
            }
        }
    }
    let closing = writer.lock().take();
    if let Some(writer) = closing {
        writer.close(shared);
    }
}

impl Writer {
    /// Folds the pending documents into `docs`; a failure makes the store
    /// refuse writes, like a failed batch (the log still has everything,
    /// and reads still find the documents pending).
    fn fold(&mut self, shared: &Shared) {
        self.fold_some(shared, None);
    }

    /// Folds all pending documents (`None`), or about `step` of the oldest.
    fn fold_some(&mut self, shared: &Shared, step: Option<usize>) {
        let stamps = shared.stamps.read();
        let heads = Heads {
            next_lsn: &self.next_lsn,
            max_seq: &self.max_seq,
            retained: self.retained,
        };
        match fold(
            &mut self.conn,
            &self.pending,
            &heads,
            &stamps,
            &shared.indexes,
            step,
        ) {
            Ok(marks) => self.marks.extend(marks),
            Err(err) => {
                drop(stamps);
                shared.fail(format!("fold the change log into docs: {err}"));
            }
        }
    }

    /// Whether a container's log has [`MAX_UNFOLDED_COMMITS`] past its
    /// fold mark. Folding in steps goes by the pending documents, and a
    /// workload that keeps rewriting the same few documents never gathers
    /// [`MAX_PENDING`] of them: without this its mark would not move while
    /// it runs, nor could the log behind it be swept, and a crash would
    /// leave the whole log since to read back at the next open.
    fn marks_behind(&self) -> bool {
        self.next_lsn.iter().any(|(container, last)| {
            let mark = self.marks.get(container).copied().unwrap_or(0);
            last.saturating_sub(mark) >= MAX_UNFOLDED_COMMITS
        })
    }

    /// Deletes at most `rows` of the log rows known to be superseded (see
    /// [`sweep_superseded`]); how many. A failure makes the store refuse
    /// writes, like a failed fold.
    fn sweep_superseded_some(&mut self, shared: &Shared, rows: usize) -> usize {
        self.unswept = 0;
        let swept = sweep_superseded(
            &mut self.conn,
            &self.pending,
            &self.next_lsn,
            &self.marks,
            self.retained,
            rows,
        );
        match swept {
            Ok(deleted) => deleted,
            Err(err) => {
                shared.fail(format!("sweep the change log: {err}"));
                0
            }
        }
    }

    /// A step of sweeping an idle store's log: the rows known to be
    /// superseded first, then the whole log behind the window, a step at
    /// a time ([`sweep`]); whether more may be left.
    fn sweep_idle(&mut self, shared: &Shared) -> bool {
        self.sweep_superseded_some(shared, SWEEP_STEP) > 0 || self.sweep_some(shared, SWEEP_STEP)
    }

    /// A step of sweeping the log (see [`sweep`]) over at most `rows` of
    /// its rows; whether more is left to sweep. A failure makes the store
    /// refuse writes, like a failed fold.
    fn sweep_some(&mut self, shared: &Shared, rows: usize) -> bool {
        match sweep(&mut self.conn, &self.next_lsn, self.retained, rows) {
            Ok(more) => more,
            Err(err) => {
                shared.fail(format!("sweep the change log: {err}"));
                false
            }
        }
    }
}

/// The window of a container's log that sweeping leaves whole: the rows
/// after the LSN this returns. Its last `retained` commits (at least the
/// last one: the next open reads the last LSN from the log), and what is
/// past its fold mark (what a crash reads back).
fn sweep_bound(last: u64, mark: u64, retained: u64) -> u64 {
    mark.min(last.saturating_sub(retained.max(1)))
}

/// Deletes up to `rows` of the log rows [`PendingDocs::superseded`] holds
/// that are behind their container's window ([`sweep_bound`]), each
/// through the log's index, and forgets them; how many. This is how the
/// log stays bounded under load: the committer calls it after the batch
/// that wrote [`SWEEP_EVERY`] rows, for twice as many, so it keeps up
/// with the writes at the cost of an index lookup per row, without
/// reading the rows that stay. What it cannot know of (what a crash left,
/// or an older Partita wrote) is left to [`sweep`], at idle.
fn sweep_superseded(
    conn: &mut Connection,
    pending: &RwLock<PendingDocs>,
    next_lsn: &HashMap<String, u64>,
    marks: &HashMap<String, u64>,
    retained: u64,
    rows: usize,
) -> rusqlite::Result<usize> {
    let chosen: Vec<(Arc<str>, u64, u32)> = {
        let pending = pending.read();
        let mut chosen = Vec::new();
        for (container, mark) in marks {
            let last = next_lsn.get(container).copied().unwrap_or(0);
            let bound = sweep_bound(last, *mark, retained);
            let (from, to) = (Arc::from(container.as_str()), Arc::from(container.as_str()));
            chosen.extend(
                pending
                    .superseded
                    .range((from, 0, 0)..=(to, bound, u32::MAX))
                    .take(rows - chosen.len())
                    .cloned(),
            );
            if chosen.len() == rows {
                break;
            }
        }
        chosen
    };
    if chosen.is_empty() {
        return Ok(0);
    }
    let tx = conn.transaction()?;
    {
        let mut delete = tx
            .prepare_cached("DELETE FROM changes WHERE container = ?1 AND lsn = ?2 AND idx = ?3")?;
        for (container, lsn, idx) in &chosen {
            delete.execute(params![&**container, *lsn as i64, i64::from(*idx)])?;
        }
    }
    tx.commit()?;
    let mut pending = pending.write();
    for row in &chosen {
        pending.superseded.remove(row);
    }
    Ok(chosen.len())
}

/// Deletes from the change log of each container, a step of at most
/// about `rows` rows at a time, the changes no reader needs: those older
/// than its last `retained` commits and than its fold mark that `docs`
/// does not point at. They are versions a later change superseded, and
/// deletes, whose documents `docs` no longer holds; what stays is what
/// the in-memory store's log keeps ([`super::memory`]): the last
/// `retained` commits whole, and before them the latest version of each
/// document that still exists. So the log is bounded by the documents and
/// those commits, not by every write since the store was made: a post
/// whose comment count every comment bumps keeps one version, not one per
/// comment. SQLite reuses the pages the rows leave for the log's next
/// rows; the file does not shrink.
///
/// Each container's progress is `folded.swept`, written in the same
/// transaction as the deletes: every row at or before it was swept, and
/// the versions it left there, which `docs` pointed at, are deleted by
/// the fold that points `docs` past them ([`fold`]). A step stops at a
/// commit's end, and takes a commit of more than `rows` rows whole. Up to
/// the mark every document's latest change is in `docs` or pending (with
/// a later change, which stays), so a row `docs` does not point at there
/// is superseded (or a delete, or a body an older layout copied into
/// `docs`).
fn sweep(
    conn: &mut Connection,
    next_lsn: &HashMap<String, u64>,
    retained: u64,
    rows: usize,
) -> rusqlite::Result<bool> {
    let tx = conn.transaction()?;
    let states: Vec<(String, i64, i64)> = tx
        .prepare_cached("SELECT container, lsn, COALESCE(swept, 0) FROM folded ORDER BY container")?
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut more = false;
    for (container, mark, swept) in states {
        let last = next_lsn.get(&container).copied().unwrap_or(0);
        let bound = sweep_bound(last, mark.max(0) as u64, retained) as i64;
        if swept >= bound {
            continue;
        }
        // The first row past the step's rows: the step ends at the commit
        // before it, or takes it whole when it is the first.
        let past: Option<i64> = tx
            .prepare_cached(
                "SELECT lsn FROM changes WHERE container = ?1 AND lsn > ?2 AND lsn <= ?3 \
                 ORDER BY lsn, idx LIMIT 1 OFFSET ?4",
            )?
            .query_row(params![container, swept, bound, rows as i64], |row| {
                row.get(0)
            })
            .optional()?;
        let upto = match past {
            None => bound,
            Some(lsn) if lsn - 1 > swept => lsn - 1,
            Some(lsn) => lsn,
        };
        tx.prepare_cached(
            "DELETE FROM changes WHERE rowid IN (SELECT c.rowid FROM changes AS c \
             WHERE c.container = ?1 AND c.lsn > ?2 AND c.lsn <= ?3 AND NOT EXISTS ( \
             SELECT 1 FROM docs AS d WHERE d.container = c.container AND d.pk = c.pk \
             AND d.id = c.id AND d.lsn = c.lsn AND d.idx = c.idx))",
        )?
        .execute(params![container, swept, upto])?;
        tx.prepare_cached("UPDATE folded SET swept = ?2 WHERE container = ?1")?
            .execute(params![container, upto])?;
        if upto < bound {
            more = true;
            break;
        }
    }
    tx.commit()?;
    Ok(more)
}

/// Where each container's log stands, as [`fold`] needs it.
#[derive(Clone, Copy)]
struct Heads<'a> {
    /// The last LSN written.
    next_lsn: &'a HashMap<String, u64>,
    /// The highest sequence number written, recorded with the mark.
    max_seq: &'a HashMap<String, u64>,
    /// The commits the log keeps whole ([`sweep_bound`]).
    retained: u64,
}

/// Writes the pending documents into `docs` and records, per container,
/// the last LSN written as folded: one transaction, so a crash leaves
/// either all of it or none (and the log is replayed from the old mark).
/// Between batches every written commit is pending or already folded, so
/// the mark is exact. Readers of partitions read the pending documents
/// while the fold writes them (only the write side changes them, and it is
/// here); they are cleared once the fold has committed.
///
/// With a `step`, it writes about that many: containers in order, each
/// whole while the step lasts, then of the next only the documents whose
/// latest change is at or before an LSN (all of them at that LSN), which
/// becomes its mark. That mark is exact too: every document changed at or
/// before it is either written now or has a later change, which stays
/// pending and which the log replays after a crash.
fn fold(
    conn: &mut Connection,
    pending: &RwLock<PendingDocs>,
    heads: &Heads<'_>,
    stamps: &Stamps,
    indexes: &RwLock<Indexes>,
    step: Option<usize>,
) -> rusqlite::Result<Vec<(String, u64)>> {
    let Heads {
        next_lsn,
        max_seq,
        retained,
    } = *heads;
    let pending_docs = pending.read();
    if pending_docs.is_empty() {
        return Ok(Vec::new());
    }
    // Per container written, the LSN up to which it is (`u64::MAX`: all),
    // and the documents to write, in key order.
    let mut upto: HashMap<Arc<str>, u64> = HashMap::new();
    let chosen: Vec<(&PendingKey, &Pending)> = match step {
        None => {
            for container in pending_docs.containers() {
                upto.insert(container, u64::MAX);
            }
            pending_docs.docs.iter().collect()
        }
        Some(step) => {
            let mut keys: Vec<&PendingKey> = Vec::with_capacity(step);
            let mut left = step.max(1);
            let mut entries = pending_docs.by_lsn.iter().peekable();
            while let Some(((container, lsn, _), key)) = entries.next() {
                keys.push(key);
                left = left.saturating_sub(1);
                match entries.peek() {
                    // The container's last: all of it is written.
                    Some(((next, _, _), _)) if next != container => {
                        upto.insert(Arc::clone(container), u64::MAX);
                        if left == 0 {
                            break;
                        }
                    }
                    None => {
                        upto.insert(Arc::clone(container), u64::MAX);
                    }
                    // The step is done, but not at a commit's end: the
                    // rest of that commit's documents go too.
                    Some(((_, next_lsn, _), _)) if left == 0 && next_lsn != lsn => {
                        upto.insert(Arc::clone(container), *lsn);
                        break;
                    }
                    Some(_) => {}
                }
            }
            keys.sort_unstable();
            keys.into_iter()
                .filter_map(|key| Some((key, pending_docs.docs.get(key)?)))
                .collect()
        }
    };
    let tx = conn.transaction()?;
    let mut marks = Vec::new();
    {
        let mut entries = EntryWriter::new(&tx, stamps)?;
        let indexes = indexes.read();
        // A pointer to the log row that holds the body: one copy of each.
        let mut put_doc = tx.prepare_cached(
            "INSERT OR REPLACE INTO docs (container, pk, id, rid, lsn, idx, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL)",
        )?;
        let mut delete_doc =
            tx.prepare_cached("DELETE FROM docs WHERE container = ?1 AND pk = ?2 AND id = ?3")?;
        // The version `docs` points at is superseded now: deleted from the
        // log when behind the window of commits it keeps whole (see
        // [`sweep_superseded`]; about always, since what a fold writes was
        // committed long before), left to a sweep at idle otherwise.
        let mut drop_old = tx.prepare_cached("DELETE FROM changes WHERE rowid = ?1")?;
        for &((container, pk, id), doc) in &chosen {
            let state = indexes
                .get(&**container)
                .filter(|state| state.policy.indexing_mode != IndexingMode::None);
            // Before the row changes: the old entries come from it.
            let old = entries.old_row(container, pk, id, state.is_some())?;
            if let Some(state) = state {
                entries.replace(state, container, pk, doc, old.as_ref())?;
            }
            let last = next_lsn.get(&**container).copied().unwrap_or(0);
            let behind = last.saturating_sub(retained.max(1));
            if let Some(OldRow {
                version: Some((lsn, idx)),
                log_row: Some(row),
                ..
            }) = old
                && lsn <= behind
                && (lsn, idx) != (doc.lsn, doc.idx)
            {
                drop_old.execute(params![row])?;
            }
            match &doc.document {
                Some(_) => {
                    put_doc.execute(params![
                        &**container,
                        pk,
                        &**id,
                        doc.rid as i64,
                        doc.lsn as i64,
                        i64::from(doc.idx)
                    ])?;
                }
                None => {
                    delete_doc.execute(params![&**container, pk, &**id])?;
                }
            }
        }
        entries.finish()?;
        let mut mark = tx.prepare_cached(
            "INSERT INTO folded (container, lsn, seq) VALUES (?1, ?2, ?3) \
             ON CONFLICT (container) DO UPDATE SET lsn = excluded.lsn, seq = excluded.seq",
        )?;
        let left_whole: BTreeSet<Arc<str>> = pending_docs
            .containers()
            .into_iter()
            .filter(|container| !upto.contains_key(container))
            .collect();
        for (container, lsn) in next_lsn {
            // A container with nothing pending is folded to its last LSN;
            // one a step left out keeps its mark.
            let lsn = match upto.get(container.as_str()) {
                Some(&u64::MAX) => *lsn,
                Some(bound) => *bound,
                None if left_whole.contains(container.as_str()) => continue,
                None => *lsn,
            };
            let seq = max_seq.get(container).copied().unwrap_or(0);
            mark.execute(params![container, lsn as i64, seq as i64])?;
            marks.push((container.clone(), lsn));
        }
    }
    let written: Vec<PendingKey> = match step {
        None => Vec::new(),
        Some(_) => chosen.iter().map(|(key, _)| (*key).clone()).collect(),
    };
    // A delete's row: `docs` holds nothing of it now.
    let deletes: Vec<(Arc<str>, u64, u32)> = chosen
        .iter()
        .filter(|(_, doc)| doc.document.is_none())
        .map(|((container, _, _), doc)| (Arc::clone(container), doc.lsn, doc.idx))
        .collect();
    drop(pending_docs);
    tx.commit()?;
    let mut pending = pending.write();
    pending.superseded.extend(deletes);
    match step {
        None => pending.clear(),
        Some(_) => pending.remove(&written),
    }
    Ok(marks)
}

/// An entry of `idx`: (key of its container and path, value, pk as
/// stored, rid), in the order of `idx`'s primary key.
type IdxRow = (i64, Vec<u8>, String, i64);

/// A partition key as an entry of `idx` holds it: a single string key
/// (stored as `["…"]`, [`PartitionKey::to_json_array`]) as the string
/// alone when it needs no escape, as TEXT; any other as stored, as a
/// BLOB, so the two cannot be confused. Every entry holds one, and the
/// brackets and quotes were 4 of its ~30 bytes.
#[derive(Clone, Copy)]
enum EntryPk<'a> {
    Bare(&'a str),
    Stored(&'a str),
}

impl<'a> EntryPk<'a> {
    fn of(stored: &'a str) -> Self {
        match stored
            .strip_prefix("[\"")
            .and_then(|s| s.strip_suffix("\"]"))
        {
            Some(string) if !string.contains(['"', '\\']) => EntryPk::Bare(string),
            _ => EntryPk::Stored(stored),
        }
    }

    fn value(self) -> SqlValue {
        match self {
            EntryPk::Bare(string) => SqlValue::Text(string.to_owned()),
            EntryPk::Stored(stored) => SqlValue::Blob(stored.as_bytes().to_vec()),
        }
    }

    /// The partition key as stored, from an entry's.
    fn stored(entry: rusqlite::types::ValueRef<'_>) -> rusqlite::Result<String> {
        use rusqlite::types::{FromSqlError, ValueRef};
        let text = |bytes| std::str::from_utf8(bytes).map_err(|e| FromSqlError::Other(Box::new(e)));
        match entry {
            ValueRef::Text(string) => Ok(format!("[\"{}\"]", text(string)?)),
            ValueRef::Blob(stored) => Ok(text(stored)?.to_owned()),
            _ => Err(FromSqlError::InvalidType.into()),
        }
    }
}

impl rusqlite::ToSql for EntryPk<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::ValueRef;
        Ok(rusqlite::types::ToSqlOutput::Borrowed(match *self {
            EntryPk::Bare(string) => ValueRef::Text(string.as_bytes()),
            EntryPk::Stored(stored) => ValueRef::Blob(stored.as_bytes()),
        }))
    }
}

/// Deletes the range-index entries of `container`, and its paths' keys.
fn delete_entries(tx: &rusqlite::Transaction<'_>, container: &str) -> rusqlite::Result<()> {
    tx.execute(
        "DELETE FROM idx WHERE key IN (SELECT key FROM idx_paths WHERE container = ?1)",
        params![container],
    )?;
    tx.execute(
        "DELETE FROM idx_paths WHERE container = ?1",
        params![container],
    )?;
    Ok(())
}

/// The keys of `idx_paths`, each looked up once per transaction.
///
/// An entry names its container and path by a key of a byte or two, not
/// by their names, which were about a quarter of an entry: with
/// [`EntryPk`], 100,000 documents of twelve paths each hold an `idx` of
/// 39.1 MB instead of 58.0 (the store's file 75 MB instead of 94, against
/// SQLite's 28 for the same documents with two indexes).
struct PathKeys<'t> {
    find: rusqlite::CachedStatement<'t>,
    add: rusqlite::CachedStatement<'t>,
    /// Per container, the keys found or added so far.
    known: HashMap<Arc<str>, HashMap<String, i64>>,
}

impl<'t> PathKeys<'t> {
    fn new(tx: &'t rusqlite::Transaction<'t>) -> rusqlite::Result<Self> {
        Ok(PathKeys {
            find: tx
                .prepare_cached("SELECT key FROM idx_paths WHERE container = ?1 AND path = ?2")?,
            add: tx.prepare_cached("INSERT INTO idx_paths (container, path) VALUES (?1, ?2)")?,
            known: HashMap::new(),
        })
    }

    /// The key of (`container`, `path`), added when `add` and there is
    /// none yet.
    fn key(
        &mut self,
        container: &Arc<str>,
        path: &str,
        add: bool,
    ) -> rusqlite::Result<Option<i64>> {
        if let Some(&key) = self.known.get(container).and_then(|paths| paths.get(path)) {
            return Ok(Some(key));
        }
        let mut key = self
            .find
            .query_row(params![&**container, path], |row| row.get(0))
            .optional()?;
        if key.is_none() && add {
            key = Some(self.add.insert(params![&**container, path])?);
        }
        if let Some(key) = key {
            self.known
                .entry(Arc::clone(container))
                .or_default()
                .insert(path.to_owned(), key);
        }
        Ok(key)
    }
}

/// A document's row in `docs`, as a fold finds it before writing the new
/// version.
struct OldRow {
    rid: u64,
    /// The (LSN, index) of the log row it points at; `None` for a row an
    /// older Partita wrote with its body.
    version: Option<(u64, u32)>,
    /// That log row's rowid, when it is there.
    log_row: Option<i64>,
    /// Its document, when the fold asked for it and it parsed.
    document: Option<Document>,
}

/// Writes documents' range-index entries ([`IndexState`]) in a
/// transaction of the write side. The rows to delete and to insert are
/// gathered first and written in key order by [`EntryWriter::finish`]:
/// a fold's documents are in (container, pk, id) order, which scatters
/// their entries over the whole index, and writing 20,000 documents'
/// entries in that order took 1.2–3 s; in key order neighbouring rows
/// share their B-tree pages.
struct EntryWriter<'t> {
    tx: &'t rusqlite::Transaction<'t>,
    old: rusqlite::CachedStatement<'t>,
    keys: PathKeys<'t>,
    stamps: &'t Stamps,
    /// Per container, the paths its policy indexes.
    indexed: HashMap<String, IndexedPaths>,
    deletes: Vec<IdxRow>,
    inserts: Vec<IdxRow>,
}

impl<'t> EntryWriter<'t> {
    fn new(tx: &'t rusqlite::Transaction<'t>, stamps: &'t Stamps) -> rusqlite::Result<Self> {
        Ok(EntryWriter {
            tx,
            // The body's columns first, as [`parse_row`] reads them.
            old: tx.prepare_cached(
                "SELECT d.rid, COALESCE(d.body, c.body), c.seq, c.ts, d.lsn, d.idx, c.rowid \
                 FROM docs AS d LEFT JOIN changes AS c \
                 ON c.container = d.container AND c.lsn = d.lsn AND c.idx = d.idx \
                 WHERE d.container = ?1 AND d.pk = ?2 AND d.id = ?3",
            )?,
            keys: PathKeys::new(tx)?,
            stamps,
            indexed: HashMap::new(),
            deletes: Vec::new(),
            inserts: Vec::new(),
        })
    }

    /// The entries of `document` in `container`.
    fn entries(&mut self, state: &IndexState, container: &str, document: &Value) -> Entries {
        self.indexed
            .entry(container.to_owned())
            .or_default()
            .entries(document, &state.policy)
    }

    /// The `docs` row of (`container`, `pk`, `id`), with its document
    /// when `parse` (the old entries come from it). A row that does not
    /// parse keeps its entries: an entry too many costs a query a look,
    /// never a result.
    fn old_row(
        &mut self,
        container: &str,
        pk: &str,
        id: &str,
        parse: bool,
    ) -> rusqlite::Result<Option<OldRow>> {
        let mut rows = self.old.query(params![container, pk, id])?;
        let Some(row) = rows.next()? else {
            return Ok(None);
        };
        let rid = row.get::<_, i64>(0)? as u64;
        let document = match parse {
            true => {
                let stamp = self.stamps.get(container);
                parse_row(row, 1, stamp.map(|s| &**s), container, pk, id, rid)
                    .ok()
                    .map(|loaded| loaded.document)
            }
            false => None,
        };
        let lsn: Option<i64> = row.get(4)?;
        let idx: Option<i64> = row.get(5)?;
        Ok(Some(OldRow {
            rid,
            version: lsn.zip(idx).map(|(lsn, idx)| (lsn as u64, idx as u32)),
            log_row: row.get(6)?,
            document,
        }))
    }

    /// Replaces the entries of a document in `container` under `pk` as
    /// its `docs` row has it (`old`) by those of its new state `doc`.
    fn replace(
        &mut self,
        state: &IndexState,
        container: &Arc<str>,
        pk: &str,
        doc: &Pending,
        old: Option<&OldRow>,
    ) -> rusqlite::Result<()> {
        let new = match &doc.document {
            Some((document, _)) => self.entries(state, container, document.value()),
            None => Entries::new(),
        };
        let old = old.and_then(|old| {
            let document = old.document.as_ref()?;
            Some((old.rid, self.entries(state, container, document.value())))
        });
        let same_rid = old.as_ref().is_some_and(|(rid, _)| *rid == doc.rid);
        if let Some((rid, old)) = &old {
            for (path, value) in old.iter().filter(|e| !same_rid || !new.contains(e)) {
                // A path without a key has no entries to delete.
                if let Some(key) = self.keys.key(container, path, false)? {
                    self.deletes
                        .push((key, value.clone(), pk.to_owned(), *rid as i64));
                }
            }
        }
        for entry in new {
            if same_rid && old.as_ref().is_some_and(|(_, old)| old.contains(&entry)) {
                continue;
            }
            let (path, value) = entry;
            if let Some(key) = self.keys.key(container, &path, true)? {
                self.inserts
                    .push((key, value, pk.to_owned(), doc.rid as i64));
            }
        }
        Ok(())
    }

    /// Adds the entries of a document of `docs`.
    fn add(
        &mut self,
        state: &IndexState,
        container: &Arc<str>,
        pk: &str,
        rid: u64,
        document: &Value,
    ) -> rusqlite::Result<()> {
        for (path, value) in self.entries(state, container, document) {
            if let Some(key) = self.keys.key(container, &path, true)? {
                self.inserts.push((key, value, pk.to_owned(), rid as i64));
            }
        }
        Ok(())
    }

    /// Writes what was gathered, in key order: the deletes, then the
    /// inserts (their keys differ: each names its document's rid).
    fn finish(mut self) -> rusqlite::Result<()> {
        self.deletes.sort_unstable();
        self.inserts.sort_unstable();
        let mut delete = self.tx.prepare_cached(
            "DELETE FROM idx WHERE key = ?1 AND value = ?2 AND pk = ?3 AND rid = ?4",
        )?;
        for (key, value, pk, rid) in &self.deletes {
            delete.execute(params![key, value, EntryPk::of(pk), rid])?;
        }
        let mut insert = self.tx.prepare_cached(
            "INSERT OR IGNORE INTO idx (key, value, pk, rid) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for (key, value, pk, rid) in &self.inserts {
            insert.execute(params![key, value, EntryPk::of(pk), rid])?;
        }
        Ok(())
    }
}

/// One step of building a range index ([`IndexState`]): indexes the next
/// [`BUILD_STEP`] documents of the first container being built, in `docs`
/// order from where the last step stopped, in one transaction, and marks
/// the index ready after its last. Returns whether any container is still
/// being built.
/// How far the build of `container`'s index is, in percent of its
/// documents (at most 99: the build is not done); a build goes in (pk, id)
/// order from the cursor `idx_builds` keeps.
fn build_progress(conn: &Connection, container: &str) -> rusqlite::Result<u32> {
    let (done, all): (i64, i64) = conn.query_row(
        "SELECT COUNT(*) FILTER (WHERE b.container IS NOT NULL AND (d.pk < b.pk OR (d.pk = b.pk AND d.id <= b.id))), COUNT(*) \
         FROM docs AS d LEFT JOIN idx_builds AS b ON b.container = d.container WHERE d.container = ?1",
        params![container],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    Ok(match all {
        0 => 0,
        all => (done * 100 / all).clamp(0, 99) as u32,
    })
}

fn build_step(
    conn: &mut Connection,
    stamps: &Stamps,
    indexes: &RwLock<Indexes>,
) -> rusqlite::Result<bool> {
    let tx = conn.transaction()?;
    let next: Option<(String, String, String)> = tx
        .query_row(
            "SELECT container, pk, id FROM idx_builds LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    let Some((container, mut pk, mut id)) = next else {
        return Ok(false);
    };
    let state = indexes.read().get(&container).cloned();
    let mut done = true;
    if let Some(state) = state.filter(|s| s.policy.indexing_mode != IndexingMode::None) {
        let stamp = stamps.get(&container).cloned();
        let mut rows_read = 0;
        {
            let mut rows = tx.prepare_cached(&format!(
                "SELECT d.pk, d.id, d.rid, {DOC_BODY} (d.pk, d.id) > (?2, ?3) ORDER BY d.pk, d.id LIMIT {BUILD_STEP}"
            ))?;
            let mut entries = EntryWriter::new(&tx, stamps)?;
            let name: Arc<str> = Arc::from(container.as_str());
            let mut rows = rows.query(params![container, pk, id])?;
            while let Some(row) = rows.next()? {
                rows_read += 1;
                pk = row.get(0)?;
                id = row.get(1)?;
                let rid = row.get::<_, i64>(2)? as u64;
                if let Ok(loaded) = parse_row(row, 3, stamp.as_deref(), &container, &pk, &id, rid) {
                    entries.add(&state, &name, &pk, rid, loaded.document.value())?;
                }
            }
            drop(rows);
            entries.finish()?;
        }
        done = rows_read < BUILD_STEP;
    }
    if done {
        tx.execute(
            "DELETE FROM idx_builds WHERE container = ?1",
            params![container],
        )?;
    } else {
        tx.execute(
            "UPDATE idx_builds SET pk = ?2, id = ?3 WHERE container = ?1",
            params![container, pk, id],
        )?;
    }
    tx.commit()?;
    let mut indexes = indexes.write();
    if done && let Some(state) = indexes.get_mut(&container) {
        state.ready = true;
    }
    Ok(indexes.values().any(|state| !state.ready))
}

/// Written zeros kept ahead of the end of the write-ahead log, so that a
/// commit's fsync finds its frames' blocks already allocated.
///
/// An fsync of a write past the end of a file also commits the file's new
/// size and block allocation to the file system's journal, which on ext4
/// here doubles its cost: 4 KB appended twice and `fdatasync`ed took
/// 271–345 µs p50 against 146–151 µs for the same writes into zeros written
/// 256 KB at a time (2026-11-29, 1,500 commits, load average 2.4). SQLite
/// overwrites its log from the top after each checkpoint, which gets the
/// same effect once the log has grown to its longest; this gets it from
/// the first commit of a new log (every benchmark's, and every commit
/// until the log first reaches [`CHECKPOINT_PAGES`]).
///
/// Only the write side writes the pad, between its batches, and only past
/// the end of the file: never where SQLite has written or is writing.
/// Zeros past the log's last frame are where SQLite expects old frames
/// after a restart; they fail the frame checksum, so recovery stops there.
/// The pad is an optimization: a failure to write it (a full disk) changes
/// nothing else.
struct LogPad {
    path: PathBuf,
    file: Option<File>,
    /// The log file's length when last asked or extended here. Asking the
    /// file system on every batch would cost an extra write per fsync: a
    /// file whose times were read gets a fine-grained modification time at
    /// its next write (Linux's multigrain timestamps), which dirties its
    /// inode, and ext4 then writes the inode at every fdatasync.
    len: Option<u64>,
    /// The bytes of one frame of the log: its header and a page.
    frame: u64,
}

/// How much [`LogPad`] writes at a time, when less than half of it lies
/// past the log's last frame after a batch (so 128–384 KB lie there then).
const LOG_PAD: usize = 256 << 10;

/// The size of the write-ahead log's header, and of a frame's header.
const WAL_HEADER: u64 = 32;
const FRAME_HEADER: u64 = 24;

impl LogPad {
    fn new(path: PathBuf, page_size: u64) -> LogPad {
        LogPad {
            path,
            file: None,
            len: None,
            frame: FRAME_HEADER + page_size,
        }
    }

    /// Extends the log file with zeros when its end is near `frames`
    /// frames in.
    fn keep_ahead(&mut self, frames: i64) {
        use std::os::unix::fs::FileExt;
        static ZEROS: [u8; LOG_PAD] = [0; LOG_PAD];
        let end = WAL_HEADER + u64::try_from(frames).unwrap_or(0) * self.frame;
        if self.file.is_none() {
            // SQLite creates the log at its first write.
            self.file = std::fs::OpenOptions::new()
                .write(true)
                .open(&self.path)
                .ok();
        }
        let Some(file) = &self.file else { return };
        // Only SQLite's frames and these zeros extend the file, and the log
        // never shrinks while the store is open: a file longer than the
        // last frame is as long as it was. One shorter has grown since.
        let len = match self.len {
            Some(len) if len >= end => len,
            _ => match file.metadata() {
                Ok(meta) => meta.len(),
                Err(_) => return,
            },
        };
        self.len = Some(len);
        // The file ends at or past the last frame SQLite wrote; past its
        // end is only ever written here.
        if len < end || len >= end + LOG_PAD as u64 / 2 {
            return;
        }
        // Best effort: a partial write leaves zeros past the last frame too,
        // and the next call asks the file system how long the file is.
        self.len = match file.write_all_at(&ZEROS, len) {
            Ok(()) => Some(len + LOG_PAD as u64),
            Err(_) => None,
        };
    }
}

/// Copies the write-ahead log into the database file with SQLite's syncs on
/// (the log before, the file after), then turns them off again. Between
/// batches nothing else writes, so the checkpoint copies everything and the
/// next batch restarts the log from the top.
fn checkpoint(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("PRAGMA synchronous = FULL")?;
    let copied = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
    conn.execute_batch("PRAGMA synchronous = OFF")?;
    copied
}

/// The syncer thread: fsyncs the log file for every batch the committer
/// wrote (one fsync for all batches waiting), then answers their callers.
/// A failed fsync fails those batches and every later one: its outcome is
/// unknown, and retrying it can silently lose data. A batch the committer
/// failed to write after these does not concern them: they were written
/// whole, and are synced and answered.
fn run_syncer(wal_path: &Path, queue: &mpsc::Receiver<Vec<Ack>>, shared: &Shared) {
    let mut wal: Option<File> = None;
    let mut broken: Option<String> = None;
    while let Ok(first) = queue.recv() {
        let mut jobs = vec![first];
        while let Ok(more) = queue.try_recv() {
            jobs.push(more);
        }
        let synced = match &broken {
            Some(reason) => Err(reason.clone()),
            None => sync_log(&mut wal, wal_path).map_err(|e| {
                let reason = shared.fail(format!("fsync {}: {e}", wal_path.display()));
                broken = Some(reason.clone());
                reason
            }),
        };
        // A batch synced in place was written before these: it is answered
        // first, and if its fsync failed, this one proves nothing.
        shared.wait_for_in_place();
        let synced = match synced {
            Ok(()) if shared.in_place_failed.load(Ordering::Acquire) => {
                let reason = shared.fail("an earlier fsync of the log failed".to_owned());
                broken = Some(reason.clone());
                Err(reason)
            }
            other => other,
        };
        let answered = jobs.len();
        match synced {
            Ok(()) => {
                for acks in jobs {
                    shared.complete(acks);
                }
            }
            Err(reason) => {
                for acks in jobs {
                    fail_acks(acks, &reason);
                }
            }
        }
        // Only now may a caller sync a later batch in place: its answer
        // must not overtake these.
        shared.syncing.fetch_sub(answered, Ordering::AcqRel);
    }
}

/// Syncs the log file, opening it (and syncing its directory entry, as a
/// new file's must be) the first time: SQLite creates it at the first write.
fn sync_log(wal: &mut Option<File>, path: &Path) -> std::io::Result<()> {
    if wal.is_none() {
        let file = File::open(path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)?.sync_all()?;
        }
        *wal = Some(file);
    }
    wal.as_ref().expect("opened above").sync_data()
}

fn write_meta(tx: &rusqlite::Transaction<'_>, op: &MetaOp) -> rusqlite::Result<()> {
    match op {
        MetaOp::CreateContainer(meta) => {
            tx.execute(
                "INSERT OR IGNORE INTO containers (id, ordinal, pk_path, physical_partitions, settings) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    meta.id,
                    meta.ordinal,
                    meta.partition_key_path,
                    meta.physical_partitions,
                    settings_json(meta)
                ],
            )?;
        }
        MetaOp::UpdateContainer(meta) => {
            tx.execute(
                "UPDATE containers SET settings = ?2 WHERE id = ?1",
                params![meta.id, settings_json(meta)],
            )?;
        }
        MetaOp::DeleteContainer(id) => {
            delete_entries(tx, id)?;
            for table in ["docs", "changes", "scripts", "folded", "idx_builds"] {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE container = ?1"),
                    params![id],
                )?;
            }
            tx.execute("DELETE FROM containers WHERE id = ?1", params![id])?;
        }
        MetaOp::PutScript(script) => {
            tx.execute(
                "INSERT OR REPLACE INTO scripts (container, kind, id, language, body, trigger_type, trigger_operation, version, ts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    script.container,
                    kind_name(script.kind),
                    script.id,
                    language_name(script.language),
                    &*script.body,
                    match &script.trigger_names {
                        Some(names) => Some(names.trigger_type.clone()),
                        None => script.trigger_type.map(|t| t.to_string()),
                    },
                    match &script.trigger_names {
                        Some(names) => Some(names.trigger_operation.clone()),
                        None => script.trigger_operation.map(|o| o.to_string()),
                    },
                    script.version as i64,
                    script.ts as i64
                ],
            )?;
        }
        MetaOp::DeleteScript {
            container,
            kind,
            id,
        } => {
            tx.execute(
                "DELETE FROM scripts WHERE container = ?1 AND kind = ?2 AND id = ?3",
                params![container, kind_name(*kind), id],
            )?;
        }
    }
    Ok(())
}

/// What a container's creation, new settings or deletion do to its range
/// index ([`IndexState`]): a new policy empties it and starts a build.
/// The state changes before the batch commits, like the stamps: a failed
/// batch is the last one written.
fn index_meta(
    tx: &rusqlite::Transaction<'_>,
    op: &MetaOp,
    indexes: &RwLock<Indexes>,
) -> rusqlite::Result<()> {
    match op {
        MetaOp::CreateContainer(meta) => {
            let state = IndexState {
                policy: Arc::new(meta.indexing_policy.clone()),
                ready: true,
            };
            indexes.write().insert(meta.id.clone(), state);
        }
        MetaOp::UpdateContainer(meta) => {
            let changed = indexes
                .read()
                .get(&meta.id)
                .is_none_or(|state| *state.policy != meta.indexing_policy);
            if changed {
                delete_entries(tx, &meta.id)?;
                tx.execute(
                    "DELETE FROM idx_builds WHERE container = ?1",
                    params![meta.id],
                )?;
                let build = meta.indexing_policy.indexing_mode != IndexingMode::None;
                if build {
                    tx.execute(
                        "INSERT INTO idx_builds (container, pk, id) VALUES (?1, '', '')",
                        params![meta.id],
                    )?;
                }
                let state = IndexState {
                    policy: Arc::new(meta.indexing_policy.clone()),
                    ready: !build,
                };
                indexes.write().insert(meta.id.clone(), state);
            }
        }
        MetaOp::DeleteContainer(id) => {
            indexes.write().remove(id);
        }
        MetaOp::PutScript(_) | MetaOp::DeleteScript { .. } => {}
    }
    Ok(())
}

/// Writes a batch in one transaction. Returns each request's LSN (zero for
/// container creations).
/// The batch's documents join `pending` once it committed, and the
/// highest sequence numbers `max_seq`.
fn write_batch(
    conn: &mut Connection,
    batch: &[Request],
    next_lsn: &HashMap<String, u64>,
    pending: &RwLock<PendingDocs>,
    max_seq: &mut HashMap<String, u64>,
    stamps: &RwLock<Stamps>,
    indexes: &RwLock<Indexes>,
) -> Result<Vec<Lsn>> {
    let bad = |e: rusqlite::Error| Error::storage("commit", e);
    let tx = conn.transaction().map_err(bad)?;
    let mut staged: HashMap<&str, u64> = HashMap::new();
    let mut lsns = Vec::with_capacity(batch.len());
    // What the batch does to the pending documents, in batch order.
    enum Effect<'a> {
        DeleteContainer(&'a str),
        /// A document's latest state, and the sequence number of its write.
        Put((Arc<str>, String, Arc<str>), Pending, u64),
    }
    let mut effects = Vec::new();
    {
        let mut log = tx
            .prepare_cached(
                "INSERT INTO changes (container, lsn, idx, pk, id, op, seq, rid, body, ts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .map_err(bad)?;
        for request in batch {
            let record = match request {
                Request::Meta(op, _) => {
                    write_meta(&tx, op).map_err(bad)?;
                    index_meta(&tx, op, indexes).map_err(bad)?;
                    // Before the commits that follow it in the batch. A
                    // stamp left by a failed batch stamps nothing: no
                    // later batch is written.
                    if let MetaOp::CreateContainer(meta) = op {
                        stamps
                            .write()
                            .insert(meta.id.clone(), Arc::new(Stamp::of(meta)));
                    }
                    if let MetaOp::DeleteContainer(id) = op {
                        // Commits after the deletion in this batch start over,
                        // and nothing before it is folded.
                        staged.insert(id, 0);
                        effects.push(Effect::DeleteContainer(id));
                    }
                    lsns.push(Lsn::ZERO);
                    continue;
                }
                Request::Commit(record, _) => record,
            };
            let container: &str = &record.container;
            let last = staged
                .entry(container)
                .or_insert_with(|| next_lsn.get(container).copied().unwrap_or(0));
            *last += 1;
            let lsn = *last as i64;
            let pk = record.partition_key.to_json_array();
            let stamp = stamps.read().get(container).cloned();
            for (idx, change) in record.changes.iter().enumerate() {
                let text: Option<Arc<str>> = match (&change.text, &change.document) {
                    (Some(text), _) => Some(Arc::clone(text)),
                    (None, Some(doc)) => Some(Arc::from(doc.value().to_string())),
                    (None, None) => None,
                };
                let ts = change.document.as_ref().map_or_else(now_secs, Document::ts);
                let body = text
                    .as_deref()
                    .map(|text| stored_body(text, stamp.as_deref(), change.rid, change.seq, ts));
                log.execute(params![
                    container,
                    lsn,
                    idx as i64,
                    pk,
                    &*change.id,
                    op_code(change.kind),
                    change.seq as i64,
                    change.rid as i64,
                    body,
                    ts as i64
                ])
                .map_err(bad)?;
                let document = match (&change.document, text) {
                    (Some(doc), Some(text)) => Some((doc.clone(), text)),
                    _ => None,
                };
                effects.push(Effect::Put(
                    (
                        Arc::clone(&record.container),
                        pk.clone(),
                        Arc::clone(&change.id),
                    ),
                    Pending {
                        rid: change.rid,
                        lsn: lsn as u64,
                        idx: idx as u32,
                        document,
                        shadows: None,
                    },
                    change.seq,
                ));
            }
            lsns.push(Lsn(lsn as u64));
        }
    }
    tx.commit().map_err(bad)?;
    let mut pending = pending.write();
    for effect in effects {
        match effect {
            Effect::DeleteContainer(id) => {
                pending.drop_container(id);
                max_seq.remove(id);
            }
            Effect::Put(key, doc, seq) => {
                match max_seq.get_mut(&*key.0) {
                    Some(max) => *max = (*max).max(seq),
                    None => {
                        max_seq.insert(key.0.to_string(), seq);
                    }
                }
                put_pending(&mut pending, key, doc);
            }
        }
    }
    Ok(lsns)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::storage::RecordChange;

    fn record(id: &str) -> CommitRecord {
        let doc =
            Document::new(serde_json::json!({"id": id, "pk": "a", "_etag": "\"1\"", "_ts": 1}));
        CommitRecord {
            container: Arc::from("c"),
            partition_key: PartitionKey::from("a"),
            changes: vec![RecordChange {
                id: Arc::from(id),
                kind: ChangeKind::Create,
                rid: 1,
                before_rid: None,
                seq: 1,
                text: Some(Arc::from(doc.value().to_string())),
                document: Some(doc),
            }],
            base_version: 0,
        }
    }

    #[test]
    fn a_build_is_as_far_as_its_cursor_in_the_documents_order() {
        let mut conn = Connection::open_in_memory().unwrap();
        create_schema(&mut conn, false).unwrap();
        for (pk, id) in [("a", "1"), ("a", "2"), ("b", "1"), ("c", "1")] {
            conn.execute(
                "INSERT INTO docs (container, pk, id, rid) VALUES ('c', ?1, ?2, 1)",
                params![pk, id],
            )
            .unwrap();
        }
        let at = |pk: &str, id: &str| {
            conn.execute(
                "INSERT OR REPLACE INTO idx_builds (container, pk, id) VALUES ('c', ?1, ?2)",
                params![pk, id],
            )
            .unwrap();
            build_progress(&conn, "c").unwrap()
        };
        assert_eq!(at("", ""), 0);
        assert_eq!(at("a", "2"), 50);
        assert_eq!(at("b", "1"), 75);
        // Never 100 while a build row remains.
        assert_eq!(at("c", "1"), 99);
        assert_eq!(build_progress(&conn, "other").unwrap(), 0);
    }

    /// What early lock release rests on: records submitted one after the
    /// other, the first written in place (an idle store) and the others
    /// queued behind its fsync, are written in that order; and once the
    /// store has failed, a record submitted after fails too.
    #[test]
    fn submitted_records_keep_their_order_and_fail_after_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let storage = SqliteStorage::open(&dir.path().join("db.sqlite"), Durability::Full).unwrap();
        storage.create_container(&meta()).unwrap();
        let ids = ["a", "b", "c", "d"];
        let submitted: Vec<Submitted<'_>> = ids
            .iter()
            .map(|id| storage.submit(record(id)).unwrap())
            .collect();
        let lsns: Vec<Lsn> = submitted.into_iter().map(|s| s.wait().unwrap()).collect();
        assert_eq!(lsns, [Lsn(1), Lsn(2), Lsn(3), Lsn(4)]);
        let logged: Vec<String> = storage
            .read_changes("c", Lsn::ZERO, 10)
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(logged, ids);

        // A store that failed (told so here as a failed batch or fsync
        // tells it) fails whatever is submitted after.
        storage
            .shared
            .fail("injected: the disk went away".to_owned());
        let later = storage.submit(record("e")).unwrap();
        let err = later.wait().unwrap_err();
        assert!(err.to_string().contains("the disk went away"), "{err}");
    }

    #[test]
    fn an_idle_store_folds_what_is_pending() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        storage.create_container(&meta()).unwrap();
        for id in ["a", "b", "c"] {
            storage.commit(record(id)).unwrap();
        }
        // Nothing else is written: within a few idle periods the committer
        // folds the three documents into `docs` (the ceiling catches a
        // store that never does).
        let started = std::time::Instant::now();
        while count(&path, "SELECT COUNT(*) FROM docs") < 3 {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "an idle store never folded"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!storage.writer.lock().as_ref().unwrap().has_pending());
        // Reads find them where they now are.
        let key = PartitionKey::from("a");
        assert!(storage.read_document("c", &key, "a").unwrap().is_some());
    }

    /// The log as `read_changes` gives it: (LSN, id, whether a delete).
    fn log_of(storage: &SqliteStorage) -> Vec<(u64, String, bool)> {
        storage
            .read_changes("c", Lsn::ZERO, usize::MAX)
            .unwrap()
            .into_iter()
            .map(|c| (c.lsn.0, c.id, c.kind == ChangeKind::Delete))
            .collect()
    }

    /// What sweeping `log` up to `bound` must leave when it is folded up
    /// to `mark`: every change after `bound`, and up to it the last change
    /// of each document up to the mark (what `docs` holds), unless a
    /// delete.
    fn swept_log(log: &[(u64, String, bool)], bound: u64, mark: u64) -> Vec<(u64, String, bool)> {
        let last: HashMap<&str, u64> = log
            .iter()
            .filter(|(lsn, _, _)| *lsn <= mark)
            .map(|(lsn, id, _)| (id.as_str(), *lsn))
            .collect();
        log.iter()
            .filter(|(lsn, id, delete)| {
                *lsn > bound || (last.get(id.as_str()) == Some(lsn) && !delete)
            })
            .cloned()
            .collect()
    }

    #[test]
    fn sweeping_keeps_the_last_commits_whole_and_the_latest_version_of_each_document() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let copy = dir.path().join("copy.sqlite");
        let storage = without_idle_work(&path);
        storage.set_retention(5);
        storage.create_container(&meta()).unwrap();
        // 40 commits over six documents: replaced, deleted, created again.
        let ids = ["a", "b", "c", "d", "e", "f"];
        let mut live = BTreeMap::new();
        for i in 0..40u64 {
            let id = ids[(i * 7 % 11 % 6) as usize];
            let n = (i % 9 != 4 || !live.contains_key(id)).then_some(i + 1);
            match n {
                Some(n) => live.insert(id.to_owned(), n),
                None => live.remove(id),
            };
            storage.commit(write(id, n)).unwrap();
        }
        let full = log_of(&storage);
        assert_eq!(full.len(), 40);
        assert_eq!(storage.last_lsn("c").unwrap(), Lsn(40));
        assert_eq!(storage.last_lsn("none").unwrap(), Lsn::ZERO);
        assert!(full.iter().any(|(_, _, delete)| *delete));
        let sweep_all = |rows: usize| {
            let mut writer = storage.writer.lock();
            let writer = writer.as_mut().unwrap();
            let mut steps = 1;
            while writer.sweep_some(&storage.shared, rows) {
                steps += 1;
            }
            steps
        };
        // Nothing folded yet: nothing is swept (the mark is 0).
        sweep_all(100);
        assert_eq!(log_of(&storage), full);

        storage
            .writer
            .lock()
            .as_mut()
            .unwrap()
            .fold(&storage.shared);
        // The mark is 40, the last five commits stay whole. What the
        // commits and the fold knew to be superseded (versions replaced
        // while pending, deletes folded) is all there is to delete here.
        let swept = swept_log(&full, 35, 40);
        let known = storage
            .writer
            .lock()
            .as_mut()
            .unwrap()
            .sweep_superseded_some(&storage.shared, 1000);
        assert_eq!(known, full.len() - swept.len());
        assert_eq!(log_of(&storage), swept);
        // Sweeping the log itself, a row at a time, finds no more.
        assert!(sweep_all(1) > 1);
        assert!(swept.len() < 15, "{swept:?}");
        assert_eq!(log_of(&storage), swept);
        assert_eq!(
            count(&path, "SELECT COUNT(*) FROM changes"),
            swept.len() as i64
        );
        assert_eq!(loaded(&storage), live);

        // Commits after the fold stay, past the mark, however superseded,
        // and so does the version `docs` holds.
        for n in [100, 101, 102, 103, 104, 105, 106] {
            storage.commit(write("a", Some(n))).unwrap();
        }
        live.insert("a".to_owned(), 106);
        let before = log_of(&storage);
        sweep_all(100);
        assert_eq!(log_of(&storage), swept_log(&before, 40, 40));
        assert_eq!(loaded(&storage), live);

        // A crash now reads back what was pending over what the sweep left,
        // and goes on at the next LSN.
        crash_copy(&path, &copy);
        let crashed = SqliteStorage::open(&copy, Durability::None).unwrap();
        assert_eq!(loaded(&crashed), live);
        assert_eq!(log_of(&crashed), log_of(&storage));
        assert_eq!(crashed.last_lsn("c").unwrap(), Lsn(47));
        assert_eq!(crashed.commit(write("b", Some(200))).unwrap(), Lsn(48));
        drop(crashed);

        // Closed (so folded) and opened again, everything is where it was,
        // and the sweep carries on from where it stopped.
        drop(storage);
        let reopened = SqliteStorage::open(&path, Durability::None).unwrap();
        reopened.set_retention(5);
        assert_eq!(loaded(&reopened), live);
        {
            let mut writer = reopened.writer.lock();
            let writer = writer.as_mut().unwrap();
            while writer.sweep_some(&reopened.shared, 100) {}
        }
        assert_eq!(log_of(&reopened), swept_log(&before, 42, 47));
        assert_eq!(reopened.last_lsn("c").unwrap(), Lsn(47));
        assert_eq!(reopened.commit(write("b", Some(200))).unwrap(), Lsn(48));
    }

    /// A step of [`random_histories_fold_sweep_and_crash_without_losing_a_version`].
    #[derive(Clone, Debug)]
    enum SweepStep {
        /// Write document `id` (one of six), or delete it when it exists
        /// and `delete`.
        Write {
            id: usize,
            delete: bool,
        },
        FoldStep(usize),
        FoldAll,
        SweepKnown(usize),
        SweepLog(usize),
        /// Copy the store as a crash would leave it and read it back.
        Crash,
    }

    fn sweep_steps() -> impl proptest::strategy::Strategy<Value = Vec<SweepStep>> {
        use proptest::prelude::*;
        let step = prop_oneof![
            6 => (0..6usize, any::<bool>()).prop_map(|(id, delete)| SweepStep::Write { id, delete }),
            1 => (1..4usize).prop_map(SweepStep::FoldStep),
            1 => Just(SweepStep::FoldAll),
            1 => (1..6usize).prop_map(SweepStep::SweepKnown),
            1 => (1..6usize).prop_map(SweepStep::SweepLog),
            1 => Just(SweepStep::Crash),
        ];
        proptest::collection::vec(step, 1..60)
    }

    /// Checks, after a step, that `storage` reads back `live`, that its log
    /// is part of `full` and holds the window whole and each live
    /// document's latest version.
    fn check_swept(
        storage: &SqliteStorage,
        live: &BTreeMap<String, u64>,
        full: &[(u64, String, bool)],
        retained: u64,
    ) {
        assert_eq!(loaded(storage), *live);
        let log = log_of(storage);
        let mut rest = full.iter();
        for entry in &log {
            assert!(rest.any(|e| e == entry), "{entry:?} is not in {full:?}");
        }
        let last = full.last().map_or(0, |e| e.0);
        for entry in full {
            let latest = full.iter().rev().find(|e| e.1 == entry.1) == Some(entry);
            if entry.0 + retained > last || (latest && !entry.2) {
                assert!(log.contains(entry), "{entry:?} missing from {log:?}");
            }
        }
        assert_eq!(storage.last_lsn("c").unwrap(), Lsn(last));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: std::env::var("PARTITA_SWEEP_CASES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(16),
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Writes, deletes, steps of folding and of both sweeps and crash
        /// copies in any order: every step reads back what was committed,
        /// the window stays whole, and once closed, opened again and swept
        /// the log is exactly the window and the latest version of each
        /// live document.
        #[test]
        fn random_histories_fold_sweep_and_crash_without_losing_a_version(
            steps in sweep_steps(),
            retained in 1..5u64,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("db.sqlite");
            let copy = dir.path().join("copy.sqlite");
            let storage = SqliteStorage::open_limited(
                &path,
                Durability::None,
                CHECKPOINT_PAGES,
                Some(1 << 20),
            )
            .unwrap();
            storage.set_retention(retained);
            storage.create_container(&meta()).unwrap();
            let ids = ["a", "b", "c", "d", "e", "f"];
            let mut live = BTreeMap::new();
            let mut full: Vec<(u64, String, bool)> = Vec::new();
            for (n, step) in steps.into_iter().enumerate() {
                let n = n as u64 + 1;
                let with_writer = |f: &mut dyn FnMut(&mut Writer)| {
                    f(storage.writer.lock().as_mut().unwrap());
                };
                match step {
                    SweepStep::Write { id, delete } => {
                        let id = ids[id];
                        let delete = delete && live.contains_key(id);
                        let lsn = storage.commit(write(id, (!delete).then_some(n))).unwrap();
                        if delete {
                            live.remove(id);
                        } else {
                            live.insert(id.to_owned(), n);
                        }
                        full.push((lsn.0, id.to_owned(), delete));
                    }
                    SweepStep::FoldStep(k) => with_writer(&mut |w| w.fold_some(&storage.shared, Some(k))),
                    SweepStep::FoldAll => with_writer(&mut |w| w.fold(&storage.shared)),
                    SweepStep::SweepKnown(rows) => with_writer(&mut |w| {
                        w.sweep_superseded_some(&storage.shared, rows);
                    }),
                    SweepStep::SweepLog(rows) => with_writer(&mut |w| {
                        w.sweep_some(&storage.shared, rows);
                    }),
                    SweepStep::Crash => {
                        crash_copy(&path, &copy);
                        let crashed = SqliteStorage::open(&copy, Durability::None).unwrap();
                        assert_eq!(loaded(&crashed), live);
                        assert_eq!(log_of(&crashed), log_of(&storage));
                        let last = full.last().map_or(0, |e| e.0);
                        assert_eq!(crashed.last_lsn("c").unwrap(), Lsn(last));
                    }
                }
                assert!(storage.shared.failed.lock().is_none());
                check_swept(&storage, &live, &full, retained);
            }
            drop(storage);
            let reopened = SqliteStorage::open(&path, Durability::None).unwrap();
            reopened.set_retention(retained);
            {
                let mut writer = reopened.writer.lock();
                let writer = writer.as_mut().unwrap();
                while writer.sweep_idle(&reopened.shared) {}
            }
            let last = full.last().map_or(0, |e| e.0);
            assert_eq!(loaded(&reopened), live);
            assert_eq!(
                log_of(&reopened),
                swept_log(&full, last.saturating_sub(retained), last)
            );
        }
    }

    #[test]
    fn a_log_rewriting_a_few_documents_is_folded_and_swept_as_it_grows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let storage =
            SqliteStorage::open_limited(&path, Durability::None, CHECKPOINT_PAGES, Some(1 << 20))
                .unwrap();
        storage.create_container(&meta()).unwrap();
        // Two documents, rewritten: never MAX_PENDING of them pending.
        let commits = 4 * MAX_UNFOLDED_COMMITS;
        for n in 1..=commits {
            let id = if n % 2 == 0 { "a" } else { "b" };
            storage.commit(write(id, Some(n))).unwrap();
        }
        // The mark moved as the log grew past it, and the committer swept
        // behind it as it went: what stays is at most the window, what the
        // last move of the mark left to sweep, and a sweep's worth.
        let mark = count(&path, "SELECT lsn FROM folded WHERE container = 'c'") as u64;
        assert!(mark >= commits - MAX_UNFOLDED_COMMITS, "{mark}");
        let rows = count(&path, "SELECT COUNT(*) FROM changes") as u64;
        let most = super::super::RETAINED_COMMITS + MAX_UNFOLDED_COMMITS + 2 * SWEEP_EVERY;
        assert!(rows <= most, "{rows} rows after {commits} commits");
        {
            let mut writer = storage.writer.lock();
            let writer = writer.as_mut().unwrap();
            while writer.sweep_some(&storage.shared, SWEEP_STEP) {}
        }
        // What stays: the last RETAINED_COMMITS commits, nothing before.
        let log = log_of(&storage);
        assert_eq!(log.len() as u64, super::super::RETAINED_COMMITS);
        assert_eq!(log[0].0, commits - super::super::RETAINED_COMMITS + 1);
        let expected = BTreeMap::from([
            ("a".to_owned(), commits - commits % 2),
            ("b".to_owned(), commits - 1 + commits % 2),
        ]);
        assert_eq!(loaded(&storage), expected);
    }

    #[test]
    fn a_step_of_folding_writes_the_oldest_and_a_crash_replays_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let copy = dir.path().join("copy.sqlite");
        let storage = without_idle_work(&path);
        storage.create_container(&meta()).unwrap();
        // LSNs 1–6; pending then: b at 2, a at 3, c at 4, d at 5, e deleted at 6.
        for (id, n) in [
            ("a", Some(1)),
            ("b", Some(1)),
            ("a", Some(2)),
            ("c", Some(1)),
            ("d", Some(1)),
            ("e", None),
        ] {
            storage.commit(write(id, n)).unwrap();
        }
        let step = |n: usize| {
            let mut writer = storage.writer.lock();
            let writer = writer.as_mut().unwrap();
            writer.fold_some(&storage.shared, Some(n));
            writer.pending.read().len()
        };
        // The two oldest (b, then a's latest at 3) and the mark at 3.
        assert_eq!(step(2), 3);
        assert_eq!(count(&path, "SELECT COUNT(*) FROM docs"), 2);
        assert_eq!(
            count(&path, "SELECT lsn FROM folded WHERE container = 'c'"),
            3
        );
        let expected = BTreeMap::from([
            ("a".to_owned(), 2),
            ("b".to_owned(), 1),
            ("c".to_owned(), 1),
            ("d".to_owned(), 1),
        ]);
        assert_eq!(loaded(&storage), expected);
        // A crash now: the log past the mark holds the rest.
        crash_copy(&path, &copy);
        let crashed = SqliteStorage::open(&copy, Durability::None).unwrap();
        assert_eq!(loaded(&crashed), expected);
        drop(crashed);
        // The next step takes the rest, the delete included.
        assert_eq!(step(10), 0);
        assert_eq!(count(&path, "SELECT COUNT(*) FROM docs"), 4);
        assert_eq!(
            count(&path, "SELECT lsn FROM folded WHERE container = 'c'"),
            6
        );
        assert_eq!(loaded(&storage), expected);
    }

    #[test]
    fn a_document_created_again_hides_its_folded_version_from_reads_by_rid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let storage = without_idle_work(&path);
        storage.create_container(&meta()).unwrap();
        let at = |rid: u64, n: Option<u64>| {
            let mut r = write("a", n);
            r.changes[0].rid = rid;
            r
        };
        storage.commit(at(500, Some(1))).unwrap();
        storage
            .writer
            .lock()
            .as_mut()
            .unwrap()
            .fold(&storage.shared);
        // Deleted and created again, both pending: `docs` still holds rid 500.
        storage.commit(at(500, None)).unwrap();
        storage.commit(at(600, Some(2))).unwrap();
        let key = PartitionKey::from("a");
        let read = |rids: &[u64]| -> Vec<(u64, u64)> {
            storage
                .read_documents("c", &key, rids)
                .unwrap()
                .iter()
                .map(|d| (d.rid, d.document.value()["n"].as_u64().unwrap()))
                .collect()
        };
        assert_eq!(read(&[500]), []);
        assert_eq!(read(&[600]), [(600, 2)]);
        assert_eq!(read(&[500, 600]), [(600, 2)]);
        // A step whose mark passes the delete (b, written after it, is
        // older than a's latest change): a crash then replays only a's
        // latest change, and opening finds rid 500 in `docs` and keeps it
        // as the shadow of the pending version.
        let mut b = write("b", Some(1));
        b.changes[0].rid = 700;
        storage.commit(b).unwrap();
        storage.commit(at(600, Some(3))).unwrap();
        storage
            .writer
            .lock()
            .as_mut()
            .unwrap()
            .fold_some(&storage.shared, Some(1));
        let copy = dir.path().join("copy.sqlite");
        crash_copy(&path, &copy);
        let crashed = SqliteStorage::open(&copy, Durability::None).unwrap();
        let defined = IndexTerm {
            path: vec![range_index::Step::Label("n".to_owned())],
            accept: Accept::Range(Bound::Unbounded, Bound::Unbounded),
        };
        for storage in [&storage, &crashed] {
            let named = storage
                .index_candidates("c", std::slice::from_ref(&defined))
                .unwrap()
                .unwrap();
            let rids: Vec<u64> = named.iter().map(|(_, rid)| *rid).collect();
            assert_eq!(rids, [600, 700]);
        }
    }

    /// The rids the range index names for documents with an `n`, once
    /// the committer has built it (a minute at most).
    fn rids_with_n(storage: &SqliteStorage) -> Vec<u64> {
        let defined = IndexTerm {
            path: vec![range_index::Step::Label("n".to_owned())],
            accept: Accept::Range(Bound::Unbounded, Bound::Unbounded),
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let named = storage
                .index_candidates("c", std::slice::from_ref(&defined))
                .unwrap();
            if let Some(named) = named {
                return named.iter().map(|(_, rid)| *rid).collect();
            }
            assert!(std::time::Instant::now() < deadline, "never built");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A store at `path` whose container `c` holds documents a and b.
    fn with_a_and_b(path: &Path) -> SqliteStorage {
        let storage = SqliteStorage::open(path, Durability::Full).unwrap();
        storage.create_container(&meta()).unwrap();
        storage.commit(write("a", Some(1))).unwrap();
        storage.commit(write("b", Some(2))).unwrap();
        storage
    }

    #[test]
    fn entries_name_their_path_by_key_and_go_with_their_container() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let storage = with_a_and_b(&path);
        let fold = || {
            storage
                .writer
                .lock()
                .as_mut()
                .unwrap()
                .fold(&storage.shared)
        };
        fold();
        assert_eq!(rids_with_n(&storage), [u64::from(b'a'), u64::from(b'b')]);
        storage.commit(write("b", None)).unwrap();
        fold();
        assert_eq!(rids_with_n(&storage), [u64::from(b'a')]);
        // One key per path of container `c`, and every entry names one.
        let paths = count(
            &path,
            "SELECT COUNT(*) FROM idx_paths WHERE container = 'c'",
        );
        assert!(paths >= 3, "id, _ts and n at least: {paths}");
        assert_eq!(
            count(
                &path,
                "SELECT COUNT(*) FROM idx WHERE key NOT IN (SELECT key FROM idx_paths)"
            ),
            0
        );
        // The partition key "a" is held bare.
        assert_eq!(
            count(
                &path,
                "SELECT COUNT(*) = COUNT(*) FILTER (WHERE pk = 'a') FROM idx"
            ),
            1
        );
        // The fold deleted b's entries: only a's are left.
        assert_eq!(count(&path, "SELECT COUNT(DISTINCT rid) FROM idx"), 1);
        // A new policy empties the index; deleting the container its keys.
        let mut none = meta();
        none.indexing_policy.indexing_mode = IndexingMode::None;
        storage.update_container(&none).unwrap();
        assert_eq!(count(&path, "SELECT COUNT(*) FROM idx"), 0);
        assert_eq!(count(&path, "SELECT COUNT(*) FROM idx_paths"), 0);
        storage.update_container(&meta()).unwrap();
        assert_eq!(rids_with_n(&storage), [u64::from(b'a')]);
        assert!(count(&path, "SELECT COUNT(*) FROM idx") > 0);
        storage.delete_container("c").unwrap();
        assert_eq!(count(&path, "SELECT COUNT(*) FROM idx"), 0);
        assert_eq!(count(&path, "SELECT COUNT(*) FROM idx_paths"), 0);
    }

    #[test]
    fn an_entry_holds_a_string_partition_key_bare_and_any_other_as_stored() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (pk)").unwrap();
        for key in [
            serde_json::json!(["a"]),
            serde_json::json!([""]),
            serde_json::json!(["é ü 🎉"]),
            serde_json::json!(["say \"hi\""]),
            serde_json::json!(["back\\slash"]),
            serde_json::json!(["line\nbreak"]),
            serde_json::json!([5]),
            serde_json::json!(["a", "b"]),
            serde_json::json!([null]),
            serde_json::json!([{}]),
        ] {
            let stored = key.to_string();
            conn.execute("DELETE FROM t", []).unwrap();
            conn.execute("INSERT INTO t VALUES (?1)", params![EntryPk::of(&stored)])
                .unwrap();
            let (back, kind): (String, String) = conn
                .query_row("SELECT pk, typeof(pk) FROM t", [], |row| {
                    Ok((EntryPk::stored(row.get_ref(0)?)?, row.get(1)?))
                })
                .unwrap();
            assert_eq!(back, stored);
            let bare = key.as_array().unwrap().len() == 1
                && key[0]
                    .as_str()
                    .is_some_and(|s| !s.contains(['"', '\\', '\n']));
            assert_eq!(kind, if bare { "text" } else { "blob" }, "{stored}");
            // The query parameter finds the row.
            let found: i64 = conn
                .query_row(
                    "SELECT COUNT(*) FROM t WHERE pk = ?1",
                    params![EntryPk::of(&stored).value()],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(found, 1, "{stored}");
        }
    }

    #[test]
    fn a_store_with_entries_of_format_4_indexes_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let storage = with_a_and_b(&path);
        drop(storage);
        // Format 4's layout, with an entry the documents do not have.
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                r#"
                DROP TABLE idx; DROP TABLE idx_paths;
                CREATE TABLE idx (container TEXT NOT NULL, path TEXT NOT NULL, value BLOB NOT NULL, pk TEXT NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY (container, path, value, pk, rid)) WITHOUT ROWID;
                INSERT INTO idx VALUES ('c', '/n', x'04', '["a"]', 999);
                UPDATE idx_format SET version = 4;
                "#,
            )
            .unwrap();
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        assert_eq!(storage.load().unwrap().len(), 1);
        assert_eq!(rids_with_n(&storage), [u64::from(b'a'), u64::from(b'b')]);
        assert_eq!(
            count(
                &path,
                "SELECT COUNT(*) FROM pragma_table_info('idx') WHERE name = 'key'"
            ),
            1
        );
        assert_eq!(count(&path, "SELECT version FROM idx_format"), INDEX_FORMAT);
        assert_eq!(count(&path, "SELECT COUNT(*) FROM idx WHERE rid = 999"), 0);
    }

    #[test]
    fn ranges_and_equalities_filter_candidates_alike_folded_or_pending() {
        use crate::range_index::Comparison;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        storage.create_container(&meta()).unwrap();
        let put = |i: u64| {
            let mut r = record(&format!("d{i}"));
            let change = &mut r.changes[0];
            change.rid = 1000 + i;
            change.seq = i + 1;
            let mut value = serde_json::json!({
                "id": format!("d{i}"), "pk": "a", "g": i % 4, "n": i, "tags": [i, i + 100],
            });
            Stamp::of(&meta()).apply(&mut value, change.rid, change.seq, 1_700_000_000);
            let doc = Document::new(value);
            change.text = Some(Arc::from(doc.value().to_string()));
            change.document = Some(doc);
            storage.commit(r).unwrap();
        };
        // A hundred documents folded into `idx`, ten pending.
        (0..100).for_each(put);
        storage
            .writer
            .lock()
            .as_mut()
            .unwrap()
            .fold(&storage.shared);
        (100..110).for_each(put);
        let label = |name: &str| range_index::Step::Label(name.to_owned());
        let g1 = IndexTerm::equal(vec![label("g")], &serde_json::json!(1)).unwrap();
        let n_from_10 = IndexTerm::compare(
            vec![label("n")],
            Comparison::AtLeast,
            &serde_json::json!(10),
        )
        .unwrap();
        let n_below_35 =
            IndexTerm::compare(vec![label("n")], Comparison::Less, &serde_json::json!(35)).unwrap();
        let tag_from_125 = IndexTerm::compare(
            vec![label("tags"), range_index::Step::Elements],
            Comparison::AtLeast,
            &serde_json::json!(125),
        )
        .unwrap();
        let named = |terms: &[IndexTerm]| -> Vec<u64> {
            let found = storage.index_candidates("c", terms).unwrap().unwrap();
            let mut rids: Vec<u64> = found.iter().map(|(_, rid)| rid - 1000).collect();
            rids.sort();
            rids
        };
        let expect =
            |keep: &dyn Fn(u64) -> bool| -> Vec<u64> { (0..110).filter(|&i| keep(i)).collect() };
        assert_eq!(
            named(&[g1.clone(), n_from_10.clone()]),
            expect(&|i| i % 4 == 1 && i >= 10)
        );
        assert_eq!(
            named(&[n_from_10.clone(), g1.clone(), n_below_35.clone()]),
            expect(&|i| i % 4 == 1 && (10..35).contains(&i))
        );
        // A document with two entries at the path (an array) is kept once.
        assert_eq!(
            named(&[g1, tag_from_125.clone()]),
            expect(&|i| i % 4 == 1 && i + 100 >= 125)
        );
        assert_eq!(
            named(&[n_below_35, tag_from_125.clone()]),
            expect(&|i| (25..35).contains(&i))
        );
        // One candidate, a range of 75 or 200 folded entries: its document
        // answers, folded (d26, d12) or pending (d106).
        let n_is = |n: u64| IndexTerm::equal(vec![label("n")], &serde_json::json!(n)).unwrap();
        let any_tag = IndexTerm::defined(vec![label("tags"), range_index::Step::Elements]).unwrap();
        for (n, range, hit) in [
            (26, &tag_from_125, true),
            (12, &tag_from_125, false),
            (12, &any_tag, true),
            (106, &tag_from_125, true),
        ] {
            let expected: Vec<u64> = if hit { vec![n] } else { vec![] };
            assert_eq!(named(&[n_is(n), range.clone()]), expected, "n = {n}");
            // The same in the one partition.
            let within: Vec<u64> = storage
                .index_candidates_in("c", &PartitionKey::from("a"), &[n_is(n), range.clone()])
                .unwrap()
                .unwrap()
                .iter()
                .map(|rid| rid - 1000)
                .collect();
            assert_eq!(within, expected, "n = {n}, in partition a");
        }
    }

    /// One step of [`steps_of_folding_and_crashes_keep_every_document`].
    #[derive(Clone, Debug)]
    enum FoldOp {
        /// Writes document `id` of container `c` or `d` (`n`, or a delete).
        Write(bool, char, Option<u64>),
        /// Folds about this many of the oldest pending documents.
        Step(usize),
        /// Copies the files as a crash would leave them and reopens them.
        Crash,
    }

    fn fold_op() -> impl proptest::strategy::Strategy<Value = FoldOp> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (any::<bool>(), proptest::char::range('a', 'e'), proptest::option::weighted(0.8, 1..100u64))
                .prop_map(|(d, id, n)| FoldOp::Write(d, id, n)),
            2 => (1..5usize).prop_map(FoldOp::Step),
            1 => Just(FoldOp::Crash),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// Folds of a few documents at a time, in two containers, with
        /// crashes between them: every crash copy reopens with exactly the
        /// documents written, whatever the marks say, and the range index
        /// (folded entries and pending documents) names exactly them.
        #[test]
        fn steps_of_folding_and_crashes_keep_every_document(
            ops in proptest::collection::vec(fold_op(), 1..40)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("db.sqlite");
            let storage = without_idle_work(&path);
            storage.create_container(&meta()).unwrap();
            storage.create_container(&ContainerMeta::for_tests("d")).unwrap();
            // (container, id) → (rid, n): a document created again after
            // a delete has a new rid, as the engine gives it.
            let mut model: BTreeMap<(&str, String), (u64, u64)> = BTreeMap::new();
            let mut next_rid = 1_000;
            let state = |storage: &SqliteStorage, container: &'static str| {
                storage
                    .read_partition(container, &PartitionKey::from("a"))
                    .unwrap()
                    .iter()
                    .map(|d| {
                        let v = d.document.value();
                        let n = v["n"].as_u64().unwrap_or(0);
                        ((container, d.document.id().to_owned()), (d.rid, n))
                    })
                    .collect::<BTreeMap<_, _>>()
            };
            // What the range index names for `IS_DEFINED(c.n)`.
            let defined = IndexTerm {
                path: vec![range_index::Step::Label("n".to_owned())],
                accept: Accept::Range(Bound::Unbounded, Bound::Unbounded),
            };
            let both = |storage: &SqliteStorage| {
                let mut all = state(storage, "c");
                all.extend(state(storage, "d"));
                let mut named = BTreeSet::new();
                for container in ["c", "d"] {
                    let candidates = storage
                        .index_candidates(container, std::slice::from_ref(&defined))
                        .unwrap()
                        .expect("the index is ready");
                    let mut rids: Vec<u64> = candidates.iter().map(|(_, rid)| *rid).collect();
                    named.extend(candidates.into_iter().map(|(_, rid)| (container, rid)));
                    // Reading what it names finds the documents, as they are.
                    rids.sort_unstable();
                    let read: BTreeMap<_, _> = storage
                        .read_documents(container, &PartitionKey::from("a"), &rids)
                        .unwrap()
                        .iter()
                        .map(|d| {
                            let n = d.document.value()["n"].as_u64().unwrap_or(0);
                            ((container, d.document.id().to_owned()), (d.rid, n))
                        })
                        .collect();
                    let of_container = state(storage, container);
                    assert_eq!(read, of_container);
                }
                let rids = all.iter().map(|((c, _), (rid, _))| (*c, *rid));
                assert_eq!(named, rids.collect::<BTreeSet<_>>());
                all
            };
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    FoldOp::Write(in_d, id, n) => {
                        let container = if in_d { "d" } else { "c" };
                        let id = id.to_string();
                        let key = (container, id.clone());
                        let rid = match model.get(&key) {
                            Some((rid, _)) => *rid,
                            None => {
                                next_rid += 1;
                                next_rid
                            }
                        };
                        let mut r = write(&id, n);
                        r.container = Arc::from(container);
                        r.changes[0].rid = rid;
                        storage.commit(r).unwrap();
                        match n {
                            Some(n) => model.insert(key, (rid, n)),
                            None => model.remove(&key),
                        };
                    }
                    FoldOp::Step(n) => {
                        let mut writer = storage.writer.lock();
                        writer.as_mut().unwrap().fold_some(&storage.shared, Some(n));
                    }
                    FoldOp::Crash => {
                        let copy = dir.path().join(format!("crash{i}.sqlite"));
                        crash_copy(&path, &copy);
                        let crashed = SqliteStorage::open(&copy, Durability::None).unwrap();
                        proptest::prop_assert_eq!(&both(&crashed), &model);
                    }
                }
                proptest::prop_assert_eq!(&both(&storage), &model);
            }
            drop(storage);
            let reopened = SqliteStorage::open(&path, Durability::None).unwrap();
            proptest::prop_assert_eq!(&both(&reopened), &model);
        }
    }

    /// What is pending, as comparable values: each document's key, rid,
    /// log row, shadow and text, and the order by log row.
    #[allow(clippy::type_complexity)]
    fn pending_state(
        storage: &SqliteStorage,
    ) -> (
        BTreeMap<(String, String, String), (u64, u64, u32, Option<u64>, Option<String>)>,
        Vec<((String, u64, u32), String)>,
    ) {
        let pending = storage.pending.read();
        let docs = pending
            .docs
            .iter()
            .map(|((container, pk, id), doc)| {
                let text = doc.document.as_ref().map(|(d, _)| d.value().to_string());
                (
                    (container.to_string(), pk.clone(), id.to_string()),
                    (doc.rid, doc.lsn, doc.idx, doc.shadows, text),
                )
            })
            .collect();
        let by_lsn = pending
            .by_lsn
            .iter()
            .map(|((container, lsn, idx), (_, _, id))| {
                ((container.to_string(), *lsn, *idx), id.to_string())
            })
            .collect();
        (docs, by_lsn)
    }

    #[test]
    fn a_crash_with_thousands_pending_reads_back_what_the_commits_left() {
        // Enough documents that reopening parses them on several threads.
        const IDS: u64 = 2_500;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let copy = dir.path().join("copy.sqlite");
        let storage = without_idle_work(&path);
        storage.create_container(&meta()).unwrap();
        storage
            .create_container(&ContainerMeta::for_tests("d"))
            .unwrap();
        let commit = |container: &str, id: u64, n: Option<u64>, rid: u64| {
            let mut r = write(&format!("x{id}"), n);
            r.container = Arc::from(container);
            r.changes[0].rid = rid;
            storage.commit(r).unwrap();
        };
        // A third of them folded, then every one written once or more
        // after the mark: replaced, deleted, deleted and created again
        // with a new rid (a shadow of the folded version), or new.
        for id in 0..IDS / 3 {
            commit("c", id, Some(1), id + 1);
        }
        storage
            .writer
            .lock()
            .as_mut()
            .unwrap()
            .fold_some(&storage.shared, None);
        assert!(storage.pending.read().is_empty());
        for id in 0..IDS {
            let container = if id % 5 == 4 { "d" } else { "c" };
            match id % 4 {
                0 => commit(container, id, Some(2), id + 1),
                1 => commit(container, id, None, id + 1),
                2 => {
                    commit(container, id, None, id + 1);
                    commit(container, id, Some(3), id + 1 + IDS);
                }
                _ => {
                    commit(container, id, Some(4), id + 1);
                    commit(container, id, Some(5), id + 1);
                }
            }
        }
        let live = pending_state(&storage);
        assert_eq!(live.0.len(), IDS as usize);
        assert!(
            live.0
                .values()
                .any(|(_, _, _, shadows, _)| shadows.is_some())
        );
        crash_copy(&path, &copy);
        let crashed =
            SqliteStorage::open_limited(&copy, Durability::Full, CHECKPOINT_PAGES, Some(1 << 20))
                .unwrap();
        assert_eq!(pending_state(&crashed), live);
        drop(crashed);

        // A body that is not JSON fails the open and names its log row,
        // whichever thread parses it.
        crash_copy(&path, &copy);
        let conn = Connection::open(&copy).unwrap();
        let lsn: i64 = conn
            .query_row(
                "SELECT MAX(lsn) FROM changes WHERE container = 'c' AND body IS NOT NULL",
                [],
                |row| row.get(0),
            )
            .unwrap();
        conn.execute(
            "UPDATE changes SET body = X'7B7B' WHERE container = 'c' AND lsn = ?1",
            [lsn],
        )
        .unwrap();
        drop(conn);
        let err = SqliteStorage::open(&copy, Durability::None).err().unwrap();
        assert!(
            err.to_string()
                .contains(&format!("corrupt change log entry {lsn} of \"c\"")),
            "{err}"
        );
    }

    #[test]
    fn what_is_pending_stays_readable_after_a_failed_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let storage =
            SqliteStorage::open_limited(&path, Durability::Full, CHECKPOINT_PAGES, Some(40))
                .unwrap();
        storage.create_container(&meta()).unwrap();
        let pad = "x".repeat(3_000);
        let mut acked = Vec::new();
        for i in 0..1_000 {
            let id = format!("d{i}");
            let mut r = record(&id);
            let doc = Document::new(serde_json::json!({"id": id, "pk": "a", "pad": pad}));
            r.changes[0].text = Some(Arc::from(doc.value().to_string()));
            r.changes[0].document = Some(doc);
            match storage.commit(r) {
                Ok(_) => acked.push(id),
                Err(_) => break,
            }
        }
        assert!(
            storage.commit(record("after")).is_err(),
            "the disk never filled"
        );
        // Nothing was folded: every acknowledged document is pending, and
        // the failure kept them (docs lacks them until a restart replays).
        assert_eq!(count(&path, "SELECT COUNT(*) FROM docs"), 0);
        let key = PartitionKey::from("a");
        let mut read: Vec<String> = storage
            .read_partition("c", &key)
            .unwrap()
            .into_iter()
            .map(|d| d.document.id().to_owned())
            .collect();
        read.sort();
        acked.sort();
        assert_eq!(read, acked);
        assert_eq!(
            storage.partition_keys("c").unwrap(),
            std::slice::from_ref(&key)
        );
        assert!(storage.read_document("c", &key, "d0").unwrap().is_some());
        assert!(storage.read_document("c", &key, "after").unwrap().is_none());
    }

    #[test]
    fn documents_named_by_rid_are_looked_up_not_scanned_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        storage.create_container(&meta()).unwrap();
        storage.commit(record("a")).unwrap();
        let key = PartitionKey::from("a");
        let read = |storage: &SqliteStorage| {
            let docs = storage.read_documents("c", &key, &[1]).unwrap();
            docs.iter().map(|d| d.rid).collect::<Vec<_>>()
        };
        assert_eq!(read(&storage), [1]);
        let plan: Vec<String> = {
            let reader = storage.reader.lock();
            let mut stmt = reader
                .prepare(&format!(
                    "EXPLAIN QUERY PLAN {}",
                    partition_read_sql(true, " AND d.rid IN (?3)")
                ))
                .unwrap();
            stmt.query_map(rusqlite::params!["c", "[\"a\"]", 1], |row| row.get(3))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        assert!(
            plan[0].contains("docs_by_rid (container=? AND pk=? AND rid=?)"),
            "{plan:?}"
        );
        drop(storage);
        // A store from before the index, opened read-only, reads by
        // scanning its partition, as it did.
        Connection::open(&path)
            .unwrap()
            .execute_batch("DROP INDEX docs_by_rid")
            .unwrap();
        let old = SqliteStorage::open_read_only(&path, "a test".into()).unwrap();
        assert!(!old.rid_index);
        assert_eq!(read(&old), [1]);
    }

    #[test]
    fn a_failed_batch_makes_the_committer_refuse_everything_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        let meta = meta();
        storage.create_container(&meta).unwrap();
        assert_eq!(storage.commit(record("a")).unwrap(), Lsn(1));
        // Break the schema behind the storage's back: the next batch fails.
        Connection::open(&path)
            .unwrap()
            .execute_batch("DROP TABLE changes")
            .unwrap();
        let failed = storage.commit(record("b")).unwrap_err();
        assert!(matches!(failed, Error::Storage(_)), "{failed}");
        // Repairing the table does not help: the store never retries.
        Connection::open(&path)
            .unwrap()
            .execute_batch(SCHEMA)
            .unwrap();
        let refused = storage.commit(record("c")).unwrap_err();
        assert!(matches!(refused, Error::ReadOnly(_)), "{refused}");
        assert!(storage.create_container(&meta).is_err());
    }

    #[test]
    fn the_log_keeps_zeros_ahead_of_its_end_and_a_crash_recovers_up_to_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        storage.create_container(&meta()).unwrap();
        for i in 0..200 {
            storage.commit(record(&format!("d{i}"))).unwrap();
        }
        let wal = std::fs::read(format!("{}-wal", path.display())).unwrap();
        let tail = &wal[wal.len() - LOG_PAD / 2..];
        assert!(
            tail.iter().all(|&b| b == 0),
            "the last {} bytes of the {}-byte log are not all zeros",
            LOG_PAD / 2,
            wal.len()
        );
        let crashed = dir.path().join("crashed.sqlite");
        crash_copy(&path, &crashed);
        drop(storage);
        let reopened = SqliteStorage::open(&crashed, Durability::Full).unwrap();
        assert_eq!(documents(&reopened).len(), 200);
        assert_eq!(reopened.commit(record("after")).unwrap(), Lsn(201));
    }

    #[test]
    fn the_log_pad_remembers_the_length_and_never_writes_over_frames_past_it() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let frame = FRAME_HEADER + 4096;
        let frames_in = |bytes: u64| i64::try_from((bytes - WAL_HEADER) / frame).unwrap();
        std::fs::write(&path, vec![7u8; (WAL_HEADER + 2 * frame) as usize]).unwrap();
        let mut pad = LogPad::new(path.clone(), 4096);
        pad.keep_ahead(2);
        let padded = WAL_HEADER + 2 * frame + LOG_PAD as u64;
        assert_eq!(std::fs::metadata(&path).unwrap().len(), padded);
        assert_eq!(pad.len, Some(padded));
        // Frames within the zeros change nothing it remembers.
        pad.keep_ahead(3);
        assert_eq!(pad.len, Some(padded));
        // A batch larger than the zeros extends the file past them: the
        // pad asks for the length again and writes after the new frames.
        let past = padded + 3 * frame;
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(&vec![9u8; (past - padded) as usize], padded)
            .unwrap();
        pad.keep_ahead(frames_in(past));
        let log = std::fs::read(&path).unwrap();
        assert_eq!(log.len() as u64, past + LOG_PAD as u64);
        assert!(log[padded as usize..past as usize].iter().all(|&b| b == 9));
        assert!(log[past as usize..].iter().all(|&b| b == 0));
        assert_eq!(pad.len, Some(past + LOG_PAD as u64));
    }

    #[test]
    fn checkpoints_run_beside_the_writers_and_the_log_still_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let storage = SqliteStorage::open_with(&path, Durability::Full, 100).unwrap();
        storage.create_container(&meta()).unwrap();
        // Four writers keep the log growing while the checkpointer copies
        // it, so a round alone seldom leaves it empty: without the
        // committer's last step, two restarts took 3,000–6,000 commits
        // here, and with it 120–150. Counted after every commit: (frames
        // in the log, restarts after a round, commits).
        let seen = Mutex::new((0, 0, 0));
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        storage.commit(record(&format!("d{i}"))).unwrap();
                        let (pages, rounds) = {
                            let writer = storage.writer.lock();
                            let writer = writer.as_ref().unwrap();
                            let rounds = writer.checkpointer.as_ref().unwrap().rounds;
                            (writer.wal_pages.load(Ordering::Relaxed), rounds)
                        };
                        let mut seen = seen.lock();
                        if pages < seen.0 && rounds > 0 {
                            seen.1 += 1;
                        }
                        seen.0 = pages;
                        seen.2 += 1;
                        if seen.1 >= 2 || seen.2 >= 2_000 {
                            return;
                        }
                    }
                });
            }
        });
        let (frames, restarts, commits) = *seen.lock();
        assert!(
            restarts >= 2,
            "the log never restarted: {frames} frames after {commits} commits"
        );
        drop(storage);
        let reopened = SqliteStorage::open(&path, Durability::Full).unwrap();
        assert_eq!(documents(&reopened).len(), next.into_inner());
    }

    #[test]
    fn change_log_survives_reopen_and_continues_its_lsns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let meta = meta();
        {
            let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
            storage.create_container(&meta).unwrap();
            storage.commit(record("a")).unwrap();
            storage.commit(record("b")).unwrap();
        }
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        let loaded = storage.load().unwrap();
        assert_eq!(loaded.len(), 1);
        assert_eq!(documents(&storage).len(), 2);
        assert_eq!(storage.commit(record("c")).unwrap(), Lsn(3));
        let ids: Vec<String> = storage
            .read_changes("c", Lsn(1), 10)
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(ids, ["b", "c"]);
    }

    #[test]
    fn a_deleted_container_starts_over_even_inside_one_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let meta = meta();
        let mut conn = Connection::open(&path).unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        let (reply, _) = mpsc::sync_channel(1);
        let (meta_reply, _) = mpsc::sync_channel(1);
        let batch = vec![
            Request::Meta(
                MetaOp::CreateContainer(Box::new(meta.clone())),
                meta_reply.clone(),
            ),
            Request::Commit(record("a"), reply.clone()),
            Request::Commit(record("b"), reply.clone()),
            Request::Meta(MetaOp::DeleteContainer("c".into()), meta_reply.clone()),
            Request::Meta(MetaOp::CreateContainer(Box::new(meta)), meta_reply),
            Request::Commit(record("new"), reply),
        ];
        let pending = RwLock::new(PendingDocs::default());
        let lsns = write_batch(
            &mut conn,
            &batch,
            &HashMap::new(),
            &pending,
            &mut HashMap::new(),
            &RwLock::default(),
            &RwLock::default(),
        )
        .unwrap();
        assert_eq!(
            lsns,
            [Lsn::ZERO, Lsn(1), Lsn(2), Lsn::ZERO, Lsn::ZERO, Lsn(1)]
        );
        drop(conn);
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        let loaded = storage.load().unwrap();
        assert_eq!(loaded.len(), 1);
        let docs = documents(&storage);
        let ids: Vec<&str> = docs.iter().map(|d| d.document.id()).collect();
        assert_eq!(ids, ["new"]);
        assert_eq!(storage.read_changes("c", Lsn::ZERO, 10).unwrap().len(), 1);
        // Across batches: the committer forgets the deleted container's LSNs.
        storage.delete_container("c").unwrap();
        assert!(storage.load().unwrap().is_empty());
        assert_eq!(storage.commit(record("again")).unwrap(), Lsn(1));
    }

    #[test]
    fn file_uris_escape_what_a_uri_gives_meaning_to() {
        assert_eq!(
            file_uri(Path::new("/a b/c?d#e%f.sqlite"), "immutable=1"),
            "file:/a%20b/c%3Fd%23e%25f.sqlite?immutable=1"
        );
    }

    #[test]
    fn a_store_on_a_full_disk_opens_read_only_with_its_log() {
        let tmp = tempfile::tempdir().unwrap();
        let live = tmp.path().join("live.sqlite");
        // A directory name with characters a URI escapes.
        let dir = tmp.path().join("data ?#%");
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("db.sqlite");
        let storage = SqliteStorage::open(&live, Durability::Full).unwrap();
        history(&storage);
        // A document over a page, and documents whose keys fill pages of
        // docs: folding them needs new pages (`docs` rows point at the log
        // rows holding the bodies, so the keys are what a fold writes).
        let mut big = write("big", Some(9));
        let doc = Document::new(
            serde_json::json!({"id": "big", "pk": "a", "n": 9, "pad": "x".repeat(20_000), "_etag": "\"1\"", "_ts": 1}),
        );
        big.changes[0].text = Some(Arc::from(doc.value().to_string()));
        big.changes[0].document = Some(doc);
        storage.commit(big).unwrap();
        let mut state = history_state();
        state.insert("big".to_owned(), 9);
        let long_ids = 30;
        for i in 0..long_ids {
            let id = format!("long{i}-{}", "x".repeat(300));
            storage.commit(write(&id, Some(i))).unwrap();
            state.insert(id, i);
        }
        let logged = 7 + long_ids as usize;
        // A crash: every commit is in the log, none folded into docs.
        crash_copy(&live, &path);
        // On a full disk: no room for the write at open.
        let storage = SqliteStorage::open_limited(&path, Durability::Full, 100, Some(1)).unwrap();
        let reason = storage.read_only().expect("read-only");
        assert!(
            reason.starts_with(&format!(
                "the store at {} is read-only: the disk is full",
                dir.display()
            )),
            "{reason}"
        );
        assert_eq!(loaded(&storage), state);
        assert!(
            matches!(storage.commit(write("d", Some(1))), Err(Error::ReadOnly(r)) if r == reason)
        );
        assert!(matches!(
            storage.create_container(&meta()),
            Err(Error::ReadOnly(_))
        ));
        assert_eq!(
            storage.read_changes("c", Lsn::ZERO, 100).unwrap().len(),
            logged
        );
        drop(storage);
        // With space: writable, nothing lost, the log continues.
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        assert_eq!(storage.read_only(), None);
        assert_eq!(loaded(&storage), state);
        assert_eq!(
            storage.commit(write("d", Some(1))).unwrap(),
            Lsn(logged as u64 + 1)
        );
    }

    fn meta() -> ContainerMeta {
        ContainerMeta::for_tests("c")
    }

    /// A commit of `id` with body `n`, or its delete. The document is
    /// stamped as the engine stamps it, so storage keeps it without its
    /// system properties, except `c`'s, which has a member after them (as
    /// a script that adds one to a document it read writes it).
    fn write(id: &str, n: Option<u64>) -> CommitRecord {
        let mut r = record(id);
        let change = &mut r.changes[0];
        match n {
            Some(n) => {
                change.rid = u64::from(id.as_bytes()[0]);
                change.seq = 10 * n + change.rid;
                let mut value = serde_json::json!({"id": id, "pk": "a", "n": n});
                Stamp::of(&meta()).apply(&mut value, change.rid, change.seq, 1_700_000_000 + n);
                if id == "c" {
                    value["z"] = serde_json::json!("after _ts");
                }
                let doc = Document::new(value);
                change.kind = ChangeKind::Replace;
                change.text = Some(Arc::from(doc.value().to_string()));
                change.document = Some(doc);
            }
            None => {
                change.kind = ChangeKind::Delete;
                change.text = None;
                change.document = None;
            }
        }
        r
    }

    /// Every document of the container `c`, partition by partition.
    fn documents(storage: &SqliteStorage) -> Vec<LoadedDocument> {
        let mut docs = Vec::new();
        for key in storage.partition_keys("c").unwrap() {
            let partition = storage.read_partition("c", &key).unwrap();
            assert!(!partition.is_empty(), "{key} is listed and empty");
            for doc in &partition {
                let read = storage.read_document("c", &key, doc.document.id()).unwrap();
                assert_eq!(read.map(|d| d.rid), Some(doc.rid));
            }
            docs.extend(partition);
        }
        docs
    }

    /// id → `n` of every document of the one container.
    fn loaded(storage: &SqliteStorage) -> BTreeMap<String, u64> {
        let containers = storage.load().unwrap();
        assert_eq!(containers.len(), 1);
        documents(storage)
            .iter()
            .map(|d| {
                let v = d.document.value();
                (d.document.id().to_owned(), v["n"].as_u64().unwrap_or(0))
            })
            .collect()
    }

    fn count(path: &Path, sql: &str) -> i64 {
        Connection::open(path)
            .unwrap()
            .query_row(sql, [], |row| row.get(0))
            .unwrap()
    }

    /// The commits of [`history`], as [`write`]'s arguments.
    const HISTORY: [(&str, Option<u64>); 6] = [
        ("a", Some(1)),
        ("b", Some(1)),
        ("a", Some(2)),
        ("c", Some(1)),
        ("b", None),
        ("a", Some(3)),
    ];

    fn history(storage: &SqliteStorage) {
        storage.create_container(&meta()).unwrap();
        for (id, n) in HISTORY {
            storage.commit(write(id, n)).unwrap();
        }
    }

    /// Copies the store at `from` to `to` as a crash would leave it: the
    /// file and its log, whatever is not yet folded or checkpointed.
    /// Only a full disk failing the room probe reads as a full disk; a
    /// probe that could not be created is explained by `why_unwritable`.
    #[test]
    fn only_a_full_disk_failing_the_room_probe_is_a_full_disk() {
        use std::io::{Error as IoError, ErrorKind};
        for (kind, full) in [
            (ErrorKind::StorageFull, true),
            (ErrorKind::QuotaExceeded, true),
            (ErrorKind::PermissionDenied, false),
            (ErrorKind::ReadOnlyFilesystem, false),
        ] {
            let failure = no_room(1 << 20, &IoError::from(kind));
            assert_eq!(
                failure.code == Some(rusqlite::ErrorCode::DiskFull),
                full,
                "{kind:?}"
            );
            assert!(
                failure.error.to_string().contains("1048576 bytes"),
                "{kind:?}"
            );
        }
        // Room there is: the probe is made and removed.
        let dir = tempfile::tempdir().unwrap();
        reserve_room(&dir.path().join("db.sqlite"), 1 << 20).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    fn crash_copy(from: &Path, to: &Path) {
        for suffix in ["", "-wal"] {
            std::fs::copy(
                format!("{}{suffix}", from.display()),
                format!("{}{suffix}", to.display()),
            )
            .unwrap();
        }
    }

    /// Opens the store at `path` with a limit on its file far from
    /// reached, which keeps the committer from folding and sweeping on
    /// its own when idle: the test's steps are the only ones.
    fn without_idle_work(path: &Path) -> SqliteStorage {
        SqliteStorage::open_limited(path, Durability::Full, CHECKPOINT_PAGES, Some(1 << 20))
            .unwrap()
    }

    /// What [`history`] leaves: a at 3, b deleted, c at 1.
    fn history_state() -> BTreeMap<String, u64> {
        BTreeMap::from([("a".to_owned(), 3), ("c".to_owned(), 1)])
    }

    /// A store that went through [`history`] and closed (so folded).
    fn closed_after_history() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        history(&SqliteStorage::open(&path, Durability::Full).unwrap());
        (dir, path)
    }

    #[test]
    fn a_crash_before_the_fold_loses_nothing_the_log_replays_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let copy = dir.path().join("copy.sqlite");
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        history(&storage);
        // The files as a crash would leave them: every commit is durable in
        // the log, none is folded into docs yet.
        crash_copy(&path, &copy);
        assert_eq!(count(&copy, "SELECT COUNT(*) FROM docs"), 0);
        // Opening reads them back as pending and writes none (a store on
        // the simulated disk does not fold when idle, so none is folded yet).
        let crashed =
            SqliteStorage::open_limited(&copy, Durability::Full, CHECKPOINT_PAGES, Some(1 << 20))
                .unwrap();
        assert_eq!(count(&copy, "SELECT COUNT(*) FROM docs"), 0);
        assert_eq!(crashed.pending.read().len(), 3);
        assert_eq!(loaded(&crashed), history_state());
        assert_eq!(crashed.commit(write("d", Some(1))).unwrap(), Lsn(7));
        drop(crashed);
        // Closing folded everything: docs is the state, nothing to replay.
        assert_eq!(count(&copy, "SELECT COUNT(*) FROM docs"), 3);
        assert_eq!(
            count(&copy, "SELECT lsn FROM folded WHERE container = 'c'"),
            7
        );
        drop(storage);
        assert_eq!(count(&path, "SELECT COUNT(*) FROM docs"), 2);
        let reopened = SqliteStorage::open(&path, Durability::None).unwrap();
        assert_eq!(loaded(&reopened), history_state());
    }

    #[test]
    fn bodies_are_stored_without_their_system_properties_and_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let copy = dir.path().join("copy.sqlite");
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        history(&storage);
        let text = |r: CommitRecord| r.changes[0].text.as_deref().map(str::to_owned);
        let logged: Vec<Option<String>> = HISTORY
            .into_iter()
            .map(|(id, n)| text(write(id, n)))
            .collect();
        let state = BTreeMap::from([
            ("a".to_owned(), text(write("a", Some(3))).unwrap()),
            ("c".to_owned(), text(write("c", Some(1))).unwrap()),
        ]);
        // Every document exactly as committed, and its size that of its
        // whole text.
        let check = |storage: &SqliteStorage| {
            let read: BTreeMap<String, String> = documents(storage)
                .into_iter()
                .map(|d| {
                    let text = d.document.value().to_string();
                    assert_eq!(d.size, text.len());
                    (d.document.id().to_owned(), text)
                })
                .collect();
            assert_eq!(read, state);
            let changes = storage.read_changes("c", Lsn::ZERO, 100).unwrap();
            let changes: Vec<Option<String>> = changes
                .iter()
                .map(|c| c.document.as_ref().map(|d| d.value().to_string()))
                .collect();
            assert_eq!(changes, logged);
        };
        // Pending, then replayed from the log after a crash, then folded.
        check(&storage);
        crash_copy(&path, &copy);
        check(&SqliteStorage::open(&copy, Durability::Full).unwrap());
        drop(storage);
        check(&SqliteStorage::open(&path, Durability::Full).unwrap());
        // Four bodies without their system properties; `c`'s whole.
        let typed = |kind: &str| {
            count(
                &path,
                &format!("SELECT COUNT(*) FROM changes WHERE typeof(body) = '{kind}'"),
            )
        };
        assert_eq!((typed("blob"), typed("text"), typed("null")), (4, 1, 1));
        let stamped = "SELECT COUNT(*) FROM changes WHERE typeof(body) = 'blob' \
             AND (instr(CAST(body AS TEXT), '\"_rid\"') OR instr(CAST(body AS TEXT), '\"_etag\"'))";
        assert_eq!(count(&path, stamped), 0);
    }

    #[test]
    fn a_partition_read_for_a_query_leaves_unparsed_what_lacks_its_needles() {
        let (_dir, path) = closed_after_history();
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        storage.load().unwrap();
        let key = PartitionKey::from("a");
        // Every document whole, with its size: `a` is stored without its
        // system properties, `c` whole (a member follows them).
        let whole: BTreeMap<String, (u64, usize)> = storage
            .read_partition("c", &key)
            .unwrap()
            .into_iter()
            .map(|d| (d.document.id().to_owned(), (d.rid, d.size)))
            .collect();
        assert_eq!(whole.len(), 2);
        let read = |sql: &str| {
            let q = crate::query::parse(sql).unwrap();
            let (docs, skipped) = storage
                .read_partition_containing("c", &key, &Needles::of(&q, &[]))
                .unwrap();
            let docs: Vec<String> = docs.iter().map(|d| d.document.id().to_owned()).collect();
            (docs, skipped)
        };
        let skipped = |id: &str| Skipped {
            rid: whole[id].0,
            size: whole[id].1,
        };
        assert_eq!(
            read("SELECT * FROM c WHERE c.id = 'c'"),
            (vec!["c".to_owned()], vec![skipped("a")])
        );
        assert_eq!(
            read("SELECT * FROM c WHERE c.z = 'after _ts'"),
            (vec!["c".to_owned()], vec![skipped("a")])
        );
        let (docs, mut none) = read("SELECT * FROM c WHERE c.id = 'nobody'");
        none.sort_by_key(|s| s.rid);
        let mut all = vec![skipped("a"), skipped("c")];
        all.sort_by_key(|s| s.rid);
        assert_eq!((docs, none), (Vec::<String>::new(), all));
        // Without needles, or with ones both have, everything is parsed.
        for sql in ["SELECT * FROM c", "SELECT * FROM c WHERE c.pk = 'a'"] {
            let (mut docs, skipped) = read(sql);
            docs.sort();
            assert_eq!(
                (docs, skipped),
                (vec!["a".to_owned(), "c".to_owned()], vec![])
            );
        }
    }

    #[test]
    fn a_fold_then_more_commits_replays_only_past_the_mark() {
        let (_dir, path) = closed_after_history();
        // A folded store, then commits that were not folded (a crash).
        let mut conn = Connection::open(&path).unwrap();
        let pending = RwLock::new(PendingDocs::default());
        let (reply, _) = mpsc::sync_channel(2);
        let batch = vec![
            Request::Commit(write("c", None), reply.clone()),
            Request::Commit(write("e", Some(5)), reply),
        ];
        let next = HashMap::from([("c".to_owned(), 6)]);
        let lsns = write_batch(
            &mut conn,
            &batch,
            &next,
            &pending,
            &mut HashMap::new(),
            &RwLock::default(),
            &RwLock::default(),
        )
        .unwrap();
        assert_eq!(lsns, [Lsn(7), Lsn(8)]);
        assert_eq!(pending.read().len(), 2);
        drop(conn);
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        let expected = BTreeMap::from([("a".to_owned(), 3), ("e".to_owned(), 5)]);
        assert_eq!(loaded(&storage), expected);
    }

    #[test]
    fn a_fold_that_writes_the_version_docs_points_at_keeps_its_log_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        {
            let storage = without_idle_work(&path);
            storage.create_container(&meta()).unwrap();
            assert_eq!(storage.commit(write("a", Some(1))).unwrap(), Lsn(1));
        }
        // A mark behind the version `docs` points at, as a fold written in
        // several transactions would leave it after a crash: that version
        // is pending again, and the next fold writes it once more.
        Connection::open(&path)
            .unwrap()
            .execute_batch("UPDATE folded SET lsn = 0 WHERE container = 'c'")
            .unwrap();
        let storage = without_idle_work(&path);
        storage.set_retention(1);
        storage.commit(write("b", Some(2))).unwrap();
        storage.commit(write("b", Some(3))).unwrap();
        // a's row (LSN 1) is behind the window of one commit.
        storage
            .writer
            .lock()
            .as_mut()
            .unwrap()
            .fold(&storage.shared);
        let state = BTreeMap::from([("a".to_owned(), 1), ("b".to_owned(), 3)]);
        assert_eq!(loaded(&storage), state);
        drop(storage);
        assert_eq!(
            loaded(&SqliteStorage::open(&path, Durability::Full).unwrap()),
            state
        );
    }

    #[test]
    fn a_store_from_before_folding_is_taken_as_folded() {
        let (_dir, path) = closed_after_history();
        // Such a store has every document in docs and no `folded` table.
        Connection::open(&path)
            .unwrap()
            .execute_batch("DROP TABLE folded")
            .unwrap();
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        assert_eq!(
            count(&path, "SELECT lsn FROM folded WHERE container = 'c'"),
            6
        );
        assert_eq!(loaded(&storage), history_state());
    }

    #[test]
    fn deleting_a_container_drops_its_pending_documents_and_mark() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        {
            let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
            history(&storage);
            storage.delete_container("c").unwrap();
            storage.create_container(&meta()).unwrap();
            storage.commit(write("z", Some(9))).unwrap();
        }
        assert_eq!(count(&path, "SELECT COUNT(*) FROM docs"), 1);
        assert_eq!(
            count(&path, "SELECT lsn FROM folded WHERE container = 'c'"),
            1
        );
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        assert_eq!(loaded(&storage), BTreeMap::from([("z".to_owned(), 9)]));
    }

    #[test]
    fn a_store_of_the_old_layout_is_copied_into_the_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        // The schema before folding: WITHOUT ROWID tables, no `folded`,
        // every document in docs.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            r#"
            CREATE TABLE containers (id TEXT PRIMARY KEY, ordinal INTEGER NOT NULL, pk_path TEXT NOT NULL, physical_partitions INTEGER NOT NULL);
            CREATE TABLE docs (container TEXT NOT NULL, pk TEXT NOT NULL, id TEXT NOT NULL, rid INTEGER NOT NULL, body TEXT NOT NULL, etag TEXT NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY (container, pk, id)) WITHOUT ROWID;
            CREATE TABLE changes (container TEXT NOT NULL, lsn INTEGER NOT NULL, idx INTEGER NOT NULL, pk TEXT NOT NULL, id TEXT NOT NULL, op TEXT NOT NULL, seq INTEGER NOT NULL, rid INTEGER NOT NULL, body TEXT, ts INTEGER NOT NULL, PRIMARY KEY (container, lsn, idx)) WITHOUT ROWID;
            CREATE TABLE scripts (container TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, language TEXT NOT NULL, body BLOB NOT NULL, trigger_type TEXT, trigger_operation TEXT, version INTEGER NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY (container, kind, id)) WITHOUT ROWID;
            INSERT INTO containers VALUES ('c', 1, '/pk', 1);
            INSERT INTO docs VALUES ('c', '["a"]', 'x', 1, '{"id":"x","pk":"a","n":7,"_etag":"\"1\"","_ts":1}', '"1"', 1);
            INSERT INTO changes VALUES ('c', 1, 0, '["a"]', 'gone', 'create', 1, 2, '{"id":"gone","pk":"a"}', 1);
            INSERT INTO changes VALUES ('c', 2, 0, '["a"]', 'x', 'create', 2, 1, '{"id":"x","pk":"a","n":7,"_etag":"\"1\"","_ts":1}', 1);
            INSERT INTO changes VALUES ('c', 3, 0, '["a"]', 'gone', 'delete', 3, 2, NULL, 1);
            "#,
        )
        .unwrap();
        drop(conn);
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        assert_eq!(loaded(&storage), BTreeMap::from([("x".to_owned(), 7)]));
        assert_eq!(storage.read_changes("c", Lsn(1), 10).unwrap().len(), 2);
        assert_eq!(storage.commit(write("y", Some(1))).unwrap(), Lsn(4));
        drop(storage);
        assert_eq!(
            count(
                &path,
                "SELECT COUNT(*) FROM sqlite_master WHERE sql LIKE '%WITHOUT ROWID%' AND name = 'changes'"
            ),
            0
        );
        assert_eq!(
            count(
                &path,
                "SELECT COUNT(*) FROM pragma_table_info('docs') WHERE name IN ('lsn', 'idx')"
            ),
            2
        );
        assert_eq!(
            count(
                &path,
                "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE '%old_layout%'"
            ),
            0
        );
        assert_eq!(
            count(&path, "SELECT lsn FROM folded WHERE container = 'c'"),
            4
        );
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        assert_eq!(
            loaded(&storage),
            BTreeMap::from([("x".to_owned(), 7), ("y".to_owned(), 1)])
        );
    }

    #[test]
    fn a_store_with_bodies_in_docs_keeps_them_and_points_at_the_log_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        // The layout before `docs` pointed at the log: rowid tables with
        // unique indexes, a copy of each body (and its etag) in docs, ops
        // by name, everything folded.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            r#"
            CREATE TABLE containers (id TEXT PRIMARY KEY, ordinal INTEGER NOT NULL, pk_path TEXT NOT NULL, physical_partitions INTEGER NOT NULL, settings TEXT NOT NULL DEFAULT '{}');
            CREATE TABLE docs (container TEXT NOT NULL, pk TEXT NOT NULL, id TEXT NOT NULL, rid INTEGER NOT NULL, body TEXT NOT NULL, etag TEXT NOT NULL, ts INTEGER NOT NULL);
            CREATE UNIQUE INDEX docs_by_key ON docs (container, pk, id);
            CREATE TABLE changes (container TEXT NOT NULL, lsn INTEGER NOT NULL, idx INTEGER NOT NULL, pk TEXT NOT NULL, id TEXT NOT NULL, op TEXT NOT NULL, seq INTEGER NOT NULL, rid INTEGER NOT NULL, body TEXT, ts INTEGER NOT NULL);
            CREATE UNIQUE INDEX changes_by_lsn ON changes (container, lsn, idx);
            CREATE TABLE scripts (container TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, language TEXT NOT NULL, body BLOB NOT NULL, trigger_type TEXT, trigger_operation TEXT, version INTEGER NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY (container, kind, id)) WITHOUT ROWID;
            CREATE TABLE folded (container TEXT PRIMARY KEY, lsn INTEGER NOT NULL, seq INTEGER);
            INSERT INTO containers (id, ordinal, pk_path, physical_partitions) VALUES ('c', 1, '/pk', 1);
            INSERT INTO changes VALUES ('c', 1, 0, '["a"]', 'x', 'create', 1, 1, '{"id":"x","pk":"a","n":7}', 1);
            INSERT INTO changes VALUES ('c', 1, 1, '["a"]', 'y', 'create', 2, 2, '{"id":"y","pk":"a","n":1}', 1);
            INSERT INTO changes VALUES ('c', 2, 0, '["a"]', 'y', 'replace', 3, 2, '{"id":"y","pk":"a","n":2}', 1);
            INSERT INTO changes VALUES ('c', 3, 0, '["a"]', 'gone', 'create', 4, 3, '{"id":"gone","pk":"a"}', 1);
            INSERT INTO changes VALUES ('c', 4, 0, '["a"]', 'gone', 'delete', 5, 3, NULL, 1);
            INSERT INTO docs VALUES ('c', '["a"]', 'x', 1, '{"id":"x","pk":"a","n":7}', '"1"', 1);
            INSERT INTO docs VALUES ('c', '["a"]', 'y', 2, '{"id":"y","pk":"a","n":2}', '"3"', 1);
            INSERT INTO folded VALUES ('c', 4, 5);
            "#,
        )
        .unwrap();
        drop(conn);
        let state = BTreeMap::from([("x".to_owned(), 7), ("y".to_owned(), 2)]);
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        assert_eq!(loaded(&storage), state);
        let kinds: Vec<ChangeKind> = storage
            .read_changes("c", Lsn::ZERO, 10)
            .unwrap()
            .into_iter()
            .map(|c| c.kind)
            .collect();
        use ChangeKind::{Create, Delete, Replace};
        assert_eq!(kinds, [Create, Create, Replace, Create, Delete]);
        // A new version of y and a new document: folded as pointers.
        assert_eq!(storage.commit(write("y", Some(3))).unwrap(), Lsn(5));
        assert_eq!(storage.commit(write("z", Some(4))).unwrap(), Lsn(6));
        drop(storage);
        assert_eq!(
            count(&path, "SELECT COUNT(*) FROM docs WHERE body IS NOT NULL"),
            1
        );
        assert_eq!(
            count(
                &path,
                "SELECT COUNT(*) FROM docs WHERE body IS NULL AND lsn IN (5, 6) AND idx = 0"
            ),
            2
        );
        assert_eq!(
            count(
                &path,
                "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE '%old_layout%' OR name = 'docs_by_key'"
            ),
            0
        );
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        let state = BTreeMap::from([
            ("x".to_owned(), 7),
            ("y".to_owned(), 3),
            ("z".to_owned(), 4),
        ]);
        assert_eq!(loaded(&storage), state);
        let kinds: Vec<ChangeKind> = storage
            .read_changes("c", Lsn(4), 10)
            .unwrap()
            .into_iter()
            .map(|c| c.kind)
            .collect();
        assert_eq!(kinds, [Replace, Replace]);
    }

    #[test]
    fn a_docs_row_whose_log_row_is_missing_is_a_storage_error() {
        let (_dir, path) = closed_after_history();
        Connection::open(&path)
            .unwrap()
            .execute_batch("DELETE FROM changes WHERE id = 'c'")
            .unwrap();
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        let key = PartitionKey::from("a");
        let err = storage.read_document("c", &key, "c").unwrap_err();
        assert!(
            matches!(&err, Error::Storage(m) if m.contains("no body")),
            "{err}"
        );
        assert!(storage.read_partition("c", &key).is_err());
        assert!(storage.read_document("c", &key, "a").unwrap().is_some());
    }

    #[test]
    fn container_settings_survive_reopen_and_updates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let mut meta = ContainerMeta {
            default_ttl: Some(30),
            unique_keys: vec![crate::UniqueKey::new(["/name", "/address/zip"])],
            database_rid: Some(*b"\0\0\0\x07"),
            computed_properties: vec![crate::ComputedProperty::new(
                "cp_lower",
                "SELECT VALUE LOWER(c.name) FROM c",
            )],
            indexing_policy: crate::IndexingPolicy::from_json(&serde_json::json!({
                "indexingMode": "consistent",
                "excludedPaths": [{"path": "/*"}],
                "includedPaths": [{"path": "/name/?"}]
            }))
            .unwrap(),
            ..meta()
        };
        {
            let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
            storage.create_container(&meta).unwrap();
        }
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        assert_eq!(storage.load().unwrap()[0].meta, meta);
        meta.default_ttl = None;
        meta.indexing_policy = crate::IndexingPolicy::default();
        storage.update_container(&meta).unwrap();
        drop(storage);
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        assert_eq!(storage.load().unwrap()[0].meta, meta);
    }

    #[test]
    fn a_store_without_settings_gains_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        {
            let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
            storage.create_container(&meta()).unwrap();
        }
        Connection::open(&path)
            .unwrap()
            .execute_batch("ALTER TABLE containers DROP COLUMN settings")
            .unwrap();
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        assert_eq!(storage.load().unwrap()[0].meta, meta());
        let ttl = ContainerMeta {
            default_ttl: Some(-1),
            ..meta()
        };
        storage.update_container(&ttl).unwrap();
        drop(storage);
        let storage = SqliteStorage::open(&path, Durability::Full).unwrap();
        assert_eq!(storage.load().unwrap()[0].meta, ttl);
    }
}
