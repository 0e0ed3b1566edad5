//! The worker process's side: read a call, run it in this process's own
//! sandbox against a [`Proxy`] collection that forwards every operation to
//! the host, write the result, repeat until the host closes the pipe.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use host_api::{
    Collection, Document, ErrorCode, HostError, Page, PartitionKey, QueryRequest, Statistics,
    WriteOptions,
};
use serde_json::Value;

use super::wire::{
    self, CollectionWire, DocumentWire, FromWorker, HostCall, Prefetched, ReplyWire, ScriptRef,
    ToWorker,
};
use crate::js::{Seen, seen};
use crate::{Failure, Limits, Script};

/// The most script texts a worker keeps; past it, it starts over.
const MAX_SCRIPTS: usize = 256;

/// Serves calls from the host on standard input and output until the host
/// closes standard input. Returns the process exit code: 0 at a clean end,
/// 2 when the host broke the protocol.
pub(super) fn serve(outbox: Outbox) -> i32 {
    let mut input = BufReader::new(io::stdin().lock());
    let mut output = outbox;
    // The text of the scripts this worker ran, so that a call names its
    // script instead of carrying it.
    let mut scripts: HashMap<ScriptRef, String> = HashMap::new();
    loop {
        let message = match wire::receive::<ToWorker>(&mut input) {
            Ok(Some(message)) => message,
            Ok(None) => return 0,
            Err(_) => return 2,
        };
        let sent = match message {
            ToWorker::Run {
                script,
                invocation,
                limits,
                spin,
                collection,
                speculate,
                prefetch,
                ids,
            } => {
                crate::js::seed_ids(ids);
                let Ok(partition_key) = collection.partition_key() else {
                    return 2;
                };
                if !scripts.contains_key(&script) {
                    if wire::send(&mut output, &FromWorker::NeedScript).is_err() {
                        return 2;
                    }
                    let Ok(Some(ToWorker::Script { body })) = wire::receive(&mut input) else {
                        return 2;
                    };
                    if scripts.len() >= MAX_SCRIPTS {
                        scripts.clear();
                    }
                    scripts.insert(script.clone(), body);
                }
                let body = &scripts[&script];
                let mut proxy = Proxy {
                    facts: collection,
                    partition_key,
                    spin,
                    speculate,
                    prefetch: RefCell::new(prefetch),
                    prefetch_used: false,
                    pipes: RefCell::new((&mut input, &mut output)),
                    links: RefCell::new(HashMap::new()),
                };
                let script = Script {
                    id: &script.id,
                    version: script.version,
                    body,
                };
                let result = crate::js::run(
                    &script,
                    invocation.into(),
                    &mut proxy,
                    &Limits::from(limits),
                );
                let prefetch_used = proxy.prefetch_used;
                wire::send(
                    &mut output,
                    &FromWorker::Done {
                        result: result.map(Into::into).map_err(Into::into),
                        prefetch_used,
                    },
                )
            }
            ToWorker::Udf {
                script,
                args,
                limits,
            } => {
                let result: Result<Option<Value>, Failure> =
                    crate::js::run_udf(&script.as_script(), &args, &Limits::from(limits));
                wire::send(
                    &mut output,
                    &FromWorker::UdfDone(result.map_err(Into::into)),
                )
            }
            ToWorker::Reply(_) | ToWorker::Script { .. } => return 2,
        };
        if sent.is_err() {
            return 2;
        }
    }
}

/// The collection as the worker sees it: constant facts answered here,
/// every operation a round trip to the host, which performs it on the real
/// transaction.
struct Proxy<'a> {
    facts: CollectionWire,
    partition_key: PartitionKey,
    /// How long to poll for each reply before blocking (the host decides).
    spin: Duration,
    /// Whether writes whose callback sees only the error may be sent
    /// without waiting for their reply (the host decides).
    speculate: bool,
    /// The document the host read ahead for this call's first read; any
    /// other operation first makes it stale (it could write that document).
    prefetch: RefCell<Option<Prefetched>>,
    prefetch_used: bool,
    /// Standard input and output. In a cell because one operation
    /// (`resolve_document_link`) takes `&self` and still needs the host.
    pipes: RefCell<(&'a mut Input, &'a mut Output)>,
    /// The `_self` link of every document a point operation of this call
    /// returned, and its id: what the host would resolve that link to
    /// while the document exists, so resolving it costs no round trip.
    links: RefCell<HashMap<String, String>>,
}

type Input = BufReader<io::StdinLock<'static>>;
type Output = Outbox;

impl Proxy<'_> {
    fn call(&self, call: HostCall) -> Result<ReplyWire, HostError> {
        let lost = |e: io::Error| {
            HostError::abort(
                ErrorCode::INTERNAL,
                format!("the script worker lost its host: {e}"),
            )
        };
        self.prefetch.borrow_mut().take();
        let mut pipes = self.pipes.borrow_mut();
        let (input, output) = &mut *pipes;
        let unanswered = match seen() {
            Seen::Everything => None,
            Seen::OnlyError if !self.speculate => None,
            seen => placeholder(&call).map(|reply| (reply, seen)),
        };
        match unanswered {
            // Nothing will look at the result: send the operation with the
            // call's `Done`, one message, and let the host judge it.
            Some((reply, Seen::Nothing)) => {
                wire::send_unflushed(&mut **output, &FromWorker::Post(call)).map_err(lost)?;
                return Ok(reply);
            }
            // Only its failure would be seen: go on as if it succeeded,
            // without waiting. Sent with the next message that is flushed
            // (the next operation that waits, or the call's `Done`), so
            // that the host wakes once for all of them; if it failed, the
            // host stops this run there and runs the call again.
            Some((reply, _)) => {
                wire::send_unflushed(&mut **output, &FromWorker::Speculate(call)).map_err(lost)?;
                return Ok(reply);
            }
            None => wire::send(&mut **output, &FromWorker::Call(call)).map_err(lost)?,
        }
        if input.buffer().is_empty() {
            super::spin_until_readable(io::stdin(), self.spin);
        }
        match wire::receive::<ToWorker>(&mut **input).map_err(lost)? {
            Some(ToWorker::Reply(reply)) => reply.map_err(HostError::from),
            Some(_) | None => Err(lost(io::ErrorKind::InvalidData.into())),
        }
    }

    fn document(&self, call: HostCall) -> Result<Document, HostError> {
        self.reply_document(self.call(call))
    }

    /// A document reply, remembering its `_self` link.
    fn reply_document(&self, reply: Result<ReplyWire, HostError>) -> Result<Document, HostError> {
        match reply? {
            ReplyWire::Document(DocumentWire(document)) => {
                let value = document.value();
                if let (Some(Value::String(link)), Some(Value::String(id))) =
                    (value.get("_self"), value.get("id"))
                {
                    self.links.borrow_mut().insert(link.clone(), id.clone());
                }
                Ok(document)
            }
            _ => Err(unexpected()),
        }
    }

    /// The id `link` names, when the answer is known here: the container's
    /// name-based link and an id (exactly as the host's collection accepts
    /// it), or the `_self` of a document this call was given and has not
    /// deleted.
    fn known_link(&self, link: &str) -> Option<String> {
        let name = link
            .strip_prefix(self.facts.alt_link.as_str())
            .and_then(|rest| rest.strip_prefix("/docs/"))
            .map(|id| id.strip_suffix('/').unwrap_or(id))
            .filter(|id| !id.is_empty() && !id.contains('/'));
        match name {
            Some(id) => Some(id.to_owned()),
            None => self.links.borrow().get(link).cloned(),
        }
    }

    fn page(&self, call: HostCall) -> Result<Page, HostError> {
        match self.call(call)? {
            ReplyWire::Page {
                items,
                continuation,
            } => Ok(Page {
                items,
                continuation,
            }),
            _ => Err(unexpected()),
        }
    }
}

/// What a point operation answers when its result is not waited for: no
/// script code reads it.
fn placeholder(call: &HostCall) -> Option<ReplyWire> {
    match call {
        HostCall::Create { .. }
        | HostCall::Replace { .. }
        | HostCall::Upsert { .. }
        | HostCall::Read { .. } => Some(ReplyWire::Document(DocumentWire(Document::new(
            Value::Null,
        )))),
        HostCall::Delete { .. } => Some(ReplyWire::Done),
        HostCall::ResolveLink { .. } | HostCall::ReadFeed { .. } | HostCall::Query { .. } => None,
    }
}

fn unexpected() -> HostError {
    HostError::abort(
        ErrorCode::INTERNAL,
        "the host answered a script worker's operation with the wrong kind of reply",
    )
}

fn if_match(options: WriteOptions<'_>) -> Option<String> {
    options.if_match.map(str::to_owned)
}

impl Collection for Proxy<'_> {
    fn container_id(&self) -> &str {
        &self.facts.container_id
    }

    fn partition_key(&self) -> &PartitionKey {
        &self.partition_key
    }

    fn self_link(&self) -> String {
        self.facts.self_link.clone()
    }

    fn alt_link(&self) -> String {
        self.facts.alt_link.clone()
    }

    /// A round trip: the host's collection resolves links (a `_self` link
    /// means looking the document up).
    fn resolve_document_link(&self, link: &str) -> Result<String, HostError> {
        if let Some(id) = self.known_link(link) {
            return Ok(id);
        }
        match self.call(HostCall::ResolveLink {
            link: link.to_owned(),
        })? {
            ReplyWire::Id(id) => Ok(id),
            _ => Err(unexpected()),
        }
    }

    fn read(&mut self, id: &str) -> Result<Document, HostError> {
        if let Some(prefetched) = self.prefetch.get_mut().take_if(|p| p.id == id) {
            self.prefetch_used = true;
            return self.reply_document(Ok(ReplyWire::Document(prefetched.document)));
        }
        self.document(HostCall::Read { id: id.to_owned() })
    }

    fn read_feed(
        &mut self,
        page_size: Option<usize>,
        continuation: Option<&str>,
    ) -> Result<Page, HostError> {
        self.page(HostCall::ReadFeed {
            page_size,
            continuation: continuation.map(str::to_owned),
        })
    }

    fn create(&mut self, doc: Value) -> Result<Document, HostError> {
        self.document(HostCall::Create { doc })
    }

    fn replace(
        &mut self,
        id: &str,
        doc: Value,
        options: WriteOptions<'_>,
    ) -> Result<Document, HostError> {
        self.document(HostCall::Replace {
            id: id.to_owned(),
            doc,
            if_match: if_match(options),
        })
    }

    fn upsert(&mut self, doc: Value, options: WriteOptions<'_>) -> Result<Document, HostError> {
        self.document(HostCall::Upsert {
            doc,
            if_match: if_match(options),
        })
    }

    fn delete(&mut self, id: &str, options: WriteOptions<'_>) -> Result<(), HostError> {
        match self.call(HostCall::Delete {
            id: id.to_owned(),
            if_match: if_match(options),
        })? {
            ReplyWire::Done => {
                // Its `_self` names no document any more (a new one with
                // this id gets a new rid).
                self.links.get_mut().retain(|_, known| known != id);
                Ok(())
            }
            _ => Err(unexpected()),
        }
    }

    fn query(&mut self, request: QueryRequest<'_>) -> Result<Page, HostError> {
        self.page(HostCall::Query {
            sql: request.sql.to_owned(),
            parameters: request.parameters.clone(),
            page_size: request.page_size,
            continuation: request.continuation.map(str::to_owned),
        })
    }

    /// The host fills in the call's statistics from its own collection.
    fn stats(&self) -> Statistics {
        Statistics::default()
    }
}

/// The worker's standard output: frames are written into a buffer and go
/// out when the script thread flushes (a message that must go at once) or
/// when the buffer has waited past a tick of [`Outbox::flush_stale`]. A
/// speculated write is buffered until the next flush, so that the host
/// wakes once for it and what follows; the tick bounds how long a failed
/// one can go unnoticed by a script that then never calls the host.
#[derive(Clone)]
pub(super) struct Outbox(Arc<Mutex<Pending>>);

struct Pending {
    out: File,
    frames: Vec<u8>,
    /// Whether `frames` was already waiting at the last tick.
    stale: bool,
}

impl Outbox {
    /// An outbox writing to a duplicate of this process's standard output.
    pub(super) fn stdout() -> io::Result<Outbox> {
        use std::os::fd::AsFd;
        let out = File::from(io::stdout().as_fd().try_clone_to_owned()?);
        Ok(Outbox(Arc::new(Mutex::new(Pending {
            out,
            frames: Vec::new(),
            stale: false,
        }))))
    }

    fn pending(&self) -> MutexGuard<'_, Pending> {
        // Whole frames are appended under the lock: a panic cannot leave
        // half of one.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Called every tick by the watcher thread: writes out frames that
    /// were already waiting at the previous tick.
    pub(super) fn flush_stale(&self) {
        let mut pending = self.pending();
        if pending.frames.is_empty() {
            return;
        }
        if pending.stale {
            // A failure here is the script thread's to find out.
            let _ = pending.write_out();
        } else {
            pending.stale = true;
        }
    }
}

impl Pending {
    fn write_out(&mut self) -> io::Result<()> {
        let result = self.out.write_all(&self.frames);
        self.frames.clear();
        self.stale = false;
        result
    }
}

impl Write for Outbox {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.pending().frames.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut pending = self.pending();
        if pending.frames.is_empty() {
            return Ok(());
        }
        pending.write_out()
    }
}
