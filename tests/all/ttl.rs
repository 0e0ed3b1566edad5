//! Time to live, unique keys and deleting a logical partition through the
//! facade: expiry seen by reads, queries, feeds, the change log and
//! JavaScript procedures under a moved clock; the background purge; unique
//! keys against every write path, scripts included; settings that survive a
//! reopen; a partition delete that is one transaction.

use std::time::{Duration, UNIX_EPOCH};

use partita::{
    ChangeKind, ContainerProperties, Database, FeedOptions, Lsn, ManualClock, Options,
    QueryOptions, ScriptProperties, UniqueKey,
};
use serde_json::{Value, json};

type Result<T = ()> = anyhow::Result<T>;

/// An in-memory database on a clock that moves only when told, with the
/// background purge off (tests purge when they choose).
fn database() -> Result<(Database, ManualClock)> {
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    let options = Options {
        clock: clock.clock(),
        purge_interval: None,
        ..Options::default()
    };
    let db = Database::with_storage(Box::new(engine::storage::MemoryStorage::new()), options)?;
    Ok((db, clock))
}

const READ_ALL: &str = r#"
function readAll(id) {
    var collection = getContext().getCollection();
    var response = getContext().getResponse();
    collection.queryDocuments(collection.getSelfLink(), "SELECT VALUE c.id FROM c", {},
        function (err, ids) {
            if (err) throw err;
            collection.readDocument(collection.getAltLink() + "/docs/" + id, {},
                function (err2) {
                    response.setBody({ ids: ids, found: !err2, status: err2 ? err2.number : 200 });
                });
        });
}"#;

#[test]
fn expired_items_are_invisible_to_every_read_and_to_scripts() -> Result {
    let (db, clock) = database()?;
    let c = db.create_container_with(ContainerProperties::new("c", "/pk").with_default_ttl(60))?;
    c.create_script(ScriptProperties::stored_procedure("readAll", READ_ALL))?;
    c.create_item("p", json!({"id": "soon", "pk": "p"}), None)?;
    c.create_item("p", json!({"id": "later", "pk": "p", "ttl": 3600}), None)?;

    let run = |id: &str| -> Result<Value> {
        Ok(
            c.execute_stored_procedure("readAll", "p", vec![json!(id)], None)?
                .body,
        )
    };
    assert_eq!(run("soon")?["found"], true);
    clock.advance(Duration::from_secs(60));

    assert_eq!(c.read_item("p", "soon").unwrap_err().status(), 404);
    let feed = c.read_feed("p", &FeedOptions::default())?;
    assert_eq!(feed.items.len(), 1);
    let all = c.query_items(
        "SELECT VALUE c.id FROM c",
        &Default::default(),
        &QueryOptions::default(),
    )?;
    assert_eq!(all.items, [json!("later")]);
    let body = run("soon")?;
    assert_eq!(body["ids"], json!(["later"]));
    assert_eq!(body["found"], false);
    assert_eq!(body["status"], 404);
    let changes = c.read_changes(Lsn::ZERO, 100)?;
    let soon = changes.iter().find(|ch| ch.id == "soon").unwrap();
    assert_eq!(soon.kind, ChangeKind::Delete);
    // An upsert of the expired id creates it afresh.
    c.upsert_item("p", json!({"id": "soon", "pk": "p"}), None)?;
    assert_eq!(c.read_item("p", "soon")?.id(), "soon");
    Ok(())
}

#[test]
fn the_purge_logs_each_expired_item_as_a_delete() -> Result {
    let (db, clock) = database()?;
    let c = db.create_container_with(ContainerProperties::new("c", "/pk").with_default_ttl(-1))?;
    for (id, ttl) in [("a", json!(10)), ("b", json!(20)), ("c", json!(-1))] {
        c.create_item("p", json!({"id": id, "pk": "p", "ttl": ttl}), None)?;
    }
    c.create_item("q", json!({"id": "a", "pk": "q", "ttl": 10}), None)?;
    let head = Lsn(4);
    clock.advance(Duration::from_secs(15));
    assert_eq!(db.purge_expired()?, 2);
    let purged = c.read_changes(head, 100)?;
    let mut deleted: Vec<(String, String)> = purged
        .iter()
        .map(|ch| {
            assert_eq!(ch.kind, ChangeKind::Delete);
            (ch.partition_key.to_string(), ch.id.clone())
        })
        .collect();
    deleted.sort();
    assert_eq!(
        deleted,
        [
            ("[\"p\"]".to_owned(), "a".to_owned()),
            ("[\"q\"]".to_owned(), "a".to_owned())
        ]
    );
    assert_eq!(c.read_item("p", "b")?.id(), "b");
    clock.advance(Duration::from_secs(1_000_000));
    assert_eq!(db.purge_expired()?, 1);
    assert_eq!(c.read_item("p", "c")?.id(), "c");
    Ok(())
}

#[test]
fn ttl_values_are_validated_as_the_service_does() -> Result {
    let (db, _) = database()?;
    for bad in [0, -2, -10] {
        let err = db
            .create_container_with(ContainerProperties::new("bad", "/pk").with_default_ttl(bad))
            .unwrap_err();
        assert_eq!(err.status(), 400, "defaultTtl {bad}");
    }
    let c = db.create_container_with(ContainerProperties::new("c", "/pk").with_default_ttl(10))?;
    for bad in [json!(0), json!(null), json!(-10)] {
        let err = c
            .create_item("p", json!({"id": "d", "pk": "p", "ttl": bad}), None)
            .unwrap_err();
        assert_eq!(err.status(), 400, "ttl {bad}");
        assert!(err.to_string().contains("ttl"), "{err}");
    }
    assert!(c.read_item("p", "d").is_err());
    Ok(())
}

#[test]
fn unique_keys_hold_across_point_writes_and_procedures() -> Result {
    let (db, _) = database()?;
    let users = db.create_container_with(
        ContainerProperties::new("users", "/tenant").with_unique_key(["/email"]),
    )?;
    let user = |id: &str, email: &str| json!({"id": id, "tenant": "t", "email": email});
    users.create_item("t", user("u1", "a@x"), None)?;
    users.create_item("t", user("u2", "b@x"), None)?;
    for err in [
        users.create_item("t", user("u3", "a@x"), None).unwrap_err(),
        users.upsert_item("t", user("u3", "a@x"), None).unwrap_err(),
        users
            .replace_item("t", "u2", user("u2", "a@x"), None)
            .unwrap_err(),
    ] {
        assert_eq!(err.status(), 409);
        assert!(err.to_string().contains("/email"), "{err}");
    }
    // Another partition has its own keys.
    users.create_item(
        "t2",
        json!({"id": "u1", "tenant": "t2", "email": "a@x"}),
        None,
    )?;

    users.create_script(ScriptProperties::stored_procedure(
        "createBoth",
        r#"function createBoth(first, second) {
            var c = getContext().getCollection();
            c.createDocument(c.getSelfLink(), first, function (err) {
                if (err) throw err;
                c.createDocument(c.getSelfLink(), second, function (err2) {
                    if (err2) throw err2;
                });
            });
        }"#,
    ))?;
    let err = users
        .execute_stored_procedure(
            "createBoth",
            "t",
            vec![user("u4", "c@x"), user("u5", "b@x")],
            None,
        )
        .unwrap_err();
    assert!(err.to_string().contains("unique key"), "{err}");
    assert!(
        users.read_item("t", "u4").is_err(),
        "the first create rolled back"
    );
    users.execute_stored_procedure(
        "createBoth",
        "t",
        vec![user("u4", "c@x"), user("u5", "d@x")],
        None,
    )?;
    assert_eq!(users.read_item("t", "u5")?["email"], "d@x");
    Ok(())
}

#[test]
fn settings_survive_a_durable_reopen() -> Result {
    let dir = tempfile::tempdir()?;
    {
        let db = Database::open(dir.path())?;
        let c = db.create_container_with(
            ContainerProperties::new("c", "/pk")
                .with_default_ttl(3600)
                .with_unique_key(["/name", "/address/zip"]),
        )?;
        c.create_item("p", json!({"id": "a", "pk": "p", "name": "n"}), None)?;
        c.set_default_ttl(Some(7200))?;
    }
    let db = Database::open(dir.path())?;
    let c = db.container("c")?;
    let props = c.properties();
    assert_eq!(props.default_ttl, Some(7200));
    assert_eq!(
        props.unique_keys,
        [UniqueKey::new(["/name", "/address/zip"])]
    );
    let err = c
        .create_item("p", json!({"id": "b", "pk": "p", "name": "n"}), None)
        .unwrap_err();
    assert_eq!(err.status(), 409, "the policy is enforced after the reopen");
    c.set_default_ttl(None)?;
    drop((c, db));
    let db = Database::open(dir.path())?;
    assert_eq!(db.container("c")?.properties().default_ttl, None);
    Ok(())
}

#[test]
fn deleting_a_partition_is_one_transaction_in_the_change_feed() -> Result {
    let dir = tempfile::tempdir()?;
    let db = Database::open(dir.path())?;
    let c = db.create_container("c", "/pk")?;
    for i in 0..5 {
        c.create_item("p", json!({"id": format!("d{i}"), "pk": "p"}), None)?;
    }
    c.create_item("q", json!({"id": "d0", "pk": "q"}), None)?;
    assert_eq!(c.delete_all_items_by_partition_key("p")?, 5);
    let changes = c.read_changes(Lsn(6), 100)?;
    assert_eq!(changes.len(), 5);
    assert!(
        changes
            .iter()
            .all(|ch| ch.lsn == Lsn(7) && ch.kind == ChangeKind::Delete)
    );
    assert_eq!(c.delete_all_items_by_partition_key("unknown")?, 0);
    drop(c);
    drop(db);
    let db = Database::open(dir.path())?;
    let c = db.container("c")?;
    assert!(c.read_feed("p", &FeedOptions::default())?.items.is_empty());
    assert_eq!(c.read_item("q", "d0")?.id(), "d0");
    Ok(())
}
