// hostile: 70,000 nested class heritages
// upload: 400
// isolated: -
// in-process: -
function f() { var x = {{REPEAT:70000:class extends (}}Object{{REPEAT:70000:) {} }}; }
