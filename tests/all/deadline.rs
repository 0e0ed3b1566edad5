//! Transactions with a deadline: a writer waiting for a partition whose
//! transaction ran past its deadline takes the partition over, the stuck
//! transaction can never commit, and a commit under way is never revoked.
//! The stuck holder is a thread blocked on a channel (for a script stuck
//! in a native built-in), and, through the facade, a JavaScript procedure
//! and a pre-trigger held inside their write by the database's clock.
//!
//! Nothing here asserts a timing: the tests wait past deadlines (sleeps are
//! lower bounds) and a hang is caught by the lock timeout or a ceiling.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine::storage::{
    Change, CommitRecord, ContainerMeta, LoadedContainer, LoadedDocument, Lsn, MemoryStorage,
    ScriptRecord, Storage,
};
use engine::{Database, Error, Options, PartitionKey, ScriptKind};
use serde_json::json;

type Result<T = ()> = anyhow::Result<T>;

/// A hang ceiling for waiting on another thread.
const CEILING: Duration = Duration::from_secs(120);

fn options(lock_timeout: Duration) -> Options {
    Options {
        lock_timeout,
        ..Options::default()
    }
}

fn doc(id: &str) -> serde_json::Value {
    json!({"id": id, "postId": "p1"})
}

fn assert_abandoned(err: &Error, limit_ms: u64) {
    assert!(matches!(err, Error::Abandoned { .. }), "{err:?}");
    assert_eq!(err.status(), 408, "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "the transaction on partition [\"p1\"] of container \"posts\" ran past its deadline ({limit_ms} ms) and was abandoned; nothing it wrote was committed"
        )
    );
}

#[test]
fn a_writer_takes_over_a_transaction_past_its_deadline() -> Result {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/postId")?;
    let (began_tx, began) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let stuck = {
        let posts = posts.clone();
        std::thread::spawn(move || {
            let mut txn = posts
                .begin_with_deadline("p1", Duration::from_millis(200))
                .expect("begin");
            txn.create_item(doc("stuck"))
                .expect("a write before the deadline");
            began_tx.send(()).expect("send");
            // Stuck, as a script in a native built-in is, until told to go on.
            go_rx.recv_timeout(CEILING).expect("go");
            let write = txn.create_item(doc("late"));
            let read = txn.read_item("stuck");
            (write, read, txn.commit())
        })
    };
    began.recv_timeout(CEILING)?;
    // Waits (up to the 10 s lock timeout) for the stuck transaction's
    // deadline, then takes the partition over.
    let mut winner = posts.begin("p1")?;
    winner.create_item(doc("winner"))?;
    winner.commit()?;
    go.send(())?;
    let (write, read, commit) = stuck.join().expect("the stuck thread");
    assert_abandoned(&write.unwrap_err(), 200);
    assert_abandoned(&read.unwrap_err(), 200);
    assert_abandoned(&commit.unwrap_err(), 200);
    assert!(posts.read_item("p1", "winner").is_ok());
    for id in ["stuck", "late"] {
        assert_eq!(posts.read_item("p1", id).unwrap_err().status(), 404, "{id}");
    }
    // The partition is free again.
    posts.create_item("p1", doc("after"), None)?;
    Ok(())
}

#[test]
fn a_revoked_transaction_dropped_later_leaves_its_successor_the_lock() -> Result {
    let db = Database::with_storage(
        Box::new(MemoryStorage::new()),
        options(Duration::from_millis(100)),
    )?;
    let posts = db.create_container("posts", "/postId")?;
    let mut revoked = posts.begin_with_deadline("p1", Duration::from_millis(20))?;
    revoked.create_item(doc("revoked"))?;
    std::thread::sleep(Duration::from_millis(40));
    // Past its deadline: taken over at once.
    let mut successor = posts.begin("p1")?;
    drop(revoked);
    // The successor still holds the partition: a third writer times out.
    let err = posts.begin("p1").unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err:?}");
    successor.create_item(doc("successor"))?;
    successor.commit()?;
    assert!(posts.read_item("p1", "successor").is_ok());
    assert_eq!(posts.read_item("p1", "revoked").unwrap_err().status(), 404);
    posts.create_item("p1", doc("after"), None)?;
    Ok(())
}

#[test]
fn without_a_deadline_a_waiter_gets_the_lock_timeout() -> Result {
    let db = Database::with_storage(
        Box::new(MemoryStorage::new()),
        options(Duration::from_millis(100)),
    )?;
    let posts = db.create_container("posts", "/postId")?;
    // A native transaction has no deadline: however long it takes, a
    // waiter times out and the holder still commits.
    let mut holder = posts.begin("p1")?;
    holder.create_item(doc("holder"))?;
    let err = posts.begin("p1").unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err:?}");
    assert_eq!(err.status(), 408);
    assert!(err.is_retryable());
    std::thread::sleep(Duration::from_millis(150));
    let err = posts.begin("p1").unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err:?}");
    holder.commit()?;
    assert!(posts.read_item("p1", "holder").is_ok());

    // A deadline not reached yet is no takeover either.
    let mut holder = posts.begin_with_deadline("p1", Duration::from_secs(600))?;
    holder.create_item(doc("holder-2"))?;
    let err = posts.begin("p1").unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err:?}");
    holder.commit()?;
    assert!(posts.read_item("p1", "holder-2").is_ok());
    Ok(())
}

/// A memory storage whose commits, once `hold` is set, stop inside
/// `Storage::commit` (after saying so) until the test lets them go on.
struct GatedStorage {
    inner: MemoryStorage,
    hold: Arc<AtomicBool>,
    entered: Mutex<Option<mpsc::Sender<()>>>,
    resume: Mutex<Option<mpsc::Receiver<()>>>,
}

impl Storage for GatedStorage {
    fn load(&self) -> engine::Result<Vec<LoadedContainer>> {
        self.inner.load()
    }
    fn create_container(&self, meta: &ContainerMeta) -> engine::Result<()> {
        self.inner.create_container(meta)
    }
    fn delete_container(&self, id: &str) -> engine::Result<()> {
        self.inner.delete_container(id)
    }
    fn update_container(&self, meta: &ContainerMeta) -> engine::Result<()> {
        self.inner.update_container(meta)
    }
    fn put_script(&self, script: &ScriptRecord) -> engine::Result<()> {
        self.inner.put_script(script)
    }
    fn delete_script(&self, container: &str, kind: ScriptKind, id: &str) -> engine::Result<()> {
        self.inner.delete_script(container, kind, id)
    }
    fn commit(&self, record: CommitRecord) -> engine::Result<Lsn> {
        if self.hold.swap(false, Ordering::SeqCst) {
            if let Some(entered) = self.entered.lock().unwrap().take() {
                entered.send(()).expect("send");
            }
            if let Some(resume) = self.resume.lock().unwrap().take() {
                resume.recv_timeout(CEILING).expect("resume");
            }
        }
        self.inner.commit(record)
    }
    fn read_changes(
        &self,
        container: &str,
        after: Lsn,
        max_changes: usize,
    ) -> engine::Result<Vec<Change>> {
        self.inner.read_changes(container, after, max_changes)
    }
    fn keeps_documents(&self) -> bool {
        self.inner.keeps_documents()
    }
    fn read_partition(
        &self,
        container: &str,
        partition_key: &PartitionKey,
    ) -> engine::Result<Vec<LoadedDocument>> {
        self.inner.read_partition(container, partition_key)
    }
    fn read_document(
        &self,
        container: &str,
        partition_key: &PartitionKey,
        id: &str,
    ) -> engine::Result<Option<LoadedDocument>> {
        self.inner.read_document(container, partition_key, id)
    }
    fn partition_keys(&self, container: &str) -> engine::Result<Vec<PartitionKey>> {
        self.inner.partition_keys(container)
    }
    fn wants_text(&self) -> bool {
        self.inner.wants_text()
    }
}

#[test]
fn a_commit_under_way_is_not_taken_over() -> Result {
    let (entered_tx, entered) = mpsc::channel();
    let (resume, resume_rx) = mpsc::channel();
    let hold = Arc::new(AtomicBool::new(false));
    let storage = GatedStorage {
        inner: MemoryStorage::new(),
        hold: hold.clone(),
        entered: Mutex::new(Some(entered_tx)),
        resume: Mutex::new(Some(resume_rx)),
    };
    let db = Database::with_storage(Box::new(storage), options(Duration::from_millis(200)))?;
    let posts = db.create_container("posts", "/postId")?;
    hold.store(true, Ordering::SeqCst);
    let committer = {
        let posts = posts.clone();
        std::thread::spawn(move || {
            let mut txn = posts.begin_with_deadline("p1", Duration::from_millis(30))?;
            txn.create_item(doc("committed"))?;
            txn.commit()
        })
    };
    entered.recv_timeout(CEILING)?;
    // The commit is inside the storage; its transaction began before, so
    // after this it is past its deadline.
    std::thread::sleep(Duration::from_millis(40));
    let err = posts.begin("p1").unwrap_err();
    assert!(
        matches!(err, Error::LockTimeout { .. }),
        "a commit under way must not be taken over: {err:?}"
    );
    resume.send(())?;
    let lsn = committer.join().expect("the committing thread")?;
    assert!(lsn.is_some());
    assert!(posts.read_item("p1", "committed").is_ok());
    posts.create_item("p1", doc("after"), None)?;
    Ok(())
}

/// The stuck script's body: writes `stuck` in its transaction; the test's
/// clock holds that write (see [`a_stuck_call_loses_its_partition`]).
fn stuck_body(name: &str) -> String {
    format!(
        "function {name}() {{
            var c = getContext().getCollection();
            c.createDocument(c.getSelfLink(), {{id: 'stuck', postId: 'p1'}}, function (err) {{
                if (err) throw err;
            }});
        }}"
    )
}

/// Runs `call` (a script call that writes `stuck`) on another thread and
/// holds it inside that write, in native code where neither the runtime's
/// wall clock nor its instruction budget is read, as a catastrophic regex
/// would, until a point write to the same partition has taken the
/// partition over at the call's deadline; then lets it go and checks that
/// it fails with 408, nothing of it committed. Holding it on a channel
/// rather than in a real regex makes the order certain on any machine.
fn a_stuck_call_loses_its_partition(
    setup: impl FnOnce(&partita::Container) -> Result,
    call: impl FnOnce(partita::Container, partita::Limits) -> partita::Result<()> + Send + 'static,
) -> Result {
    // The clock tells the test when the script's write is being made, in
    // its transaction (`_ts` is read there), and holds it until released.
    let armed = Arc::new(AtomicBool::new(false));
    let (writing_tx, writing) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let hold = Mutex::new((writing_tx, released));
    let clock = {
        let armed = armed.clone();
        partita::Clock::from_fn(move || {
            if armed.swap(false, Ordering::SeqCst) {
                let hold = hold.lock().unwrap();
                let _ = hold.0.send(());
                let _ = hold.1.recv_timeout(CEILING);
            }
            std::time::SystemTime::now()
        })
    };
    let db = partita::Database::with_storage(
        Box::new(MemoryStorage::new()),
        Options {
            clock,
            // Past the call's deadline (0.7 s): a waiter that did not take
            // over would time out, as the stuck call is held until then.
            lock_timeout: Duration::from_secs(2),
            ..Options::default()
        },
    )?;
    let posts = db.create_container("posts", "/postId")?;
    setup(&posts)?;
    let limits = partita::Limits {
        wall_time: Duration::from_millis(200),
        accept_wall_time: Duration::from_millis(150),
        ..partita::Limits::default()
    };
    armed.store(true, Ordering::SeqCst);
    let stuck = {
        let posts = posts.clone();
        std::thread::spawn(move || call(posts, limits))
    };
    writing.recv_timeout(CEILING)?;
    // Waits for the call's deadline (its 200 ms wall time plus the 500 ms
    // grace), then takes the partition over while the call is still held.
    posts.create_item("p1", json!({"id": "winner", "postId": "p1"}), None)?;
    assert!(!stuck.is_finished(), "the held call ended");
    release.send(())?;
    let err = stuck.join().expect("the script's thread").unwrap_err();
    assert_eq!(err.status(), 408, "{err}");
    assert!(posts.read_item("p1", "winner").is_ok());
    for id in ["stuck", "written"] {
        assert_eq!(posts.read_item("p1", id).unwrap_err().status(), 404, "{id}");
    }
    Ok(())
}

#[test]
fn a_procedure_stuck_in_native_code_loses_its_partition_at_its_deadline() -> Result {
    a_stuck_call_loses_its_partition(
        |posts| {
            posts.create_script(partita::ScriptProperties::stored_procedure(
                "stuck",
                stuck_body("stuck"),
            ))?;
            Ok(())
        },
        |posts, limits| {
            posts
                .execute_stored_procedure(
                    "stuck",
                    "p1",
                    vec![],
                    Some(&partita::ProcedureOptions {
                        limits: Some(limits),
                        ..Default::default()
                    }),
                )
                .map(drop)
        },
    )
}

#[test]
fn a_pre_trigger_stuck_in_native_code_loses_its_partition_at_its_deadline() -> Result {
    a_stuck_call_loses_its_partition(
        |posts| {
            posts.create_script(partita::ScriptProperties::trigger(
                "stuck",
                stuck_body("stuck"),
                partita::TriggerType::Pre,
                partita::TriggerOperation::All,
            ))?;
            Ok(())
        },
        |posts, limits| {
            let options = partita::WriteOptions {
                pre_triggers: vec!["stuck".into()],
                limits: Some(limits),
                ..partita::WriteOptions::default()
            };
            posts
                .create_item(
                    "p1",
                    json!({"id": "written", "postId": "p1"}),
                    Some(&options),
                )
                .map(drop)
        },
    )
}
