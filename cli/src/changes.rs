//! `partita changes`: a container's change feed from an LSN, whole
//! transactions at a time.

use clap::Args;
use partita::charge::Work;
use partita::{Database, Lsn};
use serde_json::{Value, json};

use crate::pk::OptionalPk;

/// Arguments of `partita changes`.
#[derive(Args)]
pub(crate) struct ChangesArgs {
    /// The container.
    container: String,
    /// Changes after this LSN (0: from the beginning).
    #[arg(long, default_value_t = 0)]
    from_lsn: u64,
    /// The most changes (whole transactions are never split).
    #[arg(long, default_value_t = 1000)]
    max_items: usize,
    /// Only the changes of this logical partition, or of the partitions
    /// under a prefix of a hierarchical key.
    #[command(flatten)]
    pk: OptionalPk,
}

/// Runs `partita changes`: the changes, the last LSN read (to resume
/// after) and the charge.
pub(crate) fn run(db: &Database, args: ChangesArgs) -> anyhow::Result<Value> {
    let ChangesArgs {
        container,
        from_lsn,
        max_items,
        pk,
    } = args;
    let key = pk.key()?;
    let mut changes = db
        .container(&container)?
        .read_changes(Lsn(from_lsn), max_items)?;
    // The last LSN read, so a page whose changes are all filtered out still
    // moves the caller on.
    let last = changes.last().map_or(from_lsn, |c| c.lsn.0);
    if let Some(key) = &key {
        changes.retain(|c| c.partition_key.starts_with(key));
    }
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
    Ok(json!({"changes": items, "lastLsn": last, "requestCharge": work.request_charge()}))
}
