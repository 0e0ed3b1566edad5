//! Built-in (system) functions.
//!
//! Names are case-insensitive and checked, with their argument counts, at
//! parse time, so an unknown function or a wrong argument count is a 400
//! before any document is read. At run time every function returns
//! *undefined* when an argument has the wrong type, as Cosmos DB does.
//! String positions and lengths are counted in UTF-16 code units. The
//! spatial family is in `spatial.rs`, the date and time family in
//! `datetime.rs`.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::Value;

use crate::query::eval::{Val, number};
use crate::query::order::{CONSTRUCT_DEPTH, clone_capped, cmp_values};
use crate::query::{datetime, spatial};

/// A built-in scalar function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Func {
    IsDefined,
    IsNull,
    IsString,
    IsNumber,
    IsBool,
    IsArray,
    IsObject,
    IsPrimitive,
    ArrayContains,
    ArrayLength,
    ArraySlice,
    ArrayConcat,
    StartsWith,
    EndsWith,
    Contains,
    Lower,
    Upper,
    Ltrim,
    Rtrim,
    Trim,
    Length,
    Concat,
    Substring,
    Left,
    Right,
    IndexOf,
    Replace,
    Replicate,
    Reverse,
    ToString,
    Abs,
    Floor,
    Ceiling,
    Round,
    Trunc,
    Sqrt,
    Power,
    Sign,
    Pi,
    StDistance,
    StWithin,
    StIntersects,
    StIsValid,
    StIsValidDetailed,
    StArea,
    GetCurrentDateTime,
    GetCurrentTimestamp,
    GetCurrentTicks,
    DateTimeAdd,
    DateTimeDiff,
    DateTimePart,
    DateTimeFromParts,
    DateTimeToTicks,
    TicksToDateTime,
    DateTimeToTimestamp,
    TimestampToDateTime,
    DateTimeBin,
}

/// Name, function, minimum and maximum argument count.
const TABLE: &[(&str, Func, usize, usize)] = &[
    ("IS_DEFINED", Func::IsDefined, 1, 1),
    ("IS_NULL", Func::IsNull, 1, 1),
    ("IS_STRING", Func::IsString, 1, 1),
    ("IS_NUMBER", Func::IsNumber, 1, 1),
    ("IS_BOOL", Func::IsBool, 1, 1),
    ("IS_ARRAY", Func::IsArray, 1, 1),
    ("IS_OBJECT", Func::IsObject, 1, 1),
    ("IS_PRIMITIVE", Func::IsPrimitive, 1, 1),
    ("ARRAY_CONTAINS", Func::ArrayContains, 2, 3),
    ("ARRAY_LENGTH", Func::ArrayLength, 1, 1),
    ("ARRAY_SLICE", Func::ArraySlice, 2, 3),
    ("ARRAY_CONCAT", Func::ArrayConcat, 2, usize::MAX),
    ("STARTSWITH", Func::StartsWith, 2, 3),
    ("ENDSWITH", Func::EndsWith, 2, 3),
    ("CONTAINS", Func::Contains, 2, 3),
    ("LOWER", Func::Lower, 1, 1),
    ("UPPER", Func::Upper, 1, 1),
    ("LTRIM", Func::Ltrim, 1, 1),
    ("RTRIM", Func::Rtrim, 1, 1),
    ("TRIM", Func::Trim, 1, 1),
    ("LENGTH", Func::Length, 1, 1),
    ("CONCAT", Func::Concat, 2, usize::MAX),
    ("SUBSTRING", Func::Substring, 3, 3),
    ("LEFT", Func::Left, 2, 2),
    ("RIGHT", Func::Right, 2, 2),
    ("INDEX_OF", Func::IndexOf, 2, 3),
    ("REPLACE", Func::Replace, 3, 3),
    ("REPLICATE", Func::Replicate, 2, 2),
    ("REVERSE", Func::Reverse, 1, 1),
    ("TOSTRING", Func::ToString, 1, 1),
    ("ABS", Func::Abs, 1, 1),
    ("FLOOR", Func::Floor, 1, 1),
    ("CEILING", Func::Ceiling, 1, 1),
    ("ROUND", Func::Round, 1, 1),
    ("TRUNC", Func::Trunc, 1, 1),
    ("SQRT", Func::Sqrt, 1, 1),
    ("POWER", Func::Power, 2, 2),
    ("SIGN", Func::Sign, 1, 1),
    ("PI", Func::Pi, 0, 0),
    ("ST_DISTANCE", Func::StDistance, 2, 2),
    ("ST_WITHIN", Func::StWithin, 2, 2),
    ("ST_INTERSECTS", Func::StIntersects, 2, 2),
    ("ST_ISVALID", Func::StIsValid, 1, 1),
    ("ST_ISVALIDDETAILED", Func::StIsValidDetailed, 1, 1),
    ("ST_AREA", Func::StArea, 1, 1),
    ("GETCURRENTDATETIME", Func::GetCurrentDateTime, 0, 0),
    ("GETCURRENTTIMESTAMP", Func::GetCurrentTimestamp, 0, 0),
    ("GETCURRENTTICKS", Func::GetCurrentTicks, 0, 0),
    // The static forms are one value per query too; so are the others here.
    ("GETCURRENTDATETIMESTATIC", Func::GetCurrentDateTime, 0, 0),
    ("GETCURRENTTIMESTAMPSTATIC", Func::GetCurrentTimestamp, 0, 0),
    ("GETCURRENTTICKSSTATIC", Func::GetCurrentTicks, 0, 0),
    ("DATETIMEADD", Func::DateTimeAdd, 3, 3),
    ("DATETIMEDIFF", Func::DateTimeDiff, 3, 3),
    ("DATETIMEPART", Func::DateTimePart, 2, 2),
    ("DATETIMEFROMPARTS", Func::DateTimeFromParts, 3, 7),
    ("DATETIMETOTICKS", Func::DateTimeToTicks, 1, 1),
    ("TICKSTODATETIME", Func::TicksToDateTime, 1, 1),
    ("DATETIMETOTIMESTAMP", Func::DateTimeToTimestamp, 1, 1),
    ("TIMESTAMPTODATETIME", Func::TimestampToDateTime, 1, 1),
    ("DATETIMEBIN", Func::DateTimeBin, 2, 4),
];

/// Looks a function up by name (case-insensitive): the function and its
/// minimum and maximum argument counts.
pub(crate) fn lookup(name: &str) -> Option<(Func, usize, usize)> {
    TABLE
        .iter()
        .find(|(n, ..)| n.eq_ignore_ascii_case(name))
        .map(|&(_, f, min, max)| (f, min, max))
}

type Arg<'v> = Option<&'v Value>;

fn num(v: Arg<'_>) -> Option<f64> {
    v.and_then(Value::as_f64)
}

fn string(v: Arg<'_>) -> Option<&str> {
    v.and_then(Value::as_str)
}

/// An optional boolean flag: absent means false; present but not a boolean
/// makes the call undefined.
fn flag(args: &[Val<'_>], i: usize) -> Option<bool> {
    match args.get(i) {
        None => Some(false),
        Some(v) => v.as_deref().and_then(Value::as_bool),
    }
}

fn owned(v: Value) -> Val<'static> {
    Some(Cow::Owned(v))
}

fn bool_val(b: bool) -> Val<'static> {
    owned(Value::Bool(b))
}

/// An integer argument (fractions truncated), or None.
fn count_arg(v: Arg<'_>) -> Option<i64> {
    let n = num(v)?;
    Some(n.trunc().clamp(-9.0e15, 9.0e15) as i64)
}

/// UTF-16 view used by the position-based string functions.
fn utf16(s: &str) -> Vec<u16> {
    s.encode_utf16().collect()
}

fn from_utf16(units: &[u16]) -> Value {
    Value::String(String::from_utf16_lossy(units))
}

fn math(v: Arg<'_>, f: impl Fn(f64) -> f64) -> Val<'static> {
    num(v).and_then(|n| number(f(n))).map(Cow::Owned)
}

/// Partial match for `ARRAY_CONTAINS(arr, obj, true)`: every property of
/// `pattern` is present with an equal value in `item`.
fn partial_match(item: &Value, pattern: &Value) -> bool {
    match (item, pattern) {
        (Value::Object(i), Value::Object(p)) => p.iter().all(|(k, v)| {
            i.get(k)
                .is_some_and(|x| same_type(x, v) && cmp_values(x, v) == Ordering::Equal)
        }),
        _ => same_type(item, pattern) && cmp_values(item, pattern) == Ordering::Equal,
    }
}

fn same_type(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

fn int_val(n: i64) -> Val<'static> {
    owned(Value::from(n))
}

fn date_string(t: Option<datetime::Ticks>) -> Val<'static> {
    owned(Value::String(datetime::format(t?)?))
}

fn date_arg(v: Arg<'_>) -> Option<datetime::Ticks> {
    datetime::parse(string(v)?)
}

fn part_arg(v: Arg<'_>) -> Option<datetime::Part> {
    datetime::Part::parse(string(v)?)
}

/// Calls `func` on evaluated arguments (the count was checked at parse
/// time); `now` gives the query execution's one reading of the clock, in
/// ticks.
pub(crate) fn call<'a>(func: Func, args: &[Val<'_>], now: &dyn Fn() -> datetime::Ticks) -> Val<'a> {
    let arg = |i: usize| args.get(i).and_then(|v| v.as_deref());
    let first = arg(0);
    match func {
        Func::IsDefined => bool_val(first.is_some()),
        Func::IsNull => bool_val(matches!(first, Some(Value::Null))),
        Func::IsString => bool_val(matches!(first, Some(Value::String(_)))),
        Func::IsNumber => bool_val(matches!(first, Some(Value::Number(_)))),
        Func::IsBool => bool_val(matches!(first, Some(Value::Bool(_)))),
        Func::IsArray => bool_val(matches!(first, Some(Value::Array(_)))),
        Func::IsObject => bool_val(matches!(first, Some(Value::Object(_)))),
        Func::IsPrimitive => bool_val(matches!(
            first,
            Some(Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_))
        )),
        Func::ArrayContains => {
            let Some(Value::Array(items)) = first else {
                return None;
            };
            let needle = arg(1)?;
            let partial = flag(args, 2)?;
            let found = items.iter().any(|item| {
                if partial {
                    partial_match(item, needle)
                } else {
                    same_type(item, needle) && cmp_values(item, needle) == Ordering::Equal
                }
            });
            bool_val(found)
        }
        Func::ArrayLength => match first {
            Some(Value::Array(items)) => owned(Value::from(items.len())),
            _ => None,
        },
        Func::ArraySlice => {
            let Some(Value::Array(items)) = first else {
                return None;
            };
            let len = items.len() as i64;
            let mut start = count_arg(arg(1))?;
            if start < 0 {
                start = (len + start).max(0);
            }
            let start = start.min(len);
            let end = match args.get(2) {
                None => len,
                Some(v) => {
                    let n = count_arg(v.as_deref())?;
                    if n < 0 {
                        (len + n).max(start)
                    } else {
                        (start + n).min(len)
                    }
                }
            };
            let end = end.max(start);
            owned(Value::Array(
                items[start as usize..end as usize]
                    .iter()
                    .map(|v| clone_capped(v, CONSTRUCT_DEPTH))
                    .collect::<Option<_>>()?,
            ))
        }
        Func::ArrayConcat => {
            let mut out = Vec::new();
            for v in args {
                let Some(Value::Array(items)) = v.as_deref() else {
                    return None;
                };
                for item in items {
                    out.push(clone_capped(item, CONSTRUCT_DEPTH)?);
                }
            }
            owned(Value::Array(out))
        }
        Func::StartsWith | Func::EndsWith | Func::Contains => {
            let (s, sub) = (string(first)?, string(arg(1))?);
            let ignore = flag(args, 2)?;
            let (s, sub): (Cow<'_, str>, Cow<'_, str>) = if ignore {
                (s.to_lowercase().into(), sub.to_lowercase().into())
            } else {
                (s.into(), sub.into())
            };
            bool_val(match func {
                Func::StartsWith => s.starts_with(&*sub),
                Func::EndsWith => s.ends_with(&*sub),
                _ => s.contains(&*sub),
            })
        }
        Func::Lower => owned(Value::String(string(first)?.to_lowercase())),
        Func::Upper => owned(Value::String(string(first)?.to_uppercase())),
        Func::Ltrim => owned(Value::String(string(first)?.trim_start().to_owned())),
        Func::Rtrim => owned(Value::String(string(first)?.trim_end().to_owned())),
        Func::Trim => owned(Value::String(string(first)?.trim().to_owned())),
        Func::Length => owned(Value::from(string(first)?.encode_utf16().count())),
        Func::Concat => {
            let mut out = String::new();
            for v in args {
                out.push_str(string(v.as_deref())?);
            }
            owned(Value::String(out))
        }
        Func::Substring => {
            let units = utf16(string(first)?);
            let len = units.len() as i64;
            let start = count_arg(arg(1))?.clamp(0, len);
            let n = count_arg(arg(2))?.max(0);
            let end = start.saturating_add(n).min(len);
            owned(from_utf16(&units[start as usize..end as usize]))
        }
        Func::Left | Func::Right => {
            let units = utf16(string(first)?);
            let len = units.len() as i64;
            let n = count_arg(arg(1))?.clamp(0, len) as usize;
            let slice = if func == Func::Left {
                &units[..n]
            } else {
                &units[units.len() - n..]
            };
            owned(from_utf16(slice))
        }
        Func::IndexOf => {
            let (hay, needle) = (utf16(string(first)?), utf16(string(arg(1))?));
            let start = match args.get(2) {
                None => 0,
                Some(v) => count_arg(v.as_deref())?.max(0) as usize,
            };
            let pos = if needle.is_empty() {
                (start <= hay.len()).then_some(start)
            } else if hay.len() >= needle.len() {
                (start..=hay.len() - needle.len()).find(|&i| hay[i..i + needle.len()] == needle[..])
            } else {
                None
            };
            owned(pos.map_or(Value::from(-1), Value::from))
        }
        Func::Replace => {
            let (s, from, to) = (string(first)?, string(arg(1))?, string(arg(2))?);
            if from.is_empty() {
                return owned(Value::String(s.to_owned()));
            }
            owned(Value::String(s.replace(from, to)))
        }
        Func::Replicate => {
            let s = string(first)?;
            let n = count_arg(arg(1))?;
            if n < 0 || (n as usize).saturating_mul(s.len()) > 10_000 {
                return None;
            }
            owned(Value::String(s.repeat(n as usize)))
        }
        Func::Reverse => owned(Value::String(string(first)?.chars().rev().collect())),
        Func::ToString => match first? {
            Value::String(s) => owned(Value::String(s.clone())),
            other => owned(Value::String(crate::query::eval::to_json_string(other))),
        },
        Func::Abs => math(first, f64::abs),
        Func::Floor => math(first, f64::floor),
        Func::Ceiling => math(first, f64::ceil),
        Func::Round => math(first, f64::round),
        Func::Trunc => math(first, f64::trunc),
        Func::Sqrt => math(first, f64::sqrt),
        Func::Sign => math(first, |n| {
            if n > 0.0 {
                1.0
            } else if n < 0.0 {
                -1.0
            } else {
                0.0
            }
        }),
        Func::Power => {
            let e = num(arg(1))?;
            math(first, |b| b.powf(e))
        }
        Func::Pi => number(std::f64::consts::PI).map(Cow::Owned),
        Func::StDistance => number(spatial::distance(first?, arg(1)?)?).map(Cow::Owned),
        Func::StWithin => bool_val(spatial::within(first?, arg(1)?)?),
        Func::StIntersects => bool_val(spatial::intersects(first?, arg(1)?)?),
        Func::StIsValid => bool_val(spatial::is_valid(first?)?),
        Func::StIsValidDetailed => owned(spatial::is_valid_detailed(first?)?),
        Func::StArea => number(spatial::area(first?)?).map(Cow::Owned),
        Func::GetCurrentDateTime => date_string(Some(now())),
        Func::GetCurrentTimestamp => int_val(datetime::to_timestamp(now())),
        Func::GetCurrentTicks => int_val(now()),
        Func::DateTimeAdd => date_string(datetime::add(
            part_arg(first)?,
            num(arg(1))?,
            date_arg(arg(2))?,
        )),
        Func::DateTimeDiff => int_val(datetime::diff(
            part_arg(first)?,
            date_arg(arg(1))?,
            date_arg(arg(2))?,
        )?),
        Func::DateTimePart => int_val(datetime::part(part_arg(first)?, date_arg(arg(1))?)?),
        Func::DateTimeFromParts => {
            let mut parts = Vec::with_capacity(args.len());
            for v in args {
                parts.push(num(v.as_deref())?);
            }
            date_string(datetime::from_parts(&parts))
        }
        Func::DateTimeToTicks => int_val(date_arg(first)?),
        Func::TicksToDateTime => date_string(datetime::from_ticks(num(first)?)),
        Func::DateTimeToTimestamp => int_val(datetime::to_timestamp(date_arg(first)?)),
        Func::TimestampToDateTime => date_string(datetime::from_timestamp(num(first)?)),
        Func::DateTimeBin => {
            let t = date_arg(first)?;
            let part = part_arg(arg(1))?;
            let size = match args.get(2) {
                None => 1.0,
                Some(v) => num(v.as_deref())?,
            };
            let origin = match args.get(3) {
                None => 0,
                Some(v) => date_arg(v.as_deref())?,
            };
            date_string(datetime::bin(t, part, size, origin))
        }
    }
}
