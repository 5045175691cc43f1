//! Segment replication on the engine (`index.replication.type: SEGMENT`).
//!
//! The primary's side: every commit (a refresh is a tantivy commit) is a checkpoint a replica
//! can copy, described by [`Engine::segment_checkpoint`]. The replica's side: an engine opened
//! without an index writer (`EngineConfig::segment_replica`) only logs the operations it is
//! sent, so every acknowledged write is still on every in-sync copy and the global checkpoint
//! means what it means under document replication; it searches the primary's segments once
//! they are copied ([`Engine::install_checkpoint`]), which also trims the operations the
//! installed commit holds; and it opens a writer when promoted ([`Engine::promote_to_writer`]).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tantivy::directory::Directory;

use super::apply::{closed_results, noop_result, not_yet_located};
use super::*;
use crate::store::checksum_file;

/// A file of a commit: what a replica compares before copying (same name and checksum: the
/// file is already there; same name, other checksum: corruption).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreFile {
    pub name: String,
    pub length: u64,
    pub checksum: u32,
}

/// What one commit of a primary made visible, as a replica copies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentCheckpoint {
    pub primary_term: i64,
    /// tantivy's opstamp of the commit: it grows with every commit of one writer, and a
    /// promoted primary's writer continues from the commit it opened on.
    pub version: u64,
    /// Every operation up to here is in the commit's segments.
    pub local_checkpoint: i64,
    pub max_seq_no: i64,
    /// The segment files the commit lists (without `meta.json`).
    pub files: Vec<StoreFile>,
    /// The commit's `meta.json`: the segment list a replica installs.
    pub meta: String,
}

impl SegmentCheckpoint {
    /// The bytes of the commit's files.
    pub fn length(&self) -> u64 {
        self.files.iter().map(|f| f.length).sum()
    }

    /// Whether this checkpoint is newer than `other` (a newer term, or a later commit of
    /// the same term), as OpenSearch's `ReplicationCheckpoint.isAheadOf`.
    pub fn is_ahead_of(&self, other: &SegmentCheckpoint) -> bool {
        (self.primary_term, self.version) > (other.primary_term, other.version)
    }
}

/// Segment numbers a promoted replica leaves unused above the highest it copied: the old
/// primary may have numbered segments (flushes, merges) that never reached this copy, and
/// their names would otherwise come back for other segments. OpenSearch's replica engine bumps
/// its segment counter by as much.
const PROMOTION_NUMBER_GAP: u64 = 100_000;

/// Checksums of a primary's segment files by name. Segment files never change once written,
/// so each is read once, not at every refresh.
#[derive(Default)]
pub(crate) struct ChecksumCache(Mutex<HashMap<String, (u64, u32)>>);

impl ChecksumCache {
    /// The length and crc32c of `dir/name`, read (and the footer checked) only the first
    /// time; the error says why the file was refused.
    pub(crate) fn checksum(&self, dir: &std::path::Path, name: &str) -> Result<(u64, u32), String> {
        if let Some(known) = self.0.lock().get(name) {
            return Ok(*known);
        }
        // Read outside the lock: a merged segment's files are checksummed on a merge thread
        // while a publication lists the current commit's.
        let computed = checksum_file(&dir.join(name)).map_err(|e| format!("[{name}]: {e}"))?;
        self.0.lock().insert(name.to_string(), computed);
        Ok(computed)
    }

    /// What `name` was found to hold, without reading it.
    fn known(&self, name: &str) -> Option<(u64, u32)> {
        self.0.lock().get(name).copied()
    }

    /// After an install: the commit's files are known, their lengths and checksums checked
    /// another way (a replica's copier checks every byte it writes and every file it keeps),
    /// and of the others only those still on disk stay (pre-copied merged segments, which a
    /// later checkpoint names).
    fn installed(&self, dir: &std::path::Path, files: &[StoreFile]) {
        self.remember(files);
        let listed: HashSet<&str> = files.iter().map(|f| f.name.as_str()).collect();
        self.forget_deleted(dir, &listed);
    }

    fn remember(&self, files: &[StoreFile]) {
        self.0.lock().extend(
            files
                .iter()
                .map(|f| (f.name.clone(), (f.length, f.checksum))),
        );
    }

    /// Forgets files that are gone: merged away (a file no commit lists but still on disk
    /// is a merged segment waiting for its commit, whose checksum is wanted next).
    fn forget_deleted(&self, dir: &std::path::Path, listed: &HashSet<&str>) {
        self.0
            .lock()
            .retain(|name, _| listed.contains(name.as_str()) || dir.join(name).exists());
    }
}

impl Engine {
    /// The length and crc32c this copy already knows `name` to have (a file it wrote, copied
    /// or listed before): files of one name never change, so a replica comparing its files
    /// with a checkpoint's need not read them again at every round.
    pub fn known_checksum(&self, name: &str) -> Option<(u64, u32)> {
        self.merge_hook.checksums.known(name)
    }

    /// Files a replica received and checked before any checkpoint named them (a pre-copied
    /// merged segment): the checkpoint that does is compared without reading them again.
    pub fn remember_checksums(&self, files: &[StoreFile]) {
        self.merge_hook.checksums.remember(files);
    }

    /// Whether this engine is a segment-replication replica (no index writer).
    pub fn is_writer_less(&self) -> bool {
        self.state.lock().is_writer_less()
    }

    /// The checkpoint of the current commit: its segment files with lengths and checksums,
    /// and its `meta.json`. A background merge may rewrite `meta.json` while the files are
    /// listed: the listing is kept only when `meta.json` read the same before and after it.
    pub fn segment_checkpoint(&self) -> Result<SegmentCheckpoint, EngineError> {
        let directory = self.index.directory();
        let meta_path = std::path::Path::new("meta.json");
        for _ in 0..10 {
            let read_meta = || {
                directory
                    .atomic_read(meta_path)
                    .map_err(tantivy::TantivyError::from)
            };
            let before = read_meta()?;
            let metas = self.index.load_metas()?;
            let after = read_meta()?;
            if before != after {
                continue;
            }
            let payload = metas.payload.as_deref().and_then(CommitPayload::from_json);
            let meta = String::from_utf8(after)
                .map_err(|_| EngineError::Corrupted("meta.json is not utf-8".into()))?;
            return Ok(SegmentCheckpoint {
                primary_term: self.primary_term(),
                version: metas.opstamp,
                local_checkpoint: payload
                    .as_ref()
                    .map_or(NO_OPS_PERFORMED, |p| p.local_checkpoint),
                max_seq_no: payload.as_ref().map_or(NO_OPS_PERFORMED, |p| p.max_seq_no),
                files: self.store_files(metas.list_segment_files())?,
                meta,
            });
        }
        Err(EngineError::Io(std::io::Error::other(
            "meta.json kept changing while its files were listed",
        )))
    }

    fn store_files(&self, names: HashSet<PathBuf>) -> Result<Vec<StoreFile>, EngineError> {
        let dir = self.config.index_dir();
        let mut files = Vec::with_capacity(names.len());
        for path in names {
            // tantivy lists a delete file for every segment, also one that has none.
            if !dir.join(&path).exists() {
                continue;
            }
            let name = path.to_string_lossy().into_owned();
            let (length, checksum) = self
                .merge_hook
                .checksums
                .checksum(&dir, &name)
                .map_err(|reason| self.fail_corrupted(reason))?;
            files.push(StoreFile {
                name,
                length,
                checksum,
            });
        }
        let listed: HashSet<&str> = files.iter().map(|f| f.name.as_str()).collect();
        self.merge_hook.checksums.forget_deleted(&dir, &listed);
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(files)
    }

    /// A writer-less engine's write path: the operations go to the translog only (their
    /// documents arrive with the primary's segments). A primary's write is refused.
    pub(super) fn log_without_indexing(
        &self,
        state: &mut WriteState,
        ops: Vec<WriteOp>,
        origin: Origin,
    ) -> Vec<Result<OpResult, EngineError>> {
        if origin == Origin::Primary {
            let refused = || {
                Err(EngineError::Closed(
                    "a segment-replication replica does not index; write to its primary".into(),
                ))
            };
            return ops.iter().map(|_| refused()).collect();
        }
        let mut results = Vec::with_capacity(ops.len());
        let (mut slots, mut operations) = (Vec::new(), Vec::new());
        for op in ops {
            let (operation, kind) = translog_operation(op);
            let (seq_no, term, version) =
                (operation.seq_no, operation.primary_term, operation.version);
            if state.tracker.has_processed(seq_no) {
                results.push(Ok(noop_result(seq_no, term, version)));
                continue;
            }
            slots.push(results.len());
            operations.push(operation);
            results.push(Ok(not_yet_located(kind, seq_no, term, version)));
        }
        if operations.is_empty() {
            return results;
        }
        match self.translog.add_batch(&operations) {
            Ok(locations) => {
                for ((slot, operation), location) in
                    slots.into_iter().zip(&operations).zip(locations)
                {
                    state.tracker.mark_processed(operation.seq_no);
                    if let Some(Ok(result)) = results.get_mut(slot) {
                        result.location = Some(location);
                    }
                }
                results
            }
            Err(e) => {
                let reason = self.fail_engine(format!("translog write failed: {e}"));
                closed_results(results.len(), &reason)
            }
        }
    }

    /// On open: the operations a replica logged above its installed commit count as
    /// processed (they are durable in its translog). Returns how many there were.
    pub(super) fn mark_logged_operations(
        &self,
        local_checkpoint: i64,
    ) -> Result<usize, EngineError> {
        let mut state = self.state.lock();
        let mut logged = 0;
        for op in self.translog.snapshot(local_checkpoint + 1, i64::MAX)? {
            state.tracker.mark_processed(op?.seq_no);
            logged += 1;
        }
        Ok(logged)
    }

    /// Makes a copied checkpoint this replica's commit and searches it: the files must
    /// already be in the index directory, copied, verified and fsynced by the caller. The commit is
    /// written with this copy's own translog in its payload, the reader moves to it, the
    /// operations it holds leave the translog (down to what the global checkpoint and
    /// retention leases still need), and the files only the previous commit used are deleted.
    /// A checkpoint of an older primary term than this copy's is refused.
    pub fn install_checkpoint(&self, checkpoint: &SegmentCheckpoint) -> Result<(), EngineError> {
        self.ensure_open()?;
        let state = self.state.lock();
        if !state.is_writer_less() {
            return Err(EngineError::Closed(
                "a primary's engine does not install copied segments".into(),
            ));
        }
        if checkpoint.primary_term < self.primary_term() {
            return Err(EngineError::StaleCheckpoint {
                checkpoint: checkpoint.primary_term,
                current: self.primary_term(),
            });
        }
        let previous = self.index.load_metas()?.list_segment_files();
        self.check_copied_files(checkpoint)?;
        self.sync_translog()?;
        // A new generation first: the commit names where the operations above it start, and
        // every older generation can then go once nothing needs it.
        let rolled = self.translog.roll_generation();
        self.fail_on_error("translog roll failed", rolled)?;
        let local_checkpoint = installed_local_checkpoint(checkpoint, &state);
        if let Some(behind) = self.behind_store(local_checkpoint) {
            return Err(behind);
        }
        let first_retained = self.first_retained_seq_no(local_checkpoint);
        self.history_complete_from
            .fetch_max(first_retained, Ordering::AcqRel);
        let payload =
            self.replica_payload(checkpoint, local_checkpoint, state.tracker.max_seq_no())?;
        let meta = with_payload(&checkpoint.meta, &payload)?;
        let written = self
            .index
            .directory()
            .atomic_write(std::path::Path::new("meta.json"), meta.as_bytes());
        self.fail_on_error("installing the copied commit failed", written)?;
        self.reader.reload()?;
        *self.history_uuid.lock() = payload.history_uuid.clone();
        drop(state);
        self.trim_translog(first_retained, payload.translog_generation)?;
        let current: HashSet<PathBuf> = checkpoint
            .files
            .iter()
            .map(|f| PathBuf::from(&f.name))
            .collect();
        self.delete_files(previous.difference(&current));
        self.merge_hook
            .checksums
            .installed(&self.config.index_dir(), &checkpoint.files);
        self.notify_refresh_listeners();
        Ok(())
    }

    /// Whether installing `checkpoint` would lose operations this copy holds: its segments end
    /// below where this copy's translog history starts. A remote-backed replica meets one when
    /// the repository lags behind the commit its peer recovery copied from the primary.
    pub fn is_behind_store(&self, checkpoint: &SegmentCheckpoint) -> bool {
        let local_checkpoint = installed_local_checkpoint(checkpoint, &self.state.lock());
        self.behind_store(local_checkpoint).is_some()
    }

    fn behind_store(&self, local_checkpoint: i64) -> Option<EngineError> {
        let complete_from = self.history_complete_from();
        (local_checkpoint + 1 < complete_from).then_some(EngineError::CheckpointBehindStore {
            local_checkpoint,
            complete_from,
        })
    }

    /// Every file of the checkpoint is in the index directory with its length. Making them
    /// durable is the copier's part (the file transfer fsyncs each file it writes, once):
    /// syncing every file again at each install would repeat that work at every refresh.
    fn check_copied_files(&self, checkpoint: &SegmentCheckpoint) -> Result<(), EngineError> {
        let dir = self.config.index_dir();
        for file in &checkpoint.files {
            let path = dir.join(&file.name);
            let length = std::fs::metadata(&path)
                .map(|m| m.len())
                .unwrap_or(u64::MAX);
            if length != file.length {
                return Err(EngineError::Corrupted(format!(
                    "copied file [{}] is {} bytes, the primary's has {}",
                    file.name, length, file.length
                )));
            }
        }
        Ok(())
    }

    /// The payload of an installed commit: the primary's history and checkpoints, this
    /// copy's translog.
    fn replica_payload(
        &self,
        checkpoint: &SegmentCheckpoint,
        local_checkpoint: i64,
        logged_max_seq_no: i64,
    ) -> Result<CommitPayload, EngineError> {
        let primary = CommitPayload::from_meta_json(&checkpoint.meta).ok_or_else(|| {
            EngineError::Corrupted("the copied commit has no Shoal payload".into())
        })?;
        Ok(CommitPayload {
            local_checkpoint,
            max_seq_no: checkpoint.max_seq_no.max(logged_max_seq_no),
            translog_uuid: self.translog.uuid().to_string(),
            translog_generation: self
                .translog
                .min_generation_for_seq_no(local_checkpoint + 1),
            global_checkpoint: self.global_checkpoint(),
            history_uuid: primary.history_uuid,
            history_complete_from: self.history_complete_from(),
        })
    }

    /// Drops the translog generations that hold only operations below `first_retained`;
    /// generations from `uncommitted` on hold operations the installed commit does not.
    fn trim_translog(&self, first_retained: i64, uncommitted: u64) -> Result<(), EngineError> {
        let keep_from = self
            .translog
            .min_generation_for_seq_no(first_retained)
            .min(self.translog.current_generation());
        let trimmed = self.translog.trim_unreferenced(keep_from);
        self.fail_on_error("translog trim failed", trimmed)?;
        self.translog.mark_committed(uncommitted);
        Ok(())
    }

    /// Deletes segment files no commit names any more. A failure only leaves a file behind.
    fn delete_files<'a>(&self, files: impl Iterator<Item = &'a PathBuf>) {
        let dir = self.config.index_dir();
        for file in files {
            match std::fs::remove_file(dir.join(file)) {
                Ok(()) => {}
                // tantivy lists a delete file for every segment, also one that has none.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    warn!(file = %file.display(), error = %e, "cannot delete a replaced segment file")
                }
            }
        }
    }

    /// Opens an index writer on the installed commit and indexes the operations this copy
    /// only logged above it, so a promoted replica holds every operation it acknowledged.
    /// Returns how many it indexed.
    pub fn promote_to_writer(&self, parse: &ParseDocument) -> Result<usize, EngineError> {
        self.ensure_open()?;
        let committed = {
            let mut state = self.state.lock();
            if !state.is_writer_less() {
                return Ok(0);
            }
            state.writer = Some(open::new_writer(
                &self.index,
                &self.config,
                &self.integrity,
                &self.merge_hook,
                &self.segment_numbers,
            )?);
            self.segment_numbers.skip(PROMOTION_NUMBER_GAP);
            self.id_filters.build_eagerly();
            let payload = open::commit_payload(&self.index)?;
            let committed = payload
                .as_ref()
                .map_or(NO_OPS_PERFORMED, |p| p.local_checkpoint);
            // What was only logged is processed again, now into the index. New writes are
            // numbered above every operation of the copied segments, also one this copy was
            // never sent (its primary died with it in flight): numbered below it, a write
            // replayed later over those segments would count as older than what it replaced.
            state.tracker = open::tracker_for_commit(payload.as_ref());
            committed
        };
        let replayed = self.replay_translog(committed, parse)?;
        debug_assert!(
            replayed as i64 <= self.max_seq_no() - committed,
            "replayed {replayed} above {committed}"
        );
        self.max_seq_no_of_updates
            .store(self.max_seq_no(), Ordering::Release);
        self.flush(true)?;
        info!(path = %self.config.path.display(), replayed, "segment replica promoted to a writer");
        Ok(replayed)
    }
}

/// The local checkpoint of `checkpoint` installed here. What this copy counts as processed
/// stays what it logged itself: the commit may hold operations of its primary it was never
/// sent (still in flight, or never acknowledged if that primary is deposed), and a new
/// primary's resync must still reach it for them.
fn installed_local_checkpoint(checkpoint: &SegmentCheckpoint, state: &WriteState) -> i64 {
    checkpoint.local_checkpoint.min(state.tracker.checkpoint())
}

/// The translog record of a replicated operation, and how a replica reports it.
fn translog_operation(op: WriteOp) -> (Operation, OpResultKind) {
    match op {
        WriteOp::Index {
            id,
            routing,
            source,
            seq_no,
            primary_term,
            version,
            ..
        } => {
            let mut operation = Operation::index(id, seq_no, primary_term, version, source);
            operation.routing = routing;
            (operation, OpResultKind::Created)
        }
        WriteOp::Delete {
            id,
            routing,
            seq_no,
            primary_term,
            version,
            ..
        } => {
            let mut operation = Operation::delete(id, seq_no, primary_term, version);
            operation.routing = routing;
            (operation, OpResultKind::Deleted)
        }
        WriteOp::NoOp {
            seq_no,
            primary_term,
            reason,
        } => (
            Operation::no_op(seq_no, primary_term, reason),
            OpResultKind::Noop,
        ),
    }
}

/// `meta` (a tantivy `meta.json`) with its payload replaced.
fn with_payload(meta: &str, payload: &CommitPayload) -> Result<String, EngineError> {
    let mut meta: serde_json::Value = serde_json::from_str(meta)
        .map_err(|e| EngineError::Corrupted(format!("copied meta.json: {e}")))?;
    meta["payload"] = serde_json::Value::String(payload.to_json());
    Ok(meta.to_string())
}
