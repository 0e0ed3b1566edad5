// hostile: 300,000 prefix `!` operators
// upload: 400
// isolated: -
// in-process: -
function f() { var x = {{REPEAT:300000:!}}1; }
