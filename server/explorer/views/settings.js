// The Settings tab: the container's partition key, indexing policy, unique
// keys and default time to live (editable: a PUT of the whole container with
// the new defaultTtl), and the whole resource as JSON.

import * as api from "../api.js";
import { el, errorBox, costLine, pretty } from "../ui.js";

export const title = "Settings";

/** The properties the service computes: left out of a PUT. */
const SYSTEM = ["_rid", "_self", "_etag", "_ts", "_docs", "_sprocs", "_triggers", "_udfs",
  "_conflicts"];

export async function render(root, ctx) {
  let container = ctx.container;
  const path = ["dbs", ctx.db, "colls", ctx.coll];

  const pkSection = el("section", { class: "settings-section", "data-test": "settings-pk" });
  const ttlSection = el("section", { class: "settings-section", "data-test": "settings-ttl" });
  const indexSection = el("section", { class: "settings-section", "data-test": "settings-indexing" });
  const uniqueSection = el("section", { class: "settings-section", "data-test": "settings-unique" });
  const jsonSection = el("section", { class: "settings-section" });

  function draw() {
    const pk = container.partitionKey || {};
    pkSection.replaceChildren(
      el("h3", {}, "Partition key"),
      el("dl", { class: "props" },
        el("dt", {}, "Paths"), el("dd", { "data-test": "settings-pk-paths" },
          el("code", {}, (pk.paths || []).join(", "))),
        el("dt", {}, "Kind"), el("dd", {}, pk.kind || "Hash",
          (pk.paths || []).length > 1 ? " (hierarchical)" : ""),
        el("dt", {}, "Version"), el("dd", {}, String(pk.version || 1))));

    const unique = (container.uniqueKeyPolicy && container.uniqueKeyPolicy.uniqueKeys) || [];
    uniqueSection.replaceChildren(
      el("h3", {}, "Unique keys"),
      unique.length === 0
        ? el("p", { class: "muted" }, "None.")
        : el("ul", {}, unique.map((u) => el("li", {}, el("code", {}, (u.paths || []).join(", "))))));

    indexSection.replaceChildren(
      el("h3", {}, "Indexing policy"),
      el("pre", { class: "json", "data-test": "settings-indexing-json", tabindex: "0",
        "aria-label": "Indexing policy JSON" }, pretty(container.indexingPolicy || {})));

    jsonSection.replaceChildren(
      el("h3", {}, "Resource"),
      el("pre", { class: "json", "data-test": "settings-json", tabindex: "0",
        "aria-label": "Container JSON" }, pretty(container)));

    drawTtl();
  }

  function drawTtl() {
    const ttl = container.defaultTtl;
    const mode = ttl === undefined || ttl === null ? "off" : ttl === -1 ? "on" : "seconds";
    const radio = (value, label) => {
      const id = `ttl-mode-${value}`;
      const test = value === "seconds" ? "ttl-expire" : `ttl-${value}`;
      return el("span", { class: "check" },
        el("input", { type: "radio", name: "ttl-mode", id, value, "data-test": test,
          checked: mode === value, onchange: sync }),
        el("label", { for: id }, label));
    };
    const seconds = el("input", { type: "number", id: "ttl-seconds", min: "1", step: "1",
      "data-test": "ttl-seconds", value: mode === "seconds" ? String(ttl) : "3600" });
    const status = el("div", { class: "form-status", "data-test": "ttl-status",
      "aria-live": "polite" });
    const save = el("button", { type: "submit", class: "primary", "data-test": "ttl-save" },
      "Save time to live");
    function sync() {
      const chosen = ttlSection.querySelector('input[name="ttl-mode"]:checked');
      seconds.disabled = !chosen || chosen.value !== "seconds";
    }
    const form = el("form", { "data-test": "ttl-form",
      onsubmit: async (ev) => {
        ev.preventDefault();
        const chosen = form.querySelector('input[name="ttl-mode"]:checked').value;
        let value;
        if (chosen === "on") value = -1;
        else if (chosen === "seconds") {
          value = Number(seconds.value);
          if (!Number.isInteger(value) || value < 1) {
            status.replaceChildren(el("div", { class: "error", role: "alert" },
              el("strong", {}, "Invalid"), " the time to live is a whole number of seconds, at least 1"));
            return;
          }
        }
        const body = {};
        for (const [k, v] of Object.entries(container)) {
          if (!SYSTEM.includes(k) && k !== "defaultTtl") body[k] = v;
        }
        if (value !== undefined) body.defaultTtl = value;
        save.disabled = true;
        try {
          const res = await api.request("PUT", path, { body });
          container = res.body;
          ctx.container = container;
          draw();
          ttlSection.querySelector('[data-test="ttl-status"]').replaceChildren(
            el("div", { class: "notice", role: "status" }, "Saved. ",
              el("span", { class: "cost" }, costLine(res))));
          ttlSection.querySelector('[data-test="ttl-save"]').focus();
        } catch (e) {
          status.replaceChildren(errorBox(e));
          save.disabled = false;
        }
      } },
    el("fieldset", {},
      el("legend", {}, "Default time to live"),
      el("div", { class: "ttl-row" },
        radio("off", "Off"),
        radio("on", "On, no default (-1)"),
        radio("seconds", "On, expire after"),
        el("span", { class: "check" }, seconds, el("label", { for: "ttl-seconds" }, "seconds"))),
      el("p", { class: "cost", "data-test": "ttl-current" }, "Current: ",
        mode === "off" ? "off" : mode === "on" ? "on, no default (-1)" : `${ttl} seconds`)),
    el("div", { class: "buttons" }, save), status);
    ttlSection.replaceChildren(el("h3", {}, "Time to live"), form);
    sync();
  }

  draw();
  root.append(pkSection, ttlSection, indexSection, uniqueSection, jsonSection);
}
