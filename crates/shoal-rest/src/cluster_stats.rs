//! `GET /_cluster/stats[/nodes/{node_id}]`: the cluster in one answer, for dashboards and
//! monitors. Indices: the copies on the selected nodes (shard counts from the routing table,
//! documents from the primaries, store and segments from every copy) and the field types of
//! the mappings. Nodes: roles from the cluster state, OS, process and filesystem from each
//! node's own `_nodes/stats` sections.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{json, Map, Value};
use shoal_node::index_service::IndexService;
use shoal_node::{stats, ApiResult, Node, ResolveOptions};
use shoal_state::{DiscoveryNode, Role};

use crate::cluster_admin::{timeout_param, DEFAULT_TIMEOUT};
use crate::request::Params;
use crate::response::{ok, RestResult};
use crate::router::blocking;

pub async fn cluster_stats(node: Arc<Node>, nodes: Option<String>, params: Params) -> RestResult {
    let path = match &nodes {
        Some(nodes) => format!("/_cluster/stats/nodes/{nodes}"),
        None => "/_cluster/stats".to_string(),
    };
    params.refuse_unknown(&path, &["timeout", "flat_settings"])?;
    let timeout = timeout_param(&params, "timeout", DEFAULT_TIMEOUT)?;
    let selectors: Vec<String> = match nodes {
        Some(text) => text.split(',').map(|s| s.trim().to_string()).collect(),
        None => vec!["_all".to_string()],
    };
    let body = blocking(move || -> ApiResult<Value> {
        let state = node.admin.view();
        let ids = state.resolve_node_selectors(&node.core().node_id, &selectors);
        let selected: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        let services = node.core().resolve("_all", ResolveOptions::search())?;
        let mut indices = indices_section(&node, &state, &services, &selected);
        // OpenSearch's `_cluster/stats` lists no segment files by extension.
        crate::index_metrics::file_sizes_only_if(&mut indices, false);
        let mut answered = Vec::new();
        let mut failed = 0;
        // Only the node sections summed here: the index figures come from the copies.
        let sections = ["os", "process", "fs"].map(str::to_string);
        for (id, answer) in node.node_stats.nodes_stats(
            &ids,
            &shoal_node::node_stats::StatsRequest::for_sections(&sections),
            timeout,
        ) {
            match (answer, state.node(&id)) {
                (Ok(sections), Some(discovery)) => answered.push((discovery.clone(), sections)),
                _ => failed += 1,
            }
        }
        let discovery_type = match node.core().cluster().config().single_node {
            true => "single-node",
            false => "zen",
        };
        Ok(json!({
            "_nodes": {"total": ids.len(), "successful": answered.len(), "failed": failed},
            "cluster_name": node.core().config.cluster_name,
            "cluster_uuid": node.core().cluster_uuid(),
            "timestamp": shoal_node::node::now_millis(),
            "status": state.health(None).status.as_str(),
            "indices": indices,
            "nodes": nodes_section(&answered, discovery_type),
        }))
    })
    .await?;
    ok(body, &params)
}

fn indices_section(
    node: &Node,
    state: &shoal_node::admin::ClusterView,
    services: &[Arc<IndexService>],
    selected: &BTreeSet<&str>,
) -> Value {
    let mut copies = node.broadcast.copy_stats(services);
    copies.retain(|(_, _, node_id), _| selected.contains(node_id.as_str()));
    let mut sections = stats::zero_section();
    let mut docs = stats::zero_section()["docs"].take();
    let mut per_index = Vec::new();
    for service in services {
        let name = service.name();
        let (primaries, total) = stats::index_copy_totals(state, &name, &copies);
        stats::add_sections(&mut sections, &stats::stats_section(service, &total));
        stats::add_sections(
            &mut docs,
            &stats::stats_section(service, &primaries)["docs"],
        );
        let on_selected = |primary_only: bool| {
            state
                .shard_copies(&name)
                .iter()
                .flatten()
                .filter(|c| c.is_active() && (c.primary || !primary_only))
                .filter(|c| c.node.as_deref().is_some_and(|n| selected.contains(n)))
                .count()
        };
        per_index.push((on_selected(false), on_selected(true)));
    }
    let (total, primaries): (usize, usize) =
        per_index.iter().fold((0, 0), |(t, p), (total, primaries)| {
            (t + total, p + primaries)
        });
    json!({
        "count": services.len(),
        "shards": shards_section(total, primaries, &per_index),
        "docs": docs,
        "store": sections["store"].take(),
        "segments": sections["segments"].take(),
        "fielddata": {"memory_size_in_bytes": 0, "evictions": 0},
        "query_cache": {"memory_size_in_bytes": 0, "total_count": 0, "hit_count": 0, "miss_count": 0,
                        "cache_size": 0, "cache_count": 0, "evictions": 0},
        "completion": {"size_in_bytes": 0},
        "mappings": {"field_types": field_types(services)},
    })
}

/// OpenSearch's shard counts: active copies and primaries, and per index their min/max/avg.
fn shards_section(total: usize, primaries: usize, per_index: &[(usize, usize)]) -> Value {
    if per_index.is_empty() {
        return json!({});
    }
    let replication = |total: usize, primaries: usize| match primaries {
        0 => 0.0,
        p => (total - p) as f64 / p as f64,
    };
    let spread = |values: Vec<f64>| {
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        json!({"min": min, "max": max, "avg": values.iter().sum::<f64>() / values.len() as f64})
    };
    json!({
        "total": total,
        "primaries": primaries,
        "replication": replication(total, primaries),
        "index": {
            "shards": spread(per_index.iter().map(|(t, _)| *t as f64).collect()),
            "primaries": spread(per_index.iter().map(|(_, p)| *p as f64).collect()),
            "replication": spread(per_index.iter().map(|(t, p)| replication(*t, *p)).collect()),
        },
    })
}

/// How many fields of each type the mappings have, and in how many indices.
fn field_types(services: &[Arc<IndexService>]) -> Value {
    let mut counts: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for service in services {
        let mut in_index: BTreeMap<String, u64> = BTreeMap::new();
        service.with_meta(|m| count_field_types(&m.mappings["properties"], &mut in_index));
        for (field_type, count) in in_index {
            let entry = counts.entry(field_type).or_default();
            entry.0 += count;
            entry.1 += 1;
        }
    }
    let list: Vec<Value> = counts
        .into_iter()
        .map(|(name, (count, indices))| json!({"name": name, "count": count, "index_count": indices}))
        .collect();
    json!(list)
}

fn count_field_types(properties: &Value, counts: &mut BTreeMap<String, u64>) {
    let Some(fields) = properties.as_object() else {
        return;
    };
    for field in fields.values() {
        let field_type = match field.get("type").and_then(Value::as_str) {
            Some(field_type) => field_type,
            None if field.get("properties").is_some() => "object",
            None => continue,
        };
        *counts.entry(field_type.to_string()).or_default() += 1;
        count_field_types(&field["properties"], counts);
        count_field_types(&field["fields"], counts);
    }
}

/// Role counts from the cluster state; OS, process and filesystem summed over the answers.
fn nodes_section(answered: &[(DiscoveryNode, Value)], discovery_type: &str) -> Value {
    let count_role = |role: Role| {
        answered
            .iter()
            .filter(|(n, _)| n.roles.contains(&role))
            .count()
    };
    let coordinating_only = answered.iter().filter(|(n, _)| n.roles.is_empty()).count();
    let managers = count_role(Role::ClusterManager);
    let versions: BTreeSet<&str> = answered.iter().map(|(n, _)| n.version.as_str()).collect();
    let sum = |path: &[&str]| -> u64 {
        answered
            .iter()
            .map(|(_, s)| path.iter().fold(s, |v, key| &v[*key]).as_u64().unwrap_or(0))
            .sum()
    };
    let (mem_total, mem_free) = (
        sum(&["os", "mem", "total_in_bytes"]),
        sum(&["os", "mem", "free_in_bytes"]),
    );
    let percent = |part: u64| {
        if mem_total > 0 {
            part * 100 / mem_total
        } else {
            0
        }
    };
    let fds: Vec<u64> = answered
        .iter()
        .map(|(_, s)| s["process"]["open_file_descriptors"].as_u64().unwrap_or(0))
        .collect();
    let processors = sum(&["os", "available_processors"]);
    let n = answered.len();
    let mut count = Map::new();
    for (key, value) in [
        ("total", n),
        ("cluster_manager", managers),
        ("master", managers),
        ("data", count_role(Role::Data)),
        ("ingest", count_role(Role::Ingest)),
        (
            "remote_cluster_client",
            count_role(Role::RemoteClusterClient),
        ),
        ("coordinating_only", coordinating_only),
        ("search", 0),
    ] {
        count.insert(key.into(), json!(value));
    }
    json!({
        "count": count,
        "versions": versions,
        "os": {"available_processors": processors, "allocated_processors": processors,
               "names": [{"name": "Linux", "count": n}], "pretty_names": [{"pretty_name": "Linux", "count": n}],
               "mem": {"total_in_bytes": mem_total, "free_in_bytes": mem_free,
                       "used_in_bytes": mem_total.saturating_sub(mem_free),
                       "free_percent": percent(mem_free), "used_percent": percent(mem_total.saturating_sub(mem_free))}},
        "process": {"cpu": {"percent": 0},
                    "open_file_descriptors": {"min": fds.iter().min().copied().unwrap_or(0),
                                              "max": fds.iter().max().copied().unwrap_or(0),
                                              "avg": if n > 0 { fds.iter().sum::<u64>() / n as u64 } else { 0 }}},
        // No JVM: zeros, because dashboards read the section.
        "jvm": {"max_uptime_in_millis": 0, "versions": [], "mem": {"heap_used_in_bytes": 0, "heap_max_in_bytes": 0},
                "threads": 0},
        "fs": {"total_in_bytes": sum(&["fs", "total", "total_in_bytes"]),
               "free_in_bytes": sum(&["fs", "total", "free_in_bytes"]),
               "available_in_bytes": sum(&["fs", "total", "available_in_bytes"])},
        "plugins": [],
        "network_types": {"transport_types": {"grpc": n}, "http_types": {"hyper": n}},
        "discovery_types": {discovery_type: n},
        "packaging_types": [{"type": "tar", "count": n}],
        "ingest": {"number_of_pipelines": 0, "processor_stats": {}},
    })
}
