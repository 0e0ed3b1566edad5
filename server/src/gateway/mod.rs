//! The Cosmos DB gateway protocol as one synchronous function:
//! [`Gateway::handle`] takes a request whose body has been read and returns
//! the response. No sockets and no async here: the transport (`http.rs`)
//! calls it on a blocking thread, tests and the fuzz test call it directly.
//!
//! ```text
//!   handle ─► decode path ─► verify signature/date (401) ─► route by (method, segments)
//!     /                               account
//!     /dbs[/{db}]                      registry (databases)
//!     /dbs/{db}/colls[/{c}]            registry (containers)
//!     /dbs/{db}/colls/{c}/docs[/{id}]  engine: CRUD, queries, read feed, change feed
//!     /dbs/{db}/colls/{c}/pkranges     one range "" .. "FF" (304 on a matching If-None-Match)
//!     /dbs/{db}/colls/{c}/{sprocs,triggers,udfs}[/{id}]   scripts; POST sprocs/{id} executes
//!   ─► common headers: activity id, request charge, session token, version
//! ```
//!
//! The server has one partition-key range, so it always evaluates queries
//! whole (ORDER BY, TOP, aggregates across every logical partition) and
//! answers query-plan requests with a transparent plan. Request charges
//! come from `crate::charge`, so they are the same as the library's.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use engine::query::{self, Params};
use engine::{
    ChangeKind, Document, Lsn, PartitionKey, ScriptKind, ScriptProperties, TriggerOperation,
    TriggerType,
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde_json::{Map, Value, json};

use super::auth::{self, MasterKey};
use super::epk;
use super::registry::{CollEntry, DbEntry, Registry};
use super::wire::{
    SUBSTATUS_PARTITION_KEY_MISMATCH, WireError, WireRequest, WireResponse, flag, header,
    json_body, max_item_count,
};
use partita::charge::{MIN_CHARGE, Work};
use partita::{Database, Limits, ProcedureOptions, QueryOptions, WriteOptions};

/// The database part of every `_rid` (the engine's, base64 of `Part`).
const DATABASE_RID: &str = "UGFydA==";
/// The protocol version the gateway speaks.
const API_VERSION: &str = "2020-07-15";
/// The etag of the partition-key ranges, which never change.
const PKRANGES_ETAG: &str = "\"pkranges-1\"";
/// Most changes read from the log per step of a change-feed page.
const CHANGE_STEP: usize = 1000;
/// Characters `encodeURIComponent` leaves alone (the script-log header).
const URI_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// The gateway's limits.
#[derive(Clone, Copy, Debug)]
pub struct GatewayLimits {
    /// The largest response body a feed or query page may have (Cosmos DB:
    /// 4 MB); pages are cut to fit, but one item always goes out.
    pub max_response_bytes: usize,
}

impl Default for GatewayLimits {
    fn default() -> GatewayLimits {
        GatewayLimits {
            max_response_bytes: 4 * 1024 * 1024,
        }
    }
}

/// The protocol over one database. Share it between threads (`Arc`).
pub struct Gateway {
    pub(crate) db: Database,
    registry: Registry,
    key: MasterKey,
    limits: GatewayLimits,
    /// The global LSN in session tokens (`0:-1#n`): counts writes.
    session: AtomicU64,
    activity: AtomicU64,
    /// The scheme account discovery advertises (`https` behind TLS).
    scheme: &'static str,
    /// The bounds of every procedure, trigger and UDF call.
    script_limits: Limits,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("db", &self.db)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway over `db`, loading (or starting) its database registry.
    ///
    /// # Errors
    /// The engine's error when the registry cannot be read or created.
    pub fn new(
        db: Database,
        key: MasterKey,
        limits: GatewayLimits,
    ) -> Result<Gateway, engine::Error> {
        let registry = Registry::load(db.raw())?;
        Ok(Gateway {
            db,
            registry,
            key,
            limits,
            session: AtomicU64::new(1),
            activity: AtomicU64::new(1),
            scheme: "http",
            script_limits: Limits::default(),
        })
    }

    /// Runs every procedure, trigger and UDF with these bounds (the
    /// runtime's defaults unless set; [`Limits::workers`] runs JavaScript in
    /// worker processes, as `partita serve --isolate-scripts` does).
    #[must_use]
    pub fn with_script_limits(mut self, limits: Limits) -> Gateway {
        self.script_limits = limits;
        self
    }

    /// Makes account discovery advertise `https://` endpoints (the
    /// transport serves TLS), or `http://` (the default).
    #[must_use]
    pub fn with_https(mut self, https: bool) -> Gateway {
        self.scheme = if https { "https" } else { "http" };
        self
    }

    /// Answers one request; `now` is the clock the request date is checked
    /// against. Never panics on any input.
    pub fn handle(&self, req: &WireRequest, now: SystemTime) -> WireResponse {
        let mut response = match self.route(req, now) {
            Ok(response) => response,
            Err(err) => {
                let mut response = err.response();
                if let Some(logs) = &err.logs
                    && flag(&req.headers, "x-ms-documentdb-script-enable-logging").unwrap_or(false)
                {
                    response = response.with(
                        "x-ms-documentdb-script-log-results",
                        utf8_percent_encode(logs, URI_COMPONENT).to_string(),
                    );
                }
                response
            }
        };
        let activity = match header(&req.headers, "x-ms-activity-id") {
            Ok(Some(id)) if !id.is_empty() => id.to_owned(),
            _ => format!(
                "00000000-0000-4000-8000-{:012x}",
                self.activity.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff_ffff
            ),
        };
        if response.header("x-ms-request-charge").is_none() {
            let charge = if response.status < 400 {
                MIN_CHARGE
            } else {
                0.0
            };
            response = response.with("x-ms-request-charge", format!("{charge:.2}"));
        }
        if response.header("x-ms-session-token").is_none() && response.status != 401 {
            let lsn = self.session.load(Ordering::Relaxed);
            response = response.with("x-ms-session-token", format!("0:-1#{lsn}"));
        }
        response
            .with("content-type", "application/json")
            .with("x-ms-activity-id", activity)
            .with("x-ms-version", API_VERSION)
    }

    fn route(&self, req: &WireRequest, now: SystemTime) -> Result<WireResponse, WireError> {
        let segments = decode_path(&req.path)?;
        auth::verify(&self.key, &req.method, &segments, &req.headers, now)?;
        let s: Vec<&str> = segments.iter().map(String::as_str).collect();
        let method = req.method.as_str();
        match s.as_slice() {
            [] => match method {
                "GET" => self.account(req),
                _ => Err(not_allowed(method, &req.path)),
            },
            ["dbs"] => match method {
                "GET" => Ok(self.list_databases(None)?),
                "POST" if is_query(req)? => Ok(self.list_databases(Some(req))?),
                "POST" => self.create_database(req),
                _ => Err(not_allowed(method, &req.path)),
            },
            ["dbs", db] => match method {
                "GET" => Ok(WireResponse::json(
                    200,
                    &database_json(&self.registry.database(db)?),
                )),
                "DELETE" => {
                    self.registry.delete_database(db)?;
                    Ok(WireResponse::empty(204))
                }
                _ => Err(not_allowed(method, &req.path)),
            },
            ["dbs", db, "colls"] => match method {
                "GET" => self.list_collections(db, None),
                "POST" if is_query(req)? => self.list_collections(db, Some(req)),
                "POST" => {
                    let definition = object_body(req, "container")?;
                    let coll = self.registry.create_collection(db, definition)?;
                    Ok(WireResponse::json(201, &collection_json(&coll))
                        .with("x-ms-alt-content-path", format!("dbs/{db}")))
                }
                _ => Err(not_allowed(method, &req.path)),
            },
            ["dbs", db, "colls", c] => match method {
                "GET" => Ok(WireResponse::json(
                    200,
                    &collection_json(&*self.registry.collection(db, c)?),
                )
                .with("x-ms-alt-content-path", format!("dbs/{db}"))),
                "PUT" => {
                    let definition = object_body(req, "container")?;
                    let coll = self.registry.replace_collection(db, c, definition)?;
                    Ok(WireResponse::json(200, &collection_json(&coll))
                        .with("x-ms-alt-content-path", format!("dbs/{db}")))
                }
                "DELETE" => {
                    self.registry.delete_collection(db, c)?;
                    Ok(WireResponse::empty(204))
                }
                _ => Err(not_allowed(method, &req.path)),
            },
            ["dbs", db, "colls", c, rest @ ..] => {
                let coll = self.registry.collection(db, c)?;
                let response = self.collection_route(method, &coll, rest, req)?;
                Ok(with_owner_path(response, method, rest, db, c))
            }
            _ => Err(WireError::not_found(format!(
                "Partita serves no resource at {:?} (supported: databases, containers, \
                 documents, pkranges, sprocs, triggers, udfs)",
                req.path
            ))),
        }
    }

    fn collection_route(
        &self,
        method: &str,
        coll: &CollEntry,
        rest: &[&str],
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        match (method, rest) {
            ("GET", ["docs"]) => match header(&req.headers, "a-im")? {
                Some(_) => self.change_feed(coll, req),
                None => self.read_feed(coll, req),
            },
            ("POST", ["docs"]) => {
                if flag(&req.headers, "x-ms-cosmos-is-query-plan-request")? {
                    Ok(query_plan(req)?)
                } else if is_query(req)? {
                    self.query(coll, req)
                } else {
                    self.write(coll, None, req)
                }
            }
            ("GET", ["docs", id]) => self.read_item(coll, id, req),
            ("PUT", ["docs", id]) => self.write(coll, Some(id), req),
            ("DELETE", ["docs", id]) => self.delete_item(coll, id, req),
            ("GET", ["pkranges"]) => Ok(pkranges(coll, req)?),
            ("GET", [kind]) if script_kind(kind).is_some() => self.list_scripts(coll, kind, None),
            ("POST", [kind]) if script_kind(kind).is_some() => {
                if is_query(req)? {
                    self.list_scripts(coll, kind, Some(req))
                } else {
                    self.write_script(coll, kind, None, req)
                }
            }
            ("GET", [kind, id]) if script_kind(kind).is_some() => {
                let script = coll
                    .container
                    .read_script(script_kind(kind).unwrap_or(ScriptKind::StoredProcedure), id)?;
                Ok(WireResponse::json(200, &script_json(coll, &script)))
            }
            ("PUT", [kind, id]) if script_kind(kind).is_some() => {
                self.write_script(coll, kind, Some(id), req)
            }
            ("DELETE", [kind, id]) if script_kind(kind).is_some() => {
                coll.container
                    .delete_script(script_kind(kind).unwrap_or(ScriptKind::StoredProcedure), id)?;
                Ok(WireResponse::empty(204))
            }
            ("POST", ["sprocs", id]) => self.execute(coll, id, req),
            (_, ["docs" | "pkranges" | "sprocs" | "triggers" | "udfs", ..]) => {
                Err(not_allowed(method, &req.path))
            }
            _ => Err(WireError::not_found(format!(
                "Partita serves no resource at {:?} (supported under a container: docs, \
                 pkranges, sprocs, triggers, udfs)",
                req.path
            ))),
        }
    }

    fn account(&self, req: &WireRequest) -> Result<WireResponse, WireError> {
        let host = header(&req.headers, "host")?.unwrap_or("127.0.0.1:8081");
        let endpoint = format!("{}://{host}/", self.scheme);
        let location = json!([{"name": "South Central US", "databaseAccountEndpoint": endpoint}]);
        Ok(WireResponse::json(
            200,
            &json!({
                "id": "partita",
                "_rid": "partita.sql.cosmos.azure.com",
                "_self": "",
                "media": "//media/",
                "addresses": "//addresses/",
                "_dbs": "//dbs/",
                "writableLocations": location,
                "readableLocations": location,
                "enableMultipleWriteLocations": false,
                "userConsistencyPolicy": {"defaultConsistencyLevel": "Session"},
                "userReplicationPolicy": {"asyncReplication": false, "minReplicaSetSize": 1, "maxReplicasetSize": 4},
                "systemReplicationPolicy": {"minReplicaSetSize": 1, "maxReplicasetSize": 4},
                "readPolicy": {"primaryReadCoefficient": 1, "secondaryReadCoefficient": 1},
                "queryEngineConfiguration": "{\"maxSqlQueryInputLength\":262144,\"sqlAllowTop\":true,\"sqlAllowAggregateFunctions\":true,\"sqlAllowSubQuery\":true}",
            }),
        ))
    }

    fn create_database(&self, req: &WireRequest) -> Result<WireResponse, WireError> {
        let body = object_body(req, "database")?;
        let Some(Value::String(name)) = body.get("id") else {
            return Err(WireError::bad_request(
                "the database body needs a string id",
            ));
        };
        let entry = self.registry.create_database(name)?;
        Ok(WireResponse::json(201, &database_json(&entry)))
    }

    fn list_databases(&self, query: Option<&WireRequest>) -> Result<WireResponse, WireError> {
        let items = self
            .registry
            .databases()
            .iter()
            .map(database_json)
            .collect();
        metadata_feed("", "Databases", items, query)
    }

    fn list_collections(
        &self,
        db: &str,
        query: Option<&WireRequest>,
    ) -> Result<WireResponse, WireError> {
        let entry = self.registry.database(db)?;
        let items = entry.colls.values().map(|c| collection_json(c)).collect();
        metadata_feed(DATABASE_RID, "DocumentCollections", items, query)
    }

    fn list_scripts(
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

    fn write_script(
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
                    if operation.eq_ignore_ascii_case("update") {
                        TriggerOperation::Replace
                    } else {
                        operation
                            .parse()
                            .map_err(|e: host_api::ParseScriptEnumError| {
                                WireError::bad_request(e.to_string())
                            })?
                    };
                ScriptProperties::trigger(script_id, text, trigger_type, trigger_operation)
            }
        };
        let (status, script) = match id {
            None => (201, coll.container.create_script(props)?),
            Some(_) => (200, coll.container.replace_script(props)?),
        };
        Ok(WireResponse::json(status, &script_json(coll, &script)))
    }

    fn execute(
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
            Some(&self.procedure_options()),
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

    fn write_token(&self) -> String {
        format!("0:-1#{}", self.session.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// The partition key of the request's header, if it has one.
    fn partition_key(
        &self,
        _coll: &CollEntry,
        req: &WireRequest,
    ) -> Result<Option<PartitionKey>, WireError> {
        let Some(text) = header(&req.headers, "x-ms-documentdb-partitionkey")? else {
            return Ok(None);
        };
        let invalid = || {
            WireError::bad_request(format!(
                "the x-ms-documentdb-partitionkey header {text:?} must be a JSON array with one \
                 string, number, boolean or null, or [{{}}] for a document without the key"
            ))
        };
        match serde_json::from_str::<Value>(text).map_err(|_| invalid())? {
            Value::Array(items) if items.len() == 1 => PartitionKey::from_value(&items[0])
                .map(Some)
                .ok_or_else(invalid),
            _ => Err(invalid()),
        }
    }

    fn required_key(
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

    /// The options of a procedure call: the server's script limits.
    fn procedure_options(&self) -> ProcedureOptions {
        ProcedureOptions {
            limits: Some(self.script_limits.clone()),
        }
    }

    fn write_options(&self, req: &WireRequest) -> Result<WriteOptions, WireError> {
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
            limits: Some(self.script_limits.clone()),
        })
    }

    /// Create, upsert (POST) or replace (PUT `id`).
    fn write(
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
        let doc_id = doc_id.to_owned();
        if let Some(id) = id
            && id != doc_id
        {
            return Err(WireError::bad_request(format!(
                "the document's id {doc_id:?} must be the id in the path, {id:?}"
            )));
        }
        let doc_key = coll.container.partition_key_of(&doc)?;
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
        let mut out = WireResponse::json(status, &body)
            .with("x-ms-request-charge", charge(request_charge))
            .with("x-ms-session-token", self.write_token());
        if let Some(etag) = body.get("_etag").and_then(Value::as_str) {
            out = out.with("etag", etag);
        }
        Ok(out)
    }

    fn read_item(
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

    fn delete_item(
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

    fn query(&self, coll: &CollEntry, req: &WireRequest) -> Result<WireResponse, WireError> {
        let (sql, params) = query_spec(req)?;
        self.query_page(coll, req, &sql, &params)
    }

    /// The read feed (GET docs): every document, a page at a time.
    fn read_feed(&self, coll: &CollEntry, req: &WireRequest) -> Result<WireResponse, WireError> {
        self.query_page(coll, req, "SELECT * FROM c", &Params::new())
    }

    /// Runs one page of a query, cut to the response limit.
    fn query_page(
        &self,
        coll: &CollEntry,
        req: &WireRequest,
        sql: &str,
        params: &Params,
    ) -> Result<WireResponse, WireError> {
        let mut options = QueryOptions {
            partition_key: self.partition_key(coll, req)?,
            max_item_count: max_item_count(&req.headers)?,
            continuation: header(&req.headers, "x-ms-continuation")?
                .filter(|c| !c.is_empty())
                .map(str::to_owned),
            limits: Some(self.script_limits.clone()),
        };
        loop {
            let page = coll.container.query_items(sql, params, &options)?;
            let (body, fitted) = feed_body(
                &coll.rid,
                "Documents",
                &page.items,
                self.limits.max_response_bytes,
            );
            if fitted < page.items.len() {
                // Too big: run the same page again with only what fits, so
                // the continuation resumes exactly after it.
                options.max_item_count = Some(fitted);
                continue;
            }
            let mut out = WireResponse {
                status: 200,
                headers: Vec::new(),
                body,
            }
            .with("x-ms-item-count", page.items.len().to_string())
            .with(
                "x-ms-request-charge",
                charge(Work::query(&page.stats).request_charge()),
            );
            if let Some(continuation) = page.continuation {
                out = out.with("x-ms-continuation", continuation);
            }
            return Ok(out);
        }
    }

    fn change_feed(&self, coll: &CollEntry, req: &WireRequest) -> Result<WireResponse, WireError> {
        let a_im = header(&req.headers, "a-im")?.unwrap_or_default();
        if !a_im.eq_ignore_ascii_case("Incremental Feed") {
            return Err(WireError::bad_request(format!(
                "A-IM {a_im:?} is not supported: Partita serves the latest-version change feed \
                 (A-IM: Incremental Feed)"
            )));
        }
        let key = self.partition_key(coll, req)?;
        // The Python SDK scopes a per-partition-key feed by EPK range.
        let epk_range = match (
            header(&req.headers, "x-ms-start-epk")?,
            header(&req.headers, "x-ms-end-epk")?,
        ) {
            (Some(start), Some(end)) => Some((start.to_owned(), end.to_owned())),
            (None, None) => None,
            _ => {
                return Err(WireError::bad_request(
                    "x-ms-start-epk and x-ms-end-epk come together",
                ));
            }
        };
        let since = match header(&req.headers, "if-modified-since")? {
            Some(date) => Some(
                httpdate::parse_http_date(date)
                    .map_err(|_| {
                        WireError::bad_request(format!(
                            "the If-Modified-Since header {date:?} is not an RFC 1123 date"
                        ))
                    })?
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0),
            ),
            None => None,
        };
        let start = match header(&req.headers, "if-none-match")? {
            None => 0,
            Some("*") => self.current_lsn(coll)?,
            Some(etag) => etag.trim_matches('"').parse::<u64>().map_err(|_| {
                WireError::bad_request(format!(
                    "the If-None-Match header {etag:?} is not a change-feed etag this server \
                     issued (a quoted LSN such as \"7\"), nor *"
                ))
            })?,
        };
        let max_items = max_item_count(&req.headers)?.unwrap_or(usize::MAX);
        // Latest version of each changed document, in the order of its last
        // change; a document deleted after its last write is left out.
        let mut docs: Vec<(Lsn, (PartitionKey, String), Option<Document>)> = Vec::new();
        let mut last = start;
        let mut bytes = 0usize;
        let (mut docs_read, mut bytes_read) = (0u64, 0u64);
        'read: loop {
            let changes = coll.container.read_changes(Lsn(last), CHANGE_STEP)?;
            if changes.is_empty() {
                break;
            }
            let mut i = 0;
            while i < changes.len() {
                // One transaction at a time: a page never splits one.
                let lsn = changes[i].lsn;
                let end = changes[i..]
                    .iter()
                    .position(|c| c.lsn != lsn)
                    .map_or(changes.len(), |n| i + n);
                let mut txn_docs = Vec::new();
                let mut txn_bytes = 0;
                for change in &changes[i..end] {
                    if key.as_ref().is_some_and(|k| *k != change.partition_key) {
                        continue;
                    }
                    if let Some((start, end)) = &epk_range
                        && !epk::in_range(
                            &epk::effective_partition_key(&change.partition_key),
                            start,
                            end,
                        )
                    {
                        continue;
                    }
                    let document = match change.kind {
                        ChangeKind::Delete => None,
                        ChangeKind::Create | ChangeKind::Replace => change.document.clone(),
                    };
                    if let (Some(since), Some(doc)) = (since, &document)
                        && doc.ts() < since
                    {
                        continue;
                    }
                    if let Some(doc) = &document {
                        txn_bytes += doc.value().to_string().len();
                    }
                    txn_docs.push((
                        lsn,
                        (change.partition_key.clone(), change.id.clone()),
                        document,
                    ));
                }
                let live = docs.iter().filter(|d| d.2.is_some()).count();
                if live > 0
                    && (live + txn_docs.len() > max_items
                        || bytes + txn_bytes > self.limits.max_response_bytes)
                {
                    break 'read;
                }
                for entry in txn_docs {
                    docs.retain(|d| d.1 != entry.1);
                    if entry.2.is_some() {
                        docs_read += 1;
                        docs.push(entry);
                    }
                }
                bytes += txn_bytes;
                bytes_read += txn_bytes as u64;
                last = lsn.0;
                i = end;
            }
        }
        let etag = format!("\"{last}\"");
        let items: Vec<Value> = docs
            .into_iter()
            .filter_map(|(_, _, doc)| doc.map(Document::into_value))
            .collect();
        if items.is_empty() {
            return Ok(WireResponse::empty(304).with("etag", etag));
        }
        let (body, _) = feed_body(&coll.rid, "Documents", &items, usize::MAX);
        let work = Work {
            docs_read,
            bytes_read,
            ..Work::default()
        };
        Ok(WireResponse {
            status: 200,
            headers: Vec::new(),
            body,
        }
        .with("etag", etag)
        .with("x-ms-item-count", items.len().to_string())
        .with("x-ms-request-charge", charge(work.request_charge())))
    }

    /// The container's latest LSN (the change feed's "from now").
    fn current_lsn(&self, coll: &CollEntry) -> Result<u64, WireError> {
        let mut last = 0;
        loop {
            let changes = coll.container.read_changes(Lsn(last), 10 * CHANGE_STEP)?;
            match changes.last() {
                Some(change) => last = change.lsn.0,
                None => return Ok(last),
            }
        }
    }
}

/// Percent-decodes a path into its segments, ignoring a trailing `/`.
pub(crate) fn decode_path(path: &str) -> Result<Vec<String>, WireError> {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    trimmed
        .split('/')
        .map(|segment| {
            if segment.is_empty() {
                return Err(WireError::bad_request(format!(
                    "the path {path:?} has an empty segment"
                )));
            }
            percent_decode_str(segment)
                .decode_utf8()
                .map(|s| s.into_owned())
                .map_err(|_| {
                    WireError::bad_request(format!(
                        "the path segment {segment:?} is not percent-encoded UTF-8"
                    ))
                })
        })
        .collect()
}

/// Adds `x-ms-alt-content-path`, the owner's name path (`dbs/d/colls/c`),
/// to a successful response about something inside a container. With it and
/// the body's `_self` the Python SDK tracks session tokens per container
/// (and sends them back, after resolving the key's range on `/pkranges`).
/// Procedure results are left without it: their body is the procedure's
/// value, not a resource, and the SDK would try to read a `_self` from it.
fn with_owner_path(
    response: WireResponse,
    method: &str,
    rest: &[&str],
    db: &str,
    coll: &str,
) -> WireResponse {
    if method == "POST" && matches!(rest, ["sprocs", _]) {
        return response;
    }
    response.with("x-ms-alt-content-path", format!("dbs/{db}/colls/{coll}"))
}

fn not_allowed(method: &str, path: &str) -> WireError {
    WireError::new(405, format!("{method} is not supported on {path:?}"))
}

fn charge(ru: f64) -> String {
    format!("{ru:.2}")
}

fn is_query(req: &WireRequest) -> Result<bool, WireError> {
    Ok(flag(&req.headers, "x-ms-documentdb-isquery")?
        || header(&req.headers, "content-type")?
            .is_some_and(|t| t.to_ascii_lowercase().starts_with("application/query+json")))
}

fn object_body(req: &WireRequest, what: &str) -> Result<Map<String, Value>, WireError> {
    match json_body(&req.body, what)? {
        Value::Object(map) => Ok(map),
        other => Err(WireError::bad_request(format!(
            "the {what} body must be a JSON object, not {}",
            host_api::type_name(&other)
        ))),
    }
}

/// `{"query": "...", "parameters": [{"name": "@x", "value": ...}]}`.
fn query_spec(req: &WireRequest) -> Result<(String, Params), WireError> {
    let body = object_body(req, "query")?;
    let Some(Value::String(sql)) = body.get("query") else {
        return Err(WireError::bad_request(
            "the query body needs a string \"query\" property",
        ));
    };
    let mut params = Params::new();
    match body.get("parameters") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for p in list {
                let Some(Value::String(name)) = p.get("name") else {
                    return Err(WireError::bad_request(format!(
                        "each query parameter needs a string name, not {p}"
                    )));
                };
                if let Some(value) = p.get("value") {
                    params.insert(name.clone(), value.clone());
                }
            }
        }
        Some(other) => {
            return Err(WireError::bad_request(format!(
                "the query's parameters must be an array, not {}",
                host_api::type_name(other)
            )));
        }
    }
    Ok((sql.clone(), params))
}

/// The query plan of a server with one partition-key range: transparent, so
/// the client sends the query back as is and the server evaluates it whole.
fn query_plan(req: &WireRequest) -> Result<WireResponse, WireError> {
    let (sql, _) = query_spec(req)?;
    query::parse(&sql).map_err(|e| WireError::bad_request(e.to_string()))?;
    Ok(WireResponse::json(
        200,
        &json!({
            "partitionedQueryExecutionInfoVersion": 2,
            "queryInfo": {
                "distinctType": "None", "top": null, "offset": null, "limit": null,
                "orderBy": [], "orderByExpressions": [], "groupByExpressions": [],
                "groupByAliases": [], "aggregates": [], "groupByAliasToAggregateType": {},
                "rewrittenQuery": "", "hasSelectValue": false, "hasNonStreamingOrderBy": false
            },
            "queryRanges": [{"min": "", "max": "FF", "isMinInclusive": true, "isMaxInclusive": false}]
        }),
    ))
}

fn pkranges(coll: &CollEntry, req: &WireRequest) -> Result<WireResponse, WireError> {
    if header(&req.headers, "if-none-match")? == Some(PKRANGES_ETAG) {
        return Ok(WireResponse::empty(304).with("etag", PKRANGES_ETAG));
    }
    let rid = child_rid(&coll.rid, 0x5, 0);
    let range = json!({
        "id": "0", "_rid": rid, "_self": format!("dbs/{DATABASE_RID}/colls/{}/pkranges/{rid}/", coll.rid),
        "_etag": PKRANGES_ETAG, "_ts": coll.ts,
        "minInclusive": "", "maxExclusive": "FF", "ridPrefix": 0, "throughputFraction": 1.0,
        "status": "online", "parents": []
    });
    Ok(WireResponse::json(
        200,
        &json!({"_rid": coll.rid, "PartitionKeyRanges": [range], "_count": 1}),
    )
    .with("etag", PKRANGES_ETAG))
}

/// A child resource's rid: the container's 8 bytes, then 8 bytes little
/// endian whose top nibble is the resource type (pkrange 5, udf 6, trigger
/// 7, sproc 8).
fn child_rid(coll_rid: &str, kind: u8, n: u64) -> String {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    let mut bytes = STANDARD
        .decode(coll_rid.replace('-', "/"))
        .unwrap_or_default();
    bytes.resize(8, 0);
    let value = (n & 0x0fff_ffff_ffff_ffff) | (u64::from(kind) << 60);
    bytes.extend_from_slice(&value.to_le_bytes());
    STANDARD.encode(bytes).replace('/', "-")
}

fn script_kind(segment: &str) -> Option<ScriptKind> {
    match segment {
        "sprocs" => Some(ScriptKind::StoredProcedure),
        "triggers" => Some(ScriptKind::Trigger),
        "udfs" => Some(ScriptKind::UserDefinedFunction),
        _ => None,
    }
}

fn database_json(entry: &DbEntry) -> Value {
    json!({
        "id": entry.name, "_rid": DATABASE_RID, "_self": format!("dbs/{DATABASE_RID}/"),
        "_etag": entry.etag, "_colls": "colls/", "_users": "users/", "_ts": entry.ts
    })
}

fn collection_json(coll: &CollEntry) -> Value {
    let mut v = coll.definition.clone();
    v.insert("id".into(), json!(coll.name));
    let mut pk = v
        .get("partitionKey")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    pk.insert(
        "paths".into(),
        json!([coll.container.partition_key_path().as_str()]),
    );
    pk.entry("kind").or_insert(json!("Hash"));
    pk.entry("version").or_insert(json!(2));
    v.insert("partitionKey".into(), Value::Object(pk));
    v.entry("indexingPolicy").or_insert(json!({
        "indexingMode": "consistent", "automatic": true,
        "includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/\"_etag\"/?"}]
    }));
    v.entry("conflictResolutionPolicy").or_insert(json!({
        "mode": "LastWriterWins", "conflictResolutionPath": "/_ts", "conflictResolutionProcedure": ""
    }));
    v.insert("_rid".into(), json!(coll.rid));
    v.insert("_ts".into(), json!(coll.ts));
    v.insert(
        "_self".into(),
        json!(format!("dbs/{DATABASE_RID}/colls/{}/", coll.rid)),
    );
    v.insert("_etag".into(), json!(coll.etag));
    for (k, link) in [
        ("_docs", "docs/"),
        ("_sprocs", "sprocs/"),
        ("_triggers", "triggers/"),
        ("_udfs", "udfs/"),
        ("_conflicts", "conflicts/"),
    ] {
        v.insert(k.into(), json!(link));
    }
    Value::Object(v)
}

fn script_json(coll: &CollEntry, script: &engine::Script) -> Value {
    let (kind, segment) = match script.kind {
        ScriptKind::StoredProcedure => (0x8, "sprocs"),
        ScriptKind::Trigger => (0x7, "triggers"),
        ScriptKind::UserDefinedFunction => (0x6, "udfs"),
    };
    // A stable number per id (FNV-1a), so the rid survives replaces.
    let n = script.id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let rid = child_rid(&coll.rid, kind, n);
    let mut v = json!({
        "id": script.id,
        "body": String::from_utf8_lossy(&script.body),
        "_rid": rid,
        "_self": format!("dbs/{DATABASE_RID}/colls/{}/{segment}/{rid}/", coll.rid),
        "_etag": format!("\"{}\"", script.version),
        "_ts": script.ts,
    });
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

/// `{"_rid": rid, "<envelope>": [items...], "_count": n}` with as many items
/// as fit in `max_bytes` (at least one); returns the body and how many fit.
fn feed_body(rid: &str, envelope: &str, items: &[Value], max_bytes: usize) -> (Vec<u8>, usize) {
    let mut out = format!("{{\"_rid\":{},\"{envelope}\":[", json!(rid)).into_bytes();
    let mut count = 0;
    for item in items {
        let text = serde_json::to_vec(item).expect("a JSON value always serializes");
        if count > 0 && out.len() + text.len() + 32 > max_bytes {
            break;
        }
        if count > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&text);
        count += 1;
    }
    out.extend_from_slice(format!("],\"_count\":{count}}}").as_bytes());
    (out, count)
}

/// A list of metadata resources, or the result of a query over them
/// (`SELECT * FROM root r WHERE r.id = @id`).
fn metadata_feed(
    rid: &str,
    envelope: &str,
    items: Vec<Value>,
    query: Option<&WireRequest>,
) -> Result<WireResponse, WireError> {
    let items = match query {
        None => items,
        Some(req) => {
            let (sql, params) = query_spec(req)?;
            let parsed = query::parse(&sql).map_err(|e| WireError::bad_request(e.to_string()))?;
            let page = query::execute(
                &parsed,
                &params,
                &ListSource(items),
                &query::QueryOptions::default(),
            )
            .map_err(|e| WireError::bad_request(e.to_string()))?;
            page.items
        }
    };
    let (body, count) = feed_body(rid, envelope, &items, usize::MAX);
    Ok(WireResponse {
        status: 200,
        headers: Vec::new(),
        body,
    }
    .with("x-ms-item-count", count.to_string()))
}

/// A list of values as a one-partition query source.
struct ListSource(Vec<Value>);

impl query::Source for ListSource {
    fn partitions(&self) -> Vec<PartitionKey> {
        vec![PartitionKey::None]
    }

    fn scan(
        &self,
        _key: &PartitionKey,
        after: Option<u64>,
        f: &mut dyn FnMut(u64, &Value, usize) -> ControlFlow<()>,
    ) {
        for (i, value) in self.0.iter().enumerate() {
            let rid = i as u64 + 1;
            if after.is_some_and(|a| rid <= a) {
                continue;
            }
            if f(rid, value, 0).is_break() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_decode_and_refuse_empty_segments() {
        assert_eq!(decode_path("/").unwrap(), Vec::<String>::new());
        assert_eq!(
            decode_path("/dbs/my%20db/colls/c/").unwrap(),
            vec!["dbs", "my db", "colls", "c"]
        );
        assert_eq!(decode_path("/dbs//colls").unwrap_err().status, 400);
        assert_eq!(decode_path("/dbs/%ff").unwrap_err().status, 400);
    }

    #[test]
    fn child_rids_carry_the_container_and_the_type_nibble() {
        use base64::Engine;
        let coll = "UGFydAAAAAE=";
        let rid = child_rid(coll, 5, 0);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(rid.replace('-', "/"))
            .unwrap();
        assert_eq!(bytes.len(), 16);
        assert_eq!(&bytes[..8], b"Part\0\0\0\x01");
        assert_eq!(bytes[15] >> 4, 5);
    }

    #[test]
    fn feed_bodies_cut_at_the_limit_but_keep_one_item() {
        let items = vec![json!({"a": "x".repeat(100)}), json!({"b": 1})];
        let (body, n) = feed_body("r", "Documents", &items, 50);
        assert_eq!(n, 1);
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["_count"], 1);
        assert_eq!(v["Documents"][0], items[0]);
        let (_, n) = feed_body("r", "Documents", &items, usize::MAX);
        assert_eq!(n, 2);
    }
}
