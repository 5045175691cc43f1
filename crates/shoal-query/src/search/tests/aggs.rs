//! Aggregations: the OpenSearch output shape of every supported type on a fixed dataset,
//! and the same results from one shard and from two.

use serde_json::{json, Value};

use super::Fixture;
use crate::QueryError;

fn aggs(f: &Fixture, aggs: Value) -> Value {
    let r = f.search(json!({"size": 0, "aggs": aggs})).unwrap();
    r["aggregations"].clone()
}

fn assert_close(actual: &Value, expected: f64) {
    let a = actual
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {actual}"));
    assert!((a - expected).abs() < 1e-9, "{a} != {expected}");
}

#[test]
fn terms_on_keyword_orders_by_count_then_key() {
    let f = Fixture::products();
    assert_eq!(
        aggs(&f, json!({"s": {"terms": {"field": "status"}}})),
        json!({"s": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
            {"key": "active", "doc_count": 2}, {"key": "sold", "doc_count": 2}, {"key": "pending", "doc_count": 1}]}})
    );
    assert_eq!(
        aggs(&f, json!({"s": {"terms": {"field": "status", "size": 1}}})),
        json!({"s": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 3, "buckets": [{"key": "active", "doc_count": 2}]}})
    );
    let by_key = aggs(
        &f,
        json!({"s": {"terms": {"field": "status", "order": {"_key": "desc"}, "min_doc_count": 2}}}),
    );
    assert_eq!(
        by_key["s"]["buckets"],
        json!([{"key": "sold", "doc_count": 2}, {"key": "active", "doc_count": 2}])
    );
    let missing = aggs(
        &f,
        json!({"t": {"terms": {"field": "tags", "missing": "N/A"}}}),
    );
    assert_eq!(
        missing["t"]["buckets"],
        json!([{"key": "N/A", "doc_count": 2}, {"key": "a", "doc_count": 2}, {"key": "b", "doc_count": 2}])
    );
}

#[test]
fn terms_keys_are_typed_by_field_type() {
    let f = Fixture::products();
    let r = aggs(
        &f,
        json!({
            "q": {"terms": {"field": "qty"}},
            "p": {"terms": {"field": "price", "order": {"_key": "asc"}}},
            "b": {"terms": {"field": "active"}},
            "d": {"terms": {"field": "ts", "size": 1, "order": {"_key": "asc"}}},
            "u": {"terms": {"field": "unmapped_field"}}
        }),
    );
    assert_eq!(
        r["q"]["buckets"],
        json!([{"key": 1, "doc_count": 1}, {"key": 3, "doc_count": 1}, {"key": 5, "doc_count": 1}, {"key": 8, "doc_count": 1}])
    );
    assert_eq!(
        r["p"]["buckets"],
        json!([{"key": 5.0, "doc_count": 1}, {"key": 10.0, "doc_count": 1}, {"key": 20.5, "doc_count": 1}, {"key": 30.0, "doc_count": 1}])
    );
    assert_eq!(
        r["b"]["buckets"],
        json!([{"key": 1, "key_as_string": "true", "doc_count": 3}, {"key": 0, "key_as_string": "false", "doc_count": 2}])
    );
    assert_eq!(
        r["d"],
        json!({"doc_count_error_upper_bound": 0, "sum_other_doc_count": 4, "buckets": [
            {"key": 1577872800000i64, "key_as_string": "2020-01-01T10:00:00.000Z", "doc_count": 1}]})
    );
    assert_eq!(
        r["u"],
        json!({"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": []})
    );
}

#[test]
fn terms_ordered_by_a_sub_aggregation() {
    let f = Fixture::products();
    let r = aggs(
        &f,
        json!({"s": {"terms": {"field": "status", "order": {"avg_price": "desc"}}, "aggs": {"avg_price": {"avg": {"field": "price"}}}}}),
    );
    assert_eq!(
        r["s"]["buckets"],
        json!([
            {"key": "sold", "doc_count": 2, "avg_price": {"value": 20.5}},
            {"key": "active", "doc_count": 2, "avg_price": {"value": 20.0}},
            {"key": "pending", "doc_count": 1, "avg_price": {"value": 5.0}}
        ])
    );
    let r = aggs(
        &f,
        json!({"s": {"terms": {"field": "status", "order": {"st.max": "asc"}}, "aggs": {"st": {"stats": {"field": "qty"}}}}}),
    );
    let keys: Vec<_> = r["s"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["key"].clone())
        .collect();
    // pending has no qty: its max is null and sorts last.
    assert_eq!(keys, [json!("sold"), json!("active"), json!("pending")]);
    let err = f
        .search(json!({"aggs": {"s": {"terms": {"field": "status", "order": {"nope": "asc"}}}}}))
        .unwrap_err();
    assert!(err.to_string().contains("all shards failed"));
}

#[test]
fn range_and_date_range_buckets() {
    let f = Fixture::products();
    let r = aggs(
        &f,
        json!({
            "r": {"range": {"field": "price", "ranges": [{"to": 10}, {"from": 10, "to": 25}, {"from": 25}]}},
            "o": {"range": {"field": "price", "ranges": [{"from": 0, "to": 100}, {"from": 10, "to": 20, "key": "ten"}], "keyed": true}},
            "q": {"range": {"field": "qty", "ranges": [{"from": 2.5, "to": 5}]}},
            "d": {"date_range": {"field": "ts", "ranges": [{"to": "2020-02-01"}, {"from": "2020-02-01"}]}}
        }),
    );
    assert_eq!(
        r["r"],
        json!({"buckets": [
            {"key": "*-10.0", "to": 10.0, "doc_count": 1},
            {"key": "10.0-25.0", "from": 10.0, "to": 25.0, "doc_count": 2},
            {"key": "25.0-*", "from": 25.0, "doc_count": 1}]})
    );
    assert_eq!(
        r["o"],
        json!({"buckets": {
            "0.0-100.0": {"from": 0.0, "to": 100.0, "doc_count": 4},
            "ten": {"from": 10.0, "to": 20.0, "doc_count": 1}}})
    );
    assert_eq!(
        r["q"]["buckets"],
        json!([{"key": "2.5-5.0", "from": 2.5, "to": 5.0, "doc_count": 1}])
    );
    assert_eq!(
        r["d"],
        json!({"buckets": [
            {"key": "*-2020-02-01T00:00:00.000Z", "to": 1580515200000.0, "to_as_string": "2020-02-01T00:00:00.000Z", "doc_count": 2},
            {"key": "2020-02-01T00:00:00.000Z-*", "from": 1580515200000.0, "from_as_string": "2020-02-01T00:00:00.000Z", "doc_count": 3}]})
    );
}

#[test]
fn histogram_buckets_fill_gaps() {
    let f = Fixture::products();
    let r = aggs(
        &f,
        json!({
            "p": {"histogram": {"field": "price", "interval": 10}},
            "q": {"histogram": {"field": "qty", "interval": 3, "min_doc_count": 1}}
        }),
    );
    assert_eq!(
        r["p"],
        json!({"buckets": [{"key": 0.0, "doc_count": 1}, {"key": 10.0, "doc_count": 1}, {"key": 20.0, "doc_count": 1}, {"key": 30.0, "doc_count": 1}]})
    );
    assert_eq!(
        r["q"]["buckets"],
        json!([{"key": 0.0, "doc_count": 1}, {"key": 3.0, "doc_count": 2}, {"key": 6.0, "doc_count": 1}])
    );
    assert!(f
        .search(json!({"aggs": {"h": {"histogram": {"field": "price", "interval": 0}}}}))
        .is_err());
}

#[test]
fn date_histogram_calendar_months_with_empty_buckets() {
    let f = Fixture::products();
    let r = aggs(
        &f,
        json!({"m": {"date_histogram": {"field": "ts", "calendar_interval": "month"}, "aggs": {"q": {"sum": {"field": "qty"}}}}}),
    );
    assert_eq!(
        r["m"],
        json!({"buckets": [
            {"key_as_string": "2020-01-01T00:00:00.000Z", "key": 1577836800000i64, "doc_count": 2, "q": {"value": 8.0}},
            {"key_as_string": "2020-02-01T00:00:00.000Z", "key": 1580515200000i64, "doc_count": 1, "q": {"value": 8.0}},
            {"key_as_string": "2020-03-01T00:00:00.000Z", "key": 1583020800000i64, "doc_count": 0, "q": {"value": 0.0}},
            {"key_as_string": "2020-04-01T00:00:00.000Z", "key": 1585699200000i64, "doc_count": 2, "q": {"value": 1.0}}]})
    );
}

#[test]
fn date_histogram_time_zones_bounds_and_formats() {
    let f = Fixture::products();
    let r = aggs(
        &f,
        json!({
            "tz": {"date_histogram": {"field": "ts", "calendar_interval": "1M", "time_zone": "+01:00", "min_doc_count": 1}},
            "ext": {"date_histogram": {"field": "ts", "calendar_interval": "month", "extended_bounds": {"min": "2019-12-01", "max": "2020-05-15"}}},
            "fixed": {"date_histogram": {"field": "ts", "fixed_interval": "30d", "min_doc_count": 1, "format": "yyyy-MM-dd"}},
            "week": {"date_histogram": {"field": "ts", "calendar_interval": "week", "min_doc_count": 1}}
        }),
    );
    let tz: Vec<_> = r["tz"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["key_as_string"].clone(), b["doc_count"].clone()))
        .collect();
    assert_eq!(
        tz,
        [
            (json!("2020-01-01T00:00:00.000+01:00"), json!(2)),
            (json!("2020-02-01T00:00:00.000+01:00"), json!(1)),
            (json!("2020-04-01T00:00:00.000+01:00"), json!(1)),
            (json!("2020-05-01T00:00:00.000+01:00"), json!(1)),
        ]
    );
    assert_eq!(r["tz"]["buckets"][0]["key"], json!(1577833200000i64));
    let ext: Vec<_> = r["ext"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["doc_count"].as_u64().unwrap())
        .collect();
    assert_eq!(ext, [0, 2, 1, 0, 2, 0]);
    assert_eq!(
        r["ext"]["buckets"][0]["key_as_string"],
        json!("2019-12-01T00:00:00.000Z")
    );
    let fixed: Vec<_> = r["fixed"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["key_as_string"].clone(), b["doc_count"].clone()))
        .collect();
    // 30-day buckets are aligned on the epoch.
    assert_eq!(
        fixed,
        [
            (json!("2019-12-10"), json!(1)),
            (json!("2020-01-09"), json!(1)),
            (json!("2020-02-08"), json!(1)),
            (json!("2020-03-09"), json!(1)),
            (json!("2020-04-08"), json!(1)),
        ]
    );
    assert_eq!(
        r["week"]["buckets"][0]["key_as_string"],
        json!("2019-12-30T00:00:00.000Z")
    );
    let err = f
        .search(
            json!({"aggs": {"x": {"date_histogram": {"field": "ts", "calendar_interval": "2d"}}}}),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "The supplied interval [2d] could not be parsed as a calendar interval."
    );
}

#[test]
fn metric_aggregations_shapes() {
    let f = Fixture::products();
    let r = aggs(
        &f,
        json!({
            "avg": {"avg": {"field": "price"}},
            "sum": {"sum": {"field": "price"}},
            "min": {"min": {"field": "price"}},
            "max": {"max": {"field": "qty"}},
            "count": {"value_count": {"field": "price"}},
            "card": {"cardinality": {"field": "status"}},
            "stats": {"stats": {"field": "qty"}},
            "min_ts": {"min": {"field": "ts"}},
            "avg_bool": {"avg": {"field": "active"}},
            "missing": {"avg": {"field": "qty", "missing": 10}},
            "none": {"avg": {"field": "nope"}},
            "none_sum": {"sum": {"field": "nope"}},
            "none_stats": {"stats": {"field": "nope"}},
            "meta": {"max": {"field": "qty"}, "meta": {"color": "blue"}}
        }),
    );
    assert_eq!(r["avg"], json!({"value": 16.375}));
    assert_eq!(r["sum"], json!({"value": 65.5}));
    assert_eq!(r["min"], json!({"value": 5.0}));
    assert_eq!(r["max"], json!({"value": 8.0}));
    assert_eq!(r["count"], json!({"value": 4}));
    assert_eq!(r["card"], json!({"value": 3}));
    assert_eq!(
        r["stats"],
        json!({"count": 4, "min": 1.0, "max": 8.0, "avg": 4.25, "sum": 17.0})
    );
    assert_eq!(
        r["min_ts"],
        json!({"value": 1577872800000.0, "value_as_string": "2020-01-01T10:00:00.000Z"})
    );
    assert_eq!(r["avg_bool"], json!({"value": 0.6}));
    assert_eq!(r["missing"], json!({"value": 5.4}));
    assert_eq!(r["none"], json!({"value": null}));
    assert_eq!(r["none_sum"], json!({"value": 0.0}));
    assert_eq!(
        r["none_stats"],
        json!({"count": 0, "min": null, "max": null, "avg": null, "sum": 0.0})
    );
    assert_eq!(r["meta"], json!({"meta": {"color": "blue"}, "value": 8.0}));
}

#[test]
fn extended_stats_follow_opensearch_formulas() {
    let f = Fixture::products();
    let r = aggs(
        &f,
        json!({"e": {"extended_stats": {"field": "qty"}}, "empty": {"extended_stats": {"field": "nope"}}}),
    );
    let e = &r["e"];
    assert_eq!(e["count"], json!(4));
    assert_eq!(e["sum_of_squares"], json!(99.0));
    assert_close(&e["variance"], 6.6875);
    assert_close(&e["variance_population"], 6.6875);
    assert_close(&e["variance_sampling"], 8.916666666666666);
    assert_close(&e["std_deviation"], 2.5860201081971503);
    assert_close(&e["std_deviation_sampling"], 2.9860788111948193);
    assert_close(&e["std_deviation_bounds"]["upper"], 9.4220402163943);
    assert_close(&e["std_deviation_bounds"]["lower"], -0.9220402163943007);
    assert_close(
        &e["std_deviation_bounds"]["upper_sampling"],
        10.222157622389638,
    );
    assert_eq!(r["empty"]["std_deviation_bounds"]["upper"], json!(null));
    assert_eq!(r["empty"]["sum"], json!(0.0));
    assert_eq!(r["empty"]["variance"], json!(null));
}

#[test]
fn percentiles_are_exact_on_small_data() {
    let f = Fixture::products();
    let r = aggs(
        &f,
        json!({
            "p": {"percentiles": {"field": "price"}},
            "l": {"percentiles": {"field": "price", "percents": [50], "keyed": false}},
            "n": {"percentiles": {"field": "nope", "percents": [50]}}
        }),
    );
    assert_eq!(
        r["p"],
        json!({"values": {"1.0": 5.0, "5.0": 5.0, "25.0": 7.5, "50.0": 15.25, "75.0": 25.25, "95.0": 30.0, "99.0": 30.0}})
    );
    assert_eq!(r["l"], json!({"values": [{"key": 50.0, "value": 15.25}]}));
    assert_eq!(r["n"], json!({"values": {"50.0": null}}));
}

#[test]
fn filter_and_filters_buckets() {
    let f = Fixture::products();
    let r = aggs(
        &f,
        json!({
            "f": {"filter": {"term": {"status": "active"}}, "aggs": {"avg_price": {"avg": {"field": "price"}}}},
            "k": {"filters": {"filters": {"sold": {"term": {"status": "sold"}}, "active": {"term": {"status": "active"}}}}},
            "a": {"filters": {"filters": [{"term": {"status": "active"}}], "other_bucket": true}},
            "o": {"filters": {"filters": {"p": {"term": {"status": "pending"}}}, "other_bucket_key": "rest"},
                  "aggs": {"s": {"terms": {"field": "status"}}}}
        }),
    );
    assert_eq!(
        r["f"],
        json!({"doc_count": 2, "avg_price": {"value": 20.0}})
    );
    assert_eq!(
        r["k"],
        json!({"buckets": {"active": {"doc_count": 2}, "sold": {"doc_count": 2}}})
    );
    assert_eq!(
        r["a"],
        json!({"buckets": [{"doc_count": 2}, {"doc_count": 3}]})
    );
    assert_eq!(r["o"]["buckets"]["p"]["doc_count"], json!(1));
    assert_eq!(r["o"]["buckets"]["rest"]["doc_count"], json!(4));
    assert_eq!(
        r["o"]["buckets"]["rest"]["s"]["buckets"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let keys: Vec<_> = r["k"]["buckets"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["active", "sold"]);
}

#[test]
fn nested_filters_under_terms_are_refused_clearly() {
    let f = Fixture::products();
    let err = f
        .search(json!({"aggs": {"t": {"terms": {"field": "status"}, "aggs": {"f": {"filter": {"match_all": {}}}}}}}))
        .unwrap_err();
    assert_eq!(err.error_type(), "illegal_argument_exception");
    assert!(
        err.to_string()
            .contains("[filter] aggregation [f] under the [terms] aggregation [t]"),
        "{err}"
    );
}

#[test]
fn top_hits_without_sort_keep_index_order() {
    let f = Fixture::products();
    let r = aggs(
        &f,
        json!({"s": {"terms": {"field": "status", "size": 1}, "aggs": {"top": {"top_hits": {"size": 5, "_source": false}}}}}),
    );
    let ids: Vec<_> = r["s"]["buckets"][0]["top"]["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].clone())
        .collect();
    assert_eq!(ids, [json!("1"), json!("3")]);
}

#[test]
fn top_hits_under_terms_fetch_sources() {
    let f = Fixture::products_two_shards();
    let r = aggs(
        &f,
        json!({"s": {"terms": {"field": "status"}, "aggs": {
        "top": {"top_hits": {"size": 1, "sort": [{"price": "desc"}], "_source": ["title"]}}}}}),
    );
    let buckets = r["s"]["buckets"].as_array().unwrap();
    assert_eq!(
        buckets[0]["top"],
        json!({"hits": {"total": {"value": 2, "relation": "eq"}, "max_score": null, "hits": [
            {"_index": "products", "_id": "3", "_score": null, "_source": {"title": "Quick quick rabbit"}, "sort": [30.0]}]}})
    );
    // Documents without the sort value come last, as in OpenSearch.
    assert_eq!(buckets[1]["top"]["hits"]["hits"][0]["_id"], json!("2"));
    assert_eq!(buckets[2]["top"]["hits"]["hits"][0]["_id"], json!("4"));
}

#[test]
fn aggregations_refuse_text_fields_and_keyword_metrics() {
    let f = Fixture::products();
    match f
        .search(json!({"aggs": {"t": {"terms": {"field": "title"}}}}))
        .unwrap_err()
    {
        QueryError::SearchPhase {
            cause_type,
            cause_reason,
            ..
        } => {
            assert_eq!(cause_type, "illegal_argument_exception");
            assert!(cause_reason.contains("Text fields are not optimised"));
        }
        other => panic!("{other:?}"),
    }
    match f
        .search(json!({"aggs": {"a": {"avg": {"field": "status"}}}}))
        .unwrap_err()
    {
        QueryError::SearchPhase { cause_reason, .. } => {
            assert_eq!(
                cause_reason,
                "Field [status] of type [keyword] is not supported for aggregation [avg]"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        f.search(json!({"aggs": {"a": {"bogus": {}}}})).unwrap_err(),
        QueryError::Parsing("Unknown aggregation type [bogus]".into())
    );
}

#[test]
fn typed_keys_prefix_aggregation_names() {
    let f = Fixture::products();
    let req = crate::search::SearchRequest::parse(
        &json!({"size": 0, "aggs": {"s": {"terms": {"field": "status"}, "aggs": {"m": {"max": {"field": "qty"}}}}, "p": {"percentiles": {"field": "qty"}}}}),
        &[("typed_keys".to_string(), "true".to_string())].into_iter().collect(),
    )
    .unwrap();
    let results = f.shard_results(&req).unwrap();
    let mut fetch =
        |_: usize, _: tantivy::DocAddress| -> Result<Option<Value>, QueryError> { Ok(None) };
    let r =
        crate::search::merge_and_render(&req, results, &mut fetch, &|_| "products".into(), 0, 1)
            .unwrap();
    assert!(r["aggregations"]["sterms#s"]["buckets"][0]["max#m"].is_object());
    assert!(r["aggregations"]["tdigest_percentiles#p"].is_object());
}

#[test]
fn aggregations_over_two_shards_equal_one_shard() {
    let one = Fixture::products();
    let two = Fixture::products_two_shards();
    let request = json!({
        "s": {"terms": {"field": "status"}, "aggs": {"a": {"avg": {"field": "price"}}, "st": {"extended_stats": {"field": "qty"}}}},
        "t": {"terms": {"field": "tags", "size": 1}},
        "r": {"range": {"field": "price", "ranges": [{"to": 10}, {"from": 10}]}, "aggs": {"c": {"cardinality": {"field": "status"}}}},
        "h": {"histogram": {"field": "qty", "interval": 2}},
        "d": {"date_histogram": {"field": "ts", "calendar_interval": "month"}, "aggs": {"m": {"max": {"field": "price"}}}},
        "f": {"filters": {"filters": {"x": {"term": {"status": "sold"}}}, "other_bucket": true}, "aggs": {"p": {"percentiles": {"field": "price"}}}},
        "v": {"value_count": {"field": "status"}},
        "mm": {"min": {"field": "ts"}}
    });
    assert_eq!(aggs(&one, request.clone()), aggs(&two, request));
}

/// A rough timing of one pass over many documents (run with `--ignored --nocapture`).
#[test]
#[ignore]
fn timing_of_a_large_search() {
    let statuses = ["active", "sold", "pending", "lost"];
    let docs: Vec<(String, Value)> = (0..200_000)
        .map(|i| {
            (
                i.to_string(),
                json!({"title": "some words here", "status": statuses[i % 4], "price": (i % 1000) as f64 / 3.0,
                       "qty": i % 77, "ts": 1_577_836_800_000i64 + (i as i64) * 60_000}),
            )
        })
        .collect();
    let refs: Vec<(&str, Value)> = docs
        .iter()
        .map(|(id, v)| (id.as_str(), v.clone()))
        .collect();
    let ids: Vec<&str> = docs.iter().map(|(id, _)| id.as_str()).collect();
    let f = Fixture::new(super::products_mapping(), &refs, &[&[&ids]]);
    let start = std::time::Instant::now();
    let r = f
        .search(json!({"sort": [{"price": "desc"}, {"qty": "asc"}], "size": 10, "track_total_hits": true, "aggs": {
            "s": {"terms": {"field": "status"}, "aggs": {"a": {"avg": {"field": "price"}}}},
            "d": {"date_histogram": {"field": "ts", "calendar_interval": "day"}},
            "p": {"percentiles": {"field": "qty"}}
        }}))
        .unwrap();
    println!("took {:?}; total {}", start.elapsed(), r["hits"]["total"]);
}
