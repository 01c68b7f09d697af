#!/usr/bin/env bash
# The sanitizer stage of scripts/test.sh: the unit suites of the modules that take client input or
# run threads, rebuilt with sanitizers and run as ctest tests labelled "sanitize".
#   build-asan/  ASan + UBSan: the server, tokenizer and engine modules, and the suites in
#                SUITES_ASAN (default: server -- HTTP, TLS, CORS, routes, OpenAI parsing; the
#                tokenizer, Jinja engine and chat template run under ASan+UBSan in their three fuzz
#                targets every CI run). By hand: SUITES_ASAN="server tokenizer engine" (~7 more
#                minutes on 2 cores, past CI's 30-minute budget). Leaks are reported (LeakSanitizer).
#   build-tsan/  TSan: the engine and server modules, and threads_tests (tests/CMakeLists.txt: the
#                engine test, the HTTP server, stream and signal tests), with one OpenMP thread:
#                libgomp is not built with TSan, so its barriers would be reported as races (the
#                kernels' threading has its own thread-invariance tests).
# The other modules are compiled as in the Release build, uninstrumented (FP4SERVE_SANITIZE_EXCLUDE
# in CMakeLists.txt; instrumented, the kernels would make the engine tests take hours), so with
# ccache they come from the main build's cache. Test code gets ASan/TSan at -O0, modules -O1 -g1.
#   scripts/sanitize.sh                 both stages
#   SANITIZE=asan scripts/sanitize.sh   one stage (asan | tsan)
#   SUITES_ASAN="server checkpoint" SANITIZE=asan scripts/sanitize.sh
#   TSAN_FILTER='HttpServer.*' SANITIZE=tsan scripts/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SANITIZE=${SANITIZE:-asan tsan}
SUITES_ASAN=${SUITES_ASAN:-server}
TSAN_FILTER=${TSAN_FILTER:-*}
JOBS=$(nproc)

log() { printf '\033[1m[sanitize]\033[0m %s\n' "$*"; }
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# build DIR SANITIZERS EXCLUDED-MODULES TARGETS...
build() {
  local dir=$1 sanitizers=$2 exclude=$3
  shift 3
  if [ ! -f "$dir/build.ninja" ]; then
    log "configuring $dir (-fsanitize=$sanitizers; uninstrumented: $exclude)"
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP4SERVE_SANITIZE="$sanitizers" \
      -DFP4SERVE_SANITIZE_EXCLUDE="$exclude" -DFP4SERVE_CUDA=OFF -DFP4SERVE_BENCH=OFF "${launcher[@]}" >/dev/null
  fi
  log "building $* in $dir"
  ninja -C "$dir" -j "$JOBS" "$@"
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
      targets=()
      for suite in $SUITES_ASAN; do targets+=("${suite}_tests"); done
      build build-asan address,undefined "tensor;checkpoint;kernels;model" "${targets[@]}"
      log "ASan+UBSan: ${SUITES_ASAN}"
      # shellcheck disable=SC2086
      ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1} \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        ctest --test-dir build-asan --output-on-failure -j "$JOBS" -L sanitize -R "$(suites_regex $SUITES_ASAN)" || status=1
      ;;
    tsan)
      build build-tsan thread "tensor;checkpoint;tokenizer;kernels;model" threads_tests
      log "TSan: threads_tests ${TSAN_FILTER}"
      # halt_on_error: the first race fails the run; second_deadlock_stack: both stacks of a
      # lock-order inversion.
      TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} OMP_NUM_THREADS=1 GTEST_FILTER="$TSAN_FILTER" \
        ctest --test-dir build-tsan --output-on-failure -L sanitize -R '^threads_tests$' || status=1
      ;;
    *) echo "sanitize.sh: unknown stage '$stage' (asan | tsan)" >&2; exit 2 ;;
  esac
  log "$stage: $((SECONDS - start)) s"
done
exit $status
