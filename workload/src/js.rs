//! The workload's JavaScript procedures and triggers (`sprocs/samples/js`), as
//! compiled-in text, so that the demo, the load generator and the
//! benchmarks read each script from one place (the runtime's own benches,
//! beneath the facade, include the files themselves).

/// createComment: reads the post, increments `commentCount`, creates the
/// comment.
pub const CREATE_COMMENT: &str = include_str!("../../sprocs/samples/js/createComment.js");
/// createLike: the same for likes and `likeCount`.
pub const CREATE_LIKE: &str = include_str!("../../sprocs/samples/js/createLike.js");
/// updateUsernames: sets `userUsername` on every item of one user in the
/// partition it runs on.
pub const UPDATE_USERNAMES: &str = include_str!("../../sprocs/samples/js/updateUsernames.js");
/// truncateFeed: the feed container's post-trigger, keeping the 100 newest
/// posts.
pub const TRUNCATE_FEED: &str = include_str!("../../sprocs/samples/js/truncateFeed.js");
