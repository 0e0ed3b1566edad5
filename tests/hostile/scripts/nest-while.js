// hostile: 300,000 nested `while` statements
// upload: 400
// isolated: -
// in-process: -
function f() { {{REPEAT:300000:while (0) }}; }
