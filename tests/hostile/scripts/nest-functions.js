// hostile: 300,000 nested function declarations
// upload: 400
// isolated: -
// in-process: -
function f() { {{REPEAT:300000:function g() { }}{{REPEAT:300000:} }} }
