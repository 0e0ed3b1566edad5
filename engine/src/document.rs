//! Documents: JSON objects with an `id` and the system properties the engine
//! maintains.
//!
//! A document is a JSON object with a string `id` of 1 to 255 characters
//! containing none of `/ \ ? #`, unique within its logical partition. On every
//! write the engine sets, as Cosmos DB does:
//!
//! | property | meaning |
//! |---|---|
//! | `_rid` | resource id; fixed for the document's life (a replace keeps it), new after delete and re-create |
//! | `_self` | `dbs/{db}/colls/{container}/docs/{_rid}/` |
//! | `_etag` | changes on every write; the `If-Match` precondition compares it |
//! | `_ts` | seconds since the Unix epoch of the last write |
//!
//! Values a caller puts in these properties are overwritten. Stored
//! documents are immutable and shared ([`Document`] is a cheap `Arc` clone).

use std::io;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// The largest document, serialized as JSON, that the engine accepts (2 MB, as Cosmos DB).
pub const MAX_DOCUMENT_SIZE: usize = 2 * 1024 * 1024;

/// The longest document or container id, in characters.
pub const MAX_ID_LEN: usize = 255;

pub use host_api::Document;

/// Checks a document or container id: 1 to 255 characters, none of `/ \ ? #`.
///
/// # Errors
/// A message naming what is wrong with the id.
pub fn validate_id(id: &str) -> Result<(), String> {
    let len = id.chars().count();
    if len == 0 {
        return Err("id must not be empty".to_owned());
    }
    if len > MAX_ID_LEN {
        return Err(format!(
            "id is {len} characters long, over the limit of {MAX_ID_LEN}"
        ));
    }
    if let Some(c) = id.chars().find(|c| matches!(c, '/' | '\\' | '?' | '#')) {
        return Err(format!(
            "id {id:?} contains {c:?}; ids must not contain / \\ ? or #"
        ));
    }
    Ok(())
}

/// Seconds since the Unix epoch.
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// How deeply objects and arrays may nest in a document (Cosmos DB's limit).
pub const MAX_NESTING: usize = 128;

/// The length of `value` serialized as compact JSON, or `None` when it nests
/// deeper than [`MAX_NESTING`]. Checking depth first is what makes the
/// recursive serializer, comparisons and `drop` safe on stored documents.
pub(crate) fn checked_len(value: &Value) -> Option<usize> {
    fn walk(value: &Value, depth: usize) -> Option<usize> {
        match value {
            Value::Array(items) => {
                if depth >= MAX_NESTING {
                    return None;
                }
                let mut len = 2 + items.len().saturating_sub(1);
                for item in items {
                    len += walk(item, depth + 1)?;
                }
                Some(len)
            }
            Value::Object(map) => {
                if depth >= MAX_NESTING {
                    return None;
                }
                let mut len = 2 + map.len().saturating_sub(1);
                for (k, v) in map {
                    len += string_len(k) + 1 + walk(v, depth + 1)?;
                }
                Some(len)
            }
            Value::String(s) => Some(string_len(s)),
            scalar => Some(serialized_len(scalar)),
        }
    }
    walk(value, 0)
}

/// Drops a value of any depth without recursion (the derived `Drop` of a
/// `Value` recurses and overflows the stack on a hostile, deeply nested one).
pub(crate) fn drop_deep(value: Value) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// The length of `value` serialized as compact JSON (exactly what
/// `serde_json::to_string` produces), computed without building the text.
/// Recursive: only for values whose depth is known to be bounded.
///
/// Every write needs a document's size (for the 2 MB limit and for read
/// statistics), and serializing just to count was the most expensive step of
/// an in-memory write.
pub(crate) fn serialized_len(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => number_len(n),
        Value::String(s) => string_len(s),
        Value::Array(items) => {
            // Brackets and the commas between items.
            2 + items.len().saturating_sub(1) + items.iter().map(serialized_len).sum::<usize>()
        }
        Value::Object(map) => {
            // Braces, commas, and a colon per member.
            2 + map.len().saturating_sub(1)
                + map
                    .iter()
                    .map(|(k, v)| string_len(k) + 1 + serialized_len(v))
                    .sum::<usize>()
        }
    }
}

/// A JSON string's length with quotes and serde_json's escapes: `\"` and
/// `\\`, two-character escapes for `\b \t \n \f \r`, `\u00XX` for the
/// other control characters.
pub(crate) fn string_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    if escape_free(bytes) {
        return s.len() + 2;
    }
    let extra: usize = bytes
        .iter()
        .filter(|&&b| byte_needs_escape(b))
        .map(|&b| match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 1,
            _ => 5,
        })
        .sum();
    s.len() + 2 + extra
}

/// Whether no byte of `bytes` needs escaping in a JSON string, checked
/// eight bytes at a time: most strings need no escapes at all.
fn escape_free(bytes: &[u8]) -> bool {
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        if word_needs_escape(word) {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| !byte_needs_escape(b))
}

/// `value` as compact JSON text, byte for byte what `serde_json::to_string`
/// writes, given its length `len` (which every write already knows from
/// [`checked_len`] and the stamp). Recursive: only for depth-checked values.
///
/// Durable writes store each document's text. serde_json's serializer goes
/// through `io::Write` one token at a time and escapes strings a byte at a
/// time; this writes into a buffer of the right size and copies strings
/// that need no escaping (almost all) whole: about a fifth of the
/// instructions.
pub(crate) fn to_text(value: &Value, len: usize) -> String {
    let mut out = Vec::with_capacity(len);
    write_value(&mut out, value);
    debug_assert_eq!(out.len(), len, "length bookkeeping");
    // Only whole UTF-8 strings and ASCII were written.
    let text = String::from_utf8(out).expect("JSON text is UTF-8");
    debug_assert_eq!(
        text,
        serde_json::to_string(value).expect("a Value serializes"),
        "to_text must match serde_json"
    );
    text
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, key);
                out.push(b':');
                write_value(out, item);
            }
            out.push(b'}');
        }
    }
}

fn write_number(out: &mut Vec<u8>, n: &serde_json::Number) {
    fn digits(out: &mut Vec<u8>, mut v: u64) {
        let mut buf = [0u8; 20];
        let mut at = buf.len();
        loop {
            at -= 1;
            buf[at] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        out.extend_from_slice(&buf[at..]);
    }
    if let Some(v) = n.as_u64() {
        digits(out, v);
    } else if let Some(v) = n.as_i64() {
        out.push(b'-');
        digits(out, v.unsigned_abs());
    } else {
        // Floats (rare in documents): serde_json's own formatter, so the
        // two can never disagree. Writing to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, n);
    }
}

/// A JSON string with serde_json's escapes: `\"` and `\\`, the
/// two-character escapes for `\b \t \n \f \r`, `\u00xx` (lower-case hex)
/// for the other control characters, everything else as it is.
fn write_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    if escape_free(bytes) {
        out.extend_from_slice(bytes);
    } else {
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if !byte_needs_escape(b) {
                continue;
            }
            out.extend_from_slice(&bytes[start..i]);
            start = i + 1;
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x09 => out.extend_from_slice(b"\\t"),
                0x0a => out.extend_from_slice(b"\\n"),
                0x0c => out.extend_from_slice(b"\\f"),
                0x0d => out.extend_from_slice(b"\\r"),
                _ => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    out.extend_from_slice(b"\\u00");
                    out.push(HEX[usize::from(b >> 4)]);
                    out.push(HEX[usize::from(b & 0xf)]);
                }
            }
        }
        out.extend_from_slice(&bytes[start..]);
    }
    out.push(b'"');
}

fn byte_needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Whether any byte of `word` is below 0x20, a `"` or a `\\` (the classic
/// "has a byte less than n" and "has a zero byte" bit tricks).
fn word_needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS != 0;
    let below_0x20 = word.wrapping_sub(ONES * 0x20) & !word & HIGHS != 0;
    below_0x20
        || has_zero(word ^ (ONES * u64::from(b'"')))
        || has_zero(word ^ (ONES * u64::from(b'\\')))
}

fn number_len(n: &serde_json::Number) -> usize {
    if let Some(i) = n.as_u64() {
        decimal_digits(i)
    } else if let Some(i) = n.as_i64() {
        1 + decimal_digits(i.unsigned_abs())
    } else {
        // Floats (rare in documents): count what serde_json's own float
        // formatter writes, so the two can never disagree.
        struct Counter(usize);
        impl io::Write for Counter {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.0 += buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut counter = Counter(0);
        // Writing a number to an infallible writer cannot fail.
        let _ = serde_json::to_writer(&mut counter, n);
        counter.0
    }
}

fn decimal_digits(mut n: u64) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ids() {
        assert!(validate_id("a").is_ok());
        assert!(validate_id(&"x".repeat(255)).is_ok());
        assert!(
            validate_id(&"é".repeat(255)).is_ok(),
            "the limit counts characters"
        );
        assert!(validate_id(&"x".repeat(256)).unwrap_err().contains("256"));
        assert!(validate_id("").is_err());
        for bad in ["a/b", "a\\b", "a?b", "a#b"] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn serialized_len_matches_text() {
        let v = json!({"id": "x", "n": [1, 2.5, null, -17, 1e300, 0.1, -0.0, u64::MAX, i64::MIN], "s": "é\"\n\u{1}\u{7f}\\"});
        assert_eq!(serialized_len(&v), v.to_string().len());
        assert_eq!(to_text(&v, serialized_len(&v)), v.to_string());
        let controls: String = (0u8..0x20)
            .map(char::from)
            .chain("\"\\/\u{7f}é".chars())
            .collect();
        let v = json!({"": controls, "k\u{8}\u{c}": [controls.repeat(3)]});
        assert_eq!(to_text(&v, serialized_len(&v)), v.to_string());
        assert_eq!(serialized_len(&json!({})), 2);
        assert_eq!(serialized_len(&json!([])), 2);
        assert_eq!(serialized_len(&json!([[], {}, ""])), "[[],{},\"\"]".len());
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                proptest::collection::vec((any::<String>(), inner), 0..8)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn serialized_len_matches_serde_json(value in arb_json()) {
            proptest::prop_assert_eq!(serialized_len(&value), value.to_string().len());
            proptest::prop_assert_eq!(checked_len(&value), Some(value.to_string().len()));
        }

        #[test]
        fn to_text_matches_serde_json(value in arb_json()) {
            let text = value.to_string();
            proptest::prop_assert_eq!(to_text(&value, text.len()), text);
        }
    }

    #[test]
    fn escapes_are_found_at_every_position() {
        for special in ['"', '\\', '\n', '\u{1}', '\u{1f}'] {
            for pos in 0..20 {
                let mut s: String = "abcdefghijklmnopqrs".chars().take(19).collect();
                s.insert(pos, special);
                let v = Value::String(s.clone());
                assert_eq!(string_len(&s), v.to_string().len(), "{s:?}");
            }
        }
        for clean in ["", "a", "é日本語", "0123456789abcdef ~\u{7f}"] {
            assert_eq!(
                string_len(clean),
                Value::String(clean.to_owned()).to_string().len()
            );
        }
    }

    #[test]
    fn depth_is_bounded_and_deep_values_drop_safely() {
        let nest = |depth: usize| {
            let mut v = json!(1);
            for i in 0..depth {
                v = if i % 2 == 0 {
                    Value::Array(vec![v])
                } else {
                    Value::Object([("a".to_owned(), v)].into_iter().collect())
                };
            }
            v
        };
        assert!(checked_len(&nest(MAX_NESTING)).is_some());
        assert!(checked_len(&nest(MAX_NESTING + 1)).is_none());
        // A million levels: measuring stops early and dropping does not recurse.
        let deep = nest(1_000_000);
        assert!(checked_len(&deep).is_none());
        drop_deep(deep);
    }
}
