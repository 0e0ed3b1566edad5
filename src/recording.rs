//! The operation a script's failure came from.
//!
//! A script that rethrows an operation's error (`if (err) throw err;`)
//! fails with the operation's status as its number, but its message names
//! neither the operation nor the document. [`Recording`] sits between a
//! script and its collection and remembers the last operation that failed,
//! so a failure whose number is that operation's status can say which
//! operation it was (users of Cosmos DB ask for this; the service does not
//! say). It works the same for JavaScript, WebAssembly and script workers,
//! since all of them reach the partition through one `Collection`.

use host_api::WriteOptions;
use host_api::{Collection, Document, HostError, Page, PartitionKey, QueryRequest, Statistics};
use serde_json::Value;

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

/// A collection that remembers the last operation that failed.
pub(crate) struct Recording<'a> {
    inner: &'a mut dyn Collection,
    failed: Option<FailedOperation>,
}

impl<'a> Recording<'a> {
    pub(crate) fn new(inner: &'a mut dyn Collection) -> Recording<'a> {
        Recording {
            inner,
            failed: None,
        }
    }

    /// The last operation that failed, if any did.
    pub(crate) fn failed(self) -> Option<FailedOperation> {
        self.failed
    }

    /// Passes `result` through, remembering it when it failed.
    fn note<T>(
        &mut self,
        operation: &'static str,
        id: Option<&str>,
        result: Result<T, HostError>,
    ) -> Result<T, HostError> {
        if let Err(e) = &result {
            self.failed = Some(FailedOperation {
                operation,
                id: id.map(str::to_owned),
                status: e.code.as_u16(),
            });
        }
        result
    }
}

/// The id of a document body, for the record.
fn id_of(doc: &Value) -> Option<String> {
    doc.get("id").and_then(Value::as_str).map(str::to_owned)
}

impl Collection for Recording<'_> {
    fn container_id(&self) -> &str {
        self.inner.container_id()
    }

    fn partition_key(&self) -> &PartitionKey {
        self.inner.partition_key()
    }

    fn self_link(&self) -> String {
        self.inner.self_link()
    }

    fn alt_link(&self) -> String {
        self.inner.alt_link()
    }

    fn resolve_document_link(&self, link: &str) -> Result<String, HostError> {
        self.inner.resolve_document_link(link)
    }

    fn read(&mut self, id: &str) -> Result<Document, HostError> {
        let result = self.inner.read(id);
        self.note("read", Some(id), result)
    }

    fn read_feed(
        &mut self,
        page_size: Option<usize>,
        continuation: Option<&str>,
    ) -> Result<Page, HostError> {
        let result = self.inner.read_feed(page_size, continuation);
        self.note("readFeed", None, result)
    }

    fn create(&mut self, doc: Value) -> Result<Document, HostError> {
        let id = id_of(&doc);
        let result = self.inner.create(doc);
        self.note("create", id.as_deref(), result)
    }

    fn replace(
        &mut self,
        id: &str,
        doc: Value,
        options: WriteOptions<'_>,
    ) -> Result<Document, HostError> {
        let result = self.inner.replace(id, doc, options);
        self.note("replace", Some(id), result)
    }

    fn upsert(&mut self, doc: Value, options: WriteOptions<'_>) -> Result<Document, HostError> {
        let id = id_of(&doc);
        let result = self.inner.upsert(doc, options);
        self.note("upsert", id.as_deref(), result)
    }

    fn delete(&mut self, id: &str, options: WriteOptions<'_>) -> Result<(), HostError> {
        let result = self.inner.delete(id, options);
        self.note("delete", Some(id), result)
    }

    fn query(&mut self, request: QueryRequest<'_>) -> Result<Page, HostError> {
        let result = self.inner.query(request);
        self.note("query", None, result)
    }

    fn stats(&self) -> Statistics {
        self.inner.stats()
    }
}
