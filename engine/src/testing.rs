//! Fault injection for tests: [`FaultyStorage`], a [`Storage`] that fails
//! commits on purpose.
//!
//! `FaultyStorage` wraps any real storage and passes every call through,
//! except the commits a test planned to fail. A planned failure happens at
//! one of two points, which are the two outcomes a real crash or I/O error
//! at commit can have:
//!
//! ```text
//!   Txn::commit ──► FaultyStorage::commit ──► inner.commit ──► Ok(lsn)
//!                        │                         │
//!                        │ BeforeDurableWrite      │ AfterDurableWrite
//!                        ▼                         ▼
//!              Err: nothing was written   Err: the record is durable,
//!                                         but the commit was not acknowledged
//! ```
//!
//! Either way the engine sees [`Error::Storage`], refuses every later write
//! (503) and keeps serving reads, as after a real storage failure; reopening
//! the directory is what a restart after a crash does.
//!
//! The plan lives in a [`Faults`] handle, shared with the test and, across
//! a reopen, with the next `FaultyStorage` over the same files. It can fail
//! the n-th commit, every commit from the n-th on (a disk that stays
//! broken), or the next commit whichever thread makes it; it counts the
//! commits it saw and the faults it injected, and the documents read by
//! rid and the reads of the change log (what a query or a change-feed step
//! cost storage). A thread can also arm a
//! failure for its own next commit only ([`fail_next_commit_on_this_thread`]),
//! which is how the atomicity fuzzer (`partita::fuzz`) crashes one call's
//! commit while other calls commit concurrently.
//!
//! Compiled for the engine's own tests and with the `testing` feature: the
//! integration tests and the facade (for its fuzzer) enable it.
//!
//! [`sqlite_on_small_disk`] is the other fault: the real SQLite storage on
//! a disk that fills up (SQLite's page limit), for the tests of a full
//! disk at run time and at open.
//!
//! A plan can also run code right before the next commit
//! ([`Faults::before_next_commit`]): over a store several nodes share,
//! another node committing to the partition first, deterministically. It
//! can also hold commits back once they are placed in the log, until a
//! [`Gate`] opens ([`Faults::hold_commits`]): an fsync that takes as long
//! as a test needs, to see what the engine does meanwhile.
//!
//! Non-goals: faults in the other `Storage` calls (container and script
//! writes, loading), torn or corrupted files.

#[cfg(feature = "postgres")]
pub mod postgres;

use std::cell::RefCell;
use std::sync::Arc;

use parking_lot::Mutex;

use host_api::{PartitionKey, ScriptKind};

use crate::error::{Error, Result};
use crate::query::Needles;
use crate::range_index::IndexTerm;
use crate::storage::{
    Change, CommitRecord, ContainerMeta, IndexWalk, LoadedContainer, LoadedDocument, Lsn,
    ScriptRecord, Skipped, SqliteStorage, Storage, Submitted, Versions, WalkPage,
};

/// Where an injected commit failure happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailPoint {
    /// Before the inner storage's commit: the record never reaches the disk.
    BeforeDurableWrite,
    /// After the inner storage's commit returned: the record is durable, but
    /// the commit fails as if the process died before acknowledging it.
    AfterDurableWrite,
}

/// One injected commit failure: where it happens and the message of the
/// [`Error::Storage`] the commit returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitFault {
    /// Where the commit fails.
    pub point: FailPoint,
    /// The storage error's message.
    pub message: String,
}

impl CommitFault {
    /// A failure at `point` with `message`.
    pub fn new(point: FailPoint, message: impl Into<String>) -> CommitFault {
        CommitFault {
            point,
            message: message.into(),
        }
    }

    /// A failure before the durable write (a write error: nothing is stored).
    pub fn before_write(message: impl Into<String>) -> CommitFault {
        CommitFault::new(FailPoint::BeforeDurableWrite, message)
    }

    /// A failure after the durable write (an fsync whose outcome is unknown,
    /// or a crash before the acknowledgement: the record is stored).
    pub fn after_write(message: impl Into<String>) -> CommitFault {
        CommitFault::new(FailPoint::AfterDurableWrite, message)
    }
}

/// Which commits a planned fault applies to, numbered from 1 in the order
/// the handle sees them.
#[derive(Clone, Copy, Debug)]
enum When {
    /// Exactly this commit, once.
    At(u64),
    /// This commit and every later one.
    From(u64),
    /// The next commit, once.
    Next,
}

#[derive(Debug, Default)]
struct Plan {
    /// Commits seen, failed ones included.
    commits: u64,
    /// Documents read by rid ([`Storage::read_documents`]).
    documents_by_rid: u64,
    /// Reads of the change log ([`Storage::read_changes`]).
    change_reads: u64,
    /// Faults injected so far.
    injected: u64,
    /// Planned faults, the first that applies wins.
    faults: Vec<(When, CommitFault)>,
}

/// The fault plan and counters of one or more [`FaultyStorage`]s.
///
/// Cloning gives another handle on the same plan, so a test keeps one while
/// the storage it gave the other to is inside a `Database`, and a storage
/// reopened over the same files can keep counting where the last one
/// stopped.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    plan: Arc<Mutex<Plan>>,
    hook: Arc<Mutex<Option<Hook>>>,
    gate: Arc<Mutex<Option<Gate>>>,
}

/// Holds the outcome of submitted commits back until opened
/// ([`Faults::hold_commits`]): each is placed in the log, as a slow fsync
/// would leave it, and its caller waits.
#[derive(Clone, Debug, Default)]
pub struct Gate(Arc<(Mutex<bool>, parking_lot::Condvar)>);

impl Gate {
    /// Lets the held commits' callers go on.
    pub fn open(&self) {
        *self.0.0.lock() = true;
        self.0.1.notify_all();
    }

    fn is_open(&self) -> bool {
        *self.0.0.lock()
    }

    fn wait(&self) {
        let mut open = self.0.0.lock();
        while !*open {
            self.0.1.wait(&mut open);
        }
    }
}

/// Code to run before a commit reaches the inner storage.
struct Hook(Box<dyn FnOnce() + Send>);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

impl Faults {
    /// An empty plan: every commit goes through.
    pub fn new() -> Faults {
        Faults::default()
    }

    /// Fails commit `n` (1-based, counting every commit this plan has seen).
    pub fn fail_commit(&self, n: u64, fault: CommitFault) {
        self.plan.lock().faults.push((When::At(n), fault));
    }

    /// Fails commit `n` and every later one, as a disk whose fsync failed
    /// would.
    pub fn fail_commits_from(&self, n: u64, fault: CommitFault) {
        self.plan.lock().faults.push((When::From(n), fault));
    }

    /// Fails the next commit, whichever thread makes it.
    pub fn fail_next_commit(&self, fault: CommitFault) {
        self.plan.lock().faults.push((When::Next, fault));
    }

    /// Runs `hook` once, right before the next commit (whichever thread
    /// makes it) reaches the inner storage: over a store several nodes
    /// share, another node's commit between a transaction's begin and its
    /// commit, which that commit then loses (449). Replaces a hook not yet
    /// run.
    pub fn before_next_commit(&self, hook: impl FnOnce() + Send + 'static) {
        *self.hook.lock() = Some(Hook(Box::new(hook)));
    }

    /// Holds every commit from now on back after the inner storage placed
    /// it (and, by its fault if planned, failed it): its caller waits
    /// until the returned gate is opened, as callers wait for an fsync
    /// that covers them all. Replaces a gate set earlier.
    pub fn hold_commits(&self) -> Gate {
        let gate = Gate::default();
        *self.gate.lock() = Some(gate.clone());
        gate
    }

    /// The commits seen so far, failed ones included.
    pub fn commits(&self) -> u64 {
        self.plan.lock().commits
    }

    /// The faults injected so far, thread-armed ones included.
    pub fn injected(&self) -> u64 {
        self.plan.lock().injected
    }

    /// The documents read by rid so far (those a query's index named).
    pub fn documents_read_by_rid(&self) -> u64 {
        self.plan.lock().documents_by_rid
    }

    /// The reads of the change log so far.
    pub fn change_reads(&self) -> u64 {
        self.plan.lock().change_reads
    }

    /// Counts a commit and takes the fault it gets, if any.
    fn next(&self, armed: Option<CommitFault>) -> Option<CommitFault> {
        let mut plan = self.plan.lock();
        plan.commits += 1;
        let n = plan.commits;
        let fault = armed.or_else(|| {
            let i = plan.faults.iter().position(|(when, _)| match *when {
                When::At(at) => at == n,
                When::From(from) => n >= from,
                When::Next => true,
            })?;
            Some(match plan.faults[i].0 {
                When::From(_) => plan.faults[i].1.clone(),
                When::At(_) | When::Next => plan.faults.remove(i).1,
            })
        });
        plan.injected += u64::from(fault.is_some());
        fault
    }
}

thread_local! {
    /// The fault the next commit this thread makes through any
    /// `FaultyStorage` gets. Commits run on the committing thread, so
    /// concurrent callers cannot take each other's.
    static ARMED: RefCell<Option<CommitFault>> = const { RefCell::new(None) };
}

/// Makes the next commit this thread makes through any [`FaultyStorage`]
/// fail with `fault`, before the storage's own plan is consulted; `None`
/// disarms a fault the thread's last commit did not take.
pub fn fail_next_commit_on_this_thread(fault: Option<CommitFault>) {
    ARMED.with(|armed| *armed.borrow_mut() = fault);
}

/// A storage that fails the commits its [`Faults`] plan says, and passes
/// everything else to the real storage `S`. See the module docs.
pub struct FaultyStorage<S> {
    inner: S,
    faults: Faults,
}

impl<S: Storage> FaultyStorage<S> {
    /// Wraps `inner` with a plan of its own (see [`FaultyStorage::faults`]).
    pub fn new(inner: S) -> FaultyStorage<S> {
        FaultyStorage::with_faults(inner, Faults::new())
    }

    /// Wraps `inner` with the plan `faults` shares.
    pub fn with_faults(inner: S, faults: Faults) -> FaultyStorage<S> {
        FaultyStorage { inner, faults }
    }

    /// This storage's plan; clone it to keep it once the storage is boxed.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }
}

impl<S: Storage> Storage for FaultyStorage<S> {
    fn load(&self) -> Result<Vec<LoadedContainer>> {
        self.inner.load()
    }

    fn create_container(&self, meta: &ContainerMeta) -> Result<()> {
        self.inner.create_container(meta)
    }

    fn delete_container(&self, id: &str) -> Result<()> {
        self.inner.delete_container(id)
    }

    fn update_container(&self, meta: &ContainerMeta) -> Result<()> {
        self.inner.update_container(meta)
    }

    fn put_script(&self, script: &ScriptRecord) -> Result<()> {
        self.inner.put_script(script)
    }

    fn delete_script(&self, container: &str, kind: ScriptKind, id: &str) -> Result<()> {
        self.inner.delete_script(container, kind, id)
    }

    fn commit(&self, record: CommitRecord) -> Result<Lsn> {
        self.submit(record)?.wait()
    }

    /// Whatever the inner storage does: a [`Gate`] may hold any commit.
    fn submits_early(&self) -> bool {
        true
    }

    fn submit(&self, record: CommitRecord) -> Result<Submitted<'_>> {
        let armed = ARMED.with(|armed| armed.borrow_mut().take());
        let hook = self.faults.hook.lock().take();
        if let Some(Hook(hook)) = hook {
            hook();
        }
        let fault = self.faults.next(armed);
        let gate = self
            .faults
            .gate
            .lock()
            .clone()
            .filter(|gate| !gate.is_open());
        let submitted = match fault {
            None => self.inner.submit(record)?,
            Some(CommitFault {
                point: FailPoint::BeforeDurableWrite,
                message,
            }) => return Err(Error::Storage(message)),
            Some(CommitFault {
                point: FailPoint::AfterDurableWrite,
                message,
            }) => self
                .inner
                .submit(record)?
                .then(|outcome| outcome.and(Err(Error::Storage(message)))),
        };
        Ok(match gate {
            Some(gate) => Submitted::later(move || {
                gate.wait();
                submitted.wait()
            }),
            None => submitted,
        })
    }

    fn read_changes(&self, container: &str, after: Lsn, max_changes: usize) -> Result<Vec<Change>> {
        self.faults.plan.lock().change_reads += 1;
        self.inner.read_changes(container, after, max_changes)
    }

    fn last_lsn(&self, container: &str) -> Result<Lsn> {
        self.inner.last_lsn(container)
    }

    fn keeps_documents(&self) -> bool {
        self.inner.keeps_documents()
    }

    fn read_partition(
        &self,
        container: &str,
        partition_key: &PartitionKey,
    ) -> Result<Vec<LoadedDocument>> {
        self.inner.read_partition(container, partition_key)
    }

    fn read_document(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        id: &str,
    ) -> Result<Option<LoadedDocument>> {
        self.inner.read_document(container, partition_key, id)
    }

    fn read_partition_containing(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        needles: &Needles,
    ) -> Result<(Vec<LoadedDocument>, Vec<Skipped>)> {
        self.inner
            .read_partition_containing(container, partition_key, needles)
    }

    fn read_documents(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        rids: &[u64],
    ) -> Result<Vec<LoadedDocument>> {
        let docs = self.inner.read_documents(container, partition_key, rids)?;
        self.faults.plan.lock().documents_by_rid += docs.len() as u64;
        Ok(docs)
    }

    fn index_candidates(
        &self,
        container: &str,
        terms: &[IndexTerm],
    ) -> Result<Option<Vec<(PartitionKey, u64)>>> {
        self.inner.index_candidates(container, terms)
    }

    fn index_candidates_in(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        terms: &[IndexTerm],
    ) -> Result<Option<Vec<u64>>> {
        self.inner
            .index_candidates_in(container, partition_key, terms)
    }

    fn index_walk(&self, container: &str, walk: &IndexWalk<'_>) -> Result<Option<WalkPage>> {
        self.inner.index_walk(container, walk)
    }

    fn index_progress(&self, container: &str) -> Result<Option<u32>> {
        self.inner.index_progress(container)
    }

    fn partition_keys(&self, container: &str) -> Result<Vec<PartitionKey>> {
        self.inner.partition_keys(container)
    }

    fn wants_text(&self) -> bool {
        self.inner.wants_text()
    }

    fn read_only(&self) -> Option<String> {
        self.inner.read_only()
    }

    fn shared(&self) -> bool {
        self.inner.shared()
    }

    fn partition_version(&self, container: &str, partition_key: &PartitionKey) -> Result<Versions> {
        self.inner.partition_version(container, partition_key)
    }

    fn catalog_version(&self) -> Result<u64> {
        self.inner.catalog_version()
    }

    fn reserve_sequence(&self, container: &str, count: u64) -> Result<u64> {
        self.inner.reserve_sequence(container, count)
    }
}

/// SQLite storage in the file at `path` (durable, the default checkpoint
/// interval) on a disk that holds `max_pages` pages of 4 KB of it: a write
/// that would grow the file past them fails with `SQLITE_FULL`, exactly as
/// on a full disk, and a reopen with the same limit finds the disk still
/// full. SQLite's `max_page_count`, so it is deterministic and needs no
/// small file system. A reopen with a larger limit (or through
/// [`SqliteStorage::open`]) is the restart after space was freed.
///
/// # Errors
/// As [`SqliteStorage::open`].
pub fn sqlite_on_small_disk(path: &std::path::Path, max_pages: u32) -> Result<SqliteStorage> {
    SqliteStorage::open_limited(
        path,
        crate::storage::Durability::Full,
        crate::storage::CHECKPOINT_PAGES,
        Some(max_pages),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::storage::{Durability, MemoryStorage, SqliteStorage};
    use crate::{DATA_FILE, Database, Options, PartitionKey};

    /// An empty record of container `c`: enough for the memory storage.
    fn record() -> CommitRecord {
        CommitRecord {
            container: "c".into(),
            partition_key: PartitionKey::from("p"),
            changes: Vec::new(),
            base_version: 0,
        }
    }

    /// Which of `n` commits through `storage` succeed.
    fn outcomes(storage: &impl Storage, n: usize) -> Vec<bool> {
        (0..n).map(|_| storage.commit(record()).is_ok()).collect()
    }

    #[test]
    fn commits_pass_through_without_a_plan() {
        let storage = FaultyStorage::new(MemoryStorage::new());
        assert_eq!(storage.commit(record()).unwrap(), Lsn(1));
        assert_eq!(storage.commit(record()).unwrap(), Lsn(2));
        assert_eq!(
            (storage.faults().commits(), storage.faults().injected()),
            (2, 0)
        );
    }

    #[test]
    fn the_nth_commit_fails_once() {
        let storage = FaultyStorage::new(MemoryStorage::new());
        storage
            .faults()
            .fail_commit(2, CommitFault::before_write("disk full"));
        assert_eq!(outcomes(&storage, 4), [true, false, true, true]);
        assert_eq!(
            (storage.faults().commits(), storage.faults().injected()),
            (4, 1)
        );
        // Nothing of the failed commit reached the inner storage.
        assert_eq!(storage.read_changes("c", Lsn::ZERO, 100).unwrap().len(), 0);
        assert_eq!(storage.commit(record()).unwrap(), Lsn(4));
    }

    #[test]
    fn commits_from_the_nth_keep_failing() {
        let storage = FaultyStorage::new(MemoryStorage::new());
        storage
            .faults()
            .fail_commits_from(3, CommitFault::before_write("fsync failed"));
        assert_eq!(outcomes(&storage, 5), [true, true, false, false, false]);
        assert_eq!(storage.faults().injected(), 3);
        match storage.commit(record()) {
            Err(Error::Storage(message)) => assert_eq!(message, "fsync failed"),
            other => panic!("expected the injected failure, got {other:?}"),
        }
    }

    #[test]
    fn a_failure_after_the_write_leaves_the_record_durable() {
        let storage = FaultyStorage::new(MemoryStorage::new());
        storage
            .faults()
            .fail_next_commit(CommitFault::after_write("crashed"));
        assert!(storage.commit(record()).is_err());
        assert_eq!(
            storage.commit(record()).unwrap(),
            Lsn(2),
            "the first is stored"
        );
    }

    #[test]
    fn a_plan_is_shared_by_its_handles_and_survives_a_reopen() {
        let faults = Faults::new();
        let first = FaultyStorage::with_faults(MemoryStorage::new(), faults.clone());
        assert_eq!(outcomes(&first, 2), [true, true]);
        drop(first);
        faults.fail_commit(3, CommitFault::before_write("third"));
        let second = FaultyStorage::with_faults(MemoryStorage::new(), faults.clone());
        assert_eq!(outcomes(&second, 2), [false, true]);
        assert_eq!((faults.commits(), faults.injected()), (4, 1));
    }

    #[test]
    fn a_thread_armed_fault_is_taken_by_that_thread_only() {
        let storage = FaultyStorage::new(MemoryStorage::new());
        fail_next_commit_on_this_thread(Some(CommitFault::before_write("mine")));
        let other = std::thread::scope(|s| s.spawn(|| storage.commit(record()).is_ok()).join());
        assert!(other.unwrap(), "another thread's commit went through");
        assert!(storage.commit(record()).is_err());
        assert!(
            storage.commit(record()).is_ok(),
            "armed for one commit only"
        );
        // Disarming clears a fault no commit took.
        fail_next_commit_on_this_thread(Some(CommitFault::before_write("unused")));
        fail_next_commit_on_this_thread(None);
        assert!(storage.commit(record()).is_ok());
        assert_eq!(storage.faults().injected(), 1);
    }

    #[test]
    fn the_engine_refuses_writes_after_a_fault_and_reopens_consistent() {
        for point in [FailPoint::BeforeDurableWrite, FailPoint::AfterDurableWrite] {
            let dir = tempfile::tempdir().unwrap();
            let sqlite =
                SqliteStorage::open(&dir.path().join(DATA_FILE), Durability::Full).unwrap();
            let storage = FaultyStorage::new(sqlite);
            let faults = storage.faults().clone();
            faults.fail_commit(2, CommitFault::new(point, "injected"));
            let db = Database::with_storage(Box::new(storage), Options::default()).unwrap();
            let posts = db.create_container("posts", "/postId").unwrap();
            posts
                .create_item("p1", json!({"id": "a", "postId": "p1"}), None)
                .unwrap();
            let failed = posts
                .create_item("p1", json!({"id": "b", "postId": "p1"}), None)
                .unwrap_err();
            assert_eq!(failed.status(), 500);
            let refused = posts
                .create_item("p1", json!({"id": "c", "postId": "p1"}), None)
                .unwrap_err();
            assert_eq!(refused.status(), 503);
            assert_eq!(
                faults.commits(),
                2,
                "a refused write never reaches the storage"
            );
            assert_eq!(posts.read_item("p1", "b").unwrap_err().status(), 404);
            drop(posts);
            drop(db);
            let db = Database::open(dir.path()).unwrap();
            let posts = db.container("posts").unwrap();
            assert_eq!(
                posts.read_item("p1", "b").is_ok(),
                point == FailPoint::AfterDurableWrite,
                "{point:?}"
            );
        }
    }
}
