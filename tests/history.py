"""A history of acknowledged writes, checked against what a cluster holds afterwards.

Writers record every write the cluster acknowledged (id, version, seq_no, primary term, and
the value written) and every write whose outcome is unknown (an error or a lost connection:
the primary may have applied it before failing, so it may or may not survive). Values written
to an id must only grow. `verify` then reads every copy of every shard (`preference=
_shards:N|_only_nodes:<node>`) and fails if an acknowledged document is missing, holds a value
older than its last acknowledged one, holds a value nobody wrote after that, or if the copies
of a shard disagree. Later fault tests reuse it.

One exception to "older than its last acknowledged one": a write that got no answer at all (its
coordinator was killed with it in flight, or the connection broke). It is still pending, as in
any linearizability checker: the primary may receive and apply it after writes the client sent
later, as OpenSearch does. Such values are accepted only where the copy shows exactly that (the
held value sits after the acknowledged one in the shard's history, by term and seq_no) and are
counted (`applied_late`), never hidden. A write the cluster answered as failed must never be
applied after a later acknowledged one.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from dataclasses import dataclass, field

import requests


NO_ANSWER = "no answer"


@dataclass
class Ack:
    version: int
    seq_no: int
    primary_term: int
    value: int


@dataclass
class History:
    acks: dict[str, Ack] = field(default_factory=dict)
    # Values whose write failed or went unanswered, by id: each may or may not have been applied.
    indeterminate: dict[str, set[int]] = field(default_factory=dict)
    # How each of those writes ended, by (id, value): the error type answered, or "no answer".
    outcomes: dict[tuple[str, int], str] = field(default_factory=dict)
    attempted: int = 0
    failed: int = 0
    # The error types the cluster answered failed items with, and how often.
    error_types: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record_bulk(self, sent: list[tuple[str, int]], response: dict) -> None:
        """Records the acknowledged items of a `_bulk` response (`sent`: (id, value) in order)."""
        with self.lock:
            self.attempted += len(sent)
            for (doc_id, value), item in zip(sent, response["items"]):
                result = item.get("index") or item.get("create") or {}
                if result.get("status") in (200, 201):
                    previous = self.acks.get(doc_id)
                    ack = Ack(result["_version"], result["_seq_no"], result["_primary_term"], value)
                    if previous is None or (ack.primary_term, ack.seq_no) > (previous.primary_term, previous.seq_no):
                        self.acks[doc_id] = ack
                else:
                    self.failed += 1
                    self.indeterminate.setdefault(doc_id, set()).add(value)
                    kind = (result.get("error") or {}).get("type", f"status {result.get('status')}")
                    self.error_types[kind] = self.error_types.get(kind, 0) + 1
                    self.outcomes[(doc_id, value)] = f"item answered {kind} at {utc_now()}"

    def record_failure(self, sent: list[tuple[str, int]], error_type: str | None = None) -> None:
        """A request that failed as a whole: any of its writes may have been applied."""
        with self.lock:
            if error_type:
                self.error_types[error_type] = self.error_types.get(error_type, 0) + 1
            self.attempted += len(sent)
            self.failed += len(sent)
            for doc_id, value in sent:
                self.indeterminate.setdefault(doc_id, set()).add(value)
                answer = f"request answered {error_type}" if error_type else NO_ANSWER
                self.outcomes[(doc_id, value)] = f"{answer} at {utc_now()}"

    def verify(self, base_url: str, index: str, copies: list[tuple[int, str]]) -> dict:
        """Checks every copy; `copies` lists (shard, node name) of the started copies.
        Returns a summary; raises AssertionError with the first problems found."""
        problems: list[str] = []
        # Searches read refreshed data; a copy that just finished recovering may not have
        # refreshed yet.
        requests.post(f"{base_url}/{index}/_refresh", timeout=60).raise_for_status()
        per_shard: dict[int, dict[str, dict]] = {}
        for shard, node in copies:
            docs = read_copy(base_url, index, shard, node)
            per_shard.setdefault(shard, {})[node] = docs
        found: dict[str, dict] = {}
        for shard, by_node in per_shard.items():
            contents = {node: {k: (v["_version"], v["_source"]["value"]) for k, v in docs.items()}
                        for node, docs in by_node.items()}
            reference = next(iter(contents.values()))
            for node, content in contents.items():
                if content != reference:
                    diff = set(content.items()) ^ set(reference.items())
                    problems.append(f"shard {shard}: copy on {node} differs ({len(diff)} entries), e.g. {sorted(diff)[:3]}")
            for by_id in by_node.values():
                found.update(by_id)
        lost = []
        applied_late = 0
        for doc_id, ack in self.acks.items():
            doc = found.get(doc_id)
            if doc is None:
                lost.append(doc_id)
                continue
            value = doc["_source"]["value"]
            if value < ack.value and self.was_unanswered(doc_id, value) and sits_after(doc, ack):
                applied_late += 1
            elif value < ack.value:
                outcome = self.outcomes.get((doc_id, value), "never sent")
                problems.append(f"{doc_id}: holds value {value} ({held(doc)}; its write: {outcome}), acknowledged "
                                f"{ack.value} later (term {ack.primary_term}, seq_no {ack.seq_no}, version {ack.version})")
            elif value > ack.value and value not in self.indeterminate.get(doc_id, ()):
                problems.append(f"{doc_id}: holds value {value}, never written after the acknowledged {ack.value}")
        for doc_id, doc in found.items():
            if doc_id not in self.acks and doc["_source"]["value"] not in self.indeterminate.get(doc_id, ()):
                problems.append(f"{doc_id}: holds value {doc['_source']['value']}, which nobody wrote")
        if lost:
            problems.append(f"{len(lost)} acknowledged documents lost, e.g. {lost[:5]}")
        assert not problems, "\n".join(problems[:20])
        return {"acknowledged": len(self.acks), "attempted": self.attempted, "failed": self.failed, "lost": len(lost),
                "applied_late": applied_late}

    def was_unanswered(self, doc_id: str, value: int) -> bool:
        """Whether the write of `value` got no answer (so it may still have been in flight)."""
        return self.outcomes.get((doc_id, value), "").startswith(NO_ANSWER)


def utc_now() -> str:
    """The time as node logs print it, to find a write's end in them."""
    return datetime.now(timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def sits_after(doc: dict, ack: Ack) -> bool:
    """Whether a held document was written after the acknowledged write `ack` (term, then seq_no)."""
    return (doc.get("_primary_term", -1), doc.get("_seq_no", -1)) > (ack.primary_term, ack.seq_no)


def held(doc: dict) -> str:
    """Where a document a copy holds sits in the shard's history."""
    return f"term {doc.get('_primary_term')}, seq_no {doc.get('_seq_no')}, version {doc.get('_version')}"


def read_copy(base_url: str, index: str, shard: int, node: str) -> dict[str, dict]:
    """Every document of one shard copy, by id (a scroll pinned to that copy)."""
    params = {"preference": f"_shards:{shard}|_only_nodes:{node}", "scroll": "1m"}
    r = requests.post(f"{base_url}/{index}/_search", json={"size": 1000, "version": True, "seq_no_primary_term": True, "sort": ["_doc"]},
                      params=params, timeout=60)
    r.raise_for_status()
    body = r.json()
    assert body["_shards"]["failed"] == 0, body["_shards"]
    docs = {}
    duplicates = []
    while body["hits"]["hits"]:
        for hit in body["hits"]["hits"]:
            if hit["_id"] in docs:
                duplicates.append((hit["_id"], docs[hit["_id"]]["_source"], hit["_source"]))
            docs[hit["_id"]] = hit
        r = requests.post(f"{base_url}/_search/scroll", json={"scroll": "1m", "scroll_id": body["_scroll_id"]}, timeout=60)
        r.raise_for_status()
        body = r.json()
    requests.delete(f"{base_url}/_search/scroll", json={"scroll_id": body["_scroll_id"]}, timeout=10)
    assert not duplicates, f"shard {shard} on {node} holds live duplicates of an id: {duplicates[:5]}"
    return docs
