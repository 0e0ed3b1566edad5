// The Query tab: a parameterized cross-partition query paged by 10, the
// table/JSON toggle, a single-partition query and a syntax error.

const DB = "explorer-query";
const COLL = "items";

function check(cond, message) {
  if (!cond) throw new Error(`query: ${message}`);
}

/** Clicks `selector` in the query view and waits for the fetch it starts to finish. */
async function clickAndWait(page, selector) {
  const view = '[data-test="view-query"]';
  const before = await page.$eval(view, (v) => Number(v.dataset.seq || 0));
  await page.click(selector);
  await page.waitForFunction((sel, n) => Number(document.querySelector(sel).dataset.seq || 0) > n,
    { timeout: 30000 }, view, before);
}

async function setValue(page, selector, value) {
  await page.$eval(selector, (e, v) => {
    e.value = v;
    e.dispatchEvent(new Event("input", { bubbles: true }));
    e.dispatchEvent(new Event("change", { bubbles: true }));
  }, value);
}

async function tableRows(page) {
  return page.$$eval('[data-test="query-table"] tbody tr', (trs) =>
    trs.map((tr) => [...tr.children].map((td) => td.textContent)));
}

async function tableHead(page) {
  return page.$$eval('[data-test="query-table"] thead th', (ths) => ths.map((th) => th.textContent));
}

export async function run(page, ctx) {
  const { api } = ctx;
  try { await api.request("DELETE", ["dbs", DB]); } catch (e) { if (e.status !== 404) throw e; }
  await api.request("POST", ["dbs"], { body: { id: DB } });
  await api.request("POST", ["dbs", DB, "colls"], {
    body: { id: COLL, partitionKey: { paths: ["/pk"], kind: "Hash", version: 2 } },
  });
  for (let i = 0; i < 30; i++) {
    await api.request("POST", ["dbs", DB, "colls", COLL, "docs"], {
      body: { id: `d${String(i).padStart(2, "0")}`, pk: `p${i % 3}`, n: i,
        tag: i % 2 ? "odd" : "even", nested: { a: i, list: [i, "x"] } },
      headers: { "x-ms-documentdb-partitionkey": JSON.stringify([`p${i % 3}`]) },
    });
  }

  await page.goto(`${ctx.endpoint}_explorer/#/db/${DB}/coll/${COLL}/query`);
  await page.waitForSelector('[data-test="query-text"]', { timeout: 30000 });

  // Cross-partition, page size 10, one parameter: n >= 5 is 25 documents.
  await setValue(page, '[data-test="query-text"]',
    "SELECT * FROM c WHERE c.n >= @min ORDER BY c.n");
  await page.click('[data-test="query-add-param"]');
  await page.type('[data-test="query-param-name"]', "@min");
  await page.type('[data-test="query-param-value"]', "5");
  await page.select('[data-test="query-scope"]', "cross");
  await setValue(page, '[data-test="query-page-size"]', "10");
  await clickAndWait(page, '[data-test="query-run"]');

  const err0 = await page.$('[data-test="query-error"] [role="alert"]');
  check(!err0, `the first page failed: ${err0 && await err0.evaluate((e) => e.textContent)}`);
  let rows = await tableRows(page);
  check(rows.length === 10, `page 1 has ${rows.length} rows, not 10`);
  const head = await tableHead(page);
  for (const k of ["id", "pk", "n", "nested"]) check(head.includes(k), `no column ${k} in ${head}`);
  const nCol = head.indexOf("n");
  check(rows[0][nCol] === "5" && rows[9][nCol] === "14", `page 1 is n=${rows[0][nCol]}..${rows[9][nCol]}`);
  const nested = rows[0][head.indexOf("nested")];
  check(nested === '{"a":5,"list":[5,"x"]}', `nested cell is ${nested}`);
  const cost = await page.$eval('[data-test="query-cost"]', (e) => e.textContent);
  check(/\d+\.\d\d RU · \d+(\.\d)? ms/.test(cost), `cost line ${cost}`);
  const count = await page.$eval('[data-test="query-count"]', (e) => e.textContent);
  check(count.startsWith("10 "), `count ${count}`);
  const metrics = await page.$('[data-test="query-metrics"]');
  ctx.log(`query: page 1 ${cost}; metrics ${metrics ? "shown" : "not sent"}`);
  await ctx.shot("query-table");

  // Page 2.
  check(!(await page.$eval('[data-test="query-next"]', (b) => b.disabled)), "Next page is disabled");
  await clickAndWait(page, '[data-test="query-next"]');
  rows = await tableRows(page);
  check(rows.length === 10, `page 2 has ${rows.length} rows`);
  check(rows[0][nCol] === "15" && rows[9][nCol] === "24", `page 2 is n=${rows[0][nCol]}..${rows[9][nCol]}`);
  const page2 = await page.$eval('[data-test="query-page"]', (e) => e.textContent);
  check(page2 === "Page 2", `page label ${page2}`);
  const cost2 = await page.$eval('[data-test="query-cost"]', (e) => e.textContent);
  check(/RU/.test(cost2) && /ms/.test(cost2), `page 2 cost ${cost2}`);
  let history = await page.$$eval('[data-test="query-history-entry"]', (li) => li.map((l) => l.textContent));
  check(history.length === 2 && /^page 1: 10 results, [\d.]+ RU, [\d.]+ ms$/.test(history[0]) &&
    history[1].startsWith("page 2: 10 results"), `history ${JSON.stringify(history)}`);

  // Page 3: the last 5, and no further page.
  await clickAndWait(page, '[data-test="query-next"]');
  rows = await tableRows(page);
  check(rows.length === 5, `page 3 has ${rows.length} rows`);
  check(await page.$eval('[data-test="query-next"]', (b) => b.disabled), "Next page after the last page");

  // Table -> JSON and back.
  await page.click('[data-test="query-toggle"]');
  await page.waitForSelector('[data-test="query-json"]', { timeout: 30000 });
  const json = JSON.parse(await page.$eval('[data-test="query-json"]', (e) => e.textContent));
  check(Array.isArray(json) && json.length === 5 && json[0].n === 25, `JSON view ${JSON.stringify(json).slice(0, 80)}`);
  check(!(await page.$('[data-test="query-table"]')), "the table is still shown in JSON mode");
  await ctx.shot("query-json");
  await page.click('[data-test="query-toggle"]');
  await page.waitForSelector('[data-test="query-table"]', { timeout: 30000 });

  // Single partition, a scalar projection: one "value" column.
  await page.click('[data-test="query-param-remove"]');
  await setValue(page, '[data-test="query-text"]', "SELECT VALUE c.n FROM c");
  await page.select('[data-test="query-scope"]', "single");
  await setValue(page, '[data-test="query-pk"]', '"p1"');
  await setValue(page, '[data-test="query-page-size"]', "50");
  await clickAndWait(page, '[data-test="query-run"]');
  const err1 = await page.$('[data-test="query-error"] [role="alert"]');
  check(!err1, `single-partition query failed: ${err1 && await err1.evaluate((e) => e.textContent)}`);
  check(JSON.stringify(await tableHead(page)) === '["value"]', `scalar columns ${await tableHead(page)}`);
  rows = await tableRows(page);
  check(rows.length === 10 && rows.every(([v]) => Number(v) % 3 === 1),
    `partition p1 rows ${JSON.stringify(rows)}`);
  history = await page.$$eval('[data-test="query-history-entry"]', (li) => li.length);
  check(history === 1, `history after a new run has ${history} entries`);

  // A syntax error: a readable 400 (Ctrl+Enter runs it).
  await setValue(page, '[data-test="query-text"]', "SELEC * FROM c WHERE");
  const before = await page.$eval('[data-test="view-query"]', (v) => Number(v.dataset.seq || 0));
  await page.focus('[data-test="query-text"]');
  await page.keyboard.down("Control");
  await page.keyboard.press("Enter");
  await page.keyboard.up("Control");
  await page.waitForFunction((n) => Number(document.querySelector('[data-test="view-query"]').dataset.seq || 0) > n,
    { timeout: 30000 }, before);
  const alert = await page.waitForSelector('[data-test="query-error"] [role="alert"]', { timeout: 30000 });
  const status = await alert.evaluate((e) => e.dataset.status);
  const text = await alert.evaluate((e) => e.textContent);
  check(status === "400", `bad query status ${status}: ${text}`);
  ctx.log(`query: bad query -> ${text.slice(0, 120)}`);
}
