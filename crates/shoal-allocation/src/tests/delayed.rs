use shoal_state::{Command, HealthStatus, ShardState};

use super::*;
use crate::test_support::*;

fn three_nodes_settled() -> ClusterState {
    let mut state = cluster(three_zones());
    create_index(&mut state, 0, "idx", 3, 1, &[]);
    settle(&mut state, 0);
    state
}

fn copies_last_on(state: &ClusterState, node: &str) -> Vec<(u32, bool)> {
    state
        .all_copies()
        .filter(|c| c.unassigned.as_ref().and_then(|u| u.last_node.as_deref()) == Some(node))
        .map(|c| (c.shard, c.state == ShardState::Unassigned))
        .collect()
}

#[test]
fn delayed_replicas_wait_for_the_timeout() {
    let mut state = three_nodes_settled();
    let lost = copies_per_node(&state)["n3"];
    node_left(&mut state, 10_000, "n3");
    crate::reroute(&mut state, 10_000);
    assert_eq!(count_state(&state, ShardState::Unassigned), lost);
    assert_eq!(count_state(&state, ShardState::Initializing), 0);
    assert!(statuses_of_unassigned(&state)
        .iter()
        .all(|s| s == "delayed"));
    assert_eq!(
        state.health(None).counts.delayed_unassigned_shards as usize,
        lost
    );

    assert_eq!(crate::next_delay_expiry(&state), Some(70_000));
    crate::reroute(&mut state, 69_999);
    assert_eq!(
        count_state(&state, ShardState::Initializing),
        0,
        "still within the 1m delay"
    );
    assert!(crate::reroute(&mut state, 70_000), "the delay expired");
    assert_eq!(crate::next_delay_expiry(&state), None);
    assert_eq!(count_state(&state, ShardState::Initializing), lost);
    settle(&mut state, 70_000);
    assert_eq!(state.health(None).status, HealthStatus::Green);
}

#[test]
fn a_returning_node_gets_its_copies_back() {
    let mut state = three_nodes_settled();
    let n3 = state.nodes["n3"].clone();
    let lost = copies_per_node(&state)["n3"];
    node_left(&mut state, 10_000, "n3");
    crate::reroute(&mut state, 10_000);
    assert_eq!(copies_last_on(&state, "n3").len(), lost);

    apply(&mut state, 20_000, Command::NodeJoin(n3));
    crate::reroute(&mut state, 20_000);
    let back: Vec<_> = state.copies_on_node("n3").collect();
    assert_eq!(
        back.len(),
        lost,
        "every copy went back to the node holding its data"
    );
    assert!(back
        .iter()
        .all(|c| c.state == ShardState::Initializing && !c.primary));
    assert!(back
        .iter()
        .all(|c| c.unassigned.as_ref().is_some_and(|u| !u.delayed)));
    settle(&mut state, 20_000);
    assert_eq!(copies_per_node(&state)["n3"], lost);
}
