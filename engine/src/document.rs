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

use std::fmt;
use std::io;
use std::ops::Deref;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// The largest document, serialized as JSON, that the engine accepts (2 MB, as Cosmos DB).
pub const MAX_DOCUMENT_SIZE: usize = 2 * 1024 * 1024;

/// The longest document or container id, in characters.
pub const MAX_ID_LEN: usize = 255;

/// A stored document, with its system properties. Cloning is cheap.
#[derive(Clone, PartialEq)]
pub struct Document(Arc<Value>);

impl Document {
    pub(crate) fn new(value: Value) -> Document {
        Document(Arc::new(value))
    }

    /// The document's `id`.
    pub fn id(&self) -> &str {
        self.0.get("id").and_then(Value::as_str).unwrap_or_default()
    }

    /// The document's `_etag`.
    pub fn etag(&self) -> &str {
        self.0
            .get("_etag")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The document's `_ts`: seconds since the Unix epoch of its last write.
    pub fn ts(&self) -> u64 {
        self.0
            .get("_ts")
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

/// The name of a JSON value's type, for error messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The serialized size of a value without building the text.
pub(crate) fn serialized_len(value: &Value) -> usize {
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
    // Writing a `Value` to an infallible writer cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
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
        let v = json!({"id": "x", "n": [1, 2.5, null], "s": "é\"\n"});
        assert_eq!(serialized_len(&v), v.to_string().len());
    }
}
