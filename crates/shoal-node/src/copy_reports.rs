//! What this node tells the cluster manager about its own copies: one started (a store
//! recovery done, a peer recovery done) or failed (a recovery that could not finish). Both are
//! proposals sent without waiting; a started report that does not land (the cluster manager
//! changed under it, say) is sent again by the scheduler until it lands or the state no
//! longer has that copy initializing here. Copies whose engine failed or that could not open are
//! the service's too (`shard_failure.rs`): remembered, closed, and reported until it lands.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use shoal_cluster::ClusterError;
use shoal_state::{ClusterState, Command, ShardRouting, ShardState};
use tracing::warn;

use crate::config::CLUSTER_MANAGER_TIMEOUT;
use crate::core::NodeCore;

/// Reports of this node's copies to the cluster manager (the applier, recoveries and the
/// scheduler use it).
pub struct CopyReports {
    pub(crate) core: Arc<NodeCore>,
    /// Allocation ids reported started (or being reported): each is sent once.
    reported_started: Arc<Mutex<HashSet<String>>>,
    /// Started reports that did not land, by allocation id, waiting for the scheduler.
    unlanded_started: Arc<Mutex<HashMap<String, ShardRouting>>>,
    /// Copies reported failed and copies waiting to retry their open.
    pub(crate) failed_copies: crate::shard_failure::FailedCopies,
}

impl CopyReports {
    pub(crate) fn new(core: Arc<NodeCore>) -> CopyReports {
        CopyReports {
            core,
            reported_started: Default::default(),
            unlanded_started: Default::default(),
            failed_copies: Default::default(),
        }
    }

    /// Tells the cluster manager a local copy failed (its recovery, say), so allocation can
    /// place it again.
    pub(crate) fn report_failed(&self, copy: &ShardRouting, reason: &str) {
        let Some(allocation_id) = copy.allocation_id.clone() else {
            return;
        };
        let cluster = self.core.cluster.clone();
        let command = Command::ShardFailed {
            index: copy.index.clone(),
            shard: copy.shard,
            allocation_id,
            reason: reason.to_string(),
            primary_term: None,
        };
        self.core.runtime.spawn(async move {
            if let Err(e) = cluster.propose(command, CLUSTER_MANAGER_TIMEOUT).await {
                warn!(error = %e, "could not report a failed shard");
            }
        });
    }

    /// Tells the cluster manager a local copy started, once per allocation id.
    pub(crate) fn report_started(&self, copy: &ShardRouting) {
        let Some(allocation_id) = copy.allocation_id.clone() else {
            return;
        };
        if !self.reported_started.lock().insert(allocation_id) {
            return;
        }
        self.send_started_report(copy.clone());
    }

    /// Sends again the started reports that did not land (scheduler), for copies the state
    /// still has initializing on this node; the others are forgotten.
    pub(crate) fn resend_started_reports(&self) {
        if self.unlanded_started.lock().is_empty() {
            return;
        }
        let state = self.core.cluster_state();
        let due: Vec<ShardRouting> = self
            .unlanded_started
            .lock()
            .drain()
            .map(|(_, c)| c)
            .collect();
        for copy in due {
            if is_initializing_here(&state, &copy, &self.core.node_id) {
                self.send_started_report(copy);
            }
        }
    }

    fn send_started_report(&self, copy: ShardRouting) {
        let Some(allocation_id) = copy.allocation_id.clone() else {
            return;
        };
        let core = self.core.clone();
        let unlanded = Arc::downgrade(&self.unlanded_started);
        let command = Command::ShardStarted {
            index: copy.index.clone(),
            shard: copy.shard,
            allocation_id: allocation_id.clone(),
        };
        self.core.runtime.spawn(async move {
            let landed = match crate::failpoints::failpoint_fails!(core, "started_report_lost") {
                true => Err(ClusterError::Internal("lost on the way (failpoint)".into())),
                false => core.cluster.propose(command, CLUSTER_MANAGER_TIMEOUT).await,
            };
            let Err(e) = landed else {
                return;
            };
            if let ClusterError::Refused(_) = e {
                // The state says no (the copy moved on): sending it again would change nothing.
                warn!(error = %e, allocation_id, "the cluster manager refused a started shard report");
                return;
            }
            warn!(error = %e, allocation_id, "could not report a started shard, retrying");
            if let Some(unlanded) = unlanded.upgrade() {
                unlanded.lock().insert(allocation_id, copy);
            }
        });
    }
}

/// Whether `state` still has this copy (by allocation id) initializing on `node_id`.
fn is_initializing_here(state: &ClusterState, copy: &ShardRouting, node_id: &str) -> bool {
    state.copies(&copy.index, copy.shard).iter().any(|c| {
        c.allocation_id == copy.allocation_id
            && c.state == ShardState::Initializing
            && c.node.as_deref() == Some(node_id)
    })
}
