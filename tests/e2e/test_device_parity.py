"""The tiny models served on FP4SERVE_TEST_DEVICE (conftest.py: the CPU in CI, cuda in scripts/gpu-check.sh),
through the real server, against transformers' goldens and against themselves (issue 16, point 5):

  - goldens, every checkpoint format (tests/data/models/tiny-*, tools/reference): BF16's greedy
    continuations token for token, all 64 steps of every prompt (the prompts were chosen for wide
    margins); the quantized formats teacher-forced along transformers' continuation (the prompt
    logprobs of prompt + HF's tokens), where a step may pick another token only at an HF near-tie
    (top-2 margin <= 0.5) and 99% of the steps must agree: the rules of
    tests/unit/model/tiny_model_goldens_test.cpp, which runs the bare forward pass on the CPU;
  - the engine's invariance, greedy: every request's tokens alone == in a batch of 32 == with a prefix
    hit == after preemption (a KV cache too small for the 32, so the scheduler preempts and resumes).

Only requests and the fp4serve binary: the GPU machine has no openai package.
"""
import json
import random
import threading
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "data" / "models"
FORMATS = ("bf16", "fp8", "int4", "nvfp4")
TIE_MARGIN = 0.5      # an HF top-2 margin below which a quantized step may pick another token
MIN_AGREEMENT = 0.99  # fraction of teacher-forced quantized steps that must pick HF's token


@pytest.fixture(scope="module")
def tokenizer_args(tokenizer_dir):
    if not (tokenizer_dir / "tokenizer.json").exists():
        pytest.skip(f"no tokenizer in {tokenizer_dir} (scripts/setup.sh fetches it)")
    return ["--tokenizer", str(tokenizer_dir)]


def goldens(fmt):
    return json.loads((MODELS / f"tiny-{fmt}" / "goldens.json").read_text())


def model_id(server):
    return requests.get(server.url + "/v1/models", timeout=30).json()["data"][0]["id"]


def complete(server, prompt_ids, max_tokens, **extra):
    body = {"model": model_id(server), "prompt": prompt_ids, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "return_token_ids": True, **extra}
    r = requests.post(server.url + "/v1/completions", json=body, timeout=600)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def metric(server, name):
    total = 0.0
    for line in requests.get(server.url + "/metrics", timeout=30).text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture(scope="module", params=FORMATS)
def tiny_server(request, make_server, test_device, tokenizer_args):
    fmt = request.param
    server = make_server("--model", str(MODELS / f"tiny-{fmt}"), "--device", test_device, *tokenizer_args)
    server.format = fmt
    return server


def test_goldens(tiny_server):
    g = goldens(tiny_server.format)
    prompts = g["prompts"]
    same = total = 0
    for p, prompt in enumerate(prompts):
        expected = g["runs"]["bf16"][p]["greedy_tokens"]
        margins = g["runs"]["bf16"][p]["greedy_top2_margins"]
        if tiny_server.format == "bf16":
            ours = complete(tiny_server, prompt, len(expected))["token_ids"]
            assert ours == expected, f"prompt {p}: free-running greedy differs from transformers'"
            continue
        # Teacher-forced: the prompt logprobs of prompt + HF's tokens rank our argmax at every step.
        entries = complete(tiny_server, prompt + expected, 1, prompt_logprobs=1)["prompt_logprobs"]
        assert len(entries) == len(prompt) + len(expected)
        for i, want in enumerate(expected):
            entry = entries[len(prompt) + i]
            ours = int(next(k for k, v in entry.items() if v["rank"] == 1))
            total += 1
            if ours == want:
                same += 1
            else:
                assert margins[i] <= TIE_MARGIN, (f"prompt {p} step {i}: we pick {ours}, transformers {want} "
                                                  f"with a top-2 margin of {margins[i]}")
    if total:
        assert same / total >= MIN_AGREEMENT, f"{same}/{total} teacher-forced steps pick transformers' token"


# ---- invariance -------------------------------------------------------------------------------------

N_REQUESTS = 32
MAX_TOKENS = 24


def invariance_prompts():
    """32 prompts of tiny-model ids (vocabulary 512), 40..160 tokens, the first 48 shared by half of them."""
    rng = random.Random(16)
    shared = [rng.randrange(1, 500) for _ in range(48)]
    prompts = []
    for i in range(N_REQUESTS):
        own = [rng.randrange(1, 500) for _ in range(rng.randrange(40, 160))]
        prompts.append(shared + own[48:] if i % 2 and len(own) > 48 else own)
    return prompts


def run_concurrently(server, prompts):
    out = [None] * len(prompts)
    errors = []

    def one(i):
        try:
            out[i] = complete(server, prompts[i], MAX_TOKENS)["token_ids"]
        except Exception as e:  # reported below: an assert in a thread would be lost
            errors.append(f"request {i}: {e!r}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return out


@pytest.fixture(scope="module")
def alone(make_server, test_device, tokenizer_args):
    """Each prompt's greedy tokens alone on a fresh server (no prefix cache, so nothing is shared)."""
    server = make_server("--model", str(MODELS / "tiny-nvfp4"), "--device", test_device, "--no-enable-prefix-caching",
                         *tokenizer_args)
    return [complete(server, p, MAX_TOKENS)["token_ids"] for p in invariance_prompts()]


def test_a_batch_of_32_and_prefix_hits_give_the_tokens_of_each_request_alone(make_server, test_device,
                                                                              tokenizer_args, alone):
    server = make_server("--model", str(MODELS / "tiny-nvfp4"), "--device", test_device, "--enable-prefix-caching",
                         *tokenizer_args)
    prompts = invariance_prompts()
    assert run_concurrently(server, prompts) == alone
    hits = metric(server, "vllm:prefix_cache_hits_total")
    again = run_concurrently(server, prompts)  # every prompt is now cached (up to its last token)
    assert metric(server, "vllm:prefix_cache_hits_total") > hits, "the second round hit no cached prefix"
    assert again == alone


def test_preempted_requests_resume_with_the_tokens_of_each_request_alone(make_server, test_device, tokenizer_args,
                                                                         alone):
    # 128 blocks of 16 tokens: 2048 tokens for 32 requests of up to 184 (5,000 in all): the scheduler
    # must preempt running requests for their next blocks and resume them later.
    server = make_server("--model", str(MODELS / "tiny-nvfp4"), "--device", test_device, "--num-gpu-blocks-override",
                         "128", "--no-enable-prefix-caching", *tokenizer_args)
    assert run_concurrently(server, invariance_prompts()) == alone
    assert metric(server, "vllm:num_preemptions_total") > 0, "no request was preempted: the test proves nothing"
