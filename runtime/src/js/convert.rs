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
//! Documents are ordinary objects on shared shapes, and most have no
//! `toJSON` anywhere on their prototype chain. For those the converter
//! skips the `toJSON` lookup when it is sure to find nothing: the object
//! has no own `toJSON` and its prototype is null or `Object.prototype`
//! with no `toJSON` and a null prototype of its own. That last fact is
//! looked up once and looked up again after anything that may have run
//! script code (a getter, a `toJSON`, a proxy trap), since such code may
//! define `Object.prototype.toJSON` part way through. The names of a shared
//! shape's keys are converted to `String`s once and kept in the context
//! from call to call ([`ShapeCache`]; a shared shape never changes); the
//! keys and their order are those `own_property_keys` gives (array indices
//! ascending, then string keys in creation order). Everything else (exotic
//! and boxed objects, proxies, arrays, objects with a `toJSON` to call)
//! takes the general path.
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
//! or the engine. [`unchanged`] tells, by reading alone, whether a value
//! [`from_json`] built would still convert back to exactly its JSON.

use std::cell::RefCell;
use std::rc::Rc;

use boa_engine::builtins::object::OrdinaryObject;
use boa_engine::object::ObjectInitializer;
use boa_engine::object::builtins::JsArray;
use boa_engine::object::shape::Shape;
use boa_engine::property::{PropertyDescriptor, PropertyKey};
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
/// with the same members shares one chain of shape transitions. It also
/// makes each member name's property key once per context, not once per
/// object or per call ([`NameKeys`]), and hands a member the string its
/// namesake in the previous object held when the text is the same
/// (strings are immutable, so sharing one cannot be observed). Returning
/// 100 documents from a query spends most of its time here, and in
/// [`unchanged`] (or [`to_json`] when the script changed them).
pub(crate) fn from_json(value: &Value, context: &mut Context) -> JsValue {
    let keys = kept::<NameKeys>(context);
    // Building runs no script code, so nothing can convert into this
    // context while the keys are borrowed; the fallback only keeps a
    // mistake from becoming a panic.
    let Ok(mut keys) = keys.try_borrow_mut() else {
        return build(value, &mut Names::new(&mut NameKeys::default()), context);
    };
    build(value, &mut Names::new(&mut keys), context)
}

fn build<'v>(value: &'v Value, names: &mut Names<'v, '_>, context: &mut Context) -> JsValue {
    match value {
        Value::Null => JsValue::null(),
        Value::Bool(b) => JsValue::from(*b),
        Value::Number(n) => number(n),
        Value::String(s) => JsValue::from(JsString::from(s.as_str())),
        Value::Array(items) => {
            let items: Vec<JsValue> = items
                .iter()
                .map(|item| build(item, names, context))
                .collect();
            JsArray::from_iter(items, context).into()
        }
        Value::Object(members) => {
            let object = ObjectInitializer::with_native_data(OrdinaryObject, context).build();
            for (name, value) in members {
                let slot = names.find(name);
                // The key is taken before building the value: building a
                // nested object may give the slot to another name.
                let key = match slot {
                    Some(slot) => names.keys.entries[slot].key.clone(),
                    None => PropertyKey::from(JsString::from(name.as_str())),
                };
                let value = match (value, slot) {
                    (Value::String(text), Some(slot)) => names.string(slot, text),
                    _ => build(value, names, context),
                };
                object.insert_property(
                    key,
                    PropertyDescriptor::builder()
                        .value(value)
                        .writable(true)
                        .enumerable(true)
                        .configurable(true),
                );
            }
            object.into()
        }
    }
}

fn number(n: &serde_json::Number) -> JsValue {
    match n.as_i64().and_then(|i| i32::try_from(i).ok()) {
        Some(i) => JsValue::from(i),
        // Every serde_json number has an f64 value (arbitrary precision
        // is off), so the fallback is never taken.
        None => JsValue::from(n.as_f64().unwrap_or(f64::NAN)),
    }
}

/// The property keys of the member names [`from_json`] met in one
/// context, kept from call to call: the documents of a container list
/// the same names (`id`, `_rid`, `_etag`, ...) in the same order every
/// call, so the name after the last one found is tried first. Only names
/// are kept, never values, and at most [`NameKeys::MAX`] of them, each
/// at most [`NameKeys::MAX_LEN`] bytes long.
#[derive(Default)]
struct NameKeys {
    entries: Vec<NameKey>,
    next: usize,
}

struct NameKey {
    text: Box<str>,
    key: PropertyKey,
}

impl NameKeys {
    /// Names kept; a linear search over many more would cost more than
    /// making the key.
    const MAX: usize = 48;

    /// Longest name kept, in bytes; a longer one gets a key of its own
    /// each time, which is what a rare name costs anyway.
    const MAX_LEN: usize = 256;
}

/// `context`'s `T` ([`NameKeys`], [`ShapeCache`]), added to it on first
/// use: kept from call to call, as the pooled context is.
fn kept<T: Default + 'static>(context: &mut Context) -> Rc<RefCell<T>> {
    if let Some(kept) = context.get_data::<Rc<RefCell<T>>>() {
        return kept.clone();
    }
    let kept = Rc::new(RefCell::new(T::default()));
    context.insert_data(kept.clone());
    kept
}

/// One [`from_json`] conversion's view of the [`NameKeys`]: the keys, and
/// for each the last string value a member of that name held in this
/// conversion.
struct Names<'v, 'k> {
    keys: &'k mut NameKeys,
    last: Vec<Option<(&'v str, JsString)>>,
    /// Whether this conversion emptied the full keys to make room (it
    /// does so at most once, so a document with more names than are kept
    /// does not empty them again and again).
    cleared: bool,
}

impl<'v, 'k> Names<'v, 'k> {
    fn new(keys: &'k mut NameKeys) -> Self {
        Names {
            keys,
            last: Vec::new(),
            cleared: false,
        }
    }

    /// The entry of `name`, added if there is room.
    fn find(&mut self, name: &str) -> Option<usize> {
        let keys = &mut *self.keys;
        let at = match keys.entries.get(keys.next) {
            Some(entry) if *entry.text == *name => Some(keys.next),
            _ => keys.entries.iter().position(|entry| *entry.text == *name),
        };
        let at = match at {
            Some(at) => at,
            None if name.len() > NameKeys::MAX_LEN => return None,
            None => {
                if keys.entries.len() == NameKeys::MAX {
                    if self.cleared {
                        return None;
                    }
                    self.cleared = true;
                    keys.entries.clear();
                    self.last.clear();
                }
                keys.entries.push(NameKey {
                    text: name.into(),
                    key: PropertyKey::from(JsString::from(name)),
                });
                keys.entries.len() - 1
            }
        };
        keys.next = at + 1;
        Some(at)
    }

    /// `text` as the value of a member named by entry `slot`.
    fn string(&mut self, slot: usize, text: &'v str) -> JsValue {
        if self.last.len() <= slot {
            // Once per conversion, usually: entries are only added (or
            // all removed) while it runs.
            self.last
                .resize(self.keys.entries.len().max(slot + 1), None);
        }
        match &self.last[slot] {
            Some((last, string)) if *last == text => string.clone().into(),
            _ => {
                let string = JsString::from(text);
                self.last[slot] = Some((text, string.clone()));
                string.into()
            }
        }
    }
}

/// The bytes [`to_json`] of `value` would spend, when it is sure that
/// [`to_json`] would give exactly `expected`: the same members in the same
/// order and numbers of the same kind (integer or float, bit for bit).
/// `None` when it is not: the value differs, or holds something only the
/// general conversion handles (an accessor, a non-enumerable member, an
/// exotic or boxed object, a proxy, a `toJSON` anywhere, index-like names,
/// `NaN`), and when it is nested [`MAX_DEPTH`] deep.
///
/// It only reads property maps, so it runs no script code and allocates
/// nothing per member; a script that returns the documents a query handed
/// it, unchanged, has them returned as the JSON they came from without
/// building every name and string again ([`super::host::body_to_json`]).
pub(crate) fn unchanged(value: &JsValue, expected: &Value, context: &Context) -> Option<usize> {
    let constructors = context.intrinsics().constructors();
    let mut same = Same {
        object_proto: constructors.object().prototype(),
        array_proto: constructors.array().prototype(),
        shapes: Vec::new(),
        spent: 0,
    };
    let to_json = PropertyKey::from(js_string!("toJSON"));
    let plain = |obj: &JsObject, proto: Option<&JsObject>| {
        let obj = obj.borrow();
        obj.properties().get(&to_json).is_none()
            && match (obj.prototype(), proto) {
                (None, None) => true,
                (Some(p), Some(q)) => JsObject::equals(&p, q),
                _ => false,
            }
    };
    if !(plain(&same.object_proto, None) && plain(&same.array_proto, Some(&same.object_proto))) {
        return None;
    }
    same.value(value, expected, 0).then_some(same.spent)
}

/// The state of one [`unchanged`] walk.
struct Same {
    object_proto: JsObject,
    array_proto: JsObject,
    /// The string keys of the shared shapes met so far (see [`ShapeNames`]).
    shapes: Vec<(Shape, Rc<[PropertyKey]>)>,
    /// The bytes [`to_json`] would have spent on what was compared.
    spent: usize,
}

impl Same {
    fn value(&mut self, value: &JsValue, expected: &Value, depth: usize) -> bool {
        match (value.variant(), expected) {
            (JsVariant::Null, Value::Null) => {
                self.spent += 4;
                true
            }
            (JsVariant::Boolean(b), Value::Bool(e)) => {
                self.spent += 5;
                b == *e
            }
            (JsVariant::String(s), Value::String(e)) => {
                self.spent += s.len() + 2;
                same_text(&s, e)
            }
            (JsVariant::Integer32(n), Value::Number(e)) => {
                self.spent += 8;
                same_number(&Value::from(n), e)
            }
            (JsVariant::Float64(n), Value::Number(e)) => {
                self.spent += 8;
                same_number(&crate::number::json_number(n), e)
            }
            (JsVariant::Object(obj), Value::Array(items)) => self.array(&obj, items, depth),
            (JsVariant::Object(obj), Value::Object(members)) => self.object(&obj, members, depth),
            _ => false,
        }
    }

    /// An array on `Array.prototype` with no own `toJSON`, whose elements
    /// are all own data properties.
    fn array(&mut self, obj: &JsObject, items: &[Value], depth: usize) -> bool {
        if depth >= MAX_DEPTH
            || !obj.is_array()
            || !obj
                .prototype()
                .is_some_and(|p| JsObject::equals(&p, &self.array_proto))
        {
            return false;
        }
        let elements = {
            let o = obj.borrow();
            let properties = o.properties();
            if properties
                .get(&PropertyKey::from(js_string!("toJSON")))
                .is_some()
            {
                return false;
            }
            let length = properties
                .get(&PropertyKey::from(js_string!("length")))
                .and_then(|d| d.value().and_then(JsValue::as_number));
            if length != Some(items.len() as f64) {
                return false;
            }
            let mut elements = Vec::with_capacity(items.len());
            for i in 0..items.len() {
                let Ok(i) = u32::try_from(i) else {
                    return false;
                };
                match properties.get(&PropertyKey::from(i)) {
                    Some(d) => match d.value() {
                        Some(v) => elements.push(v.clone()),
                        None => return false,
                    },
                    None => return false,
                }
            }
            elements
        };
        self.spent += 2 + items.len();
        elements
            .iter()
            .zip(items)
            .all(|(element, item)| self.value(element, item, depth + 1))
    }

    /// An ordinary object on a shared shape, on `Object.prototype` or
    /// none, with no index-like names, whose members are enumerable data
    /// properties named as `members` are, in the same order.
    fn object(&mut self, obj: &JsObject, members: &Map<String, Value>, depth: usize) -> bool {
        if depth >= MAX_DEPTH || !obj.is_ordinary() {
            return false;
        }
        match obj.prototype() {
            None => {}
            Some(p) if JsObject::equals(&p, &self.object_proto) => {}
            Some(_) => return false,
        }
        let o = obj.borrow();
        let properties = o.properties();
        let shape = o.shape();
        if !shape.is_shared() || properties.index_property_keys().next().is_some() {
            return false;
        }
        let addr = shape.to_addr_usize();
        let keys = match self.shapes.iter().find(|(s, _)| s.to_addr_usize() == addr) {
            Some((_, keys)) => keys.clone(),
            None => {
                let keys: Rc<[PropertyKey]> = shape
                    .keys()
                    .into_iter()
                    .filter(|k| matches!(k, PropertyKey::String(_)))
                    .collect();
                if self.shapes.len() == Walk::MAX_SHAPES {
                    self.shapes.remove(0);
                }
                self.shapes.push((shape.clone(), keys.clone()));
                keys
            }
        };
        if keys.len() != members.len() {
            return false;
        }
        self.spent += 2;
        // The object stays borrowed while its members are compared: the
        // walk only reads, so borrowing the objects below it cannot clash.
        keys.iter().zip(members).all(|(key, (name, member))| {
            let PropertyKey::String(s) = key else {
                return false;
            };
            if name == "toJSON" || !same_text(s, name) {
                return false;
            }
            self.spent += name.len() + 3;
            match properties.get(key) {
                Some(d) if d.enumerable() == Some(true) => match d.value() {
                    Some(v) => self.value(v, member, depth + 1),
                    None => false,
                },
                _ => false,
            }
        })
    }
}

/// Whether `s` holds the same characters as `text`.
fn same_text(s: &JsString, text: &str) -> bool {
    match s.variant() {
        JsStrVariant::Latin1(bytes) if text.is_ascii() => bytes == text.as_bytes(),
        JsStrVariant::Latin1(bytes) => text
            .chars()
            .map(u32::from)
            .eq(bytes.iter().map(|&b| u32::from(b))),
        JsStrVariant::Utf16(units) => text.encode_utf16().eq(units.iter().copied()),
    }
}

/// Whether `got` is a number written exactly as `expected` is: both
/// integers of the same value, or both floats with the same bits.
fn same_number(got: &Value, expected: &serde_json::Number) -> bool {
    let Value::Number(got) = got else {
        return false;
    };
    match (got.is_f64(), expected.is_f64()) {
        (true, true) => got.as_f64().map(f64::to_bits) == expected.as_f64().map(f64::to_bits),
        (false, false) => got == expected,
        _ => false,
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
            JsStrVariant::Utf16(units) => ascii_utf16(units)
                .or_else(|| String::from_utf16(units).ok())
                .unwrap_or_else(|| self.to_std_string_escaped()),
        }
    }
}

/// `units` as a `String` when they are all ASCII. boa keeps a function's
/// source text, and the strings made from it, as UTF-16 even when it is
/// all ASCII (`sees_only_error` in `run.rs` reads a callback's source
/// the first time it meets its code); narrowing such units costs a fraction of decoding them
/// character by character as `String::from_utf16` does.
fn ascii_utf16(units: &[u16]) -> Option<String> {
    // An OR over all units (not a search that stops early) so that the
    // compiler can check many units at once.
    if units.iter().fold(0, |all, &unit| all | unit) >= 0x80 {
        return None;
    }
    #[allow(clippy::cast_possible_truncation)]
    let bytes: Vec<u8> = units.iter().map(|&unit| unit as u8).collect();
    String::from_utf8(bytes).ok()
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
    let mut walk = Walk::new(budget, true, context);
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
    let mut walk = Walk::new(budget, false, context);
    convert(value, 0, &mut walk, context)
}

struct Walk<'a> {
    budget: &'a mut usize,
    /// Refuse lone surrogates (else escape them).
    strict: bool,
    /// The lone surrogate found, and its path (filled in on the way out).
    lone: Option<Lone>,
    /// `Object.prototype`.
    object_proto: JsObject,
    /// Whether `Object.prototype` has no `toJSON` and a null prototype, as
    /// last looked at; `None` once script code may have run since.
    plain_proto: Option<bool>,
    /// The member names of the shared shapes met in this context.
    shapes: Rc<RefCell<ShapeCache>>,
    /// The member names of shapes too large to keep in `shapes`, met in
    /// this conversion.
    large: Vec<Rc<ShapeNames>>,
}

/// The string-keyed property keys of a shared shape, in creation order,
/// with their names as `String`s. A shared shape never changes (adding,
/// removing or reconfiguring a property moves the object to another
/// shape), and the entry keeps it alive, so its address is not reused.
struct ShapeNames {
    shape: Shape,
    names: Vec<(PropertyKey, String)>,
    /// One of the names is `toJSON`.
    to_json: bool,
}

/// The [`ShapeNames`] of the shared shapes [`to_json`] met in one
/// context, kept from call to call: a container's documents come back on
/// the same few shapes every call, so their names are converted to
/// `String`s once, not once per call. Only shapes on `Object.prototype`
/// or a null prototype (those of documents and object literals, the only
/// ones the plain path takes) with no name holding a lone surrogate (so
/// the names are the same whether or not lone surrogates are refused) are
/// kept, at most [`ShapeCache::MAX`] of them, the oldest replaced first,
/// each with at most [`ShapeCache::MAX_NAMES`] names of at most
/// [`ShapeCache::MAX_BYTES`] bytes in all.
#[derive(Default)]
struct ShapeCache {
    shapes: Vec<Rc<ShapeNames>>,
    /// The entry to replace next once full.
    oldest: usize,
}

impl ShapeCache {
    const MAX: usize = 16;
    const MAX_NAMES: usize = 64;
    const MAX_BYTES: usize = 4096;

    fn find(&self, addr: usize) -> Option<Rc<ShapeNames>> {
        self.shapes
            .iter()
            .find(|s| s.shape.to_addr_usize() == addr)
            .cloned()
    }

    fn add(&mut self, names: Rc<ShapeNames>) {
        if self.shapes.len() < Self::MAX {
            self.shapes.push(names);
        } else {
            self.shapes[self.oldest] = names;
            self.oldest = (self.oldest + 1) % Self::MAX;
        }
    }
}

impl<'a> Walk<'a> {
    /// Shapes remembered per conversion (by [`unchanged`], and here for
    /// shapes too large to keep in the context).
    const MAX_SHAPES: usize = 16;

    fn new(budget: &'a mut usize, strict: bool, context: &mut Context) -> Self {
        Walk {
            budget,
            strict,
            lone: None,
            object_proto: context.intrinsics().constructors().object().prototype(),
            plain_proto: None,
            shapes: kept::<ShapeCache>(context),
            large: Vec::new(),
        }
    }

    /// For an ordinary object on a shared shape with no `toJSON` to call
    /// (none of its own, none inherited), its shape's names.
    fn plain(&mut self, obj: &JsObject) -> Option<Rc<ShapeNames>> {
        if !obj.is_ordinary() || !self.no_inherited_to_json(obj) {
            return None;
        }
        let shape = {
            let o = obj.borrow();
            let shape = o.shape();
            if !shape.is_shared() {
                return None;
            }
            let addr = shape.to_addr_usize();
            // Borrowed only here: converting may run script code that
            // converts again (a `toJSON` creating a document).
            let found = match self.shapes.try_borrow() {
                Ok(shapes) => shapes.find(addr),
                Err(_) => None,
            };
            if let Some(names) = found.or_else(|| {
                self.large
                    .iter()
                    .find(|s| s.shape.to_addr_usize() == addr)
                    .cloned()
            }) {
                return (!names.to_json).then_some(names);
            }
            shape.clone()
        };
        let mut names = Vec::new();
        let mut to_json = false;
        let mut bytes = 0;
        for key in shape.keys() {
            if let PropertyKey::String(s) = &key {
                // A lone surrogate is reported (or escaped) by the general
                // path.
                let name = text(s, true).ok()?;
                to_json |= name == "toJSON";
                bytes += name.len();
                names.push((key, name));
            }
        }
        let large = names.len() > ShapeCache::MAX_NAMES || bytes > ShapeCache::MAX_BYTES;
        let names = Rc::new(ShapeNames {
            shape,
            names,
            to_json,
        });
        if !large {
            if let Ok(mut shapes) = self.shapes.try_borrow_mut() {
                shapes.add(names.clone());
            }
        } else if self.large.len() < Self::MAX_SHAPES {
            self.large.push(names.clone());
        }
        (!names.to_json).then_some(names)
    }

    /// Called after anything that may have run script code (a getter, a
    /// `toJSON`, a proxy trap), which may have changed `Object.prototype`.
    fn ran_script(&mut self) {
        self.plain_proto = None;
    }

    /// Whether a `toJSON` lookup on an ordinary object whose own keys do
    /// not include `toJSON` is sure to find nothing: its prototype is null,
    /// or is `Object.prototype` holding no `toJSON` and having a null
    /// prototype itself.
    fn no_inherited_to_json(&mut self, obj: &JsObject) -> bool {
        match obj.prototype() {
            None => true,
            Some(proto) if JsObject::equals(&proto, &self.object_proto) => {
                *self.plain_proto.get_or_insert_with(|| {
                    let proto = self.object_proto.borrow();
                    proto.prototype().is_none()
                        && proto
                            .properties()
                            .get(&PropertyKey::from(js_string!("toJSON")))
                            .is_none()
                })
            }
            Some(_) => false,
        }
    }
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
        if let Some(text) = ascii_utf16(units) {
            return Ok(text);
        }
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
    if let Some(names) = walk.plain(obj) {
        return convert_plain(obj, &names, depth, walk, context);
    }
    if let Some(replaced) = call_to_json(obj, walk, context)? {
        return convert(&replaced, depth + 1, walk, context);
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
            walk.ran_script();
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
    walk.ran_script();
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
        member(obj, &key, name, depth, walk, context, &mut map)?;
    }
    Ok(Some(Value::Object(map)))
}

/// Calls `obj.toJSON()` if there is one: `Some` with the value that
/// replaces `obj`, `None` when there is none or it returned `obj` itself
/// (whose plain properties are then converted).
fn call_to_json(
    obj: &JsObject,
    walk: &mut Walk<'_>,
    context: &mut Context,
) -> Result<Option<JsValue>, ConvertError> {
    walk.ran_script();
    let to_json = obj.get(js_string!("toJSON"), context)?;
    if let Some(f) = to_json.as_callable() {
        let replaced = f.call(&JsValue::from(obj.clone()), &[], context)?;
        if !replaced.as_object().is_some_and(|o| &o == obj) {
            return Ok(Some(replaced));
        }
    }
    Ok(None)
}

/// [`convert_object`] for an ordinary object on a shared shape whose names
/// are `names` and which has no `toJSON` to call: the same keys in the
/// same order as `own_property_keys` (array indices ascending, then the
/// shape's string keys), without collecting them or converting their
/// names again.
fn convert_plain(
    obj: &JsObject,
    names: &ShapeNames,
    depth: usize,
    walk: &mut Walk<'_>,
    context: &mut Context,
) -> Result<Option<Value>, ConvertError> {
    spend(walk.budget, 2)?;
    let mut indices: Vec<u32> = obj.borrow().properties().index_property_keys().collect();
    indices.sort_unstable();
    let mut map = Map::with_capacity(indices.len() + names.names.len());
    for i in indices {
        member(
            obj,
            &PropertyKey::from(i),
            i.to_string(),
            depth,
            walk,
            context,
            &mut map,
        )?;
    }
    for (key, name) in &names.names {
        member(obj, key, name.clone(), depth, walk, context, &mut map)?;
    }
    Ok(Some(Value::Object(map)))
}

/// Converts the own property `key` of `obj`, named `name`, into `map` if
/// it is enumerable and its value has a JSON form.
fn member(
    obj: &JsObject,
    key: &PropertyKey,
    name: String,
    depth: usize,
    walk: &mut Walk<'_>,
    context: &mut Context,
    map: &mut Map<String, Value>,
) -> Result<(), ConvertError> {
    let desc = obj.borrow().properties().get(key);
    let value = match desc {
        Some(desc) if desc.enumerable() == Some(true) => match desc.value() {
            Some(v) => v.clone(),
            None => {
                walk.ran_script();
                obj.get(key.clone(), context)?
            }
        },
        Some(_) => return Ok(()),
        // Exotic objects (typed arrays, strings) keep some properties
        // outside the property map.
        None => {
            walk.ran_script();
            obj.get(key.clone(), context)?
        }
    };
    let converted = convert(&value, depth + 1, walk, context).inspect_err(|_| {
        within(walk, || name.clone());
    })?;
    if let Some(v) = converted {
        spend(walk.budget, name.len() + 3)?;
        map.insert(name, v);
    }
    Ok(())
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
    use boa_engine::string::JsStrVariant;
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

    /// Varied JSON: numbers of every kind, unicode, large strings, nested
    /// arrays and deep objects, names `from_json` shares and names that
    /// look like indices.
    fn varied() -> Vec<serde_json::Value> {
        let mut deep = json!({"leaf": [1, "x"]});
        for i in 0..100 {
            deep = json!({ format!("level{i}"): deep, "n": i });
        }
        let doc = |i: i64| {
            json!({
                "id": format!("f-{i}"), "type": "post", "n": i, "neg": -i, "f": 0.5 + i as f64,
                "text": "é日本語😀", "ok": i % 2 == 0, "none": null,
                "tags": [[1, [2, [3]]], {"a": {"b": {"c": []}}}], "empty": {},
            })
        };
        vec![
            json!([doc(1), doc(2), doc(3)]),
            doc(4),
            deep,
            json!({"big": 4_294_967_296_u64, "max_safe": 9_007_199_254_740_992_i64,
                   "min_safe": -9_007_199_254_740_992_i64, "tiny": 5e-324, "large": 1e300}),
            json!({"large string": "x".repeat(200_000), "utf16": "😀".repeat(1000)}),
            json!([[], [[]], [[], [[]]], {}, "", 0]),
        ]
    }

    /// Values `unchanged` must refuse, because `to_json` would write them
    /// otherwise: floats `to_json` writes as integers, `-0`, and names in
    /// an order JavaScript does not keep.
    fn written_otherwise() -> Vec<serde_json::Value> {
        vec![
            json!({"a": 1.0}),
            json!([{"a": -0.0}]),
            json!({"b": 1, "2": "index-like", "a": 2}),
            json!({"big": 9_007_199_254_740_993_u64}),
            json!({"huge": u64::MAX}),
            json!([i64::MIN]),
        ]
    }

    /// `unchanged` says `Some` only when `to_json` gives exactly the value
    /// (member order and number kinds included) and spends the same bytes,
    /// and says it for every freshly built value JSON can carry unchanged.
    #[test]
    fn unchanged_agrees_with_to_json() {
        let mut context = context();
        for (value, fresh) in varied()
            .into_iter()
            .map(|v| (v, true))
            .chain(written_otherwise().into_iter().map(|v| (v, false)))
        {
            let built = super::from_json(&value, &mut context);
            let spent = super::unchanged(&built, &value, &context);
            assert_eq!(spent.is_some(), fresh, "{value}");
            let mut budget = usize::MAX;
            let Ok(Some(back)) = super::to_json(&built, &mut budget, &mut context) else {
                panic!("{value} converts back")
            };
            if let Some(spent) = spent {
                assert_eq!(spent, usize::MAX - budget, "{value}");
                assert_eq!(
                    serde_json::to_string(&back).unwrap(),
                    serde_json::to_string(&value).unwrap()
                );
            }
        }
    }

    /// After a script changes the built value in a way `JSON.stringify`
    /// would show, `unchanged` refuses; where it still agrees, `to_json`
    /// gives the same text.
    #[test]
    fn unchanged_refuses_what_a_script_changed() {
        let value = json!([
            {"id": "a", "n": 1, "s": "é", "list": [1, 2], "o": {"x": null}},
            {"id": "b", "n": 2, "s": "t", "list": [], "o": {}},
        ]);
        for (script, shows) in [
            ("v[0].n = 2", true),
            ("v[0].n = 1.5", true),
            ("v[0].s = 'e'", true),
            ("v[1].s = 't'", false),
            ("v[0].id = 'a' + ''", false),
            ("v[0].extra = 1", true),
            ("delete v[1].o", true),
            ("v[0].list.push(3)", true),
            ("v[0].list.length = 1", true),
            ("v[0].list[1] = '2'", true),
            ("v.pop()", true),
            ("v.reverse()", true),
            ("v.foo = 1", false),
            ("v[0].o.x = undefined", true),
            ("v[0][5] = 1", true),
            (
                "Object.defineProperty(v[0], 'n', {enumerable: false})",
                true,
            ),
            (
                "Object.defineProperty(v[0], 'n', {get() { return 1 }})",
                false,
            ),
            ("Object.setPrototypeOf(v[1], {toJSON() { return 1 }})", true),
            ("Object.prototype.toJSON = function () { return 0 }", true),
            ("Array.prototype.toJSON = function () { return 0 }", true),
            ("v[0].o.toJSON = function () { return 0 }", true),
            ("Object.freeze(v[0])", false),
            ("delete v[1].id; v[1].id = 'b'", true),
        ] {
            let mut context = context();
            let built = super::from_json(&value, &mut context);
            context
                .global_object()
                .set(js_string!("v"), built.clone(), false, &mut context)
                .unwrap();
            context.eval(Source::from_bytes(script.as_bytes())).unwrap();
            let spent = super::unchanged(&built, &value, &context);
            let mut budget = usize::MAX;
            let back = match super::to_json(&built, &mut budget, &mut context) {
                Ok(Some(back)) => serde_json::to_string(&back).unwrap(),
                _ => panic!("{script}: converts back"),
            };
            let same = back == serde_json::to_string(&value).unwrap();
            assert_eq!(same, !shows, "{script}: {back}");
            if shows {
                assert_eq!(spent, None, "{script}");
            } else if let Some(spent) = spent {
                assert_eq!(spent, usize::MAX - budget, "{script}");
            }
        }
    }

    #[test]
    fn to_std_matches_the_escaping_conversion() {
        let lone_surrogate: &[u16] = &[0x61, 0xD800, 0x62];
        let mut cases: Vec<JsString> = ["", "plain ascii", "café", "ÿ\u{80}", "日本語", "emoji 😀"]
            .into_iter()
            .map(JsString::from)
            .collect();
        cases.push(JsString::from(lone_surrogate));
        // The same texts held as UTF-16, as boa holds source text: ASCII
        // ones take the narrowing path, the others decode.
        let texts = [
            "plain ascii",
            "\u{7f}~",
            "café",
            "ÿ\u{80}",
            "ā",
            "日本語",
            "emoji 😀",
        ];
        for text in texts {
            let units: Vec<u16> = text.encode_utf16().collect();
            let s = JsString::from(&units[..]);
            assert!(matches!(s.variant(), JsStrVariant::Utf16(_)), "{text}");
            assert_eq!(s.to_std(), text);
            assert_eq!(super::text(&s, true), Ok(text.to_owned()));
            assert_eq!(super::text(&s, false), Ok(text.to_owned()));
            cases.push(s);
        }
        assert_eq!(
            super::text(&JsString::from(lone_surrogate), true),
            Err(0xD800)
        );
        for s in cases {
            assert_eq!(s.to_std(), s.to_std_string_escaped(), "{s:?}");
        }
    }

    fn context() -> Context {
        Context::builder()
            .instructions_remaining(1_000_000)
            .build()
            .unwrap()
    }

    /// Converts `expr` with [`super::to_json`] in one fresh context and
    /// with `JSON.stringify` in another (the expression may have side
    /// effects, such as defining `Object.prototype.toJSON`), and checks
    /// that both give the same text, member order included.
    fn same_as_stringify(expr: &str) {
        let mut ours = context();
        let value = ours.eval(Source::from_bytes(expr.as_bytes())).unwrap();
        let mut budget = usize::MAX;
        let Ok(Some(converted)) = super::to_json(&value, &mut budget, &mut ours) else {
            panic!("{expr} converts")
        };
        let mut theirs = context();
        let value = theirs.eval(Source::from_bytes(expr.as_bytes())).unwrap();
        theirs
            .global_object()
            .set(js_string!("value"), value, false, &mut theirs)
            .unwrap();
        let text = theirs
            .eval(Source::from_bytes("JSON.stringify(value)"))
            .unwrap();
        let text = text.as_string().unwrap().to_std_string_escaped();
        assert_eq!(serde_json::to_string(&converted).unwrap(), text, "{expr}");
    }

    /// Plain objects skip the `toJSON` lookup and reuse their shape's
    /// names; each case is one the shortcut could get wrong.
    #[test]
    fn to_json_follows_stringify_where_the_plain_object_path_could_go_wrong() {
        for expr in [
            // A toJSON on Object.prototype, defined before converting.
            "Object.prototype.toJSON = function () { return 'P' }; [{a: 1}, {b: {c: 2}}]",
            // ... or by a getter, by a toJSON, by an array element's
            // getter, part way through: later objects see it.
            "(function () { var o = {a: {x: 1}, get b() { \
                Object.prototype.toJSON = function () { return 'late' }; return 1 }, \
                c: {y: 2}}; return [{z: 0}, o, {w: 3}] })()",
            "[{a: 1}, {toJSON() { Object.prototype.toJSON = () => 'late'; return 5 }}, {a: 1}]",
            "(function () { var a = [{x: 1}]; Object.defineProperty(a, 1, {enumerable: true, \
                get() { Object.prototype.toJSON = () => 'late'; return 0 }}); \
                return [a, {y: 1}] })()",
            // An accessor toJSON on Object.prototype is called.
            "Object.defineProperty(Object.prototype, 'toJSON', {configurable: true, \
                get() { return function () { return this.a * 2 } }}); [{a: 1}, {a: 2}]",
            // Own toJSON, as a method or returning the object itself after
            // changing it, among same-shaped siblings that have none.
            "[{a: 1, b: 2}, {a: 1, b: 2, toJSON() { return {c: 3} }}, {a: 3, b: 4}]",
            "[{a: 1}, {a: 1, toJSON() { this.b = 2; delete this.a; return this }}, {a: 5}]",
            // Getters, non-enumerable members, a getter deleting a later
            // member, symbols, integer-like names first in ascending order.
            "[{a: 1, get b() { return this.a + 1 }}, {a: 2, get b() { return this.a + 1 }}]",
            "(function () { var o = {a: 1, h: 2, c: 3}; \
                Object.defineProperty(o, 'h', {enumerable: false}); return [o, {a: 1, h: 2, c: 3}] })()",
            "({get a() { delete this.b; return 1 }, b: 2, c: 3})",
            "({[Symbol('s')]: 1, b: 1, 10: 'ten', a: 2, 2: 'two', '01': 'not an index'})",
            // Null prototypes, with and without an own toJSON.
            "(function () { var o = Object.create(null); o.a = 1; \
                var p = Object.create(null); p.a = 1; p.toJSON = () => 'p'; return [o, p, o] })()",
            // Class instances; a prototype given a toJSON; an object moved
            // to another prototype.
            "(function () { class A { constructor() { this.x = 1 } } \
                class B { constructor() { this.x = 1 } toJSON() { return 'b' } } \
                return [new A(), new B(), new A()] })()",
            "(function () { class A { constructor() { this.x = 1 } } var a = [new A(), new A()]; \
                A.prototype.toJSON = function () { return 'a' }; return a })()",
            "(function () { var o = {x: 1}, p = {x: 1}; \
                Object.setPrototypeOf(p, {toJSON() { return 'proto' }}); return [o, p, o] })()",
            // Exotic and boxed values next to plain ones.
            "[{d: new Date(0)}, {d: 1}, new Number(3), new String('s')]",
            "[new Proxy({a: 1, b: {c: 2}}, {}), {a: 1, b: {c: 2}}]",
            "[new Proxy({a: 1}, {get(t, k) { return k === 'a' ? 7 : t[k] }}), {a: 1}]",
        ] {
            same_as_stringify(expr);
        }
    }

    /// The name keys a context keeps stay within their bounds, however
    /// many and however long the names converted.
    #[test]
    fn name_keys_are_bounded() {
        let mut context = context();
        let long = "n".repeat(super::NameKeys::MAX_LEN + 1);
        for round in 0..3 {
            let many: serde_json::Map<String, serde_json::Value> = (0..100)
                .map(|i| (format!("name{round}-{i}"), json!(i)))
                .chain([(long.clone(), json!(round))])
                .collect();
            let value = json!([many.clone(), many]);
            let built = super::from_json(&value, &mut context);
            let mut budget = usize::MAX;
            let Ok(Some(back)) = super::to_json(&built, &mut budget, &mut context) else {
                panic!("round {round} converts back")
            };
            assert_eq!(back, value);
            let keys = super::kept::<super::NameKeys>(&mut context);
            let keys = keys.borrow();
            assert!(keys.entries.len() <= super::NameKeys::MAX);
            assert!(
                keys.entries
                    .iter()
                    .all(|e| e.text.len() <= super::NameKeys::MAX_LEN)
            );
        }
    }

    /// A name kept from one call converts in the next exactly as a fresh
    /// one does (non-ASCII and astral names included), and the values of
    /// the first call do not show in the second.
    #[test]
    fn a_name_kept_from_one_call_converts_the_same_in_the_next() {
        let names = ["id", "é", "ÿ\u{80}", "日本語", "😀", "2", "__proto__", ""];
        let doc = |round: i64| {
            let members: serde_json::Map<String, serde_json::Value> = names
                .iter()
                .map(|n| ((*n).to_owned(), json!(format!("{n}-{round}"))))
                .collect();
            json!([members.clone(), {"nested": members}])
        };
        let mut context = context();
        for round in 0..3 {
            let value = doc(round);
            let built = super::from_json(&value, &mut context);
            context
                .global_object()
                .set(js_string!("built"), built.clone(), false, &mut context)
                .unwrap();
            let text = serde_json::to_string(&value).unwrap();
            let check = format!(
                r#"
                var parsed = JSON.parse({text:?});
                JSON.stringify(built) === JSON.stringify(parsed)
                    && JSON.stringify(Object.keys(built[0])) === JSON.stringify(Object.keys(parsed[0]))
                    && Object.getPrototypeOf(built[0]) === Object.prototype
                    && built[0]['日本語'] === '日本語-{round}'
                "#
            );
            let result = context.eval(Source::from_bytes(check.as_bytes())).unwrap();
            assert_eq!(result, JsValue::from(true), "round {round}");
            let mut budget = usize::MAX;
            let Ok(Some(back)) = super::to_json(&built, &mut budget, &mut context) else {
                panic!("round {round} converts back")
            };
            assert_eq!(back, value);
        }
    }

    /// The shapes a context keeps give the same text in later calls as a
    /// fresh context gives, in the strict and in the escaping conversion
    /// whichever ran first (a name holding a lone surrogate is refused by
    /// one and escaped by the other), and stay within their bounds.
    #[test]
    fn kept_shapes_convert_the_same_in_later_calls() {
        let setup = r"
            var lone = String.fromCharCode(0xD800);
            var many = {}; for (var i = 0; i < 100; i++) many['k' + i] = i;
            var shapes = []; for (var j = 0; j < 40; j++) { var o = {}; o['s' + j] = j; shapes.push(o, o); }
            var l = {}; l['a' + lone] = 1; l.b = 2;
            var plain = [{a: 1, b: 'x'}, {'é': {'日本語': '😀'}}, many, many, shapes];
            var both = [plain, [l, {a: 1, b: 'x'}], [l]];
        ";
        let convert = |name: &str, strict: bool, context: &mut Context| {
            let value = context.eval(Source::from_bytes(name)).unwrap();
            let mut budget = usize::MAX;
            let converted = if strict {
                super::to_json(&value, &mut budget, context)
            } else {
                super::to_json_escaping(&value, &mut budget, context)
            };
            match converted {
                Ok(Some(v)) => Some(serde_json::to_string(&v).unwrap()),
                Err(super::ConvertError::Js(_)) => None,
                _ => panic!("{name}: neither converted nor refused"),
            }
        };
        let fresh = |name: &str, strict: bool| {
            let mut context = context();
            context.eval(Source::from_bytes(setup)).unwrap();
            convert(name, strict, &mut context)
        };
        let mut context = context();
        context.eval(Source::from_bytes(setup)).unwrap();
        for round in 0..4 {
            for name in ["plain", "both"] {
                let order = if round % 2 == 0 {
                    [false, true]
                } else {
                    [true, false]
                };
                for strict in order {
                    assert_eq!(
                        convert(name, strict, &mut context),
                        fresh(name, strict),
                        "{name}, strict {strict}, round {round}"
                    );
                }
            }
            let shapes = super::kept::<super::ShapeCache>(&mut context);
            let shapes = shapes.borrow();
            assert!(shapes.shapes.len() <= super::ShapeCache::MAX);
            assert!(
                shapes
                    .shapes
                    .iter()
                    .all(|s| s.names.len() <= super::ShapeCache::MAX_NAMES)
            );
        }
        assert!(fresh("plain", true).is_some() && fresh("both", true).is_none());
    }

    /// `from_json` shares names and repeated strings between objects; the
    /// objects must still be what `JSON.parse` builds when the names vary
    /// in order, nest, look like indices, or outnumber the names kept.
    #[test]
    fn from_json_over_varied_and_many_names() {
        let many: serde_json::Map<String, serde_json::Value> = (0..100)
            .map(|i| (format!("name{i}"), json!(format!("v{}", i % 3))))
            .collect();
        let value = json!([
            {"a": "x", "b": "y", "c": {"a": "x", "b": "z"}},
            {"b": "y", "a": "x", "10": "ten", "2": "two"},
            {"a": "x", "b": "y", "c": {"a": "x", "b": "z"}},
            many,
            {"a": "é", "b": "😀", "c": "x"},
            {"a": "é", "b": "😀", "c": "x"},
        ]);
        let mut context = context();
        let built = super::from_json(&value, &mut context);
        context
            .global_object()
            .set(js_string!("built"), built, false, &mut context)
            .unwrap();
        let text = serde_json::to_string(&value).unwrap();
        let check = format!(
            r#"
            var parsed = JSON.parse({text:?});
            var same = JSON.stringify(built) === JSON.stringify(parsed);
            for (var i = 0; i < parsed.length; i++) {{
                same = same && JSON.stringify(Object.keys(built[i])) === JSON.stringify(Object.keys(parsed[i]));
            }}
            built[0].a = 'changed';
            same && built[2].a === 'x' && built[0].c.a === 'x'
            "#
        );
        let result = context.eval(Source::from_bytes(check.as_bytes())).unwrap();
        assert_eq!(result, JsValue::from(true));
    }
}
