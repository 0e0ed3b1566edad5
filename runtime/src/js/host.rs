//! The per-call host state and the native functions scripts call:
//! `getContext()`, the collection methods, request and response, `console`.
//!
//! Native functions never touch the collection. A collection method checks
//! its arguments, converts the document (so bodies are captured at call
//! time, as in Cosmos DB), decides whether the operation is accepted, and
//! queues a [`Pending`] operation with its callback; `run.rs`, which owns the
//! `&mut dyn Collection`, performs queued operations in order after the
//! current turn and calls their callbacks.
//!
//! Every native begins with [`checkpoint`], which stops the script (with an
//! error JavaScript cannot catch) once it is over its instruction budget or
//! wall-clock deadline, or after a fault such as `getContext().abort()`.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::rc::Rc;
use std::time::{Duration, Instant};

use boa_engine::error::PanicError;
use boa_engine::string::JsStrVariant;
use boa_engine::value::JsVariant;
use boa_engine::{Context, JsError, JsObject, JsResult, JsString, JsValue, js_string};
use host_api::TriggerOperation;
use serde_json::{Map, Value};

use super::convert::{self, ConvertError, StdString};
use crate::Budget;

/// What kind of script the current call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A stored procedure.
    Procedure = 0,
    /// A pre-trigger (no response).
    Pre = 1,
    /// A post-trigger.
    Post = 2,
    /// A user-defined function: no `getContext()`, no `__`, no collection.
    Udf = 3,
}

/// A request or response body: JSON until the script first reads it.
pub(crate) enum Body {
    /// Not read yet.
    Json(Value),
    /// Read or set by the script; converted back after the call.
    Js(JsValue),
}

/// Why a native function stopped the script.
pub(crate) enum Fault {
    /// A bound was exceeded.
    Budget(Budget),
    /// `getContext().abort(err)`.
    Abort(JsValue),
}

/// An operation a script queued.
pub(crate) enum Op {
    Create {
        doc: Value,
    },
    Upsert {
        doc: Value,
        if_match: Option<String>,
    },
    Replace {
        link: String,
        doc: Value,
        if_match: Option<String>,
    },
    Read {
        link: String,
    },
    Delete {
        link: String,
        if_match: Option<String>,
    },
    ReadFeed {
        page_size: usize,
        continuation: Option<String>,
    },
    Query {
        sql: String,
        parameters: Map<String, Value>,
        page_size: usize,
        continuation: Option<String>,
    },
    Fluent {
        stages: JsValue,
        page_size: usize,
        continuation: Option<String>,
    },
}

impl Op {
    /// Whether it creates, replaces or deletes a document.
    pub(crate) fn is_write(&self) -> bool {
        matches!(
            self,
            Op::Create { .. } | Op::Upsert { .. } | Op::Replace { .. } | Op::Delete { .. }
        )
    }
}

/// A queued operation and the callback to run with its result.
pub(crate) struct Pending {
    pub(crate) op: Op,
    pub(crate) callback: Option<JsObject>,
}

/// Objects built once per context and reused by every call.
pub(crate) struct Shared {
    /// The original `Function.prototype.toString`, to read a callback's
    /// source text (see `run::sees_only_error`).
    pub(crate) function_to_string: JsObject,
    /// The JScript-style `Error` constructor (prelude.js).
    pub(crate) error_ctor: JsObject,
    /// `getContext()` for a procedure, a pre-trigger and a post-trigger.
    pub(crate) contexts: [JsObject; 3],
    /// `__` for each kind.
    pub(crate) unders: [JsObject; 3],
}

/// The state of the call in progress (and the context's shared objects).
pub(crate) struct CallState {
    pub(crate) shared: Option<Shared>,
    pub(crate) active: bool,
    pub(crate) kind: Kind,
    pub(crate) operation: Option<TriggerOperation>,
    /// The collection's links, and the same as JavaScript strings: the
    /// text changes only with the collection, so `getSelfLink()` and
    /// `getAltLink()` hand out one string made once, not a new one per
    /// call (see [`CallState::set_links`]).
    self_link: Link,
    alt_link: Link,
    pub(crate) instructions: u64,
    pub(crate) recursion: usize,
    pub(crate) accept_instructions: u64,
    pub(crate) max_operations: u64,
    pub(crate) started: Instant,
    pub(crate) wall_time: Duration,
    pub(crate) accept_wall_time: Duration,
    pub(crate) start_remaining: usize,
    /// Instructions charged for work the counter does not see (promise
    /// jobs, whose machinery is native).
    pub(crate) extra_instructions: u64,
    pub(crate) ops_accepted: u64,
    pub(crate) queue: VecDeque<Pending>,
    pub(crate) logs: String,
    pub(crate) max_log_bytes: usize,
    pub(crate) mem_used: usize,
    /// How deeply `Array.prototype.join` is re-entered (guards.rs).
    pub(crate) join_depth: usize,
    pub(crate) max_memory: usize,
    pub(crate) fault: Option<Fault>,
    pub(crate) request: Body,
    pub(crate) response: Option<Body>,
    /// The value last handed to a callback as an operation's result, with
    /// the JSON it was built from (see [`body_to_json`]).
    pub(crate) last_result: Option<(JsObject, Origin)>,
    /// What `run::sees_only_error` found for callbacks' code so far.
    pub(crate) only_error: OnlyError,
}

/// What `run::sees_only_error` found for ordinary functions, by code
/// block: a function's source text, and so the answer, depends on its
/// code block alone, which the closures a function expression makes call
/// after call all share. Reading the text each time (through
/// `Function.prototype.toString`, a UTF-16 string, then a `String`) cost
/// about 1,500 instructions and three allocations per write with a
/// callback.
///
/// Each entry keeps the function it was found for, which keeps the code
/// block alive, so its address cannot be reused by other code while the
/// entry lives. The function is only held, never handed to a script.
#[derive(Default)]
pub(crate) struct OnlyError {
    entries: Vec<(usize, JsObject, bool)>,
}

impl OnlyError {
    /// Entries kept; emptied when full.
    const MAX: usize = 32;

    /// The answer found for the code block at `code`.
    pub(crate) fn get(&self, code: usize) -> Option<bool> {
        self.entries
            .iter()
            .find(|(c, _, _)| *c == code)
            .map(|(_, _, only)| *only)
    }

    /// Keeps `only`, found for `function`, whose code block is at `code`.
    pub(crate) fn insert(&mut self, code: usize, function: JsObject, only: bool) {
        if self.entries.len() == Self::MAX {
            self.entries.clear();
        }
        self.entries.push((code, function, only));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The JSON a callback's result was built from.
pub(crate) enum Origin {
    /// A page of query or feed results.
    Items(Value),
    /// A document read or written.
    Doc(host_api::Document),
}

impl Origin {
    fn value(&self) -> &Value {
        match self {
            Origin::Items(v) => v,
            Origin::Doc(doc) => doc.value(),
        }
    }

    fn into_value(self) -> Value {
        match self {
            Origin::Items(v) => v,
            Origin::Doc(doc) => doc.into_value(),
        }
    }
}

impl CallState {
    /// Whether the body the call returns is still the JSON it came as,
    /// so turning it into the output runs no script code.
    pub(crate) fn body_is_json(&self) -> bool {
        match self.kind {
            Kind::Pre => matches!(self.request, Body::Json(_)),
            _ => !matches!(self.response, Some(Body::Js(_))),
        }
    }

    pub(crate) fn new() -> CallState {
        CallState {
            shared: None,
            active: false,
            kind: Kind::Procedure,
            operation: None,
            self_link: Link::default(),
            alt_link: Link::default(),
            instructions: u64::MAX,
            recursion: 0,
            accept_instructions: u64::MAX,
            max_operations: u64::MAX,
            started: Instant::now(),
            wall_time: Duration::MAX,
            accept_wall_time: Duration::MAX,
            start_remaining: 0,
            extra_instructions: 0,
            ops_accepted: 0,
            queue: VecDeque::new(),
            logs: String::new(),
            max_log_bytes: 0,
            mem_used: 0,
            join_depth: 0,
            max_memory: usize::MAX,
            fault: None,
            request: Body::Json(Value::Null),
            response: None,
            last_result: None,
            only_error: OnlyError::default(),
        }
    }

    /// Instructions the call has executed so far.
    pub(crate) fn used(&self, context: &Context) -> u64 {
        self.start_remaining
            .saturating_sub(context.instructions_remaining()) as u64
    }

    /// Records `fault` and returns the error that unwinds the script.
    pub(crate) fn stop(&mut self, fault: Fault) -> JsError {
        if self.fault.is_none() {
            self.fault = Some(fault);
        }
        uncatchable()
    }

    /// Checks the hard bounds; see the module docs.
    pub(crate) fn check(&mut self, context: &Context) -> JsResult<()> {
        if !self.active {
            return Ok(());
        }
        if self.fault.is_some() {
            return Err(uncatchable());
        }
        if self.used(context) > self.instructions {
            return Err(self.stop(Fault::Budget(Budget::Instructions {
                limit: self.instructions,
            })));
        }
        if self.started.elapsed() > self.wall_time {
            return Err(self.stop(Fault::Budget(Budget::WallTime {
                limit: self.wall_time,
            })));
        }
        Ok(())
    }

    /// Counts `bytes` against the memory limit of the call.
    pub(crate) fn charge(&mut self, bytes: usize, what: &str) -> JsResult<()> {
        if !self.active {
            return Ok(());
        }
        self.mem_used = self.mem_used.saturating_add(bytes);
        if bytes > self.max_memory || self.mem_used > self.max_memory {
            let limit = self.max_memory;
            return Err(self.stop(Fault::Budget(Budget::Memory {
                limit,
                what: what.to_owned(),
            })));
        }
        Ok(())
    }

    /// Appends one line of log output, cut at the limit.
    pub(crate) fn log(&mut self, line: &str) {
        crate::log::append(&mut self.logs, line, self.max_log_bytes);
    }

    fn accepts(&self, context: &Context) -> bool {
        self.fault.is_none()
            && self.kind != Kind::Udf
            && self.ops_accepted < self.max_operations
            && self.used(context) < self.accept_instructions
            && self.started.elapsed() < self.accept_wall_time
    }

    pub(crate) fn shared(&self) -> &Shared {
        self.shared
            .as_ref()
            .expect("shared objects are installed before any call")
    }
}

/// A collection link, as text and as a JavaScript string.
#[derive(Default)]
struct Link {
    text: String,
    js: Option<JsString>,
}

impl Link {
    /// Takes `text`, keeping the JavaScript string when it is the same.
    fn set(&mut self, text: String) {
        if text != self.text {
            self.text = text;
            self.js = None;
        }
    }

    fn js(&mut self) -> JsString {
        self.js
            .get_or_insert_with(|| JsString::from(self.text.as_str()))
            .clone()
    }
}

impl CallState {
    /// Sets the links of the call's collection.
    pub(crate) fn set_links(&mut self, self_link: String, alt_link: String) {
        self.self_link.set(self_link);
        self.alt_link.set(alt_link);
    }
}

/// The handle stored in the context (`Context::insert_data`).
pub(crate) struct Host(pub(crate) Rc<RefCell<CallState>>);

/// The current call's state.
pub(crate) fn state(context: &Context) -> Rc<RefCell<CallState>> {
    context
        .get_data::<Host>()
        .expect("host state is installed when the context is built")
        .0
        .clone()
}

/// The error that unwinds a script without giving it a chance to catch it.
pub(crate) fn uncatchable() -> JsError {
    PanicError::new("partita: script stopped").into()
}

/// Checks the hard bounds of the current call (see [`CallState::check`]).
pub(crate) fn checkpoint(context: &Context) -> JsResult<()> {
    state(context).borrow_mut().check(context)
}

/// Creates a JScript-style error object: `new Error(number, message)`.
pub(crate) fn make_error(context: &mut Context, number: u16, message: &str) -> JsResult<JsValue> {
    let ctor = state(context).borrow().shared().error_ctor.clone();
    let message = JsValue::from(JsString::from(message));
    let err = ctor.construct(&[JsValue::from(number), message.clone()], None, context)?;
    err.set(js_string!("body"), message, false, context)?;
    Ok(err.into())
}

/// `Err` with a thrown `new Error(number, message)`.
pub(crate) fn throw<T>(context: &mut Context, number: u16, message: &str) -> JsResult<T> {
    let err = make_error(context, number, message)?;
    Err(JsError::from_opaque(err))
}

impl CallState {
    /// The bytes a conversion may still spend.
    fn memory_left(&self) -> usize {
        if self.active {
            self.max_memory.saturating_sub(self.mem_used)
        } else {
            usize::MAX
        }
    }
}

/// Converts the body a call returns, as [`value_to_json`] does. When the
/// body is the value last handed to a callback as an operation's result,
/// still as it was built ([`convert::unchanged`]), it is the JSON it was
/// built from, and is returned as is, charged as the conversion would be:
/// a script that returns the documents a query gave it (`setBody(docs)`)
/// pays for converting them in, not again for converting them back.
pub(crate) fn body_to_json(
    value: &JsValue,
    what: &str,
    context: &mut Context,
) -> JsResult<Option<Value>> {
    let st = state(context);
    let last = st.borrow_mut().last_result.take();
    if let Some((obj, origin)) = last
        && value
            .as_object()
            .is_some_and(|o| JsObject::equals(&o, &obj))
        && let Some(spent) = convert::unchanged(value, origin.value(), context)
        && spent <= st.borrow().memory_left()
    {
        st.borrow_mut().charge(spent, what)?;
        return Ok(Some(origin.into_value()));
    }
    value_to_json(value, what, context)
}

/// Converts a script value to JSON for the host, charging the conversion to
/// the call's memory budget.
pub(crate) fn value_to_json(
    value: &JsValue,
    what: &str,
    context: &mut Context,
) -> JsResult<Option<Value>> {
    let st = state(context);
    let mut budget = st.borrow().memory_left();
    let start = budget;
    let res = convert::to_json(value, &mut budget, context);
    let mut s = st.borrow_mut();
    match res {
        Ok(v) => {
            s.charge(start - budget, what)?;
            Ok(v)
        }
        Err(ConvertError::Js(err)) => Err(err),
        Err(ConvertError::TooLarge) => {
            let limit = s.max_memory;
            Err(s.stop(Fault::Budget(Budget::Memory {
                limit,
                what: what.to_owned(),
            })))
        }
        Err(ConvertError::TooDeep) => {
            drop(s);
            throw(
                context,
                400,
                "Converting a cyclic structure or one nested deeper than 128 levels to JSON",
            )
        }
    }
}

/// Renders a value for `console.log`: strings as they are, objects as JSON.
fn display(value: &JsValue, context: &mut Context) -> JsResult<String> {
    match value.variant() {
        JsVariant::String(s) => Ok(s.to_std()),
        JsVariant::Object(obj) if !obj.is_callable() => {
            Ok(match value_to_json(value, "console.log", context)? {
                Some(json) => json.to_string(),
                None => "undefined".to_owned(),
            })
        }
        _ => Ok(value.to_string(context)?.to_std()),
    }
}

// ---------------------------------------------------------------------------
// Globals: getContext(), __, console.log.

pub(crate) fn get_context(_: &JsValue, _: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    checkpoint(context)?;
    let st = state(context);
    let s = st.borrow();
    if s.kind == Kind::Udf {
        drop(s);
        return throw(
            context,
            400,
            "getContext() is not available in user-defined functions: they compute a value from their arguments and cannot access the collection, request or response.",
        );
    }
    Ok(s.shared().contexts[s.kind as usize].clone().into())
}

/// The `__` getter: the collection of the current procedure or trigger;
/// `undefined` in a user-defined function.
pub(crate) fn get_under(_: &JsValue, _: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let st = state(context);
    let s = st.borrow();
    if s.kind == Kind::Udf {
        return Ok(JsValue::undefined());
    }
    Ok(s.shared().unders[s.kind as usize].clone().into())
}

pub(crate) fn console_log(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    checkpoint(context)?;
    let Some(first) = args.first() else {
        return throw(
            context,
            400,
            "The function \"log\" requires at least 1 argument(s) but was called with 0 argument(s).",
        );
    };
    let line = if let Some(fmt) = first.as_string() {
        let fmt = fmt.to_std();
        let mut out = String::with_capacity(fmt.len());
        let mut rest = args[1..].iter();
        let mut chars = fmt.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '%' {
                match chars.peek() {
                    Some('s') => {
                        chars.next();
                        match rest.next() {
                            Some(v) => out.push_str(&display(v, context)?),
                            None => out.push_str("%s"),
                        }
                        continue;
                    }
                    Some('%') => {
                        chars.next();
                        out.push('%');
                        continue;
                    }
                    _ => {}
                }
            }
            out.push(c);
        }
        for v in rest {
            out.push(' ');
            out.push_str(&display(v, context)?);
        }
        out
    } else if args.len() > 1 {
        return throw(
            context,
            400,
            "First argument to console.log should be a string containing zero or more substitution strings.",
        );
    } else {
        display(first, context)?
    };
    let st = state(context);
    let mut s = st.borrow_mut();
    s.charge(line.len(), "console.log")?;
    s.log(&line);
    Ok(JsValue::undefined())
}

// ---------------------------------------------------------------------------
// Context: getCollection, getRequest, getResponse, abort.

pub(crate) fn context_abort(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let err = args.first().cloned().unwrap_or_default();
    let err = if err.is_undefined() {
        make_error(context, 0, "The script called getContext().abort().")?
    } else {
        err
    };
    Err(state(context).borrow_mut().stop(Fault::Abort(err)))
}

// ---------------------------------------------------------------------------
// Request and response: Cosmos DB's generated property-map accessors.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Request,
    Response,
}

fn writable(kind: Kind, side: Side) -> bool {
    match side {
        Side::Request => kind == Kind::Pre,
        Side::Response => kind != Kind::Pre,
    }
}

fn body_get(side: Side, context: &mut Context) -> JsResult<JsValue> {
    checkpoint(context)?;
    let st = state(context);
    let json = {
        let mut s = st.borrow_mut();
        let slot = match side {
            Side::Request => &mut s.request,
            Side::Response => match s.response.as_mut() {
                Some(slot) => slot,
                None => return Ok(JsValue::undefined()),
            },
        };
        match slot {
            Body::Js(v) => return Ok(v.clone()),
            Body::Json(json) => std::mem::take(json),
        }
    };
    let value = convert::from_json(&json, context);
    let mut s = st.borrow_mut();
    let slot = match side {
        Side::Request => &mut s.request,
        Side::Response => s.response.as_mut().expect("checked above"),
    };
    *slot = Body::Js(value.clone());
    Ok(value)
}

fn body_set(
    side: Side,
    name: &JsValue,
    value: JsValue,
    append: bool,
    context: &mut Context,
) -> JsResult<JsValue> {
    checkpoint(context)?;
    let name = name.to_string(context)?.to_std();
    let kind = state(context).borrow().kind;
    if name != "Body" {
        return throw(context, 400, &format!("Cannot set new values: {name}"));
    }
    if !writable(kind, side) {
        return throw(context, 403, &format!("Not a writable property: {name}"));
    }
    let value = if append {
        let current = body_get(side, context)?;
        if let Some(s) = current.as_string() {
            let appended = value.to_string(context)?;
            state(context)
                .borrow_mut()
                .charge((s.len() + appended.len()) * 2, "appendBody")?;
            JsValue::from(js_string!(&s, &appended))
        } else if current.is_null_or_undefined() {
            value
        } else {
            current.add(&value, context)?
        }
    } else {
        value
    };
    let st = state(context);
    let mut s = st.borrow_mut();
    match side {
        Side::Request => s.request = Body::Js(value),
        Side::Response => s.response = Some(Body::Js(value)),
    }
    Ok(JsValue::undefined())
}

fn get_value(side: Side, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let name = args
        .first()
        .cloned()
        .unwrap_or_default()
        .to_string(context)?
        .to_std();
    match name.as_str() {
        "Body" => body_get(side, context),
        "OperationType" if side == Side::Request => operation_type(context),
        _ => Ok(JsValue::undefined()),
    }
}

fn operation_type(context: &mut Context) -> JsResult<JsValue> {
    let op = state(context).borrow().operation;
    Ok(match op {
        Some(op) => JsValue::from(JsString::from(op.to_string().as_str())),
        None => JsValue::undefined(),
    })
}

fn arg(args: &[JsValue], i: usize) -> JsValue {
    args.get(i).cloned().unwrap_or_default()
}

pub(crate) fn request_get_body(
    _: &JsValue,
    _: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    body_get(Side::Request, context)
}
pub(crate) fn request_set_body(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    body_set(
        Side::Request,
        &js_string!("Body").into(),
        arg(args, 0),
        false,
        context,
    )
}
pub(crate) fn request_append_body(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    body_set(
        Side::Request,
        &js_string!("Body").into(),
        arg(args, 0),
        true,
        context,
    )
}
pub(crate) fn request_get_value(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    get_value(Side::Request, args, context)
}
pub(crate) fn request_set_value(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    body_set(Side::Request, &arg(args, 0), arg(args, 1), false, context)
}
pub(crate) fn request_append_value(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    body_set(Side::Request, &arg(args, 0), arg(args, 1), true, context)
}
pub(crate) fn request_operation_type(
    _: &JsValue,
    _: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    operation_type(context)
}
pub(crate) fn response_get_body(
    _: &JsValue,
    _: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    body_get(Side::Response, context)
}
pub(crate) fn response_set_body(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    body_set(
        Side::Response,
        &js_string!("Body").into(),
        arg(args, 0),
        false,
        context,
    )
}
pub(crate) fn response_append_body(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    body_set(
        Side::Response,
        &js_string!("Body").into(),
        arg(args, 0),
        true,
        context,
    )
}
pub(crate) fn response_get_value(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    get_value(Side::Response, args, context)
}
pub(crate) fn response_set_value(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    body_set(Side::Response, &arg(args, 0), arg(args, 1), false, context)
}
pub(crate) fn response_append_value(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    body_set(Side::Response, &arg(args, 0), arg(args, 1), true, context)
}

// ---------------------------------------------------------------------------
// Collection methods.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Create,
    Upsert,
    Replace,
    Read,
    Delete,
    ReadFeed,
    Query,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Create => "createDocument",
            Method::Upsert => "upsertDocument",
            Method::Replace => "replaceDocument",
            Method::Read => "readDocument",
            Method::Delete => "deleteDocument",
            Method::ReadFeed => "readDocuments",
            Method::Query => "queryDocuments",
        }
    }

    fn required(self) -> usize {
        match self {
            Method::Create | Method::Upsert | Method::Replace | Method::Query => 2,
            Method::Read | Method::Delete | Method::ReadFeed => 1,
        }
    }
}

/// The options scripts may pass; unknown keys are ignored.
#[derive(Default)]
struct Options {
    etag: Option<String>,
    page_size: Option<usize>,
    continuation: Option<String>,
    disable_id_generation: bool,
}

fn read_options(value: &JsValue, context: &mut Context) -> JsResult<Options> {
    let mut res = Options::default();
    let Some(obj) = value.as_object() else {
        return Ok(res);
    };
    let etag = obj.get(js_string!("etag"), context)?;
    if !etag.is_null_or_undefined() {
        res.etag = Some(etag.to_string(context)?.to_std());
    }
    let page_size = obj.get(js_string!("pageSize"), context)?;
    if let Some(n) = page_size.as_number()
        && n >= 1.0
    {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let n = n.min(1_000_000.0) as usize;
        res.page_size = Some(n);
    }
    let continuation = obj.get(js_string!("continuation"), context)?;
    if let Some(s) = continuation.as_string()
        && !s.is_empty()
    {
        res.continuation = Some(s.to_std());
    }
    res.disable_id_generation = obj
        .get(js_string!("disableAutomaticIdGeneration"), context)?
        .to_boolean();
    Ok(res)
}

/// Splits `[options][, callback]` the way Cosmos DB's wrapper does.
pub(crate) fn options_and_callback(
    args: &[JsValue],
    from: usize,
    context: &mut Context,
) -> JsResult<(JsValue, Option<JsObject>)> {
    let mut options = arg(args, from);
    let mut callback = arg(args, from + 1);
    if options.is_callable() {
        callback = options;
        options = JsValue::undefined();
    }
    if !options.is_undefined() && !options.is_object() && !options.is_null() {
        let actual = options.type_of();
        return throw(
            context,
            400,
            &format!(
                "The \"options\" parameter must be of type \"object\". Actual type is: \"{actual}\"."
            ),
        );
    }
    let callback = if callback.is_undefined() {
        None
    } else if let Some(f) = callback.as_callable() {
        Some(f)
    } else {
        let actual = callback.type_of();
        return throw(
            context,
            400,
            &format!(
                "The \"callback\" parameter must be of type \"function\". Actual type is: \"{actual}\"."
            ),
        );
    };
    Ok((options, callback))
}

/// Whether two links name the same resource: the same segments, ignoring
/// empty ones, with resource types (even positions) compared without
/// case. Compares as it splits, allocating nothing, after the common
/// case: the link `getSelfLink()` gave, unchanged.
fn same_link(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let mut a = a.split('/').filter(|s| !s.is_empty());
    let mut b = b.split('/').filter(|s| !s.is_empty());
    let mut i = 0;
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) if i % 2 == 0 && x.eq_ignore_ascii_case(y) => {}
            (Some(x), Some(y)) if i % 2 == 1 && x == y => {}
            _ => return false,
        }
        i += 1;
    }
}

/// A document link argument, as text; or with `collection`, checks that a
/// collection link names the call's collection and returns an empty
/// string (operations on the collection do not keep its link).
fn link_arg(value: &JsValue, collection: bool, context: &mut Context) -> JsResult<String> {
    let what = if collection { "collection" } else { "document" };
    let Some(s) = value.as_string() else {
        let shown = value.to_string(context)?.to_std();
        return throw(context, 400, &format!("Invalid {what} link: \"{shown}\"."));
    };
    if !collection {
        return Ok(s.to_std());
    }
    // Read in place when it is ASCII, as links are.
    let owned;
    let link = match s.variant() {
        JsStrVariant::Latin1(bytes) if bytes.is_ascii() => {
            std::str::from_utf8(bytes).expect("ASCII is UTF-8")
        }
        _ => {
            owned = s.to_std();
            owned.as_str()
        }
    };
    let ok = {
        let st = state(context);
        let s = st.borrow();
        same_link(link, &s.self_link.text) || same_link(link, &s.alt_link.text)
    };
    if !ok {
        return throw(
            context,
            400,
            &format!(
                "Function is not allowed to operate on resources outside current collection. Make sure that the link provided, \"{link}\", belongs to current collection."
            ),
        );
    }
    Ok(String::new())
}

fn document_body(value: &JsValue, what: &str, context: &mut Context) -> JsResult<Value> {
    if let Some(s) = value.as_string() {
        let text = s.to_std();
        return match serde_json::from_str::<Value>(&text) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => throw(
                context,
                400,
                "The document body must be an object or a string representing a JSON-serialized object.",
            ),
        };
    }
    if !value.is_object() || value.is_callable() {
        return throw(
            context,
            400,
            "The document body must be an object or a string representing a JSON-serialized object.",
        );
    }
    match value_to_json(value, what, context)? {
        Some(v) => Ok(v),
        None => throw(
            context,
            400,
            "The document body must be an object or a string representing a JSON-serialized object.",
        ),
    }
}

thread_local! {
    static RNG: std::cell::Cell<u64> = std::cell::Cell::new({
        let mut h = RandomState::new().build_hasher();
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        h.finish() | 1
    });
}

fn next_random() -> u64 {
    // splitmix64.
    RNG.with(|state| {
        let mut z = state.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        state.set(z);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

/// Restarts this thread's id generator at `seed`; see
/// [`crate::seed_generated_ids`].
pub(crate) fn seed_ids(seed: u64) {
    RNG.with(|state| state.set(seed));
}

/// This thread's id generator's state, for a worker process to continue
/// from (the worker's `seed_ids`).
pub(crate) fn ids_state() -> u64 {
    RNG.with(std::cell::Cell::get)
}

/// Moves this thread's id generator to an unrelated point of its sequence
/// (a hash of its state), past the ids a worker generated from
/// [`ids_state`]: a jump, not a step, so the two sequences never overlap
/// in practice.
pub(crate) fn skip_ids() {
    RNG.with(|state| {
        let mut z = state.get() ^ 0x5851_F42D_4C95_7F2D;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        state.set(z ^ (z >> 31));
    });
}

/// A random lowercase-hex GUID, as Cosmos DB's wrapper generates.
pub(crate) fn generate_id() -> String {
    let (a, b) = (next_random(), next_random());
    guid(a, b)
}

/// `a` and `b` as 32 lowercase hex digits in GUID groups (8-4-4-4-12),
/// written digit by digit: every Wasm create without an id makes one, and
/// two `format!`s cost several times more.
fn guid(a: u64, b: u64) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bits = (u128::from(a) << 64) | u128::from(b);
    let mut id = String::with_capacity(36);
    for i in 0..32 {
        if matches!(i, 8 | 12 | 16 | 20) {
            id.push('-');
        }
        let nibble = (bits >> (124 - 4 * i)) & 0xf;
        id.push(char::from(HEX[nibble as usize]));
    }
    id
}

fn needs_id(doc: &Value) -> bool {
    match doc.get("id") {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    }
}

fn parse_query(value: &JsValue, context: &mut Context) -> JsResult<(String, Map<String, Value>)> {
    if let Some(s) = value.as_string() {
        return Ok((s.to_std(), Map::new()));
    }
    let Some(obj) = value.as_object().filter(|o| !o.is_callable()) else {
        let actual = value.type_of();
        return throw(
            context,
            400,
            &format!(
                "The \"filterQuery\" parameter must be of type \"string\" or \"object\". Actual type is: \"{actual}\"."
            ),
        );
    };
    let query = obj.get(js_string!("query"), context)?;
    let Some(sql) = query.as_string() else {
        return throw(
            context,
            400,
            "The \"query\" property of the query object must be a string.",
        );
    };
    let mut parameters = Map::new();
    let params = obj.get(js_string!("parameters"), context)?;
    if let Some(list) = params.as_object() {
        let len = list
            .get(js_string!("length"), context)?
            .to_length(context)?;
        for i in 0..len.min(10_000) {
            let p = list.get(i, context)?;
            let Some(p) = p.as_object() else { continue };
            let name = p
                .get(js_string!("name"), context)?
                .to_string(context)?
                .to_std();
            let value = p.get(js_string!("value"), context)?;
            let value = value_to_json(&value, "query parameter", context)?.unwrap_or(Value::Null);
            parameters.insert(name, value);
        }
    }
    Ok((sql.to_std(), parameters))
}

fn collection_op(method: Method, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    checkpoint(context)?;
    let required = method.required();
    if args.len() < required {
        let name = method.name();
        let n = args.len();
        return throw(
            context,
            400,
            &format!(
                "The function \"{name}\" requires at least {required} argument(s) but was called with {n} argument(s)."
            ),
        );
    }
    let (options, callback) = options_and_callback(args, required, context)?;
    let options = read_options(&options, context)?;
    let collection_link = matches!(
        method,
        Method::Create | Method::Upsert | Method::ReadFeed | Method::Query
    );
    let link = link_arg(&args[0], collection_link, context)?;
    let page_size = options.page_size.unwrap_or(100);
    let op = match method {
        Method::Create | Method::Upsert => {
            let mut doc = document_body(&args[1], method.name(), context)?;
            if !options.disable_id_generation && needs_id(&doc) {
                doc["id"] = Value::String(generate_id());
            }
            if method == Method::Create {
                Op::Create { doc }
            } else {
                Op::Upsert {
                    doc,
                    if_match: options.etag,
                }
            }
        }
        Method::Replace => {
            let doc = match value_to_json(&args[1], method.name(), context)? {
                Some(doc) => doc,
                None => Value::Null,
            };
            Op::Replace {
                link,
                doc,
                if_match: options.etag,
            }
        }
        Method::Read => Op::Read { link },
        Method::Delete => Op::Delete {
            link,
            if_match: options.etag,
        },
        Method::ReadFeed => Op::ReadFeed {
            page_size,
            continuation: options.continuation,
        },
        Method::Query => {
            let (sql, parameters) = parse_query(&args[1], context)?;
            Op::Query {
                sql,
                parameters,
                page_size,
                continuation: options.continuation,
            }
        }
    };
    Ok(queue(op, callback, context).into())
}

fn queue(op: Op, callback: Option<JsObject>, context: &mut Context) -> bool {
    let st = state(context);
    let mut s = st.borrow_mut();
    if !s.accepts(context) {
        return false;
    }
    s.ops_accepted += 1;
    s.queue.push_back(Pending { op, callback });
    true
}

/// The native behind the fluent API (`__.filter(...)`, `chain().value()`):
/// `(stages, options, callback)` → accepted.
pub(crate) fn fluent(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    checkpoint(context)?;
    let (options, callback) = options_and_callback(args, 1, context)?;
    let options = read_options(&options, context)?;
    let op = Op::Fluent {
        stages: arg(args, 0),
        page_size: options.page_size.unwrap_or(100),
        continuation: options.continuation,
    };
    Ok(queue(op, callback, context).into())
}

/// Whether the current call has a response (false in pre-triggers).
pub(crate) fn has_response(_: &JsValue, _: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    Ok(state(context).borrow().response.is_some().into())
}

pub(crate) fn create_document(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    collection_op(Method::Create, args, context)
}
pub(crate) fn upsert_document(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    collection_op(Method::Upsert, args, context)
}
pub(crate) fn replace_document(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    collection_op(Method::Replace, args, context)
}
pub(crate) fn read_document(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    collection_op(Method::Read, args, context)
}
pub(crate) fn delete_document(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    collection_op(Method::Delete, args, context)
}
pub(crate) fn read_documents(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    collection_op(Method::ReadFeed, args, context)
}
pub(crate) fn query_documents(
    _: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    collection_op(Method::Query, args, context)
}
pub(crate) fn get_self_link(
    _: &JsValue,
    _: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    Ok(state(context).borrow_mut().self_link.js().into())
}
pub(crate) fn get_alt_link(_: &JsValue, _: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    Ok(state(context).borrow_mut().alt_link.js().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_match_by_segment() {
        let own = "dbs/db/colls/posts";
        for (link, same) in [
            ("dbs/db/colls/posts", true),
            ("/dbs/db/colls/posts/", true),
            ("DBS//db/Colls/posts", true),
            ("dbs/DB/colls/posts", false),
            ("dbs/db/colls/Posts", false),
            ("dbs/db/colls/posts/docs", false),
            ("dbs/db/colls", false),
            ("", false),
        ] {
            assert_eq!(same_link(link, own), same, "{link}");
            assert_eq!(same_link(own, link), same, "{link}");
        }
    }

    #[test]
    fn guids_are_hex_groups_of_both_numbers() {
        for (a, b) in [
            (0, 0),
            (u64::MAX, 1),
            (0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210),
        ] {
            let hex = format!("{a:016x}{b:016x}");
            let expected = format!(
                "{}-{}-{}-{}-{}",
                &hex[0..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..32]
            );
            assert_eq!(guid(a, b), expected);
        }
    }

    #[test]
    fn seeded_ids_repeat_and_differ_by_seed() {
        seed_ids(7);
        let first = (generate_id(), generate_id());
        seed_ids(7);
        assert_eq!(first, (generate_id(), generate_id()));
        seed_ids(8);
        assert_ne!(first.0, generate_id());
    }
}
