use serde_json::json;
use shoal_state::{HealthStatus, ShardState};

use super::*;
use crate::settings::AWARENESS_ATTRIBUTES;
use crate::test_support::*;

const FORCE_ZONE: &str = "cluster.routing.allocation.awareness.force.zone.values";

fn zone_of(state: &ClusterState, node: &str) -> String {
    state.nodes[node].attributes["zone"].clone()
}

#[test]
fn three_zones_get_one_copy_each_and_even_spread() {
    let mut state = cluster(three_zones());
    set_cluster_setting(&mut state, AWARENESS_ATTRIBUTES, json!("zone"));
    create_index(&mut state, 0, "idx", 6, 2, &[]);
    settle(&mut state, 0);

    assert_eq!(state.health(None).status, HealthStatus::Green);
    for shard in 0..6 {
        let zones: Vec<String> = state
            .copies("idx", shard)
            .iter()
            .map(|c| zone_of(&state, c.node.as_deref().expect("assigned")))
            .collect();
        let mut unique = zones.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(
            unique.len(),
            3,
            "shard {shard} has one copy per zone: {zones:?}"
        );
    }
    assert!(
        copies_per_node(&state).values().all(|n| *n == 6),
        "{:?}",
        copies_per_node(&state)
    );
    assert!(
        primaries_per_node(&state).values().all(|n| *n == 2),
        "{:?}",
        primaries_per_node(&state)
    );
}

/// Two nodes per zone so the survivors could hold the lost copies if awareness let them.
fn six_nodes_three_zones() -> ClusterState {
    let mut state = cluster(vec![
        data_node("n1", "a"),
        data_node("n2", "a"),
        data_node("n3", "b"),
        data_node("n4", "b"),
        data_node("n5", "c"),
        data_node("n6", "c"),
    ]);
    set_cluster_setting(&mut state, AWARENESS_ATTRIBUTES, json!("zone"));
    state
}

#[test]
fn forced_awareness_keeps_a_lost_zone_s_copies_unassigned() {
    let mut state = six_nodes_three_zones();
    set_cluster_setting(&mut state, FORCE_ZONE, json!(["a", "b", "c"]));
    create_index(&mut state, 0, "idx", 4, 2, &[]);
    settle(&mut state, 0);
    assert_eq!(state.health(None).status, HealthStatus::Green);

    node_left(&mut state, 1_000, "n5");
    node_left(&mut state, 1_000, "n6");
    // Well past the node-left delay: only awareness holds the copies back.
    settle(&mut state, 120_000);
    let unassigned = count_state(&state, ShardState::Unassigned);
    assert_eq!(unassigned, 4, "one copy of each shard was in zone c");
    assert!(
        statuses_of_unassigned(&state).iter().all(|s| s == "no"),
        "{:?}",
        statuses_of_unassigned(&state)
    );
    assert_eq!(state.health(None).status, HealthStatus::Yellow);
    for shard in 0..4 {
        let zones: Vec<String> = state
            .copies("idx", shard)
            .iter()
            .filter_map(|c| c.node.as_deref())
            .map(|n| zone_of(&state, n))
            .collect();
        assert_eq!(zones.len(), 2);
        assert_ne!(zones[0], zones[1], "survivors stay one per zone");
    }
}

#[test]
fn plain_awareness_rebuilds_a_lost_zone_on_the_survivors() {
    let mut state = six_nodes_three_zones();
    create_index(&mut state, 0, "idx", 4, 2, &[]);
    settle(&mut state, 0);

    node_left(&mut state, 1_000, "n5");
    node_left(&mut state, 1_000, "n6");
    // Within the delay the replicas wait for their nodes.
    crate::reroute(&mut state, 2_000);
    assert!(statuses_of_unassigned(&state)
        .iter()
        .all(|s| s == "delayed"));
    settle(&mut state, 120_000);
    assert_eq!(state.health(None).status, HealthStatus::Green);
    for shard in 0..4 {
        assert_eq!(
            state
                .copies("idx", shard)
                .iter()
                .filter(|c| c.node.is_some())
                .count(),
            3
        );
    }
    // Two zones left, three copies: at most ceil(3/2) = 2 per zone.
    for shard in 0..4 {
        let in_a = state
            .copies("idx", shard)
            .iter()
            .filter(|c| c.node.as_deref().map(|n| zone_of(&state, n)) == Some("a".into()))
            .count();
        assert!((1..=2).contains(&in_a));
    }
}

#[test]
fn awareness_health_counts_each_zone_s_copies_on_its_data_nodes() {
    let mut state = six_nodes_three_zones();
    set_cluster_setting(&mut state, FORCE_ZONE, json!(["a", "b", "c"]));
    create_index(&mut state, 0, "idx", 4, 2, &[]);
    settle(&mut state, 0);

    let health = state.awareness_health("zone");
    assert_eq!(health.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
    for value in health.values() {
        assert_eq!(
            (
                value.active_shards,
                value.initializing_shards,
                value.relocating_shards
            ),
            (4, 0, 0),
            "one copy of each of the 4 shards per zone"
        );
        assert_eq!((value.data_nodes, value.unassigned_shards), (2, -1));
        assert_eq!(value.weight, 1.0);
    }

    node_left(&mut state, 1_000, "n5");
    node_left(&mut state, 1_000, "n6");
    settle(&mut state, 120_000);
    let health = state.awareness_health("zone");
    assert_eq!(
        health.keys().collect::<Vec<_>>(),
        ["a", "b"],
        "a zone without data nodes has no entry"
    );
    assert!(
        health
            .values()
            .all(|v| (v.active_shards, v.data_nodes, v.unassigned_shards) == (4, 2, -1)),
        "{health:?}"
    );
    assert!(state.awareness_health("rack").is_empty());
}
