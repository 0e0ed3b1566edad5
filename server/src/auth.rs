//! Master-key authentication, as Cosmos DB's gateway does it.
//!
//! A client signs every request with HMAC-SHA256 under the account key:
//!
//! ```text
//!   sig = base64(HMAC_SHA256(base64decode(key),
//!         lower(verb) \n lower(resourceType) \n resourceLink \n lower(x-ms-date) \n lower(date) \n))
//!   authorization: urlencode("type=master&ver=1.0&sig=" + sig)
//! ```
//!
//! The resource type and link come from the path: a feed (`/dbs/d/colls`,
//! odd segment count) is signed as its last segment under the parent's link;
//! a resource (`/dbs/d`, even count) as its second-to-last segment under its
//! own link; a rid-based path (`dbs/{dbRid}/colls/{collRid}/docs/{docRid}`)
//! under only its last rid, lower-cased. The server recomputes the signature from what it received and
//! compares in constant time; a date more than 15 minutes from the server's
//! clock is refused too, so a captured request cannot be replayed later.
//!
//! RESOURCE TOKENS
//! ===============
//!
//! A permission's `_token` lets a client without the key act within one
//! container or document. The server mints it and is the only one who can
//! check it: it is an HMAC under a key derived from the account key over
//! everything the token grants, so changing any byte of it, or of what it
//! claims, makes it invalid.
//!
//! ```text
//!   type=resource&ver=1.0&sig=<b64url(dbRid;userRid;permRid;expiry)>.<b64url(mac)>
//!   mac = HMAC_SHA256(HMAC_SHA256(key, "partita resource tokens v1"),
//!         "resource\n" dbRid \n userRid \n permRid \n resource \n mode \n
//!         resourcePartitionKey \n expiry \n nonce)
//! ```
//!
//! The token carries only the rids and the expiry; the gateway looks the
//! permission up by its rids and recomputes the MAC from what the permission
//! grants now, so a token dies with its permission or user, and with a
//! replace that changes its mode, resource or partition key. What the
//! token then allows is the gateway's business (`gateway/access.rs`).

use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::{
    GeneralPurpose, GeneralPurposeConfig, STANDARD, URL_SAFE_NO_PAD,
};
use hmac::{Hmac, Mac};
use hyper::HeaderMap;
use sha2::Sha256;

use super::wire::{WireError, header};

/// The Cosmos DB emulator's well-known key, the default of `partita serve`
/// (every SDK's emulator samples use it).
pub const EMULATOR_KEY: &str =
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==";

/// How far a request's date may be from the server's clock.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(15 * 60);

/// An account key (the base64 text clients are given, decoded), kept as
/// the HMAC state after absorbing the key: every request's signature starts
/// from a copy of it instead of hashing the key's pads again.
#[derive(Clone)]
pub struct MasterKey {
    requests: Hmac<Sha256>,
    /// The key resource tokens are signed with, derived from the account
    /// key, so no token MAC is ever a request signature or the reverse.
    tokens: Hmac<Sha256>,
    /// The base64 text, for the Data Explorer page served to a loopback
    /// client (`explorer.rs`); nothing else reads it.
    text: std::sync::Arc<str>,
}

/// What a resource token names: a permission, by the rids of its
/// database, user and itself, and the instant (seconds since the Unix
/// epoch) it expires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TokenClaims {
    pub(crate) db_rid: String,
    pub(crate) user_rid: String,
    pub(crate) perm_rid: String,
    pub(crate) expiry: u64,
}

/// What a permission grants, as a token binds it.
#[derive(Clone, Debug)]
pub(crate) struct TokenGrant<'a> {
    pub(crate) resource: &'a str,
    pub(crate) mode: &'a str,
    /// The `resourcePartitionKey` as JSON text, empty for none.
    pub(crate) partition_key: String,
    pub(crate) nonce: &'a str,
}

/// The credential a request's `authorization` header holds.
#[derive(Debug)]
pub(crate) enum Credential {
    /// A master-key signature (decoded).
    Master(Vec<u8>),
    /// A resource token: what it claims and its MAC (decoded).
    Resource(TokenClaims, Vec<u8>),
    /// An AAD token of the form the emulator accepts (`type=aad`): a JWT
    /// whose signature segment is the account key's base64 text, so it
    /// proves knowledge of the key as a master-key signature does, with
    /// the lifetime its claims give (`nbf`, `exp`, seconds).
    Aad {
        /// The key it carries (decoded).
        key: Vec<u8>,
        not_before: Option<u64>,
        expires: Option<u64>,
    },
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(..)")
    }
}

/// The key given is not base64.
#[derive(Debug, thiserror::Error)]
#[error("the account key must be base64 text (such as the emulator's key): {0}")]
pub struct BadKey(#[from] base64::DecodeError);

impl MasterKey {
    /// Decodes a key given as base64 text.
    ///
    /// # Errors
    /// [`BadKey`] when it is not base64.
    pub fn from_base64(text: &str) -> Result<MasterKey, BadKey> {
        let key = STANDARD.decode(text.trim())?;
        let requests =
            Hmac::<Sha256>::new_from_slice(&key).expect("HMAC accepts keys of any length");
        let mut derive = requests.clone();
        derive.update(b"partita resource tokens v1");
        let tokens = Hmac::<Sha256>::new_from_slice(&derive.finalize().into_bytes())
            .expect("HMAC accepts keys of any length");
        Ok(MasterKey {
            requests,
            tokens,
            text: text.trim().into(),
        })
    }

    /// The key as the base64 text it was given as.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Whether `key` is this account key, compared through the HMAC (in
    /// constant time) rather than kept in the clear.
    pub(crate) fn is(&self, key: &[u8]) -> bool {
        const PROBE: &[u8] = b"partita: is this the account key";
        let ours = self
            .requests
            .clone()
            .chain_update(PROBE)
            .finalize()
            .into_bytes();
        Hmac::<Sha256>::new_from_slice(key)
            .expect("HMAC accepts keys of any length")
            .chain_update(PROBE)
            .verify_slice(&ours)
            .is_ok()
    }

    /// The MAC of a resource token (see the module docs).
    fn token_mac(&self, claims: &TokenClaims, grant: &TokenGrant<'_>) -> Hmac<Sha256> {
        let mut mac = self.tokens.clone();
        let expiry = claims.expiry.to_string();
        let fields = [
            claims.db_rid.as_str(),
            &claims.user_rid,
            &claims.perm_rid,
            grant.resource,
            grant.mode,
            &grant.partition_key,
            &expiry,
        ];
        mac.update(b"resource");
        for field in fields {
            mac.update(b"\n");
            // Lengths first, so no two lists of fields read the same.
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field.as_bytes());
        }
        mac.update(b"\n");
        mac.update(grant.nonce.as_bytes());
        mac
    }

    /// A resource token for a permission, as `_token` shows it.
    pub(crate) fn resource_token(&self, claims: &TokenClaims, grant: &TokenGrant<'_>) -> String {
        let payload = format!(
            "{};{};{};{}",
            claims.db_rid, claims.user_rid, claims.perm_rid, claims.expiry
        );
        let mac = self.token_mac(claims, grant).finalize().into_bytes();
        format!(
            "type=resource&ver=1.0&sig={}.{}",
            URL_SAFE_NO_PAD.encode(payload),
            URL_SAFE_NO_PAD.encode(mac)
        )
    }

    /// Whether `mac` is this server's MAC of a token claiming `claims` for
    /// a permission granting `grant` (compared in constant time).
    pub(crate) fn verify_resource_token(
        &self,
        claims: &TokenClaims,
        mac: &[u8],
        grant: &TokenGrant<'_>,
    ) -> bool {
        self.token_mac(claims, grant).verify_slice(mac).is_ok()
    }

    /// The HMAC of a request's string to sign (see the module docs).
    fn mac(
        &self,
        verb: &str,
        resource_type: &str,
        resource_link: &str,
        date: &str,
    ) -> Hmac<Sha256> {
        let mut mac = self.requests.clone();
        update_lowercase(&mut mac, verb);
        mac.update(b"\n");
        update_lowercase(&mut mac, resource_type);
        mac.update(b"\n");
        mac.update(resource_link.as_bytes());
        mac.update(b"\n");
        update_lowercase(&mut mac, date);
        mac.update(b"\n\n");
        mac
    }

    /// The signature of a request, as a client computes it (base64).
    pub fn sign(&self, verb: &str, resource_type: &str, resource_link: &str, date: &str) -> String {
        let mac = self.mac(verb, resource_type, resource_link, date);
        STANDARD.encode(mac.finalize().into_bytes())
    }

    /// The `authorization` header value a client sends (percent-encoded).
    pub fn authorization(
        &self,
        verb: &str,
        resource_type: &str,
        resource_link: &str,
        date: &str,
    ) -> String {
        let token = format!(
            "type=master&ver=1.0&sig={}",
            self.sign(verb, resource_type, resource_link, date)
        );
        percent_encoding::utf8_percent_encode(&token, percent_encoding::NON_ALPHANUMERIC)
            .to_string()
    }
}

/// Feeds `text` lowercased (ASCII) to the HMAC without allocating.
fn update_lowercase(mac: &mut Hmac<Sha256>, text: &str) {
    let mut chunk = [0u8; 64];
    for part in text.as_bytes().chunks(chunk.len()) {
        let lower = &mut chunk[..part.len()];
        lower.copy_from_slice(part);
        lower.make_ascii_lowercase();
        mac.update(lower);
    }
}

/// The resource type and link a client signs for a path's (decoded) segments.
///
/// A rid-based path (see [`is_rid_based`]) is signed under only its last
/// rid, lower-cased: the leaf's for a resource (`docs`, `ugfydaaaaas...`),
/// the parent's for a feed, create or query (`POST dbs/{rid}/colls/{rid}/docs`
/// signs the container's rid), as the Python SDK computes it
/// (`_base.py: GetResourceIdOrFullNameFromLink`).
pub fn resource_of(segments: &[String]) -> (String, String) {
    let (kind, link) = name_resource_of(segments);
    if is_rid_based(segments) {
        let rid = link.rsplit('/').next().unwrap_or_default();
        return (kind, rid.to_ascii_lowercase());
    }
    (kind, link)
}

fn name_resource_of(segments: &[String]) -> (String, String) {
    // `dbs/d/colls/c/operations/partitionkeydelete` is signed as the
    // collection (the SDKs rewrite its resource type to `colls`).
    if let [dbs, _, colls, _, operations, _] = segments
        && dbs == "dbs"
        && colls == "colls"
        && operations == "operations"
    {
        return ("colls".to_owned(), segments[..4].join("/"));
    }
    // An offer is addressed by its resource id, which clients sign
    // lower-cased (the feed `/offers` signs as "" like any root feed).
    if let [offers, rid] = segments
        && offers == "offers"
    {
        return ("offers".to_owned(), rid.to_lowercase());
    }
    match segments.len() {
        0 => (String::new(), String::new()),
        n if n % 2 == 1 => (segments[n - 1].clone(), segments[..n - 1].join("/")),
        n => (segments[n - 2].clone(), segments.join("/")),
    }
}

/// Whether a path addresses its resources by rid (`dbs/{dbRid}/...`) rather
/// than by name, as the Python SDK decides (`_base.py: IsNameBased`): its
/// database segment is 8 characters that decode as base64 (with `-` read as
/// `/`) to exactly 4 bytes.
pub fn is_rid_based(segments: &[String]) -> bool {
    matches!(segments, [dbs, db, ..] if dbs == "dbs" && is_database_rid(db))
}

/// Whether one path segment reads as a database rid (see [`is_rid_based`]).
pub(crate) fn is_database_rid(segment: &str) -> bool {
    // Python's decoder accepts nonzero bits after the last byte.
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    );
    segment.len() == 8
        && LENIENT
            .decode(segment.replace('-', "/"))
            .is_ok_and(|bytes| bytes.len() == 4)
}

/// The credential of a request's `authorization` header (percent-decoded,
/// as the SDKs percent-encode it).
///
/// # Errors
/// 401 naming what was wrong: no header, not UTF-8, a type other than
/// `master` or `resource`, a signature or token that does not decode.
pub(crate) fn credential(headers: &HeaderMap) -> Result<Credential, WireError> {
    let authorization = header(headers, "authorization")?
        .ok_or_else(|| WireError::unauthorized("Required header 'authorization' is missing"))?;
    let decoded = percent_encoding::percent_decode_str(authorization)
        .decode_utf8()
        .map_err(|_| WireError::unauthorized("the authorization header is not UTF-8"))?;
    let (mut kind, mut sig) = (None, None);
    for part in decoded.split('&') {
        match part.split_once('=') {
            Some(("type", v)) => kind = Some(v),
            Some(("sig", v)) => sig = Some(v),
            _ => {}
        }
    }
    match kind {
        Some("master") => sig
            .and_then(|s| STANDARD.decode(s).ok())
            .map(Credential::Master)
            .ok_or_else(|| WireError::unauthorized("the authorization header has no base64 sig")),
        Some("resource") => sig
            .and_then(parse_resource_sig)
            .map(|(claims, mac)| Credential::Resource(claims, mac))
            .ok_or_else(|| {
                WireError::unauthorized(
                    "The input authorization token can't serve the request: the resource token \
                     is not one this server issued (it must be a permission's _token as read, \
                     unchanged)",
                )
            }),
        Some("aad") => sig.and_then(parse_aad_sig).ok_or_else(|| {
            WireError::unauthorized(
                "the AAD token is not one the emulator accepts: a JWT (header.claims.signature, \
                 base64url) whose signature segment is the account key",
            )
        }),
        other => Err(WireError::unauthorized(format!(
            "the authorization header must be a master-key token (type=master), a resource \
             token (type=resource) or an emulator AAD token (type=aad), not {:?}",
            other.unwrap_or("")
        ))),
    }
}

/// The key and lifetime of an emulator AAD token's JWT.
fn parse_aad_sig(jwt: &str) -> Option<Credential> {
    let mut parts = jwt.split('.');
    let (Some(_header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let base64url = |text: &str| URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).ok();
    let claims: serde_json::Value = serde_json::from_slice(&base64url(claims)?).ok()?;
    let key_text = String::from_utf8(base64url(signature)?).ok()?;
    Some(Credential::Aad {
        key: STANDARD.decode(key_text.trim()).ok()?,
        not_before: claims.get("nbf").and_then(serde_json::Value::as_u64),
        expires: claims.get("exp").and_then(serde_json::Value::as_u64),
    })
}

/// The claims and MAC of a resource token's `sig` (see the module docs).
fn parse_resource_sig(sig: &str) -> Option<(TokenClaims, Vec<u8>)> {
    let (payload, mac) = sig.split_once('.')?;
    let payload = String::from_utf8(URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    let mac = URL_SAFE_NO_PAD.decode(mac).ok()?;
    let mut fields = payload.split(';');
    let claims = TokenClaims {
        db_rid: fields.next()?.to_owned(),
        user_rid: fields.next()?.to_owned(),
        perm_rid: fields.next()?.to_owned(),
        expiry: fields.next()?.parse().ok()?,
    };
    fields.next().is_none().then_some((claims, mac))
}

/// Checks a master-key request's signature and date.
///
/// # Errors
/// 401 naming what was wrong: no or unparseable date, a date off by more
/// than [`MAX_CLOCK_SKEW`], a wrong signature.
pub(crate) fn verify(
    key: &MasterKey,
    method: &str,
    segments: &[String],
    headers: &HeaderMap,
    sig: &[u8],
    now: SystemTime,
) -> Result<(), WireError> {
    let date = match header(headers, "x-ms-date")? {
        Some(d) => d,
        None => header(headers, "date")?.ok_or_else(|| {
            WireError::unauthorized("the request has neither an x-ms-date nor a date header")
        })?,
    };
    let sent = httpdate::parse_http_date(date).map_err(|_| {
        WireError::unauthorized(format!(
            "the date {date:?} is not an RFC 1123 date such as \"Sun, 22 Nov 2026 02:43:42 GMT\""
        ))
    })?;
    let skew = now
        .duration_since(sent)
        .or_else(|_| sent.duration_since(now))
        .unwrap_or_default();
    if skew > MAX_CLOCK_SKEW {
        return Err(WireError::unauthorized(format!(
            "the request date {date:?} is {}s away from the server's clock (at most {}s allowed)",
            skew.as_secs(),
            MAX_CLOCK_SKEW.as_secs()
        )));
    }
    let (resource_type, resource_link) = resource_of(segments);
    key.mac(method, &resource_type, &resource_link, date)
        .verify_slice(sig)
        .map_err(|_| {
            WireError::unauthorized(format!(
                "The input authorization token can't serve the request. The wrong key is being \
             used or the expected payload is not built as per the protocol. The server signed: \
             '{}\\n{}\\n{}\\n{}\\n\\n'",
                method.to_ascii_lowercase(),
                resource_type.to_ascii_lowercase(),
                resource_link,
                date.to_ascii_lowercase()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks a master-key request (see [`verify`]); a resource or AAD
    /// token is 401 here.
    fn verify_master(
        key: &MasterKey,
        method: &str,
        segments: &[String],
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<(), WireError> {
        match credential(headers)? {
            Credential::Master(sig) => verify(key, method, segments, headers, &sig, now),
            Credential::Resource(..) | Credential::Aad { .. } => {
                Err(WireError::unauthorized("not a master-key request"))
            }
        }
    }

    fn segments(path: &str) -> Vec<String> {
        path.split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn resource_type_and_link_follow_the_path_shape() {
        let cases = [
            ("/", "", ""),
            ("/dbs", "dbs", ""),
            ("/dbs/d", "dbs", "dbs/d"),
            ("/dbs/d/colls", "colls", "dbs/d"),
            ("/dbs/d/colls/c/docs/", "docs", "dbs/d/colls/c"),
            ("/dbs/d/colls/c/docs/a", "docs", "dbs/d/colls/c/docs/a"),
            (
                "/dbs/d/colls/c/sprocs/sp",
                "sprocs",
                "dbs/d/colls/c/sprocs/sp",
            ),
            (
                "/dbs/d/colls/c/operations/partitionkeydelete",
                "colls",
                "dbs/d/colls/c",
            ),
            // Rid-based: the last rid, lower-cased.
            ("/dbs/AAAAAQ==", "dbs", "aaaaaq=="),
            ("/dbs/AAAAAQ==/colls", "colls", "aaaaaq=="),
            ("/dbs/AAAAAQ==/colls/AAAAAQAAAAI=", "colls", "aaaaaqaaaai="),
            (
                "/dbs/AAAAAQ==/colls/AAAAAQAAAAI=/docs/",
                "docs",
                "aaaaaqaaaai=",
            ),
            (
                "/dbs/UGFydA==/colls/UGFydAAAAAs=/docs/UGFydAAAAAsAAAAAAAAAAw==/",
                "docs",
                "ugfydaaaaasaaaaaaaaaaw==",
            ),
            (
                "/dbs/AAAAAQ==/colls/AAAAAQAAAAI=/sprocs/AAAAAQAAAAIBAAAAAAAAgA==",
                "sprocs",
                "aaaaaqaaaaibaaaaaaaaga==",
            ),
            (
                "/dbs/AAAAAQ==/colls/AAAAAQAAAAI=/operations/partitionkeydelete",
                "colls",
                "aaaaaqaaaai=",
            ),
            // Names of 8 characters that are not 4 bytes of base64 stay names.
            ("/dbs/partitas/colls/c", "colls", "dbs/partitas/colls/c"),
            ("/dbs/AAAAAA%3D/colls", "colls", "dbs/AAAAAA%3D"),
            ("/offers", "offers", ""),
            ("/offers/AbC+/", "offers", "abc+"),
        ];
        for (path, kind, link) in cases {
            assert_eq!(
                resource_of(&segments(path)),
                (kind.into(), link.into()),
                "{path}"
            );
        }
    }

    fn signed(key: &MasterKey, verb: &str, path: &str, date: &str) -> HeaderMap {
        let (kind, link) = resource_of(&segments(path));
        let mut headers = HeaderMap::new();
        headers.insert(
            "authorization",
            key.authorization(verb, &kind, &link, date).parse().unwrap(),
        );
        headers.insert("x-ms-date", date.parse().unwrap());
        headers
    }

    #[test]
    fn databases_rids_are_8_characters_of_4_bytes() {
        for rid in ["AAAAAQ==", "UGFydA==", "ab-cdA==", "AAAAAR=="] {
            assert!(is_database_rid(rid), "{rid}");
        }
        for name in [
            "partitas",
            "AAAAAQ=",
            "AAAAAAA=",
            "AAAAAQ===",
            "blog",
            "AAAA AA=",
        ] {
            assert!(!is_database_rid(name), "{name}");
        }
    }

    #[test]
    fn a_correct_signature_passes_and_anything_else_is_401() {
        let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
        let now = SystemTime::now();
        let date = httpdate::fmt_http_date(now);
        let path = "/dbs/d/colls/c/docs/a";
        let headers = signed(&key, "GET", path, &date);
        verify_master(&key, "GET", &segments(path), &headers, now).unwrap();
        // Another verb, path or key fails.
        assert_eq!(
            verify_master(&key, "DELETE", &segments(path), &headers, now)
                .unwrap_err()
                .status,
            401
        );
        let other = segments("/dbs/d/colls/c/docs/b");
        assert_eq!(
            verify_master(&key, "GET", &other, &headers, now)
                .unwrap_err()
                .status,
            401
        );
        let wrong = MasterKey::from_base64("c2VjcmV0").unwrap();
        assert_eq!(
            verify_master(&wrong, "GET", &segments(path), &headers, now)
                .unwrap_err()
                .status,
            401
        );
        // No header at all.
        let err = verify_master(&key, "GET", &segments(path), &HeaderMap::new(), now).unwrap_err();
        assert!(err.message.contains("authorization"), "{}", err.message);
    }

    #[test]
    fn a_stale_or_malformed_date_is_401() {
        let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
        let now = SystemTime::now();
        let old = httpdate::fmt_http_date(now - Duration::from_secs(16 * 60));
        let headers = signed(&key, "GET", "/", &old);
        let err = verify_master(&key, "GET", &[], &headers, now).unwrap_err();
        assert_eq!(err.status, 401);
        assert!(
            err.message.contains("away from the server's clock"),
            "{}",
            err.message
        );
        let headers = signed(&key, "GET", "/", "yesterday");
        let err = verify_master(&key, "GET", &[], &headers, now).unwrap_err();
        assert!(err.message.contains("RFC 1123"), "{}", err.message);
    }

    #[test]
    fn the_signature_matches_the_reference_algorithm() {
        // Computed independently with Python's hmac/hashlib over the same
        // string to sign ("get\ndbs\ndbs/partitadb\nsun, 22 nov 2026 02:43:42 gmt\n\n").
        let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
        let sig = key.sign(
            "GET",
            "dbs",
            "dbs/partitadb",
            "Sun, 22 Nov 2026 02:43:42 GMT",
        );
        assert_eq!(sig, EXPECTED_SIG);
    }

    #[test]
    fn long_mixed_case_fields_are_lowercased_across_chunks() {
        // Fields longer than the 64-byte lowercasing chunk sign like the
        // whole string lowercased at once.
        let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
        let kind = format!("Docs{}", "AbC".repeat(50));
        let date = format!("Sun, 22 Nov 2026 02:43:42 GMT{}", "XyZ".repeat(40));
        let link = "dbs/D/colls/C/docs/MixedCase";
        let whole = format!(
            "post\n{}\n{link}\n{}\n\n",
            kind.to_ascii_lowercase(),
            date.to_ascii_lowercase()
        );
        let mut reference =
            Hmac::<Sha256>::new_from_slice(&STANDARD.decode(EMULATOR_KEY).unwrap()).unwrap();
        reference.update(whole.as_bytes());
        assert_eq!(
            key.sign("POST", &kind, link, &date),
            STANDARD.encode(reference.finalize().into_bytes())
        );
    }

    #[test]
    fn resource_tokens_verify_only_under_their_key_and_grant() {
        let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
        let claims = TokenClaims {
            db_rid: "AAAAAQ==".into(),
            user_rid: "AAAAAYAAAAI=".into(),
            perm_rid: "AAAAAYAAAAIDAAAAAAAAAA==".into(),
            expiry: 1_800_000_000,
        };
        let grant = TokenGrant {
            resource: "dbs/d/colls/c",
            mode: "All",
            partition_key: "[\"a\"]".into(),
            nonce: "3-1",
        };
        let token = key.resource_token(&claims, &grant);
        let mut headers = HeaderMap::new();
        let encoded =
            percent_encoding::utf8_percent_encode(&token, percent_encoding::NON_ALPHANUMERIC);
        headers.insert("authorization", encoded.to_string().parse().unwrap());
        let Credential::Resource(parsed, mac) = credential(&headers).unwrap() else {
            panic!("{token} is not read as a resource token");
        };
        assert_eq!(parsed, claims);
        assert!(key.verify_resource_token(&parsed, &mac, &grant));
        // Another key, or any field of the grant changed, fails.
        let other = MasterKey::from_base64("c2VjcmV0").unwrap();
        assert!(!other.verify_resource_token(&parsed, &mac, &grant));
        let changed = [
            TokenGrant {
                resource: "dbs/d/colls/c2",
                ..grant.clone()
            },
            TokenGrant {
                mode: "Read",
                ..grant.clone()
            },
            TokenGrant {
                partition_key: "[\"b\"]".into(),
                ..grant.clone()
            },
            TokenGrant {
                partition_key: String::new(),
                ..grant.clone()
            },
            TokenGrant {
                nonce: "3-2",
                ..grant.clone()
            },
        ];
        for other_grant in &changed {
            assert!(
                !key.verify_resource_token(&parsed, &mac, other_grant),
                "{other_grant:?}"
            );
        }
        let later = TokenClaims {
            expiry: claims.expiry + 1,
            ..claims.clone()
        };
        assert!(!key.verify_resource_token(&later, &mac, &grant));
        // A token's MAC is never a request signature under the same key.
        assert_ne!(
            mac,
            STANDARD
                .decode(key.sign("get", "docs", "dbs/d/colls/c", "x"))
                .unwrap()
        );
    }

    const EXPECTED_SIG: &str = "I4Lb2C1g0400W52A9Ivsfw2jxpYLBGvhPvU2bUDgx3o=";
}
