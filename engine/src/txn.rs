//! Single-partition transactions.
//!
//! A transaction reads one logical partition and buffers its writes. Only one
//! read-write transaction may be open per logical partition at a time: `Txn`
//! owns the partition's writer lock, so a second `begin` on the same
//! partition waits (up to [`crate::Options::lock_timeout`]) and transactions
//! on one partition are serializable. Transactions on different partitions
//! run in parallel. Readers never wait and never see uncommitted writes.
//!
//! LIFECYCLE
//! =========
//!
//! ```text
//!   begin ──► read/create/replace/upsert/delete* ──► commit ──► Storage::commit (durable) ──► publish
//!                                          │
//!                                          └──► rollback (or drop) ──► discard the write set
//! ```
//!
//! Writes go to a private write set; the committed state is untouched until
//! the storage has made the whole set durable, so a rollback never touches
//! storage and a failed commit leaves memory and disk as they were. A write
//! is visible to its own transaction at once.
//!
//! DEADLINES
//! =========
//!
//! A transaction may carry a deadline ([`crate::Container::begin_with_deadline`]:
//! a time limit from `begin`; the facade gives every script call one). Past it, the next writer of the
//! partition takes the writer lock over (see [`crate::partition`]): the
//! transaction is revoked, its operations and its commit fail with
//! [`Error::Abandoned`] (408), and none of its writes is ever published. A
//! commit that has started is never revoked, so a transaction either
//! commits whole or is abandoned whole. A stuck script thread that cannot be
//! interrupted thus holds its partition only until its deadline.
//!
//! Non-goals: cross-partition transactions, nested transactions, multiple
//! writers within one partition. Beginning a second transaction on the same
//! partition from the thread that holds the first one waits for the lock
//! timeout and fails: it cannot succeed.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use host_api::{PartitionKey, Statistics};
use serde_json::Value;

use crate::container::ContainerInner;
use crate::database::DbInner;
use crate::document::{
    Document, MAX_DOCUMENT_SIZE, MAX_NESTING, checked_unstamped_len, drop_deep, validate_id,
};
use crate::error::{Error, Result};
use crate::partition::{
    FOOTPRINT_PER_PARTITION, LogicalPartition, PartitionState, Slot, WriterLock,
};
use crate::patch::Patch;
use crate::query::Udf;
use crate::settings::Expiry;
use crate::storage::{ChangeKind, CommitRecord, Lsn, RecordChange};

/// Write sets up to this size are searched linearly rather than hashed.
const SMALL_WRITE_SET: usize = 8;

/// Options of a single write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ItemOptions {
    /// `If-Match`: the write happens only if the document's current `_etag`
    /// equals this value, otherwise it fails with 412.
    pub if_match: Option<String>,
}

impl ItemOptions {
    /// Options with an `If-Match` precondition.
    pub fn if_match(etag: impl Into<String>) -> ItemOptions {
        ItemOptions {
            if_match: Some(etag.into()),
        }
    }
}

/// Who writes a document, which decides what a document without the
/// partition-key property means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writer {
    /// A client's point write: the document's key must be the request's;
    /// a document without the property belongs to the `None` partition.
    Client,
    /// A script's write: a document without the property lands in the
    /// call's logical partition, as on Cosmos DB (the .NET SDK's emulator
    /// test `TestUniqueConstraintSample` relies on it); one with another
    /// key is still refused.
    Script,
}

/// A document that passed [`Txn::check`], with its serialized length
/// without the values of its system properties ([`checked_unstamped_len`]).
struct Checked {
    id: Arc<str>,
    doc: Value,
    len: usize,
}

/// Where a document stands in a transaction ([`Txn::place`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Its entry in the write set, at this index.
    Written(usize),
    /// Not written yet: its rid in the committed state, if it is there
    /// (expired or not).
    Base(Option<u64>),
}

/// One document's pending change.
#[derive(Clone)]
struct Write {
    id: Arc<str>,
    /// The document's rid in the committed state when the transaction began.
    before: Option<u64>,
    /// The document after the transaction's last write to it; `None` if deleted.
    after: Option<Slot>,
    /// `after` as JSON text, when the storage wants it.
    text: Option<Arc<str>>,
    /// Sequence number of the last write to it.
    seq: u64,
}

impl Write {
    /// What committing this write does to the document; `None` for one
    /// created and deleted again in the transaction.
    fn kind(&self) -> Option<ChangeKind> {
        match (&self.before, &self.after) {
            (None, None) => None,
            (None, Some(_)) => Some(ChangeKind::Create),
            (Some(_), Some(_)) => Some(ChangeKind::Replace),
            (Some(_), None) => Some(ChangeKind::Delete),
        }
    }
}

/// A transaction's hold on its partition's writer lock; dropping it
/// releases the lock, unless a writer has taken it over meanwhile.
struct Lease {
    lock: Arc<WriterLock>,
    generation: u64,
    /// How long the transaction was given, when it has a deadline.
    limit: Option<Duration>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.lock.release(self.generation);
    }
}

/// A read-write transaction on one logical partition. Dropping it without
/// [`Txn::commit`] rolls it back.
pub struct Txn {
    db: Arc<DbInner>,
    container: Arc<ContainerInner>,
    partition: Arc<LogicalPartition>,
    /// The state the transaction began on: the committed one, or the one
    /// a commit not yet durable left for the next writer (`base_early`).
    /// It cannot change while the transaction holds the writer lock (a
    /// revoked one cannot commit).
    base: Arc<PartitionState>,
    /// A transaction on a partition that is not in memory and stays out
    /// of it (see [`Txn::begin_detached`]).
    detached: bool,
    /// The partition's version in a shared store that `base` is at (0
    /// elsewhere): the commit succeeds only if it is still current.
    base_version: u64,
    /// The commit released early that `base` is the state after, while
    /// it was not yet durable (0: `base` is committed). See
    /// [`LogicalPartition::release_early`].
    base_early: u64,
    writes: Vec<Write>,
    /// What the call did, for [`host_api::Collection::stats`].
    stats: Statistics,
    /// How queries in this transaction call `udf.name(...)`.
    udfs: Option<Rc<dyn Udf>>,
    /// Positions in `writes` by id, built once `writes` outgrows
    /// [`SMALL_WRITE_SET`].
    index: HashMap<Arc<str>, usize>,
    /// When the container's items expire, as of the transaction's start;
    /// `None` when time to live is off. An expired document of `base` is
    /// absent to the transaction.
    expiry: Option<Expiry>,
    /// The write set and statistics at [`Txn::mark`].
    mark: Option<Mark>,
    /// The partition's writer lock (declared last: released after the rest).
    lease: Lease,
}

/// A commit released early ([`LogicalPartition::release_early`]) that is
/// abandoned when dropped unless it was published (`None`).
struct Unsettled<'a>(&'a LogicalPartition, Option<u64>);

impl Drop for Unsettled<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.1 {
            self.0.abandon(n);
        }
    }
}

/// What [`Txn::roll_back`] returns to.
struct Mark {
    writes: Vec<Write>,
    index: HashMap<Arc<str>, usize>,
    stats: Statistics,
}

impl Txn {
    /// Begins a transaction on `key`; one with a `limit` can be taken over
    /// once that much time has passed since it called `begin`.
    pub(crate) fn begin(
        db: Arc<DbInner>,
        container: Arc<ContainerInner>,
        key: PartitionKey,
        limit: Option<Duration>,
    ) -> Result<Txn> {
        // The deadline runs from the call: waiting for the lock counts. A
        // limit too far away for an `Instant` never expires.
        let deadline = limit.and_then(|limit| Instant::now().checked_add(limit));
        let key = Txn::checked_key(&container, key)?;
        if !db.shared {
            let partition = container.loaded_partition(&db, key)?;
            return Txn::begin_on(db, container, partition, None, limit, deadline);
        }
        // `begin_on` loads the partition, or confirms the copy in memory,
        // once it holds the writer lock; the statement that reads the
        // partition's version reads the catalog's too.
        let partition = container.partition(&db, key);
        let txn = Txn::begin_on(
            db.clone(),
            container.clone(),
            partition,
            None,
            limit,
            deadline,
        )?;
        if !db.catalog_behind() {
            return Ok(txn);
        }
        // Another node changed a container or a script: read them again,
        // without holding the partition (the catalog's lock comes first),
        // so that what the transaction looks up next (its procedure, its
        // triggers, the container's settings) is at least as new as that
        // change; then begin again, unless the container is gone.
        let key = txn.partition.key.clone();
        drop(txn);
        db.sync_catalog()?;
        drop(container.alive()?);
        let partition = container.partition(&db, key);
        Txn::begin_on(db, container, partition, None, limit, deadline)
    }

    /// Begins a transaction on a logical partition that is not in memory
    /// and stays out of it, for a caller holding the partition's `loading`
    /// lock until the transaction ends: `base` holds the documents the
    /// transaction may touch, read from storage, and the commit changes
    /// storage alone. Only for writes that touch nothing else (no query,
    /// no unique key: see [`crate::Container::write_documents`]).
    pub(crate) fn begin_detached(
        db: Arc<DbInner>,
        container: Arc<ContainerInner>,
        partition: Arc<LogicalPartition>,
        base: PartitionState,
        base_version: u64,
    ) -> Result<Txn> {
        debug_assert!(!partition.is_loaded());
        Txn::begin_on(
            db,
            container,
            partition,
            Some((base, base_version)),
            None,
            None,
        )
    }

    /// `key` completed to the container's full key, checked for size.
    pub(crate) fn checked_key(
        container: &ContainerInner,
        key: PartitionKey,
    ) -> Result<PartitionKey> {
        let key = container.full_key(key)?;
        for component in key.components() {
            if let PartitionKey::String(s) = component
                && s.len() > crate::MAX_PARTITION_KEY_SIZE
            {
                return Err(Error::BadRequest(format!(
                    "partition key of container {:?} is {} bytes, over the {}-byte limit",
                    container.meta.id,
                    s.len(),
                    crate::MAX_PARTITION_KEY_SIZE
                )));
            }
        }
        Ok(key)
    }

    /// Takes `partition`'s writer lock; the transaction works on
    /// `detached` when given, otherwise on the partition's committed state.
    fn begin_on(
        db: Arc<DbInner>,
        container: Arc<ContainerInner>,
        partition: Arc<LogicalPartition>,
        detached: Option<(PartitionState, u64)>,
        limit: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<Txn> {
        let timeout = db.options.lock_timeout;
        let Some(generation) = partition.writer.acquire(timeout, deadline) else {
            return Err(Error::LockTimeout {
                container: container.meta.id.clone(),
                partition_key: partition.key.clone(),
                waited: timeout,
            });
        };
        let lease = Lease {
            lock: partition.writer.clone(),
            generation,
            limit,
        };
        // Taken after the lock: the committed state cannot change from here
        // (on this node; over a shared store, `refresh` first reads it again
        // if another node committed since it was read), nor can the state
        // a commit released early left for the next writer.
        let (base, base_version, detached, base_early) = match detached {
            Some((base, version)) => (Arc::new(base), version, true, 0),
            None if db.shared => {
                let version = container.refresh(&db, &partition)?;
                (partition.snapshot(), version, false, 0)
            }
            None => {
                let (base, early) = partition.writer_base();
                (base, 0, false, early)
            }
        };
        let expiry = container.expiry(|| db.now_secs());
        Ok(Txn {
            expiry,
            db,
            container,
            partition,
            base,
            detached,
            base_version,
            base_early,
            writes: Vec::new(),
            stats: Statistics::default(),
            udfs: None,
            index: HashMap::new(),
            mark: None,
            lease,
        })
    }

    /// Marks the write set and statistics as they are now (replacing an
    /// earlier mark), for [`Txn::roll_back`].
    pub(crate) fn mark(&mut self) {
        self.mark = Some(Mark {
            writes: self.writes.clone(),
            index: self.index.clone(),
            stats: self.stats,
        });
    }

    /// Returns the write set and statistics to the last [`Txn::mark`],
    /// which stays set. Rids and sequence numbers taken since are not
    /// reused: gaps in them are allowed.
    pub(crate) fn roll_back(&mut self) {
        if let Some(mark) = &self.mark {
            self.writes.clone_from(&mark.writes);
            self.index.clone_from(&mark.index);
            self.stats = mark.stats;
        }
    }

    /// Fails with [`Error::Abandoned`] when the transaction ran past its
    /// deadline and another writer took its partition over. Free for a
    /// transaction without a deadline, which nothing can revoke.
    fn check_held(&self) -> Result<()> {
        match self.lease.limit {
            Some(limit) if !self.lease.lock.holds(self.lease.generation) => {
                Err(self.abandoned(limit))
            }
            _ => Ok(()),
        }
    }

    fn abandoned(&self, limit: Duration) -> Error {
        Error::Abandoned {
            container: self.container.meta.id.clone(),
            partition_key: self.partition.key.clone(),
            limit,
        }
    }

    /// The logical partition this transaction writes.
    pub fn partition_key(&self) -> &PartitionKey {
        &self.partition.key
    }

    /// The container's id.
    pub fn container_id(&self) -> &str {
        &self.container.meta.id
    }

    /// Lets queries run in this transaction (by a procedure, through
    /// [`host_api::Collection::query`]) call user-defined functions.
    pub fn set_udfs(&mut self, udfs: Rc<dyn Udf>) {
        self.udfs = Some(udfs);
    }

    pub(crate) fn udfs(&self) -> Option<&Rc<dyn Udf>> {
        self.udfs.as_ref()
    }

    /// The committed state the transaction began with.
    pub(crate) fn base(&self) -> &PartitionState {
        &self.base
    }

    pub(crate) fn container_inner(&self) -> &ContainerInner {
        &self.container
    }

    /// Whether the transaction has deleted `id` (which may have existed).
    pub(crate) fn deleted(&self, id: &str) -> bool {
        self.find(id)
            .is_some_and(|i| self.writes[i].after.is_none())
    }

    /// The id of the document with resource id `rid`, as the transaction sees it.
    pub(crate) fn id_by_rid(&self, rid: u64) -> Option<String> {
        if let Some(w) = self
            .writes
            .iter()
            .find(|w| w.after.as_ref().is_some_and(|s| s.rid == rid))
        {
            return Some(w.id.to_string());
        }
        let slot = self.base.get_by_rid(rid)?;
        let id = slot.document.id();
        self.current(id)
            .is_some_and(|s| s.rid == rid)
            .then(|| id.to_owned())
    }

    /// The serialized size in bytes of the document `id` as this transaction
    /// sees it.
    pub fn document_size(&self, id: &str) -> Option<usize> {
        self.current(id).map(|slot| slot.size)
    }

    pub(crate) fn size_of(&self, id: &str) -> u64 {
        self.current(id).map_or(0, |slot| slot.size as u64)
    }

    pub(crate) fn record_read(&mut self, docs: u64, bytes: u64) {
        self.stats.docs_read += docs;
        self.stats.bytes_read += bytes;
    }

    pub(crate) fn record_write(&mut self, doc: &Document) {
        let size = self.size_of(doc.id());
        self.stats.docs_written += 1;
        self.stats.bytes_written += size;
    }

    pub(crate) fn record_delete(&mut self) {
        self.stats.docs_written += 1;
    }

    pub(crate) fn call_stats(&self) -> Statistics {
        self.stats
    }

    fn current(&self, id: &str) -> Option<&Slot> {
        self.current_at(self.place(id))
    }

    /// Where the document `id` is now: in the write set, or (perhaps) in
    /// the committed state. A write looks it up once, for its checks and
    /// for [`Txn::slot_for`].
    fn place(&self, id: &str) -> Place {
        match self.find(id) {
            Some(i) => Place::Written(i),
            None => Place::Base(self.base.rid(id)),
        }
    }

    /// [`Txn::current`] of the document at `place`.
    fn current_at(&self, place: Place) -> Option<&Slot> {
        match place {
            Place::Written(i) => self.writes[i].after.as_ref(),
            Place::Base(rid) => rid
                .and_then(|rid| self.base.get_by_rid(rid))
                .filter(|slot| !self.expired(slot)),
        }
    }

    /// Whether a document of the committed state has expired (is absent
    /// to this transaction).
    pub(crate) fn expired(&self, slot: &Slot) -> bool {
        self.expiry
            .as_ref()
            .is_some_and(|e| e.expired(slot.document.value()))
    }

    /// The index of `id`'s entry in the write set. Small write sets (the
    /// common case) are searched linearly; larger ones through `index`.
    fn find(&self, id: &str) -> Option<usize> {
        if self.writes.len() <= SMALL_WRITE_SET {
            self.writes.iter().position(|w| *w.id == *id)
        } else {
            self.index.get(id).copied()
        }
    }

    /// Reads a document as this transaction sees it (its own writes included).
    ///
    /// # Errors
    /// [`Error::NotFound`] when there is no such document.
    pub fn read_item(&self, id: &str) -> Result<Document> {
        self.check_held()?;
        self.current(id)
            .map(|slot| slot.document.clone())
            .ok_or_else(|| self.not_found(id))
    }

    /// Like [`Txn::read_item`], but `None` when there is no such document.
    pub fn get_item(&self, id: &str) -> Option<Document> {
        self.current(id).map(|slot| slot.document.clone())
    }

    /// The partition as this transaction sees it, in insertion order.
    pub fn view(&self) -> PartitionState {
        let mut view = (*self.base).clone();
        if self.expiry.is_some() {
            for slot in self.base.scan_after(None) {
                if self.expired(slot) {
                    view.remove(slot.document.id());
                }
            }
        }
        for write in &self.writes {
            match &write.after {
                Some(slot) => view.put(write.id.clone(), slot.clone()),
                None => view.remove(&write.id),
            }
        }
        view
    }

    /// Creates a document.
    ///
    /// # Errors
    /// [`Error::Conflict`] if the id exists; [`Error::BadRequest`],
    /// [`Error::CrossPartition`] or [`Error::TooLarge`] for a bad document.
    pub fn create_item(&mut self, doc: Value) -> Result<Document> {
        self.create_as(doc, Writer::Client)
    }

    /// [`Txn::create_item`] for `writer`.
    pub(crate) fn create_as(&mut self, doc: Value, writer: Writer) -> Result<Document> {
        self.check_held()?;
        let checked = self.check(doc, writer)?;
        let place = self.place(&checked.id);
        if self.current_at(place).is_some() {
            return Err(self.conflict(&checked.id));
        }
        self.put(checked, None, place)
    }

    /// Replaces the document `id` with `doc`. When `doc` has another id, the
    /// document is renamed, as Cosmos DB does: it keeps its `_rid`, and the
    /// new id must be free in the partition.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::PreconditionFailed`] (`If-Match`),
    /// [`Error::Conflict`] (a rename onto a taken id),
    /// [`Error::BadRequest`], [`Error::CrossPartition`], [`Error::TooLarge`].
    pub fn replace_item(
        &mut self,
        id: &str,
        doc: Value,
        options: Option<&ItemOptions>,
    ) -> Result<Document> {
        self.replace_as(id, doc, options, Writer::Client)
    }

    /// [`Txn::replace_item`] for `writer`.
    pub(crate) fn replace_as(
        &mut self,
        id: &str,
        doc: Value,
        options: Option<&ItemOptions>,
        writer: Writer,
    ) -> Result<Document> {
        self.check_held()?;
        let checked = self.check(doc, writer)?;
        let mut place = self.place(id);
        let rid = match self.current_at(place) {
            Some(slot) => {
                self.check_etag(id, Some(&slot.document), options)?;
                slot.rid
            }
            None => return Err(self.not_found(id)),
        };
        let renamed = *checked.id != *id;
        if renamed {
            place = self.place(&checked.id);
            if self.current_at(place).is_some() {
                return Err(self.conflict(&checked.id));
            }
        }
        // The old id goes only once the new document is in: a failed
        // operation changes nothing (`put` can still refuse a document
        // that its system properties take past the size limit).
        let written = self.put(checked, Some(rid), place)?;
        if renamed {
            self.remove(id);
        }
        Ok(written)
    }

    /// Creates or replaces a document.
    ///
    /// # Errors
    /// [`Error::PreconditionFailed`] when `If-Match` is given, the document
    /// exists and its etag differs (a create ignores `If-Match`, as on the
    /// service); [`Error::BadRequest`], [`Error::CrossPartition`],
    /// [`Error::TooLarge`].
    pub fn upsert_item(&mut self, doc: Value, options: Option<&ItemOptions>) -> Result<Document> {
        self.upsert_as(doc, options, Writer::Client)
    }

    /// [`Txn::upsert_item`] for `writer`.
    pub(crate) fn upsert_as(
        &mut self,
        doc: Value,
        options: Option<&ItemOptions>,
        writer: Writer,
    ) -> Result<Document> {
        self.check_held()?;
        let checked = self.check(doc, writer)?;
        let place = self.place(&checked.id);
        let existing = self.current_at(place);
        let rid = existing.map(|slot| slot.rid);
        // An If-Match is a condition on the document being replaced: an
        // upsert that creates ignores it, as on the service.
        if let Some(slot) = existing {
            self.check_etag(&checked.id, Some(&slot.document), options)?;
        }
        self.put(checked, rid, place)
    }

    /// Applies `patch` to the document `id` and writes the result as a
    /// replace: the same etag, size and partition-key rules, and nothing
    /// changes when an operation fails.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::PreconditionFailed`] for a stale
    /// `If-Match`; [`Error::ConditionNotMet`] when the patch's condition is
    /// false; [`Error::BadRequest`] naming an operation that cannot apply
    /// (a missing path, a non-number to increment) or a patched document
    /// that is no longer valid.
    pub fn patch_item(
        &mut self,
        id: &str,
        patch: &Patch,
        options: Option<&ItemOptions>,
    ) -> Result<Document> {
        let doc = self.patched(id, patch, options)?;
        self.replace_as(id, doc, None, Writer::Client)
    }

    /// The document `id` after `patch`, not yet written (the facade hands
    /// it to a pre-trigger before [`Txn::replace_item`] writes it).
    ///
    /// # Errors
    /// As [`Txn::patch_item`], except for the checks of the write itself.
    pub fn patched(&self, id: &str, patch: &Patch, options: Option<&ItemOptions>) -> Result<Value> {
        self.check_held()?;
        let Some(slot) = self.current(id) else {
            return Err(self.not_found(id));
        };
        self.check_etag(id, Some(&slot.document), options)?;
        if !patch.condition_holds(&self.partition.key, slot.document.value())? {
            return Err(Error::ConditionNotMet {
                container: self.container.meta.id.clone(),
                partition_key: self.partition.key.clone(),
                id: id.to_owned(),
                condition: patch.condition().unwrap_or_default().to_owned(),
            });
        }
        let mut doc = slot.document.value().clone();
        patch.apply(&mut doc)?;
        Ok(doc)
    }

    /// Deletes the document `id`.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::PreconditionFailed`].
    pub fn delete_item(&mut self, id: &str, options: Option<&ItemOptions>) -> Result<()> {
        self.check_held()?;
        let Some(slot) = self.current(id) else {
            return Err(self.not_found(id));
        };
        self.check_etag(id, Some(&slot.document), options)?;
        self.remove(id);
        Ok(())
    }

    /// Deletes every document of the partition, expired ones included;
    /// returns how many the transaction could see.
    pub(crate) fn delete_all(&mut self) -> usize {
        let ids: Vec<Arc<str>> = self
            .base
            .documents()
            .map(|doc| Arc::from(doc.id()))
            .chain(
                self.writes
                    .iter()
                    .filter(|w| w.after.is_some())
                    .map(|w| w.id.clone()),
            )
            .collect();
        let mut visible = 0;
        for id in ids {
            let exists = match self.find(&id) {
                Some(i) => self.writes[i].after.is_some(),
                None => self.base.get(&id).is_some(),
            };
            if exists {
                visible += usize::from(self.current(&id).is_some());
                self.remove(&id);
            }
        }
        visible
    }

    /// Deletes the committed documents that have expired; returns how many.
    pub(crate) fn purge_expired(&mut self) -> usize {
        let expired: Vec<Arc<str>> = self
            .base
            .scan_after(None)
            .filter(|slot| self.expired(slot) && self.find(slot.document.id()).is_none())
            .map(|slot| Arc::from(slot.document.id()))
            .collect();
        for id in &expired {
            self.remove(id);
        }
        expired.len()
    }

    /// Records the deletion of `id`, which exists.
    fn remove(&mut self, id: &str) {
        let seq = self.container.next_seq();
        let place = self.place(id);
        let i = self.slot_for(id.into(), place);
        let write = &mut self.writes[i];
        write.after = None;
        write.text = None;
        write.seq = seq;
    }

    /// Creates a document as a script's write does: one without the
    /// partition-key property lands in this transaction's partition (see
    /// [`Txn::create_item`] for the rest).
    ///
    /// # Errors
    /// As [`Txn::create_item`].
    pub fn create_item_as_script(&mut self, doc: Value) -> Result<Document> {
        self.create_as(doc, Writer::Script)
    }

    /// What the transaction would commit now, in the order its documents
    /// were first written: each document's id, whether it is created,
    /// replaced or deleted, and its new content (`None` for a delete). A
    /// document created and deleted again is not in it.
    pub fn write_set(&self) -> Vec<(Arc<str>, ChangeKind, Option<Document>)> {
        self.writes
            .iter()
            .filter_map(|w| {
                let kind = w.kind()?;
                Some((
                    w.id.clone(),
                    kind,
                    w.after.as_ref().map(|s| s.document.clone()),
                ))
            })
            .collect()
    }

    /// Commits: makes every write durable, then visible. Returns the LSN of
    /// the transaction in the container's change log, or `None` when it wrote
    /// nothing. The partition's next writer may begin once the record is
    /// in the log, before it is durable, and is then acknowledged only if
    /// this commit becomes durable (early lock release).
    ///
    /// # Errors
    /// [`Error::Storage`] when the storage fails (the store then refuses all
    /// writes), [`Error::ReadOnly`] after an earlier failure,
    /// [`Error::Abandoned`] when the transaction ran past its deadline and
    /// lost its partition to another writer, [`Error::PartitionChanged`]
    /// (449) when another node sharing the store committed to the
    /// partition after this transaction read it, or [`Error::RolledBack`]
    /// (449) when the storage rolled the commit back for a conflict (in
    /// both the store stays writable and [`crate::Container::transaction`]
    /// runs the transaction again). Nothing is published in any of these
    /// cases.
    pub fn commit(self) -> Result<Option<Lsn>> {
        // From here on the transaction cannot be revoked (a transaction
        // without a deadline never can be).
        if let Some(limit) = self.lease.limit
            && !self.lease.lock.start_commit(self.lease.generation)
        {
            return Err(self.abandoned(limit));
        }
        let Txn {
            db,
            container,
            partition,
            base,
            detached,
            base_version,
            base_early,
            writes,
            lease: _lease,
            ..
        } = self;
        let changes: Vec<RecordChange> = writes
            .iter()
            .filter_map(|w| {
                let kind = w.kind()?;
                Some(RecordChange {
                    id: w.id.clone(),
                    kind,
                    rid: w.after.as_ref().map_or(w.before.unwrap_or(0), |s| s.rid),
                    before_rid: w.before,
                    seq: w.seq,
                    document: w.after.as_ref().map(|s| s.document.clone()),
                    text: w.text.clone(),
                })
            })
            .collect();
        if changes.is_empty() {
            // What it read may be a commit's that is not durable yet: it
            // answers once that is, or fails with it (without holding up
            // the next writer meanwhile).
            drop(_lease);
            if base_early > 0 && !partition.wait_published(base_early) {
                db.check_writable()?;
                return Err(Error::Storage(format!(
                    "a transaction in container {:?} read writes that failed to commit",
                    container.meta.id
                )));
            }
            return Ok(None);
        }
        db.check_writable()?;
        let record = CommitRecord {
            container: container.id.clone(),
            partition_key: partition.key.clone(),
            changes,
            base_version,
        };
        let alive = container.alive()?;
        let failed = |err: &Error| {
            if let Error::RolledBack { .. } = err {
                // Nothing was written, and the copy in memory is as good
                // as it was; the transaction can run again.
                return;
            }
            if let Error::PartitionChanged { .. } = err {
                // Another node committed first: nothing was written, and
                // the copy in memory is stale; the next transaction reads
                // the partition again.
                if !detached {
                    partition.unload();
                }
                return;
            }
            db.mark_failed(err);
            // The record may have reached storage without being
            // acknowledged: reads go on showing what was, so the partition
            // never leaves memory to be read back with it.
            if detached {
                let ids: Vec<&str> = writes.iter().map(|w| &*w.id).collect();
                container.install_before(&db, &partition, &base, &ids, base_version);
            }
            partition.pin();
        };
        let lsn = if !detached && !db.shared && db.storage.submits_early() {
            let submitted = db.storage.submit(record).inspect_err(failed)?;
            // A commit placed in the log but not yet durable lets the next
            // writer begin on its state meanwhile, and readers see that
            // state once it is durable (see
            // `LogicalPartition::release_early`). So does one that began on
            // such a state: `committed` may not hold it yet, and the two
            // are published in their order.
            if !submitted.is_ready() || base_early > 0 {
                let mut state = PartitionState::clone(&base);
                drop(base);
                for write in writes {
                    match write.after {
                        Some(slot) => state.put(write.id, slot),
                        None => state.remove(&write.id),
                    }
                }
                let state = Arc::new(state);
                let n = partition.release_early(Arc::clone(&state));
                // Settled whatever happens from here, so that no
                // transaction waits for it in vain.
                let mut unsettled = Unsettled(&partition, Some(n));
                drop(_lease);
                let lsn = submitted.wait().inspect_err(|err| {
                    db.mark_failed(err);
                    partition.pin();
                })?;
                drop(alive);
                let footprint = FOOTPRINT_PER_PARTITION + state.footprint();
                unsettled.1 = None;
                partition.publish(n, state);
                if db.cache.bounded() && db.cache.charge(&partition, footprint) {
                    db.evict();
                }
                return Ok(Some(lsn));
            }
            submitted.wait().inspect_err(failed)?
        } else {
            // No tip can exist here: only a store that submits early
            // leaves one.
            debug_assert_eq!(base_early, 0);
            db.storage.commit(record).inspect_err(failed)?
        };
        drop(alive);
        if db.shared {
            partition.set_version(base_version + 1);
        }
        if detached {
            // Nothing in memory to update: readers read storage, which
            // has it now.
            return Ok(Some(lsn));
        }
        // Drop our reference to the old state first, so that when no reader
        // holds it either, the new state is built in place.
        drop(base);
        let mut committed = partition.committed.write();
        let state = Arc::make_mut(&mut committed);
        for write in writes {
            match write.after {
                Some(slot) => state.put(write.id, slot),
                None => state.remove(&write.id),
            }
        }
        let footprint = FOOTPRINT_PER_PARTITION + state.footprint();
        drop(committed);
        drop(_lease);
        if db.cache.bounded() && db.cache.charge(&partition, footprint) {
            // Not this partition: the Arc held here keeps it.
            db.evict();
        }
        Ok(Some(lsn))
    }

    /// Discards every write. Same as dropping the transaction.
    pub fn rollback(self) {}

    /// Validates a document for this transaction.
    fn check(&self, doc: Value, writer: Writer) -> Result<Checked> {
        let container = &self.container.meta.id;
        // The depth check comes first: it bounds every recursion over the
        // document from here on (serialization, queries, and `drop` on the
        // error paths below).
        let Some(len) = checked_unstamped_len(&doc) else {
            drop_deep(doc);
            return Err(Error::BadRequest(format!(
                "a document in container {container:?} nests objects and arrays more than {MAX_NESTING} levels deep"
            )));
        };
        let Value::Object(_) = &doc else {
            return Err(Error::BadRequest(format!(
                "a document must be a JSON object, not {} (container {container:?})",
                host_api::type_name(&doc)
            )));
        };
        let id = match host_api::member(&doc, "id") {
            Some(Value::String(id)) => id,
            Some(other) => {
                return Err(Error::BadRequest(format!(
                    "document id must be a string, not {} (container {container:?})",
                    host_api::type_name(other)
                )));
            }
            None => {
                return Err(Error::BadRequest(format!(
                    "document has no \"id\" property (container {container:?}, partition {})",
                    self.partition.key
                )));
            }
        };
        validate_id(id).map_err(|e| Error::BadRequest(format!("{e} (container {container:?})")))?;
        if self.expiry.is_some() {
            crate::settings::validate_item_ttl(container, id, &doc)?;
        }
        if !self.container.path.holds(&doc, &self.partition.key) {
            let key = self.container.path.extract(&doc);
            // A script's document without the key property (at any level
            // of a hierarchical key) lands in the call's partition.
            let keyless_script_write = writer == Writer::Script
                && key.components().iter().all(|c| *c == PartitionKey::None);
            if !keyless_script_write {
                return Err(Error::CrossPartition {
                    container: container.clone(),
                    id: id.clone(),
                    document: key,
                    request: self.partition.key.clone(),
                });
            }
        }
        Ok(Checked {
            id: Arc::from(id.as_str()),
            doc,
            len,
        })
    }

    fn check_etag(
        &self,
        id: &str,
        current: Option<&Document>,
        options: Option<&ItemOptions>,
    ) -> Result<()> {
        let Some(expected) = options.and_then(|o| o.if_match.as_deref()) else {
            return Ok(());
        };
        let actual = current.map(Document::etag);
        if actual == Some(expected) {
            return Ok(());
        }
        Err(Error::PreconditionFailed {
            container: self.container.meta.id.clone(),
            partition_key: self.partition.key.clone(),
            id: id.to_owned(),
            expected: expected.to_owned(),
            actual: actual.map(str::to_owned),
        })
    }

    /// Stamps system properties, checks the size and records the write of
    /// the document, which is at `place` ([`Txn::place`]).
    fn put(&mut self, checked: Checked, rid: Option<u64>, place: Place) -> Result<Document> {
        let Checked { id, mut doc, len } = checked;
        let seq = self.container.take_seq(&self.db)?;
        let rid = rid.unwrap_or(seq);
        let ts = self.db.now_secs();
        let size = len + self.container.stamp(&mut doc, rid, seq, ts);
        // Every debug-build test checks the arithmetic against the serializer.
        debug_assert_eq!(size, doc.to_string().len(), "size bookkeeping of {id:?}");
        if size > MAX_DOCUMENT_SIZE {
            return Err(Error::TooLarge {
                container: self.container.meta.id.clone(),
                partition_key: self.partition.key.clone(),
                id: id.to_string(),
                size,
                limit: MAX_DOCUMENT_SIZE,
            });
        }
        if !self.container.unique_keys.is_empty() {
            self.check_unique(&id, rid, &doc)?;
        }
        let text = self
            .db
            .storage
            .wants_text()
            .then(|| Arc::from(crate::document::to_text(&doc, size)));
        let document = Document::new(doc);
        let i = self.slot_for(id, place);
        let write = &mut self.writes[i];
        write.after = Some(Slot {
            rid,
            size,
            document: document.clone(),
        });
        write.text = text;
        write.seq = seq;
        Ok(document)
    }

    /// Checks that no other live document of the partition has `doc`'s
    /// values at the paths of a unique key: a scan of the partition as the
    /// transaction sees it, O(documents) per write (see `settings.rs`).
    fn check_unique(&self, id: &str, rid: u64, doc: &Value) -> Result<()> {
        let other = |slot: &Slot| slot.rid != rid && slot.document.id() != id;
        let committed = self
            .base
            .scan_after(None)
            .filter(|slot| self.find(slot.document.id()).is_none() && !self.expired(slot));
        let written = self.writes.iter().filter_map(|w| w.after.as_ref());
        for slot in committed.chain(written).filter(|slot| other(slot)) {
            if let Some((key, values)) =
                self.container.unique_keys.clash(doc, slot.document.value())
            {
                return Err(Error::UniqueKeyConflict {
                    container: self.container.meta.id.clone(),
                    partition_key: self.partition.key.clone(),
                    id: id.to_owned(),
                    clash: format!(
                        "[{}] = {values}, as document {:?} has",
                        key.paths.join(", "),
                        slot.document.id()
                    ),
                });
            }
        }
        Ok(())
    }

    /// The index of `id`'s entry in the write set, adding one if needed.
    /// `place` is `id`'s [`Txn::place`], found since the write set last
    /// changed.
    fn slot_for(&mut self, id: Arc<str>, place: Place) -> usize {
        debug_assert!(place == self.place(&id), "a stale place for {id:?}");
        let before = match place {
            Place::Written(i) => return i,
            Place::Base(rid) => rid,
        };
        // Whoever asked for the entry sets `after` next.
        self.writes.push(Write {
            id,
            before,
            after: None,
            text: None,
            seq: 0,
        });
        let n = self.writes.len();
        if n > SMALL_WRITE_SET {
            if n == SMALL_WRITE_SET + 1 {
                self.index = self
                    .writes
                    .iter()
                    .enumerate()
                    .map(|(i, w)| (w.id.clone(), i))
                    .collect();
            } else {
                self.index.insert(self.writes[n - 1].id.clone(), n - 1);
            }
        }
        n - 1
    }

    fn not_found(&self, id: &str) -> Error {
        Error::NotFound {
            container: self.container.meta.id.clone(),
            partition_key: self.partition.key.clone(),
            id: id.to_owned(),
        }
    }

    fn conflict(&self, id: &str) -> Error {
        Error::Conflict {
            container: self.container.meta.id.clone(),
            partition_key: self.partition.key.clone(),
            id: id.to_owned(),
        }
    }
}

impl std::fmt::Debug for Txn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Txn")
            .field("container", &self.container.meta.id)
            .field("partition_key", &self.partition.key)
            .field("writes", &self.writes.len())
            .finish()
    }
}
