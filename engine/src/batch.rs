//! Transactional batch: several point operations on one logical partition,
//! all or nothing, without a script.
//!
//! A batch runs its operations in order in one [`Txn`] and commits them as
//! one change-log entry (one LSN). When an operation fails, nothing is
//! applied: that operation's result carries its own status and every other
//! one 424 (failed dependency), as the service answers. This is also the
//! entity-group transaction of Azure Table storage.
//!
//! ```
//! use engine::{BatchOperation, Database, Patch};
//! use serde_json::json;
//!
//! let db = Database::in_memory();
//! let posts = db.create_container("posts", "/postId")?;
//! posts.create_item("p1", json!({"id": "p1", "postId": "p1", "comments": 0}), None)?;
//! let bump = Patch::from_json(&json!([{"op": "incr", "path": "/comments", "value": 1}]))?;
//! let response = posts.execute_batch("p1", vec![
//!     BatchOperation::patch("p1", bump),
//!     BatchOperation::create(json!({"id": "c1", "postId": "p1", "text": "hi"})),
//! ])?;
//! assert!(response.is_success());
//! assert_eq!(response.results[1].status, 201);
//! assert_eq!(posts.read_item("p1", "p1")?["comments"], 1);
//! # Ok::<(), engine::Error>(())
//! ```

use host_api::{PartitionKey, Statistics};
use serde_json::Value;

use crate::Document;
use crate::container::Container;
use crate::document::checked_len;
use crate::error::{Error, Result};
use crate::patch::Patch;
use crate::storage::Lsn;
use crate::txn::{ItemOptions, Txn};

/// The most operations one batch may carry (the service's limit).
pub const MAX_BATCH_OPERATIONS: usize = 100;

/// The largest batch, in bytes of its documents (the service's 2 MB).
pub const MAX_BATCH_SIZE: usize = 2 * 1024 * 1024;

/// Status of every operation of a failed batch other than the one that failed.
pub const FAILED_DEPENDENCY: u16 = 424;

/// What one operation of a batch does.
#[derive(Clone, Debug)]
pub enum BatchOperationKind {
    /// Creates a document (201).
    Create(Value),
    /// Creates (201) or replaces (200) a document.
    Upsert(Value),
    /// Reads a document (200; 304 when `if_none_match` is its etag).
    Read(String),
    /// Replaces the document with this id (200).
    Replace(String, Value),
    /// Deletes the document with this id (204).
    Delete(String),
    /// Patches the document with this id (200).
    Patch(String, Box<Patch>),
}

/// One operation of a batch, with its optional preconditions.
#[derive(Clone, Debug)]
pub struct BatchOperation {
    /// What it does.
    pub kind: BatchOperationKind,
    /// Apply only if the document's etag is this (412 otherwise).
    pub if_match: Option<String>,
    /// A read: 304 when the document's etag is this. A write: 412 when it is
    /// (or, for `*`, when the document exists).
    pub if_none_match: Option<String>,
}

impl BatchOperation {
    fn of(kind: BatchOperationKind) -> BatchOperation {
        BatchOperation {
            kind,
            if_match: None,
            if_none_match: None,
        }
    }

    /// Creates `doc`.
    pub fn create(doc: Value) -> BatchOperation {
        BatchOperation::of(BatchOperationKind::Create(doc))
    }

    /// Creates or replaces `doc`.
    pub fn upsert(doc: Value) -> BatchOperation {
        BatchOperation::of(BatchOperationKind::Upsert(doc))
    }

    /// Reads the document `id`.
    pub fn read(id: impl Into<String>) -> BatchOperation {
        BatchOperation::of(BatchOperationKind::Read(id.into()))
    }

    /// Replaces the document `id` with `doc`.
    pub fn replace(id: impl Into<String>, doc: Value) -> BatchOperation {
        BatchOperation::of(BatchOperationKind::Replace(id.into(), doc))
    }

    /// Deletes the document `id`.
    pub fn delete(id: impl Into<String>) -> BatchOperation {
        BatchOperation::of(BatchOperationKind::Delete(id.into()))
    }

    /// Patches the document `id`.
    pub fn patch(id: impl Into<String>, patch: Patch) -> BatchOperation {
        BatchOperation::of(BatchOperationKind::Patch(id.into(), Box::new(patch)))
    }

    /// Adds an `If-Match` precondition.
    pub fn if_match(mut self, etag: impl Into<String>) -> BatchOperation {
        self.if_match = Some(etag.into());
        self
    }

    /// Adds an `If-None-Match` precondition.
    pub fn if_none_match(mut self, etag: impl Into<String>) -> BatchOperation {
        self.if_none_match = Some(etag.into());
        self
    }

    /// Reads a batch as the SDKs send it: a JSON array of operations.
    ///
    /// # Errors
    /// 400 when it is not an array, or naming the first malformed operation
    /// by its index.
    pub fn list_from_json(body: &Value) -> Result<Vec<BatchOperation>> {
        let Value::Array(items) = body else {
            return Err(Error::BadRequest(format!(
                "a batch must be a JSON array of operations, not {}",
                host_api::type_name(body)
            )));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                BatchOperation::from_json(item).map_err(|e| {
                    Error::BadRequest(format!("batch operation {i}: {}", crate::patch::bare(e)))
                })
            })
            .collect()
    }

    /// Reads an operation as the SDKs send it:
    /// `{"operationType": "Create", "resourceBody": {...}}`, with `id` for
    /// read, replace, delete and patch, and optional `ifMatch` /
    /// `ifNoneMatch`.
    ///
    /// # Errors
    /// 400 naming what is missing or unknown.
    pub fn from_json(op: &Value) -> Result<BatchOperation> {
        let Value::Object(map) = op else {
            return Err(Error::BadRequest(format!(
                "a batch operation must be an object, not {}",
                host_api::type_name(op)
            )));
        };
        let Some(Value::String(kind)) = map.get("operationType") else {
            return Err(Error::BadRequest(
                "a batch operation needs an \"operationType\" string".to_owned(),
            ));
        };
        let body = || -> Result<Value> {
            map.get("resourceBody").cloned().ok_or_else(|| {
                Error::BadRequest(format!("a {kind} operation needs a \"resourceBody\""))
            })
        };
        let id = || -> Result<String> {
            match map.get("id") {
                Some(Value::String(id)) => Ok(id.clone()),
                _ => Err(Error::BadRequest(format!(
                    "a {kind} operation needs an \"id\" string"
                ))),
            }
        };
        let kind = match kind.to_ascii_lowercase().as_str() {
            "create" => BatchOperationKind::Create(body()?),
            "upsert" => BatchOperationKind::Upsert(body()?),
            "read" => BatchOperationKind::Read(id()?),
            "replace" => BatchOperationKind::Replace(id()?, body()?),
            "delete" => BatchOperationKind::Delete(id()?),
            "patch" => BatchOperationKind::Patch(id()?, Box::new(Patch::from_json(&body()?)?)),
            _ => {
                return Err(Error::BadRequest(format!(
                    "unknown batch operation type {kind:?}; expected Create, Upsert, Read, Replace, Delete or Patch"
                )));
            }
        };
        let etag = |member: &str| -> Result<Option<String>> {
            match map.get(member) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(e)) => Ok(Some(e.clone())),
                Some(other) => Err(Error::BadRequest(format!(
                    "{member} must be a string, not {}",
                    host_api::type_name(other)
                ))),
            }
        };
        Ok(BatchOperation {
            kind,
            if_match: etag("ifMatch")?,
            if_none_match: etag("ifNoneMatch")?,
        })
    }

    /// The serialized size of the document it carries (0 for none).
    fn body_len(&self) -> usize {
        match &self.kind {
            BatchOperationKind::Create(doc)
            | BatchOperationKind::Upsert(doc)
            | BatchOperationKind::Replace(_, doc) => checked_len(doc).unwrap_or(0),
            BatchOperationKind::Patch(_, patch) => {
                patch.operations.iter().map(|op| op.value_len()).sum()
            }
            BatchOperationKind::Read(_) | BatchOperationKind::Delete(_) => 0,
        }
    }
}

/// The outcome of one operation.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchOperationResult {
    /// The operation's status: 200, 201, 204 or 304 on success; its error's
    /// status, or 424 when another operation failed.
    pub status: u16,
    /// The error's substatus, if it has one.
    pub substatus: Option<u16>,
    /// The document's etag after the operation (none for a delete or a
    /// failure).
    pub etag: Option<String>,
    /// The document read or written (none for a delete or a failure).
    pub resource: Option<Document>,
    /// Why it failed, for the failing operation.
    pub message: Option<String>,
    /// What it did (for its request charge).
    pub stats: Statistics,
}

impl BatchOperationResult {
    fn ok(status: u16, resource: Option<Document>, stats: Statistics) -> BatchOperationResult {
        BatchOperationResult {
            status,
            substatus: None,
            etag: resource.as_ref().map(|d| d.etag().to_owned()),
            resource,
            message: None,
            stats,
        }
    }

    /// The result of an operation that failed with `err`.
    pub fn failed(err: &Error) -> BatchOperationResult {
        BatchOperationResult {
            status: err.status(),
            substatus: err.substatus(),
            etag: None,
            resource: None,
            message: Some(err.to_string()),
            stats: Statistics::default(),
        }
    }

    fn dependency() -> BatchOperationResult {
        BatchOperationResult {
            status: FAILED_DEPENDENCY,
            substatus: None,
            etag: None,
            resource: None,
            message: None,
            stats: Statistics::default(),
        }
    }

    /// Whether the operation succeeded.
    pub fn is_success(&self) -> bool {
        self.status < 400
    }
}

/// The outcome of a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchResponse {
    /// One result per operation, in order.
    pub results: Vec<BatchOperationResult>,
    /// The index of the operation that failed (then nothing was applied).
    pub failed: Option<usize>,
    /// The batch's entry in the change log; `None` when it failed or wrote
    /// nothing.
    pub lsn: Option<Lsn>,
}

impl BatchResponse {
    /// Whether every operation succeeded and the batch committed.
    pub fn is_success(&self) -> bool {
        self.failed.is_none()
    }

    /// What the whole batch did.
    pub fn stats(&self) -> Statistics {
        let mut sum = Statistics::default();
        for result in &self.results {
            sum.add(result.stats);
        }
        sum
    }
}

/// Checks a batch's shape before anything runs: at least one and at most
/// [`MAX_BATCH_OPERATIONS`] operations, and at most [`MAX_BATCH_SIZE`]
/// bytes of documents.
///
/// # Errors
/// 400 for none or too many operations (the service's messages), 413 for
/// too many bytes.
pub fn check(operations: &[BatchOperation]) -> Result<()> {
    if operations.is_empty() {
        return Err(Error::BadRequest(
            "Batch request has no operations.".to_owned(),
        ));
    }
    if operations.len() > MAX_BATCH_OPERATIONS {
        return Err(Error::BadRequest(format!(
            "Batch request has more operations than what is supported. ({} operations, limit {MAX_BATCH_OPERATIONS})",
            operations.len()
        )));
    }
    let size: usize = operations.iter().map(BatchOperation::body_len).sum();
    if size > MAX_BATCH_SIZE {
        return Err(Error::RequestTooLarge {
            what: "the batch (its documents together)".to_owned(),
            size,
            limit: MAX_BATCH_SIZE,
        });
    }
    Ok(())
}

/// Runs `operations` on the logical partition `partition_key`, atomically.
pub(crate) fn execute(
    container: &Container,
    partition_key: PartitionKey,
    operations: Vec<BatchOperation>,
) -> Result<BatchResponse> {
    check(&operations)?;
    let n = operations.len();
    let mut operations = Some(operations);
    // Run again from the first operation when another node committed to
    // the partition first (449).
    container.attempts(partition_key, |key| {
        let mut txn = container.begin(key)?;
        let operations = container.for_attempt(&mut operations);
        match run_in(&mut txn, operations, |_| Ok::<(), Error>(())) {
            Ok(results) => Ok(BatchResponse {
                results,
                failed: None,
                lsn: txn.commit()?,
            }),
            // Dropping `txn` rolls back what the earlier operations did.
            Err((i, err)) => Ok(failed(n, i, &err)),
        }
    })
}

/// Runs `operations` in order in `txn`, which the caller then commits or
/// drops. `before(i)` runs before operation `i`; an error from it fails
/// that operation (the fuzzer injects faults this way). Stops at the first
/// failure, with its index.
///
/// # Errors
/// The index of the operation that failed, and why.
pub fn run_in<E: From<Error>>(
    txn: &mut Txn,
    operations: Vec<BatchOperation>,
    mut before: impl FnMut(usize) -> Result<(), E>,
) -> Result<Vec<BatchOperationResult>, (usize, E)> {
    let mut results = Vec::with_capacity(operations.len());
    for (i, op) in operations.into_iter().enumerate() {
        before(i).map_err(|e| (i, e))?;
        results.push(run(txn, op).map_err(|e| (i, E::from(e)))?);
    }
    Ok(results)
}

/// The response of a batch of `n` operations whose operation `i` failed
/// with `err`.
fn failed(n: usize, i: usize, err: &Error) -> BatchResponse {
    let results = (0..n)
        .map(|j| {
            if j == i {
                BatchOperationResult::failed(err)
            } else {
                BatchOperationResult::dependency()
            }
        })
        .collect();
    BatchResponse {
        results,
        failed: Some(i),
        lsn: None,
    }
}

/// Runs one operation in `txn`.
fn run(txn: &mut Txn, op: BatchOperation) -> Result<BatchOperationResult> {
    let BatchOperation {
        kind,
        if_match,
        if_none_match,
    } = op;
    let options = if_match.map(ItemOptions::if_match);
    let options = options.as_ref();
    if let (BatchOperationKind::Read(id), Some(etag)) = (&kind, &if_none_match) {
        let doc = txn.read_item(id)?;
        let stats = read_stats(txn, id);
        if doc.etag() == etag {
            return Ok(BatchOperationResult::ok(304, None, stats));
        }
        return Ok(BatchOperationResult::ok(200, Some(doc), stats));
    }
    if let Some(etag) = &if_none_match {
        let id = match &kind {
            BatchOperationKind::Create(doc) | BatchOperationKind::Upsert(doc) => {
                host_api::member(doc, "id").and_then(Value::as_str)
            }
            BatchOperationKind::Replace(id, _)
            | BatchOperationKind::Delete(id)
            | BatchOperationKind::Patch(id, _)
            | BatchOperationKind::Read(id) => Some(id.as_str()),
        };
        if let Some(current) = id.and_then(|id| txn.get_item(id))
            && (etag == "*" || current.etag() == etag)
        {
            return Err(Error::PreconditionFailed {
                container: txn.container_id().to_owned(),
                partition_key: txn.partition_key().clone(),
                id: current.id().to_owned(),
                expected: format!("If-None-Match {etag}"),
                actual: Some(current.etag().to_owned()),
            });
        }
    }
    let (status, resource) = match kind {
        BatchOperationKind::Create(doc) => (201, Some(txn.create_item(doc)?)),
        BatchOperationKind::Upsert(doc) => {
            let exists = host_api::member(&doc, "id")
                .and_then(Value::as_str)
                .is_some_and(|id| txn.get_item(id).is_some());
            let written = txn.upsert_item(doc, options)?;
            (if exists { 200 } else { 201 }, Some(written))
        }
        BatchOperationKind::Read(id) => {
            let doc = txn.read_item(&id)?;
            let stats = read_stats(txn, &id);
            return Ok(BatchOperationResult::ok(200, Some(doc), stats));
        }
        BatchOperationKind::Replace(id, doc) => (200, Some(txn.replace_item(&id, doc, options)?)),
        BatchOperationKind::Patch(id, patch) => (200, Some(txn.patch_item(&id, &patch, options)?)),
        BatchOperationKind::Delete(id) => {
            txn.delete_item(&id, options)?;
            (204, None)
        }
    };
    let stats = Statistics {
        docs_written: 1,
        bytes_written: resource
            .as_ref()
            .and_then(|doc| txn.document_size(doc.id()))
            .unwrap_or(0) as u64,
        ..Statistics::default()
    };
    Ok(BatchOperationResult::ok(status, resource, stats))
}

fn read_stats(txn: &Txn, id: &str) -> Statistics {
    Statistics {
        docs_read: 1,
        bytes_read: txn.document_size(id).unwrap_or(0) as u64,
        ..Statistics::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Database;
    use serde_json::json;

    fn posts() -> Container {
        let db = Database::in_memory();
        let posts = db.create_container("posts", "/pk").unwrap();
        posts
            .create_item("a", json!({"id": "x", "pk": "a", "n": 1}), None)
            .unwrap();
        posts
    }

    fn statuses(response: &BatchResponse) -> Vec<u16> {
        response.results.iter().map(|r| r.status).collect()
    }

    #[test]
    fn every_operation_commits_as_one_change_log_entry() {
        let posts = posts();
        let before = posts.read_changes(Lsn::ZERO, 100).unwrap().len();
        let etag = posts.read_item("a", "x").unwrap().etag().to_owned();
        let bump = Patch::from_json(&json!([{"op": "incr", "path": "/n", "value": 1}])).unwrap();
        let response = posts
            .execute_batch(
                "a",
                vec![
                    BatchOperation::read("x").if_none_match(etag.clone()),
                    BatchOperation::patch("x", bump).if_match(etag),
                    BatchOperation::create(json!({"id": "y", "pk": "a"})),
                    BatchOperation::upsert(json!({"id": "y", "pk": "a", "v": 2})),
                    BatchOperation::upsert(json!({"id": "z", "pk": "a"})),
                    BatchOperation::replace("z", json!({"id": "z", "pk": "a", "v": 3})),
                    BatchOperation::read("z"),
                    BatchOperation::delete("y"),
                ],
            )
            .unwrap();
        assert!(response.is_success(), "{response:?}");
        assert_eq!(
            statuses(&response),
            [304, 200, 201, 200, 201, 200, 200, 204]
        );
        assert_eq!(response.results[6].resource.as_ref().unwrap()["v"], 3);
        assert_eq!(
            response.results[1].etag.as_deref(),
            Some(posts.read_item("a", "x").unwrap().etag())
        );
        let changes = posts.read_changes(Lsn::ZERO, 100).unwrap();
        let lsns: std::collections::BTreeSet<_> = changes[before..].iter().map(|c| c.lsn).collect();
        assert_eq!(lsns.len(), 1, "one LSN for the batch: {changes:?}");
        assert_eq!(Some(*lsns.first().unwrap()), response.lsn);
        assert_eq!(posts.read_item("a", "x").unwrap()["n"], 2);
        assert!(posts.read_item("a", "y").is_err());
    }

    #[test]
    fn a_failed_operation_applies_nothing_and_the_others_are_424() {
        let posts = posts();
        let cases: Vec<(Vec<BatchOperation>, Vec<u16>)> = vec![
            (
                vec![
                    BatchOperation::create(json!({"id": "new", "pk": "a"})),
                    BatchOperation::create(json!({"id": "new", "pk": "a"})),
                ],
                vec![424, 409],
            ),
            (
                vec![
                    BatchOperation::create(json!({"id": "new", "pk": "a"})),
                    BatchOperation::create(json!({"id": "other", "pk": "b"})),
                ],
                vec![424, 400],
            ),
            (
                vec![BatchOperation::read("missing"), BatchOperation::delete("x")],
                vec![404, 424],
            ),
            (
                vec![
                    BatchOperation::upsert(json!({"id": "new", "pk": "a"})),
                    BatchOperation::replace("x", json!({"id": "x", "pk": "a"}))
                        .if_match("\"stale\""),
                    BatchOperation::delete("x"),
                ],
                vec![424, 412, 424],
            ),
            (
                vec![
                    BatchOperation::delete("x"),
                    BatchOperation::patch(
                        "x",
                        Patch::from_json(&json!({"condition": "from c where c.n = 5",
                            "operations": [{"op": "remove", "path": "/n"}]}))
                        .unwrap(),
                    ),
                ],
                vec![424, 404],
            ),
            (
                vec![BatchOperation::patch(
                    "x",
                    Patch::from_json(&json!({"condition": "from c where c.n = 5",
                        "operations": [{"op": "remove", "path": "/n"}]}))
                    .unwrap(),
                )],
                vec![412],
            ),
            (
                vec![
                    BatchOperation::create(json!({"id": "new", "pk": "a"})),
                    BatchOperation::patch(
                        "x",
                        Patch::from_json(&json!([{"op": "add", "path": "/n/deeper", "value": 1}]))
                            .unwrap(),
                    ),
                ],
                vec![424, 400],
            ),
            (
                vec![BatchOperation::create(json!({"id": "x", "pk": "a"})).if_none_match("*")],
                vec![412],
            ),
        ];
        let before = posts.read_changes(Lsn::ZERO, 100).unwrap();
        for (ops, expected) in cases {
            let response = posts.execute_batch("a", ops).unwrap();
            assert_eq!(statuses(&response), expected, "{response:?}");
            let failed = response.failed.unwrap();
            assert!(response.results[failed].message.is_some());
            assert_eq!(response.lsn, None);
        }
        assert_eq!(posts.read_changes(Lsn::ZERO, 100).unwrap(), before);
        assert!(posts.read_item("a", "new").is_err());
        assert_eq!(posts.read_item("a", "x").unwrap()["n"], 1);
    }

    #[test]
    fn a_document_of_another_partition_carries_substatus_1001() {
        let response = posts()
            .execute_batch(
                "a",
                vec![BatchOperation::create(json!({"id": "o", "pk": "b"}))],
            )
            .unwrap();
        assert_eq!(response.results[0].substatus, Some(1001));
    }

    #[test]
    fn the_shape_of_a_batch_is_checked_before_it_runs() {
        let posts = posts();
        let err = posts.execute_batch("a", vec![]).unwrap_err();
        assert_eq!(
            (err.status(), err.to_string().contains("no operations")),
            (400, true)
        );
        let many = (0..101)
            .map(|i| BatchOperation::create(json!({"id": i.to_string(), "pk": "a"})))
            .collect();
        let err = posts.execute_batch("a", many).unwrap_err();
        assert!(
            err.to_string()
                .contains("more operations than what is supported"),
            "{err}"
        );
        let big = "x".repeat(MAX_BATCH_SIZE / 2);
        let ops = (0..3)
            .map(|i| BatchOperation::create(json!({"id": i.to_string(), "pk": "a", "big": big})))
            .collect();
        assert_eq!(posts.execute_batch("a", ops).unwrap_err().status(), 413);
        assert!(posts.read_item("a", "0").is_err());
    }

    #[test]
    fn operations_read_as_the_sdks_send_them() {
        let ops = json!([
            {"operationType": "Create", "resourceBody": {"id": "c", "pk": "a"}},
            {"operationType": "Upsert", "resourceBody": {"id": "c", "pk": "a", "v": 1}, "ifMatch": null},
            {"operationType": "Read", "id": "c"},
            {"operationType": "Replace", "id": "c", "resourceBody": {"id": "c", "pk": "a", "v": 2}},
            {"operationType": "Patch", "id": "c", "resourceBody": {"operations": [{"op": "incr", "path": "/v", "value": 1}]}},
            {"operationType": "Patch", "id": "c", "resourceBody": [{"op": "incr", "path": "/v", "value": 1}]},
            {"operationType": "Delete", "id": "c"},
        ]);
        let ops = ops
            .as_array()
            .unwrap()
            .iter()
            .map(BatchOperation::from_json)
            .collect::<Result<Vec<_>>>()
            .unwrap();
        let response = posts().execute_batch("a", ops).unwrap();
        assert_eq!(statuses(&response), [201, 200, 200, 200, 200, 200, 204]);
        assert_eq!(response.results[5].resource.as_ref().unwrap()["v"], 4);
        for (bad, needle) in [
            (
                json!({"operationType": "Copy", "id": "c"}),
                "unknown batch operation type",
            ),
            (json!({"operationType": "Read"}), "needs an \"id\""),
            (
                json!({"operationType": "Create"}),
                "needs a \"resourceBody\"",
            ),
            (json!({"id": "c"}), "operationType"),
            (
                json!({"operationType": "Read", "id": "c", "ifMatch": 5}),
                "ifMatch must be a string",
            ),
        ] {
            let err = BatchOperation::from_json(&bad).unwrap_err().to_string();
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }
}
