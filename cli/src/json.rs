//! JSON in, JSON out: what every command group shares to read JSON
//! arguments and to shape its responses and errors.
//!
//! A response is one JSON value with its `requestCharge`; an error is
//! `{"status", "substatus", "message"}` (plus `logs` when a script logged
//! something before failing), the shape `main` prints on stderr and
//! `partita batch` prints in its error lines.

use partita::{EngineError, Error, Statistics};
use serde_json::{Value, json};

/// The charge of container and script management (Cosmos DB's metadata
/// requests): the minimum.
pub(crate) const METADATA_CHARGE: f64 = partita::charge::MIN_CHARGE;

/// `value` with its `requestCharge`.
pub(crate) fn charged(mut value: Value, charge: f64) -> Value {
    value["requestCharge"] = json!(charge);
    value
}

pub(crate) fn stats_json(stats: &Statistics) -> Value {
    json!({
        "docs_read": stats.docs_read,
        "docs_written": stats.docs_written,
        "bytes_read": stats.bytes_read,
        "bytes_written": stats.bytes_written,
        "instructions": stats.instructions,
        "scripts_run": stats.scripts_run,
        "fuel": stats.fuel,
        "wall_time_us": stats.wall_time.as_micros() as u64,
    })
}

/// Parses a JSON argument; malformed JSON and an object with two members
/// of the same name (which would otherwise keep the last) are a 400.
pub(crate) fn parse_json(what: &str, text: &str) -> Result<Value, Error> {
    partita::strict::parse_str(text).map_err(|e| {
        let message = match e {
            partita::strict::StrictError::Syntax(e) => format!("{what} is not valid JSON: {e}"),
            duplicate => format!("{what} is refused: {duplicate}"),
        };
        EngineError::BadRequest(message).into()
    })
}

/// A JSON argument given inline or as `@file`.
pub(crate) fn json_argument(what: &str, text: &str) -> anyhow::Result<Value> {
    match text.strip_prefix('@') {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                EngineError::BadRequest(format!("cannot read {what} file {path}: {e}"))
            })?;
            Ok(parse_json(what, &text)?)
        }
        None => Ok(parse_json(what, text)?),
    }
}

/// A usage error as the JSON error shape, with clap's explanation.
pub(crate) fn usage_error(err: &clap::Error) -> Value {
    json!({"status": 400, "substatus": 0, "message": err.to_string().trim()})
}

/// An error as `{"status", "substatus", "message"}` (plus `logs` when a
/// script logged something before failing).
pub(crate) fn error_json(err: &anyhow::Error) -> Value {
    let mut report = match (
        err.downcast_ref::<EngineError>(),
        err.downcast_ref::<Error>(),
    ) {
        (Some(e), _) => {
            json!({"status": e.status(), "substatus": 0, "message": e.to_string()})
        }
        (_, Some(e)) => json!({
            "status": e.status(),
            "substatus": e.substatus().unwrap_or(0),
            "message": e.to_string(),
        }),
        _ => match (
            err.downcast_ref::<crate::item::BatchFailed>(),
            err.downcast_ref::<partita::ImportError>(),
        ) {
            (Some(e), _) => json!({"status": e.status, "substatus": 0, "message": e.to_string(),
                                   "failedOperation": e.index}),
            (_, Some(e)) => json!({"status": e.source.status(),
                                   "substatus": e.source.substatus().unwrap_or(0),
                                   "message": e.to_string(), "committed": e.committed}),
            _ => json!({"status": 400, "substatus": 0, "message": format!("{err:#}")}),
        },
    };
    if let Some(logs) = err
        .downcast_ref::<Error>()
        .map(Error::logs)
        .filter(|l| !l.is_empty())
    {
        report["logs"] = json!(logs);
    }
    if let Some(operation) = err
        .downcast_ref::<Error>()
        .and_then(Error::failed_operation)
    {
        report["failedOperation"] = operation.to_json();
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_arguments_with_duplicate_members_are_a_400_naming_the_member() {
        let err = parse_json("--body", r#"{"id": "a", "pk": "p", "id": "b"}"#).unwrap_err();
        assert_eq!(err.status(), 400);
        assert!(
            err.to_string()
                .contains("--body is refused: the member /id appears more than once"),
            "{err}"
        );
        let err = parse_json("--body", "{").unwrap_err();
        assert!(
            err.to_string().contains("--body is not valid JSON"),
            "{err}"
        );
        assert_eq!(
            parse_json("--params", r#"[{"k": 1}, {"k": 2}]"#).unwrap(),
            json!([{"k": 1}, {"k": 2}])
        );
    }
}
