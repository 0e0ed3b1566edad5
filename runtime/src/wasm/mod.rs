//! The WebAssembly sandbox, on wasmtime: the host side of the
//! `partita_v1` ABI (`host_api::abi`).
//!
//! - `sandbox.rs`: the process-wide `Engine` (fuel, epoch interruption,
//!   pooling allocator), the `Linker` with the host functions, the epoch
//!   ticker thread.
//! - `cache.rs`: compiled modules cached in memory by content hash and
//!   persisted as precompiled artifacts in the data directory; the ABI
//!   checks run at upload ([`prepare_wasm`]).
//! - `host.rs`: the call's state and the imports.
//! - `run.rs`: one call, from a fresh instance to the [`Output`].
//!
//! UPLOAD
//! ======
//!
//! The engine stores a script's bytes and never runs user code, so it
//! cannot tell a good module from a bad one. [`prepare_wasm`] does, and the
//! facade (`partita::Container::create_script`) and the command line call it
//! before `create_script`/`replace_script`: it turns `.wat` text into
//! `.wasm` bytes, compiles the module (filling the caches, so the first call
//! does not compile), and refuses with [`Error::Compile`] (400) a module that
//! does not validate, imports anything outside the ABI or with another
//! signature, or lacks its memory or its kind's entry point. A module stored
//! some other way is checked again when it runs, with the same errors.
//!
//! BOUNDS
//! ======
//!
//! Set on every call's fresh store, none of them catchable by the guest:
//! fuel ([`Limits::fuel`](crate::Limits::fuel); deterministic: the same call
//! on the same data uses the same fuel, reported as [`Statistics::fuel`]),
//! an epoch deadline ([`Limits::wall_time`](crate::Limits::wall_time), 1 ms
//! resolution), a memory limit (`memory.grow` past
//! [`Limits::max_memory_bytes`](crate::Limits::max_memory_bytes) returns -1;
//! a guest that traps afterwards gets an error naming the limit) and a stack
//! limit of 512 KiB (a `StackOverflow` trap). Bounded execution is as in
//! JavaScript: past [`Limits::accept_fuel`](crate::Limits::accept_fuel),
//! [`Limits::max_operations`](crate::Limits::max_operations) or
//! [`Limits::accept_wall_time`](crate::Limits::accept_wall_time) collection
//! operations return `NOT_ACCEPTED`.

//! COST
//! ====
//!
//! A call's fixed cost is a fresh pooled instance; everything else a call
//! does is kept off the per-call path, which is why the code is shaped as
//! it is:
//!
//! - a module is hashed once: remembered by address, and a body the engine
//!   shares as an `Arc` ([`WasmScript::shared`]) is known by its
//!   allocation, with no `memcmp`; export lookups and type checks happen
//!   once per module (`cache.rs`);
//! - a pool slot is reset in place, dirty pages only (`PAGEMAP_SCAN`,
//!   `sandbox.rs`), and that walk costs per page of the memory, touched or
//!   not, so guests keep their initial memory small: the Rust guest SDK
//!   links a 192 KiB stack in 512 KiB and allocates from a bump arena
//!   there (`sprocs/guest/src/arena.rs`, `sprocs/guest/build/src/lib.rs`)
//!   instead of growing its memory on every call, which would cost an
//!   `mprotect` each way; the WAT guests use one page;
//! - `read_member` and `replace_member` read and set one member of a
//!   document the host keeps, so changing a counter does not send the
//!   whole document across the boundary and back;
//! - inputs are read in place in guest memory, documents a guest writes
//!   are parsed with their maps sized once (`json.rs`), and results are
//!   serialized only when the guest passed a buffer.
//!
//! `benches/wasm.rs` measures createComment as the hand-written WAT and as
//! the Rust guest, each call timed one by one, beside the same collection
//! calls made natively (the floor under both); docs/benchmarks.md has its
//! figures. To count rather than sample, cut the pool to a few slots
//! (`POOL_SLOTS`) so valgrind can reserve its address space, and turn on
//! wasmtime's perf map (`Config::profiler`) so the guest's functions have
//! names in callgrind's and perf's output.

mod cache;
mod host;
mod json;
mod run;
mod sandbox;

use std::path::Path;
use std::sync::Arc;

pub use cache::{ARTIFACT_DIR, WasmCache, WasmCacheStats};
pub(crate) use run::{run, run_udf};

#[cfg(doc)]
use crate::{Error, Output, Statistics};

/// A WebAssembly module to run, and where its compiled form is cached.
#[derive(Clone, Copy)]
pub struct WasmScript<'a> {
    /// The script's id (for messages).
    pub id: &'a str,
    /// The module: `.wasm` bytes, or `.wat` text (compiled on first use).
    pub module: &'a [u8],
    /// The same bytes as `module` when the caller holds them in an `Arc`
    /// (the engine's `ScriptRecord::body`). The cache then keeps a clone and
    /// knows the module by its address from then on: a warm call neither
    /// hashes nor compares the bytes (a 150 KB Rust guest cost about a
    /// microsecond per call to compare). `None`, or an `Arc` holding other
    /// bytes than `module`, compares `module` with a copy kept by the cache.
    pub shared: Option<&'a Arc<[u8]>>,
    /// The in-memory cache of compiled modules, normally
    /// [`WasmCache::global`].
    pub cache: &'a WasmCache,
    /// The database's data directory: compiled artifacts are kept in its
    /// [`ARTIFACT_DIR`] so a restart does not recompile. `None` in memory.
    pub artifact_dir: Option<&'a Path>,
}

impl std::fmt::Debug for WasmScript<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmScript")
            .field("id", &self.id)
            .field("module_bytes", &self.module.len())
            .field("artifact_dir", &self.artifact_dir)
            .finish()
    }
}

/// Checks a module uploaded as a script of `kind` and returns it as `.wasm`
/// bytes (compiling `.wat` text), compiled into `script.cache` and persisted
/// under `script.artifact_dir`.
///
/// # Errors
/// [`Error::Compile`] (400) naming the problem: bytes that are neither
/// WebAssembly nor WAT, text that does not parse, a module that does not
/// validate, an import outside the `partita_v1` ABI or with the wrong
/// signature, a missing `memory` export or entry point.
/// [`Error::Internal`] when the engine cannot be built.
pub fn prepare_wasm(
    script: &WasmScript<'_>,
    kind: host_api::ScriptKind,
) -> Result<Vec<u8>, crate::Error> {
    let sandbox = sandbox::sandbox().map_err(crate::Error::Internal)?;
    let wasm = cache::to_binary(script.module)?.into_owned();
    let compiled = script
        .cache
        .get(sandbox, &wasm, None, script.artifact_dir)?;
    cache::check_exports(&compiled.module, kind)?;
    Ok(wasm)
}
