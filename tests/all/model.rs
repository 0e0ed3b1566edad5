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

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::path::Path;

use engine::storage::SqliteStorage;
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
enum Step {
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
}

#[derive(Clone, Copy, Debug)]
enum BatchKind {
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
        1 => (pk, proptest::collection::vec((id, v), 1..4), any::<bool>())
            .prop_map(|(p, docs, after)| Step::CrashedImport(p, docs, after)),
    ]
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

/// Opens the database in `dir` over SQLite storage whose commits fail when
/// `crashes` says (the plan outlives each reopen).
fn open(dir: &Path, crashes: &Faults, clock: &ManualClock) -> (Database, Container) {
    let storage = FaultyStorage::with_faults(
        SqliteStorage::open(&dir.join(engine::DATA_FILE), Durability::None).expect("open"),
        crashes.clone(),
    );
    let db = Database::with_storage(
        Box::new(storage),
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
    (db, c)
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

fn check(c: &Container, model: &Model, step: usize) -> Result<(), TestCaseError> {
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
        prop_assert_eq!(&got, &want, "partition {} after step {}", pk, step);
    }
    Ok(())
}

fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let crashes = Faults::new();
    let clock =
        ManualClock::new(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000));
    let (mut db, mut c) = open(dir.path(), &crashes, &clock);
    let mut model: Model = BTreeMap::new();
    let mut deadlines: Deadlines = BTreeMap::new();
    for (n, step) in steps.into_iter().enumerate() {
        let before = model.clone();
        // Documents this step patched: a patch is a write even when it
        // changes nothing (`incr` by 0), so it restarts the time to live.
        let mut patched: Vec<(usize, String)> = Vec::new();
        match step {
            Step::Create(p, i, v) => {
                let key = (p, IDS[i].to_owned());
                let res = c.create_item(PKS[p], doc(p, IDS[i], v), None);
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
                let res = c.replace_item(PKS[p], IDS[i], doc(p, IDS[i], v), None);
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
                c.upsert_item(PKS[p], doc(p, IDS[i], v), None)
                    .expect("upsert");
                model.insert((p, IDS[i].to_owned()), doc(p, IDS[i], v));
            }
            Step::Delete(p, i) => {
                let key = (p, IDS[i].to_owned());
                let res = c.delete_item(PKS[p], IDS[i], None);
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
                let res = c.execute_stored_procedure(
                    "writeMany",
                    PKS[p],
                    vec![
                        Value::Array(bodies.clone()),
                        json!(throw_at.map_or(-1, |t| t as i64)),
                    ],
                    None,
                );
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
                let res = c.upsert_item(PKS[p], body.clone(), Some(&options));
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
                let res = c.patch_item(PKS[p], IDS[i], &incr(v), None);
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
                let batch = ops
                    .iter()
                    .map(|&(kind, i, v)| match kind {
                        BatchKind::Create => BatchOperation::create(doc(p, IDS[i], v)),
                        BatchKind::Upsert => BatchOperation::upsert(doc(p, IDS[i], v)),
                        BatchKind::Replace => BatchOperation::replace(IDS[i], doc(p, IDS[i], v)),
                        BatchKind::Delete => BatchOperation::delete(IDS[i]),
                        BatchKind::Incr => BatchOperation::patch(IDS[i], incr(v)),
                    })
                    .collect();
                let response = c.execute_batch(PKS[p], batch).expect("batch");
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
                c.upsert_item(PKS[p], body.clone(), None).expect("upsert");
                model.insert((p, IDS[i].to_owned()), body);
                deadlines.insert((p, IDS[i].to_owned()), now(&clock) + ttl);
            }
            Step::Advance(seconds) => clock.advance(std::time::Duration::from_secs(seconds)),
            Step::Purge => {
                db.purge_expired().expect("purge");
            }
            Step::Restart => {
                drop(c);
                drop(db);
                (db, c) = open(dir.path(), &crashes, &clock);
            }
            Step::Import(p, docs, upsert) => {
                let bodies: Vec<Value> = docs.iter().map(|(i, v)| doc(p, IDS[*i], *v)).collect();
                let options = ImportOptions {
                    upsert,
                    ..ImportOptions::default()
                };
                let res = c.import_items(bodies.clone(), &options, &mut |_| {});
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
                // Nothing of it is visible before the restart, though the
                // partition was not in memory when it began.
                check(&c, &model, n)?;
                drop(c);
                drop(db);
                (db, c) = open(dir.path(), &crashes, &clock);
                if after {
                    for b in bodies {
                        model.insert((p, b["id"].as_str().unwrap_or("").to_owned()), b);
                    }
                }
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
                // Nothing of the failed write is visible before the restart
                // (its partition stays in memory, however small the cache).
                check(&c, &model, n)?;
                drop(c);
                drop(db);
                (db, c) = open(dir.path(), &crashes, &clock);
                if after {
                    model.insert((p, IDS[i].to_owned()), doc(p, IDS[i], v));
                }
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
        check(&c, &model, n)?;
    }
    Ok(())
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
    fn partita_matches_the_model(steps in proptest::collection::vec(step(), 1..40)) {
        run(steps)?;
    }
}
