// Explorer step "items": the sidebar (create a database and containers,
// one hierarchical; delete one), the Items tab (documents created in the UI
// and through the REST API, a partition paged 20 at a time, open, edit and
// save, a 412 conflict and its Reload, a 409, invalid JSON, delete through
// the in-page confirm dialog) and the Settings tab (time to live edits,
// read back through the API), the tab bar's keyboard navigation, and the
// key prompt (the page served without its key meta, through request
// interception: a wrong key is a 401, the right one opens the explorer).
//
// Deletions are confirmed in the page's own <dialog> (data-test
// "confirm-yes"), not window.confirm.

import assert from "node:assert/strict";

const DB = "explorer-items";
const sel = (test, extra = "") => `[data-test="${test}"]${extra}`;

async function waitText(page, selector, text) {
  try {
    await page.waitForFunction((s, t) => {
      const node = document.querySelector(s);
      return node && node.textContent.includes(t);
    }, {}, selector, text);
  } catch (e) {
    const got = await page.$eval(selector, (n) => n.textContent).catch(() => "(missing)");
    throw new Error(`waiting for ${selector} to contain ${JSON.stringify(text)}: it says ` +
      `${JSON.stringify(got)} (${e.message})`);
  }
}

async function setValue(page, selector, value) {
  await page.$eval(selector, (node, v) => {
    node.value = v;
    node.dispatchEvent(new Event("input", { bubbles: true }));
    node.dispatchEvent(new Event("change", { bubbles: true }));
  }, value);
}

async function editorJson(page) {
  return JSON.parse(await page.$eval(sel("doc-editor"), (n) => n.value));
}

async function countLinks(page) {
  return page.$$eval(sel("doc-link"), (n) => n.length);
}

export async function run(page, ctx) {
  const { api } = ctx;
  await api.request("DELETE", ["dbs", DB]).catch((e) => { if (e.status !== 404) throw e; });
  await page.reload({ waitUntil: "load" });
  await page.waitForSelector(sel("db-list"));

  // ----- the key prompt: a page served without the key (as to a remote client) -----
  await page.setRequestInterception(true);
  const stripKey = async (req) => {
    const url = new URL(req.url());
    if (req.isInterceptResolutionHandled()) return;
    if (url.pathname === "/_explorer/" || url.pathname === "/_explorer/index.html") {
      const res = await fetch(req.url());
      const html = (await res.text()).replace(/<meta name="partita-key"[^>]*>/, "");
      const headers = {};
      res.headers.forEach((v, k) => { if (k !== "content-length") headers[k] = v; });
      await req.respond({ status: res.status, headers, body: html });
    } else {
      await req.continue();
    }
  };
  page.on("request", stripKey);
  try {
    await page.evaluate(() => sessionStorage.clear());
    await page.reload({ waitUntil: "load" });
    await page.waitForSelector(sel("key-form"));
    assert.equal(await page.$('meta[name="partita-key"]'), null);
    assert.equal(await page.$eval(sel("key-input"), (i) => i.type), "password");
    assert.equal(await page.$eval(sel("key-input"), (i) => i.labels.length), 1);
    await page.type(sel("key-input"), Buffer.from("not the key at all").toString("base64"));
    await page.click(sel("key-submit"));
    await page.waitForSelector(`${sel("key-form")} .error[data-status="401"]`);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0, "a refused key is forgotten");
    await setValue(page, sel("key-input"), "");
    await page.type(sel("key-input"), ctx.key);
    await page.click(sel("key-submit"));
    await page.waitForSelector(sel("db-list"));
    assert.ok(!page.url().includes(encodeURIComponent(ctx.key)) && !page.url().includes(ctx.key),
      "the key is never in the URL");
    ctx.log("key prompt: a wrong key is a 401, the right one opens the explorer");
  } finally {
    page.off("request", stripKey);
    await page.setRequestInterception(false);
    await page.evaluate(() => sessionStorage.clear());
  }
  await page.reload({ waitUntil: "load" });
  await page.waitForSelector(sel("db-list"));

  // ----- the header -----
  await waitText(page, "h1", "Partita Data Explorer");
  await waitText(page, sel("endpoint"), new URL(ctx.endpoint).host);

  // ----- a database and a container through the sidebar -----
  await page.click(sel("new-db"));
  await page.waitForSelector(sel("new-db-id"));
  await page.type(sel("new-db-id"), DB);
  await page.click(sel("new-db-create"));
  await page.waitForSelector(sel("db-link", `[data-db="${DB}"]`));
  await page.waitForFunction((db) => location.hash === `#/db/${db}`, {}, DB);
  (await api.request("GET", ["dbs", DB])).body;

  await page.click(sel("new-coll", `[data-db="${DB}"]`));
  await page.waitForSelector(sel("new-coll-id"));
  await page.type(sel("new-coll-id"), "posts");
  await setValue(page, sel("new-coll-pk"), "");
  await page.type(sel("new-coll-pk"), "/postId");
  await page.click(sel("new-coll-create"));
  await page.waitForSelector(sel("view-items"));
  await page.waitForSelector(sel("coll-link", `[data-coll="posts"]`));
  const posts = (await api.request("GET", ["dbs", DB, "colls", "posts"])).body;
  assert.deepEqual(posts.partitionKey.paths, ["/postId"]);
  ctx.log("created database and container in the sidebar");

  // A hierarchical container, then deleted through the sidebar.
  await page.click(sel("new-coll", `[data-db="${DB}"]`));
  await page.waitForSelector(sel("new-coll-id"));
  await page.type(sel("new-coll-id"), "scratch");
  await setValue(page, sel("new-coll-pk"), "/tenant");
  await page.click(sel("new-coll-hierarchical"));
  await page.type(sel("new-coll-pk2"), "/user");
  await page.click(sel("new-coll-create"));
  await page.waitForSelector(sel("coll-link", `[data-coll="scratch"]`));
  const scratch = (await api.request("GET", ["dbs", DB, "colls", "scratch"])).body;
  assert.deepEqual(scratch.partitionKey.paths, ["/tenant", "/user"]);
  assert.equal(scratch.partitionKey.kind, "MultiHash");
  await page.click(sel("delete-coll", `[data-coll="scratch"]`));
  await page.waitForSelector(sel("confirm-dialog"));
  await page.click(sel("confirm-yes"));
  await page.waitForFunction(() => !document.querySelector('[data-test="coll-link"][data-coll="scratch"]'));
  await assert.rejects(api.request("GET", ["dbs", DB, "colls", "scratch"]), { status: 404 });
  ctx.log("hierarchical container created and deleted");

  // ----- documents: 25 in one partition and 2 in another through the API -----
  const docs = ["dbs", DB, "colls", "posts", "docs"];
  for (let i = 0; i < 25; i++) {
    const id = `many-${String(i).padStart(2, "0")}`;
    await api.request("POST", docs, {
      body: { id, postId: "p-many", n: i, text: `post number ${i}` },
      headers: { "x-ms-documentdb-partitionkey": '["p-many"]' },
    });
  }
  for (const id of ["a-1", "a-2"]) {
    await api.request("POST", docs, {
      body: { id, postId: "p-a", title: `api ${id}` },
      headers: { "x-ms-documentdb-partitionkey": '["p-a"]' },
    });
  }

  await page.click(sel("coll-link", '[data-coll="posts"]'));
  await page.waitForSelector(sel("view-items"));
  await page.waitForSelector(sel("pk-select", ` option[value='"p-many"']`));

  // ----- a new document through the UI; a 409 for the same id; invalid JSON -----
  await page.click(sel("doc-new"));
  await page.waitForSelector(sel("doc-create"));
  await setValue(page, sel("doc-editor"),
    JSON.stringify({ id: "ui-1", postId: "p-a", title: "from the UI" }, null, 2));
  await page.click(sel("doc-create"));
  await waitText(page, sel("doc-status"), "Created");
  await waitText(page, sel("doc-status"), "RU");
  const created = (await api.request("GET", [...docs, "ui-1"],
    { headers: { "x-ms-documentdb-partitionkey": '["p-a"]' } })).body;
  assert.equal(created.title, "from the UI");

  await page.click(sel("doc-new"));
  await page.waitForSelector(sel("doc-create"));
  await setValue(page, sel("doc-editor"), JSON.stringify({ id: "ui-1", postId: "p-a" }));
  await page.click(sel("doc-create"));
  await page.waitForSelector(`${sel("doc-error")} .error[data-status="409"]`);
  await waitText(page, sel("doc-error"), "409");

  await setValue(page, sel("doc-editor"), '{"id": "ui-2", "postId": ');
  await page.waitForSelector(sel("doc-json-error"));
  assert.equal(await page.$eval(sel("doc-create"), (b) => b.disabled), true,
    "Create is disabled while the JSON is invalid");
  await setValue(page, sel("doc-editor"), '{"id": "ui-2", "postId": "p-b"}');
  await page.waitForFunction(() => !document.querySelector('[data-test="doc-json-error"]'));
  assert.equal(await page.$eval(sel("doc-create"), (b) => b.disabled), false);
  await page.click(sel("doc-create"));
  await waitText(page, sel("doc-status"), "Created");
  ctx.log("created documents in the UI; 409 and invalid JSON shown");

  // ----- browse one partition, 20 at a time -----
  await page.click(sel("list-refresh"));
  await page.waitForSelector(sel("pk-select", ` option[value='"p-b"']`));
  await page.select(sel("pk-select"), '"p-many"');
  await waitText(page, sel("doc-count"), 'partition "p-many"');
  await waitText(page, sel("doc-count"), "more available");
  assert.equal(await countLinks(page), 20, "the first page holds 20 documents");
  await page.waitForSelector(`${sel("load-more")}:not([hidden])`);
  await waitText(page, sel("list-cost"), "RU");
  await ctx.shot("items-list");
  await page.click(sel("load-more"));
  await page.waitForFunction(() =>
    document.querySelectorAll('[data-test="doc-link"]').length === 25);
  await page.waitForSelector(`${sel("load-more")}[hidden]`, { hidden: true });
  assert.ok(!(await page.$eval(sel("doc-count"), (n) => n.textContent)).includes("more available"));
  const ids = await page.$$eval(sel("doc-link"), (n) => n.map((b) => b.dataset.id));
  assert.deepEqual([...ids].sort(), Array.from({ length: 25 },
    (_, i) => `many-${String(i).padStart(2, "0")}`));
  ctx.log("paged through partition p-many: 20 + 5");

  // ----- open, edit and save -----
  await page.click(sel("doc-link", '[data-id="many-03"]'));
  await waitText(page, sel("editor-title"), "many-03");
  await waitText(page, sel("doc-status"), "Loaded");
  let doc = await editorJson(page);
  assert.equal(doc.n, 3);
  doc.edited = "in the UI";
  await setValue(page, sel("doc-editor"), JSON.stringify(doc, null, 2));
  await page.click(sel("doc-save"));
  await waitText(page, sel("doc-status"), "Saved");
  const saved = (await api.request("GET", [...docs, "many-03"],
    { headers: { "x-ms-documentdb-partitionkey": '["p-many"]' } })).body;
  assert.equal(saved.edited, "in the UI");
  assert.equal((await editorJson(page))._etag, saved._etag, "the editor holds the new _etag");
  await ctx.shot("item-editor");
  ctx.log("edited and saved many-03");

  // ----- someone else changes it: the next save is a 412 -----
  await api.request("PUT", [...docs, "many-03"], {
    body: { ...saved, other: "changed elsewhere" },
    headers: { "x-ms-documentdb-partitionkey": '["p-many"]' },
  });
  doc = await editorJson(page);
  doc.edited = "again";
  await setValue(page, sel("doc-editor"), JSON.stringify(doc, null, 2));
  await page.click(sel("doc-save"));
  await page.waitForSelector(sel("doc-conflict"));
  await waitText(page, sel("doc-conflict"), "412");
  await waitText(page, sel("doc-conflict"), "Conflict");
  await ctx.shot("item-conflict");
  const after = (await api.request("GET", [...docs, "many-03"],
    { headers: { "x-ms-documentdb-partitionkey": '["p-many"]' } })).body;
  assert.equal(after.edited, "in the UI", "the conflicting save changed nothing");
  await page.click(sel("conflict-reload"));
  await page.waitForFunction(() => !document.querySelector('[data-test="doc-conflict"]') &&
    document.querySelector('[data-test="doc-editor"]').value.includes("changed elsewhere"));
  assert.equal((await editorJson(page)).other, "changed elsewhere");
  await waitText(page, sel("doc-status"), "Loaded");
  ctx.log("412 conflict shown; Reload shows the other change");

  // ----- delete, confirmed in the page -----
  await page.click(sel("doc-delete"));
  await page.waitForSelector(sel("confirm-dialog"));
  await page.click(sel("confirm-no"));
  await page.waitForFunction(() => !document.querySelector('[data-test="confirm-dialog"]'));
  await api.request("GET", [...docs, "many-03"],
    { headers: { "x-ms-documentdb-partitionkey": '["p-many"]' } });
  await page.click(sel("doc-delete"));
  await page.waitForSelector(sel("confirm-dialog"));
  await page.click(sel("confirm-yes"));
  await waitText(page, sel("doc-status"), "Deleted many-03");
  await assert.rejects(api.request("GET", [...docs, "many-03"],
    { headers: { "x-ms-documentdb-partitionkey": '["p-many"]' } }), { status: 404 });
  assert.equal(await page.$(sel("doc-link", '[data-id="many-03"]')), null);
  ctx.log("deleted many-03");

  // ----- the free partition-key input -----
  await setValue(page, sel("pk-input"), '"p-a"');
  await page.click(sel("pk-load"));
  await waitText(page, sel("doc-count"), '3 documents in partition "p-a"');
  assert.deepEqual((await page.$$eval(sel("doc-link"), (n) => n.map((b) => b.dataset.id))).sort(),
    ["a-1", "a-2", "ui-1"]);

  // ----- settings: time to live -----
  await page.click(sel("tab-settings"));
  await page.waitForSelector(sel("view-settings"));
  await waitText(page, sel("settings-pk-paths"), "/postId");
  await waitText(page, sel("ttl-current"), "off");
  await page.click(sel("ttl-expire"));
  await setValue(page, sel("ttl-seconds"), "120");
  await page.click(sel("ttl-save"));
  await waitText(page, sel("ttl-status"), "Saved");
  await waitText(page, sel("ttl-current"), "120 seconds");
  assert.equal((await api.request("GET", ["dbs", DB, "colls", "posts"])).body.defaultTtl, 120);
  await page.click(sel("ttl-on"));
  await page.click(sel("ttl-save"));
  await waitText(page, sel("ttl-current"), "-1");
  assert.equal((await api.request("GET", ["dbs", DB, "colls", "posts"])).body.defaultTtl, -1);
  await waitText(page, sel("settings-json"), '"defaultTtl": -1');
  await ctx.shot("settings");
  await page.click(sel("ttl-off"));
  await page.click(sel("ttl-save"));
  await waitText(page, sel("ttl-current"), "off");
  const coll = (await api.request("GET", ["dbs", DB, "colls", "posts"])).body;
  assert.equal(coll.defaultTtl, undefined);
  assert.deepEqual(coll.partitionKey.paths, ["/postId"]);
  ctx.log("time to live: 120 s, -1, off, read back through the API");

  // ----- a database deleted through the sidebar -----
  const SCRATCH = `${DB}-scratch`;
  await api.request("DELETE", ["dbs", SCRATCH]).catch((e) => { if (e.status !== 404) throw e; });
  await api.request("POST", ["dbs"], { body: { id: SCRATCH } });
  await page.click(sel("refresh-tree"));
  await page.waitForSelector(sel("delete-db", `[data-db="${SCRATCH}"]`));
  await page.click(sel("delete-db", `[data-db="${SCRATCH}"]`));
  await page.waitForSelector(sel("confirm-dialog"));
  await page.click(sel("confirm-yes"));
  await page.waitForFunction((db) =>
    !document.querySelector(`[data-test="db-link"][data-db="${db}"]`), {}, SCRATCH);
  await assert.rejects(api.request("GET", ["dbs", SCRATCH]), { status: 404 });
  ctx.log("database deleted through the sidebar");

  // ----- the tab bar by keyboard: ArrowRight from the last tab wraps to the first -----
  await page.focus(sel("tab-settings"));
  await page.keyboard.press("ArrowRight");
  await page.waitForSelector(sel("view-items"));
  assert.equal(await page.evaluate(() => document.activeElement.dataset.test), "tab-items");
  assert.equal(await page.$eval(sel("tab-items"), (t) => t.getAttribute("aria-selected")), "true");
  ctx.log("tablist keyboard navigation");
}
