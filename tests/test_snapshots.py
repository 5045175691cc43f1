"""Snapshots on real processes, through opensearch-py: a snapshot taken while writers run holds
every write acknowledged before it started, a restore under a new name gives back the same
documents (DOCUMENT and SEGMENT indices, replicas recovered from the restored primaries), a
second snapshot uploads only the files the first did not hold, and a delete removes every file
no remaining snapshot needs. Over an `fs` repository and over S3 (a moto server)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import requests
from opensearchpy.exceptions import NotFoundError, RequestError, TransportError

from cluster import ShoalCluster
from test_remote_store import s3_server  # noqa: F401  (a fixture)
from util import assert_error, wait_for

pytestmark = pytest.mark.cluster


def cluster(tmp_path: Path, n: int = 3) -> ShoalCluster:
    return ShoalCluster(tmp_path, n, settings={"path.repo": str(tmp_path / "backups")})


def documents(c: ShoalCluster, index: str) -> dict[str, dict]:
    """Every document of an index: id → source."""
    return {hit["_id"]: hit["_source"] for hit in c.every_hit(index)}


def load(c: ShoalCluster, index: str, start: int, count: int) -> None:
    docs = {f"d{k}": {"title": f"package {k}", "n": k, "body": "lorem ipsum " * (k % 7)}
            for k in range(start, start + count)}
    for batch in range(0, count, 500):
        keys = list(docs)[batch:batch + 500]
        c.bulk(0, index, {k: docs[k] for k in keys}, refresh="false")
    c.http(0).post(f"/{index}/_refresh")


def repository_and_index(c: ShoalCluster, index: str, count: int):
    """Registers the `fs` repository `r` and loads `count` documents into a 1-shard index;
    returns the client."""
    client = c.client(0)
    client.snapshot.create_repository(repository="r", body={"type": "fs", "settings": {"location": "r"}})
    client.indices.create(index=index, body={"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    load(c, index, 0, count)
    return client


def status_stats(client, repository: str, snapshot: str) -> dict:
    status = client.snapshot.status(repository=repository, snapshot=snapshot)["snapshots"][0]
    assert status["state"] == "SUCCESS", status
    return status["stats"]


def test_a_snapshot_restored_under_a_new_name_holds_the_same_documents(tmp_path):
    with cluster(tmp_path) as c:
        client = c.client(1)
        client.snapshot.create_repository(repository="backups", body={"type": "fs", "settings": {"location": "nightly"}})
        for index, kind in (("logs", "DOCUMENT"), ("events", "SEGMENT")):
            client.indices.create(index=index, body={"settings": {
                "number_of_shards": 2, "number_of_replicas": 1, "index.replication.type": kind}})
        c.wait_for_status("green")
        load(c, "logs", 0, 1500)
        load(c, "events", 0, 700)
        before = {index: documents(c, index) for index in ("logs", "events")}

        taken = client.snapshot.create(repository="backups", snapshot="snap-1", params={"wait_for_completion": "true"})
        info = taken["snapshot"]
        assert info["state"] == "SUCCESS" and info["shards"] == {"total": 4, "failed": 0, "successful": 4}, info
        assert sorted(info["indices"]) == ["events", "logs"]

        client.indices.delete(index="logs")
        restored = client.snapshot.restore(repository="backups", snapshot="snap-1",
                                           body={"indices": "logs,events", "rename_pattern": "(.+)",
                                                 "rename_replacement": "restored-$1"},
                                           params={"wait_for_completion": "true"})
        assert restored["snapshot"]["shards"] == {"total": 4, "failed": 0, "successful": 4}, restored
        c.wait_for_status("green", timeout=120)
        for index in ("logs", "events"):
            assert documents(c, f"restored-{index}") == before[index], f"restored-{index} differs"
        settings = client.indices.get_settings(index="restored-events", flat_settings=True)
        assert settings["restored-events"]["settings"]["index.replication.type"] == "SEGMENT"
        rows = c.get("/_cat/recovery/restored-logs", 0, h="type,repository,snapshot,stage", v="false").text.split("\n")
        assert "snapshot backups snap-1 done" in [" ".join(r.split()) for r in rows], rows
        # The restored index takes writes like any other, on every copy.
        c.bulk(0, "restored-logs", {"new": {"title": "after restore"}})
        assert client.count(index="restored-logs")["count"] == 1501


def test_a_second_snapshot_uploads_only_the_files_the_first_did_not_hold(tmp_path):
    with cluster(tmp_path, 1) as c:
        client = repository_and_index(c, "docs", 3000)
        client.snapshot.create(repository="r", snapshot="one", params={"wait_for_completion": "true"})
        load(c, "docs", 3000, 100)
        client.snapshot.create(repository="r", snapshot="two", params={"wait_for_completion": "true"})
        first, second = status_stats(client, "r", "one"), status_stats(client, "r", "two")
        print(f"[figure] snapshot one uploaded {first['incremental']['size_in_bytes']} bytes; "
              f"snapshot two (100 more docs on 3000) uploaded {second['incremental']['size_in_bytes']} of "
              f"{second['total']['size_in_bytes']} bytes, {second['incremental']['file_count']} of "
              f"{second['total']['file_count']} files")
        assert first["incremental"] == first["total"]
        assert second["incremental"]["size_in_bytes"] < second["total"]["size_in_bytes"] / 2, second
        assert 0 < second["incremental"]["file_count"] < second["total"]["file_count"], second

        blobs = tmp_path / "backups" / "r" / "blobs"
        client.snapshot.delete(repository="r", snapshot="one")
        # Snapshot two still restores whole: the files it shares with one were kept.
        client.snapshot.restore(repository="r", snapshot="two", body={"indices": "docs", "rename_pattern": "docs",
                                                                      "rename_replacement": "docs-two"},
                                params={"wait_for_completion": "true"})
        c.wait_for_status("green")
        assert client.count(index="docs-two")["count"] == 3100
        # Every file but the commit point, which the snapshot's own file holds.
        assert len(list(blobs.iterdir())) == second["total"]["file_count"] - 1
        # Not waited for: accepted at once, then listed as it runs and when done.
        assert client.snapshot.create(repository="r", snapshot="three") == {"accepted": True}
        wait_for(lambda: client.snapshot.get(repository="r", snapshot="three")["snapshots"][0]["state"] == "SUCCESS",
                 timeout=30, what="the snapshot not waited for")
        assert client.snapshot.get(repository="r", snapshot="_current")["snapshots"] == []
        client.snapshot.delete(repository="r", snapshot="two,three")
        # (the fs store removes a folder it emptied)
        assert not blobs.exists() or list(blobs.iterdir()) == [], "files no snapshot names were left behind"
        assert client.snapshot.get(repository="r", snapshot="_all")["snapshots"] == []


def test_chunk_size_stores_large_files_in_parts_and_every_snapshot_restores_after_it_changes(tmp_path):
    with cluster(tmp_path, 1) as c:
        client = c.client(0)
        blobs = tmp_path / "backups" / "parts" / "blobs"
        client.snapshot.create_repository(repository="parts", body={
            "type": "fs", "settings": {"location": "parts", "chunk_size": "8kb"}})
        client.indices.create(index="docs", body={"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
        load(c, "docs", 0, 3000)
        client.indices.forcemerge(index="docs", params={"max_num_segments": 1})
        before = documents(c, "docs")
        client.snapshot.create(repository="parts", snapshot="small-parts", params={"wait_for_completion": "true"})
        stored = sorted(p.name for p in blobs.iterdir())
        parts = [name for name in stored if ".8192.part" in name]
        assert parts, stored
        assert all(p.stat().st_size <= 8 * 1024 for p in blobs.iterdir()), "a blob is larger than chunk_size"
        first = status_stats(client, "parts", "small-parts")
        assert first["incremental"] == first["total"]

        # A second snapshot of the same commit finds every part and uploads nothing.
        client.snapshot.create(repository="parts", snapshot="again", params={"wait_for_completion": "true"})
        assert status_stats(client, "parts", "again")["incremental"]["file_count"] == 0

        # chunk_size changes: new parts of the new size; the older snapshots still restore.
        client.snapshot.create_repository(repository="parts", body={
            "type": "fs", "settings": {"location": "parts", "chunk_size": "32kb"}})
        client.snapshot.create(repository="parts", snapshot="large-parts", params={"wait_for_completion": "true"})
        assert any(".32768.part" in p.name for p in blobs.iterdir())
        client.indices.delete(index="docs")
        for snapshot in ("small-parts", "large-parts"):
            client.snapshot.restore(repository="parts", snapshot=snapshot, body={
                "indices": "docs", "rename_pattern": "docs", "rename_replacement": f"docs-{snapshot}"},
                params={"wait_for_completion": "true"})
            c.wait_for_status("green")
            assert documents(c, f"docs-{snapshot}") == before, snapshot

        # Deleting the snapshots removes every part no remaining snapshot names.
        client.snapshot.delete(repository="parts", snapshot="small-parts,again")
        assert not any(".8192.part" in p.name for p in blobs.iterdir())
        assert client.snapshot.get_repository(repository="parts")["parts"]["settings"]["chunk_size"] == "32kb"


def test_a_snapshot_taken_while_writers_run_holds_every_write_acknowledged_before_it(tmp_path):
    with cluster(tmp_path) as c:
        client = c.client(0)
        client.snapshot.create_repository(repository="r", body={"type": "fs", "settings": {"location": "live"}})
        client.indices.create(index="stream", body={"settings": {"number_of_shards": 3, "number_of_replicas": 1}})
        c.wait_for_status("green")
        acked: list[tuple[float, str]] = []
        stop = threading.Event()

        def writer(w: int) -> None:
            http, n = c.http(1 + w), 0
            while not stop.is_set():
                ids = [f"w{w}-{n + k}" for k in range(25)]
                n += 25
                lines = []
                for doc_id in ids:
                    lines += [json.dumps({"index": {"_index": "stream", "_id": doc_id}}), json.dumps({"w": w})]
                r = http.post("/_bulk", "\n".join(lines) + "\n", headers={"Content-Type": "application/x-ndjson"})
                if r.status_code == 200:
                    done = time.monotonic()
                    acked.extend((done, item["index"]["_id"]) for item in r.json()["items"]
                                 if item["index"]["status"] in (200, 201))

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
        for t in threads:
            t.start()
        time.sleep(2)
        started = time.monotonic()
        r = requests.put(c.nodes[0].url + "/_snapshot/r/under-load", params={"wait_for_completion": "true"},
                         json={"indices": "stream"}, timeout=120)
        time.sleep(1)
        stop.set()
        for t in threads:
            t.join()
        assert r.status_code == 200 and r.json()["snapshot"]["state"] == "SUCCESS", r.text
        before = {doc_id for done, doc_id in acked if done < started}
        client.snapshot.restore(repository="r", snapshot="under-load",
                                body={"rename_pattern": "stream", "rename_replacement": "replay"},
                                params={"wait_for_completion": "true"})
        c.wait_for_status("green", timeout=120)
        restored = set(documents(c, "replay"))
        lost = before - restored
        print(f"[figure] snapshot under load: {len(before)} acknowledged before it started, {len(lost)} missing, "
              f"{len(restored)} in it")
        assert len(before) > 300 and not lost, f"{len(lost)} acknowledged writes missing, e.g. {sorted(lost)[:5]}"


def test_a_snapshot_in_s3_restores_the_same_documents(tmp_path, s3_server):  # noqa: F811
    with cluster(tmp_path, 2) as c:
        client = c.client(0)
        client.snapshot.create_repository(repository="s3r", body={"type": "s3", "settings": {
            "bucket": "shoal", "endpoint": s3_server, "path_style_access": True, "region": "us-east-1",
            "access_key": "test", "secret_key": "test", "base_path": "snapshots"}})
        client.indices.create(index="orders", body={"settings": {"number_of_shards": 2, "number_of_replicas": 1}})
        c.wait_for_status("green")
        load(c, "orders", 0, 800)
        before = documents(c, "orders")
        client.snapshot.create(repository="s3r", snapshot="first", params={"wait_for_completion": "true"})
        client.indices.delete(index="orders")
        client.snapshot.restore(repository="s3r", snapshot="first", params={"wait_for_completion": "true"})
        c.wait_for_status("green", timeout=120)
        assert documents(c, "orders") == before
        listed = requests.get(f"{s3_server}/shoal?list-type=2&prefix=snapshots/", timeout=10).text
        assert "snapshots/blobs/" in listed and "snapshots/generations/index-" in listed
        rows = c.get("/_cat/snapshots/s3r", 0, h="id,status,total_shards").text.split()
        assert rows == ["first", "SUCCESS", "2"], rows


def metadata_files(location: Path) -> dict[str, bytes]:
    """The repository's generations and snapshot files, by path under its location."""
    found = [*location.glob("generations/index-*"), *location.glob("snap-*.json")]
    return {str(f.relative_to(location)): f.read_bytes() for f in found}


def test_compress_deflates_the_metadata_and_a_readonly_registration_reads_but_never_writes(tmp_path):
    with cluster(tmp_path, 1) as c:
        http, client = c.http(0), c.client(0)
        location = tmp_path / "backups" / "shared"
        client.snapshot.create_repository(repository="packed", body={
            "type": "fs", "settings": {"location": "shared", "compress": True}})
        client.indices.create(index="a", body={"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
        load(c, "a", 0, 300)
        before = documents(c, "a")
        client.snapshot.create(repository="packed", snapshot="s1", params={"wait_for_completion": "true"})
        compressed = metadata_files(location)
        assert compressed and all(b.startswith(b"DFL\0") for b in compressed.values()), list(compressed)

        # Another cluster's view of the same location: it reads and restores, never writes.
        files_before = sorted(p.name for p in location.rglob("*"))
        client.snapshot.create_repository(repository="mirror", body={
            "type": "fs", "settings": {"location": "shared", "readonly": True}})
        assert sorted(p.name for p in location.rglob("*")) == files_before, "registering a readonly repository wrote to it"
        assert [s["snapshot"] for s in client.snapshot.get(repository="mirror", snapshot="_all")["snapshots"]] == ["s1"]
        assert_error(http.put("/_snapshot/mirror/s2", {}, params={"wait_for_completion": "true"}), 400,
                     "repository_exception", reason_re=r"\[mirror\] cannot create snapshot in a readonly repository")
        assert_error(http.delete("/_snapshot/mirror/s1"), 400, "repository_exception",
                     reason_re=r"\[mirror\] cannot delete snapshot from a readonly repository")
        assert sorted(p.name for p in location.rglob("*")) == files_before
        client.snapshot.restore(repository="mirror", snapshot="s1", body={
            "indices": "a", "rename_pattern": "a", "rename_replacement": "a-copy"}, params={"wait_for_completion": "true"})
        c.wait_for_status("green")
        assert documents(c, "a-copy") == before

        # Turning compression off leaves the compressed snapshot readable beside a plain one.
        client.snapshot.create_repository(repository="packed", body={"type": "fs", "settings": {"location": "shared"}})
        client.snapshot.create(repository="packed", snapshot="s2", params={"wait_for_completion": "true"})
        plain = {k: v for k, v in metadata_files(location).items() if k not in compressed}
        assert plain and all(v.startswith(b"{") for v in plain.values()), list(plain)
        names = [s["snapshot"] for s in client.snapshot.get(repository="packed", snapshot="_all")["snapshots"]]
        assert names == ["s1", "s2"]
        assert status_stats(client, "packed", "s1")["total"]["file_count"] > 0


def test_snapshot_requests_that_cannot_be_honoured_are_refused_with_the_reason(tmp_path):
    with cluster(tmp_path, 1) as c:
        http, client = c.http(0), c.client(0)
        assert_error(http.put("/_snapshot/outside", {"type": "fs", "settings": {"location": "/etc"}}),
                     400, "repository_exception", reason_re=r"doesn't match any of the locations specified by path.repo")
        assert_error(http.put("/_snapshot/chunked", {"type": "fs", "settings": {"location": "p", "chunk_size": "0b"}}),
                     400, "repository_exception", reason_re=r"\[chunk_size\] value \[0b\]: it must be above zero")
        assert_error(http.put("/_snapshot/packed", {"type": "fs", "settings": {"location": "p", "compress": "yes"}}),
                     400, "repository_exception", reason_re=r"only \[true\] or \[false\] are allowed")
        assert_error(http.put("/_snapshot/x", {"type": "hdfs", "settings": {}}), 400,
                     "repository_verification_exception", reason_re=r"type \[hdfs\] does not exist")
        with pytest.raises(NotFoundError) as missing:
            client.snapshot.get(repository="nowhere", snapshot="s")
        assert missing.value.error == "repository_missing_exception"

        client.snapshot.create_repository(repository="r", body={"type": "fs", "settings": {"location": "r"}})
        assert c.get("/_cat/repositories", 0, h="id,type").text.split() == ["r", "fs"]
        client.indices.create(index="a", body={"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
        assert_error(http.put("/_snapshot/r/Upper", {}), 400, "invalid_snapshot_name_exception", reason_re="lowercase")
        assert_error(http.put("/_snapshot/r/s", {"indices": "a", "wait": True}), 400, "parsing_exception",
                     reason_re=r"\[wait\]")
        assert_error(http.put("/_snapshot/r/s", {}, params={"wait_for_completion": "true", "bogus": "1"}), 400,
                     "illegal_argument_exception", reason_re=r"unrecognized parameter: \[bogus\]")
        client.snapshot.create(repository="r", snapshot="s", params={"wait_for_completion": "true"})
        assert_error(http.put("/_snapshot/r/s", {}), 400, "invalid_snapshot_name_exception",
                     reason_re="snapshot with the same name already exists")
        with pytest.raises(NotFoundError) as missing:
            client.snapshot.get(repository="r", snapshot="nope")
        assert missing.value.error == "snapshot_missing_exception"
        assert_error(http.post("/_snapshot/r/s/_restore", {}), 400, "snapshot_restore_exception",
                     reason_re=r"cannot restore index \[a\] because an open index with same name already exists")
        assert_error(http.post("/_snapshot/r/s/_restore", {"rename_pattern": "a", "rename_replacement": "b",
                                                           "index_settings": {"index.number_of_shards": 2}}),
                     400, "snapshot_restore_exception", reason_re=r"index.number_of_shards")
        with pytest.raises(RequestError):
            client.snapshot.restore(repository="r", snapshot="s", body={"storage_type": "remote_snapshot"})
        with pytest.raises(NotFoundError):
            client.snapshot.restore(repository="r", snapshot="s", body={"indices": "zzz"})
        # A restore that changes what may change: replicas, and a setting removed.
        client.snapshot.restore(repository="r", snapshot="s", body={
            "rename_pattern": "a", "rename_replacement": "a2",
            "index_settings": {"index.number_of_replicas": 0, "index.refresh_interval": "5s"}},
            params={"wait_for_completion": "true"})
        got = client.indices.get_settings(index="a2", flat_settings=True)["a2"]["settings"]
        assert got["index.refresh_interval"] == "5s"
        client.snapshot.delete_repository(repository="r")
        with pytest.raises(TransportError) as gone:
            client.snapshot.get_repository(repository="r")
        assert gone.value.status_code == 404


def test_snapshots_and_restores_keep_to_the_repository_rates(tmp_path):
    """`max_snapshot_bytes_per_sec` paces uploads and `max_restore_bytes_per_sec` downloads
    (OpenSearch's repository settings; `0` is unlimited); a rate that is no byte size is refused."""
    with cluster(tmp_path, 1) as c:
        http, client = c.http(0), c.client(0)
        assert_error(http.put("/_snapshot/bad", {"type": "fs", "settings": {
            "location": "bad", "max_snapshot_bytes_per_sec": "fast"}}), 400, "repository_exception",
            reason_re=r"max_snapshot_bytes_per_sec")
        client.indices.create(index="paced", body={"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
        size = c.load_incompressible(0, "paced")
        rate = size // 3  # about three seconds for the whole store

        def timed_snapshot(repository: str, settings: dict) -> float:
            client.snapshot.create_repository(repository=repository, body={"type": "fs", "settings": {
                "location": repository, **settings}})
            started = time.monotonic()
            client.snapshot.create(repository=repository, snapshot="s", params={"wait_for_completion": "true"})
            return time.monotonic() - started

        def timed_restore(repository: str, name: str) -> float:
            started = time.monotonic()
            client.snapshot.restore(repository=repository, snapshot="s", body={
                "indices": "paced", "rename_pattern": "paced", "rename_replacement": name},
                params={"wait_for_completion": "true"})
            c.wait_for_status("green", timeout=120)
            return time.monotonic() - started

        slow = timed_snapshot("slow", {"max_snapshot_bytes_per_sec": f"{rate}b",
                                       "max_restore_bytes_per_sec": f"{rate}b"})
        fast = timed_snapshot("fast", {"max_snapshot_bytes_per_sec": "0"})
        slow_restore, fast_restore = timed_restore("slow", "paced-slow"), timed_restore("fast", "paced-fast")
        print(f"\n[figure] {size} bytes at {rate} B/s: snapshot {slow:.2f}s (unlimited {fast:.2f}s), "
              f"restore {slow_restore:.2f}s (unlimited {fast_restore:.2f}s)")
        assert size > 2_000_000, size
        assert slow >= 2.0 and fast < slow / 2, (slow, fast)
        assert slow_restore >= 2.0 and fast_restore < slow_restore / 2, (slow_restore, fast_restore)
        assert client.count(index="paced-slow")["count"] == 1500


def test_a_snapshot_restores_over_a_closed_index_of_the_same_shape(tmp_path):
    """As in OpenSearch: a closed index of the same name and number of shards is replaced by the
    restored one (an open one, or one of another number of shards, is refused)."""
    with cluster(tmp_path) as c:
        client = c.client(0)
        client.snapshot.create_repository(repository="r", body={"type": "fs", "settings": {"location": "r"}})
        client.indices.create(index="orders", body={"settings": {"number_of_shards": 2, "number_of_replicas": 1}})
        client.indices.create(index="other", body={"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
        c.wait_for_status("green")
        load(c, "orders", 0, 600)
        snapshotted = documents(c, "orders")
        client.snapshot.create(repository="r", snapshot="s", params={"wait_for_completion": "true"})
        load(c, "orders", 600, 200)  # written after the snapshot: gone once it is restored over
        client.indices.close(index="orders")
        client.indices.close(index="other")
        assert_error(c.http(0).post("/_snapshot/r/s/_restore", {"indices": "orders", "rename_pattern": "orders",
                                                                 "rename_replacement": "other"}),
                     400, "snapshot_restore_exception",
                     reason_re=r"cannot restore index \[other\] with \[1\] shards from a snapshot of index \[orders\] with \[2\] shards")

        restored = client.snapshot.restore(repository="r", snapshot="s", body={"indices": "orders"},
                                           params={"wait_for_completion": "true"})
        assert restored["snapshot"]["shards"] == {"total": 2, "failed": 0, "successful": 2}, restored
        c.wait_for_status("green", timeout=120)
        assert documents(c, "orders") == snapshotted
        state = client.cluster.state(metric="metadata", index="orders")["metadata"]["indices"]["orders"]
        assert state["state"] == "open", state
        client.index(index="orders", id="after", body={"title": "written after the restore"}, refresh=True)
        assert client.count(index="orders")["count"] == len(snapshotted) + 1


def test_deleting_a_running_snapshot_aborts_it_and_leaves_no_blob(tmp_path):
    """As in OpenSearch: `DELETE` of a snapshot still running stops it; the create waiting for it
    answers that it was aborted, and nothing it uploaded stays in the repository."""
    with cluster(tmp_path, 1) as c:
        http, client = c.http(0), c.client(0)
        client.indices.create(index="big", body={"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
        c.load_incompressible(0, "big")
        client.snapshot.create_repository(repository="r", body={"type": "fs", "settings": {
            "location": "r", "max_snapshot_bytes_per_sec": "200kb"}})  # about 15 s for the shard
        answers = []
        creating = threading.Thread(target=lambda: answers.append(http.put(
            "/_snapshot/r/slow", {}, params={"wait_for_completion": "true"})))
        creating.start()
        wait_for(lambda: c.get("/_snapshot/r/_current", 0).json().get("snapshots"), timeout=10,
                 what="the snapshot running")
        started = time.monotonic()
        r = http.delete("/_snapshot/r/slow")
        took = time.monotonic() - started
        creating.join(timeout=60)
        print(f"\n[figure] deleting a running snapshot took {took:.2f}s")
        assert r.status_code == 200, r.text
        # The shard's one file waits about 15 s for its turn at 200kb/s: the abort stops that wait.
        assert took < 3, took
        assert_error(answers[0], 409, "snapshot_exception", reason_re="aborted by deletion")
        assert c.get("/_snapshot/r/_all", 0).json()["snapshots"] == []
        blobs = list((tmp_path / "backups" / "r" / "blobs").glob("*"))
        assert blobs == [], blobs
        client.snapshot.create_repository(repository="r", body={"type": "fs", "settings": {
            "location": "r", "max_snapshot_bytes_per_sec": "0"}})
        taken = client.snapshot.create(repository="r", snapshot="after", params={"wait_for_completion": "true"})
        assert taken["snapshot"]["state"] == "SUCCESS", taken


def test_the_status_of_a_running_snapshot_answers_the_same_on_every_node(tmp_path):
    """Only a snapshot's coordinator knows its shards' progress; any other node asks it."""
    with cluster(tmp_path, 2) as c:
        http = c.http(0)
        c.client(0).indices.create(index="big", body={"settings": {"number_of_shards": 2, "number_of_replicas": 0}})
        c.wait_for_status("green")
        c.load_incompressible(0, "big")
        c.client(0).snapshot.create_repository(repository="r", body={"type": "fs", "settings": {
            "location": "r", "max_snapshot_bytes_per_sec": "100kb"}})  # about 30 s for the index
        r = http.put("/_snapshot/r/slow", {})
        assert r.status_code == 200 and r.json() == {"accepted": True}, r.text

        def running_status(i: int) -> dict:
            status = c.get("/_snapshot/r/slow/_status", i).json()["snapshots"][0]
            assert status["state"] == "STARTED", status
            return status

        wait_for(lambda: running_status(0)["shards_stats"]["total"] == 2, timeout=10,
                 what="the coordinator listing the running snapshot's shards")
        for i in (0, 1):
            status = running_status(i)
            assert status["shards_stats"]["total"] == 2, (i, status)
            assert sorted(status["indices"]["big"]["shards"]) == ["0", "1"], (i, status)
            assert c.get("/_snapshot/r/_status", i).json()["snapshots"][0]["shards_stats"]["total"] == 2
        assert http.delete("/_snapshot/r/slow").status_code == 200


def test_cleanup_removes_what_an_interrupted_snapshot_left_and_keeps_what_snapshots_need(tmp_path):
    with cluster(tmp_path, 1) as c:
        client = repository_and_index(c, "docs", 500)
        client.snapshot.create(repository="r", snapshot="kept", params={"wait_for_completion": "true"})
        nothing = c.http(0).post("/_snapshot/r/_cleanup")
        assert nothing.status_code == 200, nothing.text
        assert nothing.json() == {"results": {"deleted_bytes": 0, "deleted_blobs": 0}}

        # What a snapshot killed before it was listed leaves behind: a blob and its own file.
        root = tmp_path / "backups" / "r"
        (root / "blobs" / "_orphan.store__7__0").write_bytes(b"orphan!")
        (root / "snap-unlisted.json").write_text("{}")
        cleaned = c.http(0).post("/_snapshot/r/_cleanup")
        assert cleaned.status_code == 200, cleaned.text
        assert cleaned.json() == {"results": {"deleted_bytes": 9, "deleted_blobs": 2}}
        assert not (root / "blobs" / "_orphan.store__7__0").exists()
        assert not (root / "snap-unlisted.json").exists()

        client.snapshot.restore(repository="r", snapshot="kept", body={
            "indices": "docs", "rename_pattern": "docs", "rename_replacement": "docs-back"},
            params={"wait_for_completion": "true"})
        c.wait_for_status("green")
        assert client.count(index="docs-back")["count"] == 500
        missing = c.http(0).post("/_snapshot/nope/_cleanup")
        assert missing.status_code == 404, missing.text


def test_a_clone_keeps_its_indices_restorable_after_the_source_snapshot_is_deleted(tmp_path):
    with cluster(tmp_path, 1) as c:
        client = c.client(0)
        client.snapshot.create_repository(repository="r", body={"type": "fs", "settings": {"location": "r"}})
        for index in ("kept", "dropped"):
            client.indices.create(index=index, body={"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
            load(c, index, 0, 300)
        before = documents(c, "kept")
        client.snapshot.create(repository="r", snapshot="source", params={"wait_for_completion": "true"})
        blobs = tmp_path / "backups" / "r" / "blobs"
        stored = sorted(p.name for p in blobs.iterdir())

        cloned = c.http(0).put("/_snapshot/r/source/_clone/copy", {"indices": "kept"})
        assert cloned.status_code == 200 and cloned.json() == {"acknowledged": True}, cloned.text
        # Nothing copied: the clone names blobs the source holds.
        assert sorted(p.name for p in blobs.iterdir()) == stored
        info = client.snapshot.get(repository="r", snapshot="copy")["snapshots"][0]
        assert info["indices"] == ["kept"] and info["state"] == "SUCCESS", info
        taken = c.http(0).put("/_snapshot/r/source/_clone/copy", {"indices": "kept"})
        assert_error(taken, 400, "invalid_snapshot_name_exception")
        no_indices = c.http(0).put("/_snapshot/r/source/_clone/other", {})
        assert no_indices.status_code == 400, no_indices.text

        client.snapshot.delete(repository="r", snapshot="source")
        client.snapshot.restore(repository="r", snapshot="copy", body={
            "indices": "kept", "rename_pattern": "kept", "rename_replacement": "kept-back"},
            params={"wait_for_completion": "true"})
        c.wait_for_status("green")
        assert documents(c, "kept-back") == before
