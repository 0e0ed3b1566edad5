//! Logical partitions and their mapping onto physical partitions.
//!
//! A logical partition is every document of a container with one
//! partition-key value. It is the unit of transactions: it has exactly one
//! writer at a time (the [`crate::Txn`] that holds its `writer` lock) and any
//! number of readers, who work on an immutable snapshot and never wait for
//! the writer.
//!
//! A commit may let the next writer in before it is durable (early lock
//! release): the next writer then begins on the commit's state, its
//! `tip`, while readers see it only once it is durable. See
//! [`LogicalPartition::release_early`].
//!
//! ```text
//!   LogicalPartition
//!     writer:    Arc<WriterLock>          held by the one open Txn
//!     early:     tip (not yet durable) ──► what the next writer begins on
//!     committed: RwLock<Arc<PartitionState>>
//!                    │   readers clone the Arc and let go of the lock at once;
//!                    │   a commit swaps in the new state under the write lock
//!                    ▼
//!   PartitionState (persistent maps: a clone is O(1), a write copies one path)
//!     by_rid: rid ──► Slot { document, size }   insertion order, for scans
//!     by_id:  id  ──► rid                        point lookups
//! ```
//!
//! Physical partitions: a container hashes each logical partition's key
//! (FNV-1a over the key's canonical text form, `["p1"]`) onto a fixed number
//! of physical partitions, so a logical partition never spans two. Physical
//! partitions are the unit a change-feed processor leases. A later split
//! would double the count and move the logical partitions whose hash modulo
//! the new count differs; the hash is part of the durable format and must
//! never change.
//!
//! WRITER LOCK
//! ===========
//!
//! The writer lock is not a plain mutex, because a holder can be stuck: a
//! script run in process may sit in a native built-in (a catastrophic
//! regex) where neither its instruction budget nor its wall clock is
//! checked, and its thread cannot be interrupted. A transaction may
//! therefore carry a deadline, and a writer waiting for a holder past its
//! deadline takes the lock over: the old holder is revoked and can never
//! commit. A transaction without a deadline (native transactions, unless
//! their caller asks) is never revoked.
//!
//! ```text
//!   WriterLock = parking_lot::Mutex<Holder> + Condvar
//!     Holder.current: None | Some { generation, deadline, committing }
//!
//!   acquire    free with nobody waiting, or held past its deadline and not
//!                committing ──► generation += 1, current = us (the old
//!                holder is revoked)
//!              otherwise wait on the condvar until a release, the holder's
//!                deadline or our lock timeout, whichever comes first; a
//!                lock freed while others wait goes to one of them (the
//!                condvar wakes them in order), not to a newcomer
//!   commit     start_commit(generation): still current? ──► committing = true
//!                (from then on nobody can revoke it); revoked ──► 408
//!   release    current is still our generation? ──► None, notify one waiter
//!                (a revoked transaction's release leaves its successor alone)
//! ```
//!
//! Revocation and commit exclude each other because both are decided under
//! the same small mutex: a commit marks itself `committing` before it
//! touches storage, and a waiter revokes only a holder that is not. Only the
//! monotonic `Instant` is read, and only on contention: the uncontended
//! path is one lock/unlock of the state mutex to acquire and one to
//! release, like the `Mutex<()>` it replaces, and a transaction without a
//! deadline skips the commit-time check (nothing can revoke it). The state
//! mutex is held for a few instructions at a time, never across a commit.
//! A `Mutex` + generation counter was considered instead, but taking a
//! mutex over from a live guard needs `force_unlock` and a guard that must
//! not unlock on drop: more unsafe code for no speed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use host_api::PartitionKey;
use imbl::shared_ptr::DefaultSharedPtr;
use imbl::{GenericHashMap, OrdMap};
use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};

use crate::document::Document;

/// A stored document with what the engine keeps beside it.
#[derive(Clone, Debug)]
pub(crate) struct Slot {
    /// Resource id: insertion order within the container.
    pub(crate) rid: u64,
    /// Serialized size in bytes (what a query reads).
    pub(crate) size: usize,
    /// The document.
    pub(crate) document: Document,
}

/// The committed documents of one logical partition. Immutable once
/// published; cloning is O(1).
#[derive(Clone, Default)]
pub struct PartitionState {
    /// The serialized size of the documents, in bytes.
    bytes: usize,
    by_rid: OrdMap<u64, Slot>,
    /// foldhash (seeded per process), not SipHash: ids are hashed several
    /// times per transaction, and this map only serves one partition.
    by_id: GenericHashMap<Arc<str>, u64, foldhash::quality::RandomState, DefaultSharedPtr>,
    /// No rid in `by_rid` is greater: the highest ever put (deletes leave
    /// it). A created document's rid is a new sequence number, above it,
    /// so its `put` skips looking for a slot to replace.
    high_rid: u64,
}

impl PartitionState {
    pub(crate) fn get(&self, id: &str) -> Option<&Slot> {
        self.by_id.get(id).and_then(|rid| self.by_rid.get(rid))
    }

    /// The rid of the document `id`.
    pub(crate) fn rid(&self, id: &str) -> Option<u64> {
        self.by_id.get(id).copied()
    }

    pub(crate) fn get_by_rid(&self, rid: u64) -> Option<&Slot> {
        self.by_rid.get(&rid)
    }

    pub(crate) fn put(&mut self, id: Arc<str>, slot: Slot) {
        // A replace keeps its rid, so the id index is already right, unless
        // the replace renamed the document (it keeps its rid under a new
        // id): then the id index moves to the new id, and the old id's
        // delete, in whatever order it comes, finds nothing left to remove.
        // A rid above `high_rid` (a created document's) has no slot to
        // look for.
        if slot.rid <= self.high_rid
            && let Some(existing) = self.by_rid.get_mut(&slot.rid)
        {
            if existing.document.id() != &*id {
                self.by_id.remove(existing.document.id());
                self.by_id.insert(id, slot.rid);
            }
            self.bytes = self.bytes - existing.size + slot.size;
            *existing = slot;
            return;
        }
        self.high_rid = self.high_rid.max(slot.rid);
        // A new rid for an existing id (deleted and re-created in one
        // transaction): the old entry goes.
        if let Some(old_rid) = self.by_id.insert(id, slot.rid)
            && let Some(old) = self.by_rid.remove(&old_rid)
        {
            self.bytes -= old.size;
        }
        self.bytes += slot.size;
        self.by_rid.insert(slot.rid, slot);
    }

    pub(crate) fn remove(&mut self, id: &str) {
        if let Some(rid) = self.by_id.remove(id)
            && let Some(old) = self.by_rid.remove(&rid)
        {
            self.bytes -= old.size;
        }
    }

    /// The documents with a rid greater than `after`, in rid order.
    pub(crate) fn scan_after(&self, after: Option<u64>) -> impl Iterator<Item = &Slot> {
        let start = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        self.by_rid
            .range((start, std::ops::Bound::Unbounded))
            .map(|(_, slot)| slot)
    }

    /// The number of documents.
    pub fn len(&self) -> usize {
        self.by_rid.len()
    }

    /// Whether the partition holds no document.
    pub fn is_empty(&self) -> bool {
        self.by_rid.is_empty()
    }

    /// The serialized size of its documents, in bytes.
    pub fn size(&self) -> usize {
        self.bytes
    }

    /// An estimate of the memory the partition's documents take, in bytes:
    /// what the partition cache counts. A parsed document takes several
    /// times its text (a map node per member, an allocation per string),
    /// and each entry of the two maps some more.
    pub(crate) fn footprint(&self) -> usize {
        self.bytes * FOOTPRINT_PER_BYTE + self.by_rid.len() * FOOTPRINT_PER_DOCUMENT
    }

    /// The documents in insertion (rid) order.
    pub fn documents(&self) -> impl Iterator<Item = &Document> {
        self.by_rid.values().map(|slot| &slot.document)
    }
}

/// Memory per byte of a document's text, for [`PartitionState::footprint`].
/// With [`FOOTPRINT_PER_DOCUMENT`], 2.8 KB for a document of 200 bytes
/// (about 400 with its system properties): a process holding 1,000,000 of
/// them in memory had a resident size of 2,840 MB (`partita-store-bench`).
const FOOTPRINT_PER_BYTE: usize = 4;

/// Memory per document beside its text, for [`PartitionState::footprint`].
const FOOTPRINT_PER_DOCUMENT: usize = 1_200;

/// What the partition cache counts for a partition entry itself (its key,
/// locks and map slot), loaded or not.
pub(crate) const FOOTPRINT_PER_PARTITION: usize = 512;

/// One logical partition: its key, its writer lock and its committed state.
///
/// A partition is in its physical partition's map while it is in the
/// cache; its documents are read from storage the first time they are
/// needed (`loaded`), and the cache drops the whole entry when nobody holds
/// it. So a partition never has two entries, and no transaction, load or
/// read of storage on it is under way when it leaves.
pub(crate) struct LogicalPartition {
    pub(crate) key: PartitionKey,
    /// Held by the open read-write transaction, for its whole life (or
    /// until a writer takes it over from a transaction past its deadline).
    pub(crate) writer: Arc<WriterLock>,
    /// The last committed state (empty until `loaded`).
    pub(crate) committed: RwLock<Arc<PartitionState>>,
    /// Whether `committed` holds the partition's documents: set once they
    /// are read from storage, or from the start over a storage that keeps
    /// no documents (everything is in memory).
    loaded: AtomicBool,
    /// Held while the documents are read from storage, to load them or to
    /// read them without loading: a transaction cannot begin on a partition
    /// that is not loaded, so no commit is under way meanwhile.
    pub(crate) loading: Mutex<()>,
    /// Reads of it while it was not loaded, which admit it to the cache
    /// from the second on.
    pub(crate) reads: AtomicU32,
    /// Never evicted (see [`LogicalPartition::pin`]).
    pinned: AtomicBool,
    /// What the cache counts for it, in bytes.
    pub(crate) charged: AtomicUsize,
    /// The cache's epoch when it was last used: eviction takes the oldest.
    pub(crate) used: AtomicU64,
    /// The partition's version in a store shared by several nodes
    /// ([`crate::storage::Storage::shared`]) that `committed` holds: set
    /// when it is installed and by each commit; 0 and unused elsewhere.
    version: AtomicU64,
    /// Commits that released the writer lock before they were durable
    /// (see [`LogicalPartition::release_early`]).
    early: Mutex<Early>,
    /// Signalled when one of them is published or lost.
    settled: Condvar,
}

/// The commits of a partition that let the next writer in before they
/// were durable, numbered in the order they were placed in the log.
#[derive(Default)]
struct Early {
    /// The state after the last of them while it is not yet published:
    /// what the next writer begins on.
    tip: Option<Arc<PartitionState>>,
    /// The number of the last of them.
    last: u64,
    /// The number of the last one published into `committed`.
    published: u64,
    /// The first one that failed, if any: it and every later one never
    /// will be published.
    lost: Option<u64>,
}

impl LogicalPartition {
    pub(crate) fn new(key: PartitionKey, loaded: bool) -> LogicalPartition {
        LogicalPartition {
            key,
            writer: Arc::new(WriterLock::default()),
            committed: RwLock::new(Arc::default()),
            loaded: AtomicBool::new(loaded),
            loading: Mutex::new(()),
            reads: AtomicU32::new(0),
            pinned: AtomicBool::new(false),
            charged: AtomicUsize::new(0),
            used: AtomicU64::new(0),
            version: AtomicU64::new(0),
            early: Mutex::default(),
            settled: Condvar::new(),
        }
    }

    /// What the next writer begins on: the state after the last commit
    /// released early while it is not yet durable, with that commit's
    /// number, otherwise the committed state and 0. The caller holds the
    /// writer lock.
    pub(crate) fn writer_base(&self) -> (Arc<PartitionState>, u64) {
        let early = self.early.lock();
        match &early.tip {
            Some(tip) => (Arc::clone(tip), early.last),
            None => (self.snapshot(), 0),
        }
    }

    /// Makes `state` what the next writer begins on, for a commit placed
    /// in the log whose writer lock is about to be released before the
    /// commit is durable; returns the commit's number. Readers go on
    /// seeing `committed` until [`LogicalPartition::publish`].
    ///
    /// Early release is sound because a storage that allows it
    /// ([`crate::storage::Submitted`]) writes a later commit after this
    /// one, makes it durable only if this one is, and fails it if this
    /// one fails: so the next writer, which builds on `state`, is
    /// acknowledged only once `state` is durable.
    pub(crate) fn release_early(&self, state: Arc<PartitionState>) -> u64 {
        let mut early = self.early.lock();
        early.last += 1;
        early.tip = Some(state);
        early.last
    }

    /// Publishes the durable commit number `n` with its `state` to
    /// readers, unless a later one was published first (its state holds
    /// this one's writes: it was built on them).
    pub(crate) fn publish(&self, n: u64, state: Arc<PartitionState>) {
        let mut early = self.early.lock();
        if n > early.published {
            *self.committed.write() = state;
            early.published = n;
        }
        if early.last == n {
            early.tip = None;
        }
        drop(early);
        self.settled.notify_all();
    }

    /// Notes that commit number `n` failed: writers begin on the committed
    /// state again, unless a later commit, which failed with it (the store
    /// refuses writes), is still settling.
    pub(crate) fn abandon(&self, n: u64) {
        let mut early = self.early.lock();
        early.lost = Some(early.lost.map_or(n, |lost| lost.min(n)));
        if early.last == n {
            early.tip = None;
        }
        drop(early);
        self.settled.notify_all();
    }

    /// Waits until commit number `n` is published (`true`) or lost
    /// (`false`): for a transaction that began on its state and writes
    /// nothing itself, so that it never answers with writes that are not
    /// durable. Each such commit's own caller settles it.
    pub(crate) fn wait_published(&self, n: u64) -> bool {
        let mut early = self.early.lock();
        loop {
            if early.published >= n {
                return true;
            }
            if early.lost.is_some_and(|lost| lost <= n) {
                return false;
            }
            self.settled.wait(&mut early);
        }
    }

    /// The version in a shared store that `committed` holds.
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Notes that `committed` now holds `version` (a commit of this node
    /// made it; the caller holds the writer lock).
    pub(crate) fn set_version(&self, version: u64) {
        self.version.store(version, Ordering::Release);
    }

    /// Forgets the documents: another node committed to the partition, so
    /// the next transaction reads it from storage again (under `loading`,
    /// as a first load does). Readers holding a snapshot keep it.
    pub(crate) fn unload(&self) {
        self.loaded.store(false, Ordering::Release);
    }

    /// The current committed snapshot.
    pub(crate) fn snapshot(&self) -> Arc<PartitionState> {
        self.committed.read().clone()
    }

    /// Whether the documents are in memory.
    pub(crate) fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// Keeps the partition in memory for good: a commit on it failed and
    /// may have reached storage unacknowledged, so storage is no longer
    /// what readers should see of it (until a restart makes it the truth).
    pub(crate) fn pin(&self) {
        self.pinned.store(true, Ordering::Release);
    }

    /// Whether eviction must leave it.
    pub(crate) fn is_pinned(&self) -> bool {
        self.pinned.load(Ordering::Acquire)
    }

    /// Installs the documents read from storage, which are at `version`
    /// (see [`LogicalPartition::version`]); the caller holds `loading`.
    pub(crate) fn install(&self, state: PartitionState, version: u64) {
        *self.committed.write() = Arc::new(state);
        self.version.store(version, Ordering::Release);
        self.loaded.store(true, Ordering::Release);
    }
}

/// A logical partition's writer lock, which a holder past its deadline
/// loses to the next writer (see the module docs).
#[derive(Default)]
pub(crate) struct WriterLock {
    holder: Mutex<Holder>,
    released: Condvar,
}

#[derive(Default)]
struct Holder {
    /// The last generation handed out; each acquisition gets the next.
    generation: u64,
    /// The current holder, if any.
    current: Option<Held>,
    /// Threads waiting in `acquire`.
    waiters: usize,
}

#[derive(Clone, Copy)]
struct Held {
    generation: u64,
    deadline: Option<Instant>,
    /// The holder's commit has started: it can no longer be revoked.
    committing: bool,
}

impl Held {
    /// Whether a waiter may take the lock over (reads the clock only when
    /// there is a deadline).
    fn revocable(&self) -> bool {
        !self.committing && self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

impl WriterLock {
    /// Takes the lock for a holder with `deadline`, waiting up to `timeout`
    /// for the current holder to release it or to run past its own
    /// deadline (then it is revoked). Returns the new holder's generation,
    /// or `None` when `timeout` passed first.
    pub(crate) fn acquire(&self, timeout: Duration, deadline: Option<Instant>) -> Option<u64> {
        let mut holder = self.holder.lock();
        if holder.current.is_some() || holder.waiters > 0 {
            holder.waiters += 1;
            let acquired = self.wait(&mut holder, timeout);
            holder.waiters -= 1;
            if !acquired {
                return None;
            }
        }
        holder.generation += 1;
        let generation = holder.generation;
        holder.current = Some(Held {
            generation,
            deadline,
            committing: false,
        });
        Some(generation)
    }

    /// Waits, counted among the waiters, until the lock may be taken:
    /// `false` when `timeout` passed first. A free lock goes to a waiter
    /// that has waited already (the one a release woke) rather than to one
    /// that just arrived, so a thread that releases and begins again at
    /// once cannot starve the others.
    fn wait(&self, holder: &mut MutexGuard<'_, Holder>, timeout: Duration) -> bool {
        let mut give_up = None;
        let mut waited = false;
        loop {
            let current = holder.current;
            match current {
                None if waited || holder.waiters == 1 => return true,
                Some(held) if held.revocable() => return true,
                _ => {}
            }
            let now = Instant::now();
            let give_up = *give_up.get_or_insert_with(|| now + timeout);
            if now >= give_up {
                return false;
            }
            let wake = match current {
                Some(Held {
                    deadline: Some(d),
                    committing: false,
                    ..
                }) => d.min(give_up),
                _ => give_up,
            };
            self.released.wait_until(holder, wake);
            waited = true;
        }
    }

    /// Whether `generation` still holds the lock (was not revoked).
    pub(crate) fn holds(&self, generation: u64) -> bool {
        self.holder
            .lock()
            .current
            .is_some_and(|held| held.generation == generation)
    }

    /// Marks `generation`'s commit as started, so that nobody can revoke it
    /// any more; `false` when it was revoked already.
    pub(crate) fn start_commit(&self, generation: u64) -> bool {
        match &mut self.holder.lock().current {
            Some(held) if held.generation == generation => {
                held.committing = true;
                true
            }
            _ => false,
        }
    }

    /// Releases the lock if `generation` still holds it; a revoked holder's
    /// release changes nothing.
    pub(crate) fn release(&self, generation: u64) {
        let mut holder = self.holder.lock();
        if holder
            .current
            .is_some_and(|held| held.generation == generation)
        {
            holder.current = None;
            drop(holder);
            self.released.notify_one();
        }
    }
}

/// The physical partition a logical partition lives on: FNV-1a (64-bit) of
/// the key's canonical text (`["p1"]`, see [`PartitionKey::to_json_array`]),
/// modulo the container's physical partition count. The text is streamed into
/// the hash rather than built, since every transaction computes this.
pub fn physical_partition(key: &PartitionKey, physical_partitions: u32) -> u32 {
    struct Fnv(u64);
    impl std::io::Write for Fnv {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            const PRIME: u64 = 0x0000_0100_0000_01b3;
            for &b in buf {
                self.0 = (self.0 ^ u64::from(b)).wrapping_mul(PRIME);
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut fnv = Fnv(0xcbf2_9ce4_8422_2325);
    // Writing to an in-memory hasher cannot fail.
    let _ = match key {
        PartitionKey::String(s) => {
            let _ = std::io::Write::write_all(&mut fnv, b"[");
            let _ = serde_json::to_writer(&mut fnv, s);
            std::io::Write::write_all(&mut fnv, b"]")
        }
        other => std::io::Write::write_all(&mut fnv, other.to_json_array().as_bytes()),
    };
    (fnv.0 % u64::from(physical_partitions.max(1))) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rename keeps the document's rid under a new id; whichever order
    /// the new id's put and the old id's delete are applied in, the
    /// document is found by its new id only.
    #[test]
    fn a_rename_moves_the_id_index_in_either_order() {
        let slot = |id: &str| Slot {
            rid: 7,
            size: 0,
            document: Document::new(serde_json::json!({ "id": id })),
        };
        for put_first in [true, false] {
            let mut state = PartitionState::default();
            state.put("a".into(), slot("a"));
            if put_first {
                state.put("b".into(), slot("b"));
                state.remove("a");
            } else {
                state.remove("a");
                state.put("b".into(), slot("b"));
            }
            assert!(state.get("a").is_none(), "put first: {put_first}");
            assert_eq!(
                state.get("b").map(|s| s.rid),
                Some(7),
                "put first: {put_first}"
            );
            assert_eq!(state.len(), 1);
        }
    }

    /// Puts in any rid order (as a partition loaded from storage, or
    /// another node's rids, may come), replaces, renames and removes keep
    /// both maps and the size as a plain model says, whether or not a rid
    /// is above every rid seen before.
    #[test]
    fn puts_in_any_rid_order_agree_with_a_model() {
        use std::collections::BTreeMap;
        let slot = |id: &str, rid: u64, size: usize| Slot {
            rid,
            size,
            document: Document::new(serde_json::json!({ "id": id })),
        };
        // (id, rid, size); size 0 removes the id.
        let steps: &[(&str, u64, usize)] = &[
            ("a", 9, 10),
            ("b", 3, 20),
            ("c", 12, 30),
            ("b", 3, 25),
            ("d", 5, 40),
            ("a", 0, 0),
            ("a", 9, 11),
            ("e", 12, 50),
            ("f", 13, 60),
            ("f", 0, 0),
            ("f", 2, 70),
            ("g", 14, 80),
        ];
        let mut state = PartitionState::default();
        let mut model: BTreeMap<u64, (String, usize)> = BTreeMap::new();
        for &(id, rid, size) in steps {
            if size == 0 {
                state.remove(id);
                model.retain(|_, (i, _)| i != id);
            } else {
                state.put(id.into(), slot(id, rid, size));
                model.retain(|r, (i, _)| *r != rid && i != id);
                model.insert(rid, (id.to_owned(), size));
            }
            let ids: Vec<(u64, &str)> = state
                .scan_after(None)
                .map(|s| (s.rid, s.document.id()))
                .collect();
            let expected: Vec<(u64, &str)> =
                model.iter().map(|(r, (i, _))| (*r, i.as_str())).collect();
            assert_eq!(ids, expected, "after {id} {rid} {size}");
            for (r, (i, _)) in &model {
                assert_eq!(state.rid(i), Some(*r), "{i}");
            }
            assert_eq!(state.size(), model.values().map(|(_, s)| s).sum::<usize>());
        }
    }

    /// The writer lock's rules, on one thread: only an expired holder that
    /// has not started to commit is taken over, and a revoked holder can
    /// neither commit nor release its successor's lock.
    #[test]
    fn the_writer_lock_is_taken_over_only_past_the_deadline_and_before_commit() {
        let lock = WriterLock::default();
        let now = Instant::now();
        let none = Duration::ZERO;
        let first = lock.acquire(none, Some(now)).expect("a free lock");
        let second = lock.acquire(none, None).expect("past its deadline");
        assert!(!lock.holds(first) && lock.holds(second));
        assert!(!lock.start_commit(first), "a revoked holder cannot commit");
        lock.release(first);
        assert!(lock.holds(second), "a revoked holder's release is a no-op");
        assert_eq!(lock.acquire(none, None), None, "no deadline: no takeover");
        lock.release(second);
        let third = lock.acquire(none, Some(now)).expect("released");
        assert!(lock.start_commit(third));
        assert_eq!(lock.acquire(none, None), None, "a commit under way");
        lock.release(third);
        let far = now + Duration::from_secs(3600);
        let fourth = lock.acquire(none, Some(far)).expect("released");
        assert_eq!(lock.acquire(none, None), None, "not yet past its deadline");
        assert!(lock.holds(fourth));
    }

    /// A lock released while a writer waits goes to that writer, not to a
    /// newcomer (the releasing thread beginning again at once).
    #[test]
    fn a_released_lock_goes_to_the_waiting_writer() {
        let lock = Arc::new(WriterLock::default());
        let first = lock.acquire(Duration::ZERO, None).expect("a free lock");
        let waiter = {
            let lock = lock.clone();
            std::thread::spawn(move || lock.acquire(Duration::from_secs(120), None))
        };
        let ceiling = Instant::now() + Duration::from_secs(120);
        while lock.holder.lock().waiters == 0 {
            assert!(Instant::now() < ceiling, "the waiter never waited");
            std::thread::yield_now();
        }
        lock.release(first);
        assert_eq!(
            lock.acquire(Duration::ZERO, None),
            None,
            "a newcomer took the lock from the waiter"
        );
        let second = waiter.join().expect("waiter").expect("handed over");
        assert!(lock.holds(second));
    }

    #[test]
    fn streamed_hash_equals_hash_of_the_canonical_text() {
        let fnv = |text: &str| {
            text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            })
        };
        for key in ["p1", "", "quote\"and\\slash", "日本", "\u{1}"] {
            let key = PartitionKey::from(key);
            assert_eq!(
                u64::from(physical_partition(&key, 1000)),
                fnv(&key.to_json_array()) % 1000,
                "{key}"
            );
        }
    }

    #[test]
    fn physical_partition_is_stable() {
        // These values are part of the durable format: they must never change.
        assert_eq!(
            physical_partition(&PartitionKey::from("p1"), 4),
            physical_partition(&"p1".into(), 4)
        );
        let spread: std::collections::HashSet<u32> = (0..100)
            .map(|i| physical_partition(&PartitionKey::from(format!("p{i}")), 4))
            .collect();
        assert_eq!(
            spread.len(),
            4,
            "100 keys should reach all 4 physical partitions"
        );
        assert!((0..100).all(|i| physical_partition(&PartitionKey::from(i), 1) == 0));
        assert_eq!(
            physical_partition(&PartitionKey::from(1), 4),
            physical_partition(&PartitionKey::from(1.0), 4)
        );
    }
}
