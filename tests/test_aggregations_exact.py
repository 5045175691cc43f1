"""`terms` counts on a real corpus (the Debian package list from `apt-cache dumpavail`), checked
against counts computed here: exact on one shard whatever the number of segments, and on three
shards within the bounds OpenSearch reports (`doc_count_error_upper_bound`, per-bucket errors,
`sum_other_doc_count`).

The corpus comes from the machine's apt lists. When they are empty the test runs
`apt-get update` if it is root, and is skipped otherwise (CI must run `apt-get update` first).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter

import pytest

FIELDS = {
    "Package": "package",
    "Section": "section",
    "Maintainer": "maintainer",
    "Priority": "priority",
    "Architecture": "architecture",
    "Installed-Size": "installed_size",
}
KEYWORDS = ["section", "maintainer", "priority", "architecture"]
CHUNKS = 12  # one refresh per chunk: the one-shard index holds many segments


def dumpavail() -> str:
    if shutil.which("apt-cache") is None:
        return ""
    out = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, timeout=120)
    return out.stdout if out.returncode == 0 else ""


def parse_records(text: str) -> list[dict]:
    """Records are separated by blank lines; continuation lines start with a space."""
    docs = []
    for record in text.split("\n\n"):
        doc = {}
        for line in record.splitlines():
            if not line or line[0] in " \t" or ":" not in line:
                continue
            key, _, value = line.partition(":")
            field = FIELDS.get(key)
            if field is None:
                continue
            value = value.strip()
            if field == "installed_size":
                try:
                    doc[field] = int(value)
                except ValueError:
                    continue
            else:
                doc[field] = value
        if "package" in doc:
            docs.append(doc)
    return docs


@pytest.fixture(scope="module")
def corpus() -> list[dict]:
    text = dumpavail()
    if not text.strip():
        if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=600)
            text = dumpavail()
        if not text.strip():
            pytest.skip("apt-cache dumpavail is empty (run `apt-get update` as root first)")
    docs = parse_records(text)
    if len(docs) < 20_000:
        pytest.skip(f"the apt lists hold only {len(docs)} packages; the test needs a full archive")
    return docs


def load(http, name: str, docs: list[dict], shards: int) -> None:
    mapping = {f: {"type": "keyword"} for f in KEYWORDS + ["package"]}
    mapping["installed_size"] = {"type": "long"}
    r = http.put(f"/{name}", {
        "settings": {"number_of_shards": shards, "number_of_replicas": 0, "refresh_interval": "-1"},
        "mappings": {"properties": mapping},
    })
    assert r.status_code == 200, r.text
    chunk = len(docs) // CHUNKS + 1
    for start in range(0, len(docs), chunk):
        lines = []
        for i, doc in enumerate(docs[start:start + chunk], start):
            lines.append({"index": {"_index": name, "_id": str(i)}})
            lines.append(doc)
        r = http.bulk(lines, timeout=300)
        assert r.status_code == 200 and not r.json()["errors"], r.text[:2000]
        assert http.post(f"/{name}/_refresh").status_code == 200


@pytest.fixture(scope="module")
def debian1(http, corpus):
    name = "exact-debian-1"
    http.delete(f"/{name}", params={"ignore_unavailable": "true"})
    load(http, name, corpus, shards=1)
    yield name
    http.delete(f"/{name}")


@pytest.fixture(scope="module")
def debian3(http, corpus):
    name = "exact-debian-3"
    http.delete(f"/{name}", params={"ignore_unavailable": "true"})
    load(http, name, corpus, shards=3)
    yield name
    http.delete(f"/{name}")


def exact(corpus, field) -> list[tuple[str, int]]:
    counts = Counter(d[field] for d in corpus if field in d)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def terms(http, index, body: dict, aggs: dict | None = None) -> dict:
    agg = {"terms": body}
    if aggs:
        agg["aggs"] = aggs
    r = http.post(f"/{index}/_search", {"size": 0, "aggs": {"t": agg}})
    assert r.status_code == 200, r.text
    return r.json()["aggregations"]["t"]


def pairs(agg) -> list[tuple[str, int]]:
    return [(b["key"], b["doc_count"]) for b in agg["buckets"]]


def test_corpus_index_has_many_segments(http, debian1, corpus):
    r = http.get(f"/_cat/segments/{debian1}", params={"format": "json"})
    assert r.status_code == 200, r.text
    segments = r.json()
    # Merges may fold some of the refreshed segments together; several must remain for the
    # per-segment cut to matter.
    assert len(segments) >= 4, [s["docs.count"] for s in segments]
    assert sum(int(s["docs.count"]) for s in segments) == len(corpus)


@pytest.mark.parametrize("field", ["section", "maintainer", "priority"])
@pytest.mark.parametrize("size", [3, 10, 50])
def test_terms_on_one_shard_are_exact_whatever_the_segments(http, debian1, corpus, field, size):
    truth = exact(corpus, field)
    agg = terms(http, debian1, {"field": field, "size": size})
    assert pairs(agg) == truth[:size]
    assert agg["doc_count_error_upper_bound"] == 0
    assert agg["sum_other_doc_count"] == sum(c for _, c in truth[size:])


def test_terms_on_one_shard_exact_for_every_order_and_min_doc_count(http, debian1, corpus):
    truth = exact(corpus, "maintainer")
    by_key = sorted(truth)
    agg = terms(http, debian1, {"field": "maintainer", "size": 10, "order": {"_key": "asc"}})
    assert pairs(agg) == by_key[:10]
    assert agg["doc_count_error_upper_bound"] == 0
    ascending = sorted(truth, key=lambda kv: (kv[1], kv[0]))
    agg = terms(http, debian1, {"field": "maintainer", "size": 10, "order": {"_count": "asc"}})
    assert pairs(agg) == ascending[:10]
    frequent = [kv for kv in truth if kv[1] >= 100]
    agg = terms(http, debian1, {"field": "maintainer", "size": 500, "min_doc_count": 100})
    assert pairs(agg) == frequent
    shown = terms(http, debian1, {"field": "maintainer", "size": 5, "show_term_doc_count_error": True})
    assert [b["doc_count_error_upper_bound"] for b in shown["buckets"]] == [0] * 5


def test_terms_under_terms_on_one_shard_are_exact(http, debian1, corpus):
    agg = terms(http, debian1, {"field": "section", "size": 5},
                {"m": {"terms": {"field": "maintainer", "size": 3}}})
    for bucket in agg["buckets"]:
        inside = [d for d in corpus if d.get("section") == bucket["key"]]
        truth = exact(inside, "maintainer")
        assert pairs(bucket["m"]) == truth[:3], bucket["key"]
        assert bucket["m"]["doc_count_error_upper_bound"] == 0
        assert bucket["m"]["sum_other_doc_count"] == sum(c for _, c in truth[3:])


@pytest.mark.parametrize("size", [3, 10, 50])
def test_terms_on_three_shards_stay_within_the_reported_error(http, debian3, corpus, size):
    truth = dict(exact(corpus, "maintainer"))
    total = sum(truth.values())
    agg = terms(http, debian3, {"field": "maintainer", "size": size, "show_term_doc_count_error": True})
    got = agg["buckets"]
    assert len(got) == size
    # every document with a value is in a bucket or in the other count
    assert sum(b["doc_count"] for b in got) + agg["sum_other_doc_count"] == total
    error = agg["doc_count_error_upper_bound"]
    assert error >= 0
    for b in got:
        missed = truth[b["key"]] - b["doc_count"]
        assert 0 <= missed <= b["doc_count_error_upper_bound"] <= error, b
    # a term left out cannot have more documents than the last bucket plus the error
    shown = {b["key"] for b in got}
    best_left_out = max((c for k, c in truth.items() if k not in shown), default=0)
    assert best_left_out <= got[-1]["doc_count"] + error


def test_terms_on_three_shards_are_exact_when_shard_size_covers_every_term(http, debian3, corpus):
    truth = exact(corpus, "section")
    assert len(truth) < 200
    agg = terms(http, debian3, {"field": "section", "size": 10, "shard_size": 200})
    assert pairs(agg) == truth[:10]
    assert agg["doc_count_error_upper_bound"] == 0
    assert agg["sum_other_doc_count"] == sum(c for _, c in truth[10:])


def test_shard_size_below_size_is_raised_and_zero_refused(http, debian3, corpus):
    truth = dict(exact(corpus, "priority"))
    agg = terms(http, debian3, {"field": "priority", "size": 3, "shard_size": 1})
    # raised to 3: three buckets, each within the bound
    assert len(agg["buckets"]) == 3
    for b in agg["buckets"]:
        assert 0 <= truth[b["key"]] - b["doc_count"] <= agg["doc_count_error_upper_bound"]
    r = http.post(f"/{debian3}/_search",
                  {"size": 0, "aggs": {"t": {"terms": {"field": "priority", "shard_size": 0}}}})
    assert r.status_code == 400, r.text
    assert "[shardSize] must be greater than 0" in r.text


@pytest.mark.parametrize("metric,path", [("sum", "m"), ("extended_stats", "m.variance")])
def test_terms_ordered_by_a_sub_aggregation_on_one_shard_are_exact(http, debian1, corpus, metric, path):
    sizes: dict[str, list[int]] = {}
    for d in corpus:
        if "maintainer" in d and "installed_size" in d:
            sizes.setdefault(d["maintainer"], []).append(d["installed_size"])

    def value(xs):
        if metric == "sum":
            return sum(xs)
        mean = sum(xs) / len(xs)
        return sum(x * x for x in xs) / len(xs) - mean * mean

    truth = sorted(sizes, key=lambda k: (-value(sizes[k]), k))[:5]
    agg = terms(http, debian1, {"field": "maintainer", "size": 5, "order": {path: "desc"}},
                {"m": {metric: {"field": "installed_size"}}})
    assert [b["key"] for b in agg["buckets"]] == truth


@pytest.mark.parametrize("shards", [1, 3])
def test_cardinality_is_exact_up_to_the_precision_threshold(http, debian1, debian3, corpus, shards):
    index = debian1 if shards == 1 else debian3
    truth = len({d["maintainer"] for d in corpus if "maintainer" in d})
    assert 100 < truth < 3000

    def cardinality(body):
        r = http.post(f"/{index}/_search", {"size": 0, "aggs": {"c": {"cardinality": body}}})
        assert r.status_code == 200, r.text
        return r.json()["aggregations"]["c"]["value"]

    assert cardinality({"field": "maintainer"}) == truth
    assert cardinality({"field": "maintainer", "precision_threshold": 40000}) == truth
    # above the threshold it is an estimate (HyperLogLog), within a few percent
    estimate = cardinality({"field": "maintainer", "precision_threshold": 100})
    assert abs(estimate - truth) <= truth * 0.05
    agg = terms(http, index, {"field": "section", "size": 3}, {"c": {"cardinality": {"field": "maintainer"}}})
    for b in agg["buckets"]:
        inside = {d["maintainer"] for d in corpus if d.get("section") == b["key"] and "maintainer" in d}
        assert b["c"]["value"] == len(inside), b["key"]
    r = http.post(f"/{index}/_search", {"size": 0, "aggs": {"c": {"cardinality": {
        "field": "maintainer", "precision_threshold": -1}}}})
    assert r.status_code == 400, r.text
