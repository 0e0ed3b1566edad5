//! Request charges of real responses: calibration against the engine's own
//! sizes, determinism, and script cost included in procedure and trigger
//! responses.

use partita::charge::Work;
use partita::{Database, ScriptProperties, TriggerOperation, TriggerType, WriteOptions};
use partita_workload::blog;
use serde_json::{Value, json};

use crate::support::js;

type Result<T = ()> = anyhow::Result<T>;

/// A post padded so that the stored document is about 1 KiB.
fn kib_document(id: &str) -> Value {
    json!({"id": id, "postId": id, "text": "x".repeat(795)})
}

#[test]
fn a_one_kib_create_costs_five_to_six_and_its_read_one() -> Result {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId")?;
    let response = posts.create_item("p1", kib_document("p1"), Some(&WriteOptions::default()))?;
    let size = response.stats.bytes_written;
    assert!((1000..=1048).contains(&size), "stored size {size}");
    let charge = response.request_charge();
    assert!((5.0..=6.0).contains(&charge), "{charge}");
    let read = posts.read_item("p1", "p1")?;
    let read_size = serde_json::to_vec(&read.into_value())?.len() as u64;
    assert_eq!(read_size, size);
    assert_eq!(Work::point_read(read_size).request_charge(), 1.0);
    Ok(())
}

#[test]
fn a_bigger_document_is_not_cheaper_to_write() -> Result {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId")?;
    let mut last = 0.0;
    for (i, len) in [10, 1_000, 10_000, 100_000].into_iter().enumerate() {
        let id = format!("p{i}");
        let doc = json!({"id": id, "postId": id, "text": "x".repeat(len)});
        let charge = posts
            .create_item(id.as_str(), doc, Some(&WriteOptions::default()))?
            .request_charge();
        assert!(charge >= last, "{len} bytes: {charge} < {last}");
        last = charge;
    }
    Ok(())
}

#[test]
fn the_same_procedure_call_costs_the_same_and_includes_its_script() -> Result {
    let charge = || -> Result<(f64, u64)> {
        let db = Database::in_memory();
        let posts = db.create_container("posts", "/postId")?;
        posts.create_item("p1", blog::post("p1", "u1", 1), None)?;
        posts.create_script(ScriptProperties::stored_procedure(
            "createComment",
            js("createComment"),
        ))?;
        let response = posts.execute_stored_procedure(
            "createComment",
            "p1",
            vec![json!("p1"), json!({"text": "hi"})],
            None,
        )?;
        Ok((response.request_charge(), response.stats.instructions))
    };
    let (first, instructions) = charge()?;
    let (second, _) = charge()?;
    assert_eq!(first, second, "deterministic");
    assert!(instructions > 0);
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId")?;
    posts.create_item("p1", blog::post("p1", "u1", 1), None)?;
    posts.create_script(ScriptProperties::stored_procedure(
        "createComment",
        js("createComment"),
    ))?;
    let response = posts.execute_stored_procedure(
        "createComment",
        "p1",
        vec![json!("p1"), json!({})],
        None,
    )?;
    let without_script = partita::charge::Work {
        instructions: 0,
        scripts: 0,
        ..Work::call(&response.stats)
    };
    assert!(
        response.request_charge() > without_script.request_charge(),
        "the script's instructions are charged: {:?}",
        response.stats
    );
    // Published createComment (C3 V2): 15.27 RU; within 2x.
    let c3 = response.request_charge();
    assert!((15.27 / 2.0..=15.27 * 2.0).contains(&c3), "{c3}");
    Ok(())
}

#[test]
fn a_trigger_response_includes_the_trigger_cost() -> Result {
    let db = Database::in_memory();
    let feed = db.create_container("feed", "/type")?;
    feed.create_script(ScriptProperties::trigger(
        "truncateFeed",
        js("truncateFeed"),
        TriggerType::Post,
        TriggerOperation::All,
    ))?;
    let doc = |id: &str| json!({"id": id, "type": "post", "creationDate": "2026-11-22"});
    let plain = feed.upsert_item("post", doc("a"), Some(&WriteOptions::default()))?;
    let options = WriteOptions {
        post_triggers: vec!["truncateFeed".into()],
        ..Default::default()
    };
    let triggered = feed.upsert_item("post", doc("b"), Some(&options))?;
    assert!(triggered.stats.instructions > 0);
    assert!(
        triggered.request_charge() > plain.request_charge(),
        "{} <= {}",
        triggered.request_charge(),
        plain.request_charge()
    );
    Ok(())
}

#[test]
fn a_query_page_is_charged_by_its_work() -> Result {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId")?;
    for i in 0..50 {
        posts.create_item(
            "p1",
            json!({"id": format!("c{i}"), "postId": "p1", "n": i}),
            None,
        )?;
    }
    let run = |sql: &str| -> Result<f64> {
        let options = partita::QueryOptions {
            partition_key: Some("p1".into()),
            ..Default::default()
        };
        let page = posts.query_items(sql, &Default::default(), &options)?;
        Ok(Work::query(&page.stats).request_charge())
    };
    let all = run("SELECT * FROM c")?;
    let few = run("SELECT * FROM c WHERE c.n < 5")?;
    assert_eq!(all, run("SELECT * FROM c")?, "deterministic");
    assert!(all > few, "returning more costs more: {all} <= {few}");
    assert!(few > 2.0, "a page costs at least its base: {few}");
    Ok(())
}

#[test]
fn a_query_across_partitions_pays_its_page_in_every_physical_partition() -> Result {
    let db = Database::in_memory();
    let posts = db.create_container_with(partita::ContainerProperties {
        physical_partitions: 8,
        ..partita::ContainerProperties::new("posts", "/postId")
    })?;
    posts.create_item("p1", json!({"id": "a", "postId": "p1"}), None)?;
    let page = |options: &partita::QueryOptions| -> Result<partita::QueryPage> {
        Ok(posts.query_items(
            "SELECT * FROM c WHERE c.id = 'a'",
            &Default::default(),
            options,
        )?)
    };
    let across = page(&Default::default())?;
    let within = page(&partita::QueryOptions {
        partition_key: Some("p1".into()),
        ..Default::default()
    })?;
    assert_eq!(
        (
            across.stats.physical_partitions,
            within.stats.physical_partitions
        ),
        (8, 1)
    );
    assert_eq!(across.items, within.items);
    let (a, w) = (
        Work::query(&across.stats).request_charge(),
        Work::query(&within.stats).request_charge(),
    );
    assert!(
        (a - w - 7.0 * partita::charge::RU_PER_QUERY_PAGE).abs() < 0.01,
        "{a} {w}"
    );
    Ok(())
}

#[test]
fn an_order_by_across_partitions_pays_a_full_page_in_every_physical_partition() -> Result {
    let db = Database::in_memory();
    let posts = db.create_container_with(partita::ContainerProperties {
        physical_partitions: 8,
        ..partita::ContainerProperties::new("posts", "/postId")
    })?;
    for i in 0..40 {
        let post = format!("p{i}");
        posts.create_item(
            post.as_str(),
            json!({"id": post, "postId": post, "n": i}),
            None,
        )?;
    }
    let page = |sql: &str, options: &partita::QueryOptions| -> Result<partita::QueryPage> {
        Ok(posts.query_items(sql, &Default::default(), options)?)
    };
    // TOP 10 fills its page: each of the 8 partitions would return its
    // newest 10, so 80 documents are charged (of the size of those read).
    let top = page(
        "SELECT TOP 10 * FROM c ORDER BY c.n DESC",
        &Default::default(),
    )?;
    assert_eq!(top.items.len(), 10);
    assert_eq!(
        (top.stats.rows_per_partition, top.stats.physical_partitions),
        (10, 8)
    );
    let work = Work::query(&top.stats);
    assert_eq!(work.docs_scanned, 80);
    assert_eq!(
        work.bytes_scanned,
        top.stats.bytes_read * 80 / top.stats.docs_scanned
    );
    // OFFSET rows are rows every partition returns too.
    let offset = page(
        "SELECT * FROM c ORDER BY c.n DESC OFFSET 5 LIMIT 10",
        &Default::default(),
    )?;
    assert_eq!(offset.stats.rows_per_partition, 15);
    // A page of 4 of a longer result: 4 in each partition.
    let paged = page(
        "SELECT * FROM c ORDER BY c.n",
        &partita::QueryOptions {
            max_item_count: Some(4),
            ..Default::default()
        },
    )?;
    assert!(paged.continuation.is_some());
    assert_eq!(paged.stats.rows_per_partition, 4);
    // A page that ran out of matches holds all every partition had: what
    // was read is charged.
    let short = page("SELECT TOP 100 * FROM c ORDER BY c.n", &Default::default())?;
    assert_eq!(short.items.len(), 40);
    assert_eq!(short.stats.rows_per_partition, 0);
    assert_eq!(
        Work::query(&short.stats).docs_scanned,
        short.stats.docs_scanned
    );
    // Without ORDER BY the service stops when it has enough.
    let unordered = page("SELECT TOP 10 * FROM c", &Default::default())?;
    assert_eq!(unordered.stats.rows_per_partition, 0);
    // Within one logical partition the page runs in one physical partition.
    let within = page(
        "SELECT TOP 1 * FROM c ORDER BY c.n",
        &partita::QueryOptions {
            partition_key: Some("p3".into()),
            ..Default::default()
        },
    )?;
    assert_eq!(
        Work::query(&within.stats).docs_scanned,
        within.stats.docs_scanned
    );
    Ok(())
}

#[test]
fn a_count_the_index_answers_pays_for_the_entries_it_counted() -> Result {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId")?;
    for i in 0..40 {
        let kind = if i < 30 { "comment" } else { "like" };
        let pk = format!("p{}", i % 4);
        posts.create_item(
            pk.as_str(),
            json!({"id": format!("r{i}"), "postId": pk, "type": kind}),
            None,
        )?;
    }
    let count = |kind: &str| -> Result<(partita::QueryPage, f64)> {
        let page = posts.query_items(
            &format!("SELECT VALUE COUNT(1) FROM c WHERE c.type = '{kind}'"),
            &Default::default(),
            &Default::default(),
        )?;
        let charge = Work::query(&page.stats).request_charge();
        Ok((page, charge))
    };
    let (comments, c) = count("comment")?;
    let (likes, l) = count("like")?;
    assert_eq!(comments.items, vec![json!(30)]);
    assert_eq!(likes.items, vec![json!(10)]);
    // Answered from the index: no document read, every match counted.
    assert!(comments.stats.index_used);
    assert_eq!(
        (comments.stats.docs_scanned, comments.stats.index_entries),
        (0, 30)
    );
    assert!(
        (c - l - 20.0 * partita::charge::RU_PER_INDEX_ENTRY).abs() < 0.01,
        "{c} {l}"
    );
    Ok(())
}
