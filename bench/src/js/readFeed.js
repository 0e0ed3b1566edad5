function readFeed() {
    var context = getContext();
    var collection = context.getCollection();
    var accepted = collection.queryDocuments(collection.getSelfLink(),
        'SELECT TOP 100 * FROM f ORDER BY f.creationDate DESC',
        function (err, docs) {
            if (err) throw err;
            context.getResponse().setBody(docs);
        });
    if (!accepted) throw new Error('the feed query was not accepted');
}
