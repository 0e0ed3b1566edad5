// hostile: 300,000 prefix `typeof` keywords
// upload: 400
// isolated: -
// in-process: -
function f() { var x = {{REPEAT:300000:typeof }}1; }
