//! Scripts (`/dbs/{db}/colls/{c}/{sprocs,triggers,udfs}[/{id}]`): stored
//! procedures, triggers and user-defined functions, and the execution of a
//! procedure (`POST sprocs/{id}`) in the logical partition the request's
//! header names, with the gateway's script limits.

use engine::{ScriptKind, ScriptProperties, TriggerNames, TriggerOperation, TriggerType};
use partita::ProcedureOptions;
use percent_encoding::utf8_percent_encode;
use serde_json::{Value, json};

use super::queries::metadata_feed;
use super::requests::object_body;
use super::responses::{charge, child_rid};
use super::{Gateway, URI_COMPONENT};
use crate::registry::CollEntry;
use crate::wire::{WireError, WireRequest, WireResponse, flag, json_body};

impl Gateway {
    pub(super) fn list_scripts(
        &self,
        coll: &CollEntry,
        kind: &str,
        query: Option<&WireRequest>,
    ) -> Result<WireResponse, WireError> {
        let script_kind = script_kind(kind).unwrap_or(ScriptKind::StoredProcedure);
        let items = coll
            .container
            .list_scripts(script_kind)
            .iter()
            .map(|s| script_json(coll, s))
            .collect();
        let envelope = match script_kind {
            ScriptKind::StoredProcedure => "StoredProcedures",
            ScriptKind::Trigger => "Triggers",
            ScriptKind::UserDefinedFunction => "UserDefinedFunctions",
        };
        metadata_feed(&coll.rid, envelope, items, query)
    }

    pub(super) fn read_script(
        &self,
        coll: &CollEntry,
        kind: &str,
        id: &str,
    ) -> Result<WireResponse, WireError> {
        let script = coll
            .container
            .read_script(script_kind(kind).unwrap_or(ScriptKind::StoredProcedure), id)?;
        Ok(WireResponse::json(200, &script_json(coll, &script)))
    }

    pub(super) fn write_script(
        &self,
        coll: &CollEntry,
        kind: &str,
        id: Option<&str>,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let body = object_body(req, "script")?;
        let Some(Value::String(script_id)) = body.get("id") else {
            return Err(WireError::bad_request("the script needs a string id"));
        };
        if let Some(id) = id
            && id != script_id
        {
            return Err(WireError::bad_request(format!(
                "the script's id {script_id:?} must be the id in the path, {id:?}"
            )));
        }
        let Some(Value::String(text)) = body.get("body") else {
            return Err(WireError::bad_request(format!(
                "script {script_id:?} needs its JavaScript text as a string body"
            )));
        };
        let props = match script_kind(kind).unwrap_or(ScriptKind::StoredProcedure) {
            ScriptKind::StoredProcedure => ScriptProperties::stored_procedure(script_id, text),
            ScriptKind::UserDefinedFunction => {
                ScriptProperties::user_defined_function(script_id, text)
            }
            ScriptKind::Trigger => {
                let field = |name: &str| match body.get(name) {
                    Some(Value::String(v)) => Ok(v.as_str()),
                    _ => Err(WireError::bad_request(format!(
                        "trigger {script_id:?} needs a string {name}"
                    ))),
                };
                let trigger_type: TriggerType = field("triggerType")?.parse().map_err(
                    |e: host_api::ParseScriptEnumError| WireError::bad_request(e.to_string()),
                )?;
                let operation = field("triggerOperation")?;
                let trigger_operation: TriggerOperation =
                    operation
                        .parse()
                        .map_err(|e: host_api::ParseScriptEnumError| {
                            WireError::bad_request(e.to_string())
                        })?;
                // Echoed as written, as the service does.
                ScriptProperties {
                    trigger_names: Some(TriggerNames {
                        trigger_type: field("triggerType")?.to_owned(),
                        trigger_operation: operation.to_owned(),
                    }),
                    ..ScriptProperties::trigger(script_id, text, trigger_type, trigger_operation)
                }
            }
        };
        let (status, script) = match id {
            None => (201, coll.container.create_script(props)?),
            Some(_) => (200, coll.container.replace_script(props)?),
        };
        Ok(WireResponse::json(status, &script_json(coll, &script)))
    }

    pub(super) fn delete_script(
        &self,
        coll: &CollEntry,
        kind: &str,
        id: &str,
    ) -> Result<WireResponse, WireError> {
        coll.container
            .delete_script(script_kind(kind).unwrap_or(ScriptKind::StoredProcedure), id)?;
        Ok(WireResponse::empty(204))
    }

    pub(super) fn execute(
        &self,
        coll: &CollEntry,
        id: &str,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let params = if req.body.iter().all(u8::is_ascii_whitespace) {
            Vec::new()
        } else {
            match json_body(&req.body, "procedure's parameter list")? {
                Value::Array(params) => params,
                other => vec![other],
            }
        };
        let key = self.partition_key(coll, req)?.ok_or_else(|| {
            WireError::bad_request(format!(
                "executing procedure {id:?} needs the x-ms-documentdb-partitionkey header"
            ))
        })?;
        let response = coll.container.execute_stored_procedure(
            id,
            key,
            params,
            Some(&self.procedure_options(req)?),
        )?;
        let logging = flag(&req.headers, "x-ms-documentdb-script-enable-logging")?;
        let mut out = WireResponse::json(200, &response.body)
            .with("x-ms-request-charge", charge(response.request_charge()))
            .with("x-ms-session-token", self.write_token());
        if logging {
            out = out.with(
                "x-ms-documentdb-script-log-results",
                utf8_percent_encode(&response.logs, URI_COMPONENT).to_string(),
            );
        }
        Ok(out)
    }

    /// The options of a procedure call: the server's script limits, with
    /// the request's caps.
    fn procedure_options(&self, req: &WireRequest) -> Result<ProcedureOptions, WireError> {
        Ok(ProcedureOptions {
            limits: Some(self.call_limits(req)?),
            ..Default::default()
        })
    }
}

pub(super) fn script_kind(segment: &str) -> Option<ScriptKind> {
    match segment {
        "sprocs" => Some(ScriptKind::StoredProcedure),
        "triggers" => Some(ScriptKind::Trigger),
        "udfs" => Some(ScriptKind::UserDefinedFunction),
        _ => None,
    }
}

/// A script's `_rid`: its container's rid, then a stable number per id
/// (FNV-1a), so the rid survives replaces, with the kind's type nibble.
pub(super) fn script_rid(coll: &CollEntry, script: &engine::Script) -> String {
    let kind = match script.kind {
        ScriptKind::StoredProcedure => 0x8,
        ScriptKind::Trigger => 0x7,
        ScriptKind::UserDefinedFunction => 0x6,
    };
    let n = script.id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    child_rid(&coll.rid, kind, n)
}

fn script_json(coll: &CollEntry, script: &engine::Script) -> Value {
    let segment = match script.kind {
        ScriptKind::StoredProcedure => "sprocs",
        ScriptKind::Trigger => "triggers",
        ScriptKind::UserDefinedFunction => "udfs",
    };
    let rid = script_rid(coll, script);
    let mut v = json!({
        "id": script.id,
        "body": String::from_utf8_lossy(&script.body),
        "_rid": rid,
        "_self": format!("{}{segment}/{rid}/", coll.self_link),
        "_etag": format!("\"{}\"", script.version),
        "_ts": script.ts,
    });
    if let Some(names) = &script.trigger_names {
        v["triggerType"] = json!(names.trigger_type);
        v["triggerOperation"] = json!(names.trigger_operation);
        return v;
    }
    if let Some(t) = script.trigger_type {
        v["triggerType"] = json!(match t {
            TriggerType::Pre => "Pre",
            TriggerType::Post => "Post",
        });
    }
    if let Some(op) = script.trigger_operation {
        v["triggerOperation"] = json!(match op {
            TriggerOperation::All => "All",
            TriggerOperation::Create => "Create",
            TriggerOperation::Replace => "Replace",
            TriggerOperation::Delete => "Delete",
            TriggerOperation::Upsert => "Upsert",
        });
    }
    v
}
