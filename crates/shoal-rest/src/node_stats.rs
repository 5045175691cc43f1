//! `GET /_nodes[/{node_id}]/stats[/{metric}[/{index_metric}]]`: the statistics of every node the
//! selectors name, each gathered by that node (`NodeStatsService`), with what the cluster state
//! says of it (name, addresses, roles, attributes), limited to the metrics asked for.

use std::sync::Arc;

use serde_json::{Map, Value};
use shoal_node::node_stats::StatsRequest;
use shoal_node::{ApiError, ApiResult, Node};

use crate::cluster_admin::{
    failed_node, insert_node_addresses, insert_node_roles, nodes_response, timeout_param,
    DEFAULT_TIMEOUT,
};
use crate::request::Params;
use crate::response::{ok, RestResult};
use crate::router::blocking;

/// The metrics Shoal reports, by their `_nodes/stats/{metric}` name.
const METRICS: &[&str] = &[
    "indices",
    "os",
    "process",
    "jvm",
    "fs",
    "thread_pool",
    "transport",
    "http",
    "breaker",
    "indexing_pressure",
    "discovery",
];

/// OpenSearch's other node metrics: sections Shoal does not have (asking for one is refused,
/// not answered without it).
const UNREPORTED_METRICS: &[&str] = &[
    "script",
    "ingest",
    "adaptive_selection",
    "script_cache",
    "shard_indexing_pressure",
    "search_backpressure",
    "cluster_manager_throttling",
    "weighted_routing",
    "file_cache",
    "task_cancellation",
    "search_pipeline",
    "resource_usage_stats",
    "segment_replication_backpressure",
    "repositories",
    "admission_control",
    "caches",
    "remote_store",
];

const PARAMS: &[&str] = &["timeout", "level", "include_segment_file_sizes"];
const UNSUPPORTED_PARAMS: &[&str] = &[
    "completion_fields",
    "fielddata_fields",
    "fields",
    "groups",
    "types",
];

/// What one request asks for.
struct Selection {
    nodes: Vec<String>,
    /// The sections asked for, by their key in the answer (`breaker` is `breakers`).
    sections: Vec<String>,
    index_metrics: Vec<String>,
}

pub async fn nodes_stats(
    node: Arc<Node>,
    nodes: Option<String>,
    metric: Option<String>,
    index_metric: Option<String>,
    params: Params,
) -> RestResult {
    let path = request_path(nodes.as_deref(), metric.as_deref(), index_metric.as_deref());
    params.refuse_unsupported(&path, UNSUPPORTED_PARAMS)?;
    params.refuse_unknown(&path, PARAMS)?;
    let by_index = match params.get("level").unwrap_or("node") {
        "node" => false,
        "indices" => true,
        "shards" => return Err(ApiError::bad_request(
            "level [shards] is not supported by Shoal's _nodes/stats: only [node] and [indices] \
                 (per-shard statistics are in /_stats?level=shards)",
        )
        .into()),
        level => {
            return Err(ApiError::bad_request(format!(
                "level parameter must be one of [indices] or [node] or [shards] but was [{level}]"
            ))
            .into())
        }
    };
    let file_sizes = params.bool_or("include_segment_file_sizes", false)?;
    let selection = select(&path, nodes, metric, index_metric)?;
    let request = StatsRequest {
        sections: selection.sections.clone(),
        by_index,
    };
    let timeout = timeout_param(&params, "timeout", DEFAULT_TIMEOUT)?;
    let body = blocking(move || -> ApiResult<Value> {
        let state = node.admin.view();
        let ids = state.resolve_node_selectors(&node.core().node_id, &selection.nodes);
        let mut rendered = Map::new();
        let mut failures = Vec::new();
        let asked = node.node_stats.nodes_stats(&ids, &request, timeout);
        for (id, answer) in asked {
            match (answer, state.node(&id)) {
                (Ok(sections), Some(discovery)) => {
                    rendered.insert(id, render(discovery, sections, &selection));
                }
                (Ok(_), None) => {}
                (Err(e), _) => failures.push(failed_node(&id, &e)),
            }
        }
        let cluster_name = &node.core().config.cluster_name;
        let mut body = nodes_response(cluster_name, ids.len(), rendered, failures);
        crate::index_metrics::file_sizes_only_if(&mut body, file_sizes);
        Ok(body)
    })
    .await?;
    ok(body, &params)
}

fn request_path(nodes: Option<&str>, metric: Option<&str>, index_metric: Option<&str>) -> String {
    let mut path = String::from("/_nodes");
    for (prefix, part) in [
        ("/", nodes),
        ("/stats", Some("")),
        ("/", metric),
        ("/", index_metric),
    ] {
        if let Some(part) = part {
            path.push_str(prefix);
            path.push_str(part);
        }
    }
    path
}

fn split(part: Option<String>) -> Vec<String> {
    match part {
        None => vec!["_all".to_string()],
        Some(text) => text.split(',').map(|s| s.trim().to_string()).collect(),
    }
}

/// The nodes, metrics and index metrics of a request, refusing names OpenSearch does not have
/// (with suggestions) and sections Shoal does not report.
fn select(
    path: &str,
    nodes: Option<String>,
    metric: Option<String>,
    index_metric: Option<String>,
) -> ApiResult<Selection> {
    let metrics = split(metric);
    crate::request::refuse_names(path, "metric", &metrics, METRICS, UNREPORTED_METRICS)?;
    if index_metric.is_some() && !metrics.iter().any(|m| m == "indices" || m == "_all") {
        return Err(ApiError::bad_request(format!(
            "request [{path}] contains index metrics [{}] but indices stats not requested",
            index_metric.unwrap_or_default()
        )));
    }
    let index_metrics = crate::index_metrics::parse(path, "index metric", index_metric.as_deref())?;
    let wanted = |m: &str| metrics.iter().any(|x| x == "_all" || x == m);
    let sections = METRICS
        .iter()
        .filter(|m| wanted(m))
        .map(|m| match *m {
            "breaker" => "breakers".to_string(),
            key => key.to_string(),
        })
        .collect();
    Ok(Selection {
        nodes: split(nodes),
        sections,
        index_metrics,
    })
}

/// One node's entry: who it is (from the cluster state), then the sections asked for.
fn render(
    discovery: &shoal_state::DiscoveryNode,
    mut sections: Value,
    selection: &Selection,
) -> Value {
    let mut out = Map::new();
    out.insert("timestamp".into(), sections["timestamp"].take());
    insert_node_addresses(&mut out, discovery);
    insert_node_roles(&mut out, discovery);
    for key in &selection.sections {
        let mut section = sections[key.as_str()].take();
        if key == "indices" {
            keep_index_metrics(&mut section, &selection.index_metrics);
        }
        out.insert(key.clone(), section);
    }
    Value::Object(out)
}

/// Keeps the index metrics asked for in the node's totals and in each index's (`level=indices`).
fn keep_index_metrics(section: &mut Value, metrics: &[String]) {
    let by_index = section.as_object_mut().and_then(|s| s.remove("indices"));
    crate::index_metrics::keep(section, metrics);
    if let (Some(Value::Object(mut each)), Some(out)) = (by_index, section.as_object_mut()) {
        for index in each.values_mut() {
            crate::index_metrics::keep(index, metrics);
        }
        out.insert("indices".into(), Value::Object(each));
    }
}
