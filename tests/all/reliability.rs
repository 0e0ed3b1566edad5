//! Partita's own guarantees under storage faults and bad input.
//!
//! * Storage faults: a storage layer over the real SQLite storage fails the
//!   n-th commit, either before its write (a write error) or after it (an
//!   fsync whose outcome is unknown: the record may be durable), while
//!   stored procedures and triggers run. After each failure the engine
//!   refuses writes (503) and keeps serving reads; reopening the directory
//!   recovers a consistent state: every acknowledged call, the failed one
//!   wholly or not at all, and the invariant intact.
//!   `PARTITA_STORAGE_FAULTS` (default 12) sets the largest n.
//! * Bad input: documents over 2 MB, ids with forbidden characters, JSON
//!   nested 10,000 levels deep (as a document, as procedure parameters and
//!   built by a script), malformed SQL, scripts that do not compile, values
//!   that are not documents: each gets a clear 4xx, nothing stored changes
//!   (documents and change log compared before and after), nothing panics.

use engine::storage::SqliteStorage;
use engine::testing::{CommitFault, FaultyStorage};
use partita::{Container, ScriptProperties, TriggerOperation, TriggerType, WriteOptions};
use partita::{Database, Durability, Lsn, Options, QueryOptions, ScriptKind};
use serde_json::{Value, json};

use crate::support::{js, store_comment_scripts};

/// SQLite storage whose `fail_at`-th commit fails, before or after the write.
fn faulty_disk(
    path: &std::path::Path,
    fail_at: usize,
    after_write: bool,
) -> engine::Result<FaultyStorage<SqliteStorage>> {
    let storage = FaultyStorage::new(SqliteStorage::open(path, Durability::Full)?);
    storage.faults().fail_commit(
        fail_at as u64,
        if after_write {
            CommitFault::after_write("fsync: input/output error (injected after the write)")
        } else {
            CommitFault::before_write("write: no space left on device (injected)")
        },
    );
    Ok(storage)
}

/// Call `i` of the workload: a procedure call, a write with a trigger or a
/// native transaction, each adding comment `c{i}` and incrementing the count.
fn workload_call(posts: &Container, i: usize) -> Result<(), u16> {
    let id = format!("c{i}");
    match i % 3 {
        0 => posts
            .execute_stored_procedure(
                "createComment",
                "p1",
                vec![json!("p1"), json!({"id": id})],
                None,
            )
            .map(drop)
            .map_err(|e| e.status()),
        1 => posts
            .upsert_item(
                "p1",
                json!({"id": id, "postId": "p1"}),
                Some(&WriteOptions {
                    post_triggers: vec!["countComment".into()],
                    ..WriteOptions::default()
                }),
            )
            .map(drop)
            .map_err(|e| e.status()),
        _ => partita_workload::blog::create_comment(posts, "p1", json!({"id": id}))
            .map(drop)
            .map_err(|e| e.status()),
    }
}

/// The comments present in p1, and whether commentCount matches them.
fn comments(posts: &Container) -> (Vec<String>, bool) {
    let snapshot = posts.raw().snapshot(&"p1".into()).expect("read p1");
    let mut ids: Vec<String> = snapshot
        .documents()
        .filter(|d| d.id() != "p1")
        .map(|d| d.id().to_owned())
        .collect();
    ids.sort();
    let count = posts
        .read_item("p1", "p1")
        .map(|p| p["commentCount"].as_u64().unwrap_or(0));
    (ids.clone(), count.ok() == Some(ids.len() as u64))
}

#[test]
fn storage_faults_make_the_engine_refuse_writes_and_reopen_consistent() -> anyhow::Result<()> {
    let max: usize = std::env::var("PARTITA_STORAGE_FAULTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let mut checked = 0;
    for fail_at in 2..=max + 1 {
        for after_write in [false, true] {
            let dir = tempfile::tempdir()?;
            let path = dir.path().join(engine::DATA_FILE);
            let storage = faulty_disk(&path, fail_at, after_write)?;
            let db = Database::with_storage(Box::new(storage), Options::default())?;
            let posts = db.create_container("posts", "/postId")?;
            store_comment_scripts(&posts, TriggerOperation::Upsert)?;
            // Commit 1: the post.
            posts.create_item(
                "p1",
                json!({"id": "p1", "postId": "p1", "type": "post", "commentCount": 0}),
                None,
            )?;
            let mut acked = Vec::new();
            let mut failed = None;
            for i in 0..fail_at + 2 {
                match workload_call(&posts, i) {
                    Ok(()) => {
                        anyhow::ensure!(
                            failed.is_none(),
                            "call {i} was acknowledged after a storage failure"
                        );
                        acked.push(format!("c{i}"));
                    }
                    Err(status) if failed.is_none() => {
                        anyhow::ensure!(
                            status == 500,
                            "call {i}: the storage failure surfaced as {status}"
                        );
                        failed = Some(format!("c{i}"));
                    }
                    Err(status) => {
                        anyhow::ensure!(status == 503, "call {i} after the failure: {status}")
                    }
                }
            }
            let failed = failed.ok_or_else(|| anyhow::anyhow!("commit {fail_at} never failed"))?;
            // Reads keep working and show only acknowledged calls.
            let (visible, consistent) = comments(&posts);
            let mut want = acked.clone();
            want.sort();
            anyhow::ensure!(
                visible == want && consistent,
                "before reopen: {visible:?} vs {want:?}"
            );
            anyhow::ensure!(db.failure().is_some());
            drop(posts);
            drop(db);

            let db = Database::open(dir.path())?;
            let posts = db.container("posts")?;
            let (recovered, consistent) = comments(&posts);
            anyhow::ensure!(
                consistent,
                "fail_at {fail_at}, after {after_write}: commentCount disagrees with {recovered:?}"
            );
            if after_write {
                want.push(failed.clone());
                want.sort();
            }
            anyhow::ensure!(
                recovered == want,
                "fail_at {fail_at}, after {after_write}: recovered {recovered:?}, want {want:?}"
            );
            // And the reopened database takes writes again, scripts included.
            workload_call(&posts, 1000).map_err(|s| anyhow::anyhow!("write after reopen: {s}"))?;
            checked += 1;
        }
    }
    println!("storage faults: {checked} failure points recovered");
    Ok(())
}

/// Everything stored in the container, to compare before and after.
fn stored(db: &Database) -> (Vec<Value>, usize) {
    let posts = db.container("posts").expect("container");
    let page = posts
        .query_items(
            "SELECT * FROM c",
            &Default::default(),
            &QueryOptions::default(),
        )
        .expect("query");
    let changes = posts
        .read_changes(Lsn::ZERO, usize::MAX)
        .expect("changes")
        .len();
    (page.items, changes)
}

fn deep(levels: usize) -> Value {
    // Not `json!({"a": v})`: that serializes `v` again at every level.
    let mut v = json!(1);
    for _ in 0..levels {
        let mut map = serde_json::Map::new();
        map.insert("a".to_owned(), v);
        v = Value::Object(map);
    }
    v
}

#[test]
fn bad_input_gets_a_clear_4xx_and_changes_nothing() {
    // Deep values are built and dropped iteratively, but the engine and the
    // runtime walk them: run on a stack the size of a server thread's.
    std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(bad_input)
        .expect("spawn")
        .join()
        .expect("no panic");
}

fn bad_input() {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId").expect("container");
    posts
        .create_script(ScriptProperties::stored_procedure(
            "createComment",
            js("createComment"),
        ))
        .expect("script");
    posts
        .create_script(ScriptProperties::stored_procedure(
            "echo",
            "function (x) { getContext().getResponse().setBody(typeof x); }",
        ))
        .expect("script");
    posts
        .create_script(ScriptProperties::trigger(
            "stamp",
            "function () { var r = getContext().getRequest(); var d = r.getBody(); d.stamped = true; r.setBody(d); }",
            TriggerType::Pre,
            TriggerOperation::All,
        ))
        .expect("trigger");
    posts
        .create_script(ScriptProperties::stored_procedure(
            "deepWriter",
            "function () { var v = 1; for (var i = 0; i < 10000; i++) v = {a: v}; \
             var c = getContext().getCollection(); c.createDocument(c.getSelfLink(), {id: 'deep', postId: 'p1', v: v}); }",
        ))
        .expect("script");
    let e = posts
        .create_script(ScriptProperties::stored_procedure(
            "broken",
            "function ( { oops",
        ))
        .expect_err("a script that does not compile is refused at upload");
    assert_eq!(
        (e.status(), e.substatus()),
        (400, Some(runtime_compile_substatus()))
    );
    posts
        .create_item(
            "p1",
            json!({"id": "p1", "postId": "p1", "type": "post", "commentCount": 0}),
            None,
        )
        .expect("post");
    let before = stored(&db);
    let mut cases: Vec<(&str, u16, u16)> = Vec::new();
    let mut check = |what: &'static str, status: u16, allowed: &[u16]| {
        assert!(
            allowed.contains(&status),
            "{what}: status {status}, want one of {allowed:?}"
        );
        assert_eq!(stored(&db), before, "{what} changed what is stored");
        cases.push((what, status, 0));
    };

    let big = "x".repeat(engine::MAX_DOCUMENT_SIZE + 1);
    let e = posts
        .create_item(
            "p1",
            json!({"id": "big", "postId": "p1", "body": big}),
            None,
        )
        .unwrap_err();
    check("document of 2 MB + 1", e.status(), &[413]);
    let e = posts
        .execute_stored_procedure(
            "createComment",
            "p1",
            vec![json!("p1"), json!({"id": "big", "body": big})],
            None,
        )
        .unwrap_err();
    check(
        "2 MB + 1 comment through a procedure",
        e.status(),
        &[400, 413],
    );

    for id in ["a/b", "a\\b", "a?b", "a#b", "", &"x".repeat(256)] {
        let e = posts
            .create_item("p1", json!({"id": id, "postId": "p1"}), None)
            .unwrap_err();
        check("forbidden id", e.status(), &[400]);
        if id.is_empty() {
            continue; // Scripts get a generated id instead, as in Cosmos DB.
        }
        let e = posts
            .execute_stored_procedure(
                "createComment",
                "p1",
                vec![json!("p1"), json!({"id": id})],
                None,
            )
            .unwrap_err();
        check("forbidden id through a procedure", e.status(), &[400]);
    }

    let e = posts
        .create_item(
            "p1",
            json!({"id": "deep", "postId": "p1", "v": deep(10_000)}),
            None,
        )
        .unwrap_err();
    check("document nested 10,000 levels", e.status(), &[400]);
    let e = posts
        .execute_stored_procedure("echo", "p1", vec![deep(10_000)], None)
        .unwrap_err();
    check(
        "procedure parameter nested 10,000 levels",
        e.status(),
        &[400],
    );
    assert!(e.to_string().contains("deeper than 128"), "{e}");
    let e = posts
        .create_item(
            "p1",
            json!({"id": "deep", "postId": "p1", "v": deep(10_000)}),
            Some(&WriteOptions {
                pre_triggers: vec!["stamp".into()],
                ..WriteOptions::default()
            }),
        )
        .unwrap_err();
    check(
        "document nested 10,000 levels through a pre-trigger",
        e.status(),
        &[400],
    );
    let e = posts
        .execute_stored_procedure("deepWriter", "p1", vec![], None)
        .unwrap_err();
    check(
        "script writing a document nested 10,000 levels",
        e.status(),
        &[400],
    );

    for value in [
        json!([1, 2]),
        json!("text"),
        json!(42),
        json!(null),
        json!({"postId": "p1"}),
    ] {
        let e = posts.create_item("p1", value, None).unwrap_err();
        check("not a document", e.status(), &[400]);
    }

    for sql in [
        "SELECT",
        "SELECT * FROM c WHERE",
        "SELECT * FROM c WHERE c.a = 'unterminated",
        "SELEC * FROM c",
        "SELECT * FROM c ORDER BY",
        "SELECT udf.nope(c) FROM c",
        &format!("SELECT {} FROM c", "(".repeat(10_000)),
    ] {
        let e = posts
            .query_items(sql, &Default::default(), &QueryOptions::default())
            .unwrap_err();
        check("malformed SQL", e.status(), &[400]);
        let e = posts
            .query_items(sql, &Default::default(), &QueryOptions::default())
            .unwrap_err();
        check("malformed SQL with UDFs", e.status(), &[400]);
    }

    // A Wasm guest handing the host bytes that are not UTF-8 (a document
    // and an id): each import answers -400, and the guest fails the call
    // with that status as its substatus.
    posts
        .create_script(ScriptProperties::wasm(
            "invalidUtf8",
            ScriptKind::StoredProcedure,
            r#"(module
              (import "partita_v1" "create" (func $create (param i32 i32 i32 i32 i32 i32) (result i32)))
              (import "partita_v1" "read" (func $read (param i32 i32 i32 i32) (result i32)))
              (memory (export "memory") 1)
              (data (i32.const 0) "{\"id\":\"\ff\fe\",\"postId\":\"p1\"}")
              (data (i32.const 64) "p\c3")
              (func (export "partita_procedure") (result i32)
                (if (i32.ne (call $create (i32.const 0) (i32.const 25) (i32.const 0) (i32.const 0)
                                          (i32.const 1024) (i32.const 1024)) (i32.const -400))
                  (then (return (i32.const 0))))
                (if (i32.ne (call $read (i32.const 64) (i32.const 2) (i32.const 1024) (i32.const 1024))
                            (i32.const -400))
                  (then (return (i32.const 0))))
                (i32.const 400)))"#,
        ))
        .expect("the module compiles");
    let e = posts
        .execute_stored_procedure("invalidUtf8", "p1", vec![], None)
        .unwrap_err();
    check("invalid UTF-8 over the Wasm ABI", e.status(), &[400]);
    assert_eq!(e.substatus(), Some(400), "the guest saw -400 twice: {e}");

    let e = posts
        .execute_stored_procedure("broken", "p1", vec![], None)
        .unwrap_err();
    check("a script refused at upload", e.status(), &[404]);
    let e = posts
        .execute_stored_procedure("missing", "p1", vec![], None)
        .unwrap_err();
    check("a missing procedure", e.status(), &[404]);
    let e = posts
        .create_script(ScriptProperties::stored_procedure(
            "bad id/",
            "function () {}",
        ))
        .unwrap_err();
    check("a script with a forbidden id", e.status(), &[400]);
    let e = posts
        .create_script(ScriptProperties::stored_procedure(
            "huge",
            "x".repeat(engine::MAX_SCRIPT_SIZE + 1),
        ))
        .unwrap_err();
    check("a script over the size limit", e.status(), &[400, 413]);
    assert!(
        posts
            .read_script(ScriptKind::StoredProcedure, "huge")
            .is_err()
    );
    println!(
        "bad input: {} cases, each a 4xx with nothing changed",
        cases.len()
    );
}

/// Cosmos DB's substatus for a compile error.
fn runtime_compile_substatus() -> u16 {
    65535
}
