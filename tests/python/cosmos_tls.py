"""The official Python SDK (azure-cosmos 4.17.1) against `partita serve --tls`: a short flow over HTTPS.

Usage: python cosmos_tls.py ENDPOINT KEY CERT_PEM
Run by tests/server.rs with the endpoint (https://127.0.0.1:PORT/) and certificate the server printed.
The SDK skips certificate verification on loopback hosts whatever it is told (_synchronized_request.py),
so this script proves the SDK works over TLS; the Rust tests in tests/server.rs prove the certificate.
Prints "ALL OK" at the end; exits non-zero on the first failure.
"""

import sys

import urllib3
from azure.core import MatchConditions
from azure.cosmos import CosmosClient, PartitionKey, exceptions

endpoint, key, cert = sys.argv[1], sys.argv[2], sys.argv[3]
assert endpoint.startswith("https://"), endpoint
urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # the SDK's loopback rule, not ours

client = CosmosClient(endpoint, credential=key, connection_verify=cert)
account = client.get_database_account()
assert account.WritableLocations[0]["databaseAccountEndpoint"] == endpoint, account.WritableLocations

db = client.create_database_if_not_exists("tls")
items = db.create_container_if_not_exists("items", PartitionKey(path="/pk"))
a = items.create_item({"id": "a", "pk": "p1", "n": 1})
assert items.read_item("a", partition_key="p1")["n"] == 1
items.replace_item(
    "a", {"id": "a", "pk": "p1", "n": 2}, etag=a["_etag"], match_condition=MatchConditions.IfNotModified
)
items.upsert_item({"id": "b", "pk": "p2", "n": 3})
assert sorted(d["id"] for d in items.query_items("SELECT * FROM c", enable_cross_partition_query=True)) == ["a", "b"]
items.delete_item("b", partition_key="p2")
try:
    items.read_item("b", partition_key="p2")
    raise AssertionError("b was deleted")
except exceptions.CosmosResourceNotFoundError:
    pass
items.scripts.create_stored_procedure(
    {"id": "inc", "body": "function inc(id) { var c = getContext().getCollection(); "
     "c.readDocument(c.getAltLink() + '/docs/' + id, function (e, d) { if (e) throw e; d.n += 1; "
     "c.replaceDocument(d._self, d, function (e2, r) { if (e2) throw e2; getContext().getResponse().setBody(r.n); }); }); }"}
)
assert items.scripts.execute_stored_procedure("inc", partition_key="p1", params=["a"]) == 3
assert items.read_item("a", partition_key="p1")["n"] == 3
client.delete_database("tls")
print("ALL OK")
