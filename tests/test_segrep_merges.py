"""Merged-segment pre-copy on real processes: a force merge on a segment-replicated primary
under continuous writes does not show up as replica lag when the merged segment is sent to the
replica before the primary commits the merge (`indices.replication.merges.warmer.enabled`, on by
default), and does when that is off (the merged segment then travels with the next checkpoint,
through the throttled replication pipeline)."""

from __future__ import annotations

import base64
import os
import threading
import time
from dataclasses import dataclass

import pytest

from cluster import ShoalCluster
from util import assert_error, wait_for

pytestmark = pytest.mark.cluster

REFRESH_S = 1.0
# Replication throttled so the merged segment (~15 MB) takes ~4 s to copy: the spike it makes
# without pre-copy stands well clear of the bound below.
THROTTLE = "4mb"
# Scheduling noise on a shared 2-core machine while the primary merges (a debug build merging
# ~15 MB uses a core for seconds): a checkpoint copy or a lag report can be late by a few
# hundred milliseconds. Half a second is above what was measured in the on-case (see the
# figures) and far below the off-case spike (~4 s).
TOLERANCE_S = 0.5
# Merged into one segment of ~15 MB before the load, well above the tiered policy's 2 MB floor:
# background merges of the writer's small segments merge those among themselves and leave it
# alone (a merge of one large segment with small ones scores worst).
PRELOAD_BULKS, PRELOAD_DOCS = 7, 5000
BLOB_BYTES = 300


@dataclass
class Lags:
    before_s: float
    during_s: float
    merge_s: float


def blob() -> dict:
    """Incompressible bytes, kept in `_source` only (the object is not indexed)."""
    return {"b": base64.b64encode(os.urandom(BLOB_BYTES)).decode()}


def set_cluster(c: ShoalCluster, settings: dict) -> None:
    r = c.http(0).put("/_cluster/settings", {"persistent": settings})
    assert r.status_code == 200, r.text


def create_and_preload(c: ShoalCluster, name: str) -> None:
    """~15 MB in one segment plus a few small ones, copied to the replica, and no background
    merge left to run: the baseline below then measures the load alone."""
    r = c.http(0).put(f"/{name}", {
        "settings": {"number_of_shards": 1, "number_of_replicas": 1, "index.replication.type": "SEGMENT",
                     "refresh_interval": f"{REFRESH_S:g}s"},
        "mappings": {"properties": {"n": {"type": "long"}, "blob": {"type": "object", "enabled": False}}}})
    assert r.status_code == 200, r.text
    c.wait_for_status("green")
    for bulk in range(PRELOAD_BULKS):
        index_bulk(c, name, range(bulk * PRELOAD_DOCS, (bulk + 1) * PRELOAD_DOCS))
    r = c.http(0).post(f"/{name}/_forcemerge", params={"max_num_segments": "1"})
    assert r.status_code == 200, r.text
    # Too few to make the merge policy act before the load starts.
    for bulk in range(2):
        start = PRELOAD_BULKS * PRELOAD_DOCS + bulk * 500
        index_bulk(c, name, range(start, start + 500))
    r = c.http(0).post(f"/{name}/_refresh")
    assert r.status_code == 200 and r.json()["_shards"]["failed"] == 0, r.text
    rows = segments(c, name)
    assert rows["p"] == rows["r"], rows


def index_bulk(c: ShoalCluster, name: str, ids: range) -> None:
    lines = []
    for n in ids:
        lines += [{"index": {"_id": f"p{n}"}}, {"n": n, "blob": blob()}]
    r = c.http(0).bulk(lines, path=f"/{name}/_bulk", params={"refresh": "true"})
    assert r.status_code == 200 and not r.json()["errors"], r.text[:500]


def segments(c: ShoalCluster, name: str) -> dict[str, list[str]]:
    rows = c.get(f"/_cat/segments/{name}", format="json", h="prirep,segment").json()
    by_copy: dict[str, list[str]] = {"p": [], "r": []}
    for row in rows:
        by_copy[row["prirep"]].append(row["segment"])
    return {copy: sorted(names) for copy, names in by_copy.items()}


def current_lag_ms(c: ShoalCluster, name: str) -> int:
    rows = c.get(f"/_cat/segment_replication/{name}", format="json", time="ms").json()
    assert len(rows) == 1, rows
    return int(rows[0]["current_lag"])


class Load:
    """A writer indexing small batches without pause and a sampler of the replica's lag (as
    its primary measures it: from a checkpoint's publication to the replica's report that it
    searches it), both until stopped."""

    def __init__(self, c: ShoalCluster, name: str):
        self.c, self.name = c, name
        self.stop = threading.Event()
        self.samples: list[tuple[float, int]] = []
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self.write, daemon=True),
                        threading.Thread(target=self.sample, daemon=True)]

    def write(self) -> None:
        n = 0
        while not self.stop.is_set():
            lines = []
            for _ in range(20):
                lines += [{"index": {"_id": f"w{n}"}}, {"n": n}]
                n += 1
            r = self.c.http(1).bulk(lines, path=f"/{self.name}/_bulk")
            if r.status_code != 200 or r.json()["errors"]:
                self.errors.append(r.text[:300])
            time.sleep(0.05)

    def sample(self) -> None:
        while not self.stop.is_set():
            self.samples.append((time.monotonic(), current_lag_ms(self.c, self.name)))
            time.sleep(0.1)

    def max_lag_s(self, start: float, end: float) -> float:
        return max((lag for at, lag in self.samples if start <= at <= end), default=0) / 1000

    def __enter__(self) -> "Load":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)


def merge_under_load(c: ShoalCluster, name: str, precopy: bool) -> Lags:
    set_cluster(c, {"indices.replication.merges.warmer.enabled": precopy,
                    "indices.replication.max_bytes_per_sec": None})
    create_and_preload(c, name)
    set_cluster(c, {"indices.replication.max_bytes_per_sec": THROTTLE})
    with Load(c, name) as load:
        baseline_start = time.monotonic()
        time.sleep(3)
        merge_start = time.monotonic()
        r = c.http(0).post(f"/{name}/_forcemerge", params={"max_num_segments": "1"})
        assert r.status_code == 200, r.text
        merge_end = time.monotonic()
        # The merged segment reaches the replica with the first checkpoint after the merge:
        # long enough for it to copy without pre-copy, then for the lag to come down.
        time.sleep(5)
        wait_for(lambda: current_lag_ms(c, name) < 2000, timeout=30, what="the replica caught up")
        end = time.monotonic()
    assert not load.errors, load.errors[:3]
    return Lags(before_s=load.max_lag_s(baseline_start, merge_start),
                during_s=load.max_lag_s(merge_start, end),
                merge_s=merge_end - merge_start)


def replica_received_bytes(c: ShoalCluster) -> int:
    """Merged-segment bytes every node received ahead of a checkpoint (each node reports its own)."""
    total = 0
    for i in range(len(c.nodes)):
        for node in c.get("/_nodes/stats", i).json()["nodes"].values():
            total += node["indices"]["merges"]["merged_segment_warmer"]["total_bytes_received"]
    return total


def test_a_force_merge_under_load_makes_no_lag_spike_with_pre_copy_and_one_without(tmp_path):
    with ShoalCluster(tmp_path, 2) as c:
        on = merge_under_load(c, "warm", precopy=True)
        received_on = replica_received_bytes(c)
        # Gone before the second run, so nothing of it is merged (and pre-copied) meanwhile.
        assert c.http(0).delete("/warm").status_code == 200
        off = merge_under_load(c, "cold", precopy=False)
        received_off = replica_received_bytes(c) - received_on
        print(f"\n[figure] replica lag with pre-copy: before {on.before_s:.2f}s, during the merge "
              f"{on.during_s:.2f}s (force merge took {on.merge_s:.2f}s; {received_on} bytes pre-copied)")
        print(f"[figure] replica lag without pre-copy: before {off.before_s:.2f}s, during the merge "
              f"{off.during_s:.2f}s (force merge took {off.merge_s:.2f}s; {received_off} bytes pre-copied)")
        assert on.during_s <= on.before_s + REFRESH_S + TOLERANCE_S, on
        assert off.during_s > off.before_s + REFRESH_S + TOLERANCE_S, off
        assert received_on > 10 << 20, received_on
        assert received_off == 0, received_off


def merge_stats(c: ShoalCluster, name: str) -> dict:
    shards = c.get(f"/{name}/_stats/merge", level="shards").json()["indices"][name]["shards"]["0"]
    return next(s["merges"] for s in shards if s["routing"]["primary"])


def store_bytes(c: ShoalCluster, name: str) -> dict[str, int]:
    rows = c.get(f"/_cat/shards/{name}", format="json", h="prirep,store", bytes="b").json()
    return {row["prirep"]: int(row["store"]) for row in rows}


def test_a_background_merge_reaches_the_replica_with_no_write_after_it(tmp_path):
    """tantivy swaps a finished merge in without a commit of its own; the primary's next
    scheduled refresh commits it, so the replica drops the merge's inputs (and their disk)
    without waiting for another write, and `_stats.merges` counts the merge."""
    with ShoalCluster(tmp_path, 2) as c:
        r = c.http(0).put("/bg", {"settings": {"number_of_shards": 1, "number_of_replicas": 1,
                                               "index.replication.type": "SEGMENT", "refresh_interval": "1s"}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green")
        # One document per refresh, one segment each: the eleventh puts the tiered policy over
        # its budget of ten floor-sized segments, and it merges ten after the last write's commit.
        for n in range(11):
            index_bulk(c, "bg", range(n, n + 1))
        wait_for(lambda: merge_stats(c, "bg")["total"] >= 1, timeout=30, what="a background merge")
        merges = merge_stats(c, "bg")
        assert merges["total_docs"] == 10 and merges["total_size_in_bytes"] > 0, merges

        def converged():
            rows = segments(c, "bg")
            return rows["p"] == rows["r"] and len(rows["p"]) == 2
        wait_for(converged, timeout=10, what="the replica searching the merged segment")
        sizes = store_bytes(c, "bg")
        assert sizes["r"] <= sizes["p"] * 1.05, sizes
        count = c.get("/bg/_count", preference="_replica").json()["count"]
        assert count == 11, count


@pytest.mark.parametrize("key,value", [
    ("indices.replication.merges.warmer.enabled", "maybe"),
    ("indices.replication.merges.warmer.max_bytes_per_sec", "fast"),
    ("indices.replication.merges.warmer.min_segment_size_threshold", "big"),
    ("indices.replication.merges.warmer.timeout", "soon"),
])
def test_a_bad_warmer_setting_is_refused_with_a_400(http, key, value):
    r = http.put("/_cluster/settings", {"persistent": {key: value}})
    err = assert_error(r, 400, "illegal_argument_exception")
    assert value in err["reason"], err
    stored = http.get("/_cluster/settings", params={"flat_settings": "true"}).json()["persistent"]
    assert key not in stored, stored


def test_warmer_settings_are_dynamic_with_shoal_defaults(http):
    defaults = http.get("/_cluster/settings", params={"flat_settings": "true", "include_defaults": "true"}).json()
    assert {k: v for k, v in defaults["defaults"].items() if ".merges.warmer." in k} == {
        "indices.replication.merges.warmer.enabled": "true",
        "indices.replication.merges.warmer.max_bytes_per_sec": "-1b",
        "indices.replication.merges.warmer.min_segment_size_threshold": "2mb",
        "indices.replication.merges.warmer.timeout": "15m",
    }
    values = {"indices.replication.merges.warmer.enabled": "false",
              "indices.replication.merges.warmer.max_bytes_per_sec": "20mb",
              "indices.replication.merges.warmer.min_segment_size_threshold": "0b",
              "indices.replication.merges.warmer.timeout": "30s"}
    r = http.put("/_cluster/settings", {"persistent": values})
    assert r.status_code == 200, r.text
    stored = http.get("/_cluster/settings", params={"flat_settings": "true"}).json()["persistent"]
    assert {k: stored[k] for k in values} == values
    r = http.put("/_cluster/settings", {"persistent": {k: None for k in values}})
    assert r.status_code == 200, r.text
