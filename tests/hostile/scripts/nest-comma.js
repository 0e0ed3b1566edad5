// hostile: 300,000 comma operators
// upload: 400
// isolated: -
// in-process: -
function f() { var x = (1{{REPEAT:300000:, 1}}); }
