//! Which segments a shard merges in the background: OpenSearch's tiered merge policy
//! (`index.merge.policy.*`), on tantivy's merge scheduler.
//!
//! The index may hold a budget of segments: `segments_per_tier` segments of the floor size,
//! `segments_per_tier` of `max_merge_at_once` times that, and so on, up to
//! `max_merged_segment`. While it holds more, or more deleted documents than
//! `deletes_pct_allowed`, the policy merges the group of at most `max_merge_at_once`
//! size-adjacent segments with the lowest score: evenly sized groups first (merging one big
//! segment with small ones rewrites the big one for little gain), smaller results slightly
//! first, and groups with deleted documents first. Sizes are bytes on disk less the share of
//! deleted documents, as in Lucene; segments under the floor count as the floor, so a shower
//! of tiny refresh segments is merged in groups instead of one merge each.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tantivy::index::{SegmentId, SegmentMeta};
use tantivy::indexer::{MergeCandidate, MergePolicy};

/// `index.merge.policy.*`, with OpenSearch's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MergeSettings {
    /// `segments_per_tier`: segments allowed per tier before a merge.
    pub segments_per_tier: f64,
    /// `max_merge_at_once`: segments merged at once (at most `segments_per_tier`).
    pub max_merge_at_once: usize,
    /// `floor_segment`: smaller segments count as this size.
    pub floor_segment: u64,
    /// `max_merged_segment`: no background merge makes a larger segment.
    pub max_merged_segment: u64,
    /// `deletes_pct_allowed`: deleted documents allowed, in percent of all documents.
    pub deletes_pct_allowed: f64,
    /// `expunge_deletes_allowed`: `_forcemerge?only_expunge_deletes` rewrites the segments
    /// with more deleted documents than this percent of theirs.
    pub expunge_deletes_allowed: f64,
}

impl Default for MergeSettings {
    fn default() -> MergeSettings {
        MergeSettings {
            segments_per_tier: 10.0,
            max_merge_at_once: 10,
            floor_segment: 2 * 1024 * 1024,
            max_merged_segment: 5 * 1024 * 1024 * 1024,
            deletes_pct_allowed: 20.0,
            expunge_deletes_allowed: 10.0,
        }
    }
}

/// The merge settings of one shard, shared by its engine (which updates them when the index
/// settings change) and its writer's merge policy (which reads them at every decision).
#[derive(Debug, Clone, Default)]
pub struct SharedMergeSettings(Arc<RwLock<MergeSettings>>);

impl SharedMergeSettings {
    pub fn new(settings: MergeSettings) -> SharedMergeSettings {
        SharedMergeSettings(Arc::new(RwLock::new(settings)))
    }

    pub fn get(&self) -> MergeSettings {
        *self.0.read()
    }

    pub fn set(&self, settings: MergeSettings) {
        *self.0.write() = settings;
    }
}

/// One segment as the policy weighs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Weighed {
    /// Bytes on disk, deleted documents included.
    pub bytes: u64,
    pub max_doc: u32,
    pub deleted: u32,
}

impl Weighed {
    /// Bytes after a merge: the share of live documents.
    fn live_bytes(&self) -> f64 {
        if self.max_doc == 0 {
            return 0.0;
        }
        self.bytes as f64 * (1.0 - self.deleted as f64 / self.max_doc as f64)
    }

    fn deleted_share(&self) -> f64 {
        if self.max_doc == 0 {
            return 0.0;
        }
        self.deleted as f64 / self.max_doc as f64
    }
}

/// Chooses the merges for `segments`; each merge lists indexes into `segments`.
pub(crate) fn choose_merges(segments: &[Weighed], settings: &MergeSettings) -> Vec<Vec<usize>> {
    let merge_factor = settings
        .max_merge_at_once
        .min(settings.segments_per_tier.floor() as usize)
        .max(2);
    let max_merged = settings.max_merged_segment as f64;
    let floor = settings.floor_segment as f64;
    let mut sorted: Vec<usize> = (0..segments.len()).collect();
    sorted.sort_by(|a, b| {
        segments[*b]
            .live_bytes()
            .total_cmp(&segments[*a].live_bytes())
    });
    // A segment half the maximum size or more, with few deletes, is done: merging it would
    // make a segment past the maximum.
    let too_large = |s: &Weighed| {
        s.live_bytes() >= max_merged / 2.0
            && s.deleted_share() * 100.0 < settings.deletes_pct_allowed
    };
    let mut eligible: Vec<usize> = sorted
        .into_iter()
        .filter(|i| !too_large(&segments[*i]))
        .collect();
    let total_bytes: f64 = eligible.iter().map(|i| segments[*i].live_bytes()).sum();
    let smallest = eligible.last().map_or(0.0, |i| segments[*i].live_bytes());
    let allowed_segments = allowed_segment_count(total_bytes, smallest, settings, merge_factor);
    let max_docs: u64 = segments.iter().map(|s| s.max_doc as u64).sum();
    let allowed_deleted = max_docs as f64 * settings.deletes_pct_allowed / 100.0;

    let mut merges = Vec::new();
    loop {
        let deleted: u64 = eligible.iter().map(|i| segments[*i].deleted as u64).sum();
        if eligible.len() as f64 <= allowed_segments && deleted as f64 <= allowed_deleted {
            return merges;
        }
        let Some(best) = best_merge(segments, &eligible, merge_factor, max_merged, floor) else {
            return merges;
        };
        eligible.retain(|i| !best.contains(i));
        merges.push(best);
    }
}

/// How many segments an index of `total_bytes` may hold: `segments_per_tier` per tier, each
/// tier `merge_factor` times the size of the one below, the lowest at the floor size.
fn allowed_segment_count(
    total_bytes: f64,
    smallest: f64,
    settings: &MergeSettings,
    merge_factor: usize,
) -> f64 {
    let max_merged = settings.max_merged_segment as f64;
    let mut level_size = smallest.max(settings.floor_segment as f64).max(1.0);
    let mut bytes_left = total_bytes;
    let mut allowed = 0.0;
    loop {
        let at_this_level = bytes_left / level_size;
        if at_this_level < settings.segments_per_tier || level_size >= max_merged {
            allowed += at_this_level.ceil();
            break;
        }
        allowed += settings.segments_per_tier;
        bytes_left -= settings.segments_per_tier * level_size;
        level_size = (level_size * merge_factor as f64).min(max_merged);
    }
    allowed.max(settings.segments_per_tier)
}

/// The group of size-adjacent segments (largest first in `eligible`) with the lowest score.
fn best_merge(
    segments: &[Weighed],
    eligible: &[usize],
    merge_factor: usize,
    max_merged: f64,
    floor: f64,
) -> Option<Vec<usize>> {
    let mut best: Option<(f64, Vec<usize>)> = None;
    for start in 0..eligible.len() {
        let mut group = Vec::new();
        let mut merged_bytes = 0.0;
        let mut hit_too_large = false;
        for &i in &eligible[start..] {
            if group.len() == merge_factor {
                break;
            }
            let bytes = segments[i].live_bytes();
            if merged_bytes + bytes > max_merged {
                // Leave it out and try to fill the merge with smaller ones.
                hit_too_large = true;
                continue;
            }
            group.push(i);
            merged_bytes += bytes;
        }
        let rewrites_nothing = group.len() == 1 && segments[group[0]].deleted == 0;
        if group.is_empty() || rewrites_nothing {
            continue;
        }
        // Past this start only smaller, shorter groups remain.
        if best.is_some() && !hit_too_large && group.len() < merge_factor {
            break;
        }
        let score = merge_score(segments, &group, hit_too_large, merge_factor, floor);
        if best.as_ref().is_none_or(|(b, _)| score < *b) {
            best = Some((score, group));
        }
    }
    best.map(|(_, group)| group)
}

/// Lower is better: Lucene's skew × size^0.05 × (live share)².
fn merge_score(
    segments: &[Weighed],
    group: &[usize],
    hit_too_large: bool,
    merge_factor: usize,
    floor: f64,
) -> f64 {
    let before: f64 = group.iter().map(|i| segments[*i].bytes as f64).sum();
    let after: f64 = group.iter().map(|i| segments[*i].live_bytes()).sum();
    let floored: f64 = group
        .iter()
        .map(|i| segments[*i].live_bytes().max(floor))
        .sum();
    let skew = if hit_too_large {
        // A merge up to the maximum size: as good as a perfectly even one.
        1.0 / merge_factor as f64
    } else {
        segments[group[0]].live_bytes().max(floor) / floored
    };
    let live_share = if before > 0.0 { after / before } else { 1.0 };
    skew * after.max(1.0).powf(0.05) * live_share * live_share
}

/// The tiered policy on a tantivy writer: weighs the segments it is offered (bytes on disk,
/// measured once per segment: segment files never change) and proposes [`choose_merges`].
pub(crate) struct TieredMergePolicy {
    settings: SharedMergeSettings,
    /// The index directory (segment files are `<segment id>.<extension>`).
    dir: PathBuf,
    bytes: Mutex<HashMap<SegmentId, u64>>,
}

impl TieredMergePolicy {
    pub(crate) fn new(settings: SharedMergeSettings, dir: PathBuf) -> TieredMergePolicy {
        TieredMergePolicy {
            settings,
            dir,
            bytes: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn weigh(&self, segments: &[SegmentMeta]) -> Vec<Weighed> {
        let mut known = self.bytes.lock();
        // Forget segments gone from the offer (merged away, or in a merge right now).
        let offered: HashSet<SegmentId> = segments.iter().map(|m| m.id()).collect();
        known.retain(|id, _| offered.contains(id));
        let unknown: HashMap<String, SegmentId> = segments
            .iter()
            .filter(|m| !known.contains_key(&m.id()))
            .map(|m| (m.id().uuid_string(), m.id()))
            .collect();
        if !unknown.is_empty() {
            let measured = self.bytes_on_disk(&unknown);
            for (name, id) in unknown {
                known.insert(id, measured.get(&name).copied().unwrap_or(0));
            }
        }
        segments
            .iter()
            .map(|meta| Weighed {
                bytes: known[&meta.id()],
                max_doc: meta.max_doc(),
                deleted: meta.num_deleted_docs(),
            })
            .collect()
    }

    /// The bytes of each of `segments` (by id) in one listing of the index directory, without
    /// their deletes files (which change; the deleted share is counted apart).
    fn bytes_on_disk(&self, segments: &HashMap<String, SegmentId>) -> HashMap<String, u64> {
        let mut bytes = HashMap::new();
        for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some((segment, _)) = name.split_once('.') else {
                continue;
            };
            if name.ends_with(".del") || !segments.contains_key(segment) {
                continue;
            }
            let length = entry.metadata().map_or(0, |m| m.len());
            *bytes.entry(segment.to_string()).or_insert(0) += length;
        }
        bytes
    }
}

impl std::fmt::Debug for TieredMergePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TieredMergePolicy")
            .field("settings", &self.settings.get())
            .finish()
    }
}

impl MergePolicy for TieredMergePolicy {
    fn compute_merge_candidates(&self, segments: &[SegmentMeta]) -> Vec<MergeCandidate> {
        let weighed = self.weigh(segments);
        choose_merges(&weighed, &self.settings.get())
            .into_iter()
            .map(|merge| MergeCandidate(merge.into_iter().map(|i| segments[i].id()).collect()))
            .collect()
    }
}
