//! Shared helpers of the runtime's integration tests: an in-memory engine
//! database, and one-call wrappers around `run_js` that commit on success
//! and roll back on failure, as the facade does.

#![allow(dead_code, unreachable_pub, clippy::result_large_err)]

use engine::{Container, Database};
use runtime::{Failure, Invocation, Limits, Output, Script, run_js};
use serde_json::Value;

/// Reads a script from `sprocs/samples/js/`.
pub fn sproc(name: &str) -> String {
    let path = format!("{}/../sprocs/samples/js/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// A fresh in-memory database with one container.
pub fn container(id: &str, pk_path: &str) -> (Database, Container) {
    let db = Database::in_memory();
    let c = db.create_container(id, pk_path).expect("create container");
    (db, c)
}

/// Runs `invocation` in one transaction on `pk`: commits on Ok, rolls back
/// on Err.
pub fn call_with(
    c: &Container,
    pk: &str,
    id: &str,
    body: &str,
    invocation: Invocation,
    limits: &Limits,
) -> Result<Output, Failure> {
    let mut txn = c.begin(pk).expect("begin");
    let script = Script {
        id,
        version: version_of(body),
        body,
    };
    let res = run_js(&script, invocation, &mut txn, limits);
    if res.is_ok() {
        txn.commit().expect("commit");
    }
    res
}

/// A stable version number for a script text (tests change scripts often).
pub fn version_of(body: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    h.finish()
}

/// Calls a stored procedure with default limits.
pub fn call(c: &Container, pk: &str, body: &str, params: Vec<Value>) -> Result<Output, Failure> {
    call_with(
        c,
        pk,
        "sproc",
        body,
        Invocation::Procedure { params },
        &Limits::default(),
    )
}

/// The body a successful call set.
pub fn ok_body(res: Result<Output, Failure>) -> Value {
    match res {
        Ok(out) => out.body.unwrap_or(Value::Null),
        Err(f) => panic!(
            "call failed: {} (status {}, substatus {:?}); logs: {}",
            f.error,
            f.error.status(),
            f.error.substatus(),
            f.logs
        ),
    }
}

/// The failure of a call expected to fail.
pub fn failure(res: Result<Output, Failure>) -> Failure {
    match res {
        Ok(out) => panic!("call succeeded with {:?}", out.body),
        Err(f) => f,
    }
}
