"""Field types and mapping parameters behave like OpenSearch's at index and search time."""
import time

import pytest

from util import assert_error

MAPPING = {"properties": {
    "k": {"type": "keyword", "ignore_above": 5},
    "nd": {"type": "keyword", "doc_values": False},
    "ni": {"type": "integer", "index": False},
    "nt": {"type": "text", "index": False},
    "d": {"type": "date", "format": "yyyy/MM/dd"},
    "ws": {"type": "text", "analyzer": "whitespace"},
    "sim": {"type": "text", "analyzer": "simple"},
    "kw": {"type": "text", "analyzer": "keyword"},
    "sf": {"type": "scaled_float", "scaling_factor": 10},
    "b": {"type": "boolean"},
    "dd": {"type": "date"},
}}


@pytest.fixture
def mp(http, index_name):
    r = http.put(f"/{index_name}", {"settings": {"number_of_replicas": 0}, "mappings": MAPPING})
    assert r.status_code == 200, r.text
    docs = {
        "1": {"k": "short", "nd": "x", "ni": 5, "nt": "hello", "d": "2024/01/15", "ws": "Quick-Brown fox",
              "sim": "Quick-Brown fox2", "kw": "Quick Brown", "sf": 1.26, "b": "true", "dd": 1705276800000},
        "2": {"k": "toolongvalue", "d": "2024/02/15", "b": False, "dd": "2024-02-15"},
    }
    for i, d in docs.items():
        assert http.put(f"/{index_name}/_doc/{i}", d).status_code == 201
    http.post(f"/{index_name}/_refresh")
    return index_name


def ids(http, index, body):
    r = http.post(f"/{index}/_search", {"_source": False, **body})
    assert r.status_code == 200, r.text
    return sorted(h["_id"] for h in r.json()["hits"]["hits"])


def test_keyword_ignore_above(http, mp):
    assert ids(http, mp, {"query": {"term": {"k": "toolongvalue"}}}) == []
    assert ids(http, mp, {"query": {"exists": {"field": "k"}}}) == ["1"]
    assert http.get(f"/{mp}/_source/2").json()["k"] == "toolongvalue"


def test_doc_values_false_is_searchable_not_sortable(http, mp):
    assert ids(http, mp, {"query": {"term": {"nd": "x"}}}) == ["1"]
    r = http.post(f"/{mp}/_search", {"sort": [{"nd": "asc"}]})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "search_phase_execution_exception"
    assert err["root_cause"][0]["reason"] == ("Can't load fielddata on [nd] because fielddata is unsupported on fields "
                                              "of type [keyword]. Use doc values instead.")


def test_index_false(http, mp):
    # numeric with doc values: still searchable (slowly) like OpenSearch
    assert ids(http, mp, {"query": {"term": {"ni": 5}}}) == ["1"]
    r = http.post(f"/{mp}/_search", {"query": {"match": {"nt": "hello"}}})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "search_phase_execution_exception"
    assert err["root_cause"][0]["type"] == "query_shard_exception"
    assert err["root_cause"][0]["reason"] == "failed to create query: Cannot search on field [nt] since it is not indexed."


def test_custom_date_format_and_epoch_millis(http, mp):
    assert ids(http, mp, {"query": {"range": {"d": {"gte": "2024/02/01"}}}}) == ["2"]
    assert ids(http, mp, {"query": {"range": {"dd": {"gte": "2024-01-15", "lt": "2024-01-16"}}}}) == ["1"]
    assert ids(http, mp, {"query": {"range": {"dd": {"gte": 1707955200000}}}}) == ["2"]
    r = http.put(f"/{mp}/_doc/3", {"d": "15-01-2024"})
    err = assert_error(r, 400, "mapper_parsing_exception",
                       reason="failed to parse field [d] of type [date] in document with id '3'. Preview of field's value: '15-01-2024'")
    assert err["caused_by"]["reason"] == "failed to parse date field [15-01-2024] with format [yyyy/MM/dd]"


def test_analyzers(http, mp):
    assert ids(http, mp, {"query": {"term": {"ws": "Quick-Brown"}}}) == ["1"]     # whitespace keeps case and '-'
    assert ids(http, mp, {"query": {"term": {"ws": "quick"}}}) == []
    assert ids(http, mp, {"query": {"term": {"sim": "quick"}}}) == ["1"]         # simple: lowercase letters only
    assert ids(http, mp, {"query": {"term": {"sim": "fox"}}}) == ["1"]           # "fox2" -> "fox"
    assert ids(http, mp, {"query": {"term": {"kw": "Quick Brown"}}}) == ["1"]    # keyword: one token
    assert ids(http, mp, {"query": {"match": {"kw": "Quick Brown"}}}) == ["1"]
    assert ids(http, mp, {"query": {"match": {"kw": "quick"}}}) == []


def test_scaled_float_rounds_to_scaling_factor(http, mp):
    assert ids(http, mp, {"query": {"term": {"sf": 1.3}}}) == ["1"]
    r = http.post(f"/{mp}/_search", {"size": 0, "aggs": {"s": {"sum": {"field": "sf"}}}}).json()
    assert r["aggregations"]["s"]["value"] == pytest.approx(1.3)
    assert http.get(f"/{mp}/_source/1").json()["sf"] == 1.26      # _source untouched


def test_boolean_accepts_strings_and_refuses_others(http, mp):
    assert ids(http, mp, {"query": {"term": {"b": True}}}) == ["1"]
    assert ids(http, mp, {"query": {"term": {"b": "false"}}}) == ["2"]
    r = http.put(f"/{mp}/_doc/3", {"b": "maybe"})
    err = assert_error(r, 400, "mapper_parsing_exception",
                       reason="failed to parse field [b] of type [boolean] in document with id '3'. Preview of field's value: 'maybe'")
    assert err["caused_by"]["reason"] == "Failed to parse value [maybe] as only [true] or [false] are allowed."


def test_number_of_shards_must_be_positive(http, index_name):
    r = http.put(f"/{index_name}", {"settings": {"number_of_shards": 0}})
    assert_error(r, 400, "illegal_argument_exception",
                 reason="Failed to parse value [0] for setting [index.number_of_shards] must be >= 1")


def test_bad_translog_durability_refused(http, index_name):
    r = http.put(f"/{index_name}", {"settings": {"index.translog.durability": "sometimes"}})
    err = assert_error(r, 400, "illegal_argument_exception")
    assert "sometimes" in err["reason"].lower()


def test_nested_type_refused_by_shoal(http, index_name, is_shoal):
    r = http.put(f"/{index_name}", {"mappings": {"properties": {"n": {"type": "nested"}}}})
    if not is_shoal:
        assert r.status_code == 200
        return
    assert r.status_code == 400
    assert r.json()["error"]["type"] in ("mapper_parsing_exception", "illegal_argument_exception")
    assert "nested" in r.json()["error"]["reason"]


def test_default_refresh_interval_makes_writes_searchable(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if http.post(f"/{index}/_search").json()["hits"]["total"]["value"] == 1:
            return
        time.sleep(0.2)
    raise AssertionError("document not searchable within 10 s with refresh_interval=1s")


def test_empty_objects_map_as_objects(http, index):
    r = http.put(f"/{index}/_doc/1", {"a": {}, "b": {"c": {}}})
    assert r.status_code == 201, r.text
    props = http.get(f"/{index}/_mapping").json()[index]["mappings"]["properties"]
    assert props == {"a": {"type": "object"}, "b": {"properties": {"c": {"type": "object"}}}}
    # the same document again, and values under the empty objects later
    assert http.put(f"/{index}/_doc/2", {"a": {}, "b": {"c": {}}}).status_code == 201
    r = http.put(f"/{index}/_doc/3", {"a": {"x": 1}, "b": {"c": {"y": "z"}}}, params={"refresh": "true"})
    assert r.status_code == 201, r.text
    props = http.get(f"/{index}/_mapping").json()[index]["mappings"]["properties"]
    assert props["a"] == {"properties": {"x": {"type": "long"}}}
    assert props["b"]["properties"]["c"]["properties"]["y"]["type"] == "text"
    assert http.get(f"/{index}/_doc/1").json()["_source"] == {"a": {}, "b": {"c": {}}}
    r = http.post(f"/{index}/_search", {"query": {"exists": {"field": "a.x"}}}).json()
    assert [h["_id"] for h in r["hits"]["hits"]] == ["3"]


def test_empty_arrays_and_nulls_add_no_field(http, index):
    r = http.put(f"/{index}/_doc/1", {"a": [], "n": None, "l": [None], "o": {"p": []}}, params={"refresh": "true"})
    assert r.status_code == 201, r.text
    props = http.get(f"/{index}/_mapping").json()[index]["mappings"].get("properties", {})
    assert set(props) == {"o"}, props
    assert props["o"] == {"type": "object"}
    r = http.post(f"/{index}/_search", {"query": {"exists": {"field": "n"}}}).json()
    assert r["hits"]["total"]["value"] == 0


def test_null_value_is_indexed_for_a_null(http, index_name):
    r = http.put(f"/{index_name}", {"mappings": {"properties": {"s": {"type": "keyword", "null_value": "NONE"}}}})
    assert r.status_code == 200, r.text
    http.put(f"/{index_name}/_doc/1", {"s": None})
    http.put(f"/{index_name}/_doc/2", {"s": []}, params={"refresh": "true"})
    r = http.post(f"/{index_name}/_search", {"query": {"term": {"s": "NONE"}}}).json()
    assert [h["_id"] for h in r["hits"]["hits"]] == ["1"]
