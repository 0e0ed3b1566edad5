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
//! Also here: dynamic code (`eval`, `Function`) is refused by the host hook,
//! `ArrayBuffer` sizes are capped by the host hook, and `Proxy`, `WeakRef`
//! and `FinalizationRegistry` are removed (proxy chains recurse in Rust;
//! GC-observing objects make runs nondeterministic).
//!
//! [`CallState::charge`]: super::host::CallState::charge

use boa_engine::context::HostHooks;
use boa_engine::realm::Realm;
use boa_engine::{
    Context, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction, js_string,
};

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
    // JSON.stringify sees them.
    super::host::value_to_json(&arg(args, 0), "JSON.stringify", context)?;
    Ok(0)
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
    let original = target.get(key.clone(), context)?;
    let Some(original) = original.as_object() else {
        return Ok(());
    };
    let length = original.get(js_string!("length"), context)?;
    let realm = context.realm().clone();
    let f = boa_engine::object::FunctionObjectBuilder::new(&realm, make(original.clone()))
        .name(key.clone())
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
    Ok(())
}
