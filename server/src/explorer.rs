//! The Data Explorer: the web page every Cosmos DB emulator serves, at
//! `/_explorer/` (and `/_explorer/index.html`).
//!
//! The page is the files of `server/explorer/`, embedded in the binary at
//! build time (a debug build reads them from that folder instead, so an
//! edit shows on reload). It talks to the same REST API the SDKs use and
//! signs its requests with the account key like them. The key reaches the
//! page only when the page is served to a loopback client: a
//! `<meta name="partita-key">` in place of the `<!--partita-key-->` marker
//! of `index.html`, as the emulators' explorers carry their well-known key.
//! Any other client gets the page without it and types the key in.
//!
//! Every file goes out with a content security policy that allows only the
//! page's own scripts, styles and requests, so a document's text shown in
//! the page can never run as code, and the page cannot be framed.

use std::net::SocketAddr;

use rust_embed::Embed;

use super::wire::{WireError, WireResponse};

/// The page's files, `server/explorer/`.
#[derive(Embed)]
#[folder = "explorer/"]
struct Assets;

/// Where the explorer lives.
const PREFIX: &str = "/_explorer";

/// Where `index.html` takes the key's `<meta>` element.
const KEY_MARKER: &str = "<!--partita-key-->";

/// What the page may load and run: its own files and requests only.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// Whether `path` (as sent, without the query) is the explorer's.
pub(crate) fn is_explorer_path(path: &str) -> bool {
    path == PREFIX || path.starts_with("/_explorer/")
}

/// Answers a request for the explorer: `GET` or `HEAD` of one of its files,
/// with the key filled in for a loopback `remote` client. Never reads a
/// body and never needs a signature.
pub(crate) fn serve(
    method: &str,
    path: &str,
    remote: Option<SocketAddr>,
    key: &str,
) -> WireResponse {
    if method != "GET" && method != "HEAD" {
        return WireError::new(
            405,
            format!("{method} is not allowed on the Data Explorer's files (GET only)"),
        )
        .response()
        .with("allow", "GET, HEAD")
        .with("content-type", "application/json");
    }
    if path == PREFIX {
        return WireResponse::empty(301)
            .with("location", "/_explorer/")
            .with("cache-control", "no-store");
    }
    let name = match &path[PREFIX.len() + 1..] {
        "" => "index.html",
        name => name,
    };
    let Some(file) = safe_name(name).and_then(Assets::get) else {
        return WireError::not_found(format!(
            "the Data Explorer has no file {name:?} (the page is at /_explorer/)"
        ))
        .response()
        .with("content-type", "application/json");
    };
    let mut body = file.data.into_owned();
    let is_page = name == "index.html";
    if is_page {
        let meta = if remote.is_some_and(|addr| addr.ip().is_loopback()) {
            format!(r#"<meta name="partita-key" content="{}">"#, attribute(key))
        } else {
            String::new()
        };
        let text = String::from_utf8_lossy(&body).replacen(KEY_MARKER, &meta, 1);
        body = text.into_bytes();
    }
    let mut response = WireResponse {
        status: 200,
        headers: Vec::new(),
        body: if method == "HEAD" { Vec::new() } else { body },
    }
    .with("content-type", content_type(name))
    .with("content-security-policy", CONTENT_SECURITY_POLICY)
    .with("x-content-type-options", "nosniff")
    .with("referrer-policy", "no-referrer")
    .with("x-frame-options", "DENY");
    // The page may carry the key: never keep it in a cache.
    response = response.with(
        "cache-control",
        if is_page { "no-store" } else { "no-cache" },
    );
    response
}

/// `name` when it is a plain relative path inside the folder: no empty,
/// `.` or `..` segment, no backslash, no percent-encoding.
fn safe_name(name: &str) -> Option<&str> {
    let plain = name.split('/').all(|segment| {
        !segment.is_empty()
            && !segment.starts_with('.')
            && segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    });
    plain.then_some(name)
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit('.').next().unwrap_or_default() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        _ => "application/octet-stream",
    }
}

/// `text` escaped for a double-quoted HTML attribute (a base64 key needs
/// none, but the server takes any key text).
fn attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "a2V5+/==";

    fn get(path: &str, remote: &str) -> WireResponse {
        serve("GET", path, Some(remote.parse().unwrap()), KEY)
    }

    fn text(response: &WireResponse) -> String {
        String::from_utf8(response.body.clone()).unwrap()
    }

    #[test]
    fn a_loopback_client_gets_the_page_with_the_key() {
        for path in ["/_explorer/", "/_explorer/index.html"] {
            for remote in ["127.0.0.1:5000", "[::1]:5000"] {
                let page = get(path, remote);
                assert_eq!(page.status, 200, "{path}");
                assert_eq!(
                    page.header("content-type"),
                    Some("text/html; charset=utf-8")
                );
                assert_eq!(page.header("cache-control"), Some("no-store"));
                assert!(
                    text(&page).contains(&format!(r#"<meta name="partita-key" content="{KEY}">"#)),
                    "{path} from {remote}"
                );
                assert!(!text(&page).contains(KEY_MARKER));
            }
        }
    }

    #[test]
    fn any_other_client_gets_the_page_without_the_key() {
        for remote in ["10.0.0.7:5000", "[2001:db8::1]:5000"] {
            let page = get("/_explorer/", remote);
            assert_eq!(page.status, 200);
            assert!(!text(&page).contains(KEY), "the key went to {remote}");
            assert!(!text(&page).contains("partita-key\" content"));
        }
        let unknown = serve("GET", "/_explorer/", None, KEY);
        assert!(!text(&unknown).contains(KEY));
    }

    #[test]
    fn every_file_carries_the_content_security_policy() {
        for path in ["/_explorer/", "/_explorer/api.js", "/_explorer/ui.js"] {
            let response = get(path, "127.0.0.1:1");
            assert_eq!(response.status, 200, "{path}");
            assert_eq!(
                response.header("content-security-policy"),
                Some(CONTENT_SECURITY_POLICY)
            );
            assert_eq!(response.header("x-content-type-options"), Some("nosniff"));
        }
        assert_eq!(
            get("/_explorer/api.js", "127.0.0.1:1").header("content-type"),
            Some("text/javascript; charset=utf-8")
        );
    }

    #[test]
    fn paths_outside_the_folder_and_other_methods_are_refused() {
        for path in [
            "/_explorer/../Cargo.toml",
            "/_explorer/..%2fCargo.toml",
            "/_explorer//etc/passwd",
            "/_explorer/.hidden",
            "/_explorer/missing.js",
            "/_explorer/views\\..\\x",
        ] {
            assert_eq!(get(path, "127.0.0.1:1").status, 404, "{path}");
        }
        let post = serve("POST", "/_explorer/", None, KEY);
        assert_eq!(post.status, 405);
        assert_eq!(post.header("allow"), Some("GET, HEAD"));
        let head = serve(
            "HEAD",
            "/_explorer/",
            Some("127.0.0.1:1".parse().unwrap()),
            KEY,
        );
        assert_eq!((head.status, head.body.len()), (200, 0));
        let bare = get("/_explorer", "127.0.0.1:1");
        assert_eq!(
            (bare.status, bare.header("location")),
            (301, Some("/_explorer/"))
        );
        assert!(is_explorer_path("/_explorer/x") && !is_explorer_path("/_explorerx"));
    }
}
