"""The systems under test: a Shoal release binary and OpenSearch 2.18 nodes, started on
loopback ports with their data under bench/results/tmp/, plus /proc readings (CPU seconds,
RSS) and a small JSON-over-HTTP helper."""

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
TMP = os.path.join(BENCH, "results", "tmp")
SHOAL_BIN = os.environ.get("SHOAL_BIN") or os.path.join(REPO, "target", "release", "shoal")
BENCH_BIN = os.environ.get("SHOAL_BENCH_BIN") or os.path.join(REPO, "target", "release", "shoal-bench")
OS_VERSION = os.environ.get("OS_VERSION", "2.18.0")
OS_HOME = os.environ.get("OS_HOME", f"/opt/opensearch-{OS_VERSION}")
OS_USER = os.environ.get("OS_USER", "osuser")
OS_HEAP = os.environ.get("OS_HEAP", "512m")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"[bench] {msg}", flush=True)


class HttpError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


def http(method, url, body=None, timeout=600, ndjson=False):
    data = None
    headers = {}
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers["Content-Type"] = "application/x-ndjson" if ndjson else "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as e:
        raise HttpError(e.code, e.read().decode("utf-8", "replace")) from None
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def proc_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # after the command: state(0) ... utime(11) stime(12)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


class System:
    name = "?"
    label = "?"

    def __init__(self, port):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.pid = None
        self.started_at = None
        self.time_to_green = None

    # --- process readings
    def cpu_seconds(self):
        return proc_cpu_seconds(self.pid)

    def rss(self):
        return proc_status(self.pid, "VmRSS")

    def peak_rss(self):
        return proc_status(self.pid, "VmHWM")

    def alive(self):
        if not self.pid:
            return False
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def wait_green(self, deadline_s=180):
        t_end = time.time() + deadline_s
        while time.time() < t_end:
            try:
                h = http("GET", f"{self.url}/_cluster/health?wait_for_status=green&timeout=1s", timeout=5)
                if isinstance(h, dict) and h.get("status") == "green":
                    return time.monotonic() - self.started_at
            except (OSError, HttpError):
                pass
            if self.pid and not self.alive():
                raise RuntimeError(f"{self.name} exited during start; see {self.log_hint()}")
            time.sleep(0.02)
        raise RuntimeError(f"{self.name} not green after {deadline_s}s; see {self.log_hint()}")

    def log_hint(self):
        return "its log"

    def check_ports_free(self, *ports):
        import socket
        for port in ports:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    raise RuntimeError(f"port {port} is already in use: stop whatever listens there "
                                       f"before benchmarking {self.name}")

    # --- index helpers
    def req(self, method, path, body=None, **kw):
        return http(method, self.url + path, body, **kw)

    def transport_tx_bytes(self):
        """Payload bytes this node sent to other nodes so far (`_nodes/stats` transport)."""
        nodes = self.req("GET", "/_nodes/_local/stats/transport")["nodes"]
        return next(iter(nodes.values()))["transport"]["tx_size_in_bytes"]

    def recreate_index(self, name, body):
        try:
            self.req("DELETE", f"/{name}")
        except HttpError as e:
            if e.status != 404:
                raise
        self.req("PUT", f"/{name}", body)
        self.req("GET", f"/_cluster/health/{name}?wait_for_status=green&timeout=60s")

    def delete_index(self, name):
        try:
            self.req("DELETE", f"/{name}")
        except HttpError as e:
            if e.status != 404:
                raise

    def store_bytes(self, name):
        rows = self.req("GET", f"/_cat/indices/{name}?bytes=b&format=json&h=index,docs.count,store.size,pri.store.size")
        row = rows[0]
        return int(row["store.size"]), int(row["docs.count"])

    def index_disk_bytes(self, name):
        """Bytes on disk of the index's shard `index/` directories (no translog, no state)."""
        uuid = self.req("GET", f"/_cat/indices/{name}?h=uuid&format=json")[0]["uuid"]
        total = 0
        for root, dirs, files in os.walk(os.path.join(self.dir, "data")):
            if os.path.basename(root) == "index" and uuid in root.split(os.sep):
                total += sum(os.path.getsize(os.path.join(root, f)) for f in files
                             if os.path.exists(os.path.join(root, f)))
        return total

    def version(self):
        v = self.req("GET", "/")
        return v.get("version", {}).get("number"), v.get("version", {}).get("distribution")


# Both systems ignore the host's disk usage: a build machine's disk often sits above the 85%
# low watermark, which would leave replicas unassigned and measure nothing.
NO_DISK_THRESHOLD = "cluster.routing.allocation.disk.threshold_enabled"


class Shoal(System):
    name = "shoal"
    label = "Shoal"

    def __init__(self, port=9400, tag="shoal", transport=None, node_name="shoal-bench",
                 cluster="shoal-bench", seeds=None, masters=None, extra=None):
        super().__init__(port)
        self.extra = dict(extra or {})
        self.dir = os.path.join(TMP, tag)
        self.proc = None
        self.logfile = None
        self.transport = transport
        self.node_name = node_name
        self.cluster = cluster
        self.seeds = seeds
        self.masters = masters

    def binary_bytes(self):
        return os.path.getsize(SHOAL_BIN)

    def log_hint(self):
        return os.path.join(self.dir, "stdout.log")

    def start(self, fresh=True):
        self.check_ports_free(self.port)
        if fresh:
            shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        os.makedirs(os.path.join(self.dir, "logs"), exist_ok=True)
        self.logfile = open(os.path.join(self.dir, "stdout.log"), "ab")
        self.started_at = time.monotonic()
        args = [SHOAL_BIN, "-E", f"http.port={self.port}", "-E", "http.host=127.0.0.1",
                "-E", f"path.data={self.dir}/data", "-E", f"path.logs={self.dir}/logs",
                "-E", f"node.name={self.node_name}", "-E", f"cluster.name={self.cluster}",
                "-E", f"{NO_DISK_THRESHOLD}=false"]
        if self.seeds:
            args += ["-E", f"transport.port={self.transport}",
                     "-E", f"discovery.seed_hosts={','.join(self.seeds)}",
                     "-E", f"cluster.initial_cluster_manager_nodes={','.join(self.masters)}"]
        for key, value in self.extra.items():
            args += ["-E", f"{key}={value}"]
        self.proc = subprocess.Popen(
            args, stdout=self.logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=dict(os.environ, SHOAL_LOG=os.environ.get("SHOAL_BENCH_RUST_LOG", "warn")))
        self.pid = self.proc.pid
        if self.seeds:
            return None  # the caller waits for the whole cluster
        self.time_to_green = self.wait_green()
        return self.time_to_green

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.pid = None
        if self.logfile:
            self.logfile.close()
            self.logfile = None


def run_as_os_user(args, env, out_path):
    """Run the daemonizing launcher; its output goes to a file (a pipe would be inherited by
    the daemon and never reach EOF)."""
    with open(out_path, "ab") as out:
        if os.getuid() == 0:
            return subprocess.run(["runuser", "-u", OS_USER, "--", "env"] +
                                  [f"{k}={v}" for k, v in env.items()] + args,
                                  stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return subprocess.run(args, env=dict(os.environ, **env), stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)


def ensure_opensearch_installed():
    """Install via scripts/opensearch-local (Maven Central zip + core modules) if missing."""
    if os.path.exists(os.path.join(OS_HOME, "modules", f".shoal-modules-{OS_VERSION}")):
        return
    script = os.path.join(REPO, "scripts", "opensearch-local")
    env = dict(os.environ, OS_HTTP_PORT="9299", OS_TRANSPORT_PORT="9399",
               OS_DATA=os.path.join(TMP, "os-install-data"), OS_LOGS=os.path.join(TMP, "os-install-logs"))
    log("installing OpenSearch with scripts/opensearch-local (one start/stop)")
    subprocess.run([script, "start"], env=env, check=True)
    subprocess.run([script, "stop"], env=env, check=True)


def ensure_os_user():
    if os.getuid() != 0:
        return
    if subprocess.run(["id", OS_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", OS_USER], check=True)


class OpenSearch(System):
    """One OpenSearch node, run as OS_USER with -Xms/-Xmx OS_HEAP. `seeds`/`masters` make a
    multi-node cluster (otherwise discovery.type=single-node)."""

    name = "opensearch"
    label = "OpenSearch 2.18"

    def __init__(self, port=9270, transport=9370, tag="opensearch", node_name="os-0",
                 cluster="os-bench", seeds=None, masters=None, heap=OS_HEAP, extra=None):
        super().__init__(port)
        self.extra = dict(extra or {})
        self.transport = transport
        self.dir = os.path.join(TMP, tag)
        self.node_name = node_name
        self.cluster = cluster
        self.seeds = seeds
        self.masters = masters
        self.heap = heap

    def binary_bytes(self):
        return dir_bytes(OS_HOME)

    def log_hint(self):
        return os.path.join(self.dir, "logs")

    def start(self, fresh=True):
        self.check_ports_free(self.port, self.transport)
        ensure_opensearch_installed()
        ensure_os_user()
        if fresh:
            shutil.rmtree(self.dir, ignore_errors=True)
        for sub in ("data", "logs"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        subprocess.run(["chown", "-R", f"{OS_USER}:", self.dir], check=False)
        java = os.path.realpath(shutil.which("java"))
        java_home = os.environ.get("OPENSEARCH_JAVA_HOME") or os.path.dirname(os.path.dirname(java))
        pidfile = os.path.join(self.dir, "logs", "pid")
        args = [f"{OS_HOME}/bin/opensearch", "-d", "-p", pidfile,
                "-Enetwork.host=127.0.0.1", f"-Ehttp.port={self.port}", f"-Etransport.port={self.transport}",
                f"-Epath.data={self.dir}/data", f"-Epath.logs={self.dir}/logs",
                f"-Ecluster.name={self.cluster}", f"-Enode.name={self.node_name}",
                f"-E{NO_DISK_THRESHOLD}=false"]
        if self.seeds:
            args += [f"-Ediscovery.seed_hosts={','.join(self.seeds)}",
                     f"-Ecluster.initial_cluster_manager_nodes={','.join(self.masters)}"]
        else:
            args += ["-Ediscovery.type=single-node"]
        args += [f"-E{key}={value}" for key, value in self.extra.items()]
        self.started_at = time.monotonic()
        out_path = os.path.join(self.dir, "launcher.log")
        r = run_as_os_user(args, {"OPENSEARCH_JAVA_HOME": java_home,
                                  "OPENSEARCH_JAVA_OPTS": f"-Xms{self.heap} -Xmx{self.heap}"}, out_path)
        if r.returncode != 0:
            raise RuntimeError(f"OpenSearch failed to start: {open(out_path).read()[-2000:]}")
        for _ in range(2400):
            if os.path.exists(pidfile) and open(pidfile).read().strip():
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"OpenSearch wrote no pid file in 120 s; see {self.dir}/logs")
        self.pid = int(open(pidfile).read().strip())
        if self.seeds:
            return None  # the caller waits for the whole cluster
        self.time_to_green = self.wait_green()
        return self.time_to_green

    def stop(self):
        if not self.pid:
            return
        try:
            os.kill(self.pid, 15)
        except ProcessLookupError:
            pass
        for _ in range(600):
            if not self.alive():
                break
            time.sleep(0.1)
        else:
            os.kill(self.pid, 9)
        self.pid = None


def make(name, **kw):
    if name == "shoal":
        return Shoal(**kw)
    if name == "opensearch":
        return OpenSearch(**kw)
    raise ValueError(f"unknown system {name}")
