//! The messages between the host and a script worker process, and their
//! framing: a 4-byte little-endian length, then that many bytes of
//! MessagePack (`rmp-serde`, structs as maps). MessagePack rather than JSON:
//! a createComment's messages carry two documents each way, and decoding
//! them is cheaper without JSON's escapes and number parsing.
//!
//! A worker has one input (its stdin) shared by the calls sent to it, and
//! one output channel per call it can hold (stdout and inherited pipes).
//! So every frame the host sends is *addressed*: after the length, the
//! call's sequence number (8 bytes) and the channel its answers go to (4
//! bytes, both little-endian); see [`Addressed`].
//!
//! ```text
//!   host ──Run / Udf──► worker      (a Run names its script and may carry a document read ahead)
//!   host ──Cancel─────► worker      (a call queued behind another left: drop it)
//!   host ◄──NeedScript─ worker      (a script it has not run: the host sends its text)
//!   host ──Script─────► worker
//!   host ◄──Call────── worker      (one per collection operation whose result is seen)
//!   host ──Reply─────► worker
//!   host ◄──Speculate─ worker      (a write whose callback sees only the error; no reply)
//!   host ◄──Post────── worker      (the call's last operation, unseen; no reply)
//!   host ◄──Done────── worker      (the call's output or failure)
//! ```
//!
//! The types here mirror the runtime's public ones field by field, so that
//! those stay free of serde; the conversions are the only place that knows
//! both. The worker runs untrusted code, so everything the host reads is
//! checked like any other input: a frame over [`MAX_FRAME`], bad MessagePack or an
//! unexpected message ends the worker, never the host.

use std::hash::{BuildHasher, RandomState};
use std::io::{self, Read, Write};
use std::sync::OnceLock;
use std::time::Duration;

use host_api::{Document, ErrorCode, HostError, Page, PartitionKey, Statistics, TriggerOperation};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Budget, Error, Failure, Invocation, Limits, Output, Script};

/// The largest frame either side accepts: far above a page of 2 MB
/// documents, far below what would hurt the host.
pub(super) const MAX_FRAME: usize = 256 << 20;

/// Host to worker.
// Built once per message and serialized at once: the size difference
// between a call and a reply costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Serialize, Deserialize)]
pub(super) enum ToWorker {
    /// Run a procedure or trigger.
    Run {
        script: ScriptRef,
        invocation: InvocationWire,
        limits: LimitsWire,
        /// How long the worker polls for each reply before it blocks.
        spin: Duration,
        collection: CollectionWire,
        /// Whether a write whose callback sees only the error may be sent
        /// as a [`FromWorker::Speculate`].
        speculate: bool,
        /// A document the host read before the call, as the script's first
        /// read is expected to ask for it.
        prefetch: Option<Prefetched>,
        /// The host thread's id generator: the ids the script generates
        /// are the ones it would generate in process, so a seeded call
        /// (`runtime::seed_generated_ids`, the fuzzer) is deterministic in
        /// a worker too.
        ids: u64,
    },
    /// Call a user-defined function.
    Udf {
        script: ScriptWire,
        args: Vec<Option<Value>>,
        limits: LimitsWire,
    },
    /// The text of the script the worker asked for.
    Script { body: String },
    /// The answer to the worker's last [`FromWorker::Call`].
    Reply(Result<ReplyWire, HostErrorWire>),
    /// Drop the call with this frame's sequence number: its host side
    /// gave up waiting behind another call and runs it elsewhere.
    Cancel,
}

/// Worker to host.
#[derive(Serialize, Deserialize)]
pub(super) enum FromWorker {
    /// The text of the script of the [`ToWorker::Run`] just received,
    /// which this worker has not run before.
    NeedScript,
    /// A collection operation for the host to perform.
    Call(HostCall),
    /// The call's last operation, whose result no script code sees: the
    /// host performs it and sends no reply; if it fails, the call fails
    /// with its error (whatever the `Done` that follows says).
    Post(HostCall),
    /// A write whose callback sees only whether it failed, sent without
    /// waiting: the worker went on as if it succeeded. The host performs
    /// it and sends no reply; if it fails, the host undoes the call and
    /// runs it again without speculation.
    Speculate(HostCall),
    /// A procedure or trigger finished.
    Done {
        result: Result<OutputWire, FailureWire>,
        /// Whether the script's read took the [`Prefetched`] document.
        prefetch_used: bool,
    },
    /// A user-defined function finished.
    UdfDone(Result<Option<Value>, FailureWire>),
}

/// A point read the host performed for the worker before the call.
#[derive(Serialize, Deserialize)]
pub(super) struct Prefetched {
    pub(super) id: String,
    pub(super) document: DocumentWire,
}

/// A document on the wire: written from the host's shared copy (no clone
/// of a stored document to send it), read into a new one.
pub(super) struct DocumentWire(pub(super) Document);

impl Serialize for DocumentWire {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for DocumentWire {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|value| DocumentWire(Document::new(value)))
    }
}

/// A script's identity and text.
#[derive(Serialize, Deserialize)]
pub(super) struct ScriptWire {
    pub(super) id: String,
    pub(super) version: u64,
    pub(super) body: String,
}

impl From<&Script<'_>> for ScriptWire {
    fn from(script: &Script<'_>) -> ScriptWire {
        ScriptWire {
            id: script.id.to_owned(),
            version: script.version,
            body: script.body.to_owned(),
        }
    }
}

impl ScriptWire {
    pub(super) fn as_script(&self) -> Script<'_> {
        Script {
            id: &self.id,
            version: self.version,
            body: &self.body,
        }
    }
}

/// A script by identity only: a worker keeps the text of the scripts it
/// ran, and asks for it ([`FromWorker::NeedScript`]) when it has not.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct ScriptRef {
    pub(super) id: String,
    pub(super) version: u64,
    /// A hash of the text: two containers can each have a version 1 of
    /// `createComment`. Keyed at random once per host process, so that no
    /// one can write a script whose text hashes like another's.
    pub(super) hash: u64,
}

impl From<&Script<'_>> for ScriptRef {
    fn from(script: &Script<'_>) -> ScriptRef {
        static KEYS: OnceLock<RandomState> = OnceLock::new();
        ScriptRef {
            id: script.id.to_owned(),
            version: script.version,
            hash: KEYS.get_or_init(RandomState::new).hash_one(script.body),
        }
    }
}

/// The collection's constant facts, sent with the call so the worker
/// answers them without a round trip.
#[derive(Serialize, Deserialize)]
pub(super) struct CollectionWire {
    pub(super) container_id: String,
    /// [`PartitionKey::to_json_array`].
    pub(super) partition_key: String,
    pub(super) self_link: String,
    pub(super) alt_link: String,
}

impl CollectionWire {
    pub(super) fn partition_key(&self) -> io::Result<PartitionKey> {
        PartitionKey::parse(&self.partition_key).map_err(invalid)
    }
}

/// [`Limits`] without the worker pool (a worker runs its calls in place).
#[derive(Serialize, Deserialize)]
pub(super) struct LimitsWire {
    instructions: u64,
    accept_instructions: u64,
    fuel: u64,
    accept_fuel: u64,
    max_operations: u64,
    wall_time: Duration,
    accept_wall_time: Duration,
    max_memory_bytes: usize,
    recursion: usize,
    max_log_bytes: usize,
}

impl From<&Limits> for LimitsWire {
    fn from(l: &Limits) -> LimitsWire {
        LimitsWire {
            instructions: l.instructions,
            accept_instructions: l.accept_instructions,
            fuel: l.fuel,
            accept_fuel: l.accept_fuel,
            max_operations: l.max_operations,
            wall_time: l.wall_time,
            accept_wall_time: l.accept_wall_time,
            max_memory_bytes: l.max_memory_bytes,
            recursion: l.recursion,
            max_log_bytes: l.max_log_bytes,
        }
    }
}

impl From<LimitsWire> for Limits {
    fn from(l: LimitsWire) -> Limits {
        Limits {
            instructions: l.instructions,
            accept_instructions: l.accept_instructions,
            fuel: l.fuel,
            accept_fuel: l.accept_fuel,
            max_operations: l.max_operations,
            wall_time: l.wall_time,
            accept_wall_time: l.accept_wall_time,
            max_memory_bytes: l.max_memory_bytes,
            recursion: l.recursion,
            max_log_bytes: l.max_log_bytes,
            workers: None,
        }
    }
}

/// [`Invocation`].
#[derive(Serialize, Deserialize)]
pub(super) enum InvocationWire {
    Procedure {
        params: Vec<Value>,
    },
    PreTrigger {
        request_body: Value,
        operation: OperationWire,
    },
    PostTrigger {
        request_body: Value,
        response_body: Value,
        operation: OperationWire,
    },
}

/// [`TriggerOperation`].
#[derive(Clone, Copy, Serialize, Deserialize)]
pub(super) enum OperationWire {
    All,
    Create,
    Replace,
    Delete,
    Upsert,
}

impl From<TriggerOperation> for OperationWire {
    fn from(op: TriggerOperation) -> OperationWire {
        match op {
            TriggerOperation::All => OperationWire::All,
            TriggerOperation::Create => OperationWire::Create,
            TriggerOperation::Replace => OperationWire::Replace,
            TriggerOperation::Delete => OperationWire::Delete,
            TriggerOperation::Upsert => OperationWire::Upsert,
        }
    }
}

impl From<OperationWire> for TriggerOperation {
    fn from(op: OperationWire) -> TriggerOperation {
        match op {
            OperationWire::All => TriggerOperation::All,
            OperationWire::Create => TriggerOperation::Create,
            OperationWire::Replace => TriggerOperation::Replace,
            OperationWire::Delete => TriggerOperation::Delete,
            OperationWire::Upsert => TriggerOperation::Upsert,
        }
    }
}

impl From<Invocation> for InvocationWire {
    fn from(inv: Invocation) -> InvocationWire {
        match inv {
            Invocation::Procedure { params } => InvocationWire::Procedure { params },
            Invocation::PreTrigger {
                request_body,
                operation,
            } => InvocationWire::PreTrigger {
                request_body,
                operation: operation.into(),
            },
            Invocation::PostTrigger {
                request_body,
                response_body,
                operation,
            } => InvocationWire::PostTrigger {
                request_body,
                response_body,
                operation: operation.into(),
            },
        }
    }
}

impl From<InvocationWire> for Invocation {
    fn from(inv: InvocationWire) -> Invocation {
        match inv {
            InvocationWire::Procedure { params } => Invocation::Procedure { params },
            InvocationWire::PreTrigger {
                request_body,
                operation,
            } => Invocation::PreTrigger {
                request_body,
                operation: operation.into(),
            },
            InvocationWire::PostTrigger {
                request_body,
                response_body,
                operation,
            } => Invocation::PostTrigger {
                request_body,
                response_body,
                operation: operation.into(),
            },
        }
    }
}

/// A collection operation, as [`host_api::Collection`] names them.
#[derive(Serialize, Deserialize)]
pub(super) enum HostCall {
    ResolveLink {
        link: String,
    },
    Read {
        id: String,
    },
    ReadFeed {
        page_size: Option<usize>,
        continuation: Option<String>,
    },
    Create {
        doc: Value,
    },
    Replace {
        id: String,
        doc: Value,
        if_match: Option<String>,
    },
    Upsert {
        doc: Value,
        if_match: Option<String>,
    },
    Delete {
        id: String,
        if_match: Option<String>,
    },
    Query {
        sql: String,
        parameters: Map<String, Value>,
        page_size: Option<usize>,
        continuation: Option<String>,
    },
}

/// What a successful operation returned.
#[derive(Serialize, Deserialize)]
pub(super) enum ReplyWire {
    Id(String),
    Document(DocumentWire),
    Page {
        items: Vec<Value>,
        continuation: Option<String>,
    },
    Done,
}

impl From<Page> for ReplyWire {
    fn from(page: Page) -> ReplyWire {
        ReplyWire::Page {
            items: page.items,
            continuation: page.continuation,
        }
    }
}

impl From<Document> for ReplyWire {
    fn from(doc: Document) -> ReplyWire {
        ReplyWire::Document(DocumentWire(doc))
    }
}

/// [`HostError`].
#[derive(Serialize, Deserialize)]
pub(super) struct HostErrorWire {
    code: u16,
    message: String,
    fatal: bool,
}

impl From<HostError> for HostErrorWire {
    fn from(e: HostError) -> HostErrorWire {
        HostErrorWire {
            code: e.code.as_u16(),
            message: e.message,
            fatal: e.fatal,
        }
    }
}

impl From<HostErrorWire> for HostError {
    fn from(e: HostErrorWire) -> HostError {
        // A code outside the table can only come from a broken peer: keep
        // its number in the message and make it a 500.
        let (code, message) = match ErrorCode::from_u16(e.code) {
            Some(code) => (code, e.message),
            None => (
                ErrorCode::INTERNAL,
                format!("{} (status {})", e.message, e.code),
            ),
        };
        HostError {
            code,
            message,
            fatal: e.fatal,
        }
    }
}

/// [`Output`].
#[derive(Serialize, Deserialize)]
pub(super) struct OutputWire {
    body: Option<Value>,
    logs: String,
    stats: StatsWire,
}

/// [`Failure`].
#[derive(Serialize, Deserialize)]
pub(super) struct FailureWire {
    error: ErrorWire,
    logs: String,
    stats: StatsWire,
}

/// [`Statistics`]; the collection part is the host's to fill in.
#[derive(Serialize, Deserialize)]
pub(super) struct StatsWire {
    instructions: u64,
    wall_time: Duration,
}

/// [`Error`].
#[derive(Serialize, Deserialize)]
enum ErrorWire {
    Script {
        message: String,
        number: u16,
        stack: Option<String>,
    },
    Host(HostErrorWire),
    Budget(BudgetWire),
    Compile(String),
    Internal(String),
}

/// [`Budget`] (JavaScript's).
#[derive(Serialize, Deserialize)]
enum BudgetWire {
    Instructions { limit: u64 },
    WallTime { limit: Duration },
    Memory { limit: usize, what: String },
    Recursion { limit: usize },
}

impl From<Output> for OutputWire {
    fn from(o: Output) -> OutputWire {
        OutputWire {
            body: o.body,
            logs: o.logs,
            stats: StatsWire::from(o.stats),
        }
    }
}

impl From<Statistics> for StatsWire {
    fn from(s: Statistics) -> StatsWire {
        StatsWire {
            instructions: s.instructions,
            wall_time: s.wall_time,
        }
    }
}

impl From<StatsWire> for Statistics {
    fn from(s: StatsWire) -> Statistics {
        Statistics {
            instructions: s.instructions,
            fuel: 0,
            wall_time: s.wall_time,
            ..Statistics::default()
        }
    }
}

impl From<OutputWire> for Output {
    fn from(o: OutputWire) -> Output {
        Output {
            body: o.body,
            logs: o.logs,
            stats: o.stats.into(),
        }
    }
}

impl From<Failure> for FailureWire {
    fn from(f: Failure) -> FailureWire {
        let error = match f.error {
            Error::Script {
                message,
                number,
                stack,
            } => ErrorWire::Script {
                message,
                number,
                stack,
            },
            Error::Host(e) => ErrorWire::Host(e.into()),
            Error::Budget(b) => match b {
                Budget::Instructions { limit } => {
                    ErrorWire::Budget(BudgetWire::Instructions { limit })
                }
                Budget::WallTime { limit } => ErrorWire::Budget(BudgetWire::WallTime { limit }),
                Budget::Memory { limit, what } => {
                    ErrorWire::Budget(BudgetWire::Memory { limit, what })
                }
                Budget::Recursion { limit } => ErrorWire::Budget(BudgetWire::Recursion { limit }),
                // The JavaScript sandbox never reports these.
                other @ (Budget::Fuel { .. } | Budget::NativeStack { .. }) => {
                    ErrorWire::Internal(format!("unexpected budget from the sandbox: {other}"))
                }
            },
            Error::Compile(m) => ErrorWire::Compile(m),
            Error::Internal(m) => ErrorWire::Internal(m),
            Error::Trap { message, .. } => {
                ErrorWire::Internal(format!("unexpected trap from the sandbox: {message}"))
            }
        };
        FailureWire {
            error,
            logs: f.logs,
            stats: f.stats.into(),
        }
    }
}

impl From<FailureWire> for Failure {
    fn from(f: FailureWire) -> Failure {
        let error = match f.error {
            ErrorWire::Script {
                message,
                number,
                stack,
            } => Error::Script {
                message,
                number,
                stack,
            },
            ErrorWire::Host(e) => Error::Host(e.into()),
            ErrorWire::Budget(b) => Error::Budget(match b {
                BudgetWire::Instructions { limit } => Budget::Instructions { limit },
                BudgetWire::WallTime { limit } => Budget::WallTime { limit },
                BudgetWire::Memory { limit, what } => Budget::Memory { limit, what },
                BudgetWire::Recursion { limit } => Budget::Recursion { limit },
            }),
            ErrorWire::Compile(m) => Error::Compile(m),
            ErrorWire::Internal(m) => Error::Internal(m),
        };
        Failure {
            error,
            logs: f.logs,
            stats: f.stats.into(),
        }
    }
}

/// Writes one frame and flushes it, in one write: a length written apart
/// would wake the reader for four bytes, then again for the rest.
pub(super) fn send(out: &mut impl Write, message: &impl Serialize) -> io::Result<()> {
    send_unflushed(out, message)?;
    out.flush()
}

/// Writes one frame into `out`'s buffer, to go with the next flushed one.
pub(super) fn send_unflushed(out: &mut impl Write, message: &impl Serialize) -> io::Result<()> {
    out.write_all(&frame(4, message)?)
}

/// A frame of `message` with `header` bytes before it, of which the first
/// four hold the frame's length (what follows them) and the rest are zero.
fn frame(header: usize, message: &impl Serialize) -> io::Result<Vec<u8>> {
    let mut frame = vec![0u8; header];
    rmp_serde::encode::write_named(&mut frame, message).map_err(invalid)?;
    let len = frame.len() - 4;
    if len > MAX_FRAME {
        return Err(invalid(format!(
            "a message of {len} bytes is over the {MAX_FRAME}-byte frame limit"
        )));
    }
    let len = u32::try_from(len).map_err(invalid)?;
    frame[..4].copy_from_slice(&len.to_le_bytes());
    Ok(frame)
}

/// Reads one frame; `None` at a clean end of input (the peer closed it
/// between frames).
pub(super) fn receive<T: DeserializeOwned>(input: &mut impl Read) -> io::Result<Option<T>> {
    let Some(bytes) = receive_bytes(input)? else {
        return Ok(None);
    };
    rmp_serde::from_slice(&bytes).map(Some).map_err(invalid)
}

fn receive_bytes(input: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < len.len() {
        match input.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(invalid(format!(
            "a frame of {len} bytes is over the {MAX_FRAME}-byte limit"
        )));
    }
    let mut bytes = vec![0; len];
    input.read_exact(&mut bytes)?;
    Ok(Some(bytes))
}

/// The bytes of an addressed frame before its message: the frame's length,
/// the call's sequence number and the channel its answers go to.
const ADDRESS: usize = 4 + 8 + 4;

/// A host-to-worker message encoded once, to be addressed to a call and
/// written with [`Addressed::send`] (a call that moves to another worker
/// is sent again under a new address).
pub(super) struct Addressed(Vec<u8>);

impl Addressed {
    pub(super) fn new(message: &ToWorker) -> io::Result<Addressed> {
        frame(ADDRESS, message).map(Addressed)
    }

    /// The message's size in bytes.
    pub(super) fn len(&self) -> usize {
        self.0.len() - ADDRESS
    }

    /// Writes the frame for call `seq`, whose answers go to `channel`, in
    /// one write.
    pub(super) fn send(&mut self, out: &mut impl Write, seq: u64, channel: u32) -> io::Result<()> {
        self.0[4..12].copy_from_slice(&seq.to_le_bytes());
        self.0[12..16].copy_from_slice(&channel.to_le_bytes());
        out.write_all(&self.0)?;
        out.flush()
    }
}

/// Reads one addressed frame: the call's sequence number, its channel and
/// the message; `None` at a clean end of input.
pub(super) fn receive_addressed(input: &mut impl Read) -> io::Result<Option<(u64, u32, ToWorker)>> {
    let Some(bytes) = receive_bytes(input)? else {
        return Ok(None);
    };
    let Some((address, message)) = bytes.split_at_checked(ADDRESS - 4) else {
        return Err(invalid("a frame shorter than its address"));
    };
    let seq = u64::from_le_bytes(address[..8].try_into().map_err(invalid)?);
    let channel = u32::from_le_bytes(address[8..].try_into().map_err(invalid)?);
    let message = rmp_serde::from_slice(message).map_err(invalid)?;
    Ok(Some((seq, channel, message)))
}

fn invalid(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_a_clean_end_is_none() {
        let mut buf = Vec::new();
        send(&mut buf, &HostCall::Read { id: "p1".into() }).unwrap();
        send(&mut buf, &ToWorker::Reply(Ok(ReplyWire::Done))).unwrap();
        let mut input = &buf[..];
        assert!(matches!(
            receive::<HostCall>(&mut input).unwrap(),
            Some(HostCall::Read { id }) if id == "p1"
        ));
        assert!(matches!(
            receive::<ToWorker>(&mut input).unwrap(),
            Some(ToWorker::Reply(Ok(ReplyWire::Done)))
        ));
        assert!(receive::<ToWorker>(&mut input).unwrap().is_none());
    }

    #[test]
    fn addressed_frames_carry_their_call_and_channel() {
        let mut message = Addressed::new(&ToWorker::Cancel).unwrap();
        let mut buf = Vec::new();
        message.send(&mut buf, 7, 3).unwrap();
        message.send(&mut buf, u64::MAX, 0).unwrap();
        let mut input = &buf[..];
        assert!(matches!(
            receive_addressed(&mut input).unwrap(),
            Some((7, 3, ToWorker::Cancel))
        ));
        assert!(matches!(
            receive_addressed(&mut input).unwrap(),
            Some((u64::MAX, 0, ToWorker::Cancel))
        ));
        assert!(receive_addressed(&mut input).unwrap().is_none());
        // A frame too short for its address is refused.
        let mut short = 3u32.to_le_bytes().to_vec();
        short.extend_from_slice(&[1, 2, 3]);
        let err = receive_addressed(&mut &short[..]).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        let too_long = (MAX_FRAME as u32 + 1).to_le_bytes();
        let err = receive::<ToWorker>(&mut &too_long[..]).err().unwrap();
        assert!(err.to_string().contains("over the"), "{err}");
        let cut = [10u8, 0, 0, 0, b'{'];
        assert!(receive::<ToWorker>(&mut &cut[..]).is_err());
        let half_header = [1u8, 0];
        assert!(receive::<ToWorker>(&mut &half_header[..]).is_err());
        let mut garbage = 5u32.to_le_bytes().to_vec();
        garbage.extend_from_slice(b"hello");
        let err = receive::<ToWorker>(&mut &garbage[..]).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn failures_and_host_errors_keep_their_status() {
        let failure = Failure {
            error: Error::Script {
                message: "conflict".into(),
                number: 409,
                stack: Some("at f".into()),
            },
            logs: "one\n".into(),
            stats: Statistics {
                instructions: 7,
                ..Statistics::default()
            },
        };
        let back = Failure::from(FailureWire::from(failure));
        assert_eq!(
            (back.error.status(), back.error.substatus()),
            (400, Some(409))
        );
        assert_eq!((back.logs.as_str(), back.stats.instructions), ("one\n", 7));

        let fatal = HostError::abort(ErrorCode::SERVICE_UNAVAILABLE, "disk");
        assert_eq!(HostError::from(HostErrorWire::from(fatal.clone())), fatal);
        let odd = HostError::from(HostErrorWire {
            code: 299,
            message: "odd".into(),
            fatal: false,
        });
        assert_eq!(odd.code, ErrorCode::INTERNAL);
        assert!(odd.message.contains("299"));
    }
}
