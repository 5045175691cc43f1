//! The cluster state: the one value every node agrees on through Raft.
//!
//! It holds the nodes, the index metadata (settings, mappings, aliases, primary terms and in-sync
//! copies), the routing table of every shard copy and the cluster settings. The state only changes
//! by applying a [`Proposal`] — a [`Command`] stamped with the cluster manager's clock — and applying
//! is deterministic, so every node that applies the same log holds the same state. Shard placement
//! (`shoal-allocation`) runs after each applied command, under the same rule.

mod apply;
mod command;
pub mod health;
mod metadata;
mod node;
mod remote_store;
mod routing;
mod settings;
mod snapshots;

pub use apply::{StateError, STALE_INDEX_METADATA};
pub use command::{Command, PromotionChoice, Proposal, RerouteCommand, VotingExclusion};
pub use health::{ClusterHealth, HealthStatus, IndexHealth, ShardHealth};
pub use metadata::{
    AliasMetadata, IndexMetadata, IndexMetadataMap, IndexState, Metadata, RestorableMetadata,
    REMOTE_STATE_CHECKED,
};
pub use node::{DiscoveryNode, DiskUsage, Role};
pub use routing::{
    IndexRoutingTable, RecoverySource, ShardRouting, ShardState, UnassignedInfo, UnassignedReason,
};
pub use settings::{list_value, parse_duration_millis, split_list, SettingsView};
pub use snapshots::{
    RepositoryMetadata, SnapshotInProgress, SnapshotOperation, SnapshotRecoverySource,
};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The cluster state. `version` grows by one with every applied command that changed something.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterState {
    pub cluster_name: String,
    /// Empty until the cluster is bootstrapped.
    pub cluster_uuid: String,
    pub version: u64,
    /// The node id of the elected cluster manager (the Raft leader), and its Raft term.
    pub cluster_manager: Option<String>,
    pub term: u64,
    pub nodes: BTreeMap<String, DiscoveryNode>,
    pub metadata: Metadata,
    /// Index name → the copies of each of its shards.
    pub routing: BTreeMap<String, IndexRoutingTable>,
    /// Latest disk usage reported per node (input of the disk watermark decider).
    pub disk_usage: BTreeMap<String, DiskUsage>,
    /// Source of deterministic allocation ids.
    pub next_allocation_seq: u64,
    /// Snapshot operations running (at most one per repository).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub snapshots: Vec<SnapshotInProgress>,
}

impl ClusterState {
    pub fn new(cluster_name: &str) -> ClusterState {
        ClusterState {
            cluster_name: cluster_name.to_string(),
            ..ClusterState::default()
        }
    }

    /// Effective cluster settings (transient over persistent) with registry defaults supplied by
    /// the caller's `SettingsView`.
    pub fn settings(&self) -> SettingsView<'_> {
        SettingsView::new(&self.metadata)
    }

    pub fn node_by_name(&self, name: &str) -> Option<&DiscoveryNode> {
        self.nodes.values().find(|n| n.name == name)
    }

    /// A node by id or by name (reroute commands and `_only_nodes` accept both).
    pub fn resolve_node(&self, id_or_name: &str) -> Option<&DiscoveryNode> {
        self.nodes
            .get(id_or_name)
            .or_else(|| self.node_by_name(id_or_name))
    }

    /// Every shard copy of every index.
    pub fn all_copies(&self) -> impl Iterator<Item = &ShardRouting> {
        self.routing
            .values()
            .flat_map(|t| t.shards.iter().flat_map(|copies| copies.iter()))
    }

    /// The copies assigned to a node (including relocation targets).
    pub fn copies_on_node<'a>(
        &'a self,
        node_id: &'a str,
    ) -> impl Iterator<Item = &'a ShardRouting> {
        self.all_copies()
            .filter(move |c| c.node.as_deref() == Some(node_id))
    }

    /// The shard's current primary term (`None`: no such index or shard).
    pub fn primary_term(&self, index: &str, shard: u32) -> Option<u64> {
        self.metadata
            .indices
            .get(index)?
            .primary_terms
            .get(shard as usize)
            .copied()
    }

    pub fn primary(&self, index: &str, shard: u32) -> Option<&ShardRouting> {
        self.routing
            .get(index)?
            .shards
            .get(shard as usize)?
            .iter()
            .find(|c| c.primary && c.relocation_target_of().is_none())
    }

    pub fn copies(&self, index: &str, shard: u32) -> &[ShardRouting] {
        self.routing
            .get(index)
            .and_then(|t| t.shards.get(shard as usize))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    pub fn copies_mut(&mut self, index: &str, shard: u32) -> Option<&mut Vec<ShardRouting>> {
        self.routing
            .get_mut(index)
            .and_then(|t| t.shards.get_mut(shard as usize))
    }

    /// A fresh allocation id; deterministic so every node applying the log agrees on it.
    pub fn new_allocation_id(&mut self) -> String {
        self.next_allocation_seq += 1;
        allocation_id(&self.cluster_uuid, self.next_allocation_seq)
    }
}

/// 22 url-safe characters, like OpenSearch's allocation ids, derived from the cluster uuid and a
/// counter (splitmix64 twice).
fn allocation_id(cluster_uuid: &str, seq: u64) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let seed = fnv1a(cluster_uuid);
    let mut a = splitmix64(seed ^ seq);
    let mut b = splitmix64(a ^ seq.rotate_left(17));
    let mut out = String::with_capacity(22);
    for i in 0..22 {
        let word = if i < 11 { &mut a } else { &mut b };
        out.push(ALPHABET[(*word & 63) as usize] as char);
        *word >>= 6;
    }
    out
}

fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// A node's id in the Raft group: derived from its persistent node id, so it is stable across
/// restarts and never needs storing.
pub fn raft_id_of(node_id: &str) -> u64 {
    fnv1a(node_id).max(2) >> 1
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
