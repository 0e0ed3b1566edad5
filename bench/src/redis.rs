//! Redis as a target: Debian's `redis-server`, started privately on a free
//! loopback port with its files in a temporary directory, stopped at the end.
//!
//! Documents are JSON strings under `posts:{<postId>}:<id>` and
//! `feed:{post}:<id>`, the feed ordered by a sorted set (score = the post's
//! sequence, i.e. its `creationDate` order). Each call is one `EVALSHA` of a
//! Lua script (atomic in Redis), one round trip per call over a connection
//! per caller. The scripts check before they write, because Redis does not
//! roll back a script's earlier writes when it fails. Durability is the
//! append-only file: `appendfsync always` (durable: fsynced before replies
//! are sent, batched per event-loop turn) or `everysec` (relaxed), switched
//! with `CONFIG SET` between rows; RDB snapshots are off.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Connection;
use serde_json::Value;

use crate::process::{PeerOptions, StopGuard, ensure_installed, free_port, log_tail, wait_until};
use crate::{
    BenchError, Call, Caller, Durability, FEED_SIZE, START_TIMEOUT, Slot, Target, Workload,
    check_comments, check_feed, check_feed_read, feed_post, post_id,
};

const CREATE_COMMENT_LUA: &str = r"
local post = redis.call('GET', KEYS[1])
if not post then return redis.error_reply('post not found: ' .. KEYS[1]) end
if redis.call('EXISTS', KEYS[2]) == 1 then return redis.error_reply('comment exists: ' .. KEYS[2]) end
local doc = cjson.decode(post)
doc.commentCount = doc.commentCount + 1
redis.call('SET', KEYS[1], cjson.encode(doc))
redis.call('SET', KEYS[2], ARGV[1])
return 2
";

const TRUNCATE_FEED_LUA: &str = r"
local key = ARGV[1] .. ARGV[2]
if redis.call('EXISTS', key) == 1 then return redis.error_reply('post exists: ' .. key) end
redis.call('SET', key, ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2])
local surplus = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[5])
if surplus > 0 then
  local old = redis.call('ZPOPMIN', KEYS[1], surplus)
  for i = 1, #old, 2 do redis.call('DEL', ARGV[1] .. old[i]) end
  return 1 + surplus
end
return 1
";

const READ_FEED_LUA: &str = r"
local ids = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
if #ids == 0 then return {} end
for i = 1, #ids do ids[i] = ARGV[1] .. ids[i] end
return redis.call('MGET', unpack(ids))
";

const FEED_INDEX: &str = "feedidx:{post}";
const FEED_PREFIX: &str = "feed:{post}:";

fn post_key(post_id: &str, id: &str) -> String {
    format!("posts:{{{post_id}}}:{id}")
}

/// A private redis-server process.
pub struct RedisServer {
    client: redis::Client,
    version: String,
    pid: u32,
    _stop: StopGuard,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// Installs (if allowed) and starts redis-server on a free loopback port.
    ///
    /// # Errors
    /// [`BenchError::Peer`] with the reason when it cannot.
    pub fn start(options: PeerOptions) -> Result<RedisServer, BenchError> {
        let binary = ensure_installed("redis-server", "redis-server", Vec::new, options)
            .map_err(BenchError::Peer)?;
        let dir = tempfile::tempdir().map_err(BenchError::io("creating Redis's directory"))?;
        let port = free_port()?;
        let log: PathBuf = dir.path().join("redis.log");
        let child = Command::new(&binary)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .arg("--dir")
            .arg(dir.path())
            .arg("--logfile")
            .arg(&log)
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--daemonize",
                "no",
                "--protected-mode",
                "yes",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(BenchError::io(format!("starting {}", binary.display())))?;
        let pid = child.id();
        let child = Arc::new(Mutex::new(child));
        let stop = {
            let child = child.clone();
            StopGuard::register(move || stop_child(&child))
        };
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
        let ready = wait_until(START_TIMEOUT, || {
            client
                .get_connection()
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                .is_ok()
        });
        if !ready {
            return Err(BenchError::Peer(format!(
                "redis-server did not answer on port {port} within {START_TIMEOUT:?}: {}",
                log_tail(&log)
            )));
        }
        let mut conn = client.get_connection()?;
        let info: String = redis::cmd("INFO").arg("server").query(&mut conn)?;
        let version = info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("?")
            .trim()
            .to_owned();
        Ok(RedisServer {
            client,
            version,
            pid,
            _stop: stop,
            _dir: dir,
        })
    }
}

/// SIGTERM (Redis shuts down cleanly), SIGKILL after 5 s.
fn stop_child(child: &Mutex<Child>) {
    let mut child = child.lock().unwrap_or_else(|e| e.into_inner());
    let _ = Command::new("kill")
        .arg(child.id().to_string())
        .stderr(Stdio::null())
        .status();
    if !wait_until(Duration::from_secs(5), || {
        matches!(child.try_wait(), Ok(Some(_)))
    }) {
        let _ = child.kill();
    }
    let _ = child.wait();
}

/// The relaxed and durable Redis slots, sharing one server; both skipped
/// with the reason when the server cannot start.
pub fn slots(options: PeerOptions) -> Vec<Slot> {
    match RedisServer::start(options) {
        Ok(server) => {
            let server = Arc::new(server);
            [Durability::Relaxed, Durability::Durable]
                .map(|durability| {
                    Slot::Ready(Box::new(RedisTarget {
                        server: server.clone(),
                        durability,
                        shas: None,
                    }))
                })
                .into()
        }
        Err(e) => [Durability::Relaxed, Durability::Durable]
            .map(|durability| Slot::Skipped {
                system: "Redis".to_owned(),
                durability,
                reason: e.to_string(),
            })
            .into(),
    }
}

/// The server in one `appendfsync` setting.
pub struct RedisTarget {
    server: Arc<RedisServer>,
    durability: Durability,
    shas: Option<Arc<Shas>>,
}

/// The loaded scripts' SHA-1s.
struct Shas {
    create_comment: String,
    truncate_feed: String,
    read_feed: String,
}

impl RedisTarget {
    fn appendfsync(&self) -> &'static str {
        if self.durability == Durability::Durable {
            "always"
        } else {
            "everysec"
        }
    }
}

fn load(conn: &mut Connection, script: &str) -> Result<String, BenchError> {
    Ok(redis::cmd("SCRIPT").arg("LOAD").arg(script).query(conn)?)
}

fn values(conn: &mut Connection, pattern: &str) -> Result<Vec<Value>, BenchError> {
    let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(conn)?;
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(1000) {
        let bodies: Vec<String> = redis::cmd("MGET").arg(chunk).query(conn)?;
        for body in bodies {
            out.push(parse(&body)?);
        }
    }
    Ok(out)
}

fn parse(body: &str) -> Result<Value, BenchError> {
    serde_json::from_str(body)
        .map_err(|e| BenchError::Check(format!("a stored body is not JSON: {e}")))
}

impl Target for RedisTarget {
    fn system(&self) -> &str {
        "Redis"
    }

    fn durability(&self) -> Durability {
        self.durability
    }

    fn server_pid(&self) -> Option<u32> {
        Some(self.server.pid)
    }

    fn settings(&self) -> String {
        format!(
            "redis-server {} on 127.0.0.1 (TCP), appendonly yes, appendfsync {}, no RDB; Lua via EVALSHA, one connection per caller",
            self.server.version,
            self.appendfsync()
        )
    }

    fn prepare(&mut self, workload: Workload, partitions: usize) -> Result<(), BenchError> {
        let mut conn = self.server.client.get_connection()?;
        redis::cmd("FLUSHALL").arg("SYNC").query::<()>(&mut conn)?;
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("appendfsync")
            .arg(self.appendfsync())
            .query::<()>(&mut conn)?;
        self.shas = Some(Arc::new(Shas {
            create_comment: load(&mut conn, CREATE_COMMENT_LUA)?,
            truncate_feed: load(&mut conn, TRUNCATE_FEED_LUA)?,
            read_feed: load(&mut conn, READ_FEED_LUA)?,
        }));
        let mut pipe = redis::pipe();
        match workload {
            Workload::CreateComment => {
                for p in 0..partitions {
                    let id = post_id(p);
                    pipe.cmd("SET")
                        .arg(post_key(&id, &id))
                        .arg(partita_workload::blog::post(&id, "u1", p as u64).to_string())
                        .ignore();
                }
            }
            Workload::TruncateFeed | Workload::FeedRead => {
                for seq in 0..FEED_SIZE as u64 {
                    let post = feed_post(seq);
                    let id = post["id"].as_str().unwrap_or_default().to_owned();
                    pipe.cmd("SET")
                        .arg(format!("{FEED_PREFIX}{id}"))
                        .arg(post.to_string())
                        .ignore();
                    pipe.cmd("ZADD").arg(FEED_INDEX).arg(seq).arg(id).ignore();
                }
            }
        }
        pipe.query::<()>(&mut conn)?;
        Ok(())
    }

    fn connect(&self) -> Result<Box<dyn Caller + '_>, BenchError> {
        let shas = self
            .shas
            .clone()
            .ok_or_else(|| BenchError::Check("the target was not prepared".into()))?;
        Ok(Box::new(RedisCaller {
            conn: self.server.client.get_connection()?,
            shas,
        }))
    }

    fn verify(&mut self, workload: Workload, calls: u64) -> Result<(), BenchError> {
        let mut conn = self.server.client.get_connection()?;
        match workload {
            Workload::CreateComment => {
                let (mut count_sum, mut comments) = (0, 0);
                for doc in values(&mut conn, "posts:*")? {
                    match doc["type"].as_str() {
                        Some("post") => count_sum += doc["commentCount"].as_u64().unwrap_or(0),
                        Some("comment") => comments += 1,
                        _ => {}
                    }
                }
                check_comments(calls, count_sum, comments)
            }
            Workload::TruncateFeed | Workload::FeedRead => {
                let docs = values(&mut conn, &format!("{FEED_PREFIX}*"))?;
                let indexed: usize = redis::cmd("ZCARD").arg(FEED_INDEX).query(&mut conn)?;
                let newest: Vec<String> = redis::cmd("ZREVRANGE")
                    .arg(FEED_INDEX)
                    .arg(0)
                    .arg(0)
                    .query(&mut conn)?;
                let size = if indexed == docs.len() {
                    docs.len()
                } else {
                    usize::MAX
                };
                let calls = if workload == Workload::FeedRead {
                    0
                } else {
                    calls
                };
                check_feed(size, newest.first().map(String::as_str), calls)
            }
        }
    }
}

/// One caller's connection.
struct RedisCaller {
    conn: Connection,
    shas: Arc<Shas>,
}

impl Caller for RedisCaller {
    fn call(&mut self, call: Call) -> Result<usize, BenchError> {
        match call {
            Call::CreateComment { post_id, comment } => {
                let comment_id = comment["id"].as_str().unwrap_or_default();
                Ok(redis::cmd("EVALSHA")
                    .arg(&self.shas.create_comment)
                    .arg(2)
                    .arg(post_key(&post_id, &post_id))
                    .arg(post_key(&post_id, comment_id))
                    .arg(comment.to_string())
                    .query(&mut self.conn)?)
            }
            Call::TruncateFeed { post, seq } => Ok(redis::cmd("EVALSHA")
                .arg(&self.shas.truncate_feed)
                .arg(1)
                .arg(FEED_INDEX)
                .arg(FEED_PREFIX)
                .arg(post["id"].as_str().unwrap_or_default())
                .arg(post.to_string())
                .arg(seq)
                .arg(FEED_SIZE)
                .query(&mut self.conn)?),
            Call::FeedRead => {
                let bodies: Vec<String> = redis::cmd("EVALSHA")
                    .arg(&self.shas.read_feed)
                    .arg(1)
                    .arg(FEED_INDEX)
                    .arg(FEED_PREFIX)
                    .arg(FEED_SIZE)
                    .query(&mut self.conn)?;
                let posts = bodies
                    .iter()
                    .map(|b| parse(b))
                    .collect::<Result<Vec<_>, _>>()?;
                check_feed_read(&posts)
            }
        }
    }
}
