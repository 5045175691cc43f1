//! Cluster administration APIs: allocation explain, reroute, voting configuration
//! exclusions, pending tasks and `_nodes` info (health is in `health.rs`, the new `_cat`
//! tables in `cat_admin.rs`; all routed from here). The node does the work
//! (`shoal_node::cluster_api`); these handlers parse OpenSearch's parameters and bodies and
//! render its JSON.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value};
use shoal_allocation::ExplainRequest;
use shoal_node::settings::{nest_settings, parse_time, FlatSettings};
use shoal_node::{ApiError, ApiResult, Node};
use shoal_state::RerouteCommand;

use crate::health::health;
use crate::request::{object_body, Params};
use crate::response::{ok, RestResult};
use crate::router::blocking;

type S = Arc<Node>;
type Q = Query<std::collections::HashMap<String, String>>;

pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything but `metadata`: what reroute renders without `metric` (like OpenSearch).
const REROUTE_DEFAULT_METRICS: &str =
    "version,master_node,cluster_manager_node,blocks,nodes,routing_table,routing_nodes";

/// `NodesInfoRequest.Metric` names.
const NODE_INFO_METRICS: [&str; 12] = [
    "settings",
    "os",
    "process",
    "jvm",
    "thread_pool",
    "transport",
    "http",
    "plugins",
    "ingest",
    "aggregations",
    "indices",
    "search_pipelines",
];

pub fn routes() -> Router<S> {
    let p = |q: std::collections::HashMap<String, String>| Params(q);
    Router::new()
        .route(
            "/_cluster/health",
            get(move |State(n): State<S>, Query(q): Q| health(n, None, p(q))),
        )
        .route(
            "/_cluster/health/{index}",
            get(
                move |State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                    health(n, Some(i), p(q))
                },
            ),
        )
        .route(
            "/_cluster/allocation/explain",
            get(move |State(n): State<S>, Query(q): Q, b: Bytes| explain(n, p(q), b))
                .post(move |State(n): State<S>, Query(q): Q, b: Bytes| explain(n, p(q), b)),
        )
        .route(
            "/_cluster/reroute",
            post(move |State(n): State<S>, Query(q): Q, b: Bytes| reroute(n, p(q), b)),
        )
        .route(
            "/_cluster/voting_config_exclusions",
            post(move |State(n): State<S>, Query(q): Q| add_exclusions(n, None, p(q)))
                .delete(move |State(n): State<S>, Query(q): Q| clear_exclusions(n, p(q))),
        )
        .route(
            "/_cluster/voting_config_exclusions/{node_name}",
            post(
                move |State(n): State<S>, Path(d): Path<String>, Query(q): Q| {
                    add_exclusions(n, Some(d), p(q))
                },
            ),
        )
        .route(
            "/_cluster/pending_tasks",
            get(move |Query(q): Q| async move { ok(json!({"tasks": []}), &p(q)) }),
        )
        .route(
            "/_nodes",
            get(move |State(n): State<S>, Query(q): Q| nodes_info(n, None, None, p(q))),
        )
        .route(
            "/_nodes/{node}",
            get(
                move |State(n): State<S>, Path(x): Path<String>, Query(q): Q| {
                    nodes_info(n, Some(x), None, p(q))
                },
            ),
        )
        .route(
            "/_nodes/{node}/{metric}",
            get(
                move |State(n): State<S>, Path((x, m)): Path<(String, String)>, Query(q): Q| {
                    nodes_info(n, Some(x), Some(m), p(q))
                },
            ),
        )
        .merge(crate::cat_admin::routes())
}

pub(crate) fn timeout_param(params: &Params, key: &str, default: Duration) -> ApiResult<Duration> {
    match params.get(key) {
        None => Ok(default),
        Some(text) => match parse_time(text).map_err(|e| {
            ApiError::parse_exception(format!(
                "failed to parse setting [{key}] with value [{text}] as a time value: {e}"
            ))
        })? {
            Some(d) => Ok(d),
            None => Err(ApiError::bad_request(format!(
                "{key} [{text}] must be non-negative"
            ))),
        },
    }
}

fn split_list(text: Option<&str>) -> Vec<String> {
    text.unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

// ----------------------------------------------------------------------- allocation explain

const EXPLAIN_PARSER: &str = "cluster/allocation/explain";

fn field_error(parser: &str, field: &str) -> ApiError {
    ApiError::new(
        400,
        "x_content_parse_exception",
        format!("[{parser}] failed to parse field [{field}]"),
    )
}

fn unknown_field(parser: &str, field: &str) -> ApiError {
    ApiError::new(
        400,
        "x_content_parse_exception",
        format!("[{parser}] unknown field [{field}]"),
    )
}

/// An int field as OpenSearch's parsers take it: a number or a numeric string.
fn int_field(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn bool_field(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s == "true" => Some(true),
        Value::String(s) if s == "false" => Some(false),
        _ => None,
    }
}

fn string_field(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn parse_explain_body(body: &[u8]) -> ApiResult<ExplainRequest> {
    let mut request = ExplainRequest::default();
    let Value::Object(map) = object_body(body)? else {
        return Ok(request);
    };
    for (key, value) in &map {
        let bad = || field_error(EXPLAIN_PARSER, key);
        match key.as_str() {
            "index" => request.index = Some(string_field(value).ok_or_else(bad)?),
            "current_node" => request.current_node = Some(string_field(value).ok_or_else(bad)?),
            "primary" => request.primary = Some(bool_field(value).ok_or_else(bad)?),
            "shard" => {
                let shard = int_field(value).ok_or_else(bad)?;
                let shard = u32::try_from(shard).map_err(|_| {
                    ApiError::new(404, "shard_not_found_exception", "no such shard")
                })?;
                request.shard = Some(shard);
            }
            other => return Err(unknown_field(EXPLAIN_PARSER, other)),
        }
    }
    Ok(request)
}

/// `GET|POST /_cluster/allocation/explain`.
pub async fn explain(node: Arc<Node>, params: Params, body: Bytes) -> RestResult {
    let include_yes = params.bool_or("include_yes_decisions", false)?;
    let include_disk = params.bool_or("include_disk_info", false)?;
    let request = parse_explain_body(&body)?;
    let out = blocking(move || {
        node.admin
            .allocation_explain(&request, include_yes, include_disk)
    })
    .await?;
    ok(out, &params)
}

// ----------------------------------------------------------------------------------- reroute

/// `AllocationCommands.fromXContent` and each command's parser, with OpenSearch's errors.
pub fn parse_reroute_body(body: &[u8]) -> ApiResult<(Vec<RerouteCommand>, Option<bool>)> {
    let Value::Object(map) = object_body(body)? else {
        return Ok((Vec::new(), None));
    };
    let mut commands = Vec::new();
    let mut dry_run = None;
    for (key, value) in &map {
        match key.as_str() {
            "commands" => {
                let Value::Array(items) = value else {
                    return Err(ApiError::parse_exception(
                        "commands should follow with an array element",
                    ));
                };
                for item in items {
                    commands.push(parse_command(item)?);
                }
            }
            "dry_run" => {
                dry_run =
                    Some(bool_field(value).ok_or_else(|| field_error("cluster_reroute", key))?)
            }
            other => return Err(unknown_field("cluster_reroute", other)),
        }
    }
    Ok((commands, dry_run))
}

fn parse_command(item: &Value) -> ApiResult<RerouteCommand> {
    let malformed = |got: &str| {
        ApiError::parse_exception(format!(
            "allocation command is malformed, got [{got}] instead"
        ))
    };
    let Value::Object(map) = item else {
        return Err(malformed("VALUE"));
    };
    let mut entries = map.iter();
    let (Some((name, fields)), None) = (entries.next(), entries.next()) else {
        return Err(malformed(if map.is_empty() {
            "END_OBJECT"
        } else {
            "FIELD_NAME"
        }));
    };
    let Value::Object(fields) = fields else {
        return Err(ApiError::parse_exception(format!(
            "[{name}] command does not support complex json tokens [START_ARRAY]"
        )));
    };
    match name.as_str() {
        "move" | "cancel" => parse_move_or_cancel(name, fields),
        "allocate_replica" | "allocate_empty_primary" | "allocate_stale_primary" => {
            parse_allocate(name, fields)
        }
        other => Err(ApiError::new(
            400,
            "named_object_not_found_exception",
            format!("unable to parse AllocationCommand with name [{other}]: parser not found"),
        )),
    }
}

/// `MoveAllocationCommand.fromXContent` / `CancelAllocationCommand.fromXContent`.
fn parse_move_or_cancel(name: &str, fields: &Map<String, Value>) -> ApiResult<RerouteCommand> {
    let (mut index, mut shard, mut from, mut to, mut node) = (None, None, None, None, None);
    let mut allow_primary = false;
    for (key, value) in fields {
        let bad = || ApiError::parse_exception(format!("[{name}] failed to parse field [{key}]"));
        if value.is_object() || value.is_array() {
            return Err(ApiError::parse_exception(format!(
                "[{name}] command does not support complex json tokens [START_OBJECT]"
            )));
        }
        match (name, key.as_str()) {
            (_, "index") => index = Some(string_field(value).ok_or_else(bad)?),
            (_, "shard") => shard = Some(int_field(value).ok_or_else(bad)?),
            ("move", "from_node" | "fromNode") => from = Some(string_field(value).ok_or_else(bad)?),
            ("move", "to_node" | "toNode") => to = Some(string_field(value).ok_or_else(bad)?),
            ("cancel", "node") => node = Some(string_field(value).ok_or_else(bad)?),
            ("cancel", "allow_primary" | "allowPrimary") => {
                allow_primary = bool_field(value).ok_or_else(bad)?
            }
            _ => {
                return Err(ApiError::parse_exception(format!(
                    "[{name}] command does not support field [{key}]"
                )))
            }
        }
    }
    let missing = |what: &str| {
        ApiError::parse_exception(format!("[{name}] command missing the {what} parameter"))
    };
    let index = index.ok_or_else(|| missing("index"))?;
    let shard = shard
        .and_then(|s| u32::try_from(s).ok())
        .ok_or_else(|| missing("shard"))?;
    Ok(if name == "move" {
        RerouteCommand::Move {
            index,
            shard,
            from_node: from.ok_or_else(|| missing("from_node"))?,
            to_node: to.ok_or_else(|| missing("to_node"))?,
        }
    } else {
        RerouteCommand::Cancel {
            index,
            shard,
            node: node.ok_or_else(|| missing("node"))?,
            allow_primary,
        }
    })
}

/// The `allocate_*` commands' `ObjectParser` and `Builder.validate()`.
fn parse_allocate(name: &str, fields: &Map<String, Value>) -> ApiResult<RerouteCommand> {
    let (mut index, mut shard, mut node) = (None, None, None);
    let mut accept_data_loss = false;
    for (key, value) in fields {
        let bad = || field_error(name, key);
        match key.as_str() {
            "index" => index = Some(string_field(value).ok_or_else(bad)?),
            "shard" => shard = Some(int_field(value).ok_or_else(bad)?),
            "node" => node = Some(string_field(value).ok_or_else(bad)?),
            "accept_data_loss" if name != "allocate_replica" => {
                accept_data_loss = bool_field(value).ok_or_else(bad)?
            }
            other => return Err(unknown_field(name, other)),
        }
    }
    let index = index.ok_or_else(|| ApiError::bad_request("Argument [index] must be defined"))?;
    let shard = shard.and_then(|s| u32::try_from(s).ok()).ok_or_else(|| {
        ApiError::bad_request("Argument [shard] must be defined and non-negative")
    })?;
    let node = node.ok_or_else(|| ApiError::bad_request("Argument [node] must be defined"))?;
    Ok(match name {
        "allocate_replica" => RerouteCommand::AllocateReplica { index, shard, node },
        "allocate_empty_primary" => RerouteCommand::AllocateEmptyPrimary {
            index,
            shard,
            node,
            accept_data_loss,
        },
        _ => RerouteCommand::AllocateStalePrimary {
            index,
            shard,
            node,
            accept_data_loss,
        },
    })
}

/// `POST /_cluster/reroute`: `{"acknowledged": true, "state": {...}}` plus `explanations`
/// with `explain=true`. `dry_run` (parameter, or the body's, which wins) computes the state
/// without publishing it.
pub async fn reroute(node: Arc<Node>, params: Params, body: Bytes) -> RestResult {
    let explain = params.bool_or("explain", false)?;
    let retry_failed = params.bool_or("retry_failed", false)?;
    let (commands, body_dry_run) = parse_reroute_body(&body)?;
    let dry_run = match body_dry_run {
        Some(dry_run) => dry_run,
        None => params.bool_or("dry_run", false)?,
    };
    let metric = params
        .get("metric")
        .unwrap_or(REROUTE_DEFAULT_METRICS)
        .to_string();
    let out = blocking(move || {
        let outcome = node
            .admin
            .reroute(commands, retry_failed, dry_run, explain)?;
        let request = shoal_node::admin::StateRequest {
            metrics: &metric,
            index: None,
            resolve: shoal_node::ResolveOptions::admin(),
            flat_settings: false,
        };
        let state = node.admin.cluster_state_json(&outcome.state, &request)?;
        let mut body = json!({"acknowledged": true, "state": state});
        if explain {
            body["explanations"] = json!(outcome.explanations);
        }
        Ok(body)
    })
    .await?;
    ok(out, &params)
}

// ----------------------------------------------------------------- voting config exclusions

/// OpenSearch answers both voting exclusion APIs with an empty body.
fn empty_ok() -> Response {
    let mut response = Response::new(axum::body::Body::empty());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=UTF-8"),
    );
    response
}

/// `POST /_cluster/voting_config_exclusions?node_ids=..|node_names=..` (and the deprecated
/// `/{node_name}` form, a node description that must match cluster-manager-eligible nodes).
pub async fn add_exclusions(
    node: Arc<Node>,
    description: Option<String>,
    params: Params,
) -> RestResult {
    let mut node_ids = split_list(params.get("node_ids"));
    let node_names = split_list(params.get("node_names"));
    let timeout = timeout_param(&params, "timeout", DEFAULT_TIMEOUT)?;
    blocking(move || {
        if let Some(description) = description {
            if !node_ids.is_empty() || !node_names.is_empty() {
                return Err(ApiError::bad_request("Please set node identifiers correctly. One and only one of [node_name], [node_names] and [node_ids] has to be set"));
            }
            node_ids = described_eligible_nodes(&node, &description)?;
        }
        node.admin.add_voting_exclusions(&node_ids, &node_names, timeout)
    })
    .await?;
    Ok(empty_ok())
}

fn described_eligible_nodes(node: &Node, description: &str) -> ApiResult<Vec<String>> {
    let state = node.admin.view();
    let selectors = split_list(Some(description));
    let ids: Vec<String> = state
        .resolve_node_selectors(&node.core().node_id, &selectors)
        .into_iter()
        .filter(|id| {
            state
                .node(id)
                .is_some_and(|n| n.is_cluster_manager_eligible())
        })
        .collect();
    if ids.is_empty() {
        return Err(ApiError::bad_request(format!(
            "add voting config exclusions request for [{}] matched no cluster-manager-eligible nodes",
            selectors.join(", ")
        )));
    }
    Ok(ids)
}

/// `DELETE /_cluster/voting_config_exclusions[?wait_for_removal=false]`.
pub async fn clear_exclusions(node: Arc<Node>, params: Params) -> RestResult {
    let wait_for_removal = params.bool_or("wait_for_removal", true)?;
    let timeout = timeout_param(&params, "timeout", DEFAULT_TIMEOUT)?;
    let exclusions = node.admin.voting_exclusions();
    if wait_for_removal && !exclusions.is_empty() {
        // Awaited without a thread: the excluded nodes may take the whole timeout to leave.
        let gone = || node.admin.excluded_nodes_gone(&exclusions);
        if !crate::state_wait::until_true(&node, timeout, gone).await {
            return Err(shoal_node::admin::AdminService::removal_timed_out(&exclusions).into());
        }
    }
    blocking(move || node.admin.clear_voting_exclusions()).await?;
    Ok(empty_ok())
}

// -------------------------------------------------------------------------------- _nodes

/// Splits `/_nodes/{x}` into node selectors and metrics like `RestNodesInfoAction`: a path
/// part made only of metric names is metrics (`/_nodes/os`), anything else names nodes.
fn nodes_and_metrics(
    node_part: Option<String>,
    metric_part: Option<String>,
) -> ApiResult<(Vec<String>, Vec<String>)> {
    let all = || vec!["_all".to_string()];
    let (nodes, metrics) = match (node_part, metric_part) {
        (Some(part), None) => {
            let tokens = split_list(Some(&part));
            if !tokens.is_empty()
                && tokens
                    .iter()
                    .all(|t| NODE_INFO_METRICS.contains(&t.as_str()))
            {
                (all(), tokens)
            } else {
                (tokens, all())
            }
        }
        (nodes, metrics) => (
            nodes.map(|n| split_list(Some(&n))).unwrap_or_else(all),
            metrics.map(|m| split_list(Some(&m))).unwrap_or_else(all),
        ),
    };
    let unknown: Vec<&str> = metrics
        .iter()
        .map(String::as_str)
        .filter(|m| *m != "_all" && !NODE_INFO_METRICS.contains(m))
        .collect();
    if !unknown.is_empty() {
        return Err(ApiError::bad_request(format!(
            "request [/_nodes/{}/{}] contains unrecognized metric{}: [{}]",
            nodes.join(","),
            metrics.join(","),
            if unknown.len() > 1 { "s" } else { "" },
            unknown.join(", ")
        )));
    }
    Ok((nodes, metrics))
}

/// The attributes OpenSearch shows for a node: its `node.attr.*` settings plus the one every
/// 2.x node carries.
pub fn display_attributes(node: &shoal_state::DiscoveryNode) -> Map<String, Value> {
    let mut out: Map<String, Value> = node
        .attributes
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    out.entry("shard_indexing_pressure_enabled")
        .or_insert(json!("true"));
    out
}

/// A node's name and addresses in `_nodes` answers, from the cluster state.
pub(crate) fn insert_node_addresses(
    out: &mut Map<String, Value>,
    node: &shoal_state::DiscoveryNode,
) {
    out.insert("name".into(), json!(node.name));
    out.insert("transport_address".into(), json!(node.transport_address));
    out.insert("host".into(), json!(node.host));
    out.insert("ip".into(), json!(node.ip));
}

/// A node's roles (sorted) and attributes in `_nodes` answers, from the cluster state.
pub(crate) fn insert_node_roles(out: &mut Map<String, Value>, node: &shoal_state::DiscoveryNode) {
    let mut roles: Vec<&str> = node.roles.iter().map(|r| r.as_str()).collect();
    roles.sort_unstable();
    out.insert("roles".into(), json!(roles));
    out.insert("attributes".into(), Value::Object(display_attributes(node)));
}

fn node_info_json(
    discovery: &shoal_state::DiscoveryNode,
    sections: &Value,
    metrics: &[String],
    flat_settings: bool,
) -> Value {
    let want = |m: &str| metrics.iter().any(|x| x == "_all" || x == m);
    let mut out = Map::new();
    insert_node_addresses(&mut out, discovery);
    out.insert("version".into(), json!(discovery.version));
    out.insert("build_type".into(), json!("tar"));
    out.insert("build_hash".into(), json!(env!("CARGO_PKG_VERSION")));
    if want("indices") {
        if let Some(buffer) = sections.get("total_indexing_buffer") {
            out.insert("total_indexing_buffer".into(), buffer.clone());
        }
    }
    insert_node_roles(&mut out, discovery);
    for key in [
        "settings",
        "os",
        "process",
        "transport",
        "http",
        "thread_pool",
        "plugins",
        "modules",
    ] {
        let metric = if key == "modules" { "plugins" } else { key };
        let Some(value) = sections.get(key).filter(|_| want(metric)) else {
            continue;
        };
        let value = match (key, value) {
            ("settings", Value::Object(flat)) if !flat_settings => {
                let flat: FlatSettings = flat.clone().into_iter().collect();
                nest_settings(&flat)
            }
            _ => value.clone(),
        };
        out.insert(key.into(), value);
    }
    Value::Object(out)
}

/// `GET /_nodes[/{node_id}][/{metric}]`: the nodes the selectors name, each with what the
/// cluster state knows (name, addresses, roles, attributes) and the sections it reports.
pub async fn nodes_info(
    node: Arc<Node>,
    node_part: Option<String>,
    metric_part: Option<String>,
    params: Params,
) -> RestResult {
    let (selectors, metrics) = nodes_and_metrics(node_part, metric_part)?;
    let timeout = timeout_param(&params, "timeout", DEFAULT_TIMEOUT)?;
    let flat_settings = params.flag("flat_settings");
    let body = blocking(move || {
        let state = node.admin.view();
        let ids = state.resolve_node_selectors(&node.core().node_id, &selectors);
        let mut nodes = Map::new();
        let mut failures = Vec::new();
        for (id, answer) in node.admin.nodes_info(&ids, timeout) {
            let discovery = state
                .node(&id)
                .cloned()
                .unwrap_or_else(|| node.admin.local_node());
            match answer {
                Ok(sections) => {
                    let info = node_info_json(&discovery, &sections, &metrics, flat_settings);
                    nodes.insert(id, info);
                }
                Err(e) => failures.push(failed_node(&id, &e)),
            }
        }
        let cluster_name = &node.core().config.cluster_name;
        Ok(nodes_response(cluster_name, ids.len(), nodes, failures))
    })
    .await?;
    ok(body, &params)
}

/// A node that did not answer a `_nodes` request (`_nodes.failures`).
pub(crate) fn failed_node(id: &str, error: &ApiError) -> Value {
    json!({"type": "failed_node_exception", "reason": format!("Failed node [{id}]"),
        "node_id": id, "caused_by": error.to_cause_json()})
}

/// The answer of a `_nodes` request to `asked` nodes: the `_nodes` header, then each node.
pub(crate) fn nodes_response(
    cluster_name: &str,
    asked: usize,
    nodes: Map<String, Value>,
    failures: Vec<Value>,
) -> Value {
    let mut header = json!({"total": asked, "successful": nodes.len(), "failed": failures.len()});
    if !failures.is_empty() {
        header["failures"] = json!(failures);
    }
    json!({"_nodes": header, "cluster_name": cluster_name, "nodes": nodes})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reroute_bodies_parse_like_opensearch() {
        let body = br#"{"commands": [{"move": {"index": "i", "shard": 0, "from_node": "a", "to_node": "b"}},
            {"cancel": {"index": "i", "shard": "1", "node": "a"}},
            {"allocate_empty_primary": {"index": "i", "shard": 2, "node": "a", "accept_data_loss": true}}],
            "dry_run": true}"#;
        let (commands, dry_run) = parse_reroute_body(body).unwrap();
        assert_eq!(dry_run, Some(true));
        assert_eq!(commands.len(), 3);
        assert!(matches!(
            &commands[1],
            RerouteCommand::Cancel {
                shard: 1,
                allow_primary: false,
                ..
            }
        ));
        assert!(matches!(
            &commands[2],
            RerouteCommand::AllocateEmptyPrimary {
                accept_data_loss: true,
                ..
            }
        ));
        let err = |b: &[u8]| parse_reroute_body(b).unwrap_err();
        assert_eq!(
            err(br#"{"commands": [{"move": {"index": "i", "shard": 0}}]}"#).reason,
            "[move] command missing the from_node parameter"
        );
        assert_eq!(
            err(br#"{"commands": [{"nope": {}}]}"#).error_type,
            "named_object_not_found_exception"
        );
        assert_eq!(
            err(br#"{"commands": [{"allocate_replica": {"index": "i", "shard": 0}}]}"#).reason,
            "Argument [node] must be defined"
        );
        assert_eq!(
            err(br#"{"commands": [{"allocate_replica": {"index": "i", "shard": 0, "node": "n", "x": 1}}]}"#)
                .reason,
            "[allocate_replica] unknown field [x]"
        );
        assert_eq!(
            err(br#"{"commands": {}}"#).reason,
            "commands should follow with an array element"
        );
        assert!(parse_reroute_body(b"").unwrap().0.is_empty());
    }

    #[test]
    fn explain_bodies_parse() {
        let r = parse_explain_body(
            br#"{"index": "i", "shard": 0, "primary": false, "current_node": "n"}"#,
        )
        .unwrap();
        assert_eq!(r.shard, Some(0));
        assert_eq!(r.primary, Some(false));
        assert_eq!(parse_explain_body(b"").unwrap(), ExplainRequest::default());
        let e = parse_explain_body(br#"{"foo": 1}"#).unwrap_err();
        assert_eq!(e.reason, "[cluster/allocation/explain] unknown field [foo]");
        let e = parse_explain_body(br#"{"shard": "x"}"#).unwrap_err();
        assert_eq!(e.error_type, "x_content_parse_exception");
    }

    #[test]
    fn node_paths_split_into_nodes_and_metrics() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            nodes_and_metrics(Some("os,process".into()), None).unwrap(),
            (s(&["_all"]), s(&["os", "process"]))
        );
        assert_eq!(
            nodes_and_metrics(Some("data:true".into()), None).unwrap(),
            (s(&["data:true"]), s(&["_all"]))
        );
        assert_eq!(
            nodes_and_metrics(Some("_local".into()), Some("http".into())).unwrap(),
            (s(&["_local"]), s(&["http"]))
        );
        let e = nodes_and_metrics(Some("_local".into()), Some("nope".into())).unwrap_err();
        assert_eq!(
            e.reason,
            "request [/_nodes/_local/nope] contains unrecognized metric: [nope]"
        );
    }
}
