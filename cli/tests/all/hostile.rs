//! The hostile corpus (`tests/hostile/scripts/`, format in its README)
//! against the `partita` binary: each script uploaded and executed through
//! `partita serve` in its default configuration (scripts in worker
//! processes), then again with `--scripts-in-process` for the scripts that
//! can be bounded there. After every script the server must still answer,
//! the document written before must be intact and alone in its partition,
//! and the partition must take a write (no lock left held).
//!
//! Only a ceiling of minutes on each response (the client's read timeout)
//! stands for time: a wedged server fails the test instead of hanging it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::server::signed_raw_to;
use crate::support::ServerProcess;

/// One corpus file: its header's expectations and its expanded body.
#[derive(Debug)]
struct Case {
    name: String,
    what: String,
    upload: u16,
    isolated: Option<u16>,
    /// `None`: not run in process (`unguarded`, or refused at upload).
    in_process: Option<u16>,
    body: String,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/hostile/scripts")
}

/// Replaces every `{{REPEAT:N:TEXT}}` with TEXT repeated N times.
fn expand(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{REPEAT:") {
        out.push_str(&rest[..start]);
        let directive = &rest[start + "{{REPEAT:".len()..];
        let end = directive.find("}}").expect("an unclosed {{REPEAT:");
        let (count, unit) = directive[..end].split_once(':').expect("{{REPEAT:N:TEXT}}");
        out.push_str(&unit.repeat(count.parse().expect("a repeat count")));
        rest = &directive[end + 2..];
    }
    out.push_str(rest);
    out
}

fn status_of(field: &str, value: &str) -> Option<u16> {
    match value {
        "-" | "unguarded" => None,
        number => Some(
            number
                .parse()
                .unwrap_or_else(|_| panic!("{field}: {number} is not a status")),
        ),
    }
}

fn load(path: &Path) -> Case {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
    let mut header = std::collections::HashMap::new();
    let mut body = String::new();
    for line in text.lines() {
        match line.strip_prefix("// ").and_then(|l| l.split_once(':')) {
            Some((key, value)) if body.is_empty() => {
                header.insert(key.trim().to_owned(), value.trim().to_owned());
            }
            _ => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    let field = |key: &str| {
        header
            .get(key)
            .unwrap_or_else(|| panic!("{name}: no `// {key}:` line"))
            .clone()
    };
    Case {
        what: field("hostile"),
        upload: status_of("upload", &field("upload")).expect("upload: a status"),
        isolated: status_of("isolated", &field("isolated")),
        in_process: status_of("in-process", &field("in-process")),
        body: expand(&body),
        name,
    }
}

fn corpus() -> Vec<Case> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "js"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "the corpus is empty");
    paths.iter().map(|p| load(p)).collect()
}

/// The status and JSON body of a raw response ('' when the server never
/// answered).
fn parse(response: &str) -> (u16, Value) {
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .trim();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

struct Server(ServerProcess);

impl Server {
    fn request(&self, method: &str, path: &str, headers: &str, body: &Value) -> (u16, Value) {
        let body = if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(body).unwrap()
        };
        parse(&self.0.signed_raw(method, path, headers, &body))
    }

    fn start(args: &[&str]) -> Server {
        let server = Server(ServerProcess::start(args));
        let (status, _) = server.request("POST", "/dbs", "", &json!({"id": "d"}));
        assert_eq!(status, 201);
        let container = json!({"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash"}});
        let (status, _) = server.request("POST", "/dbs/d/colls", "", &container);
        assert_eq!(status, 201);
        let (status, _) = server.request("POST", "/dbs/d/colls/c/docs", PK, &canary());
        assert_eq!(status, 201);
        server
    }

    /// The server answers, the canary is intact and alone in its
    /// partition, and the partition takes a write.
    fn still_healthy(&self, case: &Case) {
        let (status, _) = self.request("GET", "/dbs/d", "", &Value::Null);
        assert_eq!(status, 200, "{}: the server no longer answers", case.name);
        let query = json!({"query": "SELECT * FROM c"});
        let (status, page) = self.request(
            "POST",
            "/dbs/d/colls/c/docs",
            &format!(
                "{PK}x-ms-documentdb-isquery: true\r\ncontent-type: application/query+json\r\n"
            ),
            &query,
        );
        assert_eq!(status, 200, "{}: query {page}", case.name);
        let ids: Vec<&Value> = page["Documents"].as_array().unwrap().iter().collect();
        assert_eq!(ids.len(), 1, "{}: the partition holds {page}", case.name);
        assert_eq!(ids[0]["n"], 1, "{}: {page}", case.name);
        let (status, body) = self.request(
            "POST",
            "/dbs/d/colls/c/docs",
            &format!("{PK}x-ms-documentdb-is-upsert: true\r\n"),
            &canary(),
        );
        assert_eq!(
            status, 200,
            "{}: the partition refuses a write: {body}",
            case.name
        );
    }

    /// Uploads and runs `case`, expecting `exec` (`None`: not run).
    fn run(&self, case: &Case, exec: Option<u16>, mode: &str) {
        let sproc = json!({"id": case.name, "body": case.body});
        let (status, body) = self.request("POST", "/dbs/d/colls/c/sprocs", "", &sproc);
        assert_eq!(
            status, case.upload,
            "{} ({}), {mode}: upload answered {body}",
            case.name, case.what
        );
        if let (201, Some(expected)) = (status, exec) {
            let (status, body) = self.request(
                "POST",
                &format!("/dbs/d/colls/c/sprocs/{}", case.name),
                PK,
                &json!([]),
            );
            assert_eq!(
                status, expected,
                "{} ({}), {mode}: execution answered {body}",
                case.name, case.what
            );
            if status >= 400 {
                assert!(
                    body["message"].as_str().is_some_and(|m| !m.is_empty()),
                    "{}: an error without a message: {body}",
                    case.name
                );
            }
        }
        self.still_healthy(case);
        if status == 201 {
            let path = format!("/dbs/d/colls/c/sprocs/{}", case.name);
            let (status, _) = self.request("DELETE", &path, "", &Value::Null);
            assert_eq!(status, 204);
        }
    }
}

const PK: &str = "x-ms-documentdb-partitionkey: [\"p1\"]\r\n";

fn canary() -> Value {
    json!({"id": "canary", "pk": "p1", "n": 1})
}

#[test]
fn the_corpus_parses_and_covers_both_modes() {
    let corpus = corpus();
    for case in &corpus {
        assert!(!case.body.trim().is_empty(), "{}: no body", case.name);
        if case.upload != 201 {
            assert!(
                case.isolated.is_none() && case.in_process.is_none(),
                "{}: refused at upload, so nothing runs",
                case.name
            );
        } else {
            assert!(
                case.isolated.is_some(),
                "{}: uploaded, so it runs",
                case.name
            );
        }
    }
    assert_eq!(expand("a{{REPEAT:3:!(}}b"), "a!(!(!(b");
}

#[test]
fn the_default_server_survives_the_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--data", dir.path().to_str().unwrap()]);
    assert_eq!(server.0.ready["scripts"], "worker processes");
    for case in corpus() {
        server.run(&case, case.isolated, "scripts in worker processes");
    }
}

#[test]
fn scripts_in_process_survive_what_can_be_guarded_there() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[
        "--data",
        dir.path().to_str().unwrap(),
        "--scripts-in-process",
    ]);
    assert_eq!(server.0.ready["scripts"], "in process");
    for case in corpus()
        .iter()
        .filter(|c| c.upload != 201 || c.in_process.is_some())
    {
        server.run(case, case.in_process, "scripts in process");
    }
}

/// The children of `pid` whose command line names a script worker.
fn workers_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        // `pid (comm) state ppid ...`: the fields after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
        if ppid == Some(pid) && String::from_utf8_lossy(&cmdline).contains("script-worker") {
            found.push(child);
        }
    }
    found
}

/// Whether `pid` has exited (gone, or a zombie nobody reaped).
fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X")
    })
}

#[test]
fn a_worker_stuck_in_a_script_dies_with_a_killed_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(&["--data", dir.path().to_str().unwrap()]);
    let stuck =
        "function f() { getContext().getResponse().setBody(/(a+)+$/.test('a'.repeat(40) + '!')); }";
    let (status, _) = server.request(
        "POST",
        "/dbs/d/colls/c/sprocs",
        "",
        &json!({"id": "stuck", "body": stuck}),
    );
    assert_eq!(status, 201);
    let addr = server.0.addr.clone();
    let call = std::thread::spawn(move || {
        // Its answer is lost with the server.
        let _ = signed_raw_to(&addr, "POST", "/dbs/d/colls/c/sprocs/stuck", PK, b"[]");
    });
    let pid = server.0.child.id();
    let ceiling = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let workers = loop {
        let workers = workers_of(pid);
        if !workers.is_empty() {
            break workers;
        }
        assert!(std::time::Instant::now() < ceiling, "no worker started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    server.0.child.kill().unwrap();
    server.0.child.wait().unwrap();
    while !workers.iter().all(|&w| exited(w)) {
        assert!(
            std::time::Instant::now() < ceiling,
            "workers {workers:?} outlived their server"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    call.join().unwrap();
}
