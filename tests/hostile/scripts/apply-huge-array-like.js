// hostile: Math.max.apply with an array-like of length 2^32 - 1 (a 32 GB argument list)
// upload: 201
// isolated: 408
// in-process: 408
function f() { getContext().getResponse().setBody(Math.max.apply(null, { length: Math.pow(2, 32) - 1 })); }
