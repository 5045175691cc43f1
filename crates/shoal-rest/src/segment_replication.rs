//! `GET /_cat/segment_replication[/{index}]`: one row per replica of a segment-replicated
//! shard, as its primary sees it (OpenSearch's default columns; lag from a checkpoint's
//! publication to the replica's report that it searches it).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::Router;
use shoal_node::settings::format_time;
use shoal_node::{ApiError, ApiResult, Node, ResolveOptions};

use crate::cat::{col, n, t, Cell, Column, Table};
use crate::request::Params;
use crate::response::RestResult;
use crate::router::blocking;

type S = Arc<Node>;
type Q = Query<std::collections::HashMap<String, String>>;

pub fn routes() -> Router<S> {
    Router::new()
        .route(
            "/_cat/segment_replication",
            get(|State(s): State<S>, Query(q): Q| cat(s, None, Params(q))),
        )
        .route(
            "/_cat/segment_replication/{index}",
            get(|State(s): State<S>, Path(i): Path<String>, Query(q): Q| {
                cat(s, Some(i), Params(q))
            }),
        )
}

async fn cat(node: Arc<Node>, index: Option<String>, params: Params) -> RestResult {
    if params.bool_or("detailed", false)? {
        return Err(ApiError::bad_request(
            "[detailed] is not supported by Shoal's _cat/segment_replication yet: the default columns are",
        )
        .into());
    }
    let active_only = params.bool_or("active_only", false)?;
    let shards = shard_filter(params.get("shards"))?;
    let time_unit = params.get("time").map(str::to_string);
    let table = blocking(move || -> ApiResult<Table> {
        let indices = match &index {
            Some(expression) => Some(
                node.core()
                    .resolve(expression, ResolveOptions::admin())?
                    .iter()
                    .map(|s| s.name())
                    .collect(),
            ),
            None => None,
        };
        let state = node.admin.view();
        let time = |ms: u64| time_cell(ms, time_unit.as_deref());
        let rows = node
            .segrep
            .replica_rows(indices)
            .into_iter()
            .filter(|r| !active_only || r.checkpoints_behind > 0)
            .filter(|r| shards.as_ref().is_none_or(|s| s.contains(&r.shard)))
            .map(|r| {
                let target = state.node(&r.target_node);
                vec![
                    t(format!("[{}][{}]", r.index, r.shard)),
                    t(target.map_or(r.target_node.clone(), |n| n.name.clone())),
                    t(target.map_or(String::new(), |n| n.host.clone())),
                    n(r.checkpoints_behind as i64),
                    Cell::Bytes(r.bytes_behind),
                    time(r.current_lag_ms),
                    r.last_completed_lag_ms.map_or(Cell::Null, time),
                    n(r.rejected_requests as i64),
                ]
            })
            .collect();
        Ok(Table {
            columns: vec![
                col!("shardId", ["s"], true, "shard id"),
                col!("target_node", ["tnode"], true, "target node name"),
                col!("target_host", ["thost"], true, "target host"),
                col!(
                    "checkpoints_behind",
                    ["cpb"],
                    true,
                    "checkpoints behind primary"
                ),
                col!("bytes_behind", ["bb"], true, "bytes behind primary"),
                col!("current_lag", ["clag"], true, "current lag"),
                col!("last_completed_lag", ["lcl"], true, "last completed lag"),
                col!(
                    "rejected_requests",
                    ["rr"],
                    true,
                    "count of rejected requests for the replication group"
                ),
            ],
            rows,
        })
    })
    .await?;
    table.render(&params)
}

/// `shards=0,2`: only those shard numbers.
fn shard_filter(text: Option<&str>) -> ApiResult<Option<Vec<usize>>> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    text.split(',')
        .map(|s| {
            s.trim().parse::<usize>().map_err(|_| {
                ApiError::bad_request(format!("failed to parse shard id [{s}] of [shards]"))
            })
        })
        .collect::<ApiResult<Vec<_>>>()
        .map(Some)
}

/// A lag as OpenSearch prints a `TimeValue`, or a number in the `time` unit asked for.
fn time_cell(ms: u64, unit: Option<&str>) -> Cell {
    let divisor = match unit {
        Some("nanos") => return n((ms * 1_000_000) as i64),
        Some("micros") => return n((ms * 1_000) as i64),
        Some("ms") => 1,
        Some("s") => 1_000,
        Some("m") => 60_000,
        Some("h") => 3_600_000,
        Some("d") => 86_400_000,
        // OpenSearch prints no lag as `0s`.
        _ if ms == 0 => return t("0s"),
        _ => return t(format_time(Duration::from_millis(ms))),
    };
    n((ms / divisor) as i64)
}
