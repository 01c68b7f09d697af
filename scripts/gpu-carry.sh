#!/usr/bin/env bash
# Prepares, on this (CI-like, Debian 12) machine, what scripts/gpu-check.sh needs on a GPU machine that
# lacks it, in the git-ignored .gpu-carry/:
#   debs/             Debian's packages of the libraries the kernels-only build links (fmt, spdlog,
#                     GoogleTest, GoogleMock; about 3 MB). gpu-check.sh unpacks them into /tmp (never
#                     into /) when the GPU machine has no headers of its own for them.
#   fp4serve.tar.xz   the whole program for the serving section and the e2e tests (issue 16, points 5
#                     and 6), which cannot be built there (no boost, curl, zmq, pcre2, image codec or
#                     xgrammar packages): built here with CUDA for sm_90a (GPU_CARRY_ARCH), Release, in
#                     build-carry/ (ccache), stripped, with the shared libraries it loads that a glibc +
#                     libstdc++ base lacks (ldd), a wrapper that points LD_LIBRARY_PATH at them, and the
#                     real tokenizer (the git-ignored .cache/tokenizers/qwen3.5). xz: ~20 MB.
#                     GPU_CARRY_FULL=0 skips it (the ops part of gpu-check.sh needs only the debs).
# The carry travels with the working tree, 64 MiB in all: the size is printed last.
# The device run then names the folder in `carry`:
#   scripts/gpu-carry.sh
#   device run: command "scripts/gpu-check.sh", carry [".gpu-carry"], timeout_s 540
set -euo pipefail
cd "$(dirname "$0")/.."
# The runtime libraries beside the -dev packages: the .so files the test binaries load (fmt and spdlog
# are shared libraries on Debian; GoogleTest's are static).
PKGS=(libfmt-dev libfmt9 libspdlog-dev libspdlog1.10 libgtest-dev libgmock-dev)
rm -rf .gpu-carry/debs
mkdir -p .gpu-carry/debs
if ! (cd .gpu-carry/debs && apt-get download "${PKGS[@]}" >/dev/null); then
  echo "gpu-carry: apt-get download failed; refreshing the package lists (apt-get update) and trying again" >&2
  apt-get update -qq
  (cd .gpu-carry/debs && apt-get download "${PKGS[@]}" >/dev/null)
fi
ls -l .gpu-carry/debs

if [ "${GPU_CARRY_FULL:-1}" != 0 ]; then
  BUILD=${GPU_CARRY_BUILD:-build-carry}
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP4SERVE_CUDA=ON \
    "-DFP4SERVE_CUDA_ARCHITECTURES=${GPU_CARRY_ARCH:-90a}" -DFP4SERVE_TESTS=OFF -DFP4SERVE_BENCH=OFF \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache > "$BUILD.configure.log" 2>&1 ||
    { cat "$BUILD.configure.log"; exit 1; }
  rm -f "$BUILD.configure.log"
  ninja -C "$BUILD" -j "${GPU_CARRY_JOBS:-2}" fp4serve
  python3 scripts/gpu_carry_pack.py --binary "$BUILD/fp4serve" --tokenizer .cache/tokenizers/qwen3.5 \
    --out .gpu-carry/fp4serve.tar.xz --check
fi
du -sh .gpu-carry
echo "the tracked tree and the carry travel together (64 MiB in all): $(($(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1) / 1048576)) MiB tracked + $(($(du -sb .gpu-carry | cut -f1) / 1048576)) MiB carried"
