//! A store that cannot write stays readable: a full disk, a read-only file
//! system, a missing permission.
//!
//! * A full disk, deterministically: `engine::testing::sqlite_on_small_disk`
//!   is the real SQLite storage whose file may not grow past a number of
//!   pages (SQLite's `max_page_count`), so a write past them fails with
//!   `SQLITE_FULL` exactly as on a full disk, and a reopen with the same
//!   limit is a restart with the disk still full. Writes fill it until the
//!   first fails (500, then 503); reopened still full, the store opens
//!   read-only: every acknowledged document, query, read feed, change log
//!   entry and read-only procedure answers, and every kind of write is a
//!   503 naming the directory and the full disk. Reopened with space, it is
//!   writable and holds everything acknowledged. Both ways a full store
//!   can be left: closed (its log copied into the file) and crashed (its
//!   log holding commits never folded, read through without a `-shm`).
//! * A read-only file system: the data directory bind-mounted read-only
//!   (`mount --bind`, then `remount,ro`; needs root, as CI runs; the test
//!   fails with the reason otherwise), after a clean close and after a
//!   crash. Unmounted in a guard.
//! * No permission to write: the store is opened from a thread whose user
//!   is `nobody` (Linux credentials are per thread, and the engine's
//!   threads inherit them), since root writes through any mode bits; a
//!   user other than root gets the same refusal from `chmod a-w`.
//!
//! `PARTITA_DISK_WRITES` (default 2,000) bounds the writes that fill the
//! small disk; it fills after about 150.

use std::path::{Path, PathBuf};
use std::process::Command;

use engine::testing::sqlite_on_small_disk;
use partita::{
    BatchOperation, Container, Database, FeedOptions, Lsn, Options, Params, PartitionKey, Patch,
    QueryOptions, ScriptKind, ScriptProperties,
};
use serde_json::json;

use crate::support::js;

/// Pages of 4 KB the small disk holds of the store.
const PAGES: u32 = 200;

/// A procedure that only reads: it works on a read-only store.
const READ_POST: &str = r#"function readPost() {
    var c = getContext().getCollection();
    c.readDocument(c.getAltLink() + '/docs/p1', function (err, post) {
        if (err) throw err;
        getContext().getResponse().setBody(post.type);
    });
}"#;

/// A store in `dir` with the blog's procedure, a read-only procedure and
/// the post p1.
fn blog(db: &Database) -> anyhow::Result<Container> {
    let posts = db.create_container("posts", "/postId")?;
    posts.create_script(ScriptProperties::stored_procedure(
        "createComment",
        js("createComment"),
    ))?;
    posts.create_script(ScriptProperties::stored_procedure("readPost", READ_POST))?;
    posts.create_item(
        "p1",
        json!({"id": "p1", "postId": "p1", "type": "post", "commentCount": 0}),
        None,
    )?;
    Ok(posts)
}

/// Adds comments (3 KB each) to p1 by procedure until a write fails;
/// checks that the first failure is a 500 and later writes 503, and
/// returns the acknowledged comments' ids.
fn fill(posts: &Container) -> anyhow::Result<Vec<String>> {
    let max: usize = std::env::var("PARTITA_DISK_WRITES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let pad = "x".repeat(3_000);
    let mut acked = Vec::new();
    for i in 0..max {
        let id = format!("c{i}");
        let res = posts.execute_stored_procedure(
            "createComment",
            "p1",
            vec![json!("p1"), json!({"id": id, "pad": pad})],
            None,
        );
        match res {
            Ok(_) => acked.push(id),
            Err(e) => {
                anyhow::ensure!(e.status() == 500, "the full disk surfaced as {e}");
                let again = posts
                    .create_item("p1", json!({"id": "after", "postId": "p1"}), None)
                    .expect_err("a write after the failure");
                anyhow::ensure!(again.status() == 503, "after the failure: {again}");
                return Ok(acked);
            }
        }
    }
    anyhow::bail!("{max} writes of 3 KB never filled a disk of {PAGES} pages")
}

/// Checks that everything acknowledged reads back: each comment, the
/// post's count, a query, the read feed and the change log.
fn check_readable(posts: &Container, acked: &[String]) -> anyhow::Result<()> {
    for id in acked {
        let doc = posts.read_item("p1", id)?;
        anyhow::ensure!(doc["postId"] == "p1", "{id}: {doc:?}");
    }
    let post = posts.read_item("p1", "p1")?;
    anyhow::ensure!(
        post["commentCount"] == json!(acked.len()),
        "commentCount {} for {} comments",
        post["commentCount"],
        acked.len()
    );
    let page = posts.query_items(
        "SELECT VALUE COUNT(1) FROM c WHERE c.id != 'p1'",
        &Params::default(),
        &QueryOptions::partition("p1"),
    )?;
    anyhow::ensure!(page.items == [json!(acked.len())], "{:?}", page.items);
    let feed = posts.read_feed("p1", &FeedOptions::default())?;
    anyhow::ensure!(feed.items.len() == acked.len() + 1, "read feed");
    // One change-log entry per commit: the post, then each comment call.
    let changes = posts.read_changes(Lsn::ZERO, 1_000_000)?;
    let last = changes.last().map_or(Lsn::ZERO, |c| c.lsn);
    anyhow::ensure!(
        last == Lsn(acked.len() as u64 + 1),
        "change log ends at {last}"
    );
    Ok(())
}

/// Checks that the store is read-only for `cause` and that every kind of
/// write is refused with 503 naming `dir` and `cause`, while a procedure
/// that only reads runs.
fn check_refuses_writes(
    db: &Database,
    posts: &Container,
    dir: &Path,
    cause: &str,
) -> anyhow::Result<()> {
    let reason = db
        .raw()
        .read_only()
        .ok_or_else(|| anyhow::anyhow!("the store did not open read-only"))?;
    let dir = dir.display().to_string();
    anyhow::ensure!(
        reason.contains(&format!("the store at {dir} is read-only: {cause}")),
        "reason: {reason}"
    );
    anyhow::ensure!(db.raw().is_read_only() && db.failure() == Some(reason.clone()));
    let read = posts.execute_stored_procedure("readPost", "p1", Vec::new(), None)?;
    anyhow::ensure!(read.body == json!("post"), "{:?}", read.body);
    // `create_container_if_not_exists` finds the container, as a server's
    // registry does at start.
    db.create_container_if_not_exists("posts", "/postId")?;

    let doc = |id: &str| json!({"id": id, "postId": "p1"});
    let patch = Patch::from_json(&json!([{"op": "incr", "path": "/commentCount", "value": 1}]))?;
    let writes: Vec<(&str, partita::Result<()>)> = vec![
        (
            "create",
            posts.create_item("p1", doc("new"), None).map(drop),
        ),
        ("upsert", posts.upsert_item("p1", doc("c0"), None).map(drop)),
        (
            "replace",
            posts.replace_item("p1", "c0", doc("c0"), None).map(drop),
        ),
        ("delete", posts.delete_item("p1", "c0", None).map(drop)),
        (
            "patch",
            posts.patch_item("p1", "p1", &patch, None).map(drop),
        ),
        (
            "procedure",
            posts
                .execute_stored_procedure(
                    "createComment",
                    "p1",
                    vec![json!("p1"), json!({"id": "new"})],
                    None,
                )
                .map(drop),
        ),
        (
            "batch",
            posts
                .execute_batch("p1", vec![BatchOperation::create(doc("new"))])
                .map(drop),
        ),
        (
            "transaction",
            posts.transaction("p1", |txn| {
                txn.create_item(doc("new"))
                    .map(drop)
                    .map_err(partita::Error::from)
            }),
        ),
        (
            "delete partition",
            posts.delete_all_items_by_partition_key("p1").map(drop),
        ),
        (
            "create script",
            posts
                .create_script(ScriptProperties::stored_procedure(
                    "other",
                    "function other() {}",
                ))
                .map(drop),
        ),
        (
            "delete script",
            posts.delete_script(ScriptKind::StoredProcedure, "readPost"),
        ),
        ("time to live", posts.set_default_ttl(Some(60))),
        (
            "create container",
            db.create_container("other", "/pk").map(drop),
        ),
        ("delete container", db.delete_container("posts")),
        ("purge", db.purge_expired().map(drop)),
    ];
    for (what, res) in writes {
        let err = match res {
            Ok(()) => anyhow::bail!("{what} succeeded on a read-only store"),
            Err(e) => e,
        };
        let message = err.to_string();
        anyhow::ensure!(
            err.status() == 503 && message.contains(&dir) && message.contains(cause),
            "{what}: {} {message}",
            err.status()
        );
    }
    // Bulk answers per operation.
    let bulk = posts.execute_bulk(vec![(
        PartitionKey::from("p1"),
        BatchOperation::create(doc("new")),
    )])?;
    anyhow::ensure!(bulk[0].status == 503, "bulk: {:?}", bulk[0]);
    // Nothing changed.
    anyhow::ensure!(posts.read_item("p1", "new").is_err());
    anyhow::ensure!(posts.read_item("p1", "c0").is_ok());
    Ok(())
}

/// Checks that the store is writable again with everything acknowledged.
fn check_writable_again(db: &Database, acked: &[String]) -> anyhow::Result<()> {
    anyhow::ensure!(db.raw().read_only().is_none() && !db.raw().is_read_only());
    let posts = db.container("posts")?;
    check_readable(&posts, acked)?;
    posts.execute_stored_procedure(
        "createComment",
        "p1",
        vec![json!("p1"), json!({"id": "after"})],
        None,
    )?;
    let post = posts.read_item("p1", "p1")?;
    anyhow::ensure!(post["commentCount"] == json!(acked.len() + 1));
    let changes = posts.read_changes(Lsn(acked.len() as u64 + 1), 10)?;
    anyhow::ensure!(
        changes.len() == 2 && changes[0].lsn == Lsn(acked.len() as u64 + 2),
        "the change log continues: {changes:?}"
    );
    Ok(())
}

/// The database in `dir` on the small disk (still full).
fn open_full(dir: &Path) -> anyhow::Result<Database> {
    let storage = sqlite_on_small_disk(&dir.join(engine::DATA_FILE), PAGES)?;
    // No room in the partition cache: reads after a restart find the
    // documents in storage, not in memory.
    Ok(Database::with_storage(
        Box::new(storage),
        Options {
            cache_bytes: 0,
            ..Options::default()
        },
    )?)
}

#[test]
fn a_disk_that_filled_opens_read_only_until_a_restart_with_space() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let acked = {
        let db = open_full(dir.path())?;
        let posts = blog(&db)?;
        let acked = fill(&posts)?;
        check_readable(&posts, &acked)?;
        acked
    };
    // Restarted with the disk still full: read-only, everything readable.
    // Twice: a read-only open changes nothing.
    for _ in 0..2 {
        let db = open_full(dir.path())?;
        let posts = db.container("posts")?;
        check_readable(&posts, &acked)?;
        check_refuses_writes(&db, &posts, dir.path(), "the disk is full")?;
    }
    // Restarted with space.
    check_writable_again(&Database::open(dir.path())?, &acked)
}

/// The files of a live store as a crash leaves them: the database file
/// and its log, no `-shm`.
fn crash_image(from: &Path, to: &Path) -> anyhow::Result<()> {
    for suffix in ["", "-wal"] {
        let name = format!("{}{suffix}", engine::DATA_FILE);
        std::fs::copy(from.join(&name), to.join(&name))?;
    }
    Ok(())
}

#[test]
fn a_crash_on_a_full_disk_keeps_its_log_readable() -> anyhow::Result<()> {
    let live = tempfile::tempdir()?;
    let crashed = tempfile::tempdir()?;
    let db = open_full(live.path())?;
    let posts = blog(&db)?;
    let acked = fill(&posts)?;
    crash_image(live.path(), crashed.path())?;
    drop(posts);
    drop(db);
    // Every comment is in the log only (none was folded into the document
    // table): the read-only store reads them through it.
    {
        let db = open_full(crashed.path())?;
        let posts = db.container("posts")?;
        check_readable(&posts, &acked)?;
        check_refuses_writes(&db, &posts, crashed.path(), "the disk is full")?;
    }
    check_writable_again(&Database::open(crashed.path())?, &acked)
}

/// A read-only bind mount of a directory, unmounted on drop.
struct ReadOnlyMount {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl ReadOnlyMount {
    /// Mounts `source` read-only at a new directory. Needs root (CI runs
    /// the tests as root); fails with the reason otherwise.
    fn new(source: &Path) -> anyhow::Result<ReadOnlyMount> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("ro");
        std::fs::create_dir(&path)?;
        run(Command::new("mount").arg("--bind").arg(source).arg(&path))?;
        let mount = ReadOnlyMount { path, _dir: dir };
        run(Command::new("mount")
            .args(["-o", "remount,ro,bind"])
            .arg(&mount.path))?;
        Ok(mount)
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

fn run(command: &mut Command) -> anyhow::Result<()> {
    let out = command.output()?;
    anyhow::ensure!(
        out.status.success(),
        "{command:?} failed ({}): {}; the read-only file system tests mount, which needs root (CI runs them as root)",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// A store with the post and `n` comments, closed cleanly (`crash`:
/// only a crash image of it is left); returns the comments' ids.
fn store(dir: &Path, n: usize, crash: bool) -> anyhow::Result<Vec<String>> {
    let live = tempfile::tempdir()?;
    let at = if crash { live.path() } else { dir };
    let db = Database::open(at)?;
    let posts = blog(&db)?;
    let mut acked = Vec::new();
    for i in 0..n {
        let id = format!("c{i}");
        posts.execute_stored_procedure(
            "createComment",
            "p1",
            vec![json!("p1"), json!({"id": id})],
            None,
        )?;
        acked.push(id);
    }
    if crash {
        crash_image(live.path(), dir)?;
    }
    Ok(acked)
}

#[test]
fn a_read_only_file_system_opens_read_only() -> anyhow::Result<()> {
    for crash in [false, true] {
        let dir = tempfile::tempdir()?;
        let acked = store(dir.path(), 20, crash)?;
        {
            let mount = ReadOnlyMount::new(dir.path())?;
            let db = Database::open(&mount.path)?;
            let posts = db.container("posts")?;
            check_readable(&posts, &acked)?;
            check_refuses_writes(&db, &posts, &mount.path, "the file system is read-only")?;
        }
        check_writable_again(&Database::open(dir.path())?, &acked)?;
    }
    Ok(())
}

#[test]
fn no_permission_to_write_opens_read_only() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir()?;
    let acked = store(dir.path(), 20, false)?;
    let set_mode = |dir_mode: u32, file_mode: u32| -> anyhow::Result<()> {
        for entry in std::fs::read_dir(dir.path())? {
            let path = entry?.path();
            if path.is_file() {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file_mode))?;
            }
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(dir_mode))?;
        Ok(())
    };
    let root = rustix::process::geteuid().is_root();
    // Root writes through mode bits: it opens the store as `nobody`, for
    // whom the files and directory (root's) are read-only.
    if root {
        set_mode(0o755, 0o644)?;
    } else {
        set_mode(0o555, 0o444)?;
    }
    let path = dir.path().to_path_buf();
    let checked = std::thread::spawn(move || -> anyhow::Result<()> {
        if root {
            rustix::thread::set_thread_uid(rustix::process::Uid::from_raw(65_534))?;
        }
        let db = Database::open(&path)?;
        let posts = db.container("posts")?;
        check_readable(&posts, &acked)?;
        check_refuses_writes(&db, &posts, &path, "no permission to write")?;
        Ok(())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the check panicked"))?;
    set_mode(0o755, 0o644)?;
    checked?;
    let acked: Vec<String> = (0..20).map(|i| format!("c{i}")).collect();
    check_writable_again(&Database::open(dir.path())?, &acked)
}
