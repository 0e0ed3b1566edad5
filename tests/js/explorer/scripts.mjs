// The Scripts tab: create createComment in the code editor, execute it
// (result, write set), a procedure that logs, one that throws (400 and its
// message and log), a pre-trigger, and the fuzzer with an invariant.

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const DB = "explorer-scripts";
const COLL = "posts";
const here = path.dirname(fileURLToPath(import.meta.url));
const CREATE_COMMENT = fs.readFileSync(
  path.join(here, "..", "..", "..", "sprocs", "samples", "js", "createComment.js"), "utf8");

const BROKEN = fs.readFileSync(
  path.join(here, "..", "..", "..", "sprocs", "fuzz", "createCommentBroken.js"), "utf8");

const WAT_FILE = path.join(here, "..", "..", "..", "sprocs", "samples", "wat", "createComment.wat");

const HELLO = `function hello(name) {
  // Logs twice and answers with a greeting.
  console.log("hello called with " + name);
  console.log(\`second line: \${name.length}\`);
  getContext().getResponse().setBody({ greeting: "hi " + name, n: 42 });
}
`;

const FAIL = `function failing(reason) {
  console.log("about to fail: " + reason);
  throw new Error("refused: " + reason);
}
`;

const TRIGGER = `function stampCreated() {
  var req = getContext().getRequest();
  var doc = req.getBody();
  doc.stamped = /^p/.test(doc.postId) ? "yes" : "no";
  req.setBody(doc);
}
`;

function check(cond, message) {
  if (!cond) throw new Error(`scripts: ${message}`);
}

async function setValue(page, selector, value) {
  await page.$eval(selector, (e, v) => {
    e.value = v;
    e.dispatchEvent(new Event("input", { bubbles: true }));
    e.dispatchEvent(new Event("change", { bubbles: true }));
  }, value);
}

const text = (page, sel) => page.$eval(sel, (e) => e.textContent);

/** Creates a script through the UI: New, id, code (typed or set), Create. */
async function createScript(page, kind, id, code, { type = false, trigger = null } = {}) {
  await page.click(`[data-test="scripts-new-${kind}"]`);
  await page.waitForSelector('[data-test="script-form"] [data-test="script-id"]:not([readonly])', { timeout: 30000 });
  await page.type('[data-test="script-id"]', id);
  if (type) {
    await setValue(page, '[data-test="script-body"]', "");
    await page.focus('[data-test="script-body"]');
    await page.keyboard.type(code);
  } else {
    await setValue(page, '[data-test="script-body"]', code);
  }
  if (trigger) {
    await page.select('[data-test="script-trigger-type"]', trigger.type);
    await page.select('[data-test="script-trigger-op"]', trigger.op);
  }
  await page.click('[data-test="script-save"]');
  await page.waitForFunction((k, i) => {
    const alert = document.querySelector('[data-test="script-status"] [role="alert"]');
    if (alert) return true;
    return document.querySelector(`[data-test="script-item"][data-kind="${k}"][data-id="${i}"]`) &&
      document.querySelector('[data-test="script-id"][readonly]');
  }, { timeout: 30000 }, kind, id);
  const alert = await page.$('[data-test="script-status"] [role="alert"]');
  check(!alert, `creating ${kind}/${id} failed: ${alert && await alert.evaluate((e) => e.textContent)}`);
}

async function openScript(page, kind, id) {
  await page.click(`[data-test="script-item"][data-kind="${kind}"][data-id="${id}"]`);
  await page.waitForFunction((i) => {
    const input = document.querySelector('[data-test="script-id"][readonly]');
    return input && input.value === i;
  }, { timeout: 30000 }, id);
}

/** Executes the open procedure; resolves to "ok" or "error". */
async function execute(page, pk, params) {
  await setValue(page, '[data-test="exec-pk"]', pk);
  await setValue(page, '[data-test="exec-params"]', params);
  await page.click('[data-test="exec-run"]');
  await page.waitForFunction(() => {
    const s = document.querySelector('[data-test="exec-output"]').dataset.state;
    return s === "ok" || s === "error";
  }, { timeout: 30000 });
  return page.$eval('[data-test="exec-output"]', (e) => e.dataset.state);
}

export async function run(page, ctx) {
  const { api } = ctx;
  try { await api.request("DELETE", ["dbs", DB]); } catch (e) { if (e.status !== 404) throw e; }
  await api.request("POST", ["dbs"], { body: { id: DB } });
  await api.request("POST", ["dbs", DB, "colls"], {
    body: { id: COLL, partitionKey: { paths: ["/postId"], kind: "Hash", version: 2 } },
  });
  for (const p of ["p1", "p2"]) {
    await api.request("POST", ["dbs", DB, "colls", COLL, "docs"], {
      body: { id: p, postId: p, type: "post", title: `post ${p}`, commentCount: 0 },
      headers: { "x-ms-documentdb-partitionkey": JSON.stringify([p]) },
    });
  }

  await page.goto(`${ctx.endpoint}_explorer/#/db/${DB}/coll/${COLL}/scripts`);
  await page.waitForSelector('[data-test="scripts-new-sprocs"]', { timeout: 30000 });

  // createComment, through the code editor.
  await createScript(page, "sprocs", "createComment", CREATE_COMMENT);
  const stored = await api.request("GET", ["dbs", DB, "colls", COLL, "sprocs", "createComment"]);
  check(stored.body.body === CREATE_COMMENT, "the stored body differs from the text entered");
  const tokens = await page.$$eval('.code-editor .code-highlight span', (s) => s.map((x) => x.className));
  check(tokens.includes("tok-keyword") && tokens.includes("tok-string"),
    `highlight classes ${[...new Set(tokens)]}`);
  check(await page.$eval('.code-editor .code-highlight', (p) => p.textContent.startsWith("function createComment")),
    "the highlight layer does not show the code");
  await ctx.shot("scripts-editor");

  // Execute it: empty result, the write set has the replace and the create.
  let state = await execute(page, '"p1"', '["p1", {"id": "c1", "type": "comment", "text": "first!"}]');
  if (state === "error") throw new Error(`createComment failed: ${await text(page, '[data-test="exec-output"]')}`);
  const cost = await text(page, '[data-test="exec-cost"]');
  check(/RU/.test(cost) && /ms/.test(cost), `execute cost ${cost}`);
  await text(page, '[data-test="exec-result"]');
  const writes = await page.$$eval('[data-test="exec-writes-table"] tbody tr', (trs) =>
    trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  check(writes.length === 2, `write set ${JSON.stringify(writes)} (${await text(page, '[data-test="exec-writes"]')})`);
  check(writes[0][0] === "replace" && writes[0][1] === "p1" && JSON.parse(writes[0][2]).commentCount === 1,
    `first write ${JSON.stringify(writes[0])}`);
  check(writes[1][0] === "create" && writes[1][1] === "c1" && JSON.parse(writes[1][2]).postId === "p1",
    `second write ${JSON.stringify(writes[1])}`);
  const post = await api.request("GET", ["dbs", DB, "colls", COLL, "docs", "p1"],
    { headers: { "x-ms-documentdb-partitionkey": '["p1"]' } });
  check(post.body.commentCount === 1, `post p1 has commentCount ${post.body.commentCount}`);
  await ctx.shot("scripts-execute");

  // A procedure that logs, typed into the editor key by key.
  await createScript(page, "sprocs", "hello", HELLO, { type: true });
  state = await execute(page, '"p2"', '["Ada"]');
  check(state === "ok", `hello failed: ${await text(page, '[data-test="exec-output"]')}`);
  const result = JSON.parse(await text(page, '[data-test="exec-result"]'));
  check(result.greeting === "hi Ada" && result.n === 42, `hello result ${JSON.stringify(result)}`);
  const log = await text(page, '[data-test="exec-log"]');
  check(log.includes("hello called with Ada") && log.includes("second line: 3"), `hello log ${log}`);
  const noWrites = await text(page, '[data-test="exec-writes"]');
  check(noWrites.includes("No writes") || noWrites.includes("no write set"), `hello writes ${noWrites}`);

  // A procedure that throws: 400, its message and its log.
  await createScript(page, "sprocs", "failing", FAIL);
  state = await execute(page, '"p1"', '["no reason"]');
  check(state === "error", "the throwing procedure succeeded");
  const alert = await page.$('[data-test="exec-error"] [role="alert"]');
  const status = await alert.evaluate((e) => e.dataset.status);
  const message = await alert.evaluate((e) => e.textContent);
  check(status === "400" && message.includes("refused: no reason"), `failure ${status}: ${message}`);
  const failLog = await text(page, '[data-test="exec-log"]');
  ctx.log(`scripts: failure -> ${message.slice(0, 100)}; log ${JSON.stringify(failLog)}`);

  // Delete hello through the confirmation dialog.
  await openScript(page, "sprocs", "hello");
  await page.click('[data-test="script-delete"]');
  await page.waitForSelector('[data-test="confirm-yes"]', { timeout: 30000 });
  await page.click('[data-test="confirm-yes"]');
  await page.waitForFunction(() =>
    !document.querySelector('[data-test="script-item"][data-id="hello"]') &&
    document.querySelector('[data-test="script-item"][data-id="failing"]'), { timeout: 30000 });
  try {
    await api.request("GET", ["dbs", DB, "colls", COLL, "sprocs", "hello"]);
    throw new Error("scripts: hello still exists after Delete");
  } catch (e) {
    if (e.status !== 404) throw e;
  }

  // A pre-trigger on create.
  await createScript(page, "triggers", "stampCreated", TRIGGER, { trigger: { type: "Pre", op: "Create" } });
  const trig = await api.request("GET", ["dbs", DB, "colls", COLL, "triggers", "stampCreated"]);
  check(trig.body.triggerType === "Pre" && trig.body.triggerOperation === "Create",
    `trigger ${trig.body.triggerType}/${trig.body.triggerOperation}`);
  const stamped = await api.request("POST", ["dbs", DB, "colls", COLL, "docs"], {
    body: { id: "t1", postId: "p3", type: "post", commentCount: 0 },
    headers: { "x-ms-documentdb-partitionkey": '["p3"]', "x-ms-documentdb-pre-trigger-include": "stampCreated" },
  });
  check(stamped.body.stamped === "yes", `the pre-trigger did not run: ${JSON.stringify(stamped.body)}`);

  // A WebAssembly procedure uploaded as a file (createComment in WAT).
  await page.click('[data-test="scripts-new-sprocs"]');
  await page.waitForSelector('[data-test="script-form"] [data-test="script-id"]:not([readonly])', { timeout: 30000 });
  await page.type('[data-test="script-id"]', "createCommentWasm");
  const file = await page.$('[data-test="script-wasm-file"]');
  await file.uploadFile(WAT_FILE);
  await page.waitForFunction(() =>
    /bytes\)/.test(document.querySelector('[data-test="script-wasm-note"]').textContent), { timeout: 30000 });
  await page.click('[data-test="script-save"]');
  await page.waitForFunction(() =>
    document.querySelector('[data-test="script-status"] [role="alert"]') ||
    document.querySelector('[data-test="script-wasm-stored"]'), { timeout: 30000 });
  const wasmAlert = await page.$('[data-test="script-status"] [role="alert"]');
  check(!wasmAlert, `uploading the module failed: ${wasmAlert && await wasmAlert.evaluate((e) => e.textContent)}`);
  const wasmStored = await api.request("GET", ["dbs", DB, "colls", COLL, "sprocs", "createCommentWasm"]);
  check(wasmStored.body.language === "wasm" &&
    // WAT text is converted to a binary module at upload.
    Buffer.from(wasmStored.body.body, "base64").subarray(0, 4).equals(Buffer.from("\0asm", "latin1")),
    `the stored module: language ${wasmStored.body.language}`);
  state = await execute(page, '"p2"', '["p2", {"id": "cw1", "type": "comment", "text": "from wasm"}]');
  check(state === "ok", `createCommentWasm failed: ${await text(page, '[data-test="exec-output"]')}`);
  const wasmWrites = await page.$$eval('[data-test="exec-writes-table"] tbody tr', (trs) =>
    trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  check(wasmWrites.length === 2 && wasmWrites[0][0] === "replace" && wasmWrites[0][1] === "p2" &&
    wasmWrites[1][0] === "create" && wasmWrites[1][1] === "cw1", `wasm write set ${JSON.stringify(wasmWrites)}`);

  // The fuzzer on createComment, with the comment-count invariant.
  await openScript(page, "sprocs", "createComment");
  await setValue(page, '[data-test="fuzz-pks"]', "p1, p2");
  await setValue(page, '[data-test="fuzz-params"]', '["$pk", {"id": "$seed", "type": "comment", "text": "hi"}]');
  await setValue(page, '[data-test="fuzz-invariant"]',
    "SELECT VALUE SUM(c.type = 'post' ? c.commentCount : -1) FROM c");
  await setValue(page, '[data-test="fuzz-expect"]', "[0]");
  await setValue(page, '[data-test="fuzz-calls"]', "100");
  await setValue(page, '[data-test="fuzz-seed"]', "7");
  await page.click('[data-test="fuzz-run"]');
  await page.waitForFunction(() => {
    const s = document.querySelector('[data-test="fuzz-output"]').dataset.state;
    return s === "ok" || s === "error";
  }, { timeout: 300000 });
  const fuzzErr = await page.$('[data-test="fuzz-error"]');
  check(!fuzzErr, `fuzz failed: ${fuzzErr && await fuzzErr.evaluate((e) => e.textContent)}`);
  const calls = await text(page, '[data-test="fuzz-calls-done"]');
  const violations = await text(page, '[data-test="fuzz-violations"]');
  const injected = Number(await text(page, '[data-test="fuzz-faults-injected"]'));
  check(calls === "100", `fuzz calls ${calls}`);
  check(violations === "0", `fuzz violations ${violations}`);
  check(injected > 0, `fuzz injected ${injected} faults`);
  check(await page.$('[data-test="fuzz-faults"]'), "no faults table");
  ctx.log(`scripts: fuzz 100 calls, ${injected} faults, ${violations} violations`);
  await page.$eval('[data-test="fuzz-panel"]', (e) => e.scrollIntoView());
  await ctx.shot("scripts-fuzz");

  // The deliberately broken variant: the fuzzer finds the violation and a
  // reproduction, which replays to the same violation.
  await api.request("POST", ["dbs", DB, "colls", COLL, "sprocs"],
    { body: { id: "createCommentBroken", body: BROKEN } });
  await page.click('[data-test="refresh-tree"]').catch(() => {});
  await page.goto(`${ctx.endpoint}_explorer/#/db/${DB}/coll/${COLL}/items`);
  await page.waitForSelector('[data-test="tab-scripts"]', { timeout: 30000 });
  await page.click('[data-test="tab-scripts"]');
  await page.waitForSelector('[data-test="script-item"][data-id="createCommentBroken"]', { timeout: 30000 });
  await openScript(page, "sprocs", "createCommentBroken");
  await setValue(page, '[data-test="fuzz-pks"]', '["p1", "p2"]');
  await setValue(page, '[data-test="fuzz-params"]', '["$pk", {"id": "$seed", "type": "comment", "text": "hi"}]');
  await setValue(page, '[data-test="fuzz-invariant"]',
    "SELECT VALUE SUM(c.type = 'post' ? c.commentCount : -1) FROM c");
  await setValue(page, '[data-test="fuzz-expect"]', "[0]");
  await setValue(page, '[data-test="fuzz-calls"]', "1000");
  await setValue(page, '[data-test="fuzz-seed"]', "7");
  const fuzzOnce = async () => {
    await page.click('[data-test="fuzz-run"]');
    await page.waitForFunction(() => {
      const s = document.querySelector('[data-test="fuzz-output"]').dataset.state;
      return s === "ok" || s === "error";
    }, { timeout: 300000 });
    const e = await page.$('[data-test="fuzz-error"]');
    check(!e, `fuzz failed: ${e && await e.evaluate((x) => x.textContent)}`);
  };
  await fuzzOnce();
  check(await text(page, '[data-test="fuzz-violations"]') === "1", "the broken procedure has no violation");
  const kind = await text(page, '[data-test="fuzz-violation-kind"]');
  const repro = await text(page, '[data-test="fuzz-reproduction-text"]');
  ctx.log(`scripts: broken -> ${kind}; reproduction ${repro}`);
  await page.$eval('[data-test="fuzz-violation"]', (e) => e.scrollIntoView());
  await ctx.shot("scripts-fuzz-violation");
  await page.click('[data-test="fuzz-use-reproduction"]');
  const [, rSeed, rCalls] = repro.match(/^seed (\d+), (\d+) call/);
  check(await page.$eval('[data-test="fuzz-seed"]', (e) => e.value) === rSeed, "the seed field is not the reproduction's");
  await fuzzOnce();
  check(await text(page, '[data-test="fuzz-violations"]') === "1",
    `replaying seed ${rSeed} for ${rCalls} calls finds no violation`);
  check(await text(page, '[data-test="fuzz-calls-done"]') === rCalls, "the replay ran another number of calls");
}
