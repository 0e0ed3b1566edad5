// hostile: writes a document holding a lone UTF-16 surrogate, which JSON text cannot carry
// upload: 201
// isolated: 400
// in-process: 400
function f() {
    var c = getContext().getCollection();
    c.createDocument(c.getSelfLink(), { id: 'lone', pk: 'p1', a: { b: '\udc00' } });
}
