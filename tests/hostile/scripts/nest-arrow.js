// hostile: 300,000 nested arrow functions
// upload: 400
// isolated: -
// in-process: -
function f() { var x = {{REPEAT:300000:x => }}1; }
