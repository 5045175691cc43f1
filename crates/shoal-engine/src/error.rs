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
    /// A segment-replication checkpoint that holds less than this copy's store: its operations
    /// end at `local_checkpoint`, and this copy's translog holds history only from
    /// `complete_from` (a store copied by a peer recovery holds operations no local translog
    /// has). Installing it would lose the operations between.
    #[error(
        "checkpoint holds operations up to seq_no [{local_checkpoint}], and this copy's translog only from [{complete_from}]: installing it would lose the operations between"
    )]
    CheckpointBehindStore {
        local_checkpoint: i64,
        complete_from: i64,
    },
}
