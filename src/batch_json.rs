//! The JSON shape of batch results, as the service answers them and the
//! SDKs read them (`statusCode`, `requestCharge`, `eTag`, `resourceBody`,
//! `subStatusCode`), shared by the server and the command line.

use serde_json::{Map, Value, json};

use crate::BatchOperationResult;

/// One result as the SDKs read it; `resourceBody` only when
/// `with_resource` (a request with `Prefer: return=minimal` gets none).
pub fn result_json(result: &BatchOperationResult, with_resource: bool) -> Value {
    let mut out = Map::new();
    out.insert("statusCode".into(), json!(result.status));
    out.insert(
        "requestCharge".into(),
        json!(crate::charge::batch_operation(result)),
    );
    if let Some(substatus) = result.substatus {
        out.insert("subStatusCode".into(), json!(substatus));
    }
    if let Some(etag) = &result.etag {
        out.insert("eTag".into(), json!(etag));
    }
    if let Some(message) = &result.message {
        out.insert("message".into(), json!(message));
    }
    if with_resource && let Some(doc) = &result.resource {
        out.insert("resourceBody".into(), doc.value().clone());
    }
    Value::Object(out)
}
