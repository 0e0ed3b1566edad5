//! `partita fuzz` end to end: the JSON report on stdout, exit status 0 for
//! createComment and 1 for the broken variant (with a reproduction that
//! replays it), and setup errors as JSON on stderr.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const INVARIANT: &str = "SELECT VALUE SUM(c.type = 'post' ? c.commentCount : -1) FROM c";

fn partita(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_partita"))
        .arg("--data")
        .arg(data)
        .args(args)
        .output()
        .expect("run partita")
}

fn ok(data: &Path, args: &[&str]) {
    let out = partita(data, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn setup(data: &Path) {
    let sprocs = concat!(env!("CARGO_MANIFEST_DIR"), "/../sprocs");
    ok(data, &["container", "create", "posts", "--pk", "/postId"]);
    for (name, dir) in [
        ("createComment", "samples/js"),
        ("createCommentBroken", "fuzz"),
    ] {
        ok(
            data,
            &[
                "sproc",
                "create",
                "posts",
                name,
                &format!("{sprocs}/{dir}/{name}.js"),
            ],
        );
    }
    for p in ["p1", "p2"] {
        let body = format!(r#"{{"id":"{p}","postId":"{p}","type":"post","commentCount":0}}"#);
        ok(
            data,
            &["item", "create", "posts", "--pk", p, "--body", &body],
        );
    }
}

fn fuzz(data: &Path, procedure: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let mut args = vec![
        "fuzz",
        "posts",
        procedure,
        "--pk",
        "p1",
        "--pk",
        "p2",
        "--params",
        r#"["$pk", {"text": "hi"}]"#,
        "--invariant",
        INVARIANT,
        "--expect",
        "[0]",
    ];
    args.extend_from_slice(extra);
    let out = partita(data, &args);
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), report)
}

#[test]
fn fuzz_reports_clean_and_broken_procedures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    setup(&data);

    let (code, report) = fuzz(&data, "createComment", &["--calls", "60", "--seed", "5"]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["violations"], 0);
    assert_eq!(report["calls"], 60);
    assert!(report["faults_injected"].as_u64().unwrap_or(0) > 0);

    let (code, report) = fuzz(
        &data,
        "createCommentBroken",
        &["--calls", "2000", "--seed", "7"],
    );
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["violations"], 1);
    assert_eq!(report["first_violation"]["kind"], "not_atomic");
    let seed = report["reproduction"]["seed"]
        .as_u64()
        .expect("a reproduction")
        .to_string();
    let calls = report["reproduction"]["calls"]
        .as_u64()
        .expect("calls")
        .to_string();
    let (code, replay) = fuzz(
        &data,
        "createCommentBroken",
        &["--calls", &calls, "--seed", &seed, "--no-shrink"],
    );
    assert_eq!(code, Some(1), "{replay:#}");
    assert_eq!(
        replay["first_violation"]["fault"],
        report["first_violation"]["fault"]
    );

    // The user's database is only read.
    let out = partita(&data, &["query", "posts", "SELECT VALUE COUNT(1) FROM c"]);
    let page: Value = serde_json::from_slice(&out.stdout).expect("query output");
    assert_eq!(page["items"][0], 2, "{page}");
}

#[test]
fn fuzz_setup_errors_are_json_on_stderr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    setup(&data);
    for (args, status) in [
        (
            vec![
                "fuzz",
                "posts",
                "nope",
                "--pk",
                "p1",
                "--params",
                "[]",
                "--invariant",
                INVARIANT,
                "--expect",
                "[0]",
            ],
            404,
        ),
        (
            vec![
                "fuzz",
                "posts",
                "createComment",
                "--pk",
                "p1",
                "--params",
                "{}",
                "--invariant",
                INVARIANT,
                "--expect",
                "[0]",
            ],
            400,
        ),
        (
            vec![
                "fuzz",
                "posts",
                "createComment",
                "--params",
                "[]",
                "--invariant",
                INVARIANT,
                "--expect",
                "[0]",
            ],
            400,
        ),
    ] {
        let out = partita(&data, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err: Value = serde_json::from_slice(&out.stderr)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(err["status"], status, "{args:?}: {err}");
    }
}

#[test]
fn fuzz_runs_a_batch_as_it_runs_a_procedure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    setup(&data);
    let ops = r#"[{"operationType": "Patch", "id": "$pk",
                   "resourceBody": [{"op": "incr", "path": "/commentCount", "value": 1}]},
                  {"operationType": "Create", "resourceBody": {"id": "$seed", "postId": "$pk"}}]"#;
    let args = [
        "fuzz",
        "posts",
        "--batch",
        "--pk",
        "p1",
        "--pk",
        "p2",
        "--params",
        ops,
        "--invariant",
        INVARIANT,
        "--expect",
        "[0]",
        "--calls",
        "80",
        "--concurrency",
        "2",
    ];
    let out = partita(&data, &args);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert_eq!(
        (report["violations"].clone(), report["calls"].clone()),
        (0.into(), 80.into())
    );
    assert!(
        report["faults_injected"].as_u64().unwrap_or(0) > 0,
        "{report:#}"
    );
    // A batch that breaks the invariant is caught.
    let broken =
        r#"[{"operationType": "Create", "resourceBody": {"id": "$seed", "postId": "$pk"}}]"#;
    let mut args = args.to_vec();
    args[8] = broken;
    let out = partita(&data, &args);
    let report: Value = serde_json::from_slice(&out.stdout).expect("report");
    assert_eq!(out.status.code(), Some(1), "{report:#}");
    assert_eq!(report["first_violation"]["kind"], "invariant", "{report:#}");
}
