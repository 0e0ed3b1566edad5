//! The range index: the entries a document puts in it, and the terms a
//! query asks of it.
//!
//! An entry is a value of a document at a path the container's indexing
//! policy includes, as a pair of keys: the path's text ([`steps_key`]:
//! `/a/b`, each label with `~` written `~0` and `/` written `~1`, and
//! `/~2`, which no label gives, for a step to any element of an array, as
//! `[]` in a policy: `/tags/~2`, `/items/~2/name`) and the value's bytes
//! ([`order_key`]), ordered as Cosmos DB orders values (null, false, true,
//! numbers, strings, arrays, objects; numbers as doubles). A scalar's key
//! is exact; every array has one key and every object another, so an
//! ORDER BY that walks the index in key order meets them in their place
//! and compares them itself. A path through objects only has one value
//! in a document; one through array elements has one per element, and so
//! as many entries as distinct keys among them (the entries are a set).
//! Storage keeps the entries beside the documents (`docs` in
//! `storage/sqlite.rs`) and answers a query's [`IndexTerm`]s with the
//! documents that may match; the query still evaluates its WHERE on each,
//! so an index that offers too many documents costs time, never a result.
//! The system properties storage keeps outside the body (`_rid`, `_self`,
//! `_etag`, `_attachments`) have no entries; `_ts` has.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

use serde_json::Value;

use crate::indexing::{CompositePath, DocumentPath, IndexingMode, IndexingPolicy, SortOrder};

/// Root properties that never have an entry.
const UNINDEXED: [&str; 4] = ["_rid", "_self", "_etag", "_attachments"];

/// One step of a path from a document's root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step<S = String> {
    /// The property of this name.
    Label(S),
    /// Any element of an array (`[]` in a policy's paths).
    Elements,
}

impl<S: AsRef<str>> Step<S> {
    /// The step, borrowed.
    pub fn as_ref(&self) -> Step<&str> {
        match self {
            Step::Label(label) => Step::Label(label.as_ref()),
            Step::Elements => Step::Elements,
        }
    }
}

impl From<&str> for Step {
    fn from(label: &str) -> Step {
        Step::Label(label.to_owned())
    }
}

/// The text of the path of `labels` from the root.
pub fn path_key<S: AsRef<str>>(labels: &[S]) -> String {
    let mut key = String::new();
    for label in labels {
        push_label(&mut key, label.as_ref());
    }
    key
}

/// The text of the path of `steps` from the root: [`path_key`]'s, with
/// `/~2` for [`Step::Elements`] (a label's `~` is always `~0`).
pub fn steps_key<S: AsRef<str>>(steps: &[Step<S>]) -> String {
    let mut key = String::new();
    for step in steps {
        match step {
            Step::Label(label) => push_label(&mut key, label.as_ref()),
            Step::Elements => key.push_str("/~2"),
        }
    }
    key
}

fn push_label(key: &mut String, label: &str) {
    key.push('/');
    // Almost every label is written as it is.
    if !label.bytes().any(|b| b == b'~' || b == b'/') {
        key.push_str(label);
        return;
    }
    for c in label.chars() {
        match c {
            '~' => key.push_str("~0"),
            '/' => key.push_str("~1"),
            c => key.push(c),
        }
    }
}

/// The bytes of a scalar, ordered as Cosmos DB orders values; `None` for
/// an array or an object.
pub fn value_key(value: &Value) -> Option<Vec<u8>> {
    let mut key = Vec::new();
    push_value_key(&mut key, value).then_some(key)
}

/// Appends [`value_key`] of `value` to `key`; false, appending nothing,
/// for an array or an object.
fn push_value_key(key: &mut Vec<u8>, value: &Value) -> bool {
    match value {
        Value::Null => key.push(1),
        Value::Bool(false) => key.push(2),
        Value::Bool(true) => key.push(3),
        Value::Number(n) => {
            let Some(x) = n.as_f64() else {
                return false;
            };
            // -0 equals 0; flipping the sign bit (or every bit, for a
            // negative number) makes the bytes sort as the numbers do.
            let bits = if x == 0.0 {
                0f64.to_bits()
            } else {
                x.to_bits()
            };
            let ordered = if bits >> 63 == 0 {
                bits | 1 << 63
            } else {
                !bits
            };
            key.push(NUMBERS);
            key.extend_from_slice(&ordered.to_be_bytes());
        }
        Value::String(s) => {
            key.reserve(1 + s.len());
            key.push(STRINGS);
            // UTF-8's order is code points'; Cosmos DB orders strings by
            // UTF-16 code units (`query::order::cmp_str`), which puts
            // U+E000..U+FFFF after the characters beyond U+FFFF. Their
            // lead bytes, 0xEE and 0xEF, become 0xF5 and 0xF6 (which UTF-8
            // never uses) to sort after 0xF0..0xF4; a lead byte is only
            // ever compared with another, past an equal prefix.
            if s.bytes().any(|b| b == 0xEE || b == 0xEF) {
                key.extend(s.bytes().map(|b| match b {
                    0xEE => 0xF5,
                    0xEF => 0xF6,
                    b => b,
                }));
            } else {
                key.extend_from_slice(s.as_bytes());
            }
        }
        Value::Array(_) | Value::Object(_) => return false,
    }
    true
}

/// The key of an undefined value in a composite entry ([`composite_key`]).
const UNDEFINED: u8 = 0;
/// The first key of a number.
const NUMBERS: u8 = 4;
/// The key of any array ([`order_key`]).
const ARRAY: u8 = 6;
/// The key of any object ([`order_key`]).
const OBJECT: u8 = 7;

/// The key of a value in the index: [`value_key`] for a scalar, one key
/// for every array and one for every object, in Cosmos DB's type order.
pub fn order_key(value: &Value) -> Vec<u8> {
    let mut key = Vec::new();
    push_order_key(&mut key, value);
    key
}

/// Appends [`order_key`] of `value` to `key`.
fn push_order_key(key: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Array(_) => key.push(ARRAY),
        Value::Object(_) => key.push(OBJECT),
        scalar => {
            push_value_key(key, scalar);
        }
    }
}

/// The entries of `document` under `policy`, as (path, value) keys ([`steps_key`],
/// [`order_key`]): one for every value at every path `indexed` accepts,
/// array elements included; none under mode `none`.
#[cfg(any(test, feature = "postgres"))]
pub(crate) fn entries(
    document: &Value,
    policy: &IndexingPolicy,
    indexed: &mut dyn FnMut(&[Step<&str>]) -> bool,
) -> Entries {
    let mut out = Entries::new();
    visit_entries(
        document,
        policy,
        &mut |steps, _| indexed(steps),
        &mut |path, value| {
            out.insert((path.to_owned(), value.to_vec()));
        },
    );
    out
}

/// Gives `emit` each of [`entries`] as the walk meets it, an entry again
/// for each element of an array with the same key; `indexed` is also
/// given the path's [`steps_key`]. Nothing is allocated per entry: a
/// store that finds most entries' keys already there copies none.
fn visit_entries(
    document: &Value,
    policy: &IndexingPolicy,
    indexed: &mut dyn FnMut(&[Step<&str>], &str) -> bool,
    emit: &mut dyn FnMut(&str, &[u8]),
) {
    /// What is left to visit of an object or an array.
    enum Inside<'v> {
        Members(serde_json::map::Iter<'v>),
        Elements(std::slice::Iter<'v, Value>),
    }
    if policy.indexing_mode == IndexingMode::None {
        return;
    }
    let Value::Object(root) = document else {
        return;
    };
    // Depth-first, without recursion (documents nest up to the engine's
    // limit). The path's key grows and shrinks with `steps`: `lens[d]` is
    // its length for the first `d` steps.
    let mut steps: Vec<Step<&str>> = Vec::new();
    let mut key = String::new();
    let mut lens = vec![0];
    let mut value_key = Vec::new();
    let mut stack: Vec<(usize, Inside<'_>)> = vec![(0, Inside::Members(root.iter()))];
    while let Some((depth, inside)) = stack.last_mut() {
        let depth = *depth;
        let next = match inside {
            Inside::Members(members) => members
                .next()
                .map(|(name, value)| (Step::Label(name.as_str()), value)),
            Inside::Elements(items) => items.next().map(|value| (Step::Elements, value)),
        };
        let Some((step, value)) = next else {
            stack.pop();
            continue;
        };
        if depth == 0 && matches!(step, Step::Label(name) if UNINDEXED.contains(&name)) {
            continue;
        }
        steps.truncate(depth);
        steps.push(step);
        key.truncate(lens[depth]);
        match step {
            Step::Label(label) => push_label(&mut key, label),
            Step::Elements => key.push_str("/~2"),
        }
        lens.truncate(depth + 1);
        lens.push(key.len());
        if indexed(&steps, &key) {
            value_key.clear();
            push_order_key(&mut value_key, value);
            emit(&key, &value_key);
        }
        match value {
            Value::Object(inner) => stack.push((depth + 1, Inside::Members(inner.iter()))),
            Value::Array(items) => stack.push((depth + 1, Inside::Elements(items.iter()))),
            _ => {}
        }
    }
    for index in &policy.composite_indexes {
        if let Some((path, value)) = composite_entry(document, index) {
            emit(&path, &value);
        }
    }
}

/// A document's entries: (path key, value key).
pub(crate) type Entries = BTreeSet<(String, Vec<u8>)>;

/// Whether one policy indexes each path, asked of it once per path
/// (asking parses its included and excluded paths): for a store that
/// writes many documents' [`entries`] under one policy.
#[derive(Default)]
pub(crate) struct IndexedPaths(HashMap<String, bool, foldhash::quality::RandomState>);

impl IndexedPaths {
    /// The entries of `document` under `policy`, which must be the policy
    /// every earlier call gave.
    pub(crate) fn entries(&mut self, document: &Value, policy: &IndexingPolicy) -> Entries {
        let mut out = Entries::new();
        self.visit(document, policy, &mut |path, value| {
            out.insert((path.to_owned(), value.to_vec()));
        });
        out
    }

    /// Gives `emit` each of [`IndexedPaths::entries`] as the walk meets
    /// it, without copying its keys, an entry again for each element of
    /// an array with the same key: for a store to which a repeated entry
    /// makes no difference.
    pub(crate) fn visit(
        &mut self,
        document: &Value,
        policy: &IndexingPolicy,
        emit: &mut dyn FnMut(&str, &[u8]),
    ) {
        let memo = &mut self.0;
        let mut indexed = |steps: &[Step<&str>], key: &str| {
            if let Some(indexed) = memo.get(key) {
                return *indexed;
            }
            let indexed = is_indexed(policy, steps);
            memo.insert(key.to_owned(), indexed);
            indexed
        };
        visit_entries(document, policy, &mut indexed, emit);
    }
}

/// The entry path of a composite index: its paths and directions, in
/// parentheses (`(/a asc,/b desc)`), which no single path's key (always
/// `/…`) can be. `None` for an index through array elements (`[]`),
/// which has no entries.
pub fn composite_path_key(index: &[CompositePath]) -> Option<String> {
    let mut key = String::from("(");
    for (i, item) in index.iter().enumerate() {
        let parsed = DocumentPath::parse(&item.path).ok()?;
        let labels = parsed.labels()?;
        if i > 0 {
            key.push(',');
        }
        key.push_str(&path_key(&labels));
        key.push_str(match item.order {
            SortOrder::Ascending => " asc",
            SortOrder::Descending => " desc",
        });
    }
    key.push(')');
    Some(key)
}

/// The key of the tuple `values` (undefined as `None`) in a composite
/// index of these directions: each value's [`order_key`], undefined first,
/// strings escaped and ended so no key is a prefix of another, and each
/// descending part with its bytes inverted; so the keys sort as the
/// tuples do under ORDER BY in those directions, but that arrays (and
/// objects) tie, and so do tuples equal up to one, whatever follows.
pub fn composite_key(values: &[Option<&Value>], orders: &[SortOrder]) -> Vec<u8> {
    let keys: Vec<Option<Vec<u8>>> = values.iter().map(|v| v.map(order_key)).collect();
    let keys: Vec<Option<&[u8]>> = keys.iter().map(Option::as_deref).collect();
    composite_key_of(&keys, orders)
}

/// [`composite_key`] of the values whose [`order_key`]s are `keys`.
fn composite_key_of(keys: &[Option<&[u8]>], orders: &[SortOrder]) -> Vec<u8> {
    let mut key = Vec::new();
    for (part, order) in keys.iter().zip(orders) {
        let start = key.len();
        match part {
            None => key.push(UNDEFINED),
            Some([STRINGS, text @ ..]) => {
                key.push(STRINGS);
                for &b in text {
                    key.push(b);
                    if b == 0 {
                        key.push(0xFF);
                    }
                }
                key.extend_from_slice(&[0, 0]);
            }
            Some(part) => key.extend_from_slice(part),
        }
        if *order == SortOrder::Descending {
            for b in &mut key[start..] {
                *b = !*b;
            }
        }
        // Arrays (and objects) tie among themselves, so what follows one
        // cannot order the tuples: they all end there, tied.
        if matches!(part, Some([ARRAY | OBJECT, ..])) {
            break;
        }
    }
    key
}

/// The composite index of `policy` that orders by `path` the documents
/// whose values `terms` fix (`WHERE c.type = 'post' ORDER BY
/// c.creationDate` and an index on `/type`, `/creationDate`): its last
/// path is `path`, and each before it is fixed to one value by a term;
/// with the prefix those values give every key of those documents.
pub(crate) fn prefixed_index<'p>(
    policy: &'p IndexingPolicy,
    path: &[String],
    terms: &[IndexTerm],
) -> Option<(&'p [CompositePath], Vec<u8>)> {
    policy.composite_indexes.iter().find_map(|index| {
        let (last, fixed) = index.split_last()?;
        let labels_of = |item: &CompositePath| -> Option<Vec<String>> {
            let parsed = DocumentPath::parse(&item.path).ok()?;
            Some(parsed.labels()?.into_iter().map(str::to_owned).collect())
        };
        if labels_of(last)?.as_slice() != path {
            return None;
        }
        let mut keys: Vec<Option<&[u8]>> = Vec::with_capacity(fixed.len());
        for item in fixed {
            let labels = labels_of(item)?;
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            keys.push(Some(fixed_value(terms, &labels)?));
        }
        let orders: Vec<SortOrder> = fixed.iter().map(|item| item.order).collect();
        composite_path_key(index)?;
        Some((index.as_slice(), composite_key_of(&keys, &orders)))
    })
}

/// The one value `terms` fix at `labels` (the key of a `path = value`
/// term there); `None` for none, or for two that disagree (no document
/// matches both, and a prefix holds only one).
fn fixed_value<'t>(terms: &'t [IndexTerm], labels: &[&str]) -> Option<&'t [u8]> {
    let mut fixed = terms.iter().filter_map(|t| match &t.accept {
        Accept::Values(values) if values.len() == 1 && t.is_at(labels) => {
            Some(values[0].as_slice())
        }
        _ => None,
    });
    let first = fixed.next()?;
    fixed.all(|other| other == first).then_some(first)
}

/// The composite index of `policy` whose every path `terms` fix to one
/// value (`c.type = 'post' AND c.userId = @u` and an index on `/type`,
/// `/userId`), with the key those values give: its entries with that key
/// are exactly the documents that satisfy those terms.
pub(crate) fn fixed_index<'p>(
    policy: &'p IndexingPolicy,
    terms: &[IndexTerm],
) -> Option<(&'p [CompositePath], Vec<u8>)> {
    policy.composite_indexes.iter().find_map(|index| {
        let mut keys: Vec<Option<&[u8]>> = Vec::with_capacity(index.len());
        for item in index {
            let parsed = DocumentPath::parse(&item.path).ok()?;
            let labels = parsed.labels()?;
            keys.push(Some(fixed_value(terms, &labels)?));
        }
        let orders: Vec<SortOrder> = index.iter().map(|item| item.order).collect();
        composite_path_key(index)?;
        Some((index.as_slice(), composite_key_of(&keys, &orders)))
    })
}

/// Whether `term` is one a prefix of `index` fixes
/// ([`prefixed_index`]): one value at one of its paths but the last.
pub(crate) fn fixes(index: &[CompositePath], term: &IndexTerm) -> bool {
    let Some((_, fixed)) = index.split_last() else {
        return false;
    };
    matches!(&term.accept, Accept::Values(values) if values.len() == 1)
        && fixed.iter().any(|item| {
            DocumentPath::parse(&item.path)
                .is_ok_and(|parsed| parsed.labels().is_some_and(|labels| term.is_at(&labels)))
        })
}

/// The one of `terms` terms with the fewest entries, whose entries then
/// name a read's candidates (the others filter them). `count(i, cap)` is
/// term `i`'s entries, counted up to `cap`; the cap starts at 256 and grows
/// sixteenfold until some term has fewer, so counting costs about as much
/// as reading the smallest.
pub(crate) fn most_selective<E>(
    terms: usize,
    mut count: impl FnMut(usize, i64) -> Result<i64, E>,
) -> Result<usize, E> {
    let mut cap: i64 = 256;
    loop {
        let mut counted = Vec::with_capacity(terms);
        for i in 0..terms {
            counted.push((count(i, cap)?, i));
        }
        if counted.iter().any(|(n, _)| *n < cap) || cap > 1 << 24 {
            return Ok(counted.iter().min().map_or(0, |(_, i)| *i));
        }
        cap *= 16;
    }
}

/// The first key past every key that starts with `prefix` (`None`: no
/// key is past them all).
fn past_prefix(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The value at `labels` reached through objects, if any.
pub(crate) fn value_at<'v, S: AsRef<str>>(document: &'v Value, labels: &[S]) -> Option<&'v Value> {
    labels.iter().try_fold(document, |at, label| match at {
        Value::Object(members) => members.get(label.as_ref()),
        _ => None,
    })
}

/// A composite index's entry for `document`: its path key and the key of
/// the document's values there ([`composite_key`]). `None` for an index
/// without entries ([`composite_path_key`]).
pub(crate) fn composite_entry(
    document: &Value,
    index: &[CompositePath],
) -> Option<(String, Vec<u8>)> {
    let path = composite_path_key(index)?;
    let mut values = Vec::with_capacity(index.len());
    for item in index {
        let parsed = DocumentPath::parse(&item.path).ok()?;
        values.push(value_at(document, &parsed.labels()?));
    }
    let orders: Vec<SortOrder> = index.iter().map(|item| item.order).collect();
    Some((path, composite_key(&values, &orders)))
}

/// What orders a walk of the index ([`crate::storage::IndexWalk`]).
#[derive(Clone, Copy, Debug)]
pub enum WalkOrder<'a> {
    /// The values at one path (labels from the root).
    Path(&'a [String]),
    /// A composite index's tuples, in its directions.
    Composite(&'a [CompositePath]),
    /// The values at a composite index's last path, among its entries
    /// that start with `prefix` (see `prefixed_index`).
    Prefixed {
        /// The index.
        index: &'a [CompositePath],
        /// The key of the values of its other paths.
        prefix: &'a [u8],
    },
}

impl WalkOrder<'_> {
    /// The path of the entries walked; `None` when `policy` has none.
    pub fn path_key(&self, policy: &IndexingPolicy) -> Option<String> {
        if policy.indexing_mode == IndexingMode::None {
            return None;
        }
        match self {
            WalkOrder::Path(labels) => {
                let steps: Vec<Step<&str>> = labels.iter().map(|l| Step::Label(&**l)).collect();
                (!labels.is_empty()
                    && !UNINDEXED.contains(&labels[0].as_str())
                    && is_indexed(policy, &steps))
                .then(|| path_key(labels))
            }
            WalkOrder::Composite(index) | WalkOrder::Prefixed { index, .. } => policy
                .composite_indexes
                .iter()
                .any(|held| held.as_slice() == *index)
                .then(|| composite_path_key(index))
                .flatten(),
        }
    }

    /// The keys the walk stays within, from the first to the first past
    /// them (unbounded: `None`).
    pub fn bounds(&self) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        match self {
            WalkOrder::Prefixed { prefix, .. } => (Some(prefix.to_vec()), past_prefix(prefix)),
            _ => (None, None),
        }
    }

    /// The key of `document`'s entry walked, if it has one.
    pub fn key_of(&self, document: &Value) -> Option<Vec<u8>> {
        match self {
            WalkOrder::Path(labels) => value_at(document, labels).map(order_key),
            WalkOrder::Composite(index) | WalkOrder::Prefixed { index, .. } => {
                composite_entry(document, index).map(|(_, key)| key)
            }
        }
    }

    /// The key of an entry whose values are `values` (undefined as `None`),
    /// as [`WalkOrder::key_of`] gives it; `None` for a path walk of an
    /// undefined value (which has no entry).
    pub fn key_of_values(&self, values: &[Option<&Value>]) -> Option<Vec<u8>> {
        match self {
            WalkOrder::Path(_) => values.first().copied().flatten().map(order_key),
            WalkOrder::Composite(index) => {
                let orders: Vec<SortOrder> = index.iter().map(|item| item.order).collect();
                Some(composite_key(values, &orders))
            }
            WalkOrder::Prefixed { index, prefix } => {
                let value = values.first().copied().flatten()?;
                let order = index.last()?.order;
                let mut key = prefix.to_vec();
                key.extend(composite_key(&[Some(value)], &[order]));
                Some(key)
            }
        }
    }
}

/// Whether `policy` indexes the values at `path`.
pub(crate) fn is_indexed<S: AsRef<str>>(policy: &IndexingPolicy, path: &[Step<S>]) -> bool {
    policy.is_indexed(&DocumentPath::of_steps(path.iter().map(Step::as_ref)))
}

/// The keys a term accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Accept {
    /// One of these keys (of [`value_key`]), sorted, at least one.
    Values(Vec<Vec<u8>>),
    /// The keys (of [`order_key`]) between these bounds; both unbounded
    /// accepts every value, arrays and objects included (`IS_DEFINED`).
    Range(Bound<Vec<u8>>, Bound<Vec<u8>>),
}

impl Accept {
    /// Whether `key`, a value's [`order_key`], is accepted.
    pub fn accepts(&self, key: &[u8]) -> bool {
        match self {
            Accept::Values(values) => values.binary_search_by(|v| v.as_slice().cmp(key)).is_ok(),
            Accept::Range(low, high) => {
                (match low {
                    Bound::Included(low) => key >= low.as_slice(),
                    Bound::Excluded(low) => key > low.as_slice(),
                    Bound::Unbounded => true,
                }) && (match high {
                    Bound::Included(high) => key <= high.as_slice(),
                    Bound::Excluded(high) => key < high.as_slice(),
                    Bound::Unbounded => true,
                })
            }
        }
    }
}

/// What a query asks of the index: the documents with a value at `path`
/// (any of them, through array elements) whose key `accept` accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexTerm {
    /// The path's steps from the root.
    pub path: Vec<Step>,
    /// The keys it accepts.
    pub accept: Accept,
}

/// How a value at a path compares with a constant, for [`IndexTerm::compare`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Comparison {
    /// `<`
    Less,
    /// `<=`
    AtMost,
    /// `>`
    Greater,
    /// `>=`
    AtLeast,
}

/// The first key past every number's, and the first key of a string.
const STRINGS: u8 = 5;

impl IndexTerm {
    /// A term on `path` that accepts `accept`; `None` for a path that
    /// cannot have an entry.
    fn on(path: Vec<Step>, accept: Accept) -> Option<IndexTerm> {
        match path.first()? {
            Step::Label(first) if !UNINDEXED.contains(&first.as_str()) => {
                Some(IndexTerm { path, accept })
            }
            _ => None,
        }
    }

    /// The term `path = value`; `None` for a value that has no entry
    /// (an array or an object) or a path that cannot have one.
    pub(crate) fn equal(path: Vec<Step>, value: &Value) -> Option<IndexTerm> {
        IndexTerm::within(path, [value])
    }

    /// The term `path IN (values)`; `None` as [`IndexTerm::equal`] for
    /// any of them, or for none.
    pub(crate) fn within<'v>(
        path: Vec<Step>,
        values: impl IntoIterator<Item = &'v Value>,
    ) -> Option<IndexTerm> {
        let mut keys = values
            .into_iter()
            .map(value_key)
            .collect::<Option<Vec<_>>>()?;
        keys.sort();
        keys.dedup();
        if keys.is_empty() {
            return None;
        }
        IndexTerm::on(path, Accept::Values(keys))
    }

    /// The term `path <op> value` for a number or a string `value`: the
    /// values of its type on that side of it (a comparison of two types
    /// is undefined, so false). `None` for any other value.
    pub(crate) fn compare(path: Vec<Step>, op: Comparison, value: &Value) -> Option<IndexTerm> {
        let (start, end) = type_span(value)?;
        let key = value_key(value)?;
        let (low, high) = match op {
            Comparison::Less => (Bound::Included(start), Bound::Excluded(key)),
            Comparison::AtMost => (Bound::Included(start), Bound::Included(key)),
            Comparison::Greater => (Bound::Excluded(key), Bound::Excluded(end)),
            Comparison::AtLeast => (Bound::Included(key), Bound::Excluded(end)),
        };
        IndexTerm::on(path, Accept::Range(low, high))
    }

    /// The term `path BETWEEN low AND high`, for two numbers or two
    /// strings; `None` otherwise.
    pub(crate) fn between(path: Vec<Step>, low: &Value, high: &Value) -> Option<IndexTerm> {
        if type_span(low)? != type_span(high)? {
            return None;
        }
        IndexTerm::on(
            path,
            Accept::Range(
                Bound::Included(value_key(low)?),
                Bound::Included(value_key(high)?),
            ),
        )
    }

    /// The term `STARTSWITH(path, prefix)` (case-sensitive): the strings
    /// whose key begins with the prefix's.
    pub(crate) fn starts_with(path: Vec<Step>, prefix: &str) -> Option<IndexTerm> {
        let low = value_key(&Value::String(prefix.to_owned()))?;
        // No string's key holds 0xFF (see `value_key`), so every key that
        // extends the prefix's comes before this one.
        let mut high = low.clone();
        high.push(0xFF);
        IndexTerm::on(
            path,
            Accept::Range(Bound::Included(low), Bound::Excluded(high)),
        )
    }

    /// The term `IS_DEFINED(path)`: any value.
    pub(crate) fn defined(path: Vec<Step>) -> Option<IndexTerm> {
        IndexTerm::on(path, Accept::Range(Bound::Unbounded, Bound::Unbounded))
    }

    /// [`steps_key`] of the term's path.
    pub fn path_key(&self) -> String {
        steps_key(&self.path)
    }

    /// Whether its path is `labels`, through objects only.
    pub fn is_at<S: AsRef<str>>(&self, labels: &[S]) -> bool {
        self.path.len() == labels.len()
            && self
                .path
                .iter()
                .zip(labels)
                .all(|(step, label)| matches!(step, Step::Label(l) if l == label.as_ref()))
    }

    /// Whether its path steps through array elements, where a document
    /// may have several values.
    pub fn through_arrays(&self) -> bool {
        self.path.contains(&Step::Elements)
    }

    /// Whether `policy` indexes its path.
    pub fn indexed_by(&self, policy: &IndexingPolicy) -> bool {
        is_indexed(policy, &self.path)
    }

    /// Whether `document` satisfies the term: some value of it at the
    /// term's path has a key the term accepts.
    pub fn matches(&self, document: &Value) -> bool {
        let mut stack = vec![(document, 0)];
        while let Some((at, depth)) = stack.pop() {
            match (self.path.get(depth), at) {
                (None, at) if self.accept.accepts(&order_key(at)) => return true,
                (Some(Step::Label(label)), Value::Object(members)) => {
                    stack.extend(members.get(label).map(|inner| (inner, depth + 1)));
                }
                (Some(Step::Elements), Value::Array(items)) => {
                    stack.extend(items.iter().map(|item| (item, depth + 1)));
                }
                _ => {}
            }
        }
        false
    }
}

/// The keys of `value`'s type, from the first to the first past the
/// last, for a number or a string.
fn type_span(value: &Value) -> Option<(Vec<u8>, Vec<u8>)> {
    match value {
        Value::Number(_) => Some((vec![NUMBERS], vec![STRINGS])),
        Value::String(_) => Some((vec![STRINGS], vec![ARRAY])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn value_keys_sort_as_cosmos_orders_values() {
        let ordered = [
            json!(null),
            json!(false),
            json!(true),
            json!(-1e300),
            json!(-2.5),
            json!(-1),
            json!(0),
            json!(1e-300),
            json!(1),
            json!(2.5),
            json!(1e300),
            json!(""),
            json!("A"),
            json!("a"),
            json!("ab"),
            json!("é"),
        ];
        let keys: Vec<Vec<u8>> = ordered.iter().map(|v| value_key(v).unwrap()).collect();
        for pair in keys.windows(2) {
            assert!(pair[0] < pair[1], "{pair:?}");
        }
        assert_eq!(value_key(&json!(-0.0)), value_key(&json!(0)));
        assert_eq!(value_key(&json!(1.0)), value_key(&json!(1)));
        assert_eq!(value_key(&json!([1])), None);
        assert_eq!(value_key(&json!({})), None);
        let last = order_key(ordered.last().unwrap());
        assert!(last < order_key(&json!([])) && order_key(&json!([9])) < order_key(&json!({})));
    }

    #[test]
    fn a_document_has_an_entry_per_indexed_value_at_each_path() {
        let doc = json!({
            "id": "d1", "type": "post", "n": 3, "ok": true, "none": null,
            "user": {"name": "ann", "a/b~c": 1}, "tags": ["x", {"y": 1}],
            "_rid": "AAAA", "_self": "s", "_etag": "\"1\"", "_attachments": "a/", "_ts": 5
        });
        let policy = IndexingPolicy::default();
        let got: Vec<String> = entries(&doc, &policy, &mut |l| is_indexed(&policy, l))
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(
            got,
            [
                "/_ts",
                "/id",
                "/n",
                "/none",
                "/ok",
                "/tags",
                "/tags/~2",
                "/tags/~2",
                "/tags/~2/y",
                "/type",
                "/user",
                "/user/a~1b~0c",
                "/user/name"
            ]
        );
        let excluded = IndexingPolicy::from_json(&json!({
            "includedPaths": [{"path": "/*"}],
            "excludedPaths": [{"path": "/user/*"}]
        }))
        .unwrap();
        let got = entries(&doc, &excluded, &mut |l| is_indexed(&excluded, l));
        assert!(got.iter().all(|(p, _)| !p.starts_with("/user")));
        let none = IndexingPolicy::from_json(&json!({"indexingMode": "none"})).unwrap();
        assert!(entries(&doc, &none, &mut |l| is_indexed(&none, l)).is_empty());
        // The memo of a store that indexes many documents, whose path keys
        // grow and shrink with the walk, gives the same entries, with
        // every path's key what `steps_key` makes of it.
        let deep = json!({"a": {"b": [{"c~": [1, {"d/": 2}]}, 3], "e": {"f": 4}}, "g": 5});
        for policy in [&policy, &excluded] {
            let mut memo = IndexedPaths::default();
            for doc in [&doc, &deep, &doc] {
                assert_eq!(
                    memo.entries(doc, policy),
                    entries(doc, policy, &mut |l| is_indexed(policy, l))
                );
                let mut keys = Vec::new();
                entries(doc, policy, &mut |l| {
                    keys.push(steps_key(l));
                    true
                });
                let mut walked = Vec::new();
                visit_entries(
                    doc,
                    policy,
                    &mut |_, key| {
                        walked.push(key.to_owned());
                        true
                    },
                    &mut |_, _| {},
                );
                assert_eq!(walked, keys);
            }
        }
    }

    #[test]
    fn a_term_matches_the_scalar_at_its_path_only() {
        let term = IndexTerm::equal(vec!["a".into(), "b".into()], &json!(1)).unwrap();
        assert!(term.matches(&json!({"a": {"b": 1.0}})));
        assert!(!term.matches(&json!({"a": {"b": "1"}})));
        assert!(!term.matches(&json!({"a": [{"b": 1}]})));
        assert!(!term.matches(&json!({"a": {}})));
        assert!(IndexTerm::equal(vec![Step::Elements], &json!(1)).is_none());
        assert!(IndexTerm::equal(vec!["_rid".into()], &json!("x")).is_none());
        assert!(IndexTerm::equal(vec!["a".into()], &json!([1])).is_none());
    }

    #[test]
    fn string_keys_sort_as_the_query_engine_compares_strings() {
        let samples = [
            "",
            "a",
            "ab",
            "b",
            "é",
            "\u{7ff}",
            "\u{800}",
            "\u{d7ff}",
            "\u{e000}",
            "\u{e000}a",
            "\u{ffff}",
            "\u{10000}",
            "\u{10000}a",
            "\u{10ffff}",
            "z\u{e000}",
            "z\u{10000}",
        ];
        for a in samples {
            for b in samples {
                let (ka, kb) = (value_key(&json!(a)).unwrap(), value_key(&json!(b)).unwrap());
                assert_eq!(
                    ka.cmp(&kb),
                    crate::query::order::cmp_str(a, b),
                    "{a:?} {b:?}"
                );
                assert!(!ka.contains(&0xFF));
            }
        }
    }

    #[test]
    fn composite_keys_sort_as_order_by_sorts_tuples() {
        use crate::query::order::cmp_opt;
        let values = [
            None,
            Some(json!(null)),
            Some(json!(false)),
            Some(json!(-1)),
            Some(json!(2.5)),
            Some(json!("")),
            Some(json!("a")),
            Some(json!("a\u{0}")),
            Some(json!("a\u{0}b")),
            Some(json!("ab")),
            Some(json!("\u{e000}")),
            Some(json!("\u{10000}")),
            Some(json!([1])),
            Some(json!({"z": 1})),
        ];
        let orders = [
            [SortOrder::Ascending, SortOrder::Ascending],
            [SortOrder::Ascending, SortOrder::Descending],
            [SortOrder::Descending, SortOrder::Ascending],
        ];
        let tuples: Vec<[Option<&Value>; 2]> = values
            .iter()
            .flat_map(|a| values.iter().map(move |b| [a.as_ref(), b.as_ref()]))
            .collect();
        for orders in orders {
            for x in &tuples {
                for y in &tuples {
                    let mut expected = std::cmp::Ordering::Equal;
                    for ((a, b), order) in x.iter().zip(y).zip(orders) {
                        // Arrays and objects have one key each: tied,
                        // whatever follows.
                        if let (Some(Value::Array(_)), Some(Value::Array(_)))
                        | (Some(Value::Object(_)), Some(Value::Object(_))) = (a, b)
                        {
                            break;
                        }
                        let o = match order {
                            SortOrder::Ascending => cmp_opt(*a, *b),
                            SortOrder::Descending => cmp_opt(*a, *b).reverse(),
                        };
                        if o != std::cmp::Ordering::Equal {
                            expected = o;
                            break;
                        }
                    }
                    let got = composite_key(x, &orders).cmp(&composite_key(y, &orders));
                    assert_eq!(got, expected, "{x:?} {y:?} {orders:?}");
                }
            }
        }
    }

    #[test]
    fn every_document_has_an_entry_in_each_composite_index() {
        let policy = IndexingPolicy::from_json(&json!({
            "compositeIndexes": [
                [{"path": "/a"}, {"path": "/b/c", "order": "descending"}],
                [{"path": "/tags/[]/x"}, {"path": "/a"}]
            ]
        }))
        .unwrap();
        let index = &policy.composite_indexes[0];
        assert_eq!(composite_path_key(index).unwrap(), "(/a asc,/b/c desc)");
        assert_eq!(composite_path_key(&policy.composite_indexes[1]), None);
        let composite = |doc: &Value| -> Vec<(String, Vec<u8>)> {
            entries(doc, &policy, &mut |l| is_indexed(&policy, l))
                .into_iter()
                .filter(|(p, _)| p.starts_with('('))
                .collect()
        };
        let desc = [SortOrder::Ascending, SortOrder::Descending];
        assert_eq!(
            composite(&json!({"id": "x", "a": 1, "b": {"c": "y"}})),
            [(
                "(/a asc,/b/c desc)".to_owned(),
                composite_key(&[Some(&json!(1)), Some(&json!("y"))], &desc)
            )]
        );
        // Undefined values have their key; so does a path through an array.
        assert_eq!(
            composite(&json!({"id": "x", "b": [{"c": 1}]})),
            [(
                "(/a asc,/b/c desc)".to_owned(),
                composite_key(&[None, None], &desc)
            )]
        );
        let walk = WalkOrder::Composite(index);
        assert_eq!(
            walk.path_key(&policy).as_deref(),
            Some("(/a asc,/b/c desc)")
        );
        assert_eq!(walk.path_key(&IndexingPolicy::default()), None);
    }

    #[test]
    fn the_most_selective_term_is_found_by_counting_up_to_a_growing_cap() {
        let entries = [5_000i64, 3_000, 70_000];
        let mut caps = Vec::new();
        let best = most_selective(3, |i, cap| {
            caps.push(cap);
            Ok::<_, ()>(entries[i].min(cap))
        });
        assert_eq!(best, Ok(1));
        // Every term reached 256, so the cap grew once; at 4,096 one did
        // not.
        assert_eq!(caps, [256, 256, 256, 4096, 4096, 4096]);
        assert_eq!(most_selective(2, |i, _| Err::<i64, _>(i)), Err(0));
    }

    #[test]
    fn array_elements_have_entries_at_any_depth_once_per_key() {
        let doc = json!({
            "id": "d", "tags": ["x", "y", "x", 1, 1.0, [2, [3]], {"z": 4}, null],
            "items": [{"name": "a", "qty": 1}, {"name": "b"}, {"name": "a"}, "loose"],
            "~/": ["t"]
        });
        let policy = IndexingPolicy::default();
        let got = entries(&doc, &policy, &mut |p| is_indexed(&policy, p));
        let at = |path: &str| -> Vec<Vec<u8>> {
            got.iter()
                .filter(|(p, _)| p == path)
                .map(|(_, v)| v.clone())
                .collect()
        };
        let keys = |values: &[Value]| -> Vec<Vec<u8>> {
            let mut keys: Vec<Vec<u8>> = values.iter().map(order_key).collect();
            keys.sort();
            keys.dedup();
            keys
        };
        // A path through elements has every distinct key there, arrays
        // and objects included (one key each); the array keeps its own.
        assert_eq!(at("/tags"), keys(&[json!([])]));
        assert_eq!(
            at("/tags/~2"),
            keys(&[
                json!("x"),
                json!("y"),
                json!(1),
                json!([]),
                json!({}),
                json!(null)
            ])
        );
        assert_eq!(at("/tags/~2/~2"), keys(&[json!(2), json!([])]));
        assert_eq!(at("/tags/~2/~2/~2"), keys(&[json!(3)]));
        assert_eq!(at("/tags/~2/z"), keys(&[json!(4)]));
        assert_eq!(at("/items/~2/name"), keys(&[json!("a"), json!("b")]));
        assert_eq!(at("/items/~2/qty"), keys(&[json!(1)]));
        // No label's key is an elements step's.
        assert_eq!(at("/~0~1/~2"), keys(&[json!("t")]));
        assert_eq!(steps_key(&[Step::Label("~2")]), "/~02");
        // The policy's `[]` paths choose among them.
        let policy = IndexingPolicy::from_json(&json!({
            "includedPaths": [{"path": "/items/[]/name/?"}, {"path": "/tags/?"}],
            "excludedPaths": [{"path": "/*"}]
        }))
        .unwrap();
        let paths: BTreeSet<String> = entries(&doc, &policy, &mut |p| is_indexed(&policy, p))
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(
            paths.into_iter().collect::<Vec<_>>(),
            ["/id", "/items/~2/name", "/tags"]
        );
    }

    #[test]
    fn a_term_on_array_elements_matches_when_some_element_does() {
        let tags = vec![Step::from("tags"), Step::Elements];
        let x = IndexTerm::equal(tags.clone(), &json!("x")).unwrap();
        assert!(x.matches(&json!({"tags": ["y", "x"]})));
        assert!(!x.matches(&json!({"tags": ["y"]})));
        assert!(!x.matches(&json!({"tags": []})));
        assert!(!x.matches(&json!({"tags": "x"})));
        assert!(!x.matches(&json!({"tags": {"0": "x"}})));
        assert!(!x.matches(&json!({"tags": [["x"]]})));
        let name = vec![Step::from("items"), Step::Elements, Step::from("name")];
        let a = IndexTerm::starts_with(name.clone(), "a").unwrap();
        assert!(a.matches(&json!({"items": [{"name": 1}, {"name": "ab"}]})));
        assert!(!a.matches(&json!({"items": [{"name": "b"}, {"nom": "a"}]})));
        assert!(x.through_arrays() && !x.is_at(&["tags"]));
        let plain = IndexTerm::equal(vec!["tags".into()], &json!(1)).unwrap();
        assert!(!plain.through_arrays() && plain.is_at(&["tags"]));
        assert_eq!(x.path_key(), "/tags/~2");
        assert_eq!(a.path_key(), "/items/~2/name");
        // Every document a term matches has an entry it accepts.
        let policy = IndexingPolicy::default();
        for doc in [
            json!({"tags": ["y", "x"]}),
            json!({"items": [{"name": "abc"}], "tags": ["x"]}),
        ] {
            let got = entries(&doc, &policy, &mut |p| is_indexed(&policy, p));
            for term in [&x, &a] {
                let entry = got
                    .iter()
                    .any(|(p, v)| *p == term.path_key() && term.accept.accepts(v));
                assert_eq!(term.matches(&doc), entry, "{doc} {term:?}");
            }
        }
    }

    #[test]
    fn ranges_keep_to_the_type_of_their_constant() {
        let path = || vec![Step::from("n")];
        let above = IndexTerm::compare(path(), Comparison::Greater, &json!(2)).unwrap();
        assert!(above.matches(&json!({"n": 2.5})));
        for no in [
            json!(2),
            json!(1),
            json!("3"),
            json!([3]),
            json!(null),
            json!(true),
        ] {
            assert!(!above.matches(&json!({ "n": no })), "{no}");
        }
        let below = IndexTerm::compare(path(), Comparison::AtMost, &json!("b")).unwrap();
        assert!(below.matches(&json!({"n": "b"})) && below.matches(&json!({"n": ""})));
        assert!(!below.matches(&json!({"n": "ba"})) && !below.matches(&json!({"n": 1})));
        assert!(IndexTerm::compare(path(), Comparison::Less, &json!(true)).is_none());
        assert!(IndexTerm::between(path(), &json!(1), &json!("z")).is_none());
        let between = IndexTerm::between(path(), &json!(1), &json!(3)).unwrap();
        assert!(between.matches(&json!({"n": 1})) && between.matches(&json!({"n": 3})));
        assert!(!between.matches(&json!({"n": 3.5})));
        let prefix = IndexTerm::starts_with(path(), "ab").unwrap();
        assert!(
            prefix.matches(&json!({"n": "ab"})) && prefix.matches(&json!({"n": "ab\u{10ffff}"}))
        );
        assert!(!prefix.matches(&json!({"n": "a"})) && !prefix.matches(&json!({"n": "ac"})));
        let defined = IndexTerm::defined(path()).unwrap();
        assert!(defined.matches(&json!({"n": {}})) && defined.matches(&json!({"n": null})));
        assert!(!defined.matches(&json!({"m": 1})));
        let within = IndexTerm::within(path(), [&json!(2), &json!("x"), &json!(2.0)]).unwrap();
        assert_eq!(
            within.accept,
            Accept::Values(vec![
                value_key(&json!(2)).unwrap(),
                value_key(&json!("x")).unwrap()
            ])
        );
        assert!(IndexTerm::within(path(), [&json!(1), &json!([1])]).is_none());
    }
}
