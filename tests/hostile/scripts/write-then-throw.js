// hostile: writes to its partition, then throws: nothing may stay
// upload: 201
// isolated: 400
// in-process: 400
function f() {
    var c = getContext().getCollection();
    c.createDocument(c.getSelfLink(), { id: 'stray', pk: 'p1' }, function (err) {
        if (err) throw err;
        throw new Error('after the write');
    });
}
