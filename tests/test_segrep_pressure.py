"""Segment replication backpressure on real processes: a replica frozen with SIGSTOP stops
copying checkpoints, its primary answers new writes 429 `rejected_execution_exception` once the
replica is stale (`segrep.pressure.*`), and takes writes again when the replica is thawed and
catches up, or when the transport gives up on it (HTTP/2 pings, ~10 s) and the copy is failed.
No acknowledged write is lost.

Shoal's transport fails a frozen peer's new connections after 1 s, so the copy is failed about
1-2 s into the freeze: the limits here are small enough to be reached before that. The writers
are impatient (0.25 s client timeout, then the next document): a write waiting on the frozen
replica holds its client, and only writes that keep arriving make new checkpoints the replica
falls behind on. A timed-out write is neither acknowledged nor refused (status 0).
"""

from __future__ import annotations

import threading
import time

import pytest
import requests

from cluster import ShoalCluster
from util import wait_for

pytestmark = pytest.mark.cluster

INDEX = "pressed"
PRESSURE = {"segrep.pressure.enabled": True, "segrep.pressure.checkpoint.limit": 1,
            "segrep.pressure.time.limit": "100ms"}


class Writers:
    """Threads writing one document per request to the primary's node, remembering every
    answer: (monotonic time, status, id)."""

    def __init__(self, url: str, threads: int = 4, timeout: float = 0.25):
        self.url = url
        self.timeout = timeout
        self.answers: list[tuple[float, int, str]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(t,), daemon=True) for t in range(threads)]

    def __enter__(self) -> "Writers":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in self.threads), "a writer never got an answer"

    def run(self, thread: int) -> None:
        session = requests.Session()
        n = 0
        while not self.stopping.is_set():
            n += 1
            doc_id = f"w{thread}-{n}"
            try:
                r = session.put(f"{self.url}/{INDEX}/_doc/{doc_id}", json={"n": n}, timeout=self.timeout)
                status = r.status_code
                body = r.json()
            except requests.RequestException:
                status, body = 0, None
            with self.lock:
                self.answers.append((time.monotonic(), status, doc_id, body))
            if status == 429:
                time.sleep(0.05)

    def first(self, status: int, after: float) -> tuple | None:
        with self.lock:
            return next((a for a in self.answers if a[1] == status and a[0] > after), None)

    def acknowledged(self) -> set[str]:
        with self.lock:
            return {a[2] for a in self.answers if a[1] in (200, 201)}

    def statuses(self) -> set[int]:
        with self.lock:
            return {a[1] for a in self.answers}


def copy_nodes(c: ShoalCluster) -> tuple[int, int]:
    """Where the copies are, as the cluster manager sees it: a thawed node the manager removed
    from the cluster still answers from its old state until it rejoins."""
    manager = c.index_of(c.cluster_manager(0))
    rows = c.get(f"/_cat/shards/{INDEX}", manager, format="json", h="prirep,state,node").json()
    primary = next(r["node"] for r in rows if r["prirep"] == "p")
    replica = next(r["node"] for r in rows if r["prirep"] == "r")
    return c.index_of(primary), c.index_of(replica)


def create_pressed_index(c: ShoalCluster) -> tuple[int, int]:
    """One SEGMENT shard with one replica, neither on the cluster manager (freezing the replica
    must not also freeze the cluster manager)."""
    manager = c.cluster_manager(0)
    r = c.http(0).put(f"/{INDEX}", {"settings": {
        "number_of_shards": 1, "number_of_replicas": 1, "index.replication.type": "SEGMENT",
        "index.refresh_interval": "100ms", "index.routing.allocation.exclude._name": manager}})
    assert r.status_code == 200, r.text
    c.wait_for_status("green")
    r = c.http(0).put("/_cluster/settings", {"persistent": PRESSURE})
    assert r.status_code == 200, r.text
    return copy_nodes(c)


def ids_on(c: ShoalCluster, node: int) -> set[str]:
    node_id = next(k for k, n in c.get("/_nodes").json()["nodes"].items() if n["name"] == c.nodes[node].name)
    return {hit["_id"] for hit in c.every_hit(INDEX, source=False, params={"preference": f"_only_nodes:{node_id}"},
                                                only_held=True)}


def assert_nothing_acknowledged_lost(c: ShoalCluster, writers: Writers) -> None:
    c.wait_for_status("green", timeout=120, i=c.index_of(c.cluster_manager(0)))
    assert c.http(0).post(f"/{INDEX}/_refresh").status_code == 200
    primary, replica = copy_nodes(c)
    on_primary, on_replica = ids_on(c, primary), ids_on(c, replica)
    acked = writers.acknowledged()
    assert acked, "some writes were acknowledged"
    assert not acked - on_primary, f"lost on the primary: {sorted(acked - on_primary)[:5]}"
    assert on_primary == on_replica, f"copies differ by {len(on_primary ^ on_replica)} ids"


def freeze_until_refused(c: ShoalCluster, writers: Writers, replica: int) -> tuple[float, tuple]:
    """SIGSTOPs the replica once writes flow; returns when it froze and the first write refused
    after, checked to be OpenSearch's segrep rejection."""
    wait_for(lambda: len(writers.acknowledged()) >= 20, timeout=30, what="writes before the freeze")
    frozen_at = time.monotonic()
    c.stop(replica)
    refused = wait_for(lambda: writers.first(429, frozen_at), timeout=30,
                       what="a write refused while the replica is frozen")
    print(f"segrep pressure: first 429 {refused[0] - frozen_at:.2f}s after SIGSTOP")
    assert refused[3]["error"]["type"] == "rejected_execution_exception", refused
    assert refused[3]["error"]["reason"].startswith(
        f"rejected execution on primary shard:[{INDEX}][0] Stale Replicas: ["), refused
    return frozen_at, refused


def test_a_frozen_replica_makes_writes_answer_429_until_it_is_thawed(tmp_path):
    with ShoalCluster(tmp_path, 3) as c:
        primary, replica = create_pressed_index(c)
        with Writers(c.nodes[primary].url) as writers:
            freeze_until_refused(c, writers, replica)
            thawed_at = time.monotonic()
            c.cont(replica)
            resumed = wait_for(lambda: writers.first(201, thawed_at), timeout=30,
                               what="a write acknowledged after the thaw")
            print(f"segrep pressure: writes resumed {resumed[0] - thawed_at:.2f}s after SIGCONT")
            # Resumed because the replica caught up, not because it was failed.
            assert resumed[3]["_shards"] == {"total": 2, "successful": 2, "failed": 0}, resumed
            time.sleep(1.0)
        assert writers.statuses() <= {0, 200, 201, 429}, writers.statuses()
        rows = c.get("/_cat/segment_replication", format="json").json()
        assert any(row["rejected_requests"] != "0" for row in rows), rows
        assert_nothing_acknowledged_lost(c, writers)


def test_a_replica_frozen_until_the_transport_fails_it_is_failed_and_writes_resume(tmp_path):
    with ShoalCluster(tmp_path, 3) as c:
        primary, replica = create_pressed_index(c)
        with Writers(c.nodes[primary].url) as writers:
            frozen_at, refused = freeze_until_refused(c, writers, replica)
            resumed = wait_for(lambda: writers.first(201, refused[0]), timeout=60,
                               what="a write acknowledged with the replica still frozen")
            print(f"segrep pressure: replica failed, writes resumed {resumed[0] - frozen_at:.2f}s after SIGSTOP")
            assert resumed[3]["_shards"]["successful"] == 1, resumed
            shards = c.get(f"/_cat/shards/{INDEX}", primary, format="json", h="prirep,state,node").json()
            assert not any(s["node"] == c.nodes[replica].name and s["state"] == "STARTED" for s in shards), shards
            c.cont(replica)
            time.sleep(1.0)
        assert writers.statuses() <= {0, 200, 201, 429}, writers.statuses()
        assert_nothing_acknowledged_lost(c, writers)
