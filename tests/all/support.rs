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
