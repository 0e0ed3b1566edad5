//! WebAssembly procedures, triggers and UDFs through the facade
//! (`partita::Container`): modules checked and compiled at upload, the WAT
//! versions of createComment and truncateFeed run atomically like their
//! JavaScript twins, UDFs callable from SQL, artifacts kept in the data
//! directory.

use partita::{
    Database, QueryOptions, ScriptKind, ScriptProperties, TriggerOperation, TriggerType,
    WriteOptions,
};
use partita_workload::blog;
use serde_json::json;

use crate::support::wat;

type Result<T = ()> = anyhow::Result<T>;

#[test]
fn create_comment_wat_through_the_facade() -> Result {
    let dir = tempfile::tempdir()?;
    let db = Database::open(dir.path())?;
    let posts = db.create_container("posts", "/postId")?;
    posts.create_item("p1", blog::post("p1", "u1", 1), None)?;
    let stored = posts.create_script(ScriptProperties::wasm(
        "createComment",
        ScriptKind::StoredProcedure,
        wat("createComment"),
    ))?;
    assert!(stored.body.starts_with(b"\0asm"), "stored as .wasm");
    assert_eq!(std::fs::read_dir(dir.path().join("wasm-cache"))?.count(), 1);

    let response = posts.execute_stored_procedure(
        "createComment",
        "p1",
        vec![json!("p1"), json!({"id": "c1", "text": "hi"})],
        None,
    )?;
    assert_eq!(response.body, "");
    assert!(response.stats.fuel > 0);
    assert_eq!(response.stats.instructions, 0);
    assert_eq!(response.stats.docs_written, 2);
    assert_eq!(posts.read_item("p1", "p1")?["commentCount"], 1);

    // The duplicate: 400/409, nothing committed.
    let err = posts
        .execute_stored_procedure(
            "createComment",
            "p1",
            vec![json!("p1"), json!({"id": "c1"})],
            None,
        )
        .unwrap_err();
    assert_eq!((err.status(), err.substatus()), (400, Some(409)));
    assert_eq!(posts.read_item("p1", "p1")?["commentCount"], 1);

    // After a restart the stored module still runs.
    drop(posts);
    drop(db);
    let db = Database::open(dir.path())?;
    let posts = db.container("posts")?;
    posts.execute_stored_procedure(
        "createComment",
        "p1",
        vec![json!("p1"), json!({"id": "c2"})],
        None,
    )?;
    assert_eq!(posts.read_item("p1", "p1")?["commentCount"], 2);
    Ok(())
}

#[test]
fn bad_modules_are_refused_at_upload() -> Result {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId")?;
    let cases = [
        (ScriptKind::StoredProcedure, "(module", "does not parse"),
        (
            ScriptKind::StoredProcedure,
            "(module (memory (export \"memory\") 1))",
            "partita_procedure",
        ),
        (
            ScriptKind::UserDefinedFunction,
            r#"(module (import "env" "abort" (func)) (memory (export "memory") 1)
                 (func (export "partita_udf") (result i32) (i32.const 0)))"#,
            "env.abort",
        ),
    ];
    for (kind, text, expected) in cases {
        let err = posts
            .create_script(ScriptProperties::wasm("bad", kind, text))
            .unwrap_err();
        assert_eq!(err.status(), 400, "{err}");
        assert!(err.to_string().contains(expected), "{err}");
        assert!(err.to_string().contains("\"bad\""), "{err}");
        assert!(posts.read_script(kind, "bad").is_err(), "nothing stored");
    }
    // A module stored without the check (through the engine beneath) fails
    // when it runs, with the same message.
    posts.raw().create_script(ScriptProperties::wasm(
        "raw",
        ScriptKind::StoredProcedure,
        "(module",
    ))?;
    let err = posts
        .execute_stored_procedure("raw", "p1", vec![], None)
        .unwrap_err();
    assert_eq!(err.status(), 400);
    assert!(err.to_string().contains("does not parse"), "{err}");
    Ok(())
}

#[test]
fn truncate_feed_wat_as_a_post_trigger() -> Result {
    let db = Database::in_memory();
    let feed = db.create_container("feed", "/type")?;
    feed.create_script(ScriptProperties {
        trigger_type: Some(TriggerType::Post),
        trigger_operation: Some(TriggerOperation::Create),
        trigger_names: None,
        ..ScriptProperties::wasm("truncateFeed", ScriptKind::Trigger, wat("truncateFeed"))
    })?;
    let options = WriteOptions {
        post_triggers: vec!["truncateFeed".to_owned()],
        ..WriteOptions::default()
    };
    for i in 0..103 {
        let doc = json!({"id": format!("p{i:03}"), "type": "post", "creationDate": i});
        let response = feed.create_item("post", doc, Some(&options))?;
        assert_eq!(response.resource.unwrap()["id"], format!("p{i:03}"));
    }
    let page = feed.query_items(
        "SELECT VALUE MIN(f.creationDate) FROM f",
        &Default::default(),
        &QueryOptions::default(),
    )?;
    assert_eq!(page.items, vec![json!(3)]);
    let page = feed.query_items(
        "SELECT VALUE COUNT(1) FROM f",
        &Default::default(),
        &QueryOptions::default(),
    )?;
    assert_eq!(page.items, vec![json!(100)]);
    Ok(())
}

#[test]
fn wasm_udfs_are_callable_from_sql() -> Result {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId")?;
    posts.create_item("p1", json!({"id": "p1", "postId": "p1", "n": 7}), None)?;
    // udf.args(x, y) answers [x, y].
    posts.create_script(ScriptProperties::wasm(
        "args",
        ScriptKind::UserDefinedFunction,
        r#"(module
             (import "partita_v1" "params" (func $params (param i32 i32) (result i32)))
             (import "partita_v1" "set_response_body" (func $set (param i32 i32) (result i32)))
             (memory (export "memory") 1)
             (func (export "partita_udf") (result i32)
               (drop (call $set (i32.const 0) (call $params (i32.const 0) (i32.const 1000))))
               (i32.const 0)))"#,
    ))?;
    let page = posts.query_items(
        "SELECT VALUE udf.args(c.n, c.id) FROM c",
        &Default::default(),
        &QueryOptions::default(),
    )?;
    assert_eq!(page.items, vec![json!([7, "p1"])]);
    Ok(())
}
