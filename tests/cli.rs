//! End-to-end test of the `partita` command line: JSON in, JSON out, errors
//! as `{"status", "substatus", "message"}` on stderr with a non-zero exit,
//! and a data directory that persists between invocations.

use std::process::Command;

use serde_json::{Value, json};

struct Cli {
    dir: tempfile::TempDir,
}

impl Cli {
    fn new() -> Cli {
        Cli {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// Runs `partita --data DIR args…`; returns (exit ok, stdout JSON or stderr JSON).
    fn run(&self, args: &[&str]) -> (bool, Value) {
        let output = Command::new(env!("CARGO_BIN_EXE_partita"))
            .arg("--data")
            .arg(self.dir.path())
            .args(args)
            .output()
            .expect("run partita");
        let text = if output.status.success() {
            &output.stdout
        } else {
            &output.stderr
        };
        let value = serde_json::from_slice(text).unwrap_or_else(|e| {
            panic!(
                "{args:?} printed no JSON ({e}): {}",
                String::from_utf8_lossy(text)
            )
        });
        (output.status.success(), value)
    }

    fn ok(&self, args: &[&str]) -> Value {
        let (ok, value) = self.run(args);
        assert!(ok, "{args:?} failed: {value}");
        value
    }

    fn fails(&self, args: &[&str], status: u64) -> Value {
        let (ok, value) = self.run(args);
        assert!(!ok, "{args:?} should fail");
        assert_eq!(value["status"], status, "{args:?}: {value}");
        assert!(value["message"].as_str().is_some_and(|m| !m.is_empty()));
        value
    }
}

#[test]
fn containers_items_queries_and_changes() {
    let cli = Cli::new();
    let container = cli.ok(&["container", "create", "posts", "--pk", "/postId"]);
    assert_eq!(container["partitionKey"]["paths"], json!(["/postId"]));
    cli.fails(&["container", "create", "posts", "--pk", "/postId"], 409);
    assert_eq!(cli.ok(&["container", "list"])[0]["id"], "posts");

    let created = cli.ok(&[
        "item",
        "create",
        "posts",
        "--pk",
        "p1",
        "--body",
        r#"{"id":"p1","postId":"p1","commentCount":0}"#,
    ]);
    let etag = created["resource"]["_etag"].as_str().unwrap().to_owned();
    assert_eq!(created["stats"]["docs_written"], 1);
    // The data directory persists between invocations.
    assert_eq!(
        cli.ok(&["item", "read", "posts", "--pk", "p1", "--id", "p1"])["resource"]["_etag"],
        etag.as_str()
    );
    cli.ok(&[
        "item",
        "replace",
        "posts",
        "--pk",
        "p1",
        "--if-match",
        &etag,
        "--body",
        r#"{"id":"p1","postId":"p1","commentCount":1}"#,
    ]);
    cli.fails(
        &[
            "item",
            "replace",
            "posts",
            "--pk",
            "p1",
            "--if-match",
            &etag,
            "--body",
            r#"{"id":"p1","postId":"p1"}"#,
        ],
        412,
    );
    cli.ok(&[
        "item",
        "upsert",
        "posts",
        "--pk",
        "p1",
        "--body",
        r#"{"id":"c1","postId":"p1","type":"comment"}"#,
    ]);
    cli.ok(&[
        "item",
        "create",
        "posts",
        "--pk-json",
        "7",
        "--body",
        r#"{"id":"n","postId":7}"#,
    ]);
    cli.ok(&[
        "item",
        "create",
        "posts",
        "--pk-none",
        "--body",
        r#"{"id":"loose"}"#,
    ]);

    let page = cli.ok(&[
        "query",
        "posts",
        "SELECT VALUE c.commentCount FROM c WHERE c.id = @id",
        "--param",
        "id=\"p1\"",
    ]);
    assert_eq!(page["items"], json!([1]));
    let single = cli.ok(&[
        "query",
        "posts",
        "SELECT VALUE COUNT(1) FROM c",
        "--pk",
        "p1",
    ]);
    assert_eq!(single["items"], json!([2]));
    let all = cli.ok(&["query", "posts", "SELECT VALUE COUNT(1) FROM c"]);
    assert_eq!(all["items"], json!([4]));
    let first = cli.ok(&[
        "query",
        "posts",
        "SELECT VALUE c.id FROM c",
        "--max-items",
        "3",
    ]);
    let token = first["continuation"]
        .as_str()
        .expect("a second page")
        .to_owned();
    let second = cli.ok(&[
        "query",
        "posts",
        "SELECT VALUE c.id FROM c",
        "--max-items",
        "3",
        "--continuation",
        &token,
    ]);
    assert_eq!(
        first["items"].as_array().unwrap().len() + second["items"].as_array().unwrap().len(),
        4
    );

    cli.ok(&["item", "delete", "posts", "--pk", "p1", "--id", "c1"]);
    let changes = cli.ok(&["changes", "posts"]);
    let ops: Vec<&str> = changes["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["operation"].as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        ["create", "replace", "create", "create", "create", "delete"]
    );
    assert_eq!(changes["lastLsn"], 6);
    assert_eq!(
        cli.ok(&["changes", "posts", "--from-lsn", "5"])["changes"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    cli.fails(&["item", "read", "posts", "--pk", "p1", "--id", "c1"], 404);
    cli.fails(&["item", "read", "nope", "--pk", "p1", "--id", "c1"], 404);
    cli.fails(
        &[
            "item",
            "create",
            "posts",
            "--pk",
            "p2",
            "--body",
            r#"{"id":"x","postId":"p1"}"#,
        ],
        400,
    );
    cli.fails(
        &[
            "item",
            "create",
            "posts",
            "--pk",
            "p1",
            "--body",
            "{not json",
        ],
        400,
    );
    let syntax = cli.fails(&["query", "posts", "SELECT * FROM c WHERE"], 400);
    assert!(
        syntax["message"].as_str().unwrap().contains("line 1"),
        "{syntax}"
    );
    cli.fails(
        &["query", "posts", "SELECT * FROM c", "--param", "novalue"],
        400,
    );
}

#[test]
fn scripts_are_managed_by_kind() {
    let cli = Cli::new();
    cli.ok(&["container", "create", "feed", "--pk", "/type"]);
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/sprocs/js");
    let create_comment = format!("{root}/createComment.js");
    let truncate_feed = format!("{root}/truncateFeed.js");
    let sproc = cli.ok(&["sproc", "create", "feed", "createComment", &create_comment]);
    assert!(sproc["body"].as_str().unwrap().contains("getContext()"));
    cli.fails(
        &["sproc", "create", "feed", "createComment", &create_comment],
        409,
    );
    let replaced = cli.ok(&["sproc", "replace", "feed", "createComment", &create_comment]);
    assert!(replaced["_version"].as_u64() > sproc["_version"].as_u64());
    let trigger = cli.ok(&[
        "trigger",
        "create",
        "feed",
        "truncateFeed",
        &truncate_feed,
        "--type",
        "post",
        "--operation",
        "create",
    ]);
    assert_eq!(
        (
            trigger["triggerType"].as_str(),
            trigger["triggerOperation"].as_str()
        ),
        (Some("Post"), Some("Create"))
    );
    cli.fails(
        &["trigger", "create", "feed", "untyped", &truncate_feed],
        400,
    );
    cli.fails(
        &[
            "trigger",
            "create",
            "feed",
            "t",
            &truncate_feed,
            "--type",
            "sideways",
            "--operation",
            "all",
        ],
        400,
    );
    cli.fails(&["sproc", "create", "feed", "wasm", "module.wasm"], 400);
    cli.fails(
        &["sproc", "create", "feed", "missing", "/nonexistent/file.js"],
        400,
    );
    assert_eq!(
        cli.ok(&["sproc", "list", "feed"]).as_array().unwrap().len(),
        1
    );
    assert_eq!(
        cli.ok(&["trigger", "read", "feed", "truncateFeed"])["id"],
        "truncateFeed"
    );
    cli.ok(&["sproc", "delete", "feed", "createComment"]);
    cli.fails(&["sproc", "read", "feed", "createComment"], 404);
    assert!(
        cli.ok(&["udf", "list", "feed"])
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn procedures_and_triggers_from_the_command_line() {
    let cli = Cli::new();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/sprocs/js");
    cli.ok(&["container", "create", "posts", "--pk", "/postId"]);
    cli.ok(&[
        "sproc",
        "create",
        "posts",
        "createComment",
        &format!("{root}/createComment.js"),
    ]);
    cli.ok(&[
        "item",
        "create",
        "posts",
        "--pk",
        "p1",
        "--body",
        r#"{"id":"p1","postId":"p1","commentCount":0}"#,
    ]);
    let response = cli.ok(&[
        "sproc",
        "exec",
        "posts",
        "createComment",
        "--pk",
        "p1",
        "--params",
        r#"["p1", {"id": "c1"}]"#,
    ]);
    assert_eq!(response["body"], "");
    assert!(response["stats"]["instructions"].as_u64().unwrap() > 0);
    assert_eq!(
        cli.ok(&["item", "read", "posts", "--pk", "p1", "--id", "p1"])["resource"]["commentCount"],
        1
    );
    // The duplicate comment id: 400 with the operation's 409 as substatus, nothing committed.
    let failed = cli.fails(
        &[
            "sproc",
            "exec",
            "posts",
            "createComment",
            "--pk",
            "p1",
            "--params",
            r#"["p1", {"id": "c1"}]"#,
        ],
        400,
    );
    assert_eq!(failed["substatus"], 409, "{failed}");
    assert_eq!(
        cli.ok(&["item", "read", "posts", "--pk", "p1", "--id", "p1"])["resource"]["commentCount"],
        1
    );
    cli.fails(
        &[
            "sproc",
            "exec",
            "posts",
            "createComment",
            "--pk",
            "p1",
            "--params",
            "{}",
        ],
        400,
    );
    cli.fails(&["sproc", "exec", "posts", "nope", "--pk", "p1"], 404);
    cli.fails(&["trigger", "exec", "posts", "x", "--pk", "p1"], 400);

    cli.ok(&["container", "create", "feed", "--pk", "/type"]);
    cli.ok(&[
        "trigger",
        "create",
        "feed",
        "truncateFeed",
        &format!("{root}/truncateFeed.js"),
        "--type",
        "post",
        "--operation",
        "all",
    ]);
    let written = cli.ok(&[
        "item",
        "create",
        "feed",
        "--pk",
        "post",
        "--post-trigger",
        "truncateFeed",
        "--body",
        r#"{"id":"a","type":"post","creationDate":"2026-01-01"}"#,
    ]);
    assert_eq!(written["resource"]["id"], "a");
    assert!(
        written["stats"]["instructions"].as_u64().unwrap() > 0,
        "the trigger ran: {written}"
    );
    cli.fails(
        &[
            "item",
            "create",
            "feed",
            "--pk",
            "post",
            "--pre-trigger",
            "truncateFeed",
            "--body",
            r#"{"id":"b","type":"post"}"#,
        ],
        400,
    );
    cli.ok(&[
        "item",
        "delete",
        "feed",
        "--pk",
        "post",
        "--id",
        "a",
        "--post-trigger",
        "truncateFeed",
    ]);
}

#[test]
fn demo_runs_in_memory_and_checks_its_invariant() {
    let output = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args([
            "demo",
            "--posts",
            "10",
            "--comments",
            "500",
            "--threads",
            "3",
        ])
        .output()
        .expect("run partita demo");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON report");
    assert_eq!(report["native_rust_transaction"]["comments_created"], 500);
    assert_eq!(report["javascript_procedure"]["comments_created"], 500);
    assert!(
        report["invariant"]
            .as_str()
            .unwrap()
            .contains("all 10 posts")
    );
    assert_eq!(report["most_commented"].as_array().unwrap().len(), 3);
}

#[test]
fn webassembly_scripts_from_the_command_line() {
    let cli = Cli::new();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/sprocs/wat");
    cli.ok(&["container", "create", "posts", "--pk", "/postId"]);
    let stored = cli.ok(&[
        "sproc",
        "create",
        "posts",
        "createComment",
        &format!("{root}/createComment.wat"),
    ]);
    assert_eq!(stored["language"], "wasm");
    assert!(stored["bodySize"].as_u64().unwrap() > 100);
    // The compiled artifact is kept in the data directory.
    let artifacts = std::fs::read_dir(cli.dir.path().join("wasm-cache")).expect("artifacts");
    assert_eq!(artifacts.count(), 1);
    cli.ok(&[
        "item",
        "create",
        "posts",
        "--pk",
        "p1",
        "--body",
        r#"{"id":"p1","postId":"p1","commentCount":0}"#,
    ]);
    let response = cli.ok(&[
        "sproc",
        "exec",
        "posts",
        "createComment",
        "--pk",
        "p1",
        "--params",
        r#"["p1", {"id": "c1"}]"#,
    ]);
    assert_eq!(response["body"], "");
    assert!(response["stats"]["fuel"].as_u64().unwrap() > 0);
    let failed = cli.fails(
        &[
            "sproc",
            "exec",
            "posts",
            "createComment",
            "--pk",
            "p1",
            "--params",
            r#"["p1", {"id": "c1"}]"#,
        ],
        400,
    );
    assert_eq!(failed["substatus"], 409);

    // A module importing WASI is refused at upload, naming the import.
    let bad = cli.dir.path().join("bad.wat");
    std::fs::write(
        &bad,
        r#"(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
             (memory (export "memory") 1)
             (func (export "partita_procedure") (result i32) (i32.const 0)))"#,
    )
    .unwrap();
    let refused = cli.fails(
        &["sproc", "create", "posts", "bad", bad.to_str().unwrap()],
        400,
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("wasi_snapshot_preview1.fd_write"),
        "{refused}"
    );
    cli.fails(&["sproc", "read", "posts", "bad"], 404);
    // So is a replacement with it; the stored version keeps running.
    cli.fails(
        &[
            "sproc",
            "replace",
            "posts",
            "createComment",
            bad.to_str().unwrap(),
        ],
        400,
    );
    cli.ok(&[
        "sproc",
        "exec",
        "posts",
        "createComment",
        "--pk",
        "p1",
        "--params",
        r#"["p1", {"id": "c2"}]"#,
    ]);
}
