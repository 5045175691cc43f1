//! Shard allocation awareness (`AwarenessAllocationDecider`): spread the copies of a shard over
//! the values of `cluster.routing.allocation.awareness.attributes`, at most
//! `ceil(copies / values)` per value. Values are those of live data nodes, united with the
//! forced values (`awareness.force.<attr>.values`) so a lost zone keeps its share empty.

use shoal_state::{DiscoveryNode, ShardRouting, ShardState};

use super::Decider;
use crate::context::AllocationContext;
use crate::decision::Decision;
use crate::settings::AWARENESS_ATTRIBUTES;

pub struct Awareness;

impl Decider for Awareness {
    fn name(&self) -> &'static str {
        "awareness"
    }

    fn can_allocate(
        &self,
        copy: &ShardRouting,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        under_capacity(copy, node, ctx, true)
    }

    fn can_remain(
        &self,
        copy: &ShardRouting,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        under_capacity(copy, node, ctx, false)
    }
}

fn under_capacity(
    copy: &ShardRouting,
    node: &DiscoveryNode,
    ctx: &AllocationContext<'_>,
    moving_here: bool,
) -> Decision {
    let attributes = &ctx.settings.awareness_attributes;
    if attributes.is_empty() {
        return Decision::yes(format!(
            "allocation awareness is not enabled, set cluster setting [{AWARENESS_ATTRIBUTES}] to enable it"
        ));
    }
    let copies = ctx
        .index(&copy.index)
        .map(|meta| meta.number_of_replicas() as usize + 1)
        .unwrap_or(1);
    for attribute in attributes {
        let Some(value) = node.attributes.get(attribute) else {
            return Decision::no(format!(
                "node does not contain the awareness attribute [{attribute}]; required attributes cluster setting \
                 [{AWARENESS_ATTRIBUTES}={}]",
                attributes.join(",")
            ));
        };
        let current = copies_with_value(copy, node, value, attribute, ctx, moving_here);
        let values = ctx
            .settings
            .awareness_value_counts
            .get(attribute)
            .copied()
            .unwrap_or(0);
        let maximum = copies.div_ceil(values.max(1));
        if current > maximum {
            return Decision::no(format!(
                "there are too many copies of the shard allocated to nodes with attribute [{attribute}], there are [{copies}] \
                 total configured shard copies for this shard id and [{values}] total attribute values, expected the \
                 allocated shard count per attribute [{current}] to be less than or equal to the upper bound of the \
                 required number of shards per attribute [{maximum}]"
            ));
        }
    }
    Decision::yes("node meets all awareness attribute requirements")
}

/// Copies of the shard on nodes sharing `value`, counting where the shard will be: relocation
/// targets count, their sources do not. When `moving_here`, the copy itself is counted at
/// `node` (and no longer where it currently is).
fn copies_with_value(
    copy: &ShardRouting,
    node: &DiscoveryNode,
    value: &str,
    attribute: &str,
    ctx: &AllocationContext<'_>,
    moving_here: bool,
) -> usize {
    let value_of = |node_id: &str| {
        ctx.node(node_id)
            .and_then(|n| n.attributes.get(attribute))
            .map(String::as_str)
    };
    let mut count = ctx
        .assigned_copies(&copy.index, copy.shard)
        .filter(|c| matches!(c.state, ShardState::Started | ShardState::Initializing))
        .filter(|c| c.node.as_deref().and_then(value_of) == Some(value))
        .count();
    if moving_here {
        match copy.node.as_deref() {
            Some(current) => {
                // A relocating copy is accounted at its target.
                let at = if copy.state == ShardState::Relocating {
                    copy.relocating_node.as_deref().unwrap_or(current)
                } else {
                    current
                };
                if at != node.id {
                    if value_of(at) == Some(value) && count > 0 {
                        count -= 1;
                    }
                    count += 1;
                }
            }
            None => count += 1,
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::DecisionKind;
    use crate::test_support::*;
    use serde_json::json;
    use shoal_state::Command;

    fn zone_aware_cluster() -> shoal_state::ClusterState {
        let mut state = cluster(crate::test_support::three_zones());
        set_cluster_setting(&mut state, AWARENESS_ATTRIBUTES, json!("zone"));
        state
    }

    #[test]
    fn disabled_without_attributes() {
        let mut state = cluster(vec![data_node("n1", "a")]);
        create_index(&mut state, 0, "idx", 1, 1, &[]);
        let copy = copy_at(&state, "idx", 0, 0);
        with_ctx(&state, |ctx| {
            let yes = Awareness.can_allocate(&copy, ctx.node("n1").expect("n1"), ctx);
            assert_eq!(
                yes.explanation(),
                "allocation awareness is not enabled, set cluster setting [cluster.routing.allocation.awareness.attributes] to enable it"
            );
        });
    }

    #[test]
    fn one_copy_per_zone_with_three_zones() {
        let mut state = zone_aware_cluster();
        create_index(&mut state, 0, "idx", 1, 2, &[]);
        settle(&mut state, 0);
        let mut extra = copy_at(&state, "idx", 0, 1);
        extra.node = None;
        extra.state = ShardState::Unassigned;
        extra.allocation_id = None;
        let mut stranger = data_node("n4", "a");
        stranger.attributes.insert("zone".into(), "a".into());
        apply(&mut state, 0, Command::NodeJoin(stranger.clone()));
        with_ctx(&state, |ctx| {
            let no = Awareness.can_allocate(&extra, &stranger, ctx);
            assert_eq!(no.kind(), DecisionKind::No);
            assert_eq!(
                no.explanation(),
                "there are too many copies of the shard allocated to nodes with attribute [zone], there are [3] total \
                 configured shard copies for this shard id and [3] total attribute values, expected the allocated shard \
                 count per attribute [2] to be less than or equal to the upper bound of the required number of shards \
                 per attribute [1]"
            );
            // Every started copy may stay.
            for copy in ctx.copies("idx", 0) {
                let node = ctx
                    .node(copy.node.as_deref().expect("assigned"))
                    .expect("node");
                assert_eq!(
                    Awareness.can_remain(copy, node, ctx).kind(),
                    DecisionKind::Yes
                );
            }
        });
    }

    #[test]
    fn nodes_without_the_attribute_are_refused() {
        let mut state = zone_aware_cluster();
        let bare = node_with("n9", &[]);
        apply(&mut state, 0, Command::NodeJoin(bare.clone()));
        create_index(&mut state, 0, "idx", 1, 0, &[]);
        let copy = copy_at(&state, "idx", 0, 0);
        with_ctx(&state, |ctx| {
            assert_eq!(
                Awareness.can_allocate(&copy, &bare, ctx).explanation(),
                "node does not contain the awareness attribute [zone]; required attributes cluster setting \
                 [cluster.routing.allocation.awareness.attributes=zone]"
            );
        });
    }

    #[test]
    fn forced_values_keep_the_denominator_when_a_zone_is_gone() {
        let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
        set_cluster_setting(&mut state, AWARENESS_ATTRIBUTES, json!("zone"));
        create_index(&mut state, 0, "idx", 1, 2, &[]);
        settle(&mut state, 0);
        let unassigned = state
            .copies("idx", 0)
            .iter()
            .find(|c| c.node.is_none())
            .cloned()
            .expect("one left over");
        with_ctx(&state, |ctx| {
            // Plain awareness: two live zones, ceil(3/2) = 2 copies per zone allowed.
            assert_eq!(
                Awareness
                    .can_allocate(&unassigned, ctx.node("n1").expect("n1"), ctx)
                    .kind(),
                DecisionKind::Yes
            );
        });
        set_cluster_setting(
            &mut state,
            "cluster.routing.allocation.awareness.force.zone.values",
            json!("a,b,c"),
        );
        with_ctx(&state, |ctx| {
            assert_eq!(
                Awareness
                    .can_allocate(&unassigned, ctx.node("n1").expect("n1"), ctx)
                    .kind(),
                DecisionKind::No
            );
        });
    }
}
