"""Markdown tables and PNG plots of a scenario result. Every figure is `median (min–max)`;
ratios are Shoal ÷ OpenSearch of the medians."""

import os

import replicated
import rolling
import snapshots

LABEL = {"shoal": "Shoal", "shoal-remote": "Shoal (remote store)", "opensearch": "OpenSearch 2.18",
         "raw-tantivy": "raw tantivy"}


def n(v, kind):
    if v is None:
        return "–"
    if kind == "rate":
        return f"{v:,.0f}"
    if kind == "ms":
        return f"{v:,.1f}" if v >= 10 else f"{v:.2f}"
    if kind == "mb":
        return f"{v / 1e6:,.1f} MB"
    if kind == "mib":
        return f"{v / 2**20:,.0f} MiB"
    if kind == "s":
        return f"{v:.2f} s"
    if kind == "cpu":
        return f"{v:.3f}"
    if kind == "ratio":
        return f"{v:.2f}"
    if kind == "pct":
        return f"{v:.0f} %"
    return f"{v}"


def cell(summary, kind):
    if not summary:
        return "–"
    if summary.get("n", 1) > 1 and summary["min"] != summary["max"]:
        return f"{n(summary['median'], kind)} ({n(summary['min'], kind)}–{n(summary['max'], kind)})"
    return n(summary["median"], kind)


def med(summary):
    return summary["median"] if summary else None


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "–"
    r = a / b
    return f"{r:.2f}×" if r >= 0.1 else f"{r:.3f}×"


def header(doc):
    m = doc["machine"]
    lines = [f"# {doc['scenario']}{' (quick smoke)' if doc.get('quick') else ''}", "",
             f"Run {doc['timestamp']} on {m['cores']} cores / {m['mem_bytes'] / 2**30:.0f} GiB, kernel "
             f"{m['kernel']}, Shoal commit {m.get('shoal_commit')} (binary built "
             f"{(m.get('shoal_binary') or {}).get('built', '?')[:16]}), load average at start "
             f"{m['loadavg_at_start']}; wall time {doc['wall_s']} s. Figures: median (min–max) of "
             f"the measured runs; ratio = Shoal ÷ OpenSearch.", ""]
    for note in doc.get("notes", []):
        lines += [f"> {note}", ""]
    if doc.get("skipped"):
        lines += [f"Skipped: {doc['skipped']}", ""]
    return lines


def table(rows, head):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out + [""]


INGEST_ROWS = [("docs/s", "docs_per_s", "rate", "≥ 4× OpenSearch"),
               ("bulk p50 ms", "bulk_p50_ms", "ms", ""), ("bulk p90 ms", "bulk_p90_ms", "ms", ""),
               ("bulk p99 ms", "bulk_p99_ms", "ms", ""),
               ("CPU s / 1k docs", "cpu_s_per_1k_docs", "cpu", ""),
               ("store after force-merge", "store_bytes", "mb", ""),
               ("RSS after ingest", "rss_after_ingest", "mib", "≤ 1/10"),
               ("force-merge time", "force_merge_s", "s", ""),
               ("background merges ÷ final store (bytes)", "merged_per_stored", "ratio", ""),
               ("segments after ingest", "segments_after_ingest", "count", "")]


def render_ingest(doc):
    lines = header(doc)
    cfg = doc.get("config", {})
    lines += [f"Debian corpus ×{cfg.get('repeat')} (max docs {cfg.get('max_docs') or 'all'}), 500 docs/bulk, "
              f"1 shard, 0 replicas, explicit ids, {cfg.get('runs')} runs after {cfg.get('warmup_runs')} warm-up.", ""]
    rows = []
    for clients, e in doc["by_clients"].items():
        for label, key, kind, goal in INGEST_ROWS:
            s = e.get("shoal", {}).get("summary", {}).get(key)
            o = e.get("opensearch", {}).get("summary", {}).get(key)
            rows.append([label, clients, cell(s, kind), cell(o, kind), ratio(med(s), med(o)), goal])
    lines += table(rows, ["metric", "clients", "Shoal", "OpenSearch 2.18", "Shoal ÷ OS", "goal"])
    raw = doc.get("raw_tantivy")
    if raw:
        lines += [f"Raw tantivy limit (same parser, schema, `_source` codec and writer, in process, no HTTP, "
                  f"no translog): **{cell(raw['summary']['docs_per_s'], 'rate')} docs/s**, store after merge "
                  f"{cell(raw['summary']['store_bytes'], 'mb')}; Shoal's parser alone on one thread: "
                  f"{cell(raw['summary']['parse_only_docs_per_s_1thread'], 'rate')} docs/s.", ""]
        for clients, e in doc["by_clients"].items():
            if "shoal_fraction_of_raw" in e:
                lines.append(f"- Shoal at {clients} clients = **{e['shoal_fraction_of_raw'] * 100:.0f} %** of raw tantivy")
        lines.append("")
    return lines


def render_codecs(doc):
    lines = header(doc)
    rows = []
    os_sizes = {k.split(":")[1]: med(v["summary"]["store_bytes"]) for k, v in doc["codecs"].items()
                if k.startswith("opensearch:")}
    for key, v in doc["codecs"].items():
        parts = key.split(":")
        system, codec, level = parts[0], parts[1], parts[2] if len(parts) > 2 else ""
        s = v["summary"]
        ref = os_sizes.get(codec) if system == "shoal" else None
        rows.append([LABEL[system], codec, level, cell(s["store_bytes"], "mb"), cell(s["docs_per_s"], "rate"),
                     cell(s["cpu_s_per_1k_docs"], "cpu"), ratio(med(s["store_bytes"]), ref) if ref else "–"])
    lines += table(rows, ["system", "index.codec", "level", "store after force-merge", "docs/s (2 clients)",
                          "CPU s / 1k docs", "store ÷ OS same codec"])
    cb = doc.get("config", {}).get("corpus_bytes")
    if cb:
        rep = doc.get("config", {}).get("repeat") or 1
        lines += [f"Debian corpus ×{rep} ({cb * rep / 1e6:.1f} MB of NDJSON), 500 docs/bulk, 2 clients, "
                  f"store measured after `_forcemerge?max_num_segments=1` + `_flush`.", ""]
    return lines


def render_footprint(doc):
    lines = header(doc)
    sy = doc["systems"]
    rows = []
    for label, key, kind, goal in [("start to green", "time_to_green_s", "s", "≤ 1 s"),
                                   ("RSS idle", "rss_idle", "mib", "≤ 1/10"),
                                   ("RSS after ingest", "rss_after_ingest", "mib", "≤ 1/10"),
                                   ("RSS after force-merge", "rss_after_merge", "mib", ""),
                                   ("peak RSS", "peak_rss", "mib", "")]:
        s = sy.get("shoal", {}).get("summary", {}).get(key)
        o = sy.get("opensearch", {}).get("summary", {}).get(key)
        rows.append([label, cell(s, kind), cell(o, kind), ratio(med(s), med(o)), goal])
    sb = sy.get("shoal", {}).get("binary_bytes")
    ob = sy.get("opensearch", {}).get("binary_bytes")
    rows.append(["binary / install size", f"{n(sb, 'mb')} ({n(sy.get('shoal', {}).get('binary_bytes_stripped'), 'mb')} stripped)"
                 if sb else "–", f"{n(ob, 'mb')} (without JDK)" if ob else "–", ratio(sb, ob), ""])
    lines += table(rows, ["metric", "Shoal", "OpenSearch 2.18", "Shoal ÷ OS", "goal"])
    lines += [f"OpenSearch heap: -Xms/-Xmx {doc.get('config', {}).get('os_heap')}; ingest = Debian corpus, 2 clients.", ""]
    return lines


def render_search(doc):
    lines = header(doc)
    cfg = doc["config"]
    lines += [f"{cfg['queries']} seeded queries over `debian` and `logs` (both force-merged to 1 segment); closed loop "
              f"at concurrency {cfg['concurrency']} and open loop at {cfg['open_loop_rate']} req/s, "
              f"{cfg['duration_s']} s each, {cfg['runs']} runs.", ""]
    chk = doc.get("hit_count_check")
    if chk:
        lines += [f"Hit-count check: {chk['compared'] - chk['total_mismatches']}/{chk['compared']} queries return "
                  f"equal `hits.total`; aggregation buckets equal for {chk['compared'] - chk['agg_mismatches']}/"
                  f"{chk['compared']}.", ""]
    sy = doc["systems"]
    for mode, title in (("closed", "closed loop, concurrency 3"), ("open", f"open loop, {cfg['open_loop_rate']} req/s")):
        kinds = sorted({k for s in sy.values() for k in s.get("summary", {}).get(mode, {})})
        if not kinds:
            continue
        rows = []
        for k in ["all"] + [k for k in kinds if k != "all"]:
            s = sy.get("shoal", {}).get("summary", {}).get(mode, {}).get(k, {})
            o = sy.get("opensearch", {}).get("summary", {}).get(mode, {}).get(k, {})
            rows.append([k, cell(s.get("qps"), "rate"), cell(o.get("qps"), "rate"),
                         cell(s.get("p50"), "ms"), cell(o.get("p50"), "ms"),
                         cell(s.get("p99"), "ms"), cell(o.get("p99"), "ms"),
                         ratio(med(s.get("p99")), med(o.get("p99")))])
        lines += [f"**{title}** (latency in ms)", ""]
        lines += table(rows, ["query", "Shoal qps", "OS qps", "Shoal p50", "OS p50", "Shoal p99", "OS p99",
                              "p99 Shoal ÷ OS (goal ≤ 0.33)"])
    return lines


def render_replicated(doc):
    lines = header(doc)
    sy = doc.get("systems", {})
    # A remote-backed Shoal runs as its own cluster; its modes are Shoal's too.
    s_modes = {**sy.get("shoal", {}).get("modes", {}), **sy.get("shoal-remote", {}).get("modes", {})}
    o_modes = sy.get("opensearch", {}).get("modes", {})
    rows = []
    for mode in dict.fromkeys(list(s_modes) + list(o_modes)):
        s = s_modes.get(mode, {}).get("summary", {})
        o = o_modes.get(mode, {}).get("summary", {})
        rows.append([mode, cell(s.get("docs_per_s"), "rate"), cell(o.get("docs_per_s"), "rate"),
                     ratio(med(s.get("docs_per_s")), med(o.get("docs_per_s"))),
                     cell(s.get("cpu_s_per_1k_docs"), "cpu"), cell(o.get("cpu_s_per_1k_docs"), "cpu"),
                     cell(s.get("bulk_p99_ms"), "ms"), cell(o.get("bulk_p99_ms"), "ms"),
                     cell(s.get("other_over_busier_cpu"), "ratio"), cell(o.get("other_over_busier_cpu"), "ratio"),
                     cell(s.get("transport_mb_per_indexed_mb"), "ratio"),
                     cell(o.get("transport_mb_per_indexed_mb"), "ratio"),
                     cell(s.get("stolen_pct"), "pct"), cell(o.get("stolen_pct"), "pct")])
    if rows:
        lines += table(rows, ["mode (2 nodes, 1 shard)", "Shoal docs/s", "OS docs/s", "docs/s Shoal ÷ OS",
                              "Shoal CPU s / 1k docs", "OS CPU s / 1k docs", "Shoal bulk p99", "OS bulk p99",
                              "Shoal replica ÷ primary CPU", "OS replica ÷ primary CPU",
                              "Shoal node-to-node MB / indexed MB", "OS node-to-node MB / indexed MB",
                              "CPU stolen by the hypervisor % (Shoal runs)", "(OS runs)"])
    lines += visibility_table(s_modes, o_modes)
    for name, entry in sy.items():
        if "one_replica_over_none_docs_per_s" in entry:
            lines += [f"- {name}: docs/s with 1 replica ÷ with 0 replicas = "
                      f"{entry['one_replica_over_none_docs_per_s']}", ""]
        if "segment_over_document_docs_per_s" in entry:
            goals = name == "shoal"
            lines += [f"- {name}: docs/s SEGMENT ÷ DOCUMENT (1 replica) = "
                      f"{entry['segment_over_document_docs_per_s']}{' (goal ≥ 1.6)' if goals else ''}; "
                      f"SEGMENT with 1 replica ÷ 0 replicas = {entry.get('segment_over_no_replica_docs_per_s')}"
                      f"{' (goal ≥ 0.9)' if goals else ''}", ""]
            for key, what in (("segment_over_document_paired", "SEGMENT ÷ DOCUMENT (1 replica)"),
                              ("segment_over_no_replica_paired", "SEGMENT with 1 replica ÷ 0 replicas")):
                paired = entry.get(key)
                if paired:
                    lines += [f"- {name}: {what}, each round's runs (a few minutes apart) paired: "
                              f"{paired['per_round']}, median {paired['median']}", ""]
        if "segment_over_no_replica_own_cores_docs_per_s" in entry:
            lines += [f"- {name}: with each node on its own cores (the primary's node on half the CPUs, the "
                      f"replica's node and the client on the other half), SEGMENT with 1 replica ÷ 0 replicas = "
                      f"{entry['segment_over_no_replica_own_cores_docs_per_s']}", ""]
    return lines


VISIBILITY = (("under load", "visibility"), ("force merge started 3 s in", "visibility_with_force_merge"),
              ("during the force merge (+3 s)", "visibility_during_force_merge"),
              (f"steady {replicated.STEADY_DOCS_PER_S:,} docs/s", "visibility_steady"),
              (f"steady {replicated.STEADY_DOCS_PER_S:,} docs/s, force merge started 3 s in",
               "visibility_steady_with_force_merge"),
              ("during that force merge (+3 s)", "visibility_steady_during_force_merge"))


def visibility_table(s_modes, o_modes):
    """Replica visibility lag (write acknowledged → found by a search on the replica), which
    includes the 1 s refresh interval; goal for Shoal SEGMENT: p50/p99 ≤ 1,200 ms."""
    rows = []
    for mode in dict.fromkeys(list(s_modes) + list(o_modes)):
        for load, key in VISIBILITY:
            s = s_modes.get(mode, {}).get("summary", {}).get(key, {})
            o = o_modes.get(mode, {}).get("summary", {}).get(key, {})
            if not s and not o:
                continue
            keys = ("p50_ms", "p99_ms", "max_ms", "primary_p50_ms", "primary_p99_ms", "added_p50_ms", "added_p99_ms",
                    "sent_p99_ms")
            rows.append([mode, load] + [cell(x.get(k), "ms") for k in keys for x in (s, o)]
                        + [cell(s.get("never_seen"), ""), cell(o.get("never_seen"), "")])
    if not rows:
        return []
    return ["Replica visibility lag in ms: a probe document written to the primary's node every 0.1-0.3 s "
            "(random), timed until a search on the replica's node finds it (includes the 1 s refresh interval; "
            "goal for Shoal SEGMENT p50 and p99 ≤ 1,200); the same on the primary's node, and what "
            "replication adds (replica minus primary, per probe); and the p99 from the write's sending rather "
            "than its acknowledgment (a write acknowledged after a running refresh moves lag there).", ""] + table(
        rows, ["mode", "load", "Shoal p50", "OS p50", "Shoal p99", "OS p99", "Shoal max", "OS max",
               "Shoal primary p50", "OS primary p50", "Shoal primary p99", "OS primary p99",
               "Shoal added p50", "OS added p50", "Shoal added p99", "OS added p99",
               "Shoal p99 from sending", "OS p99 from sending", "Shoal never seen", "OS never seen"])


def render_recovery(doc):
    lines = header(doc)
    ml = doc.get("machine_limits")
    if ml:
        lines += [f"Machine limits measured in this run: file copy {ml['file_copy_mb_per_s']} MB/s, loopback TCP "
                  f"{ml['loopback_mb_per_s']} MB/s.", ""]
    sy = doc.get("systems", {})
    for name, entry in sy.items():
        if entry.get("shard"):
            lines += [f"{name} shard: {entry['shard']['store_bytes'] / 1e6:.0f} MB, {entry['shard']['docs']} docs.", ""]
    s_runs, o_runs = sy.get("shoal", {}).get("runs", {}), sy.get("opensearch", {}).get("runs", {})
    rows = []
    for t in dict.fromkeys(list(s_runs) + list(o_runs)):
        s = s_runs.get(t, {}).get("summary", {})
        o = o_runs.get(t, {}).get("summary", {})
        rows.append([t, cell(s.get("seconds"), "s"), cell(o.get("seconds"), "s"), cell(s.get("mb_per_s"), "rate"),
                     cell(o.get("mb_per_s"), "rate"), ratio(med(s.get("seconds")), med(o.get("seconds")))])
    if rows:
        lines += table(rows, ["recovery throttle", "Shoal time", "OS time", "Shoal MB/s", "OS MB/s",
                              "time Shoal ÷ OS"])
    return lines


RENDER = {"ingest-1node": render_ingest, "codecs": render_codecs, "footprint": render_footprint,
          "search": render_search, "ingest-replicated": render_replicated, "recovery": render_recovery,
          "rolling-restart": lambda doc: rolling.render(doc, header, table),
          "snapshots": lambda doc: snapshots.render(doc, header, table, cell, ratio, med)}


def render(doc):
    return "\n".join(RENDER[doc["scenario"]](doc)) + "\n"


# ------------------------------------------------------------------ plots

COLORS = {"shoal": "#1f77b4", "shoal-remote": "#9467bd", "opensearch": "#ff7f0e", "raw-tantivy": "#2ca02c"}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _bars(ax, groups, series, title, ylabel):
    """groups: x labels; series: {name: [summary or None per group]}."""
    width = 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        xs = [g + i * width for g in range(len(groups))]
        meds = [med(v) or 0 for v in values]
        lo = [max(0, (med(v) or 0) - v["min"]) if v else 0 for v in values]
        hi = [max(0, v["max"] - (med(v) or 0)) if v else 0 for v in values]
        ax.bar(xs, meds, width, yerr=[lo, hi], capsize=3, label=LABEL.get(name, name),
               color=COLORS.get(name))
    ax.set_xticks([g + width * (len(series) - 1) / 2 for g in range(len(groups))])
    ax.set_xticklabels(groups, fontsize=8, rotation=20, ha="right")
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)


def plot(doc, outdir):
    plt = _plt()
    sc = doc["scenario"]
    path = os.path.join(outdir, "latest.png")
    if sc == "ingest-1node":
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
        groups = [f"{c} clients" for c in doc["by_clients"]]
        systems = [s for s in ("shoal", "opensearch") if any(s in e for e in doc["by_clients"].values())]
        for ax, key, title, unit in ((axes[0], "docs_per_s", "bulk docs/s", "docs/s"),
                                     (axes[1], "bulk_p99_ms", "bulk p99 latency", "ms"),
                                     (axes[2], "cpu_s_per_1k_docs", "CPU seconds per 1k docs", "CPU s")):
            _bars(ax, groups, {s: [e.get(s, {}).get("summary", {}).get(key) for e in doc["by_clients"].values()]
                               for s in systems}, title, unit)
        raw = doc.get("raw_tantivy")
        if raw:
            axes[0].axhline(raw["summary"]["docs_per_s"]["median"], color=COLORS["raw-tantivy"], ls="--",
                            label="raw tantivy")
            axes[0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=80)
        # throughput over time, first measured run
        fig, ax = plt.subplots(figsize=(8, 3.5))
        for clients, e in doc["by_clients"].items():
            for s in systems:
                tl = (e.get(s, {}).get("runs") or [{}])[0].get("timeline")
                if tl:
                    ax.plot(range(len(tl)), tl, label=f"{LABEL[s]}, {clients} clients",
                            ls="-" if s == "shoal" else "--")
        ax.set_xlabel("s")
        ax.set_ylabel("docs/s")
        ax.set_title("indexing rate over time (first measured run)", fontsize=10)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "timeline.png"), dpi=80)
    elif sc == "codecs":
        keys = list(doc["codecs"])
        fig, axes = plt.subplots(1, 2, figsize=(14, 4.2))
        for ax, metric, title, scale, unit in ((axes[0], "store_bytes", "store after force-merge", 1e6, "MB"),
                                               (axes[1], "docs_per_s", "ingest docs/s (2 clients)", 1, "docs/s")):
            vals = [med(doc["codecs"][k]["summary"][metric]) / scale for k in keys]
            ax.bar(range(len(keys)), vals, color=[COLORS[k.split(":")[0]] for k in keys])
            ax.set_xticks(range(len(keys)))
            ax.set_xticklabels([k.replace("opensearch", "OS").replace("shoal:", "") for k in keys], rotation=45,
                               ha="right", fontsize=8)
            ax.set_title(title + " (blue Shoal, orange OpenSearch)", fontsize=10)
            ax.set_ylabel(unit)
        fig.tight_layout()
        fig.savefig(path, dpi=80)
    elif sc == "footprint":
        sy = doc["systems"]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        metrics = [("rss_idle", "idle"), ("rss_after_ingest", "after ingest"), ("peak_rss", "peak")]
        series = {s: [{k: v / 2**20 for k, v in sy[s]["summary"][m].items() if k != "n"} | {"n": 1}
                      if sy[s]["summary"].get(m) else None for m, _ in metrics] for s in sy}
        _bars(axes[0], [label for _, label in metrics], series, "RSS", "MiB")
        _bars(axes[1], ["start to green"], {s: [sy[s]["summary"]["time_to_green_s"]] for s in sy},
              "start to green", "s")
        fig.tight_layout()
        fig.savefig(path, dpi=80)
    elif sc == "search":
        sy = {k: v for k, v in doc["systems"].items() if v.get("summary")}
        if not sy:
            return
        fig, axes = plt.subplots(1, 2, figsize=(14, 4.2))
        kinds = sorted({k for s in sy.values() for k in s["summary"]["closed"]})
        for ax, mode in zip(axes, ("closed", "open")):
            _bars(ax, kinds, {s: [v["summary"][mode].get(k, {}).get("p99") for k in kinds] for s, v in sy.items()},
                  f"p99 latency, {'closed loop c=3' if mode == 'closed' else 'open loop'}", "ms")
            ax.set_yscale("log")
        fig.tight_layout()
        fig.savefig(path, dpi=80)
    elif sc == "ingest-replicated" and doc.get("systems"):
        fig, ax = plt.subplots(figsize=(7, 4))
        sy = doc["systems"]
        modes = list(dict.fromkeys(m for e in sy.values() for m in e.get("modes", {})))
        _bars(ax, modes, {n: [e["modes"].get(m, {}).get("summary", {}).get("docs_per_s") for m in modes]
                          for n, e in sy.items()}, "2 nodes, 1 shard: docs/s", "docs/s")
        fig.tight_layout()
        fig.savefig(path, dpi=80)
    elif sc == "recovery" and doc.get("systems"):
        fig, ax = plt.subplots(figsize=(6, 4))
        sy = doc["systems"]
        ts = list(dict.fromkeys(t for e in sy.values() for t in e.get("runs", {})))
        _bars(ax, ts, {n: [e["runs"].get(t, {}).get("summary", {}).get("mb_per_s") for t in ts]
                       for n, e in sy.items()}, "new replica: recovery MB/s", "MB/s")
        ml = doc.get("machine_limits", {})
        if ml:
            ax.axhline(ml["file_copy_mb_per_s"], color="gray", ls="--", label="file copy")
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=80)


def update_readme(bench_dir, order):
    """Re-render latest.md and the plots from each scenario's newest result file, and replace the
    part of README.md after '## Latest results' with them."""
    path = os.path.join(bench_dir, "README.md")
    text = open(path).read()
    marker = "## Latest results"
    head = text.split(marker)[0]
    parts = [marker, "", "Full comparison runs on this machine (regenerate with `bench/run.py readme`); plots are "
             "next to each table in `bench/results/<scenario>/`.", ""]
    import glob
    import json
    for name in order:
        outdir = os.path.join(bench_dir, "results", name)
        runs = sorted(glob.glob(os.path.join(outdir, "2*.json")))
        if not runs:
            continue
        doc = json.load(open(runs[-1]))
        md = os.path.join(outdir, "latest.md")
        with open(md, "w") as f:
            f.write(render(doc))
        try:
            plot(doc, outdir)
        except Exception as e:  # noqa: BLE001
            print(f"plot {name}: {e}")
        body = open(md).read().strip().split("\n")
        body[0] = "### " + body[0].lstrip("# ")
        parts += body + [""]
        if os.path.exists(os.path.join(outdir, "latest.png")):
            parts += [f"![{name}](results/{name}/latest.png)", ""]
    with open(path, "w") as f:
        f.write(head + "\n".join(parts) + "\n")
