//! Users and their permissions, the registry's documents for resource
//! tokens (see `gateway/users.rs` for the protocol and `auth.rs` for the
//! tokens).
//!
//! ```text
//!   user-7  {"type": "user", "db": "blog", "name": "alice"}
//!   perm-8  {"type": "permission", "db": "blog", "user": "user-7", "name": "read-posts",
//!            "permissionMode": "Read", "resource": "dbs/blog/colls/posts",
//!            "resourcePartitionKey": ["p1"], "nonce": "8-1764316800123456789"}
//! ```
//!
//! A user is deleted with its permissions in one registry transaction, and
//! a database with its users and their permissions in the transaction that
//! deletes its containers. Ordinals are never reused while the server runs;
//! a permission's `nonce` (its ordinal and creation time) goes into every
//! token minted for it, so a token outlives neither its permission nor a
//! restart that happened to give a new permission the same ordinal.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use engine::validate_id;
use serde_json::{Value, json};

use super::{PARTITION, Registry, encode_rid, registry_error};
use crate::wire::WireError;

/// What a permission lets its token do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PermissionMode {
    /// Reads only.
    Read,
    /// Reads and writes (procedure execution included).
    All,
}

impl PermissionMode {
    /// The mode as the service spells it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Read => "Read",
            PermissionMode::All => "All",
        }
    }

    /// Parses a permission body's `permissionMode` (case-insensitive, as
    /// the service accepts it).
    pub(crate) fn parse(value: Option<&Value>) -> Result<PermissionMode, WireError> {
        match value.and_then(Value::as_str) {
            Some(mode) if mode.eq_ignore_ascii_case("read") => Ok(PermissionMode::Read),
            Some(mode) if mode.eq_ignore_ascii_case("all") => Ok(PermissionMode::All),
            _ => Err(WireError::bad_request(format!(
                "the permission's permissionMode must be \"All\" or \"Read\", not {}",
                value.map_or_else(|| "missing".to_owned(), Value::to_string)
            ))),
        }
    }
}

/// A user of a database.
#[derive(Clone, Debug)]
pub(crate) struct UserEntry {
    pub(crate) name: String,
    pub(crate) doc_id: String,
    /// Its database's 4 bytes, then 4 with the top bit set (as the
    /// service marks a user), so it never equals a container's.
    pub(crate) rid: String,
    pub(crate) etag: String,
    pub(crate) ts: u64,
    /// Its permissions by name.
    pub(crate) perms: BTreeMap<String, Arc<PermEntry>>,
}

/// A permission of a user: a mode on one container or document.
#[derive(Debug)]
pub(crate) struct PermEntry {
    pub(crate) name: String,
    pub(crate) doc_id: String,
    /// Its user's 8 bytes, then its ordinal in 8.
    pub(crate) rid: String,
    pub(crate) etag: String,
    pub(crate) ts: u64,
    pub(crate) mode: PermissionMode,
    /// The mode as the client spelled it (`all`, `All`), echoed back.
    pub(crate) mode_text: String,
    /// The link it was given (`dbs/d/colls/c[/docs/id]`, by name or rid),
    /// without slashes at either end.
    pub(crate) resource: String,
    /// The logical partition it is confined to (a JSON array), if any.
    pub(crate) partition_key: Option<Value>,
    /// Unique to this permission's creation; bound into its tokens.
    pub(crate) nonce: String,
}

/// What a client asks a permission to be.
#[derive(Clone, Debug)]
pub(crate) struct PermissionSpec {
    pub(crate) name: String,
    pub(crate) mode: PermissionMode,
    pub(crate) mode_text: String,
    pub(crate) resource: String,
    pub(crate) partition_key: Option<Value>,
}

/// A user's `_rid`: the database's 4 bytes, then `0x80000000 | ordinal`.
fn user_rid(db_rid: [u8; 4], ordinal: u64) -> String {
    let mut bytes = db_rid.to_vec();
    let n = 0x8000_0000 | (u32::try_from(ordinal).unwrap_or(u32::MAX) & 0x7fff_ffff);
    bytes.extend_from_slice(&n.to_be_bytes());
    encode_rid(&bytes)
}

/// A permission's `_rid`: its user's 8 bytes, then its ordinal (8 bytes,
/// little endian, as the service's child resources have).
fn permission_rid(user_rid: &str, ordinal: u64) -> String {
    use base64::Engine;
    let mut bytes = base64::engine::general_purpose::STANDARD
        .decode(user_rid.replace('-', "/"))
        .unwrap_or_default();
    bytes.resize(8, 0);
    bytes.extend_from_slice(&ordinal.to_le_bytes());
    encode_rid(&bytes)
}

fn ordinal_of(doc_id: &str) -> u64 {
    doc_id
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn user_not_found(db: &str, user: &str) -> WireError {
    WireError::not_found(format!("user {user:?} does not exist in database {db:?}"))
}

fn permission_from(doc: &engine::Document, user_rid: &str) -> Option<PermEntry> {
    let value = doc.value();
    Some(PermEntry {
        name: value["name"].as_str()?.to_owned(),
        doc_id: doc.id().to_owned(),
        rid: permission_rid(user_rid, ordinal_of(doc.id())),
        etag: doc.etag().to_owned(),
        ts: doc.ts(),
        mode: PermissionMode::parse(value.get("permissionMode")).ok()?,
        mode_text: value["permissionMode"].as_str()?.to_owned(),
        resource: value["resource"].as_str()?.to_owned(),
        partition_key: value
            .get("resourcePartitionKey")
            .filter(|v| !v.is_null())
            .cloned(),
        nonce: value["nonce"].as_str()?.to_owned(),
    })
}

/// The users of every database in `dbs`, rebuilt from the registry
/// documents (`user` and `permission`) among `docs`.
pub(super) fn users_of(
    dbs: &BTreeMap<String, super::DbEntry>,
    docs: &[engine::Document],
) -> BTreeMap<String, BTreeMap<String, UserEntry>> {
    let mut users: BTreeMap<String, BTreeMap<String, UserEntry>> = BTreeMap::new();
    {
        for doc in docs {
            let value = doc.value();
            if value["type"].as_str() != Some("user") {
                continue;
            }
            let (Some(db), Some(name)) = (value["db"].as_str(), value["name"].as_str()) else {
                continue;
            };
            let Some(entry) = dbs.get(db) else { continue };
            users.entry(db.to_owned()).or_default().insert(
                name.to_owned(),
                UserEntry {
                    name: name.to_owned(),
                    doc_id: doc.id().to_owned(),
                    rid: user_rid(entry.rid_bytes, ordinal_of(doc.id())),
                    etag: doc.etag().to_owned(),
                    ts: doc.ts(),
                    perms: BTreeMap::new(),
                },
            );
        }
        for doc in docs {
            let value = doc.value();
            if value["type"].as_str() != Some("permission") {
                continue;
            }
            let (Some(db), Some(owner)) = (value["db"].as_str(), value["user"].as_str()) else {
                continue;
            };
            let Some(user) = users
                .get_mut(db)
                .and_then(|users| users.values_mut().find(|u| u.doc_id == owner))
            else {
                continue;
            };
            if let Some(perm) = permission_from(doc, &user.rid) {
                user.perms.insert(perm.name.clone(), Arc::new(perm));
            }
        }
    }
    users
}

impl Registry {
    /// In a registry transaction: deletes every user of database `db` and
    /// their permissions.
    pub(super) fn delete_users(
        &self,
        txn: &mut engine::Txn,
        db: &str,
    ) -> Result<(), engine::Error> {
        if let Some(users) = self.users.read().get(db) {
            for user in users.values() {
                delete_user_docs(txn, user)?;
            }
        }
        Ok(())
    }

    /// Every user of database `db`, by name.
    pub(crate) fn users(&self, db: &str) -> Result<Vec<UserEntry>, WireError> {
        self.database(db)?;
        Ok(self
            .users
            .read()
            .get(db)
            .map(|users| users.values().cloned().collect())
            .unwrap_or_default())
    }

    /// The user `name` of database `db`.
    pub(crate) fn user(&self, db: &str, name: &str) -> Result<UserEntry, WireError> {
        self.found(|registry| {
            registry.database(db)?;
            registry
                .users
                .read()
                .get(db)
                .and_then(|users| users.get(name))
                .cloned()
                .ok_or_else(|| user_not_found(db, name))
        })
    }

    /// The user whose `_rid` is `rid` in database `db`.
    pub(crate) fn user_by_rid(&self, db: &str, rid: &str) -> Result<UserEntry, WireError> {
        self.users
            .read()
            .get(db)
            .and_then(|users| users.values().find(|u| u.rid == rid))
            .cloned()
            .ok_or_else(|| {
                WireError::not_found(format!("no user has the _rid {rid:?} in database {db:?}"))
            })
    }

    /// Creates user `name` in database `db` (409 if it exists).
    pub(crate) fn create_user(&self, db: &str, name: &str) -> Result<UserEntry, WireError> {
        validate_id(name).map_err(|e| WireError::bad_request(format!("user {e}")))?;
        let ordinal = self.writer.lock();
        self.refresh(&ordinal)?;
        let entry = self.database(db)?;
        if self.user(db, name).is_ok() {
            return Err(WireError::conflict(format!(
                "Resource with specified id or name already exists: user {name:?} in database {db:?}"
            )));
        }
        let user_ordinal = super::next_ordinal(&ordinal);
        let doc_id = format!("user-{user_ordinal}");
        let doc = self
            .system
            .create_item(
                PARTITION,
                json!({"id": doc_id, "registry": PARTITION, "type": "user", "db": db, "name": name}),
                None,
            )
            .map_err(registry_error)?;
        let user = UserEntry {
            name: name.to_owned(),
            rid: user_rid(entry.rid_bytes, user_ordinal),
            doc_id,
            etag: doc.etag().to_owned(),
            ts: doc.ts(),
            perms: BTreeMap::new(),
        };
        self.users
            .write()
            .entry(db.to_owned())
            .or_default()
            .insert(name.to_owned(), user.clone());
        Ok(user)
    }

    /// Renames user `name` to `new_name` (a replace; the same name only
    /// refreshes its etag). Its rid and permissions stay.
    pub(crate) fn replace_user(
        &self,
        db: &str,
        name: &str,
        new_name: &str,
    ) -> Result<UserEntry, WireError> {
        validate_id(new_name).map_err(|e| WireError::bad_request(format!("user {e}")))?;
        let _writer = self.writer.lock();
        let old = self.user(db, name)?;
        if new_name != name && self.user(db, new_name).is_ok() {
            return Err(WireError::conflict(format!(
                "Resource with specified id or name already exists: user {new_name:?} in \
                 database {db:?}"
            )));
        }
        let doc = self
            .system
            .transaction(PARTITION, |txn| {
                let mut doc = txn.read_item(&old.doc_id)?.into_value();
                doc["name"] = json!(new_name);
                txn.replace_item(&old.doc_id, doc, None)
            })
            .map_err(registry_error)?;
        let user = UserEntry {
            name: new_name.to_owned(),
            etag: doc.etag().to_owned(),
            ts: doc.ts(),
            ..old
        };
        let mut users = self.users.write();
        let users = users.entry(db.to_owned()).or_default();
        users.remove(name);
        users.insert(new_name.to_owned(), user.clone());
        Ok(user)
    }

    /// Deletes user `name` and its permissions in one transaction.
    pub(crate) fn delete_user(&self, db: &str, name: &str) -> Result<(), WireError> {
        let _writer = self.writer.lock();
        let user = self.user(db, name)?;
        self.system
            .transaction(PARTITION, |txn| delete_user_docs(txn, &user))
            .map_err(registry_error)?;
        if let Some(users) = self.users.write().get_mut(db) {
            users.remove(name);
        }
        Ok(())
    }

    /// The permission `name` of user `user`, with the user.
    pub(crate) fn permission(
        &self,
        db: &str,
        user: &str,
        name: &str,
    ) -> Result<(UserEntry, Arc<PermEntry>), WireError> {
        let user = self.user(db, user)?;
        let perm = user.perms.get(name).cloned().ok_or_else(|| {
            WireError::not_found(format!(
                "permission {name:?} does not exist for user {:?} in database {db:?}",
                user.name
            ))
        })?;
        Ok((user, perm))
    }

    /// The permission whose rid is `perm_rid`, of the user whose rid is
    /// `user_rid`, in the database whose rid is `db_rid`: with its
    /// database's name and its user. `None` when any of them is gone.
    pub(crate) fn permission_by_rids(
        &self,
        db_rid: &str,
        user_rid: &str,
        perm_rid: &str,
    ) -> Option<(String, UserEntry, Arc<PermEntry>)> {
        let db = self.database_by_rid(db_rid).ok()?.name;
        let user = self.user_by_rid(&db, user_rid).ok()?;
        let perm = user.perms.values().find(|p| p.rid == perm_rid)?.clone();
        Some((db, user, perm))
    }

    /// Creates a permission of user `user` (409 if its id is taken, or if
    /// the user has a permission on the same resource).
    pub(crate) fn create_permission(
        &self,
        db: &str,
        user: &str,
        spec: PermissionSpec,
    ) -> Result<(UserEntry, Arc<PermEntry>), WireError> {
        validate_id(&spec.name).map_err(|e| WireError::bad_request(format!("permission {e}")))?;
        let ordinal = self.writer.lock();
        self.refresh(&ordinal)?;
        let owner = self.user(db, user)?;
        if owner.perms.contains_key(&spec.name) {
            return Err(WireError::conflict(format!(
                "Resource with specified id or name already exists: permission {:?} of user \
                 {user:?}",
                spec.name
            )));
        }
        refuse_second_grant(&owner, &spec, None)?;
        let perm_ordinal = super::next_ordinal(&ordinal);
        let doc_id = format!("perm-{perm_ordinal}");
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let nonce = format!("{perm_ordinal}-{nanos}");
        let doc = self
            .system
            .create_item(
                PARTITION,
                permission_doc(&doc_id, db, &owner.doc_id, &spec, &nonce),
                None,
            )
            .map_err(registry_error)?;
        let perm = Arc::new(PermEntry {
            rid: permission_rid(&owner.rid, perm_ordinal),
            doc_id,
            etag: doc.etag().to_owned(),
            ts: doc.ts(),
            name: spec.name,
            mode: spec.mode,
            mode_text: spec.mode_text,
            resource: spec.resource,
            partition_key: spec.partition_key,
            nonce,
        });
        let owner = self.publish_permission(db, user, None, &perm);
        Ok((owner, perm))
    }

    /// Replaces permission `name` of user `user` with `spec` (which may
    /// rename it). Its rid stays, and so do its tokens when its mode,
    /// resource and partition key stay.
    pub(crate) fn replace_permission(
        &self,
        db: &str,
        user: &str,
        name: &str,
        spec: PermissionSpec,
    ) -> Result<(UserEntry, Arc<PermEntry>), WireError> {
        validate_id(&spec.name).map_err(|e| WireError::bad_request(format!("permission {e}")))?;
        let _writer = self.writer.lock();
        let (owner, old) = self.permission(db, user, name)?;
        if spec.name != name && owner.perms.contains_key(&spec.name) {
            return Err(WireError::conflict(format!(
                "Resource with specified id or name already exists: permission {:?} of user \
                 {user:?}",
                spec.name
            )));
        }
        refuse_second_grant(&owner, &spec, Some(name))?;
        let doc = self
            .system
            .replace_item(
                PARTITION,
                &old.doc_id,
                permission_doc(&old.doc_id, db, &owner.doc_id, &spec, &old.nonce),
                None,
            )
            .map_err(registry_error)?;
        let perm = Arc::new(PermEntry {
            name: spec.name,
            doc_id: old.doc_id.clone(),
            rid: old.rid.clone(),
            etag: doc.etag().to_owned(),
            ts: doc.ts(),
            mode: spec.mode,
            mode_text: spec.mode_text,
            resource: spec.resource,
            partition_key: spec.partition_key,
            nonce: old.nonce.clone(),
        });
        let owner = self.publish_permission(db, user, Some(name), &perm);
        Ok((owner, perm))
    }

    /// Deletes permission `name` of user `user`.
    pub(crate) fn delete_permission(
        &self,
        db: &str,
        user: &str,
        name: &str,
    ) -> Result<(), WireError> {
        let _writer = self.writer.lock();
        let (_, perm) = self.permission(db, user, name)?;
        self.system
            .delete_item(PARTITION, &perm.doc_id, None)
            .map_err(registry_error)?;
        if let Some(owner) = self
            .users
            .write()
            .get_mut(db)
            .and_then(|users| users.get_mut(user))
        {
            owner.perms.remove(name);
        }
        Ok(())
    }

    /// Puts a written permission in its user's entry (in place of `old`,
    /// its name before a replace); returns the user.
    fn publish_permission(
        &self,
        db: &str,
        user: &str,
        old: Option<&str>,
        perm: &Arc<PermEntry>,
    ) -> UserEntry {
        let mut users = self.users.write();
        let owner = users
            .entry(db.to_owned())
            .or_default()
            .get_mut(user)
            .expect("the registry writer lock keeps the user while its permission is written");
        if let Some(old) = old {
            owner.perms.remove(old);
        }
        owner.perms.insert(perm.name.clone(), perm.clone());
        owner.clone()
    }
}

/// 409 when the user already has another permission on the same resource.
fn refuse_second_grant(
    owner: &UserEntry,
    spec: &PermissionSpec,
    replacing: Option<&str>,
) -> Result<(), WireError> {
    match owner
        .perms
        .values()
        .find(|p| Some(p.name.as_str()) != replacing && p.resource == spec.resource)
    {
        Some(other) => Err(WireError::conflict(format!(
            "user {:?} already has permission {:?} on {:?}: a user has one permission per resource",
            owner.name, other.name, spec.resource
        ))),
        None => Ok(()),
    }
}

fn permission_doc(
    doc_id: &str,
    db: &str,
    user_doc: &str,
    spec: &PermissionSpec,
    nonce: &str,
) -> Value {
    json!({"id": doc_id, "registry": PARTITION, "type": "permission", "db": db,
           "user": user_doc, "name": spec.name, "permissionMode": spec.mode_text,
           "resource": spec.resource, "resourcePartitionKey": spec.partition_key,
           "nonce": nonce})
}

fn delete_user_docs(txn: &mut engine::Txn, user: &UserEntry) -> Result<(), engine::Error> {
    for perm in user.perms.values() {
        txn.delete_item(&perm.doc_id, None)?;
    }
    txn.delete_item(&user.doc_id, None)
}
