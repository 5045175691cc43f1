"""Acknowledged writes survive the loss of a primary: two clients bulk-index with
`index.translog.durability: request` while the node holding a primary is killed with -9 at a
random moment, then restarted. After every round each acknowledged document is on every copy
with its last acknowledged value, and the copies of each shard are identical.

Rounds: $SHOAL_KILL_ROUNDS (default 10); seed: $SHOAL_KILL_SEED. Figures (acknowledged, lost,
time from the kill to the first successful write) are printed and appended to
$SHOAL_CLUSTER_TIMINGS when set.
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
    """Bulk-indexes its own ids (writer k owns ids k, k+2, …) with ever-growing values, so a
    document's value can only grow; records what was acknowledged."""

    def __init__(self, c: ShoalCluster, k: int, history: History, rng: random.Random):
        super().__init__(daemon=True)
        self.c, self.k, self.history, self.rng = c, k, history, rng
        self.value = 0
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
            node = live[self.rng.randrange(len(live))]
            try:
                r = requests.post(self.c.nodes[node].url + "/_bulk", data="\n".join(lines) + "\n",
                                  headers={"Content-Type": "application/x-ndjson"}, timeout=30)
            except requests.RequestException:
                self.history.record_failure(len(sent))
                continue
            if r.status_code != 200:
                self.history.record_failure(len(sent))
                continue
            body = r.json()
            self.history.record_bulk(sent, body)
            # A bulk whose every item succeeded: every shard, the failed-over one too, writes.
            if all(item["index"].get("status") in (200, 201) for item in body["items"]):
                self.successes.append(time.monotonic())


def primary_nodes(c: ShoalCluster, i: int) -> set[str]:
    rows = c.get(f"/_cat/shards/{INDEX}", i, format="json", h="prirep,state,node").json()
    return {r["node"] for r in rows if r["prirep"] == "p" and r["state"] == "STARTED"}


def started_copies(c: ShoalCluster, i: int) -> list[tuple[int, str]]:
    rows = c.get(f"/_cat/shards/{INDEX}", i, format="json", h="shard,state,node").json()
    return [(int(r["shard"]), r["node"]) for r in rows if r["state"] == "STARTED"]


@pytest.mark.xfail(strict=False, reason=(
    "known bug (issue 5, open): after several kill rounds a node's cluster-state applier can stall "
    "for ~20 s; a promoted primary then cannot serve recoveries and an older store was seen coming "
    "back as the primary, losing acknowledged updates (seeds 732220799, 538496674). Runs every CI "
    "so the failure stays visible; the note on issue 5 has the logs."))
def test_killing_primaries_under_load_loses_no_acknowledged_write(tmp_path):
    rounds = int(os.environ.get("SHOAL_KILL_ROUNDS", "10"))
    seed = int(os.environ.get("SHOAL_KILL_SEED", str(random.randrange(1 << 30))))
    print(f"\nseed {seed}, {rounds} rounds")
    rng = random.Random(seed)
    history = History()
    recoveries: list[float] = []
    with ShoalCluster(tmp_path, 3) as c:
        r = c.http(0).put(f"/{INDEX}", {"settings": {
            "number_of_shards": 3, "number_of_replicas": 1,
            "index.translog.durability": "request",
            "index.unassigned.node_left.delayed_timeout": "0"},
            "mappings": {"properties": {"value": {"type": "long"}, "writer": {"type": "integer"}}}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green")
        for round_no in range(rounds):
            writers = [Writer(c, k, history, random.Random(rng.random())) for k in range(2)]
            for w in writers:
                w.start()
            time.sleep(rng.uniform(0.5, 2.0))
            observer = c.index_of(c.cluster_manager())
            candidates = [c.index_of(n) for n in primary_nodes(c, observer)]
            victim = rng.choice(candidates)
            killed_at = time.monotonic()
            c.kill(victim)
            time.sleep(3.0)
            for w in writers:
                w.stop.set()
            for w in writers:
                w.join(60)
            after = [t for w in writers for t in w.successes if t > killed_at]
            if after:
                recoveries.append(min(after) - killed_at)
            c.nodes[victim].start()
            survivor = next(i for i in range(3) if i != victim)
            c.wait_for_nodes(3, i=survivor, timeout=60)
            c.wait_for_status("green", timeout=120, i=survivor)
            summary = history.verify(c.nodes[survivor].url, INDEX, started_copies(c, survivor))
            print(f"round {round_no + 1}: killed node-{victim}; {summary}")
        record("acknowledged writes lost over all kill rounds", 0)
        record("documents acknowledged", len(history.acks))
        if recoveries:
            record("median seconds from primary kill to a fully successful bulk", round(statistics.median(recoveries), 3))
