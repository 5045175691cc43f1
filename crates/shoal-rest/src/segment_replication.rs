//! `GET /_cat/segment_replication[/{index}]`: one row per replica of a segment-replicated
//! shard, as its primary sees it (OpenSearch's columns; lag from a checkpoint's publication
//! to the replica's report that it searches it). With `detailed`, the replica's last
//! completed copy round by stage, as it reported it with that checkpoint.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::Router;
use shoal_node::recovery::progress::percent;
use shoal_node::segrep::stats::ReplicaRow;
use shoal_node::settings::{format_date_millis, format_time};
use shoal_node::shard::segrep::CopyRound;
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
    let detailed = params.bool_or("detailed", false)?;
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
                let mut row = vec![
                    t(format!("[{}][{}]", r.index, r.shard)),
                    t(target.map_or(r.target_node.clone(), |n| n.name.clone())),
                    t(target.map_or(String::new(), |n| n.host.clone())),
                    n(r.checkpoints_behind as i64),
                    Cell::Bytes(r.bytes_behind),
                    time(r.current_lag_ms),
                    r.last_completed_lag_ms.map_or(Cell::Null, time),
                    n(r.rejected_requests as i64),
                ];
                if detailed {
                    row.extend(round_cells(&r, &time));
                }
                row
            })
            .collect();
        let mut columns = default_columns();
        if detailed {
            columns.extend(detailed_columns());
        }
        Ok(Table { columns, rows })
    })
    .await?;
    table.render(&params)
}

/// The columns OpenSearch prints without `detailed`.
fn default_columns() -> Vec<Column> {
    vec![
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
    ]
}

/// The columns `detailed` adds, describing the replica's last completed copy round.
fn detailed_columns() -> Vec<Column> {
    vec![
        col!("stage", ["st"], true, "segment replication event stage"),
        col!("time", ["t", "ti"], true, "last replication event time"),
        col!("files_fetched", ["ff"], true, "files fetched"),
        col!("files_percent", ["fp"], true, "percent of files fetched"),
        col!("bytes_fetched", ["bf"], true, "bytes fetched"),
        col!("bytes_percent", ["bp"], true, "percent of bytes fetched"),
        col!(
            "start_time",
            ["start"],
            true,
            "segment replication start time"
        ),
        col!("stop_time", ["stop"], true, "segment replication stop time"),
        col!("files", ["f"], true, "number of files to fetch"),
        col!("files_total", ["tf"], true, "total number of files"),
        col!("bytes", ["b"], true, "number of bytes to fetch"),
        col!("bytes_total", ["tb"], true, "total number of bytes"),
        col!(
            "replicating_stage_time_taken",
            ["rstt"],
            true,
            "time taken in replicating stage"
        ),
        col!(
            "get_checkpoint_info_stage_time_taken",
            ["gcistt"],
            true,
            "time taken in get checkpoint info stage"
        ),
        col!(
            "file_diff_stage_time_taken",
            ["fdstt"],
            true,
            "time taken in file diff stage"
        ),
        col!(
            "get_files_stage_time_taken",
            ["gfstt"],
            true,
            "time taken in get files stage"
        ),
        col!(
            "finalize_replication_stage_time_taken",
            ["frstt"],
            true,
            "time taken in finalize replication stage"
        ),
    ]
}

/// The `detailed` cells of a row: its replica's last completed round (empty before one).
fn round_cells(row: &ReplicaRow, time: &dyn Fn(u64) -> Cell) -> Vec<Cell> {
    let Some(round) = &row.last_round else {
        return (0..detailed_columns().len()).map(|_| Cell::Null).collect();
    };
    let CopyRound {
        files_fetched,
        files_to_fetch,
        bytes_fetched,
        bytes_to_fetch,
        ..
    } = *round;
    let stage_ms = |ms: u64| t(format!("{ms}ms"));
    vec![
        t("done"),
        time(round.time_ms),
        n(files_fetched as i64),
        t(format!(
            "{:.1}%",
            percent(files_fetched as u64, files_to_fetch as u64)
        )),
        Cell::Bytes(bytes_fetched),
        t(format!("{:.1}%", percent(bytes_fetched, bytes_to_fetch))),
        t(format_date_millis(round.start_time_ms as i64)),
        t(format_date_millis(round.stop_time_ms as i64)),
        n(files_to_fetch as i64),
        n(round.files_total as i64),
        Cell::Bytes(bytes_to_fetch),
        Cell::Bytes(round.bytes_total),
        // The round starts by asking for the checkpoint: nothing happens before it.
        stage_ms(0),
        stage_ms(round.get_checkpoint_info_ms),
        stage_ms(round.file_diff_ms),
        stage_ms(round.get_files_ms),
        stage_ms(round.finalize_ms),
    ]
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
