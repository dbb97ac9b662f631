#!/usr/bin/env bash
# One device call: build the CUDA backend, run the GPU tests, benchmark the 8B shape.
#   bench/gpu/run.sh            (on the GPU machine, from the repository root; logs under $OUT)
# Writes $OUT/{build,test_cuda,sanitizer,bench}.log and $OUT/results.md (the table).
# Env: SKIP_BENCH=1 (tests only), TYPES="q4_0 q8_0 bf16", SANITIZE=0 to skip memcheck,
#      DECODE_ONLY=1 for batch-1 decode alone (with and without PDL, and without the graph),
#      PEER=1 to also run PyTorch + transformers (bench/gpu/peer_transformers.py) on the same
#      bf16 weights (written as an HF folder next to the bf16 GGUF) -> $OUT/peer.json,
#      KV=1 for batch-1 decode per --kv-type at long contexts on the q4_0 model -> $OUT/kv.md
#      (BENCH_KV_TYPES, BENCH_KV_CTX: see bench_gpu.cpp), MAIN=0 to skip the main table,
#      GEMV=0 to skip the GEMV microbenchmark.
set -uo pipefail
OUT=${OUT:-/tmp/brisk-gpu-out}
mkdir -p "$OUT"
TYPES=${TYPES:-"q4_0 q8_0 bf16"}
MODELS=${MODELS_DIR:-/tmp/brisk-8b}
BUILD=build-gpu
t0=$(date +%s)
stamp() { echo "[run.sh $(( $(date +%s) - t0 ))s] $*"; }

nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv

stamp "configure + build"
# The reduced build of bench/gpu/CMakeLists.txt: the GPU machine's image lacks some of the
# full build's dev packages (PCRE2, xxhash, cpp-httplib), and it builds faster.
{ cmake -S bench/gpu -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release &&
  ninja -C $BUILD -j16 test_cuda bench_gpu brisk; } > "$OUT/build.log" 2>&1
[ -x $BUILD/test_cuda ] || { tail -40 "$OUT/build.log"; exit 1; }
grep -E "(kernels/cuda|model/cuda|tests/cuda|bench/gpu).*warning" "$OUT/build.log" | head -20

# The 8B-shape models are written in the background while the tests run (CPU vs GPU).
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  mkdir -p "$MODELS"
  ( for t in $TYPES; do
      hf=(); [ "$t" = bf16 ] && [ "${PEER:-0}" = 1 ] && hf=(--hf-out "$MODELS/8b-hf")
      [ -f "$MODELS/8b-$t.gguf" ] || $BUILD/brisk synth --shape llama-3.1-8b --type "$t" "$MODELS/8b-$t.gguf" "${hf[@]}"
    done ) > /tmp/synth.log 2>&1 &
  SYNTH=$!
fi

stamp "GEMV microbenchmark (GEMV_NOPDL=1: also without PDL)"
[ "${GEMV:-1}" = 1 ] && { timeout 60 $BUILD/bench_gpu --gemv "$OUT/gemv.md" > "$OUT/gemv.log" 2>&1; cat "$OUT/gemv.md"; }
if [ "${GEMV_NOPDL:-0}" = 1 ]; then
  BRISK_CUDA_PDL=0 timeout 60 $BUILD/bench_gpu --gemv /tmp/gemv-nopdl.md >> "$OUT/gemv.log" 2>&1
  cat /tmp/gemv-nopdl.md >> "$OUT/gemv.md"; tail -14 /tmp/gemv-nopdl.md
fi

stamp "GPU tests"
# (the whole log first: a pipe into head would end the test binary early)
timeout 300 $BUILD/test_cuda > "$OUT/test_cuda.log" 2>&1
echo "test_cuda exit $?"
grep -E "^\[cuda|OK|FAILED|PASSED|SKIPPED|Failure|error" "$OUT/test_cuda.log" | grep -v "cuda matmul" | tail -40

if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  stamp "compute-sanitizer memcheck"
  timeout 150 compute-sanitizer --tool memcheck --leak-check no $BUILD/test_cuda \
    --gtest_filter='CudaKernels.*:CudaKvCodec.*:CudaModel.KvCodecsMatchCpu:CudaModel.RaggedBatchesMatchCpu:CudaModel.GraphReplayMatchesEager:Arch/CudaArch.*' \
    > "$OUT/sanitizer.log" 2>&1
  echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1)"
fi

if [ "${SKIP_BENCH:-0}" != 1 ]; then
  stamp "waiting for synth"
  wait $SYNTH; tail -5 /tmp/synth.log
  args=()
  for t in $TYPES; do [ -f "$MODELS/8b-$t.gguf" ] && args+=("llama-3.1-8b-shape-$t=$MODELS/8b-$t.gguf"); done
  if [ "${KV:-0}" = 1 ] && [ -f "$MODELS/8b-q4_0.gguf" ]; then
    stamp "decode per --kv-type at long contexts (q4_0)"
    timeout 240 $BUILD/bench_gpu --kv "$OUT/kv.md" "$MODELS/8b-q4_0.gguf" 2>&1 | tee "$OUT/kv.log" | tail -12
  fi
  if [ "${MAIN:-1}" = 0 ]; then
    :
  elif [ "${DECODE_ONLY:-0}" = 1 ]; then
    stamp "decode only: PDL on, PDL off, no graph"
    { BENCH_DECODE_ONLY=1 timeout 120 $BUILD/bench_gpu /tmp/d.md "${args[@]}"
      BRISK_CUDA_PDL=0 BENCH_DECODE_ONLY=1 timeout 120 $BUILD/bench_gpu /tmp/d.md "${args[@]/=/-nopdl=}"
      BRISK_CUDA_GRAPH=0 BENCH_DECODE_ONLY=1 timeout 120 $BUILD/bench_gpu /tmp/d.md "${args[@]/=/-nograph=}"
    } 2>&1 | grep "decode only" | tee "$OUT/bench.log"
  else
    stamp "bench"
    timeout 280 $BUILD/bench_gpu "$OUT/results.md" "${args[@]}" 2>&1 | tee "$OUT/bench.log" | tail -30
  fi
  # Launch overhead: the same decode without the CUDA graph; and per-kernel times of one
  # decode step (ncu, first layers of a graph replay) for the next optimization round.
  if [ "${PEER:-0}" = 1 ] && [ -d "$MODELS/8b-hf" ]; then
    stamp "peer: transformers on the same bf16 weights"
    timeout 400 python3 bench/gpu/peer_transformers.py "$MODELS/8b-hf" "$OUT/peer.json" > "$OUT/peer.log" 2>&1
    echo "peer exit $?"; tail -12 "$OUT/peer.log"
  fi
  q4="$MODELS/8b-q4_0.gguf"
  if [ -f "$q4" ] && [ "${DECODE_ONLY:-0}" != 1 ] && [ "${MAIN:-1}" != 0 ]; then
    stamp "decode without CUDA graph"
    BRISK_CUDA_GRAPH=0 BENCH_DECODE_ONLY=1 timeout 60 $BUILD/bench_gpu /tmp/eager.md "q4_0-eager=$q4" 2>&1 | grep "decode only" | tee -a "$OUT/bench.log"
  fi
  if [ -f "$q4" ] && [ "${MAIN:-1}" != 0 ]; then
    if command -v ncu >/dev/null; then
      stamp "ncu: kernel times of a decode step (q4_0)"
      BENCH_DECODE_ONLY=1 timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
        -k 'regex:gemv|attn|qkv_post|add_rmsnorm|swiglu|quantize|embed|gather' --launch-skip 140 --launch-count 60 \
        $BUILD/bench_gpu /tmp/ncu.md "q4_0=$q4" > /tmp/ncu.log 2>&1
      grep -E "^  [a-z_].*\(|gpu__time_duration" /tmp/ncu.log | sed 's/(int64_t.*//; s/(const .*//' > "$OUT/ncu_decode.txt"
      tail -5 /tmp/ncu.log; head -60 "$OUT/ncu_decode.txt"
    fi
  fi
fi
stamp "done"
