// hostile: 100,000 nested `do ... while` statements
// upload: 400
// isolated: -
// in-process: -
function f() { var a; {{REPEAT:100000:do }}a = 1;{{REPEAT:100000: while (0);}} }
