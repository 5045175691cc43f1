//! The remote store's commands: `_remotestore/_restore` (`Command::RestoreRemoteStore`) and a
//! fresh cluster taking back the metadata an earlier one uploaded
//! (`Command::RestoreClusterMetadata`).

use crate::apply::{unassigned_copies, unassigned_table, StateError};
use crate::routing::{IndexRoutingTable, RecoverySource, UnassignedInfo, UnassignedReason};
use crate::ClusterState;

impl ClusterState {
    /// Puts the shards to restore back to unassigned, the primary to be restored from the
    /// remote store (its term bumped when allocated) and no copy in sync until it starts.
    pub(crate) fn restore_remote_store(
        &mut self,
        indices: &[String],
        all_shards: bool,
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
            self.reset_restored_shards(name, &restored);
        }
        Ok(())
    }

    /// The restored shards of `index` have no copy in sync.
    fn reset_restored_shards(&mut self, index: &str, shards: &[usize]) {
        let Some(meta) = self.metadata.indices.get_mut(index) else {
            return;
        };
        for &shard in shards {
            meta.in_sync_allocations[shard].clear();
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

    fn restore() -> Command {
        Command::RestoreRemoteStore {
            indices: vec!["i".into()],
            all_shards: false,
        }
    }

    #[test]
    fn a_primary_that_fails_to_restore_is_restored_again_never_allocated_empty() {
        let mut state = cluster(1);
        apply(&mut state, restore());
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
