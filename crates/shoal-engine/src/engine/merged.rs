//! Merged segments before tantivy makes them part of the index (segment replication's
//! pre-copy of merged segments).
//!
//! tantivy 0.27 has no merge listener: a merge thread writes the new segment, then `end_merge`
//! puts it into the segment set and, for committed segments, rewrites `meta.json` at once (same
//! opstamp). From then on every checkpoint names it, and a replica cannot search anything newer
//! before it has copied the whole merged segment: that is the lag spike of a merge. The one
//! point where the segment is complete but not yet in any commit is the end of the merge's
//! plugin pass (`IndexMerger::write` runs the built-in plugins, then the custom ones, then
//! returns to `end_merge`). Shoal's only custom plugin is the `_source` store, so it is wrapped
//! here: after its own merge the segment's files are all written and closed, and the
//! [`MergedSegmentListener`] runs on the merge thread. Blocking there holds back only this
//! merge's commit (OpenSearch's warmer blocks Lucene's merge thread the same way); refreshes
//! commit on tantivy's segment-updater thread and keep publishing checkpoints that name the
//! segments being merged.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tantivy::index::{SegmentId, SegmentMeta};
use tantivy::merge_policy::{MergeCandidate, MergePolicy};
use tantivy::space_usage::ComponentSpaceUsage;
use tantivy::{
    PluginMergeContext, PluginWriter, PluginWriterContext, SegmentPlugin, SegmentReader,
};

use super::nrt::ChecksumCache;
use super::*;

/// A merged segment whose files are complete and which no commit names yet.
pub struct MergedSegment {
    /// tantivy's segment id (the files are `<segment>.<ext>`).
    pub segment: String,
    dir: PathBuf,
    /// (name, length) of each file, by name.
    pub files: Vec<(String, u64)>,
    checksums: Arc<ChecksumCache>,
}

impl MergedSegment {
    /// The bytes of the segment's files.
    pub fn length(&self) -> u64 {
        self.files.iter().map(|(_, length)| length).sum()
    }

    /// The files with their crc32c (after each file's footer check), as a checkpoint lists
    /// them. The checksums are remembered, so the checkpoint that later names the segment
    /// does not read its files again.
    pub fn store_files(&self) -> Result<Vec<StoreFile>, EngineError> {
        self.files
            .iter()
            .map(|(name, _)| {
                let (length, checksum) = self
                    .checksums
                    .checksum(&self.dir, name)
                    .map_err(EngineError::Corrupted)?;
                Ok(StoreFile {
                    name: name.clone(),
                    length,
                    checksum,
                })
            })
            .collect()
    }
}

/// Told about every merged segment before tantivy commits it, on the merge thread (which
/// waits for it to return). It must not write to the engine.
pub type MergedSegmentListener = Arc<dyn Fn(&MergedSegment) + Send + Sync>;

/// What the engine and its `_source` plugin share: the index directory, the merged-segment
/// listener and the checksums of the primary's segment files.
#[derive(Clone)]
pub(crate) struct MergeHook {
    dir: PathBuf,
    listener: Arc<Mutex<Option<MergedSegmentListener>>>,
    pub(crate) checksums: Arc<ChecksumCache>,
    /// A force merge runs: the merge policy proposes nothing (see [`PausableMergePolicy`]).
    paused: Arc<AtomicBool>,
    /// The background merges the policy proposed that may still run.
    running: Arc<Mutex<Vec<Proposed>>>,
    /// Merged segments no commit of the engine names yet (see [`MergeHook::merges_to_commit`]).
    uncommitted: Arc<Mutex<Vec<(SegmentId, Instant)>>>,
    /// Every merge that wrote its segment, background or forced (`_stats.merges`).
    pub(crate) done: Arc<MergeCounters>,
}

/// A background merge the policy proposed.
struct Proposed {
    inputs: Vec<SegmentId>,
    at: Instant,
    /// Its segment is written (and counted); tantivy may not have swapped it in yet.
    written: bool,
}

/// The merges of an engine's writer, as `_stats.merges` counts them.
#[derive(Debug, Default)]
pub(crate) struct MergeCounters {
    pub(crate) total: AtomicU64,
    pub(crate) docs: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) time_nanos: AtomicU64,
}

impl MergeCounters {
    fn count(&self, docs: u64, bytes: u64, took: Duration) {
        Counters::add(&self.total, 1);
        Counters::add(&self.docs, docs);
        Counters::add(&self.bytes, bytes);
        Counters::add(&self.time_nanos, took.as_nanos() as u64);
    }
}

/// How long a merged segment that never appears among the searchable ones (its merge failed
/// after writing it, or a later merge took it first) is looked for at each refresh.
const UNCOMMITTED_MERGE_EXPIRY: Duration = Duration::from_secs(60);

impl MergeHook {
    pub(crate) fn new(dir: PathBuf) -> MergeHook {
        MergeHook {
            dir,
            listener: Arc::default(),
            checksums: Arc::default(),
            paused: Arc::default(),
            running: Arc::default(),
            uncommitted: Arc::default(),
            done: Arc::default(),
        }
    }

    /// `policy`, proposing nothing while a force merge runs.
    pub(crate) fn pausable(&self, policy: Box<dyn MergePolicy>) -> Box<dyn MergePolicy> {
        Box::new(PausableMergePolicy {
            inner: policy,
            paused: self.paused.clone(),
            running: self.running.clone(),
        })
    }

    /// Whether a background merge of segments that are all still among `current` may be
    /// running (a merge that ended replaced its inputs).
    pub(crate) fn background_merges_running(&self, current: &[SegmentId]) -> bool {
        let current: HashSet<&SegmentId> = current.iter().collect();
        let mut running = self.running.lock();
        running.retain(|merge| merge.inputs.iter().all(|id| current.contains(id)));
        !running.is_empty()
    }

    /// Background merges proposed whose segment is not written yet.
    pub(crate) fn background_merges_current(&self) -> u64 {
        self.running.lock().iter().filter(|m| !m.written).count() as u64
    }

    /// How long ago the policy proposed the merge of `readers`, which has now written its
    /// segment; `None` for a merge the policy did not propose (a force merge).
    fn take_proposal(&self, readers: &[SegmentReader]) -> Option<Duration> {
        let inputs: HashSet<SegmentId> = readers.iter().map(SegmentReader::segment_id).collect();
        let mut running = self.running.lock();
        let merge = running.iter_mut().find(|m| {
            !m.written
                && m.inputs.len() == inputs.len()
                && m.inputs.iter().all(|id| inputs.contains(id))
        })?;
        merge.written = true;
        Some(merge.at.elapsed())
    }

    /// Whether a merge ended since the engine's last commit: tantivy swapped its segment in
    /// and rewrote `meta.json` under the last commit's opstamp, so no checkpoint names it and
    /// the reader still searches its inputs. The next refresh then commits although nothing
    /// was written (as OpenSearch's scheduled refresh picks up a merge): replicas install the
    /// merged segment and drop its inputs, and the inputs' files are freed here. Reads
    /// `meta.json` only while a merged segment waits.
    pub(crate) fn merges_to_commit(&self, index: &Index) -> bool {
        let mut uncommitted = self.uncommitted.lock();
        if uncommitted.is_empty() {
            return false;
        }
        let Ok(searchable) = index.searchable_segment_ids() else {
            return false;
        };
        let mut swapped_in = false;
        uncommitted.retain(|(id, at)| {
            if searchable.contains(id) {
                swapped_in = true;
                return false;
            }
            at.elapsed() < UNCOMMITTED_MERGE_EXPIRY
        });
        swapped_in
    }

    /// Pauses background merges until the guard is dropped.
    pub(crate) fn pause_background_merges(&self) -> MergesPaused {
        self.paused.store(true, Ordering::Release);
        MergesPaused(self.paused.clone())
    }

    /// The `_source` store plugin, with this hook at the end of its merges.
    pub(crate) fn plugin(&self, inner: Arc<dyn SegmentPlugin>) -> Arc<dyn SegmentPlugin> {
        Arc::new(HookedPlugin {
            inner,
            hook: self.clone(),
        })
    }

    /// Sets the listener, unless one is set already; returns whether it set it.
    pub(crate) fn listen(&self, listener: MergedSegmentListener) -> bool {
        let mut slot = self.listener.lock();
        if slot.is_some() {
            return false;
        }
        *slot = Some(listener);
        true
    }

    /// A merge wrote `segment` from `inputs`: counted (a background merge's time runs from the
    /// policy's proposal; a force merge adds its own), remembered until a commit names it, and
    /// told to the listener.
    fn merged(&self, segment: &tantivy::Segment, inputs: &[SegmentReader]) {
        let id = segment.id().uuid_string();
        let files = segment_files(&self.dir, &id);
        let docs = inputs.iter().map(|r| u64::from(r.num_docs())).sum();
        let bytes = files.iter().map(|(_, length)| length).sum();
        let took = self.take_proposal(inputs).unwrap_or_default();
        self.done.count(docs, bytes, took);
        self.uncommitted.lock().push((segment.id(), Instant::now()));
        let Some(listener) = self.listener.lock().clone() else {
            return;
        };
        let merged = MergedSegment {
            files,
            segment: id,
            dir: self.dir.clone(),
            checksums: self.checksums.clone(),
        };
        // A listener's bug must not become a failed merge (tantivy reports a panicking merge
        // thread as a merge error, which fails the engine as corrupted).
        let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| listener(&merged)));
        if called.is_err() {
            error!(segment = %merged.segment, "the merged-segment listener panicked");
        }
    }
}

impl Engine {
    /// Calls `listener` for every merged segment of this engine's writer, after its files are
    /// written and before tantivy commits it (see the module doc); the first listener set
    /// stays (returns whether this one was set).
    pub fn set_merged_segment_listener(&self, listener: MergedSegmentListener) -> bool {
        self.merge_hook.listen(listener)
    }
}

/// Background merges stay off while a force merge runs: tantivy does not keep an explicit
/// merge and a background one apart, so both would rewrite the same segments and the one that
/// ends second is thrown away (with a pre-copy, after its files went to every replica), and
/// under continuous writes the policy keeps picking the segments the force merge wants.
/// It also remembers what it proposed, so a force merge can wait for the merges already
/// running instead of racing them.
struct PausableMergePolicy {
    inner: Box<dyn MergePolicy>,
    paused: Arc<AtomicBool>,
    running: Arc<Mutex<Vec<Proposed>>>,
}

impl std::fmt::Debug for PausableMergePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PausableMergePolicy")
            .field("inner", &self.inner)
            .finish()
    }
}

impl MergePolicy for PausableMergePolicy {
    fn compute_merge_candidates(&self, segments: &[SegmentMeta]) -> Vec<MergeCandidate> {
        // tantivy offers only segments no merge is rewriting: a merge whose input is offered
        // again is over (it failed; one that succeeded replaced its inputs).
        let offered: HashSet<SegmentId> = segments.iter().map(|m| m.id()).collect();
        self.running
            .lock()
            .retain(|merge| !merge.inputs.iter().any(|id| offered.contains(id)));
        if self.paused.load(Ordering::Acquire) {
            return Vec::new();
        }
        let candidates = self.inner.compute_merge_candidates(segments);
        let now = Instant::now();
        self.running
            .lock()
            .extend(candidates.iter().map(|c| Proposed {
                inputs: c.0.clone(),
                at: now,
                written: false,
            }));
        candidates
    }
}

/// Background merges resume when this is dropped.
pub(crate) struct MergesPaused(Arc<AtomicBool>);

impl Drop for MergesPaused {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The files of segment `segment` in `dir` (name, length), by name.
fn segment_files(dir: &std::path::Path, segment: &str) -> Vec<(String, u64)> {
    let prefix = format!("{segment}.");
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) {
            if let Ok(metadata) = entry.metadata() {
                files.insert(name, metadata.len());
            }
        }
    }
    files.into_iter().collect()
}

/// The `_source` store plugin with the merge hook after its merge (see the module doc).
struct HookedPlugin {
    inner: Arc<dyn SegmentPlugin>,
    hook: MergeHook,
}

impl SegmentPlugin for HookedPlugin {
    fn extensions(&self) -> &[&str] {
        self.inner.extensions()
    }

    fn create_writer(&self, ctx: &PluginWriterContext) -> tantivy::Result<Box<dyn PluginWriter>> {
        self.inner.create_writer(ctx)
    }

    fn merge(&self, ctx: PluginMergeContext) -> tantivy::Result<()> {
        let (target, inputs) = (ctx.target_segment, ctx.readers);
        self.inner.merge(ctx)?;
        self.hook.merged(target, inputs);
        Ok(())
    }

    fn space_usage(
        &self,
        segment_reader: &SegmentReader,
    ) -> tantivy::Result<BTreeMap<String, ComponentSpaceUsage>> {
        self.inner.space_usage(segment_reader)
    }
}
