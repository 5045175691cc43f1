//! Broadcast shard operations (`_refresh`, `_flush`, `_forcemerge`, copy statistics): every
//! node holding copies of the target indices runs the operation on its copies, in parallel,
//! and the coordinator sums the shard counts the way OpenSearch reports `_shards`.

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
pub const ACTION_SHARD_STATS: &str = "indices:monitor/stats[n]";

/// The statistics of every copy of some indices, by `(index, shard, node id)`.
pub type CopyStats = BTreeMap<(String, usize, String), shoal_engine::EngineStats>;

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

    /// Sends `request` to every other node holding an active copy of its indices.
    fn send_to_holders(
        &self,
        state: &shoal_state::ClusterState,
        request: &NodeRequest,
        action: &'static str,
    ) -> Vec<tokio::task::JoinHandle<Result<Bytes, shoal_transport::TransportError>>> {
        let mut nodes: BTreeMap<String, String> = BTreeMap::new();
        for (name, _) in &request.indices {
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
        let body = Bytes::from(serde_json::to_vec(request).expect("json"));
        nodes
            .into_values()
            .map(|address| {
                let (transport, body) = (self.transport.clone(), body.clone());
                self.runtime.spawn(async move {
                    transport
                        .call(&address, action, body, Duration::from_secs(600))
                        .await
                })
            })
            .collect()
    }

    /// The statistics of every active copy of these indices, from the nodes holding them
    /// (a node that does not answer leaves its copies out).
    pub fn copy_stats(&self, services: &[Arc<IndexService>]) -> CopyStats {
        let state = self.cluster_state();
        let request = NodeRequest {
            indices: services.iter().map(|s| (s.name(), s.uuid())).collect(),
            op: BroadcastOp::Refresh, // unused by the stats action
        };
        let pending = self.send_to_holders(&state, &request, ACTION_SHARD_STATS);
        let mut stats = self.local_copy_stats(&request);
        for reply in pending {
            let Ok(Ok(bytes)) = self.runtime.block_on(reply) else {
                continue;
            };
            if let Ok(remote) = serde_json::from_slice::<
                Vec<((String, usize, String), shoal_engine::EngineStats)>,
            >(&bytes)
            {
                stats.extend(remote);
            }
        }
        stats
    }

    fn local_copy_stats(&self, request: &NodeRequest) -> CopyStats {
        let mut stats = CopyStats::new();
        for (name, uuid) in &request.indices {
            let Some(service) = self.index(name).filter(|s| s.uuid() == *uuid) else {
                continue;
            };
            for (shard, engine) in service.local_shards() {
                stats.insert((name.clone(), shard, self.node_id.clone()), engine.stats());
            }
        }
        stats
    }

    /// Serves a copy-statistics request from another coordinator.
    pub(crate) fn handle_copy_stats(&self, body: &[u8]) -> ApiResult<Bytes> {
        let request: NodeRequest = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("malformed stats request: {e}")))?;
        let stats: Vec<_> = self.local_copy_stats(&request).into_iter().collect();
        Ok(Bytes::from(serde_json::to_vec(&stats).expect("json")))
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
