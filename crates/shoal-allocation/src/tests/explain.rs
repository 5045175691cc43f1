use serde_json::{json, Value};
use shoal_state::ShardState;

use super::*;
use crate::explain::ExplainRequest;
use crate::settings::AWARENESS_ATTRIBUTES;
use crate::test_support::*;

fn request(index: &str, shard: u32, primary: bool) -> ExplainRequest {
    ExplainRequest {
        index: Some(index.into()),
        shard: Some(shard),
        primary: Some(primary),
        current_node: None,
    }
}

fn deciders_of(node_decision: &Value) -> Vec<(String, String, String)> {
    node_decision["deciders"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|d| {
                    (
                        d["decider"].as_str().unwrap_or_default().to_string(),
                        d["decision"].as_str().unwrap_or_default().to_string(),
                        d["explanation"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn an_unassigned_replica_blocked_by_same_shard() {
    let mut state = cluster(vec![data_node("n1", "a")]);
    create_index(&mut state, 1_714_564_800_000, "idx", 1, 1, &[]);
    settle(&mut state, 1_714_564_800_000);

    let out = crate::explain(&state, &ExplainRequest::default(), false, 0).expect("explain");
    assert_eq!(out["index"], "idx");
    assert_eq!(out["primary"], false);
    assert_eq!(out["current_state"], "unassigned");
    assert_eq!(
        out["unassigned_info"],
        json!({"reason": "INDEX_CREATED", "at": "2024-05-01T12:00:00.000Z", "last_allocation_status": "no"})
    );
    assert_eq!(out["can_allocate"], "no");
    assert_eq!(
        out["allocate_explanation"],
        "cannot allocate because allocation is not permitted to any of the nodes"
    );
    let nodes = out["node_allocation_decisions"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0]["node_id"], "n1");
    assert_eq!(nodes[0]["node_name"], "n1");
    assert_eq!(nodes[0]["transport_address"], "10.0.0.1:9300");
    assert_eq!(nodes[0]["node_attributes"], json!({"zone": "a"}));
    assert_eq!(nodes[0]["node_decision"], "no");
    let deciders = deciders_of(&nodes[0]);
    assert_eq!(
        deciders.len(),
        1,
        "YES decisions are left out: {deciders:?}"
    );
    assert_eq!(deciders[0].0, "same_shard");
    assert_eq!(deciders[0].1, "NO");
    assert!(deciders[0].2.starts_with("a copy of this shard is already allocated to this node [[idx][0], node[n1], [P], s[STARTED], a[id="));

    let with_yes = crate::explain(&state, &request("idx", 0, false), true, 0).expect("explain");
    let all = deciders_of(&with_yes["node_allocation_decisions"][0]);
    assert!(all.len() > 5, "include_yes_decisions lists every decider");
    assert!(all
        .iter()
        .any(|d| d.0 == "max_retry" && d.2 == "shard has no previous failures"));
}

#[test]
fn an_unassigned_replica_blocked_by_forced_awareness() {
    let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
    set_cluster_setting(&mut state, AWARENESS_ATTRIBUTES, json!("zone"));
    set_cluster_setting(
        &mut state,
        "cluster.routing.allocation.awareness.force.zone.values",
        json!("a,b,c"),
    );
    create_index(&mut state, 0, "idx", 1, 2, &[]);
    settle(&mut state, 0);
    assert_eq!(count_state(&state, ShardState::Unassigned), 1);

    let out = crate::explain(&state, &request("idx", 0, false), false, 0).expect("explain");
    assert_eq!(out["current_state"], "unassigned");
    assert_eq!(out["can_allocate"], "no");
    let nodes = out["node_allocation_decisions"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 2);
    for node in nodes {
        let deciders = deciders_of(node);
        let awareness = deciders
            .iter()
            .find(|d| d.0 == "awareness")
            .expect("awareness says no");
        assert_eq!(
            awareness.2,
            "there are too many copies of the shard allocated to nodes with attribute [zone], there are [3] total \
             configured shard copies for this shard id and [3] total attribute values, expected the allocated shard \
             count per attribute [2] to be less than or equal to the upper bound of the required number of shards per \
             attribute [1]"
        );
    }
}

#[test]
fn started_copies_explain_remaining_and_rebalancing() {
    let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
    create_index(&mut state, 0, "idx", 2, 0, &[]);
    settle(&mut state, 0);
    let out = crate::explain(&state, &request("idx", 0, true), false, 0).expect("explain");
    assert_eq!(out["current_state"], "started");
    assert_eq!(out["current_node"]["id"], "n1");
    assert_eq!(out["current_node"]["weight_ranking"], 1);
    assert_eq!(out["can_remain_on_current_node"], "yes");
    assert_eq!(out["can_rebalance_cluster"], "yes");
    assert_eq!(out["can_rebalance_to_other_node"], "no");
    assert_eq!(
        out["rebalance_explanation"],
        "cannot rebalance as no target node exists that can both allocate this shard and improve the cluster balance"
    );
    assert_eq!(
        out["node_allocation_decisions"][0]["node_decision"],
        "worse_balance"
    );

    set_cluster_setting(
        &mut state,
        "cluster.routing.allocation.exclude._id",
        json!("n1"),
    );
    let out = crate::explain(&state, &request("idx", 0, true), false, 0).expect("explain");
    assert_eq!(out["can_remain_on_current_node"], "no");
    assert_eq!(out["can_remain_decisions"][0]["decider"], "filter");
    assert_eq!(out["can_move_to_other_node"], "yes");
    assert_eq!(
        out["move_explanation"],
        "shard cannot remain on this node and is force-moved to another node"
    );
    assert_eq!(out["target_node"]["id"], "n2");
}

#[test]
fn delayed_and_lost_copies_and_request_errors() {
    let mut state = cluster(three_zones());
    create_index(&mut state, 0, "idx", 1, 1, &[]);
    settle(&mut state, 0);
    let err = crate::explain(&state, &ExplainRequest::default(), false, 0)
        .expect_err("nothing unassigned");
    assert_eq!(err.status, 400);
    assert_eq!(
        err.reason,
        "unable to find any unassigned shards to explain [ClusterAllocationExplainRequest[useAnyUnassignedShard=true,\
         include_yes_decisions?=false]]"
    );

    node_left(&mut state, 1_000, "n2");
    crate::reroute(&mut state, 1_000);
    let out = crate::explain(&state, &ExplainRequest::default(), false, 1_100).expect("explain");
    assert_eq!(out["can_allocate"], "allocation_delayed");
    assert_eq!(out["configured_delay_in_millis"], 60_000);
    assert_eq!(out["remaining_delay_in_millis"], 59_900);
    assert_eq!(
        out["allocate_explanation"],
        "cannot allocate because the cluster is still waiting 59.9s for the departed node holding a replica to rejoin, \
         despite being allowed to allocate the shard to at least one other node"
    );
    assert_eq!(out["unassigned_info"]["reason"], "NODE_LEFT");
    assert_eq!(
        out["unassigned_info"]["details"],
        "node_left [n2]: disconnected"
    );

    node_left(&mut state, 2_000, "n1");
    crate::reroute(&mut state, 2_000);
    let out = crate::explain(&state, &request("idx", 0, true), false, 2_000).expect("explain");
    assert_eq!(out["can_allocate"], "no_valid_shard_copy");
    assert_eq!(
        out["allocate_explanation"],
        "cannot allocate because a previous copy of the primary shard existed but can no longer be found on the nodes in the cluster"
    );

    let err =
        crate::explain(&state, &request("nope", 0, true), false, 0).expect_err("missing index");
    assert_eq!(
        (err.status, err.error_type.as_str()),
        (404, "index_not_found_exception")
    );
    let partial = ExplainRequest {
        index: Some("idx".into()),
        ..ExplainRequest::default()
    };
    let err = crate::explain(&state, &partial, false, 0).expect_err("incomplete");
    assert_eq!(
        err.reason,
        "Validation Failed: 1: shard must be specified;2: primary must be specified;"
    );
}
