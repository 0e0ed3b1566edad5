//! Parity: the blog workload's procedures and trigger as JavaScript
//! (`sprocs/samples/js/*.js`) and as Rust compiled to WebAssembly
//! (`sprocs/samples/rust/*`) give identical responses and leave identical
//! stored state, scenario by scenario, each language on its own fresh
//! database.
//!
//! Documents are compared without `_ts`, `_etag`, `_rid` and `_self`, and
//! generated ids (comments created without one) are compared as
//! `"<generated>"`. Errors are compared by status and substatus (the
//! messages are each runtime's own).

use partita::{
    Container, Database, ScriptKind, ScriptLanguage, ScriptProperties, TriggerOperation,
    TriggerType, WriteOptions,
};
use partita_workload::blog;
use serde_json::{Value, json};

use crate::support;

type Result<T = ()> = anyhow::Result<T>;

#[derive(Clone, Copy, Debug)]
enum Lang {
    JavaScript,
    Wasm,
}

/// The script `js_name` (`sprocs/samples/js/<js_name>.js`) or its Rust module.
fn script(
    lang: Lang,
    id: &str,
    kind: ScriptKind,
    js_name: &str,
    wasm_name: &str,
) -> ScriptProperties {
    let (language, body) = match lang {
        Lang::JavaScript => (
            ScriptLanguage::JavaScript,
            support::js(js_name).into_bytes(),
        ),
        Lang::Wasm => (ScriptLanguage::Wasm, support::guest_module(wasm_name)),
    };
    let trigger = kind == ScriptKind::Trigger;
    ScriptProperties {
        id: id.to_owned(),
        kind,
        language,
        body,
        trigger_type: trigger.then_some(TriggerType::Post),
        trigger_operation: trigger.then_some(TriggerOperation::All),
        trigger_names: None,
    }
}

/// A document without the properties that differ between two databases.
fn normalize(doc: &Value, generated: bool) -> Value {
    let mut doc = doc.clone();
    if let Value::Object(fields) = &mut doc {
        for key in ["_ts", "_etag", "_rid", "_self"] {
            fields.remove(key);
        }
        if generated {
            fields.insert("id".into(), "<generated>".into());
        }
    }
    doc
}

/// Every document of the partition (the default feed options read all of
/// them in one page), normalized, in a stable order.
fn state(c: &Container, pk: &str, known_ids: &[&str]) -> Result<Vec<Value>> {
    let mut docs: Vec<Value> = c
        .read_feed(pk, &Default::default())?
        .items
        .iter()
        .map(|d| {
            let doc = d.value();
            let generated = !known_ids.contains(&doc["id"].as_str().unwrap_or_default());
            normalize(doc, generated)
        })
        .collect();
    docs.sort_by_key(Value::to_string);
    Ok(docs)
}

/// A procedure call's outcome: its body, or its status and substatus.
fn outcome<T: std::fmt::Display>(
    result: std::result::Result<partita::ProcedureResponse, T>,
    status: impl Fn(&T) -> (u16, Option<u16>),
) -> Value {
    match result {
        Ok(response) => json!({"body": response.body}),
        Err(err) => {
            let (status, substatus) = status(&err);
            json!({"status": status, "substatus": substatus})
        }
    }
}

fn create_post_and_call(lang: Lang, procedure: &str, module: &str) -> Result<Vec<Value>> {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId")?;
    posts.create_item("p1", blog::post("p1", "u1", 1), None)?;
    posts.create_item("p2", json!({"id": "p2", "postId": "p2"}), None)?;
    // A count kept as a string, escapes and non-ASCII text: the Rust ports
    // keep documents as JSON text and must still store what JavaScript does.
    posts.create_item(
        "p3",
        json!({"id": "p3", "postId": "p3", "title": "Ünïcödé \"q\" \\", "commentCount": "5", "likeCount": "5"}),
        None,
    )?;
    posts.create_script(script(
        lang,
        procedure,
        ScriptKind::StoredProcedure,
        procedure,
        module,
    ))?;
    let mut transcript = Vec::new();
    let calls = [
        ("p1", json!(["p1", {"text": "hi", "userId": "u2"}])),
        ("p1", json!(["p1", {"id": "c1", "text": "with an id"}])),
        ("p1", json!(["p1", {"id": "c1", "text": "duplicate"}])),
        ("p9", json!(["p9", {"text": "no post"}])),
        (
            "p2",
            json!(["p2", {"id": "c2", "nested": {"a": [1, 2.5, null]}}]),
        ),
        ("p2", json!(["p2", {"id": "c3"}])),
        ("p1", json!(["p1"])),
        ("p1", json!(["p1", null])),
        ("p1", json!(["p1", "just text"])),
        (
            "p3",
            json!(["p3", {"id": "c4", "postId": "old", "t\"x": "a\\b é", "n": 1e2, "z": -0.0}]),
        ),
    ];
    for (pk, args) in calls {
        let args: Vec<Value> = args.as_array().expect("an array").clone();
        let result = posts.execute_stored_procedure(procedure, pk, args, None);
        transcript.push(outcome(result, |e| (e.status(), e.substatus())));
    }
    transcript.push(json!(state(&posts, "p1", &["p1", "c1"])?));
    transcript.push(json!(state(&posts, "p2", &["p2", "c2", "c3"])?));
    transcript.push(json!(state(&posts, "p3", &["p3", "c4"])?));
    Ok(transcript)
}

#[test]
fn create_comment_matches_javascript() -> Result {
    let js = create_post_and_call(Lang::JavaScript, "createComment", "create_comment")?;
    let wasm = create_post_and_call(Lang::Wasm, "createComment", "create_comment")?;
    assert_eq!(wasm, js);
    Ok(())
}

#[test]
fn create_like_matches_javascript() -> Result {
    let js = create_post_and_call(Lang::JavaScript, "createLike", "create_like")?;
    let wasm = create_post_and_call(Lang::Wasm, "createLike", "create_like")?;
    assert_eq!(wasm, js);
    Ok(())
}

fn update_usernames(lang: Lang) -> Result<Vec<Value>> {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId")?;
    posts.create_script(script(
        lang,
        "updateUsernames",
        ScriptKind::StoredProcedure,
        "updateUsernames",
        "update_usernames",
    ))?;
    let mut ids = Vec::new();
    for i in 0..60 {
        let user = ["u1", "u2", "u3"][i % 3];
        let id = format!("d{i:02}");
        posts.create_item(
            "p1",
            json!({"id": id, "postId": "p1", "userId": user, "userUsername": "old", "n": i}),
            None,
        )?;
        ids.push(id);
    }
    posts.create_item(
        "p2",
        json!({"id": "x", "postId": "p2", "userId": "u1", "userUsername": "old"}),
        None,
    )?;
    let mut transcript = Vec::new();
    for (pk, args) in [
        ("p1", vec![json!("u1"), json!("new")]),
        ("p1", vec![json!("u2"), json!({"display": "Two"})]),
        ("p1", vec![json!("nobody"), json!("x")]),
        ("p1", vec![json!(3), json!("three")]),
    ] {
        let result = posts.execute_stored_procedure("updateUsernames", pk, args, None);
        transcript.push(outcome(result, |e| (e.status(), e.substatus())));
    }
    let known: Vec<&str> = ids.iter().map(String::as_str).collect();
    transcript.push(json!(state(&posts, "p1", &known)?));
    transcript.push(json!(state(&posts, "p2", &["x"])?));
    Ok(transcript)
}

#[test]
fn update_usernames_matches_javascript() -> Result {
    assert_eq!(
        update_usernames(Lang::Wasm)?,
        update_usernames(Lang::JavaScript)?
    );
    Ok(())
}

fn truncate_feed(lang: Lang) -> Result<Vec<Value>> {
    let db = Database::in_memory();
    let feed = db.create_container("feed", "/type")?;
    feed.create_script(script(
        lang,
        "truncateFeed",
        ScriptKind::Trigger,
        "truncateFeed",
        "truncate_feed",
    ))?;
    let options = WriteOptions {
        post_triggers: vec!["truncateFeed".into()],
        ..Default::default()
    };
    let mut transcript = Vec::new();
    let mut ids = Vec::new();
    for i in 0..105 {
        let id = format!("post{i:03}");
        let doc = json!({"id": id, "type": "post", "creationDate": format!("2026-01-01T00:{:02}:{:02}Z", i / 60, i % 60)});
        let response = feed.upsert_item("post", doc, Some(&options))?;
        transcript.push(normalize(
            &response
                .resource
                .map_or(Value::Null, partita::Document::into_value),
            false,
        ));
        ids.push(id);
    }
    // A delete runs the trigger too (operation All); so does a replace.
    feed.delete_item("post", "post050", Some(&options))?;
    feed.replace_item(
        "post",
        "post060",
        json!({"id": "post060", "type": "post", "creationDate": "2025-01-01T00:00:00Z"}),
        Some(&options),
    )?;
    let known: Vec<&str> = ids.iter().map(String::as_str).collect();
    transcript.push(json!(state(&feed, "post", &known)?));
    Ok(transcript)
}

#[test]
fn truncate_feed_matches_javascript() -> Result {
    assert_eq!(truncate_feed(Lang::Wasm)?, truncate_feed(Lang::JavaScript)?);
    Ok(())
}
