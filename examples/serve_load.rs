//! Load test of `partita serve`: many concurrent keep-alive HTTP/1.1
//! connections execute the blog's createComment stored procedure through
//! the Cosmos DB gateway protocol (signed like an SDK signs), against a
//! server running in this process on loopback.
//!
//! Reports throughput, client-observed latency (p50/p99) and server-side
//! latency from `x-ms-request-duration-ms` (request read → response ready,
//! the wait for a blocking thread included). Client and server share the
//! machine's cores, so on a small machine the figures are pessimistic.
//!
//! ```text
//! cargo run --release --example serve_load -- [--connections 64] [--seconds 10]
//!     [--posts 1000] [--in-memory] [--durability none] [--handler-threads N]
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
}

fn args() -> Args {
    let mut args = Args {
        connections: 64,
        seconds: 10,
        posts: 1000,
        in_memory: false,
        durability: Durability::Full,
        handler_threads: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().expect("a value after the flag");
        match flag.as_str() {
            "--connections" => args.connections = value().parse().expect("a number"),
            "--seconds" => args.seconds = value().parse().expect("a number"),
            "--posts" => args.posts = value().parse().expect("a number"),
            "--in-memory" => args.in_memory = true,
            "--handler-threads" => args.handler_threads = value().parse().expect("a number"),
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
        let segments: Vec<String> = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let (kind, link) = resource_of(&segments);
        let date = httpdate::fmt_http_date(SystemTime::now());
        let auth = self.key.authorization(method, &kind, &link, &date);
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: localhost\r\nauthorization: {auth}\r\n\
             x-ms-date: {date}\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n",
            body.len()
        );
        let mut request = head.into_bytes();
        request.extend_from_slice(body);
        self.stream
            .get_mut()
            .write_all(&request)
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
    let gateway = Gateway::new(db, (*key).clone(), GatewayLimits::default()).expect("gateway");
    let server = Server::bind(
        Arc::new(gateway),
        ServeOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            handler_threads: args.handler_threads,
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
            "body": include_str!("../sprocs/js/createComment.js"),
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

        let warmup = Duration::from_secs(1);
        let measure = Duration::from_secs(args.seconds);
        let start = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..args.connections {
            let key = key.clone();
            let posts = args.posts;
            let connections = args.connections;
            tasks.push(tokio::spawn(async move {
                let mut conn = Conn::open(addr, key).await;
                let (mut client_lat, mut server_lat) = (Vec::new(), Vec::new());
                let mut errors = 0u64;
                let mut k = c;
                loop {
                    let now = Instant::now();
                    if now - start >= warmup + measure {
                        break;
                    }
                    let post = format!("p{}", k % posts);
                    k += connections;
                    let pk = format!("x-ms-documentdb-partitionkey: [\"{post}\"]\r\n");
                    let body = format!(r#"["{post}",{{"text":"nice post"}}]"#);
                    let reply = conn
                        .send(
                            "POST",
                            "/dbs/blog/colls/posts/sprocs/createComment",
                            &pk,
                            body.as_bytes(),
                        )
                        .await;
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
    });
    let _ = stop.send(());
    server_thread.join().expect("server thread");
}
