#!/usr/bin/env bash
# Runs gtest binaries one after another, each split into SHARDS processes that run at the
# same time (gtest's GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX), and fails if any shard fails.
# For the sanitizer build, whose tests run ~10x slower than in Release: on 2 cores, two of
# test_engine's ASan tests at once took 0.64x the time of the two one after the other
# (71.5 s against 112).
#   scripts/run-sharded-tests.sh SHARDS GTEST_FILTER BINARY...
set -uo pipefail

shards=${1:?usage: run-sharded-tests.sh SHARDS GTEST_FILTER BINARY...}
filter=${2:?usage: run-sharded-tests.sh SHARDS GTEST_FILTER BINARY...}
shift 2
failed=0
for bin in "$@"; do
  pids=()
  for ((i = 0; i < shards; ++i)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$bin" --gtest_brief=1 "--gtest_filter=$filter" &
    pids+=($!)
  done
  for ((i = 0; i < shards; ++i)); do
    if ! wait "${pids[$i]}"; then
      echo "FAILED: $bin, shard $i of $shards" >&2
      failed=1
    fi
  done
done
exit $failed
