//! Remote-backed storage: a primary's segments and translog also go to object-store
//! repositories, so replicas hydrate from there and an index whose every copy is gone is
//! restored with nothing acknowledged lost.
//!
//! ```text
//! primary: refresh ─▶ upload new segment files + a metadata file ─▶ publish the checkpoint
//!          write (durability=request) ─▶ local fsync ─▶ translog batch uploaded ─▶ ack
//! replica: published checkpoint ─▶ newest metadata file ─▶ copy the files it lacks from
//!          the repository (not from the primary) ─▶ install
//! restore: newest metadata file ─▶ files ─▶ open ─▶ replay translog batches above it
//! ```
//! Configured as in OpenSearch, by node attributes naming repositories
//! (`node.attr.remote_store.segment.repository: r1`, `node.attr.remote_store.repository.r1.type: fs`).
//! Every index created on such a node is remote-backed and segment-replicated. The keys are
//! in [`layout`]; segments in [`segments`], translog in [`translog`], restores in [`restore`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use serde_json::Value;
use shoal_storage::{Repository, RepositorySettings, StorageError};

use crate::core::NodeCore;
use crate::error::{ApiError, ApiResult};
use crate::settings::FlatSettings;

pub mod cluster_state;
pub(crate) mod hydrate;
pub mod layout;
pub mod pressure;
pub mod rates;
pub mod restore;
pub mod segments;
pub mod stats;
pub(crate) mod terms;
pub mod translog;

pub const SEGMENT_REPOSITORY_ATTR: &str = "node.attr.remote_store.segment.repository";
pub const TRANSLOG_REPOSITORY_ATTR: &str = "node.attr.remote_store.translog.repository";
pub const STATE_REPOSITORY_ATTR: &str = "node.attr.remote_store.state.repository";
const REPOSITORY_ATTR_PREFIX: &str = "node.attr.remote_store.repository.";
const ATTR_PREFIX: &str = "node.attr.remote_store.";

/// `cluster.remote_store.index.segment_metadata.retention.max_count`.
pub const METADATA_RETENTION: &str =
    "cluster.remote_store.index.segment_metadata.retention.max_count";

/// The repositories a node's attributes name.
pub struct RemoteRepositories {
    pub segment: Repository,
    pub translog: Repository,
    pub state: Option<Repository>,
    /// The segment repository's upload and download rates.
    pub segment_rates: rates::RemoteRates,
}

impl RemoteRepositories {
    /// The remote store the node's settings describe; `None` when they name no segment
    /// repository. Wrong or unknown `node.attr.remote_store.*` settings stop the node.
    pub fn from_node_settings(settings: &FlatSettings) -> ApiResult<Option<RemoteRepositories>> {
        let mut attributes: BTreeMap<String, String> = settings
            .iter()
            .filter(|(k, _)| k.starts_with(ATTR_PREFIX))
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str().map_or_else(|| v.to_string(), str::to_string),
                )
            })
            .collect();
        if let Some(unknown) = attributes.keys().find(|k| {
            !k.starts_with(REPOSITORY_ATTR_PREFIX)
                && ![
                    SEGMENT_REPOSITORY_ATTR,
                    TRANSLOG_REPOSITORY_ATTR,
                    STATE_REPOSITORY_ATTR,
                ]
                .contains(&k.as_str())
        }) {
            return Err(ApiError::bad_request(format!(
                "unknown setting [{unknown}]: the remote store takes [{SEGMENT_REPOSITORY_ATTR}], [{TRANSLOG_REPOSITORY_ATTR}], [{STATE_REPOSITORY_ATTR}] and [{REPOSITORY_ATTR_PREFIX}<name>.*]"
            )));
        }
        let named = |attributes: &BTreeMap<String, String>, key: &str| attributes.get(key).cloned();
        let (segment, translog) = match (
            named(&attributes, SEGMENT_REPOSITORY_ATTR),
            named(&attributes, TRANSLOG_REPOSITORY_ATTR),
        ) {
            (None, None) if attributes.is_empty() => return Ok(None),
            (Some(segment), Some(translog)) => (segment, translog),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "a remote-backed node needs both [{SEGMENT_REPOSITORY_ATTR}] and [{TRANSLOG_REPOSITORY_ATTR}]"
                )))
            }
        };
        let segment_rates =
            rates::RemoteRates::take(REPOSITORY_ATTR_PREFIX, &segment, &mut attributes)?;
        let open = |name: &str| -> ApiResult<Repository> {
            let settings =
                RepositorySettings::from_attributes(REPOSITORY_ATTR_PREFIX, name, &attributes)
                    .map_err(storage_error)?;
            Repository::open(settings).map_err(storage_error)
        };
        Ok(Some(RemoteRepositories {
            segment: open(&segment)?,
            translog: open(&translog)?,
            state: named(&attributes, STATE_REPOSITORY_ATTR)
                .map(|name| open(&name))
                .transpose()?,
            segment_rates,
        }))
    }
}

/// The remote store on this node: its repositories (none when the node has no remote store).
pub struct RemoteStoreService {
    core: Arc<NodeCore>,
    repositories: Option<RemoteRepositories>,
    /// The cluster state version whose metadata the remote state repository holds.
    state_seen: AtomicU64,
    /// A remote cluster state round runs.
    state_busy: AtomicBool,
    /// Hash of the metadata last uploaded (an unchanged metadata is not uploaded again).
    state_uploaded_hash: AtomicU64,
    /// After a failed round: not before this.
    state_retry_at: parking_lot::Mutex<Option<std::time::Instant>>,
}

impl RemoteStoreService {
    pub fn new(
        core: Arc<NodeCore>,
        repositories: Option<RemoteRepositories>,
    ) -> RemoteStoreService {
        RemoteStoreService {
            core,
            repositories,
            state_seen: AtomicU64::new(u64::MAX),
            state_busy: AtomicBool::new(false),
            state_uploaded_hash: AtomicU64::new(0),
            state_retry_at: parking_lot::Mutex::new(None),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.repositories.is_some()
    }

    fn repositories(&self) -> ApiResult<&RemoteRepositories> {
        self.repositories.as_ref().ok_or_else(|| {
            ApiError::bad_request(
                "this node has no remote store: start it with [node.attr.remote_store.segment.repository] and [node.attr.remote_store.translog.repository]",
            )
        })
    }

    /// Makes a new index remote-backed on a node with a remote store: segment replication,
    /// and the node's repositories. Refuses what contradicts it (OpenSearch's rules).
    pub fn apply_index_defaults(&self, index: &mut FlatSettings) -> ApiResult<()> {
        for key in [
            "index.remote_store.enabled",
            "index.remote_store.segment.repository",
            "index.remote_store.translog.repository",
        ] {
            if index.contains_key(key) {
                return Err(ApiError::bad_request(format!(
                    "private index setting [{key}] can not be set explicitly"
                )));
            }
        }
        let Some(repositories) = &self.repositories else {
            if index.contains_key("index.remote_store.translog.buffer_interval") {
                return Err(ApiError::bad_request(
                    "[index.remote_store.translog.buffer_interval] applies to remote-backed indices only, and this node has no remote store",
                ));
            }
            return Ok(());
        };
        let replication = index
            .get("index.replication.type")
            .and_then(Value::as_str)
            .unwrap_or("SEGMENT");
        if !replication.eq_ignore_ascii_case("SEGMENT") {
            return Err(ApiError::bad_request(
                "To enable index.remote_store.enabled, index.replication.type should be set to SEGMENT",
            ));
        }
        let text = |v: &str| Value::String(v.to_string());
        index.insert("index.replication.type".into(), text("SEGMENT"));
        index.insert("index.remote_store.enabled".into(), text("true"));
        index.insert(
            "index.remote_store.segment.repository".into(),
            text(repositories.segment.name()),
        );
        index.insert(
            "index.remote_store.translog.repository".into(),
            text(repositories.translog.name()),
        );
        Ok(())
    }

    /// Runs a repository call on the node's runtime; callers are pool threads, never the
    /// runtime's own.
    fn block_on<T>(
        &self,
        future: impl std::future::Future<Output = Result<T, StorageError>>,
    ) -> ApiResult<T> {
        block_on_storage(&self.core, future)
    }
}

/// Waits for a repository future on the node's runtime, its failure as a REST error.
pub fn block_on_storage<T>(
    core: &NodeCore,
    future: impl std::future::Future<Output = Result<T, StorageError>>,
) -> ApiResult<T> {
    core.runtime.block_on(future).map_err(storage_error)
}

/// A repository failure as a REST error.
pub fn storage_error(error: StorageError) -> ApiError {
    ApiError::new(error.status(), error.error_type(), error.to_string())
}
