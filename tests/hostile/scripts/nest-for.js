// hostile: 150,000 nested `for` statements
// upload: 400
// isolated: -
// in-process: -
function f() { {{REPEAT:150000:for (;0;) }}; }
