"""Corpus preparation: the Debian package corpus, a seeded log corpus, the seeded query mix
and the opensearch-benchmark workload corpus. Everything lands in bench/data/ (not committed)
and is rebuilt only when missing.

    python3 bench/prep.py            # build what is missing
    python3 bench/prep.py --force    # rebuild
"""

import argparse
import datetime as dt
import json
import os
import random
import re
import subprocess
import sys
from collections import Counter

BENCH = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(BENCH, "data")
CONFIG = os.path.join(BENCH, "config")
OSB = os.path.join(BENCH, "osb-workload")

DEBIAN = os.path.join(DATA, "debian.ndjson")
LOGS = os.path.join(DATA, "logs.ndjson")
QUERIES = os.path.join(DATA, "queries.json")
LOG_DOCS = 200_000
SEED = 42


def log(msg):
    print(f"[prep] {msg}", file=sys.stderr, flush=True)


def dumpavail():
    out = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, check=True).stdout
    if out.count(b"\nPackage: ") < 1000:
        log("apt lists look empty: running apt-get update once")
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        out = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, check=True).stdout
    return out.decode("utf-8", "replace")


def parse_stanzas(text):
    for stanza in text.split("\n\n"):
        fields = {}
        key = None
        for line in stanza.split("\n"):
            if not line:
                continue
            if line[0] in " \t" and key:
                fields[key] += "\n" + line.strip()
                continue
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        if "Package" in fields:
            yield fields


def to_doc(f):
    def number(name):
        try:
            return int(f[name])
        except (KeyError, ValueError):
            return None

    depends = []
    for alt in f.get("Depends", "").split(","):
        name = alt.strip().split(" ")[0].split(":")[0]
        if name and name not in depends:
            depends.append(name)
    tags = [t.strip() for t in f.get("Tag", "").replace("\n", " ").split(",") if t.strip()]
    doc = {
        "package": f["Package"],
        "version": f.get("Version"),
        "section": f.get("Section"),
        "priority": f.get("Priority"),
        "architecture": f.get("Architecture"),
        "maintainer": f.get("Maintainer"),
        "installed_size": number("Installed-Size"),
        "size": number("Size"),
        "depends": depends,
        "homepage": f.get("Homepage"),
        "description": f.get("Description", ""),
        "tags": tags,
    }
    return {k: v for k, v in doc.items() if v not in (None, [], "")}


def build_debian():
    docs = [to_doc(f) for f in parse_stanzas(dumpavail())]
    with open(DEBIAN, "w") as out:
        for d in docs:
            out.write(json.dumps(d, separators=(",", ":"), ensure_ascii=False) + "\n")
    log(f"{len(docs)} Debian package documents -> {DEBIAN} ({os.path.getsize(DEBIAN) / 1e6:.1f} MB)")


AGENTS = [
    "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0", "Mozilla/5.0 (Windows NT 10.0) Chrome/126.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) Safari/605.1.15", "curl/8.5.0",
    "python-requests/2.32.3", "Googlebot/2.1", "opensearch-benchmark/1.0", "Go-http-client/1.1",
]
PATHS = ["/", "/index.html", "/search", "/api/v1/items", "/api/v1/users", "/login", "/logout",
         "/static/app.js", "/static/style.css", "/images/logo.png", "/cart", "/checkout", "/docs",
         "/api/v2/orders", "/health", "/favicon.ico"]
METHODS = ["GET"] * 8 + ["POST"] * 2 + ["PUT", "DELETE", "HEAD"]
STATUSES = [200] * 40 + [201, 204, 301, 302, 304, 304, 400, 401, 403, 404, 404, 404, 500, 502, 503]
WORDS = ["request", "served", "cache", "hit", "miss", "upstream", "timeout", "user", "session",
         "token", "expired", "redirect", "gzip", "chunked", "keepalive", "backend", "slow", "ok"]


def build_logs(n=LOG_DOCS):
    rng = random.Random(SEED)
    t = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    with open(LOGS, "w") as out:
        for i in range(n):
            t += dt.timedelta(milliseconds=rng.randint(0, 2000))
            status = rng.choice(STATUSES)
            path = rng.choice(PATHS)
            if rng.random() < 0.3:
                path += f"/{rng.randint(1, 5000)}"
            ip = f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
            method = rng.choice(METHODS)
            size = int(rng.lognormvariate(8, 1.5))
            doc = {
                "@timestamp": t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z",
                "client_ip": ip,
                "method": method,
                "url": path,
                "status": status,
                "size": size,
                "response_ms": int(rng.expovariate(1 / 80)),
                "user_agent": rng.choice(AGENTS),
                "message": f"{method} {path} {status} " + " ".join(rng.sample(WORDS, 4)),
            }
            out.write(json.dumps(doc, separators=(",", ":")) + "\n")
    log(f"{n} log documents -> {LOGS}")


TOKEN = re.compile(r"[a-z0-9]+")


def build_queries(per_type=25):
    """A fixed seeded mix over two indices: `debian` and `logs`."""
    rng = random.Random(SEED)
    docs = [json.loads(line) for line in open(DEBIAN)]
    df = Counter()
    sections = Counter()
    for d in docs:
        df.update(set(TOKEN.findall(d.get("description", "").lower())))
        sections[d.get("section")] += 1
    vocab = sorted(w for w, c in df.items() if 30 <= c <= 3000 and not w.isdigit() and len(w) > 2)
    common = sorted(w for w, c in df.items() if c > 3000 and not w.isdigit())
    secs = sorted(s for s, c in sections.items() if s and c >= 20)
    log_times = []
    with open(LOGS) as f:
        for i, line in enumerate(f):
            if i % 1000 == 0:
                log_times.append(json.loads(line)["@timestamp"])
    queries = []

    def add(kind, index, body):
        body = dict(body, track_total_hits=True)
        queries.append({"type": kind, "index": index, "body": body})

    for _ in range(per_type):
        add("term", "debian", {"query": {"term": {"section": rng.choice(secs)}}})
        add("match_1", "debian", {"query": {"match": {"description": rng.choice(vocab)}}})
        add("match_2", "debian", {"query": {"match": {
            "description": f"{rng.choice(vocab)} {rng.choice(vocab + common)}"}}})
        lo = rng.choice([0, 10, 50, 100, 500, 1000])
        add("bool_range", "debian", {"query": {"bool": {
            "must": [{"match": {"description": rng.choice(vocab + common)}}],
            "filter": [{"range": {"installed_size": {"gte": lo, "lte": lo * 20 + 100}}}]}}})
        add("terms_agg", "debian", {"size": 0, "query": {"match": {"description": rng.choice(common)}},
                                    "aggs": {"sections": {"terms": {"field": "section", "size": 10}}}})
        a, b = sorted(rng.sample(range(len(log_times)), 2))
        add("date_histogram", "logs", {"size": 0, "query": {"range": {"@timestamp": {
            "gte": log_times[a], "lt": log_times[b]}}},
            "aggs": {"per_hour": {"date_histogram": {"field": "@timestamp", "fixed_interval": "1h"}}}})
        add("sorted", "debian", {"query": {"term": {"section": rng.choice(secs)}},
                                 "sort": [{"installed_size": {"order": "desc"}}, {"package": "asc"}],
                                 "size": 10})
    rng.shuffle(queries)
    with open(QUERIES, "w") as out:
        json.dump(queries, out, indent=0)
    log(f"{len(queries)} queries ({per_type} per type) -> {QUERIES}")


def build_osb_corpus():
    """opensearch-benchmark reads the corpus next to workload.json; the workload's
    document-count and uncompressed-bytes must match the file exactly."""
    target = os.path.join(OSB, "documents.json")
    with open(DEBIAN, "rb") as src, open(target, "wb") as dst:
        data = src.read()
        dst.write(data)
    count = data.count(b"\n")
    # The workload must state the corpus' exact document count and size: patch them in.
    wl_path = os.path.join(OSB, "workload.json")
    with open(wl_path) as f:
        text = f.read()
    text = re.sub(r'"document-count": \d+', f'"document-count": {count}', text)
    text = re.sub(r'"uncompressed-bytes": \d+', f'"uncompressed-bytes": {len(data)}', text)
    with open(wl_path, "w") as f:
        f.write(text)
    for stale in ("documents.json.offset", "documents-1k.json"):
        if os.path.exists(os.path.join(OSB, stale)):
            os.remove(os.path.join(OSB, stale))
    log(f"opensearch-benchmark corpus -> {target} ({count} docs)")


def ensure(force=False):
    os.makedirs(DATA, exist_ok=True)
    if force or not os.path.exists(DEBIAN):
        build_debian()
    if force or not os.path.exists(LOGS):
        build_logs()
    if force or not os.path.exists(QUERIES):
        build_queries()
    if force or not os.path.exists(os.path.join(OSB, "documents.json")):
        build_osb_corpus()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--force", action="store_true")
    ensure(ap.parse_args().force)
