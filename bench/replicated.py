"""The ingest-replicated scenario: bulk ingest into 1 shard on a 2-node cluster, for each
replication mode and system, with the replica's CPU, node-to-node bytes and replica visibility
lag (see `visibility.py`)."""

import os
import statistics
import subprocess

import prep
from common import bench_cmd, load_index_body, start_cluster, summarize, summarize_runs, with_settings
from systems import log
from visibility import visibility_once


# (mode label, replication type, replicas, systems that have it)
# SEGMENT with 1 replica runs right after 0 replicas: their ratio is a goal, and this machine's
# speed drifts by more than it in the minutes a DOCUMENT, 1 replica run takes.
REPLICATED_MODES = [("DOCUMENT, 0 replicas", "DOCUMENT", 0, ("shoal", "opensearch")),
                    ("SEGMENT, 1 replica", "SEGMENT", 1, ("shoal", "opensearch")),
                    ("DOCUMENT, 1 replica", "DOCUMENT", 1, ("shoal", "opensearch")),
                    ("SEGMENT+remote(fs), 1 replica", "SEGMENT", 1, ("shoal-remote",))]


# A remote-backed index acknowledges at the translog upload's pace (~1.5k docs/s): its load
# is capped in time rather than in documents.
REMOTE_LOAD_S = 15


def primary_node(nodes, index):
    """The node of `nodes` that holds the primary of shard 0 of `index`."""
    rows = nodes[0].req("GET", f"/_cat/shards/{index}?format=json&h=shard,prirep,node")
    name = next(r["node"] for r in rows if r["prirep"] == "p" and str(r["shard"]) == "0")
    return next(n for n in nodes if n.node_name == name)


def bulk_args(entry, max_docs, repeat, duration=None):
    return ["bulk", "--url", entry.url, "--index", "repl", "--file", prep.DEBIAN, "--clients", 2,
            "--repeat", repeat, *(["--max-docs", max_docs] if max_docs else []),
            *(["--duration", duration] if duration else [])]


# Modes measured a second time with each node on cores of its own (see `own_cores`).
OWN_CORES_MODES = ("DOCUMENT, 0 replicas", "SEGMENT, 1 replica")
OWN_CORES_SUFFIX = ", each node on its own cores"


def own_cores():
    """The machine's CPUs split in two: the primary's node gets the first half, the replica's
    node and the client the second. On one machine this stands for a replica on another host,
    the deployment segment replication's savings are about: with both nodes on the same cores,
    every CPU second the replica spends is taken from the primary. `None` with fewer than 2."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    half = len(cpus) // 2
    return cpus[:half], cpus[half:]


def set_affinity(pid, cpus):
    """Every thread of `pid` (a JVM's or Shoal's) onto `cpus`."""
    subprocess.run(["taskset", "-a", "-p", "-c", ",".join(map(str, cpus)), str(pid)], check=True,
                   capture_output=True)


def replicated_once(nodes, body, max_docs, repeat, duration=None, split_cores=None):
    """One bulk run into a fresh `repl`; with `split_cores` (from `own_cores`) the primary's
    node, and the replica's node with the client, run on separate cores for its length."""
    nodes[0].recreate_index("repl", body)
    # The client talks to the node holding the primary, as a shard-aware client would: every
    # mode and system then measures replication alone, not forwarding that depends on where
    # the primary happened to land.
    entry = primary_node(nodes, "repl")
    cpu0 = [n.cpu_seconds() for n in nodes]
    stolen0 = stolen_jiffies()
    tx0 = sum(n.transport_tx_bytes() for n in nodes)
    client_cpus = None
    if split_cores:
        primary_cpus, client_cpus = split_cores
        for n in nodes:
            set_affinity(n.pid, primary_cpus if n is entry else client_cpus)
    try:
        out = bench_cmd(*bulk_args(entry, max_docs, repeat, duration), cpus=client_cpus)
    finally:
        if split_cores:
            for n in nodes:
                set_affinity(n.pid, sorted(os.sched_getaffinity(0)))
    per_node = [n.cpu_seconds() - c0 for n, c0 in zip(nodes, cpu0)]
    stolen1 = stolen_jiffies()
    # Node-to-node bytes per MB of documents indexed: replica operations, segment files,
    # cluster chatter.
    source_mb = out["mb_per_s"] * out["docs"] / max(out["docs_per_s"], 1e-9)
    tx_mb = (sum(n.transport_tx_bytes() for n in nodes) - tx0) / 1e6
    cpu = sum(per_node)
    nodes[0].delete_index("repl")
    # The busier node holds the primary (one shard on two nodes); the other its replica.
    busy, idle = max(per_node), min(per_node)
    return {"docs_per_s": out["docs_per_s"], "cpu_s_total": round(cpu, 3),
            "cpu_s_busier_node": round(busy, 3), "cpu_s_other_node": round(idle, 3),
            "other_over_busier_cpu": round(idle / busy, 3) if busy else None,
            "cpu_s_per_1k_docs": round(cpu / max(out["docs"], 1) * 1000, 4),
            "transport_mb_per_indexed_mb": round(tx_mb / max(source_mb, 1e-9), 3),
            "bulk_p50_ms": out["bulk_latency_ms"].get("p50"), "bulk_p99_ms": out["bulk_latency_ms"].get("p99"),
            "stolen_pct": round(100 * (stolen1[0] - stolen0[0]) / max(stolen1[1] - stolen0[1], 1), 1)}


def machine_jiffies():
    """(idle incl. iowait, stolen, total) jiffies of the machine's CPUs. Stolen: on a virtual
    machine the hypervisor may take CPU time away, and a run that lost a share of it is not
    comparable to one that did not."""
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    return fields[3] + fields[4], fields[7] if len(fields) > 7 else 0, sum(fields)


def stolen_jiffies():
    _, stolen, total = machine_jiffies()
    return stolen, total


def scenario(ctx):
    """Bulk ingest into 1 shard on a 2-node cluster, systems alternating run by run."""
    result = {"notes": ["1 shard on 2 nodes: with a replica, the busier node holds the primary; "
                        "other_over_busier_cpu is then the replica's CPU over the primary's",
                        "the client sends its bulks to the node holding the primary"], "systems": {}}
    base = load_index_body("debian")
    clusters = {}
    try:
        systems = list(ctx.systems) + (["shoal-remote"] if "shoal" in ctx.systems else [])
        for name in systems:
            clusters[name], formed = start_cluster(name, 2)
            result["systems"][name] = {"cluster_formed_s": round(formed, 2), "modes": {}}
        repeat = 1 if ctx.quick else ctx.args.repeat
        result["config"] = {"nodes": 2, "shards": 1, "clients": 2, "max_docs": ctx.debian_docs, "runs": ctx.runs,
                            "repeat": repeat, "visibility_load_s": visibility_load_s(ctx),
                            "visibility_runs": min(ctx.runs, 3), "remote_load_s": REMOTE_LOAD_S}
        for r in range(ctx.warmup + ctx.runs):
            for label, kind, replicas, has_mode in REPLICATED_MODES:
                for name in systems:
                    if name not in has_mode:
                        continue
                    body = with_settings(base, number_of_replicas=replicas, **{"replication.type": kind})
                    row = replicated_once(clusters[name], body, ctx.debian_docs, repeat,
                                          REMOTE_LOAD_S if name == "shoal-remote" and not ctx.quick else None)
                    log(f"ingest-replicated {name} {label}: {row['docs_per_s']:.0f} docs/s, "
                        f"{row['cpu_s_total']:.1f} CPU s")
                    if r >= ctx.warmup:
                        modes = result["systems"][name]["modes"]
                        modes.setdefault(label, {"runs": []})["runs"].append(row)
                    split = own_cores() if label in OWN_CORES_MODES else None
                    if split:
                        row = replicated_once(clusters[name], body, ctx.debian_docs, repeat, split_cores=split)
                        log(f"ingest-replicated {name} {label}{OWN_CORES_SUFFIX}: {row['docs_per_s']:.0f} docs/s")
                        if r >= ctx.warmup:
                            modes.setdefault(label + OWN_CORES_SUFFIX, {"runs": []})["runs"].append(row)
        measure_visibility(ctx, clusters, systems, base, result)
        keys = ["docs_per_s", "cpu_s_total", "cpu_s_per_1k_docs", "bulk_p50_ms", "bulk_p99_ms",
                "cpu_s_busier_node", "cpu_s_other_node", "other_over_busier_cpu", "transport_mb_per_indexed_mb",
                "stolen_pct"]
        for entry in result["systems"].values():
            for mode in entry["modes"].values():
                mode["summary"] = summarize_runs(mode["runs"], keys)
                mode["summary"].update(visibility_summary(mode))
            modes = entry["modes"]
            if "DOCUMENT, 0 replicas" in modes and "DOCUMENT, 1 replica" in modes:
                entry["one_replica_over_none_docs_per_s"] = round(
                    modes["DOCUMENT, 1 replica"]["summary"]["docs_per_s"]["median"]
                    / modes["DOCUMENT, 0 replicas"]["summary"]["docs_per_s"]["median"], 3)
            if "SEGMENT, 1 replica" in modes and "DOCUMENT, 1 replica" in modes:
                median = lambda label: modes[label]["summary"]["docs_per_s"]["median"]
                entry["segment_over_document_docs_per_s"] = round(
                    median("SEGMENT, 1 replica") / median("DOCUMENT, 1 replica"), 3)
                if "DOCUMENT, 0 replicas" in modes:
                    entry["segment_over_no_replica_docs_per_s"] = round(
                        median("SEGMENT, 1 replica") / median("DOCUMENT, 0 replicas"), 3)
                    entry["segment_over_no_replica_paired"] = paired_ratio(
                        modes["DOCUMENT, 0 replicas"]["runs"], modes["SEGMENT, 1 replica"]["runs"])
                entry["segment_over_document_paired"] = paired_ratio(
                    modes["DOCUMENT, 1 replica"]["runs"], modes["SEGMENT, 1 replica"]["runs"])
                own = [label + OWN_CORES_SUFFIX for label in OWN_CORES_MODES]
                if all(label in modes for label in own):
                    entry["segment_over_no_replica_own_cores_docs_per_s"] = round(median(own[1]) / median(own[0]), 3)
    finally:
        for nodes in clusters.values():
            for n in nodes:
                n.stop()
    return result


def paired_ratio(base_runs, runs):
    """Each round's docs/s over the same round's base run (a few minutes apart, where the
    medians of all rounds compare runs up to a whole round apart), and their median."""
    ratios = [round(r["docs_per_s"] / b["docs_per_s"], 3) for b, r in zip(base_runs, runs) if b["docs_per_s"]]
    return {"per_round": ratios, "median": round(statistics.median(ratios), 3) if ratios else None}


def visibility_load_s(ctx):
    return 3 if ctx.quick else 12


# A steady load well below either system's saturation on this machine: what a cluster that is
# not out of CPU sees.
STEADY_DOCS_PER_S = 10_000
# (result key, force merge started this many seconds in, offered docs/s)
VISIBILITY_LOADS = (("visibility", None, None), ("visibility_with_force_merge", 3, None),
                    ("visibility_steady", None, STEADY_DOCS_PER_S),
                    ("visibility_steady_with_force_merge", 3, STEADY_DOCS_PER_S))


def measure_visibility(ctx, clusters, systems, base, result):
    """Separate runs (a probe searching the replica would add to its CPU): for each mode with a
    replica, the replica visibility lag under a bulk load of a fixed duration, as fast as the
    cluster takes it without and with a force merge started 3 s into it, and at a steady rate."""
    for r in range(min(ctx.runs, 3)):
        for label, kind, replicas, has_mode in REPLICATED_MODES:
            for name in (n for n in systems if n in has_mode and replicas):
                for key, merge_after_s, rate in VISIBILITY_LOADS:
                    nodes = clusters[name]
                    nodes[0].recreate_index("repl", with_settings(base, number_of_replicas=1,
                                                                  **{"replication.type": kind}))
                    primary = primary_node(nodes, "repl")
                    args = bulk_args(primary, None, 100, visibility_load_s(ctx))
                    args += ["--rate", rate] if rate else []
                    row = visibility_once(nodes, primary, lambda: bench_cmd(*args), merge_after_s)
                    nodes[0].delete_index("repl")
                    mode = result["systems"][name]["modes"].setdefault(label, {"runs": []})
                    mode.setdefault(key, []).append(row)
                    log(f"ingest-replicated {name} {label} {key}: {row}")


def visibility_summary(mode):
    """Medians over the runs of each run's p50/p99/max visibility lag (ms), per load kind."""
    out = {}
    for key, merge_after_s, _ in VISIBILITY_LOADS:
        for part in ("all", "during_merge") if merge_after_s is not None else ("all",):
            rows = [row.get(part) for row in mode.get(key, []) if row.get(part)]
            if not rows:
                continue
            name = key if part == "all" else key.replace("with_force_merge", "during_force_merge")
            out[name] = {k: summarize([row[k] for row in rows])
                         for k in ("p50_ms", "p99_ms", "max_ms", "never_seen", "primary_p50_ms",
                                   "primary_p99_ms", "added_p50_ms", "added_p99_ms", "sent_p50_ms",
                                   "sent_p99_ms")}
    return out
