#!/usr/bin/env python3
"""Cluster failover timings of real `shoal` processes on loopback (issue 4's figures).

    .venv/bin/python bench/failover.py [--rounds 10] [--bin target/release/shoal]

Per round, on one 3-node cluster (every node cluster-manager-eligible):
- `elect`: kill -9 the cluster manager; time until both survivors name the same new one;
  then the killed node is restarted and the cluster waits for 3 nodes again;
- `sigstop`: SIGSTOP a node that is not the cluster manager; time until the cluster manager's
  `_cluster/health` counts 2 nodes; then SIGCONT and wait for 3 again;
- `green`: once, a full stop and start of all three with a 6-shard index: time from process
  start to `_cluster/health` green.
Prints each sample and the medians; `--json FILE` writes them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from cluster import ShoalCluster  # noqa: E402


def wait_new_manager(c: ShoalCluster, survivors: list[int], old: str, timeout: float = 30) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            names = {c.cluster_manager(i) for i in survivors}
        except Exception:
            names = set()
        if len(names) == 1 and None not in names and old not in names:
            return time.monotonic() - started
        time.sleep(0.02)
    raise RuntimeError(f"no new cluster manager within {timeout}s\n{c.dump_logs()}")


def wait_node_count(c: ShoalCluster, i: int, n: int, timeout: float = 30) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if c.health(i)["number_of_nodes"] == n:
                return time.monotonic() - started
        except Exception:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"node {i} did not count {n} nodes within {timeout}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--bin", default=os.environ.get("SHOAL_BIN", "target/debug/shoal"))
    parser.add_argument("--json", help="write the samples here")
    args = parser.parse_args()
    os.environ["SHOAL_BIN"] = str(Path(args.bin).resolve())
    samples: dict[str, list[float]] = {"elect": [], "sigstop": [], "green": []}
    with tempfile.TemporaryDirectory() as tmp:
        c = ShoalCluster(Path(tmp), 3)
        c.start()
        try:
            c.wait_for_nodes(3)
            for round_no in range(args.rounds):
                old = c.cluster_manager()
                victim = c.index_of(old)
                survivors = [i for i in range(3) if i != victim]
                started = time.monotonic()
                c.kill(victim)
                wait_new_manager(c, survivors, old)
                samples["elect"].append(time.monotonic() - started)
                c.restart(victim)
                for i in range(3):
                    c.wait_for_nodes(3, timeout=60, i=i)

                manager = c.index_of(c.cluster_manager())
                stopped = next(i for i in range(3) if i != manager)
                started = time.monotonic()
                c.stop(stopped)
                wait_node_count(c, manager, 2)
                samples["sigstop"].append(time.monotonic() - started)
                c.cont(stopped)
                for i in range(3):
                    c.wait_for_nodes(3, timeout=60, i=i)
                print(f"round {round_no + 1}: elect {samples['elect'][-1]:.3f}s, "
                      f"sigstop removal {samples['sigstop'][-1]:.3f}s", flush=True)
            r = c.http(0).put("/green", {"settings": {"number_of_shards": 6, "number_of_replicas": 0}})
            assert r.status_code == 200, r.text
            c.wait_for_status("green")
            for node in c.nodes:
                node.stop()
            started = time.monotonic()
            c.start()
            # Every node must see the others and the elected cluster manager's green: a node
            # alone already answers from the state it replayed.
            for i in range(3):
                c.wait_for_nodes(3, timeout=120, i=i)
            c.wait_for_status("green", timeout=120, i=c.index_of(c.cluster_manager()))
            samples["green"].append(time.monotonic() - started)
            print(f"full restart, process start to green: {samples['green'][-1]:.3f}s", flush=True)
        except BaseException:
            print(c.dump_logs())
            raise
        finally:
            c.close()
    for name, values in samples.items():
        if values:
            print(f"{name}: median {statistics.median(values):.3f}s  min {min(values):.3f}s  "
                  f"max {max(values):.3f}s  n={len(values)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"binary": args.bin, "samples": samples}, indent=2))


if __name__ == "__main__":
    main()
