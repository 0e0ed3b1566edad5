//! The ABI's `read_member` and `replace_member` against the real engine:
//! one member read or set without the document crossing the boundary,
//! stored as a read, change and replace would store it, and a read then a
//! set costing one read and one replace (as JavaScript's would).

use engine::{Container, Database};
use host_api::ScriptKind;
use runtime::Failure;
use serde_json::{Value, json};

use crate::support::{self, wasm};

const IMPORTS: &str = r#"
  (import "partita_v1" "set_response_body" (func $set_body (param i32 i32) (result i32)))
  (import "partita_v1" "read_member"
    (func $read_member (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "replace_member"
    (func $replace_member (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
"#;

/// A WAT string literal of `text` (every byte escaped).
fn literal(text: &str) -> String {
    text.bytes().map(|b| format!("\\{b:02x}")).collect()
}

/// A procedure that reads member `key` of document `id`: sets it as the
/// response body, fails with substatus 7 when it is absent, and with
/// the status as substatus on an error.
fn read_member(id: &str, key: &str) -> Vec<u8> {
    let body = format!(
        r#"(memory (export "memory") 1)
          (data (i32.const 16) "{}") (data (i32.const 64) "{}")
          (func (export "partita_procedure") (result i32)
            (local $r i32)
            (local.set $r (call $read_member (i32.const 16) (i32.const {}) (i32.const 64)
              (i32.const {}) (i32.const 256) (i32.const 1024)))
            (if (i32.lt_s (local.get $r) (i32.const 0))
              (then (return (i32.sub (i32.const 0) (local.get $r)))))
            (if (i32.eqz (local.get $r)) (then (return (i32.const 7))))
            (drop (call $set_body (i32.const 256) (local.get $r)))
            (i32.const 0))"#,
        literal(id),
        literal(key),
        id.len(),
        key.len()
    );
    module(&body)
}

/// A procedure that sets member `key` of document `id` to the JSON
/// text `value` with `options`, without asking for the stored
/// document; fails with the status as substatus on an error.
fn replace_member(id: &str, key: &str, value: &str, options: &str) -> Vec<u8> {
    let body = format!(
        r#"(memory (export "memory") 1)
          (data (i32.const 16) "{}") (data (i32.const 64) "{}")
          (data (i32.const 128) "{}") (data (i32.const 512) "{}")
          (func (export "partita_procedure") (result i32)
            (local $r i32)
            (local.set $r (call $replace_member (i32.const 16) (i32.const {}) (i32.const 64)
              (i32.const {}) (i32.const 128) (i32.const {}) (i32.const 512) (i32.const {})
              (i32.const 0) (i32.const 0)))
            (if (i32.lt_s (local.get $r) (i32.const 0))
              (then (return (i32.sub (i32.const 0) (local.get $r)))))
            (i32.const 0))"#,
        literal(id),
        literal(key),
        literal(value),
        literal(options),
        id.len(),
        key.len(),
        value.len(),
        options.len()
    );
    module(&body)
}

fn module(body: &str) -> Vec<u8> {
    wasm::module(
        &format!("(module {IMPORTS} {body})"),
        ScriptKind::StoredProcedure,
    )
}

fn container() -> (Database, Container) {
    let (db, c) = support::container("docs", "/pk");
    c.create_item(
        "p",
        json!({"id": "d1", "pk": "p", "a": 1, "n": {"x": [1, 2]}, "z": true}),
        None,
    )
    .expect("document");
    (db, c)
}

/// Calls `module` in a transaction committed on success.
#[allow(clippy::result_large_err)]
fn call(c: &Container, module: &[u8]) -> Result<Option<Value>, Failure> {
    wasm::call(c, "p", module, Vec::new()).map(|out| out.body)
}

fn substatus(res: Result<Option<Value>, Failure>) -> Option<u16> {
    res.expect_err("the call fails").error.substatus()
}

fn stored(c: &Container) -> Value {
    c.read_item("p", "d1").expect("read").value().clone()
}

/// The document without its system properties.
fn members(doc: &Value) -> Value {
    let mut doc = doc.clone();
    if let Value::Object(map) = &mut doc {
        map.retain(|k, _| !k.starts_with('_'));
    }
    doc
}

#[test]
fn read_member_sends_one_member_or_nothing() {
    let (_db, c) = container();
    assert_eq!(
        call(&c, &read_member("d1", "n")).unwrap(),
        Some(json!({"x": [1, 2]}))
    );
    assert_eq!(
        call(&c, &read_member("d1", "id")).unwrap(),
        Some(json!("d1"))
    );
    assert_eq!(substatus(call(&c, &read_member("d1", "absent"))), Some(7));
    assert_eq!(substatus(call(&c, &read_member("d9", "n"))), Some(404));
}

#[test]
fn replace_member_changes_one_member_in_place_or_appends_it() {
    let (_db, c) = container();
    let before = stored(&c);
    call(&c, &replace_member("d1", "a", r#"{"b":[true,null]}"#, "")).unwrap();
    let after = stored(&c);
    assert_eq!(
        members(&after).to_string(),
        r#"{"id":"d1","pk":"p","a":{"b":[true,null]},"n":{"x":[1,2]},"z":true}"#,
        "in its place, the rest as it was"
    );
    assert_ne!(after["_etag"], before["_etag"], "a new version");
    call(&c, &replace_member("d1", "new", "2.5", "")).unwrap();
    assert_eq!(
        members(&stored(&c)).to_string(),
        r#"{"id":"d1","pk":"p","a":{"b":[true,null]},"n":{"x":[1,2]},"z":true,"new":2.5}"#,
        "a new member goes last, as a JavaScript assignment puts it"
    );
}

#[test]
fn replace_member_stores_what_read_change_replace_stores() {
    let (_db, c) = container();
    let (_db2, c2) = container();
    call(&c, &replace_member("d1", "n", "100.0", "")).unwrap();
    // The same change through the whole document.
    let mut txn = c2.begin("p").expect("begin");
    let mut doc = host_api::Collection::read(&mut txn, "d1")
        .expect("read")
        .value()
        .clone();
    doc["n"] = json!(100);
    host_api::Collection::replace(&mut txn, "d1", doc, host_api::WriteOptions::default())
        .expect("replace");
    txn.commit().expect("commit");
    let (ours, theirs) = (stored(&c), stored(&c2));
    assert_eq!(members(&ours).to_string(), members(&theirs).to_string());
    assert_eq!(
        ours["n"].to_string(),
        "100",
        "floats stored as JavaScript stores them"
    );
}

#[test]
fn replace_member_fails_as_replace_does_and_changes_nothing() {
    let (_db, c) = container();
    let before = stored(&c);
    let etag = before["_etag"].as_str().unwrap().to_owned();
    for (module, status) in [
        (replace_member("d9", "a", "1", ""), 404),
        (replace_member("d1", "a", "{not json", ""), 400),
        (replace_member("d1", "id", "7", ""), 400),
        (
            replace_member("d1", "a", "1", r#"{"etag":"\"stale\""}"#),
            412,
        ),
        (replace_member("d1", "a", "1", r#"{"etag":7}"#), 400),
    ] {
        assert_eq!(substatus(call(&c, &module)), Some(status));
    }
    assert_eq!(stored(&c), before, "nothing was written");
    let options = format!(r#"{{"etag":{}}}"#, json!(etag));
    call(&c, &replace_member("d1", "a", "2", &options)).unwrap();
    assert_eq!(stored(&c)["a"], 2, "the current etag matches");
    // Setting the id is a replace with another id: a rename, as in
    // JavaScript.
    call(&c, &replace_member("d1", "id", r#""d2""#, "")).unwrap();
    assert!(c.read_item("p", "d1").is_err());
    assert_eq!(c.read_item("p", "d2").expect("renamed")["a"], 2);
}

/// One host call of [`steps`].
enum Step<'a> {
    Read(&'a str, &'a str),
    Set(&'a str, &'a str, &'a str),
}

/// A procedure making `steps` in order, failing with the status as
/// substatus at the first error.
fn steps(steps: &[Step<'_>]) -> Vec<u8> {
    let mut data = String::new();
    let mut code = String::new();
    let mut at = 16;
    let mut place = |text: &str| {
        data.push_str(&format!("(data (i32.const {at}) \"{}\")", literal(text)));
        let placed = format!("(i32.const {at}) (i32.const {})", text.len());
        at += text.len() + 1;
        placed
    };
    for step in steps {
        let call = match step {
            Step::Read(id, key) => format!(
                "(call $read_member {} {} (i32.const 4096) (i32.const 1024))",
                place(id),
                place(key)
            ),
            Step::Set(id, key, value) => format!(
                "(call $replace_member {} {} {} (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))",
                place(id),
                place(key),
                place(value)
            ),
        };
        code.push_str(&format!(
            "(local.set $r {call})
             (if (i32.lt_s (local.get $r) (i32.const 0))
               (then (return (i32.sub (i32.const 0) (local.get $r)))))"
        ));
    }
    module(&format!(
        r#"(memory (export "memory") 1) {data}
          (func (export "partita_procedure") (result i32) (local $r i32) {code} (i32.const 0))"#
    ))
}

/// Runs `module` and returns the collection's statistics of the call
/// (its document counters; the script counters zeroed).
fn stats(c: &Container, module: &[u8]) -> host_api::Statistics {
    let stats = wasm::call(c, "p", module, Vec::new())
        .unwrap_or_else(|f| panic!("{}", f.error))
        .stats;
    host_api::Statistics::default().with_documents(stats)
}

#[test]
fn a_member_read_then_set_is_one_read_and_one_replace() {
    let (_db, c) = container();
    let s = stats(
        &c,
        &steps(&[Step::Read("d1", "a"), Step::Set("d1", "a", "2")]),
    );
    assert_eq!(
        (s.docs_read, s.docs_written),
        (1, 1),
        "as JavaScript's read and replace"
    );
    assert_eq!(stored(&c)["a"], 2);
    // Another document, or a write in between: read again, never a
    // stale copy.
    let s = stats(
        &c,
        &steps(&[
            Step::Read("d1", "a"),
            Step::Set("d1", "a", "3"),
            Step::Set("d1", "z", "4"),
        ]),
    );
    assert_eq!((s.docs_read, s.docs_written), (2, 2));
    let doc = stored(&c);
    assert_eq!(
        (&doc["a"], &doc["z"]),
        (&json!(3), &json!(4)),
        "both changes kept"
    );
    c.create_item("p", json!({"id": "d2", "pk": "p"}), None)
        .expect("document");
    let s = stats(
        &c,
        &steps(&[Step::Read("d1", "a"), Step::Set("d2", "a", "5")]),
    );
    assert_eq!((s.docs_read, s.docs_written), (2, 1));
    assert_eq!(c.read_item("p", "d2").unwrap().value()["a"], 5);
    assert_eq!(stored(&c)["a"], 3);
}
