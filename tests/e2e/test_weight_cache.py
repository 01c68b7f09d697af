"""The CPU backend's packed-weight cache (kernels/cpu/packed_weight_cache.h) through `fp4serve
generate --batch`: the first start packs and writes it, a restart maps it and packs nothing with the
same tokens, a changed checkpoint makes it stale (refused, rebuilt), --no-weight-cache skips it."""
import os
from pathlib import Path
import shutil
import subprocess

import pytest

# Not imported from conftest: with tools/reference/tests in the same run, "conftest" names that one.
ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("FP4SERVE_BINARY", ROOT / "build" / "fp4serve"))
TOKENIZER_DIR = ROOT / ".cache" / "tokenizers" / "qwen3.5"

MODEL_DIR = ROOT / "tests" / "data" / "models" / "tiny-nvfp4"


def generate(model, batch, *flags):
    r = subprocess.run([str(BINARY), "generate", "--model", str(model), "--batch", str(batch), "-n", "6",
                        "--tokenizer", str(TOKENIZER_DIR), "--kv-cache-memory", "64MiB", *flags],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="2"))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout, r.stderr


def completions(stdout):
    return [l for l in stdout.splitlines() if "tok/s" not in l and "KV" not in l]


def test_weight_cache_written_then_mapped_then_rebuilt_when_stale(tmp_path):
    if not TOKENIZER_DIR.exists():
        pytest.skip("no tokenizer in .cache/tokenizers (scripts/setup.sh fetches it)")
    model = tmp_path / "model"
    # Without a weight cache another test may have left in the source folder (serving it in place).
    shutil.copytree(MODEL_DIR, model, ignore=shutil.ignore_patterns(".fp4serve-weights-*"))
    batch = tmp_path / "batch.txt"
    batch.write_text("ids: 1,2,3,4\nids: 5,6,7\n")
    out1, log1 = generate(model, batch)
    if "read in place" in log1:
        pytest.skip("this CPU's tier has no panel kernels: nothing is packed, nothing cached")
    files = list(model.glob(".fp4serve-weights-*.bin"))
    assert len(files) == 1 and "Weight cache: wrote" in log1, log1
    assert not list(model.glob("*.tmp.*"))

    out2, log2 = generate(model, batch)
    assert "mapped from the weight cache" in log2 and "nothing packed" in log2, log2
    assert completions(out2) == completions(out1)

    # Another checkpoint in the same place (a newer mtime): the file is stale, refused and rewritten.
    st = os.stat(model / "model.safetensors")
    os.utime(model / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    out3, log3 = generate(model, batch)
    assert "stale" in log3 and "Weight cache: wrote" in log3, log3
    assert completions(out3) == completions(out1)

    files[0].unlink()
    _, log4 = generate(model, batch, "--no-weight-cache")
    assert "Weight cache" not in log4 and not list(model.glob(".fp4serve-weights-*.bin")), log4
