#!/usr/bin/env bash
# The sanitizer stage of scripts/test.sh: the unit suites of the modules that take client input or
# run threads, rebuilt with sanitizers and run as one ctest test per suite under the label "sanitize".
#   build-asan/  ASan + UBSan (g++): SUITES_ASAN (default: server, tokenizer, engine); leaks are
#                reported (LeakSanitizer).
#   build-tsan/  TSan (g++): SUITES_TSAN (default: engine, server), the tests that run threads
#                (TSAN_FILTER, a gtest filter: the engine's own thread, the HTTP server's io threads,
#                streaming and signals), with one OpenMP thread: libgomp is not built with TSan, so
#                its barriers would be reported as races (the kernels' threading has its own
#                thread-invariance tests).
# The compute modules (kernels, model) are built without instrumentation (FP4SERVE_SANITIZE_EXCLUDE
# in CMakeLists.txt): instrumented, the engine tests would take hours.
#   scripts/sanitize.sh                 both stages
#   SANITIZE=asan scripts/sanitize.sh   one stage (asan | tsan)
#   SUITES_ASAN="server checkpoint" SANITIZE=asan scripts/sanitize.sh
# Only the suites' executables and what they link are built.
set -euo pipefail
cd "$(dirname "$0")/.."

SANITIZE=${SANITIZE:-asan tsan}
SUITES_ASAN=${SUITES_ASAN:-server tokenizer engine}
SUITES_TSAN=${SUITES_TSAN:-engine server}
TSAN_FILTER=${TSAN_FILTER:-'Engine.*:HttpServer.*:HttpStream.*:HttpTerminationSignals.*'}
JOBS=$(nproc)

log() { printf '\033[1m[sanitize]\033[0m %s\n' "$*"; }
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# build DIR SANITIZERS SUITES...
build() {
  local dir=$1 sanitizers=$2
  shift 2
  if [ ! -f "$dir/build.ninja" ]; then
    log "configuring $dir (-fsanitize=$sanitizers)"
    # -O2 for the uninstrumented modules; the instrumented ones add -O1 -g1 (CMakeLists.txt).
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS=-O2 \
      -DFP4SERVE_SANITIZE="$sanitizers" -DFP4SERVE_CUDA=OFF -DFP4SERVE_BENCH=OFF "${launcher[@]}" >/dev/null
  fi
  local targets=()
  for s in "$@"; do targets+=("${s}_tests"); done
  log "building ${targets[*]} in $dir"
  ninja -C "$dir" -j "$JOBS" "${targets[@]}"
}

# ctest -R for the suites' tests (one per suite in a sanitizer build).
suites_regex() {
  local IFS='|'
  echo "^($*)_tests\$"
}

status=0
for stage in $SANITIZE; do
  start=$SECONDS
  case $stage in
    asan)
      # shellcheck disable=SC2086
      build build-asan address,undefined $SUITES_ASAN
      log "ASan+UBSan: ${SUITES_ASAN}"
      # shellcheck disable=SC2086
      ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1} \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        ctest --test-dir build-asan --output-on-failure -j "$JOBS" -L sanitize -R "$(suites_regex $SUITES_ASAN)" || status=1
      ;;
    tsan)
      # shellcheck disable=SC2086
      build build-tsan thread $SUITES_TSAN
      log "TSan: ${SUITES_TSAN}, tests ${TSAN_FILTER}"
      # halt_on_error: the first race fails its suite; second_deadlock_stack: both stacks of a
      # lock-order inversion.
      # shellcheck disable=SC2086
      TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} OMP_NUM_THREADS=1 GTEST_FILTER="$TSAN_FILTER" \
        ctest --test-dir build-tsan --output-on-failure -j "$JOBS" -L sanitize -R "$(suites_regex $SUITES_TSAN)" || status=1
      ;;
    *) echo "sanitize.sh: unknown stage '$stage' (asan | tsan)" >&2; exit 2 ;;
  esac
  log "$stage: $((SECONDS - start)) s"
done
exit $status
