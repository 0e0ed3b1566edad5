// hostile: 300,000 chained member accesses
// upload: 400
// isolated: -
// in-process: -
function f() { var a = {}; var x = a{{REPEAT:300000:.b}}; }
