//! `partita serve` addressed by resource id: the `_rid`s and `_self` links
//! it hands out (distinct per database, each embedding its parent's), and
//! every request made with them, signed as the SDKs sign them (the last
//! rid, lower-cased), served as the same request by name.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use partita::Database;
use partita_server::{EMULATOR_KEY, Gateway, MasterKey, WireResponse};
use serde_json::{Value, json};

use crate::server::{assert_error, call, gateway, setup, signed};

const PK: (&str, &str) = ("x-ms-documentdb-partitionkey", r#"["p"]"#);

fn rid_bytes(rid: &Value) -> Vec<u8> {
    STANDARD
        .decode(rid.as_str().unwrap().replace('-', "/"))
        .unwrap()
}

/// `/` + a `_self` link, the path a client sends for it.
fn path(link: &Value) -> String {
    format!("/{}", link.as_str().unwrap())
}

fn get(gw: &Gateway, path: &str) -> (WireResponse, Value) {
    call(gw, signed("GET", path, &[], b""))
}

/// A document `{"id": id, "pk": "p"}` created by name in `d/c`.
fn create(gw: &Gateway, id: &str) -> Value {
    let body = json!({"id": id, "pk": "p", "n": 1}).to_string();
    let (r, doc) = call(
        gw,
        signed("POST", "/dbs/d/colls/c/docs", &[PK], body.as_bytes()),
    );
    assert_eq!(r.status, 201, "{doc}");
    doc
}

#[test]
fn every_database_has_its_own_rid_and_children_embed_their_parents() {
    let gw = setup();
    call(&gw, signed("POST", "/dbs", &[], br#"{"id":"e"}"#));
    let (_, d) = get(&gw, "/dbs/d");
    let (_, e) = get(&gw, "/dbs/e");
    assert_ne!(d["_rid"], e["_rid"]);
    for db in [&d, &e] {
        assert_eq!(rid_bytes(&db["_rid"]).len(), 4, "{db}");
        assert_eq!(
            db["_self"],
            format!("dbs/{}/", db["_rid"].as_str().unwrap())
        );
    }
    let (_, list) = get(&gw, "/dbs");
    let rids: Vec<&Value> = list["Databases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|db| &db["_rid"])
        .collect();
    assert_eq!(rids, [&d["_rid"], &e["_rid"]]);

    let (_, coll) = get(&gw, "/dbs/d/colls/c");
    let coll_rid = rid_bytes(&coll["_rid"]);
    assert_eq!(coll_rid.len(), 8);
    assert_eq!(coll_rid[..4], rid_bytes(&d["_rid"])[..]);
    let coll_self = format!(
        "dbs/{}/colls/{}/",
        d["_rid"].as_str().unwrap(),
        coll["_rid"].as_str().unwrap()
    );
    assert_eq!(coll["_self"], coll_self);
    let (_, colls) = get(&gw, "/dbs/d/colls");
    assert_eq!(colls["_rid"], d["_rid"]);

    let doc = create(&gw, "a");
    let doc_rid = rid_bytes(&doc["_rid"]);
    assert_eq!(doc_rid.len(), 16);
    assert_eq!(doc_rid[..8], coll_rid[..]);
    assert_eq!(
        doc["_self"],
        format!("{coll_self}docs/{}/", doc["_rid"].as_str().unwrap())
    );

    let (r, sproc) = call(
        &gw,
        signed(
            "POST",
            "/dbs/d/colls/c/sprocs",
            &[],
            br#"{"id":"sp","body":"function () { getContext().getResponse().setBody(7); }"}"#,
        ),
    );
    assert_eq!(r.status, 201, "{sproc}");
    assert_eq!(rid_bytes(&sproc["_rid"])[..8], coll_rid[..]);
    assert!(
        sproc["_self"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{coll_self}sprocs/"))
    );
    let (_, ranges) = get(&gw, "/dbs/d/colls/c/pkranges");
    let range_self = ranges["PartitionKeyRanges"][0]["_self"].as_str().unwrap();
    assert!(
        range_self.starts_with(&format!("{coll_self}pkranges/")),
        "{range_self}"
    );
}

#[test]
fn a_document_is_read_replaced_and_deleted_by_its_self_link() {
    let gw = setup();
    let doc = create(&gw, "a");
    let link = path(&doc["_self"]);
    // Python sends the link with its trailing slash.
    assert!(link.ends_with('/'));
    let (r, read) = call(&gw, signed("GET", &link, &[PK], b""));
    assert_eq!(r.status, 200, "{read}");
    assert_eq!(read, doc);
    assert_eq!(
        r.header("x-ms-alt-content-path"),
        Some("dbs/d/colls/c"),
        "the owner is named by name"
    );

    let mut changed = doc.clone();
    changed["n"] = json!(2);
    let (r, replaced) = call(
        &gw,
        signed("PUT", &link, &[PK], changed.to_string().as_bytes()),
    );
    assert_eq!(r.status, 200, "{replaced}");
    assert_eq!(replaced["n"], 2);
    assert_eq!(replaced["_self"], doc["_self"], "a replace keeps the rid");
    let (_, by_name) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/a", &[PK], b""));
    assert_eq!(by_name["n"], 2);

    let (r, _) = call(&gw, signed("DELETE", &link, &[PK], b""));
    assert_eq!(r.status, 204);
    let (r, _) = call(&gw, signed("GET", "/dbs/d/colls/c/docs/a", &[PK], b""));
    assert_eq!(r.status, 404);
    // The rid is gone with the document.
    let (r, body) = call(&gw, signed("GET", &link, &[PK], b""));
    assert_error(&r, &body, 404, "NotFound", "_rid");
}

#[test]
fn databases_containers_feeds_and_scripts_are_reachable_by_rid() {
    let gw = setup();
    let (_, db) = get(&gw, "/dbs/d");
    let (_, coll) = get(&gw, "/dbs/d/colls/c");
    let db_link = path(&db["_self"]);
    let coll_link = path(&coll["_self"]);
    let (r, body) = get(&gw, &db_link);
    assert_eq!((r.status, &body["id"]), (200, &json!("d")));
    let (r, body) = get(&gw, &format!("{db_link}colls/"));
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["DocumentCollections"][0]["id"], "c");
    let (r, body) = get(&gw, &coll_link);
    assert_eq!((r.status, &body["id"]), (200, &json!("c")));

    // Create and query under the container's rid link.
    let (r, created) = call(
        &gw,
        signed(
            "POST",
            &format!("{coll_link}docs/"),
            &[PK],
            br#"{"id":"b","pk":"p"}"#,
        ),
    );
    assert_eq!(r.status, 201, "{created}");
    assert_eq!(
        created["_self"].as_str().unwrap().split('/').nth(3),
        coll["_rid"].as_str()
    );
    let (r, page) = call(
        &gw,
        signed(
            "POST",
            &format!("{coll_link}docs/"),
            &[
                ("x-ms-documentdb-isquery", "True"),
                ("content-type", "application/query+json"),
                ("x-ms-documentdb-query-enablecrosspartition", "True"),
            ],
            br#"{"query":"SELECT * FROM c WHERE c.id = @id","parameters":[{"name":"@id","value":"b"}]}"#,
        ),
    );
    assert_eq!(r.status, 200, "{page}");
    assert_eq!(page["Documents"][0]["_self"], created["_self"]);
    let (r, feed) = call(&gw, signed("GET", &format!("{coll_link}docs/"), &[PK], b""));
    assert_eq!(r.status, 200, "{feed}");
    assert_eq!(feed["_count"], 1);

    // A procedure: created under the rid link, read, run and deleted by its own.
    let (r, sproc) = call(
        &gw,
        signed(
            "POST",
            &format!("{coll_link}sprocs/"),
            &[],
            br#"{"id":"sp","body":"function () { getContext().getResponse().setBody(7); }"}"#,
        ),
    );
    assert_eq!(r.status, 201, "{sproc}");
    let sproc_link = path(&sproc["_self"]);
    let (r, read) = get(&gw, &sproc_link);
    assert_eq!((r.status, &read["id"]), (200, &json!("sp")));
    let (r, result) = call(&gw, signed("POST", &sproc_link, &[PK], b"[]"));
    assert_eq!((r.status, result), (200, json!(7)));
    let (r, _) = call(&gw, signed("DELETE", &sproc_link, &[], b""));
    assert_eq!(r.status, 204);
    let (r, _) = get(&gw, "/dbs/d/colls/c/sprocs/sp");
    assert_eq!(r.status, 404);
}

#[test]
fn a_rid_link_signed_over_names_or_the_full_path_is_401() {
    let gw = setup();
    let doc = create(&gw, "a");
    let link = path(&doc["_self"]);
    let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
    for signed_link in [
        "dbs/d/colls/c/docs/a".to_owned(),
        link.trim_matches('/').to_owned(),
        // Case matters: the link signed is lower-cased.
        doc["_rid"].as_str().unwrap().to_owned(),
    ] {
        let mut req = signed("GET", &link, &[PK], b"");
        let date = req.headers["x-ms-date"].to_str().unwrap().to_owned();
        req.headers.insert(
            "authorization",
            key.authorization("GET", "docs", &signed_link, &date)
                .parse()
                .unwrap(),
        );
        let (r, body) = call(&gw, req);
        assert_error(&r, &body, 401, "Unauthorized", "signed");
    }
    // The string to sign of wire reference §7.2.
    let mut req = signed("GET", &link, &[PK], b"");
    let date = req.headers["x-ms-date"].to_str().unwrap().to_owned();
    let leaf = doc["_rid"].as_str().unwrap().to_ascii_lowercase();
    req.headers.insert(
        "authorization",
        key.authorization("GET", "docs", &leaf, &date)
            .parse()
            .unwrap(),
    );
    assert_eq!(call(&gw, req).0.status, 200);
}

#[test]
fn unknown_rids_are_404() {
    let gw = setup();
    let doc = create(&gw, "a");
    let (_, db) = get(&gw, "/dbs/d");
    let (_, coll) = get(&gw, "/dbs/d/colls/c");
    let db_rid = db["_rid"].as_str().unwrap();
    let coll_rid = coll["_rid"].as_str().unwrap();
    let doc_rid = doc["_rid"].as_str().unwrap();
    let missing_doc = {
        let mut bytes = rid_bytes(&doc["_rid"]);
        bytes[15] ^= 0x40;
        STANDARD.encode(bytes).replace('/', "-")
    };
    let cases = [
        ("/dbs/AAAAAA==/".to_owned(), "database"),
        ("/dbs/AAAAAA==/colls/".to_owned(), "database"),
        (format!("/dbs/{db_rid}/colls/AAAAAQAAAAA=/"), "container"),
        (format!("/dbs/AAAAAA==/colls/{coll_rid}/"), "container"),
        (
            format!("/dbs/{db_rid}/colls/{coll_rid}/docs/{missing_doc}/"),
            "document",
        ),
        // Not a rid at all in the document segment.
        (
            format!("/dbs/{db_rid}/colls/{coll_rid}/docs/a/"),
            "document",
        ),
        (
            format!("/dbs/{db_rid}/colls/{coll_rid}/sprocs/{doc_rid}/"),
            "sprocs",
        ),
        // Rids are case-sensitive (only the signature lower-cases them).
        (
            format!("/dbs/{}/colls/{coll_rid}/", db_rid.to_ascii_lowercase()),
            "database",
        ),
    ];
    for (path, what) in cases {
        let (r, body) = call(&gw, signed("GET", &path, &[PK], b""));
        assert_error(&r, &body, 404, "NotFound", "_rid");
        assert!(
            body["message"].as_str().unwrap().contains(what),
            "{path}: {body}"
        );
    }
    // The document exists, but in another logical partition than the header's.
    let (r, body) = call(
        &gw,
        signed(
            "GET",
            &path(&doc["_self"]),
            &[("x-ms-documentdb-partitionkey", r#"["q"]"#)],
            b"",
        ),
    );
    assert_error(&r, &body, 404, "NotFound", "_rid");
    // No partition key at all: the document cannot be looked up.
    let (r, body) = call(&gw, signed("GET", &path(&doc["_self"]), &[], b""));
    assert_error(&r, &body, 400, "BadRequest", "x-ms-documentdb-partitionkey");
}

#[test]
fn a_database_whose_id_reads_as_a_rid_is_refused() {
    let gw = setup();
    let (r, body) = call(&gw, signed("POST", "/dbs", &[], br#"{"id":"AAAAAQ=="}"#));
    assert_error(&r, &body, 400, "BadRequest", "resource id");
    // Eight characters that are not 4 bytes of base64 are a name.
    let (r, _) = call(&gw, signed("POST", "/dbs", &[], br#"{"id":"partitas"}"#));
    assert_eq!(r.status, 201);
    let (r, body) = get(&gw, "/dbs/partitas");
    assert_eq!((r.status, &body["id"]), (200, &json!("partitas")));
}

#[test]
fn rids_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (db, coll, doc) = {
        let gw = gateway(Database::open(dir.path()).unwrap());
        let gw = crate::server::setup_on(gw);
        call(&gw, signed("POST", "/dbs", &[], br#"{"id":"e"}"#));
        (
            get(&gw, "/dbs/d").1,
            get(&gw, "/dbs/d/colls/c").1,
            create(&gw, "a"),
        )
    };
    let gw = gateway(Database::open(dir.path()).unwrap());
    assert_eq!(get(&gw, "/dbs/d").1, db);
    assert_eq!(get(&gw, "/dbs/d/colls/c").1["_self"], coll["_self"]);
    let (r, read) = call(&gw, signed("GET", &path(&doc["_self"]), &[PK], b""));
    assert_eq!(r.status, 200);
    assert_eq!(read, doc);
}

#[test]
fn a_container_from_before_database_rids_keeps_its_links() {
    // The registry of an older server: its engine containers were created
    // without a database rid, so theirs and their documents' start `Part`.
    let db = Database::in_memory();
    let system = db
        .raw()
        .create_container_if_not_exists("__partita_server", "/registry")
        .unwrap();
    system
        .create_item(
            "v1",
            json!({"id": "db-1", "registry": "v1", "type": "database", "name": "d"}),
            None,
        )
        .unwrap();
    db.raw().create_container("c2-c", "/pk").unwrap();
    system
        .create_item(
            "v1",
            json!({"id": "coll-2", "registry": "v1", "type": "collection", "db": "d",
                   "name": "c", "engine": "c2-c",
                   "definition": {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash"}}}),
            None,
        )
        .unwrap();
    let gw = gateway(db);
    let (_, database) = get(&gw, "/dbs/d");
    assert_eq!(database["_rid"], "AAAAAQ==");
    let (_, coll) = get(&gw, "/dbs/d/colls/c");
    assert!(
        coll["_self"]
            .as_str()
            .unwrap()
            .starts_with("dbs/UGFydA==/colls/"),
        "{coll}"
    );
    let doc = create(&gw, "a");
    assert_eq!(
        doc["_self"].as_str().unwrap().split('/').nth(3),
        coll["_rid"].as_str()
    );
    let (r, read) = call(&gw, signed("GET", &path(&doc["_self"]), &[PK], b""));
    assert_eq!(r.status, 200, "{read}");
    // And under the database's own rid.
    let coll_by_db = format!("/dbs/AAAAAQ==/colls/{}/", coll["_rid"].as_str().unwrap());
    assert_eq!(get(&gw, &coll_by_db).0.status, 200);
}
