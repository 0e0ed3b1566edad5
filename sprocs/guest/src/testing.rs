//! A mock host, so procedures can be unit-tested natively (`cargo test` on
//! the host target, no WebAssembly runtime needed).
//!
//! On every target but `wasm32`, the SDK's host functions are answered by a
//! handler you give to [`run`]: it sees each [`Call`] and returns a
//! [`Reply`]. The mock implements the ABI's result protocol itself (a result
//! larger than the guest's buffer waits for `take_result`, an error message
//! waits the same way, the next call drops whatever waits), so the SDK's
//! buffer handling runs exactly as it does under the real host.
//!
//! ```
//! use partita_guest::testing::{self, Call, Reply};
//! use serde_json::json;
//!
//! let (result, record) = testing::run(
//!     |call| match call {
//!         Call::Read { id } if id == "p1" => Reply::json(&json!({"id": "p1", "n": 1})),
//!         _ => Reply::Status(404, "no such document".into()),
//!     },
//!     || partita_guest::collection().read::<serde_json::Value>("p1"),
//! );
//! assert_eq!(result.unwrap().unwrap()["n"], 1);
//! assert_eq!(record.calls.len(), 1);
//! ```

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};

use serde_json::Value;

/// One host function call as the guest made it (byte arguments as sent).
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `context`.
    Context,
    /// `params`.
    Params,
    /// `request_body`.
    RequestBody,
    /// `set_request_body(body)`.
    SetRequestBody(Vec<u8>),
    /// `response_body`.
    ResponseBody,
    /// `set_response_body(body)`.
    SetResponseBody(Vec<u8>),
    /// `log(line)`.
    Log(String),
    /// `read(id)`.
    Read {
        /// The document id.
        id: String,
    },
    /// `read_feed(options)`.
    ReadFeed {
        /// The options JSON (empty when none).
        options: Vec<u8>,
    },
    /// `create(doc, options)`.
    Create {
        /// The document JSON.
        doc: Vec<u8>,
        /// The options JSON (empty when none).
        options: Vec<u8>,
    },
    /// `replace(id, doc, options)`.
    Replace {
        /// The document id.
        id: String,
        /// The document JSON.
        doc: Vec<u8>,
        /// The options JSON (empty when none).
        options: Vec<u8>,
    },
    /// `upsert(doc, options)`.
    Upsert {
        /// The document JSON.
        doc: Vec<u8>,
        /// The options JSON (empty when none).
        options: Vec<u8>,
    },
    /// `delete(id, options)`.
    Delete {
        /// The document id.
        id: String,
        /// The options JSON (empty when none).
        options: Vec<u8>,
    },
    /// `query(request)`.
    Query {
        /// The request JSON.
        request: Vec<u8>,
    },
    /// `read_member(id, key)`.
    ReadMember {
        /// The document id.
        id: String,
        /// The member's key.
        key: String,
    },
    /// `replace_member(id, key, value, options)`.
    ReplaceMember {
        /// The document id.
        id: String,
        /// The member's key.
        key: String,
        /// The member's new value, JSON.
        value: Vec<u8>,
        /// The options JSON (empty when none).
        options: Vec<u8>,
    },
}

impl Call {
    /// Parses a byte argument as JSON (`null` for empty bytes), for
    /// assertions on what the guest sent.
    ///
    /// # Panics
    /// When the bytes are not JSON: the SDK never sends such bytes.
    pub fn json(bytes: &[u8]) -> Value {
        if bytes.is_empty() {
            return Value::Null;
        }
        serde_json::from_slice(bytes).expect("the guest sends JSON")
    }
}

/// What the mock host answers to a call.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Success with these result bytes (ignored by functions without a
    /// result).
    Ok(Vec<u8>),
    /// Failure with this status (404, 409, ...) and message.
    Status(u16, String),
    /// [`NOT_ACCEPTED`](host_api::abi::NOT_ACCEPTED): near the budget, not
    /// performed.
    NotAccepted,
}

impl Reply {
    /// Success with `value` as JSON.
    pub fn json(value: &Value) -> Reply {
        Reply::Ok(value.to_string().into_bytes())
    }
}

/// The call was stopped by `fail(number, message)` (an `Err` returned by a
/// procedure, or a panic reported through the hook).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    /// The substatus the call fails with.
    pub number: i32,
    /// The message.
    pub message: String,
}

/// What the guest did during [`run`].
#[derive(Clone, Debug, Default)]
pub struct Record {
    /// Every call but `take_result` and `fail`, in order.
    pub calls: Vec<Call>,
    /// The output capacity of every call that had an output buffer, in
    /// order, `take_result` included (which is marked by `true`).
    pub buffers: Vec<(usize, bool)>,
}

impl Record {
    /// The lines logged, in order.
    pub fn logs(&self) -> Vec<&str> {
        self.calls
            .iter()
            .filter_map(|c| match c {
                Call::Log(line) => Some(line.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// A small in-memory logical partition that answers the point operations
/// (`read`, `create`, `replace`, `upsert`, `delete`, `read_member`,
/// `replace_member`) the way the host does,
/// for tests of procedures; queries and everything else are left to the
/// test's own handler ([`Partition::answer`] returns `None` for them).
/// Documents keep their insertion order; created documents without an `id`
/// get `"generated-<n>"`; system properties are not added.
#[derive(Clone, Debug, Default)]
pub struct Partition {
    /// The documents, in insertion order.
    pub docs: Vec<Value>,
    generated: usize,
}

impl Partition {
    /// A partition holding `docs`.
    pub fn new(docs: impl IntoIterator<Item = Value>) -> Partition {
        Partition {
            docs: docs.into_iter().collect(),
            generated: 0,
        }
    }

    /// The document `id`.
    pub fn get(&self, id: &str) -> Option<&Value> {
        self.docs.iter().find(|d| d["id"] == id)
    }

    fn position(&self, id: &str) -> Option<usize> {
        self.docs.iter().position(|d| d["id"] == id)
    }

    /// The host's answer to a point operation, or `None` for other calls.
    pub fn answer(&mut self, call: &Call) -> Option<Reply> {
        let not_found = |id: &str| Reply::Status(404, format!("no document {id:?}"));
        Some(match call {
            Call::Read { id } => match self.get(id) {
                Some(doc) => Reply::json(doc),
                None => not_found(id),
            },
            Call::Create { doc, .. } => {
                let mut doc = Call::json(doc);
                let Some(fields) = doc.as_object_mut() else {
                    return Some(Reply::Status(400, "not a JSON object".into()));
                };
                if !fields.contains_key("id") {
                    self.generated += 1;
                    fields.insert("id".into(), format!("generated-{}", self.generated).into());
                }
                let id = doc["id"].as_str().unwrap_or_default().to_owned();
                if self.position(&id).is_some() {
                    return Some(Reply::Status(409, format!("{id:?} exists")));
                }
                self.docs.push(doc.clone());
                Reply::json(&doc)
            }
            Call::Replace { id, doc, .. } => match self.position(id) {
                Some(i) => {
                    self.docs[i] = Call::json(doc);
                    Reply::json(&self.docs[i])
                }
                None => not_found(id),
            },
            Call::Upsert { doc, .. } => {
                let doc = Call::json(doc);
                let id = doc["id"].as_str().unwrap_or_default().to_owned();
                match self.position(&id) {
                    Some(i) => self.docs[i] = doc.clone(),
                    None => self.docs.push(doc.clone()),
                }
                Reply::json(&doc)
            }
            Call::ReadMember { id, key } => match self.get(id) {
                // An absent member is empty text, as the host sends it.
                Some(doc) => doc
                    .get(key)
                    .map_or_else(|| Reply::Ok(Vec::new()), Reply::json),
                None => not_found(id),
            },
            Call::ReplaceMember { id, key, value, .. } => match self.position(id) {
                Some(i) => {
                    let value = Call::json(value);
                    if let Some(doc) = self.docs[i].as_object_mut() {
                        doc.insert(key.clone(), value);
                    }
                    Reply::json(&self.docs[i])
                }
                None => not_found(id),
            },
            Call::Delete { id, .. } => match self.position(id) {
                Some(i) => {
                    self.docs.remove(i);
                    Reply::Ok(Vec::new())
                }
                None => not_found(id),
            },
            _ => return None,
        })
    }
}

type Handler = Box<dyn FnMut(&Call) -> Reply>;

struct Mock {
    handler: Handler,
    waiting: Option<Vec<u8>>,
    record: Record,
}

thread_local! {
    static MOCK: RefCell<Option<Mock>> = const { RefCell::new(None) };
}

/// Runs `guest` with `handler` answering its host calls on this thread.
/// Returns what `guest` returned, or [`Failed`] when it called `fail`, and
/// the record of its calls.
///
/// # Panics
/// Re-raises any other panic of `guest`, and panics when called inside
/// another `run` on the same thread.
pub fn run<R>(
    handler: impl FnMut(&Call) -> Reply + 'static,
    guest: impl FnOnce() -> R,
) -> (Result<R, Failed>, Record) {
    MOCK.with_borrow_mut(|mock| {
        assert!(mock.is_none(), "testing::run does not nest");
        *mock = Some(Mock {
            handler: Box::new(handler),
            waiting: None,
            record: Record::default(),
        });
    });
    let outcome = panic::catch_unwind(AssertUnwindSafe(guest));
    let record = MOCK
        .with_borrow_mut(Option::take)
        .map(|m| m.record)
        .unwrap_or_default();
    match outcome {
        Ok(value) => (Ok(value), record),
        Err(payload) => match payload.downcast::<Failed>() {
            Ok(failed) => (Err(*failed), record),
            Err(other) => panic::resume_unwind(other),
        },
    }
}

/// Runs an entry function as its export does (`0` to commit, or `fail`
/// with its error) under [`run`]: what a procedure declared with
/// [`procedure!`](crate::procedure)`(entry)` does when called. (Call this
/// rather than the `extern "C"` export itself: the mock's `fail` unwinds,
/// which an `extern "C"` function may not.)
pub fn run_entry(
    handler: impl FnMut(&Call) -> Reply + 'static,
    entry: fn() -> Result<(), crate::Error>,
) -> (Result<i32, Failed>, Record) {
    run(handler, || crate::__private::run(entry))
}

fn with_mock<R>(f: impl FnOnce(&mut Mock) -> R) -> R {
    MOCK.with_borrow_mut(|mock| {
        let mock = mock
            .as_mut()
            .expect("no host: on this target, host calls run inside partita_guest::testing::run");
        f(mock)
    })
}

fn len_i32(len: usize) -> i32 {
    i32::try_from(len).expect("results stay under 2 GiB")
}

/// Answers one call, following the ABI's result protocol.
pub(crate) fn dispatch(call: Call, out: Option<&mut [u8]>) -> i32 {
    with_mock(|mock| {
        mock.waiting = None;
        if let Some(out) = &out {
            mock.record.buffers.push((out.len(), false));
        }
        let reply = (mock.handler)(&call);
        mock.record.calls.push(call);
        match reply {
            Reply::NotAccepted => host_api::abi::NOT_ACCEPTED,
            Reply::Status(status, message) => {
                mock.waiting = Some(message.into_bytes());
                -i32::from(status)
            }
            Reply::Ok(bytes) => match out {
                None => 0,
                Some(out) if bytes.len() <= out.len() => {
                    out[..bytes.len()].copy_from_slice(&bytes);
                    len_i32(bytes.len())
                }
                Some(_) => {
                    let len = len_i32(bytes.len());
                    mock.waiting = Some(bytes);
                    len
                }
            },
        }
    })
}

pub(crate) fn take_result(out: &mut [u8]) -> i32 {
    with_mock(|mock| {
        mock.record.buffers.push((out.len(), true));
        match mock.waiting.take() {
            None => 0,
            Some(bytes) if bytes.len() <= out.len() => {
                out[..bytes.len()].copy_from_slice(&bytes);
                len_i32(bytes.len())
            }
            Some(bytes) => {
                let len = len_i32(bytes.len());
                mock.waiting = Some(bytes);
                len
            }
        }
    })
}

pub(crate) fn fail(number: i32, message: String) -> ! {
    panic::panic_any(Failed { number, message })
}
