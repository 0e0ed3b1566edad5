//! The child process of the crash test (`tests/all/crash.rs`).
//!
//! Opens the durable database in the directory given as its only argument
//! and commits transactions forever, printing `ack N` on stdout after
//! transaction `N` committed. Transaction `N` writes partition `p{N % 4}`:
//! it creates the documents `t{N}-0` … `t{N}-2` and increments the
//! partition's `counter` document, so a transaction is visible either
//! completely (three documents and one increment) or not at all. It resumes
//! numbering after the highest transaction it finds, so it can be killed and
//! restarted on the same directory any number of times.
//!
//! Transactions take turns in five forms with the same effect: a native
//! Rust transaction (`N % 5 == 0`), the JavaScript stored procedure
//! `writeTxn` (`N % 5 == 1`), an upsert of `t{N}-0` whose JavaScript
//! post-trigger `completeTxn` creates the other two documents and increments
//! the counter (`N % 5 == 2`), a transactional batch of the three creates
//! and a patch that increments the counter (`N % 5 == 3`), and the same
//! batch followed by a read of the counter (`N % 5 == 4`). So kills
//! land while procedures, triggers and batches run and commit, too. The
//! batches need the counter to exist: the writer creates it (count 0) in
//! each partition at start when it is missing.
//!
//! The container has time to live on, and before each transaction the
//! writer upserts one of eight documents of partition `eph` that expire a
//! second after their write; every sixteenth transaction it purges the
//! expired ones (deletes in transactions of their own), so kills land in
//! purges, too.

use std::io::Write;

use anyhow::Context;
use partita::{
    BatchOperation, ContainerProperties, Database, FeedOptions, Options, Patch, ScriptKind,
    ScriptProperties, TriggerOperation, TriggerType, WriteOptions,
};
use serde_json::json;

/// The procedure form of a transaction: `writeTxn(n, pk, payload)`.
const PROCEDURE: &str = r#"function writeTxn(n, pk, payload) {
    var c = getContext().getCollection();
    var link = c.getSelfLink();
    for (var j = 0; j < 3; j++) {
        c.createDocument(link, {id: 't' + n + '-' + j, pk: pk, txn: n, payload: payload},
            function (err) { if (err) throw err; });
    }
    c.readDocument(c.getAltLink() + '/docs/counter', function (err, counter) {
        if (err && err.number != 404) throw err;
        var count = err ? 0 : counter.count;
        c.upsertDocument(link, {id: 'counter', pk: pk, count: count + 1},
            function (err) { if (err) throw err; });
    });
}"#;

/// The trigger form: after `t{N}-0` is written, create the rest.
const TRIGGER: &str = r#"function completeTxn() {
    var c = getContext().getCollection();
    var doc = getContext().getRequest().getBody();
    var link = c.getSelfLink();
    for (var j = 1; j < 3; j++) {
        c.createDocument(link, {id: 't' + doc.txn + '-' + j, pk: doc.pk, txn: doc.txn, payload: doc.payload},
            function (err) { if (err) throw err; });
    }
    c.readDocument(c.getAltLink() + '/docs/counter', function (err, counter) {
        if (err && err.number != 404) throw err;
        var count = err ? 0 : counter.count;
        c.upsertDocument(link, {id: 'counter', pk: doc.pk, count: count + 1},
            function (err) { if (err) throw err; });
    });
}"#;

/// Documents each transaction creates (besides updating its counter).
pub const DOCS_PER_TXN: usize = 3;
/// Partitions the transactions rotate over.
pub const PARTITIONS: u64 = 4;
/// The partition of the documents that expire.
pub const EPHEMERAL: &str = "eph";

/// Runs a batch that must succeed.
fn batch(container: &partita::Container, pk: &str, ops: Vec<BatchOperation>) -> anyhow::Result<()> {
    let response = container.execute_batch(pk, ops)?;
    if let Some(i) = response.failed {
        anyhow::bail!(
            "batch operation {i} failed: {:?}",
            response.results[i].message
        );
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let dir = std::env::args().nth(1).context("usage: crash-writer DIR")?;
    // No room in the partition cache: partitions are evicted and read back
    // from storage (its pending documents too) between the crashes. The
    // shortest checkpoint interval: the log is copied into the database
    // file beside the writers all the time, so kills land in checkpoints.
    let db = Database::open_with(
        &dir,
        Options {
            cache_bytes: 0,
            checkpoint_pages: 100,
            ..Options::default()
        },
    )?;
    let container = match db.container("crash") {
        Ok(container) => container,
        Err(_) => {
            db.create_container_with(ContainerProperties::new("crash", "/pk").with_default_ttl(-1))?
        }
    };
    if container
        .read_script(ScriptKind::StoredProcedure, "writeTxn")
        .is_err()
    {
        container.create_script(ScriptProperties::stored_procedure("writeTxn", PROCEDURE))?;
    }
    if container
        .read_script(ScriptKind::Trigger, "completeTxn")
        .is_err()
    {
        container.create_script(ScriptProperties::trigger(
            "completeTxn",
            TRIGGER,
            TriggerType::Post,
            TriggerOperation::Upsert,
        ))?;
    }
    let with_trigger = WriteOptions {
        post_triggers: vec!["completeTxn".into()],
        ..WriteOptions::default()
    };
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
    for p in 0..PARTITIONS {
        let pk = format!("p{p}");
        if container.read_item(pk.as_str(), "counter").is_err() {
            container.create_item(
                pk.as_str(),
                json!({"id": "counter", "pk": pk, "count": 0}),
                None,
            )?;
        }
    }
    let increment = Patch::from_json(&json!([{"op": "incr", "path": "/count", "value": 1}]))?;
    let stdout = std::io::stdout();
    loop {
        // Purges run in the writer, so kills land in them too.
        if next % 16 == 0 {
            db.purge_expired()?;
        }
        container.upsert_item(
            EPHEMERAL,
            json!({"id": format!("e{}", next % 8), "pk": EPHEMERAL, "ttl": 1}),
            None,
        )?;
        let pk = format!("p{}", next % PARTITIONS);
        let payload = "x".repeat(200);
        let creates = || -> Vec<BatchOperation> {
            (0..DOCS_PER_TXN)
                .map(|j| BatchOperation::create(json!({"id": format!("t{next}-{j}"), "pk": pk, "txn": next, "payload": payload})))
                .collect()
        };
        match next % 5 {
            0 => container.transaction(pk.as_str(), |txn| {
                for j in 0..DOCS_PER_TXN {
                    txn.create_item(json!({"id": format!("t{next}-{j}"), "pk": pk, "txn": next, "payload": payload}))?;
                }
                let count = txn.get_item("counter").map_or(0, |c| c["count"].as_u64().unwrap_or(0));
                txn.upsert_item(json!({"id": "counter", "pk": pk, "count": count + 1}), None)?;
                Ok::<_, partita::EngineError>(())
            })?,
            1 => {
                container.execute_stored_procedure(
                    "writeTxn",
                    pk.as_str(),
                    vec![json!(next), json!(pk), json!(payload)], None,
                )?;
            }
            2 => {
                container.upsert_item(
                    pk.as_str(),
                    json!({"id": format!("t{next}-0"), "pk": pk, "txn": next, "payload": payload}), Some(&with_trigger))?;
            }
            3 => {
                let mut ops = creates();
                ops.push(BatchOperation::patch("counter", increment.clone()));
                batch(&container, &pk, ops)?;
            }
            _ => {
                // A patch, then a read, of the same document in one batch:
                // the read sees the patch.
                let mut ops = creates();
                ops.push(BatchOperation::patch("counter", increment.clone()));
                ops.push(BatchOperation::read("counter"));
                batch(&container, &pk, ops)?;
            }
        }
        let mut out = stdout.lock();
        writeln!(out, "ack {next}")?;
        out.flush()?;
        next += 1;
    }
}
