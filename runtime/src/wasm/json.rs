//! JSON from guest memory to a [`Value`], without growing maps and arrays
//! one entry at a time.
//!
//! Documents a guest writes (every create, replace, upsert) are parsed on
//! the host. `serde_json::from_slice::<Value>` builds each object by
//! inserting into an empty `Map` (with `preserve_order`, an `IndexMap`),
//! which reallocates its entries and rehashes its table as it grows, and
//! each array by pushing onto an empty `Vec`: for a document of a dozen
//! properties, most of the parse. Here an object's entries and an array's
//! items are first gathered on a per-thread scratch stack (nested values
//! take the part above their parent's; the stack keeps its capacity from
//! call to call), then moved into a `Map` or `Vec` allocated once at its
//! exact size. The result is the same [`Value`] as `serde_json`'s, through
//! the same deserializer (same errors, same recursion limit, same handling
//! of duplicate keys: the last value wins, at the first one's position).

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

thread_local! {
    /// The entries of the objects being parsed, innermost last.
    static ENTRIES: RefCell<Vec<(String, Value)>> = const { RefCell::new(Vec::new()) };
    /// The items of the arrays being parsed, innermost last.
    static ITEMS: RefCell<Vec<Value>> = const { RefCell::new(Vec::new()) };
}

/// Scratch stacks longer than this are given back after a parse, so one
/// huge document does not pin its size for the thread's lifetime.
const KEEP: usize = 4096;

/// Parses `bytes` as one JSON value, as `serde_json::from_slice` does.
///
/// # Errors
/// `serde_json`'s error for bytes that are not one JSON value.
pub(crate) fn parse(bytes: &[u8]) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = ValueSeed.deserialize(&mut de)?;
    de.end()?;
    if ENTRIES.with_borrow(Vec::capacity) > KEEP {
        ENTRIES.with_borrow_mut(|e| *e = Vec::new());
    }
    if ITEMS.with_borrow(Vec::capacity) > KEEP {
        ITEMS.with_borrow_mut(|i| *i = Vec::new());
    }
    Ok(value)
}

/// Deserializes any JSON value.
struct ValueSeed;

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(ValueSeed)
    }
}

impl<'de> Visitor<'de> for ValueSeed {
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

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
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
        ValueSeed.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mark = ITEMS.with_borrow(Vec::len);
        let read = (|| {
            while let Some(item) = seq.next_element_seed(ValueSeed)? {
                ITEMS.with_borrow_mut(|items| items.push(item));
            }
            Ok(())
        })();
        // Taken off the stack whether or not the array was whole.
        let items = ITEMS.with_borrow_mut(|items| items.split_off(mark));
        read.map(|()| Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mark = ENTRIES.with_borrow(Vec::len);
        let read = (|| {
            while let Some(key) = map.next_key::<String>()? {
                let value = map.next_value_seed(ValueSeed)?;
                ENTRIES.with_borrow_mut(|entries| entries.push((key, value)));
            }
            Ok(())
        })();
        ENTRIES.with_borrow_mut(|entries| {
            let gathered = entries.drain(mark..);
            read.map(|()| {
                let mut object = Map::with_capacity(gathered.len());
                for (key, value) in gathered {
                    object.insert(key, value);
                }
                Value::Object(object)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same_as_serde_json(text: &str) {
        let ours = parse(text.as_bytes());
        let theirs = serde_json::from_slice::<Value>(text.as_bytes());
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
            assert_eq!(ENTRIES.with_borrow(Vec::len), 0, "{text}");
            assert_eq!(ITEMS.with_borrow(Vec::len), 0, "{text}");
        }
    }

    #[test]
    fn objects_and_arrays_are_allocated_at_their_size() {
        let keys: Vec<String> = (0..13).map(|i| format!("\"k{i}\":{i}")).collect();
        let text = format!("{{{},\"list\":[1,2,3,4,5]}}", keys.join(","));
        let value = parse(text.as_bytes()).unwrap();
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
    fn a_huge_document_does_not_pin_the_scratch_space() {
        let text = format!("[{}]", vec!["1"; 10_000].join(","));
        assert_eq!(
            parse(text.as_bytes()).unwrap().as_array().unwrap().len(),
            10_000
        );
        assert!(ITEMS.with_borrow(Vec::capacity) <= KEEP);
    }
}
