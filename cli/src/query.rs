//! `partita query`: one page of a Cosmos SQL query, in one logical
//! partition or across all of them, with its continuation.

use clap::Args;
use partita::charge::Work;
use partita::{Database, EngineError, Error, Limits, QueryOptions};
use serde_json::{Map, Value, json};

use crate::json::parse_json;
use crate::pk::OptionalPk;

/// Arguments of `partita query`.
#[derive(Args)]
pub(crate) struct QueryArgs {
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
}

/// Runs `partita query`: the page's items, its continuation, charge and
/// statistics.
pub(crate) fn run(db: &Database, args: QueryArgs, limits: &Limits) -> anyhow::Result<Value> {
    let options = QueryOptions {
        partition_key: args.pk.key()?,
        partitions: None,
        max_item_count: args.max_items,
        continuation: args.continuation,
        limits: Some(limits.clone()),
    };
    let page = db.container(&args.container)?.query_items(
        &args.sql,
        &parse_params(&args.params)?,
        &options,
    )?;
    Ok(json!({
        "items": page.items,
        "continuation": page.continuation,
        "requestCharge": Work::query(&page.stats).request_charge(),
        "stats": {
            "docs_scanned": page.stats.docs_scanned,
            "docs_returned": page.stats.docs_returned,
            "bytes_read": page.stats.bytes_read,
        },
    }))
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
