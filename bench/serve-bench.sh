#!/usr/bin/env bash
# The serving measurements of issue 4 in one run on one machine (brisk-tiny by default):
#   1. generation throughput at 16 concurrent requests against 1 (prompt PROMPT_LEN, default
#      128, gen 128), alternated REPS times, medians: output tokens over wall time (prefill
#      included), and streams over TPOT p50 (decoding alone);
#   2. TTFT of 1,032-token prompts sharing a 1,000-token prefix, prefix cache lru vs off;
#   3. inter-token latency of 8 running streams while 1,500-token prompts arrive at 2/s
#      (p99 / p50), and the same with BASE's binary (e.g. an older build) if given;
#   4. prefix-cache policies under churn: a 240-block pool, one client sending 1,032-token
#      prompts with a shared 1,000-token prefix once a second while two others flood it with
#      unique 400-token prompts; prompt tokens the shared client found cached, lru vs gdsf.
# Usage: [BRISK=build/brisk] [MODEL=...] [REPS=3] [THREADS=2] [BASE=old/brisk] [PARTS=1234] [PROMPT_LEN=128]
#        [TPUT_ARGS='--stream-interval 4'] [TEMP=1] bench/serve-bench.sh   (TPUT_ARGS: more serve options for part 1;
#        TEMP: part 1's sampling temperature, default 0 = greedy)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BRISK:-build/brisk}; MODEL=${MODEL:-models/brisk-tiny-q8_0.gguf}; R=${REPS:-3}; TH=${THREADS:-2}; PARTS=${PARTS:-1234}
T=$(mktemp -d)
# Servers are started inside $(...), a subshell: their pids go to files, not a variable.
trap 'kill $(cat $T/*.pid 2>/dev/null) 2>/dev/null; rm -rf $T' EXIT
start() {  # $1: name, $2: binary, rest: serve options; prints the base URL
  local name=$1 bin=$2; shift 2
  "$bin" serve -m "$MODEL" --port 0 -t "$TH" "$@" > "$T/$name.out" 2> "$T/$name.err" &
  echo $! > "$T/$name.pid"
  for _ in $(seq 150); do
    grep -o 'http://127.0.0.1:[0-9]*' "$T/$name.out" 2>/dev/null && return
    sleep 0.2
  done
  echo "server $name did not start: $(cat "$T/$name.err")" >&2; exit 1
}
stop() { kill "$(cat "$T/$1.pid")" 2>/dev/null || true; }  # so idle servers do not share the cores
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
median() { python3 -c "import sys,statistics as s; print(round(s.median(float(x) for x in sys.stdin.read().split()), 2))"; }
echo "brisk $(git rev-parse --short HEAD), $MODEL, $TH threads, $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. Throughput, 16 concurrent vs 1.
if [[ $PARTS == *1* ]]; then
U=$(start tput "$B" --parallel 16 ${TPUT_ARGS:-})
PL=${PROMPT_LEN:-128}
for rep in $(seq "$R"); do
  for c in 1 16; do
    "$B" bench-serve --url "$U" -c $c -n $((c == 1 ? 6 : 48)) --prompt-len "$PL" --gen-len 128 \
      --temperature "${TEMP:-0}" --seed $((rep * 10 + c)) --json > "$T/run.json"
    field "d['output_tokens_per_s']" < "$T/run.json" >> "$T/tput$c"
    field "round($c * 1000 / d['tpot_ms']['p50'], 1)" < "$T/run.json" >> "$T/decode$c"
  done
done
stop tput
for m in tput decode; do
  one=$(median < "$T/${m}1"); sixteen=$(median < "$T/${m}16")
  what=$([ $m = tput ] && echo "output tokens / wall time" || echo "streams / TPOT p50")
  echo "| $what, prompt $PL: 1 request | $one tok/s (runs: $(tr '\n' ' ' < "$T/${m}1"))|"
  echo "| $what, prompt $PL: 16 concurrent | $sixteen tok/s (runs: $(tr '\n' ' ' < "$T/${m}16"))|"
  echo "| $what, prompt $PL: 16 vs 1 | $(python3 -c "print(round($sixteen / $one, 2))")x |"
done
fi

# 2. Shared-prefix TTFT, prefix cache on and off (fresh prompts each run: --seed).
if [[ $PARTS == *2* ]]; then
LRU=$(start lru "$B" --parallel 4 --ctx 2048 --prefix-cache lru)
OFF=$(start off "$B" --parallel 4 --ctx 2048 --prefix-cache off)
for rep in $(seq "$R"); do
  for side in lru off; do
    url=$([ $side = lru ] && echo "$LRU" || echo "$OFF")
    "$B" bench-serve --url "$url" -c 1 -n 20 --prompt-len 1032 --shared-prefix 1000 --gen-len 8 \
      --seed $((100 + rep)) --json | field "d['ttft_ms']['p50']" >> "$T/ttft_$side"
  done
done
stop lru; stop off
lru=$(median < "$T/ttft_lru"); off=$(median < "$T/ttft_off")
echo "| TTFT p50, 1,000-token shared prefix, lru | $lru ms |"
echo "| TTFT p50, same, no prefix cache | $off ms |"
echo "| lru / off | $(python3 -c "print(round($lru / $off, 2))")x |"
fi

# 3. ITL of 8 streams while long prompts arrive.
itl() {  # $1: name, $2: binary
  local u; u=$(start "itl_$1" "$2" --parallel 16 --ctx 2048)
  for rep in $(seq "$R"); do
    "$B" bench-serve --url "$u" -c 2 --duration 12 --prompt-len 1500 --gen-len 1 --rate 2 \
      --seed $((200 + rep)) --json > "$T/long_$1_$rep" &
    local bg=$!
    sleep 1
    "$B" bench-serve --url "$u" -c 8 -n 8 --prompt-len 32 --gen-len 256 --seed $((300 + rep)) --json |
      field "'%.2f %.2f' % (d['itl_ms']['p50'], d['itl_ms']['p99'])" >> "$T/itl_$1"
    wait $bg
  done
  stop "itl_$1"
  while read -r p50 p99; do echo "| ITL $1: p50 $p50 ms, p99 $p99 ms | p99/p50 $(python3 -c "print(round($p99 / $p50, 2))") |"; done < "$T/itl_$1"
}
if [[ $PARTS == *3* ]]; then
  itl brisk "$B"
  if [ -n "${BASE:-}" ]; then itl base "$BASE"; fi
fi
# 4. Prefix-cache policies under churn.
if [[ $PARTS == *4* ]]; then
  for pol in lru gdsf; do
    u=$(start "churn_$pol" "$B" --parallel 4 --ctx 2048 --kv-blocks 240 --prefix-cache $pol)
    "$B" bench-serve --url "$u" -c 2 --duration 20 --prompt-len 400 --gen-len 4 --seed 5 --json > "$T/flood_$pol" &
    sleep 1
    "$B" bench-serve --url "$u" -c 1 --duration 18 --rate 1 --prompt-len 1032 --shared-prefix 1000 \
      --gen-len 4 --seed 9 --json > "$T/shared_$pol"
    wait
    stop "churn_$pol"
    python3 - "$T/shared_$pol" "$T/flood_$pol" "$pol" <<'PY'
import json, sys
s, f = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
best = (s['ok'] - 1) * 992  # all but the first request can find the prefix's 62 full blocks
print(f"| {sys.argv[3]}: shared-prefix requests {s['ok']}, prompt tokens found cached {s['cached_prompt_tokens']} "
      f"of at most {best} ({100 * s['cached_prompt_tokens'] / best:.0f}%), TTFT p50 {s['ttft_ms']['p50']:.1f} ms; "
      f"flood requests {f['ok']} |")
PY
  done
fi
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
