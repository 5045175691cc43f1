"""The snapshot scenario: what a snapshot and a restore of a large shard cost, per system.

One node per system with `path.repo`, one shard of >= --snapshot-gb (the recovery scenario's
loader: Debian records repeated, force-merged to one segment), an `fs` repository on the same
disk. Each run takes a full snapshot, indexes 1 % more documents and takes a second snapshot
(incremental: only the new segment should go up), restores the full snapshot under a new name
and waits for green, then deletes the restored index and both snapshots (so the next run's
full snapshot uploads everything again). Reported: seconds and MB/s of the full snapshot, the
incremental snapshot's seconds and uploaded bytes, and the restore's seconds and MB/s.
"""

import json
import os
import shutil
import subprocess
import time

from systems import OS_USER, TMP, log, make

INDEX = "recov"
REPOSITORY = "bench"


# Both throttle snapshots (`max_snapshot_bytes_per_sec`, 40mb) and restores (recovery's 40mb)
# by default; both are measured with their defaults and with the throttles off.
THROTTLES_OFF = ("throttles off", {"max_snapshot_bytes_per_sec": "0", "max_restore_bytes_per_sec": "0"},
                 {"indices.recovery.max_bytes_per_sec": "0"})
MODES = {"shoal": [("defaults", {}, {}), THROTTLES_OFF],
         "opensearch": [("defaults", {}, {}), THROTTLES_OFF]}


def configure(node, repository_settings, cluster_settings):
    """Registers the repository again with `repository_settings` and sets `cluster_settings`
    (transient; `None` values reset)."""
    location = node.extra["path.repo"]
    node.req("PUT", f"/_snapshot/{REPOSITORY}", {"type": "fs", "settings": {"location": location,
                                                                             **repository_settings}})
    if cluster_settings:
        node.req("PUT", "/_cluster/settings", {"transient": cluster_settings})


def start_node(name):
    """One fresh node of `name` whose `path.repo` is an empty directory it may write."""
    repo = os.path.join(TMP, f"{name}-snapshot-repo")
    shutil.rmtree(repo, ignore_errors=True)
    os.makedirs(repo)
    if name == "opensearch":
        subprocess.run(["chown", "-R", f"{OS_USER}:", repo], check=False)
    ports = {"port": 9291, "transport": 9391} if name == "opensearch" else {"port": 9430}
    node = make(name, tag=f"{name}-snapshots", extra={"path.repo": repo}, **ports)
    node.start(fresh=True)
    return node


def snapshot(node, name):
    t = time.monotonic()
    out = node.req("PUT", f"/_snapshot/{REPOSITORY}/{name}?wait_for_completion=true", {"indices": INDEX},
                   timeout=3600)
    secs = time.monotonic() - t
    assert out["snapshot"]["state"] == "SUCCESS", out
    stats = node.req("GET", f"/_snapshot/{REPOSITORY}/{name}/_status")["snapshots"][0]["stats"]
    return secs, stats["incremental"]["size_in_bytes"], stats["total"]["size_in_bytes"]


def restore(node, name):
    t = time.monotonic()
    node.req("POST", f"/_snapshot/{REPOSITORY}/{name}/_restore?wait_for_completion=true",
             {"indices": INDEX, "rename_pattern": INDEX, "rename_replacement": "restored",
              "index_settings": {"index.number_of_replicas": 0}}, timeout=3600)
    node.req("GET", "/_cluster/health/restored?wait_for_status=green&timeout=3600s", timeout=3700)
    return time.monotonic() - t


def run_once(node, run, docs):
    """One full snapshot, one incremental, one restore; everything removed afterwards."""
    full, inc = f"full-{run}", f"inc-{run}"
    full_s, uploaded, total = snapshot(node, full)
    for k in range(max(docs // 100, 1) // 500 + 1):
        lines = []
        for j in range(500):
            lines += [{"index": {"_index": INDEX}}, {"package": f"added-{run}-{k}-{j}", "size": j,
                                                "description": "a document added after the full snapshot"}]
        body = ("\n".join(json.dumps(line) for line in lines) + "\n").encode()
        node.req("POST", "/_bulk", body, ndjson=True, timeout=600)
    node.req("POST", f"/{INDEX}/_flush")
    inc_s, inc_bytes, _ = snapshot(node, inc)
    restore_s = restore(node, full)
    node.req("DELETE", "/restored")
    node.req("DELETE", f"/_snapshot/{REPOSITORY}/{inc}", timeout=600)
    node.req("DELETE", f"/_snapshot/{REPOSITORY}/{full}", timeout=600)
    mb = total / 1e6
    return {"full_s": round(full_s, 2), "full_mb_per_s": round(mb / full_s, 1), "full_uploaded_bytes": uploaded,
            "incremental_s": round(inc_s, 2), "incremental_uploaded_bytes": inc_bytes,
            "restore_s": round(restore_s, 2), "restore_mb_per_s": round(mb / restore_s, 1)}


KEYS = ["full_s", "full_mb_per_s", "incremental_s", "incremental_uploaded_bytes", "restore_s", "restore_mb_per_s"]


def scenario(ctx, load_shard, summarize_runs):
    target = (20 << 20) if ctx.quick else int(ctx.args.snapshot_gb * (1 << 30))
    result = {"systems": {}, "notes": ["Both throttle snapshots and restores to 40 MB/s by default; "
                                       "'throttles off' sets max_snapshot_bytes_per_sec, max_restore_bytes_per_sec "
                                       "and indices.recovery.max_bytes_per_sec to 0."]}
    for name in ctx.systems:
        node = start_node(name)
        entry = result["systems"][name] = {"modes": {}}
        try:
            entry["shard"] = load_shard([node], target, ctx.quick)
            run = 0
            for mode, repository_settings, cluster_settings in MODES[name]:
                configure(node, repository_settings, cluster_settings)
                runs = []
                for r in range(ctx.warmup + ctx.runs):
                    run += 1
                    row = run_once(node, run, entry["shard"]["docs"])
                    log(f"snapshots {name} ({mode}): {row}")
                    if r >= ctx.warmup:
                        runs.append(row)
                entry["modes"][mode] = {"runs": runs, "summary": summarize_runs(runs, KEYS)}
        finally:
            node.stop()
    return result


def render(doc, header, table, cell, ratio, med):
    lines = header(doc)
    systems = doc.get("systems", {})
    for name, entry in systems.items():
        if entry.get("shard"):
            lines += [f"{name} shard: {entry['shard']['store_bytes'] / 1e6:.0f} MB, {entry['shard']['docs']} docs.", ""]
    shoal_modes = systems.get("shoal", {}).get("modes", {})
    os_modes = systems.get("opensearch", {}).get("modes", {})
    s, t = (shoal_modes.get(m, {}).get("summary", {}) for m in ("defaults", "throttles off"))
    o, u = (os_modes.get(m, {}).get("summary", {}) for m in ("defaults", "throttles off"))
    rows = []
    for key, label, unit in (("full_s", "full snapshot", "s"), ("full_mb_per_s", "full snapshot MB/s", "rate"),
                             ("incremental_s", "incremental snapshot (+1 % docs)", "s"),
                             ("incremental_uploaded_bytes", "incremental snapshot bytes uploaded", "mb"),
                             ("restore_s", "restore to green", "s"), ("restore_mb_per_s", "restore MB/s", "rate")):
        rows.append([label, cell(s.get(key), unit), cell(o.get(key), unit), ratio(med(s.get(key)), med(o.get(key))),
                     cell(t.get(key), unit), cell(u.get(key), unit), ratio(med(t.get(key)), med(u.get(key)))])
    lines += table(rows, ["", "Shoal defaults", "OS 2.18 defaults", "Shoal ÷ OS defaults", "Shoal throttles off",
                          "OS 2.18 throttles off", "Shoal ÷ OS throttles off"])
    return lines
