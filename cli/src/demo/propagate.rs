//! Change-feed propagation of V2 and V3: copies across containers and
//! partitions, kept in step from the change log.
//!
//! ```text
//!   users  ──changes──► usernames: a user renamed ──► updateUsernames on each posts partition holding their items
//!   posts  ──changes──► copies:    a post written ──► its short form upserted in users (V3, by userId)
//!                                                 └─► created in feed with the truncateFeed post-trigger (V3)
//! ```
//!
//! Each wiring is a [`Propagator`]: a [`FeedProcessor`], which is
//! `partita::change_feed`'s processor (leases in the model's `leases`
//! container, checkpoint after each handled batch, at-least-once delivery)
//! handing each change to a handler closure. A failed handler sees the same
//! changes again, so handlers are idempotent. `LogFollower`, which follows
//! the log from an LSN it keeps in memory, stays for the unit tests of the
//! handlers.

use std::collections::{BTreeSet, HashMap};

use anyhow::Context;
#[cfg(test)]
use partita::Lsn;
use partita::change_feed::{
    ChangeBatch, ChangeFeedProcessor, HandlerError, HandlerResult, ProcessorOptions,
};
use partita::{Change, ChangeKind, Container, QueryOptions, WriteOptions};
use serde_json::{Map, Value, json};

use super::data::short_post;

/// Something that carries a container's changes elsewhere.
pub(crate) trait Propagator {
    /// Handles every change committed to the watched container before the
    /// call; returns how many it handled.
    fn poll(&mut self) -> anyhow::Result<usize>;
}

/// Handles one change.
pub(crate) type Handler = Box<dyn FnMut(&Change) -> anyhow::Result<()> + Send>;

/// A propagator over the change-feed processor: one instance, named after
/// the wiring, that holds every lease of the watched container and drains it
/// on each poll.
pub(crate) struct FeedProcessor(ChangeFeedProcessor);

impl FeedProcessor {
    /// Delivers `watched`'s changes, from the beginning of its log, to
    /// `handler`, keeping the position in `leases` under `name`.
    ///
    /// # Errors
    /// When `leases` is not partitioned by `/id`.
    pub(crate) fn new(
        watched: &Container,
        leases: &Container,
        name: &str,
        mut handler: Handler,
    ) -> anyhow::Result<FeedProcessor> {
        let options = ProcessorOptions {
            // Loading commits hundreds of thousands of transactions: large
            // batches keep lease checkpoints few.
            max_items: 4096,
            ..ProcessorOptions::default()
        };
        let processor = ChangeFeedProcessor::new(
            watched,
            leases,
            name,
            "demo",
            options,
            move |batch: &ChangeBatch<'_>| -> HandlerResult {
                for change in batch.changes {
                    handler(change).map_err(|e| -> HandlerError { e.into() })?;
                }
                Ok(())
            },
        )?;
        Ok(FeedProcessor(processor))
    }
}

impl Propagator for FeedProcessor {
    fn poll(&mut self) -> anyhow::Result<usize> {
        Ok(self.0.drain()?)
    }
}

/// A minimal follower of one container's change log from an LSN kept in
/// memory (no leases, no checkpoint): the handlers' unit tests use it.
#[cfg(test)]
pub(crate) struct LogFollower {
    container: Container,
    after: Lsn,
    handler: Handler,
}

#[cfg(test)]
impl LogFollower {
    /// Follows `container` from the beginning of its log.
    pub(crate) fn new(container: Container, handler: Handler) -> LogFollower {
        LogFollower {
            container,
            after: Lsn::ZERO,
            handler,
        }
    }
}

#[cfg(test)]
impl Propagator for LogFollower {
    fn poll(&mut self) -> anyhow::Result<usize> {
        let mut handled = 0;
        loop {
            let changes = self.container.read_changes(self.after, 4096)?;
            if changes.is_empty() {
                return Ok(handled);
            }
            for (i, change) in changes.iter().enumerate() {
                (self.handler)(change).with_context(|| {
                    format!(
                        "propagating change {} of {:?} (document {:?})",
                        change.lsn.0,
                        self.container.id(),
                        change.id
                    )
                })?;
                handled += 1;
                if changes.get(i + 1).is_none_or(|next| next.lsn != change.lsn) {
                    self.after = change.lsn;
                }
            }
        }
    }
}

/// Polls every propagator until a whole round finds nothing new (a
/// propagator's writes can be another's input).
pub(crate) fn drain(propagators: &mut [Box<dyn Propagator>]) -> anyhow::Result<usize> {
    let mut total = 0;
    loop {
        let mut round = 0;
        for propagator in propagators.iter_mut() {
            round += propagator.poll()?;
        }
        if round == 0 {
            return Ok(total);
        }
        total += round;
    }
}

/// The users container's handler (V2, V3): when a user's `username`
/// changes, runs the updateUsernames procedure on every partition of
/// `posts` that holds an item of theirs. It remembers the usernames it has
/// seen, so a new user or an edit that keeps the name costs nothing; it
/// ignores documents other than users (V3's post copies).
pub(crate) fn usernames(posts: Container) -> Handler {
    let mut known: HashMap<String, String> = HashMap::new();
    Box::new(move |change: &Change| {
        let Some(doc) = &change.document else {
            return Ok(());
        };
        if doc["type"] != "user" {
            return Ok(());
        }
        let (Some(id), Some(name)) = (doc["id"].as_str(), doc["username"].as_str()) else {
            return Ok(());
        };
        match known.insert(id.to_owned(), name.to_owned()) {
            Some(old) if old != name => {
                update_usernames(&posts, id, name)?;
            }
            _ => {}
        }
        Ok(())
    })
}

/// Runs updateUsernames on each partition of `posts` holding an item with
/// `userId == user_id`; returns how many partitions that was. The
/// partitions are found with one cross-partition query: a procedure runs
/// in one partition, so the caller must name them.
pub(crate) fn update_usernames(
    posts: &Container,
    user_id: &str,
    username: &str,
) -> anyhow::Result<usize> {
    let mut params = Map::new();
    params.insert("@u".to_owned(), json!(user_id));
    let page = posts.query_items(
        "SELECT VALUE p.postId FROM p WHERE p.userId = @u",
        &params,
        &QueryOptions::default(),
    )?;
    let partitions: BTreeSet<&str> = page.items.iter().filter_map(Value::as_str).collect();
    for pk in &partitions {
        let mut params = vec![json!(user_id), json!(username)];
        // The Wasm procedure commits what it did and answers
        // `{"continuation": token}` when an operation was not accepted
        // (sprocs/README.md): call again from there. JavaScript's never does.
        loop {
            let response = posts.execute_stored_procedure("updateUsernames", *pk, params, None)?;
            match response.body.get("continuation") {
                Some(Value::String(token)) => {
                    params = vec![json!(user_id), json!(username), json!(token)];
                }
                _ => break,
            }
        }
    }
    Ok(partitions.len())
}

/// The posts container's handler (V3): copies each written post's short
/// form into `users` (partition `userId`, upserted) and into `feed`: a new
/// post is created there with the truncateFeed post-trigger, which keeps
/// the newest 100; a changed post replaces its copy if the feed still holds
/// it. A deleted post's copies are deleted. Comments and likes are ignored.
pub(crate) fn copies(users: Container, feed: Container) -> Handler {
    let truncate = WriteOptions {
        post_triggers: vec!["truncateFeed".into()],
        ..WriteOptions::default()
    };
    Box::new(move |change: &Change| {
        let Some(doc) = &change.document else {
            // Only a post has copies: the feed tells by id, the users
            // container by the copy found there.
            if feed.read_item("post", &change.id).is_ok() {
                feed.delete_item("post", &change.id, None)?;
            }
            let mut params = Map::new();
            params.insert("@id".to_owned(), json!(change.id));
            let owners = users.query_items(
                "SELECT VALUE u.userId FROM u WHERE u.type = 'post' AND u.id = @id",
                &params,
                &QueryOptions::default(),
            )?;
            for owner in owners.items.iter().filter_map(Value::as_str) {
                users.delete_item(owner, &change.id, None)?;
            }
            return Ok(());
        };
        if doc["type"] != "post" {
            return Ok(());
        }
        let short = short_post(doc);
        let owner = doc["userId"]
            .as_str()
            .context("a post without a string userId")?;
        users.upsert_item(owner, short.clone(), None)?;
        if feed.read_item("post", &change.id).is_ok() {
            feed.replace_item("post", &change.id, short, None)?;
        } else if change.kind == ChangeKind::Create {
            feed.create_item("post", short, Some(&truncate))?;
        }
        Ok(())
    })
}
