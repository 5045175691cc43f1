//! `GET /_cluster/health[/{index}]` and its waits: `wait_for_status`, `wait_for_nodes`,
//! `wait_for_active_shards`, `wait_for_no_relocating_shards`, `wait_for_no_initializing_shards`,
//! `wait_for_events`, with `timeout` (408 and `timed_out: true`) as OpenSearch's
//! `TransportClusterHealthAction`. The wait is on applied cluster states, not a poll.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use shoal_node::admin::ClusterView;
use shoal_node::replication::active_shards::ActiveShards;
use shoal_node::{ApiError, ApiResult, Node};
use shoal_state::HealthStatus;

use crate::cluster::health_body;
use crate::cluster_admin::{timeout_param, DEFAULT_TIMEOUT};
use crate::request::Params;
use crate::response::{json, ok, RestResult};
use crate::router::blocking;

/// `wait_for_nodes`: `N`, `>=N`, `ge(N)`, `<=N`, `le(N)`, `>N`, `gt(N)`, `<N`, `lt(N)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeCount {
    Eq(i32),
    Ge(i32),
    Le(i32),
    Gt(i32),
    Lt(i32),
}

impl NodeCount {
    /// Parsed in `TransportClusterHealthAction`'s order with Java's `Integer.parseInt` (whose
    /// failure OpenSearch answers as a 400 `number_format_exception`). The `xx(N)` forms drop
    /// the last character whatever it is, as OpenSearch does.
    pub fn parse(text: &str) -> ApiResult<NodeCount> {
        let int = |s: &str| -> ApiResult<i32> {
            s.parse().map_err(|_| {
                ApiError::new(
                    400,
                    "number_format_exception",
                    format!("For input string: \"{s}\""),
                )
            })
        };
        let inner = |s: &str| -> ApiResult<i32> {
            let mut chars = s.chars();
            chars.next_back();
            int(chars.as_str())
        };
        let forms: [(&str, fn(i32) -> NodeCount, bool); 8] = [
            (">=", NodeCount::Ge, false),
            ("ge(", NodeCount::Ge, true),
            ("<=", NodeCount::Le, false),
            ("le(", NodeCount::Le, true),
            (">", NodeCount::Gt, false),
            ("gt(", NodeCount::Gt, true),
            ("<", NodeCount::Lt, false),
            ("lt(", NodeCount::Lt, true),
        ];
        for (prefix, make, parenthesised) in forms {
            if let Some(rest) = text.strip_prefix(prefix) {
                return Ok(make(if parenthesised {
                    inner(rest)?
                } else {
                    int(rest)?
                }));
            }
        }
        Ok(NodeCount::Eq(int(text)?))
    }

    pub fn accepts(self, nodes: i64) -> bool {
        match self {
            NodeCount::Eq(n) => nodes == n as i64,
            NodeCount::Ge(n) => nodes >= n as i64,
            NodeCount::Le(n) => nodes <= n as i64,
            NodeCount::Gt(n) => nodes > n as i64,
            NodeCount::Lt(n) => nodes < n as i64,
        }
    }
}

/// What a health request waits for (`ClusterHealthRequest`).
#[derive(Debug, Clone, Default)]
struct HealthWaits {
    status: Option<HealthStatus>,
    nodes: Option<NodeCount>,
    active_shards: Option<ActiveShards>,
    no_relocating: bool,
    no_initializing: bool,
}

impl HealthWaits {
    fn parse(params: &Params) -> ApiResult<HealthWaits> {
        let status = match params.get("wait_for_status") {
            Some(s) => Some(HealthStatus::parse(s).ok_or_else(|| {
                ApiError::bad_request(format!("unknown cluster health status [{s}]"))
            })?),
            None => None,
        };
        let nodes = match params.get("wait_for_nodes").filter(|s| !s.is_empty()) {
            Some(text) => Some(NodeCount::parse(text)?),
            None => None,
        };
        let active_shards = match params.get("wait_for_active_shards") {
            Some(text) => {
                Some(ActiveShards::parse(text)?).filter(|a| *a != ActiveShards::AtLeast(0))
            }
            None => None,
        };
        if let Some(priority) = params.get("wait_for_events") {
            // Accepted: every cluster event is applied in Raft order before the state this
            // answer reads, so there is no queue of lower-priority events to wait behind.
            const PRIORITIES: [&str; 6] =
                ["IMMEDIATE", "URGENT", "HIGH", "NORMAL", "LOW", "LANGUID"];
            let upper = priority.to_ascii_uppercase();
            if !PRIORITIES.contains(&upper.as_str()) {
                return Err(ApiError::bad_request(format!(
                    "No enum constant org.opensearch.common.Priority.{upper}"
                )));
            }
        }
        let local = params.bool_or("local", false)?;
        // A node is weighed away or decommissioned only by weighted routing or a decommission,
        // which Shoal does not have yet: every node is weighed in, so the check holds.
        if params.bool_or("ensure_node_weighed_in", false)? && !local {
            return Err(ApiError::action_request_validation(&[
                "not a local request to ensure local node commissioned or weighed in".to_string(),
            ]));
        }
        Ok(HealthWaits {
            status,
            nodes,
            active_shards,
            no_relocating: params.bool_or("wait_for_no_relocating_shards", false)?,
            no_initializing: params.bool_or("wait_for_no_initializing_shards", false)?,
        })
    }

    /// `prepareResponse == waitCount`: every condition asked for holds (a missing index of
    /// the path never does).
    fn satisfied(&self, body: &Value, status: HealthStatus, missing_index: bool) -> bool {
        let count = |key: &str| body[key].as_i64().unwrap_or(0);
        !missing_index
            && self.status.is_none_or(|w| status <= w)
            && (!self.no_relocating || count("relocating_shards") == 0)
            && (!self.no_initializing || count("initializing_shards") == 0)
            && self.active_shards.is_none_or(|a| match a {
                ActiveShards::All => {
                    count("unassigned_shards") == 0 && count("initializing_shards") == 0
                }
                ActiveShards::AtLeast(n) => count("active_shards") >= n as i64,
            })
            && self
                .nodes
                .is_none_or(|n| n.accepts(count("number_of_nodes")))
    }
}

/// `GET /_cluster/health[/{index}]`: waits (on applied cluster states, no polling) until every
/// `wait_for_*` condition holds, or answers 408 with `timed_out: true` after `timeout`. The
/// wait holds no thread (`crate::state_wait`): a `management` thread evaluates each newly
/// applied state and is released in between.
pub async fn health(node: Arc<Node>, index: Option<String>, params: Params) -> RestResult {
    let level = crate::cluster::HealthLevel::parse(&params)?;
    let resolve = crate::indices::options(&params, shoal_node::ResolveOptions::admin())?;
    let waits = HealthWaits::parse(&params)?;
    let timeout = timeout_param(&params, "timeout", DEFAULT_TIMEOUT)?;
    let confirm = cluster_manager_confirmation(&params)?;
    // Confirmed first; each evaluation then reads a state at least as new. The timeout counts
    // from there, as OpenSearch's does from the cluster manager's operation.
    read_view(&node, confirm).await?;
    let request = Arc::new(HealthRequest {
        node: node.clone(),
        index,
        resolve,
        level,
        waits,
    });
    let (body, satisfied) = crate::state_wait::until(&node, timeout, || {
        let request = request.clone();
        blocking(move || request.evaluate())
    })
    .await?;
    if satisfied {
        return ok(body, &params);
    }
    let mut body = body;
    body["timed_out"] = json!(true);
    Ok(json(StatusCode::REQUEST_TIMEOUT, body, &params))
}

/// One evaluation of a health request against the node's applied state.
struct HealthRequest {
    node: Arc<Node>,
    index: Option<String>,
    resolve: shoal_node::ResolveOptions,
    level: crate::cluster::HealthLevel,
    waits: HealthWaits,
}

impl HealthRequest {
    /// The answer's body and whether every `wait_for_*` condition holds.
    fn evaluate(&self) -> ApiResult<(Value, bool)> {
        let view = self.node.admin.view();
        let (body, status, missing) = health_body(
            &self.node,
            &view,
            (self.index.as_deref(), self.resolve),
            &self.level,
        )?;
        let satisfied = self.waits.satisfied(&body, status, missing);
        Ok((body, satisfied))
    }
}

/// The view a read answers from: this node's applied state, first confirmed as at least the
/// cluster manager's unless `confirm` is `None` (`local=true`).
pub(crate) async fn read_view(node: &Node, confirm: Option<Duration>) -> ApiResult<ClusterView> {
    match confirm {
        Some(timeout) => node.admin.confirmed_view(timeout).await,
        None => Ok(node.admin.view()),
    }
}

/// Unless `local=true`, how long a read may wait for the cluster manager to confirm this
/// node's state (`cluster_manager_timeout`, or its old name `master_timeout`; 30s): OpenSearch
/// answers such reads on the cluster manager, never from a node's possibly stale copy.
pub(crate) fn cluster_manager_confirmation(params: &Params) -> ApiResult<Option<Duration>> {
    if params.bool_or("local", false)? {
        return Ok(None);
    }
    let key = match params.get("cluster_manager_timeout") {
        Some(_) => "cluster_manager_timeout",
        None => "master_timeout",
    };
    timeout_param(params, key, DEFAULT_TIMEOUT).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_for_nodes_expressions() {
        assert_eq!(NodeCount::parse("3").unwrap(), NodeCount::Eq(3));
        assert_eq!(NodeCount::parse(">=3").unwrap(), NodeCount::Ge(3));
        assert_eq!(NodeCount::parse("ge(3)").unwrap(), NodeCount::Ge(3));
        assert_eq!(NodeCount::parse("<=2").unwrap(), NodeCount::Le(2));
        assert_eq!(NodeCount::parse("le(2)").unwrap(), NodeCount::Le(2));
        assert_eq!(NodeCount::parse(">1").unwrap(), NodeCount::Gt(1));
        assert_eq!(NodeCount::parse("gt(1)").unwrap(), NodeCount::Gt(1));
        assert_eq!(NodeCount::parse("<4").unwrap(), NodeCount::Lt(4));
        assert_eq!(NodeCount::parse("lt(4)").unwrap(), NodeCount::Lt(4));
        assert!(NodeCount::Ge(3).accepts(3) && !NodeCount::Ge(3).accepts(2));
        assert!(NodeCount::Lt(4).accepts(3) && !NodeCount::Lt(4).accepts(4));
        assert!(NodeCount::Eq(1).accepts(1) && !NodeCount::Eq(1).accepts(2));
        assert!(NodeCount::Le(2).accepts(2) && NodeCount::Gt(1).accepts(2));
    }

    #[test]
    fn bad_wait_for_nodes_is_a_number_format_400() {
        for text in ["abc", ">=x", "ge(3", "", "3.5"] {
            let e = NodeCount::parse(text).unwrap_err();
            assert_eq!(
                (e.status, e.error_type.as_str()),
                (400, "number_format_exception")
            );
        }
        assert_eq!(
            NodeCount::parse("abc").unwrap_err().reason,
            "For input string: \"abc\""
        );
    }

    #[test]
    fn wait_for_active_shards_values() {
        assert_eq!(ActiveShards::parse("all").unwrap(), ActiveShards::All);
        assert_eq!(ActiveShards::parse("2").unwrap(), ActiveShards::AtLeast(2));
        assert_eq!(
            ActiveShards::parse("x").unwrap_err().reason,
            "cannot parse ActiveShardCount[x]"
        );
        assert!(ActiveShards::parse("-2").is_err());
    }
}
