"""Error bodies and limits: malformed JSON, unknown index, unknown URL, wrong method, content type, 413."""
import json
import re

import pytest

from util import assert_error

POSITION = re.compile(r"line:? ?1,? column:? ?2\b")


def test_malformed_json_document_body(http, index):
    r = http.put(f"/{index}/_doc/1", "{bad")
    err = assert_error(r, 400, "mapper_parsing_exception", reason="failed to parse")
    # the cause names the parser problem and its position
    assert err["caused_by"]["type"] in ("json_parse_exception", "parse_exception", "x_content_parse_exception")
    assert POSITION.search(err["caused_by"]["reason"]), err


def test_malformed_json_search_body(http, index):
    r = http.post(f"/{index}/_search", "{bad")
    assert r.status_code == 400
    err = r.json()["error"]
    # OpenSearch: json_parse_exception "Unexpected character ('b' (code 98)): ... line: 1, column: 2]"
    assert err["type"] in ("json_parse_exception", "parse_exception", "x_content_parse_exception")
    assert POSITION.search(err["reason"]), err
    assert r.json()["status"] == 400


def test_malformed_json_create_index_body(http, index_name):
    r = http.put(f"/{index_name}", "{bad")
    assert r.status_code == 400
    assert r.json()["error"]["type"] in ("json_parse_exception", "parse_exception", "x_content_parse_exception",
                                         "not_x_content_exception")
    assert http.head(f"/{index_name}").status_code == 404


def test_search_body_must_be_object(http, index):
    r = http.post(f"/{index}/_search", "[1]")
    err = assert_error(r, 400, "parsing_exception", reason="Expected [START_OBJECT] but found [START_ARRAY]")
    assert err["line"] == 1 and err["col"] == 1


def test_unknown_search_body_key(http, index):
    r = http.post(f"/{index}/_search", {"query": {"match_all": {}}, "bogus": 1})
    err = assert_error(r, 400, "parsing_exception", reason="Unknown key for a VALUE_NUMBER in [bogus].")
    assert err["line"] == 1


def test_unknown_index_404(http, index_name):
    for resp in (http.get(f"/{index_name}/_search"), http.get(f"/{index_name}/_mapping"),
                 http.get(f"/{index_name}/_settings"), http.post(f"/{index_name}/_refresh"),
                 http.get(f"/{index_name}/_stats"), http.post(f"/{index_name}/_count")):
        err = assert_error(resp, 404, "index_not_found_exception", reason=f"no such index [{index_name}]")
        assert err["index"] == index_name and err["resource.id"] == index_name
        assert err["root_cause"][0]["type"] == "index_not_found_exception"


def test_unknown_url_400(http, index):
    r = http.get(f"/{index}/_nonexistent")
    assert r.status_code == 400
    assert r.json() == {"error": f"no handler found for uri [/{index}/_nonexistent] and method [GET]"}
    r = http.post(f"/{index}/_refresh/extra")
    assert r.json() == {"error": f"no handler found for uri [/{index}/_refresh/extra] and method [POST]"}


def test_underscore_path_is_index_name_error(http):
    r = http.get("/_nonexistent_endpoint")
    assert_error(r, 400, "invalid_index_name_exception",
                 reason="Invalid index name [_nonexistent_endpoint], must not start with '_'.")


def test_wrong_method_405(http, index):
    r = http.delete(f"/{index}/_search")
    assert r.status_code == 405
    m = re.fullmatch(rf"Incorrect HTTP method for uri \[/{index}/_search\] and method \[DELETE\], allowed: \[(.*)\]",
                     r.json()["error"])
    assert m and set(m.group(1).split(", ")) == {"GET", "POST"}, r.json()
    assert r.json()["status"] == 405
    r = http.put("/")
    assert r.status_code == 405
    # the order of the allowed methods is not stable in OpenSearch (a hash set)
    m = re.fullmatch(r"Incorrect HTTP method for uri \[/\] and method \[PUT\], allowed: \[(.*)\]", r.json()["error"])
    assert m and set(m.group(1).split(", ")) == {"GET", "DELETE", "HEAD"}, r.json()
    assert r.json()["status"] == 405
    r = http.request("PATCH", f"/{index}/_doc/1", {"a": 1})
    assert r.status_code == 405
    assert r.json()["error"].startswith(f"Incorrect HTTP method for uri [/{index}/_doc/1] and method [PATCH], allowed: [")


def test_unsupported_content_type_406(http, index):
    r = http.put(f"/{index}/_doc/1", "{}", headers={"Content-Type": "text/plain"})
    assert r.status_code == 406
    assert r.json() == {"error": "Content-Type header [text/plain] is not supported", "status": 406}


def test_content_type_with_charset_accepted(http, index):
    r = http.put(f"/{index}/_doc/1", '{"a": 1}', headers={"Content-Type": "application/json; charset=UTF-8"})
    assert r.status_code == 201


def test_error_content_type_is_json(http, index_name):
    r = http.get(f"/{index_name}/_search")
    assert r.headers["content-type"].startswith("application/json")


def _max_content_length_of_external(http):
    info = http.get("/_nodes/settings").json()
    (node_info,) = info["nodes"].values()
    value = node_info["settings"].get("http", {}).get("max_content_length")
    if not value:
        return None
    units = {"b": 1, "kb": 1024, "mb": 1024 ** 2}
    m = re.fullmatch(r"(\d+)(b|kb|mb)", value)
    return int(m.group(1)) * units[m.group(2)] if m else None


def test_body_too_large_413(http, node, request):
    if node is None:
        limit = _max_content_length_of_external(http)
        if not limit or limit > 16 * 1024 * 1024:
            pytest.skip("external server without a small http.max_content_length "
                        "(start it with OS_EXTRA_ARGS=-Ehttp.max_content_length=1mb to check)")
        target = http
    else:
        limit = 1024 * 1024
        extra = request.getfixturevalue("node_factory")({"http.max_content_length": "1mb"}, name="small-body-node")
        target = extra.http()
    doc = json.dumps({"big": "x" * (limit + 10)})
    r = target.put("/t-too-large/_doc/1", doc)
    assert r.status_code == 413
    # the node is still fine afterwards
    assert target.get("/").status_code == 200
    # just under the limit is accepted
    small = json.dumps({"big": "x" * (limit // 2)})
    r = target.put("/t-too-large/_doc/1", small)
    assert r.status_code in (200, 201), r.text
    target.delete("/t-too-large")


def test_empty_body_where_required(http, index):
    r = http.put(f"/{index}/_doc/1", "")
    assert_error(r, 400, "parse_exception", reason="request body is required")


def test_bad_query_param_value(http, index):
    r = http.put(f"/{index}/_doc/1", {"a": 1}, params={"refresh": "sometimes"})
    assert_error(r, 400, "illegal_argument_exception", reason="Unknown value for refresh: [sometimes].")


def test_unrecognized_query_param(http, index):
    r = http.get(f"/{index}/_search", params={"no_such_param": "1"})
    err = assert_error(r, 400, "illegal_argument_exception")
    assert err["reason"] == (f"request [/{index}/_search] contains unrecognized parameter: [no_such_param]")


def test_node_survives_garbage(http, index):
    for body in ["\x00\x01\x02", "{" * 5000, '{"a":' * 3000, "null", "1", '"str"']:
        r = http.post(f"/{index}/_search", body)
        assert 400 <= r.status_code < 500, (body[:20], r.status_code, r.text[:300])
        r = http.put(f"/{index}/_doc/x", body)
        assert 400 <= r.status_code < 500, (body[:20], r.status_code, r.text[:300])
    assert http.get("/").status_code == 200
