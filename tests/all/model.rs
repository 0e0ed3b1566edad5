//! Model-based test: random sequences of creates, replaces, upserts,
//! deletes, queries, stored-procedure calls that throw at random points,
//! writes with triggers (that sometimes throw), patches, transactional
//! batches (that fail at random operations), documents with a time to live
//! on a clock the test moves, purges, restarts and crashes at commit, checked after every step against a simple in-memory model (a
//! map from (partition, id) to the document's user properties).
//!
//! The partition cache has no room, so partitions are evicted and read
//! back from storage all the time.
//!
//! proptest generates and shrinks the sequences. `PARTITA_MODEL_CASES`
//! (default 64) sets how many sequences of up to 40 steps run.
//!
//! The same steps run on several nodes sharing one store ([`run`] with a
//! [`Store::Postgres`], `nodes.rs`): each step names the node it goes to,
//! a crash or restart reopens that node only, a contended write loses its
//! first commit to another node (449) and runs again, and after every step
//! every node must read what the model holds.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use engine::storage::{SqliteStorage, Storage};
use engine::testing::{CommitFault, Faults, FaultyStorage};
use partita::{
    BatchOperation, Container, FeedOptions, Patch, QueryOptions, ScriptProperties,
    TriggerOperation, TriggerType, WriteOptions,
};
use partita::{ContainerProperties, Database, Durability, ImportOptions, ManualClock, Options};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const PKS: [&str; 2] = ["p1", "p2"];
const IDS: [&str; 4] = ["a", "b", "c", "d"];

/// Upserts `docs` one by one; throws after `throwAt` writes (never when -1).
const WRITE_MANY: &str = r#"function writeMany(docs, throwAt) {
    var c = getContext().getCollection();
    var n = 0;
    function next() {
        if (n == throwAt) throw new Error(499, 'thrown after ' + n + ' writes');
        if (n == docs.length) return;
        c.upsertDocument(c.getSelfLink(), docs[n], function (err) {
            if (err) throw err;
            n++;
            next();
        });
    }
    next();
}"#;

/// Counts writes in the partition's `audit` document; throws on `fail`.
const AUDIT: &str = r#"function audit() {
    var c = getContext().getCollection();
    var doc = getContext().getRequest().getBody();
    if (doc.fail) throw new Error(498, 'the trigger refused');
    c.readDocument(c.getAltLink() + '/docs/audit', function (err, a) {
        if (err && err.number != 404) throw err;
        c.upsertDocument(c.getSelfLink(), {id: 'audit', pk: doc.pk, writes: (err ? 0 : a.writes) + 1},
            function (err) { if (err) throw err; });
    });
}"#;

#[derive(Clone, Debug)]
pub(crate) enum Step {
    Create(usize, usize, i64),
    Replace(usize, usize, i64),
    Upsert(usize, usize, i64),
    Delete(usize, usize),
    Query(usize),
    Procedure(usize, Vec<(usize, i64)>, Option<usize>),
    Triggered(usize, usize, i64, bool),
    Restart,
    CrashedWrite(usize, usize, i64, bool),
    /// Increments `v` of a document by a patch.
    Patch(usize, usize, i64),
    /// A transactional batch of (operation, id, value) in one partition.
    Batch(usize, Vec<(BatchKind, usize, i64)>),
    /// Upserts a document that expires `ttl` seconds after its last write.
    Expiring(usize, usize, i64, u64),
    /// Moves the clock forward by whole seconds.
    Advance(u64),
    /// Deletes the expired documents now (the background purge is off).
    Purge,
    /// Bulk-imports documents of one partition (`true`: upserting), a
    /// transaction that reads only their ids when the partition is not in
    /// memory.
    Import(usize, Vec<(usize, i64)>, bool),
    /// An import whose commit crashes before or after (`true`) the write.
    CrashedImport(usize, Vec<(usize, i64)>, bool),
    /// An upsert of (partition, id, value) whose commit the next node
    /// beats with its own upsert of (id, value) in the same partition: the
    /// first commit fails with 449 and the upsert runs again on top.
    Contended(usize, usize, i64, usize, i64),
}

/// The most nodes a sequence names; [`run`] maps a step's node onto the
/// nodes it has.
const NODES: usize = 3;

/// A step and the node (`0..NODES`) it goes to.
pub(crate) type NodeStep = (usize, Step);

#[derive(Clone, Copy, Debug)]
pub(crate) enum BatchKind {
    Create,
    Upsert,
    Replace,
    Delete,
    Incr,
}

fn step() -> impl Strategy<Value = Step> {
    let pk = 0..PKS.len();
    let id = 0..IDS.len();
    let v = 0i64..5;
    prop_oneof![
        3 => (pk.clone(), id.clone(), v.clone()).prop_map(|(p, i, v)| Step::Create(p, i, v)),
        2 => (pk.clone(), id.clone(), v.clone()).prop_map(|(p, i, v)| Step::Replace(p, i, v)),
        2 => (pk.clone(), id.clone(), v.clone()).prop_map(|(p, i, v)| Step::Upsert(p, i, v)),
        2 => (pk.clone(), id.clone()).prop_map(|(p, i)| Step::Delete(p, i)),
        1 => pk.clone().prop_map(Step::Query),
        3 => (pk.clone(), proptest::collection::vec((id.clone(), v.clone()), 1..4), proptest::option::of(0usize..4))
            .prop_map(|(p, docs, t)| Step::Procedure(p, docs, t)),
        2 => (pk.clone(), id.clone(), v.clone(), any::<bool>()).prop_map(|(p, i, v, f)| Step::Triggered(p, i, v, f)),
        1 => Just(Step::Restart),
        1 => (pk.clone(), id.clone(), v.clone(), any::<bool>()).prop_map(|(p, i, v, a)| Step::CrashedWrite(p, i, v, a)),
        2 => (pk.clone(), id.clone(), v.clone()).prop_map(|(p, i, v)| Step::Patch(p, i, v)),
        3 => (pk.clone(), proptest::collection::vec((batch_kind(), id.clone(), v.clone()), 1..5))
            .prop_map(|(p, ops)| Step::Batch(p, ops)),
        2 => (pk.clone(), id.clone(), v.clone(), 1u64..4).prop_map(|(p, i, v, t)| Step::Expiring(p, i, v, t)),
        2 => (0u64..3).prop_map(Step::Advance),
        1 => Just(Step::Purge),
        2 => (pk.clone(), proptest::collection::vec((id.clone(), v.clone()), 1..4), any::<bool>())
            .prop_map(|(p, docs, upsert)| Step::Import(p, docs, upsert)),
        1 => (pk.clone(), proptest::collection::vec((id.clone(), v.clone()), 1..4), any::<bool>())
            .prop_map(|(p, docs, after)| Step::CrashedImport(p, docs, after)),
        2 => (pk, id.clone(), v.clone(), id, v).prop_map(|(p, i, v, j, w)| Step::Contended(p, i, v, j, w)),
    ]
}

/// Sequences of up to `max_steps` steps, each sent to one of [`NODES`].
pub(crate) fn steps(max_steps: usize) -> impl Strategy<Value = Vec<NodeStep>> {
    proptest::collection::vec((0..NODES, step()), 1..max_steps)
}

fn batch_kind() -> impl Strategy<Value = BatchKind> {
    prop_oneof![
        Just(BatchKind::Create),
        Just(BatchKind::Upsert),
        Just(BatchKind::Replace),
        Just(BatchKind::Delete),
        Just(BatchKind::Incr),
    ]
}

fn incr(v: i64) -> Patch {
    Patch::from_json(&json!([{"op": "incr", "path": "/v", "value": v}])).expect("patch")
}

/// Applies a batch to the model's copy of partition `p`: the model after
/// it, or the index of the operation that fails and its status.
fn model_batch(
    model: &Model,
    p: usize,
    ops: &[(BatchKind, usize, i64)],
) -> Result<Model, (usize, u16)> {
    let mut after = model.clone();
    for (n, (kind, i, v)) in ops.iter().enumerate() {
        let key = (p, IDS[*i].to_owned());
        let exists = after.contains_key(&key);
        match kind {
            BatchKind::Create if exists => return Err((n, 409)),
            BatchKind::Replace | BatchKind::Delete | BatchKind::Incr if !exists => {
                return Err((n, 404));
            }
            BatchKind::Create | BatchKind::Upsert | BatchKind::Replace => {
                after.insert(key, doc(p, IDS[*i], *v));
            }
            BatchKind::Delete => {
                after.remove(&key);
            }
            BatchKind::Incr => {
                let doc = after.get_mut(&key).expect("exists");
                doc["v"] = json!(doc["v"].as_i64().unwrap_or(0) + v);
            }
        }
    }
    Ok(after)
}

/// The store every node of a run opens.
pub(crate) enum Store {
    /// SQLite in a temporary directory: one node.
    Sqlite(tempfile::TempDir),
    /// A PostgreSQL database, by its URL: as many nodes as the run asks.
    #[cfg(feature = "postgres")]
    Postgres(String),
}

impl Store {
    /// Whether several nodes share it.
    fn shared(&self) -> bool {
        !matches!(self, Store::Sqlite(_))
    }

    /// A new connection to the store, whose commits fail when `crashes`
    /// says (the plan outlives each reopen).
    fn storage(&self, crashes: &Faults) -> Box<dyn Storage> {
        match self {
            Store::Sqlite(dir) => Box::new(FaultyStorage::with_faults(
                SqliteStorage::open(&dir.path().join(engine::DATA_FILE), Durability::None)
                    .expect("open"),
                crashes.clone(),
            )),
            #[cfg(feature = "postgres")]
            Store::Postgres(url) => Box::new(FaultyStorage::with_faults(
                engine::storage::PostgresStorage::connect(url, Durability::None).expect("connect"),
                crashes.clone(),
            )),
        }
    }
}

/// One node: its database, the container `m` and its crash plan.
struct Node {
    db: Database,
    c: Container,
    crashes: Faults,
}

impl Node {
    /// Opens a node on `store` with the crash plan `crashes`; the first
    /// node of a store creates the container and its scripts.
    fn open(store: &Store, crashes: Faults, clock: &ManualClock) -> Node {
        let db = Database::with_storage(
            store.storage(&crashes),
            Options {
                durability: Durability::None,
                clock: clock.clock(),
                purge_interval: None,
                // No room: every partition not in use is evicted, so each step
                // also runs on partitions read back from storage.
                cache_bytes: 0,
                ..Options::default()
            },
        )
        .expect("load");
        let c = match db.container("m") {
            Ok(c) => c,
            Err(_) => {
                // Time to live on: documents live until their own `ttl` says.
                let props = ContainerProperties::new("m", "/pk").with_default_ttl(-1);
                let c = db.create_container_with(props).expect("container");
                c.create_script(ScriptProperties::stored_procedure("writeMany", WRITE_MANY))
                    .expect("sproc");
                c.create_script(ScriptProperties::trigger(
                    "audit",
                    AUDIT,
                    TriggerType::Post,
                    TriggerOperation::Upsert,
                ))
                .expect("trigger");
                c
            }
        };
        Node { db, c, crashes }
    }
}

/// Runs `call` again while it fails with 449 (another node committed to
/// the partition first, and the engine's own attempts ran out), as a
/// client would; a bounded number of times.
fn retried<T, E>(
    status: impl Fn(&E) -> u16,
    mut call: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    let mut attempts = 0;
    loop {
        match call() {
            Err(e) if status(&e) == 449 && attempts < 10 => attempts += 1,
            res => return res,
        }
    }
}

type Model = BTreeMap<(usize, String), Value>;

/// When each document with a `ttl` expires (seconds on the test's clock).
type Deadlines = BTreeMap<(usize, String), u64>;

/// The clock in whole seconds, as `_ts` and expiry count.
fn now(clock: &ManualClock) -> u64 {
    clock
        .now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn doc(p: usize, id: &str, v: i64) -> Value {
    json!({"id": id, "pk": PKS[p], "v": v})
}

fn user(value: &Value) -> Value {
    let mut map: Map<String, Value> = value.as_object().cloned().unwrap_or_default();
    map.retain(|k, _| !k.starts_with('_'));
    Value::Object(map)
}

fn check(c: &Container, model: &Model, step: usize, node: usize) -> Result<(), TestCaseError> {
    for (p, pk) in PKS.iter().enumerate() {
        let feed = c.read_feed(*pk, &FeedOptions::default()).expect("feed");
        let got: BTreeMap<String, Value> = feed
            .items
            .iter()
            .map(|d| (d.id().to_owned(), user(d.value())))
            .collect();
        let want: BTreeMap<String, Value> = model
            .iter()
            .filter(|((q, _), _)| *q == p)
            .map(|((_, id), v)| (id.clone(), v.clone()))
            .collect();
        prop_assert_eq!(
            &got,
            &want,
            "partition {} after step {} on node {}",
            pk,
            step,
            node
        );
    }
    Ok(())
}

/// Runs `steps` on `nodes` nodes over `store` (a step's node modulo
/// `nodes`), checking every node against the model after every step.
pub(crate) fn run(store: Store, nodes: usize, steps: Vec<NodeStep>) -> Result<(), TestCaseError> {
    let clock =
        ManualClock::new(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000));
    let mut nodes: Vec<Node> = (0..nodes.max(1))
        .map(|_| Node::open(&store, Faults::new(), &clock))
        .collect();
    let mut model: Model = BTreeMap::new();
    let mut deadlines: Deadlines = BTreeMap::new();
    for (n, (k, step)) in steps.into_iter().enumerate() {
        let k = k % nodes.len();
        let Node { db, c, crashes } = &nodes[k];
        // The node is reopened after the step: a restart, or a crash.
        let mut reopen = false;
        let before = model.clone();
        // Documents this step patched: a patch is a write even when it
        // changes nothing (`incr` by 0), so it restarts the time to live.
        let mut patched: Vec<(usize, String)> = Vec::new();
        match step {
            Step::Create(p, i, v) => {
                let key = (p, IDS[i].to_owned());
                let res = retried(status, || c.create_item(PKS[p], doc(p, IDS[i], v), None));
                match model.entry(key) {
                    Entry::Occupied(_) => {
                        prop_assert_eq!(res.map(drop).map_err(|e| e.status()), Err(409));
                    }
                    Entry::Vacant(slot) => {
                        res.expect("create");
                        slot.insert(doc(p, IDS[i], v));
                    }
                }
            }
            Step::Replace(p, i, v) => {
                let key = (p, IDS[i].to_owned());
                let res = retried(status, || {
                    c.replace_item(PKS[p], IDS[i], doc(p, IDS[i], v), None)
                });
                match model.entry(key) {
                    Entry::Occupied(mut slot) => {
                        res.expect("replace");
                        slot.insert(doc(p, IDS[i], v));
                    }
                    Entry::Vacant(_) => {
                        prop_assert_eq!(res.map(drop).map_err(|e| e.status()), Err(404));
                    }
                }
            }
            Step::Upsert(p, i, v) => {
                retried(status, || c.upsert_item(PKS[p], doc(p, IDS[i], v), None)).expect("upsert");
                model.insert((p, IDS[i].to_owned()), doc(p, IDS[i], v));
            }
            Step::Delete(p, i) => {
                let key = (p, IDS[i].to_owned());
                let res = retried(status, || c.delete_item(PKS[p], IDS[i], None));
                if model.remove(&key).is_some() {
                    res.expect("delete");
                } else {
                    prop_assert_eq!(res.map_err(|e| e.status()), Err(404));
                }
            }
            Step::Query(p) => {
                let options = QueryOptions {
                    partition_key: Some(PKS[p].into()),
                    ..Default::default()
                };
                let page = c
                    .query_items(
                        "SELECT VALUE COUNT(1) FROM c",
                        &Default::default(),
                        &options,
                    )
                    .expect("query");
                let want = model.keys().filter(|(q, _)| *q == p).count();
                prop_assert_eq!(&page.items, &vec![json!(want)]);
            }
            Step::Procedure(p, docs, throw_at) => {
                let bodies: Vec<Value> = docs.iter().map(|(i, v)| doc(p, IDS[*i], *v)).collect();
                let throws = throw_at.is_some_and(|t| t <= bodies.len());
                let res = retried(status, || {
                    c.execute_stored_procedure(
                        "writeMany",
                        PKS[p],
                        vec![
                            Value::Array(bodies.clone()),
                            json!(throw_at.map_or(-1, |t| t as i64)),
                        ],
                        None,
                    )
                });
                if throws {
                    prop_assert_eq!(
                        res.map(drop).map_err(|e| (e.status(), e.substatus())),
                        Err((400, Some(499)))
                    );
                } else {
                    res.expect("procedure");
                    for b in bodies {
                        model.insert((p, b["id"].as_str().unwrap_or("").to_owned()), b);
                    }
                }
            }
            Step::Triggered(p, i, v, fail) => {
                let mut body = doc(p, IDS[i], v);
                if fail {
                    body["fail"] = json!(true);
                }
                let options = WriteOptions {
                    post_triggers: vec!["audit".into()],
                    ..WriteOptions::default()
                };
                let res = retried(status, || {
                    c.upsert_item(PKS[p], body.clone(), Some(&options))
                });
                if fail {
                    prop_assert_eq!(
                        res.map(drop).map_err(|e| (e.status(), e.substatus())),
                        Err((400, Some(498)))
                    );
                } else {
                    res.expect("triggered write");
                    let key = (p, "audit".to_owned());
                    let writes = model
                        .get(&key)
                        .map_or(0, |a| a["writes"].as_i64().unwrap_or(0))
                        + 1;
                    model.insert((p, IDS[i].to_owned()), body);
                    model.insert(key, json!({"id": "audit", "pk": PKS[p], "writes": writes}));
                }
            }
            Step::Patch(p, i, v) => {
                let key = (p, IDS[i].to_owned());
                let res = retried(status, || c.patch_item(PKS[p], IDS[i], &incr(v), None));
                match model.get_mut(&key) {
                    Some(doc) => {
                        res.expect("patch");
                        doc["v"] = json!(doc["v"].as_i64().unwrap_or(0) + v);
                        patched.push(key);
                    }
                    None => prop_assert_eq!(res.map(drop).map_err(|e| e.status()), Err(404)),
                }
            }
            Step::Batch(p, ops) => {
                let batch = || {
                    ops.iter()
                        .map(|&(kind, i, v)| match kind {
                            BatchKind::Create => BatchOperation::create(doc(p, IDS[i], v)),
                            BatchKind::Upsert => BatchOperation::upsert(doc(p, IDS[i], v)),
                            BatchKind::Replace => {
                                BatchOperation::replace(IDS[i], doc(p, IDS[i], v))
                            }
                            BatchKind::Delete => BatchOperation::delete(IDS[i]),
                            BatchKind::Incr => BatchOperation::patch(IDS[i], incr(v)),
                        })
                        .collect()
                };
                let response = retried(status, || c.execute_batch(PKS[p], batch())).expect("batch");
                match model_batch(&model, p, &ops) {
                    Ok(after) => {
                        prop_assert!(response.is_success(), "{:?}", response);
                        model = after;
                        patched.extend(
                            ops.iter()
                                .filter(|(kind, _, _)| matches!(kind, BatchKind::Incr))
                                .map(|&(_, i, _)| (p, IDS[i].to_owned())),
                        );
                    }
                    Err((failed, status)) => {
                        prop_assert_eq!(response.failed, Some(failed));
                        prop_assert_eq!(response.results[failed].status, status);
                    }
                }
            }
            Step::Expiring(p, i, v, ttl) => {
                let mut body = doc(p, IDS[i], v);
                body["ttl"] = json!(ttl);
                retried(status, || c.upsert_item(PKS[p], body.clone(), None)).expect("upsert");
                model.insert((p, IDS[i].to_owned()), body);
                deadlines.insert((p, IDS[i].to_owned()), now(&clock) + ttl);
            }
            Step::Advance(seconds) => clock.advance(std::time::Duration::from_secs(seconds)),
            Step::Purge => {
                db.purge_expired().expect("purge");
            }
            Step::Restart => reopen = true,
            Step::Import(p, docs, upsert) => {
                let bodies: Vec<Value> = docs.iter().map(|(i, v)| doc(p, IDS[*i], *v)).collect();
                let options = ImportOptions {
                    upsert,
                    ..ImportOptions::default()
                };
                let res = retried(
                    |e: &partita::ImportError| e.source.status(),
                    || c.import_items(bodies.clone(), &options, &mut |_| {}),
                );
                // Created one by one: an id the partition or the import
                // already has fails the whole transaction.
                let mut after = model.clone();
                let mut conflict = false;
                for b in bodies {
                    let key = (p, b["id"].as_str().unwrap_or("").to_owned());
                    conflict |= !upsert && after.contains_key(&key);
                    after.insert(key, b);
                }
                if conflict {
                    prop_assert_eq!(res.map(drop).map_err(|e| e.source.status()), Err(409));
                } else {
                    prop_assert_eq!(res.expect("import").documents, docs.len() as u64);
                    model = after;
                }
            }
            Step::CrashedImport(p, docs, after) => {
                let bodies: Vec<Value> = docs.iter().map(|(i, v)| doc(p, IDS[*i], *v)).collect();
                crashes.fail_next_commit(if after {
                    CommitFault::after_write("crash after the write (injected)")
                } else {
                    CommitFault::before_write("crash before the write (injected)")
                });
                let options = ImportOptions {
                    upsert: true,
                    ..ImportOptions::default()
                };
                let res = c.import_items(bodies.clone(), &options, &mut |_| {});
                prop_assert_eq!(res.map(drop).map_err(|e| e.source.status()), Err(500));
                // On SQLite nothing of it is visible before the restart,
                // though the partition was not in memory when it began.
                let written = bodies
                    .into_iter()
                    .map(|b| ((p, b["id"].as_str().unwrap_or("").to_owned()), b));
                crashed(&store, &nodes, k, &mut model, written, after, n)?;
                reopen = true;
            }
            Step::CrashedWrite(p, i, v, after) => {
                crashes.fail_next_commit(if after {
                    CommitFault::after_write("crash after the write (injected)")
                } else {
                    CommitFault::before_write("crash before the write (injected)")
                });
                let res = c.upsert_item(PKS[p], doc(p, IDS[i], v), None);
                prop_assert_eq!(res.map(drop).map_err(|e| e.status()), Err(500));
                let refused = c.upsert_item(PKS[p], doc(p, IDS[i], v), None);
                prop_assert_eq!(refused.map(drop).map_err(|e| e.status()), Err(503));
                // On SQLite nothing of the failed write is visible before
                // the restart (its partition stays in memory, however small
                // the cache).
                let written = [((p, IDS[i].to_owned()), doc(p, IDS[i], v))];
                crashed(&store, &nodes, k, &mut model, written, after, n)?;
                reopen = true;
            }
            Step::Contended(p, i, v, j, w) => {
                let theirs = doc(p, IDS[j], w);
                let other = (k + 1) % nodes.len();
                if other == k {
                    // One node: its own write first, as another node's would be.
                    c.upsert_item(PKS[p], theirs.clone(), None).expect("upsert");
                } else {
                    let on_other = nodes[other].c.clone();
                    let theirs = theirs.clone();
                    crashes.before_next_commit(move || {
                        on_other
                            .upsert_item(PKS[p], theirs, None)
                            .expect("the other node's upsert");
                    });
                }
                retried(status, || c.upsert_item(PKS[p], doc(p, IDS[i], v), None))
                    .expect("contended upsert");
                model.insert((p, IDS[j].to_owned()), theirs);
                model.insert((p, IDS[i].to_owned()), doc(p, IDS[i], v));
            }
        }
        // A document rewritten whole loses its `ttl`; a patched one keeps
        // it and lives `ttl` seconds from the patch.
        let t = now(&clock);
        for (key, doc) in &model {
            if before.get(key) == Some(doc) && !patched.contains(key) {
                continue;
            }
            match doc.get("ttl").and_then(Value::as_u64) {
                Some(ttl) => {
                    deadlines.insert(key.clone(), t + ttl);
                }
                None => {
                    deadlines.remove(key);
                }
            }
        }
        deadlines.retain(|key, _| model.contains_key(key));
        // An expired document is gone for every read and write, purged or
        // not: the model forgets it.
        deadlines.retain(|key, deadline| {
            let alive = *deadline > t;
            if !alive {
                model.remove(key);
            }
            alive
        });
        if reopen {
            let crashes = crashes.clone();
            drop(nodes.remove(k));
            nodes.insert(k, Node::open(&store, crashes, &clock));
        }
        for (m, node) in nodes.iter().enumerate() {
            check(&node.c, &model, n, m)?;
        }
    }
    Ok(())
}

/// The checks after a crash at commit on node `k`, before it restarts,
/// and the model after it, which holds `written` (the crashed call's
/// documents) when the crash came after the durable write. A store of its
/// own (SQLite) keeps showing what was before the failed write; on a
/// shared store every node, the crashed one too, reads what the store
/// holds.
fn crashed(
    store: &Store,
    nodes: &[Node],
    k: usize,
    model: &mut Model,
    written: impl IntoIterator<Item = ((usize, String), Value)>,
    after: bool,
    step: usize,
) -> Result<(), TestCaseError> {
    let mut durable = model.clone();
    if after {
        durable.extend(written);
    }
    if store.shared() {
        for (m, node) in nodes.iter().enumerate() {
            check(&node.c, &durable, step, m)?;
        }
    } else {
        check(&nodes[k].c, model, step, k)?;
    }
    *model = durable;
    Ok(())
}

/// A call's status, for [`retried`].
fn status(e: &partita::Error) -> u16 {
    e.status()
}

fn cases() -> u32 {
    std::env::var("PARTITA_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn partita_matches_the_model(steps in steps(40)) {
        run(Store::Sqlite(tempfile::tempdir().expect("tempdir")), 1, steps)?;
    }
}
