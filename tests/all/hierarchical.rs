//! Hierarchical partition keys (Cosmos DB's `MultiHash`): a document's key
//! is the tuple of the values at up to three paths; transactions, point
//! operations and scripts need the full key, and a query or read feed
//! scoped to a prefix covers every logical partition under it. In memory
//! and durably, through the engine and the facade.

use engine::{ContainerProperties, FeedOptions, PartitionKey, QueryItemsOptions};
use partita::{Database, QueryOptions, ScriptProperties};
use serde_json::{Value, json};

type Result<T = ()> = anyhow::Result<T>;

const PATHS: [&str; 3] = ["/tenantId", "/userId", "/sessionId"];

fn key(parts: &[&str]) -> PartitionKey {
    PartitionKey::multi(parts.iter().copied())
}

fn session(id: &str, t: &str, u: &str, s: &str) -> Value {
    json!({"id": id, "tenantId": t, "userId": u, "sessionId": s})
}

/// Six sessions over two tenants, three users and five sessions.
fn fill(c: &partita::Container) -> Result {
    for (id, t, u, s) in [
        ("a", "t1", "u1", "s1"),
        ("b", "t1", "u1", "s2"),
        ("c", "t1", "u2", "s1"),
        ("d", "t2", "u1", "s1"),
        ("e", "t1", "u1", "s1"),
        ("f", "t2", "u3", "s9"),
    ] {
        c.create_item(key(&[t, u, s]), session(id, t, u, s), None)?;
    }
    Ok(())
}

fn ids(items: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = items
        .iter()
        .map(|v| v["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    ids.sort();
    ids
}

fn query_ids(c: &partita::Container, pk: Option<PartitionKey>) -> Result<Vec<String>> {
    let page = c.query_items(
        "SELECT * FROM c",
        &Default::default(),
        &QueryOptions {
            partition_key: pk,
            ..QueryOptions::default()
        },
    )?;
    Ok(ids(&page.items))
}

#[test]
fn definitions_have_one_to_three_paths() -> Result {
    let db = Database::in_memory();
    let c = db.create_container_with(ContainerProperties::hierarchical("s", PATHS))?;
    assert_eq!(c.properties().partition_key_paths(), PATHS);
    assert_eq!(
        c.properties().partition_key_path,
        r#"["/tenantId","/userId","/sessionId"]"#
    );
    assert!(c.partition_key_path().is_hierarchical());
    // One path in a list is an ordinary container.
    let one = db.create_container_with(ContainerProperties::hierarchical("one", ["/a"]))?;
    assert_eq!(one.properties().partition_key_path, "/a");
    let err = db
        .create_container_with(ContainerProperties::hierarchical(
            "four",
            ["/a", "/b", "/c", "/d"],
        ))
        .unwrap_err();
    assert_eq!(err.status(), 400);
    assert!(
        err.to_string().contains("Too many partition key paths"),
        "{err}"
    );
    assert!(db.create_container("bad", r#"["/a","b"]"#).is_err());
    // The same definition spelled differently is the same container.
    db.raw()
        .create_container_if_not_exists("s", r#"[ "/tenantId", "/userId", "/sessionId" ]"#)?;
    Ok(())
}

#[test]
fn point_operations_and_transactions_need_the_full_key() -> Result {
    let db = Database::in_memory();
    let c = db.create_container_with(ContainerProperties::hierarchical("s", PATHS))?;
    fill(&c)?;
    assert_eq!(c.read_item(key(&["t1", "u1", "s1"]), "a")?.id(), "a");
    assert_eq!(
        c.read_item(key(&["t1", "u1", "s2"]), "a")
            .unwrap_err()
            .status(),
        404
    );
    // A prefix is not a logical partition: 400 with substatus 1001.
    for prefix in [key(&["t1", "u1"]), PartitionKey::from("t1")] {
        let err = c.read_item(prefix.clone(), "a").unwrap_err();
        assert_eq!((err.status(), err.substatus()), (400, Some(1001)), "{err}");
        let err = c
            .create_item(prefix.clone(), session("x", "t1", "u1", "s1"), None)
            .unwrap_err();
        assert_eq!((err.status(), err.substatus()), (400, Some(1001)), "{err}");
        assert!(c.begin(prefix).is_err());
    }
    // Too many components, and a document of another partition.
    let err = c.read_item(key(&["t1", "u1", "s1", "x"]), "a").unwrap_err();
    assert_eq!(err.status(), 400);
    let err = c
        .create_item(
            key(&["t1", "u1", "s1"]),
            session("x", "t1", "u1", "s2"),
            None,
        )
        .unwrap_err();
    assert_eq!(err.status(), 400);
    // A missing level is the none component, not null.
    let partial = json!({"id": "p", "tenantId": "t1", "userId": null});
    let partial_key = PartitionKey::multi([
        PartitionKey::from("t1"),
        PartitionKey::Null,
        PartitionKey::None,
    ]);
    assert_eq!(c.partition_key_of(&partial), partial_key);
    c.create_item(partial_key.clone(), partial.clone(), None)?;
    let wrong = PartitionKey::multi([
        PartitionKey::from("t1"),
        PartitionKey::Null,
        PartitionKey::Null,
    ]);
    assert_eq!(
        c.create_item(wrong, partial, None).unwrap_err().status(),
        400
    );
    // A transaction writes one full key, all or nothing.
    c.transaction(key(&["t1", "u1", "s1"]), |txn| {
        txn.create_item(session("g", "t1", "u1", "s1"))?;
        txn.create_item(session("h", "t1", "u1", "s2"))?;
        Ok::<_, engine::Error>(())
    })
    .unwrap_err();
    assert_eq!(
        c.read_item(key(&["t1", "u1", "s1"]), "g")
            .unwrap_err()
            .status(),
        404
    );
    Ok(())
}

#[test]
fn a_prefix_scopes_queries_and_read_feeds_to_the_partitions_under_it() -> Result {
    let db = Database::in_memory();
    let c = db.create_container_with(ContainerProperties::hierarchical("s", PATHS))?;
    fill(&c)?;
    assert_eq!(query_ids(&c, None)?, ["a", "b", "c", "d", "e", "f"]);
    assert_eq!(
        query_ids(&c, Some(PartitionKey::from("t1")))?,
        ["a", "b", "c", "e"]
    );
    assert_eq!(query_ids(&c, Some(key(&["t1"])))?, ["a", "b", "c", "e"]);
    assert_eq!(query_ids(&c, Some(key(&["t1", "u1"])))?, ["a", "b", "e"]);
    assert_eq!(query_ids(&c, Some(key(&["t1", "u1", "s1"])))?, ["a", "e"]);
    assert_eq!(query_ids(&c, Some(key(&["t3"])))?, Vec::<String>::new());
    assert!(query_ids(&c, Some(key(&["t1", "u1", "s1", "x"]))).is_err());
    // ORDER BY and aggregates apply across the partitions under the prefix.
    let page = c.query_items(
        "SELECT VALUE COUNT(1) FROM c",
        &Default::default(),
        &QueryOptions::partition(key(&["t1", "u1"])),
    )?;
    assert_eq!(page.items, [json!(3)]);
    // Pages of a prefix query resume where they stopped.
    let mut options = QueryItemsOptions {
        partition_key: Some(key(&["t1"])),
        partitions: None,
        max_item_count: Some(1),
        continuation: None,
    };
    let mut seen = Vec::new();
    loop {
        let page = c.raw().query_items(
            "SELECT * FROM c ORDER BY c.id",
            &Default::default(),
            &options,
        )?;
        seen.extend(page.items);
        match page.continuation {
            Some(token) => options.continuation = Some(token),
            None => break,
        }
    }
    assert_eq!(ids(&seen), ["a", "b", "c", "e"]);
    // The read feed of a prefix: insertion order across the partitions,
    // a page at a time.
    let mut feed = FeedOptions {
        max_item_count: Some(2),
        continuation: None,
    };
    let mut order = Vec::new();
    loop {
        let page = c.read_feed(key(&["t1"]), &feed)?;
        order.extend(page.items.iter().map(|d| d.id().to_owned()));
        match page.continuation {
            Some(token) => feed.continuation = Some(token),
            None => break,
        }
    }
    assert_eq!(order, ["a", "b", "c", "e"]);
    assert_eq!(
        c.raw()
            .partition_keys_under(key(&["t2"]))?
            .into_iter()
            .map(|k| k.to_json_array())
            .collect::<Vec<_>>(),
        [r#"["t2","u1","s1"]"#, r#"["t2","u3","s9"]"#]
    );
    Ok(())
}

#[test]
fn scripts_run_in_the_full_key_partition() -> Result {
    let db = Database::in_memory();
    let c = db.create_container_with(ContainerProperties::hierarchical("s", PATHS))?;
    fill(&c)?;
    c.create_script(ScriptProperties::stored_procedure(
        "add",
        r#"function add(doc) {
            var ctx = getContext(), coll = ctx.getCollection();
            var ok = coll.createDocument(coll.getSelfLink(), doc, function (err) { if (err) throw err; });
            if (!ok) throw new Error("not accepted");
            var q = coll.queryDocuments(coll.getSelfLink(), "SELECT VALUE COUNT(1) FROM c", {},
                function (err, items) { if (err) throw err; ctx.getResponse().setBody(items[0]); });
            if (!q) throw new Error("query not accepted");
        }"#,
    ))?;
    let full = key(&["t1", "u1", "s1"]);
    let response = c.execute_stored_procedure(
        "add",
        full.clone(),
        vec![session("n", "t1", "u1", "s1")],
        None,
    )?;
    // The procedure's query sees its own partition only: a and e (n is its
    // own uncommitted write, which queries in a transaction do not see).
    assert_eq!(response.body, json!(2));
    assert_eq!(c.read_item(full.clone(), "n")?.id(), "n");
    // A document of a sibling partition is a cross-partition write, and
    // nothing is committed.
    let err = c
        .execute_stored_procedure(
            "add",
            full.clone(),
            vec![session("m", "t1", "u1", "s2")],
            None,
        )
        .unwrap_err();
    assert_eq!(err.status(), 400);
    assert!(c.read_item(key(&["t1", "u1", "s2"]), "m").is_err());
    // A prefix cannot run a procedure.
    let err = c
        .execute_stored_procedure("add", key(&["t1", "u1"]), vec![json!({"id": "z"})], None)
        .unwrap_err();
    assert_eq!((err.status(), err.substatus()), (400, Some(1001)));
    Ok(())
}

#[test]
fn a_hierarchical_container_reopens_unchanged() -> Result {
    let dir = tempfile::tempdir()?;
    {
        let db = Database::open(dir.path())?;
        db.create_container("plain", "/pk")?;
        let c = db.create_container_with(ContainerProperties::hierarchical("s", PATHS))?;
        fill(&c)?;
        c.delete_item(key(&["t2", "u3", "s9"]), "f", None)?;
    }
    let db = Database::open(dir.path())?;
    assert_eq!(
        db.container("plain")?.properties().partition_key_path,
        "/pk"
    );
    let c = db.container("s")?;
    assert_eq!(c.properties().partition_key_paths(), PATHS);
    assert_eq!(c.read_item(key(&["t2", "u1", "s1"]), "d")?.id(), "d");
    assert_eq!(query_ids(&c, Some(key(&["t2"])))?, ["d"]);
    assert_eq!(query_ids(&c, Some(key(&["t1", "u1"])))?, ["a", "b", "e"]);
    let changes = c.read_changes(engine::Lsn(0), 100)?;
    assert_eq!(changes.len(), 7);
    assert!(
        changes
            .iter()
            .all(|ch| ch.partition_key.components().len() == 3)
    );
    Ok(())
}
