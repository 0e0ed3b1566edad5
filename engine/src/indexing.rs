//! A container's indexing policy, on Azure Cosmos DB's model: which paths of
//! its documents are indexed, and the composite indexes that serve ORDER BY
//! on several paths.
//!
//! ```text
//!   {"indexingMode": "consistent", "automatic": true,
//!    "includedPaths": [{"path": "/*"}],                  every path ...
//!    "excludedPaths": [{"path": "/\"_etag\"/?"}],        ... but _etag
//!    "compositeIndexes": [[{"path": "/name", "order": "ascending"},
//!                          {"path": "/age", "order": "descending"}]]}
//! ```
//!
//! PATHS
//! =====
//!
//! An included or excluded path is a chain of labels from the document's
//! root ending with `/?` (the scalar at that path) or `/*` (everything at
//! and below it); `/[]/` stands for every element of an array, and a label
//! with characters other than letters, digits and `_` is quoted
//! (`/"_etag"/?`). A composite path is a chain of labels alone (`/name`).
//! When included and excluded paths disagree, the most precise one that
//! matches wins: the deeper path, and between two equally deep, `/?` over
//! `/*`. The root (`/*`) must be in one of the two sets; `id` and `_ts` are
//! always indexed unless the mode is `none`.
//!
//! A composite index serves an ORDER BY on exactly its paths, in its order,
//! with its directions on every path or the reverse of them all.
//!
//! [`IndexingPolicy::from_json`] parses, completes and validates a policy as
//! the service does at container creation and replace, and its
//! serialization is the policy as the service echoes it.
//!
//! Non-goals (for now): the index itself. Partita stores, validates and
//! echoes the policy and answers the questions above; queries still scan.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::range_index::Step;

/// The path of the system property `_etag`, excluded from every policy
/// that does not name it.
pub const ETAG_PATH: &str = "/\"_etag\"/?";

/// Why a policy was refused: always the service's 400 (Bad Request).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IndexingPolicyError {
    /// The JSON is not of the policy's shape.
    #[error("the indexing policy is invalid: {0}")]
    Shape(String),
    /// An included, excluded or composite path does not parse.
    #[error(
        "The indexing path '{path}' could not be accepted, failed near position '{position}'. \
         Please ensure that the path is a valid path. Common errors include invalid characters \
         or absence of quotes around labels."
    )]
    Path {
        /// The path as given.
        path: String,
        /// Where it stopped making sense, in characters from its start.
        position: usize,
    },
    /// Neither set names the root.
    #[error(
        "The special mandatory indexing path \"/\" is not provided in any of the path type sets. \
         Please provide this path in one of the sets."
    )]
    NoRoot,
    /// Mode `none` indexes nothing, so it takes no included path.
    #[error(
        "The indexing mode 'none' cannot be used with included paths; \
         leave includedPaths empty or use the mode 'consistent'"
    )]
    NoneWithIncludedPaths,
    /// A composite index names fewer than two paths.
    #[error("a composite index needs at least two paths, not {0}")]
    CompositeTooShort(usize),
    /// A composite index names one path twice.
    #[error("the composite index path '{0}' is named twice in one composite index")]
    CompositeDuplicate(String),
    /// A composite path's order is neither `ascending` nor `descending`.
    #[error(
        "the order of composite index path '{path}' must be \"ascending\" or \"descending\", not {order}"
    )]
    CompositeOrder {
        /// The path.
        path: String,
        /// The order as given (JSON).
        order: String,
    },
    /// A spatial index is not `{"path": "/...", "types": [...]}`.
    #[error("a spatial index needs a path starting with '/' and a list of types, not {0}")]
    Spatial(String),
}

/// Why an ORDER BY cannot be served under a policy: the service's 400.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OrderByError {
    /// Two or more paths and no composite index of them.
    #[error(
        "The order by query does not have a corresponding composite index that it can be served from."
    )]
    NoCompositeIndex,
    /// One path, which the policy excludes.
    #[error("The index path corresponding to the specified order-by item is excluded.")]
    Excluded,
}

/// When the index follows writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IndexingMode {
    /// Updated in the write's transaction (the default).
    #[default]
    Consistent,
    /// The service's deprecated asynchronous mode, which it no longer
    /// grants new containers; kept and echoed, behaves as `Consistent`.
    Lazy,
    /// No index: queries scan.
    None,
}

impl IndexingMode {
    /// The name the service uses (`consistent`, `lazy`, `none`).
    pub fn as_str(self) -> &'static str {
        match self {
            IndexingMode::Consistent => "consistent",
            IndexingMode::Lazy => "lazy",
            IndexingMode::None => "none",
        }
    }
}

impl Serialize for IndexingMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for IndexingMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        // The SDKs spell them `Consistent` and `consistent`; the service
        // takes either.
        match name.to_ascii_lowercase().as_str() {
            "consistent" => Ok(IndexingMode::Consistent),
            "lazy" => Ok(IndexingMode::Lazy),
            "none" => Ok(IndexingMode::None),
            _ => Err(serde::de::Error::custom(format!(
                "indexingMode must be \"consistent\" or \"none\", not {name:?}"
            ))),
        }
    }
}

/// The direction of a composite path or an ORDER BY item.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SortOrder {
    /// Smallest first (the default).
    #[default]
    Ascending,
    /// Largest first.
    Descending,
}

impl SortOrder {
    /// The other direction.
    pub fn reversed(self) -> SortOrder {
        match self {
            SortOrder::Ascending => SortOrder::Descending,
            SortOrder::Descending => SortOrder::Ascending,
        }
    }
}

/// An included or excluded path (`{"path": "/a/?"}`); the legacy per-path
/// `indexes` (kinds, data types, precisions) are dropped, as the service
/// drops them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IndexPath {
    /// `/a/b/?`, `/a/*`, `/tags/[]/name/?`, `/*`.
    pub path: String,
}

impl IndexPath {
    /// The path `path`.
    pub fn new(path: impl Into<String>) -> IndexPath {
        IndexPath { path: path.into() }
    }
}

/// One path of a composite index.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct CompositePath {
    /// `/name`, `/children/[]/age`: labels only, no wildcard.
    pub path: String,
    /// Its direction (ascending when not given).
    pub order: SortOrder,
}

impl CompositePath {
    /// The path `path` in `order`.
    pub fn new(path: impl Into<String>, order: SortOrder) -> CompositePath {
        CompositePath {
            path: path.into(),
            order,
        }
    }
}

/// A container's indexing policy. [`Default`] is the service's default:
/// consistent, automatic, every path included but `/"_etag"/?`.
///
/// ```
/// use engine::{DocumentPath, IndexingPolicy, SortOrder};
/// use serde_json::json;
///
/// let policy = IndexingPolicy::from_json(&json!({
///     "excludedPaths": [{"path": "/body/*"}],
///     "compositeIndexes": [[{"path": "/name"}, {"path": "/age", "order": "descending"}]],
/// }))?;
/// assert!(policy.is_indexed(&DocumentPath::parse("/title")?));
/// assert!(!policy.is_indexed(&DocumentPath::parse("/body/text")?));
/// let by = |p: &str, o| (DocumentPath::parse(p).unwrap(), o);
/// assert!(policy
///     .composite_index_for(&[by("/name", SortOrder::Descending), by("/age", SortOrder::Ascending)])
///     .is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "Value")]
pub struct IndexingPolicy {
    /// `consistent` (the default), `none`, or the legacy `lazy`.
    pub indexing_mode: IndexingMode,
    /// Whether documents are indexed without asking (the default, but for
    /// mode `none`).
    pub automatic: bool,
    /// The paths indexed.
    pub included_paths: Vec<IndexPath>,
    /// The paths not indexed.
    pub excluded_paths: Vec<IndexPath>,
    /// Composite indexes, each two or more paths.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub composite_indexes: Vec<Vec<CompositePath>>,
    /// Spatial indexes (`{"path": "/location/*", "types": ["Point"]}`),
    /// kept and echoed; nothing uses them yet.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spatial_indexes: Vec<Value>,
    /// Members Partita does not know (`vectorIndexes`, `fullTextIndexes`,
    /// ...), kept and echoed as given.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl Default for IndexingPolicy {
    fn default() -> IndexingPolicy {
        IndexingPolicy {
            indexing_mode: IndexingMode::Consistent,
            automatic: true,
            included_paths: vec![IndexPath::new("/*")],
            excluded_paths: vec![IndexPath::new(ETAG_PATH)],
            composite_indexes: Vec::new(),
            spatial_indexes: Vec::new(),
            other: Map::new(),
        }
    }
}

impl TryFrom<Value> for IndexingPolicy {
    type Error = IndexingPolicyError;

    fn try_from(value: Value) -> Result<IndexingPolicy, IndexingPolicyError> {
        IndexingPolicy::from_json(&value)
    }
}

impl IndexingPolicy {
    /// The policy a client sent (`null` for none), completed as the service
    /// completes it (the mode, `automatic`, the root included when neither
    /// set names it, `/"_etag"/?` excluded unless a set names it; for mode
    /// `none`, no paths) and validated.
    ///
    /// # Errors
    /// [`IndexingPolicyError`], each the service's 400.
    pub fn from_json(value: &Value) -> Result<IndexingPolicy, IndexingPolicyError> {
        let mut members = match value {
            Value::Null => Map::new(),
            Value::Object(members) => members.clone(),
            other => {
                return Err(IndexingPolicyError::Shape(format!(
                    "it must be a JSON object, not {}",
                    host_api::type_name(other)
                )));
            }
        };
        let shape = |e: serde_json::Error| IndexingPolicyError::Shape(e.to_string());
        let mut take = |key: &str| members.remove(key).filter(|v| !v.is_null());
        let indexing_mode: IndexingMode = match take("indexingMode") {
            Some(v) => serde_json::from_value(v).map_err(shape)?,
            None => IndexingMode::Consistent,
        };
        let automatic = match take("automatic") {
            Some(v) => serde_json::from_value(v).map_err(shape)?,
            None => indexing_mode != IndexingMode::None,
        };
        let paths = |v: Option<Value>, key: &str| -> Result<Vec<IndexPath>, IndexingPolicyError> {
            match v {
                None => Ok(Vec::new()),
                Some(v) => serde_json::from_value(v).map_err(|e| {
                    IndexingPolicyError::Shape(format!(
                        "{key} must be a list of {{\"path\": \"...\"}}: {e}"
                    ))
                }),
            }
        };
        let mut included_paths = paths(take("includedPaths"), "includedPaths")?;
        let mut excluded_paths = paths(take("excludedPaths"), "excludedPaths")?;
        let composite_indexes = match take("compositeIndexes") {
            None => Vec::new(),
            Some(v) => parse_composite_indexes(&v)?,
        };
        let spatial_indexes = match take("spatialIndexes") {
            None => Vec::new(),
            Some(Value::Array(indexes)) => indexes,
            Some(other) => return Err(IndexingPolicyError::Spatial(other.to_string())),
        };
        for path in &included_paths {
            PathPattern::parse(&path.path, Kind::Included)?;
        }
        for path in &excluded_paths {
            PathPattern::parse(&path.path, Kind::Excluded)?;
        }
        for index in &spatial_indexes {
            let path = index.get("path").and_then(Value::as_str);
            let types = index.get("types").map(Value::is_array);
            if !path.is_some_and(|p| p.starts_with('/')) || types == Some(false) {
                return Err(IndexingPolicyError::Spatial(index.to_string()));
            }
        }
        if indexing_mode == IndexingMode::None {
            if !included_paths.is_empty() {
                return Err(IndexingPolicyError::NoneWithIncludedPaths);
            }
        } else {
            let names = |paths: &[IndexPath], wanted: &PathPattern| {
                paths.iter().any(|p| {
                    PathPattern::parse(&p.path, Kind::Included).ok().as_ref() == Some(wanted)
                })
            };
            let root = PathPattern::root();
            if included_paths.is_empty() && !names(&excluded_paths, &root) {
                included_paths.push(IndexPath::new("/*"));
            }
            if !names(&included_paths, &root) && !names(&excluded_paths, &root) {
                return Err(IndexingPolicyError::NoRoot);
            }
            let etag = PathPattern::etag();
            if !names(&included_paths, &etag) && !names(&excluded_paths, &etag) {
                excluded_paths.push(IndexPath::new(ETAG_PATH));
            }
        }
        Ok(IndexingPolicy {
            indexing_mode,
            automatic,
            included_paths,
            excluded_paths,
            composite_indexes,
            spatial_indexes,
            other: members,
        })
    }

    /// The policy as the service echoes it.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// Whether the scalar at `path` of a document is indexed: never under
    /// mode `none`; always for `/id` and `/_ts` otherwise; else by the most
    /// precise included or excluded path that matches it (deeper first,
    /// then `/?` over `/*`; an excluded path wins a tie).
    pub fn is_indexed(&self, path: &DocumentPath) -> bool {
        if self.indexing_mode == IndexingMode::None {
            return false;
        }
        if let [Segment::Label(name)] = path.0.as_slice()
            && (name == "id" || name == "_ts")
        {
            return true;
        }
        let best = |paths: &[IndexPath]| {
            paths
                .iter()
                .filter_map(|p| PathPattern::parse(&p.path, Kind::Included).ok())
                .filter(|p| p.matches(&path.0))
                .map(|p| p.precision())
                .max()
        };
        match (best(&self.included_paths), best(&self.excluded_paths)) {
            (Some(included), Some(excluded)) => included > excluded,
            (included, _) => included.is_some(),
        }
    }

    /// The composite index that serves an ORDER BY on `items` (paths and
    /// directions): one with exactly these paths in this order, and either
    /// every direction the same or every one reversed.
    pub fn composite_index_for(
        &self,
        items: &[(DocumentPath, SortOrder)],
    ) -> Option<&[CompositePath]> {
        self.composite_indexes
            .iter()
            .find(|index| {
                let same_paths = index.len() == items.len()
                    && index.iter().zip(items).all(|(c, (path, _))| {
                        DocumentPath::parse(&c.path).is_ok_and(|p| &p == path)
                    });
                let same = index.iter().zip(items).all(|(c, (_, o))| c.order == *o);
                let reversed = index
                    .iter()
                    .zip(items)
                    .all(|(c, (_, o))| c.order == o.reversed());
                same_paths && (same || reversed)
            })
            .map(Vec::as_slice)
    }

    /// How the service serves an ORDER BY on `items` under this policy.
    ///
    /// # Errors
    /// [`OrderByError::NoCompositeIndex`] for two or more paths no
    /// composite index serves; [`OrderByError::Excluded`] for one path the
    /// policy does not index.
    pub fn order_by_index(
        &self,
        items: &[(DocumentPath, SortOrder)],
    ) -> Result<OrderByIndex<'_>, OrderByError> {
        if self.indexing_mode == IndexingMode::None {
            return Ok(OrderByIndex::Unindexed);
        }
        match items {
            [] => Ok(OrderByIndex::Unindexed),
            [(path, _)] if self.is_indexed(path) => Ok(OrderByIndex::Range),
            [_] => Err(OrderByError::Excluded),
            _ => self
                .composite_index_for(items)
                .map(OrderByIndex::Composite)
                .ok_or(OrderByError::NoCompositeIndex),
        }
    }
}

/// What serves an ORDER BY ([`IndexingPolicy::order_by_index`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderByIndex<'p> {
    /// One path's range index.
    Range,
    /// This composite index.
    Composite(&'p [CompositePath]),
    /// Nothing: mode `none`, or no ORDER BY.
    Unindexed,
}

fn parse_composite_indexes(value: &Value) -> Result<Vec<Vec<CompositePath>>, IndexingPolicyError> {
    let shape = || {
        IndexingPolicyError::Shape(format!(
            "compositeIndexes must be a list of lists of {{\"path\": \"/...\", \"order\": \"ascending\"}}, not {value}"
        ))
    };
    let mut indexes = Vec::new();
    for index in value.as_array().ok_or_else(shape)? {
        let index = index.as_array().ok_or_else(shape)?;
        if index.len() < 2 {
            return Err(IndexingPolicyError::CompositeTooShort(index.len()));
        }
        let mut paths: Vec<CompositePath> = Vec::with_capacity(index.len());
        let mut parsed = Vec::with_capacity(index.len());
        for item in index {
            let path = item.get("path").and_then(Value::as_str).ok_or_else(shape)?;
            let order = match item.get("order") {
                None | Some(Value::Null) => SortOrder::Ascending,
                Some(Value::String(s)) if s.eq_ignore_ascii_case("ascending") => {
                    SortOrder::Ascending
                }
                Some(Value::String(s)) if s.eq_ignore_ascii_case("descending") => {
                    SortOrder::Descending
                }
                Some(other) => {
                    return Err(IndexingPolicyError::CompositeOrder {
                        path: path.to_owned(),
                        order: other.to_string(),
                    });
                }
            };
            let pattern = PathPattern::parse(path, Kind::Composite)?;
            if parsed.contains(&pattern) {
                return Err(IndexingPolicyError::CompositeDuplicate(path.to_owned()));
            }
            parsed.push(pattern);
            paths.push(CompositePath::new(path, order));
        }
        indexes.push(paths);
    }
    Ok(indexes)
}

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Segment {
    /// A property name, unquoted.
    Label(String),
    /// `[]`: every element of an array.
    Elements,
    /// `{a, b/c}`: a tuple of an array element's paths (included paths
    /// only, right before `/?`), kept as written.
    Tuple(String),
}

/// A path inside a document, as the policy's paths spell it without their
/// ending: `/a/b`, `/tags/[]/name`, `/"odd label"`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DocumentPath(Vec<Segment>);

impl DocumentPath {
    /// Parses `/a/b` (`[]` for the elements of an array).
    ///
    /// # Errors
    /// [`IndexingPolicyError::Path`] for anything else.
    pub fn parse(path: &str) -> Result<DocumentPath, IndexingPolicyError> {
        PathPattern::parse(path, Kind::Document).map(|p| DocumentPath(p.segments))
    }

    /// Its property names from the root; `None` for a path through array
    /// elements (`[]`).
    pub fn labels(&self) -> Option<Vec<&str>> {
        self.0
            .iter()
            .map(|segment| match segment {
                Segment::Label(label) => Some(label.as_str()),
                Segment::Elements | Segment::Tuple(_) => None,
            })
            .collect()
    }

    /// The path of the property names `labels` from the root.
    pub fn of_labels<S: Into<String>>(labels: impl IntoIterator<Item = S>) -> DocumentPath {
        DocumentPath::of_steps(labels.into_iter().map(Step::Label))
    }

    /// The path of `steps` from the root (`[]` for [`Step::Elements`]).
    pub fn of_steps<S: Into<String>>(steps: impl IntoIterator<Item = Step<S>>) -> DocumentPath {
        DocumentPath(
            steps
                .into_iter()
                .map(|step| match step {
                    Step::Label(label) => Segment::Label(label.into()),
                    Step::Elements => Segment::Elements,
                })
                .collect(),
        )
    }
}

/// What a path is for, which decides how it may end.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Included,
    Excluded,
    Composite,
    Document,
}

/// How a policy path ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum End {
    /// `/?`: the scalar at the path.
    Scalar,
    /// `/*`: everything at and below the path.
    Subtree,
    /// No ending (composite and document paths).
    Exact,
}

/// A parsed path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PathPattern {
    segments: Vec<Segment>,
    end: End,
}

impl PathPattern {
    fn root() -> PathPattern {
        PathPattern {
            segments: Vec::new(),
            end: End::Subtree,
        }
    }

    fn etag() -> PathPattern {
        PathPattern {
            segments: vec![Segment::Label("_etag".into())],
            end: End::Scalar,
        }
    }

    fn parse(path: &str, kind: Kind) -> Result<PathPattern, IndexingPolicyError> {
        let chars: Vec<char> = path.chars().collect();
        let fail = |position: usize| IndexingPolicyError::Path {
            path: path.to_owned(),
            position,
        };
        if chars.first() != Some(&'/') {
            return Err(fail(0));
        }
        let wildcard_ok = matches!(kind, Kind::Included | Kind::Excluded);
        // The legacy spelling of the root, which the SDKs' tests still send.
        if chars.len() == 1 && wildcard_ok {
            return Ok(PathPattern::root());
        }
        let mut segments = Vec::new();
        let mut i = 1;
        loop {
            let start = i;
            match chars.get(i) {
                Some('?') | Some('*') if wildcard_ok && i + 1 == chars.len() => {
                    let end = if chars[i] == '?' {
                        End::Scalar
                    } else {
                        End::Subtree
                    };
                    return Ok(PathPattern { segments, end });
                }
                Some('"') => {
                    i += 1;
                    let mut label = String::new();
                    loop {
                        match chars.get(i) {
                            None => return Err(fail(i)),
                            Some('\\') if chars.get(i + 1).is_some() => {
                                label.push(chars[i + 1]);
                                i += 2;
                            }
                            Some('"') => break,
                            Some(c) => {
                                label.push(*c);
                                i += 1;
                            }
                        }
                    }
                    if label.is_empty() {
                        return Err(fail(i));
                    }
                    i += 1;
                    segments.push(Segment::Label(label));
                }
                Some('[') => {
                    if chars.get(i + 1) != Some(&']') {
                        return Err(fail(i + 1));
                    }
                    i += 2;
                    segments.push(Segment::Elements);
                }
                Some('{') if kind == Kind::Included => {
                    let close = chars[i..].iter().position(|c| *c == '}').map(|n| n + i);
                    let Some(close) = close else {
                        return Err(fail(chars.len()));
                    };
                    let tuple_ends_path = chars.get(close + 1) == Some(&'/')
                        && chars.get(close + 2) == Some(&'?')
                        && close + 3 == chars.len();
                    if close == i + 1
                        || !tuple_ends_path
                        || segments.last() != Some(&Segment::Elements)
                    {
                        return Err(fail(i));
                    }
                    segments.push(Segment::Tuple(chars[i + 1..close].iter().collect()));
                    i = close + 1;
                }
                _ => {
                    while chars
                        .get(i)
                        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
                    {
                        i += 1;
                    }
                    if i == start {
                        return Err(fail(i));
                    }
                    segments.push(Segment::Label(chars[start..i].iter().collect()));
                }
            }
            match chars.get(i) {
                None if !wildcard_ok => {
                    return Ok(PathPattern {
                        segments,
                        end: End::Exact,
                    });
                }
                // An included or excluded path needs its `/?` or `/*`.
                None => return Err(fail(i)),
                Some('/') => i += 1,
                Some(_) => return Err(fail(i)),
            }
        }
    }

    /// Whether this included or excluded path covers the scalar at `path`.
    fn matches(&self, path: &[Segment]) -> bool {
        match self.end {
            End::Scalar | End::Exact => self.segments == path,
            End::Subtree => path.starts_with(&self.segments),
        }
    }

    /// Deeper is more precise; at one depth, `/?` over `/*`.
    fn precision(&self) -> (usize, bool) {
        (self.segments.len(), self.end == End::Scalar)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn policy(v: Value) -> IndexingPolicy {
        IndexingPolicy::from_json(&v).unwrap_or_else(|e| panic!("{v}: {e}"))
    }

    fn path(p: &str) -> DocumentPath {
        DocumentPath::parse(p).unwrap()
    }

    fn refused(v: Value) -> IndexingPolicyError {
        IndexingPolicy::from_json(&v).expect_err(&v.to_string())
    }

    #[test]
    fn the_default_is_the_services() {
        let default = json!({
            "indexingMode": "consistent", "automatic": true,
            "includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": ETAG_PATH}]
        });
        assert_eq!(IndexingPolicy::default().to_json(), default);
        for given in [
            Value::Null,
            json!({}),
            json!({"indexingMode": "Consistent", "automatic": true}),
            json!({"includedPaths": [{"path": "/*"}]}),
            json!({"includedPaths": [{"path": "/*", "indexes": [{"kind": "Hash", "dataType": "String"}]}]}),
        ] {
            assert_eq!(policy(given.clone()).to_json(), default, "{given}");
        }
    }

    #[test]
    fn the_echo_drops_legacy_indexes_and_adds_etag_once() {
        let given = json!({
            "automatic": true, "indexingMode": "consistent",
            "includedPaths": [{"path": "/", "indexes": [{"kind": "Hash", "dataType": "Number", "precision": 2}]}],
            "excludedPaths": [{"path": "/\"systemMetadata\"/*"}]
        });
        let echoed = policy(given).to_json();
        assert_eq!(
            echoed,
            json!({
                "indexingMode": "consistent", "automatic": true,
                "includedPaths": [{"path": "/"}],
                "excludedPaths": [{"path": "/\"systemMetadata\"/*"}, {"path": ETAG_PATH}]
            })
        );
        assert_eq!(
            policy(echoed.clone()).to_json(),
            echoed,
            "stable on replace"
        );
        // Naming _etag in either set, quoted or not, keeps it as given.
        let included = policy(json!({"includedPaths": [{"path": "/*"}, {"path": "/_etag/?"}]}));
        assert_eq!(included.excluded_paths, []);
    }

    #[test]
    fn composite_spatial_and_unknown_members_are_echoed() {
        let given = json!({
            "spatialIndexes": [{"path": "/path0/*", "types": ["Point", "LineString", "Polygon", "MultiPolygon"]}],
            "compositeIndexes": [
                [{"path": "/path1", "order": "ascending"}, {"path": "/path2", "order": "descending"}],
                [{"path": "/path4", "order": "Descending"}, {"path": "/path5"}]
            ],
            "vectorIndexes": [{"path": "/embedding", "type": "flat"}]
        });
        let echoed = policy(given.clone()).to_json();
        assert_eq!(echoed["spatialIndexes"], given["spatialIndexes"]);
        assert_eq!(echoed["compositeIndexes"][0], given["compositeIndexes"][0]);
        assert_eq!(
            echoed["compositeIndexes"][1],
            json!([{"path": "/path4", "order": "descending"}, {"path": "/path5", "order": "ascending"}])
        );
        assert_eq!(echoed["vectorIndexes"], given["vectorIndexes"]);
        let back: IndexingPolicy = serde_json::from_value(echoed.clone()).unwrap();
        assert_eq!(back.to_json(), echoed);
    }

    #[test]
    fn mode_none_has_no_paths_and_lazy_is_kept() {
        assert_eq!(
            policy(json!({"indexingMode": "none", "automatic": false})).to_json(),
            json!({"indexingMode": "none", "automatic": false, "includedPaths": [], "excludedPaths": []})
        );
        assert!(!policy(json!({"indexingMode": "None"})).automatic);
        assert_eq!(
            refused(json!({"indexingMode": "none", "includedPaths": [{"path": "/*"}]})),
            IndexingPolicyError::NoneWithIncludedPaths
        );
        let lazy = policy(json!({"indexingMode": "Lazy"}));
        assert_eq!(lazy.indexing_mode, IndexingMode::Lazy);
        assert_eq!(lazy.to_json()["indexingMode"], "lazy");
        assert!(lazy.is_indexed(&path("/a")));
    }

    #[test]
    fn bad_paths_name_their_position() {
        for (bad, position) in [
            ("a/?", 0),
            ("", 0),
            ("/a", 2),
            ("/a/", 3),
            ("/a/*/b/?", 3),
            ("/a b/?", 2),
            ("/a-b/?", 2),
            ("/\"a-b/?", 7),
            ("/[0]/?", 2),
            ("/a//?", 3),
        ] {
            let err = refused(
                json!({"includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": bad}]}),
            );
            assert_eq!(
                err,
                IndexingPolicyError::Path {
                    path: bad.into(),
                    position
                },
                "{bad}"
            );
        }
        let err = refused(json!({"includedPaths": [{"path": "/a/?"}, {"path": 7}]}));
        assert!(matches!(err, IndexingPolicyError::Shape(_)), "{err}");
        assert!(err.to_string().contains("includedPaths"), "{err}");
        let message = refused(json!({"excludedPaths": [{"path": "/a"}]})).to_string();
        assert!(message.starts_with(
            "The indexing path '/a' could not be accepted, failed near position '2'."
        ));
        for good in [
            "/\"a-b\"/?",
            "/a_1/[]/b/*",
            "/\"_etag\"/?",
            "/events/[]/{name, category}/?",
        ] {
            policy(json!({"includedPaths": [{"path": "/*"}, {"path": good}]}));
        }
        // A tuple only in an included path, after `[]`, before `/?`.
        for bad in ["/events/{name}/?", "/events/[]/{name}/*"] {
            assert!(matches!(
                refused(json!({"includedPaths": [{"path": "/*"}, {"path": bad}]})),
                IndexingPolicyError::Path { .. }
            ));
        }
    }

    #[test]
    fn the_root_must_be_named() {
        assert_eq!(
            refused(json!({"includedPaths": [{"path": "/a/?"}]})),
            IndexingPolicyError::NoRoot
        );
        assert!(
            refused(json!({"includedPaths": [{"path": "/a/?"}]}))
                .to_string()
                .starts_with("The special mandatory indexing path \"/\" is not provided")
        );
        // Excluding the root alone is the service's "index nothing but id
        // and _ts", and includes nothing.
        let nothing = policy(json!({"excludedPaths": [{"path": "/*"}]}));
        assert_eq!(nothing.included_paths, []);
        assert_eq!(
            nothing.excluded_paths,
            [IndexPath::new("/*"), IndexPath::new(ETAG_PATH)]
        );
        assert!(nothing.is_indexed(&path("/id")));
        assert!(nothing.is_indexed(&path("/_ts")));
        assert!(!nothing.is_indexed(&path("/a")));
        policy(json!({"includedPaths": [{"path": "/a/?"}], "excludedPaths": [{"path": "/*"}]}));
    }

    #[test]
    fn composite_indexes_are_checked() {
        assert_eq!(
            refused(json!({"compositeIndexes": [[{"path": "/a"}]]})),
            IndexingPolicyError::CompositeTooShort(1)
        );
        assert_eq!(
            refused(json!({"compositeIndexes": [[]]})),
            IndexingPolicyError::CompositeTooShort(0)
        );
        assert!(matches!(
            refused(json!({"compositeIndexes": [[{"path": "/a", "order": "up"}, {"path": "/b"}]]})),
            IndexingPolicyError::CompositeOrder { .. }
        ));
        assert!(matches!(
            refused(json!({"compositeIndexes": [[{"path": "/a", "order": 1}, {"path": "/b"}]]})),
            IndexingPolicyError::CompositeOrder { .. }
        ));
        for wildcard in ["/a/*", "/a/?", "/*", "a"] {
            assert!(
                matches!(
                    refused(json!({"compositeIndexes": [[{"path": wildcard}, {"path": "/b"}]]})),
                    IndexingPolicyError::Path { .. }
                ),
                "{wildcard}"
            );
        }
        assert_eq!(
            refused(json!({"compositeIndexes": [[{"path": "/a"}, {"path": "/\"a\""}]]})),
            IndexingPolicyError::CompositeDuplicate("/\"a\"".into())
        );
        for shape in [
            json!({"compositeIndexes": {}}),
            json!({"compositeIndexes": [[{"order": "ascending"}, {"path": "/b"}]]}),
        ] {
            assert!(matches!(refused(shape), IndexingPolicyError::Shape(_)));
        }
        policy(json!({"compositeIndexes": [[{"path": "/children/[]/age"}, {"path": "/b"}]]}));
    }

    #[test]
    fn spatial_indexes_need_a_path() {
        for bad in [
            json!({"spatialIndexes": {}}),
            json!({"spatialIndexes": [{"types": ["Point"]}]}),
            json!({"spatialIndexes": [{"path": "/a/*", "types": "Point"}]}),
        ] {
            assert!(matches!(refused(bad), IndexingPolicyError::Spatial(_)));
        }
    }

    #[test]
    fn other_shapes_are_refused() {
        for bad in [
            json!([]),
            json!("consistent"),
            json!({"indexingMode": "sometimes"}),
            json!({"automatic": "yes"}),
            json!({"includedPaths": {}}),
        ] {
            assert!(matches!(refused(bad), IndexingPolicyError::Shape(_)));
        }
        let err = serde_json::from_value::<IndexingPolicy>(json!({"indexingMode": 3})).unwrap_err();
        assert!(err.to_string().contains("indexing policy"), "{err}");
    }

    #[test]
    fn the_most_precise_path_wins() {
        // The docs' example: an included path deeper than an excluded one.
        let p = policy(json!({
            "includedPaths": [{"path": "/*"}, {"path": "/food/ingredients/nutrition/*"}],
            "excludedPaths": [{"path": "/food/ingredients/*"}]
        }));
        assert!(p.is_indexed(&path("/food/name")));
        assert!(!p.is_indexed(&path("/food/ingredients")));
        assert!(!p.is_indexed(&path("/food/ingredients/sugar")));
        assert!(p.is_indexed(&path("/food/ingredients/nutrition")));
        assert!(p.is_indexed(&path("/food/ingredients/nutrition/calories")));
        // The training module's: /category/name/? in, /category/* out.
        let p = policy(json!({
            "includedPaths": [{"path": "/*"}, {"path": "/category/name/?"}],
            "excludedPaths": [{"path": "/category/*"}]
        }));
        assert!(p.is_indexed(&path("/category/name")));
        assert!(!p.is_indexed(&path("/category/id")));
        assert!(
            !p.is_indexed(&path("/category/name/first")),
            "/? is the scalar only"
        );
        // At one depth /? beats /*, both ways.
        let p = policy(json!({
            "includedPaths": [{"path": "/*"}, {"path": "/a/?"}],
            "excludedPaths": [{"path": "/a/*"}]
        }));
        assert!(p.is_indexed(&path("/a")));
        assert!(!p.is_indexed(&path("/a/b")));
        let p = policy(json!({
            "includedPaths": [{"path": "/a/*"}],
            "excludedPaths": [{"path": "/*"}, {"path": "/a/?"}]
        }));
        assert!(!p.is_indexed(&path("/a")));
        assert!(p.is_indexed(&path("/a/b")));
        assert!(!p.is_indexed(&path("/b")));
        // The default excludes _etag only.
        let d = IndexingPolicy::default();
        assert!(d.is_indexed(&path("/anything/at/all")));
        assert!(!d.is_indexed(&path("/_etag")));
        assert!(d.is_indexed(&DocumentPath::of_labels(["_etag", "x"])));
        // Mode none indexes nothing, not even id.
        assert!(!policy(json!({"indexingMode": "none"})).is_indexed(&path("/id")));
    }

    #[test]
    fn array_elements_match_brackets_only() {
        // The docs' document: locations is an array of objects.
        let p = policy(json!({
            "includedPaths": [{"path": "/locations/[]/country/?"}, {"path": "/headquarters/employees/?"}],
            "excludedPaths": [{"path": "/*"}]
        }));
        assert!(p.is_indexed(&path("/locations/[]/country")));
        assert!(!p.is_indexed(&path("/locations/[]/city")));
        assert!(!p.is_indexed(&path("/locations/country")));
        assert!(p.is_indexed(&path("/headquarters/employees")));
        assert!(!p.is_indexed(&path("/headquarters/country")));
        let p = policy(json!({"excludedPaths": [{"path": "/tags/[]/*"}]}));
        assert!(!p.is_indexed(&path("/tags/[]")));
        assert!(!p.is_indexed(&path("/tags/[]/name")));
        assert!(
            p.is_indexed(&path("/tags")),
            "/tags/[]/* is only the elements"
        );
        // Quoting changes nothing.
        assert_eq!(path("/\"a\"/b"), path("/a/\"b\""));
    }

    fn by(items: &[(&str, SortOrder)]) -> Vec<(DocumentPath, SortOrder)> {
        items.iter().map(|(p, o)| (path(p), *o)).collect()
    }

    #[test]
    fn a_composite_index_serves_its_order_and_the_reverse() {
        use SortOrder::{Ascending as Asc, Descending as Desc};
        // The docs' table.
        let p = policy(json!({"compositeIndexes": [
            [{"path": "/name", "order": "ascending"}, {"path": "/age", "order": "ascending"}],
            [{"path": "/name", "order": "ascending"}, {"path": "/age", "order": "ascending"}, {"path": "/timestamp", "order": "ascending"}]
        ]}));
        let served =
            |items: &[(&str, SortOrder)]| p.composite_index_for(&by(items)).map(<[_]>::len);
        assert_eq!(served(&[("/name", Asc), ("/age", Asc)]), Some(2));
        assert_eq!(served(&[("/age", Asc), ("/name", Asc)]), None);
        assert_eq!(served(&[("/name", Desc), ("/age", Desc)]), Some(2));
        assert_eq!(served(&[("/name", Asc), ("/age", Desc)]), None);
        assert_eq!(
            served(&[("/name", Asc), ("/age", Asc), ("/timestamp", Asc)]),
            Some(3)
        );
        assert_eq!(
            served(&[("/name", Desc), ("/age", Desc), ("/timestamp", Desc)]),
            Some(3)
        );
        assert_eq!(
            served(&[("/name", Asc), ("/age", Asc), ("/timestamp", Desc)]),
            None
        );
        // The Python SDK's multi-ORDER BY test: mixed directions, inverted.
        let p = policy(json!({"compositeIndexes": [
            [{"path": "/numberField", "order": "ascending"}, {"path": "/stringField", "order": "descending"}]
        ]}));
        assert!(
            p.composite_index_for(&by(&[("/numberField", Asc), ("/stringField", Desc)]))
                .is_some()
        );
        assert!(
            p.composite_index_for(&by(&[("/numberField", Desc), ("/stringField", Asc)]))
                .is_some()
        );
        assert!(
            p.composite_index_for(&by(&[("/numberField", Asc), ("/stringField", Asc)]))
                .is_none()
        );
        assert!(
            p.composite_index_for(&by(&[("/numberField", Asc)]))
                .is_none()
        );
    }

    #[test]
    fn order_by_needs_an_index() {
        use SortOrder::{Ascending as Asc, Descending as Desc};
        let d = IndexingPolicy::default();
        assert_eq!(
            d.order_by_index(&by(&[("/a", Desc)])),
            Ok(OrderByIndex::Range)
        );
        assert_eq!(
            d.order_by_index(&by(&[("/_etag", Asc)])),
            Err(OrderByError::Excluded)
        );
        assert_eq!(
            d.order_by_index(&by(&[("/a", Asc), ("/b", Asc)])),
            Err(OrderByError::NoCompositeIndex)
        );
        assert_eq!(d.order_by_index(&[]), Ok(OrderByIndex::Unindexed));
        let p = policy(json!({
            "excludedPaths": [{"path": "/body/*"}],
            "compositeIndexes": [[{"path": "/a"}, {"path": "/body"}]]
        }));
        assert_eq!(
            p.order_by_index(&by(&[("/body", Asc)])),
            Err(OrderByError::Excluded)
        );
        assert!(matches!(
            p.order_by_index(&by(&[("/a", Desc), ("/body", Desc)])),
            Ok(OrderByIndex::Composite(_))
        ));
        let none = policy(json!({"indexingMode": "none"}));
        assert_eq!(
            none.order_by_index(&by(&[("/a", Asc), ("/b", Asc)])),
            Ok(OrderByIndex::Unindexed)
        );
        assert_eq!(
            OrderByError::NoCompositeIndex.to_string(),
            "The order by query does not have a corresponding composite index that it can be served from."
        );
    }
}
