//! Where a shard's objects live in its repositories, and what a metadata file holds.
//!
//! ```text
//! <index uuid>/<shard>/segments/data/<segment file>        one object per immutable file
//! <index uuid>/<shard>/segments/metadata/metadata__<term>__<version>__<millis>__<id>
//! <index uuid>/<shard>/translog/data/<term>__<first seq_no>__<last seq_no>__<id>
//! <index uuid>/<shard>/translog/terms/<term>__<from seq_no>     where a term's history begins
//! cluster-state/<cluster name>/index-metadata              the cluster's indices
//! ```
//! Numbers in names are zero-padded so that names sort as the numbers do: the newest
//! metadata file of a shard is the last name listed, whatever the store's listing order.
//! Metadata files, translog batches and term starts name the primary term that wrote them, so
//! listing a shard tells the highest term of its history (a restore starts above it, `terms.rs`).

use serde::{Deserialize, Serialize};
use shoal_engine::SegmentCheckpoint;

/// A shard as its repository objects name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardKeys {
    prefix: String,
}

pub const METADATA_PREFIX: &str = "metadata__";

impl ShardKeys {
    pub fn new(index_uuid: &str, shard: usize) -> ShardKeys {
        ShardKeys {
            prefix: format!("{index_uuid}/{shard}"),
        }
    }

    pub fn segment_file(&self, name: &str) -> String {
        format!("{}/segments/data/{name}", self.prefix)
    }

    pub fn metadata_folder(&self) -> String {
        format!("{}/segments/metadata/", self.prefix)
    }

    pub fn segment_data_folder(&self) -> String {
        format!("{}/segments/data/", self.prefix)
    }

    /// The key of a new metadata file for a checkpoint.
    pub fn metadata_file(&self, checkpoint: &SegmentCheckpoint, millis: u64) -> String {
        format!(
            "{}{METADATA_PREFIX}{:019}__{:020}__{millis:013}__{}",
            self.metadata_folder(),
            checkpoint.primary_term.max(0),
            checkpoint.version,
            uuid::Uuid::new_v4().simple()
        )
    }

    pub fn translog_folder(&self) -> String {
        format!("{}data/", self.translog_root())
    }

    pub(crate) fn translog_root(&self) -> String {
        format!("{}/translog/", self.prefix)
    }

    pub fn translog_batch(&self, term: i64, first: i64, last: i64) -> String {
        format!(
            "{}{:019}__{:019}__{:019}__{}",
            self.translog_folder(),
            term.max(0),
            first.max(0),
            last.max(0),
            uuid::Uuid::new_v4().simple()
        )
    }
}

/// The seq_no range a translog batch key names: `(term, first, last)`.
pub fn translog_batch_range(key: &str) -> Option<(i64, i64, i64)> {
    let name = key.rsplit('/').next()?;
    let mut parts = name.split("__");
    let term = parts.next()?.parse().ok()?;
    let first = parts.next()?.parse().ok()?;
    let last = parts.next()?.parse().ok()?;
    Some((term, first, last))
}

/// The primary term a metadata key names (`metadata__<term>__<version>__…`).
pub fn metadata_term(key: &str) -> Option<i64> {
    let name = key.rsplit('/').next()?;
    name.strip_prefix(METADATA_PREFIX)?
        .split("__")
        .next()?
        .parse()
        .ok()
}

/// What a shard's metadata file holds: the checkpoint (its file list with lengths and
/// checksums, and the commit's `meta.json`), so that a copy can install it from the
/// repository alone.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SegmentMetadata {
    pub checkpoint: SegmentCheckpoint,
    /// The node whose primary uploaded it.
    pub node: String,
    pub uploaded_at_millis: u64,
}

pub fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_names_sort_by_term_then_version() {
        let keys = ShardKeys::new("u", 0);
        let name = |term, version| {
            let checkpoint = SegmentCheckpoint {
                primary_term: term,
                version,
                local_checkpoint: 0,
                max_seq_no: 0,
                files: vec![],
                meta: String::new(),
            };
            keys.metadata_file(&checkpoint, 5)
        };
        let mut names = vec![name(2, 1), name(1, 900), name(1, 1000), name(10, 0)];
        names.sort();
        let order: Vec<_> = names
            .iter()
            .map(|n| &n[n.find("__").unwrap()..n.find("__").unwrap() + 44])
            .collect();
        assert!(
            names[0].contains(&format!("{:019}__{:020}", 1, 900)),
            "{order:?}"
        );
        assert!(names[3].contains(&format!("{:019}__", 10)), "{order:?}");
    }

    #[test]
    fn a_translog_batch_key_names_its_range() {
        let key = ShardKeys::new("u", 3).translog_batch(4, 10, 99);
        assert_eq!(translog_batch_range(&key), Some((4, 10, 99)));
    }
}
