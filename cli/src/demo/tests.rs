//! Tests of the demo's models: the three models answer alike, the change
//! feed keeps V2's and V3's copies right through writes and renames, and
//! the invariant checks catch what they claim to catch.

use indicatif::ProgressBar;
use partita::{Change, ChangeKind, Database, Lsn};
use serde_json::{Value, json};

use super::data::{self, Plan, Version};
use super::invariants;
use super::model::{Blog, Driver, Language, Pattern, ScriptSet};
use super::propagate::{self, LogFollower, Propagator};

fn loaded(version: Version, plan: &Plan) -> (Database, Blog) {
    loaded_in(Language::JavaScript, version, plan)
}

fn loaded_in(language: Language, version: Version, plan: &Plan) -> (Database, Blog) {
    let db = Database::in_memory();
    let scripts = ScriptSet::new(language, None).unwrap();
    let mut blog = Blog::create(&db, version, &scripts).unwrap();
    blog.load(plan, 2, &ProgressBar::hidden()).unwrap();
    (db, blog)
}

/// The parts of an answer every model must agree on.
fn view(answer: &Value) -> Value {
    let pick = |v: &Value| {
        json!({
            "id": v["id"], "userId": v["userId"], "userUsername": v["userUsername"],
            "commentCount": v["commentCount"], "likeCount": v["likeCount"],
            "creationDate": v["creationDate"], "title": v["title"],
        })
    };
    match answer {
        Value::Array(items) => {
            let mut items: Vec<Value> = items.iter().map(pick).collect();
            items.sort_by_key(|v| v["id"].to_string());
            Value::Array(items)
        }
        other => pick(other),
    }
}

#[test]
fn the_three_models_answer_every_query_alike() {
    let plan = Plan::new(12, 3);
    let models: Vec<(Database, Blog)> = Version::ALL.iter().map(|v| loaded(*v, &plan)).collect();
    let posts = plan.posts.len();
    for (i, u) in [(0, 0), (posts / 2, 5), (posts - 1, 11)] {
        let answers: Vec<Vec<Value>> = models
            .iter()
            .map(|(_, blog)| {
                vec![
                    view(&blog.q2(i).unwrap().1),
                    view(&blog.q3(u).unwrap().1),
                    view(&blog.q4(i).unwrap().1),
                    view(&blog.q5(i).unwrap().1),
                    view(&blog.q6().unwrap().1),
                ]
            })
            .collect();
        assert_eq!(
            answers[0], answers[1],
            "V1 and V2 differ on post {i}, user {u}"
        );
        assert_eq!(
            answers[1], answers[2],
            "V2 and V3 differ on post {i}, user {u}"
        );
        let q2 = &answers[0][0];
        assert_eq!(q2["commentCount"], plan.posts[i].comments);
        assert_eq!(q2["likeCount"], plan.posts[i].likes);
        assert_eq!(q2["userUsername"], data::username(plan.posts[i].author));
        let q3 = answers[0][1].as_array().unwrap();
        assert_eq!(
            q3.len(),
            plan.posts.iter().filter(|p| p.author == u).count()
        );
        assert_eq!(
            answers[0][2].as_array().unwrap().len() as u32,
            plan.posts[i].comments
        );
        assert_eq!(
            answers[0][3].as_array().unwrap().len() as u32,
            plan.posts[i].likes
        );
        let q6 = &answers[0][4];
        assert_eq!(q6.as_array().unwrap().len(), 100);
        assert!(
            q6.as_array()
                .unwrap()
                .iter()
                .any(|p| p["id"] == data::post_id(posts - 1))
        );
    }
    // Q6 lists newest first, in every model.
    for (_, blog) in &models {
        let newest = blog.q6().unwrap().1;
        assert_eq!(newest[0]["id"], data::post_id(posts - 1));
        assert_eq!(newest[99]["id"], data::post_id(posts - 100));
    }
}

#[test]
fn writes_and_a_rename_keep_v3_consistent_through_the_change_feed() {
    v3_stays_consistent(Language::JavaScript);
}

/// The same with the WebAssembly procedures and trigger (the Rust guests,
/// built from sprocs/samples/rust), as `partita demo --wasm` uploads them.
#[test]
fn the_wasm_procedures_keep_v3_consistent_too() {
    v3_stays_consistent(Language::Wasm);
}

fn v3_stays_consistent(language: Language) {
    let plan = Plan::new(8, 5);
    let (_db, mut blog) = loaded_in(language, Version::V3, &plan);
    let feed = blog.feed.clone().unwrap();
    let mut driver = Driver::new(&plan, 5);
    for pattern in Pattern::ALL {
        for _ in 0..30 {
            driver.run(&blog, pattern).unwrap();
        }
        if pattern.writes() {
            blog.propagate().unwrap();
        }
    }
    // C2 made 30 posts newer than every loaded one: the feed now has them.
    let newest = blog.q6().unwrap().1;
    assert_eq!(newest[0]["id"], data::post_id(plan.posts.len() + 29));
    invariants::feed(&blog.posts, &feed).unwrap();
    invariants::counts(&blog.posts).unwrap();
    invariants::usernames(&blog).unwrap();

    // A comment through the procedure: the post, its copy in users and in
    // the feed all count it once the change feed has run.
    let i = plan.posts.len() + 29;
    let before = blog.q2(i).unwrap().1["commentCount"].as_i64().unwrap();
    blog.c3(i, 5000, 1).unwrap();
    blog.propagate().unwrap();
    assert_eq!(blog.q2(i).unwrap().1["commentCount"], before + 1);
    assert_eq!(blog.q6().unwrap().1[0]["commentCount"], before + 1);
    invariants::counts(&blog.posts).unwrap();
    invariants::usernames(&blog).unwrap();

    // A rename reaches posts, comments, likes and every copy.
    let author = plan.posts[0].author;
    let id = data::user_id(author);
    blog.users
        .replace_item(
            id.as_str(),
            &id,
            data::user_named(&id, "someone-else"),
            None,
        )
        .unwrap();
    let stale = invariants::usernames(&blog).unwrap_err().to_string();
    assert!(stale.contains("someone-else"), "{stale}");
    blog.propagate().unwrap();
    invariants::usernames(&blog).unwrap();
    let q3 = blog.q3(author).unwrap().1;
    assert!(!q3.as_array().unwrap().is_empty());
    assert!(
        q3.as_array()
            .unwrap()
            .iter()
            .all(|p| p["userUsername"] == "someone-else")
    );
}

#[test]
fn the_checks_catch_wrong_counts_a_wrong_feed_and_stale_copies() {
    let plan = Plan::new(6, 9);
    let (_db, blog) = loaded(Version::V3, &plan);
    let feed = blog.feed.clone().unwrap();
    invariants::feed(&blog.posts, &feed).unwrap();
    invariants::counts(&blog.posts).unwrap();
    invariants::usernames(&blog).unwrap();

    // A count off by one.
    let id = data::post_id(3);
    let mut post = blog.posts.read_item(id.as_str(), &id).unwrap().into_value();
    post["likeCount"] = json!(post["likeCount"].as_i64().unwrap() + 1);
    blog.posts
        .replace_item(id.as_str(), &id, post.clone(), None)
        .unwrap();
    let err = invariants::counts(&blog.posts).unwrap_err().to_string();
    assert!(err.contains("\"p3\""), "{err}");
    // Without the change feed, the copy in users is stale too.
    let err = invariants::usernames(&blog).unwrap_err().to_string();
    assert!(err.contains("copy of \"p3\""), "{err}");
    post["likeCount"] = json!(post["likeCount"].as_i64().unwrap() - 1);
    blog.posts
        .replace_item(id.as_str(), &id, post, None)
        .unwrap();

    // A feed missing its newest post, then a feed holding an old one.
    let newest = data::post_id(plan.posts.len() - 1);
    let copy = feed.read_item("post", &newest).unwrap().into_value();
    feed.delete_item("post", &newest, None).unwrap();
    let err = invariants::feed(&blog.posts, &feed)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&newest), "{err}");
    feed.create_item("post", copy, None).unwrap();
    invariants::feed(&blog.posts, &feed).unwrap();
    let old = blog.posts.read_item("p0", "p0").unwrap();
    feed.create_item("post", data::short_post(&old), None)
        .unwrap();
    let err = invariants::feed(&blog.posts, &feed)
        .unwrap_err()
        .to_string();
    assert!(err.contains("p0"), "{err}");
}

#[test]
fn deleting_a_post_deletes_its_copies() {
    let plan = Plan::new(5, 2);
    let (_db, mut blog) = loaded(Version::V3, &plan);
    let feed = blog.feed.clone().unwrap();
    let newest = data::post_id(plan.posts.len() - 1);
    let author = data::user_id(plan.posts[plan.posts.len() - 1].author);
    blog.users.read_item(author.as_str(), &newest).unwrap();
    blog.posts
        .delete_item(newest.as_str(), &newest, None)
        .unwrap();
    blog.propagate().unwrap();
    assert_eq!(feed.read_item("post", &newest).unwrap_err().status(), 404);
    assert_eq!(
        blog.users
            .read_item(author.as_str(), &newest)
            .unwrap_err()
            .status(),
        404
    );
}

#[test]
fn a_failed_handler_sees_the_same_changes_again() {
    let db = Database::in_memory();
    let c = db.create_container("c", "/pk").unwrap();
    c.transaction("a", |txn| {
        txn.create_item(json!({"id": "1", "pk": "a"}))?;
        txn.create_item(json!({"id": "2", "pk": "a"}))
    })
    .unwrap();
    c.create_item("b", json!({"id": "3", "pk": "b"}), None)
        .unwrap();
    let seen = std::sync::Arc::new(shared_log::Seen::default());
    let fail_on = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (seen2, fail2) = (seen.clone(), fail_on.clone());
    let mut follower = LogFollower::new(
        c.clone(),
        Box::new(move |change: &Change| {
            assert_eq!(change.kind, ChangeKind::Create);
            if change.id == "2" && fail2.swap(false, std::sync::atomic::Ordering::SeqCst) {
                anyhow::bail!("transient");
            }
            seen2.push(change.id.clone());
            Ok(())
        }),
    );
    assert!(follower.poll().is_err());
    assert_eq!(
        follower.poll().unwrap(),
        3,
        "the whole first transaction again, then the second"
    );
    assert_eq!(seen.take(), ["1", "1", "2", "3"]);
    assert_eq!(follower.poll().unwrap(), 0);
    assert!(c.read_changes(Lsn::ZERO, 10).unwrap().len() == 3);
}

/// A tiny shared log of ids for the handler test.
mod shared_log {
    #[derive(Default)]
    pub(super) struct Seen(std::sync::Mutex<Vec<String>>);

    impl Seen {
        pub(super) fn push(&self, id: String) {
            self.0.lock().unwrap().push(id);
        }

        pub(super) fn take(&self) -> Vec<String> {
            std::mem::take(&mut self.0.lock().unwrap())
        }
    }
}

#[test]
fn update_usernames_runs_only_where_the_user_has_items() {
    let plan = Plan::new(6, 4);
    let (_db, blog) = loaded(Version::V2, &plan);
    let partitions = propagate::update_usernames(&blog.posts, "u2", "two").unwrap();
    let expected = (0..plan.posts.len())
        .filter(|&i| {
            let (comments, likes) = plan.reactions(i);
            plan.posts[i].author == 2 || comments.iter().chain(&likes).any(|r| r.user == 2)
        })
        .count();
    assert_eq!(partitions, expected);
    let response = blog
        .posts
        .execute_stored_procedure(
            "updateUsernames",
            "p0",
            vec![json!("nobody"), json!("x")],
            None,
        )
        .unwrap();
    assert_eq!(response.stats.docs_written, 0);
}

#[test]
fn a_wasm_dir_without_the_modules_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = ScriptSet::new(Language::Wasm, Some(dir.path()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("create_comment.wasm"), "{err}");
}

#[test]
fn a_second_demo_on_the_same_database_is_refused() {
    let plan = Plan::new(2, 1);
    let (db, _blog) = loaded(Version::V1, &plan);
    let scripts = ScriptSet::new(Language::JavaScript, None).unwrap();
    let err = Blog::create(&db, Version::V1, &scripts)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("already holds documents"), "{err}");
}
