#!/usr/bin/env bash
# A/B of batch-1 decode in one device call: A = this tree, B = a copy with PATCH applied.
#   bench/gpu/ab.sh PATCH [ROUNDS]   (on the GPU machine, from the repository root)
# Builds both (the reduced build of bench/gpu/CMakeLists.txt), runs B's GPU tests, writes the
# 8B q4_0 shape, then alternates decode-only runs A, B, A, B, ... (ROUNDS each, default 3) so
# that drift of the machine hits both alike. Logs under $OUT: ab.log, test_cuda_b.log.
set -uo pipefail
OUT=${OUT:-/tmp/brisk-ab-out}
PATCH=$1
ROUNDS=${2:-3}
MODEL=/tmp/brisk-8b/8b-q4_0.gguf
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
[ -f $MODEL ] || ./build-gpu/brisk synth --shape llama-3.1-8b --type q4_0 $MODEL > /dev/null &
SYNTH=$!
timeout 300 /tmp/ab-b/build-gpu/test_cuda > "$OUT/test_cuda_b.log" 2>&1
echo "B: test_cuda exit $? ($(grep -E '^\[  (PASSED|FAILED)' "$OUT/test_cuda_b.log" | tr '\n' ' '))"
wait $SYNTH
for r in $(seq "$ROUNDS"); do
  for v in A B; do
    bin=./build-gpu/bench_gpu
    [ $v = B ] && bin=/tmp/ab-b/build-gpu/bench_gpu
    BENCH_DECODE_ONLY=1 timeout 60 $bin /tmp/ab.md "$v=$MODEL" 2>&1 | grep "decode only"
  done
done | tee "$OUT/ab.log"
