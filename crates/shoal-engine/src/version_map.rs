//! The live version map: the latest version of every document written since the last
//! refresh, so version checks and realtime gets see writes tantivy cannot show yet.

use std::collections::HashMap;
use std::time::Instant;

use shoal_translog::Location;

/// The latest known state of one document id.
#[derive(Debug, Clone)]
pub struct VersionValue {
    pub seq_no: i64,
    pub primary_term: i64,
    pub version: i64,
    /// A delete tombstone: the id is gone, but its version must survive until gc_deletes.
    pub deleted: bool,
    /// Where the operation sits in the translog (realtime get reads the source there).
    pub location: Option<Location>,
    pub routing: Option<String>,
    /// When the tombstone was written (for `index.gc_deletes`).
    pub time: Instant,
}

impl VersionValue {
    fn heap_bytes(&self, id: &str) -> usize {
        // Rough: the key, the value, and the hash map slot overhead.
        id.len()
            + std::mem::size_of::<VersionValue>()
            + 32
            + self.routing.as_ref().map_or(0, String::len)
    }
}

#[derive(Debug, Default)]
pub struct VersionMap {
    entries: HashMap<String, VersionValue>,
    heap_bytes: usize,
}

impl VersionMap {
    pub fn get(&self, id: &str) -> Option<&VersionValue> {
        self.entries.get(id)
    }

    pub fn put(&mut self, id: &str, value: VersionValue) {
        self.heap_bytes += value.heap_bytes(id);
        if let Some(old) = self.entries.insert(id.to_string(), value) {
            self.heap_bytes = self.heap_bytes.saturating_sub(old.heap_bytes(id));
        }
    }

    /// Drops entries made visible by a refresh that covered every seq_no <= `refreshed_seq_no`,
    /// but not those of the ids `in_commit` says were written after it began (a replica's
    /// operations may arrive out of seq_no order). Tombstones stay until they are older than
    /// `gc_deletes`, so a re-created document keeps counting versions like OpenSearch.
    pub fn prune_refreshed(
        &mut self,
        refreshed_seq_no: i64,
        gc_deletes: std::time::Duration,
        in_commit: impl Fn(&str) -> bool,
    ) {
        let now = Instant::now();
        self.entries.retain(|id, v| {
            if v.seq_no > refreshed_seq_no || !in_commit(id) {
                return true;
            }
            if v.deleted {
                v.location = None;
                return now.duration_since(v.time) < gc_deletes;
            }
            false
        });
        self.heap_bytes = self.entries.iter().map(|(id, v)| v.heap_bytes(id)).sum();
    }

    pub fn heap_bytes(&self) -> usize {
        self.heap_bytes
    }
}

impl VersionMap {
    pub(crate) fn get_mut(&mut self, id: &str) -> Option<&mut VersionValue> {
        self.entries.get_mut(id)
    }
}
