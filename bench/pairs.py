"""Paired A/B of Shoal's replicated ingest on one 2-node cluster: DOCUMENT with 0 replicas and
SEGMENT with 1 replica (and, with `--document`, DOCUMENT with 1 replica), alternated run by run,
so each SEGMENT run is compared with the runs just around it (this machine's speed drifts by more
than the differences being measured). Prints each run's docs/s, bulk p50/p99, CPU per node and
the machine's idle share, then the per-round ratios and their median.

    python3 bench/pairs.py [--pairs 5] [--repeat 8] [--document]

Uses the release binary (`SHOAL_BIN` to pick another, e.g. to compare two builds) and the
Debian corpus of `prep.py`; the first pair is a warm-up and not counted.
"""

import argparse
import statistics

import prep
from common import load_index_body, start_cluster, with_settings
from replicated import machine_jiffies, paired_ratio, replicated_once

MODES = (("0 replicas", "DOCUMENT", 0), ("SEGMENT", "SEGMENT", 1))
DOCUMENT_1 = ("DOCUMENT 1 replica", "DOCUMENT", 1)


def idle_jiffies():
    idle, _, total = machine_jiffies()
    return idle, total


def run_pairs(pairs, repeat, modes):
    prep.ensure()
    nodes, _ = start_cluster("shoal", 2)
    base = load_index_body("debian")
    rows = {label: [] for label, _, _ in modes}
    try:
        for r in range(pairs + 1):
            for label, kind, replicas in modes:
                body = with_settings(base, number_of_replicas=replicas, **{"replication.type": kind})
                idle0, total0 = idle_jiffies()
                row = replicated_once(nodes, body, None, repeat)
                idle1, total1 = idle_jiffies()
                row["idle_pct"] = round(100 * (idle1 - idle0) / max(total1 - total0, 1), 1)
                print(f"{'warm-up' if r == 0 else f'pair {r}'} {label}: {row['docs_per_s']:.0f} docs/s, "
                      f"bulk p50/p99 {row['bulk_p50_ms']}/{row['bulk_p99_ms']} ms, CPU s primary "
                      f"{row['cpu_s_busier_node']} other {row['cpu_s_other_node']}, "
                      f"{row['cpu_s_per_1k_docs']} CPU s/1k docs, idle {row['idle_pct']} %, "
                      f"stolen {row['stolen_pct']} %", flush=True)
                if r > 0:
                    rows[label].append(row)
    finally:
        for node in nodes:
            node.stop()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=8, help="passes over the Debian corpus per run")
    ap.add_argument("--document", action="store_true", help="DOCUMENT with 1 replica in every round too")
    args = ap.parse_args()
    modes = MODES + ((DOCUMENT_1,) if args.document else ())
    rows = run_pairs(args.pairs, args.repeat, modes)
    for label, runs in rows.items():
        print(f"{label}: median {statistics.median(r['docs_per_s'] for r in runs):.0f} docs/s, "
              f"{statistics.median(r['cpu_s_per_1k_docs'] for r in runs)} CPU s/1k docs, "
              f"primary {statistics.median(r['cpu_s_busier_node'] for r in runs)} s, "
              f"other {statistics.median(r['cpu_s_other_node'] for r in runs)} s")
    print_ratio(rows, "SEGMENT", "0 replicas", 0.9)
    if args.document:
        print_ratio(rows, "SEGMENT", DOCUMENT_1[0], 1.6)


def print_ratio(rows, over, under, goal):
    ratio = paired_ratio(rows[under], rows[over])
    print(f"{over} ÷ {under} per round: {ratio['per_round']}, median {ratio['median']} (goal ≥ {goal})")


if __name__ == "__main__":
    main()
