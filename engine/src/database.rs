//! The database: containers, the durable store, and the data-directory lock.
//!
//! ```text
//!   Database (Arc<DbInner>, cheap to clone and share between threads)
//!     ├─ storage: Box<dyn Storage>        SQLite file or memory
//!     ├─ containers: RwLock<id ──► Arc<ContainerInner>>
//!     ├─ failed: set after a storage error, or at open when the store
//!     │          cannot write (full disk, read-only file system, no
//!     │          permission); every write is refused with 503, reads go on
//!     └─ lock: the data directory's LOCK file, held for the process's life
//! ```
//!
//! Lock order (outer to inner): `containers` → a container's physical
//! partition map → a partition's `writer` → its `committed` state → the
//! storage's own locks. Only `writer` is held for longer than a map lookup.
//!
//! Start-up reads the containers and their scripts, never documents: a
//! logical partition is read into the partition cache ([`crate::cache`])
//! when it is first needed, and evicted when the cache needs its room.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::cache::{Cache, CacheStats};
use crate::clock::Clock;
use host_api::{PartitionKey, PartitionKeyPath};

use crate::container::{Container, ContainerInner, ContainerProperties};
use crate::document::validate_id;
use crate::error::{Error, Result};
use crate::storage::{ContainerMeta, Durability, MemoryStorage, SqliteStorage, Storage};

/// The lock file inside a data directory.
pub const LOCK_FILE: &str = "LOCK";

/// The SQLite file inside a data directory.
pub const DATA_FILE: &str = "partita.sqlite";

/// Settings of a [`Database`].
#[derive(Clone, Debug)]
pub struct Options {
    /// How commits reach the disk (ignored in memory).
    pub durability: Durability,
    /// How long a transaction waits for another transaction on the same
    /// logical partition before failing with 408.
    pub lock_timeout: Duration,
    /// Durable: how many pages (4 KB) the write-ahead log grows to before
    /// it is copied into the database file (SQLite's `wal_autocheckpoint`).
    /// Larger is faster under load and means a larger log file and a
    /// longer recovery after a crash (SQLite reads the whole log); the default,
    /// [`CHECKPOINT_PAGES`](crate::storage::CHECKPOINT_PAGES), is ~120 MB.
    pub checkpoint_pages: u32,
    /// Where `_ts` and time to live read the time: the system clock by
    /// default; tests give a [`ManualClock`](crate::ManualClock) and move it.
    pub clock: Clock,
    /// How often a background thread deletes the expired items of the
    /// containers that have time to live on (the thread starts with the
    /// first such container). `None`: never; call
    /// [`Database::purge_expired`]. Expired items are invisible either way.
    pub purge_interval: Option<Duration>,
    /// Durable: how much memory, in bytes, the logical partitions kept in
    /// memory may take (an estimate: see [`Database::cache_stats`]); the
    /// least recently used are evicted beyond it, and read from storage
    /// again when needed. The default is a quarter of the machine's memory.
    /// In memory, every partition stays (memory is the only copy).
    pub cache_bytes: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            durability: Durability::Full,
            lock_timeout: Duration::from_secs(10),
            checkpoint_pages: crate::storage::CHECKPOINT_PAGES,
            clock: Clock::system(),
            purge_interval: Some(Duration::from_secs(1)),
            cache_bytes: crate::cache::default_budget(),
        }
    }
}

pub(crate) struct DbInner {
    pub(crate) storage: Box<dyn Storage>,
    /// Which logical partitions are in memory.
    pub(crate) cache: Cache,
    containers: RwLock<HashMap<String, Arc<ContainerInner>>>,
    pub(crate) options: Options,
    /// Whether other nodes may commit to the storage
    /// ([`Storage::shared`]): read once, as every read of a cached
    /// partition asks.
    pub(crate) shared: bool,
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    /// Over a shared store, the catalog version (containers and scripts,
    /// [`Storage::catalog_version`]) that `containers` holds at least.
    catalog: AtomicU64,
    /// The highest catalog version a statement of this node read; past
    /// `catalog`, another node changed a container or a script.
    catalog_seen: AtomicU64,
    /// Held while the catalog is read again, so one thread does it.
    catalog_sync: Mutex<()>,
    /// The data directory; `None` in memory.
    pub(crate) dir: Option<PathBuf>,
    /// The background purge of expired items, once a container has time
    /// to live on; stops when the database is dropped.
    purger: OnceLock<Purger>,
    /// Held (locked) for the life of the database; declared last so it is
    /// released only after the storage has shut down.
    _lock: Option<File>,
}

impl DbInner {
    pub(crate) fn check_writable(&self) -> Result<()> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(Error::ReadOnly(
            self.failure.lock().clone().unwrap_or_default(),
        ))
    }

    /// Notes the catalog version a statement read (see
    /// [`DbInner::sync_catalog`]).
    pub(crate) fn saw_catalog(&self, version: u64) {
        self.catalog_seen.fetch_max(version, Ordering::AcqRel);
    }

    /// Whether a statement read a catalog version newer than the one held:
    /// another node changed a container or a script since.
    pub(crate) fn catalog_behind(&self) -> bool {
        self.catalog_seen.load(Ordering::Acquire) > self.catalog.load(Ordering::Acquire)
    }

    /// [`DbInner::sync_catalog`] when a statement already showed the
    /// catalog changed; free otherwise.
    ///
    /// # Errors
    /// As [`DbInner::sync_catalog`].
    pub(crate) fn sync_if_behind(self: &Arc<Self>) -> Result<()> {
        if self.catalog_behind() {
            self.sync_catalog()?;
        }
        Ok(())
    }

    /// Over a shared store, reads the catalog version (one statement) and,
    /// when another node changed a container or a script since this node
    /// read the catalog, reads the catalog again and takes it: containers
    /// created there appear, deleted ones go (handles to them then fail
    /// with 404, as after a delete here), and the others take the settings
    /// and scripts stored. Nothing to do over a store no other node writes.
    ///
    /// Called where no partition lock is held: before a catalog change,
    /// when a lookup misses, at the start of a read, and by a transaction
    /// whose begin read a newer version (it lets its partition go first).
    ///
    /// # Errors
    /// [`Error::Storage`] when storage cannot be read.
    pub(crate) fn sync_catalog(self: &Arc<Self>) -> Result<()> {
        if !self.shared {
            return Ok(());
        }
        let _sync = self.catalog_sync.lock();
        let version = self.storage.catalog_version()?;
        self.saw_catalog(version);
        if version <= self.catalog.load(Ordering::Acquire) {
            return Ok(());
        }
        // The version first: what is loaded is at least that version.
        let loaded = self.storage.load()?;
        let mut fresh = Vec::new();
        let mut containers = self.containers.write();
        let ids: std::collections::HashSet<&str> =
            loaded.iter().map(|c| c.meta.id.as_str()).collect();
        let gone: Vec<String> = containers
            .keys()
            .filter(|id| !ids.contains(id.as_str()))
            .cloned()
            .collect();
        for id in gone {
            if let Some(container) = containers.remove(&id) {
                self.forget(&container);
            }
        }
        for loaded in loaded {
            match containers.get(&loaded.meta.id) {
                // The same container (a container deleted and created
                // again has another ordinal).
                Some(held) if held.meta.ordinal == loaded.meta.ordinal => {
                    held.adopt(&loaded.meta, loaded.scripts);
                }
                _ => {
                    let container =
                        Arc::new(ContainerInner::new(loaded.meta, loaded.max_seq, true)?);
                    container.adopt(&container.meta, loaded.scripts);
                    if let Some(old) =
                        containers.insert(container.meta.id.clone(), container.clone())
                    {
                        self.forget(&old);
                    }
                    fresh.push(container);
                }
            }
        }
        let ttl = containers.values().any(|c| c.default_ttl().is_some());
        drop(containers);
        self.catalog.fetch_max(version, Ordering::AcqRel);
        drop(fresh);
        if ttl {
            start_purger(self);
        }
        Ok(())
    }

    /// Retires a container another node deleted: handles to it fail every
    /// write with 404, and its partitions leave the cache.
    fn forget(&self, container: &ContainerInner) {
        // Already retired is fine: nothing else to do.
        let _ = container.retire(|| Ok(()));
        for map in &container.physical {
            for (_, partition) in map.write().drain() {
                self.cache.release(&partition, false);
            }
        }
    }

    /// Seconds since the Unix epoch by the database's clock.
    pub(crate) fn now_secs(&self) -> u64 {
        self.options.clock.now_secs()
    }

    /// Refuses every write after the storage error `err`, unless it says
    /// that nothing was written ([`Error::wrote_nothing`]: a 449, or a
    /// container another node created first).
    pub(crate) fn mark_failed(&self, err: &Error) {
        if err.wrote_nothing() {
            return;
        }
        let reason = match err {
            Error::ReadOnly(reason) => reason.clone(),
            err => Error::after_failure(err).to_string(),
        };
        self.refuse_writes(reason);
    }

    /// Evicts the least recently used logical partitions nobody holds
    /// until the cache is at three quarters of its budget, unless it is
    /// within budget or another thread is at it (see [`crate::cache`]).
    pub(crate) fn evict(&self) {
        let Some(target) = self.cache.begin_pass() else {
            return;
        };
        let containers: Vec<Arc<ContainerInner>> =
            self.containers.read().values().cloned().collect();
        let mut candidates = Vec::new();
        for (c, container) in containers.iter().enumerate() {
            for (m, map) in container.physical.iter().enumerate() {
                for (key, partition) in map.read().iter() {
                    if Arc::strong_count(partition) == 1 && !partition.is_pinned() {
                        let used = partition.used.load(Ordering::Relaxed);
                        candidates.push((used, c, m, key.clone()));
                    }
                }
            }
        }
        candidates.sort_unstable_by_key(|&(used, ..)| used);
        for (_, c, m, key) in candidates {
            if self.cache.used() <= target {
                break;
            }
            let mut map = containers[c].physical[m].write();
            // Still nobody's but the map's: nobody can take it while the
            // map is locked.
            if map
                .get(&key)
                .is_some_and(|p| Arc::strong_count(p) == 1 && !p.is_pinned())
                && let Some(partition) = map.remove(&key)
            {
                drop(map);
                self.cache.release(&partition, true);
            }
        }
        self.cache.end_pass();
    }

    /// Refuses every later write with 503 and `reason` (the first reason
    /// given is kept).
    fn refuse_writes(&self, reason: String) {
        let mut failure = self.failure.lock();
        if failure.is_none() {
            *failure = Some(reason);
        }
        self.failed.store(true, Ordering::Release);
    }
}

impl Drop for DbInner {
    /// Past [`FREE_IN_BACKGROUND_BYTES`] cached, hands the partitions in
    /// memory to a thread that frees them, so closing does not wait for
    /// gigabytes of documents to be deallocated (1.2 s for 2.8 GB): the
    /// fields drop after this, the storage first (its final fold and
    /// checkpoint), then the directory's lock. In a process that exits
    /// meanwhile the thread simply ends with it.
    fn drop(&mut self) {
        let containers = std::mem::take(self.containers.get_mut());
        let cached = self.cache.used();
        if cached < FREE_IN_BACKGROUND_BYTES {
            return;
        }
        // When no thread can be started, `spawn` drops the closure, and
        // the partitions are freed here after all.
        let _ = std::thread::Builder::new()
            .name("partita-free".to_owned())
            .spawn(move || drop(containers));
    }
}

/// The cached bytes from which closing frees the cache on a background
/// thread rather than while it waits (about 50 ms of deallocation).
const FREE_IN_BACKGROUND_BYTES: usize = 100 << 20;

/// An open database: a set of containers. Cheap to clone; share it between
/// threads.
#[derive(Clone)]
pub struct Database {
    inner: Arc<DbInner>,
}

impl Database {
    /// Opens (creating if needed) a durable database in `dir` with default
    /// options (`Durability::Full`).
    ///
    /// A store that cannot write (the disk is full, the file system is
    /// read-only, no permission to write the directory or its files) opens
    /// read-only: everything committed is readable, and every write fails
    /// with [`Error::ReadOnly`] (503), naming the directory, the cause and
    /// the remedy ([`Database::read_only`]). Opened again once it can
    /// write, it is writable, with nothing lost.
    ///
    /// # Errors
    /// [`Error::Locked`] when another process has the directory open;
    /// [`Error::Storage`] when it cannot be read.
    pub fn open(dir: impl AsRef<Path>) -> Result<Database> {
        Database::open_with(dir, Options::default())
    }

    /// Opens a durable database in `dir` with `options`.
    ///
    /// # Errors
    /// As [`Database::open`].
    pub fn open_with(dir: impl AsRef<Path>, options: Options) -> Result<Database> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::storage(&format!("create {}", dir.display()), e))?;
        let lock = lock_dir(dir)?;
        let storage = SqliteStorage::open_with(
            &dir.join(DATA_FILE),
            options.durability,
            options.checkpoint_pages,
        )?;
        Database::build(Box::new(storage), options, Some((dir.to_path_buf(), lock)))
    }

    /// A database that keeps everything in memory (no files).
    pub fn in_memory() -> Database {
        Database::build(Box::new(MemoryStorage::new()), Options::default(), None)
            .expect("memory storage loads nothing and cannot fail")
    }

    /// The data directory of a database opened with [`Database::open`];
    /// `None` in memory and over another [`Storage`]. Other components (the
    /// WebAssembly runtime's compiled-module cache) keep their files under
    /// it.
    pub fn data_dir(&self) -> Option<&Path> {
        self.inner.dir.as_deref()
    }

    /// What the partition cache holds and has done: its budget, the
    /// estimated bytes of the partitions in memory, how many partitions
    /// were read from storage and how many evicted.
    pub fn cache_stats(&self) -> CacheStats {
        self.inner.cache.stats()
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// Opens a database stored in PostgreSQL: `url` is a `postgresql://`
    /// (or `postgres://`) URL, such as `postgresql://partita@db1/partita`
    /// or `postgresql:///partita?host=/run/postgresql` for a Unix socket.
    /// The schema is created if missing; see `storage/postgres.rs`.
    ///
    /// # Errors
    /// [`Error::BadRequest`] for another kind of URL or one that does not
    /// parse; [`Error::Storage`] when the server cannot be reached or the
    /// store not read. Messages name the URL without its password.
    #[cfg(feature = "postgres")]
    pub fn open_url(url: &str, options: Options) -> Result<Database> {
        if !["postgresql://", "postgres://"]
            .iter()
            .any(|scheme| url.starts_with(scheme))
        {
            return Err(Error::BadRequest(format!(
                "unsupported database URL {}: expected postgresql://",
                crate::storage::redact_url(url)
            )));
        }
        let storage = crate::storage::PostgresStorage::connect(url, options.durability)?;
        Database::build(Box::new(storage), options, None)
    }

    /// A database over any [`Storage`] (another backend, or a wrapper that
    /// injects faults in tests).
    ///
    /// # Errors
    /// Whatever loading the storage returns.
    pub fn with_storage(storage: Box<dyn Storage>, options: Options) -> Result<Database> {
        Database::build(storage, options, None)
    }

    fn build(
        storage: Box<dyn Storage>,
        options: Options,
        dir: Option<(PathBuf, Option<File>)>,
    ) -> Result<Database> {
        let (dir, lock) = dir.unzip();
        let mut containers = HashMap::new();
        // Before the catalog: what is loaded is at least this version.
        let catalog = storage.catalog_version()?;
        for loaded in storage.load()? {
            let container = ContainerInner::new(loaded.meta, loaded.max_seq, storage.shared())?;
            for script in loaded.scripts {
                container
                    .scripts
                    .write()
                    .insert((script.kind, script.id.clone()), Arc::new(script));
            }
            containers.insert(container.meta.id.clone(), Arc::new(container));
        }
        let budget = storage.keeps_documents().then_some(options.cache_bytes);
        let inner = DbInner {
            shared: storage.shared(),
            cache: Cache::new(budget),
            storage,
            containers: RwLock::new(containers),
            options,
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            catalog: AtomicU64::new(catalog),
            catalog_seen: AtomicU64::new(catalog),
            catalog_sync: Mutex::new(()),
            dir,
            purger: OnceLock::new(),
            _lock: lock.flatten(),
        };
        if let Some(reason) = inner.storage.read_only() {
            inner.refuse_writes(reason);
        }
        let inner = Arc::new(inner);
        if inner
            .containers
            .read()
            .values()
            .any(|c| c.default_ttl().is_some())
        {
            start_purger(&inner);
        }
        Ok(Database { inner })
    }

    /// Creates a container with 4 physical partitions.
    ///
    /// # Errors
    /// [`Error::ContainerExists`]; [`Error::BadRequest`] for a bad id or path.
    pub fn create_container(&self, id: &str, partition_key_path: &str) -> Result<Container> {
        self.create_container_with(ContainerProperties::new(id, partition_key_path))
    }

    /// Creates a container.
    ///
    /// # Errors
    /// [`Error::ContainerExists`]; [`Error::BadRequest`] for a bad id, path
    /// or physical partition count.
    pub fn create_container_with(&self, props: ContainerProperties) -> Result<Container> {
        validate_id(&props.id).map_err(|e| Error::BadRequest(format!("container {e}")))?;
        if !(1..=crate::MAX_PHYSICAL_PARTITIONS).contains(&props.physical_partitions) {
            return Err(Error::BadRequest(format!(
                "container {:?}: physical_partitions must be between 1 and {}, not {}",
                props.id,
                crate::MAX_PHYSICAL_PARTITIONS,
                props.physical_partitions
            )));
        }
        crate::settings::validate_default_ttl(&props.id, props.default_ttl)?;
        crate::settings::validate_unique_keys(&props.id, &props.unique_keys)?;
        let indexing_policy =
            crate::container::checked_indexing_policy(&props.id, &props.indexing_policy)?;
        crate::container::check_ttl_with_mode(
            &props.id,
            props.default_ttl,
            indexing_policy.indexing_mode,
        )?;
        // The definition's canonical text: `["/a"]` is `/a`, and a
        // hierarchical key's paths are one compact JSON array.
        let path = PartitionKeyPath::parse(&props.partition_key_path)
            .map_err(|e| Error::BadRequest(format!("container {:?}: {e}", props.id)))?;
        let partition_key_path = path.as_str().to_owned();
        // Another node's containers first: their ids and ordinals are taken.
        self.inner.sync_catalog()?;
        let mut containers = self.inner.containers.write();
        // Existence first: `create_container_if_not_exists` finds an
        // existing container on a read-only store.
        if containers.contains_key(&props.id) {
            return Err(Error::ContainerExists(props.id));
        }
        self.inner.check_writable()?;
        let meta = ContainerMeta {
            ordinal: containers
                .values()
                .map(|c| c.meta.ordinal)
                .max()
                .unwrap_or(0)
                + 1,
            id: props.id,
            partition_key_path,
            physical_partitions: props.physical_partitions,
            default_ttl: props.default_ttl,
            unique_keys: props.unique_keys,
            database_rid: props.database_rid,
            computed_properties: props.computed_properties,
            indexing_policy,
        };
        let container = Arc::new(ContainerInner::new(meta, 0, self.inner.shared)?);
        self.inner
            .storage
            .create_container(&container.meta)
            // Another node created it meanwhile, or PostgreSQL rolled the
            // write back for a conflict: nothing was written, and
            // `mark_failed` leaves the store writable.
            .inspect_err(|e| self.inner.mark_failed(e))?;
        containers.insert(container.meta.id.clone(), container.clone());
        if container.default_ttl().is_some() {
            start_purger(&self.inner);
        }
        Ok(Container {
            db: self.inner.clone(),
            inner: container,
        })
    }

    /// The container `id`, creating it if it does not exist. An existing
    /// container must have the same partition-key path.
    ///
    /// # Errors
    /// [`Error::BadRequest`] when it exists with another partition-key path.
    pub fn create_container_if_not_exists(
        &self,
        id: &str,
        partition_key_path: &str,
    ) -> Result<Container> {
        match self.create_container(id, partition_key_path) {
            Err(Error::ContainerExists(_)) => {
                let container = self.container(id)?;
                let same = PartitionKeyPath::parse(partition_key_path)
                    .is_ok_and(|p| p.as_str() == container.inner.meta.partition_key_path);
                if !same {
                    return Err(Error::BadRequest(format!(
                        "container {id:?} exists with partition key path {}, not {partition_key_path}",
                        container.inner.meta.partition_key_path
                    )));
                }
                Ok(container)
            }
            other => other,
        }
    }

    /// The container `id`.
    ///
    /// # Errors
    /// [`Error::ContainerNotFound`].
    pub fn container(&self, id: &str) -> Result<Container> {
        let lookup = || self.inner.containers.read().get(id).cloned();
        self.inner.sync_if_behind()?;
        let inner = match lookup() {
            Some(inner) => inner,
            // Perhaps another node created it (one statement to ask).
            None if self.inner.shared => {
                self.inner.sync_catalog()?;
                lookup().ok_or_else(|| Error::ContainerNotFound(id.to_owned()))?
            }
            None => return Err(Error::ContainerNotFound(id.to_owned())),
        };
        Ok(Container {
            db: self.inner.clone(),
            inner,
        })
    }

    /// Deletes the container `id` with its documents, scripts and change
    /// log, durably: after a reopen it is gone, and a container created
    /// later with the same id starts empty (change log from LSN 1). Writes
    /// in flight on the container finish first; handles to it kept by
    /// callers then fail every write with [`Error::ContainerNotFound`] and
    /// read what it held when it was deleted. The ordinal (and so the
    /// `_rid`) of a deleted container may be given to a later container.
    ///
    /// # Errors
    /// [`Error::ContainerNotFound`] (404) for an unknown container;
    /// [`Error::ReadOnly`] after an earlier storage failure;
    /// [`Error::Storage`] when the storage fails (the store then refuses
    /// all writes, and the container stays); [`Error::WriteRolledBack`]
    /// (449) when a store several nodes share rolled the deletion back
    /// for a conflict (the container stays, the store stays writable).
    pub fn delete_container(&self, id: &str) -> Result<()> {
        self.inner.check_writable()?;
        self.inner.sync_catalog()?;
        let mut containers = self.inner.containers.write();
        let container = containers
            .get(id)
            .cloned()
            .ok_or_else(|| Error::ContainerNotFound(id.to_owned()))?;
        container.retire(|| {
            self.inner
                .storage
                .delete_container(id)
                .inspect_err(|e| self.inner.mark_failed(e))
        })?;
        containers.remove(id);
        drop(containers);
        // Its partitions leave the cache (handles kept by callers keep what
        // they hold, uncounted).
        self.inner.forget(&container);
        Ok(())
    }

    /// Every container's definition, ordered by id.
    pub fn containers(&self) -> Vec<ContainerProperties> {
        // Another node's containers too; should storage fail, the list
        // is the one this node holds.
        let _ = self.inner.sync_catalog();
        // Copied out first: `properties` may read the catalog again, which
        // takes the map's lock.
        let containers: Vec<Arc<ContainerInner>> =
            self.inner.containers.read().values().cloned().collect();
        let mut res: Vec<ContainerProperties> = containers
            .into_iter()
            .map(|inner| {
                Container {
                    db: self.inner.clone(),
                    inner,
                }
                .properties()
            })
            .collect();
        res.sort_by(|a, b| a.id.cmp(&b.id));
        res
    }

    /// Deletes the expired items of every container now (what the
    /// background purge does every [`Options::purge_interval`]); returns
    /// how many. Each logical partition's expired items go in one
    /// transaction, as deletes in the change log.
    ///
    /// # Errors
    /// [`Error::LockTimeout`], [`Error::ReadOnly`], storage errors.
    pub fn purge_expired(&self) -> Result<usize> {
        self.purge_slice(&mut HashMap::new(), usize::MAX)
    }

    /// One pass of the background purge: in each container, at most
    /// `max` logical partitions, from where its cursor in `cursors` says
    /// the last pass stopped (so a large store is purged a slice per pass,
    /// not read whole every second).
    fn purge_slice(
        &self,
        cursors: &mut HashMap<String, PartitionKey>,
        max: usize,
    ) -> Result<usize> {
        self.inner.check_writable()?;
        let containers: Vec<Arc<ContainerInner>> =
            self.inner.containers.read().values().cloned().collect();
        let mut purged = 0;
        for inner in containers {
            let container = Container {
                db: self.inner.clone(),
                inner,
            };
            let id = container.id().to_owned();
            match container.purge_expired_after(cursors.get(&id), max) {
                Ok((n, last)) => {
                    purged += n;
                    match last {
                        Some(key) => cursors.insert(id, key),
                        None => cursors.remove(&id),
                    };
                }
                // Deleted meanwhile: nothing left to purge.
                Err(Error::ContainerNotFound(_)) => {
                    cursors.remove(&id);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(purged)
    }

    /// Why the database refuses writes, if it does: the message of the
    /// 503 every write gets, after a storage failure or since it was
    /// opened on a store that could not write ([`Database::read_only`]).
    pub fn failure(&self) -> Option<String> {
        self.inner.failure.lock().clone()
    }

    /// Why the store opened read-only, if it did: it could not write when
    /// it was opened (a full disk, a read-only file system, no permission).
    /// The message names the data directory, the cause and the remedy,
    /// such as "the store at DIR is read-only: the disk is full (…); free
    /// space and restart". Reads, queries and feeds work; every write
    /// fails with it (503) until the database is opened again once it can
    /// write.
    pub fn read_only(&self) -> Option<String> {
        self.inner.storage.read_only()
    }

    /// Whether every write is refused (503): the store opened read-only,
    /// or a storage failure since made it so ([`Database::failure`] says
    /// why).
    pub fn is_read_only(&self) -> bool {
        self.inner.failed.load(Ordering::Acquire)
    }
}

/// The background purge's handle: dropping it (with the database) stops
/// the thread at its next wake-up, without waiting for it.
struct Purger {
    stop: Arc<(Mutex<bool>, Condvar)>,
}

impl Drop for Purger {
    fn drop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
    }
}

/// Starts the background purge of expired items, unless it runs already
/// or [`Options::purge_interval`] is `None`. The thread holds the database
/// only weakly, and strongly for the length of one pass.
pub(crate) fn start_purger(db: &Arc<DbInner>) {
    let Some(interval) = db.options.purge_interval else {
        return;
    };
    db.purger.get_or_init(|| {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let weak = Arc::downgrade(db);
        let thread_stop = stop.clone();
        // Without the thread, expired items stay invisible and are
        // removed by the next `purge_expired`.
        let _ = std::thread::Builder::new()
            .name("partita-purge".to_owned())
            .spawn(move || run_purger(&weak, &thread_stop, interval));
        Purger { stop }
    });
}

/// How many logical partitions of a container one pass of the background
/// purge visits.
const PURGE_PARTITIONS_PER_PASS: usize = 256;

fn run_purger(db: &Weak<DbInner>, stop: &(Mutex<bool>, Condvar), interval: Duration) {
    let mut cursors = HashMap::new();
    loop {
        {
            let mut stopped = stop.0.lock();
            if !*stopped {
                stop.1.wait_for(&mut stopped, interval);
            }
            if *stopped {
                return;
            }
        }
        let Some(inner) = db.upgrade() else { return };
        // A failure (a busy partition, a read-only store) is retried at the
        // next pass; expired items are invisible meanwhile.
        let _ = Database { inner }.purge_slice(&mut cursors, PURGE_PARTITIONS_PER_PASS);
    }
}

/// Takes the data directory's lock, or says who holds it. A lock file
/// that cannot be opened for writing (a read-only file system, no
/// permission) is locked through a read-only handle: `flock` needs none,
/// and the store then opens read-only. On a read-only file system without
/// a lock file there is nothing to lock, and no need: nobody can write
/// there.
fn lock_dir(dir: &Path) -> Result<Option<File>> {
    use std::io::ErrorKind;
    let path = dir.join(LOCK_FILE);
    let file = match File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
    {
        Ok(file) => file,
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::ReadOnlyFilesystem | ErrorKind::PermissionDenied
            ) =>
        {
            match File::open(&path) {
                Ok(file) => file,
                Err(missing)
                    if missing.kind() == ErrorKind::NotFound
                        && e.kind() == ErrorKind::ReadOnlyFilesystem =>
                {
                    return Ok(None);
                }
                Err(_) => return Err(Error::storage(&format!("open {}", path.display()), e)),
            }
        }
        Err(e) => return Err(Error::storage(&format!("open {}", path.display()), e)),
    };
    // A lock belongs to the open file, which a child this process forks
    // shares until it executes its program (close-on-exec closes it only
    // then): a database closed while another thread starts a process (a
    // script worker) stays locked for that moment, so a reopen retries
    // for a little while before it says the directory is in use.
    let started = std::time::Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < LOCK_PATIENCE => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::Locked {
                    path: PathBuf::from(dir),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(Error::storage(&format!("lock {}", path.display()), e));
            }
        }
    }
}

/// How long opening a data directory waits for its lock (see `lock_dir`).
const LOCK_PATIENCE: Duration = Duration::from_millis(250);

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let containers: Vec<String> = self.containers().into_iter().map(|c| c.id).collect();
        f.debug_struct("Database")
            .field("containers", &containers)
            .field("options", &self.inner.options)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_dir_is_the_opened_directory() {
        assert_eq!(Database::in_memory().data_dir(), None);
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path()).unwrap();
        assert_eq!(db.data_dir(), Some(dir.path()));
        let c = db.create_container("c", "/pk").unwrap();
        assert_eq!(c.data_dir(), Some(dir.path()));
    }

    /// Storage keeps a body without the system properties the engine
    /// appended (`stamp::Stamp::tail`): the engine must stamp what storage
    /// expects, or every body is stored whole, twice the size.
    #[test]
    fn stored_bodies_leave_out_the_system_properties_and_read_back_whole() {
        use serde_json::json;
        let dir = tempfile::tempdir().unwrap();
        let written = {
            let db = Database::open(dir.path()).unwrap();
            // A second container, so the ordinal in rids and etags is not 1.
            db.create_container("first", "/pk").unwrap();
            let posts = db.create_container("posts", "/pk").unwrap();
            posts
                .create_item("a", json!({"id": "x", "pk": "a", "n": 1}), None)
                .unwrap();
            posts
                .upsert_item("a", json!({"id": "x", "pk": "a", "n": 2}), None)
                .unwrap();
            // A document read and written back keeps its members in place.
            let mut read = posts.read_item("a", "x").unwrap().value().clone();
            read["n"] = json!(3);
            posts.replace_item("a", "x", read, None).unwrap();
            posts
                .create_item("b", json!({"id": "y", "pk": "b"}), None)
                .unwrap();
            [("a", "x"), ("b", "y")].map(|(pk, id)| posts.read_item(pk, id).unwrap())
        };
        let conn = rusqlite::Connection::open(dir.path().join(DATA_FILE)).unwrap();
        let kinds: Vec<String> = conn
            .prepare("SELECT typeof(body) FROM changes ORDER BY lsn")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(kinds, ["blob"; 4]);
        drop(conn);
        let db = Database::open(dir.path()).unwrap();
        let posts = db.container("posts").unwrap();
        for doc in written {
            let pk = doc.value()["pk"].as_str().unwrap().to_owned();
            let read = posts.read_item(pk.as_str(), doc.id()).unwrap();
            assert_eq!(read.value().to_string(), doc.value().to_string());
        }
    }
}
