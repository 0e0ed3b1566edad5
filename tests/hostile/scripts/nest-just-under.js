// hostile: deep but within the nesting bound: 900 prefix `!` and a 20-level nest of brackets
// upload: 201
// isolated: 200
// in-process: 200
function f() {
    var x = {{REPEAT:900:!}}1;
    var y = {{REPEAT:20:[(}}1{{REPEAT:20:)]}};
    getContext().getResponse().setBody([x, JSON.stringify(y).length]);
}
