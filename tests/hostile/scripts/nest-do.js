// hostile: 300,000 nested `do ... while` statements
// upload: 400
// isolated: -
// in-process: -
function f() { var a; {{REPEAT:300000:do }}a = 1;{{REPEAT:300000: while (0);}} }
