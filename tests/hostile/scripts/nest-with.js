// hostile: 160,000 nested `with` statements
// upload: 400
// isolated: -
// in-process: -
function f() { var a = {}; {{REPEAT:160000:with (a) }}; }
