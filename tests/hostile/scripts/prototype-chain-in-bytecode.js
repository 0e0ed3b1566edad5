// hostile: a prototype chain built in bytecode, deeper than the native stack
// upload: 201
// isolated: 408
// in-process: unguarded
function f() {
    var o = {};
    for (var i = 0; i < 100000; i++) { function F() {} F.prototype = o; o = new F(); }
    getContext().getResponse().setBody(o.missing === undefined);
}
