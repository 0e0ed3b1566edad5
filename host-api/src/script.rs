//! Scripts: stored procedures, triggers and user-defined functions.
//!
//! A container stores scripts by id, per kind, as Cosmos DB does. A stored
//! procedure is called by id with a partition key and parameters; a trigger
//! runs before (pre) or after (post) a point write that names it and whose
//! operation matches; a user-defined function is a pure function called from
//! SQL as `udf.name(args)`.

use std::fmt;
use std::str::FromStr;

/// What a script is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScriptKind {
    /// A stored procedure.
    StoredProcedure,
    /// A pre- or post-trigger.
    Trigger,
    /// A user-defined function.
    UserDefinedFunction,
}

/// The language a script is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScriptLanguage {
    /// JavaScript text, run by boa.
    JavaScript,
    /// A WebAssembly module, run by wasmtime.
    Wasm,
}

/// When a trigger runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TriggerType {
    /// Before the write; it can read and change the request body.
    Pre,
    /// After the write, in the same transaction; it can read and change the
    /// response body.
    Post,
}

/// Which writes a trigger accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TriggerOperation {
    /// Every write.
    All,
    /// Creates.
    Create,
    /// Replaces.
    Replace,
    /// Deletes.
    Delete,
    /// Upserts.
    Upsert,
}

impl TriggerOperation {
    /// Whether a trigger declared for `self` may run on a write of kind `write`.
    pub fn accepts(self, write: TriggerOperation) -> bool {
        self == TriggerOperation::All || self == write
    }
}

/// A string did not name a trigger type or operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value:?}: expected one of {expected}")]
pub struct ParseScriptEnumError {
    what: &'static str,
    value: String,
    expected: &'static str,
}

impl FromStr for TriggerType {
    type Err = ParseScriptEnumError;

    /// Case-insensitive `Pre` or `Post`.
    fn from_str(s: &str) -> Result<TriggerType, ParseScriptEnumError> {
        match s.to_ascii_lowercase().as_str() {
            "pre" => Ok(TriggerType::Pre),
            "post" => Ok(TriggerType::Post),
            _ => Err(ParseScriptEnumError {
                what: "trigger type",
                value: s.to_owned(),
                expected: "Pre, Post",
            }),
        }
    }
}

impl FromStr for TriggerOperation {
    type Err = ParseScriptEnumError;

    /// Case-insensitive `All`, `Create`, `Replace`, `Delete` or `Upsert`;
    /// `Update`, the .NET SDK's older name, is `Replace`.
    fn from_str(s: &str) -> Result<TriggerOperation, ParseScriptEnumError> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "all" => TriggerOperation::All,
            "create" => TriggerOperation::Create,
            "replace" | "update" => TriggerOperation::Replace,
            "delete" => TriggerOperation::Delete,
            "upsert" => TriggerOperation::Upsert,
            _ => {
                return Err(ParseScriptEnumError {
                    what: "trigger operation",
                    value: s.to_owned(),
                    expected: "All, Create, Replace, Delete, Upsert",
                });
            }
        })
    }
}

impl fmt::Display for TriggerType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TriggerType::Pre => "Pre",
            TriggerType::Post => "Post",
        })
    }
}

impl fmt::Display for TriggerOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TriggerOperation::All => "All",
            TriggerOperation::Create => "Create",
            TriggerOperation::Replace => "Replace",
            TriggerOperation::Delete => "Delete",
            TriggerOperation::Upsert => "Upsert",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_accept() {
        assert_eq!("post".parse::<TriggerType>().unwrap(), TriggerType::Post);
        assert_eq!(
            "Upsert".parse::<TriggerOperation>().unwrap(),
            TriggerOperation::Upsert
        );
        assert!(
            "sideways"
                .parse::<TriggerType>()
                .unwrap_err()
                .to_string()
                .contains("Pre, Post")
        );
        assert!(TriggerOperation::All.accepts(TriggerOperation::Delete));
        assert!(!TriggerOperation::Create.accepts(TriggerOperation::Replace));
    }
}
