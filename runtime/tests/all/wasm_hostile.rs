//! Hostile WebAssembly modules: each is stopped with a clear error, rolls
//! its transaction back, and leaves the host healthy (a normal call
//! succeeds right after).

use std::time::Duration;

use engine::PartitionKey;
use host_api::ScriptKind;
use runtime::{Budget, Error, Failure, Invocation, Limits};
use serde_json::json;

use crate::support::wasm::{call, call_with, module};
use crate::support::{container, failure, wat};

/// Every import a hostile module here uses.
const IMPORTS: &str = r#"
  (import "partita_v1" "log" (func $log (param i32 i32)))
  (import "partita_v1" "read" (func $read (param i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "create" (func $create (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "partita_v1" "take_result" (func $take_result (param i32 i32) (result i32)))
"#;

fn procedure(body: &str) -> Vec<u8> {
    module(
        &format!("(module {IMPORTS} (memory (export \"memory\") 1) {body})"),
        ScriptKind::StoredProcedure,
    )
}

/// Runs `m` in a fresh container with `limits`; then checks the host is
/// healthy: createComment.wat still works.
fn hostile(m: &[u8], limits: &Limits) -> Failure {
    let (_db, c) = container("posts", "/postId");
    let f = failure(call_with(
        &c,
        "p1",
        m,
        Invocation::Procedure { params: vec![] },
        limits,
    ));
    assert_eq!(
        c.snapshot(&PartitionKey::from("p1"))
            .expect("snapshot")
            .len(),
        0,
        "rolled back"
    );
    healthy();
    f
}

fn healthy() {
    let (_db, c) = container("posts", "/postId");
    c.create_item(
        "p1",
        json!({"id": "p1", "postId": "p1", "commentCount": 0}),
        None,
    )
    .unwrap();
    let m = module(&wat("createComment.wat"), ScriptKind::StoredProcedure);
    call(&c, "p1", &m, vec![json!("p1"), json!({"text": "ok"})]).unwrap();
    assert_eq!(c.read_item("p1", "p1").unwrap()["commentCount"], 1);
}

/// Writes a document first, so a rollback is visible.
const WRITE_FIRST: &str = r#"
  (data (i32.const 0) "{\"id\":\"w\",\"postId\":\"p1\"}")
  (func $write_first
    (if (i32.lt_s (call $create (i32.const 0) (i32.const 24) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))
          (i32.const 0)) (then unreachable)))"#;

#[test]
fn infinite_loop_runs_out_of_fuel() {
    let m = procedure(&format!(
        r#"{WRITE_FIRST}
           (func (export "partita_procedure") (result i32)
             (call $write_first)
             (loop $forever (br $forever))
             (i32.const 0))"#
    ));
    let limits = Limits {
        fuel: 5_000_000,
        ..Limits::default()
    };
    let f = hostile(&m, &limits);
    assert_eq!(f.error.status(), 408, "{}", f.error);
    assert!(
        matches!(f.error, Error::Budget(Budget::Fuel { limit: 5_000_000 })),
        "{}",
        f.error
    );
    assert_eq!(f.stats.fuel, 5_000_000);
}

#[test]
fn infinite_loop_hits_the_deadline() {
    let m = procedure(
        r#"(func (export "partita_procedure") (result i32)
             (loop $forever (br $forever))
             (i32.const 0))"#,
    );
    let limits = Limits {
        fuel: u64::MAX / 2,
        wall_time: Duration::from_millis(20),
        ..Limits::default()
    };
    let f = hostile(&m, &limits);
    assert_eq!(f.error.status(), 408, "{}", f.error);
    assert!(
        matches!(f.error, Error::Budget(Budget::WallTime { .. })),
        "{}",
        f.error
    );
}

#[test]
fn memory_growth_stops_at_the_limit() {
    // Grows one page at a time until memory.grow answers -1, then returns
    // the number of pages it got as the failure's substatus.
    let grow = r#"
      (func $grow (result i32)
        (local $n i32)
        (block $refused
          (loop $more
            (br_if $refused (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
            (local.set $n (i32.add (local.get $n) (i32.const 1)))
            (br $more)))
        (local.get $n))"#;
    let limits = Limits {
        max_memory_bytes: 1 << 20,
        ..Limits::default()
    };
    let m = procedure(&format!(
        r#"{grow} (func (export "partita_procedure") (result i32) (call $grow))"#
    ));
    let f = hostile(&m, &limits);
    // 1 MiB is 16 pages; the module started with one.
    assert_eq!(
        (f.error.status(), f.error.substatus()),
        (400, Some(15)),
        "{}",
        f.error
    );

    // A guest that then traps (as a Rust guest aborts) is told why.
    let m = procedure(&format!(
        r#"{grow} (func (export "partita_procedure") (result i32) (drop (call $grow)) unreachable)"#
    ));
    let f = hostile(&m, &limits);
    assert_eq!(f.error.status(), 400);
    let message = f.error.to_string();
    assert!(
        message.contains("memory limit of 1048576 bytes"),
        "{message}"
    );
    assert!(message.contains("unreachable"), "{message}");

    // A module whose initial memory is over the limit cannot start.
    let m = module(
        r#"(module (memory (export "memory") 32)
             (func (export "partita_procedure") (result i32) (i32.const 0)))"#,
        ScriptKind::StoredProcedure,
    );
    let f = hostile(&m, &limits);
    assert_eq!(f.error.status(), 400);
    assert!(f.error.to_string().contains("memory limit"), "{}", f.error);
}

#[test]
fn deep_recursion_overflows_the_stack() {
    let m = procedure(
        r#"(func $down (param i32) (result i32)
             (call $down (i32.add (local.get 0) (i32.const 1))))
           (func (export "partita_procedure") (result i32)
             (call $down (i32.const 0)))"#,
    );
    let f = hostile(&m, &Limits::default());
    assert_eq!(f.error.status(), 400);
    assert!(
        f.error.to_string().contains("call stack exhausted"),
        "{}",
        f.error
    );
    let Error::Trap { backtrace, .. } = &f.error else {
        panic!("{}", f.error)
    };
    assert!(
        backtrace.as_deref().unwrap_or("").contains("down"),
        "{backtrace:?}"
    );
}

#[test]
fn bad_pointers_trap_with_a_clear_error() {
    for (what, body) in [
        ("input", "(call $log (i32.const 0x7fffffff) (i32.const 10))"),
        ("input", "(call $log (i32.const 65530) (i32.const 7))"),
        // A huge length: -1 is 4 GiB - 1 read as unsigned.
        (
            "input",
            "(drop (call $read (i32.const 0) (i32.const -1) (i32.const 0) (i32.const 0)))",
        ),
        (
            "output",
            "(drop (call $take_result (i32.const 100) (i32.const -1)))",
        ),
        (
            "output",
            "(drop (call $read (i32.const 0) (i32.const 1) (i32.const 65535) (i32.const 2)))",
        ),
    ] {
        let m = procedure(&format!(
            r#"{WRITE_FIRST}
               (func $main (export "partita_procedure") (result i32)
                 (call $write_first)
                 {body}
                 (i32.const 0))"#
        ));
        let f = hostile(&m, &Limits::default());
        assert_eq!(f.error.status(), 400, "{body}: {}", f.error);
        let message = f.error.to_string();
        assert!(
            message.contains(&format!("the {what} range")),
            "{body}: {message}"
        );
        assert!(
            message.contains("outside the guest memory of 65536 bytes"),
            "{message}"
        );
        let Error::Trap { backtrace, .. } = &f.error else {
            panic!("{}", f.error)
        };
        assert!(
            backtrace.as_deref().unwrap_or("").contains("main"),
            "{backtrace:?}"
        );
    }
}

#[test]
fn bad_data_is_an_error_code_not_a_trap() {
    // Each operation answers -400; the guest handles it and commits.
    for (data, op) in [
        // An id that is not UTF-8.
        (
            r#""\ff\fe""#,
            "(call $read (i32.const 0) (i32.const 2) (i32.const 100) (i32.const 100))",
        ),
        // A document that is not JSON.
        (
            r#""{not json""#,
            "(call $create (i32.const 0) (i32.const 9) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))",
        ),
        // A document of another partition.
        (
            r#""{\"id\":\"x\",\"postId\":\"p2\"}""#,
            "(call $create (i32.const 0) (i32.const 24) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))",
        ),
    ] {
        let m = procedure(&format!(
            r#"(data (i32.const 0) {data})
               (func (export "partita_procedure") (result i32)
                 (local $n i32)
                 (if (i32.ne {op} (i32.const -400)) (then unreachable))
                 ;; The message waits; log it.
                 (local.set $n (call $take_result (i32.const 1000) (i32.const 1000)))
                 (call $log (i32.const 1000) (local.get $n))
                 (i32.const 0))"#
        ));
        let (_db, c) = container("posts", "/postId");
        let out = call(&c, "p1", &m, vec![]).unwrap_or_else(|f| panic!("{op}: {}", f.error));
        assert!(!out.logs.is_empty(), "{op}");
        assert_eq!(
            c.snapshot(&PartitionKey::from("p1"))
                .expect("snapshot")
                .len(),
            0
        );
    }

    // Writing another partition after a good write, then failing: the
    // whole call rolls back.
    let m = procedure(
        r#"(data (i32.const 0) "{\"id\":\"x\",\"postId\":\"p2\"}")
           (data (i32.const 100) "{\"id\":\"y\",\"postId\":\"p1\"}")
           (func (export "partita_procedure") (result i32)
             (local $r i32)
             (if (i32.lt_s (call $create (i32.const 100) (i32.const 24) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))
                   (i32.const 0)) (then unreachable))
             (local.set $r (call $create (i32.const 0) (i32.const 24) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
             (i32.sub (i32.const 0) (local.get $r)))"#,
    );
    let f = hostile(&m, &Limits::default());
    assert_eq!(
        (f.error.status(), f.error.substatus()),
        (400, Some(400)),
        "{}",
        f.error
    );
}

#[test]
fn a_start_function_cannot_call_the_host() {
    let m = procedure(
        r#"(func $init (call $log (i32.const 0) (i32.const 1)))
           (start $init)
           (func (export "partita_procedure") (result i32) (i32.const 0))"#,
    );
    let f = hostile(&m, &Limits::default());
    assert_eq!(f.error.status(), 400);
    assert!(
        f.error.to_string().contains("start function"),
        "{}",
        f.error
    );
}
