//! `partita serve`: Partita behind Cosmos DB's REST (gateway) protocol, so
//! that applications written against an official Cosmos DB SDK can use it as
//! a local stand-in, stored procedures and triggers included.
//!
//! ```text
//!   TCP ─► connection cap ─► hyper (HTTP/1.1, h2c; idle and header deadlines)
//!       ─► signature from the head (401) ─► read body (size limit, shared
//!          byte budget, timeout)
//!       ─► spawn_blocking ─► Gateway::handle (sync: auth, routing, engine calls)
//!       ─► response
//! ```
//!
//! The split is deliberate: engine transactions are synchronous, hold a
//! partition lock and are `!Send`, so they run to completion on a blocking
//! thread and are never held across an `await`. [`Gateway`] is plain data in,
//! plain data out (see `wire.rs`), which is what tests and the fuzz test
//! drive; `http.rs` is the only code that knows about sockets.
//!
//! It is a crate of its own (`partita-server`), which the `partita` binary
//! starts, so embedded users of the library build neither tokio nor hyper.

mod auth;
mod epk;
mod explorer;
mod gateway;
mod http;
mod registry;
mod tls;
mod wire;

pub use auth::{BadKey, EMULATOR_KEY, MAX_CLOCK_SKEW, MasterKey, is_rid_based, resource_of};
pub use epk::effective_partition_key;
pub use gateway::{CALL_MARGIN, FUZZ_DEADLINE, Gateway, GatewayLimits};
pub use http::{ServeOptions, Server, ServerError};
pub use registry::SYSTEM_CONTAINER;
pub use tls::{SELF_SIGNED_NAMES, TlsConfig, TlsError};
pub use wire::{SUBSTATUS_PARTITION_KEY_MISMATCH, WireError, WireRequest, WireResponse, code_name};
