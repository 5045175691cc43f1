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
