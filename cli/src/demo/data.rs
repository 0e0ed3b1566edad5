//! The blog's data set, generated deterministically from a seed, and the
//! shape of its documents in each model.
//!
//! A [`Plan`] fixes everything the loaders need: how many posts each user
//! wrote (5–50), the order the posts were written in (the posts are numbered
//! in chronological order, each by a random author), and per post how many
//! comments (0–25) and likes (0–100) it has and from whom. The same plan
//! loads V1, V2 and V3, so the three models hold the same blog and must
//! answer every query alike. Only the plan's small per-post records are kept
//! in memory; comments and likes are generated again when needed.

use serde_json::{Value, json};

/// The models of the scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Version {
    /// Users by `id`; posts, comments and likes by `postId`; nothing denormalized.
    V1,
    /// V1 plus usernames and counts copied into posts, comments and likes.
    V2,
    /// V2 plus post copies in the users container (by `userId`) and a feed.
    V3,
}

impl Version {
    /// All models, in the order the demo runs them.
    pub(crate) const ALL: [Version; 3] = [Version::V1, Version::V2, Version::V3];

    /// "V1", "V2" or "V3".
    pub(crate) fn name(self) -> &'static str {
        match self {
            Version::V1 => "V1",
            Version::V2 => "V2",
            Version::V3 => "V3",
        }
    }

    /// Whether documents carry usernames and counts.
    pub(crate) fn denormalized(self) -> bool {
        self != Version::V1
    }
}

/// SplitMix64: a tiny, good-enough generator, so the data set depends on
/// the seed alone (and not on a crate's version).
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        // The modulo bias is below 2^-40 for the sizes used here.
        self.next_u64() % n
    }
}

/// One post of the plan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PostPlan {
    /// The author's number.
    pub(crate) author: u32,
    /// How many comments it gets while loading.
    pub(crate) comments: u32,
    /// How many likes it gets while loading.
    pub(crate) likes: u32,
}

/// A comment or like of the loaded data set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reaction {
    /// Its number within the post.
    pub(crate) index: u32,
    /// Its author's number.
    pub(crate) user: u32,
}

/// The whole data set, deterministic from `(users, seed)`.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// The number of users (`u0` … `u{users-1}`).
    pub(crate) users: u32,
    /// The posts in chronological order (`p0` is the oldest).
    pub(crate) posts: Vec<PostPlan>,
    seed: u64,
}

impl Plan {
    /// The scenario's shape: 5–50 posts per user, up to 25 comments and 100
    /// likes per post.
    pub(crate) fn new(users: u32, seed: u64) -> Plan {
        let mut rng = Rng::new(seed);
        let mut authors: Vec<u32> = (0..users)
            .flat_map(|u| std::iter::repeat_n(u, 5 + rng.below(46) as usize))
            .collect();
        // Fisher–Yates: posts are written by authors in random order.
        for i in (1..authors.len()).rev() {
            authors.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let posts = authors
            .into_iter()
            .map(|author| PostPlan {
                author,
                comments: rng.below(26) as u32,
                likes: rng.below(101) as u32,
            })
            .collect();
        Plan { users, posts, seed }
    }

    /// The number of documents the posts container holds after loading.
    pub(crate) fn post_documents(&self) -> u64 {
        self.posts
            .iter()
            .map(|p| 1 + u64::from(p.comments) + u64::from(p.likes))
            .sum()
    }

    /// The comments and likes of post `i`, with their authors.
    pub(crate) fn reactions(&self, i: usize) -> (Vec<Reaction>, Vec<Reaction>) {
        let post = self.posts[i];
        let mut rng = Rng::new(self.seed ^ (i as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407));
        let mut pick = |n: u32| -> Vec<Reaction> {
            (0..n)
                .map(|index| Reaction {
                    index,
                    user: rng.below(u64::from(self.users)) as u32,
                })
                .collect()
        };
        let comments = pick(post.comments);
        let likes = pick(post.likes);
        (comments, likes)
    }
}

/// User `u`'s id.
pub(crate) fn user_id(u: u32) -> String {
    format!("u{u}")
}

/// User `u`'s username as loaded.
pub(crate) fn username(u: u32) -> String {
    format!("user{u}")
}

/// Post `i`'s id (also its partition key in the posts container).
pub(crate) fn post_id(i: usize) -> String {
    format!("p{i}")
}

/// The creation time of post `i`: one post every 97 seconds from
/// 2025-01-01, so post numbers and dates sort alike. Comments and likes
/// of post `i` get the time of post `i` plus their number in seconds
/// (`offset`).
pub(crate) fn post_date(i: usize, offset: u64) -> String {
    let seconds = i as u64 * 97 + offset;
    iso_date(seconds)
}

/// `2025-01-01T00:00:00Z` plus `seconds`, as ISO 8601 in UTC (the form
/// Cosmos DB documents use, which sorts as text in time order).
fn iso_date(seconds: u64) -> String {
    // Days from 1970-01-01 to 2025-01-01.
    const EPOCH_2025: i64 = 20_089;
    let days = EPOCH_2025 + (seconds / 86_400) as i64;
    let secs = seconds % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

const POST_TEXT: &str = "Partitioning is the art of putting together what is read together, and apart what is written apart. This post is about that.";

/// How long the content of a post's short form is, in characters.
pub(crate) const SHORT_CONTENT: usize = 40;

/// A user document. V1 and V2 partition users by `id`, V3 by `userId`; the
/// document is the same.
pub(crate) fn user(u: u32) -> Value {
    user_named(&user_id(u), &username(u))
}

/// A user document with the given id and username.
pub(crate) fn user_named(id: &str, username: &str) -> Value {
    json!({"id": id, "userId": id, "type": "user", "username": username})
}

/// Post `i` as the model stores it, with the counts it will have once its
/// comments and likes are loaded.
pub(crate) fn post(version: Version, i: usize, author: u32, comments: u32, likes: u32) -> Value {
    let id = post_id(i);
    let mut doc = json!({
        "id": id,
        "postId": id,
        "type": "post",
        "userId": user_id(author),
        "title": format!("Post {i} by {}", username(author)),
        "content": POST_TEXT,
        "creationDate": post_date(i, 0),
    });
    if version.denormalized() {
        doc["userUsername"] = json!(username(author));
        doc["commentCount"] = json!(comments);
        doc["likeCount"] = json!(likes);
    }
    doc
}

/// Comment `index` of post `i` by user `author`, with an id when the
/// client creates it (V1; V2 and V3 let createComment generate one).
pub(crate) fn comment(version: Version, i: usize, index: u32, author: u32, with_id: bool) -> Value {
    reaction(version, "comment", i, index, author, with_id)
}

/// Like `index` of post `i` by user `author`; see [`comment`].
pub(crate) fn like(version: Version, i: usize, index: u32, author: u32, with_id: bool) -> Value {
    reaction(version, "like", i, index, author, with_id)
}

fn reaction(
    version: Version,
    kind: &str,
    i: usize,
    index: u32,
    author: u32,
    with_id: bool,
) -> Value {
    let mut doc = json!({
        "postId": post_id(i),
        "type": kind,
        "userId": user_id(author),
        "creationDate": post_date(i, 1 + u64::from(index)),
    });
    if with_id {
        doc["id"] = json!(format!("{}-{}{index}", post_id(i), &kind[..1]));
    }
    if kind == "comment" {
        doc["content"] = json!("Well put, thank you!");
    }
    if version.denormalized() {
        doc["userUsername"] = json!(username(author));
    }
    doc
}

/// A post's short form, as V3 copies it into the users container and the
/// feed: the author, the title, the start of the content, the counts.
pub(crate) fn short_post(post: &Value) -> Value {
    let content: String = post["content"]
        .as_str()
        .unwrap_or_default()
        .chars()
        .take(SHORT_CONTENT)
        .collect();
    json!({
        "id": post["id"],
        "postId": post["postId"],
        "type": "post",
        "userId": post["userId"],
        "userUsername": post["userUsername"],
        "title": post["title"],
        "content": content,
        "commentCount": post["commentCount"],
        "likeCount": post["likeCount"],
        "creationDate": post["creationDate"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_has_the_scenarios_shape_and_depends_on_the_seed_alone() {
        let plan = Plan::new(200, 7);
        let mut per_user = vec![0; 200];
        for p in &plan.posts {
            per_user[p.author as usize] += 1;
            assert!(p.comments <= 25 && p.likes <= 100);
        }
        assert!(
            per_user.iter().all(|n| (5..=50).contains(n)),
            "{per_user:?}"
        );
        assert!(plan.posts.iter().any(|p| p.likes == 100 || p.likes > 90));
        let again = Plan::new(200, 7);
        assert_eq!(again.posts.len(), plan.posts.len());
        assert_eq!(again.reactions(17), plan.reactions(17));
        assert_ne!(Plan::new(200, 8).posts.len(), 0);
        let (comments, likes) = plan.reactions(17);
        assert_eq!(comments.len() as u32, plan.posts[17].comments);
        assert_eq!(likes.len() as u32, plan.posts[17].likes);
    }

    #[test]
    fn dates_are_iso_and_sort_like_post_numbers() {
        assert_eq!(iso_date(0), "2025-01-01T00:00:00Z");
        assert_eq!(iso_date(59 * 86_400 + 3_661), "2025-03-01T01:01:01Z");
        assert_eq!(iso_date(365 * 86_400), "2026-01-01T00:00:00Z");
        assert_eq!(iso_date((365 + 59) * 86_400), "2026-03-01T00:00:00Z");
        let dates: Vec<String> = (0..3000).map(|i| post_date(i * 37, 0)).collect();
        assert!(dates.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn documents_of_v1_carry_no_copies_and_v2_does() {
        let v1 = post(Version::V1, 3, 9, 2, 4);
        assert!(v1.get("userUsername").is_none() && v1.get("commentCount").is_none());
        let v2 = post(Version::V2, 3, 9, 2, 4);
        assert_eq!(v2["userUsername"], "user9");
        assert_eq!(
            (v2["commentCount"].clone(), v2["likeCount"].clone()),
            (json!(2), json!(4))
        );
        assert!(comment(Version::V2, 3, 0, 9, false).get("id").is_none());
        assert_eq!(like(Version::V1, 3, 1, 9, true)["id"], "p3-l1");
        let short = short_post(&v2);
        assert_eq!(
            short["content"].as_str().unwrap().chars().count(),
            SHORT_CONTENT
        );
        assert_eq!(short["commentCount"], 2);
    }
}
