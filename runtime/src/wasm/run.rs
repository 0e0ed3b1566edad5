//! One call: a fresh instance from the cached `InstancePre`, fuel and an
//! epoch deadline set before the entry point runs, and the outcome turned
//! into the same [`Output`] / [`Failure`] shape as JavaScript.
//!
//! A fresh instance per call (from the pooling allocator: a few
//! microseconds) means no call can see what another left in memory or
//! globals, and a trap leaves nothing to clean up: the store is dropped.

use std::time::Instant;

use host_api::{Collection, ScriptKind};
use serde_json::Value;
use wasmtime::{Extern, Store, Trap, TypedFunc, WasmBacktrace};

use super::WasmScript;

use super::host::{HostState, Inputs, Role, Stop};
use super::sandbox::{self, MAX_WASM_STACK, TICK};
use crate::{Budget, Error, Failure, Invocation, Limits, Output, Statistics};

/// Calls run on a stack with at least this much free: the guest's
/// [`MAX_WASM_STACK`] plus room for the host functions it calls (a query
/// with UDFs recurses in Rust).
const RED_ZONE: usize = MAX_WASM_STACK + (1 << 20);

// `SCRIPT_STACK_NEEDED` promises threads with that much free stack run Wasm
// calls in place too.
const _: () = assert!(RED_ZONE <= crate::SCRIPT_STACK_NEEDED);

/// The stack a call needs when less than [`RED_ZONE`] is free (the
/// thread's spare holds it).
const STACK_SIZE: usize = 4 << 20;

/// What the guest's call produced, before it becomes an [`Output`].
struct Finished {
    result: Result<(), Error>,
    state: Option<HostState>,
    fuel: u64,
}

#[allow(clippy::result_large_err)] // As `crate::run_js`.
pub(crate) fn run(
    script: &WasmScript<'_>,
    invocation: Invocation,
    collection: &mut dyn Collection,
    limits: &Limits,
) -> Result<Output, Failure> {
    let started = Instant::now();
    let (kind, inputs) = match invocation {
        Invocation::Procedure { params } => (
            ScriptKind::StoredProcedure,
            Inputs {
                role: Role::Procedure,
                operation: None,
                params: Value::Array(params),
                request_body: Value::Null,
                response_body: None,
            },
        ),
        Invocation::PreTrigger {
            request_body,
            operation,
        } => (
            ScriptKind::Trigger,
            Inputs {
                role: Role::PreTrigger,
                operation: Some(operation),
                params: Value::Array(Vec::new()),
                request_body,
                response_body: None,
            },
        ),
        Invocation::PostTrigger {
            request_body,
            response_body,
            operation,
        } => (
            ScriptKind::Trigger,
            Inputs {
                role: Role::PostTrigger,
                operation: Some(operation),
                params: Value::Array(Vec::new()),
                request_body,
                response_body: Some(response_body),
            },
        ),
    };
    let before = collection.stats();
    let finished = crate::stack::with_room(RED_ZONE, STACK_SIZE, || {
        guarded(|| call(script, kind, inputs, Some(&mut *collection), limits))
    });
    let mut stats = Statistics {
        fuel: finished.fuel,
        wall_time: started.elapsed(),
        ..Statistics::default()
    }
    .with_documents(collection.stats());
    if finished.state.is_none() {
        stats = stats.with_documents(before);
    }
    let logs = finished
        .state
        .as_ref()
        .map(|s| s.logs.clone())
        .unwrap_or_default();
    match finished.result {
        Ok(()) => {
            let state = finished.state.expect("a finished call has its state");
            let body = match state.role {
                Role::PreTrigger => Some(state.request_body),
                _ => state.response_body,
            };
            Ok(Output { body, logs, stats })
        }
        Err(error) => Err(Failure { error, logs, stats }),
    }
}

#[allow(clippy::result_large_err)] // As `crate::run_udf`.
pub(crate) fn run_udf(
    script: &WasmScript<'_>,
    args: &[Option<Value>],
    limits: &Limits,
) -> Result<Option<Value>, Failure> {
    let started = Instant::now();
    let params = args
        .iter()
        .map(|a| a.clone().unwrap_or(Value::Null))
        .collect();
    let inputs = Inputs {
        role: Role::Udf,
        operation: None,
        params: Value::Array(params),
        request_body: Value::Null,
        response_body: None,
    };
    let finished = crate::stack::with_room(RED_ZONE, STACK_SIZE, || {
        guarded(|| {
            call(
                script,
                ScriptKind::UserDefinedFunction,
                inputs,
                None,
                limits,
            )
        })
    });
    let stats = Statistics {
        instructions: 0,
        fuel: finished.fuel,
        wall_time: started.elapsed(),
        ..Statistics::default()
    };
    match (finished.result, finished.state) {
        (Ok(()), Some(state)) => Ok(state.response_body),
        (Ok(()), None) => Err(Failure {
            error: Error::Internal("a finished UDF call lost its state".to_owned()),
            logs: String::new(),
            stats,
        }),
        (Err(error), state) => Err(Failure {
            error,
            logs: state.map(|s| s.logs).unwrap_or_default(),
            stats,
        }),
    }
}

/// Runs `f`, turning a panic (a bug in a host function or the collection)
/// into an internal error; the store it was using is gone with the unwind.
fn guarded(f: impl FnOnce() -> Finished) -> Finished {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_owned());
        Finished {
            result: Err(Error::Internal(format!(
                "the WebAssembly host panicked: {message}"
            ))),
            state: None,
            fuel: 0,
        }
    })
}

fn call(
    script: &WasmScript<'_>,
    kind: ScriptKind,
    inputs: Inputs,
    collection: Option<&mut dyn Collection>,
    limits: &Limits,
) -> Finished {
    let early = |error| Finished {
        result: Err(error),
        state: None,
        fuel: 0,
    };
    let sandbox = match sandbox::sandbox() {
        Ok(sandbox) => sandbox,
        Err(message) => return early(Error::Internal(message)),
    };
    let _running = sandbox.enter();
    let compiled =
        match script
            .cache
            .get(sandbox, script.module, script.shared, script.artifact_dir)
        {
            Ok(compiled) => compiled,
            Err(e) => return early(e),
        };
    let exports = match compiled.exports(kind) {
        Ok(exports) => exports,
        Err(e) => return early(e),
    };
    // SAFETY: the store owning the state is dropped at the end of this
    // function, while `collection`'s borrow is still alive, and the caller
    // does not touch the collection until then.
    // The wall-clock budget starts once the module is compiled: a first
    // call that compiles (a module stored without the upload check, or a
    // cold cache) must not spend the script's time on Cranelift, which in a
    // debug build on a loaded machine can take seconds. The reported wall
    // time still counts from the caller's start.
    let state = unsafe { HostState::new(collection, inputs, limits, Instant::now()) };
    let mut store = Store::new(&sandbox.engine, state);
    store.limiter(|state| &mut state.limiter);
    let ticks = limits.wall_time.as_micros() / TICK.as_micros() + 1;
    store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
    let result = store
        .set_fuel(limits.fuel)
        .and_then(|()| compiled.pre.instantiate(&mut store))
        .and_then(|instance| {
            let memory = instance
                .get_module_export(&mut store, &exports.memory)
                .and_then(Extern::into_memory);
            store.data_mut().memory = memory;
            let entry = instance
                .get_module_export(&mut store, &exports.entry)
                .and_then(Extern::into_func)
                .ok_or_else(|| wasmtime::Error::msg("the entry point is not a function"))?;
            // SAFETY: `Compiled::exports` checked, when the module was
            // compiled, that this export is a function of type () -> i32.
            let entry = unsafe { TypedFunc::<(), i32>::new_unchecked(&store, entry) };
            entry.call(&mut store, ())
        });
    let fuel = limits
        .fuel
        .saturating_sub(store.get_fuel().unwrap_or(limits.fuel));
    let result = match result {
        Ok(0) => Ok(()),
        Ok(n) => Err(Error::Script {
            message: format!("the {} returned {n}", kind_word(kind)),
            number: u16::try_from(n).unwrap_or(0),
            stack: None,
        }),
        Err(e) => Err(classify(&e, limits, store.data())),
    };
    let state = store.into_data();
    Finished {
        result,
        state: Some(state),
        fuel,
    }
}

fn kind_word(kind: ScriptKind) -> &'static str {
    match kind {
        ScriptKind::StoredProcedure => "procedure",
        ScriptKind::Trigger => "trigger",
        ScriptKind::UserDefinedFunction => "user-defined function",
    }
}

/// The error a failed guest call is reported as.
fn classify(e: &wasmtime::Error, limits: &Limits, state: &HostState) -> Error {
    let backtrace = e
        .downcast_ref::<WasmBacktrace>()
        .filter(|b| !b.frames().is_empty())
        .map(|b| b.to_string());
    let memory_note = |message: String| {
        if state.limiter.memory_refused {
            format!(
                "{message} (after memory.grow was refused at the memory limit of {} bytes)",
                state.limiter.max_memory
            )
        } else {
            message
        }
    };
    if let Some(stop) = e.downcast_ref::<Stop>() {
        return match stop {
            Stop::Fail { number, message } => Error::Script {
                message: message.clone(),
                number: u16::try_from(*number).unwrap_or(0),
                stack: backtrace,
            },
            Stop::Host(err) => Error::Host(err.clone()),
            Stop::Bounds(message) => Error::Trap {
                message: memory_note(message.clone()),
                backtrace,
            },
            Stop::OutOfFuel => Error::Budget(Budget::Fuel { limit: limits.fuel }),
        };
    }
    if let Some(trap) = e.downcast_ref::<Trap>() {
        return match trap {
            Trap::OutOfFuel => Error::Budget(Budget::Fuel { limit: limits.fuel }),
            Trap::Interrupt => Error::Budget(Budget::WallTime {
                limit: limits.wall_time,
            }),
            Trap::StackOverflow => Error::Trap {
                message: format!(
                    "call stack exhausted: the guest used more than the {} KiB stack limit \
                     (deep or unbounded recursion)",
                    MAX_WASM_STACK >> 10
                ),
                backtrace,
            },
            other => Error::Trap {
                message: memory_note(
                    other
                        .to_string()
                        .trim_start_matches("wasm trap: ")
                        .to_owned(),
                ),
                backtrace,
            },
        };
    }
    if e.is::<wasmtime::PoolConcurrencyLimitError>() {
        return Error::Host(host_api::HostError::new(
            host_api::ErrorCode::TOO_MANY_REQUESTS,
            format!("too many WebAssembly calls at once: {e}"),
        ));
    }
    if state.limiter.memory_refused {
        // Instantiation asked for more initial memory than allowed.
        return Error::Trap {
            message: format!(
                "the module's memory exceeds the memory limit of {} bytes: {e:#}",
                state.limiter.max_memory
            ),
            backtrace,
        };
    }
    Error::Internal(format!("WebAssembly call failed: {e:#}"))
}
