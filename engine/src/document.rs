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

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// The largest document, serialized as JSON, that the engine accepts (2 MB, as Cosmos DB).
pub const MAX_DOCUMENT_SIZE: usize = 2 * 1024 * 1024;

/// The longest document or container id, in characters.
pub const MAX_ID_LEN: usize = 255;

pub use host_api::Document;
pub(crate) use host_api::json::{serialized_len, string_len, to_text};

/// Checks a document or container id: 1 to 255 characters, none of `/ \ ? #`.
///
/// # Errors
/// A message naming what is wrong with the id.
pub fn validate_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("id must not be empty".to_owned());
    }
    // Counting characters only when the bytes could be too many.
    if id.len() > MAX_ID_LEN {
        let len = id.chars().count();
        if len > MAX_ID_LEN {
            return Err(format!(
                "id is {len} characters long, over the limit of {MAX_ID_LEN}"
            ));
        }
    }
    // The four are ASCII, so no byte of another character is one of them.
    if let Some(b) = id.bytes().find(|b| matches!(b, b'/' | b'\\' | b'?' | b'#')) {
        let c = char::from(b);
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
    walk(value, 0)
}

/// [`checked_len`] of a document about to be stamped, except that the
/// values of its top-level system properties (`_rid`, `_self`, `_etag`,
/// `_attachments`, `_ts`) count for nothing: the stamp replaces them, and
/// [`crate::stamp::Stamp::apply`] returns the length of what it sets. Their
/// depth is still checked (the stamp drops them). A document read, changed
/// and written back has all five, so this skips measuring five values
/// twice, the escaped etag among them.
pub(crate) fn checked_unstamped_len(doc: &Value) -> Option<usize> {
    let Value::Object(map) = doc else {
        return checked_len(doc);
    };
    let mut len = 2 + map.len().saturating_sub(1);
    for (k, v) in map {
        len += string_len(k) + 1;
        if is_system_property(k) {
            if let Value::Array(_) | Value::Object(_) = v {
                walk(v, 1)?;
            }
        } else {
            len += member_len(v, 1)?;
        }
    }
    Some(len)
}

/// Whether `key` names one of the system properties the engine stamps.
fn is_system_property(key: &str) -> bool {
    key.starts_with('_') && crate::stamp::SYSTEM_PROPERTIES.contains(&key)
}

/// [`checked_len`] of `value` at `depth`.
fn walk(value: &Value, depth: usize) -> Option<usize> {
    match value {
        Value::Array(items) => {
            if depth >= MAX_NESTING {
                return None;
            }
            let mut len = 2 + items.len().saturating_sub(1);
            for item in items {
                len += member_len(item, depth + 1)?;
            }
            Some(len)
        }
        Value::Object(map) => {
            if depth >= MAX_NESTING {
                return None;
            }
            let mut len = 2 + map.len().saturating_sub(1);
            for (k, v) in map {
                len += string_len(k) + 1 + member_len(v, depth + 1)?;
            }
            Some(len)
        }
        leaf => Some(leaf_len(leaf)),
    }
}

/// [`walk`] of a member or item: strings and other leaves are measured
/// here, so only objects and arrays cost a (recursive) call. A document is
/// mostly leaves, and the call was a fifth of measuring one.
#[inline(always)]
fn member_len(value: &Value, depth: usize) -> Option<usize> {
    match value {
        Value::Array(_) | Value::Object(_) => walk(value, depth),
        leaf => Some(leaf_len(leaf)),
    }
}

#[inline(always)]
fn leaf_len(leaf: &Value) -> usize {
    match leaf {
        Value::String(s) => string_len(s),
        scalar => serialized_len(scalar),
    }
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
        // The values of system properties are not measured, but their
        // depth is checked as any other member's.
        for depth in [MAX_NESTING - 2, MAX_NESTING - 1, MAX_NESTING] {
            for key in ["_etag", "_ts", "_rid", "x"] {
                let doc = json!({ key: nest(depth) });
                assert_eq!(
                    checked_unstamped_len(&doc).is_some(),
                    checked_len(&doc).is_some(),
                    "{key} {depth}"
                );
            }
        }
        assert!(checked_unstamped_len(&json!({"_etag": nest(MAX_NESTING)})).is_none());
        assert_eq!(
            checked_unstamped_len(&json!({"a": [1], "_etag": {"b": "\"c"}, "_other": 1})),
            Some(r#"{"a":[1],"_etag":,"_other":1}"#.len())
        );
        // A million levels: measuring stops early and dropping does not recurse.
        let deep = nest(1_000_000);
        assert!(checked_len(&deep).is_none());
        drop_deep(deep);
    }
}
