"""Index management: create/get/delete/exists, name validation, mappings, settings, close/open, aliases,
refresh/flush/forcemerge, stats, auto-creation."""
import pytest

from util import assert_error, shards_ok, wait_for


# ---------------------------------------------------------------- create / get / exists / delete

def test_create_index_with_settings_mappings_aliases(http, index_name):
    body = {
        "settings": {"index": {"number_of_shards": 2, "number_of_replicas": 0, "refresh_interval": "2s"}},
        "mappings": {"properties": {"title": {"type": "text"}, "tag": {"type": "keyword"}}},
        "aliases": {index_name + "-alias": {}},
    }
    r = http.put(f"/{index_name}", body)
    assert r.status_code == 200, r.text
    assert r.json() == {"acknowledged": True, "shards_acknowledged": True, "index": index_name}

    got = http.get(f"/{index_name}").json()
    assert list(got) == [index_name]
    idx = got[index_name]
    assert idx["aliases"] == {index_name + "-alias": {}}
    assert idx["mappings"] == {"properties": {"tag": {"type": "keyword"}, "title": {"type": "text"}}}
    s = idx["settings"]["index"]
    assert s["number_of_shards"] == "2"          # settings come back as strings
    assert s["number_of_replicas"] == "0"
    assert s["refresh_interval"] == "2s"
    assert s["provided_name"] == index_name
    assert s["creation_date"].isdigit()
    assert isinstance(s["uuid"], str) and len(s["uuid"]) >= 20
    assert s["version"]["created"].isdigit()
    assert s["replication"]["type"] == "DOCUMENT"


def test_create_index_flat_settings_and_defaults(http, index_name):
    r = http.put(f"/{index_name}", {"settings": {"index.number_of_shards": 1}})
    assert r.status_code == 200, r.text
    s = http.get(f"/{index_name}/_settings", params={"flat_settings": "true"}).json()[index_name]["settings"]
    assert s["index.number_of_shards"] == "1"
    assert s["index.number_of_replicas"] == "1"   # default replicas
    assert s["index.provided_name"] == index_name


def test_create_index_without_body(http, index_name):
    r = http.put(f"/{index_name}")
    assert r.status_code == 200
    assert r.json()["index"] == index_name
    got = http.get(f"/{index_name}").json()[index_name]
    assert got["mappings"] == {}
    assert got["aliases"] == {}


def test_create_existing_index_is_refused(http, index):
    r = http.put(f"/{index}")
    err = assert_error(r, 400, "resource_already_exists_exception",
                       reason_re=rf"^index \[{index}/[A-Za-z0-9_-]+\] already exists$")
    assert err["index"] == index


@pytest.mark.parametrize("name,reason", [
    ("Foo", "Invalid index name [Foo], must be lowercase"),
    ("_foo", "Invalid index name [_foo], must not start with '_', '-', or '+'"),
    ("-foo", "Invalid index name [-foo], must not start with '_', '-', or '+'"),
    ("+foo", "Invalid index name [+foo], must not start with '_', '-', or '+'"),
    ("a#b", "Invalid index name [a#b], must not contain '#'"),
    ("a:b", "Invalid index name [a:b], must not contain ':'"),
    ("a*b", 'Invalid index name [a*b], must not contain the following characters [ , ", *, \\, <, |, ,, >, /, ?]'),
    ("a?b", 'Invalid index name [a?b], must not contain the following characters [ , ", *, \\, <, |, ,, >, /, ?]'),
    ("a<b", 'Invalid index name [a<b], must not contain the following characters [ , ", *, \\, <, |, ,, >, /, ?]'),
    ("a|b", 'Invalid index name [a|b], must not contain the following characters [ , ", *, \\, <, |, ,, >, /, ?]'),
    ('a"b', 'Invalid index name [a"b], must not contain the following characters [ , ", *, \\, <, |, ,, >, /, ?]'),
    ("a b", 'Invalid index name [a b], must not contain the following characters [ , ", *, \\, <, |, ,, >, /, ?]'),
])
def test_create_index_name_validation(http, name, reason):
    from urllib.parse import quote
    r = http.put("/" + quote(name, safe=""))
    err = assert_error(r, 400, "invalid_index_name_exception", reason=reason)
    assert err["index"] == name
    assert err["index_uuid"] == "_na_"


def test_create_index_name_too_long(http):
    name = "a" * 256
    r = http.put("/" + name)
    assert_error(r, 400, "invalid_index_name_exception",
                 reason=f"Invalid index name [{name}], index name is too long, (256 > 255)")


def test_create_index_name_255_bytes_is_accepted(http):
    name = "t-" + "b" * 253
    try:
        r = http.put("/" + name, {"settings": {"number_of_replicas": 0}})
        assert r.status_code == 200, r.text
    finally:
        http.delete("/" + name)


def test_create_index_name_length_counts_utf8_bytes(http):
    name = "t-" + "é" * 127   # 2 + 254 = 256 bytes, 129 characters
    from urllib.parse import quote
    r = http.put("/" + quote(name))
    assert_error(r, 400, "invalid_index_name_exception", reason_re=r"index name is too long, \(256 > 255\)$")


def test_index_exists_head(http, index):
    r = http.head(f"/{index}")
    assert r.status_code == 200
    assert r.content == b""
    r = http.head(f"/{index}-missing")
    assert r.status_code == 404
    assert r.content == b""


def test_client_indices_exists(client, index):
    assert client.indices.exists(index=index) is True
    assert client.indices.exists(index=index + "-nope") is False


def test_get_missing_index_is_404(http, index_name):
    r = http.get(f"/{index_name}-missing")
    err = assert_error(r, 404, "index_not_found_exception", reason=f"no such index [{index_name}-missing]")
    assert err["index"] == f"{index_name}-missing"
    assert err["resource.type"] == "index_or_alias"
    assert err["resource.id"] == f"{index_name}-missing"
    assert err["index_uuid"] == "_na_"


def test_get_index_wildcard_and_list(http, index_name):
    for suffix in ("-a", "-b"):
        assert http.put(f"/{index_name}{suffix}", {"settings": {"number_of_replicas": 0}}).status_code == 200
    assert sorted(http.get(f"/{index_name}-*").json()) == [f"{index_name}-a", f"{index_name}-b"]
    assert sorted(http.get(f"/{index_name}-a,{index_name}-b").json()) == [f"{index_name}-a", f"{index_name}-b"]
    # a wildcard matching nothing is an empty object, not an error
    r = http.get(f"/{index_name}-zzz*")
    assert r.status_code == 200 and r.json() == {}


def test_delete_index(http, index):
    r = http.delete(f"/{index}")
    assert r.status_code == 200
    assert r.json() == {"acknowledged": True}
    assert http.head(f"/{index}").status_code == 404


def test_delete_missing_index_is_404(http, index_name):
    r = http.delete(f"/{index_name}")
    assert_error(r, 404, "index_not_found_exception", reason=f"no such index [{index_name}]")


def test_delete_missing_index_ignore_unavailable(http, index_name):
    r = http.delete(f"/{index_name}", params={"ignore_unavailable": "true"})
    assert r.status_code == 200
    assert r.json() == {"acknowledged": True}


def test_delete_comma_list_and_wildcard(http, index_name):
    for suffix in ("-a", "-b", "-c", "-d"):
        assert http.put(f"/{index_name}{suffix}", {"settings": {"number_of_replicas": 0}}).status_code == 200
    r = http.delete(f"/{index_name}-a,{index_name}-b")
    assert r.json() == {"acknowledged": True}
    assert sorted(http.get(f"/{index_name}-*").json()) == [f"{index_name}-c", f"{index_name}-d"]
    r = http.delete(f"/{index_name}-*")
    assert r.json() == {"acknowledged": True}
    assert http.get(f"/{index_name}-*").json() == {}


def test_delete_list_with_missing_member_is_404_and_deletes_nothing(http, index):
    r = http.delete(f"/{index},{index}-nonexistent")
    assert_error(r, 404, "index_not_found_exception", reason=f"no such index [{index}-nonexistent]")
    assert http.head(f"/{index}").status_code == 200


def test_delete_wildcard_refused_when_destructive_requires_name(http, index):
    r = http.put("/_cluster/settings", {"persistent": {"action.destructive_requires_name": True}})
    assert r.status_code == 200, r.text
    assert r.json() == {"acknowledged": True, "persistent": {"action": {"destructive_requires_name": "true"}},
                        "transient": {}}
    try:
        for target in ("_all", "*", f"{index[:-1]}*"):
            r = http.delete(f"/{target}")
            assert_error(r, 400, "illegal_argument_exception",
                         reason="Wildcard expressions or all indices are not allowed")
        assert http.head(f"/{index}").status_code == 200
        # a concrete name is still fine
        assert http.delete(f"/{index}").status_code == 200
    finally:
        r = http.put("/_cluster/settings", {"persistent": {"action.destructive_requires_name": None}})
        assert r.json() == {"acknowledged": True, "persistent": {}, "transient": {}}


# ---------------------------------------------------------------- mappings

def test_get_mapping_shape(http, index_name):
    http.put(f"/{index_name}", {"mappings": {"properties": {"a": {"type": "keyword"}}}})
    r = http.get(f"/{index_name}/_mapping")
    assert r.status_code == 200
    assert r.json() == {index_name: {"mappings": {"properties": {"a": {"type": "keyword"}}}}}
    # all-indices form includes ours
    assert http.get("/_mapping").json()[index_name] == {"mappings": {"properties": {"a": {"type": "keyword"}}}}


def test_put_mapping_adds_field_on_live_index(http, index):
    http.put(f"/{index}/_doc/1", {"a": "x"}, params={"refresh": "true"})
    r = http.put(f"/{index}/_mapping", {"properties": {"n": {"type": "long"}, "k": {"type": "keyword"}}})
    assert r.status_code == 200
    assert r.json() == {"acknowledged": True}
    props = http.get(f"/{index}/_mapping").json()[index]["mappings"]["properties"]
    assert props["n"] == {"type": "long"}
    assert props["k"] == {"type": "keyword"}
    assert props["a"]["type"] == "text"
    http.put(f"/{index}/_doc/2", {"n": 5, "k": "v"}, params={"refresh": "true"})
    r = http.post(f"/{index}/_search", {"query": {"term": {"k": "v"}}}).json()
    assert [h["_id"] for h in r["hits"]["hits"]] == ["2"]


def test_put_mapping_type_change_refused(http, index):
    http.put(f"/{index}/_mapping", {"properties": {"k": {"type": "keyword"}}})
    r = http.put(f"/{index}/_mapping", {"properties": {"k": {"type": "long"}}})
    assert_error(r, 400, "illegal_argument_exception", reason="mapper [k] cannot be changed from type [keyword] to [long]")


def test_put_mapping_on_missing_index_404(http, index_name):
    r = http.put(f"/{index_name}/_mapping", {"properties": {"k": {"type": "keyword"}}})
    assert_error(r, 404, "index_not_found_exception", reason=f"no such index [{index_name}]")


def test_put_mapping_unknown_type_refused(http, index):
    r = http.put(f"/{index}/_mapping", {"properties": {"k": {"type": "bogus"}}})
    assert_error(r, 400, "mapper_parsing_exception", reason="No handler for type [bogus] declared on field [k]")


def test_create_index_unknown_field_type_refused(http, index_name):
    r = http.put(f"/{index_name}", {"mappings": {"properties": {"k": {"type": "bogus"}}}})
    err = assert_error(r, 400, "mapper_parsing_exception",
                       reason="Failed to parse mapping [_doc]: No handler for type [bogus] declared on field [k]")
    assert err["caused_by"]["type"] == "mapper_parsing_exception"
    assert http.head(f"/{index_name}").status_code == 404


def test_dynamic_mapping_types(http, index):
    doc = {"s": "hello world", "i": 42, "f": 1.5, "b": True, "d": "2024-01-15", "dt": "2024-01-15T10:20:30Z",
           "o": {"inner": "x", "n": 1}, "arr": [1, 2, 3]}
    r = http.put(f"/{index}/_doc/1", doc)
    assert r.status_code == 201, r.text
    props = http.get(f"/{index}/_mapping").json()[index]["mappings"]["properties"]
    assert props["s"] == {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}
    assert props["i"] == {"type": "long"}
    assert props["f"] == {"type": "float"}
    assert props["b"] == {"type": "boolean"}
    assert props["d"] == {"type": "date"}
    assert props["dt"] == {"type": "date"}
    assert props["arr"] == {"type": "long"}
    assert props["o"] == {"properties": {"inner": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}},
                                         "n": {"type": "long"}}}


def test_dynamic_dotted_field_names_become_objects(http, index):
    http.put(f"/{index}/_doc/1", {"a.b.c": "x"}, params={"refresh": "true"})
    props = http.get(f"/{index}/_mapping").json()[index]["mappings"]["properties"]
    assert props["a"]["properties"]["b"]["properties"]["c"]["type"] == "text"
    r = http.post(f"/{index}/_search", {"query": {"match": {"a.b.c": "x"}}}).json()
    assert r["hits"]["total"]["value"] == 1
    # _source is verbatim
    assert http.get(f"/{index}/_doc/1").json()["_source"] == {"a.b.c": "x"}


def test_dynamic_strict_refuses_unknown_fields(http, index_name):
    http.put(f"/{index_name}", {"mappings": {"dynamic": "strict", "properties": {"k": {"type": "keyword"}}}})
    r = http.put(f"/{index_name}/_doc/1", {"k": "a", "other": 1})
    assert_error(r, 400, "strict_dynamic_mapping_exception",
                 reason="mapping set to strict, dynamic introduction of [other] within [_doc] is not allowed")
    r = http.put(f"/{index_name}/_doc/1", {"k": "a"})
    assert r.status_code == 201


def test_dynamic_false_keeps_source_but_does_not_map(http, index_name):
    http.put(f"/{index_name}", {"mappings": {"dynamic": False, "properties": {"k": {"type": "keyword"}}}})
    assert http.put(f"/{index_name}/_doc/1", {"k": "a", "other": "zzz"}, params={"refresh": "true"}).status_code == 201
    m = http.get(f"/{index_name}/_mapping").json()[index_name]["mappings"]
    assert m["dynamic"] == "false"
    assert "other" not in m["properties"]
    assert http.get(f"/{index_name}/_doc/1").json()["_source"] == {"k": "a", "other": "zzz"}
    r = http.post(f"/{index_name}/_search", {"query": {"match": {"other": "zzz"}}}).json()
    assert r["hits"]["total"]["value"] == 0


def test_mapping_parameters_round_trip(http, index_name):
    mappings = {"properties": {
        "t": {"type": "text", "analyzer": "english"},
        "k": {"type": "keyword", "ignore_above": 10, "doc_values": False},
        "n": {"type": "integer", "index": False},
        "sf": {"type": "scaled_float", "scaling_factor": 100.0},
        "d": {"type": "date", "format": "yyyy/MM/dd"},
        "ip": {"type": "ip"},
        "h": {"type": "half_float"}, "sh": {"type": "short"}, "by": {"type": "byte"}, "db": {"type": "double"},
        "multi": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
    }}
    r = http.put(f"/{index_name}", {"mappings": mappings})
    assert r.status_code == 200, r.text
    got = http.get(f"/{index_name}/_mapping").json()[index_name]["mappings"]["properties"]
    assert got == mappings["properties"]


def test_mapping_update_is_durable_before_ack(http, index):
    """A new field seen in a document is in the mapping as soon as the write is acknowledged."""
    http.put(f"/{index}/_doc/1", {"brand_new_field": 7})
    props = http.get(f"/{index}/_mapping").json()[index]["mappings"]["properties"]
    assert props["brand_new_field"] == {"type": "long"}


# ---------------------------------------------------------------- settings

def test_get_settings_shape(http, index):
    r = http.get(f"/{index}/_settings")
    assert r.status_code == 200
    s = r.json()[index]["settings"]["index"]
    assert s["number_of_shards"] == "1" and s["number_of_replicas"] == "0"
    assert http.get(f"/{index}/_settings/index.number_of_shards").json() == \
        {index: {"settings": {"index": {"number_of_shards": "1"}}}}


def test_put_dynamic_settings(http, index):
    r = http.put(f"/{index}/_settings", {"index": {"refresh_interval": "-1", "number_of_replicas": 0}})
    assert r.status_code == 200
    assert r.json() == {"acknowledged": True}
    s = http.get(f"/{index}/_settings").json()[index]["settings"]["index"]
    assert s["refresh_interval"] == "-1"
    r = http.put(f"/{index}/_settings", {"index.translog.durability": "async", "index.translog.sync_interval": "10s"})
    assert r.status_code == 200, r.text
    s = http.get(f"/{index}/_settings", params={"flat_settings": "true"}).json()[index]["settings"]
    assert s["index.translog.durability"] == "async"
    assert s["index.translog.sync_interval"] == "10s"


def test_put_static_setting_on_open_index_refused(http, index):
    uuid = http.get(f"/{index}/_settings").json()[index]["settings"]["index"]["uuid"]
    r = http.put(f"/{index}/_settings", {"index": {"number_of_shards": 3}})
    assert_error(r, 400, "illegal_argument_exception",
                 reason=f"Can't update non dynamic settings [[index.number_of_shards]] for open indices [[{index}/{uuid}]]")
    r = http.put(f"/{index}/_settings", {"index": {"codec": "best_compression"}})
    assert_error(r, 400, "illegal_argument_exception",
                 reason=f"Can't update non dynamic settings [[index.codec]] for open indices [[{index}/{uuid}]]")


def test_put_unknown_setting_refused(http, index):
    r = http.put(f"/{index}/_settings", {"index": {"no_such_setting": 1}})
    assert_error(r, 400, "illegal_argument_exception",
                 reason="unknown setting [index.no_such_setting] please check that any required plugins are installed, or check the breaking changes documentation for removed settings")


def test_create_index_unknown_setting_refused(http, index_name):
    r = http.put(f"/{index_name}", {"settings": {"index": {"no_such_setting": 1}}})
    assert_error(r, 400, "illegal_argument_exception",
                 reason="unknown setting [index.no_such_setting] please check that any required plugins are installed, or check the breaking changes documentation for removed settings")


def test_replication_type_is_final(http, index_name):
    r = http.put(f"/{index_name}", {"settings": {"number_of_replicas": 0, "index.replication.type": "SEGMENT"}})
    assert r.status_code == 200, r.text
    s = http.get(f"/{index_name}/_settings", params={"flat_settings": "true"}).json()[index_name]["settings"]
    assert s["index.replication.type"] == "SEGMENT"
    http.post(f"/{index_name}/_close")
    r = http.put(f"/{index_name}/_settings", {"index.replication.type": "DOCUMENT"})
    assert_error(r, 400, "illegal_argument_exception", reason_re=r"final .*setting \[index.replication.type\]")


# ---------------------------------------------------------------- close / open

def test_close_and_open_index(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1}, params={"refresh": "true"})
    r = http.post(f"/{index}/_close")
    assert r.status_code == 200
    assert r.json() == {"acknowledged": True, "shards_acknowledged": True, "indices": {index: {"closed": True}}}
    uuid = http.get(f"/{index}/_settings").json()[index]["settings"]["index"]["uuid"]
    for resp in (http.get(f"/{index}/_search"), http.get(f"/{index}/_doc/1"), http.put(f"/{index}/_doc/2", {"a": 2})):
        err = assert_error(resp, 400, "index_closed_exception", reason="closed")
        assert err["index"] == index and err["index_uuid"] == uuid
    # static settings can change while closed
    r = http.put(f"/{index}/_settings", {"index": {"codec": "best_compression"}})
    assert r.status_code == 200 and r.json() == {"acknowledged": True}
    r = http.post(f"/{index}/_open")
    assert r.status_code == 200
    assert r.json() == {"acknowledged": True, "shards_acknowledged": True}
    assert http.get(f"/{index}/_doc/1").json()["found"] is True
    assert http.get(f"/{index}/_settings").json()[index]["settings"]["index"]["codec"] == "best_compression"


def test_closed_index_shows_in_cat_indices(http, index):
    http.post(f"/{index}/_close")
    rows = http.get("/_cat/indices/" + index, params={"format": "json"}).json()
    assert rows[0]["status"] == "close"
    assert rows[0]["index"] == index


# ---------------------------------------------------------------- aliases

def test_aliases_add_remove_and_get(http, index):
    alias = index + "-al"
    r = http.post("/_aliases", {"actions": [{"add": {"index": index, "alias": alias}}]})
    assert r.status_code == 200
    assert r.json() == {"acknowledged": True}
    assert http.get("/_alias").json()[index] == {"aliases": {alias: {}}}
    assert http.get(f"/{index}/_alias").json() == {index: {"aliases": {alias: {}}}}
    assert http.get(f"/_alias/{alias}").json() == {index: {"aliases": {alias: {}}}}
    assert http.head(f"/_alias/{alias}").status_code == 200
    # search and write through the alias
    r = http.put(f"/{alias}/_doc/1", {"x": 1}, params={"refresh": "true"})
    assert r.status_code == 201 and r.json()["_index"] == index
    r = http.post(f"/{alias}/_search").json()
    assert r["hits"]["total"]["value"] == 1 and r["hits"]["hits"][0]["_index"] == index
    assert http.get(f"/{alias}/_doc/1").json()["_index"] == index
    r = http.post("/_aliases", {"actions": [{"remove": {"index": index, "alias": alias}}]})
    assert r.json() == {"acknowledged": True}
    assert http.get(f"/{index}/_alias").json() == {index: {"aliases": {}}}
    r = http.get(f"/_alias/{alias}")
    assert r.status_code == 404
    assert r.json() == {"error": f"alias [{alias}] missing", "status": 404}
    assert http.head(f"/_alias/{alias}").status_code == 404


def test_alias_over_two_indices_searches_both_and_refuses_writes(http, index_name):
    a, b, alias = index_name + "-a", index_name + "-b", index_name + "-al"
    for i in (a, b):
        http.put(f"/{i}", {"settings": {"number_of_replicas": 0}})
        http.put(f"/{i}/_doc/1", {"x": i}, params={"refresh": "true"})
    r = http.post("/_aliases", {"actions": [{"add": {"index": a, "alias": alias}}, {"add": {"index": b, "alias": alias}}]})
    assert r.json() == {"acknowledged": True}
    r = http.post(f"/{alias}/_search").json()
    assert r["hits"]["total"]["value"] == 2
    assert r["_shards"]["total"] == 2
    r = http.put(f"/{alias}/_doc/2", {"x": 1})
    assert_error(r, 400, "illegal_argument_exception",
                 reason=f"no write index is defined for alias [{alias}]. The write index may be explicitly disabled using is_write_index=false or the alias points to multiple indices without one being designated as a write index")


def test_alias_is_write_index(http, index_name):
    a, b, alias = index_name + "-a", index_name + "-b", index_name + "-al"
    for i in (a, b):
        http.put(f"/{i}", {"settings": {"number_of_replicas": 0}})
    http.post("/_aliases", {"actions": [{"add": {"index": a, "alias": alias}},
                                        {"add": {"index": b, "alias": alias, "is_write_index": True}}]})
    r = http.put(f"/{alias}/_doc/1", {"x": 1})
    assert r.status_code == 201 and r.json()["_index"] == b
    assert http.get(f"/{b}/_alias").json()[b]["aliases"][alias] == {"is_write_index": True}


def test_alias_name_clashing_with_index_refused(http, index_name):
    a, b = index_name + "-a", index_name + "-b"
    for i in (a, b):
        http.put(f"/{i}", {"settings": {"number_of_replicas": 0}})
    r = http.post("/_aliases", {"actions": [{"add": {"index": a, "alias": b}}]})
    assert_error(r, 400, "invalid_alias_name_exception",
                 reason=f"Invalid alias name [{b}], an index exists with the same name as the alias")


def test_aliases_on_missing_index_404(http, index_name):
    r = http.post("/_aliases", {"actions": [{"add": {"index": index_name, "alias": index_name + "-al"}}]})
    assert_error(r, 404, "index_not_found_exception", reason=f"no such index [{index_name}]")


def test_put_alias_endpoint(http, index):
    r = http.put(f"/{index}/_alias/{index}-al2")
    assert r.json() == {"acknowledged": True}
    assert http.get(f"/{index}/_alias").json()[index]["aliases"] == {f"{index}-al2": {}}
    r = http.delete(f"/{index}/_alias/{index}-al2")
    assert r.json() == {"acknowledged": True}


# ---------------------------------------------------------------- refresh / flush / forcemerge

def test_refresh_flush_forcemerge_shards_header(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 2, "number_of_replicas": 1}})
    # replicas count in "total" even though they are unassigned on one node
    for path in ("_refresh", "_flush", "_forcemerge"):
        r = http.post(f"/{index_name}/{path}")
        assert r.status_code == 200, r.text
        assert r.json() == {"_shards": {"total": 4, "successful": 2, "failed": 0}}, path


def test_refresh_makes_docs_searchable(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_replicas": 0, "refresh_interval": "-1"}})
    http.put(f"/{index_name}/_doc/1", {"a": 1})
    assert http.post(f"/{index_name}/_search").json()["hits"]["total"]["value"] == 0
    # but realtime get sees it
    assert http.get(f"/{index_name}/_doc/1").json()["found"] is True
    shards_ok(http.post(f"/{index_name}/_refresh").json()["_shards"])
    assert http.post(f"/{index_name}/_search").json()["hits"]["total"]["value"] == 1


def test_refresh_all(http, index):
    r = http.post("/_refresh")
    assert r.status_code == 200
    assert set(r.json()["_shards"]) == {"total", "successful", "failed"}


def test_forcemerge_to_one_segment(http, index):
    for i in range(3):
        http.put(f"/{index}/_doc/{i}", {"a": i}, params={"refresh": "true"})
    r = http.post(f"/{index}/_forcemerge", params={"max_num_segments": 1})
    assert r.json() == {"_shards": {"total": 1, "successful": 1, "failed": 0}}
    http.post(f"/{index}/_refresh")
    segs = http.get(f"/{index}/_stats/segments").json()["indices"][index]["primaries"]["segments"]
    assert segs["count"] == 1


def test_flush_missing_index_404(http, index_name):
    assert_error(http.post(f"/{index_name}/_flush"), 404, "index_not_found_exception")


# ---------------------------------------------------------------- stats

STAT_SECTIONS = {"docs", "store", "indexing", "search", "refresh", "flush", "merges", "translog", "segments"}


def test_index_stats_sections(http, index):
    for i in range(5):
        http.put(f"/{index}/_doc/{i}", {"a": i})
    http.delete(f"/{index}/_doc/4")
    http.post(f"/{index}/_refresh")
    http.post(f"/{index}/_search", {"query": {"match_all": {}}})
    r = http.get(f"/{index}/_stats")
    assert r.status_code == 200
    body = r.json()
    assert body["_shards"] == {"total": 1, "successful": 1, "failed": 0}
    assert set(body["_all"]) == {"primaries", "total"}
    idx = body["indices"][index]
    assert set(idx) >= {"uuid", "primaries", "total"}
    prim = idx["primaries"]
    assert set(prim) >= STAT_SECTIONS
    assert prim["docs"]["count"] == 4
    assert "deleted" in prim["docs"]
    assert prim["store"]["size_in_bytes"] > 0
    assert prim["indexing"]["index_total"] == 5
    assert prim["indexing"]["delete_total"] == 1
    assert {"index_time_in_millis", "index_current", "index_failed", "delete_time_in_millis", "delete_current",
            "noop_update_total"} <= set(prim["indexing"])
    assert prim["search"]["query_total"] >= 1
    assert {"open_contexts", "query_time_in_millis", "query_current", "fetch_total", "fetch_time_in_millis",
            "scroll_total", "scroll_current"} <= set(prim["search"])
    assert prim["refresh"]["total"] >= 1
    assert {"total_time_in_millis", "listeners"} <= set(prim["refresh"])
    assert {"total", "periodic", "total_time_in_millis"} <= set(prim["flush"])
    assert {"current", "current_docs", "current_size_in_bytes", "total", "total_time_in_millis", "total_docs",
            "total_size_in_bytes"} <= set(prim["merges"])
    assert prim["translog"]["operations"] >= 6
    assert {"size_in_bytes", "uncommitted_operations", "uncommitted_size_in_bytes", "earliest_last_modified_age"} \
        <= set(prim["translog"])
    assert prim["segments"]["count"] >= 1
    assert body["_all"]["primaries"]["docs"]["count"] == 4


def test_stats_metric_filter(http, index):
    r = http.get(f"/{index}/_stats/docs,store").json()
    assert set(r["indices"][index]["primaries"]) == {"docs", "store"}


def test_all_stats_contains_index(http, index):
    r = http.get("/_stats")
    assert r.status_code == 200
    assert index in r.json()["indices"]
    assert set(r.json()["_all"]["primaries"]) >= STAT_SECTIONS


def test_stats_flush_count_increments(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1})
    before = http.get(f"/{index}/_stats/flush").json()["indices"][index]["primaries"]["flush"]["total"]
    http.post(f"/{index}/_flush", params={"force": "true"})
    after = http.get(f"/{index}/_stats/flush").json()["indices"][index]["primaries"]["flush"]["total"]
    assert after == before + 1


def flush_stats(http, index):
    return http.get(f"/{index}/_stats/flush").json()["indices"][index]["primaries"]["flush"]


def test_flush_counts_what_was_asked_for_not_the_shards_own_commits(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    # Opening a new shard commits, but no one asked for a flush.
    assert flush_stats(http, index_name)["total"] == 0
    r = http.post(f"/{index_name}/_flush", params={"force": "true", "wait_if_ongoing": "false"})
    err = assert_error(r, 400, "action_request_validation_exception")
    assert "wait_if_ongoing must be true for a force flush" in err["reason"], err
    assert flush_stats(http, index_name)["total"] == 0
    # A flush with nothing to commit still counts, as OpenSearch counts it.
    assert http.post(f"/{index_name}/_flush").status_code == 200
    stats = flush_stats(http, index_name)
    assert (stats["total"], stats["periodic"]) == (1, 0), stats
    assert_error(http.post(f"/{index_name}/_flush", params={"forced": "true"}), 400, "illegal_argument_exception")


def test_a_flush_the_translog_threshold_asks_for_counts_as_periodic(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0,
                                             "index.translog.flush_threshold_size": "1kb"}})
    http.bulk([line for n in range(20) for line in ({"index": {"_index": index_name}}, {"text": "x" * 200})])
    wait_for(lambda: flush_stats(http, index_name)["periodic"] >= 1, timeout=10, what="a periodic flush")
    stats = flush_stats(http, index_name)
    assert stats["total"] >= stats["periodic"], stats


def test_stats_refuse_unknown_metrics_and_levels_and_unsupported_parameters(http, index):
    err = assert_error(http.get("/_stats/fieldata"), 400, "illegal_argument_exception")
    assert err["reason"] == "request [/_stats/fieldata] contains unrecognized metric: [fieldata] -> did you mean [fielddata]?"
    assert_error(http.get(f"/{index}/_stats", params={"level": "node"}), 400, "illegal_argument_exception")
    err = assert_error(http.get(f"/{index}/_stats", params={"fields": "*"}), 400, "illegal_argument_exception")
    assert "[fields]" in err["reason"], err
    body = http.get(f"/{index}/_stats", params={"level": "cluster"}).json()
    assert "indices" not in body and "_all" in body, body
    # A section Shoal does not have is refused, not answered empty.
    err = assert_error(http.get(f"/{index}/_stats/warmer"), 400, "illegal_argument_exception")
    assert "does not report: [warmer]" in err["reason"], err


def test_the_merge_metric_names_the_merges_section_in_stats_and_nodes_stats(http, index):
    body = http.get(f"/{index}/_stats/merge,docs").json()
    assert set(body["indices"][index]["primaries"]) == {"merges", "docs"}, body
    (node,) = http.get("/_nodes/_local/stats/indices/merge").json()["nodes"].values()
    assert set(node["indices"]) == {"merges"}, node["indices"].keys()


def test_create_and_open_acknowledge_shards_only_when_the_copies_asked_for_started(http, index_name):
    # One node: a replica never starts, so waiting for both copies times out unacknowledged.
    r = http.put(f"/{index_name}", {"settings": {"number_of_shards": 2, "number_of_replicas": 1}},
                 params={"wait_for_active_shards": "all", "timeout": "1s"})
    assert r.status_code == 200 and r.json()["shards_acknowledged"] is False, r.text
    assert http.post(f"/{index_name}/_close").status_code == 200
    r = http.post(f"/{index_name}/_open", params={"wait_for_active_shards": "1"})
    assert r.json() == {"acknowledged": True, "shards_acknowledged": True}, r.text
    assert http.post(f"/{index_name}/_close").status_code == 200
    r = http.post(f"/{index_name}/_open", params={"wait_for_active_shards": "all", "timeout": "1s"})
    assert r.json()["shards_acknowledged"] is False, r.text
    err = assert_error(http.put(f"/{index_name}-2", {"settings": {"number_of_replicas": 0}},
                                params={"wait_for_active_shards": "3"}), 400, "illegal_argument_exception")
    assert "cannot be greater than number of shard copies [1]" in err["reason"], err
    assert http.head(f"/{index_name}-2").status_code == 404, "a refused creation created the index"
    assert_error(http.post(f"/{index_name}/_close", params={"wait_for_active_shards": "1"}),
                 400, "illegal_argument_exception")


def test_open_without_waiting_answers_a_task_and_opens_in_the_background(http, index_name):
    http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    http.put(f"/{index_name}/_doc/1", {"a": 1}, params={"refresh": "true"})
    assert http.post(f"/{index_name}/_close").status_code == 200
    r = http.post(f"/{index_name}/_open", params={"wait_for_completion": "false"})
    assert r.status_code == 200 and set(r.json()) == {"task"}, r.text
    node, task = r.json()["task"].split(":")
    assert node and task.isdigit(), r.text
    wait_for(lambda: http.post(f"/{index_name}/_count").status_code == 200, timeout=10,
             what="the index opened by the background task")
    assert http.post(f"/{index_name}/_count").json()["count"] == 1
    done = http.get(f"/_tasks/{r.json()['task']}", params={"wait_for_completion": "true"}).json()
    assert done["completed"] is True, done
    assert done["response"] == {"acknowledged": True, "shards_acknowledged": True}, done
    assert_error(http.post(f"/{index_name}/_close", params={"wait_for_completion": "false"}),
                 400, "illegal_argument_exception")


# ---------------------------------------------------------------- auto-create

def test_auto_create_index_on_first_write(http, index_name):
    r = http.put(f"/{index_name}/_doc/1", {"title": "hello", "n": 1})
    assert r.status_code == 201, r.text
    assert r.json()["result"] == "created"
    s = http.get(f"/{index_name}/_settings").json()[index_name]["settings"]["index"]
    assert s["number_of_shards"] == "1"
    assert s["number_of_replicas"] == "1"
    props = http.get(f"/{index_name}/_mapping").json()[index_name]["mappings"]["properties"]
    assert props["n"] == {"type": "long"}


def test_auto_create_disabled(http, index_name):
    r = http.put("/_cluster/settings", {"persistent": {"action.auto_create_index": False}})
    assert r.status_code == 200
    try:
        r = http.put(f"/{index_name}/_doc/1", {"a": 1})
        err = assert_error(r, 404, "index_not_found_exception", reason=f"no such index [{index_name}]")
        assert err["index"] == index_name
        r = http.bulk([{"index": {"_index": index_name, "_id": "1"}}, {"a": 1}])
        assert r.status_code == 200
        item = r.json()["items"][0]["index"]
        assert item["status"] == 404
        assert item["error"]["type"] == "index_not_found_exception"
        assert item["error"]["reason"] == f"no such index [{index_name}]"
        assert http.head(f"/{index_name}").status_code == 404
    finally:
        http.put("/_cluster/settings", {"persistent": {"action.auto_create_index": None}})
    assert http.put(f"/{index_name}/_doc/1", {"a": 1}).status_code == 201


def test_auto_create_invalid_name_refused(http):
    r = http.put("/Bad_Name/_doc/1", {"a": 1})
    assert_error(r, 400, "invalid_index_name_exception", reason="Invalid index name [Bad_Name], must be lowercase")


def test_update_settings_with_preserve_existing_sets_only_what_is_unset(http, index):
    r = http.put(f"/{index}/_settings", {"index": {"refresh_interval": "5s"}})
    assert r.status_code == 200, r.text
    r = http.put(f"/{index}/_settings", {"index": {"refresh_interval": "9s", "max_result_window": 20000}},
                 params={"preserve_existing": "true"})
    assert r.status_code == 200, r.text
    got = http.get(f"/{index}/_settings", params={"flat_settings": "true"}).json()[index]["settings"]
    assert (got["index.refresh_interval"], got["index.max_result_window"]) == ("5s", "20000"), got
    r = http.put(f"/{index}/_settings", {"index": {"refresh_interval": "9s"}}, params={"preserve_existing": "false"})
    assert r.status_code == 200
    got = http.get(f"/{index}/_settings", params={"flat_settings": "true"}).json()[index]["settings"]
    assert got["index.refresh_interval"] == "9s", got


def test_put_mapping_with_write_index_only_changes_the_alias_write_index_alone(http, index_name):
    old, new, alias = f"{index_name}-old", f"{index_name}-new", f"{index_name}-alias"
    for name in (old, new):
        assert http.put(f"/{name}", {}).status_code == 200
    r = http.post("/_aliases", {"actions": [{"add": {"index": old, "alias": alias}},
                                            {"add": {"index": new, "alias": alias, "is_write_index": True}}]})
    assert r.status_code == 200, r.text
    r = http.put(f"/{alias}/_mapping", {"properties": {"fresh": {"type": "keyword"}}},
                 params={"write_index_only": "true"})
    assert r.status_code == 200, r.text
    mappings = http.get(f"/{old},{new}/_mapping").json()
    has = {name: "fresh" in m["mappings"].get("properties", {}) for name, m in mappings.items()}
    assert has == {old: False, new: True}, has
    r = http.put(f"/{alias}/_mapping", {"properties": {"everywhere": {"type": "keyword"}}})
    assert r.status_code == 200, r.text
    mappings = http.get(f"/{old},{new}/_mapping").json()
    assert all("everywhere" in m["mappings"]["properties"] for m in mappings.values()), mappings
    r = http.put(f"/{index_name}-missing/_mapping", {"properties": {"x": {"type": "keyword"}}},
                 params={"write_index_only": "true"})
    assert r.status_code == 404, r.text


def test_index_exists_and_get_alias_resolve_with_the_request_s_index_options(http, index_name):
    opened, closed = f"{index_name}-open", f"{index_name}-closed"
    for name in (opened, closed):
        assert http.put(f"/{name}", {"aliases": {f"{index_name}-alias": {}}}).status_code == 200
    assert http.post(f"/{closed}/_close").status_code == 200
    assert http.head(f"/{index_name}-*", params={"expand_wildcards": "closed"}).status_code == 200
    assert http.head(f"/{index_name}-*", params={"expand_wildcards": "none", "allow_no_indices": "false"}).status_code == 404
    assert http.head(f"/{opened},{index_name}-gone", params={"ignore_unavailable": "true"}).status_code == 200
    assert http.head(f"/{opened},{index_name}-gone").status_code == 404
    got = http.get(f"/{index_name}-*/_alias", params={"expand_wildcards": "open"}).json()
    assert list(got) == [opened], got
    got = http.get(f"/{index_name}-*/_alias", params={"expand_wildcards": "closed"}).json()
    assert list(got) == [closed], got
    assert http.get(f"/{index_name}-*/_alias", params={"expand_wildcards": "sideways"}).status_code == 400


def test_cat_aliases_lists_the_indices_expand_wildcards_asks_for(http, index_name):
    opened, closed, alias = f"{index_name}-open", f"{index_name}-closed", f"{index_name}-alias"
    for name in (opened, closed):
        assert http.put(f"/{name}", {"aliases": {alias: {}}}).status_code == 200
    assert http.post(f"/{closed}/_close").status_code == 200

    def listed(**params):
        rows = http.get(f"/_cat/aliases/{alias}", params={"format": "json", "h": "index", **params}).json()
        return sorted(row["index"] for row in rows)

    assert listed() == [closed, opened], "every index by default, closed ones too"
    assert listed(expand_wildcards="open") == [opened]
    assert listed(expand_wildcards="closed") == [closed]
    assert http.get("/_cat/aliases", params={"expand_wildcards": "ajar"}).status_code == 400
