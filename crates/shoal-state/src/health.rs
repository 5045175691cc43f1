//! Cluster health, computed from the routing table exactly as OpenSearch defines the colours.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::routing::{RecoverySource, ShardRouting, ShardState, UnassignedReason};
use crate::ClusterState;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    Green,
    Yellow,
    Red,
}

impl HealthStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthStatus::Green => "green",
            HealthStatus::Yellow => "yellow",
            HealthStatus::Red => "red",
        }
    }

    pub fn parse(text: &str) -> Option<HealthStatus> {
        match text {
            "green" => Some(HealthStatus::Green),
            "yellow" => Some(HealthStatus::Yellow),
            "red" => Some(HealthStatus::Red),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    pub active_primary_shards: u64,
    pub active_shards: u64,
    pub relocating_shards: u64,
    pub initializing_shards: u64,
    pub unassigned_shards: u64,
    pub delayed_unassigned_shards: u64,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.active_primary_shards += other.active_primary_shards;
        self.active_shards += other.active_shards;
        self.relocating_shards += other.relocating_shards;
        self.initializing_shards += other.initializing_shards;
        self.unassigned_shards += other.unassigned_shards;
        self.delayed_unassigned_shards += other.delayed_unassigned_shards;
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ShardHealth {
    pub status: HealthStatus,
    pub primary_active: bool,
    pub counts: Counts,
}

#[derive(Debug, Clone, Serialize)]
pub struct IndexHealth {
    pub status: HealthStatus,
    pub number_of_shards: u32,
    pub number_of_replicas: u32,
    pub counts: Counts,
    pub shards: BTreeMap<u32, ShardHealth>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClusterHealth {
    pub status: HealthStatus,
    pub number_of_nodes: usize,
    pub number_of_data_nodes: usize,
    pub counts: Counts,
    pub indices: BTreeMap<String, IndexHealth>,
}

impl ClusterHealth {
    /// Percentage of all shard copies that are active (100 with no shards), as OpenSearch.
    pub fn active_shards_percent(&self) -> f64 {
        let c = &self.counts;
        let total = c.active_shards + c.initializing_shards + c.unassigned_shards;
        if total == 0 {
            100.0
        } else {
            100.0 * c.active_shards as f64 / total as f64
        }
    }
}

impl ClusterState {
    /// Health of the given indices (all when `indices` is `None`).
    pub fn health(&self, indices: Option<&[String]>) -> ClusterHealth {
        let mut out = ClusterHealth {
            status: HealthStatus::Green,
            number_of_nodes: self.nodes.len(),
            number_of_data_nodes: self.nodes.values().filter(|n| n.is_data()).count(),
            counts: Counts::default(),
            indices: BTreeMap::new(),
        };
        for (name, meta) in &self.metadata.indices {
            if indices.is_some_and(|wanted| !wanted.iter().any(|w| w == name)) {
                continue;
            }
            let table = self.routing.get(name);
            let mut index = IndexHealth {
                status: HealthStatus::Green,
                number_of_shards: meta.number_of_shards(),
                number_of_replicas: meta.number_of_replicas(),
                counts: Counts::default(),
                shards: BTreeMap::new(),
            };
            for (shard, copies) in table
                .map(|t| t.shards.as_slice())
                .unwrap_or(&[])
                .iter()
                .enumerate()
            {
                let health = shard_health(copies);
                index.status = index.status.max(health.status);
                index.counts.add(&health.counts);
                index.shards.insert(shard as u32, health);
            }
            out.status = out.status.max(index.status);
            out.counts.add(&index.counts);
            out.indices.insert(name.clone(), index);
        }
        out
    }
}

fn shard_health(copies: &[ShardRouting]) -> ShardHealth {
    let mut counts = Counts::default();
    let mut primary_active = false;
    let mut primary: Option<&ShardRouting> = None;
    for copy in copies {
        match copy.state {
            ShardState::Started | ShardState::Relocating => {
                counts.active_shards += 1;
                if copy.primary {
                    counts.active_primary_shards += 1;
                    primary_active = true;
                }
                if copy.state == ShardState::Relocating {
                    counts.relocating_shards += 1;
                }
            }
            ShardState::Initializing => {
                // Relocation targets are counted by their source.
                if copy.relocation_target_of().is_none() {
                    counts.initializing_shards += 1;
                }
            }
            ShardState::Unassigned => {
                counts.unassigned_shards += 1;
                if copy.unassigned.as_ref().is_some_and(|u| u.delayed) {
                    counts.delayed_unassigned_shards += 1;
                }
            }
        }
        if copy.primary && copy.relocation_target_of().is_none() {
            primary = Some(copy);
        }
    }
    let status = if primary_active {
        if counts.active_shards as usize
            == copies
                .iter()
                .filter(|c| c.relocation_target_of().is_none())
                .count()
        {
            HealthStatus::Green
        } else {
            HealthStatus::Yellow
        }
    } else if primary.is_some_and(new_primary_not_refused) {
        HealthStatus::Yellow
    } else {
        HealthStatus::Red
    };
    ShardHealth {
        status,
        primary_active,
        counts,
    }
}

/// OpenSearch reports a brand-new index whose primaries are still being created as yellow,
/// not red, unless the deciders refused them.
fn new_primary_not_refused(primary: &ShardRouting) -> bool {
    primary.recovery_source == Some(RecoverySource::EmptyStore)
        && primary.unassigned.as_ref().is_none_or(|u| {
            u.reason == UnassignedReason::IndexCreated && u.last_allocation_status != "no"
        })
}

/// One value of an awareness attribute (a zone, a rack): the copies on its data nodes
/// (`GET /_cluster/health?level=awareness_attributes`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AwarenessValueHealth {
    /// Copies not moving away: started, initializing and relocation targets, as OpenSearch
    /// counts a node's "owning" shards.
    pub active_shards: i64,
    pub initializing_shards: i64,
    pub relocating_shards: i64,
    /// -1: OpenSearch counts a value's missing share of the copies only under
    /// `cluster.routing.allocation.awareness.balance`, which Shoal refuses.
    pub unassigned_shards: i64,
    pub data_nodes: i64,
    /// Weighted routing's weight of the value; Shoal routes every value alike.
    pub weight: f64,
}

impl ClusterState {
    /// Per value of `attribute` on the data nodes, the copies those nodes hold.
    pub fn awareness_health(&self, attribute: &str) -> BTreeMap<String, AwarenessValueHealth> {
        let mut values: BTreeMap<String, AwarenessValueHealth> = BTreeMap::new();
        let mut value_of_node = BTreeMap::new();
        for node in self.nodes.values().filter(|n| n.is_data()) {
            let Some(value) = node.attributes.get(attribute) else {
                continue;
            };
            let entry = values
                .entry(value.clone())
                .or_insert_with(AwarenessValueHealth::empty);
            entry.data_nodes += 1;
            value_of_node.insert(node.id.as_str(), value.as_str());
        }
        let copies = self
            .routing
            .values()
            .flat_map(|t| t.shards.iter().flatten());
        for copy in copies {
            let Some(value) = copy.node.as_deref().and_then(|n| value_of_node.get(n)) else {
                continue;
            };
            let entry = values
                .get_mut(*value)
                .expect("every node's value has an entry");
            match copy.state {
                ShardState::Started => entry.active_shards += 1,
                ShardState::Initializing => {
                    entry.active_shards += 1;
                    entry.initializing_shards += 1;
                }
                ShardState::Relocating => entry.relocating_shards += 1,
                ShardState::Unassigned => {}
            }
        }
        values
    }
}

impl AwarenessValueHealth {
    fn empty() -> AwarenessValueHealth {
        AwarenessValueHealth {
            active_shards: 0,
            initializing_shards: 0,
            relocating_shards: 0,
            unassigned_shards: -1,
            data_nodes: 0,
            weight: 1.0,
        }
    }
}
