#!/usr/bin/env bash
# Builds xgrammar's C++ core (the grammar engine behind structured output, docs/ARCHITECTURE.md
# "Structured output") from its PyPI source package into .cache/deps/xgrammar-$VERSION/ (git-ignored):
# the sdist is downloaded from PyPI, checked against the pinned sha256, and built as a static
# library with the Python bindings off. Nothing of it is copied into the repository.
# Idempotent: an install whose stamp matches this script's version and hash is kept.
#   scripts/deps/xgrammar.sh            build if missing; prints the install prefix
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=0.2.9
SHA256=87b466bca2475e29bb0323abc62c6c33cbcbcff47e5fb800a3e2099ac9620b90
URL=https://files.pythonhosted.org/packages/3a/2f/5bf8e8fa6619cff534932f79b0abc81a417d354bc5093252c1a6081d0a93/xgrammar-$VERSION.tar.gz
DEPS=$PWD/.cache/deps
PREFIX=$DEPS/xgrammar-$VERSION
STAMP="$PREFIX/.stamp"
log() { printf '[deps/xgrammar] %s\n' "$*" >&2; }

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$VERSION $SHA256" ] && [ -f "$PREFIX/lib/libxgrammar.a" ]; then
  echo "$PREFIX"
  exit 0
fi

WORK=$DEPS/xgrammar-$VERSION.build
rm -rf "$WORK" "$PREFIX"
mkdir -p "$WORK"
log "downloading xgrammar $VERSION (PyPI sdist)"
curl -fsSL --retry 3 -o "$WORK/src.tar.gz" "$URL"
echo "$SHA256  $WORK/src.tar.gz" | sha256sum -c --status || { log "sha256 mismatch for $URL"; exit 1; }
tar -xzf "$WORK/src.tar.gz" -C "$WORK"
SRC=$WORK/xgrammar-$VERSION

# The sdist's cmake/config.cmake switches the Python bindings on unconditionally; a config.cmake in
# the build folder takes precedence (xgrammar's CMakeLists reads it first).
mkdir -p "$WORK/build"
cat > "$WORK/build/config.cmake" <<'CFG'
set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)
set(XGRAMMAR_BUILD_CXX_TESTS OFF)
set(XGRAMMAR_ENABLE_CPPTRACE OFF)
set(XGRAMMAR_ENABLE_INTERNAL_CHECK OFF)
set(XGRAMMAR_ENABLE_COVERAGE OFF)
CFG
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
log "building the C++ core (static, no Python bindings)"
# -fno-lto: its default -flto=auto would leave GIMPLE-only objects that every program linking the
# library would have to LTO-link; -O2 is plenty for the mask computation and builds faster.
cmake -S "$SRC" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="-fno-lto -O2" \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" "${LAUNCHER[@]}" > "$WORK/configure.log" 2>&1 \
  || { cat "$WORK/configure.log" >&2; exit 1; }
cmake --build "$WORK/build" -j "$(nproc)" >&2
cmake --install "$WORK/build" > /dev/null
cp "$SRC/LICENSE" "$PREFIX/LICENSE"
echo "$VERSION $SHA256" > "$STAMP"
rm -rf "$WORK"
log "installed in $PREFIX"
echo "$PREFIX"
