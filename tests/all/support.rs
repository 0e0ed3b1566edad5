//! Helpers shared by the modules of the integration-test binary: the
//! scripts of `sprocs/` as text, and the Rust guest modules
//! (`sprocs/samples/rust`) as bytes.
//!
//! [`guest_module`]`("create_comment")` builds the guest workspace with the
//! same command as CI (through [`partita_workload::guest`], which the demo
//! and the benchmark harness use too) once per test process (quick when
//! nothing changed; cargo's own lock serializes concurrent test processes)
//! and reads `sprocs/target/wasm32-unknown-unknown/release/create_comment.wasm`.
//! A machine without the wasm32 target gets a panic naming the `rustup`
//! command that installs it.
//!
//! The child binaries (`bin/crash_writer.rs`, `bin/script_worker.rs`) and
//! the benches need none of this, so it is a module of the test binary, not
//! a library of the package.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use partita::PartitionKey;
use partita::change_feed::ProcessorOptions;

pub(crate) use partita_workload::guest::MODULES;

/// A post-trigger that adds one to the `commentCount` of the post of the
/// comment written (the request body's `postId`), so that it stays equal
/// to the post's comments when they are written directly.
pub(crate) const COUNT_COMMENT: &str = r#"function countComment() {
    var c = getContext().getCollection();
    var comment = getContext().getRequest().getBody();
    c.readDocument(c.getAltLink() + '/docs/' + comment.postId, function (err, post) {
        if (err) throw err;
        post.commentCount++;
        c.replaceDocument(post._self, post, function (err) { if (err) throw err; });
    });
}"#;

/// Stores the createComment procedure and the [`COUNT_COMMENT`]
/// post-trigger, for writes of `operation`, in `posts`.
///
/// # Errors
/// As `Container::create_script`.
pub(crate) fn store_comment_scripts(
    posts: &partita::Container,
    operation: partita::TriggerOperation,
) -> partita::Result<()> {
    posts.create_script(partita::ScriptProperties::stored_procedure(
        "createComment",
        js("createComment"),
    ))?;
    posts.create_script(partita::ScriptProperties::trigger(
        "countComment",
        COUNT_COMMENT,
        partita::TriggerType::Post,
        operation,
    ))?;
    Ok(())
}

/// The text of `path` under `sprocs/` (`"fuzz/createCommentBroken.js"`).
///
/// # Panics
/// When the file cannot be read.
pub(crate) fn sprocs_file(path: &str) -> String {
    let path = format!("{}/../sprocs/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// The workload's JavaScript script `name` (`sprocs/samples/js/<name>.js`).
pub(crate) fn js(name: &str) -> String {
    sprocs_file(&format!("samples/js/{name}.js"))
}

/// The hand-written WebAssembly text `name` (`sprocs/samples/wat/<name>.wat`).
pub(crate) fn wat(name: &str) -> String {
    sprocs_file(&format!("samples/wat/{name}.wat"))
}

/// Builds the guest workspace (once per process) and returns the directory
/// holding the `.wasm` files.
///
/// # Panics
/// When the build fails, with cargo's output; when the wasm32 target is not
/// installed, naming `rustup target add wasm32-unknown-unknown`.
fn build_guests() -> &'static Path {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(|| partita_workload::guest::build().map_err(|e| e.to_string())) {
        Ok(dir) => dir,
        Err(message) => panic!("{message}"),
    }
}

/// The bytes of the guest module `name` (`"create_comment"`), built if
/// needed.
///
/// # Panics
/// As [`build_guests`], and when there is no such module.
pub(crate) fn guest_module(name: &str) -> Vec<u8> {
    partita_workload::guest::read(build_guests(), name).unwrap_or_else(|e| panic!("{e}"))
}

/// Change-feed processor options whose clock a test moves by hand (the
/// handle it returns, in milliseconds), with leases of 10 seconds.
pub(crate) fn manual_clock() -> (Arc<AtomicU64>, ProcessorOptions) {
    let now = Arc::new(AtomicU64::new(1_000_000));
    let clock = now.clone();
    let options = ProcessorOptions {
        clock: Arc::new(move || clock.load(Ordering::SeqCst)),
        lease_duration: Duration::from_secs(10),
        ..ProcessorOptions::default()
    };
    (now, options)
}

/// What a [`Counting`] store counted.
#[derive(Default)]
pub(crate) struct Counts {
    documents_by_rid: AtomicU64,
    change_reads: AtomicU64,
}

impl Counts {
    /// Documents read by rid (a query whose index named its documents).
    pub(crate) fn documents_by_rid(&self) -> u64 {
        self.documents_by_rid.load(Ordering::Relaxed)
    }

    /// Reads of the change log (`Storage::read_changes` calls).
    pub(crate) fn change_reads(&self) -> u64 {
        self.change_reads.load(Ordering::Relaxed)
    }
}

/// A SQLite store (without fsync) that counts some of the reads made of
/// it ([`Counts`]).
pub(crate) struct Counting {
    inner: engine::storage::SqliteStorage,
    counts: Arc<Counts>,
}

impl Counting {
    /// A store in `dir`.
    pub(crate) fn sqlite(dir: &Path) -> anyhow::Result<Counting> {
        Ok(Counting {
            inner: engine::storage::SqliteStorage::open(
                &dir.join("partita.db"),
                partita::Durability::None,
            )?,
            counts: Arc::default(),
        })
    }

    /// Its counts, which go on counting once it is given to a database.
    pub(crate) fn counts(&self) -> Arc<Counts> {
        Arc::clone(&self.counts)
    }
}

impl engine::storage::Storage for Counting {
    fn load(&self) -> engine::Result<Vec<engine::storage::LoadedContainer>> {
        self.inner.load()
    }
    fn create_container(&self, meta: &engine::storage::ContainerMeta) -> engine::Result<()> {
        self.inner.create_container(meta)
    }
    fn delete_container(&self, id: &str) -> engine::Result<()> {
        self.inner.delete_container(id)
    }
    fn update_container(&self, meta: &engine::storage::ContainerMeta) -> engine::Result<()> {
        self.inner.update_container(meta)
    }
    fn put_script(&self, script: &engine::storage::ScriptRecord) -> engine::Result<()> {
        self.inner.put_script(script)
    }
    fn delete_script(
        &self,
        container: &str,
        kind: host_api::ScriptKind,
        id: &str,
    ) -> engine::Result<()> {
        self.inner.delete_script(container, kind, id)
    }
    fn commit(&self, record: engine::storage::CommitRecord) -> engine::Result<engine::Lsn> {
        self.inner.commit(record)
    }
    fn read_changes(
        &self,
        container: &str,
        after: engine::Lsn,
        max_changes: usize,
    ) -> engine::Result<Vec<engine::storage::Change>> {
        self.counts.change_reads.fetch_add(1, Ordering::Relaxed);
        self.inner.read_changes(container, after, max_changes)
    }
    fn keeps_documents(&self) -> bool {
        self.inner.keeps_documents()
    }
    fn read_partition(
        &self,
        container: &str,
        partition_key: &PartitionKey,
    ) -> engine::Result<Vec<engine::storage::LoadedDocument>> {
        self.inner.read_partition(container, partition_key)
    }
    fn index_candidates(
        &self,
        container: &str,
        terms: &[engine::range_index::IndexTerm],
    ) -> engine::Result<Option<Vec<(PartitionKey, u64)>>> {
        self.inner.index_candidates(container, terms)
    }
    fn index_walk(
        &self,
        container: &str,
        walk: &engine::storage::IndexWalk<'_>,
    ) -> engine::Result<Option<engine::storage::WalkPage>> {
        self.inner.index_walk(container, walk)
    }
    fn index_progress(&self, container: &str) -> engine::Result<Option<u32>> {
        self.inner.index_progress(container)
    }
    fn read_documents(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        rids: &[u64],
    ) -> engine::Result<Vec<engine::storage::LoadedDocument>> {
        let docs = self.inner.read_documents(container, partition_key, rids)?;
        self.counts
            .documents_by_rid
            .fetch_add(docs.len() as u64, Ordering::Relaxed);
        Ok(docs)
    }
    fn read_document(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        id: &str,
    ) -> engine::Result<Option<engine::storage::LoadedDocument>> {
        self.inner.read_document(container, partition_key, id)
    }
    fn partition_keys(&self, container: &str) -> engine::Result<Vec<PartitionKey>> {
        self.inner.partition_keys(container)
    }
    fn wants_text(&self) -> bool {
        self.inner.wants_text()
    }
}
