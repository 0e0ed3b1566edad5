//! Transactional batch, bulk and patch over the wire.
//!
//! A batch is a `POST .../docs` with `x-ms-cosmos-is-batch-request: true`
//! and a JSON array of operations. Atomic (`x-ms-cosmos-batch-atomic`, the
//! default) it runs in the header's logical partition: 200 with one result
//! per operation, or, when an operation fails, 207 Multi-Status with that
//! operation's status and 424 for every other, since the SDKs read the
//! per-operation array only from a status below 400. Non-atomic (the bulk
//! executors) each operation carries its own `partitionKey` and commits on
//! its own. A patch is `PATCH .../docs/{id}` with `{"operations": [...],
//! "condition": "FROM c WHERE ..."}`.

use engine::{BatchOperation, BatchOperationResult, Document, PartitionKey, Patch};
use partita::batch_json::result_json;
use serde_json::Value;

use super::Gateway;
use super::responses::{charge, return_minimal};
use crate::registry::CollEntry;
use crate::wire::{WireError, WireRequest, WireResponse, flag, header, json_body};

impl Gateway {
    pub(super) fn batch(
        &self,
        coll: &CollEntry,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let body = json_body(&req.body, "batch request")?;
        let operations = BatchOperation::list_from_json(&body)?;
        let items = body.as_array().map(Vec::as_slice).unwrap_or_default();
        // Python sends `True`, JS `true`; a batch without the header is atomic.
        let atomic = header(&req.headers, "x-ms-cosmos-batch-atomic")?.is_none()
            || flag(&req.headers, "x-ms-cosmos-batch-atomic")?;
        let minimal = return_minimal(req)?;
        let (results, committed) = if atomic {
            let key = self.required_key(coll, req, "a transactional batch")?;
            let response = coll.container.execute_batch(key, operations)?;
            let committed = response.is_success() && response.lsn.is_some();
            (response.results, committed)
        } else {
            let keyed = items
                .iter()
                .zip(operations)
                .map(|(item, op)| Ok((self.operation_key(coll, req, item)?, op)))
                .collect::<Result<Vec<_>, WireError>>()?;
            let results = coll.container.execute_bulk(keyed)?;
            let committed = results.iter().any(BatchOperationResult::is_success);
            (results, committed)
        };
        let status = if results.iter().all(BatchOperationResult::is_success) {
            200
        } else {
            207
        };
        let total: f64 = results.iter().map(partita::charge::batch_operation).sum();
        let body: Vec<Value> = results.iter().map(|r| result_json(r, !minimal)).collect();
        let mut out = WireResponse::json(status, &Value::Array(body))
            .with("x-ms-request-charge", charge(total));
        if committed {
            out = out.with("x-ms-session-token", self.write_token());
        }
        Ok(out)
    }

    /// A bulk operation's partition key: its own `partitionKey` (a JSON
    /// array as text, as the JS SDK sends it), else the request's header.
    pub(super) fn operation_key(
        &self,
        coll: &CollEntry,
        req: &WireRequest,
        item: &Value,
    ) -> Result<PartitionKey, WireError> {
        match item.get("partitionKey") {
            Some(Value::String(text)) => self.parse_partition_key(coll, text),
            Some(Value::Array(_)) => {
                self.parse_partition_key(coll, &item["partitionKey"].to_string())
            }
            _ => self.required_key(coll, req, "a bulk operation without a partitionKey"),
        }
    }

    pub(super) fn patch_item(
        &self,
        coll: &CollEntry,
        id: &str,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let key = self.required_key(coll, req, "patching a document")?;
        let patch = Patch::from_json(&json_body(&req.body, "patch")?)?;
        let options = self.write_options(req)?;
        let response = coll.container.patch_item(key, id, &patch, Some(&options))?;
        let request_charge = response.request_charge();
        let doc = response.resource.map_or(Value::Null, Document::into_value);
        self.written(200, doc, request_charge, req)
    }
}
