//! createComment through the JavaScript sandbox, in memory: the warm path
//! (pooled context, cached script) and the first call of a new procedure;
//! and a warm call of a one-line user-defined function.
//!
//! Besides criterion's estimate, prints p50/p99 of individually timed
//! calls, since the targets are on tail latency.

/// The `partita` binary's allocator, so the figures are what users run.
#[global_allocator]
static ALLOCATOR: partita_alloc::MiMalloc = partita_alloc::MiMalloc;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use engine::{Container, Database};
use runtime::{Invocation, Limits, Script, run_js, run_udf};
use serde_json::json;

const CREATE_COMMENT: &str = include_str!("../../sprocs/samples/js/createComment.js");

fn setup() -> (Database, Container) {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId").expect("container");
    posts
        .create_item("p1", json!({"id": "p1", "postId": "p1", "type": "post", "title": "Hello", "commentCount": 0}), None)
        .expect("post");
    (db, posts)
}

fn create_comment(posts: &Container, script: &Script<'_>, limits: &Limits) {
    let mut txn = posts.begin("p1").expect("begin");
    let params = vec![
        json!("p1"),
        json!({"type": "comment", "userId": "u1", "userUsername": "alice", "content": "Nice post!", "creationDate": "2024-01-01T00:00:00Z"}),
    ];
    run_js(script, Invocation::Procedure { params }, &mut txn, limits).expect("createComment");
    txn.commit().expect("commit");
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
    let limits = Limits::default();
    let script = Script {
        id: "createComment",
        version: 1,
        body: CREATE_COMMENT,
    };

    // Individually timed calls (a fresh partition every 2,000 calls keeps
    // the partition small, as the calibration did).
    let mut samples = Vec::new();
    let mut first_calls = Vec::new();
    for round in 0..10 {
        let (_db, posts) = setup();
        // The first call of a new procedure version on a warm thread.
        let fresh = Script {
            id: "createComment",
            version: 1000 + round,
            body: CREATE_COMMENT,
        };
        let t = Instant::now();
        create_comment(&posts, &fresh, &limits);
        first_calls.push(t.elapsed());
        for _ in 0..2_000 {
            let t = Instant::now();
            create_comment(&posts, &fresh, &limits);
            samples.push(t.elapsed());
        }
    }
    let (p50, p99) = percentiles(samples);
    let (first50, first_max) = (
        percentiles(first_calls.clone()).0,
        first_calls.iter().max().copied().unwrap_or_default(),
    );
    eprintln!(
        "createComment warm: p50 {p50:?}, p99 {p99:?}; first call of a new version: median {first50:?}, max {first_max:?}"
    );

    let (_db, posts) = setup();
    c.bench_function("createComment (warm)", |b| {
        b.iter(|| create_comment(&posts, black_box(&script), &limits))
    });
    let mut version = 10_000;
    c.bench_function("createComment (new version: compile + call)", |b| {
        b.iter(|| {
            version += 1;
            let fresh = Script {
                id: "createComment",
                version,
                body: CREATE_COMMENT,
            };
            create_comment(&posts, black_box(&fresh), &limits);
        });
    });

    // A user-defined function, called once per document of a query.
    let tax = Script {
        id: "tax",
        version: 1,
        body: "function tax(x){ return x * 0.08; }",
    };
    let args = [Some(json!(1234.5))];
    let mut samples = Vec::new();
    for _ in 0..20_000 {
        let t = Instant::now();
        run_udf(&tax, &args, &limits).expect("tax");
        samples.push(t.elapsed());
    }
    let (p50, p99) = percentiles(samples);
    eprintln!("udf tax warm: p50 {p50:?}, p99 {p99:?}");
    c.bench_function("udf tax (warm)", |b| {
        b.iter(|| run_udf(black_box(&tax), black_box(&args), &limits).expect("tax"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
