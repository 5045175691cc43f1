/// Errors of the shard engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// An optimistic-concurrency check failed (409 `version_conflict_engine_exception`).
    #[error("[{id}]: version conflict, {detail}")]
    VersionConflict { id: String, detail: String },
    /// The translog failed; the shard cannot take writes safely.
    #[error("translog failure: {0}")]
    Translog(#[from] shoal_translog::TranslogError),
    #[error("index failure: {0}")]
    Index(#[from] tantivy::TantivyError),
    #[error("io failure: {0}")]
    Io(#[from] std::io::Error),
    /// The document could not be indexed (mapping), reported per item.
    #[error("{0}")]
    Mapper(#[from] shoal_mapping::MapperError),
    /// The engine was closed or failed earlier.
    #[error("engine is closed: {0}")]
    Closed(String),
    #[error("{0}")]
    Corrupted(String),
    /// A segment-replication checkpoint of an older primary term: its primary was deposed, and
    /// its segments may hold operations the new primary never had.
    #[error(
        "checkpoint of primary term [{checkpoint}] is older than this copy's term [{current}]"
    )]
    StaleCheckpoint { checkpoint: i64, current: i64 },
}
