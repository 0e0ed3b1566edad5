// hostile: indexOf over a sparse array of length 2^32 - 1
// upload: 201
// isolated: 408
// in-process: 408
function f() { getContext().getResponse().setBody(Array(Math.pow(2, 32) - 1).indexOf(1)); }
