"""Replica visibility lag, measured from outside the same way on every system: while a bulk
load runs, a probe writes one document at a time to the primary's node (no refresh) and polls
a search pinned to the replica's node until the document is found. The lag is the time from
the write's acknowledgment to the first search on the replica that finds it, so it includes the
primary's refresh interval (the goal is refresh_interval + 200 ms).

Optionally a force merge to one segment starts while the load runs; probes are then also
summarized over the merge's window alone.
"""

from __future__ import annotations

import threading
import time

from systems import HttpError, log

PROBE_EVERY_S = 0.2
POLL_EVERY_S = 0.02
GIVE_UP_S = 30.0


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
        self.replica_id = node_id(replica)
        # (monotonic time of the acknowledgment, lag in ms or None when never seen)
        self.samples: list[tuple[float, float | None]] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join(timeout=GIVE_UP_S + 5)

    def run(self):
        n = 0
        while not self.stopping.is_set():
            n += 1
            started = time.monotonic()
            try:
                self.samples.append(self.probe_once(n))
            except (OSError, HttpError) as e:
                log(f"visibility probe {n} failed: {e}")
            time.sleep(max(0.0, PROBE_EVERY_S - (time.monotonic() - started)))

    def probe_once(self, n):
        doc = f"probe-{n}"
        self.primary.req("PUT", f"/{self.index}/_doc/{doc}", {"package": doc}, timeout=60)
        acked = time.monotonic()
        query = {"size": 0, "query": {"term": {"package": doc}}}
        path = f"/{self.index}/_search?preference=_only_nodes:{self.replica_id}"
        while time.monotonic() - acked < GIVE_UP_S:
            hits = self.replica.req("POST", path, query, timeout=30)["hits"]["total"]
            if (hits["value"] if isinstance(hits, dict) else hits) > 0:
                return acked, (time.monotonic() - acked) * 1000
            time.sleep(POLL_EVERY_S)
        return acked, None

    def summary(self, window=None):
        """p50/p99/max lag in ms of the probes acknowledged inside `window` (start, end), or
        of all; probes never seen within 30 s are counted, not hidden."""
        rows = [lag for at, lag in self.samples if window is None or window[0] <= at <= window[1]]
        seen = [lag for lag in rows if lag is not None]
        return {"probes": len(rows), "never_seen": len(rows) - len(seen),
                "p50_ms": round(percentile(seen, 50), 1) if seen else None,
                "p99_ms": round(percentile(seen, 99), 1) if seen else None,
                "max_ms": round(max(seen), 1) if seen else None}


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
