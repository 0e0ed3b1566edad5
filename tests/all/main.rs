//! Whole-system checks of Partita, in one test binary (wasmtime's
//! `tests/all` layout): one module per area, sharing `support`, so the
//! package links boa, wasmtime and SQLite once instead of once per area.
//! ARCHITECTURE.md's "Testing" section says what each module checks.
//!
//! Run one area with its module name as the filter:
//! `cargo test -p integration-tests --test all -- reliability::`.
//! The crash and isolation tests start the package's child binaries
//! (`bin/crash_writer.rs`, `bin/script_worker.rs`).

mod support;

mod batch;
mod cache;
mod change_feed;
mod charge;
mod collection;
mod crash;
mod deadline;
mod disk;
mod early_release;
mod engine;
mod fuzz;
mod fuzz_targets;
mod hierarchical;
mod import;
mod index;
#[cfg(feature = "postgres")]
mod index_postgres;
mod isolation;
mod model;
#[cfg(feature = "postgres")]
mod nodes;
mod parity;
mod procedures;
mod reliability;
mod scenarios;
mod tidy;
mod ttl;
mod wasm_modules;
mod wasm_scripts;
