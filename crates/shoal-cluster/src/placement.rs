//! Shard placement run after every applied command.
//!
//! This is the minimal placement the cluster runs today: unassigned primaries first (an
//! existing-store primary only back on the node that holds its data), replicas only once their
//! primary is active, never two copies of a shard on one node, least-loaded data node first.
//! The full allocator — deciders (awareness, filters, disk watermarks, throttling), balancer,
//! rebalancing, reroute commands and explain — is `shoal-allocation`, being written to
//! replace this module (see issue 4's note).

use std::collections::BTreeMap;

use shoal_state::{ClusterState, RecoverySource, RerouteCommand, ShardState, StateError};

/// Assigns what can be assigned; deterministic (ordered maps, no clock, no randomness).
pub fn reroute(state: &mut ClusterState) {
    let mut load: BTreeMap<String, usize> = state
        .nodes
        .values()
        .filter(|n| n.is_data())
        .map(|n| (n.id.clone(), 0))
        .collect();
    if load.is_empty() {
        return;
    }
    for copy in state.all_copies() {
        if let Some(count) = copy.node.as_ref().and_then(|n| load.get_mut(n)) {
            *count += 1;
        }
    }
    let indices: Vec<String> = state.routing.keys().cloned().collect();
    for index in indices {
        let shards = state.routing[&index].shards.len();
        for shard in 0..shards {
            let copies = state.routing[&index].shards[shard].len();
            for position in 0..copies {
                if let Some(node) = pick_node(state, &index, shard, position, &load) {
                    *load.get_mut(&node).expect("a data node") += 1;
                    assign(state, &index, shard, position, node);
                }
            }
        }
    }
}

fn pick_node(
    state: &ClusterState,
    index: &str,
    shard: usize,
    position: usize,
    load: &BTreeMap<String, usize>,
) -> Option<String> {
    let copies = &state.routing[index].shards[shard];
    let copy = &copies[position];
    if copy.state != ShardState::Unassigned {
        return None;
    }
    if copy.unassigned.as_ref().is_some_and(|u| u.delayed) {
        return None;
    }
    let primary_active = copies.iter().any(|c| c.primary && c.is_active());
    if !copy.primary && !primary_active {
        return None;
    }
    if copy.primary && copy.recovery_source == Some(RecoverySource::ExistingStore) {
        return copy
            .unassigned
            .as_ref()
            .and_then(|u| u.last_node.clone())
            .filter(|n| load.contains_key(n));
    }
    let used: Vec<&str> = copies.iter().filter_map(|c| c.node.as_deref()).collect();
    load.iter()
        .filter(|(node, _)| !used.contains(&node.as_str()))
        .min_by_key(|(node, count)| (**count, (*node).clone()))
        .map(|(node, _)| node.clone())
}

fn assign(state: &mut ClusterState, index: &str, shard: usize, position: usize, node: String) {
    let allocation_id = state.new_allocation_id();
    let existing_store = {
        let copy = &state.routing[index].shards[shard][position];
        copy.primary && copy.recovery_source == Some(RecoverySource::ExistingStore)
    };
    let copy = &mut state.routing.get_mut(index).expect("index").shards[shard][position];
    copy.state = ShardState::Initializing;
    copy.node = Some(node);
    copy.allocation_id = Some(allocation_id);
    if !copy.primary {
        copy.recovery_source = Some(RecoverySource::Peer);
    }
    if existing_store {
        if let Some(meta) = state.metadata.indices.get_mut(index) {
            meta.normalize();
            meta.primary_terms[shard] += 1;
        }
    }
}

/// `POST /_cluster/reroute` is not served until `shoal-allocation` lands: refuse commands
/// clearly instead of ignoring them.
pub fn execute(
    _state: &mut ClusterState,
    commands: &[RerouteCommand],
    _retry_failed: bool,
) -> Result<(), StateError> {
    if commands.is_empty() {
        return Ok(());
    }
    Err(StateError::new(
        400,
        "illegal_argument_exception",
        "reroute commands are not supported yet",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_state::{Command, DiscoveryNode, IndexMetadata, Proposal, Role};

    fn node(id: &str) -> DiscoveryNode {
        DiscoveryNode {
            id: id.into(),
            name: id.into(),
            raft_id: 1,
            transport_address: format!("{id}:9300"),
            http_address: String::new(),
            host: id.into(),
            ip: id.into(),
            roles: [Role::Data].into_iter().collect(),
            attributes: Default::default(),
            version: String::new(),
        }
    }

    fn create(state: &mut ClusterState, shards: u32, replicas: u32) {
        let meta = IndexMetadata {
            name: "i".into(),
            uuid: "u".into(),
            state: Default::default(),
            settings: [
                (
                    "index.number_of_shards".to_string(),
                    serde_json::json!(shards.to_string()),
                ),
                (
                    "index.number_of_replicas".to_string(),
                    serde_json::json!(replicas.to_string()),
                ),
            ]
            .into_iter()
            .collect(),
            mappings: serde_json::json!({}),
            aliases: Default::default(),
            primary_terms: vec![],
            in_sync_allocations: vec![],
            version: 1,
            mapping_version: 1,
            settings_version: 1,
            aliases_version: 1,
        };
        let p = Proposal {
            now_millis: 0,
            command: Command::PutIndex { meta, create: true },
        };
        state.apply(&p).unwrap();
    }

    fn start_all(state: &mut ClusterState) {
        let initializing: Vec<_> = state
            .all_copies()
            .filter(|c| c.state == ShardState::Initializing)
            .map(|c| (c.index.clone(), c.shard, c.allocation_id.clone().unwrap()))
            .collect();
        for (index, shard, allocation_id) in initializing {
            let p = Proposal {
                now_millis: 0,
                command: Command::ShardStarted {
                    index,
                    shard,
                    allocation_id,
                },
            };
            state.apply(&p).unwrap();
        }
    }

    #[test]
    fn primaries_spread_evenly_and_replicas_wait_for_their_primary() {
        let mut state = ClusterState::new("t");
        for id in ["a", "b", "c"] {
            state.nodes.insert(id.into(), node(id));
        }
        create(&mut state, 6, 1);
        reroute(&mut state);
        let assigned: Vec<_> = state.all_copies().filter(|c| c.node.is_some()).collect();
        assert_eq!(assigned.len(), 6, "only primaries before they start");
        assert!(assigned.iter().all(|c| c.primary));
        start_all(&mut state);
        reroute(&mut state);
        let mut per_node = BTreeMap::new();
        for c in state.all_copies() {
            *per_node.entry(c.node.clone().unwrap()).or_insert(0) += 1;
        }
        assert_eq!(
            per_node.values().copied().collect::<Vec<_>>(),
            vec![4, 4, 4]
        );
        for copies in &state.routing["i"].shards {
            assert_ne!(
                copies[0].node, copies[1].node,
                "never two copies on one node"
            );
        }
    }

    #[test]
    fn a_lost_single_copy_primary_only_returns_to_its_node() {
        let mut state = ClusterState::new("t");
        state.nodes.insert("a".into(), node("a"));
        create(&mut state, 1, 0);
        reroute(&mut state);
        start_all(&mut state);
        let left = Proposal {
            now_millis: 1,
            command: Command::NodeLeft {
                node_id: "a".into(),
                reason: "test".into(),
            },
        };
        state.apply(&left).unwrap();
        state.nodes.insert("b".into(), node("b"));
        reroute(&mut state);
        assert_eq!(
            state.routing["i"].shards[0][0].state,
            ShardState::Unassigned
        );
        state.nodes.insert("a".into(), node("a"));
        reroute(&mut state);
        let primary = &state.routing["i"].shards[0][0];
        assert_eq!(primary.node.as_deref(), Some("a"));
        assert_eq!(state.metadata.indices["i"].primary_terms[0], 2);
    }
}
