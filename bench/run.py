#!/usr/bin/env python3
"""Shoal benchmark suite: Shoal against OpenSearch 2.18 on this machine, with the raw tantivy
limit beside both.

    bench/run.py <scenario>|all [--quick] [--runs N] [--systems shoal,opensearch] [--docs N]

Scenarios: ingest-1node, ingest-replicated, search, footprint, codecs, recovery, rolling-restart.
Each writes bench/results/<scenario>/<timestamp>.json, latest.md and PNG plots.
--quick: tiny corpus, 1 run, no warm-up (CI smoke; use with --systems shoal).
"""

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import prep  # noqa: E402
import report  # noqa: E402
import rolling  # noqa: E402
import replicated  # noqa: E402
import snapshots  # noqa: E402
from common import (BENCH, bench_cmd, load_index_body, start_cluster, summarize,  # noqa: E402
                    summarize_runs, with_settings)
from systems import (OS_HOME, REPO, SHOAL_BIN, TMP, HttpError, OpenSearch,  # noqa: E402
                     Shoal, dir_bytes, log, make)

RESULTS = os.path.join(BENCH, "results")
SCENARIOS = ["ingest-1node", "ingest-replicated", "search", "footprint", "codecs", "recovery", "rolling-restart",
             "snapshots"]
PORTS = {"shoal": 9400, "opensearch": 9270}


def build(args):
    if args.no_build:
        return
    log("cargo build --release -p shoal -p shoal-bench")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "shoal", "-p", "shoal-bench"], cwd=REPO, check=True)


def machine_info():
    load = os.getloadavg()
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = None
    st = os.stat(SHOAL_BIN) if os.path.exists(SHOAL_BIN) else None
    binary = {"path": os.path.relpath(SHOAL_BIN, REPO), "bytes": st.st_size if st else None,
              "built": dt.datetime.fromtimestamp(st.st_mtime, dt.timezone.utc).isoformat() if st else None}
    return {"cores": os.cpu_count(), "mem_bytes": mem, "kernel": platform.release(), "shoal_binary": binary,
            "loadavg_at_start": [round(x, 2) for x in load], "shoal_commit": commit}


class Ctx:
    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        self.runs = args.runs or (1 if args.quick else 3)
        self.warmup = 0 if args.quick else 1
        self.systems = [s for s in args.systems.split(",") if s]
        self.debian_docs = args.docs or (2000 if args.quick else None)
        self.log_docs = 2000 if args.quick else 200_000
        self.started = {}
        self.forcemerge_retries = []

    def system(self, name):
        """Start (once per scenario) and return a running system."""
        if name not in self.started:
            s = make(name, port=PORTS[name])
            log(f"starting {s.label} on {s.url}")
            s.start(fresh=True)
            log(f"{s.label}: green after {s.time_to_green:.2f}s")
            self.started[name] = s
        return self.started[name]

    def stop_all(self):
        for s in self.started.values():
            try:
                s.stop()
            except Exception as e:  # noqa: BLE001
                log(f"stopping {s.name}: {e}")
        self.started = {}


# ---------------------------------------------------------------- ingest


def ingest_once(ctx, system, index, body, corpus, clients, max_docs=None, repeat=1, force_merge=True):
    system.recreate_index(index, body)
    time.sleep(0.3)
    cpu0 = system.cpu_seconds()
    t0 = time.monotonic()
    args = ["bulk", "--url", system.url, "--index", index, "--file", corpus, "--clients", clients,
            "--docs-per-bulk", 500, "--repeat", repeat]
    if max_docs:
        args += ["--max-docs", max_docs]
    out = bench_cmd(*args)
    wall = time.monotonic() - t0
    cpu1 = system.cpu_seconds()
    if out["failed_items"] or out["failed_requests"]:
        raise RuntimeError(f"{system.name}: bulk errors: {out['failed_items']} items, "
                           f"{out['failed_requests']} requests; sample: {out['error_sample']}")
    rss_after = system.rss()
    system.req("POST", f"/{index}/_refresh")
    merged_bytes, segments = merge_work(system, index)
    fm = None
    store = docs = None
    if force_merge:
        t1 = time.monotonic()
        for attempt in range(5):
            try:
                system.req("POST", f"/{index}/_forcemerge?max_num_segments=1", timeout=1800)
                break
            except HttpError as e:
                # Shoal: a force merge racing a background merge fails with HTTP 500
                # "The segments that were merged could not be found in the SegmentManager".
                if attempt == 4 or e.status != 500:
                    raise
                ctx.forcemerge_retries.append(f"{system.name}: {e}"[:300])
                time.sleep(1)
        fm = time.monotonic() - t1
        # OpenSearch's _forcemerge flushes (flush=true by default); Shoal's does not yet, and its
        # store.size counts the translog, so flush explicitly on both.
        system.req("POST", f"/{index}/_flush")
        system.req("POST", f"/{index}/_refresh")
        store_api, docs = system.store_bytes(index)
        # OpenSearch's _cat/indices store.size right after a flush is sometimes a fraction of the
        # real size; count the shard's index files on disk instead (same rule for both).
        store = system.index_disk_bytes(index)
    cpu2 = system.cpu_seconds()
    lat = out["bulk_latency_ms"]
    return {
        "docs": out["docs"], "docs_indexed_reported": docs, "seconds": out["seconds"],
        "docs_per_s": out["docs_per_s"], "bulk_p50_ms": lat.get("p50"), "bulk_p90_ms": lat.get("p90"),
        "bulk_p99_ms": lat.get("p99"), "cpu_s_bulk": round(cpu1 - cpu0, 3),
        "cpu_s_per_1k_docs": round((cpu1 - cpu0) / out["docs"] * 1000, 4),
        "cpu_s_incl_merge": round(cpu2 - cpu0, 3), "force_merge_s": fm and round(fm, 3),
        "store_bytes": store, "store_bytes_api": store_api if force_merge else None,
        "rss_after_ingest": rss_after, "peak_rss": system.peak_rss(),
        "merged_bytes": merged_bytes, "segments_after_ingest": segments,
        "merged_per_stored": store and round(merged_bytes / store, 2),
        "client_wall_s": round(wall, 3), "timeline": out["docs_per_second_timeline"],
    }


def merge_work(system, index):
    """Bytes the background merges wrote during the ingest, and the segments left after it."""
    stats = system.req("GET", f"/{index}/_stats/merge,segments")["indices"][index]["primaries"]
    return stats["merges"]["total_size_in_bytes"], stats["segments"]["count"]


def raw_once(ctx, corpus, body, codec="default", level=None, max_docs=None, repeat=1):
    path = os.path.join(TMP, "raw-mapping.json")
    os.makedirs(TMP, exist_ok=True)
    with open(path, "w") as f:
        json.dump(body, f)
    args = ["raw-tantivy", "--file", corpus, "--mapping", path, "--codec", codec, "--repeat", repeat,
            "--force-merge"]
    if level:
        args += ["--level", level]
    if max_docs:
        args += ["--max-docs", max_docs]
    out = bench_cmd(*args)
    return {"docs": out["docs"], "docs_per_s": out["docs_per_s"], "seconds": out["seconds"],
            "store_bytes": out["store_bytes_merged"],
            "parse_only_docs_per_s_1thread": out["parse_only_docs_per_s_1thread"]}


INGEST_KEYS = ["docs_per_s", "bulk_p50_ms", "bulk_p90_ms", "bulk_p99_ms", "cpu_s_per_1k_docs", "cpu_s_bulk",
               "store_bytes", "rss_after_ingest", "peak_rss", "force_merge_s", "merged_bytes",
               "segments_after_ingest", "merged_per_stored"]


def scenario_ingest_1node(ctx):
    body = load_index_body("debian")
    corpus = prep.DEBIAN
    repeat = 1 if ctx.quick else ctx.args.repeat
    client_counts = [2] if ctx.quick else [2, 8]
    result = {"config": {"corpus": "debian", "repeat": repeat, "max_docs": ctx.debian_docs, "docs_per_bulk": 500,
                         "shards": 1, "replicas": 0, "clients": client_counts, "runs": ctx.runs,
                         "warmup_runs": ctx.warmup, "ids": "explicit", "index_body": body},
              "by_clients": {}}
    order = ctx.systems + ["raw-tantivy"]
    for clients in client_counts:
        per = {name: [] for name in order}
        for r in range(ctx.warmup + ctx.runs):
            for name in order:
                tag = "warm-up" if r < ctx.warmup else f"run {r - ctx.warmup + 1}"
                if name == "raw-tantivy":
                    if clients != client_counts[0]:
                        continue  # in-process: no clients; measured once per round
                    out = raw_once(ctx, corpus, body, max_docs=ctx.debian_docs, repeat=repeat)
                else:
                    out = ingest_once(ctx, ctx.system(name), "debian", body, corpus, clients,
                                      max_docs=ctx.debian_docs, repeat=repeat)
                    ctx.system(name).delete_index("debian")
                log(f"ingest clients={clients} {name} {tag}: {out['docs_per_s']:.0f} docs/s")
                if r >= ctx.warmup:
                    per[name].append(out)
        entry = {}
        for name in order:
            if per[name]:
                keys = INGEST_KEYS if name != "raw-tantivy" else ["docs_per_s", "store_bytes",
                                                                    "parse_only_docs_per_s_1thread"]
                entry[name] = {"runs": per[name], "summary": summarize_runs(per[name], keys)}
        result["by_clients"][str(clients)] = entry
    raw = result["by_clients"][str(client_counts[0])].get("raw-tantivy")
    if raw:
        result["raw_tantivy"] = raw
        for c in client_counts:
            e = result["by_clients"][str(c)]
            e.pop("raw-tantivy", None)
            if "shoal" in e:
                e["shoal_fraction_of_raw"] = round(
                    e["shoal"]["summary"]["docs_per_s"]["median"] / raw["summary"]["docs_per_s"]["median"], 3)
    return result


def scenario_codecs(ctx):
    base = load_index_body("debian")
    corpus = prep.DEBIAN
    configs = []
    if "shoal" in ctx.systems:
        shoal_codecs = [("default", None), ("best_compression", None)]
        levels = [3] if ctx.quick else [1, 3, 6]
        shoal_codecs += [(c, lvl) for c in ("zstd", "zstd_no_dict") for lvl in levels]
        configs += [("shoal", c, lvl) for c, lvl in shoal_codecs]
    if "opensearch" in ctx.systems:
        configs += [("opensearch", c, None) for c in ("default", "best_compression")]
    per = {}
    for r in range(ctx.warmup + ctx.runs):
        for name, codec, level in configs:
            if r < ctx.warmup and codec != "default":
                continue  # one warm-up per system is enough
            settings = {"codec": codec}
            if level:
                settings["codec.compression_level"] = level
            body = with_settings(base, **settings)
            out = ingest_once(ctx, ctx.system(name), "codecs", body, corpus, 2, max_docs=ctx.debian_docs,
                              repeat=1 if ctx.quick else ctx.args.repeat)
            ctx.system(name).delete_index("codecs")
            key = f"{name}:{codec}" + (f":{level}" if level else "")
            log(f"codecs {key} {'warm-up' if r < ctx.warmup else f'run {r - ctx.warmup + 1}'}: "
                f"{out['docs_per_s']:.0f} docs/s, store {out['store_bytes'] / 1e6:.1f} MB")
            if r >= ctx.warmup:
                per.setdefault(key, []).append(out)
    raw = raw_once(ctx, corpus, base, max_docs=ctx.debian_docs, repeat=1 if ctx.quick else ctx.args.repeat)
    return {"config": {"corpus": "debian", "max_docs": ctx.debian_docs, "clients": 2, "runs": ctx.runs,
                       "repeat": 1 if ctx.quick else ctx.args.repeat,
                       "corpus_bytes": os.path.getsize(corpus)},
            "codecs": {k: {"runs": v, "summary": summarize_runs(v, ["docs_per_s", "store_bytes", "cpu_s_per_1k_docs"])}
                       for k, v in per.items()},
            "raw_tantivy_default": raw}


# ---------------------------------------------------------------- footprint


def scenario_footprint(ctx):
    body = load_index_body("debian")
    per = {name: [] for name in ctx.systems}
    for r in range(ctx.runs):
        for name in ctx.systems:
            s = make(name, port=PORTS[name])
            try:
                ttg = s.start(fresh=True)
                time.sleep(1 if ctx.quick else 5)
                idle = s.rss()
                idle_cpu = s.cpu_seconds()
                out = ingest_once(ctx, s, "debian", body, prep.DEBIAN, 2, max_docs=ctx.debian_docs)
                time.sleep(1 if ctx.quick else 3)
                row = {"time_to_green_s": round(ttg, 3), "rss_idle": idle, "cpu_s_start_to_idle": idle_cpu,
                       "rss_after_ingest": out["rss_after_ingest"], "rss_after_merge": s.rss(),
                       "peak_rss": s.peak_rss(), "docs": out["docs"], "store_bytes": out["store_bytes"]}
            finally:
                s.stop()
            log(f"footprint {name} run {r + 1}: green {row['time_to_green_s']:.2f}s, idle RSS "
                f"{row['rss_idle'] / 2**20:.0f} MiB, after ingest {row['rss_after_ingest'] / 2**20:.0f} MiB")
            per[name].append(row)
    result = {"config": {"runs": ctx.runs, "max_docs": ctx.debian_docs, "os_heap": os.environ.get("OS_HEAP", "512m")},
              "systems": {}}
    for name, runs in per.items():
        result["systems"][name] = {"runs": runs, "summary": summarize_runs(
            runs, ["time_to_green_s", "rss_idle", "rss_after_ingest", "rss_after_merge", "peak_rss"])}
    if "shoal" in per:
        stripped = os.path.join(TMP, "shoal.stripped")
        shutil.copy(SHOAL_BIN, stripped)
        subprocess.run(["strip", stripped], check=False)
        result["systems"]["shoal"]["binary_bytes"] = os.path.getsize(SHOAL_BIN)
        result["systems"]["shoal"]["binary_bytes_stripped"] = os.path.getsize(stripped)
    if "opensearch" in per:
        result["systems"]["opensearch"]["binary_bytes"] = dir_bytes(OS_HOME)
        result["systems"]["opensearch"]["binary_note"] = "integ-test-zip install dir, JDK not included"
    return result


# ---------------------------------------------------------------- search


def scenario_search(ctx):
    queries_path = prep.QUERIES
    queries = json.load(open(queries_path))
    if ctx.quick:
        queries = queries[:35]
        queries_path = os.path.join(TMP, "queries-quick.json")
        os.makedirs(TMP, exist_ok=True)
        json.dump(queries, open(queries_path, "w"))
    duration = 3 if ctx.quick else ctx.args.search_duration
    rate = ctx.args.rate or (20 if ctx.quick else 100)
    result = {"config": {"debian_docs": ctx.debian_docs, "log_docs": ctx.log_docs, "queries": len(queries),
                         "concurrency": 3, "open_loop_rate": rate, "duration_s": duration, "runs": ctx.runs,
                         "force_merged": True},
              "systems": {}, "notes": []}
    available = []
    for name in ctx.systems:
        s = ctx.system(name)
        for index, corpus, docs in (("debian", prep.DEBIAN, ctx.debian_docs), ("logs", prep.LOGS, ctx.log_docs)):
            ingest_once(ctx, s, index, load_index_body(index), corpus, 2, max_docs=docs)
        check = bench_cmd("search", "--url", s.url, "--queries", queries_path, "--check")
        bad = [c for c in check["results"] if c["status"] != 200]
        result["systems"][name] = {"check": check["results"], "failed_queries": len(bad)}
        if bad:
            kinds = sorted({c["type"] for c in bad})
            note = (f"{s.label}: {len(bad)}/{len(queries)} queries failed ({', '.join(kinds)}); "
                    f"first error: {bad[0].get('error', '')[:300]}")
            result["notes"].append(note)
            log(note)
        if len(bad) < len(queries):
            available.append(name)
    # equal hit counts
    if len(available) == 2:
        a, b = (result["systems"][n]["check"] for n in available)
        mism = [{"i": x["i"], "type": x["type"], available[0]: x.get("total"), available[1]: y.get("total")}
                for x, y in zip(a, b) if x.get("total") != y.get("total")]
        agg_mism = [x["i"] for x, y in zip(a, b) if x.get("status") == 200 and x.get("aggs") != y.get("aggs")]
        result["hit_count_check"] = {"compared": len(a), "total_mismatches": len(mism),
                                     "mismatches": mism[:20], "agg_mismatches": len(agg_mism)}
        log(f"hit counts: {len(a) - len(mism)}/{len(a)} equal; aggregations equal for "
            f"{len(a) - len(agg_mism)}/{len(a)}")
    for r in range(ctx.warmup + ctx.runs):
        for name in available:
            s = ctx.system(name)
            if r < ctx.warmup:
                bench_cmd("search", "--url", s.url, "--queries", queries_path, "--concurrency", 3,
                          "--duration", duration)
                continue
            cpu0 = s.cpu_seconds()
            closed = bench_cmd("search", "--url", s.url, "--queries", queries_path, "--concurrency", 3,
                               "--duration", duration)
            cpu1 = s.cpu_seconds()
            opened = bench_cmd("search", "--url", s.url, "--queries", queries_path, "--rate", rate,
                               "--duration", duration)
            closed["cpu_s"] = round(cpu1 - cpu0, 3)
            result["systems"][name].setdefault("runs", []).append({"closed": closed, "open": opened})
            log(f"search {name} run {r - ctx.warmup + 1}: closed {closed['qps']:.0f} qps p99 "
                f"{closed['latency_ms'].get('p99')} ms; open@{rate} p99 {opened['latency_ms'].get('p99')} ms")
    for name in available:
        runs = result["systems"][name].get("runs", [])
        summary = {}
        for mode in ("closed", "open"):
            kinds = sorted({k for run in runs for k in run[mode]["per_type"]})
            summary[mode] = {"all": {
                "qps": summarize([run[mode]["qps"] for run in runs]),
                **{p: summarize([run[mode]["latency_ms"].get(p) for run in runs]) for p in ("p50", "p90", "p99")}}}
            for k in kinds:
                rows = [run[mode]["per_type"].get(k, {}) for run in runs]
                summary[mode][k] = {"qps": summarize([x.get("qps") for x in rows]),
                                    **{p: summarize([x.get("latency_ms", {}).get(p) for x in rows])
                                       for p in ("p50", "p90", "p99")},
                                    "errors": sum(x.get("errors", 0) for x in rows)}
        result["systems"][name]["summary"] = summary
    return result


# ---------------------------------------------------------------- multi-node


def measure_copy_limits(size_bytes):
    """The machine's own file-copy and loopback bandwidth, measured now."""
    os.makedirs(TMP, exist_ok=True)
    src, dst = os.path.join(TMP, "copy-src.bin"), os.path.join(TMP, "copy-dst.bin")
    block = os.urandom(1 << 20)
    with open(src, "wb") as f:
        for _ in range(size_bytes >> 20):
            f.write(block)
        os.fsync(f.fileno())
    t = time.monotonic()
    shutil.copyfile(src, dst)
    fd = os.open(dst, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    copy_s = time.monotonic() - t
    os.remove(src)
    os.remove(dst)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    got = [0]

    def sink():
        c, _ = srv.accept()
        while True:
            b = c.recv(1 << 20)
            if not b:
                break
            got[0] += len(b)
        c.close()

    th = threading.Thread(target=sink)
    th.start()
    c = socket.create_connection(srv.getsockname())
    t = time.monotonic()
    for _ in range(size_bytes >> 20):
        c.sendall(block)
    c.close()
    th.join()
    net_s = time.monotonic() - t
    srv.close()
    mb = size_bytes / 1e6
    return {"file_copy_mb_per_s": round(mb / copy_s, 1), "loopback_mb_per_s": round(mb / net_s, 1),
            "bytes": size_bytes}


def load_recovery_shard(nodes, target, quick):
    body = with_settings(load_index_body("debian"), number_of_replicas=0)
    nodes[0].recreate_index("recov", body)
    loaded = 0
    while True:
        size, _ = nodes[0].store_bytes("recov")
        if size >= target:
            break
        out = bench_cmd("bulk", "--url", nodes[0].url, "--index", "recov", "--file", prep.DEBIAN,
                        "--clients", 2, "--skip", loaded, "--repeat", 1000,
                        "--max-docs", 2000 if quick else 127_332)
        loaded += out["docs"]
        nodes[0].req("POST", "/recov/_flush")
        log(f"recovery: loaded {loaded} docs, store {size / 1e6:.0f} MB")
    nodes[0].req("POST", "/recov/_forcemerge?max_num_segments=1", timeout=3600)
    nodes[0].req("POST", "/recov/_flush")
    size, docs = nodes[0].store_bytes("recov")
    return {"store_bytes": size, "docs": docs}


def recover_replica_once(nodes, value, fallback_bytes):
    """Adds a replica of `recov` and times it to green; `value` is the throttle (None: default)."""
    nodes[0].req("PUT", "/_cluster/settings", {"transient": {"indices.recovery.max_bytes_per_sec": value}})
    t = time.monotonic()
    nodes[0].req("PUT", "/recov/_settings", {"index": {"number_of_replicas": 1}})
    nodes[0].req("GET", "/_cluster/health/recov?wait_for_status=green&timeout=3600s", timeout=3700)
    secs = time.monotonic() - t
    rec = nodes[0].req("GET", "/recov/_recovery")
    shards = [s for s in rec["recov"]["shards"] if not s["primary"]]
    rs = shards[0] if shards else {}
    bytes_ = rs.get("index", {}).get("size", {}).get("recovered_in_bytes", fallback_bytes)
    nodes[0].req("PUT", "/recov/_settings", {"index": {"number_of_replicas": 0}})
    nodes[0].req("GET", "/_cluster/health/recov?wait_for_status=green&timeout=60s")
    time.sleep(2)
    return {"seconds": round(secs, 2), "bytes": bytes_, "mb_per_s": round(bytes_ / 1e6 / secs, 1),
            "recovery_type": rs.get("type"), "stage": rs.get("stage")}


THROTTLES = (("default (40mb)", None), ("off", "0b"))


def scenario_recovery(ctx):
    """A new replica of a >= --recovery-gb shard on a 2-node cluster, per system and throttle."""
    result = {"systems": {}}
    target = (20 << 20) if ctx.quick else int(ctx.args.recovery_gb * (1 << 30))
    result["machine_limits"] = measure_copy_limits(min(target, 1 << 30) if not ctx.quick else 64 << 20)
    log(f"machine limits: {result['machine_limits']}")
    for name in ctx.systems:
        nodes, _ = start_cluster(name, 2)
        entry = result["systems"][name] = {"runs": {}}
        try:
            entry["shard"] = load_recovery_shard(nodes, target, ctx.quick)
            for throttle, value in THROTTLES:
                runs = []
                for _ in range(ctx.runs):
                    row = recover_replica_once(nodes, value, entry["shard"]["store_bytes"])
                    log(f"recovery {name} throttle {throttle}: {row}")
                    runs.append(row)
                entry["runs"][throttle] = {"runs": runs, "summary": summarize_runs(runs, ["seconds", "mb_per_s"])}
        finally:
            for n in nodes:
                n.stop()
    return result


# ---------------------------------------------------------------- main

RUNNERS = {"ingest-1node": scenario_ingest_1node, "ingest-replicated": replicated.scenario,
           "search": scenario_search, "footprint": scenario_footprint, "codecs": scenario_codecs,
           "recovery": scenario_recovery,
           "rolling-restart": lambda ctx: rolling.scenario(ctx, start_cluster),
           "snapshots": lambda ctx: snapshots.scenario(ctx, load_recovery_shard, summarize_runs)}


def run_scenario(ctx, name):
    t0 = time.monotonic()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    log(f"=== {name} ({'quick' if ctx.quick else 'full'}, systems {','.join(ctx.systems)}, runs {ctx.runs})")
    try:
        result = RUNNERS[name](ctx)
        versions = {}
        for s in ctx.started.values():
            versions[s.name] = {"version": s.version(), "time_to_green_s": s.time_to_green}
    finally:
        ctx.stop_all()
    if ctx.forcemerge_retries:
        result.setdefault("notes", []).append(
            f"_forcemerge failed and was retried {len(ctx.forcemerge_retries)} time(s): "
            f"{ctx.forcemerge_retries[0]}")
        ctx.forcemerge_retries = []
    doc = {"scenario": name, "timestamp": stamp, "quick": ctx.quick, "systems": ctx.systems,
           "machine": machine_info(), "wall_s": round(time.monotonic() - t0, 1), "system_info": versions,
           **result}
    outdir = os.path.join(RESULTS, name + ("-quick" if ctx.quick else ""))
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, f"{stamp}.json"), "w") as f:
        json.dump(strip_timelines(doc) if not ctx.args.keep_timelines else doc, f, indent=1)
    md = report.render(doc)
    with open(os.path.join(outdir, "latest.md"), "w") as f:
        f.write(md)
    try:
        report.plot(doc, outdir)
    except Exception as e:  # noqa: BLE001
        log(f"plot failed: {e}")
    print(md, flush=True)
    log(f"=== {name} done in {doc['wall_s']} s -> {outdir}")
    return doc


def strip_timelines(doc):
    """Keep committed JSON small: the per-second timeline only in the first run of each list."""
    doc = json.loads(json.dumps(doc))

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "runs" and isinstance(v, list):
                    for run in v[1:]:
                        if isinstance(run, dict):
                            run.pop("timeline", None)
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(doc)
    return doc


def ensure_venv():
    """Re-run inside bench/.venv (matplotlib for the plots), creating it on first use. Without
    PyPI the suite still runs, without plots."""
    venv = os.path.join(BENCH, ".venv")
    py = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv) or os.environ.get("SHOAL_BENCH_NO_VENV"):
        return
    if not os.path.exists(py):
        log("creating bench/.venv (pip install -r bench/requirements.txt)")
        try:
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
            subprocess.run([py, "-m", "pip", "install", "-q", "-r", os.path.join(BENCH, "requirements.txt")],
                           check=True)
        except (subprocess.CalledProcessError, OSError) as e:
            log(f"no venv ({e}): running without plots")
            shutil.rmtree(venv, ignore_errors=True)
            return
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


def main():
    ensure_venv()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", choices=SCENARIOS + ["all", "readme"],
                    help="a scenario, all of them, or readme (copy the latest tables into README.md)")
    ap.add_argument("--quick", action="store_true", help="tiny corpus, 1 run, no warm-up (CI smoke)")
    ap.add_argument("--runs", type=int, help="measured runs per figure (default 3, quick 1)")
    ap.add_argument("--systems", default="shoal,opensearch")
    ap.add_argument("--docs", type=int, help="index at most this many Debian documents")
    ap.add_argument("--repeat", type=int, default=1, help="ingest: repeat the Debian corpus N times")
    ap.add_argument("--rate", type=float, help="search: open-loop target rate (default 100/s)")
    ap.add_argument("--search-duration", type=float, default=20)
    ap.add_argument("--recovery-gb", type=float, default=1.0)
    ap.add_argument("--snapshot-gb", type=float, default=0.5)
    ap.add_argument("--no-build", action="store_true", help="use the existing release binaries")
    ap.add_argument("--keep-timelines", action="store_true")
    args = ap.parse_args()
    if args.scenario == "readme":
        report.update_readme(BENCH, SCENARIOS)
        return 0
    ctx = Ctx(args)
    for s in ctx.systems:
        if s not in PORTS:
            ap.error(f"unknown system {s}")
    t0 = time.monotonic()
    build(args)
    prep.ensure()
    names = SCENARIOS if args.scenario == "all" else [args.scenario]
    failed = []
    for name in names:
        try:
            run_scenario(ctx, name)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            failed.append(name)
            ctx.stop_all()
    log(f"total {time.monotonic() - t0:.0f} s; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
