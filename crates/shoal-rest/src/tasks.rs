//! The task API: `GET /_tasks`, `GET /_tasks/{task_id}`, `POST /_tasks[/{task_id}]/_cancel`
//! and `GET /_cat/tasks`. Every REST request is a task while it runs ([`track`] registers it
//! under OpenSearch's action name); a listing asks every selected node for its running tasks.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{json, Map, Value};
use shoal_node::tasks::{StoredTask, TaskFilter, TaskInfo, TaskLookup};
use shoal_node::{ApiError, ApiResult, Node};

use crate::cat::{col, Cell, Column, Table};
use crate::cluster_admin::{
    failed_node, insert_node_addresses, insert_node_roles, timeout_param, DEFAULT_TIMEOUT,
};
use crate::request::Params;
use crate::response::{ok, RestResult};
use crate::router::blocking;

/// The task a request runs as, for the handlers that name it as a parent.
#[derive(Clone)]
pub struct CurrentTask(pub String);

/// The task API's routes (the tracking layer is in `router.rs`, around every route).
pub fn routes() -> axum::Router<Arc<Node>> {
    use axum::extract::{Path, Query};
    use axum::routing::{get as get_route, post};
    use axum::{Extension, Router};
    type S = Arc<Node>;
    type Q = Query<std::collections::HashMap<String, String>>;
    Router::new()
        .route(
            "/_tasks",
            get_route(
                |State(n): State<S>, Extension(t): Extension<CurrentTask>, Query(q): Q| {
                    list(n, t, Params(q))
                },
            ),
        )
        .route(
            "/_tasks/_cancel",
            post(|State(n): State<S>, Query(q): Q| cancel(n, None, Params(q))),
        )
        .route(
            "/_tasks/{task_id}",
            get_route(|State(n): State<S>, Path(id): Path<String>, Query(q): Q| {
                get(n, id, Params(q))
            }),
        )
        .route(
            "/_tasks/{task_id}/_cancel",
            post(|State(n): State<S>, Path(id): Path<String>, Query(q): Q| {
                cancel(n, Some(id), Params(q))
            }),
        )
        .route(
            "/_cat/tasks",
            get_route(
                |State(n): State<S>, Extension(t): Extension<CurrentTask>, Query(q): Q| {
                    cat(n, t, Params(q))
                },
            ),
        )
}

/// Registers each request as a task for as long as it runs.
pub(crate) async fn track(State(node): State<Arc<Node>>, mut req: Request, next: Next) -> Response {
    let path = crate::server::decoded_path(req.uri().path());
    let action = action_for(req.method(), &path);
    let description = format!("{} {}", req.method(), req.uri());
    let headers: BTreeMap<String, String> = req
        .headers()
        .get("x-opaque-id")
        .and_then(|v| v.to_str().ok())
        .map(|v| BTreeMap::from([("X-Opaque-Id".to_string(), v.to_string())]))
        .unwrap_or_default();
    let task = node
        .core()
        .tasks
        .register(action, description, None, headers);
    req.extensions_mut().insert(CurrentTask(task.task_id()));
    let response = next.run(req).await;
    drop(task);
    response
}

/// OpenSearch's action name for a REST request (what `_tasks?actions=` matches).
pub fn action_for(method: &Method, path: &str) -> &'static str {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let has = |name: &str| segments.contains(&name);
    let read = method == Method::GET || method == Method::HEAD;
    let named = [
        ("_msearch", "indices:data/read/msearch"),
        ("_search", "indices:data/read/search"),
        ("_count", "indices:data/read/search"),
        ("_bulk", "indices:data/write/bulk"),
        ("_mget", "indices:data/read/mget"),
        ("_update_by_query", "indices:data/write/update/byquery"),
        ("_delete_by_query", "indices:data/write/delete/byquery"),
        ("_reindex", "indices:data/write/reindex"),
        ("_update", "indices:data/write/update"),
        ("_refresh", "indices:admin/refresh"),
        ("_flush", "indices:admin/flush"),
        ("_forcemerge", "indices:admin/forcemerge"),
        ("_segments", "indices:monitor/segments"),
        ("_recovery", "indices:monitor/recovery"),
        ("_stats", "indices:monitor/stats"),
        ("_tasks", "cluster:monitor/tasks/lists"),
        ("_restore", "cluster:admin/snapshot/restore"),
    ];
    if let Some((_, action)) = named.iter().find(|(name, _)| has(name)) {
        return action;
    }
    match segments.as_slice() {
        [] => "cluster:monitor/main",
        ["_cat", ..] => "cluster:monitor/cat",
        ["_cluster", "health", ..] => "cluster:monitor/health",
        ["_cluster", "state", ..] => "cluster:monitor/state",
        ["_cluster", "stats", ..] => "cluster:monitor/stats",
        ["_cluster", "settings"] if read => "cluster:monitor/settings",
        ["_cluster", ..] => "cluster:admin/settings/update",
        ["_nodes", .., "stats"] | ["_nodes", "stats", ..] => "cluster:monitor/nodes/stats",
        ["_nodes", ..] => "cluster:monitor/nodes/info",
        ["_snapshot", _, _, ..] if method == Method::DELETE => "cluster:admin/snapshot/delete",
        ["_snapshot", _, _, ..] if !read => "cluster:admin/snapshot/create",
        ["_snapshot", ..] if read => "cluster:admin/snapshot/get",
        ["_snapshot", ..] => "cluster:admin/repository/put",
        ["_remotestore", ..] => "cluster:admin/remotestore/restore",
        [_, "_doc" | "_create", ..] if method == Method::DELETE => "indices:data/write/delete",
        [_, "_doc" | "_source", ..] if read => "indices:data/read/get",
        [_, "_doc" | "_create", ..] => "indices:data/write/index",
        [_, "_mapping" | "_mappings", ..] if read => "indices:admin/mappings/get",
        [_, "_mapping" | "_mappings", ..] => "indices:admin/mapping/put",
        [_, "_settings", ..] if read => "indices:monitor/settings/get",
        [_, "_settings", ..] => "indices:admin/settings/update",
        [_] if method == Method::PUT => "indices:admin/create",
        [_] if method == Method::DELETE => "indices:admin/delete",
        [_] => "indices:admin/get",
        _ => "cluster:monitor/rest",
    }
}

/// `GET /_tasks`.
pub async fn list(node: Arc<Node>, listing: CurrentTask, params: Params) -> RestResult {
    params.refuse_unknown(
        "/_tasks",
        &[
            "actions",
            "nodes",
            "parent_task_id",
            "detailed",
            "group_by",
            "timeout",
            "wait_for_completion",
        ],
    )?;
    if params.bool_or("wait_for_completion", false)? {
        return Err(ApiError::bad_request(
            "[wait_for_completion=true] is not supported for listing tasks: wait on one task \
             with GET /_tasks/{task_id}?wait_for_completion=true",
        )
        .into());
    }
    let detailed = params.bool_or("detailed", false)?;
    let group_by = params.get("group_by").unwrap_or("nodes").to_string();
    if !["nodes", "parents", "none"].contains(&group_by.as_str()) {
        return Err(ApiError::bad_request(format!(
            "unknown group_by [{group_by}]: use nodes, parents or none"
        ))
        .into());
    }
    let filter = filter(&params, &listing)?;
    let selectors = list_param(params.get("nodes"));
    let timeout = timeout_param(&params, "timeout", DEFAULT_TIMEOUT)?;
    let body = blocking(move || -> ApiResult<Value> {
        let state = node.admin.view();
        let ids = state.resolve_node_selectors(&node.core().node_id, &selectors);
        let mut by_node = Vec::new();
        let mut failures = Vec::new();
        for (id, answer) in node.tasks.list(&ids, &filter, timeout) {
            match answer {
                Ok(tasks) => by_node.push((id, tasks)),
                Err(e) => failures.push(failed_node(&id, &e)),
            }
        }
        let mut body = match group_by.as_str() {
            "nodes" => json!({"nodes": grouped_by_node(&state, by_node, detailed)}),
            "parents" => json!({"tasks": grouped_by_parent(by_node, detailed)}),
            _ => json!({"tasks": by_node.iter().flat_map(|(_, t)| t).map(|t| task_json(t, detailed)).collect::<Vec<_>>()}),
        };
        if !failures.is_empty() {
            body["node_failures"] = json!(failures);
        }
        Ok(body)
    })
    .await?;
    ok(body, &params)
}

/// Runs `work` after the request answered, as a task of its own named `action` (`_tasks`
/// shows it while it runs, `GET /_tasks/{id}` its outcome after); returns the task's id.
pub(crate) fn run_as_task(
    node: &Arc<Node>,
    action: &'static str,
    description: String,
    work: impl FnOnce(&Node) -> ApiResult<Value> + Send + 'static,
) -> String {
    let task = (node.core().tasks).register(action, description.clone(), None, Default::default());
    let task_id = task.task_id();
    let worker = node.clone();
    node.core()
        .pressure
        .spawn_forced(shoal_node::pressure::settings::GENERIC, move || {
            let outcome = work(&worker);
            match &outcome {
                Ok(_) => tracing::info!(action, %description, "background task done"),
                Err(e) => {
                    tracing::warn!(action, %description, error = %e, "background task failed")
                }
            }
            task.finish(outcome);
        });
    task_id
}

/// `GET /_tasks/{task_id}`: a running task, or once it ended with `wait_for_completion`.
pub async fn get(node: Arc<Node>, task_id: String, params: Params) -> RestResult {
    params.refuse_unknown(
        &format!("/_tasks/{task_id}"),
        &["timeout", "wait_for_completion"],
    )?;
    let wait = params.bool_or("wait_for_completion", false)?;
    let timeout = timeout_param(&params, "timeout", DEFAULT_TIMEOUT)?;
    let (node_id, id) = parse_task_id(&task_id)?;
    let body = blocking(move || -> ApiResult<Value> {
        if node.admin.view().node(&node_id).is_none() {
            return Err(ApiError::new(404, "resource_not_found_exception", format!(
                "task [{task_id}] belongs to the node [{node_id}] which isn't part of the cluster and there is no record of the task")));
        }
        let deadline = Instant::now() + timeout;
        let mut seen = None;
        loop {
            match node.tasks.lookup(&node_id, id, timeout)? {
                Some(TaskLookup::Running(task)) if wait && Instant::now() < deadline => seen = Some(task),
                Some(TaskLookup::Running(task)) if wait => {
                    return Err(ApiError::new(408, "timeout_exception", format!(
                        "Timed out waiting for completion of task [{}]", task.task_id())));
                }
                Some(TaskLookup::Running(task)) => return Ok(json!({"completed": false, "task": task_json(&task, true)})),
                Some(TaskLookup::Ended(stored)) => return Ok(ended_task(stored)),
                // Ended while waited for, without a kept outcome (a REST request's task).
                None => match seen {
                    Some(task) => return Ok(json!({"completed": true, "task": task_json(&task, true)})),
                    None => return Err(ApiError::new(404, "resource_not_found_exception", format!(
                        "task [{task_id}] isn't running and hasn't stored its results"))),
                },
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await?;
    ok(body, &params)
}

/// An ended background task as `GET /_tasks/{id}` shows it, with its answer or error.
fn ended_task(stored: StoredTask) -> Value {
    let mut body = json!({"completed": true, "task": task_json(&stored.task, true)});
    if let Some(response) = stored.response {
        body["response"] = response;
    }
    if let Some(error) = stored.error {
        body["error"] = error;
    }
    body
}

/// `POST /_tasks[/{task_id}]/_cancel`: no Shoal task can be cancelled yet; a running task
/// named is refused as such, and a selection answers what it cancelled (nothing).
pub async fn cancel(node: Arc<Node>, task_id: Option<String>, params: Params) -> RestResult {
    params.refuse_unknown(
        "/_tasks/_cancel",
        &["actions", "nodes", "parent_task_id", "wait_for_completion"],
    )?;
    let Some(task_id) = task_id else {
        return ok(json!({"nodes": {}}), &params);
    };
    let (node_id, id) = parse_task_id(&task_id)?;
    let running = blocking(move || -> ApiResult<bool> {
        if node.admin.view().node(&node_id).is_none() {
            return Ok(false);
        }
        let task = node.tasks.lookup(&node_id, id, DEFAULT_TIMEOUT)?;
        Ok(matches!(task, Some(TaskLookup::Running(_))))
    })
    .await?;
    Err(match running {
        true => ApiError::bad_request(format!("task [{task_id}] doesn't support cancellation")),
        false => ApiError::new(
            404,
            "resource_not_found_exception",
            format!("task [{task_id}] is not found"),
        ),
    }
    .into())
}

/// `GET /_cat/tasks`.
pub async fn cat(node: Arc<Node>, listing: CurrentTask, params: Params) -> RestResult {
    let detailed = params.bool_or("detailed", false)?;
    let filter = filter(&params, &listing)?;
    let selectors = list_param(params.get("nodes"));
    let table = blocking(move || -> ApiResult<Table> {
        let state = node.admin.view();
        let ids = state.resolve_node_selectors(&node.core().node_id, &selectors);
        let mut rows = Vec::new();
        for (id, answer) in node.tasks.list(&ids, &filter, DEFAULT_TIMEOUT) {
            let (Ok(tasks), Some(host)) = (answer, state.node(&id)) else {
                continue;
            };
            for task in tasks {
                rows.push(cat_row(&task, host, detailed));
            }
        }
        Ok(Table {
            columns: cat_columns(detailed),
            rows,
        })
    })
    .await?;
    table.render(&params)
}

fn cat_columns(detailed: bool) -> Vec<Column> {
    let mut columns = vec![
        col!("id", [], false, "id of the task with the node"),
        col!("action", ["ac"], true, "task action"),
        col!("task_id", ["ti"], true, "unique task id"),
        col!("parent_task_id", ["pti"], true, "parent task id"),
        col!("type", ["ty"], true, "task type"),
        col!("start_time", ["start"], true, "start time in ms"),
        col!(
            "timestamp",
            ["ts", "hms", "hhmmss"],
            true,
            "start time in HH:MM:SS"
        ),
        col!("running_time_ns", [], false, "running time ns"),
        col!("running_time", ["time"], true, "running time"),
        col!("node_id", ["ni"], false, "unique node id"),
        col!("ip", ["i"], true, "ip address"),
        col!("node", ["n"], true, "node name"),
        col!("x_opaque_id", ["x"], false, "X-Opaque-ID header"),
    ];
    if detailed {
        columns.push(col!("description", ["desc"], true, "task action"));
    }
    columns
}

fn cat_row(task: &TaskInfo, host: &shoal_state::DiscoveryNode, detailed: bool) -> Vec<Cell> {
    let text = |s: &str| Cell::Text(s.to_string());
    let seconds = task.start_time_in_millis / 1000;
    let mut row = vec![
        text(&task.id.to_string()),
        text(&task.action),
        text(&task.task_id()),
        text(task.parent_task_id.as_deref().unwrap_or("-")),
        text(&task.kind),
        Cell::Number(task.start_time_in_millis),
        text(&format!(
            "{:02}:{:02}:{:02}",
            (seconds / 3600) % 24,
            (seconds / 60) % 60,
            seconds % 60
        )),
        Cell::Number(task.running_time_in_nanos as i64),
        text(&shoal_node::settings::format_time(Duration::from_nanos(
            task.running_time_in_nanos,
        ))),
        text(&host.id),
        text(&host.ip),
        text(&host.name),
        text(task.headers.get("X-Opaque-Id").map_or("-", String::as_str)),
    ];
    if detailed {
        row.push(text(&task.description));
    }
    row
}

fn list_param(value: Option<&str>) -> Vec<String> {
    match value {
        Some(text) if !text.is_empty() => text.split(',').map(|s| s.trim().to_string()).collect(),
        _ => vec!["_all".to_string()],
    }
}

fn filter(params: &Params, listing: &CurrentTask) -> ApiResult<TaskFilter> {
    if let Some(parent) = params.get("parent_task_id") {
        parse_task_id(parent)?;
    }
    Ok(TaskFilter {
        actions: params
            .get("actions")
            .map_or_else(Vec::new, |a| list_param(Some(a))),
        parent_task_id: params.get("parent_task_id").map(str::to_string),
        id: None,
        listing_parent: Some(listing.0.clone()),
    })
}

/// `node:id`, refused otherwise as OpenSearch refuses a malformed task id.
fn parse_task_id(task_id: &str) -> ApiResult<(String, u64)> {
    let malformed = || ApiError::bad_request(format!("malformed task id {task_id}"));
    let (node, id) = task_id.split_once(':').ok_or_else(malformed)?;
    let id = id.parse().map_err(|_| malformed())?;
    Ok((node.to_string(), id))
}

fn task_json(task: &TaskInfo, detailed: bool) -> Value {
    let mut out = Map::new();
    out.insert("node".into(), json!(task.node));
    out.insert("id".into(), json!(task.id));
    out.insert("type".into(), json!(task.kind));
    out.insert("action".into(), json!(task.action));
    if detailed {
        out.insert("description".into(), json!(task.description));
    }
    out.insert(
        "start_time_in_millis".into(),
        json!(task.start_time_in_millis),
    );
    out.insert(
        "running_time_in_nanos".into(),
        json!(task.running_time_in_nanos),
    );
    out.insert("cancellable".into(), json!(task.cancellable));
    out.insert("cancelled".into(), json!(task.cancelled));
    if let Some(parent) = &task.parent_task_id {
        out.insert("parent_task_id".into(), json!(parent));
    }
    out.insert("headers".into(), json!(task.headers));
    Value::Object(out)
}

fn grouped_by_node(
    state: &shoal_node::admin::ClusterView,
    by_node: Vec<(String, Vec<TaskInfo>)>,
    detailed: bool,
) -> Map<String, Value> {
    let mut nodes = Map::new();
    for (id, tasks) in by_node {
        let Some(discovery) = state.node(&id) else {
            continue;
        };
        let mut entry = Map::new();
        insert_node_addresses(&mut entry, discovery);
        insert_node_roles(&mut entry, discovery);
        let tasks: Map<String, Value> = tasks
            .iter()
            .map(|t| (t.task_id(), task_json(t, detailed)))
            .collect();
        entry.insert("tasks".into(), Value::Object(tasks));
        nodes.insert(id, Value::Object(entry));
    }
    nodes
}

/// Tasks under their parents (`children`); a task whose parent is not listed is a root.
fn grouped_by_parent(by_node: Vec<(String, Vec<TaskInfo>)>, detailed: bool) -> Map<String, Value> {
    let tasks: Vec<TaskInfo> = by_node.into_iter().flat_map(|(_, t)| t).collect();
    let listed: std::collections::BTreeSet<String> = tasks.iter().map(TaskInfo::task_id).collect();
    let mut children: BTreeMap<String, Vec<&TaskInfo>> = BTreeMap::new();
    for task in &tasks {
        if let Some(parent) = task.parent_task_id.as_ref().filter(|p| listed.contains(*p)) {
            children.entry(parent.clone()).or_default().push(task);
        }
    }
    fn with_children(
        task: &TaskInfo,
        children: &BTreeMap<String, Vec<&TaskInfo>>,
        detailed: bool,
    ) -> Value {
        let mut out = task_json(task, detailed);
        if let Some(list) = children.get(&task.task_id()) {
            out["children"] = json!(list
                .iter()
                .map(|c| with_children(c, children, detailed))
                .collect::<Vec<_>>());
        }
        out
    }
    tasks
        .iter()
        .filter(|t| {
            t.parent_task_id
                .as_ref()
                .is_none_or(|p| !listed.contains(p))
        })
        .map(|t| (t.task_id(), with_children(t, &children, detailed)))
        .collect()
}
