//! A graceful leave: before a node stops, it hands the cluster manager role to another voter
//! and has itself removed from the cluster, with the most caught-up copies chosen to take over
//! its primaries. Writes then move to the new primaries while this node still answers, instead
//! of failing against a closed port until fault detection notices it is gone.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use openraft::async_runtime::watch::WatchReceiver;
use shoal_state::Command;
use tracing::{info, warn};

use crate::coordinator::Cluster;

/// How long a leaving cluster manager waits for another voter to take over.
const HANDOVER_WAIT: Duration = Duration::from_secs(5);

impl Cluster {
    /// Takes this node out of the cluster; returns whether its removal was applied here within
    /// `timeout`. From then on it never joins again (this process is about to stop). A node
    /// alone stays: no other node could take over its copies, and its restart would find them
    /// unassigned.
    pub async fn leave(&self, timeout: Duration) -> bool {
        let local = self.local().id.clone();
        let state = self.state();
        if state.nodes.keys().all(|id| *id == local) {
            return false;
        }
        self.leaving.store(true, Ordering::Release);
        if !state.nodes.contains_key(&local) {
            return true;
        }
        let deadline = Instant::now() + timeout;
        if self.raft().is_leader() {
            self.hand_over_leadership(deadline.min(Instant::now() + HANDOVER_WAIT))
                .await;
        }
        let promote = crate::leader::promotion_choices(self, &local).await;
        let command = Command::NodeLeft {
            node_id: local,
            reason: "node shut down".to_string(),
            promote,
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        match self.propose(command, remaining).await {
            Ok(state) => {
                info!(
                    version = state.version,
                    "left the cluster before shutting down"
                );
                true
            }
            Err(e) => {
                warn!(error = %e, "could not leave the cluster before shutting down; fault detection will remove this node");
                false
            }
        }
    }

    /// Whether this node is leaving: it must not join again, and its copies stay as they
    /// are (a state without this node would close or delete them).
    pub fn is_leaving(&self) -> bool {
        self.leaving.load(Ordering::Acquire)
    }

    /// Hands the cluster manager role to the most up-to-date other voter and waits (until
    /// `until`) for this node to stop leading.
    async fn hand_over_leadership(&self, until: Instant) {
        let Some(target) = self.most_caught_up_other_voter() else {
            return;
        };
        info!(target, "leaving: handing over the cluster manager role");
        if let Err(e) = self.raft().trigger().transfer_leader(target).await {
            warn!(error = %e, "leadership transfer failed");
            return;
        }
        while self.raft().is_leader() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn most_caught_up_other_voter(&self) -> Option<u64> {
        let metrics = self.raft().metrics();
        let metrics = metrics.borrow_watched();
        let local = self.local().raft_id();
        let matched = |id: &u64| {
            metrics
                .replication
                .as_ref()
                .and_then(|r| r.get(id).cloned().flatten())
        };
        metrics
            .membership_config
            .membership()
            .voter_ids()
            .filter(|id| *id != local)
            .max_by_key(matched)
    }
}
