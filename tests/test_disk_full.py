"""A full disk never loses an acknowledged write (issue 13).

`path.data` is a small ext4 image on a loop device; a file allocated from outside fills it at a
chosen moment, as `../shared/reference/fault-injection.md` describes. Two writers index until the
node rejects them; every rejection must be a retryable status (503/429), never a 500. Space comes
back, writes resume without a restart, and after a restart (graceful, or kill -9 at full disk)
every acknowledged document is there.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid

import pytest

pytestmark = [pytest.mark.restart, pytest.mark.slow]

DISK_MB = 80
DOC_PAD = "x" * 400
INDEX = "disk-full"


def _can_loop_mount() -> str | None:
    if os.geteuid() != 0:
        return "needs root to loop-mount a small ext4 data path"
    for tool in ("mkfs.ext4", "mount", "umount", "fallocate"):
        if shutil.which(tool) is None:
            return f"needs {tool} to build a small data filesystem"
    return None


@pytest.fixture
def small_disk(tmp_path):
    """An 80 MB ext4 filesystem mounted at a fresh directory."""
    reason = _can_loop_mount()
    if reason:
        pytest.skip(reason)
    image = tmp_path / "disk.img"
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["truncate", "-s", f"{DISK_MB}M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True)
    done = subprocess.run(["mount", "-o", "loop", str(image), str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot loop-mount an ext4 image here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(mount, leave_bytes: int):
    """Allocates a file that leaves about `leave_bytes` free on the filesystem (none at all
    for 0: the last blocks are written one by one until the filesystem refuses)."""
    filler = mount / "filler"
    free = shutil.disk_usage(mount).free
    size = max(free - max(leave_bytes, 1024 * 1024), 0)
    if size:
        subprocess.run(["fallocate", "-l", str(size), str(filler)], check=True)
    if leave_bytes == 0:
        fd = os.open(filler, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
    return filler


class Writers:
    """Two bulk writers with their own id spaces; remember what was acknowledged."""

    def __init__(self, http, threads: int = 2, batch: int = 50, prefix: str = "w"):
        self.http = http
        self.prefix = prefix
        self.batch = batch
        self.acked: set[str] = set()
        self.failed_statuses: dict[int, int] = {}
        self.samples: dict[int, str] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.rejections = 0
        self.threads = [threading.Thread(target=self._run, args=(t,), daemon=True) for t in range(threads)]

    def _run(self, writer: int):
        n = 0
        while not self.stop.is_set():
            ids = [f"{self.prefix}{writer}-{n + i}" for i in range(self.batch)]
            n += self.batch
            lines = []
            for doc_id in ids:
                lines.append({"index": {"_index": INDEX, "_id": doc_id}})
                lines.append({"writer": writer, "n": doc_id, "pad": DOC_PAD})
            try:
                r = self.http.bulk(lines, timeout=30)
            except Exception:  # a timed-out request is of unknown outcome: neither acked nor lost
                continue
            with self.lock:
                self._record(r, ids)

    def _record(self, r, ids):
        if r.status_code != 200:
            self.failed_statuses[r.status_code] = self.failed_statuses.get(r.status_code, 0) + 1
            self.samples.setdefault(r.status_code, r.text[:500])
            self.rejections += 1
            return
        for doc_id, item in zip(ids, r.json()["items"]):
            status = item["index"]["status"]
            if status in (200, 201):
                self.acked.add(doc_id)
            else:
                self.failed_statuses[status] = self.failed_statuses.get(status, 0) + 1
                self.samples.setdefault(status, str(item["index"].get("error"))[:500])
                self.rejections += 1

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def run_until_rejected(self, rejections: int = 20, timeout: float = 120):
        self.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.rejections < rejections:
            time.sleep(0.1)
        self.finish()
        assert self.rejections >= rejections, f"the full disk never rejected a write ({len(self.acked)} acked)"


def _present_ids(http, preference: str | None = None) -> set[str]:
    http.post(f"/{INDEX}/_refresh")
    found: set[str] = set()
    params = {"scroll": "1m", **({"preference": preference} if preference else {})}
    r = http.post(f"/{INDEX}/_search", params=params, json={"size": 5000, "_source": False, "sort": ["_doc"]})
    assert r.status_code == 200, r.text
    body = r.json()
    while body["hits"]["hits"]:
        found.update(h["_id"] for h in body["hits"]["hits"])
        body = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": body["_scroll_id"]}).json()
    return found


def _wait_for_active_primary(http, timeout: str = "60s"):
    r = http.get(f"/_cluster/health/{INDEX}", params={"wait_for_status": "yellow", "timeout": timeout})
    assert r.status_code == 200 and r.json()["status"] in ("yellow", "green"), r.text


def _wait_for_write(http, timeout: float = 60) -> float:
    """Seconds until a single-document write is acknowledged again."""
    started = time.monotonic()
    last = None
    while time.monotonic() - started < timeout:
        r = http.put(f"/{INDEX}/_doc/probe-{uuid.uuid4().hex}", json={"probe": True}, timeout=30)
        if r.status_code in (200, 201):
            return time.monotonic() - started
        last = (r.status_code, r.text[:300])
        time.sleep(0.5)
    raise AssertionError(f"writes did not resume within {timeout}s after space returned; last answer {last}")


def _start_on_disk(node_factory, mount):
    node = node_factory({"path.data": str(mount / "data")})
    http = node.http()
    r = http.put(f"/{INDEX}", json={"settings": {"number_of_shards": 1, "number_of_replicas": 0,
                                                 "refresh_interval": "1s"}})
    assert r.status_code == 200, r.text
    return node, http


def _assert_every_acked_present(http, acked: set[str], when: str):
    missing = acked - _present_ids(http)
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged documents missing {when}, e.g. {sorted(missing)[:5]}"


def _assert_only_retryable_rejections(writers: Writers):
    unexpected = {s: n for s, n in writers.failed_statuses.items() if s not in (429, 503)}
    assert not unexpected, f"a full disk must answer 503 or 429, got {writers.failed_statuses}: {writers.samples}"


def _write_until_the_disk_is_full(node_factory, small_disk):
    """A node on the small disk, filled but for 3 MB, and two writers run until it rejects them
    (only ever with a retryable status)."""
    node, http = _start_on_disk(node_factory, small_disk)
    filler = _fill(small_disk, leave_bytes=3 * 1024 * 1024)
    writers = Writers(http)
    writers.run_until_rejected()
    _assert_only_retryable_rejections(writers)
    assert writers.acked, "nothing was acknowledged before the disk filled"
    return node, http, filler, writers


def test_full_disk_rejects_writes_then_resumes_when_space_returns_and_keeps_every_ack(node_factory, small_disk):
    node, http, filler, writers = _write_until_the_disk_is_full(node_factory, small_disk)
    # The cluster state still takes changes on the full disk (the raft reserve), so the node
    # stays cluster manager and metadata changes do not fail with not_cluster_manager.
    r = http.put("/_cluster/settings", json={"transient": {"cluster.routing.allocation.enable": "all"}})
    assert r.status_code == 200, r.text

    filler.unlink()
    waited = _wait_for_write(http)
    print(f"acked {len(writers.acked)} before the disk filled; rejections {writers.failed_statuses}; "
          f"writes resumed {waited:.1f}s after space returned")
    more = Writers(http, threads=1, prefix="after")
    more.start()
    time.sleep(2)
    more.finish()
    assert more.acked and not more.failed_statuses, more.failed_statuses
    acked = writers.acked | more.acked
    _assert_every_acked_present(http, acked, "after space returned (no restart)")

    node.restart()
    _assert_every_acked_present(http, acked, "after a graceful restart")


def test_kill_at_full_disk_keeps_every_acknowledged_write(node_factory, small_disk):
    node, http, filler, writers = _write_until_the_disk_is_full(node_factory, small_disk)
    node.kill9()
    filler.unlink()
    node.start()
    # The copy may have been failed before the kill: after the restart it is reassigned and
    # opened again, and reads wait for it like a client would wait for yellow.
    _wait_for_active_primary(http)
    _assert_every_acked_present(http, writers.acked, "after kill -9 at full disk")
    _wait_for_write(http)


def test_node_starts_on_a_full_disk_and_serves_reads(node_factory, small_disk):
    node, http = _start_on_disk(node_factory, small_disk)
    lines = []
    for i in range(200):
        lines.append({"index": {"_index": INDEX, "_id": str(i)}})
        lines.append({"n": i, "pad": DOC_PAD})
    r = http.bulk(lines, params={"refresh": "true"})
    assert r.status_code == 200 and not r.json()["errors"], r.text
    http.post(f"/{INDEX}/_flush")
    node.stop()

    filler = _fill(small_disk, leave_bytes=0)
    try:
        node.start()
        assert http.get(f"/{INDEX}/_count").json()["count"] == 200
        assert http.get(f"/{INDEX}/_doc/7").json()["_source"]["n"] == 7
    finally:
        filler.unlink()
    _wait_for_write(http)


@pytest.mark.cluster
def test_primary_on_a_full_disk_fails_over_to_its_replica_and_comes_back_when_space_returns(tmp_path, small_disk):
    """Node 0's data path is the small disk; its copy is the primary. The disk fills under load:
    the primary fails, the replica on node 1 takes over, writes go on (a rejection may only be
    a retryable 503/429 during the hand-over), and once space returns node 0 gets a copy again
    and the cluster is green with every acknowledged document on both copies."""
    from cluster import ShoalCluster

    cluster = ShoalCluster(tmp_path / "c", 2, settings={
        "cluster.routing.allocation.disk.threshold_enabled": "true",
        "cluster.info.update.interval": "10s",  # OpenSearch's minimum
        # Free-space watermarks sized for the 80 MB disk, so the host's own disk never crosses them.
        "cluster.routing.allocation.disk.watermark.low": "24mb",
        "cluster.routing.allocation.disk.watermark.high": "16mb",
        "cluster.routing.allocation.disk.watermark.flood_stage": "1mb",  # below what _fill leaves: the disk fills before the block
    })
    cluster.nodes[0].settings["path.data"] = str(small_disk / "data")
    with cluster:
        http = cluster.http(1)
        r = http.put(f"/{INDEX}", json={"settings": {
            "number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": "1s",
            "index.routing.allocation.require._name": "node-0"}})
        assert r.status_code == 200, r.text
        cluster.wait_for_status("green")
        r = http.put(f"/{INDEX}/_settings", json={"index": {
            "number_of_replicas": 1, "routing.allocation.require._name": None}})
        assert r.status_code == 200, r.text
        cluster.wait_for_agreement("green")

        filler = _fill(small_disk, leave_bytes=2 * 1024 * 1024)
        writers = Writers(http, threads=2)
        writers.start()
        deadline = time.monotonic() + 60
        primary_moved = False
        while time.monotonic() < deadline and not primary_moved:
            shards = http.get("/_cat/shards", params={"format": "json", "index": INDEX}).json()
            primary_moved = any(s["prirep"] == "p" and s["node"] == "node-1" and s["state"] == "STARTED"
                                for s in shards)
            time.sleep(0.5)
        time.sleep(3)  # writes keep going on the promoted primary
        writers.finish()
        assert primary_moved, f"the primary never moved off the full disk: {shards}"
        _assert_only_retryable_rejections(writers)
        assert writers.acked, "nothing was acknowledged"

        filler.unlink()
        cluster.wait_for_agreement("green", timeout=120)
        for preference in ("_primary", "_replica"):
            missing = writers.acked - _present_ids(http, preference)
            assert not missing, f"{len(missing)} acknowledged documents missing on the {preference} copy"
        print(f"acked {len(writers.acked)}; rejections {writers.failed_statuses}")
