//! The JavaScript sandbox, on boa.
//!
//! - `sandbox.rs`: prepared, locked-down contexts, pooled per thread, with
//!   their compiled-script cache.
//! - `run.rs`: one call, from the function call to the drained queue, and
//!   one call of a user-defined function.
//! - `host.rs`: the call state and the native functions scripts call
//!   (`getContext()`, collection methods, request, response, console).
//! - `nesting.rs`: the bound on a script's nesting, checked before boa
//!   parses it.
//! - `guards.rs`: guarded built-ins (the memory bound) and host hooks.
//! - `convert.rs`: bounded `JsValue` → JSON conversion.
//! - `prelude.js`: the JavaScript half of the API (JScript `Error`, the
//!   fluent `__` API, lockdown).

mod convert;
mod guards;
mod host;
mod nesting;
mod run;
mod sandbox;

pub(crate) use host::generate_id;
pub(crate) use host::{ids_state, seed_ids, skip_ids};
pub(crate) use nesting::MAX_DEPTH;
pub(crate) use run::{RED_ZONE, Seen, run, run_udf, seen, unhandled};
pub(crate) use sandbox::check;
