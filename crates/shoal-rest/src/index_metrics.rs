//! The index metrics `/_stats/{metric}` and `/_nodes/stats/indices/{index_metric}` take, and
//! which `_stats` section each names. Both APIs check and filter through here, so a metric
//! means the same section in both.

use serde_json::Value;
use shoal_node::ApiError;

/// The metrics whose sections Shoal reports.
const REPORTED: &[&str] = &[
    "docs", "store", "indexing", "get", "search", "merge", "refresh", "flush", "translog",
    "segments", "recovery",
];

/// OpenSearch's other index metrics: sections Shoal does not have (caches, fielddata,
/// completion, warmers). Asking for one is refused, not answered without it.
const UNREPORTED: &[&str] = &[
    "warmer",
    "query_cache",
    "fielddata",
    "completion",
    "suggest",
    "request_cache",
];

/// The comma-separated metrics of `path` (`None`: all), refusing names OpenSearch does not
/// have (with suggestions) and sections Shoal does not report.
pub fn parse(path: &str, noun: &str, metrics: Option<&str>) -> Result<Vec<String>, ApiError> {
    let Some(metrics) = metrics else {
        return Ok(vec!["_all".to_string()]);
    };
    let metrics: Vec<String> = metrics.split(',').map(|m| m.trim().to_string()).collect();
    crate::request::refuse_names(path, noun, &metrics, REPORTED, UNREPORTED)?;
    Ok(metrics)
}

/// Keeps the sections `metrics` name (`merge` is the `merges` section).
pub fn keep(section: &mut Value, metrics: &[String]) {
    if metrics.iter().any(|m| m == "_all") {
        return;
    }
    if let Value::Object(map) = section {
        map.retain(|key, _| {
            metrics
                .iter()
                .any(|m| key == if m == "merge" { "merges" } else { m.as_str() })
        });
    }
}

/// Empties every `segments.file_sizes` in `body` unless the request asked for them
/// (`include_segment_file_sizes=true`): OpenSearch lists them only then, an empty object
/// otherwise.
pub fn file_sizes_only_if(body: &mut Value, include: bool) {
    if include {
        return;
    }
    match body {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match (key.as_str(), value) {
                    ("segments", Value::Object(segments)) => {
                        if let Some(sizes) = segments.get_mut("file_sizes") {
                            *sizes = Value::Object(Default::default());
                        }
                    }
                    (_, value) => file_sizes_only_if(value, include),
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| file_sizes_only_if(v, include)),
        _ => {}
    }
}

#[cfg(test)]
mod file_sizes_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn file_sizes_are_emptied_everywhere_unless_asked_for() {
        let sizes = json!({"store": {"size_in_bytes": 10, "description": "Stored Fields"}});
        let body = json!({"_all": {"total": {"segments": {"count": 1, "file_sizes": sizes}}},
                          "indices": {"i": {"shards": {"0": [{"segments": {"file_sizes": sizes}}]}}}});
        let mut kept = body.clone();
        file_sizes_only_if(&mut kept, true);
        assert_eq!(kept, body);
        let mut emptied = body;
        file_sizes_only_if(&mut emptied, false);
        assert_eq!(
            emptied["_all"]["total"]["segments"],
            json!({"count": 1, "file_sizes": {}})
        );
        assert_eq!(
            emptied["indices"]["i"]["shards"]["0"][0]["segments"]["file_sizes"],
            json!({})
        );
    }
}
