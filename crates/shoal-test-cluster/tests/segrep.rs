//! Segment replication under faults, on nodes in this process: a replica that cannot copy
//! segments falls behind, its primary refuses writes once the replica is stale (429, as
//! OpenSearch's `segrep.pressure.*`), and takes them again once the replica catches up; a
//! lost primary is replaced by the replica that installed the newest checkpoint.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use shoal_test_cluster::{Client, TestCluster};

const GREEN: Duration = Duration::from_secs(60);

fn create_segment_index(client: &Client) {
    client.create_index(
        "pressed",
        &json!({"settings": {"number_of_shards": 1, "number_of_replicas": 1,
            "index.replication.type": "SEGMENT", "index.refresh_interval": "100ms"}}),
    );
}

/// Writes one document at a time until one answers with `status`; the answer's body.
fn write_until(client: &Client, status: u16, within: Duration, first: &mut u64) -> Option<Value> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        *first += 1;
        let answer = client
            .index_doc("pressed", &format!("d{first}"), &json!({"n": *first}))
            .expect("the node answers");
        if answer.status == status {
            return Some(answer.body);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn a_primary_refuses_writes_while_its_segment_replica_is_stale_and_takes_them_once_it_caught_up() {
    let cluster = TestCluster::start(3);
    let client = cluster.client(0);
    create_segment_index(&client);
    cluster.wait_green(GREEN);
    client
        .put(
            "/_cluster/settings",
            &json!({"persistent": {"segrep.pressure.enabled": true,
                "segrep.pressure.checkpoint.limit": 1, "segrep.pressure.time.limit": "1s"}}),
        )
        .expect("settings")
        .ok();
    let primary = cluster.primary_of("pressed", 0).expect("a primary");
    let replica = cluster.replicas_of("pressed", 0)[0];
    let writer = cluster.client(primary);
    let mut n = 0;
    assert!(write_until(&writer, 201, Duration::from_secs(5), &mut n).is_some());

    // The replica can no longer fetch checkpoints: every publication leaves it further behind.
    cluster.drop_action(
        replica,
        "internal:index/shard/replication/get_checkpoint_info",
    );
    let refused = write_until(&writer, 429, Duration::from_secs(30), &mut n)
        .expect("writes were refused once the replica was stale");
    assert_eq!(
        refused["error"]["type"], "rejected_execution_exception",
        "{refused}"
    );
    let reason = refused["error"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("rejected execution on primary shard:[pressed][0] Stale Replicas: ["),
        "{reason}"
    );
    let rows = client
        .get("/_cat/segment_replication?format=json")
        .expect("cat")
        .ok();
    assert!(
        rows[0]["rejected_requests"].as_str().unwrap_or("0") != "0",
        "the refusal is counted: {rows}"
    );

    // Healed: the next publication brings the replica up to date, and writes go through.
    cluster.heal();
    assert!(
        write_until(&writer, 201, Duration::from_secs(30), &mut n).is_some(),
        "writes resumed once the replica caught up"
    );
}

/// Kills the primary of a segment-replicated shard whose two replicas hold the same
/// operations but have installed different checkpoints: the one searching the newer
/// checkpoint is promoted (it opens its writer on more of the primary's segments).
#[test]
fn the_replica_with_the_newest_installed_checkpoint_is_promoted() {
    let mut cluster = TestCluster::start(4);
    let client = cluster.client(cluster.cluster_manager());
    let manager = cluster.cluster_manager();
    let manager_name = cluster.node(manager).core().config.node_name.clone();
    client.create_index(
        "promoted",
        &json!({"settings": {"number_of_shards": 1, "number_of_replicas": 2,
            "index.replication.type": "SEGMENT", "index.refresh_interval": "100ms",
            "index.routing.allocation.exclude._name": manager_name}}),
    );
    cluster.wait_green(GREEN);
    let primary = cluster.primary_of("promoted", 0).expect("a primary");
    let replicas = cluster.replicas_of("promoted", 0);
    // The copy the default order would promote (the first listed) is the one left behind.
    let (behind, ahead) = (replicas[0], replicas[1]);
    // `behind` logs every operation but copies no checkpoint after this point.
    cluster.drop_action(
        behind,
        "internal:index/shard/replication/get_checkpoint_info",
    );
    let writer = cluster.client(primary);
    for n in 0..50 {
        let answer = writer
            .index_doc("promoted", &format!("d{n}"), &json!({"n": n}))
            .expect("the node answers");
        assert_eq!(answer.status, 201, "{:?}", answer.body);
    }
    let name = |i: usize| cluster.node(i).core().config.node_name.clone();
    let (ahead_name, behind_name) = (name(ahead), name(behind));
    cluster.wait_for(GREEN, "one replica caught up, the other behind", |c| {
        let rows = c
            .client(primary)
            .get("/_cat/segment_replication/promoted?format=json")?
            .ok();
        let behind_by = |node: &str| {
            rows.as_array()
                .and_then(|rows| rows.iter().find(|r| r["target_node"] == node))
                .and_then(|r| r["checkpoints_behind"].as_str()?.parse::<u64>().ok())
        };
        match (behind_by(&ahead_name), behind_by(&behind_name)) {
            (Some(0), Some(n)) if n > 0 => Ok(()),
            other => Err(format!("{other:?}: {rows}")),
        }
    });
    cluster.kill(primary);
    let promoted = cluster.wait_for(GREEN, "a new primary", |c| {
        c.primary_of("promoted", 0)
            .filter(|p| *p != primary)
            .ok_or_else(|| "none yet".to_string())
    });
    assert_eq!(
        promoted, ahead,
        "the replica that installed the newest checkpoint is promoted (not {behind})"
    );
}
