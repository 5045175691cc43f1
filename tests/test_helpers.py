"""opensearch-py helpers must work unchanged: bulk, streaming_bulk, parallel_bulk, scan, reindex."""
from opensearchpy import helpers


def gen_docs(index, n, start=0):
    for i in range(start, start + n):
        yield {"_index": index, "_id": str(i), "_source": {"n": i, "text": f"document number {i}", "even": i % 2 == 0}}


def test_helpers_bulk(client, index):
    ok, errors = helpers.bulk(client, gen_docs(index, 500), chunk_size=100, refresh=True)
    assert ok == 500 and errors == []
    assert client.count(index=index)["count"] == 500


def test_helpers_bulk_reports_errors(client, index_name):
    client.indices.create(index=index_name, body={"mappings": {"properties": {"n": {"type": "long"}}}})
    actions = [{"_index": index_name, "_id": "1", "_source": {"n": 1}},
               {"_index": index_name, "_id": "2", "_source": {"n": "NaN-text"}},
               {"_op_type": "create", "_index": index_name, "_id": "1", "_source": {"n": 2}}]
    ok, errors = helpers.bulk(client, actions, raise_on_error=False)
    assert ok == 1 and len(errors) == 2
    assert errors[0]["index"]["status"] == 400
    assert errors[1]["create"]["status"] == 409


def test_helpers_streaming_bulk(client, index):
    results = list(helpers.streaming_bulk(client, gen_docs(index, 300), chunk_size=64))
    assert len(results) == 300 and all(ok for ok, _ in results)
    assert {item["index"]["result"] for _, item in results} == {"created"}
    actions = [{"_op_type": "delete", "_index": index, "_id": str(i)} for i in range(100)] + \
              [{"_op_type": "update", "_index": index, "_id": str(i), "doc": {"updated": True}} for i in range(100, 150)]
    results = list(helpers.streaming_bulk(client, actions, chunk_size=50))
    assert all(ok for ok, _ in results)
    client.indices.refresh(index=index)
    assert client.count(index=index)["count"] == 200
    assert client.count(index=index, body={"query": {"term": {"updated": True}}})["count"] == 50


def test_helpers_parallel_bulk(client, index):
    results = list(helpers.parallel_bulk(client, gen_docs(index, 1000), thread_count=4, chunk_size=100))
    assert len(results) == 1000 and all(ok for ok, _ in results)
    client.indices.refresh(index=index)
    assert client.count(index=index)["count"] == 1000


def test_helpers_scan(client, index):
    helpers.bulk(client, gen_docs(index, 1234), refresh=True)
    seen = [h["_id"] for h in helpers.scan(client, index=index, size=100, scroll="1m")]
    assert len(seen) == 1234 and len(set(seen)) == 1234
    evens = list(helpers.scan(client, index=index, query={"query": {"term": {"even": True}}}, size=50))
    assert len(evens) == 617
    ordered = [h["_source"]["n"] for h in helpers.scan(client, index=index, preserve_order=True,
                                                        query={"sort": [{"n": "asc"}]}, size=200)]
    assert ordered == list(range(1234))


def test_helpers_reindex(client, index_name):
    src, dst = index_name + "-src", index_name + "-dst"
    client.indices.create(index=src, body={"settings": {"number_of_replicas": 0}})
    helpers.bulk(client, gen_docs(src, 250), refresh=True)
    ok, errors = helpers.reindex(client, src, dst, query={"query": {"range": {"n": {"lt": 200}}}},
                                 chunk_size=60, bulk_kwargs={"refresh": True})
    assert ok == 200 and not errors
    assert client.count(index=dst)["count"] == 200
    assert client.get(index=dst, id="42")["_source"]["n"] == 42
