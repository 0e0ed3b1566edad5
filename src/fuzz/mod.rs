//! Atomicity fuzzing: prove a stored procedure all-or-nothing under faults.
//!
//! Users adopt stored procedures because they are atomic, but the failures
//! that break a procedure's own invariants (an error swallowed in a
//! callback, a second call that never happens) only show up under faults.
//! [`run`] calls a procedure thousands of times on a private copy of the
//! data and injects, per call, one of:
//!
//! * a failure of the k-th host operation (for every k the clean run
//!   reaches) with a status a real service returns (404, 409, 412, 429, 449,
//!   500), either handed to the script's callback or as an abort the script
//!   cannot catch ([`host_api::HostError::abort`]);
//! * an instruction budget that runs out at a chosen point of the call
//!   (between 1 and the instructions a clean run of the same call used);
//! * a crash at commit, before or after the durable write, followed by
//!   reopening the database from its directory;
//!
//! with calls running concurrently (`concurrency` threads) on the same and
//! on different logical partitions. After every call it checks:
//!
//! ```text
//!   pre ──(faulted call)──► post        post ≡ pre   or   post ≡ clean(pre)
//!    └───(clean call, on a scratch copy of pre)──► clean(pre)
//!   invariant(post) == expected          published/recovered state == post (exactly)
//! ```
//!
//! "≡" compares the partition's documents by id, each serialized as JSON
//! byte for byte, except the system properties a second run legitimately
//! assigns differently: `_rid`, `_self`, `_etag` and `_ts` (top-level only).
//! Ids the runtime generates are the same in both runs because the fuzzer
//! seeds the generator per call ([`runtime::seed_generated_ids`]). The state
//! after a commit, and after a crash and reopen, must equal the committed
//! (or, for a crash before the durable write, the previous) state exactly,
//! system properties included. The invariant is a query run on each call's
//! partition, or a Rust closure over its documents, evaluated on an exact
//! copy of the post-call state (so it is exact under concurrency too).
//!
//! Reproduction: call `i` of a run is a function of its own seed `c_i` and
//! the partition's state, and seeds chain (`c_0` = the run's seed, `c_{i+1}
//! = mix(c_i)`), so a run with seed `c_j` and `calls = i - j + 1` replays
//! calls `j..=i` from the seed data. After a violation the fuzzer searches
//! the shortest such window that still fails, sequentially, and reports it.
//!
//! The fuzzer never touches the user's database: it copies the scripts and
//! seed documents into a database in a temporary directory
//! (`Durability::None`: the simulated crashes are in-process, so nothing
//! depends on fsync).
//!
//! Several nodes ([`FuzzConfig::nodes`], the `postgres` feature): the
//! private database is instead a container in a PostgreSQL database that
//! several `Database`s (nodes) open, as `partita serve` processes sharing
//! it would. Each call goes to a node its seed chooses, so the others
//! write other partitions concurrently (with `concurrency` above 1) and
//! read the partition the faulted call left; a crash reopens only the
//! node that crashed. Every check of a partition's state reads it from
//! every node: in a sequential run, after each call, each node must read
//! exactly what the call committed or, when it failed, what it found.
//!
//! Procedures run through the facade's own procedure path (`run_procedure`
//! in `scripts.rs`), so any language the facade runs is fuzzed the same way.
//! A transactional batch ([`FuzzConfig::batch`]) is fuzzed the same way
//! too: its operations run through the engine's own batch path
//! ([`engine::batch::run_in`]) with a fault at each operation (the k-th
//! operation fails with an injected status) or a crash at commit; a batch
//! has no budget to cut short.
//! Today that is JavaScript; a WebAssembly host must end the call (trap)
//! when a host import returns a fatal error, as the JavaScript runtime does.

mod inject;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use engine::storage::SqliteStorage;
use engine::{
    Container, Database, Durability, Options, PartitionKey, QueryItemsOptions, Script, ScriptKind,
    ScriptLanguage, ScriptProperties, Txn,
};
use parking_lot::{Mutex, RwLock};
use runtime::Limits;
use serde_json::{Map, Value, json};

use crate::Error;
use crate::scripts::{attach_udfs, query, run_procedure};
use inject::{CrashPoint, CrashStorage, Delivery, INJECTED_CODES, OpFault, faulty};

/// The container id inside the fuzzer's private database.
const CONTAINER: &str = "fuzz";

/// Calls tried per window length when shrinking a violation, at most.
const SHRINK_WINDOWS: u64 = 48;

/// A small, fast, seedable random generator (splitmix64), handed to
/// parameter generators so that a call is a function of its seed.
#[derive(Clone, Debug)]
pub struct FuzzRng(u64);

impl FuzzRng {
    /// A generator starting at `seed`.
    pub fn new(seed: u64) -> FuzzRng {
        FuzzRng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

/// splitmix64's finalizer.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of the call after the call seeded `seed`.
fn next_seed(seed: u64) -> u64 {
    mix(seed.wrapping_add(0x9E37_79B9_7F4A_7C15))
}

/// Produces a call's parameters from its random generator and partition.
pub type ParamsGenerator = Arc<dyn Fn(&mut FuzzRng, &PartitionKey) -> Vec<Value> + Send + Sync>;

/// Checks a partition's documents; `Err` says what is wrong.
pub type InvariantCheck = Arc<dyn Fn(&PartitionKey, &[Value]) -> Result<(), String> + Send + Sync>;

/// What must hold in every partition after every call.
#[derive(Clone)]
pub enum Invariant {
    /// A query run on the call's partition must return exactly `expect`
    /// (a JSON array of all its results).
    Query {
        /// The SQL text (the container's UDFs are callable).
        sql: String,
        /// The exact result, such as `[0]`.
        expect: Value,
    },
    /// A closure over the partition's documents (with system properties).
    Check(InvariantCheck),
}

impl std::fmt::Debug for Invariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Invariant::Query { sql, expect } => write!(f, "Query({sql:?} == {expect})"),
            Invariant::Check(_) => f.write_str("Check(closure)"),
        }
    }
}

/// Which faults to inject. All on by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultKinds {
    /// Fail the k-th host operation with an error the script receives.
    pub host_errors: bool,
    /// Fail the k-th host operation with an abort the script cannot catch.
    pub host_aborts: bool,
    /// Run out of the instruction budget at a chosen point.
    pub budgets: bool,
    /// Crash at commit (before or after the durable write) and reopen.
    pub crashes: bool,
}

impl Default for FaultKinds {
    fn default() -> FaultKinds {
        FaultKinds {
            host_errors: true,
            host_aborts: true,
            budgets: true,
            crashes: true,
        }
    }
}

/// A fuzzing run: what to call, on what data, and what must hold.
#[derive(Clone)]
pub struct FuzzConfig {
    /// The container's partition-key path, such as `/postId`.
    pub partition_key_path: String,
    /// Scripts to install: the procedure under test and any UDFs it (or the
    /// invariant) uses.
    pub scripts: Vec<ScriptProperties>,
    /// The id of the stored procedure to call (unused for a batch).
    pub procedure: String,
    /// Fuzz a transactional batch instead of a procedure: each call's
    /// parameters (from `params`) are the batch's operations in the SDKs'
    /// JSON (`{"operationType": "Create", "resourceBody": {...}}`).
    pub batch: bool,
    /// Documents loaded before the first call, each into the partition its
    /// key names.
    pub seed_documents: Vec<Value>,
    /// The logical partitions calls go to (chosen at random per call).
    pub partition_keys: Vec<PartitionKey>,
    /// The parameters of each call.
    pub params: ParamsGenerator,
    /// What must hold after every call.
    pub invariant: Invariant,
    /// How many calls to make.
    pub calls: u64,
    /// The run's seed; the report's reproduction names the seed to rerun.
    pub seed: u64,
    /// Threads calling at the same time (1: sequential).
    pub concurrency: usize,
    /// Which faults to inject.
    pub faults: FaultKinds,
    /// Of every 100 calls, how many run without a fault (to move the data
    /// on and to check clean runs too).
    pub clean_percent: u8,
    /// Bounds of each call (budget faults lower `instructions` below this).
    pub limits: Limits,
    /// Search for the shortest reproduction after a violation.
    pub shrink: bool,
    /// Run on several nodes sharing one store instead of a private
    /// directory; `None` (one node) by default. See the module docs.
    pub nodes: Option<FuzzNodes>,
}

/// Several nodes on one PostgreSQL database ([`FuzzConfig::nodes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuzzNodes {
    /// The database (`postgresql://...`). The fuzzer owns its container
    /// `fuzz` there: it deletes and creates it again at the start of each
    /// run and of each replay while shrinking. Needs the facade's
    /// `postgres` feature.
    pub url: String,
    /// How many nodes (`Database`s on the URL) share it, at least 1.
    pub count: usize,
}

impl FuzzConfig {
    /// A configuration with the defaults: 1,000 calls, seed 1, one thread,
    /// every fault kind, 15% clean calls, default limits, shrinking on.
    pub fn new(
        partition_key_path: impl Into<String>,
        procedure: ScriptProperties,
        partition_keys: Vec<PartitionKey>,
        params: ParamsGenerator,
        invariant: Invariant,
    ) -> FuzzConfig {
        FuzzConfig {
            partition_key_path: partition_key_path.into(),
            procedure: procedure.id.clone(),
            batch: false,
            scripts: vec![procedure],
            seed_documents: Vec::new(),
            partition_keys,
            params,
            invariant,
            calls: 1000,
            seed: 1,
            concurrency: 1,
            faults: FaultKinds::default(),
            clean_percent: 15,
            limits: Limits::default(),
            shrink: true,
            nodes: None,
        }
    }
}

impl FuzzConfig {
    /// A configuration that fuzzes a transactional batch: `params` makes
    /// each call's operations. The other defaults are those of
    /// [`FuzzConfig::new`].
    pub fn batch(
        partition_key_path: impl Into<String>,
        partition_keys: Vec<PartitionKey>,
        params: ParamsGenerator,
        invariant: Invariant,
    ) -> FuzzConfig {
        let noop = ScriptProperties::stored_procedure("batch", "function batch() {}");
        FuzzConfig {
            procedure: "(batch)".to_owned(),
            batch: true,
            scripts: Vec::new(),
            ..FuzzConfig::new(partition_key_path, noop, partition_keys, params, invariant)
        }
    }
}

impl std::fmt::Debug for FuzzConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FuzzConfig")
            .field("partition_key_path", &self.partition_key_path)
            .field("procedure", &self.procedure)
            .field("partition_keys", &self.partition_keys)
            .field("invariant", &self.invariant)
            .field("calls", &self.calls)
            .field("seed", &self.seed)
            .field("concurrency", &self.concurrency)
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

impl FuzzConfig {
    /// A configuration for a procedure (`Some(id)`) or a transactional
    /// batch (`None`) of a user's container, with the defaults of
    /// [`FuzzConfig::new`]: the container's partition-key path, the
    /// procedure and the container's user-defined functions, and as seed
    /// documents the current documents of `partition_keys` (without their
    /// system properties). The container is only read.
    ///
    /// # Errors
    /// 404 when there is no such procedure; the engine's error when the
    /// documents cannot be read.
    pub fn for_container(
        container: &crate::Container,
        procedure: Option<&str>,
        partition_keys: Vec<PartitionKey>,
        params: ParamsGenerator,
        invariant: Invariant,
    ) -> Result<FuzzConfig, Error> {
        let properties = |script: &Script| ScriptProperties {
            id: script.id.clone(),
            kind: script.kind,
            language: script.language,
            body: script.body.to_vec(),
            trigger_type: None,
            trigger_operation: None,
            trigger_names: None,
        };
        let udfs: Vec<ScriptProperties> = container
            .list_scripts(ScriptKind::UserDefinedFunction)
            .iter()
            .map(&properties)
            .collect();
        let mut seed_documents = Vec::new();
        for key in &partition_keys {
            let mut options = engine::FeedOptions::default();
            loop {
                let page = container.read_feed(key.clone(), &options)?;
                seed_documents.extend(page.items.into_iter().map(|d| {
                    let mut doc = d.into_value();
                    if let Some(map) = doc.as_object_mut() {
                        for key in ["_rid", "_self", "_etag", "_ts", "_attachments"] {
                            map.remove(key);
                        }
                    }
                    doc
                }));
                match page.continuation {
                    Some(c) => options.continuation = Some(c),
                    None => break,
                }
            }
        }
        let path = container.partition_key_path().as_str();
        let mut config = match procedure {
            Some(id) => {
                let script = container.read_script(ScriptKind::StoredProcedure, id)?;
                FuzzConfig::new(path, properties(&script), partition_keys, params, invariant)
            }
            None => FuzzConfig::batch(path, partition_keys, params, invariant),
        };
        config.scripts.extend(udfs);
        config.seed_documents = seed_documents;
        Ok(config)
    }
}

/// Parameters from templates: each call picks one template (a JSON array)
/// at random and replaces every string `"$pk"` in it by the call's
/// partition-key value and every `"$seed"` by the call's seed in hex (a
/// value unique per call).
pub fn params_from_templates(templates: Vec<Vec<Value>>) -> ParamsGenerator {
    Arc::new(move |rng: &mut FuzzRng, pk: &PartitionKey| {
        if templates.is_empty() {
            return Vec::new();
        }
        let pick = rng.below(templates.len() as u64) as usize;
        let unique = format!("{:016x}", rng.next_u64());
        templates[pick]
            .iter()
            .map(|v| substitute(v, pk, &unique))
            .collect()
    })
}

fn substitute(value: &Value, pk: &PartitionKey, unique: &str) -> Value {
    match value {
        Value::String(s) if s == "$pk" => pk.to_value(),
        Value::String(s) if s == "$seed" => Value::String(unique.to_owned()),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| substitute(v, pk, unique)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute(v, pk, unique)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Why a run could not start (a violation is not an error: it is in the
/// report).
#[derive(Debug, thiserror::Error)]
pub enum FuzzError {
    /// The configuration is unusable (no partitions, no such procedure, a
    /// seed document in no listed partition, ...).
    #[error("bad fuzz configuration: {0}")]
    Config(String),
    /// The engine refused to set the run up (a bad script or document).
    #[error(transparent)]
    Engine(#[from] engine::Error),
    /// The temporary directory could not be created.
    #[error("temporary directory for the fuzz database: {0}")]
    Io(#[from] std::io::Error),
}

impl FuzzError {
    /// The HTTP status Cosmos DB would use for this kind of failure.
    pub fn status(&self) -> u16 {
        match self {
            FuzzError::Config(_) => 400,
            FuzzError::Engine(e) => e.status(),
            FuzzError::Io(_) => 500,
        }
    }
}

/// The fault a call was given.
#[derive(Clone, Copy, Debug)]
enum Fault {
    None,
    Op(OpFault),
    Budget(u64),
    Crash(CrashPoint),
}

impl Fault {
    /// The kind this fault is counted under in [`FuzzReport::faults`].
    fn counted_as(&self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::Op(OpFault {
                delivery: Delivery::Callback,
                ..
            }) => "host_error",
            Fault::Op(OpFault {
                delivery: Delivery::Abort,
                ..
            }) => "host_abort",
            Fault::Budget(_) => "budget",
            Fault::Crash(CrashPoint::BeforeDurableWrite) => "crash_before_durable_write",
            Fault::Crash(CrashPoint::AfterDurableWrite) => "crash_after_durable_write",
        }
    }

    fn describe(&self) -> Value {
        match self {
            Fault::None => json!({"kind": "none"}),
            Fault::Op(f) => json!({
                "kind": match f.delivery { Delivery::Callback => "host_error", Delivery::Abort => "host_abort" },
                "operation": f.op,
                "status": f.code.as_u16(),
            }),
            Fault::Budget(n) => json!({"kind": "budget", "instructions_or_fuel": n}),
            Fault::Crash(CrashPoint::BeforeDurableWrite) => {
                json!({"kind": "crash", "at": "before the durable write"})
            }
            Fault::Crash(CrashPoint::AfterDurableWrite) => {
                json!({"kind": "crash", "at": "after the durable write"})
            }
        }
    }
}

/// A violation: what was wrong after which call.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// The call's index in the run (0-based).
    pub call: u64,
    /// The call's seed.
    pub call_seed: u64,
    /// The call's partition.
    pub partition_key: PartitionKey,
    /// Its parameters.
    pub params: Vec<Value>,
    /// The fault it was given, as JSON.
    pub fault: Value,
    /// `"not_atomic"`, `"invariant"`, `"lost_commit"` or `"crash_recovery"`.
    pub kind: &'static str,
    /// What exactly was wrong.
    pub message: String,
    /// The call's outcome: `"committed"` or the error.
    pub outcome: String,
    /// The partition's documents after the call (system properties removed).
    pub state: Vec<Value>,
}

impl Violation {
    fn to_json(&self) -> Value {
        json!({
            "call": self.call,
            "call_seed": self.call_seed,
            "partition_key": self.partition_key.to_value(),
            "params": self.params,
            "fault": self.fault,
            "kind": self.kind,
            "message": self.message,
            "outcome": self.outcome,
            "state": self.state,
        })
    }
}

/// The shortest sequence found that reproduces a violation: rerun with
/// `seed` and `calls` (sequentially).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reproduction {
    /// The seed to run with.
    pub seed: u64,
    /// How many calls.
    pub calls: u64,
}

/// What a run did and found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FuzzReport {
    /// The procedure.
    pub procedure: String,
    /// The run's seed.
    pub seed: u64,
    /// Calls made.
    pub calls: u64,
    /// Calls that committed.
    pub committed: u64,
    /// Calls that failed (and so must have changed nothing).
    pub failed: u64,
    /// Faults injected, by kind (`host_error`, `host_abort`, `budget`,
    /// `crash_before_durable_write`, `crash_after_durable_write`) and how
    /// many calls ran clean (`none`).
    pub faults: BTreeMap<String, u64>,
    /// Simulated crashes (each followed by a reopen).
    pub crashes: u64,
    /// Fault points reached: `"op 2 (replace)"`, `"instructions"` (`"fuel"`
    /// for WebAssembly),
    /// `"commit"`, with how often a fault was injected there.
    pub fault_points: BTreeMap<String, u64>,
    /// Failed calls by status.
    pub statuses: BTreeMap<u16, u64>,
    /// Threads used.
    pub concurrency: usize,
    /// The first violation, if any.
    pub violation: Option<Violation>,
    /// The shortest reproduction found for it.
    pub reproduction: Option<Reproduction>,
}

impl FuzzReport {
    /// The report as JSON (what `partita fuzz` prints).
    pub fn to_json(&self) -> Value {
        json!({
            "procedure": self.procedure,
            "seed": self.seed,
            "calls": self.calls,
            "committed": self.committed,
            "failed": self.failed,
            "concurrency": self.concurrency,
            "faults": self.faults,
            "faults_injected": self.faults.iter().filter(|(k, _)| *k != "none").map(|(_, v)| v).sum::<u64>(),
            "crashes": self.crashes,
            "fault_points": self.fault_points,
            "statuses": self.statuses.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>(),
            "violations": u64::from(self.violation.is_some()),
            "first_violation": self.violation.as_ref().map(Violation::to_json),
            "reproduction": self.reproduction.map(|r| json!({"seed": r.seed, "calls": r.calls, "concurrency": 1})),
        })
    }
}

/// Runs the fuzzer; see the module docs.
///
/// # Errors
/// [`FuzzError`] when the run cannot be set up. Violations are not errors:
/// they are in [`FuzzReport::violation`].
pub fn run(config: &FuzzConfig) -> Result<FuzzReport, FuzzError> {
    let mut report = run_once(config, config.seed, config.calls, config.concurrency)?;
    if config.shrink
        && let Some(v) = &report.violation
    {
        report.reproduction = shrink(config, v.call)?;
    }
    Ok(report)
}

/// Finds the shortest window of calls ending at `failing` that fails when
/// replayed sequentially from the seed data.
fn shrink(config: &FuzzConfig, failing: u64) -> Result<Option<Reproduction>, FuzzError> {
    let mut seeds = Vec::with_capacity(usize::try_from(failing + 1).unwrap_or(0));
    let mut seed = config.seed;
    for _ in 0..=failing {
        seeds.push(seed);
        seed = next_seed(seed);
    }
    let mut lengths: Vec<u64> = (1..=failing.min(SHRINK_WINDOWS)).collect();
    lengths.push(failing + 1);
    lengths.dedup();
    for calls in lengths {
        let start = failing + 1 - calls;
        let seed = seeds[usize::try_from(start).unwrap_or(0)];
        let replay = run_once(config, seed, calls, 1)?;
        if replay.violation.is_some() {
            return Ok(Some(Reproduction { seed, calls }));
        }
    }
    Ok(None)
}

/// Everything the worker threads share.
struct Shared<'c> {
    config: &'c FuzzConfig,
    place: Place,
    /// The nodes, by number; one unless [`FuzzConfig::nodes`] says more.
    db: RwLock<Vec<Database>>,
    /// (next call index, its seed), handed out in order.
    next: Mutex<(u64, u64)>,
    calls: u64,
    stop: AtomicBool,
    report: Mutex<FuzzReport>,
    /// Per partition: the LSN of the last acknowledged commit and the state
    /// it published, which must survive crashes and reopens exactly.
    expected: Mutex<HashMap<PartitionKey, (u64, Vec<Value>)>>,
    /// Crashes not yet recovered from: (partition, crash point, state
    /// before, state after, the call's description). Several calls can
    /// crash before the first of them reopens.
    crashed: Mutex<Vec<Crash>>,
}

/// A commit that crashed: its partition must recover to `pre` or `post`,
/// as the crash point implies.
struct Crash {
    /// The node whose commit crashed.
    node: usize,
    pk: PartitionKey,
    point: CrashPoint,
    pre: Vec<Value>,
    post: Vec<Value>,
    /// The LSN of the partition's last acknowledged commit at the crash:
    /// on several nodes, another node may commit to it before recovery.
    acknowledged: u64,
    call: Violation,
}

/// Where the run's database lives.
enum Place {
    /// A temporary directory, over SQLite: one node.
    Dir(PathBuf),
    /// The database of [`FuzzNodes::url`].
    #[cfg(feature = "postgres")]
    Url(String),
}

impl Place {
    /// Where `config` runs, given a temporary directory.
    fn of(config: &FuzzConfig, dir: &Path) -> Result<Place, FuzzError> {
        match &config.nodes {
            None => Ok(Place::Dir(dir.to_owned())),
            Some(nodes) if nodes.count == 0 => {
                Err(FuzzError::Config("run on at least one node".into()))
            }
            #[cfg(feature = "postgres")]
            Some(nodes) => Ok(Place::Url(nodes.url.clone())),
            #[cfg(not(feature = "postgres"))]
            Some(_) => Err(FuzzError::Config(
                "several nodes need a PostgreSQL store: build with the postgres feature".into(),
            )),
        }
    }

    /// Opens a node: a `Database` whose commits crash when the committing
    /// thread armed them.
    fn open(&self) -> Result<Database, engine::Error> {
        let storage: Box<dyn engine::storage::Storage> = match self {
            Place::Dir(dir) => Box::new(CrashStorage::new(SqliteStorage::open(
                &dir.join(engine::DATA_FILE),
                Durability::None,
            )?)),
            #[cfg(feature = "postgres")]
            Place::Url(url) => Box::new(CrashStorage::new(
                engine::storage::PostgresStorage::connect(url, Durability::None)?,
            )),
        };
        Database::with_storage(
            storage,
            Options {
                durability: Durability::None,
                // No room: a partition is evicted once no call holds it, so
                // calls also run on partitions read back from storage.
                cache_bytes: 0,
                ..Options::default()
            },
        )
    }
}

fn run_once(
    config: &FuzzConfig,
    seed: u64,
    calls: u64,
    concurrency: usize,
) -> Result<FuzzReport, FuzzError> {
    if config.partition_keys.is_empty() {
        return Err(FuzzError::Config(
            "name at least one partition key to call the procedure in".into(),
        ));
    }
    if !config.batch
        && !config
            .scripts
            .iter()
            .any(|s| s.kind == ScriptKind::StoredProcedure && s.id == config.procedure)
    {
        return Err(FuzzError::Config(format!(
            "the scripts to install include no stored procedure {:?}",
            config.procedure
        )));
    }
    let tmp = tempfile::tempdir()?;
    let place = Place::of(config, tmp.path())?;
    let db = place.open()?;
    if config.nodes.is_some() {
        // The last run's container, on a store that outlives runs.
        match db.delete_container(CONTAINER) {
            Ok(()) | Err(engine::Error::ContainerNotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let container = db.create_container(CONTAINER, &config.partition_key_path)?;
    for script in &config.scripts {
        container.create_script(script.clone())?;
    }
    let mut by_partition: BTreeMap<PartitionKey, Vec<Value>> = BTreeMap::new();
    for doc in &config.seed_documents {
        let pk = container.partition_key_of(doc);
        by_partition.entry(pk).or_default().push(doc.clone());
    }
    for (pk, docs) in by_partition {
        container.transaction(pk, |txn| {
            for doc in &docs {
                txn.create_item(doc.clone())?;
            }
            Ok::<_, engine::Error>(())
        })?;
    }
    let mut expected = HashMap::new();
    for pk in &config.partition_keys {
        expected.insert(pk.clone(), (0, documents(&container, pk)?));
    }
    drop(container);
    let mut nodes = vec![db];
    for _ in 1..config.nodes.as_ref().map_or(1, |n| n.count) {
        nodes.push(place.open()?);
    }
    let shared = Shared {
        config,
        place,
        db: RwLock::new(nodes),
        next: Mutex::new((0, seed)),
        calls,
        stop: AtomicBool::new(false),
        report: Mutex::new(FuzzReport {
            procedure: config.procedure.clone(),
            seed,
            concurrency: concurrency.max(1),
            ..FuzzReport::default()
        }),
        expected: Mutex::new(expected),
        crashed: Mutex::new(Vec::new()),
    };
    let threads = concurrency.max(1);
    let failure: Mutex<Option<FuzzError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            // Script calls run in place on a thread this large.
            std::thread::Builder::new()
                .stack_size(runtime::SCRIPT_THREAD_STACK)
                .spawn_scoped(scope, || {
                    if let Err(e) = worker(&shared) {
                        shared.stop.store(true, Ordering::SeqCst);
                        failure.lock().get_or_insert(e);
                    }
                })
                // What `Scope::spawn` does too.
                .expect("failed to spawn thread");
        }
    });
    if let Some(e) = failure.into_inner() {
        return Err(e);
    }
    // Whatever ran concurrently, each partition must hold exactly what its
    // last acknowledged commit published.
    let mut report = shared.report.into_inner();
    let nodes = shared.db.read();
    for (node, db) in nodes.iter().enumerate() {
        let container = db.container(CONTAINER)?;
        for (pk, (_, state)) in shared.expected.lock().iter() {
            let now = documents(&container, pk)?;
            if &now != state && report.violation.is_none() {
                report.violation = Some(Violation {
                    call: report.calls.saturating_sub(1),
                    call_seed: 0,
                    partition_key: pk.clone(),
                    params: Vec::new(),
                    fault: json!({"kind": "none"}),
                    kind: "lost_commit",
                    message: format!(
                        "at the end of the run the partition{} does not hold what its last acknowledged commit published",
                        on_node(&nodes, node)
                    ),
                    outcome: String::new(),
                    state: now.iter().map(strip).collect(),
                });
            }
        }
    }
    Ok(report)
}

/// " on node n" when there are several nodes, for messages.
fn on_node<T>(nodes: &[T], node: usize) -> String {
    match nodes.len() {
        1 => String::new(),
        _ => format!(" on node {node}"),
    }
}

fn worker(shared: &Shared<'_>) -> Result<(), FuzzError> {
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let (index, seed) = {
            let mut next = shared.next.lock();
            if next.0 >= shared.calls {
                return Ok(());
            }
            let taken = *next;
            *next = (next.0 + 1, next_seed(next.1));
            taken
        };
        let outcome = {
            let nodes = shared.db.read();
            one_call(shared, &nodes, index, seed)?
        };
        let mut violation = outcome.violation;
        if outcome.crashed {
            violation = violation.or(recover(shared)?);
        }
        if let Some(v) = violation {
            shared.stop.store(true, Ordering::SeqCst);
            let mut report = shared.report.lock();
            if report
                .violation
                .as_ref()
                .is_none_or(|old| v.call < old.call)
            {
                report.violation = Some(v);
            }
        }
    }
}

/// After simulated crashes: reopen the nodes that crashed (no call is in
/// flight then) and check that each node reads in each crashed partition
/// its state before the call (a crash before the durable write) or after
/// it (after), and in every other partition what it last acknowledged.
/// Several calls may have crashed before the first of them gets here; the
/// first reopens for all. On several nodes another node may have
/// committed to a crashed partition since the crashed call began: it then
/// may hold what the last acknowledged commit published.
fn recover(shared: &Shared<'_>) -> Result<Option<Violation>, FuzzError> {
    let mut nodes = shared.db.write();
    let crashes = std::mem::take(&mut *shared.crashed.lock());
    if crashes.is_empty() {
        return Ok(None);
    }
    for node in 0..nodes.len() {
        if crashes.iter().any(|c| c.node == node) {
            drop(std::mem::replace(&mut nodes[node], Database::in_memory()));
            nodes[node] = shared.place.open()?;
        }
    }
    shared.report.lock().crashes += 1;
    let mut expected = shared.expected.lock();
    let mut found = None;
    for pk in &shared.config.partition_keys {
        let on_pk: Vec<&Crash> = crashes.iter().filter(|c| &c.pk == pk).collect();
        let crash = on_pk.first().copied();
        let acknowledged = &expected[pk];
        // The states the partition may hold: what each crash in it implies
        // (one node crashes once before recovery, but several nodes may
        // each crash in it), or what it last acknowledged.
        let mut accepted: Vec<&[Value]> = on_pk
            .iter()
            .map(|c| match c.point {
                CrashPoint::BeforeDurableWrite => &c.pre[..],
                CrashPoint::AfterDurableWrite => &c.post[..],
            })
            .collect();
        // On several nodes the last acknowledged state may do instead:
        // another node's commit since a crash (a node that crashed
        // refuses writes, so only another node's), or, for a crash before
        // the durable write, one since the call began (its `pre` is then
        // stale, and the crash wrote nothing).
        let later = nodes.len() > 1
            && on_pk.iter().any(|c| {
                acknowledged.0 > c.acknowledged || c.point == CrashPoint::BeforeDurableWrite
            });
        if on_pk.is_empty() || later {
            accepted.push(&acknowledged.1);
        }
        let mut states = Vec::with_capacity(nodes.len());
        for db in nodes.iter() {
            states.push(documents(&db.container(CONTAINER)?, pk)?);
        }
        for (node, now) in states.iter().enumerate() {
            if accepted.contains(&&now[..]) || found.is_some() {
                continue;
            }
            let base = crash.map_or_else(|| crashes[0].call.clone(), |c| c.call.clone());
            let on = on_node(&nodes, node);
            found = Some(Violation {
                partition_key: pk.clone(),
                kind: "crash_recovery",
                message: match crash {
                    Some(c) => format!(
                        "after a crash {} and a reopen, partition {pk}{on} does not hold the state the crash point implies",
                        match c.point {
                            CrashPoint::BeforeDurableWrite =>
                                "before the durable write (the state before the call)",
                            CrashPoint::AfterDurableWrite =>
                                "after the durable write (the call's committed state)",
                        }
                    ),
                    None => format!(
                        "after a crash in another partition and a reopen, partition {pk}{on} does not hold what it last acknowledged"
                    ),
                },
                state: now.iter().map(strip).collect(),
                ..base
            });
        }
        let now = states.swap_remove(0);
        expected.insert(pk.clone(), (0, now));
    }
    Ok(found)
}

/// What one call found; `crash` asks the worker to reopen the database.
struct CallOutcome {
    violation: Option<Violation>,
    crashed: bool,
}

/// The partition's documents with system properties, in storage order.
fn documents(container: &Container, pk: &PartitionKey) -> Result<Vec<Value>, engine::Error> {
    Ok(container
        .snapshot(pk)?
        .documents()
        .map(|d| d.value().clone())
        .collect())
}

/// A document without the system properties a second run assigns anew.
fn strip(doc: &Value) -> Value {
    let mut doc = doc.clone();
    if let Some(map) = doc.as_object_mut() {
        for key in ["_rid", "_self", "_etag", "_ts"] {
            map.remove(key);
        }
    }
    doc
}

/// The comparable form of a partition: documents by id, each as JSON text
/// without `_rid`, `_self`, `_etag` and `_ts`.
fn comparable(docs: &[Value]) -> BTreeMap<String, String> {
    docs.iter()
        .map(|d| {
            (
                d.get("id").and_then(Value::as_str).unwrap_or("").to_owned(),
                strip(d).to_string(),
            )
        })
        .collect()
}

/// An in-memory copy of one partition (user properties only, in storage
/// order), to run the clean call and the invariant on.
fn scratch(
    config: &FuzzConfig,
    pk: &PartitionKey,
    docs: &[Value],
) -> Result<(Database, Container), engine::Error> {
    let db = Database::in_memory();
    let container = db.create_container(CONTAINER, &config.partition_key_path)?;
    if !docs.is_empty() {
        container.transaction(pk.clone(), |txn| {
            // As a script wrote them: a document without the key property
            // is this partition's.
            for doc in docs {
                txn.create_item_as_script(strip(doc))?;
            }
            Ok::<_, engine::Error>(())
        })?;
    }
    Ok((db, container))
}

/// Checks the invariant on an exact copy of `docs`.
fn check_invariant(
    config: &FuzzConfig,
    source: &Container,
    pk: &PartitionKey,
    docs: &[Value],
) -> Result<(), String> {
    match &config.invariant {
        Invariant::Check(check) => check(pk, docs),
        Invariant::Query { sql, expect } => {
            let (_db, copy) = scratch(config, pk, docs).map_err(|e| e.to_string())?;
            let mut items = Vec::new();
            let mut continuation = None;
            loop {
                let options = QueryItemsOptions {
                    partition_key: Some(pk.clone()),
                    partitions: None,
                    max_item_count: None,
                    continuation,
                };
                let page = query(
                    source,
                    &copy,
                    sql,
                    &engine::query::Params::new(),
                    &options,
                    Some(&config.limits),
                )
                .map_err(|e| format!("the invariant query failed: {e}"))?;
                items.extend(page.items);
                match page.continuation {
                    Some(c) => continuation = Some(c),
                    None => break,
                }
            }
            let got = Value::Array(items);
            if &got == expect {
                Ok(())
            } else {
                Err(format!(
                    "the invariant query returned {got}, expected {expect}"
                ))
            }
        }
    }
}

fn outcome_text<T>(result: &Result<T, Error>) -> String {
    match result {
        Ok(_) => "committed".to_owned(),
        Err(e) => format!("failed with {}: {e}", e.status()),
    }
}

/// One call: the faulted run on the real partition, the clean run of the
/// same call on a copy, and the checks.
fn one_call(
    shared: &Shared<'_>,
    nodes: &[Database],
    index: u64,
    seed: u64,
) -> Result<CallOutcome, FuzzError> {
    let config = shared.config;
    let mut rng = FuzzRng::new(seed);
    let pk = config.partition_keys[rng.below(config.partition_keys.len() as u64) as usize].clone();
    let params = (config.params)(&mut rng, &pk);
    // One node draws nothing, so a one-node run is what it always was.
    let node = match nodes.len() {
        1 => 0,
        n => rng.below(n as u64) as usize,
    };
    let views = nodes
        .iter()
        .map(|db| db.container(CONTAINER))
        .collect::<Result<Vec<_>, _>>()?;
    let container = views[node].clone();
    let script = match config.batch {
        true => None,
        false => Some(container.read_script(ScriptKind::StoredProcedure, &config.procedure)?),
    };
    let mut base = Violation {
        call: index,
        call_seed: seed,
        partition_key: pk.clone(),
        params: params.clone(),
        fault: json!({"kind": "none"}),
        kind: "not_atomic",
        message: String::new(),
        outcome: String::new(),
        state: Vec::new(),
    };

    let mut txn = match container.begin(pk.clone()) {
        Ok(txn) => txn,
        Err(e) => {
            // Another thread's crash left the database refusing writes, or
            // the partition's lock timed out: the call fails before it
            // starts, and nothing can have changed.
            count_failure(shared, e.status());
            return Ok(CallOutcome {
                violation: None,
                crashed: false,
            });
        }
    };
    attach_udfs(&container, &mut txn, &config.limits);
    let call = Call {
        pre: txn_documents(&txn),
        container,
        node,
        views,
        script,
        pk,
        params,
        seed,
    };

    let clean = clean_run(config, &call)?;
    // Choose this call's fault from what the clean run reached.
    let fault = choose_fault(config, &mut rng, clean.ops, clean.budget, clean.ok);
    base.fault = fault.describe();
    let (result, injected) = faulted_run(config, &call, &mut txn, fault);
    record_fault(shared, &call, fault, injected, &result);
    base.outcome = outcome_text(&result);

    let (post, crashed) = match settle(shared, &call, txn, &result, fault, &mut base) {
        Settled::Post { state, crashed } => (state, crashed),
        Settled::Violated(violation) => {
            return Ok(CallOutcome {
                violation: Some(violation),
                crashed: false,
            });
        }
    };
    let violation = check_call(config, &call, &clean.state, &post, &base);
    Ok(CallOutcome { violation, crashed })
}

/// A call as its seed chose it, with the partition as the call found it:
/// what the clean run, the faulted run and the checks share.
struct Call {
    /// The container on the node the call runs on.
    container: Container,
    /// That node's number.
    node: usize,
    /// The container on every node, by number.
    views: Vec<Container>,
    /// The procedure; `None` for a batch.
    script: Option<Script>,
    pk: PartitionKey,
    params: Vec<Value>,
    seed: u64,
    /// The partition's documents when the call began.
    pre: Vec<Value>,
}

/// What the clean run of a call did.
struct CleanRun {
    /// The partition after it: its writes on success, the state before the
    /// call on failure.
    state: Vec<Value>,
    /// The host operations it made: the points a host fault can hit.
    ops: u32,
    /// The budget it used, which a budget fault can cut short.
    budget: u64,
    /// Whether it succeeded.
    ok: bool,
}

/// Where a call's end left its partition.
enum Settled {
    /// What the partition holds now (after a crash at commit, what recovery
    /// must restore), and whether the commit crashed.
    Post { state: Vec<Value>, crashed: bool },
    /// A node reads the partition otherwise than the call left it.
    Violated(Violation),
}

/// What a procedure call returned.
type CallResult = Result<crate::ProcedureResponse, Error>;

/// A transaction's documents as it sees them, its own writes included.
fn txn_documents(txn: &Txn) -> Vec<Value> {
    txn.view().documents().map(|d| d.value().clone()).collect()
}

/// The budget a fault can cut short: instructions for JavaScript, fuel for
/// WebAssembly.
fn budget_used(language: ScriptLanguage, stats: &crate::Statistics) -> u64 {
    match language {
        ScriptLanguage::JavaScript => stats.instructions,
        ScriptLanguage::Wasm => stats.fuel,
    }
}

/// Runs the call without a fault on a copy of the partition as it found
/// it, counting its host operations.
fn clean_run(config: &FuzzConfig, call: &Call) -> Result<CleanRun, FuzzError> {
    let (_scratch_db, copy) = scratch(config, &call.pk, &call.pre)?;
    let mut ctxn = copy.begin(call.pk.clone())?;
    let Some(script) = &call.script else {
        let ops = u32::try_from(call.params.len()).unwrap_or(u32::MAX);
        let ok = run_batch(&mut ctxn, &call.params, None).is_ok();
        let state = if ok {
            txn_documents(&ctxn)
        } else {
            call.pre.clone()
        };
        return Ok(CleanRun {
            state,
            ops,
            budget: 0,
            ok,
        });
    };
    attach_udfs(&call.container, &mut ctxn, &config.limits);
    let mut counting = faulty(&mut ctxn, None);
    runtime::seed_generated_ids(call.seed);
    let result = run_procedure(
        script,
        copy.data_dir(),
        &mut counting,
        call.params.clone(),
        &config.limits,
    );
    let ops = u32::try_from(counting.hooks.ops.len()).unwrap_or(u32::MAX);
    let budget = match &result {
        Ok(r) => budget_used(script.language, &r.stats),
        Err(Error::Script(f)) => budget_used(script.language, &f.stats),
        Err(Error::Engine(_)) => 0,
    };
    let ok = result.is_ok();
    let state = if ok {
        txn_documents(&ctxn)
    } else {
        call.pre.clone()
    };
    Ok(CleanRun {
        state,
        ops,
        budget,
        ok,
    })
}

/// Runs a batch's operations (the call's parameters) in `txn` through the
/// engine's batch path, failing operation `fault.op` (1-based) with its
/// status when given. Its results as a procedure's body, so the rest of
/// the fuzzer treats both alike.
fn run_batch(txn: &mut Txn, params: &[Value], fault: Option<OpFault>) -> CallResult {
    let operations = engine::BatchOperation::list_from_json(&Value::Array(params.to_vec()))?;
    let inject = |i: usize| match fault {
        Some(f) if f.op as usize == i + 1 => Err(host_api::HostError::new(
            f.code,
            format!("batch operation {i} failed (injected {})", f.code.as_u16()),
        )),
        _ => Ok(()),
    };
    match engine::batch::run_in(txn, operations, inject) {
        Ok(results) => {
            let mut stats = crate::Statistics::default();
            for r in &results {
                stats.add(r.stats);
            }
            let body = results
                .iter()
                .map(|r| crate::batch_json::result_json(r, false))
                .collect();
            Ok(crate::ProcedureResponse {
                body: Value::Array(body),
                logs: String::new(),
                stats,
                writes: Vec::new(),
            })
        }
        // The failure as the fuzzer records any call's: its status and
        // message (the host error type carries both).
        Err((_, error)) => Err(Error::Script(Box::new(crate::ScriptFailure {
            error: runtime::Error::Host(error),
            logs: String::new(),
            stats: crate::Statistics::default(),
            operation: None,
        }))),
    }
}

/// Runs the call on the real partition with its fault; returns the result
/// and the operation a host fault failed, if the call got that far.
fn faulted_run(
    config: &FuzzConfig,
    call: &Call,
    txn: &mut Txn,
    fault: Fault,
) -> (CallResult, Option<(u32, &'static str)>) {
    let plan = match fault {
        Fault::Op(f) => Some(f),
        _ => None,
    };
    let Some(script) = &call.script else {
        let result = run_batch(txn, &call.params, plan);
        let injected = plan
            .filter(|f| f.op as usize <= call.params.len())
            .map(|f| (f.op, "batch operation"));
        return (result, injected);
    };
    let limits = match (fault, script.language) {
        (Fault::Budget(n), ScriptLanguage::JavaScript) => Limits {
            instructions: n,
            ..config.limits.clone()
        },
        (Fault::Budget(n), ScriptLanguage::Wasm) => Limits {
            fuel: n,
            accept_fuel: config.limits.accept_fuel.min(n),
            ..config.limits.clone()
        },
        _ => config.limits.clone(),
    };
    let mut faulty = faulty(txn, plan);
    runtime::seed_generated_ids(call.seed);
    let result = run_procedure(
        script,
        call.container.data_dir(),
        &mut faulty,
        call.params.clone(),
        &limits,
    );
    (result, faulty.hooks.injected)
}

/// Counts the call, its fault's kind, and the fault point it reached.
fn record_fault(
    shared: &Shared<'_>,
    call: &Call,
    fault: Fault,
    injected: Option<(u32, &'static str)>,
    result: &CallResult,
) {
    let mut report = shared.report.lock();
    report.calls += 1;
    *report
        .faults
        .entry(fault.counted_as().to_owned())
        .or_default() += 1;
    if let Some((n, name)) = injected {
        *report
            .fault_points
            .entry(format!("op {n} ({name})"))
            .or_default() += 1;
    }
    if let (Fault::Budget(_), Err(Error::Script(f)), Some(script)) = (fault, result, &call.script)
        && matches!(f.error, runtime::Error::Budget(_))
    {
        let point = match script.language {
            ScriptLanguage::JavaScript => "instructions",
            ScriptLanguage::Wasm => "fuel",
        };
        *report.fault_points.entry(point.to_owned()).or_default() += 1;
    }
}

/// Ends the call's transaction: commits it when the call succeeded, with
/// the crash its fault asks for, and drops it when the call failed.
fn settle(
    shared: &Shared<'_>,
    call: &Call,
    txn: Txn,
    result: &CallResult,
    fault: Fault,
    base: &mut Violation,
) -> Settled {
    if let Err(e) = result {
        count_failure(shared, e.status());
        drop(txn);
        return unchanged(shared, call, base);
    }
    let post = txn_documents(&txn);
    let point = match fault {
        Fault::Crash(point) => Some(point),
        _ => None,
    };
    inject::arm_crash(point);
    let committed = txn.commit();
    inject::arm_crash(None);
    match (committed, point) {
        (Ok(lsn), _) => {
            shared.report.lock().committed += 1;
            if let Some(lsn) = lsn {
                let mut expected = shared.expected.lock();
                let entry = expected.entry(call.pk.clone()).or_insert((0, Vec::new()));
                if lsn.0 >= entry.0 {
                    *entry = (lsn.0, post.clone());
                }
            }
            match published_differs(shared, call, &post, "what the call committed", base) {
                Some(violation) => Settled::Violated(Violation {
                    kind: "lost_commit",
                    ..violation
                }),
                None => Settled::Post {
                    state: post,
                    crashed: false,
                },
            }
        }
        (Err(engine::Error::Storage(_)), Some(point)) => Settled::Post {
            state: record_crash(shared, call, point, post, base),
            crashed: true,
        },
        // Refused before the crash point (another call's crash left
        // the database read-only): an ordinary failed commit.
        (Err(e), _) => {
            count_failure(shared, e.status());
            base.outcome = format!("commit failed with {}: {e}", e.status());
            unchanged(shared, call, base)
        }
    }
}

/// A failed call's end: its partition is as the call found it, on every
/// node.
fn unchanged(shared: &Shared<'_>, call: &Call, base: &Violation) -> Settled {
    match published_differs(
        shared,
        call,
        &call.pre,
        "the state before the failed call",
        base,
    ) {
        Some(violation) => Settled::Violated(Violation {
            kind: "not_atomic",
            ..violation
        }),
        None => Settled::Post {
            state: call.pre.clone(),
            crashed: false,
        },
    }
}

/// In a sequential run (concurrent calls move partitions on), the first
/// node that reads the call's partition otherwise than exactly `want`
/// (`what`, for the message), as a violation of the kind the caller sets.
fn published_differs(
    shared: &Shared<'_>,
    call: &Call,
    want: &[Value],
    what: &str,
    base: &Violation,
) -> Option<Violation> {
    if shared.config.concurrency > 1 && shared.calls > 1 {
        return None;
    }
    call.views.iter().enumerate().find_map(|(node, view)| {
        let on = on_node(&call.views, node);
        let (published, message) = match documents(view, &call.pk) {
            Ok(published) => (
                published,
                format!("the published partition{on} differs from {what}"),
            ),
            Err(e) => (
                Vec::new(),
                format!("the published partition{on} cannot be read: {e}"),
            ),
        };
        (published != want).then(|| Violation {
            message,
            state: published.iter().map(strip).collect(),
            ..base.clone()
        })
    })
}

/// Leaves a crash at commit for recovery to check, and returns the state
/// the crash point implies: what the checks after the call compare.
fn record_crash(
    shared: &Shared<'_>,
    call: &Call,
    point: CrashPoint,
    post: Vec<Value>,
    base: &mut Violation,
) -> Vec<Value> {
    *shared
        .report
        .lock()
        .fault_points
        .entry("commit".to_owned())
        .or_default() += 1;
    base.outcome = "crashed at commit".to_owned();
    let acknowledged = shared.expected.lock().get(&call.pk).map_or(0, |e| e.0);
    shared.crashed.lock().push(Crash {
        node: call.node,
        pk: call.pk.clone(),
        acknowledged,
        point,
        pre: call.pre.clone(),
        post: post.clone(),
        call: base.clone(),
    });
    match point {
        CrashPoint::BeforeDurableWrite => call.pre.clone(),
        CrashPoint::AfterDurableWrite => post,
    }
}

/// The checks after a call: its partition is its state before the call or
/// what the clean run produced, and it keeps the invariant.
fn check_call(
    config: &FuzzConfig,
    call: &Call,
    clean: &[Value],
    post: &[Value],
    base: &Violation,
) -> Option<Violation> {
    let post_cmp = comparable(post);
    if post_cmp != comparable(&call.pre) && post_cmp != comparable(clean) {
        Some(Violation {
            kind: "not_atomic",
            message: "the partition after the call is neither its state before the call nor the state a clean run of the same call produces".into(),
            state: post.iter().map(strip).collect(),
            ..base.clone()
        })
    } else if let Err(message) = check_invariant(config, &call.container, &call.pk, post) {
        Some(Violation {
            kind: "invariant",
            message,
            state: post.iter().map(strip).collect(),
            ..base.clone()
        })
    } else {
        None
    }
}

fn count_failure(shared: &Shared<'_>, status: u16) {
    let mut report = shared.report.lock();
    report.failed += 1;
    *report.statuses.entry(status).or_default() += 1;
}

fn choose_fault(
    config: &FuzzConfig,
    rng: &mut FuzzRng,
    ops: u32,
    instructions: u64,
    clean_ok: bool,
) -> Fault {
    let roll = rng.below(100);
    if roll < u64::from(config.clean_percent) {
        return Fault::None;
    }
    let faults = config.faults;
    let mut kinds: Vec<u8> = Vec::with_capacity(4);
    if ops > 0 && faults.host_errors {
        kinds.push(0);
    }
    // A batch has no callbacks: an abort would be the same fault twice.
    if ops > 0 && faults.host_aborts && !config.batch {
        kinds.push(1);
    }
    if instructions > 1 && faults.budgets {
        kinds.push(2);
    }
    if clean_ok && faults.crashes {
        kinds.push(3);
    }
    if kinds.is_empty() {
        return Fault::None;
    }
    match kinds[rng.below(kinds.len() as u64) as usize] {
        kind @ (0 | 1) => Fault::Op(OpFault {
            op: 1 + u32::try_from(rng.below(u64::from(ops))).unwrap_or(0),
            code: INJECTED_CODES[rng.below(INJECTED_CODES.len() as u64) as usize],
            delivery: if kind == 0 {
                Delivery::Callback
            } else {
                Delivery::Abort
            },
        }),
        2 => Fault::Budget(1 + rng.below(instructions - 1)),
        _ => Fault::Crash(if rng.below(2) == 0 {
            CrashPoint::BeforeDurableWrite
        } else {
            CrashPoint::AfterDurableWrite
        }),
    }
}

/// Statuses a real service returns that the fuzzer injects.
pub fn injected_statuses() -> Vec<u16> {
    INJECTED_CODES.iter().map(|c| c.as_u16()).collect()
}
