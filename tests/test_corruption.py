"""End-to-end checksums: one flipped byte in any file of a flushed segment (or the commit, or a
synced translog generation), made while the node is down, never comes back as a wrong
`_source` or aggregation: reads answer right or fail with an error, and a replicated shard
rebuilds the damaged copy from the healthy one. Shoal only (it edits a node's data files)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from cluster import ShoalCluster

DOCS = 300
INDEX = "corrupt"
# Every file kind of a flushed segment, the commit, and a translog generation.
KINDS = ["idx", "pos", "term", "store", "fast", "fieldnorm", "src", "meta.json", "tlog"]


def source(i: int) -> dict:
    return {"n": i, "tag": f"t{i % 7}", "text": f"document {i} says hello {i * 31}"}


EXPECTED_SUM = sum(range(DOCS))


def bulk(http, ids, refresh="true", index=INDEX):
    lines = []
    for i in ids:
        lines.append(json.dumps({"index": {"_index": index, "_id": str(i)}}))
        lines.append(json.dumps(source(i)))
    r = http.post("/_bulk", "\n".join(lines) + "\n", params={"refresh": refresh},
                  headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 200 and not r.json()["errors"], r.text[:500]


def create_index(http, replicas: int, settings: dict | None = None, index=INDEX):
    body = {"settings": {"number_of_shards": 1, "number_of_replicas": replicas, **(settings or {})},
            "mappings": {"properties": {"n": {"type": "long"}, "tag": {"type": "keyword"},
                                        "text": {"type": "text"}}}}
    r = http.put(f"/{index}", json=body)
    assert r.status_code == 200, r.text


def index_dir(node, uuid: str) -> Path:
    found = [p for p in node.data.glob(f"**/{uuid}/0/index") if p.is_dir()]
    assert found, f"no store of {uuid} under {node.data}"
    return found[0]


def flip_one(store: Path, kind: str) -> Path:
    """Flips one byte in the middle of a file of this kind (the largest one)."""
    if kind == "tlog":
        files = sorted((store.parent / "translog").glob("*.tlog"), key=lambda p: p.stat().st_size)
    elif kind == "meta.json":
        files = [store / "meta.json"]
    else:
        files = sorted(store.glob(f"*.{kind}"), key=lambda p: p.stat().st_size)
    assert files, f"no .{kind} file in {store}: {sorted(p.name for p in store.iterdir())}"
    path = files[-1]
    data = bytearray(path.read_bytes())
    # In meta.json, a byte of the commit payload (a flip in a key name that serde ignores
    # changes nothing, see the engine's unit test covering every byte).
    at = data.index(b"local_checkpoint") + 20 if kind == "meta.json" else len(data) // 2
    data[at] ^= 0x04
    path.write_bytes(bytes(data))
    return path


def failed_visibly(r) -> bool:
    """An error answer (not a 404 `found: false`, which would deny an indexed document)."""
    return r.status_code >= 400 and "error" in r.json()


def assert_reads_right_or_fail(http, params: dict | None = None, index=INDEX):
    """Search, aggregation and GET either answer exactly the indexed data or fail visibly."""
    params = params or {}
    r = http.post(f"/{index}/_search", json={"size": DOCS, "query": {"match_all": {}},
                                             "aggs": {"total": {"sum": {"field": "n"}}}}, params=params)
    if r.status_code == 200:
        body = r.json()
        for hit in body["hits"]["hits"]:
            assert hit["_source"] == source(int(hit["_id"])), f"{index}: wrong _source served: {hit}"
        if body["_shards"]["failed"] == 0:
            assert len(body["hits"]["hits"]) == DOCS, f"{index}: documents missing: {body['hits']['total']}"
            assert body["aggregations"]["total"]["value"] == EXPECTED_SUM, f"{index}: {body['aggregations']}"
    else:
        assert failed_visibly(r), r.text
    for i in (0, 17, 150, DOCS - 1):
        r = http.get(f"/{index}/_doc/{i}", params=params)
        if r.status_code == 200:
            assert r.json()["_source"] == source(i), f"{index}: wrong _source served by GET: {r.text}"
        else:
            assert failed_visibly(r), f"{index}: GET of an existing document answered {r.status_code}: {r.text}"


def prepare_single(node, kind: str, index=INDEX, settings: dict | None = None) -> str:
    http = node.http()
    create_index(http, 0, settings, index=index)
    bulk(http, range(DOCS) if kind != "tlog" else range(DOCS - 50), index=index)
    r = http.post(f"/{index}/_flush")
    assert r.status_code == 200, r.text
    if kind == "tlog":
        # Acknowledged (fsynced: durability request) but only in the translog.
        bulk(http, range(DOCS - 50, DOCS), index=index)
    return http.get(f"/{index}/_settings").json()[index]["settings"]["index"]["uuid"]


def test_a_flipped_byte_in_any_file_never_comes_back_as_wrong_data(node_factory):
    # One index per file kind, all damaged while the node is down, one restart.
    # The tester's case: `_source` blocks are checked on every read even when the store is not
    # verified on open (check_on_startup false), so a damaged block is never served or merged.
    cases = [(kind, "checksum") for kind in KINDS] + [("src", "false")]
    node = node_factory()
    uuids = {}
    for kind, check in cases:
        index = f"{INDEX}-{kind.replace('.', '-')}-{check}"
        uuids[index] = (kind, prepare_single(node, kind, index, {"index.shard.check_on_startup": check}))
    node.kill9()
    for kind, uuid in uuids.values():
        flip_one(index_dir(node, uuid), kind)
    node.start()
    http = node.http()
    for index, (kind, uuid) in uuids.items():
        # Whatever the cluster makes of the copy, no read ever serves damaged data.
        assert_reads_right_or_fail(http, index=index)
        r = http.post(f"/{index}/_forcemerge", params={"max_num_segments": 1})
        assert r.status_code != 200 or r.json()["_shards"]["failed"] == 0, r.text
        assert_reads_right_or_fail(http, index=index)
        # The damage is recorded in the store, so it is never reopened as is.
        assert list(index_dir(node, uuid).glob("corrupted_*")), f".{kind}: no corruption marker written"


def test_a_damaged_single_copy_goes_red_with_the_reason(node_factory):
    node = node_factory()
    uuid = prepare_single(node, "fast")
    node.kill9()
    flip_one(index_dir(node, uuid), "fast")
    node.start()
    http = node.http()
    deadline = time.monotonic() + 20
    while http.get("/_cluster/health").json()["status"] != "red" and time.monotonic() < deadline:
        time.sleep(0.3)
    assert http.get("/_cluster/health").json()["status"] == "red"
    explain = http.get("/_cluster/allocation/explain", json={"index": INDEX, "shard": 0, "primary": True}).json()
    assert "corrupt" in json.dumps(explain).lower(), explain
    # Never shown as serving: the allocator retries the copy (`index.allocation.max_retries`), so
    # it may be seen initializing again, then stays unassigned with the failure as its reason.
    expected = [{"state": "UNASSIGNED", "unassigned.reason": "ALLOCATION_FAILED"}]
    deadline = time.monotonic() + 30
    while True:
        rows = http.get(f"/_cat/shards/{INDEX}", params={"format": "json", "h": "state,unassigned.reason"}).json()
        assert all(row["state"] in ("UNASSIGNED", "INITIALIZING") for row in rows), rows
        if rows == expected or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert rows == expected, rows


@pytest.mark.parametrize("kind,check", [("src", "checksum"), ("fast", "checksum"), ("src", "false")])
def test_a_damaged_copy_is_rebuilt_from_the_healthy_copy(tmp_path, kind, check):
    # node-1 holds data only, so the cluster manager (node-0) sees it leave and come back.
    with ShoalCluster(tmp_path, 2, roles=[None, "data"]) as c:
        http = c.http(0)
        create_index(http, 1, {"index.shard.check_on_startup": check})
        bulk(http, range(DOCS))
        assert http.post(f"/{INDEX}/_flush").status_code == 200
        c.wait_for_status("green", timeout=60)
        uuid = http.get(f"/{INDEX}/_settings").json()[INDEX]["settings"]["index"]["uuid"]
        c.kill(1)
        flip_one(index_dir(c.nodes[1], uuid), kind)
        # Once the copy is unassigned (a primary's replica promoted), its return is a peer
        # recovery, which must not keep the damaged store. (A copy back before its node is
        # seen leaving reopens as STARTED: failing it is the lead's node part.)
        c.wait_for_nodes(1, timeout=60, i=0)
        c.wait_for_status("yellow", timeout=60, i=0)
        c.nodes[1].start()
        c.wait_for_nodes(2, timeout=60, i=0)
        c.wait_for_status("green", timeout=90, i=0)
        # The returning copy was rebuilt: reads on it answer the whole data.
        r = c.http(1).post(f"/{INDEX}/_search", params={"preference": "_only_local"},
                           json={"size": DOCS, "aggs": {"total": {"sum": {"field": "n"}}}})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["_shards"]["failed"] == 0, body["_shards"]
        assert sorted(int(h["_id"]) for h in body["hits"]["hits"]) == list(range(DOCS))
        for hit in body["hits"]["hits"]:
            assert hit["_source"] == source(int(hit["_id"]))
        assert body["aggregations"]["total"]["value"] == EXPECTED_SUM
        assert not list(index_dir(c.nodes[1], uuid).glob("corrupted_*")), "the marked store was kept"


def test_check_on_startup_is_validated_and_defaults_to_checksum(http, is_shoal):
    r = http.put("/corrupt-settings-bad", json={"settings": {"index.shard.check_on_startup": "sometimes"}})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["reason"] == ("unknown value for [index.shard.check_on_startup] must be one of "
                                           "[true, false, checksum] but was: sometimes")
    r = http.put("/corrupt-settings-ok", json={"settings": {"index.shard.check_on_startup": "false"}})
    assert r.status_code == 200, r.text
    try:
        r = http.get("/corrupt-settings-ok/_settings", params={"include_defaults": "true", "flat_settings": "true"})
        body = r.json()["corrupt-settings-ok"]
        assert body["settings"]["index.shard.check_on_startup"] == "false"
        r = http.put("/corrupt-settings-ok/_settings", json={"index.shard.check_on_startup": "true"})
        assert r.status_code == 400, r.text  # static, like OpenSearch
        r = http.put("/corrupt-settings-default", json={})
        assert r.status_code == 200, r.text
        r = http.get("/corrupt-settings-default/_settings", params={"include_defaults": "true", "flat_settings": "true"})
        # Shoal verifies every byte by default (correctness first); OpenSearch's default is false.
        expected = "checksum" if is_shoal else "false"
        assert r.json()["corrupt-settings-default"]["defaults"]["index.shard.check_on_startup"] == expected
    finally:
        http.delete("/corrupt-settings-*")
