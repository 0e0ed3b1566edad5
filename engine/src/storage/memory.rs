//! In-memory storage: no files, nothing survives the process.
//!
//! It still keeps the change log, so the change feed works in tests and
//! demos. The log is bounded by the live documents, not by the writes:
//! the last [`RETAINED_COMMITS`] commits of each container are kept
//! whole, and older ones are compacted to what Cosmos DB's latest-version
//! change feed shows, the latest version of each document that still
//! exists (superseded versions and deletes go).
//!
//! ```text
//!   lsn 1 ....................... compacted | ......... last
//!   latest versions only (no deletes)       | every change, whole
//!                                           |<- RETAINED_COMMITS..2x ->|
//! ```
//!
//! A reader within the window sees every change; one further behind sees
//! each document once, at its latest version, and misses the deletes it
//! fell behind on. Compaction runs when the whole part reaches twice the
//! window (amortized O(1) per change), and the compacted part is swept
//! again once more of its entries are superseded than documents live.
//! What compaction drops is freed by the committing thread after it has
//! released the log, so other commits do not wait for the freeing.
//!
//! It keeps a range index too, as the durable stores do, so a query
//! reads, costs and reports here what it does there (see [`index`]).
//! [`MemoryStorage::unindexed`] keeps none: every query scans, the
//! reference the tests of the index compare with.

mod index;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use host_api::{PartitionKey, ScriptKind};

use super::{
    Change, ChangeKind, CommitRecord, ContainerMeta, IndexWalk, LoadedContainer, LoadedDocument,
    Lsn, ScriptRecord, Storage, WalkPage,
};
use crate::document::{Document, now_secs};
use crate::error::Result;
use crate::range_index::IndexTerm;
use index::ContainerIndex;

/// How many of each container's latest commits the change log keeps
/// whole, in memory (see the module docs) as in SQLite (`sqlite::sweep`).
pub const RETAINED_COMMITS: u64 = 10_000;

/// Storage that keeps the change log in memory.
pub struct MemoryStorage {
    logs: Mutex<HashMap<String, ChangeLog, foldhash::quality::RandomState>>,
    retained: u64,
    /// Each container's range index; `None` for a store that keeps none.
    indexes: Option<RwLock<Indexes>>,
}

/// Per container id, its range index, locked apart from the others'.
type Indexes = HashMap<String, Arc<RwLock<ContainerIndex>>, foldhash::quality::RandomState>;

impl Default for MemoryStorage {
    fn default() -> MemoryStorage {
        MemoryStorage::with_retention(RETAINED_COMMITS)
    }
}

/// One container's change log.
#[derive(Default)]
struct ChangeLog {
    /// The commits in LSN order (a commit appends, compaction removes the
    /// records it empties). Records are kept as committed and turned into
    /// [`Change`]s only when read, so a commit costs no copying.
    records: VecDeque<Entry>,
    /// The last LSN given.
    last: u64,
    /// The LSN of each document's last change, deletes compacted away
    /// excepted, by partition and id (so a commit finds its documents
    /// without copying its partition key).
    latest: HashMap<PartitionKey, Latest, foldhash::quality::RandomState>,
    /// How many documents `latest` holds.
    documents: usize,
    /// Records up to this LSN hold only changes that were latest when
    /// they were compacted.
    compacted: u64,
    /// Changes up to `compacted` superseded since.
    stale: usize,
}

/// A commit in [`ChangeLog::records`].
struct Entry {
    lsn: u64,
    record: CommitRecord,
    /// The clock at commit when it deletes something (a delete has no
    /// `_ts` of its own).
    at: u64,
}

/// One partition's documents in [`ChangeLog::latest`]: id → LSN.
type Latest = HashMap<Arc<str>, u64, foldhash::quality::RandomState>;

/// Changes a compaction dropped, freed once the log is released.
type Dropped = Vec<super::RecordChange>;

impl ChangeLog {
    fn append(
        &mut self,
        record: CommitRecord,
        at: u64,
        retained: u64,
        dropped: &mut Dropped,
    ) -> Lsn {
        self.last += 1;
        let lsn = self.last;
        let latest = match self.latest.get_mut(&record.partition_key) {
            Some(latest) => latest,
            None => self.latest.entry(record.partition_key.clone()).or_default(),
        };
        for change in &record.changes {
            match latest.insert(Arc::clone(&change.id), lsn) {
                None => self.documents += 1,
                Some(prev) if prev <= self.compacted => self.stale += 1,
                Some(_) => {}
            }
        }
        self.records.push_back(Entry { lsn, record, at });
        if self.last >= self.compacted + 2 * retained.max(1) {
            self.compact(self.compacted, self.last - retained, dropped);
        }
        if self.stale > self.documents.max(retained as usize) {
            self.compact(0, self.compacted, dropped);
        }
        Lsn(lsn)
    }

    /// The latest version of every live document: (partition, rid,
    /// document).
    fn live_documents(&self) -> Vec<(PartitionKey, u64, Document)> {
        let mut live = Vec::with_capacity(self.documents);
        for (pk, latest) in &self.latest {
            for (id, lsn) in latest {
                let change = self
                    .get(*lsn)
                    .and_then(|entry| entry.record.changes.iter().rev().find(|c| c.id == *id));
                if let Some(change) = change
                    && let Some(document) = &change.document
                {
                    live.push((pk.clone(), change.rid, document.clone()));
                }
            }
        }
        live
    }

    /// The record of commit `lsn`, unless compaction emptied it.
    fn get(&self, lsn: u64) -> Option<&Entry> {
        let i = self.records.binary_search_by_key(&lsn, |e| e.lsn).ok()?;
        self.records.get(i)
    }

    /// Where the records after `lsn` start.
    fn after(&self, lsn: u64) -> usize {
        self.records.partition_point(|e| e.lsn <= lsn)
    }

    /// Drops from the records in `(from, to]` every change that is not its
    /// document's latest, and the deletes, then the records left empty;
    /// what it drops goes to `dropped`.
    fn compact(&mut self, from: u64, to: u64, dropped: &mut Dropped) {
        let (start, end) = (self.after(from), self.after(to));
        let ChangeLog {
            records,
            latest,
            documents,
            ..
        } = self;
        for Entry { lsn, record, .. } in records.range_mut(start..end) {
            let lsn = *lsn;
            let mut partition = latest.get_mut(&record.partition_key);
            dropped.extend(record.changes.extract_if(.., |change| {
                let current = partition.as_deref().and_then(|p| p.get(&change.id)) == Some(&lsn);
                if current && change.kind == ChangeKind::Delete {
                    if let Some(p) = partition.as_deref_mut()
                        && p.remove(&change.id).is_some()
                    {
                        *documents -= 1;
                    }
                    return true;
                }
                !current
            }));
            if partition.is_some_and(|p| p.is_empty()) {
                latest.remove(&record.partition_key);
            }
        }
        // The records left empty go, the others keep their order: the
        // records after `start` move, at most the compacted range and the
        // window after it (the whole log only when `from` is 0).
        let mut kept = start;
        for i in start..records.len() {
            if i < end && records[i].record.changes.is_empty() {
                continue;
            }
            records.swap(kept, i);
            kept += 1;
        }
        records.truncate(kept);
        if from == 0 {
            self.stale = 0;
        }
        self.compacted = self.compacted.max(to);
    }
}

impl MemoryStorage {
    /// Creates an empty store.
    pub fn new() -> MemoryStorage {
        MemoryStorage::default()
    }

    /// Creates an empty store whose change logs keep the last `retained`
    /// commits of each container whole (see the module docs).
    pub fn with_retention(retained: u64) -> MemoryStorage {
        MemoryStorage {
            logs: Mutex::default(),
            retained,
            indexes: Some(RwLock::default()),
        }
    }

    /// Creates an empty store that keeps no range index: every query
    /// scans (a reference for tests of the index).
    pub fn unindexed() -> MemoryStorage {
        MemoryStorage {
            indexes: None,
            ..MemoryStorage::default()
        }
    }

    /// The range index of `container`, if the store keeps one.
    fn index(&self, container: &str) -> Option<Arc<RwLock<ContainerIndex>>> {
        self.indexes.as_ref()?.read().get(container).cloned()
    }

    /// The range index of `container`, built first if no query asked it
    /// before: from the latest version of each live document, which the
    /// change log keeps.
    fn built_index(&self, container: &str) -> Option<Arc<RwLock<ContainerIndex>>> {
        let index = self.index(container)?;
        if index.read().is_built() {
            return Some(index);
        }
        let mut building = index.write();
        if !building.is_built() {
            // Copied out under the log's lock (the documents are shared),
            // indexed after it is released.
            let live = self
                .logs
                .lock()
                .get(container)
                .map(ChangeLog::live_documents)
                .unwrap_or_default();
            building.build(live);
        }
        drop(building);
        Some(index)
    }

    /// Appends `record` to its container's change log.
    fn append(&self, record: CommitRecord) -> Lsn {
        let deletes = record.changes.iter().any(|c| c.kind == ChangeKind::Delete);
        let at = if deletes { now_secs() } else { 0 };
        let mut dropped = Dropped::new();
        let lsn = {
            let mut logs = self.logs.lock();
            let log = match logs.get_mut(&*record.container) {
                Some(log) => log,
                None => logs.entry(record.container.to_string()).or_default(),
            };
            log.append(record, at, self.retained, &mut dropped)
        };
        // Freed here, with the log released.
        drop(dropped);
        lsn
    }
}

impl Storage for MemoryStorage {
    fn load(&self) -> Result<Vec<LoadedContainer>> {
        Ok(Vec::new())
    }

    fn create_container(&self, meta: &ContainerMeta) -> Result<()> {
        self.logs.lock().entry(meta.id.clone()).or_default();
        if let Some(indexes) = &self.indexes {
            let index = ContainerIndex::new(&meta.indexing_policy);
            indexes
                .write()
                .entry(meta.id.clone())
                .or_insert_with(|| Arc::new(RwLock::new(index)));
        }
        Ok(())
    }

    fn delete_container(&self, id: &str) -> Result<()> {
        self.logs.lock().remove(id);
        let dropped = self.indexes.as_ref().and_then(|i| i.write().remove(id));
        // Freed here, with the map released.
        drop(dropped);
        Ok(())
    }

    fn update_container(&self, meta: &ContainerMeta) -> Result<()> {
        if let Some(index) = self.index(&meta.id) {
            index.write().set_policy(&meta.indexing_policy);
        }
        Ok(())
    }

    fn put_script(&self, _script: &ScriptRecord) -> Result<()> {
        Ok(())
    }

    fn delete_script(&self, _container: &str, _kind: ScriptKind, _id: &str) -> Result<()> {
        Ok(())
    }

    fn commit(&self, record: CommitRecord) -> Result<Lsn> {
        let Some(index) = self.index(&record.container) else {
            return Ok(self.append(record));
        };
        // An index not built yet costs the commit nothing: the log gets
        // the record while the index is held for reading, so a build
        // (which holds it for writing) finds it there.
        let unbuilt = index.read();
        if !unbuilt.is_built() {
            let lsn = self.append(record);
            drop(unbuilt);
            return Ok(lsn);
        }
        drop(unbuilt);
        // Built (it stays built): the entries change with the log, and
        // the engine serializes the commits of a partition, so each
        // document's entries change in commit order.
        let mut built = index.write();
        built.apply(&record.partition_key, &record.changes);
        let lsn = self.append(record);
        drop(built);
        Ok(lsn)
    }

    fn last_lsn(&self, container: &str) -> Result<Lsn> {
        // Compaction never empties the last commit: it is in the window.
        Ok(Lsn(self
            .logs
            .lock()
            .get(container)
            .map_or(0, |log| log.last)))
    }

    fn read_changes(&self, container: &str, after: Lsn, max_changes: usize) -> Result<Vec<Change>> {
        let logs = self.logs.lock();
        let Some(log) = logs.get(container) else {
            return Ok(Vec::new());
        };
        let mut res = Vec::new();
        for Entry { lsn, record, at } in log.records.range(log.after(after.0)..) {
            if res.len() >= max_changes.max(1) {
                break;
            }
            let lsn = Lsn(*lsn);
            res.extend(record.changes.iter().map(|c| Change {
                lsn,
                partition_key: record.partition_key.clone(),
                id: c.id.to_string(),
                kind: c.kind,
                document: c.document.clone(),
                ts: c.document.as_ref().map_or(*at, Document::ts),
            }));
        }
        Ok(res)
    }

    fn keeps_documents(&self) -> bool {
        false
    }

    fn read_partition(
        &self,
        _container: &str,
        _partition_key: &PartitionKey,
    ) -> Result<Vec<LoadedDocument>> {
        Ok(Vec::new())
    }

    fn read_document(
        &self,
        _container: &str,
        _partition_key: &PartitionKey,
        _id: &str,
    ) -> Result<Option<LoadedDocument>> {
        Ok(None)
    }

    fn partition_keys(&self, _container: &str) -> Result<Vec<PartitionKey>> {
        Ok(Vec::new())
    }

    fn wants_text(&self) -> bool {
        false
    }

    fn index_candidates(
        &self,
        container: &str,
        terms: &[IndexTerm],
    ) -> Result<Option<Vec<(PartitionKey, u64)>>> {
        Ok(self
            .built_index(container)
            .and_then(|index| index.read().candidates(terms)))
    }

    fn index_walk(&self, container: &str, walk: &IndexWalk<'_>) -> Result<Option<WalkPage>> {
        Ok(self
            .built_index(container)
            .and_then(|index| index.read().walk(walk)))
    }

    fn index_progress(&self, container: &str) -> Result<Option<u32>> {
        // Built at once, whatever the policy.
        Ok(self.index(container).map(|_| 100))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::RecordChange;
    use serde_json::json;

    fn record(pk: &str, changes: &[(&str, ChangeKind, i64)]) -> CommitRecord {
        CommitRecord {
            container: Arc::from("c"),
            partition_key: PartitionKey::from(pk),
            changes: changes
                .iter()
                .map(|&(id, kind, v)| RecordChange {
                    id: Arc::from(id),
                    kind,
                    rid: 0,
                    before_rid: None,
                    seq: 0,
                    document: (kind != ChangeKind::Delete)
                        .then(|| Document::new(json!({"id": id, "pk": pk, "v": v}))),
                    text: None,
                })
                .collect(),
            base_version: 0,
        }
    }

    #[test]
    fn the_index_follows_commits_and_policies_and_keeps_only_live_documents() {
        let storage = MemoryStorage::new();
        let mut meta = ContainerMeta::for_tests("c");
        storage.create_container(&meta).unwrap();
        let commit = |i: u64, kind: ChangeKind, v: i64| {
            let mut r = record(&format!("p{}", i % 3), &[(&format!("d{i}"), kind, v)]);
            r.changes[0].rid = i + 1;
            storage.commit(r).unwrap();
        };
        let odd = [IndexTerm::equal(vec!["v".into()], &json!(1)).unwrap()];
        let rids = |terms: &[IndexTerm]| {
            storage.index_candidates("c", terms).unwrap().map(|found| {
                let mut rids: Vec<u64> = found.into_iter().map(|(_, rid)| rid).collect();
                rids.sort();
                rids
            })
        };
        for i in 0..10 {
            commit(i, ChangeKind::Create, (i % 2) as i64);
        }
        // Nothing is indexed until a query asks: then the log's latest
        // versions are, and commits keep the index from there.
        assert!(storage.index("c").unwrap().read().is_empty());
        commit(9, ChangeKind::Replace, 1);
        assert_eq!(rids(&odd), Some(vec![2, 4, 6, 8, 10]));
        assert!(storage.index("c").unwrap().read().is_built());
        commit(1, ChangeKind::Replace, 0);
        commit(3, ChangeKind::Delete, 0);
        assert_eq!(rids(&odd), Some(vec![6, 8, 10]));
        // A policy without the path answers nothing; the next has it again.
        meta.indexing_policy = crate::IndexingPolicy::from_json(&json!({
            "includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/v/?"}]
        }))
        .unwrap();
        storage.update_container(&meta).unwrap();
        assert_eq!(rids(&odd), None);
        commit(5, ChangeKind::Replace, 0);
        meta.indexing_policy = crate::IndexingPolicy::default();
        storage.update_container(&meta).unwrap();
        assert_eq!(rids(&odd), Some(vec![8, 10]));
        assert_eq!(storage.index_progress("c").unwrap(), Some(100));
        for i in (0..10).filter(|i| *i != 3) {
            commit(i, ChangeKind::Delete, 0);
        }
        assert!(storage.index("c").unwrap().read().is_empty());
        storage.delete_container("c").unwrap();
        assert_eq!(storage.index_progress("c").unwrap(), None);
        assert_eq!(
            MemoryStorage::unindexed().index_progress("c").unwrap(),
            None
        );
    }

    #[test]
    fn the_log_is_bounded_by_the_live_documents_not_the_writes() {
        let retained = 100;
        let storage = MemoryStorage::with_retention(retained);
        // Ten documents rewritten again and again, and a new document
        // created and deleted by every tenth commit.
        let commits = 5_000u64;
        for n in 0..commits {
            let id = format!("d{}", n % 10);
            storage
                .commit(record("p", &[(&id, ChangeKind::Replace, n as i64)]))
                .unwrap();
            if n % 10 == 0 {
                let temp = format!("t{n}");
                storage
                    .commit(record("q", &[(&temp, ChangeKind::Create, 0)]))
                    .unwrap();
                storage
                    .commit(record("q", &[(&temp, ChangeKind::Delete, 0)]))
                    .unwrap();
            }
        }
        let last = commits + commits / 5;
        let logs = storage.logs.lock();
        let log = &logs["c"];
        assert_eq!(log.last, last);
        assert!(
            log.records.len() as u64 <= 2 * retained + 10,
            "{}",
            log.records.len()
        );
        let documents: usize = log.latest.values().map(HashMap::len).sum();
        assert_eq!(documents, log.documents);
        assert!(documents as u64 <= 2 * retained + 10, "{documents}");
        drop(logs);
        // From the start: the latest version of each live document once,
        // then every change of the window, deletes included.
        let changes = storage.read_changes("c", Lsn::ZERO, usize::MAX).unwrap();
        assert_eq!(changes.last().unwrap().lsn, Lsn(last));
        assert_eq!(storage.last_lsn("c").unwrap(), Lsn(last));
        assert_eq!(storage.last_lsn("none").unwrap(), Lsn::ZERO);
        let window = changes.iter().filter(|c| c.lsn.0 > last - retained).count();
        assert!(window as u64 >= retained, "{window}");
        for d in 0..10 {
            let id = format!("d{d}");
            let versions: Vec<_> = changes.iter().filter(|c| c.id == id).collect();
            let newest = versions.last().expect("a live document is in the log");
            assert_eq!(
                newest.document.as_ref().unwrap()["v"],
                commits as i64 - 10 + d
            );
        }
        let old_deletes = changes
            .iter()
            .filter(|c| c.kind == ChangeKind::Delete && c.lsn.0 <= last - 2 * retained)
            .count();
        assert_eq!(old_deletes, 0);
        // LSNs stay where they were: reading after one gives what follows.
        let tail = storage
            .read_changes("c", Lsn(last - 5), usize::MAX)
            .unwrap();
        assert_eq!(tail.first().map(|c| c.lsn), Some(Lsn(last - 4)));
    }
}
