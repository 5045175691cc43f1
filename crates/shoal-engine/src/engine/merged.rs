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

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;
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
}

impl MergeHook {
    pub(crate) fn new(dir: PathBuf) -> MergeHook {
        MergeHook {
            dir,
            listener: Arc::default(),
            checksums: Arc::default(),
        }
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

    fn merged(&self, segment: &tantivy::Segment) {
        let Some(listener) = self.listener.lock().clone() else {
            return;
        };
        let id = segment.id().uuid_string();
        let merged = MergedSegment {
            files: segment_files(&self.dir, &id),
            segment: id,
            dir: self.dir.clone(),
            checksums: self.checksums.clone(),
        };
        listener(&merged);
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
        let target = ctx.target_segment;
        self.inner.merge(ctx)?;
        self.hook.merged(target);
        Ok(())
    }

    fn space_usage(
        &self,
        segment_reader: &SegmentReader,
    ) -> tantivy::Result<BTreeMap<String, ComponentSpaceUsage>> {
        self.inner.space_usage(segment_reader)
    }
}
