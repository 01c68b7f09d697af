"""verify_tokenizer.py must accept the installed copies and refuse damaged ones."""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
VERIFY = os.path.join(ROOT, "tools", "reference", "verify_tokenizer.py")
CACHE = os.path.join(ROOT, ".cache", "tokenizers")
SHARED = os.path.join(os.environ.get("FP4SERVE_SHARED_DIR", os.path.join(ROOT, "..", "shared")), "data", "qwen-tokenizer")


def run(*args):
    return subprocess.run([sys.executable, VERIFY, *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def qwen35_dir():
    d = os.path.join(CACHE, "qwen3.5")
    if not os.path.exists(os.path.join(d, "tokenizer.json")):
        pytest.fail(f"{d} missing: run tools/reference/fetch_tokenizers.sh")
    return d


def test_installed_copies_pass(qwen35_dir):
    assert run("qwen3.5", qwen35_dir, SHARED).returncode == 0
    assert run("qwen3", os.path.join(CACHE, "qwen3")).returncode == 0


def test_wrong_vocab_id_is_refused(qwen35_dir, tmp_path):
    with open(os.path.join(qwen35_dir, "tokenizer.json"), encoding="utf-8") as f:
        doc = json.load(f)
    v = doc["model"]["vocab"]
    v["Ġderrota"], v["Ġseputar"] = v["Ġseputar"], v["Ġderrota"]
    with open(tmp_path / "tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    shutil.copy(os.path.join(qwen35_dir, "tokenizer_config.json"), tmp_path)
    r = run("qwen3.5", str(tmp_path), SHARED)
    assert r.returncode != 0
    assert "REFUSED" in r.stderr and "derrota" in r.stderr


def test_missing_files_are_refused(tmp_path):
    r = run("qwen3", str(tmp_path))
    assert r.returncode != 0 and "REFUSED" in r.stderr
