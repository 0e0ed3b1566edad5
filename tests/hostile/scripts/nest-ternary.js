// hostile: 180,000 chained `?:` conditionals
// upload: 400
// isolated: -
// in-process: -
function f() { var a = 1; var x = {{REPEAT:180000:a ? 1 : }}1; }
