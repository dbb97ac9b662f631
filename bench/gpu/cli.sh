#!/usr/bin/env bash
# One device call: the full `brisk` (every command) built on the GPU machine with the
# carried .gpu-deps (bench/gpu/fetch_deps.sh), then the CLI on --device cuda:
#   brisk run (brisk-tiny q8_0 against the CPU's greedy text; the 8B q4_0 shape), brisk bench
#   -p 2048 -n 128, brisk serve + brisk bench-serve at 1 / 8 / 32 concurrent requests.
#   bench/gpu/cli.sh     (on the GPU machine, from the repository root; logs under $OUT)
# Env: SERVE_C="1 8 32" (concurrency levels), PEER=1 also writes the bf16 8B shape with its HF
# folder and runs `brisk bench --device cuda -p 2048 -n 0` and bench/gpu/peer_transformers.py
# on the same weights (prefill and decode, same call).
set -uo pipefail
OUT=${OUT:-/tmp/brisk-cli-out}
mkdir -p "$OUT" /tmp/brisk-8b
t0=$(date +%s)
stamp() { echo "[cli.sh $(( $(date +%s) - t0 ))s] $*"; }
D=$PWD/.gpu-deps
LIB=$D/usr/lib/x86_64-linux-gnu
[ -d "$LIB" ] || { echo "no .gpu-deps: run bench/gpu/fetch_deps.sh here and carry .gpu-deps"; exit 2; }
ldd --version | head -1; grep PRETTY /etc/os-release
# pkg-config: the image's, else the carried pkgconf (its library beside it); either one sees
# only the carried .pc files, their paths under $D.
PKGC=$(command -v pkg-config || true)
if [ -z "$PKGC" ]; then
  PKGC=/tmp/pkgconf-wrap
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$LIB" "$D/usr/bin/pkgconf" > $PKGC && chmod +x $PKGC
fi
export PKG_CONFIG_SYSROOT_DIR=$D PKG_CONFIG_LIBDIR=$LIB/pkgconfig:$D/usr/share/pkgconfig
stamp "configure + build the full brisk (pkg-config: $PKGC)"
{ cmake -S . -B build-full -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRISK_CUDA=ON -DPKG_CONFIG_EXECUTABLE=$PKGC \
    "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$LIB -Wl,-rpath,$LIB" && ninja -C build-full -j16 brisk; } > "$OUT/build_full.log" 2>&1
[ -x build-full/brisk ] || { tail -40 "$OUT/build_full.log"; exit 1; }
export LD_LIBRARY_PATH=$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=build-full/brisk
Q4=/tmp/brisk-8b/8b-q4_0.gguf BF=/tmp/brisk-8b/8b-bf16.gguf
( [ -f $Q4 ] || $B synth --shape llama-3.1-8b --type q4_0 $Q4
  if [ "${PEER:-0}" = 1 ]; then [ -f $BF ] || $B synth --shape llama-3.1-8b --type bf16 $BF --hf-out /tmp/brisk-8b/8b-hf; fi
) > /tmp/synth.log 2>&1 &
SYNTH=$!

stamp "brisk run: brisk-tiny q8_0, greedy, GPU vs CPU"
P="Once upon a time, in a small village by the sea,"
for dev in cuda cpu; do
  timeout 60 $B run --device $dev -m models/brisk-tiny-q8_0.gguf -p "$P" -n 48 --temp 0 --ignore-eos > "$OUT/run_tiny_$dev.txt" 2> "$OUT/run_tiny_$dev.err"
  echo "$dev exit $?: $(head -c 400 "$OUT/run_tiny_$dev.txt" | tr '\n' ' ')"; tail -3 "$OUT/run_tiny_$dev.err"
done
cmp -s "$OUT/run_tiny_cuda.txt" "$OUT/run_tiny_cpu.txt" && echo "tiny: GPU text = CPU text" || echo "tiny: GPU text differs from CPU text"
wait $SYNTH; tail -3 /tmp/synth.log
stamp "brisk run --device cuda, 8B q4_0 shape (random weights: the text means nothing)"
timeout 90 $B run --device cuda -m $Q4 -p "$P" -n 128 --temp 0 --ignore-eos > "$OUT/run_8b.txt" 2> "$OUT/run_8b.err"
echo "exit $?"; tail -4 "$OUT/run_8b.err"
stamp "brisk bench --device cuda -p 2048 -n 128 (8B q4_0)"
timeout 120 $B bench --device cuda -m $Q4 -p 2048 -n 128 -r 3 --bw 4228 --json > "$OUT/bench_q4_0.json" 2> "$OUT/bench_q4_0.err"
echo "exit $?"; python3 -c "
import json; d=json.load(open('$OUT/bench_q4_0.json')); print('device', d['device'])
for r in d['rows']: print(r['test'], round(r['tps_median'],1), 'tok/s', r.get('roofline_share',''))" || tail -5 "$OUT/bench_q4_0.err"

stamp "brisk serve --device cuda + bench-serve (8B q4_0)"
NC=$(echo ${SERVE_C:-1 8 32} | tr ' ' '\n' | sort -n | tail -1)
$B serve --device cuda -m $Q4 --port 8091 --parallel $NC --ctx 512 > "$OUT/serve.log" 2>&1 &
SRV=$!
health() { python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8091/health', timeout=2).read().decode())" 2> /dev/null; }
for i in $(seq 120); do health > /dev/null && break; sleep 1; done
health
for c in ${SERVE_C:-1 8 32}; do
  n=$(( c < 8 ? 8 : 2 * c ))
  timeout 120 $B bench-serve --url http://127.0.0.1:8091 -c $c -n $n --prompt-len 128 --gen-len 128 --json > "$OUT/bench_serve_c$c.json" 2>&1
  echo "c=$c exit $?: $(head -c 700 "$OUT/bench_serve_c$c.json")"
done
kill $SRV; wait $SRV 2> /dev/null
tail -3 "$OUT/serve.log"

if [ "${PEER:-0}" = 1 ] && [ -f $BF ]; then
  stamp "bf16: brisk bench --device cuda -p 2048 -n 0, then the peer"
  timeout 120 $B bench --device cuda -m $BF -p 2048 -n 0 -r 3 --json > "$OUT/bench_bf16.json" 2> "$OUT/bench_bf16.err"
  python3 -c "
import json; d=json.load(open('$OUT/bench_bf16.json'))
for r in d['rows']: print('brisk bf16', r['test'], round(r['tps_median']), 'tok/s', [round(x) for x in r['samples']])"
  timeout 300 python3 bench/gpu/peer_transformers.py /tmp/brisk-8b/8b-hf "$OUT/peer.json" > "$OUT/peer.log" 2>&1
  echo "peer exit $?"; tail -6 "$OUT/peer.log"
fi
stamp done
