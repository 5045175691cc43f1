//! Request parsing helpers: URL parameters and bodies.

use std::collections::HashMap;

use serde_json::Value;
use shoal_node::{ApiError, ApiResult};

/// URL query parameters.
#[derive(Debug, Clone, Default)]
pub struct Params(pub HashMap<String, String>);

impl Params {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// A boolean flag: present with no value or `true`.
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("") | Some("true"))
    }

    /// Refuses a parameter neither `known` nor common to every request (`pretty`,
    /// `human`, `error_trace`, `filter_path`), as OpenSearch does.
    pub fn refuse_unknown(&self, path: &str, known: &[&str]) -> ApiResult<()> {
        const COMMON: &[&str] = &["pretty", "human", "error_trace", "filter_path"];
        let mut unknown: Vec<String> = self
            .0
            .keys()
            .filter(|k| !known.contains(&k.as_str()) && !COMMON.contains(&k.as_str()))
            .map(|k| format!("[{k}]"))
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        unknown.sort();
        Err(shoal_node::ApiError::bad_request(format!(
            "request [{path}] contains unrecognized parameter: {}",
            unknown.join(", ")
        )))
    }

    /// Refuses parameters OpenSearch takes but Shoal does not honour, naming them.
    pub fn refuse_unsupported(&self, path: &str, unsupported: &[&str]) -> ApiResult<()> {
        let mut named: Vec<String> = unsupported
            .iter()
            .filter(|k| self.0.contains_key(**k))
            .map(|k| format!("[{k}]"))
            .collect();
        if named.is_empty() {
            return Ok(());
        }
        named.sort();
        Err(ApiError::bad_request(format!(
            "request [{path}] has parameters Shoal does not support: {}; leave them out",
            named.join(", ")
        )))
    }

    pub fn bool_or(&self, key: &str, default: bool) -> ApiResult<bool> {
        shoal_node::error::bool_param(&self.0, key, default)
    }

    pub fn i64(&self, key: &str) -> ApiResult<Option<i64>> {
        match self.get(key) {
            None => Ok(None),
            Some(text) => text.parse().map(Some).map_err(|_| {
                ApiError::bad_request(format!(
                    "Failed to parse int parameter [{key}] with value [{text}]"
                ))
            }),
        }
    }

    pub fn usize(&self, key: &str) -> ApiResult<Option<usize>> {
        Ok(self.i64(key)?.map(|n| n.max(0) as usize))
    }
}

/// Parses a JSON body; empty bodies are `Null`. Malformed JSON is OpenSearch's 400
/// `parse_exception` naming the position.
pub fn json_body(bytes: &[u8]) -> ApiResult<Value> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::new(
            400,
            "parse_exception",
            format!("Failed to parse content to map: {e}"),
        )
        .caused_by(ApiError::new(
            400,
            "json_parse_exception",
            format!("{e} at [line: {}, column: {}]", e.line(), e.column()),
        ))
    })
}

/// Like `json_body`, but the body must be a JSON object (or empty).
pub fn object_body(bytes: &[u8]) -> ApiResult<Value> {
    let value = json_body(bytes)?;
    match value {
        Value::Null | Value::Object(_) => Ok(value),
        other => Err(ApiError::parse_exception(format!(
            "request body is required to be a JSON object, found [{}]",
            match other {
                Value::Array(_) => "START_ARRAY",
                Value::String(_) => "VALUE_STRING",
                _ => "VALUE",
            }
        ))),
    }
}

/// OpenSearch's refusal of unknown path parts (`request [/_stats/fieldata] contains
/// unrecognized metric: [fieldata] -> did you mean [fielddata]?`), suggesting the known
/// values close to each unknown one.
pub fn unrecognized(path: &str, noun: &str, unknown: &[&str], known: &[&str]) -> ApiError {
    let parts: Vec<String> = unknown
        .iter()
        .map(|value| {
            let close: Vec<&str> = known
                .iter()
                .copied()
                .filter(|k| similarity(value, k) > 0.5)
                .collect();
            match close.as_slice() {
                [] => format!("[{value}]"),
                [one] => format!("[{value}] -> did you mean [{one}]?"),
                many => format!("[{value}] -> did you mean any of [{}]?", many.join(", ")),
            }
        })
        .collect();
    let plural = if unknown.len() > 1 { "s" } else { "" };
    ApiError::bad_request(format!(
        "request [{path}] contains unrecognized {noun}{plural}: {}",
        parts.join(", ")
    ))
}

/// Refuses `names` that are neither `reported` nor `unreported` (OpenSearch's names for what
/// Shoal does not have), with suggestions, then the `unreported` ones, naming what Shoal has.
pub fn refuse_names(
    path: &str,
    noun: &str,
    names: &[String],
    reported: &[&str],
    unreported: &[&str],
) -> Result<(), ApiError> {
    let known = |m: &&str| *m == "_all" || reported.contains(m) || unreported.contains(m);
    let unknown: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|m| !known(m))
        .collect();
    if !unknown.is_empty() {
        let all: Vec<&str> = reported.iter().chain(unreported).copied().collect();
        return Err(unrecognized(path, noun, &unknown, &all));
    }
    let missing: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|m| unreported.contains(m))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "request [{path}] asks for {noun}s Shoal does not report: [{}]; it reports [{}]",
        missing.join(", "),
        reported.join(", ")
    )))
}

/// 1 − edit distance ÷ the longer length (Lucene's `LevenshteinDistance`, which OpenSearch's
/// suggestions use).
fn similarity(a: &str, b: &str) -> f64 {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let longest = a.len().max(b.len());
    if longest == 0 {
        return 1.0;
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    1.0 - row[b.len()] as f64 / longest as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_metric_is_refused_with_the_close_known_ones_suggested() {
        let error = unrecognized(
            "/_stats/fieldata",
            "metric",
            &["fieldata"],
            &["docs", "fielddata"],
        );
        assert_eq!(
            error.reason,
            "request [/_stats/fieldata] contains unrecognized metric: [fieldata] -> did you mean [fielddata]?"
        );
        let error = unrecognized("/_stats/x", "metric", &["x", "y"], &["docs"]);
        assert_eq!(
            error.reason,
            "request [/_stats/x] contains unrecognized metrics: [x], [y]"
        );
    }

    #[test]
    fn similarity_is_one_minus_the_edit_distance_over_the_longer_length() {
        assert_eq!(similarity("docs", "docs"), 1.0);
        assert_eq!(similarity("fieldata", "fielddata"), 1.0 - 1.0 / 9.0);
        assert_eq!(similarity("abc", ""), 0.0);
    }
}
