// hostile: 300,000 nested `for` statements
// upload: 400
// isolated: -
// in-process: -
function f() { {{REPEAT:300000:for (;0;) }}; }
