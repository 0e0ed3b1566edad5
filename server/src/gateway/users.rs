//! Users and permissions (`/dbs/{db}/users[/{user}[/permissions[/{perm}]]]`),
//! kept in the registry (`registry/users.rs`), and the resource tokens
//! their permissions hand out.
//!
//! ```text
//!   user:       {"id", "_rid", "_self": "dbs/{dbRid}/users/{userRid}/", "_etag", "_ts",
//!                "_permissions": "permissions/"}
//!   permission: {"id", "permissionMode": "All" | "Read",
//!                "resource": "dbs/d/colls/c" | "dbs/d/colls/c/docs/id",
//!                "resourcePartitionKey"?: [key], "_rid", "_self", "_etag", "_ts",
//!                "_token": "type=resource&ver=1.0&sig=..."}
//! ```
//!
//! Every read or write of a permission (a list or query too) mints a new
//! `_token`, valid for an hour or for `x-ms-documentdb-expiry-seconds`
//! (at most 18000). What a token allows is in `access.rs`.

use std::time::SystemTime;

use engine::PartitionKey;
use serde_json::{Map, Value, json};

use super::Gateway;
use super::access::grant;
use super::queries::metadata_feed;
use super::requests::object_body;
use crate::auth::TokenClaims;
use crate::registry::{PermEntry, PermissionMode, PermissionSpec, UserEntry};
use crate::wire::{WireError, WireRequest, WireResponse, flag, header};

/// How long a token lives unless the request says otherwise.
const DEFAULT_TOKEN_SECONDS: u64 = 3600;
/// The longest a token may live (the service's limit, 5 hours).
const MAX_TOKEN_SECONDS: u64 = 18_000;

impl Gateway {
    /// `GET /dbs/{db}/users` (the feed) and its query.
    pub(super) fn list_users(
        &self,
        db: &str,
        query: Option<&WireRequest>,
    ) -> Result<WireResponse, WireError> {
        let entry = self.registry.database(db)?;
        let items = self
            .registry
            .users(db)?
            .iter()
            .map(|user| user_json(&entry.rid, user))
            .collect();
        metadata_feed(&entry.rid, "Users", items, query)
    }

    /// `POST /dbs/{db}/users`: a create (201, 409 when it exists) or, with
    /// `x-ms-documentdb-is-upsert`, an upsert (200 when it existed).
    pub(super) fn create_user(
        &self,
        db: &str,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let name = body_id(&object_body(req, "user")?, "user")?;
        let upsert = flag(&req.headers, "x-ms-documentdb-is-upsert")?;
        let (status, user) = if upsert && self.registry.user(db, &name).is_ok() {
            (200, self.registry.replace_user(db, &name, &name)?)
        } else {
            (201, self.registry.create_user(db, &name)?)
        };
        self.user_response(status, db, &user)
    }

    pub(super) fn read_user(&self, db: &str, name: &str) -> Result<WireResponse, WireError> {
        let user = self.registry.user(db, name)?;
        self.user_response(200, db, &user)
    }

    /// `PUT /dbs/{db}/users/{user}`: the body's id renames the user.
    pub(super) fn replace_user(
        &self,
        db: &str,
        name: &str,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let new_name = body_id(&object_body(req, "user")?, "user")?;
        let user = self.registry.replace_user(db, name, &new_name)?;
        self.user_response(200, db, &user)
    }

    pub(super) fn delete_user(&self, db: &str, name: &str) -> Result<WireResponse, WireError> {
        self.registry.delete_user(db, name)?;
        Ok(WireResponse::empty(204).with("x-ms-session-token", self.write_token()))
    }

    fn user_response(
        &self,
        status: u16,
        db: &str,
        user: &UserEntry,
    ) -> Result<WireResponse, WireError> {
        let db_rid = self.registry.database(db)?.rid;
        Ok(WireResponse::json(status, &user_json(&db_rid, user)).with("etag", user.etag.clone()))
    }

    /// `GET .../permissions` (the feed) and its query, each with a token.
    pub(super) fn list_permissions(
        &self,
        db: &str,
        user: &str,
        query: Option<&WireRequest>,
        req: &WireRequest,
        now: SystemTime,
    ) -> Result<WireResponse, WireError> {
        let db_rid = self.registry.database(db)?.rid;
        let owner = self.registry.user(db, user)?;
        let expiry = token_expiry(req, now)?;
        let items = owner
            .perms
            .values()
            .map(|perm| self.permission_json(&db_rid, &owner, perm, expiry))
            .collect();
        metadata_feed(&owner.rid, "Permissions", items, query)
    }

    /// `POST .../permissions`: a create (201) or, with
    /// `x-ms-documentdb-is-upsert`, an upsert (200 when it existed).
    pub(super) fn create_permission(
        &self,
        db: &str,
        user: &str,
        req: &WireRequest,
        now: SystemTime,
    ) -> Result<WireResponse, WireError> {
        let spec = permission_spec(&object_body(req, "permission")?)?;
        let expiry = token_expiry(req, now)?;
        let upsert = flag(&req.headers, "x-ms-documentdb-is-upsert")?;
        let (status, (owner, perm)) =
            if upsert && self.registry.permission(db, user, &spec.name).is_ok() {
                let name = spec.name.clone();
                (
                    200,
                    self.registry.replace_permission(db, user, &name, spec)?,
                )
            } else {
                (201, self.registry.create_permission(db, user, spec)?)
            };
        self.permission_response(status, db, &owner, &perm, expiry)
    }

    pub(super) fn read_permission(
        &self,
        db: &str,
        user: &str,
        name: &str,
        req: &WireRequest,
        now: SystemTime,
    ) -> Result<WireResponse, WireError> {
        let expiry = token_expiry(req, now)?;
        let (owner, perm) = self.registry.permission(db, user, name)?;
        self.permission_response(200, db, &owner, &perm, expiry)
    }

    /// `PUT .../permissions/{perm}`: the body is the whole permission (its
    /// id may rename it).
    pub(super) fn replace_permission(
        &self,
        db: &str,
        user: &str,
        name: &str,
        req: &WireRequest,
        now: SystemTime,
    ) -> Result<WireResponse, WireError> {
        let spec = permission_spec(&object_body(req, "permission")?)?;
        let expiry = token_expiry(req, now)?;
        let (owner, perm) = self.registry.replace_permission(db, user, name, spec)?;
        self.permission_response(200, db, &owner, &perm, expiry)
    }

    pub(super) fn delete_permission(
        &self,
        db: &str,
        user: &str,
        name: &str,
    ) -> Result<WireResponse, WireError> {
        self.registry.delete_permission(db, user, name)?;
        Ok(WireResponse::empty(204).with("x-ms-session-token", self.write_token()))
    }

    fn permission_response(
        &self,
        status: u16,
        db: &str,
        owner: &UserEntry,
        perm: &PermEntry,
        expiry: u64,
    ) -> Result<WireResponse, WireError> {
        let db_rid = self.registry.database(db)?.rid;
        let body = self.permission_json(&db_rid, owner, perm, expiry);
        Ok(WireResponse::json(status, &body).with("etag", perm.etag.clone()))
    }

    /// A permission as clients see it, with a token expiring at `expiry`.
    fn permission_json(
        &self,
        db_rid: &str,
        owner: &UserEntry,
        perm: &PermEntry,
        expiry: u64,
    ) -> Value {
        let claims = TokenClaims {
            db_rid: db_rid.to_owned(),
            user_rid: owner.rid.clone(),
            perm_rid: perm.rid.clone(),
            expiry,
        };
        let mut body = json!({
            "id": perm.name, "permissionMode": perm.mode_text, "resource": perm.resource,
            "_rid": perm.rid,
            "_self": format!("dbs/{db_rid}/users/{}/permissions/{}/", owner.rid, perm.rid),
            "_etag": perm.etag, "_ts": perm.ts,
            "_token": self.key.resource_token(&claims, &grant(perm)),
        });
        if let Some(key) = &perm.partition_key {
            body["resourcePartitionKey"] = key.clone();
        }
        body
    }
}

fn user_json(db_rid: &str, user: &UserEntry) -> Value {
    json!({
        "id": user.name, "_rid": user.rid, "_self": format!("dbs/{db_rid}/users/{}/", user.rid),
        "_etag": user.etag, "_ts": user.ts, "_permissions": "permissions/"
    })
}

fn body_id(body: &Map<String, Value>, what: &str) -> Result<String, WireError> {
    match body.get("id") {
        Some(Value::String(id)) => Ok(id.clone()),
        _ => Err(WireError::bad_request(format!(
            "the {what} body needs a string id"
        ))),
    }
}

/// A permission body, validated: an id, `permissionMode` `All` or
/// `Read`, a container or document `resource` link, and an optional
/// `resourcePartitionKey` (a JSON array, as the partition-key header).
fn permission_spec(body: &Map<String, Value>) -> Result<PermissionSpec, WireError> {
    let name = body_id(body, "permission")?;
    let mode = PermissionMode::parse(body.get("permissionMode"))?;
    let mode_text = body["permissionMode"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let link = body
        .get("resource")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            WireError::bad_request(
                "the permission needs a resource: a container link (dbs/{db}/colls/{coll}) or a \
             document link (dbs/{db}/colls/{coll}/docs/{id})",
            )
        })?;
    let resource = link.trim_matches('/').to_owned();
    let segments: Vec<&str> = resource.split('/').collect();
    let well_formed = match segments.as_slice() {
        ["dbs", db, "colls", coll] => !db.is_empty() && !coll.is_empty(),
        ["dbs", db, "colls", coll, "docs", doc] => {
            !db.is_empty() && !coll.is_empty() && !doc.is_empty()
        }
        _ => false,
    };
    if !well_formed {
        return Err(WireError::bad_request(format!(
            "the permission's resource {link:?} is neither a container link \
             (dbs/{{db}}/colls/{{coll}}) nor a document link (dbs/{{db}}/colls/{{coll}}/docs/{{id}})"
        )));
    }
    let partition_key = match body.get("resourcePartitionKey") {
        None | Some(Value::Null) => None,
        Some(key) => {
            if !key.is_array() || PartitionKey::from_json_array(key).is_none() {
                return Err(WireError::bad_request(format!(
                    "the permission's resourcePartitionKey {key} must be a partition key as a \
                     JSON array, such as [\"a\"] or [1]"
                )));
            }
            Some(key.clone())
        }
    };
    Ok(PermissionSpec {
        name,
        mode,
        mode_text,
        resource,
        partition_key,
    })
}

/// When a token minted now expires (seconds since the Unix epoch): in an
/// hour, or in the request's `x-ms-documentdb-expiry-seconds`.
fn token_expiry(req: &WireRequest, now: SystemTime) -> Result<u64, WireError> {
    let seconds = match header(&req.headers, "x-ms-documentdb-expiry-seconds")? {
        None => DEFAULT_TOKEN_SECONDS,
        Some(text) => text
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| (1..=MAX_TOKEN_SECONDS).contains(n))
            .ok_or_else(|| {
                WireError::bad_request(format!(
                    "the x-ms-documentdb-expiry-seconds header {text:?} must be a whole number \
                     of seconds from 1 to {MAX_TOKEN_SECONDS}"
                ))
            })?,
    };
    let now = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Ok(now + seconds)
}
