//! Cosmos DB SQL queries over JSON documents.
//!
//! [`parse`] turns query text into a reusable [`Query`]; [`execute`] runs one
//! page of it over a [`Source`] (the logical partitions to scan and their
//! documents in RID order) and returns a [`QueryPage`] with the items, a
//! continuation token when more remain, and the cost ([`QueryStats`]).
//! Semantics follow `cosmos-sql.md` (the reference): JSON values plus
//! *undefined*, three-valued logic, Cosmos type order, undefined dropped from
//! projections, numbers as doubles (integral results print as integers).
//!
//! # Pipeline
//!
//! FROM (each document, `FROM c.path x`, or `FROM x IN c.arr` elements) →
//! JOIN (cross product within the document) → WHERE (keeps rows whose
//! predicate is exactly `true`) → ORDER BY (top-k; beside aggregates it
//! only drops rows whose single sort key is undefined) → aggregate / GROUP BY →
//! SELECT → DISTINCT → TOP → OFFSET/LIMIT → page. Subqueries (`EXISTS(…)`,
//! `ARRAY(…)`, `(SELECT …)`) run per row over values of that row
//! (`FROM t IN c.tags`); `udf.name(…)` calls go to [`QueryOptions::udf`].
//!
//! # Files
//!
//! * `lexer.rs` – tokens with line/column; `parser.rs` – recursive descent
//!   with a nesting-depth limit ([`MAX_DEPTH`] levels), name resolution and
//!   aggregate lifting; `ast.rs` – the compiled form.
//! * `computed.rs` – computed properties: definitions checked and
//!   compiled, and substituted into a container's queries ([`parse_with`]).
//! * `eval.rs` – expressions, undefined, three-valued logic, LIKE;
//!   `functions.rs` – built-ins, with the spatial family in `spatial.rs`
//!   (GeoJSON through the `geo` crate) and the date and time family in
//!   `datetime.rs`; `order.rs` – Cosmos type order, comparison,
//!   copy and drop without recursion (deeply nested documents are safe).
//! * `exec.rs` – scanning, joins, top-k, aggregation, DISTINCT, windows,
//!   cross-partition merge, subqueries; `continuation.rs` – tokens.
//! * `tests.rs` and `testdata/golden.txt` – golden, property, fuzz and depth
//!   tests.
//!
//! # Cross-partition execution and continuation tokens
//!
//! Partitions are visited in ascending [`PartitionKey`] order. Without ORDER
//! BY rows come partition by partition in RID order and the token is the
//! position of the next row (partition key, RID, JOIN row ordinal), so a
//! later call resumes exactly there, even after writes elsewhere: documents
//! added behind the position are not returned, those ahead of it are.
//! With ORDER BY every partition is scanned into a bounded top-k buffer
//! (only sort keys are copied; the k winners are re-read at the end) and rows
//! are merged in one total order (sort keys, partition key, RID, JOIN row
//! ordinal); the token holds the last returned row's sort keys and position
//! and the next page returns the rows strictly after it. TOP / OFFSET / LIMIT
//! are global: the token also counts the rows already consumed. Aggregates,
//! GROUP BY and DISTINCT are computed over all partitions (aggregates per
//! partition, then merged; AVG from sum and count) and paged by result index,
//! so each of their pages re-runs the query (a deliberate simplification).
//! Tokens are tied to the query text and parameter values; anything
//! malformed, foreign or stale is a 400 [`QueryError::InvalidContinuation`].
//!
//! # Non-goals
//!
//! Most math/string families beyond the common ones; spatial indexes and
//! geometry types beyond Point, LineString, Polygon and MultiPolygon;
//! GROUP BY inside subqueries; indexes (every query scans its partitions);
//! Cosmos' request-unit accounting (cost is reported as documents and bytes).

mod ast;
mod computed;
mod continuation;
mod datetime;
mod eval;
mod exec;
mod functions;
mod index_advice;
mod lexer;
pub(crate) mod order;
mod parser;
mod plan;
mod prefilter;
mod spatial;
#[cfg(test)]
mod tests;

use std::ops::ControlFlow;

pub use ast::Query;
pub use computed::{ComputedProperties, MAX_COMPUTED_DEPTH, MAX_COMPUTED_PROPERTIES, parse_with};
use host_api::PartitionKey;
pub use index_advice::{CompositeIndex, IndexAdvice, SingleIndex, index_advice};
pub use plan::{Distinct, Plan, plan};
pub use prefilter::Needles;
use serde_json::Value;

/// Maximum nesting depth of a query's expressions; deeper queries are a 400.
pub const MAX_DEPTH: usize = parser::MAX_DEPTH;

/// Query parameters: names (`"@userId"`, the `@` optional) to JSON values.
pub type Params = serde_json::Map<String, Value>;

/// Parses query text into a reusable, thread-safe [`Query`].
///
/// # Errors
/// A 400 [`QueryError`]: a syntax error (with line, column and the unexpected
/// token), an unknown function or identifier, a wrong argument count, a query
/// nested deeper than [`MAX_DEPTH`], or an invalid clause combination.
pub fn parse(sql: &str) -> Result<Query, QueryError> {
    parser::parse_query(sql)
}

/// What the engine provides: the partitions to scan and their documents.
///
/// A source must show one consistent view for the duration of an
/// [`execute`] call: ORDER BY re-reads its few winning documents by
/// partition key and RID at the end (`scan(key, Some(rid - 1), …)`, stopping
/// after the first document). Across calls RIDs must be stable and increase
/// with insertion, since continuation tokens resume by partition key and RID.
/// A transaction's private view is a source like any other: scan its
/// snapshot merged with its own writes, in RID order, hiding what it deleted.
pub trait Source {
    /// Logical partitions to scan, in ascending [`PartitionKey`] order (one for
    /// a single-partition query). The engine sorts them again to be safe.
    fn partitions(&self) -> Vec<PartitionKey>;

    /// Calls `f(rid, doc, size_bytes)` for each document of `key` with
    /// rid > `after` (all when None), in ascending rid order, until `f`
    /// returns [`ControlFlow::Break`].
    fn scan(
        &self,
        key: &PartitionKey,
        after: Option<u64>,
        f: &mut dyn FnMut(u64, &Value, usize) -> ControlFlow<()>,
    );

    /// [`Source::scan`] for a query that returns nothing from a document
    /// whose stored JSON text lacks one of `needles`: a source that reads
    /// that text may pass over such a document without parsing it, calling
    /// `skipped(size_bytes)` for it in its place (in rid order, and not
    /// after `f` broke) instead of `f`. By default, a plain scan.
    fn scan_containing(
        &self,
        key: &PartitionKey,
        after: Option<u64>,
        needles: &Needles,
        f: &mut dyn FnMut(u64, &Value, usize) -> ControlFlow<()>,
        skipped: &mut dyn FnMut(usize),
    ) {
        let _ = (needles, skipped);
        self.scan(key, after, f);
    }

    /// [`Source::scan`] of the documents of `key` whose rids are among
    /// `rids` (ascending) and after `after`, in rid order: a source may
    /// read those alone. By default, a scan that skips the others.
    fn scan_rids(
        &self,
        key: &PartitionKey,
        after: Option<u64>,
        rids: &[u64],
        f: &mut dyn FnMut(u64, &Value, usize) -> ControlFlow<()>,
    ) {
        let Some(&last) = rids.last() else { return };
        self.scan(key, after, &mut |rid, doc, size| {
            if rid > last {
                ControlFlow::Break(())
            } else if rids.binary_search(&rid).is_ok() {
                f(rid, doc, size)
            } else {
                ControlFlow::Continue(())
            }
        });
    }

    /// The only documents that may satisfy every one of `terms` (the
    /// query's `path = constant` terms, see [`crate::range_index`]), as
    /// (partition, rid), when a range index knows them: every document
    /// that does, in the partitions this source shows, is among them.
    /// The query then reads only those, in their partitions. `None` (the
    /// default) to scan every partition.
    fn index_candidates(
        &self,
        terms: &[crate::range_index::IndexTerm],
    ) -> Option<Vec<(PartitionKey, u64)>> {
        let _ = terms;
        None
    }

    /// The indexing policy of the container whose documents this source
    /// shows, when its index may answer ([`Source::index_walk`]); `None`
    /// (the default) otherwise.
    fn indexing_policy(&self) -> Option<std::sync::Arc<crate::IndexingPolicy>> {
        None
    }

    /// The physical partitions this source's documents span
    /// ([`QueryStats::physical_partitions`]). By default, 1.
    fn physical_partitions(&self) -> u64 {
        1
    }

    /// Whether this source hides documents the index names and a read
    /// finds (expired ones), so that only reading them tells what a query
    /// sees. By default, `false`.
    fn hides_documents(&self) -> bool {
        false
    }

    /// A walk of a range index in `walk.order`
    /// ([`crate::storage::Storage::index_walk`]), among the partitions
    /// this source shows; `None` (the default) when no index can answer.
    fn index_walk(&self, walk: &crate::storage::IndexWalk<'_>) -> Option<crate::storage::WalkPage> {
        let _ = walk;
        None
    }
}

/// A hook for `udf.name(args)` calls.
pub trait Udf {
    /// Calls the user-defined function `name`. Undefined arguments are `None`;
    /// returning `Ok(None)` yields undefined. An `Err(message)` fails the query
    /// with a 400 [`QueryError::Udf`].
    fn call(&self, name: &str, args: &[Option<Value>]) -> Result<Option<Value>, String>;
}

/// How to run one page of a query.
#[derive(Clone, Copy, Default)]
pub struct QueryOptions<'a> {
    /// Most items to return in this page; None for all (0 counts as 1).
    pub max_item_count: Option<usize>,
    /// The token of the previous page, to continue from there.
    pub continuation: Option<&'a str>,
    /// Handler for `udf.name(...)` calls; without it such calls are a 400.
    pub udf: Option<&'a dyn Udf>,
}

impl std::fmt::Debug for QueryOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryOptions")
            .field("max_item_count", &self.max_item_count)
            .field("continuation", &self.continuation)
            .field("udf", &self.udf.map(|_| "<hook>"))
            .finish()
    }
}

/// One page of results.
#[derive(Clone, Debug, PartialEq)]
pub struct QueryPage {
    /// The results, in order.
    pub items: Vec<Value>,
    /// Where the next page starts; None when there are no more results.
    pub continuation: Option<String>,
    /// What producing this page cost.
    pub stats: QueryStats,
}

/// The cost of a page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryStats {
    /// Documents read from the source.
    pub docs_scanned: u64,
    /// Items in the page.
    pub docs_returned: u64,
    /// Serialized bytes of the documents read.
    pub bytes_read: u64,
    /// Entries of the range index read to choose the documents (0 when
    /// the query did not use it).
    pub index_entries: u64,
    /// Whether the range index chose the documents read (else the query
    /// read every document of the partitions it ran in).
    pub index_used: bool,
    /// The physical partitions the query ran in, as the service sends a
    /// query to each physical partition its scope spans: 1 in a logical
    /// partition, every one of the container across partitions.
    pub physical_partitions: u64,
    /// For an ORDER BY page that filled itself (as many rows as its TOP or
    /// its page size let it return), the sorted rows up to the page's end,
    /// its OFFSET included: what each physical partition returns for the
    /// page on the service, which runs the query in each and merges their
    /// sorted pages. 0 for any other page (one that ran out of matches
    /// holds every row all partitions would have returned).
    pub rows_per_partition: u64,
}

/// Why a query failed; every variant is a user error (status 400).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// The text does not follow the grammar.
    #[error("syntax error at line {line}, column {column}: unexpected {found}")]
    Syntax {
        /// 1-based line.
        line: u32,
        /// 1-based column (characters).
        column: u32,
        /// The unexpected token, described.
        found: String,
    },
    /// Expressions nest deeper than [`MAX_DEPTH`].
    #[error("query nested too deeply at line {line}, column {column} (limit {limit} levels)")]
    TooDeep {
        /// 1-based line.
        line: u32,
        /// 1-based column.
        column: u32,
        /// The limit.
        limit: usize,
    },
    /// A call to a function that does not exist.
    #[error("unknown function '{0}'")]
    UnknownFunction(String),
    /// A built-in called with the wrong number of arguments.
    #[error("function '{name}' takes {expected} argument(s), got {got}")]
    ArgumentCount {
        /// The function.
        name: String,
        /// Accepted counts, in words.
        expected: String,
        /// Arguments given.
        got: usize,
    },
    /// An identifier that is not a FROM or JOIN alias.
    #[error("identifier '{0}' could not be resolved")]
    UnknownIdentifier(String),
    /// A parameter the query uses was not supplied.
    #[error("parameter '{0}' was not supplied")]
    MissingParameter(String),
    /// A semantically invalid query (clause combinations and the like).
    #[error("invalid query: {0}")]
    Invalid(String),
    /// A malformed, foreign or stale continuation token.
    #[error("invalid continuation token: {0}")]
    InvalidContinuation(String),
    /// `udf.name(...)` without a UDF hook.
    #[error("unknown user-defined function 'udf.{0}'")]
    UnknownUdf(String),
    /// A user-defined function failed.
    #[error("user-defined function 'udf.{name}' failed: {message}")]
    Udf {
        /// The function.
        name: String,
        /// Its error message.
        message: String,
    },
    /// The container's indexing policy cannot serve the ORDER BY (the
    /// service's message).
    #[error("{0}")]
    OrderBy(#[from] crate::indexing::OrderByError),
}

impl QueryError {
    /// The HTTP-style status: 400 (bad request) for every query error.
    pub fn status(&self) -> u16 {
        400
    }
}

/// Runs one page of `query` with `params` over `source`.
///
/// # Errors
/// A 400 [`QueryError`] for a missing parameter, an invalid TOP/OFFSET/LIMIT
/// parameter, an invalid continuation token or a failing UDF.
pub fn execute(
    query: &Query,
    params: &Params,
    source: &dyn Source,
    options: &QueryOptions<'_>,
) -> Result<QueryPage, QueryError> {
    exec::execute(query, params, source, options)
}
