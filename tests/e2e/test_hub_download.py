"""`fp4serve inspect ORG/NAME` against a fake Hugging Face Hub on loopback (fake_hub.py): the
download into the standard cache layout, resume after a cut connection and across runs, a corrupt
blob caught before it is moved into place, offline mode, the errors, and the cache read by
huggingface_hub and transformers afterwards (and the reverse: a cache huggingface_hub wrote, read by
fp4serve offline). The model is tests/data/models/tiny-nvfp4 plus the real tokenizer files."""
import os
import subprocess
from pathlib import Path

import pytest

# Not imported from conftest: with tools/reference/tests in the same run, "conftest" names that one.
ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("FP4SERVE_BINARY", ROOT / "build" / "fp4serve"))
TOKENIZER_DIR = ROOT / ".cache" / "tokenizers" / "qwen3.5"
from fake_hub import FakeHub, Repo

MODEL_DIR = ROOT / "tests" / "data" / "models" / "tiny-nvfp4"
WEIGHTS = "model.safetensors"


@pytest.fixture(scope="module")
def files():
    if not TOKENIZER_DIR.exists():
        pytest.skip("no tokenizer in .cache/tokenizers (scripts/setup.sh fetches it)")
    out = {}
    for d in (MODEL_DIR, TOKENIZER_DIR):
        for p in sorted(Path(d).iterdir()):
            if p.is_file() and not p.name.startswith(("goldens", ".")):
                out[p.name] = p.read_bytes()
    out["README.md"] = b"# tiny\n"
    out["pytorch_model.bin"] = b"not for serving"
    return out


def run(args, cache, endpoint, extra_env=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(HF_ENDPOINT=endpoint, HF_HUB_CACHE=str(cache), HOME=str(Path(cache).parent), **(extra_env or {}))
    r = subprocess.run([str(BINARY), *args], env=env, capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def repo_dir(cache, repo_id="org/tiny"):
    return Path(cache) / ("models--" + repo_id.replace("/", "--"))


def test_download_lays_out_the_cache_that_transformers_reads(tmp_path, files):
    cache = tmp_path / "hub"
    repo = Repo("org/tiny", files)
    with FakeHub(repo) as hub:
        rc, out = run(["inspect", "org/tiny"], cache, hub.url)
        assert rc == 0, out
        snap = repo_dir(cache) / "snapshots" / repo.commit
        assert f"model: {snap}" in out
        assert "downloaded" in out and "GB/s" in out
        assert (repo_dir(cache) / "refs" / "main").read_text() == repo.commit  # no newline, as huggingface_hub
        for name in ("config.json", WEIGHTS, "tokenizer.json", "tokenizer_config.json", "hf_quant_config.json"):
            link = snap / name
            assert link.is_symlink(), name
            etag = repo.sha256[name] if repo.is_lfs(name) else None
            target = os.readlink(link)
            assert target.startswith("../../blobs/"), target
            if etag:
                assert target == f"../../blobs/{etag}"
            assert link.read_bytes() == files[name]
        assert not (snap / "README.md").exists() and not (snap / "pytorch_model.bin").exists()
        assert not list((repo_dir(cache) / "blobs").glob("*.incomplete"))

        # A second start asks the hub for the revision only: every file is already linked.
        before = len(hub.downloads())
        rc, out = run(["inspect", "org/tiny"], cache, hub.url)
        assert rc == 0, out
        assert len(hub.downloads()) == before

    # huggingface_hub and transformers read the cache fp4serve wrote, offline.
    from huggingface_hub import scan_cache_dir, snapshot_download
    info = scan_cache_dir(cache)
    assert not info.warnings, info.warnings
    assert snapshot_download("org/tiny", cache_dir=cache, local_files_only=True) == str(snap)
    from transformers import AutoTokenizer, GenerationConfig
    tok = AutoTokenizer.from_pretrained("org/tiny", cache_dir=cache, local_files_only=True)
    assert tok.decode(tok("Hello, world")["input_ids"]) == "Hello, world"
    GenerationConfig.from_pretrained("org/tiny", cache_dir=cache, local_files_only=True)


def test_resume_after_a_cut_and_across_runs(tmp_path, files):
    repo = Repo("org/tiny", files)
    size = len(files[WEIGHTS])
    with FakeHub(repo) as hub:
        # Within a run: the connection is cut mid-file and a short body ends cleanly once; both are
        # retried from the bytes already written.
        hub.faults = {"cut_once": {WEIGHTS: size // 3}, "truncate_once": {"tokenizer.json": 1000}}
        cache = tmp_path / "a"
        rc, out = run(["inspect", "org/tiny"], cache, hub.url)
        assert rc == 0, out
        gets = hub.downloads(WEIGHTS)
        assert len(gets) == 2 and gets[0][1] is None, gets
        resumed_from = int(gets[1][1][len("bytes="):-1])
        assert 0 < resumed_from < size
        assert hub.downloads("tokenizer.json")[1][1] == "bytes=1000-"
        assert (repo_dir(cache) / "blobs" / repo.sha256[WEIGHTS]).read_bytes() == files[WEIGHTS]

        # Across runs: a .incomplete left by an interrupted run is continued, not restarted.
        cache = tmp_path / "b"
        blobs = repo_dir(cache) / "blobs"
        blobs.mkdir(parents=True)
        (blobs / (repo.sha256[WEIGHTS] + ".incomplete")).write_bytes(files[WEIGHTS][: size // 2])
        n = len(hub.downloads(WEIGHTS))
        rc, out = run(["inspect", "org/tiny"], cache, hub.url)
        assert rc == 0, out
        assert "resuming model.safetensors" in out
        assert hub.downloads(WEIGHTS)[n:] == [(f"/cdn/{repo.sha256[WEIGHTS]}", f"bytes={size // 2}-")]
        assert (blobs / repo.sha256[WEIGHTS]).read_bytes() == files[WEIGHTS]


def test_a_corrupt_blob_is_never_moved_into_place(tmp_path, files):
    repo = Repo("org/tiny", files)
    cache = tmp_path / "hub"
    with FakeHub(repo) as hub:
        hub.faults = {"corrupt": {WEIGHTS}}
        rc, out = run(["inspect", "org/tiny"], cache, hub.url)
        assert rc == 1, out
        assert "sha256" in out and "discarded" in out
        blobs = repo_dir(cache) / "blobs"
        assert not (blobs / repo.sha256[WEIGHTS]).exists()
        assert not (blobs / (repo.sha256[WEIGHTS] + ".incomplete")).exists()
        assert not (repo_dir(cache) / "snapshots" / repo.commit / WEIGHTS).exists()
        hub.faults = {}
        rc, out = run(["inspect", "org/tiny"], cache, hub.url)
        assert rc == 0, out


def test_offline_mode(tmp_path, files):
    repo = Repo("org/tiny", files)
    cache = tmp_path / "hub"
    with FakeHub(repo) as hub:
        rc, out = run(["inspect", "org/tiny"], cache, hub.url, {"HF_HUB_OFFLINE": "1"})
        assert rc == 1, out
        assert "HF_HUB_OFFLINE" in out and "models--org--tiny" in out
        assert not hub.requests
        assert run(["inspect", "org/tiny"], cache, hub.url)[0] == 0
        n = len(hub.requests)
        rc, out = run(["inspect", "org/tiny"], cache, hub.url, {"HF_HUB_OFFLINE": "1"})
        assert rc == 0, out
        assert len(hub.requests) == n  # nothing asked of the hub
        (repo_dir(cache) / "snapshots" / repo.commit / "config.json").unlink()
        rc, out = run(["inspect", "org/tiny"], cache, hub.url, {"HF_HUB_OFFLINE": "1"})
        assert rc == 1 and "lacks config.json" in out and "HF_HUB_OFFLINE" in out, out


def test_errors_say_what_to_do(tmp_path, files):
    repo = Repo("org/private", files, private=True)
    with FakeHub(repo, token="hf_right") as hub:
        rc, out = run(["inspect", "org/private"], tmp_path / "a", hub.url)
        assert rc == 1 and "gated or private" in out and "HF_TOKEN" in out, out
        assert str(tmp_path / ".cache" / "huggingface" / "token") in out  # where the token file is read
        rc, out = run(["inspect", "org/private"], tmp_path / "a", hub.url, {"HF_TOKEN": "hf_right"})
        assert rc == 0, out
        assert all(auth is None for _, path, _, auth in hub.requests if path.startswith("/cdn/"))  # not sent to the CDN

        rc, out = run(["inspect", "org/missing"], tmp_path / "b", hub.url)
        assert rc == 1 and "repository or revision not found" in out, out
        rc, out = run(["inspect", "org/private", "--revision", "v9"], tmp_path / "b", hub.url, {"HF_TOKEN": "hf_right"})
        assert rc == 1 and "revision not found" in out, out

        hub.faults = {"linked_size": {WEIGHTS: 10**15}}
        rc, out = run(["inspect", "org/private"], tmp_path / "c", hub.url, {"HF_TOKEN": "hf_right"})
        assert rc == 1 and "free on" in out and "--download-dir" in out, out

    # Nothing listens there any more: network down, nothing cached.
    rc, out = run(["inspect", "org/private"], tmp_path / "d", hub.url)
    assert rc == 1 and "could not be reached" in out and hub.url in out and "models--org--private" in out, out


def test_fp4serve_reads_what_huggingface_hub_downloaded(tmp_path, files):
    from huggingface_hub import snapshot_download
    repo = Repo("org/tiny", files)
    cache = tmp_path / "hub"
    with FakeHub(repo) as hub:
        path = snapshot_download("org/tiny", cache_dir=cache, endpoint=hub.url)
    rc, out = run(["inspect", "org/tiny"], cache, "http://127.0.0.1:9", {"HF_HUB_OFFLINE": "1"})
    assert rc == 0, out
    assert f"model: {path}" in out
