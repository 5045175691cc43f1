//! Resolves an [`AggRequest`](super::AggRequest) against one index: field names become fast
//! columns (or computed value sources), OpenSearch parameters become tantivy requests, and
//! what tantivy cannot do is either done by Shoal (filters, calendar intervals, overlapping
//! ranges, exact small percentiles) or refused with a 400 naming the construct.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use shoal_mapping::date::DateFormat;
use shoal_mapping::FieldType;
use tantivy::aggregation::agg_req::Aggregations;
use tantivy::aggregation::{AggContextParams, AggregationLimitsGuard, ValueSourceRegistry};

use super::values::{DerivedProvider, Transform};
use super::AggDef;
use crate::search::datemath::{self, CalendarUnit, Interval, Rounding, Zone};
use crate::search::shard_error;
use crate::search::sort::{fielddata_error, kind_of_type, parse_sort, SortTarget, ValueKind};
use crate::search::source::SourceFilter;
use crate::{QueryContext, QueryError};

/// Extra `top_hits` fetched per bucket to put documents without sort values last.
const TOP_HITS_MISSING_SLACK: usize = 100;

/// A column name no index has: tantivy treats it as an empty column.
const UNMAPPED: &str = "\u{1}unmapped";

/// The resolved aggregations of a request on one index.
pub(crate) struct AggPlan {
    pub root: AggLevel,
    pub context: AggContextParams,
    pub has_top_hits: bool,
}

impl std::fmt::Debug for AggPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggPlan").field("has_top_hits", &self.has_top_hits).finish()
    }
}

/// Sibling aggregations: those tantivy runs (`native_req`) and Shoal's filter buckets.
pub(crate) struct AggLevel {
    pub native_req: Aggregations,
    pub nodes: Vec<PlanNode>,
}

pub(crate) enum PlanNode {
    Native(NativeNode),
    Filter(FilterNode),
}

pub(crate) struct NativeNode {
    pub name: String,
    /// The type name used by `typed_keys` (`sterms`, `avg`, ...).
    pub typed_name: &'static str,
    pub kind: NativeKind,
    pub meta: Option<Value>,
    pub children: Vec<NativeNode>,
    /// The tantivy request of the children (to build empty buckets).
    pub sub_req: Aggregations,
}

/// `filter` (one unnamed bucket) or `filters`.
pub(crate) struct FilterNode {
    pub name: String,
    pub meta: Option<Value>,
    pub queries: Vec<(Option<String>, Value)>,
    /// `None` for `filter`; for `filters`, whether buckets are keyed by name.
    pub keyed: Option<bool>,
    pub other_bucket_key: Option<String>,
    pub child: AggLevel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyKind {
    Str,
    Long,
    Double,
    Bool,
    Date,
    Unmapped,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OrderKey {
    Count,
    Key,
    Sub(String, Option<String>),
}

pub(crate) struct RangeBucket {
    pub key: Option<String>,
    pub from: Option<f64>,
    pub to: Option<f64>,
    /// The tantivy aggregation (layer) holding it, and its key there.
    pub layer: String,
    pub tantivy_key: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricOp {
    Avg,
    Sum,
    Min,
    Max,
    Stats,
    ExtendedStats,
    ValueCount,
    Cardinality,
}

pub(crate) enum NativeKind {
    Terms { key_kind: KeyKind, size: usize, min_doc_count: u64, order: Vec<(OrderKey, bool)>, format: String },
    Range { buckets: Vec<RangeBucket>, keyed: bool, is_date: bool, format: String, zone: Zone },
    Histogram { keyed: bool, order: Vec<(OrderKey, bool)> },
    DateHistogram {
        rounding: Rounding,
        min_doc_count: u64,
        extended_bounds: Option<(i64, i64)>,
        hard_bounds: Option<(i64, i64)>,
        format: String,
        keyed: bool,
        order: Vec<(OrderKey, bool)>,
    },
    Metric { op: MetricOp, is_date: bool, format: String, sigma: f64 },
    Percentiles { percents: Vec<f64>, keyed: bool, values_name: String },
    TopHits {
        sorts: Vec<(ValueKind, bool)>,
        source: SourceFilter,
        version: bool,
        seq_no_primary_term: bool,
        sorted: bool,
        from: usize,
        size: usize,
    },
}

struct PlanCtx<'a, 'b> {
    q: &'a QueryContext<'b>,
    registry: ValueSourceRegistry,
    counter: usize,
    has_top_hits: bool,
}

/// Resolves a request's aggregations against an index.
pub(crate) fn plan_aggs(defs: &[AggDef], ctx: &QueryContext) -> Result<AggPlan, QueryError> {
    let mut pc = PlanCtx { q: ctx, registry: ValueSourceRegistry::default(), counter: 0, has_top_hits: false };
    let root = plan_level(defs, &mut pc)?;
    let context = AggContextParams::new(AggregationLimitsGuard::new(None, Some(u32::MAX)), Default::default())
        .with_value_sources(Arc::new(pc.registry));
    Ok(AggPlan { root, context, has_top_hits: pc.has_top_hits })
}

fn to_aggregations(map: Map<String, Value>) -> Result<Aggregations, QueryError> {
    serde_json::from_value(Value::Object(map))
        .map_err(|e| QueryError::IllegalArgument(format!("invalid aggregation request: {e}")))
}

fn plan_level(defs: &[AggDef], pc: &mut PlanCtx) -> Result<AggLevel, QueryError> {
    let mut native = Map::new();
    let mut nodes = Vec::new();
    for def in defs {
        if def.kind == "filter" || def.kind == "filters" {
            nodes.push(PlanNode::Filter(plan_filter(def, pc)?));
        } else {
            let (node, requests) = plan_native(def, pc)?;
            native.extend(requests);
            nodes.push(PlanNode::Native(node));
        }
    }
    Ok(AggLevel { native_req: to_aggregations(native)?, nodes })
}

fn plan_filter(def: &AggDef, pc: &mut PlanCtx) -> Result<FilterNode, QueryError> {
    let body = def.body.as_object().expect("validated at parse time");
    let (queries, keyed, other) = if def.kind == "filter" {
        (vec![(None, def.body.clone())], None, None)
    } else {
        let mut other = None;
        let mut queries = Vec::new();
        let mut keyed = None;
        for (key, value) in body {
            match key.as_str() {
                "filters" => match value {
                    Value::Object(named) => {
                        let mut named: Vec<_> = named.iter().map(|(k, q)| (Some(k.clone()), q.clone())).collect();
                        named.sort_by(|a, b| a.0.cmp(&b.0));
                        queries = named;
                        keyed = Some(true);
                    }
                    Value::Array(items) => {
                        queries = items.iter().map(|q| (None, q.clone())).collect();
                        keyed = Some(false);
                    }
                    _ => return Err(QueryError::Parsing(format!("[filters] in [{}] must be an object or an array", def.name))),
                },
                "other_bucket" => {
                    if value.as_bool() == Some(true) && other.is_none() {
                        other = Some("_other_".to_string());
                    }
                }
                "other_bucket_key" => other = Some(value.as_str().unwrap_or("_other_").to_string()),
                "keyed" => {}
                unknown => return Err(QueryError::Parsing(format!("Unknown key for a VALUE in [{unknown}]."))),
            }
        }
        let Some(keyed) = keyed else {
            return Err(QueryError::Parsing(format!("[filters] cannot be empty in [{}]", def.name)));
        };
        (queries, Some(keyed), other)
    };
    Ok(FilterNode {
        name: def.name.clone(),
        meta: def.meta.clone(),
        queries,
        keyed,
        other_bucket_key: other,
        child: plan_level(&def.subs, pc)?,
    })
}

/// A field an aggregation reads.
struct Field {
    path: String,
    field_type: Option<FieldType>,
    column: Option<String>,
    date_format: String,
}

impl Field {
    fn is(&self, t: FieldType) -> bool {
        self.field_type == Some(t)
    }
}

fn resolve_field(def: &AggDef, pc: &PlanCtx) -> Result<Field, QueryError> {
    let body = &def.body;
    if body.get("script").is_some() {
        return Err(QueryError::IllegalArgument(format!("[script] in aggregation [{}] is not supported by Shoal yet", def.name)));
    }
    let Some(path) = body.get("field").and_then(Value::as_str) else {
        return Err(QueryError::IllegalArgument("Required one of fields [field, script], but none were specified. ".into()));
    };
    let default_format = shoal_mapping::date::DEFAULT_DATE_FORMAT.to_string();
    let field = |t: FieldType, column: &str| Field {
        path: path.to_string(),
        field_type: Some(t),
        column: Some(column.to_string()),
        date_format: default_format.clone(),
    };
    Ok(match path {
        "_id" => field(FieldType::Keyword, "_id"),
        "_seq_no" | "_primary_term" | "_version" => field(FieldType::Long, path),
        "_index" | "_routing" | "_source" => {
            return Err(QueryError::IllegalArgument(format!("aggregations on [{path}] are not supported by Shoal yet")))
        }
        _ => match pc.q.mapping.field(path) {
            Some(f) if f.field_type == FieldType::Text => return Err(fielddata_error(path)),
            Some(f) => Field {
                path: path.to_string(),
                field_type: Some(f.field_type),
                column: pc.q.schema.fast_column(path, f),
                date_format: f.date_format().to_string(),
            },
            None => Field { path: path.to_string(), field_type: None, column: None, date_format: default_format },
        },
    })
}

fn unsupported_type(field: &Field, agg: &str) -> QueryError {
    shard_error(
        "illegal_argument_exception",
        format!(
            "Field [{}] of type [{}] is not supported for aggregation [{agg}]",
            field.path,
            field.field_type.map(FieldType::name).unwrap_or("unmapped")
        ),
    )
}

impl PlanCtx<'_, '_> {
    fn register(&mut self, column: &str, transform: Transform) -> String {
        self.counter += 1;
        let name = format!("\u{1}derived{}\u{1}{column}", self.counter);
        self.registry.register(&name, Arc::new(DerivedProvider { column: column.to_string(), transform }));
        name
    }

    /// The column tantivy reads for a value aggregation: dates as epoch millis and booleans
    /// as 0/1 through computed columns.
    fn value_column(&mut self, field: &Field) -> String {
        let Some(column) = field.column.clone() else { return UNMAPPED.to_string() };
        match field.field_type {
            Some(FieldType::Date) => self.register(&column, Transform::DateMillis),
            Some(FieldType::Boolean) => self.register(&column, Transform::BoolAsLong),
            _ => column,
        }
    }
}

fn key_kind(field: &Field) -> KeyKind {
    match field.field_type {
        None => KeyKind::Unmapped,
        Some(t) => match kind_of_type(t) {
            ValueKind::Keyword => KeyKind::Str,
            ValueKind::Bool => KeyKind::Bool,
            ValueKind::Date => KeyKind::Date,
            ValueKind::Double => KeyKind::Double,
            _ => KeyKind::Long,
        },
    }
}

fn is_numeric_like(field: &Field) -> bool {
    !matches!(key_kind(field), KeyKind::Str)
}

fn get_u64(def: &AggDef, key: &str, default: u64) -> Result<u64, QueryError> {
    match def.body.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .ok_or_else(|| QueryError::Parsing(format!("[{key}] in [{}] must be a non-negative integer", def.name))),
    }
}

fn format_of(def: &AggDef, field: &Field) -> String {
    def.body.get("format").and_then(Value::as_str).map(String::from).unwrap_or_else(|| field.date_format.clone())
}

fn parse_date_bound(value: &Value, format: &str, pc: &PlanCtx, what: &str) -> Result<f64, QueryError> {
    let parsed = DateFormat::parse(format).map_err(QueryError::IllegalArgument)?;
    datemath::parse_date(value, &parsed, pc.q.now_millis)
        .map(|ms| ms as f64)
        .map_err(|e| QueryError::Parsing(format!("failed to parse [{what}]: {e}")))
}

/// A `missing` value converted to the column tantivy reads.
fn missing_value(def: &AggDef, field: &Field, pc: &PlanCtx) -> Result<Option<Value>, QueryError> {
    let Some(missing) = def.body.get("missing") else { return Ok(None) };
    Ok(Some(match key_kind(field) {
        KeyKind::Str | KeyKind::Unmapped => match missing {
            Value::String(_) => missing.clone(),
            other => json!(other.to_string()),
        },
        KeyKind::Date => json!(parse_date_bound(missing, &field.date_format, pc, "missing")? as i64),
        KeyKind::Bool => json!(match missing {
            Value::Bool(b) => *b as i64,
            Value::String(s) if s == "true" => 1,
            _ => 0,
        }),
        KeyKind::Long => json!(missing.as_f64().or_else(|| missing.as_str().and_then(|s| s.parse().ok())).unwrap_or(0.0) as i64),
        KeyKind::Double => json!(missing.as_f64().or_else(|| missing.as_str().and_then(|s| s.parse().ok())).unwrap_or(0.0)),
    }))
}

fn with_subs(mut request: Value, subs: &Map<String, Value>) -> Value {
    if !subs.is_empty() {
        request["aggs"] = Value::Object(subs.clone());
    }
    request
}

fn plan_native(def: &AggDef, pc: &mut PlanCtx) -> Result<(NativeNode, Vec<(String, Value)>), QueryError> {
    let mut children = Vec::new();
    let mut sub_json = Map::new();
    for sub in &def.subs {
        if sub.kind == "filter" || sub.kind == "filters" {
            return Err(QueryError::IllegalArgument(format!(
                "[{}] aggregation [{}] under the [{}] aggregation [{}] is not supported by Shoal yet: filter and filters aggregations may only be used at the top level or under other filter or filters aggregations",
                sub.kind, sub.name, def.kind, def.name
            )));
        }
        let (child, requests) = plan_native(sub, pc)?;
        sub_json.extend(requests);
        children.push(child);
    }
    let sub_req = to_aggregations(sub_json.clone())?;
    let node = |typed_name: &'static str, kind: NativeKind, children: Vec<NativeNode>, sub_req: Aggregations| NativeNode {
        name: def.name.clone(),
        typed_name,
        kind,
        meta: def.meta.clone(),
        children,
        sub_req,
    };
    let name = def.name.clone();
    match def.kind.as_str() {
        "terms" => {
            let field = resolve_field(def, pc)?;
            let size = get_u64(def, "size", 10)? as usize;
            if size == 0 {
                return Err(QueryError::IllegalArgument(format!("[size] must be greater than 0. Found [0] in [{name}]")));
            }
            let shard_size = (get_u64(def, "shard_size", (size as f64 * 1.5 + 10.0) as u64)? as usize).max(size);
            let min_doc_count = get_u64(def, "min_doc_count", 1)?;
            let order = parse_order(def, true)?;
            let key_kind = key_kind(&field);
            let mut params = json!({
                "field": pc.value_column(&field),
                "size": shard_size,
                "segment_size": shard_size.max(size * 10),
                "min_doc_count": if key_kind == KeyKind::Str { min_doc_count.min(1) } else { 1 },
                "show_term_doc_count_error": true,
                "order": tantivy_order(&order, def),
            });
            if let Some(missing) = missing_value(def, &field, pc)? {
                params["missing"] = missing;
            }
            for key in ["include", "exclude"] {
                match def.body.get(key) {
                    None => {}
                    Some(v @ (Value::String(_) | Value::Array(_))) if key_kind == KeyKind::Str => params[key] = v.clone(),
                    Some(Value::String(_) | Value::Array(_)) => {
                        return Err(QueryError::IllegalArgument(format!(
                            "[{key}] in terms aggregation [{name}] is only supported on keyword fields by Shoal yet"
                        )))
                    }
                    Some(_) => return Err(QueryError::IllegalArgument(format!("[{key}] partitions in terms aggregation [{name}] are not supported by Shoal yet"))),
                }
            }
            let typed = match key_kind {
                KeyKind::Str => "sterms",
                KeyKind::Double => "dterms",
                KeyKind::Unmapped => "umterms",
                _ => "lterms",
            };
            let kind = NativeKind::Terms { key_kind, size, min_doc_count, order, format: format_of(def, &field) };
            let request = with_subs(json!({"terms": params}), &sub_json);
            Ok((node(typed, kind, children, sub_req), vec![(name, request)]))
        }
        "range" | "date_range" => {
            let field = resolve_field(def, pc)?;
            if !is_numeric_like(&field) {
                return Err(unsupported_type(&field, &def.kind));
            }
            let is_date = def.kind == "date_range" || field.is(FieldType::Date);
            let format = format_of(def, &field);
            let zone = match def.body.get("time_zone").and_then(Value::as_str) {
                Some(z) => Zone::parse(z).map_err(QueryError::IllegalArgument)?,
                None => Zone::UTC,
            };
            let integer = matches!(key_kind(&field), KeyKind::Long | KeyKind::Bool | KeyKind::Date);
            let Some(Value::Array(ranges)) = def.body.get("ranges") else {
                return Err(QueryError::IllegalArgument(format!("No [ranges] specified for the [{name}] aggregation")));
            };
            let mut parsed = Vec::new();
            for range in ranges {
                let bound = |key: &str| -> Result<Option<f64>, QueryError> {
                    match range.get(key) {
                        None | Some(Value::Null) => Ok(None),
                        Some(v) if is_date => parse_date_bound(v, &format, pc, key).map(Some),
                        Some(v) => v
                            .as_f64()
                            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                            .map(Some)
                            .ok_or_else(|| QueryError::Parsing(format!("[{key}] in range aggregation [{name}] must be a number"))),
                    }
                };
                let key = range.get("key").and_then(Value::as_str).map(String::from);
                parsed.push((key, bound("from")?, bound("to")?));
            }
            parsed.sort_by(|a, b| {
                let lo = |v: Option<f64>| v.unwrap_or(f64::NEG_INFINITY);
                let hi = |v: Option<f64>| v.unwrap_or(f64::INFINITY);
                lo(a.1).total_cmp(&lo(b.1)).then(hi(a.2).total_cmp(&hi(b.2)))
            });
            let column = pc.value_column(&field);
            // tantivy refuses overlapping ranges: spread them over layers of disjoint ranges.
            let mut layers: Vec<(f64, Vec<Value>)> = Vec::new();
            let mut buckets = Vec::new();
            for (i, (key, from, to)) in parsed.into_iter().enumerate() {
                let start = from.unwrap_or(f64::NEG_INFINITY);
                let end = to.unwrap_or(f64::INFINITY);
                let layer = match layers.iter().position(|(layer_end, _)| *layer_end <= start) {
                    Some(l) => l,
                    None => {
                        layers.push((f64::NEG_INFINITY, Vec::new()));
                        layers.len() - 1
                    }
                };
                layers[layer].0 = end;
                let tantivy_key = format!("\u{1}{i}");
                let snap = |v: f64| if integer { v.ceil() } else { v };
                let mut r = json!({"key": tantivy_key});
                if let Some(f) = from {
                    r["from"] = json!(snap(f));
                }
                if let Some(t) = to {
                    r["to"] = json!(snap(t));
                }
                layers[layer].1.push(r);
                let layer_name = if layer == 0 { name.clone() } else { format!("{name}\u{1}layer{layer}") };
                buckets.push(RangeBucket { key, from, to, layer: layer_name, tantivy_key });
            }
            if layers.is_empty() {
                return Err(QueryError::IllegalArgument(format!("No [ranges] specified for the [{name}] aggregation")));
            }
            let requests = layers
                .into_iter()
                .enumerate()
                .map(|(l, (_, ranges))| {
                    let layer_name = if l == 0 { name.clone() } else { format!("{name}\u{1}layer{l}") };
                    (layer_name, with_subs(json!({"range": {"field": column, "ranges": ranges}}), &sub_json))
                })
                .collect();
            let keyed = def.body.get("keyed").and_then(Value::as_bool).unwrap_or(false);
            let typed = if def.kind == "date_range" { "date_range" } else { "range" };
            Ok((node(typed, NativeKind::Range { buckets, keyed, is_date, format, zone }, children, sub_req), requests))
        }
        "histogram" => {
            let field = resolve_field(def, pc)?;
            if !is_numeric_like(&field) {
                return Err(unsupported_type(&field, "histogram"));
            }
            let interval = def.body.get("interval").and_then(Value::as_f64).unwrap_or(0.0);
            if interval <= 0.0 {
                return Err(QueryError::IllegalArgument(format!("[interval] must be >0 for histogram aggregation [{name}]")));
            }
            if def.body.get("missing").is_some() {
                return Err(QueryError::IllegalArgument(format!("[missing] in histogram aggregation [{name}] is not supported by Shoal yet")));
            }
            let mut params = json!({
                "field": pc.value_column(&field),
                "interval": interval,
                "min_doc_count": get_u64(def, "min_doc_count", 0)?,
            });
            for key in ["offset", "extended_bounds", "hard_bounds"] {
                if let Some(v) = def.body.get(key) {
                    params[key] = v.clone();
                }
            }
            let keyed = def.body.get("keyed").and_then(Value::as_bool).unwrap_or(false);
            let order = parse_order(def, false)?;
            let request = with_subs(json!({"histogram": params}), &sub_json);
            Ok((node("histogram", NativeKind::Histogram { keyed, order }, children, sub_req), vec![(name, request)]))
        }
        "date_histogram" => plan_date_histogram(def, pc, children, sub_req, &sub_json),
        "avg" | "sum" | "min" | "max" | "stats" | "extended_stats" | "value_count" | "cardinality" => {
            let field = resolve_field(def, pc)?;
            let op = match def.kind.as_str() {
                "avg" => MetricOp::Avg,
                "sum" => MetricOp::Sum,
                "min" => MetricOp::Min,
                "max" => MetricOp::Max,
                "stats" => MetricOp::Stats,
                "extended_stats" => MetricOp::ExtendedStats,
                "value_count" => MetricOp::ValueCount,
                _ => MetricOp::Cardinality,
            };
            let numeric_only = !matches!(op, MetricOp::ValueCount | MetricOp::Cardinality);
            if numeric_only && !is_numeric_like(&field) {
                return Err(unsupported_type(&field, &def.kind));
            }
            let mut params = json!({"field": pc.value_column(&field)});
            if let Some(missing) = missing_value(def, &field, pc)? {
                params["missing"] = missing;
            }
            let sigma = def.body.get("sigma").and_then(Value::as_f64).unwrap_or(2.0);
            if sigma < 0.0 {
                return Err(QueryError::IllegalArgument(format!("[sigma] must be greater than or equal to 0. Found [{sigma}] in [{name}]")));
            }
            let kind = NativeKind::Metric { op, is_date: field.is(FieldType::Date), format: format_of(def, &field), sigma };
            let typed: &'static str = match op {
                MetricOp::Avg => "avg",
                MetricOp::Sum => "sum",
                MetricOp::Min => "min",
                MetricOp::Max => "max",
                MetricOp::Stats => "stats",
                MetricOp::ExtendedStats => "extended_stats",
                MetricOp::ValueCount => "value_count",
                MetricOp::Cardinality => "cardinality",
            };
            Ok((node(typed, kind, children, sub_req), vec![(name, json!({ def.kind.as_str(): params }))]))
        }
        "percentiles" => {
            let field = resolve_field(def, pc)?;
            if !is_numeric_like(&field) {
                return Err(unsupported_type(&field, "percentiles"));
            }
            let percents: Vec<f64> = match def.body.get("percents") {
                Some(Value::Array(items)) => items.iter().filter_map(Value::as_f64).collect(),
                _ => vec![1.0, 5.0, 25.0, 50.0, 75.0, 95.0, 99.0],
            };
            if let Some(bad) = percents.iter().find(|p| !(0.0..=100.0).contains(*p)) {
                return Err(QueryError::IllegalArgument(format!("percent must be in [0,100], got [{bad}]: percent [{bad}]")));
            }
            if percents.is_empty() {
                return Err(QueryError::IllegalArgument(format!("[percents] must not be empty: [{name}]")));
            }
            let column = pc.value_column(&field);
            let missing = missing_value(def, &field, pc)?;
            let mut params = json!({"field": column, "percents": percents, "keyed": false});
            let mut values = json!({"field": column, "size": 1000, "segment_size": 1000, "order": {"_key": "asc"}});
            if let Some(m) = missing {
                params["missing"] = m.clone();
                values["missing"] = m;
            }
            let keyed = def.body.get("keyed").and_then(Value::as_bool).unwrap_or(true);
            let values_name = format!("{name}\u{1}values");
            let requests = vec![(name, json!({"percentiles": params})), (values_name.clone(), json!({"terms": values}))];
            Ok((node("tdigest_percentiles", NativeKind::Percentiles { percents, keyed, values_name }, children, sub_req), requests))
        }
        "top_hits" => plan_top_hits(def, pc, children, sub_req),
        other => Err(QueryError::Parsing(format!("Unknown aggregation type [{other}]"))),
    }
}

fn plan_date_histogram(
    def: &AggDef,
    pc: &mut PlanCtx,
    children: Vec<NativeNode>,
    sub_req: Aggregations,
    sub_json: &Map<String, Value>,
) -> Result<(NativeNode, Vec<(String, Value)>), QueryError> {
    let name = def.name.clone();
    let field = resolve_field(def, pc)?;
    if !is_numeric_like(&field) {
        return Err(unsupported_type(&field, "date_histogram"));
    }
    let text = |key: &str| def.body.get(key).and_then(Value::as_str);
    let fixed = |value: &str| {
        datemath::parse_time_millis(value).filter(|ms| *ms > 0).map(Interval::Fixed).ok_or_else(|| {
            QueryError::IllegalArgument(format!(
                "failed to parse setting [date_histogram.fixedInterval] with value [{value}] as a time value: unit is missing or unrecognized"
            ))
        })
    };
    let interval = match (text("calendar_interval"), text("fixed_interval"), text("interval")) {
        (Some(c), None, None) => Interval::Calendar(CalendarUnit::parse(c).ok_or_else(|| {
            QueryError::IllegalArgument(format!("The supplied interval [{c}] could not be parsed as a calendar interval."))
        })?),
        (None, Some(f), None) => fixed(f)?,
        (None, None, Some(i)) => match CalendarUnit::parse(i) {
            Some(unit) => Interval::Calendar(unit),
            None => fixed(i)?,
        },
        (None, None, None) => {
            return Err(QueryError::IllegalArgument(
                "Required one of fields [interval, calendar_interval, fixed_interval], but none were specified.".into(),
            ))
        }
        _ => {
            return Err(QueryError::IllegalArgument(
                "Cannot use more than one of [interval], [calendar_interval] and [fixed_interval]".into(),
            ))
        }
    };
    if def.body.get("missing").is_some() {
        return Err(QueryError::IllegalArgument(format!("[missing] in date_histogram aggregation [{name}] is not supported by Shoal yet")));
    }
    let zone = match text("time_zone") {
        Some(z) => Zone::parse(z).map_err(QueryError::IllegalArgument)?,
        None => Zone::UTC,
    };
    let offset_ms = match def.body.get("offset") {
        None => 0,
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => {
            let (sign, rest) = match s.strip_prefix('-') {
                Some(r) => (-1, r),
                None => (1, s.strip_prefix('+').unwrap_or(s)),
            };
            sign * datemath::parse_time_millis(rest)
                .ok_or_else(|| QueryError::IllegalArgument(format!("failed to parse [offset] value [{s}]")))?
        }
        Some(_) => return Err(QueryError::IllegalArgument(format!("[offset] of [{name}] must be a string"))),
    };
    let format = format_of(def, &field);
    let bounds = |key: &str| -> Result<Option<(i64, i64)>, QueryError> {
        let Some(b) = def.body.get(key) else { return Ok(None) };
        let min = b.get("min").map(|v| parse_date_bound(v, &field.date_format, pc, key)).transpose()?;
        let max = b.get("max").map(|v| parse_date_bound(v, &field.date_format, pc, key)).transpose()?;
        Ok(Some((min.unwrap_or(f64::MIN) as i64, max.unwrap_or(f64::MAX) as i64)))
    };
    let extended_bounds = bounds("extended_bounds")?;
    let hard_bounds = bounds("hard_bounds")?;
    let rounding = Rounding { interval, zone, offset_ms };
    let column = match &field.column {
        Some(c) => pc.register(c, Transform::Round(rounding)),
        None => UNMAPPED.to_string(),
    };
    let kind = NativeKind::DateHistogram {
        rounding,
        min_doc_count: get_u64(def, "min_doc_count", 0)?,
        extended_bounds,
        hard_bounds,
        format,
        keyed: def.body.get("keyed").and_then(Value::as_bool).unwrap_or(false),
        order: parse_order(def, false)?,
    };
    let request = with_subs(json!({"histogram": {"field": column, "interval": 1.0, "min_doc_count": 1}}), sub_json);
    let node = NativeNode { name: name.clone(), typed_name: "date_histogram", kind, meta: def.meta.clone(), children, sub_req };
    Ok((node, vec![(name, request)]))
}

fn plan_top_hits(
    def: &AggDef,
    pc: &mut PlanCtx,
    children: Vec<NativeNode>,
    sub_req: Aggregations,
) -> Result<(NativeNode, Vec<(String, Value)>), QueryError> {
    let name = def.name.clone();
    let mut sort_json = Vec::new();
    let mut sorts = Vec::new();
    let mut source = SourceFilter::default();
    let (mut version, mut seq_no) = (false, false);
    for (key, value) in def.body.as_object().expect("validated at parse time") {
        match key.as_str() {
            "size" | "from" | "track_scores" => {}
            "sort" => {
                for spec in parse_sort(value)? {
                    let SortTarget::Field(path) = &spec.target else {
                        return Err(QueryError::IllegalArgument(format!(
                            "sorting top_hits [{name}] by [_score] or [_doc] is not supported by Shoal yet"
                        )));
                    };
                    let field = resolve_field(&AggDef { body: json!({"field": path}), ..def.clone() }, pc)?;
                    let kind = field.field_type.map(kind_of_type);
                    let (Some(kind), Some(column)) = (kind, field.column.clone()) else {
                        return Err(shard_error("query_shard_exception", format!("No mapping found for [{path}] in order to sort on")));
                    };
                    if kind == ValueKind::Keyword {
                        return Err(QueryError::IllegalArgument(format!(
                            "sorting top_hits [{name}] on keyword field [{path}] is not supported by Shoal yet"
                        )));
                    }
                    let desc = spec.order == crate::search::sort::SortOrder::Desc;
                    sort_json.push(json!({ column: if desc { "desc" } else { "asc" } }));
                    sorts.push((kind, desc));
                }
            }
            "_source" => source = SourceFilter::from_json(value)?,
            "version" => version = value.as_bool().unwrap_or(false),
            "seq_no_primary_term" => seq_no = value.as_bool().unwrap_or(false),
            other => {
                return Err(QueryError::IllegalArgument(format!(
                    "[{other}] in top_hits aggregation [{name}] is not supported by Shoal yet"
                )))
            }
        }
    }
    pc.has_top_hits = true;
    let size = get_u64(def, "size", 3)? as usize;
    let from = get_u64(def, "from", 0)? as usize;
    let sorted = !sorts.is_empty();
    // tantivy puts documents without a sort value first, OpenSearch last: fetch extra hits
    // and re-sort them when rendering.
    let fetch = from + size + if sorted { TOP_HITS_MISSING_SLACK } else { 0 };
    let request = json!({"top_hits": {"size": fetch, "from": 0, "sort": sort_json, "docvalue_fields": ["_id"]}});
    let kind = NativeKind::TopHits { sorts, source, version, seq_no_primary_term: seq_no, sorted, from, size };
    let node = NativeNode { name: name.clone(), typed_name: "top_hits", kind, meta: def.meta.clone(), children, sub_req };
    Ok((node, vec![(name, request)]))
}

/// Parses `order` (an object or an array of objects) and appends OpenSearch's `_key asc`
/// tie-breaker.
fn parse_order(def: &AggDef, terms: bool) -> Result<Vec<(OrderKey, bool)>, QueryError> {
    let default = if terms { vec![(OrderKey::Count, true)] } else { vec![(OrderKey::Key, false)] };
    let entries: Vec<(String, Value)> = match def.body.get("order") {
        None => return Ok(with_tie_break(default)),
        Some(Value::Object(map)) => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())))
            .collect(),
        Some(_) => return Err(QueryError::Parsing(format!("[order] of [{}] must be an object or an array", def.name))),
    };
    let mut order = Vec::new();
    for (key, dir) in entries {
        let desc = match dir.as_str().map(str::to_ascii_lowercase).as_deref() {
            Some("asc") => false,
            Some("desc") => true,
            _ => return Err(QueryError::Parsing(format!("Unknown order direction [{dir}] in [{}]", def.name))),
        };
        let target = match key.as_str() {
            "_count" => OrderKey::Count,
            "_key" | "_term" | "_time" => OrderKey::Key,
            path => {
                if path.contains('>') || path.contains('[') {
                    return Err(QueryError::IllegalArgument(format!("order path [{path}] in [{}] is not supported by Shoal yet", def.name)));
                }
                let (agg, prop) = match path.split_once('.') {
                    Some((a, p)) => (a.to_string(), Some(p.to_string())),
                    None => (path.to_string(), None),
                };
                let known = def.subs.iter().any(|s| {
                    s.name == agg
                        && matches!(
                            s.kind.as_str(),
                            "avg" | "sum" | "min" | "max" | "stats" | "extended_stats" | "value_count" | "cardinality" | "percentiles"
                        )
                });
                if !known {
                    return Err(shard_error(
                        "aggregation_execution_exception",
                        format!(
                            "Invalid aggregator order path [{path}]. The provided aggregation [{agg}] either does not exist, or is a pipeline aggregation and cannot be used to sort the buckets."
                        ),
                    ));
                }
                OrderKey::Sub(agg, prop)
            }
        };
        order.push((target, desc));
    }
    if order.is_empty() {
        order = default;
    }
    Ok(with_tie_break(order))
}

fn with_tie_break(mut order: Vec<(OrderKey, bool)>) -> Vec<(OrderKey, bool)> {
    if !order.iter().any(|(k, _)| *k == OrderKey::Key) {
        order.push((OrderKey::Key, false));
    }
    order
}

/// The order tantivy uses to prune terms per segment: the first criterion when tantivy
/// understands it, `_count desc` otherwise (Shoal re-sorts the final buckets anyway).
fn tantivy_order(order: &[(OrderKey, bool)], def: &AggDef) -> Value {
    let dir = |desc: bool| if desc { "desc" } else { "asc" };
    match order.first() {
        Some((OrderKey::Key, desc)) => json!({"_key": dir(*desc)}),
        Some((OrderKey::Sub(agg, prop), desc)) => {
            let kind = def.subs.iter().find(|s| s.name == *agg).map(|s| s.kind.as_str()).unwrap_or("");
            match (kind, prop.as_deref()) {
                ("avg" | "sum" | "min" | "max" | "value_count" | "cardinality", None | Some("value")) => {
                    json!({ agg.as_str(): dir(*desc) })
                }
                ("stats" | "extended_stats", Some(p)) if matches!(p, "avg" | "sum" | "min" | "max" | "count") => {
                    json!({ format!("{agg}.{p}"): dir(*desc) })
                }
                _ => json!({"_count": "desc"}),
            }
        }
        Some((OrderKey::Count, desc)) => json!({"_count": dir(*desc)}),
        None => json!({"_count": "desc"}),
    }
}
