//! `partita demo`: the blog workload's createComment from several threads,
//! first as a native Rust transaction, then as the unmodified JavaScript
//! stored procedure of `sprocs/js/createComment.js`, with the workload's
//! invariant (every post's `commentCount` equals its number of comments)
//! checked on every post afterwards.
//!
//! This is the main job on the embedded default (in memory, or a durable
//! data directory with `--data`). It grows into the full V1/V2/V3 blog demo
//! as the change-feed processor and the Wasm runtime land.

use std::time::{Duration, Instant};

use anyhow::ensure;
use clap::Args;
use partita::{Container, Database, Lsn, ScriptKind, ScriptProperties, Scripts, blog};
use serde_json::{Value, json};

/// Options of `partita demo`.
#[derive(Args)]
pub(crate) struct DemoArgs {
    /// Number of posts, each its own logical partition.
    #[arg(long, default_value_t = 100)]
    posts: u64,
    /// Number of comments to create, spread over the posts.
    #[arg(long, default_value_t = 20_000)]
    comments: u64,
    /// Concurrent callers.
    #[arg(long, default_value_t = 4)]
    threads: u64,
}

/// Runs the demo on `db` and returns its report.
pub(crate) fn run(db: &Database, args: &DemoArgs) -> anyhow::Result<Value> {
    let DemoArgs {
        posts: n_posts,
        comments: n_comments,
        threads,
    } = *args;
    ensure!(
        n_posts > 0 && threads > 0,
        "--posts and --threads must be at least 1"
    );
    let posts = db.create_container_if_not_exists("posts", "/postId")?;
    // Comment ids are unique per run, so the demo can run again on a data directory.
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

    if posts
        .read_script(ScriptKind::StoredProcedure, "createComment")
        .is_err()
    {
        posts.create_script(ScriptProperties::stored_procedure(
            "createComment",
            CREATE_COMMENT_JS,
        ))?;
    }
    let native = run_workload(
        &posts,
        n_posts,
        n_comments,
        threads,
        |posts, post_id, comment| {
            blog::create_comment(posts, post_id, comment)?;
            Ok(())
        },
        &format!("n{run}"),
    )?;
    let javascript = run_workload(
        &posts,
        n_posts,
        n_comments,
        threads,
        |posts, post_id, comment| {
            posts.execute_stored_procedure(
                "createComment",
                post_id,
                vec![json!(post_id), comment],
            )?;
            Ok(())
        },
        &format!("j{run}"),
    )?;

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
    let top = posts.query_items(
        "SELECT TOP 3 VALUE {\"id\": p.id, \"commentCount\": p.commentCount} FROM p WHERE p.type = 'post' ORDER BY p.commentCount DESC",
        &Default::default(),
        &Default::default(),
    )?;
    Ok(json!({
        "workload": "createComment",
        "posts": n_posts,
        "threads": threads,
        "native_rust_transaction": native,
        "javascript_procedure": javascript,
        "invariant": format!("commentCount equals the number of comments on all {checked} posts"),
        "most_commented": top.items,
        "change_log_entries": posts.read_changes(Lsn::ZERO, usize::MAX)?.len(),
    }))
}

/// The workload's script, shipped inside the binary so the demo needs no files.
const CREATE_COMMENT_JS: &str = include_str!("../sprocs/js/createComment.js");

/// Creates `n_comments` comments spread over the posts from `threads`
/// threads with `call(posts, post_id, comment)`, and reports throughput
/// and latency percentiles.
fn run_workload(
    posts: &Container,
    n_posts: u64,
    n_comments: u64,
    threads: u64,
    call: impl Fn(&Container, &str, Value) -> anyhow::Result<()> + Sync,
    prefix: &str,
) -> anyhow::Result<Value> {
    let started = Instant::now();
    let mut latencies: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let call = &call;
                s.spawn(move || -> anyhow::Result<Vec<Duration>> {
                    let mut latencies = Vec::new();
                    for i in (t..n_comments).step_by(threads as usize) {
                        let post_id = format!("post-{}", i % n_posts);
                        let comment = json!({
                            "id": format!("c{prefix}-{i}"),
                            "type": "comment",
                            "userId": "u1",
                            "content": "Nice post!",
                        });
                        let begin = Instant::now();
                        call(posts, &post_id, comment)?;
                        latencies.push(begin.elapsed());
                    }
                    Ok(latencies)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .collect::<anyhow::Result<Vec<_>>>()
    })?
    .into_iter()
    .flatten()
    .collect();
    let elapsed = started.elapsed();
    latencies.sort();
    let percentile = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q) as usize)
            .map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    Ok(json!({
        "comments_created": latencies.len(),
        "seconds": elapsed.as_secs_f64(),
        "transactions_per_second": latencies.len() as f64 / elapsed.as_secs_f64(),
        "latency_us": {"p50": percentile(0.5), "p99": percentile(0.99)},
    }))
}
