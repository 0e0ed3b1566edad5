//! One call: set up the call state, run the script's function, drain the
//! queue of operations and promise jobs, collect the output.
//!
//! ```text
//!   f(...params) ─► microtasks ─► op 1 ─► callback 1 ─► microtasks ─► op 2 ─► … ─► queue empty ─► Ok
//!        any uncaught throw, abort(), unhandled op error or bound ─────────────────────────────► Err
//! ```
//!
//! Operations run in the order they were accepted, each after the turn
//! that queued it, against the `&mut dyn Collection` this module owns.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::time::Instant;

use boa_engine::builtins::function::OrdinaryFunction;
use boa_engine::builtins::object::OrdinaryObject;
use boa_engine::error::EngineError;
use boa_engine::error::RuntimeLimitError;
use boa_engine::object::builtins::JsArray;
use boa_engine::{Context, JsError, JsObject, JsResult, JsString, JsValue, js_string};
use host_api::{Collection, ErrorCode, HostError, QueryRequest, WriteOptions};
use serde_json::Value;

use super::convert::{StdString, from_json};
use super::host::{self, Body, CallState, Fault, Kind, Op, Origin, Pending};
use super::sandbox::{self, Sandbox};
use crate::{Budget, Error, Failure, Invocation, Limits, Output, Script, Statistics};

/// Stack a call needs free; with less, it runs on the thread's spare.
pub(crate) const RED_ZONE: usize = 4 << 20;

/// Size of the stack it then needs (the spare's, `stack::SPARE_SIZE`).
const STACK_SIZE: usize = 16 << 20;

/// Runs one script call; see [`crate::run_js`]. Runs on a stack with at
/// least [`RED_ZONE`] bytes free: the thread's own, or the thread's spare
/// on threads with less (2 MB by default for spawned threads; see
/// [`crate::stack::with_room`]).
#[allow(clippy::result_large_err)] // The shape of `run_js`; see lib.rs.
pub(crate) fn run(
    script: &Script<'_>,
    invocation: Invocation,
    collection: &mut dyn Collection,
    limits: &Limits,
) -> Result<Output, Failure> {
    crate::stack::with_room(RED_ZONE, STACK_SIZE, || {
        let res = in_sandbox(limits, |sandbox| {
            call(sandbox, script, invocation, &mut *collection, limits)
        });
        match res {
            Ok((body, logs, mut stats)) => {
                stats = stats.with_documents(collection.stats());
                Ok(Output { body, logs, stats })
            }
            Err(mut failure) => {
                failure.stats = failure.stats.with_documents(collection.stats());
                Err(failure)
            }
        }
    })
}

/// Runs one call of a user-defined function; see [`crate::run_udf`].
#[allow(clippy::result_large_err)] // The shape of `run_udf`; see lib.rs.
pub(crate) fn run_udf(
    udf: &Script<'_>,
    args: &[Option<Value>],
    limits: &Limits,
) -> Result<Option<Value>, Failure> {
    crate::stack::with_room(RED_ZONE, STACK_SIZE, || {
        in_sandbox(limits, |sandbox| call_udf(sandbox, udf, args, limits))
            .map(|(value, _, _)| value)
    })
}

/// Takes a sandbox, runs `f` in it (catching panics), resets the sandbox,
/// applies the instruction budget and gives the sandbox back unless the
/// call hit a bound or failed internally. The stats have no collection
/// part: the caller adds it.
#[allow(clippy::result_large_err)]
fn in_sandbox<T>(
    limits: &Limits,
    f: impl FnOnce(&mut Sandbox) -> Result<T, Error>,
) -> Result<(T, String, Statistics), Failure> {
    let started = Instant::now();
    let mut sandbox = match sandbox::take(limits) {
        Ok(s) => s,
        Err(e) => {
            return Err(Failure {
                error: Error::Internal(e),
                logs: String::new(),
                stats: Statistics {
                    wall_time: started.elapsed(),
                    ..Statistics::default()
                },
            });
        }
    };
    let res = catch_unwind(AssertUnwindSafe(|| f(&mut sandbox)));
    let res = match res {
        Ok(res) => res,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_owned());
            // The context may be in any state: never touch it again.
            let logs = std::mem::take(&mut sandbox.host.borrow_mut().logs);
            std::mem::forget(sandbox);
            return Err(Failure {
                error: Error::Internal(format!("the script engine panicked: {message}")),
                logs,
                stats: Statistics {
                    wall_time: started.elapsed(),
                    ..Statistics::default()
                },
            });
        }
    };
    let (instructions, logs) = finish(&mut sandbox);
    let stats = Statistics {
        instructions,
        fuel: 0,
        wall_time: started.elapsed(),
        ..Statistics::default()
    };
    let res = match res {
        Ok(value) if instructions > limits.instructions => {
            drop(value);
            Err(Error::Budget(Budget::Instructions {
                limit: limits.instructions,
            }))
        }
        other => other,
    };
    match res {
        Ok(value) => {
            sandbox::give_back(sandbox);
            Ok((value, logs, stats))
        }
        Err(error) => {
            // A host error ends the call between turns, with the context
            // in a clean state (as after a throw); only bounds and internal
            // failures leave it suspect.
            if !matches!(
                error,
                Error::Script { .. } | Error::Compile(_) | Error::Host(_)
            ) {
                sandbox.poisoned = true;
            }
            sandbox::give_back(sandbox);
            Err(Failure { error, logs, stats })
        }
    }
}

/// Resets the sandbox after a call; returns the instructions used and logs.
fn finish(sandbox: &mut Sandbox) -> (u64, String) {
    sandbox.jobs.clear();
    let (used, logs) = {
        let mut s = sandbox.host.borrow_mut();
        let used = s.used(&sandbox.context);
        s.active = false;
        s.queue.clear();
        s.fault = None;
        s.request = Body::Json(Value::Null);
        s.response = None;
        s.last_result = None;
        (used, std::mem::take(&mut s.logs))
    };
    sandbox.clean_globals();
    (used, logs)
}

/// Arms the call state with the bounds of `limits` for a call of `kind`.
fn begin(sandbox: &mut Sandbox, kind: Kind, limits: &Limits) {
    {
        let mut s = sandbox.host.borrow_mut();
        let s: &mut CallState = &mut s;
        s.active = true;
        s.kind = kind;
        s.instructions = limits.instructions;
        s.recursion = limits.recursion;
        s.accept_instructions = limits.accept_instructions;
        s.max_operations = limits.max_operations;
        s.started = Instant::now();
        s.wall_time = limits.wall_time;
        s.accept_wall_time = limits.accept_wall_time;
        s.start_remaining = sandbox.context.instructions_remaining();
        s.ops_accepted = 0;
        s.extra_instructions = 0;
        s.logs.clear();
        s.max_log_bytes = limits.max_log_bytes;
        s.mem_used = 0;
        s.join_depth = 0;
        s.max_memory = limits.max_memory_bytes;
        s.fault = None;
    }
    sandbox
        .context
        .runtime_limits_mut()
        .set_recursion_limit(limits.recursion);
}

/// Calls the script's function: re-creates it from the cached wrapper (so
/// no state survives from an earlier call) and applies it to `args`.
fn apply(
    sandbox: &mut Sandbox,
    script: &Script<'_>,
    udf: bool,
    args: &[JsValue],
) -> Result<JsValue, Error> {
    let wrapper = sandbox
        .compiled(udf, script.id, script.version, script.body)
        .map_err(Error::Compile)?;
    let context = &mut sandbox.context;
    let function = wrapper
        .call(&JsValue::undefined(), &[], context)
        .map_err(|e| classify(e, &sandbox.host, context))?;
    let Some(function) = function.as_callable() else {
        return Err(Error::Compile(
            "the script does not evaluate to a function".to_owned(),
        ));
    };
    function
        .call(&JsValue::undefined(), args, context)
        .map_err(|e| classify(e, &sandbox.host, context))
}

fn call_udf(
    sandbox: &mut Sandbox,
    udf: &Script<'_>,
    args: &[Option<Value>],
    limits: &Limits,
) -> Result<Option<Value>, Error> {
    begin(sandbox, Kind::Udf, limits);
    let js_args: Vec<JsValue> = args
        .iter()
        .map(|a| match a {
            Some(v) => from_json(v, &mut sandbox.context),
            None => JsValue::undefined(),
        })
        .collect();
    let result = apply(sandbox, udf, true, &js_args)?;
    // Promise jobs a function queued are dropped, not run: its value is
    // what it returned.
    check(sandbox)?;
    let context = &mut sandbox.context;
    host::value_to_json(&result, "the function's result", context)
        .map_err(|e| classify(e, &sandbox.host, context))
}

fn call(
    sandbox: &mut Sandbox,
    script: &Script<'_>,
    invocation: Invocation,
    collection: &mut dyn Collection,
    limits: &Limits,
) -> Result<Option<Value>, Error> {
    let (kind, request, response, operation) = match invocation {
        Invocation::Procedure { params } => (
            Kind::Procedure,
            Value::Array(params),
            Some(Value::String(String::new())),
            None,
        ),
        Invocation::PreTrigger {
            request_body,
            operation,
        } => (Kind::Pre, request_body, None, Some(operation)),
        Invocation::PostTrigger {
            request_body,
            response_body,
            operation,
        } => (
            Kind::Post,
            request_body,
            Some(response_body),
            Some(operation),
        ),
    };
    // A procedure's parameters are its arguments and, as an array, its
    // request body: converted from there, not cloned.
    let args: Vec<JsValue> = match (kind, &request) {
        (Kind::Procedure, Value::Array(params)) => params
            .iter()
            .map(|p| from_json(p, &mut sandbox.context))
            .collect(),
        _ => Vec::new(),
    };
    begin(sandbox, kind, limits);
    {
        let mut s = sandbox.host.borrow_mut();
        s.operation = operation;
        s.set_links(collection.self_link(), collection.alt_link());
        s.request = Body::Json(request);
        s.response = response.map(Body::Json);
    }
    apply(sandbox, script, false, &args)?;
    drain(sandbox, collection)?;

    // Collect the body the caller gets.
    let body = {
        let mut s = sandbox.host.borrow_mut();
        match kind {
            Kind::Pre => std::mem::replace(&mut s.request, Body::Json(Value::Null)),
            _ => s.response.take().unwrap_or(Body::Json(Value::Null)),
        }
    };
    match body {
        Body::Json(v) => Ok(Some(v)),
        Body::Js(v) => {
            let context = &mut sandbox.context;
            host::body_to_json(&v, "the response body", context)
                .map_err(|e| classify(e, &sandbox.host, context))
        }
    }
}

/// Instructions charged per promise job: resolving and reacting is native
/// work the counter does not see, so a script that only chains promises
/// would otherwise run for long on a small count.
const JOB_INSTRUCTIONS: u64 = 50;

/// Runs promise jobs and queued operations until both are empty.
fn drain(sandbox: &mut Sandbox, collection: &mut dyn Collection) -> Result<(), Error> {
    loop {
        while let Some(job) = sandbox.jobs.pop() {
            sandbox.host.borrow_mut().extra_instructions += JOB_INSTRUCTIONS;
            let context = &mut sandbox.context;
            job.call(context)
                .map_err(|e| classify(e, &sandbox.host, context))?;
            check(sandbox)?;
        }
        check(sandbox)?;
        let (next, unobserved) = {
            let mut s = sandbox.host.borrow_mut();
            let next = s.queue.pop_front();
            // The call's last act: no callback, no other operation queued
            // (and no promise job: the loop above ran them all), and a
            // body that is plain JSON, so no getter can run script code
            // after it.
            let last = next.as_ref().is_some_and(|p| p.callback.is_none())
                && s.queue.is_empty()
                && s.body_is_json();
            (next, last)
        };
        let Some(pending) = next else { return Ok(()) };
        let seen = if unobserved {
            Seen::Nothing
        } else if pending.op.is_write()
            && pending
                .callback
                .as_ref()
                .is_some_and(|c| sees_only_error(c, &sandbox.host, &mut sandbox.context))
        {
            Seen::OnlyError
        } else {
            Seen::Everything
        };
        let _seen = SeenMark::set(seen);
        perform(sandbox, collection, pending)?;
    }
}

/// How much of an operation's outcome script code can see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Its result goes to a callback that may read all of it.
    Everything,
    /// Its callback declares at most the error parameter and cannot reach
    /// the others (see [`sees_only_error`]): only whether it failed, and
    /// how, is seen.
    OnlyError,
    /// It is the call's last act and has no callback: only its failure
    /// matters, and that fails the call as [`unhandled`] says.
    Nothing,
}

thread_local! {
    static SEEN: Cell<Seen> = const { Cell::new(Seen::Everything) };
}

/// How much script code can see of the operation being performed on this
/// thread. A script worker uses it to send an operation without waiting
/// for its reply (see `worker::child`).
pub(crate) fn seen() -> Seen {
    SEEN.get()
}

/// Sets [`seen`] for one operation; reset on drop, also when the
/// operation panics.
struct SeenMark;

impl SeenMark {
    fn set(seen: Seen) -> SeenMark {
        SEEN.set(seen);
        SeenMark
    }
}

impl Drop for SeenMark {
    fn drop(&mut self) {
        SEEN.set(Seen::Everything);
    }
}

/// Whether `callback` can only ever see its first argument, the error: an
/// ordinary function whose source text declares no parameter or one plain
/// name (`function (err) {…}`, `err => …`, `() => …`) and mentions
/// neither `arguments` nor `eval` anywhere (so no default value, rest
/// parameter, destructuring, `arguments` object or direct eval can reach
/// the others). Conservative: anything else, native and bound functions
/// and proxies included, counts as seeing everything. Known answers are
/// kept by code block ([`host::OnlyError`]).
fn sees_only_error(
    callback: &JsObject,
    host: &Rc<RefCell<CallState>>,
    context: &mut Context,
) -> bool {
    let code = code_block(callback);
    if let Some(only) = code.and_then(|code| host.borrow().only_error.get(code)) {
        return only;
    }
    let to_string = host.borrow().shared().function_to_string.clone();
    let Ok(text) = to_string.call(&callback.clone().into(), &[], context) else {
        return false;
    };
    let Some(text) = text.as_string().map(|t| t.to_std()) else {
        return false;
    };
    let only = declares_only_error(&text);
    if let Some(code) = code {
        host.borrow_mut()
            .only_error
            .insert(code, callback.clone(), only);
    }
    only
}

/// The address of `f`'s code block when it is an ordinary function (one
/// compiled from script text: not native, bound or a proxy).
fn code_block(f: &JsObject) -> Option<usize> {
    let f = f.downcast_ref::<OrdinaryFunction>()?;
    Some(std::ptr::from_ref(f.codeblock()) as usize)
}

/// [`sees_only_error`] on a function's source text. Built-in functions,
/// bound functions and proxies show `[native code]` as their body.
fn declares_only_error(text: &str) -> bool {
    one_plain_parameter(text)
        && !text.contains("arguments")
        && !text.contains("eval")
        && !text.contains("[native code]")
}

/// Whether a function's source text starts with a head that declares at
/// most one parameter, a plain ASCII identifier.
fn one_plain_parameter(text: &str) -> bool {
    fn skip_space(s: &str) -> &str {
        s.trim_start_matches([' ', '\t', '\n', '\r'])
    }
    fn identifier(s: &str) -> Option<(&str, &str)> {
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(s.len());
        let (name, rest) = s.split_at(end);
        let first = name.chars().next()?;
        (!first.is_ascii_digit()).then_some((name, rest))
    }
    /// `( name? )`, returning what follows.
    fn parameters(s: &str) -> Option<&str> {
        let s = skip_space(s.strip_prefix('(')?);
        let s = match identifier(s) {
            Some((_, rest)) => skip_space(rest),
            None => s,
        };
        s.strip_prefix(')')
    }
    let text = skip_space(text);
    if let Some(rest) = text.strip_prefix("function") {
        // `function (e)` or `function name(e)`, not `function*`.
        let rest = skip_space(rest);
        let rest = match identifier(rest) {
            Some((_, after)) if rest.starts_with(|c: char| c != '(') => skip_space(after),
            _ => rest,
        };
        return parameters(rest).is_some();
    }
    let after = match parameters(text) {
        Some(after) => after,
        None => match identifier(text) {
            Some((name, after)) if name != "async" => after,
            _ => return false,
        },
    };
    skip_space(after).starts_with("=>")
}

/// How an operation's error fails the call when no callback handles it.
pub(crate) fn unhandled(e: HostError) -> Error {
    if e.ends_call() {
        // Storage failures and fatal host errors: the script never sees
        // them, so it cannot catch them.
        return Error::Host(e);
    }
    // Without a callback the error is thrown in the completion context:
    // nothing can catch it.
    Error::Script {
        message: e.message,
        number: e.code.as_u16(),
        stack: None,
    }
}

/// Fails the call when a native recorded a fault or a bound is exceeded.
fn check(sandbox: &mut Sandbox) -> Result<(), Error> {
    let mut s = sandbox.host.borrow_mut();
    if s.check(&sandbox.context).is_err() || s.fault.is_some() {
        drop(s);
        return Err(classify(
            host::uncatchable(),
            &sandbox.host,
            &mut sandbox.context,
        ));
    }
    Ok(())
}

/// The result of an operation, before it is turned into callback arguments.
enum Done {
    Doc(host_api::Document),
    Deleted,
    Page(host_api::Page),
    Items(JsValue, Option<String>),
}

fn write_options(if_match: Option<&String>) -> WriteOptions<'_> {
    WriteOptions {
        if_match: if_match.map(String::as_str),
    }
}

fn perform(
    sandbox: &mut Sandbox,
    collection: &mut dyn Collection,
    pending: Pending,
) -> Result<(), Error> {
    let Pending { op, callback } = pending;
    // The operation is consumed: its documents move into the collection.
    let res: Result<Done, HostError> = match op {
        Op::Create { doc } => collection.create(doc).map(Done::Doc),
        Op::Upsert { doc, if_match } => collection
            .upsert(doc, write_options(if_match.as_ref()))
            .map(Done::Doc),
        Op::Replace {
            link,
            doc,
            if_match,
        } => collection
            .resolve_document_link(&link)
            .and_then(|id| collection.replace(&id, doc, write_options(if_match.as_ref())))
            .map(Done::Doc),
        Op::Read { link } => collection
            .resolve_document_link(&link)
            .and_then(|id| collection.read(&id))
            .map(Done::Doc),
        Op::Delete { link, if_match } => collection
            .resolve_document_link(&link)
            .and_then(|id| collection.delete(&id, write_options(if_match.as_ref())))
            .map(|()| Done::Deleted),
        Op::ReadFeed {
            page_size,
            continuation,
        } => collection
            .read_feed(Some(page_size), continuation.as_deref())
            .map(Done::Page),
        Op::Query {
            sql,
            parameters,
            page_size,
            continuation,
        } => collection
            .query(QueryRequest {
                sql: &sql,
                parameters: &parameters,
                page_size: Some(page_size),
                continuation: continuation.as_deref(),
            })
            .map(Done::Page),
        Op::Fluent {
            stages,
            page_size,
            continuation,
        } => fluent(
            sandbox,
            collection,
            &stages,
            page_size,
            continuation.as_deref(),
        )?,
    };
    let host = sandbox.host.clone();
    let context = &mut sandbox.context;
    let undefined = JsValue::undefined();
    let done = match res {
        Ok(done) => done,
        Err(e) if e.ends_call() => return Err(unhandled(e)),
        Err(e) => {
            let Some(callback) = callback else {
                return Err(unhandled(e));
            };
            let err = host::make_error(context, e.code.as_u16(), &e.message)
                .map_err(|x| classify(x, &host, context))?;
            let options = plain_object(context);
            callback
                .call(
                    &undefined,
                    &[err, undefined.clone(), options.into()],
                    context,
                )
                .map_err(|x| classify(x, &host, context))?;
            return Ok(());
        }
    };
    let Some(callback) = callback else {
        return Ok(());
    };
    let args = if seen() == Seen::OnlyError {
        // The callback cannot reach the result: skip converting it.
        vec![undefined.clone()]
    } else {
        callback_args(done, context).map_err(|x| classify(x, &host, context))?
    };
    callback
        .call(&undefined, &args, context)
        .map_err(|x| classify(x, &host, context))?;
    Ok(())
}

/// A new empty object on `Object.prototype`, as `{}` makes: on a shared
/// shape (`with_object_proto` gives each object a unique shape, a second
/// allocation on the collected heap), for the options objects every
/// callback gets.
fn plain_object(context: &Context) -> JsObject {
    JsObject::new(
        context.root_shape(),
        context.intrinsics().constructors().object().prototype(),
        OrdinaryObject,
    )
    .upcast()
}

fn feed_options(continuation: Option<String>, context: &mut Context) -> JsResult<JsValue> {
    let options = plain_object(context);
    let continuation = match continuation {
        Some(c) => JsValue::from(JsString::from(c.as_str())),
        None => JsValue::undefined(),
    };
    options.set(js_string!("continuation"), continuation, false, context)?;
    Ok(options.into())
}

fn callback_args(done: Done, context: &mut Context) -> JsResult<Vec<JsValue>> {
    let undefined = JsValue::undefined();
    Ok(match done {
        Done::Doc(doc) => {
            let js = from_json(doc.value(), context);
            remember(&js, Origin::Doc(doc), context);
            vec![undefined, js, plain_object(context).into()]
        }
        Done::Deleted => vec![undefined, plain_object(context).into()],
        Done::Page(page) => {
            let items = Value::Array(page.items);
            let js = from_json(&items, context);
            remember(&js, Origin::Items(items), context);
            vec![undefined, js, feed_options(page.continuation, context)?]
        }
        Done::Items(items, continuation) => {
            vec![undefined, items, feed_options(continuation, context)?]
        }
    })
}

/// Keeps `origin`, the JSON `js` was built from, as the last result handed
/// to a callback (see [`host::body_to_json`]); only the last is kept.
fn remember(js: &JsValue, origin: Origin, context: &Context) {
    if let Some(obj) = js.as_object() {
        host::state(context).borrow_mut().last_result = Some((obj, origin));
    }
}

/// Runs a fluent query (`__.filter(...)`): the stages are JavaScript, so
/// they run here over the partition's documents (read through the feed,
/// which sees the call's own writes), then the result is paged.
fn fluent(
    sandbox: &mut Sandbox,
    collection: &mut dyn Collection,
    stages: &JsValue,
    page_size: usize,
    continuation: Option<&str>,
) -> Result<Result<Done, HostError>, Error> {
    let offset = match continuation.map(str::parse::<usize>) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            return Ok(Err(HostError::new(
                ErrorCode::BAD_REQUEST,
                "Invalid continuation token.",
            )));
        }
    };
    let mut items = Vec::new();
    let mut next: Option<String> = None;
    loop {
        match collection.read_feed(Some(1000), next.as_deref()) {
            Ok(page) => {
                items.extend(page.items);
                match page.continuation {
                    Some(c) => next = Some(c),
                    None => break,
                }
            }
            Err(e) => return Ok(Err(e)),
        }
    }
    let host = sandbox.host.clone();
    let context = &mut sandbox.context;
    let run = |context: &mut Context| -> JsResult<(JsValue, Option<String>)> {
        let docs = from_json(&Value::Array(items), context);
        let result =
            sandbox
                .apply_stages
                .call(&JsValue::undefined(), &[docs, stages.clone()], context)?;
        let Some(array) = result
            .as_object()
            .and_then(|o| JsArray::from_object(o).ok())
        else {
            return Ok((JsArray::new(context)?.into(), None));
        };
        let len = usize::try_from(array.length(context)?).unwrap_or(usize::MAX);
        let end = offset.saturating_add(page_size).min(len);
        let page = array.slice(
            Some(u32::try_from(offset.min(len)).unwrap_or(u32::MAX)),
            Some(u32::try_from(end).unwrap_or(u32::MAX)),
            context,
        )?;
        let next = (end < len).then(|| end.to_string());
        Ok((page.into(), next))
    };
    let (page, next) = run(context).map_err(|e| classify(e, &host, context))?;
    Ok(Ok(Done::Items(page, next)))
}

/// Turns an error that unwound the script into the call's [`Error`].
fn classify(
    err: JsError,
    host: &std::rc::Rc<std::cell::RefCell<CallState>>,
    context: &mut Context,
) -> Error {
    let (fault, instructions, recursion) = {
        let mut s = host.borrow_mut();
        (s.fault.take(), s.instructions, s.recursion)
    };
    match fault {
        Some(Fault::Budget(budget)) => return Error::Budget(budget),
        Some(Fault::Abort(value)) => return script_error(&value, context),
        None => {}
    }
    if let Some(engine) = err.as_engine() {
        return match engine {
            EngineError::NoInstructionsRemain
            | EngineError::RuntimeLimit(RuntimeLimitError::LoopIteration) => {
                Error::Budget(Budget::Instructions {
                    limit: instructions,
                })
            }
            EngineError::RuntimeLimit(
                RuntimeLimitError::Recursion | RuntimeLimitError::StackSize,
            ) => Error::Budget(Budget::Recursion { limit: recursion }),
            EngineError::Panic(p) => Error::Internal(p.to_string()),
        };
    }
    match err.into_opaque(context) {
        Ok(value) => script_error(&value, context),
        Err(e) => Error::Internal(e.to_string()),
    }
}

/// A thrown value as a script error: its `number` and `message` when it is
/// an object, its string form otherwise.
fn script_error(value: &JsValue, context: &mut Context) -> Error {
    let Some(obj) = value.as_object() else {
        let message = value
            .to_string(context)
            .map_or_else(|_| "exception".to_owned(), |s| s.to_std_string_escaped());
        return Error::Script {
            message,
            number: 0,
            stack: None,
        };
    };
    let number = obj
        .get(js_string!("number"), context)
        .ok()
        .and_then(|v| v.as_number())
        .filter(|n| n.fract() == 0.0 && (0.0..=65535.0).contains(n))
        .map_or(0, |n| {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let n = n as u16;
            n
        });
    let message = obj
        .get(js_string!("message"), context)
        .ok()
        .filter(|v| !v.is_undefined())
        .and_then(|v| v.to_string(context).ok())
        .map(|s| s.to_std_string_escaped());
    let message = match message {
        Some(m) => m,
        None => match host::value_to_json(value, "the thrown value", context) {
            Ok(Some(json)) => json.to_string(),
            _ => "exception".to_owned(),
        },
    };
    let stack = obj
        .get(js_string!("stack"), context)
        .ok()
        .and_then(|v| v.as_string())
        .map(|s| s.to_std_string_escaped())
        .filter(|s| !s.is_empty());
    Error::Script {
        message,
        number,
        stack,
    }
}

#[cfg(test)]
mod tests {
    use boa_engine::{JsValue, Source};

    use super::{declares_only_error, sandbox, sees_only_error};
    use crate::Limits;

    /// The answers kept by code block are those the source text gives:
    /// closures of one function expression share an entry, and functions
    /// with other code, native and bound ones never take another's answer.
    #[test]
    fn answers_are_kept_by_code_block() {
        let mut sandbox = sandbox::take(&Limits::default()).expect("sandbox");
        let mut eval = |source: &str| {
            sandbox
                .context
                .eval(Source::from_bytes(source.as_bytes()))
                .expect(source)
        };
        let factory = eval(
            "(function () { return [function (err) { if (err) throw err; }, function (err, doc) { return doc; }, (err) => err, Math.max, (function (err) {}).bind(null)]; })",
        );
        let factory = factory.as_callable().expect("a function");
        let host = sandbox.host.clone();
        for _ in 0..2 {
            let made = factory
                .call(&JsValue::undefined(), &[], &mut sandbox.context)
                .expect("closures");
            let made = made.as_object().expect("an array");
            for (i, only) in [true, false, true, false, false].into_iter().enumerate() {
                let f = made.get(i, &mut sandbox.context).expect("a closure");
                let f = f.as_callable().expect("a function");
                assert_eq!(
                    sees_only_error(&f, &host, &mut sandbox.context),
                    only,
                    "{i}"
                );
            }
        }
        // One entry per function expression, none for native or bound ones.
        assert_eq!(host.borrow().only_error.len(), 3);
    }

    #[test]
    fn a_head_with_at_most_one_plain_parameter_is_recognized() {
        for text in [
            "function (err) { if (err) throw err; }",
            "function(err){}",
            "function named (e) {}",
            "function () {}",
            "  function\n(\terr\n) {}",
            "err => { throw err; }",
            "(err) => 1",
            "() => 1",
            "( $e_1 )=>1",
        ] {
            assert!(declares_only_error(text), "{text}");
        }
    }

    #[test]
    fn anything_that_could_reach_a_second_argument_is_not() {
        for text in [
            "function (err, doc) {}",
            "function (err = 1) {}",
            "function (...rest) {}",
            "function ({ message }) {}",
            "function ([first]) {}",
            "function* (err) {}",
            "async function (err) {}",
            "async err => 1",
            "async (err) => 1",
            "(err, doc) => 1",
            "(...args) => 1",
            "method(err) {}",
            "function max() { [native code] }",
            "function () { [native code] }",
            "function (err) { return arguments[1]; }",
            "err => eval('arguments')",
            "class { }",
            "function (/* doc */ err) {}",
            "function (é) {}",
            "1 => 1",
        ] {
            assert!(!declares_only_error(text), "{text}");
        }
    }
}
