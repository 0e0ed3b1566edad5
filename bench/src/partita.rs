//! Partita as a target: the native Rust transaction API, JavaScript
//! procedures and triggers, and WebAssembly procedures and triggers, each in
//! memory, relaxed (`Durability::None`) or durable (`Durability::Full`).
//!
//! The data: a `posts` container partitioned by `/postId` (one logical
//! partition per post, as in the blog's V2 model) and a `feed` container
//! partitioned by `/type` (one logical partition, `"post"`, as in V3).
//! createComment is `partita_workload::blog::create_comment` natively,
//! `sprocs/samples/js/createComment.js` in JavaScript, the Rust guest
//! `create_comment.wasm` (built from `sprocs/samples/rust` by
//! [`partita_workload::guest::build`]) in Wasm and the hand-written
//! `sprocs/samples/wat/createComment.wat` in the WAT flavor; truncateFeed is a
//! native transaction or a create with the flavor's truncateFeed
//! post-trigger (`truncateFeed.js`, `truncate_feed.wasm`,
//! `truncateFeed.wat`); the feed read is a query natively and a small
//! readFeed procedure in the script flavors, as JavaScript runs it
//! ([`READ_FEED_JS`] from `bench/src/js/readFeed.js`, `bench/src/wat/readFeed.wat`
//! for both Wasm flavors).
//! The peers run theirs as a script or a query too. The batch flavor is the
//! script-free createComment: one transactional batch of a patch that
//! counts the comment and the comment's create; it has no truncateFeed
//! (that needs the feed's oldest posts, which a batch cannot find) and reads
//! the feed with the native query.
//!
//! Partita's storage is a SQLite file in a temporary directory, or, for the
//! "(PostgreSQL)" targets, a fresh database in the PostgreSQL target's
//! private cluster ([`crate::postgres::PgCluster`]), opened with
//! `Database::open_url`. With several nodes ([`PartitaTarget::on_postgres`]),
//! each node is one more `Database` opened on the same URL after the data
//! is in place (a node reads the catalog when it opens), with its own
//! connections and partition cache, as `partita serve` processes on one
//! database have; callers are dealt to the nodes in turn, and a call that
//! another node beat to its partition (449, `PartitionChanged`) is made
//! again, as the SDKs do.
//!
//! Both containers have the default indexing policy (every path, mode
//! `consistent`), or, for the "(indexing none)" targets
//! ([`Indexing::None`]), `{"indexingMode": "none"}`: the same calls
//! without the range index's entries, which a durable store writes when it
//! folds its change log into its documents (on the committer, so their
//! cost is in the calls' throughput). An in-memory store builds its index
//! when a query first asks it and from then on maintains it in each commit
//! (the feed's, once the feed is read; never the posts' here), so there the
//! rows differ by the feed's writes.
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use partita::{
    BatchOperation, Container, ContainerProperties, Database, IndexingPolicy, Options, Patch,
    QueryOptions, ScriptKind, ScriptProperties, TriggerOperation, TriggerType, WriteOptions,
};
use partita_workload::blog;
use serde_json::{Value, json};

use crate::{
    BenchError, Call, Caller, Durability, FEED_SIZE, Slot, Target, Workload, check_comments,
    check_feed, check_feed_read, feed_post, post_id,
};

/// The feed read (Q6) as a query.
pub const FEED_QUERY: &str = "SELECT TOP 100 * FROM f ORDER BY f.creationDate DESC";

/// The feed read as a JavaScript procedure: the same query, its result as
/// the response body.
pub const READ_FEED_JS: &str = include_str!("js/readFeed.js");

const CREATE_COMMENT_JS: &str = partita_workload::js::CREATE_COMMENT;
const TRUNCATE_FEED_JS: &str = partita_workload::js::TRUNCATE_FEED;
const CREATE_COMMENT_WAT: &str = include_str!("../../sprocs/samples/wat/createComment.wat");
const TRUNCATE_FEED_WAT: &str = include_str!("../../sprocs/samples/wat/truncateFeed.wat");
/// The feed read as a WebAssembly procedure (WAT): the same query, its page
/// (`{"items": [...], "continuation": ...}`) as the response body.
pub const READ_FEED_WAT: &str = include_str!("wat/readFeed.wat");

/// How the workload's procedures run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Rust closures on the transaction API (`partita_workload::blog`).
    Native,
    /// The JavaScript procedures and trigger of `sprocs/samples/js/`.
    JavaScript,
    /// The Rust guests of `sprocs/samples/rust` compiled to WebAssembly.
    Wasm,
    /// The hand-written WebAssembly text modules of `sprocs/samples/wat`.
    Wat,
    /// No script: createComment as one transactional batch.
    Batch,
}

impl Flavor {
    /// The system's name in the report.
    pub fn system(self) -> &'static str {
        match self {
            Flavor::Native => "Partita native",
            Flavor::JavaScript => crate::report::PARTITA_JS,
            Flavor::Wasm => crate::report::PARTITA_WASM,
            Flavor::Wat => PARTITA_WAT,
            Flavor::Batch => PARTITA_BATCH,
        }
    }

    /// Every flavor, in the report's order.
    pub const ALL: [Flavor; 5] = [
        Flavor::Native,
        Flavor::Batch,
        Flavor::JavaScript,
        Flavor::Wasm,
        Flavor::Wat,
    ];
}

/// The indexing mode of a target's containers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexing {
    /// The default policy: every path, mode `consistent`.
    Consistent,
    /// `{"indexingMode": "none"}`: no range index.
    None,
}

impl Indexing {
    /// Both modes, the default first.
    pub const ALL: [Indexing; 2] = [Indexing::Consistent, Indexing::None];

    /// The mode's name, as `--indexing` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Indexing::Consistent => "consistent",
            Indexing::None => "none",
        }
    }

    /// The name in the report of `system` with containers in this mode:
    /// `system` itself for the default.
    fn system(self, system: &str) -> String {
        match self {
            Indexing::Consistent => system.to_owned(),
            Indexing::None => format!("{system} (indexing none)"),
        }
    }

    /// The containers' policy.
    fn policy(self) -> IndexingPolicy {
        match self {
            Indexing::Consistent => IndexingPolicy::default(),
            Indexing::None => IndexingPolicy::from_json(&json!({"indexingMode": "none"}))
                .expect("a valid indexing policy"),
        }
    }
}

/// The system name of the batch flavor.
pub const PARTITA_BATCH: &str = "Partita batch";

/// The system name of the WAT flavor.
pub const PARTITA_WAT: &str = "Partita Wasm (WAT)";

/// The Rust guest modules' directory, built once per process, or why not.
pub fn guest_modules() -> Result<&'static PathBuf, &'static str> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            partita_workload::guest::build().map_err(|e| match e {
                partita_workload::guest::GuestError::TargetMissing => e.to_string(),
                // cargo's full output goes to stderr; the row names the cause.
                other => {
                    eprintln!("{other}");
                    "building the guest modules (sprocs/samples/rust) failed; see the error above"
                        .to_owned()
                }
            })
        })
        .as_ref()
        .map_err(String::as_str)
}

/// The scripts one flavor uploads: createComment into posts, the
/// truncateFeed post-trigger and the readFeed procedure into feed.
fn scripts(flavor: Flavor) -> Result<Vec<(bool, ScriptProperties)>, String> {
    let trigger = |body: ScriptProperties| ScriptProperties {
        trigger_type: Some(TriggerType::Post),
        trigger_operation: Some(TriggerOperation::All),
        trigger_names: None,
        ..body
    };
    Ok(match flavor {
        Flavor::Native | Flavor::Batch => Vec::new(),
        Flavor::JavaScript => vec![
            (
                true,
                ScriptProperties::stored_procedure("createComment", CREATE_COMMENT_JS),
            ),
            (
                false,
                ScriptProperties::trigger(
                    "truncateFeed",
                    TRUNCATE_FEED_JS,
                    TriggerType::Post,
                    TriggerOperation::All,
                ),
            ),
            (
                false,
                ScriptProperties::stored_procedure("readFeed", READ_FEED_JS),
            ),
        ],
        Flavor::Wasm => {
            let dir = guest_modules()?;
            let module =
                |name: &str| partita_workload::guest::read(dir, name).map_err(|e| e.to_string());
            vec![
                (
                    true,
                    ScriptProperties::wasm(
                        "createComment",
                        ScriptKind::StoredProcedure,
                        module("create_comment")?,
                    ),
                ),
                (
                    false,
                    trigger(ScriptProperties::wasm(
                        "truncateFeed",
                        ScriptKind::Trigger,
                        module("truncate_feed")?,
                    )),
                ),
                (
                    false,
                    ScriptProperties::wasm("readFeed", ScriptKind::StoredProcedure, READ_FEED_WAT),
                ),
            ]
        }
        Flavor::Wat => vec![
            (
                true,
                ScriptProperties::wasm(
                    "createComment",
                    ScriptKind::StoredProcedure,
                    CREATE_COMMENT_WAT,
                ),
            ),
            (
                false,
                trigger(ScriptProperties::wasm(
                    "truncateFeed",
                    ScriptKind::Trigger,
                    TRUNCATE_FEED_WAT,
                )),
            ),
            (
                false,
                ScriptProperties::wasm("readFeed", ScriptKind::StoredProcedure, READ_FEED_WAT),
            ),
        ],
    })
}

/// The slot for one flavor and durability class. The Wasm flavor builds
/// the Rust guest modules first ([`guest_modules`]); when it cannot (the
/// wasm32 target is not installed, the build fails) its rows are skipped
/// with the reason.
pub fn slot(flavor: Flavor, durability: Durability) -> Slot {
    slot_indexed(flavor, durability, Indexing::Consistent)
}

/// As [`slot`], with the containers created under `indexing`; a target
/// without the default policy is named so ("Partita native (indexing
/// none)").
pub fn slot_indexed(flavor: Flavor, durability: Durability, indexing: Indexing) -> Slot {
    match PartitaTarget::new(flavor, durability) {
        Ok(target) => Slot::Ready(Box::new(target.with_indexing(indexing))),
        Err(reason) => Slot::Skipped {
            system: indexing.system(flavor.system()),
            durability,
            reason,
        },
    }
}

/// A Partita database, fresh for every row.
pub struct PartitaTarget {
    flavor: Flavor,
    durability: Durability,
    indexing: Indexing,
    /// The name in the report.
    name: String,
    /// The cluster holding the database instead of a SQLite file.
    postgres: Option<Arc<crate::postgres::PgCluster>>,
    /// Databases created in the cluster so far (each row has its own).
    rows: u32,
    /// How many nodes open the PostgreSQL database (1 otherwise).
    nodes: usize,
    /// The node the next caller connects to.
    next_node: AtomicUsize,
    /// The scripts to upload, `true` for posts, `false` for feed.
    scripts: Vec<(bool, ScriptProperties)>,
    // Declared before `dir`: the database closes before its directory goes.
    data: Option<(Database, Container, Container)>,
    /// The nodes after the first: the same database, opened again.
    other_nodes: Vec<(Database, Container, Container)>,
    dir: Option<tempfile::TempDir>,
}

impl PartitaTarget {
    /// A target that creates its database at the first `prepare`.
    ///
    /// # Errors
    /// Why the flavor's scripts are not available (the Wasm flavor's guest
    /// modules could not be built).
    pub fn new(flavor: Flavor, durability: Durability) -> Result<PartitaTarget, String> {
        Ok(PartitaTarget {
            flavor,
            durability,
            indexing: Indexing::Consistent,
            name: flavor.system().to_owned(),
            postgres: None,
            rows: 0,
            nodes: 1,
            next_node: AtomicUsize::new(0),
            scripts: scripts(flavor)?,
            data: None,
            other_nodes: Vec::new(),
            dir: None,
        })
    }

    /// The same target with its database in `cluster` (durable or relaxed
    /// only: a memory target has no storage), opened by `nodes` nodes (at
    /// least one; see the module docs).
    ///
    /// # Errors
    /// As [`PartitaTarget::new`].
    pub fn on_postgres(
        flavor: Flavor,
        durability: Durability,
        cluster: Arc<crate::postgres::PgCluster>,
        nodes: usize,
    ) -> Result<PartitaTarget, String> {
        let nodes = nodes.max(1);
        let name = if nodes == 1 {
            format!("{} (PostgreSQL)", flavor.system())
        } else {
            format!("{} (PostgreSQL, {nodes} nodes)", flavor.system())
        };
        Ok(PartitaTarget {
            name,
            postgres: Some(cluster),
            nodes,
            ..PartitaTarget::new(flavor, durability)?
        })
    }

    /// The same target with its containers created under `indexing`.
    #[must_use]
    pub fn with_indexing(mut self, indexing: Indexing) -> PartitaTarget {
        self.name = indexing.system(&self.name);
        self.indexing = indexing;
        self
    }

    /// Where the database lives and how durable its commits are.
    fn storage_settings(&self) -> String {
        if let Some(cluster) = &self.postgres {
            return format!(
                "Database::open_url on the PostgreSQL target's cluster (PostgreSQL {}) by {} node(s), synchronous_commit={}, a database per row",
                cluster.version(),
                self.nodes,
                if self.durability == Durability::Durable {
                    "on"
                } else {
                    "off"
                }
            );
        }
        match self.durability {
            Durability::Memory => "Database::in_memory (no storage)".to_owned(),
            Durability::Relaxed => {
                "Durability::None: SQLite WAL, synchronous=OFF, group commit".to_owned()
            }
            Durability::Durable => {
                "Durability::Full: SQLite WAL, synchronous=FULL, group commit".to_owned()
            }
        }
    }

    fn containers(&self) -> Result<(&Container, &Container), BenchError> {
        self.data
            .as_ref()
            .map(|(_, posts, feed)| (posts, feed))
            .ok_or_else(|| BenchError::Check("the target was not prepared".into()))
    }
}

impl Target for PartitaTarget {
    fn system(&self) -> &str {
        &self.name
    }

    fn server_pid(&self) -> Option<u32> {
        self.postgres.as_ref().and_then(|cluster| cluster.pid())
    }

    fn durability(&self) -> Durability {
        self.durability
    }

    fn settings(&self) -> String {
        let indexing = match self.indexing {
            Indexing::Consistent => "",
            Indexing::None => "; containers created with {\"indexingMode\": \"none\"}",
        };
        self.storage_settings() + indexing
    }

    fn prepare(&mut self, workload: Workload, partitions: usize) -> Result<(), BenchError> {
        self.other_nodes.clear();
        self.data = None;
        self.dir = None;
        let options = Options {
            durability: if self.durability == Durability::Durable {
                partita::Durability::Full
            } else {
                partita::Durability::None
            },
            ..Options::default()
        };
        let mut url = None;
        let db = match (self.durability, &self.postgres) {
            (Durability::Memory, _) => Database::in_memory(),
            (_, Some(cluster)) => {
                self.rows += 1;
                // The relaxed and durable targets, and those of each node
                // count, share the cluster.
                let name = format!(
                    "partita_{}_{}n_{}",
                    self.durability.name(),
                    self.nodes,
                    self.rows
                );
                let created = cluster.create_database(&name)?;
                let db = Database::open_url(&created, options.clone())?;
                url = Some(created);
                db
            }
            (_, None) => {
                let dir =
                    tempfile::tempdir().map_err(BenchError::io("creating a data directory"))?;
                let db = Database::open_with(dir.path(), options.clone())?;
                self.dir = Some(dir);
                db
            }
        };
        let policy = self.indexing.policy();
        let posts = db.create_container_with(
            ContainerProperties::new("posts", "/postId").with_indexing_policy(policy.clone()),
        )?;
        let feed = db.create_container_with(
            ContainerProperties::new("feed", "/type").with_indexing_policy(policy),
        )?;
        for (in_posts, script) in &self.scripts {
            let container = if *in_posts { &posts } else { &feed };
            // Checked as `partita sproc create` checks: Wasm is compiled here.
            container.create_script(script.clone())?;
        }
        match workload {
            Workload::CreateComment => {
                for p in 0..partitions {
                    let id = post_id(p);
                    posts.create_item(id.as_str(), blog::post(&id, "u1", p as u64), None)?;
                }
            }
            Workload::TruncateFeed | Workload::FeedRead => {
                for seq in 0..FEED_SIZE as u64 {
                    feed.create_item("post", feed_post(seq), None)?;
                }
            }
        }
        self.data = Some((db, posts, feed));
        if let Some(url) = url {
            for _ in 1..self.nodes {
                let node = Database::open_url(&url, options.clone())?;
                let (posts, feed) = (node.container("posts")?, node.container("feed")?);
                self.other_nodes.push((node, posts, feed));
            }
        }
        Ok(())
    }

    fn connect(&self) -> Result<Box<dyn Caller + '_>, BenchError> {
        let (mut posts, mut feed) = self.containers()?;
        let node = self.next_node.fetch_add(1, Ordering::Relaxed) % self.nodes;
        if let Some((_, other_posts, other_feed)) =
            node.checked_sub(1).and_then(|i| self.other_nodes.get(i))
        {
            (posts, feed) = (other_posts, other_feed);
        }
        Ok(Box::new(PartitaCaller {
            flavor: self.flavor,
            retry: self.nodes > 1,
            posts: posts.clone(),
            feed: feed.clone(),
            triggers: WriteOptions {
                post_triggers: vec!["truncateFeed".into()],
                ..WriteOptions::default()
            },
            count_comment: Patch::from_json(
                &json!([{"op": "incr", "path": "/commentCount", "value": 1}]),
            )
            .map_err(partita::Error::from)?,
        }))
    }

    fn skips(&self, workload: Workload) -> Option<&str> {
        (self.flavor == Flavor::Batch && workload == Workload::TruncateFeed)
            .then_some("a batch cannot find the feed's oldest posts; truncateFeed needs a script")
    }

    fn verify(&mut self, workload: Workload, calls: u64) -> Result<(), BenchError> {
        let (posts, feed) = self.containers()?;
        match workload {
            Workload::CreateComment => {
                let (mut count_sum, mut comments) = (0, 0);
                for key in posts.partition_keys()? {
                    let partita::PartitionKey::String(id) = &key else {
                        continue;
                    };
                    let (count, n) = blog::comment_counts(posts, id)?;
                    count_sum += count as u64;
                    comments += n as u64;
                }
                check_comments(calls, count_sum, comments)
            }
            Workload::TruncateFeed | Workload::FeedRead => {
                let snapshot = feed
                    .raw()
                    .snapshot(&"post".into())
                    .map_err(partita::Error::from)?;
                let newest = snapshot
                    .documents()
                    .max_by(|a, b| date(a).cmp(date(b)))
                    .map(|d| d.id().to_owned());
                let calls = if workload == Workload::FeedRead {
                    0
                } else {
                    calls
                };
                check_feed(snapshot.len(), newest.as_deref(), calls)
            }
        }
    }
}

fn date(doc: &Value) -> &str {
    doc["creationDate"].as_str().unwrap_or("")
}

/// One caller's handles (containers are cheap to clone).
pub struct PartitaCaller {
    flavor: Flavor,
    /// Whether other nodes share the database, so a call may meet a 449
    /// (then each call is cloned first, to make it again).
    retry: bool,
    posts: Container,
    feed: Container,
    triggers: WriteOptions,
    /// The batch flavor's patch of the post.
    count_comment: Patch,
}

/// How many times a caller makes a call that another node beat to its
/// partition before giving up (the SDKs retry 449 with a budget too).
const RETRIES: usize = 1000;

impl Caller for PartitaCaller {
    fn call(&mut self, call: Call) -> Result<usize, BenchError> {
        if !self.retry {
            return self.call_once(call);
        }
        let mut retries = 0;
        loop {
            match self.call_once(call.clone()) {
                Err(BenchError::Partita(e)) if e.status() == 449 && retries < RETRIES => {
                    retries += 1;
                }
                res => return res,
            }
        }
    }
}

impl PartitaCaller {
    fn call_once(&mut self, call: Call) -> Result<usize, BenchError> {
        match (self.flavor, call) {
            (Flavor::Native, Call::CreateComment { post_id, comment }) => {
                blog::create_comment(&self.posts, &post_id, comment)?;
                Ok(2)
            }
            (Flavor::Native, Call::TruncateFeed { post, .. }) => {
                let mut post = Some(post);
                let feed = &self.feed;
                Ok(feed.transaction("post", |txn| {
                    txn.create_item(feed.raw().for_attempt(&mut post))?;
                    let view = txn.view();
                    let surplus = view.len().saturating_sub(FEED_SIZE);
                    if surplus > 0 {
                        let mut docs: Vec<(&str, &str)> =
                            view.documents().map(|d| (date(d), d.id())).collect();
                        docs.sort_unstable();
                        let oldest: Vec<String> = docs[..surplus]
                            .iter()
                            .map(|(_, id)| (*id).to_owned())
                            .collect();
                        for id in oldest {
                            txn.delete_item(&id, None)?;
                        }
                    }
                    Ok::<_, partita::Error>(1 + surplus)
                })?)
            }
            (Flavor::Batch, Call::CreateComment { post_id, comment }) => {
                let count = self.count_comment.clone();
                let response = self.posts.execute_batch(
                    post_id.as_str(),
                    vec![
                        BatchOperation::patch(post_id.as_str(), count),
                        BatchOperation::create(comment),
                    ],
                )?;
                match response.failed {
                    None => Ok(2),
                    Some(i) => Err(BenchError::Check(format!(
                        "batch operation {i} failed: {:?}",
                        response.results[i].message
                    ))),
                }
            }
            (Flavor::Batch, Call::TruncateFeed { .. }) => Err(BenchError::Check(
                "the batch flavor has no truncateFeed".to_owned(),
            )),
            (Flavor::Native | Flavor::Batch, Call::FeedRead) => {
                let options = QueryOptions {
                    partition_key: Some("post".into()),
                    ..QueryOptions::default()
                };
                let page = self
                    .feed
                    .query_items(FEED_QUERY, &Default::default(), &options)?;
                check_feed_read(&page.items)
            }
            (_, Call::CreateComment { post_id, comment }) => {
                self.posts.execute_stored_procedure(
                    "createComment",
                    post_id.as_str(),
                    vec![json!(post_id), comment],
                    None,
                )?;
                Ok(2)
            }
            (_, Call::TruncateFeed { post, .. }) => {
                let response = self.feed.create_item("post", post, Some(&self.triggers))?;
                Ok(response.stats.docs_written as usize)
            }
            (_, Call::FeedRead) => {
                let response =
                    self.feed
                        .execute_stored_procedure("readFeed", "post", vec![], None)?;
                // JavaScript sets the items, readFeed.wat the page holding them.
                let body = match response.body {
                    Value::Object(mut page) => page.remove("items").unwrap_or(Value::Null),
                    body => body,
                };
                match body {
                    Value::Array(items) => check_feed_read(&items),
                    other => Err(BenchError::Check(format!(
                        "readFeed returned {other} instead of an array"
                    ))),
                }
            }
        }
    }
}
