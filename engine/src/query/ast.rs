//! The parsed (and name-resolved) form of a query.
//!
//! The parser produces a [`Query`] whose expressions already refer to FROM
//! bindings by slot number ([`Expr::Slot`]) and whose aggregates have been
//! lifted out of the projection into [`Query::aggregates`] (the projection then
//! reads them through [`Expr::AggRef`]). Expression trees are at most
//! [`crate::query::parser::MAX_DEPTH`] levels deep, which bounds every
//! recursive walk over them (evaluation, cloning, dropping).

use serde_json::Value;

use crate::query::functions::Func;
use crate::range_index::{Comparison, Step};

/// A compiled query: immutable, cheap to share between threads and reusable
/// with different parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub(crate) text_hash: u64,
    pub(crate) distinct: bool,
    pub(crate) top: Option<Count>,
    pub(crate) select: Select,
    pub(crate) from: Option<From>,
    pub(crate) filter: Option<Expr>,
    pub(crate) group_by: Vec<Expr>,
    pub(crate) order_by: Vec<SortItem>,
    pub(crate) offset_limit: Option<(Count, Count)>,
    /// Aggregates lifted out of the projection, read back by [`Expr::AggRef`].
    pub(crate) aggregates: Vec<AggSpec>,
    /// Names of all parameters the query refers to (with the leading `@`).
    pub(crate) params: Vec<String>,
}

impl Query {
    /// True when rows are aggregated (aggregate functions or GROUP BY).
    pub(crate) fn is_aggregate(&self) -> bool {
        !self.aggregates.is_empty() || !self.group_by.is_empty()
    }

    /// The document property paths the WHERE clause pins to one value: the
    /// `c.a.b = literal-or-parameter` terms joined by AND at its top level
    /// (either side of the `=`), as property names from the document root.
    /// A gateway uses it to tell a query confined to one partition key
    /// from one that fans out.
    pub fn equality_paths(&self) -> Vec<Vec<String>> {
        self.equalities()
            .into_iter()
            .map(|(path, _)| path)
            .collect()
    }

    /// [`Query::equality_paths`] with the literal or parameter each path
    /// must equal: of the [`Query::conditions`] of a query without JOIN,
    /// the equalities at the top of its own WHERE on paths through objects.
    pub(crate) fn equalities(&self) -> Vec<(Vec<String>, &Expr)> {
        let mut found = Vec::new();
        if let (true, Some(filter)) = (
            self.from.as_ref().is_none_or(|f| f.joins.is_empty()),
            &self.filter,
        ) {
            collect_conditions(filter, &self.slot_paths(None), false, &mut found);
        }
        found
            .into_iter()
            .filter_map(|(path, condition)| match condition {
                Condition::Eq(constant) => Some((labels_of(path)?, constant)),
                _ => None,
            })
            .collect()
    }

    /// The conditions every row of the query satisfies on a path of the
    /// document (see [`Condition`]): those joined by AND at the top of
    /// WHERE, and at the top of the WHERE of an `EXISTS` subquery so
    /// joined (which holds only if a row of the subquery does), on a path
    /// from the document or from the element a JOIN or a subquery's FROM
    /// iterates over (`JOIN i IN c.items WHERE i.name = @n`: `/items/[]/name`).
    /// Such a path asks that some element satisfy the condition: a JOIN
    /// over anything but a non-empty array yields no rows. None below a
    /// FROM path (`FROM c.children ch`).
    pub(crate) fn conditions(&self) -> Vec<(Vec<Step>, Condition<'_>)> {
        let mut terms = Vec::new();
        if let Some(filter) = &self.filter {
            collect_conditions(filter, &self.slot_paths(None), true, &mut terms);
        }
        terms
    }

    /// The path from the document of each of the query's slots, given
    /// those of the enclosing query's (`outer`, `None` at the top): the
    /// document itself, the value at a FROM path (`None`, not followed),
    /// and the elements each JOIN iterates over.
    fn slot_paths(&self, outer: Option<&[Option<Vec<Step>>]>) -> Vec<Option<Vec<Step>>> {
        let mut slots = outer.unwrap_or_default().to_vec();
        let Some(from) = &self.from else {
            return slots;
        };
        match outer {
            None => slots.push(from.root_path.is_empty().then(Vec::new)),
            Some(_) => slots.resize(from.base, None),
        }
        for join in &from.joins {
            let elements = steps_of(join, &slots).map(|mut path| {
                path.push(Step::Elements);
                path
            });
            slots.push(elements);
        }
        slots
    }

    /// Whether a term WHERE joins by AND at its top is an `EXISTS`
    /// subquery, whose conditions [`Query::conditions`] adds to those of
    /// the query's own terms.
    pub(crate) fn exists_among_conjuncts(&self) -> bool {
        fn any(expr: &Expr) -> bool {
            match expr {
                Expr::Binary(BinOp::And, a, b) => any(a) || any(b),
                Expr::Subquery(SubKind::Exists, _) => true,
                _ => false,
            }
        }
        self.filter.as_ref().is_some_and(any)
    }

    /// How many terms WHERE joins by AND at its top (0 without WHERE).
    pub(crate) fn conjuncts(&self) -> usize {
        fn count(expr: &Expr) -> usize {
            match expr {
                Expr::Binary(BinOp::And, a, b) => count(a) + count(b),
                _ => 1,
            }
        }
        self.filter.as_ref().map_or(0, count)
    }

    /// Whether the query aggregates into an object, without `SELECT VALUE`
    /// or GROUP BY (`SELECT COUNT(1) FROM c`): Cosmos DB answers that
    /// within one logical partition, and its SDKs refuse it across
    /// partitions ("only supports `VALUE <AggregateFunc>`").
    pub fn aggregates_into_an_object(&self) -> bool {
        !self.aggregates.is_empty()
            && self.group_by.is_empty()
            && !matches!(self.select, Select::Value(_))
    }

    /// Whether the query is `SELECT VALUE <one aggregate>` without GROUP BY
    /// (`SELECT VALUE AVG(c.n) FROM c`): across partitions the SDKs compute
    /// it from each partition's partial result, and give `null` where one
    /// partition alone gives no row (the aggregate undefined).
    pub fn is_value_aggregate(&self) -> bool {
        self.group_by.is_empty() && matches!(self.select, Select::Value(Expr::AggRef(_)))
    }
}

/// A condition on a path of the document that a WHERE clause requires
/// ([`Query::conditions`]); the constants are literals or parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Condition<'q> {
    /// `path = constant`
    Eq(&'q Expr),
    /// `path <op> constant` (with `constant <op> path` turned around).
    Cmp(Comparison, &'q Expr),
    /// `path IN (constants)`
    In(&'q [Expr]),
    /// `path BETWEEN low AND high`
    Between(&'q Expr, &'q Expr),
    /// `STARTSWITH(path, constant)`, case-sensitive (no third argument,
    /// or a literal `false`).
    StartsWith(&'q Expr),
    /// `IS_DEFINED(path)`
    Defined,
    /// `ARRAY_CONTAINS(path, needle)`, or with a third argument, whether
    /// an object needle matches partially (a constant that is not a
    /// boolean makes the call undefined, so false); the needle is a
    /// constant, or with the third argument an object written out.
    Contains(&'q Expr, Option<&'q Expr>),
}

/// Adds to `out` the conditions `expr` requires of paths from the
/// document, its slots' paths being `slots` ([`Query::slot_paths`]); with
/// those of the `EXISTS` subqueries it requires when `subqueries`.
fn collect_conditions<'q>(
    expr: &'q Expr,
    slots: &[Option<Vec<Step>>],
    subqueries: bool,
    out: &mut Vec<(Vec<Step>, Condition<'q>)>,
) {
    let constant = |e: &Expr| matches!(e, Expr::Lit(_) | Expr::Param(_));
    let document_path = |e: &Expr| steps_of(e, slots).filter(|path| !path.is_empty());
    let term = match expr {
        Expr::Binary(BinOp::And, a, b) => {
            collect_conditions(a, slots, subqueries, out);
            collect_conditions(b, slots, subqueries, out);
            return;
        }
        // An aggregate without GROUP BY makes a row of no rows.
        Expr::Subquery(SubKind::Exists, sub) if subqueries && !sub.is_aggregate() => {
            if let Some(filter) = &sub.filter {
                collect_conditions(filter, &sub.slot_paths(Some(slots)), subqueries, out);
            }
            return;
        }
        Expr::Binary(op, a, b) => {
            let compare = |op: BinOp| match op {
                BinOp::Eq => None,
                BinOp::Lt => Some(Comparison::Less),
                BinOp::Le => Some(Comparison::AtMost),
                BinOp::Gt => Some(Comparison::Greater),
                BinOp::Ge => Some(Comparison::AtLeast),
                _ => None,
            };
            let flipped = match op {
                BinOp::Lt => BinOp::Gt,
                BinOp::Le => BinOp::Ge,
                BinOp::Gt => BinOp::Lt,
                BinOp::Ge => BinOp::Le,
                op => *op,
            };
            let (path, c, op) = match (&**a, &**b) {
                (p, c) if constant(c) => (p, c, *op),
                (c, p) if constant(c) => (p, c, flipped),
                _ => return,
            };
            let condition = match op {
                BinOp::Eq => Condition::Eq(c),
                op => match compare(op) {
                    Some(cmp) => Condition::Cmp(cmp, c),
                    None => return,
                },
            };
            document_path(path).map(|path| (path, condition))
        }
        Expr::In {
            expr,
            list,
            negated: false,
        } if list.iter().all(constant) => {
            document_path(expr).map(|path| (path, Condition::In(list)))
        }
        Expr::Between {
            expr,
            low,
            high,
            negated: false,
        } if constant(low) && constant(high) => {
            document_path(expr).map(|path| (path, Condition::Between(low, high)))
        }
        Expr::Call(Func::StartsWith, args) => match args.as_slice() {
            [p, c] if constant(c) => document_path(p).map(|path| (path, Condition::StartsWith(c))),
            [p, c, Expr::Lit(flag)] if constant(c) && **flag == Value::Bool(false) => {
                document_path(p).map(|path| (path, Condition::StartsWith(c)))
            }
            _ => None,
        },
        Expr::Call(Func::IsDefined, args) => match args.as_slice() {
            [p] => document_path(p).map(|path| (path, Condition::Defined)),
            _ => None,
        },
        Expr::Call(Func::ArrayContains, args) => match args.as_slice() {
            [p, c] if constant(c) => {
                document_path(p).map(|path| (path, Condition::Contains(c, None)))
            }
            [
                p,
                c @ (Expr::Lit(_) | Expr::Param(_) | Expr::Object(_)),
                flag,
            ] if constant(flag) => {
                document_path(p).map(|path| (path, Condition::Contains(c, Some(flag))))
            }
            _ => None,
        },
        _ => None,
    };
    out.extend(term);
}

impl Query {
    /// The ORDER BY items as property paths from the document root, each
    /// with whether it is descending, when every item is such a path
    /// (`ORDER BY c.a, c["b"].d DESC`); `None` when any is something else
    /// (a JOIN alias, an expression, a computed property) or the FROM
    /// clause starts below the root, and for no ORDER BY.
    pub(crate) fn order_by_paths(&self) -> Option<Vec<(Vec<String>, bool)>> {
        if self.order_by.is_empty()
            || self
                .from
                .as_ref()
                .is_some_and(|f| !f.root_path.is_empty() || f.base != 0)
        {
            return None;
        }
        self.order_by
            .iter()
            .map(|item| Some((document_path(&item.expr)?, item.descending)))
            .collect()
    }
}

/// The path from the document of `expr`, a property path from a slot
/// whose path `slots` has (`t.name` after `JOIN t IN c.items`:
/// `/items/[]/name`); `None` for anything else.
fn steps_of(expr: &Expr, slots: &[Option<Vec<Step>>]) -> Option<Vec<Step>> {
    match expr {
        Expr::Slot(slot) => slots.get(*slot)?.clone(),
        Expr::Prop(base, name) => {
            let mut path = steps_of(base, slots)?;
            path.push(Step::Label(name.clone()));
            Some(path)
        }
        _ => None,
    }
}

/// The labels of `path`, when it goes through objects only.
pub(crate) fn labels_of(path: Vec<Step>) -> Option<Vec<String>> {
    path.into_iter()
        .map(|step| match step {
            Step::Label(label) => Some(label),
            Step::Elements => None,
        })
        .collect()
}

/// `c.a.b` (or `c["a"]`) as `["a", "b"]`; `None` for anything else.
pub(crate) fn document_path(expr: &Expr) -> Option<Vec<String>> {
    match expr {
        Expr::Prop(base, name) => {
            let mut path = match &**base {
                Expr::Slot(0) => Vec::new(),
                other => document_path(other)?,
            };
            path.push(name.clone());
            Some(path)
        }
        _ => None,
    }
}

/// `TOP`, `OFFSET` and `LIMIT` operands: a literal or a parameter.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Count {
    Lit(u64),
    Param(String),
}

/// The SELECT clause.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Select {
    /// `SELECT *`: the binding in slot `star_slot` of the FROM clause.
    Star,
    /// `SELECT VALUE expr`.
    Value(Expr),
    /// `SELECT a AS x, b, ...`: an object with the properties in this order.
    List(Vec<(String, Expr)>),
}

/// The FROM clause: slot 0 is the document (or the value at `root_path` in
/// it), and each join adds one slot iterating over an array.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct From {
    /// Slots of the enclosing query's row (subqueries); 0 at top level.
    pub(crate) base: usize,
    /// Property path applied to the document to get slot 0 (`FROM c.children ch`).
    pub(crate) root_path: Vec<PathSeg>,
    /// Binding names, one per slot.
    pub(crate) names: Vec<String>,
    /// `JOIN x IN expr` sources for slots 1.., in order.
    pub(crate) joins: Vec<Expr>,
    /// The slot `SELECT *` returns (1 for `FROM x IN c.arr`, else 0).
    pub(crate) star_slot: usize,
    /// Whether `SELECT *` is allowed (no explicit JOIN).
    pub(crate) star_ok: bool,
}

/// A literal path step in FROM.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PathSeg {
    Prop(String),
    Index(usize),
}

/// One ORDER BY key.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SortItem {
    pub(crate) expr: Expr,
    pub(crate) descending: bool,
}

/// The aggregate functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AggKind {
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

/// An aggregate lifted out of the projection.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AggSpec {
    pub(crate) kind: AggKind,
    pub(crate) arg: Expr,
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnOp {
    Neg,
    Plus,
    BitNot,
    Not,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Concat,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    UShr,
}

/// A scalar expression.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Expr {
    /// A JSON literal (boxed to keep `Expr` small).
    Lit(Box<Value>),
    /// The `undefined` literal.
    Undefined,
    /// `@name`: index into [`Query::params`].
    Param(usize),
    /// An identifier before name resolution.
    Var(String),
    /// A FROM binding, after name resolution.
    Slot(usize),
    /// `base.name` or `base["name"]` with a literal name.
    Prop(Box<Expr>, String),
    /// `base[expr]`.
    Index(Box<Expr>, Box<Expr>),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    In {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        escape: Option<char>,
        negated: bool,
    },
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    Coalesce(Box<Expr>, Box<Expr>),
    Object(Vec<(String, Expr)>),
    Array(Vec<Expr>),
    Call(Func, Vec<Expr>),
    Udf(String, Vec<Expr>),
    /// An aggregate call as parsed; replaced by [`Expr::AggRef`] when compiled.
    Agg(AggKind, Box<Expr>),
    /// The value of aggregate number `n` of the current group.
    AggRef(usize),
    /// The value of GROUP BY key number `n` of the current group.
    GroupKey(usize),
    /// A subquery as parsed; compiled once the enclosing scope is known.
    RawSubquery(SubKind, Box<RawQuery>),
    /// A compiled (possibly correlated) subquery.
    Subquery(SubKind, Box<Query>),
}

/// How a subquery's rows become a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SubKind {
    /// `EXISTS(SELECT …)`: whether there is a row.
    Exists,
    /// `ARRAY(SELECT …)`: all rows as an array.
    Array,
    /// `(SELECT …)`: the first row, or undefined.
    Scalar,
}

/// A query as parsed, before name resolution.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RawQuery {
    pub(crate) distinct: bool,
    pub(crate) top: Option<Count>,
    pub(crate) select: RawSelect,
    pub(crate) from: Option<RawFrom>,
    pub(crate) filter: Option<Expr>,
    pub(crate) group_by: Vec<Expr>,
    pub(crate) order_by: Vec<SortItem>,
    pub(crate) offset_limit: Option<(Count, Count)>,
    pub(crate) spans: Spans,
}

/// Where a query's clauses are in its text, as character ranges
/// (`start..end`), for rewriting it into a query plan.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Spans {
    /// The projection's expressions (one for `SELECT VALUE`, none for `*`).
    pub(crate) select: Vec<(usize, usize)>,
    /// What follows FROM, joins included.
    pub(crate) from: Option<(usize, usize)>,
    /// The WHERE condition.
    pub(crate) filter: Option<(usize, usize)>,
    /// Each ORDER BY expression (without ASC or DESC).
    pub(crate) order_by: Vec<(usize, usize)>,
}
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RawSelect {
    Star,
    Value(Expr),
    List(Vec<(Option<String>, Expr)>),
}

/// The FROM clause as parsed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RawFrom {
    pub(crate) root_path: Vec<PathSeg>,
    pub(crate) names: Vec<String>,
    pub(crate) joins: Vec<Expr>,
    pub(crate) star_slot: usize,
    pub(crate) star_ok: bool,
}
