//! What deciders look at: the state, the parsed cluster settings and per-node counters
//! (OpenSearch's `RoutingAllocation` + `RoutingNodes`).

use std::collections::BTreeMap;

use shoal_state::{
    ClusterState, DiscoveryNode, IndexMetadata, ShardRouting, ShardState, UnassignedReason,
};

use crate::settings::AllocationSettings;

/// Counters of one node. Recoveries follow `RoutingNodes.updateRecoveryCounts`: an initializing
/// primary that is not a relocation target is an "initial primary" recovery; replicas of a
/// just-created index count as "initial replica" recoveries; every other peer recovery counts
/// as incoming on its node and outgoing on the node of the shard's primary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Copies on the node that stay there: everything but RELOCATING sources
    /// (`numberOfOwningShards`).
    pub owning: usize,
    pub owning_per_index: BTreeMap<String, usize>,
    pub incoming: usize,
    pub outgoing: usize,
    pub initial_replica_incoming: usize,
    pub initial_replica_outgoing: usize,
    pub initial_primaries: usize,
}

impl NodeStats {
    pub fn owning_of(&self, index: &str) -> usize {
        self.owning_per_index.get(index).copied().unwrap_or(0)
    }
}

/// Cluster-wide counters, rebuilt from the routing table after every change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingStats {
    pub nodes: BTreeMap<String, NodeStats>,
    /// RELOCATING copies (the sources).
    pub relocating: usize,
    pub unassigned: usize,
    pub unassigned_primaries: usize,
    /// Initializing copies that are not relocation targets.
    pub inactive: usize,
    pub inactive_primaries: usize,
}

impl RoutingStats {
    pub fn build(state: &ClusterState) -> RoutingStats {
        let mut stats = RoutingStats::default();
        for table in state.routing.values() {
            for copies in &table.shards {
                let primary_node = primary_node_of(copies);
                for copy in copies {
                    stats.add(copy, primary_node);
                }
            }
        }
        stats
    }

    /// Counts one copy; `primary_node` is where the shard's primary is (the recovery source).
    pub fn add(&mut self, copy: &ShardRouting, primary_node: Option<&str>) {
        self.adjust(copy, primary_node, true);
    }

    /// Undoes `add` for a copy about to change, so counters follow mutations without a rebuild.
    pub fn remove(&mut self, copy: &ShardRouting, primary_node: Option<&str>) {
        self.adjust(copy, primary_node, false);
        // Keep the shape a full rebuild would have: no zero entries.
        for node in [copy.node.as_deref(), primary_node].into_iter().flatten() {
            if let Some(stats) = self.nodes.get_mut(node) {
                stats.owning_per_index.retain(|_, n| *n > 0);
                if *stats == NodeStats::default() {
                    self.nodes.remove(node);
                }
            }
        }
    }

    fn adjust(&mut self, copy: &ShardRouting, primary_node: Option<&str>, add: bool) {
        let step = |n: &mut usize| {
            *n = if add { *n + 1 } else { n.saturating_sub(1) };
        };
        let Some(node) = copy.node.as_deref() else {
            step(&mut self.unassigned);
            if copy.primary {
                step(&mut self.unassigned_primaries);
            }
            return;
        };
        if copy.state == ShardState::Relocating {
            step(&mut self.relocating);
            return;
        }
        let entry = node_entry(&mut self.nodes, node);
        step(&mut entry.owning);
        step(count_entry(&mut entry.owning_per_index, &copy.index));
        if copy.state != ShardState::Initializing {
            return;
        }
        let is_target = copy.relocation_target_of().is_some();
        if !is_target {
            step(&mut self.inactive);
            if copy.primary {
                step(&mut self.inactive_primaries);
            }
        }
        if copy.primary && !is_target {
            step(&mut entry.initial_primaries);
            return;
        }
        let initial = is_initial_replica(copy);
        step(if initial {
            &mut entry.initial_replica_incoming
        } else {
            &mut entry.incoming
        });
        if let Some(source) = primary_node {
            let source = node_entry(&mut self.nodes, source);
            step(if initial {
                &mut source.initial_replica_outgoing
            } else {
                &mut source.outgoing
            });
        }
    }

    pub fn node(&self, id: &str) -> &NodeStats {
        static EMPTY: std::sync::OnceLock<NodeStats> = std::sync::OnceLock::new();
        self.nodes
            .get(id)
            .unwrap_or_else(|| EMPTY.get_or_init(NodeStats::default))
    }
}

/// `map.entry(key.to_string()).or_default()` without allocating the key when it exists: this
/// runs for every copy on every reroute.
fn node_entry<'m>(map: &'m mut BTreeMap<String, NodeStats>, key: &str) -> &'m mut NodeStats {
    if !map.contains_key(key) {
        map.insert(key.to_string(), NodeStats::default());
    }
    map.get_mut(key).expect("present: inserted above")
}

fn count_entry<'m>(map: &'m mut BTreeMap<String, usize>, key: &str) -> &'m mut usize {
    if !map.contains_key(key) {
        map.insert(key.to_string(), 0);
    }
    map.get_mut(key).expect("present: inserted above")
}

/// The node of the shard's primary (not of a relocation target of it).
pub fn primary_node_of(copies: &[ShardRouting]) -> Option<&str> {
    copies
        .iter()
        .find(|c| c.primary && c.relocation_target_of().is_none())
        .and_then(|c| c.node.as_deref())
}

/// A replica of a just-created index (`unassignedReasonIndexCreated`); relocation targets and
/// started copies carry no unassigned info and are never "initial".
pub fn is_initial_replica(copy: &ShardRouting) -> bool {
    !copy.primary
        && copy.relocation_target_of().is_none()
        && copy
            .unassigned
            .as_ref()
            .is_some_and(|u| u.reason == UnassignedReason::IndexCreated)
}

/// Everything a decider may read.
pub struct AllocationContext<'a> {
    pub state: &'a ClusterState,
    pub settings: &'a AllocationSettings,
    pub stats: &'a RoutingStats,
    /// Reroute commands ignore `allocation.enable` and `rebalance.enable`.
    pub ignore_disable: bool,
}

impl<'a> AllocationContext<'a> {
    pub fn index(&self, name: &str) -> Option<&'a IndexMetadata> {
        self.state.metadata.indices.get(name)
    }

    pub fn node(&self, id: &str) -> Option<&'a DiscoveryNode> {
        self.state.nodes.get(id)
    }

    /// Nodes that may hold shards, in id order.
    pub fn data_nodes(&self) -> impl Iterator<Item = &'a DiscoveryNode> {
        self.state.nodes.values().filter(|n| n.is_data())
    }

    pub fn data_node_count(&self) -> usize {
        self.settings.data_node_count
    }

    pub fn copies(&self, index: &str, shard: u32) -> &'a [ShardRouting] {
        self.state.copies(index, shard)
    }

    /// Assigned copies of a shard, relocation sources and targets included.
    pub fn assigned_copies(
        &self,
        index: &str,
        shard: u32,
    ) -> impl Iterator<Item = &'a ShardRouting> {
        self.copies(index, shard).iter().filter(|c| c.is_assigned())
    }

    /// The started (or relocating) primary of a shard.
    pub fn active_primary(&self, index: &str, shard: u32) -> Option<&'a ShardRouting> {
        self.copies(index, shard)
            .iter()
            .find(|c| c.primary && c.is_active() && c.relocation_target_of().is_none())
    }
}
