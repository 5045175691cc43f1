//! Bucket ordering (`order` of terms and histograms): OpenSearch's criteria with their
//! `_key asc` tie-breaker, and the subset tantivy can apply while pruning.

use serde_json::{json, Value};

use super::plan::OrderKey;
use super::AggDef;
use crate::search::shard_error;
use crate::QueryError;

/// Parses `order` (an object or an array of objects) and appends OpenSearch's `_key asc`
/// tie-breaker.
pub(crate) fn parse_order(def: &AggDef, terms: bool) -> Result<Vec<(OrderKey, bool)>, QueryError> {
    let default = if terms {
        vec![(OrderKey::Count, true)]
    } else {
        vec![(OrderKey::Key, false)]
    };
    let entries: Vec<(String, Value)> = match def.body.get("order") {
        None => return Ok(with_tie_break(default)),
        Some(Value::Object(map)) => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())))
            .collect(),
        Some(_) => {
            return Err(QueryError::Parsing(format!(
                "[order] of [{}] must be an object or an array",
                def.name
            )))
        }
    };
    let mut order = Vec::new();
    for (key, dir) in entries {
        let desc = match dir.as_str().map(str::to_ascii_lowercase).as_deref() {
            Some("asc") => false,
            Some("desc") => true,
            _ => {
                return Err(QueryError::Parsing(format!(
                    "Unknown order direction [{dir}] in [{}]",
                    def.name
                )))
            }
        };
        let target = match key.as_str() {
            "_count" => OrderKey::Count,
            "_key" | "_term" | "_time" => OrderKey::Key,
            path => {
                if path.contains('>') || path.contains('[') {
                    return Err(QueryError::IllegalArgument(format!(
                        "order path [{path}] in [{}] is not supported by Shoal yet",
                        def.name
                    )));
                }
                let (agg, prop) = match path.split_once('.') {
                    Some((a, p)) => (a.to_string(), Some(p.to_string())),
                    None => (path.to_string(), None),
                };
                let known = def.subs.iter().any(|s| {
                    s.name == agg
                        && matches!(
                            s.kind.as_str(),
                            "avg"
                                | "sum"
                                | "min"
                                | "max"
                                | "stats"
                                | "extended_stats"
                                | "value_count"
                                | "cardinality"
                                | "percentiles"
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

/// Whether tantivy can cut a shard's buckets in the requested order (else a shard keeps all
/// its buckets: cutting them in another order would lose some of the best ones).
pub(crate) fn tantivy_cuts_in_order(order: &[(OrderKey, bool)], def: &AggDef) -> bool {
    match order.first() {
        Some((OrderKey::Sub(..), _)) => tantivy_order(order, def) != json!({"_count": "desc"}),
        _ => true,
    }
}

/// The order tantivy uses to prune terms per shard: the first criterion when tantivy
/// understands it, `_count desc` otherwise (Shoal re-sorts the final buckets anyway).
pub(crate) fn tantivy_order(order: &[(OrderKey, bool)], def: &AggDef) -> Value {
    let dir = |desc: bool| if desc { "desc" } else { "asc" };
    match order.first() {
        Some((OrderKey::Key, desc)) => json!({"_key": dir(*desc)}),
        Some((OrderKey::Sub(agg, prop), desc)) => {
            let kind = def
                .subs
                .iter()
                .find(|s| s.name == *agg)
                .map(|s| s.kind.as_str())
                .unwrap_or("");
            match (kind, prop.as_deref()) {
                (
                    "avg" | "sum" | "min" | "max" | "value_count" | "cardinality",
                    None | Some("value"),
                ) => {
                    json!({ agg.as_str(): dir(*desc) })
                }
                ("stats" | "extended_stats", Some(p))
                    if matches!(p, "avg" | "sum" | "min" | "max" | "count") =>
                {
                    json!({ format!("{agg}.{p}"): dir(*desc) })
                }
                _ => json!({"_count": "desc"}),
            }
        }
        Some((OrderKey::Count, desc)) => json!({"_count": dir(*desc)}),
        None => json!({"_count": "desc"}),
    }
}
