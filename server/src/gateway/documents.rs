//! Documents (`/dbs/{db}/colls/{c}/docs[/{id}]`): point reads and writes.
//! Writes go through the facade's `Container`, so the pre- and post-triggers
//! the request's headers name run in the write's transaction.

use engine::Document;
use partita::WriteOptions;
use partita::charge::Work;
use serde_json::Value;

use super::Gateway;
use super::responses::charge;
use crate::registry::CollEntry;
use crate::wire::{
    SUBSTATUS_PARTITION_KEY_MISMATCH, WireError, WireRequest, WireResponse, flag, header, json_body,
};

impl Gateway {
    pub(super) fn write_options(&self, req: &WireRequest) -> Result<WriteOptions, WireError> {
        let list = |name: &str| -> Result<Vec<String>, WireError> {
            Ok(header(&req.headers, name)?
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default())
        };
        Ok(WriteOptions {
            if_match: header(&req.headers, "if-match")?.map(str::to_owned),
            pre_triggers: list("x-ms-documentdb-pre-trigger-include")?,
            post_triggers: list("x-ms-documentdb-post-trigger-include")?,
            limits: Some(self.call_limits(req)?),
        })
    }

    /// Create, upsert (POST) or replace (PUT `id`).
    pub(super) fn write(
        &self,
        coll: &CollEntry,
        id: Option<&str>,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let doc = json_body(&req.body, "document")?;
        let Some(doc_id) = doc.get("id").and_then(Value::as_str) else {
            return Err(WireError::bad_request(
                "the document needs an \"id\" property holding a string",
            ));
        };
        // A replace whose body has another id renames the document, as the
        // service does (the engine keeps its `_rid`; 409 onto a taken id).
        let doc_id = doc_id.to_owned();
        let doc_key = coll.container.partition_key_of(&doc);
        if let Some(header_key) = self.partition_key(coll, req)?
            && header_key != doc_key
        {
            return Err(WireError::bad_request(format!(
                "PartitionKey extracted from document doesn't match the one specified in the \
                 header: the document's key at {} is {}, the header says {}",
                coll.container.partition_key_path(),
                doc_key.to_json_array(),
                header_key.to_json_array()
            ))
            .with_substatus(SUBSTATUS_PARTITION_KEY_MISMATCH));
        }
        let options = self.write_options(req)?;
        let upsert = flag(&req.headers, "x-ms-documentdb-is-upsert")?;
        let (status, response) = match id {
            Some(id) => (
                200,
                coll.container
                    .replace_item(doc_key, id, doc, Some(&options))?,
            ),
            None if upsert => {
                let existed = coll.container.read_item(doc_key.clone(), &doc_id).is_ok();
                let response = coll.container.upsert_item(doc_key, doc, Some(&options))?;
                (if existed { 200 } else { 201 }, response)
            }
            None => (
                201,
                coll.container.create_item(doc_key, doc, Some(&options))?,
            ),
        };
        let request_charge = response.request_charge();
        let body = response.resource.map_or(Value::Null, Document::into_value);
        self.written(status, body, request_charge, req)
    }

    pub(super) fn read_item(
        &self,
        coll: &CollEntry,
        id: &str,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let key = self.required_key(coll, req, "reading a document")?;
        let doc = coll.container.read_item(key, id)?;
        if header(&req.headers, "if-none-match")? == Some(doc.etag()) {
            return Ok(WireResponse::empty(304).with("etag", doc.etag()));
        }
        let out = WireResponse::json(200, doc.value());
        let bytes = out.body.len() as u64;
        Ok(out.with("etag", doc.etag()).with(
            "x-ms-request-charge",
            charge(Work::point_read(bytes).request_charge()),
        ))
    }

    pub(super) fn delete_item(
        &self,
        coll: &CollEntry,
        id: &str,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let key = self.required_key(coll, req, "deleting a document")?;
        let options = self.write_options(req)?;
        let response = coll.container.delete_item(key, id, Some(&options))?;
        Ok(WireResponse::empty(204)
            .with("x-ms-request-charge", charge(response.request_charge()))
            .with("x-ms-session-token", self.write_token()))
    }
}
