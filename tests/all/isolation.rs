//! JavaScript in worker processes (`Limits::workers`): the same results as
//! in process, and the bounds boa cannot enforce in process (a string
//! doubled with `+` until an allocation fails, a prototype chain deeper than
//! the native stack, a loop that never calls the host) each fail one call
//! with a 408, roll it back, and leave the host and the pool serving.
//!
//! The workers are `bin/script_worker.rs`, a program whose `main` is
//! `partita::worker_main()`, as an embedding application's would be.

use partita::{
    Container, Database, Error, Limits, ScriptProperties, TriggerOperation, TriggerType,
    WorkerOptions, WorkerPool, WriteOptions,
};
use partita_workload::blog;
use runtime::{Budget, Error as ScriptError};
use serde_json::{Value, json};
use std::time::Duration;

use crate::support::js;

type Result<T = ()> = anyhow::Result<T>;

/// Workers with the default limits: 2 GiB of address space, of which the
/// worker itself maps about 1.2 GB (mimalloc reserves 1 GiB up front).
fn pool() -> WorkerPool {
    WorkerPool::new(WorkerOptions::new(
        env!("CARGO_BIN_EXE_script-worker"),
        Vec::<String>::new(),
    ))
}

fn isolated(pool: &WorkerPool) -> Limits {
    Limits {
        workers: Some(pool.clone()),
        ..Limits::default()
    }
}

/// The posts container with post p1 and createComment.
fn posts(db: &Database) -> Result<Container> {
    let posts = db.create_container("posts", "/postId")?;
    posts.create_item("p1", blog::post("p1", "u1", 1), None)?;
    posts.create_script(ScriptProperties::stored_procedure(
        "createComment",
        js("createComment"),
    ))?;
    Ok(posts)
}

fn procedure(posts: &Container, id: &str, body: &str) -> Result {
    posts.create_script(ScriptProperties::stored_procedure(id, body))?;
    Ok(())
}

/// The bound that stopped a failed call.
fn budget(err: Error) -> Budget {
    match err {
        Error::Script(failure) => match failure.error {
            ScriptError::Budget(budget) => budget,
            other => panic!("not a budget: {other}"),
        },
        Error::Engine(e) => panic!("not a script failure: {e}"),
    }
}

fn outcome<T: Into<Value>>(result: std::result::Result<T, Error>) -> Value {
    match result {
        Ok(value) => value.into(),
        Err(e) => {
            json!({"status": e.status(), "substatus": e.substatus(), "message": e.to_string()})
        }
    }
}

/// Executes procedure `id` on partition p1 under `limits`: what the caller
/// sees of it, its document counters and charge included.
fn execute(posts: &Container, limits: &Limits, id: &str, params: Vec<Value>) -> Value {
    let options = partita::ProcedureOptions {
        limits: Some(limits.clone()),
        ..Default::default()
    };
    outcome(
        posts
            .execute_stored_procedure(id, "p1", params, Some(&options))
            .map(|r| {
                json!({
                    "body": r.body,
                    "logs": r.logs,
                    "read": r.stats.docs_read,
                    "bytes read": r.stats.bytes_read,
                    "written": r.stats.docs_written,
                    "bytes written": r.stats.bytes_written,
                    "instructions": r.stats.instructions,
                    "charge": r.request_charge(),
                })
            }),
    )
}

/// Partition p1's documents, without the system properties that differ
/// between two runs (`_ts`, `_etag`, and `_rid` and `_self` when a voided
/// run may have left gaps in the rids).
fn documents(posts: &Container, with_rids: bool) -> Result<Vec<Value>> {
    let volatile: &[&str] = if with_rids {
        &["_ts", "_etag"]
    } else {
        &["_ts", "_etag", "_rid", "_self"]
    };
    Ok(posts
        .read_feed("p1", &Default::default())?
        .items
        .into_iter()
        .map(|doc| {
            let mut value = doc.into_value();
            if let Some(object) = value.as_object_mut() {
                for system in volatile {
                    object.remove(*system);
                }
            }
            value
        })
        .collect())
}

/// Every kind of host round trip a script makes, and every way a call ends,
/// under `limits`: the responses, then the partition's documents.
fn scenario(limits: &Limits) -> Result<(Vec<Value>, Vec<Value>)> {
    let db = Database::in_memory();
    let posts = posts(&db)?;
    procedure(
        &posts,
        "bySelfLink",
        r#"function (id) {
            var c = getContext().getCollection();
            c.queryDocuments(c.getSelfLink(), "SELECT * FROM c WHERE c.id = '" + id + "'",
                function (err, docs) {
                    if (err) throw err;
                    c.readDocument(docs[0]._self, function (err, d) {
                        if (err) throw err;
                        console.log("read " + d.id);
                        getContext().getResponse().setBody(d.commentCount);
                    });
                });
        }"#,
    )?;
    // A `_self` the worker learned from a write resolves without a round
    // trip, until the document is deleted.
    procedure(
        &posts,
        "selfAfterDelete",
        r#"function () {
            var c = getContext().getCollection();
            c.createDocument(c.getSelfLink(), {id: "tmp", postId: "p1"}, function (err, d) {
                if (err) throw err;
                c.readDocument(d._self, function (err, again) {
                    if (err) throw err;
                    c.deleteDocument(again._self, function (err) {
                        if (err) throw err;
                        c.readDocument(d._self, function (err) {
                            getContext().getResponse().setBody(err ? err.number : "found");
                        });
                    });
                });
            });
        }"#,
    )?;
    posts.create_script(ScriptProperties::trigger(
        "stamp",
        "function () { var r = getContext().getRequest(); var d = r.getBody(); d.stamped = true; r.setBody(d); }",
        TriggerType::Pre,
        TriggerOperation::All,
    ))?;
    posts.create_script(ScriptProperties::trigger(
        "echo",
        "function () { var r = getContext().getResponse(); console.log('wrote ' + r.getBody().id); }",
        TriggerType::Post,
        TriggerOperation::All,
    ))?;
    posts.create_script(ScriptProperties::user_defined_function(
        "double",
        "function (x) { return x * 2; }",
    ))?;
    let call = |id: &str, params: Vec<Value>| execute(&posts, limits, id, params);
    let mut responses = vec![
        call(
            "createComment",
            vec![json!("p1"), json!({"id": "c1", "text": "hi"})],
        ),
        // A rethrown operation error: 400 with the 409 as substatus.
        call("createComment", vec![json!("p1"), json!({"id": "c1"})]),
        call("createComment", vec![json!("p9"), json!({"id": "c2"})]),
        call("bySelfLink", vec![json!("p1")]),
        call("selfAfterDelete", vec![]),
    ];
    let options = WriteOptions {
        pre_triggers: vec!["stamp".into()],
        post_triggers: vec!["echo".into()],
        limits: Some(limits.clone()),
        ..WriteOptions::default()
    };
    responses.push(outcome(
        posts
            .create_item("p1", json!({"id": "x", "postId": "p1"}), Some(&options))
            .map(|r| json!({"stamped": r.resource.map(|d| d["stamped"].clone()), "logs": r.logs})),
    ));
    let page = posts.query_items(
        "SELECT VALUE udf.double(c.commentCount) FROM c WHERE c.id = 'p1'",
        &Default::default(),
        &partita::QueryOptions {
            limits: Some(limits.clone()),
            ..Default::default()
        },
    )?;
    responses.push(json!(page.items));
    Ok((responses, documents(&posts, true)?))
}

#[test]
fn a_worker_gives_the_same_responses_and_state_as_in_process() -> Result {
    let pool = pool();
    let (in_process, in_process_state) = scenario(&Limits::default())?;
    let (in_worker, in_worker_state) = scenario(&isolated(&pool))?;
    assert_eq!(in_worker, in_process);
    assert_eq!(in_worker_state, in_process_state);
    assert_eq!(in_process[0]["written"], 2, "{}", in_process[0]);
    assert_eq!(in_process[1]["substatus"], 409, "{}", in_process[1]);
    assert_eq!(in_process[2]["substatus"], 404, "{}", in_process[2]);
    assert_eq!(in_process[3]["body"], 1, "{}", in_process[3]);
    assert_eq!(in_process[4]["body"], 404, "{}", in_process[4]);
    assert_eq!(in_process[5]["stamped"], true, "{}", in_process[5]);
    assert_eq!(in_process[6], json!([2]));
    assert_eq!(pool.stats().lost, 0);
    assert_eq!(pool.stats().started, 1, "one call at a time: one worker");
    Ok(())
}

/// A write, then the script does `what`: the call must fail with a 408 and
/// leave no trace of the write; then the pool serves the next call.
fn fails_and_recovers(what: &str, limits: impl FnOnce(Limits) -> Limits) -> Result<Budget> {
    let db = Database::in_memory();
    let posts = posts(&db)?;
    procedure(
        &posts,
        "hostile",
        &format!(
            r#"function () {{
                var c = getContext().getCollection();
                c.createDocument(c.getSelfLink(), {{id: "w", postId: "p1"}}, function (err) {{
                    if (err) throw err;
                    {what}
                }});
            }}"#
        ),
    )?;
    let pool = pool();
    let limits = limits(isolated(&pool));
    let err = posts
        .execute_stored_procedure(
            "hostile",
            "p1",
            vec![],
            Some(&partita::ProcedureOptions {
                limits: Some(limits.clone()),
                ..Default::default()
            }),
        )
        .unwrap_err();
    assert_eq!(err.status(), 408, "{err}");
    let budget = budget(err);
    assert!(
        posts.read_item("p1", "w").is_err(),
        "the write before the failure was rolled back"
    );
    assert_eq!(pool.stats().lost, 1);
    // The host and the pool go on: a fresh worker takes the next call. It
    // runs with the pool's ordinary bounds, not the hostile call's tight
    // ones: starting a worker on a loaded machine can take longer than a
    // tight wall clock, and this call checks recovery, not timing.
    posts.execute_stored_procedure(
        "createComment",
        "p1",
        vec![json!("p1"), json!({"text": "after"})],
        Some(&partita::ProcedureOptions {
            limits: Some(isolated(&pool)),
            ..Default::default()
        }),
    )?;
    assert_eq!(posts.read_item("p1", "p1")?["commentCount"], 1);
    assert_eq!(pool.stats().started, 2);
    Ok(budget)
}

#[test]
fn a_string_doubled_with_plus_fails_its_call_not_the_host() -> Result {
    // In process this aborts: boa concatenates eagerly and an allocation
    // failure is fatal. In a worker it meets the address-space limit.
    let budget = fails_and_recovers(
        "var s = '0123456789abcdef'; while (true) { s = s + s; }",
        // Reaching the limit takes seconds on a busy machine: the wall
        // clock must not be what stops it.
        |l| Limits {
            wall_time: Duration::from_secs(120),
            accept_wall_time: Duration::from_secs(100),
            ..l
        },
    )?;
    match budget {
        Budget::Memory { limit, what } => {
            assert_eq!(limit, 2 << 30);
            assert!(what.contains("worker process"), "{what}");
        }
        other => panic!("{other}"),
    }
    Ok(())
}

#[test]
fn a_prototype_chain_deeper_than_the_native_stack_fails_its_call() -> Result {
    // boa sets `new F()`'s prototype in bytecode, where no guard sees it,
    // and looks a missing property up the chain recursively in Rust.
    let budget = fails_and_recovers(
        "var o = {}; for (var i = 0; i < 100000; i++) { function F() {} F.prototype = o; o = new F(); }
         getContext().getResponse().setBody(o.missing === undefined);",
        // Building the chain takes seconds in a debug build on a busy
        // machine: the wall clock must not be what stops it.
        |l| Limits {
            wall_time: Duration::from_secs(120),
            accept_wall_time: Duration::from_secs(100),
            ..l
        },
    )?;
    assert_eq!(
        budget,
        Budget::NativeStack {
            limit: partita::SCRIPT_THREAD_STACK
        }
    );
    Ok(())
}

#[test]
fn the_wall_clock_stops_code_that_never_calls_the_host() -> Result {
    // In process the wall clock is only read at host calls, and this loop
    // makes none: only the instruction budget, here out of reach, stops it.
    // The clock is seconds, not milliseconds: the write before the loop must
    // still be accepted when a loaded machine is slow to start the worker.
    let budget = fails_and_recovers("var x = 0; for (;;) { x++; }", |l| Limits {
        instructions: u64::MAX / 4,
        accept_instructions: u64::MAX / 4,
        wall_time: Duration::from_secs(3),
        accept_wall_time: Duration::from_secs(2),
        ..l
    })?;
    assert_eq!(
        budget,
        Budget::WallTime {
            limit: Duration::from_secs(3)
        }
    );
    Ok(())
}

#[test]
fn no_state_survives_from_one_call_to_the_next_in_a_worker() -> Result {
    let db = Database::in_memory();
    let posts = posts(&db)?;
    procedure(
        &posts,
        "pollute",
        "function () { globalThis.leak = 42; Object.prototype.polluted = 1; Array.prototype.push = null; }",
    )?;
    procedure(
        &posts,
        "look",
        "function () { var a = []; a.push(1); getContext().getResponse().setBody([typeof leak, ({}).polluted === undefined, a.length]); }",
    )?;
    let pool = pool();
    let limits = isolated(&pool);
    posts.execute_stored_procedure(
        "pollute",
        "p1",
        vec![],
        Some(&partita::ProcedureOptions {
            limits: Some(limits.clone()),
            ..Default::default()
        }),
    )?;
    let seen = posts.execute_stored_procedure(
        "look",
        "p1",
        vec![],
        Some(&partita::ProcedureOptions {
            limits: Some(limits.clone()),
            ..Default::default()
        }),
    )?;
    assert_eq!(seen.body, json!(["undefined", true, 1]));
    assert_eq!(pool.stats().started, 1, "the same worker ran both calls");
    Ok(())
}

#[test]
fn concurrent_calls_in_workers_stay_atomic() -> Result {
    let db = Database::in_memory();
    let posts = posts(&db)?;
    let pool = pool();
    let limits = isolated(&pool);
    std::thread::scope(|s| {
        for t in 0..4 {
            let (posts, limits) = (&posts, &limits);
            s.spawn(move || {
                for i in 0..10 {
                    posts
                        .execute_stored_procedure(
                            "createComment",
                            "p1",
                            vec![json!("p1"), json!({"id": format!("c{t}-{i}")})],
                            Some(&partita::ProcedureOptions {
                                limits: Some(limits.clone()),
                                ..Default::default()
                            }),
                        )
                        .expect("createComment");
                }
            });
        }
    });
    let count = posts.read_item("p1", "p1")?["commentCount"].clone();
    let comments = posts.read_feed("p1", &Default::default())?.items.len() - 1;
    assert_eq!((count, comments), (json!(40), 40));
    let stats = pool.stats();
    assert!((1..=4).contains(&stats.started), "{stats:?}");
    assert_eq!(stats.lost, 0);
    Ok(())
}

#[test]
fn a_broken_or_missing_worker_program_is_a_500_not_a_panic() -> Result {
    let db = Database::in_memory();
    let posts = posts(&db)?;
    let broken = |program: &str, args: &[&str]| {
        let pool = WorkerPool::new(WorkerOptions::new(program, args.iter().copied()));
        let err = posts
            .execute_stored_procedure(
                "createComment",
                "p1",
                vec![json!("p1"), json!({})],
                Some(&partita::ProcedureOptions {
                    limits: Some(isolated(&pool).clone()),
                    ..Default::default()
                }),
            )
            .unwrap_err();
        assert_eq!(err.status(), 500, "{err}");
        err.to_string()
    };
    let missing = broken("/nonexistent/worker", &[]);
    assert!(
        missing.contains("cannot start the script worker"),
        "{missing}"
    );
    // Four bytes that claim a 1.6 GB frame.
    let garbage = broken("/bin/sh", &["-c", "printf garbage; sleep 5"]);
    assert!(garbage.contains("frame"), "{garbage}");
    let quits = broken("/bin/sh", &["-c", "echo bye >&2"]);
    assert!(
        quits.contains("bye"),
        "its last words are in the error: {quits}"
    );
    assert_eq!(posts.read_item("p1", "p1")?["commentCount"], 0);
    Ok(())
}

#[test]
fn the_in_process_bounds_hold_in_a_worker_without_costing_it() -> Result {
    let db = Database::in_memory();
    let posts = posts(&db)?;
    let pool = pool();
    let limits = Limits {
        instructions: 2_000_000,
        accept_instructions: 1_000_000,
        ..isolated(&pool)
    };
    // The script, its status, and what its bound must be (for a 408).
    type Case = (&'static str, u16, fn(&Budget) -> bool);
    let cases: [Case; 5] = [
        ("while (true) {}", 408, |b| {
            matches!(b, Budget::Instructions { .. })
        }),
        (
            "'x'.repeat(Math.pow(2, 28));",
            408,
            |b| matches!(b, Budget::Memory { what, .. } if !what.contains("worker")),
        ),
        ("function f() { return f() + 1; } f();", 408, |b| {
            matches!(b, Budget::Recursion { .. })
        }),
        (
            "getContext().getCollection().createDocument(getContext().getCollection().getSelfLink(), {id: 'b', postId: 'p2'});",
            400,
            |_| true,
        ),
        ("eval('1');", 400, |_| true),
    ];
    for (i, (body, status, bound)) in cases.into_iter().enumerate() {
        let id = format!("case{i}");
        procedure(&posts, &id, &format!("function () {{ {body} }}"))?;
        let err = posts
            .execute_stored_procedure(
                &id,
                "p1",
                vec![],
                Some(&partita::ProcedureOptions {
                    limits: Some(limits.clone()),
                    ..Default::default()
                }),
            )
            .unwrap_err();
        assert_eq!(err.status(), status, "{body}: {err}");
        if status == 408 {
            let budget = budget(err);
            assert!(bound(&budget), "{body}: {budget}");
        }
    }
    let stats = pool.stats();
    assert_eq!(
        (stats.started, stats.lost),
        (1, 0),
        "the worker's own sandbox stopped each of these"
    );
    Ok(())
}

/// The children of this process running `program` (by the name the
/// kernel keeps for it, which zombies keep too), with their states
/// (`"Z"`: exited, not reaped).
fn children_running(program: &std::path::Path) -> Vec<(u32, String)> {
    let me = std::process::id();
    let name = program.file_name().expect("a file name").to_string_lossy();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces.
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let (Some((_, rest)), Some((_, comm))) = (stat.rsplit_once(')'), stat.split_once('('))
        else {
            continue;
        };
        let comm = comm.rsplit_once(')').map_or(comm, |(c, _)| c);
        let mut fields = rest.split_whitespace();
        let (state, ppid) = (
            fields.next(),
            fields.next().and_then(|p| p.parse::<u32>().ok()),
        );
        if ppid == Some(me) && name.starts_with(comm) {
            found.push((pid, state.unwrap_or_default().to_owned()));
        }
    }
    found
}

#[test]
fn an_idle_worker_killed_from_outside_is_replaced_without_failing_a_call() -> Result {
    // A program path of this test's own, so only its workers are killed.
    let dir = tempfile::tempdir()?;
    let program = dir.path().join("own-worker");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_script-worker"), &program)?;
    let pool = WorkerPool::new(WorkerOptions::new(&program, Vec::<String>::new()));
    let limits = isolated(&pool);
    let db = Database::in_memory();
    let posts = posts(&db)?;
    let comment = || {
        posts.execute_stored_procedure(
            "createComment",
            "p1",
            vec![json!("p1"), json!({})],
            Some(&partita::ProcedureOptions {
                limits: Some(limits.clone()),
                ..Default::default()
            }),
        )
    };
    comment()?;
    let idle = children_running(&program);
    assert_eq!(idle.len(), 1, "one idle worker: {idle:?}");
    let killed = std::process::Command::new("kill")
        .args(["-9", &idle[0].0.to_string()])
        .status()?;
    assert!(killed.success());
    // Wait until the pool's `try_wait` would reap it. The leader shows
    // `Z` in /proc while the worker's other threads are still exiting,
    // and until they are gone the kernel says it is running.
    let pid = rustix::process::Pid::from_raw(idle[0].0 as i32).expect("a pid");
    let exited = rustix::process::WaitIdOptions::EXITED
        | rustix::process::WaitIdOptions::NOHANG
        | rustix::process::WaitIdOptions::NOWAIT;
    while rustix::process::waitid(rustix::process::WaitId::Pid(pid), exited)?.is_none() {
        std::thread::sleep(Duration::from_millis(1));
    }
    comment()?;
    assert_eq!(posts.read_item("p1", "p1")?["commentCount"], 2);
    let stats = pool.stats();
    assert_eq!(
        (stats.started, stats.lost),
        (2, 0),
        "the dead worker was replaced before the call was sent"
    );
    assert_eq!(
        children_running(&program).len(),
        1,
        "the dead one was reaped"
    );
    Ok(())
}

#[test]
fn workers_beyond_the_idle_limit_are_reaped() -> Result {
    let dir = tempfile::tempdir()?;
    let program = dir.path().join("spare-worker");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_script-worker"), &program)?;
    let pool = WorkerPool::new(WorkerOptions {
        max_idle: 0,
        ..WorkerOptions::new(&program, Vec::<String>::new())
    });
    let db = Database::in_memory();
    let posts = posts(&db)?;
    for _ in 0..3 {
        posts.execute_stored_procedure(
            "createComment",
            "p1",
            vec![json!("p1"), json!({})],
            Some(&partita::ProcedureOptions {
                limits: Some(isolated(&pool).clone()),
                ..Default::default()
            }),
        )?;
    }
    assert_eq!(pool.stats().started, 3, "none was kept");
    let left = children_running(&program);
    assert!(left.is_empty(), "no worker or zombie is left: {left:?}");
    Ok(())
}

/// A pool whose workers take queued calls as soon as one of them runs,
/// started as `program` (a link to the worker, so that a test can find
/// its own workers).
fn queueing_pool(program: &std::path::Path) -> WorkerPool {
    WorkerPool::new(WorkerOptions {
        running: 1,
        ..WorkerOptions::new(program, Vec::<String>::new())
    })
}

fn worker_link(dir: &tempfile::TempDir, name: &str) -> Result<std::path::PathBuf> {
    let program = dir.path().join(name);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_script-worker"), &program)?;
    Ok(program)
}

fn comment_on(posts: &Container, limits: &Limits, post: &str, id: &str) -> partita::Result<Value> {
    posts
        .execute_stored_procedure(
            "createComment",
            post,
            vec![json!(post), json!({ "id": id })],
            Some(&partita::ProcedureOptions {
                limits: Some(limits.clone()),
                ..Default::default()
            }),
        )
        .map(|response| response.body)
}

#[test]
fn calls_queued_behind_each_other_in_a_worker_stay_atomic() -> Result {
    let dir = tempfile::tempdir()?;
    let pool = queueing_pool(&worker_link(&dir, "queue-worker")?);
    let limits = isolated(&pool);
    let calls = 25;
    // A call queues only behind a worker that began or ended a call in the
    // last 10 ms, which a loaded machine can miss for a whole round: up to
    // five rounds, each checked, until one call queued.
    for _ in 0..5 {
        let db = Database::in_memory();
        let posts = posts(&db)?;
        for t in 2..=4 {
            let post = format!("p{t}");
            posts.create_item(post.as_str(), blog::post(&post, "u1", 1), None)?;
        }
        std::thread::scope(|s| {
            for t in 1..=4 {
                let (posts, limits) = (&posts, &limits);
                s.spawn(move || {
                    for i in 0..calls {
                        comment_on(posts, limits, &format!("p{t}"), &format!("c{t}-{i}"))
                            .expect("createComment");
                    }
                });
            }
        });
        for t in 1..=4 {
            let post = format!("p{t}");
            let count = posts.read_item(post.as_str(), &post)?["commentCount"].clone();
            let comments = posts
                .read_feed(post.as_str(), &Default::default())?
                .items
                .len()
                - 1;
            assert_eq!((count, comments), (json!(calls), calls), "{post}");
        }
        if pool.stats().queued > 0 {
            break;
        }
    }
    let stats = pool.stats();
    assert!(
        stats.queued > 0,
        "four callers on one running worker queue: {stats:?}"
    );
    assert_eq!((stats.lost, stats.reruns), (0, 0), "{stats:?}");
    Ok(())
}

/// Starts `first` on post p1 in a thread and, as soon as its worker has
/// taken it, a createComment on p2, until the second call was queued
/// behind the first and then moved (up to ten tries: the queue only takes
/// a call while the call ahead began within 10 ms, which a loaded machine
/// can miss). With `never_ends`, the
/// first call runs until its workers are killed, which happens after the
/// second call returned. The workers are `name` (a name of the test's
/// own: it kills them by name). Returns the first call's outcome and the
/// pool's statistics.
fn queued_behind(
    name: &str,
    first: &str,
    first_limits: impl Fn(Limits) -> Limits,
    never_ends: bool,
) -> Result<(Value, String)> {
    let dir = tempfile::tempdir()?;
    let program = worker_link(&dir, name)?;
    let mut last = None;
    for _ in 0..10 {
        let db = Database::in_memory();
        let posts = posts(&db)?;
        posts.create_item("p2", blog::post("p2", "u1", 1), None)?;
        procedure(&posts, "first", first)?;
        let pool = queueing_pool(&program);
        let limits = isolated(&pool);
        let slow_limits = first_limits(limits.clone());
        let (first_outcome, second) = std::thread::scope(|s| {
            let slow = s.spawn(|| {
                let options = partita::ProcedureOptions {
                    limits: Some(slow_limits.clone()),
                    ..Default::default()
                };
                let result = posts.execute_stored_procedure("first", "p1", vec![], Some(&options));
                outcome(result.map(|r| r.body))
            });
            while pool.stats().started == 0 {
                std::thread::yield_now();
            }
            let second = comment_on(&posts, &limits, "p2", "c1");
            if never_ends {
                assert!(
                    !slow.is_finished(),
                    "the second call did not wait for the first"
                );
                for (pid, _) in children_running(&program) {
                    let _ = std::process::Command::new("kill")
                        .args(["-9", &pid.to_string()])
                        .status();
                }
            }
            (slow.join().expect("the first call's thread"), second)
        });
        // Wherever it ran, the second call ran once and whole.
        second?;
        assert_eq!(posts.read_item("p2", "p2")?["commentCount"], 1);
        assert_eq!(posts.read_feed("p2", &Default::default())?.items.len(), 2);
        let stats = pool.stats();
        last = Some((first_outcome, format!("{stats:?}")));
        if stats.moved > 0 {
            assert!(stats.queued > 0, "{stats:?}");
            return Ok(last.expect("set above"));
        }
    }
    anyhow::bail!("the second call never queued behind the first: {last:?}")
}

#[test]
fn a_call_queued_behind_a_long_one_runs_in_another_worker() -> Result {
    // The first call would run for its whole wall clock (ten minutes, a
    // ceiling that only a hang reaches); the second leaves the queue and
    // returns while it runs, then the test kills the first one's worker.
    let (first, stats) = queued_behind(
        "long-ahead",
        "function () { while (true) {} }",
        |l| Limits {
            wall_time: Duration::from_secs(600),
            ..l
        },
        true,
    )?;
    assert_eq!(
        first["status"], 500,
        "the worker was killed: {first} {stats}"
    );
    Ok(())
}

#[test]
fn a_call_queued_behind_one_that_kills_its_worker_runs_in_another() -> Result {
    let (first, stats) = queued_behind(
        "dying-ahead",
        "function () { var s = '0123456789abcdef'; while (true) { s = s + s; } }",
        |l| l,
        false,
    )?;
    assert_eq!(first["status"], 408, "{first} {stats}");
    Ok(())
}

/// Calls that exercise the worker's two shortcuts, reading ahead the
/// document a procedure began with last time and not waiting for a write
/// whose callback sees only the error, each where it pays and where it
/// guesses wrong: the responses (body, logs, document counters), then the
/// partition's documents.
fn shortcuts(limits: &Limits) -> Result<(Vec<Value>, Vec<Value>)> {
    let db = Database::in_memory();
    let posts = posts(&db)?;
    // Replaces the post only if its etag is `etag`; on a 412 it writes a
    // `fallback` document instead. The replace's callback sees only the
    // error, so a worker goes on as if it succeeded, then runs the call
    // again when it did not.
    procedure(
        &posts,
        "guarded",
        r#"function (id, etag) {
            var c = getContext().getCollection();
            c.readDocument(c.getAltLink() + "/docs/" + id, function (err, post) {
                if (err) throw err;
                console.log("read " + post.id);
                post.guarded = true;
                // A write that succeeds before the one that may fail: a
                // run again must not find it written.
                c.createDocument(c.getSelfLink(), {id: "try-" + etag.length, postId: id},
                    function (err) {
                if (err) throw err;
                c.replaceDocument(post._self, post, {etag: etag}, function (err) {
                    if (err) {
                        console.log("lost the race: " + err.number);
                        c.createDocument(c.getSelfLink(), {id: "fallback", postId: id},
                            function (err) {
                                if (err) throw err;
                                getContext().getResponse().setBody("fell back");
                            });
                        return;
                    }
                    console.log("replaced");
                    c.createDocument(c.getSelfLink(), {id: "won-" + etag.length, postId: id});
                    getContext().getResponse().setBody("replaced");
                });
                });
            });
        }"#,
    )?;
    // Reads `id` first when `first`, so the pool learns to read it ahead;
    // otherwise writes it before reading it, which must see the write, not
    // the document read ahead.
    procedure(
        &posts,
        "writeThenRead",
        r#"function (id, first) {
            var c = getContext().getCollection();
            var link = c.getAltLink() + "/docs/" + id;
            function show(err, doc) {
                if (err) throw err;
                getContext().getResponse().setBody(doc.commentCount);
            }
            if (first) {
                c.readDocument(link, show);
                return;
            }
            c.upsertDocument(c.getSelfLink(), {id: id, postId: id, commentCount: 42}, function (err) {
                if (err) throw err;
                c.readDocument(link, show);
            });
        }"#,
    )?;
    // The code that assumes success never ends: the failed write must stop
    // it at once, not at the wall clock.
    procedure(
        &posts,
        "loopOnSuccess",
        r#"function () {
            var c = getContext().getCollection();
            c.replaceDocument(c.getAltLink() + "/docs/p1", {id: "p1", postId: "p1"},
                {etag: "\"stale\""}, function (err) {
                    if (!err) { while (true) {} }
                    getContext().getResponse().setBody("handled " + err.number);
                });
        }"#,
    )?;
    // A callback that reads `arguments` sees the document: never speculated.
    procedure(
        &posts,
        "countArguments",
        r#"function () {
            var c = getContext().getCollection();
            c.createDocument(c.getSelfLink(), {id: "counted", postId: "p1"}, function (err) {
                if (err) throw err;
                getContext().getResponse().setBody([arguments.length, arguments[1].id]);
            });
        }"#,
    )?;
    let call = |id: &str, params: Vec<Value>| execute(&posts, limits, id, params);
    let guarded = |etag: Option<Value>| {
        let etag = match etag {
            Some(etag) => etag,
            None => posts.read_item("p1", "p1")?["_etag"].clone(),
        };
        anyhow::Ok(call("guarded", vec![json!("p1"), etag]))
    };
    let responses = vec![
        // The first call teaches the pool to read params[0] ahead; the
        // second uses it, and speculates the replace.
        call("createComment", vec![json!("p1"), json!({"id": "c1"})]),
        call("createComment", vec![json!("p1"), json!({"id": "c2"})]),
        // Read ahead, the post is missing: the script finds out itself.
        call("createComment", vec![json!("p9"), json!({"id": "c3"})]),
        // A speculated write that succeeds.
        guarded(None)?,
        // One that fails: run again, nothing of the first run is left.
        guarded(Some(json!("\"stale\"")))?,
        // Learned to read p1 ahead, then wrote it before reading it.
        call("writeThenRead", vec![json!("p1"), json!(true)]),
        call("writeThenRead", vec![json!("p1"), json!(false)]),
        call("countArguments", vec![]),
        call("loopOnSuccess", vec![]),
    ];
    // A voided run leaves gaps in the rids (allowed), so they differ.
    Ok((responses, documents(&posts, false)?))
}

#[test]
fn reading_ahead_and_speculating_change_nothing_a_script_or_caller_sees() -> Result {
    let pool = pool();
    let (in_process, in_process_state) = shortcuts(&Limits::default())?;
    let (in_worker, in_worker_state) = shortcuts(&isolated(&pool))?;
    assert_eq!(in_worker, in_process);
    assert_eq!(in_worker_state, in_process_state);
    assert_eq!(in_process[1]["read"], 1, "{}", in_process[1]);
    assert_eq!(in_process[2]["substatus"], 404, "{}", in_process[2]);
    assert_eq!(in_process[3]["body"], "replaced", "{}", in_process[3]);
    assert_eq!(in_process[4]["body"], "fell back", "{}", in_process[4]);
    assert_eq!(
        in_process[4]["logs"], "read p1lost the race: 412",
        "{}",
        in_process[4]
    );
    assert_eq!(in_process[6]["body"], 42, "{}", in_process[6]);
    assert_eq!(in_process[7]["body"], json!([3, "counted"]));
    assert_eq!(in_process[8]["body"], "handled 412", "{}", in_process[8]);
    let ids: Vec<&str> = in_process_state
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    assert!(ids.contains(&"fallback"), "{ids:?}");
    assert_eq!(
        ids.iter().filter(|id| id.starts_with("won-")).count(),
        1,
        "only the call that won wrote one, not the voided run: {ids:?}"
    );
    let stats = pool.stats();
    assert!(stats.read_ahead >= 2, "{stats:?}");
    assert!(stats.speculated >= 3, "{stats:?}");
    assert_eq!(stats.reruns, 2, "{stats:?}");
    assert_eq!(stats.lost, 0, "{stats:?}");
    Ok(())
}

/// A document created without an id gets the same generated id in a worker
/// as in process when the thread's generator is seeded (what the fuzzer
/// relies on to compare a faulted call with its clean rerun), and a new one
/// on every unseeded call.
#[test]
fn generated_ids_follow_the_calling_threads_seed_in_workers() -> Result {
    let pool = pool();
    let comment_id = |limits: &Limits, seed: Option<u64>| -> Result<String> {
        let db = Database::in_memory();
        let posts = posts(&db)?;
        if let Some(seed) = seed {
            runtime::seed_generated_ids(seed);
        }
        posts.execute_stored_procedure(
            "createComment",
            "p1",
            vec![json!("p1"), json!({"text": "hi"})],
            Some(&partita::ProcedureOptions {
                limits: Some(limits.clone()),
                ..Default::default()
            }),
        )?;
        let page = posts.query_items(
            "SELECT VALUE c.id FROM c WHERE c.text = 'hi'",
            &Default::default(),
            &Default::default(),
        )?;
        Ok(page.items[0].as_str().unwrap_or_default().to_owned())
    };
    let in_process = comment_id(&Limits::default(), Some(7))?;
    let in_worker = comment_id(&isolated(&pool), Some(7))?;
    assert_eq!(in_worker, in_process, "the same seed, the same id");
    let next = comment_id(&isolated(&pool), None)?;
    assert_ne!(next, in_worker, "an unseeded call after it gets a new id");
    let again = comment_id(&isolated(&pool), None)?;
    assert_ne!(again, next);
    Ok(())
}
