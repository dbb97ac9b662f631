#!/usr/bin/env bash
# The KV-compression frontier (issue 6): quality against KV memory for every --kv-type and
# --kv-evict policy, written to docs/results/kv/: rows.jsonl (one `brisk eval --json` row
# per line), table.md and frontier.png (gnuplot).
#   quality:   brisk-tiny, context 2048, KLD/ppl on dev.txt (WINDOWS windows of 2048)
#   calibrate: the per-layer plan of brisk-small at 25% of the f16 cache (brisk calibrate,
#              one window of 1024 tokens of its dev.txt) -> $OUT/brisk-small-0.25.plan
#   retrieval: passkey on brisk-small (brisk-tiny cannot retrieve a passkey even with the
#              exact cache; see docs/benchmarks.md), context 2048, 120 prompts per row
#              (lengths 256/512/1024 x 5 depths x 8 trials), every row on the same prompts
#              so rows compare prompt by prompt (outcomes); the 25%-memory rows: f16 with
#              each policy at 0.25, cheaper codecs keeping more, and the plan
#   planquality: brisk-small KLD at 25% of f16 memory, plan against the uniform settings, on
#              held-out text (the last 300 kB of dev.txt; calibration read its first 1024
#              tokens), context 2048, 2 windows, chunks of 128
# Usage: BRISK=build/brisk bench/kv-frontier.sh [quality|calibrate|retrieval|planquality|plot]...
#        (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
BRISK=${BRISK:-build/brisk}
MODELS=${MODELS:-/work/shared/models}
TINY=${TINY:-$MODELS/brisk-tiny/brisk-tiny-f16.gguf}
SMALL=${SMALL:-$MODELS/brisk-small}
DEV=${DEV:-$MODELS/brisk-tiny/dev.txt}
WINDOWS=${WINDOWS:-8}
OUT=docs/results/kv
CODECS=(f32 f16 int8 int4 int4r kivi4 nsn2)
PLAN=$OUT/brisk-small-0.25.plan
EVICTS=(streaming:0.25 snapkv:0.25 tova:0.25 h2o:0.25)
mkdir -p "$OUT"
steps=("$@"); [ ${#steps[@]} -eq 0 ] && steps=(quality calibrate retrieval plot)

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

calibrate() {
  "$BRISK" calibrate -m "$SMALL" -f "$MODELS/brisk-small/dev.txt" -c 1024 -b 128 --budget 0.25 -o "$PLAN" --json > "$OUT/calibration-small.json"
}

planquality() {
  tail -c 300000 "$MODELS/brisk-small/dev.txt" > /tmp/brisk-heldout.txt
  : > "$OUT/plan-quality.jsonl"
  local row=("$BRISK" eval -m "$SMALL" --task kld -f /tmp/brisk-heldout.txt -c 2048 --windows 2 -b 128 --json)
  "${row[@]}" --kv-type f16 >> "$OUT/plan-quality.jsonl"
  for e in "${EVICTS[@]}"; do "${row[@]}" --kv-type f16 --kv-evict "$e" >> "$OUT/plan-quality.jsonl"; done
  "${row[@]}" --kv-type int8 --kv-evict snapkv:0.47 >> "$OUT/plan-quality.jsonl"
  "${row[@]}" --kv-type int4r --kv-evict snapkv:0.8 >> "$OUT/plan-quality.jsonl"
  "${row[@]}" --kv-evict "plan:$PLAN" >> "$OUT/plan-quality.jsonl"
}

retrieval() {
  : > "$OUT/retrieval.jsonl"
  local row=("$BRISK" eval -m "$SMALL" --task passkey -c 2048 --lengths 256,512,1024
             --depths 0,0.25,0.5,0.75,1 --trials 8 --json)
  for t in f16 int8 int4 int4r kivi4; do "${row[@]}" --kv-type "$t" >> "$OUT/retrieval.jsonl"; done
  for e in "${EVICTS[@]}"; do "${row[@]}" --kv-type f16 --kv-evict "$e" >> "$OUT/retrieval.jsonl"; done
  # uniform settings at the same 25% of f16 memory: int8 keeping 47%, int4r keeping 80%
  "${row[@]}" --kv-type int8 --kv-evict snapkv:0.47 >> "$OUT/retrieval.jsonl"
  "${row[@]}" --kv-type int4r --kv-evict snapkv:0.8 >> "$OUT/retrieval.jsonl"
  "${row[@]}" --kv-evict "plan:$PLAN" >> "$OUT/retrieval.jsonl"
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
  # brisk-small at 25% of f16 memory: the plan against uniform settings (planquality)
  if [ -s "$OUT/plan-quality.jsonl" ]; then
    jq -r 'select(.memory_vs_f16 < 0.3) | [(.method | sub("plan:.*"; "per-layer plan")), .memory_vs_f16, .kld] | @tsv' "$OUT/plan-quality.jsonl" > "$OUT/plan-frontier.tsv"
    gnuplot <<GP
set terminal pngcairo size 900,600
set output "$OUT/plan-frontier.png"
set title "brisk-small, context 2048, held-out text: KLD from the exact cache, all at 25% of f16 KV memory"
set ylabel "mean KLD per token (nats, log scale)"
set logscale y
set grid ytics
set style fill solid 0.6
set boxwidth 0.6
set xtics rotate by -25 font ",9"
set bmargin 8
set datafile separator "\t"
set key off
plot "$OUT/plan-frontier.tsv" using 0:3:xtic(1) with boxes, \
     "" using 0:3:(sprintf("%.4f", \$3)) with labels offset 0,1 font ",9"
GP
  fi
  {
    echo "| method | task | KV bytes/token | vs f16 | kept | ppl | Δppl % | KLD | top-1 agree | accuracy | tokens/s |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    cat "$OUT"/quality.jsonl 2>/dev/null | jq -r '
      def f(x; n): if x == null then "-" else (x * pow(10; n) | round / pow(10; n) | tostring) end;
      "| \(.method) | \(.task) | \(.kv_bytes_per_token) | \(f(.compression_vs_f16; 2))x | \(f(.kept_share // (if (.method | test(":0\\.")) then (.method | capture(":(?<b>0\\.[0-9]+)").b | tonumber) elif (.method | test("refree")) then null else 1 end); 3)) | \(f(.ppl; 3)) | \(f(.dppl_pct; 2)) | \(f(.kld; 5)) | \(f(.top1_agree; 3)) | \(f(.accuracy; 3)) | \(f(.tokens_per_s; 0)) |"'
  } > "$OUT/table.md"
  # Retrieval, prompt by prompt against the first row (the f16 full cache): lost = prompts
  # the full cache retrieves and this row does not, gained = the reverse.
  {
    echo
    echo "| method (brisk-small passkey) | memory vs f16 | accuracy | of full's | lost | gained | accuracy at 256 / 512 / 1024 tokens | depth 0 / .25 / .5 / .75 / 1 |"
    echo "|---|---:|---:|---:|---:|---:|---|---|"
    jq -s -r '
      def outs: [.cells[].outcomes] | join("") | split("");
      def r(x): x * 1000 | round / 1000;
      def acc(f): [.cells[] | select(f)] | ((map(.correct) | add) / (map(.trials) | add)) | r(.);
      (.[0] | outs) as $ref | .[0].accuracy as $full |
      .[] | outs as $o |
      ([range(0; $o | length) | select($ref[.] == "1" and $o[.] == "0")] | length) as $lost |
      ([range(0; $o | length) | select($ref[.] == "0" and $o[.] == "1")] | length) as $gained |
      "| \(.method) | \(if .memory_vs_f16 == null then "-" else r(.memory_vs_f16) end) | \(r(.accuracy)) (\([.cells[].correct] | add)/\([.cells[].trials] | add)) | \(r(.accuracy / $full)) | \($lost) | \($gained) | \(acc(.length == 256)) / \(acc(.length == 512)) / \(acc(.length == 1024)) | \(acc(.depth == 0)) / \(acc(.depth == 0.25)) / \(acc(.depth == 0.5)) / \(acc(.depth == 0.75)) / \(acc(.depth == 1)) |"' \
      "$OUT/retrieval.jsonl"
  } >> "$OUT/table.md"
  {
    echo
    echo "| method (brisk-small, held-out text) | memory vs f16 | kept (measured) | ppl | Δppl % | KLD | top-1 agree |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    jq -r 'def r(x; n): x * pow(10; n) | round / pow(10; n);
      "| \(.method) | \(r(.memory_vs_f16; 3)) | \(r(.kept_share; 3)) | \(r(.ppl; 3)) | \(r(.dppl_pct; 2)) | \(r(.kld; 5)) | \(r(.top1_agree; 3)) |"' \
      "$OUT/plan-quality.jsonl" 2>/dev/null
  } >> "$OUT/table.md"
  cat "$OUT/table.md"
}

for s in "${steps[@]}"; do "$s"; done
