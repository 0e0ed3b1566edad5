//! The Rust guest modules (`sprocs/samples/rust`) for tests: builds them with the
//! same command as CI (through [`partita_workload::guest`], which the demo and the
//! benchmark harness use too) and returns their bytes.
//!
//! `module("create_comment")` builds the guest workspace once per test
//! process (quick when nothing changed; cargo's own lock serializes
//! concurrent test processes) and reads
//! `sprocs/target/wasm32-unknown-unknown/release/create_comment.wasm`.
//! A machine without the wasm32 target gets a panic naming the `rustup`
//! command that installs it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use partita_workload::guest::{MODULES, TARGET};

/// The guest workspace, `sprocs`.
pub fn workspace() -> PathBuf {
    partita_workload::guest::workspace()
}

/// Builds the guest workspace (once per process) and returns the directory
/// holding the `.wasm` files.
///
/// # Panics
/// When the build fails, with cargo's output; when the wasm32 target is not
/// installed, naming `rustup target add wasm32-unknown-unknown`.
pub fn build() -> &'static Path {
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
/// As [`build`], and when there is no such module.
pub fn module(name: &str) -> Vec<u8> {
    partita_workload::guest::read(build(), name).unwrap_or_else(|e| panic!("{e}"))
}
