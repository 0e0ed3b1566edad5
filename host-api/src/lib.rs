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
//!
//! Non-goals: no I/O, no storage, no script engine types (`JsValue`, guest
//! pointers) ever appear here.

mod error;
mod partition_key;

pub use error::{ErrorCode, HostError};
pub use partition_key::{PartitionKey, PartitionKeyError, PartitionKeyPath};
