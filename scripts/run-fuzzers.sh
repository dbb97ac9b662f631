#!/usr/bin/env bash
# Runs every fuzz_* binary of a build for SECONDS each, from a seed corpus, and fails on
# the first crash (the crashing input is kept and its path printed).
#   scripts/run-fuzzers.sh BUILD_DIR [SECONDS]
# Seeds: fuzz/corpus/<fuzzer>/ when present; for fuzz_gguf also small GGUF files made
# here and the first 64 KiB of the bundled models; for fuzz_safetensors small files made here
# and the first 64 KiB of the fixtures' model.safetensors. New corpus entries go to a temp dir.
set -euo pipefail

build=${1:?usage: run-fuzzers.sh BUILD_DIR [SECONDS]}
seconds=${2:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/brisk-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Little-endian fields for hand-made GGUF seeds.
u32() { printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)))"; }
u64() { u32 $(($1 & 0xffffffff)); u32 $(($1 >> 32)); }
str() { u64 ${#1}; printf '%s' "$1"; }
zeros() { head -c "$1" /dev/zero; }

gguf_seeds() {
  local d=$1
  mkdir -p "$d"
  # header only, no tensors: a u32 key and a string array
  { printf GGUF; u32 3; u64 0; u64 2
    str general.alignment; u32 4; u32 32
    str tokenizer.ggml.tokens; u32 9; u32 8; u64 2; str a; str bc; } > "$d/meta.gguf"
  # one f32 [8, 2] tensor and one q8_0 [32] tensor, padded to 32
  { printf GGUF; u32 3; u64 2; u64 1
    str general.architecture; u32 8; str llama
    str w; u32 2; u64 8; u64 2; u32 0; u64 0
    str q; u32 1; u64 32; u32 8; u64 64; } > "$d/tensors.gguf"
  local n; n=$(stat -c %s "$d/tensors.gguf")
  zeros $(( (32 - n % 32) % 32 + 64 + 64 )) >> "$d/tensors.gguf"
  # version 2 with a nested array of u16
  { printf GGUF; u32 2; u64 0; u64 1
    str nest; u32 9; u32 9; u64 1; u32 2; u64 2; zeros 4; } > "$d/nested.gguf"
  for f in "$root/models/"*.gguf "$root/tests/fixtures/vocab/"*.gguf; do
    [ -f "$f" ] && head -c 65536 "$f" > "$d/head-$(basename "$f")"
  done
  return 0
}

# safetensors: an 8-byte little-endian header length, the JSON header, the data.
safetensors_seeds() {
  local d=$1 h
  mkdir -p "$d"
  h='{"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[4],"data_offsets":[16,24]},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}'
  { u64 ${#h}; printf '%s' "$h"; zeros 24; } > "$d/two.safetensors"
  h='{"x":{"dtype":"F16","shape":[1,1,1,3],"data_offsets":[0,6]}}'
  { u64 ${#h}; printf '%s' "$h"; zeros 6; } > "$d/f16.safetensors"
  for f in "$root/tests/fixtures/"*/model.safetensors; do
    [ -f "$f" ] && head -c 65536 "$f" > "$d/head-$(basename "$(dirname "$f")").safetensors"
  done
  return 0
}

shopt -s nullglob
fuzzers=("$build"/fuzz_*)
[ ${#fuzzers[@]} -gt 0 ] || { echo "run-fuzzers: no fuzz_* binaries in $build" >&2; exit 1; }

status=0
for bin in "${fuzzers[@]}"; do
  [ -x "$bin" ] && [ -f "$bin" ] || continue
  name=$(basename "$bin")
  corpus=$work/$name/corpus
  seeds=$work/$name/seeds
  mkdir -p "$corpus" "$seeds" "$work/$name/artifacts"
  [ -d "$root/fuzz/corpus/$name" ] && cp -r "$root/fuzz/corpus/$name/." "$seeds/"
  [ "$name" = fuzz_gguf ] && gguf_seeds "$seeds"
  [ "$name" = fuzz_safetensors ] && safetensors_seeds "$seeds"
  echo "== $name: ${seconds}s, $(ls "$seeds" | wc -l) seed files"
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$work/$name/artifacts/" \
       "$corpus" "$seeds" > "$work/$name/log" 2>&1; then
    tail -n 60 "$work/$name/log" >&2
    keep=$root/fuzz-crashes/$name
    mkdir -p "$keep"
    cp "$work/$name/artifacts/"* "$keep/" 2>/dev/null || true
    echo "!! $name failed; crashing inputs copied to $keep" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|Done" "$work/$name/log" | tail -n 2
  fi
done
exit $status
