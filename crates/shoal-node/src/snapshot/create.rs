//! Creating a snapshot (`PUT _snapshot/{repo}/{snap}`): the node that takes the request
//! coordinates it. It records the operation in the cluster state (one per repository), asks
//! every primary to snapshot itself, then writes the snapshot's file and the repository's next
//! generation, and ends the operation whatever happened.

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use shoal_state::{ClusterState, Command, SnapshotInProgress, SnapshotOperation};
use shoal_types::ShardId;

use super::layout::{
    IndexSnapshot, RepositoryData, ShardFailure, ShardSnapshot, SnapshotDetails, SnapshotState,
};
use super::shard::{ShardRequest, SnapshotShardAction};
use super::SnapshotService;
use crate::core::ResolveOptions;
use crate::error::{ApiError, ApiResult};
use shoal_cluster::now_millis;

/// How long one shard's snapshot may take before the coordinator gives up on it.
const SHARD_TIMEOUT: Duration = Duration::from_secs(3600);
/// A shard whose primary moved or is not there yet is asked again this many times.
const SHARD_ATTEMPTS: usize = 5;
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// What `PUT _snapshot/{repo}/{snap}` asks.
#[derive(Debug, Clone)]
pub struct CreateRequest {
    pub repository: String,
    pub snapshot: String,
    /// An index expression; empty: every open index.
    pub indices: String,
    pub ignore_unavailable: bool,
    pub include_global_state: bool,
    pub partial: bool,
    pub metadata: Option<Value>,
    pub wait_for_completion: bool,
}

/// A shard's place in a running snapshot, for `_status`.
#[derive(Debug, Clone)]
pub enum ShardStage {
    Started,
    Done(ShardSnapshot),
    Failed(String),
}

/// A snapshot this node coordinates.
pub struct Progress {
    pub entry: SnapshotInProgress,
    pub include_global_state: bool,
    pub shards: Mutex<BTreeMap<(String, usize), ShardStage>>,
}

impl SnapshotService {
    /// Starts a snapshot; with `wait_for_completion` answers its info once done, else
    /// `{"accepted": true}` once it runs.
    pub fn create_snapshot(
        self: &std::sync::Arc<Self>,
        request: CreateRequest,
    ) -> ApiResult<Value> {
        validate_snapshot_name(&request.repository, &request.snapshot)?;
        let repository = self.writable_repository(&request.repository, "create snapshot in")?;
        let data = self.repository_data(&repository)?;
        if data.find(&request.snapshot).is_some() {
            return Err(invalid_name(
                &request.repository,
                &request.snapshot,
                "snapshot with the same name already exists",
            ));
        }
        let indices = self.snapshot_indices(&request)?;
        let state = self.core.cluster_state();
        let shards = indices
            .iter()
            .map(|name| {
                state
                    .metadata
                    .indices
                    .get(name)
                    .map_or(0, |m| m.number_of_shards() as usize)
            })
            .sum();
        let entry = SnapshotInProgress {
            repository: request.repository.clone(),
            snapshot: request.snapshot.clone(),
            uuid: shoal_cluster::new_id(),
            operation: SnapshotOperation::Create,
            coordinator: self.core.node_id.clone(),
            start_millis: now_millis(),
            indices,
            shards,
            aborted: false,
        };
        self.propose(Command::SnapshotBegin(entry.clone()))?;
        let progress = std::sync::Arc::new(Progress {
            entry: entry.clone(),
            include_global_state: request.include_global_state,
            shards: Mutex::default(),
        });
        self.running
            .lock()
            .insert(entry.uuid.clone(), progress.clone());
        tracing::info!(repository = %entry.repository, snapshot = %entry.snapshot, indices = entry.indices.len(), shards, "snapshot started");
        if !request.wait_for_completion {
            let service = self.clone();
            // Not the `snapshot` pool: the shards' own snapshots run there, and this waits
            // for them (a one-thread pool would wait for itself).
            self.core
                .pressure
                .spawn_forced(crate::pressure::settings::GENERIC, move || {
                    let _ = service.finish_snapshot(&request, &progress);
                });
            return Ok(serde_json::json!({ "accepted": true }));
        }
        let details = self.finish_snapshot(&request, &progress)?;
        Ok(serde_json::json!({ "snapshot": super::read::snapshot_info(&details) }))
    }

    /// Runs the shards' snapshots and publishes the result; the operation ends either way.
    fn finish_snapshot(
        &self,
        request: &CreateRequest,
        progress: &Progress,
    ) -> ApiResult<SnapshotDetails> {
        let result = self.run_snapshot(request, progress);
        if let Err(e) = &result {
            tracing::warn!(repository = %request.repository, snapshot = %request.snapshot, error = %e, "snapshot failed");
        }
        self.end_operation(&progress.entry);
        result
    }

    pub(crate) fn end_operation(&self, entry: &SnapshotInProgress) {
        self.running.lock().remove(&entry.uuid);
        let end = Command::SnapshotEnd {
            repository: entry.repository.clone(),
            uuid: entry.uuid.clone(),
        };
        if let Err(e) = self.propose(end) {
            // The entry stays until this node leaves the cluster; later snapshots of the
            // repository are refused meanwhile, and say why.
            tracing::error!(repository = %entry.repository, snapshot = %entry.snapshot, error = %e, "snapshot end not recorded");
        }
    }

    fn run_snapshot(
        &self,
        request: &CreateRequest,
        progress: &Progress,
    ) -> ApiResult<SnapshotDetails> {
        let entry = &progress.entry;
        let repository = self.writable_repository(&entry.repository, "create snapshot in")?;
        let state = self.core.cluster_state();
        let repository_meta = state.metadata.repositories[&entry.repository].clone();
        let mut indices = BTreeMap::new();
        for name in &entry.indices {
            let meta = state
                .metadata
                .indices
                .get(name)
                .ok_or_else(|| ApiError::index_not_found(name))?;
            let shards = (0..meta.number_of_shards() as usize)
                .map(|_| None)
                .collect();
            indices.insert(
                name.clone(),
                IndexSnapshot {
                    meta: meta.clone(),
                    shards,
                },
            );
        }
        let mut failures = Vec::new();
        let outcomes = self.snapshot_shards(&indices, &repository_meta, progress);
        self.check_not_aborted(&entry.repository, &entry.uuid)?;
        for ((index, shard), outcome) in outcomes {
            let snapshot = indices.get_mut(&index).expect("an index of the snapshot");
            match outcome {
                Ok(done) => snapshot.shards[shard] = Some(done),
                Err(e) => failures.push(ShardFailure {
                    index_uuid: snapshot.meta.uuid.clone(),
                    index,
                    shard,
                    reason: e.reason.clone(),
                    node_id: None,
                    status: crate::error::status_name(e.status).to_string(),
                }),
            }
        }
        let state_after = match (failures.is_empty(), request.partial) {
            (true, _) => SnapshotState::Success,
            (false, true) => SnapshotState::Partial,
            (false, false) => SnapshotState::Failed,
        };
        let details = SnapshotDetails {
            name: entry.snapshot.clone(),
            uuid: entry.uuid.clone(),
            state: state_after,
            start_millis: entry.start_millis,
            end_millis: now_millis(),
            include_global_state: request.include_global_state,
            metadata: request.metadata.clone(),
            persistent_settings: match request.include_global_state {
                true => self
                    .core
                    .cluster_state()
                    .metadata
                    .persistent_settings
                    .clone(),
                false => BTreeMap::new(),
            },
            indices,
            failures,
        };
        self.publish(&repository, &details)?;
        tracing::info!(repository = %entry.repository, snapshot = %entry.snapshot, state = details.state.as_str(), failed = details.failures.len(), "snapshot finished");
        Ok(details)
    }

    /// The snapshot's own file first, then the generation naming it.
    pub(super) fn publish(
        &self,
        repository: &shoal_storage::Repository,
        details: &SnapshotDetails,
    ) -> ApiResult<RepositoryData> {
        self.put_metadata(
            repository,
            &super::layout::snapshot_key(&details.uuid),
            details,
        )?;
        let mut data = self.repository_data(repository)?;
        data.snapshots.push(details.summary());
        self.write_repository_data(repository, data)
    }

    /// Every shard of `indices` snapshotted by its primary, asking again (after a pause and a
    /// fresh look at the cluster state) the shards whose primary moved or failed meanwhile.
    fn snapshot_shards(
        &self,
        indices: &BTreeMap<String, IndexSnapshot>,
        repository_meta: &shoal_state::RepositoryMetadata,
        progress: &Progress,
    ) -> Vec<((String, usize), ApiResult<ShardSnapshot>)> {
        let entry = &progress.entry;
        let mut pending: Vec<(String, usize)> = indices
            .iter()
            .flat_map(|(name, i)| (0..i.shards.len()).map(move |s| (name.clone(), s)))
            .collect();
        let mut outcomes = Vec::new();
        for attempt in 1..=SHARD_ATTEMPTS {
            let state = self.core.cluster_state();
            let asked: Vec<_> = pending
                .drain(..)
                .map(|(index, shard)| {
                    progress
                        .shards
                        .lock()
                        .insert((index.clone(), shard), ShardStage::Started);
                    let uuid = indices[&index].meta.uuid.clone();
                    let request = ShardRequest {
                        index: index.clone(),
                        shard_id: ShardId::new(uuid, shard as u32),
                        repository: entry.repository.clone(),
                        repository_meta: repository_meta.clone(),
                        snapshot_uuid: entry.uuid.clone(),
                    };
                    let sent = primary_address(&state, &index, shard).map(|address| {
                        let reply = self.core.send::<SnapshotShardAction>(
                            &address,
                            &request,
                            SHARD_TIMEOUT,
                        );
                        (address, reply)
                    });
                    ((index, shard), sent)
                })
                .collect();
            for (key, sent) in asked {
                let outcome =
                    sent.and_then(|(address, reply)| self.core.wait_unless_gone(&address, reply));
                match outcome {
                    Err(e) if attempt < SHARD_ATTEMPTS && worth_asking_again(&e) => {
                        tracing::debug!(index = %key.0, shard = key.1, attempt, error = %e, "shard snapshot asked again");
                        pending.push(key);
                    }
                    outcome => {
                        let stage = match &outcome {
                            Ok(done) => ShardStage::Done(done.clone()),
                            Err(e) => ShardStage::Failed(e.reason.clone()),
                        };
                        progress.shards.lock().insert(key.clone(), stage);
                        outcomes.push((key, outcome));
                    }
                }
            }
            if pending.is_empty() || self.aborted_entry(&entry.repository, &entry.uuid).is_some() {
                break;
            }
            std::thread::sleep(RETRY_PAUSE * attempt as u32);
        }
        outcomes
    }

    /// The open indices a request names (`indices` empty: all of them).
    fn snapshot_indices(&self, request: &CreateRequest) -> ApiResult<Vec<String>> {
        let options = ResolveOptions {
            ignore_unavailable: request.ignore_unavailable,
            allow_no_indices: true,
            include_closed: false,
            expand_hidden: false,
            expand_states: None,
            ignore_aliases: false,
        };
        let resolved = self.core.resolve(&request.indices, options)?;
        Ok(resolved.iter().map(|s| s.name()).collect())
    }
}

/// The transport address of the node holding the shard's started primary.
fn primary_address(state: &ClusterState, index: &str, shard: usize) -> ApiResult<String> {
    let unavailable = || {
        ApiError::new(
            503,
            "snapshot_exception",
            format!("primary shard is not allocated: [{index}][{shard}] has no started primary"),
        )
    };
    let primary = state
        .primary(index, shard as u32)
        .filter(|c| c.is_active())
        .ok_or_else(unavailable)?;
    let node = primary.node.as_deref().ok_or_else(unavailable)?;
    state
        .nodes
        .get(node)
        .map(|n| n.transport_address.clone())
        .ok_or_else(unavailable)
}

/// A primary that moved, is not started yet, or whose node left: another attempt may find it.
fn worth_asking_again(error: &ApiError) -> bool {
    error.status == 503
        || matches!(
            error.error_type.as_str(),
            "shard_not_found_exception"
                | "shard_not_in_primary_mode_exception"
                | "node_not_connected_exception"
        )
        || error.kind.is_retryable()
}

pub(super) fn invalid_name(repository: &str, snapshot: &str, why: &str) -> ApiError {
    ApiError::new(
        400,
        "invalid_snapshot_name_exception",
        format!("[{repository}:{snapshot}] Invalid snapshot name [{snapshot}], {why}"),
    )
}

/// OpenSearch's rules for a snapshot's name.
pub(crate) fn validate_snapshot_name(repository: &str, snapshot: &str) -> ApiResult<()> {
    let refuse = |why: &str| Err(invalid_name(repository, snapshot, why));
    if snapshot.is_empty() {
        return refuse("cannot be empty");
    }
    if snapshot.contains(' ') {
        return refuse("must not contain whitespace");
    }
    if snapshot.contains(',') {
        return refuse("must not contain ','");
    }
    if snapshot.contains('#') {
        return refuse("must not contain '#'");
    }
    if snapshot.starts_with('_') {
        return refuse("must not start with '_'");
    }
    if snapshot.to_lowercase() != snapshot {
        return refuse("must be lowercase");
    }
    if snapshot
        .chars()
        .any(|c| matches!(c, '\\' | '/' | '*' | '?' | '"' | '<' | '>' | '|'))
    {
        return refuse("must not contain the following characters [\\, /, *, ?, \", <, >, |]");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_names_follow_opensearch_rules() {
        assert!(validate_snapshot_name("r", "nightly-2026.11.27").is_ok());
        for bad in ["", "Upper", "_x", "a b", "a,b", "a*", "a/b", "a#b"] {
            let error = validate_snapshot_name("r", bad).unwrap_err();
            assert_eq!(error.error_type, "invalid_snapshot_name_exception", "{bad}");
            assert_eq!(error.status, 400);
        }
    }
}
