// hostile: 300,000 nested blocks
// upload: 400
// isolated: -
// in-process: -
function f() { {{REPEAT:300000:{ }}{{REPEAT:300000:} }} }
