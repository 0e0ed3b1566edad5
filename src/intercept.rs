//! A `Collection` that lets hooks see, and fail, every data operation a
//! script performs, and passes everything through to the real collection.
//!
//! Two things stand between a script and its transaction this way: the
//! record of the operation a failure came from ([`crate::recording`]), and
//! the atomicity fuzzer's fault injection (`fuzz/inject.rs`). Each is an
//! [`Interceptor`]; [`Intercepted`] does the delegation once for both.

use host_api::{
    Collection, Document, HostError, Page, PartitionKey, QueryRequest, Statistics, WriteOptions,
};
use serde_json::Value;

/// What happens around each data operation (read, readFeed, query,
/// create, replace, upsert, delete).
pub(crate) trait Interceptor {
    /// Before the operation `name` runs; an error fails it without running
    /// it.
    fn before(&mut self, _name: &'static str) -> Result<(), HostError> {
        Ok(())
    }

    /// After the operation ran, or was failed by [`Interceptor::before`]:
    /// the document's id for point operations that name one, and the
    /// error when it failed.
    fn after(&mut self, _name: &'static str, _id: Option<&str>, _error: Option<&HostError>) {}

    /// Remembers what it has seen so far, for [`Interceptor::roll_back`]
    /// (see [`Collection::mark`]). Returns `false`, the default, when it
    /// cannot: the collection then cannot roll back either. The fuzzer's
    /// fault injection cannot, as a run again would meet other faults.
    fn mark(&mut self) -> bool {
        false
    }

    /// Forgets what it saw since [`Interceptor::mark`].
    fn roll_back(&mut self) {}
}

/// `inner`, with `hooks` around every data operation.
pub(crate) struct Intercepted<'a, I> {
    inner: &'a mut dyn Collection,
    /// The interceptor, for its caller to read what it saw.
    pub(crate) hooks: I,
}

impl<'a, I: Interceptor> Intercepted<'a, I> {
    pub(crate) fn new(inner: &'a mut dyn Collection, hooks: I) -> Intercepted<'a, I> {
        Intercepted { inner, hooks }
    }

    fn run<T>(
        &mut self,
        name: &'static str,
        id: Option<&str>,
        op: impl FnOnce(&mut dyn Collection) -> Result<T, HostError>,
    ) -> Result<T, HostError> {
        let result = self.hooks.before(name).and_then(|()| op(&mut *self.inner));
        self.hooks.after(name, id, result.as_ref().err());
        result
    }
}

/// The id of a document body, for the hooks.
fn id_of(doc: &Value) -> Option<String> {
    doc.get("id").and_then(Value::as_str).map(str::to_owned)
}

impl<I: Interceptor> Collection for Intercepted<'_, I> {
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
        self.run("read", Some(id), |c| c.read(id))
    }

    fn read_feed(
        &mut self,
        page_size: Option<usize>,
        continuation: Option<&str>,
    ) -> Result<Page, HostError> {
        self.run("readFeed", None, |c| c.read_feed(page_size, continuation))
    }

    fn create(&mut self, doc: Value) -> Result<Document, HostError> {
        let id = id_of(&doc);
        self.run("create", id.as_deref(), |c| c.create(doc))
    }

    fn replace(
        &mut self,
        id: &str,
        doc: Value,
        options: WriteOptions<'_>,
    ) -> Result<Document, HostError> {
        self.run("replace", Some(id), |c| c.replace(id, doc, options))
    }

    fn upsert(&mut self, doc: Value, options: WriteOptions<'_>) -> Result<Document, HostError> {
        let id = id_of(&doc);
        self.run("upsert", id.as_deref(), |c| c.upsert(doc, options))
    }

    fn delete(&mut self, id: &str, options: WriteOptions<'_>) -> Result<(), HostError> {
        self.run("delete", Some(id), |c| c.delete(id, options))
    }

    fn query(&mut self, request: QueryRequest<'_>) -> Result<Page, HostError> {
        self.run("query", None, |c| c.query(request))
    }

    fn stats(&self) -> Statistics {
        self.inner.stats()
    }

    fn mark(&mut self) -> bool {
        self.hooks.mark() && self.inner.mark()
    }

    fn roll_back(&mut self) {
        self.hooks.roll_back();
        self.inner.roll_back();
    }
}
