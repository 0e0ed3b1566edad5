//! Shared helpers of the WebAssembly tests: the WAT procedures of
//! `sprocs/samples/wat/`, and one-call wrappers around `run_wasm` that
//! commit on success and roll back on failure, as the facade does.

#![allow(dead_code, unreachable_pub, clippy::result_large_err)]

use engine::{Container, Database};
use host_api::ScriptKind;
use runtime::{Failure, Invocation, Limits, Output, WasmCache, WasmScript, prepare_wasm, run_wasm};
use serde_json::Value;

/// Reads a module from `sprocs/samples/wat/`.
pub fn wat(name: &str) -> String {
    let path = format!(
        "{}/../sprocs/samples/wat/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// A fresh in-memory database with one container.
pub fn container(id: &str, pk_path: &str) -> (Database, Container) {
    let db = Database::in_memory();
    let c = db.create_container(id, pk_path).expect("create container");
    (db, c)
}

/// `module` (WAT or wasm) checked and compiled as a script of `kind`.
pub fn module(text: &str, kind: ScriptKind) -> Vec<u8> {
    let script = script(text.as_bytes());
    prepare_wasm(&script, kind).unwrap_or_else(|e| panic!("module refused: {e}"))
}

/// A script over the process's cache, in memory.
pub fn script(module: &[u8]) -> WasmScript<'_> {
    WasmScript {
        id: "test",
        module,
        shared: None,
        cache: WasmCache::global(),
        artifact_dir: None,
    }
}

/// Runs `invocation` in one transaction on `pk`: commits on Ok, rolls back
/// on Err.
pub fn call_with(
    c: &Container,
    pk: &str,
    module: &[u8],
    invocation: Invocation,
    limits: &Limits,
) -> Result<Output, Failure> {
    let mut txn = c.begin(pk).expect("begin");
    let res = run_wasm(&script(module), invocation, &mut txn, limits);
    if res.is_ok() {
        txn.commit().expect("commit");
    }
    res
}

/// Calls a procedure with default limits.
pub fn call(c: &Container, pk: &str, module: &[u8], params: Vec<Value>) -> Result<Output, Failure> {
    call_with(
        c,
        pk,
        module,
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
