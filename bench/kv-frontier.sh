#!/usr/bin/env bash
# The KV-compression frontier (issue 6): quality against KV memory for every --kv-type and
# --kv-evict policy, written to docs/results/kv/: rows.jsonl (one `brisk eval --json` row
# per line), table.md and frontier.png (gnuplot).
#   quality:   brisk-tiny, context 2048, KLD/ppl on dev.txt (WINDOWS windows of 2048)
#   retrieval: passkey on brisk-small (brisk-tiny cannot retrieve a passkey even with the
#              exact cache; see docs/benchmarks.md), context 2048
# Usage: BRISK=build/brisk bench/kv-frontier.sh [quality|retrieval|plot]...  (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
BRISK=${BRISK:-build/brisk}
MODELS=${MODELS:-/work/shared/models}
TINY=${TINY:-$MODELS/brisk-tiny/brisk-tiny-f16.gguf}
SMALL=${SMALL:-$MODELS/brisk-small}
DEV=${DEV:-$MODELS/brisk-tiny/dev.txt}
WINDOWS=${WINDOWS:-8}
OUT=docs/results/kv
CODECS=(f32 f16 int8 int4 int4r nsn2)
EVICTS=(streaming:0.25 snapkv:0.25 tova:0.25 h2o:0.25)
mkdir -p "$OUT"
steps=("$@"); [ ${#steps[@]} -eq 0 ] && steps=(quality retrieval plot)

quality() {
  : > "$OUT/quality.jsonl"
  for t in "${CODECS[@]}"; do
    "$BRISK" eval -m "$TINY" --kv-type "$t" --task kld -f "$DEV" -c 2048 --windows "$WINDOWS" --json >> "$OUT/quality.jsonl"
  done
  for e in "${EVICTS[@]}" refree; do
    for t in f32; do
      "$BRISK" eval -m "$TINY" --kv-type "$t" --kv-evict "$e" --task kld -f "$DEV" -c 2048 --windows "$WINDOWS" --json >> "$OUT/quality.jsonl"
    done
  done
}

retrieval() {
  : > "$OUT/retrieval.jsonl"
  local grid=(--lengths 512,1024,2032 --depths 0,0.25,0.5,0.75,1 --trials 2)
  for t in f32 int8 int4 int4r nsn2; do
    "$BRISK" eval -m "$SMALL" --kv-type "$t" --task passkey -c 2048 "${grid[@]}" --json >> "$OUT/retrieval.jsonl"
  done
  for e in "${EVICTS[@]}" refree; do
    "$BRISK" eval -m "$SMALL" --kv-evict "$e" --task passkey -c 2048 "${grid[@]}" --json >> "$OUT/retrieval.jsonl"
  done
}

plot() {
  # effective bytes per token: x the share eviction kept (measured kept_share, else the
  # fraction budget)
  jq -r '[.method, (.kv_bytes_per_token * (.kept_share // (if (.method | test(":0\\.")) then (.method | capture(":(?<b>0\\.[0-9]+)").b | tonumber) else 1 end))), .kld, .dppl_pct] | @tsv' \
    "$OUT/quality.jsonl" > "$OUT/frontier.tsv"
  gnuplot <<GP
set terminal pngcairo size 900,600
set output "$OUT/frontier.png"
set title "brisk-tiny, context 2048: KV memory vs KL divergence from the exact cache"
set xlabel "KV bytes per token (effective: x kept share for eviction)"
set ylabel "mean KLD per token (nats, log scale)"
set logscale y
set logscale x 2
set grid
set datafile separator "\t"
set key off
plot "$OUT/frontier.tsv" using 2:(\$3 > 0 ? \$3 : 1e-7) with points pt 7 ps 1.5, \
     "" using 2:(\$3 > 0 ? \$3 : 1e-7):1 with labels offset 0,1 font ",8"
GP
  {
    echo "| method | task | KV bytes/token | vs f16 | kept | ppl | Δppl % | KLD | top-1 agree | accuracy | tokens/s |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    cat "$OUT"/quality.jsonl "$OUT"/retrieval.jsonl 2>/dev/null | jq -r '
      def f(x; n): if x == null then "-" else (x * pow(10; n) | round / pow(10; n) | tostring) end;
      "| \(.method) | \(.task) | \(.kv_bytes_per_token) | \(f(.compression_vs_f16; 2))x | \(f(.kept_share // (if (.method | test(":0\\.")) then (.method | capture(":(?<b>0\\.[0-9]+)").b | tonumber) elif (.method | test("refree")) then null else 1 end); 3)) | \(f(.ppl; 3)) | \(f(.dppl_pct; 2)) | \(f(.kld; 5)) | \(f(.top1_agree; 3)) | \(f(.accuracy; 3)) | \(f(.tokens_per_s; 0)) |"'
  } > "$OUT/table.md"
  cat "$OUT/table.md"
}

for s in "${steps[@]}"; do "$s"; done
