// Acceptance test: transactional batch, bulk and patch with the official
// JavaScript SDK (@azure/cosmos) against `partita serve --tls`.
//
// Usage: NODE_EXTRA_CA_CERTS=cert.pem node cosmos_batch.mjs ENDPOINT KEY
// Run by cli/tests/all/server.rs. Prints "ALL OK" at the end; the first
// failed assertion exits non-zero.

import assert from "node:assert/strict";
import { BulkOperationType, CosmosClient } from "@azure/cosmos";

const [endpoint, key] = process.argv.slice(2);
const ok = (name) => console.log(`ok - ${name}`);

const client = new CosmosClient({ endpoint, key });
const { database } = await client.databases.create({ id: `js-${Date.now()}` });
const { container } = await database.containers.createIfNotExists({
  id: "posts",
  partitionKey: { paths: ["/postId"] },
});

// --- the script-free createComment: one batch --------------------------------------------
await container.items.create({ id: "p1", postId: "p1", commentCount: 0 });
let response = await container.items.batch(
  [
    {
      operationType: BulkOperationType.Patch,
      id: "p1",
      resourceBody: { operations: [{ op: "incr", path: "/commentCount", value: 1 }] },
    },
    { operationType: BulkOperationType.Create, resourceBody: { id: "c1", postId: "p1" } },
  ],
  "p1",
);
assert.equal(response.code, 200);
assert.deepEqual(response.result.map((r) => r.statusCode), [200, 201]);
assert.equal(response.result[0].resourceBody.commentCount, 1);
ok("batch: patch + create");

// --- a failed batch: 207, the failure and 424s, nothing applied -----------------------------
response = await container.items.batch(
  [
    {
      operationType: BulkOperationType.Patch,
      id: "p1",
      resourceBody: { operations: [{ op: "incr", path: "/commentCount", value: 1 }] },
    },
    { operationType: BulkOperationType.Create, resourceBody: { id: "c1", postId: "p1" } },
  ],
  "p1",
);
assert.equal(response.code, 207);
assert.deepEqual(response.result.map((r) => r.statusCode), [424, 409]);
const { resource: post } = await container.item("p1", "p1").read();
assert.equal(post.commentCount, 1);
ok("failed batch: 207 with 424 and 409, nothing applied");

// --- bulk: operations on many partitions, each on its own --------------------------------
const bulk = await container.items.executeBulkOperations([
  { operationType: BulkOperationType.Create, partitionKey: "p2", resourceBody: { id: "b1", postId: "p2" } },
  { operationType: BulkOperationType.Upsert, partitionKey: "p3", resourceBody: { id: "b2", postId: "p3", v: 1 } },
  { operationType: BulkOperationType.Create, partitionKey: "p1", resourceBody: { id: "c1", postId: "p1" } },
  { operationType: BulkOperationType.Read, id: "b2", partitionKey: "p3" },
  {
    operationType: BulkOperationType.Patch,
    id: "p1",
    partitionKey: "p1",
    resourceBody: { operations: [{ op: "set", path: "/title", value: "bulk" }] },
  },
]);
assert.deepEqual(
  bulk.map((r) => r.response?.statusCode ?? r.error?.code),
  [201, 201, 409, 200, 200],
);
const { resource: b1 } = await container.item("b1", "p2").read();
assert.equal(b1.id, "b1");
ok("bulk: independent results on several partitions");

// --- patch ---------------------------------------------------------------------------------
const { resource: patched } = await container.item("p1", "p1").patch({
  condition: "from c where c.commentCount = 1",
  operations: [
    { op: "add", path: "/tags", value: ["a"] },
    { op: "incr", path: "/commentCount", value: 2 },
    { op: "move", from: "/title", path: "/headline" },
  ],
});
assert.equal(patched.commentCount, 3);
assert.equal(patched.headline, "bulk");
await assert.rejects(
  container.item("p1", "p1").patch({
    condition: "from c where c.commentCount = 1",
    operations: [{ op: "remove", path: "/tags" }],
  }),
  (e) => e.code === 412,
);
await assert.rejects(
  container.item("p1", "p1").patch([{ op: "remove", path: "/missing" }]),
  (e) => e.code === 400,
);
ok("patch: conditional, 412 when false, 400 for a missing path");

await database.delete();
console.log("ALL OK");
