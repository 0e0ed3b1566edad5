//! createLike as a WebAssembly procedure: the Rust port of
//! `sprocs/samples/js/createLike.js`, storing exactly what the script
//! stores.
//!
//! Parameters `[postId, like]`. Reads the post `postId`, increments its
//! `likeCount` (JavaScript's `++`, so a missing count becomes `null`),
//! replaces it, then creates the like with `postId` set and, when it has
//! no `id`, a generated one. All of it in the post's logical partition, in
//! one transaction: any failure (404 for a missing post, 409 for a
//! duplicate like id) fails the call with 400 and that status as
//! substatus, and nothing is written. Sets no response body.
//!
//! The steps are the library `count-and-create`, which `create-comment` calls
//! with its own counter and which holds the tests.

use partita_guest::Error;

fn create_like() -> Result<(), Error> {
    count_and_create::run("likeCount", "like")
}

partita_guest::procedure!(create_like);
