//! Behaviour of the engine through its public API: containers, documents and
//! their system properties, point operations and their errors, transactions,
//! isolation, durability across reopen, the change log, the read feed and
//! storage failures.

use std::sync::Arc;
use std::time::Duration;

use engine::storage::{Lsn, MemoryStorage};
use engine::testing::{CommitFault, FaultyStorage};
use engine::{
    ChangeKind, ContainerProperties, Database, Durability, Error, ErrorCode, FeedOptions,
    ItemOptions, Options, PartitionKey, ScriptKind, ScriptProperties, TriggerOperation,
    TriggerType,
};
use serde_json::{Value, json};

type Result<T = ()> = anyhow::Result<T>;

fn posts(db: &Database) -> engine::Container {
    db.create_container("posts", "/postId")
        .expect("create posts")
}

fn status(err: Error) -> u16 {
    err.status()
}

#[test]
fn containers_are_created_once_and_validated() -> Result {
    let db = Database::in_memory();
    posts(&db);
    assert_eq!(
        status(db.create_container("posts", "/postId").unwrap_err()),
        409
    );
    assert_eq!(status(db.container("nope").unwrap_err()), 404);
    assert_eq!(status(db.create_container("a/b", "/x").unwrap_err()), 400);
    assert_eq!(
        status(db.create_container("ok", "postId").unwrap_err()),
        400
    );
    let mut props = ContainerProperties::new("zero", "/k");
    props.physical_partitions = 0;
    assert_eq!(status(db.create_container_with(props).unwrap_err()), 400);
    assert_eq!(
        db.create_container_if_not_exists("posts", "/postId")?.id(),
        "posts"
    );
    assert_eq!(
        status(
            db.create_container_if_not_exists("posts", "/other")
                .err()
                .unwrap()
        ),
        400
    );
    let ids: Vec<String> = db.containers().into_iter().map(|c| c.id).collect();
    assert_eq!(ids, ["posts"]);
    assert_eq!(db.container("posts")?.properties().physical_partitions, 4);
    Ok(())
}

#[test]
fn point_operations_round_trip_with_system_properties() -> Result {
    let db = Database::in_memory();
    let posts = posts(&db);
    let created = posts.create_item(
        "p1",
        json!({"id": "p1", "postId": "p1", "title": "a"}),
        None,
    )?;
    for prop in ["_rid", "_self", "_etag", "_ts"] {
        assert!(created.get(prop).is_some(), "{prop} missing from {created}");
    }
    assert!(created["_self"].as_str().unwrap().starts_with("dbs/"));
    assert!(
        created["_self"]
            .as_str()
            .unwrap()
            .ends_with(&format!("{}/", created["_rid"].as_str().unwrap()))
    );
    assert_eq!(posts.read_item("p1", "p1")?, created);

    // Callers' values for system properties are overwritten.
    let replaced = posts.replace_item(
        "p1",
        "p1",
        json!({"id": "p1", "postId": "p1", "title": "b", "_etag": "forged", "_rid": "forged"}),
        None,
    )?;
    assert_eq!(replaced["title"], "b");
    assert_ne!(
        replaced.etag(),
        created.etag(),
        "etag changes on every write"
    );
    assert_ne!(replaced.etag(), "forged");
    assert_eq!(replaced["_rid"], created["_rid"], "a replace keeps the rid");

    let upserted = posts.upsert_item(
        "p1",
        json!({"id": "p1", "postId": "p1", "title": "c"}),
        None,
    )?;
    assert_ne!(upserted.etag(), replaced.etag());
    let fresh = posts.upsert_item("p1", json!({"id": "c1", "postId": "p1"}), None)?;
    assert_ne!(fresh["_rid"], created["_rid"]);

    posts.delete_item("p1", "p1", None)?;
    assert_eq!(status(posts.read_item("p1", "p1").unwrap_err()), 404);
    let recreated = posts.create_item("p1", json!({"id": "p1", "postId": "p1"}), None)?;
    assert_ne!(
        recreated["_rid"], created["_rid"],
        "a re-created document gets a new rid"
    );
    // Property order is kept as written, system properties after.
    let keys: Vec<&String> = recreated.as_object().unwrap().keys().collect();
    assert_eq!(keys[..2], ["id", "postId"]);
    Ok(())
}

#[test]
fn errors_carry_status_codes_and_name_what_was_wrong() -> Result {
    let db = Database::in_memory();
    let posts = posts(&db);
    posts.create_item("p1", json!({"id": "p1", "postId": "p1"}), None)?;

    let conflict = posts
        .create_item("p1", json!({"id": "p1", "postId": "p1"}), None)
        .unwrap_err();
    assert_eq!(conflict.code(), ErrorCode::CONFLICT);
    let message = conflict.to_string();
    assert!(
        message.contains("\"p1\"") && message.contains("posts") && message.contains(r#"["p1"]"#),
        "{message}"
    );

    let missing = posts.read_item("p1", "nope").unwrap_err();
    assert_eq!(missing.status(), 404);
    assert!(missing.to_string().contains("nope"));
    assert_eq!(
        status(
            posts
                .replace_item("p1", "nope", json!({"id": "nope", "postId": "p1"}), None)
                .unwrap_err()
        ),
        404
    );
    assert_eq!(
        status(posts.delete_item("p1", "nope", None).unwrap_err()),
        404
    );

    for (doc, what) in [
        (json!([1]), "not an object"),
        (json!("x"), "not an object"),
        (json!({"postId": "p1"}), "no id"),
        (json!({"id": 7, "postId": "p1"}), "numeric id"),
        (json!({"id": "", "postId": "p1"}), "empty id"),
        (json!({"id": "a/b", "postId": "p1"}), "slash"),
        (json!({"id": "a#b", "postId": "p1"}), "hash"),
        (json!({"id": "x".repeat(256), "postId": "p1"}), "long id"),
        (json!({"id": "x", "postId": {"a": 1}}), "object key"),
        (json!({"id": "x", "postId": [1]}), "array key"),
    ] {
        let err = posts.create_item("p1", doc, None).unwrap_err();
        assert_eq!(err.status(), 400, "{what}: {err}");
    }

    // A partition key given with the request that differs from the document's.
    let mismatch = posts
        .create_item("p2", json!({"id": "x", "postId": "p1"}), None)
        .unwrap_err();
    assert_eq!(mismatch.status(), 400);
    assert!(
        mismatch.to_string().contains(r#"["p2"]"#) && mismatch.to_string().contains(r#"["p1"]"#)
    );
    // The key is immutable: a replace cannot move a document.
    let moved = posts
        .replace_item("p1", "p1", json!({"id": "p1", "postId": "p9"}), None)
        .unwrap_err();
    assert_eq!(moved.status(), 400);
    // A body with another id renames the document (as Cosmos DB does);
    // onto a taken id it is a 409.
    posts
        .create_item("p1", json!({"id": "taken", "postId": "p1"}), None)
        .unwrap();
    assert_eq!(
        status(
            posts
                .replace_item("p1", "p1", json!({"id": "taken", "postId": "p1"}), None)
                .unwrap_err()
        ),
        409
    );
    posts.delete_item("p1", "taken", None).unwrap();
    // A rename refused for its size changes nothing: the old id stays.
    let mut txn = posts.begin("p1").unwrap();
    let big = json!({"id": "renamed", "postId": "p1", "blob": "x".repeat(2 * 1024 * 1024)});
    assert_eq!(txn.replace_item("p1", big, None).unwrap_err().status(), 413);
    assert!(txn.get_item("p1").is_some(), "the failed rename kept p1");
    assert!(txn.get_item("renamed").is_none());
    txn.commit().unwrap();
    assert!(posts.read_item("p1", "p1").is_ok());

    let big = json!({"id": "big", "postId": "p1", "blob": "x".repeat(2 * 1024 * 1024)});
    let too_large = posts.create_item("p1", big, None).unwrap_err();
    assert_eq!(too_large.code(), ErrorCode::TOO_LARGE);
    assert!(too_large.to_string().contains("big"));
    let just_fits =
        json!({"id": "fits", "postId": "p1", "blob": "x".repeat(2 * 1024 * 1024 - 300)});
    posts.create_item("p1", just_fits, None)?;

    // Nesting: 128 levels are accepted, deeper documents are refused (even a
    // million levels deep, without overflowing the stack).
    let nest = |depth: usize, id: &str| {
        let mut v = json!(1);
        for _ in 0..depth {
            v = Value::Array(vec![v]);
        }
        let mut doc = json!({"id": id, "postId": "p1"});
        doc["deep"] = v; // (`json!` would serialize `v` recursively)
        doc
    };
    posts.create_item("p1", nest(127, "ok"), None)?;
    posts.delete_item("p1", "ok", None)?;
    assert_eq!(
        status(
            posts
                .create_item("p1", nest(128, "deep"), None)
                .unwrap_err()
        ),
        400
    );
    assert_eq!(
        status(
            posts
                .create_item("p1", nest(1_000_000, "deeper"), None)
                .unwrap_err()
        ),
        400
    );
    let mut bad_id = nest(1_000_000, "bad/id");
    bad_id["id"] = json!("bad/id");
    assert_eq!(
        status(posts.create_item("p1", bad_id, None).unwrap_err()),
        400
    );

    // Nothing above changed the partition beyond the two successful creates.
    let ids: Vec<String> = posts
        .read_feed("p1", &FeedOptions::default())?
        .items
        .iter()
        .map(|d| d.id().to_owned())
        .collect();
    assert_eq!(ids, ["p1", "fits"]);
    Ok(())
}

#[test]
fn if_match_preconditions() -> Result {
    let db = Database::in_memory();
    let posts = posts(&db);
    let v1 = posts.create_item("p1", json!({"id": "p1", "postId": "p1", "n": 1}), None)?;
    let v2 = posts.replace_item(
        "p1",
        "p1",
        json!({"id": "p1", "postId": "p1", "n": 2}),
        Some(&ItemOptions::if_match(v1.etag())),
    )?;
    let stale = ItemOptions::if_match(v1.etag());
    let err = posts
        .replace_item(
            "p1",
            "p1",
            json!({"id": "p1", "postId": "p1", "n": 3}),
            Some(&stale),
        )
        .unwrap_err();
    assert_eq!(err.status(), 412);
    assert!(err.to_string().contains(v2.etag()), "{err}");
    assert_eq!(
        status(
            posts
                .upsert_item("p1", json!({"id": "p1", "postId": "p1"}), Some(&stale))
                .unwrap_err()
        ),
        412
    );
    assert_eq!(
        status(posts.delete_item("p1", "p1", Some(&stale)).unwrap_err()),
        412
    );
    // An upsert that creates ignores If-Match, as on the service (the
    // Python SDK's backwards-compatibility test upserts new items with a
    // random etag against the emulator).
    posts.upsert_item("p1", json!({"id": "new", "postId": "p1"}), Some(&stale))?;
    posts.delete_item("p1", "new", None)?;
    assert_eq!(posts.read_item("p1", "p1")?["n"], 2);
    let v3 = posts.upsert_item(
        "p1",
        json!({"id": "p1", "postId": "p1", "n": 3}),
        Some(&ItemOptions::if_match(v2.etag())),
    )?;
    posts.delete_item("p1", "p1", Some(&ItemOptions::if_match(v3.etag())))?;
    Ok(())
}

#[test]
fn partition_keys_of_every_kind_including_none() -> Result {
    let db = Database::in_memory();
    let c = db.create_container("things", "/a/b")?;
    c.create_item("s", json!({"id": "1", "a": {"b": "s"}}), None)?;
    c.create_item(5, json!({"id": "1", "a": {"b": 5}}), None)?;
    c.create_item(5.0, json!({"id": "2", "a": {"b": 5.0}}), None)?;
    c.create_item(true, json!({"id": "1", "a": {"b": true}}), None)?;
    c.create_item(
        PartitionKey::Null,
        json!({"id": "1", "a": {"b": null}}),
        None,
    )?;
    c.create_item(PartitionKey::None, json!({"id": "1"}), None)?;
    c.create_item(PartitionKey::None, json!({"id": "2", "a": {}}), None)?;
    // The same id lives independently in each logical partition.
    assert_eq!(c.read_item(PartitionKey::None, "1")?["id"], "1");
    assert!(c.read_item(PartitionKey::None, "1")?.get("a").is_none());
    assert_eq!(
        status(c.read_item(PartitionKey::Null, "2").unwrap_err()),
        404,
        "null is not none"
    );
    assert_eq!(
        c.read_feed(5, &FeedOptions::default())?.items.len(),
        2,
        "5 and 5.0 are one key"
    );
    assert_eq!(
        c.partition_keys()?,
        [
            PartitionKey::None,
            PartitionKey::Null,
            true.into(),
            5.into(),
            "s".into()
        ]
    );
    // String keys are limited to 2,048 bytes, as in Cosmos DB.
    let long = "k".repeat(2049);
    let err = c
        .create_item(long.as_str(), json!({"id": "1", "a": {"b": long}}), None)
        .unwrap_err();
    assert_eq!(err.status(), 400);
    assert!(err.to_string().contains("2048"), "{err}");
    let longest = "k".repeat(2048);
    c.create_item(
        longest.as_str(),
        json!({"id": "1", "a": {"b": longest}}),
        None,
    )?;
    // A document without the key must be addressed as None, not as null.
    assert_eq!(
        status(
            c.create_item(PartitionKey::Null, json!({"id": "3"}), None)
                .unwrap_err()
        ),
        400
    );
    c.transaction(PartitionKey::None, |txn| {
        let mut doc = txn.read_item("1")?.into_value();
        doc["x"] = json!(1);
        txn.replace_item("1", doc, None)?;
        Ok::<_, Error>(())
    })?;
    assert_eq!(c.read_item(PartitionKey::None, "1")?["x"], 1);
    Ok(())
}

#[test]
fn a_transaction_rolls_back_to_its_mark_and_commits_the_rest() -> Result {
    use host_api::Collection;
    let db = Database::in_memory();
    let posts = posts(&db);
    posts.create_item(
        "p1",
        json!({"id": "p1", "postId": "p1", "commentCount": 0}),
        None,
    )?;
    posts.transaction("p1", |txn| {
        Collection::create(txn, json!({"id": "before", "postId": "p1"}))?;
        let kept = Collection::stats(txn);
        assert!(Collection::mark(txn));
        Collection::replace(
            txn,
            "p1",
            json!({"id": "p1", "postId": "p1", "commentCount": 9}),
            Default::default(),
        )?;
        Collection::create(txn, json!({"id": "after", "postId": "p1"}))?;
        Collection::delete(txn, "before", Default::default())?;
        Collection::roll_back(txn);
        assert_eq!(Collection::stats(txn), kept, "the counters of the mark");
        assert_eq!(Collection::read(txn, "p1")?.value()["commentCount"], 0);
        assert_eq!(
            Collection::read(txn, "after").unwrap_err().code.as_u16(),
            404
        );
        // Written after the roll back, and again to the same ids.
        Collection::create(txn, json!({"id": "after", "postId": "p1", "n": 2}))?;
        Ok::<_, anyhow::Error>(())
    })?;
    assert_eq!(posts.read_item("p1", "p1")?["commentCount"], 0);
    assert_eq!(posts.read_item("p1", "before")?["id"], "before");
    assert_eq!(posts.read_item("p1", "after")?["n"], 2);
    Ok(())
}

#[test]
fn transactions_commit_all_or_nothing() -> Result {
    let db = Database::in_memory();
    let posts = posts(&db);
    posts.create_item(
        "p1",
        json!({"id": "p1", "postId": "p1", "commentCount": 0}),
        None,
    )?;

    // An error anywhere rolls back every write, including earlier ones.
    let err = posts
        .transaction("p1", |txn| {
            txn.replace_item(
                "p1",
                json!({"id": "p1", "postId": "p1", "commentCount": 1}),
                None,
            )?;
            txn.create_item(json!({"id": "c1", "postId": "p1"}))?;
            assert_eq!(
                txn.read_item("p1")?["commentCount"],
                1,
                "a transaction sees its own writes"
            );
            txn.create_item(json!({"id": "c1", "postId": "p1"}))?; // 409
            Ok::<_, Error>(())
        })
        .unwrap_err();
    assert_eq!(err.status(), 409);
    assert_eq!(posts.read_item("p1", "p1")?["commentCount"], 0);
    assert_eq!(status(posts.read_item("p1", "c1").unwrap_err()), 404);
    assert!(
        posts
            .read_changes(Lsn::ZERO, 100)?
            .iter()
            .all(|c| c.id != "c1")
    );

    // A write to another partition is refused inside a transaction.
    let err = posts
        .transaction("p1", |txn| {
            txn.create_item(json!({"id": "c2", "postId": "p1"}))?;
            txn.create_item(json!({"id": "x", "postId": "p2"}))?;
            Ok::<_, Error>(())
        })
        .unwrap_err();
    assert!(matches!(err, Error::CrossPartition { .. }), "{err}");
    assert_eq!(status(posts.read_item("p1", "c2").unwrap_err()), 404);

    // Dropping or rolling back discards.
    let mut txn = posts.begin("p1")?;
    txn.create_item(json!({"id": "c3", "postId": "p1"}))?;
    drop(txn);
    let mut txn = posts.begin("p1")?;
    txn.create_item(json!({"id": "c3", "postId": "p1"}))?;
    txn.rollback();
    assert_eq!(status(posts.read_item("p1", "c3").unwrap_err()), 404);

    // Create, then delete in one transaction: no effect, nothing logged.
    let before = posts.read_changes(Lsn::ZERO, 100)?.len();
    let lsn = posts.transaction("p1", |txn| {
        txn.create_item(json!({"id": "tmp", "postId": "p1"}))?;
        txn.delete_item("tmp", None)?;
        assert_eq!(status(txn.read_item("tmp").unwrap_err()), 404);
        Ok::<_, Error>(())
    });
    lsn?;
    assert_eq!(posts.read_changes(Lsn::ZERO, 100)?.len(), before);

    // Delete and re-create in one transaction: one document, with a new rid.
    let old_rid = posts.read_item("p1", "p1")?["_rid"].clone();
    posts.transaction("p1", |txn| {
        txn.delete_item("p1", None)?;
        txn.create_item(json!({"id": "p1", "postId": "p1", "commentCount": 7}))?;
        Ok::<_, Error>(())
    })?;
    let copies: Vec<Value> = posts
        .read_feed("p1", &FeedOptions::default())?
        .items
        .iter()
        .filter(|d| d.id() == "p1")
        .map(|d| d.value().clone())
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert_eq!(copies[0]["commentCount"], 7);
    assert_ne!(copies[0]["_rid"], old_rid);

    // The view merges committed documents with the transaction's writes, in rid order.
    posts.transaction("p1", |txn| {
        txn.create_item(json!({"id": "c4", "postId": "p1"}))?;
        let ids: Vec<String> = txn.view().documents().map(|d| d.id().to_owned()).collect();
        assert_eq!(ids, ["p1", "c4"]);
        Ok::<_, Error>(())
    })?;
    Ok(())
}

#[test]
fn readers_never_see_uncommitted_writes_and_never_wait() -> Result {
    let db = Database::in_memory();
    let posts = posts(&db);
    posts.create_item("p1", json!({"id": "p1", "postId": "p1", "n": 0}), None)?;
    let mut txn = posts.begin("p1")?;
    txn.replace_item("p1", json!({"id": "p1", "postId": "p1", "n": 1}), None)?;
    // Another thread reads while the writer holds the partition.
    let reader = posts.clone();
    let seen = std::thread::spawn(move || reader.read_item("p1", "p1").map(|d| d["n"].clone()))
        .join()
        .unwrap()?;
    assert_eq!(seen, 0);
    let snapshot = posts.snapshot(&"p1".into())?;
    txn.commit()?;
    assert_eq!(posts.read_item("p1", "p1")?["n"], 1);
    assert_eq!(
        snapshot.documents().next().unwrap()["n"],
        0,
        "an old snapshot stays as it was"
    );
    Ok(())
}

#[test]
fn writers_on_one_partition_serialize_and_others_proceed() -> Result {
    let options = Options {
        lock_timeout: Duration::from_millis(100),
        ..Options::default()
    };
    let db = Database::with_storage(Box::new(MemoryStorage::new()), options)?;
    let posts = posts(&db);
    let held = posts.begin("p1")?;
    let other = posts.clone();
    let (same, different) = std::thread::spawn(move || {
        let same = other
            .create_item("p1", json!({"id": "a", "postId": "p1"}), None)
            .map(|_| ());
        let different = other
            .create_item("p2", json!({"id": "a", "postId": "p2"}), None)
            .map(|_| ());
        (same, different)
    })
    .join()
    .unwrap();
    let timeout = same.unwrap_err();
    assert_eq!(timeout.status(), 408);
    assert!(timeout.is_retryable());
    different?;
    drop(held);
    posts.create_item("p1", json!({"id": "a", "postId": "p1"}), None)?;
    Ok(())
}

/// Many threads increment counters on a few shared partitions through
/// read-modify-write transactions; serializability means no update is lost.
fn increments_lose_no_update(db: &Database, threads: usize, per_thread: usize) -> Result {
    let counters = db.create_container("counters", "/pk")?;
    let partitions = ["a", "b", "c"];
    for pk in partitions {
        counters.create_item(pk, json!({"id": "n", "pk": pk, "value": 0}), None)?;
    }
    std::thread::scope(|s| {
        for t in 0..threads {
            let counters = counters.clone();
            s.spawn(move || {
                for i in 0..per_thread {
                    let pk = partitions[(t + i) % partitions.len()];
                    counters
                        .transaction(pk, |txn| {
                            let mut doc = txn.read_item("n")?.into_value();
                            doc["value"] = json!(doc["value"].as_i64().unwrap() + 1);
                            txn.replace_item("n", doc, None)?;
                            Ok::<_, Error>(())
                        })
                        .expect("increment");
                }
            });
        }
    });
    let total: i64 = partitions
        .iter()
        .map(|pk| {
            counters.read_item(*pk, "n").unwrap()["value"]
                .as_i64()
                .unwrap()
        })
        .sum();
    assert_eq!(total, (threads * per_thread) as i64);
    let changes = counters.read_changes(Lsn::ZERO, usize::MAX)?;
    assert_eq!(
        changes.len(),
        partitions.len() + threads * per_thread,
        "one change per committed increment"
    );
    // The log holds each partition's increments in the order they were
    // made: each built on the one logged before it (a writer that began
    // before the previous commit was durable included).
    for pk in partitions {
        let values: Vec<i64> = changes
            .iter()
            .filter(|c| c.partition_key == PartitionKey::from(pk))
            .map(|c| {
                c.document.as_ref().unwrap().value()["value"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        let serial: Vec<i64> = (0..values.len() as i64).collect();
        assert_eq!(values, serial, "partition {pk}");
    }
    Ok(())
}

#[test]
fn concurrent_read_modify_write_loses_no_update_in_memory() -> Result {
    increments_lose_no_update(&Database::in_memory(), 8, 500)
}

#[test]
fn concurrent_read_modify_write_loses_no_update_durably() -> Result {
    let dir = tempfile::tempdir()?;
    increments_lose_no_update(&Database::open(dir.path())?, 16, 60)?;
    // The database above is closed; the counts survive a reopen.
    let db = Database::open(dir.path())?;
    let counters = db.container("counters")?;
    let total: i64 = ["a", "b", "c"]
        .iter()
        .map(|pk| {
            counters.read_item(*pk, "n").unwrap()["value"]
                .as_i64()
                .unwrap()
        })
        .sum();
    assert_eq!(total, 16 * 60);
    Ok(())
}

#[test]
fn read_feed_pages_in_insertion_order() -> Result {
    let db = Database::in_memory();
    let posts = posts(&db);
    for i in [3, 1, 2, 5, 4] {
        posts.create_item("p1", json!({"id": format!("d{i}"), "postId": "p1"}), None)?;
    }
    posts.replace_item(
        "p1",
        "d3",
        json!({"id": "d3", "postId": "p1", "edited": true}),
        None,
    )?;
    let mut ids = Vec::new();
    let mut options = FeedOptions {
        max_item_count: Some(2),
        continuation: None,
    };
    let mut pages = 0;
    loop {
        let page = posts.read_feed("p1", &options)?;
        pages += 1;
        ids.extend(page.items.iter().map(|d| d.id().to_owned()));
        // A write after the first page does not disturb the pages still to come.
        if pages == 1 {
            posts.create_item("p1", json!({"id": "d6", "postId": "p1"}), None)?;
        }
        match page.continuation {
            Some(token) => options.continuation = Some(token),
            None => break,
        }
    }
    assert_eq!(ids, ["d3", "d1", "d2", "d5", "d4", "d6"]);
    assert_eq!(pages, 3);
    let bad = FeedOptions {
        continuation: Some("garbage".into()),
        ..FeedOptions::default()
    };
    assert_eq!(status(posts.read_feed("p1", &bad).unwrap_err()), 400);
    assert!(
        posts
            .read_feed("empty", &FeedOptions::default())?
            .items
            .is_empty()
    );
    Ok(())
}

#[test]
fn change_log_orders_committed_transactions_by_lsn() -> Result {
    let db = Database::in_memory();
    let posts = posts(&db);
    posts.create_item("p1", json!({"id": "a", "postId": "p1"}), None)?;
    posts.transaction("p2", |txn| {
        txn.create_item(json!({"id": "b", "postId": "p2"}))?;
        txn.create_item(json!({"id": "c", "postId": "p2"}))?;
        Ok::<_, Error>(())
    })?;
    posts.replace_item("p1", "a", json!({"id": "a", "postId": "p1", "v": 2}), None)?;
    posts.delete_item("p2", "b", None)?;
    let changes = posts.read_changes(Lsn::ZERO, 100)?;
    let summary: Vec<(u64, &str, ChangeKind)> = changes
        .iter()
        .map(|c| (c.lsn.0, c.id.as_str(), c.kind))
        .collect();
    assert_eq!(
        summary,
        [
            (1, "a", ChangeKind::Create),
            (2, "b", ChangeKind::Create),
            (2, "c", ChangeKind::Create),
            (3, "a", ChangeKind::Replace),
            (4, "b", ChangeKind::Delete),
        ]
    );
    assert_eq!(changes[3].document.as_ref().unwrap()["v"], 2);
    assert!(changes[4].document.is_none());
    // Paging never splits a transaction.
    let first = posts.read_changes(Lsn::ZERO, 2)?;
    assert_eq!(first.len(), 3);
    let rest = posts.read_changes(first.last().unwrap().lsn, 100)?;
    assert_eq!(rest.len(), 2);
    assert!(
        db.create_container("other", "/k")?
            .read_changes(Lsn::ZERO, 10)?
            .is_empty()
    );
    Ok(())
}

#[test]
fn physical_partitions_are_configurable_and_stable() -> Result {
    let db = Database::in_memory();
    let mut props = ContainerProperties::new("feed", "/type");
    props.physical_partitions = 16;
    let feed = db.create_container_with(props)?;
    let key = PartitionKey::from("post");
    let p = feed.physical_partition(&key);
    assert!(p < 16);
    assert_eq!(p, engine::physical_partition(&key, 16));
    // Pinned values (computed independently: FNV-1a 64 of `["p1"]`, `[{}]`,
    // `[42]`): the mapping is part of the durable format.
    assert_eq!(engine::physical_partition(&"p1".into(), 4), 2);
    assert_eq!(engine::physical_partition(&PartitionKey::None, 4), 1);
    assert_eq!(engine::physical_partition(&42.into(), 1000), 943);
    Ok(())
}

#[test]
fn everything_survives_reopen() -> Result {
    let dir = tempfile::tempdir()?;
    let etag_before;
    {
        let db = Database::open(dir.path())?;
        let posts = posts(&db);
        let mut props = ContainerProperties::new("users", "/userId");
        props.physical_partitions = 8;
        db.create_container_with(props)?;
        posts.create_item("p1", json!({"id": "p1", "postId": "p1", "n": 1}), None)?;
        posts.create_item(PartitionKey::None, json!({"id": "loose"}), None)?;
        posts.create_item("p1", json!({"id": "gone", "postId": "p1"}), None)?;
        posts.delete_item("p1", "gone", None)?;
        etag_before = posts
            .replace_item(
                "p1",
                "p1",
                json!({"id": "p1", "postId": "p1", "n": 2}),
                None,
            )?
            .etag()
            .to_owned();
        // A second open of the same directory is refused while this one lives.
        let locked = Database::open(dir.path()).expect_err("second open must fail");
        assert!(matches!(locked, Error::Locked { .. }), "{locked}");
        assert_eq!(locked.status(), 503);
    }
    let db = Database::open(dir.path())?;
    assert_eq!(db.container("users")?.properties().physical_partitions, 8);
    let posts = db.container("posts")?;
    let p1 = posts.read_item("p1", "p1")?;
    assert_eq!(p1["n"], 2);
    assert_eq!(p1.etag(), etag_before);
    assert_eq!(posts.read_item(PartitionKey::None, "loose")?["id"], "loose");
    assert_eq!(status(posts.read_item("p1", "gone").unwrap_err()), 404);
    assert_eq!(posts.read_changes(Lsn::ZERO, 100)?.len(), 5);
    // New writes continue the sequences: fresh etags, rids and LSNs.
    let p1b = posts.replace_item(
        "p1",
        "p1",
        json!({"id": "p1", "postId": "p1", "n": 3}),
        None,
    )?;
    assert_ne!(p1b.etag(), etag_before);
    let again = posts.create_item("p1", json!({"id": "gone", "postId": "p1"}), None)?;
    assert!(posts.read_changes(Lsn::ZERO, 100)?.iter().all(|c| {
        c.document
            .as_ref()
            .is_none_or(|d| d["_rid"] != again["_rid"] || c.id == "gone")
    }));
    let changes = posts.read_changes(Lsn(5), 100)?;
    assert_eq!(changes.iter().map(|c| c.lsn.0).collect::<Vec<_>>(), [6, 7]);
    Ok(())
}

#[test]
fn durability_none_still_persists_across_a_clean_close() -> Result {
    let dir = tempfile::tempdir()?;
    {
        let db = Database::open_with(
            dir.path(),
            Options {
                durability: Durability::None,
                ..Options::default()
            },
        )?;
        posts(&db).create_item("p1", json!({"id": "p1", "postId": "p1"}), None)?;
    }
    assert_eq!(
        Database::open(dir.path())?
            .container("posts")?
            .read_item("p1", "p1")?
            .id(),
        "p1"
    );
    Ok(())
}

/// A storage that fails the `n`th commit and every later one, as a disk
/// whose fsync failed would.
fn failing_storage(fail_at: u64) -> FaultyStorage<MemoryStorage> {
    let storage = FaultyStorage::new(MemoryStorage::new());
    storage.faults().fail_commits_from(
        fail_at,
        CommitFault::before_write("fsync: input/output error (injected)"),
    );
    storage
}

#[test]
fn a_storage_failure_makes_the_store_refuse_writes() -> Result {
    let storage = failing_storage(3);
    let db = Database::with_storage(Box::new(storage), Options::default())?;
    let posts = posts(&db);
    posts.create_item("p1", json!({"id": "a", "postId": "p1"}), None)?;
    posts.create_item("p1", json!({"id": "b", "postId": "p1"}), None)?;
    let failed = posts
        .transaction("p1", |txn| {
            txn.create_item(json!({"id": "c", "postId": "p1"}))?;
            txn.replace_item("a", json!({"id": "a", "postId": "p1", "v": 2}), None)?;
            Ok::<_, Error>(())
        })
        .unwrap_err();
    assert_eq!(failed.status(), 500);
    // Nothing of the failed transaction is visible.
    assert_eq!(status(posts.read_item("p1", "c").unwrap_err()), 404);
    assert!(posts.read_item("p1", "a")?.get("v").is_none());
    // Every later write is refused without reaching the storage; reads work.
    let refused = posts
        .create_item("p2", json!({"id": "d", "postId": "p2"}), None)
        .unwrap_err();
    assert_eq!(refused.status(), 503);
    assert!(refused.to_string().contains("injected"), "{refused}");
    assert_eq!(status(db.create_container("more", "/k").unwrap_err()), 503);
    assert_eq!(posts.read_item("p1", "b")?.id(), "b");
    assert!(db.failure().is_some());
    Ok(())
}

#[test]
fn documents_are_shared_not_copied_by_reads() -> Result {
    let db = Database::in_memory();
    let posts = posts(&db);
    posts.create_item("p1", json!({"id": "p1", "postId": "p1"}), None)?;
    let a = posts.read_item("p1", "p1")?;
    let b = posts.read_item("p1", "p1")?;
    assert!(std::ptr::eq(a.value(), b.value()));
    let value: Value = a.into_value();
    assert_eq!(value["id"], "p1");
    let _ = Arc::new(b);
    Ok(())
}

#[test]
fn scripts_are_stored_versioned_and_durable() -> Result {
    let dir = tempfile::tempdir()?;
    let (v1, in_flight);
    {
        let db = Database::open(dir.path())?;
        let posts = posts(&db);
        v1 = posts.create_script(ScriptProperties::stored_procedure(
            "createComment",
            "function f() {}",
        ))?;
        assert_eq!(v1.kind, ScriptKind::StoredProcedure);
        assert_eq!(
            status(
                posts
                    .create_script(ScriptProperties::stored_procedure(
                        "createComment",
                        "function g() {}"
                    ))
                    .unwrap_err()
            ),
            409
        );
        in_flight = posts.read_script(ScriptKind::StoredProcedure, "createComment")?;
        let v2 = posts.replace_script(ScriptProperties::stored_procedure(
            "createComment",
            "function g() {}",
        ))?;
        assert!(v2.version > v1.version, "a replace makes a new version");
        assert_eq!(
            &*in_flight.body, b"function f() {}",
            "a caller holding the old version keeps it"
        );
        assert_eq!(
            &*posts
                .read_script(ScriptKind::StoredProcedure, "createComment")?
                .body,
            b"function g() {}"
        );
        assert_eq!(
            status(
                posts
                    .replace_script(ScriptProperties::stored_procedure("nope", "x"))
                    .unwrap_err()
            ),
            404
        );

        let trigger = ScriptProperties::trigger(
            "truncateFeed",
            "function t() {}",
            TriggerType::Post,
            TriggerOperation::Create,
        );
        posts.create_script(trigger)?;
        // The same id may exist once per kind.
        posts.create_script(ScriptProperties::user_defined_function(
            "truncateFeed",
            "function u(x) { return x; }",
        ))?;
        let mut untyped = ScriptProperties::trigger(
            "bad",
            "function t() {}",
            TriggerType::Pre,
            TriggerOperation::All,
        );
        untyped.trigger_type = None;
        let err = posts.create_script(untyped).unwrap_err();
        assert_eq!(err.status(), 400);
        assert!(err.to_string().contains("triggerType"), "{err}");
        for bad in [
            ScriptProperties::stored_procedure("a/b", "function f() {}"),
            ScriptProperties::stored_procedure("empty", "  "),
            ScriptProperties {
                body: vec![0xff, 0xfe],
                ..ScriptProperties::stored_procedure("bin", "")
            },
        ] {
            assert_eq!(status(posts.create_script(bad).unwrap_err()), 400);
        }
        let huge =
            ScriptProperties::stored_procedure("huge", "x".repeat(engine::MAX_SCRIPT_SIZE + 1));
        assert_eq!(status(posts.create_script(huge).unwrap_err()), 413);
        posts.create_script(ScriptProperties::stored_procedure(
            "temp",
            "function t() {}",
        ))?;
        posts.delete_script(ScriptKind::StoredProcedure, "temp")?;
        assert_eq!(
            status(
                posts
                    .delete_script(ScriptKind::StoredProcedure, "temp")
                    .unwrap_err()
            ),
            404
        );
    }
    let db = Database::open(dir.path())?;
    let posts = db.container("posts")?;
    let procs: Vec<String> = posts
        .list_scripts(ScriptKind::StoredProcedure)
        .iter()
        .map(|s| s.id.clone())
        .collect();
    assert_eq!(procs, ["createComment"]);
    let reloaded = posts.read_script(ScriptKind::StoredProcedure, "createComment")?;
    assert_eq!(&*reloaded.body, b"function g() {}");
    let trigger = posts.read_script(ScriptKind::Trigger, "truncateFeed")?;
    assert_eq!(
        (trigger.trigger_type, trigger.trigger_operation),
        (Some(TriggerType::Post), Some(TriggerOperation::Create))
    );
    assert_eq!(posts.list_scripts(ScriptKind::UserDefinedFunction).len(), 1);
    // Versions keep growing after a restart, so compiled-code caches never confuse two versions.
    let v3 = posts.replace_script(ScriptProperties::stored_procedure(
        "createComment",
        "function h() {}",
    ))?;
    assert!(v3.version > reloaded.version);
    Ok(())
}

/// Fills `posts` with documents in two partitions, a procedure and a change log.
fn fill_posts(db: &Database) -> Result<engine::Container> {
    let posts = posts(db);
    posts.create_item("p1", json!({"id": "a", "postId": "p1"}), None)?;
    posts.create_item("p2", json!({"id": "b", "postId": "p2"}), None)?;
    posts.upsert_item("p1", json!({"id": "a", "postId": "p1", "v": 2}), None)?;
    posts.create_script(ScriptProperties::stored_procedure("sp", "function f() {}"))?;
    Ok(posts)
}

/// What a container holds: (partition keys, documents, scripts, changes).
fn contents(container: &engine::Container) -> Result<(usize, usize, usize, usize)> {
    let keys = container.partition_keys()?;
    let mut docs = 0;
    for key in &keys {
        docs += container
            .read_feed(key.clone(), &FeedOptions::default())?
            .items
            .len();
    }
    Ok((
        keys.len(),
        docs,
        container.list_scripts(ScriptKind::StoredProcedure).len(),
        container.read_changes(Lsn::ZERO, 1000)?.len(),
    ))
}

#[test]
fn deleting_a_container_removes_it_durably_and_a_new_one_starts_empty() -> Result {
    let dir = tempfile::tempdir()?;
    {
        let db = Database::open(dir.path())?;
        let old = fill_posts(&db)?;
        let users = db.create_container("users", "/userId")?;
        users.create_item("u1", json!({"id": "u1", "userId": "u1"}), None)?;
        assert_eq!(contents(&old)?, (2, 2, 1, 3));

        db.delete_container("posts")?;
        assert_eq!(status(db.container("posts").unwrap_err()), 404);
        let again = db.delete_container("posts").unwrap_err();
        assert!(again.to_string().contains("posts"), "{again}");
        assert_eq!(status(again), 404);
        assert_eq!(status(db.delete_container("never").unwrap_err()), 404);
        let ids: Vec<String> = db.containers().into_iter().map(|c| c.id).collect();
        assert_eq!(ids, ["users"]);
        // A handle kept from before cannot write any more.
        let write = old.create_item("p1", json!({"id": "late", "postId": "p1"}), None);
        assert_eq!(status(write.unwrap_err()), 404);
        let script =
            old.create_script(ScriptProperties::stored_procedure("sp2", "function f() {}"));
        assert_eq!(status(script.unwrap_err()), 404);
        let script = old.delete_script(ScriptKind::StoredProcedure, "sp");
        assert_eq!(status(script.unwrap_err()), 404);
    }
    {
        let db = Database::open(dir.path())?;
        assert_eq!(status(db.container("posts").unwrap_err()), 404);
        assert_eq!(db.container("users")?.read_item("u1", "u1")?.id(), "u1");
        let fresh = posts(&db);
        assert_eq!(contents(&fresh)?, (0, 0, 0, 0));
        fresh.create_item("p1", json!({"id": "new", "postId": "p1"}), None)?;
        let changes = fresh.read_changes(Lsn::ZERO, 1000)?;
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].lsn, Lsn(1), "the change log starts over");
    }
    let db = Database::open(dir.path())?;
    let fresh = db.container("posts")?;
    assert_eq!(contents(&fresh)?, (1, 1, 0, 1));
    assert_eq!(fresh.read_item("p1", "new")?.id(), "new");
    assert_eq!(status(fresh.read_item("p1", "a").unwrap_err()), 404);
    Ok(())
}

#[test]
fn a_transaction_open_across_the_deletion_commits_nothing() -> Result {
    let dir = tempfile::tempdir()?;
    {
        let db = Database::open(dir.path())?;
        let old = fill_posts(&db)?;
        let mut txn = old.begin("p1")?;
        txn.create_item(json!({"id": "orphan", "postId": "p1"}))?;
        db.delete_container("posts")?;
        assert_eq!(status(txn.commit().unwrap_err()), 404);
        // The same id again, while the old handle lives.
        let fresh = posts(&db);
        assert_eq!(contents(&fresh)?, (0, 0, 0, 0));
        assert_eq!(
            status(
                old.create_item("p1", json!({"id": "x", "postId": "p1"}), None)
                    .unwrap_err()
            ),
            404
        );
        assert_eq!(contents(&fresh)?, (0, 0, 0, 0));
    }
    let db = Database::open(dir.path())?;
    assert_eq!(contents(&db.container("posts")?)?, (0, 0, 0, 0));
    Ok(())
}

#[test]
fn deleting_a_container_in_memory_clears_its_change_log() -> Result {
    let db = Database::in_memory();
    fill_posts(&db)?;
    db.delete_container("posts")?;
    let fresh = posts(&db);
    assert_eq!(contents(&fresh)?, (0, 0, 0, 0));
    fresh.create_item("p1", json!({"id": "a", "postId": "p1"}), None)?;
    assert_eq!(fresh.read_changes(Lsn::ZERO, 10)?[0].lsn, Lsn(1));
    Ok(())
}

#[test]
fn a_read_only_store_refuses_to_delete_containers() -> Result {
    let storage = failing_storage(1);
    let db = Database::with_storage(Box::new(storage), Options::default())?;
    let posts = posts(&db);
    assert!(
        posts
            .create_item("p1", json!({"id": "a", "postId": "p1"}), None)
            .is_err()
    );
    let err = db.delete_container("posts").unwrap_err();
    assert!(matches!(err, Error::ReadOnly(_)), "{err}");
    assert_eq!(db.container("posts")?.id(), "posts");
    Ok(())
}

/// Under `Durability::Full` SQLite never syncs or checkpoints on its own:
/// the syncer thread fsyncs the log before callers are answered, and the
/// committer checkpoints with syncs once the log has grown by
/// `WAL_AUTOCHECKPOINT_PAGES`. Enough writes to pass that mark reach the
/// database file while the store is open, and everything acknowledged is
/// there after reopening; the change log is readable up to the last commit.
#[test]
fn durable_writes_are_checkpointed_into_the_database_file() -> Result {
    let dir = tempfile::tempdir()?;
    let (threads, per_thread) = (16, 250);
    let filler = "x".repeat(3_000);
    {
        // A short log (the default is ~120 MB): 12 MB of documents pass
        // through several checkpoints.
        let options = engine::Options {
            checkpoint_pages: 1_000,
            ..engine::Options::default()
        };
        let db = Database::open_with(dir.path(), options)?;
        let c = db.create_container("c", "/pk")?;
        let before = std::fs::metadata(dir.path().join(engine::DATA_FILE))?.len();
        std::thread::scope(|s| {
            for t in 0..threads {
                let (c, filler) = (&c, &filler);
                s.spawn(move || {
                    for i in 0..per_thread {
                        let pk = format!("p{t}");
                        let doc = json!({"id": format!("d{i}"), "pk": pk, "filler": filler});
                        c.create_item(pk.as_str(), doc, None)
                            .expect("durable create");
                    }
                });
            }
        });
        let after = std::fs::metadata(dir.path().join(engine::DATA_FILE))?.len();
        assert!(
            after > before + (8 << 20),
            "a checkpoint copied the log into the database file while open: {before} -> {after} bytes"
        );
        let changes = c.read_changes(engine::Lsn::ZERO, usize::MAX)?;
        assert_eq!(changes.len(), threads * per_thread);
    }
    let db = Database::open(dir.path())?;
    let c = db.container("c")?;
    for t in 0..threads {
        let page = c.read_feed(format!("p{t}").as_str(), &FeedOptions::default())?;
        assert_eq!(page.items.len(), per_thread, "partition p{t}");
    }
    Ok(())
}
