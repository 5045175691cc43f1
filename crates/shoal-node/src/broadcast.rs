//! Broadcast shard operations (`_refresh`, `_flush`, `_forcemerge`): every node holding
//! copies of the target indices runs the operation on its copies, in parallel, and the
//! coordinator sums the shard counts the way OpenSearch reports `_shards`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::node::Node;

pub const ACTION_BROADCAST: &str = "indices:admin/broadcast[n]";

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub enum BroadcastOp {
    Refresh,
    Flush,
    ForceMerge {
        max_segments: Option<usize>,
        only_expunge_deletes: bool,
    },
}

#[derive(Serialize, Deserialize)]
struct NodeRequest {
    /// `(name, uuid)` of each target index.
    indices: Vec<(String, String)>,
    op: BroadcastOp,
}

#[derive(Serialize, Deserialize, Default)]
struct NodeReply {
    successful: usize,
    failures: Vec<Value>,
}

/// `_shards` of a broadcast response.
pub struct BroadcastSummary {
    pub total: usize,
    pub successful: usize,
    pub failures: Vec<Value>,
}

impl BroadcastSummary {
    pub fn to_json(&self) -> Value {
        let mut shards = json!({"total": self.total, "successful": self.successful, "failed": self.failures.len()});
        if !self.failures.is_empty() {
            shards["failures"] = json!(self.failures);
        }
        shards
    }
}

impl Node {
    /// Runs `op` on every copy of these indices, wherever it is.
    pub fn broadcast(
        &self,
        services: &[Arc<IndexService>],
        op: BroadcastOp,
    ) -> ApiResult<BroadcastSummary> {
        let state = self.cluster_state();
        let indices: Vec<(String, String)> =
            services.iter().map(|s| (s.name(), s.uuid())).collect();
        let total = services
            .iter()
            .map(|s| {
                s.with_meta(|m| {
                    m.settings().number_of_shards() * (1 + m.settings().number_of_replicas())
                })
            })
            .sum();
        let mut nodes: BTreeMap<String, String> = BTreeMap::new();
        for (name, _) in &indices {
            for copies in state
                .routing
                .get(name)
                .map(|t| t.shards.as_slice())
                .unwrap_or(&[])
            {
                for node in copies
                    .iter()
                    .filter(|c| c.is_active())
                    .filter_map(|c| c.node.as_ref())
                {
                    if let Some(n) = state.nodes.get(node) {
                        nodes.insert(node.clone(), n.transport_address.clone());
                    }
                }
            }
        }
        nodes.remove(&self.node_id);
        let request = NodeRequest { indices, op };
        let body = Bytes::from(serde_json::to_vec(&request).expect("json"));
        let pending: Vec<_> = nodes
            .into_values()
            .map(|address| {
                let (transport, body) = (self.transport.clone(), body.clone());
                self.runtime.spawn(async move {
                    transport
                        .call(&address, ACTION_BROADCAST, body, Duration::from_secs(600))
                        .await
                })
            })
            .collect();
        let mut summary = BroadcastSummary {
            total,
            successful: 0,
            failures: Vec::new(),
        };
        let local = self.broadcast_locally(&request);
        summary.successful += local.successful;
        summary.failures.extend(local.failures);
        for reply in pending {
            match self.runtime.block_on(reply) {
                Ok(Ok(bytes)) => {
                    let reply: NodeReply = serde_json::from_slice(&bytes).map_err(|e| {
                        ApiError::internal(format!("malformed broadcast reply: {e}"))
                    })?;
                    summary.successful += reply.successful;
                    summary.failures.extend(reply.failures);
                }
                // A node that is gone holds copies that count as not successful.
                Ok(Err(e)) => tracing::debug!(error = %e, "broadcast to a node failed"),
                Err(e) => return Err(ApiError::internal(e.to_string())),
            }
        }
        Ok(summary)
    }

    /// `_refresh` of these indices everywhere (delete/update by query read a fresh view).
    pub fn broadcast_refresh(&self, services: &[Arc<IndexService>]) -> ApiResult<()> {
        self.broadcast(services, BroadcastOp::Refresh).map(|_| ())
    }

    fn broadcast_locally(&self, request: &NodeRequest) -> NodeReply {
        let mut reply = NodeReply::default();
        for (name, uuid) in &request.indices {
            let Some(service) = self.index(name).filter(|s| s.uuid() == *uuid) else {
                continue;
            };
            for (shard, engine) in service.local_shards() {
                match run_op(&engine, request.op) {
                    Ok(()) => reply.successful += 1,
                    Err(e) => reply.failures.push(json!({
                        "shard": shard, "index": name, "status": e.status,
                        "reason": e.to_cause_json()
                    })),
                }
            }
        }
        reply
    }

    /// Serves a broadcast from another coordinator.
    pub(crate) fn handle_broadcast(&self, body: &[u8]) -> ApiResult<Bytes> {
        let request: NodeRequest = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("malformed broadcast: {e}")))?;
        let reply = self.broadcast_locally(&request);
        Ok(Bytes::from(serde_json::to_vec(&reply).expect("json")))
    }
}

fn run_op(engine: &shoal_engine::Engine, op: BroadcastOp) -> ApiResult<()> {
    match op {
        BroadcastOp::Refresh => {
            engine.refresh()?;
        }
        BroadcastOp::Flush => {
            engine.flush(true)?;
        }
        BroadcastOp::ForceMerge {
            max_segments,
            only_expunge_deletes,
        } => {
            let target = if only_expunge_deletes {
                usize::MAX
            } else {
                max_segments.unwrap_or(1)
            };
            engine.force_merge(target)?;
            engine.flush(true)?;
        }
    }
    Ok(())
}
