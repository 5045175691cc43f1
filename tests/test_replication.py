"""Document replication and peer recovery on real processes: replicas recover from their
primary (files, then the operations above the commit), receive every later write, serve reads,
take over when the primary's node dies, and relocations (exclude._name) keep every document.
"""

from __future__ import annotations

import os
import re
import time

import pytest

from cluster import ShoalCluster, numbered
from util import wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster3(tmp_path):
    with ShoalCluster(tmp_path, 3) as c:
        yield c


def shard_rows(c: ShoalCluster, index: str, i: int | None = None) -> list[dict]:
    """Rows of `_cat/shards`; waits briefly until every started copy reports its stats."""
    deadline = time.monotonic() + 10
    while True:
        rows = c.get(f"/_cat/shards/{index}", i, format="json", h="shard,prirep,state,docs,node,seq_no.max").json()
        if all(r["docs"] is not None for r in rows if r["state"] == "STARTED") or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


def wait_green(c: ShoalCluster, i: int | None = None, timeout: float = 60) -> None:
    c.wait_for_status("green", timeout=timeout, i=i)


def assert_copies_identical(c: ShoalCluster, index: str, i: int | None = None) -> None:
    c.http(i or 0).post(f"/{index}/_refresh")
    rows = [r for r in shard_rows(c, index, i) if r["state"] == "STARTED"]
    by_shard: dict[str, set] = {}
    for row in rows:
        by_shard.setdefault(row["shard"], set()).add((row["docs"], row["seq_no.max"]))
    assert all(len(v) == 1 for v in by_shard.values()), rows


def test_replicas_recover_and_receive_every_write(cluster3):
    r = cluster3.http(0).put("/rep", {"settings": {"number_of_shards": 3, "number_of_replicas": 1}})
    assert r.status_code == 200, r.text
    wait_green(cluster3)
    body = cluster3.bulk(1, "rep", numbered(range(300)))
    assert {item["index"]["_shards"]["successful"] for item in body["items"]} == {2}
    assert {item["index"]["_shards"]["total"] for item in body["items"]} == {2}
    assert_copies_identical(cluster3, "rep")
    r = cluster3.http(0).put("/rep/_doc/fresh", {"n": -1}, params={"refresh": "true"})
    assert r.json()["_shards"] == {"total": 2, "successful": 2, "failed": 0}, r.text
    for preference in ("_primary", "_replica"):
        hits = cluster3.http(1).post("/rep/_search", {"query": {"ids": {"values": ["fresh"]}}},
                                     params={"preference": preference}).json()["hits"]["hits"]
        assert len(hits) == 1, preference
    for preference in ("_primary", "_replica"):
        r = cluster3.http(2).post("/rep/_search", {"size": 0, "track_total_hits": True},
                                  params={"preference": preference})
        assert r.json()["hits"]["total"]["value"] == 301, (preference, r.text)


def test_adding_a_replica_copies_existing_documents(cluster3):
    r = cluster3.http(0).put("/grow", {"settings": {"number_of_shards": 2, "number_of_replicas": 0}})
    assert r.status_code == 200, r.text
    wait_green(cluster3)
    cluster3.bulk(0, "grow", numbered(range(500)))
    cluster3.http(0).post("/grow/_flush")
    cluster3.bulk(0, "grow", numbered(range(500, 600)))  # above the commit: replayed from the history
    r = cluster3.http(1).put("/grow/_settings", {"index": {"number_of_replicas": 1}})
    assert r.status_code == 200, r.text
    wait_green(cluster3)
    assert_copies_identical(cluster3, "grow")
    rows = shard_rows(cluster3, "grow")
    assert sum(int(r["docs"]) for r in rows if r["prirep"] == "r") == 600, rows
    # Progress and history of the recoveries, from any node.
    rows = cluster3.get("/_cat/recovery/grow", 2, format="json").json()
    peer = [r for r in rows if r["type"] == "peer"]
    store = [r for r in rows if r["type"] == "empty_store"]
    assert len(peer) == 2 and len(store) == 2, rows
    assert all(r["stage"] == "done" and int(r["files_total"]) > 0 and r["bytes_percent"] == "100.0%"
               and r["source_node"] != r["target_node"] for r in peer), peer
    body = cluster3.get("/grow/_recovery", 0).json()
    shards = body["grow"]["shards"]
    assert sorted((s["id"], s["type"]) for s in shards) == [(0, "EMPTY_STORE"), (0, "PEER"), (1, "EMPTY_STORE"), (1, "PEER")]
    assert all(s["index"]["size"]["total_in_bytes"] > 0 for s in shards if s["type"] == "PEER")
    # File by file: a peer recovery lists what it copied or reused, and the files add up to
    # the totals; a new primary's empty store lists none.
    detailed = cluster3.get("/grow/_recovery", 0, detailed="true").json()["grow"]["shards"]
    for s in detailed:
        files, size = s["index"]["files"], s["index"]["size"]
        if s["type"] == "EMPTY_STORE":
            assert files["details"] == [], s
            continue
        assert len(files["details"]) == files["total"] > 0, s
        assert sum(f["length_in_bytes"] for f in files["details"]) == size["total_in_bytes"], s
        assert sum(f["recovered_in_bytes"] for f in files["details"] if not f["reused"]) == size["recovered_in_bytes"], s
    assert cluster3.get("/_cat/recovery/grow", 0, active_only="true", format="json").json() == []


def test_a_dead_primary_is_replaced_by_its_replica_without_losing_documents(cluster3):
    r = cluster3.http(0).put("/failover", {"settings": {
        "number_of_shards": 3, "number_of_replicas": 1,
        "index.unassigned.node_left.delayed_timeout": "0"}})
    assert r.status_code == 200, r.text
    wait_green(cluster3)
    cluster3.bulk(0, "failover", numbered(range(300)))
    manager = cluster3.index_of(cluster3.cluster_manager())
    victim = next(i for i in range(3) if i != manager)
    cluster3.kill(victim)
    cluster3.wait_for_nodes(2, i=manager, timeout=30)
    wait_green(cluster3, i=manager, timeout=60)
    r = cluster3.http(manager).post("/failover/_search", {"size": 0, "track_total_hits": True})
    assert r.json()["hits"]["total"]["value"] == 300, r.text
    assert r.json()["_shards"]["failed"] == 0
    # Writes continue on the promoted primaries and reach the new replicas.
    survivor = next(i for i in range(3) if i not in (manager, victim))
    cluster3.bulk(survivor, "failover", numbered(range(300, 400)))
    assert_copies_identical(cluster3, "failover", manager)
    r = cluster3.http(manager).post("/failover/_count")
    assert r.json()["count"] == 400


def test_excluding_a_node_moves_its_shards_away_with_their_documents(cluster3):
    r = cluster3.http(0).put("/drain", {"settings": {"number_of_shards": 6, "number_of_replicas": 0}})
    assert r.status_code == 200, r.text
    wait_green(cluster3)
    cluster3.bulk(0, "drain", numbered(range(600)))
    r = cluster3.http(0).put("/_cluster/settings", {"persistent": {
        "cluster.routing.allocation.exclude._name": "node-2"}})
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 60
    while True:
        rows = shard_rows(cluster3, "drain")
        if all(r["node"] != "node-2" and r["state"] == "STARTED" for r in rows):
            break
        assert time.monotonic() < deadline, rows
        time.sleep(0.2)
    assert sum(int(r["docs"]) for r in rows) == 600, rows
    assert cluster3.http(2).post("/drain/_count").json()["count"] == 600


def test_a_frozen_primary_is_replaced_and_acknowledges_nothing_after_it_thaws(cluster3):
    manager = cluster3.index_of(cluster3.cluster_manager())
    others = [i for i in range(3) if i != manager]
    # Both copies off the cluster manager, so freezing the primary leaves the manager up.
    r = cluster3.http(manager).put("/frozen", {"settings": {
        "number_of_shards": 1, "number_of_replicas": 1,
        "index.routing.allocation.exclude._name": cluster3.nodes[manager].name,
        "index.unassigned.node_left.delayed_timeout": "0"}})
    assert r.status_code == 200, r.text
    wait_green(cluster3, i=manager)
    cluster3.bulk(manager, "frozen", numbered(range(50)))
    primary = next(row["node"] for row in shard_rows(cluster3, "frozen", manager) if row["prirep"] == "p")
    old = cluster3.index_of(primary)
    replica = next(i for i in others if i != old)
    cluster3.stop(old)
    cluster3.wait_for_nodes(2, i=manager, timeout=30)
    # The replica was promoted: writes through the manager succeed.
    deadline = time.monotonic() + 30
    while True:
        r = cluster3.http(manager).put("/frozen/_doc/after", {"n": 1000})
        if r.status_code in (200, 201):
            break
        assert time.monotonic() < deadline, r.text
        time.sleep(0.2)
    cluster3.cont(old)
    # Right after thawing, the old primary may still believe it is one: it must not
    # acknowledge a write the new primary does not have.
    acked_on_old = []
    for n in range(20):
        try:
            r = cluster3.http(old).put(f"/frozen/_doc/stale-{n}", {"n": n}, timeout=30)
        except Exception:
            continue
        if r.status_code in (200, 201):
            acked_on_old.append(f"stale-{n}")
    cluster3.wait_for_nodes(3, i=manager, timeout=60)
    wait_green(cluster3, i=manager, timeout=60)
    cluster3.http(manager).post("/frozen/_refresh")
    for doc_id in acked_on_old + ["after", "0", "49"]:
        for preference in ("_primary", "_replica"):
            r = cluster3.http(replica).get(f"/frozen/_doc/{doc_id}", params={"preference": preference})
            assert r.status_code == 200, (doc_id, preference, r.text)
    assert_copies_identical(cluster3, "frozen", manager)


def test_an_idle_primary_tells_its_replicas_the_global_checkpoint(cluster3):
    """A write carries the global checkpoint known before it, so after the last write of a
    burst the replica lags; `index.global_checkpoint_sync.interval` closes the gap."""
    r = cluster3.http(0).put("/gcp", {"settings": {
        "number_of_shards": 1, "number_of_replicas": 1,
        "index.global_checkpoint_sync.interval": "200ms"}})
    assert r.status_code == 200, r.text
    wait_green(cluster3)
    cluster3.bulk(0, "gcp", numbered(range(5)))

    def checkpoints():
        rows = cluster3.get("/_cat/shards/gcp", 0, format="json",
                            h="prirep,state,seq_no.max,seq_no.global_checkpoint").json()
        return {r["prirep"]: (r["seq_no.max"], r["seq_no.global_checkpoint"]) for r in rows}

    deadline = time.monotonic() + 10
    while checkpoints().get("r") != ("4", "4") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert checkpoints() == {"p": ("4", "4"), "r": ("4", "4")}


def test_a_node_deletes_the_data_of_a_copy_that_moved_away(cluster3):
    """Once every copy of a shard is started on other nodes, the node it left deletes its files."""
    r = cluster3.http(0).put("/moved", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    assert r.status_code == 200, r.text
    wait_green(cluster3)
    cluster3.bulk(0, "moved", numbered(range(50)))
    uuid = cluster3.get("/_cat/indices/moved", 0, format="json", h="uuid").json()[0]["uuid"]
    holder = shard_rows(cluster3, "moved")[0]["node"]
    i = cluster3.index_of(holder)
    shard_dir = cluster3.nodes[i].data / "indices" / uuid / "0"
    assert shard_dir.exists()
    r = cluster3.http(0).put("/moved/_settings", {"index.routing.allocation.exclude._name": holder})
    assert r.status_code == 200, r.text
    cluster3.wait(lambda h: h["relocating_shards"] == 0 and shard_rows(cluster3, "moved")[0]["node"] != holder,
                  30, 0, "the copy moved away")
    deadline = time.monotonic() + 10
    while shard_dir.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not shard_dir.exists(), "the old copy's files are gone"
    assert cluster3.get("/moved/_count", 0).json()["count"] == 50


def test_recovery_follows_max_bytes_per_sec_and_bad_values_are_refused(cluster3):
    http = cluster3.http(0)
    r = http.put("/_cluster/settings", {"transient": {"indices.recovery.max_bytes_per_sec": "fast"}})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "illegal_argument_exception"
    r = http.put("/_cluster/settings", {"transient": {"indices.recovery.max_concurrent_file_chunks": 9}})
    assert r.status_code == 400, r.text

    r = http.put("/throttled", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    assert r.status_code == 200, r.text
    wait_green(cluster3)
    size = cluster3.load_incompressible(0, "throttled")

    def recover(rate: str) -> tuple[float, int]:
        """Seconds to add a replica at `rate`, and the throttle time its `_recovery` reports."""
        r = http.put("/_cluster/settings", {"transient": {"indices.recovery.max_bytes_per_sec": rate}})
        assert r.status_code == 200, r.text
        started = time.monotonic()
        http.put("/throttled/_settings", {"index": {"number_of_replicas": 1}})
        wait_green(cluster3, timeout=120)
        took = time.monotonic() - started
        shards = http.get("/throttled/_recovery").json()["throttled"]["shards"]
        (peer,) = [s for s in shards if s["type"] == "PEER"]
        throttled = peer["index"]["target_throttle_time_in_millis"]
        assert peer["index"]["source_throttle_time_in_millis"] == 0, peer
        # The nodes report the same wait in their index figures (`indices.recovery`).
        nodes = http.get("/_nodes/stats/indices/recovery", params={"level": "indices"}).json()["nodes"]
        reported = sum(n["indices"]["indices"].get("throttled", {}).get("recovery", {}).get("throttle_time_in_millis", 0)
                       for n in nodes.values())
        assert reported >= throttled, (reported, throttled, nodes)
        # `_stats` sums the same figure over the copies, each read on the node holding it.
        copies = http.get("/throttled/_stats/recovery", params={"level": "shards"}).json()["indices"]["throttled"]
        assert copies["total"]["recovery"]["throttle_time_in_millis"] >= throttled, copies
        replica = next(c for c in copies["shards"]["0"] if not c["routing"]["primary"])
        assert replica["recovery"]["throttle_time_in_millis"] >= throttled, copies
        assert set(copies["total"]) == {"recovery"}, copies
        http.put("/throttled/_settings", {"index": {"number_of_replicas": 0}})
        wait_green(cluster3)
        return took, throttled

    rate = max(size // 3, 64 << 10)  # about three seconds for the whole store
    slow, slow_throttled = recover(f"{rate}b")
    fast, fast_throttled = recover("-1")
    assert slow >= 2.0, (size, slow)
    assert fast < slow / 2, (size, slow, fast)
    # The slow copy waited for the rate most of the time it took; the unthrottled one never.
    assert 1000 <= slow_throttled <= slow * 1000, (slow, slow_throttled)
    assert fast_throttled == 0, fast_throttled
    http.put("/_cluster/settings", {"transient": {"indices.recovery.max_bytes_per_sec": None}})


def test_a_recovery_whose_target_dies_releases_what_the_primary_pinned_for_it(cluster3):
    """A file-based recovery pins the primary's commit (and leases its history) until the target
    finalizes; when the target's node dies mid-copy, the primary drops the recovery and deletes
    the pinned files instead of keeping them for good."""
    manager = cluster3.index_of(cluster3.cluster_manager())
    http = cluster3.http(manager)
    r = http.put("/abandoned", {"settings": {"number_of_shards": 1, "number_of_replicas": 0,
                                             "index.routing.allocation.exclude._name": cluster3.nodes[manager].name}})
    assert r.status_code == 200, r.text
    wait_green(cluster3, manager)
    for start in range(0, 1500, 500):  # about 3 MB of random text
        cluster3.bulk(manager, "abandoned", {str(n): {"n": n, "filler": os.urandom(1000).hex()}
                                             for n in range(start, start + 500)}, refresh="false")
    uuid = cluster3.get("/_cat/indices/abandoned", manager, format="json", h="uuid").json()[0]["uuid"]
    primary = cluster3.index_of(shard_rows(cluster3, "abandoned", manager)[0]["node"])
    target = next(i for i in range(3) if i not in (manager, primary))
    pinned = cluster3.nodes[primary].data / "indices" / uuid / "0" / "recovery"
    r = http.put("/_cluster/settings", {"transient": {"indices.recovery.max_bytes_per_sec": "200kb"}})
    assert r.status_code == 200, r.text
    try:
        assert http.put("/abandoned/_settings", {"index": {"number_of_replicas": 1}}).status_code == 200
        wait_for(lambda: pinned.exists() and any(pinned.iterdir()), 30, what="the primary to pin its commit")
        stage = cluster3.get("/abandoned/_recovery", manager).json()["abandoned"]["shards"]
        assert any(s["type"] == "PEER" and s["stage"] != "DONE" for s in stage), stage
        cluster3.kill(target)
        cluster3.wait_for_nodes(2, i=manager, timeout=30)
        wait_for(lambda: not pinned.exists() or not any(pinned.iterdir()), 10,
                 what="the primary to release the files it pinned for the dead target")
    finally:
        http.put("/_cluster/settings", {"transient": {"indices.recovery.max_bytes_per_sec": None}})
    assert cluster3.get("/abandoned/_count", manager).json()["count"] == 1500


def test_a_promoted_replica_resyncs_a_long_history_in_batches(cluster3):
    """A bulk of 2,000 documents, then the primary's node dies before the replicas learn the new
    global checkpoint: the promoted replica resyncs all 2,000 operations to the other replica
    (in batches of 500, the first with the whole seq_no list) and both copies end identical."""
    r = cluster3.http(0).put("/longsync", {"settings": {
        "number_of_shards": 1, "number_of_replicas": 2,
        "index.unassigned.node_left.delayed_timeout": "0"}})
    assert r.status_code == 200, r.text
    wait_green(cluster3)
    cluster3.bulk(0, "longsync", numbered(range(2000)), refresh="false")
    (primary_name,) = [row["node"] for row in shard_rows(cluster3, "longsync") if row["prirep"] == "p"]
    victim = cluster3.index_of(primary_name)
    cluster3.kill(victim)
    survivor = next(i for i in range(3) if i != victim)
    cluster3.wait_for_nodes(2, i=survivor, timeout=30)
    ansi = re.compile(r"\x1b\[[0-9;]*m")

    def resyncs() -> list[str]:
        logs = "".join((n.workdir / "node.log").read_text(errors="replace") for n in cluster3.nodes)
        return [line for line in ansi.sub("", logs).splitlines() if "primary resync done" in line and "longsync" in line]

    wait_for(resyncs, 30, what="the promoted replica's resync")
    assert any("ops=2000" in line and "copies=1" in line and "failed=0" in line for line in resyncs()), resyncs()
    cluster3.wait_for_status("yellow", timeout=60, i=survivor)
    assert_copies_identical(cluster3, "longsync", survivor)
    r = cluster3.http(survivor).post("/longsync/_count", params={"preference": "_replica"})
    assert r.json()["count"] == 2000, r.text
