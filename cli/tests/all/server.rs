//! `partita serve` end to end: the gateway protocol called in-process
//! (status, substatus and body of every error case, 401s, 304s), the
//! transport over real TCP (size limits, malformed requests, graceful
//! shutdown), a fuzz test of request handling, and the acceptance test with
//! the official Python SDK (`azure-cosmos` 4.17.1) against the real binary.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use hyper::HeaderMap;
use partita::{Database, Limits, WorkerOptions, WorkerPool};
use partita_server::{
    EMULATOR_KEY, Gateway, GatewayLimits, MasterKey, WireRequest, WireResponse, resource_of,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{ServerProcess, python_venv};

pub(crate) fn gateway(db: Database) -> Gateway {
    Gateway::new(
        db,
        MasterKey::from_base64(EMULATOR_KEY).unwrap(),
        GatewayLimits::default(),
    )
    .unwrap()
}

fn segments(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect()
}

/// A request signed with the emulator key, dated now.
pub(crate) fn signed(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> WireRequest {
    signed_at(method, path, headers, body, SystemTime::now())
}

fn signed_at(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    date: SystemTime,
) -> WireRequest {
    let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
    let (kind, link) = resource_of(&segments(path));
    let date = httpdate::fmt_http_date(date);
    let mut map = HeaderMap::new();
    map.insert(
        "authorization",
        key.authorization(method, &kind, &link, &date)
            .parse()
            .unwrap(),
    );
    map.insert("x-ms-date", date.parse().unwrap());
    map.insert("host", "127.0.0.1:8081".parse().unwrap());
    for (name, value) in headers {
        map.insert(
            hyper::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    WireRequest {
        method: method.to_owned(),
        path: path.to_owned(),
        headers: map,
        body: Bytes::copy_from_slice(body),
        local_addr: None,
        remote_addr: None,
    }
}

pub(crate) fn call(gw: &Gateway, req: WireRequest) -> (WireResponse, Value) {
    let response = gw.handle(&req, SystemTime::now());
    let body = if response.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&response.body).expect("every body is JSON")
    };
    (response, body)
}

/// A gateway with database `d` and container `c` (partition key `/pk`).
pub(crate) fn setup() -> Gateway {
    setup_on(gateway(Database::in_memory()))
}

/// [`setup`] on a gateway of the caller's.
pub(crate) fn setup_on(gw: Gateway) -> Gateway {
    let (r, _) = call(&gw, signed("POST", "/dbs", &[], br#"{"id":"d"}"#));
    assert_eq!(r.status, 201);
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls",
            &[],
            br#"{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}"#,
        ),
    );
    assert_eq!(r.status, 201, "{body}");
    gw
}

pub(crate) fn assert_error(
    response: &WireResponse,
    body: &Value,
    status: u16,
    code: &str,
    needle: &str,
) {
    assert_eq!(response.status, status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains(needle), "{message:?} lacks {needle:?}");
}

#[test]
fn account_discovery_answers_with_the_callers_host() {
    let gw = gateway(Database::in_memory());
    let (r, body) = call(&gw, signed("GET", "/", &[], b""));
    assert_eq!(r.status, 200);
    assert_eq!(
        body["writableLocations"][0]["databaseAccountEndpoint"],
        "http://127.0.0.1:8081/"
    );
    assert!(body["queryEngineConfiguration"].is_string());
    // Reads say where they were answered, as a region of the service does.
    assert_eq!(r.header("content-location"), Some("http://127.0.0.1:8081/"));
    assert!(r.header("x-ms-activity-id").is_some());
    assert!(r.header("x-ms-request-charge").is_some());
}

#[test]
fn bad_signatures_and_stale_dates_are_401() {
    let gw = setup();
    // Signed for another path.
    let mut req = signed("GET", "/dbs/d", &[], b"");
    req.path = "/dbs/other".to_owned();
    let (r, body) = call(&gw, req);
    assert_error(
        &r,
        &body,
        401,
        "Unauthorized",
        "authorization token can't serve",
    );
    // Signed with another key.
    let mut req = signed("GET", "/dbs/d", &[], b"");
    let date = req.headers["x-ms-date"].to_str().unwrap().to_owned();
    let other = MasterKey::from_base64("c2VjcmV0a2V5").unwrap();
    req.headers.insert(
        "authorization",
        other
            .authorization("GET", "dbs", "dbs/d", &date)
            .parse()
            .unwrap(),
    );
    let (r, _) = call(&gw, req);
    assert_eq!(r.status, 401);
    // Twenty minutes old.
    let old = SystemTime::now() - Duration::from_secs(20 * 60);
    let (r, body) = call(&gw, signed_at("GET", "/dbs/d", &[], b"", old));
    assert_error(
        &r,
        &body,
        401,
        "Unauthorized",
        "away from the server's clock",
    );
    // No authorization at all.
    let mut req = signed("GET", "/dbs/d", &[], b"");
    req.headers.remove("authorization");
    let (r, body) = call(&gw, req);
    assert_error(&r, &body, 401, "Unauthorized", "authorization");
}

#[test]
fn databases_and_containers_have_cosmos_shapes() {
    let gw = setup();
    let (r, body) = call(&gw, signed("POST", "/dbs", &[], br#"{"id":"d"}"#));
    assert_error(&r, &body, 409, "Conflict", "already exists");
    let (r, body) = call(&gw, signed("GET", "/dbs/d/colls/c/", &[], b""));
    assert_eq!(r.status, 200);
    assert_eq!(body["partitionKey"]["version"], 2);
    assert_eq!(body["partitionKey"]["kind"], "Hash");
    let rid = body["_rid"].as_str().unwrap();
    assert_eq!(
        base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            rid.replace('-', "/")
        )
        .unwrap()
        .len(),
        8
    );
    let (r, body) = call(&gw, signed("GET", "/dbs/d/colls", &[], b""));
    assert_eq!(r.status, 200);
    assert_eq!(body["_count"], 1);
    assert_eq!(body["DocumentCollections"][0]["id"], "c");
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs",
            &[("x-ms-documentdb-isquery", "True")],
            br#"{"query":"SELECT * FROM root r WHERE r.id=@id","parameters":[{"name":"@id","value":"d"}]}"#,
        ),
    );
    assert_eq!(r.status, 200);
    assert_eq!(body["Databases"][0]["id"], "d");
    let (r, body) = call(&gw, signed("GET", "/dbs/nope/colls/c", &[], b""));
    assert_error(&r, &body, 404, "NotFound", "database \"nope\"");
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls",
            &[],
            br#"{"id":"h","partitionKey":{"paths":["/a","/b","/c","/d"],"kind":"MultiHash"}}"#,
        ),
    );
    assert_error(&r, &body, 400, "BadRequest", "Too many partition key paths");
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls",
            &[],
            br#"{"id":"h","partitionKey":{"paths":["/a","/b"],"kind":"Hash"}}"#,
        ),
    );
    assert_error(&r, &body, 400, "BadRequest", "Too many partition key paths");
    let (r, _) = call(&gw, signed("DELETE", "/dbs/d/colls/c", &[], b""));
    assert_eq!(r.status, 204);
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c", &[], b""));
    assert_eq!(r.status, 404);
    // A new container of the same name is a new, empty container.
    let (r, _) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls",
            &[],
            br#"{"id":"c","partitionKey":{"paths":["/pk"]}}"#,
        ),
    );
    assert_eq!(r.status, 201);
    let (r, _) = call(&gw, signed("DELETE", "/dbs/d", &[], b""));
    assert_eq!(r.status, 204);
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c", &[], b""));
    assert_eq!(r.status, 404);
}

#[test]
fn the_registry_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let gw = gateway(Database::open(dir.path()).unwrap());
        call(&gw, signed("POST", "/dbs", &[], br#"{"id":"d"}"#));
        call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls",
                &[],
                br#"{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":-1}"#,
            ),
        );
        let (r, _) = call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/c/docs",
                &[("x-ms-documentdb-partitionkey", r#"["p"]"#)],
                br#"{"id":"a","pk":"p"}"#,
            ),
        );
        assert_eq!(r.status, 201);
    }
    let gw = gateway(Database::open(dir.path()).unwrap());
    let (r, body) = call(&gw, signed("GET", "/dbs/d/colls/c", &[], b""));
    assert_eq!(r.status, 200);
    assert_eq!(body["defaultTtl"], -1);
    let (r, _) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs/a",
            &[("x-ms-documentdb-partitionkey", r#"["p"]"#)],
            b"",
        ),
    );
    assert_eq!(r.status, 200);
}

/// The engine containers of the server's Cosmos containers (`c{n}-{name}`).
fn engine_containers(db: &Database) -> Vec<String> {
    db.containers()
        .into_iter()
        .map(|c| c.id)
        .filter(|id| id != partita_server::SYSTEM_CONTAINER)
        .collect()
}

fn create_doc(gw: &Gateway, coll: &str, id: &str) -> u16 {
    let body = format!(r#"{{"id":"{id}","pk":"p"}}"#);
    let (r, _) = call(
        gw,
        signed(
            "POST",
            &format!("/dbs/d/colls/{coll}/docs"),
            &[("x-ms-documentdb-partitionkey", r#"["p"]"#)],
            body.as_bytes(),
        ),
    );
    r.status
}

fn create_coll(gw: &Gateway, name: &str) {
    let body = format!(r#"{{"id":"{name}","partitionKey":{{"paths":["/pk"]}}}}"#);
    let (r, body) = call(gw, signed("POST", "/dbs/d/colls", &[], body.as_bytes()));
    assert_eq!(r.status, 201, "{body}");
}

#[test]
fn deleting_containers_and_databases_deletes_their_engine_containers() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    let gw = gateway(db.clone());
    call(&gw, signed("POST", "/dbs", &[], br#"{"id":"d"}"#));
    create_coll(&gw, "c");
    assert_eq!(create_doc(&gw, "c", "a"), 201);
    assert_eq!(engine_containers(&db), ["c2-c"]);

    let (r, _) = call(&gw, signed("DELETE", "/dbs/d/colls/c", &[], b""));
    assert_eq!(r.status, 204);
    assert!(engine_containers(&db).is_empty());
    let (r, body) = call(&gw, signed("DELETE", "/dbs/d/colls/c", &[], b""));
    assert_error(&r, &body, 404, "NotFound", "\"c\"");
    // The same name again starts empty.
    create_coll(&gw, "c");
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs",
            &[("x-ms-documentdb-partitionkey", r#"["p"]"#)],
            b"",
        ),
    );
    assert_eq!(r.status, 200);
    assert_eq!(body["_count"], 0, "{body}");
    assert_eq!(create_doc(&gw, "c", "a"), 201);
    create_coll(&gw, "other");
    assert_eq!(engine_containers(&db), ["c3-c", "c4-other"]);

    let (r, _) = call(&gw, signed("DELETE", "/dbs/d", &[], b""));
    assert_eq!(r.status, 204);
    assert!(engine_containers(&db).is_empty());
    drop(gw);
    drop(db);
    // Durably: nothing comes back, and no tombstone is left.
    let db = Database::open(dir.path()).unwrap();
    assert!(engine_containers(&db).is_empty());
    let system = db.container(partita_server::SYSTEM_CONTAINER).unwrap();
    let docs = system.read_feed("v1", &Default::default()).unwrap().items;
    assert!(docs.is_empty(), "{docs:?}");
}

#[test]
fn a_deletion_cut_short_is_finished_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::open(dir.path()).unwrap();
        let gw = gateway(db.clone());
        call(&gw, signed("POST", "/dbs", &[], br#"{"id":"d"}"#));
        create_coll(&gw, "c");
        create_coll(&gw, "kept");
        assert_eq!(create_doc(&gw, "c", "a"), 201);
        // What a server stopped between the registry transaction and the
        // engine deletion leaves behind.
        let system = db.container(partita_server::SYSTEM_CONTAINER).unwrap();
        system
            .transaction("v1", |txn| {
                txn.delete_item("coll-2", None)?;
                txn.create_item(json!({"id": "drop-coll-2", "registry": "v1",
                                       "type": "dropped", "engine": "c2-c"}))
            })
            .unwrap();
    }
    let db = Database::open(dir.path()).unwrap();
    assert_eq!(engine_containers(&db), ["c2-c", "c3-kept"]);
    let gw = gateway(db.clone());
    assert_eq!(engine_containers(&db), ["c3-kept"]);
    let system = db.container(partita_server::SYSTEM_CONTAINER).unwrap();
    assert_eq!(
        system.read_item("v1", "drop-coll-2").unwrap_err().status(),
        404
    );
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c", &[], b""));
    assert_eq!(r.status, 404);
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/kept", &[], b""));
    assert_eq!(r.status, 200);
}

/// The offers whose `resource` is `link`, by the query the SDKs send.
fn offers_of(gw: &Gateway, link: &str) -> Vec<Value> {
    let query = json!({"query": "SELECT * FROM root r WHERE r.resource=@link",
                       "parameters": [{"name": "@link", "value": link}]});
    let (r, body) = call(
        gw,
        signed(
            "POST",
            "/offers",
            &[
                ("x-ms-documentdb-isquery", "true"),
                ("content-type", "application/query+json"),
            ],
            query.to_string().as_bytes(),
        ),
    );
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["_count"], body["Offers"].as_array().unwrap().len());
    body["Offers"].as_array().unwrap().clone()
}

fn create_coll_with(gw: &Gateway, name: &str, headers: &[(&str, &str)]) -> (WireResponse, Value) {
    let body = format!(r#"{{"id":"{name}","partitionKey":{{"paths":["/pk"]}}}}"#);
    call(gw, signed("POST", "/dbs/d/colls", headers, body.as_bytes()))
}

/// A container gets one physical partition per 6,000 RU/s, as on the
/// service: `pkranges` lists them tiling the ring, a range header confines
/// a query, a query across ranges pages range by range, one that needs the
/// client's pipeline is the service's 400/1004 with its plan, and responses
/// name the range that served them. Survives a restart.
#[test]
fn throughput_gives_several_physical_partitions_served_range_by_range() {
    let dir = tempfile::tempdir().unwrap();
    let gw = setup_on(gateway(Database::open(dir.path()).unwrap()));
    let (r, body) = create_coll_with(&gw, "m", &[("x-ms-offer-throughput", "12000")]);
    assert_eq!(r.status, 201, "{body}");
    let ranges_of = |gw: &Gateway| {
        let (r, body) = call(gw, signed("GET", "/dbs/d/colls/m/pkranges", &[], b""));
        assert_eq!(r.status, 200, "{body}");
        body["PartitionKeyRanges"].as_array().unwrap().clone()
    };
    let ranges = ranges_of(&gw);
    assert_eq!(ranges.len(), 2);
    assert_eq!(ranges[0]["minInclusive"], "");
    assert_eq!(ranges[0]["maxExclusive"], ranges[1]["minInclusive"]);
    assert_eq!(ranges[1]["maxExclusive"], "FF");
    // Keys on both sides of the boundary (Hash V2 EPKs).
    let mut by_range = [0usize; 2];
    for i in 0..20 {
        let doc = format!(r#"{{"id":"d{i}","pk":"k{i}","n":{i}}}"#);
        let pk = format!(r#"["k{i}"]"#);
        let (r, body) = call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/m/docs",
                &[("x-ms-documentdb-partitionkey", &pk)],
                doc.as_bytes(),
            ),
        );
        assert_eq!(r.status, 201, "{body}");
        let range: usize = r
            .header("x-ms-documentdb-partitionkeyrangeid")
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            r.header("x-ms-session-token")
                .unwrap()
                .starts_with(&format!("{range}:"))
        );
        by_range[range] += 1;
    }
    assert!(by_range.iter().all(|&n| n > 0), "{by_range:?}");
    let query = |headers: &[(&str, &str)], sql: &str| post_query(&gw, "m", sql, headers);
    // One range: only its documents.
    for (range, expected) in by_range.iter().enumerate() {
        let id = range.to_string();
        let (r, body) = query(
            &[("x-ms-documentdb-partitionkeyrangeid", &id)],
            "SELECT * FROM c",
        );
        assert_eq!(r.status, 200, "{body}");
        assert_eq!(body["_count"], *expected as u64);
    }
    let (r, body) = query(
        &[("x-ms-documentdb-partitionkeyrangeid", "7")],
        "SELECT * FROM c",
    );
    assert_eq!(
        (r.status, r.header("x-ms-substatus")),
        (410, Some("1002")),
        "{body}"
    );
    // Across ranges: a page per range, the second reached by the token.
    let cross = ("x-ms-documentdb-query-enablecrosspartition", "true");
    let (r, first) = query(&[cross], "SELECT * FROM c");
    assert_eq!(first["_count"], by_range[0] as u64);
    let token = r.header("x-ms-continuation").unwrap().to_owned();
    let (r, second) = query(&[cross, ("x-ms-continuation", &token)], "SELECT * FROM c");
    assert_eq!(second["_count"], by_range[1] as u64);
    assert!(r.header("x-ms-continuation").is_none());
    // ORDER BY across ranges: the SDK's pipeline, with the plan.
    let (r, body) = query(&[cross], "SELECT * FROM c ORDER BY c.n DESC");
    assert_error(
        &r,
        &body,
        400,
        "BadRequest",
        "can not be directly served by the gateway",
    );
    assert_eq!(r.header("x-ms-substatus"), Some("1004"));
    let plan: Value = serde_json::from_str(body["additionalErrorInfo"].as_str().unwrap()).unwrap();
    assert_eq!(plan["queryInfo"]["orderBy"], json!(["Descending"]));
    let rewritten = plan["queryInfo"]["rewrittenQuery"]
        .as_str()
        .unwrap()
        .replace("{documentdb-formattableorderbyquery-filter}", "true");
    let (r, body) = query(&[("x-ms-documentdb-partitionkeyrangeid", "1")], &rewritten);
    assert_eq!(r.status, 200, "{body}");
    let keys: Vec<i64> = body["Documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["orderByItems"][0]["item"].as_i64().unwrap())
        .collect();
    assert_eq!(keys.len(), by_range[1]);
    assert!(keys.windows(2).all(|w| w[0] > w[1]), "{keys:?}");
    // The Data Explorer's header: the query evaluated whole.
    let whole = ("x-partita-query-whole", "true");
    let (r, body) = query(&[cross, whole], "SELECT VALUE c.n FROM c ORDER BY c.n DESC");
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["Documents"], json!((0..20).rev().collect::<Vec<_>>()));
    // Statistics per range.
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/m",
            &[("x-ms-documentdb-populatepartitionstatistics", "true")],
            b"",
        ),
    );
    assert_eq!(r.status, 200, "{body}");
    let counts: Vec<u64> = body["statistics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["documentCount"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, by_range.map(|n| n as u64));
    // The ranges are fixed at creation and survive a restart.
    drop(gw);
    let gw = gateway(Database::open(dir.path()).unwrap());
    assert_eq!(ranges_of(&gw), ranges);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Whatever the documents, ranges and page size: paging a query across
    /// physical partitions range by range returns exactly the documents the
    /// whole query does, and merging each range's rewritten ORDER BY query
    /// (as an SDK does) gives the whole query's order.
    #[test]
    fn range_by_range_answers_agree_with_whole_answers(
        throughput in prop::sample::select(vec![6000u32, 12000, 30000, 60000]),
        docs in prop::collection::vec((0u8..40, -5i64..5), 0..40),
        page in 1usize..7,
    ) {
        let gw = setup();
        let t = throughput.to_string();
        let (r, body) = create_coll_with(&gw, "r", &[("x-ms-offer-throughput", &t)]);
        prop_assert_eq!(r.status, 201, "{}", body);
        for (i, (key, n)) in docs.iter().enumerate() {
            let doc = json!({"id": format!("d{i}"), "pk": format!("k{key}"), "n": n}).to_string();
            let pk = json!([format!("k{key}")]).to_string();
            let (r, _) = call(
                &gw,
                signed("POST", "/dbs/d/colls/r/docs", &[("x-ms-documentdb-partitionkey", &pk)], doc.as_bytes()),
            );
            prop_assert_eq!(r.status, 201);
        }
        let query = |headers: &[(&str, &str)], sql: &str| {
            let mut all = vec![("x-ms-documentdb-query-enablecrosspartition", "true")];
            all.extend_from_slice(headers);
            post_query(&gw, "r", sql, &all)
        };
        // Range by range, `page` at a time.
        let size = page.to_string();
        let mut ids = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..200 {
            let mut headers = vec![("x-ms-max-item-count", size.as_str())];
            if let Some(t) = &token {
                headers.push(("x-ms-continuation", t.as_str()));
            }
            let (r, body) = query(&headers, "SELECT VALUE c.id FROM c");
            prop_assert_eq!(r.status, 200, "{}", body);
            ids.extend(body["Documents"].as_array().unwrap().iter().cloned());
            token = r.header("x-ms-continuation").map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
        prop_assert!(token.is_none(), "paging did not end");
        let mut expected: Vec<Value> = (0..docs.len()).map(|i| json!(format!("d{i}"))).collect();
        ids.sort_by_key(|v| v.to_string());
        expected.sort_by_key(|v| v.to_string());
        prop_assert_eq!(ids, expected);
        // ORDER BY: each range's rewritten query, merged by the sort key.
        let sql = "SELECT VALUE c.id FROM c ORDER BY c.n DESC";
        let whole = query(&[("x-partita-query-whole", "true")], sql).1["Documents"].clone();
        let (r, body) = query(&[], sql);
        let ranges = call(&gw, signed("GET", "/dbs/d/colls/r/pkranges", &[], b"")).1["_count"]
            .as_u64()
            .unwrap();
        if ranges == 1 {
            prop_assert_eq!(r.status, 200);
            prop_assert_eq!(&body["Documents"], &whole);
            return Ok(());
        }
        prop_assert_eq!(r.header("x-ms-substatus"), Some("1004"));
        let plan: Value = serde_json::from_str(body["additionalErrorInfo"].as_str().unwrap()).unwrap();
        let rewritten = plan["queryInfo"]["rewrittenQuery"]
            .as_str()
            .unwrap()
            .replace("{documentdb-formattableorderbyquery-filter}", "true");
        let mut merged: Vec<i64> = Vec::new();
        for range in 0..ranges {
            let id = range.to_string();
            let (r, body) = query(&[("x-ms-documentdb-partitionkeyrangeid", &id)], &rewritten);
            prop_assert_eq!(r.status, 200, "{}", body);
            let keys: Vec<i64> = body["Documents"]
                .as_array()
                .unwrap()
                .iter()
                .map(|row| row["orderByItems"][0]["item"].as_i64().unwrap())
                .collect();
            prop_assert!(keys.windows(2).all(|w| w[0] >= w[1]), "range {} unsorted", range);
            merged.extend(keys);
        }
        merged.sort_by(|a, b| b.cmp(a));
        let whole_keys: Vec<i64> = whole
            .as_array()
            .unwrap()
            .iter()
            .map(|id| {
                let i: usize = id.as_str().unwrap()[1..].parse().unwrap();
                docs[i].1
            })
            .collect();
        prop_assert_eq!(merged, whole_keys);
    }
}

const AUTOSCALE_7000: &str = r#"{"maxThroughput": 7000, "autoUpgradePolicy": {"throughputPolicy": {"incrementPercent": 0}}}"#;

#[test]
fn offers_are_provisioned_at_creation_read_queried_and_replaced() {
    let gw = setup();
    let (r, manual) = create_coll_with(&gw, "m", &[("x-ms-offer-throughput", "10100")]);
    assert_eq!(r.status, 201, "{manual}");
    let (r, auto) = create_coll_with(
        &gw,
        "a",
        &[("x-ms-cosmos-offer-autopilot-settings", AUTOSCALE_7000)],
    );
    assert_eq!(r.status, 201, "{auto}");
    let (r, db) = call(
        &gw,
        signed(
            "POST",
            "/dbs",
            &[("x-ms-offer-throughput", "1000")],
            br#"{"id":"shared"}"#,
        ),
    );
    assert_eq!(r.status, 201, "{db}");

    // The offer has the service's shape and names its owner by `_self`.
    let found = offers_of(&gw, manual["_self"].as_str().unwrap());
    let [offer] = found.as_slice() else {
        panic!("one offer for m: {found:?}")
    };
    let rid = offer["id"].as_str().unwrap();
    assert_eq!(offer["_rid"], rid);
    assert_eq!(offer["_self"], format!("offers/{rid}/"));
    assert_eq!(offer["offerVersion"], "V2");
    assert_eq!(offer["resource"], manual["_self"]);
    assert_eq!(offer["offerResourceId"], manual["_rid"]);
    assert_eq!(offer["content"], json!({"offerThroughput": 10100}));
    // Autoscale offers carry offerThroughput too (the SDKs read it).
    let found = offers_of(&gw, auto["_self"].as_str().unwrap());
    assert_eq!(
        found[0]["content"],
        json!({"offerThroughput": 700, "offerAutopilotSettings": serde_json::from_str::<Value>(AUTOSCALE_7000).unwrap()})
    );
    assert_eq!(
        offers_of(&gw, db["_self"].as_str().unwrap())[0]["content"],
        json!({"offerThroughput": 1000})
    );
    // A container created without a throughput header has no offer.
    let (_, plain) = call(&gw, signed("GET", "/dbs/d/colls/c", &[], b""));
    assert!(offers_of(&gw, plain["_self"].as_str().unwrap()).is_empty());
    let (r, feed) = call(&gw, signed("GET", "/offers", &[], b""));
    assert_eq!(r.status, 200);
    assert_eq!(feed["_count"], 3, "{feed}");

    // A point read is signed with the offer's rid lower-cased.
    let path = format!("/offers/{rid}/");
    let (r, read) = call(&gw, signed("GET", &path, &[], b""));
    assert_eq!(r.status, 200, "{read}");
    assert_eq!(&read, offer);
    if rid != rid.to_lowercase() {
        let date = httpdate::fmt_http_date(SystemTime::now());
        let mut req = signed("GET", &path, &[], b"");
        let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
        req.headers.insert(
            "authorization",
            key.authorization("GET", "offers", rid, &date)
                .parse()
                .unwrap(),
        );
        req.headers.insert("x-ms-date", date.parse().unwrap());
        assert_eq!(call(&gw, req).0.status, 401);
    }

    // A replace sends the offer back with a new content.
    let mut new = offer.clone();
    new["content"]["offerThroughput"] = json!(10200);
    let (r, replaced) = call(&gw, signed("PUT", &path, &[], new.to_string().as_bytes()));
    assert_eq!(r.status, 200, "{replaced}");
    assert_eq!(replaced["content"], json!({"offerThroughput": 10200}));
    assert_eq!(replaced["resource"], manual["_self"]);
    let (_, read) = call(&gw, signed("GET", &path, &[], b""));
    assert_eq!(read["content"]["offerThroughput"], 10200);
    let mut auto_offer = offers_of(&gw, auto["_self"].as_str().unwrap())[0].clone();
    auto_offer["content"]["offerAutopilotSettings"]["maxThroughput"] = json!(9000);
    let auto_path = format!("/offers/{}", auto_offer["id"].as_str().unwrap());
    let (r, replaced) = call(
        &gw,
        signed("PUT", &auto_path, &[], auto_offer.to_string().as_bytes()),
    );
    assert_eq!(r.status, 200, "{replaced}");
    assert_eq!(replaced["content"]["offerThroughput"], 900);
    assert_eq!(
        replaced["content"]["offerAutopilotSettings"]["maxThroughput"],
        9000
    );

    // Invalid replaces change nothing.
    let bad = [
        (
            json!({"content": {"offerThroughput": 300}}),
            400,
            "BadRequest",
            "less than required minimum throughput 400",
        ),
        (
            json!({"content": {"offerAutopilotSettings": {"maxThroughput": 4000}}}),
            400,
            "BadRequest",
            "manual and autoscale",
        ),
        (
            json!({"_rid": "other", "content": {"offerThroughput": 400}}),
            400,
            "BadRequest",
            "_rid",
        ),
        (json!({"id": rid}), 400, "BadRequest", "content"),
    ];
    for (body, status, code, needle) in bad {
        let (r, err) = call(&gw, signed("PUT", &path, &[], body.to_string().as_bytes()));
        assert_error(&r, &err, status, code, needle);
    }
    let (_, read) = call(&gw, signed("GET", &path, &[], b""));
    assert_eq!(read["content"]["offerThroughput"], 10200);
    let body = json!({"content": {"offerThroughput": 400}}).to_string();
    let (r, err) = call(&gw, signed("PUT", "/offers/nope", &[], body.as_bytes()));
    assert_error(&r, &err, 404, "NotFound", "nope");
    let (r, err) = call(&gw, signed("DELETE", &path, &[], b""));
    assert_error(&r, &err, 405, "MethodNotAllowed", "DELETE");

    // Deleting the owner deletes its offer.
    let (r, _) = call(&gw, signed("DELETE", "/dbs/d/colls/m", &[], b""));
    assert_eq!(r.status, 204);
    assert_eq!(call(&gw, signed("GET", &path, &[], b"")).0.status, 404);
    let (r, _) = call(&gw, signed("DELETE", "/dbs/shared", &[], b""));
    assert_eq!(r.status, 204);
    let (_, feed) = call(&gw, signed("GET", "/offers", &[], b""));
    assert_eq!(feed["_count"], 1, "{feed}");
}

#[test]
fn invalid_throughput_at_creation_is_400_and_creates_nothing() {
    let gw = setup();
    let cases = [
        (
            (
                "x-ms-cosmos-offer-autopilot-settings",
                r#"{"maxThroughput": -200, "autoUpgradePolicy": {"throughputPolicy": {"incrementPercent": 0}}}"#,
            ),
            "Requested throughput -200 is less than required minimum throughput 1000",
        ),
        (
            ("x-ms-cosmos-offer-autopilot-settings", "max"),
            "must be JSON",
        ),
        (
            ("x-ms-offer-throughput", "300"),
            "Requested throughput 300 is less than required minimum throughput 400",
        ),
        (("x-ms-offer-throughput", "450"), "multiple of 100"),
        (("x-ms-offer-throughput", "lots"), "whole number"),
    ];
    for (header, needle) in cases {
        let (r, err) = create_coll_with(&gw, "x", &[header]);
        assert_error(&r, &err, 400, "BadRequest", needle);
        let (r, err) = call(&gw, signed("POST", "/dbs", &[header], br#"{"id":"x"}"#));
        assert_error(&r, &err, 400, "BadRequest", needle);
    }
    let (r, err) = create_coll_with(
        &gw,
        "x",
        &[
            ("x-ms-offer-throughput", "400"),
            ("x-ms-cosmos-offer-autopilot-settings", AUTOSCALE_7000),
        ],
    );
    assert_error(&r, &err, 400, "BadRequest", "cannot both");
    assert_eq!(
        call(&gw, signed("GET", "/dbs/d/colls/x", &[], b""))
            .0
            .status,
        404
    );
    assert_eq!(call(&gw, signed("GET", "/dbs/x", &[], b"")).0.status, 404);
    let (_, feed) = call(&gw, signed("GET", "/offers", &[], b""));
    assert_eq!(feed["_count"], 0, "{feed}");
}

#[test]
fn offers_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (rid, coll_self) = {
        let gw = setup_on(gateway(Database::open(dir.path()).unwrap()));
        let (r, coll) = create_coll_with(&gw, "m", &[("x-ms-offer-throughput", "400")]);
        assert_eq!(r.status, 201, "{coll}");
        let coll_self = coll["_self"].as_str().unwrap().to_owned();
        let mut offer = offers_of(&gw, &coll_self)[0].clone();
        offer["content"]["offerThroughput"] = json!(800);
        let rid = offer["id"].as_str().unwrap().to_owned();
        let (r, _) = call(
            &gw,
            signed(
                "PUT",
                &format!("/offers/{rid}"),
                &[],
                offer.to_string().as_bytes(),
            ),
        );
        assert_eq!(r.status, 200);
        (rid, coll_self)
    };
    let gw = gateway(Database::open(dir.path()).unwrap());
    let (r, offer) = call(&gw, signed("GET", &format!("/offers/{rid}"), &[], b""));
    assert_eq!(r.status, 200, "{offer}");
    assert_eq!(offer["resource"], coll_self.as_str());
    assert_eq!(offer["content"], json!({"offerThroughput": 800}));
    // A new offer after the restart gets a new rid.
    let (r, _) = create_coll_with(&gw, "n", &[("x-ms-offer-throughput", "400")]);
    assert_eq!(r.status, 201);
    let (_, feed) = call(&gw, signed("GET", "/offers", &[], b""));
    let rids: std::collections::BTreeSet<&str> = feed["Offers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(rids.len(), 2, "{feed}");
}

#[test]
fn items_carry_etags_and_partition_key_rules() {
    let gw = setup();
    let pk = ("x-ms-documentdb-partitionkey", r#"["p1"]"#);
    let (r, doc) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs/",
            &[pk],
            br#"{"id":"a","pk":"p1"}"#,
        ),
    );
    assert_eq!(r.status, 201);
    let etag = doc["_etag"].as_str().unwrap().to_owned();
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    let token = r.header("x-ms-session-token").unwrap();
    assert!(token.starts_with("0:-1#"), "{token}");
    // The header names another key: 400/1001.
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[("x-ms-documentdb-partitionkey", r#"["p2"]"#)],
            br#"{"id":"b","pk":"p1"}"#,
        ),
    );
    assert_error(&r, &body, 400, "BadRequest", "doesn't match");
    assert_eq!(r.header("x-ms-substatus"), Some("1001"));
    // Numbers compare semantically: 5 and 5.0 are the same key.
    let (r, _) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[("x-ms-documentdb-partitionkey", "[5.0]")],
            br#"{"id":"n","pk":5}"#,
        ),
    );
    assert_eq!(r.status, 201);
    // The none partition.
    let (r, _) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[("x-ms-documentdb-partitionkey", "[{}]")],
            br#"{"id":"none"}"#,
        ),
    );
    assert_eq!(r.status, 201);
    // Malformed partition-key header.
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs/a",
            &[("x-ms-documentdb-partitionkey", "p1")],
            b"",
        ),
    );
    assert_error(&r, &body, 400, "BadRequest", "x-ms-documentdb-partitionkey");
    // If-None-Match with the current etag: 304.
    let (r, _) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs/a",
            &[pk, ("if-none-match", &etag)],
            b"",
        ),
    );
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    // Upsert: 200 when it replaced, 201 when it created.
    let upsert = ("x-ms-documentdb-is-upsert", "True");
    let (r, _) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[pk, upsert],
            br#"{"id":"a","pk":"p1","v":2}"#,
        ),
    );
    assert_eq!(r.status, 200);
    let (r, _) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[pk, upsert],
            br#"{"id":"z","pk":"p1"}"#,
        ),
    );
    assert_eq!(r.status, 201);
    // Stale If-Match: 412.
    let (r, body) = call(
        &gw,
        signed(
            "PUT",
            "/dbs/d/colls/c/docs/a",
            &[pk, ("if-match", &etag)],
            br#"{"id":"a","pk":"p1"}"#,
        ),
    );
    assert_error(&r, &body, 412, "PreconditionFailed", "");
    // Duplicate: 409; missing: 404; binary encoding: 400.
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[pk],
            br#"{"id":"a","pk":"p1"}"#,
        ),
    );
    assert_error(&r, &body, 409, "Conflict", "a");
    let (r, body) = call(&gw, signed("DELETE", "/dbs/d/colls/c/docs/q", &[pk], b""));
    assert_error(&r, &body, 404, "NotFound", "q");
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[pk],
            &[0x80, 0xed, 0x0e, 0x03],
        ),
    );
    assert_error(&r, &body, 400, "BadRequest", "binary encoding");
    let (r, _) = call(&gw, signed("DELETE", "/dbs/d/colls/c/docs/a", &[pk], b""));
    assert_eq!(r.status, 204);
    assert!(r.body.is_empty());
}

#[test]
fn computed_properties_are_validated_echoed_queried_and_replaced() {
    let gw = setup();
    let create = |body: &str| call(&gw, signed("POST", "/dbs/d/colls", &[], body.as_bytes()));
    for (bad, why) in [
        (
            r#"{"name":"cp","query":"SELECT VALUE 1 FROM c"}"#,
            "must be an array",
        ),
        (r#"[{"name":"cp"}]"#, "string query"),
        (
            r#"[{"name":"cp","query":"SELECT 1 FROM c"}]"#,
            "SELECT VALUE",
        ),
        (
            r#"[{"name":"id","query":"SELECT VALUE 1 FROM c"}]"#,
            "system property",
        ),
        (
            r#"[{"name":"cp","query":"SELECT VALUE c.a FROM c WHERE c.b"}]"#,
            "WHERE",
        ),
    ] {
        let body = format!(
            r#"{{"id":"bad","partitionKey":{{"paths":["/pk"]}},"computedProperties":{bad}}}"#
        );
        let (r, body) = create(&body);
        assert_error(
            &r,
            &body,
            400,
            "BadRequest",
            "One of the specified inputs is invalid",
        );
        assert!(body["message"].as_str().unwrap().contains(why), "{body}");
    }
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/bad", &[], b""));
    assert_eq!(r.status, 404, "nothing was created");

    let cps = json!([{"name": "cp_lower", "query": "SELECT VALUE LOWER(c.name) FROM c"}]);
    let body = json!({"id": "cp", "partitionKey": {"paths": ["/pk"]}, "computedProperties": cps});
    let (r, body) = create(&body.to_string());
    assert_eq!(r.status, 201, "{body}");
    assert_eq!(body["computedProperties"], cps);
    let (_, body) = call(&gw, signed("GET", "/dbs/d/colls/cp", &[], b""));
    assert_eq!(body["computedProperties"], cps);
    let pk = ("x-ms-documentdb-partitionkey", r#"["p"]"#);
    for (id, name) in [("a", "Ann"), ("b", "Bob")] {
        let doc = json!({"id": id, "pk": "p", "name": name}).to_string();
        let (r, body) = call(
            &gw,
            signed("POST", "/dbs/d/colls/cp/docs", &[pk], doc.as_bytes()),
        );
        assert_eq!(r.status, 201, "{body}");
        assert!(body.get("cp_lower").is_none(), "not stored: {body}");
    }
    let (status, ids) = query_ids(&gw, "cp", "SELECT * FROM c WHERE c.cp_lower = 'ann'", &[pk]);
    assert_eq!((status, ids), (200, json!(["a"])));
    let query = [
        ("x-ms-documentdb-isquery", "True"),
        ("content-type", "application/query+json"),
        pk,
    ];
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/cp/docs",
            &query,
            br#"{"query":"SELECT c.id, c.cp_lower FROM c WHERE c.id = 'b'"}"#,
        ),
    );
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["Documents"], json!([{"id": "b", "cp_lower": "bob"}]));

    // A replace is the whole definition: without computedProperties there
    // are none.
    let (r, body) = call(
        &gw,
        signed(
            "PUT",
            "/dbs/d/colls/cp",
            &[],
            br#"{"id":"cp","partitionKey":{"paths":["/pk"]}}"#,
        ),
    );
    assert_eq!(r.status, 200, "{body}");
    assert!(body.get("computedProperties").is_none(), "{body}");
    let (status, ids) = query_ids(&gw, "cp", "SELECT * FROM c WHERE c.cp_lower = 'ann'", &[pk]);
    assert_eq!((status, ids), (200, json!([])));
    let (r, body) = call(
        &gw,
        signed(
            "PUT",
            "/dbs/d/colls/cp",
            &[],
            br#"{"id":"cp","partitionKey":{"paths":["/pk"]},"computedProperties":{"name":"x"}}"#,
        ),
    );
    assert_error(
        &r,
        &body,
        400,
        "BadRequest",
        "One of the specified inputs is invalid",
    );
}

/// The service's default indexing policy, as it echoes it.
fn default_indexing_policy() -> Value {
    json!({
        "indexingMode": "consistent", "automatic": true,
        "includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/\"_etag\"/?"}]
    })
}

#[test]
fn indexing_policies_are_validated_echoed_and_replaced() {
    let gw = setup();
    let create = |body: &Value| {
        call(
            &gw,
            signed("POST", "/dbs/d/colls", &[], body.to_string().as_bytes()),
        )
    };
    let replace = |body: &Value| {
        call(
            &gw,
            signed("PUT", "/dbs/d/colls/ip", &[], body.to_string().as_bytes()),
        )
    };
    let read = || call(&gw, signed("GET", "/dbs/d/colls/ip", &[], b"")).1;
    let (_, body) = call(&gw, signed("GET", "/dbs/d/colls/c", &[], b""));
    assert_eq!(body["indexingPolicy"], default_indexing_policy());

    for (bad, why) in [
        (
            json!({"excludedPaths": [{"path": "/a"}]}),
            "The indexing path '/a' could not be accepted, failed near position '2'.",
        ),
        (
            json!({"includedPaths": [{"path": "name/?"}]}),
            "failed near position '0'",
        ),
        (
            json!({"includedPaths": [{"path": "/name/?"}]}),
            "The special mandatory indexing path \"/\" is not provided",
        ),
        (
            json!({"indexingMode": "none", "includedPaths": [{"path": "/*"}]}),
            "included paths",
        ),
        (
            json!({"compositeIndexes": [[{"path": "/a", "order": "ascending"}]]}),
            "at least two paths",
        ),
        (
            json!({"compositeIndexes": [[{"path": "/a/*"}, {"path": "/b"}]]}),
            "The indexing path '/a/*'",
        ),
        (
            json!({"compositeIndexes": [[{"path": "/a", "order": "up"}, {"path": "/b"}]]}),
            "\"ascending\" or \"descending\"",
        ),
        (json!({"indexingMode": "sometimes"}), "indexingMode"),
    ] {
        let (r, body) =
            create(&json!({"id": "ip", "partitionKey": {"paths": ["/pk"]}, "indexingPolicy": bad}));
        assert_error(&r, &body, 400, "BadRequest", why);
        let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/ip", &[], b""));
        assert_eq!(r.status, 404, "nothing was created");
    }

    // What the Python SDK's tests send: legacy per-path indexes (dropped),
    // a quoted label, composite and spatial indexes; _etag is added.
    let given = json!({
        "automatic": true, "indexingMode": "Consistent",
        "includedPaths": [{"path": "/*", "indexes": [{"kind": "Hash", "dataType": "Number", "precision": 2}]}],
        "excludedPaths": [{"path": "/\"systemMetadata\"/*"}],
        "compositeIndexes": [[{"path": "/path1", "order": "ascending"}, {"path": "/path2", "order": "descending"}]],
        "spatialIndexes": [{"path": "/path0/*", "types": ["Point", "Polygon"]}]
    });
    let echoed = json!({
        "indexingMode": "consistent", "automatic": true,
        "includedPaths": [{"path": "/*"}],
        "excludedPaths": [{"path": "/\"systemMetadata\"/*"}, {"path": "/\"_etag\"/?"}],
        "compositeIndexes": given["compositeIndexes"],
        "spatialIndexes": given["spatialIndexes"]
    });
    let (r, body) =
        create(&json!({"id": "ip", "partitionKey": {"paths": ["/pk"]}, "indexingPolicy": given}));
    assert_eq!(r.status, 201, "{body}");
    assert_eq!(body["indexingPolicy"], echoed);
    assert_eq!(read()["indexingPolicy"], echoed);
    let (_, list) = call(&gw, signed("GET", "/dbs/d/colls", &[], b""));
    let listed = list["DocumentCollections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "ip")
        .unwrap();
    assert_eq!(listed["indexingPolicy"], echoed);

    // A replace sends the definition back, as the SDKs do, with a new policy.
    let mut definition = read();
    // Time to live on under mode none is refused whole: nothing changes.
    let mut both = definition.clone();
    both["indexingPolicy"] = json!({"indexingMode": "none"});
    both["defaultTtl"] = json!(60);
    let (r, body) = replace(&both);
    assert_error(&r, &body, 400, "BadRequest", "time to live");
    assert!(read().get("defaultTtl").is_none());
    assert_eq!(read()["indexingPolicy"], echoed);
    definition["indexingPolicy"] = json!({"indexingMode": "none", "automatic": false});
    let (r, body) = replace(&definition);
    assert_eq!(r.status, 200, "{body}");
    let none = json!({"indexingMode": "none", "automatic": false, "includedPaths": [], "excludedPaths": []});
    assert_eq!(body["indexingPolicy"], none);
    assert_eq!(read()["indexingPolicy"], none);
    // Refused on replace as on create; the policy stays.
    definition["indexingPolicy"] = json!({"compositeIndexes": [[{"path": "/a"}]]});
    let (r, body) = replace(&definition);
    assert_error(&r, &body, 400, "BadRequest", "at least two paths");
    assert_eq!(read()["indexingPolicy"], none);
    // Time to live needs an index: on with mode none is refused; turning
    // both on in one replace works, whichever order they take effect in.
    definition["indexingPolicy"] = none.clone();
    definition["defaultTtl"] = json!(60);
    let (r, body) = replace(&definition);
    assert_eq!(r.status, 400, "{body}");
    definition["indexingPolicy"] = Value::Null;
    let (r, body) = replace(&definition);
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["defaultTtl"], 60);
    assert_eq!(body["indexingPolicy"], default_indexing_policy());
    definition["indexingPolicy"] = none.clone();
    definition.as_object_mut().unwrap().remove("defaultTtl");
    let (r, body) = replace(&definition);
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["indexingPolicy"], none);
    assert!(body.get("defaultTtl").is_none(), "{body}");
}

#[test]
fn indexing_policies_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let policy = json!({"excludedPaths": [{"path": "/body/*"}]});
    let echoed = json!({
        "indexingMode": "consistent", "automatic": true,
        "includedPaths": [{"path": "/*"}],
        "excludedPaths": [{"path": "/body/*"}, {"path": "/\"_etag\"/?"}]
    });
    {
        let db = Database::open(dir.path()).unwrap();
        let gw = gateway(db.clone());
        call(&gw, signed("POST", "/dbs", &[], br#"{"id":"d"}"#));
        for id in ["kept", "older"] {
            let body =
                json!({"id": id, "partitionKey": {"paths": ["/pk"]}, "indexingPolicy": policy});
            let (r, _) = call(
                &gw,
                signed("POST", "/dbs/d/colls", &[], body.to_string().as_bytes()),
            );
            assert_eq!(r.status, 201);
        }
        // A container of a server from before the engine kept policies:
        // only the registry's definition has it.
        let older = db
            .containers()
            .into_iter()
            .find(|c| c.id.ends_with("-older"))
            .unwrap();
        db.container(&older.id)
            .unwrap()
            .set_indexing_policy(partita::IndexingPolicy::default())
            .unwrap();
    }
    let gw = gateway(Database::open(dir.path()).unwrap());
    for id in ["kept", "older"] {
        let (r, body) = call(&gw, signed("GET", &format!("/dbs/d/colls/{id}"), &[], b""));
        assert_eq!(r.status, 200);
        assert_eq!(body["indexingPolicy"], echoed, "{id}");
    }
}

#[test]
fn cross_partition_value_aggregates_answer_as_the_sdks_aggregate_them() {
    let gw = setup();
    create_coll(&gw, "agg");
    for (id, pk, n) in [("a", "p", json!(1)), ("b", "q", json!("x"))] {
        let doc = json!({"id": id, "pk": pk, "n": n}).to_string();
        let key = format!(r#"["{pk}"]"#);
        let headers = [("x-ms-documentdb-partitionkey", key.as_str())];
        let (r, body) = call(
            &gw,
            signed("POST", "/dbs/d/colls/agg/docs", &headers, doc.as_bytes()),
        );
        assert_eq!(r.status, 201, "{body}");
    }
    let run = |sql: &str, extra: &[(&str, &str)]| {
        let mut headers = vec![
            ("x-ms-documentdb-isquery", "True"),
            ("content-type", "application/query+json"),
        ];
        headers.extend_from_slice(extra);
        let body = json!({"query": sql}).to_string();
        call(
            &gw,
            signed("POST", "/dbs/d/colls/agg/docs", &headers, body.as_bytes()),
        )
    };
    let across = [("x-ms-documentdb-query-enablecrosspartition", "True")];
    // AVG over a number and a string is undefined: no row in one partition,
    // one null across partitions (what the SDKs' aggregation returns).
    let (r, body) = run("SELECT VALUE AVG(c.n) FROM c", &across);
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["Documents"], json!([null]));
    let (_, body) = run("SELECT VALUE AVG(c.n) FROM c ORDER BY c.n", &across);
    assert_eq!(body["Documents"], json!([null]));
    let (_, body) = run("SELECT VALUE SUM(c.n) FROM c WHERE IS_NUMBER(c.n)", &across);
    assert_eq!(body["Documents"], json!([1]));
    let (_, body) = run(
        "SELECT VALUE AVG(c.n) FROM c",
        &[("x-ms-documentdb-partitionkey", r#"["p"]"#)],
    );
    assert_eq!(body["Documents"], json!([1]));
    let (_, body) = run(
        "SELECT VALUE AVG(c.n) FROM c",
        &[("x-ms-documentdb-partitionkey", r#"["q"]"#)],
    );
    assert_eq!(body["Documents"], json!([]));
    // An aggregate into an object is refused across partitions even when
    // the WHERE clause pins the key, as the SDK refuses it from the plan.
    let (r, body) = run("SELECT AVG(c.n) FROM c WHERE c.pk = 'p'", &across);
    assert_error(&r, &body, 400, "BadRequest", "VALUE <AggregateFunc>");
    let (r, body) = run("SELECT AVG(c.n) FROM c WHERE c.pk = 'p'", &[]);
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["Documents"], json!([{"$1": 1}]));
}

/// A query POST to container `coll` of database `d` with the given extra
/// headers.
fn post_query(
    gw: &Gateway,
    coll: &str,
    sql: &str,
    headers: &[(&str, &str)],
) -> (WireResponse, Value) {
    let mut all = vec![
        ("x-ms-documentdb-isquery", "True"),
        ("content-type", "application/query+json"),
    ];
    all.extend_from_slice(headers);
    let body = json!({"query": sql, "parameters": []}).to_string();
    call(
        gw,
        signed(
            "POST",
            &format!("/dbs/d/colls/{coll}/docs"),
            &all,
            body.as_bytes(),
        ),
    )
}

/// A query POST with the given extra headers; the ids it returns, sorted.
fn query_ids(gw: &Gateway, coll: &str, sql: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let (r, body) = post_query(gw, coll, sql, headers);
    if r.status != 200 {
        return (r.status, body);
    }
    let mut ids: Vec<String> = body["Documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    (200, json!(ids))
}

#[test]
fn hierarchical_partition_keys_over_the_wire() {
    let gw = setup();
    let definition = json!({"id": "h", "partitionKey":
        {"paths": ["/state", "/city", "/zipcode"], "kind": "MultiHash", "version": 2}});
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls",
            &[],
            definition.to_string().as_bytes(),
        ),
    );
    assert_eq!(r.status, 201, "{body}");
    assert_eq!(body["partitionKey"], definition["partitionKey"]);
    let (_, body) = call(&gw, signed("GET", "/dbs/d/colls/h", &[], b""));
    assert_eq!(body["partitionKey"], definition["partitionKey"]);
    for (id, state, city, zip) in [
        ("1", "CA", "Oxnard", "93033"),
        ("2", "CA", "Oxnard", "93030"),
        ("3", "CA", "Ojai", "93023"),
        ("4", "WA", "Seattle", "98101"),
    ] {
        let header = json!([state, city, zip]).to_string();
        let doc = json!({"id": id, "state": state, "city": city, "zipcode": zip});
        let (r, body) = call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/h/docs",
                &[("x-ms-documentdb-partitionkey", &header)],
                doc.to_string().as_bytes(),
            ),
        );
        assert_eq!(r.status, 201, "{body}");
    }
    // Point read with the full key; a prefix is 400/1001.
    let full = ("x-ms-documentdb-partitionkey", r#"["CA","Oxnard","93033"]"#);
    let (r, body) = call(&gw, signed("GET", "/dbs/d/colls/h/docs/1", &[full], b""));
    assert_eq!((r.status, body["id"].as_str()), (200, Some("1")));
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/h/docs/1",
            &[("x-ms-documentdb-partitionkey", r#"["CA"]"#)],
            b"",
        ),
    );
    assert_error(&r, &body, 400, "BadRequest", "full key");
    assert_eq!(r.header("x-ms-substatus"), Some("1001"));
    // A missing level is undefined, which the JSON null Python sends for
    // it does not match: 400/1001.
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/h/docs",
            &[("x-ms-documentdb-partitionkey", r#"[null,"Vancouver",null]"#)],
            br#"{"id":"v","city":"Vancouver"}"#,
        ),
    );
    assert_error(&r, &body, 400, "BadRequest", "doesn't match");
    assert_eq!(r.header("x-ms-substatus"), Some("1001"));
    // Too many levels.
    let (r, _) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/h/docs/1",
            &[(
                "x-ms-documentdb-partitionkey",
                r#"["CA","Oxnard","93033","x"]"#,
            )],
            b"",
        ),
    );
    assert_eq!(r.status, 400);
    // A full-key query, and prefix queries the way Python sends them: no
    // partition key, a range id and the prefix's EPK range.
    assert_eq!(
        query_ids(&gw, "h", "SELECT * FROM c", &[full]),
        (200, json!(["1"]))
    );
    let prefix = |start: &str| {
        let end = format!("{start}FF");
        let headers = [
            ("x-ms-documentdb-partitionkeyrangeid", "0"),
            ("x-ms-read-key-type", "EffectivePartitionKeyRange"),
            ("x-ms-start-epk", start),
            ("x-ms-end-epk", end.as_str()),
        ];
        query_ids(&gw, "h", "SELECT * FROM c", &headers)
    };
    let ca_epk = partita_server::effective_partition_key(&partita::PartitionKey::from("CA"));
    let oxnard =
        partita_server::effective_partition_key(&partita::PartitionKey::multi(["CA", "Oxnard"]));
    assert_eq!(prefix(&ca_epk), (200, json!(["1", "2", "3"])));
    assert_eq!(prefix(&oxnard), (200, json!(["1", "2"])));
    let nowhere = partita_server::effective_partition_key(&partita::PartitionKey::from("NV"));
    assert_eq!(prefix(&nowhere), (200, json!([])));
    // The whole ring is every partition.
    let whole = [
        ("x-ms-documentdb-partitionkeyrangeid", "0"),
        ("x-ms-start-epk", ""),
        ("x-ms-end-epk", "FF"),
    ];
    assert_eq!(
        query_ids(&gw, "h", "SELECT * FROM c", &whole),
        (200, json!(["1", "2", "3", "4"]))
    );
    // No key, no range, no cross-partition flag (Python's partition_key=[]):
    // the service's 400, unless the WHERE clause pins every level.
    let (status, body) = query_ids(&gw, "h", "SELECT * FROM c", &[]);
    assert_eq!(status, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("Cross partition query is required but disabled"),
        "{body}"
    );
    assert_eq!(
        query_ids(
            &gw,
            "h",
            "SELECT * FROM r WHERE r.state = 'CA' AND r.city = 'Ojai' AND r.zipcode = '93023'",
            &[]
        ),
        (200, json!(["3"]))
    );
    assert_eq!(
        query_ids(
            &gw,
            "h",
            "SELECT * FROM c",
            &[("x-ms-documentdb-query-enablecrosspartition", "True")]
        ),
        (200, json!(["1", "2", "3", "4"]))
    );
    // So does an ordinary container, as the service does whatever its
    // number of physical partitions, unless the query pins the key.
    assert_eq!(query_ids(&gw, "c", "SELECT * FROM c", &[]).0, 400);
    assert_eq!(
        query_ids(&gw, "c", "SELECT * FROM c WHERE c.pk = 'x'", &[]).0,
        200
    );
    // The change feed of a prefix's EPK range.
    let end = format!("{oxnard}FF");
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/h/docs",
            &[
                ("a-im", "Incremental Feed"),
                ("x-ms-documentdb-partitionkeyrangeid", "0"),
                ("x-ms-start-epk", &oxnard),
                ("x-ms-end-epk", &end),
            ],
            b"",
        ),
    );
    assert_eq!(r.status, 200);
    let mut ids: Vec<&str> = body["Documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["1", "2"]);
}

#[test]
fn hash_v1_containers_are_scoped_by_hash_v1_epks() {
    let gw = setup();
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls",
            &[],
            br#"{"id":"v1","partitionKey":{"paths":["/pk"],"kind":"Hash","version":1}}"#,
        ),
    );
    assert_eq!(r.status, 201, "{body}");
    for (id, pk) in [("1", "p1"), ("2", "p1"), ("3", "other")] {
        let header = format!(r#"["{pk}"]"#);
        let doc = format!(r#"{{"id":"{id}","pk":"{pk}"}}"#);
        let (r, _) = call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/v1/docs",
                &[("x-ms-documentdb-partitionkey", &header)],
                doc.as_bytes(),
            ),
        );
        assert_eq!(r.status, 201);
    }
    // The Python SDK's Hash V1 EPK of "p1", as a point feed range.
    let p1 = "05C1CFEDCF076008713200";
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/v1/docs",
            &[
                ("a-im", "Incremental Feed"),
                ("x-ms-documentdb-partitionkeyrangeid", "0"),
                ("x-ms-start-epk", p1),
                ("x-ms-end-epk", p1),
            ],
            b"",
        ),
    );
    assert_eq!(r.status, 200, "{body}");
    let mut ids: Vec<&str> = body["Documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["1", "2"]);
}

#[test]
fn responses_name_their_owner_in_alt_content_path() {
    let gw = setup();
    let alt = |r: &WireResponse| r.header("x-ms-alt-content-path").map(str::to_owned);
    let (r, coll) = call(&gw, signed("GET", "/dbs/d/colls/c", &[], b""));
    assert_eq!(alt(&r).as_deref(), Some("dbs/d"));
    let pk = [("x-ms-documentdb-partitionkey", r#"["p"]"#)];
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs/",
            &pk,
            br#"{"id":"a","pk":"p"}"#,
        ),
    );
    assert_eq!(r.status, 201);
    assert_eq!(alt(&r).as_deref(), Some("dbs/d/colls/c"));
    // With the body's _self (4th segment: the container's rid) the Python
    // SDK keys its session tokens by container.
    assert_eq!(
        body["_self"].as_str().unwrap().split('/').nth(3),
        coll["_rid"].as_str(),
        "{body}"
    );
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/a", &pk, b""));
    assert_eq!(alt(&r).as_deref(), Some("dbs/d/colls/c"));
    let (r, _) = call(&gw, signed("DELETE", "/dbs/d/colls/c/docs/a", &pk, b""));
    assert_eq!(r.status, 204);
    assert_eq!(alt(&r).as_deref(), Some("dbs/d/colls/c"));
    // A procedure's result is not a resource: no owner path.
    let (r, _) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/sprocs",
            &[],
            br#"{"id":"one","body":"function one() { getContext().getResponse().setBody(1); }"}"#,
        ),
    );
    assert_eq!(r.status, 201);
    assert_eq!(alt(&r).as_deref(), Some("dbs/d/colls/c"));
    let (r, body) = call(&gw, signed("POST", "/dbs/d/colls/c/sprocs/one", &pk, b"[]"));
    assert_eq!((r.status, body), (200, json!(1)));
    assert_eq!(alt(&r), None);
    // Errors carry none either.
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/zzz", &pk, b""));
    assert_eq!(r.status, 404);
    assert_eq!(alt(&r), None);
}

#[test]
fn conflicts_feed_is_empty_and_conflicts_are_not_found() {
    let gw = setup();
    let (r, body) = call(&gw, signed("GET", "/dbs/d/colls/c/conflicts", &[], b""));
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["Conflicts"], json!([]));
    assert_eq!(body["_count"], 0);
    let query = br#"{"query":"SELECT * FROM c","parameters":[]}"#;
    let headers = [
        ("x-ms-documentdb-isquery", "True"),
        ("content-type", "application/query+json"),
    ];
    let (r, body) = call(
        &gw,
        signed("POST", "/dbs/d/colls/c/conflicts", &headers, query),
    );
    assert_error(
        &r,
        &body,
        400,
        "BadRequest",
        "Cross partition query is required",
    );
    for scope in [
        ("x-ms-documentdb-query-enablecrosspartition", "True"),
        ("x-ms-documentdb-partitionkey", r#"["p"]"#),
    ] {
        let headers = [headers[0], headers[1], scope];
        let (r, body) = call(
            &gw,
            signed("POST", "/dbs/d/colls/c/conflicts", &headers, query),
        );
        assert_eq!((r.status, &body["Conflicts"]), (200, &json!([])), "{body}");
    }
    for method in ["GET", "DELETE"] {
        let (r, body) = call(&gw, signed(method, "/dbs/d/colls/c/conflicts/x", &[], b""));
        assert_error(&r, &body, 404, "NotFound", "conflict \"x\"");
    }
}

#[test]
fn container_reads_report_usage_and_statistics_when_asked() {
    let gw = setup();
    for id in ["a", "b"] {
        let doc = format!(r#"{{"id":"{id}","pk":"p","text":"hello"}}"#);
        let (r, _) = call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/c/docs",
                &[("x-ms-documentdb-partitionkey", r#"["p"]"#)],
                doc.as_bytes(),
            ),
        );
        assert_eq!(r.status, 201);
    }
    let (r, body) = call(&gw, signed("GET", "/dbs/d/colls/c", &[], b""));
    assert_eq!(r.status, 200);
    assert!(r.header("x-ms-resource-usage").is_none());
    assert!(body.get("statistics").is_none());
    let asked = [
        ("x-ms-documentdb-populatequotainfo", "True"),
        ("x-ms-documentdb-populatepartitionstatistics", "True"),
    ];
    let (r, body) = call(&gw, signed("GET", "/dbs/d/colls/c", &asked, b""));
    assert_eq!(r.status, 200);
    let usage = r.header("x-ms-resource-usage").unwrap();
    assert!(usage.contains("documentsCount=2;"), "{usage}");
    assert!(r.header("x-ms-resource-quota").is_some());
    assert_eq!(
        r.header("x-ms-documentdb-collection-index-transformation-progress"),
        Some("100")
    );
    assert!(
        r.header("x-ms-documentdb-collection-lazy-indexing-progress")
            .is_none()
    );
    assert_eq!(body["statistics"][0]["documentCount"], 2, "{body}");
}

#[test]
fn an_object_at_the_key_path_files_the_document_under_the_undefined_key() {
    // As on Cosmos DB, where the SDKs send `[{}]` for such a document.
    let gw = setup();
    let doc = br#"{"id":"o","pk":{"nested":"x"}}"#;
    let undefined = [("x-ms-documentdb-partitionkey", "[{}]")];
    let (r, body) = call(&gw, signed("POST", "/dbs/d/colls/c/docs", &undefined, doc));
    assert_eq!(r.status, 201, "{body}");
    let (r, body) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/o", &undefined, b""));
    assert_eq!((r.status, &body["pk"]), (200, &json!({"nested": "x"})));
    // Under a scalar key it is not.
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[("x-ms-documentdb-partitionkey", r#"["x"]"#)],
            doc,
        ),
    );
    assert_eq!(r.status, 400, "{body}");
}

#[test]
fn the_all_versions_feed_lists_every_change_and_needs_a_retention_policy() {
    let gw = setup();
    let full = ("a-im", "Full-Fidelity Feed");
    let (r, body) = call(&gw, signed("GET", "/dbs/d/colls/c/docs", &[full], b""));
    assert_error(
        &r,
        &body,
        400,
        "BadRequest",
        "All Versions and Deletes change feed must be enabled",
    );
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls",
            &[],
            br#"{"id":"h","partitionKey":{"paths":["/pk"],"kind":"Hash"},"changeFeedPolicy":{"retentionDuration":10}}"#,
        ),
    );
    assert_eq!(r.status, 201, "{body}");
    let (r, _) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/h/docs",
            &[full, ("if-none-match", "*")],
            b"",
        ),
    );
    assert_eq!(r.status, 304);
    let from_now = r.header("etag").unwrap().to_owned();
    let in_p = [("x-ms-documentdb-partitionkey", r#"["p"]"#)];
    for (method, path, body) in [
        (
            "POST",
            "/dbs/d/colls/h/docs",
            r#"{"id":"x","pk":"p","n":1}"#,
        ),
        (
            "PUT",
            "/dbs/d/colls/h/docs/x",
            r#"{"id":"x","pk":"p","n":2}"#,
        ),
        ("DELETE", "/dbs/d/colls/h/docs/x", ""),
    ] {
        let (r, body) = call(&gw, signed(method, path, &in_p, body.as_bytes()));
        assert!(r.status < 300, "{method} {body}");
    }
    let (r, _) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/h/docs",
            &[("x-ms-documentdb-partitionkey", r#"["q"]"#)],
            br#"{"id":"y","pk":"q"}"#,
        ),
    );
    assert_eq!(r.status, 201);
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/h/docs",
            &[full, ("if-none-match", &from_now)],
            b"",
        ),
    );
    assert_eq!(r.status, 200, "{body}");
    let entries = body["Documents"].as_array().unwrap();
    let ops: Vec<&str> = entries
        .iter()
        .map(|e| e["metadata"]["operationType"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["create", "replace", "delete", "create"]);
    assert_eq!(
        entries[1]["current"]["n"], 2,
        "every version, not the latest"
    );
    assert_eq!(entries[2]["current"], json!({}));
    assert_eq!(entries[2]["metadata"]["id"], "x");
    assert_eq!(entries[2]["metadata"]["partitionKey"], json!({"pk": "p"}));
    let lsns: Vec<u64> = entries
        .iter()
        .map(|e| e["metadata"]["lsn"].as_u64().unwrap())
        .collect();
    assert!(lsns.windows(2).all(|w| w[0] < w[1]), "{lsns:?}");
    assert!(
        entries
            .iter()
            .all(|e| e["metadata"]["crts"].as_u64() > Some(0))
    );
    // Scoped to one logical partition.
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/h/docs",
            &[full, ("if-none-match", &from_now), in_p[0]],
            b"",
        ),
    );
    assert_eq!(r.status, 200);
    assert_eq!(body["Documents"].as_array().unwrap().len(), 3, "{body}");
    // Caught up: 304 at the returned etag.
    let etag = r.header("etag").unwrap().to_owned();
    let (r, _) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/h/docs",
            &[full, ("if-none-match", &etag)],
            b"",
        ),
    );
    assert_eq!(r.status, 304);
}

#[test]
fn object_aggregates_are_refused_across_partitions_only() {
    let gw = setup();
    let cross = [("x-ms-documentdb-query-enablecrosspartition", "True")];
    let pk = [("x-ms-documentdb-partitionkey", r#"["p"]"#)];
    let run = |sql: &str, headers: &[(&str, &str)]| {
        let mut all = vec![
            ("x-ms-documentdb-isquery", "True"),
            ("content-type", "application/query+json"),
        ];
        all.extend_from_slice(headers);
        let body = json!({"query": sql, "parameters": []}).to_string();
        call(
            &gw,
            signed("POST", "/dbs/d/colls/c/docs", &all, body.as_bytes()),
        )
    };
    for sql in ["SELECT COUNT(1) FROM c", "SELECT COUNT(1) + 5 AS n FROM c"] {
        let (r, body) = run(sql, &cross);
        assert_error(
            &r,
            &body,
            400,
            "BadRequest",
            "only supports 'VALUE <AggregateFunc>'",
        );
        assert_eq!(run(sql, &pk).0.status, 200, "{sql} in one partition");
    }
    // With cross-partition queries enabled the SDK refuses it even when the
    // WHERE clause pins the key (test_aggregate's `SELECT AVG(r.field) FROM r
    // WHERE r.key = '...'` expects the error); without the header the
    // service routes it to the one partition.
    let (r, body) = run("SELECT COUNT(1) FROM c WHERE c.pk = 'p'", &cross);
    assert_error(
        &r,
        &body,
        400,
        "BadRequest",
        "only supports 'VALUE <AggregateFunc>'",
    );
    for (sql, headers) in [
        ("SELECT VALUE COUNT(1) FROM c", &cross[..]),
        ("SELECT COUNT(1) FROM c WHERE c.pk = 'p'", &[][..]),
        (
            "SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk",
            &cross[..],
        ),
    ] {
        let (r, body) = run(sql, headers);
        assert_eq!(r.status, 200, "{sql}: {body}");
    }
}

#[test]
fn queries_report_metrics_and_index_use_when_asked() {
    let gw = setup();
    for i in 0..3 {
        let body = format!(r#"{{"id":"i{i}","pk":"p","n":{i}}}"#);
        let (r, _) = call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/c/docs",
                &[("x-ms-documentdb-partitionkey", r#"["p"]"#)],
                body.as_bytes(),
            ),
        );
        assert_eq!(r.status, 201);
    }
    let query = |extra: &[(&str, &str)]| {
        let mut headers = vec![
            ("x-ms-documentdb-isquery", "True"),
            ("content-type", "application/query+json"),
        ];
        headers.extend_from_slice(extra);
        let body = br#"{"query":"SELECT * FROM c WHERE c.n > 0","parameters":[]}"#;
        call(&gw, signed("POST", "/dbs/d/colls/c/docs", &headers, body)).0
    };
    let pk = ("x-ms-documentdb-partitionkey", r#"["p"]"#);
    let r = query(&[pk]);
    assert!(r.header("x-ms-documentdb-query-metrics").is_none());
    assert!(r.header("x-ms-cosmos-index-utilization").is_none());
    let r = query(&[
        pk,
        ("x-ms-documentdb-populatequerymetrics", "True"),
        ("x-ms-cosmos-populateindexmetrics", "True"),
    ]);
    let metrics: std::collections::HashMap<&str, &str> = r
        .header("x-ms-documentdb-query-metrics")
        .unwrap()
        .split(';')
        .map(|kv| kv.split_once('=').unwrap())
        .collect();
    assert_eq!(metrics["retrievedDocumentCount"], "3");
    assert_eq!(metrics["outputDocumentCount"], "2");
    let decoded = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        r.header("x-ms-cosmos-index-utilization").unwrap(),
    )
    .unwrap();
    let index: Value = serde_json::from_slice(&decoded).unwrap();
    assert_eq!(
        index["UtilizedSingleIndexes"][0]["IndexSpec"], "/pk/?",
        "{index}"
    );
    assert_eq!(index["PotentialCompositeIndexes"], json!([]));
}

/// `x-ms-cosmos-index-utilization` (base64 of JSON, as the Python SDK
/// decodes it).
fn index_utilization(r: &WireResponse) -> Value {
    let header = r.header("x-ms-cosmos-index-utilization").unwrap();
    let decoded =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, header).unwrap();
    serde_json::from_slice(&decoded).unwrap()
}

/// `x-ms-documentdb-query-metrics` as `key -> value`.
fn query_metrics(r: &WireResponse) -> std::collections::HashMap<String, String> {
    r.header("x-ms-documentdb-query-metrics")
        .unwrap()
        .split(';')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

/// The index metrics name the indexes a page read (the range index's,
/// across partitions; the partition key's, in one partition), the
/// excluded paths that would have served its conditions, and the
/// composite index of an ORDER BY, present or missing; the query metrics
/// count what the index chose. On SQLite and in memory alike.
#[test]
fn index_metrics_name_the_indexes_used_and_those_that_would_help() {
    let dir = tempfile::tempdir().unwrap();
    index_metrics_on(Database::open(dir.path()).unwrap());
}

/// [`index_metrics_name_the_indexes_used_and_those_that_would_help`] on
/// `partita serve --in-memory`'s store.
#[test]
fn index_metrics_in_memory_are_those_of_a_durable_store() {
    index_metrics_on(Database::in_memory());
}

fn index_metrics_on(db: Database) {
    let gw = setup_on(gateway(db));
    let definition = json!({
        "id": "i",
        "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
        "indexingPolicy": {
            "excludedPaths": [{"path": "/body/*"}],
            "compositeIndexes": [[{"path": "/a"}, {"path": "/b", "order": "descending"}]],
        },
    });
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls",
            &[],
            definition.to_string().as_bytes(),
        ),
    );
    assert_eq!(r.status, 201, "{body}");
    for i in 0..6 {
        let pk = format!(r#"["p{}"]"#, i % 3);
        let doc = json!({"id": format!("i{i}"), "pk": format!("p{}", i % 3), "n": i,
                         "a": i % 2, "b": i, "body": {"text": format!("t{i}")}});
        let (r, body) = call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/i/docs",
                &[("x-ms-documentdb-partitionkey", &pk)],
                doc.to_string().as_bytes(),
            ),
        );
        assert_eq!(r.status, 201, "{body}");
    }
    let query = |sql: &str, extra: &[(&str, &str)]| {
        let mut headers = vec![
            ("x-ms-documentdb-isquery", "True"),
            ("content-type", "application/query+json"),
            ("x-ms-cosmos-populateindexmetrics", "True"),
            ("x-ms-documentdb-populatequerymetrics", "True"),
        ];
        headers.extend_from_slice(extra);
        let body = json!({"query": sql, "parameters": []}).to_string();
        let (r, body) = call(
            &gw,
            signed("POST", "/dbs/d/colls/i/docs", &headers, body.as_bytes()),
        );
        assert_eq!(r.status, 200, "{sql}: {body}");
        (r, body)
    };
    let across = ("x-ms-documentdb-query-enablecrosspartition", "True");
    let in_p1 = ("x-ms-documentdb-partitionkey", r#"["p1"]"#);

    // (a) Across partitions, an equality on an included path: the range
    // index chose the one document read.
    let (r, body) = query("SELECT * FROM c WHERE c.n = 4", &[across]);
    assert_eq!(body["Documents"].as_array().unwrap().len(), 1);
    let index = index_utilization(&r);
    assert_eq!(
        index["UtilizedSingleIndexes"],
        json!([{"FilterExpression": "(ROOT.n = 4)", "IndexSpec": "/n/?", "FilterPreciseSet": true,
                "IndexPreciseSet": true, "IndexImpactScore": "High"}]),
        "{index}"
    );
    assert_eq!(index["PotentialSingleIndexes"], json!([]));
    assert_eq!(index["UtilizedCompositeIndexes"], json!([]));
    assert_eq!(index["PotentialCompositeIndexes"], json!([]));
    let metrics = query_metrics(&r);
    assert_eq!(metrics["retrievedDocumentCount"], "1");
    assert_eq!(metrics["outputDocumentCount"], "1");
    assert_eq!(metrics["indexUtilizationRatio"], "1.00");
    // In one logical partition the query scans it: only the partition
    // key's index is utilized.
    let (r, _) = query("SELECT * FROM c WHERE c.n = 4", &[in_p1]);
    let index = index_utilization(&r);
    let specs: Vec<&Value> = index["UtilizedSingleIndexes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["IndexSpec"])
        .collect();
    assert_eq!(specs, [&json!("/pk/?")], "{index}");
    assert_eq!(query_metrics(&r)["retrievedDocumentCount"], "2");
    assert_eq!(query_metrics(&r)["indexUtilizationRatio"], "0.50");

    // (b) A filter on a path the policy excludes: that index would help,
    // and the query scans.
    let (r, body) = query("SELECT * FROM c WHERE c.body.text = 't2'", &[across]);
    assert_eq!(body["Documents"].as_array().unwrap().len(), 1);
    let index = index_utilization(&r);
    assert_eq!(index["UtilizedSingleIndexes"], json!([]), "{index}");
    assert_eq!(
        index["PotentialSingleIndexes"],
        json!([{"FilterExpression": "(ROOT.body.text = \"t2\")", "IndexSpec": "/body/text/?",
                "FilterPreciseSet": true, "IndexPreciseSet": false, "IndexImpactScore": "High"}]),
        "{index}"
    );
    assert_eq!(query_metrics(&r)["retrievedDocumentCount"], "6");

    // (c) An ORDER BY on two paths that the policy's composite index
    // serves (all directions reversed), and one it does not: refused, as
    // on the service. An equality with an ORDER BY would want the
    // composite index of both paths.
    let (r, _) = query("SELECT * FROM c ORDER BY c.a DESC, c.b ASC", &[in_p1]);
    let index = index_utilization(&r);
    assert_eq!(
        index["UtilizedCompositeIndexes"],
        json!([{"IndexSpecs": ["/a ASC", "/b DESC"], "IndexPreciseSet": true, "IndexImpactScore": "High"}]),
        "{index}"
    );
    assert_eq!(index["PotentialCompositeIndexes"], json!([]));
    let refused = json!({"query": "SELECT * FROM c ORDER BY c.b, c.n", "parameters": []});
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/i/docs",
            &[
                ("x-ms-documentdb-isquery", "True"),
                ("content-type", "application/query+json"),
                ("x-ms-cosmos-populateindexmetrics", "True"),
                in_p1,
            ],
            refused.to_string().as_bytes(),
        ),
    );
    assert_error(
        &r,
        &body,
        400,
        "BadRequest",
        "corresponding composite index",
    );
    let (r, _) = query("SELECT * FROM c WHERE c.n = 1 ORDER BY c.b DESC", &[in_p1]);
    let index = index_utilization(&r);
    assert_eq!(
        index["PotentialCompositeIndexes"],
        json!([{"IndexSpecs": ["/n DESC", "/b DESC"], "IndexPreciseSet": false, "IndexImpactScore": "High"}]),
        "{index}"
    );
    assert_eq!(index["UtilizedCompositeIndexes"], json!([]));

    // The .NET SDK asks with `-V2` and reads percent-encoded JSON of the
    // newer shape.
    let (r, _) = query(
        "SELECT * FROM c WHERE c.n = 4 AND c.body.text = 't4'",
        &[across, ("x-ms-cosmos-populateindexmetrics-V2", "True")],
    );
    let header = r.header("x-ms-cosmos-index-utilization").unwrap();
    let decoded: Value = serde_json::from_str(
        &percent_encoding::percent_decode_str(header)
            .decode_utf8()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        decoded,
        json!({
            "UtilizedIndexes": {"SingleIndexes": [{"IndexSpec": "/n/?"}], "CompositeIndexes": []},
            "PotentialIndexes": {
                "SingleIndexes": [{"IndexSpec": "/body/text/?", "IndexImpactScore": "High"}],
                "CompositeIndexes": [],
            },
        })
    );

    // (d) Nothing unless asked.
    let body = json!({"query": "SELECT * FROM c WHERE c.n = 4", "parameters": []});
    let (r, _) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/i/docs",
            &[
                ("x-ms-documentdb-isquery", "True"),
                ("content-type", "application/query+json"),
                across,
            ],
            body.to_string().as_bytes(),
        ),
    );
    assert_eq!(r.status, 200);
    assert!(r.header("x-ms-cosmos-index-utilization").is_none());
    assert!(r.header("x-ms-documentdb-query-metrics").is_none());
}

#[test]
fn triggers_echo_their_type_and_operation_as_written() {
    let gw = setup();
    for (id, kind, op) in [
        ("a", "pre", "all"),
        ("b", "Post", "Update"),
        ("c", "PRE", "create"),
    ] {
        let body = json!({"id": id, "body": "function t() {}", "triggerType": kind, "triggerOperation": op});
        let (r, echoed) = call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/c/triggers",
                &[],
                body.to_string().as_bytes(),
            ),
        );
        assert_eq!(r.status, 201, "{echoed}");
        assert_eq!(
            (
                echoed["triggerType"].as_str(),
                echoed["triggerOperation"].as_str()
            ),
            (Some(kind), Some(op))
        );
        let (_, read) = call(
            &gw,
            signed("GET", &format!("/dbs/d/colls/c/triggers/{id}"), &[], b""),
        );
        assert_eq!(read["triggerType"], kind);
    }
    let body =
        br#"{"id":"x","body":"function t() {}","triggerType":"during","triggerOperation":"all"}"#;
    let (r, body) = call(&gw, signed("POST", "/dbs/d/colls/c/triggers", &[], body));
    assert_error(&r, &body, 400, "BadRequest", "during");
}

#[test]
fn pkranges_answer_304_to_a_matching_if_none_match() {
    let gw = setup();
    let a_im = ("a-im", "Incremental Feed");
    let (r, body) = call(&gw, signed("GET", "/dbs/d/colls/c/pkranges", &[a_im], b""));
    assert_eq!(r.status, 200);
    assert_eq!(body["PartitionKeyRanges"][0]["id"], "0");
    assert_eq!(body["PartitionKeyRanges"][0]["maxExclusive"], "FF");
    let etag = r.header("etag").unwrap().to_owned();
    let (r, _) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/pkranges",
            &[a_im, ("if-none-match", &etag)],
            b"",
        ),
    );
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some(etag.as_str()));
}

#[test]
fn the_change_feed_pages_by_lsn_and_answers_304_when_nothing_is_new() {
    let gw = setup();
    for (id, pk) in [("a", "x"), ("b", "y"), ("a", "x")] {
        let header = format!(r#"["{pk}"]"#);
        let body = format!(r#"{{"id":"{id}","pk":"{pk}"}}"#);
        call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/c/docs",
                &[
                    ("x-ms-documentdb-partitionkey", &header),
                    ("x-ms-documentdb-is-upsert", "true"),
                ],
                body.as_bytes(),
            ),
        );
    }
    let a_im = ("a-im", "Incremental Feed");
    let range = ("x-ms-documentdb-partitionkeyrangeid", "0");
    let (r, body) = call(
        &gw,
        signed("GET", "/dbs/d/colls/c/docs", &[a_im, range], b""),
    );
    assert_eq!(r.status, 200);
    let ids: Vec<&str> = body["Documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["b", "a"],
        "latest version of each, in order of last change"
    );
    let etag = r.header("etag").unwrap().to_owned();
    assert_eq!(etag, "\"3\"");
    let (r, _) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs",
            &[a_im, ("if-none-match", &etag)],
            b"",
        ),
    );
    assert_eq!(r.status, 304);
    // Per partition key.
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs",
            &[a_im, ("x-ms-documentdb-partitionkey", r#"["y"]"#)],
            b"",
        ),
    );
    assert_eq!(r.status, 200);
    assert_eq!(body["_count"], 1);
    assert_eq!(body["Documents"][0]["id"], "b");
    // Per EPK range (the Python SDK's per-key feed): the whole ring, then
    // the point range of ["y"].
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs",
            &[a_im, ("x-ms-start-epk", ""), ("x-ms-end-epk", "FF")],
            b"",
        ),
    );
    assert_eq!(r.status, 200);
    assert_eq!(body["_count"], 2);
    let epk = EPK_OF_Y;
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs",
            &[a_im, ("x-ms-start-epk", epk), ("x-ms-end-epk", epk)],
            b"",
        ),
    );
    assert_eq!(r.status, 200);
    assert_eq!(body["_count"], 1);
    assert_eq!(body["Documents"][0]["id"], "b");
    // From now: nothing yet.
    let (r, _) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs",
            &[a_im, ("if-none-match", "*")],
            b"",
        ),
    );
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some("\"3\""));
    // Page size: one transaction at a time.
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs",
            &[a_im, ("x-ms-max-item-count", "1")],
            b"",
        ),
    );
    assert_eq!(body["_count"], 1);
    assert_eq!(r.header("etag"), Some("\"1\""));
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs",
            &[a_im, ("if-none-match", "garbage")],
            b"",
        ),
    );
    assert_error(&r, &body, 400, "BadRequest", "If-None-Match");
}

/// The Hash V2 EPK of `"y"`, from the Python SDK
/// (`PartitionKey(path='/pk', kind='Hash', version=2)._get_epk_range_for_partition_key('y')`).
const EPK_OF_Y: &str = "1880C5B898FDA99DA53B2ABCC61E625C";

#[test]
fn queries_run_whole_and_plans_are_transparent() {
    let gw = setup();
    for i in 0..6 {
        let header = format!(r#"["k{}"]"#, i % 2);
        let body = format!(r#"{{"id":"i{i}","pk":"k{}","n":{i}}}"#, i % 2);
        call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/c/docs",
                &[("x-ms-documentdb-partitionkey", &header)],
                body.as_bytes(),
            ),
        );
    }
    let query = |sql: &str, extra: &[(&str, &str)]| {
        let mut headers = vec![
            ("x-ms-documentdb-isquery", "True"),
            ("content-type", "application/query+json"),
            ("x-ms-documentdb-query-enablecrosspartition", "True"),
        ];
        headers.extend_from_slice(extra);
        let body = json!({"query": sql, "parameters": [{"name": "@min", "value": 2}]}).to_string();
        call(
            &gw,
            signed("POST", "/dbs/d/colls/c/docs", &headers, body.as_bytes()),
        )
    };
    let (r, body) = query(
        "SELECT VALUE c.n FROM c WHERE c.n >= @min ORDER BY c.n DESC",
        &[],
    );
    assert_eq!(r.status, 200);
    assert_eq!(body["Documents"], json!([5, 4, 3, 2]));
    assert!(
        r.header("x-ms-request-charge")
            .unwrap()
            .parse::<f64>()
            .unwrap()
            >= 1.0
    );
    // The ORDER BY envelope the Rust SDK sends per range.
    let (r, body) = query(
        r#"SELECT VALUE {"_rid": c._rid, "orderByItems": [{"item": c.n}], "payload": c} FROM c WHERE true ORDER BY c.n DESC"#,
        &[("x-ms-documentdb-partitionkeyrangeid", "0")],
    );
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["Documents"][0]["orderByItems"][0]["item"], 5);
    assert_eq!(body["Documents"][0]["payload"]["id"], "i5");
    // Paging with continuations.
    let (r, body) = query("SELECT * FROM c", &[("x-ms-max-item-count", "4")]);
    assert_eq!(body["_count"], 4);
    let continuation = r.header("x-ms-continuation").unwrap().to_owned();
    let (r, body) = query(
        "SELECT * FROM c",
        &[
            ("x-ms-max-item-count", "4"),
            ("x-ms-continuation", &continuation),
        ],
    );
    assert_eq!(body["_count"], 2);
    assert!(r.header("x-ms-continuation").is_none());
    // A plan request (checked before isquery).
    let (r, body) = query(
        "SELECT VALUE COUNT(1) FROM c",
        &[("x-ms-cosmos-is-query-plan-request", "True")],
    );
    assert_eq!(r.status, 200);
    assert_eq!(body["queryRanges"][0]["max"], "FF");
    assert_eq!(body["queryInfo"]["orderBy"], json!([]));
    let (r, body) = query("SELECT FROM WHERE", &[]);
    assert_error(&r, &body, 400, "BadRequest", "");
}

#[test]
fn pages_are_cut_to_the_response_limit() {
    let gw = Gateway::new(
        Database::in_memory(),
        MasterKey::from_base64(EMULATOR_KEY).unwrap(),
        GatewayLimits {
            max_response_bytes: 3000,
        },
    )
    .unwrap();
    call(&gw, signed("POST", "/dbs", &[], br#"{"id":"d"}"#));
    call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls",
            &[],
            br#"{"id":"c","partitionKey":{"paths":["/pk"]}}"#,
        ),
    );
    for i in 0..5 {
        let body = json!({"id": format!("i{i}"), "pk": "p", "pad": "x".repeat(1000)}).to_string();
        call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/c/docs",
                &[("x-ms-documentdb-partitionkey", r#"["p"]"#)],
                body.as_bytes(),
            ),
        );
    }
    let mut seen = 0;
    let mut continuation: Option<String> = None;
    loop {
        let mut headers = vec![
            ("x-ms-documentdb-isquery", "true"),
            ("x-ms-documentdb-query-enablecrosspartition", "true"),
        ];
        if let Some(c) = &continuation {
            headers.push(("x-ms-continuation", c));
        }
        let (r, body) = call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/c/docs",
                &headers,
                br#"{"query":"SELECT * FROM c"}"#,
            ),
        );
        assert!(r.body.len() <= 3000, "{} bytes", r.body.len());
        seen += body["_count"].as_u64().unwrap();
        match r.header("x-ms-continuation") {
            Some(c) => continuation = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, 5);
}

#[test]
fn procedures_and_triggers_over_the_wire() {
    let gw = setup();
    let pk = ("x-ms-documentdb-partitionkey", r#"["p1"]"#);
    let sproc = json!({"id": "hello", "body": "function hello(n) { console.log('n=' + n); getContext().getResponse().setBody(n + 1); }"});
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/sprocs",
            &[],
            sproc.to_string().as_bytes(),
        ),
    );
    assert_eq!(r.status, 201, "{body}");
    assert_eq!(body["id"], "hello");
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/sprocs/hello",
            &[pk, ("x-ms-documentdb-script-enable-logging", "true")],
            b"[41]",
        ),
    );
    assert_eq!(r.status, 200);
    assert_eq!(body, 42);
    assert_eq!(
        r.header("x-ms-documentdb-script-log-results"),
        Some("n%3D41")
    );
    // No body at all is no parameters.
    let (r, body) = call(
        &gw,
        signed("POST", "/dbs/d/colls/c/sprocs/hello", &[pk], b""),
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        body,
        Value::Null,
        "undefined + 1 is NaN, which JSON writes as null"
    );
    // Throwing: 400 with the exception in the message; nothing committed.
    let boom = json!({"id": "boom", "body": "function boom() { var c = getContext().getCollection(); c.createDocument(c.getSelfLink(), {id: 'x', pk: 'p1'}); console.log('before'); throw new Error('kaboom'); }"});
    call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/sprocs",
            &[],
            boom.to_string().as_bytes(),
        ),
    );
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/sprocs/boom",
            &[pk, ("x-ms-documentdb-script-enable-logging", "true")],
            b"",
        ),
    );
    assert_error(&r, &body, 400, "BadRequest", "kaboom");
    assert_eq!(
        r.header("x-ms-documentdb-script-log-results"),
        Some("before")
    );
    assert_eq!(body["logs"], "before", "the log is in the error body too");
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/x", &[pk], b""));
    assert_eq!(r.status, 404);
    // Without a partition key.
    let (r, body) = call(
        &gw,
        signed("POST", "/dbs/d/colls/c/sprocs/hello", &[], b"[]"),
    );
    assert_error(&r, &body, 400, "BadRequest", "x-ms-documentdb-partitionkey");
    // A post-trigger on create, and an unknown trigger.
    let trigger = json!({"id": "mark", "body": "function mark() { var r = getContext().getResponse(); var b = r.getBody(); b.marked = true; r.setBody(b); }", "triggerType": "Post", "triggerOperation": "Create"});
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/triggers",
            &[],
            trigger.to_string().as_bytes(),
        ),
    );
    assert_eq!(r.status, 201, "{body}");
    assert_eq!(body["triggerType"], "Post");
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[pk, ("x-ms-documentdb-post-trigger-include", "mark")],
            br#"{"id":"t","pk":"p1"}"#,
        ),
    );
    assert_eq!(r.status, 201);
    assert_eq!(body["marked"], true);
    let (r, _) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[pk, ("x-ms-documentdb-post-trigger-include", "nope")],
            br#"{"id":"u","pk":"p1"}"#,
        ),
    );
    assert_eq!(r.status, 400);
    let (r, body) = call(&gw, signed("GET", "/dbs/d/colls/c/triggers", &[], b""));
    assert_eq!(r.status, 200);
    assert_eq!(body["Triggers"][0]["id"], "mark");
    let (r, _) = call(
        &gw,
        signed("DELETE", "/dbs/d/colls/c/triggers/mark", &[], b""),
    );
    assert_eq!(r.status, 204);
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c/triggers/mark", &[], b""));
    assert_eq!(r.status, 404);
}

#[test]
fn scripts_over_the_wire_can_run_in_worker_processes() {
    // As `partita serve --isolate-scripts`: workers are this package's binary.
    let pool = WorkerPool::new(WorkerOptions::new(
        env!("CARGO_BIN_EXE_partita"),
        ["script-worker"],
    ));
    let limits = Limits {
        workers: Some(pool.clone()),
        ..Limits::default()
    };
    let gw = setup_on(gateway(Database::in_memory()).with_script_limits(limits));
    let pk = ("x-ms-documentdb-partitionkey", r#"["p1"]"#);
    let create = |kind: &str, script: Value| {
        let (r, body) = call(
            &gw,
            signed(
                "POST",
                &format!("/dbs/d/colls/c/{kind}"),
                &[],
                script.to_string().as_bytes(),
            ),
        );
        assert_eq!(r.status, 201, "{body}");
    };
    create(
        "sprocs",
        json!({"id": "hello", "body": "function hello(n) { console.log('n=' + n); getContext().getResponse().setBody(n + 1); }"}),
    );
    create(
        "sprocs",
        json!({"id": "bomb", "body": "function bomb() { var c = getContext().getCollection(); c.createDocument(c.getSelfLink(), {id: 'w', pk: 'p1'}, function () { var s = '0123456789abcdef'; while (true) s = s + s; }); }"}),
    );
    create(
        "triggers",
        json!({"id": "mark", "body": "function mark() { var r = getContext().getResponse(); var b = r.getBody(); b.marked = true; r.setBody(b); }", "triggerType": "Post", "triggerOperation": "Create"}),
    );
    create(
        "udfs",
        json!({"id": "double", "body": "function double(x) { return x * 2; }"}),
    );
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/sprocs/hello",
            &[pk, ("x-ms-documentdb-script-enable-logging", "true")],
            b"[41]",
        ),
    );
    assert_eq!((r.status, body), (200, json!(42)));
    assert_eq!(
        r.header("x-ms-documentdb-script-log-results"),
        Some("n%3D41")
    );
    // The string bomb fails its call, not the server; its write is gone.
    let (r, body) = call(
        &gw,
        signed("POST", "/dbs/d/colls/c/sprocs/bomb", &[pk], b"[]"),
    );
    assert_error(&r, &body, 408, "RequestTimeout", "worker process");
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/w", &[pk], b""));
    assert_eq!(r.status, 404);
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[pk, ("x-ms-documentdb-post-trigger-include", "mark")],
            br#"{"id":"t","pk":"p1","n":21}"#,
        ),
    );
    assert_eq!((r.status, &body["marked"]), (201, &json!(true)), "{body}");
    let query = json!({"query": "SELECT VALUE udf.double(c.n) FROM c"}).to_string();
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[
                pk,
                ("x-ms-documentdb-isquery", "True"),
                ("content-type", "application/query+json"),
            ],
            query.as_bytes(),
        ),
    );
    assert_eq!(
        (r.status, &body["Documents"]),
        (200, &json!([42])),
        "{body}"
    );
    assert_eq!(pool.stats().lost, 1, "only the bomb's worker was lost");
}

#[test]
fn malformed_requests_are_400_with_a_reason() {
    let gw = setup();
    let (r, body) = call(&gw, signed("POST", "/dbs", &[], b"{not json"));
    assert_error(&r, &body, 400, "BadRequest", "not valid JSON");
    let (r, body) = call(&gw, signed("POST", "/dbs", &[], b"[1]"));
    assert_error(&r, &body, 400, "BadRequest", "JSON object");
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[("x-ms-documentdb-is-upsert", "perhaps")],
            br#"{"id":"a","pk":"p"}"#,
        ),
    );
    assert_error(&r, &body, 400, "BadRequest", "x-ms-documentdb-is-upsert");
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[
                ("x-ms-max-item-count", "many"),
                ("x-ms-documentdb-isquery", "true"),
            ],
            br#"{"query":"SELECT * FROM c"}"#,
        ),
    );
    assert_error(&r, &body, 400, "BadRequest", "x-ms-max-item-count");
    let mut req = signed("GET", "/dbs/d", &[], b"");
    req.headers.insert(
        "x-ms-date",
        hyper::header::HeaderValue::from_bytes(b"\xff\xfe").unwrap(),
    );
    let (r, body) = call(&gw, req);
    assert_error(&r, &body, 400, "BadRequest", "x-ms-date");
    let huge = json!({"id": "big", "pk": "p", "pad": "x".repeat(2 * 1024 * 1024)}).to_string();
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[("x-ms-documentdb-partitionkey", r#"["p"]"#)],
            huge.as_bytes(),
        ),
    );
    assert_error(&r, &body, 413, "RequestEntityTooLarge", "big");
    let (r, body) = call(&gw, signed("PATCH", "/dbs/d", &[], b""));
    assert_error(&r, &body, 405, "MethodNotAllowed", "PATCH");
    let (r, body) = call(&gw, signed("GET", "/media", &[], b""));
    assert_error(&r, &body, 404, "NotFound", "/media");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Fuzz: any method, path, headers and body, signed or not, gets an
    /// answer with a known status and a JSON (or empty) body; nothing panics.
    #[test]
    fn no_request_panics(
        method in prop::sample::select(vec!["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"]),
        path in prop::collection::vec(
            prop::sample::select(vec!["dbs", "d", "colls", "c", "docs", "a", "sprocs", "triggers",
                "udfs", "pkranges", "%ff", "%2F", "", "x y", "hello"]), 0..8),
        headers in prop::collection::vec((
            prop::sample::select(vec!["x-ms-documentdb-partitionkey", "x-ms-documentdb-isquery",
                "x-ms-documentdb-is-upsert", "if-match", "if-none-match", "a-im",
                "x-ms-max-item-count", "x-ms-continuation", "x-ms-cosmos-is-query-plan-request",
                "x-ms-documentdb-pre-trigger-include", "x-ms-documentdb-post-trigger-include",
                "x-ms-documentdb-script-enable-logging", "content-type", "if-modified-since"]),
            prop::sample::select(vec!["[\"p\"]", "[{}]", "[]", "[1,2]", "True", "false", "-1",
                "0", "Incremental Feed", "*", "\"3\"", "garbage", "application/query+json",
                "{\"a\":1}", "Sun, 22 Nov 2026 02:43:42 GMT", "x,y", ""]),
        ), 0..6),
        body in prop::sample::select(vec![
            "".to_owned(), "{".to_owned(), "[]".to_owned(), "null".to_owned(), "\u{80}".to_owned(),
            r#"{"id":"a","pk":"p"}"#.to_owned(), r#"{"id":"d"}"#.to_owned(),
            r#"{"id":"c","partitionKey":{"paths":["/pk"]}}"#.to_owned(),
            r#"{"query":"SELECT * FROM c ORDER BY c.x"}"#.to_owned(),
            r#"{"query":"SELECT VALUE COUNT(1) FROM c","parameters":[{"name":1}]}"#.to_owned(),
            r#"{"id":"s","body":"function s(){ throw 1; }","triggerType":"Pre","triggerOperation":"All"}"#.to_owned(),
            r#"[1, {"a": 2}]"#.to_owned(),
        ]),
        sign in any::<bool>(),
    ) {
        let gw = setup();
        let path = format!("/{}", path.join("/"));
        let mut req = signed(method, &path, &[], body.as_bytes());
        if !sign {
            req.headers.remove("authorization");
        }
        for (name, value) in headers {
            req.headers.insert(name, value.parse().unwrap());
        }
        let response = gw.handle(&req, SystemTime::now());
        prop_assert!(
            [200, 201, 204, 304, 400, 401, 404, 405, 408, 409, 412, 413, 500].contains(&response.status),
            "status {}", response.status
        );
        if !response.body.is_empty() {
            prop_assert!(serde_json::from_slice::<Value>(&response.body).is_ok());
        }
        if response.status >= 400 && response.status != 500 {
            let body: Value = serde_json::from_slice(&response.body).unwrap();
            prop_assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
        }
    }
}

// --- the real binary over TCP --------------------------------------------------------------

/// Sends raw bytes and returns the raw response (the server closes the
/// connection: requests say `connection: close`). A server that has not
/// answered within minutes is wedged: the read gives up and the test
/// fails on the empty response.
pub(crate) fn raw_to(addr: &str, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(180)))
        .unwrap();
    // A server may answer (a 413 from the declared length) and close
    // before the whole request is written: read its answer anyway.
    let _ = stream.write_all(request);
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A request signed with the emulator key, `extra` header lines
/// (each ending in `\r\n`) and `body`: the raw response.
pub(crate) fn signed_raw_to(
    addr: &str,
    method: &str,
    path: &str,
    extra: &str,
    body: &[u8],
) -> String {
    let req = signed(method, path, &[], b"");
    let mut text = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for name in ["authorization", "x-ms-date"] {
        text.push_str(&format!(
            "{name}: {}\r\n",
            req.headers[name].to_str().unwrap()
        ));
    }
    text.push_str(extra);
    text.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(body);
    raw_to(addr, &bytes)
}

impl ServerProcess {
    /// [`raw_to`] this server.
    pub(crate) fn raw(&self, request: &[u8]) -> String {
        raw_to(&self.addr, request)
    }

    /// [`signed_raw_to`] this server.
    pub(crate) fn signed_raw(&self, method: &str, path: &str, extra: &str, body: &[u8]) -> String {
        signed_raw_to(&self.addr, method, path, extra, body)
    }

    /// Sends SIGTERM (by pid): the server's graceful shutdown path.
    pub(crate) fn terminate(&mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// How the process ended, waiting at most `ceiling` (a ceiling that
    /// catches a server that does not stop, not a measure of how fast it
    /// stops).
    pub(crate) fn exit_status(&mut self, ceiling: Duration) -> std::process::ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                started.elapsed() < ceiling,
                "the server is still running {ceiling:?} after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn the_binary_serves_http_with_limits_and_shuts_down_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let mut server = ServerProcess::start(&["--data", data]);
    let response = server.signed_raw("GET", "/", "", b"");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("x-ms-request-charge"), "{response}");
    // Unsigned: 401 with the Cosmos body.
    let response = server.raw(b"GET /dbs HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    assert!(response.starts_with("HTTP/1.1 401"), "{response}");
    assert!(response.contains(r#""code":"Unauthorized""#), "{response}");
    // A body over the limit is refused from its content-length.
    let response = server.raw(
        b"POST /dbs HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 9999999\r\n\r\n",
    );
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert!(response.contains("RequestEntityTooLarge"), "{response}");
    // One a little over the limit, sent whole, is read and answered with a
    // 413 too (a client that writes its whole body first sees the answer,
    // not a reset).
    let mut request =
        b"POST /dbs HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 2500000\r\n\r\n"
            .to_vec();
    request.resize(request.len() + 2_500_000, b'x');
    let response = server.raw(&request);
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    // Not HTTP at all: hyper answers 400 and closes.
    let response = server.raw(b"\x00\x01garbage\r\n\r\n");
    assert!(
        response.is_empty() || response.starts_with("HTTP/1.1 400"),
        "{response}"
    );
    // A request in flight when shutdown begins still completes: send its
    // headers with `expect: 100-continue`; the interim 100 proves the server
    // is reading the body; SIGTERM, wait until the listener is closed, then
    // send the body.
    let body = br#"{"id":"kept"}"#;
    let req = signed("POST", "/dbs", &[], b"");
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let head = format!(
        "POST /dbs HTTP/1.1\r\nhost: {}\r\nconnection: close\r\nexpect: 100-continue\r\nauthorization: {}\r\nx-ms-date: {}\r\ncontent-length: {}\r\n\r\n",
        server.addr,
        req.headers["authorization"].to_str().unwrap(),
        req.headers["x-ms-date"].to_str().unwrap(),
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut interim = Vec::new();
    let mut byte = [0u8; 1];
    while !interim.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        interim.push(byte[0]);
    }
    assert!(
        interim.starts_with(b"HTTP/1.1 100"),
        "{}",
        String::from_utf8_lossy(&interim)
    );
    server.terminate();
    let mut closed = false;
    for _ in 0..1000 {
        if TcpStream::connect(&server.addr).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(closed, "the listener stays open after SIGTERM");
    stream.write_all(body).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    let status = server.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let server = ServerProcess::start(&["--data", data]);
    let response = server.signed_raw("GET", "/dbs/kept", "", b"");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
}

#[test]
fn slow_clients_are_cut_off() {
    let server = ServerProcess::start(&["--in-memory", "--client-timeout-ms", "300"]);
    // Headers that never end: hyper drops the connection.
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n").unwrap();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
    // A body that never ends: 408 with the Cosmos body. (Signed: an
    // unsigned request is refused from its head, body unread.)
    let req = signed("POST", "/dbs", &[], b"");
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let head = format!(
        "POST /dbs HTTP/1.1\r\nhost: x\r\nauthorization: {}\r\nx-ms-date: {}\r\ncontent-length: 100\r\n\r\n{{",
        req.headers["authorization"].to_str().unwrap(),
        req.headers["x-ms-date"].to_str().unwrap(),
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("RequestTimeout"), "{text}");
}

// --- TLS ----------------------------------------------------------------------------------

/// What a TLS client saw: the ALPN protocol the server chose and, when a
/// request was sent, the whole response (the request says `connection: close`).
struct TlsExchange {
    alpn: Option<Vec<u8>>,
    response: String,
}

/// Connects to `addr` over TLS as `127.0.0.1`, trusting only the
/// certificates in `roots_pem`, offering `alpn`; sends `request` if given.
/// The error is the client's reason for refusing the handshake.
fn tls_exchange(
    addr: &str,
    roots_pem: &str,
    alpn: &[&[u8]],
    request: Option<&[u8]>,
) -> Result<TlsExchange, std::io::Error> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(roots_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let mut tls = connector.connect(name, tcp).await?;
        let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        let mut response = Vec::new();
        if let Some(request) = request {
            tls.write_all(request).await?;
            // A close without TLS close_notify is still the end here.
            let _ = tls.read_to_end(&mut response).await;
        }
        Ok(TlsExchange {
            alpn,
            response: String::from_utf8_lossy(&response).into_owned(),
        })
    })
}

/// A signed HTTP/1.1 request for `GET path` to `addr`.
fn signed_get(addr: &str, path: &str) -> Vec<u8> {
    let req = signed("GET", path, &[], b"");
    format!(
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\nauthorization: {}\r\nx-ms-date: {}\r\n\r\n",
        req.headers["authorization"].to_str().unwrap(),
        req.headers["x-ms-date"].to_str().unwrap(),
    )
    .into_bytes()
}

#[test]
fn tls_serves_https_with_the_printed_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let server = ServerProcess::start(&["--data", data, "--tls"]);
    assert!(
        server.endpoint().starts_with("https://127.0.0.1:"),
        "{}",
        server.ready
    );
    let cert_path = PathBuf::from(server.ready["certificate"].as_str().unwrap());
    assert_eq!(
        cert_path,
        dir.path().join("tls-cert.pem"),
        "in the data directory"
    );
    let cert = std::fs::read_to_string(&cert_path).unwrap();

    // HTTP/1.1: account discovery advertises https.
    let exchange = tls_exchange(
        &server.addr,
        &cert,
        &[b"http/1.1"],
        Some(&signed_get(&server.addr, "/")),
    )
    .expect("the client trusts the printed certificate");
    assert_eq!(exchange.alpn.as_deref(), Some(&b"http/1.1"[..]));
    assert!(
        exchange.response.starts_with("HTTP/1.1 200"),
        "{}",
        exchange.response
    );
    let body = &exchange.response[exchange.response.find("\r\n\r\n").unwrap() + 4..];
    let account: Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        account["writableLocations"][0]["databaseAccountEndpoint"],
        server.endpoint()
    );
    // Without ALPN: HTTP/1.1 too.
    let exchange = tls_exchange(
        &server.addr,
        &cert,
        &[],
        Some(&signed_get(&server.addr, "/dbs")),
    )
    .unwrap();
    assert!(
        exchange.response.starts_with("HTTP/1.1 200"),
        "{}",
        exchange.response
    );
    // A client that offers h2 gets it.
    let exchange = tls_exchange(&server.addr, &cert, &[b"h2", b"http/1.1"], None).unwrap();
    assert_eq!(exchange.alpn.as_deref(), Some(&b"h2"[..]));
    // Plain HTTP on the TLS port gets no HTTP answer.
    let response = server.raw(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    assert!(!response.starts_with("HTTP/1.1"), "{response}");

    // A restart generates a new certificate: the old one is not trusted.
    drop(server);
    let server = ServerProcess::start(&["--data", data, "--tls"]);
    let err = tls_exchange(&server.addr, &cert, &[b"http/1.1"], None)
        .err()
        .expect("a client trusting another certificate refuses the handshake");
    assert!(err.to_string().contains("certificate"), "{err}");
    let fresh = std::fs::read_to_string(&cert_path).unwrap();
    assert_ne!(fresh, cert);
    tls_exchange(&server.addr, &fresh, &[b"http/1.1"], None).unwrap();
}

#[test]
fn tls_with_the_users_certificate_and_a_client_that_trusts_another_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mine = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, mine.cert.pem()).unwrap();
    std::fs::write(&key, mine.signing_key.serialize_pem()).unwrap();
    let server = ServerProcess::start(&[
        "--in-memory",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert_eq!(server.ready["certificate"], cert.to_str().unwrap());
    let exchange = tls_exchange(
        &server.addr,
        &mine.cert.pem(),
        &[b"http/1.1"],
        Some(&signed_get(&server.addr, "/dbs")),
    )
    .unwrap();
    assert!(
        exchange.response.starts_with("HTTP/1.1 200"),
        "{}",
        exchange.response
    );
    // A client trusting an unrelated certificate refuses the server.
    let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let err = tls_exchange(&server.addr, &other.cert.pem(), &[b"http/1.1"], None)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("certificate"), "{err}");

    // Unusable files: the server does not start, and says which file.
    let output = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args([
            "--in-memory",
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--tls-cert",
        ])
        .arg(&key)
        .arg("--tls-key")
        .arg(&key)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("key.pem") && stderr.contains("400"),
        "{stderr}"
    );
}

#[test]
fn a_tls_client_that_never_finishes_its_handshake_is_cut_off() {
    let server = ServerProcess::start(&["--in-memory", "--tls", "--client-timeout-ms", "300"]);
    // Connects and sends nothing: the handshake times out and the server
    // closes the connection (read_to_end returns instead of hanging).
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut out = Vec::new();
    let read = stream.read_to_end(&mut out);
    assert!(
        read.is_ok(),
        "the server kept the connection open: {read:?}"
    );
    assert!(out.is_empty());
    // The server still serves others.
    let cert = std::fs::read_to_string(server.ready["certificate"].as_str().unwrap()).unwrap();
    let exchange = tls_exchange(
        &server.addr,
        &cert,
        &[b"http/1.1"],
        Some(&signed_get(&server.addr, "/dbs")),
    )
    .unwrap();
    assert!(
        exchange.response.starts_with("HTTP/1.1 200"),
        "{}",
        exchange.response
    );
}

#[test]
fn the_python_sdk_runs_the_blog_workload_end_to_end() {
    let python = python_venv();
    let server = ServerProcess::start(&["--in-memory"]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(python)
        .arg(root.join("tests/python/cosmos_sdk.py"))
        .arg(server.endpoint())
        .arg(EMULATOR_KEY)
        .arg(root.join("sprocs/samples/js"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("ALL OK"),
        "the Python SDK script failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
}

#[test]
fn the_python_sdk_runs_batches_and_patches() {
    let python = python_venv();
    let server = ServerProcess::start(&["--in-memory"]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(python)
        .arg(root.join("tests/python/cosmos_batch.py"))
        .arg(server.endpoint())
        .arg(EMULATOR_KEY)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("ALL OK"),
        "the Python SDK batch script failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
}

/// `tests/js` with its `node_modules` (`npm ci` on first use, or when a
/// package it lists is missing; `.ci/run` installs it in CI): the
/// JavaScript SDK and `puppeteer-core`, for the Data Explorer's test.
pub(crate) fn js_sdk() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/js");
    let installed = ["@azure/cosmos", "puppeteer-core"]
        .iter()
        .all(|package| dir.join("node_modules").join(package).exists());
    if !installed {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--silent"])
            .current_dir(&dir)
            .status()
            .expect("npm (Node.js) is needed for the tests in tests/js");
        assert!(status.success(), "npm ci in tests/js failed");
    }
    dir
}

#[test]
fn the_javascript_sdk_runs_batches_bulk_and_patches() {
    run_js_acceptance("cosmos_batch.mjs");
}

#[test]
fn the_javascript_sdk_runs_cross_partition_queries_over_several_ranges() {
    run_js_acceptance("cosmos_query.mjs");
}

#[test]
fn the_javascript_sdk_uses_resource_tokens() {
    run_js_acceptance("cosmos_permissions.mjs");
}

/// Runs a script of `tests/js` against a fresh `partita serve --tls`; it
/// must print `ALL OK`.
fn run_js_acceptance(script: &str) {
    let dir = js_sdk();
    let server = ServerProcess::start(&["--in-memory", "--tls"]);
    let output = Command::new("node")
        .arg(dir.join(script))
        .arg(server.endpoint())
        .arg(EMULATOR_KEY)
        .env(
            "NODE_EXTRA_CA_CERTS",
            server.ready["certificate"].as_str().unwrap(),
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("ALL OK"),
        "the JavaScript SDK script {script} failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
}

#[test]
fn the_python_sdk_works_over_https() {
    let python = python_venv();
    let server = ServerProcess::start(&["--in-memory", "--tls"]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(python)
        .arg(root.join("tests/python/cosmos_tls.py"))
        .arg(server.endpoint())
        .arg(EMULATOR_KEY)
        .arg(server.ready["certificate"].as_str().unwrap())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("ALL OK"),
        "the Python SDK script failed over HTTPS\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
}

/// `x-partita-max-operations` and `x-partita-max-instructions` cut a call
/// short as the service would: refused operations never run their
/// callbacks, what was accepted commits, and the script's continuation
/// comes back. A value that is not a number is a 400 naming the header.
#[test]
fn bounded_execution_can_be_exercised_from_the_wire() {
    let gw = setup();
    let pk = ("x-ms-documentdb-partitionkey", r#"["p1"]"#);
    let import = json!({"id": "import", "body": r#"function importAll(n) {
        var c = getContext().getCollection(), done = 0;
        for (var i = 0; i < n; i++) {
            var ok = c.createDocument(c.getSelfLink(), {id: "d" + i, pk: "p1"}, function (err) {
                if (err) throw err;
            });
            if (!ok) break;
            done++;
        }
        getContext().getResponse().setBody({created: done, continuation: done < n ? done : null});
    }"#});
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/sprocs",
            &[],
            import.to_string().as_bytes(),
        ),
    );
    assert_eq!(r.status, 201, "{body}");
    let run = |headers: &[(&str, &str)]| {
        let mut all = vec![pk];
        all.extend_from_slice(headers);
        call(
            &gw,
            signed("POST", "/dbs/d/colls/c/sprocs/import", &all, b"[10]"),
        )
    };
    let (r, body) = run(&[("x-partita-max-operations", "3")]);
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body, json!({"created": 3, "continuation": 3}));
    let feed = |gw: &Gateway| {
        let (r, body) = call(gw, signed("GET", "/dbs/d/colls/c/docs", &[pk], b""));
        assert_eq!(r.status, 200, "{body}");
        body["Documents"].as_array().unwrap().len()
    };
    assert_eq!(feed(&gw), 3, "the accepted writes committed");
    // An instruction cap so low that nothing is accepted.
    let (r, body) = run(&[("x-partita-max-instructions", "1")]);
    assert_eq!(
        (r.status, body),
        (200, json!({"created": 0, "continuation": 0}))
    );
    let (r, body) = run(&[("x-partita-max-operations", "three")]);
    assert_error(&r, &body, 400, "BadRequest", "x-partita-max-operations");
    assert_eq!(feed(&gw), 3, "nothing more was written");
}

/// A replace whose body has another id renames the document, as on the
/// service (the .NET SDK's TestUniqueConstraintSample does this).
#[test]
fn a_replace_with_another_id_renames_over_the_wire() {
    let gw = setup();
    let pk = ("x-ms-documentdb-partitionkey", r#"["p1"]"#);
    let (r, created) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[pk],
            br#"{"id":"a","pk":"p1"}"#,
        ),
    );
    assert_eq!(r.status, 201, "{created}");
    let (r, body) = call(
        &gw,
        signed(
            "PUT",
            "/dbs/d/colls/c/docs/a",
            &[pk],
            br#"{"id":"b","pk":"p1"}"#,
        ),
    );
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["id"], "b");
    assert_eq!(body["_rid"], created["_rid"], "the document keeps its _rid");
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/a", &[pk], b""));
    assert_eq!(r.status, 404);
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/b", &[pk], b""));
    assert_eq!(r.status, 200);
}

/// A script's failure that came from a collection operation names it in
/// the error body, beside the log.
#[test]
fn a_failed_procedure_names_the_operation_in_its_error_body() {
    let gw = setup();
    let pk = ("x-ms-documentdb-partitionkey", r#"["p1"]"#);
    let sproc = json!({"id": "twice", "body": "function twice() { var c = getContext().getCollection(); console.log('creating'); c.createDocument(c.getSelfLink(), {id: 'x', pk: 'p1'}); c.createDocument(c.getSelfLink(), {id: 'x', pk: 'p1'}); }"});
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/sprocs",
            &[],
            sproc.to_string().as_bytes(),
        ),
    );
    assert_eq!(r.status, 201, "{body}");
    let (r, body) = call(
        &gw,
        signed("POST", "/dbs/d/colls/c/sprocs/twice", &[pk], b""),
    );
    assert_error(&r, &body, 400, "BadRequest", "");
    assert_eq!(r.header("x-ms-substatus"), Some("409"));
    assert_eq!(
        body["failedOperation"],
        json!({"operation": "create", "id": "x", "status": 409})
    );
    assert_eq!(body["logs"], "creating");
}

/// The links a script sees are the ones the wire returns: a document's
/// `_self` and the collection's self link agree, so a script can hand a
/// client a link and back.
#[test]
fn scripts_and_the_wire_agree_on_links() {
    let gw = setup();
    let pk = ("x-ms-documentdb-partitionkey", r#"["p1"]"#);
    let (r, doc) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/docs",
            &[pk],
            br#"{"id":"a","pk":"p1"}"#,
        ),
    );
    assert_eq!(r.status, 201, "{doc}");
    let (r, coll) = call(&gw, signed("GET", "/dbs/d/colls/c", &[], b""));
    assert_eq!(r.status, 200, "{coll}");
    let links = json!({"id": "links", "body": "function links() { var c = getContext().getCollection(); c.readDocument(c.getAltLink() + '/docs/a', function (err, doc) { if (err) throw err; getContext().getResponse().setBody({doc: doc._self, coll: c.getSelfLink()}); }); }"});
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/sprocs",
            &[],
            links.to_string().as_bytes(),
        ),
    );
    assert_eq!(r.status, 201, "{body}");
    let (r, body) = call(
        &gw,
        signed("POST", "/dbs/d/colls/c/sprocs/links", &[pk], b""),
    );
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["doc"], doc["_self"]);
    assert_eq!(body["coll"], coll["_self"]);
}

/// A gateway over a database whose clock moves only when told (with the
/// background purge off), and its data directory.
fn gateway_on_clock() -> (Gateway, partita::ManualClock, tempfile::TempDir) {
    let clock = partita::ManualClock::new(SystemTime::now());
    let options = partita::Options {
        clock: clock.clock(),
        purge_interval: None,
        durability: partita::Durability::None,
        ..partita::Options::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open_with(dir.path(), options).unwrap();
    (setup_on(gateway(db)), clock, dir)
}

#[test]
fn default_ttl_is_validated_echoed_replaced_and_expires_items() {
    let (gw, clock, _dir) = gateway_on_clock();
    for bad in ["0", "-10", "\"5\"", "1.5"] {
        let body =
            format!(r#"{{"id":"bad","partitionKey":{{"paths":["/pk"]}},"defaultTtl":{bad}}}"#);
        let (r, body) = call(&gw, signed("POST", "/dbs/d/colls", &[], body.as_bytes()));
        assert_error(&r, &body, 400, "BadRequest", "defaultTtl");
    }
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls",
            &[],
            br#"{"id":"t","partitionKey":{"paths":["/pk"]},"defaultTtl":10}"#,
        ),
    );
    assert_eq!(r.status, 201, "{body}");
    assert_eq!(body["defaultTtl"], 10);
    let pk = ("x-ms-documentdb-partitionkey", r#"["p"]"#);
    for bad in ["0", "null", "-10"] {
        let doc = format!(r#"{{"id":"x","pk":"p","ttl":{bad}}}"#);
        let (r, body) = call(
            &gw,
            signed("POST", "/dbs/d/colls/t/docs", &[pk], doc.as_bytes()),
        );
        assert_error(&r, &body, 400, "BadRequest", "ttl");
    }
    for doc in [r#"{"id":"a","pk":"p"}"#, r#"{"id":"b","pk":"p","ttl":-1}"#] {
        let (r, body) = call(
            &gw,
            signed("POST", "/dbs/d/colls/t/docs", &[pk], doc.as_bytes()),
        );
        assert_eq!(r.status, 201, "{body}");
    }
    clock.advance(Duration::from_secs(10));
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/t/docs/a", &[pk], b""));
    assert_eq!(r.status, 404, "expired");
    let (r, body) = call(&gw, signed("GET", "/dbs/d/colls/t/docs", &[pk], b""));
    assert_eq!(r.status, 200);
    assert_eq!(body["Documents"].as_array().unwrap().len(), 1, "{body}");
    let query = [
        ("content-type", "application/query+json"),
        ("x-ms-documentdb-isquery", "true"),
        ("x-ms-documentdb-query-enablecrosspartition", "true"),
    ];
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/t/docs",
            &query,
            br#"{"query":"SELECT VALUE c.id FROM c"}"#,
        ),
    );
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["Documents"], json!(["b"]));
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/t/docs",
            &[("a-im", "Incremental Feed")],
            b"",
        ),
    );
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["Documents"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["Documents"][0]["id"], "b");

    // A replace without defaultTtl turns time to live off: "a" is back
    // until the purge would have removed it.
    let (r, body) = call(
        &gw,
        signed(
            "PUT",
            "/dbs/d/colls/t",
            &[],
            br#"{"id":"t","partitionKey":{"paths":["/pk"]}}"#,
        ),
    );
    assert_eq!(r.status, 200, "{body}");
    assert!(body.get("defaultTtl").is_none(), "{body}");
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/t/docs/a", &[pk], b""));
    assert_eq!(r.status, 200);
    let (r, body) = call(
        &gw,
        signed(
            "PUT",
            "/dbs/d/colls/t",
            &[],
            br#"{"id":"t","partitionKey":{"paths":["/pk"]},"defaultTtl":5}"#,
        ),
    );
    assert_eq!(r.status, 200, "{body}");
    let (_, body) = call(&gw, signed("GET", "/dbs/d/colls/t", &[], b""));
    assert_eq!(body["defaultTtl"], 5);
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/t/docs/a", &[pk], b""));
    assert_eq!(r.status, 404);
    let (r, body) = call(
        &gw,
        signed(
            "PUT",
            "/dbs/d/colls/t",
            &[],
            br#"{"id":"t","partitionKey":{"paths":["/pk"]},"defaultTtl":0}"#,
        ),
    );
    assert_error(&r, &body, 400, "BadRequest", "defaultTtl");
}

#[test]
fn unique_keys_are_409_over_the_wire_and_fixed_after_creation() {
    let gw = setup();
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls",
            &[],
            br#"{"id":"u","partitionKey":{"paths":["/pk"]},
                 "uniqueKeyPolicy":{"uniqueKeys":[{"paths":["/name","/address/zip"]}]}}"#,
        ),
    );
    assert_eq!(r.status, 201, "{body}");
    assert_eq!(
        body["uniqueKeyPolicy"],
        json!({"uniqueKeys": [{"paths": ["/name", "/address/zip"]}]})
    );
    let pk = ("x-ms-documentdb-partitionkey", r#"["p"]"#);
    let doc = |id: &str, zip: u32| {
        format!(r#"{{"id":"{id}","pk":"p","name":"n","address":{{"zip":{zip}}}}}"#)
    };
    let (r, _) = call(
        &gw,
        signed("POST", "/dbs/d/colls/u/docs", &[pk], doc("a", 1).as_bytes()),
    );
    assert_eq!(r.status, 201);
    let (r, _) = call(
        &gw,
        signed("POST", "/dbs/d/colls/u/docs", &[pk], doc("b", 2).as_bytes()),
    );
    assert_eq!(r.status, 201);
    let (r, body) = call(
        &gw,
        signed("POST", "/dbs/d/colls/u/docs", &[pk], doc("c", 1).as_bytes()),
    );
    assert_error(&r, &body, 409, "Conflict", "unique key");
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/u/docs",
            &[pk, ("x-ms-documentdb-is-upsert", "true")],
            doc("c", 1).as_bytes(),
        ),
    );
    assert_error(&r, &body, 409, "Conflict", "/address/zip");
    let (r, body) = call(
        &gw,
        signed(
            "PUT",
            "/dbs/d/colls/u/docs/b",
            &[pk],
            doc("b", 1).as_bytes(),
        ),
    );
    assert_error(&r, &body, 409, "Conflict", "unique key");

    let (r, body) = call(
        &gw,
        signed(
            "PUT",
            "/dbs/d/colls/u",
            &[],
            br#"{"id":"u","partitionKey":{"paths":["/pk"]},
                 "uniqueKeyPolicy":{"uniqueKeys":[{"paths":["/name"]}]}}"#,
        ),
    );
    assert_error(&r, &body, 400, "BadRequest", "uniqueKeyPolicy");
    // Leaving the policy out of a replace keeps it.
    let (r, body) = call(
        &gw,
        signed(
            "PUT",
            "/dbs/d/colls/u",
            &[],
            br#"{"id":"u","partitionKey":{"paths":["/pk"]}}"#,
        ),
    );
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(
        body["uniqueKeyPolicy"]["uniqueKeys"][0]["paths"][0],
        "/name"
    );
    for bad in [
        r#"{"uniqueKeys":[{"paths":["name"]}]}"#,
        r#"{"uniqueKeys":"x"}"#,
    ] {
        let body =
            format!(r#"{{"id":"bad","partitionKey":{{"paths":["/pk"]}},"uniqueKeyPolicy":{bad}}}"#);
        let (r, body) = call(&gw, signed("POST", "/dbs/d/colls", &[], body.as_bytes()));
        assert_eq!(r.status, 400, "{body}");
    }
}

#[test]
fn partition_key_delete_is_synchronous_signed_as_the_collection() {
    let gw = setup();
    for (id, pk) in [("a", "p1"), ("b", "p1"), ("c", "p2")] {
        let doc = format!(r#"{{"id":"{id}","pk":"{pk}"}}"#);
        let key = format!(r#"["{pk}"]"#);
        let (r, _) = call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/c/docs",
                &[("x-ms-documentdb-partitionkey", &key)],
                doc.as_bytes(),
            ),
        );
        assert_eq!(r.status, 201);
    }
    let path = "/dbs/d/colls/c/operations/partitionkeydelete";
    assert_eq!(
        resource_of(&segments(path)),
        ("colls".to_owned(), "dbs/d/colls/c".to_owned())
    );
    let (r, body) = call(
        &gw,
        signed(
            "POST",
            path,
            &[("x-ms-documentdb-partitionkey", r#"["p1"]"#)],
            b"",
        ),
    );
    assert_eq!(r.status, 200, "{body}");
    assert!(r.header("x-ms-session-token").is_some());
    let (_, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs",
            &[("x-ms-documentdb-query-enablecrosspartition", "true")],
            b"",
        ),
    );
    let ids: Vec<&str> = body["Documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c"]);
    // The deletes are in the change feed: "a" and "b" are gone from it.
    let (_, body) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs",
            &[("a-im", "Incremental Feed")],
            b"",
        ),
    );
    assert_eq!(body["Documents"].as_array().unwrap().len(), 1, "{body}");
    // An unknown key, or none, deletes nothing and succeeds.
    for headers in [
        &[("x-ms-documentdb-partitionkey", r#"["nobody"]"#)][..],
        &[],
    ] {
        let (r, body) = call(&gw, signed("POST", path, headers, b""));
        assert_eq!(r.status, 200, "{body}");
    }
    let (r, _) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/colls/c/docs/c",
            &[("x-ms-documentdb-partitionkey", r#"["p2"]"#)],
            b"",
        ),
    );
    assert_eq!(r.status, 200);
    let (r, _) = call(&gw, signed("GET", path, &[], b""));
    assert_eq!(r.status, 404, "only POST is served there");
}

#[test]
fn batches_bulk_and_patches_over_the_wire() {
    let gw = setup();
    let pk = ("x-ms-documentdb-partitionkey", r#"["a"]"#);
    let is_batch = ("x-ms-cosmos-is-batch-request", "True");
    let atomic = ("x-ms-cosmos-batch-atomic", "True");
    let batch = |headers: &[(&str, &str)], ops: Value| {
        call(
            &gw,
            signed(
                "POST",
                "/dbs/d/colls/c/docs",
                headers,
                ops.to_string().as_bytes(),
            ),
        )
    };
    let (r, body) = batch(
        &[pk, is_batch, atomic],
        json!([{"operationType": "Create", "resourceBody": {"id": "p", "pk": "a", "n": 0}},
               {"operationType": "Patch", "id": "p", "resourceBody": {"operations": [{"op": "incr", "path": "/n", "value": 2}]}}]),
    );
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body[1]["statusCode"], 200);
    assert_eq!(body[1]["resourceBody"]["n"], 2);
    assert!(body[0]["requestCharge"].as_f64().unwrap() > 0.0);
    let lsn: u64 = r.header("lsn").unwrap().parse().unwrap();

    // A failed atomic batch is a 207 with the failure and 424s; nothing lands.
    let (r, body) = batch(
        &[pk, is_batch, atomic],
        json!([{"operationType": "Upsert", "resourceBody": {"id": "q", "pk": "a"}},
               {"operationType": "Create", "resourceBody": {"id": "p", "pk": "a"}}]),
    );
    assert_eq!(r.status, 207, "{body}");
    assert_eq!(
        body,
        json!([{"statusCode": 424, "requestCharge": 0.0}, body[1].clone()])
    );
    assert_eq!(body[1]["statusCode"], 409);
    assert!(
        body[1]["message"]
            .as_str()
            .unwrap()
            .contains("already exists")
    );
    assert_eq!(
        r.header("lsn").unwrap(),
        lsn.to_string(),
        "nothing was committed"
    );
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/q", &[pk], b""));
    assert_eq!(r.status, 404);

    // Bulk: each operation names its key and commits on its own.
    let (r, body) = batch(
        &[
            is_batch,
            ("x-ms-cosmos-batch-atomic", "false"),
            ("x-ms-cosmos-batch-continue-on-error", "true"),
        ],
        json!([{"operationType": "Create", "partitionKey": "[\"b\"]", "resourceBody": {"id": "1", "pk": "b"}},
               {"operationType": "Create", "partitionKey": "[\"a\"]", "resourceBody": {"id": "p", "pk": "a"}},
               {"operationType": "Read", "partitionKey": "[\"a\"]", "id": "p"}]),
    );
    assert_eq!(r.status, 207, "{body}");
    let statuses: Vec<&Value> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["statusCode"])
        .collect();
    assert_eq!(statuses, [&json!(201), &json!(409), &json!(200)]);

    // Whole-request errors name the problem.
    for (ops, needle) in [
        (
            json!({"operationType": "Create"}),
            "JSON array of operations",
        ),
        (json!([]), "Batch request has no operations."),
        (
            json!([{"operationType": "Copy", "id": "p"}]),
            "unknown batch operation type \"Copy\"",
        ),
    ] {
        let (r, body) = batch(&[pk, is_batch, atomic], ops);
        assert_error(&r, &body, 400, "BadRequest", needle);
    }
    let (r, body) = batch(
        &[is_batch, atomic],
        json!([{"operationType": "Read", "id": "p"}]),
    );
    assert_error(&r, &body, 400, "BadRequest", "x-ms-documentdb-partitionkey");

    // PATCH, conditional and with Prefer: return=minimal.
    let patch = |headers: &[(&str, &str)], body: Value| {
        call(
            &gw,
            signed(
                "PATCH",
                "/dbs/d/colls/c/docs/p",
                headers,
                body.to_string().as_bytes(),
            ),
        )
    };
    let json_patch = ("content-type", "application/json-patch+json");
    let (r, body) = patch(
        &[pk, json_patch],
        json!({"condition": "from c where c.n = 2", "operations": [{"op": "set", "path": "/n", "value": 7}]}),
    );
    assert_eq!((r.status, &body["n"]), (200, &json!(7)), "{body}");
    assert_eq!(r.header("etag"), body["_etag"].as_str());
    let (r, body) = patch(
        &[pk, json_patch],
        json!({"condition": "from c where c.n = 2", "operations": [{"op": "set", "path": "/n", "value": 8}]}),
    );
    assert_error(&r, &body, 412, "PreconditionFailed", "condition");
    let (r, body) = patch(
        &[pk, json_patch],
        json!({"operations": [{"op": "remove", "path": "/nope"}]}),
    );
    assert_error(&r, &body, 400, "BadRequest", "/nope does not exist");
    let (r, body) = patch(
        &[pk, json_patch],
        json!({"condition": "from c where (", "operations": [{"op": "set", "path": "/n", "value": 1}]}),
    );
    assert_error(&r, &body, 400, "BadRequest", "patch condition");
    let (r, body) = patch(
        &[pk, json_patch, ("prefer", "return=minimal")],
        json!({"operations": [{"op": "incr", "path": "/n", "value": 1}]}),
    );
    assert_eq!((r.status, body), (200, Value::Null));
    assert!(r.header("etag").is_some());
    let (_, body) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/p", &[pk], b""));
    assert_eq!(body["n"], 8);
}
