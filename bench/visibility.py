"""Replica visibility lag, measured from outside the same way on every system: while a bulk
load runs, a probe writes one document every 0.1-0.3 s (random, so writes land at every phase of
the refresh cycle) to the primary's node (no refresh), and two pollers, one pinned to the primary's
node and one to the replica's node, search every 20 ms for the probes not yet found there (one
poller per node, so a slow search on one never delays the other's observation). The lag is
the time from a write's acknowledgment to the first search on the replica that finds it, so it
includes the primary's refresh interval (the goal is refresh_interval + 200 ms); the same on the
primary tells what replication adds (replica minus primary, per probe). The lag from the write's
sending is reported too (`sent_p50_ms`, `sent_p99_ms`): a system that acknowledges a write only
after a running refresh moves part of the lag into the write's latency, and this shows it.

Optionally a force merge to one segment starts while the load runs; probes are then also
summarized over the merge's window alone.
"""

from __future__ import annotations

import random
import threading
import time

from systems import HttpError, log

PROBE_SPACING_S = (0.1, 0.3)
POLL_EVERY_S = 0.02
GIVE_UP_S = 30.0
ROLES = ("replica", "primary")


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def node_id(node):
    nodes = node.req("GET", "/_nodes/_local")["nodes"]
    return next(iter(nodes))


class VisibilityProbe:
    """Writes probe documents `{"package": "probe-<n>"}` to `index` through `primary` and times
    their appearance in searches on `replica` (a node holding only the replica)."""

    def __init__(self, primary, replica, index):
        self.primary, self.replica, self.index = primary, replica, index
        self.ids = {"primary": node_id(primary), "replica": node_id(replica)}
        # probe name -> [monotonic time of the acknowledgment, {role: lag in ms}, ms it took
        # to be acknowledged]
        self.probes: dict[str, list] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.writer = threading.Thread(target=self.write_probes, daemon=True)
        self.pollers = [threading.Thread(target=self.poll, args=(role,), daemon=True) for role in ROLES]
        self.rng = random.Random(7)

    def __enter__(self):
        self.writer.start()
        for poller in self.pollers:
            poller.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.writer.join(timeout=GIVE_UP_S + 5)
        for poller in self.pollers:
            poller.join(timeout=GIVE_UP_S + 5)

    @property
    def samples(self):
        """(monotonic time of the acknowledgment, replica lag, primary lag, ms the write took
        to be acknowledged), lags in ms or None when never seen."""
        with self.lock:
            return [(at, seen.get("replica"), seen.get("primary"), took)
                    for at, seen, took in self.probes.values()]

    def write_probes(self):
        n = 0
        while not self.stopping.is_set():
            n += 1
            doc = f"probe-{n}"
            try:
                sent = time.monotonic()
                self.primary.req("PUT", f"/{self.index}/_doc/{doc}", {"package": doc}, timeout=60)
                acked = time.monotonic()
                with self.lock:
                    self.probes[doc] = [acked, {}, (acked - sent) * 1000]
            except (OSError, HttpError) as e:
                log(f"visibility probe {n} failed: {e}")
            self.stopping.wait(self.rng.uniform(*PROBE_SPACING_S))

    def poll(self, role):
        """Searches `role`'s node for the probes it has not shown yet until every probe is
        seen there or given up, and the writer stopped."""
        while True:
            now = time.monotonic()
            with self.lock:
                waiting = [doc for doc, (at, seen, _) in self.probes.items()
                           if role not in seen and now - at < GIVE_UP_S]
            if waiting:
                try:
                    found = self.found(role, waiting)
                except (OSError, HttpError) as e:
                    log(f"visibility poll failed: {e}")
                    found = []
                seen_at = time.monotonic()
                with self.lock:
                    for doc in found:
                        at, seen, _ = self.probes[doc]
                        seen.setdefault(role, (seen_at - at) * 1000)
            elif self.stopping.is_set() and not self.writer.is_alive():
                return
            time.sleep(POLL_EVERY_S)

    def found(self, role, docs):
        node = self.replica if role == "replica" else self.primary
        path = f"/{self.index}/_search?preference=_only_nodes:{self.ids[role]}"
        query = {"size": len(docs), "_source": ["package"], "query": {"terms": {"package": docs}}}
        hits = node.req("POST", path, query, timeout=30)["hits"]["hits"]
        return [hit["_source"]["package"] for hit in hits]

    def summary(self, window=None):
        """p50/p99/max lag in ms of the probes acknowledged inside `window` (start, end), or
        of all; probes never seen within 30 s are counted, not hidden."""
        rows = [(replica, primary, took) for at, replica, primary, took in self.samples
                if window is None or window[0] <= at <= window[1]]
        seen = [replica for replica, _, _ in rows if replica is not None]
        from_sent = [replica + took for replica, _, took in rows if replica is not None]
        on_primary = [primary for _, primary, _ in rows if primary is not None]
        added = [replica - primary for replica, primary, _ in rows if None not in (replica, primary)]
        rounded = lambda values, p: round(percentile(values, p), 1) if values else None
        return {"probes": len(rows), "never_seen": len(rows) - len(seen),
                "p50_ms": rounded(seen, 50), "p99_ms": rounded(seen, 99),
                "max_ms": round(max(seen), 1) if seen else None,
                "primary_p50_ms": rounded(on_primary, 50), "primary_p99_ms": rounded(on_primary, 99),
                "added_p50_ms": rounded(added, 50), "added_p99_ms": rounded(added, 99),
                "sent_p50_ms": rounded(from_sent, 50), "sent_p99_ms": rounded(from_sent, 99)}


class ForceMergeDuring:
    """Starts `_forcemerge?max_num_segments=1` on `index` `after_s` into the load, in a thread;
    `window` is its (start, end) in monotonic time once it finished."""

    def __init__(self, node, index, after_s):
        self.node, self.index, self.after_s = node, index, after_s
        self.window = None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.thread.join(timeout=600)

    def run(self):
        time.sleep(self.after_s)
        start = time.monotonic()
        try:
            self.node.req("POST", f"/{self.index}/_forcemerge?max_num_segments=1", timeout=600)
        except (OSError, HttpError) as e:
            log(f"force merge during the visibility probe failed: {e}")
        # The merged segment reaches replicas after the merge: probes shortly after count too.
        self.window = (start, time.monotonic() + 3.0)


def visibility_once(nodes, primary, load, merge_after_s=None):
    """Runs `load()` (a bulk into `repl`) with a probe from `primary` to the other node of
    `nodes`, and a force merge `merge_after_s` into it when given: the probe's lag summary,
    overall and over the merge's window."""
    replica = next(n for n in nodes if n is not primary)
    merge = ForceMergeDuring(primary, "repl", merge_after_s) if merge_after_s is not None else None
    with VisibilityProbe(primary, replica, "repl") as probe:
        if merge:
            with merge:
                load()
        else:
            load()
    row = {"all": probe.summary()}
    if merge and merge.window:
        row["during_merge"] = probe.summary(merge.window)
    return row
