use serde_json::json;
use shoal_state::{Command, DiskUsage, HealthStatus, ShardState};

use super::*;
use crate::context::RoutingStats;
use crate::settings::{CONCURRENT_RECOVERIES, READ_ONLY_ALLOW_DELETE};
use crate::test_support::*;

#[test]
fn exclude_drains_a_node_and_keeps_copies_apart() {
    let mut state = cluster(three_zones());
    create_index(&mut state, 0, "idx", 3, 1, &[]);
    settle(&mut state, 0);
    assert!(copies_per_node(&state).get("n3").copied().unwrap_or(0) > 0);

    set_cluster_setting(
        &mut state,
        "cluster.routing.allocation.exclude._name",
        json!("n3"),
    );
    let mut max_relocating = 0;
    for _ in 0..20 {
        crate::reroute(&mut state, 0);
        max_relocating = max_relocating.max(count_state(&state, ShardState::Relocating));
        let stats = RoutingStats::build(&state);
        assert!(stats
            .nodes
            .values()
            .all(|n| n.outgoing <= 2 && n.incoming <= 2));
        start_initializing(&mut state, 0);
    }
    assert!(max_relocating > 0);
    assert_eq!(
        copies_per_node(&state).get("n3"),
        None,
        "{:?}",
        copies_per_node(&state)
    );
    assert_eq!(state.health(None).status, HealthStatus::Green);
    for shard in 0..3 {
        let nodes: Vec<_> = state
            .copies("idx", shard)
            .iter()
            .filter_map(|c| c.node.clone())
            .collect();
        assert_eq!(nodes.len(), 2);
        assert_ne!(nodes[0], nodes[1]);
    }
}

#[test]
fn a_new_node_is_filled_within_the_concurrent_rebalance_limit() {
    let mut state = cluster(three_zones());
    create_index(&mut state, 0, "idx", 6, 1, &[]);
    settle(&mut state, 0);
    assert!(copies_per_node(&state).values().all(|n| *n == 4));

    apply(&mut state, 0, Command::NodeJoin(data_node("n4", "d")));
    crate::reroute(&mut state, 0);
    assert_eq!(
        count_state(&state, ShardState::Relocating),
        2,
        "cluster_concurrent_rebalance = 2"
    );
    for _ in 0..20 {
        start_initializing(&mut state, 0);
        crate::reroute(&mut state, 0);
        assert!(count_state(&state, ShardState::Relocating) <= 2);
    }
    assert_eq!(
        copies_per_node(&state)
            .values()
            .copied()
            .collect::<Vec<_>>(),
        vec![3, 3, 3, 3]
    );
    let primaries = primaries_per_node(&state);
    assert!(
        primaries.values().all(|n| (1..=2).contains(n)),
        "primaries spread too: {primaries:?}"
    );
    for shard in 0..6 {
        let nodes: Vec<_> = state
            .copies("idx", shard)
            .iter()
            .filter_map(|c| c.node.clone())
            .collect();
        assert_ne!(nodes[0], nodes[1]);
    }
}

#[test]
fn node_concurrent_recoveries_throttles_rebuilding_replicas() {
    let mut state = cluster(three_zones());
    create_index(
        &mut state,
        0,
        "idx",
        6,
        1,
        &[("index.unassigned.node_left.delayed_timeout", "0s")],
    );
    settle(&mut state, 0);
    set_cluster_setting(&mut state, CONCURRENT_RECOVERIES, json!(1));

    node_left(&mut state, 1_000, "n3");
    crate::reroute(&mut state, 1_000);
    let stats = RoutingStats::build(&state);
    assert!(
        stats
            .nodes
            .values()
            .all(|n| n.incoming <= 1 && n.outgoing <= 1),
        "{stats:?}"
    );
    assert!(count_state(&state, ShardState::Initializing) <= 2);
    assert!(statuses_of_unassigned(&state)
        .iter()
        .any(|s| s == "throttled"));

    let rounds = settle(&mut state, 1_000);
    assert!(
        rounds >= 2,
        "throttling spreads the recoveries over several rounds"
    );
    assert_eq!(state.health(None).status, HealthStatus::Green);
}

fn report_disk(state: &mut ClusterState, node: &str, used_percent: u64) {
    let usage = DiskUsage {
        total_bytes: 100 << 30,
        available_bytes: (100 - used_percent) << 30,
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

#[test]
fn high_watermark_moves_copies_away_and_flood_stage_blocks_writes() {
    let mut state = cluster(three_zones());
    create_index(&mut state, 0, "idx", 2, 0, &[]);
    settle(&mut state, 0);
    let on_n1 = copies_per_node(&state).get("n1").copied().unwrap_or(0);
    assert!(on_n1 > 0);
    for node in ["n2", "n3"] {
        report_disk(&mut state, node, 20);
    }
    report_disk(&mut state, "n1", 96);
    settle(&mut state, 0);
    assert_eq!(
        copies_per_node(&state).get("n1"),
        None,
        "above high: everything leaves n1"
    );
    // The block was set while a copy was on n1, and lifted once n1 held nothing.
    assert_eq!(
        state.metadata.indices["idx"].setting(READ_ONLY_ALLOW_DELETE),
        None
    );

    // A node past flood stage blocks the indices it holds.
    report_disk(&mut state, "n2", 97);
    crate::reroute(&mut state, 0);
    assert_eq!(
        state.metadata.indices["idx"]
            .setting(READ_ONLY_ALLOW_DELETE)
            .as_deref(),
        Some("true")
    );
    report_disk(&mut state, "n1", 10);
    report_disk(&mut state, "n2", 10);
    settle(&mut state, 0);
    assert_eq!(
        state.metadata.indices["idx"].setting(READ_ONLY_ALLOW_DELETE),
        None
    );
}

#[test]
fn prefer_primary_spreads_primaries_when_rebalancing() {
    let mut state = cluster(three_zones());
    set_cluster_setting(
        &mut state,
        "cluster.routing.allocation.balance.prefer_primary",
        json!(true),
    );
    create_index(&mut state, 0, "idx", 6, 1, &[]);
    settle(&mut state, 0);
    apply(&mut state, 0, Command::NodeJoin(data_node("n4", "d")));
    settle(&mut state, 0);
    assert_eq!(
        copies_per_node(&state)
            .values()
            .copied()
            .collect::<Vec<_>>(),
        vec![3, 3, 3, 3]
    );
    let primaries = primaries_per_node(&state);
    assert!(
        primaries.values().all(|n| (1..=2).contains(n)),
        "{primaries:?}"
    );
}
