//! Tests: golden files (`testdata/*.txt`), cross-partition equivalence
//! (proptest), a bounded fuzz loop, nesting-depth limits, deep documents and
//! continuation-token validation. [`MemSource`] is the in-memory [`Source`].

use std::ops::ControlFlow;
use std::panic::{AssertUnwindSafe, catch_unwind};

use host_api::PartitionKey;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// Partitions of `(rid, document, size)`, each in ascending RID order.
/// A stored document: RID, body and serialized size.
type Stored = (u64, Value, usize);

#[derive(Clone, Default)]
pub(super) struct MemSource {
    parts: Vec<(PartitionKey, Vec<Stored>)>,
}

impl MemSource {
    /// All documents in one partition, RIDs 0, 1, 2, …
    pub(super) fn single(docs: &[Value]) -> MemSource {
        let mut s = MemSource::default();
        for (i, d) in docs.iter().enumerate() {
            s.insert(PartitionKey::from("p"), i as u64, d.clone());
        }
        s
    }

    fn insert(&mut self, pk: PartitionKey, rid: u64, doc: Value) {
        let size = doc.to_string().len();
        self.insert_sized(pk, rid, doc, size);
    }

    fn insert_sized(&mut self, pk: PartitionKey, rid: u64, doc: Value, size: usize) {
        let pos = match self.parts.iter().position(|(k, _)| *k == pk) {
            Some(p) => p,
            None => {
                self.parts.push((pk.clone(), Vec::new()));
                self.parts.sort_by(|a, b| a.0.cmp(&b.0));
                self.parts.iter().position(|(k, _)| *k == pk).unwrap_or(0)
            }
        };
        let docs = &mut self.parts[pos].1;
        docs.push((rid, doc, size));
        docs.sort_by_key(|d| d.0);
    }
}

impl Source for MemSource {
    fn partitions(&self) -> Vec<PartitionKey> {
        self.parts.iter().map(|(k, _)| k.clone()).collect()
    }

    fn scan(
        &self,
        key: &PartitionKey,
        after: Option<u64>,
        f: &mut dyn FnMut(u64, &Value, usize) -> ControlFlow<()>,
    ) {
        let Some((_, docs)) = self.parts.iter().find(|(k, _)| k == key) else {
            return;
        };
        for (rid, doc, size) in docs {
            if after.is_some_and(|a| *rid <= a) {
                continue;
            }
            if f(*rid, doc, *size).is_break() {
                return;
            }
        }
    }
}

/// Runs a query to the end, one call per page, returning all items and the
/// number of pages.
fn run_all(
    q: &Query,
    params: &Params,
    src: &dyn Source,
    page: Option<usize>,
) -> Result<(Vec<Value>, usize), QueryError> {
    let mut items = Vec::new();
    let mut token: Option<String> = None;
    for pages in 1..100_000 {
        let opts = QueryOptions {
            max_item_count: page,
            continuation: token.as_deref(),
            udf: None,
        };
        let p = execute(q, params, src, &opts)?;
        assert_eq!(p.stats.docs_returned, p.items.len() as u64);
        if let Some(n) = page {
            assert!(p.items.len() <= n.max(1), "page too large");
        }
        items.extend(p.items);
        match p.continuation {
            None => return Ok((items, pages)),
            Some(t) => token = Some(t),
        }
    }
    panic!("paging did not terminate");
}

fn run(
    sql: &str,
    params: &Params,
    src: &dyn Source,
    page: Option<usize>,
) -> Result<Vec<Value>, QueryError> {
    let q = parse(sql)?;
    run_all(&q, params, src, page).map(|r| r.0)
}

/// One golden case.
struct Case {
    line: usize,
    docs: Vec<Value>,
    query: String,
    params: Params,
    expect: Option<String>,
    error: Option<String>,
}

fn golden_cases(text: &str) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    let mut docs: Vec<Value> = Vec::new();
    let mut section = String::new();
    let mut body = String::new();
    let mut start = 0;
    let flush =
        |section: &str, body: &str, start: usize, cases: &mut Vec<Case>, docs: &mut Vec<Value>| {
            let body = body.trim();
            match section {
                "" => {}
                "docs" => *docs = serde_json::from_str(body).expect("golden docs"),
                "query" => cases.push(Case {
                    line: start,
                    docs: docs.clone(),
                    query: body.to_owned(),
                    params: Params::new(),
                    expect: None,
                    error: None,
                }),
                "params" => {
                    let c = cases.last_mut().expect("params before query");
                    c.params = serde_json::from_str(body).expect("golden params");
                }
                "expect" => {
                    let v: Value = serde_json::from_str(body).expect("golden expect");
                    cases.last_mut().expect("expect before query").expect = Some(v.to_string());
                }
                "error" => {
                    cases.last_mut().expect("error before query").error = Some(body.to_owned())
                }
                other => panic!("unknown golden section {other}"),
            }
        };
    for (n, line) in text.lines().enumerate() {
        if let Some(name) = line.strip_prefix("--- ") {
            flush(&section, &body, start, &mut cases, &mut docs);
            section = name.trim().to_owned();
            body.clear();
            start = n + 2;
        } else if !line.starts_with('#') {
            body.push_str(line);
            body.push('\n');
        }
    }
    flush(&section, &body, start, &mut cases, &mut docs);
    cases
}

#[test]
fn golden() {
    let text = include_str!("testdata/golden.txt");
    let cases = golden_cases(text);
    assert!(cases.len() > 100, "only {} golden cases", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let src = MemSource::single(&c.docs);
        let got = run(&c.query, &c.params, &src, None);
        let paged = run(&c.query, &c.params, &src, Some(1));
        match (&c.expect, &c.error, got) {
            (Some(want), _, Ok(items)) => {
                let got = Value::Array(items).to_string();
                if got != *want {
                    failures.push(format!(
                        "line {}: {}\n  want {want}\n  got  {got}",
                        c.line, c.query
                    ));
                }
                let paged = paged.map(|v| Value::Array(v).to_string());
                if paged.as_ref() != Ok(want) {
                    failures.push(format!(
                        "line {}: {} (paged)\n  want {want}\n  got  {paged:?}",
                        c.line, c.query
                    ));
                }
            }
            (_, Some(want), Err(e)) => {
                assert_eq!(e.status(), 400);
                if !e.to_string().contains(want.as_str()) {
                    failures.push(format!(
                        "line {}: {}\n  want error {want}\n  got  {e}",
                        c.line, c.query
                    ));
                }
            }
            (_, _, got) => failures.push(format!("line {}: {}\n  got {got:?}", c.line, c.query)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn feed(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({
                "id": format!("doc-{i}"),
                "userId": format!("user-{}", i % 7),
                "creationDate": format!("2024-01-{:02}T10:{:02}:00Z", 1 + (i * 37) % 28, (i * 13) % 60),
                "n": i,
            })
        })
        .collect()
}

#[test]
fn top_k_matches_full_sort() {
    let docs = feed(200);
    let src = MemSource::single(&docs);
    let none = Params::new();
    let all = run(
        "SELECT VALUE f.id FROM f ORDER BY f.creationDate, f.n",
        &none,
        &src,
        None,
    )
    .unwrap();
    assert_eq!(all.len(), 200);
    for k in [0, 1, 5, 31, 64, 150, 200, 300] {
        let top = run(
            &format!("SELECT TOP {k} VALUE f.id FROM f ORDER BY f.creationDate, f.n"),
            &none,
            &src,
            None,
        );
        assert_eq!(top.unwrap(), all[..k.min(200)].to_vec(), "k={k}");
        let off = run(
            &format!("SELECT VALUE f.id FROM f ORDER BY f.creationDate, f.n OFFSET 7 LIMIT {k}"),
            &none,
            &src,
            Some(3),
        );
        assert_eq!(
            off.unwrap(),
            all[7..(7 + k).min(200)].to_vec(),
            "offset k={k}"
        );
    }
}

#[test]
fn stats_count_scanned_and_returned() {
    let docs = feed(10);
    let src = MemSource::single(&docs);
    let q = parse("SELECT * FROM p WHERE p.userId = @userId").unwrap();
    let mut params = Params::new();
    params.insert("@userId".into(), json!("user-3"));
    let page = execute(&q, &params, &src, &QueryOptions::default()).unwrap();
    assert_eq!(page.items, vec![docs[3].clone()]);
    assert_eq!(page.stats.docs_scanned, 10);
    assert_eq!(page.stats.docs_returned, 1);
    let bytes: usize = docs.iter().map(|d| d.to_string().len()).sum();
    assert_eq!(page.stats.bytes_read, bytes as u64);
    // A streaming page stops early.
    let q = parse("SELECT TOP 2 * FROM p").unwrap();
    let page = execute(&q, &params, &src, &QueryOptions::default()).unwrap();
    assert_eq!(page.stats.docs_scanned, 2);
}

#[test]
fn select_star_keeps_property_order() {
    let doc: Value = serde_json::from_str(r#"{"z":1,"a":2,"m":{"y":1,"b":2}}"#).unwrap();
    let src = MemSource::single(std::slice::from_ref(&doc));
    let out = run("SELECT * FROM c", &Params::new(), &src, None).unwrap();
    assert_eq!(
        Value::Array(out).to_string(),
        r#"[{"z":1,"a":2,"m":{"y":1,"b":2}}]"#
    );
    let out = run(
        "SELECT c.m, c.z AS first FROM c",
        &Params::new(),
        &src,
        None,
    )
    .unwrap();
    assert_eq!(
        Value::Array(out).to_string(),
        r#"[{"m":{"y":1,"b":2},"first":1}]"#
    );
}

#[test]
fn query_is_send_sync_and_reusable() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Query>();
    let q = parse("SELECT VALUE c.id FROM c WHERE c.n = @n").unwrap();
    let src = MemSource::single(&feed(5));
    for i in 0..5 {
        let mut params = Params::new();
        params.insert("n".into(), json!(i));
        let page = execute(&q, &params, &src, &QueryOptions::default()).unwrap();
        assert_eq!(page.items, vec![json!(format!("doc-{i}"))]);
    }
}

struct Tax;

impl Udf for Tax {
    fn call(&self, name: &str, args: &[Option<Value>]) -> Result<Option<Value>, String> {
        match (name, args) {
            ("Tax", [Some(v)]) => Ok(v.as_f64().map(|x| json!(x * 0.5))),
            ("Fail", _) => Err("boom".into()),
            _ => Ok(None),
        }
    }
}

#[test]
fn udf_hook() {
    let docs = vec![
        json!({"income": 50000}),
        json!({"income": 1000}),
        json!({"other": 1}),
    ];
    let src = MemSource::single(&docs);
    let q = parse("SELECT * FROM Incomes t WHERE udf.Tax(t.income) > 20000").unwrap();
    let opts = QueryOptions {
        udf: Some(&Tax),
        ..QueryOptions::default()
    };
    let page = execute(&q, &Params::new(), &src, &opts).unwrap();
    assert_eq!(page.items, vec![docs[0].clone()]);
    let q = parse("SELECT VALUE udf.Fail(1) FROM c").unwrap();
    let err = execute(&q, &Params::new(), &src, &opts).unwrap_err();
    assert_eq!(
        err.to_string(),
        "user-defined function 'udf.Fail' failed: boom"
    );
}

#[test]
fn continuation_tokens_are_validated() {
    let src = MemSource::single(&feed(10));
    let none = Params::new();
    for sql in [
        "SELECT * FROM c",
        "SELECT * FROM c ORDER BY c.n",
        "SELECT DISTINCT VALUE c.userId FROM c",
        "SELECT VALUE COUNT(1) FROM c",
    ] {
        let q = parse(sql).unwrap();
        for bad in [
            "",
            "x",
            "!!!",
            "eyJ2IjoxfQ",
            "bnVsbA",
            "W10",
            "eyJ2IjoxLCJtIjoicyIsImgiOiJ6eiIsImkiOjF9",
            &"A".repeat(5000),
        ] {
            let opts = QueryOptions {
                continuation: Some(bad),
                max_item_count: Some(2),
                udf: None,
            };
            let err = execute(&q, &none, &src, &opts).unwrap_err();
            assert!(
                matches!(err, QueryError::InvalidContinuation(_)),
                "{sql} {bad}: {err}"
            );
            assert_eq!(err.status(), 400);
        }
    }
    // A token from another query, or with other parameters, is foreign.
    let q1 = parse("SELECT * FROM c").unwrap();
    let q2 = parse("SELECT c.id FROM c").unwrap();
    let opts = QueryOptions {
        max_item_count: Some(2),
        ..QueryOptions::default()
    };
    let t = execute(&q1, &none, &src, &opts)
        .unwrap()
        .continuation
        .unwrap();
    let opts2 = QueryOptions {
        continuation: Some(&t),
        ..opts
    };
    assert!(matches!(
        execute(&q2, &none, &src, &opts2),
        Err(QueryError::InvalidContinuation(_))
    ));
    let q3 = parse("SELECT * FROM c WHERE c.n > @n").unwrap();
    let mut p1 = Params::new();
    p1.insert("@n".into(), json!(1));
    let mut p2 = Params::new();
    p2.insert("@n".into(), json!(2));
    let t = execute(&q3, &p1, &src, &opts)
        .unwrap()
        .continuation
        .unwrap();
    let opts3 = QueryOptions {
        continuation: Some(&t),
        ..opts
    };
    assert!(execute(&q3, &p1, &src, &opts3).is_ok());
    assert!(matches!(
        execute(&q3, &p2, &src, &opts3),
        Err(QueryError::InvalidContinuation(_))
    ));
    // Tampered tokens (every single-character change) never panic.
    for i in 0..t.len() {
        for c in ['A', 'z', '0', '_', '-'] {
            let mut s: Vec<char> = t.chars().collect();
            s[i] = c;
            let s: String = s.into_iter().collect();
            let opts = QueryOptions {
                continuation: Some(&s),
                ..opts
            };
            let _ = execute(&q3, &p1, &src, &opts);
        }
    }
}

#[test]
fn stream_resumes_after_writes_elsewhere() {
    let mut src = MemSource::default();
    for i in 0..4u64 {
        src.insert(PartitionKey::from("a"), i, json!({"id": format!("a{i}")}));
        src.insert(
            PartitionKey::from("c"),
            10 + i,
            json!({"id": format!("c{i}")}),
        );
    }
    let q = parse("SELECT VALUE r.id FROM r").unwrap();
    let none = Params::new();
    let opts = QueryOptions {
        max_item_count: Some(5),
        ..QueryOptions::default()
    };
    let p1 = execute(&q, &none, &src, &opts).unwrap();
    assert_eq!(
        p1.items,
        json!(["a0", "a1", "a2", "a3", "c0"])
            .as_array()
            .unwrap()
            .clone()
    );
    // Writes: to a finished partition (not seen), to a new partition after
    // the position and to the current partition after the position (seen).
    src.insert(PartitionKey::from("a"), 20, json!({"id": "a-new"}));
    src.insert(PartitionKey::from("b"), 21, json!({"id": "b-new"}));
    src.insert(PartitionKey::from("d"), 22, json!({"id": "d-new"}));
    src.insert(PartitionKey::from("c"), 23, json!({"id": "c-new"}));
    let t = p1.continuation.unwrap();
    let opts = QueryOptions {
        continuation: Some(&t),
        max_item_count: Some(100),
        udf: None,
    };
    let p2 = execute(&q, &none, &src, &opts).unwrap();
    assert_eq!(
        p2.items,
        json!(["c1", "c2", "c3", "c-new", "d-new"])
            .as_array()
            .unwrap()
            .clone()
    );
    assert_eq!(p2.continuation, None);
}

#[test]
fn join_rows_page_mid_document() {
    let docs = vec![
        json!({"id": 1, "t": [1, 2, 3, 4, 5]}),
        json!({"id": 2, "t": [6, 7]}),
    ];
    let src = MemSource::single(&docs);
    let none = Params::new();
    for page in 1..8 {
        let out = run(
            "SELECT VALUE t FROM c JOIN t IN c.t",
            &none,
            &src,
            Some(page),
        )
        .unwrap();
        assert_eq!(out, (1..=7).map(|i| json!(i)).collect::<Vec<_>>());
        let out = run(
            "SELECT VALUE t FROM c JOIN t IN c.t ORDER BY c.id DESC",
            &none,
            &src,
            Some(page),
        )
        .unwrap();
        assert_eq!(
            out,
            [7, 6, 5, 4, 3, 2, 1]
                .iter()
                .map(|i| json!(i))
                .collect::<Vec<_>>()
        );
    }
}

// ---- deep nesting ----

fn assert_too_deep(sql: &str) {
    match parse(sql) {
        Err(QueryError::TooDeep { .. }) => {}
        other => panic!("expected too deep, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn deeply_nested_queries_are_rejected() {
    let n = 100_000;
    assert_too_deep(&format!("SELECT VALUE {}1{}", "(".repeat(n), ")".repeat(n)));
    // (`--` starts a comment, so unary minus chains need spaces.)
    assert_too_deep(&format!("SELECT VALUE {}1", "- ".repeat(n)));
    assert_too_deep(&format!("SELECT VALUE {}1", "~".repeat(n)));
    assert_too_deep(&format!("SELECT * FROM c WHERE {}true", "NOT ".repeat(n)));
    assert_too_deep(&format!("SELECT VALUE 1{}", "+1".repeat(n)));
    // A long chain of one logical operator is a balanced tree, not deep.
    let chain = parse(&format!("SELECT VALUE true{}", " AND true".repeat(n))).unwrap();
    let one = MemSource::single(&[json!({})]);
    let all = execute(&chain, &Params::new(), &one, &QueryOptions::default()).unwrap();
    assert_eq!(all.items, vec![json!(true)]);
    assert_too_deep(&format!("SELECT VALUE 1{}", " AND (1".repeat(n)));
    assert_too_deep(&format!("SELECT VALUE c{} FROM c", ".a".repeat(n)));
    assert_too_deep(&format!("SELECT VALUE c{} FROM c", "[0]".repeat(n)));
    assert_too_deep(&format!("SELECT VALUE {}", "[".repeat(n)));
    assert_too_deep(&format!("SELECT VALUE {}", "{\"a\":".repeat(n)));
    assert_too_deep(&format!("SELECT VALUE {}", "ABS(".repeat(n)));
    assert_too_deep(&format!("SELECT VALUE 1{}", " ?? 1".repeat(n)));
    assert_too_deep(&format!("SELECT VALUE {}1", "true ? 1 : ".repeat(n)));
    assert_too_deep(&format!("SELECT VALUE 1{}", " IN (1)".repeat(n)));
    assert_too_deep(&format!("SELECT VALUE {}1", "(SELECT VALUE ".repeat(n)));
    assert_too_deep(&format!(
        "SELECT VALUE {}1",
        "EXISTS(SELECT VALUE ".repeat(n)
    ));
    assert_too_deep(&format!(
        "SELECT VALUE {}1",
        "ARRAY(SELECT VALUE t FROM t IN ".repeat(n)
    ));
    let e = parse(&format!("SELECT VALUE {}1{}", "(".repeat(n), ")".repeat(n))).unwrap_err();
    assert_eq!(e.status(), 400);
    assert!(e.to_string().contains("query nested too deeply"), "{e}");
    // Moderate nesting still works.
    let src = MemSource::single(&[json!({"a": 1})]);
    let none = Params::new();
    let sql = format!(
        "SELECT VALUE {}c.a{} FROM c",
        "(".repeat(100),
        ")".repeat(100)
    );
    assert_eq!(run(&sql, &none, &src, None).unwrap(), vec![json!(1)]);
    let sql = format!("SELECT VALUE 0{} FROM c", " + c.a".repeat(100));
    assert_eq!(run(&sql, &none, &src, None).unwrap(), vec![json!(100)]);
    // Nested subqueries up to the limit parse and run.
    let mut depth = 0;
    let mut sql = String::from("c.a");
    while parse(&format!("SELECT VALUE {sql} FROM c")).is_ok() {
        sql = format!("(SELECT VALUE {sql})");
        depth += 1;
    }
    assert!(depth > 20, "only {depth} nested subqueries");
    let sql = format!(
        "SELECT VALUE {} FROM c",
        (0..depth - 1).fold(String::from("c.a"), |s, _| format!(
            "ARRAY(SELECT VALUE {s})"
        ))
    );
    assert!(run(&sql, &none, &src, None).is_ok());
}

#[test]
fn huge_literals() {
    let n = 200_000;
    let sql = format!("SELECT VALUE ARRAY_LENGTH([{}1])", "1,".repeat(n));
    let src = MemSource::default();
    assert_eq!(
        run(&sql, &Params::new(), &src, None).unwrap(),
        vec![json!(n + 1)]
    );
    let sql = format!("SELECT VALUE LENGTH('{}')", "x".repeat(n));
    assert_eq!(
        run(&sql, &Params::new(), &src, None).unwrap(),
        vec![json!(n)]
    );
    let sql = format!("SELECT VALUE 1 IN ({}1)", "2,".repeat(n));
    assert_eq!(
        run(&sql, &Params::new(), &src, None).unwrap(),
        vec![json!(true)]
    );
}

/// A value nested `depth` levels deep, built without recursion.
fn deep_value(depth: usize, leaf: i64, object: bool) -> Value {
    let mut v = json!(leaf);
    for _ in 0..depth {
        v = if object {
            let mut m = serde_json::Map::new();
            m.insert("a".into(), v);
            Value::Object(m)
        } else {
            Value::Array(vec![v])
        };
    }
    v
}

#[test]
fn deep_documents_do_not_overflow() {
    // Run on a thread with a small (1 MiB) stack to make overflow likely if
    // anything recursed over the document.
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let depth = 100_000;
            // (Not `json!`: it serializes its arguments recursively.)
            let doc = |id: i64, d: i64, o: i64| {
                let mut m = serde_json::Map::new();
                m.insert("id".into(), json!(id));
                m.insert("d".into(), deep_value(depth, d, false));
                m.insert("o".into(), deep_value(depth, o, true));
                Value::Object(m)
            };
            let docs = vec![doc(1, 1, 1), doc(2, 2, 1), doc(3, 1, 3)];
            let mut src = MemSource::default();
            for (i, d) in docs.into_iter().enumerate() {
                src.insert_sized(PartitionKey::from(i as i64 % 2), i as u64, d, 2_000_000);
            }
            let none = Params::new();
            let ids = |sql: &str| run(sql, &none, &src, Some(1)).unwrap();
            let all = run("SELECT VALUE c.id FROM c ORDER BY c.d DESC, c.id", &none, &src, None).unwrap();
            assert_eq!(all, vec![json!(2), json!(1), json!(3)]);
            let paged = run("SELECT VALUE c.id FROM c ORDER BY c.d DESC, c.id", &none, &src, Some(1));
            assert!(matches!(paged, Err(QueryError::Invalid(_))), "{paged:?}");
            let top = run("SELECT TOP 2 VALUE c.id FROM c ORDER BY c.o", &none, &src, None).unwrap();
            assert_eq!(top, vec![json!(1), json!(2)]);
            assert_eq!(ids("SELECT VALUE c.id FROM c WHERE c.o = c.o AND c.d != [5]"), vec![json!(1), json!(3), json!(2)]);
            let q = "SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.d, c.d[0]) AND c.d IN (c.d)";
            assert_eq!(ids(q), vec![json!(1), json!(3), json!(2)]);
            // Too deep to copy into a constructed value: undefined, not a crash.
            let q = "SELECT VALUE [ARRAY_LENGTH([c.d]), ARRAY_LENGTH(ARRAY_SLICE(c.d, 0)), IS_DEFINED({\"a\": c.o}.a)] FROM c";
            assert_eq!(ids(q), vec![json!([0, false]), json!([0, false]), json!([0, false])]);
            assert_eq!(ids("SELECT VALUE COUNT(1) FROM c GROUP BY c.o"), vec![json!(2), json!(1)]);
            assert_eq!(ids("SELECT VALUE MAX(c.d) FROM c"), Vec::<Value>::new());
            let distinct = run("SELECT DISTINCT VALUE c.d FROM c", &none, &src, None).unwrap();
            assert_eq!(distinct.len(), 2);
            let copies = run("SELECT VALUE TOSTRING(c.o) FROM c", &none, &src, None).unwrap();
            assert_eq!(copies.len(), 3);
            // Values handed back to the test are deep: dismantle them here.
            let stored = src.parts.into_iter().flat_map(|(_, docs)| docs.into_iter().map(|d| d.1));
            for v in distinct.into_iter().chain(stored) {
                super::order::dismantle(v);
            }
        })
        .unwrap();
    handle.join().unwrap();
}

// ---- fuzzing ----

/// xorshift64*, for a deterministic fuzz loop.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const SEEDS: &[&str] = &[
    "SELECT * FROM c WHERE c.a = 1",
    "SELECT VALUE COUNT(1) FROM c",
    "SELECT TOP 5 * FROM f ORDER BY f.creationDate",
    "SELECT c.id, c.t AS tag FROM c JOIN t IN c.tags WHERE t LIKE 'a%' ESCAPE '!'",
    "SELECT DISTINCT VALUE {\"a\": c.a, \"b\": [c.b, 1]} FROM c ORDER BY c.a DESC, c.b OFFSET 1 LIMIT 2",
    "SELECT c.g, SUM(c.a) AS s, AVG(c.a) FROM c GROUP BY c.g",
    "SELECT VALUE c.a > 1 ? c.b ?? 'x' : c.c || 'y' FROM c WHERE c.a BETWEEN 1 AND 3 OR c.a NOT IN (1, 2)",
    "SELECT VALUE ARRAY_CONTAINS(@list, c.a, true) FROM c WHERE STARTSWITH(c.s, 'a', true)",
    "SELECT VALUE SUBSTRING(c.s, 1, 2) FROM c WHERE c[\"a\"][0] = @p AND NOT IS_DEFINED(c.z)",
    "SELECT TOP @n VALUE c.a FROM c",
    "SELECT VALUE ARRAY(SELECT DISTINCT VALUE t FROM t IN c.tags WHERE EXISTS(SELECT VALUE 1 FROM u IN c.tags) ORDER BY t)",
    "SELECT c.a, (SELECT VALUE COUNT(1) FROM t IN c.tags) AS n FROM c WHERE udf.f(c.a) OR c.a LIKE '[a-c]%'",
];

const SOUP: &[&str] = &[
    "SELECT",
    "VALUE",
    "*",
    "FROM",
    "c",
    "WHERE",
    "JOIN",
    "IN",
    "ORDER",
    "BY",
    "DESC",
    "TOP",
    "OFFSET",
    "LIMIT",
    "DISTINCT",
    "GROUP",
    "AND",
    "OR",
    "NOT",
    "BETWEEN",
    "LIKE",
    "ESCAPE",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ".",
    ":",
    "?",
    "??",
    "=",
    "!=",
    "<",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "||",
    "~",
    "1",
    "0",
    "-1",
    "1e308",
    "2.5",
    "'s'",
    "\"d\"",
    "@p",
    "@n",
    "@list",
    "@nope",
    "c.a",
    "c.tags",
    "t",
    "COUNT(",
    "SUM(",
    "MAX(",
    "ABS(",
    "udf.f(",
    "true",
    "null",
    "undefined",
    "AS",
    "x",
    "ARRAY_CONTAINS(",
    "SUBSTRING(",
    "'",
    "\"",
    "\\",
    "é",
    "😀",
    "\n",
    "--",
];

fn fuzz_source() -> MemSource {
    let mut src = MemSource::default();
    let docs = [
        json!({"a": 1, "b": "x", "s": "abc", "g": 1, "tags": ["a", "b"], "creationDate": "2024"}),
        json!({"a": [1, 2], "b": null, "s": "Abd", "g": 2, "tags": []}),
        json!({"a": 2.5, "c": {"d": [true]}, "g": 1, "tags": "no"}),
        json!({"a": "2", "tags": [{"x": 1}], "creationDate": 5}),
    ];
    for (i, d) in docs.iter().enumerate() {
        src.insert(PartitionKey::from((i % 2) as i64), i as u64, d.clone());
    }
    src
}

fn fuzz_params() -> Params {
    let mut p = Params::new();
    p.insert("@p".into(), json!(1));
    p.insert("@n".into(), json!(2));
    p.insert("@list".into(), json!([1, "x", {"a": 1}]));
    p
}

#[test]
fn fuzz_no_panics() {
    let src = fuzz_source();
    let params = fuzz_params();
    // Bounded for CI; soak locally with PARTITA_QUERY_FUZZ_ITERATIONS (and
    // PARTITA_QUERY_FUZZ_SEED for other inputs).
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let limit = env("PARTITA_QUERY_FUZZ_ITERATIONS");
    let mut rng = Rng(env("PARTITA_QUERY_FUZZ_SEED").unwrap_or(0x9e37_79b9_7f4a_7c15) | 1);
    let start = std::time::Instant::now();
    let budget = std::time::Duration::from_secs(if limit.is_some() { 3600 } else { 3 });
    let mut iterations = 0;
    while iterations < limit.unwrap_or(60_000) && start.elapsed() < budget {
        iterations += 1;
        let sql = if rng.below(2) == 0 {
            let n = 1 + rng.below(25);
            (0..n)
                .map(|_| SOUP[rng.below(SOUP.len())])
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            let mut chars: Vec<char> = SEEDS[rng.below(SEEDS.len())].chars().collect();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(chars.len() + 1);
                match rng.below(3) {
                    0 if at < chars.len() => {
                        let len = 1 + rng.below(6);
                        chars.drain(at..(at + len).min(chars.len()));
                    }
                    1 => {
                        let tok = SOUP[rng.below(SOUP.len())];
                        for (i, c) in format!(" {tok} ").chars().enumerate() {
                            chars.insert(at + i, c);
                        }
                    }
                    _ if at < chars.len() => {
                        chars[at] = SOUP[rng.below(SOUP.len())].chars().next().unwrap_or('x')
                    }
                    _ => {}
                }
            }
            chars.into_iter().collect()
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            if let Ok(q) = parse(&sql) {
                let page = rng.below(4);
                let _ = run_all(&q, &params, &src, if page == 0 { None } else { Some(page) });
            }
        }));
        assert!(result.is_ok(), "panic on query {sql:?}");
    }
    assert!(iterations > 500, "only {iterations} fuzz iterations");
}

// ---- cross-partition equivalence ----

fn arb_doc() -> impl Strategy<Value = (u8, Value)> {
    (
        0u8..4,
        prop_oneof![
            Just(json!(null)),
            (0i64..5).prop_map(|n| json!(n)),
            "[ab]{1}".prop_map(|s| json!(s)),
            Just(Value::Bool(true))
        ],
        proptest::option::of(0i64..3),
        proptest::collection::vec("[xyz]", 0..3),
    )
        .prop_map(|(pk, a, g, tags)| {
            let mut doc = json!({"a": a, "tags": tags});
            if let (Some(g), Some(m)) = (g, doc.as_object_mut()) {
                m.insert("g".into(), json!(g));
            }
            (pk, doc)
        })
}

/// Queries whose results must not depend on how documents are partitioned.
/// `true`: compare in order; `false`: compare as multisets.
const EQUIVALENT: &[(&str, bool)] = &[
    ("SELECT * FROM c ORDER BY c.b", true),
    ("SELECT c.b, c.a FROM c ORDER BY c.a DESC, c.b", true),
    ("SELECT TOP 7 c.b FROM c ORDER BY c.b DESC", true),
    (
        "SELECT VALUE c.b FROM c WHERE c.a >= 1 ORDER BY c.b OFFSET 3 LIMIT 6",
        true,
    ),
    (
        "SELECT VALUE c.b FROM c ORDER BY c.g, c.b DESC OFFSET 2 LIMIT 100",
        true,
    ),
    (
        "SELECT TOP 4 VALUE [t, c.b] FROM c JOIN t IN c.tags ORDER BY t, c.b",
        true,
    ),
    ("SELECT VALUE COUNT(1) FROM c", true),
    ("SELECT VALUE SUM(c.b) FROM c", true),
    ("SELECT VALUE AVG(c.b) FROM c", true),
    (
        "SELECT MIN(c.a) AS mn, MAX(c.a) AS mx, COUNT(c.g) AS n FROM c",
        true,
    ),
    ("SELECT VALUE SUM(c.a) FROM c", true),
    (
        "SELECT c.g, COUNT(1) AS n, AVG(c.b) AS avg FROM c GROUP BY c.g",
        false,
    ),
    ("SELECT DISTINCT VALUE c.a FROM c", false),
    ("SELECT DISTINCT VALUE t FROM c JOIN t IN c.tags", false),
    ("SELECT VALUE c.b FROM c WHERE c.a > 2 OR c.a = 'a'", false),
    ("SELECT c.b, t FROM c JOIN t IN c.tags", false),
    ("SELECT VALUE c.b FROM c OFFSET 0 LIMIT 1000", false),
];

/// Streaming queries: paged results must equal the unpaged ones exactly.
const STREAMING: &[&str] = &[
    "SELECT TOP 5 c.b FROM c",
    "SELECT c.b, t FROM c JOIN t IN c.tags OFFSET 2 LIMIT 7",
    "SELECT VALUE c.b FROM c WHERE c.a != 1",
    "SELECT VALUE t FROM t IN c.tags",
];

fn sorted(mut v: Vec<Value>) -> Vec<Value> {
    v.sort_by(super::order::cmp_values);
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn cross_partition_equals_single_partition(
        docs in proptest::collection::vec(arb_doc(), 0..40),
        page in 1usize..6,
    ) {
        let mut single = MemSource::default();
        let mut spread = MemSource::default();
        for (i, (pk, doc)) in docs.into_iter().enumerate() {
            let mut doc = doc;
            if let Some(m) = doc.as_object_mut() {
                m.insert("b".into(), json!(i));
            }
            single.insert(PartitionKey::from("all"), i as u64, doc.clone());
            let key = match pk {
                0 => PartitionKey::Null,
                1 => PartitionKey::from(7),
                2 => PartitionKey::from("k"),
                _ => PartitionKey::None,
            };
            spread.insert(key, i as u64, doc);
        }
        let params = Params::new();
        for (sql, ordered) in EQUIVALENT {
            let q = parse(sql).unwrap();
            let (want, _) = run_all(&q, &params, &single, None).unwrap();
            let (got, pages) = run_all(&q, &params, &spread, Some(page)).unwrap();
            prop_assert!(pages <= got.len() / page + 2, "{}: {} pages for {} items", sql, pages, got.len());
            if *ordered {
                prop_assert_eq!(&got, &want, "{}", sql);
            } else {
                prop_assert_eq!(sorted(got), sorted(want), "{}", sql);
            }
        }
        for sql in STREAMING {
            let q = parse(sql).unwrap();
            let (want, _) = run_all(&q, &params, &spread, None).unwrap();
            let (got, _) = run_all(&q, &params, &spread, Some(page)).unwrap();
            prop_assert_eq!(&got, &want, "{}", sql);
        }
    }
}

#[test]
fn strings_compare_by_utf16_code_units() {
    use super::order::cmp_str;
    let samples = [
        "",
        "a",
        "ab",
        "b",
        "é",
        "\u{e000}",
        "\u{ffff}",
        "😀",
        "😀a",
        "\u{10000}",
        "z",
        "aaaaaaaaaaaaaaaaaaab",
        "aaaaaaaaaaaaaaaaaaa",
    ];
    for a in samples {
        for b in samples {
            let want = a.encode_utf16().cmp(b.encode_utf16());
            assert_eq!(cmp_str(a, b), want, "{a:?} vs {b:?}");
        }
    }
}

#[test]
fn equality_paths_are_the_top_level_and_terms() {
    let paths = |sql: &str| crate::query::parse(sql).unwrap().equality_paths();
    assert_eq!(
        paths("SELECT * FROM r WHERE r.city = 'x' AND @z = r.a.zip AND r.n > 1"),
        [
            vec!["city".to_owned()],
            vec!["a".to_owned(), "zip".to_owned()]
        ]
    );
    assert!(paths("SELECT * FROM r WHERE r.city = 'x' OR r.zip = 'y'").is_empty());
    assert!(paths("SELECT * FROM r WHERE r.city = r.zip").is_empty());
    assert!(paths("SELECT * FROM r").is_empty());
    assert!(paths("SELECT * FROM r.children c WHERE c.city = 'x'").is_empty());
}
