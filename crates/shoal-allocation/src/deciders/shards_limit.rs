//! Shard count limits per node (`ShardsLimitAllocationDecider`):
//! `index.routing.allocation.total_shards_per_node` and
//! `cluster.routing.allocation.total_shards_per_node` (negative = unlimited). Relocation
//! sources do not count: they are leaving.

use shoal_state::{DiscoveryNode, ShardRouting};

use super::Decider;
use crate::context::AllocationContext;
use crate::decision::Decision;
use crate::settings::{index_i64, CLUSTER_TOTAL_SHARDS_PER_NODE, INDEX_TOTAL_SHARDS_PER_NODE};

pub struct ShardsLimit;

impl Decider for ShardsLimit {
    fn name(&self) -> &'static str {
        "shards_limit"
    }

    /// Adding one more must stay within the limit.
    fn can_allocate(
        &self,
        copy: &ShardRouting,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        decide(copy, node, ctx, |count, limit| count >= limit)
    }

    /// Staying is fine up to the limit itself.
    fn can_remain(
        &self,
        copy: &ShardRouting,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        decide(copy, node, ctx, |count, limit| count > limit)
    }
}

fn decide(
    copy: &ShardRouting,
    node: &DiscoveryNode,
    ctx: &AllocationContext<'_>,
    exceeds: impl Fn(i64, i64) -> bool,
) -> Decision {
    let index_limit = ctx
        .index(&copy.index)
        .map(|meta| index_i64(meta, INDEX_TOTAL_SHARDS_PER_NODE, -1))
        .unwrap_or(-1);
    let cluster_limit = ctx.settings.total_shards_per_node;
    if index_limit <= 0 && cluster_limit <= 0 {
        return Decision::yes(format!(
            "total shard limits are disabled: [index: {index_limit}, cluster: {cluster_limit}] <= 0"
        ));
    }
    let stats = ctx.stats.node(&node.id);
    let node_count = stats.owning as i64;
    if cluster_limit > 0 && exceeds(node_count, cluster_limit) {
        return Decision::no(format!(
            "too many shards [{node_count}] allocated to this node, cluster setting [{CLUSTER_TOTAL_SHARDS_PER_NODE}={cluster_limit}]"
        ));
    }
    if index_limit > 0 {
        let index_count = stats.owning_of(&copy.index) as i64;
        if exceeds(index_count, index_limit) {
            return Decision::no(format!(
                "too many shards [{index_count}] allocated to this node for index [{}], index setting \
                 [{INDEX_TOTAL_SHARDS_PER_NODE}={index_limit}]",
                copy.index
            ));
        }
    }
    Decision::yes(format!(
        "the shard count [{node_count}] for this node is under the index limit [{index_limit}] and cluster level node limit \
         [{cluster_limit}]"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::DecisionKind;
    use crate::test_support::*;
    use serde_json::json;

    #[test]
    fn index_and_cluster_limits() {
        let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
        create_index(
            &mut state,
            0,
            "idx",
            4,
            0,
            &[("index.routing.allocation.total_shards_per_node", "2")],
        );
        settle(&mut state, 0);
        assert_eq!(copies_on(&state, "n1").len(), 2);
        create_index(&mut state, 0, "other", 1, 0, &[]);
        let idx_copy = copy_at(&state, "idx", 0, 0);
        let other = copy_at(&state, "other", 0, 0);
        with_ctx(&state, |ctx| {
            let n1 = ctx.node("n1").expect("n1");
            let mut unassigned = idx_copy.clone();
            unassigned.node = None;
            assert_eq!(
                ShardsLimit.can_allocate(&unassigned, n1, ctx).explanation(),
                "too many shards [2] allocated to this node for index [idx], index setting \
                 [index.routing.allocation.total_shards_per_node=2]"
            );
            assert_eq!(
                ShardsLimit.can_remain(&idx_copy, n1, ctx).kind(),
                DecisionKind::Yes
            );
            assert_eq!(
                ShardsLimit.can_allocate(&other, n1, ctx).explanation(),
                "total shard limits are disabled: [index: -1, cluster: -1] <= 0"
            );
        });
        set_cluster_setting(&mut state, CLUSTER_TOTAL_SHARDS_PER_NODE, json!(2));
        with_ctx(&state, |ctx| {
            assert_eq!(
                ShardsLimit.can_allocate(&other, ctx.node("n1").expect("n1"), ctx).explanation(),
                "too many shards [2] allocated to this node, cluster setting [cluster.routing.allocation.total_shards_per_node=2]"
            );
        });
    }
}
