//! The remote store's commands: `_remotestore/_restore` (`Command::RestoreRemoteStore`) and a
//! fresh cluster taking back the metadata an earlier one uploaded
//! (`Command::RestoreClusterMetadata`).

use std::collections::BTreeMap;

use crate::apply::{unassigned_copies, unassigned_table, StateError};
use crate::routing::{IndexRoutingTable, RecoverySource, UnassignedInfo, UnassignedReason};
use crate::ClusterState;

impl ClusterState {
    /// Puts the shards to restore back to unassigned, the primary to be restored from the
    /// remote store and no copy in sync until it starts. The primary's term is bumped when it
    /// is allocated, from at least the highest term its repository holds (`stored_terms`), so
    /// it writes above all of that history.
    pub(crate) fn restore_remote_store(
        &mut self,
        indices: &[String],
        all_shards: bool,
        stored_terms: &BTreeMap<String, Vec<u64>>,
        now: i64,
    ) -> Result<(), StateError> {
        for name in indices {
            let Some(meta) = self.metadata.indices.get_mut(name) else {
                return Err(StateError::new(
                    404,
                    "index_not_found_exception",
                    format!("no such index [{name}]"),
                ));
            };
            meta.normalize();
            if all_shards {
                meta.state = crate::metadata::IndexState::Open;
            }
            let meta = meta.clone();
            let shards = meta.number_of_shards() as usize;
            let info = UnassignedInfo::new(UnassignedReason::ExistingIndexRestored, now);
            let table = self
                .routing
                .entry(name.clone())
                .or_insert_with(|| IndexRoutingTable {
                    shards: vec![Vec::new(); shards],
                });
            table.shards.resize(shards, Vec::new());
            let mut restored = Vec::new();
            for (shard, copies) in table.shards.iter_mut().enumerate() {
                let active_primary = copies.iter().any(|c| c.primary && c.is_active());
                if active_primary && !all_shards {
                    continue;
                }
                *copies =
                    unassigned_copies(&meta, shard as u32, &info, RecoverySource::RemoteStore);
                restored.push(shard);
            }
            let stored = stored_terms
                .get(name)
                .map(Vec::as_slice)
                .unwrap_or_default();
            self.reset_restored_shards(name, &restored, stored);
        }
        Ok(())
    }

    /// The restored shards of `index` have no copy in sync, and a primary term at least the
    /// highest their repository holds (`stored`, by shard).
    fn reset_restored_shards(&mut self, index: &str, shards: &[usize], stored: &[u64]) {
        let Some(meta) = self.metadata.indices.get_mut(index) else {
            return;
        };
        for &shard in shards {
            meta.in_sync_allocations[shard].clear();
            let term = &mut meta.primary_terms[shard];
            *term = (*term).max(stored.get(shard).copied().unwrap_or_default());
        }
    }

    /// A fresh cluster takes the indices and persistent settings an earlier cluster of its
    /// name uploaded; a cluster that already has indices keeps its own. Either way the check
    /// is recorded, so it happens once in a cluster's life.
    pub(crate) fn restore_cluster_metadata(
        &mut self,
        metadata: Option<&crate::metadata::RestorableMetadata>,
        source: Option<&str>,
        now: i64,
    ) {
        if self
            .metadata
            .customs
            .contains_key(crate::metadata::REMOTE_STATE_CHECKED)
        {
            return;
        }
        let restore = metadata.filter(|_| self.metadata.indices.is_empty());
        self.metadata.customs.insert(
            crate::metadata::REMOTE_STATE_CHECKED.to_string(),
            serde_json::json!({
                "restored_from": restore.and(source),
                "restored_indices": restore.map_or(0, |m| m.indices.len()),
            }),
        );
        let Some(restored) = restore else {
            return;
        };
        for (key, value) in &restored.persistent_settings {
            self.metadata
                .persistent_settings
                .entry(key.clone())
                .or_insert_with(|| value.clone());
        }
        let info = UnassignedInfo::new(UnassignedReason::ClusterRecovered, now);
        for meta in &restored.indices {
            let mut meta = meta.clone();
            meta.normalize();
            // Red until restored: no node holds these copies any more, and the primary waits
            // for `_remotestore/_restore` (or for a node with its data to come back).
            let table = unassigned_table(&meta, &info, RecoverySource::ExistingStore);
            self.routing.insert(meta.name.clone(), table);
            self.metadata.indices.insert(meta.name.clone(), meta);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::command::{Command, Proposal};
    use crate::routing::ShardState;
    use crate::ClusterState;

    /// A cluster with index `i` of two shards, no replicas: shard 1's primary started on `n1`
    /// (term 1), shard 0's unassigned, its term `shard0_term`.
    fn cluster(shard0_term: u64) -> ClusterState {
        let mut state = ClusterState::new("test");
        let meta = serde_json::from_value(json!({
            "name": "i", "uuid": "i-uuid", "state": "open", "mappings": {},
            "settings": {"index.number_of_shards": "2", "index.number_of_replicas": "0"},
            "primary_terms": [shard0_term, 1]
        }))
        .expect("index metadata");
        apply(&mut state, Command::PutIndex { meta, create: true });
        let primary = &mut state.routing.get_mut("i").expect("routing").shards[1][0];
        primary.state = ShardState::Started;
        primary.node = Some("n1".into());
        primary.allocation_id = Some("a1".into());
        state
    }

    fn apply(state: &mut ClusterState, command: Command) {
        let proposal = Proposal {
            now_millis: 1,
            command,
        };
        state.apply(&proposal).expect("applied");
    }

    fn restore(stored: &[u64]) -> Command {
        Command::RestoreRemoteStore {
            indices: vec!["i".into()],
            all_shards: false,
            stored_terms: [("i".to_string(), stored.to_vec())].into(),
        }
    }

    fn terms(state: &ClusterState) -> Vec<u64> {
        state
            .metadata
            .indices
            .get("i")
            .expect("i")
            .primary_terms
            .clone()
    }

    #[test]
    fn a_restored_shard_starts_from_the_highest_term_its_repository_holds() {
        let mut state = cluster(1);
        // The repository holds history of term 3 on shard 0 (and 7 on shard 1, whose primary
        // is active and not restored: its term is the cluster's own).
        apply(&mut state, restore(&[3, 7]));
        assert_eq!(terms(&state), [3, 1]);
        // The allocation bump then gives the restored primary term 4, above the history.
        let primary = &state.routing["i"].shards[0][0];
        assert_eq!(primary.state, ShardState::Unassigned);
        assert_eq!(
            primary.recovery_source,
            Some(crate::RecoverySource::RemoteStore)
        );
    }

    #[test]
    fn a_restore_never_lowers_a_term() {
        let mut state = cluster(5);
        apply(&mut state, restore(&[3]));
        assert_eq!(terms(&state), [5, 1]);
        apply(&mut state, restore(&[]));
        assert_eq!(terms(&state), [5, 1]);
    }

    #[test]
    fn a_restore_command_persisted_before_stored_terms_still_reads_and_writes_the_same() {
        let old = json!({"now_millis": 7, "command":
            {"restore_remote_store": {"indices": ["i"], "all_shards": true}}});
        let proposal: Proposal = serde_json::from_value(old.clone()).expect("old command reads");
        let Command::RestoreRemoteStore { stored_terms, .. } = &proposal.command else {
            panic!("{proposal:?}");
        };
        assert!(stored_terms.is_empty());
        assert_eq!(serde_json::to_value(&proposal).expect("written"), old);
        let mut state = cluster(2);
        state.apply(&proposal).expect("applied");
        assert_eq!(terms(&state), [2, 1]);
    }

    #[test]
    fn a_primary_that_fails_to_restore_is_restored_again_never_allocated_empty() {
        let mut state = cluster(1);
        apply(&mut state, restore(&[3]));
        let primary = &mut state.routing.get_mut("i").expect("routing").shards[0][0];
        primary.state = ShardState::Initializing;
        primary.node = Some("n2".into());
        primary.allocation_id = Some("restoring".into());
        apply(
            &mut state,
            Command::ShardFailed {
                index: "i".into(),
                shard: 0,
                allocation_id: "restoring".into(),
                reason: "the remote store holds history of primary term [5]".into(),
                primary_term: None,
            },
        );
        let primary = &state.routing["i"].shards[0][0];
        assert!(primary.primary && primary.state == ShardState::Unassigned);
        assert_eq!(
            primary.recovery_source,
            Some(crate::RecoverySource::RemoteStore)
        );
        let info = primary.unassigned.as_ref().expect("unassigned info");
        assert_eq!(info.failed_allocations, 1);
    }
}
