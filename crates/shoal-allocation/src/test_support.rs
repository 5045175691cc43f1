//! Builders for tests: nodes, states, indices, and driving a cluster until it settles.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use shoal_state::{
    ClusterState, Command, DiscoveryNode, IndexMetadata, IndexState, Proposal, Role, ShardRouting,
    ShardState,
};

use crate::context::{AllocationContext, RoutingStats};
use crate::settings::AllocationSettings;

/// A data node `id` (also its name) with `zone` set, on its own host and IP.
pub fn data_node(id: &str, zone: &str) -> DiscoveryNode {
    node_with(id, &[("zone", zone)])
}

/// Data nodes n1, n2, n3 in zones a, b, c.
pub fn three_zones() -> Vec<DiscoveryNode> {
    vec![
        data_node("n1", "a"),
        data_node("n2", "b"),
        data_node("n3", "c"),
    ]
}

pub fn node_with(id: &str, attributes: &[(&str, &str)]) -> DiscoveryNode {
    let n: u32 = id
        .chars()
        .filter(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or(1);
    DiscoveryNode {
        id: id.to_string(),
        ephemeral_id: String::new(),
        name: id.to_string(),
        transport_address: format!("10.0.0.{n}:9300"),
        http_address: format!("10.0.0.{n}:9200"),
        host: format!("host-{n}"),
        ip: format!("10.0.0.{n}"),
        roles: [Role::Data, Role::ClusterManager].into_iter().collect(),
        attributes: attributes
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        version: "2.18.0".to_string(),
    }
}

pub fn apply(state: &mut ClusterState, now: i64, command: Command) {
    state
        .apply(&Proposal {
            now_millis: now,
            command,
        })
        .expect("command applies");
}

pub fn cluster(nodes: Vec<DiscoveryNode>) -> ClusterState {
    let mut state = ClusterState::new("test");
    apply(
        &mut state,
        0,
        Command::Bootstrap {
            cluster_uuid: "uuid-test".into(),
            cluster_name: "test".into(),
            node_settings: Default::default(),
        },
    );
    for node in nodes {
        apply(&mut state, 0, Command::NodeJoin(node));
    }
    state
}

pub fn index_meta(name: &str, shards: u32, replicas: u32, extra: &[(&str, &str)]) -> IndexMetadata {
    let mut settings: BTreeMap<String, Value> = BTreeMap::new();
    settings.insert("index.number_of_shards".into(), json!(shards.to_string()));
    settings.insert(
        "index.number_of_replicas".into(),
        json!(replicas.to_string()),
    );
    for (k, v) in extra {
        settings.insert(k.to_string(), json!(v));
    }
    IndexMetadata {
        name: name.to_string(),
        uuid: format!("{name}-uuid"),
        state: IndexState::Open,
        settings,
        mappings: json!({}),
        aliases: BTreeMap::new(),
        primary_terms: Vec::new(),
        in_sync_allocations: Vec::new(),
        version: 1,
        mapping_version: 1,
        settings_version: 1,
        aliases_version: 1,
        restored_from: None,
    }
}

pub fn create_index(
    state: &mut ClusterState,
    now: i64,
    name: &str,
    shards: u32,
    replicas: u32,
    extra: &[(&str, &str)],
) {
    apply(
        state,
        now,
        Command::PutIndex {
            meta: index_meta(name, shards, replicas, extra),
            create: true,
        },
    );
}

pub fn set_cluster_setting(state: &mut ClusterState, key: &str, value: Value) {
    state
        .metadata
        .persistent_settings
        .insert(key.to_string(), value);
}

pub fn set_index_setting(state: &mut ClusterState, index: &str, key: &str, value: &str) {
    if let Some(meta) = state.metadata.indices.get_mut(index) {
        meta.settings.insert(key.to_string(), json!(value));
    }
}

/// Reports every initializing copy as started, as data nodes would.
pub fn start_initializing(state: &mut ClusterState, now: i64) -> usize {
    let started: Vec<(String, u32, String)> = state
        .all_copies()
        .filter(|c| c.state == ShardState::Initializing)
        .filter_map(|c| Some((c.index.clone(), c.shard, c.allocation_id.clone()?)))
        .collect();
    for (index, shard, allocation_id) in &started {
        apply(
            state,
            now,
            Command::ShardStarted {
                index: index.clone(),
                shard: *shard,
                allocation_id: allocation_id.clone(),
            },
        );
    }
    started.len()
}

/// Reroutes and starts recoveries until nothing changes; returns the number of rounds.
pub fn settle(state: &mut ClusterState, now: i64) -> usize {
    for round in 0..200 {
        let changed = crate::reroute(state, now);
        let started = start_initializing(state, now);
        if !changed && started == 0 {
            return round;
        }
    }
    panic!("allocation did not settle");
}

pub fn copies_on<'a>(state: &'a ClusterState, node: &'a str) -> Vec<&'a ShardRouting> {
    state.copies_on_node(node).collect()
}

pub fn count_state(state: &ClusterState, wanted: ShardState) -> usize {
    state.all_copies().filter(|c| c.state == wanted).count()
}

/// Runs `f` with a context over `state` (settings and counters derived from it).
pub fn with_ctx<R>(state: &ClusterState, f: impl FnOnce(&AllocationContext<'_>) -> R) -> R {
    let settings = AllocationSettings::from_state(state);
    let stats = RoutingStats::build(state);
    let ctx = AllocationContext {
        state,
        settings: &settings,
        stats: &stats,
        ignore_disable: false,
    };
    f(&ctx)
}

/// The copy at `position` of `index`/`shard`, cloned.
pub fn copy_at(state: &ClusterState, index: &str, shard: u32, position: usize) -> ShardRouting {
    state.copies(index, shard)[position].clone()
}
