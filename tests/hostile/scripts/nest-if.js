// hostile: 210,000 nested `if` statements without braces
// upload: 400
// isolated: -
// in-process: -
function f() { var a = 1; {{REPEAT:210000:if (a) }}a = 2; }
