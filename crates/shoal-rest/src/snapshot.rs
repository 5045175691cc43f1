//! The snapshot REST API: repositories (`PUT|GET|DELETE _snapshot/{repo}`, `_verify`),
//! snapshots (`PUT|GET|DELETE _snapshot/{repo}/{snap}`, `_status`, `_restore`) and
//! `_cat/repositories`, `_cat/snapshots/{repo}`.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use serde_json::{Map, Value};
use shoal_node::snapshot::clone::CloneRequest;
use shoal_node::snapshot::create::CreateRequest;
use shoal_node::snapshot::restore::RestoreRequest;
use shoal_node::{ApiError, ApiResult, Node};

use crate::cat::{col, n, t, Cell, Column, Table};
use crate::request::{json_body, Params};
use crate::response::{ok, RestResult};
use crate::router::blocking;

type S = Arc<Node>;
type Q = Query<std::collections::HashMap<String, String>>;

const TIMEOUTS: &[&str] = &["cluster_manager_timeout", "master_timeout", "timeout"];

pub fn routes() -> Router<S> {
    Router::new()
        .route(
            "/_snapshot",
            get(|State(s): State<S>, Query(q): Q| get_repositories(s, String::new(), Params(q))),
        )
        .route(
            "/_snapshot/_status",
            get(|State(s): State<S>, Query(q): Q| status(s, None, None, Params(q))),
        )
        .route(
            "/_snapshot/{repository}",
            get(|State(s): State<S>, Path(r): Path<String>, Query(q): Q| {
                get_repositories(s, r, Params(q))
            })
            .put(
                |State(s): State<S>, Path(r): Path<String>, Query(q): Q, b: Bytes| {
                    put_repository(s, r, Params(q), b)
                },
            )
            .post(
                |State(s): State<S>, Path(r): Path<String>, Query(q): Q, b: Bytes| {
                    put_repository(s, r, Params(q), b)
                },
            )
            .delete(|State(s): State<S>, Path(r): Path<String>, Query(q): Q| {
                delete_repositories(s, r, Params(q))
            }),
        )
        .route(
            "/_snapshot/{repository}/_verify",
            post(|State(s): State<S>, Path(r): Path<String>, Query(q): Q| verify(s, r, Params(q))),
        )
        .route(
            "/_snapshot/{repository}/_cleanup",
            post(|State(s): State<S>, Path(r): Path<String>, Query(q): Q| cleanup(s, r, Params(q))),
        )
        .route(
            "/_snapshot/{repository}/_status",
            get(|State(s): State<S>, Path(r): Path<String>, Query(q): Q| {
                status(s, Some(r), None, Params(q))
            }),
        )
        .route(
            "/_snapshot/{repository}/{snapshot}",
            get(
                |State(s): State<S>, Path((r, n)): Path<(String, String)>, Query(q): Q| {
                    get_snapshots(s, r, n, Params(q))
                },
            )
            .put(
                |State(s): State<S>,
                 Path((r, n)): Path<(String, String)>,
                 Query(q): Q,
                 b: Bytes| { create(s, r, n, Params(q), b) },
            )
            .post(
                |State(s): State<S>,
                 Path((r, n)): Path<(String, String)>,
                 Query(q): Q,
                 b: Bytes| { create(s, r, n, Params(q), b) },
            )
            .delete(
                |State(s): State<S>, Path((r, n)): Path<(String, String)>, Query(q): Q| {
                    delete(s, r, n, Params(q))
                },
            ),
        )
        .route(
            "/_snapshot/{repository}/{snapshot}/_status",
            get(
                |State(s): State<S>, Path((r, n)): Path<(String, String)>, Query(q): Q| {
                    status(s, Some(r), Some(n), Params(q))
                },
            ),
        )
        .route(
            "/_snapshot/{repository}/{snapshot}/_clone/{target}",
            axum::routing::put(
                |State(s): State<S>,
                 Path((r, n, target)): Path<(String, String, String)>,
                 Query(q): Q,
                 b: Bytes| { clone(s, r, n, target, Params(q), b) },
            ),
        )
        .route(
            "/_snapshot/{repository}/{snapshot}/_restore",
            post(
                |State(s): State<S>,
                 Path((r, n)): Path<(String, String)>,
                 Query(q): Q,
                 b: Bytes| { restore(s, r, n, Params(q), b) },
            ),
        )
        .route(
            "/_cat/repositories",
            get(|State(s): State<S>, Query(q): Q| cat_repositories(s, Params(q))),
        )
        .route(
            "/_cat/snapshots",
            get(|State(s): State<S>, Query(q): Q| cat_snapshots(s, None, Params(q))),
        )
        .route(
            "/_cat/snapshots/{repository}",
            get(|State(s): State<S>, Path(r): Path<String>, Query(q): Q| {
                cat_snapshots(s, Some(r), Params(q))
            }),
        )
}

fn known(extra: &[&'static str]) -> Vec<&'static str> {
    TIMEOUTS.iter().chain(extra).copied().collect()
}

async fn put_repository(node: S, name: String, params: Params, body: Bytes) -> RestResult {
    params.refuse_unknown("/_snapshot/{repository}", &known(&["verify"]))?;
    let body = json_body(&body)?;
    let verify = params.bool_or("verify", true)?;
    let answer = blocking(move || node.snapshots.put_repository(&name, &body, verify)).await?;
    ok(answer, &params)
}

async fn get_repositories(node: S, names: String, params: Params) -> RestResult {
    params.refuse_unknown("/_snapshot", &known(&["local"]))?;
    let answer = blocking(move || node.snapshots.get_repositories(&names)).await?;
    ok(answer, &params)
}

async fn delete_repositories(node: S, names: String, params: Params) -> RestResult {
    params.refuse_unknown("/_snapshot/{repository}", &known(&[]))?;
    let answer = blocking(move || node.snapshots.delete_repositories(&names)).await?;
    ok(answer, &params)
}

async fn verify(node: S, name: String, params: Params) -> RestResult {
    params.refuse_unknown("/_snapshot/{repository}/_verify", &known(&[]))?;
    let answer = blocking(move || node.snapshots.verify_repository(&name)).await?;
    ok(answer, &params)
}

/// The body keys a request takes; any other is refused.
fn body_object(body: &Bytes, what: &str, keys: &[&str]) -> ApiResult<Map<String, Value>> {
    let value = match body.is_empty() {
        true => Value::Object(Map::new()),
        false => json_body(body)?,
    };
    let Value::Object(map) = value else {
        return Err(ApiError::parsing(format!(
            "the {what} body must be an object"
        )));
    };
    if let Some(other) = map.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(ApiError::parsing(format!(
            "Unknown key for a {what} request: [{other}]"
        )));
    }
    Ok(map)
}

/// `indices` as a comma list, from a string or an array of strings.
fn index_list(map: &Map<String, Value>, key: &str) -> ApiResult<String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(|v| v.join(","))
            .ok_or_else(|| {
                ApiError::parsing(format!("[{key}] must be a string or an array of strings"))
            }),
        Some(_) => Err(ApiError::parsing(format!(
            "[{key}] must be a string or an array of strings"
        ))),
    }
}

fn flag(map: &Map<String, Value>, key: &str, default: bool) -> ApiResult<bool> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
        Some(other) => Err(ApiError::parsing(format!(
            "[{key}] must be a boolean, got [{other}]"
        ))),
    }
}

fn text(map: &Map<String, Value>, key: &str) -> ApiResult<Option<String>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(ApiError::parsing(format!(
            "[{key}] must be a string, got [{other}]"
        ))),
    }
}

async fn create(
    node: S,
    repository: String,
    snapshot: String,
    params: Params,
    body: Bytes,
) -> RestResult {
    params.refuse_unknown(
        "/_snapshot/{repository}/{snapshot}",
        &known(&["wait_for_completion"]),
    )?;
    let map = body_object(
        &body,
        "create snapshot",
        &[
            "indices",
            "ignore_unavailable",
            "include_global_state",
            "partial",
            "metadata",
            "expand_wildcards",
        ],
    )?;
    if let Some(expand) = text(&map, "expand_wildcards")? {
        if expand != "open" && expand != "all" {
            return Err(ApiError::bad_request(format!(
                "[expand_wildcards] [{expand}] is not supported for snapshots: Shoal snapshots open indices ([open] or [all])"
            ))
            .into());
        }
    }
    let request = CreateRequest {
        repository,
        snapshot,
        indices: index_list(&map, "indices")?,
        ignore_unavailable: flag(&map, "ignore_unavailable", false)?,
        include_global_state: flag(&map, "include_global_state", true)?,
        partial: flag(&map, "partial", false)?,
        metadata: map.get("metadata").filter(|v| !v.is_null()).cloned(),
        wait_for_completion: params.bool_or("wait_for_completion", false)?,
    };
    let answer = blocking(move || node.snapshots.create_snapshot(request)).await?;
    ok(answer, &params)
}

async fn get_snapshots(node: S, repository: String, names: String, params: Params) -> RestResult {
    params.refuse_unknown(
        "/_snapshot/{repository}/{snapshot}",
        &known(&["ignore_unavailable", "verbose"]),
    )?;
    let ignore = params.bool_or("ignore_unavailable", false)?;
    let verbose = params.bool_or("verbose", true)?;
    let answer = blocking(move || {
        node.snapshots
            .get_snapshots(&repository, &names, ignore, verbose)
    })
    .await?;
    ok(answer, &params)
}

async fn delete(node: S, repository: String, names: String, params: Params) -> RestResult {
    params.refuse_unknown("/_snapshot/{repository}/{snapshot}", &known(&[]))?;
    let answer = blocking(move || node.snapshots.delete_snapshots(&repository, &names)).await?;
    ok(answer, &params)
}

async fn cleanup(node: S, repository: String, params: Params) -> RestResult {
    params.refuse_unknown("/_snapshot/{repository}/_cleanup", &known(&[]))?;
    let answer = blocking(move || node.snapshots.cleanup_repository(&repository)).await?;
    ok(answer, &params)
}

async fn status(
    node: S,
    repository: Option<String>,
    names: Option<String>,
    params: Params,
) -> RestResult {
    params.refuse_unknown("/_snapshot/_status", &known(&["ignore_unavailable"]))?;
    let ignore = params.bool_or("ignore_unavailable", false)?;
    let answer = blocking(move || -> ApiResult<Value> {
        let names: Vec<String> = names
            .iter()
            .flat_map(|n| n.split(','))
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect();
        let repositories = match repository {
            Some(r) => vec![r],
            None => node
                .snapshots
                .repository_rows()
                .into_iter()
                .map(|(name, _)| name)
                .collect(),
        };
        let mut snapshots = Vec::new();
        for repository in repositories {
            let answer = node
                .snapshots
                .snapshot_status(&repository, &names, ignore)?;
            if let Some(Value::Array(items)) = answer.get("snapshots") {
                snapshots.extend(items.iter().cloned());
            }
        }
        Ok(serde_json::json!({ "snapshots": snapshots }))
    })
    .await?;
    ok(answer, &params)
}

async fn clone(
    node: S,
    repository: String,
    source: String,
    target: String,
    params: Params,
    body: Bytes,
) -> RestResult {
    params.refuse_unknown(
        "/_snapshot/{repository}/{snapshot}/_clone/{target_snapshot}",
        &known(&[]),
    )?;
    let map = body_object(&body, "clone snapshot", &["indices"])?;
    let request = CloneRequest {
        repository,
        source,
        target,
        indices: index_list(&map, "indices")?,
    };
    let answer = blocking(move || node.snapshots.clone_snapshot(request)).await?;
    ok(answer, &params)
}

async fn restore(
    node: S,
    repository: String,
    snapshot: String,
    params: Params,
    body: Bytes,
) -> RestResult {
    params.refuse_unknown(
        "/_snapshot/{repository}/{snapshot}/_restore",
        &known(&["wait_for_completion"]),
    )?;
    let map = body_object(
        &body,
        "restore snapshot",
        &[
            "indices",
            "ignore_unavailable",
            "include_global_state",
            "rename_pattern",
            "rename_replacement",
            "index_settings",
            "ignore_index_settings",
            "include_aliases",
            "partial",
            "storage_type",
        ],
    )?;
    if let Some(storage) = text(&map, "storage_type")? {
        if storage != "local" {
            return Err(ApiError::bad_request(format!(
                "[storage_type] [{storage}] is not supported: Shoal restores snapshots to local storage ([local])"
            ))
            .into());
        }
    }
    let request = RestoreRequest {
        repository,
        snapshot,
        indices: index_list(&map, "indices")?,
        ignore_unavailable: flag(&map, "ignore_unavailable", false)?,
        include_global_state: flag(&map, "include_global_state", false)?,
        rename_pattern: text(&map, "rename_pattern")?,
        rename_replacement: text(&map, "rename_replacement")?,
        index_settings: map.get("index_settings").filter(|v| !v.is_null()).cloned(),
        ignore_index_settings: index_list(&map, "ignore_index_settings")?
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        include_aliases: flag(&map, "include_aliases", true)?,
        partial: flag(&map, "partial", false)?,
        wait_for_completion: params.bool_or("wait_for_completion", false)?,
    };
    let answer = blocking(move || node.snapshots.restore_snapshot(request)).await?;
    ok(answer, &params)
}

async fn cat_repositories(node: S, params: Params) -> RestResult {
    let rows = node
        .snapshots
        .repository_rows()
        .into_iter()
        .map(|(id, kind)| vec![t(id), t(kind)])
        .collect();
    Table {
        columns: vec![
            col!("id", ["id", "repoId"], true, "unique repository id"),
            col!("type", ["t", "type"], true, "repository type"),
        ],
        rows,
    }
    .render(&params)
}

async fn cat_snapshots(node: S, repository: Option<String>, params: Params) -> RestResult {
    let repository = repository.or_else(|| params.get("repository").map(str::to_string));
    let Some(repository) = repository else {
        if params.flag("help") {
            return snapshots_table(Vec::new()).render(&params);
        }
        return Err(ApiError::bad_request(
            "[repository] is required: GET _cat/snapshots/{repository}",
        )
        .into());
    };
    let rows = blocking(move || node.snapshots.snapshot_rows(&repository)).await?;
    let epoch = |millis: i64| n(millis / 1000);
    let clock = |millis: i64| {
        t(chrono::DateTime::from_timestamp_millis(millis)
            .unwrap_or_default()
            .format("%H:%M:%S")
            .to_string())
    };
    let rows = rows
        .into_iter()
        .map(|r| {
            let end = (r.end_millis > 0).then_some(r.end_millis);
            vec![
                t(r.id),
                t(r.status),
                epoch(r.start_millis),
                clock(r.start_millis),
                end.map_or(Cell::Number(0), epoch),
                end.map_or(t("00:00:00"), clock),
                t(shoal_allocation::time_value(
                    end.map_or(0, |e| e - r.start_millis),
                )),
                n(r.indices as u64),
                n(r.successful_shards as u64),
                n(r.failed_shards as u64),
                n(r.total_shards as u64),
                t(r.reason),
            ]
        })
        .collect();
    snapshots_table(rows).render(&params)
}

/// `_cat/snapshots`' columns, as OpenSearch names them, over `rows`.
fn snapshots_table(rows: Vec<Vec<Cell>>) -> Table {
    Table {
        columns: vec![
            col!("id", ["id", "snapshot"], true, "unique snapshot"),
            col!("status", ["s", "status"], true, "snapshot name"),
            col!(
                "start_epoch",
                ["ste", "startEpoch"],
                true,
                "start time in seconds since 1970-01-01 00:00:00"
            ),
            col!(
                "start_time",
                ["sti", "startTime"],
                true,
                "start time in HH:MM:SS"
            ),
            col!(
                "end_epoch",
                ["ete", "endEpoch"],
                true,
                "end time in seconds since 1970-01-01 00:00:00"
            ),
            col!("end_time", ["eti", "endTime"], true, "end time in HH:MM:SS"),
            col!("duration", ["dur", "duration"], true, "duration"),
            col!("indices", ["i", "indices"], true, "number of indices"),
            col!(
                "successful_shards",
                ["ss", "successful_shards"],
                true,
                "number of successful shards"
            ),
            col!(
                "failed_shards",
                ["fs", "failed_shards"],
                true,
                "number of failed shards"
            ),
            col!(
                "total_shards",
                ["ts", "total_shards"],
                true,
                "number of total shards"
            ),
            col!("reason", ["r", "reason"], false, "reason for failures"),
        ],
        rows,
    }
}
