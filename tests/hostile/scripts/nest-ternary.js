// hostile: 300,000 chained `?:` conditionals
// upload: 400
// isolated: -
// in-process: -
function f() { var a = 1; var x = {{REPEAT:300000:a ? 1 : }}1; }
