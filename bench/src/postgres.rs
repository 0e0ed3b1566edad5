//! PostgreSQL as a target: Debian's `postgresql`, a private cluster in a
//! temporary directory (initdb, then `pg_ctl start`), reachable only on a
//! Unix socket in that directory, stopped with `pg_ctl stop` at the end.
//! As root, the cluster runs as the `postgres` user (PostgreSQL refuses
//! root) through `runuser`.
//!
//! Documents are JSONB in `posts` and `feed` tables keyed by (partition key,
//! id); the feed has an index on `creationDate`. createComment and
//! truncateFeed are PL/pgSQL functions (`SELECT … FOR UPDATE` the post,
//! `jsonb_set` its count, insert the comment; insert, count, delete the
//! oldest surplus), each call one `SELECT fn(…)` statement, i.e. one
//! transaction and one round trip over a connection per caller. Durability
//! truncateFeed takes a transaction-scoped advisory lock on its partition
//! first: under READ COMMITTED, two concurrent calls would otherwise each
//! count 100 posts and neither delete (the harness's check caught that).
//! Durability
//! is `synchronous_commit` set per session: `on` (WAL fsynced before the
//! commit returns; PostgreSQL groups concurrent commits) or `off`.

use std::path::{Path, PathBuf};
use std::process::Command;

use postgres::{Client, NoTls, Statement};
use serde_json::Value;

use crate::process::{
    PeerOptions, StopGuard, ensure_installed, is_root, log_tail, run_quiet, user_ids,
};
use crate::{
    BenchError, Call, Caller, Durability, FEED_SIZE, Slot, Target, Workload, check_comments,
    check_feed, check_feed_read, feed_post, post_id,
};

const SCHEMA: &str = r"
CREATE TABLE posts (pk text NOT NULL, id text NOT NULL, body jsonb NOT NULL, PRIMARY KEY (pk, id));
CREATE TABLE feed (pk text NOT NULL, id text NOT NULL, body jsonb NOT NULL, PRIMARY KEY (pk, id));
CREATE INDEX feed_by_date ON feed (pk, (body->>'creationDate'));

CREATE FUNCTION create_comment(post_id text, comment jsonb) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  post jsonb;
BEGIN
  SELECT body INTO post FROM posts WHERE pk = post_id AND id = post_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'post % not found', post_id USING ERRCODE = 'no_data_found';
  END IF;
  post := jsonb_set(post, '{commentCount}', to_jsonb((post->>'commentCount')::bigint + 1));
  UPDATE posts SET body = post WHERE pk = post_id AND id = post_id;
  INSERT INTO posts (pk, id, body) VALUES (post_id, comment->>'id', comment);
  RETURN 2;
END $$;

CREATE FUNCTION truncate_feed(doc jsonb, max_docs integer) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  key text := doc->>'type';
  surplus bigint;
BEGIN
  -- One writer per feed partition, as in Partita (READ COMMITTED alone lets
  -- two concurrent calls each count 100 and neither delete).
  PERFORM pg_advisory_xact_lock(hashtext('feed/' || key));
  INSERT INTO feed (pk, id, body) VALUES (key, doc->>'id', doc);
  SELECT count(*) - max_docs INTO surplus FROM feed WHERE pk = key;
  IF surplus > 0 THEN
    DELETE FROM feed WHERE pk = key AND id IN
      (SELECT id FROM feed WHERE pk = key ORDER BY body->>'creationDate' LIMIT surplus);
    RETURN 1 + surplus;
  END IF;
  RETURN 1;
END $$;
";

const FEED_READ_SQL: &str =
    "SELECT body::text FROM feed WHERE pk = 'post' ORDER BY body->>'creationDate' DESC LIMIT 100";

/// A private PostgreSQL cluster.
pub struct PgCluster {
    socket_dir: PathBuf,
    version: String,
    /// The postmaster's process id (its backends are its children).
    pid: Option<u32>,
    // Declared before `_dir`: the cluster stops before its directory goes.
    _stop: StopGuard,
    _dir: tempfile::TempDir,
}

/// The directories Debian installs PostgreSQL's server binaries in, newest
/// version first.
fn pg_bin_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.path().join("bin"))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    // Numeric order: 15 before 9.6.
    dirs.sort_by_key(|d| {
        let version = d
            .parent()
            .and_then(Path::file_name)
            .and_then(|v| v.to_str())
            .and_then(|v| v.split('.').next())
            .and_then(|v| v.parse::<u32>().ok());
        std::cmp::Reverse(version)
    });
    dirs
}

/// A command run as `postgres` when this process is root.
fn as_postgres(program: &Path, root: bool) -> Command {
    if root {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

impl PgCluster {
    /// Installs (if allowed), creates and starts a private cluster.
    ///
    /// # Errors
    /// [`BenchError::Peer`] with the reason when it cannot.
    pub fn start(options: PeerOptions) -> Result<PgCluster, BenchError> {
        let peer = BenchError::Peer;
        // Debian's server binaries live off PATH; prefer them to any wrapper.
        let pg_ctl = match pg_bin_dirs().first().map(|d| d.join("pg_ctl")) {
            Some(p) if p.is_file() => p,
            _ => ensure_installed("pg_ctl", "postgresql", pg_bin_dirs, options).map_err(peer)?,
        };
        let bin = pg_ctl.parent().unwrap_or(Path::new("/")).to_owned();
        let initdb = bin.join("initdb");
        let root = is_root();
        let dir = tempfile::Builder::new()
            .prefix("partita-bench-pg")
            .tempdir()
            .map_err(BenchError::io("creating the cluster's directory"))?;
        if root {
            let (uid, gid) = user_ids("postgres")
                .map_err(|e| BenchError::Peer(format!("no postgres user to run as: {e}")))?;
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .map_err(BenchError::io("giving the cluster's directory to postgres"))?;
        }
        let data = dir.path().join("data");
        let log = dir.path().join("postgres.log");
        run_quiet(as_postgres(&initdb, root).arg("-D").arg(&data).args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        ]))
        .map_err(|e| BenchError::Peer(format!("initdb failed: {e}")))?;
        let server_options = format!(
            "-k {} -c listen_addresses='' -c max_connections=64 -c fsync=on",
            dir.path().display()
        );
        let start = run_quiet(
            as_postgres(&pg_ctl, root)
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "30", "-o", &server_options, "start"]),
        );
        // Registered even after a failed start: pg_ctl may have left a server.
        let stop = {
            let (pg_ctl, data) = (pg_ctl.clone(), data.clone());
            StopGuard::register(move || {
                let _ = run_quiet(
                    as_postgres(&pg_ctl, root)
                        .arg("-D")
                        .arg(&data)
                        .args(["-m", "fast", "-w", "stop"]),
                );
            })
        };
        start.map_err(|e| {
            BenchError::Peer(format!("pg_ctl start failed: {e}; {}", log_tail(&log)))
        })?;
        // `postmaster.pid`'s first line.
        let pid = std::fs::read_to_string(data.join("postmaster.pid"))
            .ok()
            .and_then(|text| text.lines().next()?.trim().parse().ok());
        let mut cluster = PgCluster {
            socket_dir: dir.path().to_owned(),
            version: String::new(),
            pid,
            _stop: stop,
            _dir: dir,
        };
        let mut client = cluster.client(Durability::Durable)?;
        client.batch_execute(SCHEMA)?;
        cluster.version = client
            .query_one("SHOW server_version", &[])?
            .get::<_, String>(0);
        Ok(cluster)
    }

    /// The postmaster's process id, when its pid file could be read.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The server's version.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Creates the empty database `name` in the cluster and returns its
    /// `postgresql://` URL (the cluster's Unix socket, no password).
    ///
    /// # Errors
    /// When the database cannot be created.
    pub fn create_database(&self, name: &str) -> Result<String, BenchError> {
        let mut client = self.client(Durability::Durable)?;
        client.batch_execute(&format!("CREATE DATABASE {name}"))?;
        Ok(format!(
            "postgresql://postgres@/{name}?host={}",
            self.socket_dir.display()
        ))
    }

    fn client(&self, durability: Durability) -> Result<Client, BenchError> {
        let mut client = postgres::Config::new()
            .host_path(&self.socket_dir)
            .user("postgres")
            .dbname("postgres")
            .connect(NoTls)?;
        let on = if durability == Durability::Durable {
            "on"
        } else {
            "off"
        };
        client.batch_execute(&format!("SET synchronous_commit = {on}"))?;
        Ok(client)
    }
}

/// The relaxed and durable PostgreSQL slots, sharing one cluster; both
/// skipped with the reason when it cannot start. With `partita`, also
/// Partita native stored in the same cluster, relaxed and durable, once
/// per node count in `nodes` (see
/// [`PartitaTarget::on_postgres`](crate::partita::PartitaTarget::on_postgres)).
pub fn slots(options: PeerOptions, partita: bool, nodes: &[usize]) -> Vec<Slot> {
    match PgCluster::start(options) {
        Ok(cluster) => {
            let cluster = std::sync::Arc::new(cluster);
            let mut slots: Vec<Slot> = [Durability::Relaxed, Durability::Durable]
                .map(|durability| {
                    Slot::Ready(Box::new(PgTarget {
                        cluster: cluster.clone(),
                        durability,
                    }))
                })
                .into();
            if partita {
                for &n in nodes {
                    for durability in [Durability::Relaxed, Durability::Durable] {
                        let target = crate::partita::PartitaTarget::on_postgres(
                            crate::partita::Flavor::Native,
                            durability,
                            cluster.clone(),
                            n,
                        );
                        slots.push(match target {
                            Ok(target) => Slot::Ready(Box::new(target)),
                            Err(reason) => Slot::Skipped {
                                system: format!("Partita native (PostgreSQL, {n} nodes)"),
                                durability,
                                reason,
                            },
                        });
                    }
                }
            }
            slots
        }
        Err(e) => [Durability::Relaxed, Durability::Durable]
            .map(|durability| Slot::Skipped {
                system: "PostgreSQL".to_owned(),
                durability,
                reason: e.to_string(),
            })
            .into(),
    }
}

/// The cluster with one `synchronous_commit` setting.
pub struct PgTarget {
    cluster: std::sync::Arc<PgCluster>,
    durability: Durability,
}

impl Target for PgTarget {
    fn system(&self) -> &str {
        "PostgreSQL"
    }

    fn server_pid(&self) -> Option<u32> {
        self.cluster.pid
    }

    fn durability(&self) -> Durability {
        self.durability
    }

    fn settings(&self) -> String {
        format!(
            "PostgreSQL {} on a Unix socket, fsync=on, synchronous_commit={}; PL/pgSQL over JSONB, one connection per caller",
            self.cluster.version,
            if self.durability == Durability::Durable {
                "on"
            } else {
                "off"
            }
        )
    }

    fn prepare(&mut self, workload: Workload, partitions: usize) -> Result<(), BenchError> {
        let mut client = self.cluster.client(self.durability)?;
        client.batch_execute("TRUNCATE posts, feed")?;
        let mut tx = client.transaction()?;
        match workload {
            Workload::CreateComment => {
                let insert = tx
                    .prepare("INSERT INTO posts (pk, id, body) VALUES ($1, $1, $2::text::jsonb)")?;
                for p in 0..partitions {
                    let id = post_id(p);
                    let body = partita_workload::blog::post(&id, "u1", p as u64).to_string();
                    tx.execute(&insert, &[&id, &body])?;
                }
            }
            Workload::TruncateFeed | Workload::FeedRead => {
                let insert = tx.prepare(
                    "INSERT INTO feed (pk, id, body) VALUES ('post', $1, $2::text::jsonb)",
                )?;
                for seq in 0..FEED_SIZE as u64 {
                    let post = feed_post(seq);
                    tx.execute(&insert, &[&post["id"].as_str(), &post.to_string()])?;
                }
            }
        }
        tx.commit()?;
        client.batch_execute("ANALYZE posts, feed")?;
        Ok(())
    }

    fn connect(&self) -> Result<Box<dyn Caller + '_>, BenchError> {
        let mut client = self.cluster.client(self.durability)?;
        let create_comment = client.prepare("SELECT create_comment($1, $2::text::jsonb)")?;
        let truncate_feed = client.prepare("SELECT truncate_feed($1::text::jsonb, $2::integer)")?;
        let feed_read = client.prepare(FEED_READ_SQL)?;
        Ok(Box::new(PgCaller {
            client,
            create_comment,
            truncate_feed,
            feed_read,
        }))
    }

    fn verify(&mut self, workload: Workload, calls: u64) -> Result<(), BenchError> {
        let mut client = self.cluster.client(self.durability)?;
        match workload {
            Workload::CreateComment => {
                let row = client.query_one(
                    "SELECT coalesce(sum((body->>'commentCount')::bigint) FILTER (WHERE body->>'type' = 'post'), 0)::bigint, \
                     count(*) FILTER (WHERE body->>'type' = 'comment') FROM posts",
                    &[],
                )?;
                let (count_sum, comments): (i64, i64) = (row.get(0), row.get(1));
                check_comments(calls, count_sum as u64, comments as u64)
            }
            Workload::TruncateFeed | Workload::FeedRead => {
                let size: i64 = client
                    .query_one("SELECT count(*) FROM feed WHERE pk = 'post'", &[])?
                    .get(0);
                let newest: Option<String> = client
                    .query_opt(
                        "SELECT id FROM feed WHERE pk = 'post' ORDER BY body->>'creationDate' DESC LIMIT 1",
                        &[],
                    )?
                    .map(|r| r.get(0));
                let calls = if workload == Workload::FeedRead {
                    0
                } else {
                    calls
                };
                check_feed(size as usize, newest.as_deref(), calls)
            }
        }
    }
}

/// One caller's connection and prepared statements.
struct PgCaller {
    client: Client,
    create_comment: Statement,
    truncate_feed: Statement,
    feed_read: Statement,
}

impl Caller for PgCaller {
    fn call(&mut self, call: Call) -> Result<usize, BenchError> {
        match call {
            Call::CreateComment { post_id, comment } => {
                let row = self
                    .client
                    .query_one(&self.create_comment, &[&post_id, &comment.to_string()])?;
                Ok(row.get::<_, i32>(0) as usize)
            }
            Call::TruncateFeed { post, .. } => {
                let row = self.client.query_one(
                    &self.truncate_feed,
                    &[&post.to_string(), &(FEED_SIZE as i32)],
                )?;
                Ok(row.get::<_, i32>(0) as usize)
            }
            Call::FeedRead => {
                let rows = self.client.query(&self.feed_read, &[])?;
                let posts = rows
                    .iter()
                    .map(|r| {
                        serde_json::from_str::<Value>(r.get::<_, &str>(0))
                            .map_err(|e| BenchError::Check(format!("a feed body is not JSON: {e}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                check_feed_read(&posts)
            }
        }
    }
}
