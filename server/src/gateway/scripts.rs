//! Scripts (`/dbs/{db}/colls/{c}/{sprocs,triggers,udfs}[/{id}]`): stored
//! procedures, triggers and user-defined functions, and the execution of a
//! procedure (`POST sprocs/{id}`) in the logical partition the request's
//! header names, with the gateway's script limits.
//!
//! Partita's additions: a WebAssembly script is the same resource with
//! `"language": "wasm"` and the module in base64 as its body; an execution
//! with `x-partita-include-write-set: true` returns what it committed in
//! `x-partita-write-set`; one with `x-partita-fuzz: true` runs the
//! atomicity fuzzer on the procedure instead (the Data Explorer's "Fuzz").

use std::sync::atomic::{AtomicBool, Ordering};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use engine::{
    ScriptKind, ScriptLanguage, ScriptProperties, TriggerNames, TriggerOperation, TriggerType,
};
use partita::ProcedureOptions;
use partita::fuzz::{self, FuzzConfig, Invariant, params_from_templates};
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
        let module = wasm_module(&body, script_id, text)?;
        let mut props = match script_kind(kind).unwrap_or(ScriptKind::StoredProcedure) {
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
        if let Some(module) = module {
            props.language = ScriptLanguage::Wasm;
            props.body = module;
        }
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
        if flag(&req.headers, "x-partita-fuzz")? {
            return self.fuzz(coll, id, req);
        }
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
        let mut options = self.procedure_options(req)?;
        options.record_writes = flag(&req.headers, "x-partita-include-write-set")?;
        let response = coll
            .container
            .execute_stored_procedure(id, key, params, Some(&options))?;
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
        if options.record_writes {
            out = out.with("x-partita-write-set", write_set_header(&response.writes));
        }
        Ok(out)
    }

    /// `x-partita-fuzz: true` on a procedure's execution: runs the
    /// atomicity fuzzer on the procedure, on a private copy of the named
    /// partitions (the container is only read), and answers its report.
    fn fuzz(
        &self,
        coll: &CollEntry,
        id: &str,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let request = FuzzRequest::parse(req)?;
        let _running = FuzzSlot::take(&self.fuzzing).ok_or_else(|| {
            WireError::new(
                429,
                "a fuzz run is already under way on this server (one at a time); retry when it \
                 has finished",
            )
        })?;
        let mut config = FuzzConfig::for_container(
            &coll.container,
            Some(id),
            request.partition_keys,
            params_from_templates(vec![request.params]),
            request.invariant,
        )?;
        config.calls = request.calls;
        config.seed = request.seed;
        config.limits = self.call_limits(req)?;
        let report = fuzz::run(&config)
            .map_err(|e| WireError::new(e.status(), format!("fuzzing {id:?}: {e}")))?;
        Ok(WireResponse::json(200, &report.to_json()))
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

/// The most bytes of `x-partita-write-set`: past it the documents are left
/// out (`"truncated": true`), so the header stays within what clients read.
const MAX_WRITE_SET_HEADER: usize = 64 * 1024;

/// What a call committed, as `x-partita-write-set`: percent-encoded JSON
/// `{"writes": [{"operation", "id", "document"}], "truncated"}`.
fn write_set_header(writes: &[partita::Change]) -> String {
    let render = |documents: bool| {
        let writes: Vec<Value> = writes
            .iter()
            .map(|change| {
                let operation = match change.kind {
                    engine::ChangeKind::Create => "create",
                    engine::ChangeKind::Replace => "replace",
                    engine::ChangeKind::Delete => "delete",
                };
                let document = match (&change.document, documents) {
                    (Some(doc), true) => doc.value().clone(),
                    _ => Value::Null,
                };
                json!({"operation": operation, "id": change.id, "document": document})
            })
            .collect();
        let text = json!({"writes": writes, "truncated": !documents}).to_string();
        utf8_percent_encode(&text, URI_COMPONENT).to_string()
    };
    let full = render(true);
    if full.len() <= MAX_WRITE_SET_HEADER {
        full
    } else {
        render(false)
    }
}

/// The one fuzz run a server makes at a time: taken while it runs.
struct FuzzSlot<'a>(&'a AtomicBool);

impl<'a> FuzzSlot<'a> {
    fn take(busy: &'a AtomicBool) -> Option<FuzzSlot<'a>> {
        (!busy.swap(true, Ordering::AcqRel)).then_some(FuzzSlot(busy))
    }
}

impl Drop for FuzzSlot<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The body of a fuzz request (`x-partita-fuzz: true`).
struct FuzzRequest {
    partition_keys: Vec<partita::PartitionKey>,
    params: Vec<Value>,
    invariant: Invariant,
    calls: u64,
    seed: u64,
}

/// The most calls one fuzz request may make.
const MAX_FUZZ_CALLS: u64 = 2_000;

impl FuzzRequest {
    fn parse(req: &WireRequest) -> Result<FuzzRequest, WireError> {
        let body = object_body(req, "fuzz request")?;
        let bad = |message: String| WireError::bad_request(format!("fuzz request: {message}"));
        let partition_keys = match body.get("partitionKeys") {
            Some(Value::Array(keys)) if !keys.is_empty() && keys.len() <= 100 => keys
                .iter()
                .map(|key| {
                    partita::PartitionKey::from_value(key)
                        .ok_or_else(|| bad(format!("{key} is not a partition-key value")))
                })
                .collect::<Result<Vec<_>, _>>()?,
            _ => {
                return Err(bad(
                    "\"partitionKeys\" must be an array of 1 to 100 partition-key values".into(),
                ));
            }
        };
        let params = match body.get("params") {
            None => Vec::new(),
            Some(Value::Array(params)) => params.clone(),
            Some(other) => return Err(bad(format!("\"params\" must be an array, not {other}"))),
        };
        let invariant = match (body.get("invariant"), body.get("expect")) {
            (None | Some(Value::Null), _) => Invariant::Check(std::sync::Arc::new(
                |_: &partita::PartitionKey, _: &[Value]| Ok(()),
            )),
            (Some(Value::String(sql)), Some(expect @ Value::Array(_))) => Invariant::Query {
                sql: sql.clone(),
                expect: expect.clone(),
            },
            _ => {
                return Err(bad(
                    "\"invariant\" is a query and \"expect\" the JSON array it must return".into(),
                ));
            }
        };
        let number = |name: &str, default: u64| match body.get(name) {
            None => Ok(default),
            Some(value) => value
                .as_u64()
                .ok_or_else(|| bad(format!("\"{name}\" must be a whole number, not {value}"))),
        };
        let calls = number("calls", 200)?;
        if !(1..=MAX_FUZZ_CALLS).contains(&calls) {
            return Err(bad(format!(
                "\"calls\" must be between 1 and {MAX_FUZZ_CALLS}, not {calls}"
            )));
        }
        Ok(FuzzRequest {
            partition_keys,
            params,
            invariant,
            calls,
            seed: number("seed", 1)?,
        })
    }
}

/// A WebAssembly script's module: Partita's `"language": "wasm"` member
/// makes `body` the module's bytes (binary `.wasm`, or WAT text) in base64;
/// without it (or with `"javascript"`) `body` is JavaScript, as on Cosmos DB.
fn wasm_module(
    resource: &serde_json::Map<String, Value>,
    id: &str,
    body: &str,
) -> Result<Option<Vec<u8>>, WireError> {
    match resource.get("language") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(language)) if language.eq_ignore_ascii_case("javascript") => Ok(None),
        Some(Value::String(language)) if language.eq_ignore_ascii_case("wasm") => {
            STANDARD.decode(body.trim()).map(Some).map_err(|e| {
                WireError::bad_request(format!(
                    "script {id:?}: a WebAssembly body must be the module in base64 ({e})"
                ))
            })
        }
        Some(other) => Err(WireError::bad_request(format!(
            "script {id:?}: \"language\" must be \"javascript\" or \"wasm\", not {other}"
        ))),
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
    let body = match script.language {
        ScriptLanguage::JavaScript => String::from_utf8_lossy(&script.body).into_owned(),
        ScriptLanguage::Wasm => STANDARD.encode(&script.body),
    };
    let mut v = json!({
        "id": script.id,
        "body": body,
        "_rid": rid,
        "_self": format!("{}{segment}/{rid}/", coll.self_link),
        "_etag": format!("\"{}\"", script.version),
        "_ts": script.ts,
    });
    if script.language == ScriptLanguage::Wasm {
        v["language"] = json!("wasm");
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_fuzz_run_at_a_time() {
        let busy = AtomicBool::new(false);
        let first = FuzzSlot::take(&busy).expect("free");
        assert!(
            FuzzSlot::take(&busy).is_none(),
            "a second run waits its turn"
        );
        drop(first);
        assert!(
            FuzzSlot::take(&busy).is_some(),
            "free again once the run ends"
        );
    }

    #[test]
    fn a_fuzz_run_is_a_post_with_the_flag() {
        let request = |method: &str, flag: Option<&str>| {
            let mut headers = hyper::HeaderMap::new();
            if let Some(flag) = flag {
                headers.insert("x-partita-fuzz", flag.parse().unwrap());
            }
            WireRequest {
                method: method.to_owned(),
                path: "/dbs/d/colls/c/sprocs/p".to_owned(),
                headers,
                body: bytes::Bytes::new(),
                local_addr: None,
                remote_addr: None,
            }
        };
        assert!(Gateway::is_fuzz_run(&request("POST", Some("true"))));
        assert!(!Gateway::is_fuzz_run(&request("POST", Some("false"))));
        assert!(!Gateway::is_fuzz_run(&request("POST", Some("maybe"))));
        assert!(!Gateway::is_fuzz_run(&request("POST", None)));
        assert!(!Gateway::is_fuzz_run(&request("GET", Some("true"))));
    }
}
