//! In-memory storage: no files, nothing survives the process.
//!
//! It still keeps the change log, so the change feed works in tests and
//! demos. The log grows without bound; use [`super::SqliteStorage`] for
//! anything long-running.

use std::collections::HashMap;

use parking_lot::Mutex;

use super::{Change, CommitRecord, ContainerMeta, LoadedContainer, Lsn, Storage};
use crate::error::Result;

/// Storage that keeps the change log in memory.
#[derive(Default)]
pub struct MemoryStorage {
    /// Per container: the change log, whose entry `i` has LSN `i + 1`.
    logs: Mutex<HashMap<String, Vec<Vec<Change>>>>,
}

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

    fn commit(&self, record: CommitRecord) -> Result<Lsn> {
        let mut logs = self.logs.lock();
        let log = logs.entry(record.container.to_string()).or_default();
        let lsn = Lsn(log.len() as u64 + 1);
        let partition_key = record.partition_key;
        log.push(
            record
                .changes
                .into_iter()
                .map(|c| Change {
                    lsn,
                    partition_key: partition_key.clone(),
                    id: c.id.to_string(),
                    kind: c.kind,
                    document: c.document,
                })
                .collect(),
        );
        Ok(lsn)
    }

    fn read_changes(&self, container: &str, after: Lsn, max_changes: usize) -> Result<Vec<Change>> {
        let logs = self.logs.lock();
        let Some(log) = logs.get(container) else { return Ok(Vec::new()) };
        let mut res = Vec::new();
        for txn in log.iter().skip(after.0 as usize) {
            if res.len() >= max_changes.max(1) {
                break;
            }
            res.extend(txn.iter().cloned());
        }
        Ok(res)
    }

    fn wants_text(&self) -> bool {
        false
    }
}
