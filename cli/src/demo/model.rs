//! The three models of the blog as containers, their loading, and the ten
//! access patterns C1–C4 and Q1–Q6 as each model serves them.
//!
//! | | V1 | V2 | V3 |
//! |---|---|---|---|
//! | containers | users (`/id`), posts (`/postId`) | same, with copies | users (`/userId`) with post copies, posts, feed (`/type`) |
//! | C3, C4 | create the comment or like | createComment / createLike procedure | same |
//! | C3b, C4b | same as C3, C4 | one transactional batch: a patch counting it on the post, and its create | same |
//! | Q2, Q4, Q5 | the item(s), then usernames and counts one request each | one request | one request |
//! | Q3 | cross-partition query, then per post two counts | cross-partition query | one partition of users |
//! | Q6 | cross-partition TOP 100, then per post usernames and counts | cross-partition TOP 100 | one partition of feed |
//!
//! C3b and C4b are the script-free way to do what C3 and C4's procedures
//! do; the table compares them with C3 and C4's published figures.
//!
//! Every pattern returns its answer, so tests can check that the three
//! models answer alike, and its summed request charge.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, ensure};
use indicatif::ProgressBar;
use partita::{
    BatchOperation, Container, Database, Patch, QueryOptions, QueryPage, ScriptKind,
    ScriptProperties, TriggerOperation, TriggerType,
};
use serde_json::{Map, Value, json};

use super::charge::Charge;
use super::data::{self, Plan, Rng, Version};
use super::propagate::{self, FeedProcessor, Propagator};

/// The requests of the scenario, in the order of its table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Pattern {
    /// Create a user.
    C1,
    /// Read a user.
    Q1,
    /// Create a post.
    C2,
    /// Read a post with its author's username and its counts.
    Q2,
    /// List a user's posts in short form.
    Q3,
    /// Create a comment.
    C3,
    /// Create a comment with a transactional batch instead of a procedure.
    C3b,
    /// List a post's comments.
    Q4,
    /// Like a post.
    C4,
    /// Like a post with a transactional batch instead of a procedure.
    C4b,
    /// List a post's likes.
    Q5,
    /// List the 100 most recent posts in short form.
    Q6,
}

/// The physical partitions of the posts container, as the published
/// figures imply: a query across partitions pays a page in each
/// (`partita::charge`), and Q3 of V2, which reads a user's 5–50 posts, cost
/// the service 201.54 RU, almost all of it those pages; Q6 of V2, whose
/// partitions each return their newest 100 posts, 532.33. 68 puts the
/// demo's charges for both within 2× of those (docs/charges.md).
pub(crate) const POSTS_PHYSICAL_PARTITIONS: u32 = 68;

/// How many posts Q6 lists, and how many the V3 feed keeps.
pub(crate) const FEED_SIZE: usize = 100;

impl Pattern {
    /// All patterns, in table order.
    pub(crate) const ALL: [Pattern; 12] = [
        Pattern::C1,
        Pattern::Q1,
        Pattern::C2,
        Pattern::Q2,
        Pattern::Q3,
        Pattern::C3,
        Pattern::C3b,
        Pattern::Q4,
        Pattern::C4,
        Pattern::C4b,
        Pattern::Q5,
        Pattern::Q6,
    ];

    /// "C1" … "Q6".
    pub(crate) fn name(self) -> &'static str {
        match self {
            Pattern::C1 => "C1",
            Pattern::Q1 => "Q1",
            Pattern::C2 => "C2",
            Pattern::Q2 => "Q2",
            Pattern::Q3 => "Q3",
            Pattern::C3 => "C3",
            Pattern::C3b => "C3b",
            Pattern::Q4 => "Q4",
            Pattern::C4 => "C4",
            Pattern::C4b => "C4b",
            Pattern::Q5 => "Q5",
            Pattern::Q6 => "Q6",
        }
    }

    /// What the request does.
    pub(crate) fn description(self) -> &'static str {
        match self {
            Pattern::C1 => "create a user",
            Pattern::Q1 => "read a user",
            Pattern::C2 => "create a post",
            Pattern::Q2 => "read a post (author, counts)",
            Pattern::Q3 => "list a user's posts",
            Pattern::C3 => "comment on a post",
            Pattern::C3b => "comment, as a batch",
            Pattern::Q4 => "list a post's comments",
            Pattern::C4 => "like a post",
            Pattern::C4b => "like, as a batch",
            Pattern::Q5 => "list a post's likes",
            Pattern::Q6 => "the 100 newest posts",
        }
    }

    /// Whether the request writes (so the change feed has work after it).
    pub(crate) fn writes(self) -> bool {
        matches!(
            self,
            Pattern::C1 | Pattern::C2 | Pattern::C3 | Pattern::C3b | Pattern::C4 | Pattern::C4b
        )
    }

    /// Whether the model answers it by reading every partition of posts.
    pub(crate) fn fans_out(self, version: Version) -> bool {
        match self {
            Pattern::Q3 | Pattern::Q6 => version != Version::V3,
            _ => false,
        }
    }

    /// The published Cosmos DB figure: (latency in ms, request units).
    pub(crate) fn published(self, version: Version) -> (f64, f64) {
        use Version::*;
        match (self, version) {
            (Pattern::C1, _) => (7.0, 5.71),
            (Pattern::Q1, _) => (2.0, 1.0),
            (Pattern::C2, _) => (9.0, 8.76),
            (Pattern::Q2, V1) => (9.0, 19.54),
            (Pattern::Q2, _) => (2.0, 1.0),
            (Pattern::Q3, V1) => (130.0, 619.41),
            (Pattern::Q3, V2) => (28.0, 201.54),
            (Pattern::Q3, V3) => (4.0, 6.46),
            (Pattern::C3 | Pattern::C3b, V1) => (7.0, 8.57),
            (Pattern::C3 | Pattern::C3b, _) => (7.0, 15.27),
            (Pattern::Q4, V1) => (23.0, 27.72),
            (Pattern::Q4, _) => (4.0, 7.72),
            (Pattern::C4 | Pattern::C4b, V1) => (6.0, 7.05),
            (Pattern::C4 | Pattern::C4b, _) => (7.0, 14.67),
            (Pattern::Q5, V1) => (59.0, 58.92),
            (Pattern::Q5, _) => (4.0, 8.92),
            (Pattern::Q6, V1) => (306.0, 2063.54),
            (Pattern::Q6, V2) => (83.0, 532.33),
            (Pattern::Q6, V3) => (9.0, 16.97),
        }
    }
}

/// The language of the uploaded procedures and triggers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Language {
    /// `sprocs/samples/js/*.js`, shipped inside the binary.
    JavaScript,
    /// The Rust guests of `sprocs/samples/rust`, compiled to WebAssembly.
    Wasm,
}

/// The workload's four scripts, ready to upload.
#[derive(Clone, Debug)]
pub(crate) struct ScriptSet {
    create_comment: ScriptProperties,
    create_like: ScriptProperties,
    update_usernames: ScriptProperties,
    truncate_feed: ScriptProperties,
}

impl ScriptSet {
    /// The scripts in `language`, with the same ids and trigger settings in
    /// both. The WebAssembly ones are the Rust guests of `sprocs/samples/rust`,
    /// read from `wasm_dir` (`--wasm-dir`) or from the guest workspace's
    /// release directory, which is built first when a module is missing
    /// there ([`partita_workload::guest`]).
    ///
    /// # Errors
    /// For [`Language::Wasm`]: the build failed (naming `rustup target add
    /// wasm32-unknown-unknown` when that is why) or a module cannot be
    /// read.
    pub(crate) fn new(language: Language, wasm_dir: Option<&Path>) -> anyhow::Result<ScriptSet> {
        match language {
            Language::JavaScript => Ok(ScriptSet {
                create_comment: ScriptProperties::stored_procedure(
                    "createComment",
                    partita_workload::js::CREATE_COMMENT,
                ),
                create_like: ScriptProperties::stored_procedure(
                    "createLike",
                    partita_workload::js::CREATE_LIKE,
                ),
                update_usernames: ScriptProperties::stored_procedure(
                    "updateUsernames",
                    partita_workload::js::UPDATE_USERNAMES,
                ),
                truncate_feed: ScriptProperties::trigger(
                    "truncateFeed",
                    partita_workload::js::TRUNCATE_FEED,
                    TriggerType::Post,
                    TriggerOperation::All,
                ),
            }),
            Language::Wasm => {
                let dir = match wasm_dir {
                    Some(dir) => dir.to_owned(),
                    None => guest_modules()?,
                };
                let module = |name: &str| -> anyhow::Result<Vec<u8>> {
                    Ok(partita_workload::guest::read(&dir, name)?)
                };
                let procedure = |id: &str, name: &str| -> anyhow::Result<ScriptProperties> {
                    Ok(ScriptProperties::wasm(
                        id,
                        ScriptKind::StoredProcedure,
                        module(name)?,
                    ))
                };
                Ok(ScriptSet {
                    create_comment: procedure("createComment", "create_comment")?,
                    create_like: procedure("createLike", "create_like")?,
                    update_usernames: procedure("updateUsernames", "update_usernames")?,
                    truncate_feed: ScriptProperties {
                        trigger_type: Some(TriggerType::Post),
                        trigger_operation: Some(TriggerOperation::All),
                        trigger_names: None,
                        ..ScriptProperties::wasm(
                            "truncateFeed",
                            ScriptKind::Trigger,
                            module("truncate_feed")?,
                        )
                    },
                })
            }
        }
    }
}

/// The guest modules' release directory, built with cargo first when a
/// module is missing there (saying so on stderr).
fn guest_modules() -> anyhow::Result<PathBuf> {
    let dir = partita_workload::guest::release_dir();
    if partita_workload::guest::all_present(&dir) {
        return Ok(dir);
    }
    eprintln!(
        "building the WebAssembly procedures: cargo build --release --target {} --manifest-path {}",
        partita_workload::guest::TARGET,
        partita_workload::guest::workspace()
            .join("Cargo.toml")
            .display()
    );
    partita_workload::guest::build()
        .context("--wasm needs the WebAssembly procedures of sprocs/samples/rust (or --wasm-dir DIR with prebuilt ones)")
}

/// One model of the blog: its containers and its change-feed wiring.
pub(crate) struct Blog {
    /// Which model.
    pub(crate) version: Version,
    /// Users (and, in V3, the short forms of their posts).
    pub(crate) users: Container,
    /// Posts with their comments and likes, a logical partition per post.
    pub(crate) posts: Container,
    /// The newest posts (V3 only).
    pub(crate) feed: Option<Container>,
    /// V2: users → updateUsernames. V3: that, and posts → users and feed.
    pub(crate) propagators: Vec<Box<dyn Propagator>>,
}

impl Blog {
    /// Creates the model's containers in `db`, uploads its scripts and
    /// wires its propagation.
    ///
    /// # Errors
    /// When a container already holds documents (the demo loads a fresh
    /// data set), or the engine refuses a container or a script.
    pub(crate) fn create(
        db: &Database,
        version: Version,
        scripts: &ScriptSet,
    ) -> anyhow::Result<Blog> {
        let users_key = if version == Version::V3 {
            "/userId"
        } else {
            "/id"
        };
        let users = db.create_container_if_not_exists("users", users_key)?;
        // The composite indexes Cosmos DB's guidance gives the two queries
        // that fan out over posts (Q3 filters on two paths, Q6 filters and
        // orders), so they read the posts' entries alone.
        let policy = partita::IndexingPolicy::from_json(&serde_json::json!({
            "compositeIndexes": [
                [{"path": "/type"}, {"path": "/userId"}],
                [{"path": "/type"}, {"path": "/creationDate", "order": "descending"}]
            ]
        }))?;
        let posts = match db.container("posts") {
            Ok(posts) => posts,
            Err(_) => db.create_container_with(partita::ContainerProperties {
                physical_partitions: POSTS_PHYSICAL_PARTITIONS,
                ..partita::ContainerProperties::new("posts", "/postId").with_indexing_policy(policy)
            })?,
        };
        let feed = if version == Version::V3 {
            Some(db.create_container_if_not_exists("feed", "/type")?)
        } else {
            None
        };
        for container in [Some(&users), Some(&posts), feed.as_ref()]
            .into_iter()
            .flatten()
        {
            ensure!(
                container.partition_keys()?.is_empty(),
                "container {:?} already holds documents: the demo loads a fresh blog; remove the data directory or name another",
                container.id()
            );
        }
        let mut propagators: Vec<Box<dyn Propagator>> = Vec::new();
        let leases = db.create_container_if_not_exists("leases", "/id")?;
        if version.denormalized() {
            for script in [
                &scripts.create_comment,
                &scripts.create_like,
                &scripts.update_usernames,
            ] {
                // Checked: a Wasm module is validated and compiled here.
                posts.create_script(script.clone())?;
            }
            propagators.push(Box::new(FeedProcessor::new(
                &users,
                &leases,
                "usernames",
                propagate::usernames(posts.clone()),
            )?));
        }
        if let Some(feed) = &feed {
            feed.create_script(scripts.truncate_feed.clone())?;
            propagators.push(Box::new(FeedProcessor::new(
                &posts,
                &leases,
                "copies",
                propagate::copies(users.clone(), feed.clone()),
            )?));
        }
        Ok(Blog {
            version,
            users,
            posts,
            feed,
            propagators,
        })
    }

    /// Loads `plan`: users, then each post's comments and likes in one
    /// transaction per post (from `threads` threads), then the posts
    /// themselves in chronological order (V3's feed receives them in the
    /// order they were written, as its trigger assumes), and finally lets
    /// the change feed copy what the model copies. `progress` counts
    /// documents.
    ///
    /// # Errors
    /// Any write's error.
    pub(crate) fn load(
        &mut self,
        plan: &Plan,
        threads: usize,
        progress: &ProgressBar,
    ) -> anyhow::Result<()> {
        let version = self.version;
        for u in 0..plan.users {
            let id = data::user_id(u);
            self.users.create_item(id.as_str(), data::user(u), None)?;
        }
        progress.inc(u64::from(plan.users));
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| -> anyhow::Result<()> {
            let workers: Vec<_> = (0..threads.max(1))
                .map(|_| {
                    s.spawn(|| -> anyhow::Result<()> {
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            if i >= plan.posts.len() {
                                return Ok(());
                            }
                            let (comments, likes) = plan.reactions(i);
                            let post = plan.posts[i];
                            let id = data::post_id(i);
                            // The post with its comments and likes, in one
                            // transaction: its partition is read once (a
                            // second pass would read every evicted one back).
                            self.posts
                                .transaction(id.as_str(), |txn| -> anyhow::Result<()> {
                                    for c in &comments {
                                        txn.create_item(data::comment(
                                            version, i, c.index, c.user, true,
                                        ))?;
                                    }
                                    for l in &likes {
                                        txn.create_item(data::like(
                                            version, i, l.index, l.user, true,
                                        ))?;
                                    }
                                    txn.create_item(data::post(
                                        version,
                                        i,
                                        post.author,
                                        post.comments,
                                        post.likes,
                                    ))?;
                                    Ok(())
                                })?;
                            progress.inc(1 + (comments.len() + likes.len()) as u64);
                        }
                    })
                })
                .collect();
            for worker in workers {
                worker.join().expect("loader thread panicked")?;
            }
            Ok(())
        })?;
        progress.set_message("change feed");
        self.propagate()?;
        Ok(())
    }

    /// Lets every propagator handle what was committed so far.
    ///
    /// # Errors
    /// A propagation's error.
    pub(crate) fn propagate(&mut self) -> anyhow::Result<usize> {
        propagate::drain(&mut self.propagators)
    }

    /// C1: creates user `id` named `username`.
    pub(crate) fn c1(&self, id: &str, username: &str) -> anyhow::Result<(Charge, Value)> {
        let mut charge = Charge::zero();
        let doc = self
            .users
            .create_item(id, data::user_named(id, username), None)?
            .document()
            .clone();
        charge.written(&doc);
        Ok((charge, doc.into_value()))
    }

    /// Q1: reads user `id`.
    pub(crate) fn q1(&self, id: &str) -> anyhow::Result<(Charge, Value)> {
        let mut charge = Charge::zero();
        let doc = self.users.read_item(id, id)?;
        charge.read(&doc);
        Ok((charge, doc.into_value()))
    }

    /// C2: creates post `i` by user `author` (the client knows the
    /// author's username, as in the scenario).
    pub(crate) fn c2(&self, i: usize, author: u32) -> anyhow::Result<(Charge, Value)> {
        let mut charge = Charge::zero();
        let id = data::post_id(i);
        let doc = self
            .posts
            .create_item(id.as_str(), data::post(self.version, i, author, 0, 0), None)?
            .document()
            .clone();
        charge.written(&doc);
        Ok((charge, doc.into_value()))
    }

    /// Q2: post `i` with its author's username and its counts.
    pub(crate) fn q2(&self, i: usize) -> anyhow::Result<(Charge, Value)> {
        let mut charge = Charge::zero();
        let id = data::post_id(i);
        let post = self.posts.read_item(id.as_str(), &id)?;
        charge.read(&post);
        let mut post = post.into_value();
        if self.version == Version::V1 {
            self.complete_post(&mut post, &mut HashMap::new(), &mut charge)?;
        }
        Ok((charge, post))
    }

    /// Q3: the posts of user `u`, in short form.
    pub(crate) fn q3(&self, u: u32) -> anyhow::Result<(Charge, Value)> {
        let mut charge = Charge::zero();
        let user = data::user_id(u);
        let params = params(&[("@u", json!(user))]);
        let page = match self.version {
            Version::V1 | Version::V2 => self.posts.query_items(
                "SELECT * FROM p WHERE p.type = 'post' AND p.userId = @u",
                &params,
                &QueryOptions::default(),
            )?,
            Version::V3 => self.users.query_items(
                "SELECT * FROM u WHERE u.type = 'post' AND u.userId = @u",
                &params,
                &in_partition(&user),
            )?,
        };
        charge.add(&page);
        self.short_forms(page, charge)
    }

    /// C3: a comment by user `author` on post `i`; V1 names its id, the
    /// procedure of V2 and V3 generates one.
    pub(crate) fn c3(&self, i: usize, index: u32, author: u32) -> anyhow::Result<(Charge, Value)> {
        self.react(
            "createComment",
            data::comment(self.version, i, index, author, self.version == Version::V1),
            i,
        )
    }

    /// C3b: C3 as a transactional batch (the client names the comment).
    pub(crate) fn c3_batch(
        &self,
        i: usize,
        index: u32,
        author: u32,
    ) -> anyhow::Result<(Charge, Value)> {
        let comment = data::comment(self.version, i, index, author, true);
        self.react_batch("commentCount", comment, i)
    }

    /// Q4: the comments of post `i`, each with its author's username.
    pub(crate) fn q4(&self, i: usize) -> anyhow::Result<(Charge, Value)> {
        self.reactions("comment", i)
    }

    /// C4: a like by user `author` of post `i`.
    pub(crate) fn c4(&self, i: usize, index: u32, author: u32) -> anyhow::Result<(Charge, Value)> {
        self.react(
            "createLike",
            data::like(self.version, i, index, author, self.version == Version::V1),
            i,
        )
    }

    /// C4b: C4 as a transactional batch.
    pub(crate) fn c4_batch(
        &self,
        i: usize,
        index: u32,
        author: u32,
    ) -> anyhow::Result<(Charge, Value)> {
        let like = data::like(self.version, i, index, author, true);
        self.react_batch("likeCount", like, i)
    }

    /// Q5: the likes of post `i`, each with its author's username.
    pub(crate) fn q5(&self, i: usize) -> anyhow::Result<(Charge, Value)> {
        self.reactions("like", i)
    }

    /// Q6: the 100 newest posts in short form, newest first.
    pub(crate) fn q6(&self) -> anyhow::Result<(Charge, Value)> {
        let mut charge = Charge::zero();
        let page = match &self.feed {
            // The feed's one partition holds only posts, so no filter (the
            // engine's TOP with a filter is slower than without).
            Some(feed) => feed.query_items(
                "SELECT TOP 100 * FROM f ORDER BY f.creationDate DESC",
                &Map::new(),
                &in_partition("post"),
            )?,
            None => self.posts.query_items(
                "SELECT TOP 100 * FROM p WHERE p.type = 'post' ORDER BY p.creationDate DESC",
                &Map::new(),
                &QueryOptions::default(),
            )?,
        };
        charge.add(&page);
        self.short_forms(page, charge)
    }

    /// C3 and C4: V1 writes the item; V2 and V3 call the procedure that
    /// also counts it on the post.
    fn react(&self, procedure: &str, item: Value, i: usize) -> anyhow::Result<(Charge, Value)> {
        let mut charge = Charge::zero();
        let id = data::post_id(i);
        if self.version == Version::V1 {
            let doc = self
                .posts
                .create_item(id.as_str(), item, None)?
                .document()
                .clone();
            charge.written(&doc);
            return Ok((charge, doc.into_value()));
        }
        let response = self.posts.execute_stored_procedure(
            procedure,
            id.as_str(),
            vec![json!(id), item],
            None,
        )?;
        charge.add(&response);
        Ok((charge, response.body))
    }

    /// C3b and C4b: V1 writes the item (it keeps no counts); V2 and V3
    /// count it on the post with a patch and create it, in one batch.
    fn react_batch(&self, counter: &str, item: Value, i: usize) -> anyhow::Result<(Charge, Value)> {
        if self.version == Version::V1 {
            return self.react("", item, i);
        }
        let mut charge = Charge::zero();
        let id = data::post_id(i);
        let count =
            Patch::from_json(&json!([{"op": "incr", "path": format!("/{counter}"), "value": 1}]))?;
        let response = self.posts.execute_batch(
            id.as_str(),
            vec![
                BatchOperation::patch(id.as_str(), count),
                BatchOperation::create(item),
            ],
        )?;
        if let Some(failed) = response.failed {
            let result = &response.results[failed];
            anyhow::bail!(
                "batch operation {failed} on post {id} failed with {}: {}",
                result.status,
                result.message.as_deref().unwrap_or("")
            );
        }
        charge.add(&response);
        let created = response.results[1]
            .resource
            .clone()
            .map(partita::Document::into_value);
        Ok((charge, created.unwrap_or(Value::Null)))
    }

    /// Q4 and Q5: one query; V1 then reads each distinct author.
    fn reactions(&self, kind: &str, i: usize) -> anyhow::Result<(Charge, Value)> {
        let mut charge = Charge::zero();
        let id = data::post_id(i);
        let page = self.posts.query_items(
            "SELECT * FROM p WHERE p.type = @type",
            &params(&[("@type", json!(kind))]),
            &in_partition(&id),
        )?;
        charge.add(&page);
        let mut items = page.items;
        if self.version == Version::V1 {
            let mut names = HashMap::new();
            for item in &mut items {
                let name = self.username(&item["userId"], &mut names, &mut charge)?;
                item["userUsername"] = name;
            }
        }
        Ok((charge, Value::Array(items)))
    }

    /// Posts in short form; V1 first adds each post's username and counts.
    fn short_forms(&self, page: QueryPage, mut charge: Charge) -> anyhow::Result<(Charge, Value)> {
        let mut posts = page.items;
        if self.version == Version::V1 {
            let mut names = HashMap::new();
            for post in &mut posts {
                self.complete_post(post, &mut names, &mut charge)?;
            }
        }
        let short = posts.iter().map(data::short_post).collect();
        Ok((charge, Value::Array(short)))
    }

    /// V1: adds the author's username (one read, cached in `names` for the
    /// request) and the comment and like counts (one query each).
    fn complete_post(
        &self,
        post: &mut Value,
        names: &mut HashMap<String, Value>,
        charge: &mut Charge,
    ) -> anyhow::Result<()> {
        post["userUsername"] = self.username(&post["userId"], names, charge)?;
        let id = post["postId"]
            .as_str()
            .context("a post without postId")?
            .to_owned();
        for (kind, field) in [("comment", "commentCount"), ("like", "likeCount")] {
            let page = self.posts.query_items(
                "SELECT VALUE COUNT(1) FROM p WHERE p.type = @type",
                &params(&[("@type", json!(kind))]),
                &in_partition(&id),
            )?;
            charge.add(&page);
            post[field] = page.items.first().cloned().unwrap_or(json!(0));
        }
        Ok(())
    }

    /// V1: the username of user `id`, read once per request.
    fn username(
        &self,
        id: &Value,
        names: &mut HashMap<String, Value>,
        charge: &mut Charge,
    ) -> anyhow::Result<Value> {
        let id = id.as_str().context("an item without a string userId")?;
        if let Some(name) = names.get(id) {
            return Ok(name.clone());
        }
        let user = self.users.read_item(id, id)?;
        charge.read(&user);
        let name = user["username"].clone();
        names.insert(id.to_owned(), name.clone());
        Ok(name)
    }
}

/// Query parameters from `(name, value)` pairs.
fn params(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), value.clone()))
        .collect()
}

/// Options that keep a query in one logical partition.
fn in_partition(key: &str) -> QueryOptions {
    QueryOptions {
        partition_key: Some(key.into()),
        ..QueryOptions::default()
    }
}

/// Chooses the arguments of each request: random existing users and posts,
/// fresh ids for what is created.
pub(crate) struct Driver {
    rng: Rng,
    users: u32,
    loaded_posts: usize,
    next_post: usize,
    created: u64,
}

impl Driver {
    /// A driver over `plan`'s data, seeded so every model gets the same
    /// sequence of requests.
    pub(crate) fn new(plan: &Plan, seed: u64) -> Driver {
        Driver {
            rng: Rng::new(seed ^ 0x5EED),
            users: plan.users,
            loaded_posts: plan.posts.len(),
            next_post: plan.posts.len(),
            created: 0,
        }
    }

    fn user(&mut self) -> u32 {
        self.rng.below(u64::from(self.users)) as u32
    }

    /// A random loaded user, to be renamed by the invariant check.
    pub(crate) fn rename_target(&mut self) -> u32 {
        self.user()
    }

    fn post(&mut self) -> usize {
        self.rng.below(self.loaded_posts as u64) as usize
    }

    /// Runs one request of `pattern` on `blog` with fresh arguments.
    ///
    /// # Errors
    /// The request's error.
    pub(crate) fn run(&mut self, blog: &Blog, pattern: Pattern) -> anyhow::Result<(Charge, Value)> {
        self.created += 1;
        let n = self.created;
        match pattern {
            Pattern::C1 => blog.c1(&format!("n{n}"), &format!("newcomer{n}")),
            Pattern::Q1 => blog.q1(&data::user_id(self.user())),
            Pattern::C2 => {
                let i = self.next_post;
                self.next_post += 1;
                let author = self.user();
                blog.c2(i, author)
            }
            Pattern::Q2 => blog.q2(self.post()),
            Pattern::Q3 => blog.q3(self.user()),
            // Loaded reactions have indexes below 100; new ones count on.
            Pattern::C3 => {
                let (i, u) = (self.post(), self.user());
                blog.c3(i, 1000 + n as u32, u)
            }
            Pattern::C3b => {
                let (i, u) = (self.post(), self.user());
                blog.c3_batch(i, 1000 + n as u32, u)
            }
            Pattern::Q4 => blog.q4(self.post()),
            Pattern::C4 => {
                let (i, u) = (self.post(), self.user());
                blog.c4(i, 1000 + n as u32, u)
            }
            Pattern::C4b => {
                let (i, u) = (self.post(), self.user());
                blog.c4_batch(i, 1000 + n as u32, u)
            }
            Pattern::Q5 => blog.q5(self.post()),
            Pattern::Q6 => blog.q6(),
        }
    }
}
