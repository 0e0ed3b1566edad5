//! The in-memory store's range index ([`crate::range_index`]): per
//! container, a tree of every live document's entries, built when a
//! query first asks it (from the latest versions the change log keeps)
//! and kept by `commit` from then on. A container no query asks of (a
//! benchmark of transactions, a procedure's partition) costs its commits
//! nothing.
//!
//! ```text
//!   entries: path key ─► value key ─► {(rid, partition)}   (ordered by value)
//!   docs:    partition ─► id ─► rid,  rid ─► document       (the live documents)
//! ```
//!
//! A value most often has one document (an id, a time), held without a
//! set; partitions are shared by their documents' entries. Once built,
//! a commit pays for its documents' entries (a few microseconds each),
//! where the SQLite store writes them later, when it folds its log.
//!
//! A commit replaces each changed document's entries: the old ones are
//! computed again from the document it replaces (kept in `docs`, the
//! same `Arc` the engine holds), under the same policy, so nothing but
//! the live documents and their entries is kept. A new policy computes
//! every document's entries again, at once (`progress` is then 100
//! straight away); mode `none` keeps the documents and no entry, and the
//! index answers nothing. A read asks the same of the entries as the
//! SQLite store asks of its `idx` table: the terms the policy indexes,
//! the most selective naming the candidates
//! ([`range_index::most_selective`]) and the others filtering them. A
//! document has an entry at an indexed path exactly when it has a value
//! there, so a term's filter asks the document itself
//! ([`IndexTerm::matches`]).
//!
//! A build holds the index for writing; a commit to a container whose
//! index is not built appends to the log while it holds the index for
//! reading, so the build sees every commit either in the log or after
//! it, in `commit`.
//!
//! Consistency: `Storage::commit` updates the index before it returns,
//! and the engine publishes the commit in memory after that. A query
//! reads the index when it asks it, and the documents from its
//! snapshots of their partitions. A commit between the two can make the
//! index name a document the snapshot does not hold (it is passed over)
//! or no longer name one the snapshot holds in a version that matched
//! (the query misses it, as though it ran a moment later, as it would
//! on the SQLite store, whose index also runs ahead of the engine's
//! memory). Once no commit is in flight the index describes exactly the
//! published documents, so every query answers as a scan does. A commit
//! the engine fails after `commit` returned (a fault injected after the
//! write) leaves the index ahead of memory until the store is dropped;
//! the engine refuses every write from then on.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;

use host_api::PartitionKey;

use crate::document::Document;
use crate::indexing::IndexingPolicy;
use crate::range_index::{self, Accept, IndexTerm, IndexedPaths};
use crate::storage::{IndexWalk, RecordChange, WalkPage};

type Hasher = foldhash::quality::RandomState;

/// A document in the index: its rid and its partition (shared by its
/// entries). Rids are unique in a container, so sets of them order by
/// the rid alone, without comparing partition keys.
type Holder = (u64, Arc<PartitionKey>);

/// The documents with one value at one path: most values (ids, times)
/// have one, which then costs no set.
enum Holders {
    One(Holder),
    Many(BTreeSet<Holder>),
}

impl Holders {
    fn insert(&mut self, holder: Holder) {
        match self {
            Holders::One(one) if *one == holder => {}
            Holders::One(one) => {
                let one = one.clone();
                *self = Holders::Many(BTreeSet::from([one, holder]));
            }
            Holders::Many(many) => {
                many.insert(holder);
            }
        }
    }

    /// Removes `holder`; whether none is left.
    fn remove(&mut self, holder: &Holder) -> bool {
        match self {
            Holders::One(one) => one == holder,
            Holders::Many(many) => {
                many.remove(holder);
                many.is_empty()
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Holders::One(_) => 1,
            Holders::Many(many) => many.len(),
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Holder> {
        let (one, many) = match self {
            Holders::One(one) => (Some(one), None),
            Holders::Many(many) => (None, Some(many)),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

/// One container's range index (see the module docs).
pub(super) struct ContainerIndex {
    entries: Tree,
    docs: HashMap<PartitionKey, Partition, Hasher>,
    /// Whether it holds the live documents: only once a query has asked
    /// it ([`ContainerIndex::build`]); before, it holds nothing and
    /// commits leave it alone.
    built: bool,
}

/// The entries of a container's documents under its policy: path key →
/// value key → the documents with that value there.
struct Tree {
    policy: Arc<IndexingPolicy>,
    indexed: IndexedPaths,
    paths: HashMap<String, BTreeMap<Vec<u8>, Holders>, Hasher>,
}

/// One logical partition's live documents.
struct Partition {
    key: Arc<PartitionKey>,
    rids: HashMap<Arc<str>, u64, Hasher>,
    documents: HashMap<u64, Document, Hasher>,
}

impl Tree {
    fn new(policy: &IndexingPolicy) -> Tree {
        Tree {
            policy: Arc::new(policy.clone()),
            indexed: IndexedPaths::default(),
            paths: HashMap::default(),
        }
    }

    /// Adds the entries of `document`, (`pk`, `rid`). An entry the walk
    /// gives twice (an array's equal elements) is added once, and removed
    /// once by [`Tree::remove`].
    fn add(&mut self, pk: &Arc<PartitionKey>, rid: u64, document: &Document) {
        let Tree {
            policy,
            indexed,
            paths,
        } = self;
        indexed.visit(document.value(), policy, &mut |path, value| {
            let holder = (rid, Arc::clone(pk));
            // Keys are copied only when they are new.
            let values = match paths.get_mut(path) {
                Some(values) => values,
                None => paths.entry(path.to_owned()).or_default(),
            };
            match values.get_mut(value) {
                Some(holders) => holders.insert(holder),
                None => {
                    values.insert(value.to_vec(), Holders::One(holder));
                }
            }
        });
    }

    /// Removes the entries `document`, (`pk`, `rid`), has: the ones
    /// [`Tree::add`] gave it, under the same policy.
    fn remove(&mut self, pk: &Arc<PartitionKey>, rid: u64, document: &Document) {
        let holder = (rid, Arc::clone(pk));
        let Tree {
            policy,
            indexed,
            paths,
        } = self;
        indexed.visit(document.value(), policy, &mut |path, value| {
            let Some(values) = paths.get_mut(path) else {
                return;
            };
            if values
                .get_mut(value)
                .is_some_and(|holders| holders.remove(&holder))
            {
                values.remove(value);
            }
            if values.is_empty() {
                paths.remove(path);
            }
        });
    }
}

impl ContainerIndex {
    /// An empty index under `policy`.
    pub(super) fn new(policy: &IndexingPolicy) -> ContainerIndex {
        ContainerIndex {
            entries: Tree::new(policy),
            docs: HashMap::default(),
            built: false,
        }
    }

    /// Whether it holds the live documents (see [`ContainerIndex::built`]).
    pub(super) fn is_built(&self) -> bool {
        self.built
    }

    /// Indexes `live`, every live document as (partition, rid, document),
    /// and holds them from now on.
    pub(super) fn build(&mut self, live: Vec<(PartitionKey, u64, Document)>) {
        for (pk, rid, document) in live {
            let partition = self.docs.entry(pk).or_insert_with_key(|pk| Partition {
                key: Arc::new(pk.clone()),
                rids: HashMap::default(),
                documents: HashMap::default(),
            });
            partition.rids.insert(Arc::from(document.id()), rid);
            self.entries.add(&partition.key, rid, &document);
            partition.documents.insert(rid, document);
        }
        self.built = true;
    }

    /// Indexes every document again under `policy`, if it is new.
    pub(super) fn set_policy(&mut self, policy: &IndexingPolicy) {
        if *self.entries.policy == *policy {
            return;
        }
        self.entries = Tree::new(policy);
        for partition in self.docs.values() {
            for (&rid, document) in &partition.documents {
                self.entries.add(&partition.key, rid, document);
            }
        }
    }

    /// Replaces the entries of the documents `changes` wrote in `pk`.
    pub(super) fn apply(&mut self, pk: &PartitionKey, changes: &[RecordChange]) {
        let partition = match self.docs.get_mut(pk) {
            Some(partition) => partition,
            None => self.docs.entry(pk.clone()).or_insert_with(|| Partition {
                key: Arc::new(pk.clone()),
                rids: HashMap::default(),
                documents: HashMap::default(),
            }),
        };
        let key = Arc::clone(&partition.key);
        for change in changes {
            if let Some(rid) = partition.rids.remove(&change.id)
                && let Some(old) = partition.documents.remove(&rid)
            {
                self.entries.remove(&key, rid, &old);
            }
            if let Some(document) = &change.document {
                partition.rids.insert(Arc::clone(&change.id), change.rid);
                partition.documents.insert(change.rid, document.clone());
                self.entries.add(&key, change.rid, document);
            }
        }
        if partition.rids.is_empty() {
            self.docs.remove(pk);
        }
    }

    /// Whether the index holds no document and no entry.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.entries.paths.is_empty() && self.docs.is_empty()
    }

    /// The live document `rid` of `pk`.
    fn document(&self, pk: &PartitionKey, rid: u64) -> Option<&Value> {
        let document = self.docs.get(pk)?.documents.get(&rid)?;
        Some(document.value())
    }

    /// Whether the document (`pk`, `rid`) satisfies every one of `terms`.
    fn satisfies(&self, pk: &PartitionKey, rid: u64, terms: &[&IndexTerm]) -> bool {
        terms.is_empty()
            || self
                .document(pk, rid)
                .is_some_and(|document| terms.iter().all(|t| t.matches(document)))
    }

    /// `Storage::index_candidates`.
    pub(super) fn candidates(&self, terms: &[IndexTerm]) -> Option<Vec<(PartitionKey, u64)>> {
        let mut terms: Vec<&IndexTerm> = terms
            .iter()
            .filter(|t| t.indexed_by(&self.entries.policy))
            .collect();
        if terms.len() > 1 {
            let best = range_index::most_selective(terms.len(), |i, cap| {
                let mut n = 0i64;
                for (_, holders) in self.accepted(terms[i]) {
                    n += holders.len() as i64;
                    if n >= cap {
                        break;
                    }
                }
                Ok::<_, std::convert::Infallible>(n.min(cap))
            })
            .unwrap_or(0);
            terms.swap(0, best);
        }
        let (first, rest) = terms.split_first()?;
        let mut found = Vec::new();
        for (_, holders) in self.accepted(first) {
            for (rid, pk) in holders.iter() {
                if self.satisfies(pk, *rid, rest) {
                    found.push((PartitionKey::clone(pk), *rid));
                }
            }
        }
        found.sort();
        found.dedup();
        Some(found)
    }

    /// The entries at `term`'s path whose values it accepts.
    fn accepted<'s>(&'s self, term: &'s IndexTerm) -> Box<dyn Iterator<Item = Held<'s>> + 's> {
        let Some(values) = self.entries.paths.get(&term.path_key()) else {
            return Box::new(std::iter::empty());
        };
        match &term.accept {
            Accept::Values(keys) => Box::new(
                keys.iter()
                    .filter_map(|key| values.get_key_value(key.as_slice())),
            ),
            Accept::Range(low, high) => Box::new(within(values, as_slice(low), as_slice(high))),
        }
    }

    /// `Storage::index_walk`.
    pub(super) fn walk(&self, walk: &IndexWalk<'_>) -> Option<WalkPage> {
        let walked = walk.order.path_key(&self.entries.policy)?;
        let terms: Vec<&IndexTerm> = walk
            .terms
            .iter()
            .filter(|t| t.indexed_by(&self.entries.policy))
            .collect();
        let Some(values) = self.entries.paths.get(&walked) else {
            return Some((Vec::new(), None));
        };
        // The walk's bounds, and where it starts: at or past `from`.
        let (low, high) = walk.order.bounds();
        let mut low = low.map_or(Bound::Unbounded, Bound::Included);
        let mut high = high.map_or(Bound::Unbounded, Bound::Excluded);
        if let Some(from) = walk.from {
            let bound = if walk.descending { &mut high } else { &mut low };
            // `from` replaces the bound it is inside of.
            let inside = match &*bound {
                Bound::Included(key) | Bound::Excluded(key) => match walk.descending {
                    true => from < key.as_slice(),
                    false => key.as_slice() < from,
                },
                Bound::Unbounded => true,
            };
            if inside {
                *bound = Bound::Included(from.to_vec());
            }
        }
        let range = within(values, as_slice(&low), as_slice(&high));
        let ordered: Box<dyn Iterator<Item = Held<'_>>> = match walk.descending {
            false => Box::new(range),
            true => Box::new(range.rev()),
        };
        let mut found = Vec::new();
        for (value, holders) in ordered {
            for (rid, pk) in holders.iter() {
                if !self.satisfies(pk, *rid, &terms) {
                    continue;
                }
                if found.len() >= walk.limit {
                    // Every entry not returned is at or past this key.
                    return Some((found, Some(value.clone())));
                }
                found.push((PartitionKey::clone(pk), *rid));
            }
        }
        Some((found, None))
    }
}

/// A value key and the documents with it.
type Held<'s> = (&'s Vec<u8>, &'s Holders);

fn as_slice(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(key) => Bound::Included(key),
        Bound::Excluded(key) => Bound::Excluded(key),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The entries of `values` between `low` and `high`; none when the bounds
/// cross (where `BTreeMap::range` would panic).
fn within<'m>(
    values: &'m BTreeMap<Vec<u8>, Holders>,
    low: Bound<&[u8]>,
    high: Bound<&[u8]>,
) -> impl DoubleEndedIterator<Item = Held<'m>> + 'm {
    let crossed = match (low, high) {
        (Bound::Included(l), Bound::Included(h)) => l > h,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(h) | Bound::Excluded(h)) => {
            l >= h
        }
        _ => false,
    };
    (!crossed)
        .then(|| values.range::<[u8], _>((low, high)))
        .into_iter()
        .flatten()
}
