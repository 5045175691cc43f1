//! Resolves an [`AggRequest`](super::AggRequest) against one index: field names become fast
//! columns (or computed value sources), OpenSearch parameters become tantivy requests, and
//! what tantivy cannot do is either done by Shoal (filters, calendar intervals, overlapping
//! ranges, exact small percentiles) or refused with a 400 naming the construct.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use shoal_mapping::date::DateFormat;
use shoal_mapping::FieldType;
use tantivy::aggregation::agg_req::Aggregations;
use tantivy::aggregation::{AggContextParams, AggregationLimitsGuard, ValueSourceRegistry};

use super::values::{DerivedProvider, Transform};
use super::AggDef;
use crate::search::datemath::{self, Rounding, Zone};
use crate::search::shard_error;
use crate::search::sort::{fielddata_error, kind_of_type, ValueKind};
use crate::search::source::SourceFilter;
use crate::{QueryContext, QueryError};

/// A column name no index has: tantivy treats it as an empty column.
pub(super) const UNMAPPED: &str = "\u{1}unmapped";

/// The resolved aggregations of a request on one index.
#[derive(Serialize, Deserialize)]
pub(crate) struct AggPlan {
    pub root: AggLevel,
    /// Computed columns (trait objects) and limits for collecting on a shard. Merging and
    /// rendering do not use it, so it stays on the shard: a plan decoded on the coordinator
    /// can merge and render but must not collect.
    #[serde(skip)]
    pub context: AggContextParams,
    pub has_top_hits: bool,
}

impl std::fmt::Debug for AggPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggPlan")
            .field("has_top_hits", &self.has_top_hits)
            .finish()
    }
}

/// Sibling aggregations: those tantivy runs (`native_req`) and Shoal's filter buckets.
#[derive(Serialize, Deserialize)]
pub(crate) struct AggLevel {
    /// What a shard keeps and the coordinator renders: `terms` cut to their `shard_size`.
    pub native_req: Aggregations,
    /// What segments collect: the same with `terms` never cut per segment, so that a shard's
    /// counts are exact whatever its number of segments. Only the shard that planned uses it.
    #[serde(skip)]
    pub collect_req: Aggregations,
    pub nodes: Vec<PlanNode>,
}

#[derive(Serialize, Deserialize)]
pub(crate) enum PlanNode {
    Native(NativeNode),
    Filter(FilterNode),
}

#[derive(Serialize, Deserialize)]
pub(crate) struct NativeNode {
    pub name: String,
    /// The type name used by `typed_keys` (`sterms`, `avg`, ...); owned once decoded.
    pub typed_name: Cow<'static, str>,
    pub kind: NativeKind,
    pub meta: Option<Value>,
    pub children: Vec<NativeNode>,
    /// The tantivy request of the children (to build empty buckets).
    pub sub_req: Aggregations,
}

/// `filter` (one unnamed bucket) or `filters`.
#[derive(Serialize, Deserialize)]
pub(crate) struct FilterNode {
    pub name: String,
    pub meta: Option<Value>,
    pub queries: Vec<(Option<String>, Value)>,
    /// `None` for `filter`; for `filters`, whether buckets are keyed by name.
    pub keyed: Option<bool>,
    pub other_bucket_key: Option<String>,
    pub child: AggLevel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum KeyKind {
    Str,
    Long,
    Double,
    Bool,
    Date,
    Unmapped,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum OrderKey {
    Count,
    Key,
    Sub(String, Option<String>),
}

#[derive(Serialize, Deserialize)]
pub(crate) struct RangeBucket {
    pub key: Option<String>,
    pub from: Option<f64>,
    pub to: Option<f64>,
    /// The tantivy aggregation (layer) holding it, and its key there.
    pub layer: String,
    pub tantivy_key: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Serialize, Deserialize)]
pub(crate) enum NativeKind {
    Terms {
        key_kind: KeyKind,
        size: usize,
        shard_size: usize,
        /// `show_term_doc_count_error`: a per-bucket `doc_count_error_upper_bound`.
        show_error: bool,
        min_doc_count: u64,
        order: Vec<(OrderKey, bool)>,
        format: String,
    },
    Range {
        buckets: Vec<RangeBucket>,
        keyed: bool,
        is_date: bool,
        format: String,
        zone: Zone,
    },
    Histogram {
        keyed: bool,
        order: Vec<(OrderKey, bool)>,
        grid: super::fill::HistogramGrid,
        min_doc_count: u64,
    },
    DateHistogram {
        rounding: Rounding,
        min_doc_count: u64,
        extended_bounds: Option<(i64, i64)>,
        hard_bounds: Option<(i64, i64)>,
        format: String,
        keyed: bool,
        order: Vec<(OrderKey, bool)>,
    },
    Metric {
        op: MetricOp,
        is_date: bool,
        format: String,
        sigma: f64,
        /// `cardinality`: the hidden `terms` listing up to `precision_threshold` + 1 distinct
        /// values, and the threshold; the count is exact when nothing was cut.
        distinct: Option<(String, u64)>,
    },
    Percentiles {
        percents: Vec<f64>,
        keyed: bool,
        values_name: String,
    },
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

pub(super) struct PlanCtx<'a, 'b> {
    pub(super) q: &'a QueryContext<'b>,
    pub(super) registry: ValueSourceRegistry,
    pub(super) counter: usize,
    pub(super) has_top_hits: bool,
}

/// Resolves a request's aggregations against an index.
pub(crate) fn plan_aggs(defs: &[AggDef], ctx: &QueryContext) -> Result<AggPlan, QueryError> {
    let mut pc = PlanCtx {
        q: ctx,
        registry: ValueSourceRegistry::default(),
        counter: 0,
        has_top_hits: false,
    };
    let root = plan_level(defs, &mut pc)?;
    let context = AggContextParams::new(
        AggregationLimitsGuard::new(None, Some(u32::MAX)),
        Default::default(),
    )
    .with_value_sources(Arc::new(pc.registry));
    Ok(AggPlan {
        root,
        context,
        has_top_hits: pc.has_top_hits,
    })
}

pub(super) fn to_aggregations(map: Map<String, Value>) -> Result<Aggregations, QueryError> {
    serde_json::from_value(Value::Object(map))
        .map_err(|e| QueryError::IllegalArgument(format!("invalid aggregation request: {e}")))
}

pub(super) fn plan_level(defs: &[AggDef], pc: &mut PlanCtx) -> Result<AggLevel, QueryError> {
    let mut native = Map::new();
    let mut nodes = Vec::new();
    for def in defs {
        if def.kind == "filter" || def.kind == "filters" {
            nodes.push(PlanNode::Filter(plan_filter(def, pc)?));
        } else {
            let (node, requests) = super::native::plan_native(def, pc)?;
            native.extend(requests);
            nodes.push(PlanNode::Native(node));
        }
    }
    let mut collect = Value::Object(native.clone());
    uncut_segments(&mut collect);
    let Value::Object(collect) = collect else {
        unreachable!("built from an object")
    };
    Ok(AggLevel {
        native_req: to_aggregations(native)?,
        collect_req: to_aggregations(collect)?,
        nodes,
    })
}

/// Lifts tantivy's per-segment cut of every `terms` request (also under sub-aggregations).
fn uncut_segments(requests: &mut Value) {
    let Value::Object(map) = requests else {
        return;
    };
    for (name, request) in map.iter_mut() {
        // Shoal's hidden value lists (exact percentiles and cardinality) keep their cut: they
        // only count as exact when nothing was cut anywhere.
        if name.contains('\u{1}') {
            continue;
        }
        if let Some(terms) = request.get_mut("terms").and_then(Value::as_object_mut) {
            terms.insert("segment_size".into(), json!(u32::MAX));
        }
        if let Some(subs) = request.get_mut("aggs") {
            uncut_segments(subs);
        }
    }
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
                        let mut named: Vec<_> = named
                            .iter()
                            .map(|(k, q)| (Some(k.clone()), q.clone()))
                            .collect();
                        named.sort_by(|a, b| a.0.cmp(&b.0));
                        queries = named;
                        keyed = Some(true);
                    }
                    Value::Array(items) => {
                        queries = items.iter().map(|q| (None, q.clone())).collect();
                        keyed = Some(false);
                    }
                    _ => {
                        return Err(QueryError::Parsing(format!(
                            "[filters] in [{}] must be an object or an array",
                            def.name
                        )))
                    }
                },
                "other_bucket" => {
                    if value.as_bool() == Some(true) && other.is_none() {
                        other = Some("_other_".to_string());
                    }
                }
                "other_bucket_key" => other = Some(value.as_str().unwrap_or("_other_").to_string()),
                "keyed" => {}
                unknown => {
                    return Err(QueryError::Parsing(format!(
                        "Unknown key for a VALUE in [{unknown}]."
                    )))
                }
            }
        }
        let Some(keyed) = keyed else {
            return Err(QueryError::Parsing(format!(
                "[filters] cannot be empty in [{}]",
                def.name
            )));
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
pub(super) struct Field {
    pub(super) path: String,
    pub(super) field_type: Option<FieldType>,
    pub(super) column: Option<String>,
    pub(super) date_format: String,
}

impl Field {
    pub(super) fn is(&self, t: FieldType) -> bool {
        self.field_type == Some(t)
    }
}

pub(super) fn resolve_field(def: &AggDef, pc: &PlanCtx) -> Result<Field, QueryError> {
    let body = &def.body;
    if body.get("script").is_some() {
        return Err(QueryError::IllegalArgument(format!(
            "[script] in aggregation [{}] is not supported by Shoal yet",
            def.name
        )));
    }
    let Some(path) = body.get("field").and_then(Value::as_str) else {
        return Err(QueryError::IllegalArgument(
            "Required one of fields [field, script], but none were specified. ".into(),
        ));
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
            return Err(QueryError::IllegalArgument(format!(
                "aggregations on [{path}] are not supported by Shoal yet"
            )))
        }
        _ => match pc.q.mapping.field(path) {
            Some(f) if f.field_type == FieldType::Text => return Err(fielddata_error(path)),
            Some(f) => Field {
                path: path.to_string(),
                field_type: Some(f.field_type),
                column: pc.q.schema.fast_column(path, f),
                date_format: f.date_format().to_string(),
            },
            None => Field {
                path: path.to_string(),
                field_type: None,
                column: None,
                date_format: default_format,
            },
        },
    })
}

pub(super) fn unsupported_type(field: &Field, agg: &str) -> QueryError {
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
    pub(super) fn register(&mut self, column: &str, transform: Transform) -> String {
        self.counter += 1;
        let name = format!("\u{1}derived{}\u{1}{column}", self.counter);
        self.registry.register(
            &name,
            Arc::new(DerivedProvider {
                column: column.to_string(),
                transform,
            }),
        );
        name
    }

    /// The column tantivy reads for a value aggregation: dates as epoch millis and booleans
    /// as 0/1 through computed columns.
    pub(super) fn value_column(&mut self, field: &Field) -> String {
        let Some(column) = field.column.clone() else {
            return UNMAPPED.to_string();
        };
        match field.field_type {
            Some(FieldType::Date) => self.register(&column, Transform::DateMillis),
            Some(FieldType::Boolean) => self.register(&column, Transform::BoolAsLong),
            _ => column,
        }
    }
}

pub(super) fn key_kind(field: &Field) -> KeyKind {
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

pub(super) fn is_numeric_like(field: &Field) -> bool {
    !matches!(key_kind(field), KeyKind::Str)
}

pub(super) fn get_u64(def: &AggDef, key: &str, default: u64) -> Result<u64, QueryError> {
    match def.body.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .ok_or_else(|| {
                QueryError::Parsing(format!(
                    "[{key}] in [{}] must be a non-negative integer",
                    def.name
                ))
            }),
    }
}

pub(super) fn format_of(def: &AggDef, field: &Field) -> String {
    def.body
        .get("format")
        .and_then(Value::as_str)
        .map(String::from)
        .unwrap_or_else(|| field.date_format.clone())
}

pub(super) fn parse_date_bound(
    value: &Value,
    format: &str,
    pc: &PlanCtx,
    what: &str,
) -> Result<f64, QueryError> {
    let parsed = DateFormat::parse(format).map_err(QueryError::IllegalArgument)?;
    datemath::parse_date(value, &parsed, pc.q.now_millis)
        .map(|ms| ms as f64)
        .map_err(|e| QueryError::Parsing(format!("failed to parse [{what}]: {e}")))
}

/// A `missing` value converted to the column tantivy reads.
pub(super) fn missing_value(
    def: &AggDef,
    field: &Field,
    pc: &PlanCtx,
) -> Result<Option<Value>, QueryError> {
    let Some(missing) = def.body.get("missing") else {
        return Ok(None);
    };
    Ok(Some(match key_kind(field) {
        KeyKind::Str | KeyKind::Unmapped => match missing {
            Value::String(_) => missing.clone(),
            other => json!(other.to_string()),
        },
        KeyKind::Date => {
            json!(parse_date_bound(missing, &field.date_format, pc, "missing")? as i64)
        }
        KeyKind::Bool => json!(match missing {
            Value::Bool(b) => *b as i64,
            Value::String(s) if s == "true" => 1,
            _ => 0,
        }),
        KeyKind::Long => json!(missing_number(missing)? as i64),
        KeyKind::Double => json!(missing_number(missing)?),
    }))
}

/// A numeric `missing` value; one that is not a number fails as OpenSearch's parse does
/// (it used to count as 0).
fn missing_number(missing: &Value) -> Result<f64, QueryError> {
    missing
        .as_f64()
        .or_else(|| missing.as_str().and_then(|s| s.trim().parse().ok()))
        .ok_or_else(|| {
            let text = match missing {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            shard_error(
                "number_format_exception",
                format!("For input string: \"{text}\""),
            )
        })
}

pub(super) fn with_subs(mut request: Value, subs: &Map<String, Value>) -> Value {
    if !subs.is_empty() {
        request["aggs"] = Value::Object(subs.clone());
    }
    request
}
