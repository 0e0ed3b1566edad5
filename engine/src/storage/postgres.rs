//! PostgreSQL storage for Partita nodes, several of which may share one
//! database, with a schema laid out for Citus.
//!
//! One connection writes (behind a mutex); a small pool of connections
//! reads. A [`Storage::commit`] queues its record; whoever next holds the
//! write connection writes every queued record in one PostgreSQL
//! transaction, each taking its container's next LSN, appending its
//! changes to the log and applying them to `docs`, so records and their
//! log entries become visible (and durable) together, and callers that
//! queued while a transaction ran share the next one and its WAL flush
//! (group commit, as the SQLite backend does with its committer thread).
//! Sessions run with `synchronous_commit = on` ([`Durability::Full`];
//! `off` for [`Durability::None`]): `COMMIT` returns after the WAL is
//! flushed.
//!
//! ```text
//!   containers(id, ordinal, pk_path, physical_partitions, settings)   reference
//!   scripts(container, kind, id, language, body, trigger_*, version, ts) reference
//!   log_heads(container, lsn, max_seq, idx_gen, idx_built, idx_cursor)
//!                                                          per container
//!   docs(container, pk_hash, pk, id, rid, seq, ts, body)   per partition
//!   changes(container, pk_hash, lsn, idx, pk, id, op, seq, rid, body, ts)
//!                                                          per partition
//!   partition_versions(container, pk_hash, pk, version)    per partition
//!   idx(container, pk_hash, pk, rid, path, value)          per partition
//!   catalog(id, version)                                   one row, reference
//! ```
//!
//! `idx` is the range index (`postgres/index.rs`): each document's entries
//! under its container's policy, written in the transaction of the
//! document's commit.
//!
//! `pk_hash` is a stable 64-bit hash ([`pk_hash`], FNV-1a) of the logical
//! partition key's canonical text ([`PartitionKey::to_json_array`]); `pk`
//! is that text, so two keys whose hashes collide stay apart. The
//! per-partition tables have keys that lead with (container, pk_hash), and
//! every statement on them filters by exactly one (container, pk_hash)
//! value, passed as `$1` and `$2` (`PARTITION_STATEMENTS`): each could
//! run on the one Citus worker that holds the partition. The exceptions
//! are reads that are cross-partition by nature, and read-only
//! (`CROSS_PARTITION_READS`): the partition keys of a container, the
//! change log of a container, the partitions a container deletion or an
//! index build has to visit, and a query's reads of the range index. Deleting a container deletes its partitions one at a time,
//! in one transaction. A test records every statement the backend sends
//! and checks this. The statements:
//!
//! ```text
//!   one partition, WHERE container = $1 AND pk_hash = $2 (or INSERT … SELECT $1, $2, …):
//!     INSERT_CHANGES          a record's log entries (unnest of arrays)
//!     UPSERT_DOCS             its created and replaced documents (ON CONFLICT DO UPDATE)
//!     DELETE_DOCS             its deleted documents (AND pk = $3 AND id = ANY($4))
//!     READ_PARTITION          a partition's documents (AND pk = $3)
//!     READ_DOCUMENT           one document (AND pk = $3 AND id = $4)
//!     READ_REST_OF_CHANGE     the rest of a transaction read_changes stopped inside
//!     READ_VERSION            a partition's version (AND pk = $3)
//!     FIRST_VERSION, NEXT_VERSION   a commit's compare-and-increment of it
//!     DELETE_PARTITION_DOCS, DELETE_PARTITION_CHANGES, DELETE_PARTITION_VERSIONS,
//!     DELETE_PARTITION_ENTRIES
//!                             a deleted container, per partition (the last also
//!                             a build)
//!     DELETE_ENTRIES, INSERT_ENTRIES   a commit's (or a build's) range-index entries
//!     BUILD_READ_DOCS         the documents a build indexes
//!     READ_DOCUMENTS          the documents a query's index read named (AND pk = $3)
//!   cross-partition, read-only, WHERE container = $1:
//!     PARTITION_KEYS          SELECT DISTINCT pk FROM docs
//!     READ_CHANGES            the log after an LSN, ORDER BY lsn, idx LIMIT n
//!     CONTAINER_PARTITIONS    the pk_hash values of the four (for a deletion)
//!     BUILD_*_PARTITIONS      the next pk_hash values of docs (for a build)
//!     INDEX_READS             a query's reads of idx (AND path = $2 AND value …)
//!   small tables: containers, scripts, log_heads (NEXT_LSN in each commit,
//!   UNDO_LSN after a refused one, RESERVE_SEQUENCE per block, LAST_LSN for
//!   a change feed from now, the index's generation and build), by key;
//!   catalog (NEXT_CATALOG with every container or script change,
//!   READ_CATALOG, and in READ_VERSION beside the partition's version)
//! ```
//!
//! SEVERAL NODES
//! =============
//!
//! The store is [shared](Storage::shared): any number of processes may
//! open it. Each logical partition has a version in `partition_versions`
//! (no row: 0), which every commit moves from the version its transaction
//! read ([`CommitRecord::base_version`]) to the next, in the same
//! PostgreSQL transaction as its writes: `NEXT_VERSION` is an `UPDATE …
//! WHERE version = $4`, which under READ COMMITTED waits for a concurrent
//! commit of the row and then re-checks it, so of two nodes that read
//! version n only one moves it to n+1. The other's record writes nothing
//! (the rest of its batch goes on) and its commit fails with
//! [`Error::PartitionChanged`] (449). No clock is read. The engine reads a
//! partition's version before its documents, confirms it when a
//! transaction begins and before a read uses its copy in memory, and runs
//! a transaction again after a 449 (see `Container::transaction`).
//!
//! A commit costs one statement more than on one node (the version), and
//! a transaction one more when it begins (`READ_VERSION`, confirming the
//! copy in memory), as does a point read, query or feed of a partition in
//! memory; a partition another node changed meanwhile is read through
//! (one more statement) until a transaction of this node reads it again.
//!
//! Containers and scripts other nodes change: the one-row `catalog` table
//! holds a version that every container or script change moves in its
//! own transaction (its row lock also orders catalog changes across
//! nodes). `READ_VERSION` returns it beside the partition's version, so a
//! node learns of a change at a transaction's begin or a read at no extra
//! statement, and then loads the catalog again (see
//! `DbInner::sync_catalog`). A container created by two nodes at once is
//! created once: the other gets 409.
//!
//! Sequence numbers (a document's rid and etag) stay unique across nodes:
//! each node reserves a block of a container's numbers at a time
//! (`RESERVE_SEQUENCE`, raising `log_heads.max_seq`, one statement per
//! 1,000 writes), so rids no longer follow creation order across nodes,
//! only within each node's block.
//!
//! A node that dies mid-commit leaves an open PostgreSQL transaction that
//! the server rolls back when the connection goes: nothing of it is
//! visible, the LSN it took is not taken, its partition's version did not
//! move.
//!
//! A serialization failure (SQLSTATE 40001) or a deadlock (40P01) with
//! another session rolls a commit's whole group back, with the LSNs it
//! took and the versions it moved: each of its commits fails with
//! [`Error::RolledBack`] (449), which the engine retries as it does
//! [`Error::PartitionChanged`], and the store stays writable. The same
//! conflict in a write of a container or a script (or a reservation of
//! sequence numbers) is [`Error::WriteRolledBack`] (449), which the
//! caller retries; the store stays writable too.
//!
//! Bodies are stored as `text`, exactly as the engine serialized them
//! (`jsonb` would reorder members and drop duplicates); `docs` holds each
//! document's current body and `changes` a copy per version.
//!
//! LSNs are per container, from 1, without gaps, as the SQLite backend
//! assigns them, and PostgreSQL assigns them, so nodes never collide:
//! `log_heads` holds each container's last LSN, and a commit bumps it
//! (`INSERT … ON CONFLICT DO UPDATE … RETURNING`) in its own transaction,
//! before its version check (a refused commit gives the LSN back with
//! `UNDO_LSN` while it still holds the row). The row's lock serializes
//! the commits of a container, on every node (a commit cannot take LSN
//! n+1 before the one with n has committed), so LSN order is commit order,
//! a partition's changes are in the order of its versions, and a reader of
//! the log, on any node, never sees n+1 without n. A batch writes its
//! records container by container, so two nodes lock the heads in one
//! order. `read_changes` reads in (lsn, idx) order and completes the last
//! transaction it started. Deleting a container deletes its head: a
//! container created again starts at LSN 1.
//!
//! What a multi-node deployment would change: on Citus the counter row is
//! one hot row (a reference or single-shard table) that every commit of a
//! container, on every node, would lock: it would move to per-partition
//! LSNs (`log_heads` keyed by (container, pk_hash), co-located with the
//! partition) with the change feed merging partitions, or to a hybrid
//! clock. Then `SELECT create_distributed_table('docs', 'pk_hash')`,
//! `create_distributed_table('changes', 'pk_hash', colocate_with => 'docs')`
//! and `create_reference_table` for `containers` and `scripts`; the
//! statements need no change. Not done here: routing, TLS (connections use `NoTls`: a Unix socket or a trusted network),
//! schema versioning, and reconnecting the write connection (after a
//! failed commit the engine refuses writes until it is reopened).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use host_api::{PartitionKey, ScriptKind, TriggerOperation, TriggerType};
use parking_lot::Mutex;
use postgres::error::{DbError, SqlState};
use postgres::types::ToSql;
use postgres::{Client, Config, NoTls, Row, Statement};

use super::{
    Change, ChangeKind, CommitRecord, ContainerMeta, Durability, IndexWalk, LoadedContainer,
    LoadedDocument, Lsn, ScriptRecord, Storage, Versions, WalkPage, kind_name, language_name,
    parse_kind, parse_language,
};
use crate::document::{Document, now_secs};
use crate::error::{Error, Result};
use crate::script::TriggerNames;
use crate::settings::{apply_settings, settings_json};

mod index;
#[cfg(test)]
mod tests;

/// How many connections serve reads.
const READERS: usize = 2;

/// How long connecting may take when the URL does not say.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether every table, column and index of [`SCHEMA`] exists (its last
/// statements are the latest additions).
const SCHEMA_COMPLETE: &str = "SELECT to_regclass('docs_by_rid') IS NOT NULL \
     AND to_regclass('idx_by_value') IS NOT NULL \
     AND EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid \
     AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass('idx') AND i.indisprimary \
     AND a.attname = 'value') \
     AND EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() \
     AND table_name = 'log_heads' AND column_name = 'idx_cursor')";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS containers (
    id text PRIMARY KEY,
    ordinal bigint NOT NULL,
    pk_path text NOT NULL,
    physical_partitions bigint NOT NULL,
    settings text NOT NULL
);
CREATE TABLE IF NOT EXISTS scripts (
    container text NOT NULL,
    kind text NOT NULL,
    id text NOT NULL,
    language text NOT NULL,
    body bytea NOT NULL,
    trigger_type text,
    trigger_operation text,
    version bigint NOT NULL,
    ts bigint NOT NULL,
    PRIMARY KEY (container, kind, id)
);
CREATE TABLE IF NOT EXISTS log_heads (
    container text PRIMARY KEY,
    lsn bigint NOT NULL,
    max_seq bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS docs (
    container text NOT NULL,
    pk_hash bigint NOT NULL,
    pk text NOT NULL,
    id text NOT NULL,
    rid bigint NOT NULL,
    seq bigint NOT NULL,
    ts bigint NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (container, pk_hash, pk, id)
);
CREATE TABLE IF NOT EXISTS changes (
    container text NOT NULL,
    pk_hash bigint NOT NULL,
    lsn bigint NOT NULL,
    idx integer NOT NULL,
    pk text NOT NULL,
    id text NOT NULL,
    op smallint NOT NULL,
    seq bigint NOT NULL,
    rid bigint NOT NULL,
    body text,
    ts bigint NOT NULL,
    PRIMARY KEY (container, pk_hash, lsn, idx)
);
CREATE INDEX IF NOT EXISTS changes_by_lsn ON changes (container, lsn, idx);
CREATE TABLE IF NOT EXISTS catalog (
    id smallint PRIMARY KEY,
    version bigint NOT NULL
);
INSERT INTO catalog (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS partition_versions (
    container text NOT NULL,
    pk_hash bigint NOT NULL,
    pk text NOT NULL,
    version bigint NOT NULL,
    PRIMARY KEY (container, pk_hash, pk)
);
ALTER TABLE log_heads ADD COLUMN IF NOT EXISTS idx_gen bigint NOT NULL DEFAULT 0;
ALTER TABLE log_heads ADD COLUMN IF NOT EXISTS idx_built bigint;
ALTER TABLE log_heads ADD COLUMN IF NOT EXISTS idx_cursor bigint;
CREATE TABLE IF NOT EXISTS idx (
    container text NOT NULL,
    pk_hash bigint NOT NULL,
    pk text NOT NULL,
    rid bigint NOT NULL,
    path text NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (container, pk_hash, pk, rid, path, value)
);
CREATE INDEX IF NOT EXISTS idx_by_value ON idx (container, path, value) INCLUDE (pk_hash, pk, rid);
CREATE INDEX IF NOT EXISTS docs_by_rid ON docs (container, pk_hash, rid);
DO $$ BEGIN
    -- A store from before array elements had entries (one per document
    -- and path): every index is built again, under a new generation.
    IF NOT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid
        AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'idx'::regclass AND i.indisprimary
        AND a.attname = 'value') THEN
        ALTER TABLE idx DROP CONSTRAINT idx_pkey;
        ALTER TABLE idx ADD PRIMARY KEY (container, pk_hash, pk, rid, path, value);
        UPDATE catalog SET version = version + 1 WHERE id = 1;
        UPDATE log_heads SET idx_gen = (SELECT version FROM catalog WHERE id = 1), idx_cursor = NULL;
    END IF;
END $$;
";

// Statements on the per-partition tables, each for one (container,
// pk_hash) = ($1, $2).

/// Appends a record's changes to the log, all in one partition.
const INSERT_CHANGES: &str = "INSERT INTO changes (container, pk_hash, lsn, idx, pk, id, op, seq, rid, body, ts) \
     SELECT $1, $2, $3, c.idx, $4, c.id, c.op, c.seq, c.rid, c.body, c.ts \
     FROM unnest($5::int4[], $6::text[], $7::int2[], $8::int8[], $9::int8[], $10::text[], $11::int8[]) \
     AS c(idx, id, op, seq, rid, body, ts)";
/// Writes a record's created and replaced documents.
const UPSERT_DOCS: &str = "INSERT INTO docs (container, pk_hash, pk, id, rid, seq, ts, body) \
     SELECT $1, $2, $3, d.id, d.rid, d.seq, d.ts, d.body \
     FROM unnest($4::text[], $5::int8[], $6::int8[], $7::int8[], $8::text[]) AS d(id, rid, seq, ts, body) \
     ON CONFLICT (container, pk_hash, pk, id) DO UPDATE \
     SET rid = EXCLUDED.rid, seq = EXCLUDED.seq, ts = EXCLUDED.ts, body = EXCLUDED.body";
/// Removes a record's deleted documents.
const DELETE_DOCS: &str =
    "DELETE FROM docs WHERE container = $1 AND pk_hash = $2 AND pk = $3 AND id = ANY($4::text[])";
/// A logical partition's documents.
const READ_PARTITION: &str =
    "SELECT id, rid, body FROM docs WHERE container = $1 AND pk_hash = $2 AND pk = $3";
/// One document.
const READ_DOCUMENT: &str =
    "SELECT rid, body FROM docs WHERE container = $1 AND pk_hash = $2 AND pk = $3 AND id = $4";
/// The rest of a transaction `read_changes` stopped inside.
const READ_REST_OF_CHANGE: &str = "SELECT lsn, idx, pk, id, op, body, ts FROM changes \
     WHERE container = $1 AND pk_hash = $2 AND lsn = $3 AND idx > $4 ORDER BY idx";
/// A deleted container's documents, a partition at a time.
const DELETE_PARTITION_DOCS: &str = "DELETE FROM docs WHERE container = $1 AND pk_hash = $2";
/// A deleted container's log, a partition at a time.
const DELETE_PARTITION_CHANGES: &str = "DELETE FROM changes WHERE container = $1 AND pk_hash = $2";
/// A partition's version, and the catalog's (a one-row reference table).
const READ_VERSION: &str = "SELECT (SELECT version FROM partition_versions \
     WHERE container = $1 AND pk_hash = $2 AND pk = $3), (SELECT version FROM catalog WHERE id = 1)";
/// The first commit of a partition, read at version 0: version 1, unless
/// another node's commit made it first (then no row).
const FIRST_VERSION: &str = "INSERT INTO partition_versions (container, pk_hash, pk, version) \
     SELECT $1, $2, $3, 1 ON CONFLICT (container, pk_hash, pk) DO NOTHING RETURNING version";
/// A later commit: the version it read, plus one, unless another node's
/// commit moved it first (then no row).
const NEXT_VERSION: &str = "UPDATE partition_versions SET version = version + 1 \
     WHERE container = $1 AND pk_hash = $2 AND pk = $3 AND version = $4 RETURNING version";
/// A deleted container's versions, a partition at a time.
const DELETE_PARTITION_VERSIONS: &str =
    "DELETE FROM partition_versions WHERE container = $1 AND pk_hash = $2";

/// Every statement on `docs`, `changes`, `partition_versions` and `idx`
/// that names one partition.
#[cfg(test)]
pub(crate) const PARTITION_STATEMENTS: [&str; 17] = [
    INSERT_CHANGES,
    UPSERT_DOCS,
    DELETE_DOCS,
    READ_PARTITION,
    READ_DOCUMENT,
    READ_REST_OF_CHANGE,
    DELETE_PARTITION_DOCS,
    DELETE_PARTITION_CHANGES,
    READ_VERSION,
    FIRST_VERSION,
    NEXT_VERSION,
    DELETE_PARTITION_VERSIONS,
    index::DELETE_ENTRIES,
    index::INSERT_ENTRIES,
    index::DELETE_PARTITION_ENTRIES,
    index::BUILD_READ_DOCS,
    index::READ_DOCUMENTS,
];

// Reads of `docs` and `changes` that span a container's partitions.

/// The partitions holding a document.
const PARTITION_KEYS: &str = "SELECT DISTINCT pk FROM docs WHERE container = $1";
/// A container's change log, from an LSN on.
const READ_CHANGES: &str = "SELECT lsn, idx, pk, id, op, body, ts, pk_hash FROM changes \
     WHERE container = $1 AND lsn > $2 ORDER BY lsn, idx LIMIT $3";
/// The partitions a container deletion visits.
const CONTAINER_PARTITIONS: &str = "SELECT pk_hash FROM docs WHERE container = $1 \
     UNION SELECT pk_hash FROM changes WHERE container = $1 \
     UNION SELECT pk_hash FROM partition_versions WHERE container = $1 \
     UNION SELECT pk_hash FROM idx WHERE container = $1";

/// Every read of `docs`, `changes` and `idx` that spans partitions (all
/// read-only), besides the reads of the index a query makes, which begin
/// with one of [`index::INDEX_READS`].
#[cfg(test)]
pub(crate) const CROSS_PARTITION_READS: [&str; 5] = [
    PARTITION_KEYS,
    READ_CHANGES,
    CONTAINER_PARTITIONS,
    index::BUILD_FIRST_PARTITIONS,
    index::BUILD_NEXT_PARTITIONS,
];

// Statements on the small tables.

const NEXT_LSN: &str = "INSERT INTO log_heads (container, lsn, max_seq) VALUES ($1, 1, $2) \
     ON CONFLICT (container) DO UPDATE \
     SET lsn = log_heads.lsn + 1, max_seq = GREATEST(log_heads.max_seq, EXCLUDED.max_seq) \
     RETURNING lsn, idx_gen";
/// Gives back the LSN [`NEXT_LSN`] took for a commit that then found its
/// partition changed (the row is still locked by this transaction, so no
/// other commit took the next one): LSNs stay gapless.
const UNDO_LSN: &str = "UPDATE log_heads SET lsn = lsn - 1 WHERE container = $1";
/// A node's next block of a container's sequence numbers: the last one.
const RESERVE_SEQUENCE: &str = "INSERT INTO log_heads (container, lsn, max_seq) VALUES ($1, 0, $2) \
     ON CONFLICT (container) DO UPDATE SET max_seq = log_heads.max_seq + EXCLUDED.max_seq \
     RETURNING max_seq";
/// Moves the catalog version, in the transaction of every container or
/// script change; its row lock orders catalog changes across nodes.
const NEXT_CATALOG: &str =
    "UPDATE catalog SET version = version + 1 WHERE id = 1 RETURNING version";
/// The catalog version.
const READ_CATALOG: &str = "SELECT version FROM catalog WHERE id = 1";
const CREATE_CONTAINER: &str = "INSERT INTO containers (id, ordinal, pk_path, physical_partitions, settings) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING";
const UPDATE_CONTAINER: &str = "UPDATE containers SET settings = $2 WHERE id = $1";
const DELETE_CONTAINER: &str = "DELETE FROM containers WHERE id = $1";
const DELETE_CONTAINER_SCRIPTS: &str = "DELETE FROM scripts WHERE container = $1";
const DELETE_CONTAINER_HEAD: &str = "DELETE FROM log_heads WHERE container = $1";
const PUT_SCRIPT: &str = "INSERT INTO scripts (container, kind, id, language, body, trigger_type, trigger_operation, version, ts) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (container, kind, id) DO UPDATE \
     SET language = EXCLUDED.language, body = EXCLUDED.body, trigger_type = EXCLUDED.trigger_type, \
     trigger_operation = EXCLUDED.trigger_operation, version = EXCLUDED.version, ts = EXCLUDED.ts";
const DELETE_SCRIPT: &str = "DELETE FROM scripts WHERE container = $1 AND kind = $2 AND id = $3";
const LOAD_CONTAINERS: &str =
    "SELECT id, ordinal, pk_path, physical_partitions, settings FROM containers ORDER BY ordinal";
const LOAD_SCRIPTS: &str = "SELECT container, kind, id, language, body, trigger_type, trigger_operation, version, ts FROM scripts";
const LOAD_HEADS: &str = "SELECT container, max_seq FROM log_heads";

/// A container's last LSN: the head a commit moves in its own transaction,
/// so what it reads is committed, on any node.
const LAST_LSN: &str = "SELECT lsn FROM log_heads WHERE container = $1";

/// The stable 64-bit hash of a logical partition key's canonical text
/// ([`PartitionKey::to_json_array`]): FNV-1a, as a signed `bigint`. Rows
/// are keyed by it, so it must never change.
pub fn pk_hash(canonical: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in canonical.as_bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash as i64
}

/// `url` with any password replaced by `***`: in the user part of a URL
/// (`postgresql://user:secret@host/db`) and in `password=` parameters.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(start) = out.find("://").map(|i| i + 3) {
        let end = out[start..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |i| start + i);
        if let Some(at) = out[start..end].rfind('@').map(|i| start + i)
            && let Some(colon) = out[start..at].find(':').map(|i| start + i)
        {
            out.replace_range(colon + 1..at, "***");
        }
    }
    let mut from = 0;
    while let Some(i) = out[from..].to_ascii_lowercase().find("password=") {
        let value = from + i + "password=".len();
        let end = out[value..]
            .find(['&', ' ', '#'])
            .map_or(out.len(), |j| value + j);
        out.replace_range(value..end, "***");
        from = value + 3;
    }
    out
}

/// Why a statement or transaction failed: PostgreSQL's error, or one of
/// ours (a row that makes no sense).
enum Failure {
    Postgres(postgres::Error),
    Engine(Error),
}

impl From<postgres::Error> for Failure {
    fn from(e: postgres::Error) -> Failure {
        Failure::Postgres(e)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Engine(e)
    }
}

impl Failure {
    /// The engine's error for a failure while doing `what` in `location`.
    fn into_error(self, what: &str, location: &str) -> Error {
        match self {
            // `postgres::Error` says only "db error"; the server's message
            // and code name the cause.
            Failure::Postgres(e) => match e.as_db_error() {
                Some(db) => Error::Storage(format!(
                    "{what} in {location}: {} ({}){}",
                    db.message(),
                    db.code().code(),
                    db.detail().map(|d| format!(": {d}")).unwrap_or_default()
                )),
                None => Error::storage(&format!("{what} in {location}"), e),
            },
            Failure::Engine(e) => e,
        }
    }
}

/// The server's error when PostgreSQL rolled a transaction back for a
/// conflict with a concurrent one, a serialization failure (SQLSTATE
/// 40001) or a deadlock (40P01): nothing of it was written, and running it
/// again can succeed.
fn conflict(e: &postgres::Error) -> Option<&DbError> {
    let db = e.as_db_error()?;
    [
        SqlState::T_R_SERIALIZATION_FAILURE,
        SqlState::T_R_DEADLOCK_DETECTED,
    ]
    .contains(db.code())
    .then_some(db)
}

/// Column `i` of `row`, or a storage error naming it (a table of another
/// layout under our name).
fn col<'a, T: postgres::types::FromSql<'a>>(row: &'a Row, i: usize) -> Result<T> {
    row.try_get(i).map_err(|e| {
        let name = row.columns().get(i).map_or("?", |c| c.name());
        Error::Storage(format!("unexpected value in column {name}: {e}"))
    })
}

/// A client that closes on a thread of its own when dropped. Closing runs
/// the sync client's own tokio runtime (`block_on`), which panics on a
/// thread that is inside another runtime: an embedder such as
/// `partita serve` may drop the last reference to the store there (at
/// shutdown, or when a read replaces a closed connection).
struct OwnClient(Option<Client>);

impl std::ops::Deref for OwnClient {
    type Target = Client;

    fn deref(&self) -> &Client {
        self.0
            .as_ref()
            .expect("a client is taken only when dropped")
    }
}

impl std::ops::DerefMut for OwnClient {
    fn deref_mut(&mut self) -> &mut Client {
        self.0
            .as_mut()
            .expect("a client is taken only when dropped")
    }
}

impl Drop for OwnClient {
    fn drop(&mut self) {
        let Some(client) = self.0.take() else {
            return;
        };
        // Joined, so the connection is closed when the store is gone.
        // Without a thread to be had, `spawn` drops the client here.
        if let Ok(thread) = std::thread::Builder::new()
            .name("partita-pg-close".to_owned())
            .spawn(move || drop(client))
        {
            let _ = thread.join();
        }
    }
}

/// A connection with its prepared statements.
struct Conn {
    client: OwnClient,
    prepared: HashMap<&'static str, Statement>,
    /// Statements built at run time (reads of the range index), by text.
    built: HashMap<String, Statement>,
    #[cfg(test)]
    log: tests::StatementLog,
}

impl Conn {
    fn statement(&mut self, sql: &'static str) -> std::result::Result<Statement, postgres::Error> {
        if let Some(statement) = self.prepared.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        self.prepared.insert(sql, statement.clone());
        Ok(statement)
    }

    fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<Vec<Row>, Failure> {
        let statement = self.statement(sql)?;
        #[cfg(test)]
        self.log.record(sql, &statement);
        Ok(self.client.query(&statement, params)?)
    }

    /// [`Conn::query`] of a statement built at run time: prepared once
    /// per text (a few hundred at most are kept).
    fn query_built(
        &mut self,
        sql: String,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<Vec<Row>, Failure> {
        let statement = match self.built.get(&sql) {
            Some(statement) => statement.clone(),
            None => {
                if self.built.len() >= 256 {
                    self.built.clear();
                }
                let statement = self.client.prepare(&sql)?;
                self.built.insert(sql.clone(), statement.clone());
                statement
            }
        };
        #[cfg(test)]
        self.log.record(&sql, &statement);
        Ok(self.client.query(&statement, params)?)
    }

    fn execute(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<u64, Failure> {
        let statement = self.statement(sql)?;
        #[cfg(test)]
        self.log.record(sql, &statement);
        Ok(self.client.execute(&statement, params)?)
    }

    /// Runs `f` in a transaction: committed when it returns `Ok`, rolled
    /// back otherwise.
    fn transaction<T>(
        &mut self,
        f: impl FnOnce(&mut Conn) -> std::result::Result<T, Failure>,
    ) -> std::result::Result<T, Failure> {
        self.client.batch_execute("BEGIN")?;
        match f(self) {
            Ok(value) => {
                self.client.batch_execute("COMMIT")?;
                Ok(value)
            }
            Err(e) => {
                // The transaction failed already; a failed rollback (a lost
                // connection) rolls back too.
                let _ = self.client.batch_execute("ROLLBACK");
                Err(e)
            }
        }
    }
}

/// A commit waiting for the write connection. The caller that next holds
/// the connection writes every queued record in one transaction (one WAL
/// flush for all of them, in queue order within each container, so a
/// container's LSNs follow it) and sets each outcome: the LSN, `None` when
/// the record's partition had changed (nothing of it was written), or why
/// the transaction failed.
struct Job {
    record: CommitRecord,
    outcome: OnceLock<std::result::Result<Option<i64>, BatchFailure>>,
}

/// Why a batch of commits failed, for each of them.
#[derive(Clone)]
enum BatchFailure {
    /// PostgreSQL rolled the transaction back for a conflict ([`conflict`]):
    /// nothing was written. The SQLSTATE and the server's message.
    RolledBack { sqlstate: String, reason: String },
    /// Anything else: the record may or may not be durable.
    Storage(String),
}

/// Storage in a PostgreSQL database (see the module docs).
pub struct PostgresStorage {
    config: Config,
    durability: Durability,
    /// The URL without its password, for messages.
    location: String,
    writer: Mutex<Conn>,
    /// Commits waiting for the write connection (see [`Job`]).
    queue: Mutex<Vec<Arc<Job>>>,
    readers: Vec<Mutex<Conn>>,
    next_reader: AtomicUsize,
    read_only: Option<String>,
    /// The policy of each container's index generation this node has seen.
    policies: Arc<index::Policies>,
    /// Wakes `builder`.
    wake: Arc<index::Wake>,
    /// Builds indexes after a policy change (`None` read-only); stopped
    /// when the store is dropped.
    _builder: Option<index::Builder>,
    #[cfg(test)]
    log: tests::StatementLog,
    /// The size of each batch committed (tests only).
    #[cfg(test)]
    batches: Mutex<Vec<usize>>,
}

impl PostgresStorage {
    /// Connects to the PostgreSQL database at `url` (`postgresql://user@host/db`,
    /// or `postgresql:///db?host=/run/postgresql` for a Unix socket) and
    /// creates the schema if it is missing. A server that accepts no
    /// writes (a standby) opens read-only ([`Storage::read_only`]).
    ///
    /// # Errors
    /// [`Error::BadRequest`] for a URL that does not parse, and
    /// [`Error::Storage`] when the server cannot be reached or the schema
    /// not created; both name the URL without its password.
    pub fn connect(url: &str, durability: Durability) -> Result<PostgresStorage> {
        let location = redact_url(url);
        let mut config = Config::from_str(url)
            .map_err(|e| Error::BadRequest(format!("bad PostgreSQL URL {location}: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("partita");
        }
        #[cfg(test)]
        let log = tests::StatementLog::default();
        let storage_conn = |config: &Config| {
            connect(
                config,
                durability,
                &location,
                #[cfg(test)]
                &log,
            )
        };
        let mut writer = storage_conn(&config)?;
        let bad = |context: &str| {
            let context = format!("{context} in {location}");
            move |e: postgres::Error| Error::storage(&context, e)
        };
        let read_only = writer
            .client
            .query_one("SHOW transaction_read_only", &[])
            .map_err(bad("ask whether the server accepts writes"))?
            .try_get::<_, String>(0)
            .map_err(bad("ask whether the server accepts writes"))?
            == "on";
        let read_only = if read_only {
            Some(format!(
                "the store at {location} is read-only: the server accepts no writes (a standby, or default_transaction_read_only); connect to the primary and restart"
            ))
        } else {
            // DDL takes locks that writes wait on, even when it changes
            // nothing (ALTER TABLE ... IF NOT EXISTS takes an exclusive one):
            // a node that restarts beside others running commits could
            // deadlock them, so the schema is created only when incomplete.
            let complete: bool = writer
                .client
                .query_one(SCHEMA_COMPLETE, &[])
                .and_then(|row| row.try_get(0))
                .map_err(bad("read the schema"))?;
            if !complete {
                writer
                    .client
                    .batch_execute(SCHEMA)
                    .map_err(bad("create the schema"))?;
            }
            None
        };
        let readers = (0..READERS)
            .map(|_| storage_conn(&config).map(Mutex::new))
            .collect::<Result<Vec<_>>>()?;
        let policies = Arc::new(index::Policies::default());
        let wake = Arc::new(index::Wake::default());
        let builder = match read_only {
            Some(_) => None,
            None => {
                let (config, location) = (config.clone(), location.clone());
                #[cfg(test)]
                let log = log.clone();
                Some(index::Builder::start(
                    Arc::clone(&wake),
                    Arc::clone(&policies),
                    move || {
                        connect(
                            &config,
                            durability,
                            &location,
                            #[cfg(test)]
                            &log,
                        )
                    },
                )?)
            }
        };
        Ok(PostgresStorage {
            config,
            durability,
            location: location.clone(),
            writer: Mutex::new(writer),
            queue: Mutex::new(Vec::new()),
            readers,
            next_reader: AtomicUsize::new(0),
            read_only,
            policies,
            wake,
            _builder: builder,
            #[cfg(test)]
            log,
            #[cfg(test)]
            batches: Mutex::new(Vec::new()),
        })
    }

    /// The URL the store was opened with, without its password.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Runs `f` on a free read connection (or the next one), reconnecting
    /// it first if the server closed it.
    fn read<T>(
        &self,
        what: &str,
        f: impl FnOnce(&mut Conn) -> std::result::Result<T, Failure>,
    ) -> Result<T> {
        let mut conn = self
            .readers
            .iter()
            .find_map(|r| r.try_lock())
            .unwrap_or_else(|| {
                let i = self.next_reader.fetch_add(1, Ordering::Relaxed) % self.readers.len();
                self.readers[i].lock()
            });
        if conn.client.is_closed() {
            *conn = connect(
                &self.config,
                self.durability,
                &self.location,
                #[cfg(test)]
                &self.log,
            )?;
        }
        f(&mut conn).map_err(|e| e.into_error(what, &self.location))
    }

    /// Runs `f` in a transaction on the write connection. A conflict
    /// PostgreSQL rolled it back for ([`conflict`]) is
    /// [`Error::WriteRolledBack`] (449): nothing was written.
    fn write<T>(
        &self,
        what: &str,
        f: impl FnOnce(&mut Conn) -> std::result::Result<T, Failure>,
    ) -> Result<T> {
        if let Some(reason) = &self.read_only {
            return Err(Error::ReadOnly(reason.clone()));
        }
        self.writer.lock().transaction(f).map_err(|e| {
            if let Failure::Postgres(pg) = &e
                && let Some(db) = conflict(pg)
            {
                return Error::WriteRolledBack {
                    what: format!("{what} in {}", self.location),
                    sqlstate: db.code().code().to_owned(),
                    reason: db.message().to_owned(),
                };
            }
            e.into_error(what, &self.location)
        })
    }

    /// The statements sent so far (tests only).
    #[cfg(test)]
    fn statement_log(&self) -> tests::StatementLog {
        self.log.clone()
    }
}

/// Opens one connection with the session settings of `durability`.
fn connect(
    config: &Config,
    durability: Durability,
    location: &str,
    #[cfg(test)] log: &tests::StatementLog,
) -> Result<Conn> {
    let mut client = config
        .connect(NoTls)
        .map_err(|e| Error::Storage(format!("cannot connect to {location}: {e}")))?;
    let synchronous = match durability {
        Durability::Full => "on",
        Durability::None => "off",
    };
    client
        .batch_execute(&format!("SET synchronous_commit = {synchronous}"))
        .map_err(|e| Error::storage(&format!("configure the session on {location}"), e))?;
    Ok(Conn {
        client: OwnClient(Some(client)),
        prepared: HashMap::new(),
        built: HashMap::new(),
        #[cfg(test)]
        log: log.clone(),
    })
}

/// The columns of [`UPSERT_DOCS`], one array each.
#[derive(Default)]
struct Upserts<'a> {
    ids: Vec<&'a str>,
    rids: Vec<i64>,
    seqs: Vec<i64>,
    tss: Vec<i64>,
    bodies: Vec<&'a str>,
}

/// How `changes.op` stores each [`ChangeKind`].
fn op_code(kind: ChangeKind) -> i16 {
    match kind {
        ChangeKind::Create => 0,
        ChangeKind::Replace => 1,
        ChangeKind::Delete => 2,
    }
}

fn parse_op(op: i16) -> Option<ChangeKind> {
    Some(match op {
        0 => ChangeKind::Create,
        1 => ChangeKind::Replace,
        2 => ChangeKind::Delete,
        _ => return None,
    })
}

/// A `bigint` column that holds an unsigned number.
fn unsigned(value: i64) -> u64 {
    value.max(0) as u64
}

impl Storage for PostgresStorage {
    fn load(&self) -> Result<Vec<LoadedContainer>> {
        self.read("load", |conn| {
            let containers = conn.query(LOAD_CONTAINERS, &[])?;
            let scripts = conn.query(LOAD_SCRIPTS, &[])?;
            let heads = conn.query(LOAD_HEADS, &[])?;
            Ok((containers, scripts, heads))
        })
        .and_then(|(containers, scripts, heads)| {
            let heads: HashMap<String, u64> = heads
                .iter()
                .map(|row| Ok((col(row, 0)?, unsigned(col(row, 1)?))))
                .collect::<Result<_>>()?;
            let mut loaded = Vec::with_capacity(containers.len());
            let mut index = HashMap::new();
            for row in &containers {
                let meta = container_meta(row)?;
                index.insert(meta.id.clone(), loaded.len());
                loaded.push(LoadedContainer {
                    max_seq: heads.get(&meta.id).copied().unwrap_or(0),
                    meta,
                    scripts: Vec::new(),
                });
            }
            for row in &scripts {
                let script = script_record(row)?;
                let &i = index.get(&script.container).ok_or_else(|| {
                    Error::Storage(format!(
                        "corrupt row in scripts: script {:?} of unknown container {:?}",
                        script.id, script.container
                    ))
                })?;
                let c = &mut loaded[i];
                c.max_seq = c.max_seq.max(script.version);
                c.scripts.push(script);
            }
            Ok(loaded)
        })
    }

    fn create_container(&self, meta: &ContainerMeta) -> Result<()> {
        let settings = settings_json(meta);
        self.write("create a container", |conn| {
            let version = catalog_moved(conn)?;
            let created = conn.execute(
                CREATE_CONTAINER,
                &[
                    &meta.id,
                    &i64::from(meta.ordinal),
                    &meta.partition_key_path,
                    &i64::from(meta.physical_partitions),
                    &settings,
                ],
            )?;
            if created == 0 {
                // Another node created it since this one read the catalog.
                return Err(Error::ContainerExists(meta.id.clone()).into());
            }
            // Empty: its index is built.
            conn.execute(index::NEW_CONTAINER_HEAD, &[&meta.id, &version])?;
            Ok(())
        })
    }

    fn delete_container(&self, id: &str) -> Result<()> {
        self.write("delete a container", |conn| {
            conn.execute(NEXT_CATALOG, &[])?;
            // The head first, as a commit and an index build lock it: one
            // waits for the deletion, then finds the container gone.
            conn.execute(DELETE_CONTAINER_HEAD, &[&id])?;
            let partitions = conn.query(CONTAINER_PARTITIONS, &[&id])?;
            for row in partitions {
                let hash: i64 = col(&row, 0)?;
                conn.execute(DELETE_PARTITION_DOCS, &[&id, &hash])?;
                conn.execute(DELETE_PARTITION_CHANGES, &[&id, &hash])?;
                conn.execute(DELETE_PARTITION_VERSIONS, &[&id, &hash])?;
                conn.execute(index::DELETE_PARTITION_ENTRIES, &[&id, &hash])?;
            }
            for sql in [DELETE_CONTAINER_SCRIPTS, DELETE_CONTAINER] {
                conn.execute(sql, &[&id])?;
            }
            Ok(())
        })?;
        self.policies.forget(id);
        Ok(())
    }

    fn update_container(&self, meta: &ContainerMeta) -> Result<()> {
        let settings = settings_json(meta);
        let changed = self.write("update a container", |conn| {
            let version = catalog_moved(conn)?;
            let changed = index::change_policy(conn, &meta.id, version, &meta.indexing_policy)?;
            conn.execute(UPDATE_CONTAINER, &[&meta.id, &settings])?;
            Ok(changed)
        })?;
        if changed {
            self.wake.wake();
        }
        Ok(())
    }

    fn put_script(&self, script: &ScriptRecord) -> Result<()> {
        let (trigger_type, trigger_operation) = match &script.trigger_names {
            Some(names) => (
                Some(names.trigger_type.clone()),
                Some(names.trigger_operation.clone()),
            ),
            None => (
                script.trigger_type.map(|t| t.to_string()),
                script.trigger_operation.map(|o| o.to_string()),
            ),
        };
        let body: &[u8] = &script.body;
        self.write("store a script", |conn| {
            conn.execute(NEXT_CATALOG, &[])?;
            conn.execute(
                PUT_SCRIPT,
                &[
                    &script.container,
                    &kind_name(script.kind),
                    &script.id,
                    &language_name(script.language),
                    &body,
                    &trigger_type,
                    &trigger_operation,
                    &(script.version as i64),
                    &(script.ts as i64),
                ],
            )
            .map(drop)
        })
    }

    fn delete_script(&self, container: &str, kind: ScriptKind, id: &str) -> Result<()> {
        self.write("delete a script", |conn| {
            conn.execute(NEXT_CATALOG, &[])?;
            conn.execute(DELETE_SCRIPT, &[&container, &kind_name(kind), &id])
                .map(drop)
        })
    }

    fn commit(&self, record: CommitRecord) -> Result<Lsn> {
        if let Some(reason) = &self.read_only {
            return Err(Error::ReadOnly(reason.clone()));
        }
        let job = Arc::new(Job {
            record,
            outcome: OnceLock::new(),
        });
        self.queue.lock().push(Arc::clone(&job));
        // Whoever holds the write connection commits everything queued; a
        // commit queued meanwhile is either in that batch or still queued
        // for the next holder, which may be its own caller.
        let mut writer = self.writer.lock();
        if job.outcome.get().is_none() {
            let batch = std::mem::take(&mut *self.queue.lock());
            #[cfg(test)]
            self.batches.lock().push(batch.len());
            // Container by container, so that two nodes' batches lock the
            // containers' log heads in one order and cannot deadlock (a
            // partition's version row is locked only by a holder of its
            // container's head).
            let mut order: Vec<usize> = (0..batch.len()).collect();
            order.sort_by(|&a, &b| batch[a].record.container.cmp(&batch[b].record.container));
            let outcome = writer
                .transaction(|conn| {
                    let mut lsns = vec![None; batch.len()];
                    for i in order {
                        lsns[i] = write_record(conn, &self.policies, &batch[i].record)?;
                    }
                    Ok(lsns)
                })
                .map_err(|e| {
                    if let Failure::Postgres(pg) = &e
                        && let Some(db) = conflict(pg)
                    {
                        return BatchFailure::RolledBack {
                            sqlstate: db.code().code().to_owned(),
                            reason: db.message().to_owned(),
                        };
                    }
                    BatchFailure::Storage(match e.into_error("commit", &self.location) {
                        Error::Storage(message) => message,
                        other => other.to_string(),
                    })
                });
            for (i, queued) in batch.iter().enumerate() {
                let _ = queued.outcome.set(match &outcome {
                    Ok(lsns) => Ok(lsns[i]),
                    Err(failure) => Err(failure.clone()),
                });
            }
        }
        drop(writer);
        match job.outcome.get() {
            Some(Ok(Some(lsn))) => Ok(Lsn(unsigned(*lsn))),
            Some(Ok(None)) => Err(Error::PartitionChanged {
                container: job.record.container.to_string(),
                partition_key: job.record.partition_key.clone(),
            }),
            Some(Err(BatchFailure::RolledBack { sqlstate, reason })) => Err(Error::RolledBack {
                container: job.record.container.to_string(),
                partition_key: job.record.partition_key.clone(),
                sqlstate: sqlstate.clone(),
                reason: reason.clone(),
            }),
            Some(Err(BatchFailure::Storage(message))) => Err(Error::Storage(message.clone())),
            None => Err(Error::Storage(format!(
                "commit in {}: the commit was not written",
                self.location
            ))),
        }
    }

    fn last_lsn(&self, container: &str) -> Result<Lsn> {
        let rows = self.read("read the change log's head", |conn| {
            conn.query(LAST_LSN, &[&container])
        })?;
        match rows.first() {
            Some(row) => Ok(Lsn(col::<i64>(row, 0)?.max(0) as u64)),
            None => Ok(Lsn::ZERO),
        }
    }

    fn read_changes(&self, container: &str, after: Lsn, max_changes: usize) -> Result<Vec<Change>> {
        let limit = i64::try_from(max_changes.max(1)).unwrap_or(i64::MAX);
        let after = i64::try_from(after.0).unwrap_or(i64::MAX);
        let rows = self.read("read the change log", |conn| {
            let mut rows = conn.query(READ_CHANGES, &[&container, &after, &limit])?;
            // Stopped at the limit: complete the last transaction, from
            // its partition (a transaction writes one).
            if rows.len() as i64 == limit
                && let Some(last) = rows.last()
            {
                let (lsn, idx, hash): (i64, i32, i64) =
                    (col(last, 0)?, col(last, 1)?, col(last, 7)?);
                rows.extend(conn.query(READ_REST_OF_CHANGE, &[&container, &hash, &lsn, &idx])?);
            }
            Ok(rows)
        })?;
        rows.iter().map(|row| change(container, row)).collect()
    }

    fn keeps_documents(&self) -> bool {
        true
    }

    fn read_partition(
        &self,
        container: &str,
        partition_key: &PartitionKey,
    ) -> Result<Vec<LoadedDocument>> {
        let pk = partition_key.to_json_array();
        let hash = pk_hash(&pk);
        let rows = self.read("read a partition", |conn| {
            conn.query(READ_PARTITION, &[&container, &hash, &pk])
        })?;
        rows.iter()
            .map(|row| loaded(container, &pk, col(row, 0)?, col(row, 1)?, col(row, 2)?))
            .collect()
    }

    fn read_documents(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        rids: &[u64],
    ) -> Result<Vec<LoadedDocument>> {
        let pk = partition_key.to_json_array();
        let hash = pk_hash(&pk);
        let rows = self.read("read documents", |conn| {
            index::documents(conn, container, hash, &pk, rids)
        })?;
        rows.iter()
            .map(|row| loaded(container, &pk, col(row, 0)?, col(row, 1)?, col(row, 2)?))
            .collect()
    }

    fn index_candidates(
        &self,
        container: &str,
        terms: &[crate::range_index::IndexTerm],
    ) -> Result<Option<Vec<(PartitionKey, u64)>>> {
        self.read("read the range index", |conn| {
            index::candidates(conn, &self.policies, &self.wake, container, terms)
        })
    }

    fn index_progress(&self, container: &str) -> Result<Option<u32>> {
        self.read("read the range index's state", |conn| {
            index::progress(conn, container)
        })
        .map(Some)
    }

    fn index_walk(&self, container: &str, walk: &IndexWalk<'_>) -> Result<Option<WalkPage>> {
        self.read("walk the range index", |conn| {
            index::walk(conn, &self.policies, &self.wake, container, walk)
        })
    }

    fn read_document(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        id: &str,
    ) -> Result<Option<LoadedDocument>> {
        let pk = partition_key.to_json_array();
        let hash = pk_hash(&pk);
        let rows = self.read("read a document", |conn| {
            conn.query(READ_DOCUMENT, &[&container, &hash, &pk, &id])
        })?;
        rows.first()
            .map(|row| loaded(container, &pk, id, col(row, 0)?, col(row, 1)?))
            .transpose()
    }

    fn partition_keys(&self, container: &str) -> Result<Vec<PartitionKey>> {
        let rows = self.read("list partitions", |conn| {
            conn.query(PARTITION_KEYS, &[&container])
        })?;
        rows.iter()
            .map(|row| super::stored_partition_key(container, col(row, 0)?))
            .collect()
    }

    fn wants_text(&self) -> bool {
        true
    }

    fn read_only(&self) -> Option<String> {
        self.read_only.clone()
    }

    fn shared(&self) -> bool {
        true
    }

    fn reserve_sequence(&self, container: &str, count: u64) -> Result<u64> {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        let rows = self.write("reserve sequence numbers", |conn| {
            conn.query(RESERVE_SEQUENCE, &[&container, &count])
        })?;
        match rows.first() {
            Some(row) => Ok(unsigned(col(row, 0)?)),
            None => Err(Error::Storage(format!(
                "reserve sequence numbers in {}: no row returned",
                self.location
            ))),
        }
    }

    fn partition_version(&self, container: &str, partition_key: &PartitionKey) -> Result<Versions> {
        let pk = partition_key.to_json_array();
        let hash = pk_hash(&pk);
        let rows = self.read("read a partition's version", |conn| {
            conn.query(READ_VERSION, &[&container, &hash, &pk])
        })?;
        let Some(row) = rows.first() else {
            return Ok(Versions::default());
        };
        // No row in `partition_versions`: version 0.
        let partition: Option<i64> = col(row, 0)?;
        let catalog: Option<i64> = col(row, 1)?;
        Ok(Versions {
            partition: partition.map_or(0, unsigned),
            catalog: catalog.map_or(0, unsigned),
        })
    }

    fn catalog_version(&self) -> Result<u64> {
        let rows = self.read("read the catalog's version", |conn| {
            conn.query(READ_CATALOG, &[])
        })?;
        match rows.first() {
            Some(row) => Ok(unsigned(col(row, 0)?)),
            None => Ok(0),
        }
    }
}

/// Writes one commit record in the open transaction of `conn`: takes the
/// container's next LSN, moves the partition's version from the one the
/// record was read at to the next, appends the log entries and applies the
/// changes to `docs`. Returns the LSN, or `None`, having written nothing,
/// when the partition is no longer at the record's version (another node
/// committed to it).
fn write_record(
    conn: &mut Conn,
    policies: &index::Policies,
    record: &CommitRecord,
) -> std::result::Result<Option<i64>, Failure> {
    let container: &str = &record.container;
    let pk = record.partition_key.to_json_array();
    let hash = pk_hash(&pk);
    let n = record.changes.len();
    let (mut idx, mut ids, mut ops) = (Vec::with_capacity(n), Vec::new(), Vec::new());
    let (mut seqs, mut rids, mut bodies, mut tss) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut max_seq = 0;
    for (i, change) in record.changes.iter().enumerate() {
        let body: Option<String> = match (&change.text, &change.document) {
            (Some(text), _) => Some(text.to_string()),
            (None, Some(doc)) => Some(doc.value().to_string()),
            (None, None) => None,
        };
        idx.push(i32::try_from(i).unwrap_or(i32::MAX));
        ids.push(&*change.id);
        ops.push(op_code(change.kind));
        seqs.push(change.seq as i64);
        rids.push(change.rid as i64);
        bodies.push(body);
        tss.push(change.document.as_ref().map_or_else(now_secs, Document::ts) as i64);
        max_seq = max_seq.max(change.seq as i64);
    }
    // A document's last change in the record is its state after it.
    let mut upserts = Upserts::default();
    let mut deletes: Vec<&str> = Vec::new();
    // The entries replaced: those of every document that existed before.
    let existed: BTreeSet<i64> = record
        .changes
        .iter()
        .filter_map(|c| c.before_rid)
        .map(|rid| rid as i64)
        .collect();
    let mut documents: Vec<(i64, &serde_json::Value)> = Vec::new();
    let mut seen = HashSet::new();
    for i in (0..n).rev() {
        if !seen.insert(ids[i]) {
            continue;
        }
        match &bodies[i] {
            Some(body) => {
                upserts.ids.push(ids[i]);
                upserts.rids.push(rids[i]);
                upserts.seqs.push(seqs[i]);
                upserts.tss.push(tss[i]);
                upserts.bodies.push(body);
                if let Some(document) = &record.changes[i].document {
                    documents.push((rids[i], document.value()));
                }
            }
            None => deletes.push(ids[i]),
        }
    }
    let head = conn.query(NEXT_LSN, &[&container, &max_seq])?;
    let (lsn, generation): (i64, i64) = match head.first() {
        Some(row) => (col(row, 0)?, col(row, 1)?),
        None => return Err(Error::Storage("no LSN returned".to_owned()).into()),
    };
    // After the head: see `PostgresStorage::commit` on lock order.
    let moved = if record.base_version == 0 {
        conn.query(FIRST_VERSION, &[&container, &hash, &pk])?
    } else {
        let base = i64::try_from(record.base_version).unwrap_or(i64::MAX);
        conn.query(NEXT_VERSION, &[&container, &hash, &pk, &base])?
    };
    if moved.is_empty() {
        conn.execute(UNDO_LSN, &[&container])?;
        return Ok(None);
    }
    conn.execute(
        INSERT_CHANGES,
        &[
            &container, &hash, &lsn, &pk, &idx, &ids, &ops, &seqs, &rids, &bodies, &tss,
        ],
    )?;
    // The range index, under the policy of the generation the head row
    // holds (see `index`): the old entries go first, a statement per
    // document (see `index::DELETE_ENTRIES`).
    for rid in &existed {
        conn.execute(index::DELETE_ENTRIES, &[&container, &hash, &pk, rid])?;
    }
    if let Some(policy) = policies.of_generation(conn, container, generation)? {
        let mut entries = index::Entries::default();
        for (rid, document) in documents {
            entries.add(&policy, &pk, rid, document);
        }
        entries.insert(conn, container, hash)?;
    }
    if !upserts.ids.is_empty() {
        let u = &upserts;
        conn.execute(
            UPSERT_DOCS,
            &[
                &container, &hash, &pk, &u.ids, &u.rids, &u.seqs, &u.tss, &u.bodies,
            ],
        )?;
    }
    if !deletes.is_empty() {
        conn.execute(DELETE_DOCS, &[&container, &hash, &pk, &deletes])?;
    }
    Ok(Some(lsn))
}

/// Moves the catalog version ([`NEXT_CATALOG`]); the new version.
fn catalog_moved(conn: &mut Conn) -> std::result::Result<i64, Failure> {
    let rows = conn.query(NEXT_CATALOG, &[])?;
    match rows.first() {
        Some(row) => Ok(col(row, 0)?),
        None => Err(Error::Storage("no catalog version returned".to_owned()).into()),
    }
}

/// A `docs` row as a read returns it.
fn loaded(container: &str, pk: &str, id: &str, rid: i64, body: &str) -> Result<LoadedDocument> {
    let value: serde_json::Value = serde_json::from_str(body).map_err(|e| {
        Error::Storage(format!(
            "corrupt row in docs: container {container:?}, pk {pk}, id {id:?}: {e}"
        ))
    })?;
    Ok(LoadedDocument {
        rid: unsigned(rid),
        size: body.len(),
        document: Document::new(value),
    })
}

/// A `changes` row (the columns of [`READ_CHANGES`]) as a [`Change`].
fn change(container: &str, row: &Row) -> Result<Change> {
    let lsn = Lsn(unsigned(col(row, 0)?));
    let corrupt = |what: String| {
        Error::Storage(format!(
            "corrupt change log entry {lsn} of {container:?}: {what}"
        ))
    };
    let pk: &str = col(row, 2)?;
    let op: i16 = col(row, 4)?;
    let body: Option<&str> = col(row, 5)?;
    let document = match body {
        Some(text) => Some(Document::new(
            serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?,
        )),
        None => None,
    };
    Ok(Change {
        lsn,
        partition_key: PartitionKey::parse(pk).map_err(|e| corrupt(e.to_string()))?,
        id: col(row, 3)?,
        kind: parse_op(op).ok_or_else(|| corrupt(format!("unknown op {op}")))?,
        document,
        ts: unsigned(col(row, 6)?),
    })
}

/// A `containers` row (the columns of [`LOAD_CONTAINERS`]).
fn container_meta(row: &Row) -> Result<ContainerMeta> {
    let id: String = col(row, 0)?;
    let corrupt = |what: String| Error::Storage(format!("corrupt container {id:?}: {what}"));
    let number = |i: usize| u32::try_from(col::<i64>(row, i)?).map_err(|e| corrupt(e.to_string()));
    let mut meta = ContainerMeta {
        ordinal: number(1)?,
        partition_key_path: col(row, 2)?,
        physical_partitions: number(3)?,
        default_ttl: None,
        unique_keys: Vec::new(),
        database_rid: None,
        computed_properties: Vec::new(),
        indexing_policy: crate::IndexingPolicy::default(),
        id: id.clone(),
    };
    apply_settings(&mut meta, col(row, 4)?).map_err(|e| corrupt(format!("settings: {e}")))?;
    Ok(meta)
}

/// A `scripts` row (the columns of [`LOAD_SCRIPTS`]).
fn script_record(row: &Row) -> Result<ScriptRecord> {
    let container: String = col(row, 0)?;
    let id: String = col(row, 2)?;
    let corrupt = |what: &str| {
        Error::Storage(format!(
            "corrupt row in scripts: container {container:?}, id {id:?}: {what}"
        ))
    };
    let kind = parse_kind(col(row, 1)?).ok_or_else(|| corrupt("kind"))?;
    let language = parse_language(col(row, 3)?).ok_or_else(|| corrupt("language"))?;
    let body: Vec<u8> = col(row, 4)?;
    let type_name: Option<String> = col(row, 5)?;
    let operation_name: Option<String> = col(row, 6)?;
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
        (Some(t), Some(o), Some(tn), Some(on)) if t.to_string() != tn || o.to_string() != on => {
            Some(TriggerNames {
                trigger_type: tn,
                trigger_operation: on,
            })
        }
        _ => None,
    };
    Ok(ScriptRecord {
        kind,
        language,
        body: body.into(),
        trigger_type,
        trigger_operation,
        trigger_names,
        version: unsigned(col(row, 7)?),
        ts: unsigned(col(row, 8)?),
        container,
        id,
    })
}
