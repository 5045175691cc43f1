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
    (index, resolve): (Option<&str>, ResolveOptions),
    level: &HealthLevel,
) -> ApiResult<(Value, Health, bool)> {
    let mut missing = false;
    let names: Option<Vec<String>> = match index {
        Some(expr) => match node.core().resolve(expr, resolve) {
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
    if matches!(level, HealthLevel::Indices | HealthLevel::Shards) {
        for (name, index) in &health.indices {
            let mut entry = json!({
                "status": index.status.as_str(), "number_of_shards": index.number_of_shards,
                "number_of_replicas": index.number_of_replicas,
            });
            merge_into(&mut entry, counts_json(&index.counts));
            if *level == HealthLevel::Shards {
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
    match level {
        HealthLevel::Indices | HealthLevel::Shards => body["indices"] = Value::Object(indices),
        HealthLevel::AwarenessAttributes(attribute) => {
            body["awareness_attributes"] = state.awareness_health_json(attribute.as_deref())
        }
        HealthLevel::Cluster => {}
    }
    Ok((body, overall, missing))
}

/// How much a health answer details (`level`, with `awareness_attribute`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HealthLevel {
    Cluster,
    Indices,
    Shards,
    /// One attribute, or every awareness attribute.
    AwarenessAttributes(Option<String>),
}

impl HealthLevel {
    pub(crate) fn parse(params: &Params) -> ApiResult<HealthLevel> {
        let attribute = params.get("awareness_attribute").map(str::to_string);
        let level = match params.get("level").unwrap_or("cluster") {
            "cluster" => HealthLevel::Cluster,
            "indices" => HealthLevel::Indices,
            "shards" => HealthLevel::Shards,
            "awareness_attributes" => {
                return Ok(HealthLevel::AwarenessAttributes(
                    attribute.filter(|a| !a.trim().is_empty()),
                ))
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "level [{other}] is not one of [cluster, indices, shards, awareness_attributes]"
                )))
            }
        };
        if attribute.is_some() {
            return Err(ApiError::action_request_validation(&[
                "level=awareness_attributes is required with awareness_attribute parameter"
                    .to_string(),
            ]));
        }
        Ok(level)
    }
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
    let wait = MetadataVersionWait::parse(&params)?;
    let resolve = crate::indices::options(&params, ResolveOptions::admin())?;
    let flat_settings = params.bool_or("flat_settings", false)?;
    let confirm = crate::health::cluster_manager_confirmation(&params)?;
    let cluster_name = node.core().config.cluster_name.clone();
    let (mut body, state) = match wait {
        Some(wait) => match wait.wait(&node).await {
            Some(state) => (
                json!({"wait_for_timed_out": false, "cluster_name": cluster_name}),
                state,
            ),
            None => {
                let body = json!({"wait_for_timed_out": true, "cluster_name": cluster_name});
                return ok(body, &params);
            }
        },
        None => (
            json!({"cluster_name": cluster_name}),
            crate::health::read_view(&node, confirm).await?,
        ),
    };
    let body = blocking(move || {
        let metrics = metrics.unwrap_or_else(|| "_all".into());
        let request = shoal_node::admin::StateRequest {
            metrics: &metrics,
            index: index.as_deref(),
            resolve,
            flat_settings,
        };
        merge_into(&mut body, node.admin.cluster_state_json(&state, &request)?);
        Ok(body)
    })
    .await?;
    ok(body, &params)
}

/// `wait_for_metadata_version` (and `wait_for_timeout`, 1m by default) of a cluster state
/// request. Shoal's metadata has no version of its own: every metadata change makes a new
/// cluster state, so the state's version, the only one a client reads, stands for it.
struct MetadataVersionWait {
    version: u64,
    timeout: std::time::Duration,
}

impl MetadataVersionWait {
    fn parse(params: &Params) -> ApiResult<Option<MetadataVersionWait>> {
        let timeout = crate::cluster_admin::timeout_param(
            params,
            "wait_for_timeout",
            std::time::Duration::from_secs(60),
        )?;
        let Some(text) = params.get("wait_for_metadata_version") else {
            return Ok(None);
        };
        let version = text.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "Failed to parse long parameter [wait_for_metadata_version] with value [{text}]"
            ))
        })?;
        Ok(Some(MetadataVersionWait { version, timeout }))
    }

    /// The first applied state at or above the version, or `None` after the timeout; no
    /// thread is held while it waits.
    async fn wait(&self, node: &Node) -> Option<shoal_node::admin::ClusterView> {
        let reached = || node.admin.view().version() >= self.version;
        // Versions only grow: the view read after the wait is at least the one that held.
        crate::state_wait::until_true(node, self.timeout, reached)
            .await
            .then(|| node.admin.view())
    }
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

/// The sections of `section` the request's metrics name.
fn filtered(mut section: Value, metrics: &[String]) -> Value {
    crate::index_metrics::keep(&mut section, metrics);
    section
}

/// `level=shards`: one entry per active shard copy in the cluster, with its routing (from the
/// cluster state) and its own sections (from the node holding it).
fn shard_sections(
    state: &shoal_node::admin::ClusterView,
    service: &shoal_node::index_service::IndexService,
    copies: &shoal_node::broadcast::CopyStats,
    metrics: &[String],
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
        let mut section = filtered(stats::stats_section(service, engine_stats), metrics);
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

/// `_stats` parameters of OpenSearch for sections Shoal does not have (fielddata, completion,
/// search groups, unloaded segments).
const UNSUPPORTED_STATS_PARAMS: &[&str] = &[
    "completion_fields",
    "fielddata_fields",
    "fields",
    "groups",
    "include_unloaded_segments",
    "forbid_closed_indices",
];

fn stats_path(index: Option<&str>, metric: Option<&str>) -> String {
    let index = index.map(|i| format!("/{i}")).unwrap_or_default();
    let metric = metric.map(|m| format!("/{m}")).unwrap_or_default();
    format!("{index}/_stats{metric}")
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
    let opts = crate::indices::resolving(
        &params,
        &path,
        &["level", "include_segment_file_sizes"],
        ResolveOptions::search(),
    )?;
    let metrics = crate::index_metrics::parse(&path, "metric", metric.as_deref())?;
    let file_sizes = params.bool_or("include_segment_file_sizes", false)?;
    let level = params.get("level").unwrap_or("indices");
    if !["cluster", "indices", "shards"].contains(&level) {
        return Err(ApiError::bad_request(format!(
            "level parameter must be one of [cluster] or [indices] or [shards] but was [{level}]"
        ))
        .into());
    }
    let (shard_level, index_level) = (level == "shards", level != "cluster");
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
            let primaries = filtered(stats::stats_section(service, &primaries), &metrics);
            let section = filtered(stats::stats_section(service, &total), &metrics);
            let c = &index_health.counts;
            total_shards += c.active_shards + c.initializing_shards + c.unassigned_shards;
            successful += c.active_shards;
            stats::add_sections(&mut all_primaries, &primaries);
            stats::add_sections(&mut all_total, &section);
            let mut entry = json!({"uuid": service.uuid(), "health": index_health.status.as_str(), "status": "open", "primaries": primaries, "total": section});
            if shard_level {
                entry["shards"] = shard_sections(&state, service, &copies, &metrics);
            }
            indices.insert(service.name(), entry);
        }
        let mut body = json!({"_shards": {"total": total_shards, "successful": successful, "failed": 0},
            "_all": {"primaries": all_primaries, "total": all_total}});
        if index_level {
            body["indices"] = Value::Object(indices);
        }
        crate::index_metrics::file_sizes_only_if(&mut body, file_sizes);
        Ok(body)
    })
    .await?;
    ok(body, &params)
}
