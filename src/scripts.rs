//! Stored procedures and triggers: where an engine transaction meets the
//! script runtime.
//!
//! The engine stores scripts and runs transactions; the runtime runs one
//! script against a `host_api::Collection`. This module composes them, the
//! way Cosmos DB does for one request:
//!
//! ```text
//!   procedure:  begin(pk) ──► run_js(procedure) ─────────────────────────────────► commit
//!   write:      begin(pk) ──► run_js(pre-trigger) ──► write ──► run_js(post-trigger) ──► commit
//!                   any failure on the way ──► drop the transaction (rollback) ──► error
//! ```
//!
//! Everything runs in one transaction on one logical partition, so a throw
//! anywhere (in the procedure, in either trigger, or the write itself)
//! leaves no trace. The response carries the script's body, its
//! `console.log` output (from both triggers too, which Cosmos DB cannot
//! return) and statistics; a failure carries the logs up to the failure.
//!
//! Scripts are looked up once per request: a script replaced meanwhile takes
//! effect for the next request, and the request finishes on the version it
//! started with.
//!
//! A script runs in the sandbox of its language: `run_js` for JavaScript,
//! `run_wasm` for a WebAssembly module (same response shape, statuses and
//! bounded execution; the statistics carry fuel instead of instructions).
//! The engine stores script bodies without looking inside, so WebAssembly
//! modules are checked at upload here: [`Scripts::create_checked_script`]
//! and [`Scripts::replace_checked_script`] compile `.wat` text to `.wasm`
//! bytes and refuse, with 400 naming the problem, a module that does not
//! validate, imports anything outside the `partita_v1` ABI, or lacks its
//! kind's entry point; the compiled module is cached in memory and its
//! precompiled artifact written under the data directory, so neither the
//! first call nor a restart compiles again. A module stored with the
//! engine's plain `create_script` is checked when it first runs instead.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use engine::query::{Params, Udf};
use engine::{
    Container, Document, ItemOptions, PartitionKey, QueryItemsOptions, QueryPage, Script,
    ScriptKind, ScriptLanguage, ScriptProperties, TriggerOperation, TriggerType, Txn,
};
use host_api::CallStats;
use runtime::{Invocation, Limits, WasmCache, WasmScript};
use serde_json::Value;

/// Options of a point write that may run triggers.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `If-Match`: write only if the document's current etag is this.
    pub if_match: Option<String>,
    /// The pre-trigger to run before the write (at most one, as in Cosmos DB).
    pub pre_triggers: Vec<String>,
    /// The post-trigger to run after the write (at most one).
    pub post_triggers: Vec<String>,
    /// Bounds of each script; the runtime's defaults when `None`.
    pub limits: Option<Limits>,
}

/// What a call did, summed over every script it ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallStatistics {
    /// Documents read (point reads, feeds, documents scanned by queries).
    pub docs_read: u64,
    /// Documents created, replaced or deleted (by scripts and by the write).
    pub docs_written: u64,
    /// Bytes of documents read.
    pub bytes_read: u64,
    /// Bytes of documents written.
    pub bytes_written: u64,
    /// JavaScript instructions executed.
    pub instructions: u64,
    /// Scripts run (the procedure, each trigger); each adds a fixed request
    /// charge.
    pub scripts_run: u64,
    /// WebAssembly fuel used (deterministic: the same call on the same data
    /// uses the same fuel).
    pub fuel: u64,
    /// Wall time of the whole call.
    pub wall_time: Duration,
}

impl CallStatistics {
    fn add(&mut self, collection: CallStats, instructions: u64, fuel: u64) {
        self.docs_read += collection.docs_read;
        self.docs_written += collection.docs_written;
        self.bytes_read += collection.bytes_read;
        self.bytes_written += collection.bytes_written;
        self.instructions += instructions;
        self.scripts_run += 1;
        self.fuel += fuel;
    }
}

/// The response of a stored procedure.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcedureResponse {
    /// What the procedure set with `getContext().getResponse().setBody()`
    /// (`""` when it set nothing, as in Cosmos DB).
    pub body: Value,
    /// Its `console.log` output.
    pub logs: String,
    /// What it did.
    pub stats: CallStatistics,
}

/// The response of a point write.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemResponse {
    /// The written document, or what a post-trigger set as the response
    /// body; `None` for a delete.
    pub resource: Option<Value>,
    /// `console.log` output of the triggers (pre-trigger first).
    pub logs: String,
    /// What the write and its triggers did.
    pub stats: CallStatistics,
}

/// Why a procedure or a write with triggers did not commit. Nothing it did
/// is visible.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The engine refused: a missing script or document, a conflicting
    /// write, a bad trigger choice, a storage failure.
    #[error(transparent)]
    Engine(#[from] engine::Error),
    /// A script failed: it threw, exhausted a budget, or did not compile.
    #[error("{}", .0.error)]
    Script(Box<ScriptFailure>),
}

/// A script's failure, with what it logged and did before it.
#[derive(Debug)]
pub struct ScriptFailure {
    /// What went wrong.
    pub error: runtime::Error,
    /// `console.log` output up to the failure (of every script that ran).
    pub logs: String,
    /// What the call did up to the failure.
    pub stats: CallStatistics,
}

impl CallError {
    /// The HTTP status Cosmos DB would return.
    pub fn status(&self) -> u16 {
        match self {
            CallError::Engine(e) => e.status(),
            CallError::Script(failure) => failure.error.status(),
        }
    }

    /// The `x-ms-substatus` Cosmos DB would return, if any.
    pub fn substatus(&self) -> Option<u16> {
        match self {
            CallError::Engine(_) => None,
            CallError::Script(failure) => failure.error.substatus(),
        }
    }

    /// `console.log` output of the scripts up to the failure.
    pub fn logs(&self) -> &str {
        match self {
            CallError::Engine(_) => "",
            CallError::Script(failure) => &failure.logs,
        }
    }
}

/// Stored procedures and trigger-aware writes on a container.
///
/// ```
/// use partita::{Database, ScriptProperties, Scripts};
/// use serde_json::json;
///
/// let db = Database::in_memory();
/// let posts = db.create_container("posts", "/postId")?;
/// posts.create_script(ScriptProperties::stored_procedure(
///     "hello",
///     "function hello(name) { getContext().getResponse().setBody('hello ' + name); }",
/// ))?;
/// let response = posts.execute_stored_procedure("hello", "p1", vec![json!("world")])?;
/// assert_eq!(response.body, "hello world");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Scripts {
    /// Stores a new script after checking what the engine cannot: a
    /// WebAssembly module (`.wasm` bytes or `.wat` text, stored as `.wasm`)
    /// must validate, import only the `partita_v1` ABI and export its kind's
    /// entry point; it is compiled now, so the first call does not. A
    /// JavaScript script is stored as `create_script` would.
    ///
    /// ```
    /// use partita::{Database, ScriptKind, ScriptProperties, Scripts};
    ///
    /// let db = Database::in_memory();
    /// let posts = db.create_container("posts", "/postId")?;
    /// let wat = r#"(module (memory (export "memory") 1)
    ///                (func (export "partita_procedure") (result i32) (i32.const 0)))"#;
    /// posts.create_checked_script(ScriptProperties::wasm("noop", ScriptKind::StoredProcedure, wat))?;
    /// let bad = ScriptProperties::wasm("bad", ScriptKind::StoredProcedure, "(module)");
    /// assert_eq!(posts.create_checked_script(bad).unwrap_err().status(), 400);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// 400 naming the problem with the module; the errors of
    /// `Container::create_script` (409 when it exists, ...).
    fn create_checked_script(&self, props: ScriptProperties) -> Result<Script, engine::Error>;

    /// Replaces a script after the checks of
    /// [`Scripts::create_checked_script`].
    ///
    /// # Errors
    /// As [`Scripts::create_checked_script`], and 404 when there is no such
    /// script.
    fn replace_checked_script(&self, props: ScriptProperties) -> Result<Script, engine::Error>;

    /// Runs a stored procedure in one logical partition, atomically.
    ///
    /// # Errors
    /// [`CallError::Engine`] (404 when there is no such procedure);
    /// [`CallError::Script`] when the procedure throws (400), does not
    /// compile (400/65535) or exhausts a budget (408). Nothing is committed.
    fn execute_stored_procedure(
        &self,
        id: &str,
        partition_key: impl Into<PartitionKey>,
        params: Vec<Value>,
    ) -> Result<ProcedureResponse, CallError> {
        self.execute_stored_procedure_with(id, partition_key, params, &Limits::default())
    }

    /// [`Scripts::execute_stored_procedure`] with explicit bounds.
    ///
    /// # Errors
    /// As [`Scripts::execute_stored_procedure`].
    fn execute_stored_procedure_with(
        &self,
        id: &str,
        partition_key: impl Into<PartitionKey>,
        params: Vec<Value>,
        limits: &Limits,
    ) -> Result<ProcedureResponse, CallError>;

    /// Creates a document, running the named triggers in its transaction.
    ///
    /// # Errors
    /// The write's own errors (409 for a duplicate id, ...), 400 for a
    /// trigger that does not exist, has the wrong type or operation, or is
    /// one of several; a trigger's failure as [`CallError::Script`].
    fn create_item_with(
        &self,
        partition_key: impl Into<PartitionKey>,
        doc: Value,
        options: &WriteOptions,
    ) -> Result<ItemResponse, CallError>;

    /// Creates or replaces a document, running the named triggers.
    ///
    /// # Errors
    /// As [`Scripts::create_item_with`], plus 412 for a stale `if_match`.
    fn upsert_item_with(
        &self,
        partition_key: impl Into<PartitionKey>,
        doc: Value,
        options: &WriteOptions,
    ) -> Result<ItemResponse, CallError>;

    /// Replaces a document, running the named triggers.
    ///
    /// # Errors
    /// As [`Scripts::create_item_with`], plus 404 and 412.
    fn replace_item_with(
        &self,
        partition_key: impl Into<PartitionKey>,
        id: &str,
        doc: Value,
        options: &WriteOptions,
    ) -> Result<ItemResponse, CallError>;

    /// Runs a query (like `Container::query_items`) with the container's
    /// user-defined functions callable as `udf.name(args)`.
    ///
    /// # Errors
    /// As `Container::query_items`; a UDF that is missing, throws or exhausts
    /// its budget fails the query with 400.
    fn run_query(
        &self,
        sql: &str,
        params: &Params,
        options: &QueryItemsOptions,
    ) -> Result<QueryPage, engine::Error> {
        self.run_query_with(sql, params, options, &Limits::default())
    }

    /// [`Scripts::run_query`] with explicit bounds for its UDFs (each UDF
    /// call gets `limits`; with [`Limits::workers`] they run in workers).
    ///
    /// # Errors
    /// As [`Scripts::run_query`].
    fn run_query_with(
        &self,
        sql: &str,
        params: &Params,
        options: &QueryItemsOptions,
        limits: &Limits,
    ) -> Result<QueryPage, engine::Error>;

    /// Deletes a document, running the named triggers (their request body
    /// is `null`).
    ///
    /// # Errors
    /// As [`Scripts::create_item_with`], plus 404 and 412.
    fn delete_item_with(
        &self,
        partition_key: impl Into<PartitionKey>,
        id: &str,
        options: &WriteOptions,
    ) -> Result<ItemResponse, CallError>;
}

/// The JavaScript text of a script.
fn javascript(script: &Script) -> Result<&str, engine::Error> {
    std::str::from_utf8(&script.body)
        .map_err(|_| engine::Error::BadRequest(format!("script {:?} is not UTF-8 text", script.id)))
}

/// A WebAssembly script, cached in the process's cache and, for a durable
/// database, as an artifact under `data_dir`.
fn wasm<'a>(script: &'a Script, data_dir: Option<&'a Path>) -> WasmScript<'a> {
    WasmScript {
        id: &script.id,
        module: &script.body,
        shared: Some(&script.body),
        cache: WasmCache::global(),
        artifact_dir: data_dir,
    }
}

/// Checks and normalizes a script before it is stored (see the module
/// docs).
fn checked(
    container: &Container,
    mut props: ScriptProperties,
) -> Result<ScriptProperties, engine::Error> {
    if props.language == ScriptLanguage::Wasm {
        let script = WasmScript {
            id: &props.id,
            module: &props.body,
            shared: None,
            cache: WasmCache::global(),
            artifact_dir: container.data_dir(),
        };
        let what = match props.kind {
            ScriptKind::StoredProcedure => "stored procedure",
            ScriptKind::Trigger => "trigger",
            ScriptKind::UserDefinedFunction => "user-defined function",
        };
        props.body = runtime::prepare_wasm(&script, props.kind)
            .map_err(|e| engine::Error::BadRequest(format!("{what} {:?}: {e}", props.id)))?;
    }
    Ok(props)
}

/// Whether `value` nests objects and arrays deeper than `limit` levels;
/// recurses at most `limit` levels.
fn nests_deeper(value: &Value, limit: usize) -> bool {
    match value {
        Value::Array(items) => limit == 0 || items.iter().any(|v| nests_deeper(v, limit - 1)),
        Value::Object(map) => limit == 0 || map.values().any(|v| nests_deeper(v, limit - 1)),
        _ => false,
    }
}

/// Refuses (400) parameters and bodies nested deeper than a document may
/// be: converting them into script values, and copying them, recurses once
/// per level, and 10,000 levels overflow a thread's stack.
fn check_nesting(invocation: &Invocation) -> Result<(), engine::Error> {
    let (what, values): (&str, Vec<&Value>) = match invocation {
        Invocation::Procedure { params } => ("the procedure's parameters", params.iter().collect()),
        Invocation::PreTrigger { request_body, .. } => ("the request body", vec![request_body]),
        Invocation::PostTrigger {
            request_body,
            response_body,
            ..
        } => (
            "the request or response body",
            vec![request_body, response_body],
        ),
    };
    if values.iter().any(|v| nests_deeper(v, engine::MAX_NESTING)) {
        return Err(engine::Error::BadRequest(format!(
            "{what} nest objects and arrays deeper than {} levels",
            engine::MAX_NESTING
        )));
    }
    Ok(())
}

/// Runs one script in `txn`, adding its logs and statistics to the call's.
fn run(
    script: &Script,
    data_dir: Option<&Path>,
    invocation: Invocation,
    txn: &mut dyn host_api::Collection,
    limits: &Limits,
    logs: &mut String,
    stats: &mut CallStatistics,
) -> Result<Option<Value>, CallError> {
    check_nesting(&invocation)?;
    let before = txn.stats();
    let result = match script.language {
        ScriptLanguage::JavaScript => {
            let source = runtime::Script {
                id: &script.id,
                version: script.version,
                body: javascript(script)?,
            };
            runtime::run_js(&source, invocation, txn, limits)
        }
        ScriptLanguage::Wasm => runtime::run_wasm(&wasm(script, data_dir), invocation, txn, limits),
    };
    let (output_logs, exec, outcome) = match result {
        Ok(output) => (output.logs, output.stats, Ok(output.body)),
        Err(failure) => (failure.logs, failure.stats, Err(failure.error)),
    };
    logs.push_str(&output_logs);
    // The collection's counters are cumulative over the transaction; the
    // runtime reports them as of the end of this script.
    let after = exec.collection;
    stats.add(
        CallStats {
            docs_read: after.docs_read.saturating_sub(before.docs_read),
            docs_written: after.docs_written.saturating_sub(before.docs_written),
            bytes_read: after.bytes_read.saturating_sub(before.bytes_read),
            bytes_written: after.bytes_written.saturating_sub(before.bytes_written),
        },
        exec.instructions,
        exec.fuel,
    );
    outcome.map_err(|error| {
        CallError::Script(Box::new(ScriptFailure {
            error,
            logs: logs.clone(),
            stats: *stats,
        }))
    })
}

/// Gives `txn`'s queries the user-defined functions of `container`.
pub(crate) fn attach_udfs(container: &Container, txn: &mut Txn, limits: &Limits) {
    txn.set_udfs(Rc::new(ContainerUdfs::new(container, limits)));
}

/// Runs the stored procedure `script` against `collection` (a transaction,
/// or the fuzzer's fault-injecting wrapper around one) without committing:
/// the caller commits on `Ok` and drops the transaction on `Err`.
pub(crate) fn run_procedure(
    script: &Script,
    data_dir: Option<&Path>,
    collection: &mut dyn host_api::Collection,
    params: Vec<Value>,
    limits: &Limits,
) -> Result<ProcedureResponse, CallError> {
    let started = std::time::Instant::now();
    let mut logs = String::new();
    let mut stats = CallStatistics::default();
    let body = run(
        script,
        data_dir,
        Invocation::Procedure { params },
        collection,
        limits,
        &mut logs,
        &mut stats,
    )?;
    stats.wall_time = started.elapsed();
    Ok(ProcedureResponse {
        body: body.unwrap_or_else(|| Value::String(String::new())),
        logs,
        stats,
    })
}

/// Runs a query on `target` with the user-defined functions of `source`
/// (the fuzzer checks invariants on scratch copies of a partition).
pub(crate) fn query_with_udfs_of(
    source: &Container,
    target: &Container,
    sql: &str,
    options: &QueryItemsOptions,
    limits: &Limits,
) -> Result<QueryPage, engine::Error> {
    let udfs = ContainerUdfs::new(source, limits);
    target.query_items_with_udfs(sql, &Params::new(), options, Some(&udfs))
}

/// The container's user-defined functions, for the query engine: looked up
/// once per query (a replace during the query does not switch versions
/// halfway) and run by the runtime of their language.
struct ContainerUdfs {
    container: Container,
    limits: Limits,
    scripts: RefCell<HashMap<String, Script>>,
}

impl ContainerUdfs {
    fn new(container: &Container, limits: &Limits) -> ContainerUdfs {
        ContainerUdfs {
            container: container.clone(),
            limits: limits.clone(),
            scripts: RefCell::default(),
        }
    }
}

impl Udf for ContainerUdfs {
    fn call(&self, name: &str, args: &[Option<Value>]) -> Result<Option<Value>, String> {
        let cached = self.scripts.borrow().get(name).cloned();
        let script = match cached {
            Some(script) => script,
            None => {
                let script = self
                    .container
                    .read_script(ScriptKind::UserDefinedFunction, name)
                    .map_err(|e| e.to_string())?;
                self.scripts
                    .borrow_mut()
                    .insert(name.to_owned(), script.clone());
                script
            }
        };
        let result = match script.language {
            ScriptLanguage::JavaScript => {
                let body = javascript(&script).map_err(|e| e.to_string())?;
                let source = runtime::Script {
                    id: &script.id,
                    version: script.version,
                    body,
                };
                runtime::run_udf(&source, args, &self.limits)
            }
            ScriptLanguage::Wasm => {
                let udf = wasm(&script, self.container.data_dir());
                runtime::run_wasm_udf(&udf, args, &self.limits)
            }
        };
        result.map_err(|failure| failure.error.to_string())
    }
}

/// The write a trigger runs around.
enum Write<'a> {
    Create(Value),
    Upsert(Value),
    Replace(&'a str, Value),
    Delete(&'a str),
}

impl Write<'_> {
    /// The document being written; `None` for a delete.
    fn body(&self) -> Option<&Value> {
        match self {
            Write::Create(doc) | Write::Upsert(doc) | Write::Replace(_, doc) => Some(doc),
            Write::Delete(_) => None,
        }
    }

    /// Takes the document out (`null` for a delete), for a pre-trigger.
    fn take_body(&mut self) -> Value {
        match self {
            Write::Create(doc) | Write::Upsert(doc) | Write::Replace(_, doc) => std::mem::take(doc),
            Write::Delete(_) => Value::Null,
        }
    }

    /// Puts a pre-trigger's document back (ignored for a delete).
    fn set_body(&mut self, body: Value) {
        if let Write::Create(doc) | Write::Upsert(doc) | Write::Replace(_, doc) = self {
            *doc = body;
        }
    }

    fn operation(&self) -> TriggerOperation {
        match self {
            Write::Create(_) => TriggerOperation::Create,
            Write::Upsert(_) => TriggerOperation::Upsert,
            Write::Replace(..) => TriggerOperation::Replace,
            Write::Delete(_) => TriggerOperation::Delete,
        }
    }
}

/// Looks up the (at most one) trigger of `trigger_type` named in `ids` and
/// checks that it accepts `operation`.
fn trigger(
    container: &Container,
    ids: &[String],
    trigger_type: TriggerType,
    operation: TriggerOperation,
) -> Result<Option<Script>, engine::Error> {
    let id = match ids {
        [] => return Ok(None),
        [id] => id,
        _ => {
            return Err(engine::Error::BadRequest(format!(
                "at most one {trigger_type}-trigger may run per operation, not {} ({})",
                ids.len(),
                ids.join(", ")
            )));
        }
    };
    let script = container
        .read_script(ScriptKind::Trigger, id)
        .map_err(|e| match e {
            engine::Error::ScriptNotFound { .. } => engine::Error::BadRequest(e.to_string()),
            other => other,
        })?;
    if script.trigger_type != Some(trigger_type) {
        return Err(engine::Error::BadRequest(format!(
            "trigger {id:?} is a {}-trigger and cannot run as a {trigger_type}-trigger",
            script
                .trigger_type
                .map_or("?".to_owned(), |t| t.to_string())
        )));
    }
    if !script
        .trigger_operation
        .is_some_and(|o| o.accepts(operation))
    {
        return Err(engine::Error::BadRequest(format!(
            "trigger {id:?} is declared for {} operations and cannot run on a {operation}",
            script
                .trigger_operation
                .map_or("?".to_owned(), |o| o.to_string())
        )));
    }
    Ok(Some(script))
}

fn write_with_triggers(
    container: &Container,
    partition_key: PartitionKey,
    write: Write<'_>,
    options: &WriteOptions,
) -> Result<ItemResponse, CallError> {
    let started = std::time::Instant::now();
    let operation = write.operation();
    let pre = trigger(
        container,
        &options.pre_triggers,
        TriggerType::Pre,
        operation,
    )?;
    let post = trigger(
        container,
        &options.post_triggers,
        TriggerType::Post,
        operation,
    )?;
    let default_limits = Limits::default();
    let limits = options.limits.as_ref().unwrap_or(&default_limits);
    let if_match = options.if_match.clone().map(ItemOptions::if_match);
    let mut logs = String::new();
    let mut stats = CallStatistics::default();
    let mut txn = container.begin(partition_key)?;
    txn.set_udfs(Rc::new(ContainerUdfs::new(container, limits)));

    // The pre-trigger gets the body being written (moved, not copied) and
    // hands back what is to be written instead.
    let mut write = write;
    if let Some(pre) = pre {
        let request_body = write.take_body();
        let invocation = Invocation::PreTrigger {
            request_body,
            operation,
        };
        let changed = run(
            &pre,
            container.data_dir(),
            invocation,
            &mut txn,
            limits,
            &mut logs,
            &mut stats,
        )?;
        write.set_body(changed.unwrap_or(Value::Null));
    }
    // Only a post-trigger needs the request body after the write.
    let request_body = if post.is_some() {
        write.body().cloned().unwrap_or(Value::Null)
    } else {
        Value::Null
    };

    let written: Option<Document> = match write {
        Write::Create(doc) => Some(txn.create_item(doc)?),
        Write::Upsert(doc) => Some(txn.upsert_item(doc, if_match.as_ref())?),
        Write::Replace(id, doc) => Some(txn.replace_item(id, doc, if_match.as_ref())?),
        Write::Delete(id) => {
            txn.delete_item(id, if_match.as_ref())?;
            None
        }
    };
    stats.docs_written += 1;
    stats.bytes_written += written
        .as_ref()
        .and_then(|doc| txn.document_size(doc.id()))
        .unwrap_or(0) as u64;
    let mut resource = written.map(Document::into_value);

    if let Some(post) = post {
        let is_delete = resource.is_none();
        let invocation = Invocation::PostTrigger {
            request_body,
            response_body: resource.take().unwrap_or(Value::Null),
            operation,
        };
        // The runtime hands the (possibly changed) response body back.
        let response = run(
            &post,
            container.data_dir(),
            invocation,
            &mut txn,
            limits,
            &mut logs,
            &mut stats,
        )?;
        resource = if is_delete { None } else { response };
    }
    txn.commit()?;
    stats.wall_time = started.elapsed();
    Ok(ItemResponse {
        resource,
        logs,
        stats,
    })
}

impl Scripts for Container {
    fn create_checked_script(&self, props: ScriptProperties) -> Result<Script, engine::Error> {
        self.create_script(checked(self, props)?)
    }

    fn replace_checked_script(&self, props: ScriptProperties) -> Result<Script, engine::Error> {
        self.replace_script(checked(self, props)?)
    }

    fn run_query_with(
        &self,
        sql: &str,
        params: &Params,
        options: &QueryItemsOptions,
        limits: &Limits,
    ) -> Result<QueryPage, engine::Error> {
        let udfs = ContainerUdfs::new(self, limits);
        self.query_items_with_udfs(sql, params, options, Some(&udfs))
    }

    fn execute_stored_procedure_with(
        &self,
        id: &str,
        partition_key: impl Into<PartitionKey>,
        params: Vec<Value>,
        limits: &Limits,
    ) -> Result<ProcedureResponse, CallError> {
        let started = std::time::Instant::now();
        let script = self.read_script(ScriptKind::StoredProcedure, id)?;
        let mut txn = self.begin(partition_key)?;
        attach_udfs(self, &mut txn, limits);
        let mut response = run_procedure(&script, self.data_dir(), &mut txn, params, limits)?;
        txn.commit()?;
        response.stats.wall_time = started.elapsed();
        Ok(response)
    }

    fn create_item_with(
        &self,
        partition_key: impl Into<PartitionKey>,
        doc: Value,
        options: &WriteOptions,
    ) -> Result<ItemResponse, CallError> {
        write_with_triggers(self, partition_key.into(), Write::Create(doc), options)
    }

    fn upsert_item_with(
        &self,
        partition_key: impl Into<PartitionKey>,
        doc: Value,
        options: &WriteOptions,
    ) -> Result<ItemResponse, CallError> {
        write_with_triggers(self, partition_key.into(), Write::Upsert(doc), options)
    }

    fn replace_item_with(
        &self,
        partition_key: impl Into<PartitionKey>,
        id: &str,
        doc: Value,
        options: &WriteOptions,
    ) -> Result<ItemResponse, CallError> {
        write_with_triggers(self, partition_key.into(), Write::Replace(id, doc), options)
    }

    fn delete_item_with(
        &self,
        partition_key: impl Into<PartitionKey>,
        id: &str,
        options: &WriteOptions,
    ) -> Result<ItemResponse, CallError> {
        write_with_triggers(self, partition_key.into(), Write::Delete(id), options)
    }
}
