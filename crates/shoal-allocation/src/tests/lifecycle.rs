use serde_json::json;
use shoal_state::{Command, HealthStatus, RecoverySource, ShardState};

use super::*;
use crate::test_support::*;

#[test]
fn a_lost_primary_is_replaced_by_its_replica_and_the_replica_rebuilt() {
    let mut state = cluster(three_zones());
    create_index(
        &mut state,
        0,
        "idx",
        1,
        1,
        &[("index.unassigned.node_left.delayed_timeout", "0s")],
    );
    settle(&mut state, 0);
    let old_primary_node = state
        .primary("idx", 0)
        .and_then(|p| p.node.clone())
        .expect("primary");
    let replica_node = state
        .copies("idx", 0)
        .iter()
        .find(|c| !c.primary)
        .and_then(|c| c.node.clone())
        .expect("replica");
    let term = state.metadata.indices["idx"].primary_terms[0];

    node_left(&mut state, 1_000, &old_primary_node);
    let promoted = state.primary("idx", 0).expect("promoted");
    assert_eq!(promoted.node.as_deref(), Some(replica_node.as_str()));
    assert_eq!(promoted.state, ShardState::Started);
    assert_eq!(state.metadata.indices["idx"].primary_terms[0], term + 1);

    crate::reroute(&mut state, 1_000);
    let rebuilt = state
        .copies("idx", 0)
        .iter()
        .find(|c| !c.primary)
        .cloned()
        .expect("replica");
    assert_eq!(rebuilt.state, ShardState::Initializing);
    assert_eq!(rebuilt.recovery_source, Some(RecoverySource::Peer));
    assert_ne!(rebuilt.node, Some(replica_node));
    assert_ne!(rebuilt.node, Some(old_primary_node));
    settle(&mut state, 1_000);
    assert_eq!(state.health(None).status, HealthStatus::Green);
}

#[test]
fn the_cluster_managers_choice_of_the_most_caught_up_copy_is_promoted() {
    let mut state = cluster(three_zones());
    create_index(&mut state, 0, "idx", 1, 2, &[]);
    settle(&mut state, 0);
    let old_primary_node = state
        .primary("idx", 0)
        .and_then(|p| p.node.clone())
        .expect("primary");
    // The last replica in routing order: not the one promoted without a choice.
    let chosen = state
        .copies("idx", 0)
        .iter()
        .rev()
        .find(|c| !c.primary)
        .cloned()
        .expect("replica");
    let promote = vec![shoal_state::PromotionChoice {
        index: "idx".into(),
        shard: 0,
        allocation_id: chosen.allocation_id.clone().expect("id"),
    }];
    apply(
        &mut state,
        1_000,
        Command::NodeLeft {
            node_id: old_primary_node.clone(),
            reason: "disconnected".into(),
            promote,
        },
    );
    let promoted = state.primary("idx", 0).expect("promoted");
    assert_eq!(promoted.allocation_id, chosen.allocation_id);
    assert_eq!(promoted.node, chosen.node);
}

#[test]
fn a_choice_that_is_not_in_sync_any_more_falls_back_to_the_first_eligible_copy() {
    let mut state = cluster(three_zones());
    create_index(&mut state, 0, "idx", 1, 1, &[]);
    settle(&mut state, 0);
    let old_primary_node = state
        .primary("idx", 0)
        .and_then(|p| p.node.clone())
        .expect("primary");
    let replica = state
        .copies("idx", 0)
        .iter()
        .find(|c| !c.primary)
        .cloned()
        .expect("replica");
    apply(
        &mut state,
        1_000,
        Command::NodeLeft {
            node_id: old_primary_node,
            reason: "disconnected".into(),
            promote: vec![shoal_state::PromotionChoice {
                index: "idx".into(),
                shard: 0,
                allocation_id: "not-a-copy".into(),
            }],
        },
    );
    let promoted = state.primary("idx", 0).expect("promoted");
    assert_eq!(promoted.allocation_id, replica.allocation_id);
}

#[test]
fn an_existing_primary_waits_for_its_node_and_reopens_there() {
    let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
    create_index(&mut state, 0, "idx", 1, 0, &[]);
    settle(&mut state, 0);
    let holder = state
        .primary("idx", 0)
        .and_then(|p| p.node.clone())
        .expect("assigned");
    let node = state.nodes[&holder].clone();
    let term = state.metadata.indices["idx"].primary_terms[0];

    node_left(&mut state, 1_000, &holder);
    settle(&mut state, 500_000);
    let primary = state.primary("idx", 0).cloned().expect("primary");
    assert_eq!(
        primary.state,
        ShardState::Unassigned,
        "its data is only on the node that left"
    );
    assert_eq!(
        primary
            .unassigned
            .as_ref()
            .map(|u| u.last_allocation_status.as_str()),
        Some("no_valid_shard_copy")
    );
    assert_eq!(state.health(None).status, HealthStatus::Red);

    apply(&mut state, 600_000, Command::NodeJoin(node));
    crate::reroute(&mut state, 600_000);
    let primary = state.primary("idx", 0).cloned().expect("primary");
    assert_eq!(primary.node.as_deref(), Some(holder.as_str()));
    assert_eq!(primary.recovery_source, Some(RecoverySource::ExistingStore));
    assert_eq!(state.metadata.indices["idx"].primary_terms[0], term + 1);
}

#[test]
fn repeated_failures_stop_at_max_retries_until_retry_failed() {
    let mut state = cluster(vec![data_node("n1", "a")]);
    create_index(
        &mut state,
        0,
        "idx",
        1,
        0,
        &[("index.allocation.max_retries", "3")],
    );
    for attempt in 1..=3 {
        crate::reroute(&mut state, 0);
        let copy = state.copies("idx", 0)[0].clone();
        assert_eq!(copy.state, ShardState::Initializing, "attempt {attempt}");
        apply(
            &mut state,
            0,
            Command::ShardFailed {
                index: "idx".into(),
                shard: 0,
                allocation_id: copy.allocation_id.expect("id"),
                reason: "disk broke".into(),
                primary_term: None,
            },
        );
    }
    crate::reroute(&mut state, 0);
    let copy = state.copies("idx", 0)[0].clone();
    assert_eq!(copy.state, ShardState::Unassigned);
    let info = copy.unassigned.expect("info");
    assert_eq!(
        (
            info.failed_allocations,
            info.last_allocation_status.as_str()
        ),
        (3, "no")
    );

    crate::execute(&mut state, &[], true, 0).expect("retry_failed");
    crate::reroute(&mut state, 0);
    assert_eq!(state.copies("idx", 0)[0].state, ShardState::Initializing);
}

/// The same commands applied to two copies of a cluster give identical states.
#[test]
fn allocation_is_deterministic() {
    let run = || {
        let mut state = cluster(three_zones());
        set_cluster_setting(
            &mut state,
            "cluster.routing.allocation.awareness.attributes",
            json!("zone"),
        );
        create_index(&mut state, 0, "logs", 5, 1, &[]);
        create_index(&mut state, 0, "metrics", 3, 2, &[]);
        settle(&mut state, 0);
        apply(&mut state, 10, Command::NodeJoin(data_node("n4", "a")));
        settle(&mut state, 10);
        node_left(&mut state, 20, "n2");
        settle(&mut state, 100_000);
        state
    };
    let (first, second) = (run(), run());
    assert_eq!(first, second);
    assert_eq!(
        serde_json::to_string(&first).expect("json"),
        serde_json::to_string(&second).expect("json")
    );
    assert_eq!(first.health(None).status, HealthStatus::Green);
}

/// A 1-shard, 1-replica index on three nodes with its replica relocating to the free node.
fn replica_relocating() -> (ClusterState, String, String, String) {
    let mut state = cluster(three_zones());
    create_index(
        &mut state,
        0,
        "idx",
        1,
        1,
        &[("index.unassigned.node_left.delayed_timeout", "0s")],
    );
    settle(&mut state, 0);
    let node_of = |state: &ClusterState, primary: bool| {
        state
            .copies("idx", 0)
            .iter()
            .find(|c| c.primary == primary)
            .and_then(|c| c.node.clone())
            .expect("assigned")
    };
    let (primary, replica) = (node_of(&state, true), node_of(&state, false));
    let free = state
        .nodes
        .keys()
        .find(|n| **n != primary && **n != replica)
        .cloned()
        .expect("a free node");
    let command = shoal_state::RerouteCommand::Move {
        index: "idx".into(),
        shard: 0,
        from_node: replica.clone(),
        to_node: free.clone(),
    };
    crate::execute(&mut state, &[command], false, 0).expect("move");
    assert_eq!(state.copies("idx", 0).len(), 3, "source and target");
    (state, primary, replica, free)
}

#[test]
fn a_relocating_replica_is_promoted_when_the_primary_is_lost_and_its_target_goes() {
    let (mut state, primary, replica, _) = replica_relocating();
    let term = state.metadata.indices["idx"].primary_terms[0];

    node_left(&mut state, 1_000, &primary);
    let promoted = state.primary("idx", 0).cloned().expect("promoted");
    assert_eq!(promoted.node.as_deref(), Some(replica.as_str()));
    assert_eq!(promoted.state, ShardState::Started);
    assert_eq!(promoted.relocating_node, None);
    assert_eq!(state.metadata.indices["idx"].primary_terms[0], term + 1);
    assert_eq!(
        state.copies("idx", 0).len(),
        2,
        "one primary and one replica, no leftover relocation target"
    );
    settle(&mut state, 1_000);
    assert_eq!(state.health(None).status, HealthStatus::Green);
}

#[test]
fn a_lost_primary_with_no_in_sync_replica_ends_the_replicas_relocation() {
    let (mut state, primary, replica, _) = replica_relocating();
    // The replica is out of sync (its copy failed earlier, say): nothing can be promoted.
    let replica_id = state
        .copies("idx", 0)
        .iter()
        .find(|c| c.node.as_deref() == Some(replica.as_str()))
        .and_then(|c| c.allocation_id.clone())
        .expect("replica id");
    state
        .metadata
        .indices
        .get_mut("idx")
        .unwrap()
        .in_sync_allocations[0]
        .remove(&replica_id);

    node_left(&mut state, 1_000, &primary);
    let copies = state.copies("idx", 0);
    assert_eq!(copies.len(), 2, "{copies:?}");
    assert!(copies
        .iter()
        .all(|c| c.state != ShardState::Relocating && c.relocation_target_of().is_none()));
    assert_eq!(
        state.primary("idx", 0).map(|p| p.state),
        Some(ShardState::Unassigned)
    );
}

#[test]
fn a_node_that_restarted_before_it_was_removed_gets_its_copies_recovered_again() {
    let mut state = cluster(three_zones());
    create_index(&mut state, 0, "idx", 1, 1, &[]);
    settle(&mut state, 0);
    let replica = state
        .copies("idx", 0)
        .iter()
        .find(|c| !c.primary)
        .cloned()
        .expect("replica");
    let node_id = replica.node.clone().expect("assigned");
    let same_incarnation = state.nodes[&node_id].clone();
    apply(
        &mut state,
        1_000,
        Command::NodeJoin(same_incarnation.clone()),
    );
    assert_eq!(
        state
            .copies("idx", 0)
            .iter()
            .filter(|c| c.is_active())
            .count(),
        2
    );

    let mut restarted = same_incarnation;
    restarted.ephemeral_id = "after-restart".into();
    apply(&mut state, 2_000, Command::NodeJoin(restarted));
    let copies = state.copies("idx", 0);
    assert!(
        copies
            .iter()
            .all(|c| c.allocation_id != replica.allocation_id || !c.is_active()),
        "the copy from before the restart is no longer active: {copies:?}"
    );
    assert!(!state.metadata.indices["idx"].in_sync_allocations[0]
        .contains(replica.allocation_id.as_deref().unwrap()));
    assert!(state.nodes.contains_key(&node_id), "the node is back");
}

#[test]
fn an_index_metadata_update_made_on_a_stale_copy_is_refused_not_applied() {
    let mut state = cluster(vec![data_node("n1", "a")]);
    create_index(&mut state, 0, "idx", 1, 0, &[]);
    let stale = state.metadata.indices["idx"].clone();
    let mut seen_elsewhere = stale.clone();
    seen_elsewhere
        .settings
        .insert("index.refresh_interval".into(), serde_json::json!("5s"));
    seen_elsewhere.version += 1;
    apply(
        &mut state,
        0,
        shoal_state::Command::PutIndex {
            meta: seen_elsewhere,
            create: false,
        },
    );
    // A node that had not applied that update edits its old copy.
    let mut edited = stale;
    edited.version += 1;
    let refused = state
        .apply(&shoal_state::Proposal {
            now_millis: 0,
            command: shoal_state::Command::PutIndex {
                meta: edited,
                create: false,
            },
        })
        .unwrap_err();
    assert_eq!(refused.error_type, shoal_state::STALE_INDEX_METADATA);
    assert_eq!(
        state.metadata.indices["idx"].settings["index.refresh_interval"],
        serde_json::json!("5s")
    );
}

/// A node whose disk was replaced comes back with a new id on its old address: the old
/// incarnation's copies leave the state with it (promoted elsewhere or unassigned), never
/// kept STARTED on a node the state no longer lists.
#[test]
fn a_new_node_on_an_old_nodes_address_takes_the_old_nodes_copies_out() {
    let mut state = cluster(three_zones());
    create_index(&mut state, 0, "logs", 3, 1, &[]);
    settle(&mut state, 0);
    let old = state.nodes["n2"].clone();
    let mut replacement = data_node("n2-new", "b");
    replacement.transport_address = old.transport_address.clone();
    apply(&mut state, 10, Command::NodeJoin(replacement));
    assert!(!state.nodes.contains_key("n2"));
    for copies in state.routing["logs"].shards.iter() {
        for copy in copies {
            assert_ne!(
                copy.node.as_deref(),
                Some("n2"),
                "a copy stayed on the old node: {copy:?}"
            );
        }
    }
    settle(&mut state, 100_000);
    assert_eq!(state.health(None).status, HealthStatus::Green);
}
