//! Users, permissions and resource tokens in `partita serve`: their
//! resources (shapes, rids, 404/409/400), and the authorization boundary a
//! token draws: its container or document, its mode, its logical
//! partition, and nothing once it expired or its permission changed.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use hyper::HeaderMap;
use partita::Database;
use partita_server::{Gateway, WireRequest, WireResponse};
use serde_json::{Value, json};

use crate::server::{assert_error, call, gateway, setup, setup_on, signed};

const PK_A: (&str, &str) = ("x-ms-documentdb-partitionkey", r#"["a"]"#);
const PK_B: (&str, &str) = ("x-ms-documentdb-partitionkey", r#"["b"]"#);
const QUERY: [(&str, &str); 2] = [
    ("x-ms-documentdb-isquery", "true"),
    ("content-type", "application/query+json"),
];

/// A request carrying a resource token, as the SDKs send it
/// (percent-encoded, dated, no signature of their own).
fn with_token(
    method: &str,
    path: &str,
    token: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> WireRequest {
    let mut map = HeaderMap::new();
    let encoded = percent_encoding::utf8_percent_encode(token, percent_encoding::NON_ALPHANUMERIC)
        .to_string();
    map.insert("authorization", encoded.parse().unwrap());
    map.insert(
        "x-ms-date",
        httpdate::fmt_http_date(SystemTime::now()).parse().unwrap(),
    );
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

fn status(gw: &Gateway, req: WireRequest) -> u16 {
    call(gw, req).0.status
}

/// `d/c` (from [`setup`]) with documents `x` in partition a and `y` in
/// partition b, a second container `other`, a procedure `echo`, and user
/// `u`.
fn fixture() -> Gateway {
    fixture_on(gateway(Database::in_memory()))
}

fn fixture_on(gw: Gateway) -> Gateway {
    let gw = setup_on(gw);
    for (id, pk) in [("x", PK_A), ("y", PK_B)] {
        let key: Value = serde_json::from_str(pk.1).unwrap();
        let body = json!({"id": id, "pk": key[0]}).to_string();
        let (r, doc) = call(
            &gw,
            signed("POST", "/dbs/d/colls/c/docs", &[pk], body.as_bytes()),
        );
        assert_eq!(r.status, 201, "{doc}");
    }
    let (r, _) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls",
            &[],
            br#"{"id":"other","partitionKey":{"paths":["/pk"]}}"#,
        ),
    );
    assert_eq!(r.status, 201);
    let sproc = json!({"id": "echo",
        "body": "function (x) { getContext().getResponse().setBody(x); }"});
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
    let (r, _) = call(&gw, signed("POST", "/dbs/d/users", &[], br#"{"id":"u"}"#));
    assert_eq!(r.status, 201);
    gw
}

/// Creates permission `id` of user `u` and returns it (with `_token`).
fn grant(gw: &Gateway, permission: Value) -> Value {
    let (r, body) = call(
        gw,
        signed(
            "POST",
            "/dbs/d/users/u/permissions",
            &[],
            permission.to_string().as_bytes(),
        ),
    );
    assert_eq!(r.status, 201, "{body}");
    body
}

fn token(permission: &Value) -> String {
    permission["_token"].as_str().unwrap().to_owned()
}

fn query(sql: &str) -> Vec<u8> {
    json!({"query": sql}).to_string().into_bytes()
}

#[test]
fn users_are_resources_of_their_database() {
    let gw = setup();
    let (r, user) = call(&gw, signed("POST", "/dbs/d/users", &[], br#"{"id":"u1"}"#));
    assert_eq!(r.status, 201, "{user}");
    assert_eq!(user["id"], "u1");
    assert_eq!(user["_permissions"], "permissions/");
    let (_, db) = call(&gw, signed("GET", "/dbs/d", &[], b""));
    let rid = user["_rid"].as_str().unwrap();
    assert_eq!(
        user["_self"],
        format!("dbs/{}/users/{rid}/", db["_rid"].as_str().unwrap())
    );
    assert!(user["_etag"].is_string() && user["_ts"].is_u64(), "{user}");

    let (r, body) = call(&gw, signed("POST", "/dbs/d/users", &[], br#"{"id":"u1"}"#));
    assert_error(&r, &body, 409, "Conflict", "already exists");
    let (r, body) = call(&gw, signed("POST", "/dbs/d/users", &[], br#"{"id":7}"#));
    assert_error(&r, &body, 400, "BadRequest", "string id");
    let (r, body) = call(
        &gw,
        signed("POST", "/dbs/nope/users", &[], br#"{"id":"u"}"#),
    );
    assert_error(&r, &body, 404, "NotFound", "database \"nope\"");

    // Upsert: 201 when new, 200 when it exists.
    let upsert = [("x-ms-documentdb-is-upsert", "True")];
    let (r, _) = call(
        &gw,
        signed("POST", "/dbs/d/users", &upsert, br#"{"id":"u2"}"#),
    );
    assert_eq!(r.status, 201);
    let (r, again) = call(
        &gw,
        signed("POST", "/dbs/d/users", &upsert, br#"{"id":"u2"}"#),
    );
    assert_eq!((r.status, &again["id"]), (200, &json!("u2")));

    let (r, list) = call(&gw, signed("GET", "/dbs/d/users", &[], b""));
    assert_eq!(r.status, 200);
    assert_eq!(list["_count"], 2);
    assert_eq!(list["Users"][0]["id"], "u1");
    let body = json!({"query": "SELECT * FROM root r WHERE r.id=@id",
                      "parameters": [{"name": "@id", "value": "u2"}]});
    let (_, found) = call(
        &gw,
        signed("POST", "/dbs/d/users", &QUERY, body.to_string().as_bytes()),
    );
    assert_eq!(found["Users"].as_array().unwrap().len(), 1, "{found}");

    // By rid, and renamed by a replace (the rid stays).
    let (r, by_rid) = call(
        &gw,
        signed(
            "GET",
            &format!("/{}", user["_self"].as_str().unwrap()),
            &[],
            b"",
        ),
    );
    assert_eq!((r.status, &by_rid["id"]), (200, &json!("u1")));
    let (r, renamed) = call(
        &gw,
        signed("PUT", "/dbs/d/users/u1", &[], br#"{"id":"u3"}"#),
    );
    assert_eq!(r.status, 200, "{renamed}");
    assert_eq!(
        (&renamed["id"], &renamed["_rid"]),
        (&json!("u3"), &user["_rid"])
    );
    let (r, body) = call(
        &gw,
        signed("PUT", "/dbs/d/users/u3", &[], br#"{"id":"u2"}"#),
    );
    assert_error(&r, &body, 409, "Conflict", "\"u2\"");
    let (r, body) = call(&gw, signed("GET", "/dbs/d/users/u1", &[], b""));
    assert_error(&r, &body, 404, "NotFound", "user \"u1\" does not exist");

    let (r, _) = call(&gw, signed("DELETE", "/dbs/d/users/u3", &[], b""));
    assert_eq!(r.status, 204);
    let (r, _) = call(&gw, signed("DELETE", "/dbs/d/users/u3", &[], b""));
    assert_eq!(r.status, 404);
}

#[test]
fn permissions_are_validated_and_one_per_resource() {
    let gw = fixture();
    let perm = grant(
        &gw,
        json!({"id": "p", "permissionMode": "Read", "resource": "dbs/d/colls/c"}),
    );
    let (_, user) = call(&gw, signed("GET", "/dbs/d/users/u", &[], b""));
    assert_eq!(
        perm["_self"],
        format!(
            "{}permissions/{}/",
            user["_self"].as_str().unwrap(),
            perm["_rid"].as_str().unwrap()
        )
    );
    assert!(
        token(&perm).starts_with("type=resource&ver=1.0&sig="),
        "{perm}"
    );
    assert_eq!(perm["permissionMode"], "Read");
    assert!(perm.get("resourcePartitionKey").is_none(), "{perm}");

    let bad = [
        (
            json!({"id": "q", "permissionMode": "Write", "resource": "dbs/d/colls/c"}),
            "permissionMode must be \"All\" or \"Read\"",
        ),
        (
            json!({"id": "q", "permissionMode": "All", "resource": "dbs/d"}),
            "neither a container link",
        ),
        (
            json!({"id": "q", "permissionMode": "All", "resource": "dbs/d/colls/c/sprocs/echo"}),
            "neither a container link",
        ),
        (
            json!({"id": "q", "permissionMode": "All"}),
            "needs a resource",
        ),
        (
            json!({"id": "q", "permissionMode": "All", "resource": "dbs/d/colls/other",
                   "resourcePartitionKey": "a"}),
            "resourcePartitionKey",
        ),
    ];
    for (body, needle) in bad {
        let (r, err) = call(
            &gw,
            signed(
                "POST",
                "/dbs/d/users/u/permissions",
                &[],
                body.to_string().as_bytes(),
            ),
        );
        assert_error(&r, &err, 400, "BadRequest", needle);
    }
    // A second permission on the same resource, or the same id again.
    let second = json!({"id": "p2", "permissionMode": "All", "resource": "/dbs/d/colls/c/"});
    let (r, err) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/users/u/permissions",
            &[],
            second.to_string().as_bytes(),
        ),
    );
    assert_error(&r, &err, 409, "Conflict", "one permission per resource");
    let same_id = json!({"id": "p", "permissionMode": "All", "resource": "dbs/d/colls/other"});
    let (r, err) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/users/u/permissions",
            &[],
            same_id.to_string().as_bytes(),
        ),
    );
    assert_error(&r, &err, 409, "Conflict", "already exists");

    // Reads by name and by rid; a list and a query, each with tokens.
    let (r, read) = call(&gw, signed("GET", "/dbs/d/users/u/permissions/p", &[], b""));
    assert_eq!((r.status, &read["_rid"]), (200, &perm["_rid"]));
    let (r, by_rid) = call(
        &gw,
        signed(
            "GET",
            &format!("/{}", perm["_self"].as_str().unwrap()),
            &[],
            b"",
        ),
    );
    assert_eq!((r.status, &by_rid["id"]), (200, &json!("p")), "{by_rid}");
    let (_, list) = call(&gw, signed("GET", "/dbs/d/users/u/permissions", &[], b""));
    assert_eq!(list["_count"], 1);
    assert!(list["Permissions"][0]["_token"].is_string(), "{list}");
    let (r, err) = call(
        &gw,
        signed("GET", "/dbs/d/users/u/permissions/nope", &[], b""),
    );
    assert_error(
        &r,
        &err,
        404,
        "NotFound",
        "permission \"nope\" does not exist",
    );
    let (r, err) = call(
        &gw,
        signed("GET", "/dbs/d/users/nobody/permissions", &[], b""),
    );
    assert_error(&r, &err, 404, "NotFound", "user \"nobody\"");

    // The expiry header: at most 5 hours.
    let (r, err) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/users/u/permissions/p",
            &[("x-ms-documentdb-expiry-seconds", "18001")],
            b"",
        ),
    );
    assert_error(&r, &err, 400, "BadRequest", "from 1 to 18000");
    let (r, short) = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/users/u/permissions/p",
            &[("x-ms-documentdb-expiry-seconds", "60")],
            b"",
        ),
    );
    assert_eq!(r.status, 200);
    assert_ne!(short["_token"], perm["_token"]);

    // Upsert replaces by id; a replace may rename.
    let upsert = json!({"id": "p", "permissionMode": "all", "resource": "dbs/d/colls/c"});
    let (r, upserted) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/users/u/permissions",
            &[("x-ms-documentdb-is-upsert", "True")],
            upsert.to_string().as_bytes(),
        ),
    );
    assert_eq!(r.status, 200, "{upserted}");
    assert_eq!(
        upserted["permissionMode"], "all",
        "the client's spelling is echoed"
    );
    let renamed = json!({"id": "p9", "permissionMode": "All", "resource": "dbs/d/colls/c"});
    let (r, body) = call(
        &gw,
        signed(
            "PUT",
            "/dbs/d/users/u/permissions/p",
            &[],
            renamed.to_string().as_bytes(),
        ),
    );
    assert_eq!((r.status, &body["_rid"]), (200, &perm["_rid"]), "{body}");
    let (r, _) = call(
        &gw,
        signed("DELETE", "/dbs/d/users/u/permissions/p9", &[], b""),
    );
    assert_eq!(r.status, 204);
    let (_, list) = call(&gw, signed("GET", "/dbs/d/users/u/permissions", &[], b""));
    assert_eq!(list["_count"], 0);
}

#[test]
fn a_read_token_reads_its_container_and_writes_nothing() {
    let gw = fixture();
    let t = token(&grant(
        &gw,
        json!({"id": "p", "permissionMode": "Read", "resource": "dbs/d/colls/c"}),
    ));
    let allowed = [
        with_token("GET", "/", &t, &[], b""),
        with_token("GET", "/dbs/d/colls/c", &t, &[], b""),
        with_token("GET", "/dbs/d/colls/c/pkranges", &t, &[], b""),
        with_token("GET", "/dbs/d/colls/c/docs/x", &t, &[PK_A], b""),
        with_token("GET", "/dbs/d/colls/c/docs", &t, &[], b""),
        with_token(
            "GET",
            "/dbs/d/colls/c/docs",
            &t,
            &[("a-im", "Incremental Feed")],
            b"",
        ),
        with_token(
            "POST",
            "/dbs/d/colls/c/docs",
            &t,
            &[
                QUERY[0],
                QUERY[1],
                ("x-ms-documentdb-query-enablecrosspartition", "True"),
            ],
            &query("SELECT * FROM c"),
        ),
        with_token("GET", "/dbs/d/colls/c/sprocs/echo", &t, &[], b""),
        with_token("GET", "/dbs/d/colls/c/conflicts", &t, &[], b""),
    ];
    for req in allowed {
        let path = format!("{} {}", req.method, req.path);
        let (r, body) = call(&gw, req);
        assert_eq!(r.status, 200, "{path}: {body}");
    }
    let doc = br#"{"id":"n","pk":"a"}"#;
    let refused = [
        with_token("POST", "/dbs/d/colls/c/docs", &t, &[PK_A], doc),
        with_token(
            "PUT",
            "/dbs/d/colls/c/docs/x",
            &t,
            &[PK_A],
            br#"{"id":"x","pk":"a"}"#,
        ),
        with_token("DELETE", "/dbs/d/colls/c/docs/x", &t, &[PK_A], b""),
        with_token("POST", "/dbs/d/colls/c/sprocs/echo", &t, &[PK_A], b"[]"),
        with_token("DELETE", "/dbs/d/colls/c", &t, &[], b""),
        with_token("GET", "/dbs/d/colls/other/docs", &t, &[], b""),
    ];
    for req in refused {
        let path = format!("{} {}", req.method, req.path);
        let (r, body) = call(&gw, req);
        assert_eq!(r.status, 403, "{path}: {body}");
    }
    let (r, body) = call(
        &gw,
        with_token("POST", "/dbs/d/colls/c/docs", &t, &[PK_A], doc),
    );
    assert_error(&r, &body, 403, "Forbidden", "the permission is Read");
}

#[test]
fn an_all_token_writes_in_its_container_and_nothing_else() {
    let gw = fixture();
    let t = token(&grant(
        &gw,
        json!({"id": "p", "permissionMode": "All", "resource": "dbs/d/colls/c"}),
    ));
    let ok = [
        (
            with_token(
                "POST",
                "/dbs/d/colls/c/docs",
                &t,
                &[PK_A],
                br#"{"id":"n","pk":"a"}"#,
            ),
            201,
        ),
        (
            with_token(
                "PUT",
                "/dbs/d/colls/c/docs/n",
                &t,
                &[PK_A],
                br#"{"id":"n","pk":"a","v":2}"#,
            ),
            200,
        ),
        (
            with_token("DELETE", "/dbs/d/colls/c/docs/n", &t, &[PK_A], b""),
            204,
        ),
        (
            with_token("POST", "/dbs/d/colls/c/sprocs/echo", &t, &[PK_B], b"[1]"),
            200,
        ),
    ];
    for (req, want) in ok {
        let path = format!("{} {}", req.method, req.path);
        let (r, body) = call(&gw, req);
        assert_eq!(r.status, want, "{path}: {body}");
    }
    // Master-key-only operations, and everything outside the container.
    let coll = br#"{"id":"c","partitionKey":{"paths":["/pk"]}}"#;
    let refused = [
        with_token("DELETE", "/dbs/d/colls/c", &t, &[], b""),
        with_token("PUT", "/dbs/d/colls/c", &t, &[], coll),
        with_token("GET", "/dbs/d", &t, &[], b""),
        with_token("GET", "/dbs", &t, &[], b""),
        with_token("POST", "/dbs", &t, &[], br#"{"id":"e"}"#),
        with_token("POST", "/dbs/d/colls", &t, &[], coll),
        with_token("GET", "/dbs/d/colls", &t, &[], b""),
        with_token("GET", "/offers", &t, &[], b""),
        with_token("GET", "/dbs/d/users", &t, &[], b""),
        with_token("GET", "/dbs/d/users/u/permissions/p", &t, &[], b""),
        with_token(
            "POST",
            "/dbs/d/colls/c/sprocs",
            &t,
            &[],
            br#"{"id":"s","body":"function(){}"}"#,
        ),
        with_token("DELETE", "/dbs/d/colls/c/sprocs/echo", &t, &[], b""),
        with_token(
            "POST",
            "/dbs/d/colls/other/docs",
            &t,
            &[PK_A],
            br#"{"id":"n","pk":"a"}"#,
        ),
        with_token("GET", "/dbs/d/colls/other", &t, &[], b""),
    ];
    for req in refused {
        let path = format!("{} {}", req.method, req.path);
        let (r, body) = call(&gw, req);
        assert_eq!(r.status, 403, "{path}: {body}");
    }
    // The same container addressed by rid is the same scope.
    let (_, c) = call(&gw, signed("GET", "/dbs/d/colls/c", &[], b""));
    let (_, x) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/x", &[PK_A], b""));
    let self_link = format!("/{}", x["_self"].as_str().unwrap());
    assert_eq!(
        status(&gw, with_token("GET", &self_link, &t, &[PK_A], b"")),
        200
    );
    let coll_self = format!("/{}", c["_self"].as_str().unwrap());
    assert_eq!(
        status(&gw, with_token("DELETE", &coll_self, &t, &[], b"")),
        403
    );
}

#[test]
fn a_partition_token_cannot_read_write_query_or_run_a_procedure_in_another_partition() {
    let gw = fixture();
    let t = token(&grant(
        &gw,
        json!({"id": "p", "permissionMode": "All", "resource": "dbs/d/colls/c",
               "resourcePartitionKey": ["a"]}),
    ));
    let cross = [("x-ms-documentdb-query-enablecrosspartition", "true")];
    let in_a = [
        (
            with_token("GET", "/dbs/d/colls/c/docs/x", &t, &[PK_A], b""),
            200,
        ),
        (
            with_token(
                "POST",
                "/dbs/d/colls/c/docs",
                &t,
                &[PK_A],
                br#"{"id":"n","pk":"a"}"#,
            ),
            201,
        ),
        (
            with_token("DELETE", "/dbs/d/colls/c/docs/n", &t, &[PK_A], b""),
            204,
        ),
        (
            with_token(
                "POST",
                "/dbs/d/colls/c/docs",
                &t,
                &[QUERY[0], QUERY[1], PK_A],
                &query("SELECT * FROM c"),
            ),
            200,
        ),
        (
            with_token("GET", "/dbs/d/colls/c/docs", &t, &[PK_A], b""),
            200,
        ),
        (
            with_token("POST", "/dbs/d/colls/c/sprocs/echo", &t, &[PK_A], b"[1]"),
            200,
        ),
    ];
    for (req, want) in in_a {
        let path = format!("{} {}", req.method, req.path);
        let (r, body) = call(&gw, req);
        assert_eq!(r.status, want, "{path}: {body}");
    }
    let batch = json!([{"operationType": "Create", "resourceBody": {"id": "m", "pk": "b"}}]);
    let bulk = json!([
        {"operationType": "Create", "partitionKey": "[\"a\"]", "resourceBody": {"id": "m", "pk": "a"}},
        {"operationType": "Create", "partitionKey": "[\"b\"]", "resourceBody": {"id": "m", "pk": "b"}},
    ]);
    let in_b = [
        with_token("GET", "/dbs/d/colls/c/docs/y", &t, &[PK_B], b""),
        with_token(
            "POST",
            "/dbs/d/colls/c/docs",
            &t,
            &[PK_B],
            br#"{"id":"n","pk":"b"}"#,
        ),
        with_token(
            "PUT",
            "/dbs/d/colls/c/docs/y",
            &t,
            &[PK_B],
            br#"{"id":"y","pk":"b"}"#,
        ),
        with_token("DELETE", "/dbs/d/colls/c/docs/y", &t, &[PK_B], b""),
        with_token(
            "POST",
            "/dbs/d/colls/c/docs",
            &t,
            &[QUERY[0], QUERY[1], PK_B],
            &query("SELECT * FROM c"),
        ),
        with_token("POST", "/dbs/d/colls/c/sprocs/echo", &t, &[PK_B], b"[1]"),
        with_token(
            "POST",
            "/dbs/d/colls/c/docs",
            &t,
            &[("x-ms-cosmos-is-batch-request", "True"), PK_B],
            batch.to_string().as_bytes(),
        ),
        with_token(
            "POST",
            "/dbs/d/colls/c/docs",
            &t,
            &[
                ("x-ms-cosmos-is-batch-request", "True"),
                ("x-ms-cosmos-batch-atomic", "False"),
                PK_A,
            ],
            bulk.to_string().as_bytes(),
        ),
        with_token(
            "POST",
            "/dbs/d/colls/c/operations/partitionkeydelete",
            &t,
            &[PK_B],
            b"",
        ),
        // No partition at all: every partition, so b too.
        with_token(
            "POST",
            "/dbs/d/colls/c/docs",
            &t,
            &[QUERY[0], QUERY[1], cross[0]],
            &query("SELECT * FROM c"),
        ),
        with_token("GET", "/dbs/d/colls/c/docs", &t, &[], b""),
        with_token(
            "GET",
            "/dbs/d/colls/c/docs",
            &t,
            &[("a-im", "Incremental Feed")],
            b"",
        ),
        with_token(
            "POST",
            "/dbs/d/colls/c/docs",
            &t,
            &[],
            br#"{"id":"n","pk":"a"}"#,
        ),
    ];
    for req in in_b {
        let path = format!("{} {}", req.method, req.path);
        let (r, body) = call(&gw, req);
        assert_eq!(r.status, 403, "{path}: {body}");
    }
    // A feed may name the partition by its effective partition key, as
    // the Python SDK's change feed for one key does; only a's.
    let epk =
        |key: &str| partita_server::effective_partition_key(&partita::PartitionKey::from(key));
    let feed = |start: &str, end: &str| {
        let headers = [
            ("a-im", "Incremental Feed"),
            ("x-ms-start-epk", start),
            ("x-ms-end-epk", end),
        ];
        status(
            &gw,
            with_token("GET", "/dbs/d/colls/c/docs", &t, &headers, b""),
        )
    };
    assert_eq!(feed(&epk("a"), &epk("a")), 200);
    let mut next = u128::from_str_radix(&epk("a"), 16).unwrap() + 1;
    let width = epk("a").len();
    let normalized = format!("{next:0width$X}");
    assert_eq!(feed(&epk("a"), &normalized), 200);
    next += 1;
    assert_eq!(feed(&epk("a"), &format!("{next:0width$X}")), 403);
    assert_eq!(feed(&epk("b"), &epk("b")), 403);
    assert_eq!(feed("", "FF"), 403);
    assert_eq!(feed(&epk("a"), "FF"), 403);

    // Nothing was written in b, and y is still there.
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/y", &[PK_B], b""));
    assert_eq!(r.status, 200);
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/m", &[PK_B], b""));
    assert_eq!(r.status, 404);
    let (r, body) = call(
        &gw,
        with_token("GET", "/dbs/d/colls/c/docs/y", &t, &[PK_B], b""),
    );
    assert_error(
        &r,
        &body,
        403,
        "Forbidden",
        "confined to the logical partition [\"a\"]",
    );
}

#[test]
fn a_document_token_allows_that_document_only() {
    let gw = fixture();
    let t = token(&grant(
        &gw,
        json!({"id": "p", "permissionMode": "All", "resource": "dbs/d/colls/c/docs/x"}),
    ));
    for req in [
        with_token("GET", "/dbs/d/colls/c/docs/y", &t, &[PK_B], b""),
        with_token("GET", "/dbs/d/colls/c/docs", &t, &[PK_A], b""),
        with_token(
            "POST",
            "/dbs/d/colls/c/docs",
            &t,
            &[QUERY[0], QUERY[1], PK_A],
            &query("SELECT * FROM c"),
        ),
        with_token(
            "POST",
            "/dbs/d/colls/c/docs",
            &t,
            &[PK_A],
            br#"{"id":"n","pk":"a"}"#,
        ),
        with_token("POST", "/dbs/d/colls/c/sprocs/echo", &t, &[PK_A], b"[1]"),
        with_token("GET", "/dbs/d/colls/c/sprocs/echo", &t, &[], b""),
        with_token("DELETE", "/dbs/d/colls/c", &t, &[], b""),
    ] {
        let path = format!("{} {}", req.method, req.path);
        let (r, body) = call(&gw, req);
        assert_eq!(r.status, 403, "{path}: {body}");
    }
    assert_eq!(
        status(&gw, with_token("GET", "/dbs/d/colls/c", &t, &[], b"")),
        200
    );
    assert_eq!(
        status(
            &gw,
            with_token("GET", "/dbs/d/colls/c/docs/x", &t, &[PK_A], b"")
        ),
        200
    );
    assert_eq!(
        status(
            &gw,
            with_token("DELETE", "/dbs/d/colls/c/docs/x", &t, &[PK_A], b"")
        ),
        204
    );

    // A Read document token by rid: reads of it, no writes.
    let (_, y) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/y", &[PK_B], b""));
    let (_, c) = call(&gw, signed("GET", "/dbs/d/colls/c", &[], b""));
    let link = format!(
        "{}docs/{}",
        c["_self"].as_str().unwrap(),
        y["_rid"].as_str().unwrap()
    );
    let t = token(&grant(
        &gw,
        json!({"id": "q", "permissionMode": "Read", "resource": link}),
    ));
    assert_eq!(
        status(
            &gw,
            with_token("GET", "/dbs/d/colls/c/docs/y", &t, &[PK_B], b"")
        ),
        200
    );
    assert_eq!(
        status(
            &gw,
            with_token("DELETE", "/dbs/d/colls/c/docs/y", &t, &[PK_B], b"")
        ),
        403
    );
}

#[test]
fn forged_changed_expired_and_revoked_tokens_are_refused() {
    let gw = fixture();
    let perm = grant(
        &gw,
        json!({"id": "p", "permissionMode": "All", "resource": "dbs/d/colls/c",
               "resourcePartitionKey": ["a"]}),
    );
    let t = token(&perm);
    let read = |t: &str| with_token("GET", "/dbs/d/colls/c/docs/x", t, &[PK_A], b"");
    assert_eq!(status(&gw, read(&t)), 200);

    // Any changed byte of the MAC, or a claim changed (a later expiry).
    let (head, mac) = t.rsplit_once('.').unwrap();
    let flipped: String = mac
        .chars()
        .enumerate()
        .map(|(i, ch)| {
            if i == 3 {
                if ch == 'A' { 'B' } else { 'A' }
            } else {
                ch
            }
        })
        .collect();
    let (r, body) = call(&gw, read(&format!("{head}.{flipped}")));
    assert_error(&r, &body, 401, "Unauthorized", "can't serve the request");
    let sig = head.strip_prefix("type=resource&ver=1.0&sig=").unwrap();
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let claims = String::from_utf8(b64.decode(sig).unwrap()).unwrap();
    let (rest, expiry) = claims.rsplit_once(';').unwrap();
    let later = format!("{rest};{}", expiry.parse::<u64>().unwrap() + 86_400);
    let forged = format!("type=resource&ver=1.0&sig={}.{mac}", b64.encode(later));
    assert_eq!(status(&gw, read(&forged)), 401);
    for garbage in [
        "type=resource&ver=1.0&sig=abc",
        "type=resource&ver=1.0",
        "type=aad&sig=x",
    ] {
        assert_eq!(status(&gw, read(garbage)), 401, "{garbage}");
    }
    // No authorization at all, even for the account.
    let mut bare = with_token("GET", "/", &t, &[], b"");
    bare.headers.remove("authorization");
    let (r, body) = call(&gw, bare);
    assert_error(&r, &body, 401, "Unauthorized", "authorization");
    // Expired: 403, as the service says it.
    let later = SystemTime::now() + Duration::from_secs(3601);
    let response = gw.handle(&read(&t), later);
    assert_eq!(response.status, 403);
    let body: Value = serde_json::from_slice(&response.body).unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("not valid at the current time"),
        "{body}"
    );
    let short = call(
        &gw,
        signed(
            "GET",
            "/dbs/d/users/u/permissions/p",
            &[("x-ms-documentdb-expiry-seconds", "10")],
            b"",
        ),
    )
    .1;
    let in_a_minute = SystemTime::now() + Duration::from_secs(60);
    assert_eq!(gw.handle(&read(&token(&short)), in_a_minute).status, 403);
    assert_eq!(gw.handle(&read(&t), in_a_minute).status, 200);

    // A replace with the same grant keeps tokens; a narrower one ends them.
    let same = json!({"id": "p", "permissionMode": "All", "resource": "dbs/d/colls/c",
                      "resourcePartitionKey": ["a"]});
    call(
        &gw,
        signed(
            "PUT",
            "/dbs/d/users/u/permissions/p",
            &[],
            same.to_string().as_bytes(),
        ),
    );
    assert_eq!(status(&gw, read(&t)), 200);
    let narrower = json!({"id": "p", "permissionMode": "Read", "resource": "dbs/d/colls/c",
                          "resourcePartitionKey": ["a"]});
    let (r, now_read) = call(
        &gw,
        signed(
            "PUT",
            "/dbs/d/users/u/permissions/p",
            &[],
            narrower.to_string().as_bytes(),
        ),
    );
    assert_eq!(r.status, 200);
    assert_eq!(status(&gw, read(&t)), 401);
    let t2 = token(&now_read);
    assert_eq!(status(&gw, read(&t2)), 200);

    // Deleting the permission, or its user, ends its tokens.
    call(
        &gw,
        signed("DELETE", "/dbs/d/users/u/permissions/p", &[], b""),
    );
    assert_eq!(status(&gw, read(&t2)), 401);
    // A new permission with the same grant does not revive them.
    grant(&gw, narrower);
    assert_eq!(status(&gw, read(&t2)), 401);
    let t3 = token(&call(&gw, signed("GET", "/dbs/d/users/u/permissions/p", &[], b"")).1);
    assert_eq!(status(&gw, read(&t3)), 200);
    call(&gw, signed("DELETE", "/dbs/d/users/u", &[], b""));
    assert_eq!(status(&gw, read(&t3)), 401);
}

#[test]
fn a_token_is_refused_before_the_body_is_read_when_it_is_not_valid() {
    let gw = fixture();
    let t = token(&grant(
        &gw,
        json!({"id": "p", "permissionMode": "Read", "resource": "dbs/d/colls/c"}),
    ));
    let req = with_token("GET", "/dbs/d/colls/c/docs/x", &t, &[PK_A], b"");
    gw.authorize(&req.method, &req.path, &req.headers, SystemTime::now())
        .unwrap();
    let expired: WireResponse = gw
        .authorize(
            &req.method,
            &req.path,
            &req.headers,
            SystemTime::now() + Duration::from_secs(7200),
        )
        .unwrap_err();
    assert_eq!(expired.status, 403);
    let forged = with_token(
        "GET",
        "/dbs/d/colls/c/docs/x",
        "type=resource&ver=1.0&sig=x.y",
        &[],
        b"",
    );
    let refused = gw
        .authorize(
            &forged.method,
            &forged.path,
            &forged.headers,
            SystemTime::now(),
        )
        .unwrap_err();
    assert_eq!(refused.status, 401);
}

#[test]
fn users_and_permissions_survive_a_restart_and_go_with_their_database() {
    let dir = tempfile::tempdir().unwrap();
    let (t, perm_self) = {
        let gw = fixture_on(gateway(Database::open(dir.path()).unwrap()));
        let perm = grant(
            &gw,
            json!({"id": "p", "permissionMode": "Read", "resource": "dbs/d/colls/c"}),
        );
        (token(&perm), perm["_self"].clone())
    };
    let gw = gateway(Database::open(dir.path()).unwrap());
    assert_eq!(
        status(
            &gw,
            with_token("GET", "/dbs/d/colls/c/docs/x", &t, &[PK_A], b"")
        ),
        200
    );
    let (r, perm) = call(&gw, signed("GET", "/dbs/d/users/u/permissions/p", &[], b""));
    assert_eq!((r.status, &perm["_self"]), (200, &perm_self));
    // A new user after the restart gets a rid of its own.
    let (_, u2) = call(&gw, signed("POST", "/dbs/d/users", &[], br#"{"id":"u2"}"#));
    let (_, u) = call(&gw, signed("GET", "/dbs/d/users/u", &[], b""));
    assert_ne!(u2["_rid"], u["_rid"]);

    let (r, _) = call(&gw, signed("DELETE", "/dbs/d", &[], b""));
    assert_eq!(r.status, 204);
    assert_eq!(status(&gw, with_token("GET", "/", &t, &[], b"")), 401);
    call(&gw, signed("POST", "/dbs", &[], br#"{"id":"d"}"#));
    let (_, users) = call(&gw, signed("GET", "/dbs/d/users", &[], b""));
    assert_eq!(users["_count"], 0, "{users}");
    drop(gw);
    let gw = gateway(Database::open(dir.path()).unwrap());
    let (_, users) = call(&gw, signed("GET", "/dbs/d/users", &[], b""));
    assert_eq!(users["_count"], 0, "{users}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Fuzz: any request with the master key or one of several tokens, on
    /// users and permissions as on documents, gets an answer with a known
    /// status and nothing panics; a `Read` token never gets a write through.
    #[test]
    fn no_token_request_panics_and_read_tokens_never_write(
        method in proptest::sample::select(vec!["GET", "POST", "PUT", "DELETE", "PATCH"]),
        path in proptest::collection::vec(
            proptest::sample::select(vec!["dbs", "d", "colls", "c", "other", "docs", "x", "y",
                "sprocs", "echo", "users", "u", "permissions", "p", "pkranges", "operations",
                "partitionkeydelete", "offers", "%ff", ""]), 0..8),
        headers in proptest::collection::vec((
            proptest::sample::select(vec!["x-ms-documentdb-partitionkey", "x-ms-documentdb-isquery",
                "x-ms-documentdb-is-upsert", "x-ms-cosmos-is-batch-request",
                "x-ms-cosmos-batch-atomic", "x-ms-documentdb-query-enablecrosspartition",
                "x-ms-documentdb-expiry-seconds", "x-ms-start-epk", "x-ms-end-epk", "a-im",
                "content-type", "x-ms-cosmos-is-query-plan-request"]),
            proptest::sample::select(vec!["[\"a\"]", "[\"b\"]", "[]", "True", "False", "0",
                "60", "18001", "Incremental Feed", "application/query+json", "", "FF", "garbage"]),
        ), 0..5),
        body in proptest::sample::select(vec![
            String::new(), "{".to_owned(), "[]".to_owned(),
            r#"{"id":"x","pk":"a"}"#.to_owned(), r#"{"id":"n","pk":"b"}"#.to_owned(),
            r#"{"id":"u2"}"#.to_owned(), r#"{"query":"SELECT * FROM c"}"#.to_owned(),
            r#"{"id":"q","permissionMode":"All","resource":"dbs/d/colls/c/docs/y"}"#.to_owned(),
            r#"{"id":"q","permissionMode":"none","resource":"dbs/d"}"#.to_owned(),
            r#"[{"operationType":"Create","partitionKey":"[\"b\"]","resourceBody":{"id":"m","pk":"b"}}]"#.to_owned(),
        ]),
        who in 0..4usize,
    ) {
        let gw = fixture();
        let tokens = [
            ("r", json!({"id": "r", "permissionMode": "Read", "resource": "dbs/d/colls/c"})),
            ("a", json!({"id": "a", "permissionMode": "All", "resource": "dbs/d/colls/other",
                         "resourcePartitionKey": ["a"]})),
            ("x", json!({"id": "x", "permissionMode": "All", "resource": "dbs/d/colls/c/docs/x"})),
        ];
        let tokens: Vec<String> = tokens.into_iter().map(|(_, p)| token(&grant(&gw, p))).collect();
        let path = format!("/{}", path.join("/"));
        let mut req = match who {
            0 => signed(method, &path, &[], body.as_bytes()),
            n => with_token(method, &path, &tokens[n - 1], &[], body.as_bytes()),
        };
        for (name, value) in headers {
            req.headers.insert(name, value.parse().unwrap());
        }
        let (is_query, is_plan) = (
            req.headers.contains_key("x-ms-documentdb-isquery")
                || req.headers.get("content-type").is_some_and(|v| v == "application/query+json"),
            req.headers.contains_key("x-ms-cosmos-is-query-plan-request"),
        );
        let response = gw.handle(&req, SystemTime::now());
        proptest::prop_assert!(
            [200, 201, 204, 304, 400, 401, 403, 404, 405, 409, 412, 500].contains(&response.status),
            "status {}", response.status
        );
        if response.status >= 400 && response.status != 500 {
            let body: Value = serde_json::from_slice(&response.body).unwrap();
            proptest::prop_assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
        }
        if who == 1 && response.status < 300 {
            proptest::prop_assert!(
                method == "GET" || (method == "POST" && (is_query || is_plan)),
                "a Read token's {method} {path} got {}", response.status
            );
        }
    }
}

/// An AAD token of the form the emulator's test credential builds: a JWT
/// whose signature segment is the account key's base64 text.
fn aad_token(key: &str, claims: Value) -> String {
    use base64::Engine as _;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let header = br#"{"typ":"JWT","alg":"RS256","kid":"CosmosEmulatorPrimaryMaster"}"#;
    format!(
        "type=aad&ver=1.0&sig={}.{}.{}",
        b64(header),
        b64(claims.to_string().as_bytes()),
        b64(key.as_bytes())
    )
}

#[test]
fn emulator_aad_tokens_carry_the_key_and_their_lifetime() {
    let gw = setup();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let live = json!({"iat": now, "nbf": now, "exp": now + 7200});
    let token = aad_token(partita_server::EMULATOR_KEY, live.clone());
    // As good as the key: databases, containers, documents.
    assert_eq!(
        status(&gw, with_token("GET", "/dbs/d", &token, &[], b"")),
        200
    );
    assert_eq!(
        status(
            &gw,
            with_token(
                "POST",
                "/dbs/d/colls/c/docs",
                &token,
                &[("x-ms-documentdb-partitionkey", r#"["a"]"#)],
                br#"{"id":"aad","pk":"a"}"#
            )
        ),
        201
    );
    // Another key, an expired token, a mangled one: 401.
    let other = "b3RoZXIga2V5IG9mIHNpeHRlZW4gYnl0ZXMgYXQgbGVhc3Q=";
    let expired = json!({"nbf": now - 9000, "exp": now - 7200});
    for (token, needle) in [
        (aad_token(other, live), "not this account's key"),
        (
            aad_token(partita_server::EMULATOR_KEY, expired),
            "not valid at the current time",
        ),
        (
            "type=aad&ver=1.0&sig=not-a-jwt".to_owned(),
            "not one the emulator accepts",
        ),
    ] {
        let (r, body) = call(&gw, with_token("GET", "/dbs/d", &token, &[], b""));
        assert_error(&r, &body, 401, "Unauthorized", needle);
    }
}
