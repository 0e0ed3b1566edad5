// hostile: a BigInt power with a 100,000,000-bit exponent's worth of digits
// upload: 201
// isolated: 408
// in-process: unguarded
function f() { getContext().getResponse().setBody(String(7n ** 100000000n).length); }
