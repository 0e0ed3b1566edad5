function bulkImport(items) {
    var collection = getContext().getCollection();
    var collectionLink = collection.getSelfLink();

    // The number of documents created so far: returned to the client, which
    // calls again with items.slice(count) until everything is imported.
    var count = 0;

    if (!items) throw new Error("The array is undefined or null.");
    if (typeof items === "string") items = JSON.parse(items);

    var itemsLength = items.length;
    if (itemsLength == 0) {
        getContext().getResponse().setBody(0);
        return;
    }

    tryCreate(items[count], callback);

    // Creates one document; when the operation is not accepted (the budget
    // is nearly used up) the script stops and reports how far it got.
    function tryCreate(item, callback) {
        var isAccepted = collection.createDocument(collectionLink, item, callback);
        if (!isAccepted) getContext().getResponse().setBody(count);
    }

    function callback(err, item, options) {
        if (err) throw err;
        count++;
        if (count >= itemsLength) {
            getContext().getResponse().setBody(count);
        } else {
            tryCreate(items[count], callback);
        }
    }
}
