// hostile: 300,000 chained calls
// upload: 400
// isolated: -
// in-process: -
function f() { var x = Object{{REPEAT:300000:()}}; }
