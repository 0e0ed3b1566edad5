// A small JavaScript syntax highlighter and the code editor built on it.
//
// The editor is the classic overlay: a <textarea> whose text is transparent
// (its caret and selection stay visible) lies exactly over a <pre><code>
// that shows the same text as highlighted tokens; the two scroll together.
// Tokens are <span class="tok-..."> nodes built with textContent, never
// markup, so any text is shown as written.

import { el } from "./ui.js";

const KEYWORDS = new Set([
  "async", "await", "break", "case", "catch", "class", "const", "continue", "debugger",
  "default", "delete", "do", "else", "export", "extends", "false", "finally", "for",
  "function", "if", "import", "in", "instanceof", "let", "new", "null", "of", "return",
  "static", "super", "switch", "this", "throw", "true", "try", "typeof", "undefined",
  "var", "void", "while", "with", "yield",
]);

// After these keywords a `/` starts a regular expression, not a division.
const REGEX_AFTER_KEYWORD = new Set([
  "return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void", "throw",
  "instanceof", "yield", "await",
]);

const IDENT_START = /[A-Za-z_$\u00c0-\uffff]/;
const IDENT_PART = /[A-Za-z0-9_$\u00c0-\uffff]/;
const DIGIT = /[0-9]/;

/**
 * Splits JavaScript text into tokens `{type, text}` whose texts concatenate
 * to the input. Types: keyword, string, comment, number, regex, ident,
 * punct, space. Unterminated strings and comments run to the line's (or the
 * text's) end: the highlighter never throws.
 */
export function tokenize(src) {
  const tokens = [];
  let i = 0;
  // The last token that is not space or comment decides what `/` means.
  let prev = null;
  const push = (type, start, end) => {
    const tok = { type, text: src.slice(start, end) };
    tokens.push(tok);
    if (type !== "space" && type !== "comment") prev = tok;
  };
  const regexAllowed = () => {
    if (!prev) return true;
    if (prev.type === "keyword") return REGEX_AFTER_KEYWORD.has(prev.text);
    if (prev.type === "punct") return !/^[)\]}]$/.test(prev.text);
    return false; // after an identifier, number, string or regex: division
  };
  while (i < src.length) {
    const c = src[i];
    const start = i;
    if (c === " " || c === "\t" || c === "\n" || c === "\r") {
      while (i < src.length && /[ \t\n\r]/.test(src[i])) i++;
      push("space", start, i);
    } else if (c === "/" && src[i + 1] === "/") {
      while (i < src.length && src[i] !== "\n") i++;
      push("comment", start, i);
    } else if (c === "/" && src[i + 1] === "*") {
      const end = src.indexOf("*/", i + 2);
      i = end < 0 ? src.length : end + 2;
      push("comment", start, i);
    } else if (c === '"' || c === "'") {
      i++;
      while (i < src.length && src[i] !== c && src[i] !== "\n") {
        i += src[i] === "\\" ? 2 : 1;
      }
      if (src[i] === c) i++;
      push("string", start, Math.min(i, src.length));
    } else if (c === "`") {
      i = templateEnd(src, i + 1);
      push("string", start, i);
    } else if (DIGIT.test(c) || (c === "." && DIGIT.test(src[i + 1] || ""))) {
      if (c === "0" && /[xXoObB]/.test(src[i + 1] || "")) {
        i += 2;
        while (i < src.length && /[0-9a-fA-F_]/.test(src[i])) i++;
      } else {
        while (i < src.length && /[0-9_]/.test(src[i])) i++;
        if (src[i] === ".") {
          i++;
          while (i < src.length && /[0-9_]/.test(src[i])) i++;
        }
        if (/[eE]/.test(src[i] || "") && /[0-9+-]/.test(src[i + 1] || "")) {
          i += 2;
          while (i < src.length && /[0-9_]/.test(src[i])) i++;
        }
      }
      if (src[i] === "n") i++;
      push("number", start, i);
    } else if (IDENT_START.test(c)) {
      while (i < src.length && IDENT_PART.test(src[i])) i++;
      const word = src.slice(start, i);
      // A property name (`x.return`) is not a keyword.
      const isProp = prev && prev.type === "punct" && prev.text === ".";
      push(KEYWORDS.has(word) && !isProp ? "keyword" : "ident", start, i);
    } else if (c === "/" && regexAllowed()) {
      const end = regexEnd(src, i + 1);
      if (end < 0) {
        i++;
        push("punct", start, i);
      } else {
        i = end;
        while (i < src.length && /[a-z]/.test(src[i])) i++;
        push("regex", start, i);
      }
    } else {
      i++;
      push("punct", start, i);
    }
  }
  return tokens;
}

/** The index after a template literal's closing backtick (nested `${}` skipped). */
function templateEnd(src, i) {
  while (i < src.length) {
    const c = src[i];
    if (c === "\\") { i += 2; continue; }
    if (c === "`") return i + 1;
    if (c === "$" && src[i + 1] === "{") {
      let depth = 1;
      i += 2;
      while (i < src.length && depth > 0) {
        const d = src[i];
        if (d === "{") depth++;
        else if (d === "}") depth--;
        else if (d === "`") { i = templateEnd(src, i + 1); continue; }
        else if (d === '"' || d === "'") {
          i++;
          while (i < src.length && src[i] !== d && src[i] !== "\n") i += src[i] === "\\" ? 2 : 1;
        }
        i++;
      }
      continue;
    }
    i++;
  }
  return src.length;
}

/** The index after a regular expression's closing `/`, or -1 if the line ends first. */
function regexEnd(src, i) {
  let inClass = false;
  while (i < src.length) {
    const c = src[i];
    if (c === "\n") return -1;
    if (c === "\\") { i += 2; continue; }
    if (inClass) {
      if (c === "]") inClass = false;
    } else if (c === "[") {
      inClass = true;
    } else if (c === "/") {
      return i + 1;
    }
    i++;
  }
  return -1;
}

const CLASSES = {
  keyword: "tok-keyword", string: "tok-string", comment: "tok-comment",
  number: "tok-number", regex: "tok-regex",
};

/** Fills `code` with the highlighted tokens of `src` (text nodes and spans). */
export function highlightInto(code, src) {
  const frag = document.createDocumentFragment();
  let plain = "";
  for (const tok of tokenize(src)) {
    const cls = CLASSES[tok.type];
    if (!cls) { plain += tok.text; continue; }
    if (plain) { frag.append(document.createTextNode(plain)); plain = ""; }
    const span = document.createElement("span");
    span.className = cls;
    span.textContent = tok.text;
    frag.append(span);
  }
  // A trailing newline needs a line after it for the heights to match.
  plain += src.endsWith("\n") || src === "" ? " " : "";
  if (plain) frag.append(document.createTextNode(plain));
  code.replaceChildren(frag);
}

let stylesheetAdded = false;

function addStylesheet() {
  if (stylesheetAdded || document.querySelector('link[href="highlight.css"]')) {
    stylesheetAdded = true;
    return;
  }
  document.head.append(el("link", { rel: "stylesheet", href: "highlight.css" }));
  stylesheetAdded = true;
}

let editorCount = 0;

/**
 * A code editor: `createCodeEditor({value, label, onChange, rows, test})`
 * returns `{element, textarea, getValue(), setValue(text)}`. `label` names
 * the textarea for screen readers; `test` is its data-test attribute.
 */
export function createCodeEditor({ value = "", label = "Code", onChange, rows = 16,
  test = "code-editor" } = {}) {
  addStylesheet();
  const id = `code-editor-${++editorCount}`;
  const code = el("code", {});
  const pre = el("pre", { class: "code-highlight", "aria-hidden": "true" }, code);
  const textarea = el("textarea", {
    id, class: "code-input", spellcheck: "false", autocomplete: "off",
    autocapitalize: "off", wrap: "off", rows, "aria-label": label, "data-test": test,
  });
  textarea.value = value;
  const element = el("div", { class: "code-editor" }, pre, textarea);
  const sync = () => {
    pre.scrollTop = textarea.scrollTop;
    pre.scrollLeft = textarea.scrollLeft;
  };
  const render = () => {
    highlightInto(code, textarea.value);
    sync();
  };
  textarea.addEventListener("input", () => {
    render();
    if (onChange) onChange(textarea.value);
  });
  textarea.addEventListener("scroll", sync);
  // The textarea may be resized by the user: the overlay follows its size.
  if (globalThis.ResizeObserver) {
    new ResizeObserver(() => {
      pre.style.height = `${textarea.offsetHeight}px`;
      sync();
    }).observe(textarea);
  }
  render();
  return {
    element,
    textarea,
    getValue: () => textarea.value,
    setValue: (text) => {
      textarea.value = text;
      render();
    },
  };
}
