//! Criterion: the per-call latency of one caller's createComment (16
//! partitions) and Q6 feed read on every target, relaxed and durable, with
//! the same `Target` implementations as the harness.
//!
//! Throughput under concurrency is the harness's job (`partita-bench`), not
//! criterion's: criterion times one thread. Peers already installed are
//! started for the run and stopped after; a missing peer is skipped with its
//! reason (this bench never installs anything).

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use partita_bench::partita::Flavor;
use partita_bench::{Call, Durability, PeerOptions, Slot, Workload, comment, post_id};

/// The allocator of the `partita` binary and of the harness.
#[global_allocator]
static ALLOCATOR: partita::MiMalloc = partita::MiMalloc;

const PARTITIONS: usize = 16;

fn slots() -> Vec<Slot> {
    let peers = PeerOptions { install: false };
    let mut slots = Vec::new();
    for flavor in Flavor::ALL {
        for durability in [Durability::Memory, Durability::Relaxed, Durability::Durable] {
            slots.push(partita_bench::partita::slot(flavor, durability));
        }
    }
    for durability in [Durability::Relaxed, Durability::Durable] {
        slots.push(Slot::Ready(Box::new(
            partita_bench::sqlite::SqliteTarget::new(durability),
        )));
    }
    slots.extend(partita_bench::redis::slots(peers));
    slots.extend(partita_bench::postgres::slots(peers, true, &[1]));
    slots
}

fn per_call(c: &mut Criterion, slots: &mut [Slot]) {
    for workload in [Workload::CreateComment, Workload::FeedRead] {
        let mut group = c.benchmark_group(match workload {
            Workload::CreateComment => "createComment_16_partitions",
            _ => "q6_feed_read",
        });
        group
            .sample_size(20)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        for slot in slots.iter_mut() {
            let name = format!("{} {}", slot.system(), slot.durability());
            let target = match slot {
                Slot::Ready(target) => target,
                Slot::Skipped { reason, .. } => {
                    eprintln!("{name}: skipped: {reason}");
                    continue;
                }
            };
            target
                .prepare(workload, PARTITIONS)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut caller = target.connect().unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut n = 0u64;
            group.bench_function(BenchmarkId::from_parameter(&name), |b| {
                b.iter_custom(|iters| {
                    let calls: Vec<Call> = (0..iters)
                        .map(|_| {
                            n += 1;
                            match workload {
                                Workload::CreateComment => {
                                    let post = post_id((n % PARTITIONS as u64) as usize);
                                    let comment = comment(&post, 0, n);
                                    Call::CreateComment {
                                        post_id: post,
                                        comment,
                                    }
                                }
                                _ => Call::FeedRead,
                            }
                        })
                        .collect();
                    let start = Instant::now();
                    for call in calls {
                        caller.call(call).unwrap_or_else(|e| panic!("{e}"));
                    }
                    start.elapsed()
                })
            });
        }
        group.finish();
    }
}

fn main() {
    partita_bench::install_interrupt_handler().expect("Ctrl-C handler");
    let mut criterion = Criterion::default().configure_from_args();
    let mut slots = slots();
    per_call(&mut criterion, &mut slots);
    criterion.final_summary();
}
