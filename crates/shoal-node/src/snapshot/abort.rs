//! `DELETE _snapshot/{repo}/{snap}` of a snapshot still running aborts it, as in OpenSearch:
//! `Command::SnapshotAbort` marks its entry, its primaries stop between files, its coordinator
//! publishes nothing and ends it; the delete then runs, and collects the blobs the aborted
//! snapshot uploaded (no snapshot names them).

use std::time::{Duration, Instant};

use shoal_state::{Command, SnapshotInProgress};

use super::read::wildcard_match;
use super::SnapshotService;
use crate::error::{ApiError, ApiResult};

/// How long a delete waits for the snapshots it aborted to stop.
const ABORT_WAIT: Duration = Duration::from_secs(60);

impl SnapshotService {
    /// Whether a delete aborted the running snapshot `uuid` of `repository`.
    pub(crate) fn is_aborted(&self, repository: &str, uuid: &str) -> bool {
        self.core
            .cluster_state()
            .snapshots
            .iter()
            .any(|s| s.repository == repository && s.uuid == uuid && s.aborted)
    }

    /// Aborts the running snapshots of `repository` that `names` (a comma list with
    /// wildcards, or `_all`) selects and waits until they stopped; returns their names.
    pub(crate) fn abort_running(&self, repository: &str, names: &str) -> ApiResult<Vec<String>> {
        let running = self.running_named(repository, names);
        for entry in &running {
            self.propose(Command::SnapshotAbort {
                repository: repository.to_string(),
                uuid: entry.uuid.clone(),
            })?;
            tracing::info!(repository, snapshot = %entry.snapshot, "running snapshot aborted by a delete");
        }
        let deadline = Instant::now() + ABORT_WAIT;
        while !self.running_named(repository, names).is_empty() {
            if Instant::now() > deadline {
                return Err(ApiError::new(
                    503,
                    "concurrent_snapshot_execution_exception",
                    format!(
                        "[{repository}] an aborted snapshot has not stopped yet: retry the delete"
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(running.into_iter().map(|e| e.snapshot).collect())
    }

    /// The running snapshots of `repository` that `names` selects.
    fn running_named(&self, repository: &str, names: &str) -> Vec<SnapshotInProgress> {
        let selects = |name: &str| {
            names
                .split(',')
                .map(str::trim)
                .any(|part| part == "_all" || wildcard_match(part, name))
        };
        self.running_in(repository)
            .into_iter()
            .filter(|s| selects(&s.snapshot))
            .collect()
    }
}

/// What a create waiting for its snapshot answers when a delete aborted it.
pub(crate) fn aborted(entry: &SnapshotInProgress) -> ApiError {
    ApiError::new(
        409,
        "snapshot_exception",
        format!(
            "[{}:{}/{}] Snapshot was aborted by deletion",
            entry.repository, entry.snapshot, entry.uuid
        ),
    )
}
