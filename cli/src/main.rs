//! The `partita` command line: JSON in, JSON out.
//!
//! Every command opens the database (`--data DIR`, default `./partita-data`,
//! or `--in-memory`), does one thing and prints its response as JSON on
//! stdout. A failure prints `{"status": …, "substatus": …, "message": …}` on
//! stderr and exits with status 1 (2 for usage errors).
//!
//! ```text
//! partita container create posts --pk /postId
//! partita item create posts --pk p1 --body '{"id":"p1","postId":"p1","commentCount":0}'
//! partita item read posts --pk p1 --id p1
//! partita query posts 'SELECT * FROM c WHERE c.commentCount > @n' --param n=0
//! partita changes posts --from-lsn 0
//! echo '["item","read","posts","--pk","p1","--id","p1"]' | partita batch
//! partita demo
//! partita fuzz posts createComment --pk p1 --params '["$pk", {"text": "hi"}]' --invariant SQL --expect '[0]'
//! ```
//!
//! Every response carries its `requestCharge` (see `partita::charge`).

mod batch;
mod demo;
mod fuzz;
mod serve;

/// mimalloc, not the system allocator (see `partita::MiMalloc`). Library
/// users choose their own.
#[global_allocator]
static ALLOCATOR: partita::MiMalloc = partita::MiMalloc;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Args, Parser, Subcommand};
use partita::charge::Work;
use partita::{
    Container, ContainerProperties, Database, EngineError, Error, ItemResponse, Limits, Lsn,
    PartitionKey, QueryOptions, Script, ScriptKind, ScriptLanguage, ScriptProperties, Statistics,
    TriggerOperation, TriggerType, WorkerOptions, WorkerPool, WriteOptions,
};
use serde_json::{Map, Value, json};

#[derive(Parser)]
#[command(
    name = "partita",
    version,
    about = "Partitioned, transactional JSON documents with stored procedures"
)]
struct Cli {
    /// Data directory of the durable database.
    #[arg(long, global = true, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Use a throwaway in-memory database instead of a data directory.
    #[arg(long, global = true, conflicts_with = "data")]
    in_memory: bool,
    /// Run JavaScript procedures, triggers and UDFs in worker processes
    /// (this binary, under an address-space limit and a hard wall clock)
    /// instead of in this process: slower, but a script that exhausts
    /// memory or the native stack fails its call instead of the process.
    #[arg(long, global = true)]
    isolate_scripts: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create or list containers.
    #[command(subcommand, after_help = CONTAINER_EXAMPLES)]
    Container(ContainerCommand),
    /// Point operations on documents.
    #[command(subcommand, after_help = ITEM_EXAMPLES)]
    Item(ItemCommand),
    /// Run a Cosmos SQL query.
    #[command(after_help = "Example: partita query posts 'SELECT VALUE COUNT(1) FROM c' --pk p1")]
    Query {
        /// The container.
        container: String,
        /// The SQL text.
        sql: String,
        #[command(flatten)]
        pk: OptionalPk,
        /// A parameter as NAME=JSON (the @ is optional); repeatable.
        #[arg(long = "param", value_name = "NAME=JSON")]
        params: Vec<String>,
        /// The most items in the page.
        #[arg(long)]
        max_items: Option<usize>,
        /// The continuation token of the previous page.
        #[arg(long)]
        continuation: Option<String>,
    },
    /// Manage stored procedures.
    #[command(subcommand, after_help = SCRIPT_EXAMPLES)]
    Sproc(ScriptCommand),
    /// Manage triggers (`--type pre|post --operation all|create|replace|delete|upsert`).
    #[command(subcommand, after_help = SCRIPT_EXAMPLES)]
    Trigger(ScriptCommand),
    /// Manage user-defined functions.
    #[command(subcommand, after_help = SCRIPT_EXAMPLES)]
    Udf(ScriptCommand),
    /// Read a container's change feed.
    #[command(after_help = "Example: partita changes posts --from-lsn 0 --max-items 100")]
    Changes {
        /// The container.
        container: String,
        /// Changes after this LSN (0: from the beginning).
        #[arg(long, default_value_t = 0)]
        from_lsn: u64,
        /// The most changes (whole transactions are never split).
        #[arg(long, default_value_t = 1000)]
        max_items: usize,
    },
    /// Run many commands in one process: each line of stdin is a JSON array
    /// of the arguments that would follow `partita`; each prints one line,
    /// `{"ok":true,"response":…}` or `{"ok":false,"error":…}`.
    #[command(after_help = batch::EXAMPLE)]
    Batch,
    /// Run the blog workload in its models V1, V2, V3 and print the table of
    /// latencies and request charges next to the published Cosmos DB figures.
    #[command(
        after_help = "Runs in memory unless --data DIR is given (then DIR/v1, DIR/v2, DIR/v3).\nExample: partita demo --users 1000 --json > demo.json"
    )]
    Demo(demo::DemoArgs),
    /// Prove a stored procedure atomic: call it thousands of times with
    /// injected faults and check an invariant (see docs/fuzzing.md).
    Fuzz(fuzz::FuzzArgs),
    /// Serve Cosmos DB's REST (gateway) protocol, for the official SDKs.
    #[command(after_help = serve::EXAMPLE)]
    Serve(serve::ServeArgs),
}

#[derive(Subcommand)]
enum ContainerCommand {
    /// Create a container.
    #[command(after_help = "Example: partita container create posts --pk /postId")]
    Create {
        /// The container id.
        name: String,
        /// The partition-key path.
        #[arg(long)]
        pk: String,
        /// Physical partitions to hash logical partitions onto.
        #[arg(long, default_value_t = 4)]
        physical_partitions: u32,
    },
    /// List containers.
    #[command(after_help = "Example: partita container list")]
    List,
}

const CONTAINER_EXAMPLES: &str = "Examples:
  partita container create posts --pk /postId --physical-partitions 8
  partita container list";

const ITEM_EXAMPLES: &str = "Examples:
  partita item create posts --pk p1 --body '{\"id\":\"p1\",\"postId\":\"p1\"}'
  partita item read posts --pk p1 --id p1
  partita item delete posts --pk p1 --id p1";

const SCRIPT_EXAMPLES: &str = "Examples:
  partita sproc create posts createComment sprocs/samples/js/createComment.js
  partita sproc exec posts createComment --pk p1 --params '[\"p1\", {\"text\": \"hi\"}]'
  partita trigger create feed truncateFeed sprocs/samples/js/truncateFeed.js --type post --operation all
  partita udf create posts tax tax.js
  partita udf list posts";

/// The partition key of a request: `--pk` (a string), `--pk-json` (any JSON
/// key value) or `--pk-none` (documents without the key property).
#[derive(Args)]
#[group(required = true, multiple = false)]
struct Pk {
    /// The partition-key value, as a string.
    #[arg(long)]
    pk: Option<String>,
    /// The partition-key value as JSON (a number, boolean, null or string).
    #[arg(long, value_name = "JSON")]
    pk_json: Option<String>,
    /// The partition of documents that lack the key property.
    #[arg(long)]
    pk_none: bool,
}

/// Like [`Pk`], but optional (queries fan out without one).
#[derive(Args)]
#[group(required = false, multiple = false)]
struct OptionalPk {
    /// Run in the logical partition with this string key.
    #[arg(long)]
    pk: Option<String>,
    /// Run in the logical partition with this JSON key.
    #[arg(long, value_name = "JSON")]
    pk_json: Option<String>,
    /// Run in the partition of documents that lack the key property.
    #[arg(long)]
    pk_none: bool,
}

fn partition_key(
    pk: Option<String>,
    pk_json: Option<String>,
    pk_none: bool,
) -> Result<Option<PartitionKey>, Error> {
    Ok(match (pk, pk_json) {
        (Some(s), _) => Some(PartitionKey::String(s)),
        (None, Some(text)) => {
            Some(PartitionKey::parse(&text).map_err(|e| EngineError::BadRequest(e.to_string()))?)
        }
        (None, None) if pk_none => Some(PartitionKey::None),
        (None, None) => None,
    })
}

impl Pk {
    fn key(self) -> Result<PartitionKey, Error> {
        partition_key(self.pk, self.pk_json, self.pk_none)
            .map(|k| k.expect("clap requires one of --pk, --pk-json, --pk-none"))
    }
}

#[derive(Subcommand)]
enum ScriptCommand {
    /// Store a new script from a file (`.js`, `.wasm` or `.wat`).
    #[command(
        after_help = "Example: partita sproc create posts createComment sprocs/samples/js/createComment.js\n         partita sproc create posts createCommentWasm sprocs/samples/wat/createComment.wat"
    )]
    Create(ScriptArgs),
    /// Replace a script; the next call uses the new version.
    #[command(
        after_help = "Example: partita sproc replace posts createComment sprocs/samples/js/createComment.js"
    )]
    Replace(ScriptArgs),
    /// Delete a script.
    #[command(after_help = "Example: partita trigger delete feed truncateFeed")]
    Delete {
        /// The container.
        container: String,
        /// The script id.
        id: String,
    },
    /// Show a script.
    #[command(after_help = "Example: partita sproc read posts createComment")]
    Read {
        /// The container.
        container: String,
        /// The script id.
        id: String,
    },
    /// List a container's scripts of this kind.
    #[command(after_help = "Example: partita udf list posts")]
    List {
        /// The container.
        container: String,
    },
    /// Execute a stored procedure in one logical partition (sproc only).
    #[command(
        after_help = "Example: partita sproc exec posts createComment --pk p1 --params '[\"p1\", {\"text\": \"hi\"}]'"
    )]
    Exec {
        /// The container.
        container: String,
        /// The procedure id.
        id: String,
        #[command(flatten)]
        pk: Pk,
        /// The parameters, as a JSON array.
        #[arg(long)]
        params: Option<String>,
    },
}

#[derive(Args)]
struct ScriptArgs {
    /// The container.
    container: String,
    /// The script id.
    id: String,
    /// The script file: `.js` (JavaScript), `.wasm` or `.wat` (a
    /// WebAssembly module of the `partita_v1` ABI, checked and compiled at
    /// upload).
    file: PathBuf,
    /// Triggers only: `pre` or `post`.
    #[arg(long = "type")]
    trigger_type: Option<TriggerType>,
    /// Triggers only: `all`, `create`, `replace`, `delete` or `upsert`.
    #[arg(long)]
    operation: Option<TriggerOperation>,
}

#[derive(Subcommand)]
enum ItemCommand {
    /// Create a document.
    #[command(
        after_help = "Example: partita item create posts --pk p1 --body '{\"id\":\"p1\",\"postId\":\"p1\"}'"
    )]
    Create(WriteArgs),
    /// Create or replace a document.
    #[command(
        after_help = "Example: partita item upsert feed --pk post --post-trigger truncateFeed --body '{\"id\":\"x\",\"type\":\"post\"}'"
    )]
    Upsert(WriteArgs),
    /// Replace a document (its id is taken from the body).
    #[command(
        after_help = "Example: partita item replace posts --pk p1 --if-match '\"00000001-0000000000000001\"' --body '{\"id\":\"p1\",\"postId\":\"p1\"}'"
    )]
    Replace(WriteArgs),
    /// Read a document.
    #[command(after_help = "Example: partita item read posts --pk p1 --id p1")]
    Read {
        /// The container.
        container: String,
        #[command(flatten)]
        pk: Pk,
        /// The document id.
        #[arg(long)]
        id: String,
    },
    /// Delete a document.
    #[command(after_help = "Example: partita item delete posts --pk p1 --id c1")]
    Delete {
        /// The container.
        container: String,
        #[command(flatten)]
        pk: Pk,
        /// The document id.
        #[arg(long)]
        id: String,
        /// Only if the document's etag is this.
        #[arg(long)]
        if_match: Option<String>,
        #[command(flatten)]
        triggers: TriggerArgs,
    },
}

#[derive(Args)]
struct WriteArgs {
    /// The container.
    container: String,
    #[command(flatten)]
    pk: Pk,
    /// The document, as JSON.
    #[arg(long)]
    body: String,
    /// Only if the document's etag is this (replace, upsert).
    #[arg(long)]
    if_match: Option<String>,
    #[command(flatten)]
    triggers: TriggerArgs,
}

/// The triggers a write runs, in its transaction.
#[derive(Args)]
struct TriggerArgs {
    /// A pre-trigger to run before the write.
    #[arg(long)]
    pre_trigger: Option<String>,
    /// A post-trigger to run after the write.
    #[arg(long)]
    post_trigger: Option<String>,
}

impl TriggerArgs {
    fn options(self, if_match: Option<String>, limits: &Limits) -> WriteOptions {
        WriteOptions {
            if_match,
            pre_triggers: self.pre_trigger.into_iter().collect(),
            post_triggers: self.post_trigger.into_iter().collect(),
            limits: Some(limits.clone()),
        }
    }
}

/// The bounds of every script this process runs: the defaults, in worker
/// processes of this binary with `--isolate-scripts`.
fn script_limits(isolate: bool) -> anyhow::Result<Limits> {
    let mut limits = Limits::default();
    if isolate {
        let program = std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("--isolate-scripts: cannot find this binary: {e}"))?;
        limits.workers = Some(WorkerPool::new(WorkerOptions::new(
            program,
            [SCRIPT_WORKER],
        )));
    }
    Ok(limits)
}

/// The hidden first argument that makes this binary a script worker.
const SCRIPT_WORKER: &str = "script-worker";

fn write_args(
    db: &Database,
    args: WriteArgs,
    limits: &Limits,
) -> anyhow::Result<(Container, PartitionKey, Value, WriteOptions)> {
    let container = db.container(&args.container)?;
    let body = parse_json("--body", &args.body)?;
    Ok((
        container,
        args.pk.key()?,
        body,
        args.triggers.options(args.if_match, limits),
    ))
}

fn item_json(response: ItemResponse) -> Value {
    let charge = response.request_charge();
    let mut res = json!({
        "resource": response.resource.map(partita::Document::into_value),
        "requestCharge": charge,
        "stats": stats_json(&response.stats),
    });
    if !response.logs.is_empty() {
        res["logs"] = json!(response.logs);
    }
    res
}

fn stats_json(stats: &Statistics) -> Value {
    json!({
        "docs_read": stats.docs_read,
        "docs_written": stats.docs_written,
        "bytes_read": stats.bytes_read,
        "bytes_written": stats.bytes_written,
        "instructions": stats.instructions,
        "scripts_run": stats.scripts_run,
        "fuel": stats.fuel,
        "wall_time_us": stats.wall_time.as_micros() as u64,
    })
}

fn main() -> ExitCode {
    // Started by `--isolate-scripts` (runtime::WorkerPool): serve script
    // calls on stdin/stdout until the parent closes stdin.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == SCRIPT_WORKER)
    {
        partita::worker_main();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err)
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            err.exit()
        }
        Err(err) => {
            // Usage errors are JSON too, with clap's explanation as the message.
            let _ = writeln!(std::io::stderr(), "{}", usage_error(&err));
            return ExitCode::from(2);
        }
    };
    if cli.isolate_scripts && matches!(cli.command, Command::Demo(_) | Command::Fuzz(_)) {
        let _ = writeln!(
            std::io::stderr(),
            "{}",
            json!({"status": 400, "substatus": 0, "message": "--isolate-scripts applies to sproc exec, item writes, query, batch and serve; demo and fuzz run scripts in process"})
        );
        return ExitCode::from(2);
    }
    if let Command::Serve(args) = cli.command {
        let db = script_limits(cli.isolate_scripts)
            .and_then(|limits| Ok((open(cli.data, cli.in_memory)?, limits)));
        return serve::main(db, &args);
    }
    if let Command::Batch = cli.command {
        let opened = script_limits(cli.isolate_scripts)
            .and_then(|limits| Ok((open(cli.data, cli.in_memory)?, limits)));
        return match opened {
            Ok((db, limits)) => {
                let input = std::io::stdin().lock();
                let mut output = std::io::stdout().lock();
                // A closed stdout ends the batch; there is nobody to tell.
                let _ = batch::run(input, &mut output, |args| run_line(&db, args, &limits));
                ExitCode::SUCCESS
            }
            Err(err) => {
                let _ = writeln!(std::io::stderr(), "{}", error_json(&err));
                ExitCode::FAILURE
            }
        };
    }
    if let Command::Fuzz(args) = &cli.command {
        return fuzz::main(cli.data, cli.in_memory, args);
    }
    // The demo prints its own table; every other command prints one JSON value.
    let outcome = match &cli.command {
        Command::Demo(args) => {
            let data = if cli.in_memory {
                None
            } else {
                cli.data.as_deref()
            };
            demo::run(data, args).map(|()| None)
        }
        _ => run(cli).map(Some),
    };
    match outcome {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(response)) => {
            let text =
                serde_json::to_string_pretty(&response).unwrap_or_else(|_| response.to_string());
            // A closed pipe (`partita … | head`) is not an error worth a panic.
            let _ = writeln!(std::io::stdout(), "{text}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "{}", error_json(&err));
            ExitCode::FAILURE
        }
    }
}

/// A usage error as the JSON error shape, with clap's explanation.
fn usage_error(err: &clap::Error) -> Value {
    json!({"status": 400, "substatus": 0, "message": err.to_string().trim()})
}

/// An error as `{"status", "substatus", "message"}` (plus `logs` when a
/// script logged something before failing).
fn error_json(err: &anyhow::Error) -> Value {
    let mut report = match (
        err.downcast_ref::<EngineError>(),
        err.downcast_ref::<Error>(),
    ) {
        (Some(e), _) => {
            json!({"status": e.status(), "substatus": 0, "message": e.to_string()})
        }
        (_, Some(e)) => json!({
            "status": e.status(),
            "substatus": e.substatus().unwrap_or(0),
            "message": e.to_string(),
        }),
        _ => json!({"status": 400, "substatus": 0, "message": format!("{err:#}")}),
    };
    if let Some(logs) = err
        .downcast_ref::<Error>()
        .map(Error::logs)
        .filter(|l| !l.is_empty())
    {
        report["logs"] = json!(logs);
    }
    report
}

/// One line of `partita batch`: the arguments after `partita`, run on the
/// batch's database.
fn run_line(db: &Database, args: Vec<String>, limits: &Limits) -> Result<Value, Value> {
    let cli = match Cli::try_parse_from(std::iter::once("partita".to_owned()).chain(args)) {
        Ok(cli) => cli,
        Err(err)
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            return Ok(json!({"help": err.to_string()}));
        }
        Err(err) => return Err(usage_error(&err)),
    };
    let refuse = |message: &str| Err(json!({"status": 400, "substatus": 0, "message": message}));
    if cli.data.is_some() || cli.in_memory {
        return refuse(
            "--data and --in-memory choose the database of the whole batch (partita --data DIR batch), not of one line",
        );
    }
    if cli.isolate_scripts {
        return refuse(
            "--isolate-scripts applies to the whole batch (partita --isolate-scripts batch), not to one line",
        );
    }
    if standalone(&cli.command) {
        return refuse("batch, demo and serve cannot run inside a batch");
    }
    execute(db, cli.command, limits).map_err(|e| error_json(&e))
}

/// Whether a command runs as its own process (never inside a batch).
fn standalone(command: &Command) -> bool {
    matches!(
        command,
        Command::Batch | Command::Demo(_) | Command::Serve(_)
    )
}

fn open(cli_data: Option<PathBuf>, in_memory: bool) -> anyhow::Result<Database> {
    if in_memory {
        return Ok(Database::in_memory());
    }
    Ok(Database::open(
        cli_data.unwrap_or_else(|| PathBuf::from("partita-data")),
    )?)
}

fn run(cli: Cli) -> anyhow::Result<Value> {
    let limits = script_limits(cli.isolate_scripts)?;
    let db = open(cli.data, cli.in_memory)?;
    execute(&db, cli.command, &limits)
}

/// Runs one command (not `demo`, not `batch`) on an open database.
fn execute(db: &Database, command: Command, limits: &Limits) -> anyhow::Result<Value> {
    Ok(match command {
        Command::Demo(_) | Command::Batch | Command::Fuzz(_) => {
            return Err(EngineError::BadRequest(
                "demo, batch and fuzz open their own database".to_owned(),
            )
            .into());
        }
        Command::Serve(_) => {
            return Err(EngineError::BadRequest("serve opens its own database".to_owned()).into());
        }
        Command::Container(ContainerCommand::Create {
            name,
            pk,
            physical_partitions,
        }) => {
            let mut props = ContainerProperties::new(name, pk);
            props.physical_partitions = physical_partitions;
            let container = db.create_container_with(props)?;
            charged(container_json(&container.properties()), METADATA_CHARGE)
        }
        Command::Container(ContainerCommand::List) => {
            let containers: Vec<Value> = db.containers().iter().map(container_json).collect();
            json!({
                "containers": containers,
                "count": containers.len(),
                "requestCharge": METADATA_CHARGE,
            })
        }
        Command::Item(ItemCommand::Create(args)) => {
            let (container, pk, body, options) = write_args(db, args, limits)?;
            item_json(container.create_item(pk, body, Some(&options))?)
        }
        Command::Item(ItemCommand::Upsert(args)) => {
            let (container, pk, body, options) = write_args(db, args, limits)?;
            item_json(container.upsert_item(pk, body, Some(&options))?)
        }
        Command::Item(ItemCommand::Replace(args)) => {
            let (container, pk, body, options) = write_args(db, args, limits)?;
            let id = body
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| {
                    EngineError::BadRequest(
                        "--body must be a JSON object with a string \"id\"".to_owned(),
                    )
                })?;
            item_json(container.replace_item(pk, &id, body, Some(&options))?)
        }
        Command::Item(ItemCommand::Read { container, pk, id }) => {
            let doc = db.container(&container)?.read_item(pk.key()?, &id)?;
            let size = doc.to_string().len() as u64;
            json!({
                "resource": doc.into_value(),
                "requestCharge": Work::point_read(size).request_charge(),
                "stats": {"docs_read": 1, "bytes_read": size},
            })
        }
        Command::Item(ItemCommand::Delete {
            container,
            pk,
            id,
            if_match,
            triggers,
        }) => {
            let options = triggers.options(if_match, limits);
            item_json(
                db.container(&container)?
                    .delete_item(pk.key()?, &id, Some(&options))?,
            )
        }
        Command::Sproc(ScriptCommand::Exec {
            container,
            id,
            pk,
            params,
        }) => {
            let params = match params {
                None => Vec::new(),
                Some(text) => match parse_json("--params", &text)? {
                    Value::Array(items) => items,
                    other => {
                        return Err(EngineError::BadRequest(format!(
                            "--params must be a JSON array of the procedure's parameters, not {other}"
                        ))
                        .into());
                    }
                },
            };
            let response = db.container(&container)?.execute_stored_procedure(
                &id,
                pk.key()?,
                params,
                Some(&partita::ProcedureOptions {
                    limits: Some(limits.clone()),
                }),
            )?;
            json!({
                "body": response.body,
                "logs": response.logs,
                "requestCharge": response.request_charge(),
                "stats": stats_json(&response.stats),
            })
        }
        Command::Query {
            container,
            sql,
            pk,
            params,
            max_items,
            continuation,
        } => {
            let options = QueryOptions {
                partition_key: partition_key(pk.pk, pk.pk_json, pk.pk_none)?,
                max_item_count: max_items,
                continuation,
                limits: Some(limits.clone()),
            };
            let page =
                db.container(&container)?
                    .query_items(&sql, &parse_params(&params)?, &options)?;
            json!({
                "items": page.items,
                "continuation": page.continuation,
                "requestCharge": Work::query(&page.stats).request_charge(),
                "stats": {
                    "docs_scanned": page.stats.docs_scanned,
                    "docs_returned": page.stats.docs_returned,
                    "bytes_read": page.stats.bytes_read,
                },
            })
        }
        Command::Sproc(command) => script_command(db, ScriptKind::StoredProcedure, command)?,
        Command::Trigger(command) => script_command(db, ScriptKind::Trigger, command)?,
        Command::Udf(command) => script_command(db, ScriptKind::UserDefinedFunction, command)?,
        Command::Changes {
            container,
            from_lsn,
            max_items,
        } => {
            let changes = db
                .container(&container)?
                .read_changes(Lsn(from_lsn), max_items)?;
            let last = changes.last().map_or(from_lsn, |c| c.lsn.0);
            // Charged like a query page that scanned and returned the changes.
            let bytes: u64 = changes
                .iter()
                .filter_map(|c| c.document.as_ref())
                .map(|d| d.to_string().len() as u64)
                .sum();
            let work = Work {
                query_pages: 1,
                docs_scanned: changes.len() as u64,
                bytes_scanned: bytes,
                items_returned: changes.len() as u64,
                ..Work::default()
            };
            let items: Vec<Value> = changes
                .into_iter()
                .map(|c| {
                    json!({
                        "lsn": c.lsn.0,
                        "partitionKey": c.partition_key.to_value(),
                        "id": c.id,
                        "operation": c.kind.as_str(),
                        "document": c.document.map(|d| d.into_value()),
                    })
                })
                .collect();
            json!({"changes": items, "lastLsn": last, "requestCharge": work.request_charge()})
        }
    })
}

/// The charge of container and script management (Cosmos DB's metadata
/// requests): the minimum.
const METADATA_CHARGE: f64 = partita::charge::MIN_CHARGE;

/// `value` with its `requestCharge`.
fn charged(mut value: Value, charge: f64) -> Value {
    value["requestCharge"] = json!(charge);
    value
}

fn script_command(
    db: &Database,
    kind: ScriptKind,
    command: ScriptCommand,
) -> anyhow::Result<Value> {
    script_response(db, kind, command).map(|value| charged(value, METADATA_CHARGE))
}

fn script_response(
    db: &Database,
    kind: ScriptKind,
    command: ScriptCommand,
) -> anyhow::Result<Value> {
    Ok(match command {
        ScriptCommand::Create(args) => script_json(
            &db.container(&args.container)?
                .create_script(script_props(kind, args)?)?,
        ),
        ScriptCommand::Replace(args) => script_json(
            &db.container(&args.container)?
                .replace_script(script_props(kind, args)?)?,
        ),
        ScriptCommand::Delete { container, id } => {
            db.container(&container)?.delete_script(kind, &id)?;
            json!({"deleted": id})
        }
        ScriptCommand::Read { container, id } => {
            script_json(&db.container(&container)?.read_script(kind, &id)?)
        }
        ScriptCommand::Exec { .. } => {
            return Err(EngineError::BadRequest(
                "only stored procedures can be executed; triggers run with writes (--pre-trigger, --post-trigger)"
                    .to_owned(),
            )
            .into());
        }
        ScriptCommand::List { container } => {
            let scripts: Vec<Value> = db
                .container(&container)?
                .list_scripts(kind)
                .iter()
                .map(script_json)
                .collect();
            json!({"scripts": scripts, "count": scripts.len()})
        }
    })
}

fn script_props(kind: ScriptKind, args: ScriptArgs) -> Result<ScriptProperties, Error> {
    let extension = args
        .file
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let language = match extension.as_str() {
        "js" => ScriptLanguage::JavaScript,
        "wasm" | "wat" => ScriptLanguage::Wasm,
        _ => {
            return Err(EngineError::BadRequest(format!(
                "{}: a script file is JavaScript (.js) or WebAssembly (.wasm, .wat)",
                args.file.display()
            ))
            .into());
        }
    };
    let body = std::fs::read(&args.file).map_err(|e| {
        EngineError::BadRequest(format!("cannot read {}: {e}", args.file.display()))
    })?;
    if kind != ScriptKind::Trigger && (args.trigger_type.is_some() || args.operation.is_some()) {
        return Err(EngineError::BadRequest(
            "--type and --operation apply to triggers only".to_owned(),
        )
        .into());
    }
    Ok(ScriptProperties {
        id: args.id,
        kind,
        language,
        body,
        trigger_type: args.trigger_type,
        trigger_operation: args.operation,
    })
}

fn script_json(script: &Script) -> Value {
    let mut res = json!({
        "id": script.id,
        "language": match script.language {
            ScriptLanguage::JavaScript => "javascript",
            ScriptLanguage::Wasm => "wasm",
        },
        "_version": script.version,
        "_ts": script.ts,
    });
    // A module is binary: its size stands in for the body.
    match script.language {
        ScriptLanguage::JavaScript => res["body"] = json!(String::from_utf8_lossy(&script.body)),
        ScriptLanguage::Wasm => res["bodySize"] = json!(script.body.len()),
    }
    if let (Some(t), Some(o)) = (script.trigger_type, script.trigger_operation) {
        res["triggerType"] = json!(t.to_string());
        res["triggerOperation"] = json!(o.to_string());
    }
    res
}

fn container_json(props: &ContainerProperties) -> Value {
    json!({
        "id": props.id,
        "partitionKey": {"paths": [props.partition_key_path], "kind": "Hash"},
        "physicalPartitions": props.physical_partitions,
    })
}

fn parse_json(what: &str, text: &str) -> Result<Value, Error> {
    serde_json::from_str(text)
        .map_err(|e| EngineError::BadRequest(format!("{what} is not valid JSON: {e}")).into())
}

/// `NAME=JSON` pairs into query parameters, `@` added when missing.
fn parse_params(pairs: &[String]) -> Result<Map<String, Value>, Error> {
    let mut params = Map::new();
    for pair in pairs {
        let (name, value) = pair.split_once('=').ok_or_else(|| {
            EngineError::BadRequest(format!("--param {pair:?} is not of the form NAME=JSON"))
        })?;
        let name = if name.starts_with('@') {
            name.to_owned()
        } else {
            format!("@{name}")
        };
        params.insert(name, parse_json(&format!("--param {pair:?}"), value)?);
    }
    Ok(params)
}
