"""Replica visibility lag, measured from outside the same way on every system: while a bulk
load runs, a probe writes one document at a time to the primary's node (no refresh) and polls
searches pinned to the primary's node and to the replica's node until both find it. The lag is
the time from the write's acknowledgment to the first search on the replica that finds it, so it
includes the primary's refresh interval (the goal is refresh_interval + 200 ms); the same on the
primary tells what replication adds (replica minus primary, per probe).

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
        self.ids = {"primary": node_id(primary), "replica": node_id(replica)}
        # (monotonic time of the acknowledgment, replica lag, primary lag), lags in ms or None
        # when never seen
        self.samples: list[tuple[float, float | None, float | None]] = []
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
        seen = {}
        while time.monotonic() - acked < GIVE_UP_S and len(seen) < 2:
            for role in ("replica", "primary"):
                if role not in seen and self.finds(role, doc):
                    seen[role] = (time.monotonic() - acked) * 1000
            time.sleep(POLL_EVERY_S)
        return acked, seen.get("replica"), seen.get("primary")

    def finds(self, role, doc):
        node = self.replica if role == "replica" else self.primary
        path = f"/{self.index}/_search?preference=_only_nodes:{self.ids[role]}"
        query = {"size": 0, "query": {"term": {"package": doc}}}
        hits = node.req("POST", path, query, timeout=30)["hits"]["total"]
        return (hits["value"] if isinstance(hits, dict) else hits) > 0

    def summary(self, window=None):
        """p50/p99/max lag in ms of the probes acknowledged inside `window` (start, end), or
        of all; probes never seen within 30 s are counted, not hidden."""
        rows = [(replica, primary) for at, replica, primary in self.samples
                if window is None or window[0] <= at <= window[1]]
        seen = [replica for replica, _ in rows if replica is not None]
        on_primary = [primary for _, primary in rows if primary is not None]
        added = [replica - primary for replica, primary in rows if None not in (replica, primary)]
        rounded = lambda values, p: round(percentile(values, p), 1) if values else None
        return {"probes": len(rows), "never_seen": len(rows) - len(seen),
                "p50_ms": rounded(seen, 50), "p99_ms": rounded(seen, 99),
                "max_ms": round(max(seen), 1) if seen else None,
                "primary_p50_ms": rounded(on_primary, 50), "primary_p99_ms": rounded(on_primary, 99),
                "added_p50_ms": rounded(added, 50), "added_p99_ms": rounded(added, 99)}


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
