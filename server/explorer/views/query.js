// The Query tab: a SQL editor with parameters, a scope (one logical
// partition or the whole container) and a page size; results as a table or
// as JSON, page by page, with each page's charge, duration and query metrics.

import { request, partitionKeyHeader } from "../api.js";
import { el, errorBox, costLine, pretty } from "../ui.js";

export const title = "Query";

/** Columns of a result table: top-level keys of object rows, "value" for the rest. */
export function columnsOf(rows) {
  const keys = [];
  const seen = new Set();
  let scalar = false;
  for (const row of rows) {
    if (row !== null && typeof row === "object" && !Array.isArray(row)) {
      for (const k of Object.keys(row)) {
        if (!seen.has(k)) { seen.add(k); keys.push(k); }
      }
    } else {
      scalar = true;
    }
  }
  if (scalar) keys.push(seen.has("value") ? "(value)" : "value");
  return { keys, scalar };
}

function cellText(v) {
  if (v === undefined) return "";
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}

/** `<table class="results">` of rows (objects by key, scalars in one column). */
export function resultsTable(rows, test = "query-table") {
  const { keys, scalar } = columnsOf(rows);
  const valueKey = scalar ? keys[keys.length - 1] : null;
  const head = el("tr", {}, keys.map((k) => el("th", { scope: "col" }, k)));
  const body = rows.map((row) => {
    const isObj = row !== null && typeof row === "object" && !Array.isArray(row);
    return el("tr", {}, keys.map((k) => {
      const v = isObj ? (k === valueKey && !Object.hasOwn(row, k) ? undefined : row[k])
        : (k === valueKey ? row : undefined);
      const nested = v !== null && typeof v === "object";
      return el("td", { class: v === undefined ? "missing" : (nested ? "nested" : null) },
        cellText(v));
    }));
  });
  return el("div", { class: "table-wrap" },
    el("table", { class: "results", "data-test": test },
      el("thead", {}, head), el("tbody", {}, body)));
}

/** "k=v;k=v" -> [[k, v], ...] */
export function parseMetrics(text) {
  return String(text).split(";").map((p) => p.trim()).filter(Boolean).map((p) => {
    const at = p.indexOf("=");
    return at < 0 ? [p, ""] : [p.slice(0, at), p.slice(at + 1)];
  });
}

function metricsBox(text) {
  const pairs = parseMetrics(text);
  return el("details", { class: "query-metrics", "data-test": "query-metrics" },
    el("summary", {}, `Query metrics (${pairs.length})`),
    el("dl", {}, pairs.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])));
}

function paramRow(name = "", value = "") {
  const row = el("div", { class: "param-row", "data-test": "query-param" });
  const nameInput = el("input", {
    type: "text", "aria-label": "Parameter name", placeholder: "@name",
    "data-test": "query-param-name", class: "mono", value: name,
  });
  const valueInput = el("input", {
    type: "text", "aria-label": "Parameter value (JSON)", placeholder: "JSON value, e.g. 1 or \"p1\"",
    "data-test": "query-param-value", class: "mono", value: value,
  });
  const remove = el("button", {
    type: "button", "aria-label": "Remove parameter", "data-test": "query-param-remove",
    onclick: () => row.remove(),
  }, "Remove");
  row.append(nameInput, valueInput, remove);
  return row;
}

function parseJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (e) {
    const err = new Error(`${what} is not JSON: ${e.message}`);
    err.status = 0;
    throw err;
  }
}

export async function render(root, ctx) {
  const pkPath = (ctx.container && ctx.container.partitionKey &&
    ctx.container.partitionKey.paths && ctx.container.partitionKey.paths[0]) || "/id";

  const sql = el("textarea", {
    id: "query-text", class: "mono query-text", rows: 5, spellcheck: "false",
    "data-test": "query-text", "aria-describedby": "query-hint",
  });
  sql.value = "SELECT * FROM c";

  const params = el("div", { class: "params", "data-test": "query-params" });
  const addParam = el("button", {
    type: "button", "data-test": "query-add-param",
    onclick: () => {
      const row = paramRow();
      params.append(row);
      row.querySelector("input").focus();
    },
  }, "Add parameter");

  const scope = el("select", { id: "query-scope", "data-test": "query-scope" },
    el("option", { value: "cross" }, "Cross-partition"),
    el("option", { value: "single" }, "Single partition"));
  const pk = el("input", {
    id: "query-pk", type: "text", class: "mono", "data-test": "query-pk",
    placeholder: '"p1"', disabled: true,
  });
  scope.addEventListener("change", () => {
    pk.disabled = scope.value !== "single";
    if (!pk.disabled) pk.focus();
  });
  const pageSize = el("input", {
    id: "query-page-size", type: "number", min: 1, max: 1000, value: 20,
    "data-test": "query-page-size", class: "narrow",
  });

  const runBtn = el("button", { type: "submit", class: "primary", "data-test": "query-run" }, "Run");
  const nextBtn = el("button", {
    type: "button", "data-test": "query-next", disabled: true, onclick: () => nextPage(),
  }, "Next page");
  const toggle = el("button", {
    type: "button", "data-test": "query-toggle", "aria-pressed": "false", disabled: true,
    onclick: () => setMode(mode === "table" ? "json" : "table"),
  }, "Show JSON");

  const status = el("div", { class: "sr-label", "aria-live": "polite", "data-test": "query-status" });
  const errorArea = el("div", { "data-test": "query-error" });
  const output = el("div", { class: "query-output", "data-test": "query-output" });
  const history = el("ol", { class: "query-history", "data-test": "query-history" });
  const historyBox = el("section", { class: "query-history-box", hidden: true },
    el("h3", {}, "Pages fetched"), history);

  const form = el("form", {
    class: "query-form", "data-test": "query-form",
    onsubmit: (e) => { e.preventDefault(); run(); },
  },
  el("div", { class: "field" },
    el("label", { for: "query-text" }, "SQL query"),
    sql,
    el("span", { id: "query-hint", class: "hint" }, "Ctrl+Enter runs the query.")),
  el("fieldset", { class: "query-params-box" },
    el("legend", {}, "Parameters"), params, addParam),
  el("div", { class: "toolbar query-options" },
    el("div", { class: "field" }, el("label", { for: "query-scope" }, "Scope"), scope),
    el("div", { class: "field" },
      el("label", { for: "query-pk" }, `Partition key (${pkPath}, JSON)`), pk),
    el("div", { class: "field" }, el("label", { for: "query-page-size" }, "Page size"), pageSize)),
  el("div", { class: "query-actions" }, runBtn, nextBtn, toggle));

  sql.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      run();
    }
  });

  root.append(
    el("h2", {}, "Query"),
    form,
    errorArea,
    status,
    output,
    historyBox,
  );

  let spec = null; // the query being paged: fixed at Run
  let continuation = null;
  let pages = [];
  let mode = "table";
  let current = null; // the rows of the page shown
  let busy = false;

  function setMode(m) {
    mode = m;
    toggle.textContent = m === "table" ? "Show JSON" : "Show table";
    toggle.setAttribute("aria-pressed", m === "json" ? "true" : "false");
    showRows();
  }

  function showRows() {
    const resultBox = output.querySelector(".query-result");
    if (!resultBox || !current) return;
    resultBox.replaceChildren(mode === "table"
      ? (current.length === 0 ? el("p", { class: "empty" }, "No results.") : resultsTable(current))
      : el("pre", { class: "json", "data-test": "query-json" }, pretty(current)));
    output.dataset.mode = mode;
  }

  function buildSpec() {
    const parameters = [];
    for (const row of params.querySelectorAll(".param-row")) {
      const [n, v] = row.querySelectorAll("input");
      const name = n.value.trim();
      if (!name && !v.value.trim()) continue;
      if (!name) throw Object.assign(new Error("a parameter needs a name"), { status: 0 });
      parameters.push({
        name: name.startsWith("@") ? name : `@${name}`,
        value: parseJson(v.value, `the value of ${name}`),
      });
    }
    const headers = {
      "x-ms-documentdb-isquery": "true",
      "content-type": "application/query+json",
      "x-ms-documentdb-populatequerymetrics": "true",
      "x-ms-max-item-count": String(Math.max(1, Number(pageSize.value) || 20)),
    };
    if (scope.value === "single") {
      if (!pk.value.trim()) throw Object.assign(new Error("enter the partition key as JSON (e.g. \"p1\")"), { status: 0 });
      headers["x-ms-documentdb-partitionkey"] = partitionKeyHeader(parseJson(pk.value, "the partition key"));
    } else {
      // Evaluated over every partition at once: the page has no SDK
      // pipeline to merge what several physical partitions return.
      headers["x-ms-documentdb-query-enablecrosspartition"] = "true";
      headers["x-partita-query-whole"] = "true";
    }
    return { body: { query: sql.value, parameters }, headers };
  }

  async function fetchPage(token) {
    if (busy) return;
    busy = true;
    runBtn.disabled = true;
    nextBtn.disabled = true;
    errorArea.replaceChildren();
    status.textContent = "Running…";
    const headers = { ...spec.headers };
    if (token) headers["x-ms-continuation"] = token;
    try {
      const res = await request("POST", ["dbs", ctx.db, "colls", ctx.coll, "docs"],
        { body: spec.body, headers });
      const rows = (res.body && res.body.Documents) || [];
      continuation = res.continuation;
      const n = pages.length + 1;
      pages.push({ n, count: rows.length, charge: res.charge, ms: res.durationMs });
      current = rows;
      const metrics = res.headers["x-ms-documentdb-query-metrics"];
      output.replaceChildren(
        el("div", { class: "query-page-head" },
          el("strong", { "data-test": "query-page" }, `Page ${n}`), " · ",
          el("span", { "data-test": "query-count" }, `${rows.length} result${rows.length === 1 ? "" : "s"}`),
          " · ",
          el("span", { class: "cost", "data-test": "query-cost" }, costLine(res)),
          continuation ? " · more pages" : " · last page"),
        metrics ? metricsBox(metrics) : null,
        el("div", { class: "query-result" }));
      output.dataset.page = String(n);
      showRows();
      history.append(el("li", { "data-test": "query-history-entry" },
        `page ${n}: ${rows.length} result${rows.length === 1 ? "" : "s"}, ${res.charge.toFixed(2)} RU, ${Number(res.durationMs).toFixed(1)} ms`));
      historyBox.hidden = false;
      toggle.disabled = false;
      status.textContent = `Page ${n}: ${rows.length} results.`;
    } catch (err) {
      status.textContent = "";
      errorArea.replaceChildren(errorBox(err));
    } finally {
      busy = false;
      runBtn.disabled = false;
      nextBtn.disabled = !continuation || !spec;
      // Completed fetches, for tests to wait on.
      root.dataset.seq = String(Number(root.dataset.seq || 0) + 1);
    }
  }

  function run() {
    if (busy) return;
    errorArea.replaceChildren();
    let s;
    try {
      s = buildSpec();
    } catch (err) {
      errorArea.replaceChildren(errorBox(err));
      root.dataset.seq = String(Number(root.dataset.seq || 0) + 1);
      return;
    }
    spec = s;
    continuation = null;
    pages = [];
    current = null;
    history.replaceChildren();
    historyBox.hidden = true;
    output.replaceChildren();
    delete output.dataset.page;
    fetchPage(null);
  }

  function nextPage() {
    if (spec && continuation) fetchPage(continuation);
  }
}
