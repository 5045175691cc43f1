//! Identifiers and error kinds shared by every Shoal crate.
//!
//! Before this crate a shard number was `usize` in one crate and `u32` in another, a primary
//! term `i64` here and `u64` there, and node-to-node code decided whether to retry by matching
//! OpenSearch error-type strings. These types give each of those one meaning.

mod ids;
mod kind;

pub use ids::{AllocationId, NodeId, SeqNo, ShardId, Term, NO_OPS_PERFORMED, UNASSIGNED_SEQ_NO};
pub use kind::ErrorKind;
