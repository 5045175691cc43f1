"""Cluster administration APIs: allocation explain, reroute, voting config exclusions,
`_cat/allocation`, `_cat/nodeattrs`, `_cat/pending_tasks`, `_nodes` and the health waits.

Single-node checks run on the session node (they leave nothing behind); the multi-node ones
start real clusters (`cluster` marker).
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from cluster import ShoalCluster
from util import assert_error, wait_for

# ------------------------------------------------------------------------ allocation explain


def test_explain_unassigned_replica_on_one_node_names_the_same_shard_decider(http, index_name):
    r = http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 1}})
    assert r.status_code == 200, r.text
    r = http.get("/_cluster/allocation/explain", {"index": index_name, "shard": 0, "primary": False})
    assert r.status_code == 200, r.text
    b = r.json()
    assert (b["index"], b["shard"], b["primary"], b["current_state"]) == (index_name, 0, False, "unassigned")
    assert b["unassigned_info"]["reason"] == "INDEX_CREATED"
    assert b["can_allocate"] == "no"
    assert b["allocate_explanation"] == "cannot allocate because allocation is not permitted to any of the nodes"
    (decision,) = b["node_allocation_decisions"]
    assert decision["node_decision"] == "no"
    deciders = {d["decider"]: d for d in decision["deciders"]}
    same = deciders["same_shard"]
    assert same["decision"] == "NO"
    assert same["explanation"].startswith("a copy of this shard is already allocated to this node [")
    # Only NO decisions without include_yes_decisions; all of them with it.
    assert {d["decision"] for d in decision["deciders"]} == {"NO"}
    r = http.post("/_cluster/allocation/explain", {"index": index_name, "shard": 0, "primary": False},
                  params={"include_yes_decisions": "true", "include_disk_info": "true"})
    b = r.json()
    assert "YES" in {d["decision"] for d in b["node_allocation_decisions"][0]["deciders"]}
    assert set(b["cluster_info"]) >= {"nodes", "shard_sizes"}


def test_explain_started_primary(http, index):
    r = http.get("/_cluster/allocation/explain", {"index": index, "shard": 0, "primary": True})
    assert r.status_code == 200, r.text
    b = r.json()
    assert b["current_state"] == "started" and b["current_node"]["id"]
    assert b["can_remain_on_current_node"] == "yes"
    assert b["can_rebalance_cluster"] and b["rebalance_explanation"]


def test_explain_bad_requests(http, index):
    assert_error(http.get("/_cluster/allocation/explain", {"index": index}), 400,
                 "action_request_validation_exception",
                 reason="Validation Failed: 1: shard must be specified;2: primary must be specified;")
    assert_error(http.get("/_cluster/allocation/explain", {"index": index, "shard": 0, "primary": True, "x": 1}),
                 400, "x_content_parse_exception", reason="[cluster/allocation/explain] unknown field [x]")
    assert_error(http.get("/_cluster/allocation/explain", {"index": "no-such-index", "shard": 0, "primary": True}),
                 404, "index_not_found_exception")
    assert_error(http.get("/_cluster/allocation/explain", "[1]"), 400, "parse_exception")


def test_explain_with_nothing_unassigned_is_a_400_then_explains_the_first_unassigned_copy(node_factory):
    fresh = node_factory(name="explain-node")
    http = fresh.http()
    assert http.get("/_cluster/health", params={"wait_for_nodes": "1", "timeout": "30s"}).status_code == 200
    r = http.get("/_cluster/allocation/explain")
    # OpenSearch 2.18's text (`TransportClusterAllocationExplainAction.findShardToExplain`).
    assert_error(r, 400, "illegal_argument_exception",
                 reason="unable to find any unassigned shards to explain "
                        "[ClusterAllocationExplainRequest[useAnyUnassignedShard=true,include_yes_decisions?=false]]")
    assert http.put("/withreplica", {"settings": {"number_of_shards": 1, "number_of_replicas": 1}}).status_code == 200
    b = http.post("/_cluster/allocation/explain").json()
    assert (b["index"], b["primary"], b["current_state"]) == ("withreplica", False, "unassigned")
    assert b["node_allocation_decisions"][0]["deciders"][0]["decider"] == "same_shard"


# ----------------------------------------------------------------------------------- reroute


def test_reroute_without_commands_renders_the_state_without_metadata(http):
    r = http.post("/_cluster/reroute")
    assert r.status_code == 200, r.text
    b = r.json()
    assert b["acknowledged"] is True
    state = b["state"]
    assert "metadata" not in state
    assert set(state) >= {"cluster_uuid", "version", "state_uuid", "master_node", "cluster_manager_node",
                          "blocks", "nodes", "routing_table", "routing_nodes"}
    assert state["master_node"] == state["cluster_manager_node"]
    b = http.post("/_cluster/reroute", params={"metric": "metadata"}).json()
    assert "metadata" in b["state"] and "nodes" not in b["state"]
    b = http.post("/_cluster/reroute", params={"metric": "cluster_manager_node"}).json()
    assert "cluster_manager_node" in b["state"] and "master_node" not in b["state"]


def test_reroute_explain_turns_refused_commands_into_no_decisions(http, index):
    node_id = next(iter(http.get("/_nodes/data:true").json()["nodes"]))
    b = http.post("/_cluster/reroute", {"commands": []}, params={"explain": "true", "dry_run": "true"}).json()
    assert b["explanations"] == []
    r = http.post("/_cluster/reroute", {"commands": [{"cancel": {"index": index, "shard": 9, "node": node_id}}]},
                  params={"explain": "true", "dry_run": "true"})
    assert r.status_code == 200, r.text
    (explanation,) = r.json()["explanations"]
    assert explanation["command"] == "cancel"
    assert explanation["parameters"] == {"index": index, "shard": 9, "node": node_id, "allow_primary": False}
    (decision,) = explanation["decisions"]
    assert decision["decider"] == "cancel_allocation_command" and decision["decision"] == "NO"
    assert decision["explanation"].startswith("can't cancel 9, failed to find it on node")
    # Without explain the refusal is the error.
    r = http.post("/_cluster/reroute", {"commands": [{"cancel": {"index": index, "shard": 9, "node": node_id}}]})
    assert_error(r, 400, "illegal_argument_exception", reason_re=r"^\[cancel_allocation\] can't cancel 9")


def test_reroute_bad_bodies_are_400(http, index):
    assert_error(http.post("/_cluster/reroute", {"commands": [{"teleport": {}}]}), 400,
                 "named_object_not_found_exception",
                 reason="unable to parse AllocationCommand with name [teleport]: parser not found")
    assert_error(http.post("/_cluster/reroute", {"commands": [{"move": {"index": index, "shard": 0}}]}), 400,
                 "parse_exception", reason="[move] command missing the from_node parameter")
    assert_error(http.post("/_cluster/reroute", {"commands": [{"allocate_replica": {"index": index, "shard": 0}}]}),
                 400, "illegal_argument_exception", reason="Argument [node] must be defined")
    assert_error(http.post("/_cluster/reroute", {"commands": "move"}), 400, "parse_exception",
                 reason="commands should follow with an array element")
    assert_error(http.post("/_cluster/reroute", {"nope": 1}), 400, "x_content_parse_exception")
    assert_error(http.post("/_cluster/reroute", params={"dry_run": "maybe"}), 400, "illegal_argument_exception")
    r = http.post("/_cluster/reroute", {"commands": [{"move": {"index": index, "shard": 0, "from_node": "ghost",
                                                               "to_node": "ghost"}}]})
    assert_error(r, 400, "illegal_argument_exception", reason="failed to resolve [ghost], no matching nodes")


def copies_of(state: dict, index: str) -> list[dict]:
    return [c for copies in state["routing_table"]["indices"][index]["shards"].values() for c in copies]


def routing_node_copies(state: dict, node_id: str, index: str) -> list[dict]:
    return [c for c in state["routing_nodes"]["nodes"].get(node_id, []) if c["index"] == index]


@pytest.fixture
def cluster2(tmp_path):
    with ShoalCluster(tmp_path, 2) as c:
        yield c


@pytest.mark.cluster
def test_reroute_move_dry_run_then_real_move_keeps_the_documents(cluster2):
    http = cluster2.http(0)
    r = http.put("/moveme", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    assert r.status_code == 200, r.text
    cluster2.wait_for_status("green")
    docs = [json.dumps(line) for n in range(20) for line in ({"index": {"_id": str(n)}}, {"n": n})]
    r = http.post("/moveme/_bulk", "\n".join(docs) + "\n", params={"refresh": "true"},
                  headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 200 and not r.json()["errors"], r.text
    nodes = http.get("/_nodes").json()["nodes"]
    name_of = {node_id: info["name"] for node_id, info in nodes.items()}
    (primary,) = [c for c in copies_of(http.get("/_cluster/state").json(), "moveme")]
    source = primary["node"]
    (target,) = [n for n in name_of if n != source]
    move = {"commands": [{"move": {"index": "moveme", "shard": 0, "from_node": name_of[source],
                                   "to_node": name_of[target]}}]}

    # Dry run: the answer shows the relocation, the cluster does not change. Other work of the
    # shared cluster (a rebalance after an earlier test's index went) may publish a state
    # meanwhile, so the unchanged version is looked for over a few dry runs: one that applied
    # its move would change it every time.
    for _ in range(3):
        version = http.get("/_cluster/state/version").json()["version"]
        r = http.post("/_cluster/reroute", move, params={"dry_run": "true", "explain": "true"})
        assert r.status_code == 200, r.text
        unchanged = http.get("/_cluster/state/version").json()["version"] == version
        if unchanged:
            break
    assert unchanged, "every dry run changed the cluster state"
    b = r.json()
    (copy,) = copies_of(b["state"], "moveme")
    assert (copy["state"], copy["node"], copy["relocating_node"]) == ("RELOCATING", source, target)
    (incoming,) = routing_node_copies(b["state"], target, "moveme")
    assert (incoming["state"], incoming["relocating_node"], incoming["primary"]) == ("INITIALIZING", source, True)
    assert b["explanations"][0]["command"] == "move"
    assert b["explanations"][0]["parameters"]["to_node"] == name_of[target]
    assert {d["decision"] for d in b["explanations"][0]["decisions"]} <= {"YES", "THROTTLE"}
    (copy,) = copies_of(http.get("/_cluster/state").json(), "moveme")
    assert (copy["state"], copy["node"]) == ("STARTED", source)

    # The real move: the source relocates, the target recovers its data from it (peer
    # recovery), then replaces it. A second move of a shard in flight is refused.
    r = http.post("/_cluster/reroute", move)
    assert r.status_code == 200, r.text
    (copy,) = copies_of(r.json()["state"], "moveme")
    assert (copy["state"], copy["relocating_node"]) in {("RELOCATING", target), ("STARTED", None)}
    r = cluster2.http(1).get("/_cluster/health", params={"wait_for_no_relocating_shards": "true",
                                                         "wait_for_status": "green", "timeout": "30s"})
    assert r.status_code == 200, r.text
    (copy,) = copies_of(http.get("/_cluster/state").json(), "moveme")
    assert (copy["state"], copy["node"]) == ("STARTED", target)
    for i in range(2):
        assert cluster2.http(i).get("/moveme/_count").json()["count"] == 20
    # Cancelling a started primary needs allow_primary (OpenSearch's refusal).
    r = http.post("/_cluster/reroute", {"commands": [{"cancel": {"index": "moveme", "shard": 0,
                                                                 "node": name_of[target]}}]})
    assert r.status_code == 400, r.text


# ----------------------------------------------------------------- voting config exclusions


def test_voting_exclusions_need_exactly_one_of_node_ids_and_node_names(http):
    reason = ("Please set node identifiers correctly. One and only one of [node_name], [node_names] and "
              "[node_ids] has to be set")
    assert_error(http.post("/_cluster/voting_config_exclusions"), 400, "illegal_argument_exception", reason=reason)
    assert_error(http.post("/_cluster/voting_config_exclusions", params={"node_ids": "a", "node_names": "b"}),
                 400, "illegal_argument_exception", reason=reason)


def test_voting_exclusions_of_unknown_nodes_are_kept_as_absent(http):
    def exclusions():
        state = http.get("/_cluster/state/metadata").json()
        return state["metadata"]["cluster_coordination"]["voting_config_exclusions"]

    assert exclusions() == []
    try:
        r = http.post("/_cluster/voting_config_exclusions", params={"node_ids": "nodeId1,nodeId2"})
        assert r.status_code == 200, r.text
        r = http.post("/_cluster/voting_config_exclusions", params={"node_names": "nodeName"})
        assert r.status_code == 200, r.text
        assert exclusions() == [{"node_id": "nodeId1", "node_name": "_absent_"},
                                {"node_id": "nodeId2", "node_name": "_absent_"},
                                {"node_id": "_absent_", "node_name": "nodeName"}]
        coordination = http.get("/_cluster/state/metadata").json()["metadata"]["cluster_coordination"]
        assert len(coordination["last_committed_config"]) == 1
    finally:
        r = http.delete("/_cluster/voting_config_exclusions")
    assert r.status_code == 200, r.text
    assert exclusions() == []


@pytest.fixture
def cluster3(tmp_path):
    with ShoalCluster(tmp_path, 3, attrs=[{"zone": "a"}, {"zone": "b"}, {"zone": "c"}]) as c:
        wait_for(lambda: c.cluster_manager() is not None, 30, what="a cluster manager")
        yield c


@pytest.mark.cluster
def test_excluding_the_cluster_manager_elects_another_one_and_delete_clears(cluster3):
    old = cluster3.cluster_manager()
    other = next(i for i in range(3) if cluster3.nodes[i].name != old)
    http = cluster3.http(other)
    ids = {info["name"]: node_id for node_id, info in http.get("/_nodes").json()["nodes"].items()}

    def coordination(i=other):
        return cluster3.get("/_cluster/state/metadata", i).json()["metadata"]["cluster_coordination"]

    assert sorted(coordination()["last_committed_config"]) == sorted(ids.values())
    started = time.monotonic()
    r = http.post("/_cluster/voting_config_exclusions", params={"node_names": old, "timeout": "30s"})
    assert r.status_code == 200, r.text
    # The POST returns once the node is out of the committed voting configuration.
    c = coordination()
    assert ids[old] not in c["last_committed_config"], c
    assert c["voting_config_exclusions"] == [{"node_id": ids[old], "node_name": old}]
    new = wait_for(lambda: (m := cluster3.cluster_manager(other)) not in (None, old) and m, 30,
                   what="a new cluster manager")
    print(f"\n[timing] excluded the cluster manager: {time.monotonic() - started:.3f}s to [{new}]")
    # Every node agrees, the excluded one included, and it is still a member.
    for i in range(3):
        wait_for(lambda: cluster3.cluster_manager(i) == new, 15, what=f"node {i} to follow {new}")
    assert cluster3.health(other)["number_of_nodes"] == 3
    # The excluded node has not left: waiting for its removal times out (504).
    r = http.delete("/_cluster/voting_config_exclusions", params={"timeout": "500ms"})
    assert_error(r, 504, "timeout_exception",
                 reason_re=r"^timed out waiting for removal of nodes; if nodes should not be removed")
    r = http.delete("/_cluster/voting_config_exclusions", params={"wait_for_removal": "false"})
    assert r.status_code == 200, r.text
    assert coordination()["voting_config_exclusions"] == []
    wait_for(lambda: sorted(coordination()["last_committed_config"]) == sorted(ids.values()), 15,
             what="the old cluster manager back in the voting configuration")


# ---------------------------------------------------------------- _cat and _nodes on a cluster


def cat_json(c: ShoalCluster, path: str, i: int = 0, **params) -> list[dict]:
    r = c.get(path, i, format="json", **params)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.cluster
def test_cat_allocation_nodeattrs_and_nodes_on_three_zones(cluster3):
    r = cluster3.http(0).put("/spread3", {"settings": {"number_of_shards": 3, "number_of_replicas": 0}})
    assert r.status_code == 200, r.text
    cluster3.wait_for_status("green")
    # Three replicas on three nodes: one copy cannot be placed (same_shard).
    r = cluster3.http(0).put("/unplaced", {"settings": {"number_of_shards": 1, "number_of_replicas": 3}})
    assert r.status_code == 200, r.text

    rows = cat_json(cluster3, "/_cat/allocation", 1)
    by_node = {row["node"]: row for row in rows}
    assert set(by_node) == {"node-0", "node-1", "node-2", "UNASSIGNED"}, rows
    # Every copy counted once: 3 primaries of spread3, 4 copies of unplaced (at least one of
    # which cannot be placed; replicas may still be waiting for their turn).
    assert sum(int(row["shards"]) for row in rows) == 7
    assert int(by_node["UNASSIGNED"]["shards"]) >= 1 and by_node["UNASSIGNED"]["disk.total"] is None
    for i in range(3):
        row = by_node[f"node-{i}"]
        assert row["ip"] == "127.0.0.1" and row["host"] == "127.0.0.1"
    # A node measures its own disk; the others' come from their first report (within a
    # second or two of joining), so every node's view shows every disk once all reported.
    wait_for(lambda: all(row["disk.total"] for i in range(3) for row in cat_json(cluster3, "/_cat/allocation", i)
                         if row["node"] != "UNASSIGNED"), 15, what="disk reports of every node")
    row = cat_json(cluster3, "/_cat/allocation", 2, bytes="b")[0]
    assert int(row["disk.used"]) + int(row["disk.avail"]) == int(row["disk.total"])
    assert 0 <= int(row["disk.percent"]) <= 100
    only = cat_json(cluster3, "/_cat/allocation/node-1")
    assert [row["node"] for row in only] == ["node-1", "UNASSIGNED"]
    text = cluster3.get("/_cat/allocation", 0, v="true").text
    assert text.splitlines()[0].split() == ["shards", "disk.indices", "disk.used", "disk.avail", "disk.total",
                                           "disk.percent", "host", "ip", "node"]

    attrs = cat_json(cluster3, "/_cat/nodeattrs", 2)
    zones = {(row["node"], row["value"]) for row in attrs if row["attr"] == "zone"}
    assert zones == {("node-0", "a"), ("node-1", "b"), ("node-2", "c")}
    assert set(attrs[0]) == {"node", "host", "ip", "attr", "value"}
    rows = cat_json(cluster3, "/_cat/nodeattrs", 0, h="node,id,pid,port,attr,value", full_id="true")
    nodes = cluster3.get("/_nodes", 0).json()["nodes"]
    for row in rows:
        assert nodes[row["id"]]["name"] == row["node"]
        assert int(row["port"]) == cluster3.nodes[int(row["node"][-1])].transport_port
        assert int(row["pid"]) == cluster3.nodes[int(row["node"][-1])].proc.pid
    assert cluster3.get("/_cat/pending_tasks", 0, v="true").text.split() == [
        "insertOrder", "timeInQueue", "priority", "source"]
    assert cluster3.get("/_cluster/pending_tasks", 0).json() == {"tasks": []}

    b = cluster3.get("/_nodes", 1).json()
    assert b["_nodes"] == {"total": 3, "successful": 3, "failed": 0}
    for node_id, info in b["nodes"].items():
        i = int(info["name"][-1])
        assert info["roles"] == ["cluster_manager", "data", "ingest", "remote_cluster_client"]
        assert info["attributes"]["zone"] == "abc"[i]
        assert info["transport_address"] == f"127.0.0.1:{cluster3.nodes[i].transport_port}"
        assert info["version"] == "2.18.0" and info["ip"] == "127.0.0.1"
        # Every node reports its own settings and process, over the transport.
        assert info["settings"]["node"]["name"] == info["name"]
        assert info["process"]["id"] == cluster3.nodes[i].proc.pid
    manager = cluster3.cluster_manager()

    def names(path, i=0):
        return sorted(info["name"] for info in cluster3.get(path, i).json()["nodes"].values())

    assert names("/_nodes/_cluster_manager") == [manager]
    assert names("/_nodes/_master") == [manager]
    assert names("/_nodes/_local", 2) == ["node-2"]
    assert names("/_nodes/node-1,node-2") == ["node-1", "node-2"]
    assert names("/_nodes/zone:b") == ["node-1"]
    assert names("/_nodes/data:true") == ["node-0", "node-1", "node-2"]
    assert names("/_nodes/_all,zone:a") == ["node-0", "node-1", "node-2"]
    assert names("/_nodes/ingest:false") == []
    assert names("/_nodes/node-*/os") == ["node-0", "node-1", "node-2"]
    only_os = cluster3.get("/_nodes/os", 0).json()["nodes"]
    assert all("os" in info and "settings" not in info for info in only_os.values())


def test_nodes_roles_from_node_roles_setting(node_factory):
    n = node_factory({"node.roles": "data,cluster_manager", "node.attr.rack": "r1"}, name="roles-node")
    assert n.http().get("/_cluster/health", params={"wait_for_nodes": "1", "timeout": "30s"}).status_code == 200
    b = n.http().get("/_nodes/_local").json()
    (info,) = b["nodes"].values()
    assert info["roles"] == ["cluster_manager", "data"]
    assert info["attributes"]["rack"] == "r1"
    assert n.http().get("/_nodes/ingest:true").json()["nodes"] == {}
    rows = n.http().get("/_cat/nodeattrs", params={"format": "json"}).json()
    assert {"node": "roles-node", "host": "127.0.0.1", "ip": "127.0.0.1", "attr": "rack", "value": "r1"} in rows


def test_nodes_unknown_metric_is_400(http):
    assert_error(http.get("/_nodes/_local/bogus"), 400, "illegal_argument_exception",
                 reason="request [/_nodes/_local/bogus] contains unrecognized metric: [bogus]")
    assert http.get("/_nodes/no-such-node").json()["_nodes"] == {"total": 0, "successful": 0, "failed": 0}


# ------------------------------------------------------------------------------- health waits


def test_health_waits_and_their_timeouts(http, index_name):
    assert http.put(f"/{index_name}", {"settings": {"number_of_shards": 2, "number_of_replicas": 0}}).status_code == 200
    ok = {"wait_for_nodes": "1", "wait_for_active_shards": "2", "wait_for_no_relocating_shards": "true",
          "wait_for_no_initializing_shards": "true", "wait_for_events": "languid", "local": "true",
          "wait_for_status": "green"}
    r = http.get(f"/_cluster/health/{index_name}", params={**ok, "timeout": "10s"})
    assert r.status_code == 200 and r.json()["timed_out"] is False, r.text
    for form in ["ge(1)", ">=1", "<2", "lt(2)", "le(1)", "<=1"]:
        r = http.get("/_cluster/health", params={"wait_for_nodes": form, "timeout": "1s"})
        assert r.status_code == 200, (form, r.text)
    for params in [{"wait_for_nodes": "3"}, {"wait_for_nodes": ">1"}, {"wait_for_active_shards": "5"}]:
        started = time.monotonic()
        r = http.get(f"/_cluster/health/{index_name}", params={**params, "timeout": "300ms"})
        assert r.status_code == 408, (params, r.text)
        assert r.json()["timed_out"] is True and r.json()["status"] == "green"
        assert 0.25 < time.monotonic() - started < 5
    r = http.get("/_cluster/health", params={"wait_for_nodes": "2", "timeout": "0s"})
    assert r.status_code == 408 and r.json()["timed_out"] is True


def test_health_bad_wait_parameters_are_400(http):
    assert_error(http.get("/_cluster/health", params={"wait_for_nodes": "abc"}), 400, "number_format_exception",
                 reason='For input string: "abc"')
    assert_error(http.get("/_cluster/health", params={"wait_for_active_shards": "x"}), 400,
                 "illegal_argument_exception", reason="cannot parse ActiveShardCount[x]")
    assert_error(http.get("/_cluster/health", params={"wait_for_events": "soon"}), 400,
                 "illegal_argument_exception", reason="No enum constant org.opensearch.common.Priority.SOON")
    assert_error(http.get("/_cluster/health", params={"wait_for_status": "blue"}), 400,
                 "illegal_argument_exception", reason="unknown cluster health status [blue]")
    assert_error(http.get("/_cluster/health", params={"wait_for_no_relocating_shards": "yes"}), 400,
                 "illegal_argument_exception")


def test_health_waits_hold_no_thread_while_they_wait(node_factory):
    """Eight clients waiting for green on a yellow cluster: the management pool (5 threads)
    keeps answering other cluster requests, and every wait answers once the state turns green."""
    node = node_factory()
    http = node.http()
    assert http.put("/waited", {"settings": {"number_of_shards": 1, "number_of_replicas": 1}}).status_code == 200
    answers: list = []

    def wait_for_green() -> None:
        r = node.http().get("/_cluster/health", params={"wait_for_status": "green", "timeout": "30s"}, timeout=60)
        answers.append((r.status_code, r.json().get("status"), time.monotonic()))

    waiters = [threading.Thread(target=wait_for_green) for _ in range(8)]
    for t in waiters:
        t.start()
    time.sleep(1)
    for path in ["/_cat/health", "/_cluster/settings", "/_cat/indices", "/_nodes/stats/thread_pool"]:
        started = time.monotonic()
        r = http.get(path, timeout=10)
        assert r.status_code == 200 and time.monotonic() - started < 2, (path, r.status_code, r.text[:200])
    assert not answers, answers
    turned_green = time.monotonic()
    r = http.put("/waited/_settings", {"index": {"number_of_replicas": 0}})
    assert r.status_code == 200, r.text
    for t in waiters:
        t.join(30)
    assert sorted(a[:2] for a in answers) == [(200, "green")] * 8, answers
    assert max(a[2] for a in answers) - turned_green < 5, answers


def test_index_creations_waiting_for_copies_hold_no_thread(node_factory):
    """Eight creations waiting for replicas a single node cannot hold: each answers
    shards_acknowledged false at its timeout, and cluster requests meanwhile answer at once."""
    node = node_factory()
    http = node.http()
    answers: list = []

    def create(k: int) -> None:
        r = node.http().put(f"/waiting-{k}", {"settings": {"number_of_shards": 1, "number_of_replicas": 1}},
                            params={"wait_for_active_shards": "all", "timeout": "4s"}, timeout=60)
        answers.append((r.status_code, r.json().get("shards_acknowledged"), r.json().get("acknowledged")))

    creators = [threading.Thread(target=create, args=(k,)) for k in range(8)]
    for t in creators:
        t.start()
    time.sleep(1.5)
    for path in ["/_cat/health", "/_cat/indices", "/_cluster/settings"]:
        started = time.monotonic()
        r = http.get(path, timeout=10)
        assert r.status_code == 200 and time.monotonic() - started < 2, (path, r.status_code, r.text[:200])
    for t in creators:
        t.join(30)
    assert answers == [(200, False, True)] * 8, answers
    # The primaries alone are there at once: the same wait for one copy is acknowledged.
    r = http.put("/waiting-one", {"settings": {"number_of_shards": 1, "number_of_replicas": 1}},
                 params={"wait_for_active_shards": "1", "timeout": "10s"})
    assert r.status_code == 200 and r.json()["shards_acknowledged"] is True, r.text
    assert http.post("/waiting-one/_close").status_code == 200
    r = http.post("/waiting-one/_open", params={"wait_for_active_shards": "all", "timeout": "1s"})
    assert r.status_code == 200 and r.json()["shards_acknowledged"] is False, r.text
    r = http.post("/waiting-one/_open", params={"wait_for_active_shards": "1", "timeout": "10s"})
    assert r.status_code == 200 and r.json() == {"acknowledged": True, "shards_acknowledged": True}, r.text


@pytest.mark.cluster
def test_health_wait_for_nodes_returns_when_the_third_node_joins(tmp_path):
    c = ShoalCluster(tmp_path, 3)
    try:
        c.nodes[0].start()
        c.nodes[1].start()
        answer = {}

        def wait():
            answer["r"] = c.http(0).get("/_cluster/health", params={"wait_for_nodes": "3", "timeout": "60s"},
                                       timeout=90)
            answer["at"] = time.monotonic()

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.5)
        assert waiter.is_alive(), answer.get("r") and answer["r"].text
        c.nodes[2].start()
        joined = c.wait_for_nodes(3, i=2)["number_of_nodes"]
        waiter.join(90)
        r = answer["r"]
        assert r.status_code == 200, r.text
        assert r.json()["number_of_nodes"] == joined == 3 and r.json()["timed_out"] is False
        r = c.http(1).get("/_cluster/health", params={"wait_for_nodes": "4", "timeout": "500ms"})
        assert r.status_code == 408 and r.json()["timed_out"] is True and r.json()["number_of_nodes"] == 3
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.close()


@pytest.mark.cluster
def test_cluster_settings_given_to_the_nodes_back_the_cluster_settings_until_overridden(tmp_path):
    """`-E cluster.routing.allocation.enable=primaries` on the bootstrapping nodes acts like
    OpenSearch's node settings: it applies cluster-wide, shows among the defaults (not as a
    persistent setting), and a persistent setting overrides it."""
    with ShoalCluster(tmp_path, 2, settings={"cluster.routing.allocation.enable": "primaries"}) as c:
        http = c.http(1)
        r = http.put("/held", {"settings": {"number_of_shards": 1, "number_of_replicas": 1}})
        assert r.status_code == 200, r.text
        c.wait_for_status("yellow", timeout=30)
        time.sleep(1)  # give the allocator a chance to (wrongly) place the replica
        assert c.health()["unassigned_shards"] == 1
        b = http.get("/_cluster/settings", params={"include_defaults": "true", "flat_settings": "true"}).json()
        assert b["persistent"] == {} and b["transient"] == {}
        assert b["defaults"]["cluster.routing.allocation.enable"] == "primaries"
        r = http.put("/_cluster/settings", {"persistent": {"cluster.routing.allocation.enable": "all"}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green", timeout=60)
