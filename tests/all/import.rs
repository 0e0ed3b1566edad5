//! Bulk import (`Container::import_items`): one transaction per logical
//! partition and chunk, several at once; a failure stops it with what
//! committed kept and the failed partition's documents not written; an
//! upsert import resumes it; the data survives a restart.

use partita::{ContainerProperties, Database, ImportOptions, UniqueKey};
use serde_json::{Value, json};

fn doc(i: u64) -> Value {
    json!({"id": format!("d{i}"), "pk": format!("p{}", i % 7), "n": i})
}

fn count(container: &partita::Container) -> u64 {
    let page = container
        .query_items(
            "SELECT VALUE COUNT(1) FROM c",
            &Default::default(),
            &Default::default(),
        )
        .unwrap();
    page.items[0].as_u64().unwrap()
}

#[test]
fn documents_are_imported_a_transaction_per_partition_and_chunk() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::open(dir.path()).unwrap();
        let docs = db.create_container("docs", "/pk").unwrap();
        let options = ImportOptions {
            chunk_size: 100,
            threads: 3,
            ..ImportOptions::default()
        };
        let mut seen = Vec::new();
        let report = docs
            .import_items((0..1000).map(doc), &options, &mut |n| seen.push(n))
            .unwrap();
        assert_eq!(report.documents, 1000);
        // 10 chunks of 100, each over the 7 partitions.
        assert_eq!(report.transactions, 70);
        assert_eq!(seen, (1..=10).map(|c| c * 100).collect::<Vec<u64>>());
        assert!(report.bytes > 1000 * 20);
        assert_eq!(count(&docs), 1000);
    }
    let db = Database::open(dir.path()).unwrap();
    let docs = db.container("docs").unwrap();
    assert_eq!(count(&docs), 1000);
    assert_eq!(docs.read_item("p3", "d10").unwrap().value()["n"], 10);
}

#[test]
fn a_chunk_ends_at_its_byte_budget() {
    let db = Database::in_memory();
    let docs = db.create_container("docs", "/pk").unwrap();
    let options = ImportOptions {
        chunk_bytes: 1,
        ..ImportOptions::default()
    };
    let mut chunks = 0;
    let report = docs
        .import_items((0..20).map(doc), &options, &mut |_| chunks += 1)
        .unwrap();
    // Every document fills its chunk: one transaction each.
    assert_eq!((chunks, report.transactions), (20, 20));
}

#[test]
fn a_conflict_stops_the_import_and_an_upsert_resumes_it() {
    let db = Database::in_memory();
    let docs = db.create_container("docs", "/pk").unwrap();
    // d500 (partition p3) is already there.
    docs.create_item("p3", doc(500), None).unwrap();
    let options = ImportOptions {
        chunk_size: 100,
        threads: 1,
        ..ImportOptions::default()
    };
    let err = docs
        .import_items((0..1000).map(doc), &options, &mut |_| {})
        .unwrap_err();
    assert_eq!(err.source.status(), 409);
    assert_eq!(err.partition_key, "p3".into());
    // The chunk of documents 500..600: p3's first there is d500.
    assert_eq!(err.first, 500);
    assert!(err.to_string().contains("d500"), "{err}");
    // The five chunks before, and one thread's partitions of the sixth
    // before p3 (p3 is the first partition of that chunk: none).
    assert_eq!(err.committed, 500);
    assert_eq!(count(&docs), 501);
    // Nothing of p3's transaction in that chunk was written.
    assert!(docs.read_item("p3", "d507").is_err());
    let resumed = ImportOptions {
        upsert: true,
        ..options
    };
    let report = docs
        .import_items((0..1000).map(doc), &resumed, &mut |_| {})
        .unwrap();
    assert_eq!(report.documents, 1000);
    assert_eq!(count(&docs), 1000);
}

#[test]
fn unique_keys_and_bad_documents_are_refused_as_for_any_write() {
    let db = Database::in_memory();
    let users = db
        .create_container_with(ContainerProperties {
            unique_keys: vec![UniqueKey::new(["/email"])],
            ..ContainerProperties::new("users", "/tenant")
        })
        .unwrap();
    let docs = vec![
        json!({"id": "a", "tenant": "t", "email": "x@example.com"}),
        json!({"id": "b", "tenant": "t", "email": "x@example.com"}),
    ];
    let err = users
        .import_items(docs, &ImportOptions::default(), &mut |_| {})
        .unwrap_err();
    assert_eq!(err.source.status(), 409);
    assert_eq!(err.committed, 0);
    assert!(users.read_item("t", "a").is_err(), "half a transaction");
    let err = users
        .import_items(
            vec![json!({"id": 7, "tenant": "t"})],
            &ImportOptions::default(),
            &mut |_| {},
        )
        .unwrap_err();
    assert_eq!(err.source.status(), 400);
}
