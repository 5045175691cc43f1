//! The remote store's REST API: `POST /_remotestore/_restore` and
//! `GET /_remotestore/stats/{index}[/{shard}]`.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use serde_json::Value;
use shoal_node::remote::restore::RestoreRequest;
use shoal_node::{ApiError, Node};

use crate::request::{object_body, Params};
use crate::response::{ok, RestResult};
use crate::router::blocking;

type S = Arc<Node>;
type Q = Query<std::collections::HashMap<String, String>>;

pub fn routes() -> Router<S> {
    Router::new()
        .route(
            "/_remotestore/_restore",
            post(|State(s): State<S>, Query(q): Q, b: Bytes| restore(s, Params(q), b)),
        )
        .route(
            "/_remotestore/stats/{index}",
            get(|State(s): State<S>, Path(i): Path<String>, Query(q): Q| {
                stats(s, i, None, Params(q))
            }),
        )
        .route(
            "/_remotestore/stats/{index}/{shard}",
            get(
                |State(s): State<S>, Path((i, shard)): Path<(String, String)>, Query(q): Q| {
                    stats(s, i, Some(shard), Params(q))
                },
            ),
        )
}

/// `POST /_remotestore/_restore?restore_all_shards=&wait_for_completion=` with
/// `{"indices": [...]}`.
async fn restore(node: Arc<Node>, params: Params, body: Bytes) -> RestResult {
    params.refuse_unknown(
        "/_remotestore/_restore",
        &[
            "restore_all_shards",
            "wait_for_completion",
            "cluster_manager_timeout",
            "master_timeout",
        ],
    )?;
    let body = object_body(&body)?;
    if let Some(other) = body
        .as_object()
        .and_then(|m| m.keys().find(|k| *k != "indices"))
    {
        return Err(
            ApiError::parsing(format!("Unknown key for a START_ARRAY in [{other}]")).into(),
        );
    }
    let indices = match body.get("indices") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| ApiError::parsing("[indices] must be an array of index names"))?,
        Some(Value::String(list)) => list.split(',').map(|s| s.trim().to_string()).collect(),
        _ => Vec::new(),
    };
    let request = RestoreRequest {
        indices,
        restore_all_shards: params.bool_or("restore_all_shards", false)?,
        wait_for_completion: params.bool_or("wait_for_completion", false)?,
    };
    let answer = blocking(move || node.remote.restore(request)).await?;
    ok(answer, &params)
}

/// `GET /_remotestore/stats/{index}[/{shard}]`.
async fn stats(
    node: Arc<Node>,
    index: String,
    shard: Option<String>,
    params: Params,
) -> RestResult {
    params.refuse_unknown("/_remotestore/stats", &["local", "timeout"])?;
    let shard = shard
        .map(|s| {
            s.parse::<usize>().map_err(|_| {
                ApiError::bad_request(format!(
                    "Failed to parse int parameter [shard_id] with value [{s}]"
                ))
            })
        })
        .transpose()?;
    let local = params.bool_or("local", false)?;
    let answer = blocking(move || node.remote.stats(&index, shard, local)).await?;
    ok(answer, &params)
}
