//! The partition cache: which logical partitions are in memory.
//!
//! Storage is the truth; memory holds the logical partitions that were
//! used lately, up to a budget in bytes ([`crate::Options::cache_bytes`]).
//! A partition is read from storage (one range of an index) into the cache
//! when a transaction needs it, at the fourth read of it alone (a point
//! read, its feed or query), or when a read of it among many finds room to
//! spare (see `ContainerInner::read_either`), and stays until the cache
//! needs its room:
//!
//! ```text
//!   begin / read     ──► entry in the physical partition's map? ──► loaded? ──► use it
//!                              │ no: create it (unloaded)              │ no: take its `loading` lock,
//!                              ▼                                        ▼    read storage, install
//!                        charge its entry                         charge its documents
//!                                                                       │
//!   commit ──► charge the difference ──► over the budget? ──► evict ◄───┘
//!
//!   evict: one thread at a time, a new epoch; the entries nobody holds
//!          (the map's is the only Arc), oldest epoch first, until the
//!          cache is at three quarters of its budget
//! ```
//!
//! What is counted is an estimate ([`PartitionState::footprint`]), kept per
//! entry in `charged` and summed in `used`. Eviction drops an entry only
//! when the map holds the one reference to it, under the map's write lock:
//! then no transaction (which holds the entry for its whole life), load or
//! read is under way on it, and nobody can take a new reference while the
//! lock is held. A reader holding an `Arc<PartitionState>` of it keeps its
//! snapshot. Recency is an epoch, not a clock: every use stores the
//! current epoch in the entry (a relaxed load and store, no shared write),
//! and each eviction pass starts a new one, so what was used since the last
//! pass is evicted last.
//!
//! Over a storage that keeps no documents ([`crate::storage::MemoryStorage`])
//! the cache is unbounded and counts nothing: memory is the only copy.
//!
//! [`PartitionState::footprint`]: crate::PartitionState

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::partition::LogicalPartition;

/// The default budget: a quarter of the machine's memory, or 1 GiB where
/// it cannot be read.
pub(crate) fn default_budget() -> usize {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|rest| rest.trim().strip_suffix("kB"))
                .and_then(|kb| kb.trim().parse::<usize>().ok())
        })
        .map(|kb| kb.saturating_mul(1024));
    total.map_or(1 << 30, |bytes| bytes / 4)
}

/// The cache's accounting; the entries themselves live in the containers'
/// physical partition maps.
pub(crate) struct Cache {
    /// The budget in bytes; `None`: unbounded, nothing counted.
    budget: Option<usize>,
    /// The bytes counted for every entry in memory.
    used: AtomicUsize,
    /// Advanced by every eviction pass.
    epoch: AtomicU64,
    /// Set while a thread evicts.
    evicting: AtomicBool,
    /// How many partitions were read from storage, and evicted.
    loads: AtomicU64,
    evictions: AtomicU64,
}

/// What the cache holds and has done, for [`crate::Database::cache_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// The budget in bytes; `None` when the cache is unbounded (in memory).
    pub budget: Option<usize>,
    /// The estimated bytes of the partitions in memory.
    pub used: usize,
    /// How many logical partitions were read from storage into memory.
    pub loads: u64,
    /// How many were evicted.
    pub evictions: u64,
}

impl Cache {
    pub(crate) fn new(budget: Option<usize>) -> Cache {
        Cache {
            budget,
            used: AtomicUsize::new(0),
            epoch: AtomicU64::new(1),
            evicting: AtomicBool::new(false),
            loads: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// Whether entries are counted and evicted.
    pub(crate) fn bounded(&self) -> bool {
        self.budget.is_some()
    }

    /// Notes a use of `partition`.
    pub(crate) fn touch(&self, partition: &LogicalPartition) {
        if self.bounded() {
            let epoch = self.epoch.load(Ordering::Relaxed);
            if partition.used.load(Ordering::Relaxed) != epoch {
                partition.used.store(epoch, Ordering::Relaxed);
            }
        }
    }

    /// Counts `partition` at `bytes` from now on (it was counted at what
    /// its `charged` says); returns whether the cache is now over budget.
    #[must_use]
    pub(crate) fn charge(&self, partition: &LogicalPartition, bytes: usize) -> bool {
        let Some(budget) = self.budget else {
            return false;
        };
        let before = partition.charged.swap(bytes, Ordering::AcqRel);
        let used = if bytes >= before {
            self.used.fetch_add(bytes - before, Ordering::AcqRel) + (bytes - before)
        } else {
            self.used.fetch_sub(before - bytes, Ordering::AcqRel) - (before - bytes)
        };
        used > budget
    }

    /// Whether `bytes` more fit in the budget without evicting anything.
    pub(crate) fn has_room(&self, bytes: usize) -> bool {
        self.budget
            .is_some_and(|budget| self.used().saturating_add(bytes) <= budget)
    }

    /// Whether a quarter of the budget is free: while it is, reads of many
    /// partitions fill the cache with whole partitions.
    pub(crate) fn has_room_to_fill(&self) -> bool {
        self.budget.is_some_and(|budget| self.has_room(budget / 4))
    }

    /// Notes a partition read from storage.
    pub(crate) fn loaded(&self) {
        self.loads.fetch_add(1, Ordering::Relaxed);
    }

    /// Starts an eviction pass, unless one is under way or the cache is
    /// within budget: returns the bytes to get down to, and advances the
    /// epoch. [`Cache::end_pass`] ends it.
    pub(crate) fn begin_pass(&self) -> Option<usize> {
        let budget = self.budget?;
        if self.used.load(Ordering::Acquire) <= budget || self.evicting.swap(true, Ordering::AcqRel)
        {
            return None;
        }
        self.epoch.fetch_add(1, Ordering::Relaxed);
        Some(budget - budget / 4)
    }

    pub(crate) fn end_pass(&self) {
        self.evicting.store(false, Ordering::Release);
    }

    /// The bytes counted now.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// Forgets an evicted (or deleted) entry's bytes.
    pub(crate) fn release(&self, partition: &LogicalPartition, evicted: bool) {
        if self.bounded() {
            let bytes = partition.charged.swap(0, Ordering::AcqRel);
            self.used.fetch_sub(bytes, Ordering::AcqRel);
            if evicted {
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats {
            budget: self.budget,
            used: self.used(),
            loads: self.loads.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }
}
