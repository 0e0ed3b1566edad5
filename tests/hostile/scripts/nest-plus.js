// hostile: 300,000 terms of a left-associative `+`
// upload: 400
// isolated: -
// in-process: -
function f() { var x = 1{{REPEAT:300000: + 1}}; }
