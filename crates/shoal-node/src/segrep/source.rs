//! The primary's side of segment replication: publishing checkpoints after refreshes, pinning
//! a checkpoint's files while a replica copies them, and streaming them.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use shoal_engine::Engine;

use super::SegrepService;
use super::{CheckpointInfo, CopyTarget, PublishCheckpointAction, PublishedCheckpoint};
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::shard::segrep::Pinned;
use crate::transfer::peer::{serve_file, FileStreamRequest, ServedFiles};
use crate::transfer::ByteStream;

/// A pinned checkpoint nobody read from for this long belongs to a replica that went away.
const ABANDONED_AFTER: Duration = Duration::from_secs(300);
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a write with `refresh=true` waits for a replica to copy the refreshed commit.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// A pinned checkpoint as the file stream serves it.
struct ServedPin(Arc<Pinned>);

impl ServedFiles for ServedPin {
    fn path(&self, name: &str) -> Option<PathBuf> {
        self.0.path(name)
    }

    fn touch(&self) {
        self.0.touch();
    }
}

impl SegrepService {
    /// Puts the checkpoint publisher on a segment-replicated copy's engine, once: every
    /// commit of the copy, while it is the primary, tells its replicas.
    pub(crate) fn install_checkpoint_publisher(
        self: &Arc<Self>,
        service: &Arc<IndexService>,
        shard: usize,
    ) {
        let Ok(copy) = service.copy(shard) else {
            return;
        };
        if !service.is_segment_replicated()
            || copy.segrep.publisher_installed.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let node = Arc::downgrade(self);
        let (index, uuid) = (service.name(), service.uuid());
        copy.engine()
            .add_refresh_listener(Arc::new(move |_: &Engine| {
                queue_publication(&node, &index, &uuid, shard);
            }));
    }

    /// Publishes the checkpoint of a copy that has just become the primary of a
    /// segment-replicated shard (OpenSearch force-publishes after a promotion too).
    pub(crate) fn publish_after_promotion(&self, service: &IndexService, shard: usize) {
        if !service.is_segment_replicated() {
            return;
        }
        if let Err(e) = self.publish_checkpoint(&service.name(), &service.uuid(), shard) {
            tracing::warn!(index = %service.name(), shard, error = %e, "checkpoint of a new primary not published");
        }
    }

    /// Tells every replica of the local primary of `shard` about its current checkpoint.
    fn publish_checkpoint(&self, index: &str, uuid: &str, shard: usize) -> ApiResult<()> {
        let shard_id = shoal_types::ShardId::new(uuid.to_string(), shard as u32);
        let copy = self.core.local_copy(index, &shard_id, None)?;
        copy.shard
            .segrep
            .publish_queued
            .store(false, Ordering::Release);
        let Some(targets) = copy.shard.primary_targets() else {
            return Ok(());
        };
        drop_abandoned_pins(&copy.shard.segrep);
        let service = self.core.index_by_uuid(uuid)?;
        // A remote-backed primary publishes only what its replicas can read from the
        // repository (and uploads even without replicas: the repository is a copy too).
        let checkpoint = match service.is_remote_store() {
            true => self.upload_or_retry(&service, shard, &copy.shard)?,
            false if targets.is_empty() => return Ok(()),
            false => copy.engine().segment_checkpoint()?,
        };
        if targets.is_empty() {
            return Ok(());
        }
        let state = self.core.cluster_state();
        {
            let now = Instant::now();
            let mut lags = copy.shard.segrep.replicas.lock();
            lags.retain(|allocation_id, _| targets.contains(allocation_id));
            for allocation_id in &targets {
                lags.entry(allocation_id.clone()).or_default().published(
                    checkpoint.version,
                    checkpoint.length(),
                    now,
                );
            }
        }
        tracing::debug!(index, shard, version = checkpoint.version, targets = ?targets, "publishing checkpoint");
        for (address, target) in copy_targets(&state, (index, uuid, shard), targets) {
            let published = PublishedCheckpoint {
                target,
                primary_term: checkpoint.primary_term,
                version: checkpoint.version,
            };
            // Not waited for: a replica that misses one catches up with the next.
            drop(
                self.core
                    .send::<PublishCheckpointAction>(&address, &published, PUBLISH_TIMEOUT),
            );
        }
        Ok(())
    }

    /// Has every replica of the local primary of `shard` copy its current checkpoint, and
    /// waits for them (each at most [`SYNC_TIMEOUT`]). A replica that cannot is left to the
    /// next publication: the write is durable either way.
    pub(crate) fn sync_segment_replicas(&self, service: &IndexService, shard: usize) {
        let Ok(copy) = service.copy(shard) else {
            return;
        };
        let Some(targets) = copy.primary_targets() else {
            return;
        };
        // Remote-backed replicas copy from the repository: what they sync to must be there.
        if service.is_remote_store() {
            if let Err(e) = self.remote.upload_current_checkpoint(service, shard, &copy) {
                tracing::warn!(index = %service.name(), shard, error = %e, "segments not uploaded before a replica sync");
                return;
            }
        }
        let (index, uuid) = (service.name(), service.uuid());
        let state = self.core.cluster_state();
        let pending: Vec<_> = copy_targets(&state, (&index, &uuid, shard), targets)
            .into_iter()
            .map(|(address, target)| {
                let reply =
                    self.core
                        .send::<super::SegmentsSyncAction>(&address, &target, SYNC_TIMEOUT);
                (address, reply)
            })
            .collect();
        for (address, reply) in pending {
            if let Err(e) = self.core.wait_unless_gone(&address, reply) {
                tracing::debug!(index, shard, error = %e, "a segment replica did not sync after a refresh");
            }
        }
    }

    /// Pins the current checkpoint of the local primary for a replica's copy.
    pub(super) fn serve_checkpoint_info(&self, target: CopyTarget) -> ApiResult<CheckpointInfo> {
        let shard_id = shoal_types::ShardId::new(target.index_uuid.clone(), target.shard as u32);
        let copy = self.core.local_copy(&target.index, &shard_id, None)?;
        let primary = copy
            .replication
            .as_ref()
            .is_some_and(|r| r.tracker.lock().is_primary_mode());
        if !primary {
            return Err(not_the_primary(&target));
        }
        let session = format!(
            "{}/{}/{}",
            target.index_uuid,
            target.shard,
            uuid::Uuid::new_v4().simple()
        );
        let dir = self
            .core
            .paths
            .shard_dir(&target.index_uuid, target.shard)
            .join("segrep")
            .join(session.rsplit('/').next().unwrap_or_default());
        let pinned = Arc::new(pin_checkpoint(copy.engine(), dir)?);
        let checkpoint = pinned.checkpoint().clone();
        copy.shard
            .segrep
            .pinned
            .lock()
            .insert(session.clone(), pinned);
        Ok(CheckpointInfo {
            session,
            checkpoint,
        })
    }

    /// Drops a pinned checkpoint (the replica installed it, or gave up).
    pub(super) fn release_pinned_checkpoint(&self, session: String) -> ApiResult<()> {
        if let Some(copy) = self.copy_of_session(&session) {
            copy.segrep.pinned.lock().remove(&session);
        }
        Ok(())
    }

    fn pinned(&self, session: &str) -> ApiResult<Arc<Pinned>> {
        self.copy_of_session(session)
            .and_then(|copy| copy.segrep.pinned.lock().get(session).cloned())
            .ok_or_else(|| {
                ApiError::new(
                    404,
                    "resource_not_found_exception",
                    format!("no pinned checkpoint [{session}] (released or abandoned)"),
                )
            })
    }

    /// The local copy a session (`<index uuid>/<shard>/<id>`) belongs to.
    fn copy_of_session(&self, session: &str) -> Option<Arc<crate::shard::IndexShard>> {
        let mut parts = session.split('/');
        let (uuid, shard) = (parts.next()?, parts.next()?.parse::<usize>().ok()?);
        self.core.index_by_uuid(uuid).ok()?.copy(shard).ok()
    }
}

/// The transport address of each of a primary's replication targets (by allocation id), with
/// the message target naming that copy; a copy the state no longer places is left out.
pub(super) fn copy_targets(
    state: &shoal_state::ClusterState,
    (index, uuid, shard): (&str, &str, usize),
    allocation_ids: Vec<String>,
) -> Vec<(String, CopyTarget)> {
    allocation_ids
        .into_iter()
        .filter_map(|allocation_id| {
            let address = crate::replication::copy_address(state, index, shard, &allocation_id)?;
            let target = CopyTarget {
                index: index.to_string(),
                index_uuid: uuid.to_string(),
                shard,
                allocation_id,
            };
            Some((address, target))
        })
        .collect()
}

impl SegrepService {
    /// Uploads the primary's checkpoint; a failure is retried with backoff by a later
    /// publication (refreshes and local searches go on meanwhile).
    fn upload_or_retry(
        self: &SegrepService,
        service: &Arc<IndexService>,
        shard: usize,
        copy: &crate::shard::IndexShard,
    ) -> ApiResult<shoal_engine::SegmentCheckpoint> {
        self.remote
            .upload_current_checkpoint(service, shard, copy)
            .inspect_err(|e| {
                let failures = crate::shard::remote::UploadStats::get(
                    &copy.remote.stats.consecutive_segment_failures,
                );
                let backoff = upload_backoff(failures);
                tracing::warn!(index = %service.name(), shard, error = %e, retry_in_ms = backoff.as_millis() as u64, "segment upload to the remote store failed");
                self.retry_publication(service, shard, backoff);
            })
    }

    fn retry_publication(&self, service: &IndexService, shard: usize, after: Duration) {
        let node = self.me.clone();
        let (index, uuid) = (service.name(), service.uuid());
        self.core.runtime.spawn(async move {
            tokio::time::sleep(after).await;
            queue_publication(&node, &index, &uuid, shard);
        });
    }
}

/// 200 ms after the first failure, doubling up to 30 s (a store back up is used again soon;
/// a store down for long is not hammered).
fn upload_backoff(consecutive_failures: u64) -> Duration {
    let exponent = consecutive_failures.saturating_sub(1).min(8) as u32;
    (Duration::from_millis(200) * 2u32.pow(exponent)).min(Duration::from_secs(30))
}

/// Queues one publication for the shard on the `replication` pool (never on the refreshing
/// thread: the checkpoint reads new files' checksums); refreshes while one is queued ride on it.
pub(super) fn queue_publication(node: &Weak<SegrepService>, index: &str, uuid: &str, shard: usize) {
    let Some(node) = node.upgrade() else {
        return;
    };
    let shard_id = shoal_types::ShardId::new(uuid.to_string(), shard as u32);
    let Ok(copy) = node.core.local_copy(index, &shard_id, None) else {
        return;
    };
    if copy
        .shard
        .segrep
        .publish_queued
        .swap(true, Ordering::AcqRel)
    {
        return;
    }
    let (index, uuid) = (index.to_string(), uuid.to_string());
    let pressure = node.core.pressure.clone();
    pressure.spawn_forced(crate::pressure::settings::REPLICATION, move || {
        if let Err(e) = node.publish_checkpoint(&index, &uuid, shard) {
            tracing::debug!(index, shard, error = %e, "checkpoint not published");
        }
    });
}

/// Hard-links the files of the engine's current checkpoint under `dir`. A merge can commit
/// and delete a file between listing and linking: listing again sees the new commit.
pub(crate) fn pin_checkpoint(engine: &Engine, dir: PathBuf) -> ApiResult<Pinned> {
    let index_dir = engine.config().index_dir();
    let mut last_error = None;
    for _ in 0..5 {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let checkpoint = engine.segment_checkpoint()?;
        let linked = checkpoint
            .files
            .iter()
            .try_for_each(|f| std::fs::hard_link(index_dir.join(&f.name), dir.join(&f.name)));
        match linked {
            Ok(()) => return Ok(Pinned::new(dir, checkpoint)),
            Err(e) => last_error = Some(e),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Err(ApiError::from(last_error.expect("an attempt failed")))
}

fn drop_abandoned_pins(state: &crate::shard::segrep::CopyState) {
    state
        .pinned
        .lock()
        .retain(|_, pinned| pinned.idle_for() < ABANDONED_AFTER);
}

fn not_the_primary(target: &CopyTarget) -> ApiError {
    ApiError::new(
        409,
        "shard_not_in_primary_mode_exception",
        format!(
            "[{}][{}] this copy is not the primary (any more)",
            target.index, target.shard
        ),
    )
    .with_kind(crate::error::ErrorKind::Moved)
}

impl SegrepService {
    /// Streams a file of a pinned checkpoint; chunks are read on the `replication` pool.
    pub(crate) fn serve_file_stream(&self, request: FileStreamRequest) -> ApiResult<ByteStream> {
        let pinned = self.pinned(&request.session)?;
        let pool = self
            .core
            .pressure
            .pool(crate::pressure::settings::REPLICATION)
            .clone();
        serve_file(Arc::new(ServedPin(pinned)), request, pool)
    }
}
