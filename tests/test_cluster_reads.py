"""Distributed reads on a cluster of real processes: searches fan out to every shard wherever
it is (query then fetch phase), gets go to the node holding the copy, scrolls and by-query
operations span nodes, and a node that dies turns into reported shard failures (or a 503 when
partial results are not allowed) instead of silently missing documents.
"""

from __future__ import annotations


import pytest

from cluster import ShoalCluster

pytestmark = pytest.mark.cluster

DOCS = 240


@pytest.fixture(scope="module")
def spread(tmp_path_factory):
    """3 nodes; index `reads` with 6 primaries (2 per node) and DOCS documents."""
    with ShoalCluster(tmp_path_factory.mktemp("reads"), 3) as c:
        r = c.http(0).put("/reads", {"settings": {"number_of_shards": 6, "number_of_replicas": 0},
                                     "mappings": {"properties": {"n": {"type": "long"},
                                                                 "colour": {"type": "keyword"},
                                                                 "text": {"type": "text"}}}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green")
        c.bulk(1, "reads", coloured(range(DOCS)), refresh="false")
        r = c.http(2).post("/reads/_refresh")
        assert r.status_code == 200 and r.json()["_shards"]["successful"] == 6, r.text
        yield c


def coloured(ids) -> dict:
    return {n: {"n": n, "colour": ["red", "green", "blue"][n % 3], "text": f"document number {n}"} for n in ids}


def search(c: ShoalCluster, i: int, body: dict, **params) -> dict:
    r = c.http(i).post("/reads/_search", body, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_search_through_any_node_sees_every_shard(spread):
    for i in range(3):
        body = search(spread, i, {"query": {"match_all": {}}, "size": 5, "track_total_hits": True})
        assert body["hits"]["total"]["value"] == DOCS
        assert body["_shards"] == {"total": 6, "successful": 6, "skipped": 0, "failed": 0}
        assert len(body["hits"]["hits"]) == 5
        assert all("_source" in h for h in body["hits"]["hits"])


def test_sorted_pages_are_identical_from_every_node_and_fetch_the_right_sources(spread):
    pages = []
    for i in range(3):
        body = search(spread, i, {"sort": [{"n": "desc"}], "from": 10, "size": 7})
        hits = body["hits"]["hits"]
        assert [h["_source"]["n"] for h in hits] == list(range(DOCS - 11, DOCS - 18, -1))
        assert all(h["_id"] == str(h["_source"]["n"]) for h in hits)
        pages.append([h["_id"] for h in hits])
    assert pages[0] == pages[1] == pages[2]


def test_aggregations_merge_partials_from_all_nodes(spread):
    body = search(spread, 2, {"size": 0, "aggs": {"c": {"terms": {"field": "colour"}},
                                                   "total": {"sum": {"field": "n"}}}})
    buckets = {b["key"]: b["doc_count"] for b in body["aggregations"]["c"]["buckets"]}
    assert buckets == {"red": DOCS // 3, "green": DOCS // 3, "blue": DOCS // 3}
    assert body["aggregations"]["total"]["value"] == sum(range(DOCS))


def test_get_and_mget_reach_the_node_holding_the_document(spread):
    for i in range(3):
        for doc_id in ("0", "1", "2", "3", "4", "5", "117"):
            r = spread.http(i).get(f"/reads/_doc/{doc_id}")
            assert r.status_code == 200, r.text
            assert r.json()["_source"]["n"] == int(doc_id)
        assert spread.http(i).get("/reads/_doc/missing").status_code == 404
    r = spread.http(0).post("/_mget", {"docs": [{"_index": "reads", "_id": str(n)} for n in range(12)]})
    assert [d["found"] for d in r.json()["docs"]] == [True] * 12


def test_count_and_cat_count_through_any_node(spread):
    for i in range(3):
        r = spread.http(i).post("/reads/_count", {"query": {"term": {"colour": "red"}}})
        assert r.json()["count"] == DOCS // 3
        assert r.json()["_shards"]["successful"] == 6


def test_scroll_walks_every_document_once_across_nodes(spread):
    r = spread.http(1).post("/reads/_search", {"size": 50, "sort": ["_doc"]}, params={"scroll": "1m"})
    assert r.status_code == 200, r.text
    body = r.json()
    seen = [h["_id"] for h in body["hits"]["hits"]]
    while body["hits"]["hits"]:
        r = spread.http(1).post("/_search/scroll", {"scroll": "1m", "scroll_id": body["_scroll_id"]})
        assert r.status_code == 200, r.text
        body = r.json()
        seen.extend(h["_id"] for h in body["hits"]["hits"])
    assert sorted(seen, key=int) == [str(n) for n in range(DOCS)]
    r = spread.http(1).delete("/_search/scroll", {"scroll_id": body["_scroll_id"]})
    assert r.json()["num_freed"] == 1


def test_preference_values(spread):
    assert search(spread, 0, {"size": 0}, preference="_primary")["hits"]["total"]["value"] == DOCS
    assert search(spread, 0, {"size": 0}, preference="_shards:0,1")["_shards"]["total"] == 2
    # Only this node's own copies: the shards elsewhere have no copy to use.
    local = spread.http(0).post("/reads/_search", {"size": 0}, params={"preference": "_only_local"}).json()
    assert local["_shards"]["successful"] == 2 and local["_shards"]["failed"] == 4
    r = spread.http(0).post("/reads/_search", {}, params={"preference": "_only_nodes:nope"})
    assert r.status_code == 400 and "no data nodes with criteria [nope]" in r.text
    r = spread.http(0).post("/reads/_search", {}, params={"preference": "_bogus"})
    assert r.status_code == 400


def test_a_bad_query_fails_as_a_whole_from_any_node(spread):
    errors = []
    for i in range(3):
        r = spread.http(i).post("/reads/_search", {"query": {"range": {"n": {"gte": "not-a-number"}}}})
        assert r.status_code == 400, r.text
        errors.append(r.json()["error"]["type"])
    assert len(set(errors)) == 1, errors
    r = spread.http(1).post("/reads/_search", {"from": 20000, "size": 1})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "search_phase_execution_exception"


def test_update_and_delete_by_query_span_nodes(spread):
    r = spread.http(0).post("/reads/_update_by_query", {"query": {"term": {"colour": "blue"}}},
                            params={"refresh": "true"})
    assert r.status_code == 200 and r.json()["updated"] == DOCS // 3, r.text
    r = spread.http(2).post("/reads/_delete_by_query", {"query": {"range": {"n": {"gte": DOCS - 30}}}},
                            params={"refresh": "true"})
    assert r.status_code == 200 and r.json()["deleted"] == 30, r.text
    assert spread.http(1).post("/reads/_count").json()["count"] == DOCS - 30
    # Put them back for the tests that follow.
    spread.bulk(1, "reads", coloured(range(DOCS - 30, DOCS)))


def test_index_statistics_count_every_copy_wherever_it_is(spread):
    for i in range(3):
        row = spread.get("/_cat/indices/reads", i, format="json").json()[0]
        assert int(row["docs.count"]) == DOCS, row
        stats = spread.get("/reads/_stats", i).json()
        assert stats["_all"]["primaries"]["docs"]["count"] == DOCS
        assert stats["_all"]["total"]["docs"]["count"] == DOCS
        rows = spread.get("/_cat/shards/reads", i, format="json").json()
        assert sum(int(r["docs"]) for r in rows) == DOCS, rows


def test_terms_over_shards_on_every_node_are_exact_when_shards_send_every_term(spread):
    body = search(spread, 1, {"size": 0, "aggs": {"c": {"terms": {"field": "colour", "show_term_doc_count_error": True}},
                                                  "n": {"terms": {"field": "n", "size": 5, "order": {"_key": "desc"}}}}})
    c = body["aggregations"]["c"]
    assert [(b["key"], b["doc_count"]) for b in c["buckets"]] == [("blue", 80), ("green", 80), ("red", 80)]
    assert c["doc_count_error_upper_bound"] == 0 and c["sum_other_doc_count"] == 0
    assert [b["doc_count_error_upper_bound"] for b in c["buckets"]] == [0, 0, 0]
    n = body["aggregations"]["n"]
    assert [b["key"] for b in n["buckets"]] == list(range(DOCS - 1, DOCS - 6, -1))
    assert n["sum_other_doc_count"] == DOCS - 5


def test_closing_an_index_frees_remote_scroll_contexts_so_it_reopens_at_once(spread):
    r = spread.http(0).put("/closing", {"settings": {"number_of_shards": 3, "number_of_replicas": 0}})
    assert r.status_code == 200, r.text
    spread.wait_for_status("green")
    spread.bulk(0, "closing", {n: {"n": n} for n in range(30)})
    r = spread.http(0).post("/closing/_search", {"size": 2, "sort": ["n"]}, params={"scroll": "5m"})
    assert r.status_code == 200, r.text
    sid = r.json()["_scroll_id"]
    r = spread.http(1).post("/closing/_close")
    assert r.status_code == 200, r.text
    r = spread.http(1).post("/closing/_open")
    assert r.status_code == 200, r.text
    spread.wait_for_agreement("green", timeout=30)
    for i in range(3):
        r = spread.http(i).get("/closing/_count")
        assert r.status_code == 200 and r.json()["count"] == 30, r.text
    r = spread.http(0).post("/_search/scroll", {"scroll": "1m", "scroll_id": sid})
    assert r.status_code == 404, r.text
    assert spread.http(0).delete("/closing").status_code == 200


def test_a_dead_node_is_reported_as_shard_failures_not_missing_hits(spread):
    """Runs last in this module: it kills node 2 (whose shards have no replica)."""
    victim = 2
    spread.kill(victim)
    body = search(spread, 0, {"query": {"match_all": {}}, "track_total_hits": True})
    shards = body["_shards"]
    assert shards["total"] == 6
    assert shards["failed"] == 2 and shards["successful"] == 4, shards
    assert len(shards["failures"]) == 2
    assert body["hits"]["total"]["value"] < DOCS
    r = spread.http(0).post("/reads/_search", {}, params={"allow_partial_search_results": "false"})
    assert r.status_code == 503, r.text
    assert "allow_partial_search_results" in r.json()["error"]["reason"]
