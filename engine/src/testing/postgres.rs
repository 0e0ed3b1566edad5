//! A private PostgreSQL cluster for tests of the PostgreSQL storage, one
//! per test process, with a new empty database per caller ([`database`]).
//!
//! The cluster is started on first use (initdb and `pg_ctl start` in a
//! temporary directory, listening only on a Unix socket there; as the
//! `postgres` user through `runuser` when run as root, since PostgreSQL
//! refuses root). Debian's `postgresql` is installed with apt-get when
//! missing and we are root; otherwise [`database`] panics saying what to
//! install. `fsync` is off: durability is the storage's session setting,
//! and the tests stay fast.
//!
//! The cluster lives in a `static`, which is never dropped, so a watchdog
//! stops it: a shell started before the server, reading its standard
//! input from a pipe this process holds. When the process ends, however
//! it ends (a failed test, a panic, a kill), the pipe closes and the
//! watchdog runs `pg_ctl stop -m immediate` and removes the directory.
//! `Cluster`'s `Drop` closes the pipe and waits for the same, should a
//! cluster ever be dropped.
//!
//! The engine's own tests use it, and so do the facade's (the
//! integration tests' `postgres` feature), through the `testing` feature.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::Mutex;

/// The private cluster (see the module docs).
struct Cluster {
    /// The directory holding the data and the server's socket.
    dir: PathBuf,
    /// The watchdog; its standard input is the pipe whose end stops it.
    watchdog: Mutex<Option<Child>>,
    next_database: AtomicU32,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();

/// Runs a command to completion: its stdout, or why it failed.
fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{:?} failed ({}): {}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn is_root() -> bool {
    run(Command::new("id").arg("-u")).is_ok_and(|uid| uid.trim() == "0")
}

/// The newest `/usr/lib/postgresql/<version>/bin` with an `initdb`.
fn server_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let version = path
                .file_name()?
                .to_str()?
                .split('.')
                .next()?
                .parse()
                .ok()?;
            let bin = path.join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// The server binaries, installing Debian's `postgresql` if allowed.
fn ensure_installed() -> Result<PathBuf, String> {
    if let Some(bin) = server_bin() {
        return Ok(bin);
    }
    if !is_root() {
        return Err(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): install it (apt-get install postgresql) and run the tests again".to_owned(),
        );
    }
    let install = || {
        run(Command::new("apt-get")
            .args(["install", "-y", "-qq", "postgresql"])
            .env("DEBIAN_FRONTEND", "noninteractive"))
    };
    if install().is_err() {
        run(Command::new("apt-get").args(["update", "-qq"]))?;
        install()?;
    }
    server_bin().ok_or_else(|| "postgresql installed, but no initdb found".to_owned())
}

/// `program` run as `postgres` when we are root.
fn as_postgres(program: &Path, root: bool) -> Command {
    if root {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

/// Stops the server and removes the directory once its standard input
/// closes; ignores the signals a Ctrl-C sends the process group.
const WATCHDOG: &str = r#"trap '' INT TERM HUP
cat > /dev/null
if [ "$3" = root ]; then
  runuser -u postgres -- "$2" -D "$1/data" -m immediate stop
else
  "$2" -D "$1/data" -m immediate stop
fi
rm -rf "$1""#;

impl Cluster {
    fn start() -> Result<Cluster, String> {
        let bin = ensure_installed()?;
        let root = is_root();
        // Named by the process and the time, so no earlier run's leftover
        // is in the way; the watchdog removes it, after the server stopped.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!("partita-pg-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir)
            .map_err(|e| format!("create the cluster's directory {}: {e}", dir.display()))?;
        if root {
            let id = |flag: &str| -> Result<u32, String> {
                run(Command::new("id").args([flag, "postgres"]))?
                    .trim()
                    .parse()
                    .map_err(|e| format!("id {flag} postgres: {e}"))
            };
            std::os::unix::fs::chown(&dir, Some(id("-u")?), Some(id("-g")?))
                .map_err(|e| format!("give {} to postgres: {e}", dir.display()))?;
        }
        let pg_ctl = bin.join("pg_ctl");
        let watchdog = Command::new("sh")
            .args(["-c", WATCHDOG, "sh"])
            .arg(&dir)
            .arg(&pg_ctl)
            .arg(if root { "root" } else { "user" })
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start the watchdog: {e}"))?;
        // From here on, a failure drops the cluster, which stops the server.
        let cluster = Cluster {
            dir: dir.clone(),
            watchdog: Mutex::new(Some(watchdog)),
            next_database: AtomicU32::new(1),
        };
        let data = dir.join("data");
        run(as_postgres(&bin.join("initdb"), root)
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"]))?;
        // Durability is the backend's session setting; the test cluster
        // skips fsync to stay fast.
        let server_options = format!(
            "-k {} -c listen_addresses='' -c fsync=off -c max_connections=200",
            dir.display()
        );
        let log = dir.join("postgres.log");
        run(as_postgres(&pg_ctl, root)
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "60", "-o", &server_options, "start"]))
        .map_err(|e| {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            format!("{e}; server log: {log}")
        })?;
        Ok(cluster)
    }

    /// A new, empty database; its URL.
    fn database(&self) -> String {
        let n = self.next_database.fetch_add(1, Ordering::Relaxed);
        let name = format!("t_{n}");
        let mut admin = postgres::Config::new()
            .host_path(&self.dir)
            .user("postgres")
            .dbname("postgres")
            .connect(postgres::NoTls)
            .expect("connect to the test cluster");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create a test database");
        let host: String = self
            .dir
            .to_string_lossy()
            .bytes()
            .map(|b| match b {
                b'/' => "%2F".to_owned(),
                b => char::from(b).to_string(),
            })
            .collect();
        format!("postgresql://postgres@{host}/{name}")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(mut watchdog) = self.watchdog.lock().take() {
            // Closing its input is the signal to stop.
            if let Some(mut input) = watchdog.stdin.take() {
                let _ = input.flush();
            }
            let _ = watchdog.wait();
        }
    }
}

/// The URL of a new, empty database in this process's cluster, started
/// on the first call.
///
/// # Panics
/// When the cluster cannot be started (PostgreSQL is not installed and
/// cannot be, `initdb` or the server fails), with the reason and the
/// server's log.
pub fn database() -> String {
    CLUSTER
        .get_or_init(|| Cluster::start().unwrap_or_else(|e| panic!("PostgreSQL for tests: {e}")))
        .database()
}
