"""MTP speculative decoding on the trained canary model (its mtp.* block is trained to predict the
model's own next tokens: tools/reference/add_canary_mtp.py), in NVFP4, the release format whose MTP
layer stays BF16: with --speculative-config '{"method": "mtp", "num_speculative_tokens": 3}' the
canary still passes, the drafts are mostly accepted, vLLM's spec_decode counters are on /metrics
and the SpecDecoding line is in the stats log."""
import re
import subprocess
import time

import pytest
import requests


@pytest.fixture(scope="module")
def mtp_server(make_server, canary_model_dir):
    return make_server("--model", str(canary_model_dir("nvfp4")), "--reasoning-parser", "qwen3",
                       "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder",
                       "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}')


def counter(text, name, labels=""):
    m = re.search(r"^" + re.escape(name) + r"\{[^}]*" + re.escape(labels) + r"[^}]*\} ([0-9.e+]+)$", text, re.M)
    assert m, name + labels
    return float(m.group(1))


def test_canary_passes_with_mtp_and_drafts_are_accepted(mtp_server, fp4serve_binary):
    r = subprocess.run([str(fp4serve_binary), "canary", mtp_server.url, "--concurrency", "4"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr + mtp_server.read_log()[-3000:]
    text = requests.get(mtp_server.url + "/metrics", timeout=30).text
    drafts = counter(text, "vllm:spec_decode_num_drafts_total")
    drafted = counter(text, "vllm:spec_decode_num_draft_tokens_total")
    accepted = counter(text, "vllm:spec_decode_num_accepted_tokens_total")
    per_pos = [counter(text, "vllm:spec_decode_num_accepted_tokens_per_pos_total", f'position="{p}"')
               for p in range(3)]
    assert drafts > 0 and drafted <= 3 * drafts
    assert sum(per_pos) == accepted
    assert per_pos[0] >= per_pos[1] >= per_pos[2]
    # The block predicts the canary's answers (100% of its completion rows in bf16 by transformers);
    # the canary's questions are those answers, so most drafts hold.
    assert accepted >= 0.5 * drafted, (accepted, drafted)


def test_stats_log_has_the_spec_decoding_line(mtp_server):
    # After the canary's requests (the test above): the stats thread logs every second (conftest sets
    # VLLM_LOG_STATS_INTERVAL=1), the SpecDecoding line for each interval that verified drafts.
    assert "--speculative-config: method mtp, 3 draft tokens per step" in mtp_server.read_log()
    deadline = time.monotonic() + 10
    pattern = (r"SpecDecoding metrics: Mean acceptance length: [0-9.]+, Accepted throughput: [0-9.]+ tokens/s, "
               r"Drafted throughput: [0-9.]+ tokens/s, Accepted: [0-9]+ tokens, Drafted: [0-9]+ tokens, "
               r"Per-position acceptance rate: [0-9.]+, [0-9.]+, [0-9.]+, Avg Draft acceptance rate: [0-9.]+%")
    while not re.search(pattern, mtp_server.read_log()):
        assert time.monotonic() < deadline, mtp_server.read_log()[-3000:]
        time.sleep(0.2)
