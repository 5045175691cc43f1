"""Multi-node clusters of real `shoal` processes: formation, placement, cluster-manager
failover, fault detection of a hung node, and writes without a cluster manager.

Timings measured here are printed (pytest -s) and appended to $SHOAL_CLUSTER_TIMINGS if set.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from cluster import ShoalCluster, numbered

pytestmark = pytest.mark.cluster


def record(name: str, seconds: float) -> None:
    print(f"\n[timing] {name}: {seconds:.3f}s")
    path = os.environ.get("SHOAL_CLUSTER_TIMINGS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"name": name, "seconds": seconds}) + "\n")


@pytest.fixture
def cluster3(tmp_path):
    started = time.monotonic()
    with ShoalCluster(tmp_path, 3, attrs=[{"zone": "a"}, {"zone": "b"}, {"zone": "c"}]) as c:
        record("3-node cluster: process start to 3 nodes joined", time.monotonic() - started)
        yield c


def cat_shards(c: ShoalCluster, index: str, i: int | None = None) -> list[dict]:
    return c.get(f"/_cat/shards/{index}", i, format="json").json()


def test_three_nodes_form_one_cluster_with_one_cluster_manager(cluster3):
    managers = {cluster3.cluster_manager(i) for i in range(3)}
    assert len(managers) == 1 and None not in managers, managers
    for i in range(3):
        rows = cluster3.get("/_cat/nodes", i, format="json", h="name,node.role,cluster_manager").json()
        assert sorted(r["name"] for r in rows) == ["node-0", "node-1", "node-2"]
        assert [r["cluster_manager"] for r in rows].count("*") == 1
        assert all(r["node.role"] == "dimr" for r in rows)
    uuids = {cluster3.get("/", i).json()["cluster_uuid"] for i in range(3)}
    assert len(uuids) == 1 and "" not in uuids


def test_index_created_on_any_node_spreads_primaries_and_takes_writes_from_any_node(cluster3):
    r = cluster3.http(1).put("/spread", {"settings": {"number_of_shards": 6, "number_of_replicas": 0}})
    assert r.status_code == 200, r.text
    cluster3.wait_for_status("green")
    rows = cat_shards(cluster3, "spread")
    per_node = {}
    for row in rows:
        assert row["state"] == "STARTED"
        per_node[row["node"]] = per_node.get(row["node"], 0) + 1
    assert sorted(per_node.values()) == [2, 2, 2], rows
    result = cluster3.bulk(0, "spread", numbered(range(300)))
    assert {item["index"]["status"] for item in result["items"]} == {201}
    # Every primary received its share, whichever node coordinated the bulk.
    for i in range(3):
        docs = sum(int(row["docs"]) for row in cat_shards(cluster3, "spread", i))
        assert docs == 300


def test_kill_the_cluster_manager_elects_a_new_one_quickly(cluster3):
    old = cluster3.cluster_manager()
    victim = cluster3.index_of(old)
    survivors = [i for i in range(3) if i != victim]
    started = time.monotonic()
    cluster3.kill(victim)
    deadline = started + 30
    new = None
    while time.monotonic() < deadline:
        try:
            new = cluster3.cluster_manager(survivors[0])
        except Exception:
            new = None
        if new and new != old:
            break
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    record("new cluster manager after kill -9 of the old one", elapsed)
    assert new and new != old, f"no new cluster manager within 30s\n{cluster3.dump_logs()}"
    assert elapsed < 3.0
    for i in survivors:
        health = cluster3.wait_for_nodes(2, i=i, timeout=15)
        assert health["discovered_cluster_manager"] is True
    # The survivors still accept metadata changes.
    assert cluster3.http(survivors[1]).put("/after-failover", {"settings": {"number_of_replicas": 0}}).status_code == 200


def test_a_sigstopped_node_is_removed_and_rejoins_after_sigcont(cluster3):
    manager = cluster3.index_of(cluster3.cluster_manager())
    victim = next(i for i in range(3) if i != manager)
    started = time.monotonic()
    cluster3.stop(victim)
    cluster3.wait_for_nodes(2, i=manager, timeout=30)
    elapsed = time.monotonic() - started
    record("SIGSTOPped node removed from the cluster", elapsed)
    assert elapsed < 3.0
    cluster3.cont(victim)
    cluster3.wait_for_nodes(3, i=manager, timeout=30)
    cluster3.wait_for_nodes(3, i=victim, timeout=30)


def test_a_thawed_node_reads_the_cluster_managers_state_not_the_one_it_froze_with(cluster3):
    """A node frozen until it was removed wakes up with the state it had (3 nodes, its copies
    active). Reads through it without `local=true` (`_cluster/state`, `_cluster/health`,
    `_cat/*`) answer from a state at least as new as the cluster manager's when they were asked,
    as OpenSearch answers them on the cluster manager; `local=true` answers from its own view."""
    manager = cluster3.index_of(cluster3.cluster_manager())
    victim = next(i for i in range(3) if i != manager)
    version = lambda i, **params: cluster3.get("/_cluster/state/version", i, **params).json()["version"]
    frozen_at = version(victim)
    cluster3.stop(victim)
    cluster3.wait_for_nodes(2, i=manager, timeout=30)
    removed_at = version(manager)
    assert removed_at > frozen_at
    cluster3.cont(victim)
    # Its own view answers at once (the node has not rejoined yet, or has only just).
    assert version(victim, local="true") >= frozen_at
    assert version(victim) >= removed_at
    health = cluster3.health(victim)
    assert health["number_of_nodes"] == 3, health
    assert {row["name"] for row in cluster3.get("/_cat/nodes", victim, format="json").json()} == \
        {n.name for n in cluster3.nodes}


def test_without_a_cluster_manager_writes_continue_and_metadata_changes_get_503(cluster3):
    manager = cluster3.index_of(cluster3.cluster_manager())
    keep = next(i for i in range(3) if i != manager)
    # The mapping exists up front: new fields would need the cluster manager (a metadata write).
    r = cluster3.http(keep).put("/nocm", {"settings": {"number_of_shards": 3, "number_of_replicas": 0},
                                          "mappings": {"properties": {"n": {"type": "long"}}}})
    assert r.status_code == 200, r.text
    cluster3.wait_for_status("green")
    local_shard_ids = [int(row["shard"]) for row in cat_shards(cluster3, "nocm", keep)
                       if row["node"] == cluster3.nodes[keep].name]
    assert local_shard_ids, "the kept node holds a primary"
    for i in range(3):
        if i != keep:
            cluster3.kill(i)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and cluster3.health(keep, local="true")["discovered_cluster_manager"]:
        time.sleep(0.1)
    assert cluster3.health(keep, local="true")["discovered_cluster_manager"] is False
    # Without `local`, health is the cluster manager's answer, as in OpenSearch: none to give it.
    for path in ("/_cluster/health", "/_cat/cluster_manager", "/_cat/nodeattrs", "/_cat/allocation"):
        r = cluster3.get(path, keep, cluster_manager_timeout="1s")
        assert r.status_code == 503, (path, r.text)
        assert r.json()["error"]["type"] == "cluster_manager_not_discovered_exception", (path, r.text)
    # Monitoring that keeps asking holds no thread while its reads wait for a manager: the
    # management pool (5 threads) still answers local reads at once.
    waiting: list[int] = []
    readers = [threading.Thread(target=lambda: waiting.append(
        cluster3.http(keep).get("/_cat/nodes", params={"cluster_manager_timeout": "6s"}, timeout=30).status_code))
        for _ in range(8)]
    for t in readers:
        t.start()
    time.sleep(1)
    for path in ("/_cat/cluster_manager?local=true", "/_cluster/health?local=true", "/_nodes/_local/stats/thread_pool"):
        started = time.monotonic()
        r = cluster3.http(keep).get(path, timeout=10)
        assert r.status_code == 200 and time.monotonic() - started < 2, (path, r.text)
    for t in readers:
        t.join(30)
    assert waiting == [503] * 8, waiting
    # Its own view names no cluster manager, as OpenSearch's no-manager state: a row of "-".
    r = cluster3.get("/_cat/cluster_manager", keep, local="true", format="json")
    assert r.status_code == 200, r.text
    assert r.json() == [{"id": "-", "host": "-", "ip": "-", "node": "-"}], r.text
    assert cluster3.cluster_manager(keep, wait_s=0) is None
    # The same view everywhere: no node marked as manager, none named in the state.
    nodes = cluster3.get("/_cat/nodes", keep, local="true", format="json", h="name,cluster_manager").json()
    assert nodes and all(row["cluster_manager"] != "*" for row in nodes), nodes
    state = cluster3.get("/_cluster/state/cluster_manager_node", keep, local="true").json()
    assert state.get("cluster_manager_node") is None, state
    # Metadata changes are blocked with OpenSearch's error.
    r = cluster3.http(keep).put("/newindex", {})
    assert r.status_code == 503, r.text
    assert r.json()["error"]["type"] == "cluster_block_exception"
    assert "no cluster-manager" in r.json()["error"]["reason"]
    # Document writes to a primary on this node keep working (metadata_write). A write whose
    # primary was on a killed node waits for a promotion up to its `timeout` (no cluster
    # manager will make one here): a short one keeps the loop short.
    written = 0
    for n in range(200):
        r = cluster3.http(keep).put(f"/nocm/_doc/{n}", {"n": n}, params={"timeout": "200ms"})
        if r.status_code in (200, 201):
            written += 1
    assert written > 0
    # Searches on the existing index keep working too (the dead nodes' shards are reported
    # as failures, the live ones answer).
    cluster3.http(keep).post("/nocm/_refresh")
    r = cluster3.http(keep).post("/nocm/_search", {"query": {"match_all": {}}, "track_total_hits": True})
    assert r.status_code == 200, r.text
    assert r.json()["hits"]["total"]["value"] >= written


def test_a_restarted_node_rejoins_with_its_data(cluster3):
    assert cluster3.http(0).put("/keep", {"settings": {"number_of_shards": 3, "number_of_replicas": 0}}).status_code == 200
    cluster3.wait_for_status("green")
    cluster3.bulk(0, "keep", numbered(range(90)))
    manager = cluster3.index_of(cluster3.cluster_manager())
    victim = next(i for i in range(3) if i != manager)
    before = {row["shard"]: row["docs"] for row in cat_shards(cluster3, "keep", victim)
              if row["node"] == cluster3.nodes[victim].name}
    cluster3.restart(victim)
    cluster3.wait_for_nodes(3, i=manager, timeout=30)
    cluster3.wait_for_status("green", timeout=30)
    after = {row["shard"]: row["docs"] for row in cat_shards(cluster3, "keep", victim)
             if row["node"] == cluster3.nodes[victim].name}
    assert after == before and before


def test_awareness_puts_the_copies_of_a_shard_in_different_zones(cluster3):
    r = cluster3.http(0).put("/_cluster/settings",
                             {"persistent": {"cluster.routing.allocation.awareness.attributes": "zone"}})
    assert r.status_code == 200, r.text
    r = cluster3.http(0).put("/aware", {"settings": {"number_of_shards": 6, "number_of_replicas": 2}})
    assert r.status_code == 200, r.text
    zone_of = {f"node-{i}": "abc"[i] for i in range(3)}
    deadline = time.monotonic() + 30
    while True:
        rows = cat_shards(cluster3, "aware")
        assigned = [row for row in rows if row["node"]]
        if len(assigned) == 18 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(assigned) == 18, rows
    # Replicas recover from their primaries; green once every copy started.
    cluster3.wait_for_status("green")
    print("\n" + cluster3.get("/_cat/shards/aware", v="true").text)
    for shard in range(6):
        zones = [zone_of[row["node"]] for row in assigned if int(row["shard"]) == shard]
        assert sorted(zones) == ["a", "b", "c"], (shard, zones)
    primaries = [row["node"] for row in assigned if row["prirep"] == "p"]
    assert sorted(primaries.count(n) for n in zone_of) == [2, 2, 2]


def test_forced_awareness_leaves_the_copies_of_a_lost_zone_unassigned(tmp_path):
    """Zones a (node-0, node-1) and b (node-2). Without forced awareness, losing zone b would
    put both copies of every shard in zone a; with `force.zone.values: a,b` they wait."""
    with ShoalCluster(tmp_path, 3, attrs=[{"zone": "a"}, {"zone": "a"}, {"zone": "b"}]) as c:
        r = c.http(0).put("/_cluster/settings", {"persistent": {
            "cluster.routing.allocation.awareness.attributes": "zone",
            "cluster.routing.allocation.awareness.force.zone.values": "a,b"}})
        assert r.status_code == 200, r.text
        # No node-left delay, so only awareness keeps the lost copies unassigned.
        r = c.http(0).put("/forced", {"settings": {"number_of_shards": 4, "number_of_replicas": 1,
                                                   "index.unassigned.node_left.delayed_timeout": "0"}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green")
        assert all(row["node"] == "node-2" for row in cat_shards(c, "forced") if row["prirep"] in "pr"
                   and row["node"] not in ("node-0", "node-1")), "zone b holds one copy of every shard"
        zones = c.get("/_cluster/health", level="awareness_attributes").json()["awareness_attributes"]
        assert zones == {"zone": {
            "a": {"active_shards": 4, "initializing_shards": 0, "relocating_shards": 0,
                  "unassigned_shards": -1, "data_nodes": 2, "weight": 1.0},
            "b": {"active_shards": 4, "initializing_shards": 0, "relocating_shards": 0,
                  "unassigned_shards": -1, "data_nodes": 1, "weight": 1.0}}}, zones
        c.kill(2)
        survivor = 0
        c.wait_for_nodes(2, i=survivor, timeout=30)
        time.sleep(2)  # several allocation rounds
        rows = cat_shards(c, "forced", survivor)
        print("\n" + c.get("/_cat/shards/forced", survivor, v="true").text)
        assigned = [row for row in rows if row["node"]]
        unassigned = [row for row in rows if not row["node"]]
        # One started copy per shard (a replica promoted where the primary was in zone b);
        # the other copy has no zone to go to.
        assert len(assigned) == 4 and len(unassigned) == 4, rows
        assert sorted(int(row["shard"]) for row in assigned) == [0, 1, 2, 3]
        assert all(row["prirep"] == "p" and row["state"] == "STARTED" for row in assigned), rows
        reasons = [row["ur"] for row in c.get("/_cat/shards/forced", survivor, format="json", h="node,ur").json()
                   if not row["node"]]
        assert reasons == ["NODE_LEFT"] * 4, reasons
        zones = c.get("/_cluster/health", survivor, level="awareness_attributes",
                      awareness_attribute="zone").json()["awareness_attributes"]
        assert list(zones["zone"]) == ["a"] and zones["zone"]["a"]["active_shards"] == 4, zones


def test_health_levels_and_awareness_parameters_are_checked(cluster3):
    """An unknown level, an attribute without its level, or a weighed-in check of a non-local
    request is refused; the checks Shoal can answer are answered."""
    bad = {"level": "bogus"}, {"awareness_attribute": "zone"}, {"ensure_node_weighed_in": "true"}
    for params in bad:
        r = cluster3.get("/_cluster/health", **params)
        assert r.status_code == 400, (params, r.text)
    assert "level=awareness_attributes is required" in cluster3.get(
        "/_cluster/health", awareness_attribute="zone").json()["error"]["reason"]
    # Without weighted routing or decommissioning every node is weighed in.
    r = cluster3.get("/_cluster/health", ensure_node_weighed_in="true", local="true")
    assert r.status_code == 200 and r.json()["status"] == "green", r.text
    # No awareness attribute configured: nothing to break down.
    r = cluster3.get("/_cluster/health", level="awareness_attributes")
    assert r.json()["awareness_attributes"] == {}, r.text
    r = cluster3.get("/_cluster/health", level="awareness_attributes", awareness_attribute="zone")
    zones = r.json()["awareness_attributes"]["zone"]
    assert sorted(zones) == ["a", "b", "c"] and all(z["data_nodes"] == 1 for z in zones.values()), r.text


def test_cluster_state_waits_for_a_metadata_version(cluster3):
    version = cluster3.get("/_cluster/state/version", 1).json()["version"]
    # The wait ends when a later change (an index created meanwhile) reaches node-1.
    creator = threading.Timer(0.5, lambda: cluster3.http(0).put("/later", {}))
    creator.start()
    r = cluster3.get("/_cluster/state/version", 1, wait_for_metadata_version=str(version + 1),
                     wait_for_timeout="8s")
    creator.join()
    body = r.json()
    assert body["wait_for_timed_out"] is False and body["version"] > version, r.text
    # A version not reached within the timeout answers that it timed out, without a state.
    r = cluster3.get("/_cluster/state/version", wait_for_metadata_version=str(version + 10_000),
                     wait_for_timeout="300ms")
    assert r.status_code == 200 and r.json() == {"wait_for_timed_out": True, "cluster_name": r.json()["cluster_name"]}


def test_five_nodes_form_one_cluster_and_survive_losing_the_cluster_manager(tmp_path):
    started = time.monotonic()
    with ShoalCluster(tmp_path, 5) as c:
        record("5-node cluster: process start to 5 nodes joined", time.monotonic() - started)
        managers = {c.cluster_manager(i) for i in range(5)}
        assert len(managers) == 1 and None not in managers, managers
        old = managers.pop()
        victim = c.index_of(old)
        c.kill(victim)
        survivors = [i for i in range(5) if i != victim]
        for i in survivors:
            c.wait_for_nodes(4, i=i, timeout=30)
        new = {c.cluster_manager(i) for i in survivors}
        assert len(new) == 1 and old not in new and None not in new, new
        r = c.http(survivors[0]).put("/five", {"settings": {"number_of_shards": 5, "number_of_replicas": 1}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green", i=survivors[0])
