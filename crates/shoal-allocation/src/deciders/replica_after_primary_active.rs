//! Replicas recover from the primary, so they wait until it is active
//! (`ReplicaAfterPrimaryActiveAllocationDecider`).

use shoal_state::{DiscoveryNode, ShardRouting};

use super::Decider;
use crate::context::AllocationContext;
use crate::decision::Decision;

pub struct ReplicaAfterPrimaryActive;

impl Decider for ReplicaAfterPrimaryActive {
    fn name(&self) -> &'static str {
        "replica_after_primary_active"
    }

    fn can_allocate(
        &self,
        copy: &ShardRouting,
        _node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        if copy.primary {
            return Decision::yes("shard is primary and can be allocated");
        }
        if ctx.active_primary(&copy.index, copy.shard).is_none() {
            return Decision::no("primary shard for this replica is not yet active");
        }
        Decision::yes("primary shard for this replica is already active")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::DecisionKind;
    use crate::test_support::*;

    #[test]
    fn replicas_wait_for_an_active_primary() {
        let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
        create_index(&mut state, 0, "idx", 1, 1, &[]);
        crate::reroute(&mut state, 0);
        let replica = copy_at(&state, "idx", 0, 1);
        with_ctx(&state, |ctx| {
            let no =
                ReplicaAfterPrimaryActive.can_allocate(&replica, ctx.node("n2").expect("n2"), ctx);
            assert_eq!(
                no.explanation(),
                "primary shard for this replica is not yet active"
            );
        });
        start_initializing(&mut state, 0);
        with_ctx(&state, |ctx| {
            let yes =
                ReplicaAfterPrimaryActive.can_allocate(&replica, ctx.node("n2").expect("n2"), ctx);
            assert_eq!(yes.kind(), DecisionKind::Yes);
        });
    }
}
