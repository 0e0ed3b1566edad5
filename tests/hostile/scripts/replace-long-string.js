// hostile: a global replace with a callback over a 16M-character string
// upload: 201
// isolated: 408
// in-process: 408
function f() {
    var s = 'a'.repeat(1 << 24);
    getContext().getResponse().setBody(s.replace(/a/g, function () { return 'b'; }).length);
}
