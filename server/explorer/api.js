// The REST client of the Data Explorer: signs every request with the
// account key exactly as the official SDKs do (HMAC-SHA256 over verb,
// resource type, resource link and date) and returns the response with the
// headers the views show (request charge, duration, continuation, logs).
//
// The key comes from the page (a <meta name="partita-key"> the server adds
// only for a loopback client) or from the user, and is kept in
// sessionStorage: never in a URL.

const KEY_STORAGE = "partita-explorer-key";

/** The account key: the page's, the session's, or null (ask the user). */
export function accountKey() {
  const meta = document.querySelector('meta[name="partita-key"]');
  if (meta && meta.content) return meta.content;
  return sessionStorage.getItem(KEY_STORAGE);
}

/** Remembers a key the user typed, for this browser tab only. */
export function rememberKey(key) {
  sessionStorage.setItem(KEY_STORAGE, key.trim());
  signingKey = null;
}

/** Forgets the typed key (after a 401). */
export function forgetKey() {
  sessionStorage.removeItem(KEY_STORAGE);
  signingKey = null;
}

let signingKey = null;

async function hmacKey() {
  if (signingKey) return signingKey;
  const key = accountKey();
  if (!key) throw new ApiError(401, 0, "no account key: enter the key partita serve printed");
  if (!globalThis.crypto || !crypto.subtle) {
    throw new ApiError(0, 0, "this page needs a secure context to sign requests: open it on " +
      "localhost, or start partita serve with --tls");
  }
  let raw;
  try {
    raw = Uint8Array.from(atob(key), (c) => c.charCodeAt(0));
  } catch {
    throw new ApiError(401, 0, "the account key is not base64");
  }
  signingKey = await crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" },
    false, ["sign"]);
  return signingKey;
}

/** A failed request: the service's status, substatus and message. */
export class ApiError extends Error {
  constructor(status, substatus, message, headers = {}) {
    super(message);
    this.status = status;
    this.substatus = substatus;
    this.headers = headers;
  }
}

/** Splits a path of names into segments ("dbs/my db/colls/c" has 4). */
function segmentsOf(path) {
  return path.split("/").filter((s) => s.length > 0);
}

/** The resource type and link a request is signed with (auth.rs). */
export function resourceOf(segments) {
  if (segments.length === 6 && segments[0] === "dbs" && segments[2] === "colls" &&
      segments[4] === "operations") {
    return ["colls", segments.slice(0, 4).join("/")];
  }
  if (segments.length === 0) return ["", ""];
  if (segments.length % 2 === 1) {
    return [segments[segments.length - 1], segments.slice(0, -1).join("/")];
  }
  return [segments[segments.length - 2], segments.join("/")];
}

async function authorization(verb, segments, date) {
  const [type, link] = resourceOf(segments);
  const text = `${verb.toLowerCase()}\n${type.toLowerCase()}\n${link}\n${date.toLowerCase()}\n\n`;
  const sig = await crypto.subtle.sign("HMAC", await hmacKey(), new TextEncoder().encode(text));
  const b64 = btoa(String.fromCharCode(...new Uint8Array(sig)));
  return encodeURIComponent(`type=master&ver=1.0&sig=${b64}`);
}

/**
 * One request. `path` is a list of name segments (["dbs", "blog", "colls",
 * "posts", "docs"]); `body` a JSON value, a string or an ArrayBuffer; `headers`
 * extra request headers. Resolves to {status, body, text, headers, charge,
 * durationMs, continuation}; rejects with an ApiError.
 */
export async function request(method, path, { body, headers = {} } = {}) {
  const segments = Array.isArray(path) ? path : segmentsOf(path);
  const date = new Date().toUTCString();
  const h = {
    "x-ms-date": date,
    "x-ms-version": "2020-07-15",
    authorization: await authorization(method, segments, date),
    accept: "application/json",
    ...headers,
  };
  let payload;
  if (body !== undefined) {
    if (typeof body === "string" || body instanceof ArrayBuffer) {
      payload = body;
    } else {
      payload = JSON.stringify(body);
    }
    if (!h["content-type"]) h["content-type"] = "application/json";
  }
  const url = "/" + segments.map(encodeURIComponent).join("/");
  const started = performance.now();
  let response;
  try {
    response = await fetch(url, { method, headers: h, body: payload, cache: "no-store" });
  } catch (e) {
    throw new ApiError(0, 0, `the server did not answer: ${e.message}`);
  }
  const text = await response.text();
  const elapsed = performance.now() - started;
  const out = {};
  response.headers.forEach((v, k) => { out[k] = v; });
  let parsed = null;
  if (text.length > 0) {
    try { parsed = JSON.parse(text); } catch { parsed = text; }
  }
  const result = {
    status: response.status,
    body: parsed,
    // The raw text, for a caller that must keep 64-bit integers exact
    // (JSON.parse rounds them to doubles).
    text,
    headers: out,
    charge: Number(out["x-ms-request-charge"] || 0),
    durationMs: Number(out["x-ms-request-duration-ms"] || elapsed),
    continuation: out["x-ms-continuation"] || null,
  };
  if (response.status >= 400) {
    const message = parsed && typeof parsed === "object" && parsed.message
      ? parsed.message : (text || response.statusText);
    if (response.status === 401 && !document.querySelector('meta[name="partita-key"]')) {
      forgetKey();
    }
    throw new ApiError(response.status, Number(out["x-ms-substatus"] || 0), message, out);
  }
  return result;
}

/** The header value of a partition key: a JSON array of its components. */
export function partitionKeyHeader(value) {
  return JSON.stringify(Array.isArray(value) ? value : [value]);
}

/** Decodes a percent-encoded header (script logs, the write set). */
export function decodeHeader(value) {
  if (!value) return "";
  try { return decodeURIComponent(value); } catch { return value; }
}
