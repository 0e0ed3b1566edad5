//! `partita batch`: many commands in one process, one JSON line each way.
//!
//! Each line of stdin is a JSON array of the arguments that would follow
//! `partita` (`["item","read","posts","--pk","p1","--id","p1"]`); each
//! prints one line on stdout, in order: `{"ok":true,"response":…}` or
//! `{"ok":false,"error":{"status":…,"substatus":…,"message":…}}`. One
//! database stays open and the script runtime's compiled-procedure cache
//! stays warm across lines, which is the point: a process per command pays
//! for opening the database and compiling every script each time.
//!
//! A line that is not a JSON array, or whose command fails, is an error line;
//! the batch goes on. Blank lines are skipped. Arguments that are not strings
//! are passed as their JSON text, so `--body` may be given as a JSON object.
//! A line asking for `--help` answers `{"ok":true,"response":{"help":…}}`.
//! The batch exits 0 when stdin ends, whatever its lines did.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

/// The `--help` example.
pub(crate) const EXAMPLE: &str = r#"Example:
  printf '%s\n' \
    '["container","create","posts","--pk","/postId"]' \
    '["item","create","posts","--pk","p1","--body",{"id":"p1","postId":"p1","commentCount":0}]' \
    '["sproc","exec","posts","createComment","--pk","p1","--params","[\"p1\",{}]"]' \
    | partita --data DIR batch
prints one line per command: {"ok":true,"response":{…}} or {"ok":false,"error":{…}}"#;

/// Runs every line of `input` through `line` and writes one result line per
/// input line to `output`.
///
/// # Errors
/// Only I/O errors of `input` or `output`.
pub(crate) fn run(
    mut input: impl BufRead,
    output: &mut impl Write,
    mut line: impl FnMut(Vec<String>) -> Result<Value, Value>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut number = 0u64;
    loop {
        buf.clear();
        if input.read_until(b'\n', &mut buf)? == 0 {
            return Ok(());
        }
        number += 1;
        let result = match std::str::from_utf8(&buf) {
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) => arguments(number, text).and_then(&mut line),
            Err(_) => Err(bad_line(number, "is not UTF-8 text".to_owned())),
        };
        let reply = match result {
            Ok(response) => json!({"ok": true, "response": response}),
            Err(error) => json!({"ok": false, "error": error}),
        };
        writeln!(output, "{reply}")?;
        output.flush()?;
    }
}

fn bad_line(number: u64, what: String) -> Value {
    json!({"status": 400, "substatus": 0, "message": format!("batch line {number} {what}")})
}

/// A line's arguments: a JSON array; strings as they are, anything else as
/// its JSON text.
fn arguments(number: u64, text: &str) -> Result<Vec<String>, Value> {
    // Strict: a document argument is re-serialized here, so a duplicate
    // member dropped now could not be refused later.
    match partita::strict::parse_str(text) {
        Ok(Value::Array(items)) => Ok(items
            .into_iter()
            .map(|item| match item {
                Value::String(s) => s,
                other => other.to_string(),
            })
            .collect()),
        Ok(other) => Err(bad_line(
            number,
            format!("must be a JSON array of arguments, not {other}"),
        )),
        Err(partita::strict::StrictError::Syntax(e)) => {
            Err(bad_line(number, format!("is not valid JSON: {e}")))
        }
        Err(duplicate) => Err(bad_line(number, format!("is refused: {duplicate}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &str) -> Vec<Value> {
        let mut out = Vec::new();
        run(input.as_bytes(), &mut out, |args| {
            if args.first().map(String::as_str) == Some("fail") {
                Err(json!({"status": 404, "substatus": 0, "message": "no"}))
            } else {
                Ok(json!(args))
            }
        })
        .expect("in-memory I/O");
        String::from_utf8(out)
            .expect("UTF-8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect()
    }

    #[test]
    fn every_line_gets_one_reply_in_order_and_bad_lines_do_not_end_the_batch() {
        let replies = lines("[\"a\",1,{\"x\":true}]\n\nnot json\n{\"a\":1}\n[\"fail\"]\n[\"b\"]");
        assert_eq!(replies.len(), 5, "{replies:?}");
        assert_eq!(
            replies[0],
            json!({"ok": true, "response": ["a", "1", "{\"x\":true}"]})
        );
        for (reply, status) in [(&replies[1], 400), (&replies[2], 400), (&replies[3], 404)] {
            assert_eq!(reply["ok"], false);
            assert_eq!(reply["error"]["status"], status, "{reply}");
        }
        assert!(
            replies[1]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("line 3"),
            "{}",
            replies[1]
        );
        assert_eq!(replies[4], json!({"ok": true, "response": ["b"]}));
    }

    #[test]
    fn a_document_argument_with_duplicate_members_is_refused() {
        let replies = lines("[\"item\",\"create\",{\"id\":\"a\",\"id\":\"b\"}]");
        assert_eq!(replies[0]["ok"], false, "{}", replies[0]);
        assert_eq!(replies[0]["error"]["status"], 400);
        let message = replies[0]["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("line 1 is refused: the member /2/id appears more than once"),
            "{message}"
        );
    }
}
