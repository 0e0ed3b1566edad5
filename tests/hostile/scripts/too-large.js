// hostile: a body over the 2 MB script limit that still fits in a request
// upload: 413
// isolated: -
// in-process: -
function f() {{{REPEAT:2120000: }}}
