//! Expression evaluation with Cosmos DB's *undefined* and three-valued logic.
//!
//! A value is [`Val`]: `None` is undefined, otherwise a [`Cow`] that borrows
//! from the document, the parameters or the query's literals whenever it can,
//! so filtering a document never copies it. Operators applied to the wrong
//! types give undefined; comparisons of different types give undefined; AND
//! and OR follow the three-valued tables of the reference. Recursion follows
//! the expression tree, whose depth the parser bounds.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::query::ast::{BinOp, Expr, UnOp};
use crate::query::order::{cmp_str, cmp_values, own_capped, type_rank};
use crate::query::{Params, QueryError, Udf, functions};

/// A possibly-undefined value.
pub(crate) type Val<'a> = Option<Cow<'a, Value>>;

/// Everything an expression can read besides the row.
#[derive(Clone, Copy)]
pub(crate) struct Cx<'a> {
    pub(crate) params: &'a Params,
    /// Values of the query's parameters, by [`Expr::Param`] index.
    pub(crate) bound: &'a [Option<&'a Value>],
    pub(crate) udf: Option<&'a dyn Udf>,
    /// Aggregate results of the current group.
    pub(crate) aggs: &'a [Option<Value>],
    /// GROUP BY key values of the current group.
    pub(crate) groups: &'a [Option<Value>],
    /// The clock as the query execution first read it (ticks), so every
    /// `GetCurrentDateTime()` of one execution agrees.
    pub(crate) now: &'a OnceCell<i64>,
}

impl<'a> Cx<'a> {
    /// Looks a parameter up by name, with or without its leading `@`.
    pub(crate) fn param(&self, name: &str) -> Option<&'a Value> {
        lookup_param(self.params, name)
    }
}

/// Looks a parameter up, with or without its leading `@`.
pub(crate) fn lookup_param<'p>(params: &'p Params, name: &str) -> Option<&'p Value> {
    params
        .get(name)
        .or_else(|| params.get(name.trim_start_matches('@')))
}

const MAX_SAFE: f64 = 9_007_199_254_740_992.0;

/// A double as JSON: integral values within ±2^53 become integers; NaN and
/// infinities are undefined (JSON cannot hold them).
pub(crate) fn number(n: f64) -> Option<Value> {
    if !n.is_finite() {
        return None;
    }
    if n.fract() == 0.0 && n.abs() <= MAX_SAFE {
        return Some(Value::from(n as i64));
    }
    serde_json::Number::from_f64(n).map(Value::Number)
}

/// JSON text of a value (for `TOSTRING`); values nested too deeply for the
/// serializer become an empty string rather than overflowing the stack.
pub(crate) fn to_json_string(v: &Value) -> String {
    if depth_exceeds(v, 100) {
        String::new()
    } else {
        v.to_string()
    }
}

/// Whether `v` nests deeper than `limit` levels (iterative).
pub(crate) fn depth_exceeds(v: &Value, limit: usize) -> bool {
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        if d > limit {
            return true;
        }
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, d + 1))),
            Value::Object(map) => stack.extend(map.values().map(|i| (i, d + 1))),
            _ => {}
        }
    }
    false
}

fn boolean<'a>(b: bool) -> Val<'a> {
    Some(Cow::Owned(Value::Bool(b)))
}

fn as_bool(v: &Val<'_>) -> Option<bool> {
    v.as_deref().and_then(Value::as_bool)
}

/// Property lookup: a linear scan for small objects (cheaper than hashing).
fn get<'v>(map: &'v Map<String, Value>, name: &str) -> Option<&'v Value> {
    if map.len() <= 12 {
        map.iter().find(|(k, _)| k.as_str() == name).map(|(_, v)| v)
    } else {
        map.get(name)
    }
}

/// `base.name` on an evaluated value.
pub(crate) fn prop<'a>(base: Val<'a>, name: &str) -> Val<'a> {
    match base? {
        Cow::Borrowed(v) => get(v.as_object()?, name).map(Cow::Borrowed),
        Cow::Owned(Value::Object(mut map)) => map.swap_remove(name).map(Cow::Owned),
        Cow::Owned(_) => None,
    }
}

/// `base[index]` on an evaluated value.
fn index<'a>(base: Val<'a>, idx: &Value) -> Val<'a> {
    match idx {
        Value::String(name) => prop(base, name),
        Value::Number(n) => {
            let f = n.as_f64()?;
            if f < 0.0 || f.fract() != 0.0 || f > usize::MAX as f64 {
                return None;
            }
            let i = f as usize;
            match base? {
                Cow::Borrowed(v) => v.as_array()?.get(i).map(Cow::Borrowed),
                Cow::Owned(Value::Array(mut items)) => {
                    (i < items.len()).then(|| Cow::Owned(items.swap_remove(i)))
                }
                Cow::Owned(_) => None,
            }
        }
        _ => None,
    }
}

/// `=` semantics: undefined unless both sides have the same type.
pub(crate) fn equals(a: &Value, b: &Value) -> Option<bool> {
    (type_rank(a) == type_rank(b)).then(|| cmp_values(a, b) == Ordering::Equal)
}

/// `<` family: only same-typed scalars compare.
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Null, Value::Null) => Some(Ordering::Equal),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(cmp_str(x, y)),
        _ => None,
    }
}

/// JavaScript's ToInt32.
fn to_i32(n: f64) -> i32 {
    if !n.is_finite() {
        return 0;
    }
    (n.trunc().rem_euclid(4_294_967_296.0) as u64 as u32) as i32
}

fn binary<'a>(op: BinOp, l: Val<'a>, r: Val<'a>) -> Val<'a> {
    let (l, r) = (l?, r?);
    match op {
        BinOp::Eq => equals(&l, &r).and_then(boolean),
        BinOp::Ne => equals(&l, &r).and_then(|b| boolean(!b)),
        BinOp::Lt => compare(&l, &r).and_then(|o| boolean(o == Ordering::Less)),
        BinOp::Le => compare(&l, &r).and_then(|o| boolean(o != Ordering::Greater)),
        BinOp::Gt => compare(&l, &r).and_then(|o| boolean(o == Ordering::Greater)),
        BinOp::Ge => compare(&l, &r).and_then(|o| boolean(o != Ordering::Less)),
        BinOp::Concat => match (&*l, &*r) {
            (Value::String(a), Value::String(b)) => {
                Some(Cow::Owned(Value::String(format!("{a}{b}"))))
            }
            _ => None,
        },
        BinOp::And | BinOp::Or => None, // handled with short-circuit in `eval`
        _ => {
            let (a, b) = (l.as_f64()?, r.as_f64()?);
            let n = match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a * b,
                BinOp::Div => a / b,
                BinOp::Mod => a % b,
                BinOp::BitAnd => f64::from(to_i32(a) & to_i32(b)),
                BinOp::BitOr => f64::from(to_i32(a) | to_i32(b)),
                BinOp::BitXor => f64::from(to_i32(a) ^ to_i32(b)),
                BinOp::Shl => f64::from(to_i32(a).wrapping_shl(to_i32(b) as u32 & 31)),
                BinOp::Shr => f64::from(to_i32(a).wrapping_shr(to_i32(b) as u32 & 31)),
                BinOp::UShr => f64::from((to_i32(a) as u32).wrapping_shr(to_i32(b) as u32 & 31)),
                _ => return None,
            };
            number(n).map(Cow::Owned)
        }
    }
}

/// Evaluates `e` against a row of FROM bindings.
///
/// Property paths over bindings (`c.a.b`), literals and parameters, the
/// bulk of what queries evaluate per document, take a small inlined fast
/// path; everything else goes through [`eval_full`].
#[inline]
pub(crate) fn eval<'a>(e: &'a Expr, cx: &Cx<'a>, row: &[&'a Value]) -> Result<Val<'a>, QueryError> {
    match e {
        Expr::Lit(v) => Ok(Some(Cow::Borrowed(&**v))),
        Expr::Param(i) => Ok(cx.bound.get(*i).copied().flatten().map(Cow::Borrowed)),
        Expr::Slot(_) | Expr::Prop(..) => match path(e, row) {
            Ok(v) => Ok(v.map(Cow::Borrowed)),
            Err(()) => eval_full(e, cx, row),
        },
        _ => eval_full(e, cx, row),
    }
}

/// A pure property path over a binding, or `Err` for anything else.
fn path<'a>(e: &'a Expr, row: &[&'a Value]) -> Result<Option<&'a Value>, ()> {
    match e {
        Expr::Slot(i) => Ok(row.get(*i).copied()),
        Expr::Prop(base, name) => Ok(path(base, row)?.and_then(|v| get(v.as_object()?, name))),
        _ => Err(()),
    }
}

#[inline(never)]
fn eval_full<'a>(e: &'a Expr, cx: &Cx<'a>, row: &[&'a Value]) -> Result<Val<'a>, QueryError> {
    Ok(match e {
        Expr::Lit(v) => Some(Cow::Borrowed(&**v)),
        Expr::Undefined | Expr::Var(_) | Expr::Agg(..) => None,
        Expr::Param(i) => cx.bound.get(*i).copied().flatten().map(Cow::Borrowed),
        Expr::Slot(i) => row.get(*i).map(|v| Cow::Borrowed(*v)),
        Expr::Prop(base, name) => prop(eval(base, cx, row)?, name),
        Expr::Index(base, idx) => {
            let b = eval(base, cx, row)?;
            match eval(idx, cx, row)? {
                Some(i) => index(b, &i),
                None => None,
            }
        }
        Expr::Unary(op, x) => {
            let v = eval(x, cx, row)?;
            match (op, v.as_deref()) {
                (UnOp::Not, Some(Value::Bool(b))) => boolean(!b),
                (UnOp::Neg, Some(Value::Number(n))) => {
                    n.as_f64().and_then(|n| number(-n)).map(Cow::Owned)
                }
                (UnOp::Plus, Some(Value::Number(_))) => v,
                (UnOp::BitNot, Some(Value::Number(n))) => n
                    .as_f64()
                    .and_then(|n| number(f64::from(!to_i32(n))))
                    .map(Cow::Owned),
                _ => None,
            }
        }
        Expr::Binary(BinOp::And, l, r) => {
            let a = as_bool(&eval(l, cx, row)?);
            if a == Some(false) {
                return Ok(boolean(false));
            }
            match (a, as_bool(&eval(r, cx, row)?)) {
                (_, Some(false)) => boolean(false),
                (Some(true), Some(true)) => boolean(true),
                _ => None,
            }
        }
        Expr::Binary(BinOp::Or, l, r) => {
            let a = as_bool(&eval(l, cx, row)?);
            if a == Some(true) {
                return Ok(boolean(true));
            }
            match (a, as_bool(&eval(r, cx, row)?)) {
                (_, Some(true)) => boolean(true),
                (Some(false), Some(false)) => boolean(false),
                _ => None,
            }
        }
        Expr::Binary(op, l, r) => {
            let a = eval(l, cx, row)?;
            let b = eval(r, cx, row)?;
            binary(*op, a, b)
        }
        Expr::In {
            expr,
            list,
            negated,
        } => {
            let Some(x) = eval(expr, cx, row)? else {
                return Ok(None);
            };
            let mut found = false;
            for item in list {
                if let Some(v) = eval(item, cx, row)?
                    && equals(&x, &v) == Some(true)
                {
                    found = true;
                    break;
                }
            }
            boolean(found != *negated)
        }
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let x = eval(expr, cx, row)?;
            let lo = eval(low, cx, row)?;
            let hi = eval(high, cx, row)?;
            let (Some(x), Some(lo), Some(hi)) = (x, lo, hi) else {
                return Ok(None);
            };
            match (compare(&x, &lo), compare(&x, &hi)) {
                (Some(a), Some(b)) => {
                    boolean((a != Ordering::Less && b != Ordering::Greater) != *negated)
                }
                _ => None,
            }
        }
        Expr::Like {
            expr,
            pattern,
            escape,
            negated,
        } => {
            let x = eval(expr, cx, row)?;
            let p = eval(pattern, cx, row)?;
            match (x.as_deref(), p.as_deref()) {
                (Some(Value::String(s)), Some(Value::String(p))) => {
                    boolean(like(s, p, *escape) != *negated)
                }
                _ => None,
            }
        }
        Expr::Ternary(c, a, b) => {
            if as_bool(&eval(c, cx, row)?) == Some(true) {
                eval(a, cx, row)?
            } else {
                eval(b, cx, row)?
            }
        }
        Expr::Coalesce(a, b) => match eval(a, cx, row)? {
            Some(v) => Some(v),
            None => eval(b, cx, row)?,
        },
        Expr::Object(props) => {
            let mut map = Map::with_capacity(props.len());
            for (k, x) in props {
                if let Some(v) = eval(x, cx, row)?.and_then(own_capped) {
                    map.insert(k.clone(), v);
                }
            }
            Some(Cow::Owned(Value::Object(map)))
        }
        Expr::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for x in items {
                if let Some(v) = eval(x, cx, row)?.and_then(own_capped) {
                    out.push(v);
                }
            }
            Some(Cow::Owned(Value::Array(out)))
        }
        Expr::Call(f, args) => {
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(eval(a, cx, row)?);
            }
            functions::call(*f, &vals, &|| {
                *cx.now.get_or_init(crate::query::datetime::now)
            })
        }
        Expr::Udf(name, args) => {
            let Some(udf) = cx.udf else {
                return Err(QueryError::UnknownUdf(name.clone()));
            };
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(eval(a, cx, row)?.and_then(own_capped));
            }
            udf.call(name, &vals)
                .map_err(|message| QueryError::Udf {
                    name: name.clone(),
                    message,
                })?
                .map(Cow::Owned)
        }
        Expr::Subquery(kind, q) => crate::query::exec::subquery(*kind, q, cx, row)?.map(Cow::Owned),
        Expr::RawSubquery(..) => None,
        Expr::AggRef(i) => cx.aggs.get(*i).and_then(Option::as_ref).map(Cow::Borrowed),
        Expr::GroupKey(i) => cx
            .groups
            .get(*i)
            .and_then(Option::as_ref)
            .map(Cow::Borrowed),
    })
}

/// One element of a LIKE pattern.
enum Pat {
    Any,
    One,
    Char(char),
    Class(bool, Vec<(char, char)>),
}

fn compile_like(p: &str, escape: Option<char>) -> Vec<Pat> {
    let chars: Vec<char> = p.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if Some(c) == escape && i < chars.len() {
            out.push(Pat::Char(chars[i]));
            i += 1;
            continue;
        }
        match c {
            '%' => out.push(Pat::Any),
            '_' => out.push(Pat::One),
            '[' => {
                let Some(end) = chars[i..].iter().position(|&x| x == ']') else {
                    out.push(Pat::Char('['));
                    continue;
                };
                let body = &chars[i..i + end];
                i += end + 1;
                let (neg, body) = match body.first() {
                    Some('^') => (true, &body[1..]),
                    _ => (false, body),
                };
                let mut ranges = Vec::new();
                let mut j = 0;
                while j < body.len() {
                    if j + 2 < body.len() && body[j + 1] == '-' {
                        ranges.push((body[j], body[j + 2]));
                        j += 3;
                    } else {
                        ranges.push((body[j], body[j]));
                        j += 1;
                    }
                }
                out.push(Pat::Class(neg, ranges));
            }
            c => out.push(Pat::Char(c)),
        }
    }
    out
}

/// SQL LIKE: `%` any run, `_` one character, `[a-f]` / `[^abc]` classes.
pub(crate) fn like(s: &str, pattern: &str, escape: Option<char>) -> bool {
    let pat = compile_like(pattern, escape);
    let text: Vec<char> = s.chars().collect();
    let matches_one = |p: &Pat, c: char| match p {
        Pat::One => true,
        Pat::Char(x) => *x == c,
        Pat::Class(neg, ranges) => ranges.iter().any(|&(a, b)| a <= c && c <= b) != *neg,
        Pat::Any => false,
    };
    let (mut t, mut p) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pat.len() && matches!(pat[p], Pat::Any) {
            star = Some((p, t));
            p += 1;
        } else if p < pat.len() && matches_one(&pat[p], text[t]) {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|x| matches!(x, Pat::Any))
}
