//! The child process of the crash test (`tests/crash.rs`).
//!
//! Opens the durable database in the directory given as its only argument
//! and commits transactions forever, printing `ack N` on stdout after
//! transaction `N` committed. Transaction `N` writes partition `p{N % 4}`:
//! it creates the documents `t{N}-0` … `t{N}-2` and increments the
//! partition's `counter` document, so a transaction is visible either
//! completely (three documents and one increment) or not at all. It resumes
//! numbering after the highest transaction it finds, so it can be killed and
//! restarted on the same directory any number of times.

use std::io::Write;

use anyhow::Context;
use engine::{Database, Error, FeedOptions};
use serde_json::json;

/// Documents each transaction creates (besides updating its counter).
pub const DOCS_PER_TXN: usize = 3;
/// Partitions the transactions rotate over.
pub const PARTITIONS: u64 = 4;

fn main() -> anyhow::Result<()> {
    let dir = std::env::args().nth(1).context("usage: crash-writer DIR")?;
    let db = Database::open(&dir)?;
    let container = db.create_container_if_not_exists("crash", "/pk")?;
    let mut next = 0;
    for p in 0..PARTITIONS {
        for doc in container
            .read_feed(format!("p{p}"), &FeedOptions::default())?
            .items
        {
            if let Some(n) = doc["txn"].as_u64() {
                next = next.max(n + 1);
            }
        }
    }
    let stdout = std::io::stdout();
    loop {
        let pk = format!("p{}", next % PARTITIONS);
        container.transaction(pk.as_str(), |txn| {
            for j in 0..DOCS_PER_TXN {
                txn.create_item(json!({"id": format!("t{next}-{j}"), "pk": pk, "txn": next, "payload": "x".repeat(200)}))?;
            }
            let count = txn.get_item("counter").map_or(0, |c| c["count"].as_u64().unwrap_or(0));
            txn.upsert_item(json!({"id": "counter", "pk": pk, "count": count + 1}), None)?;
            Ok::<_, Error>(())
        })?;
        let mut out = stdout.lock();
        writeln!(out, "ack {next}")?;
        out.flush()?;
        next += 1;
    }
}
