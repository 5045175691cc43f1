//! The replica's side of segment replication: one copy task per copy at a time, which asks
//! the primary for its checkpoint, copies the files it lacks and installs the checkpoint, as
//! long as the primary has published something newer than what the copy searches.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::time::Duration;

use shoal_engine::SegmentCheckpoint;

use super::round::RoundClock;
use super::SegrepService;
use super::{
    position, CheckpointInfo, CheckpointInfoAction, CopyTarget, FileStreamAction,
    PublishedCheckpoint, ReleaseCheckpointAction,
};
use crate::error::{ApiError, ApiResult};
use crate::shard::lookup::LocalCopy;
use crate::transfer::peer::PeerSource;
use crate::transfer::target::{Differing, FileTransfer, Progress, TransferControl};
use crate::transfer::FileMeta;

const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// How a replication round that did not fail ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RoundEnd {
    /// The copy searches the newest checkpoint the round found (copied now or before).
    Current,
    /// A remote-backed copy was published a checkpoint the repository does not list yet
    /// (uploads come before publications, so the listing lags). The copy keeps searching
    /// what it has; the next publication tries again.
    RepositoryBehind,
}

impl SegrepService {
    /// A primary published a checkpoint: remember it, and copy until current unless a copy
    /// task runs for this copy already (it picks the newest up when done with the current
    /// one). Runs on the `replication` pool; the primary does not wait for the answer.
    pub(super) fn handle_published_checkpoint(
        &self,
        published: PublishedCheckpoint,
    ) -> ApiResult<()> {
        let copy = self.segment_replica(&published.target).inspect_err(|e| {
            tracing::debug!(index = %published.target.index, shard = published.target.shard, error = %e, "published checkpoint not for a segment replica here");
        })?;
        let wanted = (published.primary_term, published.version);
        tracing::debug!(index = %published.target.index, shard = published.target.shard, ?wanted, copying = copy.shard.segrep.copying.load(Ordering::Acquire), "checkpoint published to this replica");
        copy.shard.segrep.note_published(wanted);
        if !copy.shard.segrep.copying.swap(true, Ordering::AcqRel) {
            self.copy_until_current(&published.target, &copy);
        }
        Ok(())
    }

    /// Brings a replica to its primary's current checkpoint now (a `_refresh`), after any
    /// copy task that runs for it; then catches up on what was published meanwhile.
    pub(crate) fn sync_segments(&self, target: CopyTarget) -> ApiResult<RoundEnd> {
        let target = &target;
        let copy = self.segment_replica(target)?;
        let state = &copy.shard.segrep;
        let deadline = std::time::Instant::now() + CALL_TIMEOUT;
        while state.copying.swap(true, Ordering::AcqRel) {
            if std::time::Instant::now() > deadline {
                return Err(ApiError::new(
                    503,
                    "receive_timeout_transport_exception",
                    "a segment replication round did not end in time",
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let synced = self.replicate_once(target, &copy);
        self.copy_until_current(target, &copy);
        synced
    }

    /// Copies checkpoints until the copy has installed the newest one published to it. The
    /// caller holds the copy's `copying` flag; it is cleared here.
    fn copy_until_current(&self, target: &CopyTarget, copy: &LocalCopy) {
        let state = &copy.shard.segrep;
        loop {
            if !state.is_behind() {
                state.copying.store(false, Ordering::Release);
                // A publication that came in after the check but before the flag cleared
                // found the task running; look once more.
                if state.is_behind() && !state.copying.swap(true, Ordering::AcqRel) {
                    continue;
                }
                return;
            }
            // The task stops until the next publication unless the round got the copy current.
            match self.replicate_once(target, copy) {
                Ok(RoundEnd::Current) => continue,
                Ok(RoundEnd::RepositoryBehind) => {
                    tracing::debug!(index = %target.index, shard = target.shard, "the repository lists nothing newer yet");
                }
                Err(error) => {
                    tracing::warn!(index = %target.index, shard = target.shard, error = %error, "segment replication round failed");
                }
            }
            state.copying.store(false, Ordering::Release);
            return;
        }
    }

    /// One round: the primary's current checkpoint, its files, installed here.
    pub(crate) fn replicate_once(
        &self,
        target: &CopyTarget,
        copy: &LocalCopy,
    ) -> ApiResult<RoundEnd> {
        let (primary_id, address) = self.primary_of(target)?;
        let mut clock = RoundClock::start();
        if self
            .core
            .index_by_uuid(&target.index_uuid)?
            .is_remote_store()
        {
            return self.copy_from_repository(target, copy, &address, clock);
        }
        let info = self
            .core
            .call::<CheckpointInfoAction>(&address, target, CALL_TIMEOUT)?;
        clock.checkpoint_info_done();
        let outcome = self.copy_checkpoint(target, copy, (&primary_id, &address), &info, clock);
        // Released whatever happened: the pin only costs disk space on the primary.
        drop(
            self.core
                .send::<ReleaseCheckpointAction>(&address, &info.session, CALL_TIMEOUT),
        );
        outcome.map(|()| RoundEnd::Current)
    }

    fn copy_checkpoint(
        &self,
        target: &CopyTarget,
        copy: &LocalCopy,
        (primary_id, address): (&str, &str),
        info: &CheckpointInfo,
        clock: RoundClock,
    ) -> ApiResult<()> {
        let checkpoint = &info.checkpoint;
        let state = &copy.shard.segrep;
        if state.has_installed(position(checkpoint)) {
            return Ok(());
        }
        let source = PeerSource::<FileStreamAction> {
            transport: self.core.transport.clone(),
            node: primary_id.to_string(),
            address: address.to_string(),
            session: info.session.clone(),
            chunk_bytes: self.core.recovery_limits().chunk_bytes,
            idle_timeout: CALL_TIMEOUT,
            action: PhantomData,
        };
        self.install_from(target, copy, address, checkpoint, &source, clock)
    }

    /// One round of a remote-backed replica: the newest checkpoint its primary uploaded,
    /// copied from the repository (the primary sends no segment bytes).
    fn copy_from_repository(
        &self,
        target: &CopyTarget,
        copy: &LocalCopy,
        primary_address: &str,
        mut clock: RoundClock,
    ) -> ApiResult<RoundEnd> {
        let Some((source, checkpoint)) = self
            .remote
            .newest_checkpoint(&target.index_uuid, target.shard)?
        else {
            return Ok(RoundEnd::Current);
        };
        clock.checkpoint_info_done();
        // The repository may lag behind the commit a peer recovery copied from the primary:
        // installing an older checkpoint would drop what lies between.
        if copy.shard.segrep.has_installed(position(&checkpoint))
            || copy.engine().is_behind_store(&checkpoint)
        {
            return Ok(match copy.shard.segrep.is_behind() {
                true => RoundEnd::RepositoryBehind,
                false => RoundEnd::Current,
            });
        }
        self.install_from(target, copy, primary_address, &checkpoint, &source, clock)?;
        copy.shard
            .remote
            .stats
            .segment_downloads
            .fetch_add(1, Ordering::Relaxed);
        Ok(RoundEnd::Current)
    }

    /// Copies a checkpoint's files this copy lacks from `source`, then installs it.
    fn install_from(
        &self,
        target: &CopyTarget,
        copy: &LocalCopy,
        address: &str,
        checkpoint: &SegmentCheckpoint,
        source: &dyn crate::transfer::FileSource,
        mut clock: RoundClock,
    ) -> ApiResult<()> {
        let state = &copy.shard.segrep;
        let control = CopyControl { node: self, copy };
        let index_dir = copy.engine().config().index_dir();
        let transfer = FileTransfer {
            dir: &index_dir,
            source,
            runtime: &self.core.runtime,
            limiter: &self.limiter,
            control: &control,
            // Files of one name never change on the primary: other bytes here are damage.
            differing: Differing::Fail,
            files_in_flight: self.core.recovery_limits().concurrent_chunks,
        };
        let stats = transfer.run(&file_list(checkpoint)).map_err(|e| {
            // A damaged file (or a copy already failed): the copy is reported and recovered.
            if e.kind == crate::error::ErrorKind::CopyFailed {
                copy.engine().fail_engine(format!(
                    "segment replication found a damaged file: {}",
                    e.reason
                ));
            }
            e
        })?;
        clock.files_done(&stats);
        copy.engine().install_checkpoint(checkpoint)?;
        self.forget_precopied(copy, checkpoint);
        *state.installed.lock() = Some(position(checkpoint));
        let round = clock.finish();
        tracing::debug!(
            index = %target.index,
            shard = target.shard,
            version = checkpoint.version,
            files_copied = stats.files_copied,
            bytes_copied = stats.bytes_copied,
            files_reused = stats.files_reused,
            checkpoint_info_ms = round.get_checkpoint_info_ms,
            files_ms = round.get_files_ms,
            finalize_ms = round.finalize_ms,
            round_ms = round.time_ms,
            "segment replication round done"
        );
        self.report_visible(address, target, checkpoint, round);
        Ok(())
    }

    /// The local copy a segment-replication message names, if it is a writer-less replica.
    pub(super) fn segment_replica(&self, target: &CopyTarget) -> ApiResult<LocalCopy> {
        let shard_id = shoal_types::ShardId::new(target.index_uuid.clone(), target.shard as u32);
        let allocation = shoal_types::AllocationId::from(target.allocation_id.as_str());
        let copy = self
            .core
            .local_copy(&target.index, &shard_id, Some(&allocation))?;
        if !copy.engine().is_writer_less() {
            return Err(ApiError::new(
                409,
                "illegal_index_shard_state_exception",
                format!(
                    "[{}][{}] this copy indexes for itself (it is the primary)",
                    target.index, target.shard
                ),
            ));
        }
        Ok(copy)
    }

    /// The node of the shard's active primary (id, transport address).
    pub(super) fn primary_of(&self, target: &CopyTarget) -> ApiResult<(String, String)> {
        let state = self.core.cluster_state();
        state
            .primary(&target.index, target.shard as u32)
            .filter(|p| p.is_active())
            .and_then(|p| p.node.clone())
            .and_then(|id| {
                state
                    .nodes
                    .get(&id)
                    .map(|n| (id, n.transport_address.clone()))
            })
            .ok_or_else(|| {
                ApiError::new(
                    503,
                    "no_shard_available_action_exception",
                    format!(
                        "[{}][{}] no active primary to copy segments from",
                        target.index, target.shard
                    ),
                )
            })
    }

    /// `indices.replication.max_bytes_per_sec` (`0`: unthrottled), unless unset or `-1`:
    /// then the recovery limit.
    pub(super) fn replication_bytes_per_sec(&self) -> Option<u64> {
        use crate::recovery::throttle::{parse_rate, REPLICATION_MAX_BYTES_PER_SEC};
        match self.core.cluster_setting(REPLICATION_MAX_BYTES_PER_SEC) {
            Some(text) if !matches!(text.trim(), "-1" | "-1b") => parse_rate(&text).ok().flatten(),
            _ => self.core.recovery_limits().bytes_per_sec,
        }
    }
}

/// The checkpoint's files as a transfer lists them.
pub(crate) fn file_list(checkpoint: &SegmentCheckpoint) -> Vec<FileMeta> {
    file_metas(&checkpoint.files)
}

/// Commit files as a file transfer lists them.
pub(crate) fn file_metas(files: &[shoal_engine::StoreFile]) -> Vec<FileMeta> {
    files
        .iter()
        .map(|f| FileMeta {
            name: f.name.clone(),
            length: f.length,
            crc32c: f.checksum,
        })
        .collect()
}

/// A copy task's side of its file transfer.
struct CopyControl<'a> {
    node: &'a SegrepService,
    copy: &'a LocalCopy,
}

impl TransferControl for CopyControl<'_> {
    /// A copy closed or failed meanwhile stops copying now.
    fn check(&self) -> ApiResult<()> {
        match self.copy.engine().failure() {
            Some(reason) => Err(ApiError::new(
                409,
                "illegal_index_shard_state_exception",
                format!("segment replication stopped: {reason}"),
            )),
            None => Ok(()),
        }
    }

    fn max_bytes_per_sec(&self) -> Option<u64> {
        self.node.replication_bytes_per_sec()
    }

    fn progress(&self, _event: Progress<'_>) {}

    fn known_checksum(&self, name: &str) -> Option<(u64, u32)> {
        self.copy.engine().known_checksum(name)
    }
}

/// A remote-backed copy's sync asked for by a caller that wants the newest checkpoint
/// searched (a `_refresh`), which the repository does not list yet.
pub(crate) fn repository_behind(target: &CopyTarget) -> ApiError {
    ApiError::new(
        503,
        "replication_failed_exception",
        format!(
            "[{}][{}] the remote store has nothing newer than what this copy holds",
            target.index, target.shard
        ),
    )
}
