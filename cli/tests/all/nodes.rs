//! Several `partita serve` nodes on one PostgreSQL database, killed and
//! restarted under load.
//!
//! The test starts a private PostgreSQL cluster (the engine's
//! `engine::testing::postgres`), then `PARTITA_NODES` (default 3)
//! `partita --data postgresql://… serve` processes on one database of it.
//! The first node creates the database, the container (with the
//! all-versions change feed on) and one counter document in each of
//! `PARTITA_NODES_PARTITIONS` (default 3) logical partitions before the
//! others start, since a node reads the catalog when it starts.
//!
//! `PARTITA_NODES_CLIENTS` (default 4) threads then each send
//! `PARTITA_NODES_ITERATIONS` (default 100) createComment calls, each a
//! transactional batch through the gateway: a patch that increments the
//! partition's counter and the create of a comment, to a node and a shared
//! partition picked at random. Meanwhile the test SIGKILLs a node at a
//! random moment `PARTITA_NODES_KILLS` times (default 8) and starts it
//! again. A client's call ends one of three ways:
//!
//! ```text
//!   200 ──────────────► acknowledged: its comment and the counter value its patch saw
//!   449 RetryWith ────► another node committed first, nothing written: sent again
//!   connection refused ► never sent: sent again (to another node or after the restart)
//!   sent, no answer ──► indeterminate (its node was killed): may or may not be there
//! ```
//!
//! Any other answer fails the test. At the end a newly started node reads
//! everything back and the test checks, per partition:
//!
//! - **no lost acknowledgement:** every acknowledged comment is there;
//! - **no partial transaction, the invariant:** the counter equals the
//!   number of comments, and in the all-versions change feed every
//!   transaction after the counter's creation is exactly one increment of
//!   the counter and one comment's create, at one LSN;
//! - **serializability (Jepsen-style):** the change feed shows the counter's
//!   versions 1..n in LSN order, the acknowledged calls saw distinct values,
//!   and each saw exactly the value the feed shows at its comment's LSN, so
//!   the log is a serial order consistent with every acknowledgement;
//! - every node (each restarted) reads the same counter: no stale copy.
//!
//! There are no timing assertions: the only clock is a ceiling of minutes on
//! a single request (a hang fails the test). Every node is killed when the
//! test ends, however it ends. A failure prints `PARTITA_NODES_SEED`, which
//! reproduces the choices of nodes, partitions and kill moments (not the
//! threads' interleaving).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use partita::fuzz::FuzzRng;
use serde_json::{Value, json};

use crate::server::signed;
use crate::support::ServerProcess;

/// A bound from the environment variable `name`, or `default` (CI-sized).
fn bound(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Prints the seed if the test fails (panics), on whichever path it fails.
struct SeedOnFailure(u64);

impl Drop for SeedOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("nodes: reproduce with PARTITA_NODES_SEED={}", self.0);
        }
    }
}

/// A parsed HTTP response.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request got no answer.
#[derive(Debug)]
enum Failure {
    /// The connection was refused, or the node is restarting: nothing
    /// reached a node.
    NotSent,
    /// The request may have been sent; no whole answer came back.
    Lost(String),
}

/// Longest wait for one answer; past it the node is wedged.
const ANSWER_CEILING: Duration = Duration::from_secs(180);

/// Sends one signed request (emulator key) and reads the whole answer.
fn send(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Reply, Failure> {
    let mut stream = TcpStream::connect(addr).map_err(|_| Failure::NotSent)?;
    stream
        .set_read_timeout(Some(ANSWER_CEILING))
        .map_err(|e| Failure::Lost(e.to_string()))?;
    let auth = signed(method, path, &[], b"");
    let mut text = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for name in ["authorization", "x-ms-date"] {
        let value = auth.headers[name].to_str().expect("ASCII header");
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(body);
    let lost = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut {
            panic!("{method} {path} to {addr}: no answer in {ANSWER_CEILING:?}: a node hangs");
        }
        Failure::Lost(e.to_string())
    };
    stream.write_all(&bytes).map_err(lost)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(lost)?;
    parse(&raw).ok_or_else(|| {
        Failure::Lost(format!(
            "an incomplete answer: {:?}",
            String::from_utf8_lossy(&raw)
        ))
    })
}

/// The status, headers and JSON body of a whole HTTP/1.1 response (with a
/// content length or chunked); `None` when it is cut short.
fn parse(raw: &[u8]) -> Option<Reply> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let has = |name: &str, value: &str| {
        headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case(name) && v.eq_ignore_ascii_case(value))
    };
    let mut rest = &raw[split + 4..];
    let body = if has("transfer-encoding", "chunked") {
        let mut body = Vec::new();
        loop {
            let end = rest.windows(2).position(|w| w == b"\r\n")?;
            let size_text = std::str::from_utf8(&rest[..end]).ok()?;
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            rest = &rest[end + 2..];
            if size == 0 {
                break body;
            }
            body.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
    } else {
        let length = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(rest.len());
        rest.get(..length)?.to_vec()
    };
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).ok()?
    };
    Some(Reply {
        status,
        headers,
        body,
    })
}

/// The nodes: processes (killed when dropped) and their addresses (none
/// while a node restarts, so that no request goes to a port another
/// process may have taken since).
struct Nodes {
    url: String,
    processes: Mutex<Vec<ServerProcess>>,
    addrs: Mutex<Vec<Option<String>>>,
}

impl Nodes {
    fn addr(&self, node: usize) -> Option<String> {
        self.addrs.lock()[node].clone()
    }

    fn start(&self) -> ServerProcess {
        ServerProcess::start(&["--data", &self.url])
    }

    /// SIGKILLs node `node` and starts it again (on a new port).
    fn kill_and_restart(&self, node: usize) {
        {
            let mut processes = self.processes.lock();
            self.addrs.lock()[node] = None;
            let process = &mut processes[node];
            process.child.kill().expect("SIGKILL a node");
            process.child.wait().expect("reap a killed node");
        }
        let process = self.start();
        self.addrs.lock()[node] = Some(process.addr.clone());
        // The old process is dropped (already reaped) here.
        self.processes.lock()[node] = process;
    }
}

/// What the clients saw.
#[derive(Default)]
struct History {
    /// Per partition: the acknowledged comments and the counter value the
    /// call's patch returned.
    acknowledged: BTreeMap<String, Vec<(String, i64)>>,
    indeterminate: u64,
    /// Why the last indeterminate call got no answer.
    last_lost: Option<String>,
    retried_449: u64,
    not_sent: u64,
}

fn partition_header(pk: &str) -> String {
    json!([pk]).to_string()
}

/// One createComment batch until it is acknowledged or indeterminate (or
/// the test failed).
fn create_comment(
    nodes: &Nodes,
    stop: &AtomicBool,
    rng: &mut FuzzRng,
    pk: &str,
    id: &str,
) -> Outcome {
    let n_nodes = nodes.addrs.lock().len() as u64;
    let body = json!([
        {"operationType": "Patch", "id": "counter",
         "resourceBody": [{"op": "incr", "path": "/n", "value": 1}]},
        {"operationType": "Create", "resourceBody": {"id": id, "pk": pk, "type": "comment"}},
    ])
    .to_string();
    let key = partition_header(pk);
    let headers = [
        ("x-ms-documentdb-partitionkey", key.as_str()),
        ("x-ms-cosmos-is-batch-request", "true"),
        ("x-ms-cosmos-batch-atomic", "true"),
        ("content-type", "application/json"),
    ];
    let (mut retried, mut not_sent) = (0, 0);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Outcome::Stopped;
        }
        let addr = nodes.addr(rng.below(n_nodes) as usize);
        let sent = match &addr {
            Some(addr) => send(
                addr,
                "POST",
                "/dbs/d/colls/c/docs",
                &headers,
                body.as_bytes(),
            ),
            None => Err(Failure::NotSent),
        };
        match sent {
            Ok(reply) if reply.status == 200 => {
                let n = reply.body[0]["resourceBody"]["n"]
                    .as_i64()
                    .unwrap_or_else(|| panic!("a patch result without n: {}", reply.body));
                return Outcome::Acknowledged {
                    n,
                    retried,
                    not_sent,
                };
            }
            // As the SDKs do: another node committed first, nothing was written.
            Ok(reply) if reply.status == 449 => retried += 1,
            Ok(reply) => panic!(
                "createComment {id} in {pk} on {addr:?}: {} {}",
                reply.status, reply.body
            ),
            Err(Failure::NotSent) => {
                not_sent += 1;
                // The node is being restarted; the pause only spares the CPU.
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(Failure::Lost(why)) => {
                return Outcome::Indeterminate {
                    why,
                    retried,
                    not_sent,
                };
            }
        }
    }
}

/// How one createComment call ended.
enum Outcome {
    Acknowledged {
        n: i64,
        retried: u64,
        not_sent: u64,
    },
    Indeterminate {
        why: String,
        retried: u64,
        not_sent: u64,
    },
    Stopped,
}

/// A request to node `node` that must succeed (or answer 304).
fn must(
    nodes: &Nodes,
    node: usize,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let addr = nodes.addr(node).expect("a node that is up");
    match send(&addr, method, path, headers, body.as_bytes()) {
        Ok(reply) if reply.status < 300 || reply.status == 304 => reply,
        Ok(reply) => panic!("{method} {path}: {} {}", reply.status, reply.body),
        Err(e) => panic!("{method} {path}: {e:?}"),
    }
}

/// Creates database `d` and its container `c` (partition key `/pk`, the
/// all-versions change feed on) through node 0.
fn create_container(nodes: &Nodes) {
    must(nodes, 0, "POST", "/dbs", &[], r#"{"id":"d"}"#);
    must(
        nodes,
        0,
        "POST",
        "/dbs/d/colls",
        &[],
        r#"{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2},"changeFeedPolicy":{"retentionDuration":10}}"#,
    );
}

/// Sets its flag when dropped while the thread panics: the clients stop
/// when the test fails, instead of calling nodes that are gone.
struct StopOnPanic<'a>(&'a AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// Counts a client thread as finished however it ends, so that the kill
/// loop stops waiting for a client that panicked (the panic then fails the
/// test when the scope joins, instead of hanging it).
struct Finished<'a>(&'a AtomicU64);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Every document of partition `pk`, by id, read through `node`.
fn documents(nodes: &Nodes, node: usize, pk: &str) -> BTreeMap<String, Value> {
    let key = partition_header(pk);
    let mut docs = BTreeMap::new();
    let mut continuation: Option<String> = None;
    loop {
        let mut headers = vec![
            ("x-ms-documentdb-partitionkey", key.as_str()),
            ("x-ms-max-item-count", "1000"),
        ];
        if let Some(c) = &continuation {
            headers.push(("x-ms-continuation", c.as_str()));
        }
        let reply = must(nodes, node, "GET", "/dbs/d/colls/c/docs", &headers, "");
        for doc in reply.body["Documents"]
            .as_array()
            .expect("a read feed page")
        {
            let id = doc["id"].as_str().expect("an id").to_owned();
            assert!(
                docs.insert(id, doc.clone()).is_none(),
                "a document read twice"
            );
        }
        match reply.header("x-ms-continuation") {
            Some(c) if !c.is_empty() => continuation = Some(c.to_owned()),
            _ => return docs,
        }
    }
}

/// One transaction's changes in the feed: (id, operation, counter value).
type Changes = Vec<(String, String, Option<i64>)>;

/// Partition `pk`'s all-versions change feed through `node`: per LSN,
/// in order, the (id, operation, counter value) of its changes.
fn change_feed(nodes: &Nodes, node: usize, pk: &str) -> Vec<(u64, Changes)> {
    let key = partition_header(pk);
    let mut feed: Vec<(u64, Changes)> = Vec::new();
    let mut etag: Option<String> = None;
    loop {
        let mut headers = vec![
            ("a-im", "Full-Fidelity Feed"),
            ("x-ms-documentdb-partitionkey", key.as_str()),
        ];
        if let Some(e) = &etag {
            headers.push(("if-none-match", e.as_str()));
        }
        let reply = must(nodes, node, "GET", "/dbs/d/colls/c/docs", &headers, "");
        if reply.status == 304 {
            return feed;
        }
        for entry in reply.body["Documents"].as_array().expect("a feed page") {
            let lsn = entry["metadata"]["lsn"].as_u64().expect("an lsn");
            let op = entry["metadata"]["operationType"]
                .as_str()
                .unwrap()
                .to_owned();
            let id = entry["current"]["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let n = entry["current"]["n"].as_i64();
            match feed.last_mut() {
                Some((last, changes)) if *last == lsn => changes.push((id, op, n)),
                Some((last, _)) => {
                    assert!(
                        *last < lsn,
                        "LSN {lsn} after {last}: the feed is out of order"
                    );
                    feed.push((lsn, vec![(id, op, n)]));
                }
                None => feed.push((lsn, vec![(id, op, n)])),
            }
        }
        let next = reply.header("etag").expect("a feed page's etag").to_owned();
        assert_ne!(
            etag.as_deref(),
            Some(next.as_str()),
            "the feed did not move"
        );
        etag = Some(next);
    }
}

#[test]
fn nodes_on_one_postgresql_lose_nothing_and_stay_serializable() {
    let seed = std::env::var("PARTITA_NODES_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let _seed = SeedOnFailure(seed);
    let n_nodes = bound("PARTITA_NODES", 3).max(1) as usize;
    let n_partitions = bound("PARTITA_NODES_PARTITIONS", 3).max(1);
    let clients = bound("PARTITA_NODES_CLIENTS", 4).max(1);
    let iterations = bound("PARTITA_NODES_ITERATIONS", 100);
    let kills = bound("PARTITA_NODES_KILLS", 8);
    eprintln!(
        "nodes: seed {seed}, {n_nodes} nodes, {n_partitions} partitions, {clients} clients \
         x {iterations} calls, {kills} kills"
    );
    let pks: Vec<String> = (0..n_partitions).map(|p| format!("p{p}")).collect();

    let url = engine::testing::postgres::database();
    let first = ServerProcess::start(&["--data", &url]);
    let nodes = Nodes {
        addrs: Mutex::new(vec![Some(first.addr.clone())]),
        processes: Mutex::new(vec![first]),
        url,
    };
    create_container(&nodes);
    for pk in &pks {
        let key = partition_header(pk);
        must(
            &nodes,
            0,
            "POST",
            "/dbs/d/colls/c/docs",
            &[("x-ms-documentdb-partitionkey", &key)],
            &json!({"id": "counter", "pk": pk, "n": 0}).to_string(),
        );
    }
    for _ in 1..n_nodes {
        let process = nodes.start();
        nodes.addrs.lock().push(Some(process.addr.clone()));
        nodes.processes.lock().push(process);
    }

    let history = Mutex::new(History::default());
    let stop = AtomicBool::new(false);
    let finished = AtomicU64::new(0);
    let mut schedule = FuzzRng::new(seed);
    std::thread::scope(|scope| {
        let _stop = StopOnPanic(&stop);
        for client in 0..clients {
            let (nodes, history, pks, finished, stop) = (&nodes, &history, &pks, &finished, &stop);
            let mut rng = FuzzRng::new(seed ^ (client + 1).wrapping_mul(0x1000_0000_01b3));
            scope.spawn(move || {
                let _finished = Finished(finished);
                for i in 0..iterations {
                    let pk = &pks[rng.below(pks.len() as u64) as usize];
                    let id = format!("c-{client}-{i}");
                    let outcome = create_comment(nodes, stop, &mut rng, pk, &id);
                    let mut history = history.lock();
                    match outcome {
                        Outcome::Stopped => break,
                        Outcome::Acknowledged {
                            n,
                            retried,
                            not_sent,
                        } => {
                            history
                                .acknowledged
                                .entry(pk.clone())
                                .or_default()
                                .push((id, n));
                            history.retried_449 += retried;
                            history.not_sent += not_sent;
                        }
                        Outcome::Indeterminate {
                            why,
                            retried,
                            not_sent,
                        } => {
                            history.indeterminate += 1;
                            history.last_lost = Some(why);
                            history.retried_449 += retried;
                            history.not_sent += not_sent;
                        }
                    }
                }
            });
        }
        // The kills: each after a random share of the calls, at a random node.
        let total = clients * iterations;
        for k in 0..kills {
            let at = total * (k + 1) / (kills + 1) + schedule.below(total / (kills + 1) + 1) / 2;
            loop {
                let calls = {
                    let h = history.lock();
                    h.acknowledged.values().map(Vec::len).sum::<usize>() as u64 + h.indeterminate
                };
                if calls >= at || finished.load(Ordering::Relaxed) == clients {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1 + schedule.below(20)));
            }
            if finished.load(Ordering::Relaxed) == clients {
                break;
            }
            let node = schedule.below(n_nodes as u64) as usize;
            nodes.kill_and_restart(node);
        }
    });

    let history = history.into_inner();
    let acknowledged: usize = history.acknowledged.values().map(Vec::len).sum();
    assert_eq!(
        acknowledged as u64 + history.indeterminate,
        clients * iterations,
        "every call ended acknowledged or indeterminate"
    );
    eprintln!(
        "nodes: {acknowledged} acknowledged, {} indeterminate (the last: {:?}), {} retries after 449, {} sends refused",
        history.indeterminate, history.last_lost, history.retried_449, history.not_sent
    );
    assert!(acknowledged > 0, "no call was acknowledged");

    // Every node reads every counter as the others left it: none serves a
    // stale copy of a partition it holds.
    for pk in &pks {
        let counters: Vec<Value> = (0..n_nodes)
            .map(|node| documents(&nodes, node, pk)["counter"]["n"].clone())
            .collect();
        assert!(
            counters.windows(2).all(|w| w[0] == w[1]),
            "{pk}: the nodes read different counters: {counters:?}"
        );
    }
    // Then every node is killed and started again, so each reads from
    // PostgreSQL afresh.
    for node in 0..n_nodes {
        nodes.kill_and_restart(node);
    }
    for pk in &pks {
        let docs = documents(&nodes, 0, pk);
        let counter = docs["counter"]["n"].as_i64().expect("the counter");
        let comments: BTreeSet<&str> = docs
            .keys()
            .map(String::as_str)
            .filter(|id| *id != "counter")
            .collect();
        assert_eq!(
            counter,
            comments.len() as i64,
            "{pk}: the counter is not the number of comments (a partial transaction)"
        );
        for node in 1..n_nodes {
            let again = documents(&nodes, node, pk);
            assert_eq!(
                again["counter"]["n"],
                json!(counter),
                "{pk}: node {node} disagrees"
            );
        }
        let acked = history.acknowledged.get(pk).cloned().unwrap_or_default();
        for (id, _) in &acked {
            assert!(
                comments.contains(id.as_str()),
                "{pk}: acknowledged comment {id} is lost"
            );
        }
        let seen: BTreeSet<i64> = acked.iter().map(|(_, n)| *n).collect();
        assert_eq!(
            seen.len(),
            acked.len(),
            "{pk}: two acknowledged calls saw one counter value"
        );

        // The log: the counter's creation, then one increment and one
        // comment per transaction, the increments 1..n in LSN order.
        let feed = change_feed(&nodes, n_nodes - 1, pk);
        let (first, rest) = feed.split_first().expect("the counter's creation");
        assert_eq!(
            first.1,
            [("counter".to_owned(), "create".to_owned(), Some(0))],
            "{pk}: the first transaction"
        );
        let mut comment_at: BTreeMap<&str, i64> = BTreeMap::new();
        for (i, (lsn, changes)) in rest.iter().enumerate() {
            let want = i as i64 + 1;
            let increments: Vec<i64> = changes
                .iter()
                .filter(|(id, op, _)| id == "counter" && op == "replace")
                .filter_map(|(_, _, n)| *n)
                .collect();
            let created: Vec<&str> = changes
                .iter()
                .filter(|(id, op, _)| id != "counter" && op == "create")
                .map(|(id, _, _)| id.as_str())
                .collect();
            assert_eq!(
                (increments.as_slice(), created.len(), changes.len()),
                (&[want][..], 1, 2),
                "{pk}: the transaction at LSN {lsn} is not one increment to {want} and one comment: {changes:?}"
            );
            comment_at.insert(created[0], want);
        }
        assert_eq!(rest.len() as i64, counter, "{pk}: the feed's increments");
        assert_eq!(
            comment_at.keys().copied().collect::<BTreeSet<_>>(),
            comments,
            "{pk}: the comments in the feed and in the partition"
        );
        for (id, n) in &acked {
            assert_eq!(
                comment_at.get(id.as_str()),
                Some(n),
                "{pk}: {id} was acknowledged with n = {n}, but the serial order puts it elsewhere"
            );
        }
    }
}

/// A node stopped by SIGTERM closes its PostgreSQL connections and exits
/// 0. Closing a sync `postgres` client runs a runtime of its own, which
/// panicked when the server dropped the store inside its runtime.
#[test]
fn a_node_on_postgresql_stops_cleanly_on_sigterm() {
    let url = engine::testing::postgres::database();
    let mut node = ServerProcess::start_with_stderr(&["--data", &url], Stdio::piped());
    let addr = node.addr.clone();
    let nodes = Nodes {
        addrs: Mutex::new(vec![Some(addr)]),
        processes: Mutex::new(Vec::new()),
        url,
    };
    // The write connection and a read connection in use.
    create_container(&nodes);
    let key = partition_header("p");
    let headers = [("x-ms-documentdb-partitionkey", key.as_str())];
    must(
        &nodes,
        0,
        "POST",
        "/dbs/d/colls/c/docs",
        &headers,
        r#"{"id":"a","pk":"p"}"#,
    );
    must(&nodes, 0, "GET", "/dbs/d/colls/c/docs/a", &headers, "");
    node.terminate();
    let status = node.exit_status(ANSWER_CEILING);
    let mut stderr = String::new();
    node.child
        .stderr
        .take()
        .expect("stderr is piped")
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
