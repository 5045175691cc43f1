//! Reads and broadcasts through the nodes that stay, while a node holding copies is frozen (as
//! by SIGSTOP: nothing it is sent is answered, nothing fails fast): they wait for the cluster
//! to remove it, then answer from the other copies.

use std::time::{Duration, Instant};

mod common;

use serde_json::{json, Value};
use shoal_test_cluster::{Response, TestCluster};

/// Far below the shard-read (120 s) and broadcast (600 s) timeouts a read used to wait out.
const ANSWERED_WITHIN: Duration = Duration::from_secs(30);

#[test]
fn reads_sent_to_a_frozen_node_answer_from_another_copy_once_it_is_removed() {
    let cluster = TestCluster::start(3);
    let (primary, coordinator) = common::one_shard_and_a_spare_node(&cluster, "reads");
    let prefer = format!(
        "preference=_prefer_nodes:{}",
        cluster.node(primary).core().node_id
    );

    cluster.freeze(primary);
    let client = cluster.client(coordinator);
    let reads: Vec<(&str, String, Value)> = vec![
        (
            "POST",
            format!("/reads/_search?{prefer}"),
            json!({"size": 20, "query": {"match_all": {}}}),
        ),
        ("POST", format!("/reads/_count?{prefer}"), Value::Null),
        ("GET", format!("/reads/_doc/d7?{prefer}"), Value::Null),
        (
            "POST",
            format!("/reads/_mget?{prefer}"),
            json!({"ids": ["d1", "d2"]}),
        ),
        ("POST", "/reads/_refresh".to_string(), Value::Null),
    ];
    let answers: Vec<_> = reads
        .into_iter()
        .map(|(method, path, body)| {
            let client = client.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                let answer = client.request(method, &path, &body);
                (path, answer, started.elapsed())
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().expect("read thread"))
        .collect();

    for (path, answer, took) in &answers {
        let answer: &Response = answer
            .as_ref()
            .unwrap_or_else(|e| panic!("{path} got no answer: {e}"));
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        assert!(took < &ANSWERED_WITHIN, "{path} took {took:?}");
        let body = &answer.body;
        match path.split(['?', '/']).nth(2).unwrap_or_default() {
            "_search" => {
                assert_eq!(body["_shards"]["failed"], 0, "{body}");
                assert_eq!(body["hits"]["hits"].as_array().map(Vec::len), Some(20));
            }
            "_count" => assert_eq!(body["count"], 20, "{body}"),
            "_doc" => assert_eq!(body["_source"]["value"], 7, "{body}"),
            "_mget" => assert!(
                body["docs"]
                    .as_array()
                    .is_some_and(|d| d.iter().all(|d| d["found"] == true)),
                "{body}"
            ),
            // The frozen node's copy did not refresh: it is not counted successful, and it
            // is no failure either (it was not there to ask), as OpenSearch counts it.
            "_refresh" => assert_eq!(body["_shards"]["failed"], 0, "{body}"),
            other => panic!("unexpected read {other}"),
        }
    }
}
