//! Document replication, the primary's side of the bookkeeping: which copies receive
//! operations, which are in sync, the global checkpoint, and the retention leases that keep
//! history for operation-based peer recovery.
//!
//! The write path and peer recovery (which use this tracker) live in the node; this crate
//! holds the rules, so they can be tested without shards or sockets.

pub mod leases;
pub mod tracker;

pub use leases::{peer_recovery_lease_id, recovery_lease_id, RetentionLease, RetentionLeases};
pub use tracker::{InSyncOutcome, ReplicationTracker, TrackerError};

/// No operation has been processed (OpenSearch's `NO_OPS_PERFORMED`).
pub const NO_OPS_PERFORMED: i64 = -1;
/// A checkpoint not known yet (OpenSearch's `UNASSIGNED_SEQ_NO`).
pub const UNASSIGNED_SEQ_NO: i64 = -2;
