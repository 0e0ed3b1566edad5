//! Helpers shared by the modules of the runtime's test binary: an in-memory
//! engine database, the sample scripts of `sprocs/samples/`, and one-call
//! wrappers around `run_js` ([`js`]) and `run_wasm` ([`wasm`]) that commit
//! on success and roll back on failure, as the facade does.

#![allow(clippy::result_large_err)]

use engine::{Container, Database};
use host_api::Collection;
use runtime::{Failure, Output};
use serde_json::Value;

/// Reads a file from `sprocs/samples/<dir>/`.
fn sample(dir: &str, name: &str) -> String {
    let path = format!(
        "{}/../sprocs/samples/{dir}/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// Reads a script from `sprocs/samples/js/`.
pub(crate) fn sproc(name: &str) -> String {
    sample("js", name)
}

/// Reads a module from `sprocs/samples/wat/`.
pub(crate) fn wat(name: &str) -> String {
    sample("wat", name)
}

/// A fresh in-memory database with one container.
pub(crate) fn container(id: &str, pk_path: &str) -> (Database, Container) {
    let db = Database::in_memory();
    let c = db.create_container(id, pk_path).expect("create container");
    (db, c)
}

/// A stable version number for a script text (tests change scripts often).
pub(crate) fn version_of(body: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    h.finish()
}

/// Runs `run` in one transaction on `pk`: commits on Ok, rolls back on Err,
/// as the facade does.
fn in_txn(
    c: &Container,
    pk: &str,
    run: impl FnOnce(&mut dyn Collection) -> Result<Output, Failure>,
) -> Result<Output, Failure> {
    let mut txn = c.begin(pk).expect("begin");
    let res = run(&mut txn);
    if res.is_ok() {
        txn.commit().expect("commit");
    }
    res
}

/// The body a successful call set.
pub(crate) fn ok_body(res: Result<Output, Failure>) -> Value {
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
pub(crate) fn failure(res: Result<Output, Failure>) -> Failure {
    match res {
        Ok(out) => panic!("call succeeded with {:?}", out.body),
        Err(f) => f,
    }
}

/// JavaScript calls through `run_js`.
pub(crate) mod js {
    use engine::Container;
    use runtime::{Failure, Invocation, Limits, Output, Script, run_js};
    use serde_json::Value;

    use super::{in_txn, version_of};

    /// Runs `invocation` in one transaction on `pk`: commits on Ok, rolls
    /// back on Err.
    pub(crate) fn call_with(
        c: &Container,
        pk: &str,
        id: &str,
        body: &str,
        invocation: Invocation,
        limits: &Limits,
    ) -> Result<Output, Failure> {
        let script = Script {
            id,
            version: version_of(body),
            body,
        };
        in_txn(c, pk, |txn| run_js(&script, invocation, txn, limits))
    }

    /// Calls a stored procedure with default limits.
    pub(crate) fn call(
        c: &Container,
        pk: &str,
        body: &str,
        params: Vec<Value>,
    ) -> Result<Output, Failure> {
        call_with(
            c,
            pk,
            "sproc",
            body,
            Invocation::Procedure { params },
            &Limits::default(),
        )
    }
}

/// WebAssembly calls through `run_wasm`.
pub(crate) mod wasm {
    use engine::Container;
    use host_api::ScriptKind;
    use runtime::{
        Failure, Invocation, Limits, Output, WasmCache, WasmScript, prepare_wasm, run_wasm,
    };
    use serde_json::Value;

    use super::in_txn;

    /// `module` (WAT or wasm) checked and compiled as a script of `kind`.
    pub(crate) fn module(text: &str, kind: ScriptKind) -> Vec<u8> {
        let script = script(text.as_bytes());
        prepare_wasm(&script, kind).unwrap_or_else(|e| panic!("module refused: {e}"))
    }

    /// A script over the process's cache, in memory.
    pub(crate) fn script(module: &[u8]) -> WasmScript<'_> {
        WasmScript {
            id: "test",
            module,
            shared: None,
            cache: WasmCache::global(),
            artifact_dir: None,
        }
    }

    /// Runs `invocation` in one transaction on `pk`: commits on Ok, rolls
    /// back on Err.
    pub(crate) fn call_with(
        c: &Container,
        pk: &str,
        module: &[u8],
        invocation: Invocation,
        limits: &Limits,
    ) -> Result<Output, Failure> {
        in_txn(c, pk, |txn| {
            run_wasm(&script(module), invocation, txn, limits)
        })
    }

    /// Calls a procedure with default limits.
    pub(crate) fn call(
        c: &Container,
        pk: &str,
        module: &[u8],
        params: Vec<Value>,
    ) -> Result<Output, Failure> {
        call_with(
            c,
            pk,
            module,
            Invocation::Procedure { params },
            &Limits::default(),
        )
    }
}

/// Runs the ignored test `name` of the test module `module` (its
/// `module_path!()`) in a child process with `env` set: a native stack
/// overflow or a failed allocation aborts the child, not the test run.
///
/// # Panics
/// When the child did not find the test: `--exact` takes the full name,
/// module path included, and a name that matches nothing runs nothing and
/// succeeds.
pub(crate) fn in_child(module: &str, name: &str, env: &[(&str, &str)]) -> std::process::Output {
    // The module's path in the test binary, without the crate: `hostile`.
    let module = module.split_once("::").map_or("", |(_, m)| m);
    let test = format!("{module}::{name}");
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            &test,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(env.iter().copied())
        .output()
        .expect("run the child");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("running 1 test"),
        "the child did not run {test}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    out
}
