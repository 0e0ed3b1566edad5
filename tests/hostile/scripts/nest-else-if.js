// hostile: a chain of 70,000 `else if`
// upload: 400
// isolated: -
// in-process: -
function f() { var a = 1; if (a) a = 2;{{REPEAT:70000: else if (a) a = 2;}} }
