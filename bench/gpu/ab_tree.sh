#!/usr/bin/env bash
# A/B (and C) of patches in one device call, built in one tree: A = this tree, B = this tree +
# $PATCH, C = this tree + $PATCH_C (both patches against A). B and C rebuild only the files
# their patch touches in A's build dir (~30 s each instead of a second full build, ab.sh's way).
#   PATCH=p.patch [PATCH_C=c.patch] bench/gpu/ab_tree.sh   (on the GPU machine, repository root)
# Env: TESTS_A=1 runs A's GPU tests, TESTS_B=1 B's (and C's when PATCH_C is set), each under
# compute-sanitizer memcheck too with the gtest filter SAN_B; VARIANTS: B's runs, ';'-separated,
# each "ENV=V,ENV=V" or "-" for none; TYPES (default "q4_0 q8_0 bf16"), ROUNDS (default 2) of
# batch-1 decode-only runs alternated A, B..., C; FULL_TYPES="q4_0": bench_gpu's full table
# (prefill, batched decode) for A and B; NCU=1: ncu sections of four Q4_0 GEMVs of A's decode step.
# Logs under $OUT. Session 9 (bench/gpu/NOTES.md) made every call with it.
set -uo pipefail
OUT=${OUT:-/tmp/o}; mkdir -p "$OUT"
t0=$(date +%s); st() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
PATCH=${PATCH:?PATCH=file of the B patch}
TYPES=${TYPES:-"q4_0 q8_0 bf16"}
ROUNDS=${ROUNDS:-2}
# uncommitted edits of the sending checkout travel too: A = its HEAD (stashed in this copy only)
if [ -d .git ]; then git stash -q -- src tests apps 2>/dev/null; git log --oneline -1; git status --short | head; fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
st "build A"
cmake -S bench/gpu -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
ninja -C build-gpu -j16 test_cuda bench_gpu brisk > "$OUT/build_a.log" 2>&1 || { tail -30 "$OUT/build_a.log"; exit 1; }
cp build-gpu/bench_gpu /tmp/bench_A; cp build-gpu/test_cuda /tmp/test_A
mkdir -p /tmp/brisk-8b
( for t in $TYPES; do m=/tmp/brisk-8b/8b-$t.gguf
    [ -f $m ] || ./build-gpu/brisk synth --shape llama-3.1-8b --type "$t" $m > /dev/null; done ) &
SYNTH=$!
st "build B"
patch -p1 -s < "$PATCH" || { echo "patch failed"; exit 3; }
ninja -C build-gpu -j16 test_cuda bench_gpu > "$OUT/build_b.log" 2>&1 || { tail -30 "$OUT/build_b.log"; exit 1; }
grep -E "warning" "$OUT/build_b.log" | grep -E "kernels/cuda|model/cuda|tests/cuda" | head
cp build-gpu/bench_gpu /tmp/bench_B; cp build-gpu/test_cuda /tmp/test_B
if [ -n "${PATCH_C:-}" ]; then
  st "build C"
  { patch -p1 -R -s < "$PATCH" && patch -p1 -s < "$PATCH_C"; } || { echo "patch C failed"; exit 3; }
  ninja -C build-gpu -j16 test_cuda bench_gpu > "$OUT/build_c.log" 2>&1 || { tail -30 "$OUT/build_c.log"; exit 1; }
  cp build-gpu/bench_gpu /tmp/bench_C; cp build-gpu/test_cuda /tmp/test_C
fi
# tests LABEL (a/b/c): the GPU tests of /tmp/test_LABEL, then memcheck on SAN_B's filter if set
tests() {
  local L=$1 U=${1^^}
  st "tests $U"
  timeout 300 /tmp/test_$U > "$OUT/test_$L.log" 2>&1; echo "$U: test_cuda exit $? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test_$L.log" | tr '\n' ' ')"
  grep -E "FAILED|Failure" "$OUT/test_$L.log" | head -20
  if [ "$L" != a ] && [ -n "${SAN_B:-}" ]; then
    timeout 200 compute-sanitizer --tool memcheck --leak-check no /tmp/test_$U --gtest_filter="$SAN_B" > "$OUT/san_$L.log" 2>&1
    echo "$U: memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$OUT/san_$L.log" | tail -1)"
  fi
}
[ "${TESTS_A:-0}" = 1 ] && tests a
[ "${TESTS_B:-0}" = 1 ] && tests b
[ -n "${PATCH_C:-}" ] && tests c
st "synth"; wait $SYNTH
st "A/B"
IFS=';' read -ra VS <<< "${VARIANTS:--}"
for r in $(seq "$ROUNDS"); do
  for t in $TYPES; do
    m=/tmp/brisk-8b/8b-$t.gguf
    BENCH_DECODE_ONLY=1 timeout 60 /tmp/bench_A /tmp/ab.md "A-$t=$m" 2>&1 | grep "decode only"
    for v in "${VS[@]}"; do
      vars=(); [ "$v" != - ] && IFS=, read -ra vars <<< "$v"
      env "${vars[@]}" BENCH_DECODE_ONLY=1 timeout 60 /tmp/bench_B /tmp/ab.md "B[${v//=/:}]-$t=$m" 2>&1 | grep "decode only"
    done
    [ -n "${PATCH_C:-}" ] && BENCH_DECODE_ONLY=1 timeout 60 /tmp/bench_C /tmp/ab.md "C-$t=$m" 2>&1 | grep "decode only"
  done
done | tee "$OUT/ab.log"
for t in ${FULL_TYPES:-}; do
  st "full table $t: A then B"
  timeout 100 /tmp/bench_A /tmp/full_a.md "A-$t=/tmp/brisk-8b/8b-$t.gguf" > "$OUT/full_a_$t.log" 2>&1; grep -E "^\| A|Ceilings" /tmp/full_a.md
  timeout 100 /tmp/bench_B /tmp/full_b.md "B-$t=/tmp/brisk-8b/8b-$t.gguf" > "$OUT/full_b_$t.log" 2>&1; grep -E "^\| B|Ceilings" /tmp/full_b.md
done
if [ "${NCU:-0}" = 1 ] && command -v ncu > /dev/null; then
  st "ncu q4_0 GEMVs in the decode step"
  BENCH_DECODE_ONLY=1 timeout 150 ncu --clock-control none --cache-control none --section SpeedOfLight \
    --section WarpStateStats --section Occupancy --section LaunchStats -k regex:gemv_q --launch-skip 40 --launch-count 4 \
    /tmp/bench_A /tmp/n.md "q4_0=/tmp/brisk-8b/8b-q4_0.gguf" > "$OUT/ncu_q4.txt" 2>&1
  grep -E "gemv_q|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Issue Slots|Achieved Occ|Registers|Stall|Warp Cycles Per Issued|Eligible|Grid Size" "$OUT/ncu_q4.txt" | sed 's/(int64_t.*//' | head -80
fi
st done
