//! Shard allocation: decides where shard copies live, like OpenSearch's `AllocationService`,
//! its allocation deciders and the `BalancedShardsAllocator`.
//!
//! Everything here is a pure function of the cluster state and the caller's clock value: every
//! node runs [`reroute`] after applying each Raft entry and must reach the same routing table,
//! so there is no wall clock, no randomness, and iteration follows `BTreeMap` order.

mod allocator;
pub mod auto_expand;
mod balancer;
mod commands;
mod context;
pub mod deciders;
mod decision;
mod disk_monitor;
mod explain;
mod format;
mod gateway;
mod node_filters;
mod routing_ops;
mod settings;

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;

use shoal_state::{ClusterState, RerouteCommand, StateError};

pub use context::{AllocationContext, NodeStats, RoutingStats};
pub use decision::{DebugMode, Decision, DecisionKind, Decisions, LabeledDecision};
pub use explain::ExplainRequest;
pub use format::time_value;
pub use settings::AllocationSettings;

/// Runs after every applied command: expires delayed replicas, applies the disk flood-stage
/// blocks, allocates unassigned copies (primaries first, existing data where it is), moves
/// copies that may no longer stay, then rebalances within the throttles. Returns whether the
/// state changed.
pub fn reroute(state: &mut ClusterState, now_millis: i64) -> bool {
    allocator::reroute(state, now_millis)
}

/// The earliest time a delayed replica stops waiting for its node: propose a `Tick` then so
/// [`reroute`] reallocates it. `None` when no replica is delayed.
pub fn next_delay_expiry(state: &ClusterState) -> Option<i64> {
    allocator::next_delay_expiry(state)
}

/// Executes `POST /_cluster/reroute` commands (all or nothing) and returns one explanation per
/// command, in OpenSearch's `explanations` shape. `retry_failed` first resets the failure
/// counters that `index.allocation.max_retries` checks. The caller runs [`reroute`] afterwards.
pub fn execute(
    state: &mut ClusterState,
    commands: &[RerouteCommand],
    retry_failed: bool,
    now_millis: i64,
) -> Result<Vec<serde_json::Value>, StateError> {
    commands::execute(state, commands, retry_failed, now_millis)
}

/// `GET /_cluster/allocation/explain`: why a copy is where it is, or why it is unassigned.
pub fn explain(
    state: &ClusterState,
    request: &ExplainRequest,
    include_yes_decisions: bool,
    now_millis: i64,
) -> Result<serde_json::Value, StateError> {
    explain::explain(state, request, include_yes_decisions, now_millis)
}
