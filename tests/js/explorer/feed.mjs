// Explorer step "feed": the Change feed tab reads the container's change
// feed from the beginning (existing documents appear), then keeps polling:
// a document written through the REST API, and a change to an existing one,
// appear without a reload, newest first. Pause stops the polling (a write
// while paused shows only after Resume); "From now" starts empty.

import assert from "node:assert/strict";

const DB = "explorer-feed";
const sel = (test, extra = "") => `[data-test="${test}"]${extra}`;

async function changeIds(page) {
  return page.$$eval(sel("feed-change"), (n) => n.map((li) => li.dataset.id));
}

async function waitIds(page, expected, what) {
  try {
    await page.waitForFunction((want) => {
      const got = [...document.querySelectorAll('[data-test="feed-change"]')].map((li) => li.dataset.id);
      return JSON.stringify(got) === JSON.stringify(want);
    }, {}, expected);
  } catch (e) {
    throw new Error(`${what}: expected changes ${JSON.stringify(expected)}, the page shows ` +
      `${JSON.stringify(await changeIds(page))} (${e.message})`);
  }
}

export async function run(page, ctx) {
  const { api } = ctx;
  await api.request("DELETE", ["dbs", DB]).catch((e) => { if (e.status !== 404) throw e; });
  await api.request("POST", ["dbs"], { body: { id: DB } });
  await api.request("POST", ["dbs", DB, "colls"], {
    body: { id: "events", partitionKey: { paths: ["/tenant"], kind: "Hash", version: 2 } },
  });
  const docs = ["dbs", DB, "colls", "events", "docs"];
  const write = (method, doc, id) => api.request(method, id ? [...docs, id] : docs, {
    body: doc, headers: { "x-ms-documentdb-partitionkey": JSON.stringify([doc.tenant]) },
  });
  await write("POST", { id: "e1", tenant: "t1", n: 1 });
  await write("POST", { id: "e2", tenant: "t2", n: 2 });

  await page.goto(`${ctx.endpoint}_explorer/#/db/${DB}/coll/events/items`);
  await page.waitForSelector(sel("coll-link", '[data-coll="events"]'));
  await page.click(sel("coll-link", '[data-coll="events"]'));
  await page.waitForSelector(sel("view-items"));
  await page.click(sel("tab-feed"));
  await page.waitForSelector(sel("view-feed"));
  assert.equal(await page.$eval(sel("feed-start"), (s) => s.value), "beginning");
  await waitIds(page, ["e2", "e1"], "from the beginning");
  const first = await page.$(sel("feed-change", '[data-id="e1"]'));
  const text = await first.evaluate((li) => li.textContent);
  assert.ok(text.includes('"t1"'), `the partition key is shown: ${text}`);
  assert.ok(text.includes("_ts"), `_ts is shown: ${text}`);
  assert.ok(text.includes('"n": 1'), `the document is shown: ${text}`);
  await page.waitForFunction(() =>
    /Live/.test(document.querySelector('[data-test="feed-status"]').textContent));
  ctx.log("existing changes listed from the beginning");

  // Live: a new document and a change to an old one appear on top, no reload.
  const marker = await page.evaluate(() => { window.__feedMarker = 42; return 42; });
  await write("POST", { id: "e3", tenant: "t1", n: 3 });
  await waitIds(page, ["e3", "e2", "e1"], "after a create through the API");
  await write("PUT", { id: "e1", tenant: "t1", n: 10 }, "e1");
  await waitIds(page, ["e1", "e3", "e2", "e1"], "after a replace through the API");
  const top = await page.$eval(sel("feed-change"), (li) => li.textContent);
  assert.ok(top.includes('"n": 10'), `the newest change is on top: ${top}`);
  assert.equal(await page.evaluate(() => window.__feedMarker), marker, "no reload happened");
  await ctx.shot("feed");
  ctx.log("changes appear live, newest first");

  // Pause: nothing new shows; Resume catches up.
  await page.click(sel("feed-pause"));
  await page.waitForFunction(() =>
    document.querySelector('[data-test="feed-pause"]').textContent === "Resume");
  await write("POST", { id: "e4", tenant: "t2", n: 4 });
  await new Promise((r) => setTimeout(r, 2500));
  assert.deepEqual(await changeIds(page), ["e1", "e3", "e2", "e1"], "paused: no new change shown");
  await page.click(sel("feed-pause"));
  await waitIds(page, ["e4", "e1", "e3", "e2", "e1"], "after Resume");
  ctx.log("pause and resume");

  // From now: starts empty, then shows only what is written next.
  await page.select(sel("feed-start"), "now");
  await page.click(sel("feed-restart"));
  await page.waitForFunction(() => /from now/.test(
    document.querySelector('[data-test="feed-status"]').textContent) &&
    /[1-9]\d* poll/.test(document.querySelector('[data-test="feed-status"]').textContent));
  assert.deepEqual(await changeIds(page), []);
  await write("POST", { id: "e5", tenant: "t1", n: 5 });
  await waitIds(page, ["e5"], "from now");
  ctx.log("from now");

  // Leaving the tab stops the polling (the cleanup runs): no feed request after.
  await page.click(sel("tab-settings"));
  await page.waitForSelector(sel("view-settings"));
  let feedRequests = 0;
  const count = (req) => {
    if (req.headers()["a-im"]) feedRequests++;
  };
  page.on("request", count);
  await new Promise((r) => setTimeout(r, 2500));
  page.off("request", count);
  assert.equal(feedRequests, 0, "no change-feed request after leaving the tab");
  ctx.log("polling stops when leaving the tab");
}
