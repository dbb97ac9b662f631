#!/usr/bin/env bash
# Soak test of brisk serve (loopback only, bounded): a server on the bundled model, CLIENTS
# concurrent streaming clients (brisk bench-serve) for DURATION seconds. Passes when no
# request failed, every KV block is free afterwards and the server stops cleanly on SIGTERM.
# Prints the server's resident memory (VmRSS) at start, middle and end.
#   scripts/soak.sh [BUILD_DIR]     env: DURATION=120 CLIENTS=64 PARALLEL=16 PROMPT_LEN=64 GEN_LEN=64
set -euo pipefail
BUILD=${1:-${BUILD:-build}}
DURATION=${DURATION:-120}
CLIENTS=${CLIENTS:-64}
PARALLEL=${PARALLEL:-16}
PROMPT_LEN=${PROMPT_LEN:-64}
GEN_LEN=${GEN_LEN:-64}
BRISK=$BUILD/brisk
[ -x "$BRISK" ] || { echo "soak: $BRISK not found (build first: make build)" >&2; exit 2; }
TMP=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

"$BRISK" serve --host 127.0.0.1 --port 0 --parallel "$PARALLEL" --queue 256 >"$TMP/serve.out" 2>"$TMP/serve.err" &
SERVER_PID=$!
PORT=""
for _ in $(seq 600); do
  PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TMP/serve.out")
  [ -n "$PORT" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$TMP/serve.err" >&2; exit 1; }
  sleep 0.1
done
[ -n "$PORT" ] || { echo "soak: server did not start" >&2; exit 1; }
URL=http://127.0.0.1:$PORT
metric() {  # metric NAME -> value from /metrics (bash /dev/tcp: no curl needed)
  exec 3<>"/dev/tcp/127.0.0.1/$PORT"
  printf 'GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
  awk -v n="$1" '$1 == n {print $2}' <&3
  exec 3<&-
}
rss() { awk '/^VmRSS/ {print $2 " " $3}' "/proc/$SERVER_PID/status"; }

echo "soak: $URL, $CLIENTS clients, ${DURATION}s, prompt $PROMPT_LEN, gen $GEN_LEN, --parallel $PARALLEL"
echo "soak: RSS start  $(rss)"
"$BRISK" bench-serve --url "$URL" --concurrency "$CLIENTS" --duration "$DURATION" \
  --prompt-len "$PROMPT_LEN" --gen-len "$GEN_LEN" --json >"$TMP/bench.json" &
BENCH_PID=$!
sleep $((DURATION / 2))
echo "soak: RSS middle $(rss)  (running $(metric brisk_running_sequences), queued $(metric brisk_queue_depth), kv used $(metric brisk_kv_blocks_used))"
BENCH_RC=0
wait "$BENCH_PID" || BENCH_RC=$?
echo "soak: RSS end    $(rss)"
cat "$TMP/bench.json"
sleep 1
USED=$(metric brisk_kv_blocks_used)
echo "soak: kv blocks used after the run: $USED; preemptions $(metric brisk_preemptions_total)"
kill -TERM "$SERVER_PID"
SERVER_RC=0
wait "$SERVER_PID" || SERVER_RC=$?
SERVER_PID=""
ERRORS=$(sed -n 's/.*"errors":\([0-9]*\).*/\1/p' "$TMP/bench.json")
OK=$(sed -n 's/.*"ok":\([0-9]*\).*/\1/p' "$TMP/bench.json")
echo "soak: $OK requests ok, $ERRORS failed; server exit status $SERVER_RC"
if [ "$BENCH_RC" -ne 0 ] || [ "${ERRORS:-1}" != 0 ] || [ "${OK:-0}" -eq 0 ] || [ "$USED" != 0 ] || [ "$SERVER_RC" -ne 0 ]; then
  echo "soak: FAILED" >&2
  tail -20 "$TMP/serve.err" >&2
  exit 1
fi
echo "soak: PASSED"
