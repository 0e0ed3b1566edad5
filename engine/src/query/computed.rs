//! Computed properties: values derived from a document by a container's
//! query, `{"name": "cp_lower", "query": "SELECT VALUE LOWER(c.name) FROM c"}`,
//! that queries read as if they were top-level properties (`WHERE
//! c.cp_lower = 'x'`), though documents never store them.
//!
//! A definition compiles once ([`ComputedProperties::compile`]) to the
//! expression of its `SELECT VALUE`. A query of the container is compiled
//! as usual, then every `c.name` whose `c` is the document itself (slot 0,
//! in a query whose FROM is the document rather than a path in it) and
//! whose name is a computed property is replaced by that expression
//! ([`parse_with`]). So computed properties work in WHERE, ORDER BY,
//! GROUP BY, aggregates, subqueries and explicit projections
//! (`SELECT c.cp_lower`), and `SELECT *` and `SELECT VALUE c` show the
//! document as stored, without them, as on Cosmos DB.
//!
//! The rules a definition follows (checked by [`ComputedProperties::compile`]):
//! at most [`MAX_COMPUTED_PROPERTIES`]; a name that is unique, not a system
//! property and not a path; a query of the form `SELECT VALUE <expr> FROM
//! <alias>` without WHERE, GROUP BY, ORDER BY, TOP, DISTINCT, OFFSET,
//! JOIN, a path in FROM, aggregates, parameters, subqueries, UDFs or the
//! clock (`GetCurrentDateTime` and its kin), nested at most
//! [`MAX_COMPUTED_DEPTH`] levels (so a query using it nests at most that
//! much deeper than [`crate::query::MAX_DEPTH`]). A computed property
//! cannot use another: `c.other_cp` inside a definition reads the document.

use crate::query::QueryError;
use crate::query::ast::{Expr, Query, Select};
use crate::query::functions::Func;
use crate::query::parser;

/// The most computed properties a container may have (Cosmos DB's limit).
pub const MAX_COMPUTED_PROPERTIES: usize = 20;

/// The deepest a computed property's expression may nest.
pub const MAX_COMPUTED_DEPTH: usize = 32;

/// Names a computed property cannot take: the system properties.
const SYSTEM_NAMES: &[&str] = &["id", "_rid", "_ts", "_etag", "_self", "_attachments"];

/// A container's computed properties, compiled.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ComputedProperties {
    props: Vec<(String, Expr)>,
}

impl ComputedProperties {
    /// Compiles `(name, query)` definitions.
    ///
    /// # Errors
    /// [`QueryError::Invalid`] naming the property and what is wrong with
    /// it (see the module docs for the rules); the query's own syntax
    /// error, prefixed with the property's name.
    pub fn compile<'a>(
        defs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<ComputedProperties, QueryError> {
        let mut props: Vec<(String, Expr)> = Vec::new();
        for (name, query) in defs {
            let bad = |what: String| {
                Err(QueryError::Invalid(format!(
                    "computed property '{name}': {what}"
                )))
            };
            if props.len() == MAX_COMPUTED_PROPERTIES {
                return Err(QueryError::Invalid(format!(
                    "a container can have at most {MAX_COMPUTED_PROPERTIES} computed properties"
                )));
            }
            if name.is_empty() {
                return bad("the name cannot be empty".to_owned());
            }
            if name.contains(['/', '.', '[', ']']) {
                return bad("the name must be a top-level property name, not a path".to_owned());
            }
            if SYSTEM_NAMES.contains(&name) {
                return bad(format!("the name cannot be the system property '{name}'"));
            }
            if props.iter().any(|(n, _)| n == name) {
                return bad("the name is defined twice".to_owned());
            }
            let q = parser::parse_query(query)
                .map_err(|e| QueryError::Invalid(format!("computed property '{name}': {e}")))?;
            let mut expr = match definition_expr(q) {
                Ok(expr) => expr,
                Err(what) => return bad(what.to_owned()),
            };
            if depth(&mut expr) > MAX_COMPUTED_DEPTH {
                return bad(format!(
                    "the query nests more than {MAX_COMPUTED_DEPTH} levels"
                ));
            }
            props.push((name.to_owned(), expr));
        }
        Ok(ComputedProperties { props })
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.props.is_empty()
    }

    fn get(&self, name: &str) -> Option<&Expr> {
        self.props.iter().find(|(n, _)| n == name).map(|(_, e)| e)
    }
}

/// The expression of a valid definition, or what is wrong with it.
fn definition_expr(q: Query) -> Result<Expr, &'static str> {
    const FORM: &str = "the query must be of the form 'SELECT VALUE <expression> FROM c'";
    let Some(from) = &q.from else {
        return Err(FORM);
    };
    if !from.root_path.is_empty() || !from.joins.is_empty() {
        return Err("the query's FROM must be the item itself, without a path or JOIN");
    }
    if q.filter.is_some() {
        return Err("the query cannot have a WHERE clause");
    }
    if !q.group_by.is_empty() || !q.aggregates.is_empty() {
        return Err("the query cannot aggregate or have a GROUP BY clause");
    }
    if !q.order_by.is_empty() {
        return Err("the query cannot have an ORDER BY clause");
    }
    if q.top.is_some() || q.offset_limit.is_some() || q.distinct {
        return Err("the query cannot have TOP, DISTINCT or OFFSET LIMIT");
    }
    if !q.params.is_empty() {
        return Err("the query cannot have parameters");
    }
    let Select::Value(mut expr) = q.select else {
        return Err(FORM);
    };
    let mut problem = None;
    visit(&mut expr, &mut |e| match e {
        Expr::Subquery(..) | Expr::RawSubquery(..) => {
            problem.get_or_insert("the query cannot have subqueries");
        }
        Expr::Udf(..) => {
            problem.get_or_insert("the query cannot call user-defined functions");
        }
        Expr::Call(
            Func::GetCurrentDateTime | Func::GetCurrentTimestamp | Func::GetCurrentTicks,
            _,
        ) => {
            problem.get_or_insert(
                "the query cannot read the clock (GetCurrentDateTime, GetCurrentTimestamp, GetCurrentTicks)",
            );
        }
        _ => {}
    });
    match problem {
        Some(p) => Err(p),
        None => Ok(expr),
    }
}

/// Calls `f` on `e` and every expression under it (not into subqueries).
fn visit(e: &mut Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    for c in parser::children_mut(e) {
        visit(c, f);
    }
}

/// How many levels `e` nests (the parser bounds it, so the recursion is).
fn depth(e: &mut Expr) -> usize {
    1 + parser::children_mut(e)
        .into_iter()
        .map(depth)
        .max()
        .unwrap_or(0)
}

/// Parses `sql` for a container with `computed` properties: [`crate::query::parse`],
/// then every reference to a computed property of the document replaced by
/// its expression.
///
/// # Errors
/// As [`crate::query::parse`].
pub fn parse_with(sql: &str, computed: &ComputedProperties) -> Result<Query, QueryError> {
    let mut q = parser::parse_query(sql)?;
    if !computed.is_empty() && q.from.as_ref().is_some_and(|f| f.root_path.is_empty()) {
        substitute_query(&mut q, computed);
    }
    Ok(q)
}

/// Substitutes in every expression of `q` (slot 0 is the document there and
/// in all its subqueries, whose slots follow the enclosing query's).
fn substitute_query(q: &mut Query, computed: &ComputedProperties) {
    let Query {
        select,
        from,
        filter,
        group_by,
        order_by,
        aggregates,
        ..
    } = q;
    let mut exprs: Vec<&mut Expr> = Vec::new();
    match select {
        Select::Star => {}
        Select::Value(e) => exprs.push(e),
        Select::List(items) => exprs.extend(items.iter_mut().map(|(_, e)| e)),
    }
    if let Some(from) = from {
        exprs.extend(from.joins.iter_mut());
    }
    exprs.extend(filter.iter_mut());
    exprs.extend(group_by.iter_mut());
    exprs.extend(order_by.iter_mut().map(|s| &mut s.expr));
    exprs.extend(aggregates.iter_mut().map(|a| &mut a.arg));
    for e in exprs {
        substitute(e, computed);
    }
}

fn substitute(e: &mut Expr, computed: &ComputedProperties) {
    if let Expr::Prop(base, name) = e
        && matches!(**base, Expr::Slot(0))
        && let Some(def) = computed.get(name)
    {
        *e = def.clone();
        return;
    }
    if let Expr::Subquery(_, q) = e {
        substitute_query(q, computed);
        return;
    }
    for c in parser::children_mut(e) {
        substitute(c, computed);
    }
}
