//! Running rows: fresh data, callers on threads, warm-up, timed calls, check.
//!
//! Every caller times each of its own calls (the latency a client sees,
//! including its round trip), so p50 and p99 are true percentiles over all
//! calls of the row, not means of batches. Throughput is the calls of the
//! timed phase divided by its wall time. After the row the target's data is
//! checked against the number of calls acknowledged (warm-up included).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use crate::report::{Measured, Outcome, Report, Row};
use crate::{BenchError, Call, FEED_SIZE, Slot, Target, Workload, comment, feed_post, post_id};

/// How long each caller runs in a row.
#[derive(Clone, Copy, Debug)]
pub enum Budget {
    /// A warm-up of this long, then a timed phase of this long.
    Time {
        /// Untimed calls first (caches, connections, JIT-free warm paths).
        warm_up: Duration,
        /// The timed phase.
        measure: Duration,
    },
    /// This many untimed, then this many timed calls per caller (for tests:
    /// the same work on every machine).
    Calls {
        /// Untimed calls per caller.
        warm_up: u64,
        /// Timed calls per caller.
        measure: u64,
    },
}

/// One row's shape: which call, over how many partitions, from how many
/// concurrent callers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowSpec {
    /// The call.
    pub workload: Workload,
    /// Posts (each its own logical partition) for createComment; 1 (the
    /// feed) otherwise.
    pub partitions: usize,
    /// Concurrent callers, each on its own thread and connection.
    pub callers: usize,
}

/// The run's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// How long, or how many calls, per row.
    pub budget: Budget,
    /// The rows to run, on every target.
    pub rows: Vec<RowSpec>,
}

impl Config {
    /// The matrix: createComment on 1, 16 and 1,000 partitions with
    /// 1, 4 and 16 callers; truncateFeed and the feed read with 1 and 4.
    pub fn full(budget: Budget) -> Config {
        let mut rows = Vec::new();
        for partitions in [1, 16, 1000] {
            for callers in [1, 4, 16] {
                rows.push(RowSpec {
                    workload: Workload::CreateComment,
                    partitions,
                    callers,
                });
            }
        }
        for workload in [Workload::TruncateFeed, Workload::FeedRead] {
            for callers in [1, 4] {
                rows.push(RowSpec {
                    workload,
                    partitions: 1,
                    callers,
                });
            }
        }
        Config { budget, rows }
    }
}

/// Runs every row on every slot (rows outermost, so the targets of one row
/// run close together in time) and reports each row to `progress` as it
/// finishes.
pub fn run(slots: &mut [Slot], config: &Config, mut progress: impl FnMut(&Row)) -> Report {
    let mut rows = Vec::new();
    for &spec in &config.rows {
        for slot in slots.iter_mut() {
            let outcome = match slot {
                Slot::Ready(target) => match target.skips(spec.workload) {
                    Some(reason) => Outcome::Skipped(reason.to_owned()),
                    None => run_row(target.as_mut(), spec, config.budget),
                },
                Slot::Skipped { reason, .. } => Outcome::Skipped(reason.clone()),
            };
            let row = Row {
                spec,
                system: slot.system().to_owned(),
                durability: slot.durability(),
                outcome,
            };
            progress(&row);
            rows.push(row);
        }
    }
    Report::new(rows, slots, config)
}

/// Runs one row on one target: fresh data, callers, check.
pub fn run_row(target: &mut dyn Target, spec: RowSpec, budget: Budget) -> Outcome {
    match try_row(target, spec, budget) {
        Ok(measured) => Outcome::Measured(measured),
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

fn try_row(target: &mut dyn Target, spec: RowSpec, budget: Budget) -> Result<Measured, BenchError> {
    if spec.callers == 0 || spec.partitions == 0 {
        return Err(BenchError::Check(
            "a row needs at least one caller and one partition".into(),
        ));
    }
    target.prepare(spec.workload, spec.partitions)?;
    let server = target.server_pid();
    let cpu_before = crate::cpu::consumed(server);
    let (latencies, window, calls) = drive(&*target, spec, budget)?;
    // Warm-up calls included: the clock runs over every call of the row.
    let cpu = crate::cpu::per_call_us(cpu_before, crate::cpu::consumed(server), calls);
    target.verify(spec.workload, calls)?;
    Ok(Measured::new(latencies, window, cpu))
}

/// What one caller thread did.
struct CallerRun {
    latencies: Vec<Duration>,
    first: Option<Instant>,
    last: Option<Instant>,
    calls: u64,
}

/// Runs the callers; returns every timed latency, the timed window and the
/// number of calls acknowledged in total.
fn drive(
    target: &dyn Target,
    spec: RowSpec,
    budget: Budget,
) -> Result<(Vec<Duration>, Duration, u64), BenchError> {
    let barrier = Barrier::new(spec.callers + 1);
    let gate = Gate::new(spec.callers);
    // The initial feed holds sequence numbers 0..FEED_SIZE.
    let seq = AtomicU64::new(FEED_SIZE as u64);
    let start = OnceLock::<Instant>::new();
    let results: Vec<Result<CallerRun, BenchError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..spec.callers)
            .map(|caller| {
                let (barrier, gate, seq, start) = (&barrier, &gate, &seq, &start);
                // Script calls run in place on a thread this large.
                std::thread::Builder::new()
                    .stack_size(partita::SCRIPT_THREAD_STACK)
                    .spawn_scoped(s, move || {
                        let _panicking = FailOnPanic(gate);
                        let connected = target.connect();
                        barrier.wait();
                        let mut conn = connected.inspect_err(|_| {
                            gate.failed.store(true, Ordering::Relaxed);
                        })?;
                        let start = *start.wait();
                        let mut generator = Generator::new(spec, caller, seq);
                        let mut run = CallerRun {
                            latencies: Vec::with_capacity(1 << 14),
                            first: None,
                            last: None,
                            calls: 0,
                        };
                        let result =
                            caller_loop(&mut *conn, &mut generator, &mut run, budget, start, gate);
                        if result.is_err() {
                            gate.failed.store(true, Ordering::Relaxed);
                        }
                        result.map(|()| run)
                    })
                    // What `Scope::spawn` does too.
                    .expect("failed to spawn thread")
            })
            .collect();
        barrier.wait();
        start.set(Instant::now()).expect("set once");
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => r,
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("?");
                    Err(BenchError::Check(format!("a caller panicked: {message}")))
                }
            })
            .collect()
    });
    let mut latencies = Vec::new();
    let (mut first, mut last, mut calls) = (None::<Instant>, None::<Instant>, 0);
    for result in results {
        let run = result?;
        latencies.extend(run.latencies);
        calls += run.calls;
        first = match (first, run.first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        last = last.max(run.last);
    }
    let window = match (first, last) {
        (Some(a), Some(b)) => b - a,
        _ => Duration::ZERO,
    };
    Ok((latencies, window, calls))
}

/// Where the callers of a row stand: the timed phase starts once every
/// caller has finished its warm-up, so no caller's start-up (a thread's
/// first script call builds its sandbox: tens of ms) falls into another's
/// timed phase.
struct Gate {
    callers: usize,
    warmed: AtomicUsize,
    timed_from: OnceLock<Instant>,
    failed: AtomicBool,
}

impl Gate {
    fn new(callers: usize) -> Gate {
        Gate {
            callers,
            warmed: AtomicUsize::new(0),
            timed_from: OnceLock::new(),
            failed: AtomicBool::new(false),
        }
    }

    fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Marks this caller warm and waits for the others; the instant the
    /// last one got there, or `None` when a caller failed.
    fn warmed(&self) -> Option<Instant> {
        if self.warmed.fetch_add(1, Ordering::AcqRel) + 1 == self.callers {
            let _ = self.timed_from.set(Instant::now());
        }
        loop {
            if let Some(&at) = self.timed_from.get() {
                return Some(at);
            }
            if self.failed() {
                return None;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Fails the gate when a caller panics, so the others stop waiting.
struct FailOnPanic<'a>(&'a Gate);

impl Drop for FailOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.failed.store(true, Ordering::Relaxed);
        }
    }
}

fn caller_loop(
    conn: &mut dyn crate::Caller,
    generator: &mut Generator<'_>,
    run: &mut CallerRun,
    budget: Budget,
    start: Instant,
    gate: &Gate,
) -> Result<(), BenchError> {
    let warm_until = match budget {
        Budget::Time { warm_up, .. } => start + warm_up,
        Budget::Calls { .. } => start,
    };
    let mut warm_calls = 0;
    // Warm-up.
    loop {
        let done = match budget {
            // At least one call: a thread's first script call builds its
            // sandbox, which is start-up, not the steady state timed here.
            Budget::Time { .. } => warm_calls > 0 && Instant::now() >= warm_until,
            Budget::Calls { warm_up, .. } => warm_calls >= warm_up,
        };
        if done || gate.failed() {
            break;
        }
        conn.call(generator.next())?;
        run.calls += 1;
        warm_calls += 1;
    }
    let Some(timed_from) = gate.warmed() else {
        return Ok(());
    };
    let measure_until = match budget {
        Budget::Time { measure, .. } => timed_from + measure,
        Budget::Calls { .. } => timed_from,
    };
    // Timed.
    let mut timed = 0;
    loop {
        let done = match budget {
            Budget::Time { .. } => Instant::now() >= measure_until,
            Budget::Calls { measure, .. } => timed >= measure,
        };
        if done || gate.failed() {
            break;
        }
        // Built before the clock starts: documents are the caller's input.
        let call = generator.next();
        let before = Instant::now();
        conn.call(call)?;
        let after = Instant::now();
        run.calls += 1;
        timed += 1;
        run.latencies.push(after - before);
        run.first.get_or_insert(before);
        run.last = Some(after);
    }
    Ok(())
}

/// Builds each caller's calls: posts picked uniformly at random (a fixed
/// seed per caller), comment ids unique per caller, feed posts numbered from
/// one counter shared by all callers.
struct Generator<'a> {
    spec: RowSpec,
    caller: usize,
    n: u64,
    rng: u64,
    seq: &'a AtomicU64,
}

impl<'a> Generator<'a> {
    fn new(spec: RowSpec, caller: usize, seq: &'a AtomicU64) -> Generator<'a> {
        Generator {
            spec,
            caller,
            n: 0,
            rng: 0x9E37_79B9_7F4A_7C15 ^ (caller as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9),
            seq,
        }
    }

    fn next(&mut self) -> Call {
        self.n += 1;
        match self.spec.workload {
            Workload::CreateComment => {
                // xorshift64*
                self.rng ^= self.rng >> 12;
                self.rng ^= self.rng << 25;
                self.rng ^= self.rng >> 27;
                let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
                let post = post_id((r % self.spec.partitions as u64) as usize);
                let comment = comment(&post, self.caller, self.n);
                Call::CreateComment {
                    post_id: post,
                    comment,
                }
            }
            Workload::TruncateFeed => {
                let seq = self.seq.fetch_add(1, Ordering::Relaxed);
                Call::TruncateFeed {
                    post: feed_post(seq),
                    seq,
                }
            }
            Workload::FeedRead => Call::FeedRead,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_spreads_posts_and_numbers_feed_posts() {
        let seq = AtomicU64::new(100);
        let spec = RowSpec {
            workload: Workload::CreateComment,
            partitions: 16,
            callers: 1,
        };
        let mut g = Generator::new(spec, 3, &seq);
        let mut seen = std::collections::HashSet::new();
        let mut ids = std::collections::HashSet::new();
        for _ in 0..1000 {
            let Call::CreateComment { post_id, comment } = g.next() else {
                panic!("createComment expected")
            };
            assert_eq!(comment["postId"], post_id.as_str());
            seen.insert(post_id);
            assert!(ids.insert(comment["id"].as_str().unwrap().to_owned()));
        }
        assert_eq!(seen.len(), 16, "every partition is used");
        let spec = RowSpec {
            workload: Workload::TruncateFeed,
            ..spec
        };
        let mut g = Generator::new(spec, 0, &seq);
        let Call::TruncateFeed { post, seq: s } = g.next() else {
            panic!("truncateFeed expected")
        };
        assert_eq!((s, post["id"].as_str()), (100, Some("f-100")));
    }
}
