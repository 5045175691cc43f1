//! A primary's part of a snapshot: flush, pin the commit (hard links, so merges may delete
//! the files meanwhile), upload the files the repository lacks, and describe the commit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use shoal_state::RepositoryMetadata;
use shoal_storage::Repository;
use shoal_types::ShardId;

use super::layout::{BlobLayout, ShardSnapshot, SnapshotFile};
use super::throttle::Throttles;
use super::SnapshotService;
use crate::error::{ApiError, ApiResult};

/// Asks the node holding a primary to snapshot it.
pub struct SnapshotShardAction;
impl shoal_transport::Action for SnapshotShardAction {
    const NAME: &'static str = "internal:cluster/snapshot/shard";
    type Request = ShardRequest;
    type Response = ShardSnapshot;
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardRequest {
    pub index: String,
    pub shard_id: ShardId,
    pub repository: String,
    /// The repository as the coordinator saw it registered: a node that has not applied the
    /// registration yet opens it all the same.
    pub repository_meta: RepositoryMetadata,
    pub snapshot_uuid: String,
}

pub(crate) fn register_actions(
    actions: &mut crate::rpc::NodeActions,
    service: &Arc<SnapshotService>,
) {
    actions.register_on::<SnapshotShardAction, _>(
        Arc::downgrade(service),
        SnapshotService::snapshot_local_primary,
    );
}

impl SnapshotService {
    /// Snapshots the local primary a request names.
    pub(crate) fn snapshot_local_primary(&self, request: ShardRequest) -> ApiResult<ShardSnapshot> {
        let started = Instant::now();
        let start_millis = shoal_cluster::now_millis();
        let copy = self
            .core
            .local_copy(&request.index, &request.shard_id, None)?;
        let primary = copy
            .replication
            .as_ref()
            .is_some_and(|r| r.tracker.lock().is_primary_mode());
        if !primary {
            return Err(ApiError::new(
                409,
                "shard_not_in_primary_mode_exception",
                format!(
                    "{} is not the primary on this node any more: the coordinator asks the new one",
                    request.shard_id
                ),
            ));
        }
        let super::Opened {
            repository,
            throttles,
            options,
            ..
        } = self.open(&request.repository, &request.repository_meta)?;
        let engine = copy.engine();
        // The snapshot holds every operation acknowledged before it started.
        engine.flush(true)?;
        let pin_dir = self
            .core
            .paths
            .shard_dir(
                &request.shard_id.index_uuid,
                request.shard_id.shard as usize,
            )
            .join("snapshot-pins")
            .join(&request.snapshot_uuid);
        let pinned = crate::segrep::source::pin_checkpoint(engine, pin_dir)?;
        let pinned_ms = started.elapsed().as_millis() as u64;
        let checkpoint = pinned.checkpoint();
        let files = checkpoint.files.clone();
        let (mut incremental_files, mut incremental_bytes) = (0, 0);
        let mut parts = BTreeMap::new();
        let upload = Upload {
            repository: &repository,
            throttles: &throttles,
            request: &request,
        };
        for file in &files {
            self.check_not_aborted(&request.repository, &request.snapshot_uuid)?;
            let layout = match self.stored_layout(&repository, file, options.chunk_bytes)? {
                Some(stored) => stored,
                None => {
                    let path = pinned.path(&file.name).ok_or_else(|| {
                        ApiError::internal(format!("pinned commit lacks [{}]", file.name))
                    })?;
                    let layout = BlobLayout::for_upload(file.length, options.chunk_bytes);
                    self.upload_file(&upload, file, &path, layout)?;
                    incremental_files += 1;
                    incremental_bytes += file.length;
                    layout
                }
            };
            if let BlobLayout::Parts(part_bytes) = layout {
                parts.insert(file.name.clone(), part_bytes);
            }
        }
        tracing::info!(index = %request.index, shard = request.shard_id.shard, snapshot = %request.snapshot_uuid, files = files.len(), uploaded = incremental_files, bytes = incremental_bytes, pinned_ms, took_ms = started.elapsed().as_millis() as u64, "shard snapshotted");
        Ok(ShardSnapshot {
            files,
            meta_json: checkpoint.meta.clone(),
            local_checkpoint: checkpoint.local_checkpoint,
            max_seq_no: checkpoint.max_seq_no,
            incremental_files,
            incremental_bytes,
            parts,
            start_millis,
            time_millis: started.elapsed().as_millis() as u64,
            node_id: self.core.node_id.clone(),
        })
    }
}

/// Where a shard snapshot uploads its files, and at what pace.
struct Upload<'a> {
    repository: &'a Repository,
    throttles: &'a Throttles,
    request: &'a ShardRequest,
}

impl SnapshotService {
    /// How the repository holds `file` already (whole, or in parts of its `chunk_size`), or
    /// `None` when this snapshot must upload it.
    fn stored_layout(
        &self,
        repository: &Repository,
        file: &SnapshotFile,
        chunk_bytes: Option<u64>,
    ) -> ApiResult<Option<BlobLayout>> {
        let mut candidates = vec![BlobLayout::Whole];
        if let parts @ BlobLayout::Parts(_) = BlobLayout::for_upload(file.length, chunk_bytes) {
            candidates.push(parts);
        }
        for layout in candidates {
            if self.holds_every_piece(repository, file, layout)? {
                return Ok(Some(layout));
            }
        }
        Ok(None)
    }

    fn holds_every_piece(
        &self,
        repository: &Repository,
        file: &SnapshotFile,
        layout: BlobLayout,
    ) -> ApiResult<bool> {
        for (key, range) in layout.pieces(file) {
            if self.block_on(repository.size_of(&key))? != Some(range.end - range.start) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Uploads `file` (the pinned copy at `path`) as `layout` says, at the repository's
    /// snapshot rate; an abort stops it midway.
    fn upload_file(
        &self,
        upload: &Upload<'_>,
        file: &SnapshotFile,
        path: &std::path::Path,
        layout: BlobLayout,
    ) -> ApiResult<()> {
        let (repository_name, uuid) = (&upload.request.repository, &upload.request.snapshot_uuid);
        let pacing = shoal_storage::Pacing {
            delay: &|bytes| upload.throttles.snapshot.delay(bytes),
            cancelled: &|| self.check_not_aborted(repository_name, uuid).is_err(),
        };
        for (key, range) in layout.pieces(file) {
            let uploaded = self.block_on(
                upload
                    .repository
                    .put_file_range_paced(&key, path, range, &pacing),
            );
            // An abort stops the file's upload midway, not only between files.
            self.check_not_aborted(repository_name, uuid)?;
            uploaded?;
        }
        Ok(())
    }
}
