// hostile: 300,000 chained tagged templates
// upload: 400
// isolated: -
// in-process: -
function f() { var x = String.raw{{REPEAT:300000:``}}; }
