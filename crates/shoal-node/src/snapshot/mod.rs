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
//! PUT _snapshot/r/s/_clone/t ─▶ snap-<uuid>.json naming the same blobs ─▶ index-<n+1>
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
pub mod clone;
pub mod create;
pub mod delete;
pub mod layout;
pub(crate) mod options;
pub mod read;
pub mod repositories;
pub mod restore;
pub mod shard;
pub mod status;
pub(crate) mod throttle;

use layout::{RepositoryData, SnapshotDetails};
use options::RepositoryOptions;

/// The snapshot role of a node: registers repositories, coordinates the snapshots asked of
/// it, snapshots its own primaries for other coordinators, and restores shards.
pub struct SnapshotService {
    core: Arc<NodeCore>,
    /// Repositories opened, with the settings they were opened with (a repository
    /// registered again with other settings is opened again).
    opened: Mutex<HashMap<String, Opened>>,
    /// The snapshots this node coordinates, by uuid: their shards' progress for `_status`.
    running: Mutex<HashMap<String, Arc<create::Progress>>>,
    /// Snapshot details read lately, shared with their readers. A snapshot's file never
    /// changes once written, and a restore reads it once per shard, a delete once per
    /// snapshot it keeps.
    details: Mutex<DetailsCache>,
}

/// At most this many snapshots' details are kept in memory.
const CACHED_DETAILS: usize = 32;

/// Parsed `snap-<uuid>.json` files by repository and snapshot uuid (a uuid names one
/// snapshot wherever its repository is registered), the oldest read dropped first.
#[derive(Default)]
struct DetailsCache {
    entries: HashMap<(String, String), Arc<SnapshotDetails>>,
    order: std::collections::VecDeque<(String, String)>,
}

impl DetailsCache {
    fn get(&self, key: &(String, String)) -> Option<Arc<SnapshotDetails>> {
        self.entries.get(key).cloned()
    }

    fn insert(&mut self, key: (String, String), details: Arc<SnapshotDetails>) {
        if self.entries.insert(key.clone(), details).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > CACHED_DETAILS {
            if let Some(oldest) = self.order.pop_front() {
                self.entries.remove(&oldest);
            }
        }
    }

    fn forget(&mut self, key: &(String, String)) {
        if self.entries.remove(key).is_some() {
            self.order.retain(|k| k != key);
        }
    }
}

/// A repository opened with its registration's settings, and this node's limiters for it.
#[derive(Clone)]
struct Opened {
    meta: RepositoryMetadata,
    repository: Repository,
    throttles: Arc<throttle::Throttles>,
    options: RepositoryOptions,
}

impl SnapshotService {
    pub fn new(core: Arc<NodeCore>) -> SnapshotService {
        SnapshotService {
            core,
            opened: Mutex::default(),
            running: Mutex::default(),
            details: Mutex::default(),
        }
    }

    /// The registered repository `name`, opened.
    pub(crate) fn repository(&self, name: &str) -> ApiResult<Repository> {
        Ok(self.open(name, &self.registered(name)?)?.repository)
    }

    /// The registered repository `name`, opened to be written (`what`: "create snapshot in",
    /// "delete snapshot from"): refused when it was registered `readonly`.
    pub(crate) fn writable_repository(&self, name: &str, what: &str) -> ApiResult<Repository> {
        let opened = self.open(name, &self.registered(name)?)?;
        opened.options.check_writable(name, what)?;
        Ok(opened.repository)
    }

    /// The registered repository `name`, opened, with this node's limiters for it.
    pub(crate) fn repository_and_throttles(
        &self,
        name: &str,
    ) -> ApiResult<(Repository, Arc<throttle::Throttles>)> {
        let opened = self.open(name, &self.registered(name)?)?;
        Ok((opened.repository, opened.throttles))
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
    fn open(&self, name: &str, meta: &RepositoryMetadata) -> ApiResult<Opened> {
        if let Some(opened) = self.opened.lock().get(name) {
            if &opened.meta == meta {
                return Ok(opened.clone());
            }
        }
        let registration = repositories::registration_of(&self.core, name, meta)?;
        let opened = Opened {
            meta: meta.clone(),
            repository: Repository::open(registration.storage).map_err(storage_error)?,
            throttles: Arc::new(registration.throttles),
            options: registration.options,
        };
        self.opened.lock().insert(name.to_string(), opened.clone());
        Ok(opened)
    }

    /// Writes a metadata file (compressed if the repository's registration says so).
    fn put_metadata(
        &self,
        repository: &Repository,
        key: &str,
        value: &impl serde::Serialize,
    ) -> ApiResult<()> {
        let options = self
            .opened
            .lock()
            .get(repository.name())
            .map(|o| o.options)
            .unwrap_or_default();
        let json = serde_json::to_vec(value).expect("repository metadata serializes");
        let bytes = options.encode_metadata(json);
        self.block_on(repository.put(key, bytes.into()))
    }

    /// Reads a metadata file, compressed or not.
    fn get_metadata<T: serde::de::DeserializeOwned>(
        &self,
        repository: &Repository,
        key: &str,
    ) -> ApiResult<T> {
        let stored = self.block_on(repository.get(key))?;
        let json =
            options::decode_metadata(&stored).map_err(|e| corrupted_repository(repository, &e))?;
        serde_json::from_slice(&json).map_err(|e| corrupted_repository(repository, &e))
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
        self.get_metadata(repository, &layout::generation_key(generation))
    }

    /// Writes the next generation of a repository. Only the holder of the repository's
    /// `SnapshotBegin` entry calls this, so generations are never written concurrently.
    fn write_repository_data(
        &self,
        repository: &Repository,
        mut data: RepositoryData,
    ) -> ApiResult<RepositoryData> {
        data.generation += 1;
        self.put_metadata(repository, &layout::generation_key(data.generation), &data)?;
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
    ) -> ApiResult<Arc<SnapshotDetails>> {
        let key = (repository.describe(), uuid.to_string());
        if let Some(cached) = self.details.lock().get(&key) {
            return Ok(cached);
        }
        let details: Arc<SnapshotDetails> =
            Arc::new(self.get_metadata(repository, &layout::snapshot_key(uuid))?);
        self.details.lock().insert(key, details.clone());
        Ok(details)
    }

    /// Forgets the details of a snapshot that was deleted.
    pub(crate) fn forget_details(&self, repository: &Repository, uuid: &str) {
        self.details
            .lock()
            .forget(&(repository.describe(), uuid.to_string()));
    }

    /// The details of the snapshot called `name`, or `snapshot_missing_exception`.
    pub(crate) fn find_snapshot(
        &self,
        repository: &Repository,
        name: &str,
    ) -> ApiResult<Arc<SnapshotDetails>> {
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

fn corrupted_repository(repository: &Repository, error: &dyn std::fmt::Display) -> ApiError {
    ApiError::new(
        500,
        "repository_exception",
        format!(
            "[{}] a repository file cannot be read ({error}): was it written by something else than Shoal?",
            repository.name()
        ),
    )
}

/// A repository's settings from pairs (tests).
#[cfg(test)]
pub(crate) fn settings_map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod details_cache_tests {
    use super::*;

    fn key(n: usize) -> (String, String) {
        ("repository [r] (fs)".into(), format!("uuid-{n}"))
    }

    #[test]
    fn the_cache_keeps_the_latest_reads_and_forgets_a_deleted_snapshot() {
        let mut cache = DetailsCache::default();
        for n in 0..=CACHED_DETAILS {
            let details = SnapshotDetails {
                name: format!("s{n}"),
                uuid: key(n).1,
                state: layout::SnapshotState::Success,
                start_millis: 0,
                end_millis: 0,
                include_global_state: false,
                metadata: None,
                persistent_settings: Default::default(),
                indices: Default::default(),
                failures: Vec::new(),
            };
            cache.insert(key(n), Arc::new(details));
        }
        assert!(cache.get(&key(0)).is_none(), "the oldest read is dropped");
        assert_eq!(cache.get(&key(1)).unwrap().name, "s1");
        cache.forget(&key(1));
        assert!(cache.get(&key(1)).is_none());
        assert_eq!(cache.order.len(), CACHED_DETAILS - 1);
        assert_eq!(cache.entries.len(), CACHED_DETAILS - 1);
    }
}
