// The Data Explorer's shell: the key prompt, the sidebar tree of databases
// and containers, the hash router and the container tabs. Each tab is a
// view module (views/<tab>.js) exporting `title` and `render(root, ctx)`;
// render may return a cleanup function, called when the user navigates away.
//
// Routes: #/ (databases), #/db/{db}, #/db/{db}/coll/{coll}/{tab}.

import * as api from "./api.js";
import { el, errorBox, confirmDialog, costLine } from "./ui.js";

const TABS = [
  ["items", "Items"],
  ["query", "Query"],
  ["scripts", "Scripts"],
  ["feed", "Change feed"],
  ["settings", "Settings"],
];

const sidebar = document.getElementById("sidebar");
const main = document.getElementById("main");

/** Which databases are expanded in the tree, and their open forms. */
const expanded = new Set();
let newDatabaseOpen = false;
const newContainerOpen = new Set();

/** The current view's cleanup, and a counter that cancels stale renders. */
let cleanup = null;
let renderSeq = 0;
let keyFormShown = false;

// ----- navigation --------------------------------------------------------------------------------

function hashOf(...parts) {
  return "#/" + parts.map(encodeURIComponent).join("/");
}

export function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function parseRoute() {
  const raw = location.hash.replace(/^#\/?/, "");
  const parts = raw.split("/").filter((p) => p.length > 0).map((p) => {
    try { return decodeURIComponent(p); } catch { return p; }
  });
  if (parts[0] === "db" && parts.length >= 2) {
    if (parts[2] === "coll" && parts.length >= 4) {
      const tab = TABS.some(([t]) => t === parts[4]) ? parts[4] : "items";
      return { kind: "coll", db: parts[1], coll: parts[3], tab };
    }
    return { kind: "db", db: parts[1] };
  }
  return { kind: "home" };
}

function runCleanup() {
  if (typeof cleanup === "function") {
    try { cleanup(); } catch (e) { console.warn("view cleanup failed", e); }
  }
  cleanup = null;
}

async function route() {
  if (!api.accountKey()) { showKeyForm(); return; }
  runCleanup();
  const seq = ++renderSeq;
  const r = parseRoute();
  if (r.db) {
    expanded.add(r.db);
    const known = containersOf.get(r.db);
    if (!databases.includes(r.db) || !Array.isArray(known) ||
        (r.coll && !known.includes(r.coll))) {
      refreshTree(); // a database or container created elsewhere
    }
  }
  markCurrent(r);
  main.replaceChildren();
  try {
    if (r.kind === "home") await renderHome(seq);
    else if (r.kind === "db") await renderDatabase(seq, r.db);
    else await renderContainer(seq, r);
  } catch (e) {
    if (seq === renderSeq) main.replaceChildren(errorBox(e));
  }
}

function stale(seq) { return seq !== renderSeq; }

// ----- the key prompt ----------------------------------------------------------------------------

function showKeyForm(err) {
  runCleanup();
  renderSeq++;
  keyFormShown = true;
  sidebar.replaceChildren();
  const input = el("input", { id: "key-input", type: "password", autocomplete: "off",
    required: true, "data-test": "key-input", spellcheck: "false" });
  const form = el("form", { class: "key-form", "data-test": "key-form",
    onsubmit: async (ev) => {
      ev.preventDefault();
      if (!input.value.trim()) return;
      api.rememberKey(input.value);
      try {
        await api.request("GET", ["dbs"]);
      } catch (e) {
        showKeyForm(e);
        return;
      }
      keyFormShown = false;
      await start();
    } },
    el("h2", {}, "Connect"),
    el("p", {}, "Enter the account key ",
      el("code", {}, "partita serve"), " printed. It is kept for this browser tab only."),
    el("label", { for: "key-input" }, "Account key"),
    input,
    err ? errorBox(err) : null,
    el("div", { class: "buttons" },
      el("button", { type: "submit", class: "primary", "data-test": "key-submit" }, "Connect")));
  main.replaceChildren(form);
  input.focus();
}

/** A 401 anywhere (an error box with data-status=401) returns to the key prompt. */
function watchForUnauthorized() {
  const observer = new MutationObserver(() => {
    if (keyFormShown) return;
    if (document.querySelector('.error[data-status="401"]') && !api.accountKey()) {
      showKeyForm({ status: 401, substatus: 0,
        message: "the server refused the key; enter it again" });
    }
  });
  observer.observe(document.body, { childList: true, subtree: true });
}

// ----- the sidebar -------------------------------------------------------------------------------

let databases = [];
const containersOf = new Map();

async function loadTree() {
  const res = await api.request("GET", ["dbs"]);
  databases = (res.body.Databases || []).map((d) => d.id).sort();
  await Promise.all(databases.filter((d) => expanded.has(d)).map(loadContainers));
}

async function loadContainers(db) {
  try {
    const res = await api.request("GET", ["dbs", db, "colls"]);
    containersOf.set(db, (res.body.DocumentCollections || []).map((c) => c.id).sort());
  } catch (e) {
    containersOf.set(db, e);
  }
}

/** Reloads the databases and containers and redraws the tree. */
export async function refreshTree() {
  try {
    await loadTree();
    drawTree();
  } catch (e) {
    sidebar.replaceChildren(el("h2", { class: "side-title" }, "Databases"), errorBox(e));
  }
}

function drawTree() {
  const focusedTest = document.activeElement && sidebar.contains(document.activeElement)
    ? document.activeElement.getAttribute("data-test") : null;
  const list = el("ul", { class: "tree", role: "list", "data-test": "db-list" },
    databases.map(databaseNode));
  if (databases.length === 0) list.append(el("li", { class: "muted" }, "No databases yet."));
  sidebar.replaceChildren(
    el("div", { class: "side-head" },
      el("h2", { class: "side-title" }, "Databases"),
      el("button", { type: "button", class: "small", "data-test": "new-db",
        "aria-expanded": String(newDatabaseOpen),
        onclick: () => { newDatabaseOpen = !newDatabaseOpen; drawTree(); } }, "New database"),
      el("button", { type: "button", class: "small icon", title: "Refresh", "aria-label": "Refresh",
        "data-test": "refresh-tree", onclick: () => refreshTree() }, "↻")),
    ...(newDatabaseOpen ? [newDatabaseForm()] : []),
    list);
  markCurrent(parseRoute());
  if (focusedTest === "new-db" || focusedTest === "refresh-tree") {
    const again = sidebar.querySelector(`[data-test="${focusedTest}"]`);
    if (again) again.focus();
  }
  const autofocus = sidebar.querySelector("[data-autofocus]");
  if (autofocus) { autofocus.removeAttribute("data-autofocus"); autofocus.focus(); }
}

function newDatabaseForm() {
  const id = el("input", { id: "new-db-id", required: true, "data-test": "new-db-id",
    "data-autofocus": true, autocomplete: "off" });
  const status = el("div", { class: "form-status" });
  return el("form", { class: "side-form", "data-test": "new-db-form",
    onsubmit: async (ev) => {
      ev.preventDefault();
      const name = id.value.trim();
      if (!name) return;
      try {
        await api.request("POST", ["dbs"], { body: { id: name } });
        newDatabaseOpen = false;
        expanded.add(name);
        await refreshTree();
        navigate(hashOf("db", name));
      } catch (e) {
        status.replaceChildren(errorBox(e));
      }
    } },
    el("label", { for: "new-db-id" }, "Database id"), id, status,
    el("div", { class: "buttons" },
      el("button", { type: "submit", class: "primary", "data-test": "new-db-create" }, "Create"),
      el("button", { type: "button", onclick: () => { newDatabaseOpen = false; drawTree(); } },
        "Cancel")));
}

function databaseNode(db) {
  const open = expanded.has(db);
  const colls = containersOf.get(db);
  let children = null;
  if (open) {
    let items;
    if (colls instanceof Error) items = [el("li", {}, errorBox(colls))];
    else if (!colls) items = [el("li", { class: "muted" }, "Loading…")];
    else if (colls.length === 0) items = [el("li", { class: "muted" }, "No containers.")];
    else items = colls.map((c) => containerNode(db, c));
    children = el("div", { class: "children" },
      newContainerOpen.has(db) ? newContainerForm(db) : null,
      el("ul", { class: "tree", role: "list", "data-test": "coll-list", "data-db": db }, items));
  }
  return el("li", { class: "db-node", "data-test": "db-node", "data-db": db },
    el("div", { class: "node-row" },
      el("button", { type: "button", class: "twisty", "aria-expanded": String(open),
        "aria-label": `${open ? "Collapse" : "Expand"} ${db}`, "data-test": "db-toggle",
        onclick: async () => {
          if (open) expanded.delete(db);
          else { expanded.add(db); drawTree(); await loadContainers(db); }
          drawTree();
        } }, open ? "▾" : "▸"),
      el("a", { href: hashOf("db", db), class: "node-link", "data-test": "db-link",
        "data-db": db }, db),
      el("button", { type: "button", class: "small", "data-test": "new-coll", "data-db": db,
        title: `New container in ${db}`, "aria-label": `New container in ${db}`,
        onclick: () => {
          expanded.add(db);
          if (newContainerOpen.has(db)) newContainerOpen.delete(db);
          else newContainerOpen.add(db);
          drawTree();
          if (!containersOf.has(db)) loadContainers(db).then(drawTree);
        } }, "+"),
      el("button", { type: "button", class: "small danger-text", "data-test": "delete-db",
        "data-db": db, title: `Delete database ${db}`, "aria-label": `Delete database ${db}`,
        onclick: () => deleteDatabase(db) }, "✕")),
    children);
}

function containerNode(db, c) {
  return el("li", { class: "coll-node", "data-test": "coll-node", "data-coll": c },
    el("div", { class: "node-row" },
      el("a", { href: hashOf("db", db, "coll", c, "items"), class: "node-link",
        "data-test": "coll-link", "data-db": db, "data-coll": c }, c),
      el("button", { type: "button", class: "small danger-text", "data-test": "delete-coll",
        "data-coll": c, title: `Delete container ${c}`, "aria-label": `Delete container ${c}`,
        onclick: () => deleteContainer(db, c) }, "✕")));
}

function newContainerForm(db) {
  const key = (s) => `${db}-${s}`.replace(/[^A-Za-z0-9_-]/g, "_");
  const id = el("input", { id: key("new-coll-id"), required: true, "data-test": "new-coll-id",
    "data-autofocus": true, autocomplete: "off" });
  const paths = [1, 2, 3].map((n) => el("input", { id: key(`new-coll-pk${n}`),
    "data-test": `new-coll-pk${n === 1 ? "" : n}`, autocomplete: "off",
    placeholder: n === 1 ? "/pk" : "(optional)", required: n === 1 }));
  paths[0].value = "/pk";
  const hierarchical = el("input", { type: "checkbox", id: key("new-coll-hier"),
    "data-test": "new-coll-hierarchical" });
  const extra = el("div", { class: "extra-paths" },
    el("label", { for: paths[1].id }, "Second level path"), paths[1],
    el("label", { for: paths[2].id }, "Third level path"), paths[2]);
  extra.hidden = true;
  hierarchical.addEventListener("change", () => { extra.hidden = !hierarchical.checked; });
  const status = el("div", { class: "form-status" });
  return el("form", { class: "side-form", "data-test": "new-coll-form", "data-db": db,
    onsubmit: async (ev) => {
      ev.preventDefault();
      const name = id.value.trim();
      const chosen = (hierarchical.checked ? paths : paths.slice(0, 1))
        .map((p) => p.value.trim()).filter((p) => p.length > 0);
      if (!name || chosen.length === 0) return;
      const bad = chosen.find((p) => !p.startsWith("/"));
      if (bad) {
        status.replaceChildren(errorBox({ status: 0, message:
          `a partition-key path starts with "/": ${bad}` }));
        return;
      }
      const partitionKey = chosen.length > 1
        ? { paths: chosen, kind: "MultiHash", version: 2 }
        : { paths: chosen, kind: "Hash", version: 2 };
      try {
        await api.request("POST", ["dbs", db, "colls"], { body: { id: name, partitionKey } });
        newContainerOpen.delete(db);
        await loadContainers(db);
        drawTree();
        navigate(hashOf("db", db, "coll", name, "items"));
      } catch (e) {
        status.replaceChildren(errorBox(e));
      }
    } },
    el("label", { for: id.id }, "Container id"), id,
    el("label", { for: paths[0].id }, "Partition key path"), paths[0],
    el("div", { class: "check" }, hierarchical,
      el("label", { for: hierarchical.id }, "Hierarchical (up to 3 levels)")),
    extra, status,
    el("div", { class: "buttons" },
      el("button", { type: "submit", class: "primary", "data-test": "new-coll-create" }, "Create"),
      el("button", { type: "button",
        onclick: () => { newContainerOpen.delete(db); drawTree(); } }, "Cancel")));
}

async function deleteDatabase(db) {
  if (!await confirmDialog(`Delete database "${db}" and everything in it?`)) return;
  try {
    await api.request("DELETE", ["dbs", db]);
    expanded.delete(db);
    containersOf.delete(db);
    await refreshTree();
    const r = parseRoute();
    if (r.db === db) navigate("#/");
    else if (r.kind === "home") route();
  } catch (e) {
    showSideError(e);
  }
}

async function deleteContainer(db, c) {
  if (!await confirmDialog(`Delete container "${c}" and all its documents?`)) return;
  try {
    await api.request("DELETE", ["dbs", db, "colls", c]);
    await loadContainers(db);
    drawTree();
    const r = parseRoute();
    if (r.db === db && r.coll === c) navigate(hashOf("db", db));
    else if (r.kind === "db" && r.db === db) route();
  } catch (e) {
    showSideError(e);
  }
}

function showSideError(e) {
  const box = errorBox(e);
  box.setAttribute("data-test", "sidebar-error");
  sidebar.prepend(box);
}

function markCurrent(r) {
  for (const a of sidebar.querySelectorAll("a.node-link")) {
    const isDb = a.dataset.test === "db-link";
    const current = isDb ? (r.kind === "db" && r.db === a.dataset.db)
      : (r.kind === "coll" && r.db === a.dataset.db && r.coll === a.dataset.coll);
    if (current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

// ----- pages -------------------------------------------------------------------------------------

async function renderHome(seq) {
  const res = await api.request("GET", ["dbs"]);
  if (stale(seq)) return;
  const dbs = (res.body.Databases || []).sort((a, b) => a.id.localeCompare(b.id));
  main.replaceChildren(
    el("h2", {}, "Databases"),
    el("p", { class: "cost", "data-test": "cost" }, costLine(res)),
    dbs.length === 0
      ? el("p", { class: "muted" }, "No databases yet: use “New database” in the sidebar.")
      : el("ul", { class: "card-list", "data-test": "home-dbs" }, dbs.map((d) =>
        el("li", {}, el("a", { href: hashOf("db", d.id) }, d.id),
          el("span", { class: "muted" }, ` · ${d._rid || ""}`)))));
  document.title = "Partita Data Explorer";
}

async function renderDatabase(seq, db) {
  const res = await api.request("GET", ["dbs", db, "colls"]);
  if (stale(seq)) return;
  const colls = (res.body.DocumentCollections || []).sort((a, b) => a.id.localeCompare(b.id));
  const rows = colls.map((c) => el("tr", {},
    el("td", {}, el("a", { href: hashOf("db", db, "coll", c.id, "items") }, c.id)),
    el("td", {}, el("code", {}, ((c.partitionKey && c.partitionKey.paths) || []).join(", "))),
    el("td", {}, c.partitionKey && c.partitionKey.kind),
    el("td", {}, c.defaultTtl === undefined ? "off" : String(c.defaultTtl))));
  main.replaceChildren(
    el("div", { class: "page-head" },
      el("h2", {}, "Database ", el("span", { class: "name" }, db)),
      el("button", { type: "button", "data-test": "page-new-coll", onclick: () => {
        expanded.add(db); newContainerOpen.add(db); drawTree();
      } }, "New container"),
      el("button", { type: "button", class: "danger", "data-test": "page-delete-db",
        onclick: () => deleteDatabase(db) }, "Delete database")),
    el("p", { class: "cost", "data-test": "cost" }, costLine(res)),
    colls.length === 0 ? el("p", { class: "muted" }, "No containers yet.")
      : el("table", { class: "results", "data-test": "coll-table" },
        el("thead", {}, el("tr", {}, el("th", {}, "Container"), el("th", {}, "Partition key"),
          el("th", {}, "Kind"), el("th", {}, "Default TTL"))),
        el("tbody", {}, rows)));
  document.title = `${db} · Partita Data Explorer`;
}

async function renderContainer(seq, r) {
  const { db, coll, tab } = r;
  const tablist = el("div", { class: "tabs", role: "tablist", "aria-label": "Container views",
    "data-test": "tabs" });
  const panel = el("div", { class: "tabpanel", role: "tabpanel", id: "tabpanel",
    "aria-labelledby": `tab-${tab}`, tabindex: "-1", "data-test": "tabpanel" });
  for (const [t, label] of TABS) {
    const selected = t === tab;
    tablist.append(el("button", { type: "button", role: "tab", id: `tab-${t}`,
      "aria-selected": String(selected), "aria-controls": "tabpanel",
      tabindex: selected ? "0" : "-1", "data-test": `tab-${t}`, "data-tab": t,
      onclick: () => navigate(hashOf("db", db, "coll", coll, t)) }, label));
  }
  tablist.addEventListener("keydown", (ev) => {
    const tabs = [...tablist.querySelectorAll('[role="tab"]')];
    const i = tabs.indexOf(document.activeElement);
    if (i < 0) return;
    let j = null;
    if (ev.key === "ArrowRight") j = (i + 1) % tabs.length;
    else if (ev.key === "ArrowLeft") j = (i - 1 + tabs.length) % tabs.length;
    else if (ev.key === "Home") j = 0;
    else if (ev.key === "End") j = tabs.length - 1;
    if (j === null) return;
    ev.preventDefault();
    focusTabAfterRoute = tabs[j].dataset.tab;
    navigate(hashOf("db", db, "coll", coll, tabs[j].dataset.tab));
  });
  main.replaceChildren(
    el("div", { class: "page-head" },
      el("h2", {}, el("a", { href: hashOf("db", db), class: "crumb" }, db), " / ",
        el("span", { class: "name", "data-test": "coll-title" }, coll))),
    tablist, panel);
  if (focusTabAfterRoute) {
    const t = tablist.querySelector(`[data-tab="${focusTabAfterRoute}"]`);
    focusTabAfterRoute = null;
    if (t) t.focus();
  }
  document.title = `${coll} · ${db} · Partita Data Explorer`;

  let container;
  try {
    container = (await api.request("GET", ["dbs", db, "colls", coll])).body;
  } catch (e) {
    if (!stale(seq)) panel.replaceChildren(errorBox(e));
    return;
  }
  if (stale(seq)) return;
  let view;
  try {
    view = await import(`./views/${tab}.js`);
  } catch (e) {
    if (!stale(seq)) {
      panel.replaceChildren(errorBox({ status: 0, message: `cannot load the ${tab} view: ${e.message}` }));
    }
    return;
  }
  if (stale(seq)) return;
  const root = el("section", { class: `view view-${tab}`, "data-test": `view-${tab}`,
    "aria-label": view.title || tab });
  panel.replaceChildren(root);
  const ctx = {
    db, coll, container,
    navigate,
    refresh: () => { refreshTree(); route(); },
  };
  let result;
  try {
    result = await view.render(root, ctx);
  } catch (e) {
    root.append(errorBox(e));
  }
  if (typeof result === "function") {
    if (stale(seq)) { try { result(); } catch { /* ignore */ } }
    else cleanup = result;
  }
}

let focusTabAfterRoute = null;

// ----- start -------------------------------------------------------------------------------------

async function start() {
  document.getElementById("endpoint").textContent = `${location.origin}/`;
  await refreshTree();
  await route();
}

window.addEventListener("hashchange", () => { if (!keyFormShown) route(); });
for (const skip of document.querySelectorAll(".skip-link")) {
  skip.addEventListener("click", (ev) => { ev.preventDefault(); main.focus(); });
}
watchForUnauthorized();
document.getElementById("endpoint").textContent = `${location.origin}/`;
if (api.accountKey()) start();
else showKeyForm();
