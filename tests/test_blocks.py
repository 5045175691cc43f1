"""Index and cluster blocks (`index.blocks.*`, `cluster.blocks.*`) and the disk monitor's
flood-stage block: which operations each block refuses, with OpenSearch 2.18's
`cluster_block_exception` texts and statuses, and that a block can always be lifted."""
import pytest

from util import assert_error, wait_for

WRITE = "FORBIDDEN/8/index write (api)"
READ_ONLY = "FORBIDDEN/5/index read-only (api)"
READ = "FORBIDDEN/7/index read (api)"
METADATA = "FORBIDDEN/9/index metadata (api)"
FLOOD = "TOO_MANY_REQUESTS/12/disk usage exceeded flood-stage watermark, index has read-only-allow-delete block"
CLUSTER_READ_ONLY = "FORBIDDEN/6/cluster read-only (api)"
CLUSTER_ALLOW_DELETE = "FORBIDDEN/13/cluster read-only / allow delete (api)"

ALL_INDEX_BLOCKS = {f"index.blocks.{b}": None
                    for b in ("write", "read_only", "read", "metadata", "read_only_allow_delete")}


def blocked(index, block):
    return f"index [{index}] blocked by: [{block}];"


@pytest.fixture
def blocked_index(http, index_name):
    """An index with one document; every index block is lifted afterwards so it can be deleted."""
    r = http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0},
                                     "mappings": {"properties": {"n": {"type": "integer"}}}})
    assert r.status_code == 200, r.text
    assert http.put(f"/{index_name}/_doc/1", {"n": 1}, params={"refresh": "true"}).status_code == 201
    yield index_name
    # Touches index.blocks.read_only, so it goes through whatever block is in place.
    http.put(f"/{index_name}/_settings", ALL_INDEX_BLOCKS)


def set_block(http, index, block, value=True):
    r = http.put(f"/{index}/_settings", {f"index.blocks.{block}": value})
    assert r.status_code == 200, r.text


def bulk_items(http, index):
    r = http.bulk([{"index": {"_index": index, "_id": "b1"}}, {"n": 2},
                   {"delete": {"_index": index, "_id": "1"}}])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["errors"] is True, body
    return [next(iter(item.values())) for item in body["items"]]


def test_write_block_refuses_writes_and_bulk_items_but_not_reads_or_metadata(http, blocked_index):
    set_block(http, blocked_index, "write")
    reason = blocked(blocked_index, WRITE)
    assert_error(http.put(f"/{blocked_index}/_doc/2", {"n": 2}), 403, "cluster_block_exception", reason)
    assert_error(http.delete(f"/{blocked_index}/_doc/1"), 403, "cluster_block_exception", reason)
    assert_error(http.post(f"/{blocked_index}/_update/1", {"doc": {"n": 5}}), 403,
                 "cluster_block_exception", reason)
    for item in bulk_items(http, blocked_index):
        assert item["status"] == 403, item
        assert item["error"] == {"type": "cluster_block_exception", "reason": reason}, item
    # Reads and metadata changes are not writes.
    assert http.get(f"/{blocked_index}/_doc/1").json()["_source"] == {"n": 1}
    assert http.post(f"/{blocked_index}/_search", {}).json()["hits"]["total"]["value"] == 1
    r = http.put(f"/{blocked_index}/_mapping", {"properties": {"tag": {"type": "keyword"}}})
    assert r.status_code == 200, r.text
    set_block(http, blocked_index, "write", False)
    assert http.put(f"/{blocked_index}/_doc/2", {"n": 2}).status_code == 201


def test_read_only_block_refuses_writes_and_metadata_changes_until_lifted(http, blocked_index):
    set_block(http, blocked_index, "read_only")
    reason = blocked(blocked_index, READ_ONLY)
    assert_error(http.put(f"/{blocked_index}/_doc/2", {"n": 2}), 403, "cluster_block_exception", reason)
    assert_error(http.put(f"/{blocked_index}/_mapping", {"properties": {"tag": {"type": "keyword"}}}),
                 403, "cluster_block_exception", reason)
    assert_error(http.put(f"/{blocked_index}/_settings", {"index.number_of_replicas": 0}),
                 403, "cluster_block_exception", reason)
    assert_error(http.post("/_aliases", {"actions": [{"add": {"index": blocked_index, "alias": blocked_index + "-a"}}]}),
                 403, "cluster_block_exception", reason)
    assert_error(http.post(f"/{blocked_index}/_close"), 403, "cluster_block_exception", reason)
    assert_error(http.delete(f"/{blocked_index}"), 403, "cluster_block_exception", reason)
    assert http.post(f"/{blocked_index}/_search", {}).json()["hits"]["total"]["value"] == 1
    assert http.get(f"/{blocked_index}/_settings").status_code == 200
    # The update that lifts the block is let through although it is a metadata change.
    set_block(http, blocked_index, "read_only", False)
    assert http.put(f"/{blocked_index}/_doc/2", {"n": 2}).status_code == 201


def test_read_block_refuses_searches_and_gets_but_not_writes(http, blocked_index):
    set_block(http, blocked_index, "read")
    reason = blocked(blocked_index, READ)
    assert_error(http.post(f"/{blocked_index}/_search", {}), 403, "cluster_block_exception", reason)
    assert_error(http.post(f"/{blocked_index}/_count", {}), 403, "cluster_block_exception", reason)
    assert_error(http.get(f"/{blocked_index}/_doc/1"), 403, "cluster_block_exception", reason)
    docs = http.post("/_mget", {"docs": [{"_index": blocked_index, "_id": "1"}]}).json()["docs"]
    assert docs[0]["error"]["type"] == "cluster_block_exception", docs
    assert http.put(f"/{blocked_index}/_doc/2", {"n": 2}).status_code == 201
    set_block(http, blocked_index, "read", False)
    assert http.get(f"/{blocked_index}/_doc/2").json()["found"] is True


def test_metadata_block_refuses_metadata_reads_and_writes_and_lifts_alone(http, blocked_index):
    set_block(http, blocked_index, "metadata")
    reason = blocked(blocked_index, METADATA)
    for path in (f"/{blocked_index}", f"/{blocked_index}/_mapping", f"/{blocked_index}/_settings",
                 f"/{blocked_index}/_stats", f"/_cat/indices/{blocked_index}"):
        assert_error(http.get(path), 403, "cluster_block_exception", reason)
    assert http.head(f"/{blocked_index}").status_code == 403
    assert_error(http.put(f"/{blocked_index}/_mapping", {"properties": {"tag": {"type": "keyword"}}}),
                 403, "cluster_block_exception", reason)
    # Together with another setting, lifting it is a metadata change like any other.
    assert_error(http.put(f"/{blocked_index}/_settings",
                          {"index.blocks.metadata": False, "index.number_of_replicas": 0}),
                 403, "cluster_block_exception", reason)
    assert http.put(f"/{blocked_index}/_doc/2", {"n": 2}).status_code == 201
    # A new field would change the mapping: that is a metadata write too.
    assert_error(http.put(f"/{blocked_index}/_doc/3", {"n": 3, "new_field": "x"}), 403,
                 "cluster_block_exception", reason)
    set_block(http, blocked_index, "metadata", False)
    assert http.get(f"/{blocked_index}/_mapping").status_code == 200


def test_read_only_allow_delete_answers_429_and_lets_the_index_be_deleted(http, blocked_index):
    set_block(http, blocked_index, "read_only_allow_delete")
    reason = blocked(blocked_index, FLOOD)
    assert_error(http.put(f"/{blocked_index}/_doc/2", {"n": 2}), 429, "cluster_block_exception", reason)
    # Deleting documents is a write: OpenSearch refuses it too (only the index may go).
    assert_error(http.delete(f"/{blocked_index}/_doc/1"), 429, "cluster_block_exception", reason)
    for item in bulk_items(http, blocked_index):
        assert item["status"] == 429, item
        assert item["error"]["reason"] == reason, item
    assert_error(http.put(f"/{blocked_index}/_mapping", {"properties": {"tag": {"type": "keyword"}}}),
                 429, "cluster_block_exception", reason)
    assert http.post(f"/{blocked_index}/_search", {}).json()["hits"]["total"]["value"] == 1
    r = http.delete(f"/{blocked_index}")
    assert r.status_code == 200, r.text
    assert http.head(f"/{blocked_index}").status_code == 404


def test_cluster_state_lists_the_blocks_in_force(http, blocked_index, cluster_block):
    set_block(http, blocked_index, "metadata")
    cluster_block("cluster.blocks.read_only")
    blocks = http.get(f"/_cluster/state/blocks/{blocked_index}").json()["blocks"]
    assert blocks == {
        "global": {"6": {"description": "cluster read-only (api)", "retryable": False,
                         "levels": ["write", "metadata_write"]}},
        "indices": {blocked_index: {"9": {"description": "index metadata (api)", "retryable": False,
                                          "levels": ["metadata_read", "metadata_write"]}}},
    }


def test_two_blocks_report_both_and_the_non_retryable_status(http, blocked_index):
    set_block(http, blocked_index, "write")
    set_block(http, blocked_index, "read_only_allow_delete")
    assert_error(http.put(f"/{blocked_index}/_doc/2", {"n": 2}), 403, "cluster_block_exception",
                 f"index [{blocked_index}] blocked by: [{WRITE}, {FLOOD}];")


@pytest.fixture
def cluster_block(http):
    """Sets a cluster block for the test and always lifts it (the lifting request is the one
    setting the block allows)."""
    names = []

    def put(name):
        names.append(name)
        r = http.put("/_cluster/settings", {"transient": {name: True}})
        assert r.status_code == 200, r.text

    yield put
    for name in names:
        r = http.put("/_cluster/settings", {"transient": {name: None}})
        assert r.status_code == 200, r.text


def test_cluster_read_only_blocks_writes_creation_and_settings_until_lifted(http, blocked_index, cluster_block):
    cluster_block("cluster.blocks.read_only")
    global_reason = f"blocked by: [{CLUSTER_READ_ONLY}];"
    assert_error(http.put(f"/{blocked_index}/_doc/2", {"n": 2}), 403, "cluster_block_exception", global_reason)
    assert_error(http.bulk([{"index": {"_index": blocked_index}}, {"n": 3}]), 403,
                 "cluster_block_exception", global_reason)
    assert_error(http.put(f"/{blocked_index}-new"), 403, "cluster_block_exception",
                 blocked(blocked_index + "-new", CLUSTER_READ_ONLY))
    assert_error(http.put(f"/{blocked_index}/_settings", {"index.number_of_replicas": 0}), 403,
                 "cluster_block_exception", global_reason)
    assert_error(http.put("/_cluster/settings", {"transient": {"action.auto_create_index": "false"}}), 403,
                 "cluster_block_exception", global_reason)
    assert_error(http.delete(f"/{blocked_index}"), 403, "cluster_block_exception",
                 blocked(blocked_index, CLUSTER_READ_ONLY))
    # Shard-level actions ask the cluster-wide blocks first, and name no index then.
    assert_error(http.post(f"/{blocked_index}/_forcemerge"), 403, "cluster_block_exception", global_reason)
    assert http.post(f"/{blocked_index}/_search", {}).json()["hits"]["total"]["value"] == 1
    r = http.put("/_cluster/settings", {"transient": {"cluster.blocks.read_only": False}})
    assert r.status_code == 200, r.text
    assert http.put(f"/{blocked_index}/_doc/2", {"n": 2}).status_code == 201


def test_cluster_read_only_allow_delete_still_deletes_indices(http, blocked_index, cluster_block):
    cluster_block("cluster.blocks.read_only_allow_delete")
    assert_error(http.put(f"/{blocked_index}/_doc/2", {"n": 2}), 403, "cluster_block_exception",
                 f"blocked by: [{CLUSTER_ALLOW_DELETE}];")
    r = http.delete(f"/{blocked_index}")
    assert r.status_code == 200, r.text


def test_cluster_create_index_block_refuses_new_indices_only(http, blocked_index, cluster_block):
    cluster_block("cluster.blocks.create_index")
    reason = "blocked by: [FORBIDDEN/10/cluster create-index blocked (api)];"
    assert_error(http.put(f"/{blocked_index}-new"), 403, "cluster_block_exception", reason)
    # Auto-creation by a write is index creation too.
    assert_error(http.put(f"/{blocked_index}-auto/_doc/1", {"n": 1}), 403, "cluster_block_exception", reason)
    assert http.put(f"/{blocked_index}/_doc/2", {"n": 2}).status_code == 201


WATERMARKS = ("cluster.routing.allocation.disk.watermark.low",
              "cluster.routing.allocation.disk.watermark.high",
              "cluster.routing.allocation.disk.watermark.flood_stage")


def flood_blocked(http, index):
    settings = http.get(f"/{index}/_settings", params={"flat_settings": "true"}).json()
    return settings[index]["settings"].get("index.blocks.read_only_allow_delete") == "true"


def test_flood_stage_block_is_set_past_flood_stage_and_lifted_below_high(http, blocked_index, is_shoal):
    """Absolute watermarks (free bytes) put this machine's real disk past flood stage (1pb free
    needed) and then back under every watermark (1b free needed)."""
    if not is_shoal:
        pytest.skip("OpenSearch refreshes disk usage every 30s; the test would be slow there")

    def watermarks(value):
        return {"transient": {"cluster.routing.allocation.disk.threshold_enabled": "true",
                              **{k: value for k in WATERMARKS}}}
    try:
        r = http.put("/_cluster/settings", watermarks("1pb"))
        assert r.status_code == 200, r.text
        wait_for(lambda: flood_blocked(http, blocked_index), timeout=30, what="flood-stage block")
        assert_error(http.put(f"/{blocked_index}/_doc/2", {"n": 2}), 429, "cluster_block_exception",
                     blocked(blocked_index, FLOOD))
        r = http.put("/_cluster/settings", watermarks("1b"))
        assert r.status_code == 200, r.text
        wait_for(lambda: not flood_blocked(http, blocked_index), timeout=30, what="block lifted")
        assert http.put(f"/{blocked_index}/_doc/2", {"n": 2}).status_code == 201
    finally:
        http.put("/_cluster/settings", {"transient": {
            "cluster.routing.allocation.disk.threshold_enabled": None, **{k: None for k in WATERMARKS}}})
        # Every index of the node was blocked: a failure above must not leave them so.
        http.put("/_all/_settings", {"index.blocks.read_only_allow_delete": None},
                 params={"expand_wildcards": "all"})
