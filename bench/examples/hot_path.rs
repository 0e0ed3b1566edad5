//! The native in-memory hot path: one caller's createComment on one post,
//! timed call by call, as the criterion bench's latency report did.
//!
//! A fresh in-memory database every 2,000 transactions (so the partition
//! stays small), 200,000 transactions in all by default; prints p50, p90 and
//! p99 of the per-call latency in microseconds.
//!
//! ```text
//! cargo run --release -p partita-bench --example hot_path [-- TRANSACTIONS]
//! ```
//!
//! The issue's target for p50 is 2.5 µs (#20).

use std::time::Instant;

use partita::Database;
use partita_bench::comment;
use partita_workload::blog;

/// The allocator of the `partita` binary and of the harness.
#[global_allocator]
static ALLOCATOR: partita::MiMalloc = partita::MiMalloc;

/// Transactions on one database before the next fresh one.
const PER_DATABASE: u64 = 2_000;

fn main() -> Result<(), partita::Error> {
    let total: u64 = match std::env::args().nth(1) {
        Some(n) => n.parse().expect("TRANSACTIONS is a number"),
        None => 200_000,
    };
    let post_id = "post-0";
    let mut nanos = Vec::with_capacity(total as usize);
    let mut n = 0;
    while n < total {
        let db = Database::in_memory();
        let posts = db.create_container("posts", "/postId")?;
        posts.create_item(post_id, blog::post(post_id, "u1", 0), None)?;
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
            "{total} transactions: p50 {:.2} µs, p90 {:.2} µs, p99 {:.2} µs",
            at(0.5),
            at(0.9),
            at(0.99)
        );
    }
    Ok(())
}
