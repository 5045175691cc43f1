"""Shared assertions and small helpers for the end-to-end tests."""
from __future__ import annotations

import re
import time


def assert_error(resp, status: int, etype: str, reason: str | None = None, reason_re: str | None = None):
    """Assert OpenSearch's error body: {"error": {"root_cause": [...], "type", "reason"}, "status"}."""
    assert resp.status_code == status, f"expected {status}, got {resp.status_code}: {resp.text[:1000]}"
    body = resp.json()
    assert body["status"] == status, body
    err = body["error"]
    assert isinstance(err, dict), body
    assert err["type"] == etype, body
    assert isinstance(err.get("root_cause"), list) and err["root_cause"], body
    assert "type" in err["root_cause"][0] and "reason" in err["root_cause"][0], body
    if reason is not None:
        assert err["reason"] == reason, body
    if reason_re is not None:
        assert re.search(reason_re, err["reason"]), body
    return err


def shards_ok(shards: dict, total: int = 1, successful: int | None = None):
    successful = total if successful is None else successful
    assert shards == {"total": total, "successful": successful, "failed": 0}, shards


def wait_for(pred, timeout=10.0, interval=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last={last!r})")


def ids_of(resp_json) -> list[str]:
    return [h["_id"] for h in resp_json["hits"]["hits"]]


def total_of(resp_json) -> int:
    return resp_json["hits"]["total"]["value"]
