//! Cloning a snapshot (`PUT _snapshot/{repo}/{snap}/_clone/{target}` with `{"indices": …}`):
//! a new snapshot of some of the source's indices, in the same repository. Nothing is copied:
//! the clone's shards name the blobs the source's do, and a delete of either keeps every blob
//! the other still names.

use serde_json::{json, Value};
use shoal_cluster::now_millis;
use shoal_state::{Command, SnapshotInProgress, SnapshotOperation};

use super::create::{invalid_name, validate_snapshot_name};
use super::layout::{SnapshotDetails, SnapshotState};
use super::restore::choose_indices;
use super::SnapshotService;
use crate::error::{ApiError, ApiResult};

/// What `PUT _snapshot/{repo}/{snap}/_clone/{target}` asks.
#[derive(Debug, Clone)]
pub struct CloneRequest {
    pub repository: String,
    pub source: String,
    pub target: String,
    /// An index expression over the source's indices (required, as in OpenSearch).
    pub indices: String,
}

impl SnapshotService {
    pub fn clone_snapshot(&self, request: CloneRequest) -> ApiResult<Value> {
        validate_snapshot_name(&request.repository, &request.target)?;
        if request.indices.trim().is_empty() {
            return Err(ApiError::bad_request(
                "[indices] is required: name the source snapshot's indices to clone",
            ));
        }
        let repository = self.writable_repository(&request.repository, "clone snapshot in")?;
        let entry = self.repository_operation(
            &request.repository,
            &request.target,
            SnapshotOperation::Create,
        );
        // The source is read under the repository's operation: a delete cannot take its
        // blobs away between the read and the clone naming them.
        self.propose(Command::SnapshotBegin(entry.clone()))?;
        let result = self.clone_under_lock(&repository, &request, &entry);
        self.end_operation(&entry);
        let indices = result?;
        tracing::info!(repository = %request.repository, source = %request.source, target = %request.target, indices, "snapshot cloned");
        Ok(json!({ "acknowledged": true }))
    }

    /// Checks the source and the target's name, then writes the clone; returns how many
    /// indices it holds.
    fn clone_under_lock(
        &self,
        repository: &shoal_storage::Repository,
        request: &CloneRequest,
        entry: &SnapshotInProgress,
    ) -> ApiResult<usize> {
        let source = self.find_snapshot(repository, &request.source)?;
        if source.state != SnapshotState::Success && source.state != SnapshotState::Partial {
            return Err(ApiError::new(
                400,
                "snapshot_exception",
                format!(
                    "[{}:{}] cannot clone a snapshot in state [{}]",
                    request.repository,
                    request.source,
                    source.state.as_str()
                ),
            ));
        }
        let chosen = choose_indices(&source, &request.indices, false)?;
        if self
            .repository_data(repository)?
            .find(&request.target)
            .is_some()
        {
            return Err(invalid_name(
                &request.repository,
                &request.target,
                "snapshot with the same name already exists",
            ));
        }
        let clone = cloned_details(&source, &chosen, &request.target, entry);
        self.publish(repository, &clone)?;
        Ok(chosen.len())
    }
}

/// The source's details cut down to `chosen`, under the clone's name and uuid.
fn cloned_details(
    source: &SnapshotDetails,
    chosen: &[String],
    target: &str,
    entry: &SnapshotInProgress,
) -> SnapshotDetails {
    let mut clone = source.clone();
    clone.name = target.to_string();
    clone.uuid = entry.uuid.clone();
    clone.start_millis = entry.start_millis;
    clone.end_millis = now_millis();
    clone.indices.retain(|name, _| chosen.contains(name));
    clone.failures.retain(|f| chosen.contains(&f.index));
    clone.state = match clone.failures.is_empty() {
        true => SnapshotState::Success,
        false => SnapshotState::Partial,
    };
    clone
}
