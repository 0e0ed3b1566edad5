// Small DOM helpers shared by the Data Explorer's views.

/**
 * Builds an element: el("button", {class: "primary", onclick: f}, "Save").
 * Attributes starting with "on" become listeners; `null`/`false` ones are
 * skipped; children may be strings, nodes, arrays or null.
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else if (name === "dataset") {
      Object.assign(node.dataset, value);
    } else if (value === true) {
      node.setAttribute(name, "");
    } else {
      node.setAttribute(name, String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else node.append(child instanceof Node ? child : String(child));
  }
}

/** A readable error box: status, substatus and the service's message. */
export function errorBox(err) {
  const status = err && err.status ? `${err.status}` : "error";
  const sub = err && err.substatus ? ` / ${err.substatus}` : "";
  return el("div", { class: "error", role: "alert", "data-status": err && err.status },
    el("strong", {}, `${status}${sub}`), " ", (err && err.message) || String(err));
}

/** "3.71 RU · 1.2 ms" for a response. */
export function costLine(response) {
  return `${response.charge.toFixed(2)} RU · ${Number(response.durationMs).toFixed(1)} ms`;
}

/** Pretty JSON text. */
export function pretty(value) {
  return JSON.stringify(value, null, 2);
}

/**
 * An in-page confirmation (a modal <dialog>, keyboard-usable, Escape
 * cancels): resolves true when the user confirms. Test hooks:
 * data-test="confirm-dialog", "confirm-yes", "confirm-no".
 */
export function confirmDialog(message, { confirmLabel = "Delete" } = {}) {
  return new Promise((resolve) => {
    let answer = false;
    const yes = el("button", { type: "button", class: "danger", "data-test": "confirm-yes",
      onclick: () => { answer = true; dialog.close(); } }, confirmLabel);
    const no = el("button", { type: "button", "data-test": "confirm-no",
      onclick: () => dialog.close() }, "Cancel");
    const dialog = el("dialog", { class: "confirm", "data-test": "confirm-dialog",
      "aria-label": "Confirm" },
      el("p", {}, message), el("div", { class: "buttons" }, yes, no));
    dialog.addEventListener("close", () => { dialog.remove(); resolve(answer); });
    document.body.append(dialog);
    dialog.showModal();
    no.focus();
  });
}
