"""The rolling-restart scenario: what a graceful restart of each node in turn costs clients.

A 3-node cluster per system, an index of 3 shards x 1 replica (`translog.durability: request`).
Two clients run throughout: single-document PUTs and 20-document `_bulk`s, each sent to a node
"in the load balancer" (a node is taken out before it is stopped and put back once the cluster
is green again). After a baseline window every node in turn is stopped with SIGTERM, started
again on its data, and waited for until the cluster is green. Reported per system: failed
requests, and request latency p50/p99 in the baseline against the restart windows (from the
stop to green), with the added time per restart.
"""

import json
import random
import statistics
import threading
import time

from systems import HttpError, http, log

INDEX = "rolling"
DRAIN_S = 0.5
BODY = {"settings": {"number_of_shards": 3, "number_of_replicas": 1, "index.translog.durability": "request"},
        "mappings": {"properties": {"value": {"type": "long"}}}}


class Client(threading.Thread):
    """One client loop recording (start time, latency ms, ok) per request."""

    def __init__(self, pool, bulk, seed):
        super().__init__(daemon=True)
        self.pool, self.bulk, self.rng = pool, bulk, random.Random(seed)
        self.halt = threading.Event()
        self.samples = []
        self.errors = []

    def run(self):
        n = 0
        while not self.halt.is_set():
            node = self.pool.pick(self.rng)
            n += 1
            t0 = time.monotonic()
            try:
                ok = self.send(node, n)
            except (OSError, HttpError) as e:
                ok, self.errors = False, self.errors + [repr(e)[:200]]
            self.samples.append((t0, (time.monotonic() - t0) * 1000, ok))

    def send(self, node, n):
        if not self.bulk:
            http("PUT", f"{node.url}/{INDEX}/_doc/{self.rng.randrange(5000)}", {"value": n}, timeout=120)
            return True
        lines = []
        for _ in range(20):
            lines += [json.dumps({"index": {"_index": INDEX, "_id": str(self.rng.randrange(5000))}}),
                      json.dumps({"value": n})]
        out = http("POST", f"{node.url}/_bulk", ("\n".join(lines) + "\n").encode(), timeout=120, ndjson=True)
        failed = [i for i in out["items"] if i["index"].get("status") not in (200, 201)]
        if failed:
            self.errors.append(json.dumps(failed[0])[:200])
        return not failed


class Pool:
    def __init__(self, nodes):
        self.nodes, self.members, self.lock = nodes, set(range(len(nodes))), threading.Lock()

    def pick(self, rng):
        with self.lock:
            return self.nodes[rng.choice(sorted(self.members))]

    def take_out(self, i):
        with self.lock:
            self.members.discard(i)

    def put_back(self, i):
        with self.lock:
            self.members.add(i)


def wait_green(node, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            h = node.req("GET", "/_cluster/health?wait_for_nodes=3&wait_for_status=green&timeout=1s")
            if h.get("status") == "green" and h.get("number_of_nodes") == 3:
                return
        except (OSError, HttpError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"cluster not green with 3 nodes within {timeout}s")


def wait_nodes_below(node, n, timeout=60):
    """Until `node` no longer counts the stopped node (else its green is the old one)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if node.req("GET", "/_cluster/health").get("number_of_nodes", n) < n:
                return
        except (OSError, HttpError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"the stopped node was still counted after {timeout}s")


def pct(values, p):
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(p / 100 * len(values)))], 1)


def latency(samples, windows):
    inside = [ms for t, ms, _ in samples if any(a <= t <= b for a, b in windows)]
    return {"requests": len(inside), "p50_ms": pct(inside, 50), "p99_ms": pct(inside, 99),
            "max_ms": round(max(inside), 1) if inside else None}


def restart_once(nodes, quick):
    """One rolling restart under load; returns the figures of that run."""
    nodes[0].recreate_index(INDEX, BODY)
    pool = Pool(nodes)
    clients = [Client(pool, bulk, seed) for seed, bulk in ((1, False), (2, True))]
    for c in clients:
        c.start()
    baseline_s, settle_s = (3, 1) if quick else (15, 5)
    t_base = time.monotonic()
    time.sleep(baseline_s)
    baseline = [(t_base, time.monotonic())]
    windows = []
    for i, node in enumerate(nodes):
        pool.take_out(i)
        # The load balancer drains: a request that picked the node just before it was taken
        # out is still on its way (one arriving after the listener closed is refused).
        time.sleep(DRAIN_S)
        t0 = time.monotonic()
        node.stop()
        observer = nodes[(i + 1) % len(nodes)]
        wait_nodes_below(observer, len(nodes))
        node.start(fresh=False)
        wait_green(observer)
        windows.append((t0, time.monotonic()))
        pool.put_back(i)
        time.sleep(settle_s)
    for c in clients:
        c.halt.set()
    for c in clients:
        c.join(150)
    out = {"restart_s": [round(b - a, 1) for a, b in windows], "clients": {}}
    for name, c in (("put", clients[0]), ("bulk", clients[1])):
        base, during = latency(c.samples, baseline), latency(c.samples, windows)
        out["clients"][name] = {
            "requests": len(c.samples), "failed": sum(1 for *_, ok in c.samples if not ok),
            "errors": c.errors[:3], "baseline": base, "restarting": during,
            "added_p50_ms": None if None in (base["p50_ms"], during["p50_ms"]) else round(during["p50_ms"] - base["p50_ms"], 1),
            "added_p99_ms": None if None in (base["p99_ms"], during["p99_ms"]) else round(during["p99_ms"] - base["p99_ms"], 1)}
    nodes[0].delete_index(INDEX)
    return out


def scenario(ctx, start_cluster):
    result = {"systems": {}}
    for name in ctx.systems:
        nodes, _ = start_cluster(name, 3)
        runs = []
        try:
            for _ in range(ctx.runs):
                run = restart_once(nodes, ctx.quick)
                log(f"rolling restart {name}: {json.dumps(run)}")
                runs.append(run)
        finally:
            for n in nodes:
                n.stop()
        result["systems"][name] = {"runs": runs, "summary": summarize(runs)}
    return result


def summarize(runs):
    def med(path):
        values = [v for v in (path(r) for r in runs) if v is not None]
        return statistics.median(values) if values else None
    out = {}
    for client in ("put", "bulk"):
        c = lambda r, k, w=None: r["clients"][client][k] if w is None else r["clients"][client][w][k]  # noqa: E731
        out[client] = {"failed": sum(c(r, "failed") for r in runs), "requests": sum(c(r, "requests") for r in runs),
                       "baseline_p50_ms": med(lambda r: c(r, "p50_ms", "baseline")),
                       "baseline_p99_ms": med(lambda r: c(r, "p99_ms", "baseline")),
                       "restarting_p50_ms": med(lambda r: c(r, "p50_ms", "restarting")),
                       "restarting_p99_ms": med(lambda r: c(r, "p99_ms", "restarting")),
                       "restarting_max_ms": med(lambda r: c(r, "max_ms", "restarting"))}
    out["restart_s"] = med(lambda r: statistics.median(r["restart_s"]))
    return out


def fmt(value):
    return "–" if value is None else f"{value:,.1f}"


def render(doc, header, table):
    lines = header(doc)
    sy = doc.get("systems", {})
    rows = []
    for name, entry in sy.items():
        s = entry["summary"]
        for client in ("put", "bulk"):
            c = s[client]
            ms = [fmt(c[k]) for k in ("baseline_p50_ms", "restarting_p50_ms", "baseline_p99_ms",
                                      "restarting_p99_ms", "restarting_max_ms")]
            rows.append([name, client, f"{c['failed']} of {c['requests']}", *ms, fmt(s["restart_s"])])
    if rows:
        lines += table(rows, ["system", "client", "failed requests", "p50 ms before", "p50 ms restarting",
                              "p99 ms before", "p99 ms restarting", "max ms restarting", "s per restart (to green)"])
    return lines
