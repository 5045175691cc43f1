//! Peer-recovery retention leases on the primary: one per node that holds a copy of the
//! shard (or held one that waits for its node to return), retaining the operations above
//! the global checkpoint that copy acknowledged. The engine keeps its translog from the
//! lowest leased seq_no, so a copy that comes back recovers by replaying operations instead
//! of copying files. A node's lease expires `index.soft_deletes.retention_lease.period` (12h)
//! after its last renewal once no copy of the shard is assigned to it. The primary sends
//! its peer-recovery leases with every batch of operations; replicas retain the same
//! history, so a promoted replica still holds what a returning copy needs.

use std::collections::{BTreeMap, BTreeSet};

use shoal_engine::Engine;
use shoal_replication::{peer_recovery_lease_id, RetentionLeases};
use shoal_state::{ClusterState, UnassignedReason};

use super::ReplicationService;
use super::ShardReplication;
use crate::index_service::IndexService;
use crate::metadata::IndexMetadataExt;

/// The nodes a shard's copies live on, as the leases need them.
struct CopyNodes {
    /// Allocation id to node id, for the assigned copies.
    assigned: BTreeMap<String, String>,
    /// Nodes of copies that left with their node and wait for it to come back.
    departed: BTreeSet<String>,
}

fn copy_nodes(state: &ClusterState, index: &str, shard: usize) -> CopyNodes {
    let mut nodes = CopyNodes {
        assigned: BTreeMap::new(),
        departed: BTreeSet::new(),
    };
    for copy in state.copies(index, shard as u32) {
        match (&copy.allocation_id, &copy.node, &copy.unassigned) {
            (Some(allocation_id), Some(node), _) => {
                nodes.assigned.insert(allocation_id.clone(), node.clone());
            }
            (_, None, Some(info)) if info.reason == UnassignedReason::NodeLeft => {
                nodes.departed.extend(info.last_node.clone());
            }
            _ => {}
        }
    }
    nodes
}

impl ShardReplication {
    /// Hands the engine the lowest seq_no the leases still need.
    pub(crate) fn apply_retention_floor(&self, engine: &Engine) {
        engine.set_retention_floor(self.tracker.lock().leases.min_retained_seq_no());
    }

    /// Turns this copy into the primary: it tracks the others from its local checkpoint and
    /// owns the leases it holds (its own, or those its former primary synced to it).
    pub(crate) fn activate_primary(&self, engine: &Engine, own_node: &str) {
        // What it holds came from earlier primaries: any of it may have been an update. Raised
        // before primary mode, so its first batch already carries it.
        engine.advance_max_seq_no_of_updates(engine.max_seq_no());
        {
            let mut tracker = self.tracker.lock();
            tracker.activate_primary_mode(engine.local_checkpoint());
            tracker.leases.take_over(engine.primary_term(), own_node);
        }
        self.apply_retention_floor(engine);
    }

    /// The leases a primary sends along with its operations (`None` unless primary).
    pub(crate) fn leases_to_sync(&self) -> Option<RetentionLeases> {
        let tracker = self.tracker.lock();
        tracker
            .is_primary_mode()
            .then(|| tracker.leases.peer_recovery_leases())
    }
}

impl ReplicationService {
    /// Renews the leases of the nodes holding copies, expires those of nodes that no longer
    /// hold one, and applies the result to the engine. A no-op unless this copy is primary.
    pub(crate) fn maintain_retention_leases(&self, service: &IndexService, shard: usize) {
        let (Some(replication), Ok(engine)) = (service.replication(shard), service.shard(shard))
        else {
            return;
        };
        let period = service.with_meta(|m| m.settings().retention_lease_period());
        let nodes = copy_nodes(&self.core.cluster_state(), &service.name(), shard);
        let now = now_millis();
        {
            let mut tracker = replication.tracker.lock();
            if !tracker.is_primary_mode() {
                return;
            }
            tracker.renew_peer_recovery_leases(&nodes.assigned, now);
            let keep: BTreeSet<String> = nodes
                .assigned
                .values()
                .map(|n| peer_recovery_lease_id(n))
                .collect();
            let expired = tracker
                .leases
                .expire_except(now, period.as_millis() as i64, &keep);
            if !expired.is_empty() {
                tracing::info!(index = %service.name(), shard, leases = ?expired, "retention leases expired");
            }
        }
        replication.apply_retention_floor(&engine);
    }

    /// A copy taking over as primary leases the history above its global checkpoint to the
    /// nodes of every other copy, including copies waiting for their node to return.
    pub(crate) fn lease_history_to_copies(
        &self,
        service: &IndexService,
        shard: usize,
        engine: &Engine,
        replication: &ShardReplication,
    ) {
        let nodes = copy_nodes(&self.core.cluster_state(), &service.name(), shard);
        let others: Vec<String> = nodes
            .assigned
            .values()
            .chain(nodes.departed.iter())
            .filter(|n| **n != self.core.node_id)
            .cloned()
            .collect();
        replication
            .tracker
            .lock()
            .add_missing_peer_recovery_leases(&others, now_millis());
        replication.apply_retention_floor(engine);
    }
}

pub(crate) fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
