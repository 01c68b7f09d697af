"""`fp4serve canary` against a real server. The demo model has random weights, so the canary must
FAIL on it: this is the proof that it does not pass garbage. test_canary_model.py serves the trained
canary model, on which it passes (and fails again under fault injection)."""
import subprocess


def test_canary_fails_on_a_random_weight_model_with_one_verdict_per_check(server, fp4serve_binary):
    r = subprocess.run([str(fp4serve_binary), "canary", server.url, "--concurrency", "2", "--max-tokens", "8",
                        "--thinking-max-tokens", "8"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [l for l in r.stdout.splitlines() if l.startswith(("PASS ", "FAIL "))]
    # 5 checks (3 text, 2 image) x (alone, in a batch) x (thinking off, on).
    assert len(lines) == 20, r.stdout
    assert any(l.startswith("FAIL capital-of-france (thinking off, alone)") for l in lines), r.stdout
    assert 'does not contain "Paris"' in r.stdout or "replacement character" in r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("canary: 20 checks,")
