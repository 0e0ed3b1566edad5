// hostile: 300,000 `new` prefixes
// upload: 400
// isolated: -
// in-process: -
function f() { var x = {{REPEAT:300000:new }}Object; }
