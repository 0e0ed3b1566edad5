// hostile: 300,000 nested object literals
// upload: 400
// isolated: -
// in-process: -
function f() { var x = {{REPEAT:300000:{a:}}1{{REPEAT:300000:} }}; }
