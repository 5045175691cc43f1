//! `_nodes/stats`: every node reports its own sections (indices, os, process, fs, thread pools,
//! indexing pressure, transport…) through `cluster:monitor/nodes/stats[n]`; the coordinating
//! node asks the nodes a request selects, all at once, and REST renders their answers beside
//! what the cluster state says of each node.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::core::NodeCore;
use crate::error::ApiResult;
use crate::recovery::RecoveryService;
use crate::segrep::SegrepService;

mod doc_status;
mod http;
mod probes;

pub use doc_status::DocStatusCounts;
pub use http::{HttpStats, OpenConnection};

/// Transport action answering a node's own `_nodes/stats` sections.
pub struct NodesStatsAction;
impl shoal_transport::Action for NodesStatsAction {
    const NAME: &'static str = "cluster:monitor/nodes/stats[n]";
    type Request = StatsRequest;
    type Response = Value;
}

/// What one `_nodes/stats` request wants of each node.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct StatsRequest {
    /// The sections wanted, by their key (`indices`, `os`, `breakers`…).
    pub sections: Vec<String>,
    /// `level=indices`: the `indices` section also holds each index's statistics under
    /// `indices.indices`.
    #[serde(default)]
    pub by_index: bool,
}

impl StatsRequest {
    pub fn for_sections(sections: &[String]) -> StatsRequest {
        StatsRequest {
            sections: sections.to_vec(),
            by_index: false,
        }
    }
}

pub(crate) fn register_actions(
    actions: &mut crate::rpc::NodeActions,
    service: &Arc<NodeStatsService>,
) {
    actions.register_on::<NodesStatsAction, _>(Arc::downgrade(service), |service, request| {
        Ok(service.local_sections(&request))
    });
}

/// This node's statistics, and the fan-out that gathers other nodes' for `_nodes/stats`.
pub struct NodeStatsService {
    core: Arc<NodeCore>,
    /// Replica lag of this node's segment-replicated primaries, and the merged-segment warmer.
    segrep: Arc<SegrepService>,
    /// Peer recoveries from and into this node's copies (`indices.recovery`).
    recoveries: Arc<RecoveryService>,
    /// The REST server's connections, counted by the server.
    pub http: Arc<HttpStats>,
    probes: probes::Probes,
}

impl NodeStatsService {
    pub(crate) fn new(
        core: Arc<NodeCore>,
        segrep: Arc<SegrepService>,
        recoveries: Arc<RecoveryService>,
    ) -> NodeStatsService {
        NodeStatsService {
            core,
            segrep,
            recoveries,
            http: Arc::default(),
            probes: probes::Probes::new(),
        }
    }

    /// The sections `request` names of each node of `ids`, in that order; a node that does not
    /// answer is an error in its place.
    pub fn nodes_stats(
        &self,
        ids: &[String],
        request: &StatsRequest,
        timeout: Duration,
    ) -> Vec<(String, ApiResult<Value>)> {
        self.core
            .ask_each_node::<NodesStatsAction>(ids, request, timeout, || {
                self.local_sections(request)
            })
    }

    /// This node's `_nodes/stats` sections the request names, each gathered only when asked
    /// for (the index sections read every local copy's statistics).
    pub fn local_sections(&self, request: &StatsRequest) -> Value {
        let now = crate::node::now_millis();
        let mut out = serde_json::Map::new();
        out.insert("timestamp".into(), json!(now));
        for key in &request.sections {
            let section = match key.as_str() {
                "indices" => self.indices_section(request.by_index),
                "os" => self.probes.os_section(now),
                "jvm" => self.probes.jvm_section(now, self.core.started.elapsed()),
                "process" => self
                    .probes
                    .process_section(now, self.core.started.elapsed()),
                "fs" => self.fs_section(now),
                "thread_pool" => self.core.pressure.stats(),
                "indexing_pressure" => self.core.pressure.indexing.stats(),
                "transport" => self.transport_section(),
                "discovery" => self.discovery_section(),
                "breakers" => json!({}),
                "http" => self.http.section(),
                _ => continue,
            };
            out.insert(key.clone(), section);
        }
        Value::Object(out)
    }

    /// The `_stats` sections summed over this node's copies, with segment replication's lag
    /// under `segments` and the merged-segment warmer under `merges`.
    fn indices_section(&self, by_index: bool) -> Value {
        let mut indices = crate::stats::zero_section();
        let mut each = serde_json::Map::new();
        for service in self.core.all_indices() {
            let mut summed = crate::stats::sum_engine_stats(&service);
            summed.recovery = self.recoveries.recovery_stats(&service, None);
            let section = crate::stats::stats_section(&service, &summed);
            crate::stats::add_sections(&mut indices, &section);
            if by_index {
                each.insert(service.name(), section);
            }
        }
        if let Some(segments) = indices.get_mut("segments").and_then(Value::as_object_mut) {
            segments.insert("segment_replication".into(), self.segment_replication());
        }
        if let Some(indexing) = indices.get_mut("indexing").and_then(Value::as_object_mut) {
            indexing.insert("doc_status".into(), self.core.doc_status.section());
        }
        // OpenSearch 3.3+ reports its merged segment warmer under `merges`.
        if let Some(merges) = indices.get_mut("merges").and_then(Value::as_object_mut) {
            merges.insert(
                "merged_segment_warmer".into(),
                json!(self.segrep.warmer_stats()),
            );
        }
        if by_index {
            indices["indices"] = Value::Object(each);
        }
        indices
    }

    /// How far behind the replicas of this node's segment-replicated primaries are (OpenSearch's
    /// `segments.segment_replication`: bytes, and the lag in milliseconds).
    fn segment_replication(&self) -> Value {
        let rows = self.segrep.local_replica_rows(None);
        json!({
            "max_bytes_behind": rows.iter().map(|r| r.bytes_behind).max().unwrap_or(0),
            "total_bytes_behind": rows.iter().map(|r| r.bytes_behind).sum::<u64>(),
            "max_replication_lag": rows.iter().map(|r| r.current_lag_ms).max().unwrap_or(0),
        })
    }

    fn fs_section(&self, now: i64) -> Value {
        let path = &self.core.paths.data;
        let (total, available) = crate::disk_usage::filesystem_space(path).unwrap_or((0, 0));
        json!({"timestamp": now,
            "total": {"total_in_bytes": total, "free_in_bytes": available, "available_in_bytes": available},
            "data": [{"path": path.display().to_string(), "total_in_bytes": total,
                      "free_in_bytes": available, "available_in_bytes": available}]})
    }

    /// How cluster states reach this node: Raft log entries are diffs, snapshots full states;
    /// the queue is the log this node holds but has not applied (uncommitted, committed).
    fn discovery_section(&self) -> Value {
        let stats = self.core.cluster.discovery_stats();
        json!({
            "cluster_state_queue": {
                "total": stats.pending + stats.committed,
                "pending": stats.pending,
                "committed": stats.committed,
            },
            "published_cluster_states": {
                "full_states": stats.full_states,
                "incompatible_diffs": 0,
                "compatible_diffs": stats.diffs,
            },
        })
    }

    /// Node-to-node messages and their payload bytes (request and reply bodies, not framing).
    fn transport_section(&self) -> Value {
        let counts = self.core.transport.stats();
        json!({
            "rx_count": counts.rx_count, "rx_size_in_bytes": counts.rx_bytes,
            "tx_count": counts.tx_count, "tx_size_in_bytes": counts.tx_bytes,
        })
    }
}
