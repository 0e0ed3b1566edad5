// The Change feed tab: the container's latest-version change feed (A-IM:
// Incremental Feed) from the beginning or from now, polled about once a
// second with the etag of the last page as the continuation (304 = nothing
// new), newest change first. Polling stops when the user pauses or leaves.

import * as api from "../api.js";
import { el, errorBox, costLine, pretty } from "../ui.js";
import { keyComponents } from "./items.js";

export const title = "Change feed";

const POLL_MS = 1000;
const PAGE_SIZE = 100;
const MAX_SHOWN = 500;

export async function render(root, ctx) {
  const paths = (ctx.container.partitionKey && ctx.container.partitionKey.paths) || [];
  const docsPath = ["dbs", ctx.db, "colls", ctx.coll, "docs"];

  let etag = null;          // the continuation; null = not started
  let startMode = "beginning";
  let paused = false;
  let stopped = false;
  let timer = null;
  let inFlight = false;
  let generation = 0;       // a restart discards the answers of older requests
  let total = 0;
  let polls = 0;

  const startSelect = el("select", { id: "feed-start", "data-test": "feed-start" },
    el("option", { value: "beginning" }, "From the beginning"),
    el("option", { value: "now" }, "From now"));
  const restart = el("button", { type: "button", "data-test": "feed-restart",
    onclick: () => start(startSelect.value) }, "Start");
  const pause = el("button", { type: "button", "data-test": "feed-pause",
    "aria-pressed": "false", onclick: () => togglePause() }, "Pause");
  const clear = el("button", { type: "button", "data-test": "feed-clear",
    onclick: () => { list.replaceChildren(); total = 0; drawStatus(); } }, "Clear list");
  const dot = el("span", { class: "live-dot", "aria-hidden": "true" });
  const statusText = el("span", { "data-test": "feed-status-text" });
  const status = el("div", { class: "feed-status", "data-test": "feed-status",
    role: "status" }, dot, statusText);
  const cost = el("div", { class: "cost", "data-test": "feed-cost" });
  const errorArea = el("div", { class: "form-status", "data-test": "feed-error" });
  const list = el("ul", { class: "feed-list", "data-test": "feed-list",
    "aria-label": "Changes, newest first" });
  const empty = el("p", { class: "muted", "data-test": "feed-empty" }, "No changes yet.");

  root.append(
    el("div", { class: "toolbar" },
      el("div", { class: "field" }, el("label", { for: "feed-start" }, "Read"), startSelect),
      restart, pause, clear),
    status, cost, errorArea, empty, list);

  function drawStatus(note) {
    dot.classList.toggle("paused", paused);
    const from = startMode === "now" ? "from now" : "from the beginning";
    const state = paused ? "Paused" : "Live";
    const when = new Date().toLocaleTimeString();
    statusText.textContent = `${state} · reading ${from} · ${total} change` +
      `${total === 1 ? "" : "s"} shown · ${polls} poll${polls === 1 ? "" : "s"}` +
      (etag ? ` · continuation ${etag}` : "") + ` · ${note || `checked ${when}`}`;
    empty.hidden = list.childElementCount > 0;
  }

  function start(mode) {
    startMode = mode;
    generation++;
    etag = null;
    total = 0;
    polls = 0;
    list.replaceChildren();
    errorArea.replaceChildren();
    paused = false;
    pause.textContent = "Pause";
    pause.setAttribute("aria-pressed", "false");
    schedule(0);
    drawStatus("starting");
  }

  function togglePause() {
    paused = !paused;
    pause.textContent = paused ? "Resume" : "Pause";
    pause.setAttribute("aria-pressed", String(paused));
    if (paused) {
      clearTimeout(timer);
      timer = null;
    } else {
      errorArea.replaceChildren();
      schedule(0);
    }
    drawStatus();
  }

  function schedule(ms) {
    clearTimeout(timer);
    timer = null;
    if (stopped || paused) return;
    timer = setTimeout(poll, ms);
  }

  async function poll() {
    timer = null;
    if (stopped || paused) return;
    if (inFlight) { schedule(100); return; }
    inFlight = true;
    const gen = generation;
    const headers = {
      "a-im": "Incremental feed",
      "x-ms-max-item-count": String(PAGE_SIZE),
    };
    if (etag) headers["if-none-match"] = etag;
    else if (startMode === "now") headers["if-none-match"] = "*";
    let again = POLL_MS;
    try {
      const res = await api.request("GET", docsPath, { headers });
      if (stopped || gen !== generation) return;
      polls++;
      if (res.headers.etag) etag = res.headers.etag;
      if (res.status === 200 && res.body && Array.isArray(res.body.Documents)) {
        const docs = res.body.Documents;
        show(docs);
        cost.textContent = `last page: ${docs.length} change${docs.length === 1 ? "" : "s"} · ` +
          costLine(res);
        if (docs.length >= PAGE_SIZE) again = 0; // more are waiting
      }
      drawStatus();
    } catch (e) {
      if (stopped || gen !== generation) return;
      errorArea.replaceChildren(errorBox(e));
      // Stop on an error; Resume tries again.
      paused = true;
      pause.textContent = "Resume";
      pause.setAttribute("aria-pressed", "true");
      drawStatus("stopped by an error");
    } finally {
      inFlight = false;
    }
    if (gen === generation) schedule(again);
  }

  /** Prepends a page of changes (oldest first in the page) so the newest is on top. */
  function show(docs) {
    for (const old of list.querySelectorAll("li.fresh")) old.classList.remove("fresh");
    for (const doc of docs) {
      list.prepend(entry(doc));
      total++;
    }
    while (list.childElementCount > MAX_SHOWN) list.lastElementChild.remove();
  }

  function entry(doc) {
    const key = keyComponents(doc, paths);
    const keyText = key.map((c) => JSON.stringify(c)).join(", ");
    const meta = [
      ["id", doc.id],
      ["partition key", paths.length > 1 ? `[${keyText}]` : keyText],
      ["_ts", doc._ts !== undefined ? `${doc._ts} (${new Date(doc._ts * 1000).toISOString()})` : "—"],
    ];
    if (doc._lsn !== undefined) meta.push(["_lsn", String(doc._lsn)]);
    return el("li", { class: "fresh", "data-test": "feed-change", "data-id": doc.id },
      el("div", { class: "feed-meta" },
        meta.map(([k, v]) => el("span", {}, el("span", { class: "k" }, `${k}: `),
          el("span", { class: "v", "data-test": `feed-${k.replace(/\W+/g, "-")}` }, v)))),
      el("details", { open: true },
        el("summary", {}, "Document"),
        el("pre", { class: "json", tabindex: "0" }, pretty(doc))));
  }

  start("beginning");

  return () => {
    stopped = true;
    clearTimeout(timer);
    timer = null;
  };
}
