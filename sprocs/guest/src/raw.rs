//! Documents kept as JSON text: read one member, change one member, write
//! the document back, without parsing what the procedure does not touch.
//!
//! A procedure that bumps a counter on a post does not need the post as a
//! [`serde_json::Value`]. Building that tree (every string copied, every
//! key hashed into an index map), serializing it again, and decoding the
//! written document the host sends back was most of the Rust
//! createComment's own work: about 30,000 of its 38,000 units of fuel.
//! [`RawDoc`] keeps the text it was read from and a list of changes:
//! [`get`](RawDoc::get) scans the text for one member and parses only its
//! value, [`set`](RawDoc::set) records a new value (in the member's place,
//! or last for a new member, as a JavaScript assignment), and writing the
//! document copies the text with the new values spliced in. The call now
//! uses about 21,000. A first version split every document into members
//! up front: the per-member bookkeeping cost more than the scan.
//! [`RawArray`] splits an array (a procedure's parameters) into item
//! texts. [`Written`] is what a write returns: a handle on the stored
//! document, which the host keeps unserialized until the next operation
//! and sends only if the procedure asks for it.
//!
//! Scanning is not validating: the scanner finds where members begin and
//! end (strings with their escapes, nested brackets), but does not check
//! every number or escape. The host's text is JSON by construction and is
//! read as it is ([`FromJson`]); text the procedure supplies goes through
//! [`RawDoc::parse`], which checks its structure whole and removes repeated
//! keys; a malformed value fails when it is read with `get` (400) or when
//! the host parses the written document (400, nothing written).
//!
//! [`FromJson`] and [`ToJson`] are how host calls take and return JSON:
//! anything serde can decode or encode, plus these raw types.

use std::borrow::Cow;

use host_api::ErrorCode;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::Error;

/// What a host call's JSON result decodes into: any [`DeserializeOwned`]
/// type, [`RawDoc`] and [`RawArray`].
pub trait FromJson: Sized {
    /// Decodes `bytes`, or says what was wrong.
    ///
    /// # Errors
    /// A description of the mismatch, which the caller wraps with context.
    fn from_json(bytes: &[u8]) -> Result<Self, String>;
}

impl<T: DeserializeOwned> FromJson for T {
    fn from_json(bytes: &[u8]) -> Result<T, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }
}

/// What a host call accepts as JSON (a document, a body): any [`Serialize`]
/// type and [`RawDoc`].
pub trait ToJson {
    /// The JSON text, or why there is none.
    ///
    /// # Errors
    /// Why the value cannot be JSON (a map with non-string keys, say).
    fn to_json(&self) -> Result<Vec<u8>, String>;
}

impl<T: Serialize + ?Sized> ToJson for T {
    fn to_json(&self) -> Result<Vec<u8>, String> {
        serde_json::to_vec(self).map_err(|e| e.to_string())
    }
}

/// A member changed since the text was read.
#[derive(Clone, Debug)]
struct Edit {
    name: Box<str>,
    /// Where the member is in the source, if it is there: its key's start
    /// and its value's span.
    at: Option<(usize, usize, usize)>,
    /// The new value's JSON text; `None` when removed.
    value: Option<Box<str>>,
}

/// A JSON object kept as its text, read and changed one member at a time.
///
/// Read one with [`Collection::read`](crate::Collection::read) (or as
/// [`params`](crate::params) item, [`request_body`](crate::request_body),
/// ...), change it, and pass it to any write. Nothing is parsed up front:
/// [`get`](RawDoc::get) finds one member by scanning the text and parses
/// only its value, [`set`](RawDoc::set) records a new value, and writing
/// the document copies the text with the changed values spliced in (a new
/// member goes last, as a JavaScript assignment puts it), so untouched
/// members are written back byte for byte.
///
/// ```
/// use partita_guest::{Error, RawDoc, WriteOptions, collection, js};
/// use serde_json::Value;
///
/// fn like(post_id: &str) -> Result<(), Error> {
///     let c = collection();
///     let mut post: RawDoc = c.read(post_id)?;
///     let likes = post.get::<Value>("likeCount")?;
///     post.set("likeCount", &js::increment(likes.as_ref()))?;
///     c.replace(&post.id()?, &post, &WriteOptions::default())?;
///     Ok(())
/// }
/// ```
#[derive(Clone, Debug)]
pub struct RawDoc {
    /// A JSON object's text whose keys are distinct (the host's text is a
    /// serialized map; [`RawDoc::parse`] removes repeats).
    source: Box<str>,
    /// Members set or removed since, in the order first changed.
    edits: Vec<Edit>,
    /// The member [`find`](RawDoc::find) found last (its key literal's
    /// span and its value's span): a `set` after a `get` of the same member
    /// does not scan again.
    last_found: std::cell::Cell<Option<(usize, usize, usize, usize)>>,
}

impl Default for RawDoc {
    fn default() -> RawDoc {
        RawDoc::new()
    }
}

impl RawDoc {
    /// An empty object.
    pub fn new() -> RawDoc {
        RawDoc::trusted("{}")
    }

    /// Text known to be one object with distinct keys (the host's).
    fn trusted(text: &str) -> RawDoc {
        RawDoc {
            source: text.into(),
            edits: Vec::new(),
            last_found: std::cell::Cell::new(None),
        }
    }

    /// The host's text of one object (see [`FromJson`] for `RawDoc`), once
    /// known to be UTF-8.
    fn host_object(text: &str) -> Result<RawDoc, String> {
        let trimmed = text.trim();
        if !(trimmed.starts_with('{') && trimmed.ends_with('}')) {
            return Err("not a JSON object".to_owned());
        }
        Ok(RawDoc::trusted(text))
    }

    /// Reads `text`, which must be one JSON object. Its structure is
    /// checked whole here (the host's text, read through
    /// [`FromJson`], is not: it is JSON by construction); a repeated key
    /// keeps its first place and its last value, as `JSON.parse` does.
    ///
    /// # Errors
    /// 400 when it is not an object or its structure is broken, naming
    /// where.
    pub fn parse(text: &str) -> Result<RawDoc, Error> {
        let bad = |e: String| Error::status(ErrorCode::BAD_REQUEST, e);
        let mut names: Vec<(scan::Str, scan::Span)> = Vec::with_capacity(16);
        scan::object(text.as_bytes(), |key, value| {
            names.push((key, value));
            true
        })
        .map_err(|e| bad(e.message()))?;
        // (name, key literal's span, value's span) of each member.
        let mut members = Vec::with_capacity(names.len());
        for (key, value) in &names {
            members.push((key_name(text, key).map_err(&bad)?, key.span, *value));
        }
        // Where each key appears last.
        let mut last: std::collections::HashMap<&str, usize> =
            std::collections::HashMap::with_capacity(members.len());
        for (i, (name, _, _)) in members.iter().enumerate() {
            last.insert(name.as_ref(), i);
        }
        if last.len() == members.len() {
            return Ok(RawDoc::trusted(text));
        }
        // Rebuild the text: each key once, where it first appeared, with the
        // value it last had.
        let mut out = String::with_capacity(text.len());
        out.push('{');
        let mut written = std::collections::HashSet::new();
        for (name, (ks, ke), _) in &members {
            if !written.insert(name.as_ref()) {
                continue;
            }
            let (_, _, (vs, ve)) = members[last[name.as_ref()]];
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&text[*ks..*ke]);
            out.push(':');
            out.push_str(&text[vs..ve]);
        }
        out.push('}');
        Ok(RawDoc::trusted(&out))
    }

    /// Where the member `key` is in the source: its key's start and its
    /// value's span.
    fn find(&self, key: &str) -> Option<(usize, usize, usize)> {
        let src = &*self.source;
        if let Some((ks, ke, vs, ve)) = self.last_found.get()
            && src.get(ks + 1..ke - 1) == Some(key)
        {
            return Some((ks, vs, ve));
        }
        let mut found = None;
        // A broken text has no members past the break.
        let _ = scan::object(src.as_bytes(), |k, (vs, ve)| {
            let hit = if k.escaped {
                key_name(src, &k).is_ok_and(|name| name == key)
            } else {
                src.get(k.span.0 + 1..k.span.1 - 1) == Some(key)
            };
            if hit {
                found = Some((k.span.0, vs, ve));
                self.last_found.set(Some((k.span.0, k.span.1, vs, ve)));
            }
            !hit
        });
        found
    }

    fn edit(&self, key: &str) -> Option<&Edit> {
        self.edits.iter().find(|e| &*e.name == key)
    }

    /// The JSON text of the member `key`, if there is one.
    pub fn get_json(&self, key: &str) -> Option<&str> {
        match self.edit(key) {
            Some(edit) => edit.value.as_deref(),
            None => self
                .find(key)
                .and_then(|(_, vs, ve)| self.source.get(vs..ve)),
        }
    }

    /// The member `key` decoded as `T`; `None` when there is none (for a
    /// member that may be absent or of any type, ask for a [`Value`]).
    ///
    /// # Errors
    /// 400 when the member does not decode as `T`.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, Error> {
        self.get_json(key)
            .map(|text| {
                serde_json::from_str(text).map_err(|e| {
                    Error::status(
                        ErrorCode::BAD_REQUEST,
                        format!("the member {key:?} does not decode as expected: {e}"),
                    )
                })
            })
            .transpose()
    }

    /// Sets the member `key` to `value`: in its place when there is one,
    /// otherwise last, as a JavaScript assignment does.
    ///
    /// # Errors
    /// 400 when `value` cannot be serialized as JSON.
    pub fn set<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Error> {
        let text = serde_json::to_string(value).map_err(|e| {
            Error::status(
                ErrorCode::BAD_REQUEST,
                format!("the value of {key:?} cannot be serialized as JSON: {e}"),
            )
        })?;
        self.put(key, Some(text.into()));
        Ok(())
    }

    /// Sets the member `key` to `json`, which is already JSON text (an
    /// item of a [`RawArray`], say).
    ///
    /// # Errors
    /// 400 when `json` is not one JSON value.
    pub fn set_json(&mut self, key: &str, json: &str) -> Result<(), Error> {
        serde_json::from_str::<serde::de::IgnoredAny>(json).map_err(|e| {
            Error::status(
                ErrorCode::BAD_REQUEST,
                format!("the value of {key:?} is not JSON: {e}"),
            )
        })?;
        self.put(key, Some(json.into()));
        Ok(())
    }

    fn put(&mut self, key: &str, value: Option<Box<str>>) {
        if let Some(edit) = self.edits.iter_mut().find(|e| &*e.name == key) {
            edit.value = value;
            return;
        }
        let at = self.find(key);
        if at.is_none() && value.is_none() {
            return;
        }
        self.edits.push(Edit {
            name: key.into(),
            at,
            value,
        });
    }

    /// Removes the member `key` (JavaScript's `delete`), keeping the order
    /// of the others; returns its JSON text.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let old = self.get_json(key)?.to_owned();
        self.put(key, None);
        Some(old)
    }

    /// The document's `id`, for writes that address it by id.
    ///
    /// # Errors
    /// 400 when there is no string `id`.
    pub fn id(&self) -> Result<Cow<'_, str>, Error> {
        let text = self.get_json("id");
        match text.and_then(|t| t.strip_prefix('"')?.strip_suffix('"')) {
            // Most ids have no escapes: the text between the quotes.
            Some(plain) if !plain.contains('\\') => Ok(Cow::Borrowed(plain)),
            Some(_) => Ok(Cow::Owned(self.get::<String>("id")?.unwrap_or_default())),
            None => Err(Error::status(
                ErrorCode::BAD_REQUEST,
                "the document has no string \"id\"",
            )),
        }
    }

    /// The members' keys, in order.
    pub fn keys(&self) -> Vec<String> {
        let src = &*self.source;
        let mut keys = Vec::new();
        let _ = scan::object(src.as_bytes(), |k, _| {
            if let Ok(name) = key_name(src, &k)
                && self.edit(&name).is_none_or(|e| e.value.is_some())
            {
                keys.push(name.into_owned());
            }
            true
        });
        for edit in &self.edits {
            if edit.at.is_none() && edit.value.is_some() {
                keys.push(edit.name.to_string());
            }
        }
        keys
    }

    /// How many members there are.
    pub fn len(&self) -> usize {
        self.keys().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole document parsed as a [`Value`].
    ///
    /// # Errors
    /// 400 when a member is not JSON.
    pub fn to_value(&self) -> Result<Value, Error> {
        serde_json::from_slice(&self.text())
            .map_err(|e| Error::status(ErrorCode::BAD_REQUEST, format!("not JSON: {e}")))
    }

    /// The object's JSON text: the source with changed values spliced in
    /// and new members before its closing brace; rebuilt member by member
    /// only when one was removed.
    fn text(&self) -> Vec<u8> {
        let src = &*self.source;
        let extra: usize = self
            .edits
            .iter()
            .map(|e| e.name.len() + e.value.as_ref().map_or(0, |v| v.len()) + 8)
            .sum();
        let mut out = Vec::with_capacity(src.len() + extra);
        if self
            .edits
            .iter()
            .any(|e| e.value.is_none() && e.at.is_some())
        {
            self.rebuild(&mut out);
            return out;
        }
        let mut replaced: Vec<&Edit> = self.edits.iter().filter(|e| e.at.is_some()).collect();
        replaced.sort_unstable_by_key(|e| e.at.map(|(ks, _, _)| ks));
        let close = src.rfind('}').unwrap_or(src.len());
        let mut pos = 0;
        for edit in replaced {
            let (Some((_, vs, ve)), Some(value)) = (edit.at, &edit.value) else {
                continue;
            };
            out.extend_from_slice(src.get(pos..vs).unwrap_or_default().as_bytes());
            out.extend_from_slice(value.as_bytes());
            pos = ve;
        }
        out.extend_from_slice(src.get(pos..close).unwrap_or_default().as_bytes());
        let mut empty = src
            .get(..close)
            .unwrap_or_default()
            .trim_end()
            .ends_with('{');
        for edit in self.edits.iter().filter(|e| e.at.is_none()) {
            if let Some(value) = &edit.value {
                if !empty {
                    out.push(b',');
                }
                empty = false;
                write_key(&edit.name, &mut out);
                out.push(b':');
                out.extend_from_slice(value.as_bytes());
            }
        }
        out.extend_from_slice(src.get(close..).unwrap_or("}").as_bytes());
        out
    }

    /// The text member by member, for when some were removed.
    fn rebuild(&self, out: &mut Vec<u8>) {
        let src = &*self.source;
        out.push(b'{');
        let mut first = true;
        let mut member = |key: &[u8], value: &[u8], out: &mut Vec<u8>| {
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(key);
            out.push(b':');
            out.extend_from_slice(value);
        };
        let _ = scan::object(src.as_bytes(), |k, (vs, ve)| {
            let literal = src.as_bytes().get(k.span.0..k.span.1).unwrap_or_default();
            let edit = key_name(src, &k).ok().and_then(|name| self.edit(&name));
            match edit {
                None => member(literal, src.as_bytes().get(vs..ve).unwrap_or_default(), out),
                Some(Edit {
                    value: Some(value), ..
                }) => member(literal, value.as_bytes(), out),
                Some(_) => {}
            }
            true
        });
        for edit in self.edits.iter().filter(|e| e.at.is_none()) {
            if let Some(value) = &edit.value {
                let mut key = Vec::new();
                write_key(&edit.name, &mut key);
                member(&key, value.as_bytes(), out);
            }
        }
        out.push(b'}');
    }
}

/// The text a key literal stands for.
fn key_name<'a>(src: &'a str, key: &scan::Str) -> Result<Cow<'a, str>, String> {
    let literal = src.get(key.span.0..key.span.1).unwrap_or_default();
    if key.escaped {
        serde_json::from_str(literal)
            .map(Cow::Owned)
            .map_err(|e| format!("bad key at byte {}: {e}", key.span.0))
    } else {
        Ok(Cow::Borrowed(
            literal
                .get(1..literal.len().saturating_sub(1))
                .unwrap_or_default(),
        ))
    }
}

/// Writes `name` as a JSON string literal.
fn write_key(name: &str, out: &mut Vec<u8>) {
    // Most keys need no escapes: quoted as they are.
    if name.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.push(b'"');
    } else {
        out.extend_from_slice(serde_json::to_string(name).unwrap_or_default().as_bytes());
    }
}

impl FromJson for RawDoc {
    /// The host's text: one object, a serialized map (distinct keys); it is
    /// not scanned until a member is asked for. Use [`RawDoc::parse`] for
    /// other text.
    fn from_json(bytes: &[u8]) -> Result<RawDoc, String> {
        let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
        RawDoc::host_object(text)
    }
}

impl ToJson for RawDoc {
    fn to_json(&self) -> Result<Vec<u8>, String> {
        Ok(self.text())
    }
}

/// A JSON array whose items stay JSON text: a procedure's parameters read
/// without parsing them (`params::<RawArray>()`).
#[derive(Clone, Debug, Default)]
pub struct RawArray {
    source: Box<str>,
    items: Vec<(usize, usize)>,
}

impl RawArray {
    /// The JSON text of item `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&str> {
        self.items
            .get(i)
            .and_then(|&(start, end)| self.source.get(start..end))
    }

    /// Item `i` decoded as `T`; `None` past the end.
    ///
    /// # Errors
    /// 400 when the item does not decode as `T`.
    pub fn decode<T: DeserializeOwned>(&self, i: usize) -> Result<Option<T>, Error> {
        self.get(i)
            .map(|text| {
                serde_json::from_str(text).map_err(|e| {
                    Error::status(
                        ErrorCode::BAD_REQUEST,
                        format!("item {i} does not decode as expected: {e}"),
                    )
                })
            })
            .transpose()
    }

    /// Item `i` when it is a JSON string, unescaped (without parsing it
    /// when it has no escapes); `None` for any other item or past the end.
    pub fn str(&self, i: usize) -> Option<Cow<'_, str>> {
        let text = self.get(i)?;
        let inner = text.strip_prefix('"')?.strip_suffix('"')?;
        if inner.contains('\\') {
            serde_json::from_str::<String>(text).ok().map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(inner))
        }
    }

    /// Item `i` as a [`RawDoc`] (the host's text, not scanned until a
    /// member is asked for); `None` past the end.
    ///
    /// # Errors
    /// 400 when the item is not an object.
    pub fn doc(&self, i: usize) -> Result<Option<RawDoc>, Error> {
        self.get(i)
            .map(|text| {
                // The item is part of the array's text: UTF-8 already.
                RawDoc::host_object(text)
                    .map_err(|e| Error::status(ErrorCode::BAD_REQUEST, format!("item {i}: {e}")))
            })
            .transpose()
    }

    /// How many items there are.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl FromJson for RawArray {
    fn from_json(bytes: &[u8]) -> Result<RawArray, String> {
        let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
        let items = scan::array(text.as_bytes()).map_err(scan::Bad::message)?;
        Ok(RawArray {
            source: text.into(),
            items,
        })
    }
}

/// The document a write stored, with its system properties (`_etag`,
/// `_ts`, ...), which the host keeps until the procedure's next operation:
/// read it (`json`, `value`, `into_bytes`) before that, or never (most
/// procedures never do, and then the host does not even serialize it).
#[derive(Debug, PartialEq, Eq)]
pub struct Written {
    len: usize,
    call: u64,
}

impl Written {
    pub(crate) fn new(len: usize, call: u64) -> Written {
        Written { len, call }
    }

    /// The stored document's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the stored document is empty (never, for a document).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The stored document's JSON text.
    ///
    /// # Errors
    /// 400 when another operation ran since the write (the host keeps the
    /// document only until then).
    pub fn into_bytes(self) -> Result<Vec<u8>, Error> {
        crate::call::take_waiting(self.len, self.call)
    }

    /// The stored document decoded as `T` (a [`Value`], a [`RawDoc`], your
    /// own struct).
    ///
    /// # Errors
    /// As [`into_bytes`](Self::into_bytes); 500 when it does not decode as
    /// `T`.
    pub fn json<T: FromJson>(self) -> Result<T, Error> {
        let bytes = self.into_bytes()?;
        crate::call::decode_host("document")(&bytes)
    }

    /// The stored document as a [`Value`].
    ///
    /// # Errors
    /// As [`json`](Self::json).
    pub fn value(self) -> Result<Value, Error> {
        self.json()
    }
}

/// The splitter: where values begin and end, following strings (with
/// their escapes) and nesting, on bytes (every delimiter is ASCII, so the
/// spans fall on character boundaries). One pass, no allocation but the
/// result; a failure is a small [`Bad`](scan::Bad) until it is reported.
mod scan {
    pub(super) type Span = (usize, usize);

    /// A string literal's span, quotes included, and whether it has escapes.
    pub(super) struct Str {
        pub(super) span: Span,
        pub(super) escaped: bool,
    }

    /// What was expected where.
    #[derive(Clone, Copy)]
    pub(super) struct Bad {
        at: usize,
        expected: &'static str,
    }

    impl Bad {
        pub(super) fn message(self) -> String {
            format!("expected {} at byte {}", self.expected, self.at)
        }
    }

    fn bad<T>(at: usize, expected: &'static str) -> Result<T, Bad> {
        Err(Bad { at, expected })
    }

    /// Where the first `"` or backslash at or after `from` is: eight bytes at a
    /// time (strings are most of a document, and this is their loop).
    pub(super) fn quote_or_backslash(t: &[u8], from: usize) -> Option<usize> {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        // The high bit of each byte of `x` equal to `b`; the lowest set bit
        // is exact (a borrow can only mark bytes above a true match).
        let matches = |x: u64, b: u8| {
            let y = x ^ (ONES * u64::from(b));
            y.wrapping_sub(ONES) & !y & HIGH
        };
        // A direct eight-byte load per step: most strings are short, and the
        // set-up of a chunk iterator cost more than their bytes.
        let mut i = from;
        while let Some(chunk) = t.get(i..i + 8) {
            let x = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            let found = matches(x, b'"') | matches(x, b'\\');
            if found != 0 {
                return Some(i + (found.trailing_zeros() / 8) as usize);
            }
            i += 8;
        }
        t.get(i..)?
            .iter()
            .position(|&b| b == b'"' || b == b'\\')
            .map(|k| i + k)
    }

    struct Cursor<'a> {
        t: &'a [u8],
        i: usize,
    }

    impl Cursor<'_> {
        fn peek(&self) -> Option<u8> {
            self.t.get(self.i).copied()
        }

        fn ws(&mut self) {
            while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
                self.i += 1;
            }
        }

        /// After the opening quote at `self.i`; leaves the cursor past the
        /// closing one.
        fn string(&mut self) -> Result<Str, Bad> {
            let start = self.i;
            let mut escaped = false;
            let mut i = start + 1;
            loop {
                match quote_or_backslash(self.t, i) {
                    Some(k) if self.t[k] == b'"' => {
                        self.i = k + 1;
                        return Ok(Str {
                            span: (start, k + 1),
                            escaped,
                        });
                    }
                    // The backslash and the byte it escapes.
                    Some(k) => {
                        escaped = true;
                        i = k + 2;
                    }
                    None => return bad(start, "a closing quote for the string"),
                }
            }
        }

        /// One value; leaves the cursor past it.
        fn value(&mut self) -> Result<Span, Bad> {
            let start = self.i;
            match self.peek() {
                Some(b'"') => self.string().map(|s| s.span),
                Some(b'{' | b'[') => {
                    let mut depth = 0usize;
                    while let Some(b) = self.peek() {
                        match b {
                            b'"' => {
                                self.string()?;
                                continue;
                            }
                            b'{' | b'[' => depth += 1,
                            b'}' | b']' => {
                                depth -= 1;
                                if depth == 0 {
                                    self.i += 1;
                                    return Ok((start, self.i));
                                }
                            }
                            _ => {}
                        }
                        self.i += 1;
                    }
                    bad(start, "a closing bracket")
                }
                _ => {
                    while let Some(b) = self.peek() {
                        if matches!(b, b',' | b'}' | b']' | b':' | b' ' | b'\t' | b'\n' | b'\r') {
                            break;
                        }
                        self.i += 1;
                    }
                    if self.i == start {
                        bad(start, "a value")
                    } else {
                        Ok((start, self.i))
                    }
                }
            }
        }

        /// After an item: `,` (returns true) or `close` (false).
        fn next(&mut self, close: u8, expected: &'static str) -> Result<bool, Bad> {
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                    Ok(true)
                }
                Some(b) if b == close => {
                    self.i += 1;
                    Ok(false)
                }
                _ => bad(self.i, expected),
            }
        }

        /// Opens a sequence: whether it has items.
        fn open(&mut self, open: u8, close: u8, expected: &'static str) -> Result<bool, Bad> {
            self.ws();
            if self.peek() != Some(open) {
                return bad(self.i, expected);
            }
            self.i += 1;
            self.ws();
            if self.peek() == Some(close) {
                self.i += 1;
                return Ok(false);
            }
            Ok(true)
        }

        fn end(&mut self) -> Result<(), Bad> {
            self.ws();
            if self.i == self.t.len() {
                Ok(())
            } else {
                bad(self.i, "the end of the text")
            }
        }
    }

    /// Calls `member` with each member of the object `t`: its key literal
    /// and its value's span; stops early when it returns false.
    pub(super) fn object(t: &[u8], mut member: impl FnMut(Str, Span) -> bool) -> Result<(), Bad> {
        let mut c = Cursor { t, i: 0 };
        let mut more = c.open(b'{', b'}', "a JSON object")?;
        while more {
            if c.peek() != Some(b'"') {
                return bad(c.i, "a key");
            }
            let key = c.string()?;
            c.ws();
            if c.peek() != Some(b':') {
                return bad(c.i, "':'");
            }
            c.i += 1;
            c.ws();
            let value = c.value()?;
            if !member(key, value) {
                return Ok(());
            }
            more = c.next(b'}', "',' or '}'")?;
        }
        c.end()
    }

    /// The items of the array `t`.
    pub(super) fn array(t: &[u8]) -> Result<Vec<Span>, Bad> {
        let mut c = Cursor { t, i: 0 };
        let mut items = Vec::with_capacity(4);
        let mut more = c.open(b'[', b']', "a JSON array")?;
        while more {
            items.push(c.value()?);
            more = c.next(b']', "',' or ']'")?;
        }
        c.end()?;
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const POST: &str =
        r#"{"id":"p1","title":"Hi \"you\" {[","n":{"a":[1,2.5,null,"]"]},"commentCount":4}"#;

    fn text(doc: &RawDoc) -> String {
        String::from_utf8(doc.to_json().unwrap()).unwrap()
    }

    #[test]
    fn unchanged_members_are_written_back_as_they_came() {
        let doc = RawDoc::parse(POST).unwrap();
        assert_eq!(text(&doc), POST);
        assert_eq!(doc.keys(), ["id", "title", "n", "commentCount"]);
        assert_eq!(
            doc.to_value().unwrap(),
            serde_json::from_str::<Value>(POST).unwrap()
        );
        // The text is written back as it came, whitespace included; a set
        // value is spliced in.
        let mut spaced = RawDoc::parse(" {\n \"a\" : [1, 2] ,\"b\":\t\"x y\" } ").unwrap();
        assert_eq!(text(&spaced), " {\n \"a\" : [1, 2] ,\"b\":\t\"x y\" } ");
        spaced.set("a", &[3]).unwrap();
        spaced.set("c", &true).unwrap();
        assert_eq!(
            text(&spaced),
            " {\n \"a\" : [3] ,\"b\":\t\"x y\" ,\"c\":true} "
        );
        spaced.remove("b");
        assert_eq!(text(&spaced), r#"{"a":[3],"c":true}"#);
    }

    #[test]
    fn set_replaces_in_place_or_appends_and_remove_keeps_order() {
        let mut doc = RawDoc::parse(POST).unwrap();
        assert_eq!(doc.get::<u64>("commentCount").unwrap(), Some(4));
        doc.set("commentCount", &5).unwrap();
        doc.set("post\"Id", "p1").unwrap();
        doc.set_json("tags", r#"["a", "b"]"#).unwrap();
        assert_eq!(doc.remove("n").unwrap(), r#"{"a":[1,2.5,null,"]"]}"#);
        assert!(doc.remove("n").is_none());
        assert_eq!(
            text(&doc),
            r#"{"id":"p1","title":"Hi \"you\" {[","commentCount":5,"post\"Id":"p1","tags":["a", "b"]}"#
        );
        assert_eq!(doc.get::<String>("post\"Id").unwrap().unwrap(), "p1");
        assert_eq!(doc.len(), 5);
        let err = doc.set_json("x", "{oops").unwrap_err();
        assert!(err.is(ErrorCode::BAD_REQUEST), "{err}");
        let mut fresh = RawDoc::new();
        assert!(fresh.is_empty());
        fresh.set("id", "a").unwrap();
        assert_eq!(fresh.to_value().unwrap(), json!({"id": "a"}));
    }

    #[test]
    fn edits_combine_as_javascript_assignments_and_deletes_would() {
        let doc = |t: &str| RawDoc::from_json(t.as_bytes()).unwrap();
        // Remove the first, a middle and the last member; set one removed
        // again (it goes last, as a new property); add then remove one.
        for (source, edit, expected) in [
            (r#"{"a":1,"b":2,"c":3}"#, "-a", r#"{"b":2,"c":3}"#),
            (r#"{"a":1,"b":2,"c":3}"#, "-b", r#"{"a":1,"c":3}"#),
            (r#"{"a":1,"b":2,"c":3}"#, "-c", r#"{"a":1,"b":2}"#),
            (r#"{"a":1,"b":2,"c":3}"#, "-a-b-c", "{}"),
            (r#"{"a":1}"#, "+x-x", r#"{"a":1}"#),
            (r#"{"a":1}"#, "-a+a", r#"{"a":9}"#),
            (r#"{"a":1,"b":2}"#, "+b+z", r#"{"a":1,"b":9,"z":9}"#),
            ("{}", "+z", r#"{"z":9}"#),
        ] {
            let mut d = doc(source);
            for op in edit.as_bytes().chunks(2) {
                let key = std::str::from_utf8(&op[1..]).unwrap();
                if op[0] == b'-' {
                    d.remove(key);
                } else {
                    d.set(key, &9).unwrap();
                }
            }
            assert_eq!(text(&d), expected, "{source} {edit}");
            assert_eq!(
                d.to_value().unwrap(),
                serde_json::from_str::<Value>(expected).unwrap()
            );
            let keys = serde_json::from_str::<Value>(expected).unwrap();
            let keys: Vec<&String> = keys.as_object().unwrap().keys().collect();
            assert_eq!(d.keys().iter().collect::<Vec<_>>(), keys, "{source} {edit}");
        }
        let mut d = doc(r#"{"a":1}"#);
        assert_eq!(d.remove("nope"), None);
        assert_eq!(d.remove("a").as_deref(), Some("1"));
        assert!(d.is_empty() && d.get_json("a").is_none());
    }

    #[test]
    fn get_decodes_one_member_and_names_a_mismatch() {
        let doc = RawDoc::parse(POST).unwrap();
        assert_eq!(
            doc.get::<String>("title").unwrap().unwrap(),
            "Hi \"you\" {["
        );
        assert_eq!(doc.get::<Value>("missing").unwrap(), None);
        let err = doc.get::<u64>("title").unwrap_err();
        assert!(
            err.is(ErrorCode::BAD_REQUEST) && err.message().contains("\"title\""),
            "{err}"
        );
    }

    #[test]
    fn escaped_keys_and_ids() {
        assert_eq!(RawDoc::parse(POST).unwrap().id().unwrap(), "p1");
        let escaped = RawDoc::parse(r#"{"\u0069d":"a\u0041\"b","k\"":1}"#).unwrap();
        assert_eq!(escaped.id().unwrap(), "aA\"b");
        assert_eq!(escaped.get::<u8>("k\"").unwrap(), Some(1));
        for doc in [r#"{"id":7}"#, r#"{"x":"y"}"#] {
            let err = RawDoc::parse(doc).unwrap().id().unwrap_err();
            assert!(err.is(ErrorCode::BAD_REQUEST), "{err}");
        }
    }

    #[test]
    fn broken_structure_is_refused_and_repeated_keys_keep_the_first_place() {
        for bad in [
            "",
            "[1]",
            "\"s\"",
            "{",
            "{\"a\":",
            "{\"a\" 1}",
            "{\"a\":1,}",
            "{a:1}",
            "{\"a\":\"x}",
            "{\"a\":[1}",
            "{\"a\":1} x",
            "{\"a\":}",
            "{\"a\":1 2}",
        ] {
            let err = RawDoc::parse(bad).unwrap_err();
            assert!(err.is(ErrorCode::BAD_REQUEST), "{bad:?}: {err}");
        }
        let doc = RawDoc::parse(r#"{"a":1,"b":2,"a":3}"#).unwrap();
        assert_eq!(text(&doc), r#"{"a":3,"b":2}"#);
        // Large objects find repeats through an index.
        let mut big: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        big.push("\"k3\":\"again\"".to_owned());
        let doc = RawDoc::parse(&format!("{{{}}}", big.join(","))).unwrap();
        assert_eq!(doc.len(), 40);
        assert_eq!(doc.keys()[3], "k3");
        assert_eq!(doc.get::<String>("k3").unwrap().unwrap(), "again");
        assert_eq!(text(&RawDoc::parse("{ }").unwrap()), "{ }");
        let mut empty = RawDoc::parse("{ }").unwrap();
        empty.set("a", &1).unwrap();
        assert_eq!(text(&empty), r#"{ "a":1}"#);
    }

    #[test]
    fn arrays_split_into_item_texts() {
        let args = RawArray::from_json(br#" ["p1", {"a": [1, "]"]}, 7, null] "#).unwrap();
        assert_eq!(args.len(), 4);
        assert_eq!(args.get(0), Some("\"p1\""));
        assert_eq!(args.get(1), Some(r#"{"a": [1, "]"]}"#));
        assert_eq!(args.decode::<u32>(2).unwrap(), Some(7));
        assert_eq!(args.get(3), Some("null"));
        assert_eq!(args.str(0).as_deref(), Some("p1"));
        assert_eq!(args.str(2), None, "a number is not a string");
        let escaped = RawArray::from_json(br#"["a\"b\u0041"]"#).unwrap();
        assert_eq!(escaped.str(0).as_deref(), Some("a\"bA"));
        assert_eq!(args.get(4), None);
        assert!(RawArray::from_json(b"[]").unwrap().is_empty());
        for bad in [&b"{}"[..], b"[1", b"[1,]", b"[\xff]"] {
            assert!(RawArray::from_json(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn splitting_agrees_with_serde_json_on_generated_documents() {
        // Documents with every kind of member, nested and escaped.
        let docs = [
            json!({"id": "a", "s": "q\"\\/\n\u{1F600}é", "n": -1.5e300, "b": [true, false, null, {"x": []}]}),
            json!({"": {"": [[], {}]}, "k\\": "\\", "u": "\u{0000}"}),
            json!({"deep": [[[[[[{"a": "]}"}]]]]]]}),
        ];
        for doc in docs {
            let text_in = serde_json::to_string(&doc).unwrap();
            let pretty = serde_json::to_string_pretty(&doc).unwrap();
            for source in [text_in.clone(), pretty] {
                let raw = RawDoc::from_json(source.as_bytes()).unwrap();
                assert_eq!(raw.to_value().unwrap(), doc, "{source}");
                for (key, value) in doc.as_object().unwrap() {
                    assert_eq!(raw.get::<Value>(key).unwrap().as_ref(), Some(value));
                }
            }
            assert_eq!(text(&RawDoc::parse(&text_in).unwrap()), text_in);
        }
    }

    #[test]
    fn the_word_at_a_time_search_finds_the_first_quote_or_backslash() {
        // Every position of each special byte among bytes that look alike
        // to the bit trick (0x21, 0x5d, 0xa2, 0xdc), from every start.
        for special in [b'"', b'\\'] {
            for len in 0..40 {
                for at in 0..len {
                    let mut t: Vec<u8> = (0..len)
                        .map(|i| [0x21, 0x5d, 0xa2, 0xdc, b'a'][i % 5])
                        .collect();
                    t[at] = special;
                    if at + 3 < len {
                        t[at + 3] = b'"';
                    }
                    for from in 0..=len {
                        let naive = t[from.min(len)..]
                            .iter()
                            .position(|&b| b == b'"' || b == b'\\')
                            .map(|k| k + from);
                        assert_eq!(
                            scan::quote_or_backslash(&t, from),
                            naive,
                            "{t:?} from {from}"
                        );
                    }
                }
            }
        }
        assert_eq!(scan::quote_or_backslash(b"ab", 5), None);
    }
}
