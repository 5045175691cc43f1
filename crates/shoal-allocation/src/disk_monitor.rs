//! The flood-stage block (`DiskThresholdMonitor`): every index with a copy on a node past
//! `cluster.routing.allocation.disk.watermark.flood_stage` gets
//! `index.blocks.read_only_allow_delete: "true"`; the block is lifted once none of the index's
//! nodes is past the high watermark any more.

use std::collections::BTreeSet;

use serde_json::json;
use shoal_state::ClusterState;

use crate::deciders::free_space;
use crate::settings::{AllocationSettings, READ_ONLY_ALLOW_DELETE};

/// Adds and lifts the blocks; returns whether any index changed.
pub fn update_read_only_blocks(state: &mut ClusterState, settings: &AllocationSettings) -> bool {
    let disk = &settings.disk;
    if !disk.enabled || state.disk_usage.is_empty() {
        return false;
    }
    let mut flooded: BTreeSet<&str> = BTreeSet::new();
    let mut over_high: BTreeSet<&str> = BTreeSet::new();
    for (node, usage) in &state.disk_usage {
        if !state.nodes.contains_key(node) {
            continue;
        }
        let (free_bytes, free_percent) = free_space(usage);
        if disk.flood_stage.exceeded_by(free_bytes, free_percent) {
            flooded.insert(node);
        }
        if disk.high.exceeded_by(free_bytes, free_percent) {
            over_high.insert(node);
        }
    }
    let indices_on = |nodes: &BTreeSet<&str>| -> BTreeSet<String> {
        state
            .all_copies()
            .filter(|c| c.node.as_deref().is_some_and(|n| nodes.contains(n)))
            .map(|c| c.index.clone())
            .collect()
    };
    let to_block = indices_on(&flooded);
    let keep_blocked = indices_on(&over_high);

    let mut changed = false;
    // By name, so only the indices that change are copied (see `IndexMetadataMap::get_mut`).
    let names: Vec<String> = state.metadata.indices.keys().cloned().collect();
    for name in &names {
        let Some(meta) = state.metadata.indices.get(name) else {
            continue;
        };
        let blocked = meta.setting(READ_ONLY_ALLOW_DELETE).as_deref() == Some("true");
        let block = to_block.contains(name) && !blocked;
        let unblock = blocked && !keep_blocked.contains(name) && !to_block.contains(name);
        if !block && !unblock {
            continue;
        }
        let meta = state.metadata.indices.get_mut(name).expect("listed above");
        if block {
            meta.settings
                .insert(READ_ONLY_ALLOW_DELETE.to_string(), json!("true"));
        } else {
            meta.settings.remove(READ_ONLY_ALLOW_DELETE);
        }
        meta.settings_version += 1;
        meta.version += 1;
        changed = true;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use shoal_state::{Command, DiskUsage};

    fn report(state: &mut shoal_state::ClusterState, node: &str, used_percent: u64) {
        let usage = DiskUsage {
            total_bytes: 1000,
            available_bytes: 1000 - used_percent * 10,
            shards_bytes: 0,
        };
        apply(
            state,
            0,
            Command::DiskUsage {
                node_id: node.into(),
                usage,
            },
        );
    }

    fn blocked(state: &shoal_state::ClusterState, index: &str) -> bool {
        state.metadata.indices[index]
            .setting(READ_ONLY_ALLOW_DELETE)
            .as_deref()
            == Some("true")
    }

    #[test]
    fn flood_stage_blocks_until_back_under_high() {
        let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
        create_index(&mut state, 0, "idx", 1, 1, &[]);
        settle(&mut state, 0);
        report(&mut state, "n1", 96);
        report(&mut state, "n2", 10);
        let settings = AllocationSettings::from_state(&state);
        assert!(update_read_only_blocks(&mut state, &settings));
        assert!(blocked(&state, "idx"));
        // Still above high: stays blocked.
        report(&mut state, "n1", 92);
        assert!(!update_read_only_blocks(&mut state, &settings));
        assert!(blocked(&state, "idx"));
        report(&mut state, "n1", 80);
        assert!(update_read_only_blocks(&mut state, &settings));
        assert!(!blocked(&state, "idx"));
    }
}
