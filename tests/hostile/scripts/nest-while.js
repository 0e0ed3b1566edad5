// hostile: 150,000 nested `while` statements
// upload: 400
// isolated: -
// in-process: -
function f() { {{REPEAT:150000:while (0) }}; }
