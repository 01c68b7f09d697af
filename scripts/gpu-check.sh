#!/usr/bin/env bash
# The GPU machine's one prepared script (issue 15, point 5; the device tool's time is scarce: one call,
# well under 8 minutes on an H200, so that a 15-minute lease has room for a rerun):
#   1. device     nvidia-smi, compilers, CMake, OS
#   2. deps       fmt, spdlog, GoogleTest: the machine's own, else Debian's packages carried in
#                 .gpu-carry/debs (scripts/gpu-carry.sh, run beforehand on the CI-like machine),
#                 unpacked into /tmp, never into /
#   3. configure  build-gpu/, FP4SERVE_KERNELS_ONLY (tensor, kernels, the CUDA backend, its tests, the
#                 op bench: nothing else of the project's dependencies), Release, for THIS device's
#                 architecture only (sm_90a on an H200): half the nvcc time of CI's two; g++'s warnings
#                 are not errors here (another g++ than CI's), nvcc's and ptxas's (spills) still are
#   4. build      fp4serve_cuda, cuda_tests, backend_ops_cuda_tests, cuda_ops_bench on every core
#   5. tests      ctest -L gpu: the CUDA twins and the backend op harness with the CUDA column required
#                 (per-op NMSE against the CPU op, batch invariance bit for bit)
#   6. bench      bench/cuda_ops_bench (GB/s, TFLOP/s and the fraction of the measured copy bandwidth per op)
#   7. report     $OUT/report.md (scripts/gpu_report.py): device, phases and their times, the per-op NMSE
#                 table of the CUDA column, the invariance tests, the benchmark table
# Every phase prints its elapsed time; a phase that fails is recorded and the later ones still run
# where they can, so the report is always written. Exit status: 0 when the tests passed and the bench
# ran, 1 otherwise.
#
# With the device tool (from the checkout the session started in, after scripts/gpu-carry.sh there):
#   run  command: bash scripts/gpu-check.sh     carry: [".gpu-carry"]     timeout_s: 540
# build-gpu/ stays on a warm machine between calls: a build cut off at its limit goes on where it
# stopped when the script is run again at once (each phase's limit is printed).
# Files back in $OUT (7, the tool's limit is 8): report.md, device.txt, configure.log, build.log,
# ctest.log, cuda_ops_bench.md, cuda_ops_bench.json.
# Environment: OUT (default /tmp/fp4serve-gpu-check), FP4SERVE_GPU_ARCH (e.g. "90a;120a" to build both),
# GPU_CHECK_BUDGET_S (default 450: the whole script's deadline, phases are cut to fit it),
# GPU_CHECK_DEPS=carried (use the carried packages even where the machine has its own: a dry run).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
OUT=${OUT:-/tmp/fp4serve-gpu-check}
WORK=$(mktemp -d /tmp/fp4serve-gpu-check.XXXXXX)
BUILD=$ROOT/build-gpu
mkdir -p "$OUT"
START=$(date +%s)
DEADLINE=$((START + ${GPU_CHECK_BUDGET_S:-450}))
PHASES=$WORK/phases.tsv
: > "$PHASES"
JOBS=$(nproc)

# The toolkit's and the image's tool folders, after the system's own.
for d in /usr/local/cuda/bin /opt/torch/.venv/bin; do [ -d "$d" ] && PATH=$PATH:$d; done

# CMake 3.25 or newer (the project's minimum): the PATH's, else the image's Python one.
CMAKE=cmake
printf 'if(CMAKE_VERSION VERSION_LESS 3.25)\n  message(FATAL_ERROR "too old")\nendif()\n' > "$WORK/cmake-version.cmake"
cmake_ok() { "$1" -P "$WORK/cmake-version.cmake" >/dev/null 2>&1; }
for c in cmake /opt/torch/.venv/bin/cmake /usr/local/bin/cmake; do
  if command -v "$c" >/dev/null && cmake_ok "$c"; then CMAKE=$(command -v "$c"); break; fi
done
CTEST=$(dirname "$(command -v "$CMAKE" || echo /usr/bin/cmake)")/ctest

log() { printf '\033[1m[gpu-check %4ss]\033[0m %s\n' "$(($(date +%s) - START))" "$*"; }
remaining() { echo $((DEADLINE - $(date +%s))); }
# run_limited SECONDS COMMAND...: COMMAND in its own process group, the whole group killed at SECONDS
# (status 124 then): a hung kernel or a stuck build must not eat the lease, nor outlive its phase.
run_limited() {
  local limit=$1 pid dog rc
  shift
  set -m
  "$@" &
  pid=$!
  set +m
  (sleep "$limit"; kill -TERM -- "-$pid" 2>/dev/null; sleep 5; kill -KILL -- "-$pid" 2>/dev/null) &
  dog=$!
  wait "$pid"
  rc=$?
  if kill -0 "$dog" 2>/dev/null; then
    kill "$dog" 2>/dev/null
    wait "$dog" 2>/dev/null
  else
    rc=124
  fi
  return "$rc"
}
# phase NAME COMMAND...: runs a phase, records its time and status in $PHASES.
phase() {
  local name=$1 t0 rc
  shift
  t0=$(date +%s)
  log "== $name"
  "$@"
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$(($(date +%s) - t0))" "$rc" >> "$PHASES"
  log "== $name: $([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)") in $(($(date +%s) - t0)) s"
  return "$rc"
}

# ---- 1. device -----------------------------------------------------------------------------------
device() {
  {
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.sm --format=csv,noheader ||
      echo "nvidia-smi failed"
    echo "nvcc: $(nvcc_bin --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*' || echo missing)"
    echo "g++: $(g++ --version 2>/dev/null | head -1 || echo missing)"
    echo "cmake: $("$CMAKE" --version 2>/dev/null | head -1 || echo missing) ($CMAKE)"
    echo "ninja: $(ninja --version 2>/dev/null || echo missing)"
    echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
    echo "cpus: $JOBS"
  } | tee "$OUT/device.txt"
  command -v nvidia-smi >/dev/null && command -v g++ >/dev/null && cmake_ok "$CMAKE" && nvcc_bin --version >/dev/null
}
nvcc_bin() {
  if command -v nvcc >/dev/null; then nvcc "$@"; else /usr/local/cuda/bin/nvcc "$@"; fi
}
# The architecture to build: this device's (compute capability 9.0 -> 90a, 12.0 -> 120a), or both.
device_arch() {
  if [ -n "${FP4SERVE_GPU_ARCH:-}" ]; then echo "$FP4SERVE_GPU_ARCH"; return; fi
  local cc
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
  case "$cc" in
    9.0) echo "90a" ;;
    12.0) echo "120a" ;;
    *) echo "90a;120a" ;;
  esac
}

# ---- 2. deps -------------------------------------------------------------------------------------
PREFIX_ARGS=()
deps() {
  local have=1 h
  for h in fmt/format.h spdlog/spdlog.h gtest/gtest.h gmock/gmock.h; do
    [ -f "/usr/include/$h" ] || [ -f "/usr/local/include/$h" ] || { have=0; echo "missing on this machine: $h"; }
  done
  if ! echo 'int main() { return 0; }' | g++ -fopenmp -x c++ - -o "$WORK/omp-probe" 2>"$WORK/omp-probe.log"; then
    echo "g++ -fopenmp does not link (OpenMP is part of GCC; nothing to carry):"
    cat "$WORK/omp-probe.log"
    return 1
  fi
  if [ "$have" = 1 ] && [ "${GPU_CHECK_DEPS:-}" != carried ]; then
    echo "fmt, spdlog, GoogleTest: the machine's own"
    return 0
  fi
  local debs=("$ROOT"/.gpu-carry/debs/*.deb)
  if [ ! -f "${debs[0]}" ]; then
    echo "no .gpu-carry/debs: run scripts/gpu-carry.sh on the CI-like machine and name .gpu-carry in carry"
    return 1
  fi
  # A fixed place outside the run's scratch: build-gpu/ keeps pointing at it (a rerun on a warm machine).
  local prefix=/tmp/fp4serve-gpu-deps d
  rm -rf "$prefix"
  mkdir -p "$prefix"
  for d in "${debs[@]}"; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$d" "$prefix" || return 1
    else  # a .deb is an ar archive holding data.tar.*
      (cd "$WORK" && rm -f data.tar.* && ar x "$d" && tar -xf data.tar.* -C "$prefix") || return 1
    fi
  done
  echo "unpacked ${#debs[@]} carried packages into $prefix"
  PREFIX_ARGS=(-DCMAKE_PREFIX_PATH="$prefix/usr")
}

# ---- 3. configure --------------------------------------------------------------------------------
configure() {
  local arch gen=(-G Ninja) launch=()
  arch=$(device_arch)
  command -v ninja >/dev/null || gen=(-G "Unix Makefiles")
  command -v ccache >/dev/null && launch=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  echo "CUDA architectures: $arch (this device's only; CI compiles 90a and 120a)"
  local nvcc=/usr/local/cuda/bin/nvcc
  [ -x "$nvcc" ] || nvcc=$(command -v nvcc)
  "$CMAKE" -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DFP4SERVE_CUDA=ON -DFP4SERVE_KERNELS_ONLY=ON \
    -DFP4SERVE_HOST_WERROR=OFF "-DFP4SERVE_CUDA_ARCHITECTURES=$arch" -DCMAKE_CUDA_COMPILER="$nvcc" \
    "${PREFIX_ARGS[@]}" "${launch[@]}" > "$OUT/configure.log" 2>&1
  local rc=$?
  [ "$rc" = 0 ] || tail -40 "$OUT/configure.log"
  return "$rc"
}

# ---- 4. build ------------------------------------------------------------------------------------
TARGETS=(fp4serve_cuda cuda_tests backend_ops_cuda_tests cuda_ops_bench)
build() {
  local limit rc
  limit=$(($(remaining) - 150))  # leave the tests and the bench room
  [ "$limit" -gt 60 ] || limit=60
  echo "building ${TARGETS[*]} with $JOBS jobs (limit ${limit} s)"
  # Keep going past a failing target, so that what builds can still run.
  if [ -f "$BUILD/build.ninja" ]; then
    run_limited "$limit" ninja -C "$BUILD" -j "$JOBS" -k 0 "${TARGETS[@]}" > "$OUT/build.log" 2>&1
  else
    run_limited "$limit" make -C "$BUILD" -j "$JOBS" -k "${TARGETS[@]}" > "$OUT/build.log" 2>&1
  fi
  rc=$?
  if [ "$rc" != 0 ]; then
    grep -E -B2 -A12 'error|Error' "$OUT/build.log" | head -80
    [ "$rc" = 124 ] && echo "build: stopped at its time limit"
  fi
  return "$rc"
}

# ---- 5. tests ------------------------------------------------------------------------------------
tests() {
  local limit
  limit=$(($(remaining) - 100))  # leave the bench room
  [ "$limit" -gt 30 ] || limit=30
  echo "ctest -L gpu (limit ${limit} s): the CPU reference on its scalar tier only (FP4SERVE_CPU_ISA=scalar)"
  # Several test processes share the GPU; each keeps 2 OpenMP threads for the CPU reference.
  FP4SERVE_BACKEND_OPS_TABLE=1 FP4SERVE_CPU_ISA=scalar OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive \
    run_limited "$limit" "$CTEST" --test-dir "$BUILD" -L gpu -V -j $((JOBS / 2)) --no-tests=error --timeout 240 \
    > "$OUT/ctest.log" 2>&1
  local rc=$?
  grep -E '^ *[0-9]+/[0-9]+ Test +#|tests passed|tests failed|No tests were found' "$OUT/ctest.log" | tail -60
  [ "$rc" = 124 ] && echo "ctest: stopped at its time limit"
  return "$rc"
}

# ---- 6. bench ------------------------------------------------------------------------------------
bench() {
  local exe=$BUILD/bench/cuda_ops_bench limit
  [ -x "$exe" ] || { echo "cuda_ops_bench was not built"; return 1; }
  limit=$(($(remaining) - 15))
  [ "$limit" -gt 20 ] || limit=20
  # The bench stops starting cases at --budget-s; the limit is the backstop for a hung kernel.
  run_limited "$limit" "$exe" "$OUT" --budget-s $((limit - 25))
}

# ---- 7. report -----------------------------------------------------------------------------------
report() {
  local total=$(($(date +%s) - START))
  if command -v python3 >/dev/null; then
    # The device tool returns the output's last 12,000 characters: the summary (phases, headline
    # figures, failures, failing rows) ends it; the full tables are in $OUT/report.md.
    python3 "$ROOT/scripts/gpu_report.py" --out "$OUT" --phases "$PHASES" --total-s "$total" --print-summary
  else
    { echo "# GPU check (no python3: raw)"; cat "$OUT/device.txt" "$PHASES"; } > "$OUT/report.md"
    cat "$OUT/report.md"
  fi
}

status=0
phase device device || status=1
phase deps deps || status=1
built=0
if phase configure configure && phase build build; then built=1; else status=1; fi
# A partial build (-k 0) may still have made the test binaries or the bench.
if [ $built = 1 ] || [ -x "$BUILD/tests/cuda/backend_ops_cuda_tests" ] || [ -x "$BUILD/tests/cuda/cuda_tests" ]; then
  phase tests tests || status=1
else
  printf 'tests\t0\tnot run (no test binary)\n' >> "$PHASES"
fi
if [ -x "$BUILD/bench/cuda_ops_bench" ]; then
  phase bench bench || status=1
else
  printf 'bench\t0\tnot run (not built)\n' >> "$PHASES"
  status=1
fi
phase report report || status=1
log "total $(($(date +%s) - START)) s, status $status; files in $OUT"
rm -rf "$WORK"
exit $status
