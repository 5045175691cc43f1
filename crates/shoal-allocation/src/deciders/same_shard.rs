//! Never two copies of one shard on one node (`SameShardAllocationDecider`); with
//! `cluster.routing.allocation.same_shard.host` also never on two nodes of one host.

use shoal_state::{DiscoveryNode, ShardRouting};

use super::Decider;
use crate::context::AllocationContext;
use crate::decision::Decision;
use crate::format::describe_copy;
use crate::settings::SAME_HOST;

pub struct SameShard;

impl Decider for SameShard {
    fn name(&self) -> &'static str {
        "same_shard"
    }

    fn can_allocate(
        &self,
        copy: &ShardRouting,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        let same_node = decide_same_node(copy, node, ctx);
        if matches!(same_node, Decision::No(_)) || !ctx.settings.same_shard_host {
            return same_node;
        }
        decide_same_host(copy, node, ctx)
    }

    // Two copies on one node is never acceptable, not even to save a primary's data.
    fn can_force_allocate_primary(
        &self,
        copy: &ShardRouting,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        decide_same_node(copy, node, ctx)
    }
}

fn decide_same_node(
    copy: &ShardRouting,
    node: &DiscoveryNode,
    ctx: &AllocationContext<'_>,
) -> Decision {
    for assigned in ctx.assigned_copies(&copy.index, copy.shard) {
        if assigned.node.as_deref() != Some(node.id.as_str()) {
            continue;
        }
        let same_allocation =
            copy.allocation_id.is_some() && assigned.allocation_id == copy.allocation_id;
        return if same_allocation {
            Decision::no(format!(
                "this shard is already allocated to this node [{}]",
                describe_copy(copy)
            ))
        } else {
            Decision::no(format!(
                "a copy of this shard is already allocated to this node [{}]",
                describe_copy(assigned)
            ))
        };
    }
    Decision::yes("this node does not hold a copy of this shard")
}

/// Compares host addresses when both nodes have one, else host names, like OpenSearch.
fn decide_same_host(
    copy: &ShardRouting,
    node: &DiscoveryNode,
    ctx: &AllocationContext<'_>,
) -> Decision {
    for other in ctx.state.nodes.values() {
        let (same, host_type, host) = if !other.ip.is_empty() && !node.ip.is_empty() {
            (other.ip == node.ip, "address", node.ip.as_str())
        } else if !other.host.is_empty() && !node.host.is_empty() {
            (other.host == node.host, "name", node.host.as_str())
        } else {
            (false, "", "")
        };
        if !same {
            continue;
        }
        let holds_copy = ctx
            .assigned_copies(&copy.index, copy.shard)
            .any(|c| c.node.as_deref() == Some(other.id.as_str()));
        if holds_copy {
            return Decision::no(format!(
                "a copy of this shard is already allocated to host {host_type} [{host}], on node [{}], and [{SAME_HOST}] is \
                 [true] which forbids more than one node on this host from holding a copy of this shard",
                node.id
            ));
        }
    }
    Decision::yes("none of the nodes on this host hold a copy of this shard")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::DecisionKind;
    use crate::test_support::*;
    use serde_json::json;

    fn one_started_shard() -> shoal_state::ClusterState {
        let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
        create_index(&mut state, 0, "idx", 1, 1, &[]);
        settle(&mut state, 0);
        state
    }

    #[test]
    fn refuses_a_second_copy_on_the_same_node() {
        let state = one_started_shard();
        let primary = copy_at(&state, "idx", 0, 0);
        let holder = primary.node.clone().expect("assigned");
        let other = if holder == "n1" { "n2" } else { "n1" };
        let mut replica = copy_at(&state, "idx", 0, 1);
        replica.node = None;
        replica.allocation_id = None;
        with_ctx(&state, |ctx| {
            let no = SameShard.can_allocate(&replica, ctx.node(&holder).expect("node"), ctx);
            assert!(no.explanation().starts_with(
                "a copy of this shard is already allocated to this node [[idx][0], node["
            ));
            let own = SameShard.can_allocate(&primary, ctx.node(&holder).expect("node"), ctx);
            assert!(own
                .explanation()
                .starts_with("this shard is already allocated to this node"));
            // The other node holds the replica, so it refuses the primary too.
            assert_eq!(
                SameShard
                    .can_allocate(&primary, ctx.node(other).expect("node"), ctx)
                    .kind(),
                DecisionKind::No
            );
        });
    }

    #[test]
    fn same_host_setting_extends_the_rule_to_the_host() {
        let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
        create_index(&mut state, 0, "idx", 1, 1, &[]);
        crate::reroute(&mut state, 0);
        start_initializing(&mut state, 0);
        let mut twin = data_node("n3", "c");
        twin.ip = state.nodes["n1"].ip.clone();
        twin.transport_address = "10.0.0.1:9301".into();
        apply(&mut state, 0, shoal_state::Command::NodeJoin(twin.clone()));
        let replica = copy_at(&state, "idx", 0, 1);
        with_ctx(&state, |ctx| {
            assert_eq!(
                SameShard.can_allocate(&replica, &twin, ctx).explanation(),
                "this node does not hold a copy of this shard"
            );
        });
        set_cluster_setting(&mut state, SAME_HOST, json!("true"));
        with_ctx(&state, |ctx| {
            let no = SameShard.can_allocate(&replica, &twin, ctx);
            assert_eq!(
                no.explanation(),
                "a copy of this shard is already allocated to host address [10.0.0.1], on node [n3], and \
                 [cluster.routing.allocation.same_shard.host] is [true] which forbids more than one node on this host \
                 from holding a copy of this shard"
            );
        });
    }
}
