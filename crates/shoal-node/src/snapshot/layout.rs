//! What a snapshot repository holds, and under which keys.
//!
//! ```text
//! generations/index-<generation>       the repository's snapshots (the newest generation wins)
//! snap-<uuid>.json                     one snapshot: its indices' metadata, every shard's files
//! blobs/<file>__<length>__<crc32c>     a segment file, shared by every snapshot that names it
//! blobs/<file>__<length>__<crc32c>.<part bytes>.part<n>
//!                                      part n of a file stored in parts (`chunk_size`)
//! tests-<uuid>                         written and removed again when a repository is verified
//! ```
//! A segment file never changes once written, and its key names its length and checksum:
//! a file already in the repository is not uploaded again (snapshots are incremental), and a
//! restored index snapshotted again uploads nothing new. A snapshot becomes visible when the
//! generation naming it is written, after its own file: a reader never sees half of one.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use shoal_state::IndexMetadata;

pub const GENERATIONS_FOLDER: &str = "generations/";
const GENERATION_PREFIX: &str = "generations/index-";
pub const BLOBS_FOLDER: &str = "blobs/";

/// The key of generation `n` (zero-padded: names sort as the numbers do).
pub fn generation_key(generation: u64) -> String {
    format!("{GENERATION_PREFIX}{generation:019}")
}

/// The generation a key names, if it is a generation key.
pub fn generation_of(key: &str) -> Option<u64> {
    key.strip_prefix(GENERATION_PREFIX)?.parse().ok()
}

pub fn snapshot_key(uuid: &str) -> String {
    format!("snap-{uuid}.json")
}

/// Whether `key` names a snapshot's own file (at the repository's root).
pub fn is_snapshot_key(key: &str) -> bool {
    key.starts_with("snap-") && key.ends_with(".json") && !key.contains('/')
}

/// A snapshot's state, as OpenSearch names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SnapshotState {
    InProgress,
    Success,
    Partial,
    Failed,
}

impl SnapshotState {
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotState::InProgress => "IN_PROGRESS",
            SnapshotState::Success => "SUCCESS",
            SnapshotState::Partial => "PARTIAL",
            SnapshotState::Failed => "FAILED",
        }
    }
}

/// The snapshots a repository holds: what `GET _snapshot/{repo}/_all` lists without reading
/// every snapshot's own file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RepositoryData {
    pub generation: u64,
    pub snapshots: Vec<SnapshotSummary>,
}

impl RepositoryData {
    pub fn find(&self, name: &str) -> Option<&SnapshotSummary> {
        self.snapshots.iter().find(|s| s.name == name)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotSummary {
    pub name: String,
    pub uuid: String,
    pub state: SnapshotState,
    pub indices: Vec<String>,
    pub start_millis: i64,
    pub end_millis: i64,
    pub shards_total: usize,
    pub shards_failed: usize,
}

/// One snapshot's own file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotDetails {
    pub name: String,
    pub uuid: String,
    pub state: SnapshotState,
    pub start_millis: i64,
    pub end_millis: i64,
    pub include_global_state: bool,
    /// The user's `metadata` object, kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Persistent cluster settings, with `include_global_state`.
    #[serde(default)]
    pub persistent_settings: BTreeMap<String, Value>,
    pub indices: BTreeMap<String, IndexSnapshot>,
    #[serde(default)]
    pub failures: Vec<ShardFailure>,
}

impl SnapshotDetails {
    pub fn summary(&self) -> SnapshotSummary {
        SnapshotSummary {
            name: self.name.clone(),
            uuid: self.uuid.clone(),
            state: self.state,
            indices: self.indices.keys().cloned().collect(),
            start_millis: self.start_millis,
            end_millis: self.end_millis,
            shards_total: self.shards_total(),
            shards_failed: self.failures.len(),
        }
    }

    pub fn shards_total(&self) -> usize {
        self.indices.values().map(|i| i.shards.len()).sum()
    }

    /// Every blob this snapshot's shards name.
    pub fn blobs(&self) -> BTreeSet<String> {
        self.indices
            .values()
            .flat_map(|i| i.shards.iter().flatten())
            .flat_map(|s| s.files.iter().flat_map(|f| s.layout_of(f).pieces(f)))
            .map(|(key, _)| key)
            .collect()
    }
}

/// An index in a snapshot: its metadata and, per shard, what was copied (`None`: the shard
/// failed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexSnapshot {
    pub meta: IndexMetadata,
    pub shards: Vec<Option<ShardSnapshot>>,
}

/// A shard's commit in a snapshot, and what it cost to take.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardSnapshot {
    pub files: Vec<SnapshotFile>,
    /// The commit's `meta.json`.
    pub meta_json: String,
    pub local_checkpoint: i64,
    pub max_seq_no: i64,
    /// Files (and their bytes) this snapshot uploaded; the others were in the repository.
    pub incremental_files: usize,
    pub incremental_bytes: u64,
    /// The files stored in parts, by name, with the bytes of a part; the others are whole.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parts: BTreeMap<String, u64>,
    pub start_millis: i64,
    pub time_millis: u64,
    pub node_id: String,
}

impl ShardSnapshot {
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.length).sum()
    }

    /// How the repository holds `file`, one of this shard's files.
    pub fn layout_of(&self, file: &SnapshotFile) -> BlobLayout {
        match self.parts.get(&file.name) {
            Some(&part_bytes) => BlobLayout::Parts(part_bytes),
            None => BlobLayout::Whole,
        }
    }
}

/// How a repository holds a file: one blob, or parts of so many bytes (`chunk_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobLayout {
    Whole,
    Parts(u64),
}

impl BlobLayout {
    /// How a file of `length` bytes is uploaded to a repository with `chunk_bytes`.
    pub fn for_upload(length: u64, chunk_bytes: Option<u64>) -> BlobLayout {
        match chunk_bytes {
            Some(part_bytes) if length > part_bytes => BlobLayout::Parts(part_bytes),
            _ => BlobLayout::Whole,
        }
    }

    /// The blobs holding `file`, in order, each with the bytes of the file it holds. Parts
    /// name their size: a repository whose `chunk_size` changed never overwrites a part an
    /// older snapshot reads.
    pub fn pieces(self, file: &SnapshotFile) -> Vec<(String, Range<u64>)> {
        let whole = blob_key(file);
        let part_bytes = match self {
            BlobLayout::Parts(part_bytes) if part_bytes > 0 => part_bytes,
            _ => return vec![(whole, 0..file.length)],
        };
        (0..file.length.div_ceil(part_bytes))
            .map(|n| {
                let start = n * part_bytes;
                let end = (start + part_bytes).min(file.length);
                (format!("{whole}.{part_bytes}.part{n}"), start..end)
            })
            .collect()
    }
}

/// A file of a shard's commit in a snapshot: the engine's own file record.
pub use shoal_engine::StoreFile as SnapshotFile;

/// Where the repository keeps a file: its name, length and checksum name its content.
pub fn blob_key(file: &SnapshotFile) -> String {
    format!(
        "{BLOBS_FOLDER}{}__{}__{:08x}",
        file.name, file.length, file.checksum
    )
}

/// A shard the snapshot could not copy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardFailure {
    pub index: String,
    pub index_uuid: String,
    pub shard: usize,
    pub reason: String,
    pub node_id: Option<String>,
    pub status: String,
}

/// The blobs under `blobs/` that no snapshot in `kept` names: what a delete removes.
pub fn unreferenced_blobs<'a, 'k>(
    stored: impl IntoIterator<Item = &'a str>,
    kept: impl IntoIterator<Item = &'k SnapshotDetails>,
) -> Vec<String> {
    let referenced: BTreeSet<String> = kept.into_iter().flat_map(SnapshotDetails::blobs).collect();
    stored
        .into_iter()
        .filter(|key| key.starts_with(BLOBS_FOLDER) && !referenced.contains(*key))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(length: u64) -> SnapshotFile {
        SnapshotFile {
            name: "a.store".into(),
            length,
            checksum: 0xbeef,
        }
    }

    #[test]
    fn parts_cover_the_file_end_to_end_under_keys_naming_their_size() {
        let pieces = BlobLayout::for_upload(25, Some(10)).pieces(&file(25));
        let ranges: Vec<_> = pieces.iter().map(|(_, r)| r.clone()).collect();
        assert_eq!(ranges, vec![0..10, 10..20, 20..25]);
        assert_eq!(pieces[2].0, "blobs/a.store__25__0000beef.10.part2");
        // At most chunk_size, or no chunk_size: one blob under the file's own key.
        for layout in [
            BlobLayout::for_upload(10, Some(10)),
            BlobLayout::for_upload(25, None),
        ] {
            assert_eq!(layout, BlobLayout::Whole);
        }
        assert_eq!(
            BlobLayout::Whole.pieces(&file(0)),
            vec![("blobs/a.store__0__0000beef".to_string(), 0..0)]
        );
    }
}
