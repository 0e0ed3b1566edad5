//! The result protocol of `partita_v1`, in one place.
//!
//! Every call that produces bytes gets the module's one reusable scratch
//! buffer. A result that fits lands there directly (one host call); a
//! larger one waits on the host side, and the buffer grows to exactly the
//! announced length before `take_result` fetches it (two host calls, and
//! the buffer keeps its new size for later calls). An error status's
//! message is fetched the same way. Results are decoded straight from the
//! buffer, before any other host call can reuse it.

use std::cell::{Cell, RefCell};

use host_api::ErrorCode;
use host_api::abi::NOT_ACCEPTED;

use crate::{Error, FromJson, ToJson, sys};

/// The scratch buffer's first size: most documents and pages fit.
pub(crate) const INITIAL_BUFFER: usize = 16 * 1024;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// Host calls made so far: a result the host keeps waiting is gone
    /// after the next call, so a [`Written`](crate::Written) remembers the
    /// count it was made at.
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

/// Counts a host call; returns the count after it.
pub(crate) fn count_call() -> u64 {
    CALLS.with(|c| {
        c.set(c.get() + 1);
        c.get()
    })
}

/// The number of host calls made so far.
pub(crate) fn calls() -> u64 {
    CALLS.with(Cell::get)
}

/// Makes `buf` at least `len` bytes long (zero-filled, so the host only
/// ever sees initialized memory). Its contents do not matter, so a larger
/// buffer is a fresh zeroed allocation: from the module's allocator
/// (`arena.rs`) it costs no writes, where resizing would `memset` it.
fn ensure(buf: &mut Vec<u8>, len: usize) {
    if buf.len() < len {
        *buf = Vec::new();
        *buf = vec![0; len];
    }
}

/// Fetches what waits after the previous call into `buf`, growing it as
/// needed; returns its length.
fn take(buf: &mut Vec<u8>) -> Result<usize, Error> {
    loop {
        let r = sys::take_result(buf);
        let len = usize::try_from(r).map_err(|_| {
            Error::status(
                ErrorCode::INTERNAL,
                format!("take_result returned {r}, not a length"),
            )
        })?;
        if len <= buf.len() {
            return Ok(len);
        }
        ensure(buf, len);
    }
}

/// Runs `op` with the scratch buffer as its output and hands the result
/// bytes to `decode`. Maps [`NOT_ACCEPTED`] and negative statuses (with the
/// host's message) to [`Error`].
pub(crate) fn with_result<T>(
    op: impl FnOnce(&mut [u8]) -> i32,
    decode: impl FnOnce(&[u8]) -> Result<T, Error>,
) -> Result<T, Error> {
    count_call();
    SCRATCH.with_borrow_mut(|buf| {
        ensure(buf, INITIAL_BUFFER);
        let r = op(buf);
        status(r, buf)?;
        let len = usize::try_from(r).expect("status() let only lengths through");
        if len > buf.len() {
            ensure(buf, len);
            let taken = take(buf)?;
            if taken != len {
                return Err(Error::status(
                    ErrorCode::INTERNAL,
                    format!("the host announced {len} result bytes but take_result gave {taken}"),
                ));
            }
        }
        decode(&buf[..len])
    })
}

/// Runs `op` with an empty output buffer, so the host keeps its result
/// waiting (and, for a document, does not even serialize it until it is
/// taken); returns the result's length and the call's count.
pub(crate) fn with_result_waiting(
    op: impl FnOnce(&mut [u8]) -> i32,
) -> Result<(usize, u64), Error> {
    let call = count_call();
    let r = op(&mut []);
    SCRATCH.with_borrow_mut(|buf| status(r, buf))?;
    let len = usize::try_from(r).expect("status() let only lengths through");
    Ok((len, call))
}

/// Takes the result left waiting by the call counted `call`, of `len`
/// bytes, if no host call was made since.
pub(crate) fn take_waiting(len: usize, call: u64) -> Result<Vec<u8>, Error> {
    if calls() != call {
        return Err(Error::status(
            ErrorCode::BAD_REQUEST,
            "the written document is no longer available: the host keeps it only until the next operation, so read it (Written::json) before",
        ));
    }
    count_call();
    if len == 0 {
        return Ok(Vec::new());
    }
    let mut bytes = vec![0; len];
    let taken = take(&mut bytes)?;
    if taken != len {
        return Err(Error::status(
            ErrorCode::INTERNAL,
            format!("the host announced {len} result bytes but take_result gave {taken}"),
        ));
    }
    Ok(bytes)
}

/// Maps the return value of a function without a result (`0` on success).
pub(crate) fn without_result(r: i32) -> Result<(), Error> {
    count_call();
    if r > 0 {
        // Not in the ABI for these functions; drop whatever it announced.
        return SCRATCH.with_borrow_mut(|buf| take(buf).map(|_| ()));
    }
    SCRATCH.with_borrow_mut(|buf| status(r, buf))
}

/// `Ok` for a length, otherwise the error (fetching the status's message).
fn status(r: i32, buf: &mut Vec<u8>) -> Result<(), Error> {
    if r >= 0 {
        return Ok(());
    }
    if r == NOT_ACCEPTED {
        return Err(Error::NotAccepted);
    }
    let message = match take(buf) {
        Ok(len) => String::from_utf8_lossy(&buf[..len]).into_owned(),
        Err(err) => err.to_string(),
    };
    Err(Error::from_host(r, message))
}

/// Decodes result bytes the host produced (a failure is the host's fault).
pub(crate) fn decode_host<T: FromJson>(what: &str) -> impl FnOnce(&[u8]) -> Result<T, Error> {
    move |bytes| {
        T::from_json(bytes).map_err(|e| {
            Error::status(
                ErrorCode::INTERNAL,
                format!("the host's {what} is not the expected JSON: {e}"),
            )
        })
    }
}

/// Serializes something the guest sends (a document, options, a request).
pub(crate) fn encode<T: ToJson + ?Sized>(what: &str, value: &T) -> Result<Vec<u8>, Error> {
    value.to_json().map_err(|e| {
        Error::status(
            ErrorCode::BAD_REQUEST,
            format!("the {what} cannot be serialized as JSON: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::testing::{self, Call, Reply};

    fn big_doc(len: usize) -> Value {
        json!({"id": "big", "text": "x".repeat(len)})
    }

    #[test]
    fn a_result_that_fits_takes_one_call() {
        let (doc, record) = testing::run(
            |_| Reply::json(&json!({"id": "a"})),
            || crate::collection().read::<Value>("a"),
        );
        assert_eq!(doc.unwrap().unwrap(), json!({"id": "a"}));
        assert_eq!(record.buffers, [(INITIAL_BUFFER, false)]);
    }

    #[test]
    fn a_large_result_grows_the_buffer_once_and_it_stays_grown() {
        let doc = big_doc(100_000);
        let len = doc.to_string().len();
        let reply = doc.clone();
        let (result, record) = testing::run(
            move |_| Reply::json(&reply),
            || {
                let first = crate::collection().read::<Value>("big")?;
                let second = crate::collection().read::<Value>("big")?;
                Ok::<_, Error>((first, second))
            },
        );
        let (first, second) = result.unwrap().unwrap();
        assert_eq!((&first, &second), (&doc, &doc));
        assert_eq!(
            record.buffers,
            [(INITIAL_BUFFER, false), (len, true), (len, false)],
            "grown to exactly the announced size, then reused"
        );
    }

    #[test]
    fn errors_carry_status_and_message_even_when_long() {
        let long = "m".repeat(INITIAL_BUFFER * 2);
        let message = long.clone();
        let (result, _) = testing::run(
            move |call| match call {
                Call::Read { .. } => Reply::Status(404, "no such document 'p9'".into()),
                _ => Reply::Status(409, message.clone()),
            },
            || {
                let read = crate::collection().read::<Value>("p9").unwrap_err();
                let create = crate::collection().create(&json!({"id": "x"})).unwrap_err();
                (read, create)
            },
        );
        let (read, create) = result.unwrap();
        assert_eq!(
            read,
            Error::status(ErrorCode::NOT_FOUND, "no such document 'p9'")
        );
        assert_eq!(create, Error::status(ErrorCode::CONFLICT, long));
    }

    #[test]
    fn not_accepted_is_its_own_outcome() {
        let (result, record) =
            testing::run(|_| Reply::NotAccepted, || crate::collection().delete("a"));
        assert_eq!(result.unwrap(), Err(Error::NotAccepted));
        assert!(record.buffers.is_empty(), "no message is fetched");
    }

    #[test]
    fn bad_host_json_is_an_internal_error_not_a_panic() {
        let (result, _) = testing::run(
            |_| Reply::Ok(b"{not json".to_vec()),
            || crate::collection().read::<Value>("a"),
        );
        let err = result.unwrap().unwrap_err();
        assert!(err.is(ErrorCode::INTERNAL), "{err}");
    }
}
