"""Cluster health/state/settings, nodes, and the _cat APIs on one node."""
import re
from pathlib import Path

import pytest

from util import assert_error

HEALTH_FIELDS = ["cluster_name", "status", "timed_out", "number_of_nodes", "number_of_data_nodes",
                 "discovered_master", "discovered_cluster_manager", "active_primary_shards", "active_shards",
                 "relocating_shards", "initializing_shards", "unassigned_shards", "delayed_unassigned_shards",
                 "number_of_pending_tasks", "number_of_in_flight_fetch", "task_max_waiting_in_queue_millis",
                 "active_shards_percent_as_number"]


def test_cluster_health_fields(http, node):
    r = http.get("/_cluster/health")
    assert r.status_code == 200
    body = r.json()
    assert list(body) == HEALTH_FIELDS
    assert body["number_of_nodes"] == 1 and body["number_of_data_nodes"] == 1
    assert body["status"] in ("green", "yellow")
    if node is not None:
        assert body["cluster_name"] == "shoal-test"


def test_health_yellow_with_replicas(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 2, "number_of_replicas": 1}})
    r = http.get(f"/_cluster/health/{index_name}", params={"wait_for_status": "yellow", "timeout": "10s"})
    assert r.status_code == 200
    b = r.json()
    assert b["status"] == "yellow" and b["timed_out"] is False
    assert b["active_primary_shards"] == 2 and b["active_shards"] == 2 and b["unassigned_shards"] == 2
    # waiting for green cannot succeed on one node: 408 with timed_out
    r = http.get(f"/_cluster/health/{index_name}", params={"wait_for_status": "green", "timeout": "1s"})
    assert r.status_code == 408
    assert r.json()["timed_out"] is True and r.json()["status"] == "yellow"


def test_health_green_without_replicas(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 3, "number_of_replicas": 0}})
    r = http.get(f"/_cluster/health/{index_name}", params={"wait_for_status": "green", "timeout": "10s"})
    assert r.status_code == 200
    b = r.json()
    assert b["status"] == "green"
    assert b["active_primary_shards"] == 3 and b["active_shards"] == 3 and b["unassigned_shards"] == 0


def test_health_level_indices_and_shards(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 2, "number_of_replicas": 1}})
    b = http.get(f"/_cluster/health/{index_name}", params={"level": "indices"}).json()
    assert b["indices"] == {index_name: {"status": "yellow", "number_of_shards": 2, "number_of_replicas": 1,
                                         "active_primary_shards": 2, "active_shards": 2, "relocating_shards": 0,
                                         "initializing_shards": 0, "unassigned_shards": 2}}
    b = http.get(f"/_cluster/health/{index_name}", params={"level": "shards"}).json()
    shards = b["indices"][index_name]["shards"]
    assert shards["0"] == {"status": "yellow", "primary_active": True, "active_shards": 1, "relocating_shards": 0,
                           "initializing_shards": 0, "unassigned_shards": 1}
    assert set(shards) == {"0", "1"}


def test_health_missing_index_times_out_red(http, index_name):
    r = http.get(f"/_cluster/health/{index_name}", params={"timeout": "1s"})
    assert r.status_code == 408
    assert r.json()["status"] == "red" and r.json()["timed_out"] is True


def test_cluster_state(http, index):
    r = http.get("/_cluster/state")
    assert r.status_code == 200
    b = r.json()
    assert set(b) >= {"cluster_name", "cluster_uuid", "version", "state_uuid", "master_node", "nodes",
                      "metadata", "routing_table"}
    assert b["master_node"] in b["nodes"]
    meta = b["metadata"]["indices"][index]
    assert meta["state"] == "open"
    assert meta["settings"]["index"]["number_of_shards"] == "1"
    assert "mappings" in meta and "aliases" in meta
    shard0 = b["routing_table"]["indices"][index]["shards"]["0"][0]
    assert shard0["state"] == "STARTED" and shard0["primary"] is True and shard0["index"] == index
    assert shard0["node"] == b["master_node"]


def test_cluster_state_filtered(http, index):
    b = http.get(f"/_cluster/state/metadata/{index}").json()
    assert list(b["metadata"]["indices"]) == [index]
    assert "routing_table" not in b


def test_cluster_state_honours_flat_settings_and_index_resolution_options(http, index):
    flat = http.get(f"/_cluster/state/metadata/{index}", params={"flat_settings": "true"}).json()
    assert flat["metadata"]["indices"][index]["settings"]["index.number_of_shards"] == "1", flat
    missing = f"{index}-missing"
    assert http.get(f"/_cluster/state/metadata/{missing}").status_code == 404
    b = http.get(f"/_cluster/state/metadata/{index},{missing}", params={"ignore_unavailable": "true"}).json()
    assert list(b["metadata"]["indices"]) == [index], b
    assert http.post(f"/{index}/_close").status_code == 200
    try:
        open_only = http.get(f"/_cluster/state/metadata/{index}*", params={"expand_wildcards": "open"}).json()
        assert index not in open_only["metadata"]["indices"], open_only
        closed = http.get(f"/_cluster/state/metadata/{index}*", params={"expand_wildcards": "closed"}).json()
        assert closed["metadata"]["indices"][index]["state"] == "close", closed
    finally:
        http.post(f"/{index}/_open")
    err = http.get(f"/_cluster/state/metadata/{index}*", params={"expand_wildcards": "bogus"})
    assert err.status_code == 400 and "WildcardStates.BOGUS" in err.json()["error"]["reason"], err.text


def test_cluster_settings_persistent_and_transient(http):
    r = http.get("/_cluster/settings")
    assert r.status_code == 200
    assert set(r.json()) == {"persistent", "transient"}
    try:
        r = http.put("/_cluster/settings", {"persistent": {"cluster.routing.allocation.enable": "all"},
                                            "transient": {"action.auto_create_index": "true"}})
        assert r.status_code == 200, r.text
        assert r.json() == {"acknowledged": True,
                            "persistent": {"cluster": {"routing": {"allocation": {"enable": "all"}}}},
                            "transient": {"action": {"auto_create_index": "true"}}}
        got = http.get("/_cluster/settings", params={"flat_settings": "true"}).json()
        assert got["persistent"]["cluster.routing.allocation.enable"] == "all"
        assert got["transient"]["action.auto_create_index"] == "true"
    finally:
        http.put("/_cluster/settings", {"persistent": {"cluster.routing.allocation.enable": None},
                                        "transient": {"action.auto_create_index": None}})


def test_cluster_settings_unknown_refused(http):
    r = http.put("/_cluster/settings", {"persistent": {"no.such.setting": 1}})
    assert_error(r, 400, "illegal_argument_exception",
                 reason="persistent setting [no.such.setting], not recognized")


def test_nodes_info(http, node):
    r = http.get("/_nodes")
    assert r.status_code == 200
    b = r.json()
    assert b["_nodes"] == {"total": 1, "successful": 1, "failed": 0}
    (node_id, info), = b["nodes"].items()
    assert set(info) >= {"name", "transport_address", "host", "ip", "version", "roles", "settings"}
    assert info["version"] == "2.18.0"
    if node is not None:
        assert info["name"] == "test-node"
        assert b["cluster_name"] == "shoal-test"


def test_nodes_stats(http, index):
    r = http.get("/_nodes/stats")
    assert r.status_code == 200
    b = r.json()
    (node_id, st), = b["nodes"].items()
    assert set(st) >= {"name", "timestamp", "indices", "os", "process", "fs"}
    assert set(st["indices"]) >= {"docs", "store", "indexing", "search"}
    assert "cpu" in st["process"] and "mem" in st["os"]
    assert st["fs"]["total"]["total_in_bytes"] > 0


def test_cluster_stats_counts_the_field_types_of_the_mappings(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 2, "number_of_replicas": 0},
                                "mappings": {"properties": {"t": {"type": "text", "fields": {"k": {"type": "keyword"}}},
                                                            "o": {"properties": {"n": {"type": "long"}}}}}})
    http.put(f"/{index_name}/_doc/1", {"t": "a b", "o": {"n": 1}}, params={"refresh": "true"})
    body = http.get("/_cluster/stats").json()
    assert body["status"] in ("green", "yellow") and body["cluster_uuid"], body
    types = {t["name"]: t for t in body["indices"]["mappings"]["field_types"]}
    for name in ("text", "keyword", "long", "object"):
        assert types[name]["count"] >= 1 and types[name]["index_count"] >= 1, types
    assert body["indices"]["docs"]["count"] >= 1 and body["indices"]["store"]["size_in_bytes"] > 0, body["indices"]
    assert body["nodes"]["os"]["mem"]["total_in_bytes"] > 0 and body["nodes"]["fs"]["total_in_bytes"] > 0, body["nodes"]
    assert http.get("/_cluster/stats", params={"level": "indices"}).status_code == 400


# ---------------------------------------------------------------- _cat

def cat_rows(text):
    return [line.split() for line in text.strip("\n").split("\n") if line.strip()]


def test_cat_indices(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 1}})
    http.put(f"/{index_name}/_doc/1", {"a": 1}, params={"refresh": "true"})
    r = http.get(f"/_cat/indices/{index_name}", params={"v": "true"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    rows = cat_rows(r.text)
    assert rows[0] == ["health", "status", "index", "uuid", "pri", "rep", "docs.count", "docs.deleted",
                       "store.size", "pri.store.size"]
    assert rows[1][:4] == ["yellow", "open", index_name, rows[1][3]]
    assert rows[1][4:8] == ["1", "1", "1", "0"]
    assert re.fullmatch(r"[0-9.]+(b|kb|mb)", rows[1][8])
    # without v: no header
    assert cat_rows(http.get(f"/_cat/indices/{index_name}").text)[0][2] == index_name


def test_cat_indices_json_h_s_bytes(http, index_name):
    for s in ("-b", "-a"):
        http.put(f"/{index_name}{s}", {"settings": {"number_of_replicas": 0}})
    r = http.get(f"/_cat/indices/{index_name}-*", params={"format": "json", "bytes": "b"})
    assert r.headers["content-type"].startswith("application/json")
    rows = r.json()
    assert set(rows[0]) == {"health", "status", "index", "uuid", "pri", "rep", "docs.count", "docs.deleted",
                            "store.size", "pri.store.size"}
    assert rows[0]["store.size"].isdigit()
    assert all(isinstance(v, str) for v in rows[0].values())
    r = http.get(f"/_cat/indices/{index_name}-*", params={"format": "json", "h": "index,health", "s": "index"})
    assert r.json() == [{"index": f"{index_name}-a", "health": "green"}, {"index": f"{index_name}-b", "health": "green"}]
    r = http.get(f"/_cat/indices/{index_name}-*", params={"h": "i,dc", "s": "i:desc", "v": "true"})
    assert cat_rows(r.text) == [["i", "dc"], [f"{index_name}-b", "0"], [f"{index_name}-a", "0"]]


def test_cat_text_alignment(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_replicas": 0}})
    r = http.get(f"/_cat/indices/{index_name}", params={"v": "true", "h": "index,docs.count"})
    lines = r.text.split("\n")
    assert lines[0] == "index" + " " * (len(index_name) - len("index") + 1) + "docs.count"
    # numbers are right-aligned under their header
    assert lines[1] == index_name + " " + " " * (len("docs.count") - 1) + "0"
    assert r.text.endswith("\n")


def test_cat_help(http):
    r = http.get("/_cat/indices", params={"help": "true"})
    assert r.status_code == 200
    first = r.text.split("\n")[0]
    assert re.match(r"^health\s+\| h\s+\| current health status\s*$", first)
    r = http.get("/_cat")
    assert r.status_code == 200 and "/_cat/indices" in r.text


SPEC_PATHS = Path(__file__).resolve().parents[1] / "crates/shoal-rest/src/spec_params_table.rs"


def test_cat_lists_every_cat_endpoint_and_each_listed_one_answers(http, index_name):
    """`GET /_cat` is how a user finds the cat APIs: every `_cat` path of OpenSearch's REST spec
    that Shoal serves is listed (or its `/{…}` form is), and every listed one answers."""
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0},
                                 "aliases": {f"{index_name}-alias": {}}})
    listed = http.get("/_cat").text.split("\n")
    assert listed[0] == "=^.^="
    paths = [line for line in listed[1:] if line]
    values = {"index": index_name, "node_id": "_all", "thread_pools": "write", "thread_pool_patterns": "write",
              "alias": f"{index_name}-alias", "name": f"{index_name}-alias", "fields": "*",
              "repository": "no-such-repository"}
    concrete = lambda path: re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)
    shape = lambda path: re.sub(r"\{\w+\}", "{}", path)
    listed_shapes = {shape(p) for p in paths}
    spec = re.findall(r'path: "(/_cat/[^"]*)"', SPEC_PATHS.read_text())
    assert "/_cat/tasks" in spec, "the spec table moved"
    for path in spec:
        if path == "/_cat/master":
            continue  # the old name of /_cat/cluster_manager
        unserved = "no handler found for uri" in http.get(concrete(path)).text
        assert unserved or {shape(path), shape(path) + "/{}"} & listed_shapes, f"{path} is served, not listed"
    for path in paths:
        if path == "/_cat/snapshots/{repository}":
            continue  # needs a registered repository; test_snapshots covers it
        r = http.get(concrete(path))
        assert r.status_code == 200, (path, r.status_code, r.text[:300])


def test_cat_shards(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 1}})
    r = http.get(f"/_cat/shards/{index_name}", params={"v": "true"})
    rows = cat_rows(r.text)
    assert rows[0] == ["index", "shard", "prirep", "state", "docs", "store", "ip", "node"]
    assert rows[1][:4] == [index_name, "0", "p", "STARTED"]
    assert rows[2] == [index_name, "0", "r", "UNASSIGNED"]
    j = http.get(f"/_cat/shards/{index_name}", params={"format": "json"}).json()
    assert j[1] == {"index": index_name, "shard": "0", "prirep": "r", "state": "UNASSIGNED", "docs": None,
                    "store": None, "ip": None, "node": None}


def test_cat_health(http):
    r = http.get("/_cat/health", params={"v": "true"})
    rows = cat_rows(r.text)
    assert rows[0] == ["epoch", "timestamp", "cluster", "status", "node.total", "node.data",
                       "discovered_cluster_manager", "shards", "pri", "relo", "init", "unassign", "pending_tasks",
                       "max_task_wait_time", "active_shards_percent"]
    j = http.get("/_cat/health", params={"format": "json"}).json()[0]
    assert j["node.total"] == "1" and j["status"] in ("green", "yellow")
    assert j["active_shards_percent"].endswith("%")


def test_cat_count(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1}, params={"refresh": "true"})
    rows = cat_rows(http.get(f"/_cat/count/{index}", params={"v": "true"}).text)
    assert rows[0] == ["epoch", "timestamp", "count"]
    assert rows[1][2] == "1"
    assert http.get(f"/_cat/count/{index}", params={"format": "json"}).json()[0]["count"] == "1"


def test_cat_nodes(http):
    rows = cat_rows(http.get("/_cat/nodes", params={"v": "true"}).text)
    assert rows[0] == ["ip", "heap.percent", "ram.percent", "cpu", "load_1m", "load_5m", "load_15m", "node.role",
                       "node.roles", "cluster_manager", "name"]
    j = http.get("/_cat/nodes", params={"format": "json", "h": "name,ip,cluster_manager"}).json()
    assert len(j) == 1 and j[0]["ip"] == "127.0.0.1" and j[0]["cluster_manager"] == "*"


def test_cat_segments(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1}, params={"refresh": "true"})
    rows = cat_rows(http.get(f"/_cat/segments/{index}", params={"v": "true"}).text)
    assert rows[0] == ["index", "shard", "prirep", "ip", "segment", "generation", "docs.count", "docs.deleted",
                       "size", "size.memory", "committed", "searchable", "version", "compound"]
    assert rows[1][:3] == [index, "0", "p"]
    assert rows[1][6] == "1"


def test_cat_aliases(http, index):
    http.post("/_aliases", {"actions": [{"add": {"index": index, "alias": index + "-al"}}]})
    rows = cat_rows(http.get(f"/_cat/aliases/{index}-al", params={"v": "true"}).text)
    assert rows[0] == ["alias", "index", "filter", "routing.index", "routing.search", "is_write_index"]
    assert rows[1] == [index + "-al", index, "-", "-", "-", "-"]
