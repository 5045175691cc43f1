"""Primary terms across remote-store restores, on real processes. The cluster metadata a fresh
cluster takes back from the state repository can be older than the shard's history in the
translog and segment repositories (the state is uploaded asynchronously): a restored primary
must still write above every term that history holds, or a later restore prefers the old
history ("highest term wins", term starts) and drops its acknowledged writes.
"""

from __future__ import annotations

import json
import shutil

import pytest

from cluster import ShoalCluster
from test_remote_store import fs_repository, remote_settings
from util import wait_for

pytestmark = pytest.mark.cluster

INDEX = "ledger"


def state_settings(tmp_path) -> dict:
    return {**remote_settings(fs_repository(tmp_path)),
            "node.attr.remote_store.state.repository": "r1",
            "cluster.remote_store.state.enabled": "true"}


def state_folder(tmp_path):
    return tmp_path / "repo" / "cluster-state" / "shoal-test"


def uploaded_term(tmp_path) -> int | None:
    """The shard's primary term in the newest cluster metadata the state repository holds."""
    folder = state_folder(tmp_path)
    files = sorted(p for p in folder.iterdir() if p.name.startswith("metadata__")) if folder.exists() else []
    if not files:
        return None
    indices = json.loads(files[-1].read_text())["indices"]
    return next((m["primary_terms"][0] for m in indices if m["name"] == INDEX), None)


def primary_term(c: ShoalCluster) -> int:
    meta = c.get(f"/_cluster/state/metadata/{INDEX}", 0).json()["metadata"]["indices"][INDEX]
    return int(meta["primary_terms"]["0"])


def stored_terms(tmp_path, uuid: str) -> set[int]:
    """Every primary term the shard's translog batches, term starts and metadata files name."""
    shard = tmp_path / "repo" / uuid / "0"
    names = [p.name for folder in ("translog/data", "translog/terms") for p in (shard / folder).iterdir()]
    names += [p.name.removeprefix("metadata__") for p in (shard / "segments/metadata").iterdir()]
    return {int(name.split("__")[0]) for name in names}


def index_uuid(c: ShoalCluster) -> str:
    return c.get(f"/{INDEX}/_settings", 0).json()[INDEX]["settings"]["index"]["uuid"]


def write(c: ShoalCluster, acked: dict, era: int, ids: list[str]) -> None:
    """Indexes `{"era": era}` under `ids`; every one acknowledged is recorded with its value."""
    c.bulk(0, INDEX, {doc_id: {"era": era} for doc_id in ids}, refresh="false")
    acked.update({doc_id: era for doc_id in ids})


def fail_over(c: ShoalCluster) -> None:
    """Cancels the started primary: its in-sync replica takes over under the next term, and
    the old primary's node recovers a new replica."""
    before = primary_term(c)
    rows = c.get(f"/_cat/shards/{INDEX}", 0, format="json", h="prirep,node").json()
    primary = next(row["node"] for row in rows if row["prirep"] == "p")
    r = c.http(0).post("/_cluster/reroute", {"commands": [
        {"cancel": {"index": INDEX, "shard": 0, "node": primary, "allow_primary": True}}]})
    assert r.status_code == 200, r.text
    assert primary_term(c) == before + 1
    c.wait_for_status("green", timeout=60)


def lose_every_node(c: ShoalCluster, held_state=None) -> None:
    """kill -9 every node and delete its data directory; with `held_state`, the state
    repository goes back to that copy (the uploads made since never landed). Fresh nodes
    start and take the index back from the state repository, red."""
    for i in range(len(c.nodes)):
        c.kill(i)
    for node in c.nodes:
        shutil.rmtree(node.data)
        node.data.mkdir()
    if held_state is not None:
        shutil.rmtree(held_state["folder"])
        shutil.copytree(held_state["copy"], held_state["folder"])
    for node in c.nodes:
        node.start()
    c.wait_for_nodes(len(c.nodes))
    wait_for(lambda: c.http(0).get(f"/{INDEX}").status_code == 200, timeout=60,
             what="the index metadata back from the state repository")
    assert c.health(0)["status"] == "red"


def restore(c: ShoalCluster) -> None:
    r = c.http(0).post("/_remotestore/_restore", {"indices": [INDEX]}, params={"wait_for_completion": "true"})
    assert r.status_code == 200, r.text
    assert r.json()["remote_store"]["shards"] == {"total": 1, "failed": 0, "successful": 1}, r.text
    c.wait_for_status("green", timeout=120)


def assert_every_acknowledged_write(c: ShoalCluster, acked: dict) -> None:
    assert c.http(0).post(f"/{INDEX}/_refresh").status_code == 200
    hits = c.every_hit(INDEX)
    found = {hit["_id"]: hit["_source"]["era"] for hit in hits}
    assert len(found) == len(hits), "a document is found more than once"
    wrong = {doc_id: (era, found.get(doc_id)) for doc_id, era in acked.items() if found.get(doc_id) != era}
    assert not wrong, f"{len(wrong)} acknowledged writes lost or old (id: (acknowledged, found)): " \
                      f"{dict(sorted(wrong.items())[:5])}"


def test_a_primary_restored_from_metadata_older_than_its_repository_writes_above_every_stored_term(tmp_path):
    """The state repository holds the index at term 1 while two failovers write history at
    terms 2 and 3; every node and disk is lost. The restored primary must take a term above 3:
    the writes it acknowledges survive a second loss and restore, with their values."""
    roles = ["cluster_manager", "data,ingest", "data,ingest"]
    with ShoalCluster(tmp_path, 3, roles=roles, settings=state_settings(tmp_path)) as c:
        r = c.http(0).put(f"/{INDEX}", {"settings": {
            "number_of_shards": 1, "number_of_replicas": 1, "index.translog.durability": "request",
            "index.remote_store.translog.buffer_interval": "20ms"}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green")
        acked: dict[str, int] = {}
        shared = [f"doc-{n}" for n in range(10)]  # written again in every era: the newest value wins
        write(c, acked, 1, shared + [f"era1-{n}" for n in range(10)])
        wait_for(lambda: uploaded_term(tmp_path) == 1, timeout=30, what="the index uploaded at term 1")
        held = {"folder": state_folder(tmp_path), "copy": tmp_path / "held-state"}
        shutil.copytree(held["folder"], held["copy"])

        for era in (2, 3):
            fail_over(c)
            write(c, acked, era, shared + [f"era{era}-{n}" for n in range(10)])
        history = stored_terms(tmp_path, index_uuid(c))
        assert max(history) == 3, history

        lose_every_node(c, held_state=held)
        assert primary_term(c) == 1, "the state repository should hold the index at term 1"
        restore(c)
        restored_term = primary_term(c)
        assert restored_term > max(history), (restored_term, history)
        assert_every_acknowledged_write(c, acked)
        write(c, acked, 4, shared + [f"era4-{n}" for n in range(10)])
        assert_every_acknowledged_write(c, acked)

        wait_for(lambda: uploaded_term(tmp_path) == restored_term, timeout=30,
                 what="the restored term uploaded to the state repository")
        lose_every_node(c)
        restore(c)
        assert primary_term(c) > restored_term
        assert_every_acknowledged_write(c, acked)
