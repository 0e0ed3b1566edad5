//! JSON from guest memory to a [`Value`], without growing maps and arrays
//! one entry at a time.
//!
//! Documents a guest writes (every create, replace, upsert) are parsed on
//! the host. `serde_json::from_slice::<Value>` builds each object by
//! inserting into an empty `Map` (with `preserve_order`, an `IndexMap`),
//! which reallocates its entries and rehashes its table as it grows, and
//! each array by pushing onto an empty `Vec`: for a document of a dozen
//! properties, most of the parse. Here an object's entries and an array's
//! items are first gathered on per-thread scratch stacks (borrowed once per
//! parse; nested values take the part above their parent's; the stacks keep
//! their capacity from call to call), then moved into a `Map` or `Vec`
//! allocated once at its exact size, plus, for a document about to be
//! written, room for the properties the engine adds. The result is the
//! same [`Value`] as `serde_json`'s, through the same deserializer (same
//! errors, same recursion limit, same handling of duplicate keys: the last
//! value wins, at the first one's position), except that a float is stored
//! as a JavaScript procedure would store it (`100.0` as `100`, `-0.0` as
//! `0`: [`json_number`](crate::number::json_number)), so a guest stores
//! what the same procedure in JavaScript stores.
//!
//! The other way, [`serialized_len`] is the length of a stored document as
//! compact JSON, computed without writing it: what a write returns to a
//! guest that passed no output buffer (both createComment guests, for the
//! replace and the create). Counting through serde_json's serializer cost
//! about 12,000 instructions per createComment call, an eighth of the
//! host's share; this costs a few hundred.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The entries and items of the objects and arrays being parsed,
/// innermost last.
#[derive(Default)]
struct Stacks {
    entries: Vec<(String, Value)>,
    items: Vec<Value>,
}

thread_local! {
    /// This thread's scratch stacks (a parse borrows them once).
    static STACKS: RefCell<Stacks> = RefCell::new(Stacks::default());
}

/// Scratch stacks longer than this are given back after a parse, so one
/// huge document does not pin its size for the thread's lifetime.
const KEEP: usize = 4096;

/// Parses `bytes` as one JSON value, as `serde_json::from_slice` does. A
/// top-level object without `"_rid"` gets room for `room` more properties:
/// a document the engine will stamp with its system properties (and
/// perhaps an id) then does not grow its map for them.
///
/// # Errors
/// `serde_json`'s error for bytes that are not one JSON value.
pub(crate) fn parse(bytes: &[u8], room: usize) -> serde_json::Result<Value> {
    STACKS.with_borrow_mut(|stacks| {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let seed = ValueSeed {
            stacks: &mut *stacks,
            room,
        };
        let parsed = seed.deserialize(&mut de).and_then(|value| {
            de.end()?;
            Ok(value)
        });
        if stacks.entries.capacity() > KEEP {
            stacks.entries = Vec::new();
        }
        if stacks.items.capacity() > KEEP {
            stacks.items = Vec::new();
        }
        parsed
    })
}

/// Deserializes any JSON value onto the scratch stacks.
struct ValueSeed<'a> {
    stacks: &'a mut Stacks,
    /// Extra capacity for this value's map (see [`parse`]).
    room: usize,
}

impl ValueSeed<'_> {
    fn nested(&mut self) -> ValueSeed<'_> {
        ValueSeed {
            stacks: &mut *self.stacks,
            room: 0,
        }
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    /// As JavaScript stores it: `100.0` as `100`, `-0.0` as `0`.
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(crate::number::json_number(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let mark = self.stacks.items.len();
        let read = (|| {
            while let Some(item) = seq.next_element_seed(self.nested())? {
                self.stacks.items.push(item);
            }
            Ok(())
        })();
        // Taken off the stack whether or not the array was whole.
        let items = self.stacks.items.split_off(mark);
        read.map(|()| Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let mark = self.stacks.entries.len();
        let read = (|| {
            while let Some(key) = map.next_key::<String>()? {
                let value = map.next_value_seed(self.nested())?;
                self.stacks.entries.push((key, value));
            }
            Ok(())
        })();
        let gathered = self.stacks.entries.drain(mark..);
        read.map(|()| {
            let mut object = Map::with_capacity(capacity(gathered.as_slice(), self.room));
            for (key, value) in gathered {
                object.insert(key, value);
            }
            Value::Object(object)
        })
    }
}

/// The capacity for an object of `entries`: `room` more when it has no
/// `"_rid"` (a document yet to be stamped).
fn capacity(entries: &[(String, Value)], room: usize) -> usize {
    let stamped = entries.iter().any(|(key, _)| key == "_rid");
    entries.len() + if stamped { 0 } else { room }
}

/// The length of `value` as compact JSON, exactly what
/// `serde_json::to_writer` writes, without writing it. Recursive: for
/// stored documents, whose depth the engine bounds.
pub(crate) fn serialized_len(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => number_len(n),
        Value::String(s) => string_len(s),
        // Brackets and the commas between items.
        Value::Array(items) => {
            2 + items.len().saturating_sub(1) + items.iter().map(serialized_len).sum::<usize>()
        }
        // Braces, commas, and a colon per member.
        Value::Object(map) => {
            2 + map.len().saturating_sub(1)
                + map
                    .iter()
                    .map(|(k, v)| string_len(k) + 1 + serialized_len(v))
                    .sum::<usize>()
        }
    }
}

/// A JSON string's length with quotes and serde_json's escapes: `\"` and
/// `\\`, two characters for `\b \t \n \f \r`, six (`\u00XX`) for the
/// other control characters.
fn string_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    // Most strings need no escapes: checked eight bytes at a time.
    let mut chunks = bytes.chunks_exact(8);
    let clean = chunks
        .by_ref()
        .all(|c| !word_needs_escape(u64::from_le_bytes(c.try_into().expect("8 bytes"))))
        && chunks.remainder().iter().all(|&b| !byte_needs_escape(b));
    if clean {
        return s.len() + 2;
    }
    let extra: usize = bytes
        .iter()
        .filter(|&&b| byte_needs_escape(b))
        .map(|&b| match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 1,
            _ => 5,
        })
        .sum();
    s.len() + 2 + extra
}

fn byte_needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Whether any byte of `word` is below 0x20, a `"` or a `\\` (the "has a
/// byte less than n" and "has a zero byte" bit tricks).
fn word_needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS != 0;
    let below_0x20 = word.wrapping_sub(ONES * 0x20) & !word & HIGHS != 0;
    below_0x20
        || has_zero(word ^ (ONES * u64::from(b'"')))
        || has_zero(word ^ (ONES * u64::from(b'\\')))
}

fn number_len(n: &serde_json::Number) -> usize {
    let digits = |mut i: u64| {
        let mut len = 1;
        while i >= 10 {
            i /= 10;
            len += 1;
        }
        len
    };
    if let Some(i) = n.as_u64() {
        digits(i)
    } else if let Some(i) = n.as_i64() {
        1 + digits(i.unsigned_abs())
    } else {
        // Floats (rare in documents): what serde_json's own formatter
        // writes, so the two never disagree.
        let mut buf = [0u8; 32];
        let mut rest = &mut buf[..];
        serde_json::to_writer(&mut rest, n).expect("a float fits in 32 bytes");
        32 - rest.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// serde_json's value with its floats stored as JavaScript stores them.
    fn as_javascript_stores(value: Value) -> Value {
        match value {
            Value::Number(n) if n.is_f64() => {
                crate::number::json_number(n.as_f64().unwrap_or(f64::NAN))
            }
            Value::Array(items) => items.into_iter().map(as_javascript_stores).collect(),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (k, as_javascript_stores(v)))
                    .collect(),
            ),
            other => other,
        }
    }

    fn same_as_serde_json(text: &str) {
        let ours = parse(text.as_bytes(), 0);
        let theirs = serde_json::from_slice::<Value>(text.as_bytes()).map(as_javascript_stores);
        match (ours, theirs) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "{text}");
                // Same key order too (preserve_order).
                assert_eq!(a.to_string(), b.to_string(), "{text}");
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{text}"),
            (a, b) => panic!("{text}: ours {a:?}, serde_json's {b:?}"),
        }
    }

    #[test]
    fn values_are_those_of_serde_json() {
        for text in [
            r#"{"id":"p1","n":1,"f":-2.5e3,"big":18446744073709551615,"neg":-9223372036854775808,"t":true,"z":null}"#,
            r#"{"b":1,"a":{"y":[1,[2,{"q":[]}],{}],"x":"\u00e9\"\n"},"c":[]}"#,
            r#"{"dup":1,"other":2,"dup":3}"#,
            r#"[100.0,-0.0,2.5,1e300,-1e2]"#,
            r#"[{"a":1},{"a":2,"b":[{"c":{"d":[null]}}]}]"#,
            r#"  "just a string"  "#,
            "12",
            "{}",
            "[]",
        ] {
            same_as_serde_json(text);
        }
    }

    #[test]
    fn floats_are_stored_as_javascript_stores_them() {
        let value = parse(
            b"[100.0,-0.0,2.5,1e2,9007199254740992.0,18014398509481984.0,18446744073709551615]",
            0,
        )
        .unwrap();
        assert_eq!(
            value.to_string(),
            "[100,0,2.5,100,9007199254740992,1.8014398509481984e+16,18446744073709551615]"
        );
    }

    #[test]
    fn errors_are_those_of_serde_json_and_leave_nothing_behind() {
        for text in [
            r#"{"a":[1,2,{"b":"#,
            r#"{"a":1,}"#,
            r#"{"a":1} trailing"#,
            r#"[1,2"#,
            "",
            "nul",
            &"[".repeat(200),
        ] {
            same_as_serde_json(text);
            STACKS.with_borrow(|s| {
                assert_eq!((s.entries.len(), s.items.len()), (0, 0), "{text}");
            });
        }
    }

    #[test]
    fn objects_and_arrays_are_allocated_at_their_size() {
        let keys: Vec<String> = (0..13).map(|i| format!("\"k{i}\":{i}")).collect();
        let text = format!("{{{},\"list\":[1,2,3,4,5]}}", keys.join(","));
        let value = parse(text.as_bytes(), 0).unwrap();
        let Value::Object(map) = &value else {
            panic!("{value}")
        };
        assert_eq!(map.len(), 14);
        let Value::Array(list) = &map["list"] else {
            panic!("{value}")
        };
        assert_eq!(list.capacity(), 5);
    }

    #[test]
    fn a_document_to_be_stamped_has_room_for_its_system_properties() {
        let entries = |keys: &[&str]| -> Vec<(String, Value)> {
            keys.iter()
                .map(|k| ((*k).to_owned(), Value::Null))
                .collect()
        };
        assert_eq!(capacity(&entries(&["id", "a"]), 6), 8);
        assert_eq!(capacity(&entries(&["id", "_rid", "a"]), 6), 3, "stamped");
        assert_eq!(capacity(&entries(&[]), 0), 0);
        // And the room changes nothing else.
        let text = br#"{"a":1,"n":{"b":[2,{"c":3}]}}"#;
        assert_eq!(parse(text, 6).unwrap(), parse(text, 0).unwrap());
    }

    #[test]
    fn a_huge_document_does_not_pin_the_scratch_space() {
        let text = format!("[{}]", vec!["1"; 10_000].join(","));
        assert_eq!(
            parse(text.as_bytes(), 0).unwrap().as_array().unwrap().len(),
            10_000
        );
        assert!(STACKS.with_borrow(|s| s.items.capacity()) <= KEEP);
    }

    #[test]
    fn serialized_len_is_the_length_of_serde_json_text() {
        let controls: String = (0u8..0x20)
            .map(char::from)
            .chain("\"\\/\u{7f}é€😀".chars())
            .collect();
        for value in [
            serde_json::json!({"id": "p1", "n": [1, 2.5, null, -17, 1e300, 0.1, -0.0, u64::MAX, i64::MIN, 1.8014398509481984e16, 5e-324], "t": true, "f": false}),
            serde_json::json!({"": controls, "k\u{8}\u{c}\"": [controls.repeat(3), "plain text of some length", "x"]}),
            serde_json::json!([[], {}, "", 0, -1, 10, 99, 100, 12345678901234_u64]),
            serde_json::json!("a string with a \\ backslash past its first eight bytes"),
            serde_json::json!(null),
        ] {
            assert_eq!(serialized_len(&value), value.to_string().len(), "{value}");
        }
    }
}
