// The Scripts tab: the container's stored procedures, triggers and
// user-defined functions. Create, edit (with the highlighting code editor),
// save and delete them; upload a WebAssembly module; execute a procedure
// (result, console log, cost and write set); fuzz a procedure for atomicity.

import { request, partitionKeyHeader, decodeHeader } from "../api.js";
import { el, errorBox, costLine, pretty, confirmDialog } from "../ui.js";
import { createCodeEditor } from "../highlight.js";
import { resultsTable } from "./query.js";

export const title = "Scripts";

const KINDS = [
  { seg: "sprocs", label: "Stored procedures", one: "stored procedure", list: "StoredProcedures",
    template: "function sample(name) {\n  var response = getContext().getResponse();\n  console.log(\"called with \" + name);\n  response.setBody({ hello: name });\n}\n" },
  { seg: "triggers", label: "Triggers", one: "trigger", list: "Triggers",
    template: "function trigger() {\n  var request = getContext().getRequest();\n  var doc = request.getBody();\n  if (!doc.createdAt) doc.createdAt = new Date().toISOString();\n  request.setBody(doc);\n}\n" },
  { seg: "udfs", label: "User-defined functions", one: "UDF", list: "UserDefinedFunctions",
    template: "function udf(x) {\n  return x;\n}\n" },
];
const kindOf = (seg) => KINDS.find((k) => k.seg === seg);

const TRIGGER_TYPES = ["Pre", "Post"];
const TRIGGER_OPS = ["All", "Create", "Replace", "Delete", "Upsert"];

function bytesToBase64(bytes) {
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(bin);
}

/**
 * The body fields a WebAssembly module is uploaded with: the module's bytes
 * base64-encoded (a `.wat` file's text likewise) and `language: "wasm"`.
 */
export async function wasmUpload(file) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  return { language: "wasm", body: bytesToBase64(bytes), size: bytes.length };
}

function localError(message) {
  return Object.assign(new Error(message), { status: 0 });
}

function parseJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw localError(`${what} is not JSON: ${e.message}`);
  }
}

/** "p1, p2" or '["p1", 2]' -> ["p1", "p2"] / ["p1", 2]. */
export function parseKeys(text) {
  const t = text.trim();
  if (!t) throw localError("enter at least one partition key");
  if (t.startsWith("[")) {
    const v = parseJson(t, "the partition keys");
    if (!Array.isArray(v) || v.length === 0) throw localError("the partition keys must be a non-empty array");
    return v;
  }
  return t.split(",").map((s) => s.trim()).filter(Boolean).map((s) => {
    try { return JSON.parse(s); } catch { return s; }
  });
}

function writeSetBox(header) {
  let set;
  try {
    set = JSON.parse(decodeHeader(header));
  } catch (e) {
    return el("p", { class: "error" }, `the write set header is not JSON: ${e.message}`);
  }
  const writes = (set && set.writes) || [];
  return el("div", { class: "write-set", "data-test": "exec-writes" },
    el("h4", {}, `Write set (${writes.length})`),
    writes.length === 0 ? el("p", { class: "empty" }, "No writes.") :
      el("div", { class: "table-wrap" },
        el("table", { class: "results", "data-test": "exec-writes-table" },
          el("thead", {}, el("tr", {},
            el("th", { scope: "col" }, "operation"), el("th", { scope: "col" }, "id"),
            el("th", { scope: "col" }, "document"))),
          el("tbody", {}, writes.map((w) => el("tr", { "data-operation": w.operation },
            el("td", {}, w.operation), el("td", {}, w.id),
            el("td", { class: "nested" }, w.document == null ? "—" : JSON.stringify(w.document))))))),
    set && set.truncated ? el("p", { class: "hint" }, "Truncated: some documents were left out to keep the header small.") : null);
}

function logBox(header) {
  const text = decodeHeader(header);
  return el("div", { class: "script-log" },
    el("h4", {}, "Console log"),
    el("pre", { class: "json", "data-test": "exec-log" }, text || "(empty)"));
}

function field(label, control, hint) {
  const id = control.id;
  return el("div", { class: "field" },
    el("label", { for: id }, label), control, hint ? el("span", { class: "hint" }, hint) : null);
}

let uid = 0;
const nextId = (p) => `${p}-${++uid}`;

export async function render(root, ctx) {
  const base = ["dbs", ctx.db, "colls", ctx.coll];
  const listsBox = el("div", { class: "script-lists", "data-test": "script-lists" });
  const pane = el("div", { class: "script-pane", "data-test": "script-pane" });
  const listError = el("div", {});
  root.append(el("h2", {}, "Scripts"), listError,
    el("div", { class: "scripts-layout" }, listsBox, pane));

  let selected = null; // {kind, id}

  async function loadLists() {
    listError.replaceChildren();
    const results = await Promise.all(KINDS.map((k) =>
      request("GET", [...base, k.seg]).then((r) => ({ k, r }), (err) => ({ k, err }))));
    listsBox.replaceChildren(...results.map(({ k, r, err }) => {
      const items = r ? ((r.body && r.body[k.list]) || []) : [];
      items.sort((a, b) => a.id.localeCompare(b.id));
      return el("section", { class: "script-kind", "data-test": `scripts-${k.seg}` },
        el("div", { class: "script-kind-head" },
          el("h3", {}, `${k.label} (${items.length})`),
          el("button", {
            type: "button", "data-test": `scripts-new-${k.seg}`,
            onclick: () => openEditor(k.seg, null),
          }, "New")),
        err ? errorBox(err) : null,
        items.length === 0 ? el("p", { class: "empty" }, "None.") :
          el("ul", { class: "script-list" }, items.map((s) => el("li", {},
            el("button", {
              type: "button", class: "link", "data-test": "script-item", "data-kind": k.seg,
              "data-id": s.id,
              "aria-current": selected && selected.kind === k.seg && selected.id === s.id ? "true" : null,
              onclick: () => openEditor(k.seg, s.id),
            }, s.id,
            s.triggerType ? el("span", { class: "hint" }, ` ${s.triggerType} · ${s.triggerOperation}`) : null,
            String(s.language || "").toLowerCase() === "wasm" ? el("span", { class: "hint" }, " wasm") : null)))));
    }));
  }

  let openSeq = 0;

  async function openEditor(seg, id) {
    const seq = ++openSeq;
    selected = { kind: seg, id };
    for (const b of listsBox.querySelectorAll("[data-test=script-item]")) {
      if (b.dataset.kind === seg && b.dataset.id === id) b.setAttribute("aria-current", "true");
      else b.removeAttribute("aria-current");
    }
    const k = kindOf(seg);
    let script = null;
    pane.replaceChildren(el("p", {}, "Loading…"));
    if (id !== null) {
      try {
        script = (await request("GET", [...base, seg, id])).body;
      } catch (err) {
        if (seq === openSeq) pane.replaceChildren(errorBox(err));
        return;
      }
    }
    if (seq === openSeq) renderEditor(k, script); // else the user opened another
  }

  function renderEditor(k, script) {
    const isNew = !script;
    const idInput = el("input", {
      id: nextId("script-id"), type: "text", class: "mono", "data-test": "script-id",
      required: true, readonly: !isNew, value: script ? script.id : "",
    });
    // A stored WebAssembly module comes back as base64: it is not edited as
    // text, only replaced by another module file.
    const storedWasm = Boolean(script && String(script.language || "").toLowerCase() === "wasm");
    const editor = createCodeEditor({
      value: script && !storedWasm ? script.body : (storedWasm ? "" : k.template),
      label: `${k.one} code`, test: "script-body", rows: 18,
    });
    if (storedWasm) {
      editor.element.hidden = true;
    }
    const wasmInfo = storedWasm ? el("p", { class: "notice", "data-test": "script-wasm-stored" },
      `A WebAssembly module (${Math.floor(String(script.body || "").replace(/=+$/, "").length * 3 / 4)} bytes). ` +
      "Choose another module file below to replace it.") : null;
    let typeSel = null;
    let opSel = null;
    if (k.seg === "triggers") {
      typeSel = el("select", { id: nextId("trigger-type"), "data-test": "script-trigger-type" },
        TRIGGER_TYPES.map((t) => el("option", { value: t }, t)));
      opSel = el("select", { id: nextId("trigger-op"), "data-test": "script-trigger-op" },
        TRIGGER_OPS.map((t) => el("option", { value: t }, t)));
      if (script) {
        const norm = (v, list) => list.find((x) => x.toLowerCase() === String(v || "").toLowerCase()) || list[0];
        typeSel.value = norm(script.triggerType, TRIGGER_TYPES);
        opSel.value = norm(script.triggerOperation, TRIGGER_OPS);
      }
    }
    let wasm = null; // {language, body, size} once a module file is chosen
    const wasmInput = el("input", {
      id: nextId("script-wasm"), type: "file", accept: ".wasm,.wat,application/wasm",
      "data-test": "script-wasm-file",
    });
    const wasmNote = el("span", { class: "hint", "data-test": "script-wasm-note", "aria-live": "polite" });
    wasmInput.addEventListener("change", async () => {
      const file = wasmInput.files && wasmInput.files[0];
      if (!file) { wasm = null; wasmNote.textContent = ""; editor.textarea.disabled = storedWasm; return; }
      try {
        wasm = await wasmUpload(file);
        wasmNote.textContent = `${file.name} (${wasm.size} bytes) is uploaded on Save` + (storedWasm ? "." : " instead of the code above.");
        editor.textarea.disabled = true;
      } catch (e) {
        wasm = null;
        wasmNote.textContent = `cannot read ${file.name}: ${e.message}`;
      }
    });
    const status = el("div", { class: "script-status", "data-test": "script-status", "aria-live": "polite" });
    const saveBtn = el("button", { type: "submit", class: "primary", "data-test": "script-save" },
      isNew ? "Create" : "Save");
    const deleteBtn = isNew ? null : el("button", {
      type: "button", class: "danger", "data-test": "script-delete",
      onclick: async () => {
        if (!(await confirmDialog(`Delete ${k.one} ${script.id}?`))) { deleteBtn.focus(); return; }
        try {
          await request("DELETE", [...base, k.seg, script.id]);
          selected = null;
          pane.replaceChildren(el("p", { class: "ok", "data-test": "script-status" }, `Deleted ${script.id}.`));
          await loadLists();
        } catch (err) {
          status.replaceChildren(errorBox(err));
        }
      },
    }, "Delete");

    const form = el("form", {
      class: "script-form", "data-test": "script-form",
      onsubmit: async (e) => {
        e.preventDefault();
        status.replaceChildren();
        const id = idInput.value.trim();
        if (!id) { status.replaceChildren(errorBox(localError("the script needs an id"))); return; }
        const body = { id, body: editor.getValue() };
        if (wasm) { body.body = wasm.body; body.language = wasm.language; }
        else if (storedWasm) { body.body = script.body; body.language = "wasm"; }
        if (typeSel) { body.triggerType = typeSel.value; body.triggerOperation = opSel.value; }
        saveBtn.disabled = true;
        try {
          const res = isNew
            ? await request("POST", [...base, k.seg], { body })
            : await request("PUT", [...base, k.seg, id], { body });
          selected = { kind: k.seg, id };
          await loadLists();
          if (isNew) {
            renderEditor(k, res.body);
            pane.querySelector("[data-test=script-status]").replaceChildren(
              el("span", { class: "ok" }, `Created ${id} · ${costLine(res)}`));
          } else {
            status.replaceChildren(el("span", { class: "ok" }, `Saved ${id} · ${costLine(res)}`));
          }
        } catch (err) {
          status.replaceChildren(errorBox(err));
        } finally {
          saveBtn.disabled = false;
        }
      },
    },
    el("h3", {}, isNew ? `New ${k.one}` : `${k.one} ${script.id}`),
    el("div", { class: "script-meta" },
      field("Id", idInput),
      typeSel ? field("Type", typeSel) : null,
      opSel ? field("Operation", opSel) : null),
    wasmInfo,
    editor.element,
    el("div", { class: "field" },
      el("label", { for: wasmInput.id },
        storedWasm ? "Replace the WebAssembly module (.wasm, .wat)" : "Or upload a WebAssembly module (.wasm, .wat)"),
      wasmInput, wasmNote),
    el("div", { class: "script-actions" }, saveBtn, deleteBtn),
    status);

    pane.replaceChildren(form);
    if (k.seg === "sprocs" && !isNew) {
      pane.append(executePanel(script.id), fuzzPanel(script.id));
    }
    (isNew ? idInput : (storedWasm ? wasmInput : editor.textarea)).focus();
  }

  function executePanel(id) {
    const pk = el("input", { id: nextId("exec-pk"), type: "text", class: "mono", "data-test": "exec-pk", placeholder: '"p1"' });
    const params = el("textarea", { id: nextId("exec-params"), class: "mono", rows: 3, "data-test": "exec-params", spellcheck: "false" });
    params.value = "[]";
    const out = el("div", { class: "exec-output", "data-test": "exec-output", "aria-live": "polite" });
    const runBtn = el("button", { type: "submit", class: "primary", "data-test": "exec-run" }, "Execute");
    return el("form", {
      class: "exec-panel", "data-test": "exec-panel",
      onsubmit: async (e) => {
        e.preventDefault();
        out.replaceChildren();
        let headers;
        let body;
        try {
          if (!pk.value.trim()) throw localError("enter the partition key as JSON (e.g. \"p1\")");
          headers = {
            "x-ms-documentdb-partitionkey": partitionKeyHeader(parseJson(pk.value, "the partition key")),
            "x-ms-documentdb-script-enable-logging": "true",
            "x-partita-include-write-set": "true",
          };
          body = parseJson(params.value.trim() || "[]", "the parameters");
          if (!Array.isArray(body)) throw localError("the parameters must be a JSON array");
        } catch (err) {
          out.replaceChildren(errorBox(err));
          return;
        }
        runBtn.disabled = true;
        out.dataset.state = "running";
        try {
          const res = await request("POST", [...base, "sprocs", id], { body, headers });
          const ws = res.headers["x-partita-write-set"];
          out.replaceChildren(
            el("p", {}, el("strong", {}, `${res.status} OK`), " · ",
              el("span", { class: "cost", "data-test": "exec-cost" }, costLine(res))),
            el("div", { class: "exec-columns" },
              el("div", {},
                el("h4", {}, "Result"),
                el("pre", { class: "json", "data-test": "exec-result" },
                  res.body === null || res.body === "" ? "(no result)" : pretty(res.body)),
                logBox(res.headers["x-ms-documentdb-script-log-results"])),
              ws ? writeSetBox(ws) : el("div", { class: "write-set", "data-test": "exec-writes" },
                el("h4", {}, "Write set"), el("p", { class: "hint" }, "The server sent no write set."))));
          out.dataset.state = "ok";
        } catch (err) {
          const h = err.headers || {};
          out.replaceChildren(
            el("div", { "data-test": "exec-error" }, errorBox(err)),
            h["x-ms-request-charge"] ? el("p", { class: "cost" },
              `${Number(h["x-ms-request-charge"]).toFixed(2)} RU`) : null,
            logBox(h["x-ms-documentdb-script-log-results"]));
          out.dataset.state = "error";
        } finally {
          runBtn.disabled = false;
        }
      },
    },
    el("h3", {}, `Execute ${id}`),
    el("div", { class: "exec-inputs" },
      field("Partition key (JSON)", pk),
      field("Parameters (JSON array)", params)),
    el("div", { class: "script-actions" }, runBtn),
    out);
  }

  function fuzzPanel(id) {
    const keys = el("input", { id: nextId("fuzz-pks"), type: "text", class: "mono", "data-test": "fuzz-pks", placeholder: "p1, p2  or  [\"p1\", \"p2\"]" });
    const tmpl = el("textarea", { id: nextId("fuzz-params"), class: "mono", rows: 2, "data-test": "fuzz-params", spellcheck: "false" });
    tmpl.value = '["$pk"]';
    const inv = el("textarea", { id: nextId("fuzz-invariant"), class: "mono", rows: 2, "data-test": "fuzz-invariant", spellcheck: "false" });
    const expect = el("input", { id: nextId("fuzz-expect"), type: "text", class: "mono", "data-test": "fuzz-expect", placeholder: "[0]" });
    const calls = el("input", { id: nextId("fuzz-calls"), type: "number", min: 1, value: 200, class: "narrow", "data-test": "fuzz-calls" });
    // A seed is a u64, beyond a JavaScript number's exact range: kept as digits.
    const seed = el("input", { id: nextId("fuzz-seed"), type: "text", inputmode: "numeric", pattern: "[0-9]+",
      value: "1", class: "narrow", "data-test": "fuzz-seed" });
    const out = el("div", { class: "fuzz-output", "data-test": "fuzz-output", "aria-live": "polite" });
    const runBtn = el("button", { type: "submit", class: "primary", "data-test": "fuzz-run" }, "Run fuzzer");
    return el("form", {
      class: "fuzz-panel", "data-test": "fuzz-panel",
      onsubmit: async (e) => {
        e.preventDefault();
        out.replaceChildren();
        let body;
        let pkList;
        let seedDigits;
        try {
          pkList = parseKeys(keys.value);
          body = {
            partitionKeys: pkList,
            params: parseJson(tmpl.value.trim() || "[]", "the params template"),
            calls: Math.max(1, Number(calls.value) || 200),
          };
          if (inv.value.trim()) {
            body.invariant = inv.value.trim();
            if (!expect.value.trim()) throw localError("an invariant needs the JSON array it must return");
            body.expect = parseJson(expect.value, "the expected result");
          }
          seedDigits = seed.value.trim() || "1";
          if (!/^[0-9]{1,20}$/.test(seedDigits)) throw localError("the seed is a whole number (0 to 2^64 - 1)");
        } catch (err) {
          out.replaceChildren(errorBox(err));
          return;
        }
        // The seed's digits go into the JSON text as written (a number
        // would round a 64-bit seed).
        const text = JSON.stringify(body);
        const payload = `${text.slice(0, -1)},"seed":${seedDigits.replace(/^0+(?=\d)/, "")}}`;
        runBtn.disabled = true;
        out.dataset.state = "running";
        out.append(el("p", {}, `Fuzzing ${body.calls} calls…`));
        try {
          // Signed like an execute of the procedure; the body names the keys.
          const res = await request("POST", [...base, "sprocs", id], {
            body: payload,
            headers: { "x-partita-fuzz": "true" },
          });
          const report = parseExact(res.text);
          out.replaceChildren(fuzzReport(report, (rep) => {
            seed.value = String(rep.seed);
            calls.value = String(rep.calls);
            seed.focus();
          }), el("p", { class: "cost" }, costLine(res)));
          out.dataset.state = "ok";
        } catch (err) {
          out.replaceChildren(el("div", { "data-test": "fuzz-error" }, errorBox(err)));
          out.dataset.state = "error";
        } finally {
          runBtn.disabled = false;
        }
      },
    },
    el("h3", {}, `Fuzz ${id}`),
    el("p", { class: "hint" },
      "Calls the procedure many times on a private copy of these partitions with injected faults " +
      "(host errors, aborts, exhausted budgets, crashes) and checks atomicity and the invariant. " +
      "\"$pk\" in the template becomes the call's key, \"$seed\" a string unique per call."),
    el("div", { class: "fuzz-grid" },
      field("Partition keys", keys, "comma-separated or a JSON array"),
      field("Params template (JSON array)", tmpl),
      field("Invariant (SQL, optional)", inv),
      field("Expected (JSON array)", expect, "what the invariant must return on every partition"),
      el("div", { class: "fuzz-numbers" }, field("Calls", calls), field("Seed", seed))),
    el("div", { class: "script-actions" }, runBtn),
    out);
  }

  await loadLists();
  pane.replaceChildren(el("p", { class: "hint" }, "Choose a script, or New to write one."));
}

/**
 * JSON.parse that keeps integers beyond 2^53 (the fuzzer's 64-bit seeds)
 * as their exact digits, in a string.
 */
export function parseExact(text) {
  try {
    return JSON.parse(text, (key, value, context) => {
      if (typeof value === "number" && !Number.isSafeInteger(value) && context &&
          /^-?[0-9]+$/.test(context.source)) {
        return context.source;
      }
      return value;
    });
  } catch {
    return text;
  }
}

function fuzzReport(r, useReproduction) {
  if (!r || typeof r !== "object") {
    return el("pre", { class: "json", "data-test": "fuzz-report" }, pretty(r));
  }
  const row = (k, v, test) => [el("dt", {}, k), el("dd", test ? { "data-test": test } : {}, String(v ?? "—"))];
  const faults = Object.entries(r.faults || {});
  const v = r.first_violation;
  const rep = r.reproduction;
  return el("div", { class: "fuzz-report", "data-test": "fuzz-report",
    "data-violations": String(r.violations ?? "") },
  el("h4", {}, r.violations ? "Violation found" : "No violation"),
  el("dl", { class: "report" },
    row("procedure", r.procedure),
    row("seed", r.seed),
    row("calls", r.calls, "fuzz-calls-done"),
    row("committed", r.committed, "fuzz-committed"),
    row("failed", r.failed, "fuzz-failed"),
    row("faults injected", r.faults_injected, "fuzz-faults-injected"),
    row("crashes", r.crashes, "fuzz-crashes"),
    row("violations", r.violations, "fuzz-violations")),
  faults.length ? el("div", {},
    el("h4", {}, "Faults by kind"),
    resultsTable(faults.map(([kind, n]) => ({ kind, calls: n })), "fuzz-faults")) : null,
  r.statuses && Object.keys(r.statuses).length ? el("p", { class: "hint" },
    "Statuses: " + Object.entries(r.statuses).map(([s, n]) => `${s}: ${n}`).join(", ")) : null,
  v ? el("div", { class: "violation", "data-test": "fuzz-violation" },
    el("h4", {}, "First violation"),
    el("dl", { class: "report" },
      row("kind", v.kind, "fuzz-violation-kind"), row("message", v.message), row("call", v.call),
      v.call_seed !== undefined ? row("call seed", v.call_seed) : null,
      row("partition key", JSON.stringify(v.partition_key)),
      row("params", JSON.stringify(v.params)), row("fault", typeof v.fault === "string" ? v.fault : JSON.stringify(v.fault)),
      row("outcome", typeof v.outcome === "string" ? v.outcome : JSON.stringify(v.outcome))),
    el("h4", {}, "State"),
    el("pre", { class: "json" }, pretty(v.state))) : null,
  rep ? el("div", { class: "reproduction", "data-test": "fuzz-reproduction" },
    el("h4", {}, "Shortest reproduction"),
    el("p", { "data-test": "fuzz-reproduction-text" },
      `seed ${rep.seed}, ${rep.calls} call${rep.calls === 1 ? "" : "s"}` +
      (rep.concurrency ? `, concurrency ${rep.concurrency}` : "")),
    el("button", { type: "button", "data-test": "fuzz-use-reproduction",
      onclick: () => useReproduction(rep) }, "Use this seed and calls")) : null,
  el("details", {}, el("summary", {}, "Raw report"), el("pre", { class: "json" }, pretty(r))));
}
