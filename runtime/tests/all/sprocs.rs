//! The scripts in `sprocs/samples/js/`, run unmodified against the real
//! engine: their results, their rollback when an operation inside fails,
//! the continuation path of the bulk scripts under a forced small budget,
//! and the commentCount invariant under concurrent calls.

use std::sync::Arc;

use crate::support::js::{call, call_with};
use crate::support::{container, failure, ok_body, sproc};
use engine::PartitionKey;
use host_api::TriggerOperation;
use runtime::{Invocation, Limits};
use serde_json::{Value, json};

fn count(c: &engine::Container, pk: &str) -> usize {
    c.snapshot(&PartitionKey::from(pk)).expect("snapshot").len()
}

fn docs(c: &engine::Container, pk: &str) -> Vec<Value> {
    c.snapshot(&PartitionKey::from(pk))
        .expect("snapshot")
        .documents()
        .map(|d| d.value().clone())
        .collect()
}

#[test]
fn create_comment_increments_and_rolls_back() {
    let (_db, c) = container("posts", "/postId");
    c.create_item(
        "p1",
        json!({"id": "p1", "postId": "p1", "type": "post", "commentCount": 0}),
        None,
    )
    .unwrap();
    let body = sproc("createComment.js");
    call(
        &c,
        "p1",
        &body,
        vec![json!("p1"), json!({"type": "comment", "text": "hi"})],
    )
    .unwrap();
    assert_eq!(c.read_item("p1", "p1").unwrap()["commentCount"], 1);
    let comments: Vec<Value> = docs(&c, "p1")
        .into_iter()
        .filter(|d| d["type"] == "comment")
        .collect();
    assert_eq!(comments.len(), 1);
    let id = comments[0]["id"].as_str().unwrap();
    assert_eq!(id.len(), 36, "generated GUID: {id}");
    assert_eq!(comments[0]["postId"], "p1");

    // A comment with a fixed id, twice: the second create fails with 409
    // (no callback, so it aborts) and the increment is rolled back.
    call(
        &c,
        "p1",
        &body,
        vec![json!("p1"), json!({"id": "c1", "type": "comment"})],
    )
    .unwrap();
    let f = failure(call(
        &c,
        "p1",
        &body,
        vec![json!("p1"), json!({"id": "c1", "type": "comment"})],
    ));
    assert_eq!(
        (f.error.status(), f.error.substatus()),
        (400, Some(409)),
        "{}",
        f.error
    );
    assert_eq!(c.read_item("p1", "p1").unwrap()["commentCount"], 2);
    assert_eq!(count(&c, "p1"), 3);

    // A missing post: the rethrown 404 is 400/404 with the original message.
    let f = failure(call(&c, "p9", &body, vec![json!("p9"), json!({})]));
    assert_eq!(
        (f.error.status(), f.error.substatus()),
        (400, Some(404)),
        "{}",
        f.error
    );
}

#[test]
fn create_like_increments() {
    let (_db, c) = container("posts", "/postId");
    c.create_item(
        "p1",
        json!({"id": "p1", "postId": "p1", "type": "post", "likeCount": 0}),
        None,
    )
    .unwrap();
    let body = sproc("createLike.js");
    for _ in 0..3 {
        call(
            &c,
            "p1",
            &body,
            vec![json!("p1"), json!({"type": "like", "userId": "u1"})],
        )
        .unwrap();
    }
    assert_eq!(c.read_item("p1", "p1").unwrap()["likeCount"], 3);
    assert_eq!(count(&c, "p1"), 4);
}

#[test]
fn update_usernames_touches_the_users_items_only() {
    let (_db, c) = container("posts", "/postId");
    for (id, user) in [("p1", "u1"), ("c1", "u1"), ("c2", "u2"), ("l1", "u1")] {
        c.create_item(
            "p1",
            json!({"id": id, "postId": "p1", "userId": user, "userUsername": "old"}),
            None,
        )
        .unwrap();
    }
    call(
        &c,
        "p1",
        &sproc("updateUsernames.js"),
        vec![json!("u1"), json!("alice")],
    )
    .unwrap();
    for d in docs(&c, "p1") {
        let expected = if d["userId"] == "u1" { "alice" } else { "old" };
        assert_eq!(d["userUsername"], expected, "{d}");
    }
}

#[test]
fn truncate_feed_keeps_exactly_100() {
    let (_db, c) = container("feed", "/type");
    let body = sproc("truncateFeed.js");
    for i in 0..105 {
        let mut txn = c.begin("post").unwrap();
        let doc = json!({"id": format!("post{i:03}"), "type": "post", "creationDate": format!("2024-01-01T00:{:02}:{:02}Z", i / 60, i % 60)});
        let written = txn.create_item(doc.clone()).unwrap();
        let script = runtime::Script {
            id: "truncateFeed",
            version: 1,
            body: &body,
        };
        let invocation = Invocation::PostTrigger {
            request_body: doc,
            response_body: written.value().clone(),
            operation: TriggerOperation::Create,
        };
        let out = runtime::run_js(&script, invocation, &mut txn, &Limits::default()).unwrap();
        assert_eq!(out.body.unwrap()["id"], format!("post{i:03}"));
        txn.commit().unwrap();
    }
    assert_eq!(count(&c, "post"), 100);
    let mut ids: Vec<String> = docs(&c, "post")
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    assert_eq!(
        ids.first().unwrap(),
        "post005",
        "the oldest five were deleted"
    );
}

#[test]
fn truncate_feed_failure_rolls_back_the_write() {
    // A post-trigger that throws rolls back the triggering write too.
    let (_db, c) = container("feed", "/type");
    let mut txn = c.begin("post").unwrap();
    let doc = json!({"id": "x", "type": "post"});
    let written = txn.create_item(doc.clone()).unwrap();
    let script = runtime::Script {
        id: "boom",
        version: 1,
        body: "function () { throw new Error(4444, 'no'); }",
    };
    let invocation = Invocation::PostTrigger {
        request_body: doc,
        response_body: written.value().clone(),
        operation: TriggerOperation::Create,
    };
    let f = runtime::run_js(&script, invocation, &mut txn, &Limits::default()).unwrap_err();
    assert_eq!((f.error.status(), f.error.substatus()), (400, Some(4444)));
    drop(txn);
    assert_eq!(count(&c, "post"), 0);
}

/// Limits that stop accepting operations after `ops` of them.
fn small(ops: u64) -> Limits {
    Limits {
        max_operations: ops,
        ..Limits::default()
    }
}

#[test]
fn bulk_import_continues_across_calls() {
    let (_db, c) = container("items", "/pk");
    let body = sproc("bulkImport.js");
    let items: Vec<Value> = (0..25)
        .map(|i| json!({"id": format!("i{i}"), "pk": "a", "n": i}))
        .collect();
    let mut rest = items.as_slice();
    let mut calls = 0;
    while !rest.is_empty() {
        let out = call_with(
            &c,
            "a",
            "bulkImport",
            &body,
            Invocation::Procedure {
                params: vec![Value::Array(rest.to_vec())],
            },
            &small(10),
        );
        let n = ok_body(out).as_u64().unwrap() as usize;
        assert!(n > 0 && n <= 10, "{n}");
        rest = &rest[n..];
        calls += 1;
    }
    assert_eq!(calls, 3);
    assert_eq!(count(&c, "a"), 25);
    // An empty batch returns 0; a duplicate rolls the whole batch back.
    assert_eq!(ok_body(call(&c, "a", &body, vec![json!([])])), json!(0));
    let dup = json!([{"id": "new1", "pk": "a"}, {"id": "i0", "pk": "a"}]);
    let f = failure(call(&c, "a", &body, vec![dup]));
    assert_eq!(f.error.substatus(), Some(409));
    assert_eq!(count(&c, "a"), 25);
}

#[test]
fn bulk_delete_continues_across_calls() {
    let (_db, c) = container("items", "/pk");
    for i in 0..30 {
        c.create_item(
            "a",
            json!({"id": format!("i{i}"), "pk": "a", "old": i < 23}),
            None,
        )
        .unwrap();
    }
    let body = sproc("bulkDelete.js");
    let mut deleted = 0;
    let mut calls = 0;
    loop {
        let out = call_with(
            &c,
            "a",
            "bulkDelete",
            &body,
            Invocation::Procedure {
                params: vec![json!("SELECT * FROM c WHERE c.old = true")],
            },
            &small(8),
        );
        let out = ok_body(out);
        deleted += out["deleted"].as_u64().unwrap();
        calls += 1;
        if out["continuation"] == false {
            break;
        }
        assert!(calls < 20, "no progress");
    }
    assert!(calls > 2, "the continuation path ran ({calls} calls)");
    assert_eq!(deleted, 23);
    assert_eq!(count(&c, "a"), 7);
}

#[test]
fn concurrent_create_comment_keeps_the_count() {
    let (_db, c) = container("posts", "/postId");
    c.create_item(
        "p1",
        json!({"id": "p1", "postId": "p1", "type": "post", "commentCount": 0}),
        None,
    )
    .unwrap();
    let c = Arc::new(c);
    let body = Arc::new(sproc("createComment.js"));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (c, body) = (c.clone(), body.clone());
            std::thread::spawn(move || {
                for i in 0..25 {
                    call(
                        &c,
                        "p1",
                        &body,
                        vec![json!("p1"), json!({"type": "comment", "n": t * 100 + i})],
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let comments = docs(&c, "p1")
        .iter()
        .filter(|d| d["type"] == "comment")
        .count();
    assert_eq!(comments, 100);
    assert_eq!(c.read_item("p1", "p1").unwrap()["commentCount"], 100);
}
