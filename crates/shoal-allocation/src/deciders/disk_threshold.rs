//! Disk watermarks (`DiskThresholdDecider`) from the usage nodes report into
//! `ClusterState::disk_usage`. Above `low` a node takes no new copies except brand-new empty
//! primaries; above `high` it takes nothing and its copies must move away. (The `flood_stage`
//! read-only block lives in `disk_monitor`.) Shoal does not know shard sizes, so every copy
//! is estimated at 0 bytes, like OpenSearch without cluster info for the shard.

use shoal_state::{DiscoveryNode, DiskUsage, RecoverySource, ShardRouting};

use super::Decider;
use crate::context::AllocationContext;
use crate::decision::Decision;
use crate::format::{format_bytes, java_double};
use crate::settings::{DISK_HIGH, DISK_LOW};

pub struct DiskThreshold;

/// Free bytes and free percent of a usage report (100% free when the total is unknown).
pub fn free_space(usage: &DiskUsage) -> (u64, f64) {
    let free = usage.available_bytes.min(usage.total_bytes);
    let percent = if usage.total_bytes == 0 {
        100.0
    } else {
        100.0 * free as f64 / usage.total_bytes as f64
    };
    (free, percent)
}

/// The node's reported usage, or the average of the reported ones when it has not reported yet.
pub fn node_usage(ctx: &AllocationContext<'_>, node_id: &str) -> Option<DiskUsage> {
    let usages = &ctx.state.disk_usage;
    if let Some(usage) = usages.get(node_id) {
        return Some(*usage);
    }
    let count = usages.len() as u64;
    (count > 0).then(|| DiskUsage {
        total_bytes: usages.values().map(|u| u.total_bytes).sum::<u64>() / count,
        available_bytes: usages.values().map(|u| u.available_bytes).sum::<u64>() / count,
        shards_bytes: 0,
    })
}

/// The usage a decision rests on, or the decision when there is nothing to decide on.
fn usage_to_decide_on(
    ctx: &AllocationContext<'_>,
    node: &DiscoveryNode,
) -> Result<DiskUsage, Decision> {
    if let Some(decision) = early_terminate(ctx) {
        return Err(decision);
    }
    node_usage(ctx, &node.id).ok_or_else(|| Decision::yes("disk usages are unavailable"))
}

/// Disabled, a single data node, or nothing reported: allow, as OpenSearch does.
fn early_terminate(ctx: &AllocationContext<'_>) -> Option<Decision> {
    if !ctx.settings.disk.enabled {
        return Some(Decision::yes("the disk threshold decider is disabled"));
    }
    if ctx.data_node_count() <= 1 {
        return Some(Decision::yes("there is only a single data node present"));
    }
    if ctx.state.disk_usage.is_empty() {
        return Some(Decision::yes("disk usages are unavailable"));
    }
    None
}

impl Decider for DiskThreshold {
    fn name(&self) -> &'static str {
        "disk_threshold"
    }

    fn can_allocate(
        &self,
        copy: &ShardRouting,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        let usage = match usage_to_decide_on(ctx, node) {
            Ok(usage) => usage,
            Err(decision) => return decision,
        };
        let disk = &ctx.settings.disk;
        let (free_bytes, free_percent) = free_space(&usage);
        // A primary that has never held data grows from nothing: only the high watermark stops it.
        let new_empty_primary = copy.primary
            && !copy.is_active()
            && copy.recovery_source == Some(RecoverySource::EmptyStore);

        if free_bytes < disk.low.free_bytes {
            if !new_empty_primary {
                return Decision::no(format!(
                    "the node is above the low watermark cluster setting [{DISK_LOW}={}], having less than the minimum \
                     required [{}] free space, actual free: [{}]",
                    disk.low.raw,
                    format_bytes(disk.low.free_bytes),
                    format_bytes(free_bytes)
                ));
            } else if free_bytes > disk.high.free_bytes {
                return Decision::yes(NEVER_ALLOCATED_PRIMARY);
            } else {
                return Decision::no(format!(
                    "the node is above the high watermark cluster setting [{DISK_HIGH}={}], having less than the minimum \
                     required [{}] free space, actual free: [{}]",
                    disk.high.raw,
                    format_bytes(disk.high.free_bytes),
                    format_bytes(free_bytes)
                ));
            }
        }
        if free_percent < disk.low.free_percent {
            if !new_empty_primary {
                return Decision::no(format!(
                    "the node is above the low watermark cluster setting [{DISK_LOW}={}], using more disk space than the \
                     maximum allowed [{}%], actual free: [{}%]",
                    disk.low.raw,
                    java_double(100.0 - disk.low.free_percent),
                    java_double(free_percent)
                ));
            } else if free_percent > disk.high.free_percent {
                return Decision::yes(NEVER_ALLOCATED_PRIMARY);
            } else {
                return Decision::no(format!(
                    "the node is above the high watermark cluster setting [{DISK_HIGH}={}], using more disk space than the \
                     maximum allowed [{}%], actual free: [{}%]",
                    disk.high.raw,
                    java_double(100.0 - disk.high.free_percent),
                    java_double(free_percent)
                ));
            }
        }
        // With a 0-byte estimate the copy cannot push the node past the high watermark by
        // itself, so the "after allocation" checks reduce to the message below.
        Decision::yes(format!(
            "enough disk for shard on node, free: [{}], shard size: [0b], free after allocating shard: [{}]",
            format_bytes(free_bytes),
            format_bytes(free_bytes)
        ))
    }

    fn can_remain(
        &self,
        _copy: &ShardRouting,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        let usage = match usage_to_decide_on(ctx, node) {
            Ok(usage) => usage,
            Err(decision) => return decision,
        };
        let high = &ctx.settings.disk.high;
        let (free_bytes, free_percent) = free_space(&usage);
        if free_bytes < high.free_bytes {
            return Decision::no(format!(
                "the shard cannot remain on this node because it is above the high watermark cluster setting \
                 [{DISK_HIGH}={}] and there is less than the required [{}] free space on node, actual free: [{}]",
                high.raw,
                format_bytes(high.free_bytes),
                format_bytes(free_bytes)
            ));
        }
        if free_percent < high.free_percent {
            return Decision::no(format!(
                "the shard cannot remain on this node because it is above the high watermark cluster setting \
                 [{DISK_HIGH}={}] and there is less than the required [{}%] free disk on node, actual free: [{}%]",
                high.raw,
                java_double(high.free_percent),
                java_double(free_percent)
            ));
        }
        Decision::yes(format!(
            "there is enough disk on this node for the shard to remain, free: [{}]",
            format_bytes(free_bytes)
        ))
    }
}

const NEVER_ALLOCATED_PRIMARY: &str =
    "the node is above the low watermark, but less than the high watermark, and this primary shard has never been allocated before";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::DecisionKind;
    use crate::test_support::*;
    use serde_json::json;
    use shoal_state::Command;

    const GB: u64 = 1 << 30;

    fn with_usage(used_percent: u64) -> shoal_state::ClusterState {
        let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
        create_index(&mut state, 0, "idx", 1, 1, &[]);
        for (node, used) in [("n1", used_percent), ("n2", 10)] {
            let usage = DiskUsage {
                total_bytes: 100 * GB,
                available_bytes: (100 - used) * GB,
                shards_bytes: 0,
            };
            apply(
                &mut state,
                0,
                Command::DiskUsage {
                    node_id: node.into(),
                    usage,
                },
            );
        }
        state
    }

    #[test]
    fn below_low_allows_everything() {
        let state = with_usage(50);
        let replica = copy_at(&state, "idx", 0, 1);
        with_ctx(&state, |ctx| {
            let yes = DiskThreshold.can_allocate(&replica, ctx.node("n1").expect("n1"), ctx);
            assert_eq!(
                yes.explanation(),
                "enough disk for shard on node, free: [50gb], shard size: [0b], free after allocating shard: [50gb]"
            );
        });
    }

    #[test]
    fn above_low_only_new_primaries_are_allowed() {
        let state = with_usage(87);
        let primary = copy_at(&state, "idx", 0, 0);
        let replica = copy_at(&state, "idx", 0, 1);
        with_ctx(&state, |ctx| {
            let n1 = ctx.node("n1").expect("n1");
            let no = DiskThreshold.can_allocate(&replica, n1, ctx);
            assert_eq!(
                no.explanation(),
                "the node is above the low watermark cluster setting [cluster.routing.allocation.disk.watermark.low=85%], \
                 using more disk space than the maximum allowed [85.0%], actual free: [13.0%]"
            );
            assert_eq!(
                DiskThreshold.can_allocate(&primary, n1, ctx).explanation(),
                NEVER_ALLOCATED_PRIMARY
            );
            assert_eq!(
                DiskThreshold.can_remain(&replica, n1, ctx).kind(),
                DecisionKind::Yes
            );
        });
    }

    #[test]
    fn above_high_nothing_comes_and_copies_leave() {
        let state = with_usage(92);
        let primary = copy_at(&state, "idx", 0, 0);
        with_ctx(&state, |ctx| {
            let n1 = ctx.node("n1").expect("n1");
            assert_eq!(
                DiskThreshold.can_allocate(&primary, n1, ctx).kind(),
                DecisionKind::No
            );
            let no = DiskThreshold.can_remain(&primary, n1, ctx);
            assert_eq!(
                no.explanation(),
                "the shard cannot remain on this node because it is above the high watermark cluster setting \
                 [cluster.routing.allocation.disk.watermark.high=90%] and there is less than the required [10.0%] free \
                 disk on node, actual free: [8.0%]"
            );
        });
    }

    #[test]
    fn byte_watermarks_and_escape_hatches() {
        let mut state = with_usage(50);
        set_cluster_setting(&mut state, DISK_LOW, json!("60gb"));
        set_cluster_setting(&mut state, DISK_HIGH, json!("40gb"));
        let replica = copy_at(&state, "idx", 0, 1);
        with_ctx(&state, |ctx| {
            let no = DiskThreshold.can_allocate(&replica, ctx.node("n1").expect("n1"), ctx);
            assert_eq!(
                no.explanation(),
                "the node is above the low watermark cluster setting [cluster.routing.allocation.disk.watermark.low=60gb], \
                 having less than the minimum required [60gb] free space, actual free: [50gb]"
            );
        });
        set_cluster_setting(
            &mut state,
            "cluster.routing.allocation.disk.threshold_enabled",
            json!("false"),
        );
        with_ctx(&state, |ctx| {
            let yes = DiskThreshold.can_allocate(&replica, ctx.node("n1").expect("n1"), ctx);
            assert_eq!(yes.explanation(), "the disk threshold decider is disabled");
        });
    }
}
