//! The wire vocabulary of the gateway: a request as the transport hands it
//! over, a response as it goes back, and the error every handler returns.
//!
//! Requests and responses are plain data (no sockets, no futures), so the
//! whole protocol is a synchronous function `Gateway::handle(&WireRequest) ->
//! WireResponse` that tests and the fuzz test call directly. Errors become
//! the body Cosmos DB returns, `{"code": "NotFound", "message": "..."}`, with
//! the HTTP status and, when there is one, `x-ms-substatus`.

use bytes::Bytes;
use hyper::HeaderMap;
use serde_json::{Value, json};

use partita::Error;

/// Substatus of a partition-key header that does not match the document's
/// key (Cosmos DB: "PartitionKey extracted from document doesn't match"),
/// the engine's for the same case.
pub use engine::SUBSTATUS_PARTITION_KEY_MISMATCH;

/// One HTTP request, with its body already read.
#[derive(Clone, Debug, Default)]
pub struct WireRequest {
    /// The method, upper case (`GET`, `POST`, ...).
    pub method: String,
    /// The path as sent, still percent-encoded, without the query string.
    pub path: String,
    /// The request headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
    /// The server's address the request arrived at, when it came over a
    /// socket.
    pub local_addr: Option<std::net::SocketAddr>,
    /// The client's address, when it came over a socket (the Data Explorer
    /// hands the key only to a loopback client).
    pub remote_addr: Option<std::net::SocketAddr>,
}

/// One HTTP response.
#[derive(Clone, Debug, PartialEq)]
pub struct WireResponse {
    /// The HTTP status.
    pub status: u16,
    /// Headers besides the ones the transport adds (`date`, `content-length`).
    pub headers: Vec<(&'static str, String)>,
    /// The body (empty for 204 and 304).
    pub body: Vec<u8>,
}

impl WireResponse {
    /// A JSON response.
    pub(crate) fn json(status: u16, body: &Value) -> WireResponse {
        WireResponse {
            status,
            headers: Vec::new(),
            body: serde_json::to_vec(body).expect("a JSON value always serializes"),
        }
    }

    /// A response without a body (204, 304).
    pub(crate) fn empty(status: u16) -> WireResponse {
        WireResponse {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// Adds a header.
    pub(crate) fn with(mut self, name: &'static str, value: impl Into<String>) -> WireResponse {
        self.headers.push((name, value.into()));
        self
    }

    /// Sets a header, replacing any value it had.
    pub(crate) fn with_replaced(
        mut self,
        name: &'static str,
        value: impl Into<String>,
    ) -> WireResponse {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.with(name, value)
    }

    /// The value of a header this response carries.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request failed, as the client will see it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{status}: {message}")]
pub struct WireError {
    /// The HTTP status.
    pub status: u16,
    /// `x-ms-substatus`, when Cosmos DB sends one for this case.
    pub substatus: Option<u16>,
    /// What was wrong, naming the header, resource or value involved.
    pub message: String,
    /// Script output up to a script's failure, returned in the logging
    /// header when the client asked for it.
    pub logs: Option<String>,
    /// The collection operation a script's failure came from, if known.
    pub failed_operation: Option<partita::FailedOperation>,
    /// The body's `additionalErrorInfo` (a query's plan, with 400/1004).
    pub additional_info: Option<Box<str>>,
}

impl WireError {
    /// An error with a status and message.
    pub fn new(status: u16, message: impl Into<String>) -> WireError {
        WireError {
            status,
            substatus: None,
            message: message.into(),
            logs: None,
            failed_operation: None,
            additional_info: None,
        }
    }

    /// 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> WireError {
        WireError::new(400, message)
    }

    /// 401: the signature or date is wrong.
    pub fn unauthorized(message: impl Into<String>) -> WireError {
        WireError::new(401, message)
    }

    /// 404: no such resource.
    pub fn not_found(message: impl Into<String>) -> WireError {
        WireError::new(404, message)
    }

    /// 409: the id is taken.
    pub fn conflict(message: impl Into<String>) -> WireError {
        WireError::new(409, message)
    }

    /// Adds a substatus.
    pub fn with_substatus(mut self, substatus: u16) -> WireError {
        self.substatus = Some(substatus);
        self
    }

    /// The response Cosmos DB sends for this error. A script's failure also
    /// carries its log (`logs`), which the service returns only in a
    /// URL-encoded header and only when asked, and the operation it came
    /// from (`failedOperation`): SDKs ignore members they do not know, and
    /// the user sees why the script failed.
    pub fn response(&self) -> WireResponse {
        let mut body = json!({"code": code_name(self.status), "message": self.message});
        if let Some(logs) = &self.logs {
            body["logs"] = json!(logs);
        }
        if let Some(operation) = &self.failed_operation {
            body["failedOperation"] = operation.to_json();
        }
        if let Some(info) = &self.additional_info {
            body["additionalErrorInfo"] = json!(info);
        }
        let mut response = WireResponse::json(self.status, &body);
        if let Some(substatus) = self.substatus {
            response = response.with("x-ms-substatus", substatus.to_string());
        }
        response
    }
}

impl From<engine::Error> for WireError {
    fn from(e: engine::Error) -> WireError {
        WireError {
            substatus: e.substatus(),
            ..WireError::new(e.status(), e.to_string())
        }
    }
}

impl From<Error> for WireError {
    fn from(e: Error) -> WireError {
        let logs = Some(e.logs().to_owned()).filter(|l| !l.is_empty());
        let message = match &e {
            Error::Engine(inner) => inner.to_string(),
            Error::Script(_) => {
                format!("Encountered exception while executing function. Exception = {e}")
            }
        };
        WireError {
            status: e.status(),
            substatus: e.substatus(),
            message,
            logs,
            failed_operation: e.failed_operation().cloned(),
            additional_info: None,
        }
    }
}

/// The `code` of Cosmos DB's error body for a status.
pub fn code_name(status: u16) -> &'static str {
    match status {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        408 => "RequestTimeout",
        409 => "Conflict",
        412 => "PreconditionFailed",
        413 => "RequestEntityTooLarge",
        429 => "TooManyRequests",
        449 => "RetryWith",
        500 => "InternalServerError",
        503 => "ServiceUnavailable",
        _ => "Error",
    }
}

/// A header's value as text; a value that is not visible ASCII is a 400.
pub(crate) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, WireError> {
    match headers.get(name) {
        None => Ok(None),
        Some(value) => value.to_str().map(|v| Some(v.trim())).map_err(|_| {
            WireError::bad_request(format!(
                "the {name} header is not valid text (visible ASCII expected)"
            ))
        }),
    }
}

/// A boolean header (`True`, `true`, `False`, ...); absent is false.
pub(crate) fn flag(headers: &HeaderMap, name: &str) -> Result<bool, WireError> {
    match header(headers, name)? {
        None => Ok(false),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") || v.is_empty() => Ok(false),
        Some(v) => Err(WireError::bad_request(format!(
            "the {name} header must be true or false, not {v:?}"
        ))),
    }
}

/// `x-ms-max-item-count`: absent, `-1` or `0` mean the server's default.
pub(crate) fn max_item_count(headers: &HeaderMap) -> Result<Option<usize>, WireError> {
    match header(headers, "x-ms-max-item-count")? {
        None => Ok(None),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if n <= 0 => Ok(None),
            Ok(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
            Err(_) => Err(WireError::bad_request(format!(
                "the x-ms-max-item-count header must be an integer, not {v:?}"
            ))),
        },
    }
}

/// Parses a JSON body; Cosmos DB's binary encoding, malformed JSON and an
/// object with two members of the same name are a 400 that says so.
pub(crate) fn json_body(body: &[u8], what: &str) -> Result<Value, WireError> {
    if body.first() == Some(&0x80) {
        return Err(WireError::bad_request(format!(
            "the {what} is in Cosmos DB's binary encoding, which Partita does not support; \
             send JSON text (Rust SDK: AZURE_COSMOS_BINARY_ENCODING_ENABLED=false)"
        )));
    }
    host_api::strict::parse(body).map_err(|e| match e {
        host_api::strict::StrictError::Syntax(e) => {
            WireError::bad_request(format!("the {what} is not valid JSON: {e}"))
        }
        duplicate => WireError::bad_request(format!("the {what} is refused: {duplicate}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_the_cosmos_code_and_substatus() {
        let response = WireError::bad_request("no")
            .with_substatus(SUBSTATUS_PARTITION_KEY_MISMATCH)
            .response();
        assert_eq!(response.status, 400);
        assert_eq!(response.header("x-ms-substatus"), Some("1001"));
        let body: Value = serde_json::from_slice(&response.body).unwrap();
        assert_eq!(body, json!({"code": "BadRequest", "message": "no"}));
    }

    #[test]
    fn binary_malformed_and_duplicate_bodies_are_refused_with_a_reason() {
        let err = json_body(&[0x80, 0xed, 0x0e], "document").unwrap_err();
        assert_eq!(err.status, 400);
        assert!(err.message.contains("binary encoding"), "{}", err.message);
        let err = json_body(br#"{"id": "a", "n": {"k": 1, "k": 2}}"#, "document").unwrap_err();
        assert_eq!(err.status, 400);
        assert!(
            err.message
                .contains("the document is refused: the member /n/k appears more than once"),
            "{}",
            err.message
        );
        let err = json_body(b"{\"id\":", "document").unwrap_err();
        assert!(err.message.contains("not valid JSON"), "{}", err.message);
    }

    #[test]
    fn flags_accept_both_spellings_and_refuse_others() {
        let mut headers = HeaderMap::new();
        headers.insert("x-ms-documentdb-is-upsert", "True".parse().unwrap());
        assert!(flag(&headers, "x-ms-documentdb-is-upsert").unwrap());
        headers.insert("x-ms-documentdb-is-upsert", "false".parse().unwrap());
        assert!(!flag(&headers, "x-ms-documentdb-is-upsert").unwrap());
        headers.insert("x-ms-documentdb-is-upsert", "maybe".parse().unwrap());
        assert_eq!(
            flag(&headers, "x-ms-documentdb-is-upsert")
                .unwrap_err()
                .status,
            400
        );
    }
}
