//! Metric results and bucket ordering in OpenSearch's shapes, and numbers printed like Java.

use std::cmp::Ordering;

use serde_json::{json, Map, Value};
use tantivy::aggregation::agg_result::{AggregationResult, MetricResult};

use super::plan::{MetricOp, NativeNode, OrderKey};
use crate::search::datemath::{format_date, Zone};

pub(super) fn opt_number(f: Option<f64>) -> Value {
    match f {
        Some(f) => number(f),
        None => Value::Null,
    }
}

/// A JSON number, or OpenSearch's strings for non-finite doubles.
pub(super) fn number(f: f64) -> Value {
    if f.is_finite() {
        json!(f)
    } else {
        json!(java_double(f))
    }
}

/// Formats a double like Java's `Double.toString` (`100.0`, `1.5`, `1.0E7`).
pub(crate) fn java_double(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let abs = f.abs();
    if abs == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    if (1e-3..1e7).contains(&abs) {
        let s = format!("{f}");
        return if s.contains('.') { s } else { s + ".0" };
    }
    let s = format!("{f:e}");
    let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exponent}")
}

pub(super) fn render_metric(
    out: &mut Map<String, Value>,
    op: MetricOp,
    result: Option<&AggregationResult>,
    is_date: bool,
    format: &str,
    sigma: f64,
) {
    let as_string = |v: f64| json!(format_date(v.floor() as i64, format, Zone::UTC));
    let metric = match result {
        Some(AggregationResult::MetricResult(m)) => Some(m),
        _ => None,
    };
    let single = match metric {
        Some(
            MetricResult::Average(s)
            | MetricResult::Min(s)
            | MetricResult::Max(s)
            | MetricResult::Sum(s),
        )
        | Some(MetricResult::Count(s) | MetricResult::Cardinality(s)) => {
            s.value.filter(|v| v.is_finite())
        }
        _ => None,
    };
    match op {
        MetricOp::Avg | MetricOp::Min | MetricOp::Max | MetricOp::Sum => {
            let value = if op == MetricOp::Sum {
                Some(single.unwrap_or(0.0))
            } else {
                single
            };
            out.insert("value".into(), opt_number(value));
            if let (true, Some(v)) = (is_date, value) {
                out.insert("value_as_string".into(), as_string(v));
            }
        }
        MetricOp::ValueCount | MetricOp::Cardinality => {
            out.insert("value".into(), json!(single.unwrap_or(0.0) as u64));
        }
        MetricOp::Stats | MetricOp::ExtendedStats => {
            let (count, sum, min, max, sum_of_squares) = match metric {
                Some(MetricResult::Stats(s)) => (s.count, s.sum, s.min, s.max, None),
                Some(MetricResult::ExtendedStats(s)) => {
                    (s.count, s.sum, s.min, s.max, s.sum_of_squares)
                }
                _ => (0, 0.0, None, None, None),
            };
            let present = |v: Option<f64>| if count == 0 { None } else { v };
            let avg = (count > 0).then(|| sum / count as f64);
            out.insert("count".into(), json!(count));
            out.insert("min".into(), opt_number(present(min)));
            out.insert("max".into(), opt_number(present(max)));
            out.insert("avg".into(), opt_number(avg));
            out.insert("sum".into(), number(sum));
            if op == MetricOp::ExtendedStats {
                let sum_sq = sum_of_squares.unwrap_or(0.0);
                let n = count as f64;
                let spread = sum_sq - sum * sum / n;
                let variance = (count > 0).then(|| (spread / n).max(0.0));
                let variance_sampling = (count > 0).then(|| {
                    let v = spread / (n - 1.0);
                    if v < 0.0 {
                        0.0
                    } else {
                        v
                    }
                });
                let std = variance.map(f64::sqrt);
                let std_sampling = variance_sampling.map(f64::sqrt);
                let bound = |avg: Option<f64>, std: Option<f64>, sign: f64| match (avg, std) {
                    (Some(a), Some(s)) => number(a + sign * sigma * s),
                    _ => Value::Null,
                };
                out.insert(
                    "sum_of_squares".into(),
                    opt_number((count > 0).then_some(sum_sq)),
                );
                out.insert("variance".into(), opt_number(variance));
                out.insert("variance_population".into(), opt_number(variance));
                out.insert("variance_sampling".into(), opt_number(variance_sampling));
                out.insert("std_deviation".into(), opt_number(std));
                out.insert("std_deviation_population".into(), opt_number(std));
                out.insert("std_deviation_sampling".into(), opt_number(std_sampling));
                out.insert(
                    "std_deviation_bounds".into(),
                    json!({
                        "upper": bound(avg, std, 1.0),
                        "lower": bound(avg, std, -1.0),
                        "upper_population": bound(avg, std, 1.0),
                        "lower_population": bound(avg, std, -1.0),
                        "upper_sampling": bound(avg, std_sampling, 1.0),
                        "lower_sampling": bound(avg, std_sampling, -1.0),
                    }),
                );
            }
            if is_date && count > 0 {
                for (name, v) in [("min", min), ("max", max), ("avg", avg), ("sum", Some(sum))] {
                    if let Some(v) = v {
                        out.insert(format!("{name}_as_string"), as_string(v));
                    }
                }
            }
        }
    }
}

/// The value a bucket sorts by for a sub-aggregation path (`agg`, `agg.prop`).
fn sub_value(
    bucket: &Map<String, Value>,
    node: &NativeNode,
    agg: &str,
    prop: &Option<String>,
) -> f64 {
    let Some(child) = node.children.iter().find(|c| c.name == agg) else {
        return f64::NAN;
    };
    let entry = bucket
        .get(&child.name)
        .or_else(|| bucket.get(&format!("{}#{}", child.typed_name, child.name)));
    let Some(entry) = entry else { return f64::NAN };
    let value = match prop.as_deref() {
        None | Some("value") => entry.get("value"),
        Some(p) => match entry.get("values") {
            Some(values) => {
                let normalized = p
                    .parse::<f64>()
                    .map(java_double)
                    .unwrap_or_else(|_| p.to_string());
                values.get(normalized)
            }
            None => entry.get(p),
        },
    };
    value.and_then(Value::as_f64).unwrap_or(f64::NAN)
}

fn compare_keys(a: &Value, b: &Value) -> Ordering {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        _ => a
            .as_str()
            .unwrap_or("")
            .as_bytes()
            .cmp(b.as_str().unwrap_or("").as_bytes()),
    }
}

pub(super) fn sort_buckets(
    buckets: &mut [Map<String, Value>],
    order: &[(OrderKey, bool)],
    node: &NativeNode,
) {
    buckets.sort_by(|a, b| {
        for (key, desc) in order {
            let o = match key {
                OrderKey::Count => a["doc_count"].as_u64().cmp(&b["doc_count"].as_u64()),
                OrderKey::Key => compare_keys(&a["key"], &b["key"]),
                OrderKey::Sub(agg, prop) => {
                    // Empty buckets (NaN) come last in either direction, as in OpenSearch.
                    let (x, y) = (sub_value(a, node, agg, prop), sub_value(b, node, agg, prop));
                    let o = match (x.is_nan(), y.is_nan()) {
                        (true, true) => Ordering::Equal,
                        (true, false) => Ordering::Greater,
                        (false, true) => Ordering::Less,
                        _ if *desc => y.total_cmp(&x),
                        _ => x.total_cmp(&y),
                    };
                    if o != Ordering::Equal {
                        return o;
                    }
                    continue;
                }
            };
            let o = if *desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    });
}

#[cfg(test)]
mod tests {
    use super::java_double;

    #[test]
    fn doubles_print_like_java() {
        assert_eq!(java_double(100.0), "100.0");
        assert_eq!(java_double(1.5), "1.5");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(1.5778368e12), "1.5778368E12");
        assert_eq!(java_double(0.0001), "1.0E-4");
        assert_eq!(java_double(-3.0), "-3.0");
    }
}
