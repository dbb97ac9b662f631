#!/usr/bin/env bash
# bench/run-all.sh [-r REPS] [-o OUT.md] [--quick]
# Regenerates the table of docs/benchmarks.md: brisk vs llama.cpp (node-llama-cpp 3.21.1,
# prebuilt CPU build) on the same GGUF files, alternating repetitions (bench/peer-llamacpp),
# tg128 at 1 and 2 threads and pp512 at 2 threads, on brisk-tiny Q8_0, random-weight
# Llama-3.2-1B-shape Q4_0/Q4_K/Q8_0 and Llama-3.1-8B-shape Q4_0 (made with `brisk synth`
# into $MODELS, default /tmp/brisk-bench-models, when missing: ~4 GB for the 1B files,
# ~4.5 GB for the 8B).
# Environment: BRISK (binary; default build-bench/brisk, else build/brisk), MODELS,
# MODELS_SET (space-separated subset of: tiny-q8_0 1b-q4_0 1b-q4_k 1b-q8_0 8b-q4_0),
# PP (prompt length, default 512), TG (generation length, default 128), TG_THREADS (thread
# counts of the tg rows, default "1 2"), PP_THREADS (thread count of the pp row, default 2).
# On a machine where other work runs, multi-threaded numbers measure the OS scheduler more
# than the kernels (llama.cpp's spinning barriers collapse when a thread is descheduled):
# check the load column and rerun on a quiet machine.
# Writes the markdown (machine, load, table) to stdout and to OUT.md if given; raw JSON of
# every run goes to $MODELS/results-<time>/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
reps=5
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -r) reps="$2"; shift 2 ;;
    -o) out="$2"; shift 2 ;;
    --quick) reps=2; shift ;;
    *) echo "usage: $0 [-r REPS] [-o OUT.md] [--quick]" >&2; exit 2 ;;
  esac
done
brisk="${BRISK:-}"
if [[ -z "$brisk" ]]; then
  for b in "$root/build-bench/brisk" "$root/build/brisk"; do [[ -x "$b" ]] && { brisk="$b"; break; }; done
fi
[[ -x "$brisk" ]] || { echo "run-all: no brisk binary (set BRISK)" >&2; exit 1; }
export BRISK="$brisk"
models="${MODELS:-/tmp/brisk-bench-models}"
set_="${MODELS_SET:-tiny-q8_0 1b-q4_0 1b-q4_k 1b-q8_0 8b-q4_0}"
pp="${PP:-512}"
tg="${TG:-128}"
tg_threads="${TG_THREADS:-1 2}"
pp_threads="${PP_THREADS:-2}"
mkdir -p "$models"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
raw="$models/results-$stamp"
mkdir -p "$raw"

model_path() {
  case "$1" in
    tiny-q8_0) echo "$root/models/brisk-tiny-q8_0.gguf" ;;
    1b-*) echo "$models/llama-3.2-1b-${1#1b-}.gguf" ;;
    8b-*) echo "$models/llama-3.1-8b-${1#8b-}.gguf" ;;
  esac
}
model_label() {
  case "$1" in
    tiny-q8_0) echo "brisk-tiny Q8_0" ;;
    1b-*) echo "1B-shape $(echo "${1#1b-}" | tr a-z A-Z)" ;;
    8b-*) echo "8B-shape $(echo "${1#8b-}" | tr a-z A-Z)" ;;
  esac
}
for m in $set_; do
  p="$(model_path "$m")"
  if [[ ! -f "$p" ]]; then
    case "$m" in
      1b-*) shape=llama-3.2-1b ;;
      8b-*) shape=llama-3.1-8b ;;
      *) echo "run-all: missing $p" >&2; exit 1 ;;
    esac
    echo "run-all: brisk synth --shape $shape --type ${m#*-} $p" >&2
    "$brisk" synth --shape "$shape" --type "${m#*-}" "$p" >&2
  fi
done

md="$(mktemp)"
{
  echo "Run $stamp: brisk binary $brisk (built $(date -u -r "$brisk" +%Y-%m-%dT%H:%MZ); source tree $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src apps 2>/dev/null || echo ', uncommitted changes in src/ or apps/')), node-llama-cpp 3.21.1 (llama.cpp prebuilt CPU), $reps alternating repetitions, medians."
  echo
  echo "Machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(free -g | awk '/^Mem:/{print $2}') GiB memory; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$brisk" bench --membw -t 1,2 | sed -n 's/^membw: /- read bandwidth: /p'
  echo
  echo "| model | test | threads | brisk t/s | llama.cpp t/s | brisk/llama.cpp | brisk roofline | llama.cpp roofline | load (1-min avg per round) |"
  echo "|---|---|---|---|---|---|---|---|---|"
} > "$md"
cat "$md"

row() {  # model-key threads p n
  local m="$1" t="$2" p="$3" n="$4" f
  f="$raw/$m-t$t-p$p-n$n.json"
  "$here/peer-llamacpp" -m "$(model_path "$m")" -t "$t" -p "$p" -n "$n" -r "$reps" --json > "$f"
  node -e '
    const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const [label, t] = [process.argv[2], process.argv[3]];
    const load = j.load.map((l) => l.split(" ")[0]).join(" ");
    const f = (x) => x.toFixed(x >= 100 ? 0 : x >= 10 ? 1 : 2);
    const pct = (x) => (100 * x).toFixed(0) + "%";
    for (const k of ["pp", "tg"]) {
      const x = j[k];
      if (!x) continue;
      const name = k === "pp" ? `pp${j.n_prompt}` : `tg${j.n_gen}`;
      const rb = k === "tg" ? pct(j.roofline.brisk_tg_share) : "", rl = k === "tg" ? pct(j.roofline.llamacpp_tg_share) : "";
      console.log(`| ${label} | ${name} | ${t} | ${f(x.brisk_tps)} | ${f(x.llamacpp_tps)} | **${x.ratio.toFixed(2)}** | ${rb} | ${rl} | ${load} |`);
    }' "$f" "$(model_label "$m")" "$t" | tee -a "$md"
}

for m in $set_; do
  pp_done=0
  for t in $tg_threads; do
    if [[ "$t" == "$pp_threads" ]]; then row "$m" "$t" "$pp" "$tg"; pp_done=1; else row "$m" "$t" 0 "$tg"; fi
  done
  [[ $pp_done == 1 ]] || row "$m" "$pp_threads" "$pp" 0
done
echo >> "$md"
echo "Raw JSON: $raw; load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$md"
[[ -n "$out" ]] && cp "$md" "$out"
rm -f "$md"
