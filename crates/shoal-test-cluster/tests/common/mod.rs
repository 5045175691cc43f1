//! Setups the read scenarios share.

use std::time::Duration;

use serde_json::{json, Value};
use shoal_test_cluster::TestCluster;

pub const GREEN: Duration = Duration::from_secs(60);

/// Creates `index` (one shard, one replica) on a three-node cluster and indexes 20 refreshed
/// documents `d0`..`d19` (`{"value": n}`). Returns the node of its primary and the node that
/// holds no copy (the coordinator of the scenario's reads).
pub fn one_shard_and_a_spare_node(cluster: &TestCluster, index: &str) -> (usize, usize) {
    let client = cluster.client(0);
    client.create_index(
        index,
        &json!({"settings": {"number_of_shards": 1, "number_of_replicas": 1}}),
    );
    cluster.wait_green(GREEN);
    let docs: Vec<(String, Value)> = (0..20)
        .map(|n| (format!("d{n}"), json!({"value": n})))
        .collect();
    client.bulk(index, &docs).expect("bulk").ok();
    client.refresh(index);
    let primary = cluster.primary_of(index, 0).expect("a primary");
    let spare = (0..3)
        .find(|&i| i != primary && !cluster.replicas_of(index, 0).contains(&i))
        .expect("a node without a copy");
    (primary, spare)
}
