//! What every resource reads from a request beyond `wire.rs`'s headers
//! and bodies: whether it is a query, a JSON object body, the partition
//! key header, and the script limits a call runs with.

use engine::PartitionKey;
use partita::{ExecutionCaps, Limits};
use serde_json::{Map, Value};

use super::Gateway;
use crate::registry::CollEntry;
use crate::wire::{WireError, WireRequest, flag, header, json_body};

impl Gateway {
    /// The partition key of the request's header, if it has one.
    pub(super) fn partition_key(
        &self,
        coll: &CollEntry,
        req: &WireRequest,
    ) -> Result<Option<PartitionKey>, WireError> {
        match header(&req.headers, "x-ms-documentdb-partitionkey")? {
            Some(text) => self.parse_partition_key(coll, text).map(Some),
            None => Ok(None),
        }
    }

    /// A partition key in the header's form (`["a"]`), which the SDKs'
    /// bulk operations also carry in their `partitionKey` member.
    pub(super) fn parse_partition_key(
        &self,
        _coll: &CollEntry,
        text: &str,
    ) -> Result<PartitionKey, WireError> {
        let invalid = || {
            WireError::bad_request(format!(
                "the x-ms-documentdb-partitionkey header {text:?} must be a JSON array with one \
                 string, number, boolean or null, or [{{}}] for a document without the key, or \
                 one of them per level of a hierarchical key"
            ))
        };
        match serde_json::from_str::<Value>(text).map_err(|_| invalid())? {
            // One value, or one per level of a hierarchical key (the engine
            // checks the count against the container's paths).
            value @ Value::Array(_) => PartitionKey::from_json_array(&value).ok_or_else(invalid),
            _ => Err(invalid()),
        }
    }

    /// The server's script limits, lowered by the request's
    /// `x-partita-max-operations` and `x-partita-max-instructions` headers
    /// (Partita's own: the service ignores them, so SDK code that sends
    /// them stays portable). With them a client sees what its script does
    /// when the service cuts it short.
    pub(super) fn call_limits(&self, req: &WireRequest) -> Result<Limits, WireError> {
        let cap = |name: &str| -> Result<Option<u64>, WireError> {
            header(&req.headers, name)?
                .map(|text| {
                    text.parse::<u64>().map_err(|_| {
                        WireError::bad_request(format!(
                            "the {name} header {text:?} must be a whole number"
                        ))
                    })
                })
                .transpose()
        };
        Ok(self.script_limits.clone().capped(ExecutionCaps {
            max_operations: cap("x-partita-max-operations")?,
            max_instructions: cap("x-partita-max-instructions")?,
        }))
    }

    pub(super) fn required_key(
        &self,
        coll: &CollEntry,
        req: &WireRequest,
        what: &str,
    ) -> Result<PartitionKey, WireError> {
        self.partition_key(coll, req)?.ok_or_else(|| {
            WireError::bad_request(format!(
                "{what} in container {:?} needs the x-ms-documentdb-partitionkey header",
                coll.name
            ))
        })
    }
}

pub(super) fn is_query(req: &WireRequest) -> Result<bool, WireError> {
    Ok(flag(&req.headers, "x-ms-documentdb-isquery")?
        || header(&req.headers, "content-type")?
            .is_some_and(|t| t.to_ascii_lowercase().starts_with("application/query+json")))
}

pub(super) fn object_body(req: &WireRequest, what: &str) -> Result<Map<String, Value>, WireError> {
    match json_body(&req.body, what)? {
        Value::Object(map) => Ok(map),
        other => Err(WireError::bad_request(format!(
            "the {what} body must be a JSON object, not {}",
            host_api::type_name(&other)
        ))),
    }
}
