#!/usr/bin/env bash
# Throughput of fp4serve replicas behind vllm-router against one replica alone, on this machine, with
# `fp4serve bench serve` (vllm bench serve's load generator) and the same load each time. The
# replicas share the machine's cores: one replica with --threads N against N replicas with --threads 1
# behind the router (round_robin), so the comparison is the same hardware split two ways.
#   bench/fleet_vs_single.sh [ROUNDS]        (default 2 rounds, alternating the two set-ups)
# Needs build/fp4serve and .venv-fleet (scripts/setup.sh). Serves the built-in demo model.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
BIN=${FP4SERVE_BINARY:-build/fp4serve}
ROUTER=.venv-fleet/bin/vllm-router
CORES=$(nproc)
OUT=$(mktemp -d)
export OMP_WAIT_POLICY=passive
LOAD=(--model fp4serve-demo --tokenizer .cache/tokenizers/qwen3.5 --num-prompts 64 --max-concurrency 8
      --random-input-len 256 --random-output-len 128 --seed 0)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

wait_ok() { for _ in $(seq 600); do curl -sf -o /dev/null "$1/health" && return 0; sleep 0.2; done; echo "no health: $1" >&2; exit 1; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
replica() {  # replica PORT THREADS: one fp4serve on the demo model
  "$BIN" serve --host 127.0.0.1 --port "$1" --threads "$2" --kv-cache-memory 512MiB --max-model-len 2048 \
    --disable-log-stats > "$OUT/serve-$1.log" 2>&1 &
  pids+=($!)
  wait_ok "http://127.0.0.1:$1"
}
bench() {  # bench URL LABEL
  "$BIN" bench serve --base-url "$1" "${LOAD[@]}" --label "$2" --save-result --result-dir "$OUT" \
    --result-filename "$2.json" > "$OUT/$2.txt" 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(f\"{sys.argv[2]:28s} {r['output_throughput']:8.1f} output tok/s  {r['request_throughput']:6.2f} req/s  mean TTFT {r['mean_ttft_ms']:7.1f} ms  mean TPOT {r['mean_tpot_ms']:6.1f} ms\")" "$OUT/$2.json" "$2"
}

# Create the demo model once, before replicas start side by side.
p=$(port); replica "$p" 1; cleanup; pids=()

for round in $(seq "$ROUNDS"); do
  p=$(port); replica "$p" "$CORES"
  bench "http://127.0.0.1:$p" "single-threads$CORES-r$round"
  cleanup; pids=()

  workers=()
  for _ in $(seq "$CORES"); do p=$(port); replica "$p" 1; workers+=("http://127.0.0.1:$p"); done
  rp=$(port)
  "$ROUTER" --worker-urls "${workers[@]}" --policy round_robin --host 127.0.0.1 --port "$rp" \
    --prometheus-host 127.0.0.1 --prometheus-port "$(port)" --log-level warning > "$OUT/router.log" 2>&1 &
  pids+=($!)
  wait_ok "http://127.0.0.1:$rp"
  bench "http://127.0.0.1:$rp" "router-${CORES}x-threads1-r$round"
  cleanup; pids=()
done
echo "results and logs: $OUT"
