// hostile: Math.max spread over Array(3e8), a native loop of 3e8 steps
// upload: 201
// isolated: 408
// in-process: 408
function f() { getContext().getResponse().setBody(Math.max(...Array(3e8))); }
