"""Operation-based peer recovery on real processes: a replica whose node comes back within
`index.unassigned.node_left.delayed_timeout` replays the operations it missed, kept for it by
the primary's retention lease even across a flush, instead of copying files; once the lease
has expired (`index.soft_deletes.retention_lease.period`), the copy recovers from files.
"""

from __future__ import annotations

import time

import pytest

from cluster import ShoalCluster, numbered
from test_replication import assert_copies_identical, shard_rows, wait_green
from util import wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster3(tmp_path):
    with ShoalCluster(tmp_path, 3) as c:
        yield c


def kill_the_replica_and_write_while_it_is_gone(c: ShoalCluster, index: str, settings: dict) -> tuple[int, int]:
    """Creates `index` (1 shard, 1 replica) away from the cluster manager, indexes 300 documents,
    kills the replica's node, then writes 200 more, deletes one and flushes the primary.
    Returns (manager, replica node) indexes."""
    manager = c.index_of(c.cluster_manager())
    r = c.http(manager).put(f"/{index}", {"settings": {
        "number_of_shards": 1, "number_of_replicas": 1,
        "index.routing.allocation.exclude._name": c.nodes[manager].name, **settings}})
    assert r.status_code == 200, r.text
    wait_green(c, manager)
    c.bulk(manager, index, numbered(range(300)))
    assert c.http(manager).post(f"/{index}/_flush").status_code == 200
    (replica_name,) = [row["node"] for row in shard_rows(c, index, manager) if row["prirep"] == "r"]
    replica = c.index_of(replica_name)
    c.kill(replica)
    c.wait_for_nodes(2, i=manager, timeout=30)
    c.bulk(manager, index, numbered(range(300, 500)))
    r = c.http(manager).delete(f"/{index}/_doc/7", params={"refresh": "true"})
    assert r.status_code == 200, r.text
    # A flush trims the primary's translog as far as the replica's lease allows.
    assert c.http(manager).post(f"/{index}/_flush", params={"force": "true"}).status_code == 200
    return manager, replica


def replica_recovery(c: ShoalCluster, index: str, manager: int, replica: int) -> dict:
    shards = c.get(f"/{index}/_recovery", manager).json()[index]["shards"]
    (record,) = [s for s in shards if s["type"] == "PEER" and s["target"]["name"] == c.nodes[replica].name]
    return record


def test_a_returning_replica_replays_what_it_missed_instead_of_copying_files(cluster3):
    manager, replica = kill_the_replica_and_write_while_it_is_gone(cluster3, "back", {})
    cluster3.nodes[replica].start()
    wait_green(cluster3, manager)
    record = replica_recovery(cluster3, "back", manager, replica)
    assert record["stage"] == "DONE", record
    assert record["index"]["files"]["recovered"] == 0, record
    assert record["index"]["size"]["recovered_in_bytes"] == 0, record
    # 200 documents and a delete, nothing the replica already had.
    assert record["translog"]["recovered"] == 201, record
    assert_copies_identical(cluster3, "back", manager)
    r = cluster3.http(manager).post("/back/_count", params={"preference": "_replica"})
    assert r.json()["count"] == 499, r.text
    # The copy keeps receiving writes.
    cluster3.bulk(manager, "back", numbered(range(500, 510)))
    assert_copies_identical(cluster3, "back", manager)


def test_an_expired_lease_sends_the_returning_replica_back_to_copying_files(cluster3):
    manager, replica = kill_the_replica_and_write_while_it_is_gone(
        cluster3, "expired", {"index.soft_deletes.retention_lease.period": "1s"})
    time.sleep(1.5)  # the departed node's lease expires; the next flush trims its history
    assert cluster3.http(manager).post("/expired/_flush", params={"force": "true"}).status_code == 200
    cluster3.nodes[replica].start()
    wait_green(cluster3, manager)
    record = replica_recovery(cluster3, "expired", manager, replica)
    assert record["stage"] == "DONE", record
    assert record["index"]["files"]["recovered"] > 0, record
    assert_copies_identical(cluster3, "expired", manager)
    r = cluster3.http(manager).post("/expired/_count", params={"preference": "_replica"})
    assert r.json()["count"] == 499, r.text


def test_a_promoted_replica_keeps_the_history_a_returning_copy_needs(tmp_path):
    """The primary sends its retention leases to its replicas, which retain the same history:
    when the primary dies while another copy's node is away, the promoted replica still holds
    the operations that copy missed, and it comes back by replaying them."""
    # A dedicated cluster manager, so that two data nodes can be down at once.
    with ShoalCluster(tmp_path, 4, roles=["cluster_manager", "data", "data", "data"]) as c:
        r = c.http(0).put("/kept", {"settings": {"number_of_shards": 1, "number_of_replicas": 2}})
        assert r.status_code == 200, r.text
        wait_green(c, 0)
        c.bulk(0, "kept", numbered(range(300)))
        assert c.http(0).post("/kept/_flush").status_code == 200
        rows = shard_rows(c, "kept", 0)
        (primary,) = [c.index_of(row["node"]) for row in rows if row["prirep"] == "p"]
        returning, survivor = sorted(c.index_of(row["node"]) for row in rows if row["prirep"] == "r")

        c.kill(returning)
        c.wait_for_nodes(3, i=0, timeout=30)
        c.bulk(0, "kept", numbered(range(300, 500)))
        # Every copy flushes: without the primary's leases the replica would trim its
        # translog to its global checkpoint here.
        assert c.http(0).post("/kept/_flush", params={"force": "true"}).status_code == 200

        c.kill(primary)
        c.wait_for_nodes(2, i=0, timeout=30)
        wait_for(lambda: any(row["prirep"] == "p" and row["state"] == "STARTED"
                             and row["node"] == c.nodes[survivor].name for row in shard_rows(c, "kept", 0)),
                 30, what="the replica to be promoted")
        c.nodes[returning].start()

        def returned() -> bool:
            return any(row["prirep"] == "r" and row["state"] == "STARTED" and row["node"] == c.nodes[returning].name
                       for row in shard_rows(c, "kept", 0))

        wait_for(returned, 60, what="the returning copy to recover")
        record = replica_recovery(c, "kept", 0, returning)
        assert record["stage"] == "DONE", record
        assert record["index"]["files"]["recovered"] == 0, record
        assert record["translog"]["recovered"] == 200, record
        assert_copies_identical(c, "kept", 0)
        r = c.http(0).post("/kept/_count", params={"preference": "_replica"})
        assert r.json()["count"] == 500, r.text


def ids_on_copy(c: ShoalCluster, index: str, node: str) -> set[str]:
    r = c.http(0).post(f"/{index}/_search", {"size": 10_000, "_source": False, "query": {"match_all": {}}},
                       params={"preference": f"_only_nodes:{node}"})
    assert r.status_code == 200, r.text
    return {hit["_id"] for hit in r.json()["hits"]["hits"]}


def test_a_copy_of_the_history_a_forced_stale_primary_abandoned_recovers_from_files(tmp_path):
    """allocate_stale_primary starts a new history: a copy that holds the old one (operations the
    forced primary never had, under the same seq_nos as the new primary's) must not come back by
    replaying operations above its checkpoint, which would keep its old documents beside the new
    ones; it copies the new primary's files and ends with exactly its documents."""
    with ShoalCluster(tmp_path, 3, roles=["cluster_manager", "data", "data"]) as c:
        r = c.http(0).put("/forced", {"settings": {"number_of_shards": 1, "number_of_replicas": 1}})
        assert r.status_code == 200, r.text
        wait_green(c, 0)
        c.bulk(0, "forced", numbered(range(100)))
        rows = shard_rows(c, "forced", 0)
        (old_primary,) = [c.index_of(row["node"]) for row in rows if row["prirep"] == "p"]
        (stale,) = [c.index_of(row["node"]) for row in rows if row["prirep"] == "r"]

        c.kill(stale)
        c.wait_for_nodes(2, i=0, timeout=30)
        c.bulk(0, "forced", numbered(range(100, 200)))  # seq_nos 100..199, only on the old primary
        assert c.http(0).post("/forced/_flush", params={"force": "true"}).status_code == 200
        c.kill(old_primary)
        c.wait_for_nodes(1, i=0, timeout=30)
        c.nodes[stale].start()
        c.wait_for_nodes(2, i=0, timeout=30)

        r = c.http(0).post("/_cluster/reroute", {"commands": [{"allocate_stale_primary": {
            "index": "forced", "shard": 0, "node": c.nodes[stale].name, "accept_data_loss": True}}]})
        assert r.status_code == 200, r.text
        wait_for(lambda: any(row["prirep"] == "p" and row["state"] == "STARTED" for row in shard_rows(c, "forced", 0)),
                 30, what="the stale primary to start")
        c.bulk(0, "forced", numbered(range(1000, 1150)))  # seq_nos 100..249 of the new history

        c.nodes[old_primary].start()
        wait_green(c, 0)
        record = replica_recovery(c, "forced", 0, old_primary)
        assert record["index"]["files"]["recovered"] > 0, record
        c.http(0).post("/forced/_refresh")
        expected = {str(i) for i in [*range(100), *range(1000, 1150)]}
        assert ids_on_copy(c, "forced", c.nodes[stale].name) == expected
        assert ids_on_copy(c, "forced", c.nodes[old_primary].name) == expected
