//! Transactional batch, bulk and patch through the facade: triggers on a
//! patch, bulk operations that commit on their own, and the same results in
//! memory and durably (before and after a reopen).

use partita::{
    BatchOperation, Database, PartitionKey, Patch, ScriptProperties, TriggerOperation, TriggerType,
    WriteOptions,
};
use serde_json::{Value, json};

fn patch(ops: Value) -> Patch {
    Patch::from_json(&ops).expect("patch")
}

#[test]
fn a_patch_runs_its_triggers_as_a_replace_of_the_patched_document() {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/pk").unwrap();
    posts
        .create_script(ScriptProperties::trigger(
            "stamp",
            "function stamp() { var r = getContext().getRequest(); var d = r.getBody(); \
             d.seen = d.likes; r.setBody(d); }",
            TriggerType::Pre,
            TriggerOperation::Replace,
        ))
        .unwrap();
    posts
        .create_script(ScriptProperties::trigger(
            "onCreate",
            "function onCreate() {}",
            TriggerType::Pre,
            TriggerOperation::Create,
        ))
        .unwrap();
    posts
        .create_item("a", json!({"id": "p", "pk": "a", "likes": 1}), None)
        .unwrap();
    let like = patch(json!([{"op": "incr", "path": "/likes", "value": 1}]));
    let options = WriteOptions {
        pre_triggers: vec!["stamp".into()],
        ..WriteOptions::default()
    };
    let response = posts.patch_item("a", "p", &like, Some(&options)).unwrap();
    assert_eq!(response.document()["likes"], 2);
    assert_eq!(
        response.document()["seen"],
        2,
        "the trigger saw the patched document"
    );
    assert_eq!(response.stats.scripts_run, 1);

    let wrong = WriteOptions {
        pre_triggers: vec!["onCreate".into()],
        ..WriteOptions::default()
    };
    let err = posts.patch_item("a", "p", &like, Some(&wrong)).unwrap_err();
    assert_eq!(err.status(), 400, "{err}");
    assert_eq!(posts.read_item("a", "p").unwrap()["likes"], 2);
}

#[test]
fn a_false_condition_or_a_stale_etag_is_412_and_changes_nothing() {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/pk").unwrap();
    let created = posts
        .create_item("a", json!({"id": "p", "pk": "a", "n": 1}), None)
        .unwrap();
    let conditional = patch(json!({"condition": "FROM c WHERE c.n = 2",
        "operations": [{"op": "set", "path": "/n", "value": 9}]}));
    let err = posts.patch_item("a", "p", &conditional, None).unwrap_err();
    assert_eq!(err.status(), 412);
    assert!(err.to_string().contains("FROM c WHERE c.n = 2"), "{err}");
    let plain = patch(json!([{"op": "set", "path": "/n", "value": 2}]));
    let stale = WriteOptions::if_match("\"stale\"");
    assert_eq!(
        posts
            .patch_item("a", "p", &plain, Some(&stale))
            .unwrap_err()
            .status(),
        412
    );
    let fresh = WriteOptions::if_match(created.document().etag());
    posts.patch_item("a", "p", &plain, Some(&fresh)).unwrap();
    assert_eq!(
        posts
            .patch_item("a", "p", &conditional, None)
            .unwrap()
            .document()["n"],
        9
    );
    assert_eq!(
        posts
            .patch_item("a", "nope", &plain, None)
            .unwrap_err()
            .status(),
        404
    );
    let moves_key = patch(json!([{"op": "set", "path": "/pk", "value": "b"}]));
    assert_eq!(
        posts
            .patch_item("a", "p", &moves_key, None)
            .unwrap_err()
            .status(),
        400
    );
}

#[test]
fn bulk_operations_commit_on_their_own() {
    let db = Database::in_memory();
    let posts = db.create_container("posts", "/pk").unwrap();
    let key = |k: &str| PartitionKey::from(k);
    let results = posts
        .execute_bulk(vec![
            (
                key("a"),
                BatchOperation::create(json!({"id": "1", "pk": "a"})),
            ),
            (
                key("b"),
                BatchOperation::create(json!({"id": "1", "pk": "b"})),
            ),
            (
                key("a"),
                BatchOperation::create(json!({"id": "1", "pk": "a"})),
            ),
            (key("c"), BatchOperation::read("missing")),
            (
                key("b"),
                BatchOperation::upsert(json!({"id": "1", "pk": "b", "v": 2})),
            ),
        ])
        .unwrap();
    let statuses: Vec<u16> = results.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [201, 201, 409, 404, 200]);
    assert_eq!(posts.read_item("b", "1").unwrap()["v"], 2);
    assert!(partita::charge::batch_operation(&results[0]) > 0.0);
    assert!(posts.execute_bulk(vec![]).is_err());
}

#[test]
fn a_busy_partition_is_a_408_for_the_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let options = partita::Options {
        lock_timeout: std::time::Duration::from_millis(1),
        ..partita::Options::default()
    };
    let db = Database::open_with(dir.path(), options).unwrap();
    let posts = db.create_container("posts", "/pk").unwrap();
    let held = posts.begin("a").unwrap();
    let err = posts
        .execute_batch(
            "a",
            vec![BatchOperation::create(json!({"id": "1", "pk": "a"}))],
        )
        .unwrap_err();
    assert_eq!(err.status(), 408);
    drop(held);
}

/// The outcome of a fixed sequence of batches: each batch's statuses, then
/// the partition's documents without system properties.
fn run_batches(db: &Database) -> (Vec<Vec<u16>>, Vec<Value>) {
    let posts = db.create_container_if_not_exists("posts", "/pk").unwrap();
    let batches = vec![
        vec![
            BatchOperation::create(json!({"id": "p", "pk": "a", "n": 0})),
            BatchOperation::create(json!({"id": "c1", "pk": "a"})),
        ],
        vec![
            BatchOperation::patch(
                "p",
                patch(json!([{"op": "incr", "path": "/n", "value": 1}])),
            ),
            BatchOperation::create(json!({"id": "c1", "pk": "a"})),
        ],
        vec![
            BatchOperation::patch(
                "p",
                patch(json!([{"op": "incr", "path": "/n", "value": 1}])),
            ),
            BatchOperation::create(json!({"id": "c2", "pk": "a"})),
            BatchOperation::delete("c1"),
            BatchOperation::upsert(json!({"id": "c3", "pk": "a", "tags": ["x"]})),
            BatchOperation::patch(
                "c3",
                patch(json!([{"op": "add", "path": "/tags/0", "value": "w"}])),
            ),
        ],
    ];
    let statuses = batches
        .into_iter()
        .map(|ops| {
            let response = posts.execute_batch("a", ops).unwrap();
            response.results.iter().map(|r| r.status).collect()
        })
        .collect();
    (statuses, documents(db))
}

fn documents(db: &Database) -> Vec<Value> {
    let posts = db.container("posts").unwrap();
    posts
        .read_feed("a", &partita::FeedOptions::default())
        .unwrap()
        .items
        .iter()
        .map(|d| {
            let mut v = d.value().clone();
            v.as_object_mut()
                .unwrap()
                .retain(|k, _| !k.starts_with('_'));
            v
        })
        .collect()
}

#[test]
fn batches_give_the_same_results_in_memory_and_durably() {
    let in_memory = run_batches(&Database::in_memory());
    let dir = tempfile::tempdir().unwrap();
    let durable = run_batches(&Database::open(dir.path()).unwrap());
    assert_eq!(in_memory, durable);
    assert_eq!(
        in_memory.0,
        [
            vec![201, 201],
            vec![424, 409],
            vec![200, 201, 204, 201, 200]
        ]
    );
    assert_eq!(
        in_memory.1,
        [
            json!({"id": "p", "pk": "a", "n": 1}),
            json!({"id": "c2", "pk": "a"}),
            json!({"id": "c3", "pk": "a", "tags": ["w", "x"]}),
        ]
    );
    let reopened = Database::open(dir.path()).unwrap();
    assert_eq!(documents(&reopened), in_memory.1);
}

#[test]
fn a_batch_on_a_hierarchical_container_needs_the_full_key() {
    let db = Database::in_memory();
    let sessions = db
        .create_container_with(partita::ContainerProperties::hierarchical(
            "sessions",
            ["/tenantId", "/userId"],
        ))
        .unwrap();
    let key = PartitionKey::multi(["t1", "u1"]);
    let response = sessions
        .execute_batch(
            key.clone(),
            vec![
                BatchOperation::create(
                    json!({"id": "a", "tenantId": "t1", "userId": "u1", "n": 1}),
                ),
                BatchOperation::patch(
                    "a",
                    patch(json!([{"op": "incr", "path": "/n", "value": 1}])),
                ),
                BatchOperation::create(json!({"id": "b", "tenantId": "t1", "userId": "u2"})),
            ],
        )
        .unwrap();
    assert_eq!(
        response.failed,
        Some(2),
        "another user's document is another partition"
    );
    assert_eq!(response.results[2].substatus, Some(1001));
    let err = sessions
        .execute_batch(PartitionKey::multi(["t1"]), vec![BatchOperation::read("a")])
        .unwrap_err();
    assert_eq!((err.status(), err.substatus()), (400, Some(1001)), "{err}");
    let response = sessions
        .execute_batch(
            key.clone(),
            vec![BatchOperation::create(
                json!({"id": "a", "tenantId": "t1", "userId": "u1"}),
            )],
        )
        .unwrap();
    assert!(response.is_success());
    assert_eq!(sessions.read_item(key, "a").unwrap().id(), "a");
}
