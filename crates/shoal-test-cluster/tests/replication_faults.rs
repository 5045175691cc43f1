//! Acknowledged writes survive node crashes, replicas catch up, new copies are identical and
//! a partitioned replica is failed and recovered: the essential scenarios of
//! `tests/test_replication_faults.py` and `tests/test_ops_recovery.py`, on nodes in this
//! process (see `shoal-test-cluster`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use shoal_test_cluster::{History, Load, Options, TestCluster};

const INDEX: &str = "acked";
const GREEN: Duration = Duration::from_secs(60);

fn create_index(cluster: &TestCluster, shards: usize, delayed_timeout: &str) {
    cluster.client(0).create_index(
        INDEX,
        &json!({"settings": {
            "number_of_shards": shards, "number_of_replicas": 1,
            "index.translog.durability": "request",
            "index.unassigned.node_left.delayed_timeout": delayed_timeout},
            "mappings": {"properties": {"value": {"type": "long"}, "writer": {"type": "integer"}}}}),
    );
    cluster.wait_green(GREEN);
}

#[test]
fn killing_a_primary_under_load_loses_no_acknowledged_write_and_promotes_the_replica() {
    let mut cluster = TestCluster::start(3);
    create_index(&cluster, 3, "0");
    let history = Arc::new(History::default());
    let load = Load::start(&cluster, INDEX, &history, 2);
    std::thread::sleep(Duration::from_millis(800));
    let victim = cluster.primary_of(INDEX, 0).expect("a started primary");
    let replica = cluster.replicas_of(INDEX, 0)[0];
    let killed_at = Instant::now();
    cluster.kill(victim);
    let recovered = load.wait_success_after(killed_at, Duration::from_secs(30));
    assert!(
        recovered.is_some(),
        "no bulk succeeded on every shard after the primary's node died"
    );
    let values = load.stop();
    cluster.wait_for(GREEN, "the replica of shard 0 promoted", |c| {
        let copies = c.started_copies(INDEX);
        match c.primary_of(INDEX, 0) {
            Some(p) if p == replica => Ok(()),
            _ => Err(format!("started copies (shard, node, primary): {copies:?}")),
        }
    });
    cluster.restart(victim);
    cluster.wait_for_nodes(3, GREEN);
    cluster.wait_green(GREEN);
    let summary = history.verify(&cluster, INDEX);
    assert!(summary.acknowledged > 0, "{summary:?}");
    eprintln!("kill-to-first-full-bulk {recovered:?}; {summary:?}; values {values:?}");
}
