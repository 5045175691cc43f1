//! `cluster.routing.allocation.enable` / `cluster.routing.rebalance.enable` and their index
//! overrides (`EnableAllocationDecider`). Reroute commands bypass both.

use shoal_state::{DiscoveryNode, RecoverySource, ShardRouting};

use super::Decider;
use crate::context::AllocationContext;
use crate::decision::Decision;
use crate::settings::{
    AllocationEnable, RebalanceEnable, ALLOCATION_ENABLE, INDEX_ALLOCATION_ENABLE,
    INDEX_REBALANCE_ENABLE, REBALANCE_ENABLE,
};

pub struct Enable;

/// `cluster setting [key=value]` or `index setting [key=value]`.
fn setting_text(index_level: bool, cluster_key: &str, index_key: &str, value: &str) -> String {
    if index_level {
        format!("index setting [{index_key}={value}]")
    } else {
        format!("cluster setting [{cluster_key}={value}]")
    }
}

impl Decider for Enable {
    fn name(&self) -> &'static str {
        "enable"
    }

    fn can_allocate(
        &self,
        copy: &ShardRouting,
        _node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        if ctx.ignore_disable {
            return Decision::yes(
                "explicitly ignoring any disabling of allocation due to manual allocation commands via the reroute API",
            );
        }
        let index_value = ctx
            .index(&copy.index)
            .and_then(|m| m.setting(INDEX_ALLOCATION_ENABLE))
            .and_then(|v| AllocationEnable::parse(&v));
        let enable = index_value.unwrap_or(ctx.settings.enable);
        let why = || {
            setting_text(
                index_value.is_some(),
                ALLOCATION_ENABLE,
                INDEX_ALLOCATION_ENABLE,
                enable.as_str(),
            )
        };
        match enable {
            AllocationEnable::All => Decision::yes("all allocations are allowed"),
            AllocationEnable::None => {
                Decision::no(format!("no allocations are allowed due to {}", why()))
            }
            AllocationEnable::NewPrimaries => {
                let new_primary = copy.primary
                    && !copy.is_active()
                    && copy.recovery_source != Some(RecoverySource::ExistingStore);
                if new_primary {
                    Decision::yes("new primary allocations are allowed")
                } else {
                    Decision::no(format!(
                        "non-new primary allocations are forbidden due to {}",
                        why()
                    ))
                }
            }
            AllocationEnable::Primaries => {
                if copy.primary {
                    Decision::yes("primary allocations are allowed")
                } else {
                    Decision::no(format!(
                        "replica allocations are forbidden due to {}",
                        why()
                    ))
                }
            }
        }
    }

    fn can_rebalance(&self, copy: &ShardRouting, ctx: &AllocationContext<'_>) -> Decision {
        if ctx.ignore_disable {
            return Decision::yes("allocation is explicitly ignoring any disabling of rebalancing");
        }
        let index_value = ctx
            .index(&copy.index)
            .and_then(|m| m.setting(INDEX_REBALANCE_ENABLE))
            .and_then(|v| RebalanceEnable::parse(&v));
        let enable = index_value.unwrap_or(ctx.settings.rebalance_enable);
        let why = || {
            setting_text(
                index_value.is_some(),
                REBALANCE_ENABLE,
                INDEX_REBALANCE_ENABLE,
                enable.as_str(),
            )
        };
        match enable {
            RebalanceEnable::All => Decision::yes("all rebalancing is allowed"),
            RebalanceEnable::None => {
                Decision::no(format!("no rebalancing is allowed due to {}", why()))
            }
            RebalanceEnable::Primaries if copy.primary => {
                Decision::yes("primary rebalancing is allowed")
            }
            RebalanceEnable::Primaries => {
                Decision::no(format!("replica rebalancing is forbidden due to {}", why()))
            }
            RebalanceEnable::Replicas if !copy.primary => {
                Decision::yes("replica rebalancing is allowed")
            }
            RebalanceEnable::Replicas => {
                Decision::no(format!("primary rebalancing is forbidden due to {}", why()))
            }
        }
    }

    fn can_rebalance_cluster(&self, ctx: &AllocationContext<'_>) -> Decision {
        if ctx.ignore_disable {
            return Decision::yes("allocation is explicitly ignoring any disabling of rebalancing");
        }
        if ctx.settings.rebalance_enable == RebalanceEnable::None {
            let some_index_allows = ctx.state.metadata.indices.values().any(|m| {
                m.setting(INDEX_REBALANCE_ENABLE)
                    .and_then(|v| RebalanceEnable::parse(&v))
                    .is_some_and(|e| e != RebalanceEnable::None)
            });
            if some_index_allows {
                return Decision::yes("rebalancing is permitted on one or more indices");
            }
            return Decision::no(format!(
                "no rebalancing is allowed due to cluster setting [{REBALANCE_ENABLE}=none]"
            ));
        }
        Decision::yes("rebalancing is not globally disabled")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::DecisionKind;
    use crate::test_support::*;
    use serde_json::json;

    #[test]
    fn allocation_enable_modes() {
        let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
        create_index(&mut state, 0, "idx", 1, 1, &[]);
        let primary = copy_at(&state, "idx", 0, 0);
        let replica = copy_at(&state, "idx", 0, 1);
        let check = |state: &shoal_state::ClusterState, copy: &ShardRouting| {
            with_ctx(state, |ctx| {
                Enable.can_allocate(copy, ctx.node("n1").expect("n1"), ctx)
            })
        };
        assert_eq!(
            check(&state, &replica).explanation(),
            "all allocations are allowed"
        );
        set_cluster_setting(&mut state, ALLOCATION_ENABLE, json!("primaries"));
        assert_eq!(check(&state, &primary).kind(), DecisionKind::Yes);
        assert_eq!(
            check(&state, &replica).explanation(),
            "replica allocations are forbidden due to cluster setting [cluster.routing.allocation.enable=primaries]"
        );
        set_cluster_setting(&mut state, ALLOCATION_ENABLE, json!("new_primaries"));
        assert_eq!(
            check(&state, &primary).explanation(),
            "new primary allocations are allowed"
        );
        let mut existing = primary.clone();
        existing.recovery_source = Some(RecoverySource::ExistingStore);
        assert_eq!(check(&state, &existing).kind(), DecisionKind::No);
        set_index_setting(&mut state, "idx", INDEX_ALLOCATION_ENABLE, "none");
        assert_eq!(
            check(&state, &primary).explanation(),
            "no allocations are allowed due to index setting [index.routing.allocation.enable=none]"
        );
    }

    #[test]
    fn rebalance_enable_modes() {
        let mut state = cluster(vec![data_node("n1", "a")]);
        create_index(&mut state, 0, "idx", 1, 1, &[]);
        let primary = copy_at(&state, "idx", 0, 0);
        let replica = copy_at(&state, "idx", 0, 1);
        set_cluster_setting(&mut state, REBALANCE_ENABLE, json!("replicas"));
        with_ctx(&state, |ctx| {
            assert_eq!(
                Enable.can_rebalance(&replica, ctx).kind(),
                DecisionKind::Yes
            );
            assert_eq!(
                Enable.can_rebalance(&primary, ctx).explanation(),
                "primary rebalancing is forbidden due to cluster setting [cluster.routing.rebalance.enable=replicas]"
            );
            assert_eq!(
                Enable.can_rebalance_cluster(ctx).explanation(),
                "rebalancing is not globally disabled"
            );
        });
        set_cluster_setting(&mut state, REBALANCE_ENABLE, json!("none"));
        with_ctx(&state, |ctx| {
            assert_eq!(
                Enable.can_rebalance_cluster(ctx).explanation(),
                "no rebalancing is allowed due to cluster setting [cluster.routing.rebalance.enable=none]"
            );
        });
    }
}
