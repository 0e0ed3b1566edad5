//! `partita serve` on a disk that fills up, against the real binary in its
//! default configuration.
//!
//! The test mounts a small tmpfs (`mount -t tmpfs -o size=…`: it needs
//! root, as CI runs the tests; anywhere mounting is impossible it fails
//! with the reason rather than skip) and unmounts it in a guard. The
//! server fills it with documents until a write fails (500, then 503), is
//! killed, and is restarted with the disk still full: it starts, warns on
//! stderr that it is read-only, answers reads, queries and the read feed
//! with 200 and every acknowledged document, and every write with a 503
//! naming the data directory and the full disk. Then the tmpfs is
//! remounted larger (space freed) and a restart writes again, with nothing
//! lost. A store on a read-only bind mount (killed, so its log holds
//! commits not yet copied into the file) serves reads the same way.
//!
//! `PARTITA_DISK_FILL_WRITES` (default 1,000) bounds the writes that fill
//! the disk (32 KB each on a 4 MB disk: it fills after about 100). Each
//! server is killed and reaped by its guard.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::server::signed;

/// How long any one request or server start may take before the test
/// calls it a hang.
const CEILING: Duration = Duration::from_secs(120);

/// A tmpfs of a given size, mounted at a new directory and unmounted when
/// dropped.
struct Tmpfs {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let uid = Command::new("id").arg("-u").output().expect("run id -u");
        let uid = String::from_utf8_lossy(&uid.stdout).trim().to_owned();
        let dir = tempfile::tempdir().expect("a directory for the mount point");
        let path = dir.path().join("disk");
        std::fs::create_dir(&path).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test needs a small file system and cannot mount one (running as uid {uid}; mounting a tmpfs needs root, as in CI): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Tmpfs { path, _dir: dir }
    }

    /// Gives the file system `size` (space freed).
    fn resize(&self, size: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.path)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "remount {}: {}",
            self.path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

/// A `partita serve` over a data directory, with its stderr collected;
/// killed and reaped when dropped.
struct Server {
    child: Child,
    addr: String,
    stderr: mpsc::Receiver<String>,
}

impl Server {
    fn start(data: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_partita"))
            .arg("--data")
            .arg(data)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start partita serve");
        let (lines, stderr) = mpsc::channel();
        let err = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let (ready, started) = mpsc::channel();
        let out = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = out.lines().next().map(|l| line = l.unwrap_or_default());
            let _ = ready.send(line);
        });
        let mut server = Server {
            child,
            addr: String::new(),
            stderr,
        };
        let line = started.recv_timeout(CEILING).unwrap_or_default();
        let ready: Value = serde_json::from_str(&line).unwrap_or_else(|_| {
            panic!(
                "partita serve did not start (stdout {line:?}); stderr: {:?}",
                server.stderr()
            )
        });
        server.addr = ready["endpoint"]
            .as_str()
            .unwrap()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        server
    }

    /// The stderr lines printed so far.
    fn stderr(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }

    /// Waits for a stderr line containing `needle`; the lines read.
    fn wait_stderr(&self, needle: &str) -> Result<String, Vec<String>> {
        let mut seen = Vec::new();
        while let Ok(line) = self.stderr.recv_timeout(CEILING) {
            if line.contains(needle) {
                return Ok(line);
            }
            seen.push(line);
        }
        Err(seen)
    }

    /// Sends a signed request; returns the status and the JSON body.
    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, Value) {
        let req = signed(method, path, headers, body);
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncontent-length: {}\r\n",
            self.addr,
            body.len()
        );
        for (name, value) in &req.headers {
            if name != "host" {
                head.push_str(&format!("{name}: {}\r\n", value.to_str().unwrap()));
            }
        }
        head.push_str("\r\n");
        let mut stream = TcpStream::connect(&self.addr).expect("connect");
        stream.set_read_timeout(Some(CEILING)).unwrap();
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).expect("a response");
        let text = String::from_utf8_lossy(&response);
        let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("a status line: {head}"));
        let body = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(body).unwrap_or_else(|_| json!(body))
        };
        (status, body)
    }

    fn create(&self, doc: &Value) -> (u16, Value) {
        let pk = format!("[{}]", doc["pk"]);
        self.request(
            "POST",
            "/dbs/d/colls/c/docs",
            &[
                ("x-ms-documentdb-partitionkey", &pk),
                ("content-type", "application/json"),
            ],
            doc.to_string().as_bytes(),
        )
    }

    /// Checks that every acknowledged document reads back (point reads,
    /// a query and the read feed).
    fn check_documents(&self, acked: &[String]) {
        for id in acked {
            let (status, body) = self.request(
                "GET",
                &format!("/dbs/d/colls/c/docs/{id}"),
                &[("x-ms-documentdb-partitionkey", r#"["p1"]"#)],
                b"",
            );
            assert_eq!(status, 200, "GET {id}: {body}");
            assert_eq!(body["id"], json!(id));
        }
        let query = json!({"query": "SELECT VALUE COUNT(1) FROM c", "parameters": []});
        let (status, body) = self.request(
            "POST",
            "/dbs/d/colls/c/docs",
            &[
                ("x-ms-documentdb-isquery", "True"),
                ("content-type", "application/query+json"),
                ("x-ms-documentdb-query-enablecrosspartition", "True"),
            ],
            query.to_string().as_bytes(),
        );
        assert_eq!(status, 200, "query: {body}");
        assert_eq!(body["Documents"], json!([acked.len()]), "query: {body}");
        let (status, body) = self.request(
            "GET",
            "/dbs/d/colls/c/docs",
            &[("x-ms-documentdb-partitionkey", r#"["p1"]"#)],
            b"",
        );
        assert_eq!(status, 200, "read feed: {body}");
        assert_eq!(body["_count"], json!(acked.len()), "read feed");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn comment(i: usize) -> Value {
    json!({"id": format!("c{i}"), "pk": "p1", "pad": "x".repeat(32 * 1024)})
}

#[test]
fn a_full_disk_leaves_the_server_readable_and_a_restart_with_space_writable() {
    let max: usize = std::env::var("PARTITA_DISK_FILL_WRITES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let disk = Tmpfs::mount("4m");
    let data = disk.path.join("data");

    // Fill the disk until a write fails: 500, then 503.
    let mut acked = Vec::new();
    {
        let server = Server::start(&data);
        let (status, body) = server.request("POST", "/dbs", &[], br#"{"id":"d"}"#);
        assert_eq!(status, 201, "{body}");
        let (status, body) = server.request(
            "POST",
            "/dbs/d/colls",
            &[],
            br#"{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}"#,
        );
        assert_eq!(status, 201, "{body}");
        let mut failed = None;
        for i in 0..max {
            let (status, body) = server.create(&comment(i));
            if status == 201 {
                acked.push(format!("c{i}"));
                continue;
            }
            assert_eq!(status, 500, "the first failed write: {body}");
            failed = Some(body);
            break;
        }
        let failed =
            failed.unwrap_or_else(|| panic!("{max} writes of 32 KB never filled a 4 MB disk"));
        assert!(
            failed.to_string().contains("full"),
            "the failure names the full disk: {failed}"
        );
        let (status, body) = server.create(&comment(max));
        assert_eq!(status, 503, "a write after the failure: {body}");
        assert!(!acked.is_empty());
        server.check_documents(&acked);
    } // Killed.

    // Restarted with the disk still full: read-only, everything readable.
    {
        let server = Server::start(&data);
        server.check_documents(&acked);
        let (status, body) = server.create(&comment(max + 1));
        assert_eq!(status, 503, "a write on the full disk: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        let expected = format!(
            "the store at {} is read-only: the disk is full",
            data.display()
        );
        assert!(message.contains(&expected), "{message}");
        let (status, body) = server.request(
            "POST",
            "/dbs/d/colls/c/sprocs",
            &[("content-type", "application/json")],
            br#"{"id":"p","body":"function p() {}"}"#,
        );
        assert_eq!(status, 503, "creating a procedure on the full disk: {body}");
        let (status, body) = server.request("POST", "/dbs", &[], br#"{"id":"e"}"#);
        assert_eq!(status, 503, "creating a database on the full disk: {body}");
        let (status, body) = server.request("GET", "/dbs/d", &[], b"");
        assert_eq!(status, 200, "{body}");
        let warning = server
            .wait_stderr("is read-only")
            .unwrap_or_else(|seen| panic!("no warning at start; stderr: {seen:?}"));
        assert!(warning.contains("the disk is full"), "{warning}");
    }

    // Space freed: a restart writes again, with nothing lost.
    disk.resize("64m");
    let server = Server::start(&data);
    server.check_documents(&acked);
    let (status, body) = server.create(&comment(max + 2));
    assert_eq!(status, 201, "a write after space was freed: {body}");
    acked.push(format!("c{}", max + 2));
    server.check_documents(&acked);
}

/// A read-only bind mount of a directory, unmounted when dropped.
struct ReadOnlyMount {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl ReadOnlyMount {
    fn new(source: &Path) -> ReadOnlyMount {
        let dir = tempfile::tempdir().expect("a directory for the mount point");
        let path = dir.path().join("ro");
        std::fs::create_dir(&path).unwrap();
        let mount = |args: &[&std::ffi::OsStr]| {
            let out = Command::new("mount")
                .args(args)
                .output()
                .expect("run mount");
            assert!(
                out.status.success(),
                "this test needs a read-only bind mount and cannot make one (mounting needs root, as in CI): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        };
        mount(&["--bind".as_ref(), source.as_os_str(), path.as_os_str()]);
        let guard = ReadOnlyMount { path, _dir: dir };
        mount(&[
            "-o".as_ref(),
            "remount,ro,bind".as_ref(),
            guard.path.as_os_str(),
        ]);
        guard
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

#[test]
fn a_read_only_file_system_leaves_the_server_readable() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let acked: Vec<String> = (0..5).map(|i| format!("c{i}")).collect();
    {
        let server = Server::start(&data);
        let (status, body) = server.request("POST", "/dbs", &[], br#"{"id":"d"}"#);
        assert_eq!(status, 201, "{body}");
        let (status, body) = server.request(
            "POST",
            "/dbs/d/colls",
            &[],
            br#"{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}"#,
        );
        assert_eq!(status, 201, "{body}");
        for i in 0..acked.len() {
            let (status, body) = server.create(&comment(i));
            assert_eq!(status, 201, "{body}");
        }
    } // Killed: the log holds what was not yet copied into the file.
    let mount = ReadOnlyMount::new(&data);
    let server = Server::start(&mount.path);
    let warning = server
        .wait_stderr("is read-only")
        .unwrap_or_else(|seen| panic!("no warning at start; stderr: {seen:?}"));
    assert!(
        warning.contains("the file system is read-only"),
        "{warning}"
    );
    server.check_documents(&acked);
    let (status, body) = server.create(&comment(99));
    assert_eq!(status, 503, "a write on the read-only file system: {body}");
    let message = body["message"].as_str().unwrap_or_default();
    let expected = format!(
        "the store at {} is read-only: the file system is read-only",
        mount.path.display()
    );
    assert!(message.contains(&expected), "{message}");
    drop(server);
    drop(mount);
    // Writable again where it is writable.
    let server = Server::start(&data);
    let (status, body) = server.create(&comment(99));
    assert_eq!(status, 201, "{body}");
}
