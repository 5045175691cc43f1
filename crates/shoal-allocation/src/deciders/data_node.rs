//! Only nodes with the `data` role hold shards. OpenSearch gets this for free by leaving other
//! nodes out of `RoutingNodes`; Shoal states it as a decider so commands and explanations can
//! say why.

use shoal_state::{DiscoveryNode, IndexMetadata, ShardRouting};

use super::Decider;
use crate::context::AllocationContext;
use crate::decision::Decision;

pub struct DataNode;

fn decide(node: &DiscoveryNode) -> Decision {
    if node.is_data() {
        Decision::yes("the node has the [data] role")
    } else {
        Decision::no("the node does not have the [data] role and cannot hold shards")
    }
}

impl Decider for DataNode {
    fn name(&self) -> &'static str {
        "data_node"
    }

    fn can_allocate(
        &self,
        _copy: &ShardRouting,
        node: &DiscoveryNode,
        _ctx: &AllocationContext<'_>,
    ) -> Decision {
        decide(node)
    }

    fn can_remain(
        &self,
        _copy: &ShardRouting,
        node: &DiscoveryNode,
        _ctx: &AllocationContext<'_>,
    ) -> Decision {
        decide(node)
    }

    fn can_allocate_index(
        &self,
        _index: &IndexMetadata,
        node: &DiscoveryNode,
        _ctx: &AllocationContext<'_>,
    ) -> Decision {
        decide(node)
    }

    // A primary's data cannot be on a node that never held data; no forcing.
    fn can_force_allocate_primary(
        &self,
        _copy: &ShardRouting,
        node: &DiscoveryNode,
        _ctx: &AllocationContext<'_>,
    ) -> Decision {
        decide(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::DecisionKind;
    use crate::test_support::*;
    use shoal_state::Role;

    #[test]
    fn only_data_nodes_hold_shards() {
        let mut coordinating = data_node("n2", "a");
        coordinating.roles = [Role::ClusterManager].into_iter().collect();
        let mut state = cluster(vec![data_node("n1", "a"), coordinating.clone()]);
        create_index(&mut state, 0, "idx", 1, 0, &[]);
        let copy = copy_at(&state, "idx", 0, 0);
        with_ctx(&state, |ctx| {
            let n1 = ctx.node("n1").expect("n1");
            assert_eq!(
                DataNode.can_allocate(&copy, n1, ctx).kind(),
                DecisionKind::Yes
            );
            let no = DataNode.can_allocate(&copy, &coordinating, ctx);
            assert_eq!(no.kind(), DecisionKind::No);
            assert_eq!(
                no.explanation(),
                "the node does not have the [data] role and cannot hold shards"
            );
            assert_eq!(
                DataNode
                    .can_force_allocate_primary(&copy, &coordinating, ctx)
                    .kind(),
                DecisionKind::No
            );
        });
    }
}
