//! The collection API as procedures will see it (`host_api::Collection`
//! implemented by `engine::Txn`), and queries through the Rust API
//! (`Container::query_items`): links, visibility rules, statistics, paging,
//! cross-partition merging and query errors.

use engine::{Collection, Database, Error, QueryItemsOptions};
use host_api::{ErrorCode, QueryRequest, WriteOptions};
use serde_json::{Map, Value, json};

type Result<T = ()> = anyhow::Result<T>;

fn no_params() -> Map<String, Value> {
    Map::new()
}

fn feed_with_posts(n: usize) -> Result<engine::Container> {
    let db = Database::in_memory();
    let feed = db.create_container("feed", "/type")?;
    for i in 0..n {
        feed.create_item(
            "post",
            json!({"id": format!("post{i}"), "type": "post", "creationDate": format!("2026-01-{:02}", i + 1)}),
            None,
        )?;
    }
    Ok(feed)
}

#[test]
fn links_resolve_by_name_and_by_self() -> Result {
    let feed = feed_with_posts(2)?;
    let txn = feed.begin("post")?;
    let alt = txn.alt_link();
    assert_eq!(alt, "dbs/partita/colls/feed");
    let self_link = txn.self_link();
    assert!(
        self_link.starts_with("dbs/") && self_link.ends_with('/'),
        "{self_link}"
    );
    assert_eq!(
        txn.resolve_document_link(&format!("{alt}/docs/post1"))?,
        "post1"
    );
    assert_eq!(
        txn.resolve_document_link(&format!("{alt}/DOCS/post1/"))?,
        "post1",
        "keywords ignore case"
    );
    let doc = txn.read_item("post0")?;
    let doc_self = doc["_self"].as_str().unwrap();
    assert!(
        doc_self.starts_with(&self_link),
        "{doc_self} is under {self_link}"
    );
    assert_eq!(txn.resolve_document_link(doc_self)?, "post0");
    for (link, code) in [
        ("dbs/partita/colls/other/docs/post1", ErrorCode::BAD_REQUEST),
        ("dbs/partita/colls/feed", ErrorCode::BAD_REQUEST),
        ("nonsense", ErrorCode::BAD_REQUEST),
        ("dbs/partita/colls/feed/docs/", ErrorCode::BAD_REQUEST),
    ] {
        assert_eq!(
            txn.resolve_document_link(link).unwrap_err().code,
            code,
            "{link}"
        );
    }
    Ok(())
}

#[test]
fn queries_see_the_partition_as_it_began_minus_deletes() -> Result {
    let feed = feed_with_posts(3)?;
    let mut txn = feed.begin("post")?;
    let count = |txn: &mut engine::Txn| -> Result<Value> {
        let params = no_params();
        let page = txn.query(QueryRequest {
            sql: "SELECT VALUE COUNT(1) FROM f",
            parameters: &params,
            page_size: None,
            continuation: None,
        })?;
        Ok(page.items[0].clone())
    };
    Collection::create(
        &mut txn,
        json!({"id": "post9", "type": "post", "creationDate": "2026-02-01"}),
    )?;
    assert_eq!(
        count(&mut txn)?,
        3,
        "a query does not see the transaction's insert"
    );
    assert_eq!(txn.read("post9")?.id(), "post9", "a point read does");
    Collection::delete(&mut txn, "post0", WriteOptions::default())?;
    assert_eq!(
        count(&mut txn)?,
        2,
        "a query does not see documents the transaction deleted"
    );
    let feed_page = txn.read_feed(None, None)?;
    let ids: Vec<&str> = feed_page
        .items
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["post1", "post2", "post9"],
        "the read feed sees the transaction's writes"
    );
    let stats = txn.stats();
    assert_eq!(stats.docs_written, 2);
    assert!(stats.docs_read >= 3 + 2 + 1 + 3, "{stats:?}");
    assert!(stats.bytes_written > 0 && stats.bytes_read > 0);
    txn.commit()?;
    Ok(())
}

#[test]
fn read_feed_counts_exact_bytes() -> Result {
    let feed = feed_with_posts(3)?;
    let mut txn = feed.begin("post")?;
    Collection::create(
        &mut txn,
        json!({"id": "é\"quoted\"", "type": "post", "n": 1.5}),
    )?;
    let before = txn.stats();
    let page = txn.read_feed(Some(10), None)?;
    let expected: u64 = page.items.iter().map(|d| d.to_string().len() as u64).sum();
    let stats = txn.stats();
    assert_eq!(stats.docs_read - before.docs_read, 4);
    assert_eq!(
        stats.bytes_read - before.bytes_read,
        expected,
        "the stored sizes are the serialized sizes"
    );
    Ok(())
}

#[test]
fn collection_errors_carry_cosmos_codes() -> Result {
    let feed = feed_with_posts(1)?;
    let mut txn = feed.begin("post")?;
    let cases: Vec<(ErrorCode, host_api::HostError)> = vec![
        (ErrorCode::NOT_FOUND, txn.read("nope").unwrap_err()),
        (
            ErrorCode::CONFLICT,
            Collection::create(&mut txn, json!({"id": "post0", "type": "post"})).unwrap_err(),
        ),
        (
            ErrorCode::BAD_REQUEST,
            Collection::create(&mut txn, json!({"id": "x", "type": "other"})).unwrap_err(),
        ),
        (
            ErrorCode::PRECONDITION_FAILED,
            Collection::replace(
                &mut txn,
                "post0",
                json!({"id": "post0", "type": "post"}),
                WriteOptions {
                    if_match: Some("\"stale\""),
                },
            )
            .unwrap_err(),
        ),
        (
            ErrorCode::BAD_REQUEST,
            txn.query(QueryRequest {
                sql: "SELECT FROM",
                parameters: &no_params(),
                page_size: None,
                continuation: None,
            })
            .unwrap_err(),
        ),
    ];
    for (code, err) in cases {
        assert_eq!(err.code, code, "{err}");
    }
    // Failed operations changed nothing: the transaction goes on.
    Collection::create(&mut txn, json!({"id": "post1", "type": "post"}))?;
    txn.commit()?;
    assert_eq!(feed.read_feed("post", &Default::default())?.items.len(), 2);
    Ok(())
}

#[test]
fn query_items_single_and_cross_partition() -> Result {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId")?;
    for i in 0..10 {
        let pk = format!("p{}", i % 3);
        posts.create_item(
            pk.as_str(),
            json!({"id": format!("d{i}"), "postId": pk, "n": i, "type": "post"}),
            None,
        )?;
    }
    let params: Map<String, Value> = serde_json::from_value(json!({"@pk": "p1"}))?;
    let single = posts.query_items(
        "SELECT VALUE c.n FROM c WHERE c.postId = @pk",
        &params,
        &QueryItemsOptions {
            partition_key: Some("p1".into()),
            ..Default::default()
        },
    )?;
    assert_eq!(single.items, [json!(1), json!(4), json!(7)]);

    let top = posts.query_items(
        "SELECT TOP 3 c.id FROM c ORDER BY c.n DESC",
        &no_params(),
        &Default::default(),
    )?;
    assert_eq!(
        top.items,
        [
            json!({"id": "d9"}),
            json!({"id": "d8"}),
            json!({"id": "d7"})
        ]
    );
    let agg = posts.query_items(
        "SELECT VALUE AVG(c.n) FROM c",
        &no_params(),
        &Default::default(),
    )?;
    assert_eq!(agg.items, [json!(4.5)]);
    assert_eq!(agg.stats.docs_scanned, 10);

    // Paging through a cross-partition ORDER BY, with a write between pages.
    let mut seen = Vec::new();
    let mut options = QueryItemsOptions {
        max_item_count: Some(4),
        ..Default::default()
    };
    loop {
        let page = posts.query_items(
            "SELECT VALUE c.n FROM c ORDER BY c.n",
            &no_params(),
            &options,
        )?;
        seen.extend(page.items.iter().map(|v| v.as_i64().unwrap()));
        match page.continuation {
            Some(token) => options.continuation = Some(token),
            None => break,
        }
        if seen.len() == 4 {
            posts.create_item("p9", json!({"id": "late", "postId": "p9", "n": 100}), None)?;
        }
    }
    assert_eq!(seen[..10], (0..10).collect::<Vec<_>>()[..]);

    let err = posts
        .query_items("SELECT * FROM c WHERE", &no_params(), &Default::default())
        .unwrap_err();
    assert!(matches!(err, Error::Query(_)), "{err}");
    assert_eq!(err.status(), 400);
    assert!(err.to_string().contains("line 1"), "{err}");
    let bad_token = QueryItemsOptions {
        continuation: Some("garbage".into()),
        ..Default::default()
    };
    assert_eq!(
        posts
            .query_items("SELECT * FROM c", &no_params(), &bad_token)
            .unwrap_err()
            .status(),
        400
    );
    let missing = posts
        .query_items(
            "SELECT * FROM c WHERE c.n = @n",
            &no_params(),
            &Default::default(),
        )
        .unwrap_err();
    assert!(
        missing.to_string().contains("@n") || missing.to_string().contains("'n'"),
        "{missing}"
    );
    Ok(())
}
