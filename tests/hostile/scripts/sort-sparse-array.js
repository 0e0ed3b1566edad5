// hostile: sorts a sparse array of length 2^32 - 1 (a 32 GB sort buffer)
// upload: 201
// isolated: 408
// in-process: 408
function f() { Array(Math.pow(2, 32) - 1).sort(); }
