//! User-defined functions (`run_udf`): results, errors, bounds, and
//! isolation between calls.

#![allow(clippy::result_large_err)]

use std::time::Instant;

use crate::support::version_of;
use runtime::{Budget, Error, Failure, Limits, Script, run_udf};
use serde_json::{Value, json};

fn udf_with(body: &str, args: &[Option<Value>], limits: &Limits) -> Result<Option<Value>, Failure> {
    let script = Script {
        id: "f",
        version: version_of(body),
        body,
    };
    run_udf(&script, args, limits)
}

fn udf(body: &str, args: &[Value]) -> Result<Option<Value>, Failure> {
    let args: Vec<Option<Value>> = args.iter().cloned().map(Some).collect();
    udf_with(body, &args, &Limits::default())
}

fn ok(res: Result<Option<Value>, Failure>) -> Option<Value> {
    match res {
        Ok(v) => v,
        Err(f) => panic!("udf failed: {} (status {})", f.error, f.error.status()),
    }
}

fn fails(res: Result<Option<Value>, Failure>) -> Failure {
    match res {
        Ok(v) => panic!("udf succeeded with {v:?}"),
        Err(f) => f,
    }
}

#[test]
fn results() {
    assert_eq!(
        ok(udf("function tax(x) { return x * 0.08; }", &[json!(1000)])),
        Some(json!(80))
    );
    assert_eq!(
        ok(udf(
            "function (a, b) { return a + b; };",
            &[json!("a"), json!("b")]
        )),
        Some(json!("ab"))
    );
    assert_eq!(
        ok(udf(
            "(a, b) => ({ sum: a + b, list: [a, b], nested: { ok: true } })",
            &[json!(1), json!(2)]
        )),
        Some(json!({"sum": 3, "list": [1, 2], "nested": {"ok": true}}))
    );
    assert_eq!(
        ok(udf(
            "function (doc) { return doc.tags.map(function (t) { return t.toUpperCase(); }); }",
            &[json!({"tags": ["a", "b"]})]
        )),
        Some(json!(["A", "B"]))
    );
    // undefined out: None; undefined members are dropped as JSON.stringify does.
    assert_eq!(ok(udf("function () {}", &[])), None);
    assert_eq!(ok(udf("function () { return function () {}; }", &[])), None);
    assert_eq!(
        ok(udf(
            "function () { return { a: undefined, b: [undefined], d: new Date(0) }; }",
            &[]
        )),
        Some(json!({"b": [null], "d": "1970-01-01T00:00:00.000Z"}))
    );
    assert_eq!(
        ok(udf("function () { return null; }", &[])),
        Some(Value::Null)
    );
    // undefined in: None, and missing arguments are undefined too.
    assert_eq!(
        ok(udf_with(
            "function (a, b, c) { return [typeof a, typeof b, typeof c]; }",
            &[None, Some(json!(1))],
            &Limits::default()
        )),
        Some(json!(["undefined", "number", "undefined"]))
    );
    // Ordinary built-ins work.
    assert_eq!(
        ok(udf(
            "function (s) { return JSON.stringify({ n: Math.max(1, 2), s: s.split(',').sort() }); }",
            &[json!("b,a")]
        )),
        Some(json!(r#"{"n":2,"s":["a","b"]}"#))
    );
}

#[test]
fn errors() {
    // A throw: 400 with the thrown number.
    let f = fails(udf("function () { throw new Error(409, 'nope'); }", &[]));
    assert_eq!((f.error.status(), f.error.substatus()), (400, Some(409)));
    assert!(f.error.to_string().contains("nope"), "{}", f.error);
    let f = fails(udf(
        "function (x) { return x.missing.deeper; }",
        &[json!({})],
    ));
    assert_eq!((f.error.status(), f.error.substatus()), (400, Some(0)));
    assert!(matches!(f.error, Error::Script { .. }), "{}", f.error);
    // Compile errors: 400/65535.
    for body in ["function (", "42", "var x = 1"] {
        let f = fails(udf(body, &[]));
        assert_eq!(
            (f.error.status(), f.error.substatus()),
            (400, Some(65535)),
            "{body}: {}",
            f.error
        );
    }
    // No getContext(), no __, no collection.
    let f = fails(udf(
        "function () { return getContext().getCollection(); }",
        &[],
    ));
    assert_eq!(f.error.status(), 400);
    assert!(
        f.error
            .to_string()
            .contains("not available in user-defined functions"),
        "{}",
        f.error
    );
    assert_eq!(
        ok(udf(
            "function () { try { getContext(); return 'reached'; } catch (e) { return [typeof __, e.number]; } }",
            &[]
        )),
        Some(json!(["undefined", 400]))
    );
}

#[test]
fn cache_keys() {
    // Two databases may hold scripts with the same id and version: the
    // cache compares the text too.
    let limits = Limits::default();
    let a = Script {
        id: "same",
        version: 7,
        body: "function () { return 'a'; }",
    };
    let b = Script {
        id: "same",
        version: 7,
        body: "function () { return 'b'; }",
    };
    assert_eq!(run_udf(&a, &[], &limits).unwrap(), Some(json!("a")));
    assert_eq!(run_udf(&b, &[], &limits).unwrap(), Some(json!("b")));
}

#[test]
fn bounds() {
    let limits = Limits {
        instructions: 1_000_000,
        ..Limits::default()
    };
    let f = fails(udf_with("function () { while (true) {} }", &[], &limits));
    assert_eq!(f.error.status(), 408);
    assert!(
        matches!(f.error, Error::Budget(Budget::Instructions { .. })),
        "{}",
        f.error
    );
    let f = fails(udf_with(
        "function f(n) { return f(n + 1) + 1; }",
        &[Some(json!(0))],
        &limits,
    ));
    assert!(
        matches!(
            f.error,
            Error::Budget(Budget::Recursion { .. } | Budget::Instructions { .. })
        ),
        "{}",
        f.error
    );
    let f = fails(udf(
        "function () { return 'x'.repeat(Math.pow(2, 28)); }",
        &[],
    ));
    assert!(
        matches!(f.error, Error::Budget(Budget::Memory { .. })),
        "{}",
        f.error
    );
    // A huge result is refused by the bounded conversion.
    let f = fails(udf(
        "function () { var s = 'x'.repeat(1 << 20); var a = []; for (var i = 0; i < 1000; i++) a.push(s); return a; }",
        &[],
    ));
    assert!(
        matches!(f.error, Error::Budget(Budget::Memory { .. })),
        "{}",
        f.error
    );
    // The next call is healthy.
    assert_eq!(
        ok(udf("function (x) { return x + 1; }", &[json!(1)])),
        Some(json!(2))
    );
}

#[test]
fn no_state_leaks_between_calls() {
    // A global a call increments is fresh in the next call.
    let counter = "function () { counter = (typeof counter === 'number' ? counter : 0) + 1; return counter; }";
    for _ in 0..3 {
        assert_eq!(ok(udf(counter, &[])), Some(json!(1)));
    }
    // So is a closure's state and a property on the function.
    let iife = "(function () { var n = 0; return function () { n++; arguments.callee.k = (arguments.callee.k || 0) + 1; return [n, arguments.callee.k]; }; })()";
    for _ in 0..3 {
        assert_eq!(ok(udf(iife, &[])), Some(json!([1, 1])));
    }
    // Built-ins are frozen.
    let polluter = "function () { Object.prototype.polluted = 1; Array.prototype.map = null; return [({}).polluted, typeof [].map]; }";
    assert_eq!(ok(udf(polluter, &[])), Some(json!([null, "function"])));
    // A new version replaces the old one.
    let v1 = Script {
        id: "g",
        version: 1,
        body: "function () { return 1; }",
    };
    let v2 = Script {
        id: "g",
        version: 2,
        body: "function () { return 2; }",
    };
    let limits = Limits::default();
    assert_eq!(run_udf(&v1, &[], &limits).unwrap(), Some(json!(1)));
    assert_eq!(run_udf(&v2, &[], &limits).unwrap(), Some(json!(2)));
}

/// A warm call must be cheap: a UDF runs once per document of a query.
/// Prints µs per call; the bound asserted is loose (debug builds).
#[test]
fn warm_calls_are_cheap() {
    let limits = Limits::default();
    let script = Script {
        id: "tax",
        version: 1,
        body: "function tax(x){ return x * 0.08; }",
    };
    let args = [Some(json!(1234.5))];
    run_udf(&script, &args, &limits).unwrap();
    let n = 2_000;
    let t = Instant::now();
    for _ in 0..n {
        run_udf(&script, &args, &limits).unwrap();
    }
    let per_call = t.elapsed() / n;
    println!("udf warm call: {per_call:?}");
    assert!(per_call.as_micros() < 1_000, "{per_call:?} per call");
}
