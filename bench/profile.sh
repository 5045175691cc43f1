#!/usr/bin/env bash
# Profile Shoal's bulk ingest with perf: a fresh node, the Debian corpus ×N over 2 clients,
# `perf record -g` on the shoal process for the whole bulk phase, then the top self-time
# symbols. Usage: bench/profile.sh [repeat=4] [clients=2]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT="${1:-4}"; CLIENTS="${2:-2}"
SHOAL_BIN="${SHOAL_BIN:-target/release/shoal}"
OUT=bench/results/tmp/profile; rm -rf "$OUT"; mkdir -p "$OUT"
PORT=9410
"$SHOAL_BIN" -E http.port=$PORT -E path.data="$OUT/data" -E path.logs="$OUT/logs" > "$OUT/shoal.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fs "127.0.0.1:$PORT/_cluster/health" >/dev/null && break; sleep 0.1; done
curl -fs -XPUT "127.0.0.1:$PORT/debian" -H 'content-type: application/json' -d @bench/config/debian-index.json >/dev/null
perf record -F ${PERF_FREQ:-199} --call-graph ${CALL_GRAPH:-dwarf,16384} -p $PID -o "$OUT/perf.data" 2> "$OUT/perf-record.log" &
PERF=$!
sleep 0.5
target/release/shoal-bench bulk --url "http://127.0.0.1:$PORT" --index debian --file bench/data/debian.ndjson \
  --clients "$CLIENTS" --repeat "$REPEAT" > "$OUT/bulk.json"
kill -INT $PERF; wait $PERF || true
python3 -c "import json;d=json.load(open('$OUT/bulk.json'));print('bulk:',d['docs'],'docs',d['docs_per_s'],'docs/s')"
perf report -i "$OUT/perf.data" --no-children --sort symbol --stdio --percent-limit 1 2>/dev/null \
  | grep -E '^ +[0-9]' | head -40 > "$OUT/top-self.txt"
perf report -i "$OUT/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -10 > "$OUT/top-dso.txt"
perf report -i "$OUT/perf.data" --children --sort symbol --stdio --percent-limit 5 -g none 2>/dev/null \
  | grep -E '^ +[0-9]' | head -40 > "$OUT/top-children.txt"
echo "== self time by symbol"; cat "$OUT/top-self.txt"
echo "== by DSO"; cat "$OUT/top-dso.txt"
