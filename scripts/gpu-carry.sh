#!/usr/bin/env bash
# Prepares, on this (CI-like, Debian 12) machine, what scripts/gpu-check.sh needs on a GPU machine that
# lacks it: Debian's packages of the libraries the kernels-only build links (fmt, spdlog, GoogleTest,
# GoogleMock; about 3 MB), downloaded into the git-ignored .gpu-carry/debs. gpu-check.sh unpacks them
# into /tmp (never into /) when the GPU machine has no headers of its own for them.
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
du -sh .gpu-carry
