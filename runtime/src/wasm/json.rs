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
//! errors, same recursion limit), except that an object with two members
//! of one name is refused, as [`host_api::strict`] refuses it (a document
//! is stored as written or not at all), and a float is stored as a
//! JavaScript procedure would store it (`100.0` as `100`, `-0.0` as `0`:
//! [`json_number`](crate::number::json_number)), so a guest stores what the
//! same procedure in JavaScript stores.
//!
//! The other way, a write returns to a guest that passed no output buffer
//! (both createComment guests, for the replace and the create) only the
//! length of the stored document as compact JSON, which
//! [`host_api::json::serialized_len`] computes without writing it (the
//! engine's own count, shared). Counting through serde_json's serializer
//! cost about 12,000 instructions per createComment call, an eighth of the
//! host's share; this costs a few hundred.

use std::cell::RefCell;
use std::fmt;

use host_api::strict::StrictError;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The entries and items of the objects and arrays being parsed,
/// innermost last.
#[derive(Default)]
struct Stacks {
    entries: Vec<(String, Value)>,
    items: Vec<Value>,
    /// Set when the parse failed on a repeated member name.
    duplicate: bool,
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
/// [`StrictError::Syntax`] (`serde_json`'s error) for bytes that are not
/// one JSON value, [`StrictError::Duplicate`] for an object with a
/// repeated member name.
pub(crate) fn parse(bytes: &[u8], room: usize) -> Result<Value, StrictError> {
    let (parsed, duplicate) = STACKS.with_borrow_mut(|stacks| {
        stacks.duplicate = false;
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
        (parsed, stacks.duplicate)
    });
    parsed.map_err(|e| {
        if duplicate {
            // Rare: parse again, strictly, for the member's path.
            match host_api::strict::parse(bytes) {
                Err(strict) => strict,
                Ok(_) => StrictError::Syntax(e),
            }
        } else {
            StrictError::Syntax(e)
        }
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
        read?;
        let mut object = Map::with_capacity(capacity(gathered.as_slice(), self.room));
        for (key, value) in gathered {
            if object.contains_key(&key) {
                // `parse` explains it, path and all.
                self.stacks.duplicate = true;
                return Err(serde::de::Error::custom("duplicate member name"));
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// The capacity for an object of `entries`: `room` more when it has no
/// `"_rid"` (a document yet to be stamped).
fn capacity(entries: &[(String, Value)], room: usize) -> usize {
    let stamped = entries.iter().any(|(key, _)| key == "_rid");
    entries.len() + if stamped { 0 } else { room }
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
    fn repeated_member_names_are_refused_with_their_path_and_leave_nothing_behind() {
        for (text, path, name) in [
            (r#"{"dup":1,"other":2,"dup":3}"#, "", "dup"),
            (r#"{"a":[1,{"b":{"x":1,"x":1}}]}"#, "/a/1/b", "x"),
            (r#"[{"id":"a","id":"b"}]"#, "/0", "id"),
        ] {
            match parse(text.as_bytes(), 6) {
                Err(StrictError::Duplicate { path: p, name: n }) => {
                    assert_eq!((p.as_str(), n.as_str()), (path, name), "{text}");
                }
                other => panic!("{text}: {other:?}"),
            }
            STACKS.with_borrow(|s| {
                assert_eq!((s.entries.len(), s.items.len()), (0, 0), "{text}");
            });
        }
        // The same name in two objects is no repetition.
        assert!(parse(br#"{"x":{"x":1},"y":{"x":2}}"#, 0).is_ok());
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
}
