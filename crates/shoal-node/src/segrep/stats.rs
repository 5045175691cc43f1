//! How far each segment replica is behind its primary, as the primary sees it: checkpoints it
//! published that the replica does not search yet, since when, and how many bytes. Lag runs
//! from a checkpoint's publication to the replica's report that it searches it (never while
//! nothing is pending: an idle replica is not behind).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::SegrepService;
use super::{CopyTarget, VisibleCheckpointAction};
use crate::error::ApiResult;
use crate::shard::segrep::{CopyRound, ReplicaLag};

/// A row of `_cat/segment_replication`: one replica of a primary on the node that answered.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplicaRow {
    pub index: String,
    pub shard: usize,
    pub target_node: String,
    pub checkpoints_behind: usize,
    pub bytes_behind: u64,
    pub current_lag_ms: u64,
    pub last_completed_lag_ms: Option<u64>,
    pub rejected_requests: u64,
    /// The replica's last completed copy round (`detailed`); none before its first.
    #[serde(default)]
    pub last_round: Option<CopyRound>,
}

/// What a replica reports after it installed a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VisibleCheckpoint {
    pub target: CopyTarget,
    pub primary_term: i64,
    pub version: u64,
    pub length: u64,
    /// How the round that installed it went (none from nodes that predate it).
    #[serde(default)]
    pub round: Option<CopyRound>,
}

impl SegrepService {
    /// A replica searches a newer checkpoint (on its primary).
    pub(super) fn handle_visible_checkpoint(&self, visible: VisibleCheckpoint) -> ApiResult<()> {
        let target = &visible.target;
        let shard_id = shoal_types::ShardId::new(target.index_uuid.clone(), target.shard as u32);
        let copy = self.core.local_copy(&target.index, &shard_id, None)?;
        if copy.engine().primary_term() == visible.primary_term {
            let mut lags = copy.shard.segrep.replicas.lock();
            let lag = lags.entry(target.allocation_id.clone()).or_default();
            lag.visible(visible.version, visible.length, Instant::now());
            if visible.round.is_some() {
                lag.last_round = visible.round;
            }
        }
        Ok(())
    }

    /// Tells the primary this replica searches `checkpoint` now (not waited for).
    pub(super) fn report_visible(
        &self,
        address: &str,
        target: &CopyTarget,
        checkpoint: &shoal_engine::SegmentCheckpoint,
        round: CopyRound,
    ) {
        let visible = VisibleCheckpoint {
            target: target.clone(),
            primary_term: checkpoint.primary_term,
            version: checkpoint.version,
            length: checkpoint.length(),
            round: Some(round),
        };
        drop(
            self.core
                .send::<VisibleCheckpointAction>(address, &visible, Duration::from_secs(30)),
        );
    }

    /// The replicas of this node's segment-replicated primaries of `indices` (all: `None`).
    pub fn local_replica_rows(&self, indices: Option<&[String]>) -> Vec<ReplicaRow> {
        let state = self.core.cluster_state();
        let now = Instant::now();
        let mut rows = Vec::new();
        for service in self.core.all_indices() {
            let name = service.name();
            if indices.is_some_and(|wanted| !wanted.contains(&name))
                || !service.is_segment_replicated()
            {
                continue;
            }
            for (shard, copy) in service.local_copies() {
                let Some(targets) = copy.primary_targets() else {
                    continue;
                };
                let lags = copy.segrep.replicas.lock();
                let rejected = copy.segrep.rejected_requests();
                for allocation_id in targets {
                    let Some(node) = state
                        .copies(&name, shard as u32)
                        .iter()
                        .find(|c| c.allocation_id.as_deref() == Some(allocation_id.as_str()))
                        .and_then(|c| c.node.clone())
                    else {
                        continue;
                    };
                    let lag = lags.get(&allocation_id);
                    rows.push(ReplicaRow {
                        index: name.clone(),
                        shard,
                        target_node: node,
                        checkpoints_behind: lag.map_or(0, ReplicaLag::checkpoints_behind),
                        bytes_behind: lag.map_or(0, ReplicaLag::bytes_behind),
                        current_lag_ms: lag.map_or(0, |l| l.current_lag(now).as_millis() as u64),
                        last_completed_lag_ms: lag
                            .and_then(ReplicaLag::last_completed)
                            .map(|d| d.as_millis() as u64),
                        rejected_requests: rejected,
                        last_round: lag.and_then(|l| l.last_round.clone()),
                    });
                }
            }
        }
        rows
    }

    /// Serves another node's `_cat/segment_replication`.
    pub(super) fn serve_replica_rows(
        &self,
        indices: Option<Vec<String>>,
    ) -> ApiResult<Vec<ReplicaRow>> {
        Ok(self.local_replica_rows(indices.as_deref()))
    }

    /// The replica rows of every node (a node that does not answer leaves its primaries out).
    pub fn replica_rows(&self, indices: Option<Vec<String>>) -> Vec<ReplicaRow> {
        let asked = self.core.ask::<super::ReplicaRowsAction>(
            self.core.other_node_addresses(),
            &indices,
            Duration::from_secs(10),
            "segment replication rows",
        );
        let mut rows = self.local_replica_rows(indices.as_deref());
        rows.extend(self.core.answers(asked).into_iter().flatten());
        rows.sort_by(|a, b| {
            (&a.index, a.shard, &a.target_node).cmp(&(&b.index, b.shard, &b.target_node))
        });
        rows
    }
}
