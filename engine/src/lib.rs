//! Partita's engine: a partitioned, transactional JSON document store on the
//! Azure Cosmos DB model.
//!
//! A [`Database`] holds [`Container`]s. Each container has a partition-key
//! path (`/postId`); all documents with the same value at that path form a
//! logical partition, the scope of a [`Txn`]. Logical partitions are hashed
//! onto a fixed number of physical partitions.
//!
//! ```text
//!   Database ──► Container "posts" (/postId, 4 physical partitions)
//!                  ├─ physical 0 ──► logical ["p1"] ──► { p1, c1, c2 }
//!                  ├─ physical 1 ──► logical ["p7"] ──► { p7 }
//!                  └─ …
//! ```
//!
//! Every commit is all-or-nothing, durable before it is acknowledged (see
//! [`storage`]), and appended to the container's change log with a [`Lsn`].
//! The engine never runs user code: scripts live in `runtime`, which drives
//! a [`Txn`].
//!
//! ```
//! use engine::{Database, Error};
//! use serde_json::json;
//!
//! let db = Database::in_memory();
//! let posts = db.create_container("posts", "/postId")?;
//! let post = posts.create_item("p1", json!({"id": "p1", "postId": "p1", "title": "Hello"}), None)?;
//! assert_eq!(post["title"], "Hello");
//! assert!(post.etag().starts_with('"'));
//! # Ok::<(), Error>(())
//! ```
//!
//! Non-goals: transactions across logical partitions, data sets larger than
//! memory. Queries use Cosmos DB's SQL dialect ([`query`], [`Container::query_items`]).

pub mod batch;
mod cache;
mod clock;
mod collection;
mod container;
mod database;
mod document;
mod error;
pub mod indexing;
mod partition;
pub mod patch;
pub mod query;
pub mod range_index;
mod script;
mod settings;
mod stamp;
pub mod storage;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod txn;

pub use batch::{
    BatchOperation, BatchOperationKind, BatchOperationResult, BatchResponse, MAX_BATCH_OPERATIONS,
};
pub use cache::CacheStats;
pub use clock::{Clock, ManualClock};
pub use collection::QueryItemsOptions;
pub use container::{ATTEMPTS, Container, ContainerProperties, DATABASE_ID, FeedOptions, FeedPage};
pub use database::{DATA_FILE, Database, LOCK_FILE, Options};
pub use document::{Document, MAX_DOCUMENT_SIZE, MAX_ID_LEN, MAX_NESTING, validate_id};
pub use error::{Error, Result, RetryWith, SUBSTATUS_PARTITION_KEY_MISMATCH};
pub use host_api::{Collection, ErrorCode, PartitionKey};
pub use host_api::{ScriptKind, ScriptLanguage, TriggerOperation, TriggerType};
pub use indexing::{
    CompositePath, DocumentPath, IndexPath, IndexingMode, IndexingPolicy, IndexingPolicyError,
    OrderByError, OrderByIndex, SortOrder,
};
pub use partition::{PartitionState, physical_partition};
pub use patch::{MAX_PATCH_OPERATIONS, Patch, PatchOperation};
pub use query::{QueryPage, QueryStats};
pub use script::{MAX_SCRIPT_SIZE, Script, ScriptProperties, TriggerNames};
pub use settings::{
    ComputedProperty, MAX_UNIQUE_KEY_PATHS, MAX_UNIQUE_KEYS, UniqueKey, parse_computed_properties,
    parse_unique_keys,
};
pub use storage::{Change, ChangeKind, Durability, Lsn};
pub use txn::{ItemOptions, Txn};

/// Physical partitions per container unless the container says otherwise.
pub const DEFAULT_PHYSICAL_PARTITIONS: u32 = 4;

/// The longest string partition-key value, in bytes (Cosmos DB's limit).
pub const MAX_PARTITION_KEY_SIZE: usize = 2048;

/// The most physical partitions a container may have.
pub const MAX_PHYSICAL_PARTITIONS: u32 = 1024;
