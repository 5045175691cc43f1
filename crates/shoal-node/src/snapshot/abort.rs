//! `DELETE _snapshot/{repo}/{snap}` of a snapshot still running aborts it, as in OpenSearch:
//! `Command::SnapshotAbort` marks its entry, its primaries stop between files, its coordinator
//! publishes nothing and ends it; the delete then runs, and collects the blobs the aborted
//! snapshot uploaded (no snapshot names them).

use std::time::Duration;

use shoal_state::{ClusterState, Command, SnapshotInProgress, SnapshotOperation};

use super::read::part_selects;
use super::SnapshotService;
use crate::error::{ApiError, ApiResult};

/// How long a delete waits for the snapshots it aborted to stop.
const ABORT_WAIT: Duration = Duration::from_secs(60);

impl SnapshotService {
    /// The running snapshot `uuid` of `repository`, if a delete aborted it.
    pub(crate) fn aborted_entry(&self, repository: &str, uuid: &str) -> Option<SnapshotInProgress> {
        self.core
            .cluster_state()
            .snapshots
            .iter()
            .find(|s| s.repository == repository && s.uuid == uuid && s.aborted)
            .cloned()
    }

    /// `Err` (what an aborted snapshot answers) once a delete aborted snapshot `uuid`.
    pub(crate) fn check_not_aborted(&self, repository: &str, uuid: &str) -> ApiResult<()> {
        match self.aborted_entry(repository, uuid) {
            Some(entry) => Err(aborted(&entry)),
            None => Ok(()),
        }
    }

    /// Aborts the running snapshots of `repository` that `names` (a comma list with
    /// wildcards, or `_all`) selects and waits until they stopped; returns their names.
    pub(crate) fn abort_running(&self, repository: &str, names: &str) -> ApiResult<Vec<String>> {
        let running = running_named(&self.core.cluster_state(), repository, names);
        for entry in &running {
            self.propose(Command::SnapshotAbort {
                repository: repository.to_string(),
                uuid: entry.uuid.clone(),
            })?;
            tracing::info!(repository, snapshot = %entry.snapshot, "running snapshot aborted by a delete");
        }
        let stopped = self.core.wait_for_state(ABORT_WAIT, |state| {
            running_named(state, repository, names)
                .is_empty()
                .then_some(())
        });
        if stopped.is_none() {
            return Err(ApiError::new(
                503,
                "concurrent_snapshot_execution_exception",
                format!("[{repository}] an aborted snapshot has not stopped yet: retry the delete"),
            ));
        }
        Ok(running.into_iter().map(|e| e.snapshot).collect())
    }
}

/// The snapshots being created in `repository` that `names` selects.
fn running_named(state: &ClusterState, repository: &str, names: &str) -> Vec<SnapshotInProgress> {
    state
        .snapshots
        .iter()
        .filter(|s| s.repository == repository && s.operation == SnapshotOperation::Create)
        .filter(|s| {
            names
                .split(',')
                .any(|part| part_selects(part.trim(), &s.snapshot))
        })
        .cloned()
        .collect()
}

/// What a snapshot's coordinator and primaries answer once a delete aborted it.
fn aborted(entry: &SnapshotInProgress) -> ApiError {
    ApiError::new(
        409,
        "snapshot_exception",
        format!(
            "[{}:{}/{}] Snapshot was aborted by deletion",
            entry.repository, entry.snapshot, entry.uuid
        ),
    )
}
