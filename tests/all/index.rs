//! The range index: a store answers a cross-partition query whose WHERE
//! pins paths to constants from its index, reading only the documents it
//! names, and every page, continuation and item is what the same query
//! gives by scanning (an in-memory store that keeps no index). Each test
//! runs on SQLite and in memory ([`on_each_store!`]).
//!
//! `PARTITA_INDEX_CASES` (default 12) bounds the property test's cases.

use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use engine::storage::{MemoryStorage, SqliteStorage};
use engine::testing::FaultyStorage;
use partita::{
    Container, ContainerProperties, Database, IndexingPolicy, ManualClock, Options, Params,
    PartitionKey, QueryOptions,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

/// `PARTITA_INDEX_CASES`, 12 by default.
fn cases() -> u32 {
    std::env::var("PARTITA_INDEX_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

/// The stores the tests run on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Sqlite,
    Memory,
}

/// A store of a [`Kind`]: a SQLite file, or memory.
pub(crate) enum Store {
    Sqlite(tempfile::TempDir),
    /// The database, once opened.
    Memory(Mutex<Option<Database>>),
}

impl Kind {
    /// A new, empty store.
    pub(crate) fn store(self) -> anyhow::Result<Store> {
        Ok(match self {
            Kind::Sqlite => Store::Sqlite(tempfile::tempdir()?),
            Kind::Memory => Store::Memory(Mutex::new(None)),
        })
    }
}

impl Store {
    /// [`Store::open_with`] the default options.
    pub(crate) fn open(&self) -> anyhow::Result<Database> {
        self.open_with(Options::default())
    }

    /// Opens the database: the file again, as a restart does; in memory,
    /// the database the first opening made (with its options), as
    /// nothing survives a restart there.
    pub(crate) fn open_with(&self, options: Options) -> anyhow::Result<Database> {
        match self {
            Store::Sqlite(dir) => Ok(Database::open_with(dir.path(), options)?),
            Store::Memory(db) => {
                let mut db = db.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                if let Some(db) = &*db {
                    return Ok(db.clone());
                }
                let opened = Database::with_storage(Box::new(MemoryStorage::new()), options)?;
                *db = Some(opened.clone());
                Ok(opened)
            }
        }
    }
}

/// Each test named, a function of a [`Kind`], as a test on each store:
/// `index::sqlite::name` and `index::memory::name`.
macro_rules! on_each_store {
    ($($test:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $test() -> anyhow::Result<()> {
                super::$test(super::Kind::Sqlite)
            })*
        }
        mod memory {
            $(#[test]
            fn $test() -> anyhow::Result<()> {
                super::$test(super::Kind::Memory)
            })*
        }
    };
}

on_each_store!(
    a_filter_on_indexed_paths_reads_only_the_documents_the_index_names,
    ranges_lists_prefixes_and_definedness_read_only_what_matches,
    a_composite_index_whose_other_paths_the_filter_fixes_serves_a_one_path_order_by,
    a_composite_index_whose_paths_the_filter_fixes_names_its_documents,
    a_lazy_policy_is_indexed_as_a_consistent_one,
    expired_documents_are_not_counted_from_the_index,
    a_new_policy_builds_its_index_in_the_background_and_queries_stay_right,
    queries_answer_the_same_with_the_index_as_by_scanning,
    a_filter_on_array_elements_reads_only_the_documents_the_index_names,
    array_queries_answer_the_same_with_the_index_as_by_scanning,
);

/// A page's items and continuation.
pub(crate) type Page = (Vec<Value>, Option<String>);

/// Every page of `sql`, `page_size` items at a time: the items and
/// continuations, and the documents counted as scanned.
pub(crate) fn pages(
    c: &Container,
    sql: &str,
    params: &Params,
    page_size: Option<usize>,
) -> anyhow::Result<(Vec<Page>, u64)> {
    let mut options = QueryOptions {
        max_item_count: page_size,
        ..QueryOptions::default()
    };
    let (mut out, mut scanned) = (Vec::new(), 0);
    loop {
        let page = c.query_items(sql, params, &options)?;
        scanned += page.stats.docs_scanned;
        options.continuation.clone_from(&page.continuation);
        out.push((page.items, page.continuation));
        if options.continuation.is_none() {
            return Ok((out, scanned));
        }
    }
}

pub(crate) fn doc(i: usize) -> Value {
    let kind = ["post", "comment", "like"][i % 3];
    json!({
        "id": format!("d{i}"),
        "pk": format!("p{}", i % 40),
        "kind": kind,
        "user": format!("u{}", i % 17),
        "n": i % 7,
    })
}

fn a_filter_on_indexed_paths_reads_only_the_documents_the_index_names(
    kind: Kind,
) -> anyhow::Result<()> {
    let store = kind.store()?;
    let db = store.open()?;
    let c = db.create_container("c", "/pk")?;
    c.import_items((0..2_000).map(doc), &Default::default(), &mut |_| {})?;
    let params: Params = serde_json::from_value(json!({"@u": "u3"}))?;
    let sql = "SELECT * FROM c WHERE c.kind = 'post' AND c.user = @u";
    let expected = (0..2_000).filter(|i| i % 3 == 0 && i % 17 == 3).count() as u64;
    // Pending (not yet folded into the document table), then folded.
    let (got, scanned) = pages(&c, sql, &params, None)?;
    assert_eq!((got[0].0.len() as u64, scanned), (expected, expected));
    drop((c, db));
    let db = store.open()?;
    let c = db.container("c")?;
    let (got, scanned) = pages(&c, sql, &params, None)?;
    assert_eq!((got[0].0.len() as u64, scanned), (expected, expected));
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
    let (got, scanned) = pages(&c, sql, &params, None)?;
    let ids: Vec<&str> = got[0].0.iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"x") && !ids.contains(&"d3"), "{ids:?}");
    assert_eq!(scanned, ids.len() as u64);
    // A path the policy leaves out is scanned.
    c.set_indexing_policy(IndexingPolicy::from_json(&json!({
        "includedPaths": [{"path": "/*"}],
        "excludedPaths": [{"path": "/user/?"}, {"path": "/kind/?"}]
    }))?)?;
    let (again, scanned) = pages(&c, sql, &params, None)?;
    assert_eq!(again, got);
    assert_eq!(scanned, 2_001);
    Ok(())
}

#[test]
fn an_in_memory_database_reads_only_the_documents_its_index_names() -> anyhow::Result<()> {
    let indexed = Database::in_memory();
    let scanning =
        Database::with_storage(Box::new(MemoryStorage::unindexed()), Options::default())?;
    let sql = "SELECT * FROM c WHERE c.kind = 'post' AND c.user = 'u3'";
    let expected = (0..600).filter(|i| i % 3 == 0 && i % 17 == 3).count();
    let mut read = Vec::new();
    for db in [&indexed, &scanning] {
        let c = db.create_container("c", "/pk")?;
        c.import_items((0..600).map(doc), &Default::default(), &mut |_| {})?;
        let page = c.query_items(sql, &Params::new(), &Default::default())?;
        assert_eq!(page.items.len(), expected);
        read.push((page.stats.index_used, page.stats.docs_scanned));
    }
    assert_eq!(read, [(true, expected as u64), (false, 600)]);
    Ok(())
}

fn ranges_lists_prefixes_and_definedness_read_only_what_matches(kind: Kind) -> anyhow::Result<()> {
    let store = kind.store()?;
    let db = store.open()?;
    let c = db.create_container("c", "/pk")?;
    c.import_items((0..2_000).map(doc), &Default::default(), &mut |_| {})?;
    c.upsert_item("p0", json!({"id": "odd", "pk": "p0", "rare": [1]}), None)?;
    let all: Vec<Value> = (0..2_000).map(doc).collect();
    let count = |f: &dyn Fn(&Value) -> bool| all.iter().filter(|d| f(d)).count() as u64;
    let user = |d: &Value| d["user"].as_str().unwrap().to_owned();
    for (sql, expected) in [
        ("SELECT * FROM c WHERE c.n > 5", count(&|d| d["n"] == 6)),
        (
            "SELECT * FROM c WHERE 1 >= c.n",
            count(&|d| d["n"].as_u64() <= Some(1)),
        ),
        (
            "SELECT * FROM c WHERE c.n BETWEEN 2 AND 3",
            count(&|d| matches!(d["n"].as_u64(), Some(2 | 3))),
        ),
        (
            "SELECT * FROM c WHERE c.user IN ('u1', 'u2')",
            count(&|d| matches!(user(d).as_str(), "u1" | "u2")),
        ),
        (
            "SELECT * FROM c WHERE STARTSWITH(c.user, 'u1')",
            count(&|d| user(d).starts_with("u1")),
        ),
        (
            "SELECT * FROM c WHERE c.user < 'u10'",
            count(&|d| user(d).as_str() < "u10"),
        ),
        ("SELECT * FROM c WHERE IS_DEFINED(c.rare)", 1),
        // The walk starts where the range does.
        ("SELECT TOP 5 * FROM c ORDER BY c.id", 5),
        ("SELECT TOP 5 * FROM c WHERE c.id > 'd5' ORDER BY c.id", 5),
    ] {
        let (got, scanned) = pages(&c, sql, &Params::new(), None)?;
        assert_eq!(got[0].0.len() as u64, expected, "{sql}");
        match sql.contains("ORDER BY") {
            // Twice the page, and the row after it.
            true => assert!(scanned <= 2 * (expected + 1), "{sql}: read {scanned}"),
            false => assert_eq!(scanned, expected, "{sql}"),
        }
    }
    // The page says what the index read.
    let page = c.query_items(
        "SELECT * FROM c WHERE c.n > 5",
        &Params::new(),
        &Default::default(),
    )?;
    assert!(page.stats.index_used);
    assert_eq!(page.stats.index_entries, page.items.len() as u64);
    let page = c.query_items(
        "SELECT * FROM c WHERE c.n + 1 > 6",
        &Params::new(),
        &Default::default(),
    )?;
    assert!(!page.stats.index_used && page.stats.index_entries == 0);
    // A count of what the index names exactly reads no document.
    let counted = |sql: &str| -> anyhow::Result<(Value, u64)> {
        let page = c.query_items(sql, &Params::new(), &Default::default())?;
        Ok((page.items[0].clone(), page.stats.docs_scanned))
    };
    let posts = count(&|d| d["kind"] == "post");
    let u1 = count(&|d| d["kind"] == "post" && user(d) == "u1");
    assert_eq!(
        counted("SELECT VALUE COUNT(1) FROM c WHERE c.kind = 'post'")?,
        (json!(posts), 0)
    );
    assert_eq!(
        counted("SELECT COUNT(1) AS n FROM c WHERE c.kind = 'post' AND c.user = 'u1'")?,
        (json!({"n": u1}), 0)
    );
    // Not when WHERE holds more than the index knows, or counts values.
    assert_eq!(
        counted("SELECT VALUE COUNT(1) FROM c WHERE c.kind = 'post' AND c.n + 0 >= 0")?,
        (json!(posts), posts)
    );
    assert_eq!(
        counted("SELECT VALUE COUNT(c.n) FROM c WHERE c.kind = 'post'")?,
        (json!(posts), posts)
    );
    // MIN and MAX of an indexed path read a few documents.
    for (sql, expected) in [
        (
            "SELECT VALUE MIN(c.user) FROM c WHERE c.kind = 'like'",
            json!("u0"),
        ),
        ("SELECT VALUE MAX(c.n) FROM c", json!(6)),
        ("SELECT MIN(c.n) AS m FROM c WHERE c.n > 2", json!({"m": 3})),
    ] {
        let page = c.query_items(sql, &Params::new(), &Default::default())?;
        assert_eq!(page.items, [expected], "{sql}");
        assert!(
            page.stats.docs_scanned < 100,
            "{sql}: read {}",
            page.stats.docs_scanned
        );
    }
    let page = c.query_items(
        "SELECT TOP 0 VALUE MAX(c.n) FROM c",
        &Params::new(),
        &Default::default(),
    )?;
    assert!(page.items.is_empty());
    // An array or an object makes them undefined, as a scan does.
    let page = c.query_items(
        "SELECT VALUE MAX(c.rare) FROM c",
        &Params::new(),
        &Default::default(),
    )?;
    assert!(page.items.is_empty());
    // A composite index serves an ORDER BY on its paths.
    c.set_indexing_policy(IndexingPolicy::from_json(&json!({
        "compositeIndexes": [[{"path": "/user"}, {"path": "/id", "order": "descending"}]]
    }))?)?;
    let sql = "SELECT TOP 5 * FROM c WHERE c.kind = 'post' ORDER BY c.user DESC, c.id";
    let mut expected: Vec<Value> = all
        .iter()
        .filter(|d| d["kind"] == "post")
        .cloned()
        .collect();
    expected.sort_by(|a, b| {
        user(b)
            .cmp(&user(a))
            .then(a["id"].as_str().cmp(&b["id"].as_str()))
    });
    let ids = |items: &[Value]| -> Vec<String> {
        items
            .iter()
            .map(|d| d["id"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    // Right while the index is built (by scanning), then from the index.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let (got, scanned) = pages(&c, sql, &Params::new(), None)?;
        assert_eq!(ids(&got[0].0), ids(&expected[..5]));
        if scanned <= 2 * 6 * 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the index was never built"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Types do not mix: a number is never less than a string.
    let (got, _) = pages(&c, "SELECT * FROM c WHERE c.n < 'a'", &Params::new(), None)?;
    assert!(got[0].0.is_empty());
    Ok(())
}

fn a_composite_index_whose_other_paths_the_filter_fixes_serves_a_one_path_order_by(
    kind: Kind,
) -> anyhow::Result<()> {
    let store = kind.store()?;
    {
        let db = store.open()?;
        let c = db.create_container_with(
            ContainerProperties::new("c", "/pk").with_indexing_policy(IndexingPolicy::from_json(
                &json!({
                    "compositeIndexes": [[{"path": "/kind"}, {"path": "/id", "order": "descending"}]]
                }),
            )?),
        )?;
        c.import_items((0..3_000).map(doc), &Default::default(), &mut |_| {})?;
    }
    let mut posts: Vec<String> = (0..3_000)
        .filter(|i| i % 3 == 0)
        .map(|i| format!("d{i}"))
        .collect();
    posts.sort();
    let reversed: Vec<String> = posts.iter().rev().cloned().collect();
    // Pending (just imported), then folded (reopened).
    for round in 0..2 {
        let db = store.open()?;
        let c = db.container("c")?;
        if round == 0 {
            c.upsert_item("p0", json!({"id": "x", "pk": "p0"}), None)?;
        }
        for (sql, expected) in [
            (
                "SELECT VALUE c.id FROM c WHERE c.kind = 'post' ORDER BY c.id",
                &posts,
            ),
            (
                "SELECT VALUE c.id FROM c WHERE c.kind = 'post' ORDER BY c.id DESC",
                &reversed,
            ),
        ] {
            let mut options = QueryOptions {
                max_item_count: Some(7),
                ..QueryOptions::default()
            };
            // The first pages: each reads about twice what it returns (no
            // comment or like), and continues where the last stopped.
            let mut ids: Vec<String> = Vec::new();
            for _ in 0..3 {
                let page = c.query_items(sql, &Params::new(), &options)?;
                assert!(
                    page.stats.docs_scanned <= 2 * 8,
                    "{sql}: read {}",
                    page.stats.docs_scanned
                );
                ids.extend(
                    page.items
                        .iter()
                        .map(|v| v.as_str().unwrap_or_default().to_owned()),
                );
                options.continuation = page.continuation;
            }
            assert_eq!(ids, expected[..21], "{sql} round {round}");
        }
    }
    Ok(())
}

fn a_composite_index_whose_paths_the_filter_fixes_names_its_documents(
    kind: Kind,
) -> anyhow::Result<()> {
    let store = kind.store()?;
    let db = store.open()?;
    let c = db.create_container_with(ContainerProperties::new("c", "/pk").with_indexing_policy(
        IndexingPolicy::from_json(&json!({
            "compositeIndexes": [[{"path": "/kind"}, {"path": "/user", "order": "descending"}]]
        }))?,
    ))?;
    c.import_items((0..3_000).map(doc), &Default::default(), &mut |_| {})?;
    let expected = (0..3_000).filter(|i| i % 3 == 0 && i % 17 == 3).count() as u64;
    // Two values at one path: nothing matches both.
    let page = c.query_items(
        "SELECT VALUE COUNT(1) FROM c WHERE c.kind = 'post' AND c.user = 'u3' AND c.kind = 'like'",
        &Params::new(),
        &Default::default(),
    )?;
    assert_eq!(page.items, [json!(0)]);
    for sql in [
        "SELECT * FROM c WHERE c.user = 'u3' AND c.kind = 'post'",
        "SELECT VALUE COUNT(1) FROM c WHERE c.kind = 'post' AND c.user = 'u3'",
    ] {
        let page = c.query_items(sql, &Params::new(), &Default::default())?;
        assert_eq!(page.stats.index_entries, expected, "{sql}");
        if sql.contains("COUNT") {
            assert_eq!(
                (page.items[0].clone(), page.stats.docs_scanned),
                (json!(expected), 0)
            );
        } else {
            assert_eq!(
                (page.items.len() as u64, page.stats.docs_scanned),
                (expected, expected)
            );
        }
    }
    Ok(())
}

/// A document whose arrays hold its tags and items: `t{i % 5}` and
/// `t{i % 11 + 5}`, and an item named `n{i % 13}`.
fn tagged(i: usize) -> Value {
    json!({
        "id": format!("d{i}"),
        "pk": format!("p{}", i % 40),
        "tags": [format!("t{}", i % 5), format!("t{}", i % 11 + 5)],
        "items": [{"name": format!("n{}", i % 13), "qty": i % 4}, {"qty": 9}],
    })
}

fn a_filter_on_array_elements_reads_only_the_documents_the_index_names(
    kind: Kind,
) -> anyhow::Result<()> {
    let store = kind.store()?;
    store.open()?.create_container("c", "/pk")?.import_items(
        (0..2_000).map(tagged),
        &Default::default(),
        &mut |_| {},
    )?;
    let count = |f: &dyn Fn(usize) -> bool| (0..2_000).filter(|i| f(*i)).count() as u64;
    let t7 = count(&|i| i % 11 == 2);
    let n3 = count(&|i| i % 13 == 3);
    let both = count(&|i| i % 11 == 2 && i % 13 == 3);
    let params: Params = serde_json::from_value(json!({"@t": "t7", "@n": "n3"}))?;
    // Right after the import, and after a reopen.
    for round in 0..2 {
        let db = store.open()?;
        let c = db.container("c")?;
        for (sql, expected, rows) in [
            ("SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, @t)", t7, t7),
            (
                "SELECT VALUE c.id FROM c JOIN t IN c.tags WHERE t = @t",
                t7,
                t7,
            ),
            (
                "SELECT VALUE t FROM c JOIN t IN c.tags WHERE t IN ('t7', 't15') AND STARTSWITH(t, 't1')",
                // Each term asks for some element: `t1` and `t7` in one
                // document satisfy both.
                count(&|i| i % 11 == 10 || (i % 11 == 2 && i % 5 == 1)),
                count(&|i| i % 11 == 10),
            ),
            (
                "SELECT c.id FROM c JOIN i IN c.items WHERE i.name = @n",
                n3,
                n3,
            ),
            (
                "SELECT * FROM c WHERE EXISTS(SELECT VALUE t FROM t IN c.tags WHERE t = @t) \
                 AND ARRAY_CONTAINS(c.items, {\"name\": @n}, true)",
                both,
                both,
            ),
            // A JOIN's rows, counted by reading the documents.
            (
                "SELECT VALUE COUNT(1) FROM c JOIN i IN c.items WHERE i.qty > 2",
                2_000,
                1,
            ),
        ] {
            let page = c.query_items(sql, &params, &Default::default())?;
            assert!(page.stats.index_used, "{sql}");
            assert_eq!(
                (page.items.len() as u64, page.stats.docs_scanned),
                (rows, expected),
                "{sql} round {round}"
            );
        }
        let page = c.query_items(
            "SELECT VALUE COUNT(1) FROM c JOIN i IN c.items WHERE i.qty > 2",
            &params,
            &Default::default(),
        )?;
        assert_eq!(page.items, [json!(2_000 + count(&|i| i % 4 == 3))]);
        // An EXISTS's condition on the document asks for an element too.
        let page = c.query_items(
            "SELECT VALUE COUNT(1) FROM c WHERE EXISTS(SELECT VALUE t FROM t IN c.none WHERE c.id = 'd1')",
            &params,
            &Default::default(),
        )?;
        assert_eq!(page.items, [json!(0)]);
        // What asks no element scans.
        let page = c.query_items(
            "SELECT * FROM c WHERE NOT ARRAY_CONTAINS(c.tags, @t)",
            &params,
            &Default::default(),
        )?;
        assert_eq!(
            (page.items.len() as u64, page.stats.docs_scanned),
            (2_000 - t7, 2_000)
        );
    }
    Ok(())
}

fn a_lazy_policy_is_indexed_as_a_consistent_one(kind: Kind) -> anyhow::Result<()> {
    let store = kind.store()?;
    let sql = "SELECT VALUE COUNT(1) FROM c WHERE c.n = 1";
    {
        let db = store.open()?;
        let c = db
            .create_container_with(ContainerProperties::new("c", "/pk").with_indexing_policy(
                IndexingPolicy::from_json(&json!({"indexingMode": "lazy"}))?,
            ))?;
        c.import_items((0..70).map(doc), &Default::default(), &mut |_| {})?;
    }
    // Reopened, so the documents are folded and counted from the index.
    let db = store.open()?;
    let page = db
        .container("c")?
        .query_items(sql, &Params::new(), &Default::default())?;
    assert_eq!(page.items, [json!(10)]);
    Ok(())
}

fn expired_documents_are_not_counted_from_the_index(kind: Kind) -> anyhow::Result<()> {
    let store = kind.store()?;
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    let db = store.open_with(Options {
        clock: clock.clock(),
        ..Options::default()
    })?;
    let c = db.create_container_with(ContainerProperties::new("c", "/pk").with_default_ttl(60))?;
    c.import_items((0..300).map(doc), &Default::default(), &mut |_| {})?;
    let sql = "SELECT VALUE COUNT(1) FROM c WHERE c.kind = 'post'";
    let page = c.query_items(sql, &Params::new(), &Default::default())?;
    assert_eq!(page.items, [json!(100)]);
    clock.advance(Duration::from_secs(61));
    let page = c.query_items(sql, &Params::new(), &Default::default())?;
    assert_eq!(page.items, [json!(0)]);
    Ok(())
}

fn a_new_policy_builds_its_index_in_the_background_and_queries_stay_right(
    kind: Kind,
) -> anyhow::Result<()> {
    let store = kind.store()?;
    let sql = "SELECT VALUE COUNT(1) FROM c WHERE c.n = 4";
    {
        let db = store.open()?;
        let c = db.create_container_with(ContainerProperties {
            indexing_policy: IndexingPolicy::from_json(&json!({"indexingMode": "none"}))?,
            ..ContainerProperties::new("c", "/pk")
        })?;
        c.import_items((0..5_000).map(doc), &Default::default(), &mut |_| {})?;
        let (got, scanned) = pages(&c, sql, &Params::new(), None)?;
        assert_eq!(got[0].0, [json!(714)]);
        assert_eq!(scanned, 5_000);
        assert_eq!(c.index_progress()?, 100, "nothing to build under mode none");
        c.set_indexing_policy(IndexingPolicy::default())?;
        // Right at once (by scanning while the index is built) and to
        // the end.
        let (got, _) = pages(&c, sql, &Params::new(), None)?;
        assert_eq!(got[0].0, [json!(714)]);
    }
    // The build resumes after a reopen and finishes in the background,
    // its progress growing to 100.
    let db = store.open()?;
    let c = db.container("c")?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let mut progress = 0;
    loop {
        let now = c.index_progress()?;
        assert!((progress..=100).contains(&now), "{progress} then {now}");
        progress = now;
        let (got, scanned) = pages(&c, sql, &Params::new(), None)?;
        assert_eq!(got[0].0, [json!(714)]);
        // Counted from the index, reading nothing.
        if scanned == 0 {
            assert_eq!(c.index_progress()?, 100);
            return Ok(());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the index was never built"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// One random step on both stores.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    Upsert { pk: u8, id: u8, body: Value },
    Delete { pk: u8, id: u8 },
    Reopen,
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0i64..4).prop_map(Value::from),
        Just(json!(1.5)),
        Just(json!("x")),
        Just(json!("xy")),
        Just(json!("y")),
        Just(json!("")),
        // UTF-16 order puts U+E000 after U+10000; UTF-8's, before.
        Just(json!("\u{e000}")),
        Just(json!("\u{10000}")),
        Just(json!(true)),
        Just(json!(null)),
        Just(json!([1])),
        Just(json!([0, 5])),
        Just(json!({"z": 1})),
        Just(json!({"y": 2})),
    ]
}

pub(crate) fn step() -> impl Strategy<Value = Step> {
    let body = (
        proptest::option::of(scalar()),
        proptest::option::of(scalar()),
        0i64..100,
    )
        .prop_map(|(a, k, n)| {
            let mut body = json!({"n": n});
            if let Some(a) = a {
                body["a"] = a;
            }
            if let Some(k) = k {
                body["o"] = json!({"k": k});
            }
            body
        });
    steps_with(body)
}

/// Upserts of `body`, deletes and reopens.
fn steps_with(body: impl Strategy<Value = Value>) -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u8..12, 0u8..30, body).prop_map(|(pk, id, body)| Step::Upsert { pk, id, body }),
        2 => (0u8..12, 0u8..30).prop_map(|(pk, id)| Step::Delete { pk, id }),
        1 => Just(Step::Reopen),
    ]
}

/// A step whose document has arrays: `tags` of scalars and `items` of
/// objects (`name`, `k`), each at times missing, empty or not an array.
pub(crate) fn array_step() -> impl Strategy<Value = Step> {
    let tags = prop_oneof![
        4 => proptest::collection::vec(scalar(), 0..4).prop_map(Value::from),
        1 => scalar(),
    ];
    let item = prop_oneof![
        4 => (proptest::option::of(scalar()), proptest::option::of(scalar())).prop_map(
            |(name, k)| {
                let mut item = json!({});
                if let Some(name) = name {
                    item["name"] = name;
                }
                if let Some(k) = k {
                    item["k"] = k;
                }
                item
            }
        ),
        1 => scalar(),
    ];
    let items = prop_oneof![
        4 => proptest::collection::vec(item, 0..3).prop_map(Value::from),
        1 => scalar(),
    ];
    let body = (
        proptest::option::of(tags),
        proptest::option::of(items),
        0i64..100,
    )
        .prop_map(|(tags, items, n)| {
            let mut body = json!({"n": n});
            if let Some(tags) = tags {
                body["tags"] = tags;
            }
            if let Some(items) = items {
                body["items"] = items;
            }
            body
        });
    steps_with(body)
}

/// A query of [`array_step`]'s documents that filters on their arrays'
/// elements: through a JOIN, `ARRAY_CONTAINS` or `EXISTS`, and through
/// what asks no element (`NOT`, `OR`), beside a condition on `c.n`.
pub(crate) fn array_query() -> impl Strategy<Value = (String, Params)> {
    // Each shape with the element paths its joins bind.
    let shape = prop_oneof![
        Just(("SELECT * FROM c WHERE {w}", &[][..])),
        Just((
            "SELECT TOP 3 c.id, c.tags FROM c WHERE {w} ORDER BY c.n DESC",
            &[][..]
        )),
        Just(("SELECT VALUE COUNT(1) FROM c WHERE {w}", &[][..])),
        Just((
            "SELECT c.id, t FROM c JOIN t IN c.tags WHERE {w}",
            &["t"][..]
        )),
        Just((
            "SELECT VALUE COUNT(1) FROM c JOIN t IN c.tags WHERE {w}",
            &["t"][..]
        )),
        Just((
            "SELECT c.id, i FROM c JOIN i IN c.items WHERE {w} ORDER BY c.n",
            &["i.name", "i.k"][..]
        )),
        Just((
            "SELECT VALUE [c.id, t, i.name] FROM c JOIN t IN c.tags JOIN i IN c.items WHERE {w}",
            &["t", "i.name"][..]
        )),
        Just((
            "SELECT DISTINCT VALUE c.id FROM c JOIN i IN c.items WHERE {w}",
            &["i.name", "i.k"][..]
        )),
    ];
    let term = (0u8..9, 0u8..9, any::<bool>(), scalar(), scalar(), 0usize..2);
    (shape, proptest::collection::vec(term, 0..3)).prop_map(|((shape, elements), terms)| {
        let mut params = Params::new();
        let conjuncts: Vec<String> = terms
            .into_iter()
            .enumerate()
            .map(|(i, (form, kind, flip, a, b, which))| {
                let name = format!("v{i}");
                let (pa, pb) = (format!("@{name}a"), format!("@{name}b"));
                let (a, b) = match form {
                    // `c.n` holds numbers: compare it with numbers.
                    6 => (json!(i * 30), json!(50)),
                    _ => (a, b),
                };
                params.insert(pa.clone(), a);
                params.insert(pb, b);
                match (form, elements.get(which % elements.len().max(1))) {
                    (0, Some(path)) => condition(path, &name, kind, flip),
                    (0 | 1, _) => format!("ARRAY_CONTAINS(c.tags, {pa})"),
                    (2, _) => format!("ARRAY_CONTAINS(c.items, {{\"name\": {pa}}}, true)"),
                    (3, _) => format!("ARRAY_CONTAINS(c.items, {pa}, {flip})"),
                    (4, _) => format!(
                        "EXISTS(SELECT VALUE x FROM x IN c.tags WHERE {})",
                        condition("x", &name, kind, flip)
                    ),
                    (5, _) => format!(
                        "EXISTS(SELECT VALUE x FROM x IN c.items WHERE {})",
                        condition("x.name", &name, kind, flip)
                    ),
                    (6, _) if flip => format!(
                        "EXISTS(SELECT VALUE x FROM x IN c.tags WHERE {})",
                        condition("c.n", &name, kind % 7, flip)
                    ),
                    (6, _) => condition("c.n", &name, kind % 7, flip),
                    (7, _) => format!("NOT ARRAY_CONTAINS(c.tags, {pa})"),
                    _ => format!("(ARRAY_CONTAINS(c.tags, {pa}) OR c.n < 50)"),
                }
            })
            .collect();
        let w = match conjuncts.is_empty() {
            true => "true".to_owned(),
            false => conjuncts.join(" AND "),
        };
        (shape.replace("{w}", &w), params)
    })
}

/// A condition on `path` with the parameters `@{name}a` and `@{name}b`:
/// each kind the index answers, and a constant on either side.
fn condition(path: &str, name: &str, kind: u8, flip: bool) -> String {
    let (a, b) = (format!("@{name}a"), format!("@{name}b"));
    let compare = |op: &str, flipped: &str| match flip {
        false => format!("{path} {op} {a}"),
        true => format!("{a} {flipped} {path}"),
    };
    match kind {
        0 => compare("=", "="),
        1 => compare("<", ">"),
        2 => compare("<=", ">="),
        3 => compare(">", "<"),
        4 => compare(">=", "<="),
        5 => format!("{path} IN ({a}, {b})"),
        6 => format!("{path} BETWEEN {a} AND {b}"),
        7 if flip => format!("STARTSWITH({path}, {a}, false)"),
        7 => format!("STARTSWITH({path}, {a})"),
        _ => format!("IS_DEFINED({path})"),
    }
}

pub(crate) fn query() -> impl Strategy<Value = (String, Params)> {
    let term = (
        prop_oneof![Just("c.a"), Just("c.o.k"), Just("c.n")],
        0u8..9,
        any::<bool>(),
        scalar(),
        scalar(),
    );
    let shape = prop_oneof![
        Just("SELECT * FROM c WHERE {w}"),
        Just("SELECT c.id, c.a FROM c WHERE {w} ORDER BY c.n DESC"),
        Just("SELECT TOP 3 * FROM c WHERE {w} ORDER BY c.a"),
        Just("SELECT * FROM c WHERE {w} ORDER BY c.a DESC"),
        // Composite indexes, in their directions and reversed.
        Just("SELECT TOP 4 c.id, c.a, c.n FROM c WHERE {w} ORDER BY c.a, c.n DESC"),
        Just("SELECT c.id FROM c WHERE {w} ORDER BY c.a DESC, c.n"),
        Just("SELECT * FROM c WHERE {w} ORDER BY c.o.k DESC, c.a"),
        Just("SELECT VALUE COUNT(1) FROM c WHERE {w}"),
        Just("SELECT VALUE MIN(c.a) FROM c WHERE {w}"),
        Just("SELECT MAX(c.n) AS m FROM c WHERE {w}"),
        Just("SELECT VALUE MAX(c.o.k) FROM c WHERE {w}"),
        Just("SELECT DISTINCT VALUE c.a FROM c WHERE {w}"),
    ];
    (shape, proptest::collection::vec(term, 0..3), any::<bool>()).prop_map(
        |(shape, terms, extra)| {
            let mut params = Params::new();
            let mut conjuncts: Vec<String> = terms
                .into_iter()
                .enumerate()
                .map(|(i, (path, kind, flip, a, b))| {
                    let name = format!("v{i}");
                    // `c.n` holds numbers: compare it with numbers mostly.
                    let (a, b) = match (path, a, b) {
                        ("c.n", Value::String(_), b) => (json!(i * 30), b),
                        (_, a, b) => (a, b),
                    };
                    params.insert(format!("@{name}a"), a);
                    params.insert(format!("@{name}b"), b);
                    condition(path, &name, kind, flip)
                })
                .collect();
            if extra {
                conjuncts.push("c.n >= 10".to_owned());
            }
            if conjuncts.is_empty() {
                conjuncts.push("true".to_owned());
            }
            (shape.replace("{w}", &conjuncts.join(" AND ")), params)
        },
    )
}

fn queries_answer_the_same_with_the_index_as_by_scanning(kind: Kind) -> anyhow::Result<()> {
    run_cases(cases(), step(), query(), |steps, queries| {
        check(kind, steps, queries)
    })
}

fn array_queries_answer_the_same_with_the_index_as_by_scanning(kind: Kind) -> anyhow::Result<()> {
    run_cases(cases(), array_step(), array_query(), |steps, queries| {
        check(kind, steps, queries)
    })
}

/// Runs `check` on `cases` random cases, each a list of steps and one of
/// queries; the first failing case (shrunk) is the error.
pub(crate) fn run_cases(
    cases: u32,
    step: impl Strategy<Value = Step>,
    query: impl Strategy<Value = (String, Params)>,
    check: impl Fn(&[Step], &[(String, Params)]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        proptest::collection::vec(step, 1..120),
        proptest::collection::vec(query, 1..8),
    );
    runner
        .run(&strategy, |(steps, queries)| {
            check(&steps, &queries).map_err(|e| TestCaseError::fail(format!("{e:#}")))
        })
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Partition keys of two types, so that their order is not their text's
/// (`[10]` sorts before `[9]` as text).
fn key(pk: u8) -> Value {
    if pk.is_multiple_of(2) {
        json!(pk)
    } else {
        json!(format!("p{pk}"))
    }
}

fn pk_of(pk: u8) -> PartitionKey {
    PartitionKey::from_value(&key(pk)).expect("a string or a number")
}

fn check(kind: Kind, steps: &[Step], queries: &[(String, Params)]) -> anyhow::Result<()> {
    let store = kind.store()?;
    check_with(
        steps,
        queries,
        |options| store.open_with(options),
        |pages| pages,
    )
}

/// Replays `steps` on a store `open` opens (again at each reopen) and on
/// an in-memory one that keeps no index and scans, then compares every
/// page of each query on both, as `comparable` makes them.
pub(crate) fn check_with<T: PartialEq + std::fmt::Debug>(
    steps: &[Step],
    queries: &[(String, Params)],
    open: impl Fn(Options) -> anyhow::Result<Database>,
    comparable: impl Fn(Vec<Page>) -> T,
) -> anyhow::Result<()> {
    // One clock, so both stamp the same `_ts`.
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    // A small cache, so partitions are read from storage too.
    let options = || Options {
        cache_bytes: 4_000,
        clock: clock.clock(),
        ..Options::default()
    };
    let mut durable = open(options())?;
    let scanning = Database::with_storage(Box::new(MemoryStorage::unindexed()), options())?;
    let policy = IndexingPolicy::from_json(&json!({
        "compositeIndexes": [
            [{"path": "/a"}, {"path": "/n", "order": "descending"}],
            [{"path": "/o/k", "order": "descending"}, {"path": "/a"}]
        ]
    }))?;
    for db in [&durable, &scanning] {
        db.create_container_with(
            ContainerProperties::new("c", "/pk").with_indexing_policy(policy.clone()),
        )?;
    }
    for step in steps {
        match step {
            Step::Upsert { pk, id, body } => {
                let mut body = body.clone();
                body["id"] = json!(format!("d{id}"));
                body["pk"] = key(*pk);
                durable
                    .container("c")?
                    .upsert_item(pk_of(*pk), body.clone(), None)?;
                scanning
                    .container("c")?
                    .upsert_item(pk_of(*pk), body, None)?;
            }
            Step::Delete { pk, id } => {
                let id = format!("d{id}");
                let a = durable.container("c")?.delete_item(pk_of(*pk), &id, None);
                let b = scanning.container("c")?.delete_item(pk_of(*pk), &id, None);
                anyhow::ensure!(a.is_ok() == b.is_ok(), "delete {id}: {a:?} {b:?}");
            }
            Step::Reopen => {
                drop(durable);
                durable = open(options())?;
            }
        }
    }
    let (d, s) = (durable.container("c")?, scanning.container("c")?);
    for (sql, params) in queries {
        for page_size in [None, Some(2)] {
            let indexed = comparable(pages(&d, sql, params, page_size)?.0);
            let scanned = comparable(pages(&s, sql, params, page_size)?.0);
            anyhow::ensure!(
                indexed == scanned,
                "{sql} {params:?} pages of {page_size:?}:\n{indexed:?}\n{scanned:?}"
            );
        }
    }
    Ok(())
}

#[test]
fn an_order_by_across_partitions_reads_each_document_it_returns_once() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let storage = FaultyStorage::new(SqliteStorage::open(
        &dir.path().join("partita.db"),
        partita::Durability::None,
    )?);
    let read = storage.faults().clone();
    let options = Options {
        // Nothing stays in memory: every document comes from storage.
        cache_bytes: 0,
        ..Options::default()
    };
    let db = Database::with_storage(Box::new(storage), options)?;
    let c = db.create_container_with(
        ContainerProperties::new("c", "/pk").with_indexing_policy(IndexingPolicy::from_json(
            &json!({"compositeIndexes": [[{"path": "/kind"}, {"path": "/n", "order": "descending"}]]}),
        )?),
    )?;
    let docs = (0..400)
        .map(|i| json!({"id": format!("d{i}"), "pk": format!("p{i}"), "kind": "post", "n": i}));
    c.import_items(docs, &Default::default(), &mut |_| {})?;
    let page = c.query_items(
        "SELECT TOP 20 * FROM c WHERE c.kind = 'post' ORDER BY c.n DESC",
        &Params::new(),
        &QueryOptions::default(),
    )?;
    let first: Vec<i64> = page
        .items
        .iter()
        .map(|d| d["n"].as_i64().unwrap())
        .collect();
    assert_eq!(first, (380..400).rev().collect::<Vec<i64>>());
    // The documents of the entries the walk read (the page's, and two
    // after it to make the page certain), each once: a deferred
    // projection read the 20 again.
    let read = read.documents_read_by_rid();
    assert!(read <= 22, "{read} documents read for a page of 20");
    Ok(())
}

#[test]
fn a_query_in_a_partition_not_in_memory_finds_its_documents_through_an_equality()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let open = |cache_bytes| {
        Database::open_with(
            dir.path(),
            Options {
                cache_bytes,
                ..Options::default()
            },
        )
    };
    let db = open(0)?;
    let c = db.create_container("c", "/pk")?;
    let kind_of = |i: usize| ["post", "comment", "like"][i % 5 % 3];
    let docs = (0..300).map(|i| {
        let kind = kind_of(i);
        json!({"id": format!("d{i}"), "pk": format!("p{}", i % 3), "kind": kind, "n": i})
    });
    c.import_items(docs, &Default::default(), &mut |_| {})?;
    let in_p1 = QueryOptions {
        partition_key: Some("p1".into()),
        ..QueryOptions::default()
    };
    let expected = |kind: &str| {
        (0..300)
            .filter(|&i| i % 3 == 1 && kind_of(i) == kind)
            .count() as u64
    };
    let check = |c: &Container| -> anyhow::Result<()> {
        let count = c.query_items(
            "SELECT VALUE COUNT(1) FROM c WHERE c.kind = 'comment'",
            &Params::new(),
            &in_p1,
        )?;
        assert_eq!(count.items, vec![json!(expected("comment"))]);
        assert!(count.stats.index_used);
        assert_eq!(count.stats.docs_scanned, 0, "the index counted them");
        let likes = c.query_items(
            "SELECT * FROM c WHERE c.kind = 'like' AND c.n > 100",
            &Params::new(),
            &in_p1,
        )?;
        let wanted = (0..300)
            .filter(|i| i % 3 == 1 && i % 5 % 3 == 2 && *i > 100)
            .count();
        assert_eq!(likes.items.len(), wanted);
        assert_eq!(likes.stats.docs_scanned, wanted as u64, "both terms filter");
        // A range alone does not seek: the partition is read.
        let range = c.query_items("SELECT * FROM c WHERE c.n > 100", &Params::new(), &in_p1)?;
        assert!(!range.stats.index_used);
        assert_eq!(range.stats.docs_scanned, 100);
        Ok(())
    };
    // Pending (not yet folded into the document table), then folded.
    check(&c)?;
    drop((c, db));
    let db = open(64 << 20)?;
    let c = db.container("c")?;
    check(&c)?;
    // A change in the partition is seen by the next count.
    c.upsert_item(
        "p1",
        json!({"id": "x", "pk": "p1", "kind": "comment"}),
        None,
    )?;
    c.delete_item("p1", "d1", None)?;
    let count = c.query_items(
        "SELECT VALUE COUNT(1) FROM c WHERE c.kind = 'comment'",
        &Params::new(),
        &in_p1,
    )?;
    let before = expected("comment");
    let d1_was_comment = kind_of(1) == "comment";
    assert_eq!(
        count.items,
        vec![json!(before + 1 - u64::from(d1_was_comment))]
    );
    // Once a transaction brought it into memory, the partition is read there.
    c.transaction("p1", |txn| -> anyhow::Result<()> {
        txn.read_item("x")?;
        Ok(())
    })?;
    let cached = c.query_items(
        "SELECT VALUE COUNT(1) FROM c WHERE c.kind = 'comment'",
        &Params::new(),
        &in_p1,
    )?;
    assert_eq!(cached.items, count.items);
    assert!(!cached.stats.index_used);
    Ok(())
}
