//! Date and time functions (`DateTimeAdd`, `DateTimePart`, `GetCurrentDateTime`, ...).
//!
//! Cosmos DB keeps dates as strings in ISO 8601 UTC with seven fractional
//! digits, `YYYY-MM-DDThh:mm:ss.fffffffZ`, and as numbers: *ticks* (100 ns
//! since the Unix epoch) and *timestamps* (milliseconds since the Unix
//! epoch). Here every date is a [`Ticks`] value between 0001-01-01 and
//! 9999-12-31T23:59:59.9999999, the range of the service's .NET `DateTime`.
//!
//! Input strings are `YYYY-MM-DD`, optionally followed by `Thh:mm`, `:ss`
//! and a fraction of one to seven digits, then an optional `Z`; anything
//! else (another offset, a day that does not exist, a year 0) is not a date
//! and the function returns undefined, as every function here does on bad
//! input. Results are always in the full seven-digit form.
//!
//! The `time` crate does the calendar: day numbers, month lengths; this file
//! only parses, formats and counts ticks.

use time::{Date, Month};

/// 100 ns intervals since 1970-01-01T00:00:00Z (negative before).
pub(crate) type Ticks = i64;

const TICKS_PER_MICROSECOND: i64 = 10;
const TICKS_PER_MILLISECOND: i64 = 10_000;
const TICKS_PER_SECOND: i64 = 10_000_000;
const TICKS_PER_MINUTE: i64 = 60 * TICKS_PER_SECOND;
const TICKS_PER_HOUR: i64 = 60 * TICKS_PER_MINUTE;
const TICKS_PER_DAY: i64 = 24 * TICKS_PER_HOUR;

/// The Julian day number of 1970-01-01.
const UNIX_EPOCH_JULIAN_DAY: i64 = 2_440_588;

/// A date and time part, as `DateTimePart`, `DateTimeAdd`, `DateTimeDiff`
/// and `DateTimeBin` name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Millisecond,
    Microsecond,
    Nanosecond,
}

impl Part {
    /// The part a name stands for (case-insensitive): `year`/`yyyy`/`yy`,
    /// `month`/`mm`/`m`, `day`/`dd`/`d`, `hour`/`hh`, `minute`/`mi`/`n`,
    /// `second`/`ss`/`s`, `millisecond`/`ms`, `microsecond`/`mcs`,
    /// `nanosecond`/`ns`.
    pub(crate) fn parse(name: &str) -> Option<Part> {
        let name = name.to_ascii_lowercase();
        Some(match name.as_str() {
            "year" | "yyyy" | "yy" => Part::Year,
            "month" | "mm" | "m" => Part::Month,
            "day" | "dd" | "d" => Part::Day,
            "hour" | "hh" => Part::Hour,
            "minute" | "mi" | "n" => Part::Minute,
            "second" | "ss" | "s" => Part::Second,
            "millisecond" | "ms" => Part::Millisecond,
            "microsecond" | "mcs" => Part::Microsecond,
            "nanosecond" | "ns" => Part::Nanosecond,
            _ => return None,
        })
    }

    /// The length of a part of fixed length, in ticks (not years or
    /// months); nanoseconds count as one tick, the smallest step.
    fn fixed_ticks(self) -> Option<i64> {
        Some(match self {
            Part::Year | Part::Month => return None,
            Part::Day => TICKS_PER_DAY,
            Part::Hour => TICKS_PER_HOUR,
            Part::Minute => TICKS_PER_MINUTE,
            Part::Second => TICKS_PER_SECOND,
            Part::Millisecond => TICKS_PER_MILLISECOND,
            Part::Microsecond => TICKS_PER_MICROSECOND,
            Part::Nanosecond => 1,
        })
    }
}

/// The calendar fields of a date, broken down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fields {
    date: Date,
    /// Ticks since midnight.
    time: i64,
}

fn min_ticks() -> Ticks {
    to_ticks(Fields {
        date: Date::from_calendar_date(1, Month::January, 1).unwrap_or(Date::MIN),
        time: 0,
    })
}

fn max_ticks() -> Ticks {
    to_ticks(Fields {
        date: Date::from_calendar_date(9999, Month::December, 31).unwrap_or(Date::MAX),
        time: TICKS_PER_DAY - 1,
    })
}

/// Whether `t` lies in the representable range.
fn in_range(t: Ticks) -> Option<Ticks> {
    (min_ticks()..=max_ticks()).contains(&t).then_some(t)
}

fn to_ticks(f: Fields) -> Ticks {
    let days = i64::from(f.date.to_julian_day()) - UNIX_EPOCH_JULIAN_DAY;
    days * TICKS_PER_DAY + f.time
}

fn fields(t: Ticks) -> Option<Fields> {
    let days = t.div_euclid(TICKS_PER_DAY);
    let time = t.rem_euclid(TICKS_PER_DAY);
    let julian = i32::try_from(days + UNIX_EPOCH_JULIAN_DAY).ok()?;
    Some(Fields {
        date: Date::from_julian_day(julian).ok()?,
        time,
    })
}

/// Parses a Cosmos DB date string (see the module docs) to ticks.
pub(crate) fn parse(s: &str) -> Option<Ticks> {
    let b = s.strip_suffix('Z').unwrap_or(s).as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        part.iter()
            .try_fold(0i64, |n, d| Some(n * 10 + i64::from(d - b'0')))
    };
    let sep = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(sep(4, b'-') && sep(7, b'-')) {
        return None;
    }
    let year = i32::try_from(digits(0..4)?).ok()?;
    let month = Month::try_from(u8::try_from(digits(5..7)?).ok()?).ok()?;
    let day = u8::try_from(digits(8..10)?).ok()?;
    if year < 1 {
        return None;
    }
    let date = Date::from_calendar_date(year, month, day).ok()?;
    let mut time = 0;
    if b.len() > 10 {
        if !(sep(10, b'T') && sep(13, b':')) {
            return None;
        }
        let (hour, minute) = (digits(11..13)?, digits(14..16)?);
        if hour > 23 || minute > 59 {
            return None;
        }
        time = hour * TICKS_PER_HOUR + minute * TICKS_PER_MINUTE;
        if b.len() > 16 {
            if !sep(16, b':') {
                return None;
            }
            let second = digits(17..19)?;
            if second > 59 {
                return None;
            }
            time += second * TICKS_PER_SECOND;
            if b.len() > 19 {
                let len = b.len() - 20;
                if !sep(19, b'.') || !(1..=7).contains(&len) {
                    return None;
                }
                let fraction = digits(20..b.len())?;
                time += fraction * 10i64.pow(7 - len as u32);
            }
        }
    }
    in_range(to_ticks(Fields { date, time }))
}

/// Formats ticks as `YYYY-MM-DDThh:mm:ss.fffffffZ`; None outside the range.
pub(crate) fn format(t: Ticks) -> Option<String> {
    let f = fields(in_range(t)?)?;
    let (y, m, d) = f.date.to_calendar_date();
    let time = f.time;
    Some(format!(
        "{y:04}-{:02}-{d:02}T{:02}:{:02}:{:02}.{:07}Z",
        u8::from(m),
        time / TICKS_PER_HOUR,
        time % TICKS_PER_HOUR / TICKS_PER_MINUTE,
        time % TICKS_PER_MINUTE / TICKS_PER_SECOND,
        time % TICKS_PER_SECOND
    ))
}

/// `DateTimePart(part, date)`.
pub(crate) fn part(part: Part, t: Ticks) -> Option<i64> {
    let f = fields(t)?;
    let (y, m, d) = f.date.to_calendar_date();
    let sub = f.time % TICKS_PER_SECOND;
    Some(match part {
        Part::Year => i64::from(y),
        Part::Month => i64::from(u8::from(m)),
        Part::Day => i64::from(d),
        Part::Hour => f.time / TICKS_PER_HOUR,
        Part::Minute => f.time % TICKS_PER_HOUR / TICKS_PER_MINUTE,
        Part::Second => f.time % TICKS_PER_MINUTE / TICKS_PER_SECOND,
        Part::Millisecond => sub / TICKS_PER_MILLISECOND,
        Part::Microsecond => sub / TICKS_PER_MICROSECOND,
        Part::Nanosecond => sub * 100,
    })
}

/// Adds `months` calendar months, keeping the day unless the month is
/// shorter (2020-01-31 plus one month is 2020-02-29), as .NET's `AddMonths`.
fn add_months(t: Ticks, months: i64) -> Option<Ticks> {
    let f = fields(t)?;
    let (y, m, d) = f.date.to_calendar_date();
    let total = i64::from(y) * 12 + i64::from(u8::from(m)) - 1 + months;
    let year = i32::try_from(total.div_euclid(12)).ok()?;
    let month = Month::try_from(u8::try_from(total.rem_euclid(12) + 1).ok()?).ok()?;
    if year < 1 {
        return None;
    }
    let day = d.min(time::util::days_in_month(month, year));
    let date = Date::from_calendar_date(year, month, day).ok()?;
    in_range(to_ticks(Fields { date, time: f.time }))
}

/// `DateTimeAdd(part, n, date)`: `n` is truncated to an integer; adding
/// nanoseconds adds whole ticks (`n / 100`).
pub(crate) fn add(part: Part, n: f64, t: Ticks) -> Option<Ticks> {
    if !n.is_finite() || n.abs() > 9.0e18 {
        return None;
    }
    let n = n.trunc() as i64;
    match part {
        Part::Year => add_months(t, n.checked_mul(12)?),
        Part::Month => add_months(t, n),
        Part::Nanosecond => in_range(t.checked_add(n / 100)?),
        other => in_range(t.checked_add(n.checked_mul(other.fixed_ticks()?)?)?),
    }
}

/// `DateTimeDiff(part, start, end)`: how many boundaries of `part` lie
/// between the two dates (negative when `end` is earlier), as SQL's
/// DATEDIFF counts them: 2019-12-31 to 2020-01-01 is one year.
pub(crate) fn diff(part: Part, start: Ticks, end: Ticks) -> Option<i64> {
    let months = |t: Ticks| -> Option<i64> {
        let (y, m, _) = fields(t)?.date.to_calendar_date();
        Some(i64::from(y) * 12 + i64::from(u8::from(m)))
    };
    Some(match part {
        Part::Year => i64::from(fields(end)?.date.year()) - i64::from(fields(start)?.date.year()),
        Part::Month => months(end)? - months(start)?,
        Part::Nanosecond => (end - start).checked_mul(100)?,
        other => {
            let unit = other.fixed_ticks()?;
            end.div_euclid(unit) - start.div_euclid(unit)
        }
    })
}

/// `DateTimeFromParts(year, month, day [, hour, minute, second, fraction])`
/// with the fraction in ticks (seven digits); every part must be an
/// integer in its range.
pub(crate) fn from_parts(parts: &[f64]) -> Option<Ticks> {
    let int = |i: usize, max: i64| -> Option<i64> {
        let Some(&v) = parts.get(i) else {
            return Some(0);
        };
        (v.fract() == 0.0 && v >= 0.0 && v <= max as f64).then_some(v as i64)
    };
    let year = i32::try_from(int(0, 9999)?).ok()?;
    let month = Month::try_from(u8::try_from(int(1, 12)?).ok()?).ok()?;
    let day = u8::try_from(int(2, 31)?).ok()?;
    if year < 1 {
        return None;
    }
    let date = Date::from_calendar_date(year, month, day).ok()?;
    let time = int(3, 23)? * TICKS_PER_HOUR
        + int(4, 59)? * TICKS_PER_MINUTE
        + int(5, 59)? * TICKS_PER_SECOND
        + int(6, TICKS_PER_SECOND - 1)?;
    in_range(to_ticks(Fields { date, time }))
}

/// `DateTimeBin(date, part [, size [, origin]])`: the start of the bin of
/// `size` parts (counted from `origin`, the Unix epoch by default) that
/// holds `date`. Only parts of fixed length bin (day and smaller).
pub(crate) fn bin(t: Ticks, part: Part, size: f64, origin: Ticks) -> Option<Ticks> {
    if size.fract() != 0.0 || !(1.0..=9.0e15).contains(&size) {
        return None;
    }
    let width = part.fixed_ticks()?.checked_mul(size as i64)?;
    let offset = t.checked_sub(origin)?;
    in_range(origin.checked_add(offset.div_euclid(width).checked_mul(width)?)?)
}

/// Ticks as a timestamp (milliseconds, rounded toward the past).
pub(crate) fn to_timestamp(t: Ticks) -> i64 {
    t.div_euclid(TICKS_PER_MILLISECOND)
}

/// A timestamp (milliseconds since the epoch) as ticks, if in range.
pub(crate) fn from_timestamp(ms: f64) -> Option<Ticks> {
    if !ms.is_finite() || ms.abs() > 1.0e15 {
        return None;
    }
    in_range((ms.trunc() as i64).checked_mul(TICKS_PER_MILLISECOND)?)
}

/// A number of ticks given as a JSON number, if integral and in range.
pub(crate) fn from_ticks(n: f64) -> Option<Ticks> {
    if !n.is_finite() || n.fract() != 0.0 || n.abs() > 9.0e18 {
        return None;
    }
    in_range(n as i64)
}

/// The current time in ticks, from the system clock.
pub(crate) fn now() -> Ticks {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos() / 100).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos() / 100).unwrap_or(i64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Ticks {
        parse(s).unwrap_or_else(|| panic!("{s} should parse"))
    }

    #[test]
    fn parse_and_format_round_trip() {
        assert_eq!(p("1970-01-01T00:00:00.0000000Z"), 0);
        assert_eq!(p("1970-01-01"), 0);
        assert_eq!(p("1970-01-01T00:00:01Z"), TICKS_PER_SECOND);
        assert_eq!(p("2020-07-09T23:20:13.4575530Z"), 15_943_368_134_575_530);
        assert_eq!(p("2020-07-09T23:20:13.457553"), 15_943_368_134_575_530);
        assert_eq!(
            format(15_943_368_134_575_530).as_deref(),
            Some("2020-07-09T23:20:13.4575530Z")
        );
        assert_eq!(format(-1).as_deref(), Some("1969-12-31T23:59:59.9999999Z"));
        assert_eq!(
            format(p("0001-01-01")).as_deref(),
            Some("0001-01-01T00:00:00.0000000Z")
        );
        assert_eq!(
            format(p("9999-12-31T23:59:59.9999999Z")).as_deref(),
            Some("9999-12-31T23:59:59.9999999Z")
        );
        assert_eq!(format(max_ticks() + 1), None);
        for bad in [
            "",
            "2020",
            "2020-13-01",
            "2020-02-30",
            "0000-01-01",
            "2020-01-01T24:00",
            "2020-01-01T10:60",
            "2020-01-01 10:00:00",
            "2020-01-01T10:00:00.12345678Z",
            "2020-01-01T10:00:00.Z",
            "2020-01-01T10:00:00+01:00",
            "2020-01-01T10",
            "+2020-01-01",
            "2020-1-01",
            "２０２０-01-01",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn parts_of_the_documentation_example() {
        let t = p("2016-05-29T08:30:00.1301617");
        let got: Vec<i64> = ["yyyy", "mm", "dd", "hh", "mi", "ss", "ms", "mcs", "ns"]
            .iter()
            .map(|n| part(Part::parse(n).unwrap(), t).unwrap())
            .collect();
        assert_eq!(got, [2016, 5, 29, 8, 30, 0, 130, 130_161, 130_161_700]);
        assert_eq!(Part::parse("YEAR"), Some(Part::Year));
        assert_eq!(Part::parse("week"), None);
    }

    #[test]
    fn adding_clamps_to_the_end_of_the_month() {
        let f = |part, n, s| format(add(part, n, p(s)).unwrap()).unwrap();
        assert_eq!(
            f(Part::Month, 1.0, "2020-07-09T23:20:13.4575530Z"),
            "2020-08-09T23:20:13.4575530Z"
        );
        assert_eq!(
            f(Part::Month, 1.0, "2020-01-31"),
            "2020-02-29T00:00:00.0000000Z"
        );
        assert_eq!(
            f(Part::Year, 1.0, "2020-02-29"),
            "2021-02-28T00:00:00.0000000Z"
        );
        assert_eq!(
            f(Part::Hour, -2.0, "2020-01-01"),
            "2019-12-31T22:00:00.0000000Z"
        );
        assert_eq!(
            f(Part::Nanosecond, 250.0, "2020-01-01"),
            "2020-01-01T00:00:00.0000002Z"
        );
        assert_eq!(add(Part::Year, 1.0, p("9999-06-01")), None);
        assert_eq!(add(Part::Day, f64::NAN, 0), None);
    }

    #[test]
    fn differences_count_boundaries() {
        assert_eq!(
            diff(Part::Year, p("2019-12-31T23:59:59Z"), p("2020-01-01")),
            Some(1)
        );
        assert_eq!(
            diff(Part::Month, p("2020-03-31"), p("2020-01-01")),
            Some(-2)
        );
        assert_eq!(
            diff(Part::Day, p("2020-01-01T23:00"), p("2020-01-02T01:00")),
            Some(1)
        );
        assert_eq!(
            diff(Part::Hour, p("1969-12-31T23:30"), p("1970-01-01T00:10")),
            Some(1)
        );
        assert_eq!(diff(Part::Nanosecond, 0, 3), Some(300));
    }

    #[test]
    fn from_parts_bins_and_numbers() {
        assert_eq!(
            format(from_parts(&[2017.0, 4.0, 20.0, 13.0, 15.0, 20.0, 3_456_789.0]).unwrap())
                .unwrap(),
            "2017-04-20T13:15:20.3456789Z"
        );
        assert_eq!(from_parts(&[2017.0, 2.0, 29.0]), None);
        assert_eq!(from_parts(&[2017.0, 4.5, 1.0]), None);
        let t = p("2021-06-28T17:24:29.2991234Z");
        assert_eq!(
            format(bin(t, Part::Hour, 1.0, 0).unwrap()).unwrap(),
            "2021-06-28T17:00:00.0000000Z"
        );
        assert_eq!(
            format(bin(t, Part::Day, 7.0, p("2021-06-01")).unwrap()).unwrap(),
            "2021-06-22T00:00:00.0000000Z"
        );
        assert_eq!(bin(t, Part::Month, 1.0, 0), None);
        assert_eq!(bin(t, Part::Hour, 0.0, 0), None);
        assert_eq!(
            to_timestamp(p("2020-07-09T23:20:13.4575530Z")),
            1_594_336_813_457
        );
        assert_eq!(
            format(from_timestamp(1_594_227_912_345.0).unwrap()).unwrap(),
            "2020-07-08T17:05:12.3450000Z"
        );
        assert_eq!(from_ticks(1.5), None);
        assert!(now() > p("2020-01-01"));
    }
}
