//! Installing, starting and stopping the peers' servers.
//!
//! A missing server binary is installed with `apt-get` (only as root, only
//! when allowed, and said so on stderr). Every server the harness starts
//! registers a stop action; the action runs when the server's guard drops
//! (normal end, an error, a panic unwinding) or, through
//! [`install_interrupt_handler`], on Ctrl-C or SIGTERM, which then exits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::BenchError;

/// How the peers may be provided.
#[derive(Clone, Copy, Debug)]
pub struct PeerOptions {
    /// Install a missing server with `apt-get install -y` (as root).
    pub install: bool,
}

type StopAction = Box<dyn FnOnce() + Send>;

/// Stop actions of running servers, by registration number.
static RUNNING: Mutex<BTreeMap<u64, StopAction>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Stops a started server when dropped (or at Ctrl-C, whichever is first).
pub(crate) struct StopGuard(u64);

impl StopGuard {
    pub(crate) fn register(stop: impl FnOnce() + Send + 'static) -> StopGuard {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        lock().insert(id, Box::new(stop));
        StopGuard(id)
    }
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        let stop = lock().remove(&self.0);
        if let Some(stop) = stop {
            stop();
        }
    }
}

fn lock() -> std::sync::MutexGuard<'static, BTreeMap<u64, StopAction>> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// On Ctrl-C or SIGTERM: stop every server this process started, then exit
/// with status 130.
///
/// # Errors
/// When a handler is already installed.
pub fn install_interrupt_handler() -> Result<(), BenchError> {
    ctrlc::set_handler(|| {
        eprintln!("interrupted: stopping the servers this run started");
        let actions = std::mem::take(&mut *lock());
        for (_, stop) in actions {
            stop();
        }
        std::process::exit(130);
    })
    .map_err(|e| BenchError::Peer(format!("installing the Ctrl-C handler: {e}")))
}

/// Finds `binary` on PATH or in `extra_dirs`.
pub(crate) fn find_binary(binary: &str, extra_dirs: &[PathBuf]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra_dirs.iter().cloned())
        .map(|dir| dir.join(binary))
        .find(|p| p.is_file())
}

/// Finds `binary` (see [`find_binary`]) or installs Debian's `package`
/// when allowed; the error is the reason to print when skipping.
pub(crate) fn ensure_installed(
    binary: &str,
    package: &str,
    extra_dirs: impl Fn() -> Vec<PathBuf>,
    options: PeerOptions,
) -> Result<PathBuf, String> {
    if let Some(found) = find_binary(binary, &extra_dirs()) {
        return Ok(found);
    }
    if !options.install {
        return Err(format!(
            "{binary} not found and installing is off (apt-get install {package})"
        ));
    }
    if !is_root() {
        return Err(format!(
            "{binary} not found, and installing {package} needs root"
        ));
    }
    eprintln!("{binary} not found: installing Debian's {package} (apt-get install -y {package})");
    let install = || {
        run_quiet(
            Command::new("apt-get")
                .args(["install", "-y", "--no-install-recommends", package])
                .env("DEBIAN_FRONTEND", "noninteractive"),
        )
    };
    if install().is_err() {
        run_quiet(Command::new("apt-get").arg("update"))
            .map_err(|e| format!("apt-get update failed: {e}"))?;
        install().map_err(|e| format!("apt-get install {package} failed: {e}"))?;
    }
    find_binary(binary, &extra_dirs())
        .ok_or_else(|| format!("{package} installed, but {binary} is still not found"))
}

/// Whether this process runs as root.
pub(crate) fn is_root() -> bool {
    run_quiet(Command::new("id").arg("-u")).is_ok_and(|uid| uid.trim() == "0")
}

/// The uid and gid of `user`.
pub(crate) fn user_ids(user: &str) -> Result<(u32, u32), String> {
    let id = |flag: &str| -> Result<u32, String> {
        run_quiet(Command::new("id").args([flag, user]))?
            .trim()
            .parse()
            .map_err(|e| format!("id {flag} {user}: {e}"))
    };
    Ok((id("-u")?, id("-g")?))
}

/// Runs a command to completion; its stdout, or its stderr as the error.
pub(crate) fn run_quiet(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{:?} {}: {}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> Result<u16, BenchError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(BenchError::io("finding a free port"))?;
    Ok(listener
        .local_addr()
        .map_err(BenchError::io("finding a free port"))?
        .port())
}

/// Polls `ready` every 50 ms until it is true or `timeout` passes.
pub(crate) fn wait_until(timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The last lines of a server's log file, for error messages.
pub(crate) fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" / ")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use super::*;

    #[test]
    fn a_guard_stops_once() {
        let stopped = Arc::new(AtomicU64::new(0));
        let s = stopped.clone();
        let guard = StopGuard::register(move || {
            s.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(stopped.load(Ordering::Relaxed), 0);
        drop(guard);
        assert_eq!(stopped.load(Ordering::Relaxed), 1);
        assert!(!lock().contains_key(&u64::MAX));
    }

    #[test]
    fn a_panic_stops_the_server() {
        let stopped = Arc::new(AtomicBool::new(false));
        let s = stopped.clone();
        let result = std::panic::catch_unwind(move || {
            let _guard = StopGuard::register(move || s.store(true, Ordering::Relaxed));
            panic!("a row failed");
        });
        assert!(result.is_err());
        assert!(stopped.load(Ordering::Relaxed));
    }

    #[test]
    fn missing_binaries_are_reported_not_installed_when_off() {
        let err = ensure_installed(
            "partita-no-such-binary",
            "no-such-package",
            Vec::new,
            PeerOptions { install: false },
        )
        .unwrap_err();
        assert!(err.contains("installing is off"), "{err}");
        assert!(find_binary("sh", &[]).is_some());
    }
}
