// End-to-end test of the Data Explorer (`partita serve` at /_explorer/) in
// headless Chromium.
//
// Usage: node tests/js/explorer.mjs <endpoint> <screenshot-dir> [step ...]
//   e.g. node tests/js/explorer.mjs http://127.0.0.1:8081/ /tmp/shots items feed
//
// Runs the step modules tests/js/explorer/<step>.mjs in order (default: items
// query scripts feed). Each exports `async function run(page, ctx)` with
// ctx = {endpoint, key, shot(name), api, log(...)}:
//   - shot(name) saves <screenshot-dir>/<name>.png (the 1280×800 viewport);
//   - api.request(method, segments, {body, headers}) is a small Node client
//     signing like server/explorer/api.js, to set data up or check results
//     from outside the page; it resolves to {status, body, headers, charge,
//     continuation} and rejects with an Error carrying status and substatus;
//   - log(...) prints a line.
// Before each step the runner opens <endpoint>_explorer/ afresh and waits for
// the sidebar's database list, so steps are independent.
//
// The page must log no console error and throw no uncaught error (a CSP
// violation is both a console error and a `securitypolicyviolation` event,
// reported here), and every file of /_explorer/ must load. The one console
// error allowed is Chromium's "Failed to load resource: ... status of 4xx"
// that a REST call answered with an error status logs (the tests provoke
// 404s, 409s and 412s on purpose). Prints "ALL OK" at the end; on a failure
// saves <screenshot-dir>/failure.png and exits 1.
//
// The emulator's key is used unless PARTITA_KEY is set.

import { createHmac } from "node:crypto";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import puppeteer from "puppeteer-core";
import { resourceOf } from "../../server/explorer/api.js";

const EMULATOR_KEY =
  "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==";
const DEFAULT_STEPS = ["items", "query", "scripts", "feed"];

const args = process.argv.slice(2);
if (args.length < 2) {
  console.error("usage: node explorer.mjs <endpoint> <screenshot-dir> [step ...]");
  process.exit(2);
}
const endpoint = args[0].endsWith("/") ? args[0] : `${args[0]}/`;
const shotDir = path.resolve(args[1]);
const steps = args.length > 2 ? args.slice(2) : DEFAULT_STEPS;
const key = process.env.PARTITA_KEY || EMULATOR_KEY;
const here = path.dirname(fileURLToPath(import.meta.url));
mkdirSync(shotDir, { recursive: true });

// A ceiling that catches a hang (a step waits 30 s at most for anything),
// not a timing: the whole run takes well under a minute.
const CEILING_MS = Number(process.env.PARTITA_EXPLORER_CEILING_MS || 10 * 60 * 1000);
setTimeout(() => {
  console.error(`FAILED: the run did not finish within ${CEILING_MS} ms`);
  process.exit(1);
}, CEILING_MS).unref();

// ----- a tiny signing client (the page's own resourceOf, Node's HMAC) -----

function authorization(verb, segments, date) {
  const [type, link] = resourceOf(segments);
  const text = `${verb.toLowerCase()}\n${type.toLowerCase()}\n${link}\n${date.toLowerCase()}\n\n`;
  const sig = createHmac("sha256", Buffer.from(key, "base64")).update(text).digest("base64");
  return encodeURIComponent(`type=master&ver=1.0&sig=${sig}`);
}

const api = {
  async request(method, segments, { body, headers = {} } = {}) {
    if (typeof segments === "string") segments = segments.split("/").filter((s) => s);
    const date = new Date().toUTCString();
    const h = {
      "x-ms-date": date,
      "x-ms-version": "2020-07-15",
      authorization: authorization(method, segments, date),
      accept: "application/json",
      ...headers,
    };
    let payload;
    if (body !== undefined) {
      payload = typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body);
      if (!h["content-type"]) h["content-type"] = "application/json";
    }
    const url = endpoint + segments.map(encodeURIComponent).join("/");
    const res = await fetch(url, { method, headers: h, body: payload });
    const text = await res.text();
    const out = {};
    res.headers.forEach((v, k) => { out[k] = v; });
    let parsed = null;
    if (text) { try { parsed = JSON.parse(text); } catch { parsed = text; } }
    if (res.status >= 400) {
      const message = parsed && parsed.message ? parsed.message : text;
      const err = new Error(`${method} /${segments.join("/")}: ${res.status} ${message}`);
      err.status = res.status;
      err.substatus = Number(out["x-ms-substatus"] || 0);
      err.body = parsed;
      throw err;
    }
    return {
      status: res.status,
      body: parsed,
      headers: out,
      charge: Number(out["x-ms-request-charge"] || 0),
      continuation: out["x-ms-continuation"] || null,
    };
  },
};

// ----- the browser -----

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
  defaultViewport: { width: 1280, height: 800 },
});
const page = await browser.newPage();
page.setDefaultTimeout(30_000);

const problems = [];
const ALLOWED_CONSOLE = /^Failed to load resource: the server responded with a status of (304|4\d\d)\b/;
page.on("console", (msg) => {
  if (msg.type() !== "error") return;
  const text = msg.text();
  if (ALLOWED_CONSOLE.test(text)) {
    // A REST call answered with an error status; a page file is checked below.
    const url = msg.location() && msg.location().url;
    if (!url || !new URL(url, endpoint).pathname.startsWith("/_explorer/")) return;
  }
  problems.push(`console error: ${text}${msg.location() && msg.location().url
    ? ` (${msg.location().url}:${msg.location().lineNumber})` : ""}`);
});
page.on("pageerror", (err) => problems.push(`page error: ${err.message || err}`));
page.on("response", (res) => {
  const url = new URL(res.url());
  if (url.pathname.startsWith("/_explorer/") && res.status() >= 400) {
    problems.push(`${res.status()} for ${url.pathname}`);
  }
});
page.on("requestfailed", (req) => {
  const url = new URL(req.url());
  if (url.pathname.startsWith("/_explorer/")) {
    problems.push(`request failed: ${url.pathname} (${req.failure() && req.failure().errorText})`);
  }
});
await page.evaluateOnNewDocument(() => {
  document.addEventListener("securitypolicyviolation", (e) => {
    console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"} ` +
      `at ${e.sourceFile}:${e.lineNumber}`);
  });
});

function checkProblems(where) {
  if (problems.length > 0) {
    const list = problems.splice(0);
    throw new Error(`${where}: the page reported errors:\n  ${list.join("\n  ")}`);
  }
}

const ctx = {
  endpoint,
  key,
  api,
  log: (...a) => console.log("   ", ...a),
  async shot(name) {
    const file = path.join(shotDir, `${name}.png`);
    await page.screenshot({ path: file });
    console.log(`    screenshot ${file}`);
  },
};

let failed = false;
try {
  for (const step of steps) {
    console.log(`step ${step}`);
    const mod = await import(pathToFileURL(path.join(here, "explorer", `${step}.mjs`)).href);
    await page.goto(`${endpoint}_explorer/`, { waitUntil: "load" });
    await page.waitForSelector('[data-test="db-list"]');
    checkProblems(`${step} (loading the page)`);
    await mod.run(page, { ...ctx });
    // Let late console errors (a poll, a CSP report) arrive.
    await new Promise((r) => setTimeout(r, 300));
    checkProblems(step);
    console.log(`ok - ${step}`);
  }
} catch (err) {
  failed = true;
  console.error(`FAILED: ${err && err.stack ? err.stack : err}`);
  if (problems.length > 0) console.error(`page errors:\n  ${problems.join("\n  ")}`);
  try {
    await page.screenshot({ path: path.join(shotDir, "failure.png") });
    console.error(`screenshot ${path.join(shotDir, "failure.png")}`);
  } catch (e) {
    console.error(`no failure screenshot: ${e.message}`);
  }
} finally {
  await browser.close();
}
if (failed) process.exit(1);
console.log("ALL OK");
