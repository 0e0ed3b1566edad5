// The JavaScript half of the Cosmos DB server-side API, evaluated once per
// context before lockdown (see sandbox.rs). It receives `host`, an object of
// native functions, and returns the helpers Rust calls later. Everything it
// defines is frozen by `lockdown` before any user script runs.
(function (host) {
    "use strict";
    var G = globalThis;
    var defineProperty = Object.defineProperty;
    var getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
    var getPrototypeOf = Object.getPrototypeOf;
    var ownKeys = Reflect.ownKeys;
    var construct = Reflect.construct;
    var freeze = Object.freeze;
    var NativeError = G.Error;

    // JScript's Error: `new Error(409, "msg")` sets `number` and `message`
    // (and `description`); `new Error("msg")` is the ES form.
    function Error(a, b) {
        var numbered = arguments.length >= 2 && typeof a === "number";
        var message = numbered ? b : a;
        var err = construct(NativeError, message === undefined ? [] : [message], new.target || Error);
        if (numbered) {
            err.number = a;
            err.description = err.message;
        }
        return err;
    }
    Error.prototype = NativeError.prototype;
    defineProperty(NativeError.prototype, "constructor", {
        value: Error, writable: true, enumerable: false, configurable: true,
    });
    defineProperty(G, "Error", { value: Error, writable: true, enumerable: false, configurable: true });

    // The fluent query API (`__.filter(...)`, `__.chain()...value()`).
    var collection = host.collection;
    var fluentNative = host.fluent;
    function fail(message) {
        throw new Error(400, message);
    }
    function defaultCallback() {
        if (!host.hasResponse()) {
            fail("The callback function must be provided for scenarios, such as pre-trigger, when response object is not available.");
        }
        return function (err, feed) {
            if (err) throw err;
            G.getContext().getResponse().appendBody(JSON.stringify(feed));
        };
    }
    function makeStage(kind, args) {
        var i = typeof args[0] === "string" && kind !== "pluck" ? 1 : 0;
        if (kind === "pluck" && typeof args[0] === "string" && typeof args[1] === "string") i = 1;
        var stage = { kind: kind };
        if (kind === "pluck") {
            if (typeof args[i] !== "string" || args[i] === "") fail("The property name must be a string and cannot be empty.");
            stage.name = args[i];
        } else if (kind === "flatten") {
            if (typeof args[i] === "boolean") {
                stage.shallow = args[i];
                i++;
            } else if (args[i] === undefined && args.length > i) {
                i++;
            }
            return [stage, i];
        } else {
            if (typeof args[i] !== "function") fail("The predicate/transform function must be provided.");
            stage.fn = args[i];
        }
        return [stage, i + 1];
    }
    function tail(args, i) {
        var options = args[i];
        var callback = args[i + 1];
        if (typeof options === "function") {
            callback = options;
            options = undefined;
        }
        return [options, callback];
    }
    function submit(stages, options, callback) {
        if (callback === undefined) callback = defaultCallback();
        var accepted = fluentNative(stages, options, callback);
        var res = Object.create(fluentProto);
        res.isAccepted = accepted;
        return res;
    }
    var fluentProto = {};
    ["filter", "map", "pluck", "flatten", "sortBy", "sortByDescending"].forEach(function (kind) {
        var method = function () {
            var made = makeStage(kind, arguments);
            var rest = tail(arguments, made[1]);
            return submit([made[0]], rest[0], rest[1]);
        };
        defineProperty(collection, kind, { value: method, writable: true, enumerable: false, configurable: true });
        fluentProto[kind] = method;
    });
    function Chain() {
        this.stages = [];
    }
    ["filter", "map", "pluck", "flatten", "sortBy", "sortByDescending"].forEach(function (kind) {
        Chain.prototype[kind] = function () {
            var made = makeStage(kind, arguments);
            if (arguments.length > made[1]) {
                var rest = tail(arguments, made[1]);
                if (rest[1] !== undefined) fail('When using "chain", the callback parameter can only be provided on the "value" function.');
                if (rest[0] !== undefined) fail('When using "chain", the options parameter can only be provided on the "value" function.');
            }
            this.stages.push(made[0]);
            return this;
        };
    });
    Chain.prototype.value = function (options, callback) {
        if (typeof options === "function") {
            callback = options;
            options = undefined;
        }
        return submit(this.stages, options, callback);
    };
    function chain() {
        return new Chain();
    }
    defineProperty(collection, "chain", { value: chain, writable: true, enumerable: false, configurable: true });
    fluentProto.chain = chain;

    function compareKeys(a, b) {
        if (a === b) return 0;
        if (a === undefined) return 1;
        if (b === undefined) return -1;
        return a < b ? -1 : a > b ? 1 : 0;
    }
    function applyStages(items, stages) {
        for (var s = 0; s < stages.length; s++) {
            var stage = stages[s];
            switch (stage.kind) {
                case "filter":
                    items = items.filter(function (d) { return stage.fn(d); });
                    break;
                case "map":
                    items = items.map(function (d) { return stage.fn(d); });
                    break;
                case "pluck":
                    items = items.map(function (d) { return d == null ? undefined : d[stage.name]; });
                    break;
                case "flatten":
                    items = items.flat(stage.shallow ? 1 : 100);
                    break;
                case "sortBy":
                case "sortByDescending":
                    var keyed = items.map(function (d) { return [stage.fn(d), d]; });
                    var sign = stage.kind === "sortBy" ? 1 : -1;
                    keyed.sort(function (x, y) { return sign * compareKeys(x[0], y[0]); });
                    items = keyed.map(function (p) { return p[1]; });
                    break;
            }
        }
        return items;
    }

    // Assigning to a property that a frozen prototype defines as read-only
    // fails (the "override mistake"): `err.name = "X"` or
    // `obj.toString = f` would silently do nothing. As SES does, turn these
    // few properties into accessors whose setter defines an own property on
    // the receiver instead.
    function enableOverride(obj, key) {
        var desc = getOwnPropertyDescriptor(obj, key);
        if (!desc || !("value" in desc)) return;
        var value = desc.value;
        defineProperty(obj, key, {
            get: function () { return value; },
            set: function (v) {
                if (this === obj) throw new TypeError("Cannot assign to read only property '" + String(key) + "' of a frozen built-in");
                defineProperty(this, key, { value: v, writable: true, enumerable: true, configurable: true });
            },
            enumerable: desc.enumerable,
            configurable: false,
        });
    }
    ["constructor", "toString", "valueOf", "toLocaleString"].forEach(function (k) { enableOverride(Object.prototype, k); });
    ["constructor", "toString"].forEach(function (k) { enableOverride(Function.prototype, k); });
    ["constructor", "toString", "message", "name"].forEach(function (k) { enableOverride(NativeError.prototype, k); });
    [TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError].forEach(function (E) {
        ["constructor", "message", "name"].forEach(function (k) { enableOverride(E.prototype, k); });
    });
    ["constructor", "toString"].forEach(function (k) { enableOverride(Array.prototype, k); });

    // Deep-freezes everything reachable from the global object (and the
    // intrinsics only reachable from instances), then makes every existing
    // global binding read-only. The global object itself stays extensible
    // so that sloppy scripts can create implicit globals; Rust deletes them
    // after every call.
    function lockdown(extraRoots) {
        var seen = new Set();
        var stack = [];
        function add(v) {
            if ((typeof v === "object" && v !== null) || typeof v === "function") {
                if (!seen.has(v)) {
                    seen.add(v);
                    stack.push(v);
                }
            }
        }
        function addProperties(o) {
            var keys = ownKeys(o);
            for (var i = 0; i < keys.length; i++) {
                var d = getOwnPropertyDescriptor(o, keys[i]);
                if (d) {
                    add(d.value);
                    add(d.get);
                    add(d.set);
                }
            }
            add(getPrototypeOf(o));
        }
        seen.add(G);
        addProperties(G);
        for (var r = 0; r < extraRoots.length; r++) add(extraRoots[r]);
        while (stack.length > 0) {
            var o = stack.pop();
            addProperties(o);
            freeze(o);
        }
        var keys = ownKeys(G);
        for (var i = 0; i < keys.length; i++) {
            var d = getOwnPropertyDescriptor(G, keys[i]);
            if ("value" in d) d.writable = false;
            d.configurable = false;
            defineProperty(G, keys[i], d);
        }
        return seen.size;
    }
    function* gen() {}
    async function* agen() {}
    var roots = [
        function () {},
        async function () {},
        gen, gen(), agen, agen(),
        [][Symbol.iterator](), new Map().entries(), new Set().values(),
        ""[Symbol.iterator](), "a".matchAll(/a/g),
        Promise.resolve(),
        host, fluentProto, Chain, new Chain(),
    ];
    if (typeof G.Iterator === "function" && typeof G.Iterator.from === "function") {
        roots.push(G.Iterator.from({ next: function () { return { done: true }; } }));
    }

    return {
        applyStages: applyStages,
        lockdown: function () { return lockdown(roots); },
    };
})
