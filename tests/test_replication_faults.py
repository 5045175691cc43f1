"""Acknowledged writes survive node crashes. Two clients bulk-index with
`index.translog.durability: request` while nodes are killed with -9 (a primary's node at a
random moment, 10 rounds; a replica's node; both copies one after the other; the whole
cluster at once) or a node is added; afterwards each acknowledged document is on every copy
with its last acknowledged value (`history.History`), and the copies of each shard are
identical. Optimistic concurrency (`if_seq_no`/`if_primary_term`) keeps refusing stale
writes across a failover, so a retried conditional update is applied once.

The primary kill runs twice: with `delayed_timeout: 0` the victim's copies are rebuilt on
another node at once; with `1m` the copies the cluster manager saw leave wait for their node
and come back by operation-based recovery.

Primary-kill rounds: $SHOAL_KILL_ROUNDS (default 10, and 6 with delayed allocation); seed:
$SHOAL_KILL_SEED. Figures
(acknowledged, lost, time from the kill to the first fully successful bulk) are printed and
appended to $SHOAL_CLUSTER_TIMINGS when set.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import threading
import time

import pytest
import requests

from cluster import ShoalCluster
from history import History
from test_remote_store import fs_repository, remote_settings

pytestmark = pytest.mark.cluster

INDEX = "acked"
IDS_PER_WRITER = 400


def record(name: str, value) -> None:
    print(f"\n[figure] {name}: {value}")
    path = os.environ.get("SHOAL_CLUSTER_TIMINGS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"name": name, "value": value}) + "\n")


class Writer(threading.Thread):
    """Bulk-indexes its own ids (writer k owns ids k, k+2, …) with ever-growing values (they
    continue from `start`, the previous round's last), so a document's value can only grow;
    records what was acknowledged and what may or may not have been applied."""

    def __init__(self, c: ShoalCluster, k: int, history: History, rng: random.Random, start: int):
        super().__init__(daemon=True)
        self.c, self.k, self.history, self.rng = c, k, history, rng
        self.value = start
        self.stop = threading.Event()
        self.successes: list[float] = []

    def run(self) -> None:
        while not self.stop.is_set():
            ids = [str(self.k + 2 * self.rng.randrange(IDS_PER_WRITER)) for _ in range(20)]
            sent = []
            lines = []
            for doc_id in ids:
                self.value += 1
                sent.append((doc_id, self.value))
                lines.append(json.dumps({"index": {"_index": INDEX, "_id": doc_id}}))
                lines.append(json.dumps({"value": self.value, "writer": self.k}))
            live = self.c.live()
            if not live:  # the whole cluster is down: nothing to send to
                self.history.record_failure(sent, "not sent: no node is up")
                time.sleep(0.05)
                continue
            node = live[self.rng.randrange(len(live))]
            try:
                r = requests.post(self.c.nodes[node].url + "/_bulk", data="\n".join(lines) + "\n",
                                  headers={"Content-Type": "application/x-ndjson"}, timeout=30)
            except requests.RequestException:
                self.history.record_failure(sent)
                continue
            if r.status_code != 200:
                try:
                    error_type = r.json()["error"]["type"]
                except (ValueError, KeyError, TypeError):
                    error_type = f"status {r.status_code}"
                self.history.record_failure(sent, error_type)
                continue
            body = r.json()
            self.history.record_bulk(sent, body)
            # A bulk whose every item succeeded: every shard, the failed-over one too, writes.
            if all(item["index"].get("status") in (200, 201) for item in body["items"]):
                self.successes.append(time.monotonic())


def primary_nodes(c: ShoalCluster, i: int) -> set[str]:
    rows = c.get(f"/_cat/shards/{INDEX}", i, format="json", h="prirep,state,node").json()
    return {r["node"] for r in rows if r["prirep"] == "p" and r["state"] == "STARTED"}


def copy_nodes(c: ShoalCluster, i: int, prirep: str) -> list[int]:
    rows = c.get(f"/_cat/shards/{INDEX}", i, format="json", h="prirep,state,node").json()
    return sorted({c.index_of(r["node"]) for r in rows if r["prirep"] == prirep and r["state"] == "STARTED"})


def started_copies(c: ShoalCluster, i: int) -> list[tuple[int, str]]:
    rows = c.get(f"/_cat/shards/{INDEX}", i, format="json", h="shard,state,node").json()
    return [(int(r["shard"]), r["node"]) for r in rows if r["state"] == "STARTED"]


def create_index(c: ShoalCluster, shards: int, i: int = 0, delayed_timeout: str = "0",
                 segment: bool = False) -> None:
    settings = {"number_of_shards": shards, "number_of_replicas": 1,
                "index.translog.durability": "request",
                "index.unassigned.node_left.delayed_timeout": delayed_timeout}
    if segment:
        settings["index.replication.type"] = "SEGMENT"
    mappings = {"properties": {"value": {"type": "long"}, "writer": {"type": "integer"}}}
    r = c.http(i).put(f"/{INDEX}", {"settings": settings, "mappings": mappings})
    assert r.status_code == 200, r.text
    c.wait_for_status("green", i=i)


class Load:
    """Two writers running for the duration of a `with` block; their values continue from one
    block to the next, so one History checks a whole test."""

    def __init__(self, c: ShoalCluster, history: History, rng: random.Random):
        self.c, self.history, self.rng = c, history, rng
        self.last_values = [0, 0]
        self.writers: list[Writer] = []

    def __enter__(self) -> "Load":
        self.writers = [Writer(self.c, k, self.history, random.Random(self.rng.random()), self.last_values[k])
                        for k in range(2)]
        for w in self.writers:
            w.start()
        return self

    def __exit__(self, *exc) -> None:
        for w in self.writers:
            w.stop.set()
        for w in self.writers:
            w.join(60)
            assert not w.is_alive(), "a writer did not stop"
            self.last_values[w.k] = w.value

    def successes_after(self, t: float) -> list[float]:
        return [s for w in self.writers for s in w.successes if s > t]


# Errors that mean a coordinator handed a node's departure to the client instead of
# rerouting the write to the promoted primary (issue 17).
TRANSPORT_ERRORS = {"connect_transport_exception", "node_not_connected_exception", "node_closed_exception"}


def verify(c: ShoalCluster, history: History, i: int) -> dict:
    leaked = {t: n for t, n in history.error_types.items() if t in TRANSPORT_ERRORS}
    assert not leaked, f"bulk items failed with transport errors instead of being rerouted: {leaked}"
    c.wait_for_agreement("green")
    return history.verify(c.nodes[i].url, INDEX, started_copies(c, i))


@pytest.mark.parametrize("delayed_timeout,default_rounds,storage", [
    ("0", 10, "document"),  # the victim's copies are rebuilt elsewhere at once (file-based recoveries)
    ("1m", 6, "document"),  # copies the cluster manager saw leave wait for their node: operation-based
    # SEGMENT replication: only the primary indexes, and a promoted replica indexes what it
    # only logged on top of the segments it copied.
    ("0", 10, "segment"),
    # A remote-backed (so SEGMENT-replicated) index: an acknowledged write is in the translog
    # repository too, and a new replica hydrates from the segment repository.
    ("0", 10, "remote"),
], ids=["reallocate-at-once", "wait-for-the-node", "segment", "remote-store-segment"])
def test_killing_primaries_under_load_loses_no_acknowledged_write(tmp_path, delayed_timeout, default_rounds, storage):
    rounds = int(os.environ.get("SHOAL_KILL_ROUNDS", str(default_rounds)))
    seed = int(os.environ.get("SHOAL_KILL_SEED", str(random.randrange(1 << 30))))
    print(f"\nseed {seed}, {rounds} rounds, delayed_timeout {delayed_timeout}, {storage}")
    rng = random.Random(seed)
    history = History()
    recoveries: list[float] = []
    remote = storage == "remote"
    settings = remote_settings(fs_repository(tmp_path)) if remote else None
    with ShoalCluster(tmp_path, 3, settings=settings) as c:
        create_index(c, 3, delayed_timeout=delayed_timeout, segment=storage == "segment")
        load = Load(c, history, rng)
        for round_no in range(rounds):
            with load:
                time.sleep(rng.uniform(0.5, 2.0))
                observer = c.index_of(c.cluster_manager())
                victim = rng.choice([c.index_of(n) for n in primary_nodes(c, observer)])
                killed_at = time.monotonic()
                c.kill(victim)
                time.sleep(3.0)
            after = load.successes_after(killed_at)
            if after:
                recoveries.append(min(after) - killed_at)
            c.nodes[victim].start()
            survivor = next(i for i in range(3) if i != victim)
            c.wait_for_nodes(3, i=survivor, timeout=60)
            summary = verify(c, history, survivor)
            print(f"round {round_no + 1}: killed node-{victim}; {summary}")
        print(f"bulk item errors by type: {dict(history.error_types)}")
        what = {"document": "", "segment": " (SEGMENT index)", "remote": " (remote-backed SEGMENT index)"}[storage]
        record(f"acknowledged writes lost over all kill rounds{what}", 0)
        record(f"documents acknowledged{what}", len(history.acks))
        record(f"unanswered writes applied after a later acknowledged one{what}", summary["applied_late"])
        if recoveries:
            record(f"median seconds from primary kill to a fully successful bulk{what}",
                   round(statistics.median(recoveries), 3))


def test_killing_a_replica_under_load_loses_nothing_and_it_catches_up(tmp_path):
    history = History()
    with ShoalCluster(tmp_path, 3) as c:
        create_index(c, 1)
        load = Load(c, history, random.Random(7))
        for _ in range(2):
            with load:
                time.sleep(1.0)
                victim = copy_nodes(c, 0, "r")[0]
                c.kill(victim)
                time.sleep(2.0)
            c.nodes[victim].start()
            survivor = copy_nodes(c, next(i for i in range(3) if i != victim), "p")[0]
            c.wait_for_nodes(3, i=survivor, timeout=60)
            print(verify(c, history, survivor))


def test_killing_both_copies_one_after_the_other_loses_nothing_once_they_return(tmp_path):
    history = History()
    with ShoalCluster(tmp_path, 3) as c:
        create_index(c, 1)
        with Load(c, history, random.Random(11)):
            time.sleep(1.0)
            first = copy_nodes(c, 0, "p")[0]
            observer = next(i for i in range(3) if i != first)
            c.kill(first)
            # The replica is promoted; then its node dies too, before or while a new
            # replica recovers from it.
            c.wait(lambda h: copy_nodes(c, observer, "p") not in ([], [first]), 30, observer, "a promoted primary")
            second = copy_nodes(c, observer, "p")[0]
            time.sleep(0.5)
            c.kill(second)
            time.sleep(2.0)
        c.nodes[first].start()
        c.nodes[second].start()
        c.wait_for_nodes(3, i=first, timeout=60)
        print(verify(c, history, first))


def test_a_full_cluster_restart_keeps_every_acknowledged_write(tmp_path):
    history = History()
    with ShoalCluster(tmp_path, 3) as c:
        create_index(c, 3)
        with Load(c, history, random.Random(13)):
            time.sleep(1.5)
            for i in range(3):
                c.kill(i)
        assert history.acks, "the writers got acknowledgements before the crash"
        for node in c.nodes:
            node.start()
        c.wait_for_nodes(3, timeout=60)
        print(verify(c, history, 0))


def test_a_node_added_under_load_recovers_identical_copies(tmp_path):
    history = History()
    # The first two nodes form the cluster on their own; the third joins later.
    c = ShoalCluster(tmp_path, 3, settings={"cluster.initial_cluster_manager_nodes": "node-0,node-1"})
    try:
        for i in range(2):
            c.nodes[i].start()
        c.wait_for_nodes(2)
        create_index(c, 3)
        with Load(c, history, random.Random(17)):
            time.sleep(1.0)
            c.nodes[2].start()
            c.wait_for_nodes(3, timeout=60)
            c.wait(lambda h: h["relocating_shards"] == 0 and h["initializing_shards"] == 0
                   and any(node == "node-2" for _, node in started_copies(c, 0)), 60, 0,
                   "copies on the new node")
            time.sleep(1.0)
        summary = verify(c, history, 0)
        assert any(node == "node-2" for _, node in started_copies(c, 0))
        print(summary)
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.close()


def test_conditional_writes_stay_conditional_across_a_failover(tmp_path):
    with ShoalCluster(tmp_path, 3) as c:
        create_index(c, 1)
        primary = copy_nodes(c, 0, "p")[0]
        observer = next(i for i in range(3) if i != primary)
        http = c.http(observer)
        first = http.put(f"/{INDEX}/_doc/1", {"value": 1}, params={"refresh": "true"}).json()
        second = http.put(f"/{INDEX}/_doc/1", {"value": 2}, params={
            "if_seq_no": first["_seq_no"], "if_primary_term": first["_primary_term"]}).json()
        assert second["result"] == "updated", second
        c.kill(primary)
        c.wait(lambda h: copy_nodes(c, observer, "p") not in ([], [primary]), 30, observer, "a promoted primary")

        stale = http.put(f"/{INDEX}/_doc/1", {"value": 3}, params={
            "if_seq_no": first["_seq_no"], "if_primary_term": first["_primary_term"]})
        assert stale.status_code == 409, stale.text
        assert stale.json()["error"]["type"] == "version_conflict_engine_exception"
        current = {"if_seq_no": second["_seq_no"], "if_primary_term": second["_primary_term"]}
        applied = http.put(f"/{INDEX}/_doc/1", {"value": 4}, params=current)
        assert applied.status_code == 200, applied.text
        assert applied.json()["_primary_term"] > second["_primary_term"], "written by the promoted primary"
        # A client that lost the answer retries the same conditional write: refused, not applied twice.
        retried = http.put(f"/{INDEX}/_doc/1", {"value": 4}, params=current)
        assert retried.status_code == 409, retried.text
        doc = http.get(f"/{INDEX}/_doc/1").json()
        assert (doc["_source"]["value"], doc["_version"]) == (4, 3), doc
