//! Planning of the aggregations tantivy runs: OpenSearch parameters translated to tantivy
//! requests, with Shoal's adjustments (computed columns, layered overlapping ranges, calendar
//! rounding, exact small percentiles, top hits that fetch sources).

use serde_json::{json, Map, Value};
use shoal_mapping::FieldType;
use tantivy::aggregation::agg_req::Aggregations;

use super::fill::HistogramGrid;
use super::order::{parse_order, tantivy_cuts_in_order, tantivy_order};
use super::plan::*;
use super::values::Transform;
use super::AggDef;
use crate::search::datemath::{self, CalendarUnit, Interval, Rounding, Zone};
use crate::search::shard_error;
use crate::search::sort::{kind_of_type, parse_sort, SortTarget, ValueKind};
use crate::search::source::SourceFilter;
use crate::QueryError;

/// Extra `top_hits` fetched per bucket to put documents without sort values last.
const TOP_HITS_MISSING_SLACK: usize = 100;

pub(super) fn plan_native(
    def: &AggDef,
    pc: &mut PlanCtx,
) -> Result<(NativeNode, Vec<(String, Value)>), QueryError> {
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
    let node = |typed_name: &'static str,
                kind: NativeKind,
                children: Vec<NativeNode>,
                sub_req: Aggregations| NativeNode {
        name: def.name.clone(),
        typed_name: typed_name.into(),
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
                return Err(QueryError::IllegalArgument(format!(
                    "[size] must be greater than 0. Found [0] in [{name}]"
                )));
            }
            let order = parse_order(def, true)?;
            let shard_size = if tantivy_cuts_in_order(&order, def) {
                terms_shard_size(def, size)?
            } else {
                UNCUT_SHARD_SIZE
            };
            let show_error = match def.body.get("show_term_doc_count_error") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(other) => {
                    return Err(QueryError::Parsing(format!(
                        "[show_term_doc_count_error] in [{name}] must be a boolean, got [{other}]"
                    )))
                }
            };
            let min_doc_count = get_u64(def, "min_doc_count", 1)?;
            let key_kind = key_kind(&field);
            // `segment_size` here is the shard's cut (collect_req lifts it for segments).
            let mut params = json!({
                "field": pc.value_column(&field),
                "size": shard_size,
                "segment_size": shard_size,
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
            let kind = NativeKind::Terms {
                key_kind,
                size,
                shard_size,
                show_error,
                min_doc_count,
                order,
                format: format_of(def, &field),
            };
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
            let integer = matches!(
                key_kind(&field),
                KeyKind::Long | KeyKind::Bool | KeyKind::Date
            );
            let Some(Value::Array(ranges)) = def.body.get("ranges") else {
                return Err(QueryError::IllegalArgument(format!(
                    "No [ranges] specified for the [{name}] aggregation"
                )));
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
                            .ok_or_else(|| {
                                QueryError::Parsing(format!(
                                    "[{key}] in range aggregation [{name}] must be a number"
                                ))
                            }),
                    }
                };
                let key = range.get("key").and_then(Value::as_str).map(String::from);
                parsed.push((key, bound("from")?, bound("to")?));
            }
            parsed.sort_by(|a, b| {
                let lo = |v: Option<f64>| v.unwrap_or(f64::NEG_INFINITY);
                let hi = |v: Option<f64>| v.unwrap_or(f64::INFINITY);
                lo(a.1)
                    .total_cmp(&lo(b.1))
                    .then(hi(a.2).total_cmp(&hi(b.2)))
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
                let layer_name = if layer == 0 {
                    name.clone()
                } else {
                    format!("{name}\u{1}layer{layer}")
                };
                buckets.push(RangeBucket {
                    key,
                    from,
                    to,
                    layer: layer_name,
                    tantivy_key,
                });
            }
            if layers.is_empty() {
                return Err(QueryError::IllegalArgument(format!(
                    "No [ranges] specified for the [{name}] aggregation"
                )));
            }
            let requests = layers
                .into_iter()
                .enumerate()
                .map(|(l, (_, ranges))| {
                    let layer_name = if l == 0 {
                        name.clone()
                    } else {
                        format!("{name}\u{1}layer{l}")
                    };
                    (
                        layer_name,
                        with_subs(
                            json!({"range": {"field": column, "ranges": ranges}}),
                            &sub_json,
                        ),
                    )
                })
                .collect();
            let keyed = def
                .body
                .get("keyed")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let typed = if def.kind == "date_range" {
                "date_range"
            } else {
                "range"
            };
            Ok((
                node(
                    typed,
                    NativeKind::Range {
                        buckets,
                        keyed,
                        is_date,
                        format,
                        zone,
                    },
                    children,
                    sub_req,
                ),
                requests,
            ))
        }
        "histogram" => {
            let field = resolve_field(def, pc)?;
            if !is_numeric_like(&field) {
                return Err(unsupported_type(&field, "histogram"));
            }
            let interval = def
                .body
                .get("interval")
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            if interval <= 0.0 {
                return Err(QueryError::IllegalArgument(format!(
                    "[interval] must be >0 for histogram aggregation [{name}]"
                )));
            }
            if def.body.get("missing").is_some() {
                return Err(QueryError::IllegalArgument(format!(
                    "[missing] in histogram aggregation [{name}] is not supported by Shoal yet"
                )));
            }
            let grid = histogram_grid(def, interval)?;
            // tantivy only makes buckets with documents; empty ones are Shoal's (see fill.rs).
            let mut params = json!({
                "field": pc.value_column(&field),
                "interval": interval,
                "offset": grid.offset,
                "min_doc_count": 1,
            });
            if let Some((min, max)) = grid.hard_bounds {
                params["hard_bounds"] = json!({"min": min, "max": max});
            }
            let keyed = def
                .body
                .get("keyed")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let order = parse_order(def, false)?;
            let request = with_subs(json!({"histogram": params}), &sub_json);
            Ok((
                node(
                    "histogram",
                    NativeKind::Histogram {
                        keyed,
                        order,
                        grid,
                        min_doc_count: get_u64(def, "min_doc_count", 0)?,
                    },
                    children,
                    sub_req,
                ),
                vec![(name, request)],
            ))
        }
        "date_histogram" => plan_date_histogram(def, pc, children, sub_req, &sub_json),
        "avg" | "sum" | "min" | "max" | "stats" | "extended_stats" | "value_count"
        | "cardinality" => {
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
                return Err(QueryError::IllegalArgument(format!(
                    "[sigma] must be greater than or equal to 0. Found [{sigma}] in [{name}]"
                )));
            }
            let mut requests = vec![(name.clone(), json!({ def.kind.as_str(): params.clone() }))];
            let mut distinct = None;
            if op == MetricOp::Cardinality {
                let threshold = precision_threshold(def)?;
                let distinct_name = format!("{name}\u{1}distinct");
                params["size"] = json!(threshold + 1);
                params["segment_size"] = json!(threshold + 1);
                requests.push((distinct_name.clone(), json!({ "terms": params })));
                distinct = Some((distinct_name, threshold));
            }
            let kind = NativeKind::Metric {
                op,
                is_date: field.is(FieldType::Date),
                format: format_of(def, &field),
                sigma,
                distinct,
            };
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
            Ok((node(typed, kind, children, sub_req), requests))
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
                return Err(QueryError::IllegalArgument(format!(
                    "percent must be in [0,100], got [{bad}]: percent [{bad}]"
                )));
            }
            if percents.is_empty() {
                return Err(QueryError::IllegalArgument(format!(
                    "[percents] must not be empty: [{name}]"
                )));
            }
            let column = pc.value_column(&field);
            let missing = missing_value(def, &field, pc)?;
            let mut params = json!({"field": column, "percents": percents, "keyed": false});
            let mut values = json!({"field": column, "size": 1000, "segment_size": 1000, "order": {"_key": "asc"}});
            if let Some(m) = missing {
                params["missing"] = m.clone();
                values["missing"] = m;
            }
            let keyed = def
                .body
                .get("keyed")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            let values_name = format!("{name}\u{1}values");
            let requests = vec![
                (name, json!({"percentiles": params})),
                (values_name.clone(), json!({"terms": values})),
            ];
            Ok((
                node(
                    "tdigest_percentiles",
                    NativeKind::Percentiles {
                        percents,
                        keyed,
                        values_name,
                    },
                    children,
                    sub_req,
                ),
                requests,
            ))
        }
        "top_hits" => plan_top_hits(def, pc, children, sub_req),
        other => Err(QueryError::Parsing(format!(
            "Unknown aggregation type [{other}]"
        ))),
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
        return Err(QueryError::IllegalArgument(format!(
            "[missing] in date_histogram aggregation [{name}] is not supported by Shoal yet"
        )));
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
            sign * datemath::parse_time_millis(rest).ok_or_else(|| {
                QueryError::IllegalArgument(format!("failed to parse [offset] value [{s}]"))
            })?
        }
        Some(_) => {
            return Err(QueryError::IllegalArgument(format!(
                "[offset] of [{name}] must be a string"
            )))
        }
    };
    let format = format_of(def, &field);
    let bounds = |key: &str| -> Result<Option<(i64, i64)>, QueryError> {
        let Some(b) = def.body.get(key) else {
            return Ok(None);
        };
        let min = b
            .get("min")
            .map(|v| parse_date_bound(v, &field.date_format, pc, key))
            .transpose()?;
        let max = b
            .get("max")
            .map(|v| parse_date_bound(v, &field.date_format, pc, key))
            .transpose()?;
        Ok(Some((
            min.unwrap_or(f64::MIN) as i64,
            max.unwrap_or(f64::MAX) as i64,
        )))
    };
    let extended_bounds = bounds("extended_bounds")?;
    let hard_bounds = bounds("hard_bounds")?;
    let rounding = Rounding {
        interval,
        zone,
        offset_ms,
    };
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
        keyed: def
            .body
            .get("keyed")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        order: parse_order(def, false)?,
    };
    let request = with_subs(
        json!({"histogram": {"field": column, "interval": 1.0, "min_doc_count": 1}}),
        sub_json,
    );
    let node = NativeNode {
        name: name.clone(),
        typed_name: "date_histogram".into(),
        kind,
        meta: def.meta.clone(),
        children,
        sub_req,
    };
    Ok((node, vec![(name, request)]))
}

/// `offset`, `extended_bounds` and `hard_bounds` of a `histogram`.
fn histogram_grid(def: &AggDef, interval: f64) -> Result<HistogramGrid, QueryError> {
    let name = &def.name;
    let offset = match def.body.get("offset") {
        None | Some(Value::Null) => 0.0,
        Some(v) => v.as_f64().ok_or_else(|| {
            QueryError::Parsing(format!("[offset] in histogram [{name}] must be a number"))
        })?,
    };
    let bounds = |key: &str| -> Result<Option<(f64, f64)>, QueryError> {
        let Some(b) = def.body.get(key) else {
            return Ok(None);
        };
        let bound = |side: &str, default: f64| match b.get(side) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v
                .as_f64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                .ok_or_else(|| {
                    QueryError::Parsing(format!(
                        "[{key}.{side}] in histogram [{name}] must be a number"
                    ))
                }),
        };
        let (min, max) = (bound("min", f64::MIN)?, bound("max", f64::MAX)?);
        if min > max {
            return Err(QueryError::IllegalArgument(format!(
                "[{key}.min][{min}] cannot be greater than [{key}.max][{max}]"
            )));
        }
        Ok(Some((min, max)))
    };
    Ok(HistogramGrid {
        interval,
        offset,
        extended_bounds: bounds("extended_bounds")?,
        hard_bounds: bounds("hard_bounds")?,
    })
}

/// OpenSearch's `precision_threshold` of `cardinality`: counts up to it are exact (default
/// 3000, at most 40000).
fn precision_threshold(def: &AggDef) -> Result<u64, QueryError> {
    if let Some(v) = def.body.get("precision_threshold") {
        if v.as_i64().is_some_and(|n| n < 0) {
            return Err(QueryError::IllegalArgument(format!(
                "[precisionThreshold] must be greater than or equal to 0. Found [{v}] in [{}]",
                def.name
            )));
        }
    }
    Ok(get_u64(def, "precision_threshold", 3000)?.min(40_000))
}

/// A shard size that cuts nothing. tantivy computes `size * 10` in u32 even when
/// `segment_size` is given, so it stays below `u32::MAX / 10` (400 million buckets is beyond
/// any `search.max_buckets` anyway).
const UNCUT_SHARD_SIZE: usize = (u32::MAX / 10) as usize;

/// OpenSearch's `shard_size`: `size * 1.5 + 10` unless given, at least `size`, never 0.
fn terms_shard_size(def: &AggDef, size: usize) -> Result<usize, QueryError> {
    let default = (size as f64 * 1.5 + 10.0) as u64;
    let shard_size = match def.body.get("shard_size") {
        Some(Value::Number(n)) if n.as_i64().is_some_and(|v| v <= 0) => {
            return Err(QueryError::IllegalArgument(format!(
                "[shardSize] must be greater than 0. Found [{n}] in [{}]",
                def.name
            )))
        }
        _ => get_u64(def, "shard_size", default)?,
    };
    // tantivy computes `size * 10` in u32 even when `segment_size` is given: keep it in range
    // (400 million buckets is beyond any shard's `search.max_buckets` anyway).
    Ok((shard_size as usize)
        .max(size)
        .min((u32::MAX / 10) as usize))
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
                    let field = resolve_field(
                        &AggDef {
                            body: json!({"field": path}),
                            ..def.clone()
                        },
                        pc,
                    )?;
                    let kind = field.field_type.map(kind_of_type);
                    let (Some(kind), Some(column)) = (kind, field.column.clone()) else {
                        return Err(shard_error(
                            "query_shard_exception",
                            format!("No mapping found for [{path}] in order to sort on"),
                        ));
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
    let kind = NativeKind::TopHits {
        sorts,
        source,
        version,
        seq_no_primary_term: seq_no,
        sorted,
        from,
        size,
    };
    let node = NativeNode {
        name: name.clone(),
        typed_name: "top_hits".into(),
        kind,
        meta: def.meta.clone(),
        children,
        sub_req,
    };
    Ok((node, vec![(name, request)]))
}
