//! Numbers as a JavaScript procedure stores them, for both sandboxes.
//!
//! A JavaScript number is an `f64`, and `JSON.stringify` writes an integral
//! one without a fraction (`100`, never `100.0`) and `-0` as `0`. Documents
//! a script writes go through [`json_number`], and so do documents a
//! WebAssembly guest writes: a guest that passes `1e2` or `-0.0` through
//! as text (the Rust SDK's `RawDoc` does) stores what the same procedure
//! in JavaScript stores. Integers outside `±2^53`, which JavaScript cannot
//! hold exactly, are kept exact from WebAssembly (only a float is
//! normalized).

use serde_json::{Number, Value};

/// The largest integer an `f64` holds exactly (2^53).
const MAX_SAFE: f64 = 9_007_199_254_740_992.0;

/// `n` as JSON stores a JavaScript number: integral values within ±2^53
/// as integers (`-0` as `0`), other finite values as floats, NaN and the
/// infinities as `null`.
pub(crate) fn json_number(n: f64) -> Value {
    if n.is_finite() && n.fract() == 0.0 && n.abs() <= MAX_SAFE {
        // In range and integral: exact (and `-0 as i64` is 0).
        #[allow(clippy::cast_possible_truncation)]
        return Value::from(n as i64);
    }
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn integral_floats_become_integers_as_json_stringify_writes_them() {
        assert_eq!(json_number(100.0), json!(100));
        assert_eq!(json_number(-0.0), json!(0));
        assert_eq!(json_number(-0.0).to_string(), "0");
        assert_eq!(json_number(2.5), json!(2.5));
        assert_eq!(json_number(MAX_SAFE), json!(9_007_199_254_740_992_i64));
        assert_eq!(json_number(MAX_SAFE * 2.0), json!(18_014_398_509_481_984.0));
        assert_eq!(json_number(f64::NAN), Value::Null);
        assert_eq!(json_number(f64::NEG_INFINITY), Value::Null);
    }
}
