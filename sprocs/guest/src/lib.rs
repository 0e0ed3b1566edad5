//! Write Partita stored procedures, triggers and user-defined functions in
//! Rust, compiled to WebAssembly.
//!
//! This crate is a safe layer over the `partita_v1` ABI (documented in
//! `host-api/src/abi.rs`): the call's [`context()`], its [`params()`], the
//! request and response bodies, [`log!`], and the [`Collection`] of the
//! call's logical partition. Everything a procedure does runs in one
//! transaction: returning `Ok` commits it, returning `Err` (or panicking)
//! rolls all of it back.
//!
//! # A procedure
//!
//! A crate with `crate-type = ["cdylib"]` that depends on `partita-guest`
//! and `serde_json`, a release profile with `panic = "abort"`, and a build
//! script that links it with room for the allocator (see
//! [Memory](#memory)):
//!
//! ```
//! use partita_guest::{Error, collection, log, params, set_body};
//! use serde_json::Value;
//!
//! /// Increments `visits` on the document `id` and returns the new count.
//! fn visit() -> Result<(), Error> {
//!     let (id,): (String,) = params()?;
//!     let c = collection();
//!     let mut doc: Value = c.read(&id)?; // a 404 fails the call: 400/404
//!     let visits = doc["visits"].as_u64().unwrap_or(0) + 1;
//!     doc["visits"] = visits.into();
//!     c.replace(&id, &doc, &Default::default())?;
//!     log!("{id} has {visits} visits");
//!     set_body(&visits)
//! }
//!
//! partita_guest::procedure!(visit);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-unknown-unknown`
//! and register `target/wasm32-unknown-unknown/release/<crate>.wasm` as a
//! script with language `Wasm`. [`trigger!`] and [`udf!`] declare the other
//! kinds; a pre-trigger uses [`request_body`]/[`set_request_body`], a
//! post-trigger [`response_body`]/[`set_body`], a UDF [`params()`] for its
//! arguments and [`set_body`] for its return value.
//!
//! # Documents
//!
//! Reads, parameters and bodies decode as anything [`FromJson`]: any serde
//! type (a [`serde_json::Value`], your own struct) or [`RawDoc`] and
//! [`RawArray`], which keep members and items as JSON text and parse only
//! what is asked for. A procedure that changes one field of a document it
//! reads (`post.commentCount++`) should use [`RawDoc`]: building a `Value`
//! and serializing it again costs several times the rest of such a call.
//! One that needs nothing else of the document should not even read it:
//! [`Collection::read_member`] and [`Collection::replace_member`] read and
//! set one member of a document the host keeps (about 1.5 µs less per
//! createComment call than reading the post as a [`RawDoc`]: the post no
//! longer crosses the boundary twice, and neither side scans or parses
//! its text).
//! Writes take anything [`ToJson`]; the stored document (with its system
//! properties) can be read from the returned [`Written`] before the next
//! operation, and is not even serialized by the host when it is not read.
//!
//! # Errors and bounded execution
//!
//! Every operation returns `Result<T, Error>`. [`Error::Host`] carries the
//! status of the shared table (`host_api::ErrorCode`: 404, 409, 412, ...)
//! and the host's message; a failed operation changed nothing and the
//! procedure may go on. Returning an error from the entry function is
//! JavaScript's `throw err`: the call fails with 400, the error's
//! [`number`](Error::number) as substatus, and its message.
//! [`Error::NotAccepted`] means the call is near its budget and the
//! operation was not performed: commit what is done (return `Ok` after
//! setting a body that tells the client where to continue); left unhandled,
//! it fails the call with substatus 408 and nothing is committed. A panic
//! fails the call with substatus 0 and the panic's message and location.
//!
//! # Memory
//!
//! On `wasm32` this crate is the module's global allocator: a bump arena
//! over the part of the initial linear memory past the static data, then
//! Rust's default allocator (`arena.rs`). Every call runs in a fresh
//! instance, so the arena is new each time, and allocating costs a few
//! instructions and no `memory.grow`. Link the module with room for it:
//! add `partita-guest-build` (`sprocs/guest/build`) as a build-dependency
//! and call `partita_guest_build::link_memory_layout()` from the crate's
//! `build.rs`, as the samples do. It links the module with 512 KiB of
//! initial memory (a 192 KiB stack, the static data, about 270 KiB of
//! arena), and its docs say why these sizes.
//! Without it the arena is empty and everything goes to the default
//! allocator, which grows the memory on every call (correct, a few
//! microseconds slower).
//!
//! # Testing
//!
//! On any target but `wasm32` the host functions are answered by the mock
//! of [`testing`], so procedures can be unit-tested with `cargo test`.

#[cfg(any(target_arch = "wasm32", test))]
mod arena;
mod call;
mod collection;
mod error;
pub mod js;
mod raw;
mod sys;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;

pub use collection::{Collection, FeedOptions, Page, Query, WriteOptions, id_of};
pub use error::Error;
pub use host_api::ErrorCode;
pub use raw::{FromJson, RawArray, RawDoc, ToJson, Written};

use serde::Deserialize;
use serde_json::Value;

use crate::call::{decode_host, encode, with_result, without_result};

/// The call's logical partition: reads, writes and queries.
pub const fn collection() -> Collection {
    Collection::new()
}

/// What kind of call is running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    /// A stored procedure.
    Procedure,
    /// A pre-trigger.
    PreTrigger,
    /// A post-trigger.
    PostTrigger,
    /// A user-defined function.
    Udf,
}

/// The write a trigger runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Operation {
    /// A create.
    Create,
    /// A replace.
    Replace,
    /// An upsert.
    Upsert,
    /// A delete.
    Delete,
}

/// The call's context (see [`context()`]).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    /// Procedure, trigger or UDF.
    pub kind: Kind,
    /// For a trigger: the write it runs on.
    pub operation: Option<Operation>,
    /// The container's id.
    pub container_id: String,
    /// The container's resource link (`getSelfLink()`).
    pub self_link: String,
    /// The container's name-based link (`getAltLink()`).
    pub alt_link: String,
    /// The partition key in Cosmos DB's header form (`[value]`, or `[{}]`
    /// for documents without the key); `None` in a UDF.
    pub partition_key: Option<Value>,
}

/// The call's context: its kind, the trigger's operation, the container's
/// links and the partition key.
///
/// # Errors
/// [`Error::NotAccepted`] near the budget.
pub fn context() -> Result<Context, Error> {
    with_result(sys::context, decode_host("context"))
}

/// The procedure's parameters (or a UDF's arguments) decoded as `T`, which
/// is usually a tuple: `let (post_id, comment): (String, Value) = params()?;`.
/// The host sends a JSON array.
///
/// # Errors
/// 400 when the parameters do not decode as `T`, naming what was wrong.
pub fn params<T: FromJson>() -> Result<T, Error> {
    with_result(sys::params, |bytes| {
        T::from_json(bytes).map_err(|e| {
            Error::status(
                ErrorCode::BAD_REQUEST,
                format!("the parameters do not fit the procedure: {e}"),
            )
        })
    })
}

/// A trigger's request body: the document being written (`null` for a
/// delete; after a pre-trigger's change).
///
/// # Errors
/// 400 outside a trigger; 500 when the body does not decode as `T`.
pub fn request_body<T: FromJson>() -> Result<T, Error> {
    with_result(sys::request_body, decode_host("request body"))
}

/// A pre-trigger replaces the document about to be written.
///
/// # Errors
/// 400 outside a pre-trigger.
pub fn set_request_body<T: ToJson + ?Sized>(body: &T) -> Result<(), Error> {
    let bytes = encode("request body", body)?;
    without_result(sys::set_request_body(&bytes))
}

/// A post-trigger's response body (the written document), or a procedure's
/// body as set so far (`""` when none is set).
///
/// # Errors
/// 400 in a pre-trigger or UDF.
pub fn response_body<T: FromJson>() -> Result<T, Error> {
    with_result(sys::response_body, decode_host("response body"))
}

/// Sets a procedure's response body, a post-trigger's changed response or
/// a UDF's return value (`getContext().getResponse().setBody(body)`).
///
/// # Errors
/// 400 in a pre-trigger.
pub fn set_body<T: ToJson + ?Sized>(body: &T) -> Result<(), Error> {
    let bytes = encode("response body", body)?;
    without_result(sys::set_response_body(&bytes))
}

/// Appends `text` to the call's log as given, with no separator, as
/// JavaScript's `console.log` does on Cosmos DB (end it with `\n` to write
/// lines).
pub fn log(text: &str) {
    call::count_call();
    sys::log(text.as_bytes());
}

/// Appends formatted text to the call's log, as [`log()`] does:
/// `log!("deleted {n} posts\n")`.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {
        $crate::log(&::std::format!($($arg)*))
    };
}

/// Declares `$f: fn() -> Result<(), Error>` as the module's stored
/// procedure (the `partita_procedure` export).
#[macro_export]
macro_rules! procedure {
    ($f:path) => {
        /// The module's stored procedure (ABI `partita_v1`).
        #[unsafe(no_mangle)]
        pub extern "C" fn partita_procedure() -> i32 {
            $crate::__private::run($f)
        }
    };
}

/// Declares `$f: fn() -> Result<(), Error>` as the module's pre- or
/// post-trigger (the `partita_trigger` export).
#[macro_export]
macro_rules! trigger {
    ($f:path) => {
        /// The module's trigger (ABI `partita_v1`).
        #[unsafe(no_mangle)]
        pub extern "C" fn partita_trigger() -> i32 {
            $crate::__private::run($f)
        }
    };
}

/// Declares `$f: fn() -> Result<(), Error>` as the module's user-defined
/// function (the `partita_udf` export): it reads its arguments with
/// [`params()`] and returns its value with [`set_body`].
#[macro_export]
macro_rules! udf {
    ($f:path) => {
        /// The module's user-defined function (ABI `partita_v1`).
        #[unsafe(no_mangle)]
        pub extern "C" fn partita_udf() -> i32 {
            $crate::__private::run($f)
        }
    };
}

/// What the declaration macros expand to. Not part of the API.
#[doc(hidden)]
pub mod __private {
    use crate::{Error, sys};

    /// Runs an entry function: `0` to commit, or `fail` with its error.
    pub fn run(entry: fn() -> Result<(), Error>) -> i32 {
        install_panic_hook();
        match entry() {
            Ok(()) => 0,
            Err(err) => sys::fail(err.number(), err.message().as_bytes()),
        }
    }

    /// Reports a panic through `fail` (substatus 0, like an uncaught
    /// JavaScript `TypeError`), so the caller sees its message and location
    /// rather than a bare trap.
    fn install_panic_hook() {
        #[cfg(target_arch = "wasm32")]
        {
            use std::sync::Once;
            static HOOK: Once = Once::new();
            HOOK.call_once(|| {
                std::panic::set_hook(Box::new(|info| {
                    let message = format!("the procedure panicked: {info}");
                    sys::fail(0, message.as_bytes())
                }));
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::{self, Call, Failed, Reply};

    fn entry_ok() -> Result<(), Error> {
        let (a, b): (String, u32) = params()?;
        log!("got {a} and {b}");
        set_body(&json!({"a": a, "b": b}))
    }

    fn entry_not_found() -> Result<(), Error> {
        collection().read::<Value>("p9").map(|_| ())
    }

    fn entry_not_accepted() -> Result<(), Error> {
        collection().create(&json!({})).map(|_| ())
    }

    fn host(call: &Call) -> Reply {
        match call {
            Call::Params => Reply::json(&json!(["x", 2])),
            Call::Read { .. } => Reply::Status(404, "no document p9".into()),
            Call::Create { .. } => Reply::NotAccepted,
            Call::Log(_) | Call::SetResponseBody(_) => Reply::Ok(Vec::new()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_entry_point_commits_on_ok() {
        let (result, record) = testing::run(host, || __private::run(entry_ok));
        assert_eq!(result, Ok(0));
        assert_eq!(record.logs(), ["got x and 2"]);
        assert_eq!(
            record.calls.last(),
            Some(&Call::SetResponseBody(br#"{"a":"x","b":2}"#.to_vec()))
        );
    }

    #[test]
    fn an_error_fails_the_call_with_its_status_as_substatus() {
        let (result, _) = testing::run(host, || __private::run(entry_not_found));
        assert_eq!(
            result,
            Err(Failed {
                number: 404,
                message: "no document p9".into()
            })
        );
        let (result, _) = testing::run(host, || __private::run(entry_not_accepted));
        assert_eq!(result.unwrap_err().number, 408);
    }

    #[test]
    fn bad_params_are_a_400_naming_the_problem() {
        let (result, _) = testing::run(
            |_| Reply::json(&json!(["only one"])),
            params::<(String, u32)>,
        );
        let err = result.unwrap().unwrap_err();
        assert!(err.is(ErrorCode::BAD_REQUEST), "{err}");
        assert!(err.message().contains("parameters"), "{err}");
    }

    #[test]
    fn context_decodes_the_abi_shape() {
        let (result, _) = testing::run(
            |_| {
                Reply::json(&json!({
                    "kind": "postTrigger", "operation": "Create", "containerId": "feed",
                    "selfLink": "dbs/a/colls/b/", "altLink": "dbs/db/colls/feed",
                    "partitionKey": ["post"]
                }))
            },
            context,
        );
        let ctx = result.unwrap().unwrap();
        assert_eq!(
            (ctx.kind, ctx.operation, ctx.partition_key),
            (
                Kind::PostTrigger,
                Some(Operation::Create),
                Some(json!(["post"]))
            )
        );
    }

    #[test]
    fn bodies_round_trip() {
        let (result, record) = testing::run(
            |call| match call {
                Call::RequestBody => Reply::json(&json!({"id": "d1"})),
                _ => Reply::Ok(Vec::new()),
            },
            || {
                let mut doc: Value = request_body()?;
                doc["stamped"] = true.into();
                set_request_body(&doc)
            },
        );
        result.unwrap().unwrap();
        assert_eq!(
            record.calls[1],
            Call::SetRequestBody(br#"{"id":"d1","stamped":true}"#.to_vec())
        );
    }
}
