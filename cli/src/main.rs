//! The `partita` command line: JSON in, JSON out.
//!
//! Every command opens the database (`--data DIR`, default `./partita-data`,
//! a `postgresql://` URL, or `--in-memory`), does one thing and prints its response as JSON on
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
//!
//! This file holds the command line's shape (clap) and the dispatch; each
//! command group has its file, which owns its arguments and runs them:
//! `container.rs`, `item.rs`, `query.rs`, `changes.rs`, `script.rs` (sproc,
//! trigger and udf), next to `batch.rs`, `serve.rs`, `fuzz.rs` and `demo/`.
//! `json.rs` and `pk.rs` hold what the groups share.

mod batch;
mod caps;
mod changes;
mod container;
mod demo;
mod fuzz;
mod item;
mod json;
mod pk;
mod query;
mod script;
mod serve;

/// mimalloc, not the system allocator (see `partita::MiMalloc`). Library
/// users choose their own.
#[global_allocator]
static ALLOCATOR: partita::MiMalloc = partita::MiMalloc;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Parser, Subcommand};
use partita::{Database, EngineError, Limits, Options, ScriptKind, WorkerOptions, WorkerPool};
use serde_json::{Value, json};

use json::{error_json, usage_error};

#[derive(Parser)]
#[command(
    name = "partita",
    version,
    about = "Partitioned, transactional JSON documents with stored procedures"
)]
struct Cli {
    /// Data directory of the durable database, or a PostgreSQL URL
    /// (`postgresql://user@host/db`) to store it there.
    #[arg(long, global = true, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Use a throwaway in-memory database instead of a data directory.
    #[arg(long, global = true, conflicts_with = "data")]
    in_memory: bool,
    /// How much memory the logical partitions kept in memory may take
    /// (`256MB`, `2GiB`, or bytes); the least recently used are evicted
    /// beyond it and read from the data directory again when needed.
    /// Default: a quarter of the machine's memory. Ignored in memory.
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size)]
    cache_size: Option<usize>,
    /// Run JavaScript procedures, triggers and UDFs in worker processes
    /// (this binary, under an address-space limit and a hard wall clock)
    /// instead of in this process: slower, but a script that exhausts
    /// memory or the native stack fails its call instead of the process.
    /// `serve` always does, unless given `--scripts-in-process`.
    #[arg(long, global = true)]
    isolate_scripts: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create or list containers.
    #[command(subcommand, after_help = container::EXAMPLES)]
    Container(container::ContainerCommand),
    /// Point operations on documents.
    #[command(subcommand, after_help = item::EXAMPLES)]
    Item(item::ItemCommand),
    /// Run a Cosmos SQL query.
    #[command(after_help = "Example: partita query posts 'SELECT VALUE COUNT(1) FROM c' --pk p1")]
    Query(query::QueryArgs),
    /// Manage stored procedures.
    #[command(subcommand, after_help = script::EXAMPLES)]
    Sproc(script::ScriptCommand),
    /// Manage triggers (`--type pre|post --operation all|create|replace|delete|upsert`).
    #[command(subcommand, after_help = script::EXAMPLES)]
    Trigger(script::ScriptCommand),
    /// Manage user-defined functions.
    #[command(subcommand, after_help = script::EXAMPLES)]
    Udf(script::ScriptCommand),
    /// Read a container's change feed.
    #[command(after_help = "Example: partita changes posts --from-lsn 0 --max-items 100")]
    Changes(changes::ChangesArgs),
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
        // The server runs untrusted scripts: in worker processes unless the
        // operator says they are trusted.
        let isolate = cli.isolate_scripts || !args.scripts_in_process;
        let db = script_limits(isolate)
            .and_then(|limits| Ok((open(cli.data, cli.in_memory, cli.cache_size)?, limits)));
        return serve::main(db, &args);
    }
    if let Command::Batch = cli.command {
        let opened = script_limits(cli.isolate_scripts)
            .and_then(|limits| Ok((open(cli.data, cli.in_memory, cli.cache_size)?, limits)));
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
            let store = if cli.in_memory {
                demo::Store::Memory
            } else if let Some(dir) = cli.data.as_deref() {
                demo::Store::Dir(dir, cli.cache_size)
            } else {
                demo::Store::Temporary(cli.cache_size.unwrap_or(demo::CACHE_BYTES))
            };
            demo::run(store, args).map(|()| None)
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
    if cli.data.is_some() || cli.in_memory || cli.cache_size.is_some() {
        return refuse(
            "--data, --in-memory and --cache-size choose the database of the whole batch (partita --data DIR batch), not of one line",
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

fn open(
    cli_data: Option<PathBuf>,
    in_memory: bool,
    cache_size: Option<usize>,
) -> anyhow::Result<Database> {
    if in_memory {
        return Ok(Database::in_memory());
    }
    let mut options = Options::default();
    if let Some(bytes) = cache_size {
        options.cache_bytes = bytes;
    }
    let data = cli_data.unwrap_or_else(|| PathBuf::from("partita-data"));
    if let Some(url) = data
        .to_str()
        .filter(|d| d.starts_with("postgresql://") || d.starts_with("postgres://"))
    {
        return Ok(Database::open_url(url, options)?);
    }
    Ok(Database::open_with(data, options)?)
}

/// A size in bytes: a number, optionally followed by a unit (`B`, `KB`,
/// `MB`, `GB`, `TB` in powers of 1,000; `KiB`, `MiB`, `GiB`, `TiB` in
/// powers of 1,024; case does not matter).
fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size (say 256MB, 2GiB or a number of bytes)"))?;
    let factor: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "tb" | "t" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB"
            ));
        }
    };
    let bytes = value * factor;
    if !bytes.is_finite() || bytes > usize::MAX as f64 {
        return Err(format!("{text:?} is too large"));
    }
    Ok(bytes as usize)
}

fn run(cli: Cli) -> anyhow::Result<Value> {
    let limits = script_limits(cli.isolate_scripts)?;
    let db = open(cli.data, cli.in_memory, cli.cache_size)?;
    execute(&db, cli.command, &limits)
}

/// Runs one command (not `demo`, not `batch`) on an open database.
fn execute(db: &Database, command: Command, limits: &Limits) -> anyhow::Result<Value> {
    match command {
        Command::Demo(_) | Command::Batch | Command::Fuzz(_) => Err(EngineError::BadRequest(
            "demo, batch and fuzz open their own database".to_owned(),
        )
        .into()),
        Command::Serve(_) => {
            Err(EngineError::BadRequest("serve opens its own database".to_owned()).into())
        }
        Command::Container(command) => container::run(db, command),
        Command::Item(command) => item::run(db, command, limits),
        Command::Query(args) => query::run(db, args, limits),
        Command::Sproc(command) => script::run(db, ScriptKind::StoredProcedure, command, limits),
        Command::Trigger(command) => script::run(db, ScriptKind::Trigger, command, limits),
        Command::Udf(command) => script::run(db, ScriptKind::UserDefinedFunction, command, limits),
        Command::Changes(args) => changes::run(db, args),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_and_without_units() {
        assert_eq!(parse_size("268435456"), Ok(268_435_456));
        assert_eq!(parse_size("256MB"), Ok(256_000_000));
        assert_eq!(parse_size("256 mib"), Ok(256 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("0"), Ok(0));
        assert!(
            parse_size("256 parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_size("MB").unwrap_err().contains("not a size"));
        assert!(parse_size("1e400").is_err());
    }
}
