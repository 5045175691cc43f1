"""The mapping limits `index.mapping.total_fields.limit`, `depth.limit` and
`field_name_length.limit`: enforced on index creation, put mapping and dynamic mapping updates
from documents (single writes and bulk items) with OpenSearch 2.18's messages, counted as its
`MappingLookup.checkLimits` counts (objects, fields and multi-fields), and dynamic."""
import pytest

from util import assert_error

TOTAL = "index.mapping.total_fields.limit"
DEPTH = "index.mapping.depth.limit"
NAME = "index.mapping.field_name_length.limit"

# title, title.raw (a multi-field), user (an object), user.name: 4 fields
FOUR_FIELDS = {"properties": {
    "title": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
    "user": {"properties": {"name": {"type": "keyword"}}},
}}


def create(http, name, settings, mappings=None):
    body = {"settings": {"number_of_replicas": 0, **settings}}
    if mappings is not None:
        body["mappings"] = mappings
    return http.put(f"/{name}", body)


def properties(http, name):
    return http.get(f"/{name}/_mapping").json()[name]["mappings"].get("properties", {})


def test_creation_over_the_total_fields_limit_is_refused_counting_objects_and_multi_fields(http, index_name):
    r = create(http, index_name, {TOTAL: 3}, FOUR_FIELDS)
    assert_error(r, 400, "illegal_argument_exception", "Limit of total fields [3] has been exceeded")
    assert http.head(f"/{index_name}").status_code == 404
    r = create(http, index_name, {TOTAL: 4}, FOUR_FIELDS)
    assert r.status_code == 200, r.text


def test_put_mapping_over_the_limit_is_refused_and_changes_nothing(http, index_name):
    assert create(http, index_name, {TOTAL: 4}, FOUR_FIELDS).status_code == 200
    r = http.put(f"/{index_name}/_mapping", {"properties": {"n": {"type": "long"}}})
    assert_error(r, 400, "illegal_argument_exception", "Limit of total fields [4] has been exceeded")
    assert "n" not in properties(http, index_name)
    # a field already mapped is no new field
    r = http.put(f"/{index_name}/_mapping", {"properties": {"title": {"type": "text"}}})
    assert r.status_code == 200, r.text


def test_document_adding_fields_over_the_limit_is_refused_and_not_indexed(http, index_name):
    assert create(http, index_name, {TOTAL: 2}, {"properties": {"a": {"type": "long"}}}).status_code == 200
    assert http.put(f"/{index_name}/_doc/1", {"a": 1, "b": 2}).status_code == 201
    r = http.put(f"/{index_name}/_doc/2", {"a": 1, "c": 3})
    assert_error(r, 400, "illegal_argument_exception", "Limit of total fields [2] has been exceeded")
    r = http.bulk([{"index": {"_index": index_name, "_id": "3"}}, {"d": {"e": 1}},
                   {"index": {"_index": index_name, "_id": "4"}}, {"a": 4}], params={"refresh": "true"})
    items = r.json()["items"]
    assert items[0]["index"]["status"] == 400, items
    assert items[0]["index"]["error"]["type"] == "illegal_argument_exception"
    assert items[0]["index"]["error"]["reason"] == "Limit of total fields [2] has been exceeded"
    assert items[1]["index"]["status"] == 201, items
    assert sorted(properties(http, index_name)) == ["a", "b"]
    hits = http.post(f"/{index_name}/_search").json()["hits"]["hits"]
    assert sorted(h["_id"] for h in hits) == ["1", "4"]


def test_total_fields_limit_is_dynamic(http, index_name):
    assert create(http, index_name, {TOTAL: 1}, {"properties": {"a": {"type": "long"}}}).status_code == 200
    assert http.put(f"/{index_name}/_doc/1", {"b": 1}).status_code == 400
    r = http.put(f"/{index_name}/_settings", {TOTAL: 2})
    assert r.status_code == 200, r.text
    assert http.put(f"/{index_name}/_doc/1", {"b": 1}).status_code == 201
    got = http.get(f"/{index_name}/_settings/{TOTAL}", params={"flat_settings": "true"}).json()
    assert got[index_name]["settings"] == {TOTAL: "2"}
    # lowering it under what is mapped is accepted; the next mapping change is refused
    assert http.put(f"/{index_name}/_settings", {TOTAL: 1}).status_code == 200
    r = http.put(f"/{index_name}/_mapping", {"properties": {"c": {"type": "long"}}})
    assert_error(r, 400, "illegal_argument_exception", "Limit of total fields [1] has been exceeded")
    # documents using only mapped fields are still indexed
    assert http.put(f"/{index_name}/_doc/2", {"a": 1, "b": 2}).status_code == 201


def test_the_default_total_fields_limit_is_1000(http, index_name):
    props = {f"f{i}": {"type": "long"} for i in range(1001)}
    r = create(http, index_name, {}, {"properties": props})
    assert_error(r, 400, "illegal_argument_exception", "Limit of total fields [1000] has been exceeded")
    del props["f1000"]
    assert create(http, index_name, {}, {"properties": props}).status_code == 200


def test_depth_limit_names_the_first_object_too_deep(http, index_name):
    deep = {"properties": {"a": {"properties": {"b": {"properties": {"c": {"type": "keyword"}}}}}}}
    r = create(http, index_name, {DEPTH: 2}, deep)
    assert_error(r, 400, "illegal_argument_exception",
                 "Limit of mapping depth [2] has been exceeded due to object field [a.b]")
    assert create(http, index_name, {DEPTH: 3}, deep).status_code == 200
    r = http.put(f"/{index_name}/_doc/1", {"x": {"y": {"z": {"w": 1}}}})
    assert_error(r, 400, "illegal_argument_exception",
                 "Limit of mapping depth [3] has been exceeded due to object field [x.y.z]")
    assert http.put(f"/{index_name}/_doc/1", {"x": {"y": {"z": 1}}}).status_code == 201
    assert http.put(f"/{index_name}/_settings", {DEPTH: 4}).status_code == 200
    assert http.put(f"/{index_name}/_doc/2", {"x": {"y": {"q": {"w": 1}}}}).status_code == 201


def test_field_name_length_limit_applies_to_each_name(http, index_name):
    # OpenSearch also checks its metadata fields' names (`_data_stream_timestamp`), so the
    # limit stays above them to hold on both.
    long_name = "n" * 31
    r = create(http, index_name, {NAME: 30}, {"properties": {"obj": {"properties": {long_name: {"type": "long"}}}}})
    assert_error(r, 400, "illegal_argument_exception",
                 f"Field name [{long_name}] is longer than the limit of [30] characters")
    # a dotted path is several names, each under the limit
    dotted = ".".join(["p" * 20] * 3)
    assert create(http, index_name, {NAME: 30}, {"properties": {dotted: {"type": "long"}}}).status_code == 200
    r = http.put(f"/{index_name}/_doc/1", {"k" * 31: 1})
    assert_error(r, 400, "illegal_argument_exception",
                 f"Field name [{'k' * 31}] is longer than the limit of [30] characters")


@pytest.mark.parametrize("key,value,reason", [
    (TOTAL, -1, f"Failed to parse value [-1] for setting [{TOTAL}] must be >= 0"),
    (DEPTH, 0, f"Failed to parse value [0] for setting [{DEPTH}] must be >= 1"),
    (NAME, 0, f"Failed to parse value [0] for setting [{NAME}] must be >= 1"),
])
def test_limit_values_are_checked(http, index_name, key, value, reason):
    assert_error(create(http, index_name, {key: value}), 400, "illegal_argument_exception", reason)
    assert create(http, index_name, {}).status_code == 200
    assert_error(http.put(f"/{index_name}/_settings", {key: value}), 400, "illegal_argument_exception", reason)
