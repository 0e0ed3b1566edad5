//! Who is calling and what they may do: the master key may do anything; a
//! resource token (a permission's `_token`) only what its permission
//! grants.
//!
//! ```text
//!   authenticate (401 / 403 expired) ─► rids to names ─► check_scope (403) ─► route
//! ```
//!
//! A token is valid while its MAC matches what its permission grants now
//! and it has not expired (`auth.rs`). It then allows, on the container
//! (or the one document) its permission names:
//!
//! | request                                       | container token  | document token |
//! |-----------------------------------------------|------------------|----------------|
//! | `GET /` (account)                             | any valid token  | any            |
//! | read the container and its `pkranges`         | yes              | yes            |
//! | read scripts, read feed, query, change feed, conflicts | yes     | no             |
//! | read the document                             | yes              | its own        |
//! | create, replace, upsert, patch, delete, batch | `All`            | `All`, its own |
//! | execute a procedure, delete a partition       | `All`            | no             |
//! | anything else (databases, containers, offers, users, permissions, script writes) | no | no |
//!
//! With a `resourcePartitionKey` every request on documents must name
//! that logical partition in `x-ms-documentdb-partitionkey` (a bulk
//! request: each operation; a feed may name it by its effective partition
//! key's range instead, `[epk, epk]` or `[epk, epk + 1)`), so a cross-partition
//! query, a read feed over every partition or a procedure in another
//! partition is refused.
//!
//! A name-based link in a permission stands for whatever has that name
//! when the request comes (a container deleted and created again under
//! the same name is covered), as a rid-based one stands for that rid. A
//! document link names a document id, in any logical partition unless
//! the permission has a `resourcePartitionKey`.

use std::sync::Arc;
use std::time::SystemTime;

use hyper::HeaderMap;
use serde_json::Value;

use super::Gateway;
use super::requests::is_query;
use super::scripts::script_kind;
use crate::auth::{self, Credential, TokenClaims, TokenGrant};
use crate::registry::{CollEntry, PermEntry, PermissionMode};
use crate::wire::{WireError, WireRequest, flag, json_body};

/// Who a request comes from.
#[derive(Debug)]
pub(super) enum Caller {
    /// The account key's holder: anything.
    Master,
    /// A resource token's holder: its permission's scope.
    Token(Arc<PermEntry>),
}

/// What a permission's resource link names, rids resolved to names.
struct Target {
    db: String,
    coll: String,
    /// A document's id, or its rid when the link was rid-based.
    doc: Option<DocRef>,
}

enum DocRef {
    Id(String),
    Rid(String),
}

impl Gateway {
    /// Checks a request's credential: a master-key signature (see
    /// `auth::verify`) or a resource token this server issued, whose
    /// permission still grants what the token was minted for.
    ///
    /// # Errors
    /// 401 for a missing, malformed or wrong signature or token, or one
    /// whose permission is gone or changed; 403 for an expired token.
    pub(super) fn authenticate(
        &self,
        method: &str,
        segments: &[String],
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<Caller, WireError> {
        match auth::credential(headers)? {
            Credential::Master(sig) => {
                auth::verify(&self.key, method, segments, headers, &sig, now)
                    .map(|()| Caller::Master)
            }
            Credential::Resource(claims, mac) => {
                self.verify_token(&claims, &mac, now).map(Caller::Token)
            }
            Credential::Aad {
                key,
                not_before,
                expires,
            } => {
                if !self.key.is(&key) {
                    return Err(WireError::unauthorized(
                        "The input authorization token can't serve the request: the AAD token's \
                         signature is not this account's key",
                    ));
                }
                let now_secs = now
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let skew = auth::MAX_CLOCK_SKEW.as_secs();
                if not_before.is_some_and(|nbf| nbf > now_secs + skew)
                    || expires.is_some_and(|exp| exp + skew < now_secs)
                {
                    return Err(WireError::unauthorized(
                        "The input authorization token can't serve the request: the AAD token is \
                         not valid at the current time (its nbf or exp)",
                    ));
                }
                Ok(Caller::Master)
            }
        }
    }

    fn verify_token(
        &self,
        claims: &TokenClaims,
        mac: &[u8],
        now: SystemTime,
    ) -> Result<Arc<PermEntry>, WireError> {
        let invalid = || {
            WireError::unauthorized(
                "The input authorization token can't serve the request: the resource token was \
                 not issued by this server, was changed, or its permission or user has since \
                 been deleted or replaced with another scope; read the permission again for a \
                 new token",
            )
        };
        let (_, _, perm) = self
            .registry
            .permission_by_rids(&claims.db_rid, &claims.user_rid, &claims.perm_rid)
            .ok_or_else(invalid)?;
        if !self.key.verify_resource_token(claims, mac, &grant(&perm)) {
            return Err(invalid());
        }
        let now_secs = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        if now_secs >= claims.expiry {
            return Err(WireError::new(
                403,
                format!(
                    "The authorization token is not valid at the current time. Please create \
                     another token and retry (token expiry time: {}, current server time: {})",
                    httpdate::fmt_http_date(
                        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(claims.expiry)
                    ),
                    httpdate::fmt_http_date(now)
                ),
            ));
        }
        Ok(perm)
    }

    /// Refuses (403) a request a resource token's permission does not
    /// cover; `segments` are by name (rids already resolved). See the
    /// module docs for the table.
    pub(super) fn check_scope(
        &self,
        perm: &PermEntry,
        segments: &[&str],
        req: &WireRequest,
    ) -> Result<(), WireError> {
        let method = req.method.as_str();
        let refuse = |why: &str| {
            WireError::new(
                403,
                format!(
                    "The resource token of permission {:?} ({} on {:?}) does not allow {method} \
                     {:?}: {why}",
                    perm.name,
                    perm.mode.as_str(),
                    perm.resource,
                    req.path
                ),
            )
        };
        let (db, c, rest) = match segments {
            [] => return Ok(()),
            ["dbs", db, "colls", c, rest @ ..] => (*db, *c, rest),
            _ => {
                return Err(refuse(
                    "databases, containers, users, permissions and offers need the master key",
                ));
            }
        };
        let target = self
            .target(&perm.resource)
            .ok_or_else(|| refuse("the permission's resource does not exist"))?;
        if target.db != db || target.coll != c {
            return Err(refuse("the request is outside the permission's resource"));
        }
        let coll = self.registry.collection(db, c)?;
        let write = match (method, rest) {
            // Metadata of the container itself, which the SDKs read to
            // route (its partition-key definition, its ranges).
            ("GET", [] | ["pkranges"]) => return Ok(()),
            ("POST", ["docs"]) if flag(&req.headers, "x-ms-cosmos-is-query-plan-request")? => {
                return Ok(());
            }
            (_, []) => return Err(refuse("only reads of the container itself are allowed")),
            ("GET", [kind] | [kind, _]) if script_kind(kind).is_some() => false,
            ("GET", ["conflicts"] | ["conflicts", _]) => false,
            ("POST", ["conflicts"]) if is_query(req)? => false,
            ("POST", [kind]) if script_kind(kind).is_some() && is_query(req)? => false,
            ("GET", ["docs"]) => false,
            ("POST", ["docs"]) => !is_query(req)?,
            ("GET", ["docs", _]) => false,
            ("PUT" | "DELETE" | "PATCH", ["docs", _]) => true,
            ("POST", ["sprocs", _]) | ("POST", ["operations", "partitionkeydelete"]) => true,
            _ => {
                return Err(refuse(
                    "this needs the master key (creating, replacing and deleting scripts, \
                     deleting conflicts)",
                ));
            }
        };
        if write && perm.mode == PermissionMode::Read {
            return Err(refuse("the permission is Read, and this request writes"));
        }
        match &target.doc {
            None => {}
            Some(doc) => {
                let ["docs", id] = rest else {
                    return Err(refuse(
                        "a document's permission covers only requests on that document",
                    ));
                };
                let same = match doc {
                    DocRef::Id(allowed) => allowed == id,
                    DocRef::Rid(rid) => self
                        .partition_key(&coll, req)?
                        .and_then(|key| coll.container.raw().id_of_rid(key, rid).ok().flatten())
                        .is_some_and(|allowed| allowed == *id),
                };
                if !same {
                    return Err(refuse("the request is on another document"));
                }
            }
        }
        if let Some(allowed) = &perm.partition_key {
            self.check_partition(&coll, allowed, rest, req)
                .map_err(|why| refuse(&why))?;
        }
        Ok(())
    }

    /// Whether every partition key a request on documents names is the
    /// permission's; `Err` says why not.
    fn check_partition(
        &self,
        coll: &CollEntry,
        allowed: &Value,
        rest: &[&str],
        req: &WireRequest,
    ) -> Result<(), String> {
        let allowed_key = self
            .parse_partition_key(coll, &allowed.to_string())
            .map_err(|_| {
                format!(
                    "the permission's resourcePartitionKey {allowed} does not fit the container"
                )
            })?;
        let named = self
            .partition_key(coll, req)
            .map_err(|e| e.message.clone())?;
        let confined = |key: Option<&engine::PartitionKey>| match key {
            Some(key) if *key == allowed_key => Ok(()),
            Some(key) => Err(format!(
                "the permission is confined to the logical partition {allowed}, and the request \
                 names {}",
                key.to_json_array()
            )),
            None => Err(format!(
                "the permission is confined to the logical partition {allowed}, and the request \
                 names none (a cross-partition request)"
            )),
        };
        let bulk = matches!(rest, ["docs"])
            && req.method == "POST"
            && flag(&req.headers, "x-ms-cosmos-is-batch-request").unwrap_or(false)
            && flag(&req.headers, "x-ms-cosmos-batch-atomic").ok() == Some(false)
            && crate::wire::header(&req.headers, "x-ms-cosmos-batch-atomic")
                .ok()
                .flatten()
                .is_some();
        if bulk {
            let body = json_body(&req.body, "batch request").map_err(|e| e.message)?;
            for item in body.as_array().map(Vec::as_slice).unwrap_or_default() {
                let key = self.operation_key(coll, req, item).map_err(|e| e.message)?;
                confined(Some(&key))?;
            }
            return Ok(());
        }
        // The Python SDK scopes a change feed to one partition key by its
        // effective partition key alone: the point range [epk, epk] or,
        // normalized, [epk, epk + 1), which hold no other key's (every
        // full key's EPK has the same length).
        if named.is_none()
            && let Ok(Some((start, end))) = super::queries::epk_range(req)
        {
            let epk = crate::epk::effective_partition_key(&allowed_key);
            if start.eq_ignore_ascii_case(&epk)
                && (end.eq_ignore_ascii_case(&epk)
                    || next_epk(&epk).is_some_and(|next| end.eq_ignore_ascii_case(&next)))
            {
                return Ok(());
            }
        }
        confined(named.as_ref())
    }

    /// What a permission's resource link names, with rids resolved
    /// (`None` when a rid names nothing, or the link is malformed).
    fn target(&self, resource: &str) -> Option<Target> {
        let segments: Vec<String> = resource.split('/').map(str::to_owned).collect();
        let rid_based = auth::is_rid_based(&segments);
        let (db, coll) = if rid_based {
            let (db, coll) = self
                .registry
                .collection_by_rid(&segments[1], segments.get(3)?)
                .ok()?;
            (db, coll.name.clone())
        } else {
            (segments.get(1)?.clone(), segments.get(3)?.clone())
        };
        let doc = match segments.get(5) {
            None => None,
            Some(doc) if rid_based => Some(DocRef::Rid(doc.clone())),
            Some(doc) => Some(DocRef::Id(doc.clone())),
        };
        Some(Target { db, coll, doc })
    }
}

/// The effective partition key right after `epk` (hex, one added to its
/// last byte with carry), as the SDKs normalize an inclusive range's end;
/// `None` past the last one or for text that is not hex.
fn next_epk(epk: &str) -> Option<String> {
    let mut bytes = (0..epk.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(epk.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    for byte in bytes.iter_mut().rev() {
        if *byte < u8::MAX {
            *byte += 1;
            return Some(bytes.iter().map(|b| format!("{b:02X}")).collect());
        }
        *byte = 0;
    }
    None
}

/// What a permission grants, as its tokens bind it.
pub(super) fn grant(perm: &PermEntry) -> TokenGrant<'_> {
    TokenGrant {
        resource: &perm.resource,
        mode: perm.mode.as_str(),
        partition_key: perm
            .partition_key
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_default(),
        nonce: &perm.nonce,
    }
}

#[cfg(test)]
mod tests {
    use super::next_epk;

    #[test]
    fn the_next_epk_carries_into_earlier_bytes() {
        assert_eq!(next_epk("05C1").as_deref(), Some("05C2"));
        assert_eq!(next_epk("05ff").as_deref(), Some("0600"));
        assert_eq!(next_epk("FFFF"), None);
        assert_eq!(next_epk("0G"), None);
        assert_eq!(next_epk("0"), None);
    }
}
