//! Continuation tokens: where the next page of a query starts.
//!
//! A token is URL-safe base64 (no padding) of a small JSON object:
//!
//! ```text
//! {"pv":1, "m":"s"|"o"|"i", "h":"<hash>", "i":<rows before>,
//!  "p":"[\"pk\"]", "r":<rid>, "j":<join row>, "k":[[v],[]…]}
//! ```
//!
//! * `m` is the execution mode: `s` streaming (no ORDER BY), `o` ORDER BY,
//!   `i` materialised (aggregates, GROUP BY, DISTINCT, no FROM).
//! * `h` ties the token to the query text and parameter values; a token from
//!   another query is rejected (400).
//! * `i` counts the result rows before the resume point (for TOP, OFFSET and
//!   LIMIT, and the whole position in mode `i`).
//! * `p`/`r`/`j` are a position: partition key (canonical text form), document
//!   RID and the ordinal of the row within that document's JOIN cross product.
//!   In mode `s` it is the *next* row to return; in mode `o` it is the *last*
//!   row returned, and `k` holds its sort keys (`[]` for undefined).
//!
//! The version field is `pv`, not `v`: the Python SDK decodes any
//! continuation it is handed as base64 JSON and takes an object with a `v`
//! for its own feed-range token (then fails on its missing fields).
//!
//! Decoding validates everything and maps every problem to
//! [`QueryError::InvalidContinuation`]; it never panics.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use host_api::PartitionKey;
use serde_json::{Map, Value, json};

use crate::query::QueryError;

/// Longest token accepted (characters).
const MAX_TOKEN_LEN: usize = 1 << 20;

/// How a query is executed, which decides the token's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Stream,
    Order,
    Index,
}

impl Mode {
    fn tag(self) -> &'static str {
        match self {
            Mode::Stream => "s",
            Mode::Order => "o",
            Mode::Index => "i",
        }
    }
}

/// A decoded continuation token.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Token {
    pub(crate) mode: Mode,
    pub(crate) hash: u64,
    pub(crate) index: u64,
    pub(crate) pk: Option<PartitionKey>,
    pub(crate) rid: u64,
    pub(crate) combo: u64,
    pub(crate) keys: Vec<Option<Value>>,
}

impl Token {
    /// A token for materialised results: just the row index.
    pub(crate) fn index(hash: u64, index: u64) -> Token {
        Token {
            mode: Mode::Index,
            hash,
            index,
            pk: None,
            rid: 0,
            combo: 0,
            keys: Vec::new(),
        }
    }

    /// The opaque string form.
    pub(crate) fn encode(&self) -> String {
        let mut obj = Map::new();
        obj.insert("pv".into(), json!(1));
        obj.insert("m".into(), json!(self.mode.tag()));
        obj.insert("h".into(), json!(format!("{:016x}", self.hash)));
        obj.insert("i".into(), json!(self.index));
        if let Some(pk) = &self.pk {
            obj.insert("p".into(), json!(pk.to_json_array()));
            obj.insert("r".into(), json!(self.rid));
            obj.insert("j".into(), json!(self.combo));
        }
        if self.mode == Mode::Order {
            let keys: Vec<Value> = self
                .keys
                .iter()
                .map(|k| Value::Array(k.iter().cloned().collect()))
                .collect();
            obj.insert("k".into(), Value::Array(keys));
        }
        URL_SAFE_NO_PAD.encode(Value::Object(obj).to_string())
    }

    /// Parses and validates a token for a query with `hash`, executed in
    /// `mode` with `n_keys` ORDER BY keys.
    pub(crate) fn decode(
        text: &str,
        mode: Mode,
        hash: u64,
        n_keys: usize,
    ) -> Result<Token, QueryError> {
        let bad = |why: &str| QueryError::InvalidContinuation(why.to_owned());
        if text.len() > MAX_TOKEN_LEN {
            return Err(bad("token too long"));
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(text.trim())
            .map_err(|_| bad("not a continuation token"))?;
        let value: Value =
            serde_json::from_slice(&bytes).map_err(|_| bad("not a continuation token"))?;
        let obj = value
            .as_object()
            .ok_or_else(|| bad("not a continuation token"))?;
        if obj.get("pv") != Some(&json!(1)) {
            return Err(bad("unsupported token version"));
        }
        if obj.get("m").and_then(Value::as_str) != Some(mode.tag()) {
            return Err(bad("token belongs to a different query"));
        }
        let token_hash = obj
            .get("h")
            .and_then(Value::as_str)
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .ok_or_else(|| bad("missing query hash"))?;
        if token_hash != hash {
            return Err(bad("token belongs to a different query or parameters"));
        }
        let index = obj
            .get("i")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("missing row index"))?;
        let mut token = Token::index(hash, index);
        token.mode = mode;
        if mode == Mode::Index {
            return Ok(token);
        }
        let pk_text = obj
            .get("p")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("missing partition key"))?;
        token.pk = Some(PartitionKey::parse(pk_text).map_err(|_| bad("invalid partition key"))?);
        token.rid = obj
            .get("r")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("missing rid"))?;
        token.combo = obj
            .get("j")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("missing row ordinal"))?;
        if mode == Mode::Order {
            let keys = obj
                .get("k")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("missing sort keys"))?;
            if keys.len() != n_keys {
                return Err(bad("wrong number of sort keys"));
            }
            for k in keys {
                match k.as_array().map(Vec::as_slice) {
                    Some([]) => token.keys.push(None),
                    Some([v]) => token.keys.push(Some(v.clone())),
                    _ => return Err(bad("invalid sort key")),
                }
            }
        }
        Ok(token)
    }
}
