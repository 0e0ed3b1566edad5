//! In-memory storage: no files, nothing survives the process.
//!
//! It still keeps the change log, so the change feed works in tests and
//! demos. The log grows without bound; use [`super::SqliteStorage`] for
//! anything long-running.

use std::collections::HashMap;

use parking_lot::Mutex;

use host_api::{PartitionKey, ScriptKind};

use super::{
    Change, ChangeKind, CommitRecord, ContainerMeta, LoadedContainer, LoadedDocument, Lsn,
    ScriptRecord, Storage,
};
use crate::document::{Document, now_secs};
use crate::error::Result;

/// Storage that keeps the change log in memory.
#[derive(Default)]
pub struct MemoryStorage {
    /// Per container: the change log, whose entry `i` has LSN `i + 1`.
    /// Records are kept as committed and turned into [`Change`]s only when
    /// read, so a commit costs no copying; with each, the clock at commit
    /// when it deletes something (a delete has no `_ts` of its own).
    logs: Mutex<HashMap<String, ChangeLog, foldhash::quality::RandomState>>,
}

/// One container's change log: each commit with its clock at commit.
type ChangeLog = Vec<(CommitRecord, u64)>;

impl MemoryStorage {
    /// Creates an empty store.
    pub fn new() -> MemoryStorage {
        MemoryStorage::default()
    }
}

impl Storage for MemoryStorage {
    fn load(&self) -> Result<Vec<LoadedContainer>> {
        Ok(Vec::new())
    }

    fn create_container(&self, meta: &ContainerMeta) -> Result<()> {
        self.logs.lock().entry(meta.id.clone()).or_default();
        Ok(())
    }

    fn delete_container(&self, id: &str) -> Result<()> {
        self.logs.lock().remove(id);
        Ok(())
    }

    fn update_container(&self, _meta: &ContainerMeta) -> Result<()> {
        Ok(())
    }

    fn put_script(&self, _script: &ScriptRecord) -> Result<()> {
        Ok(())
    }

    fn delete_script(&self, _container: &str, _kind: ScriptKind, _id: &str) -> Result<()> {
        Ok(())
    }

    fn commit(&self, record: CommitRecord) -> Result<Lsn> {
        let deletes = record.changes.iter().any(|c| c.kind == ChangeKind::Delete);
        let at = if deletes { now_secs() } else { 0 };
        let mut logs = self.logs.lock();
        let log = match logs.get_mut(&*record.container) {
            Some(log) => log,
            None => logs.entry(record.container.to_string()).or_default(),
        };
        log.push((record, at));
        Ok(Lsn(log.len() as u64))
    }

    fn read_changes(&self, container: &str, after: Lsn, max_changes: usize) -> Result<Vec<Change>> {
        let logs = self.logs.lock();
        let Some(log) = logs.get(container) else {
            return Ok(Vec::new());
        };
        let mut res = Vec::new();
        for (i, (record, at)) in log.iter().enumerate().skip(after.0 as usize) {
            if res.len() >= max_changes.max(1) {
                break;
            }
            let lsn = Lsn(i as u64 + 1);
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
}
