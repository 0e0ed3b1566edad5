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
//! Every script call's transaction has a deadline: its scripts' wall-time
//! limits plus [`DEADLINE_GRACE`] after it begins. A script stuck in
//! process where the runtime cannot stop it (inside a native built-in) then
//! holds its logical partition only until the deadline: the next writer
//! takes the partition over and the stuck call, whenever it returns, fails
//! with 408 having committed nothing (see `engine::Txn`).
//!
//! Scripts are looked up once per run, right after its transaction began: a
//! script replaced meanwhile takes effect for the next request, and the
//! request finishes on the version it started with. Over a store other
//! nodes share, the begin takes the scripts another node changed, so a
//! call made after another node replaced a script runs the new version.
//!
//! Over a store other nodes share, another node may commit to the
//! partition while a call runs; the call's commit then writes nothing and
//! fails with 449, and the call runs again from its begin, up to
//! `engine::ATTEMPTS` times in all (`engine::Container::attempts`). The
//! run that lost is discarded whole (its logs, statistics and response),
//! and the next one sees the partition as the other node left it. A
//! procedure's parameters and a write's document are copied for each run
//! only over such a store (`Container::for_attempt`); elsewhere a call runs
//! once, on the values it was given.
//!
//! A script runs in the sandbox of its language: `run_js` for JavaScript,
//! `run_wasm` for a WebAssembly module (same response shape, statuses and
//! bounded execution; the statistics carry fuel instead of instructions).
//! The engine stores script bodies without looking inside, so WebAssembly
//! modules are checked at upload here: `Container::create_script`
//! and `Container::replace_script` compile `.wat` text to `.wasm`
//! bytes and refuse, with 400 naming the problem, a module that does not
//! validate, imports anything outside the `partita_v1` ABI, or lacks its
//! kind's entry point; the compiled module is cached in memory and its
//! precompiled artifact written under the data directory, so neither the
//! first call nor a restart compiles again. A module stored through the
//! engine's container (the layer beneath) is checked when it first runs
//! instead.
//!
//! JavaScript is compiled at upload too (`runtime::compile_js`, in a
//! throwaway context): a body that would not compile, nests deeper than the
//! runtime's bound or has a `{ __proto__: value }` literal is refused with
//! the 400 (substatus 65535) and the message its first call would fail
//! with, and nothing is stored. Bodies over 2 MB are left to the engine's
//! 413 before any compiler sees them.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use engine::query::{Params, Udf};
use engine::{
    Change, Container, Document, ItemOptions, PartitionKey, Patch, QueryItemsOptions, QueryPage,
    Script, ScriptKind, ScriptLanguage, ScriptProperties, TriggerOperation, TriggerType, Txn,
};
use runtime::{Invocation, Limits, WasmCache, WasmScript};
use serde_json::Value;

use crate::intercept::Intercepted;
use crate::recording::Recording;
use crate::{
    Error, ItemResponse, ProcedureOptions, ProcedureResponse, ScriptFailure, Statistics,
    WriteOptions,
};

/// How long past its scripts' wall-time limits a call's transaction keeps
/// its partition against other writers: the runtime notices its wall clock
/// only at host calls, and the call still has to reach its commit, on a
/// machine that may be loaded. Longer than the worker pool's kill grace
/// ([`runtime::KILL_GRACE`]), so an isolated call ends before its deadline.
pub(crate) const DEADLINE_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Begins the transaction of a call that runs `scripts` scripts, each
/// within `limits.wall_time`, with the deadline that bounds it.
fn begin_call(
    container: &Container,
    partition_key: PartitionKey,
    limits: &Limits,
    scripts: u32,
) -> Result<Txn, engine::Error> {
    let limit = limits
        .wall_time
        .saturating_mul(scripts)
        .saturating_add(DEADLINE_GRACE);
    container.begin_with_deadline(partition_key, limit)
}

/// The request's bounds, or the runtime's defaults when it gives none.
fn or_default(limits: Option<&Limits>) -> Cow<'_, Limits> {
    limits.map_or_else(|| Cow::Owned(Limits::default()), Cow::Borrowed)
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
pub(crate) fn checked(
    container: &Container,
    mut props: ScriptProperties,
) -> Result<ScriptProperties, Error> {
    if props.body.len() > engine::MAX_SCRIPT_SIZE {
        // The engine refuses it too (413); refused first, so that no
        // compiler sees it.
        return Ok(props);
    }
    if props.language == ScriptLanguage::JavaScript {
        // Not UTF-8: the engine refuses it (400).
        if let Ok(body) = std::str::from_utf8(&props.body) {
            runtime::compile_js(body).map_err(|error| {
                Error::Script(Box::new(ScriptFailure {
                    error,
                    logs: String::new(),
                    stats: Statistics::default(),
                    operation: None,
                }))
            })?;
        }
    }
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
    stats: &mut Statistics,
) -> Result<Option<Value>, Error> {
    check_nesting(&invocation)?;
    let before = txn.stats();
    let mut recording = Intercepted::new(txn, Recording::default());
    let result = match script.language {
        ScriptLanguage::JavaScript => {
            let source = runtime::Script {
                id: &script.id,
                version: script.version,
                body: javascript(script)?,
            };
            runtime::run_js(&source, invocation, &mut recording, limits)
        }
        ScriptLanguage::Wasm => {
            runtime::run_wasm(&wasm(script, data_dir), invocation, &mut recording, limits)
        }
    };
    let failed = recording.hooks.failed();
    let (output_logs, exec, outcome) = match result {
        Ok(output) => (output.logs, output.stats, Ok(output.body)),
        Err(failure) => (failure.logs, failure.stats, Err(failure.error)),
    };
    logs.push_str(&output_logs);
    // The collection's counters are cumulative over the transaction; the
    // runtime reports them as of the end of this script. The call's wall
    // time is measured by the caller, around every script.
    stats.add(Statistics {
        scripts_run: 1,
        wall_time: std::time::Duration::ZERO,
        ..exec.since(before)
    });
    outcome.map_err(|error| {
        // The failure came from that operation when it carries its status
        // (a rethrown error, or one no callback handled).
        let operation = failed.filter(|f| error.substatus() == Some(f.status));
        Error::Script(Box::new(ScriptFailure {
            error,
            logs: logs.clone(),
            stats: *stats,
            operation,
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
) -> Result<ProcedureResponse, Error> {
    let started = std::time::Instant::now();
    let mut logs = String::new();
    let mut stats = Statistics::default();
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
        writes: Vec::new(),
    })
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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

/// A write, as the facade's container receives it.
#[derive(Clone)]
pub(crate) enum Write<'a> {
    Create(Value),
    Upsert(Value),
    Replace(&'a str, Value),
    Delete(&'a str),
    /// Runs its triggers as a replace of the patched document.
    Patch(&'a str, &'a Patch),
}

impl Write<'_> {
    /// The document being written; `None` for a delete.
    fn body(&self) -> Option<&Value> {
        match self {
            Write::Create(doc) | Write::Upsert(doc) | Write::Replace(_, doc) => Some(doc),
            Write::Delete(_) | Write::Patch(..) => None,
        }
    }

    /// Takes the document out (`null` for a delete, whose triggers get the
    /// deleted document instead), for a pre-trigger.
    fn take_body(&mut self) -> Value {
        match self {
            Write::Create(doc) | Write::Upsert(doc) | Write::Replace(_, doc) => std::mem::take(doc),
            Write::Delete(_) | Write::Patch(..) => Value::Null,
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
            Write::Replace(..) | Write::Patch(..) => TriggerOperation::Replace,
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
) -> Result<ItemResponse, Error> {
    let started = std::time::Instant::now();
    let operation = write.operation();
    let limits = or_default(options.limits.as_ref());
    let limits = &*limits;
    let if_match = options.if_match.clone().map(ItemOptions::if_match);
    let scripts =
        u32::from(!options.pre_triggers.is_empty()) + u32::from(!options.post_triggers.is_empty());
    let mut write = Some(write);
    // A run whose commit another node beat (449) is discarded whole, and
    // the write and its triggers run again on the partition as it is now.
    let mut response = container.attempts(partition_key, |key| -> Result<_, Error> {
        let mut txn = begin_call(container, key, limits, scripts)?;
        txn.set_udfs(Rc::new(ContainerUdfs::new(container, limits)));
        // Looked up once the transaction began, which took any change
        // another node made to the container's scripts.
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
        let triggers = Triggers {
            pre: pre.as_ref(),
            post: post.as_ref(),
            operation,
            limits,
            if_match: if_match.as_ref(),
        };
        let response = triggers.run(container, &mut txn, container.for_attempt(&mut write))?;
        txn.commit()?;
        Ok(response)
    })?;
    response.stats.wall_time = started.elapsed();
    Ok(response)
}

/// The triggers of one write, and what they run with.
struct Triggers<'a> {
    pre: Option<&'a Script>,
    post: Option<&'a Script>,
    operation: TriggerOperation,
    limits: &'a Limits,
    if_match: Option<&'a ItemOptions>,
}

impl Triggers<'_> {
    /// Runs the pre-trigger, `write` and the post-trigger in `txn`, which
    /// the caller commits.
    fn run(
        &self,
        container: &Container,
        txn: &mut Txn,
        write: Write<'_>,
    ) -> Result<ItemResponse, Error> {
        let Triggers {
            pre,
            post,
            operation,
            limits,
            if_match,
        } = *self;
        let mut logs = String::new();
        let mut stats = Statistics::default();
        // What the triggers see of a delete or a replace, as on Cosmos DB: a
        // delete's request body is the document being deleted, and a
        // replace's carries the stored document's `_self` (Microsoft's
        // unique-constraint sample relies on it).
        // A patch's triggers see the patched document, as a replace's see
        // the new one.
        let mut write = match write {
            Write::Patch(id, patch) => Write::Replace(id, txn.patched(id, patch, if_match)?),
            other => other,
        };
        let deleted = match &mut write {
            Write::Delete(id) => Some(txn.read_item(id)?.into_value()),
            Write::Replace(id, Value::Object(body)) => {
                if let Some(link) = txn.read_item(id)?.get("_self") {
                    body.insert("_self".to_owned(), link.clone());
                }
                None
            }
            _ => None,
        };
        // The pre-trigger gets the body being written (moved, not copied) and
        // hands back what is to be written instead.
        if let Some(pre) = pre {
            let request_body = match &deleted {
                Some(doc) => doc.clone(),
                None => write.take_body(),
            };
            let invocation = Invocation::PreTrigger {
                request_body,
                operation,
            };
            let changed = run(
                pre,
                container.data_dir(),
                invocation,
                txn,
                limits,
                &mut logs,
                &mut stats,
            )?;
            write.set_body(changed.unwrap_or(Value::Null));
        }
        // Only a post-trigger needs the request body after the write.
        let request_body = if post.is_some() {
            deleted
                .or_else(|| write.body().cloned())
                .unwrap_or(Value::Null)
        } else {
            Value::Null
        };

        let written = apply(txn, write, if_match)?;
        stats.docs_written += 1;
        stats.bytes_written += written
            .as_ref()
            .and_then(|doc| txn.document_size(doc.id()))
            .unwrap_or(0) as u64;
        let mut resource = written;

        if let Some(post) = post {
            let is_delete = resource.is_none();
            let invocation = Invocation::PostTrigger {
                request_body,
                response_body: resource.take().map_or(Value::Null, Document::into_value),
                operation,
            };
            // The runtime hands the (possibly changed) response body back.
            let response = run(
                post,
                container.data_dir(),
                invocation,
                txn,
                limits,
                &mut logs,
                &mut stats,
            )?;
            resource = if is_delete {
                None
            } else {
                response.map(Document::new)
            };
        }
        Ok(ItemResponse {
            resource,
            logs,
            stats,
        })
    }
}

/// A write as a request makes it: with the triggers `options` name, or
/// straight in its own transaction when it names none.
pub(crate) fn write(
    container: &Container,
    partition_key: PartitionKey,
    write: Write<'_>,
    options: Option<&WriteOptions>,
) -> Result<ItemResponse, Error> {
    match options {
        Some(options) if !options.pre_triggers.is_empty() || !options.post_triggers.is_empty() => {
            write_with_triggers(container, partition_key, write, options)
        }
        _ => {
            let started = std::time::Instant::now();
            let if_match = options
                .and_then(|o| o.if_match.clone())
                .map(ItemOptions::if_match);
            let mut write = Some(write);
            let (resource, bytes_written) = container.transaction(partition_key, |txn| {
                let written = apply(txn, container.for_attempt(&mut write), if_match.as_ref())?;
                let size = written
                    .as_ref()
                    .and_then(|doc| txn.document_size(doc.id()))
                    .unwrap_or(0);
                Ok::<_, engine::Error>((written, size as u64))
            })?;
            Ok(ItemResponse {
                resource,
                logs: String::new(),
                stats: Statistics {
                    docs_written: 1,
                    bytes_written,
                    wall_time: started.elapsed(),
                    ..Statistics::default()
                },
            })
        }
    }
}

/// Applies `write` in `txn`; the stored document, `None` for a delete.
fn apply(
    txn: &mut Txn,
    write: Write<'_>,
    if_match: Option<&ItemOptions>,
) -> Result<Option<Document>, engine::Error> {
    Ok(match write {
        Write::Create(doc) => Some(txn.create_item(doc)?),
        Write::Upsert(doc) => Some(txn.upsert_item(doc, if_match)?),
        Write::Replace(id, doc) => Some(txn.replace_item(id, doc, if_match)?),
        Write::Delete(id) => {
            txn.delete_item(id, if_match)?;
            None
        }
        Write::Patch(id, patch) => Some(txn.patch_item(id, patch, if_match)?),
    })
}

/// Runs a query on `target` with the user-defined functions of `source`
/// (the same container, except when the fuzzer checks invariants on a
/// scratch copy of a partition).
pub(crate) fn query(
    source: &Container,
    target: &Container,
    sql: &str,
    params: &Params,
    options: &QueryItemsOptions,
    limits: Option<&Limits>,
) -> Result<QueryPage, engine::Error> {
    let limits = or_default(limits);
    let limits = &*limits;
    let udfs = ContainerUdfs::new(source, limits);
    target.query_items_with_udfs(sql, params, options, Some(&udfs))
}

/// Runs the stored procedure `id` in one logical partition and commits
/// what it did, or nothing. A run whose commit another node beat (449)
/// is discarded whole, its logs and statistics with it, and the procedure
/// runs again on the partition as it is now (see
/// [`engine::Container::attempts`]).
pub(crate) fn execute_procedure(
    container: &Container,
    id: &str,
    partition_key: PartitionKey,
    params: Vec<Value>,
    options: Option<&ProcedureOptions>,
) -> Result<ProcedureResponse, Error> {
    let started = std::time::Instant::now();
    let limits = or_default(options.and_then(|o| o.limits.as_ref()));
    let limits = &*limits;
    let record_writes = options.is_some_and(|o| o.record_writes);
    let mut params = Some(params);
    let mut response = container.attempts(partition_key, |key| -> Result<_, Error> {
        let mut txn = begin_call(container, key, limits, 1)?;
        // Looked up once the transaction began, which took any change
        // another node made to the container's scripts.
        let script = container.read_script(ScriptKind::StoredProcedure, id)?;
        attach_udfs(container, &mut txn, limits);
        let params = container.for_attempt(&mut params);
        let mut response = run_procedure(&script, container.data_dir(), &mut txn, params, limits)?;
        if !record_writes {
            txn.commit()?;
            return Ok(response);
        }
        let (writes, partition_key) = (txn.write_set(), txn.partition_key().clone());
        if let Some(lsn) = txn.commit()? {
            response.writes = writes
                .into_iter()
                .map(|(id, kind, document)| Change {
                    lsn,
                    partition_key: partition_key.clone(),
                    id: id.to_string(),
                    // A delete has no `_ts`: the clock after the commit.
                    ts: document.as_ref().map_or_else(unix_now, Document::ts),
                    kind,
                    document,
                })
                .collect();
        }
        Ok(response)
    })?;
    response.stats.wall_time = started.elapsed();
    Ok(response)
}
