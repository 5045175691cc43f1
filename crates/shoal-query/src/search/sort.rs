//! Sorting: the `sort` clause, typed sort values compared across shards, and per-segment
//! sort keys read from fast-field columns (encoded so that every key compares ascending).

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use shoal_mapping::date::DateFormat;
use shoal_mapping::FieldType;
use tantivy::columnar::{Column, ColumnType, MonotonicallyMappableToU64, StrColumn, TermOrdHit};
use tantivy::{DocId, Score, SegmentReader};

use super::{datemath, shard_error, source::token_name};
use crate::{QueryContext, QueryError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortOrder {
    Asc,
    Desc,
}

impl SortOrder {
    fn parse(text: &str) -> Result<SortOrder, QueryError> {
        match text.to_ascii_lowercase().as_str() {
            "asc" => Ok(SortOrder::Asc),
            "desc" => Ok(SortOrder::Desc),
            _ => Err(QueryError::IllegalArgument(format!(
                "Unknown SortOrder [{text}]"
            ))),
        }
    }
}

/// Where documents without a value go, or the value they sort as.
#[derive(Debug, Clone, PartialEq)]
pub enum Missing {
    First,
    Last,
    Value(Value),
}

#[derive(Debug, Clone, PartialEq)]
pub enum SortTarget {
    Score,
    Doc,
    Field(String),
}

/// Which value of a multi-valued field a document sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortMode {
    Min,
    Max,
}

/// One sort criterion of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct SortSpec {
    pub target: SortTarget,
    pub order: SortOrder,
    pub missing: Missing,
    pub unmapped_type: Option<String>,
    pub mode: Option<SortMode>,
    pub format: Option<String>,
}

impl SortSpec {
    pub fn new(target: SortTarget) -> SortSpec {
        let order = if target == SortTarget::Score {
            SortOrder::Desc
        } else {
            SortOrder::Asc
        };
        SortSpec {
            target,
            order,
            missing: Missing::Last,
            unmapped_type: None,
            mode: None,
            format: None,
        }
    }

    fn named(name: &str) -> SortSpec {
        SortSpec::new(match name {
            "_score" => SortTarget::Score,
            "_doc" => SortTarget::Doc,
            field => SortTarget::Field(field.to_string()),
        })
    }
}

/// Parses the body's `sort`: a name, `{"f": "desc"}`, `{"f": {"order": ..., "missing": ...}}`,
/// or an array of these.
pub fn parse_sort(value: &Value) -> Result<Vec<SortSpec>, QueryError> {
    match value {
        Value::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                out.extend(parse_sort(item)?);
            }
            Ok(out)
        }
        Value::String(name) => Ok(vec![SortSpec::named(name)]),
        Value::Object(map) => {
            let mut out = Vec::new();
            for (name, options) in map {
                out.push(parse_sort_entry(name, options)?);
            }
            Ok(out)
        }
        other => Err(QueryError::Parsing(format!(
            "malformed sort format, within the sort array, an object, or an actual string are allowed, found [{}]",
            token_name(other)
        ))),
    }
}

fn parse_sort_entry(name: &str, options: &Value) -> Result<SortSpec, QueryError> {
    if matches!(name, "_geo_distance" | "_geoDistance" | "_script") {
        return Err(QueryError::IllegalArgument(format!(
            "[{name}] sort is not supported by Shoal yet"
        )));
    }
    let mut spec = SortSpec::named(name);
    match options {
        Value::String(order) => spec.order = SortOrder::parse(order)?,
        Value::Object(map) => {
            for (key, value) in map {
                match key.as_str() {
                    "order" => {
                        spec.order = SortOrder::parse(value.as_str().ok_or_else(|| {
                            QueryError::Parsing(format!("[{name}] order must be a string"))
                        })?)?
                    }
                    "missing" => {
                        spec.missing = match value {
                            Value::String(s) if s == "_last" => Missing::Last,
                            Value::String(s) if s == "_first" => Missing::First,
                            Value::Null => Missing::Last,
                            other => Missing::Value(other.clone()),
                        }
                    }
                    "unmapped_type" => spec.unmapped_type = value.as_str().map(String::from),
                    "mode" => {
                        spec.mode = Some(match value.as_str().unwrap_or("") {
                            "min" => SortMode::Min,
                            "max" => SortMode::Max,
                            other => {
                                return Err(QueryError::IllegalArgument(format!(
                                    "sort mode [{other}] is not supported by Shoal yet (only [min] and [max])"
                                )))
                            }
                        })
                    }
                    "format" => spec.format = value.as_str().map(String::from),
                    "numeric_type" => {}
                    "nested" | "nested_path" | "nested_filter" => {
                        return Err(QueryError::IllegalArgument(format!(
                            "[{key}] sort option is not supported by Shoal yet"
                        )))
                    }
                    other => {
                        return Err(QueryError::Parsing(format!("[field_sort] unknown field [{other}]")))
                    }
                }
            }
        }
        other => {
            return Err(QueryError::Parsing(format!(
                "[field_sort] unexpected token [{}] for sort on [{name}]",
                token_name(other)
            )))
        }
    }
    Ok(spec)
}

/// Parses the URL `sort` parameter: `f1:desc,f2,_score`.
pub fn parse_sort_param(param: &str) -> Result<Vec<SortSpec>, QueryError> {
    let mut out = Vec::new();
    for part in param.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, order) = match part.rsplit_once(':') {
            Some((name, order)) => (name, Some(order)),
            None => (part, None),
        };
        let mut spec = SortSpec::named(name);
        if let Some(order) = order {
            spec.order = SortOrder::parse(order)?;
        }
        out.push(spec);
    }
    Ok(out)
}

/// A sort value, typed so that shards merge exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SortValue {
    Long(i64),
    Double(#[serde(with = "super::wire::float")] f64),
    /// `None` is a missing keyword value (rendered `null`).
    Str(Option<String>),
}

impl SortValue {
    pub fn to_json(&self) -> Value {
        match self {
            SortValue::Long(v) => json!(v),
            SortValue::Double(v) if v.is_finite() => json!(v),
            SortValue::Double(v) if v.is_nan() => json!("NaN"),
            SortValue::Double(v) => json!(if *v > 0.0 { "Infinity" } else { "-Infinity" }),
            SortValue::Str(Some(s)) => json!(s),
            SortValue::Str(None) => Value::Null,
        }
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            SortValue::Long(v) => Some(*v as f64),
            SortValue::Double(v) => Some(*v),
            SortValue::Str(_) => None,
        }
    }
}

/// Compares two sort values of one criterion (direction and missing placement included).
pub fn compare_values(a: &SortValue, b: &SortValue, spec: &SortSpec) -> Ordering {
    let directed = |o: Ordering| {
        if spec.order == SortOrder::Desc {
            o.reverse()
        } else {
            o
        }
    };
    match (a, b) {
        (SortValue::Long(x), SortValue::Long(y)) => directed(x.cmp(y)),
        (SortValue::Str(x), SortValue::Str(y)) => match (x, y) {
            (Some(x), Some(y)) => directed(x.as_bytes().cmp(y.as_bytes())),
            (None, None) => Ordering::Equal,
            (None, Some(_)) => {
                if spec.missing == Missing::First {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (Some(_), None) => {
                if spec.missing == Missing::First {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
        },
        (SortValue::Str(_), _) => Ordering::Greater,
        (_, SortValue::Str(_)) => Ordering::Less,
        _ => directed(
            a.as_f64()
                .unwrap_or(0.0)
                .total_cmp(&b.as_f64().unwrap_or(0.0)),
        ),
    }
}

/// Compares two hits' sort values over all criteria.
pub fn compare_all(a: &[SortValue], b: &[SortValue], specs: &[SortSpec]) -> Ordering {
    for ((x, y), spec) in a.iter().zip(b).zip(specs) {
        let o = compare_values(x, y, spec);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// How a criterion reads its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ValueKind {
    Score,
    Doc,
    Long,
    Double,
    Date,
    Bool,
    Keyword,
}

/// A sort criterion resolved against an index mapping.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedSort {
    pub spec: SortSpec,
    pub kind: ValueKind,
    /// The fast-field column, `None` for score, doc and unmapped fields.
    pub column: Option<String>,
    pub date_format: String,
    /// The value a document without a value sorts as (and shows in `sort`).
    pub missing_value: SortValue,
}

pub(crate) fn kind_of_type(field_type: FieldType) -> ValueKind {
    match field_type {
        FieldType::Keyword | FieldType::Ip | FieldType::Text => ValueKind::Keyword,
        FieldType::Boolean => ValueKind::Bool,
        FieldType::Date => ValueKind::Date,
        t if t.numeric_kind() == Some(shoal_mapping::NumericKind::F64) => ValueKind::Double,
        _ => ValueKind::Long,
    }
}

/// The OpenSearch error for sorting or aggregating on a `text` field.
pub(crate) fn fielddata_error(field: &str) -> QueryError {
    shard_error(
        "illegal_argument_exception",
        format!(
            "Text fields are not optimised for operations that require per-document field data like aggregations and sorting, so these operations are disabled by default. Please use a keyword field instead. Alternatively, set fielddata=true on [{field}] in order to load field data by uninverting the inverted index. Note that this can use significant memory."
        ),
    )
}

pub(crate) fn resolve_sorts(
    specs: &[SortSpec],
    ctx: &QueryContext,
) -> Result<Vec<ResolvedSort>, QueryError> {
    specs.iter().map(|spec| resolve_sort(spec, ctx)).collect()
}

fn resolve_sort(spec: &SortSpec, ctx: &QueryContext) -> Result<ResolvedSort, QueryError> {
    let mut date_format = shoal_mapping::date::DEFAULT_DATE_FORMAT.to_string();
    let (kind, column) = match &spec.target {
        SortTarget::Score => (ValueKind::Score, None),
        SortTarget::Doc => (ValueKind::Doc, None),
        SortTarget::Field(name) => match name.as_str() {
            "_id" => (ValueKind::Keyword, Some("_id".to_string())),
            "_seq_no" | "_primary_term" | "_version" => (ValueKind::Long, Some(name.clone())),
            _ => match ctx.mapping.field(name) {
                Some(field) if field.field_type == FieldType::Text => {
                    return Err(fielddata_error(name))
                }
                Some(field) if field.doc_values == Some(false) => {
                    return Err(shard_error(
                        "illegal_argument_exception",
                        format!(
                            "Can't load fielddata on [{name}] because fielddata is unsupported on fields of type [{}]. Use doc values instead.",
                            field.field_type.name()
                        ),
                    ))
                }
                Some(field) => {
                    if field.field_type == FieldType::Date {
                        date_format = field.date_format().to_string();
                    }
                    (
                        kind_of_type(field.field_type),
                        ctx.schema.fast_column(name, field),
                    )
                }
                None => match &spec.unmapped_type {
                    Some(type_name) => {
                        let field_type = FieldType::parse(type_name).ok_or_else(|| {
                            shard_error(
                                "query_shard_exception",
                                format!("No mapper found for type [{type_name}]"),
                            )
                        })?;
                        (kind_of_type(field_type), None)
                    }
                    None => {
                        return Err(shard_error(
                            "query_shard_exception",
                            format!("No mapping found for [{name}] in order to sort on"),
                        ))
                    }
                },
            },
        },
    };
    let mut resolved = ResolvedSort {
        spec: spec.clone(),
        kind,
        column,
        date_format,
        missing_value: SortValue::Long(0),
    };
    resolved.missing_value = match &spec.missing {
        Missing::Value(v) => resolved.typed_from_json(v, ctx.now_millis).map_err(|_| {
            shard_error(
                "illegal_argument_exception",
                format!(
                    "failed to parse missing value [{v}] for sort field [{}]",
                    resolved.name()
                ),
            )
        })?,
        missing => {
            let high = (*missing == Missing::Last) == (spec.order == SortOrder::Asc);
            match kind {
                ValueKind::Keyword => SortValue::Str(None),
                ValueKind::Double | ValueKind::Score => SortValue::Double(if high {
                    f64::INFINITY
                } else {
                    f64::NEG_INFINITY
                }),
                _ => SortValue::Long(if high { i64::MAX } else { i64::MIN }),
            }
        }
    };
    Ok(resolved)
}

impl ResolvedSort {
    pub fn name(&self) -> String {
        match &self.spec.target {
            SortTarget::Score => "_score".into(),
            SortTarget::Doc => "_doc".into(),
            SortTarget::Field(f) => f.clone(),
        }
    }

    /// Reads a JSON value (a `search_after` entry or a `missing` value) as this criterion's type.
    pub fn typed_from_json(&self, value: &Value, now_millis: i64) -> Result<SortValue, ()> {
        let number = |v: &Value| -> Option<SortValue> {
            match v {
                Value::Number(n) => n
                    .as_i64()
                    .map(SortValue::Long)
                    .or_else(|| n.as_f64().map(SortValue::Double)),
                Value::String(s) => match s.as_str() {
                    "Infinity" => Some(SortValue::Double(f64::INFINITY)),
                    "-Infinity" => Some(SortValue::Double(f64::NEG_INFINITY)),
                    _ => s
                        .parse::<i64>()
                        .map(SortValue::Long)
                        .ok()
                        .or_else(|| s.parse::<f64>().ok().map(SortValue::Double)),
                },
                Value::Bool(b) => Some(SortValue::Long(*b as i64)),
                _ => None,
            }
        };
        let typed = match self.kind {
            ValueKind::Keyword => match value {
                Value::Null => Some(SortValue::Str(None)),
                Value::String(s) => Some(SortValue::Str(Some(s.clone()))),
                Value::Number(n) => Some(SortValue::Str(Some(n.to_string()))),
                Value::Bool(b) => Some(SortValue::Str(Some(b.to_string()))),
                _ => None,
            },
            ValueKind::Double | ValueKind::Score => number(value)
                .and_then(|v| v.as_f64())
                .map(SortValue::Double),
            ValueKind::Date if value.is_string() => {
                let format = DateFormat::parse(&self.date_format).map_err(|_| ())?;
                datemath::parse_date(value, &format, now_millis)
                    .ok()
                    .map(SortValue::Long)
            }
            ValueKind::Long | ValueKind::Date | ValueKind::Bool | ValueKind::Doc => {
                match number(value) {
                    Some(SortValue::Double(f)) if f.is_infinite() => {
                        Some(SortValue::Long(if f > 0.0 { i64::MAX } else { i64::MIN }))
                    }
                    other => other,
                }
            }
        };
        typed.ok_or(())
    }
}

/// Encodes one key so that all keys compare ascending: the rank first (missing values
/// before or after present ones), then the value, inverted for descending order.
fn encode(value: u64, desc: bool, rank: u64) -> u128 {
    ((rank as u128) << 64) | (if desc { !value } else { value }) as u128
}

enum KeySource {
    Score {
        desc: bool,
    },
    Doc {
        base: u64,
        desc: bool,
    },
    Numeric {
        column: Option<(Column<u64>, ColumnType)>,
        desc: bool,
        pick_max: bool,
        present_rank: u64,
        missing_key: u128,
    },
    Str {
        column: Option<StrColumn>,
        desc: bool,
        pick_max: bool,
        present_rank: u64,
        missing_key: u128,
    },
}

/// The sort keys of one segment.
pub(crate) struct SegmentKeys {
    sources: Vec<KeySource>,
}

const NUMERIC_TYPES: &[ColumnType] = &[
    ColumnType::I64,
    ColumnType::U64,
    ColumnType::F64,
    ColumnType::DateTime,
    ColumnType::Bool,
];

impl SegmentKeys {
    pub fn open(
        sorts: &[ResolvedSort],
        reader: &SegmentReader,
        doc_base: u64,
    ) -> tantivy::Result<SegmentKeys> {
        let mut sources = Vec::with_capacity(sorts.len());
        for sort in sorts {
            let desc = sort.spec.order == SortOrder::Desc;
            let pick_max = match sort.spec.mode {
                Some(SortMode::Max) => true,
                Some(SortMode::Min) => false,
                None => desc,
            };
            let present_rank = if sort.spec.missing == Missing::First {
                1
            } else {
                0
            };
            let missing_rank_key = |custom: Option<u64>| match (&sort.spec.missing, custom) {
                (Missing::First, _) => encode(0, false, 0),
                (Missing::Last, _) => encode(0, false, 1),
                (Missing::Value(_), Some(v)) => encode(v, desc, 0),
                (Missing::Value(_), None) => encode(0, false, 1),
            };
            let source = match sort.kind {
                ValueKind::Score => KeySource::Score { desc },
                ValueKind::Doc => KeySource::Doc {
                    base: doc_base,
                    desc,
                },
                ValueKind::Keyword => {
                    let column = match &sort.column {
                        Some(name) => reader.fast_fields().str(name)?,
                        None => None,
                    };
                    let custom = match (&sort.missing_value, &column) {
                        (SortValue::Str(Some(s)), Some(col)) => Some(str_position(col, s)?),
                        (SortValue::Str(Some(_)), None) => Some(0),
                        _ => None,
                    };
                    KeySource::Str {
                        column,
                        desc,
                        pick_max,
                        present_rank,
                        missing_key: missing_rank_key(custom),
                    }
                }
                _ => {
                    let column = match &sort.column {
                        Some(name) => reader
                            .fast_fields()
                            .u64_lenient_for_type(Some(NUMERIC_TYPES), name)?,
                        None => None,
                    };
                    let ctype = column.as_ref().map(|c| c.1).unwrap_or(match sort.kind {
                        ValueKind::Double => ColumnType::F64,
                        ValueKind::Date => ColumnType::DateTime,
                        _ => ColumnType::I64,
                    });
                    let custom = match sort.spec.missing {
                        Missing::Value(_) => {
                            Some(numeric_to_column(&sort.missing_value, ctype, desc, false))
                        }
                        _ => None,
                    };
                    KeySource::Numeric {
                        column,
                        desc,
                        pick_max,
                        present_rank,
                        missing_key: missing_rank_key(custom),
                    }
                }
            };
            sources.push(source);
        }
        Ok(SegmentKeys { sources })
    }

    /// Computes the keys of a document into `out`.
    pub fn keys(&self, doc: DocId, score: Score, out: &mut Vec<u128>) {
        out.clear();
        for source in &self.sources {
            out.push(match source {
                KeySource::Score { desc } => encode((score as f64).to_u64(), *desc, 0),
                KeySource::Doc { base, desc } => encode(base + doc as u64, *desc, 0),
                KeySource::Numeric {
                    column,
                    desc,
                    pick_max,
                    present_rank,
                    missing_key,
                } => {
                    match column
                        .as_ref()
                        .and_then(|(c, _)| pick(c.values_for_doc(doc), *pick_max))
                    {
                        Some(v) => encode(v, *desc, *present_rank),
                        None => *missing_key,
                    }
                }
                KeySource::Str {
                    column,
                    desc,
                    pick_max,
                    present_rank,
                    missing_key,
                } => {
                    match column
                        .as_ref()
                        .and_then(|c| pick(c.term_ords(doc), *pick_max))
                    {
                        Some(ord) => encode(2 * ord + 1, *desc, *present_rank),
                        None => *missing_key,
                    }
                }
            });
        }
    }

    /// The typed sort values of a document.
    pub fn values(
        &self,
        sorts: &[ResolvedSort],
        doc: DocId,
        score: Score,
    ) -> tantivy::Result<Vec<SortValue>> {
        let mut out = Vec::with_capacity(sorts.len());
        for (source, sort) in self.sources.iter().zip(sorts) {
            out.push(match source {
                KeySource::Score { .. } => SortValue::Double(score as f64),
                KeySource::Doc { base, .. } => SortValue::Long((base + doc as u64) as i64),
                KeySource::Numeric {
                    column, pick_max, ..
                } => {
                    match column
                        .as_ref()
                        .and_then(|(c, t)| pick(c.values_for_doc(doc), *pick_max).map(|v| (v, *t)))
                    {
                        Some((v, ctype)) => typed_numeric(sort.kind, ctype, v),
                        None => sort.missing_value.clone(),
                    }
                }
                KeySource::Str {
                    column, pick_max, ..
                } => {
                    match column
                        .as_ref()
                        .and_then(|c| pick(c.term_ords(doc), *pick_max).map(|o| (c, o)))
                    {
                        Some((c, ord)) => {
                            let mut text = String::new();
                            c.ord_to_str(ord, &mut text)?;
                            SortValue::Str(Some(text))
                        }
                        None => sort.missing_value.clone(),
                    }
                }
            });
        }
        Ok(out)
    }

    /// Encodes `search_after` values as keys of this segment: a document comes after them
    /// when its keys compare greater.
    pub fn after_keys(
        &self,
        sorts: &[ResolvedSort],
        after: &[SortValue],
    ) -> tantivy::Result<Vec<u128>> {
        let mut out = Vec::with_capacity(after.len());
        for ((source, sort), value) in self.sources.iter().zip(sorts).zip(after) {
            let is_missing = matches!(sort.spec.missing, Missing::First | Missing::Last)
                && compare_values(value, &sort.missing_value, &sort.spec) == Ordering::Equal;
            out.push(match source {
                KeySource::Score { desc } => {
                    encode(value.as_f64().unwrap_or(0.0).to_u64(), *desc, 0)
                }
                KeySource::Doc { desc, .. } => {
                    let v = value.as_f64().unwrap_or(0.0).max(0.0) as u64;
                    encode(v, *desc, 0)
                }
                KeySource::Numeric { missing_key, .. } if is_missing => *missing_key,
                KeySource::Numeric {
                    column,
                    desc,
                    present_rank,
                    ..
                } => {
                    let ctype = column.as_ref().map(|c| c.1).unwrap_or(ColumnType::I64);
                    encode(
                        numeric_to_column(value, ctype, *desc, true),
                        *desc,
                        *present_rank,
                    )
                }
                KeySource::Str { missing_key, .. } if is_missing => *missing_key,
                KeySource::Str {
                    column,
                    desc,
                    present_rank,
                    missing_key,
                    ..
                } => match (value, column) {
                    (SortValue::Str(Some(s)), Some(col)) => {
                        encode(str_position(col, s)?, *desc, *present_rank)
                    }
                    (SortValue::Str(Some(_)), None) => encode(0, *desc, *present_rank),
                    _ => *missing_key,
                },
            });
        }
        Ok(out)
    }
}

fn pick(values: impl Iterator<Item = u64>, pick_max: bool) -> Option<u64> {
    if pick_max {
        values.max()
    } else {
        values.min()
    }
}

/// The position of a string among the ords of a column: `2 * ord + 1` when present,
/// `2 * (ord of the next term)` otherwise.
fn str_position(column: &StrColumn, text: &str) -> tantivy::Result<u64> {
    let num_terms = column.dictionary().num_terms() as u64;
    Ok(
        match column.dictionary().term_ord_or_next(text.as_bytes())? {
            TermOrdHit::Exact(ord) => 2 * ord + 1,
            TermOrdHit::Next(ord) => 2 * ord.min(num_terms),
        },
    )
}

/// Converts a typed value to a column's u64 representation. For `search_after` bounds
/// (`bound`), values that fall between two representable values round so that "strictly
/// after the bound" keeps its meaning.
fn numeric_to_column(value: &SortValue, ctype: ColumnType, desc: bool, bound: bool) -> u64 {
    let f = value.as_f64().unwrap_or(0.0);
    match ctype {
        ColumnType::F64 => f.to_u64(),
        ColumnType::DateTime => {
            let millis = match value {
                SortValue::Long(v) => *v,
                _ => f as i64,
            };
            let nanos = millis.saturating_mul(1_000_000);
            let nanos = if bound && !desc {
                nanos.saturating_add(999_999)
            } else {
                nanos
            };
            nanos.to_u64()
        }
        ColumnType::U64 | ColumnType::Bool => match value {
            SortValue::Long(v) => (*v).max(0) as u64,
            _ => (if desc { f.ceil() } else { f.floor() }).max(0.0) as u64,
        },
        _ => match value {
            SortValue::Long(v) => v.to_u64(),
            _ if f.is_infinite() => (if f > 0.0 { i64::MAX } else { i64::MIN }).to_u64(),
            _ => ((if desc && bound { f.ceil() } else { f.floor() }) as i64).to_u64(),
        },
    }
}

fn typed_numeric(kind: ValueKind, ctype: ColumnType, v: u64) -> SortValue {
    let as_f64 = || match ctype {
        ColumnType::F64 => f64::from_u64(v),
        ColumnType::I64 => i64::from_u64(v) as f64,
        ColumnType::DateTime => i64::from_u64(v).div_euclid(1_000_000) as f64,
        _ => v as f64,
    };
    let as_i64 = || match ctype {
        ColumnType::F64 => f64::from_u64(v) as i64,
        ColumnType::I64 => i64::from_u64(v),
        ColumnType::DateTime => i64::from_u64(v).div_euclid(1_000_000),
        _ => v as i64,
    };
    match kind {
        ValueKind::Double => SortValue::Double(as_f64()),
        _ => SortValue::Long(as_i64()),
    }
}

/// Renders a `sort` array of a hit.
pub fn sort_values_json(values: &[SortValue]) -> Value {
    Value::Array(values.iter().map(SortValue::to_json).collect())
}
