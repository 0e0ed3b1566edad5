//! The Cosmos DB server-side API, behaviour by behaviour
//! (`shared/reference/cosmos-server-api.md`), against the real engine.

#![allow(clippy::result_large_err)]

use runtime::{Budget, Error, Invocation, Limits};
use serde_json::{Value, json};

use crate::support::js::call;
use crate::support::{self, container, failure, ok_body};

#[test]
fn function_forms_and_apply_semantics() {
    let (_db, c) = container("posts", "/postId");
    for body in [
        "function f(a, b) { getContext().getResponse().setBody([a, b]); }",
        "function (a, b) { getContext().getResponse().setBody([a, b]); };",
        "(a, b) => { getContext().getResponse().setBody([a, b]); }",
        "  // leading comment\n function (a, b) { getContext().getResponse().setBody([a, b]); } ;; ",
    ] {
        assert_eq!(
            ok_body(call(&c, "p1", body, vec![json!(1), json!("two")])),
            json!([1, "two"]),
            "{body}"
        );
    }
    // No params: typeof param === "undefined"; the default body is "".
    assert_eq!(
        ok_body(call(
            &c,
            "p1",
            "function (p) { getContext().getResponse().setBody(typeof p); }",
            vec![]
        )),
        json!("undefined")
    );
    assert_eq!(ok_body(call(&c, "p1", "function () {}", vec![])), json!(""));
}

/// One sandbox serves calls on several collections: each call's links are
/// its own collection's, and only they name it.
#[test]
fn links_are_the_calls_collections() {
    let db = engine::Database::in_memory();
    let posts = db.create_container("posts", "/postId").unwrap();
    let other = db.create_container("other", "/postId").unwrap();
    let body = "function (link) { var c = getContext().getCollection(); getContext().getResponse().setBody([c.getSelfLink(), c.getAltLink(), c.createDocument(link || c.getAltLink(), {})]); }";
    let links = |c: &engine::Container| ok_body(call(c, "p1", body, vec![]));
    let first = links(&posts);
    let second = links(&other);
    assert_ne!(first[0], second[0]);
    assert_ne!(first[1], second[1]);
    assert_eq!(links(&posts), first);
    assert_eq!(links(&other), second);
    for link in [&second[0], &second[1]] {
        let f = failure(call(&posts, "p1", body, vec![link.clone()]));
        assert_eq!(f.error.status(), 400, "{link}: {}", f.error);
    }
}

/// A procedure's request body is its parameters, as an array, and the
/// arguments it gets are independent of it: changing one does not change
/// the other.
#[test]
fn a_procedures_request_body_is_its_parameters() {
    let (_db, c) = container("posts", "/postId");
    let body = "function (a, b) { a.n = 2; var r = getContext().getRequest().getBody(); getContext().getResponse().setBody([r, a, b]); }";
    assert_eq!(
        ok_body(call(&c, "p1", body, vec![json!({"n": 1}), json!("two")])),
        json!([[{"n": 1}, "two"], {"n": 2}, "two"])
    );
}

fn seed(c: &engine::Container) {
    for i in 0..5 {
        c.create_item(
            "p1",
            json!({"id": format!("d{i}"), "postId": "p1", "n": i}),
            None,
        )
        .unwrap();
    }
}

#[test]
fn response_body_rules() {
    let (_db, c) = container("posts", "/postId");
    let r = |body: &str, params| ok_body(call(&c, "p1", body, params));
    assert_eq!(
        r(
            "function () { for (var i = 0; i < 1000; i++) getContext().getResponse().setBody(i); }",
            vec![]
        ),
        json!(999)
    );
    assert_eq!(
        r(
            "function () { for (var i = 0; i < 10; i++) getContext().getResponse().appendValue('Body', i); }",
            vec![]
        ),
        json!("0123456789")
    );
    assert_eq!(
        r(
            "function (p) { getContext().getResponse().setBody(p); }",
            vec![json!(null)]
        ),
        json!(null)
    );
    let f = failure(call(
        &c,
        "p1",
        "function () { getContext().getResponse().setValue('Test', 1); }",
        vec![],
    ));
    assert_eq!(f.error.substatus(), Some(400));
    let f = failure(call(
        &c,
        "p1",
        "function () { getContext().getRequest().setBody(1); }",
        vec![],
    ));
    assert_eq!(f.error.substatus(), Some(403));
}

#[test]
fn errors_numbers_and_statuses() {
    let (_db, c) = container("posts", "/postId");
    let f = failure(call(
        &c,
        "p1",
        "function () { throw new Error(1234, 'Error 1234'); }",
        vec![],
    ));
    assert_eq!((f.error.status(), f.error.substatus()), (400, Some(1234)));
    assert!(f.error.to_string().contains("Error 1234"));
    let f = failure(call(
        &c,
        "p1",
        "function () { throw new Error('plain'); }",
        vec![],
    ));
    assert_eq!((f.error.status(), f.error.substatus()), (400, Some(0)));
    let f = failure(call(&c, "p1", "function () { throw 'a string'; }", vec![]));
    assert_eq!((f.error.status(), f.error.substatus()), (400, Some(0)));
    let f = failure(call(&c, "p1", "serverScript() { var x = 10; }", vec![]));
    assert_eq!((f.error.status(), f.error.substatus()), (400, Some(65535)));
    // err.number, ErrorCodes, instanceof, and subclassing.
    let body = "function () { var e = new Error(409, 'msg'); class Mine extends Error {} var m = new Mine('x'); getContext().getResponse().setBody([e.number, e.message, e instanceof Error, ErrorCodes.Conflict, m instanceof Mine, m instanceof Error, m.message]); }";
    assert_eq!(
        ok_body(call(&c, "p1", body, vec![])),
        json!([409, "msg", true, 409, true, true, "x"])
    );
    // An error handled in a callback does not abort; the write before it commits.
    c.create_item("p1", json!({"id": "dup", "postId": "p1"}), None)
        .unwrap();
    let body = "function () { var c = getContext().getCollection(); c.createDocument(c.getSelfLink(), {id: 'kept', postId: 'p1'}); c.createDocument(c.getSelfLink(), {id: 'dup', postId: 'p1'}, function (err) { getContext().getResponse().setBody(err.number === ErrorCodes.Conflict); }); }";
    assert_eq!(ok_body(call(&c, "p1", body, vec![])), json!(true));
    assert!(c.read_item("p1", "kept").is_ok());
    // Argument checks throw 400 synchronously.
    for body in [
        "function () { getContext().getCollection().createDocument(getContext().getCollection().getSelfLink()); }",
        "function () { var c = getContext().getCollection(); c.createDocument(c.getSelfLink(), {}, 'options'); }",
        "function () { var c = getContext().getCollection(); c.createDocument(c.getSelfLink(), {}, {}, 'callback'); }",
        "function () { var c = getContext().getCollection(); c.createDocument(c.getSelfLink(), 42); }",
        "function () { var c = getContext().getCollection(); c.queryDocuments(c.getSelfLink(), 42); }",
    ] {
        assert_eq!(
            failure(call(&c, "p1", body, vec![])).error.substatus(),
            Some(400),
            "{body}"
        );
    }
}

#[test]
fn callbacks_run_after_the_turn_in_order() {
    let (_db, c) = container("posts", "/postId");
    seed(&c);
    let body = r#"function () {
        var c = getContext().getCollection(), log = [];
        log.push(c.readDocument(c.getAltLink() + "/docs/d1", function (err, doc) { log.push("cb1:" + doc.n); }));
        log.push(c.readDocument(c.getAltLink() + "/docs/d2", {}, function (err, doc) { log.push("cb2:" + doc.n); getContext().getResponse().setBody(log); }));
        log.push("end");
    }"#;
    assert_eq!(
        ok_body(call(&c, "p1", body, vec![])),
        json!([true, true, "end", "cb1:1", "cb2:2"])
    );
}

#[test]
fn ids_are_generated_on_a_shallow_clone() {
    let (_db, c) = container("posts", "/postId");
    let body = r#"function () {
        var c = getContext().getCollection(), doc = {postId: "p1", id: ""};
        c.createDocument(c.getSelfLink(), doc, function (err, created) {
            c.createDocument(c.getSelfLink(), {postId: "p1"}, {disableAutomaticIdGeneration: true}, function (err2) {
                getContext().getResponse().setBody([doc.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(created.id), err2.number]);
            });
        });
    }"#;
    assert_eq!(
        ok_body(call(&c, "p1", body, vec![])),
        json!(["", true, 400])
    );
}

#[test]
fn queries_feeds_and_paging() {
    let (_db, c) = container("posts", "/postId");
    seed(&c);
    let body = r#"function () {
        var c = getContext().getCollection(), out = {};
        c.queryDocuments(c.getSelfLink(), "SELECT VALUE COUNT(1) FROM f", function (err, r) { out.count = r[0]; });
        c.queryDocuments(c.getSelfLink(), {query: "SELECT VALUE d.n FROM d WHERE d.n >= @min", parameters: [{name: "@min", value: 3}]}, {setEnableCrossPartitionQuery: true}, function (err, r) { out.param = r; });
        var pages = [];
        function page(cont) {
            c.readDocuments(c.getSelfLink(), {pageSize: 2, continuation: cont}, function (err, docs, opts) {
                pages.push(docs.length);
                if (opts.continuation) page(opts.continuation); else { out.pages = pages; getContext().getResponse().setBody(out); }
            });
        }
        page();
        c.queryDocuments(c.getSelfLink(), "SELEC nonsense", function (err) { out.syntax = err.number; });
    }"#;
    let out = ok_body(call(&c, "p1", body, vec![]));
    assert_eq!(
        out,
        json!({"count": 5, "param": [3, 4], "syntax": 400, "pages": [2, 2, 1]})
    );
}

#[test]
fn etag_and_replace_delete() {
    let (_db, c) = container("posts", "/postId");
    seed(&c);
    let body = r#"function () {
        var c = getContext().getCollection();
        c.readDocument(c.getAltLink() + "/docs/d0", function (err, doc) {
            doc.n = 100;
            c.replaceDocument(doc._self, doc, {etag: "\"stale\""}, function (err) {
                var stale = err.number;
                c.replaceDocument(doc._self, doc, {etag: doc._etag}, function (err, replaced) {
                    c.deleteDocument(replaced._self, function (err, opts) {
                        getContext().getResponse().setBody([stale, replaced.n, err === undefined, typeof opts]);
                    });
                });
            });
        });
    }"#;
    assert_eq!(
        ok_body(call(&c, "p1", body, vec![])),
        json!([412, 100, true, "object"])
    );
    assert!(c.read_item("p1", "d0").is_err());
}

#[test]
fn promises_and_async_await() {
    let (_db, c) = container("posts", "/postId");
    seed(&c);
    let body = r#"async function () {
        const c = getContext().getCollection();
        const read = (id) => new Promise((resolve, reject) => {
            const ok = c.readDocument(`${c.getAltLink()}/docs/${id}`, (err, doc) => err ? reject(err) : resolve(doc));
            if (!ok) reject(new Error(ErrorCodes.RequestEntityTooLarge, "not accepted"));
        });
        const { n: a } = await read("d1");
        const { n: b } = await read("d2");
        let missing;
        try { await read("nope"); } catch (e) { missing = e.number; }
        getContext().getResponse().setBody({ sum: a + b, missing });
    }"#;
    assert_eq!(
        ok_body(call(&c, "p1", body, vec![])),
        json!({"sum": 3, "missing": 404})
    );
    // The documentation's pattern: main().catch(err => getContext().abort(err)).
    let body = "function () { async function main() { throw new Error(409, 'async'); } main().catch(err => getContext().abort(err)); }";
    let f = failure(call(&c, "p1", body, vec![]));
    assert_eq!(f.error.substatus(), Some(409));
}

#[test]
fn console_log_is_captured_even_on_failure() {
    let (_db, c) = container("posts", "/postId");
    let out = call(
        &c,
        "p1",
        "function () { console.log('The value of %s is %s.', 'x', 1); console.log({a: [1]}); }",
        vec![],
    )
    .unwrap();
    assert_eq!(out.logs, "The value of x is 1.{\"a\":[1]}");
    let f = failure(call(
        &c,
        "p1",
        "function () { console.log('before'); throw new Error(1, 'x'); }",
        vec![],
    ));
    assert_eq!(f.logs, "before");
    assert!(out.stats.instructions > 0);
}

#[test]
fn triggers_read_and_change_bodies() {
    use host_api::TriggerOperation;
    use runtime::{Invocation, Limits, Script, run_js};
    let (_db, c) = container("posts", "/postId");
    let run = |body: &str, invocation| {
        let mut txn = c.begin("p1").unwrap();
        let script = Script {
            id: "t",
            version: support::version_of(body),
            body,
        };
        run_js(&script, invocation, &mut txn, &Limits::default())
    };
    // Pre-trigger: setBody captures by reference; no getResponse; operation type.
    let pre = "function () { var r = getContext().getRequest(); var d = r.getBody(); d.id = d.id.toUpperCase() + 't1'; r.setBody(d); d.op = r.getOperationType(); d.hasResponse = typeof getContext().getResponse; }";
    let out = run(
        pre,
        Invocation::PreTrigger {
            request_body: json!({"id": "doc1", "postId": "p1"}),
            operation: TriggerOperation::Create,
        },
    )
    .unwrap();
    assert_eq!(
        out.body.unwrap(),
        json!({"id": "DOC1t1", "postId": "p1", "op": "Create", "hasResponse": "undefined"})
    );
    let f = run(
        "function () { getContext().getResponse(); }",
        Invocation::PreTrigger {
            request_body: json!({}),
            operation: TriggerOperation::Create,
        },
    )
    .unwrap_err();
    assert_eq!(f.error.status(), 400);
    // Post-trigger: the response body can change; the request is read-only.
    let post = "function () { var b = getContext().getResponse().getBody(); b.id = b.id + 'response2'; getContext().getResponse().setBody(b); try { getContext().getRequest().setBody({}); } catch (e) { b.readOnly = e.number; } }";
    let out = run(
        post,
        Invocation::PostTrigger {
            request_body: json!({"id": "x"}),
            response_body: json!({"id": "x", "_etag": "e"}),
            operation: TriggerOperation::Upsert,
        },
    )
    .unwrap();
    assert_eq!(
        out.body.unwrap(),
        json!({"id": "xresponse2", "_etag": "e", "readOnly": 403})
    );
}

#[test]
fn fluent_query_api() {
    let (_db, c) = container("posts", "/postId");
    seed(&c);
    let body = r#"function () {
        var out = {};
        var r = __.chain().filter(function (d) { return d.n % 2 === 0; }).sortByDescending(function (d) { return d.n; }).pluck("n").value(function (err, items) { out.chain = items; });
        out.accepted = r.isAccepted;
        __.map(function (d) { return [d.n, d.n]; }, function (err, items) {
            __.chain().map(function (d) { return [d.n]; }).flatten().value({pageSize: 2}, function (err, flat, opts) { out.flat = flat; out.cont = opts.continuation; getContext().getResponse().setBody(out); });
        });
        try { __.filter(); } catch (e) { out.missing = e.number; }
    }"#;
    assert_eq!(
        ok_body(call(&c, "p1", body, vec![])),
        json!({"accepted": true, "missing": 400, "chain": [4, 2, 0], "flat": [0, 1], "cont": "2"})
    );
    // With no callback, results are appended to the response body.
    let body = "function () { __.filter(function (d) { return d.n === 1; }); }";
    let out = ok_body(call(&c, "p1", body, vec![]));
    let parsed: serde_json::Value = serde_json::from_str(out.as_str().unwrap()).unwrap();
    assert_eq!(parsed[0]["id"], "d1");
}

/// A collection whose reads fail with a chosen host error.
struct FailingReads<'a> {
    inner: &'a mut dyn host_api::Collection,
    error: host_api::HostError,
}

impl host_api::Collection for FailingReads<'_> {
    fn container_id(&self) -> &str {
        self.inner.container_id()
    }
    fn partition_key(&self) -> &host_api::PartitionKey {
        self.inner.partition_key()
    }
    fn self_link(&self) -> String {
        self.inner.self_link()
    }
    fn alt_link(&self) -> String {
        self.inner.alt_link()
    }
    fn resolve_document_link(&self, link: &str) -> Result<String, host_api::HostError> {
        self.inner.resolve_document_link(link)
    }
    fn read(&mut self, _id: &str) -> Result<host_api::Document, host_api::HostError> {
        Err(self.error.clone())
    }
    fn read_feed(
        &mut self,
        page_size: Option<usize>,
        continuation: Option<&str>,
    ) -> Result<host_api::Page, host_api::HostError> {
        self.inner.read_feed(page_size, continuation)
    }
    fn create(&mut self, doc: Value) -> Result<host_api::Document, host_api::HostError> {
        self.inner.create(doc)
    }
    fn replace(
        &mut self,
        id: &str,
        doc: Value,
        options: host_api::WriteOptions<'_>,
    ) -> Result<host_api::Document, host_api::HostError> {
        self.inner.replace(id, doc, options)
    }
    fn upsert(
        &mut self,
        doc: Value,
        options: host_api::WriteOptions<'_>,
    ) -> Result<host_api::Document, host_api::HostError> {
        self.inner.upsert(doc, options)
    }
    fn delete(
        &mut self,
        id: &str,
        options: host_api::WriteOptions<'_>,
    ) -> Result<(), host_api::HostError> {
        self.inner.delete(id, options)
    }
    fn query(
        &mut self,
        request: host_api::QueryRequest<'_>,
    ) -> Result<host_api::Page, host_api::HostError> {
        self.inner.query(request)
    }
    fn stats(&self) -> host_api::Statistics {
        self.inner.stats()
    }
}

#[test]
fn a_fatal_host_error_ends_the_call_uncatchably() {
    use host_api::{ErrorCode, HostError};
    let (_db, c) = container("things", "/pk");
    // The callback swallows every error and records that it saw one.
    let body = "function f() { var coll = getContext().getCollection();
        coll.readDocument(coll.getAltLink() + '/docs/x', function (err) {
            console.log('callback saw ' + (err ? err.number : 'nothing'));
            coll.createDocument(coll.getSelfLink(), {id: 'marker', pk: 'a'});
        }); }";
    let script = runtime::Script {
        id: "fatal",
        version: 1,
        body,
    };
    let run = |error: HostError| {
        let mut txn = c.begin("a").expect("begin");
        let mut failing = FailingReads {
            inner: &mut txn,
            error,
        };
        let res = runtime::run_js(
            &script,
            runtime::Invocation::Procedure { params: vec![] },
            &mut failing,
            &Limits::default(),
        );
        let marker = txn.get_item("marker").is_some();
        (res, marker)
    };

    // Handed to the callback: the script sees 429, handles it, goes on.
    let (res, marker) = run(HostError::new(ErrorCode::TOO_MANY_REQUESTS, "throttled"));
    let output = res.expect("the script handles the error");
    assert!(output.logs.contains("callback saw 429"), "{}", output.logs);
    assert!(marker);

    // Fatal: the call ends with the host's status; the callback never runs.
    let (res, marker) = run(HostError::abort(ErrorCode::TOO_MANY_REQUESTS, "throttled"));
    let failure = res.expect_err("a fatal error ends the call");
    assert!(
        matches!(&failure.error, runtime::Error::Host(e) if e.code == ErrorCode::TOO_MANY_REQUESTS),
        "{:?}",
        failure.error
    );
    assert_eq!(failure.error.status(), 429);
    assert!(!failure.logs.contains("callback saw"), "{}", failure.logs);
    assert!(!marker);
}

#[test]
fn a_document_without_the_key_property_lands_in_the_calls_partition() {
    let (_db, c) = container("posts", "/postId");
    let body = r#"function () {
        var coll = getContext().getCollection();
        var ok = coll.createDocument(coll.getSelfLink(), {id: "keyless"}, function (err) {
            if (err) throw err;
        });
        getContext().getResponse().setBody(ok);
    }"#;
    assert_eq!(ok_body(call(&c, "p1", body, vec![])), json!(true));
    let stored = c.read_item("p1", "keyless").expect("stored in p1");
    assert!(
        stored.get("postId").is_none(),
        "stored as written: {stored}"
    );
    // A document with another key is still another partition's.
    let other = r#"function () {
        var coll = getContext().getCollection();
        coll.createDocument(coll.getSelfLink(), {id: "x", postId: "p2"}, function (err) {
            if (err) throw err;
        });
    }"#;
    assert_eq!(failure(call(&c, "p1", other, vec![])).error.status(), 400);
}

#[test]
fn a_replace_with_another_id_renames_the_document() {
    let (_db, c) = container("posts", "/postId");
    seed(&c);
    let rid = c.read_item("p1", "d0").unwrap()["_rid"].clone();
    let rename = r#"function (from, to) {
        var coll = getContext().getCollection();
        coll.readDocument(coll.getAltLink() + "/docs/" + from, function (err, doc) {
            if (err) throw err;
            doc.id = to;
            coll.replaceDocument(doc._self, doc, function (err, renamed) {
                if (err) throw err;
                getContext().getResponse().setBody(renamed.id);
            });
        });
    }"#;
    assert_eq!(
        ok_body(call(&c, "p1", rename, vec![json!("d0"), json!("renamed")])),
        json!("renamed")
    );
    assert!(c.read_item("p1", "d0").is_err(), "the old id is gone");
    let renamed = c.read_item("p1", "renamed").unwrap();
    assert_eq!(renamed["_rid"], rid, "the document keeps its _rid");
    assert_eq!(renamed["n"], 0);
    // Onto a taken id: 409, and nothing changes.
    let f = failure(call(&c, "p1", rename, vec![json!("d1"), json!("d2")]));
    assert_eq!(f.error.substatus(), Some(409), "{}", f.error);
    assert!(c.read_item("p1", "d1").is_ok() && c.read_item("p1", "d2").is_ok());
}

/// A procedure that returns the documents a query or a read gave it gets
/// them back as stored; one that changes them, even after `setBody`, gets
/// them back changed; and returning them unchanged is charged to the
/// memory limit as converting them is.
#[test]
fn returned_results_are_as_given_or_as_changed() {
    let (_db, c) = container("posts", "/postId");
    seed(&c);
    let query = |callback: &str| {
        format!(
            r#"function () {{ var c = getContext().getCollection(), r = getContext().getResponse();
            c.queryDocuments(c.getSelfLink(), "SELECT * FROM d", function (err, docs) {{ {callback} }}); }}"#
        )
    };
    let stored = ok_body(call(&c, "p1", &query("r.setBody(docs);"), vec![]));
    let Value::Array(docs) = &stored else {
        panic!("an array: {stored}")
    };
    assert_eq!(docs.len(), 5);
    for (i, doc) in docs.iter().enumerate() {
        let read = c.read_item("p1", &format!("d{i}")).unwrap();
        assert_eq!(
            serde_json::to_string(doc).unwrap(),
            serde_json::to_string(read.value()).unwrap()
        );
    }
    let changed = ok_body(call(
        &c,
        "p1",
        &query("r.setBody(docs); docs[1].n = 'changed'; delete docs[2].id; docs.pop();"),
        vec![],
    ));
    let mut expected = docs.clone();
    expected[1]["n"] = json!("changed");
    expected[2].as_object_mut().unwrap().shift_remove("id");
    expected.pop();
    assert_eq!(
        serde_json::to_string(&changed).unwrap(),
        serde_json::to_string(&expected).unwrap()
    );
    let read = r#"function () { var c = getContext().getCollection();
        c.readDocument(c.getAltLink() + "/docs/d3", function (err, doc) {
            getContext().getResponse().setBody(doc); doc.n = 7; }); }"#;
    assert_eq!(ok_body(call(&c, "p1", read, vec![]))["n"], json!(7));

    c.create_item(
        "p1",
        json!({"id": "big", "postId": "p1", "text": "x".repeat(100_000)}),
        None,
    )
    .unwrap();
    let limits = Limits {
        max_memory_bytes: 64 << 10,
        ..Limits::default()
    };
    let f = failure(support::js::call_with(
        &c,
        "p1",
        "sproc",
        &query("r.setBody(docs);"),
        Invocation::Procedure { params: vec![] },
        &limits,
    ));
    assert!(
        matches!(f.error, Error::Budget(Budget::Memory { .. })),
        "{:?}",
        f.error
    );
}
