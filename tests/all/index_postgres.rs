//! The range index of the PostgreSQL storage: the checks of `index.rs`
//! on a database of the engine's private test cluster
//! (`engine::testing::postgres`), and what several nodes on one database
//! add: a policy another node changed never makes a query wrong.
//!
//! `PARTITA_INDEX_CASES` (default 4 here: each case is a new database)
//! bounds the property test's cases.

use std::time::{Duration, Instant};

use partita::{Container, ContainerProperties, Database, IndexingPolicy, Options, Params};
use serde_json::{Value, json};

use crate::index::{Step, array_query, array_step, check_with, doc, pages, query, run_cases, step};

/// `PARTITA_INDEX_CASES`, 4 by default.
fn cases() -> u32 {
    std::env::var("PARTITA_INDEX_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4)
}

fn open(url: &str) -> anyhow::Result<Database> {
    Ok(Database::open_url(url, Options::default())?)
}

/// The items of `sql`'s first page, and the documents all its pages read.
fn first_page(c: &Container, sql: &str, params: &Params) -> anyhow::Result<(Vec<Value>, u64)> {
    let (mut got, scanned) = pages(c, sql, params, None)?;
    Ok((got.swap_remove(0).0, scanned))
}

/// Runs `sql` until it reads no more documents than it returns (the index
/// is built), checking each answer meanwhile against `expected`.
fn wait_until_indexed(c: &Container, sql: &str, params: &Params, expected: &[Value]) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let (got, scanned) = first_page(c, sql, params).expect("query");
        assert_eq!(got, expected, "{sql}");
        if scanned == expected.len() as u64 {
            return;
        }
        assert!(Instant::now() < deadline, "the index was never built");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_filter_and_a_top_order_by_read_only_the_documents_the_index_names() -> anyhow::Result<()> {
    let url = engine::testing::postgres::database();
    let db = open(&url)?;
    let c = db.create_container("c", "/pk")?;
    c.import_items((0..2_000).map(doc), &Default::default(), &mut |_| {})?;
    let params: Params = serde_json::from_value(json!({"@u": "u3"}))?;
    let sql = "SELECT * FROM c WHERE c.kind = 'post' AND c.user = @u";
    let expected = (0..2_000).filter(|i| i % 3 == 0 && i % 17 == 3).count();
    let (got, scanned) = first_page(&c, sql, &params)?;
    assert_eq!((got.len(), scanned), (expected, expected as u64));
    // Another node, its cache empty, reads the same documents alone.
    let other = open(&url)?;
    let (got, scanned) = first_page(&other.container("c")?, sql, &params)?;
    assert_eq!((got.len(), scanned), (expected, expected as u64));
    // The top ten posts by id walk the index in id order.
    let mut ids: Vec<String> = (0..2_000)
        .filter(|i| i % 3 == 0)
        .map(|i| format!("d{i}"))
        .collect();
    ids.sort_by(|a, b| b.cmp(a));
    ids.truncate(10);
    let top = "SELECT TOP 10 VALUE c.id FROM c WHERE c.kind = 'post' ORDER BY c.id DESC";
    let (got, scanned) = first_page(&c, top, &Params::new())?;
    assert_eq!(got, ids.iter().map(|id| json!(id)).collect::<Vec<_>>());
    assert!(scanned <= 2 * (10 + 1), "read {scanned}");
    // A change moves a document in and out of the index.
    c.upsert_item(
        "p3",
        json!({"id": "d3", "pk": "p3", "kind": "comment", "user": "u3"}),
        None,
    )?;
    c.upsert_item(
        "p0",
        json!({"id": "x", "pk": "p0", "kind": "post", "user": "u3"}),
        None,
    )?;
    c.delete_item("p20", "d20", None)?;
    let (got, scanned) = first_page(&c, sql, &params)?;
    let ids: Vec<&str> = got.iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"x") && !ids.contains(&"d3"), "{ids:?}");
    assert_eq!(scanned, ids.len() as u64);
    Ok(())
}

#[test]
fn a_policy_another_node_changes_keeps_its_queries_right_and_is_built() -> anyhow::Result<()> {
    let url = engine::testing::postgres::database();
    let a = open(&url)?;
    let c = a.create_container_with(ContainerProperties {
        indexing_policy: IndexingPolicy::from_json(&json!({"indexingMode": "none"}))?,
        ..ContainerProperties::new("c", "/pk")
    })?;
    c.import_items((0..3_000).map(doc), &Default::default(), &mut |_| {})?;
    let sql = "SELECT VALUE COUNT(1) FROM c WHERE c.n = 4 AND c.kind = 'like'";
    let count = |docs: &dyn Fn(usize) -> bool| json!((0..3_000).filter(|&i| docs(i)).count());
    let expected = [count(&|i| i % 7 == 4 && i % 3 == 2)];
    let (got, scanned) = first_page(&c, sql, &Params::new())?;
    assert_eq!((got.as_slice(), scanned), (&expected[..], 3_000));
    // Node b indexes the container; a's queries stay right throughout,
    // and read only what matches once the index is built.
    let b = open(&url)?;
    b.container("c")?
        .set_indexing_policy(IndexingPolicy::default())?;
    let (got, _) = first_page(&c, sql, &Params::new())?;
    assert_eq!(got, expected);
    let by_kind = "SELECT * FROM c WHERE c.kind = 'like' AND c.n = 4";
    let docs: Vec<Value> = first_page(&b.container("c")?, by_kind, &Params::new())?.0;
    wait_until_indexed(&c, by_kind, &Params::new(), &docs);
    // b leaves /n out and its index is rebuilt (b's query of /kind and
    // /user reads only what it returns again); a has not read the
    // catalog since, so its copy of the policy still indexes /n: its
    // COUNT of /kind and /n is right, not the number of likes.
    b.container("c")?
        .set_indexing_policy(IndexingPolicy::from_json(&json!({
            "includedPaths": [{"path": "/*"}],
            "excludedPaths": [{"path": "/n/?"}]
        }))?)?;
    let by_user = "SELECT * FROM c WHERE c.kind = 'like' AND c.user = 'u3'";
    let liked: Vec<Value> = first_page(&b.container("c")?, by_user, &Params::new())?.0;
    wait_until_indexed(&b.container("c")?, by_user, &Params::new(), &liked);
    let (got, _) = first_page(&c, sql, &Params::new())?;
    assert_eq!(got, expected);
    let (got, _) = first_page(&c, by_kind, &Params::new())?;
    assert_eq!(got, docs);
    // And after b's writes.
    b.container("c")?.upsert_item(
        "p1",
        json!({"id": "d1", "pk": "p1", "kind": "like", "user": "u1", "n": 4}),
        None,
    )?;
    let (got, _) = first_page(&c, sql, &Params::new())?;
    assert_eq!(got, [count(&|i| i == 1 || (i % 7 == 4 && i % 3 == 2))]);
    Ok(())
}

#[test]
fn queries_answer_the_same_with_the_index_as_by_scanning() -> anyhow::Result<()> {
    run_cases(cases(), step(), query(), check)
}

#[test]
fn array_queries_answer_the_same_with_the_index_as_by_scanning() -> anyhow::Result<()> {
    run_cases(cases(), array_step(), array_query(), check)
}

/// Pages without what differs between the two stores when nothing is
/// wrong: rids and etags (a node that shares its store reserves them in
/// blocks, so they skip a block at each reopen, in the same order) and
/// the continuations that name them; each page's items and whether
/// another follows stay.
fn comparable(pages: Vec<crate::index::Page>) -> Vec<(Vec<Value>, bool)> {
    pages
        .into_iter()
        .map(|(items, continuation)| {
            let items = items
                .into_iter()
                .map(|mut item| {
                    if let Value::Object(members) = &mut item {
                        for name in ["_rid", "_self", "_etag"] {
                            members.remove(name);
                        }
                    }
                    item
                })
                .collect();
            (items, continuation.is_some())
        })
        .collect()
}

/// `index.rs`'s `check` with a PostgreSQL store: random steps on it and
/// on an in-memory store, then every page of each query on both.
fn check(steps: &[Step], queries: &[(String, Params)]) -> anyhow::Result<()> {
    let url = engine::testing::postgres::database();
    check_with(
        steps,
        queries,
        |options| Ok(Database::open_url(&url, options)?),
        comparable,
    )
}
