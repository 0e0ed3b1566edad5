//! Partita side by side with the databases users already know.
//!
//! The same three calls of the blog workload (createComment, truncateFeed,
//! the Q6 feed read; see [`Workload`]) run on every [`Target`]: Partita
//! natively, as JavaScript procedures and (once the runtime merges) as Wasm
//! procedures, SQLite in process, and Redis and PostgreSQL as private servers
//! this crate starts, reaches over a socket and stops again.
//!
//! Every target stores the same documents (the JSON shapes of
//! `partita_workload::blog`), runs one transaction per call, and for the
//! client-server peers one round trip per call (a Lua script via `EVALSHA`,
//! a PL/pgSQL function). Each row of the report is one (workload, partition
//! count, callers, target, durability) combination: a warm-up, then a timed
//! run in which every caller times each of its calls, then a check of the
//! target's data against the number of calls made (so a target that skips
//! work fails its row instead of winning it). See [`run`] and [`Report`].
//!
//! Durability is paired ([`Durability`]): "durable" rows acknowledge a call
//! only after an fsync (or a group commit with the same guarantee),
//! "relaxed" rows write without an fsync per call, and "memory" rows (Partita
//! only) have no storage at all.

mod cpu;
pub mod partita;
pub mod postgres;
mod process;
pub mod redis;
mod report;
mod runner;
pub mod sqlite;

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

pub use process::{PeerOptions, install_interrupt_handler};
pub use report::{Measured, Outcome, PARTITA_JS, PARTITA_WASM, Report, Row, cpu_model};
pub use runner::{Budget, Config, RowSpec, run, run_row};

/// The number of posts the feed keeps (truncateFeed's `maxDocs`).
pub const FEED_SIZE: usize = 100;

/// One of the three calls compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Read a post, increment its `commentCount`, write a new comment, in one
    /// transaction on the post's logical partition.
    CreateComment,
    /// Insert a post into the feed (one logical partition of
    /// [`FEED_SIZE`] posts) and delete the oldest, in one transaction.
    TruncateFeed,
    /// Read the [`FEED_SIZE`] newest posts of the feed partition.
    FeedRead,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 3] = [
        Workload::CreateComment,
        Workload::TruncateFeed,
        Workload::FeedRead,
    ];

    /// The name used in the report and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Workload::CreateComment => "createComment",
            Workload::TruncateFeed => "truncateFeed",
            Workload::FeedRead => "Q6 feed read",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What an acknowledged call survives. Rows are compared only within one
/// class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Durability {
    /// No storage (Partita in memory): nothing survives the process.
    Memory,
    /// Written to the OS without an fsync per call: survives a process
    /// crash, may lose the last calls on a machine crash.
    Relaxed,
    /// fsynced before the call is acknowledged (per call or by group commit).
    Durable,
}

impl Durability {
    /// The name used in the report.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Memory => "memory",
            Durability::Relaxed => "relaxed",
            Durability::Durable => "durable",
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One call, with its documents built before the clock starts.
#[derive(Clone, Debug)]
pub enum Call {
    /// createComment on post `post_id` (its own logical partition).
    CreateComment {
        /// The post, also the partition key.
        post_id: String,
        /// The new comment, `postId` and `type` already set.
        comment: Value,
    },
    /// Insert `post` into the feed, keeping the newest [`FEED_SIZE`].
    TruncateFeed {
        /// The post, with `type: "post"` (the feed's partition key), an
        /// `id` and a `creationDate` later than every earlier call's.
        post: Value,
        /// The call's global sequence number (`creationDate` order).
        seq: u64,
    },
    /// Read the newest [`FEED_SIZE`] posts of the feed.
    FeedRead,
}

/// The id of post number `p` (each post is its own logical partition).
pub fn post_id(p: usize) -> String {
    format!("post-{p}")
}

/// Comment number `n` of caller `caller` on `post_id`.
pub fn comment(post_id: &str, caller: usize, n: u64) -> Value {
    json!({
        "id": format!("c-{caller}-{n}"),
        "postId": post_id,
        "type": "comment",
        "userId": "u1",
        "userUsername": "user-u1",
        "content": "Nice post! Thanks for writing it up.",
    })
}

/// Feed post number `seq`: the blog's post shape with `type: "post"`, the
/// feed's partition key, and a `creationDate` that sorts by `seq`.
pub fn feed_post(seq: u64) -> Value {
    let id = format!("f-{seq}");
    let mut post = ::partita_workload::blog::post(&id, "u1", seq);
    post["creationDate"] = json!(format!("2026-02-01T00:00:00.{seq:012}Z"));
    post
}

/// Why a target or a row could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Partita refused a call, or a procedure or trigger failed.
    #[error("partita: {0}")]
    Partita(#[from] ::partita::Error),
    /// SQLite failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Redis failed or refused a call.
    #[error("redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    /// PostgreSQL failed or refused a call.
    #[error("postgres: {0}")]
    Postgres(#[from] ::postgres::Error),
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A peer could not be installed or started.
    #[error("{0}")]
    Peer(String),
    /// A target's data after a run disagrees with the calls it acknowledged,
    /// or a call returned the wrong result.
    #[error("check failed: {0}")]
    Check(String),
}

impl BenchError {
    /// The Cosmos DB status code closest to the failure: Partita's own
    /// status, 503 for a peer that is not available, 500 otherwise.
    pub fn status(&self) -> u16 {
        match self {
            BenchError::Partita(e) => e.status(),
            BenchError::Peer(_) => 503,
            _ => 500,
        }
    }

    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
        let what = what.into();
        move |source| BenchError::Io { what, source }
    }
}

/// A database under test, in one durability configuration.
///
/// The runner calls [`prepare`](Target::prepare) for each row (fresh data),
/// [`connect`](Target::connect) once per caller thread, then
/// [`verify`](Target::verify) with the number of calls acknowledged.
pub trait Target: Send + Sync {
    /// The system's name in the report ("Partita JS", "PostgreSQL").
    fn system(&self) -> &str;
    /// What an acknowledged call survives.
    fn durability(&self) -> Durability;
    /// The settings behind [`durability`](Target::durability), for the report.
    fn settings(&self) -> String;
    /// Replaces the target's data with the starting data of `workload`:
    /// `partitions` posts for createComment, a full feed otherwise.
    ///
    /// # Errors
    /// When the target cannot store the data.
    fn prepare(&mut self, workload: Workload, partitions: usize) -> Result<(), BenchError>;
    /// A connection for one caller thread.
    ///
    /// # Errors
    /// When the target cannot be reached.
    fn connect(&self) -> Result<Box<dyn Caller + '_>, BenchError>;
    /// Checks the data after `calls` acknowledged calls of `workload`: every
    /// post's comments counted, the feed at [`FEED_SIZE`] with the newest
    /// posts.
    ///
    /// # Errors
    /// [`BenchError::Check`] when the data disagrees.
    fn verify(&mut self, workload: Workload, calls: u64) -> Result<(), BenchError>;
    /// Why the target has no way to run `workload`, if it has none (its
    /// rows are then skipped with this reason).
    fn skips(&self, _workload: Workload) -> Option<&str> {
        None
    }
    /// The process id of the target's server, whose CPU time (and its
    /// children's) counts in the row's CPU per call; `None` for a target
    /// that runs in the harness's process.
    fn server_pid(&self) -> Option<u32> {
        None
    }
}

/// One caller's connection to a [`Target`].
pub trait Caller: Send {
    /// Makes one call and returns the number of documents it returned (the
    /// feed read) or wrote.
    ///
    /// # Errors
    /// When the call fails; the runner stops the row.
    fn call(&mut self, call: Call) -> Result<usize, BenchError>;
}

/// A target in the run, or why it is skipped.
pub enum Slot {
    /// Runs.
    Ready(Box<dyn Target>),
    /// Skipped, for this reason, printed in every row it would have had.
    Skipped {
        /// The system's name.
        system: String,
        /// Its durability class.
        durability: Durability,
        /// Why.
        reason: String,
    },
}

impl Slot {
    /// The system's name.
    pub fn system(&self) -> &str {
        match self {
            Slot::Ready(t) => t.system(),
            Slot::Skipped { system, .. } => system,
        }
    }

    /// The durability class.
    pub fn durability(&self) -> Durability {
        match self {
            Slot::Ready(t) => t.durability(),
            Slot::Skipped { durability, .. } => *durability,
        }
    }
}

/// The expected sum of `commentCount` and number of comments after `calls`
/// createComment calls, checked by every target's `verify`.
pub(crate) fn check_comments(calls: u64, count_sum: u64, comments: u64) -> Result<(), BenchError> {
    if count_sum == calls && comments == calls {
        Ok(())
    } else {
        Err(BenchError::Check(format!(
            "after {calls} createComment calls the posts' commentCount sums to {count_sum} and there are {comments} comments"
        )))
    }
}

/// Checks the feed after `calls` truncateFeed calls: [`FEED_SIZE`] posts,
/// the newest being `f-{calls + FEED_SIZE - 1}` (the starting feed is
/// `f-0` … `f-99`, each call adds the next sequence number).
pub(crate) fn check_feed(size: usize, newest: Option<&str>, calls: u64) -> Result<(), BenchError> {
    let expected = format!("f-{}", calls + FEED_SIZE as u64 - 1);
    if size == FEED_SIZE && newest == Some(expected.as_str()) {
        Ok(())
    } else {
        Err(BenchError::Check(format!(
            "after {calls} truncateFeed calls the feed holds {size} posts, newest {newest:?}, expected {FEED_SIZE} posts, newest {expected:?}"
        )))
    }
}

/// Checks that a feed read returned [`FEED_SIZE`] posts, newest first.
pub(crate) fn check_feed_read(posts: &[Value]) -> Result<usize, BenchError> {
    let dates: Vec<&str> = posts
        .iter()
        .map(|p| p["creationDate"].as_str().unwrap_or(""))
        .collect();
    if posts.len() == FEED_SIZE && dates.windows(2).all(|w| w[0] > w[1]) {
        Ok(posts.len())
    } else {
        Err(BenchError::Check(format!(
            "the feed read returned {} posts (expected {FEED_SIZE}, newest first)",
            posts.len()
        )))
    }
}

/// A timeout for waits on peers that start.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_catch_missing_work() {
        assert!(check_comments(10, 10, 10).is_ok());
        assert!(check_comments(10, 9, 10).is_err());
        assert!(check_comments(10, 10, 9).is_err());
        assert!(check_feed(100, Some("f-109"), 10).is_ok());
        assert!(check_feed(101, Some("f-109"), 10).is_err());
        assert!(check_feed(100, Some("f-108"), 10).is_err());
        let feed: Vec<Value> = (0..100).rev().map(feed_post).collect();
        assert_eq!(check_feed_read(&feed).unwrap(), 100);
        let reversed: Vec<Value> = (0..100).map(feed_post).collect();
        assert!(check_feed_read(&reversed).is_err());
        assert!(check_feed_read(&feed[1..]).is_err());
    }

    #[test]
    fn feed_dates_sort_by_sequence() {
        let a = feed_post(9);
        let b = feed_post(10);
        assert!(a["creationDate"].as_str() < b["creationDate"].as_str());
        assert_eq!(b["type"], "post");
    }
}
