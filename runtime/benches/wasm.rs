//! createComment through the WebAssembly sandbox, in memory, as two
//! guests: the hand-written `sprocs/samples/wat/createComment.wat` and the
//! Rust guest `sprocs/samples/rust/create-comment` (serde_json inside the
//! module). The warm path (a fresh pooled instance per call from the
//! cached module), the upload (compile) and first call after it, and the
//! first call after a restart that finds the precompiled artifact; and a
//! warm call of a small user-defined function.
//!
//! The Rust guest is read from
//! `sprocs/target/wasm32-unknown-unknown/release/create_comment.wasm`;
//! build it first with `cargo build --release --target
//! wasm32-unknown-unknown --manifest-path sprocs/Cargo.toml`.
//!
//! Besides criterion's estimate, prints p50/p99 of individually timed
//! calls, since the targets are on tail latency (`PARTITA_BENCH_ROUNDS`
//! rounds of 2,000, default 10), and the same for createComment's
//! collection calls made natively on the transaction: the engine's share,
//! the floor under both guests.

/// The `partita` binary's allocator, so the figures are what users run.
#[global_allocator]
static ALLOCATOR: partita_alloc::MiMalloc = partita_alloc::MiMalloc;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use engine::{Container, Database};
use host_api::ScriptKind;
use runtime::{Invocation, Limits, WasmCache, WasmScript, prepare_wasm, run_wasm, run_wasm_udf};
use serde_json::json;

const CREATE_COMMENT: &str = include_str!("../../sprocs/samples/wat/createComment.wat");

/// The Rust guest's module, relative to this crate.
const RUST_GUEST: &str = "../sprocs/target/wasm32-unknown-unknown/release/create_comment.wasm";

fn rust_guest() -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(RUST_GUEST);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the Rust guest {} ({e}); build it with `cargo build --release \
             --target wasm32-unknown-unknown --manifest-path sprocs/Cargo.toml`",
            path.display()
        )
    })
}

const UDF: &str = r#"(module
  (import "partita_v1" "params" (func $params (param i32 i32) (result i32)))
  (import "partita_v1" "set_response_body" (func $set (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "partita_udf") (result i32)
    (drop (call $set (i32.const 0) (call $params (i32.const 0) (i32.const 1000))))
    (i32.const 0)))"#;

fn setup() -> (Database, Container) {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId").expect("container");
    posts
        .create_item("p1", json!({"id": "p1", "postId": "p1", "type": "post", "title": "Hello", "commentCount": 0}), None)
        .expect("post");
    (db, posts)
}

fn create_comment(posts: &Container, script: &WasmScript<'_>, limits: &Limits) {
    let mut txn = posts.begin("p1").expect("begin");
    let params = vec![
        json!("p1"),
        json!({"type": "comment", "userId": "u1", "userUsername": "alice", "content": "Nice post!", "creationDate": "2024-01-01T00:00:00Z"}),
    ];
    run_wasm(script, Invocation::Procedure { params }, &mut txn, limits).expect("createComment");
    txn.commit().expect("commit");
}

/// createComment without a sandbox: the same collection calls the host
/// makes for a guest, on the same transaction, as native Rust. The floor
/// under both guests: what the engine itself costs.
fn create_comment_native(posts: &Container) {
    use host_api::{Collection, WriteOptions};
    let mut txn = posts.begin("p1").expect("begin");
    let mut post = txn.read("p1").expect("read").value().clone();
    let count = post["commentCount"].as_u64().unwrap_or(0);
    post["commentCount"] = json!(count + 1);
    txn.replace("p1", post, WriteOptions::default())
        .expect("replace");
    let comment = json!({"type": "comment", "userId": "u1", "userUsername": "alice", "content": "Nice post!", "creationDate": "2024-01-01T00:00:00Z", "postId": "p1", "id": comment_id()});
    txn.create(comment).expect("create");
    txn.commit().expect("commit");
}

/// A fresh comment id, as the host generates one (a random GUID).
fn comment_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "00000000-0000-4000-8000-{:012x}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
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

/// Prints p50/p99 of individually timed warm calls (a fresh partition every
/// 2,000 calls keeps the partition small, as the calibration did).
fn warm_percentiles(name: &str, s: &WasmScript<'_>, limits: &Limits) {
    timed_percentiles(name, |posts| create_comment(posts, s, limits));
}

/// Prints p50/p99 of `f` timed call by call, as [`warm_percentiles`].
fn timed_percentiles(name: &str, f: impl Fn(&Container)) {
    let rounds: usize = std::env::var("PARTITA_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    let mut samples = Vec::new();
    for _ in 0..rounds {
        let (_db, posts) = setup();
        f(&posts);
        for _ in 0..2_000 {
            let t = Instant::now();
            f(&posts);
            samples.push(t.elapsed());
        }
    }
    let (p50, p99) = percentiles(samples);
    eprintln!("{name} warm: p50 {p50:?}, p99 {p99:?}");
}

fn script<'a>(
    module: &'a [u8],
    cache: &'a WasmCache,
    dir: Option<&'a std::path::Path>,
) -> WasmScript<'a> {
    WasmScript {
        id: "createComment",
        module,
        shared: None,
        cache,
        artifact_dir: dir,
    }
}

/// A stored module as the facade runs it: the engine keeps a script's body
/// in an `Arc`, and passes it along.
fn stored<'a>(module: &'a Arc<[u8]>, cache: &'a WasmCache) -> WasmScript<'a> {
    WasmScript {
        shared: Some(module),
        ..script(module, cache, None)
    }
}

fn bench(c: &mut Criterion) {
    let limits = Limits::default();
    let cache = WasmCache::global();
    let module = prepare_wasm(
        &script(CREATE_COMMENT.as_bytes(), cache, None),
        ScriptKind::StoredProcedure,
    )
    .expect("createComment.wat");
    let module: Arc<[u8]> = module.into();

    let rust = prepare_wasm(
        &script(&rust_guest(), cache, None),
        ScriptKind::StoredProcedure,
    )
    .expect("create_comment.wasm");
    let rust: Arc<[u8]> = rust.into();
    for (name, module) in [
        ("createComment.wat", &module),
        ("createComment (Rust)", &rust),
    ] {
        warm_percentiles(name, &stored(module, cache), &limits);
    }
    timed_percentiles("createComment native (no sandbox)", create_comment_native);

    // Upload (WAT → wasm, compile, check) and the first call after it; each
    // round is a new module (a different comment line) in a new cache.
    let (mut uploads, mut firsts) = (Vec::new(), Vec::new());
    for round in 0..10 {
        let (_db, posts) = setup();
        let text = format!("{CREATE_COMMENT}\n;; round {round}\n");
        let fresh = WasmCache::new();
        let t = Instant::now();
        let wasm = prepare_wasm(
            &script(text.as_bytes(), &fresh, None),
            ScriptKind::StoredProcedure,
        )
        .expect("upload");
        uploads.push(t.elapsed());
        let t = Instant::now();
        create_comment(&posts, &script(&wasm, &fresh, None), &limits);
        firsts.push(t.elapsed());
    }
    eprintln!(
        "createComment.wat upload (compile): median {:?}; first call after upload: median {:?}, max {:?}",
        percentiles(uploads).0,
        percentiles(firsts.clone()).0,
        firsts.iter().max().copied().unwrap_or_default()
    );

    // A restart: a new cache over a data directory holding the artifact.
    let dir = tempfile::tempdir().expect("tempdir");
    let wasm = prepare_wasm(
        &script(&module, &WasmCache::new(), Some(dir.path())),
        ScriptKind::StoredProcedure,
    )
    .expect("upload");
    let mut restarts = Vec::new();
    for _ in 0..20 {
        let (_db, posts) = setup();
        let restarted = WasmCache::new();
        let t = Instant::now();
        create_comment(
            &posts,
            &script(&wasm, &restarted, Some(dir.path())),
            &limits,
        );
        restarts.push(t.elapsed());
        assert_eq!(restarted.stats().compiled, 0, "loaded, not compiled");
    }
    eprintln!(
        "createComment.wat first call after restart (artifact): median {:?}, max {:?}",
        percentiles(restarts.clone()).0,
        restarts.iter().max().copied().unwrap_or_default()
    );

    let (_db, posts) = setup();
    let s = stored(&module, cache);
    c.bench_function("createComment.wat (warm)", |b| {
        b.iter(|| create_comment(&posts, black_box(&s), &limits))
    });
    let (_db, posts) = setup();
    let s = stored(&rust, cache);
    c.bench_function("createComment Rust guest (warm)", |b| {
        b.iter(|| create_comment(&posts, black_box(&s), &limits))
    });

    // A user-defined function, called once per document of a query.
    let udf = prepare_wasm(
        &script(UDF.as_bytes(), cache, None),
        ScriptKind::UserDefinedFunction,
    )
    .expect("udf");
    let udf: Arc<[u8]> = udf.into();
    let u = stored(&udf, cache);
    let args = [Some(json!(1234.5))];
    let mut samples = Vec::new();
    for _ in 0..20_000 {
        let t = Instant::now();
        run_wasm_udf(&u, &args, &limits).expect("udf");
        samples.push(t.elapsed());
    }
    let (p50, p99) = percentiles(samples);
    eprintln!("wasm udf warm: p50 {p50:?}, p99 {p99:?}");
    c.bench_function("wasm udf (warm)", |b| {
        b.iter(|| run_wasm_udf(black_box(&u), black_box(&args), &limits).expect("udf"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
