"""A remote-backed primary moved to another node under writes while its segment uploads lag
(`max_remote_upload_bytes_per_sec`): every acknowledged write is on the new primary, and the
node it left uploads nothing after it left.

The target's peer recovery copies the primary's current commit; the repository's newest
checkpoint is older. Installing that one (as a remote-backed replica does) would drop the
operations between the two, which the target's new translog does not hold either: promoted,
it filled them in as no-ops (1,260 to 1,660 acknowledged writes lost per run before the fix).
A late metadata file from the old node would name its last commit, which reads as newer than
the new primary's commits until their versions pass it.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from cluster import ShoalCluster
from test_remote_store import REPO, fs_repository, ids_in, remote_settings, write_under_load
from util import wait_for

pytestmark = pytest.mark.cluster

INDEX = "moving"


def copies_on(c: ShoalCluster) -> dict[str, str]:
    rows = c.get(f"/_cat/shards/{INDEX}", 0, format="json", h="node,state").json()
    return {r["node"]: r["state"] for r in rows if r["node"]}


def uploaded_metadata(repo, index_uuid: str) -> list[dict]:
    folder = repo / index_uuid / "0" / "segments" / "metadata"
    return [json.loads(f.read_text()) for f in folder.iterdir() if f.name.startswith("metadata__")]


def test_a_primary_moved_while_its_uploads_lag_keeps_every_write_and_its_old_node_uploads_nothing_after(tmp_path):
    repository = fs_repository(tmp_path)
    repository[f"{REPO}.settings.max_remote_upload_bytes_per_sec"] = "20kb"
    with ShoalCluster(tmp_path, 3, settings=remote_settings(repository)) as c:
        r = c.http(0).put(f"/{INDEX}", {"settings": {
            "number_of_shards": 1, "number_of_replicas": 0,
            "index.translog.durability": "request",
            "index.remote_store.translog.buffer_interval": "20ms",
            "index.refresh_interval": "300ms",
            "index.routing.allocation.require._name": "node-1"}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green")
        index_uuid = c.get(f"/{INDEX}/_settings", 0, flat_settings="true").json()[INDEX]["settings"]["index.uuid"]
        ids = {n["name"]: node_id for node_id, n in c.get("/_nodes", 0).json()["nodes"].items()}

        acked: set[str] = set()
        load = threading.Thread(target=lambda: acked.update(write_under_load(c, INDEX, seconds=6, writers=1)))
        load.start()
        time.sleep(2)
        r = c.http(0).put(f"/{INDEX}/_settings", {"index.routing.allocation.require._name": "node-2"})
        assert r.status_code == 200, r.text
        wait_for(lambda: copies_on(c) == {"node-2": "STARTED"}, timeout=60, what="the primary moved to node-2")
        left_at = time.time() * 1000
        load.join()
        # Longer than the old node's upload in flight would take at its rate.
        time.sleep(6)

        late = [m for m in uploaded_metadata(tmp_path / "repo", index_uuid)
                if m["node"] == ids["node-1"] and m["uploaded_at_millis"] > left_at]
        assert not late, (f"node-1 uploaded {len(late)} metadata file(s) after its copy left, e.g. version "
                          f"{late[0]['checkpoint']['version']} at {late[0]['uploaded_at_millis'] - left_at:.0f} ms")
        assert c.http(0).post(f"/{INDEX}/_refresh").status_code == 200
        newest = max(uploaded_metadata(tmp_path / "repo", index_uuid),
                     key=lambda m: (m["checkpoint"]["primary_term"], m["checkpoint"]["version"], m["uploaded_at_millis"]))
        assert newest["node"] == ids["node-2"], "the newest checkpoint in the repository is not the new primary's"
        assert len(acked) > 100, f"too few writes acknowledged: {len(acked)}"
        lost = acked - ids_in(c, INDEX)
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged writes lost in the move, e.g. {sorted(lost)[:5]}"
