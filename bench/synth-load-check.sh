#!/usr/bin/env bash
# bench/synth-load-check.sh [DIR]: writes `brisk synth` GGUFs of every shape and type
# (tiny: f16 bf16 q8_0 q4_0; llama-3.2-1b: f16 bf16 q8_0 q4_0 q4_k q6_k; llama-3.1-8b and qwen2.5-7b: q4_0)
# one at a time into DIR (default /tmp/brisk-synth-check), checks that llama.cpp
# (node-llama-cpp 3.21.1, prebuilt CPU) loads each and generates from it, and deletes it.
# Needs ~5 GB free in DIR. Prints one line per file; exit status 1 if any failed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
brisk="${BRISK:-$root/build-bench/brisk}"
dir="${1:-/tmp/brisk-synth-check}"
peer="$("$here/peer-llamacpp" --install-only)"
mkdir -p "$dir"
fail=0
check() {  # shape type
  local f="$dir/$1-$2.gguf"
  "$brisk" synth --shape "$1" --type "$2" "$f" 2>/dev/null
  if node "$here/llamacpp-load.mjs" "$peer" "$f"; then :; else fail=1; fi
  rm -f "$f"
}
for type in f16 bf16 q8_0 q4_0; do check tiny "$type"; done  # 384-wide rows: no k-quants
for type in f16 bf16 q8_0 q4_0 q4_k q6_k; do check llama-3.2-1b "$type"; done
check llama-3.1-8b q4_0
check qwen2.5-7b q4_0
exit $fail
