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
//! `benches/wasm.rs` (release) measures createComment as the hand-written
//! `sprocs/samples/wat/createComment.wat` and as the Rust guest
//! (`sprocs/samples/rust/create-comment`, serde_json inside, 210 KB), each
//! call a fresh pooled instance in its own transaction, timed one by one
//! (p50, p99), next to the same collection calls made natively (the
//! engine's own cost, the floor under both). Profiled with `perf record
//! -e cpu-clock --call-graph dwarf` (no hardware counters on the VM;
//! valgrind cannot reserve the pool's address space), what was removed,
//! biggest first:
//!
//! - hashing the module per call (SHA-256 of 150 KB, half of a Rust-guest
//!   call): remembered by address; a body the engine shares as an `Arc`
//!   ([`WasmScript::shared`]) is known by its allocation, with no `memcmp`;
//! - resetting the pool slot with `madvise` and faulting its pages back in
//!   (a third of a WAT call): reset in place, dirty pages only
//!   (`PAGEMAP_SCAN`, `sandbox.rs`);
//! - the Rust guest growing its memory on every call (Rust's allocator on
//!   wasm32 takes all its heap from `memory.grow`), which cost an
//!   `mprotect` to grow the slot and another to shrink it back, with TLB
//!   flushes (a quarter of the call): the guest SDK allocates from a bump
//!   arena in the initial memory (`sprocs/guest/src/arena.rs`,
//!   `sprocs/guest/build/src/lib.rs`); guests also build at opt-level 3
//!   (about 10% faster than "s");
//! - the Rust guest's 2 MiB initial memory (its 1 MiB stack first): the
//!   `PAGEMAP_SCAN` walk after each call costs about 0.7 ns per page of
//!   the memory, touched or not, so guests are linked with a 192 KiB stack
//!   in 512 KiB (0.3 µs per call less);
//! - the Rust guest reading the whole post to change its counter: the
//!   host serialized it, the guest scanned it and wrote it back, and the
//!   host parsed it again (hashing every key into a new map). The ABI's
//!   `read_member` and `replace_member` (added to `partita_v1`) read and
//!   set one member of a document the host keeps, which copies the stored
//!   map instead of rebuilding it: 117,600 -> 91,900 instructions per call
//!   under callgrind (the WAT guest: 95,700), p50 about 1.5 µs less;
//! - the WAT guest's 100-page memory (the pagemap walk covered it all):
//!   one page, grown only for documents past its 16 KiB buffers;
//! - per call: export lookups by name and type checks (now once per
//!   module, `cache.rs`), copies of every input out of guest memory (read
//!   in place), documents parsed into maps grown one entry at a time and
//!   grown again by the engine's system properties (`json.rs`: sized
//!   once), results serialized into fresh buffers, or at all when the guest
//!   passed no buffer (only measured then), two `format!`s per generated
//!   id.
//!
//! Figures, p50 / p99 of 40,000 calls, load average 2.4 on the 2-core VM
//! (other builds running): WAT 12.5 / 28.8 µs (quiet, before) -> 9.5-9.6 /
//! 13-17 µs; Rust guest 31.9 / 56.9 µs (quiet, before) -> 18.3-18.6 /
//! 22-32 µs; the native floor 3.3-3.6 µs; a UDF call (the fixed cost of a
//! fresh store and instance, params in, a body out) 3.2 -> 2.9 µs. What
//! remains in a WAT call, beyond the engine's 3.3 µs: the fresh instance
//! (about 2.9 µs: wasmtime's instantiate and module registration, the
//! store, and the `PAGEMAP_SCAN` ioctl that resets the slot, about 0.8 µs
//! alone), host JSON (parsing the two documents written, serializing the
//! parameters and the post read: about 2 µs) and the four host calls. The
//! Rust guest added its own serde_json (about 7 µs: parsing the parameters
//! and the post into `Value`s, serializing two documents; `preserve_order`
//! maps hash with SipHash), then less with `RawDoc` (about 2.2 µs over the
//! WAT), and now leaves the post with the host (`read_member`,
//! `replace_member`): p50 8.1-8.8 µs (median 8.5) against the WAT's
//! 7.6-8.1 µs in the same nine interleaved runs (load 1.2-1.7; 9.6-10.6 µs
//! before this session's changes).
//!
//! Counting instead of sampling: valgrind runs the sandbox once the pool
//! is cut to a few slots (`POOL_SLOTS`, a local change: 256 slots reserve
//! more address space than valgrind can), and wasmtime's perf map
//! (`Config::profiler(ProfilingStrategy::PerfMap)`, also local) names the
//! compiled guest functions in callgrind's and perf's output, so the
//! guest's own instructions can be told from the host's. The kernel's side
//! (the `PAGEMAP_SCAN` walk) shows only in `perf record`.

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
