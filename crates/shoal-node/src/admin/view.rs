//! The narrow read handle REST handlers get on a cluster state: what they render (nodes,
//! copies, health, which nodes a selector names) without the state itself, so the state's
//! layout can change without touching REST. `_cluster/state` itself is rendered here
//! ([`ClusterView::to_json`]), as OpenSearch's `ClusterState.toXContent` is.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use shoal_state::health::ClusterHealth;
use shoal_state::{ClusterState, DiscoveryNode, ShardRouting};

use crate::index_service::IndexService;
use crate::metadata::IndexMetadataExt;

/// A cluster state as REST may read it: the one this node applied (`AdminService::view`), or
/// one a reroute computed (a dry run is never published).
#[derive(Clone)]
pub struct ClusterView(Arc<ClusterState>, ManagerKnown);

/// Whether the node reading a state still knows the cluster manager that state names. A node
/// that lost it keeps its last applied state; OpenSearch's node then applies one with no
/// manager, and every `local=true` read shows none.
#[derive(Clone, Copy)]
pub(crate) struct ManagerKnown(pub bool);

impl ClusterView {
    /// A state whose cluster manager is known: confirmed by it, or computed from it.
    pub(crate) fn new(state: Arc<ClusterState>) -> ClusterView {
        ClusterView(state, ManagerKnown(true))
    }

    /// This node's applied state, as it knows its cluster manager now.
    pub(crate) fn applied(state: Arc<ClusterState>, known: ManagerKnown) -> ClusterView {
        ClusterView(state, known)
    }

    /// The state itself, for the node's own code (never REST).
    pub(crate) fn state(&self) -> &ClusterState {
        &self.0
    }

    /// The cluster state's version (`wait_for_metadata_version` waits on it).
    pub fn version(&self) -> u64 {
        self.0.version
    }

    /// Every node of the cluster, by id.
    pub fn nodes(&self) -> impl Iterator<Item = &DiscoveryNode> {
        self.0.nodes.values()
    }

    pub fn node_ids(&self) -> Vec<String> {
        self.0.nodes.keys().cloned().collect()
    }

    pub fn node(&self, id: &str) -> Option<&DiscoveryNode> {
        self.0.nodes.get(id)
    }

    /// The elected cluster manager's id, if there is one this node knows.
    pub fn cluster_manager(&self) -> Option<&str> {
        self.0.cluster_manager.as_deref().filter(|_| self.1 .0)
    }

    /// Health of the cluster, or of the given indices.
    pub fn health(&self, indices: Option<&[String]>) -> ClusterHealth {
        self.0.health(indices)
    }

    /// `awareness_attributes` of `_cluster/health?level=awareness_attributes`: for `attribute`,
    /// or for every attribute of `cluster.routing.allocation.awareness.attributes`, each
    /// value's copies.
    pub fn awareness_health_json(&self, attribute: Option<&str>) -> Value {
        let attributes = match attribute {
            Some(one) => vec![one.to_string()],
            None => shoal_allocation::AllocationSettings::from_state(&self.0).awareness_attributes,
        };
        let health: Map<String, Value> = attributes
            .into_iter()
            .map(|attr| {
                let values = self.0.awareness_health(&attr);
                (attr, json!(values))
            })
            .collect();
        Value::Object(health)
    }

    /// Every shard copy of every index.
    pub fn all_copies(&self) -> impl Iterator<Item = &ShardRouting> {
        self.0.all_copies()
    }

    /// The copies of one shard.
    pub fn copies(&self, index: &str, shard: u32) -> &[ShardRouting] {
        self.0.copies(index, shard)
    }

    /// The copies of every shard of an index, by shard number (empty: no routing for it).
    pub fn shard_copies(&self, index: &str) -> &[Vec<ShardRouting>] {
        self.0
            .routing
            .get(index)
            .map(|table| table.shards.as_slice())
            .unwrap_or(&[])
    }

    /// Whether the routing table has the index.
    pub fn has_routing(&self, index: &str) -> bool {
        self.0.routing.contains_key(index)
    }

    /// The ids of the nodes `selectors` name (see [`crate::core::node_selectors`]).
    pub fn resolve_node_selectors(&self, local_id: &str, selectors: &[String]) -> Vec<String> {
        crate::core::node_selectors::resolve_node_selectors(&self.0, local_id, selectors)
    }

    /// `ClusterState.toXContent` for the comma-separated `metrics` (`_all` for all), the
    /// metadata and routing table limited to `services`. `blocks` and the voting
    /// configurations come from the node that renders it.
    pub(crate) fn to_json(
        &self,
        request: &super::StateRequest<'_>,
        services: &[Arc<IndexService>],
        blocks: impl FnOnce() -> Value,
        voting_configs: (Vec<String>, Vec<String>),
    ) -> Value {
        let state = self.state();
        let metrics: Vec<&str> = request.metrics.split(',').map(str::trim).collect();
        let want = |m: &str| metrics.iter().any(|x| *x == "_all" || *x == m);
        let mut body = json!({"cluster_uuid": state.cluster_uuid});
        if want("version") {
            body["version"] = json!(state.version);
            body["state_uuid"] = json!(format!("{}-{}", state.cluster_uuid, state.version));
        }
        if want("master_node") {
            body["master_node"] = json!(self.cluster_manager());
        }
        if want("cluster_manager_node") {
            body["cluster_manager_node"] = json!(self.cluster_manager());
        }
        if want("blocks") {
            body["blocks"] = blocks();
        }
        if want("nodes") {
            body["nodes"] = self.nodes_json();
        }
        if want("metadata") {
            body["metadata"] = self.metadata_json(services, voting_configs, request.flat_settings);
        }
        if want("routing_table") {
            body["routing_table"] = self.routing_table_json(services);
        }
        if want("routing_nodes") {
            body["routing_nodes"] = self.routing_nodes_json();
        }
        body
    }

    fn nodes_json(&self) -> Value {
        let nodes: Map<String, Value> = self
            .nodes()
            .map(|d| {
                (
                    d.id.clone(),
                    json!({"name": d.name, "ephemeral_id": d.ephemeral_id,
                "transport_address": d.transport_address, "attributes": d.attributes}),
                )
            })
            .collect();
        Value::Object(nodes)
    }

    fn metadata_json(
        &self,
        services: &[Arc<IndexService>],
        (committed, accepted): (Vec<String>, Vec<String>),
        flat_settings: bool,
    ) -> Value {
        let state = self.state();
        let render = |settings: &crate::settings::FlatSettings,
                      nest: fn(&crate::settings::FlatSettings) -> Value| {
            match flat_settings {
                true => json!(settings),
                false => nest(settings),
            }
        };
        let indices: Map<String, Value> = services
            .iter()
            .map(|s| {
                let (m, mapping) = s.meta_and_mapping();
                (m.name.clone(), json!({
                    "version": m.version, "mapping_version": m.mapping_version, "settings_version": m.settings_version,
                    "aliases_version": m.aliases_version, "routing_num_shards": m.settings().routing_num_shards(),
                    "state": m.state.as_str(), "settings": render(&m.settings, crate::settings::nest_settings_opensearch),
                    "mappings": {"_doc": mapping.to_json()}, "aliases": m.aliases.keys().collect::<Vec<_>>(),
                    "primary_terms": m.primary_terms.iter().enumerate().map(|(i, t)| (i.to_string(), json!(t))).collect::<Map<String, Value>>(),
                    "in_sync_allocations": state.metadata.indices.get(&m.name).map(|sm| {
                        sm.in_sync_allocations.iter().enumerate().map(|(i, ids)| (i.to_string(), json!(ids))).collect::<Map<String, Value>>()
                    }).unwrap_or_default()
                }))
            })
            .collect();
        let exclusions: Vec<Value> = state
            .metadata
            .voting_config_exclusions
            .iter()
            .map(|e| json!({"node_id": e.node_id, "node_name": e.node_name}))
            .collect();
        json!({"cluster_uuid": state.cluster_uuid, "cluster_uuid_committed": true,
            "cluster_coordination": {"term": state.term, "last_committed_config": committed,
                "last_accepted_config": accepted, "voting_config_exclusions": exclusions},
            "persistent_settings": render(&state.metadata.persistent_settings, crate::settings::nest_settings),
            "transient_settings": render(&state.metadata.transient_settings, crate::settings::nest_settings),
            "indices": indices})
    }

    fn routing_table_json(&self, services: &[Arc<IndexService>]) -> Value {
        let indices: Map<String, Value> = services
            .iter()
            .filter_map(|s| {
                let name = s.name();
                let table = self.state().routing.get(&name)?;
                let shards: Map<String, Value> = table
                    .shards
                    .iter()
                    .enumerate()
                    // A relocation target is only in `routing_nodes`, as in OpenSearch.
                    .map(|(shard, copies)| {
                        (
                            shard.to_string(),
                            Value::Array(
                                copies
                                    .iter()
                                    .filter(|c| c.relocation_target_of().is_none())
                                    .map(routing_json)
                                    .collect(),
                            ),
                        )
                    })
                    .collect();
                Some((name, json!({"shards": shards})))
            })
            .collect();
        json!({"indices": indices})
    }

    /// `routing_nodes`: unassigned copies, then the copies of every data node.
    fn routing_nodes_json(&self) -> Value {
        let state = self.state();
        let unassigned: Vec<Value> = state
            .all_copies()
            .filter(|c| c.node.is_none())
            .map(routing_json)
            .collect();
        let nodes: Map<String, Value> = state
            .nodes
            .values()
            .filter(|n| n.is_data())
            .map(|n| {
                (
                    n.id.clone(),
                    Value::Array(state.copies_on_node(&n.id).map(routing_json).collect()),
                )
            })
            .collect();
        json!({"unassigned": unassigned, "nodes": nodes})
    }
}

/// One shard copy as `ShardRouting.toXContent` prints it.
fn routing_json(copy: &ShardRouting) -> Value {
    let mut v = json!({"state": copy.state.as_str(), "primary": copy.primary, "node": copy.node,
        "relocating_node": copy.relocating_node, "shard": copy.shard, "index": copy.index});
    if let Some(source) = copy.recovery_source {
        let kind = match source {
            shoal_state::RecoverySource::EmptyStore => "EMPTY_STORE",
            shoal_state::RecoverySource::ExistingStore => "EXISTING_STORE",
            shoal_state::RecoverySource::Peer => "PEER",
            shoal_state::RecoverySource::RemoteStore => "REMOTE_STORE",
            shoal_state::RecoverySource::Snapshot => "SNAPSHOT",
        };
        v["recovery_source"] = json!({"type": kind});
    }
    if let Some(id) = &copy.allocation_id {
        v["allocation_id"] = json!({"id": id});
    }
    if let Some(info) = &copy.unassigned {
        let mut unassigned = json!({"reason": info.reason.as_str(),
            "at": shoal_mapping::date::format_iso(info.at_millis), "delayed": info.delayed,
            "allocation_status": info.last_allocation_status});
        if info.failed_allocations > 0 {
            unassigned["failed_attempts"] = json!(info.failed_allocations);
        }
        if let Some(details) = &info.details {
            unassigned["details"] = json!(details);
        }
        v["unassigned_info"] = unassigned;
    }
    v
}
