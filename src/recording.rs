//! The operation a script's failure came from.
//!
//! A script that rethrows an operation's error (`if (err) throw err;`)
//! fails with the operation's status as its number, but its message names
//! neither the operation nor the document. [`Recording`] sits between a
//! script and its collection and remembers the last operation that failed,
//! so a failure whose number is that operation's status can say which
//! operation it was (users of Cosmos DB ask for this; the service does not
//! say). It works the same for JavaScript, WebAssembly and script workers,
//! since all of them reach the partition through one `Collection`, which
//! the facade wraps in [`crate::intercept::Intercepted`].

use host_api::HostError;
use serde_json::Value;

use crate::intercept::Interceptor;

/// A collection operation that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedOperation {
    /// What the script asked for: `read`, `create`, `replace`, `upsert`,
    /// `delete`, `query` or `readFeed`.
    pub operation: &'static str,
    /// The document's id, for point operations that name one.
    pub id: Option<String>,
    /// The status the operation failed with.
    pub status: u16,
}

impl FailedOperation {
    /// As error bodies carry it: `{"operation", "id", "status"}` (no `id`
    /// for queries and feeds).
    pub fn to_json(&self) -> Value {
        let mut json = serde_json::json!({"operation": self.operation, "status": self.status});
        if let Some(id) = &self.id {
            json["id"] = Value::String(id.clone());
        }
        json
    }
}

/// Remembers the last operation that failed.
#[derive(Default)]
pub(crate) struct Recording {
    failed: Option<FailedOperation>,
    /// `failed` at [`Interceptor::mark`].
    marked: Option<FailedOperation>,
}

impl Recording {
    /// The last operation that failed, if any did.
    pub(crate) fn failed(self) -> Option<FailedOperation> {
        self.failed
    }
}

impl Interceptor for Recording {
    fn after(&mut self, name: &'static str, id: Option<&str>, error: Option<&HostError>) {
        if let Some(e) = error {
            self.failed = Some(FailedOperation {
                operation: name,
                id: id.map(str::to_owned),
                status: e.code.as_u16(),
            });
        }
    }

    fn mark(&mut self) -> bool {
        self.marked.clone_from(&self.failed);
        true
    }

    fn roll_back(&mut self) {
        self.failed.clone_from(&self.marked);
    }
}
