//! The partition cache: a durable store opens without reading a document,
//! keeps in memory what its budget allows, evicts the rest and reads it
//! back from storage, and nothing committed is ever missing on the way.
//!
//! `PARTITA_CACHE_STEPS` (default 3,000) bounds the random steps of the
//! eviction test, and a tenth of it each thread's transactions in the
//! racing test.

use std::collections::BTreeMap;

use partita::{
    Container, Database, FeedOptions, ImportOptions, Options, Params, PartitionKey, QueryOptions,
    ScriptProperties,
};
use serde_json::{Value, json};

/// Upserts every document it is given, in one transaction.
const UPSERT_ALL: &str = r#"function upsertAll(docs) {
    var c = getContext().getCollection();
    docs.forEach(function (doc) {
        c.upsertDocument(c.getSelfLink(), doc, function (err) { if (err) throw err; });
    });
}"#;

/// `PARTITA_CACHE_STEPS`, 3,000 by default.
fn steps() -> usize {
    std::env::var("PARTITA_CACHE_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000)
}

/// A durable database in `dir` whose partition cache holds `cache_bytes`.
fn open(dir: &std::path::Path, cache_bytes: usize) -> anyhow::Result<Database> {
    Ok(Database::open_with(
        dir,
        Options {
            cache_bytes,
            ..Options::default()
        },
    )?)
}

/// `n` documents over `partitions` partitions of the container "c".
fn fill(db: &Database, partitions: usize, n: usize) -> anyhow::Result<Container> {
    let c = db.create_container("c", "/pk")?;
    let docs = (0..n)
        .map(|i| json!({"id": format!("d{i}"), "pk": format!("p{}", i % partitions), "n": i}));
    c.import_items(docs, &Default::default(), &mut |_| {})?;
    Ok(c)
}

#[test]
fn a_store_opens_without_reading_a_document() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    {
        let db = open(dir.path(), 1 << 30)?;
        fill(&db, 100, 2_000)?;
    }
    let db = open(dir.path(), 1 << 30)?;
    let stats = db.cache_stats();
    assert_eq!((stats.loads, stats.used), (0, 0), "{stats:?}");
    let c = db.container("c")?;
    // A point read reads one document, not its partition; a partition
    // read again and again is loaded, at the fourth read.
    for _ in 0..3 {
        assert_eq!(c.read_item("p8", "d8")?["n"], 8);
    }
    assert_eq!(db.cache_stats().loads, 0);
    assert_eq!(c.read_item("p8", "d108")?["n"], 108);
    assert_eq!(db.cache_stats().loads, 1);
    // A transaction reads its partition once, then works in memory.
    c.transaction("p7", |txn| {
        let mut doc = txn.read_item("d7")?.into_value();
        doc["n"] = json!(-7);
        txn.replace_item("d7", doc, None)
    })?;
    c.transaction("p7", |txn| txn.read_item("d107"))?;
    assert_eq!(db.cache_stats().loads, 2);
    assert_eq!(c.read_item("p7", "d7")?["n"], -7);
    Ok(())
}

/// What the test expects of the store: pk → id → n.
type Model = BTreeMap<String, BTreeMap<String, i64>>;

/// A tiny deterministic generator (the steps must replay alike).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn check_partition(c: &Container, model: &Model, pk: &str) -> anyhow::Result<()> {
    let want = model.get(pk).cloned().unwrap_or_default();
    let feed = c.read_feed(pk, &FeedOptions::default())?;
    let got: BTreeMap<String, i64> = feed
        .items
        .iter()
        .map(|d| (d.id().to_owned(), d["n"].as_i64().unwrap_or(i64::MIN)))
        .collect();
    anyhow::ensure!(got == want, "partition {pk}: {got:?}, expected {want:?}");
    Ok(())
}

fn check_all(c: &Container, model: &Model) -> anyhow::Result<()> {
    let keys: Vec<PartitionKey> = model
        .iter()
        .filter(|(_, docs)| !docs.is_empty())
        .map(|(pk, _)| PartitionKey::from(pk.as_str()))
        .collect();
    anyhow::ensure!(c.partition_keys()? == keys, "partition keys");
    for pk in model.keys() {
        check_partition(c, model, pk)?;
    }
    let total: usize = model.values().map(BTreeMap::len).sum();
    let page = c.query_items(
        "SELECT VALUE COUNT(1) FROM c",
        &Params::default(),
        &QueryOptions::default(),
    )?;
    anyhow::ensure!(
        page.items == [json!(total)],
        "count {:?}, expected {total}",
        page.items
    );
    Ok(())
}

#[test]
fn an_import_larger_than_the_cache_reads_no_partition_back() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // Room for one of these partitions (about 140 KB each), not for 50.
    let db = open(dir.path(), 1 << 20)?;
    let c = db.create_container("c", "/pk")?;
    let (partitions, n) = (50, 5_000);
    let docs = |n: usize, v: i64| {
        (0..n).map(move |i| json!({"id": format!("d{i}"), "pk": format!("p{}", i % 50), "v": v}))
    };
    // Ten chunks: each partition is written ten times.
    let chunks = ImportOptions {
        chunk_size: 500,
        ..ImportOptions::default()
    };
    let report = c.import_items(docs(n, 1), &chunks, &mut |_| {})?;
    assert_eq!((report.documents, report.transactions), (5_000, 500));
    assert_eq!(db.cache_stats().loads, 0, "{:?}", db.cache_stats());
    // One partition in memory (a transaction loads it): importing into it
    // updates it there.
    c.transaction("p3", |txn| txn.read_item("d3"))?;
    assert_eq!(db.cache_stats().loads, 1);
    let rid = c.read_item("p7", "d7")?["_rid"].clone();
    // Creating again conflicts, and nothing of that partition's
    // transaction is written; upserting replaces, keeping each `_rid`.
    let err = c
        .import_items(docs(10, 2), &ImportOptions::default(), &mut |_| {})
        .unwrap_err();
    assert_eq!(err.source.status(), 409);
    let upsert = ImportOptions {
        upsert: true,
        ..chunks
    };
    c.import_items(docs(n, 3), &upsert, &mut |_| {})?;
    assert_eq!(c.read_item("p7", "d7")?["_rid"], rid);
    let page = c.query_items(
        "SELECT VALUE COUNT(1) FROM c WHERE c.v = 3",
        &Params::default(),
        &QueryOptions::default(),
    )?;
    assert_eq!(page.items, [json!(n)]);
    assert_eq!(c.read_item("p3", "d3")?["v"], 3);
    assert_eq!(c.partition_keys()?.len(), partitions);
    // The query kept what had room to spare, and evicted nothing.
    assert_eq!(db.cache_stats().evictions, 0, "{:?}", db.cache_stats());
    Ok(())
}

#[test]
fn evicted_partitions_read_back_everything_committed() -> anyhow::Result<()> {
    let steps = steps() as u64;
    let dir = tempfile::tempdir()?;
    // Room for a few partitions of 40 small documents, not for 60.
    let budget = 200_000;
    let db = open(dir.path(), budget)?;
    let c = db.create_container("c", "/pk")?;
    c.create_script(ScriptProperties::stored_procedure("upsertAll", UPSERT_ALL))?;
    let mut model = Model::new();
    let mut rng = Lcg(7);
    for step in 0..steps {
        let pk = format!("p{}", rng.below(60));
        let id = format!("d{}", rng.below(40));
        let n = step as i64;
        let docs = model.entry(pk.clone()).or_default();
        match rng.below(6) {
            0 | 1 => {
                c.upsert_item(pk.as_str(), json!({"id": id, "pk": pk, "n": n}), None)?;
                docs.insert(id, n);
            }
            2 => match c.delete_item(pk.as_str(), &id, None) {
                Ok(_) => assert!(docs.remove(&id).is_some(), "{pk}/{id} deleted twice"),
                Err(e) if e.status() == 404 => assert!(!docs.contains_key(&id)),
                Err(e) => return Err(e.into()),
            },
            3 => {
                // A procedure writes three documents in one transaction.
                let batch: Vec<Value> = (0..3)
                    .map(|k| json!({"id": format!("b{k}"), "pk": pk, "n": n}))
                    .collect();
                c.execute_stored_procedure("upsertAll", pk.as_str(), vec![json!(batch)], None)?;
                for k in 0..3 {
                    docs.insert(format!("b{k}"), n);
                }
            }
            4 => {
                let got = c.read_item(pk.as_str(), &id).ok().map(|d| d["n"].as_i64());
                assert_eq!(
                    got,
                    docs.get(&id).map(|&n| Some(n)),
                    "step {step}: {pk}/{id}"
                );
            }
            _ => check_partition(&c, &model, &pk)?,
        }
    }
    let stats = db.cache_stats();
    assert!(
        stats.evictions > 0 && stats.loads > stats.evictions / 2,
        "{stats:?}"
    );
    assert!(stats.used <= budget + 64 * 1024, "{stats:?}");
    check_all(&c, &model)?;
    drop((c, db));
    // Closed (folded) and opened again, with no room at all.
    let db = open(dir.path(), 0)?;
    check_all(&db.container("c")?, &model)
}

#[test]
fn a_query_over_more_than_the_cache_leaves_the_hot_partitions_in_it() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    {
        let db = open(dir.path(), 1 << 30)?;
        fill(&db, 200, 20_000)?;
    }
    // Room for a few partitions of 100 documents, not for 200.
    let db = open(dir.path(), 2_000_000)?;
    let c = db.container("c")?;
    for (pk, id) in [("p1", "d1"), ("p2", "d2")] {
        c.transaction(pk, |txn| txn.read_item(id).map(drop))?;
    }
    let before = db.cache_stats();
    assert_eq!(before.loads, 2);
    let page = c.query_items(
        "SELECT VALUE COUNT(1) FROM c WHERE c.n % 2 = 0",
        &Params::default(),
        &QueryOptions::default(),
    )?;
    assert_eq!(page.items, [json!(10_000)]);
    // Page by page too, with continuations across partitions.
    let mut options = QueryOptions {
        max_item_count: Some(1_500),
        ..QueryOptions::default()
    };
    let mut seen = 0;
    loop {
        let page = c.query_items("SELECT c.id FROM c", &Params::default(), &options)?;
        seen += page.items.len();
        match page.continuation {
            Some(token) => options.continuation = Some(token),
            None => break,
        }
    }
    assert_eq!(seen, 20_000);
    // The query kept what fitted in the room left, and evicted nothing.
    let after = db.cache_stats();
    assert_eq!(after.evictions, 0, "{after:?}");
    assert!(after.loads > 2 && after.used <= 2_000_000, "{after:?}");
    // The hot partitions are still in memory: no load for them.
    c.transaction("p1", |txn| txn.read_item("d1").map(drop))?;
    c.transaction("p2", |txn| txn.read_item("d2").map(drop))?;
    assert_eq!(db.cache_stats().loads, after.loads);
    Ok(())
}

/// Every page of `sql` with `params`, `page_size` items at a time.
fn pages(
    c: &Container,
    sql: &str,
    params: &Value,
    page_size: Option<usize>,
) -> anyhow::Result<Vec<partita::QueryPage>> {
    let params: Params = params.as_object().cloned().unwrap_or_default();
    let mut options = QueryOptions {
        max_item_count: page_size,
        ..QueryOptions::default()
    };
    let mut pages = Vec::new();
    loop {
        let page = c.query_items(sql, &params, &options)?;
        options.continuation.clone_from(&page.continuation);
        pages.push(page);
        if options.continuation.is_none() {
            return Ok(pages);
        }
    }
}

#[test]
fn a_query_over_partitions_not_in_memory_answers_as_one_over_memory() -> anyhow::Result<()> {
    // Storage passes over, unparsed, the documents whose text lacks a
    // constant the filter pins (a string, an integer, a boolean): the
    // items, pages, continuations and the documents and bytes counted as
    // scanned must be those of the same query over the partitions in
    // memory.
    let dir = tempfile::tempdir()?;
    {
        let db = open(dir.path(), 1 << 30)?;
        let c = db.create_container("c", "/pk")?;
        let docs = (0..600).map(|i| {
            let kind = ["post", "comment", "like"][i % 3];
            json!({
                "id": format!("d{i}"),
                "pk": format!("p{}", i % 20),
                "kind": kind,
                "user": format!("u{}", i % 11),
                "n": i % 7,
                "f": (i % 5) as f64,
                "ok": i % 4 == 0,
                "quote": if i % 50 == 0 { "say \"hi\"\n, café" } else { "plain" },
            })
        });
        c.import_items(docs, &ImportOptions::default(), &mut |_| {})?;
    }
    let queries = [
        (
            "SELECT * FROM c WHERE c.kind = 'post' AND c.user = @u",
            json!({"@u": "u3"}),
        ),
        (
            "SELECT c.id FROM c WHERE c.n = 4 AND c.kind = @k",
            json!({"@k": "like"}),
        ),
        ("SELECT * FROM c WHERE c.f = 3", json!({})),
        ("SELECT * FROM c WHERE 2.0 = c.n AND c.ok = true", json!({})),
        (
            "SELECT * FROM c WHERE c.quote = @q",
            json!({"@q": "say \"hi\"\n, café"}),
        ),
        (
            "SELECT VALUE COUNT(1) FROM c WHERE c.kind = 'like'",
            json!({}),
        ),
        (
            "SELECT TOP 7 * FROM c WHERE c.kind = 'comment' ORDER BY c.n DESC",
            json!({}),
        ),
        ("SELECT * FROM c WHERE c.user = 'nobody'", json!({})),
    ];
    let run = |c: &Container| -> anyhow::Result<Vec<Vec<partita::QueryPage>>> {
        let mut all = Vec::new();
        for (sql, params) in &queries {
            for page_size in [None, Some(4)] {
                all.push(pages(c, sql, params, page_size)?);
            }
        }
        Ok(all)
    };
    let cold = {
        // A cache with less than a quarter of its budget free, holding a
        // few partitions: the query reads those from memory and the others
        // from storage, where they stay.
        let budget = 400_000;
        let db = open(dir.path(), budget)?;
        let c = db.container("c")?;
        let mut p = 0;
        while db.cache_stats().used + budget / 4 <= budget {
            c.transaction(format!("p{p}").as_str(), |txn| {
                txn.read_item(&format!("d{p}")).map(drop)
            })?;
            p += 1;
        }
        let before = db.cache_stats();
        assert!(p < 20 && before.evictions == 0, "{before:?}");
        let cold = run(&c)?;
        assert_eq!(db.cache_stats().loads, before.loads);
        cold
    };
    let db = open(dir.path(), 1 << 30)?;
    let c = db.container("c")?;
    for p in 0..20 {
        c.transaction(format!("p{p}").as_str(), |txn| {
            txn.read_item(&format!("d{p}")).map(drop)
        })?;
    }
    assert_eq!(db.cache_stats().loads, 20);
    let hot = run(&c)?;
    for (i, (cold, hot)) in cold.iter().zip(&hot).enumerate() {
        assert_eq!(cold, hot, "query {} of {:?}", i / 2, queries[i / 2]);
    }
    assert!(
        hot.iter()
            .any(|pages| pages.iter().any(|p| !p.items.is_empty()))
    );
    Ok(())
}

#[test]
fn writers_and_readers_racing_evictions_see_whole_transactions() -> anyhow::Result<()> {
    let rounds = steps() / 10;
    let dir = tempfile::tempdir()?;
    // Room for about one partition: every other use evicts one.
    let db = open(dir.path(), 20_000)?;
    let c = db.create_container("c", "/pk")?;
    let partitions = 12;
    for p in 0..partitions {
        let pk = format!("p{p}");
        c.create_item(
            pk.as_str(),
            json!({"id": "post", "pk": pk, "count": 0}),
            None,
        )?;
    }
    // A partition is consistent when its post counts its comments.
    let consistent = |docs: &[partita::Document]| {
        let count = docs
            .iter()
            .find(|d| d.id() == "post")
            .map(|d| d["count"].as_u64());
        let comments = docs.iter().filter(|d| d.id() != "post").count() as u64;
        count == Some(Some(comments))
    };
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let mut handles = Vec::new();
        for w in 0..3 {
            let c = c.clone();
            handles.push(scope.spawn(move || -> anyhow::Result<()> {
                for i in 0..rounds {
                    let pk = format!("p{}", (i * 7 + w) % partitions);
                    c.transaction(pk.as_str(), |txn| {
                        let mut post = txn.read_item("post")?.into_value();
                        let n = post["count"].as_u64().unwrap_or(0);
                        post["count"] = json!(n + 1);
                        txn.replace_item("post", post, None)?;
                        txn.create_item(json!({"id": format!("w{w}-{i}"), "pk": pk}))?;
                        Ok::<_, partita::Error>(())
                    })?;
                }
                Ok(())
            }));
        }
        for r in 0..2 {
            let c = c.clone();
            handles.push(scope.spawn(move || -> anyhow::Result<()> {
                for i in 0..rounds {
                    let pk = format!("p{}", (i * 5 + r) % partitions);
                    let feed = c.read_feed(pk.as_str(), &FeedOptions::default())?;
                    anyhow::ensure!(consistent(&feed.items), "read feed of {pk} mid-transaction");
                    let page = c.query_items(
                        "SELECT * FROM c",
                        &Params::default(),
                        &QueryOptions {
                            partition_key: Some(pk.as_str().into()),
                            ..QueryOptions::default()
                        },
                    )?;
                    let docs: Vec<partita::Document> =
                        page.items.into_iter().map(partita::Document::new).collect();
                    anyhow::ensure!(consistent(&docs), "query of {pk} mid-transaction");
                    c.read_item(pk.as_str(), "post")?;
                }
                Ok(())
            }));
        }
        for handle in handles {
            handle.join().expect("no panic")?;
        }
        Ok(())
    })?;
    let stats = db.cache_stats();
    assert!(stats.evictions > 0, "{stats:?}");
    let mut comments = 0;
    for p in 0..partitions {
        let feed = c.read_feed(format!("p{p}").as_str(), &FeedOptions::default())?;
        assert!(consistent(&feed.items), "p{p} at the end");
        comments += feed.items.len() - 1;
    }
    assert_eq!(comments, 3 * rounds);
    Ok(())
}
