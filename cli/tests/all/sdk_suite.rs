//! Microsoft's own emulator tests for the official Python SDK (the `tests/`
//! folder of azure-cosmos 4.17.1's source distribution), run by
//! `tests/python/sdk_suite/run.py` against `partita serve --tls`: every test
//! named in `tests/python/sdk_suite/expected_pass.txt` must pass. The list
//! grows as features land; the full measurement is documented in
//! docs/compatibility.md.

use std::path::Path;
use std::process::Command;

use crate::support::{ServerProcess, python_venv};

#[test]
fn the_python_sdks_own_tests_pass_where_expected() {
    let python = python_venv();
    let server = ServerProcess::start(&["--in-memory", "--tls"]);
    let port = server.addr.rsplit(':').next().unwrap();
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/sdk_suite");
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(python)
        .arg(suite.join("run.py"))
        // localhost, where the suite looks for the emulator; the certificate covers it.
        .args(["--endpoint", &format!("https://localhost:{port}/")])
        .arg("--out")
        .arg(out.path())
        .args(["--ceiling-minutes", "15"])
        .arg(format!("@{}", suite.join("expected_pass.txt").display()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "SDK tests expected to pass did not\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
}
