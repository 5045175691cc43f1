"""`wait_for_active_shards` on writes: the primary waits for that many active copies (the
request parameter, else `index.write.wait_for_active_shards`, default 1) up to the request
`timeout`, then fails the write with OpenSearch's `unavailable_shards_exception` text. On one
node an index with a replica has one active copy of each shard."""

import pytest

INDEX = "wfas"


@pytest.fixture
def yellow_index(http):
    http.delete(f"/{INDEX}")
    r = http.put(f"/{INDEX}", {"settings": {"number_of_shards": 1, "number_of_replicas": 1}})
    assert r.status_code == 200, r.text
    yield INDEX
    http.delete(f"/{INDEX}")


def test_the_default_needs_only_the_primary(http, yellow_index):
    r = http.put(f"/{INDEX}/_doc/1", {"n": 1})
    assert r.status_code == 201, r.text
    assert r.json()["_shards"] == {"total": 2, "successful": 1, "failed": 0}


def test_all_copies_times_out_with_unavailable_shards(http, yellow_index):
    r = http.put(f"/{INDEX}/_doc/1", {"n": 1}, params={"wait_for_active_shards": "all", "timeout": "1s"})
    assert r.status_code == 503, r.text
    error = r.json()["error"]
    assert error["type"] == "unavailable_shards_exception"
    assert error["reason"] == (
        f"[{INDEX}][0] Not enough active copies to meet shard count of [ALL] (have 1, needed 2). "
        f"Timeout: [1s], request: [BulkShardRequest [[{INDEX}][0]] containing [1] requests]")
    assert http.get(f"/{INDEX}/_doc/1").status_code == 404, "nothing was written"


def test_a_bulk_item_fails_on_its_own_shard(http, yellow_index):
    r = http.bulk([{"index": {"_index": INDEX, "_id": "1"}}, {"n": 1}],
                  params={"wait_for_active_shards": "2", "timeout": "500ms"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["errors"] is True
    item = body["items"][0]["index"]
    assert item["status"] == 503
    assert item["error"]["type"] == "unavailable_shards_exception"


def test_the_index_setting_applies_when_the_request_sets_none(http, yellow_index):
    r = http.put(f"/{INDEX}/_settings", {"index.write.wait_for_active_shards": "all"})
    assert r.status_code == 200, r.text
    r = http.put(f"/{INDEX}/_doc/1", {"n": 1}, params={"timeout": "300ms"})
    assert r.status_code == 503, r.text
    r = http.put(f"/{INDEX}/_doc/1", {"n": 1}, params={"wait_for_active_shards": "1"})
    assert r.status_code == 201, r.text


def test_bad_values_are_refused(http, yellow_index):
    r = http.put(f"/{INDEX}/_doc/1", {"n": 1}, params={"wait_for_active_shards": "x"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["reason"] == "cannot parse ActiveShardCount[x]"
    r = http.put(f"/{INDEX}/_doc/1", {"n": 1}, params={"wait_for_active_shards": "3"})
    assert r.status_code == 400, r.text
