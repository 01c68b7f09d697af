#!/usr/bin/env bash
# Bounded libFuzzer run of every fuzz target (fuzz/CMakeLists.txt), as scripts/test.sh calls it.
#   scripts/fuzz.sh                        each target for FUZZ_SECONDS (default 10) seconds
#   FUZZ_SECONDS=300 scripts/fuzz.sh
#   FUZZ_TARGETS="tokenizer_fuzz jinja_template_fuzz" scripts/fuzz.sh
# The default keeps all targets together near 1.2 minutes of fuzzing in CI (7 targets x 10 s: every
# committed seed and past finding is replayed, then mutated); CI's whole budget is 30 minutes on 2
# cores. Run one target longer by hand as fuzz/README.md shows.
# Builds with clang in build-fuzz/ (FUZZ_BUILD_DIR), only the fuzz targets. New interesting inputs go
# to fuzz/corpus-run/<corpus>/ (git-ignored); the committed seeds in fuzz/corpus/<corpus>/ are only
# read; fuzz/<corpus>.dict, if present, is the dictionary. A crashing input is saved under build-fuzz/fuzz-artifacts/ and the script exits non-zero.
# A target whose data (the real tokenizer, the chat template) is missing exits 77 and is reported as
# skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-10}
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
# target:corpus-folder
ALL_TARGETS=(safetensors_header_fuzz:safetensors http_request_fuzz:http_request openai_request_fuzz:openai
             jinja_template_fuzz:jinja chat_template_fuzz:chat_template tokenizer_fuzz:tokenizer
             image_decode_fuzz:image_decode)

log() { printf '\033[1m[fuzz]\033[0m %s\n' "$*"; }

if [ ! -f "$BUILD/build.ninja" ]; then
  log "configuring $BUILD with clang"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFP4SERVE_FUZZ=ON -DFP4SERVE_TESTS=OFF -DFP4SERVE_BENCH=OFF >/dev/null
fi

selected=()
for entry in "${ALL_TARGETS[@]}"; do
  target=${entry%%:*}
  if [ -z "${FUZZ_TARGETS:-}" ] || [[ " $FUZZ_TARGETS " == *" $target "* ]]; then selected+=("$entry"); fi
done
[ ${#selected[@]} -gt 0 ] || { echo "no fuzz target matches FUZZ_TARGETS=$FUZZ_TARGETS" >&2; exit 2; }

ninja -C "$BUILD" "${selected[@]%%:*}"

artifacts="$BUILD/fuzz-artifacts/"
mkdir -p "$artifacts"
status=0
for entry in "${selected[@]}"; do
  target=${entry%%:*}
  corpus=${entry#*:}
  run_dir="fuzz/corpus-run/$corpus"
  mkdir -p "$run_dir"
  dict=()
  [ -f "fuzz/$corpus.dict" ] && dict=(-dict="fuzz/$corpus.dict")
  log "$target for ${FUZZ_SECONDS}s (seeds fuzz/corpus/$corpus)"
  rc=0
  # -error_exitcode=1: libFuzzer's default for a finding is 77, the code a target uses to say its
  # data is missing; a crash must never read as "skipped".
  "$BUILD/fuzz/$target" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 \
    -artifact_prefix="$artifacts" -print_final_stats=1 "${dict[@]}" "$run_dir" "fuzz/corpus/$corpus" \
    >"$BUILD/$target.log" 2>&1 || rc=$?
  if [ $rc -eq 77 ] && grep -q SKIPPED "$BUILD/$target.log"; then
    grep SKIPPED "$BUILD/$target.log" || true
    log "$target: skipped"
  elif [ $rc -ne 0 ]; then
    tail -n 60 "$BUILD/$target.log"
    log "$target FAILED; crashing input in $artifacts (full log $BUILD/$target.log)"
    status=1
  else
    grep -E "^stat::number_of_executed_units|^Done " "$BUILD/$target.log" || true
    log "$target: no crash"
  fi
done
exit $status
