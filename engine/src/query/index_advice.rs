//! Index advice: which indexes of a container's indexing policy a query's
//! conditions and ORDER BY use, and which indexes the policy lacks that
//! would serve them. It is what the service's index metrics report
//! (`x-ms-cosmos-index-utilization`); a gateway renders it in the wire's
//! shape, and tells the indexes a page really read from those it only
//! could have.
//!
//! The rules follow what the service answers (the .NET SDK's emulator
//! baselines, `IndexMetricsParserBaselineTest.*.xml`):
//!
//! * every condition [`Query::conditions`] finds (equality, range, `IN`,
//!   `BETWEEN`, `STARTSWITH`, `IS_DEFINED`, `ARRAY_CONTAINS` joined by AND
//!   at the top of WHERE, or of an `EXISTS` subquery's) names a
//!   single-path index `/path/?` (`/tags/[]/?` for array elements: a JOIN's
//!   and `ARRAY_CONTAINS`'s): *utilized* when the policy includes the
//!   path, *potential* when it excludes it;
//! * so does an ORDER BY on one path (with no filter expression);
//! * an ORDER BY on several paths names the composite index that serves
//!   it ([`IndexingPolicy::composite_index_for`]), utilized, or, when the
//!   policy has none, the composite index of its paths and directions,
//!   potential (the query itself is then refused, as on the service);
//! * equality conditions with an ORDER BY name the composite index of the
//!   equality paths followed by the ORDER BY's (`WHERE c.a = 1 ORDER BY
//!   c.b` is served best by `(/a ASC, /b ASC)`), and equality conditions
//!   with a range on one other path, without ORDER BY, that of the
//!   equality paths followed by the range's (`c.id = "1" AND c.name >
//!   "Abc"`: `(/id ASC, /name ASC)`); utilized when the policy has it,
//!   else potential.
//!
//! Under mode `none` nothing is utilized.
//!
//! Non-goals: the service's impact scores (every index here would matter
//! to the query it came from, so a gateway reports `High`), and indexes
//! for what [`Query::conditions`] does not see (`OR`, `NOT`, functions
//! other than `STARTSWITH`, `IS_DEFINED` and `ARRAY_CONTAINS`).

use serde_json::Value;

use crate::indexing::{DocumentPath, IndexingMode, IndexingPolicy, SortOrder};
use crate::query::Params;
use crate::query::ast::{Condition, Expr, Query, labels_of};
use crate::query::eval::lookup_param;
use crate::range_index::{self, Comparison, Step};

/// A single-path (range) index and the condition it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SingleIndex {
    /// The index's path as the service spells it: `/name/?`, a label with
    /// characters other than letters, digits and `_` quoted
    /// (`/"first name"/?`).
    pub spec: String,
    /// The condition as the service writes it, from the document's root
    /// `ROOT`: `(ROOT.name = "Julien")`, `(ROOT.age > 12)`; empty for an
    /// ORDER BY.
    pub filter: String,
}

/// A composite index: its paths, each with a direction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompositeIndex {
    /// `["/name ASC", "/age DESC"]`, in the index's order.
    pub specs: Vec<String>,
}

/// Which indexes a query uses under a policy and which would help it
/// ([`index_advice`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexAdvice {
    /// Single-path indexes the policy has that the query's conditions or
    /// ORDER BY can use.
    pub utilized_single: Vec<SingleIndex>,
    /// Single-path indexes on paths the policy excludes that would serve
    /// a condition or the ORDER BY.
    pub potential_single: Vec<SingleIndex>,
    /// The policy's composite indexes that serve the query.
    pub utilized_composite: Vec<CompositeIndex>,
    /// Composite indexes the policy lacks that would serve the query.
    pub potential_composite: Vec<CompositeIndex>,
}

/// Which indexes of `policy` the conditions and ORDER BY of `query` use,
/// and which missing ones would serve them (see the module docs);
/// `params` are the query's parameters, whose values the filter
/// expressions show (an unbound one shows its name).
pub fn index_advice(query: &Query, params: &Params, policy: &IndexingPolicy) -> IndexAdvice {
    let indexing = policy.indexing_mode != IndexingMode::None;
    let mut res = IndexAdvice::default();
    let single = |res: &mut IndexAdvice, path: &[Step], filter: String| {
        let entry = SingleIndex {
            spec: format!("{}/?", index_path(path)),
            filter,
        };
        let list = match range_index::is_indexed(policy, path) {
            true => &mut res.utilized_single,
            false => &mut res.potential_single,
        };
        if !list.contains(&entry) {
            list.push(entry);
        }
    };
    let conditions = query.conditions();
    for (path, condition) in &conditions {
        let filter = filter_expression(query, params, path, condition);
        match condition {
            // The index of the elements it looks for.
            Condition::Contains(..) => {
                let elements = [path.as_slice(), &[Step::Elements]].concat();
                single(&mut res, &elements, filter);
            }
            _ => single(&mut res, path, filter),
        }
    }
    let order_by = query.order_by_paths().unwrap_or_default();
    if let [(labels, _)] = order_by.as_slice() {
        let path: Vec<Step> = labels.iter().cloned().map(Step::Label).collect();
        let spec = format!("{}/?", index_path(&path));
        let named = res
            .utilized_single
            .iter()
            .chain(&res.potential_single)
            .any(|s| s.spec == spec);
        if !named {
            single(&mut res, &path, String::new());
        }
    }
    // Composite indexes hold paths through objects only.
    let conditions: Vec<(Vec<String>, Condition<'_>)> = conditions
        .into_iter()
        .filter_map(|(path, condition)| Some((labels_of(path)?, condition)))
        .collect();
    // Composite indexes: the ORDER BY's own, then equality filters ahead
    // of the ORDER BY or of one range.
    let composite = |res: &mut IndexAdvice, items: Vec<(Vec<String>, SortOrder)>| {
        let paths: Vec<_> = items
            .iter()
            .map(|(labels, order)| (DocumentPath::of_labels(labels.iter().cloned()), *order))
            .collect();
        let (list, specs) = match policy.composite_index_for(&paths).filter(|_| indexing) {
            Some(index) => {
                let specs = index
                    .iter()
                    .map(|c| format!("{} {}", c.path, direction(c.order)))
                    .collect();
                (&mut res.utilized_composite, specs)
            }
            None => {
                let specs = items
                    .iter()
                    .map(|(labels, order)| {
                        let path: Vec<Step> = labels.iter().cloned().map(Step::Label).collect();
                        format!("{} {}", index_path(&path), direction(*order))
                    })
                    .collect();
                (&mut res.potential_composite, specs)
            }
        };
        let entry = CompositeIndex { specs };
        if !list.contains(&entry) {
            list.push(entry);
        }
    };
    let order = |descending: bool| match descending {
        true => SortOrder::Descending,
        false => SortOrder::Ascending,
    };
    let mut equal: Vec<&Vec<String>> = Vec::new();
    for (labels, condition) in &conditions {
        if matches!(condition, Condition::Eq(_)) && !equal.contains(&labels) {
            equal.push(labels);
        }
    }
    if order_by.len() > 1 {
        let items = order_by
            .iter()
            .map(|(labels, descending)| (labels.clone(), order(*descending)))
            .collect();
        composite(&mut res, items);
    }
    if let Some((_, first)) = order_by.first() {
        let ahead: Vec<_> = equal
            .iter()
            .filter(|labels| !order_by.iter().any(|(l, _)| l == **labels))
            .map(|labels| ((*labels).clone(), order(*first)))
            .collect();
        if !ahead.is_empty() {
            let items = ahead
                .into_iter()
                .chain(
                    order_by
                        .iter()
                        .map(|(labels, descending)| (labels.clone(), order(*descending))),
                )
                .collect();
            composite(&mut res, items);
        }
    } else if !equal.is_empty() {
        let mut ranges: Vec<&Vec<String>> = Vec::new();
        for (labels, condition) in &conditions {
            if matches!(condition, Condition::Cmp(..) | Condition::Between(..))
                && !equal.contains(&labels)
                && !ranges.contains(&labels)
            {
                ranges.push(labels);
            }
        }
        if let [range] = ranges.as_slice() {
            let items = equal
                .iter()
                .chain([range])
                .map(|labels| ((*labels).clone(), SortOrder::Ascending))
                .collect();
            composite(&mut res, items);
        }
    }
    res
}

/// `ASC` or `DESC`, as composite index specs write a direction.
fn direction(order: SortOrder) -> &'static str {
    match order {
        SortOrder::Ascending => "ASC",
        SortOrder::Descending => "DESC",
    }
}

/// `/a/b`, each label quoted (`/"first name"`) unless it is letters,
/// digits and `_` only, and `/[]` for array elements, as the service
/// writes index paths.
fn index_path(path: &[Step]) -> String {
    let mut res = String::new();
    for step in path {
        res.push('/');
        let Step::Label(label) = step else {
            res.push_str("[]");
            continue;
        };
        if is_plain(label) {
            res.push_str(label);
        } else {
            res.push('"');
            for c in label.chars() {
                if matches!(c, '"' | '\\') {
                    res.push('\\');
                }
                res.push(c);
            }
            res.push('"');
        }
    }
    res
}

/// Whether `label` needs no quotes in an index path.
fn is_plain(label: &str) -> bool {
    !label.is_empty() && label.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// `ROOT.a.b`, a label that is not an identifier as `ROOT["odd label"]`,
/// array elements as `[]` (`ROOT.items[].name`).
fn root_path(path: &[Step]) -> String {
    let mut res = String::from("ROOT");
    for step in path {
        let Step::Label(label) = step else {
            res.push_str("[]");
            continue;
        };
        let identifier = label
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if identifier {
            res.push('.');
            res.push_str(label);
        } else {
            res.push('[');
            res.push_str(&Value::String(label.clone()).to_string());
            res.push(']');
        }
    }
    res
}

/// The service's text of a condition: `(ROOT.name = "Julien")`.
fn filter_expression(
    query: &Query,
    params: &Params,
    path: &[Step],
    condition: &Condition<'_>,
) -> String {
    let path = root_path(path);
    let constant = |e: &Expr| constant_text(query, params, e);
    match condition {
        Condition::Eq(c) => format!("({path} = {})", constant(c)),
        Condition::Cmp(op, c) => {
            let op = match op {
                Comparison::Less => "<",
                Comparison::AtMost => "<=",
                Comparison::Greater => ">",
                Comparison::AtLeast => ">=",
            };
            format!("({path} {op} {})", constant(c))
        }
        Condition::In(list) => {
            let list: Vec<String> = list.iter().map(constant).collect();
            format!("({path} IN ({}))", list.join(", "))
        }
        Condition::Between(low, high) => {
            format!("({path} BETWEEN {} AND {})", constant(low), constant(high))
        }
        Condition::StartsWith(c) => format!("STARTSWITH({path}, {})", constant(c)),
        Condition::Defined => format!("IS_DEFINED({path})"),
        Condition::Contains(c, None) => format!("ARRAY_CONTAINS({path}, {})", constant(c)),
        Condition::Contains(c, Some(partial)) => {
            format!(
                "ARRAY_CONTAINS({path}, {}, {})",
                constant(c),
                constant(partial)
            )
        }
    }
}

/// A literal or a parameter as JSON text; a parameter without a value as
/// its name.
fn constant_text(query: &Query, params: &Params, e: &Expr) -> String {
    match e {
        Expr::Lit(value) => value.to_string(),
        Expr::Param(i) => {
            let name = query.params.get(*i).map_or("@?", String::as_str);
            lookup_param(params, name).map_or_else(|| name.to_owned(), Value::to_string)
        }
        // Conditions hold only literals and parameters.
        _ => String::from("?"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::query::parse;

    fn advice(sql: &str, policy: serde_json::Value) -> IndexAdvice {
        let policy = IndexingPolicy::from_json(&policy).unwrap();
        index_advice(&parse(sql).unwrap(), &Params::new(), &policy)
    }

    fn single(spec: &str, filter: &str) -> SingleIndex {
        SingleIndex {
            spec: spec.to_owned(),
            filter: filter.to_owned(),
        }
    }

    fn composite(specs: &[&str]) -> CompositeIndex {
        CompositeIndex {
            specs: specs.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn conditions_on_included_paths_are_utilized() {
        let res = advice(
            "SELECT * FROM c WHERE c.name = 'Julien' AND c.age > 12",
            json!({}),
        );
        assert_eq!(
            res.utilized_single,
            [
                single("/name/?", r#"(ROOT.name = "Julien")"#),
                single("/age/?", "(ROOT.age > 12)"),
            ]
        );
        assert!(res.potential_single.is_empty());
        // An equality and a range on another path: the composite index of
        // both would serve them better, as the service suggests.
        assert_eq!(
            res.potential_composite,
            [composite(&["/name ASC", "/age ASC"])]
        );
        assert!(res.utilized_composite.is_empty());
    }

    #[test]
    fn conditions_on_excluded_paths_are_potential() {
        let res = advice(
            "SELECT * FROM c WHERE c.body.text = 'x' AND c.title = 't'",
            json!({"excludedPaths": [{"path": "/body/*"}]}),
        );
        assert_eq!(
            res.potential_single,
            [single("/body/text/?", r#"(ROOT.body.text = "x")"#)]
        );
        assert_eq!(
            res.utilized_single,
            [single("/title/?", r#"(ROOT.title = "t")"#)]
        );
        // Two equalities need no composite index.
        assert!(res.potential_composite.is_empty());
    }

    #[test]
    fn every_kind_of_condition_has_the_services_text() {
        let sql = "SELECT * FROM c WHERE c.a IN (1, 'x') AND c.b BETWEEN 2 AND 5 \
                   AND STARTSWITH(c['odd name'], 'pre') AND IS_DEFINED(c.d) AND 3 <= c.e \
                   AND c.f = @f AND c.g = @missing";
        let mut params = Params::new();
        params.insert("@f".into(), json!({"k": [true, null]}));
        let policy = IndexingPolicy::default();
        let res = index_advice(&parse(sql).unwrap(), &params, &policy);
        let filters: Vec<&str> = res
            .utilized_single
            .iter()
            .map(|s| s.filter.as_str())
            .collect();
        assert_eq!(
            filters,
            [
                r#"(ROOT.a IN (1, "x"))"#,
                "(ROOT.b BETWEEN 2 AND 5)",
                r#"STARTSWITH(ROOT["odd name"], "pre")"#,
                "IS_DEFINED(ROOT.d)",
                "(ROOT.e >= 3)",
                r#"(ROOT.f = {"k":[true,null]})"#,
                "(ROOT.g = @missing)",
            ]
        );
        assert_eq!(res.utilized_single[2].spec, r#"/"odd name"/?"#);
    }

    #[test]
    fn index_paths_quote_labels_as_the_service_does() {
        assert_eq!(index_path(&["ı".into(), "素早く".into()]), "/ı/素早く");
        assert_eq!(index_path(&["a b".into()]), r#"/"a b""#);
        assert_eq!(index_path(&[r#"say "hi""#.into()]), r#"/"say \"hi\"""#);
        assert_eq!(root_path(&["a".into(), "1x".into()]), r#"ROOT.a["1x"]"#);
    }

    #[test]
    fn an_order_by_on_one_path_uses_its_range_index() {
        let res = advice("SELECT * FROM c ORDER BY c.ts DESC", json!({}));
        assert_eq!(res.utilized_single, [single("/ts/?", "")]);
        // Named once when a condition names it too.
        let res = advice("SELECT * FROM c WHERE c.id = '1' ORDER BY c.id", json!({}));
        assert_eq!(res.utilized_single, [single("/id/?", r#"(ROOT.id = "1")"#)]);
        assert!(res.potential_composite.is_empty());
    }

    #[test]
    fn a_multi_path_order_by_names_its_composite_index() {
        let sql = "SELECT * FROM c ORDER BY c.authorId DESC, c.creationDate ASC";
        let with = json!({"compositeIndexes": [[
            {"path": "/authorId"}, {"path": "/creationDate", "order": "descending"}
        ]]});
        let res = advice(sql, with);
        // The policy's index, as the policy writes it (all directions
        // reversed serve the query too).
        assert_eq!(
            res.utilized_composite,
            [composite(&["/authorId ASC", "/creationDate DESC"])]
        );
        assert!(res.potential_composite.is_empty());
        let res = advice(sql, json!({}));
        assert!(res.utilized_composite.is_empty());
        assert_eq!(
            res.potential_composite,
            [composite(&["/authorId DESC", "/creationDate ASC"])]
        );
    }

    #[test]
    fn equality_filters_with_an_order_by_name_a_composite_index() {
        let sql = "SELECT * FROM c WHERE c.type = 'post' ORDER BY c.creationDate DESC";
        let res = advice(sql, json!({}));
        assert_eq!(
            res.utilized_single,
            [
                single("/type/?", r#"(ROOT.type = "post")"#),
                single("/creationDate/?", ""),
            ]
        );
        assert_eq!(
            res.potential_composite,
            [composite(&["/type DESC", "/creationDate DESC"])]
        );
        let res = advice(
            sql,
            json!({"compositeIndexes": [[{"path": "/type"}, {"path": "/creationDate"}]]}),
        );
        assert_eq!(
            res.utilized_composite,
            [composite(&["/type ASC", "/creationDate ASC"])]
        );
        assert!(res.potential_composite.is_empty());
    }

    #[test]
    fn two_ranges_or_no_equality_name_no_composite_index() {
        for sql in [
            "SELECT * FROM c WHERE c.id > '1' AND c.name > 'Abc'",
            "SELECT * FROM c WHERE c.n > 1 AND c.n < 5",
            "SELECT * FROM c WHERE c.a = 1 AND c.b > 1 AND c.c < 2",
        ] {
            let res = advice(sql, json!({}));
            assert!(res.potential_composite.is_empty(), "{sql}: {res:?}");
        }
    }

    #[test]
    fn what_conditions_do_not_see_names_no_index() {
        for sql in [
            "SELECT * FROM c",
            "SELECT * FROM c WHERE c.a = 1 OR c.b = 2",
            "SELECT * FROM c WHERE NOT (c.a = 1)",
            "SELECT * FROM c WHERE LOWER(c.a) = 'x'",
            "SELECT * FROM c WHERE NOT ARRAY_CONTAINS(c.tags, 'x')",
        ] {
            assert_eq!(advice(sql, json!({})), IndexAdvice::default(), "{sql}");
        }
    }

    #[test]
    fn conditions_on_array_elements_name_the_elements_index() {
        let res = advice(
            "SELECT c.id FROM c JOIN t IN c.tags WHERE t = 'x' AND c.a = 1",
            json!({}),
        );
        assert_eq!(
            res.utilized_single,
            [
                single("/tags/[]/?", r#"(ROOT.tags[] = "x")"#),
                single("/a/?", "(ROOT.a = 1)")
            ]
        );
        // Composite indexes hold no array paths.
        assert!(res.potential_composite.is_empty(), "{res:?}");
        let res = advice(
            "SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, 'x') \
             AND EXISTS(SELECT VALUE i FROM i IN c.items WHERE i.name > 'a')",
            json!({"excludedPaths": [{"path": "/items/[]/name/?"}]}),
        );
        assert_eq!(
            res.utilized_single,
            [single("/tags/[]/?", r#"ARRAY_CONTAINS(ROOT.tags, "x")"#)]
        );
        assert_eq!(
            res.potential_single,
            [single("/items/[]/name/?", r#"(ROOT.items[].name > "a")"#)]
        );
    }

    #[test]
    fn mode_none_utilizes_nothing() {
        let res = advice(
            "SELECT * FROM c WHERE c.a = 1 ORDER BY c.b",
            json!({"indexingMode": "none"}),
        );
        assert!(res.utilized_single.is_empty() && res.utilized_composite.is_empty());
        assert_eq!(
            res.potential_single,
            [single("/a/?", "(ROOT.a = 1)"), single("/b/?", "")]
        );
    }
}
