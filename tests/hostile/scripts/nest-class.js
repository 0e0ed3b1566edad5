// hostile: 300,000 nested class heritages
// upload: 400
// isolated: -
// in-process: -
function f() { var x = {{REPEAT:300000:class extends (}}Object{{REPEAT:300000:) {} }}; }
