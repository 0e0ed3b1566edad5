//! Guarded built-ins and host hooks: the memory bound, and the removal of
//! what a sandboxed script must not reach.
//!
//! boa has no heap limit, and a single built-in call counts as one
//! instruction however much it allocates (`"x".repeat(2**28)` is 512 MB in
//! one step). So the built-ins that can allocate far more than their inputs
//! are replaced, before lockdown, by wrappers that estimate the size of the
//! result, charge it to the call's memory budget ([`CallState::charge`]) and
//! only then call the original; a few others are checked after the fact,
//! which bounds each step's growth to a small factor of the limit.
//!
//! What this does not cover, honestly: strings grown with `+` or template
//! literals (doubling a string 30 times reaches 1 GB in ~280 instructions;
//! a few more make an allocation fail, which aborts the process), and many
//! small allocations in a loop (`while (1) a.push({})`, ~9 bytes per
//! instruction), which only the instruction budget bounds. boa 0.22 has no
//! string length limit, heap size or allocation hook; a hard memory cap
//! needs process isolation, which `Limits::workers` provides (see the
//! `worker` module).
//!
//! Deep chains: boa walks prototype chains, bound-function chains and
//! nested arrays (`String(a)`) recursively in Rust, and a native stack
//! overflow aborts the process. `Object.create`, `Object.setPrototypeOf`,
//! `Reflect.setPrototypeOf`, the `__proto__` setter and
//! `Function.prototype.bind` refuse to build chains deeper than 100, and
//! `join` refuses to re-enter itself deeper than 100; `{ __proto__: o }`
//! literals are refused when the script is compiled (sandbox.rs). Not
//! covered in process: objects whose prototype boa sets in bytecode, which
//! no hook of boa 0.22 sees (see [`Limits`](crate::Limits) for the measured
//! bound); in a worker process their overflow fails the call.
//!
//! Native loops: boa's instruction counter sees bytecode only, and the wall
//! clock is read at host calls, so a built-in that loops in Rust over a
//! length it is given (`Array.prototype.includes.call({length: 2**53-1})`,
//! a sparse `Array(2**32-1).indexOf(1)`, `Math.max.apply(null, {length:
//! 2**32-1})`) ran unbounded. Every Array.prototype and
//! %TypedArray%.prototype method that walks `this.length`, `apply` and
//! `Reflect.apply`/`construct` (their argument list), `Math.max`/`min`,
//! the string scans with a string pattern and RegExp.prototype's
//! `[Symbol.replace]`/`[Symbol.split]`/`[Symbol.match]` (the subject) are
//! wrapped: the length is charged as that many instructions *before* the
//! call ([`steps`]; over the budget it is the usual uncatchable 408), a
//! list the call copies is charged to the memory budget (kept results) or
//! reserved while it runs (a sort buffer, an argument list, the matches
//! a global RegExp gathers: [`MATCH_BYTES`] per character), callbacks are
//! wrapped so that each call counts a step and reads the clock, and the
//! built-in iterators' `next` counts a step (spread runs natively).
//!
//! Not bounded in process, because no hook sees the work: regex
//! backtracking (boa's `regress` has no step limit: `/(a+)+$/` on 40
//! characters runs for hours inside one call), BigInt arithmetic (`**`,
//! `*` on huge values are bytecode operators whose operands no hook sees;
//! `7n ** 100000000n` computes a 280-million-bit number), and what the
//! module docs above list for memory. A worker process bounds them.
//!
//! Also here: dynamic code (`eval`, `Function`) is refused by the host hook,
//! `ArrayBuffer` sizes are capped by the host hook, and `Proxy`, `WeakRef`
//! and `FinalizationRegistry` are removed (proxy chains recurse in Rust;
//! GC-observing objects make runs nondeterministic).
//!
//! [`CallState::charge`]: super::host::CallState::charge

use boa_engine::builtins::object::OrdinaryObject;
use boa_engine::context::HostHooks;
use boa_engine::context::intrinsics::Intrinsics;
use boa_engine::object::shape::RootShape;
use boa_engine::property::PropertyKey;
use boa_engine::realm::Realm;
use boa_engine::{
    Context, JsNativeError, JsObject, JsResult, JsString, JsSymbol, JsValue, NativeFunction,
    js_string,
};

use super::convert::ConvertError;
use super::host::{checkpoint, state};

/// Bytes charged per array element (a `JsValue` plus slack).
const ELEMENT_BYTES: usize = 16;

/// Host hooks of every sandbox context.
pub(crate) struct Hooks;

impl HostHooks for Hooks {
    fn ensure_can_compile_strings(
        &self,
        _realm: Realm,
        _parameters: &[JsString],
        _body: &JsString,
        _direct: bool,
        _context: &mut Context,
    ) -> JsResult<()> {
        Err(JsNativeError::eval()
            .with_message("dynamic code evaluation (eval, Function) is disabled in scripts")
            .into())
    }

    /// The global object on a shared shape (boa's default gives it a
    /// unique shape, which changes in place). A shared shape never changes:
    /// adding, deleting or reconfiguring a global, or changing the global
    /// object's prototype, moves it to another shape, so
    /// `Sandbox::clean_globals` can tell that a call left the global object
    /// as lockdown made it by comparing one address.
    fn create_global_object(&self, intrinsics: &Intrinsics) -> JsObject {
        JsObject::new(
            &RootShape::default(),
            intrinsics.constructors().object().prototype(),
            OrdinaryObject,
        )
        .upcast()
    }

    fn max_buffer_size(&self, context: &mut Context) -> u64 {
        let st = state(context);
        let s = st.borrow();
        if s.active {
            s.max_memory.saturating_sub(s.mem_used) as u64
        } else {
            1 << 20
        }
    }
}

fn arg(args: &[JsValue], i: usize) -> JsValue {
    args.get(i).cloned().unwrap_or_default()
}

fn string_len(value: &JsValue, context: &mut Context) -> JsResult<usize> {
    Ok(match value.as_string() {
        Some(s) => s.len(),
        None => value.to_string(context)?.len(),
    })
}

fn array_len(value: &JsValue, context: &mut Context) -> JsResult<u64> {
    match value.as_object() {
        Some(obj) => obj.get(js_string!("length"), context)?.to_length(context),
        None => Ok(0),
    }
}

fn bytes_of_chars(chars: f64) -> usize {
    // Saturates: NaN becomes 0 and huge values usize::MAX.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let n = (chars.max(0.0) * 2.0) as usize;
    n
}

fn elements(n: u64) -> usize {
    usize::try_from(n)
        .unwrap_or(usize::MAX)
        .saturating_mul(ELEMENT_BYTES)
}

/// Estimated bytes a call would allocate; checked before it runs.
type Pre = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<usize>;

fn repeat_size(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<usize> {
    let len = string_len(this, context)?;
    let count = arg(args, 0).to_number(context)?;
    #[allow(clippy::cast_precision_loss)]
    Ok(bytes_of_chars(len as f64 * count))
}

fn pad_size(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<usize> {
    Ok(bytes_of_chars(arg(args, 0).to_number(context)?))
}

fn string_concat_size(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<usize> {
    let mut total = string_len(this, context)?;
    for a in args {
        total = total.saturating_add(string_len(a, context)?);
    }
    Ok(total.saturating_mul(2))
}

fn split_size(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<usize> {
    let sep = arg(args, 0);
    if sep.as_string().is_some_and(|s| s.is_empty()) {
        // One string per character.
        return Ok(string_len(this, context)?.saturating_mul(ELEMENT_BYTES * 2));
    }
    Ok(0)
}

fn fill_size(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<usize> {
    let len = array_len(this, context)?;
    #[allow(clippy::cast_precision_loss)]
    let lenf = len as f64;
    let relative = |v: JsValue, default: f64, context: &mut Context| -> JsResult<f64> {
        if v.is_undefined() {
            return Ok(default);
        }
        let n = v.to_integer_or_infinity(context)?;
        let n = match n {
            boa_engine::value::IntegerOrInfinity::PositiveInfinity => f64::INFINITY,
            boa_engine::value::IntegerOrInfinity::NegativeInfinity => f64::NEG_INFINITY,
            #[allow(clippy::cast_precision_loss)]
            boa_engine::value::IntegerOrInfinity::Integer(i) => i as f64,
        };
        Ok(if n < 0.0 {
            (lenf + n).max(0.0)
        } else {
            n.min(lenf)
        })
    };
    let start = relative(arg(args, 1), 0.0, context)?;
    let end = relative(arg(args, 2), lenf, context)?;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(elements((end - start).max(0.0) as u64))
}

fn array_from_size(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<usize> {
    let items = arg(args, 0);
    let Some(obj) = items.as_object() else {
        return Ok(0);
    };
    let iterator = obj.get(boa_engine::JsSymbol::iterator(), context)?;
    if !iterator.is_null_or_undefined() {
        // Bounded by the iterable, which already exists (or by the
        // instruction budget for a script-defined iterator).
        return Ok(0);
    }
    Ok(elements(array_len(&items, context)?))
}

fn array_concat_size(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<usize> {
    let mut total = array_len(this, context)?;
    for a in args {
        let n = match a.as_object() {
            Some(o) if o.is_array() => array_len(a, context)?,
            _ => 1,
        };
        total = total.saturating_add(n);
    }
    Ok(elements(total))
}

fn join_size(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<usize> {
    let len = array_len(this, context)?;
    let sep = arg(args, 0);
    let sep_len = if sep.is_undefined() {
        1
    } else {
        string_len(&sep, context)?
    };
    let mut total = usize::try_from(len)
        .unwrap_or(usize::MAX)
        .saturating_mul(sep_len);
    if let Some(obj) = this.as_object() {
        let st = state(context);
        let limit = st.borrow().max_memory / 2;
        for i in 0..len {
            if let Some(s) = obj.get(i, context)?.as_string() {
                total = total.saturating_add(s.len());
            }
            if total > limit {
                break;
            }
        }
    }
    Ok(total.saturating_mul(2))
}

fn stringify_size(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<usize> {
    // Walks the value with the bounded converter: stops cycles, deep
    // nesting and shared-reference blow-ups before boa's recursive
    // JSON.stringify sees them. Lone surrogates are fine here:
    // JSON.stringify writes them as `\uXXXX` escapes.
    let st = state(context);
    let mut budget = {
        let s = st.borrow();
        if s.active {
            s.max_memory.saturating_sub(s.mem_used)
        } else {
            usize::MAX
        }
    };
    match super::convert::to_json_escaping(&arg(args, 0), &mut budget, context) {
        Ok(_) => Ok(0),
        Err(ConvertError::Js(err)) => Err(err),
        // More than the memory left: `guard` charges it and stops the call.
        Err(ConvertError::TooLarge) => Ok(usize::MAX),
        Err(ConvertError::TooDeep) => super::host::throw(
            context,
            400,
            "Converting a cyclic structure or one nested deeper than 128 levels to JSON",
        ),
    }
}

/// A wrapper that checks `pre` (bytes about to be allocated), calls the
/// original, and charges the result's size when `post` is set.
fn guard(original: JsObject, what: &'static str, pre: Pre, post: bool) -> NativeFunction {
    NativeFunction::from_copy_closure_with_captures(
        move |this, args, original: &JsObject, context| {
            checkpoint(context)?;
            let bytes = pre(this, args, context)?;
            state(context).borrow_mut().charge(bytes, what)?;
            let res = original.call(this, args, context)?;
            if post {
                let size = match res.as_string() {
                    Some(s) => s.len().saturating_mul(2),
                    None => match res.as_object() {
                        Some(o) if o.is_array() => elements(array_len(&res, context)?),
                        _ => 0,
                    },
                };
                state(context).borrow_mut().charge(size, what)?;
            }
            Ok(res)
        },
        original,
    )
}

/// Longest prototype or bound-function chain a guarded built-in may create,
/// and deepest re-entrant `join`: boa walks these recursively in Rust.
const MAX_CHAIN: usize = 100;

fn too_deep<T>(what: &str) -> JsResult<T> {
    Err(JsNativeError::range()
        .with_message(format!("{what} would nest deeper than {MAX_CHAIN} levels"))
        .into())
}

fn proto_depth(value: &JsValue) -> usize {
    let mut depth = 0;
    let mut current = value.as_object();
    while let Some(obj) = current {
        depth += 1;
        if depth > MAX_CHAIN {
            break;
        }
        current = obj.prototype();
    }
    depth
}

fn create_check(_this: &JsValue, args: &[JsValue], _context: &mut Context) -> JsResult<usize> {
    if proto_depth(&arg(args, 0)) >= MAX_CHAIN {
        return too_deep("the prototype chain");
    }
    Ok(0)
}

fn set_prototype_check(
    _this: &JsValue,
    args: &[JsValue],
    _context: &mut Context,
) -> JsResult<usize> {
    if proto_depth(&arg(args, 1)) >= MAX_CHAIN {
        return too_deep("the prototype chain");
    }
    Ok(0)
}

fn bind_check(this: &JsValue, _args: &[JsValue], _context: &mut Context) -> JsResult<usize> {
    use boa_engine::builtins::function::BoundFunction;
    let mut depth = 0;
    let mut current = this.as_object();
    while let Some(obj) = current {
        let target = obj
            .downcast_ref::<BoundFunction>()
            .map(|b| b.target_function().clone());
        if target.is_none() {
            break;
        }
        depth += 1;
        if depth >= MAX_CHAIN {
            return too_deep("the bound function chain");
        }
        current = target;
    }
    Ok(0)
}

/// `Array.prototype.join` with a re-entrancy bound (`String(a)` on a deeply
/// nested array recurses through join in Rust) and the size guard.
fn join(original: JsObject) -> NativeFunction {
    NativeFunction::from_copy_closure_with_captures(
        |this, args, original: &JsObject, context| {
            checkpoint(context)?;
            let bytes = join_size(this, args, context)?;
            let st = state(context);
            st.borrow_mut().charge(bytes, "Array.prototype.join")?;
            let depth = {
                let mut s = st.borrow_mut();
                s.join_depth += 1;
                s.join_depth
            };
            let res = if depth > MAX_CHAIN {
                too_deep("Array.prototype.join")
            } else {
                original.call(this, args, context)
            };
            st.borrow_mut().join_depth -= 1;
            let res = res?;
            if let Some(s) = res.as_string() {
                st.borrow_mut()
                    .charge(s.len().saturating_mul(2), "Array.prototype.join")?;
            }
            Ok(res)
        },
        original,
    )
}

fn no_size(_: &JsValue, _: &[JsValue], _: &mut Context) -> JsResult<usize> {
    Ok(0)
}

/// `Array.prototype.flat` with the depth clamped to 100: boa flattens
/// recursively in Rust, so `flat(Infinity)` on a deeply nested array would
/// overflow the native stack.
fn flat(original: JsObject) -> NativeFunction {
    NativeFunction::from_copy_closure_with_captures(
        |this, args, original: &JsObject, context| {
            checkpoint(context)?;
            let depth = arg(args, 0);
            let depth = if depth.is_undefined() {
                1.0
            } else {
                depth.to_number(context)?.min(100.0)
            };
            original.call(this, &[JsValue::from(depth)], context)
        },
        original,
    )
}

/// Replaces the setter of `Object.prototype.__proto__` by one that refuses
/// chains deeper than [`MAX_CHAIN`], as `Object.setPrototypeOf` does.
fn guard_proto_setter(context: &mut Context) -> JsResult<()> {
    use boa_engine::property::PropertyDescriptor;

    let object = context.intrinsics().constructors().object().constructor();
    let object_proto = context.intrinsics().constructors().object().prototype();
    let describe = object.get(js_string!("getOwnPropertyDescriptor"), context)?;
    let describe = describe
        .as_callable()
        .expect("Object.getOwnPropertyDescriptor is a built-in");
    let desc = describe.call(
        &object.clone().into(),
        &[object_proto.clone().into(), js_string!("__proto__").into()],
        context,
    )?;
    let Some(desc) = desc.as_object() else {
        return Ok(());
    };
    let getter = desc.get(js_string!("get"), context)?;
    let setter = desc.get(js_string!("set"), context)?;
    let Some(setter) = setter.as_object() else {
        return Ok(());
    };
    let realm = context.realm().clone();
    let guarded = boa_engine::object::FunctionObjectBuilder::new(
        &realm,
        NativeFunction::from_copy_closure_with_captures(
            |this, args, original: &JsObject, context| {
                if proto_depth(&arg(args, 0)) >= MAX_CHAIN {
                    return too_deep("the prototype chain");
                }
                original.call(this, args, context)
            },
            setter.clone(),
        ),
    )
    .name(js_string!("set __proto__"))
    .length(1)
    .build();
    let mut builder = PropertyDescriptor::builder()
        .set(guarded)
        .enumerable(false)
        .configurable(true);
    if let Some(getter) = getter.as_object() {
        builder = builder.get(getter.clone());
    }
    object_proto.define_property_or_throw(js_string!("__proto__"), builder, context)?;
    Ok(())
}

fn replace_method(
    target: &JsObject,
    name: &'static str,
    make: impl FnOnce(JsObject) -> NativeFunction,
    context: &mut Context,
) -> JsResult<()> {
    let key = JsString::from(name);
    replace_key(target, key.clone().into(), key, make, context)
}

fn replace_key(
    target: &JsObject,
    key: PropertyKey,
    name: JsString,
    make: impl FnOnce(JsObject) -> NativeFunction,
    context: &mut Context,
) -> JsResult<()> {
    let original = target.get(key.clone(), context)?;
    let Some(original) = original.as_object() else {
        return Ok(());
    };
    let length = original.get(js_string!("length"), context)?;
    let realm = context.realm().clone();
    let f = boa_engine::object::FunctionObjectBuilder::new(&realm, make(original.clone()))
        .name(name)
        .length(length.as_number().map_or(0, |n| {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let n = n as usize;
            n
        }))
        .build();
    target.set(key, f, true, context)?;
    Ok(())
}

/// Installs the guards and removes the globals scripts must not reach.
pub(crate) fn install(context: &mut Context) -> JsResult<()> {
    let global = context.global_object();
    for name in ["Proxy", "WeakRef", "FinalizationRegistry"] {
        global.delete_property_or_throw(JsString::from(name), context)?;
    }
    let string_proto = context.intrinsics().constructors().string().prototype();
    let array_proto = context.intrinsics().constructors().array().prototype();
    let json = global.get(js_string!("JSON"), context)?;
    let json = json.as_object().expect("JSON is a built-in object");

    replace_method(
        &string_proto,
        "repeat",
        |o| guard(o, "String.prototype.repeat", repeat_size, false),
        context,
    )?;
    replace_method(
        &string_proto,
        "padStart",
        |o| guard(o, "String.prototype.padStart", pad_size, false),
        context,
    )?;
    replace_method(
        &string_proto,
        "padEnd",
        |o| guard(o, "String.prototype.padEnd", pad_size, false),
        context,
    )?;
    replace_method(
        &string_proto,
        "concat",
        |o| guard(o, "String.prototype.concat", string_concat_size, false),
        context,
    )?;
    replace_method(
        &string_proto,
        "split",
        |o| guard(o, "String.prototype.split", split_size, true),
        context,
    )?;
    replace_method(
        &string_proto,
        "replace",
        |o| guard(o, "String.prototype.replace", no_size, true),
        context,
    )?;
    replace_method(
        &string_proto,
        "replaceAll",
        |o| guard(o, "String.prototype.replaceAll", no_size, true),
        context,
    )?;
    replace_method(
        &array_proto,
        "fill",
        |o| guard(o, "Array.prototype.fill", fill_size, false),
        context,
    )?;
    replace_method(
        &array_proto,
        "concat",
        |o| guard(o, "Array.prototype.concat", array_concat_size, false),
        context,
    )?;
    replace_method(&array_proto, "join", join, context)?;
    let object = context.intrinsics().constructors().object().constructor();
    replace_method(
        &object,
        "create",
        |o| guard(o, "Object.create", create_check, false),
        context,
    )?;
    replace_method(
        &object,
        "setPrototypeOf",
        |o| guard(o, "Object.setPrototypeOf", set_prototype_check, false),
        context,
    )?;
    let reflect = global.get(js_string!("Reflect"), context)?;
    let reflect = reflect.as_object().expect("Reflect is a built-in object");
    replace_method(
        &reflect,
        "setPrototypeOf",
        |o| guard(o, "Reflect.setPrototypeOf", set_prototype_check, false),
        context,
    )?;
    let function_proto = context.intrinsics().constructors().function().prototype();
    replace_method(
        &function_proto,
        "bind",
        |o| guard(o, "Function.prototype.bind", bind_check, false),
        context,
    )?;
    guard_proto_setter(context)?;
    replace_method(&array_proto, "flat", flat, context)?;
    replace_method(
        &json,
        "stringify",
        |o| guard(o, "JSON.stringify", stringify_size, true),
        context,
    )?;
    let array = context.intrinsics().constructors().array().constructor();
    replace_method(
        &array,
        "from",
        |o| guard(o, "Array.from", array_from_size, false),
        context,
    )?;
    install_loops(context)
}

/// What length a native loop walks.
#[derive(Clone, Copy)]
enum Over {
    /// `this`'s `length` (an array-like).
    This,
    /// `this` as a string, when the pattern (argument 0) is not an object:
    /// a string pattern, scanned natively. A RegExp pattern is charged by
    /// the RegExp method it delegates to.
    ThisString,
    /// Argument `i` as a string (the RegExp symbol methods).
    ArgString(usize),
    /// Argument `i`'s `length` (an arguments list for apply/construct).
    ArgList(usize),
    /// The arguments themselves (`Math.max(...)`).
    Args,
}

/// What a native loop allocates, as a function of the length it walks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Alloc {
    /// Nothing in proportion to the length.
    Nothing,
    /// A result as long as what it walks, kept: charged for the call.
    Kept,
    /// A list as long as what it walks, freed when it returns (a sort
    /// buffer, an arguments list): reserved while it runs.
    Temporary,
    /// One match record per position of the subject, freed when it
    /// returns: reserved while it runs, for a global RegExp and for split.
    Matches,
}

/// Bytes reserved per character of a subject a global RegExp walks: boa
/// gathers every match (an array object with its captures) before it
/// builds the result. An estimate; a subject where every position matches
/// may take a small multiple of it.
const MATCH_BYTES: usize = 64;

/// A built-in that loops natively: its name (after the object it is found
/// on), what it walks, what it allocates, and which argument is a callback
/// it calls per element.
#[derive(Clone, Copy)]
struct Loop {
    what: &'static str,
    over: Over,
    alloc: Alloc,
    callback: Option<usize>,
}

fn loop_length(
    spec: Loop,
    this: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<u64> {
    let string = |v: &JsValue| v.as_string().map_or(0, |s| s.len() as u64);
    Ok(match spec.over {
        Over::This => array_len(this, context)?,
        Over::ThisString if !arg(args, 0).is_object() => string(this),
        Over::ThisString => 0,
        Over::ArgString(i) => string(&arg(args, i)),
        Over::ArgList(i) => array_len(&arg(args, i), context)?,
        Over::Args => args.len() as u64,
    })
}

/// Bytes to charge (kept) or reserve (temporary) for a loop over `n`.
fn loop_bytes(spec: Loop, n: u64, this: &JsValue, context: &mut Context) -> JsResult<usize> {
    Ok(match spec.alloc {
        Alloc::Nothing => 0,
        Alloc::Kept | Alloc::Temporary => elements(n),
        Alloc::Matches => {
            let global = spec.what == "[Symbol.split]"
                || match this.as_object() {
                    Some(rx) => rx.get(js_string!("global"), context)?.to_boolean(),
                    None => false,
                };
            if global {
                usize::try_from(n.saturating_add(1))
                    .unwrap_or(usize::MAX)
                    .saturating_mul(MATCH_BYTES)
            } else {
                0
            }
        }
    })
}

/// Counts `n` steps of native work as instructions of the call, then checks
/// the bounds (instructions and wall clock) as every host call does.
///
/// boa's counter sees bytecode only: a built-in that loops in Rust is one
/// instruction however long it runs. The charge is made before the loop, on
/// the length it will walk, so a loop over `{length: 2**53 - 1}` stops
/// (408, the instruction budget) before it starts. It raises the call's
/// starting count rather than lowering boa's remaining count, which boa
/// 0.22 does not let the host set.
pub(crate) fn steps(context: &Context, n: u64) -> JsResult<()> {
    let st = state(context);
    let mut s = st.borrow_mut();
    if s.active {
        s.start_remaining = s
            .start_remaining
            .saturating_add(usize::try_from(n).unwrap_or(usize::MAX));
    }
    s.check(context)
}

/// Charges `bytes` to the call's memory budget, naming the method when it
/// is over.
fn charge_for(context: &Context, on: &str, spec: Loop, bytes: usize) -> JsResult<()> {
    let st = state(context);
    let mut s = st.borrow_mut();
    if s.active && s.mem_used.saturating_add(bytes) > s.max_memory {
        return s.charge(bytes, &format!("{on}{}", spec.what));
    }
    s.charge(bytes, spec.what)
}

/// Wraps a script callback so that each call it receives from a native
/// loop counts one step and checks the wall clock (a native loop of cheap
/// callbacks would otherwise read the clock only at its end).
fn paced_callback(callback: JsObject, context: &mut Context) -> JsValue {
    let realm = context.realm().clone();
    boa_engine::object::FunctionObjectBuilder::new(
        &realm,
        NativeFunction::from_copy_closure_with_captures(
            |this, args, callback: &JsObject, context| {
                steps(context, 1)?;
                callback.call(this, args, context)
            },
            callback,
        ),
    )
    .length(0)
    .build()
    .into()
}

/// A wrapper that charges a native loop's length (see [`steps`]) and its
/// memory (see [`Alloc`]) before calling the original; callbacks are
/// paced.
fn looping(original: JsObject, on: &'static str, spec: Loop) -> NativeFunction {
    NativeFunction::from_copy_closure_with_captures(
        move |this, args, original: &JsObject, context| {
            checkpoint(context)?;
            let n = loop_length(spec, this, args, context)?;
            steps(context, n)?;
            let bytes = loop_bytes(spec, n, this, context)?;
            charge_for(context, on, spec, bytes)?;
            let res = match spec.callback {
                Some(i) if args.get(i).is_some_and(JsValue::is_callable) => {
                    let mut args = args.to_vec();
                    let callback = args[i].as_object().expect("callable").clone();
                    args[i] = paced_callback(callback, context);
                    original.call(this, &args, context)
                }
                _ => original.call(this, args, context),
            };
            if matches!(spec.alloc, Alloc::Temporary | Alloc::Matches) {
                // Freed: what it returns is charged by its own guard
                // (String.prototype.replace/split) or is a value.
                let st = state(context);
                let mut s = st.borrow_mut();
                s.mem_used = s.mem_used.saturating_sub(bytes);
            }
            res
        },
        original,
    )
}

/// `next` of a built-in iterator: one step per value, so spreading or
/// `for…of` over `Array(3e8)` is bounded by the instruction budget (boa
/// runs spread's loop natively).
fn iterator_next(original: JsObject) -> NativeFunction {
    NativeFunction::from_copy_closure_with_captures(
        |this, args, original: &JsObject, context| {
            steps(context, 1)?;
            original.call(this, args, context)
        },
        original,
    )
}

const fn walks(what: &'static str) -> Loop {
    Loop {
        what,
        over: Over::This,
        alloc: Alloc::Nothing,
        callback: None,
    }
}

const fn keeps(what: &'static str) -> Loop {
    Loop {
        alloc: Alloc::Kept,
        ..walks(what)
    }
}

const fn calls_back(what: &'static str) -> Loop {
    Loop {
        callback: Some(0),
        ..walks(what)
    }
}

const fn sorts(what: &'static str, alloc: Alloc) -> Loop {
    Loop {
        alloc,
        callback: Some(0),
        ..walks(what)
    }
}

const fn regexp(what: &'static str, alloc: Alloc, callback: Option<usize>) -> Loop {
    Loop {
        over: Over::ArgString(0),
        alloc,
        callback,
        ..walks(what)
    }
}

const fn over(what: &'static str, over: Over, alloc: Alloc) -> Loop {
    Loop {
        over,
        alloc,
        ..walks(what)
    }
}

/// Array.prototype and %TypedArray%.prototype methods that loop over
/// `this.length` natively (a name missing on one is skipped). `at` does
/// not loop; `keys`, `values` and `entries` are lazy (their iterator's
/// `next` is charged).
const ARRAY_LOOPS: &[Loop] = &[
    walks("includes"),
    walks("indexOf"),
    walks("lastIndexOf"),
    walks("copyWithin"),
    walks("reverse"),
    walks("shift"),
    walks("unshift"),
    walks("toLocaleString"),
    walks("flat"),
    sorts("sort", Alloc::Temporary),
    sorts("toSorted", Alloc::Kept),
    keeps("toReversed"),
    keeps("toSpliced"),
    keeps("with"),
    keeps("slice"),
    keeps("splice"),
    calls_back("every"),
    calls_back("some"),
    calls_back("forEach"),
    Loop {
        alloc: Alloc::Kept,
        ..calls_back("map")
    },
    calls_back("filter"),
    calls_back("reduce"),
    calls_back("reduceRight"),
    calls_back("find"),
    calls_back("findIndex"),
    calls_back("findLast"),
    calls_back("findLastIndex"),
    calls_back("flatMap"),
];

/// %TypedArray%.prototype methods whose Array.prototype namesakes are
/// bounded by their size guard (the result is charged per element).
const TYPED_ARRAY_LOOPS: &[Loop] = &[walks("fill"), walks("join")];

/// Other built-ins that loop natively over a length they are given.
const OTHER_LOOPS: &[(&str, Loop)] = &[
    (
        "Function.prototype.",
        over("apply", Over::ArgList(1), Alloc::Temporary),
    ),
    (
        "Reflect.",
        over("apply", Over::ArgList(2), Alloc::Temporary),
    ),
    (
        "Reflect.",
        over("construct", Over::ArgList(1), Alloc::Temporary),
    ),
    ("Math.", over("max", Over::Args, Alloc::Nothing)),
    ("Math.", over("min", Over::Args, Alloc::Nothing)),
    ("Math.", over("hypot", Over::Args, Alloc::Nothing)),
    ("String.", over("fromCharCode", Over::Args, Alloc::Nothing)),
    ("String.", over("fromCodePoint", Over::Args, Alloc::Nothing)),
    (
        "String.prototype.",
        Loop {
            callback: Some(1),
            ..over("replace", Over::ThisString, Alloc::Nothing)
        },
    ),
    (
        "String.prototype.",
        Loop {
            callback: Some(1),
            ..over("replaceAll", Over::ThisString, Alloc::Nothing)
        },
    ),
    (
        "String.prototype.",
        over("split", Over::ThisString, Alloc::Nothing),
    ),
    (
        "String.prototype.",
        over("includes", Over::ThisString, Alloc::Nothing),
    ),
    (
        "String.prototype.",
        over("indexOf", Over::ThisString, Alloc::Nothing),
    ),
    (
        "String.prototype.",
        over("lastIndexOf", Over::ThisString, Alloc::Nothing),
    ),
];

/// A well-known symbol, by its constructor.
type WellKnown = fn() -> JsSymbol;

/// RegExp.prototype's symbol methods (what `String.prototype.replace` and
/// its kin call with a RegExp pattern): one step per character of the
/// subject, a reservation for the matches a global one gathers, and paced
/// replacer callbacks. The match itself, backtracking included, is not
/// bounded (see the module docs). `[Symbol.matchAll]` is lazy.
const REGEXP_LOOPS: &[(WellKnown, Loop)] = &[
    (
        JsSymbol::replace,
        regexp("[Symbol.replace]", Alloc::Matches, Some(1)),
    ),
    (
        JsSymbol::split,
        regexp("[Symbol.split]", Alloc::Matches, None),
    ),
    (
        JsSymbol::r#match,
        regexp("[Symbol.match]", Alloc::Matches, None),
    ),
    (
        JsSymbol::search,
        regexp("[Symbol.search]", Alloc::Nothing, None),
    ),
];

/// Installs the loop guards (after the size guards, which they wrap).
fn install_loops(context: &mut Context) -> JsResult<()> {
    let array_proto = context.intrinsics().constructors().array().prototype();
    let typed_proto = context
        .intrinsics()
        .constructors()
        .typed_array()
        .prototype();
    for &spec in ARRAY_LOOPS {
        replace_method(
            &array_proto,
            spec.what,
            |o| looping(o, "Array.prototype.", spec),
            context,
        )?;
        replace_method(
            &typed_proto,
            spec.what,
            |o| looping(o, "TypedArray.prototype.", spec),
            context,
        )?;
    }
    for &spec in TYPED_ARRAY_LOOPS {
        replace_method(
            &typed_proto,
            spec.what,
            |o| looping(o, "TypedArray.prototype.", spec),
            context,
        )?;
    }
    let global = context.global_object();
    for &(on, spec) in OTHER_LOOPS {
        let target = match on {
            "Function.prototype." => context.intrinsics().constructors().function().prototype(),
            "String.prototype." => context.intrinsics().constructors().string().prototype(),
            "String." => context.intrinsics().constructors().string().constructor(),
            _ => {
                let name = JsString::from(on.trim_end_matches('.'));
                let v = global.get(name, context)?;
                v.as_object().expect("a built-in namespace").clone()
            }
        };
        replace_method(&target, spec.what, |o| looping(o, on, spec), context)?;
    }
    let regexp_proto = context.intrinsics().constructors().regexp().prototype();
    for &(symbol, spec) in REGEXP_LOOPS {
        replace_key(
            &regexp_proto,
            symbol().into(),
            JsString::from(spec.what),
            |o| looping(o, "RegExp.prototype", spec),
            context,
        )?;
    }
    // %ArrayIteratorPrototype%.next (arrays and typed arrays).
    let values = array_proto.get(JsSymbol::iterator(), context)?;
    let values = values
        .as_callable()
        .expect("Array.prototype[Symbol.iterator] is a built-in");
    let empty = boa_engine::object::builtins::JsArray::new(context)?;
    let iterator = values.call(&empty.into(), &[], context)?;
    if let Some(proto) = iterator.as_object().and_then(|o| o.prototype()) {
        replace_method(&proto, "next", iterator_next, context)?;
    }
    Ok(())
}
