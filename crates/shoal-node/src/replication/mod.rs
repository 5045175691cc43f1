//! Document replication on this node (`index.replication.type: DOCUMENT`).
//!
//! - [`primary`]: after the primary applies a batch, it sends the operations (with their
//!   seq_nos) to every tracked copy, fails a copy that does not answer before acknowledging,
//!   and advances the global checkpoint.
//! - [`replica`]: a copy applies the primary's operations with the primary's seq_nos and
//!   answers with its local checkpoint; operations from an older primary term are refused.
//! - peer recovery, a service of its own ([`crate::recovery`]): a new copy (a replica or a
//!   relocation target) copies the primary's last commit, starts receiving live operations,
//!   replays the history above the commit, and is then reported started.
//! - [`leases`]: the primary's peer-recovery retention leases, which keep the history a
//!   returning copy needs to recover by replaying operations.
//! - [`promotion`]: the cluster manager asks the in-sync replicas of a lost primary for their
//!   local checkpoints and promotes the most caught-up one.
//! - [`resync`]: a copy that becomes the primary fills its seq_no gaps and resyncs the other
//!   copies (failing those whose history diverged) before it accepts writes.
//!
//! [`ReplicationService`] (`Node.replication`) holds these roles; [`ShardReplication`] is the
//! per-copy state: the replication tracker and the lock that orders "start tracking a
//! recovering copy" against writes in flight.

pub mod active_shards;
pub mod leases;
pub mod primary;
pub mod promotion;
pub mod replica;
pub mod resync;

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use shoal_replication::ReplicationTracker;
use shoal_state::{ClusterState, ShardState};

/// The names of the node-to-node actions of replication work: they run on the `replication`
/// pool and are never rejected ([`crate::pressure::pool_for_action`]), so client work cannot
/// starve a copy. Declared here, apart from the handlers, so the pools need not know them.
pub mod action_names {
    /// A primary's batch of operations to a copy ([`super::replica::ReplicaOpsAction`]).
    pub const REPLICA_OPS: &str = "indices:data/write/bulk[s][r]";
    /// A copy's local checkpoint ([`super::promotion::LocalCheckpointAction`]).
    pub const LOCAL_CHECKPOINT: &str = "internal:index/shard/local_checkpoint";
    /// What every peer recovery action's name starts with ([`crate::recovery`]).
    pub const RECOVERY_PREFIX: &str = "internal:index/shard/recovery/";
    /// What every segment replication action's name starts with ([`crate::segrep`]).
    pub const SEGREP_PREFIX: &str = "internal:index/shard/replication/";
}

/// Document replication on this node: the primary sending its operations to the copies (and
/// failing those that do not take them), the replica applying them, a new primary's resync,
/// the choice of whom to promote, retention leases and `wait_for_active_shards`. It holds the
/// node's core and the segment replication service (a promoted segment replica publishes the
/// commit it made of what it only logged), never the node.
pub struct ReplicationService {
    core: Arc<crate::core::NodeCore>,
    segrep: Arc<crate::segrep::SegrepService>,
}

impl ReplicationService {
    pub(crate) fn new(
        core: Arc<crate::core::NodeCore>,
        segrep: Arc<crate::segrep::SegrepService>,
    ) -> ReplicationService {
        ReplicationService { core, segrep }
    }
}

/// The replication state of one local shard copy.
pub struct ShardReplication {
    pub allocation_id: String,
    pub tracker: Mutex<ReplicationTracker>,
    /// Writes hold it shared from assigning seq_nos until they know where to replicate;
    /// a recovery holds it exclusively to start tracking its target, so every operation is
    /// either replicated live to the target or in the history the recovery replays.
    pub ops_lock: RwLock<()>,
    /// A resync after becoming the primary is running (it activates primary mode at its end).
    pub resyncing: AtomicBool,
}

impl ShardReplication {
    pub fn new(allocation_id: &str, global_checkpoint: i64) -> ShardReplication {
        ShardReplication {
            allocation_id: allocation_id.to_string(),
            tracker: Mutex::new(ReplicationTracker::new(allocation_id, global_checkpoint)),
            ops_lock: RwLock::new(()),
            resyncing: AtomicBool::new(false),
        }
    }

    /// Follows the cluster state's in-sync set and initializing copies of this shard.
    pub fn apply_cluster_state(&self, state: &ClusterState, index: &str, shard: usize) {
        let in_sync: BTreeSet<String> = state
            .metadata
            .indices
            .get(index)
            .and_then(|m| m.in_sync_allocations.get(shard).cloned())
            .unwrap_or_default();
        let initializing: BTreeSet<String> = state
            .copies(index, shard as u32)
            .iter()
            .filter(|c| c.state == ShardState::Initializing)
            .filter_map(|c| c.allocation_id.clone())
            .collect();
        self.tracker
            .lock()
            .apply_cluster_state(&in_sync, &initializing);
    }
}

/// One operation as the primary sends it to its copies (the source travels as a blob).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplicaOpHeader {
    pub kind: shoal_engine::OpKind,
    pub id: String,
    pub routing: Option<String>,
    pub seq_no: i64,
    pub primary_term: i64,
    pub version: i64,
}

/// An operation with its source, on either side of the wire.
#[derive(Debug, Clone)]
pub struct ReplicaOp {
    pub header: ReplicaOpHeader,
    pub source: Vec<u8>,
}

impl ReplicaOp {
    pub fn from_translog(op: shoal_engine::Operation) -> ReplicaOp {
        ReplicaOp {
            header: ReplicaOpHeader {
                kind: op.kind,
                id: op.id,
                routing: op.routing,
                seq_no: op.seq_no,
                primary_term: op.primary_term,
                version: op.version,
            },
            source: op.source,
        }
    }
}

/// The copy's address for a transport call, from the cluster state.
pub fn copy_address(
    state: &ClusterState,
    index: &str,
    shard: usize,
    allocation_id: &str,
) -> Option<String> {
    let copy = state
        .copies(index, shard as u32)
        .iter()
        .find(|c| c.allocation_id.as_deref() == Some(allocation_id))?;
    let node = state.nodes.get(copy.node.as_deref()?)?;
    Some(node.transport_address.clone())
}
