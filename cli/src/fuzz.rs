//! `partita fuzz`: the command-line face of `partita::fuzz`.
//!
//! ```text
//! partita fuzz posts createComment --pk p1 --pk p2 \
//!     --params '["$pk", {"text": "hi"}]' \
//!     --invariant "SELECT VALUE SUM(c.type = 'post' ? c.commentCount : -1) FROM c" --expect '[0]' \
//!     --calls 2000 --seed 7 --concurrency 2
//! ```
//!
//! With `--batch` instead of a procedure, each call is a transactional batch
//! whose operations are the parameters (the SDKs' JSON), with a fault at
//! each operation and crashes at commit:
//!
//! ```text
//! partita fuzz posts --batch --pk p1 --params '[{"operationType": "Patch", "id": "$pk",
//!     "resourceBody": [{"op": "incr", "path": "/commentCount", "value": 1}]},
//!     {"operationType": "Create", "resourceBody": {"id": "$seed", "postId": "$pk"}}]' \
//!     --invariant "SELECT VALUE SUM(c.type = 'post' ? c.commentCount : -1) FROM c" --expect '[0]'
//! ```
//!
//! The container's partition-key path, the procedure and the container's
//! user-defined functions come from the database (`--data DIR`); the seed
//! documents from `--data-file` (JSON lines) or, without it, from the named
//! partitions of the container. The database itself is only read: the
//! calls run on a private copy. Prints the report as JSON on stdout and
//! exits 1 when it found a violation (0 otherwise); a setup error prints
//! `{"status", "substatus", "message"}` on stderr and exits 1 as well.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use partita::fuzz::{self, FuzzConfig, Invariant, params_from_templates};
use partita::{Database, PartitionKey};
use serde_json::{Value, json};

/// Arguments of `partita fuzz`.
#[derive(Args)]
#[command(
    after_help = "Parameters may contain \"$pk\" (replaced by the call's partition-key \
value) and \"$seed\" (a string unique per call). Exits 1 when a violation was found.\n\n\
Example: partita fuzz posts createComment --pk p1 --params '[\"$pk\", {\"text\": \"hi\"}]' \
--invariant \"SELECT VALUE SUM(c.type = 'post' ? c.commentCount : -1) FROM c\" --expect '[0]'"
)]
pub(crate) struct FuzzArgs {
    /// The container whose procedure to fuzz.
    container: String,
    /// The stored procedure.
    #[arg(required_unless_present = "batch")]
    procedure: Option<String>,
    /// Fuzz a transactional batch instead: the parameters are its
    /// operations (`{"operationType": "Create", "resourceBody": {...}}`).
    #[arg(long, conflicts_with = "procedure")]
    batch: bool,
    /// A logical partition to call in (a string key); repeatable.
    #[arg(long = "pk", value_name = "VALUE")]
    pks: Vec<String>,
    /// A logical partition as a JSON key value (number, boolean, null); repeatable.
    #[arg(long = "pk-json", value_name = "JSON")]
    pk_jsons: Vec<String>,
    /// Seed documents, one JSON object per line (default: the named
    /// partitions' current documents).
    #[arg(long, value_name = "DOCS.jsonl")]
    data_file: Option<PathBuf>,
    /// The parameters of every call, a JSON array.
    #[arg(
        long,
        value_name = "JSON-ARRAY",
        conflicts_with = "params_file",
        required_unless_present = "params_file"
    )]
    params: Option<String>,
    /// Parameter sets, one JSON array per line; each call picks one at random.
    #[arg(long, value_name = "PARAMS.jsonl")]
    params_file: Option<PathBuf>,
    /// A query run on the call's partition after every call.
    #[arg(long, value_name = "SQL")]
    invariant: String,
    /// The exact result the invariant query must return, a JSON array.
    #[arg(long, value_name = "JSON")]
    expect: String,
    /// How many calls.
    #[arg(long, default_value_t = 1000)]
    calls: u64,
    /// The seed (a report's reproduction names the seed to rerun with).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Threads calling at the same time.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Report the first violation without searching for a shorter reproduction.
    #[arg(long)]
    no_shrink: bool,
}

/// Runs `partita fuzz`; see the module docs for output and exit status.
pub(crate) fn main(data: Option<PathBuf>, in_memory: bool, args: &FuzzArgs) -> ExitCode {
    match run(data, in_memory, args) {
        Ok(report) => {
            let text = serde_json::to_string_pretty(&report.to_json())
                .unwrap_or_else(|_| report.to_json().to_string());
            let _ = writeln!(std::io::stdout(), "{text}");
            if report.violation.is_some() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(err) => {
            let status = err
                .downcast_ref::<partita::Error>()
                .map(partita::Error::status)
                .or_else(|| {
                    err.downcast_ref::<fuzz::FuzzError>()
                        .map(fuzz::FuzzError::status)
                })
                .unwrap_or(400);
            let _ = writeln!(
                std::io::stderr(),
                "{}",
                json!({"status": status, "substatus": 0, "message": format!("{err:#}")})
            );
            ExitCode::FAILURE
        }
    }
}

fn json_lines(path: &Path, what: &str) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not a JSON {what}", path.display(), i + 1))
        })
        .collect()
}

fn params_array(value: Value, source: &str) -> anyhow::Result<Vec<Value>> {
    match value {
        Value::Array(items) => Ok(items),
        other => bail!("{source}: the parameters must be a JSON array, not {other}"),
    }
}

fn run(
    data: Option<PathBuf>,
    in_memory: bool,
    args: &FuzzArgs,
) -> anyhow::Result<fuzz::FuzzReport> {
    let db = if in_memory {
        Database::in_memory()
    } else {
        Database::open(data.unwrap_or_else(|| PathBuf::from("partita-data")))?
    };
    let container = db.container(&args.container)?;
    let mut keys: Vec<PartitionKey> = args
        .pks
        .iter()
        .map(|p| PartitionKey::from(p.as_str()))
        .collect();
    for text in &args.pk_jsons {
        let value: Value =
            serde_json::from_str(text).with_context(|| format!("--pk-json {text}: not JSON"))?;
        keys.push(
            PartitionKey::from_value(&value)
                .with_context(|| format!("--pk-json {text}: not a partition-key value"))?,
        );
    }
    if keys.is_empty() {
        bail!("name at least one partition with --pk or --pk-json");
    }
    let templates = match (&args.params, &args.params_file) {
        (Some(text), _) => vec![params_array(
            serde_json::from_str(text).context("--params: not JSON")?,
            "--params",
        )?],
        (None, Some(path)) => json_lines(path, "array")?
            .into_iter()
            .map(|v| params_array(v, &path.display().to_string()))
            .collect::<anyhow::Result<_>>()?,
        (None, None) => bail!("give --params or --params-file"),
    };
    let expect: Value = serde_json::from_str(&args.expect).context("--expect: not JSON")?;
    let invariant = Invariant::Query {
        sql: args.invariant.clone(),
        expect,
    };
    let mut config = FuzzConfig::for_container(
        &container,
        args.procedure.as_deref(),
        keys,
        params_from_templates(templates),
        invariant,
    )?;
    if let Some(path) = &args.data_file {
        config.seed_documents = json_lines(path, "document")?;
    }
    config.calls = args.calls;
    config.seed = args.seed;
    config.concurrency = args.concurrency.max(1);
    config.shrink = !args.no_shrink;
    drop(container);
    drop(db);
    Ok(fuzz::run(&config)?)
}
