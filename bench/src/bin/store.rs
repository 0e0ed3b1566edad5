//! `partita-store-bench`: what a store costs as it grows, beside SQLite
//! holding the same documents (the issue "Data larger than memory").
//!
//! For each size it builds one Partita store and one SQLite database with
//! the same documents, then measures each in fresh child processes:
//!
//! ```text
//!   parent ── build child (Partita) ── build child (SQLite)      once per size, or reused (--dir)
//!      │
//!      └── round 1..N:  measure child (Partita) ── measure child (SQLite)
//!                         open + first read, VmRSS/VmHWM, hot and cold
//!                         point reads, four cross-partition queries; one JSON line
//!                       then, for each, on a copy of the store:
//!                         crash-write child (SIGKILLed) ── crash-open child
//!      └── once per size, for each, on a copy: rewrite child, then the copy's size
//! ```
//!
//! Every measurement runs in a process that has just opened the store, so
//! its open time and resident memory are those of a cold open (the OS page
//! cache is warm: the parent reads every file of the store before each
//! child). The parent reports the median over rounds of each figure, and
//! Partita's divided by SQLite's, as a Markdown table and as JSON.
//!
//! The documents (~210 bytes of JSON) are spread over 1,000 logical
//! partitions: document `i` has id `d{i}`, partition key `p{i % 1000}`, a
//! field `n = i` and a field `g = i / 100` (100 documents, each in another
//! partition). Both sides index what the queries ask: Partita's container
//! has the default indexing policy (a range index of every path), or with
//! `--partita-indexing queried` one of `/n` and `/g` only (Partita also
//! indexes `id` and `_ts` always, as Cosmos DB does), and the
//! SQLite table has expression indexes on `json_extract(body, '$.n')` and
//! `json_extract(body, '$.g')`, built with the store. The queries ([`QUERIES`]) are
//! an equality on `n` (one document), an equality on `g` (100 documents),
//! the 10 largest `n` (an ORDER BY with TOP/LIMIT), and an equality on `g`
//! with a range of `n` (the group's 50 last documents); each child checks
//! that its side used its index (Partita's `QueryStats::index_used`,
//! SQLite's `EXPLAIN QUERY PLAN`) and that the results are the expected
//! documents, and the parent that both sides returned the same ids.
//!
//! After each measure child the parent copies the store, has a child
//! write `--crash-writes` documents into the copy (in 10 partitions, half
//! new, half replacing, each its own durable write: Partita's from 16 threads, so
//! group commit gathers them; SQLite's one transaction each) and kills it
//! with SIGKILL once it has printed that all were acknowledged; a last
//! child then opens the copy and reads the last document written, timing
//! both. That is recovery: Partita reads back what the log holds past its
//! last fold (at most about 20,000 documents), SQLite its write-ahead log.
//!
//! Once per size the parent copies each store again, has a child replace
//! `--rewrites` of its documents (those of the 10 hot partitions, round and
//! round, each write changing one) and close it, and measures the copy's
//! files: what a store keeps of the versions its writes replaced.
//!
//! Non-goals: concurrent callers and the speed of writes (`partita-bench`
//! measures those), and a cold OS page cache (dropping it needs root and
//! says more about the disk than about either store).

/// The allocator the `partita` binary ships with, so Partita's figures are
/// what users run; SQLite's children use it too (SQLite itself calls the C
/// allocator).
#[global_allocator]
static ALLOCATOR: partita::MiMalloc = partita::MiMalloc;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::{Parser, Subcommand, ValueEnum};
use partita::{
    ContainerProperties, Database, ImportOptions, IndexingPolicy, Options, Params, QueryOptions,
};
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use serde_json::{Map, Value, json};

/// Logical partitions of every store.
const PARTITIONS: u64 = 1_000;
/// Partitions the hot reads stay in.
const HOT_PARTITIONS: u64 = 10;
/// Rows per SQLite transaction while building.
const SQLITE_BATCH: u64 = 10_000;
/// The SQLite database's file name, in its own directory.
const SQLITE_FILE: &str = "docs.sqlite";
/// The container (Partita) and table (SQLite) name.
const CONTAINER: &str = "docs";
/// Bumped whenever [`document`] or the layout of a store changes, so a
/// store kept with `--dir` from another version is rebuilt.
const SHAPE: u64 = 2;

const SQLITE_SCHEMA: &str = "
CREATE TABLE docs (pk TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (pk, id));
";
/// SQLite's equivalent of Partita's index for the queries: one expression
/// index per field they filter or order by, created after the rows (as a
/// bulk load would).
const SQLITE_INDEXES: &str = "
CREATE INDEX docs_n ON docs (json_extract(body, '$.n'));
CREATE INDEX docs_g ON docs (json_extract(body, '$.g'));
";
const SQLITE_READ: &str = "SELECT body FROM docs WHERE pk = ?1 AND id = ?2";

/// Documents per value of `g`.
const GROUP: u64 = 100;

/// What a query asks, which decides its parameter and expected result.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ask {
    /// The document whose `n` is the parameter.
    N,
    /// The [`GROUP`] documents whose `g` is the parameter, in any order.
    G,
    /// The 10 documents of largest `n`, largest first.
    Top,
    /// The second half of the [`GROUP`] documents whose `g` is the
    /// parameter: those whose `n` is at least its middle.
    GroupFrom,
}

impl Ask {
    /// The query's parameters for the argument `arg`: names for
    /// Partita, in the order of SQLite's `?1, ?2`.
    fn params(self, arg: Option<u64>) -> Vec<(&'static str, u64)> {
        match (self, arg) {
            (Ask::N, Some(n)) => vec![("@n", n)],
            (Ask::G, Some(g)) => vec![("@g", g)],
            (Ask::GroupFrom, Some(g)) => vec![("@g", g), ("@n", g * GROUP + GROUP / 2)],
            _ => Vec::new(),
        }
    }
}

/// One cross-partition query, on each side.
struct Query {
    /// Its metrics' prefix in a child's JSON line.
    key: &'static str,
    ask: Ask,
    /// Partita's query, run with `query_items` (every partition).
    partita: &'static str,
    /// SQLite's, which must use the index [`Query::sqlite_index`].
    sqlite: &'static str,
    sqlite_index: &'static str,
}

/// The queries, run in this order in every measuring child.
const QUERIES: [Query; 4] = [
    Query {
        key: "eq",
        ask: Ask::N,
        partita: "SELECT * FROM c WHERE c.n = @n",
        sqlite: "SELECT body FROM docs WHERE json_extract(body, '$.n') = ?1",
        sqlite_index: "docs_n",
    },
    Query {
        key: "group",
        ask: Ask::G,
        partita: "SELECT * FROM c WHERE c.g = @g",
        sqlite: "SELECT body FROM docs WHERE json_extract(body, '$.g') = ?1",
        sqlite_index: "docs_g",
    },
    Query {
        key: "top",
        ask: Ask::Top,
        partita: "SELECT TOP 10 * FROM c ORDER BY c.n DESC",
        sqlite: "SELECT body FROM docs ORDER BY json_extract(body, '$.n') DESC LIMIT 10",
        sqlite_index: "docs_n",
    },
    // An equality and a range: the range's entries (about half the
    // store's) hold every candidate, in no order by document.
    Query {
        key: "group_from",
        ask: Ask::GroupFrom,
        partita: "SELECT * FROM c WHERE c.g = @g AND c.n >= @n",
        sqlite: "SELECT body FROM docs WHERE json_extract(body, '$.g') = ?1 AND json_extract(body, '$.n') >= ?2",
        sqlite_index: "docs_g",
    },
];

/// Partita's partition cache while it builds a store (an import keeps the
/// partitions it writes in memory up to it).
const BUILD_CACHE_BYTES: usize = 256 << 20;

/// Builds Partita and SQLite stores of several sizes and compares their
/// open time, memory, disk size, point reads, three indexed
/// cross-partition queries and build rate, each measured in a fresh
/// process.
#[derive(Parser)]
#[command(version)]
struct Args {
    #[command(subcommand)]
    child: Option<Child>,
    /// Store sizes in documents (comma-separated), at least 1,000 each.
    #[arg(long, value_delimiter = ',', default_value = "100000,1000000")]
    sizes: Vec<u64>,
    /// Measuring rounds per size; each runs one Partita child, then one
    /// SQLite child.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Keep the stores in this directory and reuse those built earlier
    /// (building 10 M documents takes minutes); a temporary directory
    /// otherwise.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Timed point reads per child: this many in the hot partitions, and
    /// one in each of as many other partitions (990 at most), cold.
    #[arg(long, default_value_t = 20_000)]
    reads: usize,
    /// Runs of each cross-partition query per child (the first, and the
    /// median of the others, are kept).
    #[arg(long, default_value_t = 3)]
    query_runs: usize,
    /// Partita's partition cache budget in bytes (`Options::cache_bytes`);
    /// its default (a quarter of the machine's memory) otherwise.
    #[arg(long)]
    cache_bytes: Option<usize>,
    /// What Partita's container indexes: `all` (the default policy, a
    /// range index of every path, as Cosmos DB's) or `queried` (only `/n`
    /// and `/g`, the paths the queries filter on and SQLite's two
    /// expression indexes cover: the same indexes on both sides).
    #[arg(long, value_enum, default_value_t = Indexing::All)]
    partita_indexing: Indexing,
    /// Documents a child writes into a copy of each store before it is
    /// killed with SIGKILL, and the copy opened again (0: skip it). The
    /// default is just under what Partita keeps unfolded at most.
    #[arg(long, default_value_t = 19_000)]
    crash_writes: u64,
    /// Documents a child replaces in a copy of each store, once per size,
    /// before the copy's disk size is taken (0: skip it).
    #[arg(long, default_value_t = 100_000)]
    rewrites: u64,
}

/// The values of `--partita-indexing`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Indexing {
    All,
    Queried,
}

/// What the parent runs this binary again for. Each prints one JSON line.
#[derive(Subcommand)]
enum Child {
    /// Builds one store.
    #[command(hide = true)]
    Build {
        #[arg(long)]
        system: System,
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        docs: u64,
    },
    /// Opens one store cold and measures it.
    #[command(hide = true)]
    Measure {
        #[arg(long)]
        system: System,
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        docs: u64,
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        reads: usize,
        #[arg(long)]
        query_runs: usize,
        #[arg(long)]
        cache_bytes: Option<usize>,
    },
    /// Writes into a store, prints a line once every write is
    /// acknowledged, then waits to be killed.
    #[command(hide = true)]
    CrashWrite(Crash),
    /// Opens a store a crash-write child left and reads its last write.
    #[command(hide = true)]
    CrashOpen(Crash),
    /// Replaces documents of a store, then closes it.
    #[command(hide = true)]
    Rewrite(Crash),
}

/// The arguments of both crash children: `writes` documents written into
/// `system`'s store of `docs` documents in `dir`.
#[derive(clap::Args)]
struct Crash {
    #[arg(long)]
    system: System,
    #[arg(long)]
    dir: PathBuf,
    #[arg(long)]
    docs: u64,
    #[arg(long)]
    writes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum System {
    /// Partita, with the default indexing policy.
    Partita,
    /// Partita, indexing only the paths SQLite indexes
    /// (`--partita-indexing queried`).
    PartitaQueried,
    Sqlite,
}

impl System {
    /// The two stores compared: Partita as `indexing` asks, and SQLite.
    fn pair(indexing: Indexing) -> [System; 2] {
        match indexing {
            Indexing::All => [System::Partita, System::Sqlite],
            Indexing::Queried => [System::PartitaQueried, System::Sqlite],
        }
    }

    fn name(self) -> &'static str {
        match self {
            System::Partita => "Partita",
            System::PartitaQueried => "Partita (queried paths indexed)",
            System::Sqlite => "SQLite",
        }
    }

    /// The value of `--system`.
    fn arg(self) -> &'static str {
        match self {
            System::Partita => "partita",
            System::PartitaQueried => "partita-queried",
            System::Sqlite => "sqlite",
        }
    }

    fn settings(self) -> String {
        match self {
            System::Partita | System::PartitaQueried => format!(
                "Database::open_with(dir, Options) (Durability::Full; the \
                 partition cache's default budget, a quarter of the machine's memory, unless \
                 --cache-bytes), built with Container::import_items (ImportOptions::default()) \
                 under a 256 MiB cache, {}; documents are read from storage when first needed",
                match self {
                    System::PartitaQueried => {
                        "an indexing policy of /n/? and /g/? only (what SQLite indexes)"
                    }
                    _ => "the default indexing policy (a range index of every path)",
                }
            ),
            System::Sqlite => format!(
                "rusqlite (bundled SQLite {}), one rowid table docs(pk, id, body) with \
                 PRIMARY KEY (pk, id), WAL, synchronous=FULL, built in transactions of {} rows, \
                 then the expression indexes docs_n on json_extract(body, '$.n') and docs_g on \
                 json_extract(body, '$.g'); default page cache, no mmap",
                rusqlite::version(),
                thousands(SQLITE_BATCH)
            ),
        }
    }
}

/// How a figure is printed.
#[derive(Clone, Copy)]
enum Format {
    /// A rate or count: `85.3k`, `1.20M`.
    Count,
    /// A time or size, to about three significant digits.
    Plain,
}

/// One figure of the report.
struct Metric {
    /// The key in a child's JSON line and in the report's JSON.
    key: &'static str,
    label: &'static str,
    format: Format,
}

impl Metric {
    const fn count(key: &'static str, label: &'static str) -> Metric {
        Metric {
            key,
            label,
            format: Format::Count,
        }
    }

    const fn plain(key: &'static str, label: &'static str) -> Metric {
        Metric {
            key,
            label,
            format: Format::Plain,
        }
    }
}

/// Every figure, in table order. The first two come from the build, the
/// rest from the measuring children.
const METRICS: &[Metric] = &[
    Metric::count("build_docs_per_s", "build (documents/s)"),
    Metric::plain("disk_mb", "disk, all files, indexes included (MB)"),
    Metric::plain(
        "rewritten_disk_mb",
        "disk after --rewrites replacements of existing documents (MB)",
    ),
    Metric::plain("open_ms", "open + first read (ms)"),
    Metric::plain("rss_open_mb", "VmRSS after open (MB)"),
    Metric::plain("hwm_open_mb", "VmHWM after open (MB)"),
    Metric::plain("rss_end_mb", "VmRSS after the reads and queries (MB)"),
    Metric::plain("hwm_end_mb", "VmHWM after the reads and queries (MB)"),
    Metric::plain("hot_p50_us", "hot point read p50 (µs)"),
    Metric::plain("hot_p99_us", "hot point read p99 (µs)"),
    Metric::plain("cold_p50_us", "cold point read p50 (µs)"),
    Metric::plain("cold_p99_us", "cold point read p99 (µs)"),
    Metric::plain("eq_first_ms", "query c.n = @n (1 document), first run (ms)"),
    Metric::plain("eq_ms", "query c.n = @n, later runs (ms)"),
    Metric::plain(
        "group_first_ms",
        "query c.g = @g (100 documents, 100 partitions), first run (ms)",
    ),
    Metric::plain("group_ms", "query c.g = @g, later runs (ms)"),
    Metric::plain(
        "top_first_ms",
        "query TOP 10 ORDER BY c.n DESC, first run (ms)",
    ),
    Metric::plain("top_ms", "query TOP 10 ORDER BY c.n DESC, later runs (ms)"),
    Metric::plain(
        "group_from_first_ms",
        "query c.g = @g AND c.n >= @n (50 documents), first run (ms)",
    ),
    Metric::plain(
        "group_from_ms",
        "query c.g = @g AND c.n >= @n, later runs (ms)",
    ),
    Metric::plain("close_ms", "close (ms)"),
    Metric::plain(
        "crash_open_ms",
        "open + first read after a SIGKILL mid-writes (ms)",
    ),
    Metric::plain(
        "cache_mb",
        "Partita's partition cache at the end, its estimate (MB)",
    ),
];

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    match args.child {
        Some(Child::Build { system, dir, docs }) => {
            let res = match system {
                System::Partita => build_partita(&dir, docs, None)?,
                System::PartitaQueried => build_partita(&dir, docs, Some(queried_policy()?))?,
                System::Sqlite => build_sqlite(&dir, docs)?,
            };
            println!("{res}");
            Ok(())
        }
        Some(Child::Measure {
            system,
            dir,
            docs,
            seed,
            reads,
            query_runs,
            cache_bytes,
        }) => {
            let plan = ReadPlan::new(docs, seed, reads, query_runs);
            let res = match system {
                System::Partita | System::PartitaQueried => {
                    measure_partita(&dir, &plan, cache_bytes)?
                }
                System::Sqlite => measure_sqlite(&dir, &plan)?,
            };
            println!("{res}");
            Ok(())
        }
        Some(Child::CrashWrite(Crash {
            system,
            dir,
            docs,
            writes,
        })) => {
            match system {
                System::Partita | System::PartitaQueried => {
                    crash_write_partita(&dir, docs, writes)?
                }
                System::Sqlite => crash_write_sqlite(&dir, docs, writes)?,
            }
            println!("{}", json!({ "written": writes }));
            std::io::Write::flush(&mut std::io::stdout())?;
            // The parent kills this process; a parent gone for a minute
            // means it will not, and the child ends on its own.
            std::thread::sleep(Duration::from_secs(60));
            bail!("not killed within a minute of its last write")
        }
        Some(Child::Rewrite(Crash {
            system,
            dir,
            docs,
            writes,
        })) => {
            let started = Instant::now();
            match system {
                System::Partita | System::PartitaQueried => rewrite_partita(&dir, docs, writes)?,
                System::Sqlite => rewrite_sqlite(&dir, docs, writes)?,
            }
            let seconds = started.elapsed().as_secs_f64();
            println!("{}", json!({ "written": writes, "seconds": seconds }));
            Ok(())
        }
        Some(Child::CrashOpen(Crash {
            system,
            dir,
            docs,
            writes,
        })) => {
            let res = match system {
                System::Partita | System::PartitaQueried => crash_open_partita(&dir, docs, writes)?,
                System::Sqlite => crash_open_sqlite(&dir, docs, writes)?,
            };
            println!("{res}");
            Ok(())
        }
        None => run_parent(&args),
    }
}

// ---------------------------------------------------------------------------
// The parent: builds, rounds, medians, the report.
// ---------------------------------------------------------------------------

/// One size's results.
struct SizeReport {
    docs: u64,
    /// Per system: the build's JSON (with `reused`), the disk size, and
    /// every measuring child's JSON line.
    systems: Vec<SystemReport>,
}

struct SystemReport {
    system: System,
    build: Value,
    disk_bytes: u64,
    /// The disk size of a copy after `--rewrites` replacements.
    rewritten_bytes: Option<u64>,
    runs: Vec<Value>,
}

impl SystemReport {
    /// The median of `key` over this system's figures.
    fn median(&self, key: &str) -> Option<f64> {
        match key {
            "build_docs_per_s" => self.build["docs_per_s"].as_f64(),
            "disk_mb" => Some(self.disk_bytes as f64 / 1e6),
            "rewritten_disk_mb" => self.rewritten_bytes.map(|b| b as f64 / 1e6),
            _ => median(self.runs.iter().filter_map(|r| r[key].as_f64()).collect()),
        }
    }
}

fn run_parent(args: &Args) -> anyhow::Result<()> {
    ensure!(args.rounds >= 1, "--rounds must be at least 1");
    ensure!(
        args.reads >= 1 && args.query_runs >= 1,
        "--reads and --query-runs must be at least 1"
    );
    for &size in &args.sizes {
        ensure!(
            size >= PARTITIONS,
            "--sizes: {size} is fewer documents than the {PARTITIONS} partitions"
        );
    }
    let date = utc_now();
    let load_before = load_average();
    let started = Instant::now();
    // The stores live here; a temporary directory is deleted at the end.
    let temp;
    let root = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("partita-store-bench")
                .tempdir()
                .context("creating a temporary directory")?;
            temp.path().to_owned()
        }
    };
    let exe = std::env::current_exe().context("finding this binary")?;

    let mut sizes = Vec::new();
    for &docs in &args.sizes {
        let size_dir = root.join(format!("docs-{docs}"));
        let mut systems = Vec::new();
        for system in System::pair(args.partita_indexing) {
            let build = ensure_built(&exe, &size_dir, system, docs)?;
            let disk_bytes = dir_size(&store_dir(&size_dir, system))?;
            systems.push(SystemReport {
                system,
                build,
                disk_bytes,
                rewritten_bytes: None,
                runs: Vec::new(),
            });
        }
        for round in 0..args.rounds {
            for s in &mut systems {
                let dir = store_dir(&size_dir, s.system);
                warm_page_cache(&dir)?;
                let seed = (docs << 8) ^ round as u64;
                let (docs_arg, seed_arg) = (docs.to_string(), seed.to_string());
                let (reads_arg, runs_arg) = (args.reads.to_string(), args.query_runs.to_string());
                let mut child_args = vec![
                    "measure",
                    "--system",
                    s.system.arg(),
                    "--dir",
                    path_arg(&dir)?,
                    "--docs",
                    &docs_arg,
                    "--seed",
                    &seed_arg,
                    "--reads",
                    &reads_arg,
                    "--query-runs",
                    &runs_arg,
                ];
                let cache_arg = args.cache_bytes.map(|b| b.to_string());
                if let Some(cache) = &cache_arg {
                    child_args.extend(["--cache-bytes", cache.as_str()]);
                }
                let mut run = run_child(&exe, &child_args)?;
                if args.crash_writes > 0 {
                    let crashed = crash_round(&exe, &size_dir, s.system, docs, args.crash_writes)?;
                    run["crash_open_ms"] = crashed["open_ms"].clone();
                }
                let figure = |key: &str| run[key].as_f64().unwrap_or(f64::NAN);
                eprintln!(
                    "{docs} documents, round {}/{}, {}: open + first read {:.1} ms, VmRSS {:.0} MB, \
                     hot p50 {:.1} µs, cold p50 {:.1} µs, queries n {:.2} / g {:.2} / top {:.2} / g and n {:.2} ms, \
                     after a crash {:.1} ms",
                    round + 1,
                    args.rounds,
                    s.system.name(),
                    figure("open_ms"),
                    figure("rss_open_mb"),
                    figure("hot_p50_us"),
                    figure("cold_p50_us"),
                    figure("eq_ms"),
                    figure("group_ms"),
                    figure("top_ms"),
                    figure("group_from_ms"),
                    figure("crash_open_ms"),
                );
                s.runs.push(run);
            }
            // Both sides of a round ran the same queries: they must have
            // returned the same documents.
            let [partita, sqlite] = [&systems[0], &systems[1]].map(|s| &s.runs[round]["ids"]);
            ensure!(
                partita == sqlite,
                "{docs} documents, round {}: Partita's and SQLite's queries returned different \
                 documents:\n{partita}\n{sqlite}",
                round + 1
            );
        }
        if args.rewrites > 0 {
            for s in &mut systems {
                let bytes = rewrite_round(&exe, &size_dir, s.system, docs, args.rewrites)?;
                eprintln!(
                    "{docs} documents, {}: {:.1} MB on disk after {} replacements (was {:.1} MB)",
                    s.system.name(),
                    bytes as f64 / 1e6,
                    args.rewrites,
                    s.disk_bytes as f64 / 1e6
                );
                s.rewritten_bytes = Some(bytes);
            }
        }
        // Checked; the report keeps how many each query returned.
        for s in &mut systems {
            for run in &mut s.runs {
                if let Some(Value::Object(ids)) = run.as_object_mut().and_then(|r| r.remove("ids"))
                {
                    let counts: Map<String, Value> = ids
                        .into_iter()
                        .map(|(k, v)| (k, json!(v.as_array().map_or(0, Vec::len))))
                        .collect();
                    run["returned"] = Value::Object(counts);
                }
            }
        }
        sizes.push(SizeReport { docs, systems });
    }

    let header = Header {
        date,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".to_owned(), |k| k.trim().to_owned()),
        cpu: partita_bench::cpu_model(),
        load_before,
        load_after: load_average(),
        elapsed: started.elapsed(),
        rounds: args.rounds,
        reads: args.reads,
        query_runs: args.query_runs,
        systems: System::pair(args.partita_indexing),
        crash_writes: args.crash_writes,
        rewrites: args.rewrites,
    };
    print!("{}", table(&header, &sizes));
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&to_json(&header, &sizes))?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
        eprintln!("JSON report: {}", path.display());
    }
    Ok(())
}

/// Where `system`'s store of one size lives.
fn store_dir(size_dir: &Path, system: System) -> PathBuf {
    size_dir.join(system.arg())
}

/// The build record of `system`'s store in `size_dir`, next to (not in)
/// the store, so the store's directory holds only the store's files.
fn build_record(size_dir: &Path, system: System) -> PathBuf {
    size_dir.join(format!("{}.build.json", system.arg()))
}

/// Builds `system`'s store of `docs` documents in a child, unless a
/// complete one of the same shape is there (its build record is written
/// only after the build finished). Returns the build record, with
/// `reused` set when the store was there.
fn ensure_built(exe: &Path, size_dir: &Path, system: System, docs: u64) -> anyhow::Result<Value> {
    let record = build_record(size_dir, system);
    let dir = store_dir(size_dir, system);
    if let Ok(text) = std::fs::read_to_string(&record) {
        let mut build: Value =
            serde_json::from_str(&text).with_context(|| format!("reading {}", record.display()))?;
        if build["shape"] == SHAPE && build["docs"] == docs && dir.is_dir() {
            eprintln!(
                "{docs} documents, {}: reusing the store in {} (built {})",
                system.name(),
                dir.display(),
                build["date"].as_str().unwrap_or("earlier")
            );
            build["reused"] = json!(true);
            return Ok(build);
        }
    }
    // A store without its record is a build that did not finish.
    let _ = std::fs::remove_file(&record);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    eprintln!("{docs} documents, {}: building …", system.name());
    let mut build = run_child(
        exe,
        &[
            "build",
            "--system",
            system.arg(),
            "--dir",
            path_arg(&dir)?,
            "--docs",
            &docs.to_string(),
        ],
    )?;
    build["shape"] = json!(SHAPE);
    build["docs"] = json!(docs);
    build["date"] = json!(utc_now());
    std::fs::write(&record, build.to_string() + "\n")
        .with_context(|| format!("writing {}", record.display()))?;
    eprintln!(
        "{docs} documents, {}: built in {:.1} s ({:.0} documents/s, VmHWM {:.0} MB)",
        system.name(),
        build["seconds"].as_f64().unwrap_or(f64::NAN),
        build["docs_per_s"].as_f64().unwrap_or(f64::NAN),
        build["hwm_mb"].as_f64().unwrap_or(f64::NAN),
    );
    build["reused"] = json!(false);
    Ok(build)
}

/// Copies `system`'s store in `size_dir` to a directory beside it named
/// for `what`, replacing what an earlier run left there.
fn copy_store(size_dir: &Path, system: System, what: &str) -> anyhow::Result<PathBuf> {
    let copy = size_dir.join(format!("{}-{what}", system.arg()));
    if copy.exists() {
        std::fs::remove_dir_all(&copy).with_context(|| format!("removing {}", copy.display()))?;
    }
    std::fs::create_dir_all(&copy)?;
    for entry in std::fs::read_dir(store_dir(size_dir, system))? {
        let entry = entry?;
        std::fs::copy(entry.path(), copy.join(entry.file_name()))
            .with_context(|| format!("copying {}", entry.path().display()))?;
    }
    Ok(copy)
}

/// Copies `system`'s store of `docs` documents, has a crash-write child
/// write `writes` documents into the copy and kills it with SIGKILL once
/// it says all were acknowledged, then times a crash-open child's open and
/// first read of the copy; its JSON line. The copy is removed.
fn crash_round(
    exe: &Path,
    size_dir: &Path,
    system: System,
    docs: u64,
    writes: u64,
) -> anyhow::Result<Value> {
    use std::io::BufRead as _;
    let copy = copy_store(size_dir, system, "crashed")?;
    let (docs_arg, writes_arg) = (docs.to_string(), writes.to_string());
    let common = [
        "--system",
        system.arg(),
        "--dir",
        path_arg(&copy)?,
        "--docs",
        &docs_arg,
        "--writes",
        &writes_arg,
    ];
    let mut writer = Command::new(exe)
        .arg("crash-write")
        .args(common)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let mut line = String::new();
    let read = writer
        .stdout
        .take()
        .map(|out| std::io::BufReader::new(out).read_line(&mut line));
    // Killed whether or not it got as far as its line.
    writer.kill().context("killing the crash-write child")?;
    writer.wait()?;
    ensure!(
        matches!(read, Some(Ok(n)) if n > 0),
        "the crash-write child ended before its writes were acknowledged"
    );
    let mut args = vec!["crash-open"];
    args.extend(common);
    let res = run_child(exe, &args)?;
    std::fs::remove_dir_all(&copy).with_context(|| format!("removing {}", copy.display()))?;
    Ok(res)
}

/// Copies `system`'s store of `docs` documents, has a rewrite child
/// replace `writes` of its documents and close it, and returns the
/// copy's size on disk. The copy is removed.
fn rewrite_round(
    exe: &Path,
    size_dir: &Path,
    system: System,
    docs: u64,
    writes: u64,
) -> anyhow::Result<u64> {
    let copy = copy_store(size_dir, system, "rewritten")?;
    run_child(
        exe,
        &[
            "rewrite",
            "--system",
            system.arg(),
            "--dir",
            path_arg(&copy)?,
            "--docs",
            &docs.to_string(),
            "--writes",
            &writes.to_string(),
        ],
    )?;
    let bytes = dir_size(&copy)?;
    std::fs::remove_dir_all(&copy).with_context(|| format!("removing {}", copy.display()))?;
    Ok(bytes)
}

/// Runs this binary with `args` and parses the JSON line it prints last.
/// The child's stderr goes to ours.
fn run_child(exe: &Path, args: &[&str]) -> anyhow::Result<Value> {
    let out = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("starting {}", exe.display()))?;
    if !out.status.success() {
        bail!("the child `{}` failed: {}", args.join(" "), out.status);
    }
    let stdout = String::from_utf8(out.stdout).context("the child's output is not UTF-8")?;
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .with_context(|| format!("the child `{}` printed nothing", args.join(" ")))?;
    serde_json::from_str(line).with_context(|| format!("the child printed {line:?}"))
}

fn path_arg(path: &Path) -> anyhow::Result<&str> {
    path.to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))
}

/// The bytes of every file under `dir`.
fn dir_size(dir: &Path) -> anyhow::Result<u64> {
    let mut res = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        res += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(res)
}

/// Reads every file under `dir`, so the next child finds the store in the
/// OS page cache whatever ran since the build.
fn warm_page_cache(dir: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            warm_page_cache(&path)?;
        } else {
            let mut file = std::fs::File::open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            std::io::copy(&mut file, &mut std::io::sink())
                .with_context(|| format!("reading {}", path.display()))?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The documents.
// ---------------------------------------------------------------------------

/// Document `i`: ~210 bytes of JSON in partition `p{i % 1000}`; the
/// [`GROUP`] documents of one `g` are in as many partitions.
fn document(i: u64) -> Value {
    json!({
        "id": format!("d{i}"),
        "pk": partition_key(i),
        "n": i,
        "g": i / GROUP,
        "type": "reading",
        "name": format!("sensor {:05}", i % 50_000),
        "score": (i % 997) as f64 / 10.0,
        "active": !i.is_multiple_of(3),
        "tags": ["blue", format!("t{}", i % 17)],
        "note": "a steady reading, nothing unusual here, kept for the monthly report",
    })
}

fn partition_key(i: u64) -> String {
    format!("p{}", i % PARTITIONS)
}

// ---------------------------------------------------------------------------
// Build children.
// ---------------------------------------------------------------------------

/// Imports the documents into a new durable store in `dir`; the time
/// includes closing it (the final fold into the documents table).
fn build_partita(dir: &Path, docs: u64, policy: Option<IndexingPolicy>) -> anyhow::Result<Value> {
    let started = Instant::now();
    let options = Options {
        cache_bytes: BUILD_CACHE_BYTES,
        ..Options::default()
    };
    let db = Database::open_with(dir, options)?;
    let mut props = ContainerProperties::new(CONTAINER, "/pk");
    if let Some(policy) = policy {
        props = props.with_indexing_policy(policy);
    }
    let container = db.create_container_with(props)?;
    let report = container.import_items(
        (0..docs).map(document),
        &ImportOptions::default(),
        &mut |_| {},
    )?;
    ensure!(
        report.documents == docs,
        "imported {} documents of {docs}",
        report.documents
    );
    drop(container);
    drop(db);
    Ok(build_result(docs, report.bytes, started.elapsed()))
}

/// The indexing policy of `--partita-indexing queried`: a range index of
/// `/n` and `/g` only, as SQLite's [`SQLITE_INDEXES`].
fn queried_policy() -> anyhow::Result<IndexingPolicy> {
    Ok(IndexingPolicy::from_json(&json!({
        "indexingMode": "consistent",
        "includedPaths": [{"path": "/n/?"}, {"path": "/g/?"}],
        "excludedPaths": [{"path": "/*"}],
    }))?)
}

/// Inserts the documents into a new SQLite database in `dir`, in
/// transactions of [`SQLITE_BATCH`] rows, then creates
/// [`SQLITE_INDEXES`]; the time includes closing it (SQLite's final
/// checkpoint).
fn build_sqlite(dir: &Path, docs: u64) -> anyhow::Result<Value> {
    let started = Instant::now();
    let mut conn = Connection::open(dir.join(SQLITE_FILE))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch(SQLITE_SCHEMA)?;
    let mut bytes = 0u64;
    let mut start = 0;
    while start < docs {
        let end = (start + SQLITE_BATCH).min(docs);
        let tx = conn.transaction()?;
        {
            let mut insert =
                tx.prepare_cached("INSERT INTO docs (pk, id, body) VALUES (?1, ?2, ?3)")?;
            for i in start..end {
                let body = document(i).to_string();
                bytes += body.len() as u64;
                insert.execute(params![partition_key(i), format!("d{i}"), body])?;
            }
        }
        tx.commit()?;
        start = end;
    }
    conn.execute_batch(SQLITE_INDEXES)?;
    conn.close().map_err(|(_, e)| e)?;
    Ok(build_result(docs, bytes, started.elapsed()))
}

fn build_result(docs: u64, bytes: u64, elapsed: Duration) -> Value {
    let memory = Memory::now();
    json!({
        "seconds": elapsed.as_secs_f64(),
        "docs_per_s": docs as f64 / elapsed.as_secs_f64().max(1e-9),
        "json_bytes": bytes,
        "hwm_mb": memory.hwm_mb,
    })
}

// ---------------------------------------------------------------------------
// Measuring children.
// ---------------------------------------------------------------------------

/// A document to read: its partition key, id and `n`.
struct Key {
    pk: String,
    id: String,
    n: u64,
}

impl Key {
    fn new(i: u64) -> Key {
        Key {
            pk: partition_key(i),
            id: format!("d{i}"),
            n: i,
        }
    }
}

/// What a measuring child reads, drawn from its seed before the store is
/// opened, so building keys is never timed and both systems of a round
/// read the same documents.
struct ReadPlan {
    docs: u64,
    first: Key,
    /// Untimed reads of the hot set before the timed ones.
    hot_warm_up: Vec<Key>,
    /// Documents of the first [`HOT_PARTITIONS`] partitions, at random.
    hot: Vec<Key>,
    /// Documents at random, each in a partition read for the first time
    /// (none of the hot ones), so none is in Partita's cache.
    cold: Vec<Key>,
    /// Values of `n` to query for.
    queries: Vec<u64>,
    /// Values of `g` to query for.
    groups: Vec<u64>,
}

impl ReadPlan {
    fn new(docs: u64, seed: u64, reads: usize, query_runs: usize) -> ReadPlan {
        let mut rng = SplitMix64(seed);
        // Document `k` of partition `p`, with `k` below the partition's count.
        let in_partition = |rng: &mut SplitMix64, p: u64| {
            let count = (docs - p).div_ceil(PARTITIONS);
            Key::new(rng.below(count) * PARTITIONS + p)
        };
        let first = Key::new(rng.below(docs));
        let hot_warm_up = (0..reads / 10)
            .map(|_| {
                let p = rng.below(HOT_PARTITIONS);
                in_partition(&mut rng, p)
            })
            .collect();
        let hot = (0..reads)
            .map(|_| {
                let p = rng.below(HOT_PARTITIONS);
                in_partition(&mut rng, p)
            })
            .collect();
        // The partitions past the hot ones in a random order (Fisher-Yates),
        // as many as there are reads.
        let mut order: Vec<u64> = (HOT_PARTITIONS..PARTITIONS).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let cold = order
            .into_iter()
            .take(reads)
            .map(|p| in_partition(&mut rng, p))
            .collect();
        let queries = (0..query_runs).map(|_| rng.below(docs)).collect();
        let groups = (0..query_runs)
            .map(|_| rng.below(docs.div_ceil(GROUP)))
            .collect();
        ReadPlan {
            docs,
            first,
            hot_warm_up,
            hot,
            cold,
            queries,
            groups,
        }
    }

    /// The parameter of each run of `query` (`None`: it has none).
    fn args(&self, query: &Query) -> Vec<Option<u64>> {
        match query.ask {
            Ask::N => self.queries.iter().copied().map(Some).collect(),
            Ask::G | Ask::GroupFrom => self.groups.iter().copied().map(Some).collect(),
            Ask::Top => vec![None; self.queries.len()],
        }
    }

    /// The ids `query` must return with `arg`, in order for an ORDER BY
    /// and sorted otherwise.
    fn expected(&self, query: &Query, arg: Option<u64>) -> Vec<String> {
        let range = match (query.ask, arg) {
            (Ask::N, Some(n)) => n..n + 1,
            (Ask::G, Some(g)) => g * GROUP..((g + 1) * GROUP).min(self.docs),
            (Ask::GroupFrom, Some(g)) => {
                (g * GROUP + GROUP / 2).min(self.docs)..((g + 1) * GROUP).min(self.docs)
            }
            _ => self.docs.saturating_sub(10)..self.docs,
        };
        let mut ids: Vec<String> = range.map(|i| format!("d{i}")).collect();
        if query.ask == Ask::Top {
            ids.reverse();
        } else {
            ids.sort_unstable();
        }
        ids
    }
}

/// Every run of every query: each run timed by `run` (which returns its
/// time and the ids of the documents it returned, in order), its ids
/// checked after the timing.
struct QueryRuns {
    /// Per query key, the time of each run.
    times: Vec<(&'static str, Vec<Duration>)>,
    /// Per query key, the ids of every run, one run after another (sorted
    /// within a run unless the query orders), for the parent to compare.
    ids: Map<String, Value>,
}

impl QueryRuns {
    fn run(
        plan: &ReadPlan,
        mut run: impl FnMut(&Query, Option<u64>) -> anyhow::Result<(Duration, Vec<String>)>,
    ) -> anyhow::Result<QueryRuns> {
        let mut times = Vec::new();
        let mut ids = Map::new();
        for query in &QUERIES {
            let mut spent = Vec::new();
            let mut returned = Vec::new();
            for arg in plan.args(query) {
                let (time, mut got) = run(query, arg)?;
                spent.push(time);
                if query.ask != Ask::Top {
                    got.sort_unstable();
                }
                let want = plan.expected(query, arg);
                ensure!(
                    got == want,
                    "{} with {arg:?} returned {} documents, {:?}…, expected {:?}…",
                    query.key,
                    got.len(),
                    got.first(),
                    want.first()
                );
                returned.extend(got.into_iter().map(Value::from));
            }
            times.push((query.key, spent));
            ids.insert(query.key.to_owned(), Value::Array(returned));
        }
        Ok(QueryRuns { times, ids })
    }
}

/// The figures a measuring child prints.
struct Measured {
    open: Duration,
    first_read: Duration,
    after_open: Memory,
    hot: Vec<Duration>,
    cold: Vec<Duration>,
    queries: QueryRuns,
    /// How each side answered the queries: Partita's index entries and
    /// documents read, SQLite's plans.
    answered: Value,
    after_workload: Memory,
    /// Closing the store (dropping the database or connection).
    close: Duration,
    /// Partita's estimate of its partition cache at the end.
    cache_bytes: Option<usize>,
}

impl Measured {
    fn to_json(&self) -> Value {
        let mut hot = self.hot.clone();
        let mut cold = self.cold.clone();
        let ms = |d: &Duration| d.as_secs_f64() * 1e3;
        let mut res = json!({
            "open_ms": ms(&(self.open + self.first_read)),
            "open_only_ms": ms(&self.open),
            "first_read_ms": ms(&self.first_read),
            "rss_open_mb": self.after_open.rss_mb,
            "hwm_open_mb": self.after_open.hwm_mb,
            "rss_end_mb": self.after_workload.rss_mb,
            "hwm_end_mb": self.after_workload.hwm_mb,
            "hot_p50_us": percentile_us(&mut hot, 0.5),
            "hot_p99_us": percentile_us(&mut hot, 0.99),
            "cold_p50_us": percentile_us(&mut cold, 0.5),
            "cold_p99_us": percentile_us(&mut cold, 0.99),
            "close_ms": ms(&self.close),
            "cache_mb": self.cache_bytes.map(|b| b as f64 / 1e6),
            "ids": self.queries.ids,
            "answered": self.answered,
        });
        for (key, times) in &self.queries.times {
            let later = times.iter().skip(usize::from(times.len() > 1));
            res[format!("{key}_first_ms")] = json!(times.first().map(ms));
            res[format!("{key}_ms")] = json!(median(later.map(ms).collect()));
            res[format!("{key}_runs_ms")] = json!(times.iter().map(ms).collect::<Vec<_>>());
        }
        res
    }
}

/// Times `read` on each key, checking each result after its timing.
fn time_reads<T>(
    keys: &[Key],
    mut read: impl FnMut(&Key) -> anyhow::Result<T>,
    check: impl Fn(&Key, &T) -> bool,
) -> anyhow::Result<Vec<Duration>> {
    let mut res = Vec::with_capacity(keys.len());
    for key in keys {
        let started = Instant::now();
        let doc = read(key)?;
        res.push(started.elapsed());
        ensure!(
            check(key, &doc),
            "read {}/{}: another document",
            key.pk,
            key.id
        );
    }
    Ok(res)
}

fn measure_partita(
    dir: &Path,
    plan: &ReadPlan,
    cache_bytes: Option<usize>,
) -> anyhow::Result<Value> {
    let mut options = Options::default();
    if let Some(bytes) = cache_bytes {
        options.cache_bytes = bytes;
    }
    let started = Instant::now();
    let db = Database::open_with(dir, options)?;
    let container = db.container(CONTAINER)?;
    let open = started.elapsed();
    let read = |key: &Key| -> anyhow::Result<partita::Document> {
        Ok(container.read_item(key.pk.as_str(), &key.id)?)
    };
    let check = |key: &Key, doc: &partita::Document| doc.value()["n"] == key.n;
    let first_read = time_reads(std::slice::from_ref(&plan.first), read, check)?[0];
    let after_open = Memory::now();

    time_reads(&plan.hot_warm_up, read, check)?;
    let hot = time_reads(&plan.hot, read, check)?;
    let cold = time_reads(&plan.cold, read, check)?;
    let mut answered = Map::new();
    let queries = QueryRuns::run(plan, |query, arg| {
        let mut params = Params::new();
        for (name, value) in query.ask.params(arg) {
            params.insert(name.to_owned(), json!(value));
        }
        let started = Instant::now();
        let page = container.query_items(query.partita, &params, &QueryOptions::default())?;
        let time = started.elapsed();
        ensure!(
            page.continuation.is_none(),
            "{}: more than one page",
            query.partita
        );
        // A plan change is loud: a scan here would measure something else.
        ensure!(
            page.stats.index_used,
            "Partita answered {} without its range index",
            query.partita
        );
        answered.entry(query.key).or_insert_with(|| {
            json!({
                "index_entries": page.stats.index_entries,
                "docs_scanned": page.stats.docs_scanned,
            })
        });
        let ids = page
            .items
            .iter()
            .map(|d| d["id"].as_str().unwrap_or_default().to_owned())
            .collect();
        Ok((time, ids))
    })?;
    let after_workload = Memory::now();
    let cache_bytes = Some(db.cache_stats().used);
    drop(container);
    let started = Instant::now();
    drop(db);
    let close = started.elapsed();
    let res = Measured {
        open,
        first_read,
        after_open,
        hot,
        cold,
        queries,
        answered: Value::Object(answered),
        after_workload,
        close,
        cache_bytes,
    };
    Ok(res.to_json())
}

// ---------------------------------------------------------------------------
// Crash children.
// ---------------------------------------------------------------------------

/// Threads of a Partita crash-write child.
const CRASH_WRITERS: u64 = 16;

/// The document the `k`-th write of a crash-write child writes, in one of
/// the [`HOT_PARTITIONS`]: a new one for even `k`, for odd `k` a
/// replacement of an existing one (the same fields but `score`; a new one
/// past the end of a small store). Few partitions, so that the writes
/// measure commits and not partitions read from storage (at 10,000,000
/// documents one is 10,000 documents, and writes going round all 1,000
/// of them would read one back from storage for every write).
fn crash_document(docs: u64, k: u64) -> Value {
    let i = crash_index(docs, k);
    let mut doc = document(i);
    doc["score"] = json!(-1.0);
    doc
}

/// The document number of the `k`-th crash write (see [`crash_document`]):
/// document `i` is in partition `i % PARTITIONS`, and new ones start past
/// the store's last.
fn crash_index(docs: u64, k: u64) -> u64 {
    let j = k / 2;
    let i = j / HOT_PARTITIONS * PARTITIONS + j % HOT_PARTITIONS;
    if k.is_multiple_of(2) {
        docs.div_ceil(PARTITIONS) * PARTITIONS + i
    } else {
        i
    }
}

/// The `n` of the last new document of `writes` crash writes.
fn last_crash_write(docs: u64, writes: u64) -> anyhow::Result<u64> {
    ensure!(writes > 0, "no writes to read back");
    Ok(crash_index(docs, (writes - 1) / 2 * 2))
}

/// Runs `write(k)` for every `k` below `writes` from [`CRASH_WRITERS`]
/// threads, each taking every so many `k`, so group commit gathers them.
fn write_from_threads(
    writes: u64,
    write: impl Fn(u64) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<()> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CRASH_WRITERS)
            .map(|first| {
                let write = &write;
                scope.spawn(move || -> anyhow::Result<()> {
                    for k in (first..writes).step_by(CRASH_WRITERS as usize) {
                        write(k)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for handle in handles {
            handle
                .join()
                .map_err(|_| anyhow::anyhow!("a writer panicked"))??;
        }
        Ok(())
    })
}

fn crash_write_partita(dir: &Path, docs: u64, writes: u64) -> anyhow::Result<()> {
    let db = Database::open(dir)?;
    let container = db.container(CONTAINER)?;
    write_from_threads(writes, |k| {
        let doc = crash_document(docs, k);
        let pk = doc["pk"].as_str().unwrap_or_default().to_owned();
        container.upsert_item(pk.as_str(), doc, None)?;
        Ok(())
    })?;
    // Not dropped: the process is killed with the store open.
    std::mem::forget(container);
    std::mem::forget(db);
    Ok(())
}

/// The `k`-th replacement of a rewrite child: an existing document of the
/// [`HOT_PARTITIONS`], round and round through them, its `score` set to
/// `k` (so every write changes it).
fn rewrite_document(docs: u64, k: u64) -> Value {
    let per_partition = (docs / PARTITIONS).max(1);
    let j = k % (HOT_PARTITIONS * per_partition);
    let mut doc = document(j / HOT_PARTITIONS * PARTITIONS + j % HOT_PARTITIONS);
    doc["score"] = json!(k);
    doc
}

fn rewrite_partita(dir: &Path, docs: u64, writes: u64) -> anyhow::Result<()> {
    let db = Database::open(dir)?;
    let container = db.container(CONTAINER)?;
    write_from_threads(writes, |k| {
        let doc = rewrite_document(docs, k);
        let pk = doc["pk"].as_str().unwrap_or_default().to_owned();
        let id = doc["id"].as_str().unwrap_or_default().to_owned();
        container.replace_item(pk.as_str(), &id, doc, None)?;
        Ok(())
    })?;
    drop(container);
    drop(db);
    Ok(())
}

fn rewrite_sqlite(dir: &Path, docs: u64, writes: u64) -> anyhow::Result<()> {
    let conn = Connection::open(dir.join(SQLITE_FILE))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    {
        let mut replace = conn.prepare("UPDATE docs SET body = ?3 WHERE pk = ?1 AND id = ?2")?;
        for k in 0..writes {
            let doc = rewrite_document(docs, k);
            let changed = replace.execute(params![
                doc["pk"].as_str(),
                doc["id"].as_str(),
                doc.to_string()
            ])?;
            ensure!(changed == 1, "{} is not in the store", doc["id"]);
        }
    }
    conn.close().map_err(|(_, e)| e)?;
    Ok(())
}

fn crash_write_sqlite(dir: &Path, docs: u64, writes: u64) -> anyhow::Result<()> {
    let conn = Connection::open(dir.join(SQLITE_FILE))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    let mut upsert =
        conn.prepare("INSERT OR REPLACE INTO docs (pk, id, body) VALUES (?1, ?2, ?3)")?;
    for k in 0..writes {
        let doc = crash_document(docs, k);
        upsert.execute(params![
            doc["pk"].as_str(),
            doc["id"].as_str(),
            doc.to_string()
        ])?;
    }
    std::mem::forget(upsert);
    std::mem::forget(conn);
    Ok(())
}

fn crash_open_partita(dir: &Path, docs: u64, writes: u64) -> anyhow::Result<Value> {
    let last = last_crash_write(docs, writes)?;
    let started = Instant::now();
    let db = Database::open(dir)?;
    let container = db.container(CONTAINER)?;
    let doc = container.read_item(partition_key(last).as_str(), &format!("d{last}"))?;
    let open = started.elapsed();
    ensure!(doc.value()["n"] == last, "read {} for d{last}", doc.value());
    Ok(json!({ "open_ms": open.as_secs_f64() * 1e3 }))
}

fn crash_open_sqlite(dir: &Path, docs: u64, writes: u64) -> anyhow::Result<Value> {
    let last = last_crash_write(docs, writes)?;
    let started = Instant::now();
    let conn = Connection::open(dir.join(SQLITE_FILE))?;
    let body: String = conn.query_row(
        SQLITE_READ,
        params![partition_key(last), format!("d{last}")],
        |r| r.get(0),
    )?;
    let open = started.elapsed();
    ensure!(
        body.contains(&format!("\"id\":\"d{last}\",")),
        "read {body} for d{last}"
    );
    Ok(json!({ "open_ms": open.as_secs_f64() * 1e3 }))
}

fn measure_sqlite(dir: &Path, plan: &ReadPlan) -> anyhow::Result<Value> {
    let path = dir.join(SQLITE_FILE);
    ensure!(path.is_file(), "no database at {}", path.display());
    let started = Instant::now();
    let conn = Connection::open(&path)?;
    let open = started.elapsed();
    let read = |key: &Key| {
        let body: Option<String> = conn
            .prepare_cached(SQLITE_READ)?
            .query_row(params![key.pk, key.id], |r| r.get(0))
            .optional()?;
        body.with_context(|| format!("{}/{} not found", key.pk, key.id))
    };
    // The body is JSON text, left unparsed as a SQLite user would get it;
    // `"id":"d{i}",` is in it exactly when it is the document asked for.
    let check = |key: &Key, body: &String| body.contains(&format!("\"id\":\"{}\",", key.id));
    let first_read = time_reads(std::slice::from_ref(&plan.first), read, check)?[0];
    let after_open = Memory::now();

    time_reads(&plan.hot_warm_up, read, check)?;
    let hot = time_reads(&plan.hot, read, check)?;
    let cold = time_reads(&plan.cold, read, check)?;
    let mut answered = Map::new();
    for query in &QUERIES {
        answered.insert(query.key.to_owned(), json!(sqlite_plan(&conn, query)?));
    }
    let queries = QueryRuns::run(plan, |query, arg| {
        let started = Instant::now();
        let mut stmt = conn.prepare_cached(query.sqlite)?;
        let bodies: Vec<String> = stmt
            .query_map(
                params_from_iter(query.ask.params(arg).into_iter().map(|(_, v)| v as i64)),
                |r| r.get(0),
            )?
            .collect::<Result<_, _>>()?;
        let time = started.elapsed();
        // The bodies are left as SQLite returns them (text) while timed,
        // and parsed here only to check them.
        let ids = bodies
            .iter()
            .map(|b| {
                let doc: Value = serde_json::from_str(b)?;
                Ok(doc["id"].as_str().unwrap_or_default().to_owned())
            })
            .collect::<anyhow::Result<_>>()?;
        Ok((time, ids))
    })?;
    let after_workload = Memory::now();
    let started = Instant::now();
    drop(conn);
    let close = started.elapsed();
    let res = Measured {
        open,
        first_read,
        after_open,
        hot,
        cold,
        queries,
        answered: Value::Object(answered),
        after_workload,
        close,
        cache_bytes: None,
    };
    Ok(res.to_json())
}

/// SQLite's plan for `query` (`EXPLAIN QUERY PLAN`, its steps joined by
/// "; "), which must use the query's index and no temporary B-tree: a
/// plan change fails the run instead of measuring a scan or a sort.
fn sqlite_plan(conn: &Connection, query: &Query) -> anyhow::Result<String> {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {}", query.sqlite))?;
    // The plan does not depend on the parameter's value.
    let args = vec![0i64; stmt.parameter_count()];
    let steps: Vec<String> = stmt
        .query_map(params_from_iter(args), |r| r.get::<_, String>(3))?
        .collect::<Result<_, _>>()?;
    let plan = steps.join("; ");
    ensure!(
        plan.contains(&format!("USING INDEX {}", query.sqlite_index))
            && !plan.contains("TEMP B-TREE"),
        "SQLite's plan for {} does not use the index {}: {plan}",
        query.sqlite,
        query.sqlite_index
    );
    Ok(plan)
}

/// This process's resident memory, from /proc/self/status.
#[derive(Clone, Copy)]
struct Memory {
    /// VmRSS: resident now, MB.
    rss_mb: f64,
    /// VmHWM: the most ever resident, MB.
    hwm_mb: f64,
}

impl Memory {
    fn now() -> Memory {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<f64>()
                        .ok()
                })
                .map_or(f64::NAN, |kb| kb * 1024.0 / 1e6)
        };
        Memory {
            rss_mb: field("VmRSS:"),
            hwm_mb: field("VmHWM:"),
        }
    }
}

/// A small, seeded generator (SplitMix64): the same reads on every run
/// with the same seed, and no dependency for it.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound` > 0; the modulo bias is far below
    /// anything measured here).
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

// ---------------------------------------------------------------------------
// Statistics and the report.
// ---------------------------------------------------------------------------

fn percentile_us(latencies: &mut [Duration], q: f64) -> f64 {
    latencies.sort_unstable();
    if latencies.is_empty() {
        return f64::NAN;
    }
    let i = ((latencies.len() - 1) as f64 * q).round() as usize;
    latencies[i].as_secs_f64() * 1e6
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_unstable_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    })
}

/// The run's circumstances, printed above the table.
struct Header {
    /// When the run started.
    date: String,
    cores: usize,
    kernel: String,
    cpu: String,
    load_before: String,
    load_after: String,
    elapsed: Duration,
    rounds: usize,
    reads: usize,
    query_runs: usize,
    /// The stores compared ([`System::pair`]).
    systems: [System; 2],
    /// `--crash-writes`.
    crash_writes: u64,
    /// `--rewrites`.
    rewrites: u64,
}

fn table(header: &Header, sizes: &[SizeReport]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}; machine: {} logical cores (nproc), {}, Linux {}; load average {} before, {} after ({:.0} s)",
        header.date,
        header.cores,
        header.cpu,
        header.kernel,
        header.load_before,
        header.load_after,
        header.elapsed.as_secs_f64()
    );
    for system in header.systems {
        let _ = writeln!(out, "- {}: {}", system.name(), system.settings());
    }
    let reused: Vec<String> = sizes
        .iter()
        .flat_map(|s| {
            s.systems
                .iter()
                .filter(|r| r.build["reused"] == true)
                .map(move |r| format!("{} {}", r.system.name(), s.docs))
        })
        .collect();
    let _ = writeln!(
        out,
        "- {} documents of ~210 bytes per store over {} logical partitions (key /pk); \
         rounds: {}, each a fresh child process per store, medians shown; build and disk once per store{}",
        sizes
            .iter()
            .map(|s| thousands(s.docs))
            .collect::<Vec<_>>()
            .join(", "),
        thousands(PARTITIONS),
        header.rounds,
        if reused.is_empty() {
            String::new()
        } else {
            format!(" (reused from an earlier run: {})", reused.join(", "))
        }
    );
    let _ = writeln!(
        out,
        "- point reads: {} timed per child, hot = documents of {HOT_PARTITIONS} partitions read over and over \
         (after {} untimed); cold = one read in each of {} other partitions, none read before in that \
         process; OS page cache warm (the store's files are read before each child); query: {} runs per \
         child, the first and the median of the others",
        thousands(header.reads as u64),
        thousands(header.reads as u64 / 10),
        thousands(header.reads.min((PARTITIONS - HOT_PARTITIONS) as usize) as u64),
        header.query_runs
    );
    if header.crash_writes > 0 {
        let _ = writeln!(
            out,
            "- after a crash: a child writes {} documents into a copy of the store (in {HOT_PARTITIONS} \
             partitions, half new, half replacing; Partita's from {CRASH_WRITERS} threads, SQLite's one \
             transaction each), is killed with SIGKILL once all are acknowledged, and another opens the \
             copy and reads the last one",
            thousands(header.crash_writes)
        );
    }
    if header.rewrites > 0 {
        let _ = writeln!(
            out,
            "- after replacements: once per size, a child replaces {} existing documents of a copy of \
             the store (those of {HOT_PARTITIONS} partitions, round and round: at 100,000 documents \
             each 100 times, at 1,000,000 each 10 times; Partita's from {CRASH_WRITERS} threads, \
             SQLite's one transaction each, both durable) and closes it; then the copy's files are measured",
            thousands(header.rewrites)
        );
    }
    // How each side answered, from the first measuring child of the
    // largest size.
    if let Some(size) = sizes.last() {
        let answered =
            |s: &SystemReport, key: &str| s.runs.first().map(|r| r["answered"][key].clone());
        for query in &QUERIES {
            let partita = answered(&size.systems[0], query.key).unwrap_or_default();
            let plan = answered(&size.systems[1], query.key).unwrap_or_default();
            let _ = writeln!(
                out,
                "- query {}: Partita `{}` (at {}: {} index entries, {} documents read), SQLite `{}` (plan: {})",
                query.key,
                query.partita,
                size_label(size.docs),
                partita["index_entries"],
                partita["docs_scanned"],
                query.sqlite,
                plan.as_str().unwrap_or("?")
            );
        }
    }
    let _ = writeln!(out);
    let mut head = "| measure |".to_owned();
    let mut rule = "|---|".to_owned();
    for s in sizes {
        let n = size_label(s.docs);
        let _ = write!(head, " Partita {n} | SQLite {n} | × |");
        rule.push_str("--:|--:|--:|");
    }
    let _ = writeln!(out, "{head}");
    let _ = writeln!(out, "{rule}");
    for metric in METRICS {
        // A figure no child measured (`--crash-writes 0`) has no row.
        if sizes
            .iter()
            .all(|s| s.systems.iter().all(|r| r.median(metric.key).is_none()))
        {
            continue;
        }
        let mut line = format!("| {} |", metric.label);
        for s in sizes {
            let partita = s.systems[0].median(metric.key);
            let sqlite = s.systems[1].median(metric.key);
            let cell = |v: Option<f64>| v.map_or("–".to_owned(), |v| figure(v, metric.format));
            let ratio = match (partita, sqlite) {
                (Some(p), Some(q)) if q > 0.0 => figure(p / q, Format::Plain),
                _ => "–".to_owned(),
            };
            let _ = write!(line, " {} | {} | {ratio} |", cell(partita), cell(sqlite));
        }
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "× is Partita / SQLite (above 1: Partita's figure is larger)."
    );
    out
}

fn to_json(header: &Header, sizes: &[SizeReport]) -> Value {
    let sizes: Vec<Value> = sizes
        .iter()
        .map(|s| {
            let mut systems = Map::new();
            for r in &s.systems {
                let medians: Map<String, Value> = METRICS
                    .iter()
                    .map(|m| (m.key.to_owned(), json!(r.median(m.key))))
                    .collect();
                systems.insert(
                    r.system.arg().to_owned(),
                    json!({
                        "build": r.build,
                        "disk_bytes": r.disk_bytes,
                        "medians": medians,
                        "runs": r.runs,
                    }),
                );
            }
            let ratios: Map<String, Value> = METRICS
                .iter()
                .map(|m| {
                    let ratio = match (s.systems[0].median(m.key), s.systems[1].median(m.key)) {
                        (Some(p), Some(q)) if q > 0.0 => Some(p / q),
                        _ => None,
                    };
                    (m.key.to_owned(), json!(ratio))
                })
                .collect();
            json!({
                "docs": s.docs,
                "systems": systems,
                "ratio_partita_to_sqlite": ratios,
            })
        })
        .collect();
    json!({
        "date": header.date,
        "machine": {
            "logical_cores": header.cores,
            "cpu": header.cpu,
            "kernel": header.kernel,
        },
        "load_average_before": header.load_before,
        "load_average_after": header.load_after,
        "elapsed_s": header.elapsed.as_secs_f64(),
        "rounds": header.rounds,
        "reads_per_child": header.reads,
        "query_runs_per_child": header.query_runs,
        "partitions": PARTITIONS,
        "hot_partitions": HOT_PARTITIONS,
        "queries": QUERIES
            .iter()
            .map(|q| (q.key.to_owned(), json!({"partita": q.partita, "sqlite": q.sqlite})))
            .collect::<Map<String, Value>>(),
        "settings": {
            "partita": header.systems[0].settings(),
            "sqlite": System::Sqlite.settings(),
        },
        "sizes": sizes,
    })
}

/// `85.3k`, `1.20M`, or the number itself below 1,000.
fn count(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", figure(v / 1e6, Format::Plain))
    } else if v >= 1e3 {
        format!("{}k", figure(v / 1e3, Format::Plain))
    } else {
        format!("{v:.0}")
    }
}

/// About three significant digits, two below 1.
fn figure(v: f64, format: Format) -> String {
    match format {
        Format::Count => count(v),
        Format::Plain if v >= 100.0 => format!("{v:.0}"),
        Format::Plain if v >= 10.0 => format!("{v:.1}"),
        Format::Plain if v >= 1.0 || v <= 0.0 => format!("{v:.2}"),
        Format::Plain => {
            let decimals = (1 - v.log10().floor() as i32).clamp(2, 6) as usize;
            format!("{v:.decimals$}")
        }
    }
}

/// A store size as a column title: `100k`, `1M`, `2500`.
fn size_label(docs: u64) -> String {
    if docs.is_multiple_of(1_000_000) {
        format!("{}M", docs / 1_000_000)
    } else if docs.is_multiple_of(1_000) {
        format!("{}k", docs / 1_000)
    } else {
        docs.to_string()
    }
}

/// `1,000,000`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut res = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            res.push(',');
        }
        res.push(c);
    }
    res
}

/// The three load averages of /proc/loadavg.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".to_owned(),
        |l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

/// The time now in UTC, `2026-11-28 14:03 UTC`.
fn utc_now() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02} UTC",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute()
    )
}
