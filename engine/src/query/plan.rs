//! Query plans: how a query runs over several physical partitions.
//!
//! A query that orders, aggregates, deduplicates or cuts its results
//! (ORDER BY, `SELECT VALUE COUNT(…)`, DISTINCT, TOP, OFFSET/LIMIT) cannot
//! be answered by concatenating what each physical partition returns. The
//! service answers such a query, sent across partitions, with 400/1004 and
//! a plan on request: what each partition runs (the *rewritten query*) and
//! what the client does with the rows (merge by the sort keys, add up the
//! partial aggregates, drop duplicates, apply TOP, OFFSET and LIMIT). The
//! SDKs' own pipelines then do the rest. [`plan`] computes the plan in the
//! service's shape:
//!
//! * ORDER BY: each partition returns
//!   `{"_rid", "orderByItems": [{"item": key}, …], "payload": row}`, sorted,
//!   with `{documentdb-formattableorderbyquery-filter}` in its WHERE clause
//!   for the client to fill in (`true`, or a resume filter);
//! * `SELECT VALUE <aggregate>`: each partition returns
//!   `[{"item": partial}]`, AVG as `{"sum", "count"}`;
//! * TOP stays in the rewritten query (each partition needs at most that
//!   many); OFFSET and LIMIT become `OFFSET 0 LIMIT offset + limit`, and
//!   the client skips and cuts;
//! * DISTINCT stays (each partition drops its own duplicates; the client
//!   drops those across partitions).
//!
//! GROUP BY and aggregates inside larger expressions are not planned
//! ([`Plan::needs_client`] is false): Partita answers those whole.

use crate::query::QueryError;
use crate::query::ast::{AggKind, Count, Expr, Query, Select, Spans};
use crate::query::{Params, parser};

/// How the client removes duplicates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distinct {
    /// No DISTINCT.
    None,
    /// DISTINCT with ORDER BY: duplicates arrive next to each other.
    Ordered,
    /// DISTINCT without ORDER BY.
    Unordered,
}

impl Distinct {
    /// The service's name (`distinctType`).
    pub fn as_str(self) -> &'static str {
        match self {
            Distinct::None => "None",
            Distinct::Ordered => "Ordered",
            Distinct::Unordered => "Unordered",
        }
    }
}

/// A query's plan across physical partitions (the service's `queryInfo`).
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// `TOP n`, resolved from the parameters.
    pub top: Option<u64>,
    /// `OFFSET n`, resolved from the parameters.
    pub offset: Option<u64>,
    /// `LIMIT n`, resolved from the parameters.
    pub limit: Option<u64>,
    /// How duplicates are removed.
    pub distinct: Distinct,
    /// Whether each ORDER BY key is descending.
    pub order_by: Vec<bool>,
    /// Each ORDER BY key's text.
    pub order_by_expressions: Vec<String>,
    /// The aggregates the client combines: `Count`, `Sum`, `Average`, `Min`,
    /// `Max`.
    pub aggregates: Vec<&'static str>,
    /// Whether the query is `SELECT VALUE …`.
    pub has_select_value: bool,
    /// Whether the query has GROUP BY.
    pub group_by: bool,
    /// What each physical partition runs; empty when it runs the query as
    /// written.
    pub rewritten: String,
}

impl Plan {
    /// Whether the query, run across several physical partitions, needs
    /// the client's pipeline (the service's 400/1004 when sent whole).
    pub fn needs_client(&self) -> bool {
        !self.group_by
            && (self.top.is_some()
                || self.offset.is_some()
                || !self.order_by.is_empty()
                || self.distinct != Distinct::None
                || !self.aggregates.is_empty())
    }
}

/// Plans `text` with `params` (see the module docs).
///
/// # Errors
/// The 400 [`QueryError`] that parsing the query gives.
pub fn plan(text: &str, params: &Params) -> Result<Plan, QueryError> {
    let (q, spans) = parser::parse_query_spans(text)?;
    let chars: Vec<char> = text.chars().collect();
    let cut = |(start, end): (usize, usize)| -> String { chars[start..end].iter().collect() };
    let count = |c: &Option<Count>| -> Option<u64> {
        match c.as_ref()? {
            Count::Lit(n) => Some(*n),
            Count::Param(p) => crate::query::eval::lookup_param(params, p)?.as_u64(),
        }
    };
    let top = count(&q.top);
    let (offset, limit) = match &q.offset_limit {
        Some((o, l)) => (count(&Some(o.clone())), count(&Some(l.clone()))),
        None => (None, None),
    };
    let simple_aggregate = q.is_value_aggregate();
    // One aggregate value has no order to merge by.
    let (order_by, order_by_expressions): (Vec<bool>, Vec<String>) = if simple_aggregate {
        (Vec::new(), Vec::new())
    } else {
        (
            q.order_by.iter().map(|s| s.descending).collect(),
            spans.order_by.iter().map(|&s| cut(s)).collect(),
        )
    };
    let distinct = match (q.distinct, order_by.is_empty()) {
        (false, _) => Distinct::None,
        (true, false) => Distinct::Ordered,
        (true, true) => Distinct::Unordered,
    };
    let has_select_value = matches!(q.select, Select::Value(_));
    let group_by = !q.group_by.is_empty();
    let aggregates: Vec<&'static str> = if group_by {
        Vec::new()
    } else {
        q.aggregates.iter().map(|a| agg_name(a.kind)).collect()
    };
    let mut plan = Plan {
        top,
        offset,
        limit,
        distinct,
        order_by,
        order_by_expressions,
        aggregates,
        has_select_value,
        group_by,
        rewritten: String::new(),
    };
    if !plan.needs_client() || (!plan.aggregates.is_empty() && !simple_aggregate) {
        // Answered whole, or refused as the SDKs refuse it.
        if !plan.aggregates.is_empty() {
            plan.rewritten = text.to_owned();
        }
        return Ok(plan);
    }
    let parts = Parts {
        q: &q,
        spans: &spans,
        cut: &cut,
    };
    plan.rewritten = if simple_aggregate {
        parts.aggregate(top)
    } else if !plan.order_by.is_empty() {
        parts.ordered(&plan)
    } else if plan.offset.is_some() || plan.distinct != Distinct::None {
        parts.reassembled(&plan)
    } else {
        // TOP alone: each partition runs the query as written.
        String::new()
    };
    Ok(plan)
}

/// The argument of an aggregate call's text (`c.n` of `AVG(c.n)`).
fn argument(call: &str) -> &str {
    call.find('(')
        .and_then(|open| call.rfind(')').map(|close| &call[open + 1..close]))
        .unwrap_or("undefined")
}

/// The service's name of an aggregate.
fn agg_name(kind: AggKind) -> &'static str {
    match kind {
        AggKind::Count => "Count",
        AggKind::Sum => "Sum",
        AggKind::Avg => "Average",
        AggKind::Min => "Min",
        AggKind::Max => "Max",
    }
}

/// The pieces of a query's text a rewritten query is made of.
struct Parts<'a> {
    q: &'a Query,
    spans: &'a Spans,
    cut: &'a dyn Fn((usize, usize)) -> String,
}

impl Parts<'_> {
    /// The binding of the document (`c` in `FROM c`).
    fn root(&self) -> Option<&str> {
        self.q.from.as_ref()?.names.first().map(String::as_str)
    }

    /// ` FROM …` and ` WHERE …`, with `extra` and-ed to the condition.
    fn source_clause(&self, extra: Option<&str>) -> String {
        let mut out = String::new();
        if let Some(from) = self.spans.from {
            out.push_str(" FROM ");
            out.push_str(&(self.cut)(from));
        }
        match (self.spans.filter, extra) {
            (Some(filter), Some(extra)) => {
                out.push_str(&format!(" WHERE ({}) AND ({extra})", (self.cut)(filter)));
            }
            (Some(filter), None) => out.push_str(&format!(" WHERE {}", (self.cut)(filter))),
            (None, Some(extra)) => out.push_str(&format!(" WHERE ({extra})")),
            (None, None) => {}
        }
        out
    }

    /// The row the query returns, as one expression.
    fn payload(&self) -> String {
        match &self.q.select {
            Select::Star => {
                let from = self.q.from.as_ref();
                from.and_then(|f| f.names.get(f.star_slot))
                    .cloned()
                    .unwrap_or_else(|| "{}".to_owned())
            }
            Select::Value(_) => self
                .spans
                .select
                .first()
                .map_or_else(String::new, |&s| (self.cut)(s)),
            Select::List(items) => {
                let fields: Vec<String> = items
                    .iter()
                    .zip(&self.spans.select)
                    .map(|((name, _), &span)| {
                        format!(
                            "{}: {}",
                            serde_json::Value::from(name.as_str()),
                            (self.cut)(span)
                        )
                    })
                    .collect();
                format!("{{{}}}", fields.join(", "))
            }
        }
    }

    /// The projection as written.
    fn projection(&self) -> String {
        match &self.q.select {
            Select::Star => "*".to_owned(),
            Select::Value(_) => format!("VALUE {}", self.payload()),
            Select::List(items) => items
                .iter()
                .zip(&self.spans.select)
                .map(|((name, _), &span)| format!("{} AS {name}", (self.cut)(span)))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// `ORDER BY k1 ASC, k2 DESC`.
    fn order_clause(&self, plan: &Plan) -> String {
        let keys: Vec<String> = plan
            .order_by_expressions
            .iter()
            .zip(&plan.order_by)
            .map(|(e, desc)| format!("{e} {}", if *desc { "DESC" } else { "ASC" }))
            .collect();
        format!(" ORDER BY {}", keys.join(", "))
    }

    /// `OFFSET 0 LIMIT offset + limit`, when the query has OFFSET.
    fn window(plan: &Plan) -> String {
        match (plan.offset, plan.limit) {
            (Some(o), Some(l)) => format!(" OFFSET 0 LIMIT {}", o.saturating_add(l)),
            _ => String::new(),
        }
    }

    fn head(&self, plan: &Plan) -> String {
        let mut out = "SELECT ".to_owned();
        if plan.distinct != Distinct::None {
            out.push_str("DISTINCT ");
        }
        if let Some(n) = plan.top {
            out.push_str(&format!("TOP {n} "));
        }
        out
    }

    fn ordered(&self, plan: &Plan) -> String {
        let items: Vec<String> = plan
            .order_by_expressions
            .iter()
            .map(|e| format!("{{\"item\": {e}}}"))
            .collect();
        let mut out = self.head(plan);
        if plan.distinct == Distinct::None
            && let Some(root) = self.root()
        {
            out.push_str(&format!("{root}._rid, "));
        }
        out.push_str(&format!(
            "[{}] AS orderByItems, {} AS payload",
            items.join(", "),
            self.payload()
        ));
        out.push_str(&self.source_clause(Some("{documentdb-formattableorderbyquery-filter}")));
        out.push_str(&self.order_clause(plan));
        out.push_str(&Parts::window(plan));
        out
    }

    fn reassembled(&self, plan: &Plan) -> String {
        let mut out = self.head(plan);
        out.push_str(&self.projection());
        out.push_str(&self.source_clause(None));
        out.push_str(&Parts::window(plan));
        out
    }

    /// `SELECT VALUE [{"item": partial}]`; the projection is one aggregate
    /// call (`is_value_aggregate`).
    fn aggregate(&self, top: Option<u64>) -> String {
        let Some(Expr::AggRef(n)) = (match &self.q.select {
            Select::Value(e) => Some(e),
            _ => None,
        }) else {
            return String::new();
        };
        let call = self
            .spans
            .select
            .first()
            .map_or_else(String::new, |&s| (self.cut)(s));
        let partial = match self.q.aggregates.get(*n).map(|a| a.kind) {
            Some(AggKind::Avg) => {
                let arg = argument(&call);
                format!("{{\"sum\": SUM({arg}), \"count\": COUNT({arg})}}")
            }
            // The plain value for the Python SDK, `{"max", "count"}` in
            // `item2` for the JavaScript SDK, as the service sends both.
            Some(kind @ (AggKind::Min | AggKind::Max)) => {
                let arg = argument(&call);
                let name = if kind == AggKind::Min { "min" } else { "max" };
                return format!(
                    "SELECT {}VALUE [{{\"item\": {call}, \"item2\": {{\"{name}\": {call}, \"count\": COUNT({arg})}}}}]{}",
                    top.map_or_else(String::new, |n| format!("TOP {n} ")),
                    self.source_clause(None)
                );
            }
            _ => call,
        };
        let mut out = "SELECT ".to_owned();
        if let Some(n) = top {
            out.push_str(&format!("TOP {n} "));
        }
        out.push_str(&format!("VALUE [{{\"item\": {partial}}}]"));
        out.push_str(&self.source_clause(None));
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn plan_of(text: &str) -> Plan {
        plan(text, &Params::new()).unwrap()
    }

    #[test]
    fn plans_carry_the_fields_the_sdks_read() {
        // The Python SDK's test_get_query_plan_through_gateway.
        let p = plan_of("Select top 10 value count(c.id) from c");
        assert_eq!(
            (p.top, p.aggregates.clone(), p.has_select_value),
            (Some(10), vec!["Count"], true)
        );
        assert_eq!(
            p.rewritten,
            r#"SELECT TOP 10 VALUE [{"item": count(c.id)}] FROM c"#
        );
        let p = plan_of("Select * from c order by c._ts offset 5 limit 10");
        assert_eq!(
            (p.offset, p.limit, p.order_by.clone()),
            (Some(5), Some(10), vec![false])
        );
        assert_eq!(
            p.rewritten,
            "SELECT c._rid, [{\"item\": c._ts}] AS orderByItems, c AS payload FROM c \
             WHERE ({documentdb-formattableorderbyquery-filter}) ORDER BY c._ts ASC OFFSET 0 LIMIT 15"
        );
        let p = plan_of("Select distinct value c.id from c order by c.id");
        assert_eq!((p.distinct, p.has_select_value), (Distinct::Ordered, true));
        assert!(p.needs_client());
    }

    #[test]
    fn queries_a_partition_answers_alone_need_no_plan() {
        for text in [
            "SELECT * FROM c WHERE c.a = 1",
            "SELECT c.a, COUNT(1) AS n FROM c GROUP BY c.a",
        ] {
            let p = plan_of(text);
            assert!(!p.needs_client(), "{text}");
        }
        assert_eq!(plan_of("SELECT TOP 3 * FROM c").rewritten, "");
    }

    #[test]
    fn parameters_resolve_counts() {
        let mut params = Params::new();
        params.insert("@n".into(), json!(4));
        let p = plan("SELECT TOP @n * FROM c ORDER BY c.a DESC", &params).unwrap();
        assert_eq!(p.top, Some(4));
        assert!(
            p.rewritten.starts_with("SELECT TOP 4 c._rid"),
            "{}",
            p.rewritten
        );
    }

    #[test]
    fn rewritten_queries_run_and_give_the_service_shapes() {
        let source = crate::query::tests::MemSource::single(&[
            json!({"id": "1", "n": 3, "_rid": "r1"}),
            json!({"id": "2", "n": 1, "_rid": "r2"}),
            json!({"id": "3", "n": 2, "_rid": "r3"}),
        ]);
        let run = |text: &str| {
            let p = plan_of(text);
            let parsed = crate::query::parse(
                &p.rewritten
                    .replace("{documentdb-formattableorderbyquery-filter}", "true"),
            )
            .unwrap();
            crate::query::execute(&parsed, &Params::new(), &source, &Default::default())
                .unwrap()
                .items
        };
        assert_eq!(
            run("SELECT c.id, c.n AS k FROM c WHERE c.n > 1 ORDER BY c.n DESC"),
            vec![
                json!({"_rid": "r1", "orderByItems": [{"item": 3}], "payload": {"id": "1", "k": 3}}),
                json!({"_rid": "r3", "orderByItems": [{"item": 2}], "payload": {"id": "3", "k": 2}}),
            ]
        );
        assert_eq!(
            run("SELECT VALUE AVG(c.n) FROM c"),
            vec![json!([{"item": {"sum": 6, "count": 3}}])]
        );
        assert_eq!(
            run("SELECT VALUE MAX(c.n) FROM c"),
            vec![json!([{"item": 3, "item2": {"max": 3, "count": 3}}])]
        );
    }
}
