//! The range index of the PostgreSQL storage ([`crate::range_index`]).
//!
//! `idx(container, pk_hash, pk, rid, path, value)` holds every document's
//! entries under its container's policy, keyed (container, pk_hash, …)
//! like `docs`, so a commit writes them in its own partition, in the same
//! PostgreSQL transaction as the document: `idx` always describes `docs`
//! exactly. Reads span partitions, through `idx_by_value` (container,
//! path, value); `value` is `bytea`, which PostgreSQL compares as
//! `memcmp`, as the keys need.
//!
//! THE POLICY, ACROSS NODES
//! ========================
//!
//! Which policy the entries follow is in `log_heads`, whose row every
//! commit of the container locks first (see the module docs of
//! `storage/postgres.rs`):
//!
//! ```text
//!   log_heads(container, lsn, max_seq, idx_gen, idx_built, idx_cursor)
//!     idx_gen     the catalog version at which the policy last changed
//!     idx_built   = idx_gen once every document has its entries under it
//!     idx_cursor  the last pk_hash a build indexed
//! ```
//!
//! A commit learns `idx_gen` from the head row it locks (`NEXT_LSN`
//! returns it) and writes its entries under that generation's policy
//! (`containers.settings`, read again when the generation is not the one
//! this node holds). A policy change (in `update_container`) moves
//! `idx_gen` under the same lock, so no commit writes under an older
//! policy after it; the index is then not ready, and a build, on any node,
//! replaces the entries of each partition in `pk_hash` order, a thousand
//! documents a step, each step a transaction that holds the head row (so
//! it never races a commit of the container) and moves `idx_cursor`; the
//! last sets `idx_built`. A node that dies mid-build leaves the cursor for
//! the next.
//!
//! A read of the index answers only when, in one statement before it and
//! one after it, `idx_built = idx_gen` with the same generation: the
//! generation only grows and `idx_built` only reaches it, so the entries
//! it read were whole. Otherwise it answers `None`, and the query scans.
//!
//! Each store runs one builder thread, woken when this node changes a
//! policy, when it opens, and when a read finds an index not ready (a
//! policy another node changed, a build it left unfinished).

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use host_api::PartitionKey;
use parking_lot::{Condvar, Mutex};
use postgres::types::ToSql;
use serde_json::Value;

use super::{Conn, Failure, col, unsigned};
use crate::error::{Error, Result};
use crate::indexing::IndexingPolicy;
use crate::range_index::{self, Accept, IndexTerm, Step, WalkOrder};
use crate::storage::{ContainerMeta, IndexWalk, WalkPage};

// Statements on `idx`, each for one (container, pk_hash) = ($1, $2).

/// Removes the entries of one replaced or deleted document, by the rid
/// it had before the record ([`RecordChange::before_rid`]).
///
/// One rid, as a scalar: PostgreSQL then always uses all four columns
/// as the key of an `idx_pkey` scan. Before a table has statistics (a
/// new database, until autovacuum's first ANALYZE) the planner guesses
/// that `(container, pk_hash, pk)` matches one row, and takes an array
/// of rids, or rids looked up in `docs` by id, as a filter over every
/// entry of the partition (with the lookup, each entry probing
/// `docs_by_rid`): a commit's cost then grew with its partition.
///
/// [`RecordChange::before_rid`]: crate::storage::RecordChange::before_rid
pub(super) const DELETE_ENTRIES: &str =
    "DELETE FROM idx WHERE container = $1 AND pk_hash = $2 AND pk = $3 AND rid = $4";
/// Adds entries (a path through array elements may have several per
/// document), once each.
pub(super) const INSERT_ENTRIES: &str = "INSERT INTO idx (container, pk_hash, pk, rid, path, value) \
     SELECT $1, $2, e.pk, e.rid, e.path, e.value \
     FROM unnest($3::text[], $4::int8[], $5::text[], $6::bytea[]) AS e(pk, rid, path, value) \
     ON CONFLICT (container, pk_hash, pk, rid, path, value) DO NOTHING";
/// A partition's entries, for a build or a deleted container.
pub(super) const DELETE_PARTITION_ENTRIES: &str =
    "DELETE FROM idx WHERE container = $1 AND pk_hash = $2";
/// The documents of the partitions of one hash, for a build.
pub(super) const BUILD_READ_DOCS: &str =
    "SELECT pk, rid, body FROM docs WHERE container = $1 AND pk_hash = $2";
/// Documents of one partition by rid.
pub(super) const READ_DOCUMENTS: &str = "SELECT id, rid, body FROM docs \
     WHERE container = $1 AND pk_hash = $2 AND pk = $3 AND rid = ANY($4::int8[])";

// Reads that span partitions.

/// The first partitions a build indexes.
pub(super) const BUILD_FIRST_PARTITIONS: &str =
    "SELECT DISTINCT pk_hash FROM docs WHERE container = $1 ORDER BY pk_hash LIMIT $2";
/// The next partitions a build indexes, after its cursor.
pub(super) const BUILD_NEXT_PARTITIONS: &str = "SELECT DISTINCT pk_hash FROM docs \
     WHERE container = $1 AND pk_hash > $2 ORDER BY pk_hash LIMIT $3";
/// How every read of the index a query makes begins (the rest is built
/// from its terms): the row `i` is an entry at the path `$2`.
#[cfg(test)]
pub(super) const INDEX_READS: [&str; 3] = [CANDIDATES_SQL, WALK_SQL, COUNT_SQL];
const CANDIDATES_SQL: &str =
    "SELECT i.pk, i.rid FROM idx AS i WHERE i.container = $1 AND i.path = $2";
const WALK_SQL: &str =
    "SELECT i.value, i.pk, i.rid FROM idx AS i WHERE i.container = $1 AND i.path = $2";
const COUNT_SQL: &str =
    "SELECT COUNT(*) FROM (SELECT 1 FROM idx AS i WHERE i.container = $1 AND i.path = $2";

// Statements on the small tables.

/// The state of a container's index, and its settings unless its
/// generation is `$2` (the one this node holds).
const READ_INDEX_STATE: &str = "SELECT idx_gen, COALESCE(idx_built = idx_gen, false), \
     CASE WHEN idx_gen = $2 THEN NULL ELSE (SELECT settings FROM containers WHERE id = $1) END \
     FROM log_heads WHERE container = $1";
/// A container's settings.
const READ_SETTINGS: &str = "SELECT settings FROM containers WHERE id = $1";
/// A new policy: a new generation, not built.
pub(super) const NEW_GENERATION: &str = "INSERT INTO log_heads (container, lsn, max_seq, idx_gen) \
     VALUES ($1, 0, 0, $2) ON CONFLICT (container) DO UPDATE \
     SET idx_gen = EXCLUDED.idx_gen, idx_cursor = NULL";
/// A new (empty) container: its index is built.
pub(super) const NEW_CONTAINER_HEAD: &str = "INSERT INTO log_heads (container, lsn, max_seq, idx_gen, idx_built) \
     VALUES ($1, 0, 0, $2, $2) ON CONFLICT (container) DO UPDATE \
     SET idx_gen = EXCLUDED.idx_gen, idx_built = EXCLUDED.idx_built, idx_cursor = NULL";
/// Locks a container's head for a build step, and returns its state.
const BUILD_LOCK: &str = "UPDATE log_heads SET idx_cursor = idx_cursor WHERE container = $1 \
     RETURNING idx_gen, idx_built, idx_cursor";
const BUILD_CURSOR: &str = "UPDATE log_heads SET idx_cursor = $2 WHERE container = $1";
const BUILD_DONE: &str =
    "UPDATE log_heads SET idx_built = idx_gen, idx_cursor = NULL WHERE container = $1";
/// The containers whose index is not built.
const UNBUILT: &str = "SELECT container FROM log_heads WHERE idx_built IS DISTINCT FROM idx_gen";

/// About how many documents a build step indexes (in tests, a partition
/// a step, so that builds take several).
const BUILD_STEP: usize = if cfg!(test) { 1 } else { 1000 };
/// The partitions a build step lists at a time.
const BUILD_PARTITIONS: i64 = 256;
/// How long the builder waits before trying again after a failure.
const RETRY: Duration = Duration::from_secs(1);

/// One generation's policy, with what it says of each path so far
/// (asking the policy parses its paths).
pub(super) struct IndexPolicy {
    generation: i64,
    policy: IndexingPolicy,
    indexed: Mutex<HashMap<String, bool>>,
}

impl IndexPolicy {
    fn is_indexed(&self, path: &[Step<&str>]) -> bool {
        let key = range_index::steps_key(path);
        if let Some(&indexed) = self.indexed.lock().get(&key) {
            return indexed;
        }
        let indexed = range_index::is_indexed(&self.policy, path);
        self.indexed.lock().insert(key, indexed);
        indexed
    }

    /// The entries of `document`.
    fn entries(&self, document: &Value) -> BTreeSet<(String, Vec<u8>)> {
        range_index::entries(document, &self.policy, &mut |path| self.is_indexed(path))
    }

    /// `terms` on paths this policy indexes, with their path keys.
    fn answerable(&self, terms: &[IndexTerm]) -> Vec<(IndexTerm, String)> {
        terms
            .iter()
            .filter(|t| {
                let path: Vec<Step<&str>> = t.path.iter().map(Step::as_ref).collect();
                self.is_indexed(&path)
            })
            .map(|t| (t.clone(), t.path_key()))
            .collect()
    }
}

/// The policy of each container's latest generation this node has seen.
#[derive(Default)]
pub(super) struct Policies(Mutex<HashMap<String, Arc<IndexPolicy>>>);

impl Policies {
    fn cached(&self, container: &str) -> Option<Arc<IndexPolicy>> {
        self.0.lock().get(container).cloned()
    }

    /// Remembers `settings` as the policy of `generation`.
    fn put(&self, container: &str, generation: i64, settings: &str) -> Result<Arc<IndexPolicy>> {
        let policy = Arc::new(IndexPolicy {
            generation,
            policy: policy_of(container, settings)?,
            indexed: Mutex::new(HashMap::new()),
        });
        self.0
            .lock()
            .insert(container.to_owned(), Arc::clone(&policy));
        Ok(policy)
    }

    /// The policy of `generation`, read from `containers` unless held:
    /// the caller holds the container's head row, so the settings there
    /// are that generation's. `None` for a container that is gone.
    pub(super) fn of_generation(
        &self,
        conn: &mut Conn,
        container: &str,
        generation: i64,
    ) -> std::result::Result<Option<Arc<IndexPolicy>>, Failure> {
        if let Some(policy) = self.cached(container)
            && policy.generation == generation
        {
            return Ok(Some(policy));
        }
        let rows = conn.query(READ_SETTINGS, &[&container])?;
        match rows.first() {
            Some(row) => Ok(Some(self.put(container, generation, col(row, 0)?)?)),
            None => Ok(None),
        }
    }

    /// Forgets a deleted container.
    pub(super) fn forget(&self, container: &str) {
        self.0.lock().remove(container);
    }
}

/// The indexing policy in a container's `settings`.
fn policy_of(container: &str, settings: &str) -> Result<IndexingPolicy> {
    let mut meta = ContainerMeta {
        id: container.to_owned(),
        ordinal: 0,
        partition_key_path: String::new(),
        physical_partitions: 1,
        default_ttl: None,
        unique_keys: Vec::new(),
        database_rid: None,
        computed_properties: Vec::new(),
        indexing_policy: IndexingPolicy::default(),
    };
    crate::settings::apply_settings(&mut meta, settings)
        .map_err(|e| Error::Storage(format!("corrupt container {container:?}: settings: {e}")))?;
    Ok(meta.indexing_policy)
}

/// In the transaction of a container's new settings, before they are
/// written: unless `policy` is the one the container has, its index moves
/// to the generation `version` (the catalog's new version), not built.
/// Returns whether it did.
pub(super) fn change_policy(
    conn: &mut Conn,
    container: &str,
    version: i64,
    policy: &IndexingPolicy,
) -> std::result::Result<bool, Failure> {
    let rows = conn.query(READ_SETTINGS, &[&container])?;
    let same = match rows.first() {
        // Settings that do not parse: index again.
        Some(row) => policy_of(container, col(row, 0)?).is_ok_and(|old| old == *policy),
        None => false,
    };
    if !same {
        conn.execute(NEW_GENERATION, &[&container, &version])?;
    }
    Ok(!same)
}

/// The arrays of [`INSERT_ENTRIES`].
#[derive(Default)]
pub(super) struct Entries<'a> {
    pks: Vec<&'a str>,
    rids: Vec<i64>,
    paths: Vec<String>,
    values: Vec<Vec<u8>>,
}

impl<'a> Entries<'a> {
    /// Adds the entries of the document `rid` of `pk`.
    pub(super) fn add(&mut self, policy: &IndexPolicy, pk: &'a str, rid: i64, document: &Value) {
        for (path, value) in policy.entries(document) {
            self.pks.push(pk);
            self.rids.push(rid);
            self.paths.push(path);
            self.values.push(value);
        }
    }

    /// Inserts them, in the partition `hash`.
    pub(super) fn insert(
        &self,
        conn: &mut Conn,
        container: &str,
        hash: i64,
    ) -> std::result::Result<(), Failure> {
        if self.pks.is_empty() {
            return Ok(());
        }
        conn.execute(
            INSERT_ENTRIES,
            &[
                &container,
                &hash,
                &self.pks,
                &self.rids,
                &self.paths,
                &self.values,
            ],
        )
        .map(drop)
    }
}

/// A statement's parameters, built with its text.
#[derive(Default)]
struct Params(Vec<Box<dyn ToSql + Sync>>);

impl Params {
    /// Adds `value`; its placeholder.
    fn push(&mut self, value: impl ToSql + Sync + 'static) -> String {
        self.0.push(Box::new(value));
        format!("${}", self.0.len())
    }

    fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.0.iter().map(|p| p.as_ref()).collect()
    }
}

/// `AND <column> …` for the keys `accept` accepts (nothing for every key).
fn accept_sql(column: &str, accept: &Accept, params: &mut Params) -> String {
    match accept {
        Accept::Values(values) => {
            format!(
                " AND {column} = ANY({}::bytea[])",
                params.push(values.clone())
            )
        }
        Accept::Range(low, high) => {
            let mut sql = String::new();
            for (bound, inclusive, exclusive) in [(low, ">=", ">"), (high, "<=", "<")] {
                let (op, key) = match bound {
                    Bound::Included(key) => (inclusive, key),
                    Bound::Excluded(key) => (exclusive, key),
                    Bound::Unbounded => continue,
                };
                sql.push_str(&format!(" AND {column} {op} {}", params.push(key.clone())));
            }
            sql
        }
    }
}

/// A condition on the entry `i` for each of `terms`: the same document
/// has an entry that satisfies it (found by `idx`'s key).
fn term_filters(terms: &[(IndexTerm, String)], params: &mut Params) -> String {
    let mut sql = String::new();
    for (term, path) in terms {
        let path = params.push(path.clone());
        sql.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM idx AS t WHERE t.container = $1 AND t.pk_hash = i.pk_hash \
             AND t.pk = i.pk AND t.rid = i.rid AND t.path = {path}{})",
            accept_sql("t.value", &term.accept, params)
        ));
    }
    sql
}

/// The policy of `container`'s index when it is built (see the module
/// docs), waking `builder` when it is not.
fn ready_policy(
    conn: &mut Conn,
    policies: &Policies,
    builder: &Wake,
    container: &str,
) -> std::result::Result<Option<Arc<IndexPolicy>>, Failure> {
    let cached = policies.cached(container);
    let held = cached.as_ref().map_or(-1, |p| p.generation);
    let rows = conn.query(READ_INDEX_STATE, &[&container, &held])?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let generation: i64 = col(row, 0)?;
    let built: bool = col(row, 1)?;
    if !built {
        builder.wake();
        return Ok(None);
    }
    let settings: Option<&str> = col(row, 2)?;
    Ok(match (settings, cached) {
        (Some(settings), _) => Some(policies.put(container, generation, settings)?),
        (None, Some(policy)) if policy.generation == generation => Some(policy),
        // The container is gone.
        (None, _) => None,
    })
}

/// How far `container`'s index is built, in percent: 100 once built, 0
/// until then (a build goes by partition hashes, which say little of how
/// many documents are left).
pub(super) fn progress(conn: &mut Conn, container: &str) -> std::result::Result<u32, Failure> {
    let rows = conn.query(READ_INDEX_STATE, &[&container, &-1i64])?;
    Ok(match rows.first() {
        Some(row) if col::<bool>(row, 1)? => 100,
        Some(_) => 0,
        None => 100,
    })
}

/// Whether `container`'s index is still built at `policy`'s generation.
fn still_ready(
    conn: &mut Conn,
    container: &str,
    policy: &IndexPolicy,
) -> std::result::Result<bool, Failure> {
    let rows = conn.query(READ_INDEX_STATE, &[&container, &policy.generation])?;
    Ok(match rows.first() {
        Some(row) => col::<i64>(row, 0)? == policy.generation && col::<bool>(row, 1)?,
        None => false,
    })
}

/// Parses stored partition keys, each text once in a row.
struct PartitionKeys<'c> {
    container: &'c str,
    last: Option<(String, PartitionKey)>,
}

impl PartitionKeys<'_> {
    fn parse(&mut self, pk: String) -> Result<PartitionKey> {
        if let Some((text, key)) = &self.last
            && *text == pk
        {
            return Ok(key.clone());
        }
        let key = super::super::stored_partition_key(self.container, &pk)?;
        self.last = Some((pk, key.clone()));
        Ok(key)
    }
}

/// [`crate::storage::Storage::index_candidates`].
pub(super) fn candidates(
    conn: &mut Conn,
    policies: &Policies,
    builder: &Wake,
    container: &str,
    terms: &[IndexTerm],
) -> std::result::Result<Option<Vec<(PartitionKey, u64)>>, Failure> {
    let Some(policy) = ready_policy(conn, policies, builder, container)? else {
        return Ok(None);
    };
    // A term on a path the policy leaves out: no answer, rather than the
    // candidates of the others. The executor takes the number of
    // candidates as a COUNT when its own copy of the policy indexes every
    // term, and that copy may be older than this one (another node
    // changed the policy, and this node has not read the catalog since).
    let asked = terms.len();
    let mut terms = policy.answerable(terms);
    if terms.len() < asked {
        return Ok(None);
    }
    // The term with the fewest entries names the candidates, the others
    // filter them.
    if terms.len() > 1 {
        let best = range_index::most_selective(terms.len(), |i, cap| {
            let (term, path) = &terms[i];
            let mut params = Params::default();
            params.push(container.to_owned());
            params.push(path.clone());
            let accepted = accept_sql("i.value", &term.accept, &mut params);
            let limit = params.push(cap);
            let sql = format!("{COUNT_SQL}{accepted} LIMIT {limit}) AS n");
            let rows = conn.query_built(sql, &params.refs())?;
            Ok::<_, Failure>(match rows.first() {
                Some(row) => col(row, 0)?,
                None => 0,
            })
        })?;
        terms.swap(0, best);
    }
    let Some(((first, path), rest)) = terms.split_first() else {
        return Ok(None);
    };
    let mut params = Params::default();
    params.push(container.to_owned());
    params.push(path.clone());
    let accepted = accept_sql("i.value", &first.accept, &mut params);
    let sql = format!(
        "{CANDIDATES_SQL}{accepted}{}",
        term_filters(rest, &mut params)
    );
    let rows = conn.query_built(sql, &params.refs())?;
    if !still_ready(conn, container, &policy)? {
        return Ok(None);
    }
    let mut keys = PartitionKeys {
        container,
        last: None,
    };
    let mut found = Vec::with_capacity(rows.len());
    for row in &rows {
        found.push((keys.parse(col(row, 0)?)?, unsigned(col(row, 1)?)));
    }
    found.sort();
    found.dedup();
    Ok(Some(found))
}

/// [`crate::storage::Storage::index_walk`].
pub(super) fn walk(
    conn: &mut Conn,
    policies: &Policies,
    builder: &Wake,
    container: &str,
    walk: &IndexWalk<'_>,
) -> std::result::Result<Option<WalkPage>, Failure> {
    let Some(policy) = ready_policy(conn, policies, builder, container)? else {
        return Ok(None);
    };
    let Some(walked) = walk.order.path_key(&policy.policy) else {
        return Ok(None);
    };
    let (cmp, direction) = if walk.descending {
        ("<=", "DESC")
    } else {
        (">=", "ASC")
    };
    let mut params = Params::default();
    params.push(container.to_owned());
    params.push(walked);
    let from = match walk.from {
        Some(key) => format!(" AND i.value {cmp} {}", params.push(key.to_vec())),
        None => String::new(),
    };
    // A term on the walked path bounds the walk itself (a document has
    // one entry at a path), one a prefixed walk's prefix fixes holds for
    // every entry; the others are checked beside it. A term the policy
    // leaves out only offers more documents, which the query filters.
    let mut filters = String::new();
    let mut others = Vec::new();
    for (term, path) in policy.answerable(walk.terms) {
        match walk.order {
            WalkOrder::Path(labels) if term.is_at(labels) => {
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
    filters.push_str(&term_filters(&others, &mut params));
    // One row past the page: its key bounds every document left.
    let limit = params.push(i64::try_from(walk.limit.saturating_add(1)).unwrap_or(i64::MAX));
    let sql = format!("{WALK_SQL}{from}{filters} ORDER BY i.value {direction} LIMIT {limit}");
    let mut rows = conn.query_built(sql, &params.refs())?;
    if !still_ready(conn, container, &policy)? {
        return Ok(None);
    }
    let through = match rows.len() > walk.limit {
        true => rows.pop().map(|row| col::<Vec<u8>>(&row, 0)).transpose()?,
        false => None,
    };
    let mut keys = PartitionKeys {
        container,
        last: None,
    };
    let mut entries = Vec::with_capacity(rows.len());
    for row in &rows {
        entries.push((keys.parse(col(row, 1)?)?, unsigned(col(row, 2)?)));
    }
    Ok(Some((entries, through)))
}

/// Wakes the builder thread.
#[derive(Default)]
pub(super) struct Wake {
    state: Mutex<WakeState>,
    cv: Condvar,
}

#[derive(Default)]
struct WakeState {
    pending: bool,
    stop: bool,
}

impl Wake {
    /// Asks the builder to look for indexes to build.
    pub(super) fn wake(&self) {
        self.state.lock().pending = true;
        self.cv.notify_all();
    }

    /// Waits until woken (`true`) or stopped (`false`), or `timeout` passed
    /// (`true`).
    fn wait(&self, timeout: Option<Duration>) -> bool {
        let mut state = self.state.lock();
        while !state.pending && !state.stop {
            match timeout {
                Some(timeout) => {
                    if self.cv.wait_for(&mut state, timeout).timed_out() {
                        break;
                    }
                }
                None => self.cv.wait(&mut state),
            }
        }
        state.pending = false;
        !state.stop
    }

    fn stopped(&self) -> bool {
        self.state.lock().stop
    }
}

/// The builder thread of a store (see the module docs); stopped and
/// joined when dropped.
pub(super) struct Builder {
    wake: Arc<Wake>,
    thread: Option<JoinHandle<()>>,
}

impl Builder {
    /// Starts the thread, which connects with `connect` when it first
    /// has work, and looks for work at once.
    pub(super) fn start(
        wake: Arc<Wake>,
        policies: Arc<Policies>,
        connect: impl Fn() -> Result<Conn> + Send + 'static,
    ) -> Result<Builder> {
        let woken = Arc::clone(&wake);
        woken.wake();
        let thread = std::thread::Builder::new()
            .name("partita-pg-index".to_owned())
            .spawn(move || run_builder(&woken, &policies, &connect))
            .map_err(|e| Error::storage("start the index builder", e))?;
        Ok(Builder {
            wake,
            thread: Some(thread),
        })
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        self.wake.state.lock().stop = true;
        self.wake.cv.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run_builder(wake: &Wake, policies: &Policies, connect: &dyn Fn() -> Result<Conn>) {
    let mut conn: Option<Conn> = None;
    let mut timeout = None;
    while wake.wait(timeout) {
        timeout = None;
        let built = (|| -> std::result::Result<(), Failure> {
            let conn = match &mut conn {
                Some(conn) if !conn.client.is_closed() => conn,
                slot => slot.insert(connect()?),
            };
            let unbuilt = conn.query(UNBUILT, &[])?;
            for row in &unbuilt {
                let container: String = col(row, 0)?;
                while !wake.stopped() && build_step(conn, policies, &container)? {}
            }
            Ok(())
        })();
        // Try again later: the server may be back, the row unlocked.
        if built.is_err() {
            conn = None;
            timeout = Some(RETRY);
        }
    }
}

/// One step of building `container`'s index, in one transaction holding
/// its head row: replaces the entries of the partitions after the cursor
/// until about [`BUILD_STEP`] documents are indexed, and marks the index
/// built after the last. Returns whether there is more to do.
fn build_step(
    conn: &mut Conn,
    policies: &Policies,
    container: &str,
) -> std::result::Result<bool, Failure> {
    conn.transaction(|conn| {
        let head = conn.query(BUILD_LOCK, &[&container])?;
        let Some(head) = head.first() else {
            return Ok(false);
        };
        let generation: i64 = col(head, 0)?;
        let built: Option<i64> = col(head, 1)?;
        let cursor: Option<i64> = col(head, 2)?;
        if built == Some(generation) {
            return Ok(false);
        }
        let Some(policy) = policies.of_generation(conn, container, generation)? else {
            return Ok(false);
        };
        let hashes = match cursor {
            None => conn.query(BUILD_FIRST_PARTITIONS, &[&container, &BUILD_PARTITIONS])?,
            Some(after) => conn.query(
                BUILD_NEXT_PARTITIONS,
                &[&container, &after, &BUILD_PARTITIONS],
            )?,
        };
        let mut n_docs = 0;
        let mut last = None;
        let mut visited = 0;
        for row in &hashes {
            let hash: i64 = col(row, 0)?;
            conn.execute(DELETE_PARTITION_ENTRIES, &[&container, &hash])?;
            let docs = conn.query(BUILD_READ_DOCS, &[&container, &hash])?;
            let mut entries = Entries::default();
            for doc in &docs {
                let pk: &str = col(doc, 0)?;
                let rid: i64 = col(doc, 1)?;
                // A body that does not parse cannot be read either.
                if let Ok(value) = serde_json::from_str::<Value>(col(doc, 2)?) {
                    entries.add(&policy, pk, rid, &value);
                }
            }
            entries.insert(conn, container, hash)?;
            n_docs += docs.len();
            visited += 1;
            last = Some(hash);
            if n_docs >= BUILD_STEP {
                break;
            }
        }
        if visited == hashes.len() && (hashes.len() as i64) < BUILD_PARTITIONS {
            conn.execute(BUILD_DONE, &[&container])?;
            return Ok(false);
        }
        conn.execute(BUILD_CURSOR, &[&container, &last])?;
        Ok(true)
    })
}

/// [`crate::storage::Storage::read_documents`]: the `docs` rows of `rids`.
pub(super) fn documents(
    conn: &mut Conn,
    container: &str,
    hash: i64,
    pk: &str,
    rids: &[u64],
) -> std::result::Result<Vec<postgres::Row>, Failure> {
    let rids: Vec<i64> = rids
        .iter()
        .map(|&rid| i64::try_from(rid).unwrap_or(i64::MAX))
        .collect();
    conn.query(READ_DOCUMENTS, &[&container, &hash, &pk, &rids])
}
