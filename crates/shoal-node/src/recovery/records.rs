//! This node's recovery records as `_recovery` and `_cat/recovery` ask for them: a running
//! peer recovery's record (held by the [`RecoveryService`] until its copy adopts it),
//! the records of the copies and indices held here, and those of every other node.

use std::collections::BTreeMap;
use std::time::Duration;

use super::progress::{RecoveryListAction, RecoveryProgress, RecoveryRecord};
use super::RecoveryService;
use crate::error::ApiResult;

impl RecoveryService {
    /// Starts the record of a peer recovery into this node (replacing the one of an earlier
    /// attempt of the same copy); the copy adopts it once it opens.
    pub(crate) fn record_recovery(&self, record: RecoveryRecord) -> RecoveryProgress {
        let progress = RecoveryProgress::new(record);
        let allocation_id = progress.allocation_id();
        self.targets.lock().insert(allocation_id, progress.clone());
        progress
    }

    /// Updates the record of a running peer recovery of that copy.
    pub(crate) fn update_recovery(
        &self,
        index: &str,
        shard: usize,
        allocation_id: &str,
        f: impl FnOnce(&mut RecoveryRecord),
    ) {
        let progress = self.targets.lock().get(allocation_id).cloned();
        if let Some(progress) = progress {
            progress.update(|r| {
                if r.index == index && r.shard == shard {
                    f(r)
                }
            });
        }
    }

    /// A peer recovery ended (done, failed or cancelled): its record stays with the copy if it
    /// opened with it, else with the index.
    pub(crate) fn end_recovery_record(
        &self,
        service: &crate::index_service::IndexService,
        shard: usize,
        allocation_id: &str,
    ) {
        let Some(progress) = self.targets.lock().remove(allocation_id) else {
            return;
        };
        let adopted = service
            .copy(shard)
            .ok()
            .and_then(|copy| copy.recovery())
            .is_some_and(|held| held.same(&progress));
        if !adopted {
            service.keep_recovery(shard, progress);
        }
    }

    /// This node's records for these indices, the latest per shard copy held here.
    fn local_recoveries(&self, indices: &[String]) -> Vec<RecoveryRecord> {
        let state = self.core.cluster_state();
        // By (index, shard, allocation id); a running recovery's record replaces the copy's
        // (an earlier attempt), which replaces a retired one.
        let mut records: BTreeMap<(String, usize, String), RecoveryRecord> = BTreeMap::new();
        let mut keep = |record: RecoveryRecord| {
            let key = (
                record.index.clone(),
                record.shard,
                record.allocation_id.clone(),
            );
            records.insert(key, record);
        };
        for service in indices.iter().filter_map(|name| self.core.index(name)) {
            service.recovery_records().into_iter().for_each(&mut keep);
        }
        let running: Vec<RecoveryRecord> = self
            .targets
            .lock()
            .values()
            .map(RecoveryProgress::snapshot)
            .collect();
        running
            .into_iter()
            .filter(|r| indices.contains(&r.index))
            .for_each(&mut keep);
        let mut latest: BTreeMap<(String, usize), RecoveryRecord> = BTreeMap::new();
        for record in records.into_values() {
            // Only copies still assigned here (a failed or moved copy's record is history).
            let assigned = state
                .copies(&record.index, record.shard as u32)
                .iter()
                .any(|c| {
                    c.allocation_id.as_deref() == Some(record.allocation_id.as_str())
                        && c.node.as_deref() == Some(self.core.node_id.as_str())
                });
            if assigned {
                latest.insert((record.index.clone(), record.shard), record);
            }
        }
        latest.into_values().collect()
    }

    /// The recovery records of these indices from every node.
    pub fn records(&self, indices: &[String]) -> Vec<RecoveryRecord> {
        let asked = self.core.ask::<RecoveryListAction>(
            self.core.other_node_addresses(),
            &indices.to_vec(),
            Duration::from_secs(10),
            "recovery records",
        );
        let mut records = self.local_recoveries(indices);
        records.extend(self.core.answers(asked).into_iter().flatten());
        records
            .sort_by(|a, b| (&a.index, a.shard, !a.primary).cmp(&(&b.index, b.shard, !b.primary)));
        records
    }

    pub(crate) fn handle_recovery_list(
        &self,
        indices: Vec<String>,
    ) -> ApiResult<Vec<RecoveryRecord>> {
        Ok(self.local_recoveries(&indices))
    }

    /// OpenSearch's `RecoveryStats` of an index's copies on this node, or (`shard`) of one of
    /// them: peer recoveries running from and into them, and how long they waited for the
    /// recovery rate limit (running and finished recoveries, each counted once).
    pub fn recovery_stats(
        &self,
        service: &crate::index_service::IndexService,
        shard: Option<usize>,
    ) -> shoal_engine::RecoveryStats {
        let index = service.name();
        let ours = |r: &RecoveryRecord| r.index == index && shard.is_none_or(|s| r.shard == s);
        let kept: Vec<RecoveryRecord> = service
            .recovery_records()
            .into_iter()
            .filter(|r| ours(r))
            .collect();
        let running: Vec<RecoveryRecord> = self
            .targets
            .lock()
            .values()
            .map(RecoveryProgress::snapshot)
            .filter(|r| ours(r))
            .collect();
        // A running recovery's record is also its copy's once the copy opened: count it once.
        let not_kept = running
            .iter()
            .filter(|r| !kept.iter().any(|k| k.allocation_id == r.allocation_id));
        let throttled = kept.iter().chain(not_kept).map(|r| r.throttle_millis).sum();
        shoal_engine::RecoveryStats {
            current_as_source: self.outgoing_for(&index, shard),
            current_as_target: running.len() as u64,
            throttle_time_in_millis: throttled,
        }
    }
}
