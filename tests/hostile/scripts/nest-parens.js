// hostile: 300,000 nested parentheses
// upload: 400
// isolated: -
// in-process: -
function f() { var x = {{REPEAT:300000:(}}1{{REPEAT:300000:)}}; }
