"""Aggregations on the fixed dataset (tests/dataset.py): bucket keys/counts and metric values."""
import pytest

from util import assert_error


def aggs(http, index, aggs_body, query=None):
    body = {"size": 0, "aggs": aggs_body}
    if query:
        body["query"] = query
    r = http.post(f"/{index}/_search", body)
    assert r.status_code == 200, r.text
    return r.json()["aggregations"]


@pytest.fixture(params=["products", "products3"])
def prod(request):
    """Run against 1 shard and 3 shards: results must be merged identically."""
    return request.getfixturevalue(request.param)


def buckets(agg):
    return [(b["key"], b["doc_count"]) for b in agg["buckets"]]


def test_terms(http, prod):
    a = aggs(http, prod, {"t": {"terms": {"field": "tags"}}})["t"]
    assert a["doc_count_error_upper_bound"] == 0 and a["sum_other_doc_count"] == 0
    assert buckets(a) == [("animal", 5), ("vehicle", 3), ("fast", 2), ("slow", 2), ("clever", 1), ("food", 1)]


def test_terms_size_and_other_count(http, prod):
    a = aggs(http, prod, {"t": {"terms": {"field": "tags", "size": 2}}})["t"]
    assert buckets(a) == [("animal", 5), ("vehicle", 3)]
    assert a["sum_other_doc_count"] == 6


def test_terms_order_min_doc_count_missing(http, prod):
    a = aggs(http, prod, {"t": {"terms": {"field": "category", "order": {"_key": "desc"}}}})["t"]
    assert buckets(a) == [("e", 1), ("d", 1), ("c", 3), ("b", 2), ("a", 3)]
    a = aggs(http, prod, {"t": {"terms": {"field": "category", "order": {"_count": "asc"}}}})["t"]
    assert [c for _, c in buckets(a)] == [1, 1, 2, 3, 3]
    a = aggs(http, prod, {"t": {"terms": {"field": "tags", "missing": "none"}}})["t"]
    assert ("none", 1) in buckets(a)
    a = aggs(http, prod, {"t": {"terms": {"field": "tags", "min_doc_count": 3}}})["t"]
    assert buckets(a) == [("animal", 5), ("vehicle", 3)]


def test_terms_on_numbers_and_booleans(http, prod):
    a = aggs(http, prod, {"t": {"terms": {"field": "available"}}})["t"]
    assert a["buckets"] == [{"key": 1, "key_as_string": "true", "doc_count": 7},
                            {"key": 0, "key_as_string": "false", "doc_count": 3}]
    a = aggs(http, prod, {"t": {"terms": {"field": "qty", "size": 2, "order": {"_key": "asc"}}}})["t"]
    assert a["buckets"] == [{"key": 0, "doc_count": 1}, {"key": 1, "doc_count": 1}]


def test_terms_order_by_sub_agg(http, prod):
    a = aggs(http, prod, {"t": {"terms": {"field": "category", "order": {"avg_price": "desc"}},
                                "aggs": {"avg_price": {"avg": {"field": "price"}}}}})["t"]
    assert [b["key"] for b in a["buckets"]] == ["c", "b", "a", "d", "e"]
    assert a["buckets"][0]["avg_price"]["value"] == pytest.approx((15000 + 50000 + 1200) / 3)
    assert a["buckets"][-1]["avg_price"] == {"value": None}


def test_range(http, prod):
    a = aggs(http, prod, {"r": {"range": {"field": "price", "ranges": [
        {"to": 10}, {"from": 10, "to": 100}, {"from": 100, "key": "expensive"}]}}})["r"]
    assert a["buckets"] == [
        {"key": "*-10.0", "to": 10.0, "doc_count": 2},
        {"key": "10.0-100.0", "from": 10.0, "to": 100.0, "doc_count": 4},
        {"key": "expensive", "from": 100.0, "doc_count": 3},
    ]


def test_range_keyed(http, prod):
    a = aggs(http, prod, {"r": {"range": {"field": "qty", "keyed": True, "ranges": [{"to": 5}, {"from": 5}]}}})["r"]
    assert a["buckets"] == {"*-5.0": {"to": 5.0, "doc_count": 5}, "5.0-*": {"from": 5.0, "doc_count": 5}}


def test_date_range(http, prod):
    a = aggs(http, prod, {"r": {"date_range": {"field": "created", "format": "yyyy-MM-dd", "ranges": [
        {"to": "2024-02-01"}, {"from": "2024-02-01", "to": "2024-03-01"}, {"from": "2024-03-01"}]}}})["r"]
    assert a["buckets"] == [
        {"key": "*-2024-02-01", "to": 1706745600000.0, "to_as_string": "2024-02-01", "doc_count": 4},
        {"key": "2024-02-01-2024-03-01", "from": 1706745600000.0, "from_as_string": "2024-02-01",
         "to": 1709251200000.0, "to_as_string": "2024-03-01", "doc_count": 2},
        {"key": "2024-03-01-*", "from": 1709251200000.0, "from_as_string": "2024-03-01", "doc_count": 4},
    ]


def test_histogram(http, prod):
    a = aggs(http, prod, {"h": {"histogram": {"field": "qty", "interval": 5}}})["h"]
    assert a["buckets"] == [{"key": 0.0, "doc_count": 5}, {"key": 5.0, "doc_count": 3},
                            {"key": 10.0, "doc_count": 1}] + [{"key": float(k), "doc_count": 0} for k in range(15, 100, 5)] \
        + [{"key": 100.0, "doc_count": 1}]
    a = aggs(http, prod, {"h": {"histogram": {"field": "qty", "interval": 5, "min_doc_count": 1}}})["h"]
    assert buckets(a) == [(0.0, 5), (5.0, 3), (10.0, 1), (100.0, 1)]


def test_histogram_extended_bounds(http, prod):
    a = aggs(http, prod, {"h": {"histogram": {"field": "qty", "interval": 50,
                                              "extended_bounds": {"min": 0, "max": 200}}}})["h"]
    assert buckets(a) == [(0.0, 9), (50.0, 0), (100.0, 1), (150.0, 0), (200.0, 0)]


def test_date_histogram_calendar_interval(http, prod):
    a = aggs(http, prod, {"h": {"date_histogram": {"field": "created", "calendar_interval": "month"}}})["h"]
    assert a["buckets"] == [
        {"key_as_string": "2023-12-01T00:00:00.000Z", "key": 1701388800000, "doc_count": 1},
        {"key_as_string": "2024-01-01T00:00:00.000Z", "key": 1704067200000, "doc_count": 3},
        {"key_as_string": "2024-02-01T00:00:00.000Z", "key": 1706745600000, "doc_count": 2},
        {"key_as_string": "2024-03-01T00:00:00.000Z", "key": 1709251200000, "doc_count": 3},
        {"key_as_string": "2024-04-01T00:00:00.000Z", "key": 1711929600000, "doc_count": 1},
    ]


def test_date_histogram_fixed_interval_format_min_doc_count(http, prod):
    a = aggs(http, prod, {"h": {"date_histogram": {"field": "created", "fixed_interval": "30d",
                                                   "format": "yyyy-MM-dd", "min_doc_count": 1}}})["h"]
    assert [(b["key_as_string"], b["doc_count"]) for b in a["buckets"]] == \
        [("2023-12-19", 4), ("2024-01-18", 1), ("2024-02-17", 4), ("2024-03-18", 1)]   # epoch-aligned 30d


def test_date_histogram_time_zone(http, prod):
    # doc 8 (2023-12-31T23:00Z) is 2024-01-01 in Paris
    a = aggs(http, prod, {"h": {"date_histogram": {"field": "created", "calendar_interval": "1M",
                                                   "time_zone": "Europe/Paris", "min_doc_count": 1}}})["h"]
    assert [(b["key_as_string"], b["doc_count"]) for b in a["buckets"]] == [
        ("2024-01-01T00:00:00.000+01:00", 4), ("2024-02-01T00:00:00.000+01:00", 2),
        ("2024-03-01T00:00:00.000+01:00", 3), ("2024-04-01T00:00:00.000+02:00", 1)]
    assert a["buckets"][0]["key"] == 1704063600000


def test_date_histogram_extended_bounds(http, prod):
    a = aggs(http, prod, {"h": {"date_histogram": {"field": "created", "calendar_interval": "month",
                                                   "format": "yyyy-MM",
                                                   "extended_bounds": {"min": "2023-10", "max": "2024-05"}}}})["h"]
    assert [(b["key_as_string"], b["doc_count"]) for b in a["buckets"]] == [
        ("2023-10", 0), ("2023-11", 0), ("2023-12", 1), ("2024-01", 3), ("2024-02", 2), ("2024-03", 3),
        ("2024-04", 1), ("2024-05", 0)]


def test_date_histogram_week_and_day(http, prod):
    a = aggs(http, prod, {"h": {"date_histogram": {"field": "created", "calendar_interval": "week",
                                                   "min_doc_count": 1}}})["h"]
    assert a["buckets"][0]["key_as_string"] == "2023-12-25T00:00:00.000Z"     # weeks start on Monday
    assert sum(b["doc_count"] for b in a["buckets"]) == 10


def test_filter_and_filters(http, prod):
    a = aggs(http, prod, {"f": {"filter": {"term": {"tags": "animal"}},
                                "aggs": {"avg": {"avg": {"field": "price"}}}}})["f"]
    assert a["doc_count"] == 5
    assert a["avg"]["value"] == pytest.approx((10 + 20.5 + 30 + 12 + 8) / 5)
    a = aggs(http, prod, {"f": {"filters": {"filters": {"cheap": {"range": {"price": {"lt": 20}}},
                                                        "vehicles": {"term": {"tags": "vehicle"}}}}}})["f"]
    assert a["buckets"] == {"cheap": {"doc_count": 4}, "vehicles": {"doc_count": 3}}
    a = aggs(http, prod, {"f": {"filters": {"filters": [{"term": {"category": "a"}}, {"term": {"category": "b"}}],
                                            "other_bucket": True}}})["f"]
    assert a["buckets"] == [{"doc_count": 3}, {"doc_count": 2}, {"doc_count": 5}]


def test_metric_aggs(http, prod):
    a = aggs(http, prod, {
        "avg": {"avg": {"field": "price"}}, "sum": {"sum": {"field": "qty"}},
        "min": {"min": {"field": "price"}}, "max": {"max": {"field": "price"}},
        "vc": {"value_count": {"field": "price"}}, "card": {"cardinality": {"field": "category"}},
        "stats": {"stats": {"field": "qty"}}, "mind": {"min": {"field": "created"}},
    })
    prices = [10, 20.5, 30, 15000, 50000, 3.5, 12, 8, 1200]
    assert a["avg"]["value"] == pytest.approx(sum(prices) / 9)
    assert a["sum"] == {"value": 141.0}
    assert a["min"] == {"value": 3.5}
    assert a["max"] == {"value": 50000.0}
    assert a["vc"] == {"value": 9}
    assert a["card"] == {"value": 5}
    assert a["stats"] == {"count": 10, "min": 0.0, "max": 100.0, "avg": 14.1, "sum": 141.0}
    assert a["mind"] == {"value": 1704063600000.0, "value_as_string": "2023-12-31T23:00:00.000Z"}


def test_metric_aggs_on_empty_set(http, prod):
    a = aggs(http, prod, {"avg": {"avg": {"field": "price"}}, "sum": {"sum": {"field": "price"}},
                          "min": {"min": {"field": "price"}}, "max": {"max": {"field": "price"}},
                          "stats": {"stats": {"field": "price"}}, "vc": {"value_count": {"field": "price"}}},
             query={"match_none": {}})
    assert a["avg"] == {"value": None}
    assert a["sum"] == {"value": 0.0}
    assert a["min"] == {"value": None} and a["max"] == {"value": None}
    assert a["stats"] == {"count": 0, "min": None, "max": None, "avg": None, "sum": 0.0}
    assert a["vc"] == {"value": 0}


def test_extended_stats(http, prod):
    a = aggs(http, prod, {"es": {"extended_stats": {"field": "qty"}}})["es"]
    assert a["count"] == 10 and a["sum"] == 141.0 and a["avg"] == pytest.approx(14.1)
    assert a["sum_of_squares"] == 10285.0
    assert a["variance"] == pytest.approx(829.69)
    assert a["std_deviation"] == pytest.approx(829.69 ** 0.5)
    assert set(a) >= {"variance_population", "variance_sampling", "std_deviation_population",
                      "std_deviation_sampling", "std_deviation_bounds"}
    assert set(a["std_deviation_bounds"]) >= {"upper", "lower"}


def test_percentiles(http, prod):
    a = aggs(http, prod, {"p": {"percentiles": {"field": "qty", "percents": [50, 100]}}})["p"]
    assert list(a["values"]) == ["50.0", "100.0"]
    assert a["values"]["100.0"] == 100.0
    assert 3 <= a["values"]["50.0"] <= 7
    a = aggs(http, prod, {"p": {"percentiles": {"field": "qty"}}})["p"]
    assert list(a["values"]) == ["1.0", "5.0", "25.0", "50.0", "75.0", "95.0", "99.0"]
    a = aggs(http, prod, {"p": {"percentiles": {"field": "qty", "percents": [50], "keyed": False}}})["p"]
    assert a["values"][0]["key"] == 50.0 and "value" in a["values"][0]


def test_top_hits(http, prod):
    a = aggs(http, prod, {"t": {"terms": {"field": "category", "size": 1},
                                "aggs": {"top": {"top_hits": {"size": 2, "sort": [{"price": "desc"}],
                                                              "_source": ["title"]}}}}})["t"]
    b = a["buckets"][0]
    assert b["key"] == "a" and b["doc_count"] == 3
    hits = b["top"]["hits"]
    assert hits["total"] == {"value": 3, "relation": "eq"}
    assert [h["_id"] for h in hits["hits"]] == ["2", "1"]
    assert hits["hits"][0]["_source"] == {"title": "The lazy dog sleeps"}
    assert hits["hits"][0]["sort"] == [20.5]


def test_sub_aggregations(http, prod):
    a = aggs(http, prod, {"cat": {"terms": {"field": "category", "order": {"_key": "asc"}}, "aggs": {
        "months": {"date_histogram": {"field": "created", "calendar_interval": "month", "min_doc_count": 1},
                   "aggs": {"q": {"sum": {"field": "qty"}}}},
        "maxp": {"max": {"field": "price"}}}}})["cat"]
    first = a["buckets"][0]
    assert first["key"] == "a" and first["doc_count"] == 3
    assert [(m["key_as_string"], m["doc_count"], m["q"]["value"]) for m in first["months"]["buckets"]] == \
        [("2024-01-01T00:00:00.000Z", 3, 17.0)]
    assert first["maxp"]["value"] == 20.5


def test_aggs_with_query_and_hits(http, prod):
    r = http.post(f"/{prod}/_search", {"query": {"term": {"tags": "vehicle"}}, "size": 1,
                                       "aggs": {"c": {"terms": {"field": "category"}}}}).json()
    assert r["hits"]["total"]["value"] == 3 and len(r["hits"]["hits"]) == 1
    assert buckets(r["aggregations"]["c"]) == [("c", 3)]


def test_aggregations_keyword_alias(http, prod):
    r = http.post(f"/{prod}/_search", {"size": 0, "aggregations": {"m": {"max": {"field": "qty"}}}}).json()
    assert r["aggregations"] == {"m": {"value": 100.0}}


def test_unknown_aggregation_refused(http, products):
    r = http.post(f"/{products}/_search", {"size": 0, "aggs": {"x": {"no_such_agg": {"field": "qty"}}}})
    assert_error(r, 400, "parsing_exception", reason="Unknown aggregation type [no_such_agg]")


def test_terms_agg_on_text_field_refused(http, products):
    r = http.post(f"/{products}/_search", {"size": 0, "aggs": {"x": {"terms": {"field": "title"}}}})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "search_phase_execution_exception"
    assert err["root_cause"][0]["type"] == "illegal_argument_exception"
    assert "Text fields are not optimised" in err["root_cause"][0]["reason"]


TOO_MANY = ("Trying to create too many buckets. Must be less than or equal to: [{max}] but was [{count}]. "
            "This limit can be set by changing the [search.max_buckets] cluster level setting.")


def too_many_buckets(r, max_buckets):
    assert r.status_code == 400, r.text
    cause = r.json()["error"]["root_cause"][0]
    assert cause["type"] == "too_many_buckets_exception", cause
    assert cause["max_buckets"] == max_buckets, cause
    assert cause["reason"].startswith(TOO_MANY.split(" but was")[0].format(max=max_buckets)), cause
    return cause


def test_histogram_with_a_huge_range_is_too_many_buckets_not_a_500(http, prod):
    r = http.post(f"/{prod}/_search", {"size": 0, "aggs": {"h": {"histogram": {
        "field": "qty", "interval": 1, "min_doc_count": 0, "extended_bounds": {"min": 0, "max": 10_000_000_000}}}}})
    cause = too_many_buckets(r, 65535)
    assert cause["reason"] == TOO_MANY.format(max=65535, count=10_000_000_001)


def test_histogram_extended_and_hard_bounds_fill_empty_buckets(http, prod):
    a = aggs(http, prod, {"h": {"histogram": {"field": "qty", "interval": 50, "min_doc_count": 0,
                                              "extended_bounds": {"min": -100, "max": 250}}}})["h"]
    assert buckets(a) == [(-100.0, 0), (-50.0, 0), (0.0, 9), (50.0, 0), (100.0, 1), (150.0, 0), (200.0, 0), (250.0, 0)]
    a = aggs(http, prod, {"h": {"histogram": {"field": "qty", "interval": 50, "min_doc_count": 0,
                                              "extended_bounds": {"min": -100, "max": 250},
                                              "hard_bounds": {"min": 0, "max": 100}}}})["h"]
    assert buckets(a) == [(0.0, 9), (50.0, 0), (100.0, 1)]
    r = http.post(f"/{prod}/_search", {"size": 0, "aggs": {"h": {"histogram": {
        "field": "qty", "interval": 5, "extended_bounds": {"min": 10, "max": 0}}}}})
    assert r.status_code == 400, r.text


def test_date_histogram_with_a_tiny_interval_is_too_many_buckets(http, prod):
    r = http.post(f"/{prod}/_search", {"size": 0, "aggs": {"d": {"date_histogram": {
        "field": "created", "fixed_interval": "1s", "min_doc_count": 0}}}})
    too_many_buckets(r, 65535)


def test_huge_terms_size_is_not_an_error(http, prod):
    a = aggs(http, prod, {"t": {"terms": {"field": "tags", "size": 2_000_000_000}}})["t"]
    assert buckets(a)[0] == ("animal", 5)


def test_search_max_buckets_is_a_dynamic_cluster_setting(http, prod):
    body = {"size": 0, "aggs": {"t": {"terms": {"field": "category"}}}}
    try:
        r = http.put("/_cluster/settings", {"persistent": {"search.max_buckets": 3}})
        assert r.status_code == 200, r.text
        assert r.json()["persistent"]["search"]["max_buckets"] == "3"
        too_many_buckets(http.post(f"/{prod}/_search", body), 3)
        small = {"size": 0, "aggs": {"t": {"terms": {"field": "category", "size": 3}}}}
        assert http.post(f"/{prod}/_search", small).status_code == 200
        # sub-aggregation buckets count too
        nested = {"size": 0, "aggs": {"t": {"terms": {"field": "category", "size": 2},
                                            "aggs": {"u": {"terms": {"field": "tags"}}}}}}
        too_many_buckets(http.post(f"/{prod}/_search", nested), 3)
        for bad in (-1, "many"):
            r = http.put("/_cluster/settings", {"persistent": {"search.max_buckets": bad}})
            assert_error(r, 400, "illegal_argument_exception",
                         reason_re=r"Failed to parse value \[.*\] for setting \[search.max_buckets\]")
    finally:
        http.put("/_cluster/settings", {"persistent": {"search.max_buckets": None}})
    assert http.post(f"/{prod}/_search", body).status_code == 200


def test_show_term_doc_count_error_adds_a_per_bucket_bound(http, prod):
    a = aggs(http, prod, {"t": {"terms": {"field": "tags", "size": 2, "show_term_doc_count_error": True}}})["t"]
    assert [b["doc_count_error_upper_bound"] for b in a["buckets"]] == [0, 0]
    assert a["doc_count_error_upper_bound"] == 0


def test_a_numeric_missing_value_that_is_not_a_number_is_refused(http, prod):
    r = http.post(f"/{prod}/_search", {"size": 0, "aggs": {"a": {"avg": {"field": "qty", "missing": "abc"}}}})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["root_cause"][0]["type"] == "number_format_exception"
    # product 8 has no price
    a = aggs(http, prod, {"a": {"max": {"field": "price", "missing": "99999"}}})["a"]
    assert a["value"] == 99999.0
