"""What must survive a restart of the node (graceful and kill -9). Shoal only: these restart the node."""
import pytest

pytestmark = pytest.mark.restart


@pytest.fixture
def rnode(restartable):
    return restartable


def _mk(http, name, **settings):
    r = http.put(f"/{name}", {"settings": {"number_of_shards": 2, "number_of_replicas": 0, **settings},
                              "mappings": {"properties": {"k": {"type": "keyword"}}},
                              "aliases": {name + "-al": {}}})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("kill", [False, True], ids=["graceful", "kill9"])
def test_unrefreshed_unflushed_writes_survive_restart(rnode, index_name, kill):
    http = rnode.http()
    _mk(http, index_name, refresh_interval="-1")
    for i in range(50):
        assert http.put(f"/{index_name}/_doc/{i}", {"k": f"v{i}", "n": i}).status_code == 201
    for i in range(10):
        assert http.put(f"/{index_name}/_doc/{i}", {"k": f"w{i}", "n": i}).status_code == 200
    for i in range(40, 50):
        assert http.delete(f"/{index_name}/_doc/{i}").status_code == 200
    rnode.restart(kill=kill)
    assert http.get(f"/{index_name}/_doc/3").json()["_source"] == {"k": "w3", "n": 3}
    assert http.get(f"/{index_name}/_doc/3").json()["_version"] == 2
    assert http.get(f"/{index_name}/_doc/20").json()["_source"] == {"k": "v20", "n": 20}
    assert http.get(f"/{index_name}/_doc/45").json()["found"] is False
    http.post(f"/{index_name}/_refresh")
    assert http.post(f"/{index_name}/_count").json()["count"] == 40
    assert http.post(f"/{index_name}/_count", {"query": {"prefix": {"k": "w"}}}).json()["count"] == 10


def test_flushed_and_unflushed_mix_survives_kill9(rnode, index_name):
    http = rnode.http()
    _mk(http, index_name)
    for i in range(30):
        http.put(f"/{index_name}/_doc/{i}", {"k": "before-flush"})
    assert http.post(f"/{index_name}/_flush").status_code == 200
    for i in range(20, 60):
        http.put(f"/{index_name}/_doc/{i}", {"k": "after-flush"})
    rnode.restart(kill=True)
    http.post(f"/{index_name}/_refresh")
    assert http.post(f"/{index_name}/_count").json()["count"] == 60
    assert http.post(f"/{index_name}/_count", {"query": {"term": {"k": "after-flush"}}}).json()["count"] == 40


def test_seq_no_and_version_continue_after_restart(rnode, index_name):
    http = rnode.http()
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    for i in range(5):
        r = http.put(f"/{index_name}/_doc/a", {"i": i}).json()
    assert r["_seq_no"] == 4 and r["_version"] == 5
    rnode.restart(kill=True)
    r = http.put(f"/{index_name}/_doc/a", {"i": 5}).json()
    assert r["_seq_no"] == 5 and r["_version"] == 6 and r["_primary_term"] >= 1
    got = http.get(f"/{index_name}/_doc/a").json()
    assert got["_seq_no"] == 5 and got["_version"] == 6
    # if_seq_no based on pre-restart values still works
    r = http.put(f"/{index_name}/_doc/a", {"i": 6}, params={"if_seq_no": 5, "if_primary_term": got["_primary_term"]})
    assert r.status_code == 200


def test_metadata_survives_restart(rnode, index_name):
    http = rnode.http()
    _mk(http, index_name, **{"index.codec": "best_compression"})
    http.put(f"/{index_name}/_mapping", {"properties": {"added": {"type": "long"}}})
    http.put(f"/{index_name}/_doc/1", {"dyn": "text"})
    http.put(f"/{index_name}-closed", {"settings": {"number_of_replicas": 0}})
    http.post(f"/{index_name}-closed/_close")
    uuid = http.get(f"/{index_name}/_settings").json()[index_name]["settings"]["index"]["uuid"]
    mapping = http.get(f"/{index_name}/_mapping").json()
    rnode.restart(kill=True)
    assert http.get(f"/{index_name}/_mapping").json() == mapping
    s = http.get(f"/{index_name}/_settings").json()[index_name]["settings"]["index"]
    assert s["uuid"] == uuid and s["codec"] == "best_compression" and s["number_of_shards"] == "2"
    assert http.get(f"/{index_name}/_alias").json()[index_name]["aliases"] == {index_name + "-al": {}}
    rows = http.get(f"/_cat/indices/{index_name}-closed", params={"format": "json"}).json()
    assert rows[0]["status"] == "close"


def test_persistent_cluster_settings_survive_restart(rnode):
    http = rnode.http()
    http.put("/_cluster/settings", {"persistent": {"action.auto_create_index": "false"},
                                    "transient": {"action.destructive_requires_name": "true"}})
    try:
        rnode.restart()
        got = http.get("/_cluster/settings").json()
        assert got["persistent"] == {"action": {"auto_create_index": "false"}}
        assert got["transient"] == {}
    finally:
        http.put("/_cluster/settings", {"persistent": {"action.auto_create_index": None},
                                        "transient": {"action.destructive_requires_name": None}})


def test_translog_async_durability_accepted_and_recovers_after_graceful_stop(rnode, index_name):
    http = rnode.http()
    http.put(f"/{index_name}", {"settings": {"number_of_replicas": 0, "index.translog.durability": "async",
                                             "index.translog.sync_interval": "1s"}})
    for i in range(20):
        http.put(f"/{index_name}/_doc/{i}", {"i": i})
    rnode.restart()    # graceful stop syncs the translog
    http.post(f"/{index_name}/_refresh")
    assert http.post(f"/{index_name}/_count").json()["count"] == 20


def test_force_merge_then_restart(rnode, index_name):
    http = rnode.http()
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    for i in range(30):
        http.put(f"/{index_name}/_doc/{i}", {"i": i}, params={"refresh": "true" if i % 10 == 0 else "false"})
    http.delete(f"/{index_name}/_doc/0")
    http.post(f"/{index_name}/_forcemerge", params={"max_num_segments": 1})
    rnode.restart(kill=True)
    http.post(f"/{index_name}/_refresh")
    assert http.post(f"/{index_name}/_count").json()["count"] == 29
    assert http.get(f"/{index_name}/_doc/0").json()["found"] is False
