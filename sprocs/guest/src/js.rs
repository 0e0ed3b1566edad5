//! JavaScript's value conversions, for procedures ported from JavaScript
//! that must store exactly what the original stores.
//!
//! `post.commentCount++` on a missing field stores `null` (NaN), on `"5"`
//! stores `6`; `'/docs/' + postId` turns a number into `"7"`. These
//! helpers reproduce those conversions on JSON values (JavaScript's
//! `ToNumber`, `ToString` and `JSON.stringify` of a number), so a Rust port
//! writes the same documents as the script it replaces.

use serde_json::{Number, Value};

/// The largest integer a JavaScript number holds exactly (2^53).
const MAX_SAFE: f64 = 9_007_199_254_740_992.0;

/// JavaScript's `ToNumber` of a JSON value (`None` is `undefined`): numbers
/// as they are, `null` 0, booleans 0 or 1, numeric strings parsed (empty
/// is 0), a one-element array as its element; anything else NaN.
pub fn to_number(value: Option<&Value>) -> f64 {
    match value {
        None => f64::NAN,
        Some(Value::Null) => 0.0,
        Some(Value::Bool(b)) => f64::from(u8::from(*b)),
        Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        Some(Value::String(s)) => string_to_number(s),
        Some(Value::Array(items)) => match items.as_slice() {
            [] => 0.0,
            [only] => string_to_number(&to_js_string(only)),
            _ => f64::NAN,
        },
        Some(Value::Object(_)) => f64::NAN,
    }
}

fn string_to_number(s: &str) -> f64 {
    let s = s.trim();
    if s.is_empty() {
        return 0.0;
    }
    let (sign, unsigned) = match s.strip_prefix('-') {
        Some(rest) => (-1.0, rest),
        None => (1.0, s.strip_prefix('+').unwrap_or(s)),
    };
    if unsigned == "Infinity" {
        return sign * f64::INFINITY;
    }
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = s.strip_prefix(prefix) {
            // Signs are not allowed with a radix prefix.
            return u64::from_str_radix(digits, radix).map_or(f64::NAN, |n| n as f64);
        }
    }
    let decimal = unsigned
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    match unsigned.parse::<f64>() {
        Ok(n) if decimal => sign * n,
        _ => f64::NAN,
    }
}

/// A JavaScript number as JSON stores it: integers without a fraction,
/// NaN and the infinities as `null` (what `JSON.stringify` writes).
pub fn number(n: f64) -> Value {
    if !n.is_finite() {
        return Value::Null;
    }
    if n.fract() == 0.0 && n.abs() <= MAX_SAFE {
        // Exact: |n| <= 2^53. `-0` becomes 0, as JSON.stringify writes it.
        return Value::from(n as i64);
    }
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

/// `value++` on a field: `to_number(value) + 1`, as JSON stores it.
pub fn increment(value: Option<&Value>) -> Value {
    number(to_number(value) + 1.0)
}

/// JavaScript's `String(value)` (`'' + value`) of a JSON value.
pub fn to_js_string(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => number_to_string(n),
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Null => String::new(),
                other => to_js_string(other),
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".to_owned(),
    }
}

fn number_to_string(n: &Number) -> String {
    if n.is_i64() || n.is_u64() {
        let f = n.as_f64().unwrap_or(f64::NAN);
        if f.abs() < 1e21 {
            // JavaScript prints integers below 1e21 in full, after rounding
            // to the nearest double.
            return format!("{f:.0}");
        }
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    if f.fract() == 0.0 && f.abs() < 1e21 {
        return format!("{f:.0}");
    }
    js_float(f)
}

/// Shortest round-trip digits in JavaScript's layout (exponent form below
/// 1e-6 and from 1e21).
fn js_float(f: f64) -> String {
    let abs = f.abs();
    if (1e-6..1e21).contains(&abs) {
        return format!("{f}");
    }
    // Rust's `{:e}` is the shortest round-trip mantissa, like JavaScript's.
    let s = format!("{f:e}");
    match s.split_once('e') {
        Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn increment_follows_javascript() {
        let cases = [
            (Some(json!(1)), json!(2)),
            (Some(json!(1.5)), json!(2.5)),
            (Some(json!(-1)), json!(0)),
            (Some(json!(null)), json!(1)),
            (Some(json!(true)), json!(2)),
            (Some(json!("5")), json!(6)),
            (Some(json!(" 0x10 ")), json!(17)),
            (Some(json!("")), json!(1)),
            (Some(json!("abc")), json!(null)),
            (Some(json!("inf")), json!(null)),
            (Some(json!("-Infinity")), json!(null)),
            (Some(json!([4])), json!(5)),
            (Some(json!([1, 2])), json!(null)),
            (Some(json!({})), json!(null)),
            (None, json!(null)),
            (
                Some(json!(9007199254740992_u64)),
                json!(9007199254740992_u64),
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(increment(input.as_ref()), expected, "{input:?}++");
        }
    }

    #[test]
    fn strings_follow_javascript() {
        let cases = [
            (json!("p1"), "p1"),
            (json!(7), "7"),
            (json!(-7), "-7"),
            (json!(7.0), "7"),
            (json!(0.5), "0.5"),
            (json!(1e21), "1e+21"),
            (json!(1.5e-7), "1.5e-7"),
            (json!(null), "null"),
            (json!(false), "false"),
            (json!([1, null, "a"]), "1,,a"),
            (json!({"a": 1}), "[object Object]"),
        ];
        for (input, expected) in cases {
            assert_eq!(to_js_string(&input), expected, "String({input})");
        }
    }
}
