//! Early lock release: a commit placed in the log lets the next writer of
//! its partition begin on its state before it is durable, while readers
//! see it only once it is (`LogicalPartition::release_early`).
//!
//! A [`Gate`] holds every commit's outcome back, as a slow fsync covering
//! them all would; each step below waits for the previous one's commit to
//! reach storage, not for a time.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use engine::storage::MemoryStorage;
use engine::testing::{CommitFault, Faults, FaultyStorage, Gate};
use engine::{Container, Database, Error, Lsn, Options};
use serde_json::json;

type Result<T = ()> = anyhow::Result<T>;

/// A store whose commits a test can hold back, with `posts` holding
/// `a` (`n`: 0) in partition `p1`, and that commit through.
fn store() -> Result<(Database, Container, Faults)> {
    let storage = FaultyStorage::new(MemoryStorage::new());
    let faults = storage.faults().clone();
    // A writer that could not begin before the first commit is durable
    // fails after this, rather than hanging the test.
    let options = Options {
        lock_timeout: Duration::from_secs(20),
        ..Options::default()
    };
    let db = Database::with_storage(Box::new(storage), options)?;
    let posts = db.create_container("posts", "/postId")?;
    posts.create_item("p1", json!({"id": "a", "postId": "p1", "n": 0}), None)?;
    Ok((db, posts, faults))
}

/// Waits until `n` commits have reached storage (the ceiling catches a
/// hang, it measures nothing).
fn until_commits(faults: &Faults, n: u64) {
    let started = Instant::now();
    while faults.commits() < n {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "commit {n} never reached storage"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

fn n_of(posts: &Container, id: &str) -> Result<i64> {
    Ok(posts.read_item("p1", id)?.value()["n"]
        .as_i64()
        .unwrap_or(-1))
}

/// Runs a transaction on `p1` on its own thread: it sends what it read of
/// `a`'s `n`, then sets `a`'s `n` to `set` (or writes nothing for
/// `None`) and commits.
fn writer(
    posts: &Container,
    set: Option<i64>,
    seen: mpsc::Sender<std::result::Result<i64, String>>,
) -> thread::JoinHandle<engine::Result<Option<Lsn>>> {
    let posts = posts.clone();
    thread::spawn(move || {
        let begun = posts.begin("p1").and_then(|txn| {
            let n = txn.read_item("a")?.value()["n"].as_i64().unwrap_or(-1);
            Ok((txn, n))
        });
        let mut txn = match begun {
            Ok((txn, n)) => {
                let _ = seen.send(Ok(n));
                txn
            }
            Err(err) => {
                let _ = seen.send(Err(err.to_string()));
                return Err(err);
            }
        };
        if let Some(n) = set {
            txn.replace_item("a", json!({"id": "a", "postId": "p1", "n": n}), None)?;
        }
        txn.commit()
    })
}

/// What the next writer to begin read of `a`'s `n`.
fn next(saw: &mpsc::Receiver<std::result::Result<i64, String>>) -> Result<i64> {
    saw.recv()?.map_err(anyhow::Error::msg)
}

#[test]
fn the_next_writer_begins_before_a_commit_is_durable_and_readers_wait_for_it() -> Result {
    let (_db, posts, faults) = store()?;
    let gate: Gate = faults.hold_commits();
    let (seen, saw) = mpsc::channel();
    let first = writer(&posts, Some(1), seen.clone());
    assert_eq!(next(&saw)?, 0);
    until_commits(&faults, 2);
    // The first commit is in the log, not durable: the next writer holds
    // the partition already and reads its write; readers do not.
    let second = writer(&posts, Some(2), seen.clone());
    assert_eq!(
        next(&saw)?,
        1,
        "the second writer begins on the first's state"
    );
    assert_eq!(n_of(&posts, "a")?, 0, "a reader sees only what is durable");
    until_commits(&faults, 3);
    // A transaction that only reads what is not yet durable answers once
    // it is.
    let reader = writer(&posts, None, seen);
    assert_eq!(next(&saw)?, 2);
    assert_eq!(n_of(&posts, "a")?, 0);

    gate.open();
    let (first, second) = (first.join().unwrap()?, second.join().unwrap()?);
    assert_eq!(reader.join().unwrap()?, None);
    assert!(
        first.zip(second).is_some_and(|(a, b)| a < b),
        "{first:?} {second:?}"
    );
    assert_eq!(n_of(&posts, "a")?, 2);
    let changes = posts.read_changes(Lsn::ZERO, 10)?;
    let ns: Vec<i64> = changes
        .iter()
        .filter_map(|c| c.document.as_ref()?.value()["n"].as_i64())
        .collect();
    assert_eq!(ns, [0, 1, 2]);
    Ok(())
}

#[test]
fn a_commit_that_fails_after_letting_the_next_writer_in_fails_what_was_built_on_it() -> Result {
    let (db, posts, faults) = store()?;
    // Commits 2 and on fail once waited for: the second writer's record
    // is placed after the first's, and fails with it, as a real store's
    // does after a failed fsync.
    faults.fail_commits_from(
        2,
        CommitFault::after_write("fsync: input/output error (injected)"),
    );
    let gate = faults.hold_commits();
    let (seen, saw) = mpsc::channel();
    let first = writer(&posts, Some(1), seen.clone());
    assert_eq!(next(&saw)?, 0);
    until_commits(&faults, 2);
    let second = writer(&posts, Some(2), seen.clone());
    assert_eq!(next(&saw)?, 1);
    until_commits(&faults, 3);
    let reader = writer(&posts, None, seen);
    assert_eq!(next(&saw)?, 2);

    gate.open();
    for outcome in [first, second, reader].map(|t| t.join().unwrap()) {
        let err = outcome.expect_err("built on a failed commit");
        assert!(
            matches!(err, Error::Storage(_) | Error::ReadOnly(_)),
            "{err}"
        );
    }
    // Readers never saw the failed writes, and the store refuses writes.
    assert_eq!(n_of(&posts, "a")?, 0);
    assert!(db.failure().is_some());
    let err = posts
        .create_item("p1", json!({"id": "b", "postId": "p1"}), None)
        .unwrap_err();
    assert_eq!(err.status(), 503, "{err}");
    Ok(())
}
