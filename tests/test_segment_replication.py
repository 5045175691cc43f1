"""Segment replication (`index.replication.type: SEGMENT`) on real processes: only the primary
indexes; replicas log the operations and copy the primary's segment files, search exactly what
the primary searches after a `_refresh`, and a promoted replica keeps every acknowledged write.
"""

from __future__ import annotations

import pytest

from cluster import ShoalCluster, numbered
from util import wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster3(tmp_path):
    with ShoalCluster(tmp_path, 3) as c:
        yield c


def create_segment_index(c: ShoalCluster, name: str, shards: int, replicas: int) -> None:
    r = c.http(0).put(f"/{name}", {"settings": {"number_of_shards": shards, "number_of_replicas": replicas,
                                                "index.replication.type": "SEGMENT"}})
    assert r.status_code == 200, r.text
    c.wait_for_status("green")


def copies(c: ShoalCluster, index: str, i: int | None = None) -> list[dict]:
    """Rows of `_cat/shards` for `index`, as node `i` (any node: `None`) sees them."""
    return c.get(f"/_cat/shards/{index}", i, format="json", h="shard,prirep,state,node").json()


def node_ids(c: ShoalCluster) -> dict[str, str]:
    nodes = c.get("/_nodes").json()["nodes"]
    return {n["name"]: node_id for node_id, n in nodes.items()}


def ids_on_node(c: ShoalCluster, index: str, node_id: str) -> list[str]:
    hits = c.every_hit(index, source=False, params={"preference": f"_only_nodes:{node_id}"}, only_held=True)
    return sorted(hit["_id"] for hit in hits)


def shard_indexing(c: ShoalCluster, index: str) -> list[tuple[bool, int]]:
    """(primary, index_total) of every copy."""
    shards = c.get(f"/{index}/_stats", level="shards").json()["indices"][index]["shards"]
    return [(copy["routing"]["primary"], copy["indexing"]["index_total"])
            for group in shards.values() for copy in group]


def test_replicas_search_what_the_primary_indexed_without_indexing_it(cluster3):
    create_segment_index(cluster3, "seg", shards=1, replicas=2)
    cluster3.bulk(1, "seg", numbered(range(300)), refresh="false")
    r = cluster3.http(2).post("/seg/_refresh")
    assert r.status_code == 200 and r.json()["_shards"]["failed"] == 0, r.text
    expected = sorted(str(n) for n in range(300))
    ids = node_ids(cluster3)
    for name, node_id in ids.items():
        assert ids_on_node(cluster3, "seg", node_id) == expected, name
    indexing = shard_indexing(cluster3, "seg")
    assert sorted(indexing) == [(False, 0), (False, 0), (True, 300)], indexing


def test_updates_deletes_and_merges_reach_the_replicas_as_segments(cluster3):
    create_segment_index(cluster3, "churn", shards=2, replicas=1)
    cluster3.bulk(0, "churn", numbered(range(200)), refresh="false")
    cluster3.bulk(1, "churn", {n: {"n": n * 10} for n in range(0, 200, 2)}, refresh="false")
    for n in range(1, 200, 4):
        r = cluster3.http(2).delete(f"/churn/_doc/{n}")
        assert r.status_code == 200, r.text
    cluster3.http(0).post("/churn/_refresh")
    r = cluster3.http(0).post("/churn/_forcemerge", params={"max_num_segments": "1"})
    assert r.status_code == 200, r.text
    cluster3.http(0).post("/churn/_refresh")
    expected = sorted(str(n) for n in range(200) if n % 4 != 1)
    for node_id in node_ids(cluster3).values():
        on_node = ids_on_node(cluster3, "churn", node_id)
        # A node holds copies of some shards only: what it has must be exactly their share.
        assert set(on_node) <= set(expected)
    for preference in ("_primary", "_replica"):
        r = cluster3.http(1).post("/churn/_search", {"size": 1000, "query": {"term": {"n": 40}}},
                                  params={"preference": preference})
        hits = r.json()["hits"]["hits"]
        assert [h["_id"] for h in hits] == ["4"], (preference, r.text)
        r = cluster3.http(1).post("/churn/_count", params={"preference": preference})
        assert r.json()["count"] == len(expected), (preference, r.text)


def test_a_realtime_get_sees_a_write_before_any_refresh(cluster3):
    create_segment_index(cluster3, "rt", shards=1, replicas=2)
    for i in range(3):
        r = cluster3.http(i).put(f"/rt/_doc/d{i}", {"n": i})
        assert r.status_code == 201, r.text
        for j in range(3):
            got = cluster3.http(j).get(f"/rt/_doc/d{i}")
            assert got.status_code == 200 and got.json()["_source"] == {"n": i}, (i, j, got.text)


def test_a_promoted_replica_keeps_every_acknowledged_write(cluster3):
    create_segment_index(cluster3, "promo", shards=1, replicas=1)
    cluster3.bulk(0, "promo", numbered(range(100)), refresh="false")
    cluster3.http(0).post("/promo/_refresh")
    # Acknowledged, never refreshed: on the replica only in its translog.
    cluster3.bulk(0, "promo", numbered(range(100, 150)), refresh="false")
    primary = next(row for row in copies(cluster3, "promo") if row["prirep"] == "p")
    victim = cluster3.index_of(primary["node"])
    survivor = (victim + 1) % 3
    cluster3.kill(victim)

    def promoted():
        rows = copies(cluster3, "promo", survivor)
        return any(r["prirep"] == "p" and r["state"] == "STARTED" and r["node"] != primary["node"] for r in rows)

    wait_for(promoted, timeout=60, what="the replica promoted")
    r = cluster3.http(survivor).put("/promo/_doc/after", {"n": -1}, params={"refresh": "true"})
    assert r.status_code in (200, 201), r.text
    r = cluster3.http(survivor).post("/promo/_count", params={"preference": "_primary"})
    assert r.json()["count"] == 151, r.text
    for n in (0, 99, 100, 149):
        got = cluster3.http(survivor).get(f"/promo/_doc/{n}")
        assert got.status_code == 200, (n, got.text)


def test_cat_segment_replication_lists_every_replica_and_its_lag(cluster3):
    create_segment_index(cluster3, "lag", shards=2, replicas=1)
    cluster3.bulk(0, "lag", numbered(range(100)), refresh="false")
    cluster3.http(1).post("/lag/_refresh")

    def caught_up():
        rows = cluster3.get("/_cat/segment_replication/lag", format="json").json()
        return rows if len(rows) == 2 and all(r["checkpoints_behind"] == "0" for r in rows) else None

    rows = wait_for(caught_up, timeout=10, what="both replicas caught up")
    assert sorted(r["shardId"] for r in rows) == ["[lag][0]", "[lag][1]"], rows
    replica_nodes = {(int(r["shard"]), r["node"]) for r in copies(cluster3, "lag", 0) if r["prirep"] == "r"}
    assert {(int(r["shardId"][6]), r["target_node"]) for r in rows} == replica_nodes, rows
    assert all(r["bytes_behind"] == "0b" and r["current_lag"] == "0s" for r in rows), rows
    assert all(r["last_completed_lag"] is not None for r in rows), rows
    text = cluster3.get("/_cat/segment_replication", v="true").text
    assert text.splitlines()[0].split() == ["shardId", "target_node", "target_host", "checkpoints_behind",
                                            "bytes_behind", "current_lag", "last_completed_lag",
                                            "rejected_requests"], text
    for i in range(3):
        stats = cluster3.get("/_nodes/stats", i).json()["nodes"]
        for node in stats.values():
            replication = node["indices"]["segments"]["segment_replication"]
            assert replication == {"max_bytes_behind": 0, "total_bytes_behind": 0, "max_replication_lag": 0}, replication


def test_nodes_and_cluster_stats_asked_of_any_node_cover_every_node(cluster3):
    create_segment_index(cluster3, "nstats", shards=1, replicas=2)
    cluster3.bulk(0, "nstats", numbered(range(30)), refresh="true")
    ids = node_ids(cluster3)
    for i in range(3):
        body = cluster3.get("/_nodes/stats/indices/docs,segments", i).json()
        assert body["_nodes"] == {"total": 3, "successful": 3, "failed": 0}, body["_nodes"]
        assert set(body["nodes"]) == set(ids.values()), body["nodes"].keys()
        for node_id, stats in body["nodes"].items():
            assert set(stats["indices"]) == {"docs", "segments"}, stats["indices"].keys()
            # Each node counts its own copy of the one shard.
            assert stats["indices"]["docs"]["count"] == 30, (node_id, stats["indices"]["docs"])
            assert "segment_replication" in stats["indices"]["segments"], stats["indices"]["segments"]
            assert "os" not in stats and stats["name"] in ids, stats.keys()
    # `_cluster/stats`: documents once (the primary's), shards and store over every copy.
    cluster = cluster3.get("/_cluster/stats", 2).json()
    assert cluster["_nodes"] == {"total": 3, "successful": 3, "failed": 0}, cluster["_nodes"]
    assert cluster["indices"]["docs"]["count"] == 30, cluster["indices"]["docs"]
    shards = cluster["indices"]["shards"]
    assert (shards["total"], shards["primaries"], shards["replication"]) == (3, 1, 2.0), shards
    assert cluster["nodes"]["count"]["total"] == 3 and cluster["nodes"]["count"]["data"] == 3, cluster["nodes"]
    one = ids[sorted(ids)[1]]
    only = cluster3.get(f"/_cluster/stats/nodes/{one}", 0).json()
    assert only["nodes"]["count"]["total"] == 1 and only["indices"]["shards"]["total"] == 1, only
    body = cluster3.get(f"/_nodes/{one}/stats/transport", 0).json()
    assert list(body["nodes"]) == [one] and body["nodes"][one]["transport"]["tx_count"] > 0, body


DETAILED = ["stage", "time", "files_fetched", "files_percent", "bytes_fetched", "bytes_percent", "start_time",
            "stop_time", "files", "files_total", "bytes", "bytes_total", "replicating_stage_time_taken",
            "get_checkpoint_info_stage_time_taken", "file_diff_stage_time_taken", "get_files_stage_time_taken",
            "finalize_replication_stage_time_taken"]


def test_cat_segment_replication_detailed_shows_each_replicas_last_copy_round_by_stage(cluster3):
    create_segment_index(cluster3, "rounds", shards=1, replicas=2)
    cluster3.bulk(0, "rounds", numbered(range(200)), refresh="true")

    def rounds_reported():
        rows = cluster3.get("/_cat/segment_replication/rounds", format="json", detailed="true").json()
        return rows if len(rows) == 2 and all(r["stage"] == "done" for r in rows) else None

    rows = wait_for(rounds_reported, timeout=10, what="both replicas reported a copy round")
    for row in rows:
        assert int(row["files_fetched"]) == int(row["files"]) > 0, row
        assert int(row["files_total"]) >= int(row["files"]), row
        assert row["files_percent"] == "100.0%" and row["bytes_percent"] == "100.0%", row
        assert row["start_time"].endswith("Z") and row["start_time"] <= row["stop_time"], row
        stages = [int(row[k].removesuffix("ms")) for k in DETAILED[12:]]
        assert all(ms >= 0 for ms in stages), row
    text = cluster3.get("/_cat/segment_replication/rounds", v="true", detailed="true").text
    header = text.splitlines()[0].split()
    assert header[8:] == DETAILED, header
    bad = cluster3.http(0).get("/_cat/segment_replication", params={"detailed": "maybe"})
    assert bad.status_code == 400, bad.text


def test_cat_segments_shows_the_same_segments_on_every_copy(cluster3):
    create_segment_index(cluster3, "same", shards=1, replicas=2)
    cluster3.bulk(0, "same", numbered(range(50)), refresh="false")
    cluster3.http(0).post("/same/_refresh")
    rows = cluster3.get("/_cat/segments/same", format="json").json()
    segments = {}
    for row in rows:
        segments.setdefault(row["prirep"], []).append(row["segment"])
    assert sorted(segments) == ["p", "r"], rows
    primary = sorted(segments["p"])
    replicas = sorted(segments["r"])
    assert replicas == sorted(primary * 2), rows


def test_the_segments_api_lists_the_same_segments_under_every_copy_of_a_shard(cluster3):
    create_segment_index(cluster3, "segs", shards=1, replicas=2)
    cluster3.bulk(0, "segs", numbered(range(60)), refresh="false")
    cluster3.http(0).post("/segs/_refresh")
    body = cluster3.get("/segs/_segments").json()
    assert body["_shards"] == {"total": 3, "successful": 3, "failed": 0}, body
    shard = body["indices"]["segs"]["shards"]["0"]
    assert sorted(c["routing"]["primary"] for c in shard) == [False, False, True], shard
    assert len({c["routing"]["node"] for c in shard}) == 3, shard
    names = [sorted(c["segments"]) for c in shard]
    assert names[0] and names[0] == names[1] == names[2], shard
    for copy in shard:
        assert sum(seg["num_docs"] for seg in copy["segments"].values()) == 60, copy
        assert copy["num_search_segments"] == len(copy["segments"]), copy
    # `_cat/segments` is the same view.
    rows = cluster3.get("/_cat/segments/segs", format="json").json()
    assert sorted(r["segment"] for r in rows) == sorted(n for copy in names for n in copy), rows


def test_a_force_merge_of_the_primaries_only_counts_and_merges_the_primaries(cluster3):
    create_segment_index(cluster3, "pmerge", shards=2, replicas=1)
    for start in range(0, 60, 20):
        cluster3.bulk(0, "pmerge", numbered(range(start, start + 20)), refresh="true")
    r = cluster3.http(0).post("/pmerge/_forcemerge", params={"primary_only": "true", "max_num_segments": "1"})
    assert r.status_code == 200, r.text
    assert r.json()["_shards"] == {"total": 2, "successful": 2, "failed": 0}, r.text
    cluster3.http(0).post("/pmerge/_refresh")
    shards = cluster3.get("/pmerge/_segments").json()["indices"]["pmerge"]["shards"]
    for number, shard in shards.items():
        # The replicas hold the primary's merged segment: they copy it, never merge.
        assert all(len(copy["segments"]) == 1 for copy in shard), (number, shard)
    r = cluster3.http(0).post("/pmerge/_forcemerge", params={"max_num_segment": "1"})
    assert r.status_code == 400 and "[max_num_segment]" in r.json()["error"]["reason"], r.text


def test_a_write_with_refresh_true_is_searchable_on_every_replica_when_it_answers(cluster3):
    create_segment_index(cluster3, "raw", shards=1, replicas=2)
    for n in range(5):
        r = cluster3.http(n % 3).put(f"/raw/_doc/w{n}", {"n": n}, params={"refresh": "true"})
        assert r.status_code == 201, r.text
        for node_id in node_ids(cluster3).values():
            assert f"w{n}" in ids_on_node(cluster3, "raw", node_id), (n, node_id)
    lines = [line for n in range(20) for line in ({"index": {"_id": f"b{n}"}}, {"n": n})]
    r = cluster3.http(0).bulk(lines, path="/raw/_bulk", params={"refresh": "wait_for"})
    assert r.status_code == 200 and not r.json()["errors"], r.text
    for node_id in node_ids(cluster3).values():
        assert len(ids_on_node(cluster3, "raw", node_id)) == 25, node_id
