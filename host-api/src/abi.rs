//! The WebAssembly ABI, version 1: how a Wasm procedure, trigger or
//! user-defined function talks to Partita.
//!
//! This page is the whole contract. A guest SDK for any language that
//! compiles to `wasm32` can be written from it; the Rust SDK in
//! `sprocs/guest` and the hand-written WAT modules in
//! `sprocs/samples/wat` are two implementations of it. The host side is
//! `runtime::wasm`. The operations are the ones of
//! [`Collection`](crate::Collection), with the same status codes
//! ([`ErrorCode`](crate::ErrorCode)) as JavaScript.
//!
//! API BOUNDARY: everything below is frozen once released.
//!
//! # Module shape
//!
//! A module is a core WebAssembly module (`.wasm` bytes, or `.wat` text that
//! the host compiles at upload). It must
//! * export its linear memory as [`MEMORY_EXPORT`] (`"memory"`);
//! * export the entry point of its kind, with type `() -> i32`:
//!   [`PROCEDURE_EXPORT`] for a stored procedure, [`TRIGGER_EXPORT`] for a
//!   pre- or post-trigger, [`UDF_EXPORT`] for a user-defined function;
//! * import nothing but functions of the [`MODULE`] (`"partita_v1"`)
//!   import module listed in [`IMPORTS`], with exactly those signatures (no
//!   WASI, no other modules).
//!
//! A module that does not validate, imports anything else, or lacks the
//! export is refused at upload with 400 and a message naming the problem.
//!
//! The entry point returns `0` to commit. Returning any other number `n`
//! fails the call as an uncaught `throw new Error(n, ...)` would in
//! JavaScript: 400 with substatus `n` (0 when `n` is not in `0..=65535`,
//! as for a JavaScript `number`), and everything the call wrote is rolled
//! back. [`fail`](#fail) does the same with a message. A trap (an
//! `unreachable`, an out-of-bounds access, a Rust panic) fails the call with
//! 400 and the trap's reason; running out of fuel or time is 408; memory
//! growth past the limit makes `memory.grow` return -1 (the guest decides
//! what to do; a Rust guest aborts, which is a trap).
//!
//! # Conventions
//!
//! * Every parameter is an `i32`. Pointers and lengths are read as
//!   unsigned 32-bit offsets into the exported memory.
//! * Text and documents cross the boundary as UTF-8 JSON bytes in guest
//!   memory: `(ptr, len)` for input, `(out_ptr, out_cap)` for a buffer the
//!   host may fill. Numbers the guest sends are kept as a JavaScript
//!   procedure would store them: an integral float within ±2^53 becomes an
//!   integer (`100.0` is stored as `100`, `-0.0` as `0`), so a guest that
//!   passes numbers through as text stores what the same script stores.
//!   An object with two members of one name is not JSON the host accepts
//!   (`-400`, naming the member), where older hosts kept the last.
//! * **Traps (guest bugs):** an input range `ptr..ptr+len` or an output
//!   range `out_ptr..out_ptr+out_cap` that does not lie inside the memory;
//!   an import called while the module is still being instantiated (from a
//!   start function: the host is available from the entry point on).
//!   Nothing else traps.
//! * **Error codes (situations the guest can handle):** everything else,
//!   including bytes that are not UTF-8, not JSON, or JSON of the wrong
//!   shape (400), returns a negative status: `-404`, `-409`, ... as listed
//!   per function. A failed operation changes nothing, and the guest may go
//!   on.
//! * **Results.** A function that produces bytes returns `r`:
//!   - `r >= 0`: success, and `r` is the length of the result. If
//!     `r <= out_cap` the result is at `out_ptr..out_ptr+r`. Otherwise
//!     nothing was written, the operation is *not* repeated, and the result
//!     waits: call [`take_result`](#take_result) with a buffer of at least
//!     `r` bytes.
//!   - `r == `[`NOT_ACCEPTED`] (`-1`): the call is near its budget and the
//!     operation was not performed (Cosmos DB's bounded execution: return a
//!     continuation and let the client call again).
//!   - `r <= -400`: the operation failed with status `-r`; the error message
//!     (UTF-8) waits for [`take_result`](#take_result) as a result would.
//!
//!   A waiting result or message is dropped by the next call of any other
//!   import. Functions without a result return `0`, [`NOT_ACCEPTED`] or a
//!   negative status the same way.
//! * **Options** are a JSON object at `(opts_ptr, opts_len)`; `opts_len == 0`
//!   means none. Keys: `"etag"` (string: If-Match, the write fails with
//!   `-412` unless the document's `_etag` is this), and for create and
//!   upsert `"disableAutomaticIdGeneration"` (bool; when false or absent, a
//!   document without `"id"` gets a generated one, as in JavaScript).
//!   Unknown keys are ignored.
//! * **Pages** (query, read feed) are `{"items": [...], "continuation":
//!   string | null}`; pass the continuation back to get the next page.
//! * **Fuel.** Guest instructions consume fuel, and so does each host call:
//!   a fixed cost per call plus one unit per byte crossing the boundary, so
//!   the same call on the same data uses the same fuel on any machine. The
//!   fuel used is reported in the response's statistics.
//!
//! # Imports of `partita_v1`
//!
//! `ptr`/`len`/`cap` are `i32`; every function returns an `i32` except
//! `log` and `fail`.
//!
//! ## context
//! `context(out_ptr, out_cap) -> r`: the call's context as JSON:
//! `{"kind": "procedure" | "preTrigger" | "postTrigger" | "udf",
//! "operation": "Create" | "Replace" | "Upsert" | "Delete" | null,
//! "containerId": string, "selfLink": string, "altLink": string,
//! "partitionKey": [value] | [{}] | null}` (the partition key in Cosmos DB's
//! header form; `[{}]` is the partition of documents without the key;
//! `null` in a UDF, whose `containerId`, `selfLink` and `altLink` are `""`).
//!
//! ## params
//! `params(out_ptr, out_cap) -> r`: a procedure's parameters as a JSON
//! array; a UDF's arguments (an `undefined` argument is `null`); `[]` for a
//! trigger.
//!
//! ## request_body / set_request_body
//! `request_body(out_ptr, out_cap) -> r`: a trigger's request body, the
//! document being written (after a pre-trigger's change; `null` for a
//! delete). `-400` outside a trigger.
//! `set_request_body(ptr, len) -> r`: a pre-trigger replaces the document
//! about to be written. `-400` outside a pre-trigger or for bytes that are
//! not JSON.
//!
//! ## response_body / set_response_body
//! `response_body(out_ptr, out_cap) -> r`: a post-trigger's response body
//! (the written document); a procedure's body as set so far (`""` when none
//! is set). `-400` in a pre-trigger or UDF.
//! `set_response_body(ptr, len) -> r`: a procedure's response body
//! (`getContext().getResponse().setBody()`), a post-trigger's changed
//! response, or a UDF's return value (a UDF that never sets one returns
//! `undefined`). `-400` in a pre-trigger or for bytes that are not JSON.
//!
//! ## log
//! `log(ptr, len)`: appends the text to the call's log as given, with no
//! separator (`console.log`).
//! Bytes that are not UTF-8 are replaced, never refused. Output past the
//! log limit is cut with a marker.
//!
//! ## read
//! `read(id_ptr, id_len, out_ptr, out_cap) -> r`: the document `id`, seeing
//! the call's own writes. `-404` when there is none; `-400` for an id that
//! is not UTF-8.
//!
//! ## read_feed
//! `read_feed(opts_ptr, opts_len, out_ptr, out_cap) -> r`: a page of the
//! partition's documents, seeing the call's own writes. Options
//! `{"pageSize": n, "continuation": string}`. `-400` for a token this feed
//! did not issue.
//!
//! ## create
//! `create(doc_ptr, doc_len, opts_ptr, opts_len, out_ptr, out_cap) -> r`:
//! creates the document and returns it with its system properties. A
//! document without the partition-key property lands in the call's
//! logical partition, as on Cosmos DB. `-400` (not a JSON object, bad id,
//! another partition key, missing id with automatic ids disabled), `-409`
//! (the id exists), `-413` (over 2 MB).
//!
//! ## replace
//! `replace(id_ptr, id_len, doc_ptr, doc_len, opts_ptr, opts_len, out_ptr,
//! out_cap) -> r`: replaces the document `id`; a body with another id
//! renames the document (it keeps its `_rid`). `-400`, `-404`, `-409` (a
//! rename onto a taken id), `-412`, `-413`.
//!
//! ## read_member
//! `read_member(id_ptr, id_len, key_ptr, key_len, out_ptr, out_cap) -> r`:
//! the member `key` of the document `id` (seeing the call's own writes) as
//! JSON text, without the rest of the document crossing the boundary;
//! `r == 0` when the document has no such member (no JSON text is empty).
//! `-404` when there is no document; `-400` for an id or key that is not
//! UTF-8. Added to version 1 after its first release (see Versioning).
//!
//! ## replace_member
//! `replace_member(id_ptr, id_len, key_ptr, key_len, value_ptr, value_len,
//! opts_ptr, opts_len, out_ptr, out_cap) -> r`: replaces the document `id`
//! with a copy whose member `key` is the JSON `value`: in its place when
//! the document has one, otherwise last, as the JavaScript assignment
//! `doc[key] = value` does. It stores exactly what [`read`](#read), that
//! change and [`replace`](#replace) of the whole document store, without
//! the document crossing the boundary twice. Options and result as for
//! `replace`; a new string `id` renames the document, as `replace` does.
//! `-400` (a value that is not JSON, an id or key that is not UTF-8, a
//! change the document cannot take, such as an `id` that is not a string),
//! `-404`, `-409` (a rename onto a taken id), `-412`, `-413`. Added to
//! version 1 after its first release.
//!
//! ## upsert
//! `upsert(doc_ptr, doc_len, opts_ptr, opts_len, out_ptr, out_cap) -> r`:
//! creates or replaces. `-400`, `-412`, `-413`.
//!
//! ## delete
//! `delete(id_ptr, id_len, opts_ptr, opts_len) -> r`: deletes the document
//! `id`; `0` on success. `-404`, `-412`.
//!
//! ## query
//! `query(req_ptr, req_len, out_ptr, out_cap) -> r`: runs a SQL query over
//! the partition and returns one page. The request is `{"query": string,
//! "parameters": [{"name": "@p", "value": any}], "pageSize": n,
//! "continuation": string}` (all but `query` optional). The query sees the
//! partition as committed when the call began (for a trigger: before the
//! triggering write) minus the documents the call deleted, as in
//! JavaScript. `-400` for a syntax error, a missing parameter or a bad
//! token.
//!
//! ## take_result
//! `take_result(out_ptr, out_cap) -> r`: the waiting result or error
//! message of the previous call: its length, and the bytes when `r <=
//! out_cap` (after which it no longer waits). `0` when nothing waits.
//!
//! ## fail
//! `fail(number, msg_ptr, msg_len)`: never returns. Stops the call and rolls
//! it back as an uncaught `throw new Error(number, message)` does in
//! JavaScript: 400 with substatus `number` and the message (lossy UTF-8).
//! The guest cannot catch it.
//!
//! # Versioning
//!
//! The import module's name carries the major version. New functions may
//! be added to `partita_v1` (a module imports only what it uses, so old
//! modules keep linking); the signature and meaning of a listed function
//! never change. An incompatible change gets a new module, `partita_v2`,
//! and the host keeps linking `partita_v1` modules.
//!
//! Added since the first release: [`read_member`](#read_member) and
//! [`replace_member`](#replace_member) (a guest that changes one member of
//! a document it does not otherwise need, as createComment does with the
//! post's `commentCount`). A module that imports them is refused at upload
//! (400, naming the import) by a host older than they are.

/// The import module every host function lives in.
pub const MODULE: &str = "partita_v1";

/// The memory a module must export.
pub const MEMORY_EXPORT: &str = "memory";

/// The entry point of a stored procedure: `() -> i32`.
pub const PROCEDURE_EXPORT: &str = "partita_procedure";

/// The entry point of a trigger: `() -> i32`.
pub const TRIGGER_EXPORT: &str = "partita_trigger";

/// The entry point of a user-defined function: `() -> i32`.
pub const UDF_EXPORT: &str = "partita_udf";

/// Returned instead of a length or status when the call is near its budget
/// and the operation was not performed.
pub const NOT_ACCEPTED: i32 = -1;

/// One host function of [`MODULE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Import {
    /// The function's name.
    pub name: &'static str,
    /// How many `i32` parameters it takes.
    pub params: usize,
    /// Whether it returns an `i32` (`log` and `fail` return nothing).
    pub returns: bool,
}

const fn import(name: &'static str, params: usize, returns: bool) -> Import {
    Import {
        name,
        params,
        returns,
    }
}

/// Every host function of [`MODULE`], with its signature. See the module
/// docs for what each does.
pub const IMPORTS: &[Import] = &[
    import("context", 2, true),
    import("params", 2, true),
    import("request_body", 2, true),
    import("set_request_body", 2, true),
    import("response_body", 2, true),
    import("set_response_body", 2, true),
    import("log", 2, false),
    import("read", 4, true),
    import("read_feed", 4, true),
    import("create", 6, true),
    import("replace", 8, true),
    import("upsert", 6, true),
    import("delete", 4, true),
    import("query", 4, true),
    import("take_result", 2, true),
    import("fail", 3, false),
    import("read_member", 6, true),
    import("replace_member", 10, true),
];

/// The import named `name`, if the ABI has one.
pub fn find_import(name: &str) -> Option<&'static Import> {
    IMPORTS.iter().find(|i| i.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_names_are_unique() {
        for (i, a) in IMPORTS.iter().enumerate() {
            assert!(IMPORTS[i + 1..].iter().all(|b| b.name != a.name), "{a:?}");
            assert_eq!(find_import(a.name), Some(a));
        }
        assert_eq!(find_import("fd_write"), None);
    }
}
