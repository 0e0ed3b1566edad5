// Acceptance test: users, permissions and resource tokens with the official
// JavaScript SDK (@azure/cosmos) against `partita serve --tls`.
//
// Usage: NODE_EXTRA_CA_CERTS=cert.pem node cosmos_permissions.mjs ENDPOINT KEY
// Run by cli/tests/all/server.rs. Prints "ALL OK" at the end; the first
// failed assertion exits non-zero.

import assert from "node:assert/strict";
import { CosmosClient } from "@azure/cosmos";

const [endpoint, key] = process.argv.slice(2);
const ok = (name) => console.log(`ok - ${name}`);

const admin = new CosmosClient({ endpoint, key });
const dbId = `js-perm-${Date.now()}`;
const { database } = await admin.databases.create({ id: dbId });
const { container } = await database.containers.create({
  id: "posts",
  partitionKey: { paths: ["/postId"] },
});
await container.items.create({ id: "p1", postId: "p1" });
await container.items.create({ id: "p2", postId: "p2" });

// --- users and permissions -------------------------------------------------------------------
const { user } = await database.users.create({ id: "alice" });
const { resource: perm } = await user.permissions.create({
  id: "alice-p1",
  permissionMode: "All",
  resource: container.url,
  resourcePartitionKey: ["p1"],
});
assert.ok(perm._token.startsWith("type=resource&ver=1.0&sig="), perm._token);
const { resources: users } = await database.users.readAll().fetchAll();
assert.deepEqual(users.map((u) => u.id), ["alice"]);
const { resources: perms } = await user.permissions.readAll().fetchAll();
assert.deepEqual(perms.map((p) => p.id), ["alice-p1"]);
ok("users and permissions: create, list");

// --- a client holding only the token ------------------------------------------------------------
const alice = new CosmosClient({
  endpoint,
  resourceTokens: { [container.url]: perm._token },
});
const posts = alice.database(dbId).container("posts");
const { resource: read } = await posts.item("p1", "p1").read();
assert.equal(read.id, "p1");
const { statusCode } = await posts.items.create({ id: "c9", postId: "p1" });
assert.equal(statusCode, 201);
const { resources: mine } = await posts.items
  .query("SELECT c.id FROM c", { partitionKey: "p1" })
  .fetchAll();
assert.deepEqual(mine.map((d) => d.id).sort(), ["c9", "p1"]);
ok("a partition token reads, writes and queries its partition");

const forbidden = async (what, promise) => {
  await assert.rejects(promise, (e) => e.code === 403, what);
};
await forbidden("another partition's read", posts.item("p2", "p2").read());
await forbidden("another partition's write", posts.items.create({ id: "c8", postId: "p2" }));
await forbidden("a container delete", posts.delete());
ok("a partition token is refused outside its partition and for master-key operations");
// The SDK finds no token for the database and sends "null": a 401.
await assert.rejects(alice.database(dbId).read(), (e) => e.code === 401);
ok("a request without a token of its resource is refused");

// --- revoked: deleting the permission ends the token -------------------------------------------
await user.permission("alice-p1").delete();
await assert.rejects(posts.item("p1", "p1").read(), (e) => e.code === 401);
ok("a deleted permission's token is refused");

await database.delete();
console.log("ALL OK");
