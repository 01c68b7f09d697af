"""--device on the real server: auto runs on the CPU here and says why, cpu is what the engine process
uses too (the flag reaches it through the re-run command line), cuda without a GPU fails before
anything is loaded."""
import subprocess
import time

import pytest


def _gpu_visible(binary) -> bool:
    out = subprocess.run([str(binary), "doctor"], capture_output=True, text=True, timeout=60).stdout
    return "CUDA devices: none usable" not in out


def test_auto_serves_on_the_cpu_and_says_why(make_server, fp4serve_binary):
    if _gpu_visible(fp4serve_binary):
        pytest.skip("a CUDA device is visible: auto picks it")
    s = make_server("--device", "auto")
    log = s.read_log()
    assert "device: cpu (no CUDA device usable: " in log
    # The engine process (EngineCore) made the same choice from the same command line.
    assert any("EngineCore" in line and "device: cpu (no CUDA device usable: " in line for line in log.splitlines())


def test_cpu_reaches_the_engine_process(make_server):
    s = make_server("--device", "cpu")
    log = s.read_log()
    assert any("EngineCore" in line and "device: cpu (--device cpu)" in line for line in log.splitlines()), log


def test_cuda_without_a_gpu_fails_fast_with_the_reason(fp4serve_binary, tmp_path):
    if _gpu_visible(fp4serve_binary):
        pytest.skip("a CUDA device is visible")
    t0 = time.time()
    r = subprocess.run([str(fp4serve_binary), "serve", "--device", "cuda", "--port", "1"], capture_output=True,
                       text=True, timeout=60, env={"FP4SERVE_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert r.returncode != 0
    assert "--device cuda: no CUDA device usable: " in r.stderr + r.stdout
    assert time.time() - t0 < 20  # before the demo model is built or loaded
