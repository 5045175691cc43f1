//! Query-then-fetch across the wire: shard results sent as JSON to a coordinator, which
//! selects the page, fetches only those documents and merges to the very response the
//! in-process merge gives.

use std::collections::HashMap;
use std::sync::OnceLock;

use chrono::{DateTime, SecondsFormat};
use serde_json::{json, Value};
use tantivy::DocAddress;

use super::{products_mapping, Fixture, NOW};
use crate::search::{select_page, SearchRequest, ShardResult};
use crate::QueryError;

const WORDS: [&str; 8] = [
    "quick", "brown", "fox", "lazy", "dog", "rabbit", "bear", "sleeps",
];
const STATUSES: [&str; 4] = ["active", "sold", "pending", "archived"];
/// Enough documents for percentiles to leave their exact path (over 1000 distinct values)
/// and for cardinality sketches to fill up.
const DOCS: usize = 1500;

fn doc(i: usize) -> Value {
    let title: Vec<&str> = (0..4).map(|k| WORDS[(i * (k + 3) + k * k) % 8]).collect();
    let ts = DateTime::from_timestamp_millis(NOW - i as i64 * 37 * 3_600_000).unwrap();
    let mut doc = json!({
        "title": title.join(" "),
        "status": STATUSES[i % 4],
        "qty": (i * 7) % 23,
        "active": i.is_multiple_of(3),
        "ts": ts.to_rfc3339_opts(SecondsFormat::Millis, true),
        "tags": [format!("t{}", i % 5), format!("t{}", i % 7)],
    });
    // Long decimals (0.30000000000000004...) that plain JSON parsing would not restore
    // exactly; every eleventh document has no price (infinite sort values).
    if !i.is_multiple_of(11) {
        doc["price"] = json!(i as f64 * 0.1 + 0.01 * (i % 3) as f64);
    }
    doc
}

/// Three shards of two segments each, built once for all tests of this module.
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let ids: Vec<String> = (0..DOCS).map(|i| format!("d{i}")).collect();
        let docs: Vec<(&str, Value)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), doc(i)))
            .collect();
        let mut layout: Vec<Vec<Vec<&str>>> = vec![vec![Vec::new(); 2]; 3];
        for (i, id) in ids.iter().enumerate() {
            layout[i % 3][(i / 3) % 2].push(id);
        }
        let segments: Vec<Vec<&[&str]>> = layout
            .iter()
            .map(|shard| shard.iter().map(Vec::as_slice).collect())
            .collect();
        let shards: Vec<&[&[&str]]> = segments.iter().map(Vec::as_slice).collect();
        Fixture::new(products_mapping(), &docs, &shards)
    })
}

fn request(body: Value) -> SearchRequest {
    SearchRequest::parse(&body, &HashMap::new()).unwrap()
}

fn through_the_wire(result: &ShardResult) -> ShardResult {
    let bytes = serde_json::to_vec(result).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// Runs `req` in-process and as a coordinator would, asserting that both give the same
/// response and that `select_page` names exactly the documents the merge fetches. Returns
/// the response and the selected documents.
fn check(req: &SearchRequest) -> (Value, Vec<(usize, DocAddress)>) {
    let f = fixture();
    let local = f.shard_results(req).unwrap();
    let wired: Vec<ShardResult> = local.iter().map(through_the_wire).collect();
    let selected = select_page(req, &local);
    assert_eq!(
        select_page(req, &wired),
        selected,
        "select_page after the wire"
    );

    let mut fetched = Vec::new();
    let mut fetch_local = |shard: usize, address: DocAddress| {
        fetched.push((shard, address));
        Ok(f.source_of(shard, address))
    };
    let expected = f.merge_with(req, local, &mut fetch_local);
    fetched.sort_unstable();
    fetched.dedup();
    assert_eq!(
        fetched, selected,
        "select_page names exactly the fetched documents"
    );

    // The coordinator's fetch phase, then its merge reading only what was fetched.
    let prefetched: HashMap<(usize, DocAddress), Option<Value>> = selected
        .iter()
        .map(|&(shard, address)| ((shard, address), f.source_of(shard, address)))
        .collect();
    let mut from_prefetched = |shard: usize, address: DocAddress| {
        prefetched
            .get(&(shard, address))
            .cloned()
            .ok_or_else(|| QueryError::Internal(format!("{shard}/{address:?} not prefetched")))
    };
    let actual = f.merge_with(req, wired, &mut from_prefetched);
    assert_eq!(actual, expected);
    (expected.unwrap(), selected)
}

fn hits(response: &Value) -> &Vec<Value> {
    response["hits"]["hits"].as_array().unwrap()
}

#[test]
fn matches_and_paging_over_three_shards() {
    let (r, selected) = check(&request(
        json!({"query": {"match": {"title": "quick fox"}}}),
    ));
    assert_eq!((hits(&r).len(), selected.len()), (10, 10));
    assert!(r["hits"]["max_score"].as_f64().unwrap() > 0.0);
    let (r, selected) = check(&request(json!({
        "query": {"match": {"title": "rabbit"}}, "from": 7, "size": 9,
        "version": true, "seq_no_primary_term": true
    })));
    assert_eq!((hits(&r).len(), selected.len()), (9, 9));
    let (r, _) = check(&request(json!({"from": 1490, "size": 20})));
    assert_eq!(hits(&r).len(), 10);
    let (r, selected) = check(&request(json!({"size": 0, "track_total_hits": 100})));
    assert_eq!(r["hits"]["total"], json!({"value": 100, "relation": "gte"}));
    assert!(selected.is_empty());
}

#[test]
fn field_sorts_and_search_after() {
    check(&request(
        json!({"sort": [{"price": "desc"}, {"qty": "asc"}], "size": 12, "_source": ["title", "price"]}),
    ));
    let (r, _) = check(&request(json!({
        "sort": [{"qty": "asc"}, {"price": "desc"}], "search_after": [5, 40.1], "size": 8
    })));
    assert_eq!(hits(&r)[0]["sort"][0], json!(5));
    check(&request(
        json!({"sort": [{"status": "asc"}, {"ts": "desc"}, "_doc"], "from": 20, "size": 10}),
    ));
    check(&request(json!({
        "query": {"match": {"title": "quick"}}, "sort": ["_score", {"price": "asc"}],
        "track_scores": true, "size": 15
    })));
    // Without `_source` or highlighting, the fetch phase has nothing to do.
    let (r, selected) = check(&request(json!({"sort": ["qty"], "_source": false})));
    assert_eq!((hits(&r).len(), selected.len()), (10, 0));
}

#[test]
fn shard_results_are_readable_json() {
    let req =
        request(json!({"sort": [{"price": {"order": "asc", "missing": "_first"}}], "size": 2}));
    let result = &fixture().shard_results(&req).unwrap()[1];
    let value = serde_json::to_value(result).unwrap();
    let hit = &value["hits"][0];
    assert_eq!(hit["sort_values"], json!([{"Double": "-Infinity"}]));
    assert!(hit["address"].as_array().is_some_and(|a| a.len() == 2));
    assert_eq!(hit["score"], json!("NaN"), "scores were not computed");
    assert_eq!(value["aggs"], Value::Null);
}

#[test]
fn highlighting_uses_the_shard_plan_on_the_coordinator() {
    let (r, selected) = check(&request(json!({
        "query": {"match": {"title": "lazy dog"}},
        "highlight": {"fields": {"title": {}}, "pre_tags": ["<b>"], "post_tags": ["</b>"]},
        "_source": false, "size": 6
    })));
    assert_eq!(selected.len(), 6, "highlighting needs the sources");
    assert!(hits(&r).iter().all(|h| h.get("_source").is_none()));
    assert!(hits(&r)[0]["highlight"]["title"][0]
        .as_str()
        .unwrap()
        .contains("<b>"));
    check(&request(json!({
        "query": {"match": {"title": "bear"}}, "highlight": {"fields": {"*": {}}},
        "from": 3, "size": 4
    })));
}

fn all_aggs() -> Value {
    json!({
        "status": {"terms": {"field": "status"}, "aggs": {
            "avg_price": {"avg": {"field": "price"}},
            "qty_stats": {"extended_stats": {"field": "qty"}}
        }},
        "tags": {"terms": {"field": "tags", "size": 3, "order": {"_key": "desc"}}},
        "qty_terms": {"terms": {"field": "qty", "order": {"avg_p": "desc"}},
            "aggs": {"avg_p": {"avg": {"field": "price"}}}},
        "active": {"terms": {"field": "active"}},
        "monthly": {"date_histogram": {"field": "ts", "calendar_interval": "month",
            "time_zone": "Europe/Paris"}, "aggs": {"s": {"sum": {"field": "price"}}}},
        "weekly": {"date_histogram": {"field": "ts", "fixed_interval": "7d", "min_doc_count": 1}},
        "price_hist": {"histogram": {"field": "price", "interval": 12.5}},
        "ranges": {"range": {"field": "price", "ranges": [{"to": 10.1}, {"from": 10.1, "to": 77.7}, {"from": 77.7}]},
            "aggs": {"c": {"cardinality": {"field": "status"}}}},
        "recent": {"date_range": {"field": "ts", "ranges": [{"to": "now-30d"}, {"from": "now-30d"}]}},
        "avg_price": {"avg": {"field": "price"}, "meta": {"note": "x", "f": 0.30000000000000004}},
        "first": {"min": {"field": "ts"}},
        "max_price": {"max": {"field": "price"}},
        "sum_price": {"sum": {"field": "price"}},
        "count": {"value_count": {"field": "qty"}},
        "price_stats": {"stats": {"field": "price"}},
        "distinct_prices": {"cardinality": {"field": "price"}},
        "distinct_status": {"cardinality": {"field": "status"}},
        "price_pct": {"percentiles": {"field": "price"}},
        "qty_pct": {"percentiles": {"field": "qty", "percents": [10, 50, 99.9]}},
        "sold": {"filter": {"term": {"status": "sold"}}, "aggs": {"q": {"avg": {"field": "qty"}}}},
        "kinds": {"filters": {"filters": {"a": {"term": {"status": "active"}}, "p": {"term": {"status": "pending"}}},
            "other_bucket": true}, "aggs": {"q": {"max": {"field": "qty"}}}}
    })
}

#[test]
fn every_aggregation_type_merges_the_same_after_the_wire() {
    let (r, selected) = check(&request(json!({"size": 0, "aggs": all_aggs()})));
    assert!(selected.is_empty());
    let aggs = r["aggregations"].as_object().unwrap();
    assert_eq!(aggs.len(), all_aggs().as_object().unwrap().len());
    assert_eq!(aggs["avg_price"]["meta"]["f"], json!(0.30000000000000004));
    assert!(aggs["distinct_prices"]["value"].as_u64().unwrap() > 1000);
    let mut req =
        request(json!({"query": {"match": {"title": "fox"}}, "size": 3, "aggs": all_aggs()}));
    req.typed_keys = true;
    let (r, _) = check(&req);
    assert!(r["aggregations"]["tdigest_percentiles#price_pct"].is_object());
}

#[test]
fn top_hits_documents_are_selected_with_the_page() {
    let (r, selected) = check(&request(json!({
        "query": {"match": {"title": "fox"}}, "size": 5,
        "aggs": {
            "by_status": {"terms": {"field": "status", "size": 2}, "aggs": {"top": {"top_hits": {
                "size": 2, "sort": [{"price": "desc"}], "_source": ["title"]}}}},
            "best": {"top_hits": {"size": 3, "version": true}}
        }
    })));
    let top = &r["aggregations"]["by_status"]["buckets"][0]["top"]["hits"]["hits"];
    assert_eq!(top.as_array().unwrap().len(), 2);
    assert!(top[0]["_source"]["title"].is_string());
    // The page's 5 hits, 4 top hits under the 2 rendered buckets, 3 overall (some shared).
    assert!(
        selected.len() > 5 && selected.len() <= 12,
        "{}",
        selected.len()
    );
    let (_, selected) = check(&request(
        json!({"size": 0, "aggs": {"t": {"terms": {"field": "status"},
        "aggs": {"top": {"top_hits": {"size": 1, "_source": false}}}}}}),
    ));
    assert!(
        selected.is_empty(),
        "top hits without _source fetch nothing"
    );
}
