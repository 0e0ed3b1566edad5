// hostile: 300,000 nested `with` statements
// upload: 400
// isolated: -
// in-process: -
function f() { var a = {}; {{REPEAT:300000:with (a) }}; }
