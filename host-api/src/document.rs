//! Stored documents.
//!
//! A [`Document`] is an immutable JSON object with its system properties
//! (`id`, `_rid`, `_self`, `_etag`, `_ts`, `_attachments`), shared between
//! the engine's snapshots, transactions, the change log and the sandboxes
//! without copying: cloning one is an `Arc` increment.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde_json::Value;

/// A stored document, with its system properties. Cloning is cheap.
#[derive(Clone, PartialEq)]
pub struct Document(Arc<Value>);

impl Document {
    /// Wraps a stored JSON value. Only the engine creates stored documents.
    pub fn new(value: Value) -> Document {
        Document(Arc::new(value))
    }

    /// The document's `id`.
    pub fn id(&self) -> &str {
        crate::member(&self.0, "id")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The document's `_etag`.
    pub fn etag(&self) -> &str {
        crate::member(&self.0, "_etag")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The document's `_ts`: seconds since the Unix epoch of its last write.
    pub fn ts(&self) -> u64 {
        crate::member(&self.0, "_ts")
            .and_then(Value::as_u64)
            .unwrap_or_default()
    }

    /// The document as a JSON value.
    pub fn value(&self) -> &Value {
        &self.0
    }

    /// The document as an owned JSON value (cloned only if shared).
    pub fn into_value(self) -> Value {
        Arc::unwrap_or_clone(self.0)
    }
}

impl Deref for Document {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.0
    }
}

impl fmt::Debug for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Display for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl From<Document> for Value {
    fn from(doc: Document) -> Value {
        doc.into_value()
    }
}

/// The member `key` of `value` when it is an object, like `value.get(key)`.
///
/// Documents have a handful of members, and hashing a short key with the
/// standard library's SipHash (what serde_json's ordered map uses) costs
/// more than comparing it with each member's key, so small objects are
/// scanned; `id` and the partition key, looked up on every write, are
/// usually among the first members anyway.
pub fn member<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    let Value::Object(map) = value else {
        return None;
    };
    if map.len() > SCAN {
        return map.get(key);
    }
    map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
}

/// The member `key` of `value` when it is an object, like
/// `value.get_mut(key)`, found as [`member`] finds it.
pub fn member_mut<'a>(value: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    let Value::Object(map) = value else {
        return None;
    };
    if map.len() > SCAN {
        return map.get_mut(key);
    }
    map.iter_mut()
        .find(|(k, _)| k.as_str() == key)
        .map(|(_, v)| v)
}

/// Objects up to this size are scanned rather than hashed ([`member`]).
const SCAN: usize = 16;

/// The name of a JSON value's type, for error messages ("a string", "an object", ...).
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;

    /// Small objects (scanned) and large ones (hashed) answer alike.
    #[test]
    fn member_finds_what_get_finds() {
        let small = json!({"id": "a", "postId": 5, "x": null});
        for key in ["id", "postId", "x", "missing", ""] {
            assert_eq!(member(&small, key), small.get(key), "{key}");
        }
        let large: Map<String, Value> = (0..40).map(|i| (format!("k{i}"), json!(i))).collect();
        let large = Value::Object(large);
        for key in ["k0", "k39", "k40"] {
            assert_eq!(member(&large, key), large.get(key), "{key}");
        }
        for mut value in [small, large] {
            for key in ["id", "postId", "k0", "k39", "missing"] {
                let expected = value.get(key).cloned();
                assert_eq!(member_mut(&mut value, key).map(|v| v.clone()), expected);
                if let Some(v) = member_mut(&mut value, key) {
                    *v = json!("changed");
                    assert_eq!(value[key], json!("changed"), "{key}");
                }
            }
        }
        assert_eq!(member_mut(&mut json!([1, 2]), "0"), None);
        assert_eq!(member(&json!([1, 2]), "0"), None);
        assert_eq!(member(&json!("id"), "id"), None);
    }
}
