//! What the tests of the real binary share: a `partita serve` process
//! (`server`, `sdk_suite`) and the Python virtual environment with the
//! official SDK.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// A `partita serve` child process on a free port; killed when dropped.
pub(crate) struct ServerProcess {
    pub(crate) child: Child,
    pub(crate) addr: String,
    /// The startup line (endpoint, key, and with TLS the certificate).
    pub(crate) ready: Value,
}

impl ServerProcess {
    /// Starts `partita <global args> serve --bind 127.0.0.1:0 [serve args]`:
    /// `args` are global arguments up to the first of `serve`'s own flags
    /// (`--client-timeout-ms`, `--tls*`, the limits, `--scripts-in-process`),
    /// serve arguments from there.
    pub(crate) fn start(args: &[&str]) -> ServerProcess {
        ServerProcess::start_with_stderr(args, Stdio::inherit())
    }

    /// [`ServerProcess::start`] with the child's standard error piped
    /// (`child.stderr`), for a test that reads what it says.
    pub(crate) fn start_with_stderr(args: &[&str], stderr: Stdio) -> ServerProcess {
        const SERVE_FLAGS: [&str; 6] = [
            "--client-timeout-ms",
            "--scripts-in-process",
            "--idle-timeout-ms",
            "--max-connections",
            "--max-buffered-bytes",
            "--call-deadline-ms",
        ];
        let split = args
            .iter()
            .position(|a| SERVE_FLAGS.contains(a) || a.starts_with("--tls"))
            .unwrap_or(args.len());
        let mut child = Command::new(env!("CARGO_BIN_EXE_partita"))
            .args(&args[..split])
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(&args[split..])
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start partita serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ready: Value = serde_json::from_str(&line).expect("serve prints its endpoint as JSON");
        let endpoint = ready["endpoint"].as_str().unwrap();
        let addr = endpoint
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_owned();
        ServerProcess { child, addr, ready }
    }

    pub(crate) fn endpoint(&self) -> String {
        self.ready["endpoint"].as_str().unwrap().to_owned()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The virtual environment with `azure-cosmos` 4.17.1: `PARTITA_PY_VENV`, or
/// `target/py-venv`, created on first use (`.ci/run` creates it in CI).
pub(crate) fn python_venv() -> PathBuf {
    let venv = std::env::var_os("PARTITA_PY_VENV").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/py-venv"),
        PathBuf::from,
    );
    let python = venv.join("bin/python");
    let installed = python.exists()
        && Command::new(&python)
            .args([
                "-c",
                "import azure.cosmos, sys; sys.exit(azure.cosmos.__version__ != '4.17.1')",
            ])
            .status()
            .is_ok_and(|s| s.success());
    if !installed {
        let status = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 is needed for the Python SDK acceptance test");
        assert!(status.success());
        let status = Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "azure-cosmos==4.17.1"])
            .status()
            .unwrap();
        assert!(status.success(), "pip install azure-cosmos==4.17.1 failed");
    }
    python
}
