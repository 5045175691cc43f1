//! `cluster.routing.allocation.allow_rebalance` (`ClusterRebalanceAllocationDecider`): by
//! default nothing is rebalanced while any copy is unassigned or initializing, so recovery
//! work always goes first.

use shoal_state::ShardRouting;

use super::Decider;
use crate::context::AllocationContext;
use crate::decision::Decision;
use crate::settings::{AllowRebalance, ALLOW_REBALANCE};

pub struct ClusterRebalance;

impl Decider for ClusterRebalance {
    fn name(&self) -> &'static str {
        "cluster_rebalance"
    }

    fn can_rebalance(&self, _copy: &ShardRouting, ctx: &AllocationContext<'_>) -> Decision {
        self.can_rebalance_cluster(ctx)
    }

    fn can_rebalance_cluster(&self, ctx: &AllocationContext<'_>) -> Decision {
        let setting = ctx.settings.allow_rebalance;
        let refuse = |what: &str| {
            Decision::no(format!(
                "the cluster has {what} shards and cluster setting [{ALLOW_REBALANCE}] is set to [{}]",
                setting.as_str()
            ))
        };
        let stats = ctx.stats;
        match setting {
            AllowRebalance::IndicesPrimariesActive => {
                if stats.unassigned_primaries > 0 {
                    return refuse("unassigned primary");
                }
                if stats.inactive_primaries > 0 {
                    return refuse("inactive primary");
                }
                Decision::yes("all primary shards are active")
            }
            AllowRebalance::IndicesAllActive => {
                if stats.unassigned > 0 {
                    return refuse("unassigned");
                }
                if stats.inactive > 0 {
                    return refuse("inactive");
                }
                Decision::yes("all shards are active")
            }
            AllowRebalance::Always => Decision::yes("all shards are active"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::DecisionKind;
    use crate::test_support::*;
    use serde_json::json;

    #[test]
    fn waits_for_all_copies_by_default() {
        let mut state = cluster(vec![data_node("n1", "a")]);
        create_index(&mut state, 0, "idx", 1, 1, &[]);
        with_ctx(&state, |ctx| {
            assert_eq!(
                ClusterRebalance.can_rebalance_cluster(ctx).explanation(),
                "the cluster has unassigned shards and cluster setting [cluster.routing.allocation.allow_rebalance] is set \
                 to [indices_all_active]"
            );
        });
        set_cluster_setting(
            &mut state,
            ALLOW_REBALANCE,
            json!("indices_primaries_active"),
        );
        crate::reroute(&mut state, 0);
        with_ctx(&state, |ctx| {
            assert_eq!(
                ClusterRebalance.can_rebalance_cluster(ctx).explanation(),
                "the cluster has inactive primary shards and cluster setting [cluster.routing.allocation.allow_rebalance] \
                 is set to [indices_primaries_active]"
            );
        });
        start_initializing(&mut state, 0);
        with_ctx(&state, |ctx| {
            assert_eq!(
                ClusterRebalance.can_rebalance_cluster(ctx).kind(),
                DecisionKind::Yes
            );
        });
        set_cluster_setting(&mut state, ALLOW_REBALANCE, json!("always"));
        with_ctx(&state, |ctx| {
            assert_eq!(
                ClusterRebalance.can_rebalance_cluster(ctx).kind(),
                DecisionKind::Yes
            )
        });
    }
}
