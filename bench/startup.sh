#!/usr/bin/env bash
# Time to /health 200 and max RSS of `fp4serve serve MODEL`: a first start (no packed-weight cache:
# packs and writes it), a restart (maps it), and a start with --no-weight-cache, in one run.
#   bench/startup.sh /tmp/q36-nvfp4-4l [extra serve flags...]
# Prints one line per start and the server's own "Start-up:" phase line.
set -euo pipefail
MODEL=$1; shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${FP4SERVE_BINARY:-$ROOT/build/fp4serve}
TOK=${TOKENIZER:-$ROOT/.cache/tokenizers/qwen3.5}
PORT=${PORT:-18431}
OUT=$(mktemp -d)
rm -f "$MODEL"/.fp4serve-weights-*.bin

one() {  # $1 label, rest: extra flags
  local label=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  /usr/bin/time -v -o "$OUT/$label.time" "$BIN" serve "$MODEL" --tokenizer "$TOK" --port "$PORT" \
    --kv-cache-memory 1GiB --max-model-len 4096 "$@" > "$OUT/$label.log" 2>&1 &
  local pid=$!
  until curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; do
    kill -0 $pid 2> /dev/null || { cat "$OUT/$label.log"; exit 1; }
    sleep 0.05
  done
  t1=$(date +%s.%N)
  # GNU time ignores SIGINT while it waits: signal the server itself (time's child).
  kill -INT "$(pgrep -P $pid)"; wait $pid || true
  local rss
  rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.2f", $2 / 1048576}' "$OUT/$label.time")
  printf '%-22s /health 200 after %5.2f s, max RSS %s GiB\n' "$label" "$(echo "$t1 - $t0" | bc)" "$rss"
  grep -o 'Start-up:.*' "$OUT/$label.log" | sed 's/^/    /'
  grep -o 'Weight cache:.*\|CPU weights:.*' "$OUT/$label.log" | sed 's/^/    /'
}

one first-start
one restart
one no-weight-cache --no-weight-cache
rm -rf "$OUT"
