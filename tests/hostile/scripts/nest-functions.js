// hostile: 80,000 nested function declarations
// upload: 400
// isolated: -
// in-process: -
function f() { {{REPEAT:80000:function g() { }}{{REPEAT:80000:} }} }
