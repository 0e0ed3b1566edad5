//! The WebAssembly runtime against the real engine: the hand-written WAT
//! procedures of `sprocs/samples/wat/` (and their parity with the
//! JavaScript ones), the ABI's inputs and outputs, upload checks, fuel
//! determinism, bounded execution, UDFs and the compiled-artifact cache.

use engine::PartitionKey;
use host_api::{ScriptKind, TriggerOperation};
use runtime::{
    Invocation, Limits, WasmCache, WasmScript, prepare_wasm, run_js, run_wasm, run_wasm_udf,
};
use serde_json::{Value, json};

use crate::support::wasm::{call, call_with, module, script};
use crate::support::{self, container, failure, ok_body, sproc, wat};

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

/// Every import of the ABI, for inline test modules.
const IMPORTS: &str = r#"
  (import "partita_v1" "context" (func $context (param i32 i32) (result i32)))
  (import "partita_v1" "params" (func $params (param i32 i32) (result i32)))
  (import "partita_v1" "request_body" (func $request_body (param i32 i32) (result i32)))
  (import "partita_v1" "set_request_body" (func $set_request_body (param i32 i32) (result i32)))
  (import "partita_v1" "response_body" (func $response_body (param i32 i32) (result i32)))
  (import "partita_v1" "set_response_body" (func $set_response_body (param i32 i32) (result i32)))
  (import "partita_v1" "log" (func $log (param i32 i32)))
  (import "partita_v1" "read" (func $read (param i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "read_feed" (func $read_feed (param i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "create" (func $create (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "replace" (func $replace (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "upsert" (func $upsert (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "delete" (func $delete (param i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "query" (func $query (param i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "take_result" (func $take_result (param i32 i32) (result i32)))
  (import "partita_v1" "fail" (func $fail (param i32 i32 i32)))
"#;

/// A module of `kind` with every import, one page of memory and `body`.
fn inline(body: &str, kind: ScriptKind) -> Vec<u8> {
    module(
        &format!("(module {IMPORTS} (memory (export \"memory\") 1) {body})"),
        kind,
    )
}

fn procedure(body: &str) -> Vec<u8> {
    inline(body, ScriptKind::StoredProcedure)
}

fn post(c: &engine::Container, id: &str) {
    c.create_item(
        id,
        json!({"id": id, "postId": id, "type": "post", "commentCount": 0}),
        None,
    )
    .unwrap();
}

#[test]
fn create_comment_wat_increments_and_rolls_back() {
    let (_db, c) = container("posts", "/postId");
    post(&c, "p1");
    let m = module(&wat("createComment.wat"), ScriptKind::StoredProcedure);
    call(
        &c,
        "p1",
        &m,
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
    assert_eq!(comments[0]["text"], "hi");

    // A fixed id, twice: the second create fails with 409, the guest fails
    // with it, and the increment is rolled back.
    call(
        &c,
        "p1",
        &m,
        vec![json!("p1"), json!({"id": "c1", "type": "comment"})],
    )
    .unwrap();
    let f = failure(call(
        &c,
        "p1",
        &m,
        vec![json!("p1"), json!({"id": "c1", "type": "comment"})],
    ));
    assert_eq!(
        (f.error.status(), f.error.substatus()),
        (400, Some(409)),
        "{}",
        f.error
    );
    assert!(f.error.to_string().contains("c1"), "{}", f.error);
    assert_eq!(c.read_item("p1", "p1").unwrap()["commentCount"], 2);
    assert_eq!(count(&c, "p1"), 3);

    // A missing post: 400/404 with the host's message.
    let f = failure(call(&c, "p9", &m, vec![json!("p9"), json!({})]));
    assert_eq!(
        (f.error.status(), f.error.substatus()),
        (400, Some(404)),
        "{}",
        f.error
    );

    // Parameters of the wrong shape are refused with a message.
    let f = failure(call(&c, "p1", &m, vec![json!(7)]));
    assert_eq!(f.error.status(), 400);
    assert!(
        f.error.to_string().contains("expects [postId, comment]"),
        "{}",
        f.error
    );
}

/// The document without what differs between two runs (system properties).
fn content(mut doc: Value) -> Value {
    if let Value::Object(map) = &mut doc {
        map.retain(|k, _| !k.starts_with('_'));
    }
    doc
}

#[test]
fn create_comment_wat_matches_javascript() {
    let js = sproc("createComment.js");
    let m = module(&wat("createComment.wat"), ScriptKind::StoredProcedure);
    let comments = [
        json!({"id": "c1", "text": "hello", "n": [1, {"a": null}]}),
        json!({"id": "c2", "text": "a \"postId\": in a string is no key", "postId": "p1"}),
        json!({"id": "c3"}),
    ];
    let mut results = Vec::new();
    for lang in ["js", "wasm"] {
        let (_db, c) = container("posts", "/postId");
        for i in 0..3 {
            c.create_item(
                "p1",
                json!({"id": "p1", "postId": "p1", "title": "\"commentCount\": 5", "commentCount": 9 + i, "tags": ["x"]}),
                None,
            )
            .ok();
        }
        let mut statuses = Vec::new();
        for comment in comments.iter().chain([&json!({"id": "c1"})]) {
            let params = vec![json!("p1"), comment.clone()];
            let res = if lang == "js" {
                support::js::call(&c, "p1", &js, params)
            } else {
                call(&c, "p1", &m, params)
            };
            statuses.push(
                res.map(|_| ())
                    .map_err(|f| (f.error.status(), f.error.substatus())),
            );
        }
        let mut all: Vec<Value> = docs(&c, "p1").into_iter().map(content).collect();
        all.sort_by_key(|d| d["id"].to_string());
        results.push((statuses, all));
    }
    assert_eq!(results[0], results[1]);
    assert_eq!(results[1].1[3]["commentCount"], 12);
    assert_eq!(results[1].0[3], Err((400, Some(409))));
}

#[test]
fn create_comment_wat_keeps_a_comment_with_the_posts_id_and_refuses_another() {
    // JavaScript overwrites a comment's postId; the WAT guest would append
    // a second one, a duplicate member the host refuses. So a comment that
    // already names the post is stored as it is, and one naming another
    // post (or with a postId key deeper inside) is a 400.
    let (_db, c) = container("posts", "/postId");
    post(&c, "p1");
    let m = module(&wat("createComment.wat"), ScriptKind::StoredProcedure);
    call(
        &c,
        "p1",
        &m,
        vec![
            json!("p1"),
            json!({"id": "c1", "postId": "p1", "text": "x"}),
        ],
    )
    .unwrap();
    let stored = c.read_item("p1", "c1").unwrap();
    assert_eq!(
        (&stored["postId"], &stored["text"]),
        (&json!("p1"), &json!("x"))
    );
    for comment in [
        json!({"postId": "wrong"}),
        json!({"postId": "p10"}),
        json!({"text": "x", "meta": {"postId": 1}}),
    ] {
        let f = failure(call(&c, "p1", &m, vec![json!("p1"), comment]));
        assert_eq!(f.error.status(), 400, "{}", f.error);
        assert!(
            f.error.to_string().contains("another postId"),
            "{}",
            f.error
        );
    }
    assert_eq!(c.read_item("p1", "p1").unwrap()["commentCount"], 1);
    assert_eq!(count(&c, "p1"), 2);
}

#[test]
fn a_guest_document_with_a_repeated_member_is_refused_with_its_path() {
    // Stored as written or not at all: no "last one wins". The guest fails
    // with the create's status and the host's message.
    let m = procedure(
        r#"
  (data (i32.const 0) "{\"pk\":\"a\",\"n\":{\"x\":1,\"x\":2}}")
  (func (export "partita_procedure") (result i32)
    (local $r i32) (local $len i32)
    (local.set $r (call $create (i32.const 0) (i32.const 28) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
    (if (i32.lt_s (local.get $r) (i32.const 0))
      (then
        (local.set $len (call $take_result (i32.const 1024) (i32.const 4096)))
        (call $fail (i32.sub (i32.const 0) (local.get $r)) (i32.const 1024) (local.get $len))))
    (i32.const 0))"#,
    );
    let (_db, c) = container("posts", "/pk");
    let f = failure(call(&c, "a", &m, vec![]));
    assert_eq!(
        (f.error.status(), f.error.substatus()),
        (400, Some(400)),
        "{}",
        f.error
    );
    let message = f.error.to_string();
    assert!(
        message.contains("/n/x") && message.contains("more than once"),
        "{message}"
    );
    assert_eq!(count(&c, "a"), 0);
}

#[test]
fn create_comment_wat_handles_documents_past_its_small_buffers() {
    // The WAT guest reads results into 16 KiB buffers and fetches larger
    // ones with take_result: a 100 KB post and 40 KB parameters take that
    // path for the parameters, the post and both documents written, and
    // must store what JavaScript stores.
    let js = sproc("createComment.js");
    let m = module(&wat("createComment.wat"), ScriptKind::StoredProcedure);
    let mut results = Vec::new();
    for lang in ["js", "wasm"] {
        let (_db, c) = container("posts", "/postId");
        c.create_item(
            "p1",
            json!({"id": "p1", "postId": "p1", "title": "t".repeat(100_000), "commentCount": 41}),
            None,
        )
        .unwrap();
        for (id, size) in [("small", 10), ("large", 40_000)] {
            let params = vec![json!("p1"), json!({"id": id, "text": "c".repeat(size)})];
            let res = if lang == "js" {
                support::js::call(&c, "p1", &js, params)
            } else {
                call(&c, "p1", &m, params)
            };
            res.unwrap();
        }
        let mut all: Vec<Value> = docs(&c, "p1").into_iter().map(content).collect();
        all.sort_by_key(|d| d["id"].to_string());
        results.push(all);
    }
    assert_eq!(results[0], results[1]);
    let post = results[1].iter().find(|d| d["id"] == "p1").unwrap();
    assert_eq!(post["commentCount"], 43);
    assert_eq!(post["title"].as_str().unwrap().len(), 100_000);
    let large = results[1].iter().find(|d| d["id"] == "large").unwrap();
    assert_eq!(large["text"].as_str().unwrap().len(), 40_000);
    assert_eq!(large["postId"], "p1");
}

#[allow(clippy::result_large_err)] // As `run_wasm`.
fn feed_write(
    c: &engine::Container,
    module: &[u8],
    i: usize,
) -> Result<runtime::Output, runtime::Failure> {
    let mut txn = c.begin("post").unwrap();
    let doc = json!({"id": format!("post{i:03}"), "type": "post", "creationDate": format!("2024-01-01T00:{:02}:{:02}Z", i / 60, i % 60)});
    let written = txn.create_item(doc.clone()).unwrap();
    let invocation = Invocation::PostTrigger {
        request_body: doc,
        response_body: written.value().clone(),
        operation: TriggerOperation::Create,
    };
    let res = run_wasm(&script(module), invocation, &mut txn, &Limits::default());
    if res.is_ok() {
        txn.commit().unwrap();
    }
    res
}

#[test]
fn truncate_feed_wat_keeps_exactly_100() {
    let (_db, c) = container("feed", "/type");
    let m = module(&wat("truncateFeed.wat"), ScriptKind::Trigger);
    for i in 0..105 {
        let out = feed_write(&c, &m, i).unwrap();
        assert_eq!(out.body.unwrap()["id"], format!("post{i:03}"));
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
fn trigger_failure_rolls_back_the_write() {
    let (_db, c) = container("feed", "/type");
    let boom = inline(
        r#"(data (i32.const 0) "no")
           (func (export "partita_trigger") (result i32)
             (call $fail (i32.const 4444) (i32.const 0) (i32.const 2))
             (i32.const 0))"#,
        ScriptKind::Trigger,
    );
    let f = feed_write(&c, &boom, 0).unwrap_err();
    assert_eq!((f.error.status(), f.error.substatus()), (400, Some(4444)));
    assert!(f.error.to_string().contains("no"), "{}", f.error);
    assert_eq!(count(&c, "post"), 0);
}

#[test]
fn inputs_outputs_and_logs() {
    let (_db, c) = container("posts", "/postId");
    // Logs its parameters and the context, and answers with the context.
    let m = procedure(
        r#"(data (i32.const 0) "\ff bytes")
           (func (export "partita_procedure") (result i32)
             (local $n i32)
             (local.set $n (call $params (i32.const 100) (i32.const 1000)))
             (call $log (i32.const 100) (local.get $n))
             (call $log (i32.const 0) (i32.const 7))
             ;; A buffer too small: the length comes back, the bytes wait.
             (local.set $n (call $context (i32.const 100) (i32.const 4)))
             (drop (call $take_result (i32.const 100) (local.get $n)))
             (drop (call $set_response_body (i32.const 100) (local.get $n)))
             (i32.const 0))"#,
    );
    let out = call(&c, "p1", &m, vec![json!(1), json!("two")]).unwrap();
    assert_eq!(out.logs, "[1,\"two\"]\u{fffd} bytes");
    let body = out.body.unwrap();
    assert_eq!(body["kind"], "procedure");
    assert_eq!(body["containerId"], "posts");
    assert_eq!(body["partitionKey"], json!(["p1"]));
    assert_eq!(body["operation"], Value::Null);
    assert!(
        body["altLink"].as_str().unwrap().ends_with("colls/posts"),
        "{body}"
    );
    assert!(out.stats.fuel > 0);

    // A procedure that sets no body answers None (the facade makes it "").
    let m = procedure(r#"(func (export "partita_procedure") (result i32) (i32.const 0))"#);
    assert_eq!(call(&c, "p1", &m, vec![]).unwrap().body, None);
    // A nonzero return is a failure with that substatus.
    let m = procedure(r#"(func (export "partita_procedure") (result i32) (i32.const 409))"#);
    let f = failure(call(&c, "p1", &m, vec![]));
    assert_eq!((f.error.status(), f.error.substatus()), (400, Some(409)));
}

#[test]
fn pre_trigger_changes_the_request_body() {
    let (_db, c) = container("posts", "/postId");
    let m = inline(
        r#"(data (i32.const 0) "{\"id\":\"x\",\"postId\":\"p1\",\"stamped\":true}")
           (func (export "partita_trigger") (result i32)
             (local $n i32)
             ;; The request body is readable; a response body is not.
             (local.set $n (call $request_body (i32.const 200) (i32.const 500)))
             (if (i32.le_s (local.get $n) (i32.const 0)) (then unreachable))
             (if (i32.ne (call $response_body (i32.const 200) (i32.const 500)) (i32.const -400))
               (then unreachable))
             (drop (call $set_request_body (i32.const 0) (i32.const 39)))
             (i32.const 0))"#,
        ScriptKind::Trigger,
    );
    let mut txn = c.begin("p1").unwrap();
    let out = run_wasm(
        &script(&m),
        Invocation::PreTrigger {
            request_body: json!({"id": "x", "postId": "p1"}),
            operation: TriggerOperation::Create,
        },
        &mut txn,
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(
        out.body.unwrap(),
        json!({"id": "x", "postId": "p1", "stamped": true})
    );
}

#[test]
fn reads_queries_and_feeds_see_the_partition() {
    let (_db, c) = container("posts", "/postId");
    post(&c, "p1");
    // read p1 → body, then query with a parameter, then read_feed, each
    // logged on a line of its own (the log keeps text as given, so the
    // module writes the newlines); an unknown id answers -404 with a
    // message.
    let m = procedure(
        r#"(data (i32.const 0) "p1")
           (data (i32.const 8) "nope")
           (data (i32.const 16) "{\"query\":\"SELECT VALUE c.commentCount FROM c WHERE c.id = @id\",\"parameters\":[{\"name\":\"@id\",\"value\":\"p1\"}]}")
           (data (i32.const 160) "{\"pageSize\":1}")
           (data (i32.const 500) "\n")
           (func (export "partita_procedure") (result i32)
             (local $n i32)
             (local.set $n (call $read (i32.const 0) (i32.const 2) (i32.const 1000) (i32.const 4000)))
             (call $log (i32.const 1000) (local.get $n))
             (call $log (i32.const 500) (i32.const 1))
             (local.set $n (call $query (i32.const 16) (i32.const 106) (i32.const 1000) (i32.const 4000)))
             (call $log (i32.const 1000) (local.get $n))
             (call $log (i32.const 500) (i32.const 1))
             (local.set $n (call $read_feed (i32.const 160) (i32.const 14) (i32.const 1000) (i32.const 4000)))
             (call $log (i32.const 1000) (local.get $n))
             (call $log (i32.const 500) (i32.const 1))
             (if (i32.ne (call $read (i32.const 8) (i32.const 4) (i32.const 1000) (i32.const 4000))
                   (i32.const -404)) (then unreachable))
             (local.set $n (call $take_result (i32.const 1000) (i32.const 4000)))
             (call $log (i32.const 1000) (local.get $n))
             (call $log (i32.const 500) (i32.const 1))
             ;; Nothing waits any more.
             (if (call $take_result (i32.const 1000) (i32.const 4000)) (then unreachable))
             (i32.const 0))"#,
    );
    let out = call(&c, "p1", &m, vec![]).unwrap();
    let lines: Vec<&str> = out.logs.lines().collect();
    let read: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(read["id"], "p1");
    assert_eq!(read["commentCount"], 0);
    assert_eq!(lines[1], r#"{"items":[0],"continuation":null}"#);
    let feed: Value = serde_json::from_str(lines[2]).unwrap();
    assert_eq!(feed["items"][0]["id"], "p1");
    assert!(lines[3].contains("nope"), "{}", lines[3]);
}

#[test]
fn a_document_result_without_a_buffer_waits_whole() {
    // read with no output buffer answers the length only; take_result with
    // one byte too few answers it again and writes nothing (the 'x' fill
    // stays); with room, the bytes are those a large buffer gets directly.
    // (Any other import drops what waits, so nothing is logged between.)
    // Each logged text ends with a newline the module writes.
    let (_db, c) = container("posts", "/postId");
    post(&c, "p1");
    let m = procedure(
        r#"(data (i32.const 0) "p1")
           (data (i32.const 500) "\n")
           (func (export "partita_procedure") (result i32)
             (local $n i32)
             (local.set $n (call $read (i32.const 0) (i32.const 2) (i32.const 0) (i32.const 0)))
             (memory.fill (i32.const 5000) (i32.const 120) (i32.const 4000))
             (if (i32.ne (call $take_result (i32.const 5000) (i32.sub (local.get $n) (i32.const 1)))
                   (local.get $n)) (then unreachable))
             (if (i32.ne (call $take_result (i32.const 1000) (local.get $n)) (local.get $n))
               (then unreachable))
             (call $log (i32.const 5000) (i32.const 4))
             (call $log (i32.const 500) (i32.const 1))
             (call $log (i32.const 1000) (local.get $n))
             (call $log (i32.const 500) (i32.const 1))
             (local.set $n (call $read (i32.const 0) (i32.const 2) (i32.const 9000) (i32.const 4000)))
             (call $log (i32.const 9000) (local.get $n))
             (call $log (i32.const 500) (i32.const 1))
             ;; A create's result, not taken, is dropped by the next call.
             (if (i32.le_s (call $create (i32.const 20) (i32.const 15) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)) (i32.const 0))
               (then unreachable))
             (call $log (i32.const 0) (i32.const 0))
             (if (call $take_result (i32.const 1000) (i32.const 4000)) (then unreachable))
             (i32.const 0))
           (data (i32.const 20) "{\"postId\":\"p1\"}")"#,
    );
    let out = call(&c, "p1", &m, vec![]).unwrap();
    let lines: Vec<&str> = out.logs.lines().collect();
    assert_eq!(lines[0], "xxxx", "nothing written to a buffer too small");
    assert_eq!(lines[1], lines[2]);
    let read: Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(read["id"], "p1");
    assert_eq!(count(&c, "p1"), 2);
}

#[test]
fn upload_refuses_bad_modules_naming_the_problem() {
    let check = |body: &[u8], kind: ScriptKind, expected: &str| {
        let err = prepare_wasm(&script(body), kind).unwrap_err();
        assert_eq!((err.status(), err.substatus()), (400, Some(65535)), "{err}");
        assert!(
            err.to_string().contains(expected),
            "{err} should mention {expected:?}"
        );
    };
    let p = ScriptKind::StoredProcedure;
    check(b"\0asm\x01\0\0\0\x99garbage", p, "does not validate");
    check(&[0xff, 0xfe, 0x00], p, "neither WebAssembly");
    check(
        b"(module (func (result i32) i32.const 0 i32.const 1)",
        p,
        "does not parse",
    );
    check(
        br#"(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
              (memory (export "memory") 1) (func (export "partita_procedure") (result i32) (i32.const 0)))"#,
        p,
        "wasi_snapshot_preview1.fd_write",
    );
    check(
        br#"(module (import "partita_v1" "nope" (func))
              (memory (export "memory") 1) (func (export "partita_procedure") (result i32) (i32.const 0)))"#,
        p,
        "partita_v1.nope",
    );
    check(
        br#"(module (import "partita_v1" "read" (func (param i32 i32) (result i32)))
              (memory (export "memory") 1) (func (export "partita_procedure") (result i32) (i32.const 0)))"#,
        p,
        "(func (param i32 i32 i32 i32) (result i32))",
    );
    check(
        br#"(module (import "partita_v1" "memory" (memory 1))
              (func (export "partita_procedure") (result i32) (i32.const 0)))"#,
        p,
        "partita_v1.memory",
    );
    check(
        br#"(module (func (export "partita_procedure") (result i32) (i32.const 0)))"#,
        p,
        "does not export its memory",
    );
    check(
        br#"(module (memory (export "memory") 1) (func (export "partita_trigger") (result i32) (i32.const 0)))"#,
        p,
        "does not export \"partita_procedure\"",
    );
    check(
        br#"(module (memory (export "memory") 1) (func (export "partita_procedure") (param i32) (result i32) (i32.const 0)))"#,
        p,
        "entry point must be (func (result i32))",
    );
    // A module that is fine as a trigger is refused as a UDF.
    let trigger = wat("truncateFeed.wat");
    assert!(prepare_wasm(&script(trigger.as_bytes()), ScriptKind::Trigger).is_ok());
    check(
        trigger.as_bytes(),
        ScriptKind::UserDefinedFunction,
        "partita_udf",
    );

    // WAT is normalized to the binary form.
    let wasm = prepare_wasm(&script(trigger.as_bytes()), ScriptKind::Trigger).unwrap();
    assert!(wasm.starts_with(b"\0asm"));
    assert_eq!(
        prepare_wasm(&script(&wasm), ScriptKind::Trigger).unwrap(),
        wasm
    );
}

#[test]
fn fuel_is_deterministic_and_reported() {
    let m = module(&wat("createComment.wat"), ScriptKind::StoredProcedure);
    let mut fuel = Vec::new();
    for _ in 0..3 {
        let (_db, c) = container("posts", "/postId");
        post(&c, "p1");
        let out = call(
            &c,
            "p1",
            &m,
            vec![json!("p1"), json!({"id": "c1", "text": "hi"})],
        )
        .unwrap();
        fuel.push(out.stats.fuel);
    }
    assert!(fuel[0] > 3 * 1000, "three host calls at least: {fuel:?}");
    assert!(fuel.iter().all(|f| *f == fuel[0]), "{fuel:?}");
}

#[test]
fn create_comment_wat_leaves_the_post_with_the_host() {
    // The post's count is read and set with read_member/replace_member, so
    // the post never crosses the boundary: a call's fuel (one unit per byte
    // crossing it) is the same for a post of 20 bytes and one of 100 KB,
    // and the stored post is what JavaScript's read, ++ and replace store.
    let m = module(&wat("createComment.wat"), ScriptKind::StoredProcedure);
    let mut fuel = Vec::new();
    for title in ["t".to_owned(), "t".repeat(100_000)] {
        let (_db, c) = container("posts", "/postId");
        c.create_item(
            "p1",
            json!({"id": "p1", "postId": "p1", "title": title, "commentCount": 41, "tags": [1]}),
            None,
        )
        .unwrap();
        let out = call(&c, "p1", &m, vec![json!("p1"), json!({"id": "c1"})]).unwrap();
        fuel.push(out.stats.fuel);
        let post = content(c.read_item("p1", "p1").unwrap().into_value());
        assert_eq!(
            post,
            json!({"id": "p1", "postId": "p1", "title": title, "commentCount": 42, "tags": [1]})
        );
    }
    assert_eq!(fuel[0], fuel[1], "{fuel:?}");
    // A count that is not a small non-negative integer is refused, and
    // nothing is written.
    for n in [
        json!(-1),
        json!(1.5),
        json!("5"),
        json!(null),
        json!(10_u64.pow(18)),
    ] {
        let (_db, c) = container("posts", "/postId");
        c.create_item(
            "p1",
            json!({"id": "p1", "postId": "p1", "commentCount": n}),
            None,
        )
        .unwrap();
        let f = failure(call(&c, "p1", &m, vec![json!("p1"), json!({"id": "c1"})]));
        assert_eq!(f.error.status(), 400, "{n}: {}", f.error);
        assert!(
            f.error.to_string().contains("no integer commentCount"),
            "{n}: {}",
            f.error
        );
        assert_eq!(count(&c, "p1"), 1, "{n}");
    }
}

/// Creates `{"pk":"a"}` documents until the host answers NOT_ACCEPTED, then
/// returns 0 (commit what was done); fails with 99 on any other error.
const CREATE_UNTIL_NOT_ACCEPTED: &str = r#"
  (data (i32.const 0) "{\"pk\":\"a\"}")
  (func (export "partita_procedure") (result i32)
    (local $r i32)
    (loop $again
      (local.set $r (call $create (i32.const 0) (i32.const 10) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
      (if (i32.eq (local.get $r) (i32.const -1)) (then (return (i32.const 0))))
      (if (i32.lt_s (local.get $r) (i32.const 0)) (then (return (i32.const 99))))
      (br $again))
    (i32.const 0))"#;

#[test]
fn bounded_execution_returns_not_accepted() {
    let m = procedure(CREATE_UNTIL_NOT_ACCEPTED);
    let run = |limits: &Limits| {
        let (_db, c) = container("posts", "/pk");
        let out = call_with(
            &c,
            "a",
            &m,
            Invocation::Procedure { params: vec![] },
            limits,
        )
        .unwrap();
        (count(&c, "a"), out.stats.fuel)
    };
    // Past accept_fuel: the same number of documents every time.
    let low = Limits {
        accept_fuel: 20_000,
        ..Limits::default()
    };
    let (n, fuel) = run(&low);
    assert!(n > 0 && n < 25, "{n} documents");
    assert_eq!(run(&low), (n, fuel));
    // Past max_operations.
    let ops = Limits {
        max_operations: 3,
        ..Limits::default()
    };
    assert_eq!(run(&ops).0, 3);
}

#[test]
fn udfs_compute_from_their_arguments() {
    // udf(x) = [x] ++ params: answers its own params array.
    let m = inline(
        r#"(func (export "partita_udf") (result i32)
             (local $n i32)
             (local.set $n (call $params (i32.const 0) (i32.const 1000)))
             ;; No collection.
             (if (i32.ne (call $read (i32.const 0) (i32.const 1) (i32.const 0) (i32.const 0))
                   (i32.const -400)) (then unreachable))
             (drop (call $set_response_body (i32.const 0) (local.get $n)))
             (i32.const 0))"#,
        ScriptKind::UserDefinedFunction,
    );
    let out = run_wasm_udf(&script(&m), &[Some(json!(1)), None], &Limits::default()).unwrap();
    assert_eq!(out, Some(json!([1, null])));
    // A UDF that sets nothing returns undefined.
    let m = inline(
        r#"(func (export "partita_udf") (result i32) (i32.const 0))"#,
        ScriptKind::UserDefinedFunction,
    );
    assert_eq!(
        run_wasm_udf(&script(&m), &[], &Limits::default()).unwrap(),
        None
    );
}

#[test]
fn a_shared_module_is_known_by_its_allocation() {
    // udf() = the number in its data segment.
    let udf = |n: u8| {
        let body = format!(
            r#"(data (i32.const 0) "{n}")
               (func (export "partita_udf") (result i32)
                 (drop (call $set_response_body (i32.const 0) (i32.const 1))) (i32.const 0))"#
        );
        let m = inline(&body, ScriptKind::UserDefinedFunction);
        std::sync::Arc::<[u8]>::from(m)
    };
    let cache = WasmCache::new();
    let run = |module: &[u8], shared: Option<&std::sync::Arc<[u8]>>| {
        let s = WasmScript {
            id: "udf",
            module,
            shared,
            cache: &cache,
            artifact_dir: None,
        };
        run_wasm_udf(&s, &[], &Limits::default()).unwrap()
    };
    let one = udf(1);
    assert_eq!(run(&one, Some(&one)), Some(json!(1)));
    assert_eq!(
        std::sync::Arc::strong_count(&one),
        2,
        "the cache keeps the allocation itself, not a copy"
    );
    assert_eq!(run(&one, Some(&one)), Some(json!(1)));
    assert_eq!(cache.stats().hits, 1, "{:?}", cache.stats());
    // An `Arc` of other bytes than the module is not trusted: the module
    // runs, compared with a copy.
    let two = udf(2);
    let other = udf(3);
    assert_eq!(run(&two, Some(&other)), Some(json!(2)));
    assert_eq!(std::sync::Arc::strong_count(&other), 1);
    // A module without an `Arc` is copied, so the caller's bytes can go.
    let three = udf(3).to_vec();
    assert_eq!(run(&three, None), Some(json!(3)));
    drop(three);
    assert_eq!(run(&udf(3), None), Some(json!(3)));
}

#[test]
fn artifacts_survive_a_restart_and_corruption_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let text = wat("createComment.wat");
    let run = |cache: &WasmCache| {
        let (_db, c) = container("posts", "/postId");
        post(&c, "p1");
        let s = WasmScript {
            id: "createComment",
            module: text.as_bytes(),
            shared: None,
            cache,
            artifact_dir: Some(dir.path()),
        };
        let mut txn = c.begin("p1").unwrap();
        let params = vec![json!("p1"), json!({"id": "c1"})];
        run_wasm(
            &s,
            Invocation::Procedure { params },
            &mut txn,
            &Limits::default(),
        )
        .unwrap();
        txn.commit().unwrap();
        assert_eq!(c.read_item("p1", "p1").unwrap()["commentCount"], 1);
    };
    let first = WasmCache::new();
    run(&first);
    run(&first);
    let stats = first.stats();
    assert_eq!(
        (stats.compiled, stats.loaded, stats.hits),
        (1, 0, 1),
        "{stats:?}"
    );
    let artifacts: Vec<_> = std::fs::read_dir(dir.path().join(runtime::ARTIFACT_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    assert!(artifacts[0].extension().is_some_and(|e| e == "cwasm"));

    // A new process: loads the artifact, does not compile.
    let second = WasmCache::new();
    run(&second);
    assert_eq!((second.stats().compiled, second.stats().loaded), (0, 1));

    // A flipped byte in the payload, and a torn file: detected, recompiled,
    // rewritten.
    for damage in ["flip", "tear"] {
        let mut bytes = std::fs::read(&artifacts[0]).unwrap();
        match damage {
            "flip" => {
                let i = bytes.len() - 100;
                bytes[i] ^= 0x40;
            }
            _ => bytes.truncate(bytes.len() / 2),
        }
        std::fs::write(&artifacts[0], &bytes).unwrap();
        let cache = WasmCache::new();
        run(&cache);
        let stats = cache.stats();
        assert_eq!(
            (stats.rejected, stats.compiled, stats.loaded),
            (1, 1, 0),
            "{damage}: {stats:?}"
        );
        let again = WasmCache::new();
        run(&again);
        assert_eq!(again.stats().loaded, 1, "{damage}: rewritten");
    }
}

#[test]
fn js_and_wasm_report_the_same_statuses() {
    // The same failing read in both languages: 400 with substatus 404.
    let (_db, c) = container("posts", "/postId");
    let js = run_js(
        &runtime::Script {
            id: "r",
            version: 1,
            body: "function () { __.readDocument(__.getAltLink() + '/docs/none', function (e) { if (e) throw e; }); }",
        },
        Invocation::Procedure { params: vec![] },
        &mut c.begin("p1").unwrap(),
        &Limits::default(),
    )
    .unwrap_err();
    let m = module(&wat("createComment.wat"), ScriptKind::StoredProcedure);
    let wasm = failure(call(&c, "p1", &m, vec![json!("none"), json!({})]));
    assert_eq!(
        (js.error.status(), js.error.substatus()),
        (wasm.error.status(), wasm.error.substatus())
    );
    assert_eq!(
        ok_body(call(
            &c,
            "p1",
            &procedure(r#"(func (export "partita_procedure") (result i32) (i32.const 0))"#),
            vec![]
        )),
        Value::Null
    );
}

#[test]
fn concurrent_calls_keep_the_count() {
    let (_db, c) = container("posts", "/postId");
    post(&c, "p1");
    let m = module(&wat("createComment.wat"), ScriptKind::StoredProcedure);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..25 {
                    call(&c, "p1", &m, vec![json!("p1"), json!({"text": "hi"})]).unwrap();
                }
            });
        }
    });
    assert_eq!(c.read_item("p1", "p1").unwrap()["commentCount"], 100);
    assert_eq!(count(&c, "p1"), 101);
}

#[test]
fn every_call_starts_from_the_initial_memory() {
    // Checks that memory is as the module declares it (2 pages, "7" at 100,
    // zeros elsewhere, also in a page grown by the previous call), answers
    // true or false, then dirties all of it for the next call.
    let m = module(
        &format!(
            r#"(module {IMPORTS} (memory (export "memory") 2)
              (data (i32.const 100) "7")
              (data (i32.const 200) "true")
              (data (i32.const 210) "false")
              (func (export "partita_procedure") (result i32)
                (local $ok i32)
                (local.set $ok
                  (i32.and
                    (i32.and (i32.eq (memory.size) (i32.const 2))
                             (i32.eq (i32.load8_u (i32.const 100)) (i32.const 55)))
                    (i32.eqz (i32.load8_u (i32.const 70000)))))
                (drop (memory.grow (i32.const 1)))
                (local.set $ok (i32.and (local.get $ok)
                  (i32.eqz (i32.load8_u (i32.const 140000)))))
                (if (local.get $ok)
                  (then (drop (call $set_response_body (i32.const 200) (i32.const 4))))
                  (else (drop (call $set_response_body (i32.const 210) (i32.const 5)))))
                (i32.store8 (i32.const 100) (i32.const 120))
                (i32.store8 (i32.const 70000) (i32.const 1))
                (i32.store8 (i32.const 140000) (i32.const 1))
                (i32.const 0)))"#
        ),
        ScriptKind::StoredProcedure,
    );
    let (_db, c) = container("c", "/pk");
    for round in 0..5 {
        assert_eq!(
            ok_body(call(&c, "a", &m, vec![])),
            json!(true),
            "round {round}"
        );
    }
}

#[test]
fn a_body_changed_in_place_runs_the_new_module() {
    // Two modules of the same length; the second overwrites the first's
    // bytes at the same address: the cache must not take it for the first.
    let udf = |n: u8| {
        inline(
            &format!(
                r#"(data (i32.const 0) "12")
                   (func (export "partita_udf") (result i32)
                     (drop (call $set_response_body (i32.const {n}) (i32.const 1)))
                     (i32.const 0))"#
            ),
            ScriptKind::UserDefinedFunction,
        )
    };
    let (one, two) = (udf(0), udf(1));
    assert_eq!(one.len(), two.len());
    let mut body = one.clone();
    let limits = Limits::default();
    assert_eq!(
        run_wasm_udf(&script(&body), &[], &limits).unwrap(),
        Some(json!(1))
    );
    body.copy_from_slice(&two);
    assert_eq!(
        run_wasm_udf(&script(&body), &[], &limits).unwrap(),
        Some(json!(2))
    );
    body.copy_from_slice(&one);
    assert_eq!(
        run_wasm_udf(&script(&body), &[], &limits).unwrap(),
        Some(json!(1))
    );
}

/// As in JavaScript: a document without the key property lands in the
/// call's partition, and a replace with another id renames the document.
#[test]
fn keyless_writes_and_renames_behave_as_in_javascript() {
    let (_db, c) = container("posts", "/postId");
    c.create_item("p1", json!({"id": "d0", "postId": "p1", "n": 0}), None)
        .unwrap();
    let rid = c.read_item("p1", "d0").unwrap()["_rid"].clone();
    // Creates a keyless document, then renames d0; fails with the status
    // of whichever write is refused.
    let m = procedure(
        r#"(data (i32.const 0) "{\"id\":\"keyless\"}")
           (data (i32.const 32) "d0")
           (data (i32.const 40) "{\"id\":\"renamed\",\"postId\":\"p1\",\"n\":0}")
           (func (export "partita_procedure") (result i32)
             (local $r i32)
             (local.set $r (call $create (i32.const 0) (i32.const 16)
                                         (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
             (if (i32.lt_s (local.get $r) (i32.const 0)) (then (return (local.get $r))))
             (local.set $r (call $replace (i32.const 32) (i32.const 2) (i32.const 40) (i32.const 36)
                                          (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
             (if (i32.lt_s (local.get $r) (i32.const 0)) (then (return (local.get $r))))
             (i32.const 0))"#,
    );
    call(&c, "p1", &m, vec![]).unwrap_or_else(|f| panic!("{}", f.error));
    let keyless = c.read_item("p1", "keyless").expect("stored in p1");
    assert!(keyless.get("postId").is_none(), "{keyless}");
    assert!(c.read_item("p1", "d0").is_err(), "the old id is gone");
    assert_eq!(c.read_item("p1", "renamed").unwrap()["_rid"], rid);
}
