//! The SDK's one error type: what went wrong in an operation, and how the
//! call fails when a procedure returns it.
//!
//! An operation the host refused carries its status from the shared table
//! ([`ErrorCode`]: 404, 409, 412, ...) and the host's message. Returning it
//! from a procedure is JavaScript's `if (err) throw err;`: the call fails
//! with 400 and the status as substatus, and everything is rolled back.
//! [`Error::NotAccepted`] is Cosmos DB's bounded execution (`isAccepted ==
//! false`): the operation was not performed because the call is near its
//! budget; handle it by committing what is done and telling the client how
//! to continue. [`Error::Script`] is the procedure's own `throw new
//! Error(number, message)`.

use std::fmt;

use host_api::ErrorCode;

/// An error of an operation, or of the procedure itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The host refused the operation: nothing was changed.
    Host {
        /// The status (404 not found, 409 conflict, 412 etag mismatch, ...).
        code: ErrorCode,
        /// The host's message, naming what was wrong.
        message: String,
    },
    /// The call is near its budget and the operation was not performed.
    /// Unhandled, it fails the call with substatus 408 (see
    /// [`Error::number`]).
    NotAccepted,
    /// Raised by the procedure: the call fails with 400 and `number` as
    /// substatus, as `throw new Error(number, message)` does in JavaScript.
    Script {
        /// The substatus.
        number: i32,
        /// The message.
        message: String,
    },
}

impl Error {
    /// The procedure's own error: the call fails with 400, substatus
    /// `number` and `message`.
    pub fn new(number: i32, message: impl Into<String>) -> Error {
        Error::Script {
            number,
            message: message.into(),
        }
    }

    /// A host-style error with a status from the table, for input the
    /// procedure refuses (for example [`ErrorCode::BAD_REQUEST`] for bad
    /// parameters).
    pub fn status(code: ErrorCode, message: impl Into<String>) -> Error {
        Error::Host {
            code,
            message: message.into(),
        }
    }

    /// The error of a negative return `-status` with the host's message.
    pub(crate) fn from_host(status: i32, message: String) -> Error {
        let code = u16::try_from(-i64::from(status))
            .ok()
            .and_then(ErrorCode::from_u16);
        match code {
            Some(code) => Error::Host { code, message },
            None => Error::Host {
                code: ErrorCode::INTERNAL,
                message: format!("the host returned {status}, which is not a status: {message}"),
            },
        }
    }

    /// The status from the table, for an error of the host.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Host { code, .. } => Some(*code),
            Error::NotAccepted | Error::Script { .. } => None,
        }
    }

    /// Whether this is a host error with status `code` (for example
    /// `err.is(ErrorCode::NOT_FOUND)`).
    pub fn is(&self, code: ErrorCode) -> bool {
        self.code() == Some(code)
    }

    /// The substatus the call fails with when a procedure returns this
    /// error: the host status, 408 for [`Error::NotAccepted`], or the
    /// script's number.
    pub fn number(&self) -> i32 {
        match self {
            Error::Host { code, .. } => i32::from(code.as_u16()),
            Error::NotAccepted => i32::from(ErrorCode::REQUEST_TIMEOUT.as_u16()),
            Error::Script { number, .. } => *number,
        }
    }

    /// The message the call fails with.
    pub fn message(&self) -> &str {
        match self {
            Error::Host { message, .. } | Error::Script { message, .. } => message,
            Error::NotAccepted => {
                "an operation was not accepted (the call is near its budget) and the procedure did not handle it"
            }
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Host { code, message } => write!(f, "{code}: {message}"),
            Error::NotAccepted => f.write_str(self.message()),
            Error::Script { number, message } => write!(f, "{number}: {message}"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_statuses_map_to_the_table() {
        let err = Error::from_host(-404, "no p1".into());
        assert!(err.is(ErrorCode::NOT_FOUND));
        assert_eq!((err.number(), err.message()), (404, "no p1"));
        assert_eq!(err.to_string(), "404 NOT_FOUND: no p1");
        let odd = Error::from_host(-499, "x".into());
        assert!(odd.is(ErrorCode::INTERNAL), "{odd}");
        assert!(odd.message().contains("-499"), "{odd}");
        assert_eq!(Error::NotAccepted.number(), 408);
        assert_eq!(Error::new(1234, "custom").number(), 1234);
        assert_eq!(Error::new(1234, "custom").code(), None);
    }
}
