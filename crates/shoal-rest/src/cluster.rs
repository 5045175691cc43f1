//! Root, cluster and node APIs, and `_stats`.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{json, Map, Value};
use shoal_node::settings;
use shoal_node::stats;
use shoal_node::{ApiError, ApiResult, Node, ResolveOptions, OPENSEARCH_VERSION};
use shoal_state::HealthStatus as Health;

use crate::request::{object_body, Params};
use crate::response::{ok, status_only, RestResult};
use crate::router::blocking;

/// `GET /`.
pub async fn root(node: Arc<Node>, params: Params, head: bool) -> RestResult {
    if head {
        return Ok(status_only(StatusCode::OK));
    }
    ok(
        json!({
            "name": node.core().config.node_name,
            "cluster_name": node.core().config.cluster_name,
            "cluster_uuid": node.core().cluster_uuid(),
            "version": {
                "distribution": "shoal",
                "number": OPENSEARCH_VERSION,
                "build_type": "tar",
                "build_hash": env!("CARGO_PKG_VERSION"),
                "build_date": "2026-11-22T00:00:00.000Z",
                "build_snapshot": false,
                "lucene_version": "9.12.0",
                "minimum_wire_compatibility_version": "7.10.0",
                "minimum_index_compatibility_version": "7.0.0",
                "shoal_version": env!("CARGO_PKG_VERSION")
            },
            "tagline": "The OpenSearch Project: https://opensearch.org/"
        }),
        &params,
    )
}

/// The health body of `state` for the given indices, its status, and whether an index of the
/// expression is missing (red until it exists).
pub(crate) fn health_body(
    node: &Node,
    state: &shoal_node::admin::ClusterView,
    index: Option<&str>,
    level: &str,
) -> ApiResult<(Value, Health, bool)> {
    let mut missing = false;
    let names: Option<Vec<String>> = match index {
        Some(expr) => match node.core().resolve(expr, ResolveOptions::admin()) {
            Ok(services) => Some(services.iter().map(|s| s.name()).collect()),
            // A missing index is red until it is created, like OpenSearch.
            Err(e) if e.status == 404 => {
                missing = true;
                Some(Vec::new())
            }
            Err(e) => return Err(e),
        },
        None => None,
    };
    let health = state.health(names.as_deref());
    let overall = if missing { Health::Red } else { health.status };
    let counts_json = |c: &shoal_state::health::Counts| {
        json!({
            "active_primary_shards": c.active_primary_shards, "active_shards": c.active_shards,
            "relocating_shards": c.relocating_shards, "initializing_shards": c.initializing_shards,
            "unassigned_shards": c.unassigned_shards,
        })
    };
    let mut indices = Map::new();
    if level == "indices" || level == "shards" {
        for (name, index) in &health.indices {
            let mut entry = json!({
                "status": index.status.as_str(), "number_of_shards": index.number_of_shards,
                "number_of_replicas": index.number_of_replicas,
            });
            merge_into(&mut entry, counts_json(&index.counts));
            if level == "shards" {
                let shards: Map<String, Value> = index
                    .shards
                    .iter()
                    .map(|(n, shard)| {
                        let mut v = json!({"status": shard.status.as_str(), "primary_active": shard.primary_active});
                        let mut counts = counts_json(&shard.counts);
                        // Per shard, OpenSearch reports `primary_active` instead of a count.
                        counts.as_object_mut().map(|c| c.remove("active_primary_shards"));
                        merge_into(&mut v, counts);
                        (n.to_string(), v)
                    })
                    .collect();
                entry["shards"] = Value::Object(shards);
            }
            indices.insert(name.clone(), entry);
        }
    }
    let discovered = node.admin.has_cluster_manager();
    let c = &health.counts;
    let mut body = json!({
        "cluster_name": node.core().config.cluster_name,
        "status": overall.as_str(),
        "timed_out": false,
        "number_of_nodes": health.number_of_nodes,
        "number_of_data_nodes": health.number_of_data_nodes,
        "discovered_master": discovered,
        "discovered_cluster_manager": discovered,
        "active_primary_shards": c.active_primary_shards,
        "active_shards": c.active_shards,
        "relocating_shards": c.relocating_shards,
        "initializing_shards": c.initializing_shards,
        "unassigned_shards": c.unassigned_shards,
        "delayed_unassigned_shards": c.delayed_unassigned_shards,
        "number_of_pending_tasks": 0,
        "number_of_in_flight_fetch": 0,
        "task_max_waiting_in_queue_millis": 0,
        "active_shards_percent_as_number": health.active_shards_percent()
    });
    if level == "indices" || level == "shards" {
        body["indices"] = Value::Object(indices);
    }
    Ok((body, overall, missing))
}

fn merge_into(target: &mut Value, extra: Value) {
    if let (Value::Object(t), Value::Object(e)) = (target, extra) {
        t.extend(e);
    }
}

/// `GET /_cluster/state[/{metrics}[/{indices}]]`.
pub async fn state(
    node: Arc<Node>,
    metrics: Option<String>,
    index: Option<String>,
    params: Params,
) -> RestResult {
    let body = blocking(move || {
        let metrics = metrics.unwrap_or_else(|| "_all".into());
        let state = node.admin.view();
        let mut body = json!({"cluster_name": node.core().config.cluster_name});
        merge_into(
            &mut body,
            node.admin
                .cluster_state_json(&state, &metrics, index.as_deref())?,
        );
        Ok(body)
    })
    .await?;
    ok(body, &params)
}

/// `GET /_cluster/settings`.
pub async fn get_settings(node: Arc<Node>, params: Params) -> RestResult {
    let cluster = node.admin.cluster_settings();
    let flat = params.flag("flat_settings");
    let render = |s: &settings::FlatSettings| {
        if flat {
            json!(s)
        } else {
            settings::nest_settings(s)
        }
    };
    let mut body =
        json!({"persistent": render(&cluster.persistent), "transient": render(&cluster.transient)});
    if params.flag("include_defaults") {
        let mut defaults: settings::FlatSettings = settings::registry()
            .cluster_defaults()
            .map(|d| (d.key.clone(), json!(d.default)))
            .collect();
        defaults.extend(cluster.node.clone());
        body["defaults"] = render(&defaults);
    }
    ok(body, &params)
}

/// `PUT /_cluster/settings`.
pub async fn put_settings(node: Arc<Node>, params: Params, body: axum::body::Bytes) -> RestResult {
    let body = object_body(&body)?;
    let persistent =
        settings::flatten_settings(body.get("persistent").unwrap_or(&Value::Null), false)?;
    let transient =
        settings::flatten_settings(body.get("transient").unwrap_or(&Value::Null), false)?;
    if persistent.is_empty() && transient.is_empty() {
        return Err(
            ApiError::action_request_validation(&["no settings to update".to_string()]).into(),
        );
    }
    let (p, t) = (persistent.clone(), transient.clone());
    blocking(move || node.admin.update_cluster_settings(p, t)).await?;
    let strip_nulls = |s: settings::FlatSettings| -> settings::FlatSettings {
        s.into_iter().filter(|(_, v)| !v.is_null()).collect()
    };
    ok(
        json!({"acknowledged": true, "persistent": settings::nest_settings(&strip_nulls(persistent)), "transient": settings::nest_settings(&strip_nulls(transient))}),
        &params,
    )
}

/// How far behind the replicas of this node's segment-replicated primaries are (OpenSearch's
/// `segments.segment_replication`: bytes, and the lag in milliseconds).
fn segment_replication_stats(node: &Node) -> Value {
    let rows = node.segrep.local_replica_rows(None);
    json!({
        "max_bytes_behind": rows.iter().map(|r| r.bytes_behind).max().unwrap_or(0),
        "total_bytes_behind": rows.iter().map(|r| r.bytes_behind).sum::<u64>(),
        "max_replication_lag": rows.iter().map(|r| r.current_lag_ms).max().unwrap_or(0),
    })
}

/// `GET /_nodes/stats`: process, os, fs and indices sections (no JVM).
pub async fn nodes_stats(node: Arc<Node>, params: Params) -> RestResult {
    let body = blocking(move || {
        let mut indices = json!({});
        for service in node.core().all_indices() {
            let s = stats::sum_engine_stats(&service);
            stats::add_sections(&mut indices, &stats::stats_section(&service, &s));
        }
        if let Some(segments) = indices.get_mut("segments").and_then(Value::as_object_mut) {
            segments.insert("segment_replication".into(), segment_replication_stats(&node));
        }
        // OpenSearch 3.3+ reports its merged segment warmer under `merges`.
        if let Some(merges) = indices.get_mut("merges").and_then(Value::as_object_mut) {
            merges.insert(
                "merged_segment_warmer".into(),
                json!(node.segrep.warmer_stats()),
            );
        }
        let process = process_stats();
        let fs = fs_stats(&node.core().paths.data);
        Ok(json!({
            "_nodes": {"total": 1, "successful": 1, "failed": 0},
            "cluster_name": node.core().config.cluster_name,
            "nodes": {node.core().node_id.clone(): {
                "timestamp": shoal_node::node::now_millis(),
                "name": node.core().config.node_name,
                "transport_address": format!("{}:{}", node.core().config.http_host, node.core().config.transport_port),
                "host": node.core().config.http_host, "ip": node.core().config.http_host,
                "roles": ["cluster_manager", "data", "ingest", "remote_cluster_client"],
                "attributes": {},
                "indices": indices,
                "os": os_stats(),
                // No JVM here; the section exists because tools (opensearch-benchmark) read it.
                "jvm": {"timestamp": shoal_node::node::now_millis(), "uptime_in_millis": node.core().started.elapsed().as_millis() as u64,
                        "mem": {"heap_used_in_bytes": 0, "heap_used_percent": 0, "heap_committed_in_bytes": 0, "heap_max_in_bytes": 0,
                                "non_heap_used_in_bytes": 0, "non_heap_committed_in_bytes": 0, "pools": {}},
                        "threads": {"count": 0, "peak_count": 0},
                        "gc": {"collectors": {"young": {"collection_count": 0, "collection_time_in_millis": 0},
                                              "old": {"collection_count": 0, "collection_time_in_millis": 0}}}},
                "process": process,
                "fs": fs,
                "thread_pool": node.core().pressure.stats(),
                "indexing_pressure": node.core().pressure.indexing.stats(),
                "transport": transport_stats(&node),
                "breakers": {}, "http": {"current_open": 0, "total_opened": 0}
            }}
        }))
    })
    .await?;
    ok(body, &params)
}

/// Node-to-node messages and their payload bytes (request and reply bodies, not the framing).
fn transport_stats(node: &Node) -> Value {
    let counts = node.core().transport.stats();
    json!({
        "rx_count": counts.rx_count, "rx_size_in_bytes": counts.rx_bytes,
        "tx_count": counts.tx_count, "tx_size_in_bytes": counts.tx_bytes,
    })
}

fn process_stats() -> Value {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let page = 4096u64;
    let mut fields = statm
        .split_whitespace()
        .map(|f| f.parse::<u64>().unwrap_or(0));
    let virt = fields.next().unwrap_or(0) * page;
    let rss = fields.next().unwrap_or(0) * page;
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_comm = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let parts: Vec<u64> = after_comm
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let ticks = 100u64;
    let cpu_ms =
        (parts.get(11).copied().unwrap_or(0) + parts.get(12).copied().unwrap_or(0)) * 1000 / ticks;
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0);
    json!({"timestamp": shoal_node::node::now_millis(), "open_file_descriptors": open_fds, "max_file_descriptors": 1048576,
        "cpu": {"percent": 0, "total_in_millis": cpu_ms}, "mem": {"total_virtual_in_bytes": virt, "resident_in_bytes": rss}})
}

fn os_stats() -> Value {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let read = |key: &str| -> u64 {
        meminfo
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
            * 1024
    };
    let (total, free) = (read("MemTotal:"), read("MemAvailable:"));
    let load: Vec<f64> = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .filter_map(|v| v.parse().ok())
        .collect();
    json!({"timestamp": shoal_node::node::now_millis(), "cpu": {"percent": 0, "load_average": {"1m": load.first(), "5m": load.get(1), "15m": load.get(2)}},
        "mem": {"total_in_bytes": total, "free_in_bytes": free, "used_in_bytes": total.saturating_sub(free),
                "free_percent": if total > 0 { free * 100 / total } else { 0 }, "used_percent": if total > 0 { (total - free) * 100 / total } else { 0 }}})
}

fn fs_stats(path: &std::path::Path) -> Value {
    let (total, available) = disk_space(path);
    json!({"timestamp": shoal_node::node::now_millis(), "total": {"total_in_bytes": total, "free_in_bytes": available, "available_in_bytes": available},
        "data": [{"path": path.display().to_string(), "total_in_bytes": total, "free_in_bytes": available, "available_in_bytes": available}]})
}

/// Total and available bytes of the filesystem holding `path` (via `df`-like statvfs).
pub fn disk_space(path: &std::path::Path) -> (u64, u64) {
    let output = std::process::Command::new("df")
        .arg("-k")
        .arg("-P")
        .arg(path)
        .output();
    let Ok(output) = output else { return (0, 0) };
    let text = String::from_utf8_lossy(&output.stdout);
    let Some(line) = text.lines().nth(1) else {
        return (0, 0);
    };
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(3)
        .filter_map(|f| f.parse().ok())
        .collect();
    match fields.as_slice() {
        [total, _used, available] => (total * 1024, available * 1024),
        _ => (0, 0),
    }
}

/// Keeps only the requested metrics (`/_stats/docs,store`) of a stats section.
fn metric_filtered(mut section: Value, metric: Option<&str>) -> Value {
    if let (Some(metrics), Value::Object(map)) = (metric.filter(|m| *m != "_all"), &mut section) {
        let keep: Vec<&str> = metrics.split(',').collect();
        map.retain(|k, _| keep.contains(&k.as_str()));
    }
    section
}

/// `level=shards`: one entry per active shard copy in the cluster, with its routing (from the
/// cluster state) and its own sections (from the node holding it).
fn shard_sections(
    state: &shoal_node::admin::ClusterView,
    service: &shoal_node::index_service::IndexService,
    copies: &shoal_node::broadcast::CopyStats,
    metric: Option<&str>,
) -> Value {
    let index = service.name();
    let mut shards = Map::new();
    for ((name, number, node_id), engine_stats) in copies {
        if *name != index {
            continue;
        }
        let Some(routing) = state
            .copies(&index, *number as u32)
            .iter()
            .find(|c| c.node.as_deref() == Some(node_id.as_str()))
        else {
            continue;
        };
        let mut section = metric_filtered(stats::stats_section(service, engine_stats), metric);
        if let Value::Object(map) = &mut section {
            map.insert(
                "routing".into(),
                json!({"state": routing.state.as_str(), "primary": routing.primary,
                "node": node_id, "relocating_node": routing.relocating_node}),
            );
        }
        let entry = shards
            .entry(number.to_string())
            .or_insert_with(|| json!([]));
        if let Value::Array(list) = entry {
            list.push(section);
        }
    }
    Value::Object(shards)
}

const STATS_PARAMS: &[&str] = &["level", "expand_wildcards", "ignore_unavailable", "allow_no_indices"];

/// `_stats` parameters of OpenSearch for sections Shoal does not have (fielddata, completion,
/// search groups, per-file segment sizes).
const UNSUPPORTED_STATS_PARAMS: &[&str] = &[
    "completion_fields",
    "fielddata_fields",
    "fields",
    "groups",
    "include_segment_file_sizes",
    "include_unloaded_segments",
    "forbid_closed_indices",
];

/// The metrics `/_stats/{metric}` takes (OpenSearch's `RestIndicesStatsAction`).
const STATS_METRICS: &[&str] = &[
    "_all", "docs", "store", "indexing", "search", "get", "merge", "refresh", "flush", "warmer",
    "query_cache", "segments", "fielddata", "completion", "translog", "suggest", "request_cache",
    "recovery",
];

fn stats_path(index: Option<&str>, metric: Option<&str>) -> String {
    let index = index.map(|i| format!("/{i}")).unwrap_or_default();
    let metric = metric.map(|m| format!("/{m}")).unwrap_or_default();
    format!("{index}/_stats{metric}")
}

fn check_stats_metrics(path: &str, metric: Option<&str>) -> ApiResult<()> {
    let unknown: Vec<&str> = metric
        .into_iter()
        .flat_map(|m| m.split(','))
        .filter(|m| !STATS_METRICS.contains(m))
        .collect();
    match unknown.is_empty() {
        true => Ok(()),
        false => Err(crate::request::unrecognized(path, "metric", &unknown, STATS_METRICS)),
    }
}

/// `GET /_stats`, `/{index}/_stats[/{metric}]`.
pub async fn index_stats(
    node: Arc<Node>,
    index: Option<String>,
    metric: Option<String>,
    params: Params,
) -> RestResult {
    let path = stats_path(index.as_deref(), metric.as_deref());
    params.refuse_unsupported(&path, UNSUPPORTED_STATS_PARAMS)?;
    params.refuse_unknown(&path, STATS_PARAMS)?;
    check_stats_metrics(&path, metric.as_deref())?;
    let level = params.get("level").unwrap_or("indices");
    if !["cluster", "indices", "shards"].contains(&level) {
        return Err(ApiError::bad_request(format!(
            "level parameter must be one of [cluster] or [indices] or [shards] but was [{level}]"
        ))
        .into());
    }
    let (shard_level, index_level) = (level == "shards", level != "cluster");
    let opts = crate::indices::options(&params, ResolveOptions::search())?;
    let body = blocking(move || {
        let services = node.core().resolve(index.as_deref().unwrap_or("_all"), opts)?;
        let names: Vec<String> = services.iter().map(|s| s.name()).collect();
        node.core().blocks()
            .check_global_then_indices(shoal_node::blocks::BlockLevel::MetadataRead, &names)?;
        let mut all_primaries = json!({});
        let mut all_total = json!({});
        let mut indices = Map::new();
        let (mut total_shards, mut successful) = (0, 0);
        let state = node.admin.view();
        let health = state.health(None);
        let copies = node.broadcast.copy_stats(&services);
        for service in &services {
            let Some(index_health) = health.indices.get(&service.name()) else {
                continue;
            };
            let (primaries, total) = stats::index_copy_totals(&state, &service.name(), &copies);
            let primaries = metric_filtered(stats::stats_section(service, &primaries), metric.as_deref());
            let section = metric_filtered(stats::stats_section(service, &total), metric.as_deref());
            let c = &index_health.counts;
            total_shards += c.active_shards + c.initializing_shards + c.unassigned_shards;
            successful += c.active_shards;
            stats::add_sections(&mut all_primaries, &primaries);
            stats::add_sections(&mut all_total, &section);
            let mut entry = json!({"uuid": service.uuid(), "health": index_health.status.as_str(), "status": "open", "primaries": primaries, "total": section});
            if shard_level {
                entry["shards"] = shard_sections(&state, service, &copies, metric.as_deref());
            }
            indices.insert(service.name(), entry);
        }
        let mut body = json!({"_shards": {"total": total_shards, "successful": successful, "failed": 0},
            "_all": {"primaries": all_primaries, "total": all_total}});
        if index_level {
            body["indices"] = Value::Object(indices);
        }
        Ok(body)
    })
    .await?;
    ok(body, &params)
}
