//! The engine side of the collection API: [`host_api::Collection`] for a
//! transaction, and the query sources that give queries their view.
//!
//! Who sees what (Cosmos DB's rules, which real scripts depend on):
//!
//! | operation | sees |
//! |---|---|
//! | point read, read feed | the transaction's own writes |
//! | query inside a transaction | the partition as committed when the transaction began, minus the documents it deleted |
//! | `Container::query_items` | each partition's committed state |
//!
//! Links: a container's alt link is `dbs/partita/colls/{id}` and its self
//! link `dbs/{dbRid}/colls/{collRid}/`; a document is addressed by
//! `alt_link + "/docs/" + id` or by its `_self`. Segment keywords compare
//! case-insensitively, and a trailing `/` is allowed.

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::sync::Arc;

use host_api::{
    Collection, Document, HostError, Page, PartitionKey, QueryRequest, Statistics, WriteOptions,
};
use serde_json::Value;

use crate::container::{Container, DATABASE_ID};
use crate::error::{Error, Result};
use crate::partition::{PartitionState, Slot};
use crate::query::{self, Needles, QueryOptions, QueryPage, Source};
use crate::settings::Expiry;
use crate::storage::Skipped;
use crate::txn::{ItemOptions, Txn, Writer};

/// Options of [`Container::query_items`].
#[derive(Clone, Debug, Default)]
pub struct QueryItemsOptions {
    /// Run in this logical partition only (or, for a prefix of a
    /// hierarchical key, in the partitions under it); all partitions when
    /// `None`.
    pub partition_key: Option<PartitionKey>,
    /// Run in these logical partitions only (a physical partition's, say),
    /// as well as under `partition_key` when both are given.
    pub partitions: Option<Vec<PartitionKey>>,
    /// The most items per page (all when `None`).
    pub max_item_count: Option<usize>,
    /// Where the previous page stopped.
    pub continuation: Option<String>,
}

/// The committed state of a set of logical partitions, each taken when the
/// query first scans it (one at a time: a partition not in memory is read
/// from storage without entering the cache, and dropped once the query
/// moves on), without the documents that have expired.
struct Snapshots<'a> {
    container: &'a Container,
    /// The partitions the query may read.
    scope: Scope,
    /// Those that hold documents, in ascending order: listed when the
    /// query asks (a query a range index answers never does).
    keys: std::cell::OnceCell<Vec<PartitionKey>>,
    /// A query of one logical partition: a use of it, which may bring it
    /// into the cache (see `ContainerInner::peek`).
    admits: bool,
    expiry: Option<Expiry>,
    /// The partition scanned last, for the next scan of it, with the
    /// documents storage passed over for lacking the query's needles
    /// (`None`: it read them all).
    last: RefCell<Option<(PartitionKey, Scanned)>>,
    /// The documents read last by rid ([`Source::scan_rids`]): their
    /// partition, the rids asked for, and a state that holds them.
    last_rids: RefCell<Option<ReadByRid>>,
    /// The first storage error: the query fails with it.
    failed: RefCell<Option<Error>>,
}

/// Documents of a partition read by rid: the partition, the rids asked
/// for, and a state that holds them.
type ReadByRid = (PartitionKey, Vec<u64>, Arc<PartitionState>);

/// The logical partitions a query may read: one, or those under a prefix
/// of a hierarchical key, or all; and of those only the listed ones when
/// there is a list.
struct Scope {
    key: Option<PartitionKey>,
    prefix: Option<PartitionKey>,
    /// In ascending order.
    only: Option<Vec<PartitionKey>>,
}

impl Scope {
    fn contains(&self, key: &PartitionKey) -> bool {
        self.key.as_ref().is_none_or(|k| k == key)
            && self.prefix.as_ref().is_none_or(|p| key.starts_with(p))
            && self
                .only
                .as_ref()
                .is_none_or(|only| only.binary_search(key).is_ok())
    }
}

/// A partition as [`Snapshots`] read it: its state, without the documents
/// storage passed over for lacking the query's needles, and those (`None`
/// when it read them all).
#[derive(Clone)]
struct Scanned {
    state: Arc<PartitionState>,
    skipped: Option<Arc<[Skipped]>>,
}

impl Snapshots<'_> {
    /// The partitions in scope that hold documents (or the one partition
    /// of a full key), in ascending order.
    fn keys(&self) -> &[PartitionKey] {
        self.keys.get_or_init(|| {
            let listed = match &self.scope.key {
                Some(key) => Ok(vec![key.clone()]),
                None => self.container.partition_keys(),
            };
            match listed {
                Ok(mut keys) => {
                    keys.retain(|k| self.scope.contains(k));
                    keys.sort();
                    keys.dedup();
                    keys
                }
                Err(err) => {
                    *self.failed.borrow_mut() = Some(err);
                    Vec::new()
                }
            }
        })
    }

    /// A state of `key` that holds its documents with the rids `rids`
    /// (ascending), as the query sees them: a whole partition it already
    /// read, or those documents alone.
    fn rid_state(&self, key: &PartitionKey, rids: &[u64]) -> Option<Arc<PartitionState>> {
        if !self.scope.contains(key) || self.failed.borrow().is_some() {
            return None;
        }
        if let Some((k, scanned)) = &*self.last.borrow()
            && k == key
            && scanned.skipped.is_none()
        {
            return Some(Arc::clone(&scanned.state));
        }
        if let Some((k, read, state)) = &*self.last_rids.borrow()
            && k == key
            && rids.iter().all(|r| read.binary_search(r).is_ok())
        {
            return Some(Arc::clone(state));
        }
        match self
            .container
            .inner
            .peek_rids(&self.container.db, key, rids)
        {
            Ok(state) => {
                *self.last_rids.borrow_mut() =
                    Some((key.clone(), rids.to_vec(), Arc::clone(&state)));
                Some(state)
            }
            Err(err) => {
                *self.failed.borrow_mut() = Some(err);
                None
            }
        }
    }

    /// Whether the index may answer for the logical partition `key` alone
    /// ([`Storage::index_candidates_in`](crate::storage::Storage::index_candidates_in)):
    /// storage keeps the documents and the partition is not in memory.
    fn index_reads_partition(&self, key: &PartitionKey) -> bool {
        self.container.db.storage.keeps_documents()
            && self
                .container
                .inner
                .find(key)
                .is_none_or(|partition| !partition.is_loaded())
    }

    /// The state of `key` as the query sees it, read once per partition.
    /// With `needles`, a partition not in memory comes without the
    /// documents whose text lacks one (listed instead); without, whole.
    fn state(&self, key: &PartitionKey, needles: Option<&Needles>) -> Option<Scanned> {
        if !self.scope.contains(key) || self.failed.borrow().is_some() {
            return None;
        }
        if let Some((k, scanned)) = &*self.last.borrow()
            && k == key
            && (scanned.skipped.is_none() || needles.is_some())
        {
            return Some(scanned.clone());
        }
        let db = &self.container.db;
        let read = match needles {
            Some(needles) if !self.admits => self
                .container
                .inner
                .peek_containing(db, key, needles)
                .map(|(state, skipped)| Scanned {
                    state,
                    skipped: Some(Arc::from(skipped)),
                }),
            _ => self
                .container
                .inner
                .peek(db, key, self.admits)
                .map(|state| Scanned {
                    state,
                    skipped: None,
                }),
        };
        match read {
            Ok(scanned) => {
                *self.last.borrow_mut() = Some((key.clone(), scanned.clone()));
                Some(scanned)
            }
            Err(err) => {
                *self.failed.borrow_mut() = Some(err);
                None
            }
        }
    }
}

impl Source for Snapshots<'_> {
    fn partitions(&self) -> Vec<PartitionKey> {
        self.keys().to_vec()
    }

    fn scan_rids(
        &self,
        key: &PartitionKey,
        after: Option<u64>,
        rids: &[u64],
        f: &mut dyn FnMut(u64, &Value, usize) -> ControlFlow<()>,
    ) {
        let rids = &rids[rids.partition_point(|r| Some(*r) <= after)..];
        if rids.is_empty() {
            return;
        }
        let Some(state) = self.rid_state(key, rids) else {
            return;
        };
        let expiry = self.expiry.as_ref();
        for &rid in rids {
            let Some(slot) = state.get_by_rid(rid) else {
                continue;
            };
            if expiry.is_some_and(|e| e.expired(slot.document.value())) {
                continue;
            }
            if f(slot.rid, slot.document.value(), slot.size).is_break() {
                return;
            }
        }
    }

    fn index_candidates(
        &self,
        terms: &[crate::range_index::IndexTerm],
    ) -> Option<Vec<(PartitionKey, u64)>> {
        let storage = &self.container.db.storage;
        if let Some(key) = &self.scope.key {
            // One partition in memory is read whole as cheaply as its
            // entries; one in storage alone is not, when an equality
            // names its documents.
            if !self.index_reads_partition(key) {
                return None;
            }
            return match storage.index_candidates_in(&self.container.inner.meta.id, key, terms) {
                Ok(rids) => {
                    rids.map(|rids| rids.into_iter().map(|rid| (key.clone(), rid)).collect())
                }
                Err(err) => {
                    *self.failed.borrow_mut() = Some(err);
                    Some(Vec::new())
                }
            };
        }
        match storage.index_candidates(&self.container.inner.meta.id, terms) {
            Ok(candidates) => candidates.map(|mut candidates| {
                candidates.retain(|(key, _)| self.scope.contains(key));
                candidates
            }),
            Err(err) => {
                *self.failed.borrow_mut() = Some(err);
                Some(Vec::new())
            }
        }
    }

    fn physical_partitions(&self) -> u64 {
        let count = self.container.inner.meta.physical_partitions.max(1);
        let scope = &self.scope;
        match (&scope.key, &scope.prefix, &scope.only) {
            // A partition key, or the prefix of a hierarchical one, lies in
            // one range of hashes: one physical partition.
            (Some(_), _, _) | (None, Some(_), _) => 1,
            (None, None, Some(only)) => {
                let spanned: std::collections::BTreeSet<u32> = only
                    .iter()
                    .map(|key| crate::partition::physical_partition(key, count))
                    .collect();
                spanned.len().max(1) as u64
            }
            (None, None, None) => u64::from(count),
        }
    }

    fn hides_documents(&self) -> bool {
        self.expiry.is_some()
    }

    fn indexing_policy(&self) -> Option<Arc<crate::IndexingPolicy>> {
        self.scope
            .key
            .as_ref()
            .is_none_or(|key| self.index_reads_partition(key))
            .then(|| self.container.inner.indexing_policy())
    }

    fn index_walk(&self, walk: &crate::storage::IndexWalk<'_>) -> Option<crate::storage::WalkPage> {
        if self.scope.key.is_some() {
            return None;
        }
        let storage = &self.container.db.storage;
        match storage.index_walk(&self.container.inner.meta.id, walk) {
            Ok(page) => page.map(|(mut entries, through)| {
                entries.retain(|(key, _)| self.scope.contains(key));
                (entries, through)
            }),
            Err(err) => {
                *self.failed.borrow_mut() = Some(err);
                Some((Vec::new(), None))
            }
        }
    }

    fn scan(
        &self,
        key: &PartitionKey,
        after: Option<u64>,
        f: &mut dyn FnMut(u64, &Value, usize) -> ControlFlow<()>,
    ) {
        let Some(Scanned { state, .. }) = self.state(key, None) else {
            return;
        };
        let expiry = self.expiry.as_ref();
        scan(
            &state,
            after,
            &|slot| expiry.is_some_and(|e| e.expired(slot.document.value())),
            f,
        );
    }

    fn scan_containing(
        &self,
        key: &PartitionKey,
        after: Option<u64>,
        needles: &Needles,
        f: &mut dyn FnMut(u64, &Value, usize) -> ControlFlow<()>,
        skipped: &mut dyn FnMut(usize),
    ) {
        // Expired documents are hidden, not scanned: telling which of the
        // skipped ones are would take parsing them.
        if self.expiry.is_some() || needles.is_empty() {
            return self.scan(key, after, f);
        }
        let Some(Scanned {
            state,
            skipped: passed_over,
        }) = self.state(key, Some(needles))
        else {
            return;
        };
        let passed_over = passed_over.as_deref().unwrap_or_default();
        let mut rest = &passed_over[passed_over.partition_point(|s| Some(s.rid) <= after)..];
        // Each skipped document is counted in its place in rid order, up
        // to where `f` stops the scan.
        let mut until = |rid: u64, rest: &mut &[Skipped]| {
            let n = rest.partition_point(|s| s.rid < rid);
            for s in &rest[..n] {
                skipped(s.size);
            }
            *rest = &rest[n..];
        };
        for slot in state.scan_after(after) {
            until(slot.rid, &mut rest);
            if f(slot.rid, slot.document.value(), slot.size).is_break() {
                return;
            }
        }
        for s in rest {
            skipped(s.size);
        }
    }
}

fn scan(
    state: &PartitionState,
    after: Option<u64>,
    hidden: &dyn Fn(&Slot) -> bool,
    f: &mut dyn FnMut(u64, &Value, usize) -> ControlFlow<()>,
) {
    for slot in state.scan_after(after) {
        if hidden(slot) {
            continue;
        }
        if f(slot.rid, slot.document.value(), slot.size).is_break() {
            return;
        }
    }
}

impl Container {
    /// Runs a Cosmos SQL query and returns one page of results.
    ///
    /// With [`QueryItemsOptions::partition_key`] the query runs in that
    /// logical partition; without it, it fans out over every partition and
    /// merges (ORDER BY, TOP, OFFSET/LIMIT, aggregates and DISTINCT apply to
    /// the whole container). Pass the page's continuation back in `options`
    /// to get the next page.
    ///
    /// ```
    /// # use engine::{Database, Error, QueryItemsOptions};
    /// # use serde_json::json;
    /// let db = Database::in_memory();
    /// let posts = db.create_container("posts", "/postId")?;
    /// for i in 0..3 {
    ///     let id = format!("p{i}");
    ///     posts.create_item(id.as_str(), json!({"id": id, "postId": id, "likes": i}), None)?;
    /// }
    /// let params = serde_json::from_value(json!({"@min": 1})).unwrap();
    /// let page = posts.query_items(
    ///     "SELECT VALUE p.id FROM p WHERE p.likes >= @min ORDER BY p.likes DESC",
    ///     &params,
    ///     &QueryItemsOptions::default(),
    /// )?;
    /// assert_eq!(page.items, [json!("p2"), json!("p1")]);
    /// # Ok::<(), Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Query`] (400) for a syntax error, an unknown function, a
    /// missing parameter or a bad continuation token.
    pub fn query_items(
        &self,
        sql: &str,
        params: &query::Params,
        options: &QueryItemsOptions,
    ) -> Result<QueryPage> {
        self.query_items_with_udfs(sql, params, options, None)
    }

    /// [`Container::query_items`] with a handler for `udf.name(args)` calls
    /// (without one, such calls are a 400).
    ///
    /// # Errors
    /// As [`Container::query_items`], plus the UDF's failures (400).
    pub fn query_items_with_udfs(
        &self,
        sql: &str,
        params: &query::Params,
        options: &QueryItemsOptions,
        udfs: Option<&dyn query::Udf>,
    ) -> Result<QueryPage> {
        // Parsed with the container's computed properties and indexing
        // policy as another node may have changed them.
        self.current(|| self.query_items_once(sql, params, options, udfs))
    }

    /// One run of [`Container::query_items_with_udfs`].
    fn query_items_once(
        &self,
        sql: &str,
        params: &query::Params,
        options: &QueryItemsOptions,
        udfs: Option<&dyn query::Udf>,
    ) -> Result<QueryPage> {
        let parsed = self.inner.parse_query(sql)?;
        // A full key is one partition (listed even when empty); a prefix
        // of a hierarchical key is every partition under it.
        let mut scope = Scope {
            key: None,
            prefix: None,
            only: options.partitions.clone().map(|mut only| {
                only.sort();
                only.dedup();
                only
            }),
        };
        if let Some(key) = &options.partition_key {
            let key = self.inner.scoped_key(key.clone())?;
            if key.components().len() == self.inner.path.levels() {
                scope.key = Some(key);
            } else {
                scope.prefix = Some(key);
            }
        }
        let source = Snapshots {
            container: self,
            admits: scope.key.is_some(),
            scope,
            keys: std::cell::OnceCell::new(),
            expiry: self.inner.expiry(|| self.db.now_secs()),
            last: RefCell::new(None),
            last_rids: RefCell::new(None),
            failed: RefCell::new(None),
        };
        let query_options = QueryOptions {
            max_item_count: options.max_item_count,
            continuation: options.continuation.as_deref().filter(|c| !c.is_empty()),
            udf: udfs,
        };
        let page = query::execute(&parsed, params, &source, &query_options);
        if let Some(err) = source.failed.into_inner() {
            return Err(err);
        }
        Ok(page?)
    }
}

/// A transaction's view for queries: the snapshot it began with, minus the
/// documents it deleted.
struct TxnQueryView<'a> {
    txn: &'a Txn,
}

impl Source for TxnQueryView<'_> {
    fn partitions(&self) -> Vec<PartitionKey> {
        vec![self.txn.partition_key().clone()]
    }

    fn scan(
        &self,
        key: &PartitionKey,
        after: Option<u64>,
        f: &mut dyn FnMut(u64, &Value, usize) -> ControlFlow<()>,
    ) {
        if key == self.txn.partition_key() {
            scan(
                self.txn.base(),
                after,
                &|slot| self.txn.deleted(slot.document.id()) || self.txn.expired(slot),
                f,
            );
        }
    }
}

fn host(err: Error) -> HostError {
    HostError::from(err)
}

impl Collection for Txn {
    fn container_id(&self) -> &str {
        Txn::container_id(self)
    }

    fn partition_key(&self) -> &PartitionKey {
        Txn::partition_key(self)
    }

    fn self_link(&self) -> String {
        self.container_inner().self_link()
    }

    fn alt_link(&self) -> String {
        format!("dbs/{DATABASE_ID}/colls/{}", Txn::container_id(self))
    }

    fn resolve_document_link(&self, link: &str) -> Result<String, HostError> {
        let bad = |what: &str| {
            HostError::new(
                host_api::ErrorCode::BAD_REQUEST,
                format!("{what}: \"{link}\""),
            )
        };
        let trimmed = link.strip_suffix('/').unwrap_or(link);
        let segments: Vec<&str> = trimmed.split('/').collect();
        let [dbs, db, colls, coll, docs, doc] = segments[..] else {
            return Err(bad("Invalid document link"));
        };
        if !(dbs.eq_ignore_ascii_case("dbs")
            && colls.eq_ignore_ascii_case("colls")
            && docs.eq_ignore_ascii_case("docs"))
            || doc.is_empty()
        {
            return Err(bad("Invalid document link"));
        }
        let outside = || {
            bad(
                "Function is not allowed to operate on resources outside current collection. Make sure that the link provided belongs to current collection",
            )
        };
        let inner = self.container_inner();
        if db == DATABASE_ID && coll == Txn::container_id(self) {
            return Ok(doc.to_owned());
        }
        if format!("dbs/{db}/colls/{coll}/") != inner.self_link() {
            return Err(outside());
        }
        let rid = inner
            .decode_document_rid(doc)
            .ok_or_else(|| bad("Invalid document link"))?;
        self.id_by_rid(rid).ok_or_else(|| {
            HostError::new(
                host_api::ErrorCode::NOT_FOUND,
                format!("no document with link {link} in this partition"),
            )
        })
    }

    fn read(&mut self, id: &str) -> Result<Document, HostError> {
        let doc = self.read_item(id).map_err(host)?;
        self.record_read(1, self.size_of(id));
        Ok(doc)
    }

    fn read_feed(
        &mut self,
        page_size: Option<usize>,
        continuation: Option<&str>,
    ) -> Result<Page, HostError> {
        let view = self.view();
        let (items, continuation, bytes) =
            crate::container::feed_page(&view, page_size, continuation, None).map_err(host)?;
        self.record_read(items.len() as u64, bytes);
        Ok(Page {
            items: items.into_iter().map(Document::into_value).collect(),
            continuation,
        })
    }

    fn create(&mut self, doc: Value) -> Result<Document, HostError> {
        let doc = self.create_as(doc, Writer::Script).map_err(host)?;
        self.record_write(&doc);
        Ok(doc)
    }

    fn replace(
        &mut self,
        id: &str,
        doc: Value,
        options: WriteOptions<'_>,
    ) -> Result<Document, HostError> {
        let options = options.if_match.map(ItemOptions::if_match);
        let doc = self
            .replace_as(id, doc, options.as_ref(), Writer::Script)
            .map_err(host)?;
        self.record_write(&doc);
        Ok(doc)
    }

    fn upsert(&mut self, doc: Value, options: WriteOptions<'_>) -> Result<Document, HostError> {
        let options = options.if_match.map(ItemOptions::if_match);
        let doc = self
            .upsert_as(doc, options.as_ref(), Writer::Script)
            .map_err(host)?;
        self.record_write(&doc);
        Ok(doc)
    }

    fn delete(&mut self, id: &str, options: WriteOptions<'_>) -> Result<(), HostError> {
        let options = options.if_match.map(ItemOptions::if_match);
        self.delete_item(id, options.as_ref()).map_err(host)?;
        self.record_delete();
        Ok(())
    }

    fn query(&mut self, request: QueryRequest<'_>) -> Result<Page, HostError> {
        let parsed = self
            .container_inner()
            .parse_query(request.sql)
            .map_err(|e| host(e.into()))?;
        let options = QueryOptions {
            max_item_count: request.page_size,
            continuation: request.continuation.filter(|c| !c.is_empty()),
            udf: self.udfs().map(|u| &**u),
        };
        let page = query::execute(
            &parsed,
            request.parameters,
            &TxnQueryView { txn: self },
            &options,
        )
        .map_err(|e| host(e.into()))?;
        self.record_read(page.stats.docs_scanned, page.stats.bytes_read);
        Ok(Page {
            items: page.items,
            continuation: page.continuation,
        })
    }

    fn stats(&self) -> Statistics {
        self.call_stats()
    }

    fn mark(&mut self) -> bool {
        Txn::mark(self);
        true
    }

    fn roll_back(&mut self) {
        Txn::roll_back(self);
    }
}
