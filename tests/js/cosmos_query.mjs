// Acceptance test: cross-partition queries with the official JavaScript SDK
// (@azure/cosmos) against `partita serve --tls`, on a container with
// several physical partitions (12,000 RU/s: two ranges), so the SDK asks for
// the query plan and runs its own pipeline over the ranges.
//
// Usage: NODE_EXTRA_CA_CERTS=cert.pem node cosmos_query.mjs ENDPOINT KEY
// Run by cli/tests/all/server.rs. Prints "ALL OK" at the end; the first
// failed assertion exits non-zero.

import assert from "node:assert/strict";
import { CosmosClient } from "@azure/cosmos";

const [endpoint, key] = process.argv.slice(2);
const ok = (name) => console.log(`ok - ${name}`);

const client = new CosmosClient({ endpoint, key });
const { database } = await client.databases.create({ id: `js-q-${Date.now()}` });
const { container } = await database.containers.create({
  id: "scores",
  partitionKey: { paths: ["/pk"] },
  throughput: 12000,
});
const { resources: ranges } = await container.readPartitionKeyRanges().fetchAll();
assert.equal(ranges.length, 2);
ok("12,000 RU/s gives two partition-key ranges");

const docs = [];
for (let i = 0; i < 40; i++) {
  docs.push({ id: `d${i}`, pk: `pk-${i % 10}`, n: (i * 7) % 40, group: i % 3 });
}
for (const doc of docs) await container.items.create(doc);

const all = (query) => container.items.query(query, { maxItemCount: 7 }).fetchAll();

let { resources } = await all("SELECT c.id, c.n FROM c ORDER BY c.n DESC");
assert.deepEqual(resources.map((r) => r.n), docs.map((d) => d.n).sort((a, b) => b - a));
ok("ORDER BY merged across ranges, paged");

({ resources } = await all("SELECT TOP 5 VALUE c.n FROM c ORDER BY c.n"));
assert.deepEqual(resources, [0, 1, 2, 3, 4]);
ok("TOP with ORDER BY");

({ resources } = await all("SELECT VALUE c.n FROM c ORDER BY c.n OFFSET 3 LIMIT 4"));
assert.deepEqual(resources, [3, 4, 5, 6]);
ok("OFFSET and LIMIT with ORDER BY");

({ resources } = await all("SELECT VALUE COUNT(1) FROM c"));
assert.deepEqual(resources, [40]);
({ resources } = await all("SELECT VALUE AVG(c.n) FROM c"));
assert.deepEqual(resources, [19.5]);
({ resources } = await all("SELECT VALUE MAX(c.n) FROM c WHERE c.group = 1"));
assert.deepEqual(resources, [Math.max(...docs.filter((d) => d.group === 1).map((d) => d.n))]);
ok("COUNT, AVG and MAX combined from each range's partial result");

// (Strings: the SDK's own DISTINCT drops falsy values such as 0.)
({ resources } = await all("SELECT DISTINCT VALUE c.pk FROM c"));
assert.deepEqual([...resources].sort(), [...new Set(docs.map((d) => d.pk))].sort());
ok("DISTINCT across ranges");

({ resources } = await all("SELECT * FROM c WHERE c.n >= 30"));
assert.equal(resources.length, 10);
ok("a filter across ranges");

await database.delete();
console.log("ALL OK");
