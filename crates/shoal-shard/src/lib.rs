//! The rules of one local shard copy, free of I/O so they are tested alone:
//!
//! - [`OperationPermits`]: every write on a copy (a primary's batch, a replica's batch from
//!   its primary) holds a permit while it applies; a term bump or an engine swap blocks new
//!   permits, waits for those in flight to drain, runs, and lets writes go on. This is what
//!   stops a batch of an old primary term from applying after the copy learned a newer one.
//! - [`Lifecycle`]: created → recovering → post_recovery → started → closed, with the legal
//!   moves between them (OpenSearch's `IndexShardState`).

mod lifecycle;
mod permits;

pub use lifecycle::{Lifecycle, LifecycleError, ShardState};
pub use permits::{OperationPermit, OperationPermits, PermitError};
