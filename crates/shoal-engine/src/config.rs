//! Engine configuration, derived from index settings by the node.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shoal_codec::SourceCodec;
use shoal_translog::Durability;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The shard directory; the engine uses `index/` and `translog/` below it.
    pub path: PathBuf,
    pub codec: SourceCodec,
    pub durability: Durability,
    /// `index.translog.flush_threshold_size`: flush when uncommitted translog exceeds it.
    pub flush_threshold_size: u64,
    /// tantivy indexing memory per worker thread: this shard's share of the node's budget.
    pub indexing_buffer_per_thread: usize,
    /// Holds this shard's place among the shards sharing the node's indexing budget.
    pub indexing_buffer_share: Arc<BufferShare>,
    pub indexing_threads: usize,
    /// `index.gc_deletes`: how long delete tombstones keep their version.
    pub gc_deletes: Duration,
    /// Version-map memory above which the engine refreshes internally.
    pub version_map_limit_bytes: usize,
    /// `index.shard.check_on_startup`: how much of the store is verified on open.
    pub check_on_startup: crate::store::CheckOnStartup,
    /// Open as a segment-replication replica: no index writer; operations are only logged
    /// and segments arrive from the primary (`index.replication.type: SEGMENT`).
    pub segment_replica: bool,
    /// `index.merge.policy.*`, shared with the writer's merge policy so updates apply at once.
    pub merge: crate::SharedMergeSettings,
}

impl EngineConfig {
    pub fn new(path: PathBuf) -> EngineConfig {
        let (indexing_buffer_share, indexing_buffer_per_thread) = BufferShare::take();
        EngineConfig {
            path,
            codec: SourceCodec::default(),
            durability: Durability::Request,
            flush_threshold_size: 512 * 1024 * 1024,
            indexing_buffer_per_thread,
            indexing_buffer_share,
            indexing_threads: 2,
            gc_deletes: Duration::from_secs(60),
            version_map_limit_bytes: 64 * 1024 * 1024,
            check_on_startup: crate::store::CheckOnStartup::default(),
            segment_replica: false,
            merge: crate::SharedMergeSettings::default(),
        }
    }

    pub fn index_dir(&self) -> PathBuf {
        self.path.join("index")
    }

    pub fn translog_dir(&self) -> PathBuf {
        self.path.join("translog")
    }
}

/// tantivy's smallest writer budget per thread (15 MB) plus headroom.
const MIN_BUFFER_PER_THREAD: usize = 16 * 1024 * 1024;
/// More than this per thread only delays segment flushes.
const MAX_BUFFER_PER_THREAD: usize = 64 * 1024 * 1024;
/// Threads a shard's writer may use (`IndexService` gives single-shard indices two).
const PLANNED_THREADS: usize = 2;

/// The node's `indices.memory.index_buffer_size` in bytes; 0 until the node sets it.
static NODE_INDEXING_BUDGET: AtomicUsize = AtomicUsize::new(0);
/// Engine configurations alive, that is shards open (or opening) on this node.
static SHARES: AtomicUsize = AtomicUsize::new(0);

/// Sets the memory all shards' writers share (OpenSearch's `indices.memory.index_buffer_size`).
/// Each shard takes its part when its configuration is made: the budget divided by the shards
/// then open, between tantivy's minimum and 64 MB per thread.
pub fn set_node_indexing_budget(bytes: usize) {
    NODE_INDEXING_BUDGET.store(bytes, Ordering::Relaxed);
}

/// One shard's place among those sharing the budget; released when its configuration (and so
/// its engine) is dropped.
#[derive(Debug)]
pub struct BufferShare(());

impl BufferShare {
    fn take() -> (Arc<BufferShare>, usize) {
        let open = SHARES.fetch_add(1, Ordering::Relaxed) + 1;
        (
            Arc::new(BufferShare(())),
            buffer_per_thread(NODE_INDEXING_BUDGET.load(Ordering::Relaxed), open),
        )
    }
}

impl Drop for BufferShare {
    fn drop(&mut self) {
        SHARES.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A shard's writer memory per thread when `open` shards share `budget` bytes (0: no budget set).
fn buffer_per_thread(budget: usize, open: usize) -> usize {
    if budget == 0 {
        return MAX_BUFFER_PER_THREAD;
    }
    (budget / open.max(1) / PLANNED_THREADS).clamp(MIN_BUFFER_PER_THREAD, MAX_BUFFER_PER_THREAD)
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    #[test]
    fn shards_divide_the_node_budget_within_tantivy_bounds() {
        let mb = 1024 * 1024;
        assert_eq!(buffer_per_thread(0, 10), 64 * mb);
        assert_eq!(buffer_per_thread(1024 * mb, 1), 64 * mb);
        assert_eq!(buffer_per_thread(1024 * mb, 16), 32 * mb);
        assert_eq!(buffer_per_thread(1024 * mb, 1000), 16 * mb);
        assert_eq!(buffer_per_thread(48 * mb, 1), 24 * mb);
    }
}
