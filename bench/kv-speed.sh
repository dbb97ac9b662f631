#!/usr/bin/env bash
# Decode speed and KV memory of every --kv-type on the Llama-3.2-1B shape (issue 6):
#   - tg16 at 2048 and 8192 tokens of context, median of REPS, cache filled with random
#     K/V rows (--kv-fill random: a decode step reads the same bytes whatever the values)
#   - KV bytes per token measured from a real cache, and the longest context that fits
#     KV_GIB GiB of KV memory
# Writes docs/results/kv/speed-1b.jsonl and prints a table.
# Usage: BRISK=build/brisk [CODECS="f16 kivi4"] [SPEED=out.jsonl] bench/kv-speed.sh
#        (makes /tmp/l1b.gguf with brisk synth if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
BRISK=${BRISK:-build/brisk}
M=${M:-/tmp/l1b.gguf}
REPS=${REPS:-3}
KV_GIB=${KV_GIB:-1}
OUT=docs/results/kv
mkdir -p "$OUT"
[ -f "$M" ] || "$BRISK" synth --shape llama-3.2-1b --type q4_0 "$M"
SPEED=${SPEED:-$OUT/speed-1b.jsonl}
: > "$SPEED"
for t in ${CODECS:-f32 f16 int8 int4 int4r kivi4 nsn2}; do
  bpt=$("$BRISK" eval -m "$M" --kv-type "$t" --task copy -c 16 --trials 1 --json | jq .kv_bytes_per_token)
  "$BRISK" bench -m "$M" --kv-type "$t" --kv-fill random -p 0 -n 16 -d 2048,8192 -r "$REPS" --bw 1 --json | tail -1 |
    jq -c --argjson bpt "$bpt" --argjson gib "$KV_GIB" \
      '{kv_type, kv_bytes_per_token: $bpt, max_ctx_in_kv_mem: (($gib * 1073741824) / $bpt | floor),
        tg: [.rows[] | {depth: .depth, tps: .tps_median, min: .tps_min, max: .tps_max}]}' >> "$SPEED"
done
echo "| kv-type | KV bytes/token | context in ${KV_GIB} GiB | tg t/s @2048 | tg t/s @8192 |"
echo "|---|---:|---:|---:|---:|"
jq -r '"| \(.kv_type) | \(.kv_bytes_per_token) | \(.max_ctx_in_kv_mem) | \(.tg[0].tps * 100 | round / 100) | \(.tg[1].tps * 100 | round / 100) |"' "$SPEED"
