#!/usr/bin/env python3
"""Ecosystem check helper: a logging HTTP proxy between opensearch-benchmark and a server, to
list precisely which requests fail (method, path, status, error). With --patch-jvm it adds an
empty-but-well-formed `jvm` section to `_nodes/stats` answers that lack one, and with
--patch-shards a `shards` section to `_stats?level=shards` answers, so the run can get past
opensearch-benchmark's telemetry and show the next gap.

    bench/osb_probe.py --listen 9421 --target http://127.0.0.1:9420 [--patch-jvm] > probe.log
"""

import argparse
import http.server
import json
import socketserver
import sys
import urllib.error
import urllib.request

FAKE_JVM = {"gc": {"collectors": {n: {"collection_count": 0, "collection_time_in_millis": 0}
                                  for n in ("young", "old")}},
            "mem": {"pools": {}, "heap_used_in_bytes": 0, "heap_max_in_bytes": 0}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", type=int, default=9421)
    ap.add_argument("--target", default="http://127.0.0.1:9420")
    ap.add_argument("--patch-jvm", action="store_true")
    ap.add_argument("--patch-shards", action="store_true",
                    help="add indices.*.shards from primaries to _stats?level=shards answers that lack it")
    args = ap.parse_args()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def handle_any(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
            req = urllib.request.Request(args.target + self.path, data=body, method=self.command, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=600) as r:
                    status, data, ctype = r.status, r.read(), r.headers.get("Content-Type", "application/json")
            except urllib.error.HTTPError as e:
                status, data, ctype = e.code, e.read(), e.headers.get("Content-Type", "application/json")
            if args.patch_jvm and self.path.startswith("/_nodes/stats") and status == 200:
                try:
                    doc = json.loads(data)
                    for node in doc.get("nodes", {}).values():
                        node.setdefault("jvm", FAKE_JVM)
                    data = json.dumps(doc).encode()
                except ValueError:
                    pass
            if args.patch_shards and "/_stats" in self.path and "level=shards" in self.path and status == 200:
                try:
                    doc = json.loads(data)
                    for idx in doc.get("indices", {}).values():
                        if "shards" not in idx and "primaries" in idx:
                            idx["shards"] = {"0": [dict(idx["primaries"], routing={
                                "state": "STARTED", "primary": True, "node": "patched"})]}
                    data = json.dumps(doc).encode()
                except ValueError:
                    pass
            note = ""
            if status >= 400:
                note = data[:300].decode("utf-8", "replace")
            elif self.path.split("?")[0].endswith("_bulk") and b'"errors":true' in data[:100]:
                note = "bulk item errors: " + data[:300].decode("utf-8", "replace")
            print(json.dumps({"method": self.command, "path": self.path[:200], "status": status, "error": note}),
                  flush=True)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    print(f"probe listening on 127.0.0.1:{args.listen} -> {args.target}", file=sys.stderr, flush=True)
    Server(("127.0.0.1", args.listen), Handler).serve_forever()


if __name__ == "__main__":
    main()
