//! A shard is only rebalanced once all its copies are active
//! (`RebalanceOnlyWhenActiveAllocationDecider`).

use shoal_state::ShardRouting;

use super::Decider;
use crate::context::AllocationContext;
use crate::decision::Decision;

pub struct RebalanceOnlyWhenActive;

impl Decider for RebalanceOnlyWhenActive {
    fn name(&self) -> &'static str {
        "rebalance_only_when_active"
    }

    fn can_rebalance(&self, copy: &ShardRouting, ctx: &AllocationContext<'_>) -> Decision {
        let expected = ctx
            .index(&copy.index)
            .map(|m| m.number_of_replicas() as usize + 1)
            .unwrap_or(1);
        let assigned: Vec<&ShardRouting> = ctx.assigned_copies(&copy.index, copy.shard).collect();
        let all_active = assigned.len() >= expected && assigned.iter().all(|c| c.is_active());
        if all_active {
            Decision::yes("rebalancing is allowed as all replicas are active in the cluster")
        } else {
            Decision::no("rebalancing is not allowed until all replicas in the cluster are active")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::DecisionKind;
    use crate::test_support::*;

    #[test]
    fn waits_for_every_copy() {
        let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
        create_index(&mut state, 0, "idx", 1, 1, &[]);
        crate::reroute(&mut state, 0);
        start_initializing(&mut state, 0);
        let primary = copy_at(&state, "idx", 0, 0);
        with_ctx(&state, |ctx| {
            assert_eq!(
                RebalanceOnlyWhenActive
                    .can_rebalance(&primary, ctx)
                    .explanation(),
                "rebalancing is not allowed until all replicas in the cluster are active"
            );
        });
        settle(&mut state, 0);
        with_ctx(&state, |ctx| {
            assert_eq!(
                RebalanceOnlyWhenActive.can_rebalance(&primary, ctx).kind(),
                DecisionKind::Yes
            );
        });
    }
}
