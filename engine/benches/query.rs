//! Query engine benchmarks: top-k ORDER BY, COUNT and a parameterised filter
//! over one 100-document logical partition held in memory.

/// The `partita` binary's allocator, so the figures are what users run.
#[global_allocator]
static ALLOCATOR: partita_alloc::MiMalloc = partita_alloc::MiMalloc;

use std::hint::black_box;
use std::ops::ControlFlow;

use criterion::{Criterion, criterion_group, criterion_main};
use engine::query::{Params, QueryOptions, Source, execute, parse};
use host_api::PartitionKey;
use serde_json::{Value, json};

/// One in-memory logical partition: `(rid, document, size)` in RID order.
struct Partition {
    key: PartitionKey,
    docs: Vec<(u64, Value, usize)>,
}

impl Source for Partition {
    fn partitions(&self) -> Vec<PartitionKey> {
        vec![self.key.clone()]
    }

    fn scan(
        &self,
        key: &PartitionKey,
        after: Option<u64>,
        f: &mut dyn FnMut(u64, &Value, usize) -> ControlFlow<()>,
    ) {
        if *key != self.key {
            return;
        }
        let start = after.map_or(0, |a| self.docs.partition_point(|d| d.0 <= a));
        for (rid, doc, size) in &self.docs[start..] {
            if f(*rid, doc, *size).is_break() {
                return;
            }
        }
    }
}

/// 100 feed documents of about 250 bytes, creation dates in shuffled order.
fn feed() -> Partition {
    let docs = (0..100u64)
        .map(|i| {
            let doc = json!({
                "id": format!("post-{i:04}"),
                "userId": format!("user-{}", i % 10),
                "creationDate": format!("2024-{:02}-{:02}T{:02}:{:02}:00.000Z", 1 + (i * 7) % 12, 1 + (i * 13) % 28, (i * 5) % 24, (i * 17) % 60),
                "title": "A reasonably sized post title for the benchmark",
                "body": "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.",
                "likes": i * 3 % 17,
                "type": "post",
            });
            let size = doc.to_string().len();
            (i, doc, size)
        })
        .collect();
    Partition {
        key: PartitionKey::from("feed"),
        docs,
    }
}

fn benches(c: &mut Criterion) {
    let source = feed();
    let none = Params::new();
    let options = QueryOptions::default();

    let top = parse("SELECT TOP 5 * FROM f ORDER BY f.creationDate").expect("parse");
    c.bench_function("top5_order_by_creation_date_100_docs", |b| {
        b.iter(|| execute(black_box(&top), &none, &source, &options).expect("run"))
    });

    let count = parse("SELECT VALUE COUNT(1) FROM f").expect("parse");
    c.bench_function("count_100_docs", |b| {
        b.iter(|| execute(black_box(&count), &none, &source, &options).expect("run"))
    });

    let filter = parse("SELECT * FROM p WHERE p.userId = @userId").expect("parse");
    let mut params = Params::new();
    params.insert("@userId".into(), json!("user-3"));
    c.bench_function("filter_user_id_100_docs", |b| {
        b.iter(|| execute(black_box(&filter), &params, &source, &options).expect("run"))
    });

    // The feed query (Q6) with and without a filter that every document
    // passes: the filter must not change the plan.
    let q6 = parse("SELECT TOP 100 * FROM f ORDER BY f.creationDate DESC").expect("parse");
    c.bench_function("top100_desc_100_docs", |b| {
        b.iter(|| execute(black_box(&q6), &none, &source, &options).expect("run"))
    });
    let q6_filtered =
        parse("SELECT TOP 100 * FROM f WHERE f.type = 'post' ORDER BY f.creationDate DESC")
            .expect("parse");
    c.bench_function("top100_desc_filtered_100_docs", |b| {
        b.iter(|| execute(black_box(&q6_filtered), &none, &source, &options).expect("run"))
    });

    c.bench_function("parse_top5_query", |b| {
        b.iter(|| parse(black_box("SELECT TOP 5 * FROM f ORDER BY f.creationDate")).expect("parse"))
    });
}

criterion_group!(query, benches);
criterion_main!(query);
