//! Hits: sorting, missing values, search_after, paging across shards, scores, source
//! filtering, highlighting, totals.

use serde_json::json;

use super::{ids, Fixture};
use crate::QueryError;

#[test]
fn sort_by_double_puts_missing_last_with_infinity_sort_values() {
    let f = Fixture::products();
    let r = f.search(json!({"sort": [{"price": "asc"}]})).unwrap();
    assert_eq!(ids(&r), ["4", "1", "2", "3", "5"]);
    let sorts: Vec<_> = r["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["sort"].clone())
        .collect();
    assert_eq!(
        sorts,
        [
            json!([5.0]),
            json!([10.0]),
            json!([20.5]),
            json!([30.0]),
            json!(["Infinity"])
        ]
    );
    assert_eq!(r["hits"]["hits"][0]["_score"], json!(null));
    assert_eq!(r["hits"]["max_score"], json!(null));
}

#[test]
fn missing_first_and_long_sort_values_follow_opensearch() {
    let f = Fixture::products();
    let r = f
        .search(json!({"sort": [{"price": {"order": "asc", "missing": "_first"}}]}))
        .unwrap();
    assert_eq!(ids(&r), ["5", "4", "1", "2", "3"]);
    assert_eq!(r["hits"]["hits"][0]["sort"], json!(["-Infinity"]));
    let r = f.search(json!({"sort": [{"qty": "desc"}]})).unwrap();
    assert_eq!(ids(&r), ["3", "1", "2", "5", "4"]);
    assert_eq!(r["hits"]["hits"][4]["sort"], json!([i64::MIN]));
    let r = f
        .search(json!({"sort": [{"qty": {"order": "asc", "missing": 4}}]}))
        .unwrap();
    assert_eq!(ids(&r), ["5", "2", "4", "1", "3"]);
    assert_eq!(r["hits"]["hits"][2]["sort"], json!([4]));
}

#[test]
fn multi_key_sort_with_keyword_and_dates() {
    let f = Fixture::products();
    let r = f
        .search(json!({"sort": [{"status": "asc"}, {"price": "desc"}]}))
        .unwrap();
    assert_eq!(ids(&r), ["3", "1", "4", "2", "5"]);
    assert_eq!(r["hits"]["hits"][0]["sort"], json!(["active", 30.0]));
    assert_eq!(r["hits"]["hits"][4]["sort"], json!(["sold", "-Infinity"]));
    let r = f
        .search(json!({"sort": [{"ts": "desc"}], "size": 1}))
        .unwrap();
    assert_eq!(ids(&r), ["5"]);
    assert_eq!(r["hits"]["hits"][0]["sort"], json!([1588291199000i64]));
}

#[test]
fn multi_valued_fields_sort_by_min_ascending_and_max_descending() {
    let f = Fixture::products();
    let r = f
        .search(json!({"sort": [{"tags": "desc"}, "_doc"]}))
        .unwrap();
    // Max tag: 1 → b, 2 → b, 4 → a; missing (3, 5) last.
    assert_eq!(ids(&r), ["1", "2", "4", "3", "5"]);
    assert_eq!(r["hits"]["hits"][4]["sort"][0], json!(null));
    let r = f
        .search(json!({"sort": [{"tags": "asc"}, "_doc"]}))
        .unwrap();
    assert_eq!(ids(&r), ["1", "4", "2", "3", "5"]);
}

#[test]
fn search_after_continues_strictly_after_the_values() {
    let f = Fixture::products();
    let sort = json!([{"status": "asc"}, {"price": "desc"}]);
    let r = f
        .search(json!({"sort": sort, "search_after": ["active", 10.0]}))
        .unwrap();
    assert_eq!(ids(&r), ["4", "2", "5"]);
    let r = f
        .search(json!({"sort": sort, "search_after": ["sold", 20.5]}))
        .unwrap();
    assert_eq!(ids(&r), ["5"]);
    let r = f
        .search(json!({"sort": sort, "search_after": ["sold", "-Infinity"]}))
        .unwrap();
    assert!(ids(&r).is_empty());
    let r = f
        .search(json!({"sort": [{"price": "asc"}], "search_after": [30.0]}))
        .unwrap();
    assert_eq!(ids(&r), ["5"]);
    let r = f
        .search(json!({"sort": [{"ts": "asc"}], "search_after": [1579046400000i64]}))
        .unwrap();
    assert_eq!(ids(&r), ["3", "4", "5"]);
    let r = f
        .search(json!({"sort": [{"status": "asc"}], "search_after": ["b"]}))
        .unwrap();
    assert_eq!(ids(&r), ["4", "2", "5"]);
}

#[test]
fn paging_through_search_after_visits_every_document_once() {
    let f = Fixture::products_two_shards();
    let mut seen = Vec::new();
    let mut after: Option<serde_json::Value> = None;
    loop {
        let mut body = json!({"size": 2, "sort": [{"qty": "asc"}, {"status": "desc"}, "_doc"]});
        if let Some(a) = &after {
            body["search_after"] = a.clone();
        }
        let r = f.search(body).unwrap();
        let page = r["hits"]["hits"].as_array().unwrap().clone();
        if page.is_empty() {
            break;
        }
        seen.extend(ids(&r));
        after = Some(page.last().unwrap()["sort"].clone());
    }
    assert_eq!(seen, ["5", "2", "1", "3", "4"]);
}

#[test]
fn search_after_errors() {
    let f = Fixture::products();
    let err = f
        .search(json!({"sort": ["qty"], "search_after": [1, 2]}))
        .unwrap_err();
    assert!(err.to_string().contains("all shards failed"), "{err:?}");
    match err {
        QueryError::SearchPhase { cause_reason, .. } => {
            assert_eq!(cause_reason, "search_after has 2 value(s) but sort has 1.")
        }
        other => panic!("{other:?}"),
    }
    assert!(f
        .search(json!({"sort": ["qty"], "search_after": [1], "from": 1}))
        .is_err());
}

#[test]
fn sort_errors_match_opensearch() {
    let f = Fixture::products();
    match f.search(json!({"sort": ["title"]})).unwrap_err() {
        QueryError::SearchPhase {
            cause_type,
            cause_reason,
            ..
        } => {
            assert_eq!(cause_type, "illegal_argument_exception");
            assert!(cause_reason.starts_with(
                "Text fields are not optimised for operations that require per-document field data"
            ));
            assert!(cause_reason.contains("set fielddata=true on [title]"));
        }
        other => panic!("{other:?}"),
    }
    match f.search(json!({"sort": ["nope"]})).unwrap_err() {
        QueryError::SearchPhase {
            cause_type,
            cause_reason,
            ..
        } => {
            assert_eq!(cause_type, "query_shard_exception");
            assert_eq!(
                cause_reason,
                "No mapping found for [nope] in order to sort on"
            );
        }
        other => panic!("{other:?}"),
    }
    let r = f
        .search(json!({"sort": [{"nope": {"unmapped_type": "long"}}, "_doc"], "size": 2}))
        .unwrap();
    assert_eq!(ids(&r), ["1", "2"]);
    assert_eq!(r["hits"]["hits"][0]["sort"], json!([i64::MAX, 0]));
}

#[test]
fn two_shards_merge_sorted_hits_with_from_and_size() {
    let one = Fixture::products();
    let two = Fixture::products_two_shards();
    for body in [
        json!({"sort": [{"qty": "asc"}], "from": 1, "size": 2}),
        json!({"sort": [{"price": "desc"}], "from": 0, "size": 10}),
        json!({"sort": [{"status": "desc"}, {"ts": "asc"}], "from": 2, "size": 3}),
    ] {
        let a = one.search(body.clone()).unwrap();
        let b = two.search(body.clone()).unwrap();
        assert_eq!(ids(&a), ids(&b), "{body}");
        assert_eq!(b["hits"]["total"], json!({"value": 5, "relation": "eq"}));
        assert_eq!(
            b["_shards"],
            json!({"total": 2, "successful": 2, "skipped": 0, "failed": 0})
        );
    }
    let r = two
        .search(json!({"sort": [{"qty": "asc"}], "from": 1, "size": 2}))
        .unwrap();
    assert_eq!(ids(&r), ["2", "1"]);
}

#[test]
fn score_sorting_across_shards_and_ties_by_shard_then_doc() {
    let two = Fixture::products_two_shards();
    let r = two
        .search(json!({"query": {"match": {"title": "quick"}}}))
        .unwrap();
    assert_eq!(ids(&r), ["3", "1"]);
    let s3 = r["hits"]["hits"][0]["_score"].as_f64().unwrap();
    let s1 = r["hits"]["hits"][1]["_score"].as_f64().unwrap();
    assert!(s3 > s1 && s1 > 0.0);
    assert_eq!(r["hits"]["max_score"].as_f64().unwrap(), s3);
    assert!(r["hits"]["hits"][0].get("sort").is_none());
    // match_all: equal scores, shard 0 first, then doc order.
    let r = two.search(json!({})).unwrap();
    assert_eq!(ids(&r), ["1", "3", "5", "2", "4"]);
    assert_eq!(r["hits"]["max_score"], json!(1.0));
    // Explicit _score sort shows the sort values; track_scores keeps scores with field sorts.
    let r = two
        .search(json!({"query": {"match": {"title": "quick"}}, "sort": ["_score"]}))
        .unwrap();
    assert_eq!(r["hits"]["hits"][0]["sort"][0].as_f64().unwrap(), s3);
    let r = two
        .search(
            json!({"query": {"match": {"title": "quick"}}, "sort": ["qty"], "track_scores": true}),
        )
        .unwrap();
    assert_eq!(ids(&r), ["1", "3"]);
    assert_eq!(r["hits"]["hits"][0]["_score"].as_f64().unwrap(), s1);
}

#[test]
fn totals_follow_track_total_hits() {
    let f = Fixture::products();
    assert_eq!(
        f.search(json!({"track_total_hits": 3})).unwrap()["hits"]["total"],
        json!({"value": 3, "relation": "gte"})
    );
    assert_eq!(
        f.search(json!({"track_total_hits": 5})).unwrap()["hits"]["total"],
        json!({"value": 5, "relation": "eq"})
    );
    assert!(
        f.search(json!({"track_total_hits": false})).unwrap()["hits"]
            .get("total")
            .is_none()
    );
    let r = f.search(json!({"size": 0})).unwrap();
    assert_eq!(
        r["hits"],
        json!({"total": {"value": 5, "relation": "eq"}, "max_score": null, "hits": []})
    );
    let r = f
        .search(json!({"terminate_after": 2, "sort": ["_doc"]}))
        .unwrap();
    assert_eq!(r["terminated_early"], json!(true));
    assert_eq!(r["hits"]["total"]["value"], json!(2));
    assert_eq!(ids(&r), ["1", "2"]);
    let r = f
        .search(json!({"min_score": 0.5, "query": {"match": {"title": "quick"}}}))
        .unwrap();
    assert_eq!(r["hits"]["total"]["value"], json!(2));
}

#[test]
fn source_filtering_and_metadata_in_hits() {
    let f = Fixture::products();
    let r = f.search(json!({"_source": ["title", "ta*"], "size": 1, "version": true, "seq_no_primary_term": true})).unwrap();
    assert_eq!(
        r["hits"]["hits"][0],
        json!({"_index": "products", "_id": "1", "_version": 1, "_seq_no": 0, "_primary_term": 1, "_score": 1.0,
               "_source": {"title": "The quick brown fox", "tags": ["a", "b"]}})
    );
    let r = f.search(json!({"_source": false, "size": 1})).unwrap();
    assert!(r["hits"]["hits"][0].get("_source").is_none());
    let r = f
        .search(json!({"_source": {"excludes": ["t*"]}, "size": 1}))
        .unwrap();
    assert_eq!(
        r["hits"]["hits"][0]["_source"],
        json!({"status": "active", "price": 10.0, "qty": 5, "active": true})
    );
}

#[test]
fn post_filter_filters_hits_but_not_aggregations() {
    let f = Fixture::products_two_shards();
    let r = f
        .search(json!({"post_filter": {"term": {"status": "sold"}}, "aggs": {"s": {"terms": {"field": "status"}}}, "sort": ["_doc"]}))
        .unwrap();
    // `_doc` values are per shard: doc 2 is the first of shard 1, doc 5 the third of shard 0.
    assert_eq!(ids(&r), ["2", "5"]);
    assert_eq!(r["hits"]["total"]["value"], json!(2));
    assert_eq!(
        r["aggregations"]["s"]["buckets"].as_array().unwrap().len(),
        3
    );
}

#[test]
fn highlight_wraps_matched_tokens_of_each_hit() {
    let f = Fixture::products_two_shards();
    let r = f
        .search(json!({"query": {"match": {"title": "quick"}}, "highlight": {"fields": {"title": {}}}, "_source": false}))
        .unwrap();
    assert_eq!(
        r["hits"]["hits"][0]["highlight"],
        json!({"title": ["<em>Quick</em> <em>quick</em> rabbit"]})
    );
    assert_eq!(
        r["hits"]["hits"][1]["highlight"],
        json!({"title": ["The <em>quick</em> brown fox"]})
    );
    let r = f
        .search(json!({"query": {"match": {"title": "fox"}}, "sort": ["_doc"], "highlight": {"fields": {"*": {}}, "pre_tags": ["<b>"], "post_tags": ["</b>"]}}))
        .unwrap();
    assert_eq!(
        r["hits"]["hits"][0]["highlight"],
        json!({"title": ["The quick brown <b>fox</b>"]})
    );
}

#[test]
fn result_window_and_request_errors_surface_before_execution() {
    let f = Fixture::products();
    assert_eq!(
        f.search(json!({"from": 9999, "size": 2}))
            .unwrap_err()
            .error_type(),
        "search_phase_execution_exception"
    );
    assert_eq!(
        f.search(json!({"foo": 1})).unwrap_err().error_type(),
        "parsing_exception"
    );
}

#[test]
fn count_shard_counts_matches() {
    let f = Fixture::products();
    let ctx = f.ctx();
    let q = super::test_query(&json!({"term": {"status": "sold"}}), &ctx).unwrap();
    assert_eq!(
        crate::search::count_shard(&f.shards[0].reader.searcher(), q.as_ref()).unwrap(),
        2
    );
}

#[test]
fn the_query_dsl_drives_queries_post_filters_and_filter_aggregations() {
    let f = Fixture::products_two_shards();
    let r = f
        .search_dsl(json!({
            "query": {"bool": {"filter": [{"range": {"price": {"gte": 10}}}]}},
            "post_filter": {"terms": {"status": ["sold", "pending"]}},
            "aggs": {"f": {"filters": {"filters": {"cheap": {"range": {"price": {"lt": 15}}}}}}},
            "sort": ["price"]
        }))
        .unwrap();
    assert_eq!(ids(&r), ["2"]);
    assert_eq!(
        r["aggregations"]["f"]["buckets"]["cheap"]["doc_count"],
        json!(1)
    );
    let r = f
        .search_dsl(json!({"query": {"prefix": {"title": "qui"}}, "highlight": {"fields": {"title": {}}}, "sort": ["_doc"]}))
        .unwrap();
    assert_eq!(
        r["hits"]["hits"][0]["highlight"],
        json!({"title": ["The <em>quick</em> brown fox"]})
    );
    assert_eq!(
        r["hits"]["hits"][1]["highlight"],
        json!({"title": ["<em>Quick</em> <em>quick</em> rabbit"]})
    );
}
