//! The blog workload of `shared/reference/blog-scenario.md`, written natively
//! against the transaction API.
//!
//! These are the Rust equivalents of the scripts the workload runs as stored
//! procedures: [`create_comment`] is `createComment` (read the post,
//! increment `commentCount`, replace it, create the comment, atomically in
//! the post's logical partition). They serve as the baseline the script
//! runtimes are measured against, and as the demo's workload.

use host_api::member_mut;
use partita::{Container, Document, EngineError, Error, Result};
use serde_json::{Value, json};

/// Adds a comment to a post, atomically: reads the post, increments its
/// `commentCount`, replaces it, and creates `comment` with `postId` and
/// `type: "comment"` set. Returns the stored comment.
///
/// # Errors
/// 404 when the post does not exist, 409
/// when the comment's id is taken (nothing is written then), and any error
/// of the writes.
pub fn create_comment(posts: &Container, post_id: &str, comment: Value) -> Result<Document> {
    let mut comment = Some(comment);
    posts.transaction(post_id, |txn| {
        // Moved, unless another node sharing the store can make this run
        // again.
        let mut comment = posts.raw().for_attempt(&mut comment);
        let mut post = txn.read_item(post_id)?.into_value();
        // Members found by a scan, not by hashing their names (a
        // document's handful of members are compared faster than one
        // name is hashed), and a value already right is left alone.
        if let Some(count) = member_mut(&mut post, "commentCount") {
            *count = json!(count.as_i64().unwrap_or(0) + 1);
        } else {
            post["commentCount"] = json!(1);
        }
        txn.replace_item(post_id, post, None)?;
        set_string(&mut comment, "postId", post_id);
        set_string(&mut comment, "type", "comment");
        Ok::<_, Error>(txn.create_item(comment)?)
    })
}

/// Sets the member `key` of the object `doc` to the string `value`, in
/// place when it is there (where it is), appended otherwise.
fn set_string(doc: &mut Value, key: &str, value: &str) {
    match member_mut(doc, key) {
        Some(Value::String(s)) if s == value => {}
        Some(other) => *other = Value::from(value),
        None => {
            if let Value::Object(map) = doc {
                map.insert(key.to_owned(), Value::from(value));
            }
        }
    }
}

/// A post document as the workload's V2 model stores it.
pub fn post(post_id: &str, user_id: &str, seq: u64) -> Value {
    json!({
        "id": post_id,
        "postId": post_id,
        "type": "post",
        "userId": user_id,
        "userUsername": format!("user-{user_id}"),
        "title": format!("Post number {seq}"),
        "content": "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt.",
        "commentCount": 0,
        "likeCount": 0,
        "creationDate": format!("2026-01-01T00:00:{:02}.{:06}Z", seq % 60, seq),
    })
}

/// Checks the V2 invariant of one post's partition: its `commentCount`
/// equals the number of comments in the partition. Returns both numbers.
///
/// # Errors
/// 404 when the post does not exist.
pub fn comment_counts(posts: &Container, post_id: &str) -> Result<(i64, i64)> {
    let snapshot = posts.raw().snapshot(&post_id.into())?;
    let mut post_count = None;
    let mut comments = 0;
    for doc in snapshot.documents() {
        match doc["type"].as_str() {
            Some("post") if doc.id() == post_id => post_count = doc["commentCount"].as_i64(),
            Some("comment") => comments += 1,
            _ => {}
        }
    }
    let post_count = post_count.ok_or_else(|| EngineError::NotFound {
        container: posts.id().to_owned(),
        partition_key: post_id.into(),
        id: post_id.to_owned(),
    })?;
    Ok((post_count, comments))
}

#[cfg(test)]
mod tests {
    use partita::Database;

    use super::*;

    #[test]
    fn create_comment_is_atomic() {
        let db = Database::in_memory();
        let posts = db.create_container("posts", "/postId").unwrap();
        posts.create_item("p1", post("p1", "u1", 1), None).unwrap();
        create_comment(&posts, "p1", json!({"id": "c1"})).unwrap();
        let err = create_comment(&posts, "p1", json!({"id": "c1"})).unwrap_err();
        assert_eq!(err.status(), 409);
        assert_eq!(
            comment_counts(&posts, "p1").unwrap(),
            (1, 1),
            "the failed call left no trace"
        );
        assert_eq!(
            create_comment(&posts, "nope", json!({"id": "c2"}))
                .unwrap_err()
                .status(),
            404
        );
    }

    /// `type` and `postId` are set where the comment has them (an existing
    /// member keeps its place) and appended where it does not; a post
    /// without `commentCount` gets one.
    #[test]
    fn create_comment_sets_members_in_place() {
        let db = Database::in_memory();
        let posts = db.create_container("posts", "/postId").unwrap();
        posts
            .create_item("p1", json!({"id": "p1", "postId": "p1"}), None)
            .unwrap();
        let comment = json!({"type": "draft", "id": "c1", "text": "hi"});
        let stored = create_comment(&posts, "p1", comment).unwrap();
        let keys: Vec<&str> = stored
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys[..4], ["type", "id", "text", "postId"]);
        assert_eq!(stored["type"], "comment");
        assert_eq!(stored["postId"], "p1");
        let post = posts.read_item("p1", "p1").unwrap();
        assert_eq!(post["commentCount"], 1);
        create_comment(&posts, "p1", json!({"id": "c2", "postId": "p1"})).unwrap();
        assert_eq!(posts.read_item("p1", "p1").unwrap()["commentCount"], 2);
    }
}
