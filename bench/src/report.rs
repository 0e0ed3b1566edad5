//! The report: one row per (workload, partitions, callers, target,
//! durability), with throughput, p50 and p99, and each row's throughput as a
//! ratio of Partita JavaScript's and Partita Wasm's in the same row shape and
//! durability class; as a text table and as JSON, with the machine's core
//! count and every target's durability settings.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use crate::runner::{Budget, Config, RowSpec};
use crate::{Durability, Slot};

/// The system names the ratios are taken against.
pub const PARTITA_JS: &str = "Partita JS";
/// See [`PARTITA_JS`].
pub const PARTITA_WASM: &str = "Partita Wasm";

/// A measured row's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// Timed calls.
    pub calls: u64,
    /// Timed calls per second of wall time.
    pub throughput: f64,
    /// Median latency of a call, µs.
    pub p50_us: f64,
    /// 99th percentile latency of a call, µs.
    pub p99_us: f64,
    /// CPU time per call, µs, of the harness's process and the target's
    /// server together, over the row's warm-up and timed calls (see
    /// `cpu.rs`); `None` when it could not be read.
    pub cpu_us_per_call: Option<f64>,
}

impl Measured {
    /// Figures from every timed call's latency, the timed window and the
    /// CPU per call.
    pub fn new(
        mut latencies: Vec<Duration>,
        window: Duration,
        cpu_us_per_call: Option<f64>,
    ) -> Measured {
        latencies.sort_unstable();
        let at = |q: f64| {
            if latencies.is_empty() {
                0.0
            } else {
                let i = ((latencies.len() - 1) as f64 * q).round() as usize;
                latencies[i].as_secs_f64() * 1e6
            }
        };
        let secs = window.as_secs_f64();
        Measured {
            calls: latencies.len() as u64,
            throughput: if secs > 0.0 {
                latencies.len() as f64 / secs
            } else {
                0.0
            },
            p50_us: at(0.5),
            p99_us: at(0.99),
            cpu_us_per_call,
        }
    }
}

/// How a row ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Ran and passed its check.
    Measured(Measured),
    /// Not run, for this reason.
    Skipped(String),
    /// Ran and failed (a call failed, or the data disagreed with the calls).
    Failed(String),
}

/// One row of the report.
#[derive(Clone, Debug)]
pub struct Row {
    /// Workload, partitions, callers.
    pub spec: RowSpec,
    /// The system ("SQLite").
    pub system: String,
    /// Its durability class.
    pub durability: Durability,
    /// What happened.
    pub outcome: Outcome,
}

impl Row {
    fn throughput(&self) -> Option<f64> {
        match &self.outcome {
            Outcome::Measured(m) => Some(m.throughput),
            _ => None,
        }
    }
}

/// A whole run.
#[derive(Clone, Debug)]
pub struct Report {
    /// Every row, in run order.
    pub rows: Vec<Row>,
    /// Each target's name, durability class and settings.
    pub targets: Vec<(String, Durability, String)>,
    /// Logical CPUs of the machine.
    pub cores: usize,
    /// The CPU model, from /proc/cpuinfo when there is one.
    pub cpu: String,
    /// The budget per row, as text.
    pub budget: String,
}

/// The CPU model from /proc/cpuinfo, or "unknown".
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

impl Report {
    pub(crate) fn new(rows: Vec<Row>, slots: &[Slot], config: &Config) -> Report {
        let targets = slots
            .iter()
            .map(|s| {
                let settings = match s {
                    Slot::Ready(t) => t.settings(),
                    Slot::Skipped { reason, .. } => format!("skipped: {reason}"),
                };
                (s.system().to_owned(), s.durability(), settings)
            })
            .collect();
        let cpu = cpu_model();
        let budget = match config.budget {
            Budget::Time { warm_up, measure } => format!(
                "{:.1} s warm-up + {:.1} s timed per row",
                warm_up.as_secs_f64(),
                measure.as_secs_f64()
            ),
            Budget::Calls { warm_up, measure } => {
                format!("{warm_up} warm-up + {measure} timed calls per caller and row")
            }
        };
        Report {
            rows,
            targets,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu,
            budget,
        }
    }

    /// `row`'s throughput divided by that of `system` in the same row shape
    /// and durability class, when both were measured.
    pub fn ratio(&self, row: &Row, system: &str) -> Option<f64> {
        let base = self
            .rows
            .iter()
            .find(|r| r.system == system && r.spec == row.spec && r.durability == row.durability)?;
        Some(row.throughput()? / base.throughput()?)
    }

    /// The report as a text table (Markdown), with a header naming the
    /// machine and every target's settings.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "machine: {} logical cores, {}; {}",
            self.cores, self.cpu, self.budget
        );
        for (system, durability, settings) in &self.targets {
            let _ = writeln!(out, "- {system} ({durability}): {settings}");
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "| workload | partitions | callers | target | durability | calls/s | p50 µs | p99 µs | CPU µs/call | × JS | × Wasm |"
        );
        let _ = writeln!(out, "|---|--:|--:|---|---|--:|--:|--:|--:|--:|--:|");
        for row in &self.rows {
            let ratio = |system| {
                self.ratio(row, system)
                    .map_or("–".to_owned(), |r| format!("{r:.2}"))
            };
            let figures = match &row.outcome {
                Outcome::Measured(m) => format!(
                    "{:.0} | {:.1} | {:.1} | {} | {} | {}",
                    m.throughput,
                    m.p50_us,
                    m.p99_us,
                    m.cpu_us_per_call
                        .map_or("–".to_owned(), |c| format!("{c:.1}")),
                    ratio(PARTITA_JS),
                    ratio(PARTITA_WASM)
                ),
                Outcome::Skipped(reason) => format!("skipped: {reason} | | | | | "),
                Outcome::Failed(error) => format!("FAILED: {error} | | | | | "),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                row.spec.workload,
                row.spec.partitions,
                row.spec.callers,
                row.system,
                row.durability,
                figures
            );
        }
        out
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|row| {
                let mut v = json!({
                    "workload": row.spec.workload.name(),
                    "partitions": row.spec.partitions,
                    "callers": row.spec.callers,
                    "target": row.system,
                    "durability": row.durability.name(),
                });
                match &row.outcome {
                    Outcome::Measured(m) => {
                        v["calls"] = json!(m.calls);
                        v["calls_per_s"] = json!(m.throughput);
                        v["p50_us"] = json!(m.p50_us);
                        v["p99_us"] = json!(m.p99_us);
                        v["cpu_us_per_call"] = json!(m.cpu_us_per_call);
                        v["ratio_to_partita_js"] = json!(self.ratio(row, PARTITA_JS));
                        v["ratio_to_partita_wasm"] = json!(self.ratio(row, PARTITA_WASM));
                    }
                    Outcome::Skipped(reason) => v["skipped"] = json!(reason),
                    Outcome::Failed(error) => v["failed"] = json!(error),
                }
                v
            })
            .collect();
        let targets: Vec<Value> = self
            .targets
            .iter()
            .map(|(system, durability, settings)| {
                json!({"target": system, "durability": durability.name(), "settings": settings})
            })
            .collect();
        json!({
            "machine": {"logical_cores": self.cores, "cpu": self.cpu},
            "budget": self.budget,
            "targets": targets,
            "rows": rows,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_throughput() {
        let latencies: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        let m = Measured::new(latencies, Duration::from_secs(2), Some(12.5));
        assert_eq!(m.calls, 100);
        assert_eq!(m.throughput, 50.0);
        assert_eq!(m.p50_us.round(), 51.0); // index 49.5 rounds to 50
        assert_eq!(m.p99_us.round(), 99.0);
        assert_eq!(m.cpu_us_per_call, Some(12.5));
        let empty = Measured::new(Vec::new(), Duration::ZERO, None);
        assert_eq!((empty.calls, empty.throughput), (0, 0.0));
    }
}
