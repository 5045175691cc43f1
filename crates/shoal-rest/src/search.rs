//! Search APIs: `_search`, `_count`, `_msearch`, scroll, delete/update by query.

use std::sync::Arc;

use axum::body::Bytes;
use serde_json::{json, Value};
use shoal_node::{ApiError, Node};

use crate::request::{json_body, object_body, Params};
use crate::response::{ok, RestError, RestResult};
use crate::router::blocking;

/// Search options OpenSearch knows that Shoal does not act on, with why: refused, not ignored.
const UNHONOURED_SEARCH_PARAMS: &[(&str, &str)] = &[
    (
        "cancel_after_time_interval",
        "searches cannot be cancelled yet; use [timeout]",
    ),
    ("phase_took", "per-phase timings are not reported"),
    (
        "include_named_queries_score",
        "named queries do not report scores",
    ),
    ("suggest_field", "suggesters are not supported"),
    ("suggest_mode", "suggesters are not supported"),
    ("suggest_size", "suggesters are not supported"),
    ("suggest_text", "suggesters are not supported"),
    ("search_pipeline", "search pipelines are not supported"),
    ("verbose_pipeline", "search pipelines are not supported"),
];

/// By-query options OpenSearch knows that Shoal does not act on.
const UNHONOURED_BY_QUERY_PARAMS: &[(&str, &str)] = &[
    ("search_timeout", "the search for matches runs to its end"),
    ("pipeline", "ingest pipelines are not supported"),
    (
        "version_type",
        "matches are written back with internal versions",
    ),
];

/// Refuses a search option Shoal does not act on; a boolean one only when true.
fn refuse_unhonoured(path: &str, params: &Params) -> Result<(), ApiError> {
    check_fan_out_options(params)?;
    for (name, why) in UNHONOURED_SEARCH_PARAMS {
        let Some(value) = params.get(name) else {
            continue;
        };
        let off = value == "false"
            && matches!(
                *name,
                "phase_took" | "include_named_queries_score" | "verbose_pipeline"
            );
        if !off {
            return Err(ApiError::bad_request(format!(
                "request [{path}] contains [{name}={value}], which Shoal does not support: {why}"
            )));
        }
    }
    Ok(())
}

/// Options that tune how OpenSearch fans a search out over shards and change no result.
/// Shoal's fan-out has no such knobs, so it takes them, but refuses the values OpenSearch
/// refuses, with its messages.
fn check_fan_out_options(params: &Params) -> Result<(), ApiError> {
    const AT_LEAST: [(&str, i64, &str); 3] = [
        ("batched_reduce_size", 2, "batchedReduceSize"),
        (
            "max_concurrent_shard_requests",
            1,
            "maxConcurrentShardRequests",
        ),
        ("pre_filter_shard_size", 1, "preFilterShardSize"),
    ];
    for (name, min, field) in AT_LEAST {
        if params.i64(name)?.is_some_and(|n| n < min) {
            return Err(ApiError::bad_request(format!("{field} must be >= {min}")));
        }
    }
    // No cross-cluster searches and no throttled (frozen) indices: either value holds.
    params.bool_or("ccs_minimize_roundtrips", true)?;
    params.bool_or("ignore_throttled", true)?;
    Ok(())
}

/// A search body must be a JSON object; OpenSearch names the token and position otherwise.
fn search_body(bytes: &[u8]) -> Result<Value, ApiError> {
    if !bytes.iter().all(u8::is_ascii_whitespace)
        && serde_json::from_slice::<Value>(bytes).is_ok_and(|v| v.is_null())
    {
        return Err(
            ApiError::parsing("Expected [START_OBJECT] but found [VALUE_NULL]")
                .with("line", json!(1))
                .with("col", json!(1)),
        );
    }
    let body = json_body(bytes).map_err(|e| {
        // Malformed JSON in a search body is a top-level json_parse_exception in OpenSearch.
        match e.caused_by {
            Some(cause) => *cause,
            None => e,
        }
    })?;
    match body {
        Value::Null | Value::Object(_) => Ok(body),
        Value::Array(_) => Err(ApiError::parsing(
            "Expected [START_OBJECT] but found [START_ARRAY]",
        )
        .with("line", json!(1))
        .with("col", json!(1))),
        _ => Err(
            ApiError::parsing("Expected [START_OBJECT] but found [VALUE_STRING]")
                .with("line", json!(1))
                .with("col", json!(1)),
        ),
    }
}

pub async fn search(
    node: Arc<Node>,
    index: Option<String>,
    params: Params,
    body: Bytes,
) -> RestResult {
    let path = match &index {
        Some(i) => format!("/{i}/_search"),
        None => "/_search".to_string(),
    };
    // Parameters `_search` does not take at all were refused by the spec check.
    refuse_unhonoured(&path, &params)?;
    let raw = body.clone();
    let body = search_body(&body)?;
    let map = params.0.clone();
    let response = blocking(move || {
        node.reads
            .search(index.as_deref().unwrap_or("_all"), &body, &map)
    })
    .await
    .map_err(|e| RestError(with_position(e.0, &raw)))?;
    ok(response, &params)
}

/// OpenSearch's `parsing_exception` names the line and column of the offending token; the
/// body was decoded before translation, so find the named key in the raw text instead.
fn with_position(error: ApiError, raw: &[u8]) -> ApiError {
    if error.error_type != "parsing_exception" || error.extra.contains_key("line") {
        return error;
    }
    let Some(name) = error
        .reason
        .rsplit('[')
        .next()
        .and_then(|tail| tail.split(']').next())
    else {
        return error;
    };
    let needle = format!("\"{name}\"");
    let text = String::from_utf8_lossy(raw);
    let Some(offset) = text.find(&needle) else {
        return error;
    };
    // Jackson points at the token after the key: the start of its value.
    let after_key = offset + needle.len();
    let value_at = text[after_key..]
        .find(|c: char| !c.is_whitespace() && c != ':')
        .map_or(after_key, |p| after_key + p);
    let offset = value_at;
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = offset - before.rfind('\n').map_or(0, |p| p + 1) + 1;
    error.with("line", json!(line)).with("col", json!(col))
}

pub async fn count(
    node: Arc<Node>,
    index: Option<String>,
    params: Params,
    body: Bytes,
) -> RestResult {
    check_fan_out_options(&params)?;
    let body = search_body(&body)?;
    let map = params.0.clone();
    let response = blocking(move || {
        node.reads
            .count(index.as_deref().unwrap_or("_all"), &body, &map)
    })
    .await?;
    ok(response, &params)
}

/// `_msearch`: NDJSON header/body pairs; each search fails or succeeds on its own.
pub async fn msearch(
    node: Arc<Node>,
    index: Option<String>,
    params: Params,
    body: Bytes,
) -> RestResult {
    check_fan_out_options(&params)?;
    let started = std::time::Instant::now();
    let mut lines = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace));
    let mut requests = Vec::new();
    while let Some(header) = lines.next() {
        let header: Value = serde_json::from_slice(header).map_err(|e| {
            ApiError::parse_exception(format!("failed to parse msearch header: {e}"))
        })?;
        let Some(body) = lines.next() else {
            return Err(
                ApiError::bad_request("msearch request must be terminated by a body line").into(),
            );
        };
        let parsed = search_body(body)?;
        node.reads
            .validate_search_body(&parsed, &params.0)
            .map_err(|e| RestError(with_position(e, body)))?;
        let body = parsed;
        requests.push((header, body));
    }
    if requests.is_empty() {
        return Err(ApiError::action_request_validation(&["no requests added".to_string()]).into());
    }
    let base = params.0.clone();
    let responses = blocking(move || {
        Ok(requests
            .into_iter()
            .map(|(header, body)| {
                let mut map = base.clone();
                map.remove("max_concurrent_searches");
                let target = match header.get("index") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(a)) => a
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(","),
                    _ => index.clone().unwrap_or_else(|| "_all".into()),
                };
                for key in [
                    "routing",
                    "preference",
                    "search_type",
                    "ignore_unavailable",
                    "allow_no_indices",
                ] {
                    if let Some(v) = header.get(key) {
                        map.insert(
                            key.into(),
                            v.as_str()
                                .map(str::to_string)
                                .unwrap_or_else(|| v.to_string()),
                        );
                    }
                }
                match node.reads.search(&target, &body, &map) {
                    Ok(mut response) => {
                        response["status"] = json!(200);
                        response
                    }
                    Err(e) => {
                        let mut response = e.to_response_json();
                        response["status"] = json!(e.status);
                        response
                    }
                }
            })
            .collect::<Vec<_>>())
    })
    .await?;
    ok(
        json!({"took": started.elapsed().as_millis() as u64, "responses": responses}),
        &params,
    )
}

fn scroll_ids(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => s.split(',').map(str::to_string).collect(),
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

pub async fn scroll(
    node: Arc<Node>,
    id: Option<String>,
    params: Params,
    body: Bytes,
) -> RestResult {
    let body = object_body(&body)?;
    let scroll_id = id
        .or_else(|| params.get("scroll_id").map(str::to_string))
        .or_else(|| {
            body.get("scroll_id")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
    let Some(scroll_id) = scroll_id else {
        return Err(
            ApiError::action_request_validation(&["scrollId is missing".to_string()]).into(),
        );
    };
    let keep_alive = params.get("scroll").map(str::to_string).or_else(|| {
        body.get("scroll")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let response = blocking(move || node.reads.scroll(&scroll_id, keep_alive.as_deref())).await?;
    ok(response, &params)
}

pub async fn clear_scroll(
    node: Arc<Node>,
    id: Option<String>,
    params: Params,
    body: Bytes,
) -> RestResult {
    let body = object_body(&body)?;
    let mut ids = id
        .map(|i| i.split(',').map(str::to_string).collect::<Vec<_>>())
        .unwrap_or_default();
    if let Some(v) = body.get("scroll_id") {
        ids.extend(scroll_ids(v));
    }
    if let Some(v) = params.get("scroll_id") {
        ids.extend(v.split(',').map(str::to_string));
    }
    if ids.is_empty() {
        return Err(
            ApiError::action_request_validation(&["no scroll ids specified".to_string()]).into(),
        );
    }
    // `_all` succeeds whatever was open (OpenSearch counts each node that cleared as freed);
    // named ids that free nothing are a 404.
    let all = ids.iter().any(|id| id == "_all");
    let freed = blocking(move || Ok(node.reads.clear_scroll(&ids))).await?;
    let status = if freed == 0 && !all {
        axum::http::StatusCode::NOT_FOUND
    } else {
        axum::http::StatusCode::OK
    };
    Ok(crate::response::json(
        status,
        json!({"succeeded": true, "num_freed": freed}),
        &params,
    ))
}

pub async fn by_query(
    node: Arc<Node>,
    index: String,
    update: bool,
    params: Params,
    body: Bytes,
) -> RestResult {
    let path = format!(
        "/{index}/_{}_by_query",
        if update { "update" } else { "delete" }
    );
    refuse_unhonoured_by_query(&path, &params)?;
    let body = search_body(&body)?;
    let map = params.0.clone();
    if !params.bool_or("wait_for_completion", true)? {
        let (action, kind) = match update {
            true => ("indices:data/write/update/byquery", "update-by-query"),
            false => ("indices:data/write/delete/byquery", "delete-by-query"),
        };
        let description = format!("{kind} [{index}]");
        let task = crate::tasks::run_as_task(&node, action, description, move |node| {
            node.writes.by_query(&index, &body, &map, update)
        });
        return ok(json!({ "task": task }), &params);
    }
    let response = blocking(move || node.writes.by_query(&index, &body, &map, update)).await?;
    ok(response, &params)
}

/// The by-query options Shoal does not act on, its search options' and its own: by-query
/// requests run unthrottled and in one slice, so a rate or slices asked for are refused, not
/// ignored.
fn refuse_unhonoured_by_query(path: &str, params: &Params) -> Result<(), ApiError> {
    refuse_unhonoured(path, params)?;
    for (name, why) in UNHONOURED_BY_QUERY_PARAMS {
        if params.get(name).is_some() {
            return Err(ApiError::bad_request(format!(
                "request [{path}] contains [{name}], which Shoal does not support: {why}"
            )));
        }
    }
    if let Some(slices) = params.get("slices").filter(|s| *s != "1") {
        return Err(ApiError::bad_request(format!(
            "[slices={slices}] is not supported by Shoal: by-query requests run as one slice; leave it out or use 1"
        )));
    }
    match params.get("requests_per_second") {
        None => Ok(()),
        Some(rate) if matches!(rate.trim(), "-1" | "-1.0") => Ok(()),
        Some(rate) => Err(ApiError::bad_request(format!(
            "[requests_per_second={rate}] is not supported by Shoal: by-query requests run unthrottled; leave it out or use -1"
        ))),
    }
}
