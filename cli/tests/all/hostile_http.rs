//! Clients that try to hold `partita serve` rather than use it: silent and
//! idle connections, a flood past the connection cap, unsigned requests
//! declaring large bodies, many connections or HTTP/2 streams holding large
//! bodies, and a request stuck in a script when the call deadline passes or
//! SIGTERM arrives. Each test asserts the answer and that the server still
//! serves a signed request afterwards; time appears only as ceilings of
//! minutes that turn a hang into a failure. `PARTITA_HOSTILE_CLIENTS`
//! (default 100) sets how many connections or streams the memory tests use.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::server::signed;
use crate::support::ServerProcess;

/// What turns a hang into a failure.
const CEILING: Duration = Duration::from_secs(120);

/// How many connections or streams the memory tests open.
fn clients() -> usize {
    std::env::var("PARTITA_HOSTILE_CLIENTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100)
}

fn connect(server: &ServerProcess) -> TcpStream {
    let stream = TcpStream::connect(&server.addr).unwrap();
    stream.set_read_timeout(Some(CEILING)).unwrap();
    stream
}

/// Reads until the server closes the connection; fails on a hang.
fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let read = stream.read_to_end(&mut out);
    // Closed (or reset, when the server had bytes left unread), not the
    // read timeout of a connection left open.
    assert!(
        match &read {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        },
        "the server kept the connection open: {read:?}"
    );
    out
}

/// Reads one HTTP/1.1 response (head and `content-length` body).
fn read_response(stream: &mut TcpStream) -> (u16, String) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).expect("a response head");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head[9..12].parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).unwrap();
    (status, format!("{head}{}", String::from_utf8_lossy(&body)))
}

/// A signed request head (keep-alive), with `content-length` if given.
fn signed_head(server: &ServerProcess, method: &str, path: &str, length: Option<usize>) -> String {
    let req = signed(method, path, &[], b"");
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\nhost: {}\r\nauthorization: {}\r\nx-ms-date: {}\r\n\
         x-ms-documentdb-partitionkey: [\"p\"]\r\n",
        server.addr,
        req.headers["authorization"].to_str().unwrap(),
        req.headers["x-ms-date"].to_str().unwrap(),
    );
    if let Some(length) = length {
        text.push_str(&format!("content-length: {length}\r\n"));
    }
    text.push_str("\r\n");
    text
}

/// Asserts the server answers a signed request (retrying while it is
/// still releasing what the test held, up to the ceiling).
fn assert_serves(server: &ServerProcess) {
    let started = Instant::now();
    loop {
        let response = server.signed_raw("GET", "/dbs", "", b"");
        if response.starts_with("HTTP/1.1 200") {
            return;
        }
        assert!(
            started.elapsed() < CEILING && response.starts_with("HTTP/1.1 503"),
            "the server no longer serves: {response}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The server's resident memory, in bytes.
fn rss(server: &ServerProcess) -> u64 {
    rss_of(server.child.id())
}

fn rss_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// The HTTP/2 connection preface and an empty SETTINGS frame.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

#[test]
fn silent_and_idle_connections_are_closed() {
    // Headers may take ten minutes (longer than the test's ceiling), so
    // only the silence deadline can close these connections.
    let server = ServerProcess::start(&[
        "--in-memory",
        "--client-timeout-ms",
        "600000",
        "--idle-timeout-ms",
        "300",
    ]);
    // Connects and sends nothing.
    let mut silent = connect(&server);
    assert!(read_until_closed(&mut silent).is_empty());
    // A request on a keep-alive connection, then silence.
    let mut idle = connect(&server);
    idle.write_all(signed_head(&server, "GET", "/dbs", None).as_bytes())
        .unwrap();
    let (status, response) = read_response(&mut idle);
    assert_eq!(status, 200, "{response}");
    assert!(read_until_closed(&mut idle).is_empty());
    assert_serves(&server);
}

#[test]
fn headers_that_never_end_are_cut_off() {
    // Silence is allowed for ten minutes (longer than the test's ceiling),
    // so only the header deadline can close these connections.
    let server = ServerProcess::start(&[
        "--in-memory",
        "--client-timeout-ms",
        "300",
        "--idle-timeout-ms",
        "600000",
    ]);
    let mut h1 = connect(&server);
    h1.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n").unwrap();
    read_until_closed(&mut h1);
    // HTTP/2 with prior knowledge: only the preface and settings (bytes,
    // but never a request head).
    let mut h2 = connect(&server);
    h2.write_all(H2_PREFACE).unwrap();
    read_until_closed(&mut h2);
    // HTTP/2: a header block that never ends (HEADERS without END_HEADERS).
    let mut h2 = connect(&server);
    h2.write_all(H2_PREFACE).unwrap();
    h2.write_all(b"\x00\x00\x01\x01\x00\x00\x00\x00\x01\x83")
        .unwrap();
    read_until_closed(&mut h2);
    assert_serves(&server);
    // TLS: the start of a ClientHello, then nothing (the handshake counts
    // as the first request's head).
    let server = ServerProcess::start(&[
        "--in-memory",
        "--client-timeout-ms",
        "300",
        "--idle-timeout-ms",
        "600000",
        "--tls",
    ]);
    let mut tls = connect(&server);
    tls.write_all(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        .unwrap();
    read_until_closed(&mut tls);
}

#[test]
fn a_flood_past_the_connection_cap_is_answered_503() {
    let cap = 8;
    let server = ServerProcess::start(&[
        "--in-memory",
        "--max-connections",
        &cap.to_string(),
        "--idle-timeout-ms",
        "600000",
    ]);
    // The cap's worth of connections that say nothing, accepted in order
    // before the flood.
    let holders: Vec<TcpStream> = (0..cap).map(|_| connect(&server)).collect();
    for _ in 0..3 * cap {
        let response = server.raw(b"GET /dbs HTTP/1.1\r\nhost: x\r\n\r\n");
        assert!(response.starts_with("HTTP/1.1 503"), "{response}");
        assert!(
            response.contains(r#""code":"ServiceUnavailable""#),
            "{response}"
        );
        assert!(response.contains("connection: close"), "{response}");
    }
    drop(holders);
    assert_serves(&server);
}

#[test]
fn an_unsigned_request_is_refused_before_its_body_is_read() {
    let server = ServerProcess::start(&["--in-memory"]);
    // Only the head of a 2 MB body is sent: the 401 comes anyway.
    let mut stream = connect(&server);
    stream
        .write_all(b"POST /dbs HTTP/1.1\r\nhost: x\r\ncontent-length: 2000000\r\n\r\n")
        .unwrap();
    let (status, response) = read_response(&mut stream);
    assert_eq!(status, 401, "{response}");
    assert!(response.contains(r#""code":"Unauthorized""#), "{response}");
    assert!(
        response.contains("Required header 'authorization' is missing"),
        "{response}"
    );
    // A wrong signature too, with the message Gateway::handle gives.
    let mut stream = connect(&server);
    let head = signed_head(&server, "POST", "/dbs", Some(2_000_000)).replacen(
        "POST /dbs ",
        "POST /dbs/other ",
        1,
    );
    stream.write_all(head.as_bytes()).unwrap();
    let (status, response) = read_response(&mut stream);
    assert_eq!(status, 401, "{response}");
    assert!(
        response.contains("authorization token can't serve"),
        "{response}"
    );
    assert_serves(&server);
}

/// The most a test lets the server's memory grow while clients hold
/// bodies: the body budget it is started with, plus room for everything
/// else (connections, hyper's buffers, the allocator's slack). Without the
/// budget the server would hold every body: `clients()` × 2 MB.
const BUDGET: usize = 8 * 1024 * 1024;
const MARGIN: u64 = 96 * 1024 * 1024;
const BODY: usize = 2_000_000;

#[test]
fn connections_holding_large_bodies_stay_within_the_budget() {
    let server = ServerProcess::start(&[
        "--in-memory",
        "--client-timeout-ms",
        "5000",
        "--max-buffered-bytes",
        &BUDGET.to_string(),
    ]);
    assert_serves(&server);
    let before = rss(&server);
    let body: std::sync::Arc<[u8]> = vec![b'x'; BODY - 1].into();
    let head = signed_head(&server, "POST", "/dbs", Some(BODY));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (done, pid) = (done.clone(), server.child.id());
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                peak = peak.max(rss_of(pid));
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        })
    };
    // Each client sends all of its body but the last byte, then waits for
    // the answer: 503 when the budget is spent, 408 when its body was read
    // and held until the body timeout.
    let clients: Vec<_> = (0..clients())
        .map(|_| {
            let mut stream = connect(&server);
            let (head, body) = (head.clone(), body.clone());
            std::thread::spawn(move || {
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&body);
                let mut out = Vec::new();
                let _ = stream.read_to_end(&mut out);
                String::from_utf8_lossy(&out).into_owned()
            })
        })
        .collect();
    for client in clients {
        let response = client.join().unwrap();
        assert!(
            response.is_empty()
                || response.starts_with("HTTP/1.1 503")
                || response.starts_with("HTTP/1.1 408"),
            "{response}"
        );
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    let peak = sampler.join().unwrap();
    assert!(
        peak < before + BUDGET as u64 + MARGIN,
        "the server grew from {before} to {peak} bytes"
    );
    assert_serves(&server);
}

#[test]
fn http2_streams_holding_large_bodies_stay_within_the_budget() {
    let server = ServerProcess::start(&[
        "--in-memory",
        "--client-timeout-ms",
        "5000",
        "--max-buffered-bytes",
        &BUDGET.to_string(),
    ]);
    assert_serves(&server);
    let before = rss(&server);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let addr = server.addr.clone();
    let peak = runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let (mut client, connection) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(connection);
        let body = bytes::Bytes::from(vec![b'x'; BODY - 1]);
        // Unsigned streams declaring 2 MB: 401 without a byte of body.
        let mut responses = Vec::new();
        let mut unsigned = Vec::new();
        for _ in 0..clients() {
            let request = hyper::Request::post(format!("http://{addr}/dbs"))
                .header("content-length", BODY.to_string())
                .body(())
                .unwrap();
            client = client.ready().await.unwrap();
            let (response, stream) = client.send_request(request, false).unwrap();
            responses.push(response);
            unsigned.push(stream);
        }
        for response in responses {
            let response = tokio::time::timeout(CEILING, response)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(response.status(), 401);
        }
        // Signed streams that send all of a 2 MB body but the last byte.
        let req = signed("POST", "/dbs", &[], b"");
        let mut streams = Vec::new();
        let mut responses = Vec::new();
        for _ in 0..clients() {
            let request = hyper::Request::post(format!("http://{addr}/dbs"))
                .header("content-length", BODY.to_string())
                .header("authorization", req.headers["authorization"].clone())
                .header("x-ms-date", req.headers["x-ms-date"].clone())
                .body(())
                .unwrap();
            client = client.ready().await.unwrap();
            let (response, mut stream) = client.send_request(request, false).unwrap();
            stream.send_data(body.clone(), false).unwrap();
            streams.push(stream);
            responses.push(tokio::spawn(response));
        }
        // Each stream is refused (503), or has its body read and held
        // until the body timeout (408).
        let mut peak = before;
        let started = Instant::now();
        while responses.iter().any(|r| !r.is_finished()) {
            assert!(started.elapsed() < CEILING, "streams are never answered");
            peak = peak.max(rss(&server));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for response in responses {
            let status = response.await.unwrap().unwrap().status();
            assert!([408, 503].contains(&status.as_u16()), "{status}");
        }
        drop(streams);
        peak.max(rss(&server))
    });
    drop(runtime);
    assert!(
        peak < before + BUDGET as u64 + MARGIN,
        "the server grew from {before} to {peak} bytes"
    );
    assert_serves(&server);
}

#[test]
fn a_stuck_call_is_answered_408_and_sigterm_still_stops_the_server() {
    let mut server = ServerProcess::start(&["--in-memory", "--call-deadline-ms", "1500"]);
    let ok = |response: String, status: &str| {
        assert!(response.starts_with(status), "{response}");
    };
    ok(
        server.signed_raw("POST", "/dbs", "", br#"{"id":"d"}"#),
        "HTTP/1.1 201",
    );
    ok(
        server.signed_raw(
            "POST",
            "/dbs/d/colls",
            "",
            br#"{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}"#,
        ),
        "HTTP/1.1 201",
    );
    // Catastrophic backtracking: a native loop the script's wall clock
    // does not reach when it runs in process.
    let stuck = r#"{"id":"stuck","body":"function stuck() { getContext().getResponse().setBody(/(a+)+$/.test('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!')); }"}"#;
    ok(
        server.signed_raw("POST", "/dbs/d/colls/c/sprocs", "", stuck.as_bytes()),
        "HTTP/1.1 201",
    );
    let exec = |stream: &mut TcpStream| {
        let mut request = signed_head(&server, "POST", "/dbs/d/colls/c/sprocs/stuck", Some(2));
        request.push_str("[]");
        stream.write_all(request.as_bytes()).unwrap();
    };
    let mut stream = connect(&server);
    exec(&mut stream);
    let (status, response) = read_response(&mut stream);
    assert_eq!(status, 408, "{response}");
    assert!(
        response.contains(r#""code":"RequestTimeout""#),
        "{response}"
    );
    // The same connection serves the next request.
    stream
        .write_all(signed_head(&server, "GET", "/dbs/d", None).as_bytes())
        .unwrap();
    let (status, response) = read_response(&mut stream);
    assert_eq!(status, 200, "{response}");
    // Another stuck call in flight, then SIGTERM: the process ends.
    let mut in_flight = connect(&server);
    exec(&mut in_flight);
    server.terminate();
    // Its grace is 8 s, then 1 s.
    let status = server.exit_status(CEILING);
    assert!(status.success(), "{status:?}");
}
