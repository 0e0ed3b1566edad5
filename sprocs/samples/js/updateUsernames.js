function updateUsernames(userId, username) {
    var collection = getContext().getCollection();
    collection.queryDocuments(
        collection.getSelfLink(),
        'SELECT * FROM p WHERE p.userId = \'' + userId + '\'',
        function (err, results) {
            if (err) throw err;
            for (var i in results) {
                results[i].userUsername = username;
                collection.upsertDocument(collection.getSelfLink(), results[i]);
            }
        });
}
