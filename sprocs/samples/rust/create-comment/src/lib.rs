//! createComment as a WebAssembly procedure: the Rust port of
//! `sprocs/samples/js/createComment.js`, storing exactly what the script
//! stores.
//!
//! Parameters `[postId, comment]`. Reads the post `postId`, increments its
//! `commentCount` (JavaScript's `++`, so a missing count becomes `null`),
//! replaces it, then creates the comment with `postId` set and, when it has
//! no `id`, a generated one. All of it in the post's logical partition, in
//! one transaction: any failure (404 for a missing post, 409 for a
//! duplicate comment id) fails the call with 400 and that status as
//! substatus, and nothing is written. Sets no response body.
//!
//! The steps are the library `count-and-create`, which `create-like` calls
//! with its own counter and which holds the tests.

use partita_guest::Error;

fn create_comment() -> Result<(), Error> {
    count_and_create::run("commentCount", "comment")
}

partita_guest::procedure!(create_comment);
