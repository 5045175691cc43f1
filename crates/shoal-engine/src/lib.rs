//! The shard engine: one tantivy index plus one translog, with sequence numbers,
//! primary terms, a local checkpoint and a version map for realtime reads.
//!
//! A write on a primary: [`Engine::apply`] assigns the next seq_no, checks versions
//! against the version map (or the index), adds the document to tantivy (delete-by-`_id`
//! then add), appends the operation to the translog, and marks the seq_no processed.
//! The caller then waits for durability with [`Engine::sync_to`] (group commit).
//! Replicas call the same path with `Origin::Replica`, which keeps the primary's seq_no
//! instead of assigning one; [`recovery`] pins and binds commits for file-based recovery.

mod checkpoint;
mod commit;
mod config;
mod engine;
mod error;
mod id_filter;
mod lookup;
mod merge_policy;
pub mod recovery;
mod stats;
pub mod store;
mod version_map;

pub use checkpoint::LocalCheckpointTracker;
pub use commit::CommitPayload;
pub use config::{set_node_indexing_budget, EngineConfig};
pub use engine::{
    DocRequest, Engine, ForceMergeTarget, GetResult, MergedSegment, MergedSegmentListener,
    OpResult, OpResultKind, Origin, ParseDocument, RefreshListener, SegmentCheckpoint, StoreFile,
    VersionType, WriteOp,
};
pub use error::EngineError;
pub use merge_policy::{MergeSettings, SharedMergeSettings};
pub use shoal_translog::{Durability, Location, OpKind, Operation};
pub use stats::{segment_file_description, EngineStats, FlushRequest, RecoveryStats, SegmentInfo};

/// Sequence number of "no operation yet" (OpenSearch's `NO_OPS_PERFORMED`).
pub const NO_OPS_PERFORMED: i64 = -1;
/// Sequence number meaning "unassigned".
pub const UNASSIGNED_SEQ_NO: i64 = -2;

#[cfg(test)]
mod committing_tests;
#[cfg(test)]
mod merge_policy_tests;
#[cfg(test)]
mod merged_tests;
#[cfg(test)]
mod nrt_tests;
#[cfg(test)]
mod store_tests;
#[cfg(test)]
mod tests;
