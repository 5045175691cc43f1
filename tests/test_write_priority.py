"""Write work runs at a lower CPU priority than refreshes, segment copies and searches, on the
threads of a real node: seen from /proc while bulks run, and every thread is back at its own
priority when they are done (Linux only; a process that may not restore priorities keeps
writes at the thread's priority)."""

import os
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")

WRITE_NICE = 10


def may_restore_priorities() -> bool:
    """What the node probes at start: raising a thread's priority back is allowed here."""
    try:
        own = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, 0, min(own + 1, 19))
        os.setpriority(os.PRIO_PROCESS, 0, own)
        return True
    except PermissionError:
        return False


def thread_nices(pid: int) -> dict[str, int]:
    """`tid name` → nice value of every thread of `pid` (field 19 of /proc/<pid>/task/<tid>/stat)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[f"{tid} {name}"] = int(fields[16])
    return out


def bulk_lines(round_: int, docs: int) -> list[str]:
    lines = []
    for i in range(docs):
        lines.append(f'{{"index":{{"_id":"{round_}-{i}"}}}}')
        lines.append(f'{{"round":{round_},"n":{i},"text":"priority test document number {i} of round {round_}"}}')
    return lines


def test_bulk_work_runs_lowered_and_every_thread_gets_its_priority_back(node_factory):
    if not may_restore_priorities():
        pytest.skip("this process may not restore thread priorities (no CAP_SYS_NICE or RLIMIT_NICE)")
    node = node_factory(name="priority-node")
    http = node.http()
    assert http.put("/prio", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}}).status_code == 200
    own = thread_nices(node.proc.pid)
    assert set(own.values()) == {0}, own

    seen, stop = {}, threading.Event()

    def sample():
        while not stop.is_set():
            for thread, nice in thread_nices(node.proc.pid).items():
                seen[thread] = max(seen.get(thread, 0), nice)
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        for r in range(20):
            resp = http.bulk(bulk_lines(r, 2000), path="/prio/_bulk")
            assert resp.status_code == 200 and not resp.json()["errors"], resp.text[:500]
            if any(nice == WRITE_NICE for nice in seen.values()):
                break
    finally:
        stop.set()
        sampler.join()
    lowered = {t for t, nice in seen.items() if nice > 0}
    assert lowered, "no thread ran a bulk at a lower priority"
    assert all(seen[t] == WRITE_NICE for t in lowered), {t: seen[t] for t in lowered}
    # The work of a write runs on pool threads (`shoal[<node>/generic][T#n]`); tantivy's
    # indexing threads and the async runtime keep their priority.
    assert all(t.split(" ", 1)[1].startswith("shoal[") for t in lowered), lowered

    # Searches and refreshes keep their priority, and the bulk threads got theirs back.
    assert http.post("/prio/_refresh").status_code == 200
    assert http.post("/prio/_search", {"query": {"match_all": {}}}).json()["hits"]["total"]["value"] > 0
    after = thread_nices(node.proc.pid)
    assert set(after.values()) == {0}, {t: n for t, n in after.items() if n}
