//! Final aggregation results in OpenSearch's response shapes: tantivy's final results
//! post-processed (keys typed by field type, OpenSearch's orderings and tie-breaks, empty
//! date buckets in any calendar, filter buckets, top hits with their sources).

use std::cmp::Ordering;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tantivy::aggregation::agg_result::{
    AggregationResult, AggregationResults, BucketEntries, BucketEntry, BucketResult, MetricResult,
};
use tantivy::aggregation::intermediate_agg_result::IntermediateAggregationResults;
use tantivy::aggregation::metric::PercentileValues;
use tantivy::aggregation::{AggregationLimitsGuard, Key};
use tantivy::columnar::MonotonicallyMappableToU64;
use tantivy::DocAddress;

use super::collect::{first_str, LevelFruit};
use super::metrics::{java_double, number, opt_number, render_metric, sort_buckets};
use super::plan::{
    AggLevel, AggPlan, FilterNode, KeyKind, NativeKind, NativeNode, OrderKey, PlanNode,
};
use super::terms_reduce::{key_text, TermsErrors};
use super::values::exact_percentile;
use crate::search::datemath::{format_date, Zone};
use crate::search::sort::ValueKind;
use crate::search::source::filter_source;
use crate::QueryError;

/// OpenSearch's default `search.max_buckets`.
pub const MAX_BUCKETS: usize = 65_535;

/// Where a `top_hits` document lives.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct TopHitDoc {
    pub shard: usize,
    #[serde(with = "crate::search::wire::doc_address")]
    pub address: DocAddress,
    pub version: i64,
    pub seq_no: i64,
    pub primary_term: i64,
}

pub(crate) struct RenderCtx<'a> {
    pub fetch: &'a mut dyn FnMut(usize, DocAddress) -> Result<Option<Value>, QueryError>,
    pub index_name_of_shard: &'a dyn Fn(usize) -> String,
    pub top_hits_docs: &'a HashMap<String, TopHitDoc>,
    pub typed_keys: bool,
    pub buckets: usize,
    /// The shards whose results were merged (a count from one shard is exact).
    pub shards: u32,
    /// `search.max_buckets`.
    pub max_buckets: usize,
}

impl RenderCtx<'_> {
    /// OpenSearch's bucket consumer: every bucket rendered (at any depth) counts.
    fn check_buckets(&self) -> Result<(), QueryError> {
        if self.buckets > self.max_buckets {
            return Err(QueryError::TooManyBuckets {
                count: self.buckets,
                max: self.max_buckets,
            });
        }
        Ok(())
    }

    /// Counts `n` more buckets, failing as soon as the limit is passed.
    fn add_buckets(&mut self, n: usize) -> Result<(), QueryError> {
        self.buckets += n;
        self.check_buckets()
    }
}

fn limits() -> AggregationLimitsGuard {
    AggregationLimitsGuard::new(None, Some(u32::MAX))
}

/// Renders merged aggregation results. `doc_count` is the number of documents aggregated.
pub(crate) fn render_aggs(
    plan: &AggPlan,
    fruit: LevelFruit,
    doc_count: u64,
    rc: &mut RenderCtx,
) -> Result<Value, QueryError> {
    rc.shards = fruit.shards;
    let out = render_level(&plan.root, fruit, doc_count, rc)?;
    rc.check_buckets()?;
    Ok(Value::Object(out))
}

fn render_level(
    level: &AggLevel,
    fruit: LevelFruit,
    doc_count: u64,
    rc: &mut RenderCtx,
) -> Result<Map<String, Value>, QueryError> {
    let results = if level.native_req.is_empty() {
        AggregationResults::default()
    } else {
        fruit
            .native
            .unwrap_or_default()
            .into_final_result(level.native_req.clone(), limits())?
    };
    let mut filter_fruits = fruit.filters.into_iter();
    let mut out = Map::new();
    for node in &level.nodes {
        match node {
            PlanNode::Native(native) => {
                let errors = fruit.terms.get(&native.name);
                let value = render_native(native, &results, doc_count, errors, rc)?;
                out.insert(key_name(rc, &native.typed_name, &native.name), value);
            }
            PlanNode::Filter(filter) => {
                let buckets = filter_fruits.next().unwrap_or_default();
                let typed = if filter.keyed.is_some() {
                    "filters"
                } else {
                    "filter"
                };
                let value = render_filter(filter, buckets, rc)?;
                out.insert(key_name(rc, typed, &filter.name), value);
            }
        }
    }
    Ok(out)
}

fn key_name(rc: &RenderCtx, typed: &str, name: &str) -> String {
    if rc.typed_keys {
        format!("{typed}#{name}")
    } else {
        name.to_string()
    }
}

fn with_meta(meta: &Option<Value>) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(meta) = meta {
        out.insert("meta".into(), meta.clone());
    }
    out
}

fn render_filter(
    node: &FilterNode,
    buckets: Vec<(u64, LevelFruit)>,
    rc: &mut RenderCtx,
) -> Result<Value, QueryError> {
    let mut buckets = buckets.into_iter();
    let mut bucket = |rc: &mut RenderCtx| -> Result<Map<String, Value>, QueryError> {
        let (count, fruit) = buckets.next().unwrap_or_default();
        let mut out = Map::new();
        out.insert("doc_count".into(), json!(count));
        out.extend(render_level(&node.child, fruit, count, rc)?);
        Ok(out)
    };
    let mut out = with_meta(&node.meta);
    match node.keyed {
        None => out.extend(bucket(rc)?),
        Some(keyed) => {
            let mut named = Vec::new();
            for (key, _) in &node.queries {
                named.push((key.clone(), bucket(rc)?));
            }
            if let Some(other) = &node.other_bucket_key {
                named.push((Some(other.clone()), bucket(rc)?));
            }
            rc.add_buckets(named.len())?;
            out.insert(
                "buckets".into(),
                if keyed {
                    Value::Object(
                        named
                            .into_iter()
                            .map(|(k, b)| (k.unwrap_or_default(), Value::Object(b)))
                            .collect(),
                    )
                } else {
                    Value::Array(named.into_iter().map(|(_, b)| Value::Object(b)).collect())
                },
            );
        }
    }
    Ok(Value::Object(out))
}

fn render_children(
    children: &[NativeNode],
    results: &AggregationResults,
    doc_count: u64,
    rc: &mut RenderCtx,
) -> Result<Map<String, Value>, QueryError> {
    let mut out = Map::new();
    for child in children {
        let value = render_native(child, results, doc_count, None, rc)?;
        out.insert(key_name(rc, &child.typed_name, &child.name), value);
    }
    Ok(out)
}

fn empty_results(node: &NativeNode) -> Result<AggregationResults, QueryError> {
    Ok(IntermediateAggregationResults::default()
        .into_final_result(node.sub_req.clone(), limits())?)
}

fn key_f64(key: &Key) -> f64 {
    match key {
        Key::F64(f) => *f,
        Key::I64(i) => *i as f64,
        Key::U64(u) => *u as f64,
        Key::Str(s) => s.parse().unwrap_or(f64::NAN),
    }
}

/// `errors`: the `terms` error bookkeeping when the shards kept it (aggregations not under
/// another aggregation's buckets); without it, tantivy's sum of the shards' cut-off counts.
fn render_native(
    node: &NativeNode,
    results: &AggregationResults,
    doc_count: u64,
    errors: Option<&TermsErrors>,
    rc: &mut RenderCtx,
) -> Result<Value, QueryError> {
    let mut out = with_meta(&node.meta);
    let result = results.0.get(&node.name);
    match &node.kind {
        NativeKind::Terms {
            key_kind,
            size,
            min_doc_count,
            order,
            format,
            show_error,
            ..
        } => {
            let (entries, mut other, tantivy_error) = match result {
                Some(AggregationResult::BucketResult(BucketResult::Terms {
                    buckets,
                    sum_other_doc_count,
                    doc_count_error_upper_bound,
                })) => (
                    buckets.as_slice(),
                    *sum_other_doc_count,
                    doc_count_error_upper_bound.unwrap_or(0),
                ),
                _ => (&[][..], 0, 0),
            };
            let error = match errors {
                Some(errors) => errors.total(),
                None => nested_terms_error(rc.shards, order, tantivy_error),
            };
            let bucket_error = |key: &Key| match errors {
                Some(errors) => errors.of_bucket(&key_text(key)),
                None => error,
            };
            let mut buckets = Vec::new();
            for entry in entries.iter().filter(|e| e.doc_count >= *min_doc_count) {
                let mut bucket = Map::new();
                let key = match key_kind {
                    KeyKind::Str | KeyKind::Unmapped => match &entry.key {
                        Key::Str(s) => json!(s),
                        other => json!(other.to_string()),
                    },
                    KeyKind::Double => number(key_f64(&entry.key)),
                    _ => json!(key_f64(&entry.key) as i64),
                };
                bucket.insert("key".into(), key.clone());
                match key_kind {
                    KeyKind::Bool => {
                        bucket.insert(
                            "key_as_string".into(),
                            json!(if key.as_i64() == Some(1) {
                                "true"
                            } else {
                                "false"
                            }),
                        );
                    }
                    KeyKind::Date => {
                        bucket.insert(
                            "key_as_string".into(),
                            json!(format_date(key.as_i64().unwrap_or(0), format, Zone::UTC)),
                        );
                    }
                    _ => {}
                }
                bucket.insert("doc_count".into(), json!(entry.doc_count));
                if *show_error {
                    bucket.insert(
                        "doc_count_error_upper_bound".into(),
                        json!(bucket_error(&entry.key)),
                    );
                }
                bucket.extend(render_children(
                    &node.children,
                    &entry.sub_aggregation,
                    entry.doc_count,
                    rc,
                )?);
                buckets.push(bucket);
            }
            sort_buckets(&mut buckets, order, node);
            if buckets.len() > *size {
                other += buckets[*size..]
                    .iter()
                    .map(|b| b["doc_count"].as_u64().unwrap_or(0))
                    .sum::<u64>();
                buckets.truncate(*size);
            }
            rc.add_buckets(buckets.len())?;
            out.insert("doc_count_error_upper_bound".into(), json!(error));
            out.insert("sum_other_doc_count".into(), json!(other));
            out.insert(
                "buckets".into(),
                Value::Array(buckets.into_iter().map(Value::Object).collect()),
            );
        }
        NativeKind::Range {
            buckets,
            keyed,
            is_date,
            format,
            zone,
        } => {
            let mut found: HashMap<(&str, String), _> = HashMap::new();
            for bucket in buckets {
                if found.contains_key(&(bucket.layer.as_str(), bucket.tantivy_key.clone())) {
                    continue;
                }
                if let Some(AggregationResult::BucketResult(BucketResult::Range {
                    buckets: entries,
                })) = results.0.get(&bucket.layer)
                {
                    for entry in entries.iter() {
                        found.insert((bucket.layer.as_str(), entry.key.to_string()), entry);
                    }
                }
            }
            let empty = empty_results(node)?;
            let mut rendered = Vec::new();
            for bucket in buckets {
                let entry = found.get(&(bucket.layer.as_str(), bucket.tantivy_key.clone()));
                let (count, subs) = match entry {
                    Some(e) => (e.doc_count, &e.sub_aggregation),
                    None => (0, &empty),
                };
                let text = |v: Option<f64>| match v {
                    None => "*".to_string(),
                    Some(v) if *is_date => format_date(v as i64, format, *zone),
                    Some(v) => java_double(v),
                };
                let key = bucket
                    .key
                    .clone()
                    .unwrap_or_else(|| format!("{}-{}", text(bucket.from), text(bucket.to)));
                let mut b = Map::new();
                if !keyed {
                    b.insert("key".into(), json!(key));
                }
                if let Some(from) = bucket.from {
                    b.insert("from".into(), number(from));
                    if *is_date {
                        b.insert("from_as_string".into(), json!(text(Some(from))));
                    }
                }
                if let Some(to) = bucket.to {
                    b.insert("to".into(), number(to));
                    if *is_date {
                        b.insert("to_as_string".into(), json!(text(Some(to))));
                    }
                }
                b.insert("doc_count".into(), json!(count));
                b.extend(render_children(&node.children, subs, count, rc)?);
                rendered.push((key, b));
            }
            rc.add_buckets(rendered.len())?;
            out.insert("buckets".into(), keyed_or_list(rendered, *keyed));
        }
        NativeKind::Histogram {
            keyed,
            order,
            grid,
            min_doc_count,
        } => {
            let with_docs: HashMap<i64, &BucketEntry> = histogram_entries(result)
                .into_iter()
                .map(|e| (grid.index_of_key(key_f64(&e.key)) as i64, e))
                .collect();
            let mut indices: Vec<f64> = with_docs.keys().map(|i| *i as f64).collect();
            if *min_doc_count == 0 {
                indices = grid.filled_indices(&indices, rc.buckets, rc.max_buckets)?;
            }
            let empty = empty_results(node)?;
            let mut buckets = Vec::new();
            for index in indices {
                let (key, count, subs) = match with_docs.get(&(index as i64)) {
                    Some(e) => (key_f64(&e.key), e.doc_count, &e.sub_aggregation),
                    None => (grid.key_at(index), 0, &empty),
                };
                if count < *min_doc_count {
                    continue;
                }
                let mut b = Map::new();
                b.insert("key".into(), number(key));
                b.insert("doc_count".into(), json!(count));
                b.extend(render_children(&node.children, subs, count, rc)?);
                buckets.push(b);
            }
            sort_buckets(&mut buckets, order, node);
            rc.add_buckets(buckets.len())?;
            let named = buckets
                .into_iter()
                .map(|b| (java_double(b["key"].as_f64().unwrap_or(0.0)), b))
                .collect();
            out.insert("buckets".into(), keyed_or_list(named, *keyed));
        }
        NativeKind::DateHistogram {
            rounding,
            min_doc_count,
            extended_bounds,
            hard_bounds,
            format,
            keyed,
            order,
        } => {
            let mut by_key: Vec<(i64, &BucketEntry)> = histogram_entries(result)
                .into_iter()
                .map(|e| (key_f64(&e.key) as i64, e))
                .collect();
            by_key.sort_by_key(|(k, _)| *k);
            let in_hard_bounds = |k: i64| match hard_bounds {
                Some((min, max)) => k >= rounding.round(*min) && k <= *max,
                None => true,
            };
            let mut keys: Vec<i64> = by_key.iter().map(|(k, _)| *k).collect();
            if *min_doc_count == 0 {
                let mut first = keys.first().copied();
                let mut last = keys.last().copied();
                if let Some((min, max)) = extended_bounds {
                    if *min != i64::MIN {
                        let m = rounding.round(*min);
                        first = Some(first.map_or(m, |f| f.min(m)));
                        last = Some(last.map_or(m, |l| l.max(m)));
                    }
                    if *max != i64::MAX {
                        let m = rounding.round(*max);
                        first = Some(first.map_or(m, |f| f.min(m)));
                        last = Some(last.map_or(m, |l| l.max(m)));
                    }
                }
                if let (Some(mut k), Some(last)) = (first, last) {
                    keys.clear();
                    while k <= last {
                        keys.push(k);
                        if keys.len() > rc.max_buckets {
                            rc.add_buckets(keys.len())?;
                        }
                        k = rounding.next(k);
                    }
                }
            }
            let counts: HashMap<i64, &BucketEntry> = by_key.into_iter().collect();
            let empty = empty_results(node)?;
            let mut buckets = Vec::new();
            for key in keys.into_iter().filter(|k| in_hard_bounds(*k)) {
                let (count, subs) = match counts.get(&key) {
                    Some(e) => (e.doc_count, &e.sub_aggregation),
                    None => (0, &empty),
                };
                if count < *min_doc_count {
                    continue;
                }
                let mut b = Map::new();
                b.insert(
                    "key_as_string".into(),
                    json!(format_date(key, format, rounding.zone)),
                );
                b.insert("key".into(), json!(key));
                b.insert("doc_count".into(), json!(count));
                b.extend(render_children(&node.children, subs, count, rc)?);
                buckets.push(b);
            }
            sort_buckets(&mut buckets, order, node);
            rc.add_buckets(buckets.len())?;
            let named = buckets
                .into_iter()
                .map(|b| (b["key_as_string"].as_str().unwrap_or("").to_string(), b))
                .collect();
            out.insert("buckets".into(), keyed_or_list(named, *keyed));
        }
        NativeKind::Metric {
            op,
            is_date,
            format,
            sigma,
            distinct,
        } => {
            render_metric(&mut out, *op, result, *is_date, format, *sigma);
            if let Some(count) = distinct.as_ref().and_then(|d| exact_distinct(results, d)) {
                out.insert("value".into(), json!(count));
            }
        }
        NativeKind::Percentiles {
            percents,
            keyed,
            values_name,
        } => {
            let sketch: Vec<f64> = match result {
                Some(AggregationResult::MetricResult(MetricResult::Percentiles(p))) => {
                    match &p.values {
                        PercentileValues::Vec(entries) => entries.iter().map(|e| e.value).collect(),
                        PercentileValues::HashMap(_) => Vec::new(),
                    }
                }
                _ => Vec::new(),
            };
            let exact = match results.0.get(values_name) {
                Some(AggregationResult::BucketResult(BucketResult::Terms {
                    buckets,
                    sum_other_doc_count: 0,
                    ..
                })) => {
                    let mut values: Vec<(f64, u64)> = buckets
                        .iter()
                        .map(|b| (key_f64(&b.key), b.doc_count))
                        .collect();
                    values.sort_by(|a, b| a.0.total_cmp(&b.0));
                    Some(values)
                }
                _ => None,
            };
            let value_of = |i: usize, percent: f64| -> Option<f64> {
                match &exact {
                    Some(values) => exact_percentile(values, percent),
                    None => sketch.get(i).copied().filter(|v| v.is_finite()),
                }
            };
            let values: Vec<(f64, Option<f64>)> = percents
                .iter()
                .enumerate()
                .map(|(i, p)| (*p, value_of(i, *p)))
                .collect();
            out.insert(
                "values".into(),
                if *keyed {
                    Value::Object(
                        values
                            .into_iter()
                            .map(|(p, v)| (java_double(p), opt_number(v)))
                            .collect(),
                    )
                } else {
                    Value::Array(
                        values
                            .into_iter()
                            .map(|(p, v)| json!({"key": p, "value": opt_number(v)}))
                            .collect(),
                    )
                },
            );
        }
        NativeKind::TopHits {
            sorts,
            source,
            version,
            seq_no_primary_term,
            sorted,
            from,
            size,
        } => {
            let mut hits: Vec<_> = match result {
                Some(AggregationResult::MetricResult(MetricResult::TopHits(top))) => {
                    top.hits.iter().collect()
                }
                _ => Vec::new(),
            };
            // OpenSearch order: per key, missing values last in both directions.
            hits.sort_by(|a, b| {
                for ((x, y), (kind, desc)) in a.sort.iter().zip(&b.sort).zip(sorts) {
                    let o = match (x, y) {
                        (Some(x), Some(y)) => {
                            let o = if *kind == ValueKind::Double {
                                f64::from_u64(*x).total_cmp(&f64::from_u64(*y))
                            } else {
                                x.cmp(y)
                            };
                            if *desc {
                                o.reverse()
                            } else {
                                o
                            }
                        }
                        (Some(_), None) => Ordering::Less,
                        (None, Some(_)) => Ordering::Greater,
                        (None, None) => Ordering::Equal,
                    };
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                Ordering::Equal
            });
            let mut rendered = Vec::new();
            for hit in hits.into_iter().skip(*from).take(*size) {
                let Some(id) = hit.doc_value_fields.get("_id").and_then(first_str) else {
                    continue;
                };
                let Some(doc) = rc.top_hits_docs.get(&id).copied() else {
                    continue;
                };
                let mut h = Map::new();
                h.insert("_index".into(), json!((rc.index_name_of_shard)(doc.shard)));
                h.insert("_id".into(), json!(id));
                if *version {
                    h.insert("_version".into(), json!(doc.version));
                }
                if *seq_no_primary_term {
                    h.insert("_seq_no".into(), json!(doc.seq_no));
                    h.insert("_primary_term".into(), json!(doc.primary_term));
                }
                h.insert("_score".into(), Value::Null);
                if source.fetch {
                    if let Some(src) = (rc.fetch)(doc.shard, doc.address)? {
                        h.insert("_source".into(), filter_source(&src, source));
                    }
                }
                if *sorted {
                    let values: Vec<Value> = hit
                        .sort
                        .iter()
                        .zip(sorts)
                        .map(|(v, (kind, _))| match v {
                            None => Value::Null,
                            Some(v) => match kind {
                                ValueKind::Double => number(f64::from_u64(*v)),
                                ValueKind::Date => json!(i64::from_u64(*v).div_euclid(1_000_000)),
                                ValueKind::Bool => json!(*v),
                                _ => json!(i64::from_u64(*v)),
                            },
                        })
                        .collect();
                    h.insert("sort".into(), Value::Array(values));
                }
                rendered.push(Value::Object(h));
            }
            out.insert(
                "hits".into(),
                json!({"total": {"value": doc_count, "relation": "eq"}, "max_score": Value::Null, "hits": rendered}),
            );
        }
    }
    Ok(Value::Object(out))
}

/// The error of a `terms` under another aggregation's buckets, whose shards' pages are not
/// tracked: tantivy's sum of the counts the shards cut off (each at most the smallest count the
/// shard sent, so still an upper bound), read as OpenSearch reads errors: none from one shard or
/// in key order, unbounded (-1) for other orders once something was cut.
fn nested_terms_error(shards: u32, order: &[(OrderKey, bool)], cut_off: u64) -> i64 {
    match order.first() {
        _ if shards <= 1 || cut_off == 0 => 0,
        Some((OrderKey::Key, _)) => 0,
        Some((OrderKey::Count, true)) | None => cut_off as i64,
        _ => -1,
    }
}

/// The exact number of distinct values when the hidden list holds them all (none was cut on
/// any segment or shard, and there are no more than the threshold).
fn exact_distinct(
    results: &AggregationResults,
    (name, threshold): &(String, u64),
) -> Option<usize> {
    match results.0.get(name) {
        Some(AggregationResult::BucketResult(BucketResult::Terms {
            buckets,
            sum_other_doc_count: 0,
            ..
        })) if buckets.len() as u64 <= *threshold => Some(buckets.len()),
        _ => None,
    }
}

fn histogram_entries(result: Option<&AggregationResult>) -> Vec<&BucketEntry> {
    match result {
        Some(AggregationResult::BucketResult(BucketResult::Histogram { buckets })) => match buckets
        {
            BucketEntries::Vec(v) => v.iter().collect(),
            BucketEntries::HashMap(m) => m.values().collect(),
        },
        _ => Vec::new(),
    }
}

fn keyed_or_list(named: Vec<(String, Map<String, Value>)>, keyed: bool) -> Value {
    if keyed {
        Value::Object(
            named
                .into_iter()
                .map(|(k, b)| (k, Value::Object(b)))
                .collect(),
        )
    } else {
        Value::Array(named.into_iter().map(|(_, b)| Value::Object(b)).collect())
    }
}
