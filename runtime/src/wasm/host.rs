//! The host side of the `partita_v1` ABI: the state of one call and the
//! functions a guest imports (see `host_api::abi` for the contract).
//!
//! Every import goes through [`call`], which does what the ABI promises in
//! one place, in this order:
//!
//! 1. check every `(ptr, len)` and `(out_ptr, out_cap)` range against the
//!    memory, and trap on one that does not fit (a guest bug);
//! 2. drop the waiting result (unless this is `take_result`);
//! 3. charge fuel: [`HOST_CALL_FUEL`] plus one unit per input byte (output
//!    bytes are charged as they are written);
//! 4. for a collection operation, return `NOT_ACCEPTED` once the call is
//!    near its budget (fuel, operations, wall time), as JavaScript's
//!    bounded execution does;
//! 5. parse the inputs (bad UTF-8 or JSON is `-400`, never a trap) and run
//!    the operation on the `host_api::Collection`, the same call JavaScript
//!    makes; an error that ends the call (`HostError::ends_call`: a
//!    storage failure, 500 or 503, or a fatal abort such as the fuzzer's)
//!    stops it, and the guest cannot catch it;
//! 6. deliver the result into the output buffer, or keep it waiting.
//!
//! Host state lives in the store's `T` ([`HostState`]), never in closures.
//! The collection is a `&mut dyn Collection` borrowed for the call; wasmtime
//! requires `T: 'static`, so the state holds it as a raw pointer that
//! `run.rs` sets and that cannot outlive the borrow (see
//! [`HostState::new`]).

use std::ptr::NonNull;
use std::time::{Duration, Instant};

use host_api::abi::{self, NOT_ACCEPTED};
use host_api::strict::StrictError;
use host_api::{
    Collection, Document, ErrorCode, HostError, QueryRequest, TriggerOperation, WriteOptions,
};
use serde_json::{Map, Value};
use wasmtime::{Caller, Linker, Memory, ResourceLimiter};

/// Fuel charged for every host call, on top of one unit per byte crossing
/// the boundary (about what a few hundred guest instructions cost).
pub(crate) const HOST_CALL_FUEL: u64 = 1_000;

/// What the guest is running as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Procedure,
    PreTrigger,
    PostTrigger,
    Udf,
}

/// Why a host function stopped the call (the guest cannot catch it).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Stop {
    /// A pointer or length the guest passed is outside its memory.
    #[error("{0}")]
    Bounds(String),
    /// The guest called `fail`.
    #[error("the guest failed with {number}: {message}")]
    Fail { number: i32, message: String },
    /// The collection failed in a way guests must not handle.
    #[error(transparent)]
    Host(HostError),
    /// A host call's fuel did not fit in what was left.
    #[error("out of fuel in a host call")]
    OutOfFuel,
}

/// Caps a store's memories and tables, and remembers that it refused a
/// memory growth, so the error of a guest that traps afterwards can name the
/// limit.
pub(crate) struct GuestLimiter {
    pub(crate) max_memory: usize,
    pub(crate) memory_refused: bool,
}

impl ResourceLimiter for GuestLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let ok = desired <= self.max_memory && maximum.is_none_or(|m| desired <= m);
        self.memory_refused |= !ok;
        Ok(ok)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// The state of one call: its inputs, its outputs so far, its budget.
pub(crate) struct HostState {
    collection: Option<NonNull<dyn Collection>>,
    /// The guest's exported memory, set once instantiated.
    pub(crate) memory: Option<Memory>,
    pub(crate) limiter: GuestLimiter,
    pub(crate) role: Role,
    operation: Option<TriggerOperation>,
    params: Value,
    /// A trigger's request body.
    pub(crate) request_body: Value,
    /// A procedure's or UDF's body as set; a post-trigger's response body.
    pub(crate) response_body: Option<Value>,
    waiting: Option<Waiting>,
    /// The document the last collection operation read, when it was a
    /// `read_member` (its id and the document). A `replace_member` of the
    /// same id right after it (no other collection operation between, so
    /// the document cannot have changed) starts from it instead of reading
    /// the document again: read a member, then set it, is then the same
    /// collection operations as JavaScript's read and replace (the same
    /// request charge, the same points for the fuzzer's faults).
    member_read: Option<(Box<str>, Document)>,
    /// Where document results are serialized, kept from one host call to
    /// the next.
    scratch: Vec<u8>,
    pub(crate) logs: String,
    max_log_bytes: usize,
    operations: u64,
    max_operations: u64,
    fuel: u64,
    accept_fuel: u64,
    started: Instant,
    accept_wall_time: Duration,
}

/// The inputs of a call, by role.
pub(crate) struct Inputs {
    pub(crate) role: Role,
    pub(crate) operation: Option<TriggerOperation>,
    pub(crate) params: Value,
    pub(crate) request_body: Value,
    pub(crate) response_body: Option<Value>,
}

impl HostState {
    /// The state of a call that may use `collection` (`None` for a UDF).
    ///
    /// # Safety
    /// The returned state holds `collection` without its lifetime: the
    /// caller must drop the state (and the store owning it) before the
    /// borrow ends, and must not use `collection` while a guest call that
    /// may reach the state runs. `run.rs` creates the store, calls the guest
    /// and drops the store inside the function that holds the borrow.
    pub(crate) unsafe fn new(
        collection: Option<&mut dyn Collection>,
        inputs: Inputs,
        limits: &crate::Limits,
        started: Instant,
    ) -> HostState {
        let collection = collection.map(|c| {
            let ptr: NonNull<dyn Collection + '_> = NonNull::from(c);
            // SAFETY: only the trait object's lifetime bound changes (same
            // layout); the caller keeps the borrow alive as documented.
            unsafe {
                std::mem::transmute::<NonNull<dyn Collection + '_>, NonNull<dyn Collection>>(ptr)
            }
        });
        HostState {
            collection,
            memory: None,
            limiter: GuestLimiter {
                max_memory: limits.max_memory_bytes.min(super::sandbox::MAX_MEMORY),
                memory_refused: false,
            },
            role: inputs.role,
            operation: inputs.operation,
            params: inputs.params,
            request_body: inputs.request_body,
            response_body: inputs.response_body,
            waiting: None,
            member_read: None,
            scratch: Vec::new(),
            logs: String::new(),
            max_log_bytes: limits.max_log_bytes,
            operations: 0,
            max_operations: limits.max_operations,
            fuel: limits.fuel,
            accept_fuel: limits.accept_fuel,
            started,
            accept_wall_time: limits.accept_wall_time,
        }
    }

    fn collection(&mut self) -> Option<&mut dyn Collection> {
        // SAFETY: see `new`: the borrow outlives the state, and nothing else
        // uses the collection while the guest runs.
        self.collection.map(|mut ptr| unsafe { ptr.as_mut() })
    }

    /// Appends one line of log output, cut at the limit (as JavaScript's
    /// `console.log`).
    fn log(&mut self, line: &str) {
        crate::log::append(&mut self.logs, line, self.max_log_bytes);
    }

    /// Whether one more collection operation is accepted; counts it if so.
    fn accept(&mut self, fuel_left: u64) -> bool {
        let used = self.fuel.saturating_sub(fuel_left);
        let ok = self.operations < self.max_operations
            && used <= self.accept_fuel
            && self.started.elapsed() < self.accept_wall_time;
        self.operations += u64::from(ok);
        ok
    }

    fn context(&mut self) -> Value {
        let kind = match self.role {
            Role::Procedure => "procedure",
            Role::PreTrigger => "preTrigger",
            Role::PostTrigger => "postTrigger",
            Role::Udf => "udf",
        };
        let operation = self.operation.map(|o| Value::String(o.to_string()));
        let mut res = Map::new();
        res.insert("kind".into(), kind.into());
        res.insert("operation".into(), operation.unwrap_or(Value::Null));
        match self.collection() {
            Some(c) => {
                res.insert("containerId".into(), c.container_id().into());
                res.insert("selfLink".into(), c.self_link().into());
                res.insert("altLink".into(), c.alt_link().into());
                let pk = c.partition_key().to_json_array();
                let pk = serde_json::from_str(&pk).unwrap_or(Value::Null);
                res.insert("partitionKey".into(), pk);
            }
            None => {
                for key in ["containerId", "selfLink", "altLink"] {
                    res.insert(key.into(), "".into());
                }
                res.insert("partitionKey".into(), Value::Null);
            }
        }
        Value::Object(res)
    }
}

/// The imports, in `abi::IMPORTS` order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Import {
    Context,
    Params,
    RequestBody,
    SetRequestBody,
    ResponseBody,
    SetResponseBody,
    Log,
    Read,
    ReadFeed,
    Create,
    Replace,
    Upsert,
    Delete,
    Query,
    TakeResult,
    Fail,
    ReadMember,
    ReplaceMember,
}

impl Import {
    /// Indexes of the `(ptr, len)` input pairs and the `(out_ptr, out_cap)`
    /// pair among the arguments.
    fn layout(self) -> (&'static [usize], Option<usize>) {
        use Import::*;
        match self {
            Context | Params | RequestBody | ResponseBody | TakeResult => (&[], Some(0)),
            SetRequestBody | SetResponseBody | Log => (&[0], None),
            Read | ReadFeed | Query => (&[0], Some(2)),
            Create | Upsert => (&[0, 2], Some(4)),
            Replace => (&[0, 2, 4], Some(6)),
            Delete => (&[0, 2], None),
            Fail => (&[1], None),
            ReadMember => (&[0, 2], Some(4)),
            ReplaceMember => (&[0, 2, 4, 6], Some(8)),
        }
    }

    fn name(self) -> &'static str {
        abi::IMPORTS[self as usize].name
    }

    fn is_collection_op(self) -> bool {
        use Import::*;
        matches!(
            self,
            Read | ReadFeed
                | Create
                | Replace
                | Upsert
                | Delete
                | Query
                | ReadMember
                | ReplaceMember
        )
    }
}

/// What an operation produced.
enum Outcome {
    Bytes(Vec<u8>),
    /// A document, serialized only when the guest has room for it.
    Document(Document),
    Code(i32),
    Failed(HostError),
}

/// A result or error message waiting for `take_result`.
enum Waiting {
    Bytes(Vec<u8>),
    /// A document result and its serialized length: a guest that passed no
    /// output buffer (it wants only the status, as createComment.wat after a
    /// write) never has it serialized.
    Document(Document, usize),
}

impl Waiting {
    fn len(&self) -> usize {
        match self {
            Waiting::Bytes(bytes) => bytes.len(),
            Waiting::Document(_, len) => *len,
        }
    }
}

/// Registers every import of `partita_v1` on `linker`.
pub(crate) fn define(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use Import::*;
    macro_rules! wrap {
        ($import:expr, $($arg:ident),*) => {{
            let import = $import;
            debug_assert_eq!(abi::IMPORTS[import as usize].params, [$(stringify!($arg)),*].len());
            linker.func_wrap(
                abi::MODULE,
                import.name(),
                move |mut caller: Caller<'_, HostState>, $($arg: i32),*| -> wasmtime::Result<i32> {
                    call(&mut caller, import, &[$($arg),*])
                },
            )?;
        }};
    }
    wrap!(Context, a, b);
    wrap!(Params, a, b);
    wrap!(RequestBody, a, b);
    wrap!(SetRequestBody, a, b);
    wrap!(ResponseBody, a, b);
    wrap!(SetResponseBody, a, b);
    linker.func_wrap(
        abi::MODULE,
        Log.name(),
        |mut caller: Caller<'_, HostState>, a: i32, b: i32| -> wasmtime::Result<()> {
            call(&mut caller, Log, &[a, b]).map(drop)
        },
    )?;
    wrap!(Read, a, b, c, d);
    wrap!(ReadFeed, a, b, c, d);
    wrap!(Create, a, b, c, d, e, f);
    wrap!(Replace, a, b, c, d, e, f, g, h);
    wrap!(Upsert, a, b, c, d, e, f);
    wrap!(Delete, a, b, c, d);
    wrap!(Query, a, b, c, d);
    wrap!(TakeResult, a, b);
    linker.func_wrap(
        abi::MODULE,
        Fail.name(),
        |mut caller: Caller<'_, HostState>, a: i32, b: i32, c: i32| -> wasmtime::Result<()> {
            call(&mut caller, Fail, &[a, b, c]).map(drop)
        },
    )?;
    wrap!(ReadMember, a, b, c, d, e, f);
    wrap!(ReplaceMember, a, b, c, d, e, f, g, h, i, j);
    Ok(())
}

/// The guest range `ptr..ptr+len` (both read as unsigned), if it lies in a
/// memory of `size` bytes.
fn range(ptr: i32, len: i32, size: usize) -> Option<std::ops::Range<usize>> {
    let start = ptr as u32 as usize;
    let end = start.checked_add(len as u32 as usize)?;
    (end <= size).then_some(start..end)
}

/// Takes `n` units of fuel for host work, or stops the call when less is
/// left.
fn charge(caller: &mut Caller<'_, HostState>, n: u64) -> wasmtime::Result<u64> {
    let left = caller.get_fuel()?;
    if left < n {
        caller.set_fuel(0)?;
        return Err(Stop::OutOfFuel.into());
    }
    caller.set_fuel(left - n)?;
    Ok(left - n)
}

/// One import call; see the module docs for the steps.
fn call(caller: &mut Caller<'_, HostState>, import: Import, args: &[i32]) -> wasmtime::Result<i32> {
    let Some(memory) = caller.data().memory else {
        return Err(Stop::Bounds(format!(
            "{}.{} was called before the module finished instantiating (from a start \
             function); the host is available from the entry point on",
            abi::MODULE,
            import.name()
        ))
        .into());
    };
    let (ins, out) = import.layout();
    let size = memory.data_size(&*caller);
    let mut inputs: [std::ops::Range<usize>; 4] = Default::default();
    for (slot, &i) in inputs.iter_mut().zip(ins) {
        let Some(r) = range(args[i], args[i + 1], size) else {
            return Err(bounds(import, "input", args[i], args[i + 1], size));
        };
        *slot = r;
    }
    let inputs = &inputs[..ins.len()];
    let out = match out {
        Some(o) => match range(args[o], args[o + 1], size) {
            Some(r) => Some(r),
            None => return Err(bounds(import, "output", args[o], args[o + 1], size)),
        },
        None => None,
    };
    let in_bytes: usize = inputs.iter().map(ExactSizeIterator::len).sum();
    if import == Import::TakeResult {
        let out = out.expect("take_result has an output buffer");
        return take_result(caller, memory, out);
    }
    caller.data_mut().waiting = None;
    let fuel_left = charge(caller, HOST_CALL_FUEL + in_bytes as u64)?;
    // The inputs are read in place: the memory and the state are borrowed
    // together, and nothing the operation does can reach the guest memory.
    let (data, state) = memory.data_and_store_mut(&mut *caller);
    let mut bytes: [&[u8]; 4] = [&[]; 4];
    for (b, r) in bytes.iter_mut().zip(inputs) {
        *b = &data[r.clone()];
    }
    let inputs = &bytes[..inputs.len()];
    if import == Import::Fail {
        return Err(Stop::Fail {
            number: args[0],
            message: String::from_utf8_lossy(inputs[0]).into_owned(),
        }
        .into());
    }
    if import.is_collection_op() && state.role != Role::Udf && !state.accept(fuel_left) {
        return Ok(NOT_ACCEPTED);
    }
    let outcome = match perform(state, import, inputs) {
        Ok(outcome) => outcome,
        Err(e) if e.ends_call() => {
            return Err(Stop::Host(e).into());
        }
        Err(e) => Outcome::Failed(e),
    };
    match outcome {
        Outcome::Code(n) => Ok(n),
        Outcome::Failed(e) => {
            caller.data_mut().waiting = Some(Waiting::Bytes(e.message.into_bytes()));
            Ok(-i32::from(e.code.as_u16()))
        }
        Outcome::Bytes(bytes) => {
            let out = out.expect("every import that returns bytes has an output buffer");
            deliver(caller, memory, import, out, bytes, false)
        }
        Outcome::Document(doc) => {
            let out = out.expect("every import that returns bytes has an output buffer");
            if out.is_empty() {
                // Only the length is wanted now; serialized if taken.
                let len = host_api::json::serialized_len(doc.value());
                let Ok(r) = i32::try_from(len) else {
                    return Ok(over_2gb(caller, import));
                };
                caller.data_mut().waiting = Some(Waiting::Document(doc, len));
                return Ok(r);
            }
            let mut bytes = std::mem::take(&mut caller.data_mut().scratch);
            bytes.clear();
            serde_json::to_writer(&mut bytes, doc.value()).expect("JSON values serialize");
            deliver(caller, memory, import, out, bytes, true)
        }
    }
}

/// The status of a result too long for the ABI's `i32` length.
fn over_2gb(caller: &mut Caller<'_, HostState>, import: Import) -> i32 {
    let e = format!("{}: the result is over 2 GB", import.name());
    caller.data_mut().waiting = Some(Waiting::Bytes(e.into_bytes()));
    -413
}

/// Writes `bytes` into the guest's `out` buffer when they fit (charging
/// them), or keeps them waiting; returns their length. `scratch`: `bytes`
/// is the state's scratch buffer, given back when it is not kept.
fn deliver(
    caller: &mut Caller<'_, HostState>,
    memory: Memory,
    import: Import,
    out: std::ops::Range<usize>,
    bytes: Vec<u8>,
    scratch: bool,
) -> wasmtime::Result<i32> {
    let Ok(len) = i32::try_from(bytes.len()) else {
        return Ok(over_2gb(caller, import));
    };
    if bytes.len() <= out.len() {
        charge(caller, bytes.len() as u64)?;
        memory.data_mut(&mut *caller)[out.start..out.start + bytes.len()].copy_from_slice(&bytes);
        if scratch {
            caller.data_mut().scratch = bytes;
        }
    } else {
        caller.data_mut().waiting = Some(Waiting::Bytes(bytes));
    }
    Ok(len)
}

fn bounds(import: Import, what: &str, ptr: i32, len: i32, size: usize) -> wasmtime::Error {
    Stop::Bounds(format!(
        "{}.{}: the {what} range {}..{}+{} lies outside the guest memory of {size} bytes",
        abi::MODULE,
        import.name(),
        ptr as u32,
        ptr as u32,
        len as u32
    ))
    .into()
}

fn take_result(
    caller: &mut Caller<'_, HostState>,
    memory: Memory,
    out: std::ops::Range<usize>,
) -> wasmtime::Result<i32> {
    charge(caller, HOST_CALL_FUEL)?;
    let Some(waiting) = caller.data_mut().waiting.take() else {
        return Ok(0);
    };
    // The length fitted in an i32 when the result was kept.
    let len = waiting.len() as i32;
    if waiting.len() > out.len() {
        caller.data_mut().waiting = Some(waiting);
        return Ok(len);
    }
    let bytes = match waiting {
        Waiting::Bytes(bytes) => bytes,
        Waiting::Document(doc, _) => to_bytes(doc.value()),
    };
    charge(caller, bytes.len() as u64)?;
    memory.data_mut(&mut *caller)[out.start..out.start + bytes.len()].copy_from_slice(&bytes);
    Ok(len)
}

fn bad(message: String) -> HostError {
    HostError::new(ErrorCode::BAD_REQUEST, message)
}

fn utf8<'a>(import: Import, what: &str, bytes: &'a [u8]) -> Result<&'a str, HostError> {
    std::str::from_utf8(bytes)
        .map_err(|e| bad(format!("{}: the {what} is not UTF-8 ({e})", import.name())))
}

fn json(import: Import, what: &str, bytes: &[u8]) -> Result<Value, HostError> {
    parse_json(import, what, bytes, 0)
}

/// A document to write: parsed with room for what the engine adds (an id,
/// perhaps, and the five system properties).
fn document(import: Import, bytes: &[u8]) -> Result<Value, HostError> {
    parse_json(import, "document", bytes, 6)
}

fn parse_json(import: Import, what: &str, bytes: &[u8], room: usize) -> Result<Value, HostError> {
    super::json::parse(bytes, room).map_err(|e| match e {
        StrictError::Syntax(e) => bad(format!(
            "{}: the {what} is not valid JSON ({e})",
            import.name()
        )),
        StrictError::Duplicate { .. } => bad(format!("{}: the {what}: {e}", import.name())),
    })
}

/// The options object at `bytes` (empty: none).
fn options(import: Import, bytes: &[u8]) -> Result<Map<String, Value>, HostError> {
    if bytes.is_empty() {
        return Ok(Map::new());
    }
    match json(import, "options object", bytes)? {
        Value::Object(map) => Ok(map),
        other => Err(bad(format!(
            "{}: the options must be a JSON object, not {other}",
            import.name()
        ))),
    }
}

fn etag<'a>(import: Import, opts: &'a Map<String, Value>) -> Result<WriteOptions<'a>, HostError> {
    match opts.get("etag") {
        None | Some(Value::Null) => Ok(WriteOptions::default()),
        Some(Value::String(s)) => Ok(WriteOptions { if_match: Some(s) }),
        Some(other) => Err(bad(format!(
            "{}: the \"etag\" option must be a string, not {other}",
            import.name()
        ))),
    }
}

fn page_size(import: Import, opts: &Map<String, Value>) -> Result<usize, HostError> {
    match opts.get("pageSize") {
        None | Some(Value::Null) => Ok(100),
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => Err(bad(format!(
                "{}: \"pageSize\" must be a positive integer, not {v}",
                import.name()
            ))),
        },
    }
}

fn continuation(import: Import, opts: &Map<String, Value>) -> Result<Option<&str>, HostError> {
    match opts.get("continuation") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(bad(format!(
            "{}: \"continuation\" must be a string, not {other}",
            import.name()
        ))),
    }
}

/// A document to create or upsert, with an id generated unless disabled.
fn new_document(import: Import, doc: &[u8], opts: &Map<String, Value>) -> Result<Value, HostError> {
    let mut doc = document(import, doc)?;
    let disabled = match opts.get("disableAutomaticIdGeneration") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(bad(format!(
                "{}: \"disableAutomaticIdGeneration\" must be a boolean, not {other}",
                import.name()
            )));
        }
    };
    let needs_id = match doc.get("id") {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    };
    if !disabled
        && needs_id
        && let Value::Object(map) = &mut doc
    {
        map.insert("id".into(), Value::String(crate::js::generate_id()));
    }
    Ok(doc)
}

fn page(page: host_api::Page) -> Vec<u8> {
    let mut res = Map::new();
    res.insert("items".into(), Value::Array(page.items));
    res.insert(
        "continuation".into(),
        page.continuation.map_or(Value::Null, Value::String),
    );
    to_bytes(&Value::Object(res))
}

fn to_bytes(value: &Value) -> Vec<u8> {
    // Room for a typical document up front, rather than growing from 128
    // bytes by doubling.
    let mut bytes = Vec::with_capacity(1024);
    serde_json::to_writer(&mut bytes, value).expect("JSON values serialize");
    bytes
}

/// Runs one import (all but `take_result`) on the state.
fn perform(state: &mut HostState, import: Import, inputs: &[&[u8]]) -> Result<Outcome, HostError> {
    use Import::*;
    let name = import.name();
    let role = state.role;
    let only = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(bad(format!("{name}: {what}")))
        }
    };
    Ok(match import {
        Context => Outcome::Bytes(to_bytes(&state.context())),
        Params => Outcome::Bytes(to_bytes(&state.params)),
        RequestBody => {
            only(
                matches!(role, Role::PreTrigger | Role::PostTrigger),
                "only a trigger has a request body",
            )?;
            Outcome::Bytes(to_bytes(&state.request_body))
        }
        SetRequestBody => {
            only(
                role == Role::PreTrigger,
                "only a pre-trigger can change the request body",
            )?;
            state.request_body = json(import, "body", inputs[0])?;
            Outcome::Code(0)
        }
        ResponseBody => {
            only(
                matches!(role, Role::Procedure | Role::PostTrigger),
                "only a procedure or a post-trigger has a response body",
            )?;
            let empty = Value::String(String::new());
            Outcome::Bytes(to_bytes(state.response_body.as_ref().unwrap_or(&empty)))
        }
        SetResponseBody => {
            only(
                role != Role::PreTrigger,
                "a pre-trigger has no response body",
            )?;
            state.response_body = Some(json(import, "body", inputs[0])?);
            Outcome::Code(0)
        }
        Log => {
            state.log(&String::from_utf8_lossy(inputs[0]));
            Outcome::Code(0)
        }
        TakeResult | Fail => unreachable!("`call` answers take_result and fail itself"),
        Read | ReadFeed | Create | Replace | Upsert | Delete | Query | ReadMember
        | ReplaceMember => {
            // Every collection operation ends what `read_member` kept.
            let kept = state.member_read.take();
            let Some(collection) = state.collection() else {
                return Err(bad(format!(
                    "{name}: a user-defined function has no collection"
                )));
            };
            match import {
                ReadMember => {
                    let (outcome, read) = read_member(collection, import, inputs)?;
                    state.member_read = Some(read);
                    outcome
                }
                ReplaceMember => replace_member(collection, import, inputs, kept)?,
                _ => collection_op(collection, import, inputs)?,
            }
        }
    })
}

/// `read_member`: the member's JSON text (empty when absent), and the
/// document read, for a `replace_member` that follows.
fn read_member(
    collection: &mut dyn Collection,
    import: Import,
    inputs: &[&[u8]],
) -> Result<(Outcome, (Box<str>, Document)), HostError> {
    let id = utf8(import, "id", inputs[0])?;
    let key = utf8(import, "key", inputs[1])?;
    let doc = collection.read(id)?;
    // An absent member is empty text (no JSON value is).
    let text = doc.value().get(key).map_or_else(Vec::new, |member| {
        serde_json::to_vec(member).expect("JSON values serialize")
    });
    Ok((Outcome::Bytes(text), (id.into(), doc)))
}

/// `replace_member`: the stored document (`kept` when a `read_member` of
/// the same id just read it) with one member set, replaced.
fn replace_member(
    collection: &mut dyn Collection,
    import: Import,
    inputs: &[&[u8]],
    kept: Option<(Box<str>, Document)>,
) -> Result<Outcome, HostError> {
    let id = utf8(import, "id", inputs[0])?;
    let key = utf8(import, "key", inputs[1])?;
    let value = json(import, "value", inputs[2])?;
    let opts = options(import, inputs[3])?;
    let write = etag(import, &opts)?;
    let current = match kept {
        Some((kept_id, doc)) if *kept_id == *id => doc,
        _ => collection.read(id)?,
    };
    // The stored document copied (its map's table is copied, not rebuilt
    // key by key as parsing its text would be), then what `doc[key] =
    // value` does in JavaScript.
    let mut doc = current.value().clone();
    drop(current);
    let Value::Object(members) = &mut doc else {
        return Err(HostError::new(
            ErrorCode::INTERNAL,
            format!(
                "{}: the stored document {id:?} is not an object",
                import.name()
            ),
        ));
    };
    members.insert(key.to_owned(), value);
    Ok(Outcome::Document(collection.replace(id, doc, write)?))
}

fn collection_op(
    collection: &mut dyn Collection,
    import: Import,
    inputs: &[&[u8]],
) -> Result<Outcome, HostError> {
    use Import::*;
    Ok(match import {
        Read => {
            let id = utf8(import, "id", inputs[0])?;
            Outcome::Document(collection.read(id)?)
        }
        ReadFeed => {
            let opts = options(import, inputs[0])?;
            let size = page_size(import, &opts)?;
            let token = continuation(import, &opts)?;
            Outcome::Bytes(page(collection.read_feed(Some(size), token)?))
        }
        Create => {
            let opts = options(import, inputs[1])?;
            let doc = new_document(import, inputs[0], &opts)?;
            Outcome::Document(collection.create(doc)?)
        }
        Upsert => {
            let opts = options(import, inputs[1])?;
            let doc = new_document(import, inputs[0], &opts)?;
            let write = etag(import, &opts)?;
            Outcome::Document(collection.upsert(doc, write)?)
        }
        Replace => {
            let id = utf8(import, "id", inputs[0])?;
            let doc = document(import, inputs[1])?;
            let opts = options(import, inputs[2])?;
            let write = etag(import, &opts)?;
            Outcome::Document(collection.replace(id, doc, write)?)
        }
        Delete => {
            let id = utf8(import, "id", inputs[0])?;
            let opts = options(import, inputs[1])?;
            collection.delete(id, etag(import, &opts)?)?;
            Outcome::Code(0)
        }
        Query => {
            let request = match json(import, "query request", inputs[0])? {
                Value::Object(map) => map,
                other => {
                    return Err(bad(format!(
                        "query: the request must be a JSON object, not {other}"
                    )));
                }
            };
            let Some(sql) = request.get("query").and_then(Value::as_str) else {
                return Err(bad("query: the request needs a \"query\" string".to_owned()));
            };
            let mut parameters = Map::new();
            match request.get("parameters") {
                None | Some(Value::Null) => {}
                Some(Value::Array(list)) => {
                    for p in list {
                        let name = p.get("name").and_then(Value::as_str);
                        let Some(name) = name else {
                            return Err(bad(format!(
                                "query: each parameter must be {{\"name\": string, \"value\": any}}, not {p}"
                            )));
                        };
                        let value = p.get("value").cloned().unwrap_or(Value::Null);
                        parameters.insert(name.to_owned(), value);
                    }
                }
                Some(other) => {
                    return Err(bad(format!(
                        "query: \"parameters\" must be an array, not {other}"
                    )));
                }
            }
            let size = page_size(import, &request)?;
            let token = continuation(import, &request)?;
            Outcome::Bytes(page(collection.query(QueryRequest {
                sql,
                parameters: &parameters,
                page_size: Some(size),
                continuation: token,
            })?))
        }
        _ => unreachable!("collection_op gets collection operations only"),
    })
}
