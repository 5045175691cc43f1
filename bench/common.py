"""What the benchmark scenarios share: index bodies, the bench binary, medians, clusters."""

import json
import os
import shutil
import statistics
import subprocess
import time

from systems import BENCH_BIN, TMP, HttpError, OpenSearch, Shoal

BENCH = os.path.dirname(os.path.abspath(__file__))


def load_index_body(name):
    with open(os.path.join(BENCH, "config", f"{name}-index.json")) as f:
        return json.load(f)


def with_settings(body, **index_settings):
    body = json.loads(json.dumps(body))
    body["settings"]["index"].update(index_settings)
    return body


def summarize(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def bench_cmd(*args, cpus=None):
    """Runs `shoal-bench` with `args` (on the CPUs `cpus` only, when given); its JSON answer."""
    cmd = [BENCH_BIN, *[str(a) for a in args]]
    if cpus:
        cmd = ["taskset", "-c", ",".join(map(str, cpus)), *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def summarize_runs(runs, keys):
    return {k: summarize([r.get(k) for r in runs]) for k in keys}



def remote_store_settings():
    """A remote-backed Shoal node: segments and translog in an `fs` repository (fresh per run)."""
    location = os.path.join(TMP, "shoal-remote-repo")
    shutil.rmtree(location, ignore_errors=True)
    prefix = "node.attr.remote_store"
    return {f"{prefix}.segment.repository": "bench", f"{prefix}.translog.repository": "bench",
            f"{prefix}.repository.bench.type": "fs", f"{prefix}.repository.bench.settings.location": location}


def start_cluster(name, n=2):
    """A fresh n-node cluster of `name` on loopback; returns its nodes and the seconds to green.
    `shoal-remote` is Shoal with remote-backed storage (every index remote-backed)."""
    if name == "opensearch":
        names = [f"os-{i}" for i in range(n)]
        seeds = [f"127.0.0.1:{9371 + i}" for i in range(n)]
        nodes = [OpenSearch(port=9271 + i, transport=9371 + i, tag=f"os-cluster-{i}", node_name=names[i],
                            cluster="os-bench-cluster", seeds=seeds, masters=names) for i in range(n)]
    else:
        remote = name == "shoal-remote"
        offset = 20 if remote else 0
        names = [f"{name}-{i}" for i in range(n)]
        seeds = [f"127.0.0.1:{9501 + offset + i}" for i in range(n)]
        extra = remote_store_settings() if remote else {}
        nodes = [Shoal(port=9401 + offset + i, transport=9501 + offset + i, tag=f"{name}-cluster-{i}",
                       node_name=names[i], cluster=f"{name}-bench-cluster", seeds=seeds, masters=names,
                       extra=extra) for i in range(n)]
    t0 = time.monotonic()
    for node in nodes:
        node.start(fresh=True)
    for _ in range(1800):
        try:
            h = nodes[0].req("GET", f"/_cluster/health?wait_for_nodes={n}&wait_for_status=green&timeout=1s")
            if h.get("status") == "green" and h.get("number_of_nodes") == n:
                break
        except (OSError, HttpError):
            pass
        time.sleep(0.1)
    else:
        for node in nodes:
            node.stop()
        raise RuntimeError(f"{name} cluster did not form")
    return nodes, time.monotonic() - t0
