//! Index metadata and cluster-wide settings.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

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

impl IndexState {
    /// The name OpenSearch renders (`_cluster/state`, `_cat/indices`).
    pub fn as_str(self) -> &'static str {
        match self {
            IndexState::Open => "open",
            IndexState::Close => "close",
        }
    }
}

/// An alias of one index. Serializes to the body OpenSearch renders under `aliases`: only the
/// fields that are set, routing always split into index and search routing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AliasMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_routing: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_routing: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_write_index: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_hidden: Option<bool>,
}

impl AliasMetadata {
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("an alias serializes")
    }
}

/// Everything the cluster knows about one index: the one index metadata type. A node keeps the
/// value of its applied state (shared, see [`IndexMetadataMap`]) and derives from it what it
/// must not recompute per request (the parsed mapping).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexMetadata {
    pub name: String,
    pub uuid: String,
    pub state: IndexState,
    /// Flat settings (`index.number_of_shards` → `"3"`) as given, plus `index.uuid`,
    /// `index.creation_date`, `index.provided_name`, `index.version.created`.
    pub settings: BTreeMap<String, Value>,
    /// The mapping as `Mapping::to_json` renders it; bumped with `mapping_version`.
    pub mappings: Value,
    #[serde(default)]
    pub aliases: BTreeMap<String, AliasMetadata>,
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
    /// On an index created by a snapshot restore: where its primaries take their files from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<crate::snapshots::SnapshotRecoverySource>,
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
    pub indices: IndexMetadataMap,
    #[serde(default)]
    pub voting_config_exclusions: Vec<VotingExclusion>,
    /// Room for what later features keep in the state (weighted routing, decommission, CCR).
    #[serde(default)]
    pub customs: BTreeMap<String, Value>,
    /// Snapshot repositories by name (`PUT _snapshot/{name}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub repositories: BTreeMap<String, crate::snapshots::RepositoryMetadata>,
}

/// What a cluster keeps of its metadata in a remote state repository, to come back after
/// the loss of every node: its indices and persistent settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestorableMetadata {
    pub cluster_uuid: String,
    pub persistent_settings: BTreeMap<String, Value>,
    pub indices: Vec<IndexMetadata>,
}

/// The key in [`Metadata::customs`] that records that a cluster looked for remote metadata.
pub const REMOTE_STATE_CHECKED: &str = "remote_cluster_state";

impl Metadata {
    /// The part of the metadata a remote state repository keeps.
    pub fn restorable(&self, cluster_uuid: &str) -> RestorableMetadata {
        RestorableMetadata {
            cluster_uuid: cluster_uuid.to_string(),
            persistent_settings: self.persistent_settings.clone(),
            indices: self.indices.values().map(|m| m.as_ref().clone()).collect(),
        }
    }
}

/// The metadata of every index by name. Each entry is shared between successive cluster states
/// and with the nodes that installed it: a command that changes one index copies that index's
/// metadata alone ([`IndexMetadataMap::get_mut`] copies on write), so a node can keep the
/// `Arc` of its applied state instead of a copy. Serializes as a plain map.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IndexMetadataMap(BTreeMap<String, Arc<IndexMetadata>>);

impl IndexMetadataMap {
    pub fn get(&self, name: &str) -> Option<&IndexMetadata> {
        self.0.get(name).map(Arc::as_ref)
    }

    /// The shared value itself, for a node that keeps what it applied.
    pub fn get_shared(&self, name: &str) -> Option<&Arc<IndexMetadata>> {
        self.0.get(name)
    }

    /// The metadata of `name` to edit: copied first when another state or a node shares it.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut IndexMetadata> {
        self.0.get_mut(name).map(Arc::make_mut)
    }

    pub fn insert(&mut self, name: String, meta: IndexMetadata) -> Option<Arc<IndexMetadata>> {
        self.0.insert(name, Arc::new(meta))
    }

    pub fn remove(&mut self, name: &str) -> Option<Arc<IndexMetadata>> {
        self.0.remove(name)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.keys()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Arc<IndexMetadata>)> {
        self.0.iter()
    }

    pub fn values(&self) -> impl Iterator<Item = &Arc<IndexMetadata>> {
        self.0.values()
    }
}

impl<'a> IntoIterator for &'a IndexMetadataMap {
    type Item = (&'a String, &'a Arc<IndexMetadata>);
    type IntoIter = std::collections::btree_map::Iter<'a, String, Arc<IndexMetadata>>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl std::ops::Index<&str> for IndexMetadataMap {
    type Output = IndexMetadata;

    fn index(&self, name: &str) -> &IndexMetadata {
        &self.0[name]
    }
}

impl FromIterator<(String, IndexMetadata)> for IndexMetadataMap {
    fn from_iter<I: IntoIterator<Item = (String, IndexMetadata)>>(iter: I) -> Self {
        IndexMetadataMap(iter.into_iter().map(|(k, v)| (k, Arc::new(v))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(name: &str) -> IndexMetadata {
        serde_json::from_value(json!({
            "name": name, "uuid": format!("{name}-uuid"), "state": "open",
            "settings": {"index.number_of_shards": "1"}, "mappings": {}, "primary_terms": [1]
        }))
        .expect("index metadata")
    }

    #[test]
    fn an_alias_reads_and_writes_the_shape_the_state_always_stored() {
        let stored = json!({"filter": {"term": {"user": "kimchy"}}, "index_routing": "1",
            "search_routing": "1,2", "is_write_index": true, "is_hidden": false});
        let alias: AliasMetadata = serde_json::from_value(stored.clone()).expect("alias");
        assert_eq!(alias.search_routing.as_deref(), Some("1,2"));
        assert_eq!(alias.is_write_index, Some(true));
        assert_eq!(alias.to_json(), stored);
        // Fields not set are left out, as OpenSearch renders an alias.
        assert_eq!(AliasMetadata::default().to_json(), json!({}));
        let routed: AliasMetadata = serde_json::from_value(json!({"index_routing": "3"})).unwrap();
        assert_eq!(routed.to_json(), json!({"index_routing": "3"}));
    }

    #[test]
    fn editing_one_index_copies_that_index_alone() {
        let mut indices: IndexMetadataMap = [("a".to_string(), meta("a")), ("b".into(), meta("b"))]
            .into_iter()
            .collect();
        let before = indices.clone();
        indices.get_mut("a").expect("a").version += 1;
        let shared = |m: &IndexMetadataMap, name: &str| m.get_shared(name).unwrap().clone();
        assert!(!Arc::ptr_eq(&shared(&before, "a"), &shared(&indices, "a")));
        assert!(Arc::ptr_eq(&shared(&before, "b"), &shared(&indices, "b")));
        assert_eq!(before["a"].version + 1, indices["a"].version);
    }

    #[test]
    fn the_index_map_serializes_as_a_plain_map() {
        let indices: IndexMetadataMap = [("a".to_string(), meta("a"))].into_iter().collect();
        let json = serde_json::to_value(&indices).expect("serializes");
        assert_eq!(json["a"]["uuid"], "a-uuid");
        assert_eq!(json["a"]["aliases"], json!({}));
        let back: IndexMetadataMap = serde_json::from_value(json).expect("deserializes");
        assert_eq!(back, indices);
    }
}
