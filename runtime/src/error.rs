//! Why a call failed, and the status a caller sees for it.
//!
//! Every variant means the caller must roll the transaction back. The
//! statuses follow Azure Cosmos DB: a script throw is 400 with the thrown
//! `number` as substatus, a compile error 400/65535, a budget 408, a
//! WebAssembly trap 400.

use std::fmt;
use std::time::Duration;

use host_api::HostError;

/// Substatus Cosmos DB gives a script that does not compile.
pub const SUBSTATUS_COMPILE_ERROR: u16 = 65535;

/// Why a call did not commit. Every variant means the transaction must be
/// rolled back.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The script threw (or called `getContext().abort(err)`, or left an
    /// operation error unhandled). Deterministic.
    #[error("script error: {message}")]
    Script {
        /// The thrown error's message (`String(value)` for a non-error).
        message: String,
        /// The thrown error's `number` (JScript style: `new Error(409, "...")`,
        /// or the status of a rethrown operation error); 0 when absent or not
        /// a 16-bit unsigned integer.
        number: u16,
        /// The JavaScript stack, when boa recorded one.
        stack: Option<String>,
    },
    /// The collection failed in a way scripts must not handle (a storage
    /// failure: 500, 503); the call is stopped at once.
    #[error(transparent)]
    Host(#[from] HostError),
    /// The script ran out of a budget it cannot catch.
    #[error("budget exceeded: {0}")]
    Budget(Budget),
    /// A WebAssembly guest trapped: an `unreachable`, an out-of-bounds
    /// access, a stack overflow, a bad pointer passed to the host. 400, as
    /// an uncaught throw. Deterministic.
    #[error("WebAssembly trap: {message}")]
    Trap {
        /// The trap's reason, with what the host knows about it (the memory
        /// limit when `memory.grow` was refused before the trap).
        message: String,
        /// The guest's call stack, symbolized from the module's name
        /// section when it has one.
        backtrace: Option<String>,
    },
    /// The script text does not compile or does not evaluate to a function;
    /// a WebAssembly module that does not validate or does not follow the
    /// ABI.
    #[error("compile error: {0}")]
    Compile(String),
    /// A bug or an engine failure, not the script's fault.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// The HTTP status Cosmos DB would answer with.
    pub fn status(&self) -> u16 {
        match self {
            Error::Script { .. } | Error::Trap { .. } | Error::Compile(_) => 400,
            Error::Host(err) => err.code.as_u16(),
            Error::Budget(_) => 408,
            Error::Internal(_) => 500,
        }
    }

    /// The `x-ms-substatus` Cosmos DB would send: the thrown number for a
    /// script error (0 when none), 65535 for a compile error.
    pub fn substatus(&self) -> Option<u16> {
        match self {
            Error::Script { number, .. } => Some(*number),
            Error::Compile(_) => Some(SUBSTATUS_COMPILE_ERROR),
            _ => None,
        }
    }
}

/// Which bound stopped a script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Budget {
    /// The call executed more bytecode instructions than
    /// [`Limits::instructions`](crate::Limits::instructions).
    Instructions {
        /// The limit that was exceeded.
        limit: u64,
    },
    /// A WebAssembly call used more than [`Limits::fuel`](crate::Limits::fuel).
    Fuel {
        /// The limit that was exceeded.
        limit: u64,
    },
    /// The call ran longer than [`Limits::wall_time`](crate::Limits::wall_time)
    /// (JavaScript: checked whenever the script calls the host or a guarded
    /// built-in; WebAssembly: an epoch deadline, at most a millisecond late).
    WallTime {
        /// The limit that was exceeded.
        limit: Duration,
    },
    /// A guarded built-in or a value conversion would have gone over
    /// [`Limits::max_memory_bytes`](crate::Limits::max_memory_bytes).
    Memory {
        /// The limit that was exceeded, in bytes.
        limit: usize,
        /// What asked for the memory.
        what: String,
    },
    /// Calls nested deeper than [`Limits::recursion`](crate::Limits::recursion)
    /// or the VM stack overflowed.
    Recursion {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// The engine's own recursion (a prototype chain boa walks in Rust)
    /// overflowed the native stack of a script worker process, which died
    /// of it (see [`Limits::workers`](crate::Limits::workers)).
    NativeStack {
        /// The worker's stack size, in bytes.
        limit: usize,
    },
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Budget::Instructions { limit } => write!(f, "more than {limit} instructions"),
            Budget::Fuel { limit } => write!(f, "used more than {limit} units of fuel"),
            Budget::WallTime { limit } => write!(f, "ran longer than {limit:?}"),
            Budget::Memory { limit, what } => {
                write!(f, "{what} would exceed the memory limit of {limit} bytes")
            }
            Budget::Recursion { limit } => write!(f, "calls nested deeper than {limit}"),
            Budget::NativeStack { limit } => write!(
                f,
                "the script nested deeper than the worker's native stack of {limit} bytes allows"
            ),
        }
    }
}
