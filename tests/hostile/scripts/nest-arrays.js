// hostile: 300,000 nested array literals
// upload: 400
// isolated: -
// in-process: -
function f() { var x = {{REPEAT:300000:[}}{{REPEAT:300000:]}}; }
