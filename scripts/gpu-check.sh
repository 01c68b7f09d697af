#!/usr/bin/env bash
# The GPU machine's one prepared script (issues 15 and 16; the device tool's time is scarce: one call,
# under 8 minutes on an H200, so that a 15-minute lease has room for a rerun):
#   1. device     nvidia-smi, compilers, CMake, OS
#   2. deps       fmt, spdlog, GoogleTest: the machine's own, else Debian's packages carried in
#                 .gpu-carry/debs (scripts/gpu-carry.sh, run beforehand on the CI-like machine),
#                 unpacked into /tmp, never into /
#   3. carry      the full fp4serve built for sm_90a on the CI-like machine (scripts/gpu-carry.sh: this
#                 machine lacks boost, curl, zmq, pcre2, the image codecs and xgrammar), unpacked with its
#                 shared libraries and the real tokenizer into /tmp (bin/fp4serve runs through a wrapper
#                 that sets LD_LIBRARY_PATH); then `fp4serve synth` of the full-width NVFP4 model
#                 (GPU_CHECK_LAYERS, default all 40) starts in the background
#   4. configure  build-gpu/, FP4SERVE_KERNELS_ONLY (tensor, kernels, the CUDA backend, its tests, the
#                 op bench: nothing else of the project's dependencies), Release, for THIS device's
#                 architecture only (sm_90a on an H200): half the nvcc time of CI's two; g++'s warnings
#                 are not errors here (another g++ than CI's), nvcc's and ptxas's (spills) still are
#   5. build      fp4serve_cuda, cuda_tests, backend_ops_cuda_tests, cuda_ops_bench on every core, in the
#                 background at nice 19 while 6 and 7 run (they need only the carried binary)
#   6. serving    scripts/gpu_serve_check.py on the synth model (issue 16, point 6): `bench model` batch-1
#                 decode as a fraction of the HBM roofline (the device's measured copy bandwidth), process
#                 start to /health 200, `bench serve` at a scaled-down seeds' load test (32 concurrent,
#                 2048-token random prompts, 256 out) with the step-time distribution from /metrics
#   7. e2e        the device-parametrized pytest tests with FP4SERVE_TEST_DEVICE=cuda (issue 16, point 5):
#                 tests/e2e/test_device_parity.py (the tiny models' goldens in every format, alone == in a
#                 batch of 32 == with a prefix hit == after preemption) and the canary's pass and GDN-fault
#                 tests of tests/e2e/test_canary_model.py, driving the carried binary
#   8. tests      ctest -L gpu: the CUDA twins and the backend op harness with the CUDA column required
#                 (per-op NMSE against the CPU op, batch invariance bit for bit)
#   9. bench      bench/cuda_ops_bench (GB/s, TFLOP/s and the fraction of the measured copy bandwidth per op)
#  10. report     $OUT/report.md (scripts/gpu_report.py): device, phases and their times, the serving
#                 figures beside issue 16's targets, the e2e tests, the per-op NMSE table of the CUDA
#                 column, the invariance tests, the benchmark table
# Every phase prints its elapsed time; a phase that fails is recorded and the later ones still run
# where they can, so the report is always written. Exit status: 0 when everything ran and passed,
# 1 otherwise.
#
# Time plan (GPU_CHECK_BUDGET_S=450): device, deps, carry and configure ~25 s; synth of 40 layers
# ~30 s on 16 cores (measured on the CI-like machine: 9 to 20 s of one loaded core per layer, 8 s for
# the embedding and lm_head; 0.49 GB per layer + 1.3 GB, written to /dev/shm when it has room),
# waited for up to GPU_CHECK_SYNTH_S (120); serving GPU_CHECK_SERVE_S (150 s: bench model ~35, start
# ~25, load test ~60); e2e GPU_CHECK_E2E_S (90 s; 70 s on the 2 loaded CI-like cores); the build
# meanwhile in the background, waited for until 110 s are left; tests ~55 s; bench ~40 s; report.
#
# With the device tool (from the checkout the session started in, after scripts/gpu-carry.sh there):
#   run  command: bash scripts/gpu-check.sh     carry: [".gpu-carry"]     timeout_s: 540
# build-gpu/ stays on a warm machine between calls: a build cut off at its limit goes on where it
# stopped when the script is run again at once (each phase's limit is printed).
# Files back in $OUT (8, the tool's limit): report.md, device.txt, build.log (configure's output
# first), ctest.log, cuda_ops_bench.md, cuda_ops_bench.json, serving.json, serving.log (the serving
# commands' output, then the e2e tests').
# Environment: OUT (default /tmp/fp4serve-gpu-check), FP4SERVE_GPU_ARCH (e.g. "90a;120a" to build both),
# GPU_CHECK_BUDGET_S (default 450: the whole script's deadline, phases are cut to fit it),
# GPU_CHECK_DEPS=carried (use the carried packages even where the machine has its own: a dry run),
# GPU_CHECK_PARTS (default "ops,serving,e2e": ops = configure, build, tests, bench),
# GPU_CHECK_DEVICE (default cuda; cpu runs the serving and e2e parts on the CPU: the dry run on a machine
# without a GPU, with GPU_CHECK_PRESET=demo GPU_CHECK_LAYERS=4 and a small load test),
# GPU_CHECK_LAYERS (default 40), GPU_CHECK_PRESET (default qwen3.6-35b-a3b), GPU_CHECK_SYNTH_S (120),
# GPU_CHECK_SERVE_S (150),
# GPU_CHECK_E2E_S (90), GPU_CHECK_INPUT_LEN (2048), GPU_CHECK_OUTPUT_LEN (256), GPU_CHECK_NUM_PROMPTS (64),
# GPU_CHECK_CONCURRENCY (32), GPU_CHECK_PYTHON (python3: with pytest and requests).
# The dry run on the CI-like machine (no GPU; a CPU build packed by scripts/gpu_carry_pack.py):
#   GPU_CHECK_PARTS=serving,e2e GPU_CHECK_DEVICE=cpu GPU_CHECK_PRESET=demo GPU_CHECK_LAYERS=2 \
#   GPU_CHECK_INPUT_LEN=64 GPU_CHECK_OUTPUT_LEN=16 GPU_CHECK_NUM_PROMPTS=8 GPU_CHECK_CONCURRENCY=4 \
#   GPU_CHECK_BUDGET_S=3000 GPU_CHECK_SERVE_S=600 GPU_CHECK_E2E_S=2000 GPU_CHECK_PYTHON=.venv/bin/python \
#   bash scripts/gpu-check.sh
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
PARTS=${GPU_CHECK_PARTS:-ops,serving,e2e}
has_part() { case ",$PARTS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
DEVICE=${GPU_CHECK_DEVICE:-cuda}
LAYERS=${GPU_CHECK_LAYERS:-40}
# Layer 4k+3 is the first full-attention layer: with fewer than 4 there is no KV cache to plan.
[ "$LAYERS" -ge 4 ] || { echo "GPU_CHECK_LAYERS=$LAYERS: at least 4 (the first attention layer is the 4th)"; exit 2; }
CARRY=/tmp/fp4serve-carry  # the unpacked full binary (3. carry)
FP4SERVE=$CARRY/fp4serve/fp4serve
PYTHON=${GPU_CHECK_PYTHON:-python3}  # the image's python3 has pytest and requests

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
  # The watchdog leaves a mark before it kills: the command's own status after a TERM (ninja's 2,
  # say) must still read as "stopped at its limit".
  (sleep "$limit"; : > "$WORK/limit.$pid"; kill -TERM -- "-$pid" 2>/dev/null; sleep 5; kill -KILL -- "-$pid" 2>/dev/null) &
  dog=$!
  wait "$pid"
  rc=$?
  kill "$dog" 2>/dev/null
  wait "$dog" 2>/dev/null
  if [ -e "$WORK/limit.$pid" ]; then
    rm -f "$WORK/limit.$pid"
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


# ---- 3. carry ------------------------------------------------------------------------------------
carry() {
  local tar=$ROOT/.gpu-carry/fp4serve.tar.xz
  if [ ! -f "$tar" ]; then
    echo "no .gpu-carry/fp4serve.tar.xz: run scripts/gpu-carry.sh on the CI-like machine and name .gpu-carry in carry"
    return 1
  fi
  rm -rf "$CARRY"
  mkdir -p "$CARRY"
  tar -xJf "$tar" -C "$CARRY" || return 1
  echo "unpacked $(du -sh "$CARRY" | cut -f1) into $CARRY: $(ls "$CARRY/fp4serve/lib" | wc -l) shared libraries"
  # Missing libraries or a too old glibc show here, before anything depends on the binary.
  if ! "$FP4SERVE" --help > /dev/null; then
    LD_LIBRARY_PATH=$CARRY/fp4serve/lib ldd "$CARRY/fp4serve/bin/fp4serve" | grep -E 'not found|version' || true
    return 1
  fi
  "$FP4SERVE" doctor 2>&1 | grep -E '^CUDA|device' | head -8
}

# The synth model, written in the background while the build compiles (both on the CPU). In RAM
# (/dev/shm) where it has room: ~0.5 GB per layer + 2 GB.
SYNTH_PID=""
SYNTH_DIR=""
synth_start() {
  local need_gb=$((LAYERS / 2 + 4)) dir=/tmp
  if [ -d /dev/shm ] && [ "$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)" -gt "$need_gb" ] 2>/dev/null; then
    dir=/dev/shm
  fi
  SYNTH_DIR=$dir/fp4serve-synth-$LAYERS
  rm -rf "$SYNTH_DIR"
  log "synth: ${GPU_CHECK_PRESET:-qwen3.6-35b-a3b} NVFP4, $LAYERS layers into $SYNTH_DIR (background)"
  set -m  # its own process group, so that a synth past its time can be stopped whole
  (
    t0=$(date +%s)
    "$FP4SERVE" synth --preset "${GPU_CHECK_PRESET:-qwen3.6-35b-a3b}" --layers "$LAYERS" --format nvfp4 --no-mtp \
      --no-vision --no-progress "$SYNTH_DIR" > "$WORK/synth.log" 2>&1
    echo "$? $(($(date +%s) - t0))" > "$WORK/synth.done"
  ) &
  SYNTH_PID=$!
  set +m
}

# ---- 6. serving ----------------------------------------------------------------------------------
serving() {
  local budget=${GPU_CHECK_SERVE_S:-150} rc secs
  [ -n "$SYNTH_PID" ] || { echo "no synth model (the carry phase failed)"; return 1; }
  # Waited for up to GPU_CHECK_SYNTH_S from the start of this phase (a slow synth delays the later
  # phases, which are cut to fit: the ops tests last).
  local limit=${GPU_CHECK_SYNTH_S:-120}
  if ! wait_for_file "$WORK/synth.done" "$limit"; then
    echo "synth: not done within $limit s; stopped"
    kill -TERM -- "-$SYNTH_PID" 2>/dev/null
    cat "$WORK/synth.log" >> "$OUT/serving.log"
    return 1
  fi
  read -r rc secs < "$WORK/synth.done"
  { echo "---- synth ($secs s, status $rc) ----"; cat "$WORK/synth.log"; } >> "$OUT/serving.log"
  [ "$rc" = 0 ] || { tail -5 "$WORK/synth.log"; return 1; }
  echo "synth: $LAYERS layers in $secs s"
  run_limited $((budget + 30)) "$PYTHON" "$ROOT/scripts/gpu_serve_check.py" --binary "$FP4SERVE" --model "$SYNTH_DIR" \
    --tokenizer "$CARRY/fp4serve/tokenizer" --device "$DEVICE" --out "$OUT" --work "$WORK" --layers "$LAYERS" \
    --synth-s "$secs" --budget-s "$budget" --input-len "${GPU_CHECK_INPUT_LEN:-2048}" \
    --output-len "${GPU_CHECK_OUTPUT_LEN:-256}" --num-prompts "${GPU_CHECK_NUM_PROMPTS:-64}" \
    --concurrency "${GPU_CHECK_CONCURRENCY:-32}"
  rc=$?
  rm -rf "$SYNTH_DIR"  # 20 GB of RAM back before the e2e tests
  return $rc
}
# wait_for_file PATH SECONDS: 0 once PATH exists, 1 after SECONDS.
wait_for_file() {
  local end=$(($(date +%s) + $2))
  while [ ! -f "$1" ]; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 1
  done
}

# ---- 7. e2e --------------------------------------------------------------------------------------
e2e() {
  local limit=${GPU_CHECK_E2E_S:-90} rc
  echo "---- e2e (pytest, FP4SERVE_TEST_DEVICE=$DEVICE) ----" >> "$OUT/serving.log"
  echo "pytest, FP4SERVE_TEST_DEVICE=$DEVICE (limit $limit s)"
  FP4SERVE_BINARY=$FP4SERVE FP4SERVE_TEST_DEVICE=$DEVICE FP4SERVE_TOKENIZER_DIR=$CARRY/fp4serve/tokenizer \
    PYTHONUNBUFFERED=1 run_limited "$limit" "$PYTHON" -m pytest -p no:cacheprovider -rA -q \
    "$ROOT/tests/e2e/test_device_parity.py" "$ROOT/tests/e2e/test_canary_model.py" \
    -k "test_device_parity or canary_passes or gdn_state_is_corrupted" >> "$OUT/serving.log" 2>&1
  rc=$?
  grep -E '^(PASSED|FAILED|ERROR) |^(=+ )?[0-9]+ (passed|failed|error).* in [0-9.]+s( =+)?$' "$OUT/serving.log" | tail -30
  [ "$rc" = 124 ] && echo "e2e: stopped at its time limit"
  return "$rc"
}

# ---- 4. configure --------------------------------------------------------------------------------
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
    "${PREFIX_ARGS[@]}" "${launch[@]}" > "$OUT/build.log" 2>&1
  local rc=$?
  [ "$rc" = 0 ] || tail -40 "$OUT/build.log"
  return "$rc"
}

# ---- 5. build ------------------------------------------------------------------------------------
TARGETS=(fp4serve_cuda cuda_tests backend_ops_cuda_tests cuda_ops_bench)
build() {
  local limit rc
  limit=$(($(remaining) - 110))  # leave the tests and the bench room
  [ "$limit" -gt 60 ] || limit=60
  echo "building ${TARGETS[*]} with $JOBS jobs at nice 19 (limit ${limit} s)"
  echo "---- build ----" >> "$OUT/build.log"
  # Keep going past a failing target, so that what builds can still run. Nice 19: the serving
  # section runs meanwhile and its timings must not wait on the compilers.
  if [ -f "$BUILD/build.ninja" ]; then
    run_limited "$limit" nice -n 19 ninja -C "$BUILD" -j "$JOBS" -k 0 "${TARGETS[@]}" >> "$OUT/build.log" 2>&1
  else
    run_limited "$limit" nice -n 19 make -C "$BUILD" -j "$JOBS" -k "${TARGETS[@]}" >> "$OUT/build.log" 2>&1
  fi
  rc=$?
  if [ "$rc" != 0 ]; then
    grep -E -B2 -A12 'error|Error' "$OUT/build.log" | head -80
    [ "$rc" = 124 ] && echo "build: stopped at its time limit"
  fi
  return "$rc"
}

# ---- 8. tests ------------------------------------------------------------------------------------
tests() {
  local limit
  limit=$(($(remaining) - 55))  # leave the bench room
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

# ---- 9. bench ------------------------------------------------------------------------------------
bench() {
  local exe=$BUILD/bench/cuda_ops_bench limit
  [ -x "$exe" ] || { echo "cuda_ops_bench was not built"; return 1; }
  limit=$(($(remaining) - 15))
  [ "$limit" -gt 20 ] || limit=20
  # The bench stops starting cases at --budget-s; the limit is the backstop for a hung kernel.
  local budget=$((limit - 25))
  [ "$budget" -gt 5 ] || budget=5
  run_limited "$limit" "$exe" "$OUT" --budget-s "$budget"
}

# ---- 10. report -----------------------------------------------------------------------------------
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
if has_part ops; then phase deps deps || status=1; fi
if has_part serving || has_part e2e; then
  if phase carry carry; then has_part serving && synth_start; else status=1; fi
fi
BUILD_PID=""
if has_part ops; then
  if phase configure configure; then
    phase build build &
    BUILD_PID=$!
  else
    status=1
  fi
fi
if has_part serving; then phase serving serving || status=1; fi
if has_part e2e; then
  if [ -x "$FP4SERVE" ]; then
    phase e2e e2e || status=1
  else
    printf 'e2e\t0\tnot run (no carried binary)\n' >> "$PHASES"
    status=1
  fi
fi
if has_part ops; then
  if [ -n "$BUILD_PID" ]; then
    log "waiting for the build (its limit stops it)"
    wait "$BUILD_PID" || status=1
  fi
  # A partial build (-k 0) may still have made the test binaries or the bench.
  if [ -x "$BUILD/tests/cuda/backend_ops_cuda_tests" ] || [ -x "$BUILD/tests/cuda/cuda_tests" ]; then
    phase tests tests || status=1
  else
    printf 'tests\t0\tnot run (no test binary)\n' >> "$PHASES"
    status=1
  fi
  if [ -x "$BUILD/bench/cuda_ops_bench" ]; then
    phase bench bench || status=1
  else
    printf 'bench\t0\tnot run (not built)\n' >> "$PHASES"
    status=1
  fi
fi
phase report report || status=1
log "total $(($(date +%s) - START)) s, status $status; files in $OUT"
[ -n "$SYNTH_DIR" ] && rm -rf "$SYNTH_DIR"
rm -rf "$WORK"
exit $status
