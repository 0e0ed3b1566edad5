//! Compact JSON text of a [`Value`] without serde_json's serializer: its
//! exact length ([`serialized_len`]) and the text itself ([`to_text`]),
//! byte for byte what `serde_json::to_string` produces.
//!
//! Shared by the engine (document sizes and durable text) and the
//! WebAssembly host (the size of a result before a guest takes it), so the
//! two count the same bytes. Strings that need no escaping, almost all of
//! them, are checked eight bytes at a time and copied whole.

use std::io;

use serde_json::Value;

/// The length of `value` serialized as compact JSON (exactly what
/// `serde_json::to_string` produces), computed without building the text.
/// Recursive: only for values whose depth is known to be bounded.
///
/// Every write needs a document's size (for the 2 MB limit and for read
/// statistics), and serializing just to count was the most expensive step of
/// an in-memory write; the WebAssembly host needs it to tell a guest how
/// large a result is before it is written.
pub fn serialized_len(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => number_len(n),
        Value::String(s) => string_len(s),
        Value::Array(items) => {
            // Brackets and the commas between items.
            2 + items.len().saturating_sub(1) + items.iter().map(serialized_len).sum::<usize>()
        }
        Value::Object(map) => {
            // Braces, commas, and a colon per member.
            2 + map.len().saturating_sub(1)
                + map
                    .iter()
                    .map(|(k, v)| string_len(k) + 1 + serialized_len(v))
                    .sum::<usize>()
        }
    }
}

/// A JSON string's length with quotes and serde_json's escapes: `\"` and
/// `\\`, two-character escapes for `\b \t \n \f \r`, `\u00XX` for the
/// other control characters.
///
/// Inlined, with the count of escapes apart: called for every key and
/// string of a document on every write, the call itself (saving the
/// registers the count needs) cost as much as checking a short string.
#[inline]
pub fn string_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    if escape_free(bytes) {
        s.len() + 2
    } else {
        escaped_len(bytes)
    }
}

/// [`string_len`] of a string with something to escape.
#[inline(never)]
fn escaped_len(bytes: &[u8]) -> usize {
    // Counted eight bytes at a time too: etags, which every stored
    // document has, are quoted (`"\"…\""`) and come here.
    let mut chunks = bytes.chunks_exact(8);
    let mut extra = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        extra += match word_escape_extra(word) {
            Some(n) => n,
            None => chunk.iter().map(|&b| byte_escape_extra(b)).sum(),
        };
    }
    extra += chunks
        .remainder()
        .iter()
        .map(|&b| byte_escape_extra(b))
        .sum::<usize>();
    bytes.len() + 2 + extra
}

/// How many bytes escaping `b` adds: 1 for `\"`, `\\` and the
/// two-character escapes of control characters, 5 for `\u00XX`.
fn byte_escape_extra(b: u8) -> usize {
    match b {
        b'"' | b'\\' | 0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 1,
        0x00..=0x1f => 5,
        _ => 0,
    }
}

/// How many bytes escaping the eight bytes of `word` adds, when none of
/// them is a control character (`None` otherwise: the caller counts those
/// a byte at a time). Unlike [`word_needs_escape`], the masks here are
/// exact, one high bit per matching byte, so their bits can be counted.
#[inline]
fn word_escape_extra(word: u64) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOWS: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // A byte's low seven bits plus 0x60 reach 0x80 exactly when they are
    // 0x20 or more, and never carry into the next byte; a byte with its
    // high bit set is not a control character either.
    let below_0x20 = !(((word & LOWS) + ONES * 0x60) | word) & HIGHS;
    if below_0x20 != 0 {
        return None;
    }
    // The bytes equal to `c`: the zero bytes of `word ^ c`, found the same
    // way (0x7f plus the low bits reaches 0x80 unless they are all zero).
    let equal = |c: u8| {
        let x = word ^ (ONES * u64::from(c));
        !(((x & LOWS) + LOWS) | x) & HIGHS
    };
    Some((equal(b'"') | equal(b'\\')).count_ones() as usize)
}

/// Whether no byte of `bytes` needs escaping in a JSON string, checked
/// eight bytes at a time: most strings need no escapes at all.
///
/// Most strings are short (keys, ids), so the bytes past the last whole
/// word are never checked one by one: they are read as a word that
/// overlaps bytes already checked, or, in a string under eight bytes, as
/// overlapping halves (checking a byte twice changes nothing).
#[inline]
fn escape_free(bytes: &[u8]) -> bool {
    let n = bytes.len();
    let word = if n >= 8 {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            if word_needs_escape(u64::from_le_bytes(chunk.try_into().expect("8 bytes"))) {
                return false;
            }
        }
        if chunks.remainder().is_empty() {
            return true;
        }
        u64::from_le_bytes(bytes[n - 8..].try_into().expect("8 bytes"))
    } else if n >= 4 {
        let low = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
        let high = u32::from_le_bytes(bytes[n - 4..].try_into().expect("4 bytes"));
        u64::from(low) | u64::from(high) << 32
    } else if n > 0 {
        let (a, b, c) = (bytes[0], bytes[n / 2], bytes[n - 1]);
        u64::from_le_bytes([a, b, c, a, b, c, a, b])
    } else {
        return true;
    };
    !word_needs_escape(word)
}

/// `value` as compact JSON text, byte for byte what `serde_json::to_string`
/// writes, given its length `len` ([`serialized_len`]; the engine knows it from
/// its own size check). Recursive: only for depth-checked values.
///
/// The engine's durable writes store each document's text. serde_json's serializer goes
/// through `io::Write` one token at a time and escapes strings a byte at a
/// time; this writes into a buffer of the right size and copies strings
/// that need no escaping (almost all) whole: about a fifth of the
/// instructions.
pub fn to_text(value: &Value, len: usize) -> String {
    let mut out = Vec::with_capacity(len);
    write_value(&mut out, value);
    debug_assert_eq!(out.len(), len, "length bookkeeping");
    // Only whole UTF-8 strings and ASCII were written.
    let text = String::from_utf8(out).expect("JSON text is UTF-8");
    debug_assert_eq!(
        text,
        serde_json::to_string(value).expect("a Value serializes"),
        "to_text must match serde_json"
    );
    text
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, key);
                out.push(b':');
                write_value(out, item);
            }
            out.push(b'}');
        }
    }
}

fn write_number(out: &mut Vec<u8>, n: &serde_json::Number) {
    fn digits(out: &mut Vec<u8>, mut v: u64) {
        let mut buf = [0u8; 20];
        let mut at = buf.len();
        loop {
            at -= 1;
            buf[at] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        out.extend_from_slice(&buf[at..]);
    }
    if let Some(v) = n.as_u64() {
        digits(out, v);
    } else if let Some(v) = n.as_i64() {
        out.push(b'-');
        digits(out, v.unsigned_abs());
    } else {
        // Floats (rare in documents): serde_json's own formatter, so the
        // two can never disagree. Writing to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, n);
    }
}

/// A JSON string with serde_json's escapes: `\"` and `\\`, the
/// two-character escapes for `\b \t \n \f \r`, `\u00xx` (lower-case hex)
/// for the other control characters, everything else as it is.
fn write_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    if escape_free(bytes) {
        out.extend_from_slice(bytes);
    } else {
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if !byte_needs_escape(b) {
                continue;
            }
            out.extend_from_slice(&bytes[start..i]);
            start = i + 1;
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x09 => out.extend_from_slice(b"\\t"),
                0x0a => out.extend_from_slice(b"\\n"),
                0x0c => out.extend_from_slice(b"\\f"),
                0x0d => out.extend_from_slice(b"\\r"),
                _ => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    out.extend_from_slice(b"\\u00");
                    out.push(HEX[usize::from(b >> 4)]);
                    out.push(HEX[usize::from(b & 0xf)]);
                }
            }
        }
        out.extend_from_slice(&bytes[start..]);
    }
    out.push(b'"');
}

fn byte_needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Whether any byte of `word` is below 0x20, a `"` or a `\\` (the classic
/// "has a byte less than n" and "has a zero byte" bit tricks).
#[inline]
fn word_needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // Each sets the high bit of some byte when the word has such a byte
    // (not necessarily of that byte), and of none otherwise: combined
    // without branches, tested once.
    let zero = |x: u64| x.wrapping_sub(ONES) & !x;
    let below_0x20 = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = zero(word ^ (ONES * u64::from(b'"')));
    let backslash = zero(word ^ (ONES * u64::from(b'\\')));
    (below_0x20 | quote | backslash) & HIGHS != 0
}

fn number_len(n: &serde_json::Number) -> usize {
    if let Some(i) = n.as_u64() {
        decimal_digits(i)
    } else if let Some(i) = n.as_i64() {
        1 + decimal_digits(i.unsigned_abs())
    } else {
        // Floats (rare in documents): count what serde_json's own float
        // formatter writes, so the two can never disagree.
        struct Counter(usize);
        impl io::Write for Counter {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.0 += buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut counter = Counter(0);
        // Writing a number to an infallible writer cannot fail.
        let _ = serde_json::to_writer(&mut counter, n);
        counter.0
    }
}

/// The number of decimal digits of `n`: the length of its JSON text.
pub fn decimal_digits(n: u64) -> usize {
    // `ilog10` compares with powers of ten instead of dividing: a `_ts`
    // has ten digits, measured on every write.
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// Parses JSON text into a [`Value`] as `serde_json::from_str` does (the
/// same values, members in the same order, the last of duplicate keys
/// kept), with every object and array allocated at exactly its length.
/// For text Partita wrote itself; untrusted text goes through
/// [`crate::strict`], which refuses duplicate keys.
///
/// serde_json grows a map or array one member at a time, so a parsed
/// document keeps the spare room of its last doubling: in a partition read
/// into the cache, 10,000 documents of 15 members (ten and the five system
/// properties) took 40.4 MB of heap, and 24.3 MB with one member fewer
/// (`engine/tests/footprint.rs`).
///
/// # Errors
/// serde_json's, for text that is not one JSON value.
pub fn parse_exact(text: &str) -> serde_json::Result<Value> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Exact.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// The seed and visitor of [`parse_exact`].
#[derive(Clone, Copy)]
struct Exact;

impl<'de> serde::de::DeserializeSeed<'de> for Exact {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Exact {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Exact)? {
            items.push(item);
        }
        items.shrink_to_fit();
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            members.push((key, map.next_value_seed(Exact)?));
        }
        let mut object = serde_json::Map::with_capacity(members.len());
        object.extend(members);
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn length_and_text_match_serde_json() {
        let controls: String = (0u8..0x20)
            .map(char::from)
            .chain("\"\\/\u{7f}é€😀".chars())
            .collect();
        for value in [
            json!({"id": "p1", "n": [1, 2.5, null, -17, 1e300, 0.1, -0.0, u64::MAX, i64::MIN, 5e-324], "t": true, "f": false}),
            json!({"": controls, "k\u{8}\u{c}\"": [controls.repeat(3), "plain text of some length"]}),
            json!([[], {}, "", 0, -1, 10, 99, 100, 12345678901234_u64]),
            json!("a string with a \\ backslash past its first eight bytes"),
            json!(null),
        ] {
            let text = value.to_string();
            assert_eq!(serialized_len(&value), text.len(), "{value}");
            assert_eq!(to_text(&value, text.len()), text);
        }
    }

    /// Strings with several bytes to escape in one word, beside bytes of
    /// multi-byte characters (whose high bits must not count), at every
    /// alignment: what an etag (`"\"…\""`) and user text look like.
    #[test]
    fn escapes_are_counted_exactly_whatever_their_neighbours() {
        let pieces = [
            "\"", "\\", "é", "\u{a2}", "\u{dc}", "€", "x", "\n", "\u{1}", "\u{7f}",
        ];
        for shift in 0..8 {
            for (i, a) in pieces.iter().enumerate() {
                for b in &pieces[i..] {
                    let s = format!("{}{a}{b}{a}\"\"{b}{a}{b}", "y".repeat(shift));
                    let expected = Value::from(s.clone()).to_string().len();
                    assert_eq!(string_len(&s), expected, "{s:?}");
                }
            }
        }
        let etag = "\"00000001-000000000000002a\"";
        assert_eq!(string_len(etag), etag.len() + 2 + 2);
    }

    /// `parse_exact` reads what serde_json reads: the same values, the
    /// same member order, the last of duplicate keys, the same errors.
    #[test]
    fn parse_exact_reads_what_serde_json_reads() {
        let texts = [
            r#"{"id":"p1","n":[1,2.5,null,-17,1e300,0.1,-0.0,18446744073709551615,-9223372036854775808,5e-324],"t":true,"f":false}"#,
            r#"{"b":1,"a":{"z":[],"y":{}},"b":2,"c":"\u00e9\n\"","d":[[1],[2,[3]]]}"#,
            r#" [ "", 0 , -1,{"k":"v"} ] "#,
            "null",
            r#""text""#,
        ];
        for text in texts {
            let expected: Value = serde_json::from_str(text).unwrap();
            let got = parse_exact(text).unwrap();
            assert_eq!(got, expected, "{text}");
            assert_eq!(got.to_string(), expected.to_string(), "{text}");
        }
        for bad in ["", "{", r#"{"a":1}x"#, "[1,]", "nul", r#"{"a" 1}"#] {
            let expected = serde_json::from_str::<Value>(bad).unwrap_err().to_string();
            assert_eq!(parse_exact(bad).unwrap_err().to_string(), expected, "{bad}");
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(parse_exact(&deep).is_err(), "serde_json's recursion limit");
    }

    #[test]
    fn decimal_digits_at_powers_of_ten() {
        assert_eq!(decimal_digits(0), 1);
        assert_eq!(decimal_digits(u64::MAX), u64::MAX.to_string().len());
        for power in 1..20 {
            let n = 10u64.pow(power);
            assert_eq!(decimal_digits(n - 1), power as usize, "{}", n - 1);
            assert_eq!(decimal_digits(n), power as usize + 1, "{n}");
        }
    }

    #[test]
    fn a_byte_to_escape_is_found_at_every_position_of_short_and_long_strings() {
        for n in 0..=24 {
            let plain = "a".repeat(n);
            assert_eq!(string_len(&plain), n + 2);
            for at in 0..n {
                for special in ['"', '\\', '\n', '\u{1f}', '\u{0}'] {
                    let mut s = plain.clone();
                    s.replace_range(at..=at, &special.to_string());
                    assert_eq!(
                        string_len(&s),
                        Value::from(s.clone()).to_string().len(),
                        "{s:?}"
                    );
                }
            }
        }
    }
}
