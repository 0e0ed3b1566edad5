//! The native in-memory hot path: one caller's createComment on one post,
//! timed call by call, as the criterion bench's latency report did.
//!
//! A fresh in-memory database every 2,000 transactions (so the partition
//! stays small), 200,000 transactions in all by default; prints p50, p90 and
//! p99 of the per-call latency in microseconds. With `--indexed`, a query
//! across partitions runs on each database first, which builds the
//! in-memory store's range index, so every commit then maintains it.
//!
//! ```text
//! cargo run --release -p partita-bench --example hot_path [-- [TRANSACTIONS] [--indexed]]
//! ```
//!
//! The issue's target for p50 is 2.5 µs (#20).

use std::time::Instant;

use partita::{Database, QueryOptions};
use partita_bench::comment;
use partita_workload::blog;

/// The allocator of the `partita` binary and of the harness.
#[global_allocator]
static ALLOCATOR: partita::MiMalloc = partita::MiMalloc;

/// Transactions on one database before the next fresh one.
const PER_DATABASE: u64 = 2_000;

fn main() -> Result<(), partita::Error> {
    let mut total = 200_000;
    let mut indexed = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--indexed" => indexed = true,
            n => total = n.parse().expect("TRANSACTIONS is a number"),
        }
    }
    let post_id = "post-0";
    let mut nanos = Vec::with_capacity(total as usize);
    let mut n = 0;
    while n < total {
        let db = Database::in_memory();
        let posts = db.create_container("posts", "/postId")?;
        posts.create_item(post_id, blog::post(post_id, "u1", 0), None)?;
        if indexed {
            let sql = "SELECT * FROM c WHERE c.type = 'post'";
            posts.query_items(sql, &Default::default(), &QueryOptions::default())?;
        }
        for _ in 0..PER_DATABASE.min(total - n) {
            n += 1;
            let comment = comment(post_id, 0, n);
            let start = Instant::now();
            blog::create_comment(&posts, post_id, comment)?;
            nanos.push(start.elapsed().as_nanos() as u64);
        }
    }
    nanos.sort_unstable();
    let at = |q: f64| nanos[((nanos.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    #[allow(clippy::print_stdout)]
    {
        println!(
            "{total} transactions{}: p50 {:.2} µs, p90 {:.2} µs, p99 {:.2} µs",
            if indexed { ", indexed" } else { "" },
            at(0.5),
            at(0.9),
            at(0.99)
        );
    }
    Ok(())
}
