//! Stored procedures and triggers through the facade (`partita::Container`):
//! the workload's scripts from `sprocs/samples/js/`, unmodified, atomically in one
//! logical partition; triggers in the write's transaction; logs and
//! statistics in responses and failures; scripts that survive a restart and
//! replacements that take effect on the next call.

use partita::{
    Container, Database, ScriptKind, ScriptProperties, TriggerOperation, TriggerType, WriteOptions,
};
use partita_workload::blog;
use serde_json::{Value, json};

use crate::support::js;

type Result<T = ()> = anyhow::Result<T>;

fn blog_posts(db: &Database) -> Result<Container> {
    let posts = db.create_container("posts", "/postId")?;
    posts.create_item("p1", blog::post("p1", "u1", 1), None)?;
    posts.create_script(ScriptProperties::stored_procedure(
        "createComment",
        js("createComment"),
    ))?;
    Ok(posts)
}

#[test]
fn create_comment_runs_unmodified_and_atomically() -> Result {
    let db = Database::in_memory();
    let posts = blog_posts(&db)?;
    let response = posts.execute_stored_procedure(
        "createComment",
        "p1",
        vec![json!("p1"), json!({"text": "hi"})],
        None,
    )?;
    assert_eq!(response.body, "", "createComment sets no body");
    assert!(
        response.stats.docs_written >= 2 && response.stats.instructions > 0,
        "{:?}",
        response.stats
    );
    let (count, comments) = blog::comment_counts(&posts, "p1")?;
    assert_eq!(
        (count, comments),
        (1, 0),
        "the script's comment has no type, so count it directly"
    );
    let docs = posts.read_feed("p1", &Default::default())?.items;
    let comment = docs
        .iter()
        .find(|d| d.get("text").is_some())
        .expect("the comment");
    assert_eq!(comment["postId"], "p1");
    assert_eq!(
        comment.id().len(),
        36,
        "a generated GUID id: {}",
        comment.id()
    );

    // A failing operation inside (duplicate id) rolls back the increment too.
    let duplicate = json!({"id": comment.id(), "text": "again"});
    let err = posts
        .execute_stored_procedure("createComment", "p1", vec![json!("p1"), duplicate], None)
        .unwrap_err();
    assert_eq!((err.status(), err.substatus()), (400, Some(409)), "{err}");
    assert_eq!(posts.read_item("p1", "p1")?["commentCount"], 1);

    // A missing post: the script rethrows the 404.
    let err = posts
        .execute_stored_procedure("createComment", "p9", vec![json!("p9"), json!({})], None)
        .unwrap_err();
    assert_eq!((err.status(), err.substatus()), (400, Some(404)), "{err}");
    // A missing procedure is a plain 404.
    let err = posts
        .execute_stored_procedure("nope", "p1", vec![], None)
        .unwrap_err();
    assert!(
        matches!(
            err,
            partita::Error::Engine(partita::EngineError::ScriptNotFound { .. })
        ),
        "{err}"
    );
    assert_eq!(err.status(), 404);
    Ok(())
}

#[test]
fn concurrent_calls_keep_the_invariant() -> Result {
    let db = Database::in_memory();
    let posts = blog_posts(&db)?;
    let threads = 4;
    let calls = 25;
    // A debug build on a busy machine: the wall clock must not be what
    // fails a call.
    let options = partita::ProcedureOptions {
        limits: Some(partita::Limits {
            wall_time: std::time::Duration::from_secs(120),
            accept_wall_time: std::time::Duration::from_secs(100),
            ..partita::Limits::default()
        }),
        ..Default::default()
    };
    std::thread::scope(|s| {
        for t in 0..threads {
            let (posts, options) = (posts.clone(), &options);
            s.spawn(move || {
                for i in 0..calls {
                    let comment = json!({"id": format!("c{t}-{i}"), "type": "comment"});
                    posts
                        .execute_stored_procedure(
                            "createComment",
                            "p1",
                            vec![json!("p1"), comment],
                            Some(options),
                        )
                        .expect("call");
                }
            });
        }
    });
    assert_eq!(blog::comment_counts(&posts, "p1")?, (100, 100));
    Ok(())
}

#[test]
fn logs_and_failures() -> Result {
    let db = Database::in_memory();
    let c = db.create_container("c", "/pk")?;
    c.create_script(ScriptProperties::stored_procedure(
        "logThenThrow",
        "function f(n) { console.log('about to fail with', n); getContext().getCollection().createDocument(getContext().getCollection().getSelfLink(), {id: 'x', pk: 'a'}); throw new Error(n, 'custom failure'); }",
    ))?;
    let err = c
        .execute_stored_procedure("logThenThrow", "a", vec![json!(1234)], None)
        .unwrap_err();
    assert_eq!((err.status(), err.substatus()), (400, Some(1234)));
    assert!(
        err.logs().contains("about to fail with 1234"),
        "{:?}",
        err.logs()
    );
    assert!(err.to_string().contains("custom failure"), "{err}");
    assert_eq!(
        c.read_item("a", "x").unwrap_err().status(),
        404,
        "rolled back"
    );

    let err = c
        .create_script(ScriptProperties::stored_procedure(
            "broken",
            "function f( {",
        ))
        .unwrap_err();
    assert_eq!(
        (err.status(), err.substatus()),
        (400, Some(65535)),
        "compile errors surface at upload"
    );

    c.create_script(ScriptProperties::stored_procedure(
        "spin",
        "function f() { while (true) {} }",
    ))?;
    let limits = partita::Limits {
        instructions: 2_000_000,
        accept_instructions: 1_000_000,
        ..Default::default()
    };
    let err = c
        .execute_stored_procedure(
            "spin",
            "a",
            vec![],
            Some(&partita::ProcedureOptions {
                limits: Some(limits.clone()),
                ..Default::default()
            }),
        )
        .unwrap_err();
    assert_eq!(err.status(), 408, "{err}");

    // A script that writes another partition fails with 400 and leaves nothing.
    c.create_script(ScriptProperties::stored_procedure(
        "escape",
        "function f() { var c = getContext().getCollection(); c.createDocument(c.getSelfLink(), {id: 'in', pk: 'a'}); c.createDocument(c.getSelfLink(), {id: 'out', pk: 'b'}); }",
    ))?;
    let err = c
        .execute_stored_procedure("escape", "a", vec![], None)
        .unwrap_err();
    assert_eq!(err.status(), 400, "{err}");
    assert_eq!(c.read_item("a", "in").unwrap_err().status(), 404);
    assert_eq!(c.read_item("b", "out").unwrap_err().status(), 404);
    Ok(())
}

fn feed_with_trigger(db: &Database) -> Result<Container> {
    let feed = db.create_container("feed", "/type")?;
    feed.create_script(ScriptProperties::trigger(
        "truncateFeed",
        js("truncateFeed"),
        TriggerType::Post,
        TriggerOperation::All,
    ))?;
    Ok(feed)
}

fn feed_post(i: usize) -> Value {
    json!({"id": format!("post{i:03}"), "type": "post", "creationDate": format!("2026-01-01T00:{:02}:{:02}Z", i / 60, i % 60)})
}

#[test]
fn truncate_feed_post_trigger_keeps_the_newest_100() -> Result {
    let db = Database::in_memory();
    let feed = feed_with_trigger(&db)?;
    let options = WriteOptions {
        post_triggers: vec!["truncateFeed".into()],
        ..Default::default()
    };
    for i in 0..105 {
        feed.upsert_item("post", feed_post(i), Some(&options))?;
    }
    let ids: Vec<String> = feed
        .read_feed("post", &Default::default())?
        .items
        .iter()
        .map(|d| d.id().to_owned())
        .collect();
    assert_eq!(ids.len(), 100);
    let oldest_left = feed
        .query_items(
            "SELECT VALUE MIN(f.creationDate) FROM f",
            &Default::default(),
            &Default::default(),
        )?
        .items;
    let expected: Vec<Value> = vec![feed_post(5)["creationDate"].clone()];
    assert_eq!(oldest_left, expected, "the five oldest were deleted");
    Ok(())
}

#[test]
fn triggers_run_in_the_write_transaction() -> Result {
    let db = Database::in_memory();
    let c = db.create_container("c", "/pk")?;
    c.create_script(ScriptProperties::trigger(
        "stamp",
        "function stamp() { var req = getContext().getRequest(); var doc = req.getBody(); doc.stamped = true; req.setBody(doc); console.log('pre saw', doc.id); }",
        TriggerType::Pre,
        TriggerOperation::Create,
    ))?;
    c.create_script(ScriptProperties::trigger(
        "audit",
        "function audit() { var c = getContext().getCollection(); var doc = getContext().getResponse().getBody(); console.log('post saw', doc.id); c.createDocument(c.getSelfLink(), {id: 'audit-' + doc.id, pk: doc.pk}); getContext().getResponse().setBody({wrapped: doc.id}); }",
        TriggerType::Post,
        TriggerOperation::All,
    ))?;
    c.create_script(ScriptProperties::trigger(
        "veto",
        "function veto() { throw new Error(403, 'vetoed'); }",
        TriggerType::Post,
        TriggerOperation::All,
    ))?;
    let both = WriteOptions {
        pre_triggers: vec!["stamp".into()],
        post_triggers: vec!["audit".into()],
        ..Default::default()
    };
    let response = c.create_item("a", json!({"id": "d1", "pk": "a"}), Some(&both))?;
    assert_eq!(
        response.resource.map(partita::Document::into_value),
        Some(json!({"wrapped": "d1"})),
        "the post-trigger changed the response"
    );
    let (pre, post) = (
        response.logs.find("pre saw d1"),
        response.logs.find("post saw d1"),
    );
    assert!(
        pre.is_some() && post.is_some() && pre < post,
        "logs of both triggers, in order: {:?}",
        response.logs
    );
    assert_eq!(
        c.read_item("a", "d1")?["stamped"],
        true,
        "the pre-trigger changed the document"
    );
    assert_eq!(
        c.read_item("a", "audit-d1")?.id(),
        "audit-d1",
        "the post-trigger's write committed with it"
    );

    // A throwing post-trigger rolls back the write and the trigger's own writes.
    let vetoed = WriteOptions {
        post_triggers: vec!["veto".into()],
        ..Default::default()
    };
    let err = c
        .create_item("a", json!({"id": "d2", "pk": "a"}), Some(&vetoed))
        .unwrap_err();
    assert_eq!((err.status(), err.substatus()), (400, Some(403)), "{err}");
    assert_eq!(c.read_item("a", "d2").unwrap_err().status(), 404);

    // A write that fails on its own returns its own status (409), and nothing stays.
    let err = c
        .create_item("a", json!({"id": "d1", "pk": "a"}), Some(&both))
        .unwrap_err();
    assert_eq!(err.status(), 409, "{err}");

    // Wrong choices of trigger are 400s that name the problem.
    let cases = [
        (
            WriteOptions {
                pre_triggers: vec!["audit".into()],
                ..Default::default()
            },
            "Post-trigger",
        ),
        (
            WriteOptions {
                post_triggers: vec!["stamp".into()],
                ..Default::default()
            },
            "Pre-trigger",
        ),
        (
            WriteOptions {
                pre_triggers: vec!["missing".into()],
                ..Default::default()
            },
            "missing",
        ),
        (
            WriteOptions {
                post_triggers: vec!["audit".into(), "veto".into()],
                ..Default::default()
            },
            "at most one",
        ),
    ];
    for (options, needle) in cases {
        let err = c
            .create_item("a", json!({"id": "d3", "pk": "a"}), Some(&options))
            .unwrap_err();
        assert_eq!(err.status(), 400, "{err}");
        assert!(
            err.to_string().contains(needle),
            "{err} should mention {needle}"
        );
    }
    // `stamp` is declared for creates only.
    let err = c
        .replace_item(
            "a",
            "d1",
            json!({"id": "d1", "pk": "a"}),
            Some(&WriteOptions {
                pre_triggers: vec!["stamp".into()],
                ..Default::default()
            }),
        )
        .unwrap_err();
    assert_eq!(err.status(), 400);
    assert!(err.to_string().contains("Create"), "{err}");
    // Delete with an All post-trigger: the trigger sees a null request body and runs.
    c.delete_item("a", "audit-d1", Some(&WriteOptions::default()))?;
    c.delete_item(
        "a",
        "d1",
        Some(&WriteOptions {
            if_match: Some("\"stale\"".into()),
            ..Default::default()
        }),
    )
    .map(|_| ())
    .expect_err("412");
    assert_eq!(c.read_item("a", "d1")?.id(), "d1");
    Ok(())
}

#[test]
fn an_upsert_that_creates_ignores_if_match_and_one_that_replaces_checks_it() -> Result {
    let db = Database::in_memory();
    let c = db.create_container("c", "/pk")?;
    let if_match = |etag: &str| WriteOptions {
        if_match: Some(etag.to_owned()),
        ..Default::default()
    };
    let created = c.upsert_item(
        "a",
        json!({"id": "d", "pk": "a", "n": 1}),
        Some(&if_match("\"any\"")),
    )?;
    let err = c
        .upsert_item(
            "a",
            json!({"id": "d", "pk": "a", "n": 2}),
            Some(&if_match("\"stale\"")),
        )
        .map(|_| ())
        .expect_err("412 for the replace");
    assert_eq!(err.status(), 412);
    let etag = created.document().etag().to_owned();
    c.upsert_item(
        "a",
        json!({"id": "d", "pk": "a", "n": 3}),
        Some(&if_match(&etag)),
    )?;
    assert_eq!(c.read_item("a", "d")?["n"], 3);
    Ok(())
}

#[test]
fn scripts_survive_restart_and_replacements_apply_to_the_next_call() -> Result {
    let dir = tempfile::tempdir()?;
    {
        let db = Database::open(dir.path())?;
        let c = db.create_container("c", "/pk")?;
        c.create_script(ScriptProperties::stored_procedure(
            "version",
            "function v() { getContext().getResponse().setBody(1); }",
        ))?;
        assert_eq!(
            c.execute_stored_procedure("version", "a", vec![], None)?
                .body,
            1
        );
        c.replace_script(ScriptProperties::stored_procedure(
            "version",
            "function v() { getContext().getResponse().setBody(2); }",
        ))?;
        assert_eq!(
            c.execute_stored_procedure("version", "a", vec![], None)?
                .body,
            2
        );
    }
    let db = Database::open(dir.path())?;
    let c = db.container("c")?;
    assert_eq!(
        c.execute_stored_procedure("version", "a", vec![], None)?
            .body,
        2
    );
    assert_eq!(c.list_scripts(ScriptKind::StoredProcedure).len(), 1);
    Ok(())
}

#[test]
fn a_triggers_spelling_of_its_type_and_operation_survives_a_restart() -> Result {
    // Cosmos DB echoes `"pre"` and `"Update"` as written; so does Partita,
    // from the store too.
    let dir = tempfile::tempdir()?;
    let names = engine::TriggerNames {
        trigger_type: "pre".to_owned(),
        trigger_operation: "Update".to_owned(),
    };
    {
        let db = Database::open(dir.path())?;
        let c = db.create_container("c", "/pk")?;
        c.create_script(ScriptProperties {
            trigger_names: Some(names.clone()),
            ..ScriptProperties::trigger(
                "t",
                "function t() {}",
                TriggerType::Pre,
                TriggerOperation::Replace,
            )
        })?;
        c.create_script(ScriptProperties::trigger(
            "canonical",
            "function t() {}",
            TriggerType::Post,
            TriggerOperation::All,
        ))?;
    }
    let db = Database::open(dir.path())?;
    let c = db.container("c")?;
    let t = c.read_script(ScriptKind::Trigger, "t")?;
    assert_eq!(
        (
            t.trigger_type,
            t.trigger_operation,
            t.trigger_names.as_ref()
        ),
        (
            Some(TriggerType::Pre),
            Some(TriggerOperation::Replace),
            Some(&names)
        )
    );
    assert_eq!(
        c.read_script(ScriptKind::Trigger, "canonical")?
            .trigger_names,
        None
    );
    Ok(())
}

#[test]
fn update_usernames_rewrites_every_item_of_the_user() -> Result {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId")?;
    posts.create_script(ScriptProperties::stored_procedure(
        "updateUsernames",
        js("updateUsernames"),
    ))?;
    posts.create_item(
        "p1",
        json!({"id": "p1", "postId": "p1", "userId": "u1", "userUsername": "old"}),
        None,
    )?;
    posts.create_item(
        "p1",
        json!({"id": "c1", "postId": "p1", "userId": "u1", "userUsername": "old"}),
        None,
    )?;
    posts.create_item(
        "p1",
        json!({"id": "c2", "postId": "p1", "userId": "u2", "userUsername": "other"}),
        None,
    )?;
    posts.execute_stored_procedure(
        "updateUsernames",
        "p1",
        vec![json!("u1"), json!("new")],
        None,
    )?;
    let names: Vec<Value> = posts
        .query_items(
            "SELECT VALUE c.userUsername FROM c ORDER BY c.id",
            &Default::default(),
            &Default::default(),
        )?
        .items;
    assert_eq!(names, [json!("new"), json!("other"), json!("new")]);
    Ok(())
}

#[test]
fn user_defined_functions_in_queries_and_in_procedures() -> Result {
    let db = Database::in_memory();
    let c = db.create_container("orders", "/customerId")?;
    c.create_script(ScriptProperties::user_defined_function(
        "tax",
        "function tax(x) { return x * 0.25; }",
    ))?;
    c.create_script(ScriptProperties::user_defined_function(
        "fail",
        "function fail() { throw new Error('no'); }",
    ))?;
    for (i, price) in [100, 40, 8].into_iter().enumerate() {
        c.create_item(
            "a",
            json!({"id": format!("o{i}"), "customerId": "a", "price": price}),
            None,
        )?;
    }
    let page = c.query_items(
        "SELECT VALUE udf.tax(o.price) FROM o ORDER BY o.price",
        &Default::default(),
        &Default::default(),
    )?;
    assert_eq!(page.items, [json!(2), json!(10), json!(25)]);
    let filtered = c.query_items(
        "SELECT VALUE o.id FROM o WHERE udf.tax(o.price) > 5",
        &Default::default(),
        &Default::default(),
    )?;
    assert_eq!(filtered.items, [json!("o0"), json!("o1")]);
    for sql in [
        "SELECT VALUE udf.missing(o.price) FROM o",
        "SELECT VALUE udf.fail() FROM o",
    ] {
        let err = c
            .query_items(sql, &Default::default(), &Default::default())
            .unwrap_err();
        assert_eq!(err.status(), 400, "{sql}: {err}");
    }
    // The engine beneath has no UDF handler: its UDF calls are refused
    // rather than ignored.
    assert_eq!(
        c.raw()
            .query_items(
                "SELECT VALUE udf.tax(1) FROM o",
                &Default::default(),
                &Default::default()
            )
            .unwrap_err()
            .status(),
        400
    );

    // A procedure's query calls UDFs too (the runtime runs both, nested, on one thread).
    c.create_script(ScriptProperties::stored_procedure(
        "totalTax",
        "function totalTax() { var c = getContext().getCollection(); c.queryDocuments(c.getSelfLink(), 'SELECT VALUE SUM(udf.tax(o.price)) FROM o', function (err, res) { if (err) throw err; getContext().getResponse().setBody(res[0]); }); }",
    ))?;
    assert_eq!(
        c.execute_stored_procedure("totalTax", "a", vec![], None)?
            .body,
        37
    );
    Ok(())
}

/// What Cosmos DB hands a trigger for a delete and a replace: a delete's
/// request body is the document being deleted; a replace's carries the
/// stored document's `_self` (Microsoft's unique-constraint sample reads
/// it). The pre-trigger also writes a keyless document, which lands in the
/// request's partition, as the .NET SDK's `TestUniqueConstraintSample`
/// needs.
#[test]
fn triggers_see_what_the_service_hands_them() -> Result {
    let db = Database::in_memory();
    let c = db.create_container("items", "/pk")?;
    c.create_script(ScriptProperties::trigger(
        "echo",
        r#"function echo() {
            var request = getContext().getRequest();
            var body = request.getBody();
            var coll = getContext().getCollection();
            coll.upsertDocument(coll.getSelfLink(),
                {id: "seen-" + request.getOperationType(), body: body},
                function (err) { if (err) throw err; });
        }"#,
        TriggerType::Pre,
        TriggerOperation::All,
    ))?;
    let echo = WriteOptions {
        pre_triggers: vec!["echo".into()],
        ..WriteOptions::default()
    };
    c.create_item("a", json!({"id": "d1", "pk": "a", "n": 1}), None)?;
    let stored = c.read_item("a", "d1")?;

    c.replace_item(
        "a",
        "d1",
        json!({"id": "d1", "pk": "a", "n": 2}),
        Some(&echo),
    )?;
    let seen = c.read_item("a", "seen-Replace")?;
    assert!(
        seen.get("pk").is_none(),
        "the keyless record is in partition a"
    );
    assert_eq!(seen["body"]["_self"], stored["_self"], "{seen}");
    assert_eq!(seen["body"]["n"], 2);

    let before_delete = c.read_item("a", "d1")?.into_value();
    c.delete_item("a", "d1", Some(&echo))?;
    let seen = c.read_item("a", "seen-Delete")?;
    assert_eq!(seen["body"], before_delete, "the deleted document");
    assert!(c.read_item("a", "d1").is_err());
    Ok(())
}

/// A failure that carries an operation's status names that operation, in
/// JavaScript and in WebAssembly alike; a script's own throw names none.
#[test]
fn a_failure_names_the_operation_it_came_from() -> Result {
    for lang in ["js", "wasm"] {
        let db = Database::in_memory();
        let posts = db.create_container("posts", "/postId")?;
        posts.create_item("p1", blog::post("p1", "u1", 1), None)?;
        let props = match lang {
            "js" => ScriptProperties::stored_procedure("createComment", js("createComment")),
            _ => ScriptProperties::wasm(
                "createComment",
                ScriptKind::StoredProcedure,
                crate::support::guest_module("create_comment"),
            ),
        };
        posts.create_script(props)?;
        let call = |id: &str| {
            posts.execute_stored_procedure(
                "createComment",
                "p1",
                vec![json!("p1"), json!({"id": id})],
                None,
            )
        };
        call("c1")?;
        let err = call("c1").unwrap_err();
        assert_eq!(
            err.failed_operation()
                .map(partita::FailedOperation::to_json),
            Some(json!({"operation": "create", "id": "c1", "status": 409})),
            "{lang}: {err}"
        );
        let missing = posts
            .execute_stored_procedure("createComment", "p9", vec![json!("p9"), json!({})], None)
            .unwrap_err();
        assert_eq!(
            missing.failed_operation().map(|f| (f.operation, f.status)),
            Some(("read", 404)),
            "{lang}: {missing}"
        );
    }
    let db = Database::in_memory();
    let c = db.create_container("c", "/pk")?;
    c.create_script(ScriptProperties::stored_procedure(
        "own",
        "function own() { var c = getContext().getCollection(); c.readDocument(c.getAltLink() + '/docs/x', function (err) { throw new Error(418, 'mine'); }); }",
    ))?;
    let err = c
        .execute_stored_procedure("own", "a", vec![], None)
        .unwrap_err();
    assert!(
        err.failed_operation().is_none(),
        "a throw of its own: {err}"
    );
    Ok(())
}

/// A JavaScript body that does not compile, nests too deeply or has a
/// `{ __proto__: value }` literal is refused at upload, created or
/// replaced, for every kind of script, with the message its first call
/// would fail with; nothing is stored and a replaced script keeps its
/// version. Bodies over 2 MB are a 413 before any compiler sees them.
#[test]
fn scripts_that_do_not_compile_are_refused_at_upload() -> Result {
    let db = Database::in_memory();
    let c = db.create_container("posts", "/postId")?;
    let good = "function () { getContext().getResponse().setBody('v1'); }";
    let deep = format!("function f() {{ var x = {}1; }}", "!".repeat(300_000));
    let ifs = format!("function f() {{ {}; }}", "if (1) ".repeat(100_000));
    let kinds = |id: &str, body: &str| {
        [
            ScriptProperties::stored_procedure(id, body),
            ScriptProperties::trigger(id, body, TriggerType::Pre, TriggerOperation::All),
            ScriptProperties::user_defined_function(id, body),
        ]
    };
    for bad in [
        "function f( {",
        deep.as_str(),
        ifs.as_str(),
        "function () { var o = { __proto__: [] }; }",
    ] {
        for props in kinds("bad", bad) {
            let kind = props.kind;
            let err = c.create_script(props).unwrap_err();
            assert_eq!((err.status(), err.substatus()), (400, Some(65535)), "{err}");
            assert!(
                err.to_string()
                    .contains("Encountered exception while compiling Javascript."),
                "{err}"
            );
            assert_eq!(c.read_script(kind, "bad").unwrap_err().status(), 404);
        }
        for (good_props, bad_props) in kinds("kept", good).into_iter().zip(kinds("kept", bad)) {
            let kind = good_props.kind;
            let before = c.create_script(good_props)?;
            let err = c.replace_script(bad_props).unwrap_err();
            assert_eq!((err.status(), err.substatus()), (400, Some(65535)), "{err}");
            let after = c.read_script(kind, "kept")?;
            assert_eq!(after.version, before.version);
            assert_eq!(&*after.body, good.as_bytes());
            c.delete_script(kind, "kept")?;
        }
    }
    // The message at upload is the one the call gives.
    let at_upload = c
        .create_script(ScriptProperties::stored_procedure("s", "function f( {"))
        .unwrap_err()
        .to_string();
    assert!(at_upload.contains("Encountered exception while compiling Javascript."));
    // Over 2 MB: 413, even when it would not compile either.
    let huge = format!("function f() {{ var x = {}1; }}", "!".repeat(3 << 20));
    for props in kinds("huge", &huge) {
        let kind = props.kind;
        assert_eq!(c.create_script(props).unwrap_err().status(), 413);
        assert_eq!(c.read_script(kind, "huge").unwrap_err().status(), 404);
    }
    // A good one is stored and runs.
    c.create_script(ScriptProperties::stored_procedure("ok", good))?;
    let out = c.execute_stored_procedure("ok", "p1", vec![], None)?;
    assert_eq!(out.body, json!("v1"));
    Ok(())
}
