//! JSON text to a [`Value`], refusing what a document cannot be stored as:
//! an object with two members of the same name.
//!
//! `serde_json::from_slice::<Value>` keeps the last of two same-named
//! members, so `{"id": "a", "id": "b"}` would be stored as `{"id": "b"}`,
//! not as written. Cosmos DB documents nothing definite on duplicate
//! names; Partita refuses them (a 400 naming the member and where it is),
//! at every point where untrusted JSON text becomes a document: the
//! server's request bodies, the CLI's JSON arguments, WebAssembly guests'
//! documents and procedure parameters.
//!
//! Same deserializer as serde_json's (same syntax errors, same 128-level
//! recursion limit), same [`Value`]. A duplicate is found by the map insert
//! that serde_json's own `Value` does anyway, so parsing costs the same; the
//! path to the offending object is collected only on the way out of an
//! error.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Value};

/// Why JSON text was refused.
#[derive(Debug, thiserror::Error)]
pub enum StrictError {
    /// Not one JSON value (serde_json's message, with line and column).
    #[error("{0}")]
    Syntax(serde_json::Error),
    /// An object with two members named `name`.
    #[error("{}", duplicate_message(.path, .name))]
    Duplicate {
        /// The object's path as a JSON pointer (`""` for the top level).
        path: String,
        /// The repeated member name.
        name: String,
    },
}

fn duplicate_message(path: &str, name: &str) -> String {
    let member = format!("{path}/{}", escape_pointer(name));
    format!(
        "the member {member} appears more than once in its object; \
         JSON members must have distinct names"
    )
}

/// A JSON-pointer token: `~` as `~0`, `/` as `~1`.
fn escape_pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Parses `bytes` as exactly one JSON value, refusing duplicate member
/// names.
///
/// # Errors
/// [`StrictError::Syntax`] for bytes that are not one JSON value,
/// [`StrictError::Duplicate`] for an object with a repeated member name.
pub fn parse(bytes: &[u8]) -> Result<Value, StrictError> {
    let mut duplicate = None;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = Seed {
        duplicate: &mut duplicate,
    }
    .deserialize(&mut de)
    .and_then(|value| de.end().map(|()| value));
    match (parsed, duplicate) {
        (Ok(value), _) => Ok(value),
        (Err(_), Some(found)) => Err(found.into_error()),
        (Err(e), None) => Err(StrictError::Syntax(e)),
    }
}

/// [`parse`] for text.
///
/// # Errors
/// As [`parse`].
pub fn parse_str(text: &str) -> Result<Value, StrictError> {
    parse(text.as_bytes())
}

/// A duplicate found while parsing: the name and the path to its object,
/// innermost segment first (filled in as the error unwinds).
struct Found {
    name: String,
    reversed_path: Vec<String>,
}

impl Found {
    fn into_error(self) -> StrictError {
        let mut path = String::new();
        for segment in self.reversed_path.iter().rev() {
            path.push('/');
            path.push_str(&escape_pointer(segment));
        }
        StrictError::Duplicate {
            path,
            name: self.name,
        }
    }
}

struct Seed<'a> {
    duplicate: &'a mut Option<Found>,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
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
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
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

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        loop {
            let next = seq.next_element_seed(Seed {
                duplicate: &mut *self.duplicate,
            });
            match next {
                Ok(Some(item)) => items.push(item),
                Ok(None) => return Ok(Value::Array(items)),
                Err(e) => {
                    if let Some(found) = self.duplicate.as_mut() {
                        found.reversed_path.push(items.len().to_string());
                    }
                    return Err(e);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Seed {
                duplicate: &mut *self.duplicate,
            });
            let value = match value {
                Ok(value) => value,
                Err(e) => {
                    if let Some(found) = self.duplicate.as_mut() {
                        found.reversed_path.push(key);
                    }
                    return Err(e);
                }
            };
            match object.entry(key) {
                Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                Entry::Occupied(slot) => {
                    *self.duplicate = Some(Found {
                        name: slot.key().clone(),
                        reversed_path: Vec::new(),
                    });
                    return Err(A::Error::custom(format!(
                        "duplicate member name {:?}",
                        slot.key()
                    )));
                }
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parses_what_serde_json_parses() {
        for text in [
            "null",
            "true",
            "-0",
            "1.5e300",
            "18446744073709551615",
            "-9223372036854775808",
            "\"a\\u00e9\\ud83d\\ude00\"",
            "[]",
            "{}",
            " {\"a\": [1, {\"b\": null}], \"c\": \"d\", \"e\": 0.1} ",
        ] {
            let ours = parse_str(text).unwrap();
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, theirs, "{text}");
            assert_eq!(
                serde_json::to_string(&ours).unwrap(),
                serde_json::to_string(&theirs).unwrap()
            );
        }
        for text in ["", "{", "[1,]", "{\"a\" 1}", "1 2", "\"\\ud800\""] {
            assert_eq!(
                parse_str(text).unwrap_err().to_string(),
                serde_json::from_str::<Value>(text).unwrap_err().to_string(),
                "{text}"
            );
        }
    }

    #[test]
    fn refuses_duplicate_members_naming_them() {
        let err = parse_str(r#"{"id": "a", "x": 1, "id": "b"}"#).unwrap_err();
        assert!(
            matches!(&err, StrictError::Duplicate { path, name } if path.is_empty() && name == "id"),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("the member /id appears more than once"),
            "{err}"
        );
        let err = parse_str(r#"{"a": [0, {"b/c": {"k": 1, "k": 2}}]}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the member /a/1/b~1c/k appears more than once in its object; \
             JSON members must have distinct names"
        );
        // Same name in different objects is fine.
        assert_eq!(
            parse_str(r#"{"a": {"k": 1}, "b": {"k": 2}}"#).unwrap(),
            json!({"a": {"k": 1}, "b": {"k": 2}})
        );
    }

    #[test]
    fn keeps_serde_json_recursion_limit() {
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(matches!(parse_str(&deep), Err(StrictError::Syntax(_))));
    }
}
