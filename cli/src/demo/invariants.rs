//! The checks the demo ends with: what denormalization promised is true of
//! every document, not of a sample.
//!
//! - counts: every post's `commentCount` and `likeCount` equal the comments
//!   and likes in its partition (V2, V3);
//! - feed: the feed holds exactly the 100 newest posts, and each copy equals
//!   its post's short form (V3);
//! - usernames: every post, comment and like carries its author's current
//!   username, and so does every copy (V2, V3); checked after a rename has
//!   gone through the change feed and updateUsernames.
//!
//! Each check returns the line the demo prints, or an error naming the first
//! document that breaks it.

use std::collections::{BTreeSet, HashMap};

use anyhow::{Context, bail, ensure};
use partita::{Container, Document};
use serde_json::Value;

use super::data::short_post;
use super::model::{Blog, FEED_SIZE};

/// Calls `f` on every committed document of `container`.
fn for_each_document(
    container: &Container,
    mut f: impl FnMut(&Document) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    for key in container.partition_keys()? {
        for doc in container.raw().snapshot(&key)?.documents() {
            f(doc)?;
        }
    }
    Ok(())
}

/// Every post's counts equal its comments and likes.
///
/// # Errors
/// Names the first post whose counts are wrong.
pub(crate) fn counts(posts: &Container) -> anyhow::Result<String> {
    let mut checked = 0;
    for key in posts.partition_keys()? {
        let snapshot = posts.raw().snapshot(&key)?;
        let (mut post, mut comments, mut likes) = (None, 0, 0);
        for doc in snapshot.documents() {
            match doc["type"].as_str() {
                Some("post") => post = Some(doc.clone()),
                Some("comment") => comments += 1,
                Some("like") => likes += 1,
                _ => {}
            }
        }
        let Some(post) = post else {
            bail!("partition {key} of posts holds comments or likes but no post");
        };
        let stored = (post["commentCount"].as_i64(), post["likeCount"].as_i64());
        ensure!(
            stored == (Some(comments), Some(likes)),
            "post {:?} says {} comments and {} likes, its partition holds {comments} and {likes}",
            post.id(),
            post["commentCount"],
            post["likeCount"]
        );
        checked += 1;
    }
    Ok(format!(
        "commentCount and likeCount equal the comments and likes of all {checked} posts"
    ))
}

/// The feed holds exactly the newest posts, each as its post's short form.
///
/// # Errors
/// Names what the feed misses or holds too many of.
pub(crate) fn feed(posts: &Container, feed: &Container) -> anyhow::Result<String> {
    let mut all: Vec<(String, String)> = Vec::new();
    let mut by_id: HashMap<String, Document> = HashMap::new();
    for_each_document(posts, |doc| {
        if doc["type"] == "post" {
            let date = doc["creationDate"]
                .as_str()
                .context("a post without creationDate")?;
            all.push((date.to_owned(), doc.id().to_owned()));
            by_id.insert(doc.id().to_owned(), doc.clone());
        }
        Ok(())
    })?;
    all.sort_unstable_by(|a, b| b.cmp(a));
    let newest: BTreeSet<&str> = all
        .iter()
        .take(FEED_SIZE)
        .map(|(_, id)| id.as_str())
        .collect();
    let mut held = BTreeSet::new();
    for_each_document(feed, |doc| {
        let post = by_id
            .get(doc.id())
            .with_context(|| format!("the feed holds {:?}, which is not a post", doc.id()))?;
        ensure!(
            strip(doc) == strip(&short_post(post)),
            "the feed's copy of {:?} differs from the post: {}",
            doc.id(),
            &**doc
        );
        held.insert(doc.id().to_owned());
        Ok(())
    })?;
    let held: BTreeSet<&str> = held.iter().map(String::as_str).collect();
    if held != newest {
        let missing: Vec<_> = newest.difference(&held).take(5).collect();
        let extra: Vec<_> = held.difference(&newest).take(5).collect();
        bail!(
            "the feed holds {} posts, not the newest {}: missing {missing:?}, not newest {extra:?}",
            held.len(),
            newest.len()
        );
    }
    Ok(format!(
        "the feed holds exactly the newest {} of {} posts",
        held.len(),
        all.len()
    ))
}

/// `doc`'s properties without the system ones.
fn strip(doc: &Value) -> serde_json::Map<String, Value> {
    doc.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !k.starts_with('_'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Every item and copy carries its author's current username; V3's copies
/// in the users container also equal their posts' short forms.
///
/// # Errors
/// Names the first document with a stale username or copy.
pub(crate) fn usernames(blog: &Blog) -> anyhow::Result<String> {
    let mut names: HashMap<String, String> = HashMap::new();
    for_each_document(&blog.users, |doc| {
        if doc["type"] == "user" {
            let name = doc["username"]
                .as_str()
                .context("a user without a username")?;
            names.insert(doc.id().to_owned(), name.to_owned());
        }
        Ok(())
    })?;
    let mut checked = 0;
    let mut posts: HashMap<String, Document> = HashMap::new();
    let mut check = |container: &Container, doc: &Document| -> anyhow::Result<()> {
        let Some(user) = doc["userId"].as_str() else {
            return Ok(());
        };
        let expected = names.get(user).with_context(|| {
            format!(
                "{:?} in {} names an unknown user {user:?}",
                doc.id(),
                container.id()
            )
        })?;
        ensure!(
            doc["userUsername"].as_str() == Some(expected),
            "{:?} in {} says its author {user} is {}, the user is named {expected:?}",
            doc.id(),
            container.id(),
            doc["userUsername"]
        );
        checked += 1;
        Ok(())
    };
    for_each_document(&blog.posts, |doc| {
        if doc["type"] == "post" {
            posts.insert(doc.id().to_owned(), doc.clone());
        }
        check(&blog.posts, doc)
    })?;
    let mut copies = 0;
    if blog.feed.is_some() {
        for_each_document(&blog.users, |doc| {
            if doc["type"] != "post" {
                return Ok(());
            }
            check(&blog.users, doc)?;
            let post = posts.get(doc.id()).with_context(|| {
                format!("users holds a copy of {:?}, which is not a post", doc.id())
            })?;
            ensure!(
                strip(doc) == strip(&short_post(post)),
                "the copy of {:?} in users differs from the post: {}",
                doc.id(),
                &**doc
            );
            copies += 1;
            Ok(())
        })?;
        ensure!(
            copies == posts.len(),
            "users holds {copies} post copies for {} posts",
            posts.len()
        );
    }
    if let Some(feed) = &blog.feed {
        for_each_document(feed, |doc| check(feed, doc))?;
    }
    Ok(if copies > 0 {
        format!(
            "all {checked} items and copies carry their author's current username; users holds an exact copy of each of the {copies} posts"
        )
    } else {
        format!("all {checked} items carry their author's current username")
    })
}
