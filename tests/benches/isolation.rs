//! The cost of process isolation (`Limits::workers`): createComment.js and
//! a one-line UDF, in memory, run in process and in a worker process
//! (`bin/script_worker.rs`), interleaved round by round so both see the
//! same machine; and the first call of a fresh pool (spawning the worker
//! and building its first sandbox).
//!
//! Prints p50/p99 of individually timed calls (`PARTITA_BENCH_ROUNDS`
//! rounds of 2,000, default 5) besides criterion's estimates.

/// The `partita` binary's allocator, so the figures are what users run.
#[global_allocator]
static ALLOCATOR: partita_alloc::MiMalloc = partita_alloc::MiMalloc;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use engine::{Container, Database};
use runtime::{Invocation, Limits, Script, WorkerOptions, WorkerPool, run_js, run_udf};
use serde_json::json;

const CREATE_COMMENT: &str = partita_workload::js::CREATE_COMMENT;

const SCRIPT: Script<'static> = Script {
    id: "createComment",
    version: 1,
    body: CREATE_COMMENT,
};

const TAX: Script<'static> = Script {
    id: "tax",
    version: 1,
    body: "function tax(x){ return x * 0.08; }",
};

fn setup() -> (Database, Container) {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId").expect("container");
    posts
        .create_item("p1", json!({"id": "p1", "postId": "p1", "type": "post", "title": "Hello", "commentCount": 0}), None)
        .expect("post");
    (db, posts)
}

fn create_comment(posts: &Container, limits: &Limits) {
    let mut txn = posts.begin("p1").expect("begin");
    let params = vec![
        json!("p1"),
        json!({"type": "comment", "userId": "u1", "userUsername": "alice", "content": "Nice post!", "creationDate": "2024-01-01T00:00:00Z"}),
    ];
    run_js(&SCRIPT, Invocation::Procedure { params }, &mut txn, limits).expect("createComment");
    txn.commit().expect("commit");
}

fn pool() -> WorkerPool {
    WorkerPool::new(WorkerOptions::new(
        env!("CARGO_BIN_EXE_script-worker"),
        Vec::<String>::new(),
    ))
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let p = |q: f64| {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let i = ((samples.len() as f64 - 1.0) * q) as usize;
        samples[i]
    };
    (p(0.50), p(0.99))
}

fn bench(c: &mut Criterion) {
    let in_process = Limits::default();
    let isolated = Limits {
        workers: Some(pool()),
        ..Limits::default()
    };
    let rounds: usize = std::env::var("PARTITA_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);

    let mut samples = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (limits, samples) in [&in_process, &isolated].into_iter().zip(&mut samples) {
            let (_db, posts) = setup();
            create_comment(&posts, limits);
            for _ in 0..2_000 {
                let t = Instant::now();
                create_comment(&posts, limits);
                samples.push(t.elapsed());
            }
        }
    }
    let [local, worker] = samples.map(percentiles);
    eprintln!(
        "createComment in process: p50 {:?}, p99 {:?}; in a worker: p50 {:?}, p99 {:?}",
        local.0, local.1, worker.0, worker.1
    );

    let args = [Some(json!(1234.5))];
    let mut samples = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (limits, samples) in [&in_process, &isolated].into_iter().zip(&mut samples) {
            for _ in 0..2_000 {
                let t = Instant::now();
                run_udf(&TAX, &args, limits).expect("tax");
                samples.push(t.elapsed());
            }
        }
    }
    let [local, worker] = samples.map(percentiles);
    eprintln!(
        "udf tax in process: p50 {:?}, p99 {:?}; in a worker: p50 {:?}, p99 {:?}",
        local.0, local.1, worker.0, worker.1
    );

    let (_db, posts) = setup();
    let mut first = Vec::new();
    for _ in 0..10 {
        let fresh = Limits {
            workers: Some(pool()),
            ..Limits::default()
        };
        let t = Instant::now();
        create_comment(&posts, &fresh);
        first.push(t.elapsed());
    }
    first.sort();
    eprintln!(
        "first call of a fresh pool (spawn + first sandbox): median {:?}, max {:?}",
        first[first.len() / 2],
        first[first.len() - 1]
    );

    c.bench_function("createComment in process", |b| {
        b.iter(|| create_comment(&posts, black_box(&in_process)))
    });
    c.bench_function("createComment in a worker", |b| {
        b.iter(|| create_comment(&posts, black_box(&isolated)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
