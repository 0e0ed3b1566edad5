// hostile: 210,000 prefix `typeof` keywords
// upload: 400
// isolated: -
// in-process: -
function f() { var x = {{REPEAT:210000:typeof }}1; }
