//! Tests of [`PostgresStorage`] against a private PostgreSQL cluster
//! (`crate::testing::postgres`): one per test binary, a database of its
//! own (`t_<n>`) per test.

use std::collections::BTreeSet;
use std::sync::Arc;

use parking_lot::Mutex;
use postgres::Statement;
use postgres::types::Type;
use serde_json::{Value, json};

use super::index::INDEX_READS;
use super::{CROSS_PARTITION_READS, PARTITION_STATEMENTS, PostgresStorage, pk_hash, redact_url};
use crate::storage::Storage;
use crate::testing::postgres::database;
use crate::{
    ContainerProperties, Database, Error, Lsn, Options, PartitionKey, ScriptKind, ScriptProperties,
};

/// A statement the backend sent, with its parameter types.
#[derive(Clone, Debug)]
pub(super) struct Logged {
    sql: String,
    params: Vec<Type>,
}

/// Every statement a store (and its connections) sent.
#[derive(Clone, Default)]
pub(super) struct StatementLog(Arc<Mutex<Vec<Logged>>>);

impl StatementLog {
    pub(super) fn record(&self, sql: &str, statement: &Statement) {
        self.0.lock().push(Logged {
            sql: sql.to_owned(),
            params: statement.params().to_vec(),
        });
    }

    fn take(&self) -> Vec<Logged> {
        std::mem::take(&mut *self.0.lock())
    }
}

fn open(url: &str) -> Database {
    Database::open_url(url, Options::default()).expect("open the database")
}

fn changes_of(db: &Database, container: &str) -> Vec<(u64, String, &'static str)> {
    db.container(container)
        .unwrap()
        .read_changes(Lsn::ZERO, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|c| (c.lsn.0, c.id, c.kind.as_str()))
        .collect()
}

fn body(db: &Database, container: &str, pk: &str, id: &str) -> Value {
    db.container(container)
        .unwrap()
        .read_item(pk, id)
        .unwrap()
        .value()
        .clone()
}

/// Creates, replaces and deletes documents, commits a transaction of three
/// writes and abandons one that fails, stores a procedure: everything is
/// as it was after a reopen, and the log goes on from where it was.
#[test]
fn everything_written_reads_back_after_a_reopen() {
    let url = database();
    let db = open(&url);
    let props = ContainerProperties::new("posts", "/postId")
        .with_default_ttl(-1)
        .with_computed_property("loud", "SELECT VALUE UPPER(c.title) FROM c")
        .with_indexing_policy(
            crate::IndexingPolicy::from_json(&json!({
                "excludedPaths": [{"path": "/body/*"}],
                "compositeIndexes": [[{"path": "/title"}, {"path": "/n", "order": "descending"}]]
            }))
            .unwrap(),
        );
    let posts = db.create_container_with(props.clone()).unwrap();
    posts
        .create_item(
            "p1",
            json!({"id": "a", "postId": "p1", "title": "one"}),
            None,
        )
        .unwrap();
    posts
        .create_item(
            "p1",
            json!({"id": "b", "postId": "p1", "title": "two"}),
            None,
        )
        .unwrap();
    posts
        .create_item("p2", json!({"id": "c", "postId": "p2"}), None)
        .unwrap();
    posts
        .replace_item(
            "p1",
            "a",
            json!({"id": "a", "postId": "p1", "title": "uno"}),
            None,
        )
        .unwrap();
    posts.delete_item("p1", "b", None).unwrap();
    // A procedure's writes: all or nothing.
    posts
        .transaction("p3", |txn| {
            for id in ["x", "y", "z"] {
                txn.create_item(json!({"id": id, "postId": "p3"}))?;
            }
            Ok::<_, Error>(())
        })
        .unwrap();
    let thrown = posts.transaction("p3", |txn| {
        txn.create_item(json!({"id": "w", "postId": "p3"}))?;
        txn.delete_item("x", None)?;
        Err::<(), _>(Error::BadRequest("the procedure threw".to_owned()))
    });
    assert!(matches!(thrown, Err(Error::BadRequest(_))));
    posts
        .create_script(ScriptProperties::stored_procedure(
            "bulk",
            "function bulk() { return 1; }",
        ))
        .unwrap();
    let before: Vec<Value> = ["a", "c"]
        .iter()
        .zip(["p1", "p2"])
        .map(|(id, pk)| body(&db, "posts", pk, id))
        .collect();
    let changes = changes_of(&db, "posts");
    assert_eq!(
        changes,
        vec![
            (1, "a".to_owned(), "create"),
            (2, "b".to_owned(), "create"),
            (3, "c".to_owned(), "create"),
            (4, "a".to_owned(), "replace"),
            (5, "b".to_owned(), "delete"),
            (6, "x".to_owned(), "create"),
            (6, "y".to_owned(), "create"),
            (6, "z".to_owned(), "create"),
        ]
    );
    let feed = posts.read_changes(Lsn::ZERO, 1000).unwrap();
    drop((posts, db));

    let db = open(&url);
    let posts = db.container("posts").unwrap();
    assert_eq!(posts.properties(), props);
    let after: Vec<Value> = ["a", "c"]
        .iter()
        .zip(["p1", "p2"])
        .map(|(id, pk)| body(&db, "posts", pk, id))
        .collect();
    assert_eq!(after, before);
    assert!(matches!(
        posts.read_item("p1", "b"),
        Err(Error::NotFound { .. })
    ));
    for id in ["x", "y", "z"] {
        assert_eq!(body(&db, "posts", "p3", id)["id"], id);
    }
    assert!(matches!(
        posts.read_item("p3", "w"),
        Err(Error::NotFound { .. })
    ));
    assert_eq!(posts.read_changes(Lsn::ZERO, 1000).unwrap(), feed);
    let mut keys = posts.partition_keys().unwrap();
    keys.sort_by_key(PartitionKey::to_json_array);
    assert_eq!(
        keys,
        ["p1", "p2", "p3"].map(PartitionKey::from).to_vec(),
        "p1 keeps a; every partition with a document is listed"
    );
    let script = posts
        .read_script(ScriptKind::StoredProcedure, "bulk")
        .unwrap();
    assert_eq!(&*script.body, b"function bulk() { return 1; }");
    // The log and the sequence numbers go on.
    let doc = posts
        .create_item("p2", json!({"id": "d", "postId": "p2"}), None)
        .unwrap();
    assert_eq!(changes_of(&db, "posts").last().unwrap().0, 7);
    let rids: BTreeSet<&str> = [&before[0], &before[1], doc.value()]
        .iter()
        .filter_map(|v| v["_rid"].as_str())
        .collect();
    assert_eq!(
        rids.len(),
        3,
        "a new document after a reopen gets a new rid"
    );
}

/// `read_changes` stops at whole transactions, however small the limit.
#[test]
fn the_change_log_returns_whole_transactions() {
    let db = open(&database());
    let posts = db.create_container("posts", "/postId").unwrap();
    posts
        .create_item("p0", json!({"id": "first", "postId": "p0"}), None)
        .unwrap();
    let docs = (0..3)
        .map(|i| json!({"id": format!("c{i}"), "postId": "p1"}))
        .collect();
    posts.write_documents("p1", docs, false).unwrap();
    let page = posts.read_changes(Lsn(1), 1).unwrap();
    let lsns: Vec<u64> = page.iter().map(|c| c.lsn.0).collect();
    assert_eq!(lsns, [2, 2, 2]);
    let page = posts.read_changes(Lsn::ZERO, 2).unwrap();
    assert_eq!(page.len(), 4, "1 change at LSN 1, then all 3 of LSN 2");
    assert!(posts.read_changes(Lsn(2), 10).unwrap().is_empty());
}

/// A deleted container takes its documents, scripts and log with it; one
/// created again with its id starts empty, its log at LSN 1.
#[test]
fn a_deleted_container_comes_back_empty() {
    let url = database();
    let db = open(&url);
    let posts = db.create_container("posts", "/postId").unwrap();
    let other = db.create_container("other", "/pk").unwrap();
    for pk in ["p1", "p2"] {
        posts
            .create_item(pk, json!({"id": "a", "postId": pk}), None)
            .unwrap();
    }
    other
        .create_item("k", json!({"id": "kept", "pk": "k"}), None)
        .unwrap();
    posts
        .create_script(ScriptProperties::stored_procedure("sp", "function sp() {}"))
        .unwrap();
    drop(posts);
    db.delete_container("posts").unwrap();
    let posts = db
        .create_container_with(ContainerProperties::new("posts", "/other"))
        .unwrap();
    assert!(posts.partition_keys().unwrap().is_empty());
    assert!(posts.read_changes(Lsn::ZERO, 10).unwrap().is_empty());
    posts
        .create_item("q", json!({"id": "new", "other": "q"}), None)
        .unwrap();
    assert_eq!(changes_of(&db, "posts"), [(1, "new".to_owned(), "create")]);
    drop((posts, other, db));

    let db = open(&url);
    let posts = db.container("posts").unwrap();
    assert_eq!(posts.properties().partition_key_path, "/other");
    assert_eq!(posts.partition_keys().unwrap(), [PartitionKey::from("q")]);
    assert!(posts.list_scripts(ScriptKind::StoredProcedure).is_empty());
    assert_eq!(changes_of(&db, "posts"), [(1, "new".to_owned(), "create")]);
    assert_eq!(changes_of(&db, "other"), [(1, "kept".to_owned(), "create")]);
}

/// The words of `sql` (identifiers and keywords).
fn words(sql: &str) -> impl Iterator<Item = &str> {
    sql.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// Every statement on `docs`, `changes` and `partition_versions` names one (container, pk_hash),
/// as `$1` (text) and `$2` (bigint), or is a read of the few that span a
/// container's partitions: each could run on one Citus worker.
#[test]
fn every_statement_on_partition_tables_names_one_partition() {
    let url = database();
    let mut logs = Vec::new();
    let open_logged = |logs: &mut Vec<StatementLog>| {
        let storage = PostgresStorage::connect(&url, crate::Durability::Full).unwrap();
        logs.push(storage.statement_log());
        Database::with_storage(Box::new(storage), Options::default()).unwrap()
    };
    let db = open_logged(&mut logs);
    let posts = db.create_container("posts", "/postId").unwrap();
    for pk in ["p1", "p2"] {
        let docs = (0..3)
            .map(|i| json!({"id": format!("d{i}"), "postId": pk}))
            .collect();
        posts.write_documents(pk, docs, false).unwrap();
    }
    posts
        .replace_item(
            "p1",
            "d0",
            json!({"id": "d0", "postId": "p1", "n": 1}),
            None,
        )
        .unwrap();
    posts.delete_item("p1", "d1", None).unwrap();
    drop((posts, db));

    // Reopened: partitions are read from the store.
    let db = open_logged(&mut logs);
    let posts = db.container("posts").unwrap();
    posts.read_item("p1", "d0").unwrap();
    // Into a partition not in memory: reads the written ids only.
    posts
        .write_documents("p2", vec![json!({"id": "d9", "postId": "p2"})], false)
        .unwrap();
    assert_eq!(posts.partition_keys().unwrap().len(), 2);
    assert_eq!(posts.read_changes(Lsn::ZERO, 1).unwrap().len(), 3);
    drop((posts, db));

    // The range index: two terms (counted, then one filtering the
    // other's candidates) and a walk; then a new policy, built a
    // partition a step (`BUILD_STEP` in tests).
    let db = open_logged(&mut logs);
    let posts = db.container("posts").unwrap();
    let found = scanned(&posts, "SELECT * FROM c WHERE c.n = 1 AND c.id = 'd0'");
    assert_eq!(found, (1, 1));
    let found = scanned(&posts, "SELECT TOP 1 * FROM c ORDER BY c.id DESC");
    assert_eq!(found.0, 1);
    posts
        .set_indexing_policy(
            crate::IndexingPolicy::from_json(&json!({"excludedPaths": [{"path": "/n/?"}]}))
                .unwrap(),
        )
        .unwrap();
    wait_until_indexed(&posts, "SELECT * FROM c WHERE c.id = 'd2'", 2);
    // The documents of a partition by rid, as a query whose partitions
    // are not in memory reads them.
    let direct = PostgresStorage::connect(&url, crate::Durability::Full).unwrap();
    logs.push(direct.statement_log());
    let p2 = PartitionKey::from("p2");
    let mut rids: Vec<u64> = direct
        .read_partition("posts", &p2)
        .unwrap()
        .iter()
        .map(|d| d.rid)
        .collect();
    rids.sort_unstable();
    rids.remove(0);
    let read = direct.read_documents("posts", &p2, &rids).unwrap();
    let mut read: Vec<u64> = read.iter().map(|d| d.rid).collect();
    read.sort_unstable();
    assert_eq!(read, rids);
    drop((posts, direct));
    db.delete_container("posts").unwrap();

    let logged: Vec<Logged> = logs.iter().flat_map(StatementLog::take).collect();
    let mut seen = BTreeSet::new();
    for statement in &logged {
        let sql = statement.sql.as_str();
        if !words(sql)
            .any(|w| w == "docs" || w == "changes" || w == "partition_versions" || w == "idx")
        {
            continue;
        }
        if let Some(prefix) = INDEX_READS.iter().find(|p| sql.starts_with(**p)) {
            seen.insert(*prefix);
            continue;
        }
        seen.insert(sql);
        if CROSS_PARTITION_READS.contains(&sql) {
            assert!(sql.starts_with("SELECT "), "a cross-partition write: {sql}");
            continue;
        }
        assert!(
            PARTITION_STATEMENTS.contains(&sql),
            "a statement on a partition table in neither list: {sql}"
        );
        let filtered = sql.contains(" WHERE container = $1 AND pk_hash = $2");
        let inserted = sql.starts_with("INSERT INTO ")
            && sql.contains(" (container, pk_hash, ")
            && sql.contains(" SELECT $1, $2, ");
        assert!(
            filtered || inserted,
            "does not name its partition as ($1, $2): {sql}"
        );
        // Each use of pk_hash is its value ($2), the column list of an
        // INSERT or that of ON CONFLICT.
        assert_eq!(
            words(sql).filter(|w| *w == "pk_hash").count(),
            sql.matches("pk_hash = $2").count()
                + usize::from(inserted)
                + usize::from(sql.contains("ON CONFLICT")),
            "pk_hash used beyond its one value: {sql}"
        );
        assert_eq!(
            statement.params.get(..2),
            Some(&[Type::TEXT, Type::INT8][..]),
            "(container, pk_hash) are not one text and one bigint: {sql}"
        );
    }
    for sql in PARTITION_STATEMENTS
        .iter()
        .chain(&CROSS_PARTITION_READS)
        .chain(&INDEX_READS)
    {
        assert!(seen.contains(sql), "the test never sent: {sql}");
    }
}

/// The items of `sql` on `c` (one page) and the documents it read.
fn scanned(c: &crate::Container, sql: &str) -> (usize, u64) {
    let page = c
        .query_items(sql, &Default::default(), &Default::default())
        .unwrap();
    (page.items.len(), page.stats.docs_scanned)
}

/// Runs `sql` on `c` until it reads only the `n` documents it returns (the
/// index is built); each answer meanwhile is right.
fn wait_until_indexed(c: &crate::Container, sql: &str, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let (found, read) = scanned(c, sql);
        assert_eq!(found, n, "{sql}");
        if read == n as u64 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the index was never built"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A database whose index predates array elements (`idx` keyed without
/// `value`, one entry per document and path) gets the new key when a
/// node opens it, and every container's index is built again: until
/// then queries scan, so no element is missed.
#[test]
fn an_index_from_before_array_elements_is_built_again() {
    let url = database();
    let sql = "SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, 't1')";
    {
        let db = open(&url);
        let c = db.create_container("c", "/pk").unwrap();
        for i in 0..20 {
            let pk = format!("p{}", i % 3);
            let tags = json!([format!("t{}", i % 4), "all"]);
            c.write_documents(
                pk.as_str(),
                vec![json!({"id": format!("d{i}"), "pk": pk, "tags": tags})],
                false,
            )
            .unwrap();
        }
        wait_until_indexed(&c, sql, 5);
    }
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client
        .batch_execute(
            "DELETE FROM idx WHERE path LIKE '%~2%'; \
             ALTER TABLE idx DROP CONSTRAINT idx_pkey; \
             ALTER TABLE idx ADD PRIMARY KEY (container, pk_hash, pk, rid, path)",
        )
        .unwrap();
    let db = open(&url);
    let c = db.container("c").unwrap();
    wait_until_indexed(&c, sql, 5);
    let keyed: i64 = client
        .query_one(
            "SELECT COUNT(*) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid \
             AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'idx'::regclass AND i.indisprimary",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(keyed, 6);
}

/// The rows of `docs` and `idx` the current transaction has read so far:
/// those sequential scans read and those index scans fetched
/// (PostgreSQL's counts for the transaction, tables and their indexes).
const ROWS_READ: &str = "SELECT COALESCE(SUM(seq_tup_read + COALESCE(idx_tup_fetch, 0)), 0)::int8 \
     FROM pg_stat_xact_user_tables WHERE relname IN ('docs', 'idx')";

/// A commit that replaces one document reads as many rows of `docs` and
/// `idx` in a partition of 300 indexed documents as in one of 3. The
/// database is new, so its tables have no statistics: the planner then
/// guesses that a partition holds one row, and once took the rids of the
/// entries to remove as a filter over all of the partition's entries.
#[test]
fn a_replace_reads_no_more_rows_in_a_larger_partition() {
    let url = database();
    let db = open(&url);
    let posts = db.create_container("posts", "/postId").unwrap();
    for (pk, n) in [("small", 3), ("large", 300)] {
        let docs = (0..n)
            .map(|i| json!({"id": format!("d{i}"), "postId": pk, "n": i, "tags": ["a", "b"]}))
            .collect();
        posts.write_documents(pk, docs, false).unwrap();
    }
    drop((posts, db));
    // Another node replaces d0 in each, in a transaction that reports
    // what the commit's writes read.
    let node = PostgresStorage::connect(&url, crate::Durability::Full).unwrap();
    let replace = |pk: &str| -> i64 {
        let key = PartitionKey::from(pk);
        let rid = node
            .read_document("posts", &key, "d0")
            .unwrap()
            .unwrap()
            .rid;
        let base_version = node.partition_version("posts", &key).unwrap().partition;
        let seq = node.reserve_sequence("posts", 1).unwrap();
        let doc = crate::document::Document::new(
            json!({"id": "d0", "postId": pk, "n": -1, "tags": ["c"], "_ts": 1}),
        );
        let record = crate::storage::CommitRecord {
            container: Arc::from("posts"),
            partition_key: key,
            changes: vec![crate::storage::RecordChange {
                id: Arc::from("d0"),
                kind: crate::storage::ChangeKind::Replace,
                rid,
                before_rid: Some(rid),
                seq,
                text: Some(Arc::from(doc.value().to_string())),
                document: Some(doc),
            }],
            base_version,
        };
        let rows_read = |conn: &mut super::Conn| -> Result<i64, super::Failure> {
            let rows = conn.query(ROWS_READ, &[])?;
            Ok(rows.first().map_or(0, |row| row.get(0)))
        };
        node.writer
            .lock()
            .transaction(|conn| {
                let before = rows_read(conn)?;
                let lsn = super::write_record(conn, &node.policies, &record)?;
                assert!(lsn.is_some(), "{pk}: the partition changed");
                Ok(rows_read(conn)? - before)
            })
            .unwrap_or_else(|e| panic!("{}", e.into_error("replace d0", &url)))
    };
    let (small, large) = (replace("small"), replace("large"));
    assert_eq!(
        small, large,
        "rows read replacing one document: {small} in a partition of 3, {large} in one of 300"
    );
    // The old entries went and the new ones came: the index names each
    // d0 for its new value, and neither for its old one.
    let db = open(&url);
    let posts = db.container("posts").unwrap();
    assert_eq!(scanned(&posts, "SELECT * FROM c WHERE c.n = -1"), (2, 2));
    assert_eq!(scanned(&posts, "SELECT * FROM c WHERE c.n = 0"), (0, 0));
    assert_eq!(scanned(&posts, "SELECT * FROM c WHERE c.n = 1"), (2, 2));
    // A document deleted and created again in one transaction (a replace
    // whose rid is new) leaves no entry under its old rid either.
    posts
        .transaction("large", |txn| {
            txn.delete_item("d1", None)?;
            txn.create_item(json!({"id": "d1", "postId": "large", "n": -2}))?;
            Ok::<_, Error>(())
        })
        .unwrap();
    drop((posts, db));
    let db = open(&url);
    let posts = db.container("posts").unwrap();
    assert_eq!(scanned(&posts, "SELECT * FROM c WHERE c.n = 1"), (1, 1));
    assert_eq!(scanned(&posts, "SELECT * FROM c WHERE c.n = -2"), (1, 1));
}

/// A server that cannot be reached, a URL that does not parse and one of
/// another database are errors that do not show the password.
#[test]
fn bad_urls_are_errors_without_the_password() {
    let unreachable = Database::open_url(
        "postgresql://user:hunter2@%2Fno%2Fsuch%2Fdir/db",
        Options::default(),
    );
    match unreachable {
        Err(Error::Storage(message)) => {
            assert!(!message.contains("hunter2"), "{message}");
            assert!(message.contains("user:***@"), "{message}");
        }
        Err(e) => panic!("not a storage error: {e}"),
        Ok(_) => panic!("opened a database that does not exist"),
    }
    for url in [
        "postgresql://user:hunter2@host:notaport/db",
        "mysql://user:hunter2@host/db",
        "postgresql://host/db?password=hunter2&user=x&bad_option=1",
    ] {
        match Database::open_url(url, Options::default()) {
            Err(Error::BadRequest(message)) => assert!(!message.contains("hunter2"), "{message}"),
            Err(e) => panic!("{url}: not a bad request: {e}"),
            Ok(_) => panic!("{url}: opened"),
        }
    }
    assert_eq!(
        redact_url("postgres://u:p@h:5432/d?password=q&sslmode=disable"),
        "postgres://u:***@h:5432/d?password=***&sslmode=disable"
    );
    assert_eq!(
        redact_url("host=h password=secret user=u"),
        "host=h password=*** user=u"
    );
    assert_eq!(redact_url("postgresql://u@h/d"), "postgresql://u@h/d");
}

/// Rows are keyed by the hash: it must not change between versions.
#[test]
fn the_partition_key_hash_is_stable() {
    let pk = PartitionKey::from("p1").to_json_array();
    assert_eq!(pk, r#"["p1"]"#);
    assert_eq!(pk_hash(&pk), -6_015_862_170_648_325_006);
}

/// Direct use of the trait: LSNs are per container.
#[test]
fn lsns_count_per_container() {
    let url = database();
    let db = open(&url);
    let a = db.create_container("a", "/pk").unwrap();
    let b = db.create_container("b", "/pk").unwrap();
    for i in 0..3 {
        a.create_item("k", json!({"id": format!("{i}"), "pk": "k"}), None)
            .unwrap();
    }
    b.create_item("k", json!({"id": "0", "pk": "k"}), None)
        .unwrap();
    drop((a, b, db));
    let storage = PostgresStorage::connect(&url, crate::Durability::Full).unwrap();
    let lsns = |c: &str| -> Vec<u64> {
        storage
            .read_changes(c, Lsn::ZERO, 100)
            .unwrap()
            .iter()
            .map(|c| c.lsn.0)
            .collect()
    };
    assert_eq!(lsns("a"), [1, 2, 3]);
    assert_eq!(lsns("b"), [1]);
    // Where a feed "from now" starts, looked up.
    assert_eq!(storage.last_lsn("a").unwrap(), Lsn(3));
    assert_eq!(storage.last_lsn("b").unwrap(), Lsn(1));
    assert_eq!(storage.last_lsn("none").unwrap(), Lsn::ZERO);
    let loaded = storage.load().unwrap();
    assert_eq!(loaded.len(), 2);
    assert!(loaded.iter().all(|c| c.max_seq > 0), "max_seq survives");
}

/// A commit record creating document `id` in partition `pk` of `container`.
fn creation(container: &str, pk: &str, id: &str, seq: u64) -> crate::storage::CommitRecord {
    let doc = crate::document::Document::new(json!({"id": id, "pk": pk, "_ts": 1}));
    crate::storage::CommitRecord {
        container: Arc::from(container),
        partition_key: PartitionKey::from(pk),
        changes: vec![crate::storage::RecordChange {
            id: Arc::from(id),
            kind: crate::storage::ChangeKind::Create,
            rid: seq,
            before_rid: None,
            seq,
            text: Some(Arc::from(doc.value().to_string())),
            document: Some(doc),
        }],
        base_version: 0,
    }
}

/// Commits queued while another holds the write connection are written
/// together, in one transaction, by the next holder: each gets its own
/// LSN, a container's LSNs stay gapless and in order, and every document
/// is stored.
#[test]
fn commits_waiting_for_the_write_connection_share_one_transaction() {
    let url = database();
    let storage = PostgresStorage::connect(&url, crate::Durability::Full).unwrap();
    for id in ["a", "b"] {
        storage
            .create_container(&crate::storage::ContainerMeta {
                ordinal: if id == "a" { 1 } else { 2 },
                ..crate::storage::ContainerMeta::for_tests(id)
            })
            .unwrap();
    }
    const CALLERS: usize = 8;
    let lsns = std::thread::scope(|s| {
        // Hold the write connection until every caller has queued.
        let held = storage.writer.lock();
        let callers: Vec<_> = (0..CALLERS)
            .map(|i| {
                let storage = &storage;
                s.spawn(move || {
                    let container = if i % 2 == 0 { "a" } else { "b" };
                    let record =
                        creation(container, &format!("p{i}"), &format!("d{i}"), i as u64 + 1);
                    (container, storage.commit(record).unwrap().0)
                })
            })
            .collect();
        while storage.queue.lock().len() < CALLERS {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        drop(held);
        callers
            .into_iter()
            .map(|c| c.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert_eq!(*storage.batches.lock(), [CALLERS], "one batch for all");
    for container in ["a", "b"] {
        let mut mine: Vec<u64> = lsns
            .iter()
            .filter(|(c, _)| *c == container)
            .map(|(_, lsn)| *lsn)
            .collect();
        mine.sort_unstable();
        assert_eq!(
            mine,
            (1..=CALLERS as u64 / 2).collect::<Vec<_>>(),
            "{container}"
        );
        let logged: Vec<u64> = storage
            .read_changes(container, Lsn::ZERO, 100)
            .unwrap()
            .iter()
            .map(|c| c.lsn.0)
            .collect();
        assert_eq!(logged, mine, "{container}");
    }
    for i in 0..CALLERS {
        let container = if i % 2 == 0 { "a" } else { "b" };
        let doc = storage
            .read_document(
                container,
                &PartitionKey::from(format!("p{i}").as_str()),
                &format!("d{i}"),
            )
            .unwrap();
        assert!(doc.is_some(), "d{i}");
    }
    // A lone commit is a batch of one (p0's second: it read version 1).
    let mut lone = creation("a", "p0", "e0", 100);
    lone.base_version = 1;
    storage.commit(lone).unwrap();
    assert_eq!(storage.batches.lock().last(), Some(&1));
}

/// A bound of a loop from the environment variable `name`, or `default`
/// (small, for CI).
fn bound(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The counter `n` of document `id` in partition `pk`, as `db` reads it.
fn counter(db: &Database, pk: &str, id: &str) -> i64 {
    body(db, "counters", pk, id)["n"].as_i64().unwrap()
}

/// Two nodes on a new database whose container `counters` (created by
/// the first, before the second opened: a node learns of containers at
/// start-up) holds a document `counter` with `n` 0 in each of `pks`.
fn two_nodes_with_counters(pks: &[&str]) -> (Database, Database) {
    let url = database();
    let a = open(&url);
    let counters = a.create_container("counters", "/pk").unwrap();
    for pk in pks {
        counters
            .create_item(*pk, json!({"id": "counter", "pk": pk, "n": 0}), None)
            .unwrap();
    }
    (a, open(&url))
}

/// Adds one to the counter of partition `pk` in a transaction.
fn increment(db: &Database, pk: &str) -> Result<(), Error> {
    db.container("counters").unwrap().transaction(pk, |txn| {
        let mut doc = txn.read_item("counter")?.into_value();
        doc["n"] = json!(doc["n"].as_i64().unwrap_or(0) + 1);
        txn.replace_item("counter", doc, None)?;
        Ok(())
    })
}

/// Two nodes (two `Database`s on one URL) increment counters in a few
/// shared partitions from several threads each: every counter equals
/// the increments acknowledged on it (none lost to a stale copy), both
/// nodes read it so, and the change log has each counter's values in
/// order, 1 to n, each once, at gapless LSNs. Loop sizes:
/// `PARTITA_PG_NODE_THREADS` (threads per node),
/// `PARTITA_PG_NODE_INCREMENTS` (increments per thread).
#[test]
fn two_nodes_lose_no_increment() {
    let threads = bound("PARTITA_PG_NODE_THREADS", 3);
    let increments = bound("PARTITA_PG_NODE_INCREMENTS", 30);
    const PARTITIONS: [&str; 3] = ["k0", "k1", "k2"];
    let (a, b) = two_nodes_with_counters(&PARTITIONS);
    let nodes = [&a, &b];
    let acknowledged: Vec<[usize; PARTITIONS.len()]> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2 * threads)
            .map(|t| {
                let db = nodes[t % 2];
                s.spawn(move || {
                    let mut done = [0; PARTITIONS.len()];
                    for i in 0..increments {
                        let p = (t + i) % PARTITIONS.len();
                        match increment(db, PARTITIONS[p]) {
                            Ok(()) => done[p] += 1,
                            // Another node won ATTEMPTS times in a row:
                            // not acknowledged, nothing written.
                            Err(Error::PartitionChanged { .. }) => {}
                            Err(e) => panic!("increment: {e}"),
                        }
                    }
                    done
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut total = 0;
    for (p, pk) in PARTITIONS.iter().enumerate() {
        let acked: usize = acknowledged.iter().map(|done| done[p]).sum();
        total += acked;
        for db in nodes {
            assert_eq!(counter(db, pk, "counter"), acked as i64, "{pk}");
        }
        let values: Vec<i64> = changes_of_values(&a, pk);
        assert_eq!(
            values,
            (0..=acked as i64).collect::<Vec<_>>(),
            "{pk}: the log has each value once, in order"
        );
    }
    assert!(total > 0, "nothing was acknowledged");
    eprintln!(
        "{total} of {} increments acknowledged",
        2 * threads * increments
    );
    for db in nodes {
        let lsns: Vec<u64> = changes_of(db, "counters").iter().map(|c| c.0).collect();
        let expected: Vec<u64> = (1..=(PARTITIONS.len() + total) as u64).collect();
        assert_eq!(
            lsns, expected,
            "one LSN per commit, no gap, from either node"
        );
    }
}

/// The counter values of partition `pk` in the change log, in log order.
fn changes_of_values(db: &Database, pk: &str) -> Vec<i64> {
    db.container("counters")
        .unwrap()
        .read_changes(Lsn::ZERO, usize::MAX)
        .unwrap()
        .into_iter()
        .filter(|c| c.partition_key == PartitionKey::from(pk))
        .map(|c| c.document.unwrap()["n"].as_i64().unwrap())
        .collect()
}

/// A transaction that read a partition before another node committed to
/// it cannot commit: 449, nothing of it written, the LSN it would have
/// taken not lost, and the node still writes; its next transaction reads
/// the other node's commit.
#[test]
fn a_commit_after_another_nodes_commit_is_retry_with() {
    let (a, b) = two_nodes_with_counters(&["k"]);
    let counters = a.container("counters").unwrap();
    let mut txn = counters.begin("k").unwrap();
    txn.replace_item(
        "counter",
        json!({"id": "counter", "pk": "k", "n": 100}),
        None,
    )
    .unwrap();
    increment(&b, "k").unwrap();
    let err = txn.commit().unwrap_err();
    assert!(matches!(err, Error::PartitionChanged { .. }), "{err}");
    assert_eq!(err.status(), 449);
    assert!(err.is_retryable());
    for db in [&a, &b] {
        assert_eq!(counter(db, "k", "counter"), 1, "B's commit, not A's");
    }
    increment(&a, "k").unwrap();
    assert_eq!(counter(&b, "k", "counter"), 2);
    let lsns: Vec<u64> = changes_of(&b, "counters").iter().map(|c| c.0).collect();
    assert_eq!(lsns, [1, 2, 3], "the refused commit left no gap");
}

/// `Container::transaction` runs its closure again when another node
/// committed to the partition while it ran, so its caller sees no 449:
/// the second run reads the other node's commit and commits on top.
#[test]
fn a_transaction_runs_again_after_another_nodes_commit() {
    let (a, b) = two_nodes_with_counters(&["k"]);
    let counters = a.container("counters").unwrap();
    let mut runs = Vec::new();
    counters
        .transaction("k", |txn| {
            let mut doc = txn.read_item("counter")?.into_value();
            runs.push(doc["n"].as_i64().unwrap());
            if runs.len() == 1 {
                // B commits while A's transaction is open.
                increment(&b, "k").unwrap();
            }
            doc["n"] = json!(doc["n"].as_i64().unwrap() + 1);
            txn.replace_item("counter", doc, None)?;
            Ok::<_, Error>(())
        })
        .unwrap();
    assert_eq!(runs, [0, 1], "the second run saw B's commit");
    assert_eq!(counter(&b, "k", "counter"), 2);
}

/// A node's cached partition is not what it reads once another node has
/// committed to it: point reads, queries, read feeds and transactions see
/// the other node's commit.
#[test]
fn a_node_reads_what_another_node_committed() {
    let url = database();
    let a = open(&url);
    let posts = a.create_container("posts", "/pk").unwrap();
    posts
        .create_item("p", json!({"id": "d", "pk": "p", "v": "old"}), None)
        .unwrap();
    let b = open(&url);
    // A has the partition in memory (its transaction loaded it).
    posts
        .transaction("p", |txn| txn.read_item("d").map(drop))
        .unwrap();
    assert_eq!(body(&a, "posts", "p", "d")["v"], "old");
    b.container("posts")
        .unwrap()
        .replace_item("p", "d", json!({"id": "d", "pk": "p", "v": "new"}), None)
        .unwrap();
    b.container("posts")
        .unwrap()
        .create_item("p", json!({"id": "e", "pk": "p", "v": "added"}), None)
        .unwrap();
    assert_eq!(body(&a, "posts", "p", "d")["v"], "new", "point read");
    let page = posts
        .query_items(
            "SELECT VALUE c.v FROM c ORDER BY c.id",
            &serde_json::Map::new(),
            &crate::QueryItemsOptions {
                partition_key: Some(PartitionKey::from("p")),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(page.items, [json!("new"), json!("added")], "query");
    let feed = posts
        .read_feed("p", &crate::FeedOptions::default())
        .unwrap();
    assert_eq!(feed.items.len(), 2, "read feed");
    let seen = posts
        .transaction("p", |txn| {
            Ok::<_, Error>(txn.read_item("d")?.value()["v"].clone())
        })
        .unwrap();
    assert_eq!(seen, "new", "transaction");
}

/// A node that dies in the middle of a commit leaves nothing behind:
/// PostgreSQL rolls its open transaction back when the connection goes,
/// so the other node finds no document, no log entry, no LSN taken and
/// the partition's version unmoved.
#[test]
fn a_node_that_dies_mid_commit_leaves_nothing() {
    let url = database();
    let a = open(&url);
    let posts = a.create_container("posts", "/pk").unwrap();
    posts
        .create_item("p", json!({"id": "first", "pk": "p"}), None)
        .unwrap();
    let dying = PostgresStorage::connect(&url, crate::Durability::Full).unwrap();
    {
        let mut conn = dying.writer.lock();
        conn.client.batch_execute("BEGIN").unwrap();
        let mut record = creation("posts", "p", "ghost", 1000);
        record.base_version = 1;
        let lsn = super::write_record(&mut conn, &dying.policies, &record)
            .map_err(|e| e.into_error("write", "the dying node"))
            .unwrap();
        assert_eq!(lsn, Some(2), "written, not committed");
    }
    // The node dies: its connections close without a COMMIT.
    drop(dying);
    let b = open(&url);
    let posts_b = b.container("posts").unwrap();
    assert!(matches!(
        posts_b.read_item("p", "ghost"),
        Err(Error::NotFound { .. })
    ));
    posts_b
        .create_item("p", json!({"id": "second", "pk": "p"}), None)
        .unwrap();
    assert_eq!(
        changes_of(&b, "posts"),
        [
            (1, "first".to_owned(), "create"),
            (2, "second".to_owned(), "create")
        ]
    );
}

/// Two nodes writing one container, each in partitions of its own and
/// in one they share, produce one change log: every acknowledged write
/// once, at gapless LSNs, the same read from either node, and nothing of
/// a write refused with 449 (another node won all its attempts). Loop
/// size: `PARTITA_PG_NODE_WRITES` (writes per thread).
#[test]
fn two_nodes_write_one_complete_change_feed() {
    let writes = bound("PARTITA_PG_NODE_WRITES", 40);
    let url = database();
    let a = open(&url);
    a.create_container("posts", "/pk").unwrap();
    let b = open(&url);
    let written: Vec<Vec<(String, bool)>> = std::thread::scope(|s| {
        let workers: Vec<_> = [(&a, "a"), (&b, "b"), (&a, "a2"), (&b, "b2")]
            .into_iter()
            .map(|(db, name)| {
                s.spawn(move || {
                    let posts = db.container("posts").unwrap();
                    (0..writes)
                        .map(|i| {
                            let pk = if i % 2 == 0 { "shared" } else { name };
                            let id = format!("{name}-{i}");
                            match posts.create_item(pk, json!({"id": id, "pk": pk}), None) {
                                Ok(_) => (id, true),
                                Err(Error::PartitionChanged { .. }) => (id, false),
                                Err(e) => panic!("{id}: {e}"),
                            }
                        })
                        .collect()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut expected: Vec<String> = written
        .iter()
        .flatten()
        .filter(|(_, acknowledged)| *acknowledged)
        .map(|(id, _)| id.clone())
        .collect();
    expected.sort();
    eprintln!(
        "{} of {} writes acknowledged",
        expected.len(),
        written.iter().flatten().count()
    );
    let feeds: Vec<Vec<(u64, String, &str)>> =
        [&a, &b].iter().map(|db| changes_of(db, "posts")).collect();
    assert_eq!(feeds[0], feeds[1], "the same log from either node");
    let lsns: Vec<u64> = feeds[0].iter().map(|c| c.0).collect();
    assert_eq!(lsns, (1..=expected.len() as u64).collect::<Vec<_>>());
    let mut ids: Vec<String> = feeds[0].iter().map(|c| c.1.clone()).collect();
    ids.sort();
    assert_eq!(ids, expected, "every acknowledged write, once, no other");
}

/// Two nodes creating documents in one container give them distinct
/// rids and etags: each draws sequence numbers from a block reserved for
/// it alone, above what either used before it opened.
#[test]
fn two_nodes_never_hand_out_one_rid_or_etag() {
    let url = database();
    let a = open(&url);
    a.create_container("posts", "/pk")
        .unwrap()
        .create_item("p", json!({"id": "before", "pk": "p"}), None)
        .unwrap();
    let b = open(&url);
    let mut rids = BTreeSet::new();
    let mut etags = BTreeSet::new();
    let mut written = 0;
    for i in 0..6 {
        let (db, pk) = match i % 3 {
            0 => (&a, "p"),
            1 => (&b, "p"),
            _ => (&b, "q"),
        };
        for (n, doc) in [
            db.container("posts")
                .unwrap()
                .create_item(pk, json!({"id": format!("d{i}"), "pk": pk}), None)
                .unwrap(),
            db.container("posts")
                .unwrap()
                .replace_item(
                    pk,
                    &format!("d{i}"),
                    json!({"id": format!("d{i}"), "pk": pk, "n": 1}),
                    None,
                )
                .unwrap(),
        ]
        .iter()
        .enumerate()
        {
            written += 1;
            etags.insert(doc.value()["_etag"].as_str().unwrap().to_owned());
            if n == 0 {
                rids.insert(doc.value()["_rid"].as_str().unwrap().to_owned());
            }
        }
    }
    rids.insert(
        body(&a, "posts", "p", "before")["_rid"]
            .as_str()
            .unwrap()
            .to_owned(),
    );
    assert_eq!(rids.len(), 7, "{rids:?}");
    assert_eq!(etags.len(), written, "{etags:?}");
}

/// A node learns of another node's catalog change (a script replaced, a
/// container's time to live set) from the statement that reads the
/// partition's version, which every transaction sends anyway: its
/// transactions send no catalog statement while nothing changed, read the
/// catalog once after a change, and then run on what the other node
/// stored.
#[test]
fn a_node_reads_the_catalog_only_after_another_node_changed_it() {
    let url = database();
    let a = open(&url);
    let posts_a = a.create_container("posts", "/pk").unwrap();
    posts_a
        .create_script(ScriptProperties::stored_procedure("p", "function p() {}"))
        .unwrap();
    let storage = PostgresStorage::connect(&url, crate::Durability::Full).unwrap();
    let log = storage.statement_log();
    let b = Database::with_storage(Box::new(storage), Options::default()).unwrap();
    let posts_b = b.container("posts").unwrap();
    let catalog_reads = |logged: &[Logged]| {
        logged
            .iter()
            .filter(|l| [super::READ_CATALOG, super::LOAD_CONTAINERS].contains(&l.sql.as_str()))
            .count()
    };
    let write = |i: u32| {
        posts_b
            .create_item("k", json!({"id": format!("d{i}"), "pk": "k"}), None)
            .unwrap();
    };
    write(0);
    log.take();
    write(1);
    let logged = log.take();
    assert_eq!(catalog_reads(&logged), 0, "nothing changed: {logged:?}");
    assert!(logged.iter().any(|l| l.sql == super::READ_VERSION));

    posts_a.set_default_ttl(Some(60)).unwrap();
    posts_a
        .replace_script(ScriptProperties::stored_procedure(
            "p",
            "function p() { 2; }",
        ))
        .unwrap();
    write(2);
    let logged = log.take();
    assert_eq!(
        catalog_reads(&logged),
        2,
        "one version read and one load: {logged:?}"
    );
    assert_eq!(posts_b.properties().default_ttl, Some(60));
    let body = posts_b
        .read_script(ScriptKind::StoredProcedure, "p")
        .unwrap();
    assert_eq!(&*body.body, b"function p() { 2; }");
    write(3);
    assert_eq!(catalog_reads(&log.take()), 0, "taken once");
}

/// Runs `write` on a thread while another session deadlocks with it:
/// that session runs `holds` (which locks a row the write needs after
/// one it locks first), waits until the write waits for it, then runs
/// `asks` (which asks for that first row). PostgreSQL finds the deadlock
/// in the session that has waited longer, the write's (the other one's
/// `deadlock_timeout` is a minute), and rolls the write back with
/// SQLSTATE 40P01.
fn deadlocked<T: Send>(url: &str, holds: &str, asks: &str, write: impl FnOnce() -> T + Send) -> T {
    let connect = || postgres::Client::connect(url, postgres::NoTls).unwrap();
    let (mut other, mut watcher) = (connect(), connect());
    other
        .batch_execute("SET deadlock_timeout = '1min'; BEGIN")
        .unwrap();
    other.batch_execute(holds).unwrap();
    std::thread::scope(|s| {
        let writing = s.spawn(write);
        let started = std::time::Instant::now();
        while watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
                &[],
            )
            .unwrap()
            .get::<_, i64>(0)
            == 0
        {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "the write never waited for the row {holds:?} locks"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // Returns once the write is rolled back and lets its row go.
        other.batch_execute(asks).unwrap();
        other.batch_execute("ROLLBACK").unwrap();
        writing.join().unwrap()
    })
}

/// Runs `commit` (which commits to partition `pk` of `counters`, already
/// at version 1 or more) while another session deadlocks with it
/// ([`deadlocked`]): that session locks the partition's version row, and
/// asks for the container's log head, which the commit holds.
fn with_a_deadlock<T: Send>(url: &str, pk: &str, commit: impl FnOnce() -> T + Send) -> T {
    let hash = pk_hash(&PartitionKey::from(pk).to_json_array());
    deadlocked(
        url,
        &format!(
            "SELECT 1 FROM partition_versions WHERE container = 'counters' AND pk_hash = {hash} FOR UPDATE"
        ),
        "SELECT 1 FROM log_heads WHERE container = 'counters' FOR UPDATE",
        commit,
    )
}

/// A commit PostgreSQL rolls back for a deadlock (or a serialization
/// failure) wrote nothing: it is a 449 naming the SQLSTATE, the store
/// stays writable, no LSN is lost, and `Container::transaction` runs its
/// closure again and commits.
#[test]
fn a_commit_rolled_back_for_a_deadlock_is_retry_with() {
    let url = database();
    let a = open(&url);
    let counters = a.create_container("counters", "/pk").unwrap();
    counters
        .create_item("k", json!({"id": "counter", "pk": "k", "n": 0}), None)
        .unwrap();
    let err = with_a_deadlock(&url, "k", || {
        let mut txn = counters.begin("k")?;
        txn.replace_item(
            "counter",
            json!({"id": "counter", "pk": "k", "n": 100}),
            None,
        )?;
        txn.commit()
    })
    .unwrap_err();
    assert!(matches!(err, Error::RolledBack { .. }), "{err}");
    assert_eq!(err.status(), 449);
    assert!(err.is_retryable());
    assert!(err.to_string().contains("40P01"), "{err}");
    assert!(!a.is_read_only(), "the store stays writable");
    assert_eq!(counter(&a, "k", "counter"), 0, "nothing was written");
    increment(&a, "k").unwrap();
    assert_eq!(counter(&a, "k", "counter"), 1);

    let mut runs = 0;
    with_a_deadlock(&url, "k", || {
        counters.transaction("k", |txn| {
            runs += 1;
            let mut doc = txn.read_item("counter")?.into_value();
            doc["n"] = json!(doc["n"].as_i64().unwrap() + 1);
            txn.replace_item("counter", doc, None)?;
            Ok::<_, Error>(())
        })
    })
    .unwrap();
    assert_eq!(runs, 2, "the rolled-back run, then one that committed");
    assert_eq!(counter(&a, "k", "counter"), 2);
    let lsns: Vec<u64> = changes_of(&a, "counters").iter().map(|c| c.0).collect();
    assert_eq!(lsns, [1, 2, 3], "the rolled-back commits left no gap");
}

/// The containers and the body of procedure `s` of `posts`, as a node
/// opened now finds them.
fn catalog_of(url: &str) -> (Vec<ContainerProperties>, Option<Vec<u8>>) {
    let db = open(url);
    let script = db.container("posts").ok().and_then(|posts| {
        let s = posts.read_script(ScriptKind::StoredProcedure, "s").ok()?;
        Some(s.body.to_vec())
    });
    (db.containers(), script)
}

/// Creating, changing and deleting a container or a script that
/// PostgreSQL rolls back for a deadlock wrote nothing: each is a 449
/// naming the SQLSTATE, the store stays writable, another node finds the
/// catalog as it was, and the same write succeeds when sent again. Each
/// write first moves the catalog's version (the row the other session
/// then asks for), then writes its own row (the one it holds).
#[test]
fn container_and_script_writes_rolled_back_for_a_deadlock_are_retry_with() {
    let url = database();
    let a = open(&url);
    let posts = a.create_container("posts", "/pk").unwrap();
    let script = |body: &str| {
        ScriptProperties::stored_procedure(
            "s",
            format!("function s() {{ getContext().getResponse().setBody('{body}'); }}"),
        )
    };
    posts.create_script(script("v1")).unwrap();
    let catalog = "SELECT 1 FROM catalog WHERE id = 1 FOR UPDATE";
    let script_row = "SELECT 1 FROM scripts WHERE container = 'posts' AND id = 's' FOR UPDATE";
    type Write<'a> = &'a (dyn Fn() -> Result<(), Error> + Sync);
    let writes: [(&str, &str, Write); 5] = [
        (
            "create a container",
            "INSERT INTO containers (id, ordinal, pk_path, physical_partitions, settings) \
             VALUES ('more', 1000, '/pk', 1, '{}')",
            &|| a.create_container("more", "/pk").map(drop),
        ),
        (
            "update a container",
            "SELECT 1 FROM containers WHERE id = 'posts' FOR UPDATE",
            &|| posts.set_default_ttl(Some(60)),
        ),
        ("store a script", script_row, &|| {
            posts.replace_script(script("v2")).map(drop)
        }),
        ("delete a script", script_row, &|| {
            posts.delete_script(ScriptKind::StoredProcedure, "s")
        }),
        (
            "delete a container",
            "SELECT 1 FROM log_heads WHERE container = 'posts' FOR UPDATE",
            &|| a.delete_container("posts"),
        ),
    ];
    for (what, holds, write) in writes {
        let before = catalog_of(&url);
        let err = deadlocked(&url, holds, catalog, write).unwrap_err();
        assert!(
            matches!(err, Error::WriteRolledBack { .. }),
            "{what}: {err}"
        );
        assert_eq!(err.status(), 449, "{what}");
        assert!(err.is_retryable(), "{what}");
        assert!(err.to_string().contains("40P01"), "{what}: {err}");
        assert!(err.to_string().contains(what), "{what}: {err}");
        assert!(!a.is_read_only(), "{what}: the store stays writable");
        assert!(catalog_of(&url) == before, "{what}: nothing was written");
        write().unwrap_or_else(|e| panic!("{what}, sent again: {e}"));
        assert!(
            catalog_of(&url) != before,
            "{what}: written once sent again"
        );
    }
    let ids: Vec<String> = catalog_of(&url).0.into_iter().map(|c| c.id).collect();
    assert_eq!(ids, ["more"]);
}
