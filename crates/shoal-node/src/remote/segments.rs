//! Segments in the remote store: a primary uploads each refresh's new files and then a
//! metadata file naming the checkpoint; replicas and restores read the newest metadata file
//! and copy the files they lack from the repository.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use shoal_engine::SegmentCheckpoint;
use shoal_storage::Repository;

use super::layout::{metadata_term, now_millis, SegmentMetadata, ShardKeys, METADATA_PREFIX};
use super::{storage_error, RemoteStoreService, METADATA_RETENTION};
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::recovery::throttle::Rate;
use crate::shard::remote::UploadStats;
use crate::shard::IndexShard;
use crate::transfer::{ByteStream, FileMeta, FileSource};

/// Garbage is collected after every this many uploads of a copy (listing and reading the
/// retained metadata files at every refresh would cost more than the space it frees).
const COLLECT_EVERY: u64 = 10;

impl RemoteStoreService {
    /// Uploads the local primary's current checkpoint (the files the repository lacks, then a
    /// metadata file) and returns it: replicas may be told about it once this returns.
    pub(crate) fn upload_current_checkpoint(
        &self,
        service: &IndexService,
        shard: usize,
        copy: &IndexShard,
    ) -> ApiResult<SegmentCheckpoint> {
        let repository = &self.repositories()?.segment;
        let keys = ShardKeys::new(&service.uuid(), shard);
        let state = &copy.remote;
        let _one_at_a_time = state.segment_upload.lock();
        // `_refresh`, a replica sync and the publication all ask for the same commit: only
        // the first pins (hard-links every file) and uploads it.
        let current = copy.engine().segment_checkpoint()?;
        if *state.uploaded_checkpoint.lock() == Some(crate::segrep::position(&current)) {
            return Ok(current);
        }
        let pin_dir = self
            .core
            .paths
            .shard_dir(&service.uuid(), shard)
            .join("remote-upload")
            .join(uuid::Uuid::new_v4().simple().to_string());
        let pinned = crate::segrep::source::pin_checkpoint(copy.engine(), pin_dir)?;
        let checkpoint = pinned.checkpoint().clone();
        let position = crate::segrep::position(&checkpoint);
        if *state.uploaded_checkpoint.lock() == Some(position) {
            return Ok(checkpoint);
        }
        let stats = &state.stats;
        UploadStats::add(&stats.segment_uploads_started, 1);
        let _ = stats.pending_since.compare_exchange(
            0,
            now_millis(),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
        let started = Instant::now();
        let uploaded = self.upload_pinned(repository, &keys, &pinned, copy);
        UploadStats::add(
            &stats.segment_upload_millis,
            started.elapsed().as_millis() as u64,
        );
        let (files, bytes) = uploaded.inspect_err(|_| {
            UploadStats::add(&stats.segment_uploads_failed, 1);
            UploadStats::add(&stats.consecutive_segment_failures, 1);
        })?;
        UploadStats::add(&stats.segment_uploads_succeeded, 1);
        UploadStats::add(&stats.segment_bytes_uploaded, bytes);
        stats
            .consecutive_segment_failures
            .store(0, Ordering::Relaxed);
        stats.bytes_lag.store(0, Ordering::Relaxed);
        stats.pending_since.store(0, Ordering::Relaxed);
        stats
            .last_segment_upload_at
            .store(now_millis(), Ordering::Relaxed);
        *state.uploaded_checkpoint.lock() = Some(position);
        tracing::debug!(index = %service.name(), shard, version = checkpoint.version, files, bytes, "segments uploaded");
        if UploadStats::get(&stats.segment_uploads_succeeded).is_multiple_of(COLLECT_EVERY) {
            if let Err(e) = self.collect_garbage(&keys, copy) {
                tracing::warn!(index = %service.name(), shard, error = %e, "remote store garbage not collected");
            }
        }
        Ok(checkpoint)
    }

    /// Uploads the pinned checkpoint's files the repository lacks, then its metadata file;
    /// returns how many files and bytes went up.
    fn upload_pinned(
        &self,
        repository: &Repository,
        keys: &ShardKeys,
        pinned: &crate::shard::segrep::Pinned,
        copy: &IndexShard,
    ) -> ApiResult<(usize, u64)> {
        self.learn_uploaded_files(repository, keys, copy)?;
        let checkpoint = pinned.checkpoint();
        let missing: Vec<_> = {
            let uploaded = copy.remote.uploaded.lock();
            checkpoint
                .files
                .iter()
                .filter(|f| uploaded.get(&f.name) != Some(&(f.length, f.checksum)))
                .cloned()
                .collect()
        };
        let lag = missing.iter().map(|f| f.length).sum();
        copy.remote.stats.bytes_lag.store(lag, Ordering::Relaxed);
        let bytes = self.upload_files(repository, keys, pinned, &missing, copy)?;
        // The pacing stops the files; the metadata file is not paced.
        still_uploading(copy)?;
        self.upload_metadata(repository, keys, checkpoint)?;
        Ok((missing.len(), bytes))
    }

    fn upload_files(
        &self,
        repository: &Repository,
        keys: &ShardKeys,
        pinned: &crate::shard::segrep::Pinned,
        files: &[shoal_engine::StoreFile],
        copy: &IndexShard,
    ) -> ApiResult<u64> {
        let upload = &self.repositories()?.segment_rates.upload;
        let pacing = shoal_storage::Pacing {
            delay: &|bytes| upload.delay(bytes),
            cancelled: &|| copy.stopped_acting_as_primary(),
        };
        let mut bytes = 0;
        for file in files {
            let path = pinned.path(&file.name).ok_or_else(|| {
                ApiError::internal(format!("pinned checkpoint lacks [{}]", file.name))
            })?;
            let key = keys.segment_file(&file.name);
            bytes += self.block_on(repository.put_file_paced(&key, &path, &pacing))?;
            copy.remote
                .uploaded
                .lock()
                .insert(file.name.clone(), (file.length, file.checksum));
        }
        Ok(bytes)
    }

    fn upload_metadata(
        &self,
        repository: &Repository,
        keys: &ShardKeys,
        checkpoint: &SegmentCheckpoint,
    ) -> ApiResult<()> {
        let metadata = SegmentMetadata {
            checkpoint: checkpoint.clone(),
            node: self.core.node_id.clone(),
            uploaded_at_millis: now_millis(),
        };
        let bytes = serde_json::to_vec(&metadata).map_err(|e| ApiError::internal(e.to_string()))?;
        let key = keys.metadata_file(checkpoint, metadata.uploaded_at_millis);
        self.block_on(repository.put(&key, Bytes::from(bytes)))
    }

    /// A primary new to the shard learns which files the repository already holds from the
    /// newest metadata file, so it uploads only what is new (and a file of the same name but
    /// other bytes is caught as damage rather than overwritten).
    fn learn_uploaded_files(
        &self,
        repository: &Repository,
        keys: &ShardKeys,
        copy: &IndexShard,
    ) -> ApiResult<()> {
        if copy.remote.uploaded_known.load(Ordering::Acquire) {
            return Ok(());
        }
        if let Some((_, metadata)) = self.newest_metadata(repository, keys)? {
            let mut uploaded = copy.remote.uploaded.lock();
            for file in metadata.checkpoint.files {
                uploaded.insert(file.name, (file.length, file.checksum));
            }
        }
        copy.remote.uploaded_known.store(true, Ordering::Release);
        Ok(())
    }

    /// The newest checkpoint uploaded for a shard, with where to read its files.
    pub(crate) fn newest_checkpoint(
        &self,
        index_uuid: &str,
        shard: usize,
    ) -> ApiResult<Option<(RemoteSource, SegmentCheckpoint)>> {
        let source = self.segment_source(ShardKeys::new(index_uuid, shard))?;
        let newest = self.newest_metadata(&source.repository, &source.keys)?;
        Ok(newest.map(|(_, metadata)| (source, metadata.checkpoint)))
    }

    /// The segment files of a shard in this node's segment repository, read at its rate.
    pub(crate) fn segment_source(&self, keys: ShardKeys) -> ApiResult<RemoteSource> {
        let repositories = self.repositories()?;
        Ok(RemoteSource {
            repository: repositories.segment.clone(),
            keys,
            download: repositories.segment_rates.download.clone(),
        })
    }

    /// The shard's newest metadata file (its key and content), if it has one.
    pub(crate) fn newest_metadata(
        &self,
        repository: &Repository,
        keys: &ShardKeys,
    ) -> ApiResult<Option<(String, SegmentMetadata)>> {
        let names = self.metadata_keys(repository, keys)?;
        let Some(newest) = names.last() else {
            return Ok(None);
        };
        Ok(Some((
            newest.clone(),
            self.read_metadata(repository, newest)?,
        )))
    }

    /// The shard's metadata file keys, oldest first.
    fn metadata_keys(&self, repository: &Repository, keys: &ShardKeys) -> ApiResult<Vec<String>> {
        let mut names: Vec<String> = self
            .block_on(repository.list(&keys.metadata_folder()))?
            .into_iter()
            .map(|o| o.key)
            .filter(|k| {
                k.rsplit('/')
                    .next()
                    .is_some_and(|n| n.starts_with(METADATA_PREFIX))
            })
            .collect();
        names.sort();
        Ok(names)
    }

    fn read_metadata(&self, repository: &Repository, key: &str) -> ApiResult<SegmentMetadata> {
        let bytes = self.block_on(repository.get(key))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::new(
                500,
                "corrupt_index_exception",
                format!("remote metadata file [{key}] cannot be read: {e}"),
            )
        })
    }

    /// Keeps the newest `cluster.remote_store.index.segment_metadata.retention.max_count`
    /// metadata files, the segment files they name, and the translog batches above the
    /// oldest kept checkpoint; deletes the rest. A primary that finds metadata of a newer
    /// term was deposed and deletes nothing: what it would call garbage, the new primary may
    /// be about to name.
    fn collect_garbage(&self, keys: &ShardKeys, copy: &IndexShard) -> ApiResult<()> {
        let repositories = self.repositories()?;
        let repository = &repositories.segment;
        let retain = self
            .core
            .cluster_setting(METADATA_RETENTION)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(10)
            .max(1);
        let names = self.metadata_keys(repository, keys)?;
        let own_term = copy.engine().primary_term();
        if let Some(newer) = newer_term(&names, own_term) {
            tracing::info!(
                own_term,
                newer,
                "a newer primary writes this shard's remote store: no garbage collected"
            );
            return Ok(());
        }
        let (old, kept) = names.split_at(names.len().saturating_sub(retain));
        let mut referenced = HashSet::new();
        let mut oldest_kept_checkpoint = i64::MAX;
        for key in kept {
            let metadata = self.read_metadata(repository, key)?;
            oldest_kept_checkpoint =
                oldest_kept_checkpoint.min(metadata.checkpoint.local_checkpoint);
            referenced.extend(metadata.checkpoint.files.into_iter().map(|f| f.name));
        }
        for key in old {
            self.block_on(repository.delete(key))?;
        }
        // What this copy uploaded (or found named when it became primary) is its own to
        // delete; anything else waits out the grace.
        let known: HashSet<String> = copy.remote.uploaded.lock().keys().cloned().collect();
        let data = self.block_on(repository.list(&keys.segment_data_folder()))?;
        let now = now_millis() as i64;
        let mut deleted = 0;
        for object in data {
            let name = object.key.rsplit('/').next().unwrap_or_default();
            if !is_garbage(name, object.modified_millis, now, &referenced, &known) {
                continue;
            }
            self.block_on(repository.delete(&object.key))?;
            copy.remote.uploaded.lock().remove(name);
            deleted += 1;
        }
        let batches =
            self.delete_translog_below(&repositories.translog, keys, oldest_kept_checkpoint)?;
        tracing::debug!(
            metadata = old.len(),
            files = deleted,
            translog_batches = batches,
            "remote store garbage collected"
        );
        Ok(())
    }
}

/// How old a segment file no metadata names and this copy did not upload must be before it
/// is deleted: it may be a new primary's, uploaded just before the metadata that names it
/// (or an upload that died before its metadata, which is garbage once this old).
const UNKNOWN_FILE_GRACE_MILLIS: i64 = 10 * 60 * 1000;

/// A copy that stopped acting as primary uploads nothing more (see
/// [`IndexShard::stopped_acting_as_primary`]).
pub(crate) fn still_uploading(copy: &IndexShard) -> ApiResult<()> {
    if !copy.stopped_acting_as_primary() {
        return Ok(());
    }
    Err(ApiError::new(
        503,
        "shard_not_in_primary_mode_exception",
        format!(
            "[{}][{}] segment upload stopped: this copy left the node or handed its primary role off",
            copy.index_name(),
            copy.shard_id().shard
        ),
    ))
}

/// The newest primary term above `own_term` among metadata keys, if any.
fn newer_term(metadata_keys: &[String], own_term: i64) -> Option<i64> {
    metadata_keys
        .iter()
        .filter_map(|key| metadata_term(key))
        .filter(|term| *term > own_term)
        .max()
}

/// A segment file may go when no kept metadata names it, and either this copy knows it (it
/// uploaded it, or found it named when it became primary) or it is old enough.
fn is_garbage(
    name: &str,
    modified_millis: i64,
    now_millis: i64,
    referenced: &HashSet<String>,
    known: &HashSet<String>,
) -> bool {
    if referenced.contains(name) {
        return false;
    }
    known.contains(name) || now_millis - modified_millis > UNKNOWN_FILE_GRACE_MILLIS
}

#[cfg(test)]
mod garbage_tests {
    use super::*;

    fn set(names: &[&str]) -> HashSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_primary_seeing_metadata_of_a_newer_term_collects_nothing() {
        let keys = ShardKeys::new("u", 0);
        let key = |term: i64| {
            let checkpoint = SegmentCheckpoint {
                primary_term: term,
                version: 1,
                local_checkpoint: 0,
                max_seq_no: 0,
                files: Vec::new(),
                meta: String::new(),
            };
            keys.metadata_file(&checkpoint, 1)
        };
        let names = vec![key(3), key(3), key(4)];
        assert_eq!(newer_term(&names, 3), Some(4));
        assert_eq!(newer_term(&names, 4), None);
        assert_eq!(metadata_term(&key(12)), Some(12));
    }

    #[test]
    fn unnamed_files_go_only_when_known_or_older_than_the_grace() {
        let (referenced, known) = (set(&["kept.idx"]), set(&["merged_away.idx"]));
        let now = 100 * 60 * 1000;
        let fresh = now - 1000;
        let stale = now - UNKNOWN_FILE_GRACE_MILLIS - 1;
        assert!(!is_garbage("kept.idx", stale, now, &referenced, &known));
        assert!(is_garbage(
            "merged_away.idx",
            fresh,
            now,
            &referenced,
            &known
        ));
        // Uploaded by another primary before its metadata: left alone while fresh.
        assert!(!is_garbage(
            "new_primary.idx",
            fresh,
            now,
            &referenced,
            &known
        ));
        assert!(is_garbage("orphan.idx", stale, now, &referenced, &known));
    }
}

/// A shard's segment files in a repository, as a file transfer reads them, at the
/// repository's download rate.
pub struct RemoteSource {
    pub repository: Repository,
    pub keys: ShardKeys,
    pub download: Arc<Rate>,
}

impl FileSource for RemoteSource {
    fn open(&self, file: &FileMeta, offset: u64) -> BoxFuture<'static, ApiResult<ByteStream>> {
        let (repository, key) = (self.repository.clone(), self.keys.segment_file(&file.name));
        let download = self.download.clone();
        Box::pin(async move {
            let stream = open_object(&repository, &key, offset).await?;
            Ok(super::rates::paced(stream, download))
        })
    }

    fn describe(&self) -> String {
        self.repository.describe()
    }
}

/// An object's bytes from `offset` on, as a file transfer reads them.
pub(crate) async fn open_object(
    repository: &Repository,
    key: &str,
    offset: u64,
) -> ApiResult<ByteStream> {
    let stream = repository
        .get_stream(key, offset)
        .await
        .map_err(storage_error)?;
    Ok(stream.map_err(storage_error).boxed())
}
