//! The change-feed processor: delivers every change of a container to a
//! handler, in LSN order per physical partition, at least once, with its
//! position checkpointed durably in a lease container (as Cosmos DB's
//! change-feed processor does).
//!
//! ```text
//!   monitored container ── change log (one LSN per transaction)
//!          │ read_changes(lowest continuation of the held leases, max), split by physical partition
//!          ▼
//!   handler(batch) ──ok──► checkpoint: lease.continuation = last LSN read (replace, If-Match)
//!
//!   lease container (/id):  {"id": "<processor>.<container>.<p>", "physicalPartition": p,
//!                            "continuation": LSN, "owner": "<instance>", "expiresAt": ms}
//! ```
//!
//! **Leases.** There is one lease document per physical partition of the
//! monitored container. A processor instance (`owner`) only delivers changes
//! of partitions whose lease it holds. Each [`ChangeFeedProcessor::run_once`]
//! loads the leases, takes free or expired ones until it holds its fair share
//! (`ceil(leases / live owners)`), steals one from an owner holding more than
//! its share if it still has too few, delivers a batch per held lease and
//! writes the new continuation back. Every lease write is conditional on the
//! etag read, so two instances never both believe a write succeeded; an
//! instance whose lease was taken notices at its next checkpoint (412) and
//! stops delivering that partition. Expiry is measured with
//! [`ProcessorOptions::clock`], which tests replace. Instances may run on
//! different nodes sharing one PostgreSQL store: leases are documents like
//! any other there, so the same conditional writes decide between nodes
//! (`tests/all/nodes.rs`).
//!
//! **Delivery.** At least once: a batch is checkpointed only after the
//! handler returned `Ok`, so a crash or a handler error between delivery and
//! checkpoint delivers that batch again, and only that batch. Within a
//! physical partition changes arrive in LSN order (so every logical
//! partition's changes arrive in commit order); different partitions are
//! independent.
//!
//! **Deletes** are delivered, as [`engine::ChangeKind::Delete`] with `document: None`
//! (Cosmos DB's latest-version mode drops them; a view that must forget a
//! document needs them). [`ProcedureHandler`] skips them, because there is no
//! document to pass or to derive the target partition from.
//!
//! **Start.** [`StartFrom::Beginning`] replays the whole log, which is how a
//! new denormalized view is bootstrapped; [`StartFrom::Now`] starts after the
//! last committed change. Either applies only when a lease is first created;
//! afterwards the lease's continuation wins.
//!
//! ```
//! use partita::change_feed::{ChangeFeedProcessor, ProcessorOptions};
//! use partita::Database;
//! use serde_json::json;
//!
//! let db = Database::in_memory();
//! let posts = db.create_container("posts", "/postId")?;
//! let leases = db.create_container("leases", "/id")?;
//! posts.create_item("p1", json!({"id": "p1", "postId": "p1"}), None)?;
//! let mut seen = Vec::new();
//! let mut processor = ChangeFeedProcessor::new(&posts, &leases, "view", "instance-1",
//!     ProcessorOptions::default(), move |batch: &partita::change_feed::ChangeBatch<'_>| {
//!         seen.extend(batch.changes.iter().map(|c| c.id.clone()));
//!         Ok(())
//!     })?;
//! let report = processor.run_once()?;
//! assert_eq!(report.delivered, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{Change, Container, Document, EngineError, Error, Lsn, PartitionKey, WriteOptions};
use serde_json::{Value, json};

/// What a handler returns when it fails: any error. The batch is not
/// checkpointed and is delivered again.
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

/// What a closure handler returns.
pub type HandlerResult = Result<(), HandlerError>;

/// Milliseconds since the Unix epoch, as a processor measures lease expiry.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Why a processor step failed.
#[derive(Debug, thiserror::Error)]
pub enum ChangeFeedError {
    /// Reading the change log or a lease failed.
    #[error(transparent)]
    Engine(#[from] Error),
    /// The handler failed; the batch stays unacknowledged.
    #[error(
        "change-feed handler failed on physical partition {physical_partition} of container {container:?}: {source}"
    )]
    Handler {
        /// The monitored container.
        container: String,
        /// The physical partition of the batch.
        physical_partition: u32,
        /// What the handler returned.
        source: HandlerError,
    },
    /// A [`ProcedureHandler`]'s procedure failed on a change.
    #[error("procedure {procedure:?} failed on the change of document {id:?}: {source}")]
    Procedure {
        /// The procedure.
        procedure: String,
        /// The changed document.
        id: String,
        /// Its error (with its status and logs).
        source: Box<Error>,
    },
    /// The lease container is unusable: not partitioned by `/id`, or a
    /// lease document lacks its fields.
    #[error("lease container {container:?}: {message}")]
    Lease {
        /// The lease container.
        container: String,
        /// What is wrong.
        message: String,
    },
}

impl ChangeFeedError {
    /// The HTTP status Cosmos DB would use: the engine's or procedure's own,
    /// 400 for an unusable lease container, 500 for a failed handler.
    pub fn status(&self) -> u16 {
        match self {
            ChangeFeedError::Engine(e) => e.status(),
            ChangeFeedError::Procedure { source, .. } => source.status(),
            ChangeFeedError::Lease { .. } => 400,
            ChangeFeedError::Handler { .. } => 500,
        }
    }
}

/// Where a new lease starts reading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StartFrom {
    /// From the first change ever committed: bootstraps a view.
    #[default]
    Beginning,
    /// After the last change committed when the lease is created.
    Now,
}

/// How a processor works.
#[derive(Clone)]
pub struct ProcessorOptions {
    /// Where new leases start.
    pub start_from: StartFrom,
    /// The most changes read per lease and step (a transaction is never
    /// split, so a batch may hold more).
    pub max_items: usize,
    /// How long a lease stays held without renewal.
    pub lease_duration: Duration,
    /// The current time in milliseconds since the Unix epoch.
    pub clock: Clock,
}

impl Default for ProcessorOptions {
    fn default() -> ProcessorOptions {
        ProcessorOptions {
            start_from: StartFrom::Beginning,
            max_items: 100,
            lease_duration: Duration::from_secs(60),
            clock: Arc::new(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64)
            }),
        }
    }
}

impl std::fmt::Debug for ProcessorOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessorOptions")
            .field("start_from", &self.start_from)
            .field("max_items", &self.max_items)
            .field("lease_duration", &self.lease_duration)
            .finish_non_exhaustive()
    }
}

/// One delivery: changes of one physical partition, in LSN order.
#[derive(Clone, Copy, Debug)]
pub struct ChangeBatch<'a> {
    /// The monitored container.
    pub container: &'a str,
    /// The physical partition the changes belong to.
    pub physical_partition: u32,
    /// The changes, at least one; deletes have `document: None`.
    pub changes: &'a [Change],
}

/// Receives batches. Implemented by closures
/// `FnMut(&ChangeBatch) -> Result<(), HandlerError>` and by
/// [`ProcedureHandler`].
pub trait ChangeHandler: Send {
    /// Handles one batch; an `Err` leaves it unacknowledged.
    ///
    /// # Errors
    /// Whatever went wrong; the processor reports it and delivers the batch
    /// again on a later step.
    fn handle(&mut self, batch: &ChangeBatch<'_>) -> Result<(), ChangeFeedError>;
}

impl<F> ChangeHandler for F
where
    F: FnMut(&ChangeBatch<'_>) -> HandlerResult + Send,
{
    fn handle(&mut self, batch: &ChangeBatch<'_>) -> Result<(), ChangeFeedError> {
        self(batch).map_err(|source| ChangeFeedError::Handler {
            container: batch.container.to_owned(),
            physical_partition: batch.physical_partition,
            source,
        })
    }
}

/// How a [`ProcedureHandler`] finds the target partition of a document.
pub type TargetKey = Box<dyn Fn(&Document) -> Result<PartitionKey, Error> + Send>;

/// A handler that calls a stored procedure of a target container once per
/// created or replaced document, with the document as its only parameter,
/// in the target's logical partition derived from the document (by default:
/// the value at the *target* container's partition-key path). Each call is
/// one transaction, so the denormalization is atomic per target partition.
/// Deletes are skipped.
pub struct ProcedureHandler {
    target: Container,
    procedure: String,
    target_key: TargetKey,
}

impl ProcedureHandler {
    /// Calls `procedure` of `target`, in the partition given by the
    /// document's value at `target`'s partition-key path.
    pub fn new(target: &Container, procedure: impl Into<String>) -> ProcedureHandler {
        let keyed = target.clone();
        ProcedureHandler {
            target: target.clone(),
            procedure: procedure.into(),
            target_key: Box::new(move |doc| Ok(keyed.partition_key_of(doc))),
        }
    }

    /// Chooses the target partition with `f` instead.
    pub fn with_target_key(
        mut self,
        f: impl Fn(&Document) -> Result<PartitionKey, Error> + Send + 'static,
    ) -> ProcedureHandler {
        self.target_key = Box::new(f);
        self
    }
}

impl std::fmt::Debug for ProcedureHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcedureHandler")
            .field("target", &self.target.id())
            .field("procedure", &self.procedure)
            .finish_non_exhaustive()
    }
}

impl ChangeHandler for ProcedureHandler {
    fn handle(&mut self, batch: &ChangeBatch<'_>) -> Result<(), ChangeFeedError> {
        for change in batch.changes {
            let Some(doc) = &change.document else {
                continue;
            };
            let key = (self.target_key)(doc)?;
            self.target
                .execute_stored_procedure(
                    &self.procedure,
                    key,
                    vec![doc.clone().into_value()],
                    None,
                )
                .map_err(|source| ChangeFeedError::Procedure {
                    procedure: self.procedure.clone(),
                    id: change.id.clone(),
                    source: Box::new(source),
                })?;
        }
        Ok(())
    }
}

/// What one [`ChangeFeedProcessor::run_once`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunReport {
    /// The physical partitions whose lease this instance holds after the step.
    pub owned: Vec<u32>,
    /// Changes delivered to the handler.
    pub delivered: usize,
    /// Batches delivered.
    pub batches: usize,
}

/// A lease document as read, with its etag for the conditional write.
#[derive(Clone, Debug)]
struct Lease {
    id: String,
    physical_partition: u32,
    continuation: u64,
    owner: Option<String>,
    expires_at: u64,
    etag: String,
}

/// A change-feed processor instance. See the module docs.
pub struct ChangeFeedProcessor {
    monitored: Container,
    leases: Container,
    name: String,
    owner: String,
    options: ProcessorOptions,
    handler: Box<dyn ChangeHandler>,
}

impl std::fmt::Debug for ChangeFeedProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeFeedProcessor")
            .field("monitored", &self.monitored.id())
            .field("leases", &self.leases.id())
            .field("name", &self.name)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

impl ChangeFeedProcessor {
    /// A processor named `name` (instances with the same name share the
    /// work; another name is an independent reader with its own leases)
    /// running as instance `owner`, delivering `monitored`'s changes to
    /// `handler` and keeping its leases in `leases` (partitioned by `/id`).
    ///
    /// # Errors
    /// [`ChangeFeedError::Lease`] when `leases` is not partitioned by `/id`.
    pub fn new(
        monitored: &Container,
        leases: &Container,
        name: impl Into<String>,
        owner: impl Into<String>,
        options: ProcessorOptions,
        handler: impl ChangeHandler + 'static,
    ) -> Result<ChangeFeedProcessor, ChangeFeedError> {
        if leases.properties().partition_key_path != "/id" {
            return Err(ChangeFeedError::Lease {
                container: leases.id().to_owned(),
                message: format!(
                    "a lease container must be partitioned by /id, not {}",
                    leases.properties().partition_key_path
                ),
            });
        }
        Ok(ChangeFeedProcessor {
            monitored: monitored.clone(),
            leases: leases.clone(),
            name: name.into(),
            owner: owner.into(),
            options,
            handler: Box::new(handler),
        })
    }

    /// This instance's name.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    fn lease_id(&self, physical_partition: u32) -> String {
        format!("{}.{}.{physical_partition}", self.name, self.monitored.id())
    }

    fn lease_error(&self, message: String) -> ChangeFeedError {
        ChangeFeedError::Lease {
            container: self.leases.id().to_owned(),
            message,
        }
    }

    fn parse_lease(&self, doc: &Document) -> Result<Lease, ChangeFeedError> {
        let field = |name: &str| {
            doc.get(name)
                .and_then(Value::as_u64)
                .ok_or_else(|| self.lease_error(format!("lease {:?} has no {name}", doc.id())))
        };
        Ok(Lease {
            id: doc.id().to_owned(),
            physical_partition: field("physicalPartition")? as u32,
            continuation: field("continuation")?,
            owner: doc.get("owner").and_then(Value::as_str).map(str::to_owned),
            expires_at: field("expiresAt")?,
            etag: doc.etag().to_owned(),
        })
    }

    /// The LSN of the last committed change (when a lease is created with
    /// [`StartFrom::Now`]).
    fn head(&self) -> Result<u64, Error> {
        Ok(self.monitored.last_lsn()?.0)
    }

    /// Reads every lease, creating the missing ones.
    fn load_leases(&self) -> Result<Vec<Lease>, ChangeFeedError> {
        let partitions = self.monitored.properties().physical_partitions.max(1);
        let mut leases = Vec::with_capacity(partitions as usize);
        let mut start = None;
        for p in 0..partitions {
            let id = self.lease_id(p);
            let doc = match self.leases.read_item(id.as_str(), &id) {
                Ok(doc) => doc,
                Err(Error::Engine(EngineError::NotFound { .. })) => {
                    let continuation = match (self.options.start_from, start) {
                        (StartFrom::Beginning, _) => 0,
                        (StartFrom::Now, Some(lsn)) => lsn,
                        (StartFrom::Now, None) => *start.insert(self.head()?),
                    };
                    let lease = json!({
                        "id": id,
                        "processor": self.name,
                        "container": self.monitored.id(),
                        "physicalPartition": p,
                        "continuation": continuation,
                        "owner": null,
                        "expiresAt": 0,
                    });
                    match self.leases.create_item(id.as_str(), lease, None) {
                        Ok(created) => created.document().clone(),
                        // Another instance created it first.
                        Err(Error::Engine(EngineError::Conflict { .. })) => {
                            self.leases.read_item(id.as_str(), &id)?
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(e.into()),
            };
            leases.push(self.parse_lease(&doc)?);
        }
        Ok(leases)
    }

    /// Writes `lease` back if nobody changed it since it was read; `false`
    /// when somebody did (the lease is then not ours to use).
    fn write_lease(&self, lease: &mut Lease) -> Result<bool, ChangeFeedError> {
        let body = json!({
            "id": lease.id,
            "processor": self.name,
            "container": self.monitored.id(),
            "physicalPartition": lease.physical_partition,
            "continuation": lease.continuation,
            "owner": lease.owner,
            "expiresAt": lease.expires_at,
        });
        let options = WriteOptions::if_match(lease.etag.clone());
        match self
            .leases
            .replace_item(lease.id.as_str(), &lease.id, body, Some(&options))
        {
            Ok(replaced) => {
                lease.etag = replaced.document().etag().to_owned();
                Ok(true)
            }
            Err(Error::Engine(
                EngineError::PreconditionFailed { .. } | EngineError::NotFound { .. },
            )) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn expiry(&self, now: u64) -> u64 {
        now.saturating_add(self.options.lease_duration.as_millis() as u64)
    }

    /// Takes free and expired leases up to a fair share, steals one if that
    /// is not enough, and returns the leases this instance now holds.
    fn balance(&self, leases: Vec<Lease>, now: u64) -> Result<Vec<Lease>, ChangeFeedError> {
        let live = |l: &Lease| l.owner.is_some() && l.expires_at > now;
        let mut owners: HashSet<&str> = leases
            .iter()
            .filter(|l| live(l))
            .filter_map(|l| l.owner.as_deref())
            .collect();
        owners.insert(&self.owner);
        let target = leases.len().div_ceil(owners.len());
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for l in leases.iter().filter(|l| live(l)) {
            *counts
                .entry(l.owner.clone().unwrap_or_default())
                .or_default() += 1;
        }
        let mut mine = counts.get(&self.owner).copied().unwrap_or(0);
        let mut held = Vec::new();
        let mut free = Vec::new();
        let mut others = Vec::new();
        for lease in leases {
            if live(&lease) && lease.owner.as_deref() == Some(&self.owner) {
                held.push(lease);
            } else if !live(&lease) {
                free.push(lease);
            } else {
                // Held by another instance: a candidate for stealing.
                others.push(lease);
            }
        }
        for mut lease in free {
            if mine >= target {
                break;
            }
            lease.owner = Some(self.owner.clone());
            lease.expires_at = self.expiry(now);
            if self.write_lease(&mut lease)? {
                mine += 1;
                held.push(lease);
            }
        }
        if mine < target {
            // Steal one lease from the busiest instance holding more than
            // its share (one per step, so ownership settles gradually).
            let busiest = counts
                .iter()
                .filter(|(owner, count)| **owner != self.owner && **count > target)
                .max_by_key(|(_, count)| **count)
                .map(|(owner, _)| owner.clone());
            if let Some(victim) = busiest
                && let Some(mut lease) = others
                    .into_iter()
                    .find(|l| l.owner.as_deref() == Some(victim.as_str()))
            {
                lease.owner = Some(self.owner.clone());
                lease.expires_at = self.expiry(now);
                if self.write_lease(&mut lease)? {
                    held.push(lease);
                }
            }
        }
        held.sort_by_key(|l| l.physical_partition);
        Ok(held)
    }

    /// One step: balance the leases, then read a batch of the log after
    /// the lowest continuation of the held leases, and for each held lease
    /// deliver its partition's changes past its continuation and
    /// checkpoint. A lease lost to another instance meanwhile is dropped at
    /// its checkpoint. The log is read once for all the leases, not once
    /// each: with many physical partitions, each lease's share of a batch
    /// is small.
    ///
    /// # Errors
    /// The handler's error (the batch is not checkpointed and comes again),
    /// engine errors reading the log or writing a lease.
    pub fn run_once(&mut self) -> Result<RunReport, ChangeFeedError> {
        let now = (self.options.clock)();
        let leases = self.load_leases()?;
        let held = self.balance(leases, now)?;
        let mut report = RunReport::default();
        let max_items = self.options.max_items.max(1);
        let changes = match held.iter().map(|l| l.continuation).min() {
            Some(from) => self.monitored.read_changes(Lsn(from), max_items)?,
            None => Vec::new(),
        };
        let read_to = changes.last().map(|c| c.lsn.0);
        let mut by_partition: BTreeMap<u32, Vec<Change>> = BTreeMap::new();
        for change in changes {
            let p = self.monitored.physical_partition(&change.partition_key);
            by_partition.entry(p).or_default().push(change);
        }
        for mut lease in held {
            let p = lease.physical_partition;
            // Never back: a lease ahead of the batch keeps its place.
            let last = read_to.map_or(lease.continuation, |l| l.max(lease.continuation));
            let mut mine = by_partition.remove(&p).unwrap_or_default();
            mine.retain(|c| c.lsn.0 > lease.continuation);
            if !mine.is_empty() {
                self.handler.handle(&ChangeBatch {
                    container: self.monitored.id(),
                    physical_partition: p,
                    changes: &mine,
                })?;
                report.batches += 1;
                report.delivered += mine.len();
            }
            let renew = lease.expires_at < self.expiry(now) - self.half_duration();
            if last > lease.continuation || renew {
                lease.continuation = last;
                lease.expires_at = self.expiry(now);
                if !self.write_lease(&mut lease)? {
                    continue;
                }
            }
            report.owned.push(p);
        }
        Ok(report)
    }

    fn half_duration(&self) -> u64 {
        self.options.lease_duration.as_millis() as u64 / 2
    }

    /// Runs steps until one delivers nothing; returns the changes delivered.
    ///
    /// # Errors
    /// As [`ChangeFeedProcessor::run_once`].
    pub fn drain(&mut self) -> Result<usize, ChangeFeedError> {
        let mut total = 0;
        loop {
            let report = self.run_once()?;
            if report.delivered == 0 && !self.behind(&report.owned)? {
                return Ok(total);
            }
            total += report.delivered;
        }
    }

    /// Whether a held lease has not yet reached the end of the log.
    fn behind(&self, owned: &[u32]) -> Result<bool, ChangeFeedError> {
        for &p in owned {
            let id = self.lease_id(p);
            let lease = self.parse_lease(&self.leases.read_item(id.as_str(), &id)?)?;
            if !self
                .monitored
                .read_changes(Lsn(lease.continuation), 1)?
                .is_empty()
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Gives up every lease this instance holds (keeping the continuations),
    /// so other instances can take them at once instead of after expiry.
    ///
    /// # Errors
    /// Engine errors writing a lease.
    pub fn release(&mut self) -> Result<(), ChangeFeedError> {
        for mut lease in self.load_leases()? {
            if lease.owner.as_deref() == Some(&self.owner) {
                lease.owner = None;
                lease.expires_at = 0;
                self.write_lease(&mut lease)?;
            }
        }
        Ok(())
    }

    /// Runs the processor on a background thread, one step every
    /// `interval`, until [`ProcessorHandle::stop`]. A failed step is
    /// retried at the next interval; the last error is kept.
    pub fn spawn(self, interval: Duration) -> ProcessorHandle {
        let shared = Arc::new(Shared {
            stop: Mutex::new(false),
            wake: Condvar::new(),
            last_error: Mutex::new(None),
            delivered: Mutex::new(0),
        });
        let state = shared.clone();
        let mut processor = self;
        let thread = std::thread::spawn(move || {
            loop {
                match processor.run_once() {
                    Ok(report) => {
                        *state.delivered.lock().unwrap_or_else(|e| e.into_inner()) +=
                            report.delivered;
                    }
                    Err(e) => {
                        *state.last_error.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some(e.to_string());
                    }
                }
                let stop = state.stop.lock().unwrap_or_else(|e| e.into_inner());
                let (stop, _) = state
                    .wake
                    .wait_timeout_while(stop, interval, |stop| !*stop)
                    .unwrap_or_else(|e| e.into_inner());
                if *stop {
                    break;
                }
            }
            processor
        });
        ProcessorHandle {
            shared,
            thread: Some(thread),
        }
    }
}

struct Shared {
    stop: Mutex<bool>,
    wake: Condvar,
    last_error: Mutex<Option<String>>,
    delivered: Mutex<usize>,
}

/// A processor running on a background thread. Dropping it stops the thread
/// without releasing the leases (they expire).
pub struct ProcessorHandle {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<ChangeFeedProcessor>>,
}

impl std::fmt::Debug for ProcessorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessorHandle")
            .field("delivered", &self.delivered())
            .finish_non_exhaustive()
    }
}

impl ProcessorHandle {
    /// Changes delivered so far.
    pub fn delivered(&self) -> usize {
        *self
            .shared
            .delivered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The last failed step's error, if any.
    pub fn last_error(&self) -> Option<String> {
        self.shared
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn signal(&self) {
        *self.shared.stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.shared.wake.notify_all();
    }

    /// Stops the thread after its current step, releases the leases and
    /// hands the processor back.
    ///
    /// # Errors
    /// Engine errors releasing the leases; [`ChangeFeedError::Handler`] if
    /// the thread panicked (in the handler).
    pub fn stop(mut self) -> Result<ChangeFeedProcessor, ChangeFeedError> {
        self.signal();
        let thread = self.thread.take().expect("joined only here or on drop");
        let mut processor = thread.join().map_err(|_| ChangeFeedError::Handler {
            container: String::new(),
            physical_partition: 0,
            source: "the change-feed processor's thread panicked".into(),
        })?;
        processor.release()?;
        Ok(processor)
    }
}

impl Drop for ProcessorHandle {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.signal();
            let _ = thread.join();
        }
    }
}
