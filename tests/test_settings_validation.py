"""Settings checked by type and range with OpenSearch 2.18's messages (cluster settings,
persistent and transient, index settings, node settings at start), settings Shoal would ignore
refused by name, and `cluster.max_shards_per_node`."""
import re
import time

import pytest

from conftest import NodeStartError
from util import assert_error, wait_for

HIGH = "cluster.routing.allocation.disk.watermark.high"
LOW = "cluster.routing.allocation.disk.watermark.low"
FLOOD = "cluster.routing.allocation.disk.watermark.flood_stage"


def stored(http):
    body = http.get("/_cluster/settings", params={"flat_settings": "true"}).json()
    return {**body["persistent"], **body["transient"]}


INVALID_CLUSTER_VALUES = [
    (HIGH, "x", f"failed to parse setting [{HIGH}] with value [x] as a size in bytes: unit is missing or unrecognized"),
    (LOW, "1s", f"failed to parse setting [{LOW}] with value [1s] as a size in bytes: unit is missing or unrecognized"),
    (FLOOD, "101%", f"failed to parse setting [{FLOOD}] with value [101%] as a size in bytes: unit is missing or unrecognized"),
    ("cluster.info.update.interval", "200%",
     "failed to parse setting [cluster.info.update.interval] with value [200%] as a time value: unit is missing or unrecognized"),
    ("cluster.info.update.interval", "5s",
     "failed to parse value [5s] for setting [cluster.info.update.interval], must be >= [10s]"),
    ("cluster.routing.allocation.node_concurrent_recoveries", "90%",
     "Failed to parse value [90%] for setting [cluster.routing.allocation.node_concurrent_recoveries]"),
    ("cluster.routing.allocation.node_concurrent_recoveries", "-1",
     "Failed to parse value [-1] for setting [cluster.routing.allocation.node_concurrent_recoveries] must be >= 0"),
    ("cluster.max_shards_per_node", "0",
     "Failed to parse value [0] for setting [cluster.max_shards_per_node] must be >= 1"),
    ("cluster.routing.allocation.disk.threshold_enabled", "yes",
     "Failed to parse value [yes] as only [true] or [false] are allowed."),
    ("action.destructive_requires_name", "1", "Failed to parse value [1] as only [true] or [false] are allowed."),
    ("cluster.routing.allocation.enable", "some", "Illegal allocation.enable value [some]"),
    ("cluster.routing.allocation.balance.threshold", "-1",
     "Failed to parse value [-1] for setting [cluster.routing.allocation.balance.threshold] must be >= 0.0"),
]


@pytest.mark.parametrize("scope", ["persistent", "transient"])
@pytest.mark.parametrize("key,value,reason", INVALID_CLUSTER_VALUES,
                         ids=[f"{k}={v}" for k, v, _ in INVALID_CLUSTER_VALUES])
def test_invalid_cluster_setting_value_is_refused_and_not_stored(http, scope, key, value, reason):
    before = stored(http)
    r = http.put("/_cluster/settings", {scope: {key: value}})
    assert_error(r, 400, "illegal_argument_exception", reason)
    assert stored(http) == before


@pytest.mark.parametrize("low,high,flood,reason", [
    ("95%", "90%", "97%", "low disk watermark [95%] more than high disk watermark [90%]"),
    ("85%", "96%", "95%", "high disk watermark [96%] more than flood stage disk watermark [95%]"),
    ("1gb", "5gb", "500mb", "low disk watermark [1gb] less than high disk watermark [5gb]"),
    ("10gb", "5gb", "6gb", "high disk watermark [5gb] less than flood stage disk watermark [6gb]"),
    ("85%", "5gb", "95%", f"unable to consistently parse [{LOW}=85%], [{HIGH}=5gb], and [{FLOOD}=95%] as percentage or bytes"),
])
def test_disk_watermarks_must_be_ordered_and_of_one_kind(http, low, high, flood, reason):
    before = stored(http)
    r = http.put("/_cluster/settings", {"persistent": {LOW: low, HIGH: high, FLOOD: flood}})
    assert_error(r, 400, "illegal_argument_exception", reason)
    assert stored(http) == before


def test_one_watermark_is_checked_against_the_others_in_force(http):
    # The defaults are 85%/90%/95%: a byte value alone cannot be consistent with them.
    r = http.put("/_cluster/settings", {"transient": {HIGH: "10gb"}})
    assert_error(r, 400, "illegal_argument_exception",
                 f"unable to consistently parse [{LOW}=85%], [{HIGH}=10gb], and [{FLOOD}=95%] as percentage or bytes")
    r = http.put("/_cluster/settings", {"transient": {HIGH: "0.88"}})
    try:
        assert r.status_code == 200, r.text
    finally:
        http.put("/_cluster/settings", {"transient": {HIGH: None}})


def test_valid_values_are_stored(http):
    try:
        r = http.put("/_cluster/settings", {"transient": {"cluster.info.update.interval": "45s",
                                                          "cluster.routing.allocation.node_concurrent_recoveries": "3",
                                                          "action.auto_create_index": "+logs-*,-other-*"}})
        assert r.status_code == 200, r.text
        got = stored(http)
        assert got["cluster.info.update.interval"] == "45s"
        assert got["cluster.routing.allocation.node_concurrent_recoveries"] == "3"
        assert got["action.auto_create_index"] == "+logs-*,-other-*"
    finally:
        http.put("/_cluster/settings", {"transient": {"cluster.info.update.interval": None,
                                                      "cluster.routing.allocation.node_concurrent_recoveries": None,
                                                      "action.auto_create_index": None}})


def test_a_group_is_reset_with_a_wildcard(http):
    r = http.put("/_cluster/settings", {"transient": {"cluster.routing.allocation.node_concurrent_recoveries": "3",
                                                      "cluster.routing.allocation.enable": "primaries"}})
    assert r.status_code == 200, r.text
    r = http.put("/_cluster/settings", {"transient": {"cluster.routing.allocation.*": None}})
    assert r.status_code == 200, r.text
    assert not [k for k in stored(http) if k.startswith("cluster.routing.allocation.")]


def test_setting_shoal_does_not_honour_is_refused_by_name(http, is_shoal):
    if not is_shoal:
        pytest.skip("OpenSearch honours indices.breaker.total.limit")
    before = stored(http)
    r = http.put("/_cluster/settings", {"persistent": {"indices.breaker.total.limit": "60%"}})
    err = assert_error(r, 400, "illegal_argument_exception")
    assert "[indices.breaker.total.limit]" in err["reason"] and "not supported" in err["reason"], err
    assert stored(http) == before


def test_static_thread_pool_setting_is_not_dynamically_updateable(http):
    r = http.put("/_cluster/settings", {"persistent": {"thread_pool.write.queue_size": "10"}})
    assert_error(r, 400, "illegal_argument_exception",
                 "persistent setting [thread_pool.write.queue_size], not dynamically updateable")
    r = http.put("/_cluster/settings", {"transient": {"no.such.setting": "1"}})
    assert_error(r, 400, "illegal_argument_exception", "transient setting [no.such.setting], not recognized")


@pytest.mark.parametrize("key,value,reason", [
    ("index.blocks.write", "maybe", "Failed to parse value [maybe] as only [true] or [false] are allowed."),
    ("index.max_result_window", "lots", "Failed to parse value [lots] for setting [index.max_result_window]"),
    ("index.allocation.max_retries", "-2", "Failed to parse value [-2] for setting [index.allocation.max_retries] must be >= 0"),
    ("index.routing.allocation.enable", "sometimes", "Illegal allocation.enable value [sometimes]"),
    ("index.write.wait_for_active_shards", "most", "cannot parse ActiveShardCount[most]"),
    ("index.refresh_interval", "fast",
     "failed to parse setting [index.refresh_interval] with value [fast] as a time value: unit is missing or unrecognized"),
])
def test_invalid_index_setting_value_is_refused(http, index_name, key, value, reason):
    r = http.put(f"/{index_name}", {"settings": {key: value}})
    assert_error(r, 400, "illegal_argument_exception", reason)
    assert http.head(f"/{index_name}").status_code == 404
    assert http.put(f"/{index_name}", {"settings": {"number_of_replicas": 0}}).status_code == 200
    r = http.put(f"/{index_name}/_settings", {key: value})
    assert_error(r, 400, "illegal_argument_exception", reason)


@pytest.mark.parametrize("key,value", [("index.routing_partition_size", 2),
                                       ("index.analysis.analyzer.custom.type", "standard"),
                                       ("index.mapping.nested_fields.limit", 10)])
def test_index_setting_shoal_does_not_honour_is_refused_by_name(http, index_name, is_shoal, key, value):
    if not is_shoal:
        pytest.skip("OpenSearch honours these settings")
    r = http.put(f"/{index_name}", {"settings": {key: value}})
    err = assert_error(r, 400, "illegal_argument_exception")
    assert f"[{key}]" in err["reason"] and "not supported" in err["reason"], err
    assert http.head(f"/{index_name}").status_code == 404
    assert http.put(f"/{index_name}", {}).status_code == 200
    err = assert_error(http.put(f"/{index_name}/_settings", {key: value}), 400, "illegal_argument_exception")
    assert f"[{key}]" in err["reason"], err


# The settings blocks of opensearch-benchmark workloads' index bodies (their defaults):
# accepted because what they ask is what Shoal does.
WORKLOAD_SETTINGS = {
    "nyc_taxis": {"index.number_of_shards": 1, "index.number_of_replicas": 0,
                  "index.requests.cache.enable": False},
    "http_logs": {"index.number_of_shards": 5, "index.number_of_replicas": 0,
                  "index.requests.cache.enable": False},
    "geonames": {"index.number_of_shards": 5, "index.number_of_replicas": 0,
                 "index.store.type": "mmapfs", "index.requests.cache.enable": False},
    "noaa": {"index.number_of_shards": 1, "index.number_of_replicas": 0, "index.queries.cache.enabled": False},
    "big5": {"index.number_of_shards": 1, "index.number_of_replicas": 0, "index.queries.cache.enabled": False,
             "index.requests.cache.enable": False, "index.codec": "best_compression",
             "index.translog.sync_interval": "30s", "index.translog.durability": "async",
             "index.query.default_field": ["message"]},
}


@pytest.mark.parametrize("workload", sorted(WORKLOAD_SETTINGS))
def test_benchmark_workload_index_settings_are_accepted(http, index_name, workload):
    settings = WORKLOAD_SETTINGS[workload]
    r = http.put(f"/{index_name}", {"settings": settings})
    assert r.status_code == 200, r.text
    got = http.get(f"/{index_name}/_settings", params={"flat_settings": "true"}).json()[index_name]["settings"]
    for key, value in settings.items():
        expected = value if isinstance(value, list) else str(value).lower() if isinstance(value, bool) else str(value)
        assert got[key] == expected, (key, got)


# value Shoal's behaviour matches, a value it does not
DESCRIBING_SHOAL = [
    ("index.requests.cache.enable", "false", "true", "Shoal has no shard request cache: every search runs on the shards"),
    ("index.queries.cache.enabled", "false", "true", "Shoal has no query cache: every query runs against the segments"),
    ("index.merge.scheduler.max_thread_count", "4", "1", "Shoal merges each shard on tantivy's pool of 4 merge threads"),
    ("index.merge.scheduler.auto_throttle", "false", "true", "Shoal does not throttle merges"),
    ("index.translog.generation_threshold_size", "64mb", "128mb", "Shoal rolls translog generations at 64mb"),
    ("index.store.type", "mmapfs", "hybridfs", "Shoal reads every index file through mmap"),
    ("index.search.slowlog.threshold.query.warn", "-1", "10s",
     "Shoal has no slow log, so every slow log threshold is disabled (-1)"),
    ("index.indexing.slowlog.threshold.index.info", "-1", "5s",
     "Shoal has no slow log, so every slow log threshold is disabled (-1)"),
]


@pytest.mark.parametrize("key,accepted,refused,behaviour", DESCRIBING_SHOAL,
                         ids=[f"{k}={r}" for k, _, r, _ in DESCRIBING_SHOAL])
def test_setting_is_accepted_only_with_the_value_describing_what_shoal_does(
        http, index_name, is_shoal, key, accepted, refused, behaviour):
    r = http.put(f"/{index_name}", {"settings": {key: accepted, "number_of_replicas": 0}})
    assert r.status_code == 200, r.text
    got = http.get(f"/{index_name}/_settings", params={"flat_settings": "true"}).json()[index_name]["settings"]
    assert got[key] == accepted
    if not is_shoal:
        pytest.skip("OpenSearch honours every value")
    reason = f"setting [{key}] can only be [{accepted}] on Shoal: {behaviour}"
    other = f"{index_name}-other"
    assert_error(http.put(f"/{other}", {"settings": {key: refused}}), 400, "illegal_argument_exception", reason)
    assert http.head(f"/{other}").status_code == 404
    dynamic = key not in ("index.queries.cache.enabled", "index.store.type")
    if dynamic:
        r = http.put(f"/{index_name}/_settings", {key: refused})
        assert_error(r, 400, "illegal_argument_exception", reason)
        got = http.get(f"/{index_name}/_settings", params={"flat_settings": "true"}).json()[index_name]["settings"]
        assert got[key] == accepted


def test_a_malformed_value_of_such_a_setting_gets_opensearch_type_error(http, index_name):
    r = http.put(f"/{index_name}", {"settings": {"index.requests.cache.enable": "yes"}})
    assert_error(r, 400, "illegal_argument_exception",
                 "Failed to parse value [yes] as only [true] or [false] are allowed.")


def test_refresh_interval_minus_one_disables_periodic_refresh(http, index_name):
    r = http.put(f"/{index_name}", {"settings": {"number_of_replicas": 0, "refresh_interval": "-1"}})
    assert r.status_code == 200, r.text
    assert http.put(f"/{index_name}/_doc/1", {"a": 1}).status_code == 201
    time.sleep(2.5)  # more than two default refresh intervals
    assert http.post(f"/{index_name}/_search").json()["hits"]["total"]["value"] == 0
    assert http.get(f"/{index_name}/_doc/1").json()["found"]  # realtime get still sees it
    assert http.post(f"/{index_name}/_refresh").status_code == 200
    assert http.post(f"/{index_name}/_search").json()["hits"]["total"]["value"] == 1
    # back to periodic refresh once the setting is reset
    assert http.put(f"/{index_name}/_settings", {"index.refresh_interval": None}).status_code == 200
    assert http.put(f"/{index_name}/_doc/2", {"a": 2}).status_code == 201
    wait_for(lambda: http.post(f"/{index_name}/_search").json()["hits"]["total"]["value"] == 2,
         timeout=10, what="periodic refresh after resetting refresh_interval")


def test_query_default_field_is_where_queries_naming_no_field_search(http, index_name):
    r = http.put(f"/{index_name}", {"settings": {"number_of_replicas": 0, "index.query.default_field": ["title"]},
                                    "mappings": {"properties": {"title": {"type": "text"}, "body": {"type": "text"}}}})
    assert r.status_code == 200, r.text
    http.put(f"/{index_name}/_doc/1", {"title": "quick fox", "body": "lazy dog"})
    http.put(f"/{index_name}/_doc/2", {"title": "lazy dog", "body": "quick fox"}, params={"refresh": "true"})

    def ids(query):
        r = http.post(f"/{index_name}/_search", {"query": query})
        assert r.status_code == 200, r.text
        return sorted(h["_id"] for h in r.json()["hits"]["hits"])

    assert ids({"query_string": {"query": "fox"}}) == ["1"]
    assert ids({"simple_query_string": {"query": "fox"}}) == ["1"]
    assert ids({"multi_match": {"query": "fox"}}) == ["1"]
    # a query naming its fields is not affected
    assert ids({"query_string": {"query": "fox", "default_field": "body"}}) == ["2"]
    assert ids({"multi_match": {"query": "fox", "fields": ["title", "body"]}}) == ["1", "2"]
    # dynamic: back to every field
    assert http.put(f"/{index_name}/_settings", {"index.query.default_field": "*"}).status_code == 200
    assert ids({"query_string": {"query": "fox"}}) == ["1", "2"]
    assert http.put(f"/{index_name}/_settings", {"index.query.default_field": ["body^2", "title"]}).status_code == 200
    r = http.post(f"/{index_name}/_search", {"query": {"query_string": {"query": "fox"}}}).json()["hits"]["hits"]
    assert [h["_id"] for h in r] == ["2", "1"], r  # the boosted field ranks first


# ---------------------------------------------------------------- cluster.max_shards_per_node

LIMIT = re.compile(r"^Validation Failed: 1: this action would add \[(\d+)\] total shards, "
                   r"but this cluster currently has \[(\d+)\]/\[(\d+)\] maximum shards open;$")


def test_an_index_of_1024_shards_is_refused_on_one_node(http, index_name):
    r = http.put(f"/{index_name}", {"settings": {"number_of_shards": 1024, "number_of_replicas": 0}})
    err = assert_error(r, 400, "validation_exception")
    added, _current, limit = map(int, LIMIT.match(err["reason"]).groups())
    assert (added, limit) == (1024, 1000)
    assert http.head(f"/{index_name}").status_code == 404


@pytest.fixture
def shard_limit(http):
    def put(value):
        r = http.put("/_cluster/settings", {"transient": {"cluster.max_shards_per_node": value}})
        assert r.status_code == 200, r.text
    yield put
    http.put("/_cluster/settings", {"transient": {"cluster.max_shards_per_node": None}})


def test_max_shards_per_node_limits_creation_replicas_and_opening(http, index_name, shard_limit):
    shard_limit(1)
    r = http.put(f"/{index_name}-probe", {"settings": {"number_of_shards": 2, "number_of_replicas": 0}})
    err = assert_error(r, 400, "validation_exception")
    added, current, limit = map(int, LIMIT.match(err["reason"]).groups())
    assert (added, limit) == (2, 1)
    shard_limit(current + 2)
    a, b = index_name + "-a", index_name + "-b"
    assert http.put(f"/{a}", {"settings": {"number_of_shards": 2, "number_of_replicas": 0}}).status_code == 200
    # Two more copies (one replica per shard) would exceed the limit.
    r = http.put(f"/{a}/_settings", {"index.number_of_replicas": 1})
    assert_error(r, 400, "validation_exception",
                 f"Validation Failed: 1: this action would add [2] total shards, but this cluster currently has "
                 f"[{current + 2}]/[{current + 2}] maximum shards open;")
    # A closed index does not count; opening it counts again.
    assert http.post(f"/{a}/_close").status_code == 200
    assert http.put(f"/{b}", {"settings": {"number_of_shards": 2, "number_of_replicas": 0}}).status_code == 200
    r = http.post(f"/{a}/_open")
    assert_error(r, 400, "validation_exception",
                 f"Validation Failed: 1: this action would add [2] total shards, but this cluster currently has "
                 f"[{current + 2}]/[{current + 2}] maximum shards open;")
    shard_limit(current + 4)
    assert http.post(f"/{a}/_open").status_code == 200


# ---------------------------------------------------------------- node settings at start

@pytest.mark.parametrize("settings,message", [
    ({"thread_pool.analyze.queue_size": "10"}, "setting [thread_pool.analyze.queue_size] is not supported"),
    ({"no.such.setting": "1"}, "unknown setting [no.such.setting]"),
    ({HIGH: "x"}, f"failed to parse setting [{HIGH}] with value [x] as a size in bytes"),
    ({"index.refresh_interval": "fast"}, "failed to parse setting [index.refresh_interval] with value [fast]"),
], ids=["unhonoured", "unknown", "bad-watermark", "bad-index-default"])
def test_node_refuses_to_start_with_an_unknown_unhonoured_or_invalid_setting(node_factory, settings, message):
    n = node_factory(settings, start=False)
    with pytest.raises(NodeStartError) as failure:
        n.start(timeout=30)
    assert message in str(failure.value), str(failure.value)[-2000:]
