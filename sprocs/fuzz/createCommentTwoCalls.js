// createComment split into two calls, the way a client without a stored
// procedure would write it, for docs/fuzzing.md: call it with step "count"
// to increment the post's commentCount, then with step "comment" to write the
// comment. Each call is atomic on its own, but the pair is not: between the
// two calls, or when the second never comes (a crash, a timeout, a 429), the
// count and the comments disagree. `partita fuzz` checks the invariant after
// every call and must catch it.
function createCommentTwoCalls(postId, comment, step) {
    var collection = getContext().getCollection();
    if (step === 'count') {
        collection.readDocument(
            collection.getAltLink() + '/docs/' + postId,
            function (err, post) {
                if (err) throw err;
                post.commentCount++;
                collection.replaceDocument(post._self, post, function (err) {
                    if (err) throw err;
                });
            });
    } else {
        comment.postId = postId;
        collection.createDocument(collection.getSelfLink(), comment, function (err) {
            if (err) throw err;
        });
    }
}
