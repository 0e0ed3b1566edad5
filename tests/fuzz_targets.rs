//! Fuzz targets on stable Rust: proptest feeds arbitrary bytes and
//! arbitrary JSON into the SQL parser and executor, document ingestion and
//! procedure parameters. Every input must give a result or a 4xx error,
//! never a panic, a 5xx or a partial write.
//!
//! `PARTITA_FUZZ_CASES` (default 256) sets the inputs per target; raise it
//! to soak (`PARTITA_FUZZ_CASES=100000 cargo test -p integration-tests
//! --test fuzz_targets`). The WebAssembly ABI target (arbitrary bytes as
//! guest memory behind each import, invalid UTF-8 included) joins when the
//! Wasm runtime is merged.

use partita::{Container, Database, QueryItemsOptions, ScriptProperties, Scripts};
use proptest::prelude::*;
use serde_json::{Value, json};

fn cases() -> u32 {
    std::env::var("PARTITA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn container() -> (Database, Container) {
    let db = Database::in_memory();
    let c = db.create_container("things", "/pk").expect("container");
    c.create_script(ScriptProperties::stored_procedure(
        "echo",
        "function (a, b) { getContext().getResponse().setBody([a, b]); }",
    ))
    .expect("script");
    c.create_script(ScriptProperties::user_defined_function(
        "id",
        "function (x) { return x; }",
    ))
    .expect("udf");
    for (i, pk) in ["a", "b", "a"].iter().enumerate() {
        c.create_item(
            *pk,
            json!({"id": format!("d{i}"), "pk": pk, "n": i, "s": "x", "arr": [1, {"k": i}]}),
            None,
        )
        .expect("seed");
    }
    (db, c)
}

/// Arbitrary JSON, nested a few levels.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        // Integers JavaScript represents exactly (beyond 2^53 scripts see
        // the nearest double, as in Cosmos DB).
        (-(1i64 << 53)..(1i64 << 53)).prop_map(Value::from),
        // -0 becomes 0 in JavaScript's JSON, as in Cosmos DB.
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| Value::from(if f == 0.0 { 0.0 } else { f })),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_#/?]{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// SQL-like token soup: more likely to reach deep into the parser than bytes.
fn sql_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("SELECT"),
        Just("VALUE"),
        Just("TOP"),
        Just("DISTINCT"),
        Just("*"),
        Just("FROM"),
        Just("c"),
        Just("JOIN"),
        Just("IN"),
        Just("WHERE"),
        Just("ORDER BY"),
        Just("GROUP BY"),
        Just("OFFSET"),
        Just("LIMIT"),
        Just("AND"),
        Just("OR"),
        Just("NOT"),
        Just("c.n"),
        Just("c.arr"),
        Just("c[\"s\"]"),
        Just("("),
        Just(")"),
        Just("["),
        Just("]"),
        Just("{"),
        Just("}"),
        Just(","),
        Just(":"),
        Just("="),
        Just("<"),
        Just("?"),
        Just("??"),
        Just("+"),
        Just("-"),
        Just("/"),
        Just("%"),
        Just("||"),
        Just("1"),
        Just("2.5e3"),
        Just("'x'"),
        Just("@p"),
        Just("true"),
        Just("null"),
        Just("undefined"),
        Just("COUNT(1)"),
        Just("SUM(c.n)"),
        Just("ARRAY_LENGTH(c.arr)"),
        Just("udf.id(c.n)"),
        Just("EXISTS"),
        Just("BETWEEN"),
        Just("ASC"),
        Just("DESC"),
        Just("AS"),
        Just("'"),
        Just("\""),
    ];
    proptest::collection::vec(token, 0..24).prop_map(|t| t.join(" "))
}

fn query_is_clean(c: &Container, sql: &str) -> Result<(), TestCaseError> {
    let mut params = serde_json::Map::new();
    params.insert("@p".into(), json!(1));
    for pk in [None, Some("a".into())] {
        let options = QueryItemsOptions {
            partition_key: pk,
            max_item_count: Some(2),
            continuation: None,
        };
        match c.run_query(sql, &params, &options) {
            Ok(_) => {}
            Err(e) => prop_assert!(
                (400..500).contains(&e.status()),
                "{sql:?}: {} {e}",
                e.status()
            ),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn sql_from_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let (_db, c) = container();
        query_is_clean(&c, &String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn sql_from_tokens(sql in sql_soup()) {
        let (_db, c) = container();
        query_is_clean(&c, &sql)?;
    }

    #[test]
    fn documents_from_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let (_db, c) = container();
        // Malformed JSON never reaches the engine; whatever parses must be
        // stored whole or refused with a 4xx.
        if let Ok(value) = serde_json::from_slice::<Value>(&bytes) {
            ingest(&c, value)?;
        }
    }

    #[test]
    fn documents_from_json(mut value in json_value(), id in "[a-z#/?]{0,4}", pk in prop_oneof![Just(json!("a")), Just(json!(1)), Just(json!(null)), Just(json!([1]))]) {
        let (_db, c) = container();
        if let Some(map) = value.as_object_mut() {
            map.insert("id".into(), json!(id));
            map.insert("pk".into(), pk);
        }
        ingest(&c, value)?;
    }

    #[test]
    fn procedure_parameters(a in json_value(), b in json_value()) {
        let (_db, c) = container();
        match c.execute_stored_procedure("echo", "a", vec![a.clone(), b.clone()]) {
            // JavaScript has one number type: 1.0 comes back as 1.
            Ok(response) => prop_assert_eq!(numbers_as_f64(&response.body), numbers_as_f64(&json!([a, b]))),
            Err(e) => prop_assert!((400..500).contains(&e.status()), "{} {e}", e.status()),
        }
    }
}

fn numbers_as_f64(value: &Value) -> Value {
    match value {
        Value::Number(n) => json!(n.as_f64()),
        Value::Array(items) => Value::Array(items.iter().map(numbers_as_f64).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), numbers_as_f64(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn ingest(c: &Container, value: Value) -> Result<(), TestCaseError> {
    let before = c
        .read_changes(engine::Lsn::ZERO, usize::MAX)
        .expect("changes")
        .len();
    let pk = c.partition_key_of(&value);
    let stored = pk
        .as_ref()
        .ok()
        .map(|pk| (pk.clone(), c.create_item(pk.clone(), value.clone(), None)));
    let after = c
        .read_changes(engine::Lsn::ZERO, usize::MAX)
        .expect("changes")
        .len();
    match stored {
        Some((pk, Ok(doc))) => {
            prop_assert_eq!(after, before + 1);
            let read = c.read_item(pk, doc.id()).expect("read back");
            for (k, v) in value.as_object().into_iter().flatten() {
                if !k.starts_with('_') {
                    prop_assert_eq!(&read[k.as_str()], v);
                }
            }
        }
        Some((_, Err(e))) => {
            prop_assert!((400..500).contains(&e.status()), "{} {e}", e.status());
            prop_assert_eq!(after, before);
        }
        None => {
            prop_assert!((400..500).contains(&pk.as_ref().expect_err("no key").status()));
            prop_assert_eq!(after, before);
        }
    }
    Ok(())
}
