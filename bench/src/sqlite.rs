//! SQLite as a target, in process through rusqlite (bundled SQLite, JSON1).
//!
//! Documents are JSON text in `posts` and `feed` tables keyed by
//! (partition key, id), like Partita's containers; the feed has an index on
//! its `creationDate` (what a SQLite user would add for Q6). Each caller has
//! its own connection; each call is one `BEGIN IMMEDIATE` transaction in
//! WAL mode, `synchronous=FULL` (durable) or `OFF` (relaxed).
//! createComment increments `commentCount` with `json_set` in SQL and
//! inserts the comment; truncateFeed inserts, counts and deletes the oldest
//! surplus; the feed read returns the 100 newest bodies, parsed.

use std::path::PathBuf;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use crate::{
    BenchError, Call, Caller, Durability, FEED_SIZE, Target, Workload, check_comments, check_feed,
    check_feed_read, feed_post, post_id,
};

const SCHEMA: &str = "
CREATE TABLE posts (pk TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (pk, id)) WITHOUT ROWID;
CREATE TABLE feed (pk TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (pk, id)) WITHOUT ROWID;
CREATE INDEX feed_by_date ON feed (pk, json_extract(body, '$.creationDate'));
";

/// A SQLite database file, fresh for every row.
pub struct SqliteTarget {
    durability: Durability,
    dir: Option<tempfile::TempDir>,
}

impl SqliteTarget {
    /// A target in `durability` (relaxed or durable).
    pub fn new(durability: Durability) -> SqliteTarget {
        SqliteTarget {
            durability,
            dir: None,
        }
    }

    fn path(&self) -> Result<PathBuf, BenchError> {
        self.dir
            .as_ref()
            .map(|d| d.path().join("bench.sqlite"))
            .ok_or_else(|| BenchError::Check("the target was not prepared".into()))
    }

    fn open(&self) -> Result<Connection, BenchError> {
        let conn = Connection::open(self.path()?)?;
        conn.busy_timeout(Duration::from_secs(30))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        let sync = if self.durability == Durability::Durable {
            "FULL"
        } else {
            "OFF"
        };
        conn.pragma_update(None, "synchronous", sync)?;
        Ok(conn)
    }
}

impl Target for SqliteTarget {
    fn system(&self) -> &str {
        "SQLite"
    }

    fn durability(&self) -> Durability {
        self.durability
    }

    fn settings(&self) -> String {
        format!(
            "rusqlite (bundled SQLite {}), WAL, synchronous={}, one connection per caller, BEGIN IMMEDIATE per call",
            rusqlite::version(),
            if self.durability == Durability::Durable {
                "FULL"
            } else {
                "OFF"
            }
        )
    }

    fn prepare(&mut self, workload: Workload, partitions: usize) -> Result<(), BenchError> {
        self.dir = Some(tempfile::tempdir().map_err(BenchError::io("creating a directory"))?);
        let mut conn = self.open()?;
        conn.execute_batch(SCHEMA)?;
        let tx = conn.transaction()?;
        match workload {
            Workload::CreateComment => {
                let mut insert =
                    tx.prepare("INSERT INTO posts (pk, id, body) VALUES (?1, ?1, ?2)")?;
                for p in 0..partitions {
                    let id = post_id(p);
                    let body = partita_workload::blog::post(&id, "u1", p as u64).to_string();
                    insert.execute(params![id, body])?;
                }
            }
            Workload::TruncateFeed | Workload::FeedRead => {
                let mut insert =
                    tx.prepare("INSERT INTO feed (pk, id, body) VALUES ('post', ?1, ?2)")?;
                for seq in 0..FEED_SIZE as u64 {
                    let post = feed_post(seq);
                    insert.execute(params![post["id"].as_str(), post.to_string()])?;
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn connect(&self) -> Result<Box<dyn Caller + '_>, BenchError> {
        Ok(Box::new(SqliteCaller { conn: self.open()? }))
    }

    fn verify(&mut self, workload: Workload, calls: u64) -> Result<(), BenchError> {
        let conn = self.open()?;
        match workload {
            Workload::CreateComment => {
                let count_sum: i64 = conn.query_row(
                    "SELECT coalesce(sum(json_extract(body, '$.commentCount')), 0) FROM posts WHERE json_extract(body, '$.type') = 'post'",
                    [],
                    |r| r.get(0),
                )?;
                let comments: i64 = conn.query_row(
                    "SELECT count(*) FROM posts WHERE json_extract(body, '$.type') = 'comment'",
                    [],
                    |r| r.get(0),
                )?;
                check_comments(calls, count_sum as u64, comments as u64)
            }
            Workload::TruncateFeed | Workload::FeedRead => {
                let size: i64 =
                    conn.query_row("SELECT count(*) FROM feed WHERE pk = 'post'", [], |r| {
                        r.get(0)
                    })?;
                let newest: Option<String> = conn
                    .query_row(
                        "SELECT id FROM feed WHERE pk = 'post' ORDER BY json_extract(body, '$.creationDate') DESC LIMIT 1",
                        [],
                        |r| r.get(0),
                    )
                    .optional()?;
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

/// One caller's connection.
pub struct SqliteCaller {
    conn: Connection,
}

impl Caller for SqliteCaller {
    fn call(&mut self, call: Call) -> Result<usize, BenchError> {
        match call {
            Call::CreateComment { post_id, comment } => {
                let tx = self
                    .conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)?;
                let updated = tx
                    .prepare_cached(
                        "UPDATE posts SET body = json_set(body, '$.commentCount', json_extract(body, '$.commentCount') + 1) WHERE pk = ?1 AND id = ?1",
                    )?
                    .execute([&post_id])?;
                if updated != 1 {
                    return Err(BenchError::Check(format!("post {post_id} not found")));
                }
                tx.prepare_cached("INSERT INTO posts (pk, id, body) VALUES (?1, ?2, ?3)")?
                    .execute(params![
                        post_id,
                        comment["id"].as_str(),
                        comment.to_string()
                    ])?;
                tx.commit()?;
                Ok(2)
            }
            Call::TruncateFeed { post, .. } => {
                let tx = self
                    .conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.prepare_cached("INSERT INTO feed (pk, id, body) VALUES ('post', ?1, ?2)")?
                    .execute(params![post["id"].as_str(), post.to_string()])?;
                let size: i64 = tx
                    .prepare_cached("SELECT count(*) FROM feed WHERE pk = 'post'")?
                    .query_row([], |r| r.get(0))?;
                let surplus = (size as usize).saturating_sub(FEED_SIZE);
                if surplus > 0 {
                    tx.prepare_cached(
                        "DELETE FROM feed WHERE pk = 'post' AND id IN (SELECT id FROM feed WHERE pk = 'post' ORDER BY json_extract(body, '$.creationDate') LIMIT ?1)",
                    )?
                    .execute([surplus as i64])?;
                }
                tx.commit()?;
                Ok(1 + surplus)
            }
            Call::FeedRead => {
                let mut stmt = self.conn.prepare_cached(
                    "SELECT body FROM feed WHERE pk = 'post' ORDER BY json_extract(body, '$.creationDate') DESC LIMIT 100",
                )?;
                let mut rows = stmt.query([])?;
                let mut posts = Vec::with_capacity(FEED_SIZE);
                while let Some(row) = rows.next()? {
                    let text: String = row.get(0)?;
                    let post: Value = serde_json::from_str(&text)
                        .map_err(|e| BenchError::Check(format!("a feed body is not JSON: {e}")))?;
                    posts.push(post);
                }
                check_feed_read(&posts)
            }
        }
    }
}
