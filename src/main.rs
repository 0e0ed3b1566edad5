//! The `partita` command line.
//!
//! `partita demo` runs the blog workload's createComment transaction from
//! several threads against an embedded database (in memory by default, or a
//! durable data directory with `--data`), checks the workload's invariant on
//! every post, and prints a JSON report.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::{Parser, Subcommand};
use partita::{Database, Lsn, blog};
use serde_json::json;

#[derive(Parser)]
#[command(
    name = "partita",
    version,
    about = "Partitioned, transactional JSON documents with stored procedures"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the blog workload (createComment) and print a JSON report.
    Demo {
        /// Durable data directory; in memory when absent.
        #[arg(long)]
        data: Option<PathBuf>,
        /// Number of posts, each its own logical partition.
        #[arg(long, default_value_t = 100)]
        posts: u64,
        /// Number of comments to create, spread over the posts.
        #[arg(long, default_value_t = 20_000)]
        comments: u64,
        /// Concurrent callers.
        #[arg(long, default_value_t = 4)]
        threads: u64,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Demo {
            data,
            posts,
            comments,
            threads,
        } => demo(data, posts, comments, threads),
    }
}

fn demo(data: Option<PathBuf>, n_posts: u64, n_comments: u64, threads: u64) -> anyhow::Result<()> {
    ensure!(
        n_posts > 0 && threads > 0,
        "--posts and --threads must be at least 1"
    );
    let db = match &data {
        Some(dir) => Database::open(dir).with_context(|| format!("open {}", dir.display()))?,
        None => Database::in_memory(),
    };
    let posts = db.create_container_if_not_exists("posts", "/postId")?;
    let run = posts
        .read_changes(Lsn::ZERO, usize::MAX)?
        .last()
        .map_or(0, |c| c.lsn.0);
    for p in 0..n_posts {
        let id = format!("post-{p}");
        if posts.read_item(id.as_str(), &id).is_err() {
            posts.create_item(
                id.as_str(),
                blog::post(&id, &format!("u{}", p % 10), p),
                None,
            )?;
        }
    }

    let started = Instant::now();
    let mut latencies: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let posts = posts.clone();
                s.spawn(move || -> anyhow::Result<Vec<Duration>> {
                    let mut latencies = Vec::new();
                    for i in (t..n_comments).step_by(threads as usize) {
                        let post_id = format!("post-{}", i % n_posts);
                        let comment = json!({"id": format!("c{run}-{i}"), "userId": "u1", "content": "Nice post!"});
                        let begin = Instant::now();
                        blog::create_comment(&posts, &post_id, comment)?;
                        latencies.push(begin.elapsed());
                    }
                    Ok(latencies)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker panicked")).collect::<anyhow::Result<Vec<_>>>()
    })?
    .into_iter()
    .flatten()
    .collect();
    let elapsed = started.elapsed();
    latencies.sort();

    let mut checked = 0;
    for p in 0..n_posts {
        let id = format!("post-{p}");
        let (count, comments) = blog::comment_counts(&posts, &id)?;
        ensure!(
            count == comments,
            "invariant violated on {id}: commentCount {count}, {comments} comments"
        );
        checked += 1;
    }
    let percentile = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q) as usize)
            .map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    let report = json!({
        "workload": "createComment (native Rust transaction)",
        "storage": data.as_ref().map_or("in memory".to_owned(), |d| format!("durable, {}", d.display())),
        "posts": n_posts,
        "comments_created": latencies.len(),
        "threads": threads,
        "seconds": elapsed.as_secs_f64(),
        "transactions_per_second": latencies.len() as f64 / elapsed.as_secs_f64(),
        "latency_us": {"p50": percentile(0.5), "p99": percentile(0.99)},
        "invariant": format!("commentCount equals the number of comments on all {checked} posts"),
        "change_log_entries": posts.read_changes(Lsn::ZERO, usize::MAX)?.len(),
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
