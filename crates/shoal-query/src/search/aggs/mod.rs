//! Aggregations: the OpenSearch `aggs` clause parsed at the REST layer ([`AggRequest`]),
//! resolved per index into a plan of tantivy aggregations plus Shoal's own filter buckets
//! (`plan`), collected on shards into mergeable intermediate results (`collect`), and
//! rendered into OpenSearch's response shapes (`render`).

mod collect;
mod fill;
mod metrics;
mod native;
mod order;
mod plan;
pub(crate) mod render;
mod terms_reduce;
mod values;

use serde_json::{Map, Value};

use crate::QueryError;

pub(crate) use collect::{collect_top_hits_ids, finish_shard, AggCollector, LevelFruit};
pub(crate) use plan::{plan_aggs, AggPlan};
pub(crate) use render::{render_aggs, RenderCtx};

/// One aggregation of a request, as written by the client.
#[derive(Debug, Clone, PartialEq)]
pub struct AggDef {
    pub name: String,
    /// The aggregation type (`terms`, `avg`, ...).
    pub kind: String,
    /// The type's parameters.
    pub body: Value,
    pub subs: Vec<AggDef>,
    pub meta: Option<Value>,
}

/// The `aggs` clause of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct AggRequest {
    pub aggs: Vec<AggDef>,
}

const SUPPORTED: &[&str] = &[
    "terms",
    "range",
    "date_range",
    "histogram",
    "date_histogram",
    "filter",
    "filters",
    "avg",
    "sum",
    "min",
    "max",
    "stats",
    "extended_stats",
    "value_count",
    "cardinality",
    "percentiles",
    "top_hits",
];

const METRICS: &[&str] = &[
    "avg",
    "sum",
    "min",
    "max",
    "stats",
    "extended_stats",
    "value_count",
    "cardinality",
    "percentiles",
    "top_hits",
];

/// Aggregation types OpenSearch has and Shoal does not (yet): refused with a clear 400.
const KNOWN_UNSUPPORTED: &[&str] = &[
    "nested",
    "reverse_nested",
    "global",
    "missing",
    "composite",
    "multi_terms",
    "significant_terms",
    "significant_text",
    "rare_terms",
    "sampler",
    "diversified_sampler",
    "adjacency_matrix",
    "auto_date_histogram",
    "variable_width_histogram",
    "ip_range",
    "geo_distance",
    "geohash_grid",
    "geotile_grid",
    "geo_bounds",
    "geo_centroid",
    "percentile_ranks",
    "median_absolute_deviation",
    "weighted_avg",
    "scripted_metric",
    "string_stats",
    "boxplot",
    "t_test",
    "top_metrics",
    "matrix_stats",
    "children",
    "parent",
    "avg_bucket",
    "sum_bucket",
    "min_bucket",
    "max_bucket",
    "stats_bucket",
    "extended_stats_bucket",
    "percentiles_bucket",
    "bucket_script",
    "bucket_selector",
    "bucket_sort",
    "cumulative_sum",
    "cumulative_cardinality",
    "derivative",
    "moving_avg",
    "moving_fn",
    "serial_diff",
];

impl AggRequest {
    /// Parses and validates the structure of an `aggs` object (types and nesting; fields are
    /// resolved later, against each index's mapping).
    pub fn parse(map: &Map<String, Value>) -> Result<AggRequest, QueryError> {
        Ok(AggRequest {
            aggs: parse_aggs(map)?,
        })
    }
}

fn parse_aggs(map: &Map<String, Value>) -> Result<Vec<AggDef>, QueryError> {
    let mut out = Vec::new();
    for (name, body) in map {
        if name.contains(['[', ']', '>']) {
            return Err(QueryError::Parsing(format!(
                "Invalid aggregation name [{name}]. Aggregation names can contain any character except '[', ']', and '>'"
            )));
        }
        let Value::Object(body) = body else {
            return Err(QueryError::Parsing(format!(
                "Expected [START_OBJECT] under [{name}], but got a [{}] in [{name}]",
                super::source::token_name(body)
            )));
        };
        let mut kind: Option<(String, Value)> = None;
        let mut subs = Vec::new();
        let mut meta = None;
        for (key, value) in body {
            match key.as_str() {
                "aggs" | "aggregations" => {
                    let Value::Object(sub_map) = value else {
                        return Err(QueryError::Parsing(format!(
                            "Expected [START_OBJECT] under [{key}], but got a [{}] in [{name}]",
                            super::source::token_name(value)
                        )));
                    };
                    subs = parse_aggs(sub_map)?;
                }
                "meta" => meta = Some(value.clone()),
                agg_type => {
                    if let Some((first, _)) = &kind {
                        return Err(QueryError::Parsing(format!(
                            "Found two aggregation type definitions in [{name}]: [{first}] and [{agg_type}]"
                        )));
                    }
                    if !SUPPORTED.contains(&agg_type) {
                        if KNOWN_UNSUPPORTED.contains(&agg_type) {
                            return Err(QueryError::IllegalArgument(format!(
                                "[{agg_type}] aggregation (in [{name}]) is not supported by Shoal yet"
                            )));
                        }
                        return Err(QueryError::Parsing(format!(
                            "Unknown aggregation type [{agg_type}]"
                        )));
                    }
                    if !value.is_object() {
                        return Err(QueryError::Parsing(format!(
                            "Expected [START_OBJECT] under [{agg_type}], but got a [{}] in [{name}]",
                            super::source::token_name(value)
                        )));
                    }
                    kind = Some((agg_type.to_string(), value.clone()));
                }
            }
        }
        let Some((kind, body)) = kind else {
            return Err(QueryError::Parsing(format!(
                "Missing definition for aggregation [{name}]"
            )));
        };
        if METRICS.contains(&kind.as_str()) && !subs.is_empty() {
            return Err(QueryError::Parsing(format!(
                "Aggregator [{name}] of type [{kind}] cannot accept sub-aggregations"
            )));
        }
        out.push(AggDef {
            name: name.clone(),
            kind,
            body,
            subs,
            meta,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<AggRequest, QueryError> {
        AggRequest::parse(v.as_object().unwrap())
    }

    #[test]
    fn unknown_aggregation_types_are_parsing_exceptions() {
        let err = parse(json!({"x": {"bogus": {"field": "a"}}})).unwrap_err();
        assert_eq!(
            err,
            QueryError::Parsing("Unknown aggregation type [bogus]".into())
        );
        let err = parse(json!({"x": {"composite": {}}})).unwrap_err();
        assert_eq!(err.error_type(), "illegal_argument_exception");
        assert!(err.to_string().contains("[composite]"));
    }

    #[test]
    fn structure_errors_name_the_aggregation() {
        assert!(
            parse(json!({"x": {"terms": {"field": "a"}, "avg": {"field": "b"}}}))
                .unwrap_err()
                .to_string()
                .contains("two aggregation type")
        );
        assert!(parse(
            json!({"x": {"avg": {"field": "a"}, "aggs": {"y": {"max": {"field": "b"}}}}})
        )
        .unwrap_err()
        .to_string()
        .contains("cannot accept sub-aggregations"));
        assert!(parse(json!({"a>b": {"avg": {"field": "a"}}})).is_err());
        let ok = parse(json!({"t": {"terms": {"field": "a"}, "meta": {"k": 1}, "aggs": {"m": {"max": {"field": "b"}}}}})).unwrap();
        assert_eq!(ok.aggs[0].subs[0].kind, "max");
        assert_eq!(ok.aggs[0].meta, Some(json!({"k": 1})));
    }
}
