//! `partita-bench`: the workload on Partita and its peers in one run.
//!
//! Starts the peers it needs (installing Debian's packages when missing and
//! allowed), runs every row on every target, prints the table to stdout,
//! writes the JSON report, and stops what it started (also on Ctrl-C).

/// The allocator the `partita` binary ships with, so Partita's rows measure
/// what users run; the peers' clients use it too.
#[global_allocator]
static ALLOCATOR: partita::MiMalloc = partita::MiMalloc;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use partita_bench::partita::{Flavor, Indexing};
use partita_bench::{Budget, Config, Durability, Outcome, PeerOptions, Slot, Workload};

/// Runs createComment, truncateFeed and the Q6 feed read on Partita,
/// SQLite, Redis and PostgreSQL, and prints throughput, p50, p99 and ratios.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// Timed seconds per row (each row also has a warm-up).
    #[arg(long, default_value_t = 1.0)]
    seconds_per_row: f64,
    /// Untimed warm-up seconds per row.
    #[arg(long, default_value_t = 0.3)]
    warm_up_seconds: f64,
    /// A short run: 0.2 s per row after 0.05 s of warm-up.
    #[arg(long)]
    quick: bool,
    /// A fixed number of timed calls per caller and row instead of a time
    /// (a tenth as many warm-up calls).
    #[arg(long)]
    calls: Option<u64>,
    /// Only these targets (comma-separated): partita, sqlite, redis, postgres.
    #[arg(long, value_delimiter = ',')]
    targets: Vec<String>,
    /// Only these workloads (comma-separated): createComment, truncateFeed, feed.
    #[arg(long, value_delimiter = ',')]
    workloads: Vec<String>,
    /// Only these flavors of the partita target (comma-separated): native,
    /// batch, js, wasm, wat.
    #[arg(long, value_delimiter = ',')]
    flavors: Vec<String>,
    /// Only these durability classes (comma-separated): memory, relaxed, durable.
    #[arg(long, value_delimiter = ',')]
    durability: Vec<String>,
    /// Indexing modes of the partita target's containers (comma-separated):
    /// consistent (the default policy, every path), none
    /// (`{"indexingMode": "none"}`); each is its own target, side by side
    /// in every row ("Partita native (indexing none)").
    #[arg(long, value_delimiter = ',', default_value = "consistent")]
    indexing: Vec<String>,
    /// Only rows with these numbers of callers (comma-separated).
    #[arg(long, value_delimiter = ',')]
    callers: Vec<usize>,
    /// Only rows over these numbers of partitions (comma-separated).
    #[arg(long, value_delimiter = ',')]
    partitions: Vec<usize>,
    /// Node counts for Partita stored in PostgreSQL (comma-separated): each
    /// is a row of Partita native with that many nodes on one database.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    nodes: Vec<usize>,
    /// Where to write the JSON report.
    #[arg(long, default_value = "bench-results.json")]
    json: PathBuf,
    /// Skip a peer whose server is missing instead of installing it with apt-get.
    #[arg(long)]
    no_install: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let known = ["partita", "sqlite", "redis", "postgres"];
    for t in &args.targets {
        if !known.contains(&t.as_str()) {
            bail!("unknown target {t:?}: expected one of {known:?}");
        }
    }
    let wanted = |t: &str| args.targets.is_empty() || args.targets.iter().any(|a| a == t);
    let flavor_names = [
        (Flavor::Native, "native"),
        (Flavor::Batch, "batch"),
        (Flavor::JavaScript, "js"),
        (Flavor::Wasm, "wasm"),
        (Flavor::Wat, "wat"),
    ];
    for f in &args.flavors {
        if !flavor_names.iter().any(|(_, name)| name == f) {
            bail!("unknown flavor {f:?}: native, batch, js, wasm or wat");
        }
    }
    let flavor_wanted = |flavor: Flavor| {
        args.flavors.is_empty()
            || flavor_names
                .iter()
                .any(|(f, name)| *f == flavor && args.flavors.iter().any(|a| a == name))
    };
    for d in &args.durability {
        if ![Durability::Memory, Durability::Relaxed, Durability::Durable]
            .iter()
            .any(|k| k.name() == d)
        {
            bail!("unknown durability {d:?}: memory, relaxed or durable");
        }
    }
    let mut indexing = Vec::new();
    for name in &args.indexing {
        match Indexing::ALL.into_iter().find(|i| i.name() == name) {
            Some(mode) if !indexing.contains(&mode) => indexing.push(mode),
            Some(_) => {}
            None => bail!("unknown indexing mode {name:?}: consistent or none"),
        }
    }
    if args.nodes.contains(&0) {
        bail!("--nodes counts start at 1");
    }
    let budget = match (args.calls, args.quick) {
        (Some(calls), _) => Budget::Calls {
            warm_up: calls / 10,
            measure: calls,
        },
        (None, true) => Budget::Time {
            warm_up: Duration::from_millis(50),
            measure: Duration::from_millis(200),
        },
        (None, false) => {
            if !(args.seconds_per_row > 0.0 && args.warm_up_seconds >= 0.0) {
                bail!("--seconds-per-row must be positive and --warm-up-seconds not negative");
            }
            Budget::Time {
                warm_up: Duration::from_secs_f64(args.warm_up_seconds),
                measure: Duration::from_secs_f64(args.seconds_per_row),
            }
        }
    };
    let mut config = Config::full(budget);
    if !args.workloads.is_empty() {
        let mut selected = Vec::new();
        for w in &args.workloads {
            let workload = match w.as_str() {
                "createComment" => Workload::CreateComment,
                "truncateFeed" => Workload::TruncateFeed,
                "feed" | "Q6" => Workload::FeedRead,
                other => bail!("unknown workload {other:?}: createComment, truncateFeed or feed"),
            };
            selected.push(workload);
        }
        config.rows.retain(|r| selected.contains(&r.workload));
    }
    if !args.callers.is_empty() {
        config.rows.retain(|r| args.callers.contains(&r.callers));
    }
    if !args.partitions.is_empty() {
        config
            .rows
            .retain(|r| args.partitions.contains(&r.partitions));
    }
    if config.rows.is_empty() {
        bail!("no row has those workloads, callers and partitions");
    }

    partita_bench::install_interrupt_handler()?;
    let peers = PeerOptions {
        install: !args.no_install,
    };
    let mut slots: Vec<Slot> = Vec::new();
    if wanted("partita") {
        for flavor in Flavor::ALL.into_iter().filter(|f| flavor_wanted(*f)) {
            for &mode in &indexing {
                for durability in [Durability::Memory, Durability::Relaxed, Durability::Durable] {
                    slots.push(partita_bench::partita::slot_indexed(
                        flavor, durability, mode,
                    ));
                }
            }
        }
    }
    if wanted("sqlite") {
        for durability in [Durability::Relaxed, Durability::Durable] {
            slots.push(Slot::Ready(Box::new(
                partita_bench::sqlite::SqliteTarget::new(durability),
            )));
        }
    }
    if wanted("redis") {
        eprintln!("starting redis-server …");
        slots.extend(partita_bench::redis::slots(peers));
    }
    if wanted("postgres") {
        eprintln!("starting a private PostgreSQL cluster …");
        slots.extend(partita_bench::postgres::slots(
            peers,
            wanted("partita"),
            &args.nodes,
        ));
    }
    if !args.durability.is_empty() {
        slots.retain(|slot| {
            args.durability
                .iter()
                .any(|d| d == slot.durability().name())
        });
    }
    for slot in &slots {
        if let Slot::Skipped { system, reason, .. } = slot {
            eprintln!("{system} ({}): skipped: {reason}", slot.durability());
        }
    }
    // Table order within a row shape: by durability class, then as listed.
    slots.sort_by_key(Slot::durability);

    let report = partita_bench::run(&mut slots, &config, |row| {
        let figures = match &row.outcome {
            Outcome::Measured(m) => format!(
                "{:>9.0} calls/s  p50 {:>8.1} µs  p99 {:>8.1} µs",
                m.throughput, m.p50_us, m.p99_us
            ),
            Outcome::Skipped(reason) => format!("skipped: {reason}"),
            Outcome::Failed(error) => format!("FAILED: {error}"),
        };
        eprintln!(
            "{:<13} {:>4} partitions {:>2} callers  {:<15} {:<8} {figures}",
            row.spec.workload.name(),
            row.spec.partitions,
            row.spec.callers,
            row.system,
            row.durability.name()
        );
    });
    // Stop the servers before printing: the table is the last thing shown.
    drop(slots);
    print!("{}", report.table());
    let json = serde_json::to_string_pretty(&report.to_json())?;
    std::fs::write(&args.json, json + "\n")
        .with_context(|| format!("writing {}", args.json.display()))?;
    eprintln!("JSON report: {}", args.json.display());
    let failed = report
        .rows
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed(_)))
        .count();
    if failed > 0 {
        bail!("{failed} rows failed");
    }
    Ok(())
}
