"""`index.auto_expand_replicas`: the replica count follows the data nodes the index's filters
allow (one replica per node beyond the first, within min and max), on creation, on a settings
change and when nodes join or leave; its values are checked with OpenSearch 2.18's messages."""
import pytest

from cluster import ShoalCluster
from util import assert_error

SETTING = "index.auto_expand_replicas"


def replicas(http, name):
    flat = http.get(f"/{name}/_settings", params={"flat_settings": "true"}).json()[name]["settings"]
    return flat["index.number_of_replicas"]


@pytest.mark.parametrize("value", ["0-1", "0-all"])
def test_one_node_needs_no_replica_so_the_index_is_green(http, index_name, value):
    r = http.put(f"/{index_name}", {"settings": {SETTING: value, "number_of_replicas": 1}})
    assert r.status_code == 200, r.text
    health = http.get(f"/_cluster/health/{index_name}", params={"wait_for_status": "green", "timeout": "10s"})
    assert health.json()["status"] == "green", health.text
    assert replicas(http, index_name) == "0"


def test_a_minimum_the_nodes_cannot_meet_leaves_the_count(http, index_name):
    # one node, 1-all: OpenSearch finds no count within [1, 0] and keeps the one set
    r = http.put(f"/{index_name}", {"settings": {SETTING: "1-all", "number_of_replicas": 2}})
    assert r.status_code == 200, r.text
    assert replicas(http, index_name) == "2"


def test_setting_it_later_resizes_and_false_stops_following(http, index_name):
    assert http.put(f"/{index_name}", {"settings": {"number_of_replicas": 1}}).status_code == 200
    assert http.put(f"/{index_name}/_settings", {SETTING: "0-1"}).status_code == 200
    assert replicas(http, index_name) == "0"
    assert http.put(f"/{index_name}/_settings", {SETTING: "false"}).status_code == 200
    assert http.put(f"/{index_name}/_settings", {"number_of_replicas": 2}).status_code == 200
    assert replicas(http, index_name) == "2"


@pytest.mark.parametrize("value,reason", [
    ("true", f"failed to parse [{SETTING}] from value: [true] at index -1"),
    ("x-2", f"failed to parse [{SETTING}] from value: [x-2] at index 1"),
    ("0-many", f"failed to parse [{SETTING}] from value: [0-many] at index 1"),
    ("3-1", f"[{SETTING}] minReplicas must be =< maxReplicas but wasn't 3 > 1"),
])
def test_malformed_ranges_are_refused(http, index_name, value, reason):
    assert_error(http.put(f"/{index_name}", {"settings": {SETTING: value}}), 400, "illegal_argument_exception", reason)
    assert http.put(f"/{index_name}", {}).status_code == 200
    assert_error(http.put(f"/{index_name}/_settings", {SETTING: value}), 400, "illegal_argument_exception", reason)


@pytest.mark.cluster
def test_replicas_follow_nodes_leaving_and_joining(tmp_path):
    with ShoalCluster(tmp_path, 3, attrs=[{"zone": "a"}, {"zone": "b"}, {"zone": "c"}]) as c:
        http = c.http(0)
        r = http.put("/ae", {"settings": {"number_of_shards": 2, SETTING: "0-all",
                                          "index.routing.allocation.exclude.zone": "c"}})
        assert r.status_code == 200, r.text
        c.wait_for_status("green")
        # three data nodes, one filtered out: one replica
        assert replicas(http, "ae") == "1"
        assert http.put("/ae/_settings", {"index.routing.allocation.exclude.zone": None}).status_code == 200
        c.wait_for_status("green")
        assert replicas(http, "ae") == "2"
        c.kill(2)
        c.wait_for_nodes(2)
        c.wait_for_status("green")
        assert replicas(http, "ae") == "1"
        c.restart(2)
        c.wait_for_nodes(3)
        c.wait_for_status("green")
        assert replicas(http, "ae") == "2"
