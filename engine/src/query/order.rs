//! Cosmos DB's total order over JSON values, without recursion.
//!
//! Types order as null < booleans (false < true) < numbers < strings < arrays
//! < objects; *undefined* (an absent value, `None`) sorts before all of them.
//! Numbers compare as doubles (`1 == 1.0`), strings ordinally by UTF-16 code
//! unit, arrays lexicographically, objects by their properties sorted by name
//! (so two objects are equal exactly when they are deep-equal regardless of
//! property order). Comparison walks nested values with an explicit stack, so
//! a deeply nested document cannot overflow the call stack.

use std::cmp::Ordering;

use serde_json::{Map, Value};

/// Rank of a value's type in the cross-type order.
pub(crate) fn type_rank(v: &Value) -> u8 {
    match v {
        Value::Null => 1,
        Value::Bool(_) => 2,
        Value::Number(_) => 3,
        Value::String(_) => 4,
        Value::Array(_) => 5,
        Value::Object(_) => 6,
    }
}

/// Compares two strings by UTF-16 code units (`string.CompareOrdinal`).
///
/// UTF-8 byte order is code point order, which agrees with UTF-16 order
/// except between U+E000..U+FFFF (lead bytes 0xEE, 0xEF) and supplementary
/// characters (lead bytes 0xF0..), whose surrogates sort lower.
pub(crate) fn cmp_str(a: &str, b: &str) -> Ordering {
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let n = ab.len().min(bb.len());
    let mut i = 0;
    while i + 8 <= n && ab[i..i + 8] == bb[i..i + 8] {
        i += 8;
    }
    while i < n && ab[i] == bb[i] {
        i += 1;
    }
    if i == n {
        return ab.len().cmp(&bb.len());
    }
    let (x, y) = (ab[i], bb[i]);
    match (x, y) {
        (0xEE | 0xEF, 0xF0..) => Ordering::Greater,
        (0xF0.., 0xEE | 0xEF) => Ordering::Less,
        _ => x.cmp(&y),
    }
}

fn cmp_numbers(a: &serde_json::Number, b: &serde_json::Number) -> Ordering {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return x.cmp(&y);
    }
    let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
    x.partial_cmp(&y).unwrap_or(Ordering::Equal)
}

/// Compares two scalars, or two values of different types; containers of the
/// same type give None (the caller descends into them).
fn cmp_shallow(a: &Value, b: &Value) -> Option<Ordering> {
    Some(match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Number(x), Value::Number(y)) => cmp_numbers(x, y),
        (Value::String(x), Value::String(y)) => cmp_str(x, y),
        (Value::Array(_), Value::Array(_)) | (Value::Object(_), Value::Object(_)) => return None,
        _ => type_rank(a).cmp(&type_rank(b)),
    })
}

fn sorted(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut v: Vec<_> = map.iter().collect();
    v.sort_unstable_by(|x, y| cmp_str(x.0, y.0));
    v
}

/// One level of the explicit comparison stack.
enum Frame<'a> {
    Arrays(&'a [Value], &'a [Value], usize),
    Objects(
        Vec<(&'a String, &'a Value)>,
        Vec<(&'a String, &'a Value)>,
        usize,
    ),
}

/// The total order described in the module docs.
pub(crate) fn cmp_values(a: &Value, b: &Value) -> Ordering {
    if let Some(o) = cmp_shallow(a, b) {
        return o;
    }
    let mut stack = vec![frame(a, b)];
    while let Some(top) = stack.last_mut() {
        let (x, y) = match top {
            Frame::Arrays(xs, ys, i) => {
                if *i >= xs.len() || *i >= ys.len() {
                    let o = xs.len().cmp(&ys.len());
                    if o != Ordering::Equal {
                        return o;
                    }
                    stack.pop();
                    continue;
                }
                *i += 1;
                (&xs[*i - 1], &ys[*i - 1])
            }
            Frame::Objects(xs, ys, i) => {
                if *i >= xs.len() || *i >= ys.len() {
                    let o = xs.len().cmp(&ys.len());
                    if o != Ordering::Equal {
                        return o;
                    }
                    stack.pop();
                    continue;
                }
                *i += 1;
                let ((kx, x), (ky, y)) = (xs[*i - 1], ys[*i - 1]);
                let o = cmp_str(kx, ky);
                if o != Ordering::Equal {
                    return o;
                }
                (x, y)
            }
        };
        match cmp_shallow(x, y) {
            Some(Ordering::Equal) => {}
            Some(o) => return o,
            None => stack.push(frame(x, y)),
        }
    }
    Ordering::Equal
}

fn frame<'a>(a: &'a Value, b: &'a Value) -> Frame<'a> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => Frame::Objects(sorted(x), sorted(y), 0),
        (Value::Array(x), Value::Array(y)) => Frame::Arrays(x, y, 0),
        _ => Frame::Arrays(&[], &[], 0),
    }
}

/// Compares possibly-undefined values: undefined first.
pub(crate) fn cmp_opt(a: Option<&Value>, b: Option<&Value>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => cmp_values(x, y),
    }
}

/// A value ordered by [`cmp_values`], for sets and maps (DISTINCT, GROUP BY).
#[derive(Clone, Debug)]
pub(crate) struct Ordered(pub(crate) Vec<Option<Value>>);

impl PartialEq for Ordered {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ordered {}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> Ordering {
        for (a, b) in self.0.iter().zip(&other.0) {
            let o = cmp_opt(a.as_ref(), b.as_ref());
            if o != Ordering::Equal {
                return o;
            }
        }
        self.0.len().cmp(&other.0.len())
    }
}

impl Drop for Ordered {
    fn drop(&mut self) {
        for v in self.0.drain(..).flatten() {
            dismantle(v);
        }
    }
}

/// Clones a value: recursively while shallow, with an explicit stack below
/// 64 levels, so deeply nested documents cannot overflow the call stack.
pub(crate) fn clone_value(v: &Value) -> Value {
    if nests_within(v, 64) {
        v.clone()
    } else {
        clone_deep(v)
    }
}

/// Whether `v` nests at most `limit` levels (recursing at most that deep).
fn nests_within(v: &Value, limit: usize) -> bool {
    match v {
        Value::Array(items) => limit > 0 && items.iter().all(|x| nests_within(x, limit - 1)),
        Value::Object(map) => limit > 0 && map.values().all(|x| nests_within(x, limit - 1)),
        _ => true,
    }
}

/// A container being cloned by [`clone_deep`].
enum Build<'a> {
    Array(std::slice::Iter<'a, Value>, Vec<Value>),
    Object(serde_json::map::Iter<'a>, Map<String, Value>, String),
}

fn build(v: &Value) -> Option<Build<'_>> {
    match v {
        Value::Array(items) => Some(Build::Array(items.iter(), Vec::with_capacity(items.len()))),
        Value::Object(map) => Some(Build::Object(
            map.iter(),
            Map::with_capacity(map.len()),
            String::new(),
        )),
        _ => None,
    }
}

fn add(frame: &mut Build<'_>, v: Value) {
    match frame {
        Build::Array(_, items) => items.push(v),
        Build::Object(_, map, key) => {
            map.insert(std::mem::take(key), v);
        }
    }
}

fn clone_deep(v: &Value) -> Value {
    let Some(root) = build(v) else {
        return v.clone();
    };
    let mut stack = vec![root];
    loop {
        let Some(top) = stack.last_mut() else {
            return Value::Null;
        };
        let child = match top {
            Build::Array(it, _) => it.next(),
            Build::Object(it, _, key) => it.next().map(|(k, x)| {
                *key = k.clone();
                x
            }),
        };
        match child {
            Some(c) => match build(c) {
                Some(frame) => stack.push(frame),
                None => add(top, c.clone()),
            },
            None => {
                let done = match stack.pop() {
                    Some(Build::Array(_, items)) => Value::Array(items),
                    Some(Build::Object(_, map, _)) => Value::Object(map),
                    None => return Value::Null,
                };
                match stack.last_mut() {
                    Some(parent) => add(parent, done),
                    None => return done,
                }
            }
        }
    }
}

/// Drops a value without recursion (serde_json's own drop recurses, which a
/// deeply nested value would overflow).
pub(crate) fn dismantle(v: Value) {
    let is_container = |v: &Value| matches!(v, Value::Array(_) | Value::Object(_));
    if !is_container(&v) {
        return;
    }
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items.into_iter().filter(is_container)),
            Value::Object(map) => {
                stack.extend(map.into_iter().map(|(_, x)| x).filter(is_container))
            }
            _ => {}
        }
    }
}

/// A Cow into an owned value, cloning borrowed values stack-safely.
pub(crate) fn own(v: std::borrow::Cow<'_, Value>) -> Value {
    match v {
        std::borrow::Cow::Borrowed(b) => clone_value(b),
        std::borrow::Cow::Owned(o) => o,
    }
}

/// Deepest value copied into a value the query constructs (`[c.x]`,
/// `{"a": c.x}`, `ARRAY_SLICE`, UDF arguments); deeper values count as
/// undefined there. This keeps every intermediate value the engine owns (and
/// drops recursively) shallow; values returned as results are copied by
/// [`clone_value`] at any depth.
pub(crate) const CONSTRUCT_DEPTH: usize = 256;

/// Clones `v` if it nests at most `limit` levels, recursing at most that deep.
pub(crate) fn clone_capped(v: &Value, limit: usize) -> Option<Value> {
    match v {
        Value::Array(items) => {
            let limit = limit.checked_sub(1)?;
            let mut out = Vec::with_capacity(items.len());
            for x in items {
                out.push(clone_capped(x, limit)?);
            }
            Some(Value::Array(out))
        }
        Value::Object(map) => {
            let limit = limit.checked_sub(1)?;
            let mut out = Map::with_capacity(map.len());
            for (k, x) in map {
                out.insert(k.clone(), clone_capped(x, limit)?);
            }
            Some(Value::Object(out))
        }
        scalar => Some(scalar.clone()),
    }
}

/// Like [`own`] for values placed inside constructed values: None when the
/// borrowed value nests deeper than [`CONSTRUCT_DEPTH`].
pub(crate) fn own_capped(v: std::borrow::Cow<'_, Value>) -> Option<Value> {
    match v {
        std::borrow::Cow::Borrowed(b) => clone_capped(b, CONSTRUCT_DEPTH),
        std::borrow::Cow::Owned(o) => Some(o),
    }
}
