//! What this node tells the cluster manager about its own copies: one started (a store
//! recovery done, a peer recovery done) or failed (a recovery that could not finish). Both are
//! proposals sent without waiting; a started report that does not land is forgotten so the
//! next applied state sends it again. Copies whose engine failed or that could not open are
//! the service's too (`shard_failure.rs`): remembered, closed, and reported until it lands.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;
use shoal_state::{Command, ShardRouting};
use tracing::warn;

use crate::config::CLUSTER_MANAGER_TIMEOUT;
use crate::core::NodeCore;

/// Reports of this node's copies to the cluster manager (the applier, recoveries and the
/// scheduler use it).
pub struct CopyReports {
    pub(crate) core: Arc<NodeCore>,
    /// Allocation ids reported started (or being reported): each is sent once.
    reported_started: Arc<Mutex<HashSet<String>>>,
    /// Copies reported failed and copies waiting to retry their open.
    pub(crate) failed_copies: crate::shard_failure::FailedCopies,
}

impl CopyReports {
    pub(crate) fn new(core: Arc<NodeCore>) -> CopyReports {
        CopyReports {
            core,
            reported_started: Default::default(),
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
        if !self.reported_started.lock().insert(allocation_id.clone()) {
            return;
        }
        let cluster = self.core.cluster.clone();
        let reported = Arc::downgrade(&self.reported_started);
        let command = Command::ShardStarted {
            index: copy.index.clone(),
            shard: copy.shard,
            allocation_id: allocation_id.clone(),
        };
        self.core.runtime.spawn(async move {
            if let Err(e) = cluster.propose(command, CLUSTER_MANAGER_TIMEOUT).await {
                // Forgotten, so the next applied state reports it again.
                warn!(error = %e, allocation_id, "could not report a started shard");
                if let Some(reported) = reported.upgrade() {
                    reported.lock().remove(&allocation_id);
                }
            }
        });
    }
}
