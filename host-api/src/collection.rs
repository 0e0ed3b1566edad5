//! The collection API: what a running procedure or trigger can do.
//!
//! Both sandboxes are thin adapters over this one trait: the JavaScript
//! runtime turns `getContext().getCollection().createDocument(...)` into
//! [`Collection::create`], the WebAssembly ABI turns its `create` import into
//! the same call, and both render a failure with the same [`ErrorCode`]
//! table. The engine implements it for its single-partition transaction.
//!
//! Implementations must guarantee:
//! * every write is confined to [`Collection::partition_key`]; a document
//!   whose key differs fails with [`ErrorCode::BAD_REQUEST`] and nothing is
//!   written;
//! * nothing becomes visible outside the call until the host commits, and a
//!   host that rolls back leaves no trace;
//! * point reads and [`Collection::read_feed`] see the call's own writes;
//!   [`Collection::query`] sees the partition as it was committed when the
//!   transaction began (for a trigger: before the triggering write), minus
//!   the documents the transaction has deleted (Cosmos DB's behaviour, which
//!   scripts such as truncateFeed rely on: its count query must not include
//!   the document just inserted);
//! * a failing operation changes nothing, so a script that handles the error
//!   can go on.
//!
//! [`ErrorCode`]: crate::ErrorCode
//! [`ErrorCode::BAD_REQUEST`]: crate::ErrorCode::BAD_REQUEST

use std::time::Duration;

use serde_json::{Map, Value};

use crate::{Document, HostError, PartitionKey};

/// Options of a write, as scripts pass them.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions<'a> {
    /// `etag` (If-Match): the write fails with 412 unless the document's
    /// current `_etag` equals this.
    pub if_match: Option<&'a str>,
}

/// A query as a script submits it.
#[derive(Clone, Copy, Debug)]
pub struct QueryRequest<'a> {
    /// The SQL text.
    pub sql: &'a str,
    /// Parameter values by name (`"@userId"`).
    pub parameters: &'a Map<String, Value>,
    /// The most items in the page (Cosmos DB scripts default to 100).
    pub page_size: Option<usize>,
    /// Where the previous page stopped; `None` or empty starts over.
    pub continuation: Option<&'a str>,
}

/// One page of query results or of a read feed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Page {
    /// The items: documents, projections or scalars.
    pub items: Vec<Value>,
    /// Pass back to continue; `None` when there is nothing more. Tokens stay
    /// valid across transactions and calls.
    pub continuation: Option<String>,
}

/// What a call did, for responses and request charges: the one statistics
/// type from the sandbox to the response.
///
/// A [`Collection`] counts the documents (its `stats` fills only those);
/// a runtime adds what one script cost (instructions or fuel, its wall
/// time); the facade counts the scripts and sums them for the request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Statistics {
    /// Documents read by point reads, feeds and queries (scanned).
    pub docs_read: u64,
    /// Documents created, replaced or deleted.
    pub docs_written: u64,
    /// Bytes of documents read.
    pub bytes_read: u64,
    /// Bytes of documents written.
    pub bytes_written: u64,
    /// JavaScript bytecode instructions executed.
    pub instructions: u64,
    /// WebAssembly fuel used (deterministic: the same call on the same
    /// data uses the same fuel).
    pub fuel: u64,
    /// Scripts run (a procedure, each trigger); each adds a fixed request
    /// charge.
    pub scripts_run: u64,
    /// Wall time.
    pub wall_time: Duration,
}

impl Statistics {
    /// These statistics with the document counters of `documents` (what a
    /// collection has counted) in place of their own.
    pub fn with_documents(self, documents: Statistics) -> Statistics {
        Statistics {
            docs_read: documents.docs_read,
            docs_written: documents.docs_written,
            bytes_read: documents.bytes_read,
            bytes_written: documents.bytes_written,
            ..self
        }
    }

    /// The document counters that grew from `before` to these (a
    /// collection's counters are cumulative over a transaction), with
    /// these' script counters.
    pub fn since(self, before: Statistics) -> Statistics {
        Statistics {
            docs_read: self.docs_read.saturating_sub(before.docs_read),
            docs_written: self.docs_written.saturating_sub(before.docs_written),
            bytes_read: self.bytes_read.saturating_sub(before.bytes_read),
            bytes_written: self.bytes_written.saturating_sub(before.bytes_written),
            ..self
        }
    }

    /// Adds every counter of `other` to these, wall time included.
    pub fn add(&mut self, other: Statistics) {
        self.docs_read += other.docs_read;
        self.docs_written += other.docs_written;
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.instructions += other.instructions;
        self.fuel += other.fuel;
        self.scripts_run += other.scripts_run;
        self.wall_time += other.wall_time;
    }
}

/// A read-write view of one logical partition for the length of one call.
/// See the module docs for the guarantees implementations give.
pub trait Collection {
    /// The container's id.
    fn container_id(&self) -> &str;

    /// The logical partition the call is confined to.
    fn partition_key(&self) -> &PartitionKey;

    /// The container's resource link, `dbs/{dbRid}/colls/{collRid}/`
    /// (Cosmos DB's `getSelfLink()`).
    fn self_link(&self) -> String;

    /// The container's name-based link, `dbs/{db}/colls/{container}`
    /// (Cosmos DB's `getAltLink()`; no trailing slash).
    fn alt_link(&self) -> String;

    /// Turns a document link (`alt_link() + "/docs/" + id`, or a document's
    /// `_self`) into the document id.
    ///
    /// # Errors
    /// 400 when the link is malformed or names another container; 404 when
    /// a `_self` link names no document of this partition.
    fn resolve_document_link(&self, link: &str) -> Result<String, HostError>;

    /// Reads a document, seeing the call's own writes.
    ///
    /// # Errors
    /// 404 when there is no such document.
    fn read(&mut self, id: &str) -> Result<Document, HostError>;

    /// The partition's documents in storage order, seeing the call's own
    /// writes, a page at a time.
    ///
    /// # Errors
    /// 400 for a continuation token this feed did not issue.
    fn read_feed(
        &mut self,
        page_size: Option<usize>,
        continuation: Option<&str>,
    ) -> Result<Page, HostError>;

    /// Creates a document (which must carry an `id`; generating one is the
    /// script API's job). A document without the partition-key property
    /// lands in the call's logical partition, as on Cosmos DB.
    ///
    /// # Errors
    /// 400 (bad body, another partition's key), 409 (id exists), 413 (over
    /// 2 MB).
    fn create(&mut self, doc: Value) -> Result<Document, HostError>;

    /// Replaces the document `id`; a body with another id renames the
    /// document, which keeps its `_rid` (as on Cosmos DB).
    ///
    /// # Errors
    /// 400, 404, 409 (a rename onto a taken id), 412 (etag), 413.
    fn replace(
        &mut self,
        id: &str,
        doc: Value,
        options: WriteOptions<'_>,
    ) -> Result<Document, HostError>;

    /// Creates or replaces a document.
    ///
    /// # Errors
    /// 400, 412 (etag), 413.
    fn upsert(&mut self, doc: Value, options: WriteOptions<'_>) -> Result<Document, HostError>;

    /// Deletes the document `id`.
    ///
    /// # Errors
    /// 404, 412 (etag).
    fn delete(&mut self, id: &str, options: WriteOptions<'_>) -> Result<(), HostError>;

    /// Runs a SQL query over the partition (see the module docs for what it
    /// sees).
    ///
    /// # Errors
    /// 400 for a syntax error, an unknown function, a missing parameter or a
    /// bad continuation token.
    fn query(&mut self, request: QueryRequest<'_>) -> Result<Page, HostError>;

    /// What the call has done so far.
    fn stats(&self) -> Statistics;

    /// Marks the call's writes and statistics as they are now, replacing
    /// any earlier mark, so that [`Collection::roll_back`] can return to
    /// them. A host that runs a call again from its start (a script worker
    /// whose speculation failed) marks first. Returns `false` when this
    /// collection cannot roll back (the default); `roll_back` is then never
    /// called.
    fn mark(&mut self) -> bool {
        false
    }

    /// Undoes every write made since [`Collection::mark`] and restores the
    /// statistics of that moment. Without a mark it does nothing.
    fn roll_back(&mut self) {}
}
