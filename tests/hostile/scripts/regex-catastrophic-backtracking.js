// hostile: catastrophic regex backtracking (2^40 paths, one native call)
// upload: 201
// isolated: 408
// in-process: unguarded
function f() { getContext().getResponse().setBody(/(a+)+$/.test("{{REPEAT:40:a}}!")); }
