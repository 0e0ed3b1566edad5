//! `partita demo`: the blog workload of `shared/reference/blog-scenario.md`
//! end to end, in its three models, next to the published Cosmos DB figures.
//!
//! For each model V1, V2, V3 in turn (one fresh database each, so only one
//! model is in memory at a time) the demo
//! 1. creates the containers, uploads the procedures and triggers
//!    (JavaScript; `--wasm` for the WebAssembly ones) and wires the change
//!    feed ([`propagate`]);
//! 2. loads the same deterministic blog ([`data::Plan`]: `--users`, 5–50
//!    posts each, up to 25 comments and 100 likes per post) with one
//!    transaction per post partition, and lets the change feed copy what
//!    the model copies;
//! 3. runs each access pattern C1–C4, Q1–Q6 ([`model`]) `--runs` times (the
//!    ones that read every partition fewer times, within a time budget) and
//!    keeps the median latency and request charge ([`charge`]);
//! 4. checks the model's invariants ([`invariants`]), V2 and V3 after a
//!    rename has gone through the change feed.
//!
//! It then prints the table side by side with the published figures (or,
//! with `--json`, the same as JSON) and the invariant lines. Any failed
//! check fails the command.

mod charge;
mod data;
mod invariants;
mod model;
mod propagate;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use partita::Database;
use serde_json::{Value, json};

use data::{Plan, Version};
use model::{Blog, Driver, Language, Pattern, ScriptSet};

/// Options of `partita demo`.
#[derive(Args, Debug, Clone)]
pub(crate) struct DemoArgs {
    /// Users in the blog; each writes 5–50 posts with up to 25 comments and
    /// 100 likes each (the published figures used 100,000).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    users: u32,
    /// Runs of each request per model (fewer for the requests that read
    /// every partition, see --seconds).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Time budget per request and model, in seconds: a request stops
    /// repeating when it is used up (after at least 5 runs).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Seed of the data set and of the requests' arguments.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Loader threads (default: one per CPU).
    #[arg(long)]
    threads: Option<usize>,
    /// Use the WebAssembly procedures and triggers (the Rust guests of
    /// sprocs/samples/rust, built with cargo when missing) instead of
    /// JavaScript.
    #[arg(long)]
    wasm: bool,
    /// With --wasm: read prebuilt create_comment.wasm, create_like.wasm,
    /// update_usernames.wasm and truncate_feed.wasm from DIR instead.
    #[arg(long, value_name = "DIR", requires = "wasm")]
    wasm_dir: Option<std::path::PathBuf>,
    /// Print the table as JSON (for plotting) instead of text.
    #[arg(long)]
    json: bool,
}

/// What one request measured on one model.
#[derive(Clone, Debug)]
struct Measured {
    runs: usize,
    median: Duration,
    /// The median request charge, if every run reported one.
    charge: Option<f64>,
}

/// The partition cache of the demo's temporary data directory: one
/// model's data set takes about 4.9 GB in memory at the default scale.
pub(crate) const CACHE_BYTES: usize = 256 << 20;

/// Where the demo keeps its databases.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Store<'a> {
    /// In memory (`--in-memory`).
    Memory,
    /// Durably under `DIR/v1`, `DIR/v2`, `DIR/v3` (`--data DIR`), with
    /// `--cache-size` if given.
    Dir(&'a Path, Option<usize>),
    /// The default: a temporary data directory, removed at the end,
    /// without fsync (nothing in it outlives the run), under a partition
    /// cache of this many bytes.
    Temporary(usize),
}

/// Runs the demo in `store` and prints its table and checks on stdout.
///
/// # Errors
/// Bad options, `--wasm` when the WebAssembly modules cannot be built or
/// read, a data directory that already holds a demo, any failed request
/// or check.
pub(crate) fn run(store: Store<'_>, args: &DemoArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    ensure!(
        args.seconds.is_finite() && args.seconds > 0.0,
        "--seconds must be a positive number of seconds"
    );
    let language = if args.wasm {
        Language::Wasm
    } else {
        Language::JavaScript
    };
    let scripts = ScriptSet::new(language, args.wasm_dir.as_deref())?;
    let plan = Plan::new(args.users, args.seed);
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, std::num::NonZero::get));
    let show_progress = !args.json && std::io::stderr().is_terminal();
    let budget = Duration::from_secs_f64(args.seconds);

    let mut results: Vec<(Version, Vec<Measured>)> = Vec::new();
    let mut loads = Vec::new();
    let mut checks = Vec::new();
    let temporary = match store {
        Store::Temporary(_) => Some(
            tempfile::Builder::new()
                .prefix("partita-demo-")
                .tempdir()
                .context("creating the demo's temporary data directory")?,
        ),
        _ => None,
    };
    for version in Version::ALL {
        let open = |dir: &Path, cache: Option<usize>, durability| {
            let dir = dir.join(version.name().to_lowercase());
            let mut options = partita::Options {
                durability,
                ..partita::Options::default()
            };
            if let Some(bytes) = cache {
                options.cache_bytes = bytes;
            }
            Database::open_with(&dir, options).with_context(|| format!("opening {}", dir.display()))
        };
        let db = match (store, &temporary) {
            (Store::Dir(dir, cache), _) => open(dir, cache, partita::Durability::Full)?,
            (Store::Temporary(cache), Some(dir)) => {
                open(dir.path(), Some(cache), partita::Durability::None)?
            }
            _ => Database::in_memory(),
        };
        let mut blog = Blog::create(&db, version, &scripts)?;
        let progress = bar(
            show_progress,
            version,
            u64::from(plan.users) + plan.post_documents(),
        );
        let load_started = Instant::now();
        blog.load(&plan, threads, &progress)?;
        loads.push((version, load_started.elapsed()));

        let mut driver = Driver::new(&plan, args.seed);
        let mut measured = Vec::new();
        for pattern in Pattern::ALL {
            progress.set_message(format!("{} {}", pattern.name(), pattern.description()));
            measured.push(measure(
                &blog,
                &mut driver,
                pattern,
                args.runs as usize,
                budget,
            )?);
            if pattern.writes() {
                blog.propagate()?;
            }
        }
        progress.set_message("checking invariants");
        checks.extend(check(&mut blog, &mut driver)?);
        progress.finish_and_clear();
        results.push((version, measured));
        // A model's temporary store (gigabytes at the default scale) goes
        // before the next is loaded, not at the end.
        drop(blog);
        drop(db);
        if let Some(dir) = &temporary {
            let dir = dir.path().join(version.name().to_lowercase());
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
    }

    let peak = peak_memory();
    let report = Report {
        plan: &plan,
        language,
        storage: match store {
            Store::Memory => "in memory".to_owned(),
            Store::Dir(dir, None) => dir.display().to_string(),
            Store::Dir(dir, Some(cache)) => format!("{}, cache {}", dir.display(), mb(cache)),
            Store::Temporary(cache) => {
                format!("a temporary data directory (no fsync), cache {}", mb(cache))
            }
        },
        loads: &loads,
        results: &results,
        checks: &checks,
        seconds: started.elapsed().as_secs_f64(),
        peak_memory: peak,
        runs: args.runs as usize,
        budget,
    };
    let text = if args.json {
        serde_json::to_string_pretty(&report.json())? + "\n"
    } else {
        report.text()
    };
    // A closed pipe (`partita demo | head`) is not an error worth reporting.
    let _ = std::io::stdout().write_all(text.as_bytes());
    Ok(())
}

/// The loading progress bar of one model (hidden when not wanted).
fn bar(show: bool, version: Version, documents: u64) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let progress = ProgressBar::new(documents);
    progress.set_style(
        ProgressStyle::with_template(
            "{prefix} [{bar:30}] {human_pos}/{human_len} documents, {per_sec} {msg}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    progress.set_prefix(format!("{} loading", version.name()));
    progress.enable_steady_tick(Duration::from_millis(200));
    progress
}

/// Runs `pattern` up to `runs` times, stopping early when `budget` is
/// used up (after at least 5 runs), and keeps the medians.
fn measure(
    blog: &Blog,
    driver: &mut Driver,
    pattern: Pattern,
    runs: usize,
    budget: Duration,
) -> anyhow::Result<Measured> {
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(runs);
    let mut charges = Vec::with_capacity(runs);
    while latencies.len() < runs && (latencies.len() < 5 || started.elapsed() < budget) {
        let begin = Instant::now();
        let (charge, answer) = driver
            .run(blog, pattern)
            .with_context(|| format!("{} on {}", pattern.name(), blog.version.name()))?;
        latencies.push(begin.elapsed());
        drop(answer);
        charges.push(charge.units());
    }
    latencies.sort_unstable();
    let charge = charges
        .into_iter()
        .collect::<Option<Vec<f64>>>()
        .map(|mut c| {
            c.sort_unstable_by(f64::total_cmp);
            c[c.len() / 2]
        });
    Ok(Measured {
        runs: latencies.len(),
        median: latencies[latencies.len() / 2],
        charge,
    })
}

/// The model's invariants: V2 and V3 rename a user, let the change feed
/// carry it, and check counts and usernames; V3 also checks its feed.
fn check(blog: &mut Blog, driver: &mut Driver) -> anyhow::Result<Vec<String>> {
    if !blog.version.denormalized() {
        return Ok(Vec::new());
    }
    let name = blog.version.name();
    let user = driver.rename_target();
    let id = data::user_id(user);
    let renamed = format!("renamed{user}");
    blog.users
        .replace_item(id.as_str(), &id, data::user_named(&id, &renamed), None)?;
    blog.propagate()?;
    let mut lines = Vec::new();
    if let Some(feed) = &blog.feed {
        lines.push(format!("{name}: {}", invariants::feed(&blog.posts, feed)?));
    }
    lines.push(format!("{name}: {}", invariants::counts(&blog.posts)?));
    lines.push(format!(
        "{name}: after renaming {id} to {renamed:?} (change feed, updateUsernames): {}",
        invariants::usernames(blog)?
    ));
    Ok(lines)
}

/// `bytes` in whole mebibytes (`256 MiB`).
fn mb(bytes: usize) -> String {
    format!("{} MiB", bytes >> 20)
}

/// The most memory the process has held (Linux), in bytes.
fn peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Everything the demo prints.
struct Report<'a> {
    plan: &'a Plan,
    language: Language,
    storage: String,
    loads: &'a [(Version, Duration)],
    results: &'a [(Version, Vec<Measured>)],
    checks: &'a [String],
    seconds: f64,
    peak_memory: Option<u64>,
    runs: usize,
    budget: Duration,
}

impl Report<'_> {
    fn language_name(&self) -> &'static str {
        match self.language {
            Language::JavaScript => "JavaScript",
            Language::Wasm => "WebAssembly",
        }
    }

    fn text(&self) -> String {
        let mut out = String::new();
        let docs = self.plan.post_documents();
        out += &format!(
            "partita demo: the blog in models V1, V2, V3 with {} users, {} posts, {} posts-container documents per model\n",
            thousands(u64::from(self.plan.users)),
            thousands(self.plan.posts.len() as u64),
            thousands(docs)
        );
        let loads: Vec<String> = self
            .loads
            .iter()
            .map(|(v, d)| format!("{} {:.1} s", v.name(), d.as_secs_f64()))
            .collect();
        out += &format!(
            "{} procedures and triggers, {}; loaded (with the change feed's copies) in {}\n\n",
            self.language_name(),
            self.storage,
            loads.join(", ")
        );
        out += "median latency and request charge per request; published Cosmos DB figures in brackets\n";
        let mut header = format!("{:<34}", "");
        let mut rule = "-".repeat(34);
        for (version, _) in self.results {
            header += &format!(
                "| {:<40}",
                format!("{}  Partita  (Cosmos DB)", version.name())
            );
            rule += &format!("+{}", "-".repeat(41));
        }
        out += header.trim_end();
        out += "\n";
        out += &rule;
        out += "\n";
        for (row, pattern) in Pattern::ALL.iter().enumerate() {
            let mut line = format!("{:<3} {:<30}", pattern.name(), pattern.description());
            for (version, measured) in self.results {
                let m = &measured[row];
                let (ms, ru) = pattern.published(*version);
                let star = if pattern.fans_out(*version) { "*" } else { " " };
                line += &format!(
                    "| {:>9}{star}{:>12} ({:>3} ms {:>7.2} RU) ",
                    latency(m.median),
                    m.charge
                        .map_or_else(|| "n/a RU".to_owned(), |c| format!("{c:.2} RU")),
                    ms,
                    ru
                );
            }
            out += line.trim_end();
            out += "\n";
        }
        let fewer: Vec<String> = Pattern::ALL
            .iter()
            .enumerate()
            .flat_map(|(row, pattern)| {
                self.results.iter().filter_map(move |(version, measured)| {
                    let runs = measured[row].runs;
                    (runs < self.runs)
                        .then(|| format!("{} {} {runs}", pattern.name(), version.name()))
                })
            })
            .collect();
        out += "* reads every partition of posts\n";
        out += &format!("runs per request and model: {}", self.runs);
        if !fewer.is_empty() {
            out += &format!(
                "; fewer where {} s ran out first: {}",
                self.budget.as_secs_f64(),
                fewer.join(", ")
            );
        }
        out += "\nrequest charges: Partita's deterministic formula (README, \"Request charges\"), summed over a request's calls\n\n";
        for line in self.checks {
            out += &format!("ok  {line}\n");
        }
        out += &format!("\ninvariants hold; demo finished in {:.1} s", self.seconds);
        if let Some(peak) = self.peak_memory {
            out += &format!(", peak memory {:.2} GB", peak as f64 / 1e9);
        }
        out += "\n";
        out
    }

    fn json(&self) -> Value {
        let requests: Vec<Value> = Pattern::ALL
            .iter()
            .enumerate()
            .map(|(row, pattern)| {
                let models: serde_json::Map<String, Value> = self
                    .results
                    .iter()
                    .map(|(version, measured)| {
                        let m = &measured[row];
                        let (ms, ru) = pattern.published(*version);
                        (
                            version.name().to_owned(),
                            json!({
                                "runs": m.runs,
                                "reads_every_partition": pattern.fans_out(*version),
                                "median_ms": m.median.as_secs_f64() * 1e3,
                                "request_charge": m.charge,
                                "published": {"ms": ms, "request_charge": ru},
                            }),
                        )
                    })
                    .collect();
                json!({
                    "request": pattern.name(),
                    "description": pattern.description(),
                    "models": models,
                })
            })
            .collect();
        json!({
            "users": self.plan.users,
            "posts": self.plan.posts.len(),
            "posts_container_documents": self.plan.post_documents(),
            "language": self.language_name(),
            "storage": self.storage,
            "load_seconds": self.loads.iter().map(|(v, d)| (v.name().to_owned(), json!(d.as_secs_f64()))).collect::<serde_json::Map<_, _>>(),
            "requests": requests,
            "invariants": self.checks,
            "seconds": self.seconds,
            "peak_memory_bytes": self.peak_memory,
        })
    }
}

/// A duration as µs, ms or s with three significant digits.
fn latency(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.1} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests;
