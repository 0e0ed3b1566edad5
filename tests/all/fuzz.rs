//! `partita::fuzz` against real procedures: the workload's createComment
//! stays atomic under every fault kind, sequentially and concurrently; the
//! deliberately broken variant (`sprocs/fuzz/createCommentBroken.js`) is
//! caught, with a reproduction that replays the violation; and an abort the
//! script cannot catch is what keeps the broken variant's swallowed error
//! from mattering.
//!
//! `PARTITA_FUZZ_CALLS` (default 150; each budget fault rebuilds a JavaScript context, which
//! costs ~0.25 s in a debug build) sets the calls of the clean runs.
//!
//! With the `postgres` feature, the same runs on two nodes sharing one
//! PostgreSQL database ([`fuzz::FuzzNodes`]): every fault leaves the
//! partition as it was, as both nodes read it, sequentially and with the
//! other node writing concurrently; the broken variant is caught there
//! too. `PARTITA_FUZZ_NODES_CALLS` (default 60) sets their calls.

use std::sync::Arc;

use partita::fuzz::{self, FaultKinds, FuzzConfig, FuzzReport, Invariant, params_from_templates};
use partita::{PartitionKey, ScriptKind, ScriptProperties};
use serde_json::{Value, json};

use crate::support;

fn calls() -> u64 {
    std::env::var("PARTITA_FUZZ_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150)
}

/// The script `name`: a variant written for the fuzzer's tests from
/// `sprocs/fuzz/`, or the workload's own from `sprocs/samples/js/`.
fn sproc(name: &str) -> String {
    let dir = match name {
        "createCommentBroken" | "createCommentTwoCalls" => "fuzz",
        _ => "samples/js",
    };
    support::sprocs_file(&format!("{dir}/{name}.js"))
}

/// createComment (or a variant) on posts p1..pn, with the invariant.
fn blog(procedure: &str, partitions: usize) -> FuzzConfig {
    let keys: Vec<PartitionKey> = (1..=partitions).map(|i| format!("p{i}").into()).collect();
    let mut config = FuzzConfig::new(
        "/postId",
        ScriptProperties::stored_procedure(procedure, sproc(procedure)),
        keys.clone(),
        params_from_templates(vec![
            vec![json!("$pk"), json!({"text": "hi"})],
            vec![json!("$pk"), json!({"id": "$seed", "text": "with an id"})],
        ]),
        Invariant::Query {
            sql: "SELECT VALUE SUM(c.type = 'post' ? c.commentCount : -1) FROM c".into(),
            expect: json!([0]),
        },
    );
    config.seed_documents = keys
        .iter()
        .map(|k| json!({"id": k.to_value(), "postId": k.to_value(), "type": "post", "commentCount": 0}))
        .collect();
    config
}

/// Runs `config` and checks its report: no violation, every call made,
/// a fault of each of `kinds` injected and each of `points` reached.
/// Returns the report and its JSON.
fn run_atomic(config: &FuzzConfig, kinds: &[&str], points: &[&str]) -> (FuzzReport, Value) {
    let report = fuzz::run(config).expect("run");
    let json = report.to_json();
    assert_eq!(report.violation, None, "{json:#}");
    assert_eq!(report.calls, config.calls);
    for kind in kinds {
        assert!(
            report.faults.get(*kind).copied().unwrap_or(0) > 0,
            "no {kind} fault: {json:#}"
        );
    }
    for point in points {
        assert!(
            report.fault_points.contains_key(*point),
            "{point} never reached: {json:#}"
        );
    }
    (report, json)
}

#[test]
fn create_comment_is_atomic_under_every_fault() {
    let mut config = blog("createComment", 2);
    config.calls = calls();
    config.seed = 42;
    // createComment performs read, replace, create: a fault reached each.
    let (report, json) = run_atomic(
        &config,
        &[
            "none",
            "host_error",
            "host_abort",
            "budget",
            "crash_before_durable_write",
            "crash_after_durable_write",
        ],
        &[
            "op 1 (read)",
            "op 2 (replace)",
            "op 3 (create)",
            "instructions",
            "commit",
        ],
    );
    assert!(
        report.crashes > 0 && report.committed > 0 && report.failed > 0,
        "{json:#}"
    );
    assert_eq!(json["violations"], 0);
}

/// The Rust createComment compiled to WebAssembly, under the same faults:
/// host errors reach the guest as error codes, aborts and budget (fuel)
/// faults end the call uncatchably, crashes hit the commit.
#[test]
fn wasm_create_comment_is_atomic_under_every_fault() {
    let mut config = blog("createComment", 2);
    config.scripts = vec![ScriptProperties::wasm(
        "createComment",
        ScriptKind::StoredProcedure,
        support::guest_module("create_comment"),
    )];
    config.calls = calls();
    config.seed = 7;
    run_atomic(
        &config,
        &[
            "host_error",
            "host_abort",
            "budget",
            "crash_before_durable_write",
        ],
        &[
            "op 1 (read)",
            "op 2 (replace)",
            "op 3 (create)",
            "fuel",
            "commit",
        ],
    );
}

#[test]
fn create_comment_is_atomic_with_concurrent_calls() {
    let mut config = blog("createComment", 3);
    config.calls = calls();
    config.seed = 7;
    config.concurrency = 4;
    // Budget faults are covered sequentially above; here they would only
    // add context rebuilds.
    config.faults.budgets = false;
    let report = fuzz::run(&config).expect("run");
    assert_eq!(report.violation, None, "{:#}", report.to_json());
    assert_eq!(report.calls, config.calls);
    assert!(report.crashes > 0);
}

#[test]
fn the_broken_variant_is_caught_with_a_reproduction() {
    let mut config = blog("createCommentBroken", 2);
    config.calls = 500;
    config.seed = 3;
    let (violation, json) = caught_and_replayed(&config);
    assert_eq!(violation.kind, "not_atomic", "{json:#}");
    assert_eq!(violation.fault["kind"], "host_error", "{json:#}");
    assert_eq!(
        violation.fault["operation"], 3,
        "the create is the third operation: {json:#}"
    );
    assert_eq!(violation.outcome, "committed");
    assert_eq!(json["violations"], 1);
}

/// Runs `config`, which must find a violation, and replays the
/// reproduction it reports, which must find the same fault at its last
/// call. Returns the violation and the report's JSON.
fn caught_and_replayed(config: &FuzzConfig) -> (fuzz::Violation, Value) {
    let report = fuzz::run(config).expect("run");
    let json = report.to_json();
    let violation = report
        .violation
        .clone()
        .unwrap_or_else(|| panic!("not caught: {json:#}"));
    let repro = report.reproduction.expect("a reproduction");
    assert!(repro.calls <= violation.call + 1);
    let mut replay = config.clone();
    replay.seed = repro.seed;
    replay.calls = repro.calls;
    replay.shrink = false;
    let again = fuzz::run(&replay).expect("replay");
    let found = again.violation.expect("the reproduction reproduces");
    assert_eq!(found.call, repro.calls - 1);
    assert_eq!(found.fault, violation.fault);
    (violation, json)
}

/// The variant that writes the comment in a separate call: every call is
/// atomic, but the invariant breaks between the two calls of a comment, and
/// the fuzzer reports it with a one-call reproduction.
#[test]
fn the_two_call_variant_is_caught_by_the_invariant() {
    let mut config = blog("createCommentTwoCalls", 2);
    config.params = params_from_templates(vec![
        vec![json!("$pk"), json!({"text": "hi"}), json!("count")],
        vec![json!("$pk"), json!({"text": "hi"}), json!("comment")],
    ]);
    config.calls = 50;
    config.seed = 11;
    let report = fuzz::run(&config).expect("run");
    let json = report.to_json();
    let violation = report
        .violation
        .clone()
        .unwrap_or_else(|| panic!("not caught: {json:#}"));
    assert_eq!(violation.kind, "invariant", "{json:#}");
    let repro = report.reproduction.expect("a reproduction");
    assert_eq!(repro.calls, 1, "one half of the pair is enough: {json:#}");
}

#[test]
fn uncatchable_aborts_leave_the_broken_variant_atomic() {
    // The broken variant only breaks when its create's error is handed to
    // the callback it swallows in; an abort the script cannot catch ends
    // the call and rolls everything back.
    let mut config = blog("createCommentBroken", 1);
    config.calls = 150;
    config.faults = FaultKinds {
        host_errors: false,
        host_aborts: true,
        budgets: false,
        crashes: false,
    };
    let report = fuzz::run(&config).expect("run");
    assert_eq!(report.violation, None, "{:#}", report.to_json());
    assert!(report.fault_points.contains_key("op 3 (create)"));

    config.faults = FaultKinds {
        host_errors: true,
        host_aborts: false,
        budgets: false,
        crashes: false,
    };
    assert!(fuzz::run(&config).expect("run").violation.is_some());
}

#[test]
fn a_closure_invariant_and_its_violation() {
    let mut config = blog("createComment", 1);
    config.calls = 40;
    // Wrong on purpose: no partition may hold more than 3 documents.
    config.invariant = Invariant::Check(Arc::new(|_pk: &PartitionKey, docs: &[Value]| {
        if docs.len() > 3 {
            Err(format!("{} documents", docs.len()))
        } else {
            Ok(())
        }
    }));
    config.faults = FaultKinds {
        host_errors: false,
        host_aborts: false,
        budgets: false,
        crashes: false,
    };
    let report = fuzz::run(&config).expect("run");
    let violation = report.violation.expect("the fourth document breaks it");
    assert_eq!(violation.kind, "invariant");
    assert_eq!(violation.message, "4 documents");
    assert_eq!(
        violation.call, 2,
        "seed + 3 comments = 4 documents after the third call"
    );
    assert_eq!(report.reproduction.map(|r| r.calls), Some(3));
}

#[test]
fn bad_configurations_are_refused_with_400() {
    let mut config = blog("createComment", 1);
    config.partition_keys.clear();
    assert_eq!(fuzz::run(&config).expect_err("no partitions").status(), 400);
    let mut config = blog("createComment", 1);
    config.procedure = "missing".into();
    assert_eq!(fuzz::run(&config).expect_err("no procedure").status(), 400);
    let mut config = blog("createComment", 1);
    config.seed_documents.push(json!({"postId": "p1"}));
    assert_eq!(
        fuzz::run(&config)
            .expect_err("a document without id")
            .status(),
        400
    );
}

/// The script-free createComment, a batch of the post's patch and the
/// comment's create, stays atomic with a fault at each operation and
/// crashes at commit, sequentially and concurrently.
#[test]
fn a_create_comment_batch_is_atomic_under_every_fault() {
    for concurrency in [1, 2] {
        let keys: Vec<PartitionKey> = (1..=2).map(|i| format!("p{i}").into()).collect();
        let mut config = FuzzConfig::batch(
            "/postId",
            keys.clone(),
            params_from_templates(vec![vec![
                json!({"operationType": "Patch", "id": "$pk",
                       "resourceBody": [{"op": "incr", "path": "/commentCount", "value": 1}]}),
                json!({"operationType": "Create",
                       "resourceBody": {"id": "$seed", "postId": "$pk", "text": "hi"}}),
            ]]),
            Invariant::Query {
                sql: "SELECT VALUE SUM(c.type = 'post' ? c.commentCount : -1) FROM c".into(),
                expect: json!([0]),
            },
        );
        config.seed_documents = keys
            .iter()
            .map(|k| json!({"id": k.to_value(), "postId": k.to_value(), "type": "post", "commentCount": 0}))
            .collect();
        config.calls = calls();
        config.concurrency = concurrency;
        run_atomic(
            &config,
            &[
                "none",
                "host_error",
                "crash_before_durable_write",
                "crash_after_durable_write",
            ],
            &["op 1 (batch operation)", "op 2 (batch operation)"],
        );
    }
}

/// A procedure whose documents lack the partition-key property writes them
/// into the call's partition, as on Cosmos DB; the fuzzer's copies of a
/// partition (for the clean rerun and the invariant) must accept them
/// too, or every such procedure shows a false violation.
#[test]
fn documents_without_the_key_property_are_not_a_violation() {
    let mut config = blog("createComment", 1);
    config.partition_key_path = "/pk".into();
    config.seed_documents =
        vec![json!({"id": "p1", "pk": "p1", "type": "post", "commentCount": 0})];
    config.calls = 40;
    let report = fuzz::run(&config).expect("run");
    let json = report.to_json();
    assert_eq!(report.violation, None, "{json:#}");
    assert!(report.committed > 0, "{json:#}");
}

/// The fuzzer with JavaScript in worker processes (as `partita serve` runs
/// it for the Data Explorer): every fault kind still lands, and a correct
/// procedure whose comments get generated ids shows no violation (the
/// worker's ids follow the fuzzer's seed).
#[test]
fn create_comment_is_atomic_in_worker_processes() {
    let pool = partita::WorkerPool::new(partita::WorkerOptions::new(
        env!("CARGO_BIN_EXE_script-worker"),
        Vec::<String>::new(),
    ));
    let mut config = blog("createComment", 2);
    config.calls = calls().min(80);
    config.seed = 5;
    config.limits = partita::Limits {
        workers: Some(pool),
        ..partita::Limits::default()
    };
    let report = fuzz::run(&config).expect("run");
    let json = report.to_json();
    assert_eq!(report.violation, None, "{json:#}");
    assert_eq!(report.calls, config.calls);
    assert!(report.committed > 0 && report.failed > 0, "{json:#}");
}

/// createComment on two nodes over one PostgreSQL database, with the
/// calls spread over the nodes: sequentially (after each call both nodes
/// read exactly what it committed, or what it found when it failed) and
/// with two threads (one node writes while the other's call fails or
/// crashes). Budget faults only rebuild contexts here: they are covered
/// above.
#[cfg(feature = "postgres")]
#[test]
fn create_comment_is_atomic_on_two_nodes() {
    let calls = std::env::var("PARTITA_FUZZ_NODES_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    for concurrency in [1, 2] {
        let mut config = blog("createComment", 3);
        config.nodes = Some(fuzz::FuzzNodes {
            url: engine::testing::postgres::database(),
            count: 2,
        });
        config.calls = calls;
        config.seed = 42;
        config.concurrency = concurrency;
        config.faults.budgets = false;
        let (report, json) = run_atomic(
            &config,
            &[
                "host_error",
                "host_abort",
                "crash_before_durable_write",
                "crash_after_durable_write",
            ],
            &["op 1 (read)", "op 2 (replace)", "op 3 (create)", "commit"],
        );
        assert!(report.crashes > 0 && report.committed > 0, "{json:#}");
    }
}

/// The broken variant is caught on two nodes as on one, and its
/// reproduction replays it there.
#[cfg(feature = "postgres")]
#[test]
fn the_broken_variant_is_caught_on_two_nodes() {
    let mut config = blog("createCommentBroken", 2);
    config.nodes = Some(fuzz::FuzzNodes {
        url: engine::testing::postgres::database(),
        count: 2,
    });
    config.calls = 200;
    config.seed = 3;
    config.faults.budgets = false;
    let (violation, json) = caught_and_replayed(&config);
    assert_eq!(violation.kind, "not_atomic", "{json:#}");
}

/// Several nodes on a count of 0 are refused with 400.
#[test]
fn zero_nodes_are_refused_with_400() {
    let mut config = blog("createComment", 1);
    config.nodes = Some(fuzz::FuzzNodes {
        url: "postgresql://unused".into(),
        count: 0,
    });
    assert_eq!(fuzz::run(&config).expect_err("no nodes").status(), 400);
}
