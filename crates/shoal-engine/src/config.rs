//! Engine configuration, derived from index settings by the node.

use std::path::PathBuf;
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
    /// tantivy indexing memory per worker thread.
    pub indexing_buffer_per_thread: usize,
    pub indexing_threads: usize,
    /// `index.gc_deletes`: how long delete tombstones keep their version.
    pub gc_deletes: Duration,
    /// Version-map memory above which the engine refreshes internally.
    pub version_map_limit_bytes: usize,
    /// `index.shard.check_on_startup`: how much of the store is verified on open.
    pub check_on_startup: crate::store::CheckOnStartup,
}

impl EngineConfig {
    pub fn new(path: PathBuf) -> EngineConfig {
        EngineConfig {
            path,
            codec: SourceCodec::default(),
            durability: Durability::Request,
            flush_threshold_size: 512 * 1024 * 1024,
            indexing_buffer_per_thread: 64 * 1024 * 1024,
            indexing_threads: 2,
            gc_deletes: Duration::from_secs(60),
            version_map_limit_bytes: 64 * 1024 * 1024,
            check_on_startup: crate::store::CheckOnStartup::default(),
        }
    }

    pub fn index_dir(&self) -> PathBuf {
        self.path.join("index")
    }

    pub fn translog_dir(&self) -> PathBuf {
        self.path.join("translog")
    }
}
