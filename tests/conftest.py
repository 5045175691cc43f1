"""Fixtures for Shoal's end-to-end suite.

By default a real `shoal` process is started for the session (binary from $SHOAL_BIN, default
target/debug/shoal). With SHOAL_TEST_URL=http://127.0.0.1:9250 the suite runs against an already
running server instead (that is how the expectations are validated against real OpenSearch 2.18:
see scripts/opensearch-local). Tests that need to restart the node are marked `restart` and skipped then.
"""
from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests
from opensearchpy import OpenSearch

REPO = Path(__file__).resolve().parent.parent
EXTERNAL_URL = os.environ.get("SHOAL_TEST_URL", "").rstrip("/")
START_TIMEOUT = float(os.environ.get("SHOAL_TEST_START_TIMEOUT", "60"))


# Ports for nodes come from below the kernel's ephemeral range (32768-60999 by default), so an
# outgoing connection can never take one as its source port between free_port() and the node's
# bind, and no port is handed out twice in one test run (a port the kernel just gave to one node
# and released was once given to a second node too: both bound the same port, one failed).
_PORT_RANGE = (20000, 32000)
_ports_given: set[int] = set()


def free_port() -> int:
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(*_PORT_RANGE)
        if port in _ports_given:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _ports_given.add(port)
        return port
    raise RuntimeError(f"no free port left in {_PORT_RANGE} after 1000 tries")


def shoal_bin() -> Path:
    p = Path(os.environ.get("SHOAL_BIN", "target/debug/shoal"))
    if not p.is_absolute():
        p = REPO / p
    return p


class NodeStartError(RuntimeError):
    pass


class ShoalNode:
    """A `shoal` process on 127.0.0.1 with its own data dir; can be stopped, killed and restarted."""

    def __init__(self, workdir: Path, name: str = "test-node", settings: dict | None = None):
        self.workdir = Path(workdir)
        self.data = self.workdir / "data"
        self.logs = self.workdir / "logs"
        self.data.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "node.log"
        self.port = free_port()
        self.transport_port = free_port()
        self.name = name
        self.settings = {
            "path.data": str(self.data),
            "path.logs": str(self.logs),
            "http.port": str(self.port),
            "transport.port": str(self.transport_port),
            "node.name": name,
            "cluster.name": "shoal-test",
            # A test must not depend on how full the host's disk is (CI machines often sit past
            # the 85% low watermark, which leaves replicas unassigned). Disk tests set it back.
            "cluster.routing.allocation.disk.threshold_enabled": "false",
        }
        self.settings.update(settings or {})
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{self.port}"
        self.starts = 0

    def args(self) -> list[str]:
        args = [str(shoal_bin())]
        for k, v in self.settings.items():
            args += ["-E", f"{k}={v}"]
        return args

    def start(self, timeout: float = START_TIMEOUT, port_retries: int = 3) -> None:
        binary = shoal_bin()
        if not binary.exists():
            raise NodeStartError(f"shoal binary not found at {binary} (build it with `cargo build -p shoal` or set SHOAL_BIN)")
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(f"\n===== start #{self.starts}: {' '.join(self.args())}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(self.args(), stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir,
                                     env={**os.environ, "RUST_BACKTRACE": "1"})
        log.close()
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if port_retries > 0 and self._http_port_was_taken():
                    # free_port() released the port and an outgoing connection took it as its
                    # source port before the node bound it: any free HTTP port will do.
                    self.port = free_port()
                    self.settings["http.port"] = str(self.port)
                    self.url = f"http://127.0.0.1:{self.port}"
                    return self.start(timeout, port_retries - 1)
                raise NodeStartError(f"shoal exited with code {self.proc.returncode} during start\n{self.log_tail()}")
            try:
                r = requests.get(self.url + "/", timeout=2)
                if r.status_code == 200:
                    return
                last = f"HTTP {r.status_code}: {r.text[:200]}"
            except requests.RequestException as e:  # not listening yet
                last = repr(e)
            time.sleep(0.1)
        self.kill9()
        raise NodeStartError(f"shoal did not answer GET / within {timeout}s (last: {last})\n{self.log_tail()}")

    def _http_port_was_taken(self) -> bool:
        tail = self.log_tail(5)
        return "cannot serve http" in tail and "Address already in use" in tail

    def log_tail(self, n: int = 200) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no node log)"
        return f"----- last {min(n, len(lines))} lines of {self.log_path} -----\n" + "\n".join(lines[-n:])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30) -> None:
        """Graceful stop (SIGTERM), SIGKILL after `timeout`."""
        if not self.alive():
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def kill9(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait(10)

    def restart(self, kill: bool = False) -> None:
        self.kill9() if kill else self.stop()
        self.start()

    def client(self) -> OpenSearch:
        return make_client(self.url)

    def http(self) -> "Http":
        return Http(self.url)


class Http:
    """Thin requests wrapper for raw status codes and bodies: http.get('/_cat/indices', params={...})."""

    def __init__(self, base: str):
        self.base = base.rstrip("/")
        self.s = requests.Session()

    def request(self, method: str, path: str, body=None, *, params=None, headers=None, data=None, json=None,
                timeout: float = 60) -> requests.Response:
        if body is not None:
            if isinstance(body, (dict, list)):
                json = body
            else:
                data = body
        h = dict(headers or {})
        if data is not None and "Content-Type" not in h and "content-type" not in h:
            h["Content-Type"] = "application/json"
        return self.s.request(method, self.base + path, params=params, headers=h, data=data, json=json,
                              timeout=timeout)

    def get(self, path, body=None, **kw):
        return self.request("GET", path, body, **kw)

    def head(self, path, **kw):
        return self.request("HEAD", path, **kw)

    def put(self, path, body=None, **kw):
        return self.request("PUT", path, body, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def delete(self, path, body=None, **kw):
        return self.request("DELETE", path, body, **kw)

    def bulk(self, lines, path="/_bulk", **kw):
        """POST NDJSON built from a list of dicts/strings."""
        import json as _json
        text = "".join((l if isinstance(l, str) else _json.dumps(l)) + "\n" for l in lines)
        return self.request("POST", path, text, headers={"Content-Type": "application/x-ndjson"}, **kw)


def make_client(url: str) -> OpenSearch:
    return OpenSearch(hosts=[url], timeout=60, max_retries=0, retry_on_timeout=False)


# --------------------------------------------------------------------------------------------------
# session node

@pytest.fixture(scope="session")
def node(tmp_path_factory):
    """The node under test: a ShoalNode, or None when SHOAL_TEST_URL points at an external server."""
    if EXTERNAL_URL:
        yield None
        return
    n = ShoalNode(tmp_path_factory.mktemp("shoal-node"))
    try:
        n.start()
    except NodeStartError as e:
        pytest.exit(f"could not start shoal: {e}", returncode=3)
    yield n
    n.stop()
    if n.proc is not None and n.proc.returncode not in (0, -signal.SIGTERM, None):
        print(f"shoal exited with {n.proc.returncode}\n{n.log_tail(50)}")


@pytest.fixture(scope="session")
def base_url(node) -> str:
    return EXTERNAL_URL if node is None else node.url


@pytest.fixture(scope="session")
def client(base_url) -> OpenSearch:
    return make_client(base_url)


@pytest.fixture(scope="session")
def http(base_url) -> Http:
    return Http(base_url)


@pytest.fixture(scope="session")
def root_info(http) -> dict:
    r = http.get("/")
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="session")
def is_shoal(root_info) -> bool:
    """True when the server under test is Shoal (checks that only Shoal does deliberately differently)."""
    return root_info.get("version", {}).get("distribution") != "opensearch"


@pytest.fixture(scope="session")
def is_opensearch(is_shoal) -> bool:
    return not is_shoal


@pytest.fixture
def restartable(node):
    """The ShoalNode for tests that restart it; skips when the target is external."""
    if node is None:
        pytest.skip("needs a Shoal process started by the suite (SHOAL_TEST_URL is set)")
    return node


@pytest.fixture
def node_factory(tmp_path, request):
    """Start extra Shoal nodes (own data dir/port), e.g. with special -E settings. Shoal only."""
    if EXTERNAL_URL:
        pytest.skip("needs to start its own Shoal process (SHOAL_TEST_URL is set)")
    nodes: list[ShoalNode] = []

    def make(settings: dict | None = None, name: str = "extra-node", start: bool = True) -> ShoalNode:
        n = ShoalNode(tmp_path / f"node{len(nodes)}", name=name, settings=settings)
        nodes.append(n)
        if start:
            n.start()
        return n

    yield make
    for n in nodes:
        n.kill9()
        if getattr(request.node, "rep_call_failed", False):
            print(n.log_tail(100))


# --------------------------------------------------------------------------------------------------
# per-test index names

_counter = [0]


def _sanitize(name: str) -> str:
    name = re.sub(r"[^a-z0-9_]+", "-", name.lower()).strip("-_")
    return name[:60].strip("-_") or "t"


@pytest.fixture
def index_name(request, http):
    """A unique index name for this test; every index starting with it is deleted afterwards."""
    _counter[0] += 1
    name = f"t-{_sanitize(request.node.name)}-{_counter[0]}"
    yield name
    cleanup_indices(http, name + "*")


def cleanup_indices(http: Http, pattern: str) -> None:
    r = http.delete(f"/{pattern}", params={"ignore_unavailable": "true", "expand_wildcards": "all"})
    if r.status_code not in (200, 404):
        # e.g. destructive_requires_name left on by a failed test: reset and retry once
        http.put("/_cluster/settings", {"persistent": {"action.destructive_requires_name": None,
                                                       "action.auto_create_index": None},
                                        "transient": {"action.destructive_requires_name": None,
                                                      "action.auto_create_index": None}})
        http.delete(f"/{pattern}", params={"ignore_unavailable": "true", "expand_wildcards": "all"})


@pytest.fixture
def index(index_name, http):
    """An existing index (1 shard, 0 replicas) named after the test."""
    r = http.put(f"/{index_name}", {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    assert r.status_code == 200, r.text
    return index_name


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        item.rep_call_failed = True


def pytest_collection_modifyitems(config, items):
    if not EXTERNAL_URL:
        # Known gaps of Shoal against OpenSearch, each with its reason: the test still runs and
        # reports XPASS the day the gap closes.
        for item in items:
            for mark in item.iter_markers("shoal_gap"):
                item.add_marker(pytest.mark.xfail(reason="known Shoal gap: " + mark.args[0], strict=False))
        return
    skip = pytest.mark.skip(reason="restarts the node: needs a Shoal process started by the suite")
    for item in items:
        if "restart" in item.keywords or "crash" in item.keywords:
            item.add_marker(skip)


# --------------------------------------------------------------------------------------------------
# shared read-only datasets (created once per test module, removed after it so that nothing leaks into
# tests that expect an empty cluster, like the REST YAML tests)

def shared_products_index(http, name: str, shards: int):
    """Creates the read-only products index (tests/dataset.py), refreshed; yields its name and
    removes it afterwards."""
    from dataset import PRODUCTS, PRODUCTS_MAPPING
    cleanup_indices(http, name)
    r = http.put(f"/{name}", {"settings": {"number_of_shards": shards, "number_of_replicas": 0},
                              "mappings": PRODUCTS_MAPPING})
    assert r.status_code == 200, r.text
    lines = []
    for doc_id, doc in PRODUCTS.items():
        lines += [{"index": {"_index": name, "_id": doc_id}}, doc]
    r = http.bulk(lines, params={"refresh": "true"})
    assert r.status_code == 200 and not r.json()["errors"], r.text
    yield name
    cleanup_indices(http, name)


@pytest.fixture(scope="module")
def products(http):
    """A read-only 10-document index, 1 shard, 0 replicas, refreshed."""
    yield from shared_products_index(http, "t-shared-products", 1)


@pytest.fixture(scope="module")
def products3(http):
    """The same documents spread over 3 shards (for merge-across-shards checks)."""
    yield from shared_products_index(http, "t-shared-products3", 3)


# ---------------------------------------------------------------- transport errors seen by clients

# What a client must never get for a node that went away (issue 17): the coordinating node's
# transport error instead of a retry on the promoted copy.
TRANSPORT_ERROR_TYPES = ("connect_transport_exception", "node_not_connected_exception",
                         "node_closed_exception", "receive_timeout_transport_exception",
                         "transport_exception")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def transport_errors_answered(root: Path) -> list[str]:
    """Lines of the node logs under `root` where a node answered a client (a whole request or a
    bulk item) with a 5xx transport error; each as `<test dir>: <line>`."""
    found = []
    for log in root.rglob("node.log"):
        for line in log.read_text(errors="replace").splitlines():
            line = ANSI.sub("", line)
            # The answer's own type: an `unavailable_shards_exception` caused by a connect
            # error (the request timed out waiting for a primary) is the right answer.
            if ("request failed" in line or "bulk item failed" in line) and any(
                    f"error_type={t} " in line for t in TRANSPORT_ERROR_TYPES):
                found.append(f"{log.relative_to(root).parts[0]}: {line.strip()}")
    return found


def pytest_sessionfinish(session, exitstatus):
    """Reports, for every run, how many client answers were 5xx transport errors (the node logs
    log every 5xx request and bulk item); the figure the notes of issue 17 quote."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    try:
        root = factory.getbasetemp()
    except Exception:
        return
    found = transport_errors_answered(Path(root))
    print(f"\n[figure] client answers that were 5xx transport errors: {len(found)}")
    for line in found[:20]:
        print(f"  {line}")
