"""Query DSL constructs from the issue, checked against a fixed 10-document dataset (tests/dataset.py)."""
import pytest

from dataset import ALL_IDS


def q(http, index, query, **extra):
    body = {"query": query, "size": 100, **extra}
    r = http.post(f"/{index}/_search", body)
    assert r.status_code == 200, r.text
    return r.json()


def ids(http, index, query, **extra):
    return {h["_id"] for h in q(http, index, query, **extra)["hits"]["hits"]}


def ordered(http, index, query, **extra):
    return [h["_id"] for h in q(http, index, query, **extra)["hits"]["hits"]]


def test_match_all_and_match_none(http, products):
    r = q(http, products, {"match_all": {}})
    assert r["hits"]["total"] == {"value": 10, "relation": "eq"}
    assert all(h["_score"] == 1.0 for h in r["hits"]["hits"])
    assert r["hits"]["max_score"] == 1.0
    r = q(http, products, {"match_none": {}})
    assert r["hits"]["total"]["value"] == 0 and r["hits"]["hits"] == []
    assert r["hits"]["max_score"] is None
    assert q(http, products, {"match_all": {"boost": 2.5}})["hits"]["max_score"] == 2.5


def test_match_default_or(http, products):
    assert ids(http, products, {"match": {"title": "quick fox"}}) == {"1", "3", "7", "9"}


def test_match_operator_and(http, products):
    assert ids(http, products, {"match": {"title": {"query": "quick brown", "operator": "and"}}}) == {"1", "3"}


def test_match_minimum_should_match(http, products):
    assert ids(http, products, {"match": {"title": {"query": "quick brown fox", "minimum_should_match": 2}}}) \
        == {"1", "3", "9"}
    assert ids(http, products, {"match": {"title": {"query": "quick brown fox", "minimum_should_match": "100%"}}}) \
        == {"1"}


def test_match_fuzziness(http, products):
    assert ids(http, products, {"match": {"title": {"query": "quikc", "fuzziness": "AUTO"}}}) == {"1", "3", "7"}
    assert ids(http, products, {"match": {"title": {"query": "quikc", "fuzziness": 0}}}) == set()
    assert ids(http, products, {"match": {"title": {"query": "quack", "fuzziness": 1}}}) == {"1", "3", "7"}
    assert ids(http, products, {"match": {"title": {"query": "bruwn", "fuzziness": 2}}}) == {"1", "3", "6", "9"}


def test_match_with_analyzer_param(http, products):
    # keyword analyzer keeps the query as one token: no title term equals "quick brown"
    assert ids(http, products, {"match": {"title": {"query": "quick brown", "analyzer": "keyword"}}}) == set()
    assert ids(http, products, {"match": {"title": {"query": "QUICK", "analyzer": "standard"}}}) == {"1", "3", "7"}


def test_match_english_analyzer_stems(http, products):
    # body uses the english analyzer: "jumps" and "jumping" both stem to "jump"
    assert ids(http, products, {"match": {"body": "jumps"}}) == {"1", "3"}
    assert ids(http, products, {"match": {"body": "the"}}) == set()     # stopword


def test_match_numeric_and_keyword_fields(http, products):
    assert ids(http, products, {"match": {"qty": 5}}) == {"1"}
    assert ids(http, products, {"match": {"category": "c"}}) == {"4", "5", "10"}


def test_match_phrase_and_slop(http, products):
    assert ids(http, products, {"match_phrase": {"title": "quick brown"}}) == {"1", "3"}
    assert ids(http, products, {"match_phrase": {"title": "brown quick"}}) == set()
    assert ids(http, products, {"match_phrase": {"title": {"query": "quick fox", "slop": 1}}}) == {"1"}
    assert ids(http, products, {"match_phrase": {"title": {"query": "brown fox", "slop": 0}}}) == {"1", "9"}


def test_match_phrase_prefix(http, products):
    assert ids(http, products, {"match_phrase_prefix": {"title": "quick br"}}) == {"1", "3"}
    assert ids(http, products, {"match_phrase_prefix": {"title": "elec"}}) == {"10"}


def test_multi_match_types(http, products):
    assert ids(http, products, {"multi_match": {"query": "bread", "fields": ["title", "body"]}}) == {"6"}
    assert ids(http, products, {"multi_match": {"query": "clever", "fields": ["title", "body"],
                                                "type": "most_fields"}}) == {"7"}
    assert ids(http, products, {"multi_match": {"query": "brown fox", "fields": ["title", "body"],
                                                "type": "phrase"}}) == {"1", "9"}
    # boosting body makes the doc that only matches in body first
    hits = ordered(http, products, {"multi_match": {"query": "hounds clever", "fields": ["title", "body^10"]}})
    assert hits[0] == "7"


def test_multi_match_boost_changes_order(http, products):
    # "dogs" is in doc 3's title; "sleeping" (english-stemmed body) only in doc 2's body
    a = ordered(http, products, {"multi_match": {"query": "dogs sleeping", "fields": ["title^5", "body"]}})
    assert a[0] == "3"
    b = ordered(http, products, {"multi_match": {"query": "dogs sleeping", "fields": ["title", "body^5"]}})
    assert b[0] == "2"


def test_query_string_syntax(http, products):
    qs = lambda s, **kw: ids(http, products, {"query_string": {"query": s, **kw}})  # noqa: E731
    assert qs("title:fox AND title:quick") == {"1"}
    assert qs("title:(bread OR car)") == {"4", "6"}
    assert qs("title:brown NOT title:fox") == {"3", "6"}
    assert qs('title:"lazy dog"') == {"2"}
    assert qs("title:qu*") == {"1", "3", "7", "8"}
    assert qs("price:[10 TO 20.5]") == {"1", "2", "7"}
    assert qs("price:>=15000") == {"4", "5"}
    assert qs("tags:vehicle AND NOT category:c") == set()
    assert qs("bread", default_field="title") == {"6"}
    assert qs("quick brown", default_field="title", default_operator="AND") == {"1", "3"}


def test_simple_query_string_syntax(http, products):
    sqs = lambda s, **kw: ids(http, products, {"simple_query_string": {"query": s, "fields": ["title"], **kw}})  # noqa: E731
    assert sqs("quick + fox") == {"1"}          # "foxes" is another term for the standard analyzer
    assert sqs("bread | car") == {"4", "6"}
    assert sqs('"lazy dog"') == {"2"}
    assert sqs("brown -fox", default_operator="and") == {"3", "6"}
    assert sqs("elec*") == {"10"}


def test_term_and_terms(http, products):
    assert ids(http, products, {"term": {"tags": "animal"}}) == {"1", "2", "3", "7", "9"}
    assert ids(http, products, {"term": {"tags": {"value": "vehicle", "boost": 2.0}}}) == {"4", "5", "10"}
    assert ids(http, products, {"term": {"title": "quick"}}) == {"1", "3", "7"}   # analyzed term
    assert ids(http, products, {"term": {"title": "Quick"}}) == set()             # not analyzed at query time
    assert ids(http, products, {"term": {"title.keyword": "Electric bikes"}}) == {"10"}
    assert ids(http, products, {"terms": {"category": ["a", "d"]}}) == {"1", "2", "6", "9"}
    assert ids(http, products, {"term": {"available": True}}) == {"1", "3", "4", "6", "7", "8", "10"}
    assert ids(http, products, {"term": {"qty": 7}}) == {"7"}
    assert ids(http, products, {"term": {"ip": "10.0.0.2"}}) == {"2"}
    assert ids(http, products, {"term": {"ip": "10.0.0.0/16"}}) == {"1", "2", "3", "7", "9"}


def test_range_numbers_and_dates(http, products):
    assert ids(http, products, {"range": {"price": {"gte": 10, "lt": 30}}}) == {"1", "2", "7"}
    assert ids(http, products, {"range": {"price": {"gt": 1000}}}) == {"4", "5", "10"}
    assert ids(http, products, {"range": {"qty": {"lte": 2}}}) == {"4", "5", "8"}
    assert ids(http, products, {"range": {"created": {"gte": "2024-03-01", "lt": "2024-04-01"}}}) == {"5", "6", "7"}
    assert ids(http, products, {"range": {"created": {"lt": "2024-01-01"}}}) == {"8"}
    # gte rounds down: 2024-02-01T00:00:00
    assert ids(http, products, {"range": {"created": {"gte": "2024-01-01||+1M/M"}}}) \
        == {"3", "4", "5", "6", "7", "10"}
    # gt rounds up: after 2024-02-29T23:59:59.999
    assert ids(http, products, {"range": {"created": {"gt": "2024-02-10||/M"}}}) == {"5", "6", "7", "10"}
    assert ids(http, products, {"range": {"created": {"gte": "01/02/2024", "lte": "29/02/2024",
                                                      "format": "dd/MM/yyyy"}}}) == {"3", "4"}
    assert ids(http, products, {"range": {"created": {"gte": 1704067200000, "lt": 1704153600000}}}) == {"1"}
    assert ids(http, products, {"range": {"ip": {"gte": "10.0.0.0", "lte": "10.0.255.255"}}}) \
        == {"1", "2", "3", "7", "9"}


def test_range_date_math_now(http, index):
    http.put(f"/{index}/_mapping", {"properties": {"ts": {"type": "date"}}})
    import datetime
    now = datetime.datetime.now(datetime.timezone.utc)
    docs = {"recent": now - datetime.timedelta(hours=1), "old": now - datetime.timedelta(days=3)}
    for i, ts in docs.items():
        http.put(f"/{index}/_doc/{i}", {"ts": ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"})
    http.post(f"/{index}/_refresh")
    assert ids(http, index, {"range": {"ts": {"gte": "now-1d"}}}) == {"recent"}
    assert ids(http, index, {"range": {"ts": {"lt": "now-1d/d"}}}) == {"old"}
    assert ids(http, index, {"range": {"ts": {"gte": "now-7d/d", "lte": "now"}}}) == {"recent", "old"}


def test_exists(http, products):
    assert ids(http, products, {"exists": {"field": "price"}}) == ALL_IDS - {"8"}
    assert ids(http, products, {"exists": {"field": "tags"}}) == ALL_IDS - {"8"}
    assert ids(http, products, {"exists": {"field": "nonexistent"}}) == set()


def test_prefix_wildcard_regexp(http, products):
    assert ids(http, products, {"prefix": {"sku": "SKU-00"}}) == ALL_IDS - {"9", "10"}
    assert ids(http, products, {"prefix": {"title": {"value": "fox"}}}) == {"1", "3", "7", "9"}
    assert ids(http, products, {"wildcard": {"sku": "SKU-0?1"}}) == {"1"}
    assert ids(http, products, {"wildcard": {"sku": {"value": "*009"}}}) == {"9"}
    assert ids(http, products, {"wildcard": {"title": "br*n"}}) == {"1", "3", "6", "9"}
    assert ids(http, products, {"regexp": {"sku": "SKU-0[0-9][13]"}}) == {"1", "3"}
    assert ids(http, products, {"regexp": {"title": {"value": "qu.*"}}}) == {"1", "3", "7", "8"}


def test_case_insensitive_term_and_prefix(http, products):
    assert ids(http, products, {"term": {"sku": {"value": "sku-001", "case_insensitive": True}}}) == {"1"}
    assert ids(http, products, {"prefix": {"sku": {"value": "other", "case_insensitive": True}}}) == {"9"}


def test_fuzzy(http, products):
    assert ids(http, products, {"fuzzy": {"title": "quikc"}}) == {"1", "3", "7"}
    assert ids(http, products, {"fuzzy": {"title": {"value": "brawn", "fuzziness": 1}}}) == {"1", "3", "6", "9"}
    assert ids(http, products, {"fuzzy": {"title": {"value": "bxxwn", "fuzziness": 1}}}) == set()


def test_ids(http, products):
    assert ids(http, products, {"ids": {"values": ["1", "5", "nope"]}}) == {"1", "5"}


def test_bool_query(http, products):
    body = {"bool": {
        "must": [{"match": {"title": "fox"}}],
        "filter": [{"range": {"price": {"lt": 11}}}],
        "must_not": [{"term": {"available": False}}],
    }}
    assert ids(http, products, body) == {"1"}
    body = {"bool": {"should": [{"term": {"tags": "food"}}, {"term": {"tags": "clever"}}]}}
    assert ids(http, products, body) == {"6", "7"}
    body = {"bool": {"should": [{"term": {"tags": "animal"}}, {"term": {"tags": "fast"}},
                                {"term": {"category": "a"}}], "minimum_should_match": 2}}
    assert ids(http, products, body) == {"1", "2", "9"}
    # filter only: constant score 0
    r = q(http, products, {"bool": {"filter": [{"term": {"tags": "food"}}]}})
    assert r["hits"]["hits"][0]["_score"] == 0.0
    # should is optional when must is present
    body = {"bool": {"must": [{"term": {"category": "c"}}], "should": [{"term": {"tags": "slow"}}]}}
    assert ordered(http, products, body)[0] == "5"
    assert ids(http, products, body) == {"4", "5", "10"}
    # must_not only
    assert ids(http, products, {"bool": {"must_not": [{"exists": {"field": "tags"}}]}}) == {"8"}
    # boost multiplies
    s1 = q(http, products, {"bool": {"must": [{"term": {"tags": "food"}}]}})["hits"]["max_score"]
    s2 = q(http, products, {"bool": {"must": [{"term": {"tags": "food"}}], "boost": 3}})["hits"]["max_score"]
    assert s2 == pytest.approx(3 * s1, rel=1e-5)


def test_nested_bool(http, products):
    body = {"bool": {"should": [
        {"bool": {"must": [{"term": {"category": "a"}}, {"term": {"available": True}}]}},
        {"bool": {"must": [{"term": {"category": "c"}}, {"range": {"price": {"lt": 2000}}}]}},
    ]}}
    assert ids(http, products, body) == {"1", "10"}


def test_constant_score(http, products):
    r = q(http, products, {"constant_score": {"filter": {"term": {"tags": "vehicle"}}, "boost": 1.5}})
    assert {h["_id"] for h in r["hits"]["hits"]} == {"4", "5", "10"}
    assert all(h["_score"] == 1.5 for h in r["hits"]["hits"])


def test_dis_max(http, products):
    r = q(http, products, {"dis_max": {"queries": [{"match": {"title": "bread"}}, {"match": {"body": "bread"}}],
                                       "tie_breaker": 0.7}})
    assert [h["_id"] for h in r["hits"]["hits"]] == ["6"]


def test_boosting(http, products):
    body = {"boosting": {"positive": {"match": {"title": "fox foxes"}}, "negative": {"term": {"category": "a"}},
                         "negative_boost": 0.01}}
    hits = ordered(http, products, body)
    assert set(hits) == {"1", "3", "7", "9"}
    assert set(hits[:2]) == {"3", "7"}


@pytest.mark.shoal_gap("BM25 field-length norms are per tantivy JSON field (all text fields of one analyzer share them), so scores differ from Lucene's per-field norms")
def test_bm25_scores_match_opensearch(http, products):
    """Default similarity is BM25 (k1=1.2, b=0.75) with Lucene's norms: scores equal OpenSearch's."""
    for query, expected in BM25_EXPECTED:
        r = q(http, products, query)
        got = {h["_id"]: h["_score"] for h in r["hits"]["hits"]}
        assert set(got) == set(expected), query
        for k, v in expected.items():
            assert got[k] == pytest.approx(v, rel=1e-3), (query, k, got)
        assert r["hits"]["max_score"] == pytest.approx(max(expected.values()), rel=1e-3)


# measured on OpenSearch 2.18.0 (1 shard, dataset.PRODUCTS)
BM25_EXPECTED = [
    ({"match": {"title": "fox"}}, {"9": 2.1599295, "1": 1.538834}),
    ({"match": {"title": "brown fox"}}, {"9": 3.4629653, "1": 2.467177, "6": 1.0275722, "3": 0.77807164}),
    ({"match": {"body": "fox dogs"}}, {"3": 2.2154813, "2": 1.2424216, "9": 1.0748807, "1": 0.8336357,
                                      "7": 0.8336357}),
]


def test_unknown_query_is_refused(http, products):
    r = http.post(f"/{products}/_search", {"query": {"no_such_query": {"f": 1}}})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "parsing_exception"
    assert err["reason"] == "unknown query [no_such_query]"
    assert err["root_cause"][0]["type"] == "parsing_exception"
    assert "line" in err and "col" in err


def test_nested_query_refused_by_shoal(http, products, is_shoal):
    if not is_shoal:
        pytest.skip("OpenSearch supports nested")
    r = http.post(f"/{products}/_search", {"query": {"nested": {"path": "x", "query": {"match_all": {}}}}})
    assert r.status_code == 400
    assert "nested" in r.json()["error"]["reason"]


def test_malformed_query_body(http, products):
    r = http.post(f"/{products}/_search", {"query": {"match": {"title": {"query": "x", "bogus_param": 1}}}})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "parsing_exception"
    assert err["reason"] == "[match] query does not support [bogus_param]"


def test_query_on_missing_field_matches_nothing(http, products):
    assert ids(http, products, {"match": {"does_not_exist": "x"}}) == set()
    assert ids(http, products, {"term": {"does_not_exist": "x"}}) == set()
