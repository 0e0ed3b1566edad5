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
