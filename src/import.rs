//! Bulk import: many documents into one container at a high rate.
//!
//! [`Container::import_items`] reads documents in chunks. The documents of
//! each logical partition in a chunk commit in one transaction, and several
//! partitions' transactions commit at once, so a durable store syncs them
//! together (group commit). No triggers run. Unique keys, sizes and ids are
//! checked as for any write. A partition that is not in memory stays out
//! of it: only the ids being written are looked up in storage
//! ([`engine::Container::write_documents`]), so importing more than the
//! cache holds costs no more per document than importing less.
//!
//! An import is not one transaction. If it stops (a conflict, a bad
//! document, a full disk), what committed before stays, and
//! [`ImportError`] says how much that was and which partition's
//! transaction failed. Importing again with [`ImportOptions::upsert`]
//! resumes it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use engine::PartitionKey;
use serde_json::Value;

use crate::{Container, Error};

/// How [`Container::import_items`] writes.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// Replace a document whose id its logical partition already holds.
    /// Without it, such a document fails the import with 409.
    pub upsert: bool,
    /// Documents read before they are written (at least 1). The documents
    /// of each logical partition among them commit in one transaction.
    pub chunk_size: usize,
    /// A chunk also ends once its documents' JSON reaches this many bytes,
    /// which bounds the memory an import holds.
    pub chunk_bytes: usize,
    /// Transactions that commit at once (at least 1).
    pub threads: usize,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            upsert: false,
            chunk_size: 100_000,
            chunk_bytes: 64 << 20,
            threads: std::thread::available_parallelism()
                .map_or(2, std::num::NonZeroUsize::get)
                .max(2),
        }
    }
}

/// What an import wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportReport {
    /// Documents written.
    pub documents: u64,
    /// The size of their JSON.
    pub bytes: u64,
    /// Transactions committed (one per logical partition per chunk).
    pub transactions: u64,
    /// How long it took.
    pub elapsed: Duration,
}

impl ImportReport {
    /// Documents written per second.
    pub fn per_second(&self) -> f64 {
        self.documents as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Why an import stopped: one logical partition's transaction failed, and
/// nothing of it was written.
#[derive(Debug, thiserror::Error)]
#[error(
    "import stopped after {committed} documents: the transaction of logical partition \
     {partition_key} (documents from number {first}, counting from 0) failed: {source}"
)]
pub struct ImportError {
    /// Documents committed before the import stopped (they stay).
    pub committed: u64,
    /// The logical partition whose transaction failed.
    pub partition_key: PartitionKey,
    /// The position in the input of that partition's first document in the
    /// failed chunk.
    pub first: u64,
    /// The failure, with Cosmos DB's status.
    #[source]
    pub source: Box<Error>,
}

/// One logical partition's documents in a chunk, with the position of
/// the first.
struct Group {
    key: PartitionKey,
    first: u64,
    docs: Vec<Value>,
}

impl Container {
    /// Writes `docs` into this container in bulk (see the module docs),
    /// calling `progress` with the number of documents written after each
    /// chunk.
    ///
    /// ```
    /// use partita::{Database, ImportOptions};
    /// use serde_json::json;
    ///
    /// let db = Database::in_memory();
    /// let posts = db.create_container("posts", "/postId")?;
    /// let docs = (0..1000).map(|i| json!({"id": format!("p{i}"), "postId": format!("p{}", i % 10)}));
    /// let report = posts.import_items(docs, &ImportOptions::default(), &mut |_| {})?;
    /// assert_eq!((report.documents, report.transactions), (1000, 10));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ImportError`] when a transaction fails: a document that exists
    /// (409, unless `upsert`), one that is not a valid document (400), a
    /// unique key taken, or a store that cannot write.
    pub fn import_items<I>(
        &self,
        docs: I,
        options: &ImportOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport, ImportError>
    where
        I: IntoIterator<Item = Value>,
    {
        let started = Instant::now();
        let chunk_size = options.chunk_size.max(1);
        let mut docs = docs.into_iter();
        let mut report = ImportReport {
            documents: 0,
            bytes: 0,
            transactions: 0,
            elapsed: Duration::ZERO,
        };
        let mut position = 0u64;
        loop {
            let mut chunk: Vec<Value> = Vec::new();
            let mut bytes = 0;
            while chunk.len() < chunk_size && bytes < options.chunk_bytes {
                let Some(doc) = docs.next() else { break };
                bytes += host_api::json::serialized_len(&doc);
                chunk.push(doc);
            }
            if chunk.is_empty() {
                break;
            }
            let groups = self.group(chunk, &mut position);
            let written: u64 = groups.iter().map(|g| g.docs.len() as u64).sum();
            let transactions = groups.len() as u64;
            self.commit_groups(groups, options).map_err(|mut e| {
                e.committed += report.documents;
                e
            })?;
            report.documents += written;
            report.bytes += bytes as u64;
            report.transactions += transactions;
            progress(report.documents);
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// A chunk's documents by logical partition, in the order each first
    /// appears.
    fn group(&self, chunk: Vec<Value>, position: &mut u64) -> Vec<Group> {
        let mut groups: Vec<Group> = Vec::new();
        let mut index: HashMap<PartitionKey, usize> = HashMap::new();
        for doc in chunk {
            let key = self.partition_key_of(&doc);
            let at = *index.entry(key.clone()).or_insert_with(|| {
                groups.push(Group {
                    key,
                    first: *position,
                    docs: Vec::new(),
                });
                groups.len() - 1
            });
            groups[at].docs.push(doc);
            *position += 1;
        }
        groups
    }

    /// Commits each group in its own transaction, `options.threads` at a
    /// time. On failure, `committed` counts the chunk's documents only.
    fn commit_groups(
        &self,
        groups: Vec<Group>,
        options: &ImportOptions,
    ) -> Result<(), ImportError> {
        let committed = AtomicUsize::new(0);
        let failed: Mutex<Option<(PartitionKey, u64, Box<Error>)>> = Mutex::new(None);
        let threads = options.threads.clamp(1, groups.len().max(1));
        let queue = Mutex::new(groups.into_iter());
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    loop {
                        if failed.lock().is_ok_and(|f| f.is_some()) {
                            break;
                        }
                        let Some(group) = queue.lock().ok().and_then(|mut q| q.next()) else {
                            break;
                        };
                        let count = group.docs.len();
                        let result = self.raw().write_documents(
                            group.key.clone(),
                            group.docs,
                            options.upsert,
                        );
                        match result {
                            Ok(_) => {
                                committed.fetch_add(count, Ordering::Relaxed);
                            }
                            Err(e) => {
                                if let Ok(mut f) = failed.lock() {
                                    // The earliest failure in the input wins.
                                    if f.as_ref().is_none_or(|(_, first, _)| group.first < *first) {
                                        *f = Some((
                                            group.key,
                                            group.first,
                                            Box::new(Error::from(e)),
                                        ));
                                    }
                                }
                            }
                        }
                    }
                });
            }
        });
        let committed = committed.into_inner() as u64;
        match failed.into_inner().ok().flatten() {
            Some((partition_key, first, source)) => Err(ImportError {
                committed,
                partition_key,
                first,
                source,
            }),
            None => Ok(()),
        }
    }
}
