"""Crash test: two clients bulk-index with index.translog.durability=request while the node is killed with
SIGKILL at a random moment; after restart on the same data dir every acknowledged write must be there with its
latest acknowledged value, and nothing acknowledged as deleted may come back. Repeated for several rounds; every
round also re-checks the indices of all earlier rounds.

Shoal only in the suite (it starts its own node). The same code can be run by hand against any server that can be
killed and started by commands, e.g. a local OpenSearch:

    python tests/test_crash.py --url http://127.0.0.1:9250 \
        --kill 'kill -9 $(cat /tmp/os-logs/opensearch.pid)' --start 'scripts/opensearch-local start' --rounds 5

Seed: SHOAL_CRASH_SEED (printed on every run), rounds: SHOAL_CRASH_ROUNDS (default 5).
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time

import pytest
import requests

BULK_NEW = 40          # fresh documents per bulk
BULK_FIXED = 10        # updates of the thread's fixed ids per bulk
FIXED_IDS = 20         # fixed ids per thread
DELETE_EVERY = 3       # every 3rd bulk also deletes 5 earlier fresh docs
MAX_WRITE_SECONDS = 4.0


class Ledger:
    """What one client thread knows for sure (acknowledged) and what was in flight when the node died."""

    def __init__(self):
        self.acked: dict[str, dict | None] = {}      # id -> last acknowledged source, None = acknowledged delete
        self.inflight: dict[str, list] = {}          # id -> possible values from the unacknowledged bulk
        self.bulks = 0
        self.acked_ops = 0
        self.error: str | None = None


def writer(url: str, index: str, tid: int, stop: threading.Event, ledger: Ledger, rng: random.Random):
    s = requests.Session()
    fresh: list[str] = []
    counter = 0
    gen = 0
    while not stop.is_set():
        gen += 1
        ops: list[tuple[str, str, dict | None]] = []   # (action, id, source)
        for _ in range(BULK_NEW):
            counter += 1
            doc_id = f"t{tid}-{counter}"
            ops.append(("index", doc_id, {"tid": tid, "gen": gen, "n": counter}))
        for k in rng.sample(range(FIXED_IDS), BULK_FIXED):
            ops.append(("index", f"t{tid}-fixed-{k}", {"tid": tid, "gen": gen, "fixed": k}))
        if gen % DELETE_EVERY == 0 and len(fresh) > 10:
            for doc_id in rng.sample(fresh, 5):
                fresh.remove(doc_id)
                ops.append(("delete", doc_id, None))
        lines = []
        for action, doc_id, src in ops:
            lines.append(json.dumps({action: {"_index": index, "_id": doc_id}}))
            if src is not None:
                lines.append(json.dumps(src))
        body = "\n".join(lines) + "\n"
        for action, doc_id, src in ops:
            ledger.inflight.setdefault(doc_id, []).append(src)
        try:
            r = s.post(f"{url}/_bulk", data=body, headers={"Content-Type": "application/x-ndjson"}, timeout=30)
            res = r.json()
        except (requests.RequestException, ValueError):
            return  # node died: this bulk stays in flight
        if r.status_code != 200:
            ledger.error = f"bulk HTTP {r.status_code}: {r.text[:300]}"
            return
        for (action, doc_id, src), item in zip(ops, res["items"]):
            result = item[action]
            status = result.get("status")
            ok = status in (200, 201) or (action == "delete" and status == 404 and result.get("result") == "not_found")
            if not ok:
                # a failed item is not acknowledged: keep it as "maybe"
                continue
            ledger.acked[doc_id] = src
            ledger.inflight.pop(doc_id, None)
            ledger.acked_ops += 1
            if action == "index" and "fixed" not in src:
                fresh.append(doc_id)
        ledger.bulks += 1


def verify(url: str, index: str, ledgers: list[Ledger]) -> tuple[int, list[str]]:
    """Return (checked ids, problems)."""
    problems = []
    expected: dict[str, tuple[dict | None, list]] = {}
    for led in ledgers:
        for doc_id, src in led.acked.items():
            expected[doc_id] = (src, led.inflight.get(doc_id, []))
        for doc_id, maybes in led.inflight.items():
            if doc_id not in led.acked:
                expected[doc_id] = ("__absent__", maybes)
    ids = sorted(expected)
    s = requests.Session()
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        r = s.post(f"{url}/{index}/_mget", json={"ids": chunk}, timeout=60)
        if r.status_code != 200:
            return len(ids), [f"mget on {index} failed: HTTP {r.status_code} {r.text[:300]}"]
        for doc in r.json()["docs"]:
            doc_id = doc["_id"]
            acked, maybes = expected[doc_id]
            got = doc.get("_source") if doc.get("found") else None
            allowed = [None if acked == "__absent__" else acked] + list(maybes)
            if got not in allowed:
                problems.append(f"{index}/{doc_id}: found {got!r}, acknowledged {acked!r}, in flight {maybes!r}")
    return len(ids), problems


def wait_up(url: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(url + "/", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} not up after {timeout}s")


def wait_index_ready(url: str, index: str, timeout: float = 60) -> None:
    r = requests.get(f"{url}/_cluster/health/{index}", params={"wait_for_status": "yellow", "timeout": f"{int(timeout)}s"},
                     timeout=timeout + 10)
    assert r.status_code == 200, f"index {index} not ready after restart: {r.status_code} {r.text[:300]}"


def crash_rounds(url: str, kill, start, seed: int, rounds: int, log=print, time_budget: float = 600) -> None:
    rng = random.Random(seed)
    log(f"crash test: seed={seed} rounds={rounds} (rerun with SHOAL_CRASH_SEED={seed})")
    t0 = time.monotonic()
    history: list[tuple[str, list[Ledger]]] = []
    run_id = f"{int(time.time()) % 1000000}"
    total_acked = 0
    for rnd in range(rounds):
        if time.monotonic() - t0 > time_budget:
            raise AssertionError(f"crash test exceeded its time budget of {time_budget}s after {rnd} rounds")
        index = f"crash-{seed}-{run_id}-{rnd}"
        shards = 1 + rnd % 2
        r = requests.put(f"{url}/{index}", json={"settings": {"number_of_shards": shards, "number_of_replicas": 0,
                                                              "index.translog.durability": "request",
                                                              "refresh_interval": rng.choice(["1s", "-1", "200ms"])}},
                         timeout=60)
        assert r.status_code == 200, r.text
        ledgers = [Ledger(), Ledger()]
        stop = threading.Event()
        threads = [threading.Thread(target=writer, args=(url, index, t, stop, ledgers[t], random.Random(rng.random())),
                                    daemon=True) for t in range(2)]
        for t in threads:
            t.start()
        delay = rng.uniform(0.3, MAX_WRITE_SECONDS)
        time.sleep(delay)
        if rng.random() < 0.3:
            # sometimes flush while writing, so the crash hits after a commit too
            try:
                requests.post(f"{url}/{index}/_flush", timeout=30)
            except requests.RequestException:
                pass
            time.sleep(rng.uniform(0.0, 0.5))
        kill()
        stop.set()
        for t in threads:
            t.join(60)
            assert not t.is_alive(), "writer thread did not stop"
        for led in ledgers:
            assert led.error is None, led.error
        acked = sum(len(led.acked) for led in ledgers)
        total_acked += sum(led.acked_ops for led in ledgers)
        log(f"round {rnd}: killed after {delay:.2f}s, {sum(l.bulks for l in ledgers)} bulks acknowledged, "
            f"{acked} ids acknowledged, {sum(len(l.inflight) for l in ledgers)} ids in flight")
        start()
        wait_up(url)
        history.append((index, ledgers))
        for idx, leds in history:
            wait_index_ready(url, idx)
            checked, problems = verify(url, idx, leds)
            assert not problems, f"round {rnd}, index {idx} (seed {seed}): {len(problems)} problems, e.g.\n" + \
                "\n".join(problems[:20])
            log(f"  verified {idx}: {checked} ids ok")
        # the index accepts writes again
        r = requests.put(f"{url}/{index}/_doc/after-restart", json={"ok": True}, timeout=30)
        assert r.status_code == 201, r.text
        for led in ledgers:
            led.acked["after-restart"] = {"ok": True}
            break
    log(f"crash test passed: {rounds} rounds, {total_acked} acknowledged operations checked, "
        f"{time.monotonic() - t0:.1f}s")


@pytest.mark.crash
@pytest.mark.restart
@pytest.mark.slow
def test_kill9_during_bulk_loses_no_acknowledged_write(node_factory):
    seed = int(os.environ.get("SHOAL_CRASH_SEED", random.randrange(1 << 30)))
    rounds = int(os.environ.get("SHOAL_CRASH_ROUNDS", "5"))
    n = node_factory(name="crash-node")
    print(f"SHOAL_CRASH_SEED={seed}")
    try:
        crash_rounds(n.url, kill=n.kill9, start=n.start, seed=seed, rounds=rounds, time_budget=600)
    except BaseException:
        print(n.log_tail(150))
        raise


if __name__ == "__main__":
    import argparse
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--kill", required=True, help="shell command that kills the node with SIGKILL")
    p.add_argument("--start", required=True, help="shell command that starts the node again (may return early)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=int(os.environ.get("SHOAL_CRASH_SEED", random.randrange(1 << 30))))
    a = p.parse_args()
    crash_rounds(a.url.rstrip("/"), kill=lambda: subprocess.run(a.kill, shell=True, check=True),
                 start=lambda: subprocess.run(a.start, shell=True, check=True), seed=a.seed, rounds=a.rounds)
    sys.exit(0)
