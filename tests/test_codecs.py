"""index.codec: every codec stores and reads _source, across force merge and codec changes."""
import pytest

from util import assert_error

OPENSEARCH_CORE_CODECS = {"default", "lz4", "best_compression", "zlib"}
# zstd/zstd_no_dict come from OpenSearch's custom-codecs plugin; best_speed is Shoal's name for LZ4
ALL_CODECS = ["default", "best_speed", "lz4", "best_compression", "zlib", "zstd", "zstd_no_dict"]


@pytest.fixture(scope="module")
def available_codecs(http, is_shoal):
    if is_shoal:
        return set(ALL_CODECS)
    plugins = {p["component"] for p in http.get("/_cat/plugins", params={"format": "json"}).json()}
    codecs = set(OPENSEARCH_CORE_CODECS)
    if "opensearch-custom-codecs" in plugins:
        codecs |= {"zstd", "zstd_no_dict"}
    return codecs


def docs(n=300):
    for i in range(n):
        yield str(i), {"n": i, "title": f"codec test document {i}", "body": "lorem ipsum dolor sit amet " * (i % 7 + 1),
                       "tags": [f"t{i % 5}", "all"], "nested": {"x": i * 1.5, "y": "é中文🙂"}}


def _roundtrip(http, index, settings):
    r = http.put(f"/{index}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0, **settings}})
    assert r.status_code == 200, r.text
    expected = dict(docs())
    lines = []
    for doc_id, d in expected.items():
        lines += [{"index": {"_index": index, "_id": doc_id}}, d]
    half = len(lines) // 2
    assert not http.bulk(lines[:half], params={"refresh": "true"}).json()["errors"]
    assert not http.bulk(lines[half:], params={"refresh": "true"}).json()["errors"]
    r = http.post(f"/{index}/_forcemerge", params={"max_num_segments": 1})
    assert r.status_code == 200
    http.post(f"/{index}/_refresh")
    for doc_id in ("0", "1", "149", "150", "299"):
        assert http.get(f"/{index}/_source/{doc_id}").json() == expected[doc_id]
    got = http.post(f"/{index}/_search", {"size": 300, "query": {"match_all": {}}}).json()["hits"]["hits"]
    assert {h["_id"]: h["_source"] for h in got} == expected
    stats = http.get(f"/{index}/_stats/store,segments").json()["indices"][index]["primaries"]
    assert stats["segments"]["count"] == 1
    return stats["store"]["size_in_bytes"]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_codec_round_trip(http, index_name, codec, available_codecs):
    if codec not in available_codecs:
        pytest.skip(f"codec {codec} not available on this server")
    _roundtrip(http, index_name, {"index.codec": codec})
    s = http.get(f"/{index_name}/_settings", params={"flat_settings": "true"}).json()[index_name]["settings"]
    assert s["index.codec"] == codec


@pytest.mark.parametrize("codec,level", [("zstd", 1), ("zstd", 6), ("zstd_no_dict", 3)])
def test_zstd_compression_levels(http, index_name, codec, level, available_codecs):
    if codec not in available_codecs:
        pytest.skip(f"codec {codec} not available on this server")
    _roundtrip(http, index_name, {"index.codec": codec, "index.codec.compression_level": level})


@pytest.mark.parametrize("codec", ["default", "best_compression", "lz4", "zlib"])
def test_compression_level_refused_for_non_zstd(http, index_name, codec):
    r = http.put(f"/{index_name}", {"settings": {"index.codec": codec, "index.codec.compression_level": 3}})
    assert_error(r, 400, "illegal_argument_exception",
                 reason=f"Compression level cannot be set for the {codec} codec.")


@pytest.mark.parametrize("level", [0, 7])
def test_compression_level_out_of_range(http, index_name, level, available_codecs):
    if "zstd" not in available_codecs:
        pytest.skip("zstd not available on this server")
    r = http.put(f"/{index_name}", {"settings": {"index.codec": "zstd", "index.codec.compression_level": level}})
    err = assert_error(r, 400, "illegal_argument_exception")
    assert "index.codec.compression_level" in err["reason"]


def test_unknown_codec_refused(http, index_name, is_shoal):
    r = http.put(f"/{index_name}", {"settings": {"index.codec": "snappy"}})
    err = assert_error(r, 400, "illegal_argument_exception")
    assert err["reason"].startswith("unknown value for [index.codec] must be one of [")
    assert err["reason"].endswith("] but was: snappy")


def test_codec_change_on_closed_index_then_force_merge(http, index_name, available_codecs):
    target = "zstd" if "zstd" in available_codecs else "best_compression"
    http.put(f"/{index_name}", {"settings": {"number_of_replicas": 0, "index.codec": "default"}})
    lines = []
    for doc_id, d in docs(100):
        lines += [{"index": {"_index": index_name, "_id": doc_id}}, d]
    http.bulk(lines, params={"refresh": "true"})
    assert http.post(f"/{index_name}/_close").status_code == 200
    r = http.put(f"/{index_name}/_settings", {"index.codec": target})
    assert r.status_code == 200, r.text
    assert http.post(f"/{index_name}/_open").status_code == 200
    # new segment with the new codec next to old ones: mixed segments read fine
    more = []
    for doc_id, d in docs(150):
        if int(doc_id) >= 100:
            more += [{"index": {"_index": index_name, "_id": doc_id}}, d]
    http.bulk(more, params={"refresh": "true"})
    assert http.post(f"/{index_name}/_count").json()["count"] == 150
    http.post(f"/{index_name}/_forcemerge", params={"max_num_segments": 1})
    http.post(f"/{index_name}/_refresh")
    expected = dict(docs(150))
    got = http.post(f"/{index_name}/_search", {"size": 200}).json()["hits"]["hits"]
    assert {h["_id"]: h["_source"] for h in got} == expected


def test_best_compression_is_smaller_than_default(http, index_name):
    a = _roundtrip(http, index_name + "-a", {"index.codec": "default"})
    b = _roundtrip(http, index_name + "-b", {"index.codec": "best_compression"})
    assert b < a
