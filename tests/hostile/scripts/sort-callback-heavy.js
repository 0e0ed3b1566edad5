// hostile: sorts a large array again and again with a comparator (no host calls)
// upload: 201
// isolated: 408
// in-process: 408
function f() {
    var a = [];
    for (var i = 0; i < 200000; i++) a.push((i * 7919) % 200003);
    while (true) a.sort(function (x, y) { return x - y; });
}
