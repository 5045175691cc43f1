//! The primary's replication tracker (OpenSearch's `ReplicationTracker`).
//!
//! Every copy of the shard has an allocation id. A copy is *tracked* once it receives the
//! primary's operations (a recovering copy is tracked before it is in sync), and *in sync*
//! once it holds every operation up to the global checkpoint. The global checkpoint is the
//! lowest local checkpoint over the in-sync copies: every operation at or below it is on every
//! in-sync copy, so it survives the loss of any of them. It never goes backwards.
//!
//! The cluster manager owns the in-sync set (it is in the cluster state, so a promoted replica
//! knows it); the tracker follows it with [`ReplicationTracker::apply_cluster_state`] and asks
//! for changes (a copy failed, a recovery finished) through the node.

use std::collections::{BTreeMap, BTreeSet};

use crate::leases::{peer_recovery_lease_id, RetentionLeases};
use crate::UNASSIGNED_SEQ_NO;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TrackerError {
    #[error("allocation id [{0}] is not tracked by the primary")]
    NotTracked(String),
    #[error("primary mode is off: this copy is not the primary")]
    NotPrimary,
}

/// What the primary knows about one copy.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CopyCheckpoints {
    local_checkpoint: i64,
    /// The global checkpoint this copy last acknowledged knowing.
    global_checkpoint: i64,
    in_sync: bool,
    /// Receives the primary's operations.
    tracked: bool,
}

impl CopyCheckpoints {
    fn unknown(in_sync: bool, tracked: bool) -> CopyCheckpoints {
        CopyCheckpoints {
            local_checkpoint: UNASSIGNED_SEQ_NO,
            global_checkpoint: UNASSIGNED_SEQ_NO,
            in_sync,
            tracked,
        }
    }
}

/// The answer to [`ReplicationTracker::mark_in_sync`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InSyncOutcome {
    /// The copy is in sync now.
    InSync,
    /// The copy is behind the global checkpoint; it becomes in sync when a later
    /// [`ReplicationTracker::update_local_checkpoint`] brings it there.
    Pending,
}

#[derive(Debug, Clone)]
pub struct ReplicationTracker {
    /// This copy's allocation id.
    allocation_id: String,
    primary_mode: bool,
    global_checkpoint: i64,
    copies: BTreeMap<String, CopyCheckpoints>,
    /// Copies waiting to reach the global checkpoint before they count as in sync.
    pending_in_sync: BTreeSet<String>,
    pub leases: RetentionLeases,
}

impl ReplicationTracker {
    /// A tracker for the copy `allocation_id` that has persisted `global_checkpoint`.
    pub fn new(allocation_id: &str, global_checkpoint: i64) -> ReplicationTracker {
        let mut copies = BTreeMap::new();
        copies.insert(
            allocation_id.to_string(),
            CopyCheckpoints::unknown(false, false),
        );
        ReplicationTracker {
            allocation_id: allocation_id.to_string(),
            primary_mode: false,
            global_checkpoint,
            copies,
            pending_in_sync: BTreeSet::new(),
            leases: RetentionLeases::default(),
        }
    }

    /// This copy became the primary (created as one, or promoted): it now tracks the others
    /// and computes the global checkpoint. Its own checkpoint is `local_checkpoint`.
    pub fn activate_primary_mode(&mut self, local_checkpoint: i64) {
        self.primary_mode = true;
        let own = self
            .copies
            .entry(self.allocation_id.clone())
            .or_insert_with(|| CopyCheckpoints::unknown(true, true));
        own.in_sync = true;
        own.tracked = true;
        own.local_checkpoint = own.local_checkpoint.max(local_checkpoint);
        self.recompute_global_checkpoint();
    }

    pub fn is_primary_mode(&self) -> bool {
        self.primary_mode
    }

    /// Follows the cluster manager's view: `in_sync` (from the index metadata) and the
    /// copies being initialized (from the routing table). Copies in neither are forgotten;
    /// new in-sync ids start with an unknown checkpoint, which holds the global checkpoint
    /// until they report.
    pub fn apply_cluster_state(
        &mut self,
        in_sync: &BTreeSet<String>,
        initializing: &BTreeSet<String>,
    ) {
        self.copies.retain(|id, _| {
            id == &self.allocation_id || in_sync.contains(id) || initializing.contains(id)
        });
        self.pending_in_sync
            .retain(|id| in_sync.contains(id) || initializing.contains(id));
        for id in in_sync {
            let copy = self
                .copies
                .entry(id.clone())
                .or_insert_with(|| CopyCheckpoints::unknown(true, true));
            copy.in_sync = true;
            copy.tracked = true;
        }
        for id in initializing {
            self.copies
                .entry(id.clone())
                .or_insert_with(|| CopyCheckpoints::unknown(false, false));
        }
        self.recompute_global_checkpoint();
    }

    /// A recovering copy starts receiving operations. Called by the primary before it
    /// snapshots the history to replay, so no operation falls between the two.
    pub fn initiate_tracking(&mut self, allocation_id: &str) -> Result<(), TrackerError> {
        self.require_primary()?;
        let copy = self
            .copies
            .get_mut(allocation_id)
            .ok_or_else(|| TrackerError::NotTracked(allocation_id.to_string()))?;
        copy.tracked = true;
        Ok(())
    }

    /// A recovery finished replaying up to `local_checkpoint`: the copy is in sync if it is
    /// at the global checkpoint, pending until it gets there otherwise.
    pub fn mark_in_sync(
        &mut self,
        allocation_id: &str,
        local_checkpoint: i64,
    ) -> Result<InSyncOutcome, TrackerError> {
        self.require_primary()?;
        let global = self.global_checkpoint;
        let copy = self
            .copies
            .get_mut(allocation_id)
            .filter(|c| c.tracked)
            .ok_or_else(|| TrackerError::NotTracked(allocation_id.to_string()))?;
        copy.local_checkpoint = copy.local_checkpoint.max(local_checkpoint);
        if copy.in_sync {
            return Ok(InSyncOutcome::InSync);
        }
        if copy.local_checkpoint >= global {
            copy.in_sync = true;
            self.pending_in_sync.remove(allocation_id);
            self.recompute_global_checkpoint();
            return Ok(InSyncOutcome::InSync);
        }
        self.pending_in_sync.insert(allocation_id.to_string());
        Ok(InSyncOutcome::Pending)
    }

    /// A copy acknowledged operations up to `local_checkpoint` (from a replication response
    /// or a checkpoint sync). Unknown copies are ignored: a copy failed meanwhile.
    pub fn update_local_checkpoint(&mut self, allocation_id: &str, local_checkpoint: i64) {
        let global = self.global_checkpoint;
        let Some(copy) = self.copies.get_mut(allocation_id) else {
            return;
        };
        copy.local_checkpoint = copy.local_checkpoint.max(local_checkpoint);
        if self.pending_in_sync.contains(allocation_id) && copy.local_checkpoint >= global {
            copy.in_sync = true;
            self.pending_in_sync.remove(allocation_id);
        }
        self.recompute_global_checkpoint();
    }

    /// A copy acknowledged knowing the global checkpoint `global_checkpoint`.
    pub fn update_copy_global_checkpoint(&mut self, allocation_id: &str, global_checkpoint: i64) {
        if let Some(copy) = self.copies.get_mut(allocation_id) {
            copy.global_checkpoint = copy.global_checkpoint.max(global_checkpoint);
        }
    }

    /// A copy failed: it receives nothing more and no longer holds the global checkpoint.
    /// (The cluster manager removes it from the in-sync set; this is the primary's own view
    /// until that state arrives.)
    pub fn remove_copy(&mut self, allocation_id: &str) {
        if allocation_id == self.allocation_id {
            return;
        }
        self.copies.remove(allocation_id);
        self.pending_in_sync.remove(allocation_id);
        self.recompute_global_checkpoint();
    }

    /// Where the primary sends each operation: every tracked copy but itself.
    pub fn replication_targets(&self) -> Vec<String> {
        self.copies
            .iter()
            .filter(|(id, c)| c.tracked && **id != self.allocation_id)
            .map(|(id, _)| id.clone())
            .collect()
    }

    pub fn in_sync_ids(&self) -> BTreeSet<String> {
        self.copies
            .iter()
            .filter(|(_, c)| c.in_sync)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Whether the copy is known here (from the cluster state or as tracked).
    pub fn knows(&self, allocation_id: &str) -> bool {
        self.copies.contains_key(allocation_id)
    }

    pub fn is_in_sync(&self, allocation_id: &str) -> bool {
        self.copies.get(allocation_id).is_some_and(|c| c.in_sync)
    }

    pub fn global_checkpoint(&self) -> i64 {
        self.global_checkpoint
    }

    /// A replica learns the global checkpoint from its primary (it never computes it).
    pub fn update_global_checkpoint_on_replica(&mut self, global_checkpoint: i64) {
        debug_assert!(
            !self.primary_mode,
            "a primary computes its global checkpoint"
        );
        self.global_checkpoint = self.global_checkpoint.max(global_checkpoint);
    }

    /// Copies whose global checkpoint lags the primary's (a periodic sync tells them).
    pub fn copies_needing_global_checkpoint_sync(&self) -> Vec<String> {
        self.copies
            .iter()
            .filter(|(id, c)| {
                **id != self.allocation_id
                    && c.tracked
                    && c.global_checkpoint < self.global_checkpoint
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Adds or renews the peer-recovery lease of every tracked copy's node (`node_of`:
    /// allocation id to node id) to retain the operations above the global checkpoint that
    /// copy acknowledged, as OpenSearch renews them on each sync. A lease never moves back.
    pub fn renew_peer_recovery_leases(
        &mut self,
        node_of: &BTreeMap<String, String>,
        now_millis: i64,
    ) {
        let wanted: Vec<(String, i64)> = self
            .copies
            .iter()
            .filter(|(id, c)| c.tracked && **id != self.allocation_id)
            .filter_map(|(id, c)| {
                let node = node_of.get(id)?;
                Some((
                    peer_recovery_lease_id(node),
                    (c.global_checkpoint + 1).max(0),
                ))
            })
            .collect();
        for (id, retaining) in wanted {
            self.hold_history(&id, retaining, now_millis);
        }
    }

    /// A new primary leases the history above its global checkpoint to every node that
    /// holds (or held, for copies waiting for their node to return) a copy, so those copies
    /// can come back by replaying operations (OpenSearch's
    /// `createMissingPeerRecoveryRetentionLeases`).
    pub fn add_missing_peer_recovery_leases<'a>(
        &mut self,
        node_ids: impl IntoIterator<Item = &'a String>,
        now_millis: i64,
    ) {
        let retaining = (self.global_checkpoint + 1).max(0);
        for node in node_ids {
            let id = peer_recovery_lease_id(node);
            if !self.leases.leases.contains_key(&id) {
                let _ = self.leases.add(&id, retaining, "peer recovery", now_millis);
            }
        }
    }

    /// Adds lease `id` retaining from `retaining_seq_no`, or renews it (never backwards).
    pub fn hold_history(&mut self, id: &str, retaining_seq_no: i64, now_millis: i64) {
        match self.leases.leases.get(id).map(|l| l.retaining_seq_no) {
            Some(current) => {
                let _ = self
                    .leases
                    .renew(id, retaining_seq_no.max(current), now_millis);
            }
            None => {
                let _ = self
                    .leases
                    .add(id, retaining_seq_no, "peer recovery", now_millis);
            }
        }
    }

    fn require_primary(&self) -> Result<(), TrackerError> {
        if self.primary_mode {
            Ok(())
        } else {
            Err(TrackerError::NotPrimary)
        }
    }

    /// min(local checkpoint) over in-sync copies; unchanged while any in-sync copy's
    /// checkpoint is unknown, and never lower than before.
    fn recompute_global_checkpoint(&mut self) {
        if !self.primary_mode {
            return;
        }
        let mut min = i64::MAX;
        for copy in self.copies.values().filter(|c| c.in_sync) {
            if copy.local_checkpoint == UNASSIGNED_SEQ_NO {
                return;
            }
            min = min.min(copy.local_checkpoint);
        }
        if min != i64::MAX && min > self.global_checkpoint {
            self.global_checkpoint = min;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NO_OPS_PERFORMED;

    fn ids(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// A primary `p` with in-sync replicas `r1`, `r2`, all at `checkpoint`.
    fn primary_with_replicas(checkpoint: i64) -> ReplicationTracker {
        let mut t = ReplicationTracker::new("p", NO_OPS_PERFORMED);
        t.apply_cluster_state(&ids(&["p", "r1", "r2"]), &ids(&[]));
        t.activate_primary_mode(checkpoint);
        t.update_local_checkpoint("r1", checkpoint);
        t.update_local_checkpoint("r2", checkpoint);
        t
    }

    #[test]
    fn the_global_checkpoint_is_the_minimum_over_in_sync_copies() {
        let mut t = primary_with_replicas(5);
        assert_eq!(t.global_checkpoint(), 5);
        t.update_local_checkpoint("p", 9);
        t.update_local_checkpoint("r1", 8);
        assert_eq!(t.global_checkpoint(), 5, "r2 still at 5");
        t.update_local_checkpoint("r2", 7);
        assert_eq!(t.global_checkpoint(), 7);
    }

    #[test]
    fn an_in_sync_copy_that_has_not_reported_holds_the_global_checkpoint() {
        let mut t = ReplicationTracker::new("p", NO_OPS_PERFORMED);
        t.apply_cluster_state(&ids(&["p", "r1"]), &ids(&[]));
        t.activate_primary_mode(10);
        assert_eq!(t.global_checkpoint(), NO_OPS_PERFORMED);
        t.update_local_checkpoint("r1", 4);
        assert_eq!(t.global_checkpoint(), 4);
    }

    #[test]
    fn the_global_checkpoint_never_goes_backwards() {
        let mut t = primary_with_replicas(5);
        // A new in-sync copy joins from the cluster state and reports a lower checkpoint.
        t.apply_cluster_state(&ids(&["p", "r1", "r2", "r3"]), &ids(&[]));
        t.update_local_checkpoint("r3", 2);
        assert_eq!(t.global_checkpoint(), 5);
        // Local checkpoints do not go backwards either.
        t.update_local_checkpoint("r1", 1);
        assert_eq!(t.global_checkpoint(), 5);
        for copy in ["r3", "p", "r2", "r1"] {
            t.update_local_checkpoint(copy, 6);
        }
        assert_eq!(t.global_checkpoint(), 6);
    }

    #[test]
    fn a_failed_copy_stops_holding_the_global_checkpoint_and_receiving_operations() {
        let mut t = primary_with_replicas(3);
        t.update_local_checkpoint("p", 10);
        t.update_local_checkpoint("r1", 10);
        assert_eq!(t.global_checkpoint(), 3);
        t.remove_copy("r2");
        assert_eq!(t.global_checkpoint(), 10);
        assert_eq!(t.replication_targets(), vec!["r1".to_string()]);
        t.remove_copy("p");
        assert!(t.is_in_sync("p"), "the primary never removes itself");
    }

    #[test]
    fn a_recovering_copy_receives_operations_before_it_counts_as_in_sync() {
        let mut t = primary_with_replicas(20);
        t.apply_cluster_state(&ids(&["p", "r1", "r2"]), &ids(&["new"]));
        assert!(!t.replication_targets().contains(&"new".to_string()));
        t.initiate_tracking("new").unwrap();
        assert!(t.replication_targets().contains(&"new".to_string()));
        // Its low checkpoint does not hold the global checkpoint back while initializing.
        t.update_local_checkpoint("new", 3);
        assert_eq!(t.global_checkpoint(), 20);
        assert!(!t.is_in_sync("new"));
    }

    #[test]
    fn mark_in_sync_waits_until_the_copy_reaches_the_global_checkpoint() {
        let mut t = primary_with_replicas(20);
        t.apply_cluster_state(&ids(&["p", "r1", "r2"]), &ids(&["new"]));
        t.initiate_tracking("new").unwrap();
        assert_eq!(t.mark_in_sync("new", 15).unwrap(), InSyncOutcome::Pending);
        assert!(!t.is_in_sync("new"));
        t.update_local_checkpoint("new", 19);
        assert!(!t.is_in_sync("new"));
        t.update_local_checkpoint("new", 20);
        assert!(t.is_in_sync("new"));
        assert_eq!(t.mark_in_sync("new", 20).unwrap(), InSyncOutcome::InSync);
    }

    #[test]
    fn only_tracked_copies_can_be_marked_in_sync_and_only_by_a_primary() {
        let mut t = primary_with_replicas(0);
        t.apply_cluster_state(&ids(&["p", "r1", "r2"]), &ids(&["new"]));
        assert_eq!(
            t.mark_in_sync("new", 0),
            Err(TrackerError::NotTracked("new".into()))
        );
        assert!(t.initiate_tracking("ghost").is_err());
        let mut replica = ReplicationTracker::new("r1", 0);
        assert_eq!(
            replica.initiate_tracking("x"),
            Err(TrackerError::NotPrimary)
        );
    }

    #[test]
    fn copies_the_cluster_manager_forgot_are_dropped() {
        let mut t = primary_with_replicas(4);
        t.apply_cluster_state(&ids(&["p", "r1"]), &ids(&[]));
        assert_eq!(t.in_sync_ids(), ids(&["p", "r1"]));
        assert_eq!(t.replication_targets(), vec!["r1".to_string()]);
    }

    #[test]
    fn a_replica_only_learns_the_global_checkpoint_and_it_only_moves_up() {
        let mut t = ReplicationTracker::new("r1", 3);
        t.update_global_checkpoint_on_replica(7);
        t.update_global_checkpoint_on_replica(5);
        assert_eq!(t.global_checkpoint(), 7);
    }

    #[test]
    fn copies_behind_on_the_global_checkpoint_need_a_sync() {
        let mut t = primary_with_replicas(6);
        t.update_copy_global_checkpoint("r1", 6);
        assert_eq!(
            t.copies_needing_global_checkpoint_sync(),
            vec!["r2".to_string()]
        );
    }

    #[test]
    fn peer_recovery_leases_follow_each_copy_by_node_and_only_move_forward() {
        let nodes: BTreeMap<String, String> = [("r1", "n1"), ("r2", "n2"), ("p", "n0")]
            .into_iter()
            .map(|(a, n)| (a.to_string(), n.to_string()))
            .collect();
        let mut t = primary_with_replicas(9);
        t.update_copy_global_checkpoint("r1", 9);
        t.renew_peer_recovery_leases(&nodes, 100);
        assert!(t.leases.retains_from("peer_recovery/n1", 10));
        assert!(!t.leases.retains_from("peer_recovery/n1", 9));
        // r2 has acknowledged no global checkpoint: its node keeps the whole history.
        assert!(t.leases.retains_from("peer_recovery/n2", 0));
        // The primary needs no lease of its own.
        assert!(!t.leases.leases.contains_key("peer_recovery/n0"));
        t.update_copy_global_checkpoint("r1", 30);
        t.update_copy_global_checkpoint("r2", 30);
        t.renew_peer_recovery_leases(&nodes, 200);
        assert_eq!(t.leases.leases["peer_recovery/n1"].retaining_seq_no, 31);
        assert_eq!(t.leases.leases["peer_recovery/n1"].timestamp_millis, 200);
        // Every copy holds everything up to 30: history below 31 may be discarded.
        assert_eq!(t.leases.min_retained_seq_no(), Some(31));
        // A copy that returns to n1 under a new allocation id renews the same lease.
        t.hold_history("peer_recovery/n1", 12, 300);
        assert_eq!(t.leases.leases["peer_recovery/n1"].retaining_seq_no, 31);
    }

    #[test]
    fn a_new_primary_leases_its_history_to_the_nodes_of_every_copy() {
        let mut t = primary_with_replicas(9);
        t.hold_history("peer_recovery/n1", 4, 0);
        let nodes = ["n1".to_string(), "gone".to_string()];
        t.add_missing_peer_recovery_leases(&nodes, 50);
        // An existing lease is kept as it is; the missing one starts above the checkpoint.
        assert_eq!(t.leases.leases["peer_recovery/n1"].retaining_seq_no, 4);
        assert_eq!(t.leases.leases["peer_recovery/gone"].retaining_seq_no, 10);
        let keep = ["peer_recovery/n1".to_string()].into_iter().collect();
        assert_eq!(
            t.leases.expire_except(10_000, 1_000, &keep),
            vec!["peer_recovery/gone".to_string()]
        );
    }
}
