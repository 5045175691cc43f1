//! Merged-segment pre-copy (OpenSearch's merged segment warmer, `indices.replication.merges.
//! warmer.*`): a merge on a segment-replicated primary sends its new segment to every replica
//! before the primary commits it, so the checkpoint that names it finds the files there and a
//! merge never shows up as a lag spike.
//!
//! ```text
//! primary: merge thread                                 replica
//! merged segment written (engine's merge hook)
//!   pins its files, sends publish_merged_segment ─────▶ copies the files it lacks into a
//!   waits (at most the warmer timeout)                  staging directory (file stream of the
//!                                                       pin), links them into its index
//!   ◀───────────────────────────────────────────────── answers with the bytes it copied
//! tantivy commits the merge; the next checkpoint names it; the replica's copy reuses the files
//! ```
//!
//! The merge waits, not the refresh: while the merged segment travels, refreshes commit and
//! publish checkpoints that still name the segments being merged, so replicas keep up with new
//! documents. The merge's commit is held back for the copy (bounded by the timeout), which is
//! OpenSearch's order too (its warmer runs before Lucene commits the merge).
//!
//! A replica receives into `<shard>/segrep/precopy-<session>` and hard-links the complete
//! files into its index directory, so a checkpoint copy that wants one of them at the same time
//! (the primary gave up waiting) never shares a partial file with the pre-copy. Files no
//! checkpoint named long after they arrived (the merge was abandoned, or merged away again
//! before the replica installed it) are deleted after a later install.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use shoal_engine::{Engine, MergedSegment, SegmentCheckpoint, StoreFile};

use super::source::copy_targets;
use super::{CopyTarget, FileStreamAction, SegrepService};
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::rpc::Pending;
use crate::shard::lookup::LocalCopy;
use crate::shard::segrep::Pinned;
use crate::transfer::peer::PeerSource;
use crate::transfer::target::{Differing, FileTransfer, Progress, TransferControl};

pub const ENABLED: &str = "indices.replication.merges.warmer.enabled";
pub const MIN_SEGMENT_SIZE: &str = "indices.replication.merges.warmer.min_segment_size_threshold";
pub const TIMEOUT: &str = "indices.replication.merges.warmer.timeout";

/// Below this a merged segment travels with the checkpoint that names it. At the default
/// replication rate (40mb/s) 2 MB cost a checkpoint copy ~50 ms, well inside the issue's lag
/// budget (refresh interval + 200 ms), while a pre-copy costs a round trip and holds the merge
/// back. OpenSearch's 500mb is sized for remote-store uploads; a 500 MB segment is ~12 s of
/// lag at 40mb/s, which is what pre-copy exists to remove.
const DEFAULT_MIN_SEGMENT_SIZE: u64 = 2 << 20;
/// OpenSearch's default: a merge waits at most this long for its replicas.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// How often a primary waiting for a pre-copy looks whether its copy closed or a replica left.
const CANCEL_CHECK_EVERY: Duration = Duration::from_millis(250);
/// A pre-copied file still unnamed by an installed checkpoint this long after the primary
/// stopped waiting for it belongs to an abandoned merge (the merge commits right after the
/// wait; the margin covers a commit that queued behind a slow one).
const ORPHAN_MARGIN: Duration = Duration::from_secs(60);

/// The primary sends a replica a merged segment before committing the merge.
pub struct PublishMergedSegmentAction;
impl shoal_transport::Action for PublishMergedSegmentAction {
    const NAME: &'static str = "internal:index/shard/replication/publish_merged_segment";
    type Request = MergedSegmentCopy;
    type Response = PreCopied;
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergedSegmentCopy {
    pub target: CopyTarget,
    pub primary_term: i64,
    /// Names the pinned files on the primary (the file stream reads them).
    pub session: String,
    pub files: Vec<StoreFile>,
    /// How long the primary waits: the replica stops copying then too.
    pub timeout_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PreCopied {
    pub bytes_copied: u64,
}

/// The warmer settings as the cluster settings say now.
struct WarmerSettings {
    enabled: bool,
    min_segment_size: u64,
    timeout: Duration,
}

/// This node's pre-copy counters (`_nodes/stats`, `indices.merges.merged_segment_warmer`).
#[derive(Default)]
pub struct WarmerCounters {
    invocations: AtomicU64,
    time_ms: AtomicU64,
    failures: AtomicU64,
    bytes_sent: AtomicU64,
    send_time_ms: AtomicU64,
    ongoing: AtomicU64,
    received: AtomicU64,
    bytes_received: AtomicU64,
    receive_time_ms: AtomicU64,
    receive_failures: AtomicU64,
}

/// OpenSearch's `merged_segment_warmer` fields (primary side: invocations, time, failures,
/// bytes sent, send time, ongoing; replica side: bytes received, receive time), and the
/// replica's counts of pre-copies received and failed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WarmerStats {
    pub total_invocations_count: u64,
    pub total_time_millis: u64,
    pub total_failure_count: u64,
    pub total_bytes_sent: u64,
    pub total_bytes_received: u64,
    pub total_send_time_millis: u64,
    pub total_receive_time_millis: u64,
    pub ongoing_count: u64,
    pub total_received_count: u64,
    pub total_receive_failure_count: u64,
}

impl WarmerCounters {
    pub fn stats(&self) -> WarmerStats {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WarmerStats {
            total_invocations_count: load(&self.invocations),
            total_time_millis: load(&self.time_ms),
            total_failure_count: load(&self.failures),
            total_bytes_sent: load(&self.bytes_sent),
            total_bytes_received: load(&self.bytes_received),
            total_send_time_millis: load(&self.send_time_ms),
            total_receive_time_millis: load(&self.receive_time_ms),
            ongoing_count: load(&self.ongoing),
            total_received_count: load(&self.received),
            total_receive_failure_count: load(&self.receive_failures),
        }
    }
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

fn millis_since(started: Instant) -> u64 {
    started.elapsed().as_millis() as u64
}

impl SegrepService {
    /// Puts the merged-segment pre-copy on a segment-replicated copy's engine (once per
    /// engine). It acts only while the copy is a primary with replicas.
    pub(crate) fn install_merge_warmer(
        self: &Arc<Self>,
        service: &Arc<IndexService>,
        shard: usize,
    ) {
        let Ok(copy) = service.copy(shard) else {
            return;
        };
        if !service.is_segment_replicated() {
            return;
        }
        let node = Arc::downgrade(self);
        let (index, uuid) = (service.name(), service.uuid());
        copy.engine()
            .set_merged_segment_listener(Arc::new(move |merged: &MergedSegment| {
                if let Some(node) = node.upgrade() {
                    node.precopy_merged_segment(&index, &uuid, shard, merged);
                }
            }));
    }

    /// This node's pre-copy statistics.
    pub fn warmer_stats(&self) -> WarmerStats {
        self.warmer.stats()
    }

    fn warmer_settings(&self) -> WarmerSettings {
        let setting = |key: &str| self.core.cluster_setting(key);
        WarmerSettings {
            enabled: setting(ENABLED).is_none_or(|v| v.trim() != "false"),
            min_segment_size: setting(MIN_SEGMENT_SIZE)
                .and_then(|text| crate::settings::parse_byte_size(&text).ok())
                .unwrap_or(DEFAULT_MIN_SEGMENT_SIZE),
            timeout: setting(TIMEOUT)
                .and_then(|text| crate::settings::parse_time(&text).ok().flatten())
                .unwrap_or(DEFAULT_TIMEOUT),
        }
    }

    /// On a merge thread of the local primary of `shard`: sends the merged segment to every
    /// replica and waits for them (at most the warmer timeout), unless pre-copy is off, the
    /// segment is below the threshold, or there is no replica. A failure only means the
    /// segment travels with the next checkpoint, as without pre-copy.
    fn precopy_merged_segment(
        &self,
        index: &str,
        uuid: &str,
        shard: usize,
        merged: &MergedSegment,
    ) {
        let settings = self.warmer_settings();
        if !settings.enabled || merged.length() < settings.min_segment_size {
            return;
        }
        let shard_id = shoal_types::ShardId::new(uuid.to_string(), shard as u32);
        let Ok(copy) = self.core.local_copy(index, &shard_id, None) else {
            return;
        };
        let Some(targets) = copy.shard.primary_targets().filter(|t| !t.is_empty()) else {
            return;
        };
        let started = Instant::now();
        add(&self.warmer.invocations, 1);
        add(&self.warmer.ongoing, 1);
        let outcome = self.send_merged_segment(
            (index, uuid, shard),
            &copy,
            targets,
            merged,
            settings.timeout,
        );
        self.warmer.ongoing.fetch_sub(1, Ordering::Relaxed);
        add(&self.warmer.time_ms, millis_since(started));
        match outcome {
            Ok(bytes) => {
                tracing::debug!(index, shard, segment = %merged.segment, bytes = merged.length(), bytes_copied = bytes, took_ms = millis_since(started), "merged segment pre-copied")
            }
            Err(e) => {
                add(&self.warmer.failures, 1);
                tracing::warn!(index, shard, segment = %merged.segment, error = %e, "merged segment not pre-copied to every replica; it travels with the next checkpoint");
            }
        }
    }

    /// Pins the merged segment's files, asks every replica to copy them and waits; returns
    /// the bytes the replicas copied, or the first replica's failure.
    fn send_merged_segment(
        &self,
        (index, uuid, shard): (&str, &str, usize),
        copy: &LocalCopy,
        targets: Vec<String>,
        merged: &MergedSegment,
        timeout: Duration,
    ) -> ApiResult<u64> {
        let files = merged.store_files()?;
        let pin = PinnedMerge::pin(self, copy, (uuid, shard), files.clone())?;
        let send_started = Instant::now();
        let deadline = send_started + timeout;
        let state = self.core.cluster_state();
        let pending: Vec<_> = copy_targets(&state, (index, uuid, shard), targets)
            .into_iter()
            .map(|(address, target)| {
                let request = MergedSegmentCopy {
                    target,
                    primary_term: copy.engine().primary_term(),
                    session: pin.session.clone(),
                    files: files.clone(),
                    timeout_ms: timeout.as_millis() as u64,
                };
                let reply = self
                    .core
                    .send::<PublishMergedSegmentAction>(&address, &request, timeout);
                (address, reply)
            })
            .collect();
        let mut outcome = Ok(0);
        for (address, reply) in pending {
            match self.wait_for_replica(&address, reply, deadline, copy.engine()) {
                Ok(copied) => {
                    add(&self.warmer.bytes_sent, copied.bytes_copied);
                    outcome = outcome.map(|sum| sum + copied.bytes_copied);
                }
                Err(e) if outcome.is_ok() => outcome = Err(e),
                Err(_) => {}
            }
        }
        add(&self.warmer.send_time_ms, millis_since(send_started));
        outcome
    }

    /// Waits for one replica's answer until `deadline`, unless the local copy closes or fails,
    /// or the replica's node leaves (the merge is not held for a copy that cannot use it).
    fn wait_for_replica(
        &self,
        address: &str,
        mut reply: Pending<PreCopied>,
        deadline: Instant,
        engine: &Engine,
    ) -> ApiResult<PreCopied> {
        loop {
            let tick = deadline
                .saturating_duration_since(Instant::now())
                .min(CANCEL_CHECK_EVERY);
            // The timer is made inside the runtime: a merge thread is not one of its threads.
            let waited = self
                .core
                .runtime
                .block_on(async { tokio::time::timeout(tick, &mut reply).await });
            if let Ok(done) = waited {
                return done.unwrap_or_else(|e| Err(ApiError::internal(e.to_string())));
            }
            let stop = if let Some(reason) = engine.failure() {
                Some(format!("the primary's engine closed: {reason}"))
            } else if !self.node_listed(address) {
                Some(format!("node [{address}] left the cluster"))
            } else if Instant::now() >= deadline {
                Some(format!("no answer from [{address}] within [{TIMEOUT}]"))
            } else {
                None
            };
            if let Some(reason) = stop {
                reply.abort();
                return Err(ApiError::new(
                    503,
                    "receive_timeout_transport_exception",
                    reason,
                ));
            }
        }
    }

    fn node_listed(&self, address: &str) -> bool {
        self.core
            .cluster_state()
            .nodes
            .values()
            .any(|n| n.transport_address == address)
    }
}

/// A merged segment's files hard-linked under the primary's `segrep/` directory and served to
/// replicas' file streams under `session` until dropped.
struct PinnedMerge<'a> {
    copy: &'a LocalCopy,
    session: String,
}

impl<'a> PinnedMerge<'a> {
    fn pin(
        node: &SegrepService,
        copy: &'a LocalCopy,
        (uuid, shard): (&str, usize),
        files: Vec<StoreFile>,
    ) -> ApiResult<PinnedMerge<'a>> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let dir = node
            .core
            .paths
            .shard_dir(uuid, shard)
            .join("segrep")
            .join(&id);
        std::fs::create_dir_all(&dir)?;
        let index_dir = copy.engine().config().index_dir();
        let pinned = Pinned::new(dir.clone(), merged_checkpoint(copy.engine(), files));
        for file in &pinned.checkpoint().files {
            std::fs::hard_link(index_dir.join(&file.name), dir.join(&file.name))?;
        }
        let session = format!("{uuid}/{shard}/{id}");
        copy.shard
            .segrep
            .pinned
            .lock()
            .insert(session.clone(), Arc::new(pinned));
        Ok(PinnedMerge { copy, session })
    }
}

impl Drop for PinnedMerge<'_> {
    fn drop(&mut self) {
        self.copy.shard.segrep.pinned.lock().remove(&self.session);
    }
}

/// The files of a merged segment as a pinned set: a checkpoint of nothing but those files
/// (OpenSearch's `MergedSegmentCheckpoint` is a checkpoint too); it is never installed.
fn merged_checkpoint(engine: &Engine, files: Vec<StoreFile>) -> SegmentCheckpoint {
    SegmentCheckpoint {
        primary_term: engine.primary_term(),
        version: 0,
        local_checkpoint: shoal_engine::NO_OPS_PERFORMED,
        max_seq_no: shoal_engine::NO_OPS_PERFORMED,
        files,
        meta: String::new(),
    }
}

impl SegrepService {
    /// A primary sends a merged segment ahead of its commit: copy the files this replica
    /// lacks into its index directory. Runs on the `replication` pool.
    pub(super) fn receive_merged_segment(
        &self,
        request: MergedSegmentCopy,
    ) -> ApiResult<PreCopied> {
        let started = Instant::now();
        let outcome = self.fetch_merged_segment(&request);
        match &outcome {
            Ok(bytes) => {
                add(&self.warmer.received, 1);
                add(&self.warmer.bytes_received, *bytes);
                add(&self.warmer.receive_time_ms, millis_since(started));
            }
            Err(e) => {
                add(&self.warmer.receive_failures, 1);
                tracing::debug!(index = %request.target.index, shard = request.target.shard, error = %e, "merged segment pre-copy failed");
            }
        }
        outcome.map(|bytes_copied| PreCopied { bytes_copied })
    }

    fn fetch_merged_segment(&self, request: &MergedSegmentCopy) -> ApiResult<u64> {
        let copy = self.segment_replica(&request.target)?;
        if request.primary_term < copy.engine().primary_term() {
            return Err(ApiError::new(
                409,
                "illegal_index_shard_state_exception",
                format!(
                    "merged segment of primary term [{}] refused: this copy is at term [{}]",
                    request.primary_term,
                    copy.engine().primary_term()
                ),
            ));
        }
        let index_dir = copy.engine().config().index_dir();
        let missing: Vec<StoreFile> = request
            .files
            .iter()
            .filter(|f| !same_length_here(&index_dir, f))
            .cloned()
            .collect();
        let id = request.session.rsplit('/').next().unwrap_or_default();
        let staging = Staging::create(
            &self
                .core
                .paths
                .shard_dir(&request.target.index_uuid, request.target.shard),
            id,
        )?;
        let (primary_id, address) = self.primary_of(&request.target)?;
        let source = PeerSource::<FileStreamAction> {
            transport: self.core.transport.clone(),
            node: primary_id,
            address,
            session: request.session.clone(),
            chunk_bytes: self.core.recovery_limits().chunk_bytes,
            idle_timeout: Duration::from_secs(60),
            action: PhantomData,
        };
        let control = PrecopyControl {
            node: self,
            copy: &copy,
            deadline: Instant::now() + Duration::from_millis(request.timeout_ms),
        };
        let transfer = FileTransfer {
            dir: &staging.0,
            source: &source,
            runtime: &self.core.runtime,
            limiter: &self.precopy_limiter,
            control: &control,
            differing: Differing::Fail,
            files_in_flight: self.core.recovery_limits().concurrent_chunks,
        };
        let stats = transfer.run(&super::target::file_metas(&missing))?;
        self.link_precopied(&copy, &staging.0, &index_dir, &missing)?;
        // The transfer checked each file's crc32c against the listed one.
        copy.engine().remember_checksums(&missing);
        Ok(stats.bytes_copied)
    }

    /// Moves received files into the index directory (hard links: a file a checkpoint copy
    /// already put there is the same bytes under the same name and stays) and remembers them.
    fn link_precopied(
        &self,
        copy: &LocalCopy,
        staging: &Path,
        index_dir: &Path,
        files: &[StoreFile],
    ) -> ApiResult<()> {
        let now = Instant::now();
        copy.shard
            .segrep
            .precopied
            .lock()
            .extend(files.iter().map(|f| (f.name.clone(), now)));
        for file in files {
            match std::fs::hard_link(staging.join(&file.name), index_dir.join(&file.name)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e.into()),
            }
        }
        std::fs::File::open(index_dir)?.sync_all()?;
        Ok(())
    }

    /// After a replica installed `checkpoint`: the pre-copied files it names are the commit's
    /// now; those it does not name and that arrived longer than the warmer timeout (plus a
    /// margin) ago belong to a merge that never reached a commit, and are deleted. Runs in the
    /// copy task, so no round is using the files meanwhile.
    pub(super) fn forget_precopied(&self, copy: &LocalCopy, checkpoint: &SegmentCheckpoint) {
        let mut precopied = copy.shard.segrep.precopied.lock();
        if precopied.is_empty() {
            return;
        }
        let expired_after = self.warmer_settings().timeout + ORPHAN_MARGIN;
        let index_dir = copy.engine().config().index_dir();
        for name in abandoned_precopies(&mut precopied, checkpoint, expired_after, Instant::now()) {
            tracing::info!(file = %name, "deleting a pre-copied merged file no checkpoint named");
            let _ = std::fs::remove_file(index_dir.join(name));
        }
    }

    /// `indices.replication.merges.warmer.max_bytes_per_sec` (`0`: unthrottled), unless unset or
    /// `-1`: then the replication rate. Pre-copies have their own limiter (OpenSearch's
    /// "individual speed setting"), so a long pre-copy never queues checkpoint copies behind
    /// its chunks; set this to keep their sum under a link's capacity.
    fn precopy_bytes_per_sec(&self) -> Option<u64> {
        use crate::recovery::throttle::{parse_rate, WARMER_MAX_BYTES_PER_SEC};
        match self.core.cluster_setting(WARMER_MAX_BYTES_PER_SEC) {
            Some(text) if !matches!(text.trim(), "-1" | "-1b") => parse_rate(&text).ok().flatten(),
            _ => self.replication_bytes_per_sec(),
        }
    }
}

/// Settles the pre-copied files against an installed checkpoint: those it names belong to
/// the commit now and are forgotten; those it does not name and that arrived more than
/// `expired_after` before `now` are forgotten and returned (to delete); the rest stay.
fn abandoned_precopies(
    precopied: &mut HashMap<String, Instant>,
    checkpoint: &SegmentCheckpoint,
    expired_after: Duration,
    now: Instant,
) -> Vec<String> {
    let mut abandoned = Vec::new();
    precopied.retain(|name, received| {
        if checkpoint.files.iter().any(|f| &f.name == name) {
            return false;
        }
        if now.saturating_duration_since(*received) < expired_after {
            return true;
        }
        abandoned.push(name.clone());
        false
    });
    abandoned.sort();
    abandoned
}

/// Whether `dir` has a file of `file`'s name and length already (a checkpoint copy got it
/// first); its bytes are checked when a checkpoint lists it.
fn same_length_here(dir: &Path, file: &StoreFile) -> bool {
    std::fs::metadata(dir.join(&file.name)).is_ok_and(|m| m.len() == file.length)
}

/// The directory one pre-copy receives into (`<shard>/segrep/precopy-<id>`); removed with
/// whatever is left in it (the received files are linked into the index by then).
struct Staging(PathBuf);

impl Staging {
    fn create(shard_dir: &Path, id: &str) -> ApiResult<Staging> {
        let dir = shard_dir.join("segrep").join(format!("precopy-{id}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(Staging(dir))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A pre-copy's side of its file transfer.
struct PrecopyControl<'a> {
    node: &'a SegrepService,
    copy: &'a LocalCopy,
    /// When the primary stops waiting: copying on would be for nothing.
    deadline: Instant,
}

impl TransferControl for PrecopyControl<'_> {
    fn check(&self) -> ApiResult<()> {
        if let Some(reason) = self.copy.engine().failure() {
            return Err(ApiError::new(
                409,
                "illegal_index_shard_state_exception",
                format!("merged segment pre-copy stopped: {reason}"),
            ));
        }
        if Instant::now() > self.deadline {
            return Err(ApiError::new(
                503,
                "receive_timeout_transport_exception",
                format!("merged segment pre-copy took longer than [{TIMEOUT}]"),
            ));
        }
        Ok(())
    }

    fn max_bytes_per_sec(&self) -> Option<u64> {
        self.node.precopy_bytes_per_sec()
    }

    fn progress(&self, _event: Progress<'_>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint_of(names: &[&str]) -> SegmentCheckpoint {
        SegmentCheckpoint {
            primary_term: 1,
            version: 7,
            local_checkpoint: 9,
            max_seq_no: 9,
            files: names
                .iter()
                .map(|name| StoreFile {
                    name: name.to_string(),
                    length: 10,
                    checksum: 1,
                })
                .collect(),
            meta: String::new(),
        }
    }

    #[test]
    fn pre_copied_files_become_the_commits_or_are_abandoned_only_after_the_timeout() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut precopied: HashMap<String, Instant> = [
            ("a.idx", at(0)),
            ("a.src", at(0)),
            ("b.idx", at(0)),
            ("c.idx", at(50)),
        ]
        .into_iter()
        .map(|(name, when)| (name.to_string(), when))
        .collect();
        let expired_after = Duration::from_secs(60);

        // Installed before the timeout: what it names is the commit's; nothing is abandoned.
        let first = checkpoint_of(&["a.idx", "a.src", "old.idx"]);
        assert!(abandoned_precopies(&mut precopied, &first, expired_after, at(30)).is_empty());
        let mut left: Vec<_> = precopied.keys().cloned().collect();
        left.sort();
        assert_eq!(left, ["b.idx", "c.idx"]);

        // Later: b's merge never reached a commit; c is still young.
        let later = checkpoint_of(&["a.idx", "a.src"]);
        assert_eq!(
            abandoned_precopies(&mut precopied, &later, expired_after, at(90)),
            ["b.idx"]
        );
        assert_eq!(precopied.keys().collect::<Vec<_>>(), ["c.idx"]);
    }

    #[test]
    fn warmer_counters_report_opensearch_names() {
        let counters = WarmerCounters::default();
        add(&counters.invocations, 2);
        add(&counters.bytes_received, 1024);
        let json = serde_json::to_value(counters.stats()).unwrap();
        assert_eq!(json["total_invocations_count"], 2);
        assert_eq!(json["total_bytes_received"], 1024);
        assert_eq!(json["ongoing_count"], 0);
    }
}
