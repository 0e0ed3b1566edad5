//! Criterion benches of the native createComment transaction (read the
//! post, increment `commentCount`, replace it, create the comment).
//!
//! * `create_comment/in_memory` and `create_comment/durable`: one caller.
//!   In memory, a fresh database every 2,000 transactions, so a post has at
//!   most 2,000 comments (the JavaScript and WebAssembly benches do the same).
//! * `durable_throughput/{1,4,16}`: callers on distinct logical partitions,
//!   `Durability::Full`; criterion reports transactions per second.
//!
//! After the criterion groups, a latency report times every transaction
//! individually and prints true p50/p99 (criterion's figures are means per
//! sample). `PARTITA_BENCH_QUICK=1` shortens everything for a smoke run.

/// The allocator the `partita` binary ships with (see src/main.rs); build
/// with `--features system-alloc` to measure the system allocator instead.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static ALLOCATOR: partita::MiMalloc = partita::MiMalloc;

use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use partita::{Container, Database, Durability, Options};
use partita_workload::blog;
use serde_json::json;

fn quick() -> bool {
    std::env::var_os("PARTITA_BENCH_QUICK").is_some()
}

/// A fresh database with one post per partition `post-0` … `post-{n-1}`.
fn setup(durable: bool, n_posts: usize) -> (Database, Container, Option<tempfile::TempDir>) {
    let (db, dir) = if durable {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = Options {
            durability: Durability::Full,
            ..Options::default()
        };
        (
            Database::open_with(dir.path(), options).expect("open"),
            Some(dir),
        )
    } else {
        (Database::in_memory(), None)
    };
    let posts = db.create_container("posts", "/postId").expect("container");
    for p in 0..n_posts {
        let id = format!("post-{p}");
        posts
            .create_item(id.as_str(), blog::post(&id, "u1", p as u64), None)
            .expect("post");
    }
    (db, posts, dir)
}

fn comment(i: u64) -> serde_json::Value {
    json!({"id": format!("c{i}"), "userId": "u1", "userUsername": "user-u1", "content": "Nice post!"})
}

/// `iters` createComment calls spread over `callers` threads, each on its own post.
fn run(posts: &Container, callers: usize, iters: u64) -> Duration {
    let per_caller = iters.div_ceil(callers as u64);
    let barrier = Barrier::new(callers + 1);
    std::thread::scope(|s| {
        for t in 0..callers {
            let barrier = &barrier;
            s.spawn(move || {
                let post_id = format!("post-{t}");
                let comments: Vec<_> = (0..per_caller).map(comment).collect();
                barrier.wait();
                for c in comments {
                    blog::create_comment(posts, &post_id, c).expect("createComment");
                }
                barrier.wait();
            });
        }
        barrier.wait();
        let start = Instant::now();
        barrier.wait();
        start.elapsed()
    })
}

fn create_comment(c: &mut Criterion) {
    let mut group = c.benchmark_group("create_comment");
    if quick() {
        group
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(1))
            .sample_size(10);
    }
    group.bench_function("in_memory", |b| {
        // Rounds of at most `ROUND` transactions into a fresh database, timed
        // without the set-up, as the latency report does.
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(ROUND as u64);
                left -= n;
                let (_db, posts, _dir) = setup(false, 1);
                let comments: Vec<_> = (0..n).map(comment).collect();
                let start = Instant::now();
                for c in comments {
                    blog::create_comment(&posts, "post-0", c).expect("createComment");
                }
                elapsed += start.elapsed();
            }
            elapsed
        })
    });
    group.sample_size(10);
    group.bench_function("durable", |b| {
        b.iter_custom(|iters| {
            let (_db, posts, _dir) = setup(true, 1);
            run(&posts, 1, iters)
        })
    });
    group.finish();

    let mut group = c.benchmark_group("durable_throughput");
    group.sample_size(10).throughput(Throughput::Elements(1));
    if quick() {
        group
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(1));
    }
    for callers in [1, 4, 16] {
        group.bench_with_input(
            BenchmarkId::from_parameter(callers),
            &callers,
            |b, &callers| {
                b.iter_custom(|iters| {
                    let (_db, posts, _dir) = setup(true, callers);
                    run(&posts, callers, iters)
                })
            },
        );
    }
    group.finish();
}

/// Transactions into one post per round of the in-memory latency report.
const ROUND: usize = 2_000;

/// Times every transaction individually: true percentiles, and throughput
/// over a fixed number of transactions.
fn latency_report() {
    // In memory: a fresh database every 2,000 transactions, so a post has
    // at most 2,000 comments (the JavaScript and WebAssembly benches do the
    // same), rather than one post collecting all 200,000.
    let rounds = if quick() { 10 } else { 100 };
    let mut latencies = Vec::with_capacity(rounds * ROUND);
    for _ in 0..rounds {
        let (_db, posts, _dir) = setup(false, 1);
        let comments: Vec<_> = (0..ROUND as u64).map(comment).collect();
        for c in comments {
            let start = Instant::now();
            blog::create_comment(&posts, "post-0", c).expect("createComment");
            latencies.push(start.elapsed());
        }
    }
    print_percentiles("in memory, 1 caller", &mut latencies);

    let n_durable = if quick() { 500 } else { 5_000 };
    let (_db, posts, _dir) = setup(true, 1);
    let mut latencies = Vec::new();
    for i in 0..n_durable {
        let c = comment(i);
        let start = Instant::now();
        blog::create_comment(&posts, "post-0", c).expect("createComment");
        latencies.push(start.elapsed());
    }
    print_percentiles("durable (Full), 1 caller", &mut latencies);

    for callers in [1, 4, 16] {
        let n = if quick() { 2_000 } else { 40_000 };
        let (_db, posts, _dir) = setup(true, callers);
        let elapsed = run(&posts, callers, n);
        println!(
            "report: durable (Full) throughput, {callers:>2} callers on distinct partitions: {:>8.0} transactions/s",
            n as f64 / elapsed.as_secs_f64()
        );
    }
}

fn print_percentiles(what: &str, latencies: &mut [Duration]) {
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    println!(
        "report: createComment {what}: p50 {:.2} µs, p99 {:.2} µs over {} transactions",
        at(0.5),
        at(0.99),
        latencies.len()
    );
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    create_comment(&mut criterion);
    criterion.final_summary();
    // `--profile-time` (for profilers) and `--list` runs skip the report.
    if !std::env::args().any(|a| a == "--profile-time" || a == "--list") {
        latency_report();
    }
}
