//! Counters the engine keeps for `_stats`.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

#[derive(Debug, Default)]
pub struct Counters {
    pub index_total: AtomicU64,
    pub index_time_nanos: AtomicU64,
    pub index_current: AtomicU64,
    pub index_failed: AtomicU64,
    pub delete_total: AtomicU64,
    pub delete_time_nanos: AtomicU64,
    pub noop_update_total: AtomicU64,
    pub refresh_total: AtomicU64,
    pub refresh_time_nanos: AtomicU64,
    pub flush_total: AtomicU64,
    /// Flushes the translog size threshold asked for (also in `flush_total`).
    pub flush_periodic: AtomicU64,
    pub flush_time_nanos: AtomicU64,
    /// Force merges running (the merge hook counts background merges and every merge done).
    pub merge_current: AtomicU64,
    pub get_total: AtomicU64,
    pub get_exists: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, value: u64) {
        counter.fetch_add(value, Ordering::Relaxed);
    }
}

/// What a counted flush asks for (see [`crate::Engine::flush_requested`]).
#[derive(Debug, Clone, Copy)]
pub struct FlushRequest {
    /// Commit even when nothing changed since the last commit.
    pub force: bool,
    /// Wait for a commit already running instead of returning at once.
    pub wait_if_ongoing: bool,
    /// Asked for by the translog size threshold rather than a user.
    pub periodic: bool,
}

/// One segment as `_cat/segments` shows it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SegmentInfo {
    pub name: String,
    pub generation: u64,
    pub docs_count: u64,
    pub docs_deleted: u64,
    pub size_in_bytes: u64,
    pub committed: bool,
    pub searchable: bool,
}

/// A snapshot of a shard's statistics.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EngineStats {
    pub docs_count: u64,
    pub docs_deleted: u64,
    pub store_size_in_bytes: u64,
    pub index_total: u64,
    pub index_time_in_millis: u64,
    pub index_current: u64,
    pub index_failed: u64,
    pub delete_total: u64,
    pub delete_time_in_millis: u64,
    pub noop_update_total: u64,
    pub refresh_total: u64,
    pub refresh_time_in_millis: u64,
    pub external_refresh_total: u64,
    pub flush_total: u64,
    #[serde(default)]
    pub flush_periodic: u64,
    pub flush_time_in_millis: u64,
    pub merge_total: u64,
    pub merge_time_in_millis: u64,
    pub merge_docs: u64,
    #[serde(default)]
    pub merge_size_in_bytes: u64,
    pub merge_current: u64,
    pub segments_count: u64,
    pub version_map_memory_in_bytes: u64,
    pub get_total: u64,
    pub get_exists: u64,
    pub translog: shoal_translog::TranslogStats,
    /// Bytes of the store's segment files by file extension (`segments.file_sizes`).
    #[serde(default)]
    pub segment_file_sizes: std::collections::BTreeMap<String, u64>,
    pub max_seq_no: i64,
    pub local_checkpoint: i64,
    pub global_checkpoint: i64,
    /// Peer recoveries from and into this copy. The engine knows none: the node holding the
    /// copy fills this in (`RecoveryService::recovery_stats`).
    #[serde(default)]
    pub recovery: RecoveryStats,
}

/// OpenSearch's `RecoveryStats` of a copy (or summed): peer recoveries running from it and
/// into it, and how long its recoveries waited for `indices.recovery.max_bytes_per_sec`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryStats {
    pub current_as_source: u64,
    pub current_as_target: u64,
    pub throttle_time_in_millis: u64,
}

impl RecoveryStats {
    pub fn add(&mut self, other: &RecoveryStats) {
        self.current_as_source += other.current_as_source;
        self.current_as_target += other.current_as_target;
        self.throttle_time_in_millis += other.throttle_time_in_millis;
    }
}

/// What a segment file extension holds, as OpenSearch describes Lucene's in `file_sizes`.
pub fn segment_file_description(extension: &str) -> &'static str {
    match extension {
        "idx" => "Postings",
        "pos" => "Positions",
        "term" => "Term Dictionary",
        "store" => "Stored Fields",
        "fast" => "Fast Fields",
        "fieldnorm" => "Field Norms",
        "del" => "Deleted Documents",
        _ => "Others",
    }
}
