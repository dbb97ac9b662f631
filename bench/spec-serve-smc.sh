#!/usr/bin/env bash
# SMC-SD through brisk serve (per request: "speculative": {"method": "smc"}) against plain
# sampling on the same server, one request at a time (the engine runs SMC-SD requests one
# at a time anyway), alternated so machine noise hits both alike: prompt
# bench/spec-prompts/prose.txt, temperature 0.8 with the CLI's filters (top-k 40, top-p 0.95,
# min-p 0.05: as bench/spec-bench.sh; without them every candidates() call sorts the whole
# vocabulary), 128 tokens (ignore_eos), seeds 1..REPS;
# output tokens/s = completion tokens / request wall time, median of REPS.
# Usage: bench/spec-serve-smc.sh [BUILD_DIR] [REPS] [MODEL] [DRAFT] [PARTICLES] [K]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}; R=${2:-3}; MODEL=${3:-../shared/models/brisk-small}; DRAFT=${4:-models/brisk-tiny-q8_0.gguf}
N=${5:-2}; K=${6:-4}
T=$(mktemp -d)
"$B/brisk" serve -m "$MODEL" --draft "$DRAFT" --port 0 --parallel 4 -t 2 > "$T/out" 2> "$T/err" &
PID=$!
trap 'kill $PID 2>/dev/null; rm -rf $T' EXIT
URL=
for _ in $(seq 100); do
  URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$T/out" 2>/dev/null) && break
  sleep 0.2
done
[ -n "$URL" ] || { echo "server did not start" >&2; exit 1; }
uptime
python3 - "$URL" "$R" "$N" "$K" <<'PY'
import json, statistics as st, sys, time, urllib.request
url, reps, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
prompt = open("bench/spec-prompts/prose.txt").read()
def run(seed, spec):
    body = {"prompt": prompt, "max_tokens": 128, "temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
            "seed": seed, "ignore_eos": True}
    if spec: body["speculative"] = spec
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    t = time.perf_counter()
    r = json.load(urllib.request.urlopen(req))
    return r["usage"]["completion_tokens"] / (time.perf_counter() - t)
run(0, None)  # warm-up
plain, smc = [], []
for seed in range(1, reps + 1):
    plain.append(run(seed, None))
    smc.append(run(seed, {"method": "smc", "k": k, "particles": n}))
p, s = st.median(plain), st.median(smc)
print(f"| concurrency | sampled tok/s (median) | smc (N {n}, k {k}) tok/s (median) | speedup |\n|---:|---:|---:|---:|")
print(f"| 1 | {p:.1f} | {s:.1f} | {s / p:.2f}x |")
PY
uptime
