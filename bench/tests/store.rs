//! `partita-store-bench` end to end on a tiny store: builds both stores,
//! measures each in a child process, and prints the table and the JSON.
//! No timing is checked; the children check every read and query result
//! and that both sides used their indexes, and the parent that both sides'
//! queries returned the same documents.

use std::process::Command;

use serde_json::Value;

#[test]
fn the_store_bench_prints_its_table_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("store.json");
    let out = Command::new(env!("CARGO_BIN_EXE_partita-store-bench"))
        .args([
            "--sizes",
            "2000",
            "--rounds",
            "1",
            "--reads",
            "500",
            "--crash-writes",
            "300",
            "--rewrites",
            "500",
            "--json",
        ])
        .arg(&json)
        .arg("--dir")
        .arg(dir.path().join("stores"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("| measure | Partita 2k | SQLite 2k | × |"),
        "{stdout}"
    );
    for row in [
        "| build (documents/s) |",
        "| open + first read (ms) |",
        "| VmRSS after open (MB) |",
        "| cold point read p99 (µs) |",
        "| query c.n = @n (1 document), first run (ms) |",
        "| query c.g = @g, later runs (ms) |",
        "| query TOP 10 ORDER BY c.n DESC, later runs (ms) |",
        "| query c.g = @g AND c.n >= @n, later runs (ms) |",
        "| open + first read after a SIGKILL mid-writes (ms) |",
        "| disk after --rewrites replacements of existing documents (MB) |",
    ] {
        assert!(stdout.contains(row), "{row} missing from\n{stdout}");
    }
    // Only the cache's row has a figure for one side alone.
    for line in stdout.lines().filter(|l| !l.contains("partition cache")) {
        assert!(!line.contains("| – |"), "a figure is missing:\n{stdout}");
    }

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let size = &report["sizes"][0];
    assert_eq!(size["docs"], 2000);
    for system in ["partita", "sqlite"] {
        let runs = size["systems"][system]["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{system}");
        assert!(size["systems"][system]["disk_bytes"].as_u64().unwrap() > 0);
        let rewritten = &size["systems"][system]["medians"]["rewritten_disk_mb"];
        assert!(rewritten.as_f64().unwrap() > 0.0, "{system}: {rewritten}");
        assert_eq!(size["systems"][system]["build"]["reused"], false);
        assert_eq!(
            runs[0]["returned"],
            serde_json::json!({"eq": 3, "group": 300, "top": 30, "group_from": 150}),
            "{system}: 3 runs of each query"
        );
    }
    // SQLite's plans, as checked by its child.
    let plans = &size["systems"]["sqlite"]["runs"][0]["answered"];
    assert!(
        plans["top"]
            .as_str()
            .unwrap()
            .contains("USING INDEX docs_n"),
        "{plans}"
    );
    assert!(stdout.contains("- query group: Partita `SELECT * FROM c WHERE c.g = @g`"));
    assert!(
        plans["group_from"]
            .as_str()
            .unwrap()
            .contains("USING INDEX docs_g"),
        "{plans}"
    );

    // The crashed and rewritten copies are gone; the stores are as built.
    let mut left: Vec<String> = std::fs::read_dir(dir.path().join("stores/docs-2000"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "partita",
            "partita.build.json",
            "sqlite",
            "sqlite.build.json"
        ],
        "{stdout}"
    );

    // A second run reuses the stores kept in --dir, and leaves out the
    // crash, the rewrites and their rows.
    let out = Command::new(env!("CARGO_BIN_EXE_partita-store-bench"))
        .args([
            "--sizes",
            "2000",
            "--rounds",
            "1",
            "--reads",
            "100",
            "--crash-writes",
            "0",
            "--rewrites",
            "0",
            "--dir",
        ])
        .arg(dir.path().join("stores"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("reused from an earlier run: Partita 2000, SQLite 2000"),
        "{stdout}"
    );
    assert!(!stdout.contains("after a SIGKILL"), "{stdout}");
    assert!(!stdout.contains("replacements"), "{stdout}");
}
