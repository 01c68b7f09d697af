"""lm-evaluation-harness (PyPI, `local-completions`, no torch) against fp4serve serving the trained
canary model, fully offline, on the tasks in tests/data/lm_eval: a loglikelihood task
(multiple_choice) and a generate_until task over the chat prompts the model memorised.

lm-eval scores a continuation with echo + logprobs + max_tokens 1 on the token ids of context +
continuation, summing the continuation's token_logprobs. Its per-sample loglikelihoods
(--log_samples) must equal fp4serve's own: a direct /v1/completions request with echo, logprobs and
max_tokens 0 on the same ids, summed over the same tokens; its generations must equal fp4serve's
own greedy answers; and on this model both tasks score 1.0."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
CANARY_DIR = ROOT / "tests" / "data" / "models" / "canary"
TOKENIZER_DIR = ROOT / ".cache" / "tokenizers" / "qwen3.5"
CHAT_TEMPLATE = ROOT / "tests" / "data" / "chat_templates" / "qwen3.6.jinja"
TASK_DIR = ROOT / "tests" / "data" / "lm_eval"
NAME = "canary"


@pytest.fixture(scope="module")
def canary(make_server, tmp_path_factory):
    model = tmp_path_factory.mktemp("canary-lm-eval")
    with tarfile.open(CANARY_DIR / "canary-bf16.tar.xz") as tar:
        tar.extractall(model, filter="data")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER_DIR / name, model / name)
    shutil.copy(CHAT_TEMPLATE, model / "chat_template.jinja")
    server = make_server("--model", str(model), "--served-model-name", NAME)
    server.model_dir = model
    return server


@pytest.fixture(scope="module")
def lm_eval_run(canary, tmp_path_factory):
    """Runs lm-eval once; returns (results, {task: [samples]})."""
    out = tmp_path_factory.mktemp("lm-eval-out")
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_HOME=str(out / "hf-home"), OPENAI_API_KEY="unused", TOKENIZERS_PARALLELISM="false")
    model_args = ",".join([f"model={NAME}", f"base_url={canary.url}/v1/completions", "tokenizer_backend=huggingface",
                           f"tokenizer={canary.model_dir}", "tokenized_requests=True", "num_concurrent=1",
                           "max_retries=1", "timeout=300"])
    cmd = [sys.executable, "-m", "lm_eval", "--model", "local-completions", "--model_args", model_args,
           "--tasks", "fp4serve_canary_mc,fp4serve_canary_gen", "--include_path", str(TASK_DIR),
           "--output_path", str(out / "results"), "--log_samples", "--batch_size", "1"]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-5000:] + canary.read_log()[-3000:]
    results_files = glob.glob(str(out / "results" / "**" / "results_*.json"), recursive=True)
    assert len(results_files) == 1, (results_files, r.stderr[-3000:])
    results = json.loads(Path(results_files[0]).read_text())
    samples = {}
    for task in ("fp4serve_canary_mc", "fp4serve_canary_gen"):
        files = glob.glob(str(out / "results" / "**" / f"samples_{task}_*.jsonl"), recursive=True)
        assert len(files) == 1, files
        samples[task] = [json.loads(line) for line in Path(files[0]).read_text().splitlines() if line.strip()]
    return results, samples


def hf_tokenizer(canary):
    import transformers
    return transformers.AutoTokenizer.from_pretrained(str(canary.model_dir))


def encode_pair(tok, context, continuation):
    # lm-eval's TemplateLM._encode_pair: trailing whitespace of the context moves to the continuation;
    # the whole text is encoded and split after the context's tokens.
    n = len(context) - len(context.rstrip())
    if n:
        context, continuation = context[:-n], context[-n:] + continuation
    whole = tok(context + continuation, add_special_tokens=False).input_ids
    ctx = tok(context, add_special_tokens=False).input_ids
    return whole[:len(ctx)], whole[len(ctx):]


def own_loglikelihood(server, ids, ctxlen):
    r = requests.post(server.url + "/v1/completions", json={"model": NAME, "prompt": ids, "max_tokens": 0, "echo": True,
                                                            "logprobs": 0, "temperature": 0}, timeout=120)
    assert r.status_code == 200, r.text
    lps = r.json()["choices"][0]["logprobs"]["token_logprobs"]
    assert len(lps) == len(ids) and lps[0] is None
    return sum(lps[ctxlen:])


def test_loglikelihoods_equal_fp4serves_own_logprobs(canary, lm_eval_run):
    results, samples = lm_eval_run
    tok = hf_tokenizer(canary)
    mc = samples["fp4serve_canary_mc"]
    assert len(mc) == 3
    for sample in mc:
        args = sample["arguments"]
        assert len(args) == 3  # one loglikelihood request per choice
        for i, arg in enumerate(args.values()):
            ctx, cont = encode_pair(tok, arg["arg_0"], arg["arg_1"])
            # Both tokenizers agree on what lm-eval sent.
            fp4 = requests.post(canary.url + "/tokenize", json={"prompt": arg["arg_0"] + arg["arg_1"],
                                                                "add_special_tokens": False}, timeout=30).json()
            assert fp4["tokens"] == ctx + cont
            theirs = float(sample["filtered_resps"][i][0])
            ours = own_loglikelihood(canary, ctx + cont, len(ctx))
            assert abs(theirs - ours) <= 1e-5, (sample["doc_id"], i, theirs, ours)
    # The model was trained on the right answers.
    assert results["results"]["fp4serve_canary_mc"]["acc,none"] == 1.0


def test_generations_equal_fp4serves_greedy_answers(canary, lm_eval_run):
    results, samples = lm_eval_run
    tok = hf_tokenizer(canary)
    gen = samples["fp4serve_canary_gen"]
    assert len(gen) == 3
    for sample in gen:
        context = sample["arguments"]["gen_args_0"]["arg_0"]
        ids = tok(context, add_special_tokens=False).input_ids
        r = requests.post(canary.url + "/v1/completions", json={"model": NAME, "prompt": ids, "max_tokens": 32,
                                                                "temperature": 0, "stop": ["<|im_end|>"]}, timeout=120)
        assert r.status_code == 200, r.text
        assert sample["resps"][0][0] == r.json()["choices"][0]["text"]
        assert sample["resps"][0][0] == sample["target"]
    assert results["results"]["fp4serve_canary_gen"]["exact_match,none"] == 1.0
