//! `index.allocation.max_retries` (`MaxRetryAllocationDecider`): a copy that failed to
//! initialize that many times in a row waits for `POST /_cluster/reroute?retry_failed=true`.

use shoal_state::{DiscoveryNode, ShardRouting};

use super::Decider;
use crate::context::AllocationContext;
use crate::decision::Decision;
use crate::format::describe_unassigned;
use crate::settings::{index_i64, MAX_RETRIES};

pub struct MaxRetry;

impl Decider for MaxRetry {
    fn name(&self) -> &'static str {
        "max_retry"
    }

    fn can_allocate(
        &self,
        copy: &ShardRouting,
        _node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        let Some(info) = copy
            .unassigned
            .as_ref()
            .filter(|u| u.failed_allocations > 0)
        else {
            return Decision::yes("shard has no previous failures");
        };
        let max = ctx
            .index(&copy.index)
            .map(|m| index_i64(m, MAX_RETRIES, 5))
            .unwrap_or(5);
        let failed = i64::from(info.failed_allocations);
        if failed >= max {
            Decision::no(format!(
                "shard has exceeded the maximum number of retries [{max}] on failed allocation attempts - manually call \
                 [/_cluster/reroute?retry_failed=true] to retry, [{}]",
                describe_unassigned(info)
            ))
        } else {
            Decision::yes(format!(
                "shard has failed allocating [{failed}] times but [{max}] retries are allowed"
            ))
        }
    }

    // Retries are a hard stop even for a primary's only data.
    fn can_force_allocate_primary(
        &self,
        copy: &ShardRouting,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        self.can_allocate(copy, node, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::DecisionKind;
    use crate::test_support::*;

    #[test]
    fn stops_after_max_retries() {
        let mut state = cluster(vec![data_node("n1", "a")]);
        create_index(
            &mut state,
            0,
            "idx",
            1,
            0,
            &[("index.allocation.max_retries", "2")],
        );
        let mut copy = copy_at(&state, "idx", 0, 0);
        with_ctx(&state, |ctx| {
            let n1 = ctx.node("n1").expect("n1");
            assert_eq!(
                MaxRetry.can_allocate(&copy, n1, ctx).explanation(),
                "shard has no previous failures"
            );
            if let Some(info) = copy.unassigned.as_mut() {
                info.failed_allocations = 1;
            }
            assert_eq!(
                MaxRetry.can_allocate(&copy, n1, ctx).explanation(),
                "shard has failed allocating [1] times but [2] retries are allowed"
            );
            if let Some(info) = copy.unassigned.as_mut() {
                info.failed_allocations = 2;
            }
            let no = MaxRetry.can_allocate(&copy, n1, ctx);
            assert_eq!(no.kind(), DecisionKind::No);
            assert!(no.explanation().starts_with(
                "shard has exceeded the maximum number of retries [2] on failed allocation attempts - manually call \
                 [/_cluster/reroute?retry_failed=true] to retry, [unassigned_info[[reason=INDEX_CREATED], \
                 at[1970-01-01T00:00:00.000Z], failed_attempts[2], delayed=false"
            ));
            assert_eq!(
                MaxRetry.can_force_allocate_primary(&copy, n1, ctx).kind(),
                DecisionKind::No
            );
        });
    }
}
