//! Partita: an embedded, partitioned, transactional JSON document database
//! on the Azure Cosmos DB model, whose stored procedures and triggers run in
//! sandboxed JavaScript or WebAssembly.
//!
//! This crate is the facade users depend on: [`Database`] and [`Container`]
//! are the one way to use it from Rust. A write on a container runs the
//! triggers its [`WriteOptions`] name, a query can call the container's
//! user-defined functions, a stored procedure runs atomically in one
//! logical partition, and native Rust code runs in the same transactions
//! ([`Container::transaction`]). Beside them: request charges ([`charge`]),
//! the change-feed processor ([`change_feed`]) and the atomicity fuzzer
//! ([`fuzz`]).
//!
//! ```
//! use partita::{Database, ScriptProperties};
//! use serde_json::json;
//!
//! let db = Database::in_memory();
//! let posts = db.create_container("posts", "/postId")?;
//! posts.create_item("p1", json!({"id": "p1", "postId": "p1", "commentCount": 0}), None)?;
//! posts.create_script(ScriptProperties::stored_procedure(
//!     "hello",
//!     "function hello(name) { getContext().getResponse().setBody('hello ' + name); }",
//! ))?;
//! let response = posts.execute_stored_procedure("hello", "p1", vec![json!("world")], None)?;
//! assert_eq!(response.body, "hello world");
//! # Ok::<(), partita::Error>(())
//! ```
//!
//! Non-goals: transactions spanning logical partitions, data sets larger
//! than memory.

pub mod batch_json;
pub mod change_feed;
pub mod charge;
mod container;
mod error;
pub mod fuzz;
mod import;
mod intercept;
mod recording;
mod scripts;

pub use container::{
    Container, Database, ItemResponse, ProcedureOptions, ProcedureResponse, QueryOptions,
    WriteOptions,
};
pub use error::{Error, Result, ScriptFailure};
pub use host_api::Statistics;
/// Strict JSON text: serde_json's parser, refusing duplicate member names
/// (what every untrusted document or parameter list goes through).
pub use host_api::strict;
pub use import::{ImportError, ImportOptions, ImportReport};
pub use partita_alloc::MiMalloc;
pub use recording::FailedOperation;
pub use runtime::{
    ExecutionCaps, Limits, SCRIPT_THREAD_STACK, WorkerOptions, WorkerPool, WorkerStats, worker_main,
};

/// The engine's error (what [`Error::Engine`] carries).
pub use engine::Error as EngineError;
pub use engine::query::Params;
pub use engine::{
    BatchOperation, BatchOperationKind, BatchOperationResult, BatchResponse, MAX_BATCH_OPERATIONS,
    MAX_PATCH_OPERATIONS, Patch, PatchOperation,
};
pub use engine::{
    CacheStats, Change, ChangeKind, Clock, ComputedProperty, ContainerProperties, Document,
    Durability, ErrorCode, FeedOptions, FeedPage, Lsn, ManualClock, Options, PartitionKey,
    QueryPage, Script, ScriptKind, ScriptLanguage, ScriptProperties, TriggerOperation, TriggerType,
    Txn, UniqueKey,
};
pub use engine::{
    CompositePath, DocumentPath, IndexPath, IndexingMode, IndexingPolicy, IndexingPolicyError,
    OrderByError, OrderByIndex, SortOrder,
};
