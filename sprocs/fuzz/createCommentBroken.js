// A deliberately broken createComment, for docs/fuzzing.md: it increments
// the post's commentCount, then creates the comment but swallows a failure
// of that write (it only logs it), so the call commits the increment without
// the comment. `partita fuzz` must catch it.
function createCommentBroken(postId, comment) {
    var collection = getContext().getCollection();
    collection.readDocument(
        collection.getAltLink() + '/docs/' + postId,
        function (err, post) {
            if (err) throw err;
            post.commentCount++;
            collection.replaceDocument(post._self, post, function (err) {
                if (err) throw err;
                comment.postId = postId;
                collection.createDocument(collection.getSelfLink(), comment, function (err) {
                    if (err) console.log('could not save the comment: ' + err.message);
                });
            });
        });
}
