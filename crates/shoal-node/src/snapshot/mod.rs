//! Snapshots: copies of indices' commits in a repository (`fs` or `s3`), taken while the
//! cluster keeps indexing, restored into new indices.
//!
//! ```text
//! PUT _snapshot/r/s ─▶ SnapshotBegin (cluster state: one operation per repository)
//!                  ─▶ every primary: flush, pin the commit, upload the files the repository
//!                     lacks (shard.rs) ─▶ snap-<uuid>.json ─▶ index-<n+1> ─▶ SnapshotEnd
//! POST _snapshot/r/s/_restore ─▶ RestoreSnapshot (new indices, primaries from the snapshot)
//!                  ─▶ the node given a primary downloads its files and opens them (restore.rs)
//! DELETE _snapshot/r/s ─▶ index-<n+1> without it ─▶ blobs no snapshot names are deleted
//! ```
//! Repositories are registered in the cluster state (`repositories.rs`); the repository's
//! keys and files are in [`layout`].

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use shoal_state::RepositoryMetadata;
use shoal_storage::{Repository, StorageError};

use crate::core::NodeCore;
use crate::error::{ApiError, ApiResult};
use crate::remote::{block_on_storage, storage_error};

mod abort;
pub mod create;
pub mod delete;
pub mod layout;
pub mod read;
pub mod repositories;
pub mod restore;
pub mod shard;
pub mod status;
pub(crate) mod throttle;

use layout::{RepositoryData, SnapshotDetails};

/// The snapshot role of a node: registers repositories, coordinates the snapshots asked of
/// it, snapshots its own primaries for other coordinators, and restores shards.
pub struct SnapshotService {
    core: Arc<NodeCore>,
    /// Repositories opened, with the settings they were opened with (a repository
    /// registered again with other settings is opened again).
    opened: Mutex<HashMap<String, Opened>>,
    /// The snapshots this node coordinates, by uuid: their shards' progress for `_status`.
    running: Mutex<HashMap<String, Arc<create::Progress>>>,
}

/// A repository opened with its registration's settings, and this node's limiters for it.
struct Opened {
    meta: RepositoryMetadata,
    repository: Repository,
    throttles: Arc<throttle::Throttles>,
}

impl SnapshotService {
    pub fn new(core: Arc<NodeCore>) -> SnapshotService {
        SnapshotService {
            core,
            opened: Mutex::default(),
            running: Mutex::default(),
        }
    }

    /// The registered repository `name`, opened.
    pub(crate) fn repository(&self, name: &str) -> ApiResult<Repository> {
        Ok(self.repository_and_throttles(name)?.0)
    }

    /// The registered repository `name`, opened, with this node's limiters for it.
    pub(crate) fn repository_and_throttles(
        &self,
        name: &str,
    ) -> ApiResult<(Repository, Arc<throttle::Throttles>)> {
        self.open(name, &self.registered(name)?)
    }

    /// The registration of repository `name`, or `repository_missing_exception`.
    fn registered(&self, name: &str) -> ApiResult<RepositoryMetadata> {
        let state = self.core.cluster_state();
        state
            .metadata
            .repositories
            .get(name)
            .cloned()
            .ok_or_else(|| repository_missing(name))
    }

    /// The repository `name` as registered with `meta`, and this node's limiters for it.
    fn open(
        &self,
        name: &str,
        meta: &RepositoryMetadata,
    ) -> ApiResult<(Repository, Arc<throttle::Throttles>)> {
        if let Some(opened) = self.opened.lock().get(name) {
            if &opened.meta == meta {
                return Ok((opened.repository.clone(), opened.throttles.clone()));
            }
        }
        let (settings, throttles) = repositories::settings_of(&self.core, name, meta)?;
        let repository = Repository::open(settings).map_err(storage_error)?;
        let throttles = Arc::new(throttles);
        let opened = Opened {
            meta: meta.clone(),
            repository: repository.clone(),
            throttles: throttles.clone(),
        };
        self.opened.lock().insert(name.to_string(), opened);
        Ok((repository, throttles))
    }

    fn block_on<T>(
        &self,
        future: impl std::future::Future<Output = Result<T, StorageError>>,
    ) -> ApiResult<T> {
        block_on_storage(&self.core, future)
    }

    /// The newest generation of a repository (empty when nothing was ever snapshotted).
    pub(crate) fn repository_data(&self, repository: &Repository) -> ApiResult<RepositoryData> {
        let listed = self.block_on(repository.list(layout::GENERATIONS_FOLDER))?;
        let newest = listed
            .iter()
            .filter_map(|o| layout::generation_of(&o.key))
            .max();
        let Some(generation) = newest else {
            return Ok(RepositoryData::default());
        };
        let bytes = self.block_on(repository.get(&layout::generation_key(generation)))?;
        serde_json::from_slice(&bytes).map_err(|e| corrupted_repository(repository, &e))
    }

    /// Writes the next generation of a repository. Only the holder of the repository's
    /// `SnapshotBegin` entry calls this, so generations are never written concurrently.
    fn write_repository_data(
        &self,
        repository: &Repository,
        mut data: RepositoryData,
    ) -> ApiResult<RepositoryData> {
        data.generation += 1;
        let bytes = serde_json::to_vec(&data).expect("repository data serializes");
        self.block_on(repository.put(&layout::generation_key(data.generation), bytes.into()))?;
        // Older generations are kept one step back: a reader that listed just before this
        // write can still read the one it found.
        if data.generation >= 2 {
            let stale = layout::generation_key(data.generation - 2);
            let _ = self.block_on(repository.delete(&stale));
        }
        Ok(data)
    }

    pub(crate) fn snapshot_details(
        &self,
        repository: &Repository,
        uuid: &str,
    ) -> ApiResult<SnapshotDetails> {
        let bytes = self.block_on(repository.get(&layout::snapshot_key(uuid)))?;
        serde_json::from_slice(&bytes).map_err(|e| corrupted_repository(repository, &e))
    }

    /// The details of the snapshot called `name`, or `snapshot_missing_exception`.
    pub(crate) fn find_snapshot(
        &self,
        repository: &Repository,
        name: &str,
    ) -> ApiResult<SnapshotDetails> {
        let data = self.repository_data(repository)?;
        let summary = data
            .find(name)
            .ok_or_else(|| snapshot_missing(repository.name(), name))?;
        self.snapshot_details(repository, &summary.uuid)
    }
}

pub(crate) fn repository_missing(name: &str) -> ApiError {
    ApiError::new(
        404,
        "repository_missing_exception",
        format!("[{name}] missing"),
    )
}

pub(crate) fn snapshot_missing(repository: &str, snapshot: &str) -> ApiError {
    ApiError::new(
        404,
        "snapshot_missing_exception",
        format!("[{repository}:{snapshot}] is missing"),
    )
}

fn corrupted_repository(repository: &Repository, error: &serde_json::Error) -> ApiError {
    ApiError::new(
        500,
        "repository_exception",
        format!(
            "[{}] a repository file cannot be read ({error}): was it written by something else than Shoal?",
            repository.name()
        ),
    )
}
