// hostile: a loop that never calls the host
// upload: 201
// isolated: 408
// in-process: 408
function f() { while (true) {} }
