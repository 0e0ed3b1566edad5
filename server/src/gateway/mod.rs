//! The Cosmos DB gateway protocol as one synchronous function:
//! [`Gateway::handle`] takes a request whose body has been read and returns
//! the response. No sockets and no async here: the transport (`http.rs`)
//! calls it on a blocking thread, tests and the fuzz test call it directly.
//!
//! ```text
//!   handle ─► decode path ─► verify signature/date (401) ─► rids to names ─► route by (method, segments)
//!     /                               account
//!     /dbs[/{db}]                      registry (databases)
//!     /dbs/{db}/colls[/{c}]            registry (containers)
//!     /dbs/{db}/colls/{c}/docs[/{id}]  engine: CRUD, queries, read feed, change feed
//!     /dbs/{db}/colls/{c}/pkranges     its physical partitions, "" .. "FF" (304 on a matching If-None-Match)
//!     /dbs/{db}/colls/{c}/conflicts    always empty: one region never has write conflicts
//!     /dbs/{db}/colls/{c}/{sprocs,triggers,udfs}[/{id}]   scripts; POST sprocs/{id} executes
//!     /dbs/{db}/colls/{c}/operations/partitionkeydelete   POST: delete one logical partition
//!     /offers[/{rid}]                  registry (throughput: stored and echoed, not enforced)
//!     /dbs/{db}/users[/{u}[/permissions[/{p}]]]   registry (users, permissions, resource tokens)
//!   ─► common headers: activity id, request charge, session token, version
//! ```
//!
//! A request signed with the master key may do anything; one carrying a
//! resource token only what its permission grants (`access.rs`), checked
//! once its rids are resolved to names.
//!
//! [`Gateway::authorize`] is the same path decoding and signature check on
//! a request's head alone: the transport calls it before reading a body,
//! so an unsigned request never gets one buffered.
//!
//! A path whose database segment is a rid (`dbs/AAAAAQ==/colls/
//! AAAAAQAAAAI=/docs/{docRid}`, the documents' `_self` links) is signed
//! under its last rid, then its rids are replaced by the names they stand
//! for, so every route is reachable both ways.
//!
//! A container has as many physical partitions (partition-key ranges) as
//! its throughput gives it at creation, as on the service. A query across
//! several ranges that orders, aggregates, deduplicates or cuts its rows is
//! the service's 400/1004, and the SDK's own pipeline runs the plan
//! (`queries.rs`) range by range; any other query across ranges pages
//! through them in order. Request charges come from `crate::charge`, so
//! they are the same as the library's.
//!
//! One file per resource, each adding its handlers to [`Gateway`]:
//! `account.rs`, `databases.rs`, `containers.rs`, `documents.rs` (point
//! reads and writes), `queries.rs` (queries, plans, the read feed),
//! `feeds.rs` (the change feed and `/pkranges`), `scripts.rs` and
//! `offers.rs` (throughput of databases and containers), `users.rs`
//! (users and permissions) and `access.rs` (who may do what); what
//! they all read from a request is in `requests.rs`, what they write into
//! a response in `responses.rs`.

mod access;
mod account;
mod batch;
mod containers;
mod databases;
mod documents;
mod feeds;
mod offers;
mod queries;
mod requests;
mod responses;
mod scripts;
mod users;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use hyper::HeaderMap;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

use super::auth::{self, MasterKey};
use super::registry::{CollEntry, Registry};
use super::wire::{WireError, WireRequest, WireResponse, flag, header};
use access::Caller;
use feeds::{conflicts, pkranges};
use partita::charge::MIN_CHARGE;
use partita::{Database, Limits};
use queries::query_plan;
use requests::is_query;
use scripts::{script_kind, script_rid};

/// The protocol version the gateway speaks.
const API_VERSION: &str = "2020-07-15";
/// What [`Gateway::call_deadline`] adds to the scripts' wall clock.
pub const CALL_MARGIN: Duration = Duration::from_secs(5);
/// How long the transport lets a fuzz run (`x-partita-fuzz`) take before it
/// answers 408: its calls are bounded (at most 2,000), its time only by
/// this; one run at a time.
pub const FUZZ_DEADLINE: Duration = Duration::from_secs(300);
/// Characters `encodeURIComponent` leaves alone (the script-log header).
const URI_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// The gateway's limits.
#[derive(Clone, Copy, Debug)]
pub struct GatewayLimits {
    /// The largest response body a feed or query page may have (Cosmos DB:
    /// 4 MB); pages are cut to fit, but one item always goes out.
    pub max_response_bytes: usize,
}

impl Default for GatewayLimits {
    fn default() -> GatewayLimits {
        GatewayLimits {
            max_response_bytes: 4 * 1024 * 1024,
        }
    }
}

/// The protocol over one database. Share it between threads (`Arc`).
pub struct Gateway {
    pub(crate) db: Database,
    registry: Registry,
    key: MasterKey,
    limits: GatewayLimits,
    /// The global LSN in session tokens (`0:-1#n`): counts writes.
    session: AtomicU64,
    activity: AtomicU64,
    /// The scheme account discovery advertises (`https` behind TLS).
    scheme: &'static str,
    /// The bounds of every procedure, trigger and UDF call.
    script_limits: Limits,
    /// Whether a fuzz run is under way (one at a time).
    fuzzing: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("db", &self.db)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway over `db`, loading (or starting) its database registry.
    ///
    /// # Errors
    /// The engine's error when the registry cannot be read or created.
    pub fn new(
        db: Database,
        key: MasterKey,
        limits: GatewayLimits,
    ) -> Result<Gateway, engine::Error> {
        let registry = Registry::load(db.raw())?;
        Ok(Gateway {
            db,
            registry,
            key,
            limits,
            session: AtomicU64::new(1),
            activity: AtomicU64::new(1),
            scheme: "http",
            script_limits: Limits::default(),
            fuzzing: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Runs every procedure, trigger and UDF with these bounds (the
    /// runtime's defaults unless set; [`Limits::workers`] runs JavaScript in
    /// worker processes, as `partita serve --isolate-scripts` does).
    #[must_use]
    pub fn with_script_limits(mut self, limits: Limits) -> Gateway {
        self.script_limits = limits;
        self
    }

    /// Makes account discovery advertise `https://` endpoints (the
    /// transport serves TLS), or `http://` (the default).
    #[must_use]
    pub fn with_https(mut self, https: bool) -> Gateway {
        self.scheme = if https { "https" } else { "http" };
        self
    }

    /// Answers one request; `now` is the clock the request date is checked
    /// against. Never panics on any input.
    pub fn handle(&self, req: &WireRequest, now: SystemTime) -> WireResponse {
        if crate::explorer::is_explorer_path(&req.path) {
            return crate::explorer::serve(
                &req.method,
                &req.path,
                req.remote_addr,
                self.key_text(),
            );
        }
        let routed = self.route(req, now);
        let response = self.finish(&req.headers, routed);
        // Which region answered a read: the SDKs' multi-region tests read
        // it from every response.
        match (req.method.as_str(), account::advertised_host(req)) {
            ("GET", Ok(host)) if response.status < 300 => {
                let location = format!("{}://{host}{}", self.scheme, req.path);
                response.with("content-location", location)
            }
            _ => response,
        }
    }

    /// Checks a request's path and signature from its head alone (the
    /// master-key signature covers the verb, the path and the date, not the
    /// body), so the transport can refuse a request before reading its
    /// body. `Err` is the response [`Gateway::handle`] would give the whole
    /// request: 400 for a malformed path, 401 for a missing or wrong
    /// signature or date.
    ///
    /// # Errors
    /// The 400 or 401 response.
    pub fn authorize(
        &self,
        method: &str,
        path: &str,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<(), WireResponse> {
        decode_path(path)
            .and_then(|segments| self.authenticate(method, &segments, headers, now))
            .map(|_| ())
            .map_err(|err| self.finish(headers, Err(err)))
    }

    /// Whether `req` asks for a fuzz run (`x-partita-fuzz: true` on a
    /// procedure's execution), which gets [`FUZZ_DEADLINE`] instead of
    /// [`Gateway::call_deadline`].
    pub fn is_fuzz_run(req: &WireRequest) -> bool {
        req.method == "POST" && matches!(flag(&req.headers, "x-partita-fuzz"), Ok(true))
    }

    /// The account key's base64 text, for the Data Explorer.
    pub(crate) fn key_text(&self) -> &str {
        self.key.text()
    }

    /// How long the transport lets one request's handler run before it
    /// answers 408 in its place: the scripts' wall clock plus
    /// [`CALL_MARGIN`] for the engine work around a script and the wait for
    /// a handler thread. A handler past it is stuck (a script in process
    /// can run a native loop the wall clock does not reach).
    pub fn call_deadline(&self) -> Duration {
        self.script_limits
            .wall_time
            .max(self.script_limits.accept_wall_time)
            + CALL_MARGIN
    }

    /// The response for a routed request: its error rendered, and the
    /// headers every response carries.
    fn finish(&self, headers: &HeaderMap, routed: Result<WireResponse, WireError>) -> WireResponse {
        let mut response = match routed {
            Ok(response) => response,
            Err(err) => {
                let mut response = err.response();
                if let Some(logs) = &err.logs
                    && flag(headers, "x-ms-documentdb-script-enable-logging").unwrap_or(false)
                {
                    response = response.with(
                        "x-ms-documentdb-script-log-results",
                        utf8_percent_encode(logs, URI_COMPONENT).to_string(),
                    );
                }
                response
            }
        };
        let activity = match header(headers, "x-ms-activity-id") {
            Ok(Some(id)) if !id.is_empty() => id.to_owned(),
            _ => format!(
                "00000000-0000-4000-8000-{:012x}",
                self.activity.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff_ffff
            ),
        };
        if response.header("x-ms-request-charge").is_none() {
            let charge = if response.status < 400 {
                MIN_CHARGE
            } else {
                0.0
            };
            response = response.with("x-ms-request-charge", format!("{charge:.2}"));
        }
        let lsn = self.session.load(Ordering::Relaxed);
        if response.header("x-ms-session-token").is_none() && response.status != 401 {
            response = response.with("x-ms-session-token", format!("0:-1#{lsn}"));
        }
        // The SDKs read `lsn` (a batch is one step after the read before it).
        if response.status != 401 {
            response = response.with("lsn", lsn.to_string());
        }
        response
            .with("content-type", "application/json")
            .with("x-ms-activity-id", activity)
            .with("x-ms-version", API_VERSION)
    }

    fn route(&self, req: &WireRequest, now: SystemTime) -> Result<WireResponse, WireError> {
        let mut segments = decode_path(&req.path)?;
        let caller = self.authenticate(&req.method, &segments, &req.headers, now)?;
        if auth::is_rid_based(&segments) {
            self.resolve_rids(&mut segments, req)?;
        }
        let s: Vec<&str> = segments.iter().map(String::as_str).collect();
        if let Caller::Token(perm) = &caller {
            self.check_scope(perm, &s, req)?;
        }
        let method = req.method.as_str();
        match s.as_slice() {
            [] => match method {
                "GET" => self.account(req),
                _ => Err(not_allowed(method, &req.path)),
            },
            ["dbs"] => match method {
                "GET" => self.list_databases(None),
                "POST" if is_query(req)? => self.list_databases(Some(req)),
                "POST" => self.create_database(req),
                _ => Err(not_allowed(method, &req.path)),
            },
            ["dbs", db] => match method {
                "GET" => self.read_database(db),
                "DELETE" => self.delete_database(db),
                _ => Err(not_allowed(method, &req.path)),
            },
            ["dbs", db, "colls"] => match method {
                "GET" => self.list_collections(db, None),
                "POST" if is_query(req)? => self.list_collections(db, Some(req)),
                "POST" => self.create_collection(db, req),
                _ => Err(not_allowed(method, &req.path)),
            },
            ["dbs", db, "colls", c] => match method {
                "GET" => self.read_collection(db, c, req),
                "PUT" => self.replace_collection(db, c, req),
                "DELETE" => self.delete_collection(db, c),
                _ => Err(not_allowed(method, &req.path)),
            },
            ["dbs", db, "colls", c, rest @ ..] => {
                let coll = self.registry.collection(db, c)?;
                let response = self.collection_route(method, &coll, rest, req)?;
                Ok(with_owner_path(response, method, rest, db, c))
            }
            ["dbs", db, "users"] => match method {
                "GET" => self.list_users(db, None),
                "POST" if is_query(req)? => self.list_users(db, Some(req)),
                "POST" => self.create_user(db, req),
                _ => Err(not_allowed(method, &req.path)),
            },
            ["dbs", db, "users", user] => match method {
                "GET" => self.read_user(db, user),
                "PUT" => self.replace_user(db, user, req),
                "DELETE" => self.delete_user(db, user),
                _ => Err(not_allowed(method, &req.path)),
            },
            ["dbs", db, "users", user, "permissions"] => match method {
                "GET" => self.list_permissions(db, user, None, req, now),
                "POST" if is_query(req)? => self.list_permissions(db, user, Some(req), req, now),
                "POST" => self.create_permission(db, user, req, now),
                _ => Err(not_allowed(method, &req.path)),
            },
            ["dbs", db, "users", user, "permissions", perm] => match method {
                "GET" => self.read_permission(db, user, perm, req, now),
                "PUT" => self.replace_permission(db, user, perm, req, now),
                "DELETE" => self.delete_permission(db, user, perm),
                _ => Err(not_allowed(method, &req.path)),
            },
            ["offers"] => match method {
                "GET" => self.list_offers(None),
                "POST" if is_query(req)? => self.list_offers(Some(req)),
                _ => Err(not_allowed(method, &req.path)),
            },
            ["offers", rid] => match method {
                "GET" => self.read_offer(rid),
                "PUT" => self.replace_offer(rid, req),
                _ => Err(not_allowed(method, &req.path)),
            },
            _ => Err(WireError::not_found(format!(
                "Partita serves no resource at {:?} (supported: databases, containers, \
                 documents, pkranges, sprocs, triggers, udfs, offers, users, permissions)",
                req.path
            ))),
        }
    }

    fn collection_route(
        &self,
        method: &str,
        coll: &CollEntry,
        rest: &[&str],
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let response = self.collection_resource(method, coll, rest, req)?;
        Ok(self.range_session_token(coll, req, response))
    }

    /// Names the physical partition a request was served by, in the
    /// session token and in `x-ms-documentdb-partitionkeyrangeid`, as the
    /// service does: the range its partition key hashes to or its range
    /// header names; for a request across ranges every range in the token
    /// (the SDKs keep one token per range, and refresh their routing map
    /// when a response names a range they do not know).
    fn range_session_token(
        &self,
        coll: &CollEntry,
        req: &WireRequest,
        mut response: WireResponse,
    ) -> WireResponse {
        if response.status == 401 {
            return response;
        }
        // One range serves everything: no header or key to look at.
        if coll.ranges.len() == 1 {
            return response.with("x-ms-documentdb-partitionkeyrangeid", "0");
        }
        let named = header(&req.headers, "x-ms-documentdb-partitionkeyrangeid")
            .ok()
            .flatten()
            .and_then(|id| queries::range_index(coll, id));
        let ranges: Vec<usize> = match (named, self.partition_key(coll, req)) {
            (Some(range), _) => vec![range],
            (_, Ok(Some(key)))
                if key.components().len() == coll.container.partition_key_path().levels() =>
            {
                vec![coll.range_of(&key)]
            }
            _ => (0..coll.ranges.len()).collect(),
        };
        if let [range] = ranges.as_slice() {
            response = response.with("x-ms-documentdb-partitionkeyrangeid", range.to_string());
        }
        let token = match response.header("x-ms-session-token") {
            Some(token) => token.strip_prefix("0:").unwrap_or(token).to_owned(),
            None => format!("-1#{}", self.session.load(Ordering::Relaxed)),
        };
        let compound: Vec<String> = ranges.iter().map(|r| format!("{r}:{token}")).collect();
        response.with_replaced("x-ms-session-token", compound.join(","))
    }

    fn collection_resource(
        &self,
        method: &str,
        coll: &CollEntry,
        rest: &[&str],
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        match (method, rest) {
            ("GET", ["docs"]) => match header(&req.headers, "a-im")? {
                Some(_) => self.change_feed(coll, req),
                None => self.read_feed(coll, req),
            },
            ("POST", ["docs"]) => {
                if flag(&req.headers, "x-ms-cosmos-is-batch-request")? {
                    self.batch(coll, req)
                } else if flag(&req.headers, "x-ms-cosmos-is-query-plan-request")? {
                    query_plan(req)
                } else if is_query(req)? {
                    self.query(coll, req)
                } else {
                    self.write(coll, None, req)
                }
            }
            ("GET", ["docs", id]) => self.read_item(coll, id, req),
            ("PUT", ["docs", id]) => self.write(coll, Some(id), req),
            ("DELETE", ["docs", id]) => self.delete_item(coll, id, req),
            ("PATCH", ["docs", id]) => self.patch_item(coll, id, req),
            ("GET", ["pkranges"]) => pkranges(coll, req),
            ("GET", [kind]) if script_kind(kind).is_some() => self.list_scripts(coll, kind, None),
            ("POST", [kind]) if script_kind(kind).is_some() => {
                if is_query(req)? {
                    self.list_scripts(coll, kind, Some(req))
                } else {
                    self.write_script(coll, kind, None, req)
                }
            }
            ("GET", [kind, id]) if script_kind(kind).is_some() => self.read_script(coll, kind, id),
            ("PUT", [kind, id]) if script_kind(kind).is_some() => {
                self.write_script(coll, kind, Some(id), req)
            }
            ("DELETE", [kind, id]) if script_kind(kind).is_some() => {
                self.delete_script(coll, kind, id)
            }
            ("POST", ["sprocs", id]) => self.execute(coll, id, req),
            ("POST", ["operations", "partitionkeydelete"]) => self.delete_partition(coll, req),
            ("GET", ["conflicts"]) => conflicts(coll, None),
            ("POST", ["conflicts"]) if is_query(req)? => {
                self.cross_partition_allowed(coll, req)?;
                conflicts(coll, Some(req))
            }
            ("GET" | "DELETE", ["conflicts", id]) => Err(WireError::not_found(format!(
                "conflict {id:?} not found: a single-region server records no conflicts"
            ))),
            (
                _,
                [
                    "docs" | "pkranges" | "sprocs" | "triggers" | "udfs" | "conflicts",
                    ..,
                ],
            ) => Err(not_allowed(method, &req.path)),
            _ => Err(WireError::not_found(format!(
                "Partita serves no resource at {:?} (supported under a container: docs, \
                 pkranges, sprocs, triggers, udfs, conflicts)",
                req.path
            ))),
        }
    }
}

impl Gateway {
    /// Replaces the rids of a rid-based path (`dbs/{dbRid}/colls/{collRid}/
    /// docs/{docRid}`) by the names they stand for, so the request is then
    /// served as by name. Rids compare exactly (only the signature uses
    /// them lower-cased); a document is looked up in the logical partition
    /// the request's header names. Segments past the resource's own (a
    /// procedure's execution, `pkranges`) are kept.
    ///
    /// # Errors
    /// 404 naming the rid nothing has; 400 for a document rid without a
    /// partition-key header.
    fn resolve_rids(&self, segments: &mut [String], req: &WireRequest) -> Result<(), WireError> {
        if matches!(segments.get(2).map(String::as_str), Some("users")) && segments.len() >= 4 {
            return self.resolve_user_rids(segments);
        }
        if !matches!(segments.get(2).map(String::as_str), Some("colls")) || segments.len() < 4 {
            segments[1] = self.registry.database_by_rid(&segments[1])?.name;
            return Ok(());
        }
        let (db_name, coll) = self
            .registry
            .collection_by_rid(&segments[1], &segments[3])?;
        segments[1] = db_name;
        segments[3] = coll.name.clone();
        let [_, _, _, _, kind, rid, ..] = segments else {
            return Ok(());
        };
        if kind == "docs" {
            let key = self.partition_key(&coll, req)?.ok_or_else(|| {
                WireError::bad_request(format!(
                    "a document addressed by its _rid {rid:?} needs the \
                     x-ms-documentdb-partitionkey header"
                ))
            })?;
            *rid = coll.container.raw().id_of_rid(key, rid)?.ok_or_else(|| {
                WireError::not_found(format!(
                    "no document has the _rid {rid:?} in that logical partition of container {:?}",
                    coll.name
                ))
            })?;
        } else if let Some(script_kind) = script_kind(kind) {
            *rid = coll
                .container
                .list_scripts(script_kind)
                .iter()
                .find(|script| script_rid(&coll, script) == *rid)
                .map(|script| script.id.clone())
                .ok_or_else(|| {
                    WireError::not_found(format!(
                        "no {kind} has the _rid {rid:?} in container {:?}",
                        coll.name
                    ))
                })?;
        }
        Ok(())
    }
}

impl Gateway {
    /// [`Gateway::resolve_rids`] for `dbs/{dbRid}/users/{userRid}[/
    /// permissions/{permRid}]`.
    fn resolve_user_rids(&self, segments: &mut [String]) -> Result<(), WireError> {
        let db = self.registry.database_by_rid(&segments[1])?.name;
        let user = self.registry.user_by_rid(&db, &segments[3])?;
        segments[1] = db;
        segments[3] = user.name.clone();
        if let [_, _, _, _, kind, rid, ..] = segments
            && kind == "permissions"
        {
            *rid = user
                .perms
                .values()
                .find(|perm| perm.rid == *rid)
                .map(|perm| perm.name.clone())
                .ok_or_else(|| {
                    WireError::not_found(format!(
                        "no permission has the _rid {rid:?} for user {:?}",
                        user.name
                    ))
                })?;
        }
        Ok(())
    }
}

/// Percent-decodes a path into its segments, ignoring a trailing `/`.
pub(crate) fn decode_path(path: &str) -> Result<Vec<String>, WireError> {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    trimmed
        .split('/')
        .map(|segment| {
            if segment.is_empty() {
                return Err(WireError::bad_request(format!(
                    "the path {path:?} has an empty segment"
                )));
            }
            percent_decode_str(segment)
                .decode_utf8()
                .map(|s| s.into_owned())
                .map_err(|_| {
                    WireError::bad_request(format!(
                        "the path segment {segment:?} is not percent-encoded UTF-8"
                    ))
                })
        })
        .collect()
}

/// Adds `x-ms-alt-content-path`, the owner's name path (`dbs/d/colls/c`),
/// to a successful response about something inside a container. With it and
/// the body's `_self` the Python SDK tracks session tokens per container
/// (and sends them back, after resolving the key's range on `/pkranges`).
/// Procedure results are left without it: their body is the procedure's
/// value, not a resource, and the SDK would try to read a `_self` from it.
fn with_owner_path(
    response: WireResponse,
    method: &str,
    rest: &[&str],
    db: &str,
    coll: &str,
) -> WireResponse {
    if method == "POST" && matches!(rest, ["sprocs", _]) {
        return response;
    }
    response.with("x-ms-alt-content-path", format!("dbs/{db}/colls/{coll}"))
}

fn not_allowed(method: &str, path: &str) -> WireError {
    WireError::new(405, format!("{method} is not supported on {path:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_decode_and_refuse_empty_segments() {
        assert_eq!(decode_path("/").unwrap(), Vec::<String>::new());
        assert_eq!(
            decode_path("/dbs/my%20db/colls/c/").unwrap(),
            vec!["dbs", "my db", "colls", "c"]
        );
        assert_eq!(decode_path("/dbs//colls").unwrap_err().status, 400);
        assert_eq!(decode_path("/dbs/%ff").unwrap_err().status, 400);
    }

    /// A request head `authorize` refuses gets the response `handle` gives
    /// the whole request; one it lets through, `handle` authenticates too.
    #[test]
    fn authorize_answers_from_the_head_as_handle_does() {
        let key = MasterKey::from_base64(auth::EMULATOR_KEY).unwrap();
        let gw =
            Gateway::new(Database::in_memory(), key.clone(), GatewayLimits::default()).unwrap();
        let now = SystemTime::now();
        let date = httpdate::fmt_http_date(now);
        let head = |path: &str, signed_as: &str, date: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("x-ms-date", date.parse().unwrap());
            headers.insert("x-ms-activity-id", "a".parse().unwrap());
            if !signed_as.is_empty() {
                let segments = decode_path(signed_as).unwrap();
                let (kind, link) = auth::resource_of(&segments);
                let token = key.authorization("GET", &kind, &link, date);
                headers.insert("authorization", token.parse().unwrap());
            }
            WireRequest {
                method: "GET".to_owned(),
                path: path.to_owned(),
                headers,
                body: bytes::Bytes::new(),
                local_addr: None,
                remote_addr: None,
            }
        };
        let stale = httpdate::fmt_http_date(now - Duration::from_secs(3600));
        let refused = [
            head("/dbs", "", &date),
            head("/dbs/other", "/dbs/d", &date),
            head("/dbs/d", "/dbs/d", &stale),
            head("/dbs//x", "", &date),
        ];
        for req in refused {
            let early = gw
                .authorize(&req.method, &req.path, &req.headers, now)
                .unwrap_err();
            let late = gw.handle(&req, now);
            assert!(matches!(early.status, 400 | 401), "{}", early.status);
            assert_eq!(
                (early.status, &early.headers, &early.body),
                (late.status, &late.headers, &late.body)
            );
        }
        let req = head("/dbs", "/dbs", &date);
        gw.authorize(&req.method, &req.path, &req.headers, now)
            .unwrap();
        assert_eq!(gw.handle(&req, now).status, 200);
    }
}
