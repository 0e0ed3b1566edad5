//! Runs `N` warm JavaScript calls of one kind, for counting instructions
//! per call under callgrind: the difference between two runs with
//! different `N`, divided by the difference in `N`, is one call's cost
//! without the setup's.
//!
//! `cargo run --release -p runtime --example js_calls -- comment 200`
//! runs the blog's createComment; `feed 20` a procedure that queries 100
//! documents and returns them as its body (the blog's feed read, Q6).

/// The `partita` binary's allocator, so the counts are what users run.
#[global_allocator]
static ALLOCATOR: partita_alloc::MiMalloc = partita_alloc::MiMalloc;

use engine::{Container, Database};
use runtime::{Invocation, Limits, Script, run_js};
use serde_json::json;

const CREATE_COMMENT: &str = include_str!("../../sprocs/samples/js/createComment.js");

/// The benchmark harness's feed read (Q6) as a JavaScript procedure.
const READ_FEED: &str = include_str!("../../bench/src/js/readFeed.js");

fn comment(posts: &Container, script: &Script<'_>, limits: &Limits) {
    let mut txn = posts.begin("p1").expect("begin");
    let params = vec![
        json!("p1"),
        json!({"type": "comment", "userId": "u1", "userUsername": "alice", "content": "Nice post!", "creationDate": "2024-01-01T00:00:00Z"}),
    ];
    run_js(script, Invocation::Procedure { params }, &mut txn, limits).expect("createComment");
    txn.commit().expect("commit");
}

fn feed(feed: &Container, script: &Script<'_>, limits: &Limits) {
    let mut txn = feed.begin("post").expect("begin");
    let out = run_js(
        script,
        Invocation::Procedure { params: vec![] },
        &mut txn,
        limits,
    )
    .expect("readFeed");
    std::hint::black_box(out);
}

/// Runs `call` once to warm the pooled sandbox and the compiled script,
/// then `calls` times.
fn warm_then(calls: usize, call: impl Fn()) {
    call();
    for _ in 0..calls {
        call();
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = args.next().unwrap_or_else(|| "comment".to_owned());
    let calls: usize = args.next().map_or(100, |n| n.parse().expect("a count"));
    let limits = Limits::default();
    let db = Database::in_memory();
    match kind.as_str() {
        "comment" => {
            let posts = db.create_container("posts", "/postId").expect("container");
            posts
                .create_item(
                    "p1",
                    json!({"id": "p1", "postId": "p1", "type": "post", "title": "Hello", "commentCount": 0}),
                    None,
                )
                .expect("post");
            let script = Script {
                id: "createComment",
                version: 1,
                body: CREATE_COMMENT,
            };
            warm_then(calls, || comment(&posts, &script, &limits));
        }
        "feed" => {
            let container = db.create_container("feed", "/type").expect("container");
            for seq in 0..120_u64 {
                let id = format!("f-{seq}");
                let post = json!({
                    "id": id, "postId": id, "type": "post", "userId": "u1",
                    "userUsername": "user-u1", "title": format!("Post number {seq}"),
                    "content": "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt.",
                    "commentCount": 0, "likeCount": 0,
                    "creationDate": format!("2026-02-01T00:00:00.{seq:012}Z"),
                });
                container
                    .create_item("post", post, None)
                    .expect("feed post");
            }
            let script = Script {
                id: "readFeed",
                version: 1,
                body: READ_FEED,
            };
            warm_then(calls, || feed(&container, &script, &limits));
        }
        other => panic!("unknown kind {other}: comment or feed"),
    }
}
