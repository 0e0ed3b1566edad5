// hostile: a string doubled with + until memory runs out
// upload: 201
// isolated: 408
// in-process: unguarded
function f() { var s = '0123456789abcdef'; while (true) { s = s + s; } }
