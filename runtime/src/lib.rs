//! The sandboxes that run procedures and triggers: JavaScript on boa and
//! WebAssembly on wasmtime, both thin adapters over the collection API that
//! `host-api` defines, with the same response shape and status codes.
//!
//! [`run_js`] runs one stored procedure or trigger, written against Azure
//! Cosmos DB's server-side JavaScript API, against a `&mut dyn Collection`
//! (the engine's transaction on one logical partition):
//!
//! ```text
//!   facade: begin txn ──► run_js(script, invocation, &mut txn, limits) ──► Ok  ──► commit
//!                                                                      └─► Err ──► drop (rollback)
//! ```
//!
//! `run_js` never commits. It returns `Ok` only once the script's function
//! has returned and every queued operation callback and promise job has
//! drained; it never panics on any script, and leaves the collection usable.
//!
//! CONCEPTS
//! ========
//!
//! * A script is the text of one function (`function f(a){..}`, anonymous,
//!   trailing `;`, arrow), evaluated as an expression and called with the
//!   parameters (`apply` semantics), in sloppy mode unless it opts in.
//! * Collection calls return "accepted" at once and queue their callback;
//!   the operation itself runs when the queue reaches it, after the current
//!   turn, so the native functions never touch the collection: only
//!   `run_js`, which owns the `&mut dyn Collection`, does. No unsafe code.
//! * Bounds the script cannot catch: an instruction budget (boa's `fuzz`
//!   counter), a recursion limit, a wall-clock deadline checked at every
//!   host call, and a memory limit enforced by guarded built-ins (see
//!   [`Limits`] for what these do and do not cover).
//! * Speed: each thread keeps a small pool of prepared, locked-down boa
//!   contexts; each context caches compiled scripts by (id, version).
//!   Scripts with `{ __proto__: value }` literals are refused when compiled.
//!
//! [`run_udf`] calls a user-defined function (`udf.name(args)` in SQL): a
//! compute-only function with no `getContext()`, in the same sandbox.
//!
//! [`run_wasm`] and [`run_wasm_udf`] do the same for a WebAssembly module
//! written against the `partita_v1` ABI (`host_api::abi`): a fresh instance
//! per call from a cached, precompiled module, bounded by fuel, an epoch
//! deadline, a memory limit and a stack limit. [`prepare_wasm`] checks and
//! compiles a module at upload. See the `wasm` module docs.
//!
//! With [`Limits::workers`] set, JavaScript calls run in worker processes
//! under an address-space limit and a hard wall clock instead (see
//! [`WorkerPool`]); the transaction stays on the calling thread.
//!
//! Non-goals: Cosmos DB attachments, `__.unwind`, `__.spatial`, and
//! response-size (413) checks on `setBody`.

mod error;
mod js;
mod log;
mod number;
mod stack;
mod wasm;
mod worker;

use std::time::Duration;

pub use error::{Budget, Error, SUBSTATUS_COMPILE_ERROR};
pub use host_api::Statistics;
pub use wasm::{ARTIFACT_DIR, WasmCache, WasmCacheStats, WasmScript, prepare_wasm};
pub use worker::{KILL_GRACE, WorkerOptions, WorkerPool, WorkerStats, worker_main};

/// How much one call may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytecode instructions one call may execute, including its callbacks
    /// and promise jobs (each job also counts 50, for the native promise
    /// machinery the counter does not see). A call that used more fails with
    /// [`Budget::Instructions`] even if it finished; a call that never ends
    /// is stopped after at most `2 × instructions` plus, on the first call
    /// of a freshly built context, under 20,000 left over from setup (boa's
    /// counter is per context and cannot be refilled or lowered, so a
    /// pooled context is retired once less than `instructions` remain).
    pub instructions: u64,
    /// After this many instructions collection operations stop being
    /// accepted (they return `false`), so a script can return a continuation
    /// (Cosmos DB's bounded execution).
    pub accept_instructions: u64,
    /// WebAssembly: fuel one call may use. Guest instructions cost about
    /// one unit each, every host call 1,000 plus one per byte
    /// crossing the boundary, so the same call on the same data uses the
    /// same fuel on any machine. A call that runs out stops with
    /// [`Budget::Fuel`] (408).
    pub fuel: u64,
    /// WebAssembly: after this much fuel collection operations return
    /// `NOT_ACCEPTED` (bounded execution, as `accept_instructions`).
    pub accept_fuel: u64,
    /// After this many accepted collection operations further ones return
    /// `false` (WebAssembly: `NOT_ACCEPTED`). Tests lower it to force the continuation path.
    pub max_operations: u64,
    /// Wall-clock limit of one call. JavaScript: checked whenever the script
    /// calls the host (collection, request, response, console) or a guarded
    /// built-in, and between queued callbacks; a pure computation loop is
    /// stopped by the instruction budget instead (in a worker process,
    /// [`Limits::workers`], the host also kills the worker at this limit
    /// plus [`KILL_GRACE`], whatever the script does). WebAssembly: an epoch
    /// deadline that interrupts any code at most about a millisecond late.
    pub wall_time: Duration,
    /// After this much wall time collection operations stop being accepted.
    pub accept_wall_time: Duration,
    /// WebAssembly: the largest linear memory (at most 128 MiB, the pooled
    /// slot size); `memory.grow` past it returns -1.
    ///
    /// JavaScript: the most memory the guarded built-ins (`repeat`, `padStart`,
    /// `padEnd`, `concat`, `join`, `fill`, `split`, `Array.from`,
    /// `ArrayBuffer`, `JSON.stringify`, ...) and value conversions may
    /// allocate in one call, counted cumulatively, and the largest single
    /// string or array they may produce.
    ///
    /// Not covered (measured in release, boa 0.22): strings grown with `+`
    /// or template literals, which boa concatenates eagerly with no length
    /// limit and no hook: `s = s + s` reaches 1 GB in 283 instructions, and
    /// a few more doublings make an allocation fail, which aborts the
    /// process; and many small objects created in a loop (about 125 bytes
    /// per `{}`, 9 bytes per instruction: ~1 GB within the default budget).
    /// boa 0.22 exposes no heap size, string limit or allocation hook, so a
    /// hard cap needs process isolation: set [`Limits::workers`], and an
    /// allocation past the worker's address-space limit ends the call with
    /// [`Budget::Memory`] instead.
    ///
    /// Deep prototype chains: boa looks properties up recursively in Rust
    /// (per level, release: ~190 bytes of native stack for a get, ~320 for
    /// a set; debug: ~770 for a get). Every way the runtime can see refuses
    /// chains deeper than 100 (`Object.create`, `Object.setPrototypeOf`,
    /// `Reflect.setPrototypeOf`, the `__proto__` setter) and `{ __proto__: v }`
    /// literals are refused at compile time. Objects whose prototype boa
    /// sets in bytecode are not covered: `new F()` after `F.prototype = o`
    /// (about 10 instructions per level) and `class extends` in a loop
    /// (quadratic: 100,000 levels take ~1.5 s of CPU in ~1.4 M instructions,
    /// unseen by the wall clock, which is only checked at host calls). A
    /// lookup on such a chain deeper than about 50,000 levels (release,
    /// 16 MB call stack) overflows the native stack and kills the process
    /// (in a worker, [`Limits::workers`], it ends the call with
    /// [`Budget::NativeStack`]).
    pub max_memory_bytes: usize,
    /// How deeply JavaScript calls may nest. (WebAssembly has a fixed
    /// 512 KiB stack limit instead.)
    pub recursion: usize,
    /// The most `console.log` output kept; more is cut with a marker.
    pub max_log_bytes: usize,
    /// JavaScript: run each call in a worker process of this pool instead
    /// of on the calling thread (`None`, the default). Workers turn the
    /// bounds boa cannot enforce in process into failed calls: an
    /// allocation past the worker's address-space limit ([`Budget::Memory`]),
    /// a native stack overflow ([`Budget::NativeStack`]), and a wall clock
    /// that holds even for code that never calls the host
    /// ([`Budget::WallTime`]). A call costs a few pipe round trips more; see
    /// [`WorkerPool`]. WebAssembly ignores it (wasmtime enforces every bound
    /// in process).
    pub workers: Option<WorkerPool>,
}

impl Default for Limits {
    /// About two seconds of work on this project's 2-core machine.
    fn default() -> Limits {
        Limits {
            instructions: 100_000_000,
            accept_instructions: 80_000_000,
            fuel: 2_000_000_000,
            accept_fuel: 1_600_000_000,
            max_operations: 100_000,
            wall_time: Duration::from_secs(5),
            accept_wall_time: Duration::from_secs(4),
            max_memory_bytes: 128 << 20,
            recursion: 400,
            max_log_bytes: 64 << 10,
            workers: None,
        }
    }
}

/// Caps on one call's bounded execution, set from outside the script (the
/// `x-partita-max-operations` and `x-partita-max-instructions` request
/// headers, the command line's `--max-operations` and
/// `--max-instructions`), so a user can see what a script does when
/// Cosmos DB cuts it short: past a cap, collection operations are not
/// accepted, their callbacks never run, what was accepted commits and the
/// script's own continuation comes back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecutionCaps {
    /// Accept at most this many collection operations.
    pub max_operations: Option<u64>,
    /// Accept operations only until this many JavaScript instructions, or
    /// units of WebAssembly fuel, have run.
    pub max_instructions: Option<u64>,
}

impl Limits {
    /// These limits with `caps` applied. A cap only lowers a limit: the
    /// hard budgets (and so the 408s) stay as they are.
    pub fn capped(mut self, caps: ExecutionCaps) -> Limits {
        if let Some(n) = caps.max_operations {
            self.max_operations = self.max_operations.min(n);
        }
        if let Some(n) = caps.max_instructions {
            self.accept_instructions = self.accept_instructions.min(n);
            self.accept_fuel = self.accept_fuel.min(n);
        }
        self
    }
}

/// A script to run: its text and the identity its compiled form is cached
/// under.
#[derive(Clone, Copy, Debug)]
pub struct Script<'a> {
    /// The script's id.
    pub id: &'a str,
    /// Changes on every replace of the script; with `id`, the cache key.
    pub version: u64,
    /// The JavaScript text: one function.
    pub body: &'a str,
}

/// What the script is run as, with its inputs.
#[derive(Clone, Debug)]
pub enum Invocation {
    /// A stored procedure called with `params` (`fn.apply(null, params)`).
    Procedure {
        /// The parameters.
        params: Vec<serde_json::Value>,
    },
    /// A pre-trigger: it may read and change the document about to be
    /// written (`getRequest().getBody()/setBody()`); it has no response.
    PreTrigger {
        /// The document about to be written (for a delete: the document
        /// being deleted).
        request_body: serde_json::Value,
        /// The write being performed.
        operation: host_api::TriggerOperation,
    },
    /// A post-trigger, run after the write in the same transaction: it may
    /// read the request and read and change the response body.
    PostTrigger {
        /// The request document (after any pre-trigger change).
        request_body: serde_json::Value,
        /// The written document, with system properties.
        response_body: serde_json::Value,
        /// The write performed.
        operation: host_api::TriggerOperation,
    },
}

/// What a successful call produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    /// Procedure: the response body it set (`""` when it set none, as in
    /// Cosmos DB); pre-trigger: the (possibly changed) request body;
    /// post-trigger: the (possibly changed) response body. `None` when the
    /// script set `undefined`.
    pub body: Option<serde_json::Value>,
    /// `console.log` output, one line per call.
    pub logs: String,
    /// What the call cost.
    pub stats: Statistics,
}

/// A failed call: why, and what it logged and cost up to the failure.
#[derive(Debug)]
pub struct Failure {
    /// Why the call failed.
    pub error: Error,
    /// `console.log` output up to the failure.
    pub logs: String,
    /// What the call cost up to the failure.
    pub stats: Statistics,
}

/// The deepest nesting [`compile_js`] and calls accept, in the units of
/// the runtime's estimate (about one per operator, keyword or bracket that
/// nests; see docs/scripts.md).
pub const MAX_SCRIPT_DEPTH: usize = js::MAX_DEPTH;

/// Checks that a JavaScript procedure, trigger or user-defined function
/// compiles, as its first call would compile it: within the nesting bound
/// (no script text, of any size or shape, can overflow the native stack
/// while boa parses or compiles it), without `{ __proto__: value }`
/// literals, and free of syntax errors. For upload: the error is the one a
/// call would fail with ([`Error::Compile`], 400 with substatus 65535).
/// Builds a fresh context (about a millisecond) and keeps nothing.
pub fn compile_js(body: &str) -> Result<(), Error> {
    js::check(body).map_err(Error::Compile)
}

/// Runs a JavaScript stored procedure or trigger against `collection`.
///
/// Never commits: the caller commits on `Ok` and drops (rolls back) the
/// transaction on `Err`. Returns only after the script's function returned
/// and all queued callbacks and promise jobs drained.
///
/// # Errors
/// A [`Failure`] whose [`Error`] says why; see [`Error::status`] for the
/// status to report.
// `Failure` is 136 bytes; the signature is the facade's contract and the
// failure path is cold, so it is returned unboxed.
#[allow(clippy::result_large_err)]
pub fn run_js(
    script: &Script<'_>,
    invocation: Invocation,
    collection: &mut dyn host_api::Collection,
    limits: &Limits,
) -> Result<Output, Failure> {
    match &limits.workers {
        Some(pool) => worker::run(pool, script, invocation, collection, limits),
        None => js::run(script, invocation, collection, limits),
    }
}

/// The free native stack a script call needs to run on the calling thread's
/// own stack. With less, the call runs on the thread's spare stack, which
/// the thread maps at its first such call and keeps (see `src/stack.rs`),
/// so any thread can run calls at full speed; a thread spawned with more
/// than this saves the spare's 16 MB of address space.
pub const SCRIPT_STACK_NEEDED: usize = js::RED_ZONE;

/// A stack size for threads that run many script calls: comfortably more
/// than [`SCRIPT_STACK_NEEDED`], so every call runs in place, without a
/// spare stack beside the thread's own. It is address
/// space: only the pages a call touches become memory, and they stay warm.
pub const SCRIPT_THREAD_STACK: usize = 16 << 20;

/// Whether script calls on the current thread run in place, on its own
/// stack (see [`SCRIPT_STACK_NEEDED`]).
pub fn runs_scripts_in_place() -> bool {
    stack::remaining().is_some_and(|free| free >= SCRIPT_STACK_NEEDED)
}

/// Makes the ids generated on this thread for documents created without one
/// (`createDocument(link, {text: "hi"})`) a function of `seed` from now on.
///
/// Ids are random by default, as in Cosmos DB. The fuzzer (`partita::fuzz`)
/// seeds the generator before a faulted run and before the clean run of the
/// same call, so both create the same ids and their results can be compared
/// byte for byte. Not for production use: seeded ids repeat.
pub fn seed_generated_ids(seed: u64) {
    js::seed_ids(seed);
}

/// Calls a JavaScript user-defined function (`udf.name(args)` in SQL) once.
///
/// `udf.body` is one function in any of the forms [`run_js`] accepts
/// (`function tax(x) { return x * 0.08; }`, anonymous, arrow); it is
/// called with `args` (`None` is `undefined`) and its return value is
/// converted as `JSON.stringify` would (`None` when it returned `undefined`
/// or a function). A UDF computes from its arguments only: calling
/// `getContext()` throws (400), `__` is `undefined`, and there is no
/// collection. It runs under the same bounds as a procedure (`limits`),
/// in the same per-thread pool of locked-down contexts, with compiled
/// functions cached by (`id`, `version`) apart from procedures; no state
/// survives from one call to the next. Promise jobs it queues are dropped,
/// and its `console.log` output is kept only in a [`Failure`].
///
/// A warm call of a one-line function costs a few microseconds (see
/// `benches/js.rs`): it is meant to be called once per document of a query.
///
/// # Errors
/// A [`Failure`]: a throw is [`Error::Script`] (400 with the thrown
/// `number`), a script that does not compile [`Error::Compile`]
/// (400/65535), a bound [`Error::Budget`] (408).
#[allow(clippy::result_large_err)] // As `run_js`.
pub fn run_udf(
    udf: &Script<'_>,
    args: &[Option<serde_json::Value>],
    limits: &Limits,
) -> Result<Option<serde_json::Value>, Failure> {
    match &limits.workers {
        Some(pool) => worker::run_udf(pool, udf, args, limits),
        None => js::run_udf(udf, args, limits),
    }
}

/// Runs a WebAssembly stored procedure or trigger against `collection`:
/// [`run_js`]'s contract for a module of the `partita_v1` ABI.
///
/// The module is compiled on first use (or loaded from its artifact) and
/// cached; each call gets a fresh instance. A procedure's entry point is
/// `partita_procedure`, a trigger's `partita_trigger`.
///
/// # Errors
/// A [`Failure`]: the guest's `fail(n, msg)` or a nonzero return `n` is
/// [`Error::Script`] (400, substatus `n`), a trap [`Error::Trap`] (400),
/// running out of fuel or time [`Error::Budget`] (408), a module that does
/// not check [`Error::Compile`] (400/65535), a storage failure
/// [`Error::Host`].
#[allow(clippy::result_large_err)] // As `run_js`.
pub fn run_wasm(
    script: &WasmScript<'_>,
    invocation: Invocation,
    collection: &mut dyn host_api::Collection,
    limits: &Limits,
) -> Result<Output, Failure> {
    wasm::run(script, invocation, collection, limits)
}

/// Calls a WebAssembly user-defined function once: its `partita_udf` entry
/// point reads the arguments with `params` (`None` is `null`) and returns
/// its value with `set_response_body` (`None` when it sets none). It has no
/// collection (its collection imports return -400).
///
/// # Errors
/// As [`run_wasm`].
#[allow(clippy::result_large_err)] // As `run_js`.
pub fn run_wasm_udf(
    udf: &WasmScript<'_>,
    args: &[Option<serde_json::Value>],
    limits: &Limits,
) -> Result<Option<serde_json::Value>, Failure> {
    wasm::run_udf(udf, args, limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_threads_with_enough_stack_run_scripts_in_place() {
        let on = |stack: usize| {
            std::thread::Builder::new()
                .stack_size(stack)
                .spawn(runs_scripts_in_place)
                .unwrap()
                .join()
                .unwrap()
        };
        assert!(
            !on(2 << 20),
            "a 2 MB thread (the spawn default) has too little"
        );
        assert!(on(SCRIPT_STACK_NEEDED + (1 << 20)));
    }

    /// Caps lower the acceptance limits of both languages and never the
    /// hard budgets; a cap above a limit leaves it.
    #[test]
    fn caps_lower_only_the_acceptance_limits() {
        let limits = Limits::default();
        let capped = limits.clone().capped(ExecutionCaps {
            max_operations: Some(3),
            max_instructions: Some(1_000),
        });
        assert_eq!(capped.max_operations, 3);
        assert_eq!(capped.accept_instructions, 1_000);
        assert_eq!(capped.accept_fuel, 1_000);
        assert_eq!(capped.instructions, limits.instructions);
        assert_eq!(capped.fuel, limits.fuel);
        let high = limits.clone().capped(ExecutionCaps {
            max_operations: Some(u64::MAX),
            max_instructions: Some(u64::MAX),
        });
        assert_eq!(high, limits);
        assert_eq!(limits.clone().capped(ExecutionCaps::default()), limits);
    }
}
