//! Error codes that cross the sandbox boundary.
//!
//! This table is the single source of truth: the engine classifies its errors
//! with it, the Wasm ABI returns these codes, the JavaScript runtime throws
//! `{ code, message }` objects with them, and guest SDKs match on them. The
//! numbers are the HTTP status codes Azure Cosmos DB returns for the same
//! situations, so code written against Cosmos DB (`if (err.number == 409)`)
//! keeps working. Never renumber; only append.

use std::fmt;

macro_rules! error_codes {
    ($($(#[$doc:meta])* $name:ident($code:literal, $msg:literal),)*) => {
        /// A status code visible to callers and to scripts. See the module docs.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct ErrorCode(u16);

        impl ErrorCode {
            $($(#[$doc])* pub const $name: ErrorCode = ErrorCode($code);)*

            /// Every code in the table, in table order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name,)*];

            /// The fixed description of this code.
            pub const fn message(self) -> &'static str {
                match self.0 {
                    $($code => $msg,)*
                    _ => "unknown error code",
                }
            }

            /// The code's constant name, such as `"NOT_FOUND"`.
            pub const fn name(self) -> &'static str {
                match self.0 {
                    $($code => stringify!($name),)*
                    _ => "UNKNOWN",
                }
            }
        }
    };
}

error_codes! {
    /// 400: the arguments or document are malformed, or a write names a
    /// partition key other than its document's or its transaction's.
    BAD_REQUEST(400, "The request or document is malformed"),
    /// 404: the document, container or script does not exist.
    NOT_FOUND(404, "The resource does not exist"),
    /// 408: the request waited too long (for example for a partition's writer).
    REQUEST_TIMEOUT(408, "The request timed out"),
    /// 409: a document or container with this id already exists.
    CONFLICT(409, "A resource with this id already exists"),
    /// 412: the `If-Match` etag does not match the document's current etag.
    PRECONDITION_FAILED(412, "The etag precondition failed"),
    /// 413: the document exceeds 2 MB.
    TOO_LARGE(413, "The document exceeds the size limit"),
    /// 429: the request was throttled; retry later.
    TOO_MANY_REQUESTS(429, "The request rate is too large"),
    /// 449: a transient conflict; retry the request.
    RETRY_WITH(449, "Retry the request"),
    /// 500: a failure inside Partita, not the caller's fault.
    INTERNAL(500, "Internal error"),
    /// 503: the store refuses writes (after a storage failure) or is unavailable.
    SERVICE_UNAVAILABLE(503, "The service is unavailable"),
}

impl ErrorCode {
    /// Looks a numeric status up in the table.
    pub fn from_u16(status: u16) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.0 == status)
    }

    /// The numeric status (an HTTP status code).
    pub const fn as_u16(self) -> u16 {
        self.0
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.0, self.name())
    }
}

/// An error as a script or a remote caller sees it: a code from the table and
/// a message naming what was wrong.
///
/// An error is handed to the script (a JavaScript callback's `err`, a Wasm
/// import's status) unless it is *fatal*: then the runtime stops the call at
/// once, uncatchably, and the call fails with [`HostError::code`] as its
/// status. The JavaScript runtime throws nothing the script could catch; the
/// Wasm host traps. Storage failures (500, 503) are always treated as fatal;
/// [`HostError::abort`] makes any code fatal (the fuzzer uses it to model a
/// host that gives up mid-call, see `partita::fuzz`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct HostError {
    /// The status code.
    pub code: ErrorCode,
    /// What was wrong, naming the container, partition key and id involved.
    pub message: String,
    /// Whether the runtime must end the call instead of handing the error to
    /// the script. See the type's docs.
    pub fatal: bool,
}

impl HostError {
    /// Creates an error with a code and a message, handed to the script.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> HostError {
        HostError {
            code,
            message: message.into(),
            fatal: false,
        }
    }

    /// Creates a fatal error: the runtime ends the call with it, and the
    /// script cannot catch or see it.
    pub fn abort(code: ErrorCode, message: impl Into<String>) -> HostError {
        HostError {
            code,
            message: message.into(),
            fatal: true,
        }
    }

    /// Whether the runtime must end the call rather than hand this error to
    /// the script: [`HostError::abort`] errors and storage failures (500, 503).
    pub fn ends_call(&self) -> bool {
        self.fatal
            || self.code == ErrorCode::INTERNAL
            || self.code == ErrorCode::SERVICE_UNAVAILABLE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_round_trip() {
        for (i, a) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(ErrorCode::from_u16(a.as_u16()), Some(*a));
            assert_ne!(a.message(), "unknown error code");
            for b in &ErrorCode::ALL[i + 1..] {
                assert_ne!(a.as_u16(), b.as_u16(), "{a} and {b} share a number");
            }
        }
        assert_eq!(ErrorCode::from_u16(418), None);
        assert_eq!(ErrorCode::NOT_FOUND.to_string(), "404 NOT_FOUND");
    }

    #[test]
    fn only_aborts_and_storage_failures_end_a_call() {
        assert!(!HostError::new(ErrorCode::CONFLICT, "x").ends_call());
        assert!(HostError::abort(ErrorCode::CONFLICT, "x").ends_call());
        assert!(HostError::new(ErrorCode::INTERNAL, "x").ends_call());
        assert!(HostError::new(ErrorCode::SERVICE_UNAVAILABLE, "x").ends_call());
    }
}
