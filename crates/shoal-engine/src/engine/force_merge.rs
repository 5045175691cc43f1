//! `_forcemerge`: merging a shard's segments down to a count, or rewriting the segments that
//! hold too many deleted documents (`only_expunge_deletes`), while background merges wait.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tantivy::index::{SegmentId, SegmentMeta};

use super::Engine;
use crate::stats::Counters;
use crate::EngineError;

/// What a force merge asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForceMergeTarget {
    /// `max_num_segments` (1 unless given): at most that many segments, none with deleted
    /// documents.
    MaxSegments(usize),
    /// `only_expunge_deletes`: rewrite the segments whose deleted documents are more than
    /// `index.merge.policy.expunge_deletes_allowed` percent of theirs, and no other.
    ExpungeDeletes,
}

/// How long a force merge waits for the background merges holding its segments.
const BUSY_DEADLINE: Duration = Duration::from_secs(600);

impl Engine {
    /// Merges the segments searchable when the call starts as `target` asks (blocking). As
    /// Lucene's `forceMerge`, segments later refreshes add are not its concern: under
    /// continuous writes a loop over every segment would never end.
    pub fn force_merge(&self, target: ForceMergeTarget) -> Result<(), EngineError> {
        // A replica's segments are the primary's: it merges by copying the merged segment.
        if self.is_writer_less() {
            return Ok(());
        }
        self.refresh()?;
        let _paused = self.merge_hook.pause_background_merges();
        let mut set = ForceMergeSet::new(self.searchable_segment_ids()?);
        let deadline = Instant::now() + BUSY_DEADLINE;
        loop {
            let current = self.searchable_segment_ids()?;
            // Merges the policy started before the pause end first: racing them rewrites the
            // same segments twice and throws one result away.
            if self.merge_hook.background_merges_running(&current) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            set.observe(&current);
            let metas: Vec<_> = self
                .index
                .searchable_segment_metas()?
                .into_iter()
                .filter(|m| set.is_target(&m.id()))
                .collect();
            let expunge_allowed = self.config.merge.get().expunge_deletes_allowed;
            let Some(picked) = pick_inputs(metas, target, &set, expunge_allowed) else {
                return Ok(());
            };
            let ids: Vec<_> = picked.iter().map(|m| m.id()).collect();
            self.verify_merge_inputs(&picked)?;
            let started = Instant::now();
            Counters::add(&self.counters.merge_current, 1);
            let future = {
                let _commit = self.commit_lock.lock();
                self.state.lock().writer().merge(&ids)
            };
            let outcome = future.wait();
            self.counters.merge_current.fetch_sub(1, Ordering::Relaxed);
            match outcome {
                Ok(merged) => {
                    set.merged(&ids, merged.map(|m| m.id()));
                    // The merge hook counted the merge when it wrote its segment.
                    let took = started.elapsed().as_nanos() as u64;
                    Counters::add(&self.merge_hook.done.time_nanos, took);
                }
                // Background merges may hold some of the segments: wait for them and try again.
                Err(e) if is_busy_segment_error(&e) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(self.merge_failed(e)),
            }
            self.reader.reload()?;
        }
    }
}

/// The segments the next merge of a force merge takes (`None`: it is done). Segments it wrote
/// itself are not rewritten for the deletes they gained since.
pub(crate) fn pick_inputs(
    mut metas: Vec<SegmentMeta>,
    target: ForceMergeTarget,
    set: &ForceMergeSet,
    expunge_deletes_allowed: f64,
) -> Option<Vec<SegmentMeta>> {
    match target {
        ForceMergeTarget::MaxSegments(max) => {
            let max = max.max(1);
            let has_deletes = metas
                .iter()
                .any(|m| m.num_deleted_docs() > 0 && !set.is_own_merge(&m.id()));
            if metas.len() <= max && !has_deletes {
                return None;
            }
            // The smallest segments together, so that `max` remain.
            metas.sort_by_key(|m| m.num_docs());
            let count = if metas.len() > max {
                metas.len() - max + 1
            } else {
                metas.len()
            };
            metas.truncate(count.max(1));
            Some(metas)
        }
        ForceMergeTarget::ExpungeDeletes => {
            metas.retain(|m| {
                !set.is_own_merge(&m.id())
                    && m.max_doc() > 0
                    && m.num_deleted_docs() as f64 * 100.0 / m.max_doc() as f64
                        > expunge_deletes_allowed
            });
            (!metas.is_empty()).then_some(metas)
        }
    }
}

/// The segments a force merge works on: those searchable when it started, what its own merges
/// made of them, and, when a background merge took some of them, the segments that appeared
/// meanwhile (one of them holds their documents; tantivy does not say which).
pub(crate) struct ForceMergeSet {
    targets: HashSet<SegmentId>,
    seen: HashSet<SegmentId>,
    own_merges: HashSet<SegmentId>,
}

impl ForceMergeSet {
    pub(crate) fn new(initial: Vec<SegmentId>) -> ForceMergeSet {
        let targets: HashSet<SegmentId> = initial.into_iter().collect();
        ForceMergeSet {
            seen: targets.clone(),
            targets,
            own_merges: HashSet::new(),
        }
    }

    /// The searchable segments now.
    pub(crate) fn observe(&mut self, current: &[SegmentId]) {
        let current: HashSet<SegmentId> = current.iter().copied().collect();
        if self.targets.iter().any(|id| !current.contains(id)) {
            self.targets.retain(|id| current.contains(id));
            let newcomers = current.difference(&self.seen).copied().collect::<Vec<_>>();
            self.targets.extend(newcomers);
        }
        self.seen.extend(current);
    }

    /// This force merge merged `inputs` into `output` (`None`: they held no live document).
    pub(crate) fn merged(&mut self, inputs: &[SegmentId], output: Option<SegmentId>) {
        for id in inputs {
            self.targets.remove(id);
        }
        if let Some(id) = output {
            self.targets.insert(id);
            self.seen.insert(id);
            self.own_merges.insert(id);
        }
    }

    pub(crate) fn is_target(&self, id: &SegmentId) -> bool {
        self.targets.contains(id)
    }

    /// Whether this force merge wrote `id`: deletes it gained since are not merged away again
    /// (under continuous updates that would never end either).
    pub(crate) fn is_own_merge(&self, id: &SegmentId) -> bool {
        self.own_merges.contains(id)
    }
}

/// tantivy refuses to merge segments that a background merge is already rewriting, or that
/// one has just replaced (listed a moment before the merge was asked for).
fn is_busy_segment_error(error: &tantivy::TantivyError) -> bool {
    let text = error.to_string();
    text.contains("could not be found in the SegmentManager")
        || text.contains("not all uncommitted or committed")
}
