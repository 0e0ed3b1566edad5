//! Fuzz targets on stable Rust: proptest feeds arbitrary bytes and
//! arbitrary JSON into the SQL parser and executor, document ingestion,
//! procedure parameters and the WebAssembly ABI. Every input must give a
//! result or a 4xx error, never a panic, a 5xx or a partial write.
//!
//! The ABI target (`wasm_abi`) drives every `partita_v1` import through
//! `tests/wat/abi_fuzz.wat`, a procedure that copies the bytes and raw
//! arguments the test chose into its memory and calls the import: invalid
//! UTF-8, bytes that are not JSON, JSON of every shape, random options and
//! SQL, lengths and capacities from 0 to past the end of memory. The guest
//! must see a length, NOT_ACCEPTED or a status <= -400, and trap only when
//! a range lies outside its memory; a failed call or operation changes
//! nothing.
//!
//! `PARTITA_FUZZ_CASES` (default 256) sets the inputs per target; raise it
//! to soak (`PARTITA_FUZZ_CASES=100000 cargo test -p integration-tests
//! --test all -- fuzz_targets::`).

use std::sync::LazyLock;

use partita::{Container, Database, QueryOptions, ScriptKind, ScriptProperties};
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
        let options = QueryOptions {
            partition_key: pk,
            partitions: None,
            max_item_count: Some(2),
            continuation: None,
            limits: None,
        };
        match c.query_items(sql, &params, &options) {
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
        match c.execute_stored_procedure("echo", "a", vec![a.clone(), b.clone()], None) {
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
    let stored = (pk.clone(), c.create_item(pk, value.clone(), None));
    let after = c
        .read_changes(engine::Lsn::ZERO, usize::MAX)
        .expect("changes")
        .len();
    match stored {
        (pk, Ok(doc)) => {
            prop_assert_eq!(after, before + 1);
            let read = c.read_item(pk, doc.document().id()).expect("read back");
            for (k, v) in value.as_object().into_iter().flatten() {
                if !k.starts_with('_') {
                    prop_assert_eq!(&read[k.as_str()], v);
                }
            }
        }
        (_, Err(e)) => {
            prop_assert!((400..500).contains(&e.status()), "{} {e}", e.status());
            prop_assert_eq!(after, before);
        }
    }
    Ok(())
}

/// The ABI fuzz guest's memory size (2 pages, fixed).
const MEM: u32 = 0x2_0000;
/// Where the guest puts the decoded header and the bytes after it.
const HEADER: u32 = 0x8000;
const PAYLOAD: u32 = HEADER + 0x40;
/// The free region for output buffers.
const OUT: u32 = 0x1_0000;

/// How the guest passes one argument pair of an import.
#[derive(Clone, Copy, Debug)]
enum Arg {
    /// An input range `(ptr, len)`.
    In,
    /// An output buffer `(out_ptr, out_cap)`.
    Out,
    /// `fail`'s number (one argument).
    Num,
}

/// The imports in `host_api::abi::IMPORTS` order, with their arguments.
const SHAPES: &[(&str, &[Arg])] = &[
    ("context", &[Arg::Out]),
    ("params", &[Arg::Out]),
    ("request_body", &[Arg::Out]),
    ("set_request_body", &[Arg::In]),
    ("response_body", &[Arg::Out]),
    ("set_response_body", &[Arg::In]),
    ("log", &[Arg::In]),
    ("read", &[Arg::In, Arg::Out]),
    ("read_feed", &[Arg::In, Arg::Out]),
    ("create", &[Arg::In, Arg::In, Arg::Out]),
    ("replace", &[Arg::In, Arg::In, Arg::In, Arg::Out]),
    ("upsert", &[Arg::In, Arg::In, Arg::Out]),
    ("delete", &[Arg::In, Arg::In]),
    ("query", &[Arg::In, Arg::Out]),
    ("take_result", &[Arg::Out]),
    ("fail", &[Arg::Num, Arg::In]),
    ("read_member", &[Arg::In, Arg::In, Arg::Out]),
    (
        "replace_member",
        &[Arg::In, Arg::In, Arg::In, Arg::In, Arg::Out],
    ),
];

#[test]
fn the_abi_fuzz_guest_covers_every_import_in_order() {
    let names: Vec<&str> = host_api::abi::IMPORTS.iter().map(|i| i.name).collect();
    let shaped: Vec<&str> = SHAPES.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, shaped);
    for ((_, args), import) in SHAPES.iter().zip(host_api::abi::IMPORTS) {
        let count: usize = args
            .iter()
            .map(|a| if matches!(a, Arg::Num) { 1 } else { 2 })
            .sum();
        assert_eq!(count, import.params, "{import:?}");
    }
}

/// The bytes behind an input range.
fn abi_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..48),
        // Invalid UTF-8 inside otherwise good JSON: an id, a document, SQL.
        Just(b"{\"id\":\"\xff\xfe\",\"pk\":\"a\"}".to_vec()),
        Just(b"d\xc3".to_vec()),
        Just(b"{\"query\":\"SELECT * FROM c WHERE c.s = '\xed\xa0\x80'\"}".to_vec()),
        Just(b"d0".to_vec()),
        Just(b"d2".to_vec()),
        json_value().prop_map(|v| v.to_string().into_bytes()),
        (
            json_value(),
            "[a-z]{0,3}",
            prop_oneof![Just(json!("a")), Just(json!("b")), json_value()]
        )
            .prop_map(|(mut v, id, pk)| {
                if !v.is_object() {
                    v = json!({"v": v});
                }
                v["id"] = json!(id);
                v["pk"] = pk;
                v.to_string().into_bytes()
            }),
        (
            proptest::option::of(json_value()),
            proptest::option::of(json_value()),
            proptest::option::of(prop_oneof![
                json_value(),
                (-3i64..300).prop_map(Value::from)
            ]),
            proptest::option::of(json_value()),
        )
            .prop_map(|(etag, no_ids, page, token)| {
                let mut o = serde_json::Map::new();
                for (k, v) in [
                    ("etag", etag),
                    ("disableAutomaticIdGeneration", no_ids),
                    ("pageSize", page),
                    ("continuation", token),
                ] {
                    if let Some(v) = v {
                        o.insert(k.into(), v);
                    }
                }
                Value::Object(o).to_string().into_bytes()
            }),
        (
            sql_soup(),
            proptest::option::of(json_value()),
            proptest::option::of(-3i64..300)
        )
            .prop_map(|(sql, params, page)| {
                let mut r = json!({"query": sql});
                if let Some(p) = params {
                    r["parameters"] = p;
                }
                if let Some(n) = page {
                    r["pageSize"] = json!(n);
                }
                r.to_string().into_bytes()
            }),
    ]
}

/// One argument pair as the guest passes it, given where the input
/// segment for it lies.
fn abi_pair(kind: Arg, segment: (u32, u32)) -> BoxedStrategy<[u32; 2]> {
    let any_pair = (any::<u32>(), any::<u32>()).prop_map(|(p, l)| [p, l]);
    match kind {
        Arg::In => prop_oneof![
            6 => Just([segment.0, segment.1]),
            1 => Just([0, 0]),
            1 => Just([MEM, 0]),
            1 => Just([MEM - 1, 2]),
            1 => Just([segment.0, 0x7fff_ffff]),
            1 => Just([u32::MAX, 1]),
            1 => any_pair,
        ]
        .boxed(),
        Arg::Out => prop_oneof![
            4 => Just([OUT, MEM - OUT]),
            2 => (0u32..8).prop_map(|cap| [OUT, cap]),
            1 => Just([MEM - 16, 16]),
            1 => Just([MEM - 16, 17]),
            1 => Just([u32::MAX - 7, 8]),
            1 => Just([0, 0]),
            1 => any_pair,
        ]
        .boxed(),
        Arg::Num => prop_oneof![Just([0, 0]), any::<u32>().prop_map(|n| [n, 0])].boxed(),
    }
}

/// One case: an import, its raw arguments and the bytes they point at.
#[derive(Debug)]
struct AbiCase {
    op: usize,
    args: Vec<u32>,
    payload: Vec<u8>,
    in_bounds: bool,
}

fn abi_case() -> impl Strategy<Value = AbiCase> {
    (0..SHAPES.len(), proptest::collection::vec(abi_bytes(), 3))
        .prop_flat_map(|(op, segments)| {
            let mut payload = Vec::new();
            let mut placed = Vec::new();
            for s in &segments {
                placed.push((PAYLOAD + payload.len() as u32, s.len() as u32));
                payload.extend_from_slice(s);
            }
            let mut inputs = 0;
            let pairs: Vec<BoxedStrategy<[u32; 2]>> = SHAPES[op]
                .1
                .iter()
                .map(|kind| {
                    let segment = placed[inputs.min(placed.len() - 1)];
                    if matches!(kind, Arg::In) {
                        inputs += 1;
                    }
                    abi_pair(*kind, segment)
                })
                .collect();
            (Just(op), Just(payload), pairs)
        })
        .prop_map(|(op, payload, pairs)| {
            let mut args = Vec::new();
            let mut in_bounds = true;
            for (kind, pair) in SHAPES[op].1.iter().zip(&pairs) {
                match kind {
                    Arg::Num => args.push(pair[0]),
                    _ => {
                        in_bounds &= u64::from(pair[0]) + u64::from(pair[1]) <= u64::from(MEM);
                        args.extend(pair);
                    }
                }
            }
            AbiCase {
                op,
                args,
                payload,
                in_bounds,
            }
        })
}

impl AbiCase {
    /// The procedure's parameter: the header and payload in hex.
    fn hex(&self) -> String {
        let mut bytes = vec![0u8; (PAYLOAD - HEADER) as usize];
        bytes[0] = self.op as u8;
        for (i, a) in self.args.iter().enumerate() {
            bytes[4 + 4 * i..8 + 4 * i].copy_from_slice(&a.to_le_bytes());
        }
        bytes.extend_from_slice(&self.payload);
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// One container with the ABI fuzz guest, shared by every case of
/// `wasm_abi` and by nothing else: each case compares the change log
/// before and after its call, so a write by another test running beside
/// it would be counted as the case's.
static ABI: LazyLock<(Database, Container)> = LazyLock::new(abi_container);

/// A container with the ABI fuzz guest.
fn abi_container() -> (Database, Container) {
    let (db, c) = container();
    c.create_script(ScriptProperties::wasm(
        "abi",
        ScriptKind::StoredProcedure,
        include_str!("../wat/abi_fuzz.wat"),
    ))
    .expect("the ABI fuzz guest compiles");
    (db, c)
}

fn abi_call_is_clean(case: &AbiCase) -> Result<(), TestCaseError> {
    let c = &ABI.1;
    let changes = || {
        c.read_changes(engine::Lsn::ZERO, usize::MAX)
            .expect("changes")
            .len()
    };
    let before = changes();
    let name = SHAPES[case.op].0;
    let writes = matches!(
        name,
        "create" | "replace" | "upsert" | "delete" | "replace_member"
    );
    match c.execute_stored_procedure("abi", "a", vec![json!(case.hex())], None) {
        Ok(response) => {
            prop_assert!(name != "fail", "fail returned");
            let r = response.body.as_i64();
            prop_assert!(r.is_some(), "{name}: body {}", response.body);
            let r = r.unwrap_or_default();
            prop_assert!(
                r >= 0 || r == i64::from(host_api::abi::NOT_ACCEPTED) || r <= -400,
                "{name}: {r}"
            );
            if r < 0 || !writes {
                prop_assert_eq!(changes(), before, "{}: {} changed the partition", name, r);
            } else {
                prop_assert_eq!(changes(), before + 1, "{}", name);
            }
        }
        Err(e) => {
            prop_assert_eq!(e.status(), 400, "{}: {}", name, e);
            // A trap only for a range outside the memory; fail always stops.
            prop_assert!(
                name == "fail" || !case.in_bounds,
                "{name} trapped with every range in bounds: {e}"
            );
            prop_assert_eq!(
                changes(),
                before,
                "{}: a failed call changed the partition",
                name
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn wasm_abi(case in abi_case()) {
        abi_call_is_clean(&case)?;
    }
}

/// Runs one hand-made case on the ABI fuzz guest in `c`: the import's
/// result, or the call's error status.
fn abi_call(c: &Container, op: &str, args: Vec<u32>, payload: &[u8]) -> Result<i64, u16> {
    let case = AbiCase {
        op: SHAPES
            .iter()
            .position(|(n, _)| *n == op)
            .expect("an import"),
        args,
        payload: payload.to_vec(),
        in_bounds: true,
    };
    match c.execute_stored_procedure("abi", "a", vec![json!(case.hex())], None) {
        Ok(response) => Ok(response.body.as_i64().expect("a number")),
        Err(e) => Err(e.status()),
    }
}

/// The guest reaches the host as designed (so the random cases are not
/// vacuous): a good document is created, invalid UTF-8 is -400, a short
/// buffer gets the length, a missing id -404, a range past the memory
/// traps.
#[test]
fn the_abi_fuzz_guest_reaches_every_outcome() {
    let (_db, c) = abi_container();
    let abi_call = |op: &str, args: Vec<u32>, payload: &[u8]| abi_call(&c, op, args, payload);
    let doc = br#"{"id":"made-by-abi","pk":"a"}"#;
    let n = doc.len() as u32;
    let r = abi_call("create", vec![PAYLOAD, n, 0, 0, OUT, 0x1000], doc).unwrap();
    assert!(r > i64::from(n), "{r}");
    assert!(c.read_item("a", "made-by-abi").is_ok());
    let bad = b"{\"id\":\"\xff\",\"pk\":\"a\"}";
    let r = abi_call(
        "create",
        vec![PAYLOAD, bad.len() as u32, 0, 0, OUT, 0x1000],
        bad,
    );
    assert_eq!(r, Ok(-400));
    assert_eq!(
        abi_call("read", vec![PAYLOAD, 2, OUT, 0x1000], b"zz"),
        Ok(-404)
    );
    let r = abi_call("read", vec![PAYLOAD, 2, OUT, 3], b"d0").unwrap();
    assert!(r > 3, "the length of d0, which did not fit: {r}");
    assert_eq!(
        abi_call("read", vec![PAYLOAD, 2, MEM - 1, 2], b"d0"),
        Err(400)
    );
    assert_eq!(abi_call("log", vec![PAYLOAD, 2], b"\xff\xfe"), Ok(0));
    assert_eq!(abi_call("fail", vec![7, PAYLOAD, 1], b"\xff"), Err(400));
}
