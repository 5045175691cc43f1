"""A multi-node Shoal cluster of real processes on 127.0.0.1, for tests that need one.

    with ShoalCluster(tmp_path, 3, attrs=[{"zone": "a"}, {"zone": "b"}, {"zone": "c"}]) as c:
        c.wait_for_nodes(3)
        c.kill(0); c.stop(1); c.cont(1); c.restart(0)

Every node lists every node as a seed; the cluster-manager-eligible ones form the first voting
configuration. On failure the node logs are printed by `dump_logs()` (the fixture calls it).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import requests

from conftest import ShoalNode, free_port


class ShoalCluster:
    def __init__(self, workdir: Path, n: int, *, attrs: list[dict] | None = None,
                 roles: list[str | None] | None = None, settings: dict | None = None):
        self.workdir = Path(workdir)
        self.nodes: list[ShoalNode] = []
        ports = [free_port() for _ in range(n)]
        seeds = ",".join(f"127.0.0.1:{p}" for p in ports)
        names = [f"node-{i}" for i in range(n)]
        eligible = [names[i] for i in range(n) if roles is None or roles[i] is None or "cluster_manager" in roles[i]]
        for i in range(n):
            node_settings = {
                "transport.port": str(ports[i]),
                "discovery.seed_hosts": seeds,
                "cluster.initial_cluster_manager_nodes": ",".join(eligible),
            }
            for k, v in (attrs[i] if attrs else {}).items():
                node_settings[f"node.attr.{k}"] = v
            if roles is not None and roles[i] is not None:
                node_settings["node.roles"] = roles[i]
            node_settings.update(settings or {})
            node = ShoalNode(self.workdir / names[i], name=names[i], settings=node_settings)
            node.transport_port = ports[i]
            self.nodes.append(node)
        self.stopped: set[int] = set()

    def __enter__(self) -> "ShoalCluster":
        """Starts every node and waits until they form one cluster; on the way out (also from
        a failed test inside the block) prints the node logs, then stops everything."""
        try:
            self.start()
            self.wait_for_nodes(len(self.nodes))
        except BaseException:
            self.__exit__(*__import__("sys").exc_info())
            raise
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            print(self.dump_logs())
        self.close()

    def start(self) -> None:
        for node in self.nodes:
            node.start()

    def close(self) -> None:
        for i in list(self.stopped):
            self.cont(i)
        for node in self.nodes:
            node.kill9()

    def http(self, i: int = 0):
        return self.nodes[i].http()

    def bulk(self, i: int, index: str, docs: dict, refresh: str = "true") -> dict:
        """Indexes `docs` ({id: source}) through node i with one `_bulk`; fails the test on an
        HTTP error or an item error."""
        lines = []
        for doc_id, source in docs.items():
            lines.append(json.dumps({"index": {"_index": index, "_id": str(doc_id)}}))
            lines.append(json.dumps(source))
        r = self.http(i).post("/_bulk", "\n".join(lines) + "\n", params={"refresh": refresh},
                              headers={"Content-Type": "application/x-ndjson"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert not body["errors"], [item for item in body["items"] if "error" in next(iter(item.values()))][:3]
        return body

    def every_hit(self, index: str, i: int = 0, *, source: bool = True, params: dict | None = None,
                  only_held: bool = False) -> list[dict]:
        """Every hit of a match_all on `index` through node i, read with a scroll so no count
        caps it (a plain search stops at 10,000 hits, which once looked like lost writes).
        `only_held`: the search is pinned to nodes (`preference=_only_nodes:…`) that may hold
        no copy of some shards; those shards' "no active copy" failures are expected."""
        http = self.http(i)
        r = http.post(f"/{index}/_search", {"size": 5000, "_source": source, "track_total_hits": True,
                                                 "sort": ["_doc"], "query": {"match_all": {}}},
                      params={**(params or {}), "scroll": "1m"})
        hits, total = [], None
        while True:
            # A failed shard would leave its documents out of the total as well as the hits.
            assert r.status_code == 200, r.text
            shards = r.json()["_shards"]
            if only_held:
                assert all(f["reason"]["type"] == "no_shard_available_action_exception"
                           for f in shards.get("failures", [])), r.text
            else:
                assert shards["failed"] == 0, r.text
            total = r.json()["hits"]["total"]["value"] if total is None else total
            if not r.json()["hits"]["hits"]:
                break
            hits += r.json()["hits"]["hits"]
            r = http.post("/_search/scroll", {"scroll": "1m", "scroll_id": r.json()["_scroll_id"]})
        http.delete("/_search/scroll", {"scroll_id": [r.json()["_scroll_id"]]})
        assert len(hits) == total, f"the scroll returned {len(hits)} hits of {total}"
        return hits

    def load_incompressible(self, i: int, index: str, docs: int = 1500) -> int:
        """Indexes `docs` documents of 2 kB of random hex through node i (about 3 MB for 1500:
        nothing compression can shrink), flushes, and returns the primaries' store bytes."""
        for start in range(0, docs, 500):
            self.bulk(i, index, {str(n): {"n": n, "filler": os.urandom(1000).hex()}
                                 for n in range(start, min(start + 500, docs))}, refresh="false")
        r = self.http(i).post(f"/{index}/_flush")
        assert r.status_code == 200, r.text
        rows = self.get(f"/_cat/indices/{index}", i, format="json", h="pri.store.size", bytes="b").json()
        return int(rows[0]["pri.store.size"])

    def client(self, i: int = 0):
        return self.nodes[i].client()

    def live(self) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n.alive() and i not in self.stopped]

    def get(self, path: str, i: int | None = None, **params):
        """GET on node i, or on the first live node that answers."""
        order = [i] if i is not None else self.live()
        last = None
        for j in order:
            try:
                return requests.get(self.nodes[j].url + path, params=params, timeout=10)
            except requests.RequestException as e:
                last = e
        raise RuntimeError(f"no node answered {path}: {last}")

    def health(self, i: int | None = None, **params) -> dict:
        return self.get("/_cluster/health", i, **params).json()

    def wait_for_nodes(self, n: int, timeout: float = 60, i: int | None = None) -> dict:
        return self.wait(lambda h: h.get("number_of_nodes") == n, timeout, i, f"{n} nodes")

    def wait_for_status(self, status: str, timeout: float = 60, i: int | None = None) -> dict:
        order = {"green": 0, "yellow": 1, "red": 2}
        return self.wait(lambda h: h.get("status") in order and order[h["status"]] <= order[status], timeout, i, status)

    def wait(self, predicate, timeout: float, i: int | None, what: str) -> dict:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.health(i)
                if predicate(last):
                    return last
            except Exception as e:  # a node may be restarting
                last = repr(e)
            time.sleep(0.1)
        raise AssertionError(f"cluster did not reach {what} within {timeout}s; last health: {last}\n{self.dump_logs()}")

    def wait_for_agreement(self, status: str = "green", timeout: float = 120) -> None:
        """Waits until every live node applies the same cluster state version, with `status`.
        A restarted node answers from the state it persisted until it catches up with the
        cluster manager: a test must not read the cluster through a stale view."""
        deadline = time.monotonic() + timeout
        order = {"green": 0, "yellow": 1, "red": 2}
        seen = None
        while time.monotonic() < deadline:
            try:
                views = {(self.get("/_cluster/state/version", i).json()["version"], self.health(i)["status"])
                         for i in self.live()}
            except Exception as e:  # a node may still be starting
                seen = repr(e)
                time.sleep(0.2)
                continue
            if len(views) == 1:
                version, health = next(iter(views))
                if health in order and order[health] <= order[status]:
                    time.sleep(0.5)  # one more look: nothing was still in flight
                    again = {self.get("/_cluster/state/version", i).json()["version"] for i in self.live()}
                    if again == {version}:
                        return
            seen = views
            time.sleep(0.2)
        raise AssertionError(f"nodes did not agree on a {status} cluster state within {timeout}s: {seen}\n{self.dump_logs()}")

    def cluster_manager(self, i: int | None = None, wait_s: float = 10.0) -> str | None:
        """The cluster manager node `i` knows of (its own view), waiting up to `wait_s` while it
        knows none (between a manager's loss and the next election); then `None`."""
        deadline = time.monotonic() + wait_s
        while True:
            rows = self.get("/_cat/cluster_manager", i, format="json", h="node", local="true").json()
            name = rows[0]["node"] if rows else "-"
            if name != "-":
                return name
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def index_of(self, name: str) -> int:
        return [n.name for n in self.nodes].index(name)

    def kill(self, i: int) -> None:
        self.nodes[i].kill9()

    def stop(self, i: int) -> None:
        """SIGSTOP: the process hangs without closing its sockets."""
        self.nodes[i].proc.send_signal(signal.SIGSTOP)
        self.stopped.add(i)

    def cont(self, i: int) -> None:
        if i in self.stopped and self.nodes[i].alive():
            self.nodes[i].proc.send_signal(signal.SIGCONT)
        self.stopped.discard(i)

    def restart(self, i: int) -> None:
        self.nodes[i].kill9()
        self.nodes[i].start()

    def dump_logs(self, lines: int = 60) -> str:
        return "\n".join(n.log_tail(lines) for n in self.nodes)


def numbered(ids) -> dict:
    """Documents `{"n": n, "text": "document number n"}` by id `n`, for `ShoalCluster.bulk`."""
    return {n: {"n": n, "text": f"document number {n}"} for n in ids}
