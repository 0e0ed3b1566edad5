//! The harness end to end on the in-process targets only (Partita native,
//! JavaScript, Wasm (the Rust guests, built from `sprocs/samples/rust`)
//! and WAT, and SQLite; CI never starts Redis or PostgreSQL): a few
//! hundred calls per row, every row checked against its data, the report's
//! ratios and JSON, and a target that skips its work failing its row
//! instead of winning it.

use partita_bench::partita::{Flavor, Indexing, PARTITA_WAT, slot, slot_indexed};
use partita_bench::sqlite::SqliteTarget;
use partita_bench::{
    BenchError, Budget, Call, Caller, Config, Durability, Outcome, PARTITA_JS, PARTITA_WASM,
    RowSpec, Slot, Target, Workload, run, run_row,
};

const BUDGET: Budget = Budget::Calls {
    warm_up: 10,
    measure: 60,
};

fn rows() -> Vec<RowSpec> {
    vec![
        RowSpec {
            workload: Workload::CreateComment,
            partitions: 16,
            callers: 4,
        },
        RowSpec {
            workload: Workload::TruncateFeed,
            partitions: 1,
            callers: 2,
        },
        RowSpec {
            workload: Workload::FeedRead,
            partitions: 1,
            callers: 2,
        },
    ]
}

#[test]
fn in_process_targets_run_every_workload_and_report_ratios() {
    let mut slots = vec![
        slot(Flavor::Native, Durability::Memory),
        slot(Flavor::JavaScript, Durability::Memory),
        slot(Flavor::Wasm, Durability::Memory),
        slot(Flavor::Wat, Durability::Memory),
        slot(Flavor::Native, Durability::Durable),
        slot(Flavor::JavaScript, Durability::Durable),
        slot(Flavor::Wasm, Durability::Durable),
        Slot::Ready(Box::new(SqliteTarget::new(Durability::Durable))),
    ];
    for s in &slots {
        // The wasm32 target is part of the test setup (README): a skipped
        // Wasm slot here is a failure, not a pass.
        if let Slot::Skipped { system, reason, .. } = s {
            panic!("{system} was skipped: {reason}");
        }
    }
    let config = Config {
        budget: BUDGET,
        rows: rows(),
    };
    let mut seen = 0;
    let report = run(&mut slots, &config, |_| seen += 1);
    assert_eq!(seen, 24);
    assert_eq!(report.rows.len(), 24);
    let mut wasm_rows = 0;
    for row in &report.rows {
        match (&row.outcome, row.system.as_str()) {
            (Outcome::Measured(m), _) => {
                let callers = row.spec.callers as u64;
                assert_eq!(m.calls, 60 * callers, "{row:?}");
                assert!(m.throughput > 0.0 && m.p50_us > 0.0 && m.p99_us >= m.p50_us);
                // In-process targets: the harness's own CPU clock.
                assert!(m.cpu_us_per_call.is_some_and(|c| c > 0.0), "{row:?}");
                let js = report
                    .ratio(row, PARTITA_JS)
                    .expect("a JS row to compare with");
                let wasm = report
                    .ratio(row, PARTITA_WASM)
                    .expect("a Wasm row to compare with");
                if row.system == PARTITA_JS {
                    assert_eq!(js, 1.0);
                }
                if row.system == PARTITA_WASM {
                    assert_eq!(wasm, 1.0);
                    wasm_rows += 1;
                }
                if row.system == PARTITA_WAT {
                    assert_eq!(row.durability, Durability::Memory);
                }
            }
            (other, system) => panic!("{system} {:?}: {other:?}", row.spec),
        }
    }
    assert_eq!(wasm_rows, 6, "every workload, in memory and durable");
    // SQLite has only a durable row here: its ratio is against the durable JS row.
    let json = report.to_json();
    assert!(json["machine"]["logical_cores"].as_u64().unwrap() >= 1);
    let targets = json["targets"].as_array().unwrap();
    assert!(targets.iter().any(|t| t["target"] == "SQLite"
        && t["durability"] == "durable"
        && t["settings"].as_str().unwrap().contains("synchronous=FULL")));
    let rows = json["rows"].as_array().unwrap();
    assert!(
        rows.iter()
            .all(|r| r.get("failed").is_none() && r.get("skipped").is_none())
    );
    assert!(
        rows.iter()
            .any(|r| r["target"] == PARTITA_WASM && r["ratio_to_partita_wasm"] == 1.0)
    );
    assert!(rows.iter().all(|r| r["cpu_us_per_call"].as_f64().is_some()));
    let table = report.table();
    assert!(table.contains("| createComment | 16 | 4 | SQLite | durable |"));
    assert!(table.contains("| truncateFeed | 1 | 2 | Partita Wasm | durable |"));
    assert!(!table.contains("skipped"));
}

#[test]
fn a_container_without_an_index_is_its_own_target_beside_the_default() {
    let mut slots = vec![
        slot_indexed(Flavor::Native, Durability::Durable, Indexing::Consistent),
        slot_indexed(Flavor::Native, Durability::Durable, Indexing::None),
    ];
    let config = Config {
        budget: BUDGET,
        rows: rows()[..1].to_vec(),
    };
    let report = run(&mut slots, &config, |_| {});
    let systems: Vec<&str> = report.rows.iter().map(|r| r.system.as_str()).collect();
    assert_eq!(
        systems,
        ["Partita native", "Partita native (indexing none)"]
    );
    for row in &report.rows {
        assert!(matches!(row.outcome, Outcome::Measured(_)), "{row:?}");
    }
    let table = report.table();
    assert!(
        table.contains("- Partita native (indexing none) (durable): Durability::Full")
            && table.contains(r#"{"indexingMode": "none"}"#),
        "{table}"
    );
}

/// A SQLite target whose callers acknowledge calls without making them.
struct Lazy(SqliteTarget);

struct LazyCaller;

impl Caller for LazyCaller {
    fn call(&mut self, _call: Call) -> Result<usize, BenchError> {
        Ok(2)
    }
}

impl Target for Lazy {
    fn system(&self) -> &str {
        "lazy"
    }
    fn durability(&self) -> Durability {
        Durability::Relaxed
    }
    fn settings(&self) -> String {
        String::new()
    }
    fn prepare(&mut self, workload: Workload, partitions: usize) -> Result<(), BenchError> {
        self.0.prepare(workload, partitions)
    }
    fn connect(&self) -> Result<Box<dyn Caller + '_>, BenchError> {
        Ok(Box::new(LazyCaller))
    }
    fn verify(&mut self, workload: Workload, calls: u64) -> Result<(), BenchError> {
        self.0.verify(workload, calls)
    }
}

#[test]
fn a_target_that_skips_work_fails_its_row() {
    let mut lazy = Lazy(SqliteTarget::new(Durability::Relaxed));
    for spec in &rows()[..2] {
        match run_row(&mut lazy, *spec, BUDGET) {
            Outcome::Failed(error) => assert!(error.contains("check failed"), "{error}"),
            other => panic!("{spec:?}: {other:?}"),
        }
    }
    // The same rows pass on the real target.
    let mut real = SqliteTarget::new(Durability::Relaxed);
    for spec in rows() {
        assert!(matches!(
            run_row(&mut real, spec, BUDGET),
            Outcome::Measured(_)
        ));
    }
}

#[test]
fn a_failing_call_fails_the_row_with_its_error() {
    struct Missing(SqliteTarget);
    impl Target for Missing {
        fn system(&self) -> &str {
            "missing posts"
        }
        fn durability(&self) -> Durability {
            Durability::Relaxed
        }
        fn settings(&self) -> String {
            String::new()
        }
        // Prepares no posts at all: createComment finds none.
        fn prepare(&mut self, workload: Workload, _partitions: usize) -> Result<(), BenchError> {
            self.0.prepare(workload, 0)
        }
        fn connect(&self) -> Result<Box<dyn Caller + '_>, BenchError> {
            self.0.connect()
        }
        fn verify(&mut self, workload: Workload, calls: u64) -> Result<(), BenchError> {
            self.0.verify(workload, calls)
        }
    }
    let mut target = Missing(SqliteTarget::new(Durability::Relaxed));
    match run_row(&mut target, rows()[0], BUDGET) {
        Outcome::Failed(error) => assert!(error.contains("not found"), "{error}"),
        other => panic!("{other:?}"),
    }
}

/// A SQLite target whose second caller cannot connect, or panics in its
/// first call: the other callers, waiting for every caller to warm up,
/// give up and the row fails instead of hanging.
struct Flaky {
    inner: SqliteTarget,
    connects: std::sync::atomic::AtomicUsize,
    panic: bool,
}

struct Panicking;

impl Caller for Panicking {
    fn call(&mut self, _call: Call) -> Result<usize, BenchError> {
        panic!("a caller broke");
    }
}

impl Target for Flaky {
    fn system(&self) -> &str {
        "flaky"
    }
    fn durability(&self) -> Durability {
        Durability::Relaxed
    }
    fn settings(&self) -> String {
        String::new()
    }
    fn prepare(&mut self, workload: Workload, partitions: usize) -> Result<(), BenchError> {
        self.inner.prepare(workload, partitions)
    }
    fn connect(&self) -> Result<Box<dyn Caller + '_>, BenchError> {
        let n = self
            .connects
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match (n, self.panic) {
            (1, false) => Err(BenchError::Check("no connection for caller 2".into())),
            (1, true) => Ok(Box::new(Panicking)),
            _ => self.inner.connect(),
        }
    }
    fn verify(&mut self, workload: Workload, calls: u64) -> Result<(), BenchError> {
        self.inner.verify(workload, calls)
    }
}

#[test]
fn a_caller_that_fails_before_the_timed_phase_fails_the_row_without_a_hang() {
    for panic in [false, true] {
        let mut target = Flaky {
            inner: SqliteTarget::new(Durability::Relaxed),
            connects: Default::default(),
            panic,
        };
        // A time budget: the others would otherwise wait for caller 2 to
        // warm up forever.
        let budget = Budget::Time {
            warm_up: std::time::Duration::from_millis(50),
            measure: std::time::Duration::from_millis(100),
        };
        match run_row(&mut target, rows()[0], budget) {
            Outcome::Failed(error) => assert!(
                error.contains(if panic { "panicked" } else { "no connection" }),
                "{error}"
            ),
            other => panic!("{other:?}"),
        }
    }
}
