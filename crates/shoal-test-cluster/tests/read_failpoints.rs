//! Reads that lose a copy between two of their phases, placed exactly with failpoints. Run
//! with `cargo test -p shoal-test-cluster --features failpoints`.
#![cfg(feature = "failpoints")]

use std::time::Duration;

mod common;

use serde_json::json;
use shoal_test_cluster::TestCluster;

const HIT: Duration = Duration::from_secs(15);

/// Before the fetch phase retried, this search failed with 503 "fetch phase failed": its
/// search context died with the node that ran the query phase.
#[test]
fn a_search_whose_query_phase_node_dies_before_the_fetch_answers_in_full_from_another_copy() {
    let mut cluster = TestCluster::start(3);
    let (primary, coordinator) = common::one_shard_and_a_spare_node(&cluster, "reads");
    // The query phase reads the primary's copy; the coordinator stops before fetching.
    let paused = cluster.pause_at(coordinator, "search_before_fetch");
    let searcher = {
        let client = cluster.client(coordinator);
        let node_id = cluster.node(primary).core().node_id.clone();
        std::thread::spawn(move || {
            client.request(
                "POST",
                &format!("/reads/_search?preference=_prefer_nodes:{node_id}"),
                &json!({"size": 20, "query": {"match_all": {}}}),
            )
        })
    };
    assert!(
        paused.wait_hits(1, HIT),
        "the search never finished its query phase"
    );

    cluster.kill(primary);
    paused.release();
    let answer = searcher
        .join()
        .expect("search thread")
        .expect("search answered");

    assert_eq!(answer.status, 200, "the search failed: {}", answer.body);
    let body = &answer.body;
    assert_eq!(body["_shards"]["failed"], 0, "{body}");
    let hits = body["hits"]["hits"].as_array().expect("hits");
    assert_eq!(hits.len(), 20, "{body}");
    assert!(
        hits.iter().all(|h| h["_source"]["value"].is_i64()),
        "every hit carries its source: {body}"
    );
}
