"""Remote-backed storage on real processes: a primary uploads its segments and (with
`durability: request`) every acknowledged write's translog to a repository, replicas copy
segments from the repository, and `_remotestore/_restore` brings back every acknowledged write
after every data node and its disk is gone. Runs over an `fs` repository and over S3 (a moto
server the test starts).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time

import pytest
import requests

from cluster import ShoalCluster
from conftest import free_port
from util import wait_for

pytestmark = pytest.mark.cluster

REPO = "node.attr.remote_store.repository.r1"


def fs_repository(tmp_path) -> dict:
    return {f"{REPO}.type": "fs", f"{REPO}.settings.location": str(tmp_path / "repo")}


def start_moto(tmp_path, port: int) -> subprocess.Popen:
    """A moto S3 server on `port` with a bucket `shoal`."""
    log = open(tmp_path / f"moto-{port}.log", "a")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return requests.get(url, timeout=1).status_code < 500
        except requests.RequestException:
            return False

    wait_for(up, timeout=60, what="moto server")
    r = requests.put(f"{url}/shoal", timeout=10)
    assert r.status_code == 200, r.text
    return proc


@pytest.fixture
def s3_server(tmp_path):
    port = free_port()
    proc = start_moto(tmp_path, port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


def s3_repository(url: str) -> dict:
    return {f"{REPO}.type": "s3", f"{REPO}.settings.bucket": "shoal", f"{REPO}.settings.endpoint": url,
            f"{REPO}.settings.path_style_access": "true", f"{REPO}.settings.region": "us-east-1",
            f"{REPO}.settings.access_key": "test", f"{REPO}.settings.secret_key": "test",
            f"{REPO}.settings.base_path": "cluster-a"}


def remote_settings(repository: dict) -> dict:
    return {"node.attr.remote_store.segment.repository": "r1",
            "node.attr.remote_store.translog.repository": "r1", **repository}


def write_under_load(c: ShoalCluster, index: str, seconds: float, writers: int = 2) -> set[str]:
    """Bulk writers on every data node for `seconds`; returns the ids acknowledged."""
    acked: set[str] = set()
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def writer(w: int) -> None:
        http = c.http(1 + w % (len(c.nodes) - 1))
        n = 0
        while time.monotonic() < stop:
            ids = [f"w{w}-{n + k}" for k in range(20)]
            n += 20
            lines = []
            for doc_id in ids:
                lines += [{"index": {"_index": index, "_id": doc_id}}, {"writer": w, "n": doc_id}]
            try:
                r = http.bulk(lines)
            except requests.RequestException:
                continue
            if r.status_code != 200:
                continue
            with lock:
                acked.update(item["index"]["_id"] for item in r.json()["items"]
                             if item["index"]["status"] in (200, 201))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return acked


def ids_in(c: ShoalCluster, index: str) -> set[str]:
    return {hit["_id"] for hit in c.every_hit(index, source=False)}


def node_ids(c: ShoalCluster) -> set[str]:
    return set(c.get("/_nodes", 0).json()["nodes"])


def lose_every_data_node(c: ShoalCluster, data_nodes: list[int]) -> None:
    """kill -9 the data nodes, delete their data directories, start them empty, and wait
    until the cluster has only the new incarnations (the old ones took their copies along)."""
    old = node_ids(c) - {c.get("/_nodes/_local", 0).json()["nodes"].popitem()[0]}
    for i in data_nodes:
        c.kill(i)
    for i in data_nodes:
        shutil.rmtree(c.nodes[i].data)
        c.nodes[i].data.mkdir()
    for i in data_nodes:
        c.nodes[i].start()
    wait_for(lambda: not (node_ids(c) & old) and len(node_ids(c)) == len(c.nodes), timeout=60,
             what="the new data nodes replacing the old ones")


def restore_after_losing_every_copy(c: ShoalCluster, index: str) -> None:
    r = c.http(0).put(f"/{index}", {"settings": {"number_of_shards": 2, "number_of_replicas": 1,
                                                 "index.translog.durability": "request",
                                                 "index.remote_store.translog.buffer_interval": "20ms",
                                                 "index.refresh_interval": "300ms"}})
    assert r.status_code == 200, r.text
    c.wait_for_status("green")
    settings = c.get(f"/{index}/_settings", flat_settings="true").json()[index]["settings"]
    assert settings["index.replication.type"] == "SEGMENT"
    assert settings["index.remote_store.enabled"] == "true"
    acked = write_under_load(c, index, seconds=4)
    assert len(acked) > 200, f"too few writes acknowledged: {len(acked)}"

    lose_every_data_node(c, [1, 2])
    health = c.health(0)
    assert health["status"] == "red" and health["active_primary_shards"] == 0, health
    started = time.monotonic()
    r = c.http(0).post("/_remotestore/_restore", {"indices": [index]}, params={"wait_for_completion": "true"})
    assert r.status_code == 200, r.text
    assert r.json()["remote_store"]["shards"] == {"total": 2, "failed": 0, "successful": 2}, r.text
    c.wait_for_status("green", timeout=120)
    restore_seconds = time.monotonic() - started
    c.http(0).post(f"/{index}/_refresh")
    restored = ids_in(c, index)
    lost = acked - restored
    print(f"[figure] remote store restore: {len(acked)} acknowledged, {len(lost)} lost, "
          f"{len(restored)} restored, {restore_seconds:.1f}s to green")
    assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {sorted(lost)[:5]}"


def test_every_acknowledged_write_comes_back_from_an_fs_repository_after_every_data_node_is_lost(tmp_path):
    roles = ["cluster_manager", "data,ingest", "data,ingest"]
    with ShoalCluster(tmp_path, 3, roles=roles, settings=remote_settings(fs_repository(tmp_path))) as c:
        restore_after_losing_every_copy(c, "logs")


def test_every_acknowledged_write_comes_back_from_s3_after_every_data_node_is_lost(tmp_path, s3_server):
    roles = ["cluster_manager", "data,ingest", "data,ingest"]
    with ShoalCluster(tmp_path, 3, roles=roles, settings=remote_settings(s3_repository(s3_server))) as c:
        restore_after_losing_every_copy(c, "events")
        listed = requests.get(f"{s3_server}/shoal?list-type=2&prefix=cluster-a/", timeout=10).text
        assert "segments/metadata/metadata__" in listed and "translog/data/" in listed


def test_a_cluster_that_lost_every_node_and_disk_comes_back_from_its_repositories(tmp_path):
    """kill -9 every node, delete every data directory, start fresh nodes: the cluster's
    metadata comes back from the state repository (red), and `_remotestore/_restore` brings
    back every acknowledged write."""
    settings = {**remote_settings(fs_repository(tmp_path)),
                "node.attr.remote_store.state.repository": "r1",
                "cluster.remote_store.state.enabled": "true"}
    with ShoalCluster(tmp_path, 3, settings=settings) as c:
        r = c.http(0).put("/orders", {"settings": {"number_of_shards": 2, "number_of_replicas": 1,
                                                   "index.remote_store.translog.buffer_interval": "20ms"},
                                      "mappings": {"properties": {"writer": {"type": "integer"}}}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green")
        r = c.http(0).put("/_cluster/settings", {"persistent": {"cluster.max_shards_per_node": 1234}})
        assert r.status_code == 200, r.text
        acked = write_under_load(c, "orders", seconds=4)
        assert len(acked) > 200, f"too few writes acknowledged: {len(acked)}"
        time.sleep(1)  # the cluster manager uploads metadata changes within a tick

        for i in range(3):
            c.kill(i)
        for node in c.nodes:
            shutil.rmtree(node.data)
            node.data.mkdir()
        for node in c.nodes:
            node.start()
        c.wait_for_nodes(3)
        wait_for(lambda: c.http(0).get("/orders").status_code == 200, timeout=60,
                 what="the index metadata back from the state repository")
        assert c.health(0)["status"] == "red"
        mapping = c.get("/orders/_mapping").json()["orders"]["mappings"]
        assert mapping["properties"]["writer"]["type"] == "integer", mapping
        persistent = c.get("/_cluster/settings").json()["persistent"]
        assert persistent["cluster"]["max_shards_per_node"] == "1234", persistent

        r = c.http(0).post("/_remotestore/_restore", {"indices": ["orders"]},
                           params={"wait_for_completion": "true"})
        assert r.status_code == 200, r.text
        c.wait_for_status("green", timeout=120)
        c.http(0).post("/orders/_refresh")
        restored = ids_in(c, "orders")
        lost = acked - restored
        print(f"[figure] full cluster loss: {len(acked)} acknowledged, {len(lost)} lost after restore")
        assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {sorted(lost)[:5]}"


def test_writes_are_refused_while_segment_uploads_fail_and_resume_when_the_store_is_back(tmp_path):
    """Remote segment backpressure: with the S3 server down, uploads fail in a row and writes
    answer 429 with OpenSearch's reason; with it back they are accepted again."""
    port = free_port()
    moto = start_moto(tmp_path, port)
    url = f"http://127.0.0.1:{port}"
    try:
        with ShoalCluster(tmp_path, 1, settings=remote_settings(s3_repository(url))) as c:
            r = c.http(0).put("/metrics", {"settings": {"number_of_replicas": 0, "refresh_interval": "100ms",
                                                        "index.translog.durability": "async"}})
            assert r.status_code == 200, r.text
            c.wait_for_status("green")

            def bulk_statuses() -> list[tuple[int, str]]:
                lines = []
                for _ in range(5):
                    lines += [{"index": {"_index": "metrics"}}, {"v": 1}]
                items = c.http(0).bulk(lines).json()["items"]
                return [(i["index"]["status"], json.dumps(i["index"].get("error", ""))) for i in items]

            assert all(status == 201 for status, _ in bulk_statuses())
            moto.kill()
            moto.wait()
            rejected = wait_for(lambda: [e for status, e in bulk_statuses() if status == 429], timeout=90,
                                interval=0.2, what="writes refused while uploads fail")
            assert "remote segments lagging behind local segments" in rejected[0], rejected
            assert "failure_streak_count" in rejected[0], rejected
            stats = c.get("/_remotestore/stats/metrics").json()["indices"]["metrics"]["shards"]["0"][0]
            upload = stats["segment"]["upload"]
            assert upload["consecutive_failure_count"] >= 5 and upload["backpressure_rejection_count"] >= 1, upload

            moto = start_moto(tmp_path, port)
            wait_for(lambda: all(status == 201 for status, _ in bulk_statuses()), timeout=90, interval=0.5,
                     what="writes accepted once the store is back")
    finally:
        moto.kill()
        moto.wait()


def test_replicas_copy_segments_from_the_repository_and_match_the_primary(tmp_path):
    with ShoalCluster(tmp_path, 2, settings=remote_settings(fs_repository(tmp_path))) as c:
        r = c.http(0).put("/docs", {"settings": {"number_of_shards": 1, "number_of_replicas": 1}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green")
        lines = []
        for n in range(200):
            lines += [{"index": {"_index": "docs", "_id": str(n)}}, {"n": n}]
        assert c.http(1).bulk(lines).status_code == 200
        r = c.http(0).post("/docs/_refresh")
        assert r.status_code == 200 and r.json()["_shards"]["failed"] == 0, r.text
        stats = c.get("/_remotestore/stats/docs").json()
        copies = stats["indices"]["docs"]["shards"]["0"]
        primary = next(x for x in copies if x["routing"]["primary"])
        replica = next(x for x in copies if not x["routing"]["primary"])
        assert primary["segment"]["upload"]["total_uploads"]["succeeded"] >= 1, primary
        assert primary["translog"]["upload"]["total_uploads"]["succeeded"] >= 1, primary
        assert replica["segment"]["download"]["total_downloads"]["succeeded"] >= 1, replica
        for node in c.get("/_nodes").json()["nodes"]:
            r = c.http(0).get("/docs/_count", params={"preference": f"_only_nodes:{node}"})
            assert r.json()["count"] == 200, (node, r.text)


def test_a_remote_backed_node_refuses_what_contradicts_the_remote_store(tmp_path):
    with ShoalCluster(tmp_path, 1, settings=remote_settings(fs_repository(tmp_path))) as c:
        r = c.http(0).put("/d", {"settings": {"index.replication.type": "DOCUMENT"}})
        assert r.status_code == 400 and "should be set to SEGMENT" in r.text, r.text
        r = c.http(0).put("/e", {"settings": {"index.remote_store.enabled": True}})
        assert r.status_code == 400 and "can not be set explicitly" in r.text, r.text
        r = c.http(0).post("/_remotestore/_restore", {"indices": ["missing"]})
        assert r.status_code == 404, r.text
        c.http(0).put("/open", {"settings": {"number_of_replicas": 0}})
        r = c.http(0).post("/_remotestore/_restore", {"indices": ["open"]}, params={"restore_all_shards": "true"})
        assert r.status_code == 400 and "Close the existing index" in r.text, r.text
        r = c.http(0).post("/_remotestore/_restore", {"indices": ["open"]}, params={"bogus": "1"})
        assert r.status_code == 400 and "[bogus]" in r.text, r.text


def test_a_node_with_a_wrong_remote_store_setting_does_not_start(tmp_path):
    settings = remote_settings(fs_repository(tmp_path))
    settings[f"{REPO}.settings.compress"] = "true"
    with pytest.raises(Exception):
        with ShoalCluster(tmp_path, 1, settings=settings):
            pass


def test_old_metadata_files_and_the_segment_files_only_they_named_are_garbage_collected(tmp_path):
    """`cluster.remote_store.index.segment_metadata.retention.max_count` metadata files are kept
    (checked every 10 uploads), with the segment files they name; a force merge's merged-away
    segments leave the repository once no kept metadata names them."""
    retain = 2
    with ShoalCluster(tmp_path, 1, settings=remote_settings(fs_repository(tmp_path))) as c:
        http = c.http(0)
        r = http.put("/_cluster/settings", {"persistent": {
            "cluster.remote_store.index.segment_metadata.retention.max_count": retain}})
        assert r.status_code == 200, r.text
        r = http.put("/gc", {"settings": {"number_of_shards": 1, "number_of_replicas": 0,
                                          "index.refresh_interval": "-1"}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green")

        def upload_rounds(first: int, rounds: int) -> None:
            for n in range(first, first + rounds):
                c.bulk(0, "gc", {f"{n}-{i}": {"n": n} for i in range(10)}, refresh="false")
                assert http.post("/gc/_refresh").status_code == 200

        upload_rounds(0, 25)
        r = http.post("/gc/_forcemerge", params={"max_num_segments": "1"})
        assert r.status_code == 200, r.text
        upload_rounds(25, 20)
        stats = c.get("/_remotestore/stats/gc").json()["indices"]["gc"]["shards"]["0"][0]
        uploads = stats["segment"]["upload"]["total_uploads"]["succeeded"]

        metadata = sorted((tmp_path / "repo").rglob("segments/metadata/metadata__*"))
        data = {p.name for p in (tmp_path / "repo").rglob("segments/data/*")}
        named = {f["name"] for m in metadata for f in json.loads(m.read_text())["checkpoint"]["files"]}
        print(f"\n[figure] remote store GC: {uploads} uploads, {len(metadata)} metadata files kept, "
              f"{len(data)} segment files stored")
        assert uploads >= 45, stats
        assert retain <= len(metadata) < retain + 10, [m.name for m in metadata]
        assert data <= named, sorted(data - named)[:5]
        assert c.get("/gc/_count").json()["count"] == 450


def transport_tx_bytes(c: ShoalCluster, i: int) -> int:
    nodes = c.get("/_nodes/_local/stats/transport", i).json()["nodes"]
    return next(iter(nodes.values()))["transport"]["tx_size_in_bytes"]


def test_a_new_replica_hydrates_from_the_repository_and_not_from_its_primary(tmp_path):
    with ShoalCluster(tmp_path, 2, settings=remote_settings(fs_repository(tmp_path))) as c:
        r = c.http(0).put("/hydrated", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green")
        size = c.load_incompressible(0, "hydrated")
        primary = c.index_of(c.get("/_cat/shards/hydrated", format="json", h="node").json()[0]["node"])
        sent_before = transport_tx_bytes(c, primary)
        r = c.http(0).put("/hydrated/_settings", {"index": {"number_of_replicas": 1}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green", timeout=120)
        sent = transport_tx_bytes(c, primary) - sent_before
        print(f"\n[figure] new remote-backed replica: store {size} bytes, its primary's node sent {sent} bytes")
        assert size > 2_000_000, size
        assert sent < size / 4, (size, sent)
        for node in c.get("/_nodes").json()["nodes"]:
            r = c.http(0).get("/hydrated/_count", params={"preference": f"_only_nodes:{node}"})
            assert r.json()["count"] == 1500, (node, r.text)


def restore_closed(c: ShoalCluster, index: str) -> None:
    """Closes `index` and restores every shard of it from the remote store (a new term)."""
    assert c.http(0).post(f"/{index}/_close").status_code == 200
    r = c.http(0).post("/_remotestore/_restore", {"indices": [index]},
                       params={"restore_all_shards": "true", "wait_for_completion": "true"})
    assert r.status_code == 200, r.text
    c.wait_for_status("green", timeout=60)


def test_a_document_updated_after_the_last_segment_upload_is_restored_once_with_its_last_value(tmp_path):
    """The restored segments hold a document's first version and the translog its update: the
    replayed update replaces it (one hit, the new value), as every later update does."""
    roles = ["cluster_manager", "data,ingest"]
    with ShoalCluster(tmp_path, 2, roles=roles, settings=remote_settings(fs_repository(tmp_path))) as c:
        http = c.http(0)
        r = http.put("/accounts", {"settings": {"number_of_replicas": 0, "refresh_interval": "-1",
                                                "index.translog.durability": "request"}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green")
        for n in range(5):
            assert http.put(f"/accounts/_doc/{n}", {"balance": 1}).status_code == 201
        assert http.post("/accounts/_refresh").status_code == 200  # segments uploaded: balance 1
        for balance in (2, 3):
            for n in range(5):
                assert http.put(f"/accounts/_doc/{n}", {"balance": balance}).status_code == 200

        lose_every_data_node(c, [1])
        r = http.post("/_remotestore/_restore", {"indices": ["accounts"]}, params={"wait_for_completion": "true"})
        assert r.status_code == 200, r.text
        c.wait_for_status("green", timeout=60)
        http.post("/accounts/_refresh")
        r = http.post("/accounts/_search", {"size": 100, "query": {"match_all": {}}})
        hits = sorted((hit["_id"], hit["_source"]["balance"]) for hit in r.json()["hits"]["hits"])
        assert hits == [(str(n), 3) for n in range(5)], hits
        r = http.put("/accounts/_doc/0", {"balance": 4})
        assert r.status_code == 200 and r.json()["_version"] == 4, r.text
        http.post("/accounts/_refresh")
        assert http.get("/accounts/_count").json()["count"] == 5


def test_a_restore_drops_what_a_deposed_primary_uploaded_after_its_successor_began(tmp_path):
    """A primary cut off from its cluster may still upload batches of writes nobody acknowledged,
    with seq_nos above all its successor writes. Here such a batch (term 1, seq_no 3: an old
    version of document `a`) is put into the repository after the successor (term 2) wrote
    seq_no 2; a restore must keep the acknowledged version."""
    repo = tmp_path / "repo"
    with ShoalCluster(tmp_path, 1, settings=remote_settings(fs_repository(tmp_path))) as c:
        http = c.http(0)
        body = {"settings": {"number_of_replicas": 0}}
        for index in ("orders", "deposed"):
            assert http.put(f"/{index}", body).status_code == 200
        # The deposed primary's history, term 1: seq_nos 0..3, the last one an old `a`.
        for n, (doc, version) in enumerate([("s0", 1), ("s1", 1), ("s2", 1), ("a", 0)]):
            assert http.put(f"/deposed/_doc/{doc}", {"v": version}).status_code in (200, 201)
        for doc in ("a", "b"):  # seq_nos 0 and 1, term 1
            assert http.put(f"/orders/_doc/{doc}", {"v": 1}).status_code == 201
        restore_closed(c, "orders")  # the successor: term 2
        r = http.put("/orders/_doc/a", {"v": 2})  # seq_no 2, term 2, acknowledged
        assert r.status_code == 200 and r.json()["_primary_term"] >= 2, r.text

        uuid = lambda index: http.get(f"/{index}/_settings").json()[index]["settings"]["index"]["uuid"]
        stale = [p for p in (repo / uuid("deposed") / "0" / "translog" / "data").iterdir()
                 if p.name.split("__")[1:3] == [f"{3:019}", f"{3:019}"]]
        assert len(stale) == 1, sorted(p.name for p in stale)
        target = repo / uuid("orders") / "0" / "translog" / "data" / stale[0].name
        shutil.copy(stale[0], target)
        starts = sorted(p.name for p in (repo / uuid("orders") / "0" / "translog" / "terms").iterdir())
        assert any(name.startswith(f"{2:019}__") for name in starts), starts

        restore_closed(c, "orders")
        http.post("/orders/_refresh")
        assert http.get("/orders/_doc/a").json()["_source"] == {"v": 2}
        assert ids_in(c, "orders") == {"a", "b"}


def test_segment_transfers_keep_to_the_repositorys_remote_rates(tmp_path):
    """`max_remote_upload_bytes_per_sec` paces segment uploads and `max_remote_download_bytes_per_sec`
    the downloads (here a restore's), as OpenSearch's repository settings (unlimited by default)."""
    settings = {**remote_settings(fs_repository(tmp_path)),
                f"{REPO}.settings.max_remote_upload_bytes_per_sec": "1mb",
                f"{REPO}.settings.max_remote_download_bytes_per_sec": "1mb"}
    with ShoalCluster(tmp_path, 1, settings=settings) as c:
        assert c.http(0).put("/paced", {"settings": {"number_of_replicas": 0}}).status_code == 200
        size = c.load_incompressible(0, "paced")

        def upload_stats() -> dict:
            shards = c.get("/_remotestore/stats/paced").json()["indices"]["paced"]["shards"]["0"]
            return shards[0]["segment"]["upload"]

        wait_for(lambda: upload_stats()["total_uploads_in_bytes"]["succeeded"] >= 0.9 * size, timeout=60,
                 what="the shard's segments uploaded")
        upload_s = upload_stats()["total_upload_time_in_millis"] / 1000
        started = time.monotonic()
        restore_closed(c, "paced")
        restore_s = time.monotonic() - started
        print(f"\n[figure] {size} bytes at 1mb/s: uploads took {upload_s:.2f}s, the restore {restore_s:.2f}s")
        assert upload_s >= 0.7 * size / (1 << 20), upload_s
        assert restore_s >= 0.7 * size / (1 << 20), restore_s
        assert c.http(0).get("/paced/_count").json()["count"] == 1500
