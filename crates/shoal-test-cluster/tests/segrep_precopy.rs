//! Merged-segment pre-copy on nodes in this process: a merge's segment is in the replica's
//! index directory before any checkpoint of the primary names it, and a replica that does not
//! answer holds the merge back only until `indices.replication.merges.warmer.timeout`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::json;
use shoal_test_cluster::{Client, TestCluster};

const GREEN: Duration = Duration::from_secs(60);
const PUBLISH_MERGED: &str = "internal:index/shard/replication/publish_merged_segment";

/// A segment-replicated index with one replica, three segments of 50 documents each (refresh
/// only when asked), every copy searching them, and every merged segment pre-copied.
fn three_segments(cluster: &TestCluster, timeout: &str) -> Client {
    let client = cluster.client(0);
    client
        .put(
            "/_cluster/settings",
            &json!({"persistent": {
                "indices.replication.merges.warmer.min_segment_size_threshold": "0b",
                "indices.replication.merges.warmer.timeout": timeout}}),
        )
        .expect("settings")
        .ok();
    client.create_index(
        "merging",
        &json!({"settings": {"number_of_shards": 1, "number_of_replicas": 1,
            "index.replication.type": "SEGMENT", "index.refresh_interval": "-1"}}),
    );
    cluster.wait_green(GREEN);
    for batch in 0..3 {
        write_batch(&client, batch * 50..batch * 50 + 50);
    }
    client
}

fn write_batch(client: &Client, ids: std::ops::Range<u64>) {
    let docs: Vec<_> = ids
        .map(|n| {
            (
                format!("d{n}"),
                json!({"n": n, "text": format!("document number {n}")}),
            )
        })
        .collect();
    client.bulk("merging", &docs).expect("bulk").ok();
    client.refresh("merging");
}

fn force_merge(client: &Client) -> Duration {
    let started = Instant::now();
    client
        .post("/merging/_forcemerge?max_num_segments=1", &json!({}))
        .expect("force merge")
        .ok();
    started.elapsed()
}

fn count(cluster: &TestCluster, node: usize) -> u64 {
    cluster
        .engine(node, "merging", 0)
        .expect("a copy")
        .searcher()
        .num_docs()
}

#[test]
fn a_merged_segment_is_on_the_replica_before_a_checkpoint_names_it() {
    let cluster = TestCluster::start(2);
    let client = three_segments(&cluster, "1m");
    let primary = cluster.primary_of("merging", 0).expect("a primary");
    let replica = cluster.replicas_of("merging", 0)[0];
    let replica_engine = cluster.engine(replica, "merging", 0).expect("a replica");

    force_merge(&client);
    let merged = cluster
        .engine(primary, "merging", 0)
        .expect("the primary")
        .segment_checkpoint()
        .expect("checkpoint");
    // The replica keeps working while this lists its directory: a file an install deleted
    // meanwhile (an old segment's) is skipped, not a failure.
    let on_replica: BTreeSet<(String, u64)> =
        std::fs::read_dir(replica_engine.config().index_dir())
            .expect("replica directory")
            .flatten()
            .filter_map(|e| {
                let length = e.metadata().ok()?.len();
                Some((e.file_name().to_string_lossy().into_owned(), length))
            })
            .collect();
    for file in &merged.files {
        assert!(
            on_replica.contains(&(file.name.clone(), file.length)),
            "{} is on the replica before a checkpoint names it",
            file.name
        );
    }
    // `_forcemerge` flushes when done, so the replica may already search the merged commit:
    // the warmer's own counters show the merged segment reached it as a pre-copy.
    let received = cluster.node(replica).segrep.warmer_stats();
    let sent = cluster.node(primary).segrep.warmer_stats();
    assert!(received.total_received_count >= 1, "{received:?}");
    assert_eq!(
        received.total_bytes_received,
        merged.length(),
        "{received:?}"
    );
    assert_eq!(
        (sent.total_failure_count, sent.ongoing_count),
        (0, 0),
        "{sent:?}"
    );
    assert_eq!(sent.total_bytes_sent, merged.length(), "{sent:?}");

    // The next checkpoint names the merged segment; the replica has it and searches it.
    write_batch(&client, 150..151);
    cluster.wait_for(
        Duration::from_secs(30),
        "the replica searches the merged segment",
        |c| match count(c, replica) {
            151 => Ok(()),
            n => Err(format!("{n} documents")),
        },
    );
}

#[test]
fn a_replica_that_does_not_answer_holds_the_merge_back_only_until_the_warmer_timeout() {
    let cluster = TestCluster::start(2);
    let client = three_segments(&cluster, "1s");
    let primary = cluster.primary_of("merging", 0).expect("a primary");
    let replica = cluster.replicas_of("merging", 0)[0];
    cluster.delay(primary, Duration::from_secs(60), Some(PUBLISH_MERGED));

    let took = force_merge(&client);
    assert!(took < Duration::from_secs(20), "the merge waited {took:?}");
    let sent = cluster.node(primary).segrep.warmer_stats();
    assert_eq!(
        (sent.total_invocations_count, sent.total_failure_count),
        (1, 1),
        "{sent:?}"
    );
    assert!(sent.total_time_millis >= 1_000, "{sent:?}");

    // The merged segment travels with the next checkpoint instead.
    cluster.heal();
    write_batch(&client, 150..151);
    cluster.wait_for(
        Duration::from_secs(30),
        "the replica searches the merged segment",
        |c| match count(c, replica) {
            151 => Ok(()),
            n => Err(format!("{n} documents")),
        },
    );
    assert_eq!(
        cluster
            .node(replica)
            .segrep
            .warmer_stats()
            .total_received_count,
        0
    );
}
