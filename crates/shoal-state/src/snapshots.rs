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
        now: i64,
    ) -> Result<(), StateError> {
        for meta in indices {
            if let Some(existing) = self.metadata.indices.get(&meta.name) {
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
