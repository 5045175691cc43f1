"""The task API on real processes: every request is a task while it runs, `_tasks` asked of
any node lists every node's tasks (its own part runs as a child of the listing), one task can
be read and waited for, a task run in the background (`wait_for_completion=false`) keeps its
outcome for `GET /_tasks/{id}`, nothing pretends to be cancellable, and `_cat/tasks` shows the
same.
"""

from __future__ import annotations

import threading

import pytest
import requests

from cluster import ShoalCluster
from util import wait_for

pytestmark = pytest.mark.cluster

HEALTH = "cluster:monitor/health"


@pytest.fixture
def cluster2(tmp_path):
    with ShoalCluster(tmp_path, 2) as c:
        yield c


def slow_health(c: ShoalCluster, seconds: int) -> threading.Thread:
    """A `_cluster/health` on node 1 that waits `seconds` for a node that never comes."""
    url = c.nodes[1].url + "/_cluster/health"
    params = {"wait_for_nodes": "9", "timeout": f"{seconds}s"}
    thread = threading.Thread(target=requests.get, args=(url,),
                              kwargs={"params": params, "headers": {"X-Opaque-Id": "slow-one"},
                                      "timeout": seconds + 10})
    thread.start()
    return thread


def running_health_tasks(c: ShoalCluster) -> list[dict]:
    body = c.get("/_tasks", 0, actions=HEALTH, group_by="none", detailed="true").json()
    return body["tasks"]


def test_a_running_request_is_listed_from_any_node_and_can_be_waited_for(cluster2):
    waiter = slow_health(cluster2, 3)
    (task,) = wait_for(lambda: running_health_tasks(cluster2) or None, timeout=5, what="the health task")
    (second,) = cluster2.get("/_nodes/_local", 1).json()["nodes"]
    assert task["node"] == second, task
    assert task["action"] == HEALTH and task["cancellable"] is False, task
    assert task["headers"] == {"X-Opaque-Id": "slow-one"}, task
    assert "wait_for_nodes=9" in task["description"], task
    task_id = f"{task['node']}:{task['id']}"

    got = cluster2.get(f"/_tasks/{task_id}", 0).json()
    assert got["completed"] is False and got["task"]["id"] == task["id"], got
    r = cluster2.http(0).post(f"/_tasks/{task_id}/_cancel")
    assert r.status_code == 400 and "doesn't support cancellation" in r.json()["error"]["reason"], r.text

    done = requests.get(cluster2.nodes[0].url + f"/_tasks/{task_id}",
                        params={"wait_for_completion": "true", "timeout": "10s"}, timeout=20).json()
    assert done["completed"] is True and done["task"]["action"] == HEALTH, done
    waiter.join()
    r = cluster2.get(f"/_tasks/{task_id}", 0)
    assert r.status_code == 404 and r.json()["error"]["type"] == "resource_not_found_exception", r.text
    r = cluster2.get(f"/_tasks/nope:1", 0)
    assert r.status_code == 404 and "isn't part of the cluster" in r.json()["error"]["reason"], r.text


def test_a_listing_runs_on_every_node_as_children_of_the_coordinating_task(cluster2):
    by_node = cluster2.get("/_tasks", 1, actions="cluster:monitor/tasks/lists*").json()["nodes"]
    assert len(by_node) == 2, by_node
    for node in by_node.values():
        assert node["roles"] and node["transport_address"], node
        actions = sorted(t["action"] for t in node["tasks"].values())
        assert "cluster:monitor/tasks/lists[n]" in actions, actions

    tree = cluster2.get("/_tasks", 1, actions="cluster:monitor/tasks/lists*", group_by="parents").json()["tasks"]
    (root,) = [t for t in tree.values() if t["action"] == "cluster:monitor/tasks/lists"]
    children = root["children"]
    assert len(children) == 2 and {c["node"] for c in children} == set(by_node), root
    assert all(c["parent_task_id"] == f"{root['node']}:{root['id']}" for c in children), children


def test_cat_tasks_lists_the_running_tasks_with_their_parents(cluster2):
    rows = cluster2.get("/_cat/tasks", 0, format="json", detailed="true").json()
    actions = {r["action"] for r in rows}
    assert {"cluster:monitor/cat", "cluster:monitor/tasks/lists[n]"} <= actions, rows
    children = [r for r in rows if r["action"] == "cluster:monitor/tasks/lists[n]"]
    parent = next(r for r in rows if r["action"] == "cluster:monitor/cat")["task_id"]
    assert len(children) == 2 and all(r["parent_task_id"] == parent for r in children), rows
    r = cluster2.get("/_tasks", 0, wait_for_completion="true")
    assert r.status_code == 400, r.text


def test_a_force_merge_in_the_background_is_a_task_until_it_ends(cluster2):
    r = cluster2.http(0).put("/bg", {"settings": {"number_of_shards": 1, "number_of_replicas": 1}})
    assert r.status_code == 200, r.text
    # Both copies started: a copy still recovering is counted in the total but not merged.
    cluster2.wait_for_status("green")
    for start in range(0, 60, 20):
        cluster2.bulk(0, "bg", {str(n): {"n": n} for n in range(start, start + 20)}, refresh="true")
    r = cluster2.http(1).post("/bg/_forcemerge", params={"max_num_segments": "1", "wait_for_completion": "false"})
    assert r.status_code == 200, r.text
    task_id = r.json()["task"]
    done = requests.get(cluster2.nodes[0].url + f"/_tasks/{task_id}",
                        params={"wait_for_completion": "true", "timeout": "30s"}, timeout=40)
    # Its node keeps its outcome, asked of any node, whether it was seen running or not.
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["completed"] is True and body["task"]["action"] == "indices:admin/forcemerge", body
    assert body["response"]["_shards"] == {"total": 2, "successful": 2, "failed": 0}, body
    again = cluster2.get(f"/_tasks/{task_id}", 1).json()
    assert again["completed"] is True and again["response"] == body["response"], again
    cluster2.http(0).post("/bg/_refresh")
    copies = cluster2.get("/bg/_segments", 0).json()["indices"]["bg"]["shards"]["0"]
    assert len(copies) == 2 and all(len(c["segments"]) == 1 for c in copies), copies
    r = cluster2.http(0).post("/nope/_forcemerge", params={"wait_for_completion": "false"})
    assert r.status_code == 404, r.text


def test_a_delete_by_query_in_the_background_answers_a_task_whose_outcome_is_kept(cluster2):
    http = cluster2.http(0)
    r = http.put("/dbq", {"settings": {"number_of_shards": 2, "number_of_replicas": 1}})
    assert r.status_code == 200, r.text
    cluster2.bulk(0, "dbq", {str(n): {"n": n} for n in range(40)}, refresh="true")
    r = cluster2.http(1).post("/dbq/_delete_by_query", {"query": {"range": {"n": {"lt": 30}}}},
                              params={"wait_for_completion": "false", "refresh": "true"})
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"task"}, r.text
    task_id = r.json()["task"]
    done = cluster2.get(f"/_tasks/{task_id}", 0, wait_for_completion="true", timeout="30s")
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["completed"] is True, body
    assert body["task"]["action"] == "indices:data/write/delete/byquery", body
    assert body["task"]["description"] == "delete-by-query [dbq]", body
    assert body["response"]["deleted"] == 30 and body["response"]["failures"] == [], body
    assert http.get("/dbq/_count").json()["count"] == 10

    r = http.post("/dbq/_update_by_query", params={"wait_for_completion": "false"})
    assert r.status_code == 200, r.text
    done = cluster2.get(f"/_tasks/{r.json()['task']}", 1, wait_for_completion="true", timeout="30s")
    assert done.json()["response"]["updated"] == 10, done.text

    # Not throttled: a rate is refused, not ignored.
    r = http.post("/dbq/_delete_by_query", {"query": {"match_all": {}}},
                  params={"requests_per_second": "10"})
    assert r.status_code == 400 and "requests_per_second" in r.text, r.text
    assert http.get("/dbq/_count").json()["count"] == 10
