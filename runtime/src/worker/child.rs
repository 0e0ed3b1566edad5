//! The worker process's side: read a call, run it in this process's own
//! sandbox against a [`Proxy`] collection that forwards every operation to
//! the host, write the result, repeat until the host closes the pipe.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
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

/// Serves calls from the host until the host closes standard input.
/// Calls arrive on standard input, in the order the host sent them; each
/// names the channel of `channels` its answers go to. Calls that arrive
/// while one runs wait in a queue. Returns the process exit code: 0 at a
/// clean end, 2 when the host broke the protocol.
pub(super) fn serve(channels: Vec<Outbox>) -> i32 {
    let mut input = Inbox {
        input: BufReader::new(io::stdin().lock()),
        queue: VecDeque::new(),
    };
    // The text of the scripts this worker ran, so that a call names its
    // script instead of carrying it.
    let mut scripts: HashMap<ScriptRef, String> = HashMap::new();
    loop {
        let (seq, channel, message) = match input.next_call() {
            Ok(Some(call)) => call,
            Ok(None) => return 0,
            Err(_) => return 2,
        };
        let Some(output) = usize::try_from(channel).ok().and_then(|c| channels.get(c)) else {
            return 2;
        };
        let mut output = output.clone();
        // A failure to write an answer means that call's host side left
        // (it gave up waiting behind another call): go on with the next.
        let _ = match message {
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
                        continue;
                    }
                    match input.answer(seq) {
                        Ok(ToWorker::Script { body }) => {
                            if scripts.len() >= MAX_SCRIPTS {
                                scripts.clear();
                            }
                            scripts.insert(script.clone(), body);
                        }
                        Err(Answer::Cancelled) => continue,
                        Ok(_) | Err(Answer::Broken(_)) => return 2,
                    }
                }
                let body = &scripts[&script];
                let mut proxy = Proxy {
                    facts: collection,
                    partition_key,
                    spin,
                    speculate,
                    prefetch: RefCell::new(prefetch),
                    prefetch_used: false,
                    seq,
                    pipes: RefCell::new((&mut input, &mut output)),
                    links: RefCell::new(HashMap::new()),
                    broken: RefCell::new(false),
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
                if proxy.broken.into_inner() {
                    return 2;
                }
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
            ToWorker::Reply(_) | ToWorker::Script { .. } | ToWorker::Cancel => return 2,
        };
    }
}

/// Standard input: the calls the host sent, and the answers to the
/// running call's questions, in one stream.
struct Inbox {
    input: BufReader<io::StdinLock<'static>>,
    /// Calls that arrived while another ran, in the order sent.
    queue: VecDeque<(u64, u32, ToWorker)>,
}

/// Why no answer came for the running call.
enum Answer {
    /// Its host side gave up on it.
    Cancelled,
    /// The input ended or broke the protocol.
    Broken(io::Error),
}

impl Inbox {
    /// The next call to run: the oldest queued one, or the next to arrive.
    fn next_call(&mut self) -> io::Result<Option<(u64, u32, ToWorker)>> {
        loop {
            if let Some(call) = self.queue.pop_front() {
                return Ok(Some(call));
            }
            match wire::receive_addressed(&mut self.input)? {
                None => return Ok(None),
                // A call that already ended, or one never seen.
                Some((_, _, ToWorker::Cancel)) => {}
                Some(call @ (_, _, ToWorker::Run { .. } | ToWorker::Udf { .. })) => {
                    return Ok(Some(call));
                }
                Some(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "an answer with no call running",
                    ));
                }
            }
        }
    }

    /// The host's answer for call `seq`, queueing the calls that arrive
    /// before it.
    fn answer(&mut self, seq: u64) -> Result<ToWorker, Answer> {
        loop {
            let next = wire::receive_addressed(&mut self.input).map_err(Answer::Broken)?;
            let Some((of, channel, message)) = next else {
                return Err(Answer::Broken(io::ErrorKind::UnexpectedEof.into()));
            };
            match message {
                ToWorker::Run { .. } | ToWorker::Udf { .. } => {
                    self.queue.push_back((of, channel, message));
                }
                ToWorker::Cancel if of == seq => return Err(Answer::Cancelled),
                ToWorker::Cancel => self.queue.retain(|(queued, _, _)| *queued != of),
                answer if of == seq => return Ok(answer),
                _ => {
                    return Err(Answer::Broken(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "an answer for another call",
                    )));
                }
            }
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
    /// This call's sequence number: the host's answers carry it.
    seq: u64,
    /// Standard input and this call's output channel. In a cell because
    /// one operation (`resolve_document_link`) takes `&self` and still
    /// needs the host.
    pipes: RefCell<(&'a mut Inbox, &'a mut Outbox)>,
    /// The `_self` link of every document a point operation of this call
    /// returned, and its id: what the host would resolve that link to
    /// while the document exists, so resolving it costs no round trip.
    links: RefCell<HashMap<String, String>>,
    /// Whether standard input broke the protocol: the worker ends.
    broken: RefCell<bool>,
}

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
        if input.input.buffer().is_empty() {
            super::spin_until_readable(io::stdin(), self.spin);
        }
        match input.answer(self.seq) {
            Ok(ToWorker::Reply(reply)) => reply.map_err(HostError::from),
            Err(Answer::Cancelled) => Err(HostError::abort(
                ErrorCode::INTERNAL,
                "the call's host side gave up on it",
            )),
            Ok(_) => {
                *self.broken.borrow_mut() = true;
                Err(lost(io::ErrorKind::InvalidData.into()))
            }
            Err(Answer::Broken(e)) => {
                *self.broken.borrow_mut() = true;
                Err(lost(e))
            }
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

/// The environment variable in which the host names a worker's output
/// channels beyond standard output: inherited pipe descriptors, separated
/// by commas.
pub(super) const CHANNELS_VAR: &str = "PARTITA_WORKER_CHANNELS";

/// One of the worker's output channels: frames are written into a buffer and go
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
    /// This worker's output channels: a duplicate of standard output,
    /// then the pipes the host named in [`CHANNELS_VAR`].
    pub(super) fn channels() -> io::Result<Vec<Outbox>> {
        use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        let stdout = io::stdout().as_fd().try_clone_to_owned()?;
        let mut channels = vec![Outbox::new(File::from(stdout))];
        let named = std::env::var(CHANNELS_VAR).unwrap_or_default();
        let mut taken: Vec<RawFd> = Vec::new();
        for fd in named.split(',').filter(|fd| !fd.is_empty()) {
            let fd: RawFd = fd
                .parse()
                .map_err(|_| invalid(format!("{CHANNELS_VAR}: {fd:?} is not a descriptor")))?;
            if fd <= 2 || taken.contains(&fd) {
                return Err(invalid(format!("{CHANNELS_VAR}: {fd} cannot be a channel")));
            }
            taken.push(fd);
            // SAFETY: the host that started this process left these pipes
            // open in it for this purpose and named them here; nothing
            // else in the process owns them, and each is taken once.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            channels.push(Outbox::new(File::from(owned)));
        }
        Ok(channels)
    }

    fn new(out: File) -> Outbox {
        Outbox(Arc::new(Mutex::new(Pending {
            out,
            frames: Vec::new(),
            stale: false,
        })))
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
