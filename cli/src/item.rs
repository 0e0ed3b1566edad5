//! `partita item`: point operations on documents (create, upsert, replace,
//! patch, read, delete), with the pre- and post-triggers a write names,
//! transactional batches, and the deletion of a whole logical partition.

use std::cell::RefCell;
use std::io::{BufRead, BufReader};

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use partita::batch_json::result_json;
use partita::charge::Work;
use partita::{
    BatchOperation, Container, Database, EngineError, ImportOptions, ItemResponse, Limits,
    PartitionKey, Patch, WriteOptions,
};
use serde_json::{Value, json};

use crate::caps::CapArgs;
use crate::json::{json_argument, parse_json, stats_json};
use crate::pk::Pk;

/// The `--help` examples of `partita item`.
pub(crate) const EXAMPLES: &str = "Examples:
  partita item create posts --pk p1 --body '{\"id\":\"p1\",\"postId\":\"p1\"}'
  partita item read posts --pk p1 --id p1
  partita item delete posts --pk p1 --id p1
  partita item patch posts --pk p1 --id p1 --ops '[{\"op\":\"incr\",\"path\":\"/likes\",\"value\":1}]'
  partita item batch posts --pk p1 --ops @batch.json
  partita item delete-partition posts --pk p1
  partita item import posts posts.jsonl";

#[derive(Subcommand)]
pub(crate) enum ItemCommand {
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
    /// Patch a document: add, set, replace, remove, incr and move
    /// operations on JSON-pointer paths (at most 10), applied atomically.
    #[command(
        after_help = "Example: partita item patch posts --pk p1 --id p1 --condition 'FROM c WHERE c.likes < 100' --ops '[{\"op\":\"incr\",\"path\":\"/likes\",\"value\":1}]'"
    )]
    Patch {
        /// The container.
        container: String,
        #[command(flatten)]
        pk: Pk,
        /// The document id.
        #[arg(long)]
        id: String,
        /// The operations, as a JSON array (or `@file` to read it from a file).
        #[arg(long)]
        ops: String,
        /// Apply only if this holds for the document (`FROM c WHERE ...`);
        /// 412 otherwise.
        #[arg(long)]
        condition: Option<String>,
        /// Only if the document's etag is this.
        #[arg(long)]
        if_match: Option<String>,
        #[command(flatten)]
        triggers: TriggerArgs,
    },
    /// Run a transactional batch in one logical partition: every operation
    /// or none. Operations are the SDKs' JSON (`operationType` Create,
    /// Upsert, Read, Replace, Delete or Patch, with `resourceBody`, `id`,
    /// `ifMatch`); a failed batch exits non-zero naming the operation.
    #[command(
        after_help = "Example: partita item batch posts --pk p1 --ops '[{\"operationType\":\"Patch\",\"id\":\"p1\",\"resourceBody\":[{\"op\":\"incr\",\"path\":\"/commentCount\",\"value\":1}]},{\"operationType\":\"Create\",\"resourceBody\":{\"id\":\"c1\",\"postId\":\"p1\"}}]'"
    )]
    Batch {
        /// The container.
        container: String,
        #[command(flatten)]
        pk: Pk,
        /// The operations, as a JSON array (or `@file` to read it from a file).
        #[arg(long)]
        ops: String,
    },
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
    /// Load documents in bulk from a file of JSON lines (one document a
    /// line; `-` reads standard input): the documents of each logical
    /// partition in a chunk commit in one transaction, several at once. No
    /// triggers run. If it stops, what committed stays; `--upsert` resumes.
    #[command(
        after_help = "Example: partita --data blog item import posts posts.jsonl --upsert\nPrints {\"requestCharge\", \"documents\", \"transactions\", \"seconds\", \"documentsPerSecond\"}; a progress bar on a terminal."
    )]
    Import {
        /// The container.
        container: String,
        /// The file of JSON lines (`-`: standard input).
        file: String,
        /// Replace documents that exist instead of stopping with 409.
        #[arg(long)]
        upsert: bool,
        /// Documents read before they are written (a chunk also ends at 64 MB of JSON).
        #[arg(long, default_value_t = 100_000)]
        chunk_size: usize,
        /// Transactions that commit at once (default: the machine's cores, at least 2).
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Delete every document of one logical partition, in one transaction
    /// (no triggers run).
    #[command(after_help = "Example: partita item delete-partition posts --pk p1")]
    DeletePartition {
        /// The container.
        container: String,
        #[command(flatten)]
        pk: Pk,
    },
}

#[derive(Args)]
pub(crate) struct WriteArgs {
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
pub(crate) struct TriggerArgs {
    /// A pre-trigger to run before the write.
    #[arg(long)]
    pre_trigger: Option<String>,
    /// A post-trigger to run after the write.
    #[arg(long)]
    post_trigger: Option<String>,
    #[command(flatten)]
    caps: CapArgs,
}

impl TriggerArgs {
    fn options(self, if_match: Option<String>, limits: &Limits) -> WriteOptions {
        WriteOptions {
            if_match,
            pre_triggers: self.pre_trigger.into_iter().collect(),
            post_triggers: self.post_trigger.into_iter().collect(),
            limits: Some(self.caps.apply(limits)),
        }
    }
}

/// Runs one `partita item` command.
pub(crate) fn run(db: &Database, command: ItemCommand, limits: &Limits) -> anyhow::Result<Value> {
    Ok(match command {
        ItemCommand::Create(args) => {
            let (container, pk, body, options) = write_args(db, args, limits)?;
            item_json(container.create_item(pk, body, Some(&options))?)
        }
        ItemCommand::Upsert(args) => {
            let (container, pk, body, options) = write_args(db, args, limits)?;
            item_json(container.upsert_item(pk, body, Some(&options))?)
        }
        ItemCommand::Replace(args) => {
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
        ItemCommand::Patch {
            container,
            pk,
            id,
            ops,
            condition,
            if_match,
            triggers,
        } => {
            let mut patch = Patch::from_json(&json_argument("--ops", &ops)?)?;
            if let Some(condition) = condition {
                patch = patch.with_condition(&condition)?;
            }
            let options = triggers.options(if_match, limits);
            item_json(db.container(&container)?.patch_item(
                pk.key()?,
                &id,
                &patch,
                Some(&options),
            )?)
        }
        ItemCommand::Batch { container, pk, ops } => batch(db, &container, pk, &ops)?,
        ItemCommand::Read { container, pk, id } => {
            let doc = db.container(&container)?.read_item(pk.key()?, &id)?;
            let size = doc.to_string().len() as u64;
            json!({
                "resource": doc.into_value(),
                "requestCharge": Work::point_read(size).request_charge(),
                "stats": {"docs_read": 1, "bytes_read": size},
            })
        }
        ItemCommand::Delete {
            container,
            pk,
            id,
            if_match,
            triggers,
        } => {
            let options = triggers.options(if_match, limits);
            item_json(
                db.container(&container)?
                    .delete_item(pk.key()?, &id, Some(&options))?,
            )
        }
        ItemCommand::Import {
            container,
            file,
            upsert,
            chunk_size,
            threads,
        } => {
            let defaults = ImportOptions::default();
            let options = ImportOptions {
                upsert,
                chunk_size,
                threads: threads.unwrap_or(defaults.threads),
                ..defaults
            };
            import(&db.container(&container)?, &file, &options)?
        }
        ItemCommand::DeletePartition { container, pk } => {
            let deleted = db
                .container(&container)?
                .delete_all_items_by_partition_key(pk.key()?)?;
            let work = Work {
                docs_written: deleted as u64,
                ..Work::default()
            };
            json!({
                "deleted": deleted,
                "requestCharge": work.request_charge(),
                "stats": {"docs_written": deleted},
            })
        }
    })
}

/// Runs `partita item import`: reads JSON lines lazily, so a file larger
/// than memory streams through. A line that is not JSON stops the import
/// there (what came before it is written) with an error naming the line.
fn import(container: &Container, file: &str, options: &ImportOptions) -> anyhow::Result<Value> {
    let input: Box<dyn BufRead> = if file == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let opened = std::fs::File::open(file)
            .map_err(|e| EngineError::BadRequest(format!("cannot read {file}: {e}")))?;
        Box::new(BufReader::with_capacity(1 << 20, opened))
    };
    let bad_line: RefCell<Option<anyhow::Error>> = RefCell::new(None);
    let docs = input
        .lines()
        .enumerate()
        .map_while(|(n, line)| {
            let parsed = match line {
                Err(e) => Err(anyhow::Error::from(e).context(format!("cannot read {file}"))),
                Ok(line) if line.trim().is_empty() => Ok(None),
                Ok(line) => serde_json::from_str::<Value>(&line).map(Some).map_err(|e| {
                    anyhow::anyhow!("{file} line {}: not a JSON document: {e}", n + 1)
                }),
            };
            match parsed {
                Ok(doc) => Some(doc),
                Err(e) => {
                    *bad_line.borrow_mut() = Some(e);
                    None
                }
            }
        })
        .flatten();
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {human_pos} documents, {per_sec}")
            .expect("a valid template"),
    );
    let report = container.import_items(docs, options, &mut |written| bar.set_position(written));
    bar.finish_and_clear();
    let report = report?;
    if let Some(e) = bad_line.into_inner() {
        return Err(e.context(format!(
            "the import stopped after {} documents",
            report.documents
        )));
    }
    let work = Work {
        docs_written: report.documents,
        bytes_written: report.bytes,
        ..Work::default()
    };
    Ok(json!({
        "requestCharge": work.request_charge(),
        "documents": report.documents,
        "transactions": report.transactions,
        "seconds": report.elapsed.as_secs_f64(),
        "documentsPerSecond": report.per_second().round(),
    }))
}

/// Runs a transactional batch: the results as the SDKs get them, or the
/// failing operation's error.
fn batch(db: &Database, container: &str, pk: Pk, ops: &str) -> anyhow::Result<Value> {
    let operations = BatchOperation::list_from_json(&json_argument("--ops", ops)?)?;
    let response = db
        .container(container)?
        .execute_batch(pk.key()?, operations)?;
    if let Some(i) = response.failed {
        let failed = &response.results[i];
        let message = failed.message.clone().unwrap_or_default();
        return Err(anyhow::Error::new(BatchFailed {
            index: i,
            status: failed.status,
            message,
        }));
    }
    let charge: f64 = response
        .results
        .iter()
        .map(partita::charge::batch_operation)
        .sum();
    let results: Vec<Value> = response
        .results
        .iter()
        .map(|r| result_json(r, true))
        .collect();
    Ok(json!({"results": results, "requestCharge": charge}))
}

/// A batch whose operation `index` failed: nothing was applied.
#[derive(Debug)]
pub(crate) struct BatchFailed {
    /// The failing operation.
    pub(crate) index: usize,
    /// Its status.
    pub(crate) status: u16,
    message: String,
}

impl std::fmt::Display for BatchFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "batch operation {} failed with status {}, so nothing was applied: {}",
            self.index, self.status, self.message
        )
    }
}

impl std::error::Error for BatchFailed {}

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
