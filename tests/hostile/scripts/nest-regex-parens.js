// hostile: 300,000 parentheses between regular expressions that hold quotes
// upload: 400
// isolated: -
// in-process: -
function f() { var r = /'/; var x = {{REPEAT:300000:(}}1{{REPEAT:300000:)}}; r = /'/; }
