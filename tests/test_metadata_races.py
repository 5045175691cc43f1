"""Index metadata changed through several nodes at once: no change undoes another.

Each node edits its own copy of an index's metadata (mappings from dynamic fields, settings,
aliases) and the cluster manager publishes it. A node that had not yet applied a change made
through another node must not publish its older copy over it.
"""

from __future__ import annotations

import threading

import pytest

from cluster import ShoalCluster

pytestmark = pytest.mark.cluster

ROUNDS = 12


def test_concurrent_mapping_settings_and_alias_changes_through_three_nodes_all_survive(tmp_path):
    with ShoalCluster(tmp_path, 3) as c:
        r = c.http(0).put("/meta", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green")
        errors: list[str] = []

        def dynamic_fields(node: int):
            for k in range(ROUNDS):
                r = c.http(node).put(f"/meta/_doc/n{node}-{k}", {f"f_{node}_{k}": k})
                if r.status_code not in (200, 201):
                    errors.append(r.text)

        def settings_and_aliases(node: int):
            for k in range(ROUNDS):
                r = c.http(node).put("/meta/_settings", {"index": {"max_result_window": 10_000 + k}})
                if r.status_code != 200:
                    errors.append(r.text)
                r = c.http(node).post("/_aliases", {"actions": [{"add": {"index": "meta", "alias": f"a{node}-{k}"}}]})
                if r.status_code != 200:
                    errors.append(r.text)

        threads = [threading.Thread(target=dynamic_fields, args=(0,)),
                   threading.Thread(target=dynamic_fields, args=(1,)),
                   threading.Thread(target=settings_and_aliases, args=(2,))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        c.wait_for_agreement("green", timeout=30)
        for i in range(3):
            mapping = c.http(i).get("/meta/_mapping").json()["meta"]["mappings"]["properties"]
            missing = [f"f_{n}_{k}" for n in (0, 1) for k in range(ROUNDS) if f"f_{n}_{k}" not in mapping]
            assert missing == [], f"node {i} lost mapped fields {missing}"
            aliases = c.http(i).get("/meta/_alias").json()["meta"]["aliases"]
            assert sorted(aliases) == sorted(f"a2-{k}" for k in range(ROUNDS)), aliases
            window = c.http(i).get("/meta/_settings").json()["meta"]["settings"]["index"]["max_result_window"]
            assert window == str(10_000 + ROUNDS - 1)
