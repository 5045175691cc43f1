//! Reading cluster settings out of the state.

use serde_json::Value;

use crate::metadata::Metadata;

/// Effective cluster settings: transient over persistent. Callers supply defaults.
pub struct SettingsView<'a> {
    metadata: &'a Metadata,
}

impl<'a> SettingsView<'a> {
    pub fn new(metadata: &'a Metadata) -> SettingsView<'a> {
        SettingsView { metadata }
    }

    pub fn raw(&self, key: &str) -> Option<&'a Value> {
        self.metadata
            .transient_settings
            .get(key)
            .or_else(|| self.metadata.persistent_settings.get(key))
            .or_else(|| self.metadata.node_settings.get(key))
    }

    pub fn get(&self, key: &str) -> Option<String> {
        self.raw(key).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }

    pub fn get_or(&self, key: &str, default: &str) -> String {
        self.get(key).unwrap_or_else(|| default.to_string())
    }

    /// A list setting: a JSON array, or a comma-separated string.
    pub fn list(&self, key: &str) -> Vec<String> {
        self.raw(key).map(list_value).unwrap_or_default()
    }

    pub fn f64_or(&self, key: &str, default: f64) -> f64 {
        self.get(key)
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    }

    pub fn i64_or(&self, key: &str, default: i64) -> i64 {
        self.get(key)
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    }

    pub fn bool_or(&self, key: &str, default: bool) -> bool {
        self.get(key).map(|s| s == "true").unwrap_or(default)
    }

    pub fn millis_or(&self, key: &str, default: i64) -> i64 {
        self.get(key)
            .and_then(|s| parse_duration_millis(&s))
            .unwrap_or(default)
    }

    /// Every effective key starting with `prefix` (for group settings such as
    /// `cluster.routing.allocation.exclude.`).
    pub fn with_prefix(&self, prefix: &str) -> Vec<(String, String)> {
        let mut out: std::collections::BTreeMap<String, String> = Default::default();
        for map in [
            &self.metadata.persistent_settings,
            &self.metadata.transient_settings,
        ] {
            for (k, v) in map.range(prefix.to_string()..) {
                if !k.starts_with(prefix) {
                    break;
                }
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Array(items) => items
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(","),
                    other => other.to_string(),
                };
                out.insert(k.clone(), text);
            }
        }
        out.into_iter().collect()
    }
}

/// A list setting's value: a JSON array, or a comma-separated string (`a,b`, or `[a, b]` as
/// `-E key=[a,b]` gives it).
pub fn list_value(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            })
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        Value::String(s) => split_list(s.trim_matches(|c| c == '[' || c == ']')),
        _ => Vec::new(),
    }
}

pub fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// `1m`, `30s`, `500ms`, `2h`, `1d`, `-1`, or bare milliseconds.
pub fn parse_duration_millis(text: &str) -> Option<i64> {
    let text = text.trim();
    // Like OpenSearch's TimeValue, 0 and -1 need no unit.
    match text {
        "-1" => return Some(-1),
        "0" => return Some(0),
        _ => {}
    }
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (number, unit) = text.split_at(split);
    let n: f64 = number.parse().ok()?;
    let factor = match unit {
        "nanos" => 1e-6,
        "micros" => 1e-3,
        "ms" => 1.0,
        "s" => 1_000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => return None,
    };
    Some((n * factor) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_minus_one_need_no_unit() {
        assert_eq!(parse_duration_millis("0"), Some(0));
        assert_eq!(parse_duration_millis("-1"), Some(-1));
        assert_eq!(parse_duration_millis("5"), None);
        assert_eq!(parse_duration_millis("1.5s"), Some(1500));
    }

    #[test]
    fn durations_parse_like_opensearch_time_values() {
        assert_eq!(parse_duration_millis("1m"), Some(60_000));
        assert_eq!(parse_duration_millis("500ms"), Some(500));
        assert_eq!(parse_duration_millis("0s"), Some(0));
        assert_eq!(parse_duration_millis("-1"), Some(-1));
        assert_eq!(parse_duration_millis("10"), None);
    }
}
