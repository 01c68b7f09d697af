#!/usr/bin/env bash
# Encode throughput on the 1 MB mixed corpus: fp4serve's tokenizer vs HF tokenizers, one thread
# each, same machine, same run. Target: ours >= 1.5x faster.
#   bench/tokenizer_vs_hf.sh [BUILD_DIR]     (default: build; needs -DFP4SERVE_BENCH=ON, the default)
# Needs .venv (scripts/setup.sh) and .cache/tokenizers/qwen3.5 (tools/reference/fetch_tokenizers.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
BENCH="$BUILD/bench/tokenizer_bench"
[ -x "$BENCH" ] || cmake --build "$BUILD" --target tokenizer_bench
ours_json=$("$BENCH" --benchmark_filter=BM_Encode1MB --benchmark_repetitions=5 \
            --benchmark_report_aggregates_only=true --benchmark_format=json 2>/dev/null)
hf_json=$(RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false .venv/bin/python tools/reference/bench_hf_tokenizer.py 5 2>/dev/null)
python3 - "$ours_json" "$hf_json" <<'PY'
import json, sys
ours = json.loads(sys.argv[1]); hf = json.loads(sys.argv[2])
med = [b for b in ours["benchmarks"] if b.get("aggregate_name") == "median"][0]
unit = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9, "s": 1.0}[med["time_unit"]]
ours_s = med["real_time"] * unit
mb = hf["bytes"] / 1e6
print(f"1 MB mixed corpus ({hf['bytes']:,} bytes, {hf['tokens']:,} tokens), one thread, median of 5:")
print(f"  fp4serve tokenizer : {ours_s * 1e3:8.1f} ms  {mb / ours_s:7.2f} MB/s")
print(f"  HF tokenizers      : {hf['seconds_median'] * 1e3:8.1f} ms  {mb / hf['seconds_median']:7.2f} MB/s")
print(f"  speed-up           : {hf['seconds_median'] / ours_s:.2f}x (target >= 1.5x)")
PY
