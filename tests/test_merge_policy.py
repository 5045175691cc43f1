"""The tiered merge policy and its `index.merge.policy.*` settings, as OpenSearch has them."""

from __future__ import annotations

import time

import pytest

from util import assert_error


def segment_count(http, index: str) -> int:
    stats = http.get(f"/{index}/_stats/segments").json()
    return stats["indices"][index]["primaries"]["segments"]["count"]


def write_segments(http, index: str, count: int, start: int = 0) -> None:
    """One document and one refresh per segment."""
    for i in range(start, start + count):
        r = http.put(f"/{index}/_doc/{i}", {"n": i}, params={"refresh": "true"})
        assert r.status_code in (200, 201), r.text


def wait_for_segments_at_most(http, index: str, most: int, timeout: float = 30.0) -> int:
    """Background merges become searchable with the next refresh (periodic refresh is off)."""
    deadline = time.monotonic() + timeout
    while True:
        http.post(f"/{index}/_refresh")
        count = segment_count(http, index)
        if count <= most or time.monotonic() > deadline:
            return count
        time.sleep(0.2)


def create(http, index: str, **settings) -> None:
    body = {"settings": {"number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": "-1", **settings}}
    r = http.put(f"/{index}", body)
    assert r.status_code == 200, r.text


def test_segments_under_the_tier_budget_are_not_merged_and_a_smaller_tier_merges_them(http, index_name):
    create(http, index_name)
    # Ten floor-sized segments fit the default tier (segments_per_tier 10): none is merged.
    write_segments(http, index_name, 8)
    time.sleep(1.0)
    http.post(f"/{index_name}/_refresh")
    assert segment_count(http, index_name) == 8
    # Two per tier, changed on the open index: the next segment change merges down to two.
    r = http.put(f"/{index_name}/_settings", {"index.merge.policy.segments_per_tier": 2})
    assert r.status_code == 200, r.text
    write_segments(http, index_name, 1, start=8)
    assert wait_for_segments_at_most(http, index_name, 2) <= 2
    r = http.get(f"/{index_name}/_count")
    assert r.json()["count"] == 9, r.text


def test_max_merge_at_once_limits_how_many_segments_one_merge_takes(http, index_name):
    create(http, index_name, **{"index.merge.policy.segments_per_tier": 4,
                                "index.merge.policy.max_merge_at_once": 4})
    # The fifth segment is over the budget of four: one merge of four leaves two segments.
    write_segments(http, index_name, 5)
    assert wait_for_segments_at_most(http, index_name, 2) == 2


def test_merge_policy_settings_are_shown_as_set(http, index_name):
    create(http, index_name, **{"index.merge.policy.floor_segment": "4mb",
                                "index.merge.policy.max_merged_segment": "1gb"})
    settings = http.get(f"/{index_name}/_settings", params={"flat_settings": "true"}).json()
    flat = settings[index_name]["settings"]
    assert flat["index.merge.policy.floor_segment"] == "4mb"
    assert flat["index.merge.policy.max_merged_segment"] == "1gb"


@pytest.mark.parametrize("key,value,reason", [
    ("index.merge.policy.segments_per_tier", "1.5", "must be >= 2.0"),
    ("index.merge.policy.max_merge_at_once", "1", "must be >= 2"),
    ("index.merge.policy.deletes_pct_allowed", "60", "must be <= 50.0"),
    ("index.merge.policy.deletes_pct_allowed", "2", "must be >= 5.0"),
    ("index.merge.policy.floor_segment", "lots", "index.merge.policy.floor_segment"),
])
def test_out_of_range_merge_policy_settings_are_refused(http, index_name, key, value, reason):
    r = http.put(f"/{index_name}", {"settings": {key: value}})
    assert r.status_code == 400 and r.json()["status"] == 400, r.text
    assert reason in r.json()["error"]["reason"], r.text


def test_a_merge_policy_shoal_does_not_have_is_refused_by_name(http, index_name, is_shoal):
    if not is_shoal:
        pytest.skip("OpenSearch also has the log_byte_size policy")
    r = http.put(f"/{index_name}", {"settings": {"index.merge.policy": "log_byte_size"}})
    assert_error(r, 400, "illegal_argument_exception")
    assert "index.merge.policy" in r.json()["error"]["reason"], r.text
    r = http.put(f"/{index_name}", {"settings": {"index.merge.policy": "tiered"}})
    assert r.status_code == 200, r.text


def segments_by_name(http, index: str) -> dict[str, dict]:
    rows = http.get(f"/_cat/segments/{index}", params={"format": "json"}).json()
    return {row["segment"]: row for row in rows if row["prirep"] == "p"}


def write_and_delete(http, index: str) -> dict[str, dict]:
    """Three bulks of 20 documents (a segment or more each), then half of the second deleted:
    past the 10 % of expunge_deletes_allowed. Returns the segments then."""
    for segment in range(3):
        lines = []
        for n in range(segment * 20, segment * 20 + 20):
            lines += [{"index": {"_index": index, "_id": str(n)}}, {"n": n}]
        r = http.bulk(lines, params={"refresh": "true"})
        assert r.status_code == 200 and not r.json()["errors"], r.text
    lines = [{"delete": {"_index": index, "_id": str(n)}} for n in range(20, 30)]
    assert not http.bulk(lines, params={"refresh": "true"}).json()["errors"]
    before = segments_by_name(http, index)
    # A segment whose every document is deleted is dropped at the refresh, so fewer may show.
    assert any(int(s["docs.deleted"]) >= 5 for s in before.values()), before
    return before


def assert_only_deletes_expunged(http, index: str, before: dict[str, dict]) -> None:
    http.post(f"/{index}/_refresh")
    after = segments_by_name(http, index)
    untouched = {name for name, s in before.items() if s["docs.deleted"] == "0"}
    assert untouched and untouched <= set(after), (before, after)
    assert all(s["docs.deleted"] == "0" for s in after.values()), after
    assert http.get(f"/{index}/_count").json()["count"] == 50


def test_only_expunge_deletes_rewrites_just_the_segments_with_many_deleted_documents(http, index_name):
    create(http, index_name)
    before = write_and_delete(http, index_name)
    r = http.post(f"/{index_name}/_forcemerge", params={"only_expunge_deletes": "true"})
    assert r.status_code == 200, r.text
    assert_only_deletes_expunged(http, index_name, before)


def test_only_expunge_deletes_with_max_num_segments_expunges_and_warns(http, index_name):
    # OpenSearch 2.x: accepted with a deprecation warning, and max_num_segments has no effect.
    create(http, index_name)
    before = write_and_delete(http, index_name)
    r = http.post(f"/{index_name}/_forcemerge", params={"only_expunge_deletes": "true", "max_num_segments": "1"})
    assert r.status_code == 200, r.text
    assert "only_expunge_deletes and max_num_segments at the same time is deprecated" in r.headers.get("Warning", ""), r.headers
    assert_only_deletes_expunged(http, index_name, before)
    # Run as a task, the answer warns the same.
    r = http.post(f"/{index_name}/_forcemerge", params={"only_expunge_deletes": "true", "max_num_segments": "1",
                                                         "wait_for_completion": "false"})
    assert r.status_code == 200 and "task" in r.json(), r.text
    assert "is deprecated" in r.headers.get("Warning", ""), r.headers
