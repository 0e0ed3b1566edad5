// hostile: Array.prototype.includes over an array-like of length 2^53 - 1
// upload: 201
// isolated: 408
// in-process: 408
function f() { getContext().getResponse().setBody(Array.prototype.includes.call({ length: Math.pow(2, 53) - 1 }, 1)); }
