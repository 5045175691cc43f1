"""Bounded thread pools and backpressure: a full `write` queue answers 429 per bulk item,
monitoring stays answerable under write overload, nothing acknowledged is lost, and the
pools and indexing pressure are visible in `_cat/thread_pool` and `_nodes/stats`."""

import multiprocessing
import os
import threading
import time

import pytest
import requests

from conftest import NodeStartError

CLIENTS = 64
BULKS_PER_CLIENT = 4
DOCS_PER_BULK = 200
POOLS = ["generic", "get", "management", "search", "write"]


def bulk_body(client: int, bulk: int) -> str:
    lines = []
    for i in range(DOCS_PER_BULK):
        lines.append(f'{{"index":{{"_id":"{client}-{bulk}-{i}"}}}}')
        lines.append(f'{{"client":{client},"bulk":{bulk},"n":{i},"msg":"overload test document {i}"}}')
    return "\n".join(lines) + "\n"


def watch_health(url, stop, results):
    """Calls `_cluster/health` every 50 ms until `stop`; reports the statuses and latencies."""
    session = requests.Session()
    statuses, latencies = set(), []
    while not stop.is_set():
        started = time.monotonic()
        statuses.add(session.get(url + "/_cluster/health", timeout=30).status_code)
        latencies.append(time.monotonic() - started)
        time.sleep(0.05)
    results.put((statuses, latencies))


def test_write_overload_rejects_items_with_429_keeps_health_fast_and_loses_no_acknowledged_doc(node_factory):
    node = node_factory({"thread_pool.write.size": "1", "thread_pool.write.queue_size": "4"}, name="overload")
    http = node.http()
    index = "overload"
    assert http.put(f"/{index}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}}).status_code == 200

    acked, rejected, other_errors, server_errors = [], [], [], []
    rejection_reasons = set()
    lock = threading.Lock()

    def client(c: int):
        # The load generator yields the CPU first (Linux nice is per thread): the latency the
        # watcher measures is then the server's, not this process's 64 threads'.
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        session = node.http()
        for b in range(BULKS_PER_CLIENT):
            r = session.post(f"/{index}/_bulk", data=bulk_body(c, b),
                             headers={"Content-Type": "application/x-ndjson"}, timeout=120)
            with lock:
                if r.status_code >= 500:
                    server_errors.append((r.status_code, r.text[:300]))
                    continue
                if r.status_code != 200:
                    other_errors.append((r.status_code, r.text[:300]))
                    continue
                for item in r.json()["items"]:
                    result = item["index"]
                    if result["status"] in (200, 201):
                        acked.append(result["_id"])
                    elif result["status"] == 429:
                        rejected.append(result["_id"])
                        rejection_reasons.add((result["error"]["type"], result["error"]["reason"]))
                    elif result["status"] >= 500:
                        server_errors.append((result["status"], result["error"]))
                    else:
                        other_errors.append((result["status"], result["error"]))

    # The watcher is a process of its own: in this one, 64 client threads share the GIL and
    # would add their own delays to the latency measured.
    context = multiprocessing.get_context("fork")
    stop, results = context.Event(), context.Queue()
    watcher = context.Process(target=watch_health, args=(node.url, stop, results))
    watcher.start()
    clients = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in clients:
        t.start()
    for t in clients:
        t.join()
    stop.set()
    statuses, health_latencies = results.get(timeout=60)
    watcher.join(10)
    assert statuses == {200}, statuses

    total = CLIENTS * BULKS_PER_CLIENT * DOCS_PER_BULK
    print(f"overload: {len(acked)} acked, {len(rejected)} rejected (429) of {total}; "
          f"health max {max(health_latencies):.3f}s over {len(health_latencies)} calls: {[round(x, 3) for x in health_latencies]}")
    assert not server_errors, server_errors[:5]
    assert not other_errors, other_errors[:5]
    assert len(acked) + len(rejected) == total
    assert rejected, "64 clients against a write pool of 1 thread and 4 queued tasks must see rejections"
    assert acked, "some writes must get through"
    for error_type, reason in rejection_reasons:
        assert error_type == "rejected_execution_exception"
        assert reason.startswith("rejected execution of shard bulk [overload][0] on OpenSearchThreadPoolExecutor"
                                 "[name = overload/write, queue capacity = 4, "), reason
        assert "[Running, pool size = 1, active threads = 1, queued tasks = 4, completed tasks = " in reason, reason
    assert max(health_latencies) < 1.0, sorted(health_latencies)[-5:]

    # Every acknowledged document is there, and no rejected one.
    assert http.post(f"/{index}/_refresh").status_code == 200
    count = http.get(f"/{index}/_count").json()["count"]
    assert count == len(acked)
    for start in range(0, len(acked), 2000):
        ids = acked[start:start + 2000]
        docs = http.post(f"/{index}/_mget", {"ids": ids}).json()["docs"]
        missing = [d["_id"] for d in docs if not d.get("found")]
        assert not missing, missing[:10]

    rows = http.get("/_cat/thread_pool/write", params={"format": "json", "h": "name,type,size,queue_size,rejected,completed"}).json()
    assert len(rows) == 1, rows
    row = rows[0]
    assert (row["name"], row["type"], row["size"], row["queue_size"]) == ("write", "fixed", "1", "4")
    assert int(row["rejected"]) > 0
    stats = http.get("/_nodes/stats").json()
    (node_stats,) = stats["nodes"].values()
    assert node_stats["thread_pool"]["write"]["rejected"] == int(row["rejected"])


def test_an_invalid_thread_pool_setting_fails_node_start(node_factory):
    n = node_factory({"thread_pool.write.queue_size": "abc"}, start=False)
    with pytest.raises(NodeStartError) as failure:
        n.start(timeout=30)
    assert "Failed to parse value [abc] for setting [thread_pool.write.queue_size]" in str(failure.value), \
        str(failure.value)[-2000:]


def test_coordinating_bytes_over_the_indexing_pressure_limit_are_rejected_with_429(node_factory):
    node = node_factory({"indexing_pressure.memory.limit": "1kb"}, name="pressure")
    http = node.http()
    assert http.put("/small", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}}).status_code == 200
    assert http.put("/small/_doc/1", {"msg": "fits"}, params={"refresh": "true"}).status_code == 201
    r = http.post("/small/_bulk", data=bulk_body(0, 0), headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 429, r.text
    error = r.json()["error"]
    assert error["type"] == "rejected_execution_exception"
    assert error["reason"].startswith(
        "rejected execution of coordinating operation [coordinating_and_primary_bytes=0, replica_bytes=0, "
        "all_bytes=0, coordinating_operation_bytes="), error["reason"]
    assert error["reason"].endswith(", max_coordinating_and_primary_bytes=1024]"), error["reason"]
    (stats,) = http.get("/_nodes/stats").json()["nodes"].values()
    memory = stats["indexing_pressure"]["memory"]
    assert memory["limit_in_bytes"] == 1024
    assert memory["total"]["coordinating_rejections"] == 1
    assert memory["current"]["all_in_bytes"] == 0
    assert http.get("/small/_count").json()["count"] == 1


def test_cat_thread_pool_lists_opensearch_pools_with_default_columns(http):
    r = http.get("/_cat/thread_pool", params={"v": "true"})
    assert r.status_code == 200
    lines = r.text.splitlines()
    assert lines[0].split() == ["node_name", "name", "active", "queue", "rejected"]
    names = {line.split()[1] for line in lines[1:]}
    assert set(POOLS) <= names
    rows = http.get("/_cat/thread_pool/gen*,management", params={"format": "json", "h": "name,type,core,max,size,queue_size,keep_alive"}).json()
    by_name = {row["name"]: row for row in rows}
    assert set(by_name) == {"generic", "management"}
    assert by_name["management"] == {"name": "management", "type": "scaling", "core": "1", "max": "5",
                                     "size": None, "queue_size": "-1", "keep_alive": "5m"}
    (info,) = http.get("/_nodes/_local/thread_pool").json()["nodes"].values()
    assert info["thread_pool"]["write"]["type"] == "fixed"
    assert info["thread_pool"]["write"]["queue_size"] == 10000
    generic = info["thread_pool"]["generic"]
    assert (generic["type"], generic["core"], generic["keep_alive"], generic["queue_size"]) == ("scaling", 4, "30s", -1)
    assert 128 <= generic["max"] <= 512, generic
    (stats,) = http.get("/_nodes/stats").json()["nodes"].values()
    for pool in POOLS:
        assert set(stats["thread_pool"][pool]) == {"threads", "queue", "active", "rejected", "largest", "completed"}
    # `_nodes/stats` itself runs on `management`.
    assert stats["thread_pool"]["management"]["active"] >= 1
    (stats,) = http.get("/_nodes/stats").json()["nodes"].values()
    assert stats["thread_pool"]["management"]["completed"] >= 1


def test_shard_indexing_pressure_is_refused_when_enabled(http):
    r = http.put("/_cluster/settings", {"transient": {"shard_indexing_pressure.enabled": True}})
    assert r.status_code == 400, r.text
    assert "shard_indexing_pressure.enabled" in r.json()["error"]["reason"]
    r = http.put("/_cluster/settings", {"transient": {"shard_indexing_pressure.enabled": False}})
    assert r.status_code == 200, r.text
    assert http.put("/_cluster/settings", {"transient": {"shard_indexing_pressure.enabled": None}}).status_code == 200


def test_primary_bytes_over_the_limit_fail_the_items_and_replica_bytes_are_never_refused(tmp_path):
    from cluster import ShoalCluster

    cluster = ShoalCluster(tmp_path, 2)
    # node-1 holds next to nothing in flight; node-0 coordinates with the default limit.
    cluster.nodes[1].settings["indexing_pressure.memory.limit"] = "1kb"
    with cluster as c:
        http0 = c.http(0)
        pinned = {"number_of_shards": 1, "number_of_replicas": 0}
        assert http0.put("/on-tiny", {"settings": {**pinned, "index.routing.allocation.require._name": "node-1"}}).status_code == 200
        assert http0.put("/replicated", {"settings": {**pinned, "index.routing.allocation.require._name": "node-0"}}).status_code == 200
        c.wait_for_status("green")
        assert http0.put("/replicated/_settings", {"index.routing.allocation.require._name": None,
                                                   "index.number_of_replicas": 1}).status_code == 200
        c.wait_for_status("green")

        # The primary on node-1 refuses the forwarded shard bulk: every item 429, never a 5xx.
        r = http0.post("/on-tiny/_bulk", data=bulk_body(0, 0), headers={"Content-Type": "application/x-ndjson"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["errors"] is True
        statuses = {item["index"]["status"] for item in body["items"]}
        assert statuses == {429}, statuses
        error = body["items"][0]["index"]["error"]
        assert error["type"] == "rejected_execution_exception"
        assert error["reason"].startswith("rejected execution of primary operation [coordinating_and_primary_bytes=0, "), error
        assert error["reason"].endswith(", max_coordinating_and_primary_bytes=1024]"), error

        # The replica on node-1 takes the same bytes without refusing them.
        r = http0.post("/replicated/_bulk", data=bulk_body(1, 0), headers={"Content-Type": "application/x-ndjson"},
                       params={"refresh": "true"})
        assert r.status_code == 200 and r.json()["errors"] is False, r.text[:500]
        (stats,) = c.http(1).get("/_nodes/_local/stats").json()["nodes"].values()
        total = stats["indexing_pressure"]["memory"]["total"]
        assert total["primary_rejections"] == 1
        assert total["replica_rejections"] == 0
        assert total["replica_in_bytes"] > 1024
        assert c.http(1).get("/replicated/_count", params={"preference": "_local"}).json()["count"] == DOCS_PER_BULK

        # `_cat/thread_pool` lists every node's pools.
        rows = http0.get("/_cat/thread_pool/write", params={"format": "json", "h": "node_name,name,type"}).json()
        assert sorted((r["node_name"], r["name"], r["type"]) for r in rows) == [
            ("node-0", "write", "fixed"), ("node-1", "write", "fixed")]
