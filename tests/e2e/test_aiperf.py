"""NVIDIA's aiperf (the load tester the seeds' people use) against a real server, unmodified: a
bounded streaming chat profile at concurrency 4. It must finish without a request error, collect
the server's Prometheus metrics (it probes /metrics with HEAD first and silently turns them off
when that fails), and, told to trust the server's usage, count exactly the tokens the server's own
counters count."""
import json
import re
import subprocess
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
AIPERF = ROOT / ".venv-loadtest" / "bin" / "aiperf"
TOKENIZER_DIR = ROOT / ".cache" / "tokenizers" / "qwen3.5"
MODEL = "fp4serve-demo"
REQUESTS = 24
OUTPUT_TOKENS = 16


def counter_totals(url):
    """vLLM's token counters, summed over label sets, from the server's own /metrics."""
    text = requests.get(url + "/metrics", timeout=10).text
    totals = {}
    for name in ("vllm:prompt_tokens_total", "vllm:generation_tokens_total"):
        values = re.findall(rf"^{re.escape(name)}\{{[^}}]*\}} ([0-9.e+]+)$", text, flags=re.M)
        assert values, f"{name} missing from /metrics"
        totals[name] = sum(float(v) for v in values)
    return totals


@pytest.fixture(scope="module")
def aiperf_run(make_server, tmp_path_factory):
    if not AIPERF.exists():
        pytest.fail(f"{AIPERF} is missing: scripts/setup.sh makes .venv-loadtest from "
                    "tests/e2e/requirements-loadtest.txt")
    server = make_server("--max-num-seqs", "4")
    artifacts = tmp_path_factory.mktemp("aiperf")
    before = counter_totals(server.url)
    cmd = [str(AIPERF), "profile", "--model", MODEL, "--url", server.url, "--endpoint-type", "chat",
           "--streaming", "--request-count", str(REQUESTS), "--concurrency", "4",
           # A local tokenizer directory for the synthetic prompts (aiperf's offline mode only
           # knows hub cache names, so the run stays online-mode; nothing is downloaded).
           "--tokenizer", str(TOKENIZER_DIR),
           "--synthetic-input-tokens-mean", "64", "--synthetic-input-tokens-stddev", "0",
           "--output-tokens-mean", str(OUTPUT_TOKENS), "--output-tokens-stddev", "0",
           "--extra-inputs", "ignore_eos:true", "--use-server-token-count",
           "--output-artifact-dir", str(artifacts), "--ui-type", "none"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=artifacts)
    console = proc.stdout + proc.stderr
    (artifacts / "console.txt").write_text(console)
    assert proc.returncode == 0, console[-4000:]
    after = counter_totals(server.url)
    server_metrics = artifacts / "server_metrics_export.json"  # only written when /metrics answered
    return {
        "console": console,
        "summary": json.loads((artifacts / "profile_export_aiperf.json").read_text()),
        "server_metrics": json.loads(server_metrics.read_text()) if server_metrics.exists() else None,
        "records": [json.loads(line) for line in (artifacts / "profile_export.jsonl").read_text().splitlines() if line],
        "counters": {k: after[k] - before[k] for k in after},
        "url": server.url,
    }


def test_profile_completes_without_request_errors(aiperf_run):
    summary = aiperf_run["summary"]
    assert summary["request_count"]["avg"] == REQUESTS
    assert not summary.get("error_summary"), summary.get("error_summary")
    assert summary["was_cancelled"] is False
    assert len(aiperf_run["records"]) == REQUESTS
    assert all("error" not in r or r["error"] is None for r in aiperf_run["records"])
    assert summary["output_sequence_length"]["min"] == summary["output_sequence_length"]["max"] == OUTPUT_TOKENS


def test_server_metrics_are_collected_from_metrics_endpoint(aiperf_run):
    assert "Server metrics disabled" not in aiperf_run["console"]
    assert aiperf_run["server_metrics"] is not None, "aiperf wrote no server_metrics_export.json"
    info = aiperf_run["server_metrics"]["summary"]
    endpoint = aiperf_run["url"] + "/metrics"
    assert info["endpoints_successful"] == [endpoint]
    metrics = aiperf_run["server_metrics"]["metrics"]
    for name in ("vllm:prompt_tokens", "vllm:generation_tokens", "vllm:num_requests_running",
                 "vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"):
        assert name in metrics, f"{name} not collected"
    generated = sum(s["stats"]["total"] for s in metrics["vllm:generation_tokens"]["series"])
    assert generated == REQUESTS * OUTPUT_TOKENS


def test_token_counts_equal_the_servers(aiperf_run):
    summary, counters = aiperf_run["summary"], aiperf_run["counters"]
    # aiperf's totals come from the responses' usage; the server's from its engine counters.
    assert summary["total_usage_prompt_tokens"]["avg"] == counters["vllm:prompt_tokens_total"]
    assert summary["total_usage_completion_tokens"]["avg"] == counters["vllm:generation_tokens_total"]
    assert counters["vllm:generation_tokens_total"] == REQUESTS * OUTPUT_TOKENS
    # With --use-server-token-count, aiperf's ISL/OSL per request are the usage fields.
    for record in aiperf_run["records"]:
        m = record["metrics"]
        assert m["input_sequence_length"]["value"] == m["usage_prompt_tokens"]["value"]
        assert m["output_sequence_length"]["value"] == m["usage_completion_tokens"]["value"] == OUTPUT_TOKENS
