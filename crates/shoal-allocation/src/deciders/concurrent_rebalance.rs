//! `cluster.routing.allocation.cluster_concurrent_rebalance` (`ConcurrentRebalanceAllocationDecider`):
//! how many copies may be relocating cluster-wide (-1 = unlimited).

use shoal_state::ShardRouting;

use super::Decider;
use crate::context::AllocationContext;
use crate::decision::Decision;
use crate::settings::CONCURRENT_REBALANCE;

pub struct ConcurrentRebalance;

impl Decider for ConcurrentRebalance {
    fn name(&self) -> &'static str {
        "concurrent_rebalance"
    }

    fn can_rebalance(&self, _copy: &ShardRouting, ctx: &AllocationContext<'_>) -> Decision {
        self.can_rebalance_cluster(ctx)
    }

    fn can_rebalance_cluster(&self, ctx: &AllocationContext<'_>) -> Decision {
        let limit = ctx.settings.cluster_concurrent_rebalance;
        if limit == -1 {
            return Decision::yes("unlimited concurrent rebalances are allowed");
        }
        let relocating = ctx.stats.relocating as i64;
        if relocating >= limit {
            return Decision::throttle(format!(
                "reached the limit of concurrently rebalancing shards [{relocating}], cluster setting \
                 [{CONCURRENT_REBALANCE}={limit}]"
            ));
        }
        Decision::yes(format!(
            "below threshold [{limit}] for concurrent rebalances, current rebalance shard count [{relocating}]"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::DecisionKind;
    use crate::test_support::*;
    use serde_json::json;

    #[test]
    fn throttles_at_the_cluster_limit() {
        let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
        create_index(&mut state, 0, "idx", 1, 0, &[]);
        settle(&mut state, 0);
        with_ctx(&state, |ctx| {
            assert_eq!(
                ConcurrentRebalance.can_rebalance_cluster(ctx).explanation(),
                "below threshold [2] for concurrent rebalances, current rebalance shard count [0]"
            );
        });
        set_cluster_setting(&mut state, CONCURRENT_REBALANCE, json!(0));
        with_ctx(&state, |ctx| {
            let throttled = ConcurrentRebalance.can_rebalance_cluster(ctx);
            assert_eq!(throttled.kind(), DecisionKind::Throttle);
            assert_eq!(
                throttled.explanation(),
                "reached the limit of concurrently rebalancing shards [0], cluster setting \
                 [cluster.routing.allocation.cluster_concurrent_rebalance=0]"
            );
        });
        set_cluster_setting(&mut state, CONCURRENT_REBALANCE, json!(-1));
        with_ctx(&state, |ctx| {
            assert_eq!(
                ConcurrentRebalance.can_rebalance_cluster(ctx).explanation(),
                "unlimited concurrent rebalances are allowed"
            );
        });
    }
}
