#!/usr/bin/env bash
# fp4serve side by side with llama.cpp on this machine and the same synthetic model, at llama-bench's
# shapes: pp512 (one 512-token prompt) and tg128 (128 single-token decode steps from an empty context).
# Run by hand, not in CI (it downloads a few GB and takes tens of minutes on a small machine):
#
#   bench/vs_llama_cpp.sh [--fp4serve PATH] [--layers N] [--threads T] [--reps R] [--seed S] [--with-bf16]
#
# Everything it installs or writes lives under .cache/llama.cpp/ (git-ignored) and is reused by the
# next run (delete a file there to redo that step):
#   1. llama.cpp: the llama-cpp-python sdist from PyPI (it vendors llama.cpp; PyPI is the only source
#      this project uses), llama-bench + llama-quantize built from it with CMake for this CPU
#      (Release, GGML_NATIVE=ON: AVX-512/BF16/VNNI where the CPU has them, static, -j$JOBS).
#   2. venv/: llama.cpp's conversion requirements (torch, transformers, gguf...) from PyPI; its
#      CPU-only torch index is not used, so torch comes with its CUDA runtime wheels (~5 GB).
#   3. models/: `fp4serve synth --preset qwen3.6-35b-a3b --layers N` in bf16 and nvfp4, same seed
#      (full widths: 256 experts, vocab 248,320; N decoder layers, default 4).
#   4. gguf/: the bf16 checkpoint converted with llama.cpp's convert_hf_to_gguf.py, then
#      llama-quantize MXFP4_MOE (experts MXFP4, every other matrix Q8_0); the nvfp4 checkpoint
#      converted directly (llama.cpp reads ModelOpt NVFP4: the very same expert/shared-expert/lm_head
#      bytes as GGML_TYPE_NVFP4; its FP8 attention/GDN projections become Q8_0 with --fp8-as-q8).
#   5. R repetitions (default 3) of: llama-bench -p 512 -n 128 -t T on each GGUF, and fp4serve on the
#      nvfp4 (and with --with-bf16 the bf16) checkpoint at the same shapes: `fp4serve bench model`
#      where this build has it, else `fp4serve generate` with token-id prompts (--ignore-eos).
#   6. bench/vs_llama_cpp_report.py prints one table: engine, format, pp512 and tg128 tok/s (best of
#      the R runs, median beside it: other work only slows runs down) and the fp4serve/llama.cpp ratios.
#
# The tokenizer for the GGUF comes from .cache/tokenizers/qwen3.5 (tools/reference/fetch_tokenizers.sh).
# Disk: about 30 GB under .cache/llama.cpp at 4 layers. Memory: the conversion needs ~4 GB.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

FP4SERVE=$ROOT/build/fp4serve
LAYERS=4
THREADS=2
REPS=3
SEED=0
WITH_BF16=0
JOBS=${JOBS:-2}
LLAMA_CPP_PYTHON_VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
CACHE=$ROOT/.cache/llama.cpp
TOKENIZER_DIR=$ROOT/.cache/tokenizers/qwen3.5

usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --fp4serve) FP4SERVE=$(readlink -f "$2"); shift 2 ;;
    --layers) LAYERS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --with-bf16) WITH_BF16=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "vs_llama_cpp.sh: unknown argument $1" >&2; usage 1 >&2 ;;
  esac
done

log() { printf '[vs_llama_cpp %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'vs_llama_cpp.sh: %s\n' "$*" >&2; exit 1; }

[ -x "$FP4SERVE" ] || die "$FP4SERVE not found: build fp4serve first (cmake --build build) or pass --fp4serve PATH"
[ -f "$TOKENIZER_DIR/tokenizer.json" ] || die "$TOKENIZER_DIR/tokenizer.json missing: run tools/reference/fetch_tokenizers.sh"
mkdir -p "$CACHE"

SDIST_DIR=$CACHE/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION
LLAMA_SRC=$SDIST_DIR/vendor/llama.cpp
LLAMA_BUILD=$CACHE/build
LLAMA_BENCH=$LLAMA_BUILD/bin/llama-bench
LLAMA_QUANTIZE=$LLAMA_BUILD/bin/llama-quantize
VENV=$CACHE/venv

# The llama.cpp commit the sdist vendors, from its CHANGELOG ("update llama.cpp to
# ggml-org/llama.cpp@<hash>" in the version's section: the vendored submodule's HEAD).
llama_cpp_commit() {
  awk -v v="## [$LLAMA_CPP_PYTHON_VERSION]" '$0 == v {on = 1; next} /^## \[/ {on = 0}
    on && match($0, /llama\.cpp@[0-9a-f]+/) {print substr($0, RSTART + 10, RLENGTH - 10); exit}' \
    "$SDIST_DIR/CHANGELOG.md"
}

# 1. llama.cpp -----------------------------------------------------------------------------------
# install_llama_cpp BUILD_DIR [EXTRA_CFLAGS]: llama-bench + llama-quantize in BUILD_DIR.
install_llama_cpp() {
  local build=$1 cflags=${2:-}
  local stamp=$build/.built-from want="$LLAMA_CPP_PYTHON_VERSION${cflags:+ $cflags}"
  if [ -x "$build/bin/llama-bench" ] && [ -x "$build/bin/llama-quantize" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    log "llama.cpp: reusing $build (llama-cpp-python $LLAMA_CPP_PYTHON_VERSION${cflags:+, $cflags})"
    return
  fi
  if [ ! -f "$LLAMA_SRC/CMakeLists.txt" ]; then
    log "llama.cpp: downloading the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist from PyPI"
    python3 -m pip download --quiet --no-binary :all: --no-deps -d "$CACHE" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
    tar -xzf "$CACHE/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz" -C "$CACHE"
  fi
  local commit start
  commit=$(llama_cpp_commit)
  start=$(date +%s)
  log "llama.cpp: building llama-bench + llama-quantize at ggml-org/llama.cpp@$commit${cflags:+ ($cflags)} (-j$JOBS; ~20-40 min on 2 cores)"
  # The sdist carries the submodule's git metadata (HEAD = the vendored commit), which CMake's build
  # info reads; GIT_CEILING_DIRECTORIES keeps git from walking up into fp4serve's own repository
  # (the tree sits inside its work tree) should that metadata be missing.
  GIT_CEILING_DIRECTORIES=$CACHE cmake -S "$LLAMA_SRC" -B "$build" -G Ninja -Wno-dev \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=ON -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_COMMIT="$commit" -DLLAMA_BUILD_NUMBER=0 \
    "-DCMAKE_C_FLAGS=$cflags" "-DCMAKE_CXX_FLAGS=$cflags" >/dev/null
  ninja -C "$build" -j"$JOBS" llama-bench llama-quantize
  echo "$want" >"$stamp"
  log "llama.cpp: built in $(( $(date +%s) - start )) s"
}

# On CPUs with AMX, GGML_NATIVE builds llama.cpp's AMX backend, which segfaults in
# ggml_backend_amx_mul_mat on some machines (ggml-org/llama.cpp#20824, closed stale without a fix;
# seen on the development machine, Intel Xeon with AMX, on both GGUFs). A short run tells; where it
# crashes the comparison uses llama.cpp built without AMX (GCC: explicit -mno-amx-* win over
# -march=native), and the report says so.
LLAMA_NOTE=""
choose_llama_build() {  # GGUF
  if "$LLAMA_BENCH" -m "$1" -p 16 -n 2 -t "$THREADS" -r 1 >/dev/null 2>"$CACHE/llama-smoke.log"; then
    return
  fi
  grep -qw amx_int8 /proc/cpuinfo || die "llama-bench fails on $1 (see $CACHE/llama-smoke.log)"
  log "llama.cpp: llama-bench crashed with its AMX backend (ggml-org/llama.cpp#20824); using a build without AMX"
  install_llama_cpp "$CACHE/build-noamx" "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  LLAMA_BENCH=$CACHE/build-noamx/bin/llama-bench
  "$LLAMA_BENCH" -m "$1" -p 16 -n 2 -t "$THREADS" -r 1 >/dev/null 2>"$CACHE/llama-smoke.log" ||
    die "llama-bench without AMX fails on $1 too (see $CACHE/llama-smoke.log)"
  LLAMA_NOTE="built without AMX: its AMX backend segfaults here (ggml-org/llama.cpp#20824)"
}

# 2. conversion venv -----------------------------------------------------------------------------
install_venv() {
  local req=$CACHE/requirements-convert.txt
  # PyPI only: drop the requirement file's extra index (download.pytorch.org), make -r paths absolute.
  grep -v -- '--extra-index-url' "$LLAMA_SRC/requirements/requirements-convert_hf_to_gguf.txt" |
    sed "s#^-r \./#-r $LLAMA_SRC/requirements/#" >"$req"
  local want
  want=$(cat "$req" "$LLAMA_SRC"/requirements/requirements-convert_legacy_llama.txt | sha256sum | cut -d' ' -f1)
  if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" = "$want" ]; then
    log "venv: reusing $VENV"
    return
  fi
  log "venv: installing llama.cpp's conversion requirements into $VENV (torch from PyPI: several GB)"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet -r "$req"
  echo "$want" >"$VENV/.requirements.sha256"
}

# 3. synthetic checkpoints -----------------------------------------------------------------------
MODEL_TAG=q36-${LAYERS}l-s$SEED
synth_model() {  # FORMAT -> prints the checkpoint dir
  local fmt=$1 dir=$CACHE/models/$MODEL_TAG-$1
  if [ ! -f "$dir/.complete" ]; then
    log "synth: $fmt, $LAYERS layers, seed $SEED -> $dir"
    mkdir -p "$CACHE/models"
    # --no-mtp: the comparison runs the trunk alone (no speculative decoding on either side).
    "$FP4SERVE" synth --preset qwen3.6-35b-a3b --layers "$LAYERS" --format "$fmt" --seed "$SEED" --force \
      --no-progress --no-mtp "$dir" >&2
    touch "$dir/.complete"
  fi
  echo "$dir"
}

# 4. GGUF ----------------------------------------------------------------------------------------
# convert_hf_to_gguf.py reads a directory: a copy of the checkpoint's small files, links to its
# safetensors, and the real Qwen3.5/3.6 tokenizer (synth writes none; the GGUF needs a vocabulary).
conversion_input() {  # CHECKPOINT_DIR -> prints the input dir
  local ck=$1 in
  in=$CACHE/hf-input/$(basename "$1")
  rm -rf "$in"
  mkdir -p "$in"
  local f
  for f in "$ck"/*; do
    case "$f" in
      *.safetensors) ln -s "$f" "$in/" ;;
      *) cp "$f" "$in/" ;;
    esac
  done
  cp "$TOKENIZER_DIR/tokenizer.json" "$TOKENIZER_DIR/tokenizer_config.json" "$in/"
  echo "$in"
}

# --no-mtp: the config says mtp_num_hidden_layers = 1 (as the release's does) but the checkpoint is
# synthesized with --no-mtp (no mtp.* tensors); without it the GGUF would declare a nextn (MTP) block
# it has no tensors for (llama-bench skips MTP tensors, anything that loads them would fail).
convert_to_gguf() {  # CHECKPOINT_DIR OUT.gguf [extra convert args...]
  local ck=$1 out=$2
  shift 2
  [ -f "$out" ] && return
  local in
  in=$(conversion_input "$ck")
  log "convert: $(basename "$ck") -> $out"
  mkdir -p "$(dirname "$out")"
  "$VENV/bin/python" "$LLAMA_SRC/convert_hf_to_gguf.py" "$in" --no-mtp --outfile "$out.part" "$@" \
    >"$out.convert.log" 2>&1 || die "convert_hf_to_gguf.py failed on $ck: see $out.convert.log"
  mv "$out.part" "$out"
  rm -rf "$in"
}

quantize_gguf() {  # IN.gguf OUT.gguf TYPE
  [ -f "$2" ] && return
  log "llama-quantize $3: $1 -> $2"
  "$LLAMA_QUANTIZE" "$1" "$2.part" "$3" "$THREADS" >"$2.quantize.log" 2>&1 ||
    die "llama-quantize $3 failed: see $2.quantize.log"
  mv "$2.part" "$2"
}

# Which ggml type each GGUF's tensors have (the "GGUF types used" of the report); cached beside it,
# as reading a multi-GB GGUF's index takes a while.
gguf_types() {  # FILE.gguf
  if [ ! -s "$1.types" ]; then
    PYTHONPATH=$LLAMA_SRC/gguf-py "$VENV/bin/python" - "$1" >"$1.types.part" <<'PY' || die "gguf-py cannot read $1"
import collections, re, sys
from gguf import GGUFReader
r = GGUFReader(sys.argv[1])
by_type = collections.defaultdict(list)
for t in r.tensors:
    by_type[t.tensor_type.name].append(t.name)
def kinds(names):  # "blk.3.ffn_up_exps.weight" -> "ffn_up_exps"
    return ", ".join(sorted({re.sub(r"\.(weight|bias)$", "", re.sub(r"^blk\.\d+\.", "", n)) for n in names}))
for ty, names in sorted(by_type.items()):
    print(f"    {ty:6} {len(names):3} tensors: {kinds(names)}")
PY
    mv "$1.types.part" "$1.types"
  fi
  cat "$1.types"
}

# 5. runs ----------------------------------------------------------------------------------------
# One repetition of every engine/format, then the next: load from other work drifts, and this way it
# drifts over both engines alike rather than over one engine's runs.
run_llama_bench() {  # LABEL FILE.gguf REP
  local out=$RESULTS/llama.cpp-$1-$3
  log "llama-bench $1 (run $3/$REPS): -p 512 -n 128 -t $THREADS"
  "$LLAMA_BENCH" -m "$2" -p 512 -n 128 -t "$THREADS" -r 1 -o json >"$out.json" 2>"$out.log" ||
    die "llama-bench failed on $2: see $out.log"
}

# Token ids below 151,643 (plain BPE tokens of both Qwen vocabularies), fixed seed.
prompt_ids() { python3 -c "import random; r = random.Random($1); print(','.join(str(r.randrange(1, 151643)) for _ in range($2)))"; }

# CLI11 answers `bench model --help` with bench's help (exit 0) where there is no `model`: read the list.
has_bench_model() { "$FP4SERVE" bench --help 2>/dev/null | grep -qE '^ +model +'; }

describe_fp4serve_method() {  # FORMAT
  if has_bench_model; then
    echo "fp4serve $1: fp4serve bench model --prompt-len 512 --batch 1 --decode-steps 128 --decode-prompt-len 1"
  else
    echo "fp4serve $1: fp4serve generate (no 'bench model' in this build; pp: 512-id prompt, -n 1; tg: 1-id prompt, -n 129 --ignore-eos)"
  fi
}

run_fp4serve() {  # FORMAT CHECKPOINT_DIR REP
  local fmt=$1 ck=$2 r=$3 out=$RESULTS/fp4serve-$1
  log "fp4serve $fmt (run $r/$REPS): pp512, tg128, $THREADS threads"
  if has_bench_model; then
    "$FP4SERVE" bench model -m "$ck" --prompt-len 512 --batch 1 --decode-steps 128 --decode-prompt-len 1 \
      --threads "$THREADS" --json "$out-bench-$r.json" >"$out-bench-$r.log" 2>&1 ||
      die "fp4serve bench model failed: see $out-bench-$r.log"
  else
    "$FP4SERVE" generate -m "$ck" --prompt-ids "$(prompt_ids 512 512)" -n 1 --ignore-eos --threads "$THREADS" \
      >"$out-pp-$r.log" 2>&1 || die "fp4serve generate failed: see $out-pp-$r.log"
    # 129 generated tokens = the prefill's token + 128 decode steps (tg128).
    "$FP4SERVE" generate -m "$ck" --prompt-ids "$(prompt_ids 1 1)" -n 129 --ignore-eos --threads "$THREADS" \
      >"$out-tg-$r.log" 2>&1 || die "fp4serve generate failed: see $out-tg-$r.log"
  fi
}

# The whole run is one function, read in full before it starts: editing this file while it runs
# cannot derail it.
main() {
  install_llama_cpp "$LLAMA_BUILD"
  install_venv
  BF16_CK=$(synth_model bf16)
  NVFP4_CK=$(synth_model nvfp4)
  GGUF=$CACHE/gguf
  convert_to_gguf "$BF16_CK" "$GGUF/$MODEL_TAG-bf16.gguf" --outtype bf16
  quantize_gguf "$GGUF/$MODEL_TAG-bf16.gguf" "$GGUF/$MODEL_TAG-mxfp4_moe.gguf" MXFP4_MOE
  convert_to_gguf "$NVFP4_CK" "$GGUF/$MODEL_TAG-nvfp4.gguf" --fp8-as-q8
  choose_llama_build "$GGUF/$MODEL_TAG-nvfp4.gguf"

  RESULTS=$CACHE/results/$(date +%Y%m%d-%H%M%S)
  mkdir -p "$RESULTS"
  if awk -v n="$(nproc)" '{exit !($1 > n / 2)}' /proc/loadavg; then
    log "warning: load average $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores: other work will distort the figures"
  fi
  {
    echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "llama.cpp: ggml-org/llama.cpp@$(llama_cpp_commit) (llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist), CPU, GGML_NATIVE${LLAMA_NOTE:+; $LLAMA_NOTE}"
    echo "fp4serve: $FP4SERVE ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'))"
    echo "model: fp4serve synth qwen3.6-35b-a3b, $LAYERS layers, seed $SEED; $THREADS threads; best (median) of $REPS runs"
    for f in nvfp4 mxfp4_moe $([ "$WITH_BF16" = 1 ] && echo bf16); do
      echo "  GGUF $MODEL_TAG-$f.gguf:"
      gguf_types "$GGUF/$MODEL_TAG-$f.gguf"
    done
    describe_fp4serve_method nvfp4
    [ "$WITH_BF16" = 1 ] && describe_fp4serve_method bf16
    echo "llama.cpp: llama-bench -p 512 -n 128 -t $THREADS -r 1, once per repetition"
  } >"$RESULTS/header.txt"

  local r
  for r in $(seq 1 "$REPS"); do
    run_llama_bench NVFP4 "$GGUF/$MODEL_TAG-nvfp4.gguf" "$r"
    run_llama_bench MXFP4_MOE "$GGUF/$MODEL_TAG-mxfp4_moe.gguf" "$r"
    run_fp4serve nvfp4 "$NVFP4_CK" "$r"
    if [ "$WITH_BF16" = 1 ]; then
      run_llama_bench BF16 "$GGUF/$MODEL_TAG-bf16.gguf" "$r"
      run_fp4serve bf16 "$BF16_CK" "$r"
    fi
  done
  echo "load after the runs: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESULTS/header.txt"

  cat "$RESULTS/header.txt"
  python3 "$ROOT/bench/vs_llama_cpp_report.py" "$RESULTS" | tee "$RESULTS/table.txt"
  log "raw results: $RESULTS"
}

main
exit
