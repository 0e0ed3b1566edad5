//! Queries: SQL over a container's documents (`POST docs` with a query
//! body), the read feed (`GET docs`: every document, a page at a time),
//! query plans, and queries over the lists of databases, containers and
//! scripts.
//!
//! A query is confined to a physical partition by its range header, or to
//! an EPK range; across several ranges, one that needs the client's
//! pipeline is a 400/1004 with the plan (`engine::query::plan`), and any
//! other pages range by range (`{"range", "token"}` continuations). A
//! container with one range evaluates every query whole. A page is cut
//! to the response limit by running it again with fewer items, so its
//! continuation resumes exactly after what was sent.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use base64::Engine as _;

use engine::PartitionKey;
use engine::query::{self, Params};
use partita::QueryOptions;
use partita::charge::Work;
use serde_json::{Value, json};

use super::Gateway;
use super::requests::object_body;
use super::responses::{charge, feed_body};
use crate::epk;
use crate::registry::CollEntry;
use crate::wire::{WireError, WireRequest, WireResponse, flag, header, max_item_count};

impl Gateway {
    pub(super) fn query(
        &self,
        coll: &CollEntry,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let (sql, params) = query_spec(req)?;
        self.query_page(coll, req, &sql, &params, true)
    }

    /// The read feed (GET docs): every document, a page at a time.
    pub(super) fn read_feed(
        &self,
        coll: &CollEntry,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        self.query_page(coll, req, "SELECT * FROM c", &Params::new(), false)
    }

    /// Runs one page of a query, cut to the response limit.
    fn query_page(
        &self,
        coll: &CollEntry,
        req: &WireRequest,
        sql: &str,
        params: &Params,
        is_query: bool,
    ) -> Result<WireResponse, WireError> {
        let started = Instant::now();
        let max_item_count = max_item_count(&req.headers)?;
        let partition_key = self.partition_key(coll, req)?;
        let ranges = epk_ranges(coll, req)?;
        let partitions = match ranges.is_empty() {
            true => None,
            false => Some(
                coll.container
                    .partition_keys()?
                    .into_iter()
                    .filter(|k| in_all(coll, k, &ranges))
                    .collect(),
            ),
        };
        let scoped = partition_key.is_some() || partitions.is_some();
        let mut null_when_undefined = false;
        // `x-partita-query-whole` (the Data Explorer, which has no SDK
        // pipeline) asks for the query evaluated over every partition at once.
        let mut by_range =
            !scoped && coll.ranges.len() > 1 && !flag(&req.headers, "x-partita-query-whole")?;
        // A query of no one partition; a syntax error is its own 400,
        // reported when it runs.
        if is_query
            && !scoped
            && let Ok(parsed) = query::parse(sql)
        {
            refuse_fan_out(coll, req, &parsed)?;
            let plan = query::plan(sql, params).ok();
            if by_range && let Some(plan) = plan.as_ref().filter(|p| p.needs_client()) {
                return Err(needs_a_plan(plan));
            }
            // GROUP BY is answered whole.
            by_range &= plan.is_some_and(|plan| !plan.group_by);
            null_when_undefined = value_aggregate_across(req, &parsed)?;
        }
        let continuation = header(&req.headers, "x-ms-continuation")?
            .filter(|c| !c.is_empty())
            .map(str::to_owned);
        // Across several physical partitions the service answers range by
        // range, a page never spanning two: the token says which range and
        // where in it.
        let (range, continuation) = if by_range {
            range_continuation(coll, continuation.as_deref())?
        } else {
            (0, continuation)
        };
        let mut options = QueryOptions {
            partition_key,
            partitions,
            max_item_count,
            continuation,
            limits: Some(self.script_limits.clone()),
        };
        loop {
            if by_range {
                let bounds = std::slice::from_ref(&coll.ranges[range]);
                options.partitions = Some(
                    coll.container
                        .partition_keys()?
                        .into_iter()
                        .filter(|k| in_all(coll, k, bounds))
                        .collect(),
                );
            }
            let mut page = coll.container.query_items(sql, params, &options)?;
            if by_range {
                // A range with nothing left still answers its (empty) page,
                // as on the service.
                if page.continuation.is_none() && range + 1 < coll.ranges.len() {
                    page.continuation =
                        Some(json!({"range": range + 1, "token": null}).to_string());
                } else if let Some(token) = page.continuation.take() {
                    page.continuation = Some(json!({"range": range, "token": token}).to_string());
                }
            }
            if null_when_undefined && page.items.is_empty() && page.continuation.is_none() {
                page.items.push(Value::Null);
            }
            let (body, fitted) = feed_body(
                &coll.rid,
                "Documents",
                &page.items,
                self.limits.max_response_bytes,
            );
            if fitted < page.items.len() {
                // Too big: run the same page again with only what fits, so
                // the continuation resumes exactly after it.
                options.max_item_count = Some(fitted);
                continue;
            }
            let mut out = WireResponse {
                status: 200,
                headers: Vec::new(),
                body,
            }
            .with("x-ms-item-count", page.items.len().to_string())
            .with(
                "x-ms-request-charge",
                charge(Work::query(&page.stats).request_charge()),
            );
            if let Some(continuation) = page.continuation {
                out = out.with("x-ms-continuation", continuation);
            }
            if flag(&req.headers, "x-ms-documentdb-populatequerymetrics")? {
                let output_bytes = body_len_of(&page.items);
                out = out.with(
                    "x-ms-documentdb-query-metrics",
                    query_metrics(&page.stats, output_bytes, started.elapsed()),
                );
            }
            // The .NET SDK asks with `-V2` and reads the newer shape; the
            // Python and Java SDKs ask without it and read the older one.
            let v2 = flag(&req.headers, "x-ms-cosmos-populateindexmetrics-v2")?;
            if v2 || flag(&req.headers, "x-ms-cosmos-populateindexmetrics")? {
                let used = IndexUse::of(coll, sql, params, scoped, &page.stats);
                let header = match v2 {
                    true => used.v2(),
                    false => used.v1(),
                };
                out = out.with("x-ms-cosmos-index-utilization", header);
            }
            return Ok(out);
        }
    }
}

/// The physical partition a range-by-range query continues in, and the
/// engine's token within it (`{"range": n, "token": ...}`; none: the
/// first range from its start).
fn range_continuation(
    coll: &CollEntry,
    continuation: Option<&str>,
) -> Result<(usize, Option<String>), WireError> {
    let Some(text) = continuation else {
        return Ok((0, None));
    };
    let invalid = || {
        WireError::bad_request(format!(
            "invalid continuation token {text:?}: not one this container's query gave"
        ))
    };
    let value: Value = serde_json::from_str(text).map_err(|_| invalid())?;
    let range = value["range"].as_u64().ok_or_else(invalid)? as usize;
    if range >= coll.ranges.len() {
        return Err(invalid());
    }
    let token = match &value["token"] {
        Value::Null => None,
        Value::String(token) => Some(token.clone()),
        _ => return Err(invalid()),
    };
    Ok((range, token))
}

/// `x-ms-start-epk` and `x-ms-end-epk`, which come together.
pub(super) fn epk_range(req: &WireRequest) -> Result<Option<(String, String)>, WireError> {
    match (
        header(&req.headers, "x-ms-start-epk")?,
        header(&req.headers, "x-ms-end-epk")?,
    ) {
        (Some(start), Some(end)) => Ok(Some((start.to_owned(), end.to_owned()))),
        (None, None) => Ok(None),
        _ => Err(WireError::bad_request(
            "x-ms-start-epk and x-ms-end-epk come together",
        )),
    }
}

/// The effective-partition-key ranges a request is confined to: the
/// physical partition `x-ms-documentdb-partitionkeyrangeid` names, the
/// range of `x-ms-start-epk` and `x-ms-end-epk`, or both (a key is in scope
/// when it is in each); the whole ring is no confinement.
pub(super) fn epk_ranges(
    coll: &CollEntry,
    req: &WireRequest,
) -> Result<Vec<(String, String)>, WireError> {
    let mut ranges = Vec::new();
    if let Some(id) = header(&req.headers, "x-ms-documentdb-partitionkeyrangeid")? {
        ranges.push(physical_range(coll, id)?);
    }
    ranges.extend(epk_range(req)?);
    ranges.retain(|(start, end)| !(start.is_empty() && end.eq_ignore_ascii_case("FF")));
    Ok(ranges)
}

/// Whether `key`'s EPK is in each of `ranges`.
pub(super) fn in_all(coll: &CollEntry, key: &PartitionKey, ranges: &[(String, String)]) -> bool {
    let epk = coll.epk(key);
    ranges
        .iter()
        .all(|(start, end)| epk::in_range(&epk, start, end))
}

/// The bounds of the physical partition `id` (`"1"`, or `"{collRid},1"` as
/// the .NET SDK writes it); a range the container does not have is gone,
/// as after a split (410/1002).
pub(super) fn physical_range(coll: &CollEntry, id: &str) -> Result<(String, String), WireError> {
    range_index(coll, id)
        .map(|i| coll.ranges[i].clone())
        .ok_or_else(|| {
            WireError::new(
                410,
                format!(
                    "partition-key range {id:?} of container {:?} is gone: its ranges are 0 to {}",
                    coll.name,
                    coll.ranges.len() - 1
                ),
            )
            .with_substatus(1002)
        })
}

/// The index of the physical partition `id` names, if the container has it.
pub(super) fn range_index(coll: &CollEntry, id: &str) -> Option<usize> {
    let bare = id.rsplit(',').next().unwrap_or(id).trim();
    bare.parse::<usize>()
        .ok()
        .filter(|&i| i < coll.ranges.len())
}

/// The service's 400/1004 for a query across physical partitions that
/// needs the client's pipeline (ORDER BY, aggregates, DISTINCT, TOP,
/// OFFSET): the SDKs then ask for the query plan and run it per range.
fn needs_a_plan(plan: &query::Plan) -> WireError {
    let mut error = WireError::bad_request(
        "The provided cross partition query can not be directly served by the gateway. This is \
         a first chance (internal) exception that all newer clients will know how to handle \
         gracefully. This exception is traced, but unless you see it bubble up as an exception \
         (which only happens on older SDK clients), then you can safely ignore this message.",
    )
    .with_substatus(1004);
    // The JavaScript SDK takes the plan from the error.
    error.additional_info = Some(plan_json(plan).to_string().into());
    error
}

/// Whether `sql` is an enabled cross-partition `SELECT VALUE <aggregate>`
/// (no GROUP BY, no key range, no continuation): the SDKs aggregate it
/// from each partition's partial result once the service has told them it
/// spans partitions, and an aggregate undefined there (`AVG` over mixed
/// types, `MAX` over nothing) comes out as one `null`, where a query of
/// one partition gets no row. The Python SDK's test_aggregate expects it.
fn value_aggregate_across(req: &WireRequest, parsed: &query::Query) -> Result<bool, WireError> {
    if !flag(&req.headers, "x-ms-documentdb-query-enablecrosspartition")?
        || header(&req.headers, "x-ms-documentdb-partitionkeyrangeid")?.is_some()
        || header(&req.headers, "x-ms-continuation")?.is_some_and(|c| !c.is_empty())
    {
        return Ok(false);
    }
    Ok(parsed.is_value_aggregate())
}

/// Refuses a query that names no partition key, range or feed range and
/// does not enable cross-partition queries, unless its WHERE clause pins
/// every level of the key (the service routes such a query itself), with
/// the service's 400: every container is partitioned, and on the service
/// the header is required whatever the number of physical partitions.
///
/// An enabled cross-partition query that aggregates into an object
/// (`SELECT COUNT(1) FROM c`) is refused too, as the SDKs refuse it once
/// the service has told them the query spans partitions.
fn refuse_fan_out(
    coll: &CollEntry,
    req: &WireRequest,
    parsed: &query::Query,
) -> Result<(), WireError> {
    let path = coll.container.partition_key_path();
    if header(&req.headers, "x-ms-documentdb-partitionkeyrangeid")?.is_some() {
        return Ok(());
    }
    let enabled = flag(&req.headers, "x-ms-documentdb-query-enablecrosspartition")?;
    // Even when its WHERE clause pins the key: the SDK refuses it from the
    // plan whenever cross-partition queries are enabled (test_aggregate's
    // `SELECT AVG(r.field) FROM r WHERE r.key = '...'`).
    if enabled && parsed.aggregates_into_an_object() {
        return Err(WireError::bad_request(
            "Cross partition query only supports 'VALUE <AggregateFunc>' for aggregates: \
             write SELECT VALUE COUNT(1), or scope the query to a partition key",
        ));
    }
    let pinned = parsed.equality_paths();
    if enabled
        || path
            .level_segments()
            .all(|level| pinned.iter().any(|p| p.as_slice() == level))
    {
        return Ok(());
    }
    Err(cross_partition_disabled(&format!(
        "container {:?} is partitioned by {path}",
        coll.name
    )))
}

/// The service's 400 for a query over every partition that did not enable
/// it; `about` says which container's.
fn cross_partition_disabled(about: &str) -> WireError {
    WireError::bad_request(format!(
        "Cross partition query is required but disabled. Please set \
         x-ms-documentdb-query-enablecrosspartition to true, specify \
         x-ms-documentdb-partitionkey, or revise your query to avoid this exception ({about})"
    ))
}

impl Gateway {
    /// A metadata query's check: one that names no partition key must
    /// enable cross-partition queries, as on the service.
    pub(super) fn cross_partition_allowed(
        &self,
        coll: &CollEntry,
        req: &WireRequest,
    ) -> Result<(), WireError> {
        if self.partition_key(coll, req)?.is_some()
            || flag(&req.headers, "x-ms-documentdb-query-enablecrosspartition")?
        {
            return Ok(());
        }
        Err(cross_partition_disabled(&format!(
            "the conflicts of container {:?}",
            coll.name
        )))
    }
}

/// The serialized size of a page's items.
fn body_len_of(items: &[Value]) -> usize {
    items.iter().map(host_api::json::serialized_len).sum()
}

/// The `x-ms-documentdb-query-metrics` header: the service's
/// `key=value;...` keys (the .NET SDK's `ServerSideMetricsParser` reads
/// them by name and skips the ones it does not know), with what Partita
/// measures: the documents read (`retrievedDocumentCount`: those the
/// range index chose, or every document of the partitions scanned) and
/// their bytes, the items returned and their bytes, and the whole time.
/// The phases Partita does not time apart are 0, `indexLookupTimeInMs`
/// among them (the index is read inside the query's run, whose time is
/// `totalExecutionTimeInMs`).
///
/// `indexUtilizationRatio` is, as the service defines it, the documents
/// the filter matched over the documents read; a page does not count the
/// documents WHERE accepted, so the items returned stand for them (the
/// same number for a query without TOP, OFFSET, aggregates or JOIN; too
/// few for an aggregate), and nothing read is 1.
fn query_metrics(stats: &query::QueryStats, output_bytes: usize, elapsed: Duration) -> String {
    let ms = elapsed.as_secs_f64() * 1000.0;
    let ratio = if stats.docs_scanned == 0 {
        1.0
    } else {
        (stats.docs_returned as f64 / stats.docs_scanned as f64).min(1.0)
    };
    format!(
        "totalExecutionTimeInMs={ms:.2};queryCompileTimeInMs=0.00;queryLogicalPlanBuildTimeInMs=0.00;\
         queryPhysicalPlanBuildTimeInMs=0.00;queryOptimizationTimeInMs=0.00;VMExecutionTimeInMs={ms:.2};\
         indexLookupTimeInMs=0.00;instructionCount=0;documentLoadTimeInMs=0.00;\
         systemFunctionExecuteTimeInMs=0.00;userFunctionExecuteTimeInMs=0.00;\
         retrievedDocumentCount={};retrievedDocumentSize={};outputDocumentCount={};\
         outputDocumentSize={output_bytes};writeOutputTimeInMs=0.00;indexUtilizationRatio={ratio:.2}",
        stats.docs_scanned, stats.bytes_read, stats.docs_returned,
    )
}

/// What one page of a query used of the container's indexes and what
/// would have helped it, for `x-ms-cosmos-index-utilization`.
///
/// Utilized single-path indexes are those the page read: the partition
/// key's when the query is confined to partitions (as the service looks
/// them up), and the included paths of its conditions and ORDER BY
/// (`engine::query::index_advice`) only when the range index chose the
/// documents (`QueryStats::index_used`; a query of one logical partition,
/// or on a store without an index, scans). Potential single-path indexes
/// are the excluded paths its conditions or ORDER BY name. Composite
/// indexes are as the advice says: the policy's composite index that
/// serves the query (a durable store walks it), or the one it lacks.
struct IndexUse {
    advice: query::IndexAdvice,
}

impl IndexUse {
    fn of(
        coll: &CollEntry,
        sql: &str,
        params: &Params,
        scoped: bool,
        stats: &query::QueryStats,
    ) -> IndexUse {
        let mut advice = match parse_for_advice(coll, sql) {
            Some(parsed) => query::index_advice(&parsed, params, &coll.container.indexing_policy()),
            None => query::IndexAdvice::default(),
        };
        if !stats.index_used {
            advice.utilized_single.clear();
        }
        if scoped {
            let keys = coll
                .container
                .partition_key_path()
                .paths()
                .map(|path| query::SingleIndex {
                    spec: format!("{path}/?"),
                    filter: String::new(),
                });
            advice.utilized_single.splice(0..0, keys);
        }
        IndexUse { advice }
    }

    /// The older shape, base64 of JSON (the Python SDK's
    /// `_utils.get_index_metrics_info`, the .NET SDK's
    /// `IndexUtilizationInfo.TryCreateFromDelimitedBase64String`).
    fn v1(&self) -> String {
        let single = |list: &[query::SingleIndex], utilized: bool| -> Vec<Value> {
            list.iter()
                .map(|index| {
                    json!({
                        "FilterExpression": index.filter,
                        "IndexSpec": index.spec,
                        "FilterPreciseSet": true,
                        "IndexPreciseSet": utilized,
                        "IndexImpactScore": "High",
                    })
                })
                .collect()
        };
        let composite = |list: &[query::CompositeIndex], utilized: bool| -> Vec<Value> {
            list.iter()
                .map(|index| {
                    json!({
                        "IndexSpecs": index.specs,
                        "IndexPreciseSet": utilized,
                        "IndexImpactScore": "High",
                    })
                })
                .collect()
        };
        let advice = &self.advice;
        let metrics = json!({
            "UtilizedSingleIndexes": single(&advice.utilized_single, true),
            "PotentialSingleIndexes": single(&advice.potential_single, false),
            "UtilizedCompositeIndexes": composite(&advice.utilized_composite, true),
            "PotentialCompositeIndexes": composite(&advice.potential_composite, false),
        });
        base64::engine::general_purpose::STANDARD.encode(metrics.to_string())
    }

    /// The newer shape, percent-encoded JSON, as the service answers
    /// `x-ms-cosmos-populateindexmetrics-V2` (the .NET SDK URL-decodes it
    /// and shows it as is: `ResponseMessage.DecodeIndexMetrics`; the
    /// emulator baselines show utilized indexes without a score and
    /// potential ones with it). A path is named once, whatever its
    /// conditions.
    fn v2(&self) -> String {
        let single = |list: &[query::SingleIndex], scored: bool| -> Vec<Value> {
            let mut specs: Vec<&str> = Vec::new();
            for index in list {
                if !specs.contains(&index.spec.as_str()) {
                    specs.push(&index.spec);
                }
            }
            specs
                .into_iter()
                .map(|spec| match scored {
                    true => json!({"IndexSpec": spec, "IndexImpactScore": "High"}),
                    false => json!({"IndexSpec": spec}),
                })
                .collect()
        };
        let composite = |list: &[query::CompositeIndex], scored: bool| -> Vec<Value> {
            list.iter()
                .map(|index| match scored {
                    true => json!({"IndexSpecs": index.specs, "IndexImpactScore": "High"}),
                    false => json!({"IndexSpecs": index.specs}),
                })
                .collect()
        };
        let advice = &self.advice;
        let metrics = json!({
            "UtilizedIndexes": {
                "SingleIndexes": single(&advice.utilized_single, false),
                "CompositeIndexes": composite(&advice.utilized_composite, false),
            },
            "PotentialIndexes": {
                "SingleIndexes": single(&advice.potential_single, true),
                "CompositeIndexes": composite(&advice.potential_composite, true),
            },
        });
        percent_encoding::utf8_percent_encode(
            &metrics.to_string(),
            percent_encoding::NON_ALPHANUMERIC,
        )
        .to_string()
    }
}

/// `sql` parsed as the container parses its queries (its computed
/// properties are expressions, not paths); `None` when it does not parse,
/// which the query itself has then reported.
fn parse_for_advice(coll: &CollEntry, sql: &str) -> Option<query::Query> {
    let computed = coll.container.properties().computed_properties;
    let computed = query::ComputedProperties::compile(
        computed.iter().map(|c| (c.name.as_str(), c.query.as_str())),
    )
    .ok()?;
    query::parse_with(sql, &computed).ok()
}

/// `{"query": "...", "parameters": [{"name": "@x", "value": ...}]}`.
fn query_spec(req: &WireRequest) -> Result<(String, Params), WireError> {
    let body = object_body(req, "query")?;
    let Some(Value::String(sql)) = body.get("query") else {
        return Err(WireError::bad_request(
            "the query body needs a string \"query\" property",
        ));
    };
    let mut params = Params::new();
    match body.get("parameters") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for p in list {
                let Some(Value::String(name)) = p.get("name") else {
                    return Err(WireError::bad_request(format!(
                        "each query parameter needs a string name, not {p}"
                    )));
                };
                if let Some(value) = p.get("value") {
                    params.insert(name.clone(), value.clone());
                }
            }
        }
        Some(other) => {
            return Err(WireError::bad_request(format!(
                "the query's parameters must be an array, not {}",
                host_api::type_name(other)
            )));
        }
    }
    Ok((sql.clone(), params))
}

/// The query plan (`x-ms-cosmos-is-query-plan-request`), computed as the
/// service computes it (see `engine::query::plan`): what each physical
/// partition runs and what the client's pipeline does with the rows.
pub(super) fn query_plan(req: &WireRequest) -> Result<WireResponse, WireError> {
    let (sql, params) = query_spec(req)?;
    let plan = query::plan(&sql, &params).map_err(|e| WireError::bad_request(e.to_string()))?;
    Ok(WireResponse::json(200, &plan_json(&plan)))
}

/// A plan in the service's shape (`partitionedQueryExecutionInfo`).
fn plan_json(plan: &query::Plan) -> Value {
    let order_by: Vec<&str> = plan
        .order_by
        .iter()
        .map(|&desc| if desc { "Descending" } else { "Ascending" })
        .collect();
    json!({
        "partitionedQueryExecutionInfoVersion": 2,
        "queryInfo": {
            "distinctType": plan.distinct.as_str(),
            "top": plan.top, "offset": plan.offset, "limit": plan.limit,
            "orderBy": order_by, "orderByExpressions": plan.order_by_expressions,
            "groupByExpressions": [], "groupByAliases": [], "aggregates": plan.aggregates,
            "groupByAliasToAggregateType": {}, "rewrittenQuery": plan.rewritten,
            "hasSelectValue": plan.has_select_value, "hasNonStreamingOrderBy": false
        },
        "queryRanges": [{"min": "", "max": "FF", "isMinInclusive": true, "isMaxInclusive": false}]
    })
}

/// A list of metadata resources, or the result of a query over them
/// (`SELECT * FROM root r WHERE r.id = @id`).
pub(super) fn metadata_feed(
    rid: &str,
    envelope: &str,
    items: Vec<Value>,
    query: Option<&WireRequest>,
) -> Result<WireResponse, WireError> {
    let items = match query {
        None => items,
        Some(req) => {
            let (sql, params) = query_spec(req)?;
            let parsed = query::parse(&sql).map_err(|e| WireError::bad_request(e.to_string()))?;
            let page = query::execute(
                &parsed,
                &params,
                &ListSource(items),
                &query::QueryOptions::default(),
            )
            .map_err(|e| WireError::bad_request(e.to_string()))?;
            page.items
        }
    };
    let (body, count) = feed_body(rid, envelope, &items, usize::MAX);
    Ok(WireResponse {
        status: 200,
        headers: Vec::new(),
        body,
    }
    .with("x-ms-item-count", count.to_string()))
}

/// A list of values as a one-partition query source.
struct ListSource(Vec<Value>);

impl query::Source for ListSource {
    fn partitions(&self) -> Vec<PartitionKey> {
        vec![PartitionKey::None]
    }

    fn scan(
        &self,
        _key: &PartitionKey,
        after: Option<u64>,
        f: &mut dyn FnMut(u64, &Value, usize) -> ControlFlow<()>,
    ) {
        for (i, value) in self.0.iter().enumerate() {
            let rid = i as u64 + 1;
            if after.is_some_and(|a| rid <= a) {
                continue;
            }
            if f(rid, value, 0).is_break() {
                return;
            }
        }
    }
}
