#!/usr/bin/env bash
# A/B of two builds in one device call: A = this tree, B = a copy with PATCH applied.
#   bench/gpu/ab.sh PATCH [ROUNDS]   (on the GPU machine, from the repository root)
# Builds both (the reduced build of bench/gpu/CMakeLists.txt), runs B's GPU tests, writes the
# 8B shapes, then alternates runs A, B, A, B, ... (ROUNDS each, default 3) so that drift of
# the machine hits both alike. Logs under $OUT: ab.log, test_cuda_b.log.
# Env: MODE=decode (default: batch-1 decode of TYPES, default q4_0) or MODE=prefill (prefill
# tokens/s at LENS="2048 8192" of each of TYPES="q4_0 bf16"); B_ENVS="V=1,W=2 V=0": B runs once
# per entry, under those environment variables (label B[V:1,W:2]); SANITIZE_B="gtest filter" also
# runs those tests of B under compute-sanitizer memcheck; PEER=1 (with bf16 in TYPES) writes the
# bf16 shape's HF folder too and runs transformers on it after the A/B runs ($OUT/peer.json).
set -uo pipefail
OUT=${OUT:-/tmp/brisk-ab-out}
PATCH=$1
ROUNDS=${2:-3}
MODE=${MODE:-decode}
if [ "$MODE" = decode ]; then TYPES=${TYPES:-q4_0}; else TYPES=${TYPES:-"q4_0 bf16"}; fi
B_ENVS=${B_ENVS:-}
LENS=${LENS:-"2048 8192"}
mkdir -p "$OUT" /tmp/brisk-8b
rm -rf /tmp/ab-b && mkdir /tmp/ab-b
tar --exclude=./build-gpu --exclude=./build --exclude=./.git -cf - . | tar -xf - -C /tmp/ab-b
(cd /tmp/ab-b && patch -p1 -s < "$OLDPWD/$PATCH") || { echo "patch failed"; exit 3; }
build() {
  cmake -S "$1/bench/gpu" -B "$1/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null &&
    ninja -C "$1/build-gpu" -j8 "${@:2}" > "$1/build.log" 2>&1 || { tail -30 "$1/build.log"; exit 1; }
}
build . bench_gpu brisk &
build /tmp/ab-b bench_gpu test_cuda &
wait
( for t in $TYPES; do
    m=/tmp/brisk-8b/8b-$t.gguf
    hf=(); [ "$t" = bf16 ] && [ "${PEER:-0}" = 1 ] && hf=(--hf-out /tmp/brisk-8b/8b-hf)
    [ -f $m ] || ./build-gpu/brisk synth --shape llama-3.1-8b --type "$t" $m "${hf[@]}" > /dev/null
  done ) &
SYNTH=$!
timeout 300 /tmp/ab-b/build-gpu/test_cuda > "$OUT/test_cuda_b.log" 2>&1
echo "B: test_cuda exit $? ($(grep -E '^\[  (PASSED|FAILED)' "$OUT/test_cuda_b.log" | tr '\n' ' '))"
grep -E "^\[cuda prefill|FAILED|Failure" "$OUT/test_cuda_b.log" | head -40
if [ -n "${SANITIZE_B:-}" ] && command -v compute-sanitizer > /dev/null; then
  timeout 150 compute-sanitizer --tool memcheck --leak-check no /tmp/ab-b/build-gpu/test_cuda \
    --gtest_filter="$SANITIZE_B" > "$OUT/sanitizer_b.log" 2>&1
  echo "B: memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer_b.log" | tail -1)"
fi
wait $SYNTH
for r in $(seq "$ROUNDS"); do
  for t in $TYPES; do
    m=/tmp/brisk-8b/8b-$t.gguf
    for v in A ${B_ENVS:-B}; do
      bin=/tmp/ab-b/build-gpu/bench_gpu vars=()
      [ $v = A ] && bin=./build-gpu/bench_gpu
      [ $v != A ] && [ -n "$B_ENVS" ] && IFS=, read -ra vars <<< "$v" && v="B[${v//=/:}]"
      if [ "$MODE" = prefill ]; then
        env "${vars[@]}" BENCH_PREFILL_ONLY="$LENS" timeout 120 $bin /tmp/ab.md "$v-$t=$m" 2>&1 | grep "prefill only"
      else
        env "${vars[@]}" BENCH_DECODE_ONLY=1 timeout 60 $bin /tmp/ab.md "$v-$t=$m" 2>&1 | grep "decode only"
      fi
    done
  done
done | tee "$OUT/ab.log"
if [ "${PEER:-0}" = 1 ] && [ -d /tmp/brisk-8b/8b-hf ]; then
  timeout 300 python3 bench/gpu/peer_transformers.py /tmp/brisk-8b/8b-hf "$OUT/peer.json" > "$OUT/peer.log" 2>&1
  echo "peer exit $?"; tail -7 "$OUT/peer.log"
fi
