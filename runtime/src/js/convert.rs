//! `JsValue` → `serde_json::Value` with `JSON.stringify` semantics and bounds.
//!
//! boa's own `JsValue::to_json` recurses without a depth limit (a deeply
//! nested value would overflow the Rust stack and abort the process), keeps
//! non-enumerable properties, ignores `toJSON` (so a `Date` becomes `{}`)
//! and has no size limit (an array holding the same 10 MB string a million
//! times would exhaust memory). This converter follows `JSON.stringify`:
//! enumerable own string keys in order, `toJSON` honoured, `undefined`,
//! functions and symbols dropped (`null` in arrays), `NaN`/`Infinity` as
//! `null`, integral numbers as integers; it stops at [`MAX_DEPTH`] levels
//! and when the estimated output exceeds a byte budget.
//!
//! A lone UTF-16 surrogate (JavaScript strings are UTF-16; JSON text and
//! `String` are UTF-8 and cannot hold one) is refused with a `TypeError`
//! naming the property's path, so a document or response body is stored
//! and sent as written or not at all (serde_json, for the same reason,
//! refuses `"\udc00"` escapes in request bodies and in the string documents
//! a script passes, which is what `JSON.stringify` writes for one).
//! [`to_json_escaping`] keeps the six characters `\uDC00` instead, for
//! measuring what `JSON.stringify` will write.
//!
//! The other direction, [`from_json`], builds what `JSON.parse` would: its
//! input comes from serde_json (parsed with its 128-level recursion limit)
//! or the engine.

use boa_engine::builtins::object::OrdinaryObject;
use boa_engine::object::ObjectInitializer;
use boa_engine::object::builtins::JsArray;
use boa_engine::property::{Attribute, PropertyKey};
use boa_engine::string::JsStrVariant;
use boa_engine::value::JsVariant;
use boa_engine::{Context, JsError, JsObject, JsString, JsValue, js_string};
use serde_json::{Map, Value};

/// `value` as a JavaScript value, as `JSON.parse` of its text would build
/// it: plain objects with writable, enumerable, configurable data
/// properties in the text's order, integral numbers in `i32` range as
/// integers.
///
/// boa's own `JsValue::from_json` gives every object a shape of its own,
/// with a hash table built property by property; this one builds objects
/// on the shared shapes that object literals use, so a page of documents
/// with the same members shares one chain of shape transitions. Returning
/// 100 documents from a query spends most of its time here and in
/// [`to_json`].
pub(crate) fn from_json(value: &Value, context: &mut Context) -> JsValue {
    match value {
        Value::Null => JsValue::null(),
        Value::Bool(b) => JsValue::from(*b),
        Value::Number(n) => match n.as_i64().and_then(|i| i32::try_from(i).ok()) {
            Some(i) => JsValue::from(i),
            // Every serde_json number has an f64 value (arbitrary precision
            // is off), so the fallback is never taken.
            None => JsValue::from(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => JsValue::from(JsString::from(s.as_str())),
        Value::Array(items) => {
            let items: Vec<JsValue> = items.iter().map(|item| from_json(item, context)).collect();
            JsArray::from_iter(items, context).into()
        }
        Value::Object(members) => {
            let members: Vec<(JsString, JsValue)> = members
                .iter()
                .map(|(name, value)| (JsString::from(name.as_str()), from_json(value, context)))
                .collect();
            let mut object = ObjectInitializer::with_native_data(OrdinaryObject, context);
            for (name, value) in members {
                object.property(name, value, Attribute::all());
            }
            object.build().into()
        }
    }
}

/// `JsString` → `String`, as `to_std_string_escaped` (lone surrogates as
/// `\uXXXX`) but without formatting char by char: ASCII text (nearly all
/// document text) is copied as is.
pub(crate) trait StdString {
    fn to_std(&self) -> String;
}

impl StdString for JsString {
    fn to_std(&self) -> String {
        match self.variant() {
            JsStrVariant::Latin1(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) if bytes.is_ascii() => text.to_owned(),
                _ => bytes.iter().copied().map(char::from).collect(),
            },
            JsStrVariant::Utf16(units) => {
                String::from_utf16(units).unwrap_or_else(|_| self.to_std_string_escaped())
            }
        }
    }
}

/// Deepest nesting converted (Cosmos DB's document limit is 128 levels).
pub(crate) const MAX_DEPTH: usize = 128;

/// Why a conversion stopped.
pub(crate) enum ConvertError {
    /// A getter or `toJSON` threw, or the value holds a `BigInt`.
    Js(JsError),
    /// Nested deeper than [`MAX_DEPTH`], or cyclic.
    TooDeep,
    /// The output would exceed the byte budget.
    TooLarge,
}

impl From<JsError> for ConvertError {
    fn from(err: JsError) -> ConvertError {
        ConvertError::Js(err)
    }
}

/// Converts `value` as `JSON.stringify` would, spending at most `*budget`
/// bytes of estimated output (the remainder is left in `*budget`). `None`
/// for values JSON cannot represent at top level (`undefined`, functions).
/// A string or property name holding a lone surrogate is a `TypeError`
/// naming its path.
pub(crate) fn to_json(
    value: &JsValue,
    budget: &mut usize,
    context: &mut Context,
) -> Result<Option<Value>, ConvertError> {
    let mut walk = Walk {
        budget,
        strict: true,
        lone: None,
    };
    let res = convert(value, 0, &mut walk, context);
    match walk.lone {
        Some(lone) if res.is_err() => Err(ConvertError::Js(lone.error())),
        _ => res,
    }
}

/// [`to_json`], but a lone surrogate becomes the six characters `\uXXXX`.
pub(crate) fn to_json_escaping(
    value: &JsValue,
    budget: &mut usize,
    context: &mut Context,
) -> Result<Option<Value>, ConvertError> {
    let mut walk = Walk {
        budget,
        strict: false,
        lone: None,
    };
    convert(value, 0, &mut walk, context)
}

struct Walk<'a> {
    budget: &'a mut usize,
    /// Refuse lone surrogates (else escape them).
    strict: bool,
    /// The lone surrogate found, and its path (filled in on the way out).
    lone: Option<Lone>,
}

struct Lone {
    unit: u16,
    in_name: bool,
    reversed_path: Vec<String>,
}

impl Lone {
    fn error(&self) -> JsError {
        let mut path = String::new();
        for segment in self.reversed_path.iter().rev() {
            path.push('/');
            path.push_str(&segment.replace('~', "~0").replace('/', "~1"));
        }
        let what = match (path.is_empty(), self.in_name) {
            (true, _) => "the value".to_owned(),
            (false, true) => format!("the name of the property {path}"),
            (false, false) => format!("the property {path}"),
        };
        boa_engine::JsNativeError::typ()
            .with_message(format!(
                "{what} holds a lone UTF-16 surrogate (\\u{:04X}), which JSON text cannot carry",
                self.unit
            ))
            .into()
    }
}

/// `s` as a `String`; with `strict`, the first lone surrogate instead.
fn text(s: &JsString, strict: bool) -> Result<String, u16> {
    if let JsStrVariant::Utf16(units) = s.variant()
        && strict
    {
        return match String::from_utf16(units) {
            Ok(text) => Ok(text),
            Err(_) => Err(char::decode_utf16(units.iter().copied())
                .find_map(Result::err)
                .map_or(0, |e| e.unpaired_surrogate())),
        };
    }
    Ok(s.to_std())
}

fn lone(walk: &mut Walk<'_>, unit: u16, in_name: bool) -> ConvertError {
    walk.lone = Some(Lone {
        unit,
        in_name,
        reversed_path: Vec::new(),
    });
    // Replaced by the named error in `to_json`.
    ConvertError::TooDeep
}

/// Adds `segment` to the path of a lone surrogate found below it.
fn within(walk: &mut Walk<'_>, segment: impl FnOnce() -> String) {
    if let Some(lone) = walk.lone.as_mut() {
        lone.reversed_path.push(segment());
    }
}

fn spend(budget: &mut usize, bytes: usize) -> Result<(), ConvertError> {
    *budget = budget.checked_sub(bytes).ok_or(ConvertError::TooLarge)?;
    Ok(())
}

fn convert(
    value: &JsValue,
    depth: usize,
    walk: &mut Walk<'_>,
    context: &mut Context,
) -> Result<Option<Value>, ConvertError> {
    match value.variant() {
        JsVariant::Null => {
            spend(walk.budget, 4)?;
            Ok(Some(Value::Null))
        }
        JsVariant::Undefined | JsVariant::Symbol(_) => Ok(None),
        JsVariant::Boolean(b) => {
            spend(walk.budget, 5)?;
            Ok(Some(Value::Bool(b)))
        }
        JsVariant::String(s) => {
            spend(walk.budget, s.len() + 2)?;
            match text(&s, walk.strict) {
                Ok(text) => Ok(Some(Value::String(text))),
                Err(unit) => Err(lone(walk, unit, false)),
            }
        }
        JsVariant::Float64(n) => {
            spend(walk.budget, 8)?;
            Ok(Some(crate::number::json_number(n)))
        }
        JsVariant::Integer32(n) => {
            spend(walk.budget, 8)?;
            Ok(Some(Value::from(n)))
        }
        JsVariant::BigInt(_) => Err(ConvertError::Js(
            boa_engine::JsNativeError::typ()
                .with_message("BigInt value can't be serialized in JSON")
                .into(),
        )),
        JsVariant::Object(obj) => convert_object(&obj, depth, walk, context),
    }
}

fn convert_object(
    obj: &JsObject,
    depth: usize,
    walk: &mut Walk<'_>,
    context: &mut Context,
) -> Result<Option<Value>, ConvertError> {
    if depth >= MAX_DEPTH {
        return Err(ConvertError::TooDeep);
    }
    let to_json = obj.get(js_string!("toJSON"), context)?;
    if let Some(f) = to_json.as_callable() {
        let replaced = f.call(&JsValue::from(obj.clone()), &[], context)?;
        if replaced.as_object().is_some_and(|o| &o == obj) {
            // A toJSON returning itself: convert the plain properties.
        } else {
            return convert(&replaced, depth + 1, walk, context);
        }
    }
    if obj.is_callable() {
        return Ok(None);
    }
    spend(walk.budget, 2)?;
    if obj.is_array() {
        let len = obj.get(js_string!("length"), context)?.to_length(context)?;
        // Every element costs at least one byte, so a length over the
        // budget cannot fit: refuse before allocating.
        if len > *walk.budget as u64 {
            return Err(ConvertError::TooLarge);
        }
        #[allow(clippy::cast_possible_truncation)]
        let mut items = Vec::with_capacity(len as usize);
        for i in 0..len {
            let item = obj.get(i, context)?;
            spend(walk.budget, 1)?;
            let item = convert(&item, depth + 1, walk, context).inspect_err(|_| {
                within(walk, || i.to_string());
            })?;
            items.push(item.unwrap_or(Value::Null));
        }
        return Ok(Some(Value::Array(items)));
    }
    // Boxed primitives serialize as their primitive.
    if let Some(primitive) = unbox(obj) {
        return convert(&primitive, depth, walk, context);
    }
    let keys = obj.own_property_keys(context)?;
    let mut map = Map::with_capacity(keys.len());
    for key in keys {
        let name = match &key {
            PropertyKey::String(s) => match text(s, walk.strict) {
                Ok(name) => name,
                Err(unit) => {
                    let err = lone(walk, unit, true);
                    within(walk, || s.to_std());
                    return Err(err);
                }
            },
            PropertyKey::Index(i) => i.get().to_string(),
            PropertyKey::Symbol(_) => continue,
        };
        let desc = obj.borrow().properties().get(&key);
        let value = match desc {
            Some(desc) if desc.enumerable() == Some(true) => match desc.value() {
                Some(v) => v.clone(),
                None => obj.get(key.clone(), context)?,
            },
            Some(_) => continue,
            // Exotic objects (typed arrays, strings) keep some properties
            // outside the property map.
            None => obj.get(key.clone(), context)?,
        };
        let converted = convert(&value, depth + 1, walk, context).inspect_err(|_| {
            within(walk, || name.clone());
        })?;
        if let Some(v) = converted {
            spend(walk.budget, name.len() + 3)?;
            map.insert(name, v);
        }
    }
    Ok(Some(Value::Object(map)))
}

fn unbox(obj: &JsObject) -> Option<JsValue> {
    if let Some(s) = obj.downcast_ref::<JsString>() {
        return Some(JsValue::from(s.clone()));
    }
    if let Some(n) = obj.downcast_ref::<f64>() {
        return Some(JsValue::from(*n));
    }
    if let Some(b) = obj.downcast_ref::<bool>() {
        return Some(JsValue::from(*b));
    }
    None
}

#[cfg(test)]
mod tests {
    use boa_engine::{Context, JsString, JsValue, Source, js_string};
    use serde_json::json;

    use super::StdString;

    /// `from_json` builds what `JSON.parse` of the same text builds: the
    /// same members in the same order, as writable, enumerable,
    /// configurable data properties on `Object.prototype` (`__proto__`
    /// included, as an own member), the same numbers, and shapes shared
    /// the way literals share them, so objects stay independent.
    #[test]
    fn from_json_builds_what_json_parse_builds() {
        let value = json!({
            "id": "p1", "n": 3, "big": 4_294_967_296_u64, "neg": -2_147_483_649_i64,
            "x": 1.5, "ok": true, "none": null, "2": "index-like", "__proto__": {"polluted": 1},
            "tags": ["a", 1, [2, {"deep": {"er": []}}]], "empty": {},
        });
        let mut context = Context::builder()
            .instructions_remaining(1_000_000)
            .build()
            .unwrap();
        let built = super::from_json(&value, &mut context);
        context
            .global_object()
            .set(js_string!("built"), built.clone(), false, &mut context)
            .unwrap();
        context
            .global_object()
            .set(
                js_string!("other"),
                super::from_json(&value, &mut context),
                false,
                &mut context,
            )
            .unwrap();
        let text = serde_json::to_string(&value).unwrap();
        let check = format!(
            r#"
            var parsed = JSON.parse({text:?});
            var same = JSON.stringify(built) === JSON.stringify(parsed)
                && JSON.stringify(Object.keys(built)) === JSON.stringify(Object.keys(parsed))
                && Object.getPrototypeOf(built) === Object.prototype
                && Array.isArray(built.tags) && built.tags.length === 3
                && built.__proto__.polluted === 1 && ({{}}).polluted === undefined
                && built.big === 4294967296 && built.neg === -2147483649 && built.x === 1.5;
            var d = Object.getOwnPropertyDescriptor(built, 'n');
            var attributes = d.writable && d.enumerable && d.configurable;
            built.n = 4; delete built.id; built.added = 1;
            same && attributes && other.n === 3 && other.id === 'p1' && other.added === undefined
            "#
        );
        let result = context.eval(Source::from_bytes(check.as_bytes())).unwrap();
        assert_eq!(result, JsValue::from(true), "{}", value);
        let mut budget = usize::MAX;
        let Ok(Some(back)) = super::to_json(
            &context
                .global_object()
                .get(js_string!("other"), &mut context)
                .unwrap(),
            &mut budget,
            &mut context,
        ) else {
            panic!("other converts back")
        };
        assert_eq!(back, value);
    }

    #[test]
    fn to_std_matches_the_escaping_conversion() {
        let lone_surrogate: &[u16] = &[0x61, 0xD800, 0x62];
        let mut cases: Vec<JsString> = ["", "plain ascii", "café", "ÿ\u{80}", "日本語", "emoji 😀"]
            .into_iter()
            .map(JsString::from)
            .collect();
        cases.push(JsString::from(lone_surrogate));
        for s in cases {
            assert_eq!(s.to_std(), s.to_std_string_escaped(), "{s:?}");
        }
    }
}
