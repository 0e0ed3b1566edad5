// The Items tab: browse a container's documents per logical partition (or
// all of them), 20 at a time, and read, edit, create and delete one in a
// JSON editor. A save sends If-Match with the _etag the document was loaded
// with, so a concurrent change is a 412 the user sees, not a lost update.

import * as api from "../api.js";
import { el, errorBox, costLine, pretty, confirmDialog } from "../ui.js";

export const title = "Items";

const PAGE_SIZE = 20;
const ALL = "__all__";

/** The property names of a partition-key path ("/a/b" or '/"a b"'). */
export function pathSegments(path) {
  return path.split("/").filter((s) => s.length > 0).map((s) => {
    if (s.length >= 2 && s.startsWith('"') && s.endsWith('"')) {
      try { return JSON.parse(s); } catch { return s.slice(1, -1); }
    }
    return s;
  });
}

/** The SQL accessor of a path: c["a"]["b"]. */
export function accessor(path) {
  return "c" + pathSegments(path).map((s) => `[${JSON.stringify(s)}]`).join("");
}

/** A document's partition-key components ({} for an undefined one, as the SDKs send). */
export function keyComponents(doc, paths) {
  return paths.map((path) => {
    let v = doc;
    for (const s of pathSegments(path)) {
      v = v !== null && typeof v === "object" ? v[s] : undefined;
    }
    return v === undefined ? {} : v;
  });
}

function keyLabel(components, hierarchical = components.length > 1) {
  const text = components.map((c) => JSON.stringify(c)).join(", ");
  return hierarchical ? `[${text}]` : text;
}

export async function render(root, ctx) {
  const paths = (ctx.container.partitionKey && ctx.container.partitionKey.paths) || [];
  const docsPath = ["dbs", ctx.db, "colls", ctx.coll, "docs"];

  // ----- state -----
  let scope = null;           // null = all partitions, else an array of components
  let continuation = null;
  let listed = [];            // documents of the list, in order
  let editing = null;         // {mode: "edit"|"new", id, key, etag}
  let listSeq = 0;

  // ----- the partition chooser -----
  const select = el("select", { id: "pk-select", "data-test": "pk-select" },
    el("option", { value: ALL }, "All partitions"));
  const pkInput = el("input", { id: "pk-input", type: "text", "data-test": "pk-input",
    autocomplete: "off", spellcheck: "false",
    placeholder: paths.length > 1 ? '["tenant", "user"]' : '"p1"' });
  const partitionsNote = el("span", { class: "cost", "data-test": "partitions-cost" });
  const chooserError = el("div", { class: "form-status" });
  const toolbar = el("form", { class: "toolbar", "data-test": "pk-form",
    onsubmit: (ev) => { ev.preventDefault(); applyInput(); } },
    el("div", { class: "field" },
      el("label", { for: "pk-select" }, "Logical partition"), select),
    el("div", { class: "field" },
      el("label", { for: "pk-input" }, "Partition key (JSON)"), pkInput),
    el("button", { type: "submit", "data-test": "pk-load" }, "Load"),
    el("button", { type: "button", "data-test": "list-refresh",
      onclick: () => { loadPartitions(); loadList(); } }, "Refresh"),
    el("button", { type: "button", class: "primary", "data-test": "doc-new",
      onclick: () => newDocument() }, "New document"),
    partitionsNote);

  select.addEventListener("change", () => {
    if (select.value === ALL) { pkInput.value = ""; scope = null; }
    else { pkInput.value = select.value; scope = toComponents(JSON.parse(select.value)); }
    chooserError.replaceChildren();
    loadList();
  });

  function toComponents(value) {
    if (paths.length > 1) return Array.isArray(value) ? value : [value];
    return Array.isArray(value) && value.length === 1 ? value : [value];
  }

  function applyInput() {
    chooserError.replaceChildren();
    const text = pkInput.value.trim();
    if (text === "") { scope = null; select.value = ALL; loadList(); return; }
    let value;
    try {
      value = JSON.parse(text);
    } catch {
      chooserError.replaceChildren(el("div", { class: "error", role: "alert",
        "data-test": "pk-input-error" }, el("strong", {}, "Invalid JSON"), " ",
        `the partition key is a JSON value: a string needs quotes ("${text}")`));
      pkInput.setAttribute("aria-invalid", "true");
      return;
    }
    pkInput.removeAttribute("aria-invalid");
    scope = toComponents(value);
    const asOption = JSON.stringify(paths.length > 1 ? scope : scope[0]);
    select.value = [...select.options].some((o) => o.value === asOption) ? asOption : ALL;
    loadList();
  }

  async function loadPartitions() {
    if (paths.length === 0) return;
    const expr = paths.length > 1 ? `[${paths.map(accessor).join(", ")}]` : accessor(paths[0]);
    try {
      const res = await api.request("POST", docsPath, {
        body: { query: `SELECT DISTINCT VALUE ${expr} FROM c`, parameters: [] },
        headers: {
          "x-ms-documentdb-isquery": "true",
          "content-type": "application/query+json",
          "x-ms-documentdb-query-enablecrosspartition": "true",
          "x-partita-query-whole": "true",
          "x-ms-max-item-count": "200",
        },
      });
      const values = (res.body.Documents || []).slice()
        .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
      const keep = select.value;
      select.replaceChildren(el("option", { value: ALL }, "All partitions"),
        ...values.map((v) => {
          const json = JSON.stringify(v);
          return el("option", { value: json }, json);
        }));
      select.value = [...select.options].some((o) => o.value === keep) ? keep : ALL;
      partitionsNote.textContent = `${values.length}${res.continuation ? "+" : ""} partitions · ` +
        costLine(res);
    } catch (e) {
      partitionsNote.textContent = `partitions not listed (${e.status || "error"}: ${e.message})`;
    }
  }

  // ----- the list of documents -----
  const list = el("ul", { class: "doc-list", "data-test": "doc-list",
    "aria-label": "Documents" });
  const listInfo = el("div", { class: "cost", "data-test": "doc-count" });
  const listCost = el("div", { class: "cost", "data-test": "list-cost" });
  const listError = el("div", { class: "form-status", "data-test": "list-error" });
  const more = el("button", { type: "button", "data-test": "load-more",
    onclick: () => loadPage() }, "Load more");
  more.hidden = true;

  async function loadList() {
    continuation = null;
    listed = [];
    list.replaceChildren();
    await loadPage(true);
  }

  async function loadPage(first = false) {
    const seq = first ? ++listSeq : listSeq;
    listError.replaceChildren();
    more.disabled = true;
    const headers = { "x-ms-max-item-count": String(PAGE_SIZE) };
    if (scope) headers["x-ms-documentdb-partitionkey"] = api.partitionKeyHeader(scope);
    else headers["x-ms-documentdb-query-enablecrosspartition"] = "true";
    if (continuation) headers["x-ms-continuation"] = continuation;
    try {
      const res = await api.request("GET", docsPath, { headers });
      if (seq !== listSeq) return;
      const docs = res.body.Documents || [];
      listed.push(...docs);
      for (const d of docs) list.append(listEntry(d));
      continuation = res.continuation;
      more.hidden = !continuation;
      updateInfo();
      listCost.textContent = `last page: ${docs.length} · ${costLine(res)}`;
      if (listed.length === 0) list.append(el("li", { class: "muted" }, "No documents."));
    } catch (e) {
      if (seq === listSeq) listError.replaceChildren(errorBox(e));
    } finally {
      more.disabled = false;
    }
  }

  function listEntry(doc) {
    const key = keyComponents(doc, paths);
    const current = editing && editing.mode === "edit" && editing.id === doc.id &&
      JSON.stringify(editing.key) === JSON.stringify(key);
    return el("li", {},
      el("button", { type: "button", "data-test": "doc-link", "data-id": doc.id,
        "aria-current": current ? "true" : "false", title: doc.id,
        onclick: () => openDocument(doc.id, key) },
        doc.id, scope ? null : el("span", { class: "pk" }, keyLabel(key, paths.length > 1))));
  }

  function redrawList() {
    list.replaceChildren(...listed.map(listEntry));
    if (listed.length === 0) list.append(el("li", { class: "muted" }, "No documents."));
    updateInfo();
  }

  function updateInfo() {
    const where = scope ? `partition ${keyLabel(scope, paths.length > 1)}` : "all partitions";
    listInfo.textContent = `${listed.length} document${listed.length === 1 ? "" : "s"} in ${where}` +
      (continuation ? " · more available" : "");
  }

  function sameDoc(d, id, key) {
    return d.id === id && JSON.stringify(keyComponents(d, paths)) === JSON.stringify(key);
  }

  // ----- the editor -----
  const editorTitle = el("h3", { class: "panel-title", "data-test": "editor-title" },
    "No document open");
  const textarea = el("textarea", { id: "doc-editor", class: "editor", "data-test": "doc-editor",
    spellcheck: "false", autocomplete: "off", rows: "20", disabled: true });
  const jsonError = el("div", { class: "form-status", "data-test": "doc-json-status" });
  const status = el("div", { class: "cost", "data-test": "doc-status", "aria-live": "polite" });
  const errorArea = el("div", { class: "form-status", "data-test": "doc-error" });
  const save = el("button", { type: "button", class: "primary", "data-test": "doc-save",
    disabled: true, onclick: () => saveDocument() }, "Save");
  const reload = el("button", { type: "button", "data-test": "doc-reload", disabled: true,
    onclick: () => editing && editing.mode === "edit" && openDocument(editing.id, editing.key) },
  "Reload");
  const del = el("button", { type: "button", class: "danger", "data-test": "doc-delete",
    disabled: true, onclick: () => deleteDocument() }, "Delete");
  const discard = el("button", { type: "button", "data-test": "doc-cancel", hidden: true,
    onclick: () => closeEditor() }, "Cancel");

  textarea.addEventListener("input", validate);
  textarea.addEventListener("keydown", (ev) => {
    if ((ev.ctrlKey || ev.metaKey) && ev.key === "s") {
      ev.preventDefault();
      if (!save.disabled) saveDocument();
    }
  });

  /** Parses the editor; shows why it is not a document and disables Save. */
  function validate() {
    if (!editing) return null;
    let value;
    let problem = null;
    try {
      value = JSON.parse(textarea.value);
      if (value === null || typeof value !== "object" || Array.isArray(value)) {
        problem = "a document is a JSON object";
      } else if (typeof value.id !== "string" || value.id.length === 0) {
        problem = "a document needs an \"id\" string";
      }
    } catch (e) {
      problem = e.message;
    }
    if (problem) {
      jsonError.replaceChildren(el("div", { class: "error", role: "alert",
        "data-test": "doc-json-error" }, el("strong", {}, "Invalid JSON"), " ", problem));
      textarea.setAttribute("aria-invalid", "true");
      save.disabled = true;
      return null;
    }
    jsonError.replaceChildren();
    textarea.removeAttribute("aria-invalid");
    save.disabled = false;
    return value;
  }

  function showEditor(mode, doc, key) {
    editing = { mode, id: doc.id, key, etag: doc._etag || null };
    textarea.disabled = false;
    textarea.value = pretty(doc);
    errorArea.replaceChildren();
    editorTitle.replaceChildren(mode === "new" ? "New document"
      : el("span", {}, "Document ", el("code", {}, doc.id), " ",
        el("span", { class: "muted" }, `in ${keyLabel(key, paths.length > 1)}`)));
    save.textContent = mode === "new" ? "Create" : "Save";
    save.setAttribute("data-test", mode === "new" ? "doc-create" : "doc-save");
    reload.disabled = mode !== "edit";
    del.disabled = mode !== "edit";
    discard.hidden = mode !== "new";
    validate();
    for (const b of list.querySelectorAll("button[data-test=doc-link]")) {
      const li = listed.find((d) => d.id === b.dataset.id);
      const cur = mode === "edit" && b.dataset.id === doc.id &&
        (!li || JSON.stringify(keyComponents(li, paths)) === JSON.stringify(key));
      b.setAttribute("aria-current", cur ? "true" : "false");
    }
  }

  function closeEditor() {
    editing = null;
    textarea.value = "";
    textarea.disabled = true;
    save.disabled = true;
    reload.disabled = true;
    del.disabled = true;
    discard.hidden = true;
    save.textContent = "Save";
    save.setAttribute("data-test", "doc-save");
    jsonError.replaceChildren();
    editorTitle.textContent = "No document open";
    for (const b of list.querySelectorAll("button[data-test=doc-link]")) {
      b.setAttribute("aria-current", "false");
    }
  }

  async function openDocument(id, key) {
    errorArea.replaceChildren();
    status.textContent = "Loading…";
    try {
      const res = await api.request("GET", [...docsPath, id], {
        headers: { "x-ms-documentdb-partitionkey": api.partitionKeyHeader(key) },
      });
      showEditor("edit", res.body, key);
      status.textContent = `Loaded · ${costLine(res)}`;
      textarea.focus();
    } catch (e) {
      status.textContent = "";
      errorArea.replaceChildren(errorBox(e));
    }
  }

  function newDocument() {
    const doc = { id: `new-${Date.now().toString(36)}` };
    paths.forEach((path, i) => {
      const segs = pathSegments(path);
      let o = doc;
      segs.slice(0, -1).forEach((s) => { o[s] = o[s] && typeof o[s] === "object" ? o[s] : {}; o = o[s]; });
      const v = scope && scope[i] !== undefined && !(typeof scope[i] === "object" && scope[i] !== null)
        ? scope[i] : "";
      if (segs.length > 0) o[segs[segs.length - 1]] = v;
    });
    showEditor("new", doc, keyComponents(doc, paths));
    status.textContent = "";
    textarea.focus();
  }

  async function saveDocument() {
    const value = validate();
    if (!value || !editing) return;
    errorArea.replaceChildren();
    status.textContent = editing.mode === "new" ? "Creating…" : "Saving…";
    save.disabled = true;
    try {
      if (editing.mode === "new") {
        const key = keyComponents(value, paths);
        const res = await api.request("POST", docsPath, {
          body: value,
          headers: { "x-ms-documentdb-partitionkey": api.partitionKeyHeader(key) },
        });
        if (!scope || JSON.stringify(scope) === JSON.stringify(key)) {
          listed.unshift(res.body);
          redrawList();
        }
        showEditor("edit", res.body, key);
        status.textContent = `Created · ${costLine(res)}`;
        loadPartitions();
      } else {
        const { id, key, etag } = editing;
        const headers = { "x-ms-documentdb-partitionkey": api.partitionKeyHeader(key) };
        if (etag) headers["if-match"] = etag;
        const res = await api.request("PUT", [...docsPath, id], { body: value, headers });
        const i = listed.findIndex((d) => sameDoc(d, id, key));
        if (i >= 0) { listed[i] = res.body; redrawList(); }
        showEditor("edit", res.body, keyComponents(res.body, paths));
        status.textContent = `Saved · ${costLine(res)}`;
      }
    } catch (e) {
      status.textContent = "";
      if (e.status === 412) errorArea.replaceChildren(conflictBox(e));
      else errorArea.replaceChildren(errorBox(e));
    } finally {
      validate();
    }
  }

  function conflictBox(e) {
    const sub = e.substatus ? ` / ${e.substatus}` : "";
    return el("div", { class: "error", role: "alert", "data-status": "412",
      "data-test": "doc-conflict" },
      el("strong", {}, `412 Precondition Failed${sub}`), " ",
      "Conflict: this document was changed by someone else since you loaded it, so it was not " +
      "saved (its _etag no longer matches). Reload to see the current version (your edits in " +
      "the editor will be replaced), or copy them first.",
      el("div", { class: "muted" }, `Server: ${e.message}`),
      el("div", { class: "buttons" },
        el("button", { type: "button", "data-test": "conflict-reload",
          onclick: () => openDocument(editing.id, editing.key) }, "Reload")));
  }

  async function deleteDocument() {
    if (!editing || editing.mode !== "edit") return;
    const { id, key } = editing;
    if (!await confirmDialog(`Delete document "${id}" (partition ${keyLabel(key, paths.length > 1)})?`)) return;
    errorArea.replaceChildren();
    status.textContent = "Deleting…";
    try {
      const res = await api.request("DELETE", [...docsPath, id], {
        headers: { "x-ms-documentdb-partitionkey": api.partitionKeyHeader(key) },
      });
      listed = listed.filter((d) => !sameDoc(d, id, key));
      closeEditor();
      redrawList();
      status.textContent = `Deleted ${id} · ${costLine(res)}`;
    } catch (e) {
      status.textContent = "";
      errorArea.replaceChildren(errorBox(e));
    }
  }

  root.append(
    toolbar, chooserError,
    el("div", { class: "items-layout" },
      el("div", { class: "doc-list-panel" },
        el("h3", { class: "panel-title" }, "Documents"),
        listInfo, list, listError,
        el("div", { class: "buttons" }, more), listCost),
      el("div", { class: "editor-panel", "data-test": "editor-panel" },
        editorTitle,
        el("label", { for: "doc-editor", class: "sr-label" }, "Document JSON"),
        textarea, jsonError,
        el("div", { class: "buttons" }, save, reload, del, discard),
        status, errorArea)));

  await Promise.all([loadPartitions(), loadList()]);
}
