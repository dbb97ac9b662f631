#!/usr/bin/env bash
# SMC-SD's task accuracy against plain sampling (and greedy) on the passkey task: the same
# prompts (--seed) for every method, each prompt answered once per sampling seed stream
# (--sample-seed S: trial t samples with seed S + t), temperature TEMP with the CLI's
# default filters. Prints accuracy +- its standard error per method and the paired
# difference to plain sampling (same prompt, same seed stream) +- its standard error.
# Usage: bench/spec-smc-passkey.sh [BUILD_DIR] [MODEL] [DRAFT] [TRIALS] [STREAMS] [TEMP]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}; MODEL=${2:-../shared/models/brisk-small}; DRAFT=${3:-models/brisk-tiny-q8_0.gguf}
TRIALS=${4:-10}; STREAMS=${5:-2}; TEMP=${6:-0.8}
T=$(mktemp -d); trap 'rm -rf $T' EXIT
TASK=(--task passkey --lengths 64,128 --depths 0,0.25,0.5,0.75,1 --trials "$TRIALS" --seed 1 -t 2 --json)
run() {  # $1: label, then extra options
  local label=$1; shift
  for s in $(seq "$STREAMS"); do
    "$B/brisk" eval -m "$MODEL" "${TASK[@]}" --sample-seed $((1000 * s)) "$@" | sed "s/^/$label /" >> "$T/rows"
  done
}
uptime
"$B/brisk" eval -m "$MODEL" "${TASK[@]}" | sed "s/^/greedy /" >> "$T/rows"
run sampled --temp "$TEMP"
run smc2 --temp "$TEMP" --spec smc --draft "$DRAFT" --spec-k 4 --spec-particles 2
run smc4 --temp "$TEMP" --spec smc --draft "$DRAFT" --spec-k 4 --spec-particles 4
uptime
python3 - "$T/rows" <<'PY'
import json, math, sys
runs = {}
for line in open(sys.argv[1]):
    label, js = line.split(" ", 1)
    d = json.loads(js)
    runs.setdefault(label, []).append(("".join(c["outcomes"] for c in d["cells"]), d["tokens_per_s"]))
def outcomes(label):
    return [int(ch) for o, _ in runs[label] for ch in o]
base = outcomes("sampled")
print("| method | answers | correct | accuracy ± s.e. | vs sampled (paired) ± s.e. | prompt tok/s |\n|---|---:|---:|---:|---:|---:|")
for label in ("greedy", "sampled", "smc2", "smc4"):
    o = outcomes(label)
    n, k = len(o), sum(o)
    p = k / n
    diff = "-"
    if label not in ("greedy", "sampled"):
        d = [a - b for a, b in zip(o, base)]
        m = sum(d) / len(d)
        sd = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1))
        diff = f"{m:+.3f} ± {sd / math.sqrt(len(d)):.3f}"
    tps = sum(t for _, t in runs[label]) / len(runs[label])
    print(f"| {label} | {n} | {k} | {p:.3f} ± {math.sqrt(p * (1 - p) / n):.3f} | {diff} | {tps:.0f} |")
PY
