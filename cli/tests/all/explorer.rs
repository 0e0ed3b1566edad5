//! The Data Explorer (`/_explorer/`): the page and its files as the gateway
//! serves them (the key only to a loopback client), the two requests only
//! the explorer makes (a procedure call's write set, `x-partita-write-set`;
//! the fuzzer, `x-partita-fuzz`), and the page itself driven in headless
//! Chromium against the real binary (`tests/js/explorer.mjs`).

use std::path::Path;
use std::process::Command;

use partita::Database;
use partita_server::WireRequest;
use serde_json::{Value, json};

use crate::server::{call, gateway, js_sdk, setup, signed};
use crate::support::ServerProcess;

/// The partition-key header of partition `p1`.
const P1: (&str, &str) = ("x-ms-documentdb-partitionkey", r#"["p1"]"#);

const CREATE_COMMENT: &str = include_str!("../../../sprocs/samples/js/createComment.js");

/// `body` POSTed as JSON to `path`, signed.
fn post_json(
    gw: &partita_server::Gateway,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (partita_server::WireResponse, Value) {
    call(
        gw,
        signed("POST", path, headers, body.to_string().as_bytes()),
    )
}

/// A gateway with `d/c` (`/pk`), the createComment procedure and post `p1`
/// in partition `p1`.
fn blog() -> partita_server::Gateway {
    let gw = setup();
    let sproc = json!({"id": "createComment", "body": CREATE_COMMENT});
    let (r, body) = post_json(&gw, "/dbs/d/colls/c/sprocs", &[], &sproc);
    assert_eq!(r.status, 201, "{body}");
    let post = json!({"id": "p1", "pk": "p1", "type": "post", "commentCount": 0});
    let (r, body) = post_json(&gw, "/dbs/d/colls/c/docs", &[P1], &post);
    assert_eq!(r.status, 201, "{body}");
    gw
}

fn execute(
    gw: &partita_server::Gateway,
    headers: &[(&str, &str)],
    params: &Value,
) -> (u16, Value, Option<Value>) {
    let mut all = vec![P1];
    all.extend_from_slice(headers);
    let (r, body) = post_json(gw, "/dbs/d/colls/c/sprocs/createComment", &all, params);
    let writes = r.header("x-partita-write-set").map(|text| {
        let text = percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .unwrap();
        serde_json::from_str(&text).unwrap()
    });
    (r.status, body, writes)
}

#[test]
fn a_procedure_call_returns_its_write_set_when_asked() {
    let gw = blog();
    let params = json!(["p1", {"id": "c1", "text": "hi"}]);
    let (status, _, writes) = execute(&gw, &[("x-partita-include-write-set", "true")], &params);
    assert_eq!(status, 200);
    let writes = writes.expect("the write set was asked for");
    assert_eq!(writes["truncated"], false);
    let writes = writes["writes"].as_array().unwrap();
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert_eq!(
        (writes[0]["operation"].as_str(), writes[0]["id"].as_str()),
        (Some("replace"), Some("p1"))
    );
    assert_eq!(writes[0]["document"]["commentCount"], 1);
    assert_eq!(
        (writes[1]["operation"].as_str(), writes[1]["id"].as_str()),
        (Some("create"), Some("c1"))
    );
    assert_eq!(writes[1]["document"]["text"], "hi");
    assert!(
        writes[1]["document"]["_etag"].is_string(),
        "the stored document, system properties included"
    );

    // Not asked for: no header.
    let (status, _, writes) = execute(&gw, &[], &json!(["p1", {"id": "c2"}]));
    assert_eq!((status, writes), (200, None));

    // A call that fails commits nothing and reports no write set.
    let (status, body, writes) = execute(
        &gw,
        &[("x-partita-include-write-set", "true")],
        &json!(["p1", {"id": "c1"}]),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["failedOperation"]["status"], 409, "{body}");
    assert_eq!(writes, None);
    let (status, _, _) = execute(&gw, &[("x-partita-include-write-set", "maybe")], &params);
    assert_eq!(status, 400, "a flag that is not a boolean is refused");
}

#[test]
fn a_large_write_set_leaves_the_documents_out() {
    let gw = blog();
    let big = "x".repeat(100 * 1024);
    let (status, _, writes) = execute(
        &gw,
        &[("x-partita-include-write-set", "true")],
        &json!(["p1", {"id": "big", "text": big}]),
    );
    assert_eq!(status, 200);
    let writes = writes.unwrap();
    assert_eq!(writes["truncated"], true);
    assert_eq!(writes["writes"][1]["id"], "big");
    assert_eq!(writes["writes"][1]["document"], Value::Null);
}

fn fuzz(gw: &partita_server::Gateway, id: &str, request: &Value) -> (u16, Value) {
    let (r, body) = post_json(
        gw,
        &format!("/dbs/d/colls/c/sprocs/{id}"),
        &[("x-partita-fuzz", "true")],
        request,
    );
    (r.status, body)
}

#[test]
fn the_fuzzer_runs_from_the_wire_on_a_private_copy() {
    let gw = blog();
    let request = json!({
        "partitionKeys": ["p1"],
        "params": ["$pk", {"text": "hi"}],
        "invariant": "SELECT VALUE SUM(c.type = 'post' ? c.commentCount : -1) FROM c",
        "expect": [0],
        "calls": 60,
        "seed": 3,
    });
    let (status, report) = fuzz(&gw, "createComment", &request);
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["procedure"], "createComment");
    assert_eq!(
        (report["calls"].as_u64(), report["seed"].as_u64()),
        (Some(60), Some(3))
    );
    assert_eq!(report["violations"], 0, "{report}");
    assert!(report["faults_injected"].as_u64().unwrap() > 0, "{report}");
    // The user's container is untouched.
    let (r, post) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/p1", &[P1], b""));
    assert_eq!((r.status, &post["commentCount"]), (200, &json!(0)));

    // A procedure that swallows a failed write is caught, with a reproduction.
    let swallow = json!({"id": "swallow", "body": r#"function swallow(postId) {
        var c = getContext().getCollection();
        c.readDocument(c.getAltLink() + '/docs/' + postId, function (err, post) {
            if (err) throw err;
            post.commentCount++;
            c.replaceDocument(post._self, post, function () {
                c.createDocument(c.getSelfLink(), {postId: postId, type: 'comment'}, function () {});
            });
        });
    }"#});
    let (r, body) = post_json(&gw, "/dbs/d/colls/c/sprocs", &[], &swallow);
    assert_eq!(r.status, 201, "{body}");
    let (status, report) = fuzz(
        &gw,
        "swallow",
        &json!({
            "partitionKeys": ["p1"],
            "params": ["$pk"],
            "invariant": "SELECT VALUE SUM(c.type = 'post' ? c.commentCount : -1) FROM c",
            "expect": [0],
            "calls": 200,
        }),
    );
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["violations"], 1, "{report}");
    assert!(report["first_violation"]["message"].is_string(), "{report}");
    assert!(
        report["reproduction"]["calls"].as_u64().is_some(),
        "{report}"
    );
}

#[test]
fn bad_fuzz_requests_are_400_naming_the_field() {
    let gw = blog();
    for (request, needle) in [
        (json!({}), "partitionKeys"),
        (json!({"partitionKeys": []}), "partitionKeys"),
        (json!({"partitionKeys": [{"a": 1}]}), "partition-key value"),
        (json!({"partitionKeys": ["p1"], "params": 3}), "params"),
        (
            json!({"partitionKeys": ["p1"], "invariant": "SELECT 1"}),
            "expect",
        ),
        (json!({"partitionKeys": ["p1"], "calls": 0}), "calls"),
        (
            json!({"partitionKeys": ["p1"], "calls": 1_000_000}),
            "calls",
        ),
        (json!({"partitionKeys": ["p1"], "seed": -1}), "seed"),
        (json!([1]), "JSON object"),
    ] {
        let (status, body) = fuzz(&gw, "createComment", &request);
        assert_eq!(status, 400, "{request}: {body}");
        assert!(
            body["message"].as_str().unwrap().contains(needle),
            "{request}: {body}"
        );
    }
    let (status, body) = fuzz(&gw, "missing", &json!({"partitionKeys": ["p1"]}));
    assert_eq!(status, 404, "{body}");
}

/// A WebAssembly procedure over REST: `"language": "wasm"` with the module
/// (WAT text here) in base64; read back the same way; executed like any
/// procedure. A body that is not base64 or an unknown language is a 400.
#[test]
fn webassembly_procedures_upload_as_base64_with_their_language() {
    use base64::Engine;
    let gw = blog();
    let wat = include_str!("../../../sprocs/samples/wat/createComment.wat");
    let encoded = base64::engine::general_purpose::STANDARD.encode(wat);
    let sproc = json!({"id": "wasmComment", "body": encoded, "language": "wasm"});
    let (r, created) = post_json(&gw, "/dbs/d/colls/c/sprocs", &[], &sproc);
    assert_eq!(r.status, 201, "{created}");
    assert_eq!(created["language"], "wasm");
    let module = base64::engine::general_purpose::STANDARD
        .decode(created["body"].as_str().unwrap())
        .unwrap();
    assert!(
        module.starts_with(b"\0asm"),
        "stored as the compiled binary module"
    );
    let (r, read) = call(
        &gw,
        signed("GET", "/dbs/d/colls/c/sprocs/wasmComment", &[], b""),
    );
    assert_eq!((r.status, &read["body"]), (200, &created["body"]));
    let params = json!(["p1", {"id": "w1", "pk": "p1"}]);
    let (r, _) = post_json(&gw, "/dbs/d/colls/c/sprocs/wasmComment", &[P1], &params);
    assert_eq!(r.status, 200);
    let (r, comment) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/w1", &[P1], b""));
    assert_eq!((r.status, &comment["postId"]), (200, &json!("p1")));
    // JavaScript procedures are echoed as the service echoes them.
    let (_, js) = call(
        &gw,
        signed("GET", "/dbs/d/colls/c/sprocs/createComment", &[], b""),
    );
    assert!(js.get("language").is_none(), "{js}");
    for (resource, needle) in [
        (
            json!({"id": "x", "body": "not base64!", "language": "wasm"}),
            "base64",
        ),
        (
            json!({"id": "x", "body": "AAAA", "language": "python"}),
            "language",
        ),
        (
            json!({"id": "x", "body": "AGFzbQ==", "language": "wasm"}),
            "x",
        ),
    ] {
        let (r, body) = post_json(&gw, "/dbs/d/colls/c/sprocs", &[], &resource);
        assert_eq!(r.status, 400, "{resource}: {body}");
        assert!(body["message"].as_str().unwrap().contains(needle), "{body}");
    }
}

fn page_request(remote: &str) -> WireRequest {
    WireRequest {
        method: "GET".to_owned(),
        path: "/_explorer/".to_owned(),
        headers: Default::default(),
        body: Default::default(),
        local_addr: None,
        remote_addr: Some(remote.parse().unwrap()),
    }
}

#[test]
fn the_page_needs_no_signature_and_carries_the_key_only_for_loopback_clients() {
    let gw = gateway(Database::in_memory());
    let now = std::time::SystemTime::now();
    let local = gw.handle(&page_request("127.0.0.1:40000"), now);
    assert_eq!(local.status, 200);
    let page = String::from_utf8(local.body).unwrap();
    assert!(
        page.contains(partita_server::EMULATOR_KEY),
        "a loopback client gets the key"
    );
    assert!(page.contains(r#"<script type="module" src="app.js">"#));
    let remote = gw.handle(&page_request("192.0.2.10:40000"), now);
    assert_eq!(remote.status, 200);
    assert!(
        !String::from_utf8(remote.body)
            .unwrap()
            .contains(partita_server::EMULATOR_KEY)
    );
}

/// Headless Chromium: `PARTITA_CHROMIUM`, or Debian's `chromium`, installed
/// with apt-get when missing and running as root (as `.ci/run` does).
fn chromium() -> String {
    if let Ok(path) = std::env::var("PARTITA_CHROMIUM") {
        return path;
    }
    for candidate in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(candidate).exists() {
            return candidate.to_owned();
        }
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"));
    assert!(
        root,
        "the Data Explorer's browser test needs Chromium: apt-get install chromium, \
         or set PARTITA_CHROMIUM to a Chromium or Chrome binary"
    );
    for args in [
        &["update", "-qq"][..],
        &["install", "-y", "-qq", "chromium"][..],
    ] {
        let status = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .expect("apt-get");
        assert!(status.success(), "apt-get {args:?} failed");
    }
    "/usr/bin/chromium".to_owned()
}

/// The page in a real browser: browse and edit (a 412 on a conflicting
/// edit), query with paging, create and execute a procedure and read its
/// log and write set, fuzz it, and follow the change feed. Screenshots of
/// every view go to `target/explorer-screenshots/`.
#[test]
fn the_data_explorer_works_in_headless_chromium() {
    let dir = js_sdk();
    let browser = chromium();
    let server = ServerProcess::start(&["--in-memory"]);
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/explorer-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let output = Command::new("node")
        .arg(dir.join("explorer.mjs"))
        .arg(server.endpoint())
        .arg(&shots)
        .env("PARTITA_CHROMIUM", browser)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("ALL OK"),
        "the Data Explorer's browser test failed (screenshots in {})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        shots.display()
    );
}
