#!/usr/bin/env bash
# brisk serve throughput with speculation off and on (the server-wide --spec default), at
# 1, 4 and 16 concurrent requests: two servers on the same model, runs alternated between
# them (so machine noise hits both alike), median output tokens/s of REPS runs.
# bench-serve's requests: random-token prompts of 128 tokens, greedy, 128 tokens each.
# Usage: bench/spec-serve-bench.sh [BUILD_DIR] [REPS] [METHOD] [MODEL] [DRAFT]
# (DRAFT: the --draft model both servers load, for METHOD draft)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}; R=${2:-3}; M=${3:-lookup}; MODEL=${4:-models/brisk-tiny-q8_0.gguf}; DRAFT=${5:-}
T=$(mktemp -d)
start() {  # $1: --spec value; prints the port
  "$B/brisk" serve -m "$MODEL" --port 0 --parallel 16 -t 2 --spec "$1" ${DRAFT:+--draft "$DRAFT"} > "$T/$1.out" 2> "$T/$1.err" &
  echo $! > "$T/$1.pid"
  for _ in $(seq 100); do
    grep -o 'http://127.0.0.1:[0-9]*' "$T/$1.out" 2>/dev/null && return
    sleep 0.2
  done
  echo "server --spec $1 did not start" >&2; exit 1
}
OFF=$(start none); ON=$(start "$M")
trap 'kill $(cat $T/none.pid) $(cat $T/$M.pid) 2>/dev/null; rm -rf $T' EXIT
uptime
for rep in $(seq "$R"); do
  for c in 1 4 16; do
    n=$((c < 4 ? 6 : 2 * c))
    for side in off on; do
      url=$([ $side = off ] && echo "$OFF" || echo "$ON")
      "$B/brisk" bench-serve --url "$url" -c $c -n $n --prompt-len 128 --gen-len 128 --json \
        | python3 -c "import json,sys; d=json.load(sys.stdin); print('$side', $c, d['output_tokens_per_s'])" >> "$T/rows"
    done
  done
done
uptime
python3 - "$T/rows" "$M" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
print(f"| concurrency | off tok/s (median) | {sys.argv[2]} tok/s (median) | speedup |\n|---:|---:|---:|---:|")
for c in ("1", "4", "16"):
    off = st.median(float(r[2]) for r in rows if r[0] == "off" and r[1] == c)
    on = st.median(float(r[2]) for r in rows if r[0] == "on" and r[1] == c)
    print(f"| {c} | {off:.1f} | {on:.1f} | {on / off:.2f}x |")
PY
