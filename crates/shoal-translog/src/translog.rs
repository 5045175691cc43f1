//! The [`Translog`]: appends, group-committed syncs, generations and trimming.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::SystemTime;

use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};
use tracing::{debug, error, info, warn};

use crate::checkpoint::{
    current_checkpoint_path, fsync_dir, generation_checkpoint_path, write_checkpoint_atomically,
    Checkpoint,
};
use crate::current::CurrentCheckpointFile;
use crate::error::{IoResultExt, Result, TranslogError};
use crate::generation::{frame_record, read_operation_at, ClosedGeneration, GenerationWriter};
use crate::operation::Operation;
use crate::snapshot::{Snapshot, SnapshotSource, TrimRule};
use crate::{
    Durability, Location, RecoveryInfo, TranslogConfig, TranslogStats, NO_OPS_PERFORMED,
    UNASSIGNED_SEQ_NO,
};

/// First generation of a new translog (as in OpenSearch).
const FIRST_GENERATION: u64 = 1;

/// Proof that the caller holds the sync lock, and the file it writes checkpoints to.
type SyncGuard<'a> = MutexGuard<'a, CurrentCheckpointFile>;

/// A per-shard write-ahead log. `Send + Sync`: share it behind an `Arc`.
///
/// Dropping it without [`Translog::close`] does not sync: like a crash,
/// unsynced operations may or may not survive.
pub struct Translog {
    dir: PathBuf,
    uuid: String,
    config: RwLock<TranslogConfig>,
    /// Term written in headers of new generations.
    primary_term: AtomicI64,
    inner: Mutex<Inner>,
    /// Serializes fsyncs, checkpoint writes, rolls and trims.
    sync_lock: Mutex<CurrentCheckpointFile>,
    sync_state: Mutex<SyncState>,
    /// Notified whenever `SyncState` changes, to wake group commit followers.
    sync_state_changed: Condvar,
    syncs_total: AtomicU64,
    /// Set after a failed write or fsync: the on-disk state is unknown.
    failure: Mutex<Option<String>>,
}

/// What is durable, and whether a `sync_to` leader is at work.
struct SyncState {
    /// The checkpoint last persisted to `translog.ckp`.
    persisted: Checkpoint,
    /// While a leader fsyncs, other `sync_to` callers wait on the condvar
    /// rather than queueing on the sync lock: once woken, the covered ones
    /// return at once instead of waiting behind the next leader's fsync.
    leader_active: bool,
}

impl SyncState {
    fn covers(&self, location: &Location) -> bool {
        let persisted = &self.persisted;
        location.generation < persisted.generation
            || (location.generation == persisted.generation && location.end() <= persisted.offset)
    }
}

/// Hands leadership back (even on error or panic) and wakes the followers.
struct LeaderGuard<'a> {
    translog: &'a Translog,
}

impl Drop for LeaderGuard<'_> {
    fn drop(&mut self) {
        self.translog.sync_state.lock().leader_active = false;
        self.translog.sync_state_changed.notify_all();
    }
}

/// Mutable state guarded by `Translog::inner`.
pub(crate) struct Inner {
    pub current: GenerationWriter,
    /// Retained rolled generations, by generation.
    pub closed: BTreeMap<u64, ClosedGeneration>,
    pub global_checkpoint: i64,
    pub trim: TrimRule,
    pub min_uncommitted_generation: u64,
}

impl Inner {
    /// Oldest generation still retained.
    pub fn min_generation(&self) -> u64 {
        self.closed
            .keys()
            .next()
            .copied()
            .unwrap_or(self.current.generation)
    }

    /// Checkpoint describing everything written so far (synced or not).
    pub fn current_checkpoint(&self) -> Checkpoint {
        Checkpoint {
            generation: self.current.generation,
            offset: self.current.written,
            num_ops: self.current.counts.num_ops,
            min_seq_no: self.current.counts.min_seq_no,
            max_seq_no: self.current.counts.max_seq_no,
            global_checkpoint: self.global_checkpoint,
            min_translog_generation: self.min_generation(),
            trimmed_above_seq_no: self.trim.above_seq_no,
            trimmed_below_primary_term: self.trim.below_primary_term,
        }
    }

    /// `(generation, num_ops, size_in_bytes)` of every retained generation.
    fn generation_sizes(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        let closed = self.closed.values().map(|closed| {
            let checkpoint = &closed.checkpoint;
            (checkpoint.generation, checkpoint.num_ops, checkpoint.offset)
        });
        let current = &self.current;
        closed.chain(std::iter::once((
            current.generation,
            current.counts.num_ops,
            current.written,
        )))
    }
}

impl Translog {
    /// Creates a new, empty translog with a fresh uuid in `dir`.
    ///
    /// Fails with [`TranslogError::AlreadyExists`] if `dir` already holds a
    /// translog: deleting history is the caller's explicit decision.
    pub fn create(dir: impl AsRef<Path>, config: TranslogConfig) -> Result<Translog> {
        let dir = dir.as_ref();
        fs::create_dir_all(dir).with_path(dir)?;
        let checkpoint_path = current_checkpoint_path(dir);
        if checkpoint_path.exists() {
            return Err(TranslogError::AlreadyExists(dir.to_path_buf()));
        }
        // Without a checkpoint no generation file can be referenced: they are
        // leftovers of an interrupted create.
        remove_stray_generation_files(dir)?;
        let uuid = uuid::Uuid::new_v4().to_string();
        let writer = GenerationWriter::create(dir, FIRST_GENERATION, &uuid, config.primary_term)?;
        let checkpoint = Checkpoint::empty(
            FIRST_GENERATION,
            writer.header_len,
            UNASSIGNED_SEQ_NO,
            FIRST_GENERATION,
        );
        let checkpoint_file = CurrentCheckpointFile::create(dir, &checkpoint)?;
        info!(dir = %dir.display(), translog_uuid = %uuid, "created translog");
        let inner = Inner {
            current: writer,
            closed: BTreeMap::new(),
            global_checkpoint: UNASSIGNED_SEQ_NO,
            trim: TrimRule::none(),
            min_uncommitted_generation: FIRST_GENERATION,
        };
        Ok(Translog::from_parts(
            dir,
            uuid,
            config,
            inner,
            checkpoint_file,
            checkpoint,
        ))
    }

    /// Opens an existing translog, verifying every record.
    ///
    /// A torn or corrupt tail past the synced offset of the last generation
    /// is truncated (and reported in [`RecoveryInfo`]); corruption of synced
    /// data is a [`TranslogError::Corrupted`] error. If `expected_uuid` is
    /// given and differs from the translog's, fails with
    /// [`TranslogError::UuidMismatch`].
    pub fn open(
        dir: impl AsRef<Path>,
        config: TranslogConfig,
        expected_uuid: Option<&str>,
    ) -> Result<(Translog, RecoveryInfo)> {
        crate::recovery::open(dir.as_ref(), config, expected_uuid)
    }

    pub(crate) fn from_parts(
        dir: &Path,
        uuid: String,
        config: TranslogConfig,
        inner: Inner,
        checkpoint_file: CurrentCheckpointFile,
        persisted: Checkpoint,
    ) -> Translog {
        let primary_term = config.primary_term.max(inner.current.primary_term);
        Translog {
            dir: dir.to_path_buf(),
            uuid,
            config: RwLock::new(config),
            primary_term: AtomicI64::new(primary_term),
            inner: Mutex::new(inner),
            sync_lock: Mutex::new(checkpoint_file),
            sync_state: Mutex::new(SyncState {
                persisted,
                leader_active: false,
            }),
            sync_state_changed: Condvar::new(),
            syncs_total: AtomicU64::new(0),
            failure: Mutex::new(None),
        }
    }

    /// Appends one operation; see [`Translog::add_batch`].
    pub fn add(&self, op: &Operation) -> Result<Location> {
        let mut locations = self.add_batch(std::slice::from_ref(op))?;
        debug_assert_eq!(locations.len(), 1);
        Ok(locations.pop().expect("one location per operation"))
    }

    /// Appends operations to the current generation with a single write.
    ///
    /// When this returns the records are in the OS page cache (readable via
    /// [`Translog::read`]) but not durable: call [`Translog::sync_to`].
    /// Rolls the generation when it exceeds `generation_threshold_size`.
    pub fn add_batch(&self, ops: &[Operation]) -> Result<Vec<Location>> {
        self.ensure_not_failed()?;
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        // Encode outside the lock so concurrent writers only serialize on the write syscall.
        let capacity = ops.iter().map(|op| op.encoded_len() + 8).sum();
        let mut records = Vec::with_capacity(capacity);
        let mut sizes = Vec::with_capacity(ops.len());
        for op in ops {
            validate_operation(op)?;
            sizes.push(frame_record(op, &mut records)?);
        }
        let max_term = ops.iter().map(|op| op.primary_term).max().unwrap_or(0);
        let (locations, current_size) = {
            let mut inner = self.inner.lock();
            self.ensure_not_failed()?;
            let generation = inner.current.generation;
            let mut offset = inner.current.written;
            let appended = inner.current.append(&records);
            self.fail_on_error(appended)?;
            let mut locations = Vec::with_capacity(ops.len());
            for (op, size) in ops.iter().zip(sizes) {
                inner.current.counts.note(op.seq_no);
                locations.push(Location {
                    generation,
                    offset,
                    size,
                });
                offset += size as u64;
            }
            debug_assert_eq!(offset, inner.current.written);
            (locations, inner.current.written)
        };
        self.primary_term.fetch_max(max_term, Ordering::Relaxed);
        let threshold = self.config.read().generation_threshold_size;
        if current_size > threshold {
            // The ops are written; a failed roll marks the translog failed,
            // which fails the next add/sync, so don't fail this add.
            if let Err(err) = self.roll_generation_if_larger_than(threshold) {
                warn!(error = %err, "failed to roll translog generation after add");
            }
        }
        Ok(locations)
    }

    /// Reads back the operation at `location` (realtime get).
    pub fn read(&self, location: &Location) -> Result<Operation> {
        let (file, path) = {
            let inner = self.inner.lock();
            let invalid = |reason: &str| TranslogError::InvalidLocation {
                location: *location,
                reason: reason.to_string(),
            };
            let (file, path, start, end) = if location.generation == inner.current.generation {
                let current = &inner.current;
                (
                    &current.file,
                    &current.path,
                    current.header_len,
                    current.written,
                )
            } else {
                let closed = inner
                    .closed
                    .get(&location.generation)
                    .ok_or_else(|| invalid("generation is not retained"))?;
                (
                    &closed.file,
                    &closed.path,
                    closed.header_len,
                    closed.checkpoint.offset,
                )
            };
            if location.offset < start || location.end() > end {
                return Err(invalid("outside of the written range"));
            }
            (file.clone(), path.clone())
        };
        read_operation_at(&file, &path, location)
    }

    /// Makes everything up to and including `location` durable.
    ///
    /// Returns `false` if it already was. Concurrent callers share fsyncs
    /// (group commit): one leader fsyncs everything written so far while the
    /// others wait for it, then find themselves covered.
    pub fn sync_to(&self, location: &Location) -> Result<bool> {
        {
            let mut state = self.sync_state.lock();
            loop {
                if state.covers(location) {
                    // Possibly thanks to a leader that fsynced on our behalf.
                    return Ok(false);
                }
                if !state.leader_active {
                    state.leader_active = true;
                    break;
                }
                self.sync_state_changed.wait(&mut state);
            }
        }
        let _leader_guard = LeaderGuard { translog: self };
        let mut sync_guard = self.sync_lock.lock();
        if self.is_persisted(location) {
            // A roll or an explicit sync covered us while we took the lock.
            return Ok(false);
        }
        self.ensure_not_failed()?;
        self.persist_current_generation(&mut sync_guard)?;
        if !self.is_persisted(location) {
            return Err(TranslogError::InvalidLocation {
                location: *location,
                reason: "location was never written".to_string(),
            });
        }
        Ok(true)
    }

    /// Makes everything written so far durable, along with the global
    /// checkpoint and trim state.
    pub fn sync(&self) -> Result<()> {
        let mut sync_guard = self.sync_lock.lock();
        self.ensure_not_failed()?;
        self.persist_current_generation(&mut sync_guard)
    }

    /// Whether a [`Translog::sync`] would persist anything.
    pub fn sync_needed(&self) -> bool {
        let checkpoint = self.inner.lock().current_checkpoint();
        checkpoint != self.sync_state.lock().persisted
    }

    /// Closes the current generation (fsync + its immutable `.ckp`) and starts
    /// a new one. Returns the new generation.
    pub fn roll_generation(&self) -> Result<u64> {
        let mut sync_guard = self.sync_lock.lock();
        self.ensure_not_failed()?;
        self.roll_generation_locked(&mut sync_guard)
    }

    /// Sets the global checkpoint; it is persisted with the next sync.
    pub fn set_global_checkpoint(&self, global_checkpoint: i64) {
        self.inner.lock().global_checkpoint = global_checkpoint;
    }

    /// The global checkpoint last set (possibly not yet persisted).
    pub fn global_checkpoint(&self) -> i64 {
        self.inner.lock().global_checkpoint
    }

    /// The global checkpoint last persisted in `translog.ckp`.
    pub fn last_synced_global_checkpoint(&self) -> i64 {
        self.sync_state.lock().persisted.global_checkpoint
    }

    /// Sets the primary term written in the header of future generations
    /// (call on promotion, typically followed by [`Translog::roll_generation`]).
    pub fn set_primary_term(&self, primary_term: i64) {
        self.primary_term.fetch_max(primary_term, Ordering::Relaxed);
    }

    /// Deletes rolled generations older than `min_generation_to_keep`; the
    /// current generation is never deleted. Open snapshots keep reading
    /// deleted generations through their open file handles.
    pub fn trim_unreferenced(&self, min_generation_to_keep: u64) -> Result<()> {
        let mut sync_guard = self.sync_lock.lock();
        self.ensure_not_failed()?;
        let removed = {
            let mut inner = self.inner.lock();
            let keep_from = min_generation_to_keep.min(inner.current.generation);
            if keep_from <= inner.min_generation() {
                return Ok(());
            }
            let kept = inner.closed.split_off(&keep_from);
            std::mem::replace(&mut inner.closed, kept)
        };
        // Persist the new min generation before deleting, so a crash never
        // leaves a checkpoint referencing a missing file.
        self.persist_current_generation(&mut sync_guard)?;
        for (generation, closed) in &removed {
            let checkpoint_path = generation_checkpoint_path(&self.dir, *generation);
            fs::remove_file(&closed.path).with_path(&closed.path)?;
            fs::remove_file(&checkpoint_path).with_path(&checkpoint_path)?;
        }
        fsync_dir(&self.dir)?;
        info!(
            deleted_generations = removed.len(),
            min_generation = self.inner.lock().min_generation(),
            "trimmed unreferenced translog generations"
        );
        Ok(())
    }

    /// Smallest retained generation that may hold an op with a seq_no `>=
    /// seq_no` (the current generation if no rolled one does).
    pub fn min_generation_for_seq_no(&self, seq_no: i64) -> u64 {
        let inner = self.inner.lock();
        inner
            .closed
            .values()
            .find(|closed| closed.checkpoint.num_ops > 0 && closed.checkpoint.max_seq_no >= seq_no)
            .map(ClosedGeneration::generation)
            .unwrap_or(inner.current.generation)
    }

    /// Hides, from snapshots, ops with seq_no `> seq_no` and a primary term
    /// `< primary_term_below` (ops of a deposed primary that the new primary
    /// did not resync). Persisted immediately. A later call replaces the rule.
    pub fn trim_operations_above(&self, primary_term_below: i64, seq_no: i64) -> Result<()> {
        let mut sync_guard = self.sync_lock.lock();
        self.ensure_not_failed()?;
        self.inner.lock().trim = TrimRule {
            above_seq_no: seq_no,
            below_primary_term: primary_term_below,
        };
        self.persist_current_generation(&mut sync_guard)?;
        info!(
            primary_term_below,
            seq_no, "trimmed translog operations above seq_no"
        );
        Ok(())
    }

    /// Records that generations below `min_uncommitted_generation` are fully
    /// covered by a durable index commit (only affects "uncommitted" stats).
    pub fn mark_committed(&self, min_uncommitted_generation: u64) {
        self.inner.lock().min_uncommitted_generation = min_uncommitted_generation;
    }

    /// Iterates ops with seq_no in `[from_seq_no, to_seq_no]` across all
    /// retained generations, in file order, deduplicated by seq_no (highest
    /// primary term wins, later position on equal terms) and honoring
    /// [`Translog::trim_operations_above`]. Sees ops added before this call.
    pub fn snapshot(&self, from_seq_no: i64, to_seq_no: i64) -> Result<Snapshot> {
        let (sources, trim) = {
            let inner = self.inner.lock();
            let overlaps = |num_ops: u64, min: i64, max: i64| {
                num_ops > 0 && max >= from_seq_no && min <= to_seq_no
            };
            let mut sources = Vec::with_capacity(inner.closed.len() + 1);
            for closed in inner.closed.values() {
                let ckp = &closed.checkpoint;
                if overlaps(ckp.num_ops, ckp.min_seq_no, ckp.max_seq_no) {
                    sources.push(SnapshotSource {
                        path: closed.path.clone(),
                        file: closed.file.clone(),
                        start: closed.header_len,
                        end: ckp.offset,
                    });
                }
            }
            let current = &inner.current;
            let counts = &current.counts;
            if overlaps(counts.num_ops, counts.min_seq_no, counts.max_seq_no) {
                sources.push(SnapshotSource {
                    path: current.path.clone(),
                    file: current.file.clone(),
                    start: current.header_len,
                    end: current.written,
                });
            }
            (sources, inner.trim)
        };
        Snapshot::new(sources, from_seq_no, to_seq_no, trim)
    }

    /// Translog statistics, as reported by `_stats`.
    pub fn stats(&self) -> TranslogStats {
        let (mut stats, files) = {
            let inner = self.inner.lock();
            let mut stats = TranslogStats {
                generation: inner.current.generation,
                min_generation: inner.min_generation(),
                ..TranslogStats::default()
            };
            for (generation, num_ops, size) in inner.generation_sizes() {
                stats.operations += num_ops;
                stats.size_in_bytes += size;
                if generation >= inner.min_uncommitted_generation {
                    stats.uncommitted_operations += num_ops;
                    stats.uncommitted_size_in_bytes += size;
                }
            }
            let mut files: Vec<_> = inner.closed.values().map(|c| c.file.clone()).collect();
            files.push(inner.current.file.clone());
            (stats, files)
        };
        stats.syncs_total = self.syncs_total.load(Ordering::Relaxed);
        stats.earliest_last_modified_age_ms = earliest_last_modified_age_ms(&files);
        stats
    }

    /// The translog uuid, stored in every generation header.
    pub fn uuid(&self) -> &str {
        &self.uuid
    }

    /// Directory holding the translog files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Generation currently appended to.
    pub fn current_generation(&self) -> u64 {
        self.inner.lock().current.generation
    }

    /// Oldest retained generation.
    pub fn min_generation(&self) -> u64 {
        self.inner.lock().min_generation()
    }

    /// End of the durable data (`size` is 0): every location ending at or
    /// before it is synced.
    pub fn last_synced_location(&self) -> Location {
        let persisted = self.sync_state.lock().persisted;
        Location {
            generation: persisted.generation,
            offset: persisted.offset,
            size: 0,
        }
    }

    /// Highest seq_no in the retained generations, `NO_OPS_PERFORMED` if none.
    pub fn max_seq_no(&self) -> i64 {
        let inner = self.inner.lock();
        let closed = inner
            .closed
            .values()
            .filter(|closed| closed.checkpoint.num_ops > 0)
            .map(|closed| closed.checkpoint.max_seq_no);
        let current =
            Some(inner.current.counts.max_seq_no).filter(|_| inner.current.counts.num_ops > 0);
        closed.chain(current).max().unwrap_or(NO_OPS_PERFORMED)
    }

    /// Current durability setting.
    pub fn durability(&self) -> Durability {
        self.config.read().durability
    }

    /// Updates the durability setting (dynamic index setting).
    pub fn set_durability(&self, durability: Durability) {
        self.config.write().durability = durability;
    }

    /// Updates the size above which `add` rolls a new generation.
    pub fn set_generation_threshold_size(&self, generation_threshold_size: u64) {
        self.config.write().generation_threshold_size = generation_threshold_size;
    }

    /// Syncs everything and closes the translog.
    pub fn close(self) -> Result<()> {
        self.sync()?;
        debug!(dir = %self.dir.display(), "closed translog");
        Ok(())
    }

    /// Whether the record at `location` ends before the persisted offset.
    fn is_persisted(&self, location: &Location) -> bool {
        self.sync_state.lock().covers(location)
    }

    /// Records a newly persisted checkpoint and wakes waiting followers.
    fn publish_persisted(&self, checkpoint: Checkpoint) {
        self.sync_state.lock().persisted = checkpoint;
        self.sync_state_changed.notify_all();
    }

    /// Fsyncs the current generation if it grew and rewrites `translog.ckp`
    /// if anything changed since the last persisted checkpoint.
    fn persist_current_generation(&self, sync_guard: &mut SyncGuard<'_>) -> Result<()> {
        let (file, path, checkpoint) = {
            let inner = self.inner.lock();
            let current = &inner.current;
            (
                current.file.clone(),
                current.path.clone(),
                inner.current_checkpoint(),
            )
        };
        let persisted = self.sync_state.lock().persisted;
        if checkpoint == persisted {
            return Ok(());
        }
        // Rolls happen under the sync lock, so the generation cannot change here.
        debug_assert_eq!(checkpoint.generation, persisted.generation);
        debug_assert!(checkpoint.offset >= persisted.offset);
        if checkpoint.offset != persisted.offset {
            self.fail_on_error(file.sync_data().with_path(&path))?;
            self.syncs_total.fetch_add(1, Ordering::Relaxed);
        }
        self.fail_on_error(sync_guard.write(&checkpoint))?;
        self.publish_persisted(checkpoint);
        Ok(())
    }

    fn roll_generation_if_larger_than(&self, threshold: u64) -> Result<()> {
        let mut sync_guard = self.sync_lock.lock();
        self.ensure_not_failed()?;
        if self.inner.lock().current.written <= threshold {
            // Another writer rolled while we waited for the lock.
            return Ok(());
        }
        self.roll_generation_locked(&mut sync_guard).map(|_| ())
    }

    fn roll_generation_locked(&self, sync_guard: &mut SyncGuard<'_>) -> Result<u64> {
        let mut inner = self.inner.lock();
        let generation = inner.current.generation;
        let fsynced = inner
            .current
            .file
            .sync_data()
            .with_path(&inner.current.path);
        self.fail_on_error(fsynced)?;
        self.syncs_total.fetch_add(1, Ordering::Relaxed);
        let final_checkpoint = inner.current_checkpoint();
        let final_checkpoint_path = generation_checkpoint_path(&self.dir, generation);
        self.fail_on_error(write_checkpoint_atomically(
            &final_checkpoint_path,
            &final_checkpoint,
        ))?;

        let primary_term = self.primary_term.load(Ordering::Relaxed);
        let created = GenerationWriter::create(&self.dir, generation + 1, &self.uuid, primary_term);
        let writer = self.fail_on_error(created)?;
        let previous = std::mem::replace(&mut inner.current, writer);
        inner.closed.insert(
            generation,
            ClosedGeneration {
                path: previous.path,
                header_len: previous.header_len,
                file: previous.file,
                checkpoint: final_checkpoint,
            },
        );
        // Only now does `translog.ckp` point at the new generation; a crash
        // before this leaves an orphan file that `open` deletes.
        let checkpoint = inner.current_checkpoint();
        self.fail_on_error(sync_guard.write(&checkpoint))?;
        self.publish_persisted(checkpoint);
        info!(
            generation = generation + 1,
            previous_ops = final_checkpoint.num_ops,
            previous_size = final_checkpoint.offset,
            "rolled translog generation"
        );
        Ok(generation + 1)
    }

    fn ensure_not_failed(&self) -> Result<()> {
        match &*self.failure.lock() {
            Some(reason) => Err(TranslogError::Failed {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// After a failed write/fsync we cannot know what reached the disk, so
    /// the translog refuses further work instead of acknowledging more.
    fn fail_on_error<T>(&self, result: Result<T>) -> Result<T> {
        if let Err(err) = &result {
            let mut failure = self.failure.lock();
            if failure.is_none() {
                error!(dir = %self.dir.display(), error = %err, "translog failed");
                *failure = Some(err.to_string());
                crate::failed_dirs::mark(&self.dir);
            }
        }
        result
    }
}

impl std::fmt::Debug for Translog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Translog")
            .field("dir", &self.dir)
            .field("uuid", &self.uuid)
            .field("generation", &self.current_generation())
            .finish()
    }
}

fn validate_operation(op: &Operation) -> Result<()> {
    if op.seq_no < 0 {
        return Err(TranslogError::InvalidOperation(format!(
            "seq_no must be assigned, got {}",
            op.seq_no
        )));
    }
    if op.primary_term < 0 {
        return Err(TranslogError::InvalidOperation(format!(
            "primary_term must be >= 0, got {}",
            op.primary_term
        )));
    }
    Ok(())
}

fn earliest_last_modified_age_ms(files: &[std::sync::Arc<fs::File>]) -> u64 {
    let earliest = files
        .iter()
        .filter_map(|file| {
            file.metadata()
                .and_then(|metadata| metadata.modified())
                .ok()
        })
        .min();
    earliest
        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
        .map_or(0, |age| age.as_millis() as u64)
}

/// Removes `translog-*` files of a directory that has no checkpoint.
fn remove_stray_generation_files(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).with_path(dir)? {
        let path = entry.with_path(dir)?.path();
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or("");
        if crate::generation::parse_translog_file_name(name).is_some() {
            warn!(path = %path.display(), "deleting stray translog file without checkpoint");
            fs::remove_file(&path).with_path(&path)?;
        }
    }
    Ok(())
}

// Used by recovery to rebuild the in-memory state.
impl Translog {
    pub(crate) fn recovery_info_stub(&self) -> RecoveryInfo {
        let stats = self.stats();
        RecoveryInfo {
            translog_uuid: self.uuid.clone(),
            min_generation: stats.min_generation,
            current_generation: stats.generation,
            operations: stats.operations,
            unsynced_operations_recovered: 0,
            truncated_bytes: 0,
            truncation_reason: None,
            max_seq_no: self.max_seq_no(),
            global_checkpoint: self.global_checkpoint(),
        }
    }
}
