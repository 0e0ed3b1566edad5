//! What a script writes is stored as written or refused: a lone UTF-16
//! surrogate (JavaScript strings are UTF-16, JSON text is UTF-8) is a 400
//! naming the property, in a document, a response body, or the JSON text
//! of a string document; paired surrogates round-trip. `JSON.stringify`
//! keeps its well-formed `\udc00` escapes.

use serde_json::json;

use crate::support::js::call;
use crate::support::{container, failure, ok_body};

#[test]
fn a_lone_surrogate_in_a_document_is_a_400_naming_the_property() {
    let (_db, c) = container("posts", "/postId");
    for (statement, path) in [
        (
            "c.createDocument(c.getSelfLink(), { id: 'x', postId: 'p1', a: { b: '\\udc00' } });",
            "the property /a/b",
        ),
        (
            "c.upsertDocument(c.getSelfLink(), { id: 'x', postId: 'p1', list: [0, 'ok', 'x\\ud800'] });",
            "the property /list/2",
        ),
        (
            "var d = { id: 'x', postId: 'p1' }; d['k\\udfff'] = 1; c.createDocument(c.getSelfLink(), d);",
            "the name of the property /k\\uDFFF",
        ),
        (
            "getContext().getResponse().setBody({ r: 'a\\udc00' });",
            "the property /r",
        ),
        (
            "getContext().getResponse().setBody('\\ud800');",
            "the value",
        ),
    ] {
        let body = format!("function () {{ var c = getContext().getCollection(); {statement} }}");
        let f = failure(call(&c, "p1", &body, vec![]));
        assert_eq!(f.error.status(), 400, "{statement}: {}", f.error);
        let message = f.error.to_string();
        assert!(
            message.contains(&format!("{path} holds a lone UTF-16 surrogate")),
            "{statement}: {message}"
        );
        assert!(c.read_item("p1", "x").is_err(), "{statement}");
    }
    // The script can catch it, as any error a collection method throws.
    let body = "function () { var c = getContext().getCollection(); try { c.createDocument(c.getSelfLink(), { id: 'x', postId: 'p1', s: '\\udc00' }); } catch (e) { getContext().getResponse().setBody(e instanceof TypeError); } }";
    assert_eq!(ok_body(call(&c, "p1", body, vec![])), json!(true));
}

#[test]
fn json_stringify_escapes_and_the_text_is_refused_as_a_document() {
    let (_db, c) = container("posts", "/postId");
    let body = "function () { getContext().getResponse().setBody([JSON.stringify('\\udc00'), JSON.stringify({ k: 'a\\ud83d\\ude00' })]); }";
    assert_eq!(
        ok_body(call(&c, "p1", body, vec![])),
        json!(["\"\\udc00\"", "{\"k\":\"a\u{1F600}\"}"])
    );
    // The escape is not valid JSON text for a document (serde_json refuses
    // a lone surrogate escape), so the string form is refused as well.
    let body = "function () { var c = getContext().getCollection(); c.createDocument(c.getSelfLink(), JSON.stringify({ id: 'x', postId: 'p1', s: '\\udc00' })); }";
    let f = failure(call(&c, "p1", body, vec![]));
    assert_eq!(f.error.status(), 400, "{}", f.error);
    assert!(c.read_item("p1", "x").is_err());
}

#[test]
fn paired_surrogates_round_trip() {
    let (_db, c) = container("posts", "/postId");
    let body = "function () { var c = getContext().getCollection(); c.createDocument(c.getSelfLink(), { id: 'x', postId: 'p1', s: '\\ud83d\\ude00', '\\ud83d\\ude01': 1 }, function (e, d) { if (e) throw e; getContext().getResponse().setBody(d.s === '\\ud83d\\ude00' && d['\\ud83d\\ude01'] === 1); }); }";
    assert_eq!(ok_body(call(&c, "p1", body, vec![])), json!(true));
    let stored = c.read_item("p1", "x").expect("stored");
    assert_eq!(stored.value()["s"], json!("\u{1F600}"));
    assert_eq!(stored.value()["\u{1F601}"], json!(1));
}
