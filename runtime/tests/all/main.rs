//! The runtime's integration tests, in one test binary (wasmtime's
//! `tests/all` layout): the JavaScript and WebAssembly sandboxes against the
//! real engine, one module per area, sharing `support`, so boa, wasmtime
//! and SQLite are linked once.
//!
//! Scenarios that could abort the process (a native stack overflow) run in
//! a child process that re-executes this binary on one ignored test by its
//! full name (`hostile::child_deep_prototype_chains`), so a regression fails
//! one test instead of the run.

mod support;

mod api;
mod builtins;
mod hostile;
mod json_text;
mod parse_hostile;
mod sprocs;
mod udf;
mod wasm_abi;
mod wasm_hostile;
mod wasm_member;
