//! Text a document must contain for a query to return anything from it,
//! so that a source reading documents as JSON text (storage, for the
//! partitions a query reads without loading them) can pass over one that
//! lacks it without parsing it.
//!
//! It holds because storage keeps a document's body as serde_json writes
//! it: a document whose `c.a.b` is the string `"x"` contains `"x"`, quoted
//! and escaped as the same serializer writes the constant; one whose
//! `c.n` equals the integer 42 contains the digits `42` (as `42`, `-42`,
//! `42.0` or `-42.0`: a float with an integral value under 10^15 has no
//! exponent); one whose `c.ok` is `true` contains `true`. Only the terms
//! every row satisfies count: `path = constant` joined by AND at the top
//! of WHERE, in a query of the document itself (no JOIN, no FROM path),
//! on a path outside the system properties storage keeps apart from the
//! body. Computed properties are expressions by then, not paths. Anything
//! else gives no text: a needle that is missing from a document which
//! matches would lose a row, where one that is there in a document which
//! does not costs only the parse the scan would have made anyway.

use memchr::memmem::Finder;
use serde_json::Value;

use crate::query::ast::{Condition, Expr, Query};
use crate::range_index::{IndexTerm, Step};
use crate::stamp::SYSTEM_PROPERTIES;

/// Integers at least this large may be written with an exponent.
const PLAIN_INTEGERS_BELOW: f64 = 1e15;

/// The text every document a query can return contains in its stored
/// JSON form (see the module docs); a source that reads that form may pass
/// over a document without it unparsed ([`crate::query::Source::scan_containing`]).
#[derive(Debug, Default)]
pub struct Needles(Vec<Finder<'static>>);

impl Needles {
    /// The needles of `q`, given its parameter values `bound` (by
    /// [`Expr::Param`] index); empty when it has none.
    pub(crate) fn of(q: &Query, bound: &[Option<&Value>]) -> Needles {
        let mut texts: Vec<Vec<u8>> = Vec::new();
        for (path, constant) in q.equalities() {
            // Storage may keep them out of the body's text.
            if path
                .first()
                .is_some_and(|p| SYSTEM_PROPERTIES.contains(&p.as_str()))
            {
                continue;
            }
            let value = match constant {
                Expr::Lit(value) => Some(&**value),
                Expr::Param(i) => bound.get(*i).copied().flatten(),
                _ => None,
            };
            if let Some(text) = value.and_then(text_of)
                && !texts.contains(&text)
            {
                texts.push(text);
            }
        }
        Needles(
            texts
                .into_iter()
                .map(|t| Finder::new(&t).into_owned())
                .collect(),
        )
    }

    /// Whether there are none (every document may match).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `text`, a document's stored JSON text (or the part of it
    /// before the system properties), contains every needle.
    pub fn found_in(&self, text: &[u8]) -> bool {
        self.0.iter().all(|n| n.find(text).is_some())
    }
}

/// What `q` asks of a range index, given its parameter values `bound`:
/// the terms its [`Query::conditions`] can be expressed as. An
/// `ARRAY_CONTAINS` asks for an element equal to its needle, or for one
/// with each scalar property of an object needle it matches partially.
pub(crate) fn index_terms(q: &Query, bound: &[Option<&Value>]) -> Vec<IndexTerm> {
    fn value<'v>(constant: &'v Expr, bound: &[Option<&'v Value>]) -> Option<&'v Value> {
        match constant {
            Expr::Lit(value) => Some(&**value),
            Expr::Param(i) => bound.get(*i).copied().flatten(),
            _ => None,
        }
    }
    let value = |constant| value(constant, bound);
    let mut terms = Vec::new();
    for (path, condition) in q.conditions() {
        let term = match condition {
            Condition::Eq(c) => value(c).and_then(|v| IndexTerm::equal(path, v)),
            Condition::Cmp(op, c) => value(c).and_then(|v| IndexTerm::compare(path, op, v)),
            Condition::In(list) => list
                .iter()
                .map(value)
                .collect::<Option<Vec<_>>>()
                .and_then(|values| IndexTerm::within(path, values)),
            Condition::Between(low, high) => value(low)
                .zip(value(high))
                .and_then(|(low, high)| IndexTerm::between(path, low, high)),
            Condition::StartsWith(c) => match value(c) {
                Some(Value::String(prefix)) => IndexTerm::starts_with(path, prefix),
                _ => None,
            },
            Condition::Defined => IndexTerm::defined(path),
            Condition::Contains(needle, partial) => {
                let mut elements = path;
                elements.push(Step::Elements);
                let member = |name: &String, member: Option<&Value>| {
                    let mut path = elements.clone();
                    path.push(Step::Label(name.clone()));
                    IndexTerm::equal(path, member?)
                };
                let partial = partial.and_then(value) == Some(&Value::Bool(true));
                match (needle, value(needle)) {
                    // An object written out (`{"name": @n}`) or given whole.
                    (Expr::Object(members), _) if partial => terms.extend(
                        members
                            .iter()
                            .filter_map(|(name, e)| member(name, value(e))),
                    ),
                    (_, Some(Value::Object(members))) if partial => {
                        terms.extend(members.iter().filter_map(|(name, v)| member(name, Some(v))))
                    }
                    (_, Some(needle)) => terms.extend(IndexTerm::equal(elements, needle)),
                    _ => {}
                }
                None
            }
        };
        terms.extend(term);
    }
    terms
}

/// What the JSON text of any value equal to `value` contains, if that is
/// known.
fn text_of(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::String(_) => serde_json::to_vec(value).ok(),
        Value::Bool(b) => Some(b.to_string().into_bytes()),
        Value::Number(n) => {
            let digits = if let Some(u) = n.as_u64() {
                u
            } else if let Some(i) = n.as_i64() {
                i.unsigned_abs()
            } else {
                let f = n.as_f64()?.abs();
                if f.fract() != 0.0 || f >= PLAIN_INTEGERS_BELOW {
                    return None;
                }
                f as u64
            };
            // An integer at 10^15 or beyond may equal a float written as
            // `1e15`.
            (digits < PLAIN_INTEGERS_BELOW as u64).then(|| digits.to_string().into_bytes())
        }
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::query::parse;

    fn texts(sql: &str, params: &[Value]) -> Vec<String> {
        let q = parse(sql).unwrap();
        let bound: Vec<Option<&Value>> = params.iter().map(Some).collect();
        Needles::of(&q, &bound)
            .0
            .iter()
            .map(|f| String::from_utf8(f.needle().to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn the_equalities_every_row_satisfies_give_their_text() {
        assert_eq!(
            texts(
                "SELECT * FROM c WHERE c.type = 'post' AND c.userId = @u",
                &[json!("u\"7")]
            ),
            [r#""post""#, r#""u\"7""#]
        );
        assert_eq!(texts("SELECT * FROM c WHERE 42 = c.a.n", &[]), ["42"]);
        assert_eq!(texts("SELECT * FROM c WHERE c.n = -7.0", &[]), ["7"]);
        assert_eq!(texts("SELECT * FROM c WHERE c.ok = true", &[]), ["true"]);
        assert_eq!(
            texts(
                "SELECT * FROM c WHERE c.a = 'x' AND (c.b > 1 AND c.d = 'y')",
                &[]
            ),
            [r#""x""#, r#""y""#]
        );
    }

    #[test]
    fn anything_a_matching_document_may_lack_gives_none() {
        for sql in [
            // Not every row satisfies the term.
            "SELECT * FROM c WHERE c.a = 'x' OR c.b = 'y'",
            "SELECT * FROM c WHERE NOT (c.a = 'x')",
            "SELECT * FROM c WHERE c.a != 'x'",
            // Not a path of the document, or not one kept in its body.
            "SELECT * FROM c WHERE LOWER(c.a) = 'x'",
            "SELECT * FROM c WHERE c._etag = '\"1\"'",
            "SELECT * FROM c WHERE c._ts = 1700000000",
            "SELECT VALUE c FROM c JOIN t IN c.tags WHERE t = 'x'",
            "SELECT * FROM c.children ch WHERE ch.a = 'x'",
            // Values whose text varies, or with no text of their own.
            "SELECT * FROM c WHERE c.n = 1.5",
            "SELECT * FROM c WHERE c.n = 1000000000000000",
            "SELECT * FROM c WHERE c.n = 1e300",
            "SELECT * FROM c WHERE c.a = null",
            "SELECT * FROM c WHERE c.a = [1]",
            "SELECT * FROM c WHERE c.a = {\"b\": 1}",
        ] {
            assert_eq!(texts(sql, &[]), Vec::<String>::new(), "{sql}");
        }
        // A parameter the caller did not bind.
        let q = parse("SELECT * FROM c WHERE c.a = @missing").unwrap();
        assert!(Needles::of(&q, &[None]).is_empty());
    }

    fn terms(sql: &str) -> Vec<IndexTerm> {
        index_terms(&parse(sql).unwrap(), &[])
    }

    #[test]
    fn the_conditions_every_row_satisfies_give_index_terms() {
        let path = |p: &str| vec![p.into()];
        let compare = crate::range_index::Comparison::Greater;
        assert_eq!(
            terms("SELECT * FROM c WHERE 3 < c.n AND c.s IN ('a', 'b') AND IS_DEFINED(c.d)"),
            [
                IndexTerm::compare(path("n"), compare, &json!(3)).unwrap(),
                IndexTerm::within(path("s"), [&json!("a"), &json!("b")]).unwrap(),
                IndexTerm::defined(path("d")).unwrap(),
            ]
        );
        assert_eq!(
            terms("SELECT * FROM c WHERE STARTSWITH(c.s, 'x', false) AND c.n BETWEEN 1 AND 2"),
            [
                IndexTerm::starts_with(path("s"), "x").unwrap(),
                IndexTerm::between(path("n"), &json!(1), &json!(2)).unwrap(),
            ]
        );
        for sql in [
            "SELECT * FROM c WHERE c.s NOT IN ('a')",
            "SELECT * FROM c WHERE c.n NOT BETWEEN 1 AND 2",
            "SELECT * FROM c WHERE STARTSWITH(c.s, 'x', true)",
            "SELECT * FROM c WHERE NOT IS_DEFINED(c.d)",
            "SELECT * FROM c WHERE c.n > 1 OR c.n < 0",
            "SELECT * FROM c WHERE c.n != 1",
            "SELECT * FROM c WHERE c.n > c.m",
            "SELECT * FROM c WHERE c.b > true",
        ] {
            assert_eq!(terms(sql), [], "{sql}");
        }
    }

    #[test]
    fn a_condition_some_array_element_must_satisfy_gives_a_term_on_the_elements() {
        let tags = || vec!["tags".into(), Step::Elements];
        let name = || vec!["items".into(), Step::Elements, "name".into()];
        let x = || IndexTerm::equal(tags(), &json!("x")).unwrap();
        for sql in [
            "SELECT VALUE c FROM c JOIN t IN c.tags WHERE t = 'x'",
            "SELECT VALUE t FROM t IN c.tags WHERE t = 'x'",
            "SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, 'x')",
            "SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, 'x', true)",
            "SELECT * FROM c WHERE EXISTS(SELECT VALUE t FROM t IN c.tags WHERE t = 'x')",
            "SELECT * FROM c WHERE EXISTS(SELECT VALUE 1 FROM t IN c.tags WHERE t = 'x' AND NOT (t = 'y'))",
        ] {
            assert_eq!(terms(sql), [x()], "{sql}");
        }
        assert_eq!(
            terms(
                "SELECT VALUE c FROM c JOIN i IN c.items JOIN t IN i.tags \
                 WHERE c.n = 1 AND STARTSWITH(i.name, 'a') AND t > 2"
            ),
            [
                IndexTerm::equal(vec!["n".into()], &json!(1)).unwrap(),
                IndexTerm::starts_with(name(), "a").unwrap(),
                IndexTerm::compare(
                    vec![
                        "items".into(),
                        Step::Elements,
                        "tags".into(),
                        Step::Elements
                    ],
                    crate::range_index::Comparison::Greater,
                    &json!(2)
                )
                .unwrap(),
            ]
        );
        assert_eq!(
            terms(
                "SELECT * FROM c WHERE ARRAY_CONTAINS(c.items, {'name': 'a', 'o': {}, 'n': 1, 'm': c.n}, true)"
            ),
            [
                IndexTerm::equal(name(), &json!("a")).unwrap(),
                IndexTerm::equal(vec!["items".into(), Step::Elements, "n".into()], &json!(1))
                    .unwrap(),
            ]
        );
        for sql in [
            // No element need satisfy them.
            "SELECT * FROM c WHERE NOT ARRAY_CONTAINS(c.tags, 'x')",
            "SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, 'x') OR c.n = 1",
            "SELECT * FROM c WHERE NOT EXISTS(SELECT VALUE t FROM t IN c.tags WHERE t = 'x')",
            "SELECT * FROM c WHERE EXISTS(SELECT VALUE COUNT(1) FROM t IN c.tags WHERE t = 'x')",
            "SELECT * FROM c WHERE EXISTS(SELECT VALUE t FROM t IN c.tags WHERE t = 'x' OR t = 'y')",
            "SELECT VALUE c FROM c JOIN t IN c.tags WHERE t = 'x' OR c.n = 1",
            // Only the whole element would match.
            "SELECT * FROM c WHERE ARRAY_CONTAINS(c.items, {'name': 'a'})",
            "SELECT * FROM c WHERE ARRAY_CONTAINS(c.items, {'name': 'a'}, false)",
            // Not a path from the document.
            "SELECT VALUE t FROM c.children ch JOIN t IN ch.tags WHERE t = 'x'",
            "SELECT VALUE t FROM c JOIN t IN LOWER(c.tags) WHERE t = 'x'",
        ] {
            assert_eq!(terms(sql), [], "{sql}");
        }
    }

    #[test]
    fn conditions_on_array_elements_give_no_needles_and_pin_no_partition() {
        for sql in [
            "SELECT VALUE c FROM c JOIN t IN c.tags WHERE t = 'x' AND c.pk = 'p'",
            "SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, 'x')",
        ] {
            let q = parse(sql).unwrap();
            assert_eq!(texts(sql, &[]), Vec::<String>::new(), "{sql}");
            assert!(q.equality_paths().is_empty(), "{sql}");
        }
    }

    #[test]
    fn a_computed_property_is_an_expression_by_the_time_needles_are_read() {
        let cps = crate::query::ComputedProperties::compile([(
            "cp_lower",
            "SELECT VALUE LOWER(c.name) FROM c",
        )])
        .unwrap();
        let q = crate::query::parse_with("SELECT * FROM c WHERE c.cp_lower = 'x'", &cps).unwrap();
        assert!(Needles::of(&q, &[]).is_empty());
    }

    #[test]
    fn every_number_equal_to_an_integer_under_the_bound_is_written_with_its_digits() {
        let mut samples: Vec<f64> =
            vec![0.0, -0.0, 1.0, 9.0, 10.0, 99.0, 100.0, 1e6, 123_456_789.0];
        for exp in 0..15 {
            let p = 10f64.powi(exp);
            samples.extend([p, p - 1.0, p + 1.0, 2.0 * p, 9.0 * p + 7.0]);
        }
        samples.push(PLAIN_INTEGERS_BELOW - 1.0);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            samples.push((x % PLAIN_INTEGERS_BELOW as u64) as f64);
        }
        for f in samples {
            if f.abs() >= PLAIN_INTEGERS_BELOW {
                continue;
            }
            let digits = (f.abs() as u64).to_string();
            for value in [json!(f), json!(-f), json!(f as u64), json!(-(f as i64))] {
                let text = serde_json::to_string(&value).unwrap();
                assert!(text.contains(&digits), "{text} lacks {digits}");
                assert_eq!(
                    text_of(&value).map(|t| String::from_utf8(t).unwrap()),
                    Some(digits.clone()),
                    "{text}"
                );
            }
        }
    }
}
