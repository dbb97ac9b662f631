#!/usr/bin/env bash
# Speculative decoding vs plain decoding, same model, same run, interleaved (brisk bench
# --spec): per draft source and prompt kind the acceptance rate, mean accepted length
# (tokens per target pass), decode tokens/s (median of -r runs) and the speedup (median of
# per-run ratios to the plain run beside it). Greedy, 128 tokens, --ignore-eos semantics.
# Prompt kinds (bench/spec-prompts): prose (story continuation), code_edit (a code block
# to repeat with one rename: output repeats the context), long_qa (~1.5k-token document +
# question).
# Usage: bench/spec-bench.sh [BUILD_DIR] [REPS]   (figures go to docs/benchmarks.md)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}; R=${2:-5}
P=bench/spec-prompts
PROMPTS=$P/prose.txt,$P/code_edit.txt,$P/long_qa.txt
SMALL=${BRISK_SMALL:-../shared/models/brisk-small}
TINY=models/brisk-tiny-q8_0.gguf
uptime
echo "## retrieval drafters on brisk-tiny q8_0 (k = 8)"
"$B/brisk" bench -m "$TINY" --spec lookup,racer --spec-k 8 --spec-prompts "$PROMPTS" -n 128 -r "$R" -t 2
echo "## brisk-small (HF f16) target: draft model brisk-tiny q8_0 and the retrieval drafters (k = 4)"
"$B/brisk" bench -m "$SMALL" --spec draft,lookup,racer --draft "$TINY" --spec-k 4 --spec-prompts "$PROMPTS" -n 128 -r "$R" -t 2
echo "## brisk-small q8_0 GGUF target (brisk convert), draft model brisk-tiny q8_0 (k = 4)"
SMALL_Q8=${TMPDIR:-/tmp}/brisk-small-q8_0.gguf
[ -f "$SMALL_Q8" ] || "$B/brisk" convert "$SMALL" "$SMALL_Q8" --type q8_0
"$B/brisk" bench -m "$SMALL_Q8" --spec draft --draft "$TINY" --spec-k 4 --spec-prompts "$PROMPTS" -n 128 -r "$R" -t 2
echo "## SMC-SD (approximate) on brisk-small with brisk-tiny q8_0 particles vs plain sampling, T 0.8 (k = 4)"
for N in 2 4; do
  "$B/brisk" bench -m "$SMALL" --spec smc --draft "$TINY" --spec-k 4 --spec-particles $N --spec-temp 0.8 \
    --spec-prompts "$PROMPTS" -n 128 -r "$R" -t 2
done
uptime
