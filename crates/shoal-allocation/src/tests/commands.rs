use shoal_state::{RerouteCommand, ShardState, UnassignedReason};

use super::*;
use crate::test_support::*;

fn two_nodes_one_replica() -> ClusterState {
    let mut state = cluster(three_zones());
    create_index(&mut state, 0, "idx", 1, 1, &[]);
    settle(&mut state, 0);
    state
}

fn run(
    state: &mut ClusterState,
    command: RerouteCommand,
) -> Result<Vec<serde_json::Value>, shoal_state::StateError> {
    crate::execute(state, &[command], false, 0)
}

fn holder(state: &ClusterState, primary: bool) -> String {
    state
        .copies("idx", 0)
        .iter()
        .find(|c| c.primary == primary)
        .and_then(|c| c.node.clone())
        .expect("assigned")
}

fn free_node(state: &ClusterState) -> String {
    let used = [holder(state, true), holder(state, false)];
    state
        .nodes
        .keys()
        .find(|n| !used.contains(n))
        .cloned()
        .expect("a free node")
}

fn move_cmd(from: &str, to: &str) -> RerouteCommand {
    RerouteCommand::Move {
        index: "idx".into(),
        shard: 0,
        from_node: from.into(),
        to_node: to.into(),
    }
}

#[test]
fn move_validation_and_success() {
    let mut state = two_nodes_one_replica();
    let (primary, replica, free) = (
        holder(&state, true),
        holder(&state, false),
        free_node(&state),
    );

    let err = run(&mut state, move_cmd("ghost", &free)).expect_err("unknown node");
    assert_eq!(
        (err.status, err.error_type.as_str()),
        (400, "illegal_argument_exception")
    );
    assert_eq!(err.reason, "failed to resolve [ghost], no matching nodes");

    let err = run(&mut state, move_cmd(&free, &primary)).expect_err("nothing there");
    assert!(
        err.reason
            .starts_with("[move_allocation] can't move 0, failed to find it on node {"),
        "{}",
        err.reason
    );

    let err = run(&mut state, move_cmd(&primary, &replica)).expect_err("same shard");
    assert!(
        err.reason
            .starts_with("[move_allocation] can't move 0, from {"),
        "{}",
        err.reason
    );
    assert!(
        err.reason
            .contains(", since its not allowed, reason: [YES(shard has no previous failures)]"),
        "{}",
        err.reason
    );
    assert!(
        err.reason
            .contains("[NO(a copy of this shard is already allocated to this node ["),
        "{}",
        err.reason
    );

    let explanations = run(&mut state, move_cmd(&primary, &free)).expect("move");
    assert_eq!(explanations[0]["command"], "move");
    assert_eq!(explanations[0]["parameters"]["to_node"], free.as_str());
    assert!(explanations[0]["decisions"]
        .as_array()
        .is_some_and(|d| !d.is_empty()));
    let source = state
        .copies("idx", 0)
        .iter()
        .find(|c| c.primary && c.state == ShardState::Relocating)
        .cloned();
    assert_eq!(source.and_then(|c| c.relocating_node), Some(free.clone()));

    let err = run(&mut state, move_cmd(&primary, &replica)).expect_err("not started");
    assert_eq!(
        err.reason,
        "[move_allocation] can't move 0, shard is not started (state = RELOCATING]"
    );
    start_initializing(&mut state, 0);
    assert_eq!(holder(&state, true), free);
}

#[test]
fn cancel_refuses_primaries_unless_allowed() {
    let mut state = two_nodes_one_replica();
    let (primary, replica) = (holder(&state, true), holder(&state, false));
    let cancel = |node: &str, allow_primary| RerouteCommand::Cancel {
        index: "idx".into(),
        shard: 0,
        node: node.into(),
        allow_primary,
    };
    let err = run(&mut state, cancel(&primary, false)).expect_err("primary");
    assert!(
        err.reason
            .starts_with("[cancel_allocation] can't cancel 0 on node {"),
        "{}",
        err.reason
    );
    assert!(
        err.reason.ends_with(", shard is primary and started"),
        "{}",
        err.reason
    );

    let explanations = run(&mut state, cancel(&replica, false)).expect("cancel");
    assert_eq!(
        explanations[0]["decisions"][0]["decider"],
        "cancel_allocation_command"
    );
    let cancelled = state
        .copies("idx", 0)
        .iter()
        .find(|c| !c.primary)
        .cloned()
        .expect("replica");
    assert_eq!(cancelled.state, ShardState::Unassigned);
    let info = cancelled.unassigned.expect("info");
    assert_eq!(info.reason, UnassignedReason::ReroutedCancelled);
    assert_eq!(info.details, None);

    let missing = RerouteCommand::Cancel {
        index: "nope".into(),
        shard: 0,
        node: primary.clone(),
        allow_primary: false,
    };
    let err = run(&mut state, missing).expect_err("no index");
    assert_eq!(
        (err.status, err.error_type.as_str()),
        (404, "index_not_found_exception")
    );
}

#[test]
fn allocate_replica_validation() {
    let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
    create_index(&mut state, 0, "idx", 1, 1, &[]);
    let allocate = |node: &str| RerouteCommand::AllocateReplica {
        index: "idx".into(),
        shard: 0,
        node: node.into(),
    };
    let err = run(&mut state, allocate("n2")).expect_err("primary unassigned");
    assert_eq!(
        err.reason,
        "[allocate_replica] trying to allocate a replica shard [idx][0], while corresponding primary shard is still unassigned"
    );
    crate::reroute(&mut state, 0);
    start_initializing(&mut state, 0);
    let err = run(&mut state, allocate("n1")).expect_err("same node");
    assert!(
        err.reason
            .starts_with("[allocate_replica] allocation of [idx][0] on node {n1}{n1}"),
        "{}",
        err.reason
    );
    assert!(
        err.reason.contains("is not allowed, reason: "),
        "{}",
        err.reason
    );

    let out = run(&mut state, allocate("n2")).expect("allocate");
    assert_eq!(out[0]["command"], "allocate_replica");
    assert_eq!(state.copies("idx", 0)[1].node.as_deref(), Some("n2"));
    let err = run(&mut state, allocate("n2")).expect_err("nothing left");
    assert_eq!(
        err.reason,
        "[allocate_replica] all copies of [idx][0] are already assigned. Use the move allocation command instead"
    );
    let err = run(
        &mut state,
        RerouteCommand::AllocateReplica {
            index: "idx".into(),
            shard: 7,
            node: "n2".into(),
        },
    )
    .expect_err("no shard");
    assert_eq!(
        (err.status, err.error_type.as_str()),
        (404, "shard_not_found_exception")
    );
}

#[test]
fn allocate_empty_primary_needs_accept_data_loss_for_lost_data() {
    let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
    create_index(&mut state, 0, "idx", 1, 0, &[]);
    settle(&mut state, 0);
    let holder = holder(&state, true);
    let other = if holder == "n1" { "n2" } else { "n1" };
    node_left(&mut state, 1_000, &holder);
    let empty = |accept| RerouteCommand::AllocateEmptyPrimary {
        index: "idx".into(),
        shard: 0,
        node: other.into(),
        accept_data_loss: accept,
    };
    let err = run(&mut state, empty(false)).expect_err("data loss");
    assert_eq!(
        err.reason,
        "[allocate_empty_primary] allocating an empty primary for [idx][0] can result in data loss. Please confirm by \
         setting the accept_data_loss parameter to true"
    );
    let stale = RerouteCommand::AllocateStalePrimary {
        index: "idx".into(),
        shard: 0,
        node: other.into(),
        accept_data_loss: true,
    };
    let before = state.clone();
    // All or nothing: the second command fails, so the first is not applied either.
    let err = crate::execute(&mut state, &[empty(true), stale], false, 1_000)
        .expect_err("already assigned");
    assert_eq!(
        err.reason,
        "[allocate_stale_primary] primary [idx][0] is already assigned"
    );
    assert_eq!(state, before);

    run(&mut state, empty(true)).expect("forced");
    let primary = state.copies("idx", 0)[0].clone();
    assert_eq!(primary.node.as_deref(), Some(other));
    let info = primary.unassigned.expect("info");
    assert_eq!(info.reason, UnassignedReason::ForcedEmptyPrimary);
    assert!(info.details.is_some_and(
        |d| d.starts_with("force empty allocation from previous reason NODE_LEFT, node_left [")
    ));
}
