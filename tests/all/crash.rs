//! Crash recovery: a commit is either fully recovered or fully absent.
//!
//! The test starts `crash-writer` (see `tests/bin/crash_writer.rs`) on a data
//! directory, lets it commit transactions for a random while, kills it with
//! SIGKILL, reopens the directory and checks that
//! * every transaction the child acknowledged is present;
//! * no transaction is partially present (all three documents and its
//!   counter increment, or none of them);
//! * the change log holds every present transaction whole, in LSN order;
//! * the directory's lock died with the child;
//! * the writer's procedure and trigger survived (its transactions take
//!   turns as native transactions, a JavaScript stored procedure, a write
//!   with a JavaScript post-trigger and transactional batches with patches,
//!   so kills land inside each of those too);
//! * no document is visible after its time to live ran out (the writer
//!   keeps documents that expire a second after their write, and the
//!   background purge deletes them while kills land).
//!
//! `PARTITA_CRASH_ITERATIONS` (default 200) sets the number of kills and
//! `PARTITA_CRASH_SEED` the random delays; a failure prints the seed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use engine::{Database, FeedOptions, Lsn, ScriptKind};

const DOCS_PER_TXN: usize = 3;
const PARTITIONS: u64 = 4;
const EPHEMERAL: &str = "eph";

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// xorshift64*: a few random delays need no dependency.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn sigkill_never_loses_acknowledged_or_leaves_partial_transactions() -> anyhow::Result<()> {
    let iterations = env_u64("PARTITA_CRASH_ITERATIONS", 200);
    let seed = env_u64(
        "PARTITA_CRASH_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos() as u64,
    );
    println!("crash test: {iterations} iterations, PARTITA_CRASH_SEED={seed}");
    let mut rng = seed | 1;
    let dir = tempfile::tempdir()?;
    let mut acked: BTreeSet<u64> = BTreeSet::new();
    let mut kills_mid_run = 0;
    let mut purged = 0;
    for iteration in 0..iterations {
        let mut child = Command::new(env!("CARGO_BIN_EXE_crash-writer"))
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut out = String::new();
        // Most kills land while the writer commits (after its first ack);
        // every fourth lands at a random moment, start-up and recovery included.
        let mid_run = iteration % 4 != 3;
        if mid_run {
            stdout.read_line(&mut out)?;
        }
        std::thread::sleep(Duration::from_millis(
            next_random(&mut rng) % if mid_run { 50 } else { 150 },
        ));
        child.kill()?; // SIGKILL
        let status = child.wait()?;
        stdout.read_to_string(&mut out)?;
        let mut err = String::new();
        child
            .stderr
            .take()
            .expect("piped")
            .read_to_string(&mut err)?;
        assert!(
            status.code().is_none(),
            "iteration {iteration} (seed {seed}): child exited by itself: {err}"
        );
        let before = acked.len();
        acked.extend(
            out.lines()
                .filter_map(|l| l.strip_prefix("ack "))
                .map(|n| n.parse::<u64>().expect("ack N")),
        );
        if acked.len() > before {
            kills_mid_run += 1;
        }
        purged = check(dir.path(), &acked)
            .map_err(|e| anyhow::anyhow!("iteration {iteration} (seed {seed}): {e}"))?;
    }
    assert!(purged > 0, "the writer never purged an expired document");
    assert!(
        kills_mid_run >= iterations / 2,
        "only {kills_mid_run} of {iterations} kills hit a running writer"
    );
    let forms = ["native", "procedure", "post-trigger", "batch", "patch"];
    for (form, what) in forms.iter().enumerate() {
        assert!(
            acked.iter().any(|n| n % forms.len() as u64 == form as u64),
            "no {what} transaction was acknowledged"
        );
    }
    println!(
        "crash test: {} acknowledged transactions survived {iterations} kills",
        acked.len()
    );
    Ok(())
}

/// Reopens the directory and checks every invariant.
/// Returns how many purge deletes the change log holds.
fn check(dir: &std::path::Path, acked: &BTreeSet<u64>) -> anyhow::Result<usize> {
    // Fails if the dead child's lock survived. No purge here: the writer's
    // purges are what is checked.
    let options = engine::Options {
        purge_interval: None,
        ..engine::Options::default()
    };
    let db = Database::open_with(dir, options)?;
    let Ok(container) = db.container("crash") else {
        anyhow::ensure!(
            acked.is_empty(),
            "container missing but transactions were acknowledged"
        );
        return Ok(0);
    };
    if !acked.is_empty() {
        for (kind, id) in [
            (ScriptKind::StoredProcedure, "writeTxn"),
            (ScriptKind::Trigger, "completeTxn"),
        ] {
            container
                .read_script(kind, id)
                .map_err(|e| anyhow::anyhow!("the writer's script {id} was lost: {e}"))?;
        }
    }
    let mut present: BTreeMap<u64, usize> = BTreeMap::new();
    for p in 0..PARTITIONS {
        let pk = format!("p{p}");
        let docs = container
            .read_feed(pk.as_str(), &FeedOptions::default())?
            .items;
        let mut txns = BTreeSet::new();
        let mut counter = 0;
        for doc in &docs {
            match doc["txn"].as_u64() {
                Some(n) => {
                    anyhow::ensure!(n % PARTITIONS == p, "transaction {n} in partition {pk}");
                    *present.entry(n).or_default() += 1;
                    txns.insert(n);
                }
                None => counter = doc["count"].as_u64().unwrap_or(0),
            }
        }
        anyhow::ensure!(
            counter == txns.len() as u64,
            "{pk}: counter {counter} but {} transactions",
            txns.len()
        );
    }
    for (n, docs) in &present {
        anyhow::ensure!(
            *docs == DOCS_PER_TXN,
            "transaction {n} is partial: {docs} of {DOCS_PER_TXN} documents"
        );
    }
    for n in acked {
        anyhow::ensure!(
            present.contains_key(n),
            "acknowledged transaction {n} was lost"
        );
    }
    // The change log holds whole transactions: one LSN per transaction, with
    // its three creates and its counter write; besides them, only the
    // writer's creation of a partition's counter at start, and the upserts
    // and purges of the documents that expire.
    let mut per_lsn: BTreeMap<Lsn, Vec<&partita::Change>> = BTreeMap::new();
    let changes = container.read_changes(Lsn::ZERO, usize::MAX)?;
    for change in &changes {
        per_lsn.entry(change.lsn).or_default().push(change);
    }
    let other = |changes: &Vec<&partita::Change>| {
        let setup = changes.len() == 1 && changes[0].id == "counter";
        let ephemeral = changes
            .iter()
            .all(|c| c.partition_key == partita::PartitionKey::from(EPHEMERAL));
        setup || ephemeral
    };
    anyhow::ensure!(
        per_lsn
            .values()
            .all(|changes| changes.len() == DOCS_PER_TXN + 1 || other(changes)),
        "a transaction is split in the change log"
    );
    let transactions = per_lsn.values().filter(|c| !other(c)).count();
    anyhow::ensure!(
        transactions == present.len(),
        "{transactions} logged transactions, {} present",
        present.len()
    );
    // No expired document is visible after the restart.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    for doc in container
        .read_feed(EPHEMERAL, &FeedOptions::default())?
        .items
    {
        anyhow::ensure!(
            doc.ts() + 1 > now,
            "{} expired at {} but is visible at {now}",
            doc.id(),
            doc.ts() + 1
        );
    }
    let purged = changes
        .iter()
        .filter(|c| c.partition_key == partita::PartitionKey::from(EPHEMERAL))
        .filter(|c| c.kind == engine::ChangeKind::Delete)
        .count();
    let lsns: Vec<u64> = per_lsn.keys().map(|l| l.0).collect();
    anyhow::ensure!(
        lsns.iter().copied().eq(1..=lsns.len() as u64),
        "LSNs have gaps: {lsns:?}"
    );
    Ok(purged)
}

#[test]
fn a_second_process_cannot_open_a_data_directory_in_use() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_crash-writer"))
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    stdout.read_line(&mut line)?; // the child holds the directory once it commits
    let refused = Database::open(dir.path()).expect_err("the directory is in use");
    assert!(matches!(refused, engine::Error::Locked { .. }), "{refused}");
    assert!(
        refused.to_string().contains("in use by another process"),
        "{refused}"
    );
    child.kill()?;
    child.wait()?;
    Database::open(dir.path())?; // the lock died with the process
    Ok(())
}
