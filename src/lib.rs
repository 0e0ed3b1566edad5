//! Partita: an embedded, partitioned, transactional JSON document database
//! on the Azure Cosmos DB model, whose stored procedures and triggers run in
//! sandboxed JavaScript or WebAssembly.
//!
//! This crate is the facade users depend on. It re-exports the engine
//! (containers, logical partitions, single-partition transactions, durable
//! storage, the change log), runs stored procedures, triggers and UDFs in
//! JavaScript or WebAssembly ([`Scripts`]), and carries the blog workload
//! natively in Rust ([`blog`]), its demo, the change-feed processor, request
//! charges and the atomicity fuzzer.
//!
//! ```
//! use partita::{Database, Error};
//! use serde_json::json;
//!
//! let db = Database::in_memory();
//! let posts = db.create_container("posts", "/postId")?;
//! posts.create_item("p1", json!({"id": "p1", "postId": "p1", "type": "post", "commentCount": 0}), None)?;
//! partita_workload::blog::create_comment(&posts, "p1", json!({"id": "c1", "text": "first!"}))?;
//! assert_eq!(posts.read_item("p1", "p1")?["commentCount"], 1);
//! # Ok::<(), Error>(())
//! ```
//!
//! Non-goals: transactions spanning logical partitions, data sets larger
//! than memory.

pub mod change_feed;
pub mod charge;
pub mod fuzz;
mod scripts;

pub use partita_alloc::MiMalloc;
pub use runtime::{
    Limits, SCRIPT_THREAD_STACK, WorkerOptions, WorkerPool, WorkerStats, worker_main,
};
pub use scripts::{
    CallError, CallStatistics, ItemResponse, ProcedureResponse, Scripts, WriteOptions,
};

pub use engine::{
    Change, ChangeKind, Container, ContainerProperties, Database, Document, Durability, Error,
    ErrorCode, FeedOptions, FeedPage, ItemOptions, Lsn, Options, PartitionKey, QueryItemsOptions,
    QueryPage, Result, Script, ScriptKind, ScriptLanguage, ScriptProperties, TriggerOperation,
    TriggerType, Txn,
};
