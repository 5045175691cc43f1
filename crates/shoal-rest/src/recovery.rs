//! `GET /_cat/recovery[/{index}]` and `GET [/{index}]/_recovery`: the recoveries of shard
//! copies (peer and store), gathered from every node, so a user can watch a copy catch up.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Map, Value};
use shoal_node::recovery::progress::{percent, RecoveryRecord, Stage};
use shoal_node::{ApiResult, Node, ResolveOptions};

use crate::cat::{col, n, t, Column, Table};
use crate::request::Params;
use crate::response::{ok, RestResult};
use crate::router::blocking;

type S = Arc<Node>;
type Q = Query<std::collections::HashMap<String, String>>;

pub fn routes() -> Router<S> {
    Router::new()
        .route(
            "/_cat/recovery",
            get(|State(s): State<S>, Query(q): Q| cat_recovery(s, None, Params(q))),
        )
        .route(
            "/_cat/recovery/{index}",
            get(|State(s): State<S>, Path(i): Path<String>, Query(q): Q| {
                cat_recovery(s, Some(i), Params(q))
            }),
        )
        .route(
            "/_recovery",
            get(|State(s): State<S>, Query(q): Q| recovery(s, None, Params(q))),
        )
        .route(
            "/{index}/_recovery",
            get(|State(s): State<S>, Path(i): Path<String>, Query(q): Q| {
                recovery(s, Some(i), Params(q))
            }),
        )
}

/// The records of the indices an expression names; `active_only` drops finished ones.
fn records(node: &Node, index: Option<&str>, params: &Params) -> ApiResult<Vec<RecoveryRecord>> {
    let services = node
        .core()
        .resolve(index.unwrap_or("_all"), ResolveOptions::admin())?;
    let names: Vec<String> = services.iter().map(|s| s.name()).collect();
    let active_only = params.bool_or("active_only", false)?;
    Ok(node
        .recoveries
        .records(&names)
        .into_iter()
        .filter(|r| !active_only || r.stage != Stage::Done)
        .collect())
}

fn node_name(state: &shoal_node::admin::ClusterView, id: Option<&str>) -> Option<(String, String)> {
    let node = state.node(id?)?;
    Some((node.host.clone(), node.name.clone()))
}

/// `_cat/recovery` with OpenSearch's columns.
pub async fn cat_recovery(node: Arc<Node>, index: Option<String>, params: Params) -> RestResult {
    let params2 = params.clone();
    let table = blocking(move || -> ApiResult<Table> {
        let state = node.admin.view();
        let rows = records(&node, index.as_deref(), &params2)?
            .into_iter()
            .map(|r| {
                let source = node_name(&state, r.source_node.as_deref());
                let target = node_name(&state, Some(&r.target_node));
                let (files_to_recover, bytes_to_recover) = r.to_recover();
                let text = |v: Option<(String, String)>, host: bool| {
                    v.map_or(t("n/a"), |(h, name)| t(if host { h } else { name }))
                };
                vec![
                    t(r.index.clone()),
                    n(r.shard as i64),
                    t(shoal_allocation::time_value(r.elapsed().as_millis() as i64)),
                    t(r.recovery_type.as_str()),
                    t(r.stage.as_str()),
                    text(source.clone(), true),
                    text(source, false),
                    text(target.clone(), true),
                    text(target, false),
                    t(r.snapshot
                        .as_ref()
                        .map_or("n/a", |(repository, _)| repository)),
                    t(r.snapshot.as_ref().map_or("n/a", |(_, snapshot)| snapshot)),
                    // As OpenSearch: `files` and `bytes` are what was to be recovered, and
                    // byte counts are plain numbers.
                    n(files_to_recover as i64),
                    n(r.files_recovered as i64),
                    t(format!(
                        "{:.1}%",
                        percent(r.files_recovered, files_to_recover)
                    )),
                    n(r.files_total as i64),
                    n(bytes_to_recover as i64),
                    n(r.bytes_recovered as i64),
                    t(format!(
                        "{:.1}%",
                        percent(r.bytes_recovered, bytes_to_recover)
                    )),
                    n(r.bytes_total as i64),
                    n(r.ops_total as i64),
                    n(r.ops_recovered as i64),
                    t(format!("{:.1}%", percent(r.ops_recovered, r.ops_total))),
                ]
            })
            .collect();
        Ok(Table {
            columns: vec![
                col!("index", ["i", "idx"], true, "index name"),
                col!("shard", ["s", "sh"], true, "shard name"),
                col!("time", ["t", "ti"], true, "recovery time"),
                col!("type", ["ty"], true, "recovery type"),
                col!("stage", ["st"], true, "recovery stage"),
                col!("source_host", ["shost"], true, "source host"),
                col!("source_node", ["snode"], true, "source node name"),
                col!("target_host", ["thost"], true, "target host"),
                col!("target_node", ["tnode"], true, "target node name"),
                col!("repository", ["rep"], true, "repository"),
                col!("snapshot", ["snap"], true, "snapshot"),
                col!("files", ["f"], true, "number of files to recover"),
                col!("files_recovered", ["fr"], true, "files recovered"),
                col!("files_percent", ["fp"], true, "percent of files recovered"),
                col!("files_total", ["tf"], true, "total number of files"),
                col!("bytes", ["b"], true, "number of bytes to recover"),
                col!("bytes_recovered", ["br"], true, "bytes recovered"),
                col!("bytes_percent", ["bp"], true, "percent of bytes recovered"),
                col!("bytes_total", ["tb"], true, "total number of bytes"),
                col!(
                    "translog_ops",
                    ["to"],
                    true,
                    "number of translog ops to recover"
                ),
                col!(
                    "translog_ops_recovered",
                    ["tor"],
                    true,
                    "translog ops recovered"
                ),
                col!(
                    "translog_ops_percent",
                    ["top"],
                    true,
                    "percent of translog ops recovered"
                ),
            ],
            rows,
        })
    })
    .await?;
    table.render(&params)
}

/// `[/{index}]/_recovery`: OpenSearch's JSON, one entry per index with its shards.
pub async fn recovery(node: Arc<Node>, index: Option<String>, params: Params) -> RestResult {
    params.refuse_unknown("/{index}/_recovery", &["active_only", "detailed"])?;
    let detailed = params.bool_or("detailed", false)?;
    let human = params.flag("human");
    let params2 = params.clone();
    let body = blocking(move || -> ApiResult<Value> {
        let state = node.admin.view();
        let mut out = Map::new();
        for r in records(&node, index.as_deref(), &params2)? {
            let entry = out
                .entry(r.index.clone())
                .or_insert_with(|| json!({"shards": []}));
            entry["shards"]
                .as_array_mut()
                .expect("array")
                .push(shard_json(&state, &r, human, detailed));
        }
        Ok(Value::Object(out))
    })
    .await?;
    ok(body, &params)
}

fn node_json(state: &shoal_node::admin::ClusterView, id: Option<&str>) -> Value {
    match id.and_then(|id| state.node(id)) {
        Some(n) => {
            json!({"id": n.id, "host": n.host, "transport_address": n.transport_address, "ip": n.ip, "name": n.name})
        }
        None => json!({}),
    }
}

/// A peer recovery's source node, or a snapshot restore's repository and snapshot.
fn source_json(state: &shoal_node::admin::ClusterView, r: &RecoveryRecord) -> Value {
    match &r.snapshot {
        Some((repository, snapshot)) => json!({
            "repository": repository,
            "snapshot": snapshot,
            "version": "2.18.0",
            "index": r.index,
        }),
        None => node_json(state, r.source_node.as_deref()),
    }
}

/// One shard's recovery; with `human`, OpenSearch's readable twins of the times and sizes;
/// with `detailed`, each file.
fn shard_json(
    state: &shoal_node::admin::ClusterView,
    r: &RecoveryRecord,
    human: bool,
    detailed: bool,
) -> Value {
    let mut shard = shard_numbers(state, r);
    if human {
        add_human_fields(&mut shard, r);
    }
    if detailed {
        shard["index"]["files"]["details"] = file_details(r, human);
    }
    shard
}

fn file_details(r: &RecoveryRecord, human: bool) -> Value {
    use shoal_node::settings::format_bytes;
    let details = r.files.iter().map(|f| {
        let mut detail = json!({"name": f.name, "length_in_bytes": f.length, "reused": f.reused,
                                "recovered_in_bytes": f.recovered});
        if human {
            detail["length"] = json!(format_bytes(f.length));
            detail["recovered"] = json!(format_bytes(f.recovered));
        }
        detail
    });
    Value::Array(details.collect())
}

fn add_human_fields(shard: &mut Value, r: &RecoveryRecord) {
    use shoal_allocation::time_value;
    use shoal_node::settings::{format_bytes, format_date_millis as iso_millis};
    let took = time_value(r.elapsed().as_millis() as i64);
    shard["start_time"] = json!(iso_millis(r.start_millis));
    if let Some(stop) = r.stop_millis {
        shard["stop_time"] = json!(iso_millis(stop));
    }
    shard["total_time"] = json!(took);
    let size = &mut shard["index"]["size"];
    size["total"] = json!(format_bytes(r.bytes_total));
    size["reused"] = json!(format_bytes(r.bytes_reused));
    size["recovered"] = json!(format_bytes(r.bytes_recovered));
    shard["index"]["total_time"] = json!(took);
    shard["index"]["source_throttle_time"] = json!(time_value(0));
    shard["index"]["target_throttle_time"] = json!(time_value(r.throttle_millis as i64));
    shard["translog"]["total_time"] = json!(time_value(0));
    shard["verify_index"]["check_index_time"] = json!(time_value(0));
    shard["verify_index"]["total_time"] = json!(time_value(0));
}

fn shard_numbers(state: &shoal_node::admin::ClusterView, r: &RecoveryRecord) -> Value {
    let millis = r.elapsed().as_millis() as u64;
    let (to_recover_files, to_recover_bytes) = r.to_recover();
    json!({
        "id": r.shard,
        "type": r.recovery_type.as_str().to_uppercase(),
        "stage": r.stage.as_str().to_uppercase(),
        "primary": r.primary,
        "start_time_in_millis": r.start_millis,
        "stop_time_in_millis": r.stop_millis,
        "total_time_in_millis": millis,
        "source": source_json(state, r),
        "target": node_json(state, Some(&r.target_node)),
        "index": {
            "size": {"total_in_bytes": r.bytes_total, "reused_in_bytes": r.bytes_reused,
                     "recovered_in_bytes": r.bytes_recovered,
                     "percent": format!("{:.1}%", percent(r.bytes_recovered, to_recover_bytes))},
            "files": {"total": r.files_total, "reused": r.files_reused, "recovered": r.files_recovered,
                      "percent": format!("{:.1}%", percent(r.files_recovered, to_recover_files))},
            "total_time_in_millis": millis,
            "source_throttle_time_in_millis": 0,
            "target_throttle_time_in_millis": r.throttle_millis
        },
        "translog": {"recovered": r.ops_recovered, "total": r.ops_total,
                     "percent": format!("{:.1}%", percent(r.ops_recovered, r.ops_total)),
                     "total_on_start": r.ops_total, "total_time_in_millis": 0},
        "verify_index": {"check_index_time_in_millis": 0, "total_time_in_millis": 0}
    })
}
