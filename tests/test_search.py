"""The search API around the query: response shape, sort, paging, _source filtering, totals, highlight,
scroll, search_after, msearch, count, multi-index targets."""
import json

import pytest

from util import assert_error


def search(http, index, body=None, **params):
    r = http.post(f"/{index}/_search", body or {}, params=params or None)
    assert r.status_code == 200, r.text
    return r.json()


def hit_ids(r):
    return [h["_id"] for h in r["hits"]["hits"]]


def test_search_response_shape(http, products):
    r = search(http, products, {"query": {"term": {"tags": "food"}}})
    assert set(r) == {"took", "timed_out", "_shards", "hits"}
    assert isinstance(r["took"], int) and r["timed_out"] is False
    assert r["_shards"] == {"total": 1, "successful": 1, "skipped": 0, "failed": 0}
    hits = r["hits"]
    assert hits["total"] == {"value": 1, "relation": "eq"}
    assert isinstance(hits["max_score"], float)
    h = hits["hits"][0]
    assert set(h) == {"_index", "_id", "_score", "_source"}
    assert h["_index"] == products and h["_id"] == "6"
    assert h["_source"]["title"] == "Brown bread recipe"


def test_search_get_with_body_and_q_param(http, products):
    r = http.request("GET", f"/{products}/_search", json.dumps({"query": {"term": {"category": "d"}}}))
    assert r.status_code == 200 and hit_ids(r.json()) == ["6"]
    r = http.get(f"/{products}/_search", params={"q": "title:bread"})
    assert hit_ids(r.json()) == ["6"]
    r = http.get(f"/{products}/_search", params={"q": "category:c", "size": 1, "sort": "price:desc"})
    assert hit_ids(r.json()) == ["5"]


def test_search_without_body_is_match_all_size_10(http, products):
    r = http.get(f"/{products}/_search").json()
    assert r["hits"]["total"]["value"] == 10
    assert len(r["hits"]["hits"]) == 10


def test_default_size_is_10(http, index):
    http.bulk([x for i in range(15) for x in ({"index": {"_index": index, "_id": str(i)}}, {"n": i})],
              params={"refresh": "true"})
    r = search(http, index)
    assert len(r["hits"]["hits"]) == 10 and r["hits"]["total"]["value"] == 15


def test_sort_by_field_and_order(http, products):
    r = search(http, products, {"sort": [{"price": "asc"}], "size": 3})
    assert hit_ids(r) == ["6", "9", "1"]
    h = r["hits"]["hits"][0]
    assert h["_score"] is None and h["sort"] == [3.5]
    assert r["hits"]["max_score"] is None
    r = search(http, products, {"sort": [{"price": {"order": "desc"}}], "size": 2})
    assert hit_ids(r) == ["5", "4"]


def test_sort_missing_values(http, products):
    # doc 8 has no price: last by default in both orders, or first with missing=_first
    r = search(http, products, {"sort": [{"price": "asc"}], "size": 10})
    assert hit_ids(r)[-1] == "8"
    last = r["hits"]["hits"][-1]
    assert last["sort"] == ["Infinity"]        # a missing double sorts as +Infinity (asc), rendered as a string
    r = search(http, products, {"sort": [{"price": {"order": "desc"}}], "size": 10})
    assert hit_ids(r)[-1] == "8"
    assert r["hits"]["hits"][-1]["sort"] == ["-Infinity"]
    r = search(http, products, {"sort": [{"price": {"order": "asc", "missing": "_first"}}], "size": 1})
    assert hit_ids(r) == ["8"]
    r = search(http, products, {"sort": [{"price": {"order": "asc", "missing": 0}}], "size": 1})
    assert hit_ids(r) == ["8"]


def test_sort_multiple_keys_keyword_and_date(http, products):
    r = search(http, products, {"sort": [{"category": "asc"}, {"created": "desc"}], "size": 4})
    assert hit_ids(r) == ["2", "9", "1", "7"]
    assert r["hits"]["hits"][0]["sort"] == ["a", 1705320000000]


@pytest.mark.shoal_gap("BM25 field-length norms are per tantivy JSON field (all text fields of one analyzer share them), so scores differ from Lucene's per-field norms")
def test_sort_by_score_and_doc(http, products):
    r = search(http, products, {"query": {"match": {"title": "brown fox"}}, "sort": ["_score"]})
    assert hit_ids(r) == ["9", "1", "6", "3"]
    # sorting by _score alone is the default sort: no "sort" values in the hits
    assert "sort" not in r["hits"]["hits"][0]
    assert isinstance(r["hits"]["hits"][0]["_score"], float)
    r = search(http, products, {"sort": ["_doc"], "size": 3})
    assert len(hit_ids(r)) == 3
    r = search(http, products, {"query": {"match": {"title": "brown fox"}},
                                "sort": [{"_score": "asc"}, {"price": "asc"}]})
    assert hit_ids(r) == ["3", "6", "1", "9"]


def test_sort_track_scores(http, products):
    r = search(http, products, {"query": {"match": {"title": "fox"}}, "sort": [{"price": "asc"}],
                                "track_scores": True})
    assert all(isinstance(h["_score"], float) for h in r["hits"]["hits"])
    assert isinstance(r["hits"]["max_score"], float)


def test_sort_on_text_field_refused(http, products):
    r = http.post(f"/{products}/_search", {"sort": [{"title": "asc"}]})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "search_phase_execution_exception"
    assert err["reason"] == "all shards failed"
    assert err["phase"] == "query"
    assert err["root_cause"][0]["type"] == "illegal_argument_exception"
    assert err["root_cause"][0]["reason"].startswith("Text fields are not optimised for operations that require per-document field data")
    assert err["failed_shards"][0]["reason"]["type"] == "illegal_argument_exception"


def test_sort_param_in_url(http, products):
    r = http.get(f"/{products}/_search", params={"sort": "qty:desc", "size": 2}).json()
    assert hit_ids(r) == ["6", "3"]


def test_from_and_size(http, products):
    all_ids = hit_ids(search(http, products, {"sort": [{"qty": "asc"}], "size": 10}))
    page = hit_ids(search(http, products, {"sort": [{"qty": "asc"}], "from": 3, "size": 4}))
    assert page == all_ids[3:7]
    r = search(http, products, {"from": 20, "size": 5})
    assert r["hits"]["hits"] == [] and r["hits"]["total"]["value"] == 10
    r = search(http, products, {"size": 0})
    assert r["hits"]["hits"] == [] and r["hits"]["total"]["value"] == 10


def test_max_result_window(http, products):
    r = http.post(f"/{products}/_search", {"from": 9995, "size": 10})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "search_phase_execution_exception"
    rc = err["root_cause"][0]
    assert rc["type"] == "illegal_argument_exception"
    assert rc["reason"] == ("Result window is too large, from + size must be less than or equal to: [10000] but was [10005]. "
                            "See the scroll api for a more efficient way to request large data sets. This limit can be set "
                            "by changing the [index.max_result_window] index level setting.")
    assert http.post(f"/{products}/_search", {"from": 9990, "size": 10}).status_code == 200


def test_max_result_window_setting(http, index):
    http.put(f"/{index}/_settings", {"index.max_result_window": 5})
    r = http.post(f"/{index}/_search", {"size": 6})
    assert r.status_code == 400
    assert "[5] but was [6]" in r.json()["error"]["root_cause"][0]["reason"]


def test_negative_size_refused(http, products):
    r = http.post(f"/{products}/_search", {"size": -1})
    assert_error(r, 400, "illegal_argument_exception", reason="[size] parameter cannot be negative, found [-1]")


def test_source_filtering(http, products):
    r = search(http, products, {"query": {"ids": {"values": ["1"]}}, "_source": ["title", "tags"]})
    assert r["hits"]["hits"][0]["_source"] == {"title": "The quick brown fox", "tags": ["animal", "fast"]}
    r = search(http, products, {"query": {"ids": {"values": ["1"]}}, "_source": False})
    assert "_source" not in r["hits"]["hits"][0]
    r = search(http, products, {"query": {"ids": {"values": ["1"]}},
                                "_source": {"includes": ["t*"], "excludes": ["tags"]}})
    assert r["hits"]["hits"][0]["_source"] == {"title": "The quick brown fox"}
    r = search(http, products, {"query": {"ids": {"values": ["1"]}}, "_source": "price"})
    assert r["hits"]["hits"][0]["_source"] == {"price": 10.0}
    r = http.get(f"/{products}/_search", params={"q": "_id:1", "_source_includes": "qty"}).json()
    assert r["hits"]["hits"][0]["_source"] == {"qty": 5}


def test_track_total_hits(http, index):
    http.bulk([x for i in range(30) for x in ({"index": {"_index": index, "_id": str(i)}}, {"n": i})],
              params={"refresh": "true"})
    r = search(http, index, {"track_total_hits": 10, "size": 1})
    assert r["hits"]["total"] == {"value": 10, "relation": "gte"}
    r = search(http, index, {"track_total_hits": 100, "size": 1})
    assert r["hits"]["total"] == {"value": 30, "relation": "eq"}
    r = search(http, index, {"track_total_hits": True, "size": 1})
    assert r["hits"]["total"] == {"value": 30, "relation": "eq"}
    r = search(http, index, {"track_total_hits": False, "size": 1})
    assert "total" not in r["hits"]
    r = http.get(f"/{index}/_search", params={"track_total_hits": "5", "size": 0}).json()
    assert r["hits"]["total"] == {"value": 5, "relation": "gte"}


def test_track_total_hits_default_is_10000(http, index):
    lines = []
    for i in range(10050):
        lines += [{"index": {"_index": index}}, {"n": i}]
    http.bulk(lines, params={"refresh": "true"})
    r = search(http, index, {"size": 0})
    assert r["hits"]["total"] == {"value": 10000, "relation": "gte"}
    assert http.post(f"/{index}/_count").json()["count"] == 10050


def test_rest_total_hits_as_int(http, products):
    r = http.get(f"/{products}/_search", params={"rest_total_hits_as_int": "true", "size": 0}).json()
    assert r["hits"]["total"] == 10


def test_timeout_and_terminate_after(http, products):
    r = search(http, products, {"timeout": "10s"})
    assert r["timed_out"] is False
    r = search(http, products, {"terminate_after": 2, "size": 10})
    assert r["terminated_early"] is True
    assert r["hits"]["total"]["value"] == 2


def test_highlight_plain(http, products):
    r = search(http, products, {"query": {"match": {"title": "fox"}},
                                "highlight": {"type": "plain", "fields": {"title": {}}}})
    hl = {h["_id"]: h["highlight"] for h in r["hits"]["hits"]}
    assert hl["1"] == {"title": ["The quick brown <em>fox</em>"]}
    assert hl["9"] == {"title": ["Brown <em>fox</em> brown <em>fox</em> brown <em>fox</em>"]}


def test_highlight_tags_and_fragment_size(http, products):
    r = search(http, products, {"query": {"match": {"title": "bread"}},
                                "highlight": {"pre_tags": ["<b>"], "post_tags": ["</b>"],
                                              "fields": {"title": {"type": "plain"}}}})
    assert r["hits"]["hits"][0]["highlight"] == {"title": ["Brown <b>bread</b> recipe"]}
    r = search(http, products, {"query": {"match": {"body": "fox"}},
                                "highlight": {"type": "plain", "fragment_size": 20, "number_of_fragments": 1,
                                              "fields": {"body": {}}}})
    for h in r["hits"]["hits"]:
        frags = h["highlight"]["body"]
        assert len(frags) == 1
        assert "<em>" in frags[0]
    r = search(http, products, {"query": {"match": {"body": "clever"}},
                                "highlight": {"type": "plain", "number_of_fragments": 0, "fields": {"body": {}}}})
    assert r["hits"]["hits"][0]["highlight"] == {"body": ["A <em>clever</em> fox outsmarts the hounds"]}


def test_highlight_default_type(http, products):
    r = search(http, products, {"query": {"match": {"title": "recipe"}}, "highlight": {"fields": {"title": {}}}})
    assert r["hits"]["hits"][0]["highlight"] == {"title": ["Brown bread <em>recipe</em>"]}


def test_scroll(http, index):
    http.bulk([x for i in range(25) for x in ({"index": {"_index": index, "_id": str(i)}}, {"n": i})],
              params={"refresh": "true"})
    r = http.post(f"/{index}/_search", {"size": 10, "sort": ["n"]}, params={"scroll": "1m"}).json()
    sid = r["_scroll_id"]
    assert isinstance(sid, str) and sid
    seen = [h["_source"]["n"] for h in r["hits"]["hits"]]
    while True:
        r = http.post("/_search/scroll", {"scroll": "1m", "scroll_id": sid})
        assert r.status_code == 200, r.text
        r = r.json()
        if not r["hits"]["hits"]:
            break
        assert r["hits"]["total"]["value"] == 25
        seen += [h["_source"]["n"] for h in r["hits"]["hits"]]
        sid = r["_scroll_id"]
    assert seen == list(range(25))
    r = http.delete("/_search/scroll", {"scroll_id": sid})
    assert r.status_code == 200
    assert r.json() == {"succeeded": True, "num_freed": 1}
    r = http.post("/_search/scroll", {"scroll": "1m", "scroll_id": sid})
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "search_phase_execution_exception"
    assert r.json()["error"]["root_cause"][0]["type"] == "search_context_missing_exception"


def test_scroll_sees_snapshot(http, index):
    http.bulk([x for i in range(4) for x in ({"index": {"_index": index, "_id": str(i)}}, {"n": i})],
              params={"refresh": "true"})
    r = http.post(f"/{index}/_search", {"size": 2, "sort": ["n"]}, params={"scroll": "1m"}).json()
    http.delete(f"/{index}/_doc/3", params={"refresh": "true"})
    r2 = http.post("/_search/scroll", {"scroll": "1m", "scroll_id": r["_scroll_id"]}).json()
    assert [h["_id"] for h in r2["hits"]["hits"]] == ["2", "3"]
    http.delete("/_search/scroll/_all")


def test_clear_scroll_all_and_unknown(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1}, params={"refresh": "true"})
    http.post(f"/{index}/_search", {"size": 1}, params={"scroll": "1m"})
    r = http.delete("/_search/scroll/_all")
    assert r.status_code == 200
    assert r.json()["succeeded"] is True and r.json()["num_freed"] >= 1


def test_search_after(http, products):
    body = {"size": 3, "sort": [{"qty": "asc"}, {"sku": "asc"}]}
    r = search(http, products, body)
    seen = hit_ids(r)
    while True:
        body["search_after"] = r["hits"]["hits"][-1]["sort"]
        r = search(http, products, body)
        if not r["hits"]["hits"]:
            break
        seen += hit_ids(r)
    assert seen == ["8", "4", "5", "2", "10", "1", "7", "9", "3", "6"]


def test_search_after_requires_sort(http, products):
    r = http.post(f"/{products}/_search", {"search_after": [1]})
    assert r.status_code == 400
    assert r.json()["error"]["root_cause"][0]["reason"] == "Sort must contain at least one field."


def test_search_multi_index_wildcard_alias(http, index_name):
    for s in ("-a", "-b"):
        http.put(f"/{index_name}{s}", {"settings": {"number_of_replicas": 0}})
        http.put(f"/{index_name}{s}/_doc/1", {"src": s}, params={"refresh": "true"})
    r = search(http, f"{index_name}-a,{index_name}-b")
    assert r["hits"]["total"]["value"] == 2 and r["_shards"]["total"] == 2
    assert {h["_index"] for h in r["hits"]["hits"]} == {f"{index_name}-a", f"{index_name}-b"}
    assert search(http, f"{index_name}-*")["hits"]["total"]["value"] == 2
    http.post("/_aliases", {"actions": [{"add": {"index": f"{index_name}-a", "alias": f"{index_name}-al"}}]})
    assert search(http, f"{index_name}-al")["hits"]["total"]["value"] == 1
    r = http.post("/_search", {"query": {"term": {"src.keyword": "-b"}}}).json()
    assert {h["_index"] for h in r["hits"]["hits"]} >= {f"{index_name}-b"}
    r = http.post(f"/{index_name}-nope*/_search").json()
    assert r["hits"]["total"]["value"] == 0 and r["_shards"]["total"] == 0


def test_search_missing_index(http, index_name):
    r = http.post(f"/{index_name}/_search")
    assert_error(r, 404, "index_not_found_exception", reason=f"no such index [{index_name}]")
    r = http.post(f"/{index_name}/_search", params={"ignore_unavailable": "true"})
    assert r.status_code == 200 and r.json()["hits"]["total"]["value"] == 0


def test_search_across_shards_merges(http, products3):
    r = search(http, products3, {"sort": [{"price": "desc"}], "size": 3})
    assert r["_shards"] == {"total": 3, "successful": 3, "skipped": 0, "failed": 0}
    assert hit_ids(r) == ["5", "4", "10"]
    assert search(http, products3, {"size": 0})["hits"]["total"]["value"] == 10
    r = search(http, products3, {"sort": [{"qty": "asc"}], "from": 2, "size": 3})
    assert hit_ids(r) == ["5", "2", "10"]


def test_explain_or_refused(http, products, is_shoal):
    r = http.post(f"/{products}/_search", {"query": {"match": {"title": "bread"}}, "explain": True})
    if is_shoal and r.status_code == 400:
        return   # may be refused
    assert r.status_code == 200
    assert "_explanation" in r.json()["hits"]["hits"][0]


# ---------------------------------------------------------------- count

def test_count(http, products):
    r = http.post(f"/{products}/_count", {"query": {"term": {"tags": "animal"}}})
    assert r.status_code == 200
    assert r.json() == {"count": 5, "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0}}
    assert http.get(f"/{products}/_count").json()["count"] == 10
    assert http.get(f"/{products}/_count", params={"q": "category:c"}).json()["count"] == 3


def test_count_all_indices(http, products):
    assert http.get("/_count").json()["count"] >= 10


# ---------------------------------------------------------------- msearch

def test_msearch(http, products):
    lines = [{"index": products}, {"query": {"term": {"tags": "food"}}},
             {}, {"query": {"term": {"category": "c"}}, "size": 0},
             {"index": products + "-missing"}, {"query": {"match_all": {}}},
             {"index": products}, {"sort": [{"title": "asc"}]}]
    r = http.bulk(lines, path=f"/{products}/_msearch")
    assert r.status_code == 200
    body = r.json()
    assert isinstance(body["took"], int)
    resp = body["responses"]
    assert len(resp) == 4
    assert [h["_id"] for h in resp[0]["hits"]["hits"]] == ["6"]
    assert resp[0]["status"] == 200
    assert resp[1]["hits"]["total"]["value"] == 3
    assert resp[2]["status"] == 404
    assert resp[2]["error"]["type"] == "index_not_found_exception"
    assert resp[3]["status"] == 400
    assert resp[3]["error"]["type"] == "search_phase_execution_exception"
    assert resp[3]["error"]["root_cause"][0]["type"] == "illegal_argument_exception"


def test_msearch_unparseable_query_fails_whole_request(http, products):
    lines = [{"index": products}, {"query": {"match_all": {}}}, {"index": products}, {"query": {"no_such_query": {}}}]
    r = http.bulk(lines, path="/_msearch")
    err = assert_error(r, 400, "parsing_exception", reason="unknown query [no_such_query]")
    assert err["line"] == 1 and err["col"] == 29


def test_msearch_with_client(client, products):
    r = client.msearch(body=[{"index": products}, {"query": {"match_all": {}}, "size": 1}])
    assert r["responses"][0]["hits"]["total"]["value"] == 10


def test_clear_all_scrolls_with_none_open_is_200(http):
    http.delete("/_search/scroll/_all")
    r = http.delete("/_search/scroll/_all")
    assert r.status_code == 200, r.text
    assert r.json() == {"succeeded": True, "num_freed": 0}
    r = http.delete("/_search/scroll", {"scroll_id": ["DXF1ZXJ5QW5kRmV0Y2gBAAAAAAAAAAEWZm9v"]})
    assert r.status_code == 404, r.text
    assert r.json() == {"succeeded": True, "num_freed": 0}


def test_close_with_an_open_scroll_then_reopen_serves_at_once(http, index):
    http.bulk([x for i in range(5) for x in ({"index": {"_index": index, "_id": str(i)}}, {"n": i})],
              params={"refresh": "true"})
    r = http.post(f"/{index}/_search", {"size": 2, "sort": ["n"]}, params={"scroll": "5m"}).json()
    sid = r["_scroll_id"]
    assert http.post(f"/{index}/_close").status_code == 200
    r = http.post(f"/{index}/_open", params={"wait_for_active_shards": "1"})
    assert r.status_code == 200, r.text
    health = http.get(f"/_cluster/health/{index}", params={"wait_for_status": "yellow", "timeout": "10s"}).json()
    assert health["status"] in ("green", "yellow"), health
    r = http.get(f"/{index}/_count")
    assert r.status_code == 200, r.text
    assert r.json()["count"] == 5
    assert http.put(f"/{index}/_doc/9", {"n": 9}).status_code == 201
    # the scroll's contexts went with the close
    search_stats = http.get(f"/{index}/_stats/search").json()["_all"]["total"]["search"]
    assert search_stats["scroll_current"] == 0 and search_stats["open_contexts"] == 0, search_stats
    r = http.post("/_search/scroll", {"scroll": "1m", "scroll_id": sid})
    assert r.status_code == 404, r.text
    assert r.json()["error"]["root_cause"][0]["type"] == "search_context_missing_exception"
    http.delete("/_search/scroll/_all")


@pytest.mark.parametrize("expand", ["all", "open,closed"])
@pytest.mark.parametrize("action", ["_delete_by_query", "_update_by_query", "_search"])
def test_wildcards_over_a_closed_index_refuse_it_not_503(http, index_name, expand, action):
    for suffix in ("-open", "-closed"):
        r = http.put(f"/{index_name}{suffix}", {"settings": {"number_of_replicas": 0}})
        assert r.status_code == 200, r.text
    http.put(f"/{index_name}-open/_doc/1", {"n": 1}, params={"refresh": "true"})
    assert http.post(f"/{index_name}-closed/_close").status_code == 200
    body = {"query": {"term": {"n": 99}}}
    r = http.post(f"/{index_name}-*/{action}", body, params={"expand_wildcards": expand})
    err = assert_error(r, 400, "index_closed_exception")
    assert err["index"] == f"{index_name}-closed"
    r = http.post(f"/{index_name}-*/{action}", body,
                  params={"expand_wildcards": expand, "ignore_unavailable": "true"})
    assert r.status_code == 200, r.text
    # the default (open only) and hidden skip the closed index
    for params in ({}, {"expand_wildcards": "open,hidden"}):
        r = http.post(f"/{index_name}-*/{action}", body, params=params)
        assert r.status_code == 200, r.text


def test_scroll_current_counts_open_scrolls_until_cleared(http, index):
    http.bulk([x for i in range(5) for x in ({"index": {"_index": index, "_id": str(i)}}, {"n": i})],
              params={"refresh": "true"})

    def current():
        return http.get(f"/{index}/_stats/search").json()["_all"]["total"]["search"]["scroll_current"]

    sids = [http.post(f"/{index}/_search", {"size": 1}, params={"scroll": "1m"}).json()["_scroll_id"]
            for _ in range(2)]
    assert current() == 2
    assert http.delete("/_search/scroll", {"scroll_id": sids[0]}).status_code == 200
    assert current() == 1
    assert http.delete("/_search/scroll/_all").json()["num_freed"] >= 1
    assert current() == 0
