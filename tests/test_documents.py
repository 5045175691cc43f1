"""Single-document APIs: index/create/get/HEAD/_source/delete/update, concurrency control, versions, routing."""
import pytest

from util import assert_error


def test_index_document_response_shape(http, index):
    r = http.put(f"/{index}/_doc/1", {"title": "hello"})
    assert r.status_code == 201
    assert r.json() == {"_index": index, "_id": "1", "_version": 1, "result": "created",
                        "_shards": {"total": 1, "successful": 1, "failed": 0}, "_seq_no": 0, "_primary_term": 1}
    assert r.headers.get("location") == f"/{index}/_doc/1"
    r = http.put(f"/{index}/_doc/1", {"title": "hello again"})
    assert r.status_code == 200
    assert r.json() == {"_index": index, "_id": "1", "_version": 2, "result": "updated",
                        "_shards": {"total": 1, "successful": 1, "failed": 0}, "_seq_no": 1, "_primary_term": 1}


def test_index_shards_total_counts_unassigned_replicas(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_replicas": 1}})
    r = http.put(f"/{index_name}/_doc/1", {"a": 1})
    assert r.json()["_shards"] == {"total": 2, "successful": 1, "failed": 0}


def test_post_with_id_and_auto_id(http, index):
    r = http.post(f"/{index}/_doc/abc", {"a": 1})
    assert r.status_code == 201 and r.json()["_id"] == "abc"
    r = http.post(f"/{index}/_doc", {"a": 2})
    assert r.status_code == 201
    body = r.json()
    assert body["result"] == "created" and body["_version"] == 1
    auto_id = body["_id"]
    assert isinstance(auto_id, str) and len(auto_id) == 20
    assert http.get(f"/{index}/_doc/{auto_id}").json()["_source"] == {"a": 2}


def test_seq_no_increments_per_shard(http, index):
    seqs = [http.put(f"/{index}/_doc/{i}", {"a": i}).json()["_seq_no"] for i in range(5)]
    assert seqs == [0, 1, 2, 3, 4]
    assert http.delete(f"/{index}/_doc/0").json()["_seq_no"] == 5


def test_create_endpoint_and_conflict(http, index):
    r = http.put(f"/{index}/_create/1", {"a": 1})
    assert r.status_code == 201
    assert r.json()["result"] == "created"
    r = http.put(f"/{index}/_create/1", {"a": 2})
    err = assert_error(r, 409, "version_conflict_engine_exception",
                       reason="[1]: version conflict, document already exists (current version [1])")
    assert err["index"] == index
    assert err["shard"] == "0"
    assert isinstance(err["index_uuid"], str)
    r = http.post(f"/{index}/_create/2", {"a": 2})
    assert r.status_code == 201


def test_op_type_create(http, index):
    assert http.put(f"/{index}/_doc/1", {"a": 1}, params={"op_type": "create"}).status_code == 201
    r = http.put(f"/{index}/_doc/1", {"a": 1}, params={"op_type": "create"})
    assert_error(r, 409, "version_conflict_engine_exception",
                 reason="[1]: version conflict, document already exists (current version [1])")


def test_get_document(http, index):
    http.put(f"/{index}/_doc/1", {"title": "hello", "n": 1, "nested": {"x": [1, 2]}})
    r = http.get(f"/{index}/_doc/1")
    assert r.status_code == 200
    assert r.json() == {"_index": index, "_id": "1", "_version": 1, "_seq_no": 0, "_primary_term": 1,
                        "found": True, "_source": {"title": "hello", "n": 1, "nested": {"x": [1, 2]}}}


def test_get_is_realtime_without_refresh(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_replicas": 0, "refresh_interval": "-1"}})
    http.put(f"/{index_name}/_doc/1", {"v": 1})
    http.put(f"/{index_name}/_doc/1", {"v": 2})
    r = http.get(f"/{index_name}/_doc/1").json()
    assert r["_source"] == {"v": 2} and r["_version"] == 2
    http.delete(f"/{index_name}/_doc/1")
    assert http.get(f"/{index_name}/_doc/1").json()["found"] is False
    # realtime=false reads the last refreshed searcher: nothing was ever refreshed
    http.put(f"/{index_name}/_doc/2", {"v": 1})
    assert http.get(f"/{index_name}/_doc/2", params={"realtime": "false"}).json()["found"] is False


def test_get_missing_document(http, index):
    r = http.get(f"/{index}/_doc/nope")
    assert r.status_code == 404
    assert r.json() == {"_index": index, "_id": "nope", "found": False}


def test_get_document_missing_index(http, index_name):
    r = http.get(f"/{index_name}/_doc/1")
    assert_error(r, 404, "index_not_found_exception", reason=f"no such index [{index_name}]")


def test_head_document(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1})
    r = http.head(f"/{index}/_doc/1")
    assert r.status_code == 200 and r.content == b""
    assert http.head(f"/{index}/_doc/2").status_code == 404
    assert http.head(f"/{index}-nope/_doc/1").status_code == 404


def test_source_filtering_on_get(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1, "b": {"c": 2, "d": 3}, "e": "x"})
    r = http.get(f"/{index}/_doc/1", params={"_source_includes": "b.*"}).json()
    assert r["_source"] == {"b": {"c": 2, "d": 3}}
    r = http.get(f"/{index}/_doc/1", params={"_source_excludes": "b.c,e"}).json()
    assert r["_source"] == {"a": 1, "b": {"d": 3}}
    r = http.get(f"/{index}/_doc/1", params={"_source": "false"}).json()
    assert "_source" not in r and r["found"] is True
    r = http.get(f"/{index}/_doc/1", params={"_source": "a,e"}).json()
    assert r["_source"] == {"a": 1, "e": "x"}


def test_get_source_endpoint(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1, "b": 2})
    r = http.get(f"/{index}/_source/1")
    assert r.status_code == 200
    assert r.json() == {"a": 1, "b": 2}
    assert http.get(f"/{index}/_source/1", params={"_source_includes": "b"}).json() == {"b": 2}
    r = http.get(f"/{index}/_source/2")
    assert_error(r, 404, "resource_not_found_exception", reason=f"Document not found [{index}]/[2]")
    assert http.head(f"/{index}/_source/1").status_code == 200
    assert http.head(f"/{index}/_source/2").status_code == 404


def test_source_is_kept_verbatim(http, index):
    raw = '{"z":1,  "a" : [3,2,1], "u":"caf\\u00e9", "f": 1.50, "big": 12345678901234567}'
    r = http.put(f"/{index}/_doc/1", raw)
    assert r.status_code == 201, r.text
    got = http.get(f"/{index}/_source/1")
    # key order and values are kept (OpenSearch returns the original bytes)
    assert list(got.json()) == ["z", "a", "u", "f", "big"]
    assert got.json()["big"] == 12345678901234567
    assert got.json()["u"] == "café"


def test_delete_document(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1})
    r = http.delete(f"/{index}/_doc/1")
    assert r.status_code == 200
    assert r.json() == {"_index": index, "_id": "1", "_version": 2, "result": "deleted",
                        "_shards": {"total": 1, "successful": 1, "failed": 0}, "_seq_no": 1, "_primary_term": 1}
    r = http.delete(f"/{index}/_doc/1")
    assert r.status_code == 404
    assert r.json() == {"_index": index, "_id": "1", "_version": 3, "result": "not_found",
                        "_shards": {"total": 1, "successful": 1, "failed": 0}, "_seq_no": 2, "_primary_term": 1}
    # re-creating after delete continues the version
    r = http.put(f"/{index}/_doc/1", {"a": 2})
    assert r.status_code == 201
    assert r.json()["result"] == "created" and r.json()["_version"] == 4


def test_delete_never_existing_document(http, index):
    r = http.delete(f"/{index}/_doc/ghost")
    assert r.status_code == 404
    assert r.json()["result"] == "not_found" and r.json()["_version"] == 1


def test_refresh_param_on_write(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_replicas": 0, "refresh_interval": "-1"}})
    r = http.put(f"/{index_name}/_doc/1", {"a": 1}, params={"refresh": "true"})
    assert r.json()["forced_refresh"] is True
    assert http.post(f"/{index_name}/_search").json()["hits"]["total"]["value"] == 1
    r = http.put(f"/{index_name}/_doc/2", {"a": 1}, params={"refresh": "false"})
    assert "forced_refresh" not in r.json()
    assert http.post(f"/{index_name}/_search").json()["hits"]["total"]["value"] == 1


def test_refresh_wait_for_with_default_interval(http, index):
    r = http.put(f"/{index}/_doc/1", {"a": 1}, params={"refresh": "wait_for"})
    assert r.status_code == 201
    assert http.post(f"/{index}/_search").json()["hits"]["total"]["value"] == 1


# ---------------------------------------------------------------- optimistic concurrency

def test_if_seq_no_if_primary_term(http, index):
    r = http.put(f"/{index}/_doc/1", {"v": 1}).json()
    seq, term = r["_seq_no"], r["_primary_term"]
    r = http.put(f"/{index}/_doc/1", {"v": 2}, params={"if_seq_no": seq, "if_primary_term": term})
    assert r.status_code == 200 and r.json()["_version"] == 2
    r = http.put(f"/{index}/_doc/1", {"v": 3}, params={"if_seq_no": seq, "if_primary_term": term})
    err = assert_error(r, 409, "version_conflict_engine_exception",
                       reason="[1]: version conflict, required seqNo [0], primary term [1]. current document has seqNo [1] and primary term [1]")
    assert err["index"] == index and err["shard"] == "0"
    r = http.delete(f"/{index}/_doc/1", params={"if_seq_no": 99, "if_primary_term": 1})
    assert_error(r, 409, "version_conflict_engine_exception",
                 reason="[1]: version conflict, required seqNo [99], primary term [1]. current document has seqNo [1] and primary term [1]")
    r = http.put(f"/{index}/_doc/1", {"v": 3}, params={"if_seq_no": 1, "if_primary_term": 2})
    assert_error(r, 409, "version_conflict_engine_exception",
                 reason="[1]: version conflict, required seqNo [1], primary term [2]. current document has seqNo [1] and primary term [1]")


def test_if_seq_no_on_missing_document(http, index):
    r = http.put(f"/{index}/_doc/new", {"v": 1}, params={"if_seq_no": 0, "if_primary_term": 1})
    assert_error(r, 409, "version_conflict_engine_exception",
                 reason="[new]: version conflict, required seqNo [0], primary term [1]. but no document was found")


def test_if_seq_no_requires_if_primary_term(http, index):
    r = http.put(f"/{index}/_doc/1", {"v": 1}, params={"if_seq_no": 0})
    err = assert_error(r, 400, "action_request_validation_exception")
    assert "ifSeqNo is set, but primary term is [0]" in err["reason"]


def test_external_versioning(http, index):
    r = http.put(f"/{index}/_doc/1", {"v": 1}, params={"version": 5, "version_type": "external"})
    assert r.status_code == 201 and r.json()["_version"] == 5
    r = http.put(f"/{index}/_doc/1", {"v": 2}, params={"version": 5, "version_type": "external"})
    assert_error(r, 409, "version_conflict_engine_exception",
                 reason="[1]: version conflict, current version [5] is higher or equal to the one provided [5]")
    r = http.put(f"/{index}/_doc/1", {"v": 2}, params={"version": 10, "version_type": "external"})
    assert r.status_code == 200 and r.json()["_version"] == 10
    # external_gte accepts equal
    r = http.put(f"/{index}/_doc/1", {"v": 3}, params={"version": 10, "version_type": "external_gte"})
    assert r.status_code == 200 and r.json()["_version"] == 10
    r = http.put(f"/{index}/_doc/1", {"v": 3}, params={"version": 9, "version_type": "external_gte"})
    assert_error(r, 409, "version_conflict_engine_exception",
                 reason="[1]: version conflict, current version [10] is higher than the one provided [9]")
    assert http.get(f"/{index}/_doc/1").json()["_source"] == {"v": 3}
    r = http.delete(f"/{index}/_doc/1", params={"version": 11, "version_type": "external"})
    assert r.status_code == 200 and r.json()["_version"] == 11


def test_internal_version_param_refused(http, index):
    http.put(f"/{index}/_doc/1", {"v": 1})
    r = http.put(f"/{index}/_doc/1", {"v": 1}, params={"version": 1})
    err = assert_error(r, 400, "action_request_validation_exception")
    assert "internal versioning can not be used for optimistic concurrency control. Please use `if_seq_no` and `if_primary_term` instead" in err["reason"]


def test_get_with_version_check(http, index):
    http.put(f"/{index}/_doc/1", {"v": 1})
    r = http.get(f"/{index}/_doc/1", params={"version": 2})
    assert_error(r, 409, "version_conflict_engine_exception",
                 reason="[1]: version conflict, current version [1] is different than the one provided [2]")


# ---------------------------------------------------------------- routing

def test_routing_is_required_to_find_document(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 5, "number_of_replicas": 0}})
    r = http.put(f"/{index_name}/_doc/1", {"a": 1}, params={"routing": "user7", "refresh": "true"})
    assert r.status_code == 201
    shard_with_routing = http.get(f"/{index_name}/_search", params={"routing": "user7"}).json()["_shards"]["total"]
    assert shard_with_routing == 1
    r = http.get(f"/{index_name}/_doc/1", params={"routing": "user7"}).json()
    assert r["found"] is True and r["_routing"] == "user7"
    # without routing the id is hashed to (in general) another shard
    found_elsewhere = http.get(f"/{index_name}/_doc/1").json()["found"]
    assert found_elsewhere is False
    r = http.post(f"/{index_name}/_search", {"query": {"match_all": {}}}).json()
    assert r["hits"]["hits"][0]["_routing"] == "user7"
    assert http.delete(f"/{index_name}/_doc/1", params={"routing": "user7"}).json()["result"] == "deleted"


def test_routing_matches_opensearch_shard_placement(http, index_name):
    """murmur3 routing must place ids on the same shards as OpenSearch (checked with _search preference).

    OpenSearch: hash = Murmur3 x86_32 (seed 0) over the routing string's UTF-16LE code units;
    shard = floorMod(hash, routing_num_shards) / (routing_num_shards / number_of_shards), where
    routing_num_shards defaults to number_of_shards * 2^k, the largest such value <= 1024."""
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 3, "number_of_replicas": 0}})
    ids = [str(i) for i in range(12)] + ["alpha", "beta", "gamma", "ünïcode"]
    for i in ids:
        http.put(f"/{index_name}/_doc/{i}", {"a": 1})
    http.post(f"/{index_name}/_refresh")
    placement = {}
    for shard in range(3):
        r = http.post(f"/{index_name}/_search", {"size": 100}, params={"preference": f"_shards:{shard}"}).json()
        for h in r["hits"]["hits"]:
            placement[h["_id"]] = shard
    # computed with OpenSearch 2.18 (Murmur3HashFunction over the UTF-16 id, floorMod by routing_num_shards)
    expected = {"0": 1, "1": 2, "2": 1, "3": 1, "4": 1, "5": 0, "6": 2, "7": 0, "8": 2, "9": 2, "10": 1,
                "11": 2, "alpha": 0, "beta": 1, "gamma": 0, "ünïcode": 0}
    assert placement == expected


def test_routing_placement_two_shards(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 2, "number_of_replicas": 0}})
    for i in range(10):
        http.put(f"/{index_name}/_doc/{i}", {"a": 1})
    http.post(f"/{index_name}/_refresh")
    placement = {}
    for shard in range(2):
        r = http.post(f"/{index_name}/_search", {"size": 100}, params={"preference": f"_shards:{shard}"}).json()
        for h in r["hits"]["hits"]:
            placement[h["_id"]] = shard
    assert placement == {"0": 1, "1": 0, "2": 0, "3": 0, "4": 1, "5": 0, "6": 0, "7": 0, "8": 1, "9": 0}


def test_routing_custom_value_placement(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 4, "number_of_replicas": 0}})
    for i, routing in enumerate(["a", "b", "c", "d", "e", "f"]):
        http.put(f"/{index_name}/_doc/{i}", {"r": routing}, params={"routing": routing})
    http.post(f"/{index_name}/_refresh")
    placement = {}
    for shard in range(4):
        r = http.post(f"/{index_name}/_search", {"size": 100}, params={"preference": f"_shards:{shard}"}).json()
        for h in r["hits"]["hits"]:
            placement[h["_source"]["r"]] = shard
    expected = {"a": 1, "b": 2, "c": 1, "d": 0, "e": 3, "f": 2}  # as OpenSearch 2.18 places them
    assert placement == expected


# ---------------------------------------------------------------- update

def test_update_partial_doc(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1, "b": {"c": 1, "d": 2}})
    r = http.post(f"/{index}/_update/1", {"doc": {"b": {"c": 5}, "e": "new"}})
    assert r.status_code == 200
    assert r.json() == {"_index": index, "_id": "1", "_version": 2, "result": "updated",
                        "_shards": {"total": 1, "successful": 1, "failed": 0}, "_seq_no": 1, "_primary_term": 1}
    assert http.get(f"/{index}/_source/1").json() == {"a": 1, "b": {"c": 5, "d": 2}, "e": "new"}


def test_update_detect_noop(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1})
    r = http.post(f"/{index}/_update/1", {"doc": {"a": 1}})
    assert r.status_code == 200
    assert r.json() == {"_index": index, "_id": "1", "_version": 1, "result": "noop",
                        "_shards": {"total": 0, "successful": 0, "failed": 0}, "_seq_no": 0, "_primary_term": 1}
    r = http.post(f"/{index}/_update/1", {"doc": {"a": 1}, "detect_noop": False})
    assert r.json()["result"] == "updated" and r.json()["_version"] == 2


def test_update_missing_document(http, index):
    r = http.post(f"/{index}/_update/nope", {"doc": {"a": 1}})
    err = assert_error(r, 404, "document_missing_exception", reason="[nope]: document missing")
    assert err["index"] == index and err["shard"] == "0"


def test_update_doc_as_upsert(http, index):
    r = http.post(f"/{index}/_update/1", {"doc": {"a": 1}, "doc_as_upsert": True})
    assert r.status_code == 201
    assert r.json()["result"] == "created" and r.json()["_version"] == 1
    r = http.post(f"/{index}/_update/1", {"doc": {"b": 2}, "doc_as_upsert": True})
    assert r.status_code == 200 and r.json()["result"] == "updated"
    assert http.get(f"/{index}/_source/1").json() == {"a": 1, "b": 2}


def test_update_with_upsert_document(http, index):
    r = http.post(f"/{index}/_update/1", {"doc": {"a": 2}, "upsert": {"a": 1, "created": True}})
    assert r.status_code == 201 and r.json()["result"] == "created"
    assert http.get(f"/{index}/_source/1").json() == {"a": 1, "created": True}
    r = http.post(f"/{index}/_update/1", {"doc": {"a": 2}, "upsert": {"a": 1, "created": True}})
    assert r.json()["result"] == "updated"
    assert http.get(f"/{index}/_source/1").json() == {"a": 2, "created": True}


def test_update_returns_source_when_asked(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1})
    r = http.post(f"/{index}/_update/1", {"doc": {"b": 2}}, params={"_source": "true"}).json()
    assert r["get"]["_source"] == {"a": 1, "b": 2}
    assert r["get"]["found"] is True


def test_update_if_seq_no_conflict(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1})
    http.put(f"/{index}/_doc/1", {"a": 2})
    r = http.post(f"/{index}/_update/1", {"doc": {"a": 3}}, params={"if_seq_no": 0, "if_primary_term": 1})
    assert_error(r, 409, "version_conflict_engine_exception",
                 reason="[1]: version conflict, required seqNo [0], primary term [1]. current document has seqNo [1] and primary term [1]")
    r = http.post(f"/{index}/_update/1", {"doc": {"a": 3}}, params={"if_seq_no": 1, "if_primary_term": 1})
    assert r.status_code == 200


def test_update_retry_on_conflict_accepted(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1})
    r = http.post(f"/{index}/_update/1", {"doc": {"a": 5}}, params={"retry_on_conflict": 3})
    assert r.status_code == 200 and r.json()["result"] == "updated"


def test_scripted_update_refused_by_shoal(http, index, is_shoal):
    if not is_shoal:
        pytest.skip("OpenSearch runs scripts; Shoal refuses them with a clear 400")
    http.put(f"/{index}/_doc/1", {"n": 1})
    r = http.post(f"/{index}/_update/1", {"script": {"source": "ctx._source.n += 1"}})
    assert r.status_code == 400
    assert r.json()["error"]["type"] in ("illegal_argument_exception", "parsing_exception")
    assert "script" in r.json()["error"]["reason"].lower()


def test_update_body_without_doc_or_script(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1})
    r = http.post(f"/{index}/_update/1", {})
    err = assert_error(r, 400, "action_request_validation_exception")
    assert err["reason"] == "Validation Failed: 1: script or doc is missing;"


def test_document_breaking_the_mapping(http, index_name):
    http.put(f"/{index_name}", {"mappings": {"properties": {"n": {"type": "long"}}}})
    r = http.put(f"/{index_name}/_doc/1", {"n": "not a number"})
    err = assert_error(r, 400, "mapper_parsing_exception",
                       reason="failed to parse field [n] of type [long] in document with id '1'. Preview of field's value: 'not a number'")
    assert err["caused_by"]["type"] == "illegal_argument_exception"


def test_id_too_long_refused(http, index):
    r = http.put(f"/{index}/_doc/" + "x" * 513, {"a": 1})
    err = assert_error(r, 400, "action_request_validation_exception")
    assert "id [" in err["reason"] and "is too long, must be no longer than 512 bytes but was: 513" in err["reason"]


def test_ids_with_special_characters(http, index):
    from urllib.parse import quote
    for doc_id in ["a/b", "a b", "é", "a?b&c", "#x"]:
        r = http.put(f"/{index}/_doc/" + quote(doc_id, safe=""), {"id": doc_id})
        assert r.status_code == 201, (doc_id, r.text)
        assert r.json()["_id"] == doc_id
        got = http.get(f"/{index}/_doc/" + quote(doc_id, safe="")).json()
        assert got["_id"] == doc_id and got["_source"] == {"id": doc_id}


def test_client_index_get_delete(client, index):
    r = client.index(index=index, id="1", body={"a": 1}, refresh=True)
    assert r["result"] == "created"
    assert client.get(index=index, id="1")["_source"] == {"a": 1}
    assert client.exists(index=index, id="1") is True
    assert client.update(index=index, id="1", body={"doc": {"b": 2}})["result"] == "updated"
    assert client.delete(index=index, id="1")["result"] == "deleted"
    assert client.exists(index=index, id="1") is False


def test_document_apis_refuse_parameters_they_do_not_know_or_do_not_act_on(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1}, params={"refresh": "true"})
    bulk = '{"index":{"_id":"2"}}\n{"a":2}\n'
    for method, path, body, param in [
        ("put", f"/{index}/_doc/3", {"a": 3}, "refrsh"),
        ("get", f"/{index}/_doc/1", None, "bogus"),
        ("delete", f"/{index}/_doc/1", None, "bogus"),
        ("post", f"/{index}/_update/1", {"doc": {"a": 4}}, "bogus"),
        ("post", f"/{index}/_mget", {"ids": ["1"]}, "bogus"),
        ("post", f"/{index}/_bulk", bulk, "bogus"),
    ]:
        r = getattr(http, method)(path, body, params={param: "1"}) if body is not None \
            else getattr(http, method)(path, params={param: "1"})
        err = assert_error(r, 400, "illegal_argument_exception")
        assert err["reason"].startswith(
            f"request [{path}] contains unrecognized parameter: [{param}]"), err
    for method, path, body, param, value in [
        ("post", f"/{index}/_update/1", {"doc": {"a": 4}}, "lang", "painless"),
        ("post", f"/{index}/_bulk", bulk, "type", "_doc"),
    ]:
        err = assert_error(getattr(http, method)(path, body, params={param: value}), 400,
                           "illegal_argument_exception")
        assert f"does not support: [{param}]" in err["reason"], err
    # Nothing refused was applied.
    assert http.get(f"/{index}/_doc/1").json()["_source"] == {"a": 1}
    assert http.get(f"/{index}/_doc/2").status_code == 404


def test_get_with_stored_fields_leaves_the_source_out_and_compares_any_version_type(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1}, params={"routing": "r"})
    r = http.get(f"/{index}/_doc/1", params={"routing": "r", "stored_fields": "_routing"})
    assert r.status_code == 200 and "_source" not in r.json(), r.text
    assert r.json()["_routing"] == "r", r.text
    both = http.get(f"/{index}/_doc/1", params={"routing": "r", "stored_fields": "a", "_source": "true"})
    assert both.json()["_source"] == {"a": 1}, both.text
    assert http.get(f"/{index}/_doc/1", params={"routing": "r", "version": "1",
                                                "version_type": "external"}).status_code == 200
    assert_error(http.get(f"/{index}/_doc/1", params={"routing": "r", "version": "2",
                                                      "version_type": "external_gte"}),
                 409, "version_conflict_engine_exception")
    assert_error(http.get(f"/{index}/_doc/1", params={"version_type": "sometimes"}),
                 400, "illegal_argument_exception")
