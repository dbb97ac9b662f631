#!/usr/bin/env bash
# Alternating A/B of brisk binaries on one `brisk bench` command line, for a host whose
# memory bandwidth moves within minutes: each round runs every binary once, in turn, and
# prints its result rows (the pp/tg rows, or the --spec table's rows), labelled by round and
# binary; the 2-thread read bandwidth is printed before and after. Take medians per binary.
#   bench/ab.sh ROUNDS "BIN_A BIN_B ..." BENCH_ARGS...
#   bench/ab.sh 5 "/tmp/brisk-a build/brisk" -m ../shared/models/brisk-small -p 5,16 -n 128 -r 5 -t 2
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,7p "$0"; exit 2; }
rounds=$1 bins=$2
shift 2
first=${bins%% *}
membw() { "$first" bench --membw 2>&1 | grep -o "[0-9.]* GB/s median" || true; }
echo "membw before: $(membw)"
for r in $(seq "$rounds"); do
  for b in $bins; do
    "$b" bench "$@" 2>&1 | grep -E '^\| *(pp|tg)[0-9]|^\| [a-z_]+ +\| +[0-9]+ \|' | sed "s|^|$r $b |"
  done
done
echo "membw after: $(membw)"
