"""`_nodes/stats` on one node: the figures are measured, not placeholders (connections, CPU, write
results, cluster-state publications), and `level=indices` splits the index figures by index."""
import time

import requests

from util import assert_error


def local_stats(http, path="/_nodes/_local/stats", **params):
    body = http.get(path, params=params or None).json()
    (stats,) = body["nodes"].values()
    return stats


def test_http_section_counts_the_connections_clients_opened(http, base_url):
    before = local_stats(http, "/_nodes/_local/stats/http")["http"]["total_opened"]
    for _ in range(3):
        # A fresh connection each: requests.get opens and closes its own session.
        assert requests.get(base_url + "/", timeout=10).status_code == 200
    http_section = local_stats(http, "/_nodes/_local/stats/http")["http"]
    assert http_section["total_opened"] >= before + 3, http_section
    # The test's own session is open while it asks.
    assert http_section["current_open"] >= 1, http_section


def test_process_and_os_cpu_percent_measure_the_time_since_the_previous_reading(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    local_stats(http, "/_nodes/_local/stats/process,os")
    deadline = time.monotonic() + 1.5
    n = 0
    while time.monotonic() < deadline:
        lines = []
        for _ in range(500):
            lines += ['{"index":{}}', f'{{"n": {n}, "t": "some words to index {n}"}}']
            n += 1
        r = http.post(f"/{index_name}/_bulk", data="\n".join(lines) + "\n",
                      headers={"content-type": "application/x-ndjson"})
        assert r.status_code == 200 and not r.json()["errors"]
    stats = local_stats(http, "/_nodes/_local/stats/process,os")
    assert 0 < stats["process"]["cpu"]["percent"] <= 100, stats["process"]
    assert 0 < stats["os"]["cpu"]["percent"] <= 100, stats["os"]
    assert stats["process"]["max_file_descriptors"] >= stats["process"]["open_file_descriptors"] > 0


def test_level_indices_reports_each_index_beside_the_node_totals(http, index_name):
    for suffix, docs in (("-a", 3), ("-b", 1)):
        http.put(f"/{index_name}{suffix}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
        for i in range(docs):
            http.put(f"/{index_name}{suffix}/_doc/{i}", {"n": i})
    http.post(f"/{index_name}-*/_refresh")
    indices = local_stats(http, "/_nodes/_local/stats/indices", level="indices")["indices"]
    each = indices["indices"]
    assert each[f"{index_name}-a"]["docs"]["count"] == 3, each[f"{index_name}-a"]
    assert each[f"{index_name}-b"]["docs"]["count"] == 1
    assert indices["docs"]["count"] >= 4
    # Index metrics filter each index's figures too.
    only_docs = local_stats(http, "/_nodes/_local/stats/indices/docs", level="indices")["indices"]
    assert set(only_docs) == {"docs", "indices"}, set(only_docs)
    assert set(only_docs["indices"][f"{index_name}-a"]) == {"docs"}
    # Without the level the index figures are the node's alone.
    assert "indices" not in local_stats(http, "/_nodes/_local/stats/indices")["indices"]


def test_an_unknown_level_is_refused_with_opensearchs_reason(http):
    r = http.get("/_nodes/stats", params={"level": "cluster"})
    assert_error(r, 400, "illegal_argument_exception",
                 reason="level parameter must be one of [indices] or [node] or [shards] but was [cluster]")


def test_doc_status_counts_the_writes_this_node_coordinated_by_status_class(http, index_name):
    def doc_status():
        return local_stats(http, "/_nodes/_local/stats/indices/indexing")["indices"]["indexing"]["doc_status"]

    http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    before = doc_status()
    assert http.put(f"/{index_name}/_doc/1", {"n": 1}).status_code == 201
    assert http.put(f"/{index_name}/_doc/2", {"n": 2}).status_code == 201
    conflict = http.put(f"/{index_name}/_create/1", {"n": 1})
    assert conflict.status_code == 409
    after = doc_status()
    assert after.get("2xx", 0) - before.get("2xx", 0) == 2, (before, after)
    assert after.get("4xx", 0) - before.get("4xx", 0) == 1, (before, after)


def test_discovery_counts_the_cluster_states_this_node_applied(http, index_name):
    before = local_stats(http, "/_nodes/_local/stats/discovery")["discovery"]
    queue = before["cluster_state_queue"]
    assert queue["total"] == queue["pending"] + queue["committed"], queue
    # Creating an index publishes at least one new cluster state.
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    after = local_stats(http, "/_nodes/_local/stats/discovery")["discovery"]
    published = lambda s: sum(s["published_cluster_states"][k] for k in ("full_states", "compatible_diffs"))
    assert published(after) > published(before), (before, after)


def test_the_recovery_index_metric_reports_peer_recoveries_of_the_nodes_copies(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    indices = local_stats(http, "/_nodes/_local/stats/indices/recovery", level="indices")["indices"]
    assert set(indices) == {"recovery", "indices"}, set(indices)
    for figures in (indices["recovery"], indices["indices"][index_name]["recovery"]):
        assert set(figures) == {"current_as_source", "current_as_target", "throttle_time_in_millis"}, figures
        assert all(isinstance(v, int) and v >= 0 for v in figures.values()), figures
    # A node with one copy and no replica recovers nothing into or out of it.
    assert indices["indices"][index_name]["recovery"]["current_as_target"] == 0


def test_segment_file_sizes_are_listed_by_extension_only_when_asked_for(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    for i in range(20):
        http.put(f"/{index_name}/_doc/{i}", {"t": f"some text {i}", "n": i})
    http.post(f"/{index_name}/_refresh")
    asked = {"include_segment_file_sizes": "true", "level": "indices"}
    sizes = local_stats(http, "/_nodes/_local/stats/indices/segments", **asked)["indices"]["indices"][index_name][
        "segments"]["file_sizes"]
    assert sizes, sizes
    for entry in sizes.values():
        assert entry["size_in_bytes"] > 0 and entry["description"], sizes
    store = http.get(f"/{index_name}/_stats/store").json()["indices"][index_name]["primaries"]["store"]
    assert sum(e["size_in_bytes"] for e in sizes.values()) <= store["size_in_bytes"], (sizes, store)
    # _stats lists the same files when asked, and neither API does by default.
    stats = http.get(f"/{index_name}/_stats/segments", params={"include_segment_file_sizes": "true"}).json()
    assert stats["indices"][index_name]["primaries"]["segments"]["file_sizes"] == sizes
    assert http.get(f"/{index_name}/_stats/segments").json()["_all"]["primaries"]["segments"]["file_sizes"] == {}
    default = local_stats(http, "/_nodes/_local/stats/indices/segments")["indices"]["segments"]
    assert default["file_sizes"] == {}, default
