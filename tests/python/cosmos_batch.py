"""Acceptance test: transactional batch and patch with the official Python SDK
(azure-cosmos 4.17.1) against `partita serve`.

Usage: python cosmos_batch.py ENDPOINT KEY
Run by cli/tests/all/server.rs. Prints "ALL OK" at the end; the first failed
assert exits non-zero.
"""

import sys

from azure.cosmos import CosmosClient, PartitionKey, exceptions

endpoint, key = sys.argv[1], sys.argv[2]


def check(name):
    print(f"ok - {name}", flush=True)


def batch_error(ops, pk):
    try:
        container.execute_item_batch(batch_operations=ops, partition_key=pk)
    except exceptions.CosmosBatchOperationError as e:
        return e
    raise AssertionError("expected the batch to fail")


client = CosmosClient(endpoint, credential=key)
db = client.create_database_if_not_exists("batch")
container = db.create_container("posts", PartitionKey(path="/postId"))

# --- the script-free createComment: one patch and one create -----------------------------
container.create_item({"id": "p1", "postId": "p1", "commentCount": 0})
read = container.read_item("p1", partition_key="p1")
lsn = int(container.client_connection.last_response_headers["lsn"])
ops = [
    ("patch", ("p1", [{"op": "incr", "path": "/commentCount", "value": 1}])),
    ("create", ({"id": "c1", "postId": "p1", "text": "first"},)),
    ("read", ("p1",)),
]
results = container.execute_item_batch(batch_operations=ops, partition_key="p1")
assert [r["statusCode"] for r in results] == [200, 201, 200], results
assert results[0]["resourceBody"]["commentCount"] == 1, results
assert results[1]["eTag"] == results[1]["resourceBody"]["_etag"], results
assert int(results.get_response_headers()["lsn"]) == lsn + 1
assert container.read_item("p1", partition_key="p1")["commentCount"] == 1
check("batch: patch + create + read, one lsn")

# --- a failed batch applies nothing; the others are 424 ---------------------------------
e = batch_error([("create", ({"id": "c2", "postId": "p1"},)), ("create", ({"id": "c1", "postId": "p1"},))], "p1")
assert (e.status_code, e.error_index) == (409, 1), (e.status_code, e.error_index)
assert [r["statusCode"] for r in e.operation_responses] == [424, 409]
e = batch_error([("upsert", ({"id": "c2", "postId": "p1"},)),
                 ("replace", ("p1", {"id": "p1", "postId": "p1"}), {"if_match_etag": "\"stale\""}),
                 ("delete", ("c1",))], "p1")
assert (e.status_code, e.error_index) == (412, 1)
assert [r["statusCode"] for r in e.operation_responses] == [424, 412, 424]
e = batch_error([("create", ({"id": "c3", "postId": "p1"},)), ("create", ({"id": "c4", "postId": "other"},))], "p1")
assert (e.status_code, e.error_index) == (400, 1)
e = batch_error([("read", ("missing",)), ("delete", ("c1",))], "p1")
assert (e.status_code, e.error_index) == (404, 0)
e = batch_error([("patch", ("p1", [{"op": "remove", "path": "/x"}]), {"filter_predicate": "from c where c.commentCount = 7"})], "p1")
assert (e.status_code, e.error_index) == (412, 0)
ids = sorted(d["id"] for d in container.read_all_items())
assert ids == ["c1", "p1"], ids
assert container.read_item("p1", partition_key="p1")["commentCount"] == 1
check("failed batches: 207 with the failing status and 424s, nothing applied")

# --- whole-request errors -----------------------------------------------------------------
try:
    container.execute_item_batch(batch_operations=[("create", ({"id": f"x{i}", "postId": "p1"},)) for i in range(101)],
                                 partition_key="p1")
    raise AssertionError("101 operations were accepted")
except exceptions.CosmosHttpResponseError as e:
    assert e.status_code == 400 and "more operations than what is supported" in e.message, e.message
try:
    big = "x" * (2 * 1024 * 1024 + 1024)
    container.execute_item_batch(batch_operations=[("create", ({"id": "big", "postId": "p1", "big": big},))],
                                 partition_key="p1")
    raise AssertionError("a batch over 2 MB was accepted")
except exceptions.CosmosHttpResponseError as e:
    assert e.status_code == 413, e.status_code
check("batch limits: 101 operations is 400, over 2 MB is 413")

# --- patch -------------------------------------------------------------------------------
container.create_item({"id": "d", "postId": "p2", "n": 1, "color": "red", "tags": ["a"]})
ops = [
    {"op": "add", "path": "/tags/-", "value": "b"},
    {"op": "set", "path": "/address", "value": {"city": "Oslo"}},
    {"op": "replace", "path": "/color", "value": "blue"},
    {"op": "incr", "path": "/n", "value": 4},
    {"op": "move", "from": "/color", "path": "/favorite"},
]
doc = container.patch_item("d", partition_key="p2", patch_operations=ops)
assert (doc["n"], doc["favorite"], doc["tags"], doc["address"]) == (5, "blue", ["a", "b"], {"city": "Oslo"}), doc
assert "color" not in doc
for bad in ([{"op": "replace", "path": "/missing", "value": 1}], [{"op": "remove", "path": "/missing"}],
            [{"op": "incr", "path": "/favorite", "value": 1}], [{"op": "move", "from": "/nope", "path": "/x"}]):
    try:
        container.patch_item("d", partition_key="p2", patch_operations=bad)
        raise AssertionError(f"{bad} was accepted")
    except exceptions.CosmosHttpResponseError as e:
        assert e.status_code == 400, (bad, e.status_code)
try:
    container.patch_item("d", partition_key="p2", patch_operations=[{"op": "incr", "path": "/n", "value": 1}],
                         filter_predicate="from c where c.n = 1")
    raise AssertionError("a false condition was accepted")
except exceptions.CosmosAccessConditionFailedError:
    pass
doc = container.patch_item("d", partition_key="p2", patch_operations=[{"op": "incr", "path": "/n", "value": 1}],
                           filter_predicate="from c where c.n = 5")
assert doc["n"] == 6
check("patch: every operation, 400s for bad paths, 412 for a false condition")

# --- Prefer: return=minimal ---------------------------------------------------------------
quiet = CosmosClient(endpoint, credential=key, no_response_on_write=True)
qc = quiet.get_database_client("batch").get_container_client("posts")
assert qc.create_item({"id": "q", "postId": "p3"}) == {}
assert qc.patch_item("q", partition_key="p3", patch_operations=[{"op": "add", "path": "/a", "value": 1}]) == {}
assert container.read_item("q", partition_key="p3")["a"] == 1
check("no_response_on_write: empty bodies")

client.delete_database("batch")
print("ALL OK")
