//! Query execution: scanning, joins, filtering, top-k ordering, aggregation,
//! DISTINCT, windows (TOP / OFFSET / LIMIT), paging and subqueries.
//!
//! Three modes (see [`Mode`]):
//!
//! * **Stream** (no ORDER BY, aggregates or DISTINCT): partitions in key order,
//!   documents in RID order, JOIN rows in cross-product order; stops as soon as
//!   the page is full and one more row is known to exist. The token names that
//!   next row's position, so resuming costs nothing extra.
//! * **Order** (ORDER BY): every partition is scanned; rows are kept in a
//!   bounded buffer of the best `k = rows still to skip + page + 1` candidates
//!   (an exactly sorted buffer for k ≤ 32, otherwise compacted with
//!   `select_nth_unstable_by` whenever it reaches `2k`), so a small TOP never
//!   sorts everything. For k ≤ 4096 only the sort keys are copied and the
//!   winners are re-read from the source at the end. Rows are totally ordered
//!   by (sort keys, partition key, RID, join ordinal), which is also the
//!   cross-partition merge order; the token holds the last row's full
//!   position and the next page takes rows strictly after it.
//! * **Index** (aggregates, GROUP BY, DISTINCT, no FROM): the complete result
//!   is computed (aggregates per partition, then merged: counts and sums add,
//!   AVG keeps sum and count, MIN/MAX keep the extreme), then sliced by row
//!   index. Each page re-runs the query; the token is the index.
//!
//! Values the engine copies and later drops itself are dismantled without
//! recursion ([`dismantle`]), so deeply nested documents cannot overflow the
//! stack here either.

use std::borrow::Cow;
use std::cell::{Cell, OnceCell};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use host_api::PartitionKey;
use serde_json::{Map, Value};

use crate::indexing::{DocumentPath, SortOrder};
use crate::query::ast::{AggKind, Count, Expr, PathSeg, Query, Select, SortItem, SubKind};
use crate::query::continuation::{Mode, Token};
use crate::query::eval::{Cx, Val, depth_exceeds, eval, lookup_param, number};
use crate::query::order::{
    Ordered, clone_capped, clone_value, cmp_opt, cmp_values, dismantle, own, own_capped, type_rank,
};
use crate::query::parser::fnv;
use crate::query::prefilter::index_terms;
use crate::query::{Needles, Params, QueryError, QueryOptions, QueryPage, QueryStats, Source};
use crate::range_index::{IndexTerm, WalkOrder, fixed_index, prefixed_index};
use crate::storage::IndexWalk;

/// Where a row comes from.
#[derive(Clone, Copy)]
struct Pos<'p> {
    pk: &'p PartitionKey,
    pk_index: usize,
    rid: u64,
    combo: u64,
}

/// Receives the rows of one document: `(join ordinal, bindings)`.
type JoinSink<'s> = dyn FnMut(u64, &[&Value]) -> Result<ControlFlow<()>, QueryError> + 's;

type RowSink<'s> = dyn FnMut(Pos<'_>, &[&Value]) -> Result<ControlFlow<()>, QueryError> + 's;

/// Shared state of one execution.
struct Exec<'q> {
    q: &'q Query,
    cx: Cx<'q>,
    partitions: Vec<PartitionKey>,
    /// Per partition, the rids of the only documents that may have rows
    /// in the result, ascending, when a range index named them; the
    /// others are not read (nor counted as scanned).
    only: Option<Vec<Vec<u64>>>,
    /// Text every document with a row in the result contains.
    needles: Needles,
    /// The aggregates, when the index answered them (see
    /// `counts_from_index` and `extreme_from_index`): nothing is read.
    answered: Cell<Option<Vec<Acc>>>,
    /// The index walk whose entries this execution reads, if any.
    walk: Option<WalkOrder<'q>>,
    /// After ORDER BY in a walk: the key of the last row it kept (the row
    /// after the page), when it found as many rows as it needed.
    frontier: Cell<Option<Vec<u8>>>,
    stats: Cell<QueryStats>,
}

/// Something that yields an optional `&Value` sort key.
trait KeyRef {
    fn key(&self) -> Option<&Value>;
}

impl KeyRef for Option<Value> {
    fn key(&self) -> Option<&Value> {
        self.as_ref()
    }
}

impl KeyRef for Val<'_> {
    fn key(&self) -> Option<&Value> {
        self.as_deref()
    }
}

/// The total row order of ORDER BY: keys, then partition, RID and join row
/// (ascending, or descending when the first key is descending).
fn cmp_rows<A: KeyRef, B: KeyRef>(
    items: &[SortItem],
    ak: &[A],
    ap: (&PartitionKey, u64, u64),
    bk: &[B],
    bp: (&PartitionKey, u64, u64),
) -> Ordering {
    for ((item, a), b) in items.iter().zip(ak).zip(bk) {
        let o = cmp_opt(a.key(), b.key());
        if o != Ordering::Equal {
            return if item.descending { o.reverse() } else { o };
        }
    }
    let o = ap.0.cmp(bp.0).then(ap.1.cmp(&bp.1)).then(ap.2.cmp(&bp.2));
    if items.first().is_some_and(|i| i.descending) {
        o.reverse()
    } else {
        o
    }
}

/// Owned sort keys; a single key is stored inline (no allocation).
enum Keys {
    One([Option<Value>; 1]),
    Many(Vec<Option<Value>>),
}

impl Keys {
    fn new(keys: &mut [Val<'_>]) -> Keys {
        if let [k] = keys {
            return Keys::One([k.take().map(own)]);
        }
        Keys::Many(keys.iter_mut().map(|k| k.take().map(own)).collect())
    }

    fn as_slice(&self) -> &[Option<Value>] {
        match self {
            Keys::One(k) => k,
            Keys::Many(k) => k,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [Option<Value>] {
        match self {
            Keys::One(k) => k,
            Keys::Many(k) => k,
        }
    }
}

/// An ORDER BY candidate row.
struct Cand {
    keys: Keys,
    pk_index: usize,
    rid: u64,
    combo: u64,
    /// The projected row; None until re-read when deferred.
    item: Option<Value>,
}

impl Drop for Cand {
    fn drop(&mut self) {
        dismantle(self.item.take().unwrap_or_default());
        for k in self.keys.as_mut_slice().iter_mut().filter_map(Option::take) {
            dismantle(k);
        }
    }
}

/// An aggregate accumulator; partial results merge.
#[derive(Clone, Debug)]
enum Acc {
    Count(u64),
    Sum { sum: f64, ok: bool },
    Avg { sum: f64, count: u64, ok: bool },
    Min { best: Option<Value>, ok: bool },
    Max { best: Option<Value>, ok: bool },
}

impl Acc {
    fn new(kind: AggKind) -> Acc {
        match kind {
            AggKind::Count => Acc::Count(0),
            AggKind::Sum => Acc::Sum { sum: 0.0, ok: true },
            AggKind::Avg => Acc::Avg {
                sum: 0.0,
                count: 0,
                ok: true,
            },
            AggKind::Min => Acc::Min {
                best: None,
                ok: true,
            },
            AggKind::Max => Acc::Max {
                best: None,
                ok: true,
            },
        }
    }

    fn add(&mut self, v: Option<&Value>) {
        let Some(v) = v else { return };
        match self {
            Acc::Count(n) => *n += 1,
            Acc::Sum { sum, ok } => match v.as_f64() {
                Some(x) if v.is_number() => *sum += x,
                _ => *ok = false,
            },
            Acc::Avg { sum, count, ok } => match v.as_f64() {
                Some(x) if v.is_number() => {
                    *sum += x;
                    *count += 1;
                }
                _ => *ok = false,
            },
            Acc::Min { best, ok } => keep_extreme(best, ok, v, Ordering::Less),
            Acc::Max { best, ok } => keep_extreme(best, ok, v, Ordering::Greater),
        }
    }

    fn merge(&mut self, other: Acc) {
        match (self, other) {
            (Acc::Count(a), Acc::Count(b)) => *a += b,
            (Acc::Sum { sum, ok }, Acc::Sum { sum: s, ok: o }) => {
                *sum += s;
                *ok &= o;
            }
            (
                Acc::Avg { sum, count, ok },
                Acc::Avg {
                    sum: s,
                    count: c,
                    ok: o,
                },
            ) => {
                *sum += s;
                *count += c;
                *ok &= o;
            }
            (Acc::Min { best, ok }, Acc::Min { best: b, ok: o }) => {
                *ok &= o;
                if let Some(b) = b {
                    keep_extreme(best, ok, &b, Ordering::Less);
                }
            }
            (Acc::Max { best, ok }, Acc::Max { best: b, ok: o }) => {
                *ok &= o;
                if let Some(b) = b {
                    keep_extreme(best, ok, &b, Ordering::Greater);
                }
            }
            _ => {}
        }
    }

    fn finish(self) -> Option<Value> {
        match self {
            Acc::Count(n) => Some(Value::from(n)),
            Acc::Sum { sum, ok } => ok.then(|| number(sum)).flatten(),
            Acc::Avg { sum, count, ok } => (ok && count > 0)
                .then(|| number(sum / count as f64))
                .flatten(),
            Acc::Min { best, ok } | Acc::Max { best, ok } => best.filter(|_| ok),
        }
    }
}

/// MIN/MAX step: objects and arrays poison the result.
fn keep_extreme(best: &mut Option<Value>, ok: &mut bool, v: &Value, want: Ordering) {
    if type_rank(v) >= 5 {
        *ok = false;
    } else if best.as_ref().is_none_or(|b| cmp_values(v, b) == want) {
        *best = Some(clone_value(v));
    }
}

fn count_value(c: &Option<Count>, cx: &Cx<'_>, what: &str) -> Result<Option<u64>, QueryError> {
    match c {
        None => Ok(None),
        Some(Count::Lit(n)) => Ok(Some(*n)),
        Some(Count::Param(p)) => match cx.param(p) {
            Some(v) => match v.as_f64() {
                Some(n) if n >= 0.0 && n.fract() == 0.0 => Ok(Some(n.min(u64::MAX as f64) as u64)),
                _ => Err(QueryError::Invalid(format!(
                    "{what} parameter {p} must be a non-negative integer"
                ))),
            },
            None => Err(QueryError::MissingParameter(p.clone())),
        },
    }
}

/// The result rows `[lo, hi)` that TOP and OFFSET/LIMIT keep.
fn window(q: &Query, cx: &Cx<'_>) -> Result<(u64, u64), QueryError> {
    let top = count_value(&q.top, cx, "top")?;
    let (offset, limit) = match &q.offset_limit {
        None => (None, None),
        Some((o, l)) => (
            count_value(&Some(o.clone()), cx, "offset")?,
            count_value(&Some(l.clone()), cx, "limit")?,
        ),
    };
    let lo = offset.unwrap_or(0);
    let hi = top
        .unwrap_or(u64::MAX)
        .min(lo.saturating_add(limit.unwrap_or(u64::MAX)));
    Ok((lo, hi))
}

/// Whether a row passes WHERE (exactly `true`).
fn passes(q: &Query, cx: &Cx<'_>, row: &[&Value]) -> Result<bool, QueryError> {
    match &q.filter {
        None => Ok(true),
        Some(f) => Ok(matches!(
            eval(f, cx, row)?.as_deref(),
            Some(Value::Bool(true))
        )),
    }
}

/// Whether a row of an aggregate query takes part despite its ORDER BY:
/// with a single sort key, only rows where it is defined do (as ORDER BY
/// keeps them without aggregates).
fn sort_key_defined(q: &Query, cx: &Cx<'_>, row: &[&Value]) -> Result<bool, QueryError> {
    match q.order_by.as_slice() {
        [single] => Ok(eval(&single.expr, cx, row)?.is_some()),
        _ => Ok(true),
    }
}

/// Runs a (correlated) subquery for one row of the enclosing query: its
/// FROM iterates over values of `row`. The rows are computed in memory
/// (values copied with [`own_capped`]); EXISTS stops at the first row when
/// nothing needs ordering.
pub(crate) fn subquery(
    kind: SubKind,
    q: &Query,
    cx: &Cx<'_>,
    row: &[&Value],
) -> Result<Option<Value>, QueryError> {
    let (lo, hi) = window(q, cx)?;
    let wanted = if kind == SubKind::Exists {
        hi.min(lo.saturating_add(1))
    } else {
        hi
    };
    let mut rows: Vec<(Vec<Option<Value>>, Value)> = Vec::new();
    if q.is_aggregate() {
        if !q.group_by.is_empty() {
            return Err(QueryError::Invalid(
                "group by is not supported in subqueries".to_owned(),
            ));
        }
        let mut accs: Vec<Acc> = q.aggregates.iter().map(|a| Acc::new(a.kind)).collect();
        let mut sink = |_: u64, r: &[&Value]| -> Result<ControlFlow<()>, QueryError> {
            if passes(q, cx, r)? && sort_key_defined(q, cx, r)? {
                for (acc, spec) in accs.iter_mut().zip(&q.aggregates) {
                    acc.add(eval(&spec.arg, cx, r)?.as_deref());
                }
            }
            Ok(ControlFlow::Continue(()))
        };
        sub_rows(q, cx, row, &mut sink)?;
        let aggs: Vec<Option<Value>> = accs.into_iter().map(Acc::finish).collect();
        let gcx = Cx {
            aggs: &aggs,
            groups: &[],
            ..*cx
        };
        if let Some(v) = project(&q.select, q, &gcx, row)?.and_then(own_capped) {
            rows.push((Vec::new(), v));
        }
    } else {
        let ordered = !q.order_by.is_empty();
        let early = !ordered && !q.distinct;
        let single = q.order_by.len() == 1;
        let mut sink = |_: u64, r: &[&Value]| -> Result<ControlFlow<()>, QueryError> {
            if !passes(q, cx, r)? {
                return Ok(ControlFlow::Continue(()));
            }
            let mut keys = Vec::with_capacity(q.order_by.len());
            for s in &q.order_by {
                keys.push(eval(&s.expr, cx, r)?.and_then(own_capped));
            }
            if single && keys[0].is_none() {
                return Ok(ControlFlow::Continue(()));
            }
            if let Some(v) = project(&q.select, q, cx, r)?.and_then(own_capped) {
                rows.push((keys, v));
            }
            let done = early && rows.len() as u64 >= wanted;
            Ok(if done {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        };
        sub_rows(q, cx, row, &mut sink)?;
        if ordered {
            // Stable: ties keep their enumeration order.
            rows.sort_by(|a, b| {
                for ((item, x), y) in q.order_by.iter().zip(&a.0).zip(&b.0) {
                    let o = cmp_opt(x.as_ref(), y.as_ref());
                    if o != Ordering::Equal {
                        return if item.descending { o.reverse() } else { o };
                    }
                }
                Ordering::Equal
            });
        }
    }
    let mut items: Vec<Value> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut index = 0u64;
    for (_, v) in rows {
        if q.distinct && !seen.insert(Ordered(vec![Some(clone_value(&v))])) {
            continue;
        }
        if index >= lo && index < wanted {
            items.push(v);
        }
        index += 1;
    }
    Ok(match kind {
        SubKind::Exists => Some(Value::Bool(!items.is_empty())),
        SubKind::Array => Some(Value::Array(items)),
        SubKind::Scalar => items.into_iter().next(),
    })
}

/// Feeds a subquery's FROM rows (or the enclosing row itself, without FROM).
fn sub_rows(
    q: &Query,
    cx: &Cx<'_>,
    row: &[&Value],
    sink: &mut JoinSink<'_>,
) -> Result<(), QueryError> {
    match &q.from {
        None => sink(0, row).map(|_| ()),
        Some(from) => {
            let mut combo = 0;
            join_rows(&from.joins, cx, row, 0, 0, &mut combo, sink).map(|_| ())
        }
    }
}

/// Runs one page of `q`.
pub(crate) fn execute(
    q: &Query,
    params: &Params,
    source: &dyn Source,
    options: &QueryOptions<'_>,
) -> Result<QueryPage, QueryError> {
    execute_with(q, params, source, options, false)
}

/// [`execute`]; with `any_tie`, rows whose ORDER BY values equal may come
/// in any order (so an index walk need not read every row tied with the
/// page's last): for a value alone, as MIN and MAX want it.
fn execute_with(
    q: &Query,
    params: &Params,
    source: &dyn Source,
    options: &QueryOptions<'_>,
    any_tie: bool,
) -> Result<QueryPage, QueryError> {
    let bound: Vec<Option<&Value>> = q.params.iter().map(|p| lookup_param(params, p)).collect();
    let now = OnceCell::new();
    let cx = Cx {
        params,
        bound: &bound,
        udf: options.udf,
        aggs: &[],
        groups: &[],
        now: &now,
    };
    for p in &q.params {
        if cx.param(p).is_none() {
            return Err(QueryError::MissingParameter(p.clone()));
        }
    }
    let (lo, hi) = window(q, &cx)?;
    let page = options.max_item_count.map_or(u64::MAX, |n| n.max(1) as u64);
    let mode = if q.from.is_none() || q.is_aggregate() || q.distinct {
        Mode::Index
    } else if q.order_by.is_empty() {
        Mode::Stream
    } else {
        Mode::Order
    };
    let token = match options.continuation {
        Some(text) => Some(Token::decode(
            text,
            mode,
            query_hash(q, params),
            q.order_by.len(),
        )?),
        None => None,
    };
    let terms = index_terms(q, &bound);
    let exec = |partitions: Vec<PartitionKey>, only: Option<Vec<Vec<u64>>>, walk| Exec {
        q,
        cx,
        partitions,
        only,
        needles: Needles::of(q, &bound),
        stats: Cell::new(QueryStats::default()),
        answered: Cell::new(None),
        walk,
        frontier: Cell::new(None),
    };
    // An ORDER BY on one path, or on the paths of a composite index,
    // walks the index in its order, reading the documents of the first
    // entries only: as many as make the page certain (its rows, and the
    // one after, all come before every entry not read), four times more
    // each time they do not.
    let mut spent = QueryStats {
        physical_partitions: source.physical_partitions(),
        ..QueryStats::default()
    };
    let order_paths = match mode {
        Mode::Order => q.order_by_paths(),
        _ => None,
    };
    let policy = order_paths
        .as_ref()
        .filter(|paths| paths.len() > 1 || !terms.is_empty())
        .and_then(|_| source.indexing_policy());
    // With a composite index whose other paths the terms fix, a one-path
    // ORDER BY walks only the entries of the documents they name.
    let prefixed = match (order_paths.as_deref(), policy.as_deref()) {
        (Some([(path, _)]), Some(policy)) => prefixed_index(policy, path, &terms),
        _ => None,
    };
    let walked = order_paths.as_deref().and_then(|paths| match paths {
        [(_, descending)] if let Some((index, prefix)) = &prefixed => {
            let wanted = match descending {
                true => SortOrder::Descending,
                false => SortOrder::Ascending,
            };
            let backwards = index.last().is_some_and(|last| last.order != wanted);
            Some((WalkOrder::Prefixed { index, prefix }, backwards))
        }
        [(path, descending)] => Some((WalkOrder::Path(path), *descending)),
        items => {
            let items: Vec<(DocumentPath, SortOrder)> = items
                .iter()
                .map(|(path, descending)| {
                    let order = match descending {
                        true => SortOrder::Descending,
                        false => SortOrder::Ascending,
                    };
                    (DocumentPath::of_labels(path.iter().cloned()), order)
                })
                .collect();
            let index = policy.as_deref()?.composite_index_for(&items)?;
            // Walked backwards when its directions are the reverse.
            let backwards = index[0].order != items[0].1;
            Some((WalkOrder::Composite(index), backwards))
        }
    });
    if let Some((order, descending)) = walked
        && q.from.as_ref().is_some_and(|f| f.joins.is_empty())
        && token.as_ref().map_or(0, |t| t.index) < hi
    {
        let descending = &descending;
        let from = token.as_ref().and_then(|t| {
            let values: Vec<Option<&Value>> = t.keys.iter().map(Option::as_ref).collect();
            order.key_of_values(&values)
        });
        // Twice the rows the page needs (see `order`), to leave room for
        // documents the rest of WHERE turns down.
        let start = token.as_ref().map_or(0, |t| t.index);
        let need = (hi.min(start.max(lo).saturating_add(page)) - start).saturating_add(1);
        // As many as it needs when the walk's prefix implies all of WHERE
        // (no document read is turned down), and the entry it starts at
        // (the last page's last row).
        let implied = matches!(order, WalkOrder::Prefixed { index, .. }
            if q.conjuncts() == terms.len()
                && !q.exists_among_conjuncts()
                && terms.iter().all(|t| crate::range_index::fixes(index, t)));
        let wanted = match implied {
            true => need.saturating_add(1),
            false => need.saturating_mul(2),
        };
        let mut limit = usize::try_from(wanted).unwrap_or(usize::MAX).max(8);
        loop {
            let walk = IndexWalk {
                order,
                descending: *descending,
                from: from.as_deref(),
                terms: &terms,
                limit,
            };
            let Some((entries, through)) = source.index_walk(&walk) else {
                break;
            };
            spent.index_entries += entries.len() as u64;
            spent.index_used = true;
            let (partitions, only) = by_partition(entries);
            let ex = exec(partitions, Some(only), Some(order));
            let (items, next) = ex.order(source, token.as_ref(), lo, hi, page)?;
            add(&mut spent, ex.stats.get());
            let certain = match (&through, ex.frontier.take()) {
                (None, _) => true,
                (Some(through), Some(worst)) if any_tie && worst == *through => true,
                (Some(through), Some(worst)) if *descending => worst > *through,
                (Some(through), Some(worst)) => worst < *through,
                (Some(_), None) => false,
            };
            if certain {
                spent.rows_per_partition = rows_per_partition(start, lo, hi, page, items.len());
                return finish(q, params, items, next, spent);
            }
            for item in items {
                dismantle(item);
            }
            limit = limit.saturating_mul(4);
        }
    }
    // MIN or MAX of an indexed path: the last row of an ORDER BY on it
    // (an array or object there makes it undefined), then the first.
    if token.is_none()
        && let Some((arg, max)) = extreme_of(q, source)
        && let Some((value, stats)) = extreme_from_index(q, params, source, options, arg, max)?
    {
        let ex = exec(Vec::new(), None, None);
        let acc = match max {
            true => Acc::Max {
                best: value,
                ok: true,
            },
            false => Acc::Min {
                best: value,
                ok: true,
            },
        };
        ex.answered.set(Some(vec![acc]));
        let mut items = ex.materialize(source)?;
        // TOP still applies to the aggregate's row.
        items.truncate(usize::try_from(hi).unwrap_or(usize::MAX));
        add(&mut spent, stats);
        spent.index_entries += stats.index_entries;
        spent.index_used = true;
        return finish(q, params, items, None, spent);
    }
    // A composite index whose every path the terms fix names the
    // documents at once; else the range index, term by term.
    let fixed = match terms.is_empty() || q.from.is_none() {
        true => None,
        false => source.indexing_policy().and_then(|policy| {
            let (index, prefix) = fixed_index(&policy, &terms)?;
            let walk = IndexWalk {
                order: WalkOrder::Prefixed {
                    index,
                    prefix: &prefix,
                },
                descending: false,
                from: None,
                terms: &terms,
                limit: usize::MAX,
            };
            source.index_walk(&walk).map(|(entries, _)| entries)
        }),
    };
    // With an index, the partitions and documents it names; else every
    // partition, every document.
    let candidates = match terms.is_empty() || q.from.is_none() {
        true => None,
        false => fixed.or_else(|| source.index_candidates(&terms)),
    };
    let ex = match candidates {
        Some(candidates) => {
            spent.index_entries += candidates.len() as u64;
            spent.index_used = true;
            let counted = counts_from_index(q, &terms, source).then(|| {
                let n = candidates.len() as u64;
                q.aggregates.iter().map(|_| Acc::Count(n)).collect()
            });
            let (partitions, only) = by_partition(candidates);
            Exec {
                answered: Cell::new(counted),
                ..exec(partitions, Some(only), None)
            }
        }
        None => {
            let mut partitions = source.partitions();
            partitions.sort();
            partitions.dedup();
            exec(partitions, None, None)
        }
    };
    let (items, next) = match mode {
        Mode::Stream => ex.stream(source, token.as_ref(), lo, hi, page)?,
        Mode::Order => {
            let start = token.as_ref().map_or(0, |t| t.index);
            let (items, next) = ex.order(source, token.as_ref(), lo, hi, page)?;
            spent.rows_per_partition = rows_per_partition(start, lo, hi, page, items.len());
            (items, next)
        }
        Mode::Index => {
            let all = ex.materialize(source)?;
            let start = token.as_ref().map_or(0, |t| t.index);
            let end = hi.min(all.len() as u64);
            let from = start.max(lo);
            let to = end.min(from.saturating_add(page));
            let mut items = Vec::new();
            for (i, v) in all.into_iter().enumerate() {
                if (from..to).contains(&(i as u64)) {
                    items.push(v);
                } else {
                    dismantle(v);
                }
            }
            let next = (to < end).then(|| Token::index(0, to));
            (items, next)
        }
    };
    add(&mut spent, ex.stats.get());
    finish(q, params, items, next, spent)
}

/// Whether the documents a range index names for `terms` are exactly
/// the rows of `q` and `q` only counts them (`SELECT VALUE COUNT(1) FROM c
/// WHERE c.type = 'post'`), so that their number is the answer: each term
/// of its WHERE became one of `terms`, on a path the policy indexes (an
/// index read leaves the others out, offering more documents) through
/// objects only (a term on array elements is a superset, and a JOIN
/// makes rows of elements), none is an `EXISTS` (whose terms ask less
/// than it does), and the source hides none of them.
fn counts_from_index(q: &Query, terms: &[IndexTerm], source: &dyn Source) -> bool {
    let counts = q.group_by.is_empty()
        && q.from.as_ref().is_some_and(|f| f.joins.is_empty())
        && !q.distinct
        && q.order_by.is_empty()
        && !q.aggregates.is_empty()
        && q.aggregates
            .iter()
            .all(|a| a.kind == AggKind::Count && matches!(a.arg, Expr::Lit(_)))
        && q.conjuncts() == terms.len()
        && !q.exists_among_conjuncts();
    counts
        && !source.hides_documents()
        && source.indexing_policy().is_some_and(|policy| {
            terms
                .iter()
                .all(|t| !t.through_arrays() && t.indexed_by(&policy))
        })
}

/// The argument of `q`'s one aggregate and whether it is MAX, when `q`
/// is a MIN or MAX of a path of the document the index of `source` walks
/// (`SELECT VALUE MIN(c.n) FROM c WHERE …`), with nothing that groups,
/// orders or joins its rows.
fn extreme_of<'q>(q: &'q Query, source: &dyn Source) -> Option<(&'q Expr, bool)> {
    let [aggregate] = q.aggregates.as_slice() else {
        return None;
    };
    let max = match aggregate.kind {
        AggKind::Min => false,
        AggKind::Max => true,
        _ => return None,
    };
    let plain = q.group_by.is_empty()
        && !q.distinct
        && q.order_by.is_empty()
        && q.offset_limit.is_none()
        && q.from
            .as_ref()
            .is_some_and(|f| f.base == 0 && f.root_path.is_empty() && f.joins.is_empty());
    let path = crate::query::ast::document_path(&aggregate.arg)?;
    let policy = source.indexing_policy()?;
    (plain && WalkOrder::Path(&path).path_key(&policy).is_some()).then_some((&aggregate.arg, max))
}

/// MIN (or MAX) of `arg` over the rows of `q`, from two ORDER BY queries
/// on it with TOP 1, which walk the index: the highest value, undefined
/// when it is an array or an object (they make MIN and MAX undefined);
/// else, for MIN, the lowest. With what they cost; `None` when the index
/// did not answer (it is being built), for the caller to aggregate.
fn extreme_from_index(
    q: &Query,
    params: &Params,
    source: &dyn Source,
    options: &QueryOptions<'_>,
    arg: &Expr,
    max: bool,
) -> Result<Option<(Option<Value>, QueryStats)>, QueryError> {
    let top = |descending| Query {
        select: Select::Value(arg.clone()),
        order_by: vec![SortItem {
            expr: arg.clone(),
            descending,
        }],
        top: Some(Count::Lit(1)),
        aggregates: Vec::new(),
        ..q.clone()
    };
    let options = QueryOptions {
        continuation: None,
        max_item_count: None,
        ..*options
    };
    let highest = execute_with(&top(true), params, source, &options, true)?;
    if !highest.stats.index_used {
        return Ok(None);
    }
    let mut stats = highest.stats;
    let value = highest.items.into_iter().next();
    if value.as_ref().is_some_and(|v| type_rank(v) >= 5) || max {
        let value = value.filter(|v| type_rank(v) < 5);
        return Ok(Some((value, stats)));
    }
    let lowest = execute_with(&top(false), params, source, &options, true)?;
    add(&mut stats, lowest.stats);
    stats.index_entries += lowest.stats.index_entries;
    Ok(Some((lowest.items.into_iter().next(), stats)))
}

/// Adds the cost of `more` to `spent`.
fn add(spent: &mut QueryStats, more: QueryStats) {
    spent.docs_scanned += more.docs_scanned;
    spent.bytes_read += more.bytes_read;
}

/// [`QueryStats::rows_per_partition`] of an ORDER BY page that started at
/// row `start` of the window `lo..hi`, could hold `page` rows and returned
/// `returned`: the rows up to its end when it filled itself, else 0.
fn rows_per_partition(start: u64, lo: u64, hi: u64, page: u64, returned: usize) -> u64 {
    let from = start.max(lo);
    let end = hi.min(from.saturating_add(page));
    let filled = returned > 0 && returned as u64 == end.saturating_sub(from);
    match filled {
        true => end - start,
        false => 0,
    }
}

/// Documents named by (partition, rid) as the partitions in order, each
/// with its rids in order.
fn by_partition(mut named: Vec<(PartitionKey, u64)>) -> (Vec<PartitionKey>, Vec<Vec<u64>>) {
    named.sort();
    named.dedup();
    let mut partitions: Vec<PartitionKey> = Vec::new();
    let mut rids: Vec<Vec<u64>> = Vec::new();
    for (pk, rid) in named {
        if partitions.last() != Some(&pk) {
            partitions.push(pk);
            rids.push(Vec::new());
        }
        rids.last_mut()
            .expect("pushed with its partition")
            .push(rid);
    }
    (partitions, rids)
}

/// The page of `items`, continuing at `next`, at the cost `stats`.
fn finish(
    q: &Query,
    params: &Params,
    items: Vec<Value>,
    next: Option<Token>,
    mut stats: QueryStats,
) -> Result<QueryPage, QueryError> {
    stats.docs_returned = items.len() as u64;
    let continuation = match next {
        None => None,
        Some(mut t) => {
            t.hash = query_hash(q, params);
            if t.keys.iter().flatten().any(|k| depth_exceeds(k, 100)) {
                return Err(QueryError::Invalid(
                    "order by value nested too deeply to page".to_owned(),
                ));
            }
            Some(t.encode())
        }
    };
    Ok(QueryPage {
        items,
        continuation,
        stats,
    })
}

/// Hash of the query text and parameter values, stored in tokens.
fn query_hash(q: &Query, params: &Params) -> u64 {
    let mut text = format!("{:016x}", q.text_hash);
    for p in &q.params {
        text.push('\u{0}');
        text.push_str(p);
        if let Some(v) = lookup_param(params, p)
            && !depth_exceeds(v, 100)
        {
            text.push_str(&v.to_string());
        }
    }
    fnv(&text)
}

impl<'q> Exec<'q> {
    /// Scans documents from `start` (a stream token's position) and feeds
    /// each FROM/JOIN row to `sink` until it breaks.
    fn scan(
        &self,
        source: &dyn Source,
        start: Option<&Token>,
        sink: &mut RowSink<'_>,
    ) -> Result<(), QueryError> {
        let Some(from) = &self.q.from else {
            return Ok(());
        };
        let cx = self.cx;
        let mut stats = self.stats.get();
        let result = self.scan_partitions(source, start, from, &cx, &mut stats, sink);
        self.stats.set(stats);
        result
    }

    fn scan_partitions(
        &self,
        source: &dyn Source,
        start: Option<&Token>,
        from: &crate::query::ast::From,
        cx: &Cx<'_>,
        stats: &mut QueryStats,
        sink: &mut RowSink<'_>,
    ) -> Result<(), QueryError> {
        for (pk_index, pk) in self.partitions.iter().enumerate() {
            let (after, skip_at) = match start.and_then(|t| t.pk.as_ref().map(|p| (p, t))) {
                Some((tpk, _)) if pk < tpk => continue,
                Some((tpk, t)) if pk == tpk => (t.rid.checked_sub(1), Some((t.rid, t.combo))),
                _ => (None, None),
            };
            let mut error = None;
            let mut stop = false;
            let only = self.only.as_ref().map(|only| only[pk_index].as_slice());
            // Documents the source passed over, unparsed, for lacking a
            // needle: scanned all the same (unless the index named the
            // documents to read: it did not name these).
            let (mut skipped_docs, mut skipped_bytes) = (0, 0);
            let mut skipped = |size: usize| {
                skipped_docs += 1;
                skipped_bytes += size as u64;
            };
            let mut read = |rid: u64, doc: &Value, size: usize| {
                stats.docs_scanned += 1;
                stats.bytes_read += size as u64;
                let skip = match skip_at {
                    Some((r, c)) if r == rid => c,
                    _ => 0,
                };
                let Some(root) = root_of(&from.root_path, doc) else {
                    return ControlFlow::Continue(());
                };
                let mut combo = 0u64;
                let mut row_sink = |c: u64, row: &[&Value]| {
                    sink(
                        Pos {
                            pk,
                            pk_index,
                            rid,
                            combo: c,
                        },
                        row,
                    )
                };
                match join_rows(&from.joins, cx, &[root], 0, skip, &mut combo, &mut row_sink) {
                    Ok(ControlFlow::Continue(())) => ControlFlow::Continue(()),
                    Ok(ControlFlow::Break(())) => {
                        stop = true;
                        ControlFlow::Break(())
                    }
                    Err(e) => {
                        error = Some(e);
                        ControlFlow::Break(())
                    }
                }
            };
            match only {
                Some(rids) => source.scan_rids(pk, after, rids, &mut read),
                None => source.scan_containing(pk, after, &self.needles, &mut read, &mut skipped),
            }
            if only.is_none() {
                stats.docs_scanned += skipped_docs;
                stats.bytes_read += skipped_bytes;
            }
            if let Some(e) = error {
                return Err(e);
            }
            if stop {
                break;
            }
        }
        Ok(())
    }

    /// Whether the row passes WHERE (exactly `true`).
    fn keep(&self, row: &[&Value]) -> Result<bool, QueryError> {
        passes(self.q, &self.cx, row)
    }

    fn stream(
        &self,
        source: &dyn Source,
        token: Option<&Token>,
        lo: u64,
        hi: u64,
        page: u64,
    ) -> Result<(Vec<Value>, Option<Token>), QueryError> {
        let mut idx = token.map_or(0, |t| t.index);
        let mut items = Vec::new();
        let mut next = None;
        if idx >= hi {
            return Ok((items, None));
        }
        let (q, cx) = (self.q, self.cx);
        let mut sink = |pos: Pos<'_>, row: &[&Value]| -> Result<ControlFlow<()>, QueryError> {
            if !self.keep(row)? {
                return Ok(ControlFlow::Continue(()));
            }
            let Some(v) = project(&q.select, q, &cx, row)? else {
                return Ok(ControlFlow::Continue(()));
            };
            if idx < lo {
                idx += 1;
                if let Cow::Owned(v) = v {
                    dismantle(v);
                }
                return Ok(ControlFlow::Continue(()));
            }
            if items.len() as u64 >= page {
                if let Cow::Owned(v) = v {
                    dismantle(v);
                }
                let mut t = Token::index(0, idx);
                t.mode = Mode::Stream;
                t.pk = Some(pos.pk.clone());
                t.rid = pos.rid;
                t.combo = pos.combo;
                next = Some(t);
                return Ok(ControlFlow::Break(()));
            }
            items.push(own(v));
            idx += 1;
            Ok(if idx >= hi {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        };
        self.scan(source, token, &mut sink)?;
        Ok((items, next))
    }

    fn order(
        &self,
        source: &dyn Source,
        token: Option<&Token>,
        lo: u64,
        hi: u64,
        page: u64,
    ) -> Result<(Vec<Value>, Option<Token>), QueryError> {
        let start = token.map_or(0, |t| t.index);
        if start >= hi {
            return Ok((Vec::new(), None));
        }
        let q = self.q;
        let items_spec = &q.order_by[..];
        let single = items_spec.len() == 1;
        let need = (hi.min(start.max(lo).saturating_add(page)) - start).saturating_add(1);
        let need = usize::try_from(need).unwrap_or(usize::MAX);
        let cap = need.saturating_mul(2).max(8);
        // Small k: keep only sort keys and positions, and re-read the few
        // winners at the end, so losing candidates are never copied. Not
        // when the index named about as many documents as the page needs:
        // projecting them all costs less than reading the winners again,
        // each from a partition of its own that storage may have to read.
        let named = self
            .only
            .as_ref()
            .map(|only| only.iter().map(Vec::len).sum::<usize>());
        let defer = need <= 4096 && named.is_none_or(|named| named > need.saturating_mul(2));
        let sorted_mode = need <= 32;
        let mut buf: Vec<Cand> = Vec::new();
        let mut compacted = false;
        let partitions = &self.partitions;
        let after = token.and_then(|t| t.pk.as_ref().map(|pk| (t, pk)));
        let cx = self.cx;
        let cmp_cand = |a: &Cand, b: &Cand| {
            cmp_rows(
                items_spec,
                a.keys.as_slice(),
                (&partitions[a.pk_index], a.rid, a.combo),
                b.keys.as_slice(),
                (&partitions[b.pk_index], b.rid, b.combo),
            )
        };
        let mut sink = |pos: Pos<'_>, row: &[&Value]| -> Result<ControlFlow<()>, QueryError> {
            if !self.keep(row)? {
                return Ok(ControlFlow::Continue(()));
            }
            // Up to four keys live on the stack: no allocation per row.
            let mut small: [Val<'_>; 4] = Default::default();
            let mut large: Vec<Val<'_>> = Vec::new();
            let keys: &mut [Val<'_>] = if items_spec.len() <= small.len() {
                &mut small[..items_spec.len()]
            } else {
                large.resize_with(items_spec.len(), || None);
                &mut large
            };
            for (slot, s) in keys.iter_mut().zip(items_spec) {
                *slot = eval(&s.expr, &cx, row)?;
            }
            if single && keys[0].is_none() {
                return Ok(ControlFlow::Continue(()));
            }
            let me = (pos.pk, pos.rid, pos.combo);
            if let Some((t, tpk)) = after
                && cmp_rows(items_spec, keys, me, &t.keys, (tpk, t.rid, t.combo))
                    != Ordering::Greater
            {
                return Ok(ControlFlow::Continue(()));
            }
            if compacted || (sorted_mode && buf.len() == need) {
                let worst = &buf[need - 1];
                let wp = (&partitions[worst.pk_index], worst.rid, worst.combo);
                if cmp_rows(items_spec, keys, me, worst.keys.as_slice(), wp) != Ordering::Less {
                    return Ok(ControlFlow::Continue(()));
                }
            }
            let item = if defer {
                if !projects_defined(q, &cx, row)? {
                    return Ok(ControlFlow::Continue(()));
                }
                None
            } else {
                match project(&q.select, q, &cx, row)? {
                    Some(item) => Some(own(item)),
                    None => return Ok(ControlFlow::Continue(())),
                }
            };
            let cand = Cand {
                keys: Keys::new(keys),
                pk_index: pos.pk_index,
                rid: pos.rid,
                combo: pos.combo,
                item,
            };
            if sorted_mode {
                // Small k: an exactly maintained sorted buffer (exact threshold).
                let at = buf.partition_point(|c| cmp_cand(c, &cand) == Ordering::Less);
                buf.insert(at, cand);
                buf.truncate(need);
                return Ok(ControlFlow::Continue(()));
            }
            buf.push(cand);
            if buf.len() >= cap {
                // Afterwards `buf[need - 1]` is the worst kept row: the threshold.
                buf.select_nth_unstable_by(need - 1, cmp_cand);
                buf.truncate(need);
                compacted = true;
            }
            Ok(ControlFlow::Continue(()))
        };
        self.scan(source, None, &mut sink)?;
        buf.sort_unstable_by(cmp_cand);
        buf.truncate(need);
        if let Some(walk) = &self.walk
            && buf.len() == need
        {
            let worst: Vec<Option<&Value>> = buf[need - 1]
                .keys
                .as_slice()
                .iter()
                .map(Option::as_ref)
                .collect();
            self.frontier.set(walk.key_of_values(&worst));
        }
        let mut consumed = start;
        let mut items = Vec::new();
        let mut next = None;
        let mut last: Option<usize> = None;
        for (i, idx) in (start..).enumerate().take(buf.len()) {
            if idx >= hi {
                break;
            }
            if items.len() as u64 >= page {
                if let Some(l) = last {
                    let c = &buf[l];
                    let mut keys = Vec::with_capacity(c.keys.as_slice().len());
                    for k in c.keys.as_slice() {
                        keys.push(match k {
                            None => None,
                            Some(v) => Some(clone_capped(v, 100).ok_or_else(|| {
                                QueryError::Invalid(
                                    "order by value nested too deeply to page".to_owned(),
                                )
                            })?),
                        });
                    }
                    let mut t = Token::index(0, consumed);
                    t.mode = Mode::Order;
                    t.pk = Some(self.partitions[c.pk_index].clone());
                    t.rid = c.rid;
                    t.combo = c.combo;
                    t.keys = keys;
                    next = Some(t);
                }
                break;
            }
            if idx >= lo {
                let item = match buf[i].item.take() {
                    Some(item) => Some(item),
                    None => self.reread(source, &buf[i])?,
                };
                items.extend(item);
            }
            consumed = idx + 1;
            last = Some(i);
        }
        Ok((items, next))
    }

    /// Projects a deferred ORDER BY row by reading its document again.
    fn reread(&self, source: &dyn Source, c: &Cand) -> Result<Option<Value>, QueryError> {
        let (q, cx) = (self.q, self.cx);
        let Some(from) = &q.from else { return Ok(None) };
        let mut out = Ok(None);
        // The row passed WHERE, so its document holds the needles: a read
        // through them finds it (and a partition just read through them
        // is not read again whole).
        let mut read = |rid: u64, doc: &Value, _: usize| {
            if rid != c.rid {
                return ControlFlow::Break(());
            }
            let Some(root) = root_of(&from.root_path, doc) else {
                return ControlFlow::Break(());
            };
            let mut combo = 0;
            let mut sink = |_: u64, row: &[&Value]| {
                out = project(&q.select, q, &cx, row).map(|v| v.map(own));
                Ok(ControlFlow::Break(()))
            };
            if let Err(e) = join_rows(&from.joins, &cx, &[root], 0, c.combo, &mut combo, &mut sink)
            {
                out = Err(e);
            }
            ControlFlow::Break(())
        };
        let pk = &self.partitions[c.pk_index];
        match &self.only {
            Some(_) => source.scan_rids(pk, c.rid.checked_sub(1), &[c.rid], &mut read),
            None => source.scan_containing(
                pk,
                c.rid.checked_sub(1),
                &self.needles,
                &mut read,
                &mut |_| {},
            ),
        }
        out
    }

    /// The complete result for mode `Index`, before TOP/OFFSET/LIMIT.
    fn materialize(&self, source: &dyn Source) -> Result<Vec<Value>, QueryError> {
        let q = self.q;
        let mut rows = if q.is_aggregate() {
            self.aggregate(source)?
        } else if q.from.is_none() {
            let cx = self.cx;
            project(&q.select, q, &cx, &[])?
                .map(own)
                .into_iter()
                .collect()
        } else if q.order_by.is_empty() {
            self.stream(source, None, 0, u64::MAX, u64::MAX)?.0
        } else {
            self.order(source, None, 0, u64::MAX, u64::MAX)?.0
        };
        if q.distinct {
            let mut seen = BTreeSet::new();
            let mut unique = Vec::new();
            for v in rows {
                if seen.insert(Ordered(vec![Some(clone_value(&v))])) {
                    unique.push(v);
                } else {
                    dismantle(v);
                }
            }
            rows = unique;
        }
        Ok(rows)
    }

    fn aggregate(&self, source: &dyn Source) -> Result<Vec<Value>, QueryError> {
        let q = self.q;
        let cx = self.cx;
        let fresh = || {
            q.aggregates
                .iter()
                .map(|a| Acc::new(a.kind))
                .collect::<Vec<_>>()
        };
        let mut total: BTreeMap<Ordered, Vec<Acc>> = BTreeMap::new();
        let mut partial: BTreeMap<Ordered, Vec<Acc>> = BTreeMap::new();
        // Without GROUP BY the one group's accumulators skip the map.
        let mut plain: Option<Vec<Acc>> = None;
        let mut current = usize::MAX;
        let merge = |total: &mut BTreeMap<Ordered, Vec<Acc>>,
                     partial: &mut BTreeMap<Ordered, Vec<Acc>>,
                     plain: &mut Option<Vec<Acc>>| {
            if let Some(accs) = plain.take() {
                partial.insert(Ordered(Vec::new()), accs);
            }
            for (k, accs) in std::mem::take(partial) {
                let slot = total.entry(k).or_insert_with(fresh);
                for (t, a) in slot.iter_mut().zip(accs) {
                    t.merge(a);
                }
            }
        };
        let mut feed = |pk_index: usize, row: &[&Value]| -> Result<(), QueryError> {
            if !self.keep(row)? || !sort_key_defined(q, &cx, row)? {
                return Ok(());
            }
            if pk_index != current {
                merge(&mut total, &mut partial, &mut plain);
                current = pk_index;
            }
            if q.group_by.is_empty() {
                let accs = plain.get_or_insert_with(fresh);
                for (acc, spec) in accs.iter_mut().zip(&q.aggregates) {
                    acc.add(eval(&spec.arg, &cx, row)?.as_deref());
                }
                return Ok(());
            }
            let mut key = Vec::with_capacity(q.group_by.len());
            for g in &q.group_by {
                key.push(eval(g, &cx, row)?.map(own));
            }
            let accs = partial.entry(Ordered(key)).or_insert_with(fresh);
            for (acc, spec) in accs.iter_mut().zip(&q.aggregates) {
                let v = eval(&spec.arg, &cx, row)?;
                acc.add(v.as_deref());
            }
            Ok(())
        };
        if let Some(accs) = self.answered.take() {
            plain = Some(accs);
        } else if q.from.is_none() {
            feed(0, &[])?;
        } else {
            let mut sink = |pos: Pos<'_>, row: &[&Value]| {
                feed(pos.pk_index, row).map(|()| ControlFlow::Continue(()))
            };
            self.scan(source, None, &mut sink)?;
        }
        merge(&mut total, &mut partial, &mut plain);
        if q.group_by.is_empty() && total.is_empty() {
            total.insert(Ordered(Vec::new()), fresh());
        }
        let mut out = Vec::with_capacity(total.len());
        for (key, accs) in total {
            let aggs: Vec<Option<Value>> = accs.into_iter().map(Acc::finish).collect();
            let gcx = Cx {
                aggs: &aggs,
                groups: &key.0,
                ..cx
            };
            if let Some(v) = project(&q.select, q, &gcx, &[])? {
                out.push(own(v));
            }
        }
        Ok(out)
    }
}

/// Enumerates the JOIN cross product of one document: `row` holds the
/// bindings so far; calls `sink(ordinal, row)` for every complete row whose
/// ordinal is at least `skip`.
fn join_rows(
    joins: &[crate::query::ast::Expr],
    cx: &Cx<'_>,
    row: &[&Value],
    level: usize,
    skip: u64,
    combo: &mut u64,
    sink: &mut JoinSink<'_>,
) -> Result<ControlFlow<()>, QueryError> {
    let Some(join) = joins.get(level) else {
        let c = *combo;
        *combo += 1;
        if c < skip {
            return Ok(ControlFlow::Continue(()));
        }
        return sink(c, row);
    };
    let cx = *cx;
    let source = eval(join, &cx, row)?;
    let Some(Value::Array(items)) = source.as_deref() else {
        return Ok(ControlFlow::Continue(()));
    };
    let mut next: Vec<&Value> = Vec::with_capacity(row.len() + 1);
    next.extend_from_slice(row);
    next.push(&Value::Null);
    for item in items {
        if let Some(slot) = next.last_mut() {
            *slot = item;
        }
        if join_rows(joins, &cx, &next, level + 1, skip, combo, sink)?.is_break() {
            return Ok(ControlFlow::Break(()));
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// Slot 0 of a document: the document, or the value at `FROM c.path`.
fn root_of<'d>(path: &[PathSeg], doc: &'d Value) -> Option<&'d Value> {
    let mut root = doc;
    for seg in path {
        root = match seg {
            PathSeg::Prop(p) => root.as_object()?.get(p)?,
            PathSeg::Index(i) => root.as_array()?.get(*i)?,
        };
    }
    Some(root)
}

/// Whether the SELECT clause yields a row (only `SELECT VALUE` can be
/// undefined), without building it.
fn projects_defined(q: &Query, cx: &Cx<'_>, row: &[&Value]) -> Result<bool, QueryError> {
    match &q.select {
        Select::Value(e) => Ok(eval(e, cx, row)?.is_some()),
        Select::Star | Select::List(_) => Ok(true),
    }
}

/// The SELECT clause for one row; None when `SELECT VALUE` is undefined.
fn project<'a>(
    select: &'a Select,
    q: &'a Query,
    cx: &Cx<'a>,
    row: &[&'a Value],
) -> Result<Val<'a>, QueryError> {
    Ok(match select {
        Select::Star => {
            let slot = q.from.as_ref().map_or(0, |f| f.star_slot);
            row.get(slot).map(|v| Cow::Borrowed(*v))
        }
        Select::Value(e) => eval(e, cx, row)?,
        Select::List(items) => {
            let mut map = Map::with_capacity(items.len());
            for (name, e) in items {
                if let Some(v) = eval(e, cx, row)? {
                    map.insert(name.clone(), own(v));
                }
            }
            Some(Cow::Owned(Value::Object(map)))
        }
    })
}
