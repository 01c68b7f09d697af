#!/usr/bin/env bash
# The GPU machine's check, run as one short script (the device tool's time is scarce):
# builds with CUDA on, runs every test labelled "gpu" (CUDA kernels against their CPU twins) and
# prints the device. Usage on the GPU machine: scripts/gpu-check.sh   (writes logs to $OUT if set)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fp4serve-gpu-check}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv | tee "$OUT/device.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP4SERVE_CUDA=ON -DFP4SERVE_BENCH=OFF > "$OUT/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" --target cuda_tests > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
ctest --test-dir build-gpu -L gpu --output-on-failure 2>&1 | tee "$OUT/ctest.log"
