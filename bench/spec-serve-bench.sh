#!/usr/bin/env bash
# brisk serve throughput with speculation off and on (the server-wide --spec default), at
# 1, 4 and 16 concurrent requests: one server per side on the same model, runs alternated
# between them (so machine noise hits all alike), median output tokens/s of REPS runs.
# bench-serve's requests: random-token prompts of 128 tokens, greedy, 128 tokens each.
# Usage: bench/spec-serve-bench.sh [BUILD_DIR] [REPS] [METHOD] [MODEL] [DRAFT]
# (DRAFT: the --draft model every server loads, for METHOD draft)
# SIDES overrides the servers: "label=serve options|label=serve options|..." (the first is
# the baseline), e.g. the MineDraft overlap against drafting in between, same 2 cores:
#   SIDES="off=--spec none -t 2|draft=--spec draft -t 2|overlap=--spec draft --spec-overlap -t 1"
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}; R=${2:-3}; M=${3:-lookup}; MODEL=${4:-models/brisk-tiny-q8_0.gguf}; DRAFT=${5:-}
SIDES=${SIDES:-"off=--spec none -t 2|$M=--spec $M -t 2"}
T=$(mktemp -d)
IFS='|' read -r -a sides <<< "$SIDES"
labels=(); urls=()
trap 'for f in $T/*.pid; do kill $(cat $f) 2>/dev/null; done; rm -rf $T' EXIT
for side in "${sides[@]}"; do
  label=${side%%=*}; args=${side#*=}
  # shellcheck disable=SC2086
  "$B/brisk" serve -m "$MODEL" --port 0 --parallel 16 $args ${DRAFT:+--draft "$DRAFT"} > "$T/$label.out" 2> "$T/$label.err" &
  echo $! > "$T/$label.pid"
  url=
  for _ in $(seq 100); do
    url=$(grep -o 'http://127.0.0.1:[0-9]*' "$T/$label.out" 2>/dev/null) && break
    sleep 0.2
  done
  [ -n "$url" ] || { echo "server $label ($args) did not start" >&2; cat "$T/$label.err" >&2; exit 1; }
  labels+=("$label"); urls+=("$url")
done
uptime
for rep in $(seq "$R"); do
  for c in 1 4 16; do
    n=$((c < 4 ? 6 : 2 * c))
    for i in "${!labels[@]}"; do
      "$B/brisk" bench-serve --url "${urls[$i]}" -c $c -n $n --prompt-len 128 --gen-len 128 --json \
        | python3 -c "import json,sys; d=json.load(sys.stdin); print('${labels[$i]}', $c, d['output_tokens_per_s'])" >> "$T/rows"
    done
  done
done
uptime
python3 - "$T/rows" "${labels[@]}" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
base, others = sys.argv[2], sys.argv[3:]
med = lambda s, c: st.median(float(r[2]) for r in rows if r[0] == s and r[1] == c)
head = f"| concurrency | {base} tok/s (median) |" + "".join(f" {o} tok/s (median) | {o} speedup |" for o in others)
print(head + "\n|---:|---:|" + "---:|---:|" * len(others))
for c in ("1", "4", "16"):
    b = med(base, c)
    print(f"| {c} | {b:.1f} |" + "".join(f" {med(o, c):.1f} | {med(o, c) / b:.2f}x |" for o in others))
PY
