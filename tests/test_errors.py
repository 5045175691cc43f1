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


def test_search_and_by_query_options_shoal_does_not_act_on_are_refused_not_ignored(http, index):
    http.put(f"/{index}/_doc/1", {"a": 1}, params={"refresh": "true"})
    for param, value in [("phase_took", "true"), ("cancel_after_time_interval", "1s"),
                         ("suggest_field", "a"), ("search_pipeline", "p"), ("min_score", "1")]:
        err = assert_error(http.get(f"/{index}/_search", params={param: value}), 400,
                           "illegal_argument_exception")
        # Refused by name, or (min_score, not a URL option of _search) as unrecognized.
        assert f"[{param}={value}]" in err["reason"] or f"parameter: [{param}]" in err["reason"], err
    assert http.get(f"/{index}/_search", params={"phase_took": "false"}).status_code == 200
    # Options of other APIs are not search options.
    err = assert_error(http.get(f"/{index}/_search", params={"conflicts": "proceed"}), 400,
                       "illegal_argument_exception")
    assert "unrecognized parameter: [conflicts]" in err["reason"], err
    query = {"query": {"match_all": {}}}
    for param, value in [("slices", "2"), ("requests_per_second", "5"), ("search_timeout", "1s"),
                         ("no_such_param", "1"), ("phase_took", "true")]:
        r = http.post(f"/{index}/_delete_by_query", query, params={param: value})
        err = assert_error(r, 400, "illegal_argument_exception")
        assert param in err["reason"], err
    assert http.get(f"/{index}/_count").json()["count"] == 1, "a refused delete deleted"
    r = http.post(f"/{index}/_delete_by_query", query, params={"slices": "1", "conflicts": "proceed"})
    assert r.status_code == 200 and r.json()["deleted"] == 1, r.text


def test_every_spec_api_refuses_a_parameter_it_does_not_take_with_a_suggestion(http, index):
    for method, path, param in [("get", "/_cluster/health", "wait_for_stats"),
                                ("get", f"/{index}/_mapping", "bogus"),
                                ("get", "/_cat/indices", "hh"),
                                ("get", f"/{index}", "q"),
                                ("put", f"/{index}/_settings", "flat_setting"),
                                ("get", "/_nodes", "bogus")]:
        r = getattr(http, method)(path, {"index": {}} if method == "put" else None,
                                  params={param: "1"})
        err = assert_error(r, 400, "illegal_argument_exception")
        assert err["reason"].startswith(
            f"request [{path}] contains unrecognized parameter: [{param}]"), err
    err = assert_error(http.get("/_cluster/health", params={"wait_for_stats": "green"}), 400,
                       "illegal_argument_exception")
    assert "-> did you mean" in err["reason"] and "wait_for_status" in err["reason"], err
    r = http.get("/_cluster/health", params={"wait_for_status": "yellow", "timeout": "5s",
                                             "pretty": "true", "filter_path": "status"})
    assert r.status_code == 200 and r.json()["status"] in ("green", "yellow"), r.text


def test_node_survives_garbage(http, index):
    for body in ["\x00\x01\x02", "{" * 5000, '{"a":' * 3000, "null", "1", '"str"']:
        r = http.post(f"/{index}/_search", body)
        assert 400 <= r.status_code < 500, (body[:20], r.status_code, r.text[:300])
        r = http.put(f"/{index}/_doc/x", body)
        assert 400 <= r.status_code < 500, (body[:20], r.status_code, r.text[:300])
    assert http.get("/").status_code == 200


# --- The HTTP layer's own rejections (request line, headers, encodings), over raw sockets ---

import gzip  # noqa: E402
import socket  # noqa: E402
from urllib.parse import urlparse  # noqa: E402


def raw_request(base_url: str, data: bytes, timeout: float = 10.0):
    """Sends raw bytes; returns (status, headers, body) of the first response."""
    u = urlparse(base_url)
    with socket.create_connection((u.hostname, u.port), timeout=timeout) as s:
        s.sendall(data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            assert chunk, f"connection closed without a response: {buf[:200]!r}"
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
    return status, headers, body[:length]


def assert_raw_error(response, status: int, etype: str, reason: str | None = None) -> dict:
    got_status, headers, body = response
    assert got_status == status, (got_status, body[:300])
    assert headers.get("content-type") == "application/json; charset=UTF-8", headers
    doc = json.loads(body)
    assert doc["status"] == status, doc
    err = doc["error"]
    assert err["type"] == etype, doc
    assert err["root_cause"][0]["type"] and err["root_cause"][0]["reason"], doc
    if reason is not None:
        assert err["reason"] == reason, doc
    return err


def get(path: bytes, extra: bytes = b"") -> bytes:
    return b"GET " + path + b" HTTP/1.1\r\nHost: t\r\n" + extra + b"\r\n"


@pytest.fixture
def numbers_index(http, index):
    r = http.put(f"/{index}/_doc/1", {"title": "the quick fox", "n": 7}, params={"refresh": "true"})
    assert r.status_code == 201, r.text
    return index


def test_query_string_accepts_quotes_and_angle_brackets_unescaped(base_url, numbers_index):
    """OpenSearch (Netty) takes `"`, `<`, `>` in a query string as they are; hyper refused them."""
    def hits(query: bytes) -> int:
        status, _, body = raw_request(base_url, get(f"/{numbers_index}/_search?q=".encode() + query))
        assert status == 200, body[:300]
        return json.loads(body)["hits"]["total"]["value"]

    assert hits(b'title:"quick%20fox"') == 1
    assert hits(b'title:"fox%20quick"') == 0
    assert hits(b"n:>5") == 1
    assert hits(b"n:<5") == 0


def test_request_line_longer_than_max_initial_line_length_is_400(base_url):
    for length in (5000, 70000):  # over 4kb, and over hyper's own 64 KiB URI limit (was an empty 414)
        response = raw_request(base_url, get(b"/" + b"a" * length))
        assert_raw_error(response, 400, "too_long_http_line_exception",
                         reason="An HTTP line is larger than 4096 bytes.")


def test_headers_larger_than_max_header_size_are_400(base_url):
    response = raw_request(base_url, get(b"/", b"X-Big: " + b"v" * 10000 + b"\r\n"))
    assert_raw_error(response, 400, "too_long_http_header_exception",
                     reason="HTTP header is larger than 8192 bytes.")
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(1000))  # about 11 KB of headers
    assert_raw_error(raw_request(base_url, get(b"/", many)), 400, "too_long_http_header_exception")


def test_many_small_headers_within_max_header_size_are_accepted(base_url):
    """Netty limits the headers' size only; hyper refused more than 100 headers with an empty 431."""
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(300))
    status, _, body = raw_request(base_url, get(b"/", many))
    assert status == 200, body[:300]


def test_malformed_request_line_is_json_400(base_url):
    assert_raw_error(raw_request(base_url, b"G(T / HTTP/1.1\r\nHost: t\r\n\r\n"), 400, "illegal_argument_exception")
    assert_raw_error(raw_request(base_url, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 400, "illegal_argument_exception")


def test_invalid_utf8_in_path_decodes_to_replacement_characters(base_url):
    """OpenSearch decodes path escapes with Java's UTF-8 decoder: a sequence that is not UTF-8 is U+FFFD
    (axum refused it with a text/plain 400)."""
    err = assert_raw_error(raw_request(base_url, get(b"/%ff%fe/_search")), 404, "index_not_found_exception")
    assert err["index"] == "\ufffd\ufffd", err
    # raw bytes (Netty reads the line as latin-1; Shoal as escapes): an OpenSearch JSON error either way
    assert_raw_error(raw_request(base_url, get(b"/\xff\xfe/_search")), 404, "index_not_found_exception")


def post(path: bytes, body: bytes, headers: bytes) -> bytes:
    return (b"POST " + path + b" HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" + headers
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def test_gzip_body_is_accepted(base_url, numbers_index):
    body = gzip.compress(b'{"query":{"match":{"title":"fox"}}}')
    status, _, out = raw_request(base_url, post(f"/{numbers_index}/_search".encode(), body,
                                                b"Content-Encoding: gzip\r\n"))
    assert status == 200 and json.loads(out)["hits"]["total"]["value"] == 1, out[:300]


def test_bad_bodies_are_json_400(base_url, is_shoal):
    if not is_shoal:
        pytest.skip("OpenSearch closes the connection on an undecodable gzip body (Netty decoder exception)")
    response = raw_request(base_url, post(b"/_search", b"hello", b"Content-Encoding: gzip\r\n"))
    err = assert_raw_error(response, 400, "illegal_argument_exception")
    assert "gzip" in err["reason"], err
    bad_chunked = (b"POST /_search HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
    assert_raw_error(raw_request(base_url, bad_chunked), 400, "illegal_argument_exception")


def test_unsupported_content_encoding_is_415(base_url, is_shoal):
    if not is_shoal:
        pytest.skip("OpenSearch passes a body with an unknown Content-Encoding through undecoded")
    response = raw_request(base_url, post(b"/_search", b"{}", b"Content-Encoding: br\r\n"))
    err = assert_raw_error(response, 415, "illegal_argument_exception")
    assert "[br]" in err["reason"], err


def test_gzip_bomb_is_413_not_unbounded_memory(base_url, http, is_shoal):
    """The limit applies to the decompressed body: 150 MB of zeros sent as 150 KB of gzip."""
    if not is_shoal:
        pytest.skip("OpenSearch's limit applies to the aggregated body too; not needed against it")
    bomb = gzip.compress(b" " * (150 * 1024 * 1024), compresslevel=9)
    response = raw_request(base_url, post(b"/_bulk", bomb, b"Content-Encoding: gzip\r\n"), timeout=60)
    assert_raw_error(response, 413, "content_too_long_exception")
    assert http.get("/").status_code == 200


def test_pipelined_requests_with_bodies_keep_their_framing(base_url, numbers_index):
    """The filter in front of hyper follows Content-Length and chunked bodies: every request on one
    connection is answered, bodies that look like request heads included."""
    body = b'{"query":{"match":{"title":"fox"}},"_source":["GET / HTTP/1.1"]}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    data = (post(f"/{numbers_index}/_search".encode(), body, b"")
            + b"POST /" + numbers_index.encode() + b"/_search HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            + b"Transfer-Encoding: chunked\r\n\r\n" + chunked
            + get(f'/{numbers_index}/_search?q=title:"fox"'.encode()))
    u = urlparse(base_url)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(data)
        buf = b""
        while buf.count(b"HTTP/1.1 200 OK") < 3:
            chunk = s.recv(65536)
            assert chunk, buf[:500]
            buf += chunk
    assert buf.count(b'"total":{"value":1') >= 2, buf[:1000]


def test_search_fan_out_options_are_taken_but_values_opensearch_refuses_are_refused(http, index):
    """Options tuning OpenSearch's shard fan-out change no result; Shoal takes them, and
    refuses the values OpenSearch refuses, with its messages."""
    assert http.get(f"/{index}/_search", params={"max_concurrent_shard_requests": "3"}).status_code == 200
    for path in (f"/{index}/_search", f"/{index}/_count"):
        r = http.get(path, params={"ignore_throttled": "false"})
        assert r.status_code == 200, (path, r.text)
        assert_error(http.get(path, params={"ignore_throttled": "maybe"}), 400, "illegal_argument_exception")
    assert http.get(f"/{index}/_search", params={"batched_reduce_size": "2", "pre_filter_shard_size": "1",
                                                 "ccs_minimize_roundtrips": "false"}).status_code == 200
    for param, value, reason in [("batched_reduce_size", "1", "batchedReduceSize must be >= 2"),
                                 ("max_concurrent_shard_requests", "0", "maxConcurrentShardRequests must be >= 1"),
                                 ("pre_filter_shard_size", "0", "preFilterShardSize must be >= 1")]:
        err = assert_error(http.get(f"/{index}/_search", params={param: value}), 400, "illegal_argument_exception")
        assert err["reason"] == reason, err
    r = http.post(f"/{index}/_msearch", data="{}\n{}\n", params={"max_concurrent_shard_requests": "0"},
                  headers={"content-type": "application/x-ndjson"})
    assert_error(r, 400, "illegal_argument_exception")
