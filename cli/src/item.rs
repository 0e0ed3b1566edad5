//! `partita item`: point operations on documents (create, upsert, replace,
//! read, delete), with the pre- and post-triggers a write names, and the
//! deletion of a whole logical partition.

use clap::{Args, Subcommand};
use partita::charge::Work;
use partita::{Container, Database, EngineError, ItemResponse, Limits, PartitionKey, WriteOptions};
use serde_json::{Value, json};

use crate::caps::CapArgs;
use crate::json::{parse_json, stats_json};
use crate::pk::Pk;

/// The `--help` examples of `partita item`.
pub(crate) const EXAMPLES: &str = "Examples:
  partita item create posts --pk p1 --body '{\"id\":\"p1\",\"postId\":\"p1\"}'
  partita item read posts --pk p1 --id p1
  partita item delete posts --pk p1 --id p1
  partita item delete-partition posts --pk p1";

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
