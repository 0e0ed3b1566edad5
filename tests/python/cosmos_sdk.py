"""Acceptance test: the official Python SDK (azure-cosmos 4.17.1) against `partita serve`.

Usage: python cosmos_sdk.py ENDPOINT KEY SPROCS_DIR
Run by tests/server.rs, which starts the server on a free port. Every check is an
assert; the script prints "ALL OK" at the end and exits non-zero on the first failure.
"""

import sys
import time
import urllib.parse

from azure.core import MatchConditions
from azure.cosmos import CosmosClient, PartitionKey, ThroughputProperties, exceptions
from azure.cosmos.partition_key import NonePartitionKeyValue

endpoint, key, sprocs = sys.argv[1], sys.argv[2], sys.argv[3]


def script(name):
    with open(f"{sprocs}/{name}.js", encoding="utf-8") as f:
        return f.read()


def expect_status(status, fn, substatus=None):
    try:
        fn()
    except exceptions.CosmosHttpResponseError as e:
        assert e.status_code == status, f"expected {status}, got {e.status_code}: {e.message}"
        if substatus is not None:
            assert e.sub_status == substatus, f"expected substatus {substatus}, got {e.sub_status}"
        return e
    raise AssertionError(f"expected HTTP {status}, the call succeeded")


def check(name):
    print(f"ok - {name}", flush=True)


client = CosmosClient(endpoint, credential=key)

# --- databases and containers ---------------------------------------------------------
db = client.create_database_if_not_exists("blog")
assert db.read()["id"] == "blog"
expect_status(409, lambda: client.create_database("blog"))
assert "blog" in [d["id"] for d in client.list_databases()]
posts = db.create_container_if_not_exists("posts", PartitionKey(path="/postId"))
feed = db.create_container("feed", PartitionKey(path="/type"))
items = db.create_container("items", PartitionKey(path="/pk"))
props = posts.read()
assert props["partitionKey"]["paths"] == ["/postId"], props
assert props["partitionKey"]["version"] == 2, props
assert sorted(c["id"] for c in db.list_containers()) == ["feed", "items", "posts"]
expect_status(409, lambda: db.create_container("posts", PartitionKey(path="/postId")))
expect_status(404, lambda: db.get_container_client("nope").read())
check("databases and containers")

# --- item CRUD, etags, the none partition --------------------------------------------
a = items.create_item({"id": "a", "pk": "p1", "n": 1})
assert a["_etag"] and a["_rid"] and a["_self"], a
assert items.read_item("a", partition_key="p1")["n"] == 1
a2 = items.replace_item("a", {"id": "a", "pk": "p1", "n": 2})
assert a2["_etag"] != a["_etag"]
items.upsert_item({"id": "a", "pk": "p1", "n": 3})
items.upsert_item({"id": "b", "pk": "p2", "n": 10})
items.create_item({"id": "c", "pk": 5, "n": 20})
items.create_item({"id": "d", "n": 30})  # no /pk: the none partition, header [{}]
assert items.read_item("d", partition_key=NonePartitionKeyValue)["n"] == 30
assert items.read_item("c", partition_key=5)["n"] == 20
expect_status(409, lambda: items.create_item({"id": "a", "pk": "p1"}))
current = items.read_item("a", partition_key="p1")
expect_status(
    412,
    lambda: items.replace_item(
        "a", {"id": "a", "pk": "p1", "n": 4}, etag=a["_etag"], match_condition=MatchConditions.IfNotModified
    ),
)
items.replace_item(
    "a", {"id": "a", "pk": "p1", "n": 4}, etag=current["_etag"], match_condition=MatchConditions.IfNotModified
)
expect_status(404, lambda: items.read_item("zzz", partition_key="p1"))
items.create_item({"id": "gone", "pk": "p1"})
items.delete_item("gone", partition_key="p1")
expect_status(404, lambda: items.read_item("gone", partition_key="p1"))
expect_status(404, lambda: items.delete_item("gone", partition_key="p1"))
# Session tokens: writes answer with x-ms-alt-content-path, so the SDK tracks the container's token
# (resolving the key's range on /pkranges) and sends it back on reads and queries.
assert items.client_connection.last_response_headers.get("x-ms-alt-content-path") == "dbs/blog/colls/items"
sent = {}


def capture(response):
    sent.update(response.http_request.headers)


write_token = items.upsert_item({"id": "s", "pk": "p1"}) and items.client_connection.last_response_headers[
    "x-ms-session-token"
]
items.read_item("s", partition_key="p1", raw_response_hook=capture)
assert sent.get("x-ms-session-token") == write_token, (sent.get("x-ms-session-token"), write_token)
sent.clear()
list(items.query_items("SELECT * FROM c", partition_key="p1", raw_response_hook=capture))
assert sent.get("x-ms-session-token") == write_token, (sent.get("x-ms-session-token"), write_token)
items.delete_item("s", partition_key="p1")
charge = items.client_connection.last_response_headers.get("x-ms-request-charge")
assert charge is not None, "every response carries x-ms-request-charge"
assert len(list(items.read_all_items())) == 4
check("item CRUD, etags, none partition")

# --- by _self: a dict passed as the item addresses it by rid -----------------------------
# The SDK then sends dbs/{dbRid}/colls/{collRid}/docs/{docRid}/ and signs only the lower-cased rid.
r = items.create_item({"id": "r", "pk": "p1", "n": 1})
db_rid, coll_rid = db.read()["_rid"], items.read()["_rid"]
assert r["_self"] == f"dbs/{db_rid}/colls/{coll_rid}/docs/{r['_rid']}/", (r["_self"], db_rid, coll_rid)
assert items.read_item(item=r, partition_key="p1")["n"] == 1
r2 = items.replace_item(item=r, body={"id": "r", "pk": "p1", "n": 2})
assert r2["n"] == 2 and r2["_rid"] == r["_rid"], r2
assert items.read_item("r", partition_key="p1")["n"] == 2
items.delete_item(item=r2, partition_key="p1")
expect_status(404, lambda: items.read_item("r", partition_key="p1"))
expect_status(404, lambda: items.read_item(item=r, partition_key="p1"))
other = client.create_database_if_not_exists("blog2")
assert other.read()["_rid"] != db_rid, "every database has its own rid"
client.delete_database("blog2")
check("items by _self")

# --- queries ---------------------------------------------------------------------------
for i in range(10):
    items.create_item({"id": f"q{i}", "pk": f"k{i % 3}", "n": 100 + i})
single = list(items.query_items("SELECT * FROM c WHERE c.n >= 100", partition_key="k0"))
assert sorted(d["id"] for d in single) == ["q0", "q3", "q6", "q9"], single
ordered = list(
    items.query_items("SELECT c.id, c.n FROM c ORDER BY c.n DESC", enable_cross_partition_query=True)
)
assert [d["n"] for d in ordered] == sorted((d["n"] for d in ordered), reverse=True)
assert len(ordered) == 14
top = list(items.query_items("SELECT TOP 3 VALUE c.n FROM c ORDER BY c.n", enable_cross_partition_query=True))
assert top == [4, 10, 20], top
count = list(items.query_items("SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True))
assert count == [14], count
param = list(
    items.query_items(
        "SELECT VALUE c.id FROM c WHERE c.n > @min AND c.pk = @pk",
        parameters=[{"name": "@min", "value": 104}, {"name": "@pk", "value": "k2"}],
        enable_cross_partition_query=True,
    )
)
assert sorted(param) == ["q5", "q8"], param
pages = items.query_items("SELECT * FROM c", enable_cross_partition_query=True, max_item_count=4).by_page()
sizes = [len(list(p)) for p in pages]
assert sum(sizes) == 14 and max(sizes) <= 4 and len(sizes) >= 4, sizes
expect_status(400, lambda: list(items.query_items("SELEC nonsense", enable_cross_partition_query=True)))
check("queries: single- and cross-partition, ORDER BY, TOP, COUNT, parameters, paging")

# --- index and query metrics ----------------------------------------------------------------
indexed = db.create_container(
    "indexed",
    PartitionKey(path="/pk"),
    indexing_policy={
        "excludedPaths": [{"path": "/body/*"}],
        "compositeIndexes": [[{"path": "/a"}, {"path": "/b", "order": "descending"}]],
    },
)
for i in range(6):
    indexed.create_item({"id": f"m{i}", "pk": f"k{i % 2}", "a": i % 3, "b": i, "body": {"text": f"t{i}"}})
found = list(
    indexed.query_items(
        "SELECT * FROM c WHERE c.body.text = 't1'",
        enable_cross_partition_query=True,
        populate_index_metrics=True,
        populate_query_metrics=True,
    )
)
assert [d["id"] for d in found] == ["m1"], found
headers = indexed.client_connection.last_response_headers
potential = headers["x-ms-cosmos-index-utilization"]["PotentialSingleIndexes"]
assert potential == [
    {
        "FilterExpression": '(ROOT.body.text = "t1")',
        "IndexSpec": "/body/text/?",
        "FilterPreciseSet": True,
        "IndexPreciseSet": False,
        "IndexImpactScore": "High",
    }
], potential
metrics = dict(kv.split("=", 1) for kv in headers["x-ms-documentdb-query-metrics"].split(";"))
assert int(metrics["outputDocumentCount"]) == 1, metrics
assert 0.0 < float(metrics["indexUtilizationRatio"]) <= 1.0, metrics
# An included path: the range index names the documents read, on --in-memory as on disk.
found = list(
    indexed.query_items(
        "SELECT * FROM c WHERE c.a = 1",
        enable_cross_partition_query=True,
        populate_index_metrics=True,
        populate_query_metrics=True,
    )
)
assert sorted(d["id"] for d in found) == ["m1", "m4"], found
headers = indexed.client_connection.last_response_headers
used = headers["x-ms-cosmos-index-utilization"]["UtilizedSingleIndexes"]
assert [u["IndexSpec"] for u in used] == ["/a/?"], used
metrics = dict(kv.split("=", 1) for kv in headers["x-ms-documentdb-query-metrics"].split(";"))
assert (metrics["retrievedDocumentCount"], metrics["outputDocumentCount"]) == ("2", "2"), metrics
ordered = list(
    indexed.query_items(
        "SELECT * FROM c ORDER BY c.a DESC, c.b ASC", partition_key="k0", populate_index_metrics=True
    )
)
assert [d["id"] for d in ordered] == ["m2", "m4", "m0"], ordered
used = indexed.client_connection.last_response_headers["x-ms-cosmos-index-utilization"]
assert [c["IndexSpecs"] for c in used["UtilizedCompositeIndexes"]] == [["/a ASC", "/b DESC"]], used
assert used["PotentialCompositeIndexes"] == [], used
list(indexed.query_items("SELECT * FROM c", partition_key="k0"))
headers = indexed.client_connection.last_response_headers
assert "x-ms-cosmos-index-utilization" not in headers and "x-ms-documentdb-query-metrics" not in headers
db.delete_container("indexed")
check("index and query metrics: an excluded path would help, a composite index serves ORDER BY")

# --- stored procedures -----------------------------------------------------------------
posts.create_item({"id": "p1", "postId": "p1", "type": "post", "commentCount": 0, "likeCount": 0})
posts.scripts.create_stored_procedure({"id": "createComment", "body": script("createComment")})
expect_status(409, lambda: posts.scripts.create_stored_procedure({"id": "createComment", "body": "function f(){}"}))
posts.scripts.create_stored_procedure({"id": "createLike", "body": script("createLike")})
for i in range(3):
    posts.scripts.execute_stored_procedure(
        "createComment", partition_key="p1", params=["p1", {"text": f"c{i}"}], enable_script_logging=True
    )
posts.scripts.execute_stored_procedure("createLike", partition_key="p1", params=["p1", {"userId": "u1"}])
post = posts.read_item("p1", partition_key="p1")
assert post["commentCount"] == 3 and post.get("likeCount") == 1, post
comments = list(posts.query_items("SELECT * FROM c WHERE IS_DEFINED(c.text)", partition_key="p1"))
assert len(comments) == 3, comments
posts.scripts.create_stored_procedure(
    {
        "id": "hello",
        "body": "function hello(name) { console.log('hi ' + name + ' & co'); "
        "getContext().getResponse().setBody({greeting: 'hello ' + name}); }",
    }
)
result = posts.scripts.execute_stored_procedure(
    "hello", partition_key="p1", params=["world"], enable_script_logging=True
)
assert result == {"greeting": "hello world"}, result
log = posts.client_connection.last_response_headers.get("x-ms-documentdb-script-log-results")
assert urllib.parse.unquote(log).rstrip("\n") == "hi world & co", log
posts.scripts.create_stored_procedure(
    {"id": "boom", "body": "function boom() { getContext().getCollection().createDocument("
     "getContext().getCollection().getSelfLink(), {id: 'x', postId: 'p1'}); throw new Error('kaboom'); }"}
)
err = expect_status(400, lambda: posts.scripts.execute_stored_procedure("boom", partition_key="p1"))
assert "kaboom" in err.message, err.message
expect_status(404, lambda: posts.read_item("x", partition_key="p1"))  # rolled back
expect_status(404, lambda: posts.scripts.execute_stored_procedure("missing", partition_key="p1"))
assert {s["id"] for s in posts.scripts.list_stored_procedures()} == {"createComment", "createLike", "hello", "boom"}
replaced = posts.scripts.replace_stored_procedure(
    "hello", {"id": "hello", "body": "function hello() { getContext().getResponse().setBody(2); }"}
)
assert posts.scripts.execute_stored_procedure("hello", partition_key="p1") == 2
posts.scripts.delete_stored_procedure("boom")
expect_status(404, lambda: posts.scripts.get_stored_procedure("boom"))
check("stored procedures: createComment, createLike, logging, throwing, replace, delete")

# --- triggers: truncateFeed keeps the newest 100 ------------------------------------------
feed.scripts.create_trigger(
    {"id": "truncateFeed", "body": script("truncateFeed"), "triggerType": "Post", "triggerOperation": "Create"}
)
feed.scripts.create_trigger(
    {
        "id": "stamp",
        "body": "function stamp() { var r = getContext().getRequest(); var d = r.getBody(); d.stamped = true; r.setBody(d); }",
        "triggerType": "Pre",
        "triggerOperation": "All",
    }
)
for i in range(105):
    feed.create_item(
        {"id": f"f{i:03}", "type": "post", "creationDate": f"2026-01-01T00:{i // 60:02}:{i % 60:02}Z"},
        pre_trigger_include="stamp",
        post_trigger_include="truncateFeed",
    )
left = list(feed.query_items("SELECT VALUE c.id FROM c ORDER BY c.creationDate", partition_key="post"))
assert len(left) == 100, len(left)
assert left[0] == "f005" and left[-1] == "f104", (left[0], left[-1])
assert feed.read_item("f104", partition_key="post")["stamped"] is True
expect_status(400, lambda: feed.create_item({"id": "t", "type": "post"}, post_trigger_include="nope"))
assert {t["id"] for t in feed.scripts.list_triggers()} == {"truncateFeed", "stamp"}
check("triggers: pre-trigger changes the body, truncateFeed keeps 100")

# --- user-defined functions --------------------------------------------------------------
items.scripts.create_user_defined_function({"id": "double", "body": "function double(x) { return x * 2; }"})
doubled = list(items.query_items("SELECT VALUE udf.double(c.n) FROM c WHERE c.id = 'a'", partition_key="p1"))
assert doubled == [8], doubled
check("user-defined functions")

# --- change feed ------------------------------------------------------------------------
cf = db.create_container("cf", PartitionKey(path="/pk"))
for i in range(5):
    cf.create_item({"id": f"d{i}", "pk": "x" if i % 2 else "y"})
cf.upsert_item({"id": "d0", "pk": "y", "v": 2})
changes = list(cf.query_items_change_feed(start_time="Beginning"))
assert [c["id"] for c in changes] == ["d1", "d2", "d3", "d4", "d0"], [c["id"] for c in changes]
assert changes[-1]["v"] == 2
token = cf.client_connection.last_response_headers.get("etag")
assert token is not None
cf.create_item({"id": "d5", "pk": "x"})
latest = list(cf.query_items_change_feed(start_time="Beginning"))
assert len(latest) == 6
per_key = list(cf.query_items_change_feed(start_time="Beginning", partition_key="x"))
assert sorted(c["id"] for c in per_key) == ["d1", "d3", "d5"], [c["id"] for c in per_key]
check("change feed, whole container and per partition key")

# --- time to live -----------------------------------------------------------------------
ttl = db.create_container("ttl", PartitionKey(path="/pk"), default_ttl=10)
assert ttl.read()["defaultTtl"] == 10
expect_status(400, lambda: db.create_container("ttl-bad", PartitionKey(path="/pk"), default_ttl=-10))
for bad in (0, None, -10):
    expect_status(400, lambda: ttl.create_item({"id": "bad", "pk": "p", "ttl": bad}))
ttl.create_item({"id": "keep", "pk": "p", "ttl": -1})
ttl.create_item({"id": "short", "pk": "p", "ttl": 1})
# The server's clock cannot be moved from here: poll, with a ceiling of a minute.
deadline = time.monotonic() + 60
while True:
    ids = [d["id"] for d in ttl.query_items("SELECT * FROM c", partition_key="p")]
    if ids == ["keep"]:
        break
    assert time.monotonic() < deadline, f"'short' never expired: {ids}"
    time.sleep(0.2)
expect_status(404, lambda: ttl.read_item("short", partition_key="p"))
assert [d["id"] for d in ttl.read_all_items()] == ["keep"]
db.replace_container(ttl, PartitionKey(path="/pk"), default_ttl=-1)
assert ttl.read()["defaultTtl"] == -1
check("time to live: validation, expiry, replace")

# --- unique keys --------------------------------------------------------------------------
people = db.create_container(
    "people", PartitionKey(path="/tenant"), unique_key_policy={"uniqueKeys": [{"paths": ["/email"]}]}
)
assert people.read()["uniqueKeyPolicy"]["uniqueKeys"] == [{"paths": ["/email"]}]
people.create_item({"id": "u1", "tenant": "t", "email": "a@x"})
people.create_item({"id": "u2", "tenant": "t", "email": "b@x"})
people.create_item({"id": "u1", "tenant": "t2", "email": "a@x"})
expect_status(409, lambda: people.create_item({"id": "u3", "tenant": "t", "email": "a@x"}))
expect_status(409, lambda: people.upsert_item({"id": "u3", "tenant": "t", "email": "a@x"}))
expect_status(409, lambda: people.replace_item("u2", {"id": "u2", "tenant": "t", "email": "a@x"}))
check("unique keys: 409 within a partition")

# --- deleting a logical partition --------------------------------------------------------
parts = db.create_container("parts", PartitionKey(path="/pk"))
for i in range(3):
    parts.upsert_item({"id": f"i{i}", "pk": "a"})
other = parts.upsert_item({"id": "o", "pk": "b"})
parts.delete_all_items_by_partition_key("a")
left = list(parts.read_all_items())
assert [d["id"] for d in left] == ["o"], left
assert left[0]["_etag"] == other["_etag"]
parts.delete_all_items_by_partition_key("nobody")
parts.delete_all_items_by_partition_key(None)
assert [d["id"] for d in parts.read_all_items()] == ["o"]
check("delete_all_items_by_partition_key")

# --- hierarchical partition keys (MultiHash) ---------------------------------------------
hpk = db.create_container("hpk", PartitionKey(path=["/state", "/city", "/zipcode"], kind="MultiHash"))
definition = hpk.read()["partitionKey"]
assert definition["paths"] == ["/state", "/city", "/zipcode"], definition
assert definition["kind"] == "MultiHash" and definition["version"] == 2, definition
places = [
    ("1", "CA", "Oxnard", "93033"),
    ("2", "CA", "Oxnard", "93030"),
    ("3", "CA", "Ojai", "93023"),
    ("4", "WA", "Seattle", "98101"),
    ("5", "WA", "Bellevue", "98004"),
]
for i, state, city, zipcode in places:
    hpk.create_item({"id": i, "state": state, "city": city, "zipcode": zipcode})
assert hpk.read_item("1", partition_key=["CA", "Oxnard", "93033"])["city"] == "Oxnard"
full = list(hpk.query_items("SELECT * FROM c", partition_key=["CA", "Oxnard", "93033"]))
assert [d["id"] for d in full] == ["1"], full
wa = list(hpk.query_items("SELECT * FROM c", partition_key=["WA"]))
assert sorted(d["id"] for d in wa) == ["4", "5"], wa
oxnard = list(hpk.query_items("SELECT * FROM c", partition_key=["CA", "Oxnard"]))
assert sorted(d["id"] for d in oxnard) == ["1", "2"], oxnard
paged = hpk.query_items("SELECT c.id FROM c ORDER BY c.id", partition_key=["CA"], max_item_count=2)
assert [d["id"] for d in paged] == ["1", "2", "3"]
assert list(hpk.query_items("SELECT * FROM c", partition_key=["NV"])) == []
everything = list(hpk.query_items("SELECT * FROM c", enable_cross_partition_query=True))
assert len(everything) == 5
assert len(list(hpk.read_all_items())) == 5
# A missing level is sent as null, which is not the document's undefined: 400/1001.
expect_status(400, lambda: hpk.create_item({"id": "v", "city": "Vancouver"}), substatus=1001)
# A point read with a prefix: 400/1001.
expect_status(400, lambda: hpk.read_item("1", partition_key=["CA"]), substatus=1001)
# An empty prefix names nothing: the service's cross-partition refusal.
refused = expect_status(400, lambda: list(hpk.query_items("SELECT * FROM c", partition_key=[])))
assert "Cross partition query is required but disabled" in refused.message, refused.message
hpk.delete_item("2", partition_key=["CA", "Oxnard", "93030"])
changes = list(hpk.query_items_change_feed(start_time="Beginning", partition_key=["CA", "Oxnard", "93033"]))
assert [c["id"] for c in changes] == ["1"], changes
check("hierarchical partition keys: full keys, prefix queries, 400/1001")

# --- throughput (offers): stored and echoed, never enforced ------------------------------
busy = db.create_container("busy", PartitionKey(path="/pk"), offer_throughput=10100)
assert busy.get_throughput().offer_throughput == 10100
offer = busy.get_throughput().properties
assert offer["resource"] == busy.read()["_self"] and offer["id"] in offer["_self"], offer
assert busy.replace_throughput(10200).offer_throughput == 10200
assert busy.get_throughput().offer_throughput == 10200
auto = db.create_container(
    "auto",
    PartitionKey(path="/pk"),
    offer_throughput=ThroughputProperties(auto_scale_max_throughput=7000, auto_scale_increment_percent=0),
)
t = auto.get_throughput()
assert (t.auto_scale_max_throughput, t.auto_scale_increment_percent, t.offer_throughput) == (7000, 0, None)
auto.replace_throughput(ThroughputProperties(auto_scale_max_throughput=9000, auto_scale_increment_percent=10))
t = auto.get_throughput()
assert (t.auto_scale_max_throughput, t.auto_scale_increment_percent) == (9000, 10)
too_low = ThroughputProperties(auto_scale_max_throughput=-200, auto_scale_increment_percent=0)
refused = expect_status(400, lambda: db.create_container("low", PartitionKey(path="/pk"), offer_throughput=too_low))
assert "Requested throughput -200 is less than required minimum throughput 1000" in refused.message
refused = expect_status(400, lambda: db.create_container("low", PartitionKey(path="/pk"), offer_throughput=100))
assert "less than required minimum throughput 400" in refused.message
shared = client.create_database("shared", offer_throughput=1000)
assert shared.get_throughput().offer_throughput == 1000
# create_*_if_not_exists on an existing database leaves its throughput alone.
again = client.create_database_if_not_exists("shared", offer_throughput=6000)
assert again.get_throughput().offer_throughput == 1000
assert shared.replace_throughput(2000).offer_throughput == 2000
db.delete_container("busy")
client.delete_database("shared")
resources = [o["resource"] for o in client.client_connection.ReadOffers()]
assert resources == [auto.read()["_self"]], resources
check("throughput: manual and autoscale offers, get and replace")

# --- deletes ------------------------------------------------------------------------------
db.delete_container("hpk")
db.delete_container("cf")
expect_status(404, lambda: cf.read())
client.delete_database("blog")
expect_status(404, lambda: client.get_database_client("blog").read())
check("delete container and database")

print("ALL OK")
