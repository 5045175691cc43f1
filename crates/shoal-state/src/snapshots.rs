//! What the cluster state knows of snapshots: the registered repositories, the snapshot
//! operation running on each (at most one per repository, so one writer updates a
//! repository's generation file at a time), and where a restored index's primaries come from.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::apply::StateError;
use crate::metadata::IndexMetadata;
use crate::routing::{RecoverySource, UnassignedInfo, UnassignedReason};
use crate::ClusterState;

/// A repository registered with `PUT _snapshot/{name}`: its type and flat settings, as given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepositoryMetadata {
    #[serde(rename = "type")]
    pub kind: String,
    pub settings: BTreeMap<String, String>,
}

/// Where the primary of a restored index takes its files from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecoverySource {
    pub repository: String,
    pub snapshot: String,
    pub snapshot_uuid: String,
    /// The index's name inside the snapshot (before any rename).
    pub index: String,
}

/// A snapshot being created or deleted; its coordinator (the node that took the request)
/// drives it and removes it when done. A coordinator that leaves the cluster takes its
/// entries with it: the repository never names an unfinished snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotInProgress {
    pub repository: String,
    pub snapshot: String,
    pub uuid: String,
    pub operation: SnapshotOperation,
    pub coordinator: String,
    pub start_millis: i64,
    pub indices: Vec<String>,
    pub shards: usize,
    /// A delete asked this snapshot to stop: its coordinator and primaries give up, and it
    /// is recorded nowhere.
    #[serde(default)]
    pub aborted: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotOperation {
    Create,
    Delete,
}

impl ClusterState {
    pub(crate) fn put_repository(&mut self, name: &str, repository: &RepositoryMetadata) {
        self.metadata
            .repositories
            .insert(name.to_string(), repository.clone());
    }

    pub(crate) fn delete_repositories(&mut self, names: &[String]) -> Result<(), StateError> {
        if let Some(busy) = self
            .snapshots
            .iter()
            .find(|s| names.contains(&s.repository))
        {
            return Err(StateError::new(
                400,
                "repository_exception",
                format!(
                    "[{}] trying to modify or unregister repository that is currently used (snapshot [{}] is running)",
                    busy.repository, busy.snapshot
                ),
            ));
        }
        for name in names {
            self.metadata.repositories.remove(name);
        }
        Ok(())
    }

    /// Records a snapshot operation; refused while another runs on the same repository.
    pub(crate) fn begin_snapshot(&mut self, entry: &SnapshotInProgress) -> Result<(), StateError> {
        if !self.metadata.repositories.contains_key(&entry.repository) {
            return Err(StateError::new(
                404,
                "repository_missing_exception",
                format!("[{}] missing", entry.repository),
            ));
        }
        if let Some(running) = self
            .snapshots
            .iter()
            .find(|s| s.repository == entry.repository)
        {
            return Err(StateError::new(
                503,
                "concurrent_snapshot_execution_exception",
                format!(
                    "[{}:{}] cannot start: snapshot [{}] is being {} in this repository; retry when it is done",
                    entry.repository,
                    entry.snapshot,
                    running.snapshot,
                    match running.operation {
                        SnapshotOperation::Create => "created",
                        SnapshotOperation::Delete => "deleted",
                    }
                ),
            ));
        }
        self.snapshots.push(entry.clone());
        Ok(())
    }

    /// A delete aborts a running snapshot (nothing when it ended meanwhile).
    pub(crate) fn abort_snapshot(&mut self, repository: &str, uuid: &str) {
        for entry in self.snapshots.iter_mut() {
            if entry.repository == repository
                && entry.uuid == uuid
                && entry.operation == SnapshotOperation::Create
            {
                entry.aborted = true;
            }
        }
    }

    pub(crate) fn end_snapshot(&mut self, repository: &str, uuid: &str) {
        self.snapshots
            .retain(|s| !(s.repository == repository && s.uuid == uuid));
    }

    /// A coordinator left: the snapshots it drove stop (their files in the repository are
    /// garbage the next delete collects).
    pub(crate) fn drop_snapshots_of(&mut self, node_id: &str) {
        self.snapshots.retain(|s| s.coordinator != node_id);
    }

    /// Creates the indices a restore names; their primaries recover from the snapshot.
    pub(crate) fn restore_snapshot(
        &mut self,
        indices: &[IndexMetadata],
        replacing: &std::collections::BTreeMap<String, String>,
        now: i64,
    ) -> Result<(), StateError> {
        for meta in indices {
            if let Some(existing) = self.metadata.indices.get(&meta.name) {
                let replaceable = existing.state == crate::IndexState::Close
                    && replacing.get(&meta.name) == Some(&existing.uuid)
                    && existing.number_of_shards() == meta.number_of_shards();
                if replaceable {
                    continue;
                }
                return Err(StateError::new(
                    400,
                    "snapshot_restore_exception",
                    format!(
                        "cannot restore index [{}] because an index with same name already exists in the cluster ([{}]). Either delete the existing index or restore the index under a different name by providing a rename pattern and replacement name",
                        meta.name, existing.uuid
                    ),
                ));
            }
            if meta.restored_from.is_none() {
                return Err(StateError::new(
                    400,
                    "snapshot_restore_exception",
                    format!("index [{}] names no snapshot to restore from", meta.name),
                ));
            }
        }
        let info = UnassignedInfo::new(UnassignedReason::NewIndexRestored, now);
        for name in replacing.keys() {
            self.metadata.indices.remove(name);
            self.routing.remove(name);
        }
        for meta in indices {
            let mut meta = meta.clone();
            meta.normalize();
            let table = crate::apply::unassigned_table(&meta, &info, RecoverySource::Snapshot);
            self.routing.insert(meta.name.clone(), table);
            self.metadata.indices.insert(meta.name.clone(), meta);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Command, Proposal};

    fn apply(state: &mut ClusterState, command: Command) -> Result<(), StateError> {
        state.apply(&Proposal {
            now_millis: 1,
            command,
        })
    }

    fn entry(snapshot: &str, coordinator: &str) -> SnapshotInProgress {
        SnapshotInProgress {
            repository: "r".into(),
            snapshot: snapshot.into(),
            uuid: format!("{snapshot}-uuid"),
            operation: SnapshotOperation::Create,
            coordinator: coordinator.into(),
            start_millis: 1,
            indices: vec!["logs".into()],
            shards: 1,
            aborted: false,
        }
    }

    fn with_repository() -> ClusterState {
        let mut state = ClusterState::new("c");
        let repository = RepositoryMetadata {
            kind: "fs".into(),
            settings: [("location".to_string(), "r".to_string())].into(),
        };
        apply(
            &mut state,
            Command::PutRepository {
                name: "r".into(),
                repository,
            },
        )
        .unwrap();
        state
    }

    #[test]
    fn one_snapshot_operation_runs_per_repository_and_its_end_frees_the_repository() {
        let mut state = with_repository();
        apply(&mut state, Command::SnapshotBegin(entry("a", "n1"))).unwrap();
        let busy = apply(&mut state, Command::SnapshotBegin(entry("b", "n2"))).unwrap_err();
        assert_eq!(busy.error_type, "concurrent_snapshot_execution_exception");
        assert_eq!(busy.status, 503);
        let in_use = apply(
            &mut state,
            Command::DeleteRepositories {
                names: vec!["r".into()],
            },
        );
        assert_eq!(in_use.unwrap_err().error_type, "repository_exception");
        let end = Command::SnapshotEnd {
            repository: "r".into(),
            uuid: "a-uuid".into(),
        };
        apply(&mut state, end).unwrap();
        apply(&mut state, Command::SnapshotBegin(entry("b", "n2"))).unwrap();
        assert_eq!(state.snapshots.len(), 1);
    }

    #[test]
    fn a_coordinator_that_leaves_takes_its_running_snapshots_with_it() {
        let mut state = with_repository();
        let node = crate::DiscoveryNode {
            id: "n1".into(),
            ephemeral_id: "e1".into(),
            name: "n1".into(),
            transport_address: "127.0.0.1:9300".into(),
            http_address: "127.0.0.1:9200".into(),
            host: "127.0.0.1".into(),
            ip: "127.0.0.1".into(),
            roles: Default::default(),
            attributes: Default::default(),
            version: "2.18.0".into(),
        };
        state.nodes.insert("n1".into(), node);
        apply(&mut state, Command::SnapshotBegin(entry("a", "n1"))).unwrap();
        let left = Command::NodeLeft {
            node_id: "n1".into(),
            reason: "killed".into(),
            promote: vec![],
        };
        apply(&mut state, left).unwrap();
        assert!(state.snapshots.is_empty());
        apply(&mut state, Command::SnapshotBegin(entry("b", "n2"))).unwrap();
    }

    #[test]
    fn a_snapshot_in_an_unregistered_repository_is_refused() {
        let mut state = ClusterState::new("c");
        let missing = apply(&mut state, Command::SnapshotBegin(entry("a", "n1"))).unwrap_err();
        assert_eq!(missing.status, 404);
    }

    #[test]
    fn a_primary_that_fails_to_restore_from_a_snapshot_is_restored_again_never_allocated_empty() {
        let mut state = ClusterState::new("c");
        let mut meta: IndexMetadata = serde_json::from_value(serde_json::json!({
            "name": "logs", "uuid": "logs-uuid", "state": "open", "mappings": {},
            "settings": {"index.number_of_shards": "1", "index.number_of_replicas": "0"},
            "primary_terms": [1]
        }))
        .unwrap();
        meta.restored_from = Some(SnapshotRecoverySource {
            repository: "r".into(),
            snapshot: "s".into(),
            snapshot_uuid: "s-uuid".into(),
            index: "logs".into(),
        });
        let restore = Command::RestoreSnapshot {
            indices: vec![meta],
            replacing: BTreeMap::new(),
        };
        apply(&mut state, restore).unwrap();
        let primary = &mut state.routing.get_mut("logs").unwrap().shards[0][0];
        primary.state = crate::routing::ShardState::Initializing;
        primary.node = Some("n2".into());
        primary.allocation_id = Some("restoring".into());
        // Its node left, or the download failed, before the primary started.
        let failed = Command::ShardFailed {
            index: "logs".into(),
            shard: 0,
            allocation_id: "restoring".into(),
            reason: "the snapshot's files could not be read".into(),
            primary_term: None,
        };
        apply(&mut state, failed).unwrap();
        let primary = &state.routing["logs"].shards[0][0];
        assert!(primary.primary && primary.state == crate::routing::ShardState::Unassigned);
        assert_eq!(primary.recovery_source, Some(RecoverySource::Snapshot));
    }
}
