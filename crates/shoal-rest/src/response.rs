//! Rendering responses: JSON (with `pretty` and `filter_path`), errors, HEAD, plain text.

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use shoal_node::ApiError;

use crate::request::Params;

/// A handler's result: a response or an OpenSearch error.
pub type RestResult = Result<Response, RestError>;

/// An `ApiError` rendered with OpenSearch's error body.
#[derive(Debug)]
pub struct RestError(pub ApiError);

impl From<ApiError> for RestError {
    fn from(e: ApiError) -> Self {
        RestError(e)
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.0.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            let caused_by = self.0.caused_by.as_ref().map(|c| c.error_type.as_str());
            tracing::error!(
                error_type = %self.0.error_type,
                caused_by = caused_by.unwrap_or_default(),
                reason = %self.0.reason,
                "request failed"
            );
        }
        json_response(status, &self.0.to_response_json(), false)
    }
}

/// A JSON response, honouring `pretty` and `filter_path`.
pub fn json(status: StatusCode, body: Value, params: &Params) -> Response {
    let body = match params.get("filter_path") {
        Some(paths) => filter_path(&body, paths),
        None => body,
    };
    json_response(status, &body, params.flag("pretty"))
}

/// Adds OpenSearch's deprecation `Warning` header (RFC 7234 code 299) to `response`.
pub fn with_deprecation_warning(mut response: Response, message: &str) -> Response {
    let value = format!(
        "299 OpenSearch-{} \"{}\"",
        shoal_node::OPENSEARCH_VERSION,
        message.replace('"', "\\\"")
    );
    if let Ok(value) = axum::http::HeaderValue::from_str(&value) {
        response
            .headers_mut()
            .append(axum::http::header::WARNING, value);
    }
    response
}

pub fn ok(body: Value, params: &Params) -> RestResult {
    Ok(json(StatusCode::OK, body, params))
}

fn json_response(status: StatusCode, body: &Value, pretty: bool) -> Response {
    let bytes = if pretty {
        serde_json::to_vec_pretty(body)
    } else {
        serde_json::to_vec(body)
    }
    .expect("json serializes");
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=UTF-8"),
    );
    response
}

/// A response with only a status (HEAD requests).
pub fn status_only(status: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=UTF-8"),
    );
    response
}

pub fn text(status: StatusCode, body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=UTF-8"),
    );
    response
}

pub fn status_of(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::OK)
}

/// OpenSearch's `filter_path`: keep only matching dotted paths (`*` and `**` wildcards,
/// `-` prefix to exclude).
pub fn filter_path(body: &Value, spec: &str) -> Value {
    let (excludes, includes): (Vec<&str>, Vec<&str>) = spec
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .partition(|s| s.starts_with('-'));
    let mut out = if includes.is_empty() {
        body.clone()
    } else {
        include(
            body,
            &includes
                .iter()
                .map(|p| p.split('.').collect::<Vec<_>>())
                .collect::<Vec<_>>(),
        )
        .unwrap_or(Value::Object(Map::new()))
    };
    for ex in excludes {
        let parts: Vec<&str> = ex[1..].split('.').collect();
        exclude(&mut out, &parts);
    }
    out
}

fn include(value: &Value, patterns: &[Vec<&str>]) -> Option<Value> {
    if patterns
        .iter()
        .any(|p| p.is_empty() || (p.len() == 1 && p[0] == "**"))
    {
        return Some(value.clone());
    }
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, child) in map {
                let mut next: Vec<Vec<&str>> = Vec::new();
                for p in patterns {
                    if p[0] == "**" {
                        next.push(p.clone());
                        if p.len() > 1 && segment_matches(p[1], key) {
                            next.push(p[2..].to_vec());
                        }
                    } else if segment_matches(p[0], key) {
                        next.push(p[1..].to_vec());
                    }
                }
                if next.is_empty() {
                    continue;
                }
                if let Some(v) = include(child, &next) {
                    out.insert(key.clone(), v);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Value::Array(items) => {
            let kept: Vec<Value> = items
                .iter()
                .filter_map(|item| include(item, patterns))
                .collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        _ => None,
    }
}

fn exclude(value: &mut Value, pattern: &[&str]) {
    match value {
        Value::Object(map) => {
            if pattern.len() == 1 {
                map.retain(|k, _| !segment_matches(pattern[0], k));
                return;
            }
            for (key, child) in map.iter_mut() {
                if segment_matches(pattern[0], key) {
                    exclude(child, &pattern[1..]);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| exclude(i, pattern)),
        _ => {}
    }
}

fn segment_matches(pattern: &str, key: &str) -> bool {
    shoal_node::routing::wildcard_match(pattern, key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filter_path_keeps_matching_paths() {
        let body = json!({"took": 1, "hits": {"total": 2, "hits": [{"_id": "1", "_source": {}}, {"_id": "2"}]}});
        assert_eq!(
            filter_path(&body, "hits.hits._id"),
            json!({"hits": {"hits": [{"_id": "1"}, {"_id": "2"}]}})
        );
        assert_eq!(filter_path(&body, "-hits"), json!({"took": 1}));
        assert_eq!(
            filter_path(&body, "**._id"),
            json!({"hits": {"hits": [{"_id": "1"}, {"_id": "2"}]}})
        );
    }
}
