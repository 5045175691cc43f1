//! Broadcast operations (`_refresh`, `_flush`) whose copies change under them, placed exactly with
//! failpoints. Run with `cargo test -p shoal-test-cluster --features failpoints`.
#![cfg(feature = "failpoints")]

use std::time::Duration;

mod common;

use serde_json::{json, Value};
use shoal_test_cluster::TestCluster;

const HIT: Duration = Duration::from_secs(15);

/// Sends `POST path` from `coordinator` on a thread; the thread answers the 200 response's body.
fn post_in_background(
    cluster: &TestCluster,
    coordinator: usize,
    path: &'static str,
) -> std::thread::JoinHandle<Value> {
    let client = cluster.client(coordinator);
    std::thread::spawn(move || {
        let answer = client
            .request("POST", path, &json!({}))
            .expect("request answered");
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer.body
    })
}

/// Before, the replica closed by `number_of_replicas: 0` while a forced flush reached its
/// node answered `engine_closed_exception`, and the flush reported a failed shard to a
/// client that had done nothing wrong (OpenSearch leaves closing copies out of `failed`).
/// A refresh failed alike under load (a merge left its closed engine something to commit).
#[test]
fn a_broadcast_reaching_a_replica_that_is_being_removed_reports_no_failure() {
    let cluster = TestCluster::start(3);
    let (_, coordinator) = common::one_shard_and_a_spare_node(&cluster, "copies");
    let replica = cluster.replicas_of("copies", 0)[0];
    let paused = cluster.pause_at(replica, "broadcast_before_copies");
    let flush = post_in_background(&cluster, coordinator, "/copies/_flush?force=true");
    assert!(
        paused.wait_hits(1, HIT),
        "the flush never reached the replica's node"
    );

    let r = cluster
        .client(coordinator)
        .put(
            "/copies/_settings",
            &json!({"index": {"number_of_replicas": 0}}),
        )
        .expect("settings answered");
    assert_eq!(r.status, 200, "{}", r.body);
    cluster.wait_for(Duration::from_secs(30), "the replica to close", |c| match c
        .engine(replica, "copies", 0)
    {
        None => Ok(()),
        Some(_) => Err("the replica is still open".to_string()),
    });
    paused.release();

    let shards = flush.join().expect("flush thread")["_shards"].clone();
    assert_eq!(shards["failed"], 0, "{shards}");
    assert!(
        shards["successful"].as_u64() <= shards["total"].as_u64(),
        "{shards}"
    );
}

/// Before, a refresh during a relocation counted the target's copy as successful but not in
/// the total (`"total": 2, "successful": 3`).
#[test]
fn a_refresh_during_a_relocation_counts_the_target_in_its_total() {
    let cluster = TestCluster::start(3);
    let (primary, spare) = common::one_shard_and_a_spare_node(&cluster, "copies");
    let target_paused = cluster.pause_at(spare, "recovery_before_finalize");
    let name = cluster.slot(primary).name.clone();
    let r = cluster
        .client(spare)
        .put(
            "/_cluster/settings",
            &json!({"transient": {"cluster.routing.allocation.exclude._name": name}}),
        )
        .expect("settings answered");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        target_paused.wait_hits(1, HIT),
        "the relocation never started"
    );

    let answer = cluster
        .client(spare)
        .request("POST", "/copies/_refresh", &json!({}))
        .expect("refresh answered");
    target_paused.release();

    let shards = &answer.body["_shards"];
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        shards["total"], 3,
        "two copies and the relocation target: {shards}"
    );
    assert_eq!(shards["failed"], 0, "{shards}");
    assert!(
        shards["successful"].as_u64() <= shards["total"].as_u64(),
        "{shards}"
    );
}
