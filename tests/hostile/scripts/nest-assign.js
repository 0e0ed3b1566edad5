// hostile: 300,000 chained assignments
// upload: 400
// isolated: -
// in-process: -
function f() { var a; a = {{REPEAT:300000:a = }}1; }
