//! The blog workload of `shared/reference/blog-scenario.md`, written natively
//! against the transaction API.
//!
//! These are the Rust equivalents of the scripts the workload runs as stored
//! procedures: [`create_comment`] is `createComment` (read the post,
//! increment `commentCount`, replace it, create the comment, atomically in
//! the post's logical partition). They serve as the baseline the script
//! runtimes are measured against, and as the demo's workload.

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
        if let Some(count) = post.get_mut("commentCount") {
            *count = json!(count.as_i64().unwrap_or(0) + 1);
        } else {
            post["commentCount"] = json!(1);
        }
        txn.replace_item(post_id, post, None)?;
        if let Value::Object(map) = &mut comment {
            map.insert("postId".to_owned(), json!(post_id));
            map.insert("type".to_owned(), json!("comment"));
        }
        Ok::<_, Error>(txn.create_item(comment)?)
    })
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
}
