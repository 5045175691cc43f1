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
