//! Allocation deciders: each answers "may this copy go to / stay on / be rebalanced from this
//! node?" for one concern, with OpenSearch's decider names and explanation texts. The verdicts
//! are combined by the functions below (`AllocationDeciders`).

mod awareness;
mod cluster_rebalance;
mod concurrent_rebalance;
mod data_node;
mod disk_threshold;
mod enable;
mod filter;
pub(crate) use filter::passes_filters;
mod max_retry;
mod rebalance_only_when_active;
mod replica_after_primary_active;
mod same_shard;
mod shards_limit;
mod throttling;

use shoal_state::{DiscoveryNode, IndexMetadata, ShardRouting};

use crate::context::AllocationContext;
use crate::decision::{DebugMode, Decision, Decisions};

pub use disk_threshold::{free_space, node_usage};

/// One allocation concern. Methods a decider does not care about answer `Decision::ALWAYS`,
/// which never shows up in explanations.
pub trait Decider: Sync {
    fn name(&self) -> &'static str;

    /// May `copy` (unassigned, or assigned elsewhere and being moved) be allocated to `node`?
    fn can_allocate(
        &self,
        _copy: &ShardRouting,
        _node: &DiscoveryNode,
        _ctx: &AllocationContext<'_>,
    ) -> Decision {
        Decision::ALWAYS
    }

    /// May `copy` stay on `node`, the node it is on?
    fn can_remain(
        &self,
        _copy: &ShardRouting,
        _node: &DiscoveryNode,
        _ctx: &AllocationContext<'_>,
    ) -> Decision {
        Decision::ALWAYS
    }

    /// May this started copy be moved to improve balance?
    fn can_rebalance(&self, _copy: &ShardRouting, _ctx: &AllocationContext<'_>) -> Decision {
        Decision::ALWAYS
    }

    /// May anything be rebalanced at all?
    fn can_rebalance_cluster(&self, _ctx: &AllocationContext<'_>) -> Decision {
        Decision::ALWAYS
    }

    /// May any shard of `index` live on `node`? (The balancer only weighs such nodes.)
    fn can_allocate_index(
        &self,
        _index: &IndexMetadata,
        _node: &DiscoveryNode,
        _ctx: &AllocationContext<'_>,
    ) -> Decision {
        Decision::ALWAYS
    }

    /// A primary whose only data is on `node` but that `can_allocate` refused: most concerns
    /// yield, because refusing means losing the data; a few (same shard, retries) do not.
    fn can_force_allocate_primary(
        &self,
        copy: &ShardRouting,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        match self.can_allocate(copy, node, ctx) {
            Decision::No(_) => Decision::yes(format!(
                "primary shard [[{}][{}]] allowed to force allocate on node [{}]",
                copy.index, copy.shard, node.id
            )),
            other => other,
        }
    }

    /// May `copy` start moving away from its node now (source-side recovery limits)?
    fn can_move_away(&self, _copy: &ShardRouting, _ctx: &AllocationContext<'_>) -> Decision {
        Decision::ALWAYS
    }
}

/// In OpenSearch's order (`ClusterModule.createAllocationDeciders`), with Shoal's data-role
/// check next to the filters.
static DECIDERS: &[&dyn Decider] = &[
    &max_retry::MaxRetry,
    &replica_after_primary_active::ReplicaAfterPrimaryActive,
    &rebalance_only_when_active::RebalanceOnlyWhenActive,
    &cluster_rebalance::ClusterRebalance,
    &concurrent_rebalance::ConcurrentRebalance,
    &enable::Enable,
    &data_node::DataNode,
    &filter::Filter,
    &same_shard::SameShard,
    &disk_threshold::DiskThreshold,
    &throttling::Throttling,
    &shards_limit::ShardsLimit,
    &awareness::Awareness,
];

pub fn all() -> &'static [&'static dyn Decider] {
    DECIDERS
}

/// Runs every decider, stopping at the first NO unless explaining.
fn combine(mode: DebugMode, ask: impl Fn(&dyn Decider) -> Decision) -> Decisions {
    let mut out = Decisions::default();
    for decider in DECIDERS {
        let decision = ask(*decider);
        let no = matches!(decision, Decision::No(_));
        out.add(decider.name(), decision, mode);
        if no && mode == DebugMode::Off {
            break;
        }
    }
    out
}

pub fn can_allocate(
    copy: &ShardRouting,
    node: &DiscoveryNode,
    ctx: &AllocationContext<'_>,
    mode: DebugMode,
) -> Decisions {
    combine(mode, |d| d.can_allocate(copy, node, ctx))
}

pub fn can_remain(
    copy: &ShardRouting,
    node: &DiscoveryNode,
    ctx: &AllocationContext<'_>,
    mode: DebugMode,
) -> Decisions {
    combine(mode, |d| d.can_remain(copy, node, ctx))
}

pub fn can_rebalance(
    copy: &ShardRouting,
    ctx: &AllocationContext<'_>,
    mode: DebugMode,
) -> Decisions {
    combine(mode, |d| d.can_rebalance(copy, ctx))
}

pub fn can_rebalance_cluster(ctx: &AllocationContext<'_>, mode: DebugMode) -> Decisions {
    combine(mode, |d| d.can_rebalance_cluster(ctx))
}

pub fn can_allocate_index(
    index: &IndexMetadata,
    node: &DiscoveryNode,
    ctx: &AllocationContext<'_>,
) -> Decisions {
    combine(DebugMode::Off, |d| d.can_allocate_index(index, node, ctx))
}

pub fn can_force_allocate_primary(
    copy: &ShardRouting,
    node: &DiscoveryNode,
    ctx: &AllocationContext<'_>,
    mode: DebugMode,
) -> Decisions {
    combine(mode, |d| d.can_force_allocate_primary(copy, node, ctx))
}

pub fn can_move_away(copy: &ShardRouting, ctx: &AllocationContext<'_>) -> Decisions {
    combine(DebugMode::Off, |d| d.can_move_away(copy, ctx))
}
