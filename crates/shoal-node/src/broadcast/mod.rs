//! Broadcast shard operations (`_refresh`, `_flush`, `_forcemerge`, copy statistics): every
//! node holding copies of the target indices runs the operation on its copies, in parallel,
//! and the coordinator sums the shard counts the way OpenSearch reports `_shards`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::core::NodeCore;
use crate::error::ApiResult;
use crate::index_service::IndexService;
use crate::metadata::IndexMetadataExt;
use crate::remote::RemoteStoreService;
use crate::rpc::NodeActions;
use crate::segrep::SegrepService;

/// Runs a refresh, flush or force merge on the node's copies of some indices.
pub struct BroadcastAction;
impl shoal_transport::Action for BroadcastAction {
    const NAME: &'static str = "indices:admin/broadcast[n]";
    type Request = NodeRequest;
    type Response = NodeReply;
}

/// The statistics of the node's copies of some indices.
pub struct ShardStatsAction;
impl shoal_transport::Action for ShardStatsAction {
    const NAME: &'static str = "indices:monitor/stats[n]";
    type Request = IndexIds;
    type Response = Vec<((String, usize, String), shoal_engine::EngineStats)>;
}

/// The segments of the node's copies of some indices (`_cat/segments`).
pub struct ShardSegmentsAction;
impl shoal_transport::Action for ShardSegmentsAction {
    const NAME: &'static str = "indices:monitor/segments[n]";
    type Request = IndexIds;
    type Response = Vec<((String, usize, String), Vec<shoal_engine::SegmentInfo>)>;
}

pub(crate) fn register_actions(actions: &mut NodeActions, service: &Arc<BroadcastService>) {
    let weak = Arc::downgrade(service);
    actions.register_on::<BroadcastAction, _>(weak.clone(), BroadcastService::handle_broadcast);
    actions.register_on::<ShardStatsAction, _>(weak.clone(), BroadcastService::handle_copy_stats);
    actions.register_on::<ShardSegmentsAction, _>(weak, BroadcastService::handle_copy_segments);
}

/// Broadcast shard operations and copy statistics: this node's part, and the fan-out to
/// every other node holding copies when it coordinates.
pub struct BroadcastService {
    core: Arc<NodeCore>,
    /// A refresh of a segment-replicated index has its replicas copy the new checkpoint.
    segrep: Arc<SegrepService>,
    /// A refresh of a remote-backed primary uploads what it made searchable.
    remote: Arc<RemoteStoreService>,
    /// Each copy's statistics carry its peer recoveries.
    recoveries: Arc<crate::recovery::RecoveryService>,
}

/// The segments of every active copy of some indices, by `(index, shard, node id)`.
pub type CopySegments = BTreeMap<(String, usize, String), Vec<shoal_engine::SegmentInfo>>;

/// The statistics of every copy of some indices, by `(index, shard, node id)`.
pub type CopyStats = BTreeMap<(String, usize, String), shoal_engine::EngineStats>;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub enum BroadcastOp {
    Refresh,
    /// Segment replicas copy their primary's latest checkpoint (the second half of a
    /// refresh of a segment-replicated index: the primaries have refreshed by then).
    SyncSegments,
    /// `_flush`: `force` commits even with nothing new; without `wait_if_ongoing` a copy
    /// already committing is left as it is.
    Flush {
        force: bool,
        wait_if_ongoing: bool,
    },
    ForceMerge {
        max_segments: Option<usize>,
        only_expunge_deletes: bool,
        /// Commit the merged segments (OpenSearch's `flush`, default true).
        #[serde(default = "yes")]
        flush: bool,
        /// Merge only the primaries (segment replicas copy the merged segments anyway).
        #[serde(default)]
        primary_only: bool,
    },
}

fn yes() -> bool {
    true
}

impl BroadcastOp {
    /// Whether only primaries run it (and count in the total).
    fn primaries_only(&self) -> bool {
        matches!(
            self,
            BroadcastOp::ForceMerge {
                primary_only: true,
                ..
            }
        )
    }
}

#[derive(Serialize, Deserialize)]
pub struct NodeRequest {
    indices: IndexIds,
    op: BroadcastOp,
}

#[derive(Serialize, Deserialize, Default)]
pub struct NodeReply {
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

    /// The highest status among the shard failures (200 without any). A force merge that
    /// failed on a copy (a corrupted segment) must not read as done.
    pub fn worst_failure_status(&self) -> u16 {
        self.failures
            .iter()
            .filter_map(|f| f.get("status").and_then(Value::as_u64))
            .map(|status| status as u16)
            .max()
            .unwrap_or(200)
    }
}

/// How long a node may take over its part of a broadcast (a force merge can be long).
const BROADCAST_TIMEOUT: Duration = Duration::from_secs(600);

/// `(name, uuid)` of each target index.
type IndexIds = Vec<(String, String)>;

fn index_ids(services: &[Arc<IndexService>]) -> IndexIds {
    services.iter().map(|s| (s.name(), s.uuid())).collect()
}

impl BroadcastService {
    pub(crate) fn new(
        core: Arc<NodeCore>,
        segrep: Arc<SegrepService>,
        remote: Arc<RemoteStoreService>,
        recoveries: Arc<crate::recovery::RecoveryService>,
    ) -> BroadcastService {
        BroadcastService {
            core,
            segrep,
            remote,
            recoveries,
        }
    }

    /// Runs `op` on every copy of these indices, wherever it is.
    pub fn broadcast(
        &self,
        services: &[Arc<IndexService>],
        op: BroadcastOp,
    ) -> ApiResult<BroadcastSummary> {
        let total = self.copies_counted(services, op);
        let request = NodeRequest {
            indices: index_ids(services),
            op,
        };
        let mut summary = self.broadcast_once(&request, total);
        let segment_replicated: Vec<_> = services
            .iter()
            .filter(|s| s.is_segment_replicated())
            .cloned()
            .collect();
        if matches!(op, BroadcastOp::Refresh) && !segment_replicated.is_empty() {
            let request = NodeRequest {
                indices: index_ids(&segment_replicated),
                op: BroadcastOp::SyncSegments,
            };
            // A replica that could not copy what its primary just made searchable did not
            // refresh: it counts as failed, not successful.
            let synced = self.broadcast_once(&request, 0);
            summary.successful -= synced.failures.len().min(summary.successful);
            summary.failures.extend(synced.failures);
        }
        Ok(summary)
    }

    /// The copies a broadcast's `_shards.total` counts: every configured copy, and the
    /// target of a relocation besides its source (both run the operation, as in OpenSearch).
    fn copies_counted(&self, services: &[Arc<IndexService>], op: BroadcastOp) -> usize {
        let state = self.core.cluster_state();
        let copies = |s: &Arc<IndexService>| {
            let (shards, replicas) = s.with_meta(|m| {
                (
                    m.settings().number_of_shards(),
                    m.settings().number_of_replicas(),
                )
            });
            if op.primaries_only() {
                return shards;
            }
            let relocation_targets = state.routing.get(&s.name()).map_or(0, |table| {
                let assigned = table.shards.iter().flatten();
                assigned
                    .filter(|c| c.relocation_target_of().is_some())
                    .count()
            });
            shards * (1 + replicas) + relocation_targets
        };
        services.iter().map(copies).sum()
    }

    /// One round of `request` on every node holding copies of its indices.
    /// A node that does not answer (gone, frozen) holds copies that count as not successful.
    fn broadcast_once(&self, request: &NodeRequest, total: usize) -> BroadcastSummary {
        let holders = self.holder_addresses(&request.indices);
        let asked = self.core.ask::<BroadcastAction>(
            holders,
            request,
            BROADCAST_TIMEOUT,
            "broadcast results",
        );
        let local = self.broadcast_locally(request);
        let mut summary = BroadcastSummary {
            total,
            successful: local.successful,
            failures: local.failures,
        };
        for reply in self.core.answers(asked) {
            summary.successful += reply.successful;
            summary.failures.extend(reply.failures);
        }
        summary
    }

    /// The transport addresses of the other nodes holding an active copy of these indices.
    fn holder_addresses(&self, indices: &IndexIds) -> Vec<String> {
        let state = self.core.cluster_state();
        let holders: BTreeSet<&str> = indices
            .iter()
            .filter_map(|(name, _)| state.routing.get(name))
            .flat_map(|table| table.shards.iter().flatten())
            .filter(|c| c.is_active())
            .filter_map(|c| c.node.as_deref())
            .filter(|node| *node != self.core.node_id)
            .collect();
        holders
            .into_iter()
            .filter_map(|node| state.nodes.get(node))
            .map(|node| node.transport_address.clone())
            .collect()
    }

    /// The open local copies of these indices (same uuid), with their shard numbers.
    fn local_copies(&self, indices: &IndexIds) -> Vec<(String, usize, Arc<shoal_engine::Engine>)> {
        indices
            .iter()
            .filter_map(|(name, uuid)| self.core.index(name).filter(|s| s.uuid() == *uuid))
            .flat_map(|service| {
                let name = service.name();
                service
                    .local_shards()
                    .into_iter()
                    .map(move |(shard, engine)| (name.clone(), shard, engine))
            })
            .collect()
    }

    /// The statistics of every active copy of these indices, from the nodes holding them
    /// (a node that does not answer leaves its copies out: `_cat/shards` then shows them
    /// without doc counts).
    pub fn copy_stats(&self, services: &[Arc<IndexService>]) -> CopyStats {
        let indices = index_ids(services);
        let holders = self.holder_addresses(&indices);
        let asked = self.core.ask::<ShardStatsAction>(
            holders,
            &indices,
            BROADCAST_TIMEOUT,
            "copy statistics",
        );
        let mut stats = self.local_copy_stats(&indices);
        stats.extend(self.core.answers(asked).into_iter().flatten());
        stats
    }

    /// The segments of every active copy of these indices, from the nodes holding them (a
    /// node that does not answer leaves its copies out).
    pub fn copy_segments(&self, services: &[Arc<IndexService>]) -> CopySegments {
        let indices = index_ids(services);
        let holders = self.holder_addresses(&indices);
        let asked =
            self.core
                .ask::<ShardSegmentsAction>(holders, &indices, BROADCAST_TIMEOUT, "segments");
        let mut segments = self.local_copy_segments(&indices);
        segments.extend(self.core.answers(asked).into_iter().flatten());
        segments
    }

    fn local_copy_segments(&self, indices: &IndexIds) -> CopySegments {
        self.local_copies(indices)
            .into_iter()
            .filter_map(|(name, shard, engine)| {
                let segments = engine.segments().ok()?;
                Some(((name, shard, self.core.node_id.clone()), segments))
            })
            .collect()
    }

    fn handle_copy_segments(
        &self,
        indices: IndexIds,
    ) -> ApiResult<Vec<((String, usize, String), Vec<shoal_engine::SegmentInfo>)>> {
        Ok(self.local_copy_segments(&indices).into_iter().collect())
    }

    fn local_copy_stats(&self, indices: &IndexIds) -> CopyStats {
        self.local_copies(indices)
            .into_iter()
            .map(|(name, shard, engine)| {
                let mut stats = engine.stats();
                if let Some(service) = self.core.index(&name) {
                    stats.recovery = self.recoveries.recovery_stats(&service, Some(shard));
                }
                ((name, shard, self.core.node_id.clone()), stats)
            })
            .collect()
    }

    /// Serves a copy-statistics request from another coordinator.
    fn handle_copy_stats(
        &self,
        indices: IndexIds,
    ) -> ApiResult<Vec<((String, usize, String), shoal_engine::EngineStats)>> {
        Ok(self.local_copy_stats(&indices).into_iter().collect())
    }

    /// `_refresh` of these indices everywhere (delete/update by query read a fresh view).
    pub fn broadcast_refresh(&self, services: &[Arc<IndexService>]) -> ApiResult<()> {
        self.broadcast(services, BroadcastOp::Refresh).map(|_| ())
    }

    fn broadcast_locally(&self, request: &NodeRequest) -> NodeReply {
        let mut reply = NodeReply::default();
        let copies = self.local_copies(&request.indices);
        crate::failpoints::failpoint!(self.core, "broadcast_before_copies");
        for (name, shard, engine) in copies {
            if request.op.primaries_only() && !self.is_local_primary(&name, shard) {
                continue;
            }
            let done = match request.op {
                BroadcastOp::SyncSegments if !engine.is_writer_less() => continue,
                BroadcastOp::SyncSegments => {
                    self.sync_local_segments(&request.indices, &name, shard)
                }
                BroadcastOp::Refresh => run_op(&engine, BroadcastOp::Refresh)
                    .and_then(|()| self.upload_refreshed(&name, shard)),
                op => run_op(&engine, op),
            };
            match done {
                Ok(()) => reply.successful += 1,
                // A copy that closed as the operation reached it (a relocation source
                // handing off, a removed replica) is not a failure of the operation:
                // OpenSearch leaves such shard-not-available errors out of `_shards.failed`
                // too. A failed engine, or a replica that could not sync, still counts.
                Err(e) if engine.is_closed() => {
                    tracing::debug!(index = %name, shard, error = %e, "broadcast skipped a copy that is closing");
                }
                Err(e) => reply.failures.push(json!({
                    "shard": shard, "index": name, "status": e.status,
                    "reason": e.to_cause_json()
                })),
            }
        }
        reply
    }

    /// Whether the routing table has this node's copy of `name`/`shard` as the primary.
    fn is_local_primary(&self, name: &str, shard: usize) -> bool {
        self.core
            .cluster_state()
            .copies(name, shard as u32)
            .iter()
            .any(|c| c.primary && c.node.as_deref() == Some(self.core.node_id.as_str()))
    }

    /// A remote-backed primary has what it just refreshed uploaded before `_refresh` goes on
    /// to its replicas (they copy from the repository).
    fn upload_refreshed(&self, name: &str, shard: usize) -> ApiResult<()> {
        let Some(service) = self.core.index(name).filter(|s| s.is_remote_store()) else {
            return Ok(());
        };
        let copy = service.copy(shard)?;
        if copy.primary_targets().is_none() {
            return Ok(());
        }
        self.remote
            .upload_current_checkpoint(&service, shard, &copy)
            .map(|_| ())
    }

    /// Brings the local segment replica of `name`/`shard` to its primary's latest checkpoint.
    fn sync_local_segments(&self, indices: &IndexIds, name: &str, shard: usize) -> ApiResult<()> {
        let uuid = indices
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, uuid)| uuid.clone())
            .unwrap_or_default();
        let service = self.core.require_index(name)?;
        let Some(replication) = service.replication(shard) else {
            return Ok(());
        };
        let target = crate::segrep::CopyTarget {
            index: name.to_string(),
            index_uuid: uuid,
            shard,
            allocation_id: replication.allocation_id.clone(),
        };
        match self.segrep.sync_segments(target.clone())? {
            crate::segrep::RoundEnd::Current => Ok(()),
            crate::segrep::RoundEnd::RepositoryBehind => {
                Err(crate::segrep::target::repository_behind(&target))
            }
        }
    }

    /// Serves a broadcast from another coordinator.
    fn handle_broadcast(&self, request: NodeRequest) -> ApiResult<NodeReply> {
        Ok(self.broadcast_locally(&request))
    }
}

fn run_op(engine: &shoal_engine::Engine, op: BroadcastOp) -> ApiResult<()> {
    match op {
        BroadcastOp::Refresh => {
            engine.refresh()?;
        }
        BroadcastOp::SyncSegments => {}
        BroadcastOp::Flush {
            force,
            wait_if_ongoing,
        } => {
            engine.flush_requested(shoal_engine::FlushRequest {
                force,
                wait_if_ongoing,
                periodic: false,
            })?;
        }
        BroadcastOp::ForceMerge {
            max_segments,
            only_expunge_deletes,
            flush,
            primary_only: _,
        } => {
            let target = if only_expunge_deletes {
                shoal_engine::ForceMergeTarget::ExpungeDeletes
            } else {
                shoal_engine::ForceMergeTarget::MaxSegments(max_segments.unwrap_or(1))
            };
            engine.force_merge(target)?;
            if flush {
                engine.flush(true)?;
            }
        }
    }
    Ok(())
}
