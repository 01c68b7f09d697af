"""vLLM's CUDA-graph flags on the real server (issue 16 point 3): accepted, resolved as vLLM resolves
them, and logged once by the engine process; on the CPU, which has no graphs, the engine says every
step runs eagerly. Bad values stop serve with exit 1 and a message naming the flag, before any load."""
import subprocess

import pytest


def _engine_lines(log):
    return [line for line in log.splitlines() if "EngineCore" in line]


def test_enforce_eager_is_logged(make_server):
    log = make_server("--enforce-eager").read_log()
    assert any("Cudagraph is disabled under eager mode" in line for line in _engine_lines(log)), log


def test_optimization_level_compilation_config_and_max_size(make_server):
    # -O3's default mode (FULL_AND_PIECEWISE) gives way to the JSON's; the sizes are vLLM's up to 16.
    log = make_server("-O3", "--compilation-config", '{"cudagraph_mode":"FULL"}',
                      "--max-cudagraph-capture-size", "16").read_log()
    lines = _engine_lines(log)
    assert any("cudagraph_mode FULL: full graphs of pure-decode steps at 5 sizes (1 .. 16)" in line
               for line in lines), log
    # The CPU backend has no graphs: said once, and steps run eagerly.
    assert sum("has no graphs; every step runs eagerly" in line for line in lines) == 1, log


@pytest.mark.parametrize("args, message", [
    (["-O7"], "-O/--optimization-level"),
    (["--compilation-config", '{"cudagraph_mode":"SOMETIMES"}'], "cudagraph_mode \"SOMETIMES\" is not one of"),
    (["--compilation-config", "not json"], "--compilation-config 'not json' is not a JSON object"),
    (["--max-cudagraph-capture-size", "8", "--compilation-config", '{"max_cudagraph_capture_size":8}'],
     "mutually exclusive"),
])
def test_bad_values_exit_1_naming_the_flag(fp4serve_binary, tmp_path, args, message):
    r = subprocess.run([str(fp4serve_binary), "serve", "--device", "cpu", "--port", "1", *args], capture_output=True,
                       text=True, timeout=60, env={"FP4SERVE_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 1, r.stdout + r.stderr
    assert message in r.stderr + r.stdout
