//! Per-shard write-ahead log (translog), modeled on OpenSearch's translog.
//!
//! Every acknowledged write is appended to the translog before it is
//! acknowledged, so that operations not yet part of a durable tantivy commit
//! can be replayed after a restart, served by realtime get, and shipped to
//! other copies (peer recovery, replication).
//!
//! Directory layout:
//!
//! - `translog-<gen>.tlog`: generation data files: a header (magic, format
//!   version, translog uuid, primary term, generation, crc32c) followed by
//!   records `[u32 payload_len][u32 crc32c(payload)][payload]`;
//! - `translog.ckp`: checkpoint of the current generation, rewritten in
//!   place on every sync, in one of two slots taken in turn (`current`);
//! - `translog-<gen>.ckp`: immutable final checkpoint of each rolled generation.
//!
//! Writes go straight to the OS page cache (no userspace buffering), fsyncs are
//! shared between concurrent callers of [`Translog::sync_to`] (group commit).

mod batch;
mod checkpoint;
mod current;
mod error;
mod failed_dirs;
mod generation;
mod operation;
mod recovery;
mod snapshot;
mod translog;

#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use batch::{decode_batch, encode_batch};
pub use error::{Result, TranslogError};
pub use operation::{OpKind, Operation};
pub use snapshot::Snapshot;
pub use translog::Translog;

/// Seq_no / checkpoint value meaning "not assigned yet" (as in OpenSearch).
pub const UNASSIGNED_SEQ_NO: i64 = -2;
/// Seq_no / checkpoint value meaning "no operation performed yet".
pub const NO_OPS_PERFORMED: i64 = -1;

/// Where a record lives: generation, byte offset of the record and its size
/// (header included).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Location {
    pub generation: u64,
    pub offset: u64,
    pub size: u32,
}

impl Location {
    /// Byte offset just past the record.
    pub fn end(&self) -> u64 {
        self.offset + self.size as u64
    }
}

/// `index.translog.durability`: when writes are fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Fsync (via [`Translog::sync_to`]) before acknowledging each request.
    #[default]
    Request,
    /// Fsync periodically in the background; a crash may lose recent writes.
    Async,
}

impl FromStr for Durability {
    type Err = TranslogError;

    fn from_str(value: &str) -> Result<Durability> {
        match value.to_ascii_lowercase().as_str() {
            "request" => Ok(Durability::Request),
            "async" => Ok(Durability::Async),
            _ => Err(TranslogError::InvalidOperation(format!(
                "unknown translog durability `{value}`, expected `request` or `async`"
            ))),
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Durability::Request => "request",
            Durability::Async => "async",
        })
    }
}

/// Translog settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranslogConfig {
    /// Informational for the translog itself (the engine decides when to call
    /// `sync_to`); exposed via [`Translog::durability`].
    pub durability: Durability,
    /// `add` rolls to a new generation once the current one exceeds this size
    /// (`index.translog.generation_threshold_size`).
    pub generation_threshold_size: u64,
    /// Primary term written in the header of generations created from now on
    /// (see also [`Translog::set_primary_term`]).
    pub primary_term: i64,
}

/// Default `generation_threshold_size`: 64 MiB, as in OpenSearch.
pub const DEFAULT_GENERATION_THRESHOLD_SIZE: u64 = 64 * 1024 * 1024;

impl Default for TranslogConfig {
    fn default() -> Self {
        TranslogConfig {
            durability: Durability::Request,
            generation_threshold_size: DEFAULT_GENERATION_THRESHOLD_SIZE,
            primary_term: 0,
        }
    }
}

/// The `translog` section of OpenSearch `_stats`, plus generation info.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TranslogStats {
    /// Operations in all retained generations.
    pub operations: u64,
    /// Bytes of all retained generation files.
    pub size_in_bytes: u64,
    /// Operations in generations not yet covered by a commit (see
    /// [`Translog::mark_committed`]).
    pub uncommitted_operations: u64,
    pub uncommitted_size_in_bytes: u64,
    /// Age of the oldest retained generation file (by modification time).
    pub earliest_last_modified_age_ms: u64,
    /// Current generation.
    pub generation: u64,
    /// Oldest retained generation.
    pub min_generation: u64,
    /// Number of data-file fsyncs performed so far (group commit shares them).
    pub syncs_total: u64,
}

/// What [`Translog::open`] found and repaired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryInfo {
    pub translog_uuid: String,
    pub min_generation: u64,
    pub current_generation: u64,
    /// Operations in all retained generations after recovery.
    pub operations: u64,
    /// Intact operations found past the synced offset (written but not
    /// fsynced before the restart); they are kept and now synced.
    pub unsynced_operations_recovered: u64,
    /// Bytes of torn / corrupt tail cut off the current generation.
    pub truncated_bytes: u64,
    /// Why the tail was cut, if it was.
    pub truncation_reason: Option<String>,
    /// Highest seq_no in the retained generations (`NO_OPS_PERFORMED` if none).
    pub max_seq_no: i64,
    /// Global checkpoint persisted in the checkpoint file.
    pub global_checkpoint: i64,
}
