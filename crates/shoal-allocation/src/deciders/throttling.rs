//! Recovery throttling (`ThrottlingAllocationDecider`). Counts come from `RoutingStats`:
//! - an unassigned primary recovers from a store, limited per node by
//!   `node_initial_primaries_recoveries`;
//! - a replica of a just-created index is limited by `node_initial_replicas_recoveries`, both
//!   on the receiving node and on the node holding the primary;
//! - every other copy recovers from the primary: `node_concurrent_incoming_recoveries` on the
//!   target, `node_concurrent_outgoing_recoveries` on the primary's node (both default to
//!   `node_concurrent_recoveries`).

use shoal_state::{DiscoveryNode, ShardRouting, ShardState};

use super::Decider;
use crate::context::{is_initial_replica, AllocationContext};
use crate::decision::Decision;
use crate::settings::{
    CONCURRENT_RECOVERIES, INCOMING_RECOVERIES, INITIAL_PRIMARIES, INITIAL_REPLICAS,
    OUTGOING_RECOVERIES,
};

pub struct Throttling;

impl Decider for Throttling {
    fn name(&self) -> &'static str {
        "throttling"
    }

    fn can_allocate(
        &self,
        copy: &ShardRouting,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        let s = ctx.settings;
        if copy.primary && copy.state == ShardState::Unassigned {
            let recovering = ctx.stats.node(&node.id).initial_primaries as i64;
            let limit = s.initial_primaries_recoveries;
            if recovering >= limit {
                return Decision::throttle(format!(
                    "reached the limit of ongoing initial primary recoveries [{recovering}], cluster setting \
                     [{INITIAL_PRIMARIES}={limit}]"
                ));
            }
            return Decision::yes(format!("below primary recovery limit of [{limit}]"));
        }
        if copy.state == ShardState::Unassigned && is_initial_replica(copy) {
            let limit = s.initial_replicas_recoveries;
            let setting = format!("[{INITIAL_REPLICAS}={limit}]");
            let incoming = ctx.stats.node(&node.id).initial_replica_incoming as i64;
            peer_recovery(
                copy,
                ctx,
                incoming,
                limit,
                limit,
                &setting,
                &setting,
                |stats| stats.initial_replica_outgoing,
            )
        } else {
            let (in_limit, out_limit) = (s.incoming_recoveries, s.outgoing_recoveries);
            let in_setting = format!("[{INCOMING_RECOVERIES}={in_limit}] (can also be set via [{CONCURRENT_RECOVERIES}])");
            let out_setting = format!("[{OUTGOING_RECOVERIES}={out_limit}] (can also be set via [{CONCURRENT_RECOVERIES}])");
            let incoming = ctx.stats.node(&node.id).incoming as i64;
            peer_recovery(
                copy,
                ctx,
                incoming,
                in_limit,
                out_limit,
                &in_setting,
                &out_setting,
                |stats| stats.outgoing,
            )
        }
    }

    fn can_move_away(&self, copy: &ShardRouting, ctx: &AllocationContext<'_>) -> Decision {
        let source = if copy.primary {
            copy.node.as_deref()
        } else {
            ctx.active_primary(&copy.index, copy.shard)
                .and_then(|p| p.node.as_deref())
        };
        let outgoing = source.map(|n| ctx.stats.node(n).outgoing).unwrap_or(0) as i64;
        let limit = ctx.settings.outgoing_recoveries;
        if outgoing >= limit {
            return Decision::throttle(format!(
                "too many outgoing shards are currently recovering [{outgoing}], limit: [{limit}] cluster setting \
                 [{OUTGOING_RECOVERIES}={limit}]"
            ));
        }
        Decision::yes(format!(
            "below shard recovery limit of outgoing: [{outgoing} < {limit}]"
        ))
    }
}

/// A peer recovery: the target's incoming count first, then the outgoing count of the node
/// holding the active primary (the recovery source).
#[allow(clippy::too_many_arguments)]
fn peer_recovery(
    copy: &ShardRouting,
    ctx: &AllocationContext<'_>,
    incoming: i64,
    in_limit: i64,
    out_limit: i64,
    in_setting: &str,
    out_setting: &str,
    outgoing_of: impl Fn(&crate::context::NodeStats) -> usize,
) -> Decision {
    if incoming >= in_limit {
        return Decision::throttle(format!(
            "reached the limit of incoming shard recoveries [{incoming}], cluster setting {in_setting}"
        ));
    }
    let Some(primary_node) = ctx
        .active_primary(&copy.index, copy.shard)
        .and_then(|p| p.node.as_deref())
    else {
        return Decision::no("primary shard for this replica is not yet active");
    };
    let outgoing = outgoing_of(ctx.stats.node(primary_node)) as i64;
    if outgoing >= out_limit {
        return Decision::throttle(format!(
            "reached the limit of outgoing shard recoveries [{outgoing}] on the node [{primary_node}] which holds the \
             primary, cluster setting {out_setting}"
        ));
    }
    Decision::yes(format!(
        "below shard recovery limit of outgoing: [{outgoing} < {out_limit}] incoming: [{incoming} < {in_limit}]"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::DecisionKind;
    use crate::test_support::*;
    use serde_json::json;

    #[test]
    fn initial_primaries_are_limited_per_node() {
        let mut state = cluster(vec![data_node("n1", "a")]);
        set_cluster_setting(&mut state, INITIAL_PRIMARIES, json!(2));
        create_index(&mut state, 0, "idx", 3, 0, &[]);
        crate::reroute(&mut state, 0);
        assert_eq!(count_state(&state, ShardState::Initializing), 2);
        let waiting = state.copies("idx", 2)[0].clone();
        assert_eq!(waiting.state, ShardState::Unassigned);
        assert_eq!(
            waiting
                .unassigned
                .as_ref()
                .map(|u| u.last_allocation_status.as_str()),
            Some("throttled")
        );
        with_ctx(&state, |ctx| {
            let throttled = Throttling.can_allocate(&waiting, ctx.node("n1").expect("n1"), ctx);
            assert_eq!(
                throttled.explanation(),
                "reached the limit of ongoing initial primary recoveries [2], cluster setting \
                 [cluster.routing.allocation.node_initial_primaries_recoveries=2]"
            );
        });
    }

    #[test]
    fn peer_recoveries_are_limited_on_both_ends() {
        let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
        create_index(&mut state, 0, "idx", 3, 0, &[]);
        settle(&mut state, 0);
        // Replicas added later are not "initial": node_concurrent_recoveries applies.
        set_cluster_setting(&mut state, CONCURRENT_RECOVERIES, json!(1));
        let mut meta = state.metadata.indices["idx"].clone();
        meta.settings
            .insert("index.number_of_replicas".into(), json!("1"));
        meta.version += 1;
        apply(
            &mut state,
            0,
            shoal_state::Command::PutIndex {
                meta,
                create: false,
            },
        );
        crate::reroute(&mut state, 0);
        let initializing = count_state(&state, ShardState::Initializing);
        assert!(
            initializing <= 2,
            "at most one incoming per node, got {initializing}"
        );
        let waiting = state
            .all_copies()
            .find(|c| c.state == ShardState::Unassigned)
            .cloned()
            .expect("one waits");
        assert_eq!(
            waiting
                .unassigned
                .as_ref()
                .map(|u| u.last_allocation_status.as_str()),
            Some("throttled")
        );
        with_ctx(&state, |ctx| {
            let decisions: Vec<_> = ctx
                .data_nodes()
                .map(|n| Throttling.can_allocate(&waiting, n, ctx))
                .collect();
            assert!(decisions.iter().any(|d| d.kind() == DecisionKind::Throttle));
            assert!(decisions.iter().all(|d| d.kind() != DecisionKind::Yes));
            assert!(decisions.iter().any(|d| d.explanation().contains(
                "(can also be set via [cluster.routing.allocation.node_concurrent_recoveries])"
            )));
        });
    }
}
