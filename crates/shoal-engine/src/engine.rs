//! The engine itself: write path, realtime get, refresh, flush, merge, recovery.

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use shoal_codec::{
    add_source_field, FlushedSegments, SegmentNumbers, SourceCodec, SourceReaderCache,
    SourceStorePlugin,
};
use shoal_mapping::{analysis, MapperError, ShardSchema};
use shoal_translog::{Location, OpKind, Operation, Translog, TranslogConfig};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument};
use tracing::{error, info, warn};

use crate::checkpoint::LocalCheckpointTracker;
use crate::commit::CommitPayload;
use crate::id_filter::IdFilters;
use crate::lookup::{find_doc, read_source};
use crate::merge_policy::TieredMergePolicy;
use crate::stats::{Counters, EngineStats, SegmentInfo};
use crate::store::{Integrity, VerifyingMergePolicy};
use crate::version_map::{VersionMap, VersionValue};
use crate::{EngineConfig, EngineError, NO_OPS_PERFORMED};

pub(crate) const SEQ_NO: &str = shoal_mapping::schema::SEQ_NO_FIELD;
pub(crate) const PRIMARY_TERM: &str = shoal_mapping::schema::PRIMARY_TERM_FIELD;
pub(crate) const VERSION: &str = shoal_mapping::schema::VERSION_FIELD;

/// Turns an operation's `_source` back into its tantivy document (translog replay).
pub type ParseDocument<'a> = dyn Fn(&str, &[u8]) -> Result<TantivyDocument, MapperError> + 'a;

/// Told about each commit that made operations searchable; it may read the engine (its
/// checkpoints, `commit_files`) but must not write to it.
pub type RefreshListener = Arc<dyn Fn(&Engine) + Send + Sync>;

mod apply;
pub(crate) mod committing;
mod force_merge;
mod merged;
mod nrt;
mod open;
mod ops;

pub use force_merge::ForceMergeTarget;
pub(crate) use merged::MergeHook;
pub use merged::{MergedSegment, MergedSegmentListener};
pub use nrt::{SegmentCheckpoint, StoreFile};
use open::store_usage;
pub use ops::{DocRequest, GetResult, OpResult, OpResultKind, Origin, VersionType, WriteOp};

/// The latest state of an id, from the version map or the index.
#[derive(Debug, Clone, Copy)]
struct Current {
    seq_no: i64,
    primary_term: i64,
    version: i64,
    deleted: bool,
}

/// State changed only under the write lock.
struct WriteState {
    /// `None` on a segment-replication replica: it copies the primary's segments and only
    /// logs operations (see [`nrt`]); promotion opens one. Also `None` while a commit holds
    /// it outside this lock (`committing`).
    writer: Option<IndexWriter>,
    tracker: LocalCheckpointTracker,
    version_map: VersionMap,
    /// Writes since the last commit.
    dirty: bool,
    /// See [`committing`].
    committing: Option<committing::Pending>,
}

impl WriteState {
    /// The index writer; only called on paths a writer-less engine never takes (its
    /// operations go to [`Engine::log_without_indexing`], its refresh and merges do nothing),
    /// with the engine's commit lock held (no commit has it).
    fn writer(&mut self) -> &mut IndexWriter {
        self.writer
            .as_mut()
            .expect("a writer-less engine never indexes, commits or merges")
    }

    /// A segment-replication replica's engine: it has no writer of its own (one that a commit
    /// holds for the moment does not count).
    fn is_writer_less(&self) -> bool {
        self.writer.is_none() && self.committing.is_none()
    }
}

pub struct Engine {
    config: EngineConfig,
    index: Index,
    schema: ShardSchema,
    reader: IndexReader,
    translog: Translog,
    state: Mutex<WriteState>,
    /// Held by a commit (refresh, flush) from start to end, and to start a merge: one
    /// commit at a time, and nothing else asks for the writer while a commit holds it.
    commit_lock: Mutex<()>,
    /// Told when a commit gives the writer back (writes waiting for room go on).
    commit_ended: parking_lot::Condvar,
    primary_term: AtomicI64,
    global_checkpoint: AtomicI64,
    /// Names the history of operations this store belongs to; a forced primary starts a new one.
    history_uuid: Mutex<String>,
    /// See [`CommitPayload::history_complete_from`]; only grows (translog trimming).
    history_complete_from: AtomicI64,
    /// The lowest seq_no retention leases still need: a flush keeps the translog from there.
    retention_floor: AtomicI64,
    /// The highest seq_no of an operation that updated or deleted a document (on a replica:
    /// the highest its primaries advertised). See [`Engine::advance_max_seq_no_of_updates`].
    max_seq_no_of_updates: AtomicI64,
    /// Also the reader's warmer: it opens `_source` files of every new searcher generation.
    source_cache: Arc<SourceReaderCache>,
    /// Keeps the warmer alive (the reader only holds a weak reference).
    _warmer: Arc<dyn tantivy::Warmer>,
    /// Also a warmer: the `_id` bloom filter of every segment, for version lookups.
    pub(crate) id_filters: Arc<IdFilters>,
    counters: Counters,
    /// Told after every commit (see [`RefreshListener`]).
    refresh_listeners: Mutex<Vec<RefreshListener>>,
    failure: Mutex<Option<String>>,
    /// Corruption found by reads and merges; see [`crate::store`].
    pub(crate) integrity: Integrity,
    /// The `_source` plugin's merge hook (merged segments before their commit) and the
    /// checksums of this primary's segment files, for segment-replication checkpoints.
    merge_hook: MergeHook,
    /// The numbers this copy's new segments are named by (`_<n>`, see `shoal_codec`).
    segment_numbers: SegmentNumbers,
    /// Runs inside a commit while it holds the writer (tests inject faults there).
    #[cfg(test)]
    pub(crate) commit_hook: Mutex<Option<fn(&Engine)>>,
}

impl Engine {
    /// Waits until the translog is durable up to `location` (group commit).
    pub fn sync_to(&self, location: &Location) -> Result<(), EngineError> {
        let synced = self.translog.sync_to(location);
        self.fail_on_error("translog sync failed", synced)?;
        Ok(())
    }

    /// Fsyncs the translog (used by `index.translog.durability: async` on a timer).
    pub fn sync_translog(&self) -> Result<(), EngineError> {
        if self.translog.sync_needed() {
            let synced = self.translog.sync();
            self.fail_on_error("translog sync failed", synced)?;
        }
        Ok(())
    }

    /// Fails the engine for good: after a failed write, fsync or commit nothing tells what
    /// reached the disk, so this engine never commits or acknowledges again. The shard is
    /// reopened from its last commit and translog (or recovered from another copy) instead.
    /// Returns the reason the engine failed with (the first one, if it had already failed).
    pub fn fail_engine(&self, reason: String) -> String {
        let mut failure = self.failure.lock();
        if let Some(first) = failure.as_ref() {
            return first.clone();
        }
        error!(path = %self.config.path.display(), reason = %reason, "shard engine failed");
        *failure = Some(reason.clone());
        reason
    }

    /// Why the engine failed (a write that could not be logged, a commit that did not
    /// complete, a corruption) or was closed (`None` while it works).
    pub fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .clone()
            .or_else(|| self.integrity.corruption())
    }

    /// Whether the engine failed (not merely closed): its copy must be reopened or recovered.
    pub fn has_failed(&self) -> bool {
        self.failure().is_some_and(|reason| reason != CLOSED_REASON)
    }

    /// Whether the engine was closed (its copy closing or gone), not failed.
    pub fn is_closed(&self) -> bool {
        self.failure.lock().as_deref() == Some(CLOSED_REASON)
    }

    fn ensure_open(&self) -> Result<(), EngineError> {
        match self.failure() {
            Some(reason) => Err(EngineError::Closed(reason)),
            None => Ok(()),
        }
    }

    /// Passes `result` on; an error fails the engine first (see [`Engine::fail_engine`]).
    fn fail_on_error<T, E: Into<EngineError>>(
        &self,
        what: &str,
        result: Result<T, E>,
    ) -> Result<T, EngineError> {
        result.map_err(|e| {
            let e: EngineError = e.into();
            let reason = self.fail_engine(format!("{what}: {e}"));
            EngineError::Closed(reason)
        })
    }

    /// Realtime get: sees writes not yet refreshed.
    pub fn get(&self, id: &str) -> Result<Option<GetResult>, EngineError> {
        Counters::add(&self.counters.get_total, 1);
        let state = self.state.lock();
        if let Some(v) = state.version_map.get(id) {
            if v.deleted {
                return Ok(None);
            }
            if let Some(location) = v.location {
                let op = self.translog.read(&location)?;
                Counters::add(&self.counters.get_exists, 1);
                return Ok(Some(GetResult {
                    seq_no: v.seq_no,
                    primary_term: v.primary_term,
                    version: v.version,
                    source: op.source,
                    routing: op.routing,
                }));
            }
        }
        // Not in the version map: the last refresh holds the latest state of this id.
        let searcher = self.reader.searcher();
        drop(state);
        self.get_from(&searcher, id)
    }

    /// Get from the last refreshed searcher only (`realtime=false`).
    pub fn get_refreshed(&self, id: &str) -> Result<Option<GetResult>, EngineError> {
        Counters::add(&self.counters.get_total, 1);
        self.get_from(&self.reader.searcher(), id)
    }

    fn get_from(&self, searcher: &Searcher, id: &str) -> Result<Option<GetResult>, EngineError> {
        let Some(doc) = find_doc(searcher, &self.schema, &self.id_filters, id)? else {
            return Ok(None);
        };
        let source = read_source(searcher, &self.source_cache, doc.address)
            .map_err(|e| self.check_read_error(e))?
            .unwrap_or_default();
        Counters::add(&self.counters.get_exists, 1);
        Ok(Some(GetResult {
            seq_no: doc.seq_no,
            primary_term: doc.primary_term,
            version: doc.version,
            source,
            routing: None,
        }))
    }

    /// Makes every write so far searchable (a tantivy commit). Cheap when nothing changed.
    pub fn refresh(&self) -> Result<bool, EngineError> {
        let _commit = self.commit_lock.lock();
        let merged = self.merge_hook.merges_to_commit(&self.index);
        let state = self.state.lock();
        // A writer-less replica sees what it copied; it has nothing of its own to refresh.
        if !(state.dirty || merged) || state.is_writer_less() {
            return Ok(false);
        }
        let started = Instant::now();
        drop(self.commit(state)?);
        self.notify_refresh_listeners();
        Counters::add(&self.counters.refresh_total, 1);
        Counters::add(
            &self.counters.refresh_time_nanos,
            started.elapsed().as_nanos() as u64,
        );
        Ok(true)
    }

    /// Calls `listener` after every later commit (a refresh that found new writes, or a
    /// flush), outside the engine's locks. Segment replication publishes its
    /// checkpoint from here and the remote store uploads the new files.
    pub fn add_refresh_listener(&self, listener: RefreshListener) {
        self.refresh_listeners.lock().push(listener);
    }

    fn notify_refresh_listeners(&self) {
        let listeners = self.refresh_listeners.lock().clone();
        for listener in listeners {
            listener(self);
        }
    }

    fn maybe_refresh_for_memory(&self) {
        // A running commit frees the map when it ends; waiting for it here would stall the
        // write that asked.
        if self.commit_lock.is_locked() {
            return;
        }
        let too_big =
            self.state.lock().version_map.heap_bytes() > self.config.version_map_limit_bytes;
        if too_big {
            if let Err(e) = self.refresh() {
                warn!(error = %e, "refresh to free version map memory failed");
            }
        }
    }

    /// A flush a user or the translog size threshold asked for (`request.periodic`), counted in
    /// `_stats.flush` whether or not it had anything to commit, as OpenSearch counts
    /// `IndexShard.flush`. The engine's own commits (opening, a new history, closing) are not.
    /// Without `wait_if_ongoing` a commit already running makes it return at once, unflushed.
    pub fn flush_requested(&self, request: crate::FlushRequest) -> Result<bool, EngineError> {
        let started = Instant::now();
        let commit = match request.wait_if_ongoing {
            true => self.commit_lock.lock(),
            false => match self.commit_lock.try_lock() {
                Some(commit) => commit,
                None => return Ok(false),
            },
        };
        let flushed = self.flush_locked(commit, request.force)?;
        Counters::add(&self.counters.flush_total, 1);
        if request.periodic {
            Counters::add(&self.counters.flush_periodic, 1);
        }
        Counters::add(
            &self.counters.flush_time_nanos,
            started.elapsed().as_nanos() as u64,
        );
        Ok(flushed)
    }

    /// Durable commit, then trims translog generations the commit made unnecessary.
    pub fn flush(&self, force: bool) -> Result<bool, EngineError> {
        self.flush_locked(self.commit_lock.lock(), force)
    }

    fn flush_locked(
        &self,
        _commit: parking_lot::MutexGuard<'_, ()>,
        force: bool,
    ) -> Result<bool, EngineError> {
        let mut state = self.state.lock();
        if state.is_writer_less() {
            // Its commits come from the primary (see `install_checkpoint`), which trims.
            drop(state);
            self.sync_translog()?;
            return Ok(false);
        }
        let uncommitted = self.translog.stats().uncommitted_operations;
        if !force && !state.dirty && uncommitted == 0 {
            return Ok(false);
        }
        state.dirty = true;
        // Recorded before the commit that names it, so a crash before the trim below only
        // understates what the translog holds.
        let first_retained = self.first_retained_seq_no(state.tracker.checkpoint());
        self.history_complete_from
            .fetch_max(first_retained, Ordering::AcqRel);
        let (state, committed) = self.commit(state)?;
        let keep_from = self.translog.min_generation_for_seq_no(first_retained);
        drop(state);
        self.notify_refresh_listeners();
        let rolled = self.translog.roll_generation();
        self.fail_on_error("translog roll failed", rolled)?;
        let keep_from = keep_from.min(self.translog.current_generation());
        let trimmed = self.translog.trim_unreferenced(keep_from);
        self.fail_on_error("translog trim failed", trimmed)?;
        // Operations written while the commit ran are in the generation it rolled, not in
        // the commit: that generation still counts as uncommitted.
        self.translog
            .mark_committed(self.translog.min_generation_for_seq_no(committed + 1));
        Ok(true)
    }

    /// The first seq_no a flush keeps in the translog: above the local checkpoint for local
    /// recovery, above the global checkpoint so a promoted copy can resync the others and a
    /// copy can tell what of its history diverged from a new primary's, and from the lowest
    /// seq_no a retention lease still needs (operation-based recovery of returning copies).
    fn first_retained_seq_no(&self, local_checkpoint: i64) -> i64 {
        let floor = self.retention_floor.load(Ordering::Acquire);
        (local_checkpoint.min(self.global_checkpoint()) + 1)
            .min(floor)
            .max(0)
    }

    /// The lowest seq_no the retention leases need kept (`None`: no lease).
    pub fn set_retention_floor(&self, floor: Option<i64>) {
        self.retention_floor
            .store(floor.unwrap_or(i64::MAX), Ordering::Release);
    }

    /// The history this store belongs to (kept in every commit).
    pub fn history_uuid(&self) -> String {
        self.history_uuid.lock().clone()
    }

    /// Starts a new history (a primary forced onto a stale or empty store) and commits it:
    /// copies of the old history can no longer recover by replaying operations from here.
    pub fn bootstrap_new_history(&self) -> Result<(), EngineError> {
        *self.history_uuid.lock() = uuid::Uuid::new_v4().simple().to_string();
        self.flush(true)?;
        Ok(())
    }

    /// Every operation this copy applied with a seq_no at or above this is in its translog.
    pub fn history_complete_from(&self) -> i64 {
        self.history_complete_from.load(Ordering::Acquire)
    }

    /// Fills the seq_no holes below max_seq_no with no-ops under `primary_term`, so a
    /// promoted primary's local checkpoint reaches its max_seq_no (the operations that left
    /// those holes were never acknowledged: an in-sync copy lacked them). Returns how many.
    pub fn fill_seq_no_gaps(&self, primary_term: i64) -> Result<usize, EngineError> {
        let gaps = self.state.lock().tracker.gaps();
        let ops: Vec<WriteOp> = gaps
            .iter()
            .map(|&seq_no| WriteOp::NoOp {
                seq_no,
                primary_term,
                reason: "filling gaps".into(),
            })
            .collect();
        for result in self.apply(ops, Origin::Replica) {
            result?;
        }
        self.sync_translog()?;
        Ok(gaps.len())
    }

    /// Whether the uncommitted translog outgrew `index.translog.flush_threshold_size`.
    pub fn should_flush(&self) -> bool {
        self.translog.stats().uncommitted_size_in_bytes > self.config.flush_threshold_size
    }

    pub(super) fn searchable_segment_ids(
        &self,
    ) -> Result<Vec<tantivy::index::SegmentId>, EngineError> {
        Ok(self
            .index
            .searchable_segment_metas()?
            .iter()
            .map(|m| m.id())
            .collect())
    }

    /// A point-in-time searcher over refreshed data.
    pub fn searcher(&self) -> Searcher {
        self.reader.searcher()
    }

    /// Reads the `_source` of a document found by a search.
    pub fn source_of(
        &self,
        searcher: &Searcher,
        address: tantivy::DocAddress,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        read_source(searcher, &self.source_cache, address).map_err(|e| self.check_read_error(e))
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn schema(&self) -> &ShardSchema {
        &self.schema
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    pub fn primary_term(&self) -> i64 {
        self.primary_term.load(Ordering::Acquire)
    }

    /// Applies changed `index.merge.policy.*` settings to the next merge decision.
    pub fn set_merge_settings(&self, settings: crate::MergeSettings) {
        self.config.merge.set(settings);
    }

    /// Raises the primary term (promotion); the translog records it in new generations.
    pub fn set_primary_term(&self, term: i64) {
        self.primary_term.fetch_max(term, Ordering::AcqRel);
        self.translog.set_primary_term(term);
    }

    pub fn local_checkpoint(&self) -> i64 {
        self.state.lock().tracker.checkpoint()
    }

    pub fn max_seq_no(&self) -> i64 {
        self.state.lock().tracker.max_seq_no()
    }

    /// The highest seq_no of an update or delete this engine knows of (`i64::MAX`: unknown).
    pub fn max_seq_no_of_updates(&self) -> i64 {
        self.max_seq_no_of_updates.load(Ordering::Acquire)
    }

    /// Raises max_seq_no_of_updates: on the primary for each update and delete, on a replica
    /// to the value its primary sent with a batch (before applying it), on a promoted copy
    /// to its max_seq_no (it cannot tell which of the operations it holds were updates).
    pub fn advance_max_seq_no_of_updates(&self, seq_no: i64) {
        self.max_seq_no_of_updates
            .fetch_max(seq_no, Ordering::AcqRel);
    }

    pub fn global_checkpoint(&self) -> i64 {
        self.global_checkpoint.load(Ordering::Acquire)
    }

    /// Updates the global checkpoint (on one node it follows the local checkpoint).
    pub fn update_global_checkpoint(&self, gcp: i64) {
        let previous = self.global_checkpoint.fetch_max(gcp, Ordering::AcqRel);
        if gcp > previous {
            self.translog.set_global_checkpoint(gcp);
        }
    }

    /// Operations in a seq_no range, for peer recovery and cross-cluster replication.
    pub fn history(
        &self,
        from_seq_no: i64,
        to_seq_no: i64,
    ) -> Result<shoal_translog::Snapshot, EngineError> {
        Ok(self.translog.snapshot(from_seq_no, to_seq_no)?)
    }

    /// The files of the last commit with their lengths (segment replication and file-based
    /// recovery compare these).
    pub fn commit_files(&self) -> Result<Vec<(String, u64)>, EngineError> {
        let metas = self.index.load_metas()?;
        let dir = self.config.index_dir();
        let mut files: Vec<(String, u64)> = metas
            .list_segment_files()
            .into_iter()
            .filter_map(|path| {
                let len = std::fs::metadata(dir.join(&path)).ok()?.len();
                Some((path.to_string_lossy().into_owned(), len))
            })
            .collect();
        files.push((
            "meta.json".to_string(),
            std::fs::metadata(dir.join("meta.json"))?.len(),
        ));
        files.sort();
        Ok(files)
    }

    pub fn segments(&self) -> Result<Vec<SegmentInfo>, EngineError> {
        let dir = self.config.index_dir();
        let metas = self.index.searchable_segment_metas()?;
        let files: Vec<(String, u64)> = std::fs::read_dir(&dir)?
            .flatten()
            .filter_map(|e| {
                Some((
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().ok()?.len(),
                ))
            })
            .collect();
        Ok(metas
            .iter()
            .enumerate()
            .map(|(position, meta)| {
                let prefix = meta.id().uuid_string();
                // Segments written before they had numbers keep their id as their name.
                let (name, generation) = match self.segment_number(meta) {
                    Some(number) => (shoal_codec::segment_name(number), number),
                    None => (
                        format!("_{}", meta.id().short_uuid_string()),
                        position as u64,
                    ),
                };
                let size_in_bytes = files
                    .iter()
                    .filter(|(name, _)| name.starts_with(&prefix))
                    .map(|(_, len)| len)
                    .sum();
                SegmentInfo {
                    name,
                    generation,
                    docs_count: meta.num_docs() as u64,
                    docs_deleted: meta.num_deleted_docs() as u64,
                    size_in_bytes,
                    committed: true,
                    searchable: true,
                }
            })
            .collect())
    }

    /// The number a segment is named by, from its `_source` file (the reader cache holds the
    /// searchable segments' files open).
    fn segment_number(&self, meta: &tantivy::index::SegmentMeta) -> Option<u64> {
        if let Some(reader) = self.source_cache.get(meta.id()) {
            return reader.segment_number();
        }
        open::stored_segment_number(&self.index, meta)
    }

    pub fn stats(&self) -> EngineStats {
        let searcher = self.reader.searcher();
        let docs_count = searcher.num_docs();
        let docs_deleted: u64 = searcher
            .segment_readers()
            .iter()
            .map(|s| s.num_deleted_docs() as u64)
            .sum();
        let c = &self.counters;
        let merges = &self.merge_hook.done;
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let (store_size_in_bytes, segment_file_sizes) = store_usage(&self.config.index_dir());
        let state = self.state.lock();
        EngineStats {
            docs_count,
            docs_deleted,
            // Like OpenSearch, the store is the index files; the translog is reported apart.
            store_size_in_bytes,
            segment_file_sizes,
            index_total: load(&c.index_total),
            index_time_in_millis: load(&c.index_time_nanos) / 1_000_000,
            index_current: load(&c.index_current),
            index_failed: load(&c.index_failed),
            delete_total: load(&c.delete_total),
            delete_time_in_millis: load(&c.delete_time_nanos) / 1_000_000,
            noop_update_total: load(&c.noop_update_total),
            refresh_total: load(&c.refresh_total),
            refresh_time_in_millis: load(&c.refresh_time_nanos) / 1_000_000,
            external_refresh_total: load(&c.refresh_total),
            flush_total: load(&c.flush_total),
            flush_periodic: load(&c.flush_periodic),
            flush_time_in_millis: load(&c.flush_time_nanos) / 1_000_000,
            merge_total: load(&merges.total),
            merge_time_in_millis: load(&merges.time_nanos) / 1_000_000,
            merge_docs: load(&merges.docs),
            merge_size_in_bytes: load(&merges.bytes),
            merge_current: load(&c.merge_current) + self.merge_hook.background_merges_current(),
            segments_count: searcher.segment_readers().len() as u64,
            version_map_memory_in_bytes: state.version_map.heap_bytes() as u64,
            get_total: load(&c.get_total),
            get_exists: load(&c.get_exists),
            translog: self.translog.stats(),
            max_seq_no: state.tracker.max_seq_no(),
            local_checkpoint: state.tracker.checkpoint(),
            global_checkpoint: self.global_checkpoint(),
            recovery: Default::default(),
        }
    }

    /// Counts a noop update (update API with `detect_noop`).
    pub fn record_noop_update(&self) {
        Counters::add(&self.counters.noop_update_total, 1);
    }

    /// Counts a document that failed to parse (for `_stats.indexing.index_failed`).
    pub fn record_index_failure(&self) {
        Counters::add(&self.counters.index_failed, 1);
    }

    /// Flushes and closes. The engine must not be used afterwards.
    pub fn close(&self) -> Result<(), EngineError> {
        self.flush(false)?;
        self.translog.sync()?;
        let mut failure = self.failure.lock();
        if failure.is_none() {
            *failure = Some(CLOSED_REASON.to_string());
        }
        Ok(())
    }
}

impl VersionMap {
    pub(crate) fn set_location(&mut self, id: &str, location: Location) {
        if let Some(v) = self.get_mut(id) {
            v.location = Some(location);
        }
    }
}

/// What a closed (not failed) engine answers with.
const CLOSED_REASON: &str = "shard closed";

pub(crate) fn open_or_create_index(
    dir: &Path,
    codec: SourceCodec,
    hook: &MergeHook,
    numbers: &SegmentNumbers,
    flushed: &FlushedSegments,
) -> Result<(Index, ShardSchema), EngineError> {
    let store = SourceStorePlugin::new(codec)
        .with_numbers(numbers.clone())
        .with_flushed(flushed.clone());
    let plugin = hook.plugin(Arc::new(store));
    let index = if dir.join("meta.json").exists() {
        let mut index = Index::open_in_dir(dir)?;
        index.register_plugin(plugin);
        index
    } else {
        let schema = ShardSchema::build(add_source_field);
        Index::builder()
            .schema(schema.schema.clone())
            .register_plugin(plugin)
            .create_in_dir(dir)?
    };
    analysis::register_analyzers(index.tokenizers());
    let schema = ShardSchema::from_schema(index.schema())?;
    Ok((index, schema))
}
