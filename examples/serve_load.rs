//! Load test of `partita serve`: many concurrent keep-alive HTTP/1.1
//! connections execute the blog's createComment stored procedure through
//! the Cosmos DB gateway protocol (signed like an SDK signs), against a
//! server running in this process on loopback.
//!
//! Reports throughput, client-observed latency (p50/p99), server-side
//! latency from `x-ms-request-duration-ms` (request read → response ready,
//! the wait for a blocking thread included), and the CPU time each group of
//! threads spent per execution (server: async workers and handler threads;
//! committer: the engine's group-commit thread; client: this load
//! generator), read from `/proc/self/task` on Linux. Client and server
//! share the machine's cores, so on a small machine the rates are
//! pessimistic; the CPU split says how much of them the client took.
//!
//! The client is kept cheap: one task per connection on one async thread,
//! requests written from a reused buffer, and the signature (which depends
//! only on the verb, the path and the date, to the second) computed once per
//! second per connection rather than per request, as the protocol allows.
//!
//! ```text
//! cargo run --release --example serve_load -- [--connections 64] [--seconds 10] [--warmup 1]
//!     [--posts 1000] [--in-memory] [--durability none] [--handler-threads N]
//!     [--worker-threads N] [--isolate-scripts]
//!
//! `--isolate-scripts` runs the procedure in worker processes, as
//! `partita serve --isolate-scripts` does: the workers are the `partita`
//! binary of the same profile (`cargo build --release` first).
//! ```
//! Durable by default (a temporary data directory, `synchronous=FULL`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use partita::server::{
    EMULATOR_KEY, Gateway, GatewayLimits, MasterKey, ServeOptions, Server, resource_of,
};
use partita::{Database, Durability, Options};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

// The `partita` binary's allocator, so the figures are `partita serve`'s.
#[global_allocator]
static GLOBAL: partita::MiMalloc = partita::MiMalloc;

struct Args {
    connections: usize,
    seconds: u64,
    posts: usize,
    in_memory: bool,
    durability: Durability,
    handler_threads: usize,
    worker_threads: usize,
    warmup: u64,
    isolate_scripts: bool,
}

fn args() -> Args {
    let mut args = Args {
        connections: 64,
        seconds: 10,
        posts: 1000,
        in_memory: false,
        durability: Durability::Full,
        handler_threads: 0,
        worker_threads: 0,
        warmup: 1,
        isolate_scripts: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().expect("a value after the flag");
        match flag.as_str() {
            "--connections" => args.connections = value().parse().expect("a number"),
            "--seconds" => args.seconds = value().parse().expect("a number"),
            "--warmup" => args.warmup = value().parse().expect("a number"),
            "--posts" => args.posts = value().parse().expect("a number"),
            "--in-memory" => args.in_memory = true,
            "--isolate-scripts" => args.isolate_scripts = true,
            "--handler-threads" => args.handler_threads = value().parse().expect("a number"),
            "--worker-threads" => args.worker_threads = value().parse().expect("a number"),
            "--durability" => {
                args.durability = match value().as_str() {
                    "none" => Durability::None,
                    _ => Durability::Full,
                }
            }
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

/// One keep-alive connection speaking just enough HTTP/1.1.
struct Conn {
    stream: BufReader<TcpStream>,
    key: Arc<MasterKey>,
}

struct Reply {
    status: u16,
    server_micros: u64,
    body: Vec<u8>,
}

impl Conn {
    async fn open(addr: SocketAddr, key: Arc<MasterKey>) -> Conn {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Conn {
            stream: BufReader::new(stream),
            key,
        }
    }

    async fn send(&mut self, method: &str, path: &str, extra: &str, body: &[u8]) -> Reply {
        let (date, auth) = signature(&self.key, method, path, SystemTime::now());
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: localhost\r\nauthorization: {auth}\r\n\
             x-ms-date: {date}\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n",
            body.len()
        );
        let mut request = head.into_bytes();
        request.extend_from_slice(body);
        self.send_raw(&request).await
    }

    /// Writes one complete request and reads its response.
    async fn send_raw(&mut self, request: &[u8]) -> Reply {
        self.stream
            .get_mut()
            .write_all(request)
            .await
            .expect("write");
        let mut line = String::new();
        self.stream.read_line(&mut line).await.expect("status line");
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("an HTTP status");
        let (mut length, mut server_micros) = (0usize, 0u64);
        loop {
            line.clear();
            self.stream.read_line(&mut line).await.expect("header");
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let value = value.trim();
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.parse().expect("content-length");
                } else if name.eq_ignore_ascii_case("x-ms-request-duration-ms") {
                    server_micros = (value.parse::<f64>().unwrap_or(0.0) * 1000.0) as u64;
                }
            }
        }
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).await.expect("body");
        Reply {
            status,
            server_micros,
            body,
        }
    }
}

/// The date header and authorization of a request at `now`.
fn signature(key: &MasterKey, method: &str, path: &str, now: SystemTime) -> (String, String) {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let (kind, link) = resource_of(&segments);
    let date = httpdate::fmt_http_date(now);
    let auth = key.authorization(method, &kind, &link, &date);
    (date, auth)
}

/// A createComment request, re-signed when the second changes.
struct SignedRequests {
    key: Arc<MasterKey>,
    second: u64,
    head: String,
    buf: Vec<u8>,
}

impl SignedRequests {
    const PATH: &str = "/dbs/blog/colls/posts/sprocs/createComment";

    fn new(key: Arc<MasterKey>) -> SignedRequests {
        SignedRequests {
            key,
            second: u64::MAX,
            head: String::new(),
            buf: Vec::new(),
        }
    }

    /// The bytes of a request executing createComment on `post`.
    fn build(&mut self, post: &str) -> &[u8] {
        use std::fmt::Write;
        let now = SystemTime::now();
        let second = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if second != self.second {
            let (date, auth) = signature(&self.key, "POST", Self::PATH, now);
            self.head = format!(
                "POST {} HTTP/1.1\r\nhost: localhost\r\nauthorization: {auth}\r\n\
                 x-ms-date: {date}\r\ncontent-type: application/json\r\n",
                Self::PATH
            );
            self.second = second;
        }
        let mut text = std::mem::take(&mut self.head);
        let start = text.len();
        let body_len = r#"["",{"text":"nice post"}]"#.len() + post.len();
        let _ = write!(
            text,
            "x-ms-documentdb-partitionkey: [\"{post}\"]\r\ncontent-length: {body_len}\r\n\r\n\
             [\"{post}\",{{\"text\":\"nice post\"}}]"
        );
        self.buf.clear();
        self.buf.extend_from_slice(text.as_bytes());
        text.truncate(start);
        self.head = text;
        &self.buf
    }
}

/// CPU seconds used so far by this process's threads, by group (Linux;
/// zeros elsewhere): (server, committer, client, total).
fn cpu_by_group() -> [f64; 4] {
    let mut out = [0.0; 4];
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // "tid (comm) state ...": fields after the comm's closing paren;
        // utime and stime are the 12th and 13th of them, in clock ticks
        // (100 per second on Linux).
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks: u64 = [11, 12]
            .iter()
            .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
            .sum();
        let seconds = ticks as f64 / 100.0;
        let group = if comm.starts_with("partita-serve") {
            0
        } else if comm.starts_with("partita-commit") {
            1
        } else if comm.starts_with("serve-load") {
            2
        } else {
            3
        };
        if group < 3 {
            out[group] += seconds;
        }
        out[3] += seconds;
    }
    out
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let args = args();
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = if args.in_memory {
        Database::in_memory()
    } else {
        Database::open_with(
            dir.path(),
            Options {
                durability: args.durability,
                ..Options::default()
            },
        )
        .expect("open the database")
    };
    let key = Arc::new(MasterKey::from_base64(EMULATOR_KEY).expect("key"));
    let mut script_limits = partita::Limits::default();
    if args.isolate_scripts {
        // target/<profile>/examples/serve_load -> target/<profile>/partita
        let exe = std::env::current_exe().expect("this example's path");
        let program = exe
            .parent()
            .and_then(|examples| examples.parent())
            .expect("target/<profile>")
            .join("partita");
        assert!(
            program.exists(),
            "--isolate-scripts needs {} (cargo build --release)",
            program.display()
        );
        script_limits.workers = Some(partita::WorkerPool::new(partita::WorkerOptions::new(
            program,
            ["script-worker"],
        )));
    }
    let gateway = Gateway::new(db, (*key).clone(), GatewayLimits::default())
        .expect("gateway")
        .with_script_limits(script_limits);
    let server = Server::bind(
        Arc::new(gateway),
        ServeOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            handler_threads: args.handler_threads,
            worker_threads: args.worker_threads,
            ..ServeOptions::default()
        },
    )
    .expect("bind");
    let addr = server.local_addr().expect("address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server_thread = std::thread::spawn(move || {
        server
            .run_until(
                async {
                    let _ = stopped.await;
                },
                || {},
            )
            .expect("serve");
    });

    let client = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("serve-load")
        .enable_all()
        .build()
        .expect("client runtime");
    client.block_on(async {
        let mut setup = Conn::open(addr, key.clone()).await;
        let r = setup.send("POST", "/dbs", "", br#"{"id":"blog"}"#).await;
        assert_eq!(r.status, 201);
        let r = setup
            .send(
                "POST",
                "/dbs/blog/colls",
                "",
                br#"{"id":"posts","partitionKey":{"paths":["/postId"],"kind":"Hash","version":2}}"#,
            )
            .await;
        assert_eq!(r.status, 201);
        let sproc = serde_json::json!({
            "id": "createComment",
            "body": include_str!("../sprocs/samples/js/createComment.js"),
        });
        let r = setup
            .send(
                "POST",
                "/dbs/blog/colls/posts/sprocs",
                "",
                sproc.to_string().as_bytes(),
            )
            .await;
        assert_eq!(r.status, 201);
        for p in 0..args.posts {
            let post = serde_json::json!({"id": format!("p{p}"), "postId": format!("p{p}"),
                "type": "post", "title": "a post", "content": "x".repeat(1000), "commentCount": 0});
            let pk = format!("x-ms-documentdb-partitionkey: [\"p{p}\"]\r\n");
            let r = setup
                .send(
                    "POST",
                    "/dbs/blog/colls/posts/docs",
                    &pk,
                    post.to_string().as_bytes(),
                )
                .await;
            assert_eq!(r.status, 201);
        }

        let warmup = Duration::from_secs(args.warmup);
        let measure = Duration::from_secs(args.seconds);
        let start = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..args.connections {
            let key = key.clone();
            let posts = args.posts;
            let connections = args.connections;
            tasks.push(tokio::spawn(async move {
                let mut conn = Conn::open(addr, key.clone()).await;
                let mut requests = SignedRequests::new(key);
                let names: Vec<String> = (0..posts).map(|p| format!("p{p}")).collect();
                let (mut client_lat, mut server_lat) = (Vec::new(), Vec::new());
                let mut errors = 0u64;
                let mut k = c;
                loop {
                    let now = Instant::now();
                    if now - start >= warmup + measure {
                        break;
                    }
                    let post = &names[k % posts];
                    k += connections;
                    let reply = conn.send_raw(requests.build(post)).await;
                    if now - start < warmup {
                        continue;
                    }
                    if reply.status != 200 {
                        errors += 1;
                        if errors == 1 {
                            eprintln!(
                                "status {}: {}",
                                reply.status,
                                String::from_utf8_lossy(&reply.body)
                            );
                        }
                        continue;
                    }
                    client_lat.push(now.elapsed().as_micros() as u64);
                    server_lat.push(reply.server_micros);
                }
                (client_lat, server_lat, errors)
            }));
        }
        let start = tokio::time::Instant::from_std(start);
        tokio::time::sleep_until(start + warmup).await;
        let cpu_before = cpu_by_group();
        tokio::time::sleep_until(start + warmup + measure).await;
        let cpu_after = cpu_by_group();
        let (mut client_lat, mut server_lat, mut errors) = (Vec::new(), Vec::new(), 0);
        for task in tasks {
            let (c, s, e) = task.await.expect("task");
            client_lat.extend(c);
            server_lat.extend(s);
            errors += e;
        }
        client_lat.sort_unstable();
        server_lat.sort_unstable();
        let ok = client_lat.len();
        println!(
            "createComment via partita serve: {} connections, {}s, {} posts, {}",
            args.connections,
            args.seconds,
            args.posts,
            if args.in_memory {
                "in memory".to_owned()
            } else {
                format!("durability {:?}", args.durability)
            }
        );
        if args.isolate_scripts {
            println!("  scripts in worker processes (--isolate-scripts)");
        }
        println!(
            "  {ok} ok, {errors} errors, {:.0} executions/s",
            ok as f64 / measure.as_secs_f64()
        );
        println!(
            "  client latency  p50 {} µs  p99 {} µs",
            percentile(&client_lat, 0.50),
            percentile(&client_lat, 0.99)
        );
        println!(
            "  server latency  p50 {} µs  p99 {} µs",
            percentile(&server_lat, 0.50),
            percentile(&server_lat, 0.99)
        );
        let per_exec = |i: usize| (cpu_after[i] - cpu_before[i]) * 1e6 / ok.max(1) as f64;
        println!(
            "  CPU per execution: server {:.0} µs, committer {:.0} µs, client {:.0} µs, \
             process {:.0} µs ({:.2} cores busy)",
            per_exec(0),
            per_exec(1),
            per_exec(2),
            per_exec(3),
            (cpu_after[3] - cpu_before[3]) / measure.as_secs_f64()
        );
    });
    let _ = stop.send(());
    server_thread.join().expect("server thread");
}
