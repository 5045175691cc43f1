//! The cluster's metadata in the remote state repository
//! (`node.attr.remote_store.state.repository`, with `cluster.remote_store.state.enabled: true`):
//! the cluster manager uploads the indices and persistent settings whenever they change, and
//! the first cluster manager of a fresh cluster of the same name takes them back, so a cluster
//! that lost every node and every disk comes back with its indices (red until
//! `_remotestore/_restore` brings their data back).
//!
//! Keys: `cluster-state/<cluster name>/metadata__<millis>__<state version>__<id>`, the newest
//! last when sorted (a new cluster starts its state versions over, so time sorts first).

use std::hash::{Hash, Hasher};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use shoal_state::{ClusterState, Command, RestorableMetadata, REMOTE_STATE_CHECKED};
use shoal_storage::Repository;

use super::layout::now_millis;
use super::RemoteStoreService;
use crate::error::{ApiError, ApiResult};

/// `cluster.remote_store.state.enabled` (a node setting, as in OpenSearch).
pub const STATE_ENABLED: &str = "cluster.remote_store.state.enabled";
/// Metadata files kept per cluster.
const KEPT: usize = 10;
/// How long the cluster manager waits after a failed round before the next one.
const STATE_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

impl RemoteStoreService {
    /// The state repository, when the node has one and the setting enables it.
    fn state_repository(&self) -> Option<&Repository> {
        let enabled = self.core.config.get(STATE_ENABLED) == Some("true");
        self.repositories
            .as_ref()?
            .state
            .as_ref()
            .filter(|_| enabled)
    }

    /// Called at every scheduler tick: on the cluster manager, checks the repository once in
    /// the cluster's life, then uploads the metadata whenever a new state changed it. The work
    /// runs on the `management` pool, one round at a time.
    pub(crate) fn maintain_cluster_state(self: &Arc<Self>) {
        if self.state_repository().is_none() {
            return;
        }
        let state = self.core.cluster_state();
        let manager = state.cluster_manager.as_deref() == Some(self.core.node_id.as_str());
        if !manager || state.version == self.state_seen.load(Ordering::Acquire) {
            return;
        }
        // After a failure, the next round waits (the store may be down for a while).
        if self
            .state_retry_at
            .lock()
            .is_some_and(|at| std::time::Instant::now() < at)
        {
            return;
        }
        if self.state_busy.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        self.core.pressure.spawn_forced(crate::pressure::settings::MANAGEMENT, move || {
            let done = me.state_round(&state);
            match done {
                Ok(()) => {
                    me.state_seen.store(state.version, Ordering::Release);
                    *me.state_retry_at.lock() = None;
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in_s = STATE_RETRY.as_secs(), "remote cluster state not maintained");
                    *me.state_retry_at.lock() = Some(std::time::Instant::now() + STATE_RETRY);
                }
            }
            me.state_busy.store(false, Ordering::Release);
        });
    }

    fn state_round(&self, state: &ClusterState) -> ApiResult<()> {
        let repository = self.state_repository().expect("checked by the caller");
        match state.metadata.customs.contains_key(REMOTE_STATE_CHECKED) {
            false => self.restore_cluster_metadata(repository),
            true => self.upload_cluster_metadata(repository, state),
        }
    }

    fn folder(&self) -> String {
        format!("cluster-state/{}/", self.core.config.cluster_name)
    }

    /// This cluster name's metadata files, oldest first.
    fn uploaded_keys(&self, repository: &Repository) -> ApiResult<Vec<String>> {
        let mut keys: Vec<String> = self
            .block_on(repository.list(&self.folder()))?
            .into_iter()
            .map(|o| o.key)
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// Looks for the newest metadata of this cluster's name and proposes it (or that there is
    /// none): a fresh cluster takes it, an existing one only records the check.
    fn restore_cluster_metadata(&self, repository: &Repository) -> ApiResult<()> {
        let keys = self.uploaded_keys(repository)?;
        let newest = keys.last().cloned();
        let metadata = match &newest {
            Some(key) => {
                let bytes = self.block_on(repository.get(key))?;
                let metadata: RestorableMetadata = serde_json::from_slice(&bytes).map_err(|e| {
                    ApiError::internal(format!(
                        "remote cluster metadata [{key}] cannot be read: {e}"
                    ))
                })?;
                Some(metadata)
            }
            None => None,
        };
        let indices = metadata.as_ref().map_or(0, |m| m.indices.len());
        let command = Command::RestoreClusterMetadata {
            metadata,
            source: newest.clone(),
        };
        self.core.runtime.block_on(
            self.core
                .cluster
                .propose(command, crate::config::CLUSTER_MANAGER_TIMEOUT),
        )?;
        tracing::info!(source = ?newest, indices, "remote cluster state checked");
        Ok(())
    }

    /// Uploads the metadata if it changed since the last upload; keeps the newest files.
    fn upload_cluster_metadata(
        &self,
        repository: &Repository,
        state: &ClusterState,
    ) -> ApiResult<()> {
        let metadata = state.metadata.restorable(&state.cluster_uuid);
        let bytes = serde_json::to_vec(&metadata).map_err(|e| ApiError::internal(e.to_string()))?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        bytes.hash(&mut hasher);
        let hash = hasher.finish();
        if self.state_uploaded_hash.load(Ordering::Acquire) == hash {
            return Ok(());
        }
        let key = format!(
            "{}metadata__{:013}__{:020}__{}",
            self.folder(),
            now_millis(),
            state.version,
            uuid::Uuid::new_v4().simple()
        );
        self.block_on(repository.put(&key, Bytes::from(bytes)))?;
        self.state_uploaded_hash.store(hash, Ordering::Release);
        tracing::debug!(
            key,
            indices = metadata.indices.len(),
            "cluster metadata uploaded"
        );
        let keys = self.uploaded_keys(repository)?;
        for old in &keys[..keys.len().saturating_sub(KEPT)] {
            self.block_on(repository.delete(old))?;
        }
        Ok(())
    }
}
