//! Engine errors.
//!
//! Every variant carries what a caller needs to find the problem (container,
//! partition key, document id) and maps onto one status code of the shared
//! table, [`host_api::ErrorCode`]. Messages are lower-case and name the thing
//! that was wrong.

use std::path::PathBuf;
use std::time::Duration;

use host_api::{ErrorCode, HostError, PartitionKey};

/// Cosmos DB's substatus of a partition key that does not match the
/// document's, or does not name one logical partition.
pub const SUBSTATUS_PARTITION_KEY_MISMATCH: u16 = 1001;

/// Errors returned by the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request or document is malformed: a bad id, a value that is not a
    /// JSON object, a bad partition-key path, a bad continuation token.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// A write's document belongs to another logical partition than the one
    /// the request or transaction is for.
    #[error(
        "cross-partition write: document {id:?} in container {container:?} has partition key {document} but the request is for partition {request}; a transaction writes one logical partition"
    )]
    CrossPartition {
        /// The container.
        container: String,
        /// The document's id.
        id: String,
        /// The key read from the document.
        document: PartitionKey,
        /// The key the request or transaction was opened with.
        request: PartitionKey,
    },
    /// No document with this id exists in the partition.
    #[error("document {id:?} not found in container {container:?}, partition {partition_key}")]
    NotFound {
        /// The container.
        container: String,
        /// The logical partition.
        partition_key: PartitionKey,
        /// The missing document's id.
        id: String,
    },
    /// No container with this id exists.
    #[error("container {0:?} not found")]
    ContainerNotFound(String),
    /// A document with this id already exists in the partition.
    #[error("document {id:?} already exists in container {container:?}, partition {partition_key}")]
    Conflict {
        /// The container.
        container: String,
        /// The logical partition.
        partition_key: PartitionKey,
        /// The clashing id.
        id: String,
    },
    /// A write would give two documents of one logical partition the same
    /// values at the paths of one of the container's unique keys.
    #[error(
        "unique key violation in container {container:?}, partition {partition_key}: document {id:?} has {clash}"
    )]
    UniqueKeyConflict {
        /// The container.
        container: String,
        /// The logical partition.
        partition_key: PartitionKey,
        /// The document being written.
        id: String,
        /// The unique key's paths, the clashing values (`null` for a
        /// missing path) and the document that has them already:
        /// `[/name, /address/zip] = ["n",1], as document "d1" has`.
        clash: String,
    },
    /// A container with this id already exists.
    #[error("container {0:?} already exists")]
    ContainerExists(String),
    /// The `If-Match` etag is not the document's current etag.
    #[error(
        "precondition failed for document {id:?} in container {container:?}, partition {partition_key}: If-Match {expected} but the current etag is {}",
        actual.as_deref().unwrap_or("absent (no such document)")
    )]
    PreconditionFailed {
        /// The container.
        container: String,
        /// The logical partition.
        partition_key: PartitionKey,
        /// The document's id.
        id: String,
        /// The etag the caller sent.
        expected: String,
        /// The document's etag, if it exists.
        actual: Option<String>,
    },
    /// A patch's condition (`FROM c WHERE …`) is false for the document.
    #[error(
        "precondition failed for document {id:?} in container {container:?}, partition {partition_key}: the patch condition {condition:?} is false"
    )]
    ConditionNotMet {
        /// The container.
        container: String,
        /// The logical partition.
        partition_key: PartitionKey,
        /// The document's id.
        id: String,
        /// The condition.
        condition: String,
    },
    /// The document is larger than [`crate::MAX_DOCUMENT_SIZE`].
    #[error(
        "document {id:?} in container {container:?}, partition {partition_key} is {size} bytes, over the {limit}-byte limit"
    )]
    TooLarge {
        /// The container.
        container: String,
        /// The logical partition.
        partition_key: PartitionKey,
        /// The document's id.
        id: String,
        /// Its serialized size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The transaction waited too long for the partition's writer.
    #[error(
        "timed out after {waited:?} waiting for the writer of partition {partition_key} in container {container:?}"
    )]
    LockTimeout {
        /// The container.
        container: String,
        /// The logical partition.
        partition_key: PartitionKey,
        /// How long it waited.
        waited: Duration,
    },
    /// The transaction ran past its deadline and another writer took its
    /// partition's lock over: it can never commit.
    #[error(
        "the transaction on partition {partition_key} of container {container:?} ran past its deadline ({} ms) and was abandoned; nothing it wrote was committed",
        limit.as_millis()
    )]
    Abandoned {
        /// The container.
        container: String,
        /// The logical partition.
        partition_key: PartitionKey,
        /// How long the transaction was given.
        limit: Duration,
    },
    /// No script of this kind and id exists in the container.
    #[error("{kind} {id:?} not found in container {container:?}")]
    ScriptNotFound {
        /// The container.
        container: String,
        /// "stored procedure", "trigger" or "user-defined function".
        kind: &'static str,
        /// The script id.
        id: String,
    },
    /// A script of this kind and id already exists in the container.
    #[error("{kind} {id:?} already exists in container {container:?}")]
    ScriptExists {
        /// The container.
        container: String,
        /// "stored procedure", "trigger" or "user-defined function".
        kind: &'static str,
        /// The script id.
        id: String,
    },
    /// A request body other than a document is over its size limit.
    #[error("{what} is {size} bytes, over the {limit}-byte limit")]
    RequestTooLarge {
        /// What was too large.
        what: String,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A query is malformed or cannot run (syntax, unknown function, missing
    /// parameter, bad continuation token).
    #[error("bad query: {0}")]
    Query(#[from] crate::query::QueryError),
    /// The store refuses writes, and the message says why: an earlier
    /// storage failure made it read-only (it refuses writes rather than
    /// retrying an fsync whose outcome is unknown), or it could not write
    /// when it was opened
    /// (a full disk, a read-only file system, no permission; the message
    /// names the data directory, the cause and the remedy). Reads go on.
    #[error("{0}")]
    ReadOnly(String),
    /// The durable store failed (I/O, fsync, SQLite). The write was not
    /// acknowledged, and the store is now read-only.
    #[error("storage failure: {0}")]
    Storage(String),
    /// A point operation or transaction names a prefix of a hierarchical
    /// partition key: it needs one logical partition, the full key.
    #[error(
        "Partition key provided either doesn't correspond to definition in the collection or doesn't match partition key field values specified in the document. (Partition key {partition_key} gives {} of the {levels} levels of container {container:?}'s hierarchical partition key: a point operation, batch, transaction or script needs the full key; a prefix scopes only queries and feeds.)",
        partition_key.components().len()
    )]
    IncompletePartitionKey {
        /// The container.
        container: String,
        /// The prefix that was given.
        partition_key: PartitionKey,
        /// The number of levels of the container's key.
        levels: usize,
    },
    /// Another node committed to the logical partition after this node read
    /// it (a store shared by several nodes): the commit wrote nothing, the
    /// node dropped its copy of the partition, and the call can be retried
    /// on the partition as it is now (Cosmos DB's 449, RetryWith). The
    /// engine's own transaction entry points retry it a few times first.
    #[error(
        "partition {partition_key} of container {container:?} changed on another node after this transaction read it; nothing was written, retry"
    )]
    PartitionChanged {
        /// The container.
        container: String,
        /// The logical partition.
        partition_key: PartitionKey,
    },
    /// The storage rolled the commit back for a conflict with a concurrent
    /// transaction (PostgreSQL's serialization failure, SQLSTATE 40001,
    /// or deadlock, 40P01): nothing was written, the store stays
    /// writable, and the call can be retried as it is (449, RetryWith).
    /// The engine's own transaction entry points retry it a few times
    /// first, as they do [`Error::PartitionChanged`].
    #[error(
        "the commit to partition {partition_key} of container {container:?} was rolled back by the storage: {reason} (SQLSTATE {sqlstate}); nothing was written, retry"
    )]
    RolledBack {
        /// The container.
        container: String,
        /// The logical partition.
        partition_key: PartitionKey,
        /// The storage's code for the conflict (`40001`, `40P01`).
        sqlstate: String,
        /// The storage's message.
        reason: String,
    },
    /// The storage rolled a write other than a commit (creating, changing
    /// or deleting a container or a script; reserving a block of sequence
    /// numbers) back for a conflict with a concurrent transaction, as
    /// [`Error::RolledBack`] does a commit: nothing was written, the store
    /// stays writable, and the call can be retried as it is (449,
    /// RetryWith). The engine does not retry it.
    #[error(
        "{what} was rolled back by the storage: {reason} (SQLSTATE {sqlstate}); nothing was written, retry"
    )]
    WriteRolledBack {
        /// The write, with the store's location (`store a script in …`).
        what: String,
        /// The storage's code for the conflict (`40001`, `40P01`).
        sqlstate: String,
        /// The storage's message.
        reason: String,
    },
    /// Another process holds the data directory.
    #[error("data directory {} is in use by another process (lock file {})", .path.display(), .path.join(crate::database::LOCK_FILE).display())]
    Locked {
        /// The data directory.
        path: PathBuf,
    },
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The status code of the shared table.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::BadRequest(_)
            | Error::CrossPartition { .. }
            | Error::Query(_)
            | Error::IncompletePartitionKey { .. } => ErrorCode::BAD_REQUEST,
            Error::NotFound { .. } | Error::ContainerNotFound(_) | Error::ScriptNotFound { .. } => {
                ErrorCode::NOT_FOUND
            }
            Error::Conflict { .. }
            | Error::UniqueKeyConflict { .. }
            | Error::ContainerExists(_)
            | Error::ScriptExists { .. } => ErrorCode::CONFLICT,
            Error::PreconditionFailed { .. } | Error::ConditionNotMet { .. } => {
                ErrorCode::PRECONDITION_FAILED
            }
            Error::TooLarge { .. } | Error::RequestTooLarge { .. } => ErrorCode::TOO_LARGE,
            Error::LockTimeout { .. } | Error::Abandoned { .. } => ErrorCode::REQUEST_TIMEOUT,
            Error::Storage(_) => ErrorCode::INTERNAL,
            Error::ReadOnly(_) | Error::Locked { .. } => ErrorCode::SERVICE_UNAVAILABLE,
            Error::PartitionChanged { .. }
            | Error::RolledBack { .. }
            | Error::WriteRolledBack { .. } => ErrorCode::RETRY_WITH,
        }
    }

    /// The numeric status code (HTTP status, as Cosmos DB returns it).
    pub fn status(&self) -> u16 {
        self.code().as_u16()
    }

    /// Cosmos DB's substatus for this error, when it has one: 1001
    /// (partition-key mismatch) for a document whose key is not the
    /// request's and for an incomplete hierarchical key.
    pub fn substatus(&self) -> Option<u16> {
        match self {
            Error::CrossPartition { .. } | Error::IncompletePartitionKey { .. } => {
                Some(SUBSTATUS_PARTITION_KEY_MISMATCH)
            }
            _ => None,
        }
    }

    /// Whether retrying the same request unchanged can succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::LockTimeout { .. }
                | Error::PartitionChanged { .. }
                | Error::RolledBack { .. }
                | Error::WriteRolledBack { .. }
        )
    }

    /// Whether the error says that storage wrote nothing and stays
    /// writable: a write that failed with it leaves the store writable.
    pub(crate) fn wrote_nothing(&self) -> bool {
        matches!(
            self,
            Error::PartitionChanged { .. }
                | Error::RolledBack { .. }
                | Error::WriteRolledBack { .. }
                | Error::ContainerExists(_)
        )
    }

    /// The refusal of every write after the storage failure `cause`.
    pub(crate) fn after_failure(cause: impl std::fmt::Display) -> Error {
        Error::ReadOnly(format!(
            "the store refuses writes after an earlier storage failure: {cause}"
        ))
    }

    pub(crate) fn storage(context: &str, err: impl std::fmt::Display) -> Error {
        Error::Storage(format!("{context}: {err}"))
    }
}

/// An error of one attempt of a transaction, as
/// [`crate::Container::attempts`] sees it: a commit that lost its logical
/// partition to another node (449, [`Error::PartitionChanged`]) or that
/// the storage rolled back ([`Error::RolledBack`]) gives back the
/// partition's key, to run the transaction again; any other error ends
/// the call. Implemented by the engine's error and by the errors of the
/// layers above it that carry one (the facade's).
pub trait RetryWith: Sized {
    /// The key of the partition a 449 names, or the error itself.
    ///
    /// # Errors
    /// The error itself, when it is not a 449.
    fn retry_with(self) -> Result<PartitionKey, Self>;
}

impl RetryWith for Error {
    fn retry_with(self) -> Result<PartitionKey, Error> {
        match self {
            Error::PartitionChanged { partition_key, .. }
            | Error::RolledBack { partition_key, .. } => Ok(partition_key),
            other => Err(other),
        }
    }
}

impl From<Error> for HostError {
    fn from(err: Error) -> HostError {
        HostError::new(err.code(), err.to_string())
    }
}
