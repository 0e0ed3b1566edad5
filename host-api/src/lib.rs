//! The vocabulary shared by everything that touches a document: the engine,
//! both sandboxes (JavaScript and WebAssembly) and the guest SDKs.
//!
//! This crate is an **API boundary**: a `pub` addition here is a contract
//! change for both runtimes and both guest languages, so it stays small.
//!
//! - [`ErrorCode`] and [`HostError`]: the one table of status codes that
//!   crosses the sandbox boundary (Cosmos DB's HTTP status codes).
//! - [`PartitionKey`] and [`PartitionKeyPath`]: which logical partition a
//!   document belongs to, and where in the document that value lives.
//! - [`Document`]: a stored JSON document, shared without copying.
//! - [`Collection`]: the operations a procedure or trigger can perform on
//!   its logical partition, implemented by the engine and adapted by both
//!   sandboxes.
//! - [`ScriptKind`], [`TriggerType`], [`TriggerOperation`]: what scripts are.
//! - [`abi`]: the WebAssembly ABI (`partita_v1`), its imports and exports.
//! - [`json`]: a document's compact JSON text and its length, counted the
//!   same way on both sides of the boundary.
//! - [`strict`]: JSON text to a document, refusing duplicate member names.
//!
//! Non-goals: no I/O, no storage, no script engine types (`JsValue`, guest
//! pointers) ever appear here.

pub mod abi;
mod collection;
mod document;
mod error;
pub mod json;
mod partition_key;
mod script;
pub mod strict;

pub use collection::{Collection, Page, QueryRequest, Statistics, WriteOptions};
pub use document::{Document, member, member_mut, type_name};
pub use error::{ErrorCode, HostError};
pub use partition_key::{MAX_PATHS, PartitionKey, PartitionKeyError, PartitionKeyPath};
pub use script::{ParseScriptEnumError, ScriptKind, ScriptLanguage, TriggerOperation, TriggerType};
