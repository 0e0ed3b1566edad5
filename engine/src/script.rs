//! Stored procedures, triggers and user-defined functions: their
//! definitions, stored durably per container.
//!
//! The engine stores scripts and hands them out; it never runs them (that is
//! `runtime`'s job). Each create or replace gives the script a new
//! `version`, which is the cache key of compiled code. A caller that looked a
//! script up holds an `Arc` of that version, so replacing a script takes
//! effect for the next call while calls in flight finish on the version
//! they started with.

use std::sync::Arc;

use host_api::{ScriptKind, ScriptLanguage, TriggerOperation, TriggerType};

use crate::container::Container;
use crate::document::{now_secs, validate_id};
use crate::error::{Error, Result};
use crate::storage::ScriptRecord;

/// The largest script body accepted (Cosmos DB's 2 MB request limit).
pub const MAX_SCRIPT_SIZE: usize = 2 * 1024 * 1024;

/// A script as a caller submits it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptProperties {
    /// The id, unique per container and kind.
    pub id: String,
    /// Procedure, trigger or UDF.
    pub kind: ScriptKind,
    /// JavaScript or WebAssembly.
    pub language: ScriptLanguage,
    /// JavaScript text or a WebAssembly module (binary or text format).
    pub body: Vec<u8>,
    /// Required for triggers: pre or post.
    pub trigger_type: Option<TriggerType>,
    /// Required for triggers: the writes it runs on.
    pub trigger_operation: Option<TriggerOperation>,
    /// For triggers: the type and operation as the client wrote them
    /// (`"pre"`, `"Update"`), echoed back as Cosmos DB echoes them; `None`
    /// for the canonical names.
    pub trigger_names: Option<TriggerNames>,
}

/// A trigger's type and operation as a client spelled them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggerNames {
    /// The type (`"pre"`, `"Pre"`, ...).
    pub trigger_type: String,
    /// The operation (`"all"`, `"Update"`, ...).
    pub trigger_operation: String,
}

impl ScriptProperties {
    /// A JavaScript stored procedure.
    pub fn stored_procedure(id: impl Into<String>, body: impl Into<String>) -> ScriptProperties {
        ScriptProperties::javascript(id, ScriptKind::StoredProcedure, body)
    }

    /// A JavaScript trigger.
    pub fn trigger(
        id: impl Into<String>,
        body: impl Into<String>,
        trigger_type: TriggerType,
        trigger_operation: TriggerOperation,
    ) -> ScriptProperties {
        ScriptProperties {
            trigger_type: Some(trigger_type),
            trigger_operation: Some(trigger_operation),
            ..ScriptProperties::javascript(id, ScriptKind::Trigger, body)
        }
    }

    /// A JavaScript user-defined function.
    pub fn user_defined_function(
        id: impl Into<String>,
        body: impl Into<String>,
    ) -> ScriptProperties {
        ScriptProperties::javascript(id, ScriptKind::UserDefinedFunction, body)
    }

    /// A WebAssembly script of `kind`: a module's `.wasm` bytes or `.wat`
    /// text. A trigger also needs `trigger_type` and `trigger_operation`.
    ///
    /// The engine stores the body as given and never runs it: validating
    /// and compiling a module is the runtime's job, done at upload by the
    /// facade (`partita::Container::create_script`).
    pub fn wasm(
        id: impl Into<String>,
        kind: ScriptKind,
        body: impl Into<Vec<u8>>,
    ) -> ScriptProperties {
        ScriptProperties {
            id: id.into(),
            kind,
            language: ScriptLanguage::Wasm,
            body: body.into(),
            trigger_type: None,
            trigger_operation: None,
            trigger_names: None,
        }
    }

    fn javascript(
        id: impl Into<String>,
        kind: ScriptKind,
        body: impl Into<String>,
    ) -> ScriptProperties {
        ScriptProperties {
            id: id.into(),
            kind,
            language: ScriptLanguage::JavaScript,
            body: body.into().into_bytes(),
            trigger_type: None,
            trigger_operation: None,
            trigger_names: None,
        }
    }
}

/// A stored script. Cheap to clone.
pub type Script = Arc<ScriptRecord>;

fn kind_word(kind: ScriptKind) -> &'static str {
    match kind {
        ScriptKind::StoredProcedure => "stored procedure",
        ScriptKind::Trigger => "trigger",
        ScriptKind::UserDefinedFunction => "user-defined function",
    }
}

impl Container {
    /// Stores a new script.
    ///
    /// # Errors
    /// [`Error::ScriptExists`] (409); [`Error::BadRequest`] for a bad id, a
    /// JavaScript body that is not UTF-8 or empty, or a trigger without its
    /// type or operation; [`Error::RequestTooLarge`] over 2 MB.
    pub fn create_script(&self, props: ScriptProperties) -> Result<Script> {
        self.write_script(props, false)
    }

    /// Replaces an existing script; the next call uses the new version.
    ///
    /// # Errors
    /// [`Error::ScriptNotFound`] (404), and the validation errors of
    /// [`Container::create_script`].
    pub fn replace_script(&self, props: ScriptProperties) -> Result<Script> {
        self.write_script(props, true)
    }

    /// The current version of a script.
    ///
    /// # Errors
    /// [`Error::ScriptNotFound`] (404).
    pub fn read_script(&self, kind: ScriptKind, id: &str) -> Result<Script> {
        let key = (kind, id.to_owned());
        let lookup = || self.inner.scripts.read().get(&key).cloned();
        if let Some(script) = lookup() {
            return Ok(script);
        }
        if !self.db.shared {
            return Err(self.script_not_found(kind, id));
        }
        // Perhaps another node created it (one statement to ask).
        self.db.sync_catalog()?;
        lookup().ok_or_else(|| self.script_not_found(kind, id))
    }

    /// Every script of one kind, ordered by id.
    pub fn list_scripts(&self, kind: ScriptKind) -> Vec<Script> {
        // Another node's scripts too; should storage fail, the list is the
        // one this node holds.
        let _ = self.db.sync_catalog();
        let mut res: Vec<Script> = self
            .inner
            .scripts
            .read()
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|(_, s)| s.clone())
            .collect();
        res.sort_by(|a, b| a.id.cmp(&b.id));
        res
    }

    /// Deletes a script. Calls already running it finish.
    ///
    /// # Errors
    /// [`Error::ScriptNotFound`] (404).
    pub fn delete_script(&self, kind: ScriptKind, id: &str) -> Result<()> {
        self.db.check_writable()?;
        self.db.sync_catalog()?;
        let mut scripts = self.inner.scripts.write();
        let key = (kind, id.to_owned());
        if !scripts.contains_key(&key) {
            return Err(self.script_not_found(kind, id));
        }
        let alive = self.inner.alive()?;
        self.db
            .storage
            .delete_script(self.id(), kind, id)
            .inspect_err(|e| self.db.mark_failed(e))?;
        drop(alive);
        scripts.remove(&key);
        Ok(())
    }

    fn write_script(&self, mut props: ScriptProperties, replace: bool) -> Result<Script> {
        let what = kind_word(props.kind);
        validate_id(&props.id).map_err(|e| Error::BadRequest(format!("{what} {e}")))?;
        if props.body.len() > MAX_SCRIPT_SIZE {
            return Err(Error::RequestTooLarge {
                what: format!("{what} {:?} of container {:?}", props.id, self.id()),
                size: props.body.len(),
                limit: MAX_SCRIPT_SIZE,
            });
        }
        if props.language == ScriptLanguage::JavaScript {
            match std::str::from_utf8(&props.body) {
                Err(_) => {
                    return Err(Error::BadRequest(format!(
                        "{what} {:?}: the body is not UTF-8 text",
                        props.id
                    )));
                }
                Ok(text) if text.trim().is_empty() => {
                    return Err(Error::BadRequest(format!(
                        "{what} {:?}: the body is empty",
                        props.id
                    )));
                }
                Ok(_) => {}
            }
        }
        if props.kind == ScriptKind::Trigger {
            let missing: Vec<&str> = [
                props.trigger_type.is_none().then_some("triggerType"),
                props
                    .trigger_operation
                    .is_none()
                    .then_some("triggerOperation"),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !missing.is_empty() {
                return Err(Error::BadRequest(format!(
                    "trigger {:?}: the input content is invalid because the required properties - '{}' - are missing",
                    props.id,
                    missing.join("; ")
                )));
            }
        } else {
            props.trigger_type = None;
            props.trigger_operation = None;
            props.trigger_names = None;
        }
        self.db.check_writable()?;
        // Another node's scripts first: whether this one exists is theirs
        // to say too.
        self.db.sync_catalog()?;
        let mut scripts = self.inner.scripts.write();
        let key = (props.kind, props.id.clone());
        match (scripts.contains_key(&key), replace) {
            (true, false) => {
                return Err(Error::ScriptExists {
                    container: self.id().to_owned(),
                    kind: what,
                    id: props.id,
                });
            }
            (false, true) => return Err(self.script_not_found(props.kind, &props.id)),
            _ => {}
        }
        let record = Arc::new(ScriptRecord {
            container: self.id().to_owned(),
            kind: props.kind,
            id: props.id,
            language: props.language,
            body: props.body.into(),
            trigger_type: props.trigger_type,
            trigger_operation: props.trigger_operation,
            trigger_names: props.trigger_names,
            version: self.inner.next_seq(),
            ts: now_secs(),
        });
        let alive = self.inner.alive()?;
        self.db
            .storage
            .put_script(&record)
            .inspect_err(|e| self.db.mark_failed(e))?;
        drop(alive);
        scripts.insert(key, record.clone());
        Ok(record)
    }

    fn script_not_found(&self, kind: ScriptKind, id: &str) -> Error {
        Error::ScriptNotFound {
            container: self.id().to_owned(),
            kind: kind_word(kind),
            id: id.to_owned(),
        }
    }
}
