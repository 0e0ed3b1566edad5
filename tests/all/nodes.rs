//! Several nodes on one PostgreSQL database, through the facade: two
//! `Database`s open on one URL in this process, as two `partita serve`
//! processes would be (the integration tests' `postgres` feature; the
//! engine's private test cluster, `engine::testing::postgres`).
//!
//! - A call whose commit another node beat (449) runs again from scratch:
//!   stored procedures, writes with triggers and transactional batches
//!   lose no update when both nodes work on the same logical partitions,
//!   and a lost run leaves nothing, not even in the response. Loop sizes:
//!   `PARTITA_PG_NODE_THREADS` (threads per node, default 2) and
//!   `PARTITA_PG_NODE_CALLS` (calls per thread, default 12).
//! - Containers and scripts one node creates, changes or deletes are what
//!   the other finds, reads with and runs.
//! - Change-feed processors on both nodes share the leases, and one takes
//!   over the leases of a dead one: every change is delivered at least
//!   once.
//! - A node whose commit crashed after its durable write reads, until it
//!   restarts, what the store holds, as the other node does.
//! - The model-based test (`model.rs`) on `PARTITA_PG_MODEL_NODES` nodes
//!   (default 3): each step goes to the node the sequence names, crashes
//!   at commit and restarts reopen that node, contended writes lose their
//!   first commit to another node, and every node reads what the model
//!   holds after every step. `PARTITA_PG_MODEL_CASES` (default 8)
//!   sequences of up to 30 steps, each on a new database.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use engine::storage::PostgresStorage;
use engine::testing::{Faults, FaultyStorage};
use partita::change_feed::{ChangeBatch, ChangeFeedProcessor};
use partita::{
    BatchOperation, Container, Database, Options, Patch, ScriptProperties, TriggerOperation,
    WriteOptions,
};
use partita_workload::blog;
use serde_json::{Value, json};

use crate::model::{self, Store};
use crate::support::{manual_clock, store_comment_scripts};

type Result<T = ()> = anyhow::Result<T>;

/// A bound of a loop from the environment variable `name`, or `default`.
fn bound(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn open(url: &str) -> Database {
    Database::open_url(url, Options::default()).expect("open the database")
}

/// The partitions both nodes call into.
const POSTS: [&str; 2] = ["p0", "p1"];

/// A new database holding the container `posts` with a post in each of
/// [`POSTS`], the createComment procedure and the `countComment`
/// post-trigger (one more `commentCount` on the post of the partition);
/// its URL and the node that made it.
fn blog_database() -> Result<(String, Database)> {
    let url = engine::testing::postgres::database();
    let a = open(&url);
    let posts = a.create_container("posts", "/postId")?;
    for (i, post) in POSTS.iter().enumerate() {
        posts.create_item(*post, blog::post(post, "u1", i as u64), None)?;
    }
    store_comment_scripts(&posts, TriggerOperation::Create)?;
    Ok((url, a))
}

/// Two nodes on a [`blog_database`], the second opened after the first
/// made it.
fn two_nodes() -> Result<(Database, Database)> {
    let (url, a) = blog_database()?;
    Ok((a, open(&url)))
}

/// Runs `call(node, post, n)` from `PARTITA_PG_NODE_THREADS` threads on
/// each node, `PARTITA_PG_NODE_CALLS` times each, spread over [`POSTS`];
/// each call adds one comment with the id `n` to `post`. Returns the ids
/// of the acknowledged comments per post; a 449 after every attempt is not
/// acknowledged, any other error fails the test.
fn concurrently(
    nodes: [&Database; 2],
    call: impl Fn(&Container, &str, String) -> partita::Result<()> + Sync,
) -> Vec<Vec<String>> {
    let threads = bound("PARTITA_PG_NODE_THREADS", 2);
    let calls = bound("PARTITA_PG_NODE_CALLS", 12);
    let call = &call;
    let done: Vec<Vec<(usize, String)>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2 * threads)
            .map(|t| {
                let posts = nodes[t % 2].container("posts").expect("posts");
                s.spawn(move || {
                    let mut done = Vec::new();
                    for i in 0..calls {
                        let p = (t + i) % POSTS.len();
                        let id = format!("c{t}-{i}");
                        match call(&posts, POSTS[p], id.clone()) {
                            Ok(()) => done.push((p, id)),
                            Err(e) if e.status() == 449 => {}
                            Err(e) => panic!("call {id}: {e}"),
                        }
                    }
                    done
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut acknowledged = vec![Vec::new(); POSTS.len()];
    for (p, id) in done.into_iter().flatten() {
        acknowledged[p].push(id);
    }
    let total: usize = acknowledged.iter().map(Vec::len).sum();
    eprintln!("{total} of {} calls acknowledged", 2 * threads * calls);
    assert!(total > 0, "nothing was acknowledged");
    acknowledged
}

/// Every post's `commentCount` equals its acknowledged comments, which
/// are exactly the comments in its partition, read from either node.
fn check_counts(nodes: [&Database; 2], acknowledged: &[Vec<String>]) -> Result {
    for db in nodes {
        let posts = db.container("posts")?;
        for (post, acked) in POSTS.iter().zip(acknowledged) {
            let count = posts.read_item(*post, post)?["commentCount"].as_i64();
            assert_eq!(count, Some(acked.len() as i64), "{post}: no lost update");
            let mut stored: Vec<String> = posts
                .read_feed(*post, &Default::default())?
                .items
                .iter()
                .filter(|d| d.id() != *post)
                .map(|d| d.id().to_owned())
                .collect();
            stored.sort();
            let mut expected = acked.clone();
            expected.sort();
            assert_eq!(
                stored, expected,
                "{post}: every acknowledged comment, no other"
            );
        }
    }
    Ok(())
}

/// The JavaScript createComment, called on the same posts from both
/// nodes, loses no comment and no increment.
#[test]
fn create_comment_from_two_nodes_loses_nothing() -> Result {
    let (a, b) = two_nodes()?;
    let acknowledged = concurrently([&a, &b], |posts, post, id| {
        let comment = json!({"id": id, "type": "comment"});
        let params = vec![json!(post), comment];
        posts
            .execute_stored_procedure("createComment", post, params, None)
            .map(drop)
    });
    check_counts([&a, &b], &acknowledged)
}

/// A batch that creates a comment and patches the post's count with
/// `incr`, sent to both nodes, loses no increment.
#[test]
fn a_batch_with_a_patch_from_two_nodes_loses_nothing() -> Result {
    let (a, b) = two_nodes()?;
    let incr = Patch::from_json(&json!([{"op": "incr", "path": "/commentCount", "value": 1}]))?;
    let acknowledged = concurrently([&a, &b], |posts, post, id| {
        let response = posts.execute_batch(
            post,
            vec![
                BatchOperation::create(json!({"id": id, "postId": post, "type": "comment"})),
                BatchOperation::patch(post, incr.clone()),
            ],
        )?;
        assert!(response.is_success(), "{response:?}");
        Ok(())
    });
    check_counts([&a, &b], &acknowledged)
}

/// A create with a post-trigger that counts it on the post, sent to both
/// nodes, loses no increment.
#[test]
fn a_write_with_a_post_trigger_from_two_nodes_loses_nothing() -> Result {
    let (a, b) = two_nodes()?;
    let options = WriteOptions {
        post_triggers: vec!["countComment".into()],
        ..WriteOptions::default()
    };
    let acknowledged = concurrently([&a, &b], |posts, post, id| {
        let comment = json!({"id": id, "postId": post, "type": "comment"});
        posts.create_item(post, comment, Some(&options)).map(drop)
    });
    check_counts([&a, &b], &acknowledged)
}

/// Node A over a storage that lets node B commit to `post` right before
/// A's next commit, which then loses its partition (449).
fn a_node_beaten_once(url: &str) -> Result<(Database, Faults)> {
    let storage = FaultyStorage::new(PostgresStorage::connect(url, Default::default())?);
    let faults = storage.faults().clone();
    Ok((
        Database::with_storage(Box::new(storage), Options::default())?,
        faults,
    ))
}

/// Arms `faults` so that node `b` adds the comment `id` to `post` right
/// before the next commit through them.
fn beat_next_commit(faults: &Faults, b: &Database, post: &'static str, id: &str) {
    let posts = b.container("posts").expect("posts");
    let comment = json!({"id": id, "type": "comment"});
    faults.before_next_commit(move || {
        let params = vec![json!(post), comment];
        posts
            .execute_stored_procedure("createComment", post, params, None)
            .expect("node B's call");
    });
}

/// A procedure whose first run lost its commit to another node runs
/// again from scratch: the caller gets the second run's response, logs
/// and statistics only, the second run saw the other node's commit, and
/// nothing of the first run was written.
#[test]
fn a_procedure_that_lost_its_commit_runs_again_from_scratch() -> Result {
    let (url, b) = blog_database()?;
    let (a, faults) = a_node_beaten_once(&url)?;
    let posts = a.container("posts")?;
    posts.create_script(ScriptProperties::stored_procedure(
        "countAndLog",
        r#"function countAndLog(post) {
            var c = getContext().getCollection();
            c.readDocument(c.getAltLink() + '/docs/' + post, function (err, doc) {
                if (err) throw err;
                console.log('saw ' + doc.commentCount);
                doc.commentCount++;
                c.replaceDocument(doc._self, doc, function (err, saved) {
                    if (err) throw err;
                    getContext().getResponse().setBody(saved.commentCount);
                });
            });
        }"#,
    ))?;
    beat_next_commit(&faults, &b, "p0", "from-b");
    let response = posts.execute_stored_procedure("countAndLog", "p0", vec![json!("p0")], None)?;
    assert_eq!(response.logs, "saw 1", "only the run that committed logs");
    assert_eq!(response.body, json!(2), "its response");
    assert_eq!(response.stats.scripts_run, 1, "{:?}", response.stats);
    assert_eq!(response.stats.docs_written, 1, "{:?}", response.stats);
    let counts: Vec<Value> = posts
        .read_changes(Default::default(), usize::MAX)?
        .iter()
        .filter(|c| c.id == "p0")
        .map(|c| c.document.as_ref().expect("a post")["commentCount"].clone())
        .collect();
    assert_eq!(
        counts,
        [json!(0), json!(1), json!(2)],
        "B's, then A's retry"
    );
    Ok(())
}

/// A batch and a write with a post-trigger whose commit another node beat
/// run again and commit on top of the other node's comment: nothing is
/// lost, and the caller sees success.
#[test]
fn a_batch_and_a_triggered_write_that_lost_their_commit_run_again() -> Result {
    let (url, b) = blog_database()?;
    let (a, faults) = a_node_beaten_once(&url)?;
    let posts = a.container("posts")?;
    let incr = Patch::from_json(&json!([{"op": "incr", "path": "/commentCount", "value": 1}]))?;
    beat_next_commit(&faults, &b, "p0", "b1");
    let response = posts.execute_batch(
        "p0",
        vec![
            BatchOperation::create(json!({"id": "a1", "postId": "p0", "type": "comment"})),
            BatchOperation::patch("p0", incr),
        ],
    )?;
    assert!(response.is_success(), "{response:?}");
    assert_eq!(
        response.results[1].resource.as_ref().unwrap()["commentCount"],
        2
    );

    beat_next_commit(&faults, &b, "p0", "b2");
    let options = WriteOptions {
        post_triggers: vec!["countComment".into()],
        ..WriteOptions::default()
    };
    let comment = json!({"id": "a2", "postId": "p0", "type": "comment"});
    posts.create_item("p0", comment, Some(&options))?;
    check_counts(
        [&a, &b],
        &[
            vec!["a1".into(), "a2".into(), "b1".into(), "b2".into()],
            vec![],
        ],
    )
}

/// A node whose import crashed after the durable write (so it refuses
/// writes until it restarts) reads what the store holds, as the other
/// node does: the copy it keeps of the partition is not served once
/// storage moved past it. Its write, which stays, is seen on both.
#[test]
fn a_node_whose_import_crashed_after_the_write_reads_what_the_store_holds() -> Result {
    let (url, b) = blog_database()?;
    let (a, faults) = a_node_beaten_once(&url)?;
    faults.fail_next_commit(engine::testing::CommitFault::after_write("crashed"));
    let posts = a.container("posts")?;
    let comment = json!({"id": "c1", "postId": "p0", "type": "comment"});
    let err = posts
        .import_items(vec![comment], &Default::default(), &mut |_| {})
        .unwrap_err();
    assert_eq!(err.source.status(), 500, "{err}");
    for db in [&a, &b] {
        let ids: Vec<String> = db
            .container("posts")?
            .read_feed("p0", &Default::default())?
            .items
            .iter()
            .map(|d| d.id().to_owned())
            .collect();
        assert_eq!(ids.len(), 2, "the post and the comment: {ids:?}");
    }
    Ok(())
}

/// A procedure that returns `value`.
fn returning(id: &str, value: &str) -> ScriptProperties {
    ScriptProperties::stored_procedure(
        id,
        format!("function {id}() {{ getContext().getResponse().setBody('{value}'); }}"),
    )
}

/// A container one node creates is found, listed and written on the
/// other, which cannot create it again; one it deletes is gone from the
/// other (its handles fail with 404), and one it creates again under the
/// same id is the new, empty one.
#[test]
fn containers_created_and_deleted_on_one_node_are_seen_on_the_other() -> Result {
    let url = engine::testing::postgres::database();
    let (a, b) = (open(&url), open(&url));
    a.create_container("posts", "/postId")?;
    let posts_b = b.container("posts")?;
    posts_b.create_item("p", json!({"id": "d", "postId": "p"}), None)?;
    assert_eq!(a.container("posts")?.read_item("p", "d")?["postId"], "p");
    let ids: Vec<String> = b.containers().into_iter().map(|c| c.id).collect();
    assert_eq!(ids, ["posts"]);
    let err = b.create_container("posts", "/postId").unwrap_err();
    assert_eq!(err.status(), 409, "{err}");

    a.delete_container("posts")?;
    let err = posts_b
        .create_item("p", json!({"id": "e", "postId": "p"}), None)
        .unwrap_err();
    assert_eq!(err.status(), 404, "a write through a handle: {err}");
    assert_eq!(b.container("posts").unwrap_err().status(), 404);
    assert!(b.containers().is_empty());

    a.create_container("posts", "/postId")?;
    let err = b.container("posts")?.read_item("p", "d").unwrap_err();
    assert_eq!(
        err.status(),
        404,
        "the container created again is empty: {err}"
    );
    Ok(())
}

/// Settings one node changes (time to live, computed properties, the
/// indexing policy) apply on the other at its next read or transaction,
/// even with the partition in its memory.
#[test]
fn container_settings_changed_on_one_node_apply_on_the_other() -> Result {
    let (a, b) = two_nodes()?;
    let posts_b = b.container("posts")?;
    // B holds the partition in memory (its transaction loaded it).
    posts_b.transaction("p0", |txn| txn.read_item("p0").map(drop))?;
    let posts_a = a.container("posts")?;
    posts_a.set_default_ttl(Some(3600))?;
    posts_a.set_computed_properties(vec![partita::ComputedProperty::new(
        "cp_upper",
        "SELECT VALUE UPPER(c.id) FROM c",
    )])?;
    let policy = partita::IndexingPolicy::from_json(&json!({
        "compositeIndexes": [[{"path": "/postId"}, {"path": "/id", "order": "descending"}]],
    }))?;
    posts_a.set_indexing_policy(policy.clone())?;

    let page = posts_b.query_items(
        "SELECT VALUE c.cp_upper FROM c WHERE c.id = 'p0'",
        &Default::default(),
        &partita::QueryOptions::partition("p0"),
    )?;
    assert_eq!(
        page.items,
        [json!("P0")],
        "the computed property, in a query"
    );
    let props = posts_b.properties();
    assert_eq!(props.default_ttl, Some(3600));
    assert_eq!(*posts_b.indexing_policy(), policy);
    // And in a transaction on the other partition.
    posts_a.set_default_ttl(None)?;
    posts_b.transaction("p1", |txn| txn.read_item("p1").map(drop))?;
    assert_eq!(posts_b.properties().default_ttl, None);
    Ok(())
}

/// Scripts one node creates, replaces and deletes are what the other
/// runs: a call after the change runs the new version, or fails with 404
/// once it is deleted; triggers likewise.
#[test]
fn scripts_changed_on_one_node_run_on_the_other() -> Result {
    let (a, b) = two_nodes()?;
    let (posts_a, posts_b) = (a.container("posts")?, b.container("posts")?);
    let call = || {
        posts_b
            .execute_stored_procedure("version", "p0", vec![], None)
            .map(|r| r.body)
    };
    posts_a.create_script(returning("version", "v1"))?;
    assert_eq!(call()?, "v1", "created on A");
    posts_a.replace_script(returning("version", "v2"))?;
    assert_eq!(call()?, "v2", "replaced on A");
    posts_a.delete_script(partita::ScriptKind::StoredProcedure, "version")?;
    assert_eq!(call().unwrap_err().status(), 404, "deleted on A");

    let stamp = |value: &str| {
        ScriptProperties::trigger(
            "stamp",
            format!(
                "function stamp() {{ var r = getContext().getRequest(); var d = r.getBody(); d.stamp = '{value}'; r.setBody(d); }}"
            ),
            partita::TriggerType::Pre,
            TriggerOperation::All,
        )
    };
    posts_a.create_script(stamp("v1"))?;
    let options = WriteOptions {
        pre_triggers: vec!["stamp".into()],
        ..WriteOptions::default()
    };
    let write = |id: &str| {
        posts_b
            .create_item("p0", json!({"id": id, "postId": "p0"}), Some(&options))
            .map(|r| r.document()["stamp"].clone())
    };
    assert_eq!(write("s1")?, "v1");
    posts_a.replace_script(stamp("v2"))?;
    assert_eq!(write("s2")?, "v2");
    Ok(())
}

/// Every change delivered by a change-feed processor, as (LSN, id).
type Delivered = Arc<Mutex<Vec<(u64, String)>>>;

/// A handler that records what it is given, and fails (leaving the batch
/// unacknowledged) while `fail` is set, as an instance that dies between
/// delivery and checkpoint would.
fn recording(
    log: &Delivered,
    fail: &Arc<AtomicBool>,
) -> impl FnMut(&ChangeBatch<'_>) -> partita::change_feed::HandlerResult + Send + use<> {
    let (log, fail) = (log.clone(), fail.clone());
    move |batch: &ChangeBatch<'_>| {
        log.lock()
            .unwrap()
            .extend(batch.changes.iter().map(|c| (c.lsn.0, c.id.clone())));
        if fail.load(Ordering::SeqCst) {
            return Err("the instance died before its checkpoint".into());
        }
        Ok(())
    }
}

/// Writes `n` comments into partitions `c0..c5` of `posts`, named `prefix-i`.
fn write_comments(posts: &Container, prefix: &str, n: usize) -> Result {
    for i in 0..n {
        let pk = format!("c{}", i % 6);
        let doc = json!({"id": format!("{prefix}-{i}"), "postId": pk});
        posts.create_item(pk.as_str(), doc, None)?;
    }
    Ok(())
}

/// Two change-feed processors, one per node, on one monitored container
/// and one lease container: they split the physical partitions, each
/// delivers only its own; when one node's instance dies (mid-batch,
/// without its checkpoint), the other takes its leases over once they
/// expire and delivers from the dead one's checkpoints, so every change,
/// written on either node, is delivered at least once. Driven step by
/// step with a clock moved by hand.
#[test]
fn change_feed_leases_are_shared_and_taken_over_across_nodes() -> Result {
    let url = engine::testing::postgres::database();
    let a = open(&url);
    let mut props = partita::ContainerProperties::new("posts", "/postId");
    props.physical_partitions = 4;
    a.create_container_with(props)?;
    a.create_container("leases", "/id")?;
    let b = open(&url);
    let (now, options) = manual_clock();
    let (log_a, log_b) = (Delivered::default(), Delivered::default());
    let (fail_a, fail_b) = (Arc::new(AtomicBool::new(false)), Arc::default());
    let processor = |db: &Database, owner: &str, log: &Delivered, fail: &Arc<AtomicBool>| {
        ChangeFeedProcessor::new(
            &db.container("posts")?,
            &db.container("leases")?,
            "view",
            owner,
            options.clone(),
            recording(log, fail),
        )
    };
    let mut pa = processor(&a, "a", &log_a, &fail_a)?;
    let mut pb = processor(&b, "b", &log_b, &fail_b)?;

    assert_eq!(pa.run_once()?.owned, [0, 1, 2, 3], "alone, a takes all");
    assert_eq!(
        pb.run_once()?.owned.len(),
        1,
        "b, on the other node, steals one"
    );
    assert_eq!(pb.run_once()?.owned.len(), 2, "and another: a fair share");
    let owned_a = pa.run_once()?.owned;
    let owned_b = pb.run_once()?.owned;
    assert_eq!(owned_a.len(), 2, "a noticed the steals: {owned_a:?}");
    assert!(
        owned_a.iter().all(|p| !owned_b.contains(p)),
        "{owned_a:?} {owned_b:?}"
    );

    write_comments(&a.container("posts")?, "a", 12)?;
    write_comments(&b.container("posts")?, "b", 12)?;
    pa.drain()?;
    pb.drain()?;
    let posts = a.container("posts")?;
    for (log, owned) in [(&log_a, &owned_a), (&log_b, &owned_b)] {
        assert!(
            log.lock().unwrap().iter().all(|(_, id)| {
                let key = partita::PartitionKey::from(format!("c{}", id_number(id) % 6));
                owned.contains(&posts.physical_partition(&key))
            }),
            "an instance delivers only its partitions"
        );
    }

    // a's node dies in the middle of its next batches: delivered, never
    // checkpointed. After the lease duration b takes over from a's
    // checkpoints and delivers them again.
    write_comments(&b.container("posts")?, "late", 12)?;
    fail_a.store(true, Ordering::SeqCst);
    assert!(pa.run_once().is_err(), "a's handler fails: no checkpoint");
    drop(pa);
    drop(a);
    assert_eq!(pb.run_once()?.owned, owned_b, "a's leases are not free yet");
    now.fetch_add(11_000, Ordering::SeqCst);
    assert_eq!(
        pb.run_once()?.owned,
        [0, 1, 2, 3],
        "b took a's expired leases"
    );
    pb.drain()?;

    let all: Vec<(u64, String)> = b
        .container("posts")?
        .read_changes(partita::Lsn::ZERO, usize::MAX)?
        .into_iter()
        .map(|c| (c.lsn.0, c.id))
        .collect();
    assert_eq!(all.len(), 36);
    let delivered: std::collections::BTreeSet<(u64, String)> = log_a
        .lock()
        .unwrap()
        .iter()
        .chain(log_b.lock().unwrap().iter())
        .cloned()
        .collect();
    for change in &all {
        assert!(delivered.contains(change), "never delivered: {change:?}");
    }
    let late_by_a: Vec<(u64, String)> = log_a
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, id)| id.starts_with("late-"))
        .cloned()
        .collect();
    assert!(
        !late_by_a.is_empty(),
        "a delivered some of the late changes"
    );
    let log_b = log_b.lock().unwrap();
    for change in &late_by_a {
        assert!(
            log_b.contains(change),
            "b delivered again what a never checkpointed: {change:?}"
        );
    }
    Ok(())
}

/// The number after the dash of a comment id written by [`write_comments`].
fn id_number(id: &str) -> usize {
    id.rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: bound("PARTITA_PG_MODEL_CASES", 8) as u32,
        max_shrink_iters: 50,
        ..Default::default()
    })]

    /// The model-based test's steps, spread over several nodes on one
    /// PostgreSQL database (see the module docs).
    #[test]
    fn nodes_match_the_model(steps in model::steps(30)) {
        let url = engine::testing::postgres::database();
        model::run(Store::Postgres(url), bound("PARTITA_PG_MODEL_NODES", 3), steps)?;
    }
}
