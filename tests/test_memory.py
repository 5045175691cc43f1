"""Memory bounds: search contexts freed when their keep-alive ends, the node's indexing buffer setting."""
import time

import pytest

from conftest import NodeStartError


def test_expired_scroll_context_is_freed_without_further_scroll_calls(http, index, is_shoal):
    """A scroll's context pins the shard (its searcher and writer) until the keep-alive ends, even if the
    client never comes back. Seen from outside: closing and reopening the index after the keep-alive
    must give a working shard (a context still held makes the reopened shard fail to lock its index)."""
    if not is_shoal:
        pytest.skip("checks Shoal's sweep of expired contexts")
    assert http.put(f"/{index}/_doc/1", {"a": 1}, params={"refresh": "true"}).status_code == 201
    r = http.get(f"/{index}/_search", params={"scroll": "1s"})
    assert r.status_code == 200 and r.json()["_scroll_id"], r.text
    time.sleep(2.5)  # the keep-alive ends; nothing touches the scroll registry after it
    assert http.post(f"/{index}/_close").status_code == 200
    assert http.post(f"/{index}/_open").status_code == 200
    r = http.put(f"/{index}/_doc/2", {"a": 2}, params={"timeout": "5s"}, timeout=30)
    assert r.status_code == 201, r.text


def test_index_buffer_size_that_does_not_parse_stops_the_node(node_factory):
    node = node_factory({"indices.memory.index_buffer_size": "lots"}, start=False)
    with pytest.raises(NodeStartError) as failure:
        node.start(timeout=30)
    assert "indices.memory.index_buffer_size" in str(failure.value)


def test_node_starts_with_a_byte_size_index_buffer(node_factory):
    node = node_factory({"indices.memory.index_buffer_size": "64mb", "indices.memory.max_index_buffer_size": "1gb"})
    http = node.http()
    assert http.put("/buf", {"settings": {"number_of_replicas": 0}}).status_code == 200
    assert http.put("/buf/_doc/1", {"a": 1}, params={"refresh": "true"}).status_code == 201
    assert "indexing buffer shared by the shards" in node.log_tail(400)
