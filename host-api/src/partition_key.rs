//! Partition keys: which logical partition a document belongs to.
//!
//! A container names one path into its documents (`/postId`, or nested
//! `/author/id`). The value found there is the document's partition key, and
//! every document with the same value forms one logical partition, the scope
//! of a transaction. As in Cosmos DB the value may be a string, a number, a
//! boolean or null; a document without the property belongs to the *none*
//! partition, which is addressed explicitly with [`PartitionKey::None`] and
//! otherwise behaves like any other partition.
//!
//! The canonical text form is Cosmos DB's partition-key header: a JSON array
//! with one element, `["p1"]`, `[42]`, `[null]`, and `[{}]` for none. Numbers
//! are IEEE-754 doubles, so `1` and `1.0` are the same key.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use serde_json::Value;

/// The partition-key value of a document.
#[derive(Clone, Debug)]
pub enum PartitionKey {
    /// The document lacks the key property (Cosmos DB's `PartitionKey.None`).
    None,
    /// The property is JSON `null`.
    Null,
    /// A boolean key.
    Bool(bool),
    /// A numeric key. Never NaN or infinite (JSON cannot carry them).
    Number(f64),
    /// A string key.
    String(String),
}

/// Why a value cannot be a partition key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PartitionKeyError {
    /// The key path is not of the form `/a` or `/a/b`.
    #[error("invalid partition key path {0:?}: expected a path such as \"/postId\" or \"/a/b\"")]
    InvalidPath(String),
    /// The value at the key path is an object or an array.
    #[error("the partition key at {path} must be a string, number, boolean or null, not {found}")]
    InvalidValue {
        /// The container's key path.
        path: String,
        /// The JSON type that was found instead.
        found: &'static str,
    },
    /// The text is not a one-element JSON array holding a key value.
    #[error(
        "invalid partition key {0:?}: expected a JSON array with one string, number, boolean or null, or [{{}}] for none"
    )]
    InvalidText(String),
}

impl PartitionKey {
    /// Converts a JSON value into a key: strings, numbers, booleans and null.
    /// `{}` (an empty object) is the none key, as in the header form `[{}]`.
    pub fn from_value(value: &Value) -> Option<PartitionKey> {
        Some(match value {
            Value::Null => PartitionKey::Null,
            Value::Bool(b) => PartitionKey::Bool(*b),
            Value::Number(n) => PartitionKey::Number(normalize(n.as_f64()?)),
            Value::String(s) => PartitionKey::String(s.clone()),
            Value::Object(map) if map.is_empty() => PartitionKey::None,
            Value::Object(_) | Value::Array(_) => return None,
        })
    }

    /// Parses the canonical text form (`["p1"]`, `[{}]`), or a bare JSON
    /// scalar (`"p1"`, `42`, `null`) as a command line would give it.
    ///
    /// # Errors
    /// [`PartitionKeyError::InvalidText`] when the text is neither.
    pub fn parse(text: &str) -> Result<PartitionKey, PartitionKeyError> {
        let invalid = || PartitionKeyError::InvalidText(text.to_owned());
        let value: Value = serde_json::from_str(text).map_err(|_| invalid())?;
        match &value {
            Value::Array(items) if items.len() == 1 => PartitionKey::from_value(&items[0]),
            Value::Array(_) => None,
            other => PartitionKey::from_value(other),
        }
        .ok_or_else(invalid)
    }

    /// The key as a JSON value; `None` becomes `{}` (the header form's element).
    pub fn to_value(&self) -> Value {
        match self {
            PartitionKey::None => Value::Object(Default::default()),
            PartitionKey::Null => Value::Null,
            PartitionKey::Bool(b) => Value::Bool(*b),
            PartitionKey::Number(n) => number_value(*n),
            PartitionKey::String(s) => Value::String(s.clone()),
        }
    }

    /// The canonical text form, a one-element JSON array: `["p1"]`, `[{}]`.
    pub fn to_json_array(&self) -> String {
        Value::Array(vec![self.to_value()]).to_string()
    }

    /// Position of the variant in Cosmos DB's type order.
    fn rank(&self) -> u8 {
        match self {
            PartitionKey::None => 0,
            PartitionKey::Null => 1,
            PartitionKey::Bool(_) => 2,
            PartitionKey::Number(_) => 3,
            PartitionKey::String(_) => 4,
        }
    }
}

/// `-0.0` and `0.0` are one key.
fn normalize(n: f64) -> f64 {
    if n == 0.0 { 0.0 } else { n }
}

/// Integral doubles print without a fraction (`1`, not `1.0`), like JavaScript.
fn number_value(n: f64) -> Value {
    const MAX_SAFE: f64 = 9_007_199_254_740_992.0; // 2^53
    if n.fract() == 0.0 && n.abs() < MAX_SAFE {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

impl PartialEq for PartitionKey {
    fn eq(&self, other: &PartitionKey) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PartitionKey {}

impl Hash for PartitionKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.rank().hash(state);
        match self {
            PartitionKey::None | PartitionKey::Null => {}
            PartitionKey::Bool(b) => b.hash(state),
            PartitionKey::Number(n) => normalize(*n).to_bits().hash(state),
            PartitionKey::String(s) => s.hash(state),
        }
    }
}

impl Ord for PartitionKey {
    /// Cosmos DB's type order: none < null < false < true < numbers < strings.
    fn cmp(&self, other: &PartitionKey) -> Ordering {
        match (self, other) {
            (PartitionKey::Bool(a), PartitionKey::Bool(b)) => a.cmp(b),
            (PartitionKey::Number(a), PartitionKey::Number(b)) => a.total_cmp(b),
            (PartitionKey::String(a), PartitionKey::String(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PartitionKey {
    fn partial_cmp(&self, other: &PartitionKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for PartitionKey {
    /// The canonical text form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json_array())
    }
}

impl From<&str> for PartitionKey {
    fn from(s: &str) -> PartitionKey {
        PartitionKey::String(s.to_owned())
    }
}

impl From<String> for PartitionKey {
    fn from(s: String) -> PartitionKey {
        PartitionKey::String(s)
    }
}

impl From<f64> for PartitionKey {
    fn from(n: f64) -> PartitionKey {
        PartitionKey::Number(normalize(n))
    }
}

impl From<i64> for PartitionKey {
    fn from(n: i64) -> PartitionKey {
        PartitionKey::Number(n as f64)
    }
}

impl From<bool> for PartitionKey {
    fn from(b: bool) -> PartitionKey {
        PartitionKey::Bool(b)
    }
}

/// A container's partition-key path, such as `/postId` or `/a/b`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PartitionKeyPath {
    text: String,
    segments: Vec<String>,
}

impl PartitionKeyPath {
    /// Parses `/a` or `/a/b/c`: a leading slash and non-empty segments.
    ///
    /// # Errors
    /// [`PartitionKeyError::InvalidPath`] for anything else.
    pub fn parse(text: &str) -> Result<PartitionKeyPath, PartitionKeyError> {
        let invalid = || PartitionKeyError::InvalidPath(text.to_owned());
        let rest = text.strip_prefix('/').ok_or_else(invalid)?;
        let segments: Vec<String> = rest.split('/').map(str::to_owned).collect();
        if segments
            .iter()
            .any(|s| s.is_empty() || s.contains(['"', '\'', '[', ']', '*']))
        {
            return Err(invalid());
        }
        Ok(PartitionKeyPath {
            text: text.to_owned(),
            segments,
        })
    }

    /// The path as written, such as `/postId`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The property names along the path.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// Reads a document's partition key. A missing property (or a missing
    /// intermediate object) gives [`PartitionKey::None`].
    ///
    /// # Errors
    /// [`PartitionKeyError::InvalidValue`] when the value at the path is an
    /// object or an array.
    pub fn extract(&self, doc: &Value) -> Result<PartitionKey, PartitionKeyError> {
        let mut at = doc;
        for segment in &self.segments {
            match crate::member(at, segment) {
                Some(next) => at = next,
                None => return Ok(PartitionKey::None),
            }
        }
        let found = match at {
            Value::Object(_) => "an object",
            Value::Array(_) => "an array",
            scalar => return Ok(PartitionKey::from_value(scalar).unwrap_or(PartitionKey::Null)),
        };
        Err(PartitionKeyError::InvalidValue {
            path: self.text.clone(),
            found,
        })
    }
}

impl fmt::Display for PartitionKeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_form_round_trips() {
        for (key, text) in [
            (PartitionKey::from("p1"), r#"["p1"]"#),
            (PartitionKey::from(42), "[42]"),
            (PartitionKey::from(1.5), "[1.5]"),
            (PartitionKey::Null, "[null]"),
            (PartitionKey::from(true), "[true]"),
            (PartitionKey::None, "[{}]"),
        ] {
            assert_eq!(key.to_json_array(), text);
            assert_eq!(PartitionKey::parse(text).unwrap(), key);
        }
        assert_eq!(
            PartitionKey::parse(r#""p1""#).unwrap(),
            PartitionKey::from("p1")
        );
        assert_eq!(PartitionKey::parse("1.0").unwrap(), PartitionKey::from(1));
        assert_eq!(PartitionKey::parse("-0").unwrap(), PartitionKey::from(0));
        for bad in ["", "[", "[[1]]", r#"[{"a":1}]"#, "[1,2]", "[]", "{\"a\":1}"] {
            assert!(PartitionKey::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn type_order_and_equality() {
        let keys = [
            PartitionKey::None,
            PartitionKey::Null,
            PartitionKey::from(false),
            PartitionKey::from(true),
            PartitionKey::from(-1),
            PartitionKey::from(2),
            PartitionKey::from(""),
            PartitionKey::from("a"),
        ];
        for pair in keys.windows(2) {
            assert!(pair[0] < pair[1], "{} < {}", pair[0], pair[1]);
            assert_ne!(pair[0], pair[1]);
        }
        assert_ne!(PartitionKey::None, PartitionKey::Null);
        assert_ne!(PartitionKey::from("1"), PartitionKey::from(1));
    }

    #[test]
    fn paths_extract_nested_values() {
        let path = PartitionKeyPath::parse("/a/b").unwrap();
        assert_eq!(
            path.extract(&json!({"a": {"b": "x"}})).unwrap(),
            PartitionKey::from("x")
        );
        assert_eq!(path.extract(&json!({"a": {}})).unwrap(), PartitionKey::None);
        assert_eq!(path.extract(&json!({"a": 1})).unwrap(), PartitionKey::None);
        assert_eq!(
            path.extract(&json!({"a": {"b": null}})).unwrap(),
            PartitionKey::Null
        );
        assert!(path.extract(&json!({"a": {"b": [1]}})).is_err());
        assert!(path.extract(&json!({"a": {"b": {}}})).is_err());
        for bad in ["", "postId", "/", "/a//b", "/a/"] {
            assert!(PartitionKeyPath::parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
