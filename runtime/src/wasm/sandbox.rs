//! The process-wide wasmtime `Engine` and `Linker`, and the epoch ticker.
//!
//! One [`Engine`] serves every call: it owns the Cranelift compiler
//! settings, the pooling instance allocator (memory slots reserved once, so
//! a fresh instance per call costs microseconds, not an `mmap` and page
//! faults) and the epoch counter. Compiled modules and serialized artifacts
//! are only valid for an engine with the same settings, so they never change
//! at run time. One [`Linker`] holds the `partita_v1` host functions.
//!
//! The ticker thread increments the epoch every millisecond while calls
//! run; a call's store gets a deadline of `wall_time` ticks, so a guest that
//! runs past it traps with `Trap::Interrupt` at most about one tick late.
//! The thread holds only an [`EngineWeak`] and parks itself after 100 idle
//! ticks; the next call wakes it (one atomic swap on the fast path).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::Thread;
use std::time::Duration;

use wasmtime::{
    Config, Enabled, Engine, EngineWeak, InstanceAllocationStrategy, Linker,
    PoolingAllocationConfig,
};

use super::host::{self, HostState};

/// The epoch tick: the wall-clock deadline's resolution.
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// Native stack a guest may use (`Config::max_wasm_stack`). Calls run on a
/// stack with at least `STACK_SIZE` free (see `run.rs`), so this limit is
/// reached (a `StackOverflow` trap) long before the thread's own stack is.
pub(crate) const MAX_WASM_STACK: usize = 512 << 10;

/// The largest linear memory a pooled instance slot holds. A call's limit
/// ([`Limits::max_memory_bytes`](crate::Limits::max_memory_bytes)) is the
/// smaller of this and its own.
pub(crate) const MAX_MEMORY: usize = 128 << 20;

/// Bytes of a freed slot's memory (and table) reset in place rather than
/// decommitted: more than a typical call dirties (the Rust guest's stack
/// and heap, the WAT guest's few scattered pages), few enough that a call
/// that dirtied much more gives most of it back.
const KEEP_RESIDENT: usize = 1 << 20;

/// Instances (hence memories and tables) that may exist at once across the
/// process: calls running concurrently, plus a UDF instance per nesting
/// level. The pool reserves address space for each (no memory).
const POOL_SLOTS: u32 = 256;

/// The engine, its linker and the ticker's wake-up state.
pub(crate) struct Sandbox {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<HostState>,
    ticker: Thread,
    /// Calls running now.
    active: AtomicUsize,
    /// Calls started since the process began (the ticker's idle check).
    started: AtomicU64,
    /// Set by the ticker just before it parks.
    parked: AtomicBool,
}

static SANDBOX: OnceLock<Result<Sandbox, String>> = OnceLock::new();

/// The process's sandbox, built on first use.
///
/// # Errors
/// The message of wasmtime's failure to build the engine (for example when
/// the pool cannot reserve its address space), on every call.
pub(crate) fn sandbox() -> Result<&'static Sandbox, String> {
    SANDBOX.get_or_init(build).as_ref().map_err(Clone::clone)
}

fn config() -> Config {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_core_instances(POOL_SLOTS)
        .total_memories(POOL_SLOTS)
        .total_tables(POOL_SLOTS)
        .max_memory_size(MAX_MEMORY)
        // A slot's dirty pages are found with the PAGEMAP_SCAN ioctl (Linux
        // 6.7+; elsewhere the first KEEP_RESIDENT bytes) and reset in place
        // to the module's initial image, instead of an `madvise` that gives
        // them back and a page fault per page on the next call. The reset is
        // exact either way: a fresh instance sees only its initial image.
        .pagemap_scan(Enabled::Auto)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT);
    let mut config = Config::new();
    config
        .consume_fuel(true)
        .epoch_interruption(true)
        .max_wasm_stack(MAX_WASM_STACK)
        // Symbolized (name section) backtraces on traps; a deep stack
        // overflow's trace is cut to the innermost frames.
        .wasm_backtrace_max_frames(std::num::NonZeroUsize::new(32))
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
}

fn build() -> Result<Sandbox, String> {
    let engine = Engine::new(&config())
        .map_err(|e| format!("cannot create the WebAssembly engine: {e:#}"))?;
    let mut linker = Linker::new(&engine);
    host::define(&mut linker).map_err(|e| format!("cannot define the host functions: {e:#}"))?;
    let weak = engine.weak();
    let ticker = std::thread::Builder::new()
        .name("partita-wasm-epoch".to_owned())
        .spawn(move || tick(weak))
        .map_err(|e| format!("cannot start the epoch ticker thread: {e}"))?
        .thread()
        .clone();
    Ok(Sandbox {
        engine,
        linker,
        ticker,
        active: AtomicUsize::new(0),
        started: AtomicU64::new(0),
        parked: AtomicBool::new(false),
    })
}

/// The ticker thread's body: one epoch per [`TICK`] while calls run.
fn tick(weak: EngineWeak) {
    let sandbox = loop {
        // `build` stores the sandbox right after spawning this thread.
        if let Some(Ok(sandbox)) = SANDBOX.get() {
            break sandbox;
        }
        std::thread::sleep(TICK);
    };
    let mut seen = u64::MAX;
    let mut idle_ticks = 0;
    loop {
        std::thread::sleep(TICK);
        let Some(engine) = weak.upgrade() else { return };
        engine.increment_epoch();
        let started = sandbox.started.load(Ordering::SeqCst);
        if sandbox.active.load(Ordering::SeqCst) > 0 || started != seen {
            seen = started;
            idle_ticks = 0;
            continue;
        }
        idle_ticks += 1;
        if idle_ticks < 100 {
            continue;
        }
        // Park unless a call slipped in: it either sees `parked` and wakes
        // us, or we see it in `active`.
        sandbox.parked.store(true, Ordering::SeqCst);
        if sandbox.active.load(Ordering::SeqCst) == 0 {
            std::thread::park();
        }
        sandbox.parked.store(false, Ordering::SeqCst);
        idle_ticks = 0;
    }
}

impl Sandbox {
    /// Marks a call as running (waking the ticker if it sleeps) until the
    /// guard drops.
    pub(crate) fn enter(&self) -> Running<'_> {
        self.active.fetch_add(1, Ordering::SeqCst);
        self.started.fetch_add(1, Ordering::SeqCst);
        if self.parked.swap(false, Ordering::SeqCst) {
            self.ticker.unpark();
        }
        Running(self)
    }
}

/// A running call; see [`Sandbox::enter`].
pub(crate) struct Running<'a>(&'a Sandbox);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}
