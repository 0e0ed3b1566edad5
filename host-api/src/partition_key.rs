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
//! A hierarchical container (Cosmos DB's `MultiHash`) names two or three
//! paths (`/tenantId`, `/userId`, `/sessionId`); a document's key is then the
//! tuple of the values at each path, [`PartitionKey::Multi`], with
//! [`PartitionKey::None`] for a level the document lacks. A key with fewer
//! components than the container has paths is a *prefix*: it addresses
//! every logical partition under it (queries and feeds), never one document.
//!
//! The canonical text form is Cosmos DB's partition-key header: a JSON array
//! with one element, `["p1"]`, `[42]`, `[null]`, and `[{}]` for none, or one
//! element per level of a hierarchical key, `["t1","u1"]`. Numbers are
//! IEEE-754 doubles, so `1` and `1.0` are the same key.

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
    /// A hierarchical key: one component per level, each one of the
    /// variants above (never `Multi`). Build it with [`PartitionKey::multi`].
    /// (A boxed slice, not a `Vec`, keeps the key 24 bytes.)
    Multi(Box<[PartitionKey]>),
}

/// Why a value cannot be a partition key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PartitionKeyError {
    /// The key path is not of the form `/a` or `/a/b`.
    #[error("invalid partition key path {0:?}: expected a path such as \"/postId\" or \"/a/b\"")]
    InvalidPath(String),
    /// The text is not a JSON array of key values.
    #[error(
        "invalid partition key {0:?}: expected a JSON array with one string, number, boolean or null ([{{}}] for none), or one per level of a hierarchical key"
    )]
    InvalidText(String),
    /// A hierarchical definition names more paths than Cosmos DB allows.
    #[error(
        "Too many partition key paths: {0} paths given, a hierarchical (MultiHash) partition key has at most {MAX_PATHS}"
    )]
    TooManyPaths(usize),
}

/// The most paths a hierarchical (`MultiHash`) partition key may have.
pub const MAX_PATHS: usize = 3;

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

    /// A hierarchical key from its components, outermost level first. A
    /// `Multi` component contributes its own components.
    pub fn multi<K: Into<PartitionKey>>(components: impl IntoIterator<Item = K>) -> PartitionKey {
        let mut flat = Vec::new();
        for component in components {
            match component.into() {
                PartitionKey::Multi(inner) => flat.extend(inner.into_vec()),
                scalar => flat.push(scalar),
            }
        }
        PartitionKey::Multi(flat.into())
    }

    /// Parses the canonical text form (`["p1"]`, `[{}]`, `["t1","u1"]`), or a
    /// bare JSON scalar (`"p1"`, `42`, `null`) as a command line would give
    /// it. An array of two or more values is a [`PartitionKey::Multi`].
    ///
    /// # Errors
    /// [`PartitionKeyError::InvalidText`] when the text is neither.
    pub fn parse(text: &str) -> Result<PartitionKey, PartitionKeyError> {
        let invalid = || PartitionKeyError::InvalidText(text.to_owned());
        let value: Value = serde_json::from_str(text).map_err(|_| invalid())?;
        PartitionKey::from_json_array(&value).ok_or_else(invalid)
    }

    /// The key of a parsed header value: an array of one key value, or of
    /// several (a hierarchical key), or a bare scalar.
    pub fn from_json_array(value: &Value) -> Option<PartitionKey> {
        match value {
            Value::Array(items) if items.len() == 1 => PartitionKey::from_value(&items[0]),
            Value::Array(items) if items.len() > 1 => items
                .iter()
                .map(PartitionKey::from_value)
                .collect::<Option<Box<[_]>>>()
                .map(PartitionKey::Multi),
            Value::Array(_) => None,
            other => PartitionKey::from_value(other),
        }
    }

    /// The components of the key: its levels for a hierarchical key, the
    /// key itself otherwise.
    pub fn components(&self) -> &[PartitionKey] {
        match self {
            PartitionKey::Multi(components) => components,
            scalar => std::slice::from_ref(scalar),
        }
    }

    /// Whether `prefix`'s components are this key's first components (every
    /// key starts with itself).
    pub fn starts_with(&self, prefix: &PartitionKey) -> bool {
        self.components().starts_with(prefix.components())
    }

    /// The key as a JSON value; `None` becomes `{}` (the header form's element).
    pub fn to_value(&self) -> Value {
        match self {
            PartitionKey::None => Value::Object(Default::default()),
            PartitionKey::Null => Value::Null,
            PartitionKey::Bool(b) => Value::Bool(*b),
            PartitionKey::Number(n) => number_value(*n),
            PartitionKey::String(s) => Value::String(s.clone()),
            PartitionKey::Multi(components) => {
                Value::Array(components.iter().map(PartitionKey::to_value).collect())
            }
        }
    }

    /// The canonical text form, a one-element JSON array (`["p1"]`, `[{}]`),
    /// or one element per level of a hierarchical key (`["t1","u1"]`).
    pub fn to_json_array(&self) -> String {
        match self {
            PartitionKey::Multi(_) => self.to_value().to_string(),
            scalar => Value::Array(vec![scalar.to_value()]).to_string(),
        }
    }

    /// Position of the variant in Cosmos DB's type order.
    fn rank(&self) -> u8 {
        match self {
            PartitionKey::None => 0,
            PartitionKey::Null => 1,
            PartitionKey::Bool(_) => 2,
            PartitionKey::Number(_) => 3,
            PartitionKey::String(_) => 4,
            PartitionKey::Multi(_) => 5,
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
            PartitionKey::Multi(components) => components.hash(state),
        }
    }
}

impl Ord for PartitionKey {
    /// Cosmos DB's type order: none < null < false < true < numbers < strings;
    /// hierarchical keys after them, level by level (so every key under a
    /// prefix sorts right after the prefix).
    fn cmp(&self, other: &PartitionKey) -> Ordering {
        match (self, other) {
            (PartitionKey::Multi(a), PartitionKey::Multi(b)) => a.cmp(b),
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

/// A container's partition-key definition: one path, such as `/postId` or
/// `/a/b`, or the two or three paths of a hierarchical (`MultiHash`) key.
///
/// Its text form is the path itself for one path, and a JSON array of the
/// paths for a hierarchical key (`["/tenantId","/userId"]`), which is how the
/// engine stores it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PartitionKeyPath {
    text: String,
    paths: Vec<Path>,
}

/// One path of a definition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Path {
    text: String,
    segments: Vec<String>,
}

impl Path {
    /// `/a`, `/a/b/c`, or with quoted segments (`/"a/b"/c`, `/'x y'`): a
    /// leading slash and non-empty segments; an unquoted segment has no
    /// quotes, brackets or `*`.
    fn parse(text: &str) -> Result<Path, PartitionKeyError> {
        let invalid = || PartitionKeyError::InvalidPath(text.to_owned());
        let mut rest = text.strip_prefix('/').ok_or_else(invalid)?;
        let mut segments = Vec::new();
        loop {
            let segment;
            if let Some(quote) = rest.chars().next().filter(|c| matches!(c, '"' | '\'')) {
                let inner = &rest[1..];
                let close = inner.find(quote).ok_or_else(invalid)?;
                segment = &inner[..close];
                rest = &inner[close + 1..];
                if !(rest.is_empty() || rest.starts_with('/')) {
                    return Err(invalid());
                }
            } else {
                let end = rest.find('/').unwrap_or(rest.len());
                segment = &rest[..end];
                rest = &rest[end..];
                if segment.contains(['"', '\'', '[', ']', '*']) {
                    return Err(invalid());
                }
            }
            if segment.is_empty() {
                return Err(invalid());
            }
            segments.push(segment.to_owned());
            match rest.strip_prefix('/') {
                Some(next) => rest = next,
                None => break,
            }
        }
        Ok(Path {
            text: text.to_owned(),
            segments,
        })
    }

    /// The value at the path, if there is one.
    fn value<'a>(&self, doc: &'a Value) -> Option<&'a Value> {
        let mut at = doc;
        for segment in &self.segments {
            at = crate::member(at, segment)?;
        }
        Some(at)
    }

    fn extract(&self, doc: &Value) -> PartitionKey {
        let Some(at) = self.value(doc) else {
            return PartitionKey::None;
        };
        // An object or an array there is no key value: Cosmos DB files
        // the document under the undefined key, as if the path were
        // missing, and the SDKs send `[{}]` for it.
        match at {
            Value::Object(_) | Value::Array(_) => PartitionKey::None,
            scalar => PartitionKey::from_value(scalar).unwrap_or(PartitionKey::Null),
        }
    }
}

impl PartitionKeyPath {
    /// Parses a definition's text form: one path (`/a`, `/a/b/c`, quoted
    /// segments such as `/"a/b"`), or a JSON array of one to three paths
    /// (one path in an array is the same as the path alone).
    ///
    /// # Errors
    /// [`PartitionKeyError::InvalidPath`] for anything else, and
    /// [`PartitionKeyError::TooManyPaths`] for more than three paths.
    pub fn parse(text: &str) -> Result<PartitionKeyPath, PartitionKeyError> {
        if text.starts_with('[') {
            let paths: Vec<String> = serde_json::from_str(text)
                .map_err(|_| PartitionKeyError::InvalidPath(text.to_owned()))?;
            return PartitionKeyPath::from_paths(&paths);
        }
        Ok(PartitionKeyPath {
            text: text.to_owned(),
            paths: vec![Path::parse(text)?],
        })
    }

    /// A definition of one path, or of a hierarchical key with two or three.
    ///
    /// # Errors
    /// [`PartitionKeyError::InvalidPath`] for a bad path or none at all,
    /// [`PartitionKeyError::TooManyPaths`] for more than three.
    pub fn from_paths(paths: &[impl AsRef<str>]) -> Result<PartitionKeyPath, PartitionKeyError> {
        if paths.len() > MAX_PATHS {
            return Err(PartitionKeyError::TooManyPaths(paths.len()));
        }
        let parsed = paths
            .iter()
            .map(|p| Path::parse(p.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PartitionKeyPath {
            text: PartitionKeyPath::text_of(paths)
                .ok_or_else(|| PartitionKeyError::InvalidPath(String::new()))?,
            paths: parsed,
        })
    }

    /// The text form of a list of paths (the path itself for one, a JSON
    /// array for several), without checking them; `None` for no path.
    pub fn text_of(paths: &[impl AsRef<str>]) -> Option<String> {
        match paths {
            [] => None,
            [one] => Some(one.as_ref().to_owned()),
            many => Some(
                Value::Array(
                    many.iter()
                        .map(|p| Value::String(p.as_ref().to_owned()))
                        .collect(),
                )
                .to_string(),
            ),
        }
    }

    /// The definition's text form: the path (`/postId`), or the JSON array
    /// of a hierarchical key's paths.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The paths, outermost level first (one for an ordinary container).
    pub fn paths(&self) -> impl ExactSizeIterator<Item = &str> {
        self.paths.iter().map(|p| p.text.as_str())
    }

    /// The property names along the (first) path.
    pub fn segments(&self) -> &[String] {
        &self.paths[0].segments
    }

    /// The property names along each path, outermost level first.
    pub fn level_segments(&self) -> impl ExactSizeIterator<Item = &[String]> {
        self.paths.iter().map(|p| p.segments.as_slice())
    }

    /// Whether this is a hierarchical (`MultiHash`) key of several paths.
    pub fn is_hierarchical(&self) -> bool {
        self.paths.len() > 1
    }

    /// The number of levels of a full key (1 for an ordinary container).
    pub fn levels(&self) -> usize {
        self.paths.len()
    }

    /// Reads a document's partition key: the value at the path, or for a
    /// hierarchical key a [`PartitionKey::Multi`] of the value at each path.
    /// A missing property (or a missing intermediate object), and an
    /// object or an array at the path, give [`PartitionKey::None`], as on
    /// Cosmos DB.
    pub fn extract(&self, doc: &Value) -> PartitionKey {
        match self.paths.as_slice() {
            [one] => one.extract(doc),
            many => PartitionKey::Multi(many.iter().map(|p| p.extract(doc)).collect()),
        }
    }

    /// Whether `doc`'s partition key ([`PartitionKeyPath::extract`]) is
    /// `key`, found without copying a string key (every write asks).
    pub fn holds(&self, doc: &Value, key: &PartitionKey) -> bool {
        match (self.paths.as_slice(), key) {
            ([one], PartitionKey::String(key)) => {
                matches!(one.value(doc), Some(Value::String(s)) if s == key)
            }
            _ => self.extract(doc) == *key,
        }
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
        for bad in [
            "",
            "[",
            "[[1]]",
            r#"[{"a":1}]"#,
            "[1,[2]]",
            "[]",
            "{\"a\":1}",
        ] {
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
            path.extract(&json!({"a": {"b": "x"}})),
            PartitionKey::from("x")
        );
        assert_eq!(path.extract(&json!({"a": {}})), PartitionKey::None);
        assert_eq!(path.extract(&json!({"a": 1})), PartitionKey::None);
        assert_eq!(path.extract(&json!({"a": {"b": null}})), PartitionKey::Null);
        // An object or an array is no key value: the undefined key.
        assert_eq!(path.extract(&json!({"a": {"b": [1]}})), PartitionKey::None);
        assert_eq!(
            path.extract(&json!({"a": {"b": {"c": 1}}})),
            PartitionKey::None
        );
        for bad in ["", "postId", "/", "/a//b", "/a/"] {
            assert!(PartitionKeyPath::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn a_path_holds_exactly_the_key_it_extracts() {
        let docs = [
            json!({"a": {"b": "x"}, "c": "x"}),
            json!({"a": {"b": "y"}, "c": 1}),
            json!({"a": {"b": 1.0}, "c": null}),
            json!({"a": {"b": null}}),
            json!({"a": {"b": ["x"]}}),
            json!({"a": {"b": {"x": 1}}}),
            json!({"a": "x"}),
            json!({}),
        ];
        let keys = [
            PartitionKey::from("x"),
            PartitionKey::from("y"),
            PartitionKey::from(1),
            PartitionKey::Null,
            PartitionKey::None,
            PartitionKey::multi(["x", "x"]),
        ];
        for path in ["/a/b", "/c", "[\"/a/b\", \"/c\"]"] {
            let path = PartitionKeyPath::parse(path).unwrap();
            for doc in &docs {
                for key in &keys {
                    assert_eq!(
                        path.holds(doc, key),
                        path.extract(doc) == *key,
                        "{doc} {key}"
                    );
                }
            }
        }
    }

    #[test]
    fn hierarchical_keys_round_trip_and_sort_under_their_prefix() {
        let full = PartitionKey::multi(["t1", "u1", "s1"]);
        assert_eq!(full.to_json_array(), r#"["t1","u1","s1"]"#);
        assert_eq!(PartitionKey::parse(r#"["t1","u1","s1"]"#).unwrap(), full);
        let mixed = PartitionKey::multi([
            PartitionKey::None,
            PartitionKey::Null,
            PartitionKey::from(1.0),
        ]);
        assert_eq!(mixed.to_json_array(), "[{},null,1]");
        assert_eq!(PartitionKey::parse("[{},null,1]").unwrap(), mixed);
        let prefix = PartitionKey::multi(["t1", "u1"]);
        assert!(full.starts_with(&prefix));
        assert!(full.starts_with(&PartitionKey::from("t1")));
        assert!(full.starts_with(&full));
        assert!(!full.starts_with(&PartitionKey::multi(["t1", "u2"])));
        assert!(!prefix.starts_with(&full));
        assert_eq!(full.components().len(), 3);
        assert_eq!(
            PartitionKey::from("p").components(),
            [PartitionKey::from("p")]
        );
        // Everything under a prefix sorts between the prefix and its successor.
        let mut keys = [
            PartitionKey::multi(["t2", "a"]),
            PartitionKey::multi(["t1", "u1", "s2"]),
            PartitionKey::multi(["t1"]),
            PartitionKey::multi(["t1", "u1"]),
            full.clone(),
        ];
        keys.sort();
        assert_eq!(keys[0], PartitionKey::multi(["t1"]));
        assert_eq!(keys[4], PartitionKey::multi(["t2", "a"]));
        assert_ne!(PartitionKey::multi(["a", "b"]), PartitionKey::multi(["a"]));
        assert_eq!(
            PartitionKey::multi([PartitionKey::multi(["a"]), PartitionKey::from("b")]),
            PartitionKey::multi(["a", "b"])
        );
    }

    #[test]
    fn a_key_stays_three_words() {
        // Engine errors carry a key; a larger key makes every Result larger.
        assert_eq!(std::mem::size_of::<PartitionKey>(), 24);
    }

    #[test]
    fn hierarchical_paths_extract_each_level() {
        let path = PartitionKeyPath::parse(r#"["/state","/city","/zip"]"#).unwrap();
        assert!(path.is_hierarchical());
        assert_eq!(path.levels(), 3);
        assert_eq!(
            path.paths().collect::<Vec<_>>(),
            ["/state", "/city", "/zip"]
        );
        assert_eq!(
            path.extract(&json!({"state": "WA", "city": null})),
            PartitionKey::multi([
                PartitionKey::from("WA"),
                PartitionKey::Null,
                PartitionKey::None
            ])
        );
        assert_eq!(
            path.extract(&json!({"state": "WA", "zip": [1]})),
            PartitionKey::multi([
                PartitionKey::from("WA"),
                PartitionKey::None,
                PartitionKey::None
            ])
        );
        let again = PartitionKeyPath::from_paths(&["/state", "/city", "/zip"]).unwrap();
        assert_eq!(again, path);
        assert_eq!(again.as_str(), r#"["/state","/city","/zip"]"#);
        // One path in an array is an ordinary path.
        let one = PartitionKeyPath::parse(r#"["/a"]"#).unwrap();
        assert_eq!(one.as_str(), "/a");
        assert!(!one.is_hierarchical());
        let err = PartitionKeyPath::parse(r#"["/a","/b","/c","/d"]"#).unwrap_err();
        assert!(
            err.to_string().contains("Too many partition key paths"),
            "{err}"
        );
        for bad in ["[]", r#"["/a","b"]"#, "[1]", "[/a]"] {
            assert!(PartitionKeyPath::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn quoted_segments_may_hold_slashes_and_quotes() {
        let path = PartitionKeyPath::parse(r#"/"first level' 1*()"/"le/vel2""#).unwrap();
        assert_eq!(
            path.extract(&json!({"first level' 1*()": {"le/vel2": "v"}})),
            PartitionKey::from("v")
        );
        let path = PartitionKeyPath::parse(r#"/'a"b'/c"#).unwrap();
        assert_eq!(
            path.extract(&json!({"a\"b": {"c": 1}})),
            PartitionKey::from(1)
        );
        for bad in [r#"/"a"#, r#"/"a"b"#, r#"/"""#, r#"/a"b"#] {
            assert!(PartitionKeyPath::parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
