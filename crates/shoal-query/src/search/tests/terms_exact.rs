//! `terms` over many segments: a term that is never among a segment's best is still counted
//! in full on its shard, and across shards the error bounds follow OpenSearch's reduce.

use serde_json::{json, Value};

use super::Fixture;

const SEGMENTS: usize = 12;

/// Per segment: `a{s}` three times, sixteen filler terms once each, and `z` once. `z` is the
/// most frequent term overall (12) but sorts last among each segment's count-1 terms.
fn docs() -> Vec<(String, Value)> {
    let mut docs = Vec::new();
    for s in 0..SEGMENTS {
        let mut push = |term: String| {
            docs.push((
                format!("{s}-{}", docs.len()),
                json!({ "k": term, "g": "all" }),
            ))
        };
        for _ in 0..3 {
            push(format!("a{s:02}"));
        }
        for j in 0..16 {
            push(format!("f{s:02}_{j:02}"));
        }
        push("z".to_string());
    }
    docs
}

fn fixture(shards: usize) -> Fixture {
    let docs = docs();
    let refs: Vec<(&str, Value)> = docs
        .iter()
        .map(|(id, v)| (id.as_str(), v.clone()))
        .collect();
    let per_segment: Vec<Vec<&str>> = (0..SEGMENTS)
        .map(|s| {
            refs.iter()
                .map(|(id, _)| *id)
                .filter(|id| id.starts_with(&format!("{s}-")))
                .collect()
        })
        .collect();
    let segments: Vec<&[&str]> = per_segment.iter().map(Vec::as_slice).collect();
    let per_shard = SEGMENTS / shards;
    let layout: Vec<&[&[&str]]> = segments.chunks(per_shard).collect();
    Fixture::new(
        json!({"properties": {"k": {"type": "keyword"}, "g": {"type": "keyword"}}}),
        &refs,
        &layout,
    )
}

fn terms(f: &Fixture, body: Value) -> Value {
    let r = f
        .search(json!({"size": 0, "aggs": {"t": {"terms": body}}}))
        .unwrap();
    r["aggregations"]["t"].clone()
}

#[test]
fn one_shard_counts_a_term_that_no_segment_ranks_high() {
    let t = terms(&fixture(1), json!({"field": "k", "size": 1}));
    assert_eq!(t["buckets"], json!([{"key": "z", "doc_count": 12}]));
    assert_eq!(t["doc_count_error_upper_bound"], 0);
    assert_eq!(t["sum_other_doc_count"], 240 - 12);
}

#[test]
fn two_shards_bound_the_error_as_opensearch_reduces() {
    let t = terms(
        &fixture(2),
        json!({"field": "k", "size": 1, "show_term_doc_count_error": true}),
    );
    // each shard sends its best 11 (z: 6, six a's: 3, four fillers: 1): full pages whose
    // smallest count is 1, so each may have left out a term with one document
    assert_eq!(
        t["buckets"],
        json!([{"key": "z", "doc_count": 12, "doc_count_error_upper_bound": 0}])
    );
    assert_eq!(t["doc_count_error_upper_bound"], 2);
    assert_eq!(t["sum_other_doc_count"], 240 - 12);
    // a shard size that holds every term leaves nothing out
    let t = terms(
        &fixture(2),
        json!({"field": "k", "size": 1, "shard_size": 1000}),
    );
    assert_eq!(t["doc_count_error_upper_bound"], 0);
}

#[test]
fn terms_under_a_filter_are_exact_over_segments() {
    let f = fixture(1);
    let r = f
        .search(
            json!({"size": 0, "aggs": {"all": {"filter": {"match_all": {}}, "aggs": {
            "t": {"terms": {"field": "k", "size": 1}}}}}}),
        )
        .unwrap();
    assert_eq!(
        r["aggregations"]["all"]["t"]["buckets"],
        json!([{"key": "z", "doc_count": 12}])
    );
}

#[test]
fn terms_under_terms_bound_their_error_as_opensearch_reads_it() {
    let f = fixture(2);
    let nested = |order: Value| {
        let r = f
            .search(
                json!({"size": 0, "aggs": {"g": {"terms": {"field": "g"}, "aggs": {
                "t": {"terms": {"field": "k", "size": 1, "order": order}}}}}}),
            )
            .unwrap();
        r["aggregations"]["g"]["buckets"][0]["t"].clone()
    };
    let by_count = nested(json!({"_count": "desc"}));
    assert_eq!(by_count["buckets"], json!([{"key": "z", "doc_count": 12}]));
    assert_eq!(by_count["doc_count_error_upper_bound"], 2);
    let by_key = nested(json!({"_key": "asc"}));
    assert_eq!(by_key["buckets"], json!([{"key": "a00", "doc_count": 3}]));
    assert_eq!(by_key["doc_count_error_upper_bound"], 0);
    assert_eq!(
        nested(json!({"_count": "asc"}))["doc_count_error_upper_bound"],
        -1
    );
    let one_shard = fixture(1)
        .search(
            json!({"size": 0, "aggs": {"g": {"terms": {"field": "g"}, "aggs": {
            "t": {"terms": {"field": "k", "size": 1}}}}}}),
        )
        .unwrap();
    let t = &one_shard["aggregations"]["g"]["buckets"][0]["t"];
    assert_eq!(t["buckets"], json!([{"key": "z", "doc_count": 12}]));
    assert_eq!(t["doc_count_error_upper_bound"], 0);
}
