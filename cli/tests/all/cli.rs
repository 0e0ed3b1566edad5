//! End-to-end test of the `partita` command line: JSON in, JSON out, errors
//! as `{"status", "substatus", "message"}` on stderr with a non-zero exit,
//! and a data directory that persists between invocations; request charges
//! in every response; `--help` examples; `partita batch`.

use std::io::Write;
use std::process::{Command, Stdio};

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

    /// Runs `partita --data DIR args…`; returns (exit ok, stdout JSON or
    /// stderr JSON). A failure must exit with 1 (2 for a usage error).
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
        if !output.status.success() {
            assert!(
                matches!(output.status.code(), Some(1 | 2)),
                "{args:?}: {:?}",
                output.status
            );
        }
        (output.status.success(), value)
    }

    /// Runs a command that must succeed; its response must carry a request
    /// charge of at least 1.
    fn ok(&self, args: &[&str]) -> Value {
        let (ok, value) = self.run(args);
        assert!(ok, "{args:?} failed: {value}");
        let charge = value["requestCharge"].as_f64();
        assert!(
            charge.is_some_and(|c| c >= 1.0),
            "{args:?}: no request charge in {value}"
        );
        value
    }

    /// Runs `partita --data DIR batch` with `lines` on stdin; returns the
    /// output lines.
    fn batch(&self, lines: &[Value]) -> Vec<Value> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_partita"))
            .arg("--data")
            .arg(self.dir.path())
            .arg("batch")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run partita batch");
        let mut input = String::new();
        for line in lines {
            match line {
                // A raw string is sent as it is (to send bad lines).
                Value::String(raw) => input.push_str(raw),
                other => input.push_str(&other.to_string()),
            }
            input.push('\n');
        }
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
        let output = child.wait_with_output().expect("batch output");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout)
            .expect("UTF-8")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect()
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
    assert_eq!(
        cli.ok(&["container", "list"])["containers"][0]["id"],
        "posts"
    );

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
    let create_charge = created["requestCharge"].as_f64().unwrap();
    assert!((5.0..6.0).contains(&create_charge), "{created}");
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
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../sprocs/samples/js");
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
        cli.ok(&["sproc", "list", "feed"])["scripts"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        cli.ok(&["trigger", "read", "feed", "truncateFeed"])["id"],
        "truncateFeed"
    );
    cli.ok(&["sproc", "delete", "feed", "createComment"]);
    cli.fails(&["sproc", "read", "feed", "createComment"], 404);
    assert!(
        cli.ok(&["udf", "list", "feed"])["scripts"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    cli.ok(&[
        "trigger",
        "replace",
        "feed",
        "truncateFeed",
        &truncate_feed,
        "--type",
        "post",
        "--operation",
        "all",
    ]);
    cli.ok(&["trigger", "delete", "feed", "truncateFeed"]);
    cli.fails(&["trigger", "delete", "feed", "truncateFeed"], 404);
}

#[test]
fn user_defined_functions_from_the_command_line() {
    let cli = Cli::new();
    let tax = cli.dir.path().join("tax.js");
    std::fs::write(&tax, "function tax(x) { return x * 0.5; }").unwrap();
    cli.ok(&["container", "create", "orders", "--pk", "/customer"]);
    cli.ok(&["udf", "create", "orders", "tax", tax.to_str().unwrap()]);
    cli.ok(&[
        "item",
        "create",
        "orders",
        "--pk",
        "c1",
        "--body",
        r#"{"id":"o1","customer":"c1","total":10}"#,
    ]);
    let page = cli.ok(&["query", "orders", "SELECT VALUE udf.tax(o.total) FROM o"]);
    assert_eq!(page["items"], json!([5]));
    std::fs::write(&tax, "function tax(x) { return x * 2; }").unwrap();
    cli.ok(&["udf", "replace", "orders", "tax", tax.to_str().unwrap()]);
    let page = cli.ok(&["query", "orders", "SELECT VALUE udf.tax(o.total) FROM o"]);
    assert_eq!(page["items"], json!([20]));
    cli.ok(&["udf", "delete", "orders", "tax"]);
    cli.fails(
        &["query", "orders", "SELECT VALUE udf.tax(o.total) FROM o"],
        400,
    );
}

#[test]
fn usage_errors_exit_2_and_every_command_has_help_with_an_example() {
    let usage = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["--in-memory", "item", "read", "posts", "--id", "x"])
        .output()
        .expect("run partita");
    assert_eq!(usage.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&usage.stderr).expect("JSON error");
    assert_eq!(error["status"], 400);
    assert!(
        error["message"].as_str().unwrap().contains("--pk"),
        "{error}"
    );

    let commands: &[&[&str]] = &[
        &["container"],
        &["container", "create"],
        &["container", "list"],
        &["container", "set-indexing-policy"],
        &["item"],
        &["item", "create"],
        &["item", "upsert"],
        &["item", "replace"],
        &["item", "read"],
        &["item", "delete"],
        &["item", "import"],
        &["query"],
        &["sproc"],
        &["sproc", "create"],
        &["sproc", "replace"],
        &["sproc", "delete"],
        &["sproc", "read"],
        &["sproc", "list"],
        &["sproc", "exec"],
        &["trigger", "create"],
        &["udf", "create"],
        &["changes"],
        &["batch"],
        &["demo"],
    ];
    for command in commands {
        let output = Command::new(env!("CARGO_BIN_EXE_partita"))
            .args(*command)
            .arg("--help")
            .output()
            .expect("run partita --help");
        let help = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{command:?}");
        assert!(
            help.contains("Example"),
            "{command:?} --help has no example:\n{help}"
        );
    }
}

#[test]
fn in_memory_runs_leave_nothing_behind() {
    let cli = Cli::new();
    let output = Command::new(env!("CARGO_BIN_EXE_partita"))
        .current_dir(cli.dir.path())
        .args(["--in-memory", "container", "create", "t", "--pk", "/k"])
        .output()
        .expect("run partita");
    assert!(output.status.success());
    assert_eq!(std::fs::read_dir(cli.dir.path()).unwrap().count(), 0);
}

#[test]
fn batch_runs_many_commands_in_one_process() {
    let cli = Cli::new();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../sprocs/samples/js");
    let counter = cli.dir.path().join("count.js");
    std::fs::write(
        &counter,
        "function count(id) { var c = getContext().getCollection(); \
         c.readDocument(c.getAltLink() + '/docs/' + id, function (err, doc) { \
           if (err) throw err; doc.n = (doc.n || 0) + 1; \
           c.replaceDocument(doc._self, doc, function (err) { if (err) throw err; \
             getContext().getResponse().setBody(doc.n); }); }); }",
    )
    .unwrap();
    let counter = counter.to_str().unwrap();
    let exec = json!([
        "sproc", "exec", "posts", "count", "--pk", "p1", "--params", "[\"p1\"]"
    ]);
    let replies = cli.batch(&[
        json!(["container", "create", "posts", "--pk", "/postId"]),
        json!(["item", "create", "posts", "--pk", "p1", "--body", {"id": "p1", "postId": "p1", "commentCount": 0}]),
        json!(["sproc", "create", "posts", "count", counter]),
        json!([
            "sproc",
            "create",
            "posts",
            "createComment",
            format!("{root}/createComment.js")
        ]),
        exec.clone(),
        json!("this is not JSON"),
        json!(["item", "read", "posts", "--pk", "p1", "--id", "missing"]),
        exec.clone(),
        json!(["--data", "/elsewhere", "container", "list"]),
        json!(["demo"]),
        json!(["item", "read", "posts", "--id", "p1"]),
        json!([
            "sproc",
            "exec",
            "posts",
            "createComment",
            "--pk",
            "p1",
            "--params",
            "[\"p1\",{}]"
        ]),
        exec,
        json!(["item", "read", "posts", "--pk", "p1", "--id", "p1"]),
        json!(["changes", "posts", "--help"]),
    ]);
    assert_eq!(replies.len(), 15, "one reply per line: {replies:#?}");
    let ok: Vec<bool> = replies.iter().map(|r| r["ok"] == true).collect();
    assert_eq!(
        ok,
        [
            true, true, true, true, true, false, false, true, false, false, false, true, true,
            true, true
        ],
        "{replies:#?}"
    );
    // Each line after a bad one still ran, in order: the procedure's state
    // carries across lines of the one process.
    assert_eq!(replies[4]["response"]["body"], 1);
    assert_eq!(replies[7]["response"]["body"], 2);
    assert_eq!(replies[12]["response"]["body"], 3);
    assert_eq!(replies[13]["response"]["resource"]["commentCount"], 1);
    for reply in replies.iter().filter(|r| r["ok"] == true).take(5) {
        assert!(
            reply["response"]["requestCharge"].as_f64().unwrap() >= 1.0,
            "{reply}"
        );
    }
    for (i, status) in [(5, 400), (6, 404), (8, 400), (9, 400), (10, 400)] {
        let error = &replies[i]["error"];
        assert_eq!(error["status"], status, "line {}: {error}", i + 1);
        assert!(error["substatus"].is_u64(), "{error}");
        assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    assert!(
        replies[8]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--data"),
        "{}",
        replies[8]
    );
    assert!(
        replies[14]["response"]["help"]
            .as_str()
            .unwrap()
            .contains("Example")
    );

    // The batch's writes are durable in the data directory.
    assert_eq!(
        cli.ok(&["item", "read", "posts", "--pk", "p1", "--id", "p1"])["resource"]["n"],
        3
    );
}

/// Container `posts` with post `p1` (no comments) and createComment.js;
/// returns the directory of the JavaScript procedures.
fn posts_with_create_comment(cli: &Cli) -> &'static str {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../sprocs/samples/js");
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
    root
}

#[test]
fn procedures_and_triggers_from_the_command_line() {
    let cli = Cli::new();
    let root = posts_with_create_comment(&cli);
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

/// Runs `partita demo` on a blog of `users` users with `extra` arguments;
/// returns stdout.
fn demo(users: &str, extra: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["demo", "--users", users, "--runs", "20", "--seconds", "0.5"])
        .args(extra)
        .output()
        .expect("run partita demo");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

#[test]
fn demo_prints_the_table_of_three_models_and_its_invariants() {
    let text = demo("15", &[]);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.len() > 3
                && ["C1 ", "C2 ", "C3 ", "C4 "]
                    .iter()
                    .chain(&["Q1 ", "Q2 ", "Q3 ", "Q4 ", "Q5 ", "Q6 "])
                    .any(|p| l.starts_with(p))
        })
        .collect();
    assert_eq!(rows.len(), 10, "{text}");
    // By default in a throwaway data directory, its memory bounded.
    assert!(
        text.contains(
            "\nJavaScript procedures and triggers, a temporary data directory (no fsync), \
             cache 256 MiB;"
        ),
        "{text}"
    );
    for row in &rows {
        // Three model cells, each with a latency, the request-charge column
        // and the published figure.
        assert_eq!(row.matches('|').count(), 3, "{row}");
        assert_eq!(row.matches(" RU)").count(), 3, "{row}");
        assert_eq!(
            row.matches("n/a RU").count(),
            0,
            "every request reports its charge: {row}"
        );
    }
    assert!(
        text.contains("(306 ms 2063.54 RU)"),
        "V1 Q6's published figure: {text}"
    );
    assert!(
        text.contains("(  9 ms   16.97 RU)"),
        "V3 Q6's published figure: {text}"
    );
    assert!(
        text.contains("ok  V3: the feed holds exactly the newest 100 of "),
        "{text}"
    );
    assert!(
        text.contains("ok  V3: commentCount and likeCount equal the comments and likes of all "),
        "{text}"
    );
    assert!(text.contains("ok  V3: after renaming u"), "{text}");
    assert!(text.contains("ok  V2: after renaming u"), "{text}");
    assert!(
        text.contains("\ninvariants hold; demo finished in "),
        "{text}"
    );
}

#[test]
fn demo_writes_its_table_as_json_and_runs_durably() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("UTF-8 path");
    let report: Value =
        serde_json::from_str(&demo("6", &["--json", "--data", data])).expect("JSON");
    assert_eq!(report["users"], 6);
    assert_eq!(report["storage"], data);
    let requests = report["requests"].as_array().unwrap();
    let names: Vec<&str> = requests
        .iter()
        .map(|r| r["request"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "C1", "Q1", "C2", "Q2", "Q3", "C3", "C3b", "Q4", "C4", "C4b", "Q5", "Q6"
        ]
    );
    for request in requests {
        for model in ["V1", "V2", "V3"] {
            let cell = &request["models"][model];
            assert!(cell["runs"].as_u64().unwrap() >= 5, "{cell}");
            assert!(cell["median_ms"].as_f64().unwrap() > 0.0, "{cell}");
            assert!(cell["request_charge"].as_f64().unwrap() >= 1.0, "{cell}");
            assert!(cell["published"]["request_charge"].as_f64().unwrap() > 0.0);
        }
    }
    assert_eq!(
        requests[11]["models"]["V1"]["published"]["request_charge"],
        2063.54
    );
    assert_eq!(report["invariants"].as_array().unwrap().len(), 5);
    // The durable run left three data directories; a second run refuses them.
    for model in ["v1", "v2", "v3"] {
        assert!(dir.path().join(model).join("LOCK").exists());
    }
    let again = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["--data", data, "demo", "--users", "6"])
        .output()
        .expect("run partita demo");
    assert!(!again.status.success());
    let err: Value = serde_json::from_slice(&again.stderr).expect("JSON error");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("already holds documents"),
        "{err}"
    );
}

#[test]
fn demo_runs_with_the_wasm_procedures() {
    // The modules the demo reads (it builds them itself when missing).
    let dir = partita_workload::guest::build().unwrap_or_else(|e| panic!("{e}"));
    let text = demo(
        "6",
        &[
            "--wasm",
            "--wasm-dir",
            dir.to_str().expect("UTF-8 path"),
            "--in-memory",
        ],
    );
    assert!(
        text.contains("\nWebAssembly procedures and triggers, in memory;"),
        "{text}"
    );
    for line in [
        "ok  V2: commentCount and likeCount equal the comments and likes of all ",
        "ok  V2: after renaming u",
        "ok  V3: the feed holds exactly the newest 100 of ",
        "ok  V3: commentCount and likeCount equal the comments and likes of all ",
        "ok  V3: after renaming u",
        "\ninvariants hold; demo finished in ",
    ] {
        assert!(text.contains(line), "{line:?} in {text}");
    }
}

#[test]
fn demo_with_a_wasm_dir_lacking_the_modules_names_the_file() {
    let empty = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["demo", "--wasm", "--wasm-dir"])
        .arg(empty.path())
        .output()
        .expect("run partita demo");
    assert!(!output.status.success());
    let err: Value = serde_json::from_slice(&output.stderr).expect("JSON error");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("create_comment.wasm"),
        "{err}"
    );
}

#[test]
fn webassembly_scripts_from_the_command_line() {
    let cli = Cli::new();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../sprocs/samples/wat");
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

#[test]
fn isolate_scripts_runs_javascript_in_worker_processes() {
    let cli = Cli::new();
    let bomb = cli.dir.path().join("bomb.js");
    std::fs::write(
        &bomb,
        "function bomb() { var c = getContext().getCollection(); \
         c.createDocument(c.getSelfLink(), {id: 'w', postId: 'p1'}, function (err) { \
           if (err) throw err; var s = '0123456789abcdef'; while (true) s = s + s; }); }",
    )
    .unwrap();
    posts_with_create_comment(&cli);
    cli.ok(&["sproc", "create", "posts", "bomb", bomb.to_str().unwrap()]);
    // In process this string bomb aborts the whole process; in a worker it
    // fails the call with a 408 and its write is rolled back.
    let failed = cli.fails(
        &[
            "--isolate-scripts",
            "sproc",
            "exec",
            "posts",
            "bomb",
            "--pk",
            "p1",
        ],
        408,
    );
    // The worker dies of its memory limit; on a loaded machine the wall
    // clock may stop the doubling first. Either way the call fails alone.
    assert!(
        failed["message"]
            .as_str()
            .is_some_and(|m| m.contains("worker process") || m.contains("ran longer than")),
        "{failed}"
    );
    cli.fails(&["item", "read", "posts", "--pk", "p1", "--id", "w"], 404);
    cli.ok(&[
        "--isolate-scripts",
        "sproc",
        "exec",
        "posts",
        "createComment",
        "--pk",
        "p1",
        "--params",
        r#"["p1", {"id": "c1"}]"#,
    ]);
    assert_eq!(
        cli.ok(&["item", "read", "posts", "--pk", "p1", "--id", "p1"])["resource"]["commentCount"],
        1
    );
    // The flag belongs to a whole process: not to one batch line, and not
    // to the demo or the fuzzer, which run their scripts in process.
    let replies = cli.batch(&[json!(["--isolate-scripts", "container", "list"])]);
    assert!(
        replies[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("whole batch")),
        "{}",
        replies[0]
    );
    cli.fails(&["--isolate-scripts", "demo"], 400);
}

/// `--max-operations` and `--max-instructions` cut a call short as Cosmos
/// DB would, so a script's continuation path can be tried from the command
/// line: bulkImport stops where it was cut, commits what was accepted and
/// reports how far it got; the next call goes on from there.
#[test]
fn bounded_execution_can_be_exercised_from_the_command_line() {
    let cli = Cli::new();
    cli.ok(&["container", "create", "items", "--pk", "/pk"]);
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../sprocs/samples/js");
    let bulk_import = format!("{root}/bulkImport.js");
    cli.ok(&["sproc", "create", "items", "bulkImport", &bulk_import]);
    let items: Vec<Value> = (0..5)
        .map(|i| json!({"id": format!("d{i}"), "pk": "a"}))
        .collect();
    let params = json!([items]).to_string();
    let exec = |caps: &[&str]| {
        let mut args = vec!["sproc", "exec", "items", "bulkImport", "--pk", "a"];
        args.extend(["--params", params.as_str()]);
        args.extend_from_slice(caps);
        cli.ok(&args)
    };
    assert_eq!(exec(&["--max-operations", "2"])["body"], 2);
    let count = |cli: &Cli| {
        cli.ok(&[
            "query",
            "items",
            "SELECT VALUE COUNT(1) FROM c",
            "--pk",
            "a",
        ])["items"][0]
            .clone()
    };
    assert_eq!(count(&cli), 2, "the accepted writes committed");
    assert_eq!(exec(&["--max-instructions", "1"])["body"], 0);
    assert_eq!(count(&cli), 2);
    // A write's triggers take the same caps: this pre-trigger's one write
    // is not accepted, so the item is written without its companion.
    let stamp = cli.dir.path().join("stamp.js");
    std::fs::write(
        &stamp,
        "function stamp() { var c = getContext().getCollection(); \
         c.createDocument(c.getSelfLink(), {id: 'companion', pk: 'a'}); }",
    )
    .unwrap();
    let stamp = stamp.to_str().unwrap();
    cli.ok(&[
        "trigger",
        "create",
        "items",
        "stamp",
        stamp,
        "--type",
        "pre",
        "--operation",
        "all",
    ]);
    cli.ok(&[
        "item",
        "create",
        "items",
        "--pk",
        "a",
        "--body",
        r#"{"id":"x","pk":"a"}"#,
        "--pre-trigger",
        "stamp",
        "--max-operations",
        "0",
    ]);
    assert_eq!(count(&cli), 3, "the item, not its companion");
}

#[test]
fn patches_and_transactional_batches_from_the_command_line() {
    let cli = Cli::new();
    cli.ok(&["container", "create", "posts", "--pk", "/postId"]);
    cli.ok(&[
        "item",
        "create",
        "posts",
        "--pk",
        "p1",
        "--body",
        r#"{"id":"p1","postId":"p1","comments":0}"#,
    ]);
    let patched = cli.ok(&[
        "item",
        "patch",
        "posts",
        "--pk",
        "p1",
        "--id",
        "p1",
        "--condition",
        "FROM c WHERE c.comments = 0",
        "--ops",
        r#"[{"op":"incr","path":"/comments","value":2},{"op":"add","path":"/tags","value":["a"]}]"#,
    ]);
    assert_eq!(patched["resource"]["comments"], 2);
    let (ok, err) = cli.run(&[
        "item",
        "patch",
        "posts",
        "--pk",
        "p1",
        "--id",
        "p1",
        "--condition",
        "FROM c WHERE c.comments = 0",
        "--ops",
        r#"[{"op":"remove","path":"/tags"}]"#,
    ]);
    assert!(!ok);
    assert_eq!(err["status"], 412, "{err}");

    let ops = cli.dir.path().join("ops.json");
    std::fs::write(
        &ops,
        json!([
            {"operationType": "Patch", "id": "p1", "resourceBody": [{"op": "incr", "path": "/comments", "value": 1}]},
            {"operationType": "Create", "resourceBody": {"id": "c1", "postId": "p1"}},
        ])
        .to_string(),
    )
    .unwrap();
    let file_arg = format!("@{}", ops.display());
    let response = cli.ok(&["item", "batch", "posts", "--pk", "p1", "--ops", &file_arg]);
    let statuses: Vec<&Value> = response["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["statusCode"])
        .collect();
    assert_eq!(statuses, [&json!(200), &json!(201)], "{response}");
    assert_eq!(response["results"][0]["resourceBody"]["comments"], 3);

    // The same batch again: the create fails, so the patch is not applied.
    let (ok, err) = cli.run(&["item", "batch", "posts", "--pk", "p1", "--ops", &file_arg]);
    assert!(!ok);
    assert_eq!(
        (err["status"].clone(), err["failedOperation"].clone()),
        (json!(409), json!(1)),
        "{err}"
    );
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("nothing was applied"),
        "{err}"
    );
    let post = cli.ok(&["item", "read", "posts", "--pk", "p1", "--id", "p1"]);
    assert_eq!(post["resource"]["comments"], 3);
    let (ok, err) = cli.run(&["item", "batch", "posts", "--pk", "p1", "--ops", "[]"]);
    assert!(!ok);
    assert!(
        err["message"].as_str().unwrap().contains("no operations"),
        "{err}"
    );
}

#[test]
fn time_to_live_unique_keys_and_partition_deletes_from_the_command_line() {
    let cli = Cli::new();
    cli.fails(
        &[
            "container",
            "create",
            "bad",
            "--pk",
            "/pk",
            "--default-ttl",
            "0",
        ],
        400,
    );
    let created = cli.ok(&[
        "container",
        "create",
        "users",
        "--pk",
        "/tenant",
        "--default-ttl",
        "-1",
        "--unique-key",
        "/email",
        "--unique-key",
        "/name,/city",
    ]);
    assert_eq!(created["defaultTtl"], -1);
    assert_eq!(
        created["uniqueKeyPolicy"]["uniqueKeys"],
        json!([{"paths": ["/email"]}, {"paths": ["/name", "/city"]}])
    );
    cli.ok(&[
        "item",
        "create",
        "users",
        "--pk",
        "t",
        "--body",
        r#"{"id":"u1","tenant":"t","email":"a@x","ttl":3600}"#,
    ]);
    let dup = cli.fails(
        &[
            "item",
            "create",
            "users",
            "--pk",
            "t",
            "--body",
            r#"{"id":"u2","tenant":"t","email":"a@x"}"#,
        ],
        409,
    );
    assert!(dup["message"].as_str().unwrap().contains("/email"), "{dup}");
    cli.fails(
        &[
            "item",
            "create",
            "users",
            "--pk",
            "t",
            "--body",
            r#"{"id":"u3","tenant":"t","ttl":0}"#,
        ],
        400,
    );
    cli.ok(&[
        "item",
        "create",
        "users",
        "--pk",
        "t",
        "--body",
        r#"{"id":"u4","tenant":"t","email":"b@x","name":"n"}"#,
    ]);
    let off = cli.ok(&["container", "set-ttl", "users", "--default-ttl", "off"]);
    assert_eq!(off["defaultTtl"], Value::Null);
    cli.fails(
        &["container", "set-ttl", "users", "--default-ttl", "soon"],
        400,
    );
    let listed = cli.ok(&["container", "list"]);
    assert_eq!(listed["containers"][0]["defaultTtl"], Value::Null);

    let deleted = cli.ok(&["item", "delete-partition", "users", "--pk", "t"]);
    assert_eq!(deleted["deleted"], 2);
    cli.fails(&["item", "read", "users", "--pk", "t", "--id", "u1"], 404);
    let again = cli.ok(&["item", "delete-partition", "users", "--pk", "t"]);
    assert_eq!(again["deleted"], 0);
}

#[test]
fn containers_take_an_indexing_policy_inline_or_from_a_file() {
    let cli = Cli::new();
    let plain = cli.ok(&["container", "create", "plain", "--pk", "/pk"]);
    assert_eq!(
        plain["indexingPolicy"],
        json!({"indexingMode": "consistent", "automatic": true,
               "includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/\"_etag\"/?"}]})
    );
    let file = cli.dir.path().join("policy.json");
    std::fs::write(
        &file,
        r#"{"excludedPaths": [{"path": "/body/*"}],
            "compositeIndexes": [[{"path": "/a"}, {"path": "/b", "order": "descending"}]]}"#,
    )
    .unwrap();
    let from_file = format!("@{}", file.display());
    let posts = cli.ok(&[
        "container",
        "create",
        "posts",
        "--pk",
        "/postId",
        "--indexing-policy",
        &from_file,
    ]);
    let policy = &posts["indexingPolicy"];
    assert_eq!(
        policy["excludedPaths"],
        json!([{"path": "/body/*"}, {"path": "/\"_etag\"/?"}])
    );
    assert_eq!(
        policy["compositeIndexes"][0][0],
        json!({"path": "/a", "order": "ascending"})
    );
    assert_eq!(
        &listed(&cli, "posts")["indexingPolicy"],
        policy,
        "kept between invocations"
    );

    let bad = cli.fails(
        &[
            "container",
            "create",
            "bad",
            "--pk",
            "/pk",
            "--indexing-policy",
            r#"{"excludedPaths": [{"path": "/a"}]}"#,
        ],
        400,
    );
    assert!(
        bad["message"]
            .as_str()
            .unwrap()
            .contains("could not be accepted, failed near position '2'"),
        "{bad}"
    );
    cli.fails(
        &[
            "container",
            "create",
            "bad",
            "--pk",
            "/pk",
            "--indexing-policy",
            "{",
        ],
        400,
    );

    let none = cli.ok(&[
        "container",
        "set-indexing-policy",
        "posts",
        "--indexing-policy",
        r#"{"indexingMode": "none"}"#,
    ]);
    assert_eq!(
        none["indexingPolicy"],
        json!({"indexingMode": "none", "automatic": false, "includedPaths": [], "excludedPaths": []})
    );
    cli.fails(
        &[
            "container",
            "set-indexing-policy",
            "posts",
            "--indexing-policy",
            r#"{"compositeIndexes": [[]]}"#,
        ],
        400,
    );
    assert_eq!(
        listed(&cli, "posts")["indexingPolicy"]["indexingMode"],
        "none"
    );
}

/// Container `id` as `partita container list` shows it.
fn listed(cli: &Cli, id: &str) -> Value {
    let listed = cli.ok(&["container", "list"]);
    listed["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} not in {listed}"))
}

#[test]
fn documents_are_imported_in_bulk_from_json_lines() {
    let cli = Cli::new();
    cli.ok(&["container", "create", "docs", "--pk", "/pk"]);
    let file = cli.dir.path().join("docs.jsonl");
    let mut lines = String::new();
    for i in 0..250 {
        lines.push_str(&json!({"id": format!("d{i}"), "pk": format!("p{}", i % 5)}).to_string());
        lines.push('\n');
    }
    lines.push('\n'); // blank lines are skipped
    std::fs::write(&file, &lines).unwrap();
    let path = file.to_str().unwrap();
    let imported = cli.ok(&["item", "import", "docs", path, "--chunk-size", "100"]);
    assert_eq!(imported["documents"], 250);
    assert_eq!(imported["transactions"], 15);
    assert!(imported["documentsPerSecond"].as_f64().unwrap() > 0.0);
    let count = cli.ok(&["query", "docs", "SELECT VALUE COUNT(1) FROM c"]);
    assert_eq!(count["items"], json!([250]));
    // A partition cache with no room reads every partition from storage.
    let count = cli.ok(&[
        "--cache-size",
        "1KB",
        "query",
        "docs",
        "SELECT VALUE COUNT(1) FROM c",
    ]);
    assert_eq!(count["items"], json!([250]));
    let (ok, usage) = cli.run(&["--cache-size", "lots", "query", "docs", "SELECT 1"]);
    assert!(!ok && usage.to_string().contains("not a size"), "{usage}");

    // Again: every document exists (409), unless --upsert.
    let failed = cli.fails(&["item", "import", "docs", path], 409);
    assert_eq!(failed["committed"], 0);
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("already exists")
    );
    cli.ok(&["item", "import", "docs", path, "--upsert"]);

    // A line that is not JSON stops the import there, naming it; what came
    // before it is written.
    let bad = cli.dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"id\": \"n1\", \"pk\": \"q\"}\n{\"id\": \"n2\", \"pk\": \n",
    )
    .unwrap();
    let failed = cli.fails(&["item", "import", "docs", bad.to_str().unwrap()], 400);
    let message = failed["message"].as_str().unwrap();
    assert!(message.contains("bad.jsonl line 2"), "{message}");
    assert!(message.contains("after 1 documents"), "{message}");
    cli.ok(&["item", "read", "docs", "--pk", "q", "--id", "n1"]);

    // Standard input.
    let mut child = Command::new(env!("CARGO_BIN_EXE_partita"))
        .arg("--data")
        .arg(cli.dir.path())
        .args(["item", "import", "docs", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run partita item import -");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"{\"id\": \"s1\", \"pk\": \"s\"}\n{\"id\": \"s2\", \"pk\": \"s\"}\n")
        .expect("write stdin");
    let output = child.wait_with_output().expect("import output");
    assert!(output.status.success());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (
            report["documents"].as_u64(),
            report["transactions"].as_u64()
        ),
        (Some(2), Some(1))
    );
}
