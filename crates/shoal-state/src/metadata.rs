//! Index metadata and cluster-wide settings.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::command::VotingExclusion;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexState {
    #[default]
    Open,
    Close,
}

/// Everything the cluster knows about one index. Serializes to the JSON shape of the node's
/// `IndexMetadata::to_json`, plus the in-sync allocation ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexMetadata {
    pub name: String,
    pub uuid: String,
    pub state: IndexState,
    /// Flat settings (`index.number_of_shards` → `"3"`).
    pub settings: BTreeMap<String, Value>,
    pub mappings: Value,
    #[serde(default)]
    pub aliases: BTreeMap<String, Value>,
    /// Primary term per shard; bumped whenever a new primary is chosen.
    pub primary_terms: Vec<u64>,
    /// Allocation ids of the copies that hold every acknowledged write, per shard.
    #[serde(default)]
    pub in_sync_allocations: Vec<BTreeSet<String>>,
    #[serde(default = "one")]
    pub version: u64,
    #[serde(default = "one")]
    pub mapping_version: u64,
    #[serde(default = "one")]
    pub settings_version: u64,
    #[serde(default = "one")]
    pub aliases_version: u64,
}

fn one() -> u64 {
    1
}

impl IndexMetadata {
    pub fn setting(&self, key: &str) -> Option<String> {
        self.settings.get(key).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }

    pub fn number_of_shards(&self) -> u32 {
        self.setting("index.number_of_shards")
            .and_then(|s| s.parse().ok())
            .unwrap_or(1)
    }

    pub fn number_of_replicas(&self) -> u32 {
        self.setting("index.number_of_replicas")
            .and_then(|s| s.parse().ok())
            .unwrap_or(1)
    }

    /// `index.unassigned.node_left.delayed_timeout` in milliseconds (default 1m).
    pub fn node_left_delay_millis(&self) -> i64 {
        self.setting("index.unassigned.node_left.delayed_timeout")
            .and_then(|s| crate::parse_duration_millis(&s))
            .unwrap_or(60_000)
    }

    /// Makes sure `primary_terms` and `in_sync_allocations` have one entry per shard.
    pub fn normalize(&mut self) {
        let shards = self.number_of_shards() as usize;
        self.primary_terms.resize(shards, 1);
        self.in_sync_allocations.resize(shards, BTreeSet::new());
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    pub persistent_settings: BTreeMap<String, Value>,
    pub transient_settings: BTreeMap<String, Value>,
    /// Cluster settings from the bootstrapping node's own configuration (see
    /// `Command::Bootstrap`): consulted after transient and persistent settings.
    #[serde(default)]
    pub node_settings: BTreeMap<String, Value>,
    pub indices: BTreeMap<String, IndexMetadata>,
    #[serde(default)]
    pub voting_config_exclusions: Vec<VotingExclusion>,
    /// Room for what later features keep in the state (weighted routing, decommission, CCR).
    #[serde(default)]
    pub customs: BTreeMap<String, Value>,
}
