//! The change-feed processor (`partita::change_feed`): order per physical
//! partition, at-least-once delivery across a crash between delivery and
//! checkpoint, resuming on a reopened durable database, instances sharing
//! and taking over leases, bootstrapping a view, a stored procedure as the
//! handler, and the background thread.

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engine::storage::SqliteStorage;
use engine::testing::FaultyStorage;
use partita::change_feed::{
    ChangeBatch, ChangeFeedProcessor, ProcedureHandler, ProcessorOptions, StartFrom,
};
use partita::{
    Change, ChangeKind, Container, ContainerProperties, Database, Lsn, PartitionKey,
    ScriptProperties,
};
use serde_json::json;

use crate::support::manual_clock;

type Result<T = ()> = anyhow::Result<T>;

/// Every change delivered, with the batch's physical partition.
type Log = Arc<Mutex<Vec<(u32, Change)>>>;

fn recorder(
    log: &Log,
) -> impl FnMut(&ChangeBatch<'_>) -> partita::change_feed::HandlerResult + Send + use<> {
    let log = log.clone();
    move |batch: &ChangeBatch<'_>| {
        let mut log = log.lock().unwrap();
        log.extend(
            batch
                .changes
                .iter()
                .map(|c| (batch.physical_partition, c.clone())),
        );
        Ok(())
    }
}

fn container(db: &Database, id: &str, physical_partitions: u32) -> Result<Container> {
    let mut props = ContainerProperties::new(id, "/postId");
    props.physical_partitions = physical_partitions;
    Ok(db.create_container_with(props)?)
}

/// Creates, replaces and deletes across many logical partitions, interleaved.
fn write_workload(posts: &Container, round: usize) -> Result {
    for i in 0..12 {
        let pk = format!("p{i}");
        let id = format!("d{round}-{i}");
        posts.create_item(pk.as_str(), json!({"id": id, "postId": pk, "n": 0}), None)?;
    }
    for i in (0..12).step_by(2) {
        let pk = format!("p{i}");
        let id = format!("d{round}-{i}");
        posts.replace_item(
            pk.as_str(),
            &id,
            json!({"id": id, "postId": pk, "n": 1}),
            None,
        )?;
    }
    for i in (0..12).step_by(3) {
        let pk = format!("p{i}");
        posts.delete_item(pk.as_str(), &format!("d{round}-{i}"), None)?;
    }
    Ok(())
}

fn all_changes(posts: &Container) -> Result<Vec<Change>> {
    Ok(posts.read_changes(Lsn::ZERO, usize::MAX)?)
}

#[test]
fn every_change_arrives_once_in_order_per_partition() -> Result {
    let db = Database::in_memory();
    let posts = container(&db, "posts", 4)?;
    let leases = db.create_container("leases", "/id")?;
    write_workload(&posts, 0)?;
    let log = Log::default();
    let options = ProcessorOptions {
        max_items: 5,
        ..ProcessorOptions::default()
    };
    let mut processor =
        ChangeFeedProcessor::new(&posts, &leases, "view", "a", options, recorder(&log))?;
    let delivered = processor.drain()?;
    let expected = all_changes(&posts)?;
    assert_eq!(delivered, expected.len());

    let log = log.lock().unwrap();
    let mut per_physical: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (p, change) in log.iter() {
        assert_eq!(*p, posts.physical_partition(&change.partition_key));
        per_physical.entry(*p).or_default().push(change.lsn.0);
    }
    assert!(per_physical.len() > 1, "the workload spans partitions");
    for (p, lsns) in &per_physical {
        assert!(lsns.is_sorted(), "partition {p} out of order: {lsns:?}");
    }
    // Per logical partition, exactly the log's sequence (deletes included).
    let by_key = |changes: &mut dyn Iterator<Item = &Change>| {
        let mut map: BTreeMap<PartitionKey, Vec<(String, ChangeKind, u64)>> = BTreeMap::new();
        for c in changes {
            map.entry(c.partition_key.clone())
                .or_default()
                .push((c.id.clone(), c.kind, c.lsn.0));
        }
        map
    };
    assert_eq!(
        by_key(&mut log.iter().map(|(_, c)| c)),
        by_key(&mut expected.iter())
    );
    assert!(
        log.iter()
            .any(|(_, c)| c.kind == ChangeKind::Delete && c.document.is_none()),
        "deletes are delivered without a document"
    );
    Ok(())
}

#[test]
fn a_crash_between_delivery_and_checkpoint_redelivers_only_that_batch() -> Result {
    let db = Database::in_memory();
    let posts = container(&db, "posts", 1)?;
    let leases = db.create_container("leases", "/id")?;
    for i in 0..10 {
        posts.create_item("p1", json!({"id": format!("d{i}"), "postId": "p1"}), None)?;
    }
    let options = ProcessorOptions {
        max_items: 4,
        ..ProcessorOptions::default()
    };
    let log = Log::default();
    let batches = Arc::new(AtomicU64::new(0));
    let crash = Arc::new(AtomicBool::new(true));
    let handler = {
        let (log, batches, crash) = (log.clone(), batches.clone(), crash.clone());
        move |batch: &ChangeBatch<'_>| {
            log.lock()
                .unwrap()
                .extend(batch.changes.iter().map(|c| (0, c.clone())));
            // The process dies after the second batch was handled, before
            // its checkpoint.
            if batches.fetch_add(1, Ordering::SeqCst) == 1 && crash.load(Ordering::SeqCst) {
                panic!("simulated crash");
            }
            Ok(())
        }
    };
    let mut first = ChangeFeedProcessor::new(
        &posts,
        &leases,
        "view",
        "a",
        options.clone(),
        handler.clone(),
    )?;
    first.run_once()?;
    let crashed = std::panic::catch_unwind(AssertUnwindSafe(|| first.run_once()));
    assert!(crashed.is_err(), "the second batch crashes");
    drop(first);
    crash.store(false, Ordering::SeqCst);

    let mut second = ChangeFeedProcessor::new(&posts, &leases, "view", "a", options, handler)?;
    second.drain()?;
    let ids: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .map(|(_, c)| c.id.clone())
        .collect();
    let expected: Vec<String> = [
        "d0", "d1", "d2", "d3", // first batch, checkpointed
        "d4", "d5", "d6", "d7", // second batch, delivered, crashed before its checkpoint
        "d4", "d5", "d6", "d7", // the same batch again, and only it
        "d8", "d9",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(ids, expected);
    Ok(())
}

#[test]
fn a_handler_error_leaves_the_batch_unacknowledged() -> Result {
    let db = Database::in_memory();
    let posts = container(&db, "posts", 1)?;
    let leases = db.create_container("leases", "/id")?;
    posts.create_item("p1", json!({"id": "d0", "postId": "p1"}), None)?;
    let calls = Arc::new(AtomicU64::new(0));
    let counter = calls.clone();
    let mut processor = ChangeFeedProcessor::new(
        &posts,
        &leases,
        "view",
        "a",
        ProcessorOptions::default(),
        move |_: &ChangeBatch<'_>| {
            if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err("the view is unavailable".into());
            }
            Ok(())
        },
    )?;
    let err = processor.run_once().unwrap_err();
    assert_eq!(err.status(), 500);
    assert!(err.to_string().contains("the view is unavailable"), "{err}");
    assert_eq!(processor.run_once()?.delivered, 1, "delivered again");
    assert_eq!(processor.run_once()?.delivered, 0, "then checkpointed");
    Ok(())
}

#[test]
fn a_reopened_database_resumes_where_the_checkpoint_was() -> Result {
    let dir = tempfile::tempdir()?;
    let log = Log::default();
    {
        let db = Database::open(dir.path())?;
        let posts = container(&db, "posts", 4)?;
        let leases = db.create_container("leases", "/id")?;
        write_workload(&posts, 0)?;
        let mut processor = ChangeFeedProcessor::new(
            &posts,
            &leases,
            "view",
            "a",
            ProcessorOptions::default(),
            recorder(&log),
        )?;
        processor.drain()?;
    }
    let before = log.lock().unwrap().len();
    let db = Database::open(dir.path())?;
    let posts = db.container("posts")?;
    let leases = db.container("leases")?;
    write_workload(&posts, 1)?;
    let mut processor = ChangeFeedProcessor::new(
        &posts,
        &leases,
        "view",
        "a",
        ProcessorOptions::default(),
        recorder(&log),
    )?;
    processor.drain()?;
    let log = log.lock().unwrap();
    let lsns: Vec<u64> = log.iter().map(|(_, c)| c.lsn.0).collect();
    let mut unique = lsns.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        lsns.len(),
        unique.len(),
        "nothing delivered twice across the restart"
    );
    assert_eq!(log.len(), all_changes(&posts)?.len());
    assert!(log[before..].iter().all(|(_, c)| c.id.starts_with("d1-")));
    Ok(())
}

#[test]
fn two_instances_split_the_partitions_and_one_takes_over_expired_leases() -> Result {
    let db = Database::in_memory();
    let posts = container(&db, "posts", 4)?;
    let leases = db.create_container("leases", "/id")?;
    let (now, options) = manual_clock();
    let (log_a, log_b) = (Log::default(), Log::default());
    let mut a = ChangeFeedProcessor::new(
        &posts,
        &leases,
        "view",
        "a",
        options.clone(),
        recorder(&log_a),
    )?;
    let mut b = ChangeFeedProcessor::new(
        &posts,
        &leases,
        "view",
        "b",
        options.clone(),
        recorder(&log_b),
    )?;

    assert_eq!(a.run_once()?.owned, vec![0, 1, 2, 3], "alone, a takes all");
    assert_eq!(b.run_once()?.owned.len(), 1, "b steals one");
    assert_eq!(b.run_once()?.owned.len(), 2, "and another: a fair share");
    assert_eq!(b.run_once()?.owned.len(), 2, "but no more");
    let owned_a = a.run_once()?.owned;
    let owned_b = b.run_once()?.owned;
    assert_eq!(owned_a.len(), 2, "a noticed the steals: {owned_a:?}");
    assert!(owned_a.iter().all(|p| !owned_b.contains(p)));

    write_workload(&posts, 0)?;
    a.drain()?;
    b.drain()?;
    let delivered = |log: &Log| -> Vec<(u32, Change)> { log.lock().unwrap().clone() };
    for (log, owned) in [(&log_a, &owned_a), (&log_b, &owned_b)] {
        assert!(
            delivered(log).iter().all(|(p, _)| owned.contains(p)),
            "an instance delivers only its partitions"
        );
    }
    assert_eq!(
        delivered(&log_a).len() + delivered(&log_b).len(),
        all_changes(&posts)?.len()
    );

    // a stops renewing (it died); after the lease duration b takes over
    // from a's checkpoints.
    write_workload(&posts, 1)?;
    now.fetch_add(11_000, Ordering::SeqCst);
    assert_eq!(b.run_once()?.owned, vec![0, 1, 2, 3]);
    b.drain()?;
    let total = delivered(&log_a).len() + delivered(&log_b).len();
    assert_eq!(
        total,
        all_changes(&posts)?.len(),
        "nothing lost or repeated"
    );
    assert!(
        delivered(&log_b)
            .iter()
            .filter(|(_, c)| c.id.starts_with("d1-"))
            .count()
            == all_changes(&posts)?
                .iter()
                .filter(|c| c.id.starts_with("d1-"))
                .count()
    );
    Ok(())
}

#[test]
fn a_new_view_bootstraps_from_the_beginning_or_starts_now() -> Result {
    let db = Database::in_memory();
    let posts = container(&db, "posts", 4)?;
    let leases = db.create_container("leases", "/id")?;
    write_workload(&posts, 0)?;

    let view: Arc<Mutex<HashMap<String, i64>>> = Arc::default();
    let target = view.clone();
    let mut builder = ChangeFeedProcessor::new(
        &posts,
        &leases,
        "view",
        "a",
        ProcessorOptions::default(),
        move |batch: &ChangeBatch<'_>| {
            let mut view = target.lock().unwrap();
            for change in batch.changes {
                match &change.document {
                    Some(doc) => {
                        view.insert(change.id.clone(), doc["n"].as_i64().unwrap_or(-1));
                    }
                    None => {
                        view.remove(&change.id);
                    }
                }
            }
            Ok(())
        },
    )?;
    builder.drain()?;
    let mut expected = HashMap::new();
    for key in posts.partition_keys()? {
        for doc in posts.read_feed(key, &Default::default())?.items {
            expected.insert(doc.id().to_owned(), doc["n"].as_i64().unwrap_or(-1));
        }
    }
    assert_eq!(*view.lock().unwrap(), expected);

    let log = Log::default();
    let options = ProcessorOptions {
        start_from: StartFrom::Now,
        ..ProcessorOptions::default()
    };
    let mut tail = ChangeFeedProcessor::new(&posts, &leases, "tail", "a", options, recorder(&log))?;
    assert_eq!(tail.drain()?, 0, "nothing before now");
    posts.create_item("p1", json!({"id": "late", "postId": "p1"}), None)?;
    tail.drain()?;
    let ids: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .map(|(_, c)| c.id.clone())
        .collect();
    assert_eq!(ids, ["late"]);
    Ok(())
}

#[test]
fn a_stored_procedure_propagates_posts_into_the_feed() -> Result {
    let db = Database::in_memory();
    let posts = container(&db, "posts", 4)?;
    let leases = db.create_container("leases", "/id")?;
    let feed = db.create_container("feed", "/type")?;
    feed.create_script(ScriptProperties::stored_procedure(
        "addToFeed",
        r#"function addToFeed(doc) {
            if (doc.type !== 'post') return;
            var feed = getContext().getCollection();
            var copy = {id: doc.id, type: 'post', title: doc.title};
            var accepted = feed.upsertDocument(feed.getSelfLink(), copy, function (err) {
                if (err) throw err;
            });
            if (!accepted) throw new Error('not accepted');
        }"#,
    ))?;
    for i in 0..5 {
        let id = format!("p{i}");
        posts.create_item(
            id.as_str(),
            json!({"id": id, "postId": id, "type": "post", "title": format!("post {i}")}),
            None,
        )?;
        posts.create_item(
            id.as_str(),
            json!({"id": format!("c{i}"), "postId": id, "type": "comment"}),
            None,
        )?;
    }
    posts.replace_item(
        "p3",
        "p3",
        json!({"id": "p3", "postId": "p3", "type": "post", "title": "edited"}),
        None,
    )?;
    posts.delete_item("p4", "c4", None)?;
    let mut processor = ChangeFeedProcessor::new(
        &posts,
        &leases,
        "feed",
        "a",
        ProcessorOptions::default(),
        ProcedureHandler::new(&feed, "addToFeed"),
    )?;
    processor.drain()?;
    let mut titles: Vec<(String, String)> = feed
        .read_feed("post", &Default::default())?
        .items
        .iter()
        .map(|d| {
            (
                d.id().to_owned(),
                d["title"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    titles.sort();
    assert_eq!(
        titles,
        [
            ("p0", "post 0"),
            ("p1", "post 1"),
            ("p2", "post 2"),
            ("p3", "edited"),
            ("p4", "post 4")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert!(
        feed.partition_keys()? == vec![PartitionKey::from("post")],
        "comments ran the procedure in their own partition and wrote nothing"
    );
    Ok(())
}

#[test]
fn a_failing_procedure_is_reported_with_its_status_and_retried() -> Result {
    let db = Database::in_memory();
    let posts = container(&db, "posts", 1)?;
    let leases = db.create_container("leases", "/id")?;
    let feed = db.create_container("feed", "/type")?;
    feed.create_script(ScriptProperties::stored_procedure(
        "fail",
        "function fail(doc) { throw new Error('no ' + doc.id); }",
    ))?;
    posts.create_item(
        "p1",
        json!({"id": "p1", "postId": "p1", "type": "post"}),
        None,
    )?;
    let mut processor = ChangeFeedProcessor::new(
        &posts,
        &leases,
        "feed",
        "a",
        ProcessorOptions::default(),
        ProcedureHandler::new(&feed, "fail"),
    )?;
    let err = processor.run_once().unwrap_err();
    assert_eq!(err.status(), 400, "{err}");
    assert!(err.to_string().contains("no p1"), "{err}");
    assert!(processor.run_once().is_err(), "the change comes again");
    Ok(())
}

#[test]
fn a_lease_container_must_be_partitioned_by_id() -> Result {
    let db = Database::in_memory();
    let posts = container(&db, "posts", 1)?;
    let err = ChangeFeedProcessor::new(
        &posts,
        &posts,
        "view",
        "a",
        ProcessorOptions::default(),
        |_: &ChangeBatch<'_>| Ok(()),
    )
    .unwrap_err();
    assert_eq!(err.status(), 400);
    assert!(err.to_string().contains("/id"), "{err}");
    Ok(())
}

#[test]
fn the_background_thread_delivers_until_stopped_and_releases_its_leases() -> Result {
    let db = Database::in_memory();
    let posts = container(&db, "posts", 4)?;
    let leases = db.create_container("leases", "/id")?;
    let log = Log::default();
    let processor = ChangeFeedProcessor::new(
        &posts,
        &leases,
        "view",
        "a",
        ProcessorOptions::default(),
        recorder(&log),
    )?;
    let handle = processor.spawn(Duration::from_millis(1));
    write_workload(&posts, 0)?;
    let expected = all_changes(&posts)?.len();
    // Waits for the outcome (not a timing assertion: the deadline only keeps
    // a broken processor from hanging the test).
    let deadline = Instant::now() + Duration::from_secs(60);
    while log.lock().unwrap().len() < expected && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(handle.last_error(), None);
    let processor = handle.stop()?;
    assert_eq!(log.lock().unwrap().len(), expected);
    assert_eq!(processor.owner(), "a");
    for p in 0..4 {
        let id = format!("view.posts.{p}");
        let lease = leases.read_item(id.as_str(), &id)?;
        assert_eq!(lease["owner"], json!(null), "released on stop");
    }
    Ok(())
}

#[test]
fn a_step_reads_the_log_once_for_all_its_leases() -> Result {
    let dir = tempfile::tempdir()?;
    let storage = FaultyStorage::new(SqliteStorage::open(
        &dir.path().join("partita.db"),
        partita::Durability::None,
    )?);
    let counts = storage.faults().clone();
    let db = Database::with_storage(Box::new(storage), partita::Options::default())?;
    let posts = container(&db, "posts", 64)?;
    let leases = db.create_container("leases", "/id")?;
    write_workload(&posts, 0)?;
    let log = Log::default();
    let mut processor = ChangeFeedProcessor::new(
        &posts,
        &leases,
        "view",
        "a",
        ProcessorOptions::default(),
        recorder(&log),
    )?;
    let before = counts.change_reads();
    let report = processor.run_once()?;
    assert_eq!(report.owned.len(), 64, "one instance holds every lease");
    assert_eq!(
        counts.change_reads() - before,
        1,
        "one read of the log, not 64"
    );
    assert_eq!(report.delivered, all_changes(&posts)?.len());
    // A lease ahead of the others (moved on by hand) keeps its place and
    // gets only what follows it; the others get the rest.
    let p = posts.physical_partition(&PartitionKey::from("p1"));
    let id = format!("view.posts.{p}");
    write_workload(&posts, 1)?;
    let head = all_changes(&posts)?.last().map_or(0, |c| c.lsn.0);
    let mut lease = leases.read_item(id.as_str(), &id)?.into_value();
    lease["continuation"] = json!(head);
    leases.replace_item(id.as_str(), &id, lease, None)?;
    log.lock().unwrap().clear();
    processor.run_once()?;
    let delivered = log.lock().unwrap();
    assert!(
        delivered.iter().all(|(q, _)| *q != p),
        "nothing past the head"
    );
    let others = all_changes(&posts)?
        .into_iter()
        .filter(|c| c.id.starts_with("d1-") && posts.physical_partition(&c.partition_key) != p)
        .count();
    assert_eq!(delivered.len(), others);
    let lease = leases.read_item(id.as_str(), &id)?;
    assert_eq!(lease["continuation"], json!(head), "not moved back");
    Ok(())
}
