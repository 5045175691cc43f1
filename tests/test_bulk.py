"""_bulk and _mget."""
import json

import pytest

from util import assert_error


def test_bulk_all_action_types(http, index):
    r = http.bulk([
        {"index": {"_index": index, "_id": "1"}}, {"a": 1},
        {"create": {"_index": index, "_id": "2"}}, {"a": 2},
        {"index": {"_index": index}}, {"a": 3},
        {"update": {"_index": index, "_id": "1"}}, {"doc": {"b": 1}},
        {"delete": {"_index": index, "_id": "2"}},
        {"update": {"_index": index, "_id": "9"}}, {"doc": {"c": 1}, "doc_as_upsert": True},
    ], params={"refresh": "true"})
    assert r.status_code == 200
    body = r.json()
    assert body["errors"] is False
    assert isinstance(body["took"], int)
    items = body["items"]
    assert [list(i)[0] for i in items] == ["index", "create", "index", "update", "delete", "update"]
    first = items[0]["index"]
    assert first == {"_index": index, "_id": "1", "_version": 1, "result": "created", "forced_refresh": True,
                     "_shards": {"total": 1, "successful": 1, "failed": 0}, "_seq_no": 0, "_primary_term": 1,
                     "status": 201}
    assert items[1]["create"]["status"] == 201 and items[1]["create"]["result"] == "created"
    assert len(items[2]["index"]["_id"]) == 20
    assert items[3]["update"]["result"] == "updated" and items[3]["update"]["status"] == 200
    assert items[3]["update"]["_version"] == 2
    assert items[4]["delete"]["result"] == "deleted" and items[4]["delete"]["status"] == 200
    assert items[5]["update"]["result"] == "created" and items[5]["update"]["status"] == 201
    assert [i[list(i)[0]]["_seq_no"] for i in items] == [0, 1, 2, 3, 4, 5]
    assert http.get(f"/{index}/_source/1").json() == {"a": 1, "b": 1}
    assert http.post(f"/{index}/_count").json()["count"] == 3


def test_bulk_per_item_errors(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_replicas": 0},
                                "mappings": {"properties": {"n": {"type": "long"}}}})
    r = http.bulk([
        {"create": {"_index": index_name, "_id": "1"}}, {"n": 1},
        {"create": {"_index": index_name, "_id": "1"}}, {"n": 2},
        {"index": {"_index": index_name, "_id": "2"}}, {"n": "not-a-number"},
        {"update": {"_index": index_name, "_id": "missing"}}, {"doc": {"n": 1}},
        {"delete": {"_index": index_name, "_id": "missing"}},
        {"index": {"_index": index_name, "_id": "3"}}, {"n": 3},
    ])
    assert r.status_code == 200
    body = r.json()
    assert body["errors"] is True
    items = body["items"]
    assert items[0]["create"]["status"] == 201
    conflict = items[1]["create"]
    assert conflict["status"] == 409
    assert conflict["_index"] == index_name and conflict["_id"] == "1"
    assert conflict["error"]["type"] == "version_conflict_engine_exception"
    assert conflict["error"]["reason"] == "[1]: version conflict, document already exists (current version [1])"
    assert conflict["error"]["index"] == index_name and conflict["error"]["shard"] == "0"
    bad = items[2]["index"]
    assert bad["status"] == 400
    assert bad["error"]["type"] == "mapper_parsing_exception"
    assert bad["error"]["reason"] == "failed to parse field [n] of type [long] in document with id '2'. Preview of field's value: 'not-a-number'"
    missing = items[3]["update"]
    assert missing["status"] == 404
    assert missing["error"]["type"] == "document_missing_exception"
    assert missing["error"]["reason"] == "[missing]: document missing"
    nf = items[4]["delete"]
    assert nf["status"] == 404 and nf["result"] == "not_found" and "error" not in nf
    assert items[5]["index"]["status"] == 201
    # failed items do not consume sequence numbers; not_found deletes do
    assert items[5]["index"]["_seq_no"] == 2


def test_bulk_index_from_url(http, index):
    r = http.bulk([{"index": {"_id": "1"}}, {"a": 1}, {"delete": {"_id": "1"}}], path=f"/{index}/_bulk")
    assert r.json()["errors"] is False
    assert r.json()["items"][0]["index"]["_index"] == index


def test_bulk_missing_index_in_action(http):
    r = http.bulk([{"index": {"_id": "1"}}, {"a": 1}])
    err = assert_error(r, 400, "action_request_validation_exception")
    assert err["reason"] == "Validation Failed: 1: index is missing;"


def test_bulk_malformed_action_line(http, index):
    r = http.post("/_bulk", f'{{"index": {{"_index": "{index}", "_id": "1"}}}}\n{{"a": 1}}\n{{"index": \n',
                  headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 400
    # OpenSearch: json_e_o_f_exception "Unexpected end-of-input ... line: 3, column: 11" (Jackson's names)
    err = r.json()["error"]
    assert err["type"] in ("json_e_o_f_exception", "json_parse_exception", "x_content_parse_exception",
                           "parse_exception")
    assert "line" in err["reason"]
    # nothing of the request was applied
    assert http.get(f"/{index}/_doc/1").json()["found"] is False


def test_bulk_unknown_action(http, index):
    r = http.bulk([{"upsert": {"_index": index, "_id": "1"}}, {"a": 1}])
    assert_error(r, 400, "illegal_argument_exception",
                 reason="Malformed action/metadata line [1], expected one of [create, delete, index, update] but found [upsert]")


def test_bulk_missing_trailing_newline(http, index):
    body = json.dumps({"index": {"_index": index, "_id": "1"}}) + "\n" + json.dumps({"a": 1})
    r = http.post("/_bulk", body, headers={"Content-Type": "application/x-ndjson"})
    assert_error(r, 400, "illegal_argument_exception", reason="The bulk request must be terminated by a newline [\\n]")


def test_bulk_empty_body(http):
    r = http.post("/_bulk", "", headers={"Content-Type": "application/x-ndjson"})
    assert_error(r, 400, "parse_exception", reason="request body is required")


def test_bulk_action_line_not_json(http):
    r = http.post("/_bulk", 'not json\n{"a":1}\n', headers={"Content-Type": "application/x-ndjson"})
    # OpenSearch: json_parse_exception "Unrecognized token 'not': ... line: 1, column: 5]"
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] in ("json_parse_exception", "parse_exception", "x_content_parse_exception")
    assert "line: 1, column: 5" in err["reason"] or "line 1 column 5" in err["reason"]


def test_bulk_unknown_parameter_in_action(http, index):
    r = http.bulk([{"index": {"_index": index, "_id": "1", "bogus": 1}}, {"a": 1}])
    assert_error(r, 400, "illegal_argument_exception",
                 reason="Action/metadata line [1] contains an unknown parameter [bogus]")


def test_bulk_bad_document_json(http, index):
    r = http.post("/_bulk", json.dumps({"index": {"_index": index, "_id": "1"}}) + "\n{not json}\n"
                  + json.dumps({"index": {"_index": index, "_id": "2"}}) + "\n" + json.dumps({"a": 2}) + "\n",
                  headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 200
    items = r.json()["items"]
    assert r.json()["errors"] is True
    assert items[0]["index"]["status"] == 400
    assert items[0]["index"]["error"]["type"] == "mapper_parsing_exception"
    assert items[0]["index"]["error"]["reason"] == "failed to parse"
    assert items[1]["index"]["status"] == 201


def test_bulk_refresh_wait_for(http, index):
    r = http.bulk([{"index": {"_index": index, "_id": str(i)}} if j == 0 else {"n": i}
                   for i in range(10) for j in range(2)], params={"refresh": "wait_for"})
    assert r.status_code == 200 and r.json()["errors"] is False
    assert http.post(f"/{index}/_search").json()["hits"]["total"]["value"] == 10


def test_bulk_refresh_true_sets_forced_refresh(http, index):
    r = http.bulk([{"index": {"_index": index, "_id": "1"}}, {"a": 1}], params={"refresh": "true"})
    assert r.json()["items"][0]["index"]["forced_refresh"] is True
    r = http.bulk([{"index": {"_index": index, "_id": "2"}}, {"a": 1}], params={"refresh": "false"})
    assert "forced_refresh" not in r.json()["items"][0]["index"]


def test_bulk_require_alias(http, index):
    r = http.bulk([{"index": {"_index": index, "_id": "1"}}, {"a": 1}], params={"require_alias": "true"})
    item = r.json()["items"][0]["index"]
    assert item["status"] == 404
    assert item["error"]["type"] == "index_not_found_exception"
    assert item["error"]["reason"] == f"no such index [{index}] and [require_alias] request flag is [true] and [{index}] is not an alias"
    http.post("/_aliases", {"actions": [{"add": {"index": index, "alias": index + "-al"}}]})
    r = http.bulk([{"index": {"_index": index + "-al", "_id": "1"}}, {"a": 1}], params={"require_alias": "true"})
    assert r.json()["items"][0]["index"]["status"] == 201


def test_bulk_pipeline_refused_by_shoal(http, index, is_shoal):
    if not is_shoal:
        pytest.skip("OpenSearch runs ingest pipelines; Shoal refuses them clearly")
    r = http.bulk([{"index": {"_index": index, "_id": "1"}}, {"a": 1}], params={"pipeline": "my-pipeline"})
    assert r.status_code == 400
    assert "pipeline" in r.json()["error"]["reason"]


def test_bulk_routing_and_versions(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 3, "number_of_replicas": 0}})
    r = http.bulk([
        {"index": {"_index": index_name, "_id": "1", "routing": "r1"}}, {"a": 1},
        {"index": {"_index": index_name, "_id": "2", "version": 7, "version_type": "external"}}, {"a": 1},
        {"index": {"_index": index_name, "_id": "2", "version": 7, "version_type": "external"}}, {"a": 2},
        {"index": {"_index": index_name, "_id": "1", "routing": "r1", "if_seq_no": 99, "if_primary_term": 1}}, {"a": 2},
    ])
    items = r.json()["items"]
    assert items[0]["index"]["status"] == 201
    assert items[1]["index"]["_version"] == 7
    assert items[2]["index"]["status"] == 409
    assert items[2]["index"]["error"]["reason"] == "[2]: version conflict, current version [7] is higher or equal to the one provided [7]"
    assert items[3]["index"]["status"] == 409
    assert http.get(f"/{index_name}/_doc/1", params={"routing": "r1"}).json()["_source"] == {"a": 1}


def test_bulk_update_with_upsert_and_retry(http, index):
    r = http.bulk([
        {"update": {"_index": index, "_id": "1", "retry_on_conflict": 3}}, {"doc": {"a": 2}, "upsert": {"a": 1}},
        {"update": {"_index": index, "_id": "1"}}, {"doc": {"a": 2}},
        {"update": {"_index": index, "_id": "1"}}, {"doc": {"a": 2}},
    ])
    items = r.json()["items"]
    assert [i["update"]["result"] for i in items] == ["created", "updated", "noop"]
    assert [i["update"]["status"] for i in items] == [201, 200, 200]
    assert http.get(f"/{index}/_source/1").json() == {"a": 2}


def test_bulk_large_batch(http, index):
    lines = []
    for i in range(2000):
        lines += [{"index": {"_index": index, "_id": str(i)}}, {"n": i, "s": f"doc {i}"}]
    r = http.bulk(lines, params={"refresh": "true"})
    assert r.json()["errors"] is False and len(r.json()["items"]) == 2000
    assert http.post(f"/{index}/_count").json()["count"] == 2000


def test_bulk_with_client(client, index):
    body = [{"index": {"_index": index, "_id": "a"}}, {"x": 1}, {"delete": {"_index": index, "_id": "a"}}]
    r = client.bulk(body=body)
    assert r["errors"] is False


# ---------------------------------------------------------------- mget

def test_mget_docs_and_ids(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1, "b": 2})
    http.put(f"/{index}/_doc/2", {"a": 2})
    r = http.post("/_mget", {"docs": [{"_index": index, "_id": "1"}, {"_index": index, "_id": "3"},
                                      {"_index": index + "-missing", "_id": "1"}]})
    assert r.status_code == 200
    docs = r.json()["docs"]
    assert docs[0] == {"_index": index, "_id": "1", "_version": 1, "_seq_no": 0, "_primary_term": 1,
                       "found": True, "_source": {"a": 1, "b": 2}}
    assert docs[1] == {"_index": index, "_id": "3", "found": False}
    assert docs[2]["_index"] == index + "-missing" and docs[2]["_id"] == "1"
    assert docs[2]["error"]["type"] == "index_not_found_exception"
    assert docs[2]["error"]["reason"] == f"no such index [{index}-missing]"
    r = http.post(f"/{index}/_mget", {"ids": ["2", "1"]})
    assert [d["_id"] for d in r.json()["docs"]] == ["2", "1"]
    assert all(d["found"] for d in r.json()["docs"])


def test_mget_source_filtering_and_routing(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1, "b": 2}, params={"routing": "r"})
    r = http.post(f"/{index}/_mget", {"docs": [{"_id": "1", "routing": "r", "_source": ["b"]},
                                              {"_id": "1", "routing": "r", "_source": False}]})
    docs = r.json()["docs"]
    assert docs[0]["_source"] == {"b": 2} and docs[0]["_routing"] == "r"
    assert "_source" not in docs[1] and docs[1]["found"] is True
    r = http.post(f"/{index}/_mget", {"ids": ["1"]}, params={"routing": "r", "_source_includes": "a"})
    assert r.json()["docs"][0]["_source"] == {"a": 1}


def test_mget_documents_without_routing_take_the_urls(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 5, "number_of_replicas": 0}})
    for n in range(10):
        http.put(f"/{index_name}/_doc/{n}", {"n": n}, params={"routing": "r"})
    docs = {"docs": [{"_id": str(n)} for n in range(10)]}
    found = lambda **params: sum(d["found"] for d in http.post(f"/{index_name}/_mget", docs, params=params).json()["docs"])
    # Routed by their ids, most land on shards that do not hold them.
    assert found() < 10
    assert found(routing="r") == 10


def test_mget_is_realtime_unless_asked_not_to_be(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_replicas": 0, "refresh_interval": "-1"}})
    http.put(f"/{index_name}/_doc/1", {"a": 1})
    found = lambda **params: http.post(f"/{index_name}/_mget", {"ids": ["1"]}, params=params).json()["docs"][0]["found"]
    assert found() is True
    assert found(realtime="false") is False  # the last refreshed searcher: never refreshed
    assert found(realtime="false", refresh="true") is True


def test_mget_documents_take_only_what_shoal_reads(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1})
    for doc, kind in [({"_id": "1", "_routing": "r"}, "parse_exception"),
                      ({"_id": "1", "version": 1}, "illegal_argument_exception")]:
        assert_error(http.post(f"/{index}/_mget", {"docs": [doc]}), 400, kind)


def test_mget_without_docs_refused(http, index):
    r = http.post(f"/{index}/_mget", {})
    err = assert_error(r, 400, "action_request_validation_exception")
    assert err["reason"] == "Validation Failed: 1: no documents to get;"


def test_mget_missing_index_in_doc_without_default(http):
    r = http.post("/_mget", {"docs": [{"_id": "1"}]})
    err = assert_error(r, 400, "action_request_validation_exception")
    assert err["reason"] == "Validation Failed: 1: index is missing for doc 0;"


# ---------------------------------------------------------------- delete_by_query / update_by_query

def _seed(http, index, n=10):
    http.bulk([x for i in range(n) for x in ({"index": {"_index": index, "_id": str(i)}},
                                              {"n": i, "parity": "even" if i % 2 == 0 else "odd"})],
              params={"refresh": "true"})


def test_delete_by_query(http, index):
    _seed(http, index)
    r = http.post(f"/{index}/_delete_by_query", {"query": {"term": {"parity.keyword": "odd"}}},
                  params={"refresh": "true"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["deleted"] == 5 and body["total"] == 5
    assert body["timed_out"] is False and body["version_conflicts"] == 0 and body["noops"] == 0
    assert body["failures"] == [] and body["batches"] == 1
    assert set(body) >= {"took", "retries", "throttled_millis", "requests_per_second", "throttled_until_millis"}
    assert body["retries"] == {"bulk": 0, "search": 0}
    assert http.post(f"/{index}/_count").json()["count"] == 5
    assert http.get(f"/{index}/_doc/1").json()["found"] is False


def test_delete_by_query_match_nothing(http, index):
    _seed(http, index, 3)
    r = http.post(f"/{index}/_delete_by_query", {"query": {"term": {"n": 100}}}).json()
    assert r["deleted"] == 0 and r["total"] == 0 and r["batches"] == 0


def test_delete_by_query_requires_query(http, index):
    r = http.post(f"/{index}/_delete_by_query", {})
    err = assert_error(r, 400, "action_request_validation_exception")
    assert err["reason"] == "Validation Failed: 1: query is missing;"


def test_update_by_query_reindexes_in_place(http, index):
    _seed(http, index, 6)
    http.put(f"/{index}/_mapping", {"properties": {"parity2": {"type": "keyword"}}})
    r = http.post(f"/{index}/_update_by_query", {"query": {"range": {"n": {"gte": 3}}}}, params={"refresh": "true"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["updated"] == 3 and body["total"] == 3 and body["deleted"] == 0
    assert body["version_conflicts"] == 0 and body["failures"] == []
    # versions were bumped by the re-index
    assert http.get(f"/{index}/_doc/4").json()["_version"] == 2
    assert http.get(f"/{index}/_doc/1").json()["_version"] == 1


def test_update_by_query_whole_index(http, index):
    _seed(http, index, 4)
    r = http.post(f"/{index}/_update_by_query").json()
    assert r["updated"] == 4


def test_update_by_query_with_script_refused_by_shoal(http, index, is_shoal):
    if not is_shoal:
        pytest.skip("OpenSearch runs scripts")
    _seed(http, index, 2)
    r = http.post(f"/{index}/_update_by_query", {"script": {"source": "ctx._source.n++"}})
    assert r.status_code == 400
    assert "script" in r.json()["error"]["reason"].lower()


def test_by_query_writes_scroll_size_matches_per_batch(http, index):
    _seed(http, index, 10)
    r = http.post(f"/{index}/_update_by_query", {"query": {"match_all": {}}}, params={"scroll_size": "3"})
    assert r.status_code == 200 and (r.json()["updated"], r.json()["batches"]) == (10, 4), r.text
    r = http.post(f"/{index}/_delete_by_query", {"query": {"range": {"n": {"lt": 5}}}},
                  params={"scroll_size": "5", "refresh": "true"})
    assert r.status_code == 200 and (r.json()["deleted"], r.json()["batches"]) == (5, 1), r.text
    assert http.get(f"/{index}/_count").json()["count"] == 5, "refresh=true after the last batch"
    err = assert_error(http.post(f"/{index}/_delete_by_query", {"query": {"match_all": {}}},
                                 params={"scroll_size": "0"}), 400, "action_request_validation_exception")
    assert "[size] cannot be [0] in a scroll context" in err["reason"], err
    assert_error(http.post(f"/{index}/_delete_by_query", {"query": {"match_all": {}}},
                           params={"scroll_size": "many"}), 400, "illegal_argument_exception")
    assert http.get(f"/{index}/_count").json()["count"] == 5, "a refused request deleted nothing"
