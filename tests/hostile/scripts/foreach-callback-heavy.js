// hostile: forEach over a large array again and again (no host calls)
// upload: 201
// isolated: 408
// in-process: 408
function f() {
    var a = new Array(1000000).fill(0);
    while (true) a.forEach(function (x) { return x + 1; });
}
