//! Which thread pool a REST request runs on, and `GET /_cat/thread_pool`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::Value;
use shoal_node::pressure::settings::{GENERIC, GET, MANAGEMENT, SEARCH};
use shoal_node::pressure::ThreadPool;
use shoal_node::routing::wildcard_match;
use shoal_node::{ApiResult, Node};

use crate::cat::{col, n, t, Cell, Column, Table};
use crate::request::Params;
use crate::response::RestResult;
use crate::router::blocking;

/// The pool of the request being handled and how a rejection names it.
#[derive(Clone)]
pub(crate) struct Route {
    pub(crate) pool: ThreadPool,
    pub(crate) task: String,
    /// A write's work runs at the write priority (`shoal_node::pressure::priority`).
    pub(crate) write: bool,
}

tokio::task_local! {
    pub(crate) static ROUTE: Route;
}

/// Middleware: picks the request's pool; `router::blocking` runs the handler's work there.
pub(crate) async fn route_to_pool(
    State(node): State<Arc<Node>>,
    req: Request,
    next: Next,
) -> Response {
    let path = crate::server::decoded_path(req.uri().path());
    let route = Route {
        pool: node
            .core()
            .pressure
            .pool(pool_for(req.method(), &path))
            .clone(),
        task: format!("[{} {path}]", req.method()),
        write: is_write(req.method(), &path),
    };
    ROUTE.scope(route, next.run(req)).await
}

/// Whether a REST request writes documents (a `GET` or `HEAD` never does).
pub fn is_write(method: &Method, path: &str) -> bool {
    if matches!(*method, Method::GET | Method::HEAD) {
        return false;
    }
    const WRITES: [&str; 6] = [
        "_bulk",
        "_doc",
        "_create",
        "_update",
        "_delete_by_query",
        "_update_by_query",
    ];
    path.split('/').any(|segment| WRITES.contains(&segment))
}

/// OpenSearch's executor for a REST action. The coordinating half of a write runs on
/// `generic`: its shard-level half takes a `write` slot on the primary (a coordinator holding a
/// `write` thread while it waits for `write` work would deadlock a bounded pool).
/// Monitoring (`_cluster/health`, `_cat`, `_nodes`) and administration run on `management`,
/// which writes never use, so they answer under write overload.
pub fn pool_for(method: &Method, path: &str) -> &'static str {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let Some(first) = segments.first() else {
        return if method == Method::DELETE {
            MANAGEMENT
        } else {
            GENERIC
        };
    };
    if matches!(*first, "_cat" | "_cluster" | "_nodes") {
        return MANAGEMENT;
    }
    let has = |name: &str| segments.contains(&name);
    if has("_search") || has("_msearch") || has("_count") {
        return SEARCH;
    }
    let read = method == Method::GET || method == Method::HEAD;
    if has("_mget") || has("_source") || (read && segments.get(1) == Some(&"_doc")) {
        return GET;
    }
    if is_write(method, path) {
        return GENERIC;
    }
    let admin = [
        "_mapping",
        "_settings",
        "_alias",
        "_aliases",
        "_open",
        "_close",
        "_refresh",
        "_flush",
        "_forcemerge",
        "_stats",
        "_recovery",
    ];
    if admin.iter().any(|a| has(a)) || (segments.len() == 1 && !first.starts_with('_')) {
        return MANAGEMENT;
    }
    GENERIC
}

/// `GET /_cat/thread_pool[/{thread_pool_patterns}]`: every node's pools, sorted by name, from
/// each node's pool shapes and counters.
pub async fn cat(node: Arc<Node>, patterns: Option<String>, params: Params) -> RestResult {
    let patterns: Vec<String> = patterns
        .or_else(|| params.get("thread_pool_patterns").map(str::to_string))
        .unwrap_or_else(|| "*".to_string())
        .split(',')
        .map(|p| p.trim().to_string())
        .collect();
    let rows = blocking(move || -> ApiResult<Vec<Vec<Cell>>> {
        let state = node.admin.view();
        let ids: Vec<String> = state.node_ids();
        let mut rows = Vec::new();
        for (id, sections) in node.admin.nodes_info(&ids, Duration::from_secs(10)) {
            // A node that does not answer has no row, as in OpenSearch.
            let (Some(discovery), Ok(sections)) = (state.node(&id), sections) else {
                continue;
            };
            let port = discovery
                .transport_address
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse::<i64>().ok())
                .map_or(Cell::Null, n);
            let node_cells = vec![
                t(discovery.name.clone()),
                t(discovery.id.clone()),
                t(discovery.ephemeral_id.clone()),
                sections["process"]["id"].as_i64().map_or(Cell::Null, n),
                t(discovery.host.clone()),
                t(discovery.ip.clone()),
                port,
            ];
            let Some(stats) = sections["thread_pool_stats"].as_object() else {
                continue;
            };
            for (name, counters) in stats {
                if !patterns.iter().any(|p| wildcard_match(p, name)) {
                    continue;
                }
                let mut row = node_cells.clone();
                row.extend(pool_cells(name, &sections["thread_pool"][name], counters));
                rows.push(row);
            }
        }
        Ok(rows)
    })
    .await?;
    Table {
        columns: columns(),
        rows,
    }
    .render(&params)
}

/// One pool's cells: its shape (`_nodes` `thread_pool` info) and its counters (`_nodes/stats`).
fn pool_cells(name: &str, info: &Value, stats: &Value) -> Vec<Cell> {
    let count = |v: &Value| v.as_i64().map_or(Cell::Null, n);
    let text = |v: &Value| v.as_str().map_or(Cell::Null, |s| t(s.to_string()));
    vec![
        t(name.to_string()),
        text(&info["type"]),
        count(&stats["active"]),
        count(&stats["threads"]),
        count(&stats["queue"]),
        info["queue_size"].as_i64().map_or(n(-1), n),
        count(&stats["rejected"]),
        count(&stats["largest"]),
        count(&stats["completed"]),
        count(&info["core"]),
        count(&info["max"]),
        count(&info["size"]),
        text(&info["keep_alive"]),
    ]
}

fn columns() -> Vec<Column> {
    vec![
        col!("node_name", ["nn"], true, "node name"),
        col!("node_id", ["id"], false, "persistent node id"),
        col!("ephemeral_node_id", ["eid"], false, "ephemeral node id"),
        col!("pid", ["p"], false, "process id"),
        col!("host", ["h"], false, "host name"),
        col!("ip", ["i"], false, "ip address"),
        col!("port", ["po"], false, "bound transport port"),
        col!("name", ["n"], true, "thread pool name"),
        col!("type", ["t"], false, "thread pool type"),
        col!("active", ["a"], true, "number of active threads"),
        col!("pool_size", ["psz"], false, "number of threads"),
        col!("queue", ["q"], true, "number of tasks currently in queue"),
        col!(
            "queue_size",
            ["qs"],
            false,
            "maximum number of tasks permitted in queue"
        ),
        col!("rejected", ["r"], true, "number of rejected tasks"),
        col!(
            "largest",
            ["l"],
            false,
            "highest number of seen active threads"
        ),
        col!("completed", ["c"], false, "number of completed tasks"),
        col!(
            "core",
            ["cr"],
            false,
            "core number of threads in a scaling thread pool"
        ),
        col!(
            "max",
            ["mx"],
            false,
            "maximum number of threads in a scaling thread pool"
        ),
        col!(
            "size",
            ["sz"],
            false,
            "number of threads in a fixed thread pool"
        ),
        col!("keep_alive", ["ka"], false, "thread keep alive time"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_go_to_opensearch_pools() {
        let pool = |m: Method, p: &str| pool_for(&m, p);
        assert_eq!(pool(Method::POST, "/_bulk"), GENERIC);
        assert_eq!(pool(Method::PUT, "/logs/_doc/1"), GENERIC);
        assert_eq!(pool(Method::GET, "/logs/_doc/1"), GET);
        assert_eq!(pool(Method::HEAD, "/logs/_source/1"), GET);
        assert_eq!(pool(Method::POST, "/_mget"), GET);
        assert_eq!(pool(Method::POST, "/logs/_search"), SEARCH);
        assert_eq!(pool(Method::GET, "/_search/scroll/abc"), SEARCH);
        assert_eq!(pool(Method::GET, "/logs/_count"), SEARCH);
        assert_eq!(pool(Method::GET, "/_cluster/health"), MANAGEMENT);
        assert_eq!(pool(Method::GET, "/_cat/thread_pool"), MANAGEMENT);
        assert_eq!(pool(Method::GET, "/_nodes/stats"), MANAGEMENT);
        assert_eq!(pool(Method::PUT, "/logs"), MANAGEMENT);
        assert_eq!(pool(Method::PUT, "/logs/_mapping"), MANAGEMENT);
        assert_eq!(pool(Method::POST, "/logs/_refresh"), MANAGEMENT);
        assert_eq!(pool(Method::GET, "/"), GENERIC);
    }

    #[test]
    fn only_requests_that_write_documents_run_at_the_write_priority() {
        assert!(is_write(&Method::POST, "/_bulk"));
        assert!(is_write(&Method::PUT, "/logs/_doc/1"));
        assert!(is_write(&Method::POST, "/logs/_update_by_query"));
        assert!(!is_write(&Method::GET, "/logs/_doc/1"));
        assert!(!is_write(&Method::HEAD, "/logs/_doc/1"));
        assert!(!is_write(&Method::POST, "/logs/_search"));
        assert!(!is_write(&Method::POST, "/logs/_refresh"));
    }
}
