//! Partial document update: Cosmos DB's patch operations.
//!
//! A [`Patch`] is up to [`MAX_PATCH_OPERATIONS`] operations on JSON-pointer
//! paths, applied in order to a copy of the document, and an optional
//! condition (`FROM c WHERE …`) evaluated on the document as it was before.
//! [`crate::Txn::patch_item`] writes the result as a replace, so a patch has
//! every rule a replace has (etags, size, partition key), and a failed
//! operation changes nothing.
//!
//! ```
//! use engine::{Database, Patch};
//! use serde_json::json;
//!
//! let db = Database::in_memory();
//! let posts = db.create_container("posts", "/postId")?;
//! posts.create_item("p1", json!({"id": "p1", "postId": "p1", "likes": 1}), None)?;
//! let patch = Patch::from_json(&json!({
//!     "condition": "FROM c WHERE c.likes > 0",
//!     "operations": [{"op": "incr", "path": "/likes", "value": 2},
//!                    {"op": "add", "path": "/tags", "value": ["new"]}],
//! }))?;
//! let doc = posts.transaction("p1", |txn| txn.patch_item("p1", &patch, None))?;
//! assert_eq!(doc["likes"], 3);
//! assert_eq!(doc["tags"], json!(["new"]));
//! # Ok::<(), engine::Error>(())
//! ```

use std::ops::ControlFlow;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::query::{self, Params, Query, QueryOptions, Source};
use host_api::PartitionKey;

/// The most operations one patch may carry (the service's limit).
pub const MAX_PATCH_OPERATIONS: usize = 10;

/// Top-level properties the engine owns; a patch may not touch them.
const SYSTEM_PROPERTIES: [&str; 6] = ["id", "_rid", "_self", "_etag", "_ts", "_attachments"];

/// One patch operation.
#[derive(Clone, Debug, PartialEq)]
pub enum PatchOperation {
    /// Creates or overwrites a member; on an array index, inserts there
    /// (`-` appends).
    Add {
        /// Where.
        path: Pointer,
        /// What.
        value: Value,
    },
    /// Like `Add`, except that an array index overwrites the element.
    Set {
        /// Where.
        path: Pointer,
        /// What.
        value: Value,
    },
    /// Overwrites a value that must exist.
    Replace {
        /// Where.
        path: Pointer,
        /// What.
        value: Value,
    },
    /// Removes a value that must exist (an array element shifts the rest).
    Remove {
        /// Where.
        path: Pointer,
    },
    /// Adds a number to a number, or creates the member with it.
    Incr {
        /// Where.
        path: Pointer,
        /// How much.
        value: serde_json::Number,
    },
    /// Removes the value at `from` and adds it at `path`.
    Move {
        /// Where from (must exist).
        from: Pointer,
        /// Where to.
        path: Pointer,
    },
}

/// A JSON pointer (`/a/b/0`), kept as text and as unescaped segments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pointer {
    text: String,
    segments: Vec<String>,
}

impl Pointer {
    /// Parses a pointer: `/`-separated segments with `~1` for `/` and `~0`
    /// for `~`.
    ///
    /// # Errors
    /// 400 when it is empty, does not start with `/`, has a bad escape or
    /// names a system property.
    pub fn parse(text: &str) -> Result<Pointer> {
        let bad = |why: &str| Error::BadRequest(format!("patch path {text:?} {why}"));
        let Some(rest) = text.strip_prefix('/') else {
            return Err(bad("must start with '/'"));
        };
        let mut segments = Vec::new();
        for raw in rest.split('/') {
            let mut segment = String::with_capacity(raw.len());
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    segment.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => segment.push('~'),
                    Some('1') => segment.push('/'),
                    _ => return Err(bad("has a '~' not followed by 0 or 1")),
                }
            }
            segments.push(segment);
        }
        if segments.len() == 1 && segments[0].is_empty() {
            return Err(bad("names the whole document; a patch changes its members"));
        }
        if SYSTEM_PROPERTIES.contains(&segments[0].as_str()) {
            return Err(bad("names a system property, which a patch cannot change"));
        }
        Ok(Pointer {
            text: text.to_owned(),
            segments,
        })
    }

    /// The pointer as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn is_prefix_of(&self, other: &Pointer) -> bool {
        other.segments.len() > self.segments.len()
            && other.segments[..self.segments.len()] == self.segments[..]
    }
}

/// A patch: operations and an optional condition.
#[derive(Clone, Debug)]
pub struct Patch {
    /// Applied in order.
    pub operations: Vec<PatchOperation>,
    /// `FROM c WHERE …`, evaluated on the current document; a false
    /// condition is a 412 and changes nothing.
    condition: Option<(String, Query)>,
}

impl Patch {
    /// A patch of `operations` without a condition.
    ///
    /// # Errors
    /// 400 for no operations or more than [`MAX_PATCH_OPERATIONS`].
    pub fn new(operations: Vec<PatchOperation>) -> Result<Patch> {
        check_count(operations.len())?;
        Ok(Patch {
            operations,
            condition: None,
        })
    }

    /// Adds a condition, `FROM alias WHERE predicate` as the SDKs send it.
    ///
    /// # Errors
    /// 400 when it does not start with `FROM` or is not valid SQL.
    pub fn with_condition(mut self, condition: &str) -> Result<Patch> {
        let starts_with_from = condition
            .trim_start()
            .get(..4)
            .is_some_and(|w| w.eq_ignore_ascii_case("from"));
        if !starts_with_from {
            return Err(Error::BadRequest(format!(
                "patch condition {condition:?} must have the form \"FROM c WHERE <predicate>\""
            )));
        }
        let query = query::parse(&format!("SELECT VALUE 1 {condition}")).map_err(|e| {
            Error::BadRequest(format!("patch condition {condition:?} is not valid: {e}"))
        })?;
        self.condition = Some((condition.to_owned(), query));
        Ok(self)
    }

    /// The condition as given, if any.
    pub fn condition(&self) -> Option<&str> {
        self.condition.as_ref().map(|(text, _)| text.as_str())
    }

    /// Reads a patch as the SDKs send it: `{"operations": [...],
    /// "condition": "FROM c WHERE ..."}`, or a bare array of operations.
    ///
    /// # Errors
    /// 400 naming the first malformed operation.
    pub fn from_json(body: &Value) -> Result<Patch> {
        let (operations, condition) = match body {
            Value::Array(ops) => (ops, None),
            Value::Object(map) => {
                let ops = match map.get("operations") {
                    Some(Value::Array(ops)) => ops,
                    _ => {
                        return Err(Error::BadRequest(
                            "a patch needs an \"operations\" array".to_owned(),
                        ));
                    }
                };
                let condition = match map.get("condition") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(c)) => Some(c.as_str()),
                    Some(other) => {
                        return Err(Error::BadRequest(format!(
                            "a patch condition must be a string, not {}",
                            host_api::type_name(other)
                        )));
                    }
                };
                (ops, condition)
            }
            other => {
                return Err(Error::BadRequest(format!(
                    "a patch must be an object with \"operations\" or an array, not {}",
                    host_api::type_name(other)
                )));
            }
        };
        check_count(operations.len())?;
        let operations = operations
            .iter()
            .enumerate()
            .map(|(i, op)| {
                PatchOperation::from_json(op)
                    .map_err(|e| Error::BadRequest(format!("patch operation {i}: {}", bare(e))))
            })
            .collect::<Result<Vec<_>>>()?;
        let patch = Patch {
            operations,
            condition: None,
        };
        match condition {
            Some(c) => patch.with_condition(c),
            None => Ok(patch),
        }
    }

    /// Whether the condition holds for `doc` (true without one).
    pub(crate) fn condition_holds(&self, key: &PartitionKey, doc: &Value) -> Result<bool> {
        let Some((_, query)) = &self.condition else {
            return Ok(true);
        };
        let one = OneDocument { key, doc };
        let page = query::execute(query, &Params::new(), &one, &QueryOptions::default())?;
        Ok(!page.items.is_empty())
    }

    /// Applies every operation to `doc` in order.
    ///
    /// # Errors
    /// 400 naming the operation and why; `doc` may then be half-changed,
    /// so callers patch a copy.
    pub fn apply(&self, doc: &mut Value) -> Result<()> {
        for (i, op) in self.operations.iter().enumerate() {
            op.apply(doc)
                .map_err(|why| Error::BadRequest(format!("patch operation {i} ({op}): {why}")))?;
        }
        Ok(())
    }
}

fn check_count(n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::BadRequest(
            "a patch needs at least one operation".to_owned(),
        ));
    }
    if n > MAX_PATCH_OPERATIONS {
        return Err(Error::BadRequest(format!(
            "a patch has {n} operations, more than the {MAX_PATCH_OPERATIONS} allowed"
        )));
    }
    Ok(())
}

/// An error's message without the "bad request: " of its display.
pub(crate) fn bare(err: Error) -> String {
    match err {
        Error::BadRequest(message) => message,
        other => other.to_string(),
    }
}

impl std::fmt::Display for PatchOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PatchOperation::Add { path, .. } => write!(f, "add {}", path.text),
            PatchOperation::Set { path, .. } => write!(f, "set {}", path.text),
            PatchOperation::Replace { path, .. } => write!(f, "replace {}", path.text),
            PatchOperation::Remove { path } => write!(f, "remove {}", path.text),
            PatchOperation::Incr { path, .. } => write!(f, "incr {}", path.text),
            PatchOperation::Move { from, path } => write!(f, "move {} to {}", from.text, path.text),
        }
    }
}

impl PatchOperation {
    /// Reads one operation: `{"op": "add", "path": "/a", "value": 1}`.
    ///
    /// # Errors
    /// 400 for an unknown `op`, a missing member or a bad path.
    pub fn from_json(op: &Value) -> Result<PatchOperation> {
        let Value::Object(map) = op else {
            return Err(Error::BadRequest(format!(
                "an operation must be an object, not {}",
                host_api::type_name(op)
            )));
        };
        let name = match map.get("op") {
            Some(Value::String(name)) => name.as_str(),
            _ => {
                return Err(Error::BadRequest(
                    "an operation needs an \"op\" string".to_owned(),
                ));
            }
        };
        let pointer = |member: &str| -> Result<Pointer> {
            match map.get(member) {
                Some(Value::String(p)) => Pointer::parse(p),
                _ => Err(Error::BadRequest(format!(
                    "operation {name:?} needs a {member:?} string"
                ))),
            }
        };
        let value = || -> Result<Value> {
            map.get("value")
                .cloned()
                .ok_or_else(|| Error::BadRequest(format!("operation {name:?} needs a \"value\"")))
        };
        Ok(match name.to_ascii_lowercase().as_str() {
            "add" => PatchOperation::Add {
                path: pointer("path")?,
                value: value()?,
            },
            "set" => PatchOperation::Set {
                path: pointer("path")?,
                value: value()?,
            },
            "replace" => PatchOperation::Replace {
                path: pointer("path")?,
                value: value()?,
            },
            "remove" => PatchOperation::Remove {
                path: pointer("path")?,
            },
            "incr" | "increment" => match value()? {
                Value::Number(value) => PatchOperation::Incr {
                    path: pointer("path")?,
                    value,
                },
                other => {
                    return Err(Error::BadRequest(format!(
                        "operation \"incr\" needs a number \"value\", not {}",
                        host_api::type_name(&other)
                    )));
                }
            },
            "move" => {
                let from = pointer("from")?;
                let path = pointer("path")?;
                if from.is_prefix_of(&path) {
                    return Err(Error::BadRequest(format!(
                        "operation \"move\" cannot move {} into its own member {}",
                        from.text, path.text
                    )));
                }
                PatchOperation::Move { from, path }
            }
            _ => {
                return Err(Error::BadRequest(format!(
                    "unknown operation {name:?}; expected add, set, replace, remove, incr or move"
                )));
            }
        })
    }

    /// The serialized size of the value it carries (0 for none).
    pub(crate) fn value_len(&self) -> usize {
        match self {
            PatchOperation::Add { value, .. }
            | PatchOperation::Set { value, .. }
            | PatchOperation::Replace { value, .. } => {
                crate::document::checked_len(value).unwrap_or(0)
            }
            PatchOperation::Remove { .. }
            | PatchOperation::Incr { .. }
            | PatchOperation::Move { .. } => 0,
        }
    }

    fn apply(&self, doc: &mut Value) -> std::result::Result<(), String> {
        match self {
            PatchOperation::Add { path, value } => insert(doc, path, value.clone(), Mode::Add),
            PatchOperation::Set { path, value } => insert(doc, path, value.clone(), Mode::Set),
            PatchOperation::Replace { path, value } => {
                *target(doc, path)? = value.clone();
                Ok(())
            }
            PatchOperation::Remove { path } => remove(doc, path).map(drop),
            PatchOperation::Incr { path, value } => increment(doc, path, value),
            PatchOperation::Move { from, path } => {
                let value = remove(doc, from)?;
                insert(doc, path, value, Mode::Add)
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Add,
    Set,
}

/// The container (object or array) that holds the pointer's last segment.
fn parent<'a>(doc: &'a mut Value, path: &Pointer) -> std::result::Result<&'a mut Value, String> {
    let (_, ancestors) = path.segments.split_last().expect("a pointer has a segment");
    let mut at = doc;
    for (depth, segment) in ancestors.iter().enumerate() {
        let here = || format!("/{}", path.segments[..=depth].join("/"));
        at = match at {
            Value::Object(map) => map
                .get_mut(segment)
                .ok_or_else(|| format!("{} does not exist", here()))?,
            Value::Array(items) => {
                let len = items.len();
                let i = index(segment)
                    .filter(|&i| i < len)
                    .ok_or_else(|| not_an_index(&here(), len))?;
                &mut items[i]
            }
            other => return Err(no_members(&here(), other)),
        };
    }
    Ok(at)
}

/// The value the pointer names, which must exist.
fn target<'a>(doc: &'a mut Value, path: &Pointer) -> std::result::Result<&'a mut Value, String> {
    let last = path.segments.last().expect("a pointer has a segment");
    match parent(doc, path)? {
        Value::Object(map) => map
            .get_mut(last)
            .ok_or_else(|| format!("{} does not exist", path.text)),
        Value::Array(items) => {
            let len = items.len();
            match index(last).filter(|&i| i < len) {
                Some(i) => Ok(&mut items[i]),
                None => Err(not_an_index(&path.text, len)),
            }
        }
        other => Err(no_members(&path.text, other)),
    }
}

fn insert(
    doc: &mut Value,
    path: &Pointer,
    value: Value,
    mode: Mode,
) -> std::result::Result<(), String> {
    let last = path.segments.last().expect("a pointer has a segment");
    match parent(doc, path)? {
        Value::Object(map) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(items) => {
            let len = items.len();
            if last == "-" {
                items.push(value);
                return Ok(());
            }
            match (index(last), mode) {
                (Some(i), Mode::Add) if i <= len => items.insert(i, value),
                (Some(i), Mode::Set) if i < len => items[i] = value,
                (Some(i), Mode::Set) if i == len => items.push(value),
                _ => return Err(not_an_index(&path.text, len)),
            }
            Ok(())
        }
        other => Err(no_members(&path.text, other)),
    }
}

fn remove(doc: &mut Value, path: &Pointer) -> std::result::Result<Value, String> {
    let last = path.segments.last().expect("a pointer has a segment");
    match parent(doc, path)? {
        Value::Object(map) => map
            .shift_remove(last)
            .ok_or_else(|| format!("{} does not exist", path.text)),
        Value::Array(items) => {
            let len = items.len();
            match index(last).filter(|&i| i < len) {
                Some(i) => Ok(items.remove(i)),
                None => Err(not_an_index(&path.text, len)),
            }
        }
        other => Err(no_members(&path.text, other)),
    }
}

fn increment(
    doc: &mut Value,
    path: &Pointer,
    by: &serde_json::Number,
) -> std::result::Result<(), String> {
    let last = path.segments.last().expect("a pointer has a segment");
    if let Value::Object(map) = parent(doc, path)?
        && !map.contains_key(last)
    {
        map.insert(last.clone(), Value::Number(by.clone()));
        return Ok(());
    }
    let current = target(doc, path)?;
    let Value::Number(n) = current else {
        return Err(format!(
            "{} is {}, not a number",
            path.text,
            host_api::type_name(current)
        ));
    };
    let sum = match (n.as_i64(), by.as_i64()) {
        (Some(a), Some(b)) if a.checked_add(b).is_some() => serde_json::Number::from(a + b),
        _ => {
            let a = n.as_f64().unwrap_or(0.0);
            let b = by.as_f64().unwrap_or(0.0);
            serde_json::Number::from_f64(a + b)
                .ok_or_else(|| format!("{} would become {}", path.text, a + b))?
        }
    };
    *current = Value::Number(sum);
    Ok(())
}

fn no_members(path: &str, value: &Value) -> String {
    format!(
        "{path} goes through {}, which has no members",
        host_api::type_name(value)
    )
}

fn not_an_index(path: &str, len: usize) -> String {
    format!("{path} is not an index of an array of {len}")
}

/// An array index: decimal digits without a leading zero.
fn index(segment: &str) -> Option<usize> {
    let canonical = segment == "0" || (!segment.starts_with('0') && !segment.is_empty());
    if canonical && segment.bytes().all(|b| b.is_ascii_digit()) {
        segment.parse().ok()
    } else {
        None
    }
}

/// One document as a query source, for a patch's condition.
struct OneDocument<'a> {
    key: &'a PartitionKey,
    doc: &'a Value,
}

impl Source for OneDocument<'_> {
    fn partitions(&self) -> Vec<PartitionKey> {
        vec![self.key.clone()]
    }

    fn scan(
        &self,
        _key: &PartitionKey,
        after: Option<u64>,
        f: &mut dyn FnMut(u64, &Value, usize) -> ControlFlow<()>,
    ) {
        if after.is_none() {
            let _ = f(1, self.doc, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patched(doc: Value, ops: Value) -> std::result::Result<Value, String> {
        let patch = Patch::from_json(&ops).map_err(|e| e.to_string())?;
        let mut doc = doc;
        patch.apply(&mut doc).map_err(|e| e.to_string())?;
        Ok(doc)
    }

    #[test]
    fn each_operation_does_what_the_service_does() {
        let doc =
            json!({"id": "a", "n": 1, "tags": ["x", "y"], "addr": {"city": "Oslo"}, "old": true});
        let ops = json!([
            {"op": "add", "path": "/color", "value": "red"},
            {"op": "add", "path": "/tags/1", "value": "new"},
            {"op": "add", "path": "/tags/-", "value": "end"},
            {"op": "set", "path": "/addr/zip", "value": "0150"},
            {"op": "set", "path": "/tags/0", "value": "X"},
            {"op": "replace", "path": "/addr/city", "value": "Bergen"},
            {"op": "remove", "path": "/tags/2"},
            {"op": "incr", "path": "/n", "value": 5},
            {"op": "incr", "path": "/fresh", "value": 2.5},
            {"op": "move", "from": "/old", "path": "/new"},
        ]);
        assert_eq!(
            patched(doc, ops).unwrap(),
            json!({"id": "a", "n": 6, "tags": ["X", "new", "end"],
                   "addr": {"city": "Bergen", "zip": "0150"}, "color": "red", "fresh": 2.5, "new": true})
        );
    }

    #[test]
    fn bad_operations_are_400s_naming_the_problem() {
        let doc = json!({"id": "a", "s": "text", "o": {}, "arr": [1]});
        let cases = [
            (
                json!([{"op": "replace", "path": "/missing", "value": 1}]),
                "/missing does not exist",
            ),
            (
                json!([{"op": "remove", "path": "/missing"}]),
                "/missing does not exist",
            ),
            (
                json!([{"op": "incr", "path": "/s", "value": 1}]),
                "/s is a string, not a number",
            ),
            (
                json!([{"op": "move", "from": "/nope", "path": "/x"}]),
                "/nope does not exist",
            ),
            (
                json!([{"op": "add", "path": "/s/x", "value": 1}]),
                "goes through a string",
            ),
            (
                json!([{"op": "add", "path": "/o/a/b", "value": 1}]),
                "/o/a does not exist",
            ),
            (
                json!([{"op": "add", "path": "/arr/5", "value": 1}]),
                "not an index of an array of 1",
            ),
            (
                json!([{"op": "copy", "path": "/x", "from": "/s"}]),
                "unknown operation \"copy\"",
            ),
            (
                json!([{"op": "add", "path": "/id", "value": "b"}]),
                "system property",
            ),
            (
                json!([{"op": "add", "path": "x", "value": 1}]),
                "must start with '/'",
            ),
            (
                json!([{"op": "incr", "path": "/n", "value": "1"}]),
                "needs a number",
            ),
            (json!([]), "at least one operation"),
            (
                json!({"operations": (0..11).map(|_| json!({"op": "remove", "path": "/s"})).collect::<Vec<_>>()}),
                "more than the 10 allowed",
            ),
            (
                json!({"operations": [{"op": "remove", "path": "/s"}], "condition": "WHERE c.s"}),
                "must have the form",
            ),
            (
                json!({"operations": [{"op": "remove", "path": "/s"}], "condition": "from c where ("}),
                "is not valid",
            ),
        ];
        for (ops, needle) in cases {
            let err = patched(doc.clone(), ops.clone()).unwrap_err();
            assert!(err.contains(needle), "{ops}: {err:?} lacks {needle:?}");
        }
    }

    #[test]
    fn pointers_unescape_and_move_refuses_its_own_member() {
        let doc = json!({"id": "a", "a/b": 1, "m~n": 2, "o": {"p": 1}});
        let ops =
            json!([{"op": "incr", "path": "/a~1b", "value": 1}, {"op": "remove", "path": "/m~0n"}]);
        assert_eq!(
            patched(doc.clone(), ops).unwrap(),
            json!({"id": "a", "a/b": 2, "o": {"p": 1}})
        );
        let err = patched(doc, json!([{"op": "move", "from": "/o", "path": "/o/q"}])).unwrap_err();
        assert!(err.contains("into its own member"), "{err}");
    }

    #[test]
    fn integers_stay_integers_until_they_overflow() {
        let doc = json!({"id": "a", "n": i64::MAX - 1});
        let out = patched(doc, json!([{"op": "incr", "path": "/n", "value": 1}])).unwrap();
        assert_eq!(out["n"], json!(i64::MAX));
        let out = patched(out, json!([{"op": "incr", "path": "/n", "value": 1}])).unwrap();
        assert!(out["n"].is_f64());
    }

    #[test]
    fn conditions_are_evaluated_on_the_document() {
        let key = PartitionKey::String("p".into());
        let patch = Patch::from_json(&json!({"condition": "from root where root.n = 3",
            "operations": [{"op": "remove", "path": "/n"}]}))
        .unwrap();
        assert!(
            patch
                .condition_holds(&key, &json!({"id": "a", "n": 3}))
                .unwrap()
        );
        assert!(
            !patch
                .condition_holds(&key, &json!({"id": "a", "n": 4}))
                .unwrap()
        );
        assert_eq!(patch.condition(), Some("from root where root.n = 3"));
    }
}
